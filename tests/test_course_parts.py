"""The learner's parts of every lesson (issue 18), checked on the notebook sources:

- 先想一想 → 运行 → 答案: each lesson 01-09 asks at least two questions before a key
  experiment ("**先想一想**"), each answered in a collapsed ``<details>`` block that comes after
  the code cell that shows the answer (never before it, so the learner runs it first).
- 面试要点: each of those lessons ends with 3-5 interview points, each pointing to the section
  that proves it ("第 N 节" or a section title in 「」, both checked to exist), and a pointer to its
  drill card(s) in 08_drills (checked to exist there).
- 术语表: book/glossary.md and the table in notebooks/README.md agree; each term appears in the
  lesson that teaches it, and a lesson that uses it earlier points forward ("第 N 课") in the
  paragraph of its first use.
- No learner-visible paragraph of more than 450 characters (tables, code and math aside).
- No section opens with an errata box: a correction comes after the concept it corrects is taught.

Teacher notes (``slideshow: notes`` cells) are not learner-visible: the learner copies and the book
drop them (tools/notebooks.py), so they neither count as prompts nor need forward pointers.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest
from test_concordance import sections

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LESSONS = ["01_residuals", "02_batchnorm", "03_layernorm", "04_rmsnorm", "05_deepnorm", "06_placement",
           "07_beyond", "09_companion"]
PROSE_CHECKED = ["00_course_map", *LESSONS]     # 08_drills has its own owner and rules
PROMPTED = [*LESSONS, "08_drills"]              # 08's questions come after each card, never before it
PROMPT = "**先想一想**"
ANSWER = "<details><summary>答案 (answer)</summary>"
INTERVIEW = "面试要点"
MAX_PARAGRAPH = 450
CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩"


def learner_cells(stem: str) -> list:
    """The notebook's cells as a learner sees them: teacher notes removed."""
    nb = jupytext.read(NOTEBOOKS / f"{stem}.md")
    return [c for c in nb.cells
            if not (c.cell_type == "markdown" and c.metadata.get("slideshow", {}).get("slide_type") == "notes")]


def blocks(markdown: str) -> list[tuple[str, str]]:
    """(kind, text) for each paragraph, list item, table row, heading and display-math block of a
    markdown cell; kind is one of "heading", "table", "math", "para"."""
    out = []
    for para in re.split(r"\n[ \t]*\n", markdown):
        if para.lstrip().startswith("$$"):
            out.append(("math", para))
            continue
        current: list[str] = []
        for line in para.splitlines():
            stripped = line.lstrip()
            new_item = re.match(r"(>\s*)?([-*+]|\d+\.)\s", stripped) is not None
            if stripped.startswith(("#", "|")) or new_item:
                if current:
                    out.append(("para", "\n".join(current)))
                    current = []
                if stripped.startswith("#"):
                    out.append(("heading", stripped))
                    continue
                if stripped.startswith("|"):
                    out.append(("table", stripped))
                    continue
            current.append(line)
        if current:
            out.append(("para", "\n".join(current)))
    return [(k, t) for k, t in out if t.strip()]


def learner_blocks(stem: str) -> list[tuple[str, str]]:
    return [b for c in learner_cells(stem) if c.cell_type == "markdown" for b in blocks(c.source)]


def headings(stem: str) -> list[str]:
    """Heading titles of a notebook source (outside code fences), in order."""
    titles, fenced = [], False
    for line in (NOTEBOOKS / f"{stem}.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*?)\s*$", line)):
            titles.append(m.group(1))
    return titles


def section(stem: str, title_start: str) -> str | None:
    """The body of the first heading that starts with title_start, up to the next heading of the
    same or a higher level (outside code fences): test_concordance's reading of a notebook."""
    return next((body for title, body in sections(stem).items() if title.startswith(title_start)), None)


# --- 先想一想 → 运行 → 答案 -------------------------------------------------------------------

def prompt_problems(cells: list) -> tuple[int, list[str]]:
    """Walk the cells in order: a prompt, then at least one code cell, then its answer. Returns the
    number of complete prompt/answer pairs and what is out of order."""
    pairs, problems, state = 0, [], None
    for k, cell in enumerate(cells):
        if cell.cell_type == "code":
            if state == "asked":
                state = "ran"
            continue
        events = sorted([(m.start(), "prompt") for m in re.finditer(re.escape(PROMPT), cell.source)]
                        + [(m.start(), "answer") for m in re.finditer(re.escape(ANSWER), cell.source)])
        for pos, kind in events:
            where = f"cell {k}: {cell.source[pos:pos + 40]!r}"
            if kind == "prompt":
                if state is not None:
                    problems.append(f"{where}: a new question before the previous one was answered")
                state = "asked"
            else:
                if state is None:
                    problems.append(f"{where}: an answer without a question before it")
                elif state == "asked":
                    problems.append(f"{where}: the answer comes before any code cell has run the experiment")
                body = cell.source[pos + len(ANSWER):]
                if "</details>" not in body:
                    problems.append(f"{where}: <details> is not closed in the same cell")
                elif not re.sub(r"<[^>]+>", "", body.split("</details>", 1)[0]).strip():
                    problems.append(f"{where}: the answer is empty")
                else:
                    pairs += 1
                state = None
    if state is not None:
        problems.append("the last question has no answer after it")
    return pairs, problems


