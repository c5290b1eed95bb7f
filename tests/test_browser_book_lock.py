"""The learners' book: no solution anywhere in it, and each 先想一想 prompt's experiment waits for the guess
(issue 36 "two books", issue 40), read in Chromium as a learner reads it.

- No solution: every file of the built learners' book (pages, the sources it offers for download, the
  notebooks Sphinx copies) is read as text (tags stripped: highlighted code is split into spans) and
  holds none of the reference code of an exercise or a drill card; the control is the teachers' staged
  book, which holds every line.
- The lock: on every lesson page, for every prompt, the outputs between the prompt's choices and its
  answer fold (found from the choice widget and the fold's marker, not from the lock's own tags) are not
  visible before a pick, a cue says why, and no visible text there holds the answer's key phrases
  (``reveals`` of normlab/course/predictions_data.py); after a pick they show, and after a reload too. With
  localStorage disabled every output shows. At 390x844 the choices and the cue need no sideways scroll.

The lock on every lesson page is checked in tests/test_browser_book.py's walk over every page of the book
(test_each_prompts_experiment_waits_for_the_guess there: one load per page for its checks and these, issue
27), with BETWEEN, reveals and lesson_pages from here. Cost here: a phone-size visit and a visit without
localStorage, about 5 s of browser time; the grep reads the built book's files (~1 s).
"""

from __future__ import annotations

import html as htmllib
import re
import sys
from pathlib import Path

import pytest

from conftest import Tab

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import book  # noqa: E402  (tools/book.py)
import learner_book  # noqa: E402  (tools/learner_book.py)

NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.md"))
TEXT_FILES = (".html", ".md", ".ipynb", ".txt", ".py", ".js")


def page_text(raw: str) -> str:
    """A file as the text a reader gets: tags removed, entities decoded."""
    return htmllib.unescape(re.sub(r"<[^>]+>", "", raw))


SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def solution_lines() -> dict[str, list[str]]:
    """Each lesson's reference code: the lines between its solution markers (and those ending in
    "# solution-only"), without their comment, 12 characters or more, that no lesson, no page of the
    book and no code of normlab's 09 may quote (companion.code; the checkers' own references in
    normlab/exercises and normlab/drills excepted) shows outside a solution: a line like
    `with torch.no_grad():` or `mu = x.mean(0)` is no answer."""
    sources = {name: (ROOT / "notebooks" / f"{name}.md").read_text(encoding="utf-8") for name in NOTEBOOKS}
    outside = "\n".join(SOLUTION.sub("", text) for text in sources.values())
    outside = "\n".join(line for line in outside.split("\n") if not line.rstrip().endswith("# solution-only"))
    outside += "".join(p.read_text(encoding="utf-8") for p in (ROOT / "book").glob("*.md"))
    outside += "".join(p.read_text(encoding="utf-8") for p in (ROOT / "normlab").rglob("*.py")
                       if not {"exercises", "drills"} & set(p.parts))     # 09 quotes normlab's code (companion.code)
    lines = {}
    for name, text in sources.items():
        code = [line for block in SOLUTION.findall(text) for line in block.split("\n")]
        code += [line for line in text.split("\n") if line.rstrip().endswith("# solution-only")]
        found = {line.split("#")[0].strip() for line in code}
        lines[name] = sorted(c for c in found if len(c) >= 12 and c not in outside)
    return {name: found for name, found in lines.items() if found}


