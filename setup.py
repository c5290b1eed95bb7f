"""Build hook: the wheel carries the course itself (issue 29), as learners get it (issue 36).

pyproject.toml holds the metadata; this file only adds the lessons' sources (notebooks/NN_*.md) and the
glossary (book/glossary.md) to the built package as normlab/_course/, where normlab.course finds them
(`normlab-course init DIR` turns them into a learner's notebooks). Each lesson goes in WITHOUT its
answers and teacher notes (normlab/course/answer_key.py: the markers stay, so the learner copies are the same),
and the bundle says so (LEARNER-COPIES-ONLY.txt): a learner on a class server cannot run
`normlab-course init ~/x --solutions`; a teacher's solutions come from the repository (`--from`).
An editable install (run.py's) reads the checkout instead, so nothing is copied there.
"""

import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
COURSE_FILES = ["notebooks/[0-9][0-9]_*.md", "book/glossary.md"]


def load_answer_key():
    """normlab/course/answer_key.py on its own (standard library only: the build need not import normlab)."""
    spec = importlib.util.spec_from_file_location("normlab_answer_key", HERE / "normlab" / "course" / "answer_key.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        answer_key = load_answer_key()
        for p in found:
            target = bundle / p.relative_to(HERE)
            target.parent.mkdir(parents=True, exist_ok=True)
            if p.parent.name == "notebooks":
                text = answer_key.learner_source(p.read_text(encoding="utf-8"))
                target.write_bytes(text.encode("utf-8"))
            else:
                shutil.copyfile(p, target)
        (bundle / answer_key.LEARNER_ONLY).write_bytes(answer_key.LEARNER_ONLY_TEXT.encode("utf-8"))


setup(cmdclass={"build_py": build_py_with_course})
