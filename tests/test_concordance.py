"""The concordance covers every heading of every document, and each status it records is true of
the notebook sources: the section exists, its text contains the row's phrase (the answer, not only
a heading), and a "covered" section has code cells (which the notebook run executes)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from normlab import concordance, errata

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# Independent count of the headings, written here by hand from the documents: [A] has 14
# (intro, §1, §2, §2.1-§2.6 with 2.2.1/2.3.1/2.5.1, 总结, 参考), [B] 3, [C] 23, [D] 16, [E] 9.
EXPECTED_COUNTS = {"A": 14, "B": 3, "C": 23, "D": 16, "E": 9}


def sections(notebook: str) -> dict[str, str]:
    """Heading text -> that section's source (up to the next heading of the same or a higher level,
    subsections included), from notebooks/NOTEBOOK.md. Headings inside code fences do not count."""
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


def status_problem(notebook: str, section: str, phrase: str, status: str) -> str | None:
    """Why the recorded status is not true of the sources, or None."""
    assert status in concordance.STATUSES, status
    path = NOTEBOOKS / f"{notebook}.md"
    if status == "planned":
        return None
    if not path.exists():
        return f"{notebook}.md does not exist (renamed?) but the status is {status!r}"
    body = sections(notebook).get(section)
    if body is None:
        return f"{notebook} has no heading {section!r}"
    if phrase not in body:
        return f"{notebook} · {section}: the phrase {phrase!r} is not in the section"
    code_cells = body.count("```{code-cell}")
    if status == "covered" and not code_cells:
        return f"{notebook} · {section}: status 'covered' but the section has no code cell"
    if status == "text" and code_cells:
        return f"{notebook} · {section}: has code cells, record it as 'covered'"
    return None


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
    t = concordance.table(doc)
    assert len(t.rows) == len(rows)


@pytest.mark.parametrize("row", concordance.ROWS, ids=lambda r: f"{r.doc}-{r.heading}-{r.part[:12]}")
def test_row_status_is_true_of_the_notebook(row):
    assert re.fullmatch(r"\d\d_[a-z_]+", row.notebook), row
    assert row.phrase.strip(), row
    why = status_problem(row.notebook, row.section, row.phrase, row.status)
    assert why is None, why


@pytest.mark.parametrize("q", concordance.QUESTIONS, ids=lambda q: f"{q.doc}{q.number}")
def test_question_status_is_true_of_the_notebook(q):
    why = status_problem(q.notebook, q.section, q.phrase, q.status)
    assert why is None, why


def test_model_answers_section_exists_and_names_every_question():
    body = sections(concordance.MODEL_ANSWERS[0])[concordance.MODEL_ANSWERS[1]]
    assert concordance.status(*concordance.MODEL_ANSWERS) == "text"
    for q in ("Q1", "Q2", "Q3", "Q4"):
        assert q in body


def test_status_checker_catches_a_renamed_notebook_and_a_missing_phrase():
    r = concordance.ROWS[1]
    assert status_problem("98_renamed", r.section, r.phrase, "covered") is not None
    assert status_problem(r.notebook, r.section, "a phrase that is nowhere", "covered") is not None
    assert status_problem(r.notebook, "9. no such section", r.phrase, "covered") is not None
    assert status_problem("98_renamed", r.section, r.phrase, "planned") is None


def test_status_is_data_not_read_from_the_notebooks():
    """normlab.concordance must not open files: the status survives without ../notebooks."""
    tree = ast.parse((ROOT / "normlab" / "concordance.py").read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not names & {"open", "read_text", "Path", "glob", "exists"}
    assert concordance.status("99_missing", "1. anything") == "planned"


def test_claims_point_at_sections_that_exist():
    for where, _, _, notebook, section in errata.CLAIMS:
        assert notebook in {r.notebook for r in concordance.ROWS}, where
        assert section in sections(notebook), (where, notebook, section)
        assert concordance.status(notebook, section) in ("covered", "text"), (where, section)


def test_every_erratum_is_listed_under_its_document():
    listed = {(r.doc, e) for r in concordance.ROWS for e in r.errata}
    for e in errata.ERRATA:
        docs_listing = {d for d, eid in listed if eid == e.id}
        assert e.doc in docs_listing, f"{e.id} is not in [{e.doc}]'s concordance table"
    assert all(eid in {e.id for e in errata.ERRATA} for _, eid in listed)


def test_errata_chapter_sections_exist():
    for e in errata.ERRATA:
        assert e.chapter_section in sections(e.chapter), (e.id, e.chapter, e.chapter_section)


def test_interview_questions_ten_and_four():
    qs = concordance.QUESTIONS
    assert [q.number for q in qs if q.doc == "A"] == [str(i) for i in range(1, 11)]
    assert [q.number for q in qs if q.doc == "D"] == ["Q1", "Q2", "Q3", "Q4"]
    assert len(concordance.questions_table().rows) == 14


def test_bad_document_letter():
    with pytest.raises(ValueError, match="doc"):
        concordance.table("F")
