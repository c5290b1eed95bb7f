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
import math
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
    course's widgets are already static (text/html over a grid), the figures stay. Progress bars
    (tqdm) become their final text first (progress_bars_as_text, with the slides' code below)."""
    progress_bars_as_text(nb)
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
    (BOOK_SRC / "_static" / "normlab.js").write_text(THEME_JS, encoding="utf-8")
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
    (BOOK_SRC / "_toc.yml").write_text(toc + "\n".join(chapters) + "\n", encoding="utf-8")
    write_sphinx_conf(BOOK_SRC)
    return BOOK_SRC


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


# --- the slides: one idea per slide (issue 18) -----------------------------------------------------
# The executed notebook is laid out as a reveal.js deck that reads well projected at 1280x720:
# at most SLIDE_PROSE of visible prose and SLIDE_CODE lines of code per slide, content kept within the
# slide's height (estimated here; tests/test_browser_book.py measures it in Chromium), each "先想一想"
# question on screen before its answer (the experiment's output and the <details> answer are reveal
# fragments), training progress bars as their final text, and each lesson's 面试要点 as its summary
# slide. What does not fit goes to the slide's speaker notes (press S). Only the executed copy changes.

SLIDE_PROSE = 150     # visible prose per slide: a Chinese character counts 1, any other visible one 1/2
SLIDE_CODE = 15       # lines of code per slide
CODE_HEAD = 12        # a longer code cell shows its first lines and CODE_CUT; the full code goes to the notes
CODE_CUT = "# ……（完整代码见讲者备注 / JupyterLab）"
PROSE_CUT = "……（全文见讲者备注）"
SUMMARY_TITLE = "本课小结 · 面试要点"
SUMMARY_HEADING = re.compile(r"^(#{1,3})\s+(?:本课小结\s*·\s*)?面试要点")
QUESTION = re.compile(r"^\s*\*\*先想一想\*\*")
ANSWER = re.compile(r"^\s*<details>\s*<summary>\s*答案")
WIDE = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\u3000-\u303f]")
LIST_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,3}[.)])\s")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")

# The height model (px of the 1280x720 slide, measured in Chromium with SLIDE_CSS): what a slide may hold.
SLIDE_ROOM = 630      # of the 720: reveal's margin and the section's padding take the rest
WIDTH = 1150          # px of text across a slide
PROSE_LINE, PROSE_CHARS = 40.6, 38   # 28px prose, line-height 1.45; Chinese characters per line
CODE_LINE, CODE_PAD = 24.7, 33       # 19px code, line-height 1.3; a code cell's padding
IMG_WIDTH, IMG_MAX = 1180, 500       # a figure fills the width, at most IMG_MAX high
OUTPUT_MAX = 440      # a longer output scrolls inside a box this high (SLIDE_CSS)
WIDGET_HEIGHT = 610   # the axes explorer, the tallest course widget: alone on its slide, under its title
# Nothing is cut at the slide's right edge (SLIDE_CSS): code soft-wraps, a line longer than the slide
# going on below it, CODE_HANG columns right of its own indent (wrap_code_lines); text outputs wrap
# anywhere; a wider table scrolls sideways inside its output box. The layout counts a wrapped line
# of code as the rows it takes on screen, for the limit of SLIDE_CODE lines and for the height.
CODE_CHAR, CODE_WIDE = 11.44, 19.0   # px across a character of 19px monospace code: Latin, Chinese
CODE_WIDTH = 1240     # px of code across a code cell (1262 less the editor's and the <pre>'s padding)
FENCED_WIDTH = 1215   # px of code across a code block in markdown (its cell's padding too)
CODE_HANG = 4         # the rows a long line wraps to start this many columns right of its indent
OUTPUT_WIDTH = 1110   # px of a text output's row (90% of its box; it wraps anywhere)


