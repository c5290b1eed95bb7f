"""Build the static book and the lecture slides from the executed notebooks, offline.

    python tools/book.py book      # -> build/book/html/index.html (the learners' book: tools/learner_book.py)
    python tools/book.py book --teacher   # -> build/book_teacher/html/ (the same book + the instructor guide)
    python tools/book.py slides    # -> build/slides/NN_name.slides.html (reveal.js, vendored)
    python tools/book.py execute   # only execute what changed into build/executed/

Both use build/executed/ (tools/execution.py): a notebook is executed (two at a time) only when its
source or normlab changed since its last execution, and a test run (`python3 run.py test`) leaves
every notebook executed under the same key (tools/nbval_book.py), so a build after it executes
nothing. Run with the .venv's Python (run.py does: `python3 run.py book`, `python3 run.py slides`).

The jobs live in their own files: tools/execution.py (executing, the cache key), tools/static_outputs.py
(widget and progress-bar outputs made static), tools/page_weight.py (what a reader loads),
tools/slide_model.py (the slides' text-height model), tools/slide_layout.py (the splitting rules),
tools/slide_style.py (the slides' CSS) and tools/slides.py (the decks). This file stages and builds the book.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebooks as nbtools  # noqa: E402
from execution import execute_all, executed_path, has_answers  # noqa: E402
from learner_book import LOCK_JS, learners_notebook, lock_experiments  # noqa: E402
from page_weight import report_weight  # noqa: E402
from slides import build_slides  # noqa: E402
from static_outputs import static_widgets  # noqa: E402

ROOT = nbtools.ROOT
BOOK_SRC = ROOT / "build" / "book_src"
BOOK_OUT = ROOT / "build" / "book"
VENDOR = ROOT / "book" / "vendor"


THEME_JS = 'if (!document.documentElement.dataset.mode) { document.documentElement.dataset.mode = "light"; }\n'


# Pages of the book that are not notebooks, after the lessons: the glossary and the evidence tables (each
# lesson's table folded until after the lesson: it states the conclusions). The instructor guide holds
# every answer (the 先想一想 answers, the exercises' mistakes) and the guide suggests handing the book to
# students: it is only in the teacher build (``book --teacher``, its own folder), never in the learners' book.
EXTRA_PAGES = ("glossary.md", "evidence.md")
TEACHER_PAGES = ("instructor.md",)
TEACHER_OUT = ROOT / "build" / "book_teacher"
TEACHER_SRC = ROOT / "build" / "book_teacher_src"


def book_pages(teacher: bool = False) -> tuple[str, ...]:
    """The book's pages after the lessons: the learners' book has the glossary and the evidence tables."""
    return EXTRA_PAGES + (TEACHER_PAGES if teacher else ())


def stage_book(teacher: bool = False) -> Path:
    """Assemble build/book_src (build/book_teacher_src with ``teacher``): config, intro, toc, executed
    notebooks, their sources, MathJax; the teacher build adds the instructor guide (book_pages).

    MathJax 3 (vendored in book/vendor/mathjax) goes to _extra/, not _static/: Jupyter Book 1
    would inject every .js file under _static/ into every page."""
    notebooks = executed_notebooks(teacher)
    staged = TEACHER_SRC if teacher else BOOK_SRC
    if staged.exists():
        shutil.rmtree(staged)
    (staged / "notebooks").mkdir(parents=True)
    (staged / "nb_sources").mkdir()
    (staged / "_static").mkdir()
    for name in ("_config.yml", "intro.md", "favicon.png", *book_pages(teacher)):
        shutil.copy(ROOT / "book" / name, staged / name)
    shutil.copytree(VENDOR / "mathjax", staged / "_extra" / "mathjax")
    # The theme logs a console error when no light/dark mode was ever chosen: default to light.
    (staged / "_static" / "normlab.js").write_text(THEME_JS + ("" if teacher else LOCK_JS), encoding="utf-8")
    shutil.copy(ROOT / "book" / "normlab.css", staged / "_static" / "normlab.css")   # wide tables wrap
    chapters = []
    for path, nb in notebooks:
        nb = nbtools.without_teacher_notes(nb)   # notes are for the slides only
        static_widgets(nb)
        src_name = path.stem + ".md"
        if teacher:
            shutil.copy(ROOT / "notebooks" / src_name, staged / "nb_sources" / src_name)
        else:       # the source as learners get it: no answer, no speaker note
            (staged / "nb_sources" / src_name).write_text(learner_source(path), encoding="utf-8")
        what = "本页源文件 (source)" if teacher else "本页源文件的学习版 (the learner version of the source)"
        link = nbformat.v4.new_markdown_cell(
            f"{what}：{{download}}`notebooks/{src_name} <../nb_sources/{src_name}>`"
            f" · 在本地运行：`python3 run.py course`")
        nb.cells.insert(1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0, link)
        nbformat.write(nb, staged / "notebooks" / (path.stem + ".ipynb"))
        chapters.append(f"  - file: notebooks/{path.stem}")
    chapters += [f"  - file: {Path(name).stem}" for name in book_pages(teacher)]
    toc = "# generated by tools/book.py from notebooks/ in course order\nformat: jb-book\nroot: intro\nchapters:\n"
    (staged / "_toc.yml").write_text(toc + "\n".join(chapters) + "\n", encoding="utf-8")
    write_sphinx_conf(staged)
    return staged


def learner_source(src: Path) -> str:
    """notebooks/NAME.md as a learner's copy has it (MyST markdown): the learner version of a lesson
    with answers, and no speaker notes (they hold answers too)."""
    import jupytext

    nb = jupytext.read(src)
    if nbtools.has_solutions(nb):
        nb = nbtools.versions(nb, learner=True)
    return jupytext.writes(nbtools.without_teacher_notes(nb), fmt="md:myst")


def executed_notebooks(teacher: bool) -> list[tuple[Path, object]]:
    """(the source, the notebook the book shows) in course order. The teachers' book: the solution
    executions. The learners' book: a lesson with answers as its learner execution (learner_book.py:
    no solution, the check's output as the learner sees it), every lesson's experiments locked until a guess."""
    sources = nbtools.sources()
    if teacher:
        return [(src, nbformat.read(path, 4)) for src, path in zip(sources, execute_all())]
    answered = [s for s in sources if has_answers(s)]
    learner = {src: nbformat.read(path, 4) for src, path in zip(answered, execute_all(srcs=answered, learner=True))}
    # the solution executions: for the lessons without answers, and where nbval made the learner's (live outputs)
    wanted = [s for s in sources if s not in learner or learner[s].metadata.get("normlab_executed_by") == "nbval"]
    solution = {src: nbformat.read(path, 4) for src, path in zip(wanted, execute_all(srcs=wanted) if wanted else [])}
    out = []
    for src in sources:
        if src in learner:
            nb = learners_notebook(learner[src], solution.get(src))
        else:
            nb = solution[src]
            lock_experiments(nb)
        out.append((src, nb))
    return out


def write_sphinx_conf(src: Path) -> None:
    """Let Jupyter Book translate _config.yml into conf.py, then drop what needs the network:
    sphinx-thebe (loads thebe from a CDN and, in JB 1.0.4, declares THEBE_JS_URL twice)."""
    jb = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([str(jb), "config", "sphinx", str(src)], check=True, stdout=subprocess.DEVNULL)
    conf = (src / "conf.py").read_text(encoding="utf-8")
    conf = conf.replace("'sphinx_thebe', ", "").replace("'sphinx_comments', ", "")
    conf += "\nhtml_extra_path = ['_extra']\nmathjax_path = '../mathjax/tex-mml-chtml.js'\n"
    (src / "conf.py").write_text(conf, encoding="utf-8")


def sphinx_build(src: Path, out: Path) -> int:
    """Sphinx with every warning an error (-W) and nitpicky references (-n): a broken internal
    link, a missing image or a bad cross-reference fails the build. Returns the exit code."""
    return subprocess.call([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-n", "--keep-going", "-q",
                            str(src), str(out)], cwd=ROOT)


def build_book(teacher: bool = False) -> Path:
    src = stage_book(teacher)
    t0 = time.time()
    html = (TEACHER_OUT if teacher else BOOK_OUT) / "html"
    if html.exists():
        shutil.rmtree(html)
    code = sphinx_build(src, html)
    if code != 0:
        raise SystemExit(f"[normlab] the book build failed (exit {code}): see the warnings above")
    index = html / "index.html"
    print(f"[normlab] book built in {time.time() - t0:.0f} s -> {index.relative_to(ROOT)}")
    report_weight(html)
    return index


def main(argv: list[str]) -> int:
    from normlab.console import console_safe   # ✓/✗ and the like readable on any console (a GBK one too)

    console_safe()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["book", "slides", "execute"])
    ap.add_argument("--teacher", action="store_true",
                    help="book: the teachers' build (the book and the instructor guide) in build/book_teacher/html/")
    ap.add_argument("--only", nargs="*", help="slides: only the decks whose names start so (06, 06_placement)")
    args = ap.parse_args(argv)
    if args.what == "book":
        build_book(args.teacher)
    elif args.what == "slides":
        build_slides(args.only)
    else:
        execute_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