@pytest.mark.parametrize("stem", PROMPTED)
def test_predict_then_run_then_answer(stem):
    pairs, problems = prompt_problems(learner_cells(stem))
    assert not problems, f"{stem}: " + "; ".join(problems)
    assert pairs >= 2, f"{stem}: {pairs} question(s) with a hidden answer; at least 2 wanted"


def test_prompt_checker_catches_an_answer_shown_before_the_run():
    from nbformat.v4 import new_code_cell, new_markdown_cell

    ok = [new_markdown_cell(f"{PROMPT}：几倍？"), new_code_cell("x = 1"), new_markdown_cell(f"{ANSWER}\n\n2 倍\n\n</details>")]
    assert prompt_problems(ok) == (1, [])
    early = [ok[0], ok[2], ok[1]]
    assert "before any code cell" in prompt_problems(early)[1][0]
    unanswered = ok[:2] + ok[:2]
    assert len(prompt_problems(unanswered)[1]) == 2


# --- 面试要点 -----------------------------------------------------------------------------------

def drill_cards() -> set[str]:
    return {t[0] for t in headings("08_drills") if t and t[0] in CIRCLED}


def pointer_problems(stem: str, item: str) -> list[str]:
    """The item's pointers to sections of its lesson ("第 N 节", "第 N、M 节", 「title」) that do not
    exist; or a complaint that it has none."""
    titles = headings(stem)
    numbers = [n for m in re.finditer(r"第\s*((?:\d+(?:\.\d+)?\s*[、,，和与]\s*)*\d+(?:\.\d+)?)\s*节", item)
               for n in re.findall(r"\d+(?:\.\d+)?", m.group(1))]
    named = re.findall(r"「([^」]+)」", item)
    if not numbers and not named:
        return [f"no pointer to a section (第 N 节 or 「title」) in {item[:40]!r}"]
    bad = [f"第 {n} 节" for n in numbers if not any(re.match(rf"{re.escape(n)}[.\s]", t) for t in titles)]
    bad += [f"「{t}」" for t in named if t not in titles]
    return [f"{item[:30]!r} points to {b}, which is not a heading of {stem}" for b in bad]


@pytest.mark.parametrize("stem", LESSONS)
def test_interview_points_point_to_their_evidence_and_drills(stem):
    body = section(stem, INTERVIEW)
    assert body is not None, f"{stem}: no section titled {INTERVIEW}…"
    items = [b for k, b in blocks(body) if k == "para" and re.match(r"[-*]\s", b)]
    assert 3 <= len(items) <= 5, f"{stem}: {len(items)} interview points, want 3-5"
    problems = [p for item in items for p in pointer_problems(stem, item)]
    assert not problems, "\n".join(problems)
    drill = [b for k, b in blocks(body) if "08_drills" in b and any(c in b for c in CIRCLED)]
    assert drill, f"{stem}: no pointer to its drill card(s) (08_drills and a card number ①…)"
    cited = {c for b in drill for c in b if c in CIRCLED}
    assert cited <= drill_cards(), f"{stem}: cards {sorted(cited - drill_cards())} are not headings of 08_drills"


def test_pointer_checker_rejects_missing_sections():
    assert pointer_problems("01_residuals", "- 残差块的雅可比矩阵是 I + J_F（第 2 节）") == []
    assert pointer_problems("01_residuals", "- 一句话（第 9 节）")
    assert pointer_problems("01_residuals", "- 一句话（「没有这一节」）")
    assert pointer_problems("01_residuals", "- 一句没有出处的话")


# --- 术语表 -------------------------------------------------------------------------------------

def table_rows(text: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]
    return [r for r in rows[2:]]     # drop the header and the |---| line


def glossary() -> list[dict]:
    rows = table_rows((ROOT / "book" / "glossary.md").read_text(encoding="utf-8"))
    out = []
    for zh, en, definition, lesson in rows:
        out.append({"zh": zh, "en": en, "definition": definition, "lesson": int(re.search(r"\d\d", lesson).group()),
                    "aliases": [a.strip() for a in zh.split(" / ") + en.split(" / ") if a.strip()]})
    return out


def test_glossary_and_readme_table_agree():
    readme = (NOTEBOOKS / "README.md").read_text(encoding="utf-8").split("## 术语表", 1)[1]
    mine = [(r[0], r[1], r[2], int(r[3])) for r in table_rows(readme)]
    book = [(g["zh"], g["en"], g["definition"], g["lesson"]) for g in glossary()]
    assert mine == book, "book/glossary.md and notebooks/README.md's 术语表 differ"
    assert len(book) >= 20 and all(g["definition"] for g in glossary())
    assert [g["lesson"] for g in glossary()] == sorted(g["lesson"] for g in glossary()), "rows in lesson order"