def test_the_learners_book_holds_no_solution_the_teachers_does(book_url):
    lines = solution_lines()
    assert {"01_residuals", "03_layernorm", "08_drills"} <= set(lines) and sum(map(len, lines.values())) >= 40
    html_dir = ROOT / "build" / "book" / "html"
    files = [f for f in html_dir.rglob("*") if f.suffix in TEXT_FILES and "mathjax" not in f.parts and f.is_file()]
    assert len([f for f in files if f.suffix == ".html"]) >= 12
    found = []
    for f in files:
        text = page_text(f.read_text(encoding="utf-8", errors="replace"))
        found += [f"{f.relative_to(html_dir)}: {line}" for name in lines for line in lines[name] if line in text]
    assert not found, "reference code in the learners' book:\n" + "\n".join(found[:20])
    stub = 'raise NotImplementedError("在这里写出你的实现'
    page = page_text((html_dir / "notebooks" / "01_residuals.html").read_text(encoding="utf-8"))
    assert stub in page and "还没有写 (not written yet)" in page and "通过 PASSED" not in page
    # the control: the teachers' book (staged as `run.py book --teacher` stages it) has every line, and
    # keeps today's layout (the teacher reveals in the room): nothing locked, no lock script
    import nbformat

    staged = book.stage_book(teacher=True)
    for name in lines:
        nb = nbformat.read(staged / "notebooks" / f"{name}.ipynb", 4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        missing = [line for line in lines[name] if line not in code]
        assert not missing, f"{name}: the teachers' book lacks {missing[:3]}"
        assert not any(learner_book.LOCKED in c.metadata.get("tags", []) for c in nb.cells), name
    assert "nl-lock-on" not in (staged / "_static" / "normlab.js").read_text(encoding="utf-8")
    assert "nl-lock-on" in (ROOT / "build" / "book_src" / "_static" / "normlab.js").read_text(encoding="utf-8")


# --- the lock -------------------------------------------------------------------------------------------

# For each choice widget on the page: the outputs (.cell_output) and the text from the widget's cell to its
# answer fold's <details>, in document order, with what is visible of them; the cue's box.
BETWEEN = r"""(withText) => {
  const out = [], shown = (el) => el.checkVisibility({visibilityProperty: true, opacityProperty: true});
  for (const ask of document.querySelectorAll(".nl-pr-ask[data-key]")) {
    const key = ask.dataset.key, suffix = key.replace(/[^A-Za-z0-9_-]/g, "-");
    const marker = document.querySelector(".nl-answer-for-" + CSS.escape(suffix));
    const fold = marker ? marker.closest("details") : null;
    const start = ask.closest(".cell") || ask;
    const outputs = [], texts = [];
    if (fold) {          // the nodes after the choices' cell and before the fold, in document order
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
      walker.currentNode = start;
      let n = walker.nextSibling() || walker.nextNode();
      for (; n && n !== fold; n = walker.nextNode()) {
        if (n.nodeType === 1 && start.contains(n)) continue;
        if (n.nodeType === 1 && n.contains(fold)) continue;
        if (n.nodeType === 1 && n.classList.contains("cell_output")) {
          const r = n.getBoundingClientRect();
          outputs.push({visible: shown(n) && r.width * r.height > 0, text: n.innerText.slice(0, 60)});
        } else if (withText && n.nodeType === 3 && n.textContent.trim() && !n.parentElement.closest("script, style")
                   && shown(n.parentElement)) texts.push(n.textContent);
      }
    }
    const cue = document.querySelector(`.nl-lock-cue[data-lock="${suffix}"]`);
    const c = cue && cue.checkVisibility() ? cue.getBoundingClientRect() : null;
    out.push({key, fold: !!fold, outputs, text: texts.join(""), cue: c ? {left: c.left, right: c.right, text: cue.innerText} : null});
  }
  return out;
}"""


def reveals() -> dict[str, list[str]]:
    """"lesson.id" -> the answer's key phrases (normlab/course/predictions_data.py ``reveals``)."""
    from normlab.course import predictions

    return {f"{e['lesson']}.{e['id']}": list(e.get("reveals", [])) for e in predictions.entries()}


def lesson_pages() -> list[str]:
    from normlab.course import predictions

    lessons = {e["lesson"] for e in predictions.entries()}
    return [n for n in NOTEBOOKS if n[:2] in lessons]


NO_STORAGE = """Object.defineProperty(window, "localStorage", {configurable: true,
  get() { throw new DOMException("The operation is insecure.", "SecurityError"); }});"""


def test_without_localstorage_the_page_shows_everything(browser, book_url):
    """A browser that refuses localStorage (cookies blocked): the lock fails open, as the fold's does."""
    tab = Tab(browser, 1366, 768)
    try:
        tab.page.add_init_script(NO_STORAGE)
        tab.visit(f"{book_url}/notebooks/01_residuals.html")
        between = tab.page.evaluate(BETWEEN, False)
        assert between and sum(len(p["outputs"]) for p in between) >= 3
        assert all(o["visible"] for p in between for o in p["outputs"]), between
        assert tab.page.locator(".nl-lock-cue").count() == 0
        assert not tab.page.evaluate("() => document.documentElement.classList.contains('nl-lock-on')")
    finally:
        tab.close()


def test_a_phone_shows_the_choices_and_the_cue_without_sideways_scrolling(browser, book_url, artifacts):
    tab = Tab(browser, 390, 844)
    try:
        tab.visit(f"{book_url}/notebooks/03_layernorm.html")
        page = tab.page
        page.locator(".nl-pr-ask").first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "book_lock_03_phone.png"))
        wide = page.evaluate("() => ({page: document.scrollingElement.scrollWidth, view: innerWidth})")
        assert wide["page"] <= wide["view"], wide
        boxes = page.evaluate("""() => Array.from(document.querySelectorAll(".nl-pr-ask .nl-pr-option, .nl-lock-cue"))
            .map(e => { const r = e.getBoundingClientRect(); return [e.className, r.left, r.right]; })""")
        assert any("nl-lock-cue" in b[0] for b in boxes) and any("nl-pr-option" in b[0] for b in boxes), boxes
        assert all(b[1] >= 0 and b[2] <= 390 for b in boxes), [b for b in boxes if b[1] < 0 or b[2] > 390]
    finally:
        tab.close()
