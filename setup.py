"""Build hook: the wheel carries the course itself (issue 29).

pyproject.toml holds the metadata; this file only adds the lessons' sources (notebooks/NN_*.md) and the
glossary (book/glossary.md) to the built package as normlab/_course/, where normlab.course finds them
(`normlab-course init DIR` turns them into a learner's notebooks). An editable install (run.py's) reads
them from the checkout instead, so nothing is copied there.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
COURSE_FILES = ["notebooks/[0-9][0-9]_*.md", "book/glossary.md"]


class build_py_with_course(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        bundle = Path(self.build_lib) / "normlab" / "_course"
        if bundle.exists():
            shutil.rmtree(bundle)
        found = [p for pattern in COURSE_FILES for p in sorted(HERE.glob(pattern))]
        if not any(p.parent.name == "notebooks" for p in found):
            raise SystemExit("setup.py: no notebooks/NN_*.md to put into the wheel")
        for p in found:
            target = bundle / p.relative_to(HERE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)


setup(cmdclass={"build_py": build_py_with_course})