def mentions(alias: str, text: str) -> bool:
    if re.search(r"[A-Za-z]", alias):       # an English name: not inside a longer identifier (Pre-LN is not LN)
        return re.search(rf"(?<![A-Za-z0-9_\-\\{{]){re.escape(alias)}(?![A-Za-z0-9_\-}}])", text) is not None
    return alias in text


def without_titles(text: str) -> str:
    """A paragraph without the titles of documents it cites (《BatchNorm / LayerNorm 笔记》 names a
    source, it does not use the terms)."""
    return re.sub(r"《[^》]*》", "", text)


def lessons_pointed_to(text: str) -> set[int]:
    """Lesson numbers a paragraph points to: 第 06 课, 第 03、06 课, 06 课, 06_placement, a table row
    of the course map that starts with the lesson number."""
    found = {int(n) for m in re.finditer(r"第\s*((?:\d{1,2}\s*[、,，和与]\s*)*\d{1,2})\s*课", text)
             for n in re.findall(r"\d+", m.group(1))}
    found |= {int(n) for n in re.findall(r"(?<![\d.])(\d{2})\s*课", text)}
    found |= {int(n) for n in re.findall(r"(?<!\d)(\d{2})_[a-z]", text)}
    if m := re.match(r"\|\s*(\d{2})\b", text):
        found.add(int(m.group(1)))
    return found


@pytest.mark.parametrize("term", glossary(), ids=lambda g: g["zh"])
def test_glossary_term_taught_in_its_lesson_and_pointed_to_before(term):
    stems = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.md"))
    first = next(s for s in stems if int(s[:2]) == term["lesson"])
    text = "\n".join(t for _, t in learner_blocks(first))
    assert any(mentions(a, text) for a in term["aliases"]), f"{term['zh']} does not appear in {first}"
    problems = []
    for stem in stems:
        if int(stem[:2]) >= term["lesson"]:
            break
        used = [t for k, t in learner_blocks(stem)
                if k != "heading" and any(mentions(a, without_titles(t)) for a in term["aliases"])]
        if used and term["lesson"] not in lessons_pointed_to(used[0]):
            problems.append(f"{stem} uses {term['zh']} before lesson {term['lesson']:02d} without a pointer "
                            f"(第 {term['lesson']:02d} 课) in: {used[0][:80]!r}")
    assert not problems, "\n".join(problems)


def test_forward_pointer_helpers():
    assert lessons_pointed_to("块内有 LayerNorm（第 03 课）") == {3}
    assert lessons_pointed_to("归一化（第 03、06 课）") == {3, 6}
    assert lessons_pointed_to("见 06 课的控件") == {6}
    assert lessons_pointed_to("| 06 归一化的位置 | …") == {6}
    assert mentions("LN", "LN 对每个 token") and not mentions("LN", "Pre-LN 堆叠") and not mentions("LN", r"\mathrm{LN}(h)")
    assert not mentions("DeepNet", "DeepNetTransformerBlock")


# --- paragraph length ---------------------------------------------------------------------------

@pytest.mark.parametrize("stem", PROSE_CHECKED)
def test_no_long_paragraph(stem):
    long = []
    for kind, text in learner_blocks(stem):
        visible = re.sub(r"<!--.*?-->", "", text, flags=re.S)
        if kind == "para" and len(visible) > MAX_PARAGRAPH:
            long.append(f"{len(visible)} characters: {visible[:40]!r}")
    assert not long, f"{stem}: paragraphs over {MAX_PARAGRAPH} characters (split them):\n" + "\n".join(long)


# --- errata after the concept they correct --------------------------------------------------------

ERRATA_OPENING = re.compile(r"^(>\s*)?\*\*资料勘误")


def errata_openings(blocks_: list[tuple[str, str]]) -> list[str]:
    """Headings whose first block is an errata box or an errata paragraph."""
    return [heading for (kind, heading), (_, first) in zip(blocks_, blocks_[1:])
            if kind == "heading" and ERRATA_OPENING.match(first.lstrip())]


@pytest.mark.parametrize("stem", PROSE_CHECKED)
def test_no_section_opens_with_an_erratum(stem):
    opened = errata_openings(learner_blocks(stem))
    assert not opened, f"{stem}: move these sections' errata after the concept they correct: {opened}"


def test_errata_opening_checker_fires():
    box = "> **资料勘误 (errata)**，可运行的对照见 `09_companion`：\n> - **X1** wrong"
    assert errata_openings(blocks(f"## 3. 某节\n\n{box}\n\n正文。")) == ["## 3. 某节"]
    assert errata_openings(blocks(f"## 3. 某节\n\n**资料勘误 [D] Q1**（**D1**）。正文")) == ["## 3. 某节"]
    assert errata_openings(blocks(f"## 3. 某节\n\n正文先讲概念。\n\n{box}")) == []
