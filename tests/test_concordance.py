"""The one table of course section titles matches the notebooks' headings, and the concordance built
on it covers every heading of every document with statuses that are true of the notebook sources:
the section exists, its text contains the row's phrase (the answer, not only a heading), and a
"covered" section has code cells (which the notebook run executes), a "text" one none."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from normlab import companion
from normlab.companion import concordance

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# Independent count of the headings, written here by hand from the documents: [A] has 14
# (intro, §1, §2, §2.1-§2.6 with 2.2.1/2.3.1/2.5.1, 总结, 参考), [B] 3, [C] 23, [D] 16, [E] 9.
EXPECTED_COUNTS = {"A": 14, "B": 3, "C": 23, "D": 16, "E": 9}


def sections(notebook: str, lines: list[str] | None = None) -> dict[str, str]:
    """Heading text -> that section's source (up to the next heading of the same or a higher level,
    subsections included), from notebooks/NOTEBOOK.md. Headings inside code fences do not count."""
    if lines is None:
        lines = (NOTEBOOKS / f"{notebook}.md").read_text(encoding="utf-8").splitlines()
    heads, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^(#{1,6})\s+(.*?)\s*$", line)):
            heads.append((i, len(m.group(1)), m.group(2)))
    out = {}
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        out[title] = "\n".join(lines[i + 1:end])
    return out


def section_problem(sec: concordance.Section, phrase: str = "", notebook_lines: list[str] | None = None) -> str | None:
    """Why the table's entry (title, status) or a row's phrase is not true of the notebook source, or None."""
    if notebook_lines is None and not (NOTEBOOKS / f"{sec.notebook}.md").exists():
        return f"{sec.notebook}.md does not exist (renamed?)"
    body = sections(sec.notebook, notebook_lines).get(sec.title)
    if body is None:
        return f"{sec.notebook} has no heading {sec.title!r} (label {sec.label})"
    if phrase not in body:
        return f"{sec}: the phrase {phrase!r} is not in the section"
    code_cells = body.count("```{code-cell}")
    if sec.status == "covered" and not code_cells:
        return f"{sec}: status 'covered' but the section has no code cell"
    if sec.status == "text" and code_cells:
        return f"{sec}: has code cells, drop {sec.label} from text_only"
    return None


@pytest.mark.parametrize("label", list(concordance.SECTIONS))
def test_every_section_title_is_a_heading_of_its_notebook(label):
    sec = concordance.section(label)
    assert re.fullmatch(r"\d\d_[a-z_]+", sec.notebook) and label.startswith(sec.notebook[:2] + ".")
    assert sec.status in concordance.STATUSES
    why = section_problem(sec)
    assert why is None, why


def test_a_renamed_section_or_notebook_fails_instead_of_passing():
    sec = concordance.section("02.mom")
    lines = (NOTEBOOKS / "02_batchnorm.md").read_text(encoding="utf-8").splitlines()
    assert section_problem(sec, notebook_lines=lines) is None
    renamed = [line.replace(sec.title, sec.title + "（改名）") if line.startswith("#") else line for line in lines]
    assert "no heading" in section_problem(sec, notebook_lines=renamed)
    moved = concordance.Section(sec.label, "98_renamed", sec.title, sec.status)
    assert "does not exist" in section_problem(moved)
    assert "phrase" in section_problem(sec, "a phrase that is nowhere")
    with pytest.raises(KeyError, match="02.mom"):
        concordance.section("02.no_such_label")


def test_heading_lists_are_complete_and_unique():
    for doc, n in EXPECTED_COUNTS.items():
        heads = concordance.HEADINGS[doc]
        assert len(heads) == n == len(set(heads)), doc
    numbered = [h.split()[0] for h in concordance.HEADINGS["A"] if h.startswith("§")]
    assert numbered == ["§1", "§2", "§2.1", "§2.2", "§2.2.1", "§2.3", "§2.3.1", "§2.4", "§2.5", "§2.5.1", "§2.6"]
    assert [h.split()[0] for h in concordance.HEADINGS["E"] if h.startswith("§")] == \
        ["§1", "§1.1", "§1.2", "§1.3", "§2", "§3", "§4", "§5"]


@pytest.mark.parametrize("doc", list(concordance.DOCS))
def test_every_heading_has_a_row_and_every_row_a_known_heading(doc):
    rows = concordance.rows_of(doc)
    assert {r.heading for r in rows} == set(concordance.HEADINGS[doc])
    assert len(concordance.table(doc).rows) == len(rows)


@pytest.mark.parametrize("row", concordance.ROWS, ids=lambda r: f"{r.doc}-{r.heading}-{r.part[:12]}")
def test_row_phrase_and_status_are_true_of_the_notebook(row):
    assert row.phrase.strip(), row
    why = section_problem(concordance.section(row.course), row.phrase)
    assert why is None, why


@pytest.mark.parametrize("q", concordance.QUESTIONS, ids=lambda q: f"{q.doc}{q.number}")
def test_question_phrase_and_status_are_true_of_the_notebook(q):
    why = section_problem(concordance.section(q.course), q.phrase)
    assert why is None, why


def test_model_answers_section_exists_and_names_every_question():
    sec = concordance.section(concordance.MODEL_ANSWERS)
    assert sec.status == "text"
    body = sections(sec.notebook)[sec.title]
    for q in ("Q1", "Q2", "Q3", "Q4"):
        assert q in body


def test_the_package_reads_no_notebook():
    """Nothing in normlab.companion opens files but its own data (importlib.resources, load_toml)."""
    for path in (ROOT / "normlab" / "companion").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not names & {"open", "read_bytes", "Path", "glob", "exists", "listdir", "scandir"}, path.name
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        strings = {n.value for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings}
        assert not any("notebooks" in s or s.endswith(".md") for s in strings), path.name


def test_every_label_used_is_in_the_table():
    used = {r.course for r in concordance.ROWS} | {q.course for q in concordance.QUESTIONS} | {concordance.MODEL_ANSWERS}
    used |= {e.course for e in companion.ERRATA} | {c.course for c in companion.CLAIMS}
    assert used <= set(concordance.SECTIONS)
    assert not set(concordance.SECTIONS) - used, f"labels nothing refers to: {sorted(set(concordance.SECTIONS) - used)}"


def test_claims_point_at_sections_the_concordance_lists():
    notebooks = {r.place.notebook for r in concordance.ROWS}
    for c in companion.CLAIMS:
        assert c.place.notebook in notebooks and concordance.section(c.course).status in concordance.STATUSES, c.where


def test_every_erratum_is_listed_under_its_document():
    listed = {(r.doc, e) for r in concordance.ROWS for e in r.errata}
    ids = {e.id for e in companion.ERRATA}
    for e in companion.ERRATA:
        assert (e.doc, e.id) in listed, f"{e.id} is not in [{e.doc}]'s concordance table"
    assert all(eid in ids for _, eid in listed)


def test_interview_questions_ten_and_four():
    qs = concordance.QUESTIONS
    assert [q.number for q in qs if q.doc == "A"] == [str(i) for i in range(1, 11)]
    assert [q.number for q in qs if q.doc == "D"] == ["Q1", "Q2", "Q3", "Q4"]
    assert len(concordance.questions_table().rows) == 14


def test_bad_document_letter():
    with pytest.raises(ValueError, match="doc"):
        concordance.table("F")
