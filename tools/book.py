"""Build the static book and the lecture slides from the executed notebooks, offline.

    python tools/book.py book      # -> build/book/html/index.html
    python tools/book.py slides    # -> build/slides/NN_name.slides.html (reveal.js, vendored)

Both first execute the notebooks (two at a time) into build/executed/, skipping any whose
source and normlab code are unchanged since the last execution. Run with the .venv's Python
(run.py does: `python3 run.py book`, `python3 run.py slides`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebooks as nbtools  # noqa: E402

ROOT = nbtools.ROOT
BUILD = ROOT / "build"
EXECUTED = BUILD / "executed"
BOOK_SRC = BUILD / "book_src"
BOOK_OUT = BUILD / "book"
SLIDES_OUT = BUILD / "slides"
VENDOR = ROOT / "book" / "vendor"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# The course's widgets (normlab.widgets.web_host) show their browser front-end over a precomputed grid
# when NORMLAB_STATIC=1 is set for the kernels (text/html, which myst-nb and nbconvert both prefer to
# the image/png beside it). A plain ipywidgets output left over (e.g. an interact()) becomes this note.
WIDGET_NOTE = ('<div class="normlab-widget-note">交互控件 (widget)：在 JupyterLab 中运行本 notebook '
               '即可拖动操作（<code>python3 run.py course</code>）；网页版请看同一节的静态图。</div>')


# The kernels that execute the notebooks must draw figures as PNG outputs. A caller's MPLBACKEND
# (run.py test sets Agg for pytest) would reach the kernels and make plt.show() draw nothing, so the
# book and the slides would have no figures: the executors always get the inline backend.
KERNEL_BACKEND = "module://matplotlib_inline.backend_inline"
EXEC_VERSION = "static-widgets-1"   # part of the hash: executions made under another setup are redone


def hashed_files() -> list[Path]:
    """What an execution depends on besides the notebook: normlab's code, its data (records, the
    gradient-flow grid, the companion's TOML) and the widgets' front-ends (their ES modules and CSS
    are inlined into the static widgets' outputs)."""
    kinds = (".py", ".js", ".css", ".json", ".gz", ".toml")
    return sorted(f for f in (ROOT / "normlab").rglob("*") if f.suffix in kinds and f.is_file())


def source_hash(src: Path) -> str:
    """Hash of the notebook source and all of normlab: an unchanged hash needs no re-execution."""
    h = hashlib.sha256(src.read_bytes() + EXEC_VERSION.encode())
    for f in hashed_files():
        h.update(f.read_bytes())
    return h.hexdigest()


# One notebook in a fresh process, through tools/notebooks.py's execute (outputs, figures, timing),
# for a source in any folder: the course's notebooks/, or a test's temporary one.
RUN_ONE = """import pathlib, sys
sys.path.insert(0, sys.argv[1])
import notebooks
src = pathlib.Path(sys.argv[2])
notebooks.SOURCES = src.parent
sys.exit(1 if notebooks.execute([src.stem]) else 0)
"""


def execute_all(jobs: int = 2, srcs: list[Path] | None = None) -> list[Path]:
    """Execute every course notebook (or each of ``srcs``) that changed, `jobs` at a time, into
    build/executed/; fail loudly (SystemExit) when a cell raises."""
    srcs = nbtools.sources() if srcs is None else srcs
    todo = []
    for src in srcs:
        out = EXECUTED / (src.stem + ".ipynb")
        if out.exists() and nbformat.read(out, 4).metadata.get("normlab_hash") == source_hash(src):
            print(f"[normlab] {src.stem}: unchanged, reusing build/executed/{out.name}")
            continue
        todo.append(src)

    # Two executors at once: idle OpenMP threads must sleep, not spin (see tools/notebooks.py).
    # NORMLAB_STATIC=1: the widgets display their static, precomputed-grid version (web_host.mimebundle).
    env = dict(os.environ, MPLBACKEND=KERNEL_BACKEND, NORMLAB_STATIC="1",
               OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))

    logs = ROOT / "build" / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def run_one(src: Path) -> int:
        # The executor's stderr (the failing cell's traceback) goes to build/logs/NAME.log, so a
        # failed book build can be diagnosed; it is echoed below when the notebook fails.
        with open(logs / f"{src.stem}.log", "w", encoding="utf-8") as log:
            return subprocess.call([sys.executable, "-c", RUN_ONE, str(ROOT / "tools"), str(src)],
                                   cwd=ROOT, stderr=log, env=env)

    t0 = time.time()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        codes = list(pool.map(run_one, todo))
    failed = [s.stem for s, c in zip(todo, codes) if c != 0]
    for src, code in zip(todo, codes):
        if code == 0:
            out = EXECUTED / (src.stem + ".ipynb")
            nb = nbformat.read(out, 4)
            nb.metadata["normlab_hash"] = source_hash(src)
            nbformat.write(nb, out)
    if todo:
        print(f"[normlab] executed {len(todo)} notebook(s) in {time.time() - t0:.0f} s")
    for stem in failed:
        tail = (logs / f"{stem}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        print(f"[normlab] {stem} failed; last lines of build/logs/{stem}.log:\n  " + "\n  ".join(tail))
    if failed:
        raise SystemExit(f"[normlab] notebook(s) failed to execute: {', '.join(failed)} (logs in build/logs/)")
    return [EXECUTED / (s.stem + ".ipynb") for s in srcs]


def static_widgets(nb: nbformat.NotebookNode) -> None:
    """Replace the live widget outputs left (plain ipywidgets, which need a kernel) by a note; the
    course's widgets are already static (text/html over a grid), the figures stay."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for i, out in enumerate(cell.get("outputs", [])):
            if WIDGET_MIME in out.get("data", {}):
                cell.outputs[i] = nbformat.v4.new_output("display_data", data={"text/html": WIDGET_NOTE})


THEME_JS = 'if (!document.documentElement.dataset.mode) { document.documentElement.dataset.mode = "light"; }\n'


# Pages of the book that are not notebooks, after the lessons: the glossary and the teachers' guide.
EXTRA_PAGES = ("glossary.md", "instructor.md")


def stage_book() -> Path:
    """Assemble build/book_src: config, intro, toc, executed notebooks, their sources, MathJax.

    MathJax 3 (vendored in book/vendor/mathjax) goes to _extra/, not _static/: Jupyter Book 1
    would inject every .js file under _static/ into every page."""
    notebooks = execute_all()
    if BOOK_SRC.exists():
        shutil.rmtree(BOOK_SRC)
    (BOOK_SRC / "notebooks").mkdir(parents=True)
    (BOOK_SRC / "nb_sources").mkdir()
    (BOOK_SRC / "_static").mkdir()
    for name in ("_config.yml", "intro.md", "favicon.png", *EXTRA_PAGES):
        shutil.copy(ROOT / "book" / name, BOOK_SRC / name)
    shutil.copytree(VENDOR / "mathjax", BOOK_SRC / "_extra" / "mathjax")
    # The theme logs a console error when no light/dark mode was ever chosen: default to light.
    (BOOK_SRC / "_static" / "normlab.js").write_text(THEME_JS)
    chapters = []
    for path in notebooks:
        nb = nbtools.without_teacher_notes(nbformat.read(path, 4))   # notes are for the slides only
        static_widgets(nb)
        src_name = path.stem + ".md"
        shutil.copy(ROOT / "notebooks" / src_name, BOOK_SRC / "nb_sources" / src_name)
        link = nbformat.v4.new_markdown_cell(
            f"本页源文件 (source)：{{download}}`notebooks/{src_name} <../nb_sources/{src_name}>`"
            f" · 在本地运行：`python3 run.py course`")
        nb.cells.insert(1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0, link)
        nbformat.write(nb, BOOK_SRC / "notebooks" / path.name)
        chapters.append(f"  - file: notebooks/{path.stem}")
    chapters += [f"  - file: {Path(name).stem}" for name in EXTRA_PAGES]
    toc = "# generated by tools/book.py from notebooks/ in course order\nformat: jb-book\nroot: intro\nchapters:\n"
    (BOOK_SRC / "_toc.yml").write_text(toc + "\n".join(chapters) + "\n")
    write_sphinx_conf(BOOK_SRC)
    return BOOK_SRC


def write_sphinx_conf(src: Path) -> None:
    """Let Jupyter Book translate _config.yml into conf.py, then drop what needs the network:
    sphinx-thebe (loads thebe from a CDN and, in JB 1.0.4, declares THEBE_JS_URL twice)."""
    jb = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([str(jb), "config", "sphinx", str(src)], check=True, stdout=subprocess.DEVNULL)
    conf = (src / "conf.py").read_text()
    conf = conf.replace("'sphinx_thebe', ", "").replace("'sphinx_comments', ", "")
    conf += "\nhtml_extra_path = ['_extra']\nmathjax_path = '../mathjax/tex-mml-chtml.js'\n"
    (src / "conf.py").write_text(conf)


def sphinx_build(src: Path, out: Path) -> int:
    """Sphinx with every warning an error (-W) and nitpicky references (-n): a broken internal
    link, a missing image or a bad cross-reference fails the build. Returns the exit code."""
    return subprocess.call([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-n", "--keep-going", "-q",
                            str(src), str(out)], cwd=ROOT)


def build_book() -> Path:
    src = stage_book()
    t0 = time.time()
    html = BOOK_OUT / "html"
    if html.exists():
        shutil.rmtree(html)
    code = sphinx_build(src, html)
    if code != 0:
        raise SystemExit(f"[normlab] the book build failed (exit {code}): see the warnings above")
    index = html / "index.html"
    print(f"[normlab] book built in {time.time() - t0:.0f} s -> {index.relative_to(ROOT)}")
    report_weight(html)
    return index


def page_weight(html: Path) -> tuple[int, int, Path]:
    """(total bytes of the built book, bytes of its largest page, that page). Sphinx's cache
    (.doctrees, .buildinfo) is no part of what a reader loads."""
    files = [f for f in html.rglob("*") if f.is_file() and not any(p.startswith(".") for p in f.relative_to(html).parts)]
    pages = [f for f in files if f.suffix == ".html"]
    largest = max(pages, key=lambda f: f.stat().st_size)
    return sum(f.stat().st_size for f in files), largest.stat().st_size, largest


def report_weight(html: Path) -> str:
    """Print the book's weight (everything a reader may load: pages, MathJax, theme) and keep the line
    in build/logs/book.log."""
    total, largest, page = page_weight(html)
    widgets = sum(p.read_text(encoding="utf-8").count('class="normlab-web"') for p in html.rglob("*.html"))
    line = (f"[normlab] book weight: {total / 2**20:.1f} MiB in all; largest page {page.relative_to(html)} "
            f"{largest / 2**20:.2f} MiB; {widgets} static widget(s)")
    print(line)
    logs = ROOT / "build" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "book.log", "a", encoding="utf-8") as log:
        log.write(time.strftime("%Y-%m-%d %H:%M:%S ") + line + "\n")
    return line


def slide_types(nb: nbformat.NotebookNode) -> None:
    """Default slide layout where the source sets none: a heading starts a slide, a figure
    gets a sub-slide of its own (large when projected), everything else continues the slide.
    Cells with ``slideshow`` metadata in the source (e.g. speaker notes) keep theirs."""
    for cell in nb.cells:
        meta = cell.metadata.setdefault("slideshow", {})
        if "slide_type" in meta:
            continue
        text = cell.source.lstrip()
        has_figure = any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if cell.cell_type == "markdown" and (text.startswith("# ") or text.startswith("## ")):
            meta["slide_type"] = "slide"
        elif cell.cell_type == "markdown" and text.startswith("### "):
            meta["slide_type"] = "subslide"
        elif has_figure:  # the figure alone, large; its code stays in the notebook and the book
            meta["slide_type"] = "subslide"
            cell.metadata.setdefault("tags", []).append("slides-hide-input")
        else:
            meta["slide_type"] = "-"


def slides_exporter():
    """nbconvert's reveal.js exporter, set for the vendored, offline copies under vendor/."""
    from nbconvert import SlidesExporter
    from nbconvert.preprocessors import TagRemovePreprocessor
    from traitlets.config import Config

    config = Config()
    config.TagRemovePreprocessor.remove_input_tags = ("slides-hide-input",)
    config.SlidesExporter.preprocessors = [TagRemovePreprocessor]
    return SlidesExporter(
        config=config,
        reveal_url_prefix="vendor/reveal.js", require_js_url="vendor/require.js",
        jquery_url="vendor/jquery.min.js", mathjax_url="vendor/mathjax/tex-mml-chtml.js",
        mermaid_js_url="./vendor/mermaid-stub.js", mermaid_layout_elk_js_url="",
        reveal_theme="white", reveal_transition="none", reveal_scroll=True,
        reveal_width="1280", reveal_height="800", exclude_input_prompt=True, exclude_output_prompt=True)


def slides_html(exporter, nb: nbformat.NotebookNode) -> str:
    """One executed notebook as a reveal.js deck (static widgets, default slide layout, MathJax 3)."""
    static_widgets(nb)
    slide_types(nb)
    body, _ = exporter.from_notebook_node(nb)
    head = f'<link rel="icon" href="vendor/favicon.png"><style>{SLIDE_CSS}</style></head>'
    body = body.replace("</head>", head, 1)
    mathjax_tag = '<script src="vendor/mathjax/tex-mml-chtml.js">'
    assert mathjax_tag in body and MATHJAX2_HOOK.search(body), "nbconvert's reveal template changed"
    body = body.replace(mathjax_tag, MATHJAX3_CONFIG + mathjax_tag, 1)  # config must come first
    # The template imports mermaid (here a stub) as a module script from a file: from file:// Chromium
    # refuses that import (CORS) and logs an error. The course draws no mermaid diagram: drop it.
    body, n = MERMAID_IMPORT.subn("", body, count=1)
    assert n == 1, "nbconvert's reveal template changed (mermaid import)"
    return MATHJAX2_HOOK.sub("var update = function(event){};", body, count=1)


def copy_slide_vendor(out: Path) -> None:
    shutil.copytree(VENDOR, out / "vendor", dirs_exist_ok=True)
    shutil.copy(ROOT / "book" / "favicon.png", out / "vendor" / "favicon.png")


def build_slides() -> list[Path]:
    notebooks = execute_all()
    SLIDES_OUT.mkdir(parents=True, exist_ok=True)
    copy_slide_vendor(SLIDES_OUT)
    exporter = slides_exporter()
    written = []
    for path in notebooks:
        out = SLIDES_OUT / (path.stem + ".slides.html")
        out.write_text(slides_html(exporter, nbformat.read(path, 4)), encoding="utf-8")
        written.append(out)
    print(f"[normlab] {len(written)} slide deck(s) -> {SLIDES_OUT.relative_to(ROOT)}/ (open one in a browser; "
          f"press S for speaker notes)")
    largest = max(written, key=lambda f: f.stat().st_size)
    print(f"[normlab] largest deck {largest.name}: {largest.stat().st_size / 2**20:.2f} MiB")
    return written


# MathJax 3 (vendored) renders the slides' math; it must be configured before it loads, since
# by default it does not treat $...$ as math. nbconvert's template still has a MathJax 2 hook
# (MathJax.Hub on slide change): it is replaced, as MathJax 3 typesets every slide at load.
MATHJAX3_CONFIG = """<script>window.MathJax = {tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]],
  displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]], processEscapes: true}};</script>"""
MATHJAX2_HOOK = re.compile(r"var update = function\(event\)\{.*?\};", re.S)
MERMAID_IMPORT = re.compile(r"<script type=\"module\">\s*import mermaid from '[^']*';\s*mermaid\.initialize\([^)]*\);\s*</script>")

# Readable when projected: larger text, figures fill the width, code stays compact.
SLIDE_CSS = """
.reveal .slides { text-align: left; }
.reveal .jp-RenderedHTMLCommon, .reveal .jp-RenderedHTMLCommon p, .reveal .jp-RenderedHTMLCommon li { font-size: 28px; line-height: 1.45; }
.reveal .jp-RenderedHTMLCommon h1 { font-size: 48px; } .reveal .jp-RenderedHTMLCommon h2 { font-size: 40px; }
.reveal .jp-RenderedHTMLCommon table { font-size: 22px; }
.reveal .jp-RenderedHTMLCommon td, .reveal .jp-RenderedHTMLCommon th { font-size: 22px; }
.reveal .jp-RenderedImage img { width: 95%; max-height: 680px; object-fit: contain; }
.reveal .jp-InputArea pre, .reveal .highlight pre, .reveal .jp-OutputArea pre { font-size: 18px; line-height: 1.3; }
.reveal .jp-OutputArea-output { max-height: 62vh; overflow: auto; }
.reveal .jp-OutputArea-output table, .reveal .jp-OutputArea-output td, .reveal .jp-OutputArea-output th { font-size: 17px; }
.reveal .jp-OutputArea-output:has(.normlab-web) { max-height: none; overflow: visible; }
.reveal .normlab-web, .reveal .normlab-web select, .reveal .normlab-web label { font-size: 20px; }
"""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["book", "slides", "execute"])
    args = ap.parse_args(argv)
    if args.what == "book":
        build_book()
    elif args.what == "slides":
        build_slides()
    else:
        execute_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
