"""The lecture slides: each executed notebook as a reveal.js deck, offline.

    python tools/book.py slides      # -> build/slides/NN_name.slides.html (reveal.js, vendored)
    python tools/book.py slides --only 06    # one deck (what is not current is executed first)

The layout is tools/slide_layout.py's, the look tools/slide_style.py's CSS. Nothing is executed here
that an earlier execution (a test run's nbval, or `tools/book.py book`) already made."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import execution  # noqa: E402
import slide_style  # noqa: E402
from slide_layout import slide_types  # noqa: E402
from slide_model import CODE_HANG, strip_tags  # noqa: E402
from static_outputs import static_widgets  # noqa: E402

ROOT = execution.ROOT
SLIDES_OUT = ROOT / "build" / "slides"
VENDOR = ROOT / "book" / "vendor"


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
    head = f'<link rel="icon" href="vendor/favicon.png"><style>{slide_style.SLIDE_CSS}</style></head>'
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
    body, n = SCROLLING_SLIDE.subn(lambda m: SCROLLING_SLIDE_FAST, body, count=1)
    assert n == 1, "nbconvert's reveal template changed (setScrollingSlide)"
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


def build_slides(only: list[str] | None = None) -> list[Path]:
    """Every deck (or those whose names start with one of ``only``: 06, 06_placement) from build/executed/."""
    srcs = [s for s in execution.nbtools.sources() if not only or any(s.stem.startswith(o) for o in only)]
    notebooks = execution.execute_all(srcs=srcs)
    SLIDES_OUT.mkdir(parents=True, exist_ok=True)
    copy_slide_vendor(SLIDES_OUT)
    exporter = slides_exporter()
    written = []
    for path in notebooks:
        out = SLIDES_OUT / (path.stem + ".slides.html")
        nb = nbformat.read(path, 4)
        mark_exercises(nb, ROOT / "notebooks" / (path.stem + ".md"))
        out.write_text(slides_html(exporter, nb), encoding="utf-8")
        written.append(out)
    print(f"[normlab] {len(written)} slide deck(s) -> {SLIDES_OUT.relative_to(ROOT)}/ (open one in a browser; "
          f"press S for speaker notes)")
    largest = max(written, key=lambda f: f.stat().st_size)
    print(f"[normlab] largest deck {largest.name}: {largest.stat().st_size / 2**20:.2f} MiB")
    return written


def mark_exercises(nb: nbformat.NotebookNode, source: Path) -> int:
    """Mark the executed notebook's exercise answers from its source's solution markers (normlab.course:
    ``### BEGIN SOLUTION``, ``# solution-only``, ``<!-- BEGIN SOLUTION -->``, the ``solution`` tag), which
    the executed solution copy no longer carries: each such cell gets ``metadata.normlab_learner``, the
    learner version of its source ("" when the learner version drops it). The layout shows that on the
    slide and keeps the answer and its check's result to the speaker notes. Returns the cells marked."""
    import jupytext

    from normlab import course

    if not source.exists():
        return 0
    pairs = []
    for cell in jupytext.read(source).cells:
        probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass"), cell])
        solution = course.versions(probe, learner=False).cells[1].source
        learner = course.versions(probe, learner=True).cells[1:]
        learner_src = learner[0].source if learner and not course.is_solution_cell(cell) else ""
        if learner_src != solution:
            pairs.append((solution, learner_src))
    marked, k = 0, 0
    for cell in nb.cells:
        if k < len(pairs) and cell.source == pairs[k][0]:
            cell.metadata["normlab_learner"] = pairs[k][1]
            marked, k = marked + 1, k + 1
    if k < len(pairs):
        raise SystemExit(f"[normlab] {source.name}: {len(pairs) - k} exercise answer(s) of the source not found in "
                         "its executed copy: execute it again (python tools/book.py execute)")
    return marked


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


# The template's scroll bar for a slide taller than the screen measured, with jQuery, every slide of the
# current vertical stack at every slide change: 80 ms a step in 09's deck (138 slides; a speaker's click
# lags, and the Chromium tests spent most of their time there). The same rule, for the slide shown
# (jQuery's height(): the content box).
SCROLLING_SLIDE = re.compile(r"function setScrollingSlide\(\) \{.*?\n        \}\n", re.S)
SCROLLING_SLIDE_FAST = """function setScrollingSlide(event) {
            var slide = (event && event.currentSlide) || document.querySelector('.reveal .slides section.present:not(.stack)');
            if (!slide || slide.style.overflowY || slide.parentElement.tagName !== 'SECTION') return;   // as before: a stack's slides
            var cs = getComputedStyle(slide), h = document.querySelector('.reveal').clientHeight * 0.95;
            if (slide.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom) > h) {
              slide.style.height = 'calc(95vh)'; slide.style.overflowY = 'scroll'; slide.style.marginTop = '20px';
            }
        }
"""


MERMAID_IMPORT = re.compile(r"<script type=\"module\">\s*import mermaid from '[^']*';\s*mermaid\.initialize\([^)]*\);\s*</script>")