def visible_prose(md: str) -> str:
    """The text of a piece of markdown that a reader sees as prose: without markup, HTML comments,
    code blocks, math (typeset, not read as text) and URLs."""
    t = re.sub(r"<!--.*?-->", "", md, flags=re.S)
    t = re.sub(r"^\s*(`{3,}|~{3,}).*?^\s*\1", "", t, flags=re.S | re.M)
    t = re.sub(r"\$\$.*?\$\$", "", t, flags=re.S)
    t = re.sub(r"(?<![\\$])\$[^$\n]+?\$", "", t)
    t = re.sub(r"\]\([^)\s]*\)", "]", t)
    t = re.sub(r"<https?://[^>]*>|https?://\S+", "", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = re.sub(r"^[\s|:>-]*-{3,}[\s|:-]*$", "", t, flags=re.M)          # a table's rule
    t = re.sub(r"^\s*(?:>\s*)*(?:#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s)?", "", t, flags=re.M)
    return re.sub(r"[*`|\\]", "", t)


def text_length(text: str) -> float:
    """Length of visible text in Chinese characters: wide (CJK) characters 1, others 1/2, spaces 0."""
    return sum(1.0 if WIDE.match(ch) else 0.5 for ch in text if not ch.isspace())


def prose_length(md: str) -> float:
    return text_length(visible_prose(md))


def markdown_blocks(md: str) -> list[str]:
    """Blocks separated by blank lines; fenced code, $$ math and <details> stay whole."""
    blocks, cur, fence, in_math, details = [], [], None, False, 0
    for line in md.split("\n"):
        s = line.strip()
        if fence:
            cur.append(line)
            fence = None if s.startswith(fence) else fence
            continue
        m = FENCE.match(line)
        if m:
            fence = m.group(1)
            cur.append(line)
            continue
        if s.count("$$") % 2:
            in_math = not in_math
        details += s.count("<details") - s.count("</details>")
        if not s and not in_math and details <= 0:
            if cur:
                blocks.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    return blocks


def markdown_units(md: str) -> list[tuple[str, str]]:
    """The pieces a markdown cell may be split at: (kind, markdown) with kind heading, para, item
    (one item of a list), table, code, math, details or quote (a piece of a blockquote, with its '>')."""
    units: list[tuple[str, str]] = []
    for block in markdown_blocks(md):
        first = block.lstrip()
        if FENCE.match(block):
            units.append(("code", block))
        elif first.startswith("$$"):
            units.append(("math", block))
        elif first.startswith("<details"):
            units.append(("details", block))
        elif re.match(r"#{1,6}\s", first):
            head, _, rest = first.partition("\n")
            units.append(("heading", head))
            units += markdown_units(rest) if rest.strip() else []
        elif first.startswith("|"):
            units.append(("table", block))
        elif first.startswith(">"):
            inner = "\n".join(re.sub(r"^\s*> ?", "", line) for line in block.split("\n"))
            for _, text in markdown_units(inner):
                units.append(("quote", "\n".join("> " + line if line else ">" for line in text.split("\n"))))
        elif LIST_ITEM.match(block):
            item: list[str] = []
            for line in block.split("\n"):
                if LIST_ITEM.match(line) and item:
                    units.append(("item", "\n".join(item)))
                    item = []
                item.append(line)
            units.append(("item", "\n".join(item)))
        elif block.startswith("  ") and units and units[-1][0] == "item":     # a list item's own paragraph
            units[-1] = ("item", units[-1][1] + "\n\n" + block)
        else:
            units.append(("para", block))
    return units


def join_units(units: list[tuple[str, str]]) -> str:
    """Markdown of consecutive units: one list stays one list, one blockquote one blockquote."""
    out = ""
    for i, (kind, text) in enumerate(units):
        if i:
            prev = units[i - 1][0]
            out += "\n>\n" if kind == prev == "quote" else "\n" if kind == prev == "item" else "\n\n"
        out += text
    return out


def sentences(text: str) -> list[str]:
    """Split prose after 。！？； outside inline code and math."""
    out, cur, code, in_math = [], "", False, False
    for ch in text:
        cur += ch
        if ch == "`":
            code = not code
        elif ch == "$" and not code:
            in_math = not in_math
        elif ch in "。！？；" and not code and not in_math:
            out.append(cur)
            cur = ""
    return out + ([cur] if cur.strip() else [])


def cut_prose(text: str, room: float) -> str:
    """The leading sentences of a paragraph that fit in ``room`` together with PROSE_CUT."""
    kept = ""
    for s in sentences(text):
        if prose_length(kept + s + PROSE_CUT) > room:
            break
        kept += s
    if not kept:   # one sentence longer than a slide: cut it between words
        for ch in text:
            if prose_length(kept + ch + PROSE_CUT) > room:
                break
            kept += ch
        kept = re.sub(r"[`$][^`$]*$", "", kept) if (kept.count("`") % 2 or kept.count("$") % 2) else kept
    if kept.count("**") % 2:
        kept += "**"
    return kept.rstrip() + PROSE_CUT


def cut_row(row: str, room: float) -> str:
    """A markdown table row within ``room``: its longest cell cut (cut_prose)."""
    cells = row.strip().strip("|").split("|")
    longest = max(range(len(cells)), key=lambda i: prose_length(cells[i]))
    rest = prose_length(row) - prose_length(cells[longest])
    cells[longest] = " " + cut_prose(cells[longest].strip(), max(room - rest, 0)) + " "
    return "|" + "|".join(cells) + "|"


def unit_height(kind: str, text: str) -> float:
    """Estimated height of a markdown unit on a slide (margins included)."""
    if kind == "heading":
        level = len(text) - len(text.lstrip("#"))
        size, base = {1: (48, 44), 2: (40, 40), 3: (34, 37)}.get(level, (24, 30))
        return base + 1.25 * size * max(1, math.ceil(prose_length(text) * size / WIDTH))
    if kind == "code":
        return CODE_LINE * code_lines(kind, text) + CODE_PAD
    if kind == "math":
        return 100 + 45 * text.count("\\\\")
    if kind == "table":
        rows = text.strip().split("\n")
        return 20 + sum(33 * max(1, math.ceil(prose_length(row) / 30)) + 8 for i, row in enumerate(rows) if i != 1)
    if kind == "details":
        body = text.partition("</summary>")[2].rpartition("</details>")[0]     # opened: 23px text (SLIDE_CSS)
        return 55 + 0.8 * sum(unit_height(k, t) for k, t in markdown_units(body))
    per_line = PROSE_CHARS - (3 if kind in ("item", "quote") else 0)
    lines = sum(max(1, math.ceil(prose_length(part) / per_line)) for part in re.split(r"\n(?=\s*>?\s*[-*+] )", text))
    return lines * PROSE_LINE + (24 if kind in ("para", "quote") else 4) + 100 * (text.count("$$") // 2)


def unit_prose(kind: str, text: str) -> float:
    """Visible prose of a unit; a <details> block shows its summary until it is opened."""
    return prose_length(text.partition("</summary>")[0] if kind == "details" else text)


def code_lines(kind: str, text: str) -> int:
    """Rows of code a markdown unit shows (a fenced block's lines, wrapped ones counting their rows)."""
    return code_block_rows(text.split("\n")[1:-1], FENCED_WIDTH) if kind == "code" else 0


def png_size(b64: str) -> tuple[int, int]:
    import base64
    import struct
    head = base64.b64decode(b64[:44])
    return struct.unpack(">II", head[16:24])


def text_px(text: str, size: float) -> float:
    """Width in px of text at a font size: Chinese characters are square, others about 0.55 wide."""
    return sum(size if WIDE.match(ch) else 0.55 * size for ch in text if ch != "\n")


def wrapped_lines(text: str, size: float, width: float = WIDTH) -> int:
    return sum(max(1, math.ceil(text_px(line, size) / width)) for line in text.split("\n"))


def code_px(text: str) -> float:
    """Width in px of monospace code on a slide: a Chinese character is wider than a Latin one."""
    return sum(CODE_WIDE if WIDE.match(ch) else CODE_CHAR for ch in text)


def code_rows(line: str, width: float = CODE_WIDTH) -> int:
    """Rows one line of code takes on a slide (SLIDE_CSS: pre-wrap): it wraps after a space (a word
    longer than a row breaks anywhere); the rows after the first start CODE_HANG columns right of its
    indent (wrap_code_lines). Chromium may also wrap at other places (after a Chinese character): not
    counting those can only count more rows than it shows."""
    indent = len(line) - len(line.lstrip(" "))
    rest = max(width - (indent + CODE_HANG) * CODE_CHAR, width / 2)
    rows, x, room = 1, 0.0, width
    for token in re.findall(r"\s+|\S+", line):
        w = code_px(token)
        if token.isspace() or x + w <= room:
            x += w                              # spaces at the end of a row hang past it
            continue
        if x > 0:
            rows, x, room = rows + 1, 0.0, rest
        if w <= room:
            x = w
            continue
        for ch in token:                        # longer than a row: broken anywhere
            if x > 0 and x + code_px(ch) > room:
                rows, x, room = rows + 1, 0.0, rest
            x += code_px(ch)
    return rows


def code_block_rows(lines: list[str], width: float = CODE_WIDTH) -> int:
    return sum(code_rows(line, width) for line in lines)


def code_head(lines: list[str], rows: int, width: float = CODE_WIDTH) -> list[str]:
    """The leading lines of some code that take at most ``rows`` rows on a slide."""
    head: list[str] = []
    for line in lines:
        if code_block_rows(head + [line], width) > rows:
            break
        head.append(line)
    return head


def shown_code(source: str) -> list[str]:
    """The lines of a code cell shown on its slide: all of them when they take at most SLIDE_CODE
    rows, else those within CODE_HEAD rows and CODE_CUT (the full code goes to the notes)."""
    lines = source.rstrip().split("\n")
    return lines if code_block_rows(lines) <= SLIDE_CODE else code_head(lines, CODE_HEAD) + [CODE_CUT]


def text_rows(text: str, width: float = OUTPUT_WIDTH) -> int:
    """Rows of a text output (monospace, wrapped anywhere: a row can end a Chinese character short)."""
    return sum(max(1, math.ceil(code_px(line) / (width - CODE_WIDE))) for line in text.split("\n"))


def strip_tags(html: str) -> str:
    import html as htmllib
    return htmllib.unescape(re.sub(r"<[^>]+>", "", html))


def table_height(html: str) -> float:
    """An HTML table in an output (17px; columns sized to their content)."""
    h = 24 * wrapped_lines(strip_tags(m.group(1)), 17) + 8 if (m := re.search(r"<caption>(.*?)</caption>", html, re.S)) else 0
    for row in re.findall(r"<tr.*?</tr>", html, re.S):
        cells = [strip_tags(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
        lines = max(1, math.ceil(sum(text_px(c, 17) + 20 for c in cells) / (0.8 * WIDTH)))
        h += 23 * lines + 9
    return h + 10


def html_height(html: str) -> float:
    """Tables, preformatted text and 20px text blocks (SLIDE_CSS sets outputs' HTML text to 20px)."""
    h = sum(table_height(t) for t in re.findall(r"<table.*?</table>", html, re.S))
    rest = re.sub(r"<table.*?</table>", "\n", html, flags=re.S)
    h += sum(CODE_LINE * text_rows(strip_tags(p).strip("\n")) + 16 for p in re.findall(r"<pre.*?</pre>", rest, re.S))
    rest = re.sub(r"<pre.*?</pre>", "\n", rest, flags=re.S)
    for block in re.split(r"<(?:br|/?div|/?p|/?li|/?ul|/?ol|/?h\d|/?details|/?summary)\b[^>]*>", rest):
        text = strip_tags(block).strip()
        if text:
            h += 29 * wrapped_lines(text, 20) + 4
    return h + 16


def markdown_output_height(md: str) -> float:
    h = 0.0
    for kind, text in markdown_units(md):
        if kind == "code":
            h += CODE_LINE * code_lines(kind, text) + 24
        elif kind == "table":
            h += 20 + 36 * text.count("\n")
        else:
            h += 29 * wrapped_lines(visible_prose(text).strip(), 20) + 12
    return h + 16


def output_height(out) -> float:
    """Estimated height of one output on a slide (at most OUTPUT_MAX, but a figure or a widget)."""
    data = out.get("data", {})
    html = data.get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    if "normlab-web" in html:        # a course widget (its PNG is for print only): a slide of its own
        return WIDGET_HEIGHT
    if "image/png" in data:
        w, h = png_size(data["image/png"])
        return min(IMG_WIDTH * h / w, IMG_MAX) + 60
    if "normlab-progress" in html:
        width = float(re.search(r"column-width: (\d+)ch", html).group(1)) if "column-width" in html else 80
        columns = max(1, int(WIDTH // (width * 9.6 + 16)))
        return 20 * math.ceil((html.count("\n") + 1) / columns) + 30
    if html:
        h = html_height(html)
    elif "text/markdown" in data:
        h = markdown_output_height("".join(data["text/markdown"]))
    else:
        text = out.get("text", "") if out.get("output_type") == "stream" else data.get("text/plain", "")
        h = CODE_LINE * text_rows("".join(text).rstrip("\n")) + 30
    return min(h, OUTPUT_MAX + 20)


TABLE_HTML = re.compile(r"\s*<table>(<caption>.*?</caption>)?<thead>(.*?)</thead><tbody>(.*)</tbody></table>\s*", re.S)


def split_table(out, room: float) -> list:
    """A table output (normlab.viz.Table's HTML) taller than ``room``: one output per slide-sized
    run of rows, the header repeated and the caption numbered (1/3, 2/3, ...)."""
    html = out.get("data", {}).get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    m = TABLE_HTML.fullmatch(html)
    if not m or table_height(html) <= room:
        return [out]
    caption, head, body = m.groups()
    title = strip_tags(caption or "")
    table = lambda rows, cap="": f"<table>{cap}<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    chunks: list[list[str]] = [[]]
    for row in re.findall(r"<tr.*?</tr>", body, re.S):
        if chunks[-1] and table_height(table(chunks[-1] + [row], caption or "")) > room:
            chunks.append([])
        chunks[-1].append(row)
    import html as htmllib
    return [nbformat.v4.new_output("display_data", data={"text/html": table(
        rows, f"<caption>{htmllib.escape(title)}（{i}/{len(chunks)}）</caption>")})
        for i, rows in enumerate(chunks, 1)]


def progress_text(state: dict, model_id: str) -> str | None:
    """The final text of a tqdm.auto progress bar (an ipywidgets HBox of HTML, FloatProgress, HTML in
    the notebook's widget state), e.g. "train: 100% 300/300"; None for any other widget."""
    box = state.get(model_id, {})
    kids = [state.get(k.removeprefix("IPY_MODEL_"), {}) for k in box.get("state", {}).get("children", [])]
    if box.get("model_name") != "HBoxModel" or [k.get("model_name") for k in kids] != \
            ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
        return None
    import html as htmllib
    left = htmllib.unescape(kids[0]["state"].get("value", "")).replace("\u2007", " ").strip()
    desc = re.sub(r"\s*\d+%\s*$", "", left).rstrip(": ").strip()
    bar = kids[1]["state"]
    n, total = bar.get("value", 0) or 0, bar.get("max", 0) or 0
    percent = f"{100 * n / total:.0f}%" if total else ""
    count = f"{n:g}/{total:g}" if total else f"{n:g}"
    failed = "（中断 interrupted）" if bar.get("bar_style") == "danger" else ""
    return f"{desc}: {percent} {count}{failed}".strip() if desc else f"{percent} {count}{failed}".strip()


def progress_bars_as_text(nb: nbformat.NotebookNode) -> int:
    """Replace each tqdm progress-bar widget output by its final text (consecutive bars of a cell become
    one block of lines), before the widget state is dropped. Returns how many bars were replaced."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        outputs, lines = [], []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_MIME)
            text = progress_text(state, view["model_id"]) if view else None
            if text is not None:
                lines.append(text)
                replaced += 1
                continue
            if lines:
                outputs.append(progress_output(lines))
                lines = []
            outputs.append(out)
        if lines:
            outputs.append(progress_output(lines))
        if "outputs" in cell:
            cell.outputs = outputs
    return replaced


def progress_output(lines: list[str]):
    """Progress lines as one block, in as many columns as fit (CSS columns; one where they are long)."""
    import html as htmllib
    body = "\n".join(htmllib.escape(line) for line in lines)
    width = max(text_length(line) * 2 + 3 for line in lines)
    return nbformat.v4.new_output("display_data", data={
        "text/html": f'<pre class="normlab-progress" style="column-width: {width:.0f}ch">{body}</pre>',
        "text/plain": "\n".join(lines)})


def shows_alone(out) -> bool:
    """A figure or a course widget: shown without the code that made it (large when projected)."""
    data = out.get("data", {})
    html = "".join(data.get("text/html", ""))
    return "normlab-web" in html or ("image/png" in data and not html)


def slide_outputs(cell) -> list:
    """The outputs worth showing: not the float a cell's last ``expect(...)`` returns, not empty text."""
    outputs = list(cell.get("outputs", []))
    last = cell.source.rstrip().split("\n")[-1] if cell.source.strip() else ""
    if outputs and outputs[-1].get("output_type") == "execute_result" and \
            re.match(r"\s*(expect|measure)\(", last) and set(outputs[-1].get("data", {})) == {"text/plain"}:
        outputs = outputs[:-1]
    return [o for o in outputs if (o.get("text", "").strip() if o.get("output_type") == "stream" else True)]


class SlideLayout:
    """Lays cells out on slides within the limits, in order: markdown is split into units that are
    packed greedily; a slide that is full continues on a sub-slide titled "<section>（续）"."""

    def __init__(self) -> None:
        self.cells: list = []
        self.units: list[tuple[str, str]] = []    # markdown waiting to become one cell
        self.notes: list[str] = []                 # the current slide's speaker notes
        self.title = ""                            # the current section's heading
        self.next_type: str | None = "slide"       # slide_type of the current slide's first cell
        self.prose, self.lines, self.height = 0.0, 0, 0.0
        self.content = False                       # anything but its title on the current slide
        self.fresh_after = False                   # the next content starts a new sub-slide
        self.sizes: list[tuple[float, int, float]] = []   # (prose, code lines, height) of each slide made
        self.first = 0                             # index in self.cells of the current slide's first cell

    # -- the current slide
    def fits(self, prose: float = 0, code: int = 0, height: float = 0) -> bool:
        return (self.prose + prose <= SLIDE_PROSE and self.lines + code <= SLIDE_CODE
                and self.height + height <= SLIDE_ROOM)

    def started(self) -> bool:
        """More than its title on the slide: what does not fit goes to the next one."""
        return self.content

    def new(self, kind: str = "subslide", title: str | None = None) -> None:
        """Start a slide; a sub-slide that opens without a heading repeats the section's title."""
        if len(self.cells) == self.first and all(t.endswith("（续）") for _, t in self.units):
            self.units = []                        # nothing on the slide yet: start it again
        else:
            self.finish()
        self.first = len(self.cells)
        self.prose, self.lines, self.height, self.content = 0.0, 0, 0.0, False
        self.next_type = kind
        self.fresh_after = False
        if title is None and self.title:
            self.take("heading", f"#### {self.title}（续）", content=False)

    def finish(self) -> None:
        """End the current slide: its markdown, then its notes (one cell)."""
        self.flush()
        self.close_notes()
        if len(self.cells) > self.first:
            self.sizes.append((self.prose, self.lines, self.height))

    def take(self, kind: str, text: str, content: bool = True) -> None:
        self.units.append((kind, text))
        self.prose += unit_prose(kind, text)
        self.lines += code_lines(kind, text)
        self.height += unit_height(kind, text)
        self.content = self.content or content

    def flush(self) -> None:
        units, self.units = self.units, []
        if units:
            self.emit(nbformat.v4.new_markdown_cell(join_units(units)))

    def emit(self, cell, fragment: bool = False) -> None:
        if fragment and self.next_type:            # a fragment cannot open a slide: the title comes first
            self.emit(nbformat.v4.new_markdown_cell(f"#### {self.title}（续）"))
        cell.metadata.setdefault("slideshow", {})["slide_type"] = self.next_type or ("fragment" if fragment else "-")
        self.next_type = None
        self.cells.append(cell)

    def close_notes(self) -> None:
        """All the slide's notes in one cell: reveal's speaker view shows a slide's first note only."""
        if self.notes:
            note = nbformat.v4.new_markdown_cell("\n\n---\n\n".join(self.notes))
            note.metadata["slideshow"] = {"slide_type": "notes"}
            self.cells.append(note)
            self.notes = []

    def before_content(self) -> None:
        if self.fresh_after:
            self.new()

    def overflow(self) -> None:
        """The slide is full: go on on the next; a lead-in paragraph that ends in a colon goes along
        with what it introduces."""
        lead = self.units[-1] if self.units and self.units[-1][0] == "para" else None
        if lead and re.search(r"[：:]\s*$", visible_prose(lead[1])) and (
                len(self.cells) > self.first or any(k != "heading" for k, _ in self.units[:-1])):
            self.units.pop()
            self.prose -= unit_prose(*lead)
            self.height -= unit_height(*lead)
        else:
            lead = None
        self.new()
        if lead:
            self.take(*lead)

    # -- markdown
    def markdown(self, source: str, question_ahead: float = 0) -> None:
        for kind, text in markdown_units(source):
            if kind == "heading":
                level = len(text) - len(text.lstrip("#"))
                title = text.lstrip("#").strip()
                if SUMMARY_HEADING.match(text):
                    title = SUMMARY_TITLE
                    text = "#" * level + " " + title
                if level <= 3:
                    self.title = title
                    self.new("slide" if level <= 2 else "subslide", title=title)
                    self.take(kind, text, content=False)
                    continue
            self.before_content()
            prose, height = unit_prose(kind, text), unit_height(kind, text)
            extra = question_ahead if kind == "para" and QUESTION.match(text) else 0
            if not self.fits(prose, code_lines(kind, text), height + extra):
                if self.started():
                    self.overflow()
                if kind == "table" and not self.fits(prose, 0, height):
                    self.table(text)
                    continue
                if kind in ("para", "item", "quote") and not self.fits(prose):
                    self.notes.append(text)
                    text = self.cut(kind, text)
                if kind == "code" and not self.fits(0, code_lines(kind, text)):
                    self.notes.append(text)
                    lines = text.split("\n")
                    head = code_head(lines[1:-1], CODE_HEAD, FENCED_WIDTH)
                    text = "\n".join(lines[:1] + head + [CODE_CUT, lines[-1]])
            self.take(kind, text)

    def cut(self, kind: str, text: str) -> str:
        room = SLIDE_PROSE - self.prose
        if kind == "quote":
            inner = "\n".join(re.sub(r"^> ?", "", line) for line in text.split("\n"))
            return "\n".join("> " + line for line in cut_prose(inner, room).split("\n"))
        return cut_prose(text, room)

    def table(self, text: str) -> None:
        """A table too long for one slide: its rows on consecutive sub-slides, the header repeated;
        a row too long for a slide of its own shows its longest cell cut (the row goes to the notes)."""
        lines = text.strip().split("\n")
        head, chunk = lines[:2], []
        size = lambda rows: (prose_length("\n".join(head + rows)), 0, unit_height("table", "\n".join(head + rows)))
        for row in lines[2:]:
            if not self.fits(*size(chunk + [row])):
                if chunk:
                    self.take("table", "\n".join(head + chunk))
                    self.new()
                    chunk = []
                if not self.fits(*size([row])):
                    self.notes.append("\n".join(head + [row]))
                    row = cut_row(row, SLIDE_PROSE - self.prose - prose_length("\n".join(head)))
            chunk.append(row)
        self.take("table", "\n".join(head + chunk))

    # -- a question's answer
    def answer(self, source: str) -> None:
        """The <details> answer to a question: a fragment after the results, closed until opened.
        Its height counts open (the teacher opens it on the slide)."""
        height = unit_height("details", source)
        if not self.fits(0, 0, height):
            self.new()
        self.flush()
        self.height += height
        self.prose += unit_prose("details", source)
        self.emit(nbformat.v4.new_markdown_cell(source), fragment=True)
        self.fresh_after = True        # what follows the answer is the next idea

    # -- code
    def code(self, cell, question: bool) -> None:
        """The input (at most SLIDE_CODE lines shown), then each output; after a question the outputs
        are one fragment per slide. A cell that draws a figure or shows a widget shows that only (large)."""
        outputs = slide_outputs(cell)
        figure = any(shows_alone(o) for o in outputs)
        self.before_content()
        if cell.source.strip() and not figure and "slides-hide-input" not in cell.metadata.get("tags", []):
            shown = shown_code(cell.source)
            rows = code_block_rows(shown)               # a wrapped line counts the rows it takes
            height = CODE_LINE * rows + CODE_PAD
            if not self.fits(0, rows, height) and self.started():
                self.overflow()
            self.flush()
            code = nbformat.v4.new_code_cell("\n".join(shown))
            code.metadata.update({k: v for k, v in cell.metadata.items() if k != "slideshow"})
            self.emit(code)
            self.lines += rows
            self.height += height
            self.content = True
            if shown[-1:] == [CODE_CUT]:
                self.notes.append("完整代码 (full code)：\n\n```python\n" + cell.source.rstrip() + "\n```")
        first = True
        for out in [piece for out in outputs for piece in split_table(out, OUTPUT_MAX - 40)]:
            height = output_height(out)
            if not self.fits(0, 0, height) and self.started():
                self.new()
                first = True
            self.flush()
            shown = nbformat.v4.new_code_cell("")
            shown.metadata["tags"] = ["slides-hide-input"]
            shown.outputs = [out]
            self.emit(shown, fragment=question and first)
            self.height += height
            self.content = True
            first = False


def slide_types(nb: nbformat.NotebookNode) -> SlideLayout:
    """Lay the executed notebook out as slides (SlideLayout): nb.cells become the slides' cells, each
    with its ``slideshow.slide_type``; the source's speaker notes join their slide's notes. Returns the
    layout (its ``sizes``: the estimated prose, code lines and height of each slide)."""
    layout = SlideLayout()
    question = False        # between a 先想一想 question and its <details> answer
    for i, cell in enumerate(nb.cells):
        kind = cell.metadata.get("slideshow", {}).get("slide_type")
        if kind == "notes":
            layout.notes.append(cell.source)
        elif kind == "skip":
            continue
        elif cell.cell_type == "markdown" and question and ANSWER.match(cell.source):
            answer, rest = split_answer(cell.source)
            layout.answer(answer)
            question = False
            if rest.strip():              # what the cell says after the answer (an erratum): the next idea
                layout.markdown(rest.strip("\n"))
        elif cell.cell_type == "markdown":
            if re.match(r"\s*#{1,3}\s", cell.source):
                question = False          # a new section: the open question had no answer block
            asks = any(QUESTION.match(text) for k, text in markdown_units(cell.source) if k == "para")
            layout.markdown(cell.source, question_ahead=next_input_height(nb.cells, i) if asks else 0)
            question = question or asks
        elif cell.cell_type == "code":
            layout.code(cell, question)
    layout.finish()
    nb.cells = layout.cells
    return layout


def split_answer(source: str) -> tuple[str, str]:
    """A markdown cell that starts with a <details> answer: (the answer, the markdown after it)."""
    depth = 0
    for m in re.finditer(r"<details\b|</details>", source):
        depth += -1 if m.group(0) == "</details>" else 1
        if depth == 0:
            return source[:m.end()], source[m.end():]
    return source, ""


def next_input_height(cells, i: int) -> float:
    """The height the code cell after a question will take on the question's slide (its input)."""
    for cell in cells[i + 1:]:
        if cell.cell_type == "code":
            figure = any(shows_alone(o) for o in cell.get("outputs", []))
            return 0 if figure else CODE_LINE * code_block_rows(shown_code(cell.source)) + CODE_PAD
        if cell.metadata.get("slideshow", {}).get("slide_type") != "notes":
            return 0
    return 0


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
        reveal_width="1280", reveal_height="720", exclude_input_prompt=True, exclude_output_prompt=True)


def slides_html(exporter, nb: nbformat.NotebookNode) -> str:
    """One executed notebook as a reveal.js deck (progress bars as text, static widgets, the slide
    layout of slide_types, MathJax 3). 1280x720: the size of a projector's 16:9 picture."""
    static_widgets(nb)
    slide_types(nb)
    body, _ = exporter.from_notebook_node(nb)
    body = wrap_code_lines(body)
    head = f'<link rel="icon" href="vendor/favicon.png"><style>{SLIDE_CSS}</style></head>'
    body = body.replace("</head>", head, 1)
    mathjax_tag = '<script src="vendor/mathjax/tex-mml-chtml.js">'
    assert mathjax_tag in body and MATHJAX2_HOOK.search(body), "nbconvert's reveal template changed"
    body = body.replace(mathjax_tag, MATHJAX3_CONFIG + mathjax_tag, 1)  # config must come first
    # The template imports mermaid (here a stub) as a module script from a file: from file:// Chromium
    # refuses that import (CORS) and logs an error. The course draws no mermaid diagram: drop it.
    body, n = MERMAID_IMPORT.subn("", body, count=1)
    assert n == 1, "nbconvert's reveal template changed (mermaid import)"
    # Content from the top of each slide, not centred: the title stays in one place, and an answer
    # opened on the slide grows downwards within the height the layout left for it.
    assert "Reveal.initialize({" in body, "nbconvert's reveal template changed (Reveal.initialize)"
    body = body.replace("Reveal.initialize({", "Reveal.initialize({center: false,", 1)
    return MATHJAX2_HOOK.sub(lambda m: FIT_MATH, body, count=1)


HIGHLIGHTED = re.compile(r'(<div class="highlight[^"]*">\s*<pre>)(.*?)(</pre>)', re.S)


def wrap_code_lines(html: str) -> str:
    """Each line of highlighted code (Pygments' <pre> of a code cell or a markdown code block) in a
    <span class="nl-line"> of its own, with its indent + CODE_HANG as --nl-hang: SLIDE_FIT_CSS wraps a
    line longer than the slide with that hanging indent. A token's <span> that crosses a line (a
    docstring) is closed at the line's end and opened again on the next; the text is unchanged."""
    import html as htmllib

    def close(stack: list[str]) -> str:
        return "".join("</" + re.match(r"<(\w+)", tag).group(1) + ">" for tag in reversed(stack))

    def lines(m: re.Match) -> str:
        out, stack, cur = [], [], ""
        for tag, text in re.findall(r"(<[^>]+>)|([^<]+)", m.group(2)):
            if tag:
                if tag.startswith("</"):
                    stack.pop()
                elif not tag.endswith("/>"):
                    stack.append(tag)
                cur += tag
                continue
            *full, text = text.split("\n")
            for part in full:
                out.append(cur + part + "\n" + close(stack))
                cur = "".join(stack)
            cur += text
        if strip_tags(cur):
            out.append(cur + close(stack))
        spans = []
        for line in out:
            plain = htmllib.unescape(re.sub(r"<[^>]+>", "", line))
            hang = len(plain) - len(plain.lstrip(" ")) + CODE_HANG
            spans.append(f'<span class="nl-line" style="--nl-hang: {hang}ch">{line}</span>')
        return m.group(1) + "".join(spans) + m.group(3)

    return HIGHLIGHTED.sub(lines, html)


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
  displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]], processEscapes: true},
  startup: {pageReady: function () { return MathJax.startup.defaultPageReady().then(function () {
    if (window.fitMath) fitMath(); }); }}};</script>"""
MATHJAX2_HOOK = re.compile(r"var update = function\(event\)\{.*?\};", re.S)
# Once MathJax has typeset the deck (MATHJAX3_CONFIG), on each slide change (the template's MathJax 2
# hook, replaced) and when an answer is opened: a display formula wider than its slide is made smaller
# until it fits (MathJax 3 does not break lines).
FIT_MATH = """window.fitMath = function(root) {
          (root || document).querySelectorAll('mjx-container[display="true"]').forEach(function (m) {
            if (!m.dataset.size) m.dataset.size = getComputedStyle(m).fontSize;
            m.style.fontSize = m.dataset.size;
            var room = m.clientWidth, wide = m.scrollWidth;
            if (room && wide > room) m.style.fontSize = (parseFloat(m.dataset.size) * room / wide) + 'px';
          });
        };
        var update = function(event){ fitMath(event.currentSlide); };
        document.addEventListener('toggle', function (event) { fitMath(event.target); }, true);
        fitMath();"""
MERMAID_IMPORT = re.compile(r"<script type=\"module\">\s*import mermaid from '[^']*';\s*mermaid\.initialize\([^)]*\);\s*</script>")

# Nothing cut at the slide's right edge (tests/test_browser_book.py measures it): code wraps, a line's
# rows after the first CODE_HANG columns right of its indent (wrap_code_lines; 19px, the size code had);
# an output's box, its padding included, stays within its cell and scrolls sideways when it is wider
# (a table; its scrollbars always show); prose breaks a run it could not break otherwise (`"a"`、`"b"`).
SLIDE_FIT_CSS = """
.reveal div.highlight > pre { box-sizing: border-box; width: 100%; font-size: 19px; white-space: pre-wrap; overflow-wrap: anywhere; }
.reveal div.highlight > pre > .nl-line { display: block; padding-left: var(--nl-hang); text-indent: calc(-1 * var(--nl-hang)); }
.reveal .jp-OutputArea-output { box-sizing: border-box; }
.reveal .jp-OutputArea-output::-webkit-scrollbar { width: 10px; height: 10px; }
.reveal .jp-OutputArea-output::-webkit-scrollbar-thumb { background: #bbb; border-radius: 5px; }
.reveal .jp-MarkdownCell .jp-RenderedHTMLCommon { overflow-wrap: anywhere; }
"""

# Readable when projected: larger text, figures fill the width, code stays compact.
SLIDE_CSS = """
.reveal .slides { text-align: left; }
.reveal .jp-RenderedHTMLCommon, .reveal .jp-RenderedHTMLCommon p, .reveal .jp-RenderedHTMLCommon li { font-size: 28px; line-height: 1.45; }
.reveal h1, .reveal h2, .reveal h3, .reveal h4 { text-transform: none; }
.reveal .jp-RenderedHTMLCommon h1 { font-size: 48px; } .reveal .jp-RenderedHTMLCommon h2 { font-size: 40px; }
.reveal .jp-RenderedHTMLCommon h3 { font-size: 34px; }
.reveal .jp-RenderedHTMLCommon h4 { font-size: 24px; color: #666; margin: 0 0 8px 0; }
.reveal .jp-RenderedHTMLCommon table { font-size: 22px; }
.reveal .jp-RenderedHTMLCommon td, .reveal .jp-RenderedHTMLCommon th { font-size: 22px; }
.reveal blockquote { width: auto; margin: 8px 0; padding: 4px 16px; font-style: normal; box-shadow: none;
  background: #fff8f0; border-left: 5px solid #e65100; }
.reveal .jp-RenderedImage img { width: 95%; max-height: 500px; object-fit: contain; }
.reveal .jp-InputArea pre, .reveal .highlight pre, .reveal .jp-OutputArea pre { font-size: 18px; line-height: 1.3; }
.reveal .jp-OutputArea-child, .reveal .jp-OutputArea-output { display: block; }
.reveal .jp-OutputArea-output { max-height: 440px; overflow: auto; }
.reveal .jp-OutputArea-output.jp-RenderedHTMLCommon, .reveal .jp-OutputArea-output.jp-RenderedHTMLCommon p,
.reveal .jp-OutputArea-output.jp-RenderedHTMLCommon li { font-size: 20px; line-height: 1.4; }
.reveal .jp-OutputArea-output table, .reveal .jp-OutputArea-output td, .reveal .jp-OutputArea-output th { font-size: 17px; }
.reveal .jp-OutputArea-output:has(.normlab-web) { max-height: none; overflow: visible; }
.reveal .normlab-web, .reveal .normlab-web select, .reveal .normlab-web label { font-size: 20px; }
.reveal pre.normlab-progress { font-size: 16px; line-height: 1.25; color: #2e7d32; }
.reveal .slides section .fragment { transition: none; }
.reveal details { border-left: 4px solid #2e7d32; padding-left: 12px; }
.reveal details > summary { cursor: pointer; color: #2e7d32; }
.reveal .jp-RenderedHTMLCommon details p, .reveal .jp-RenderedHTMLCommon details li { font-size: 23px; line-height: 1.4; }
""" + SLIDE_FIT_CSS


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
