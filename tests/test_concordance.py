"""The concordance covers every heading of every document, and its links point at real sections."""

from __future__ import annotations

import re

import pytest

from normlab import concordance, errata

# Independent count of the headings, written here by hand from the documents: [A] has 14
# (intro, §1, §2, §2.1-§2.6 with 2.2.1/2.3.1/2.5.1, 总结, 参考), [B] 3, [C] 23, [D] 16, [E] 9.
EXPECTED_COUNTS = {"A": 14, "B": 3, "C": 23, "D": 16, "E": 9}


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


def test_rows_point_at_existing_notebook_sections_or_planned_ones():
    existing = {p.stem for p in concordance.NOTEBOOKS.glob("[0-9][0-9]_*.md")}
    for r in concordance.ROWS:
        assert re.fullmatch(r"\d\d_[a-z_]+", r.notebook), r
        if r.notebook in existing:
            # a notebook that exists must contain the section the row names
            assert concordance.status(r.notebook, r.section) == "covered", r


def test_status_reads_the_notebook_headings(tmp_path, monkeypatch):
    (tmp_path / "98_x.md").write_text("# T\n\n## 1. Real section\n\n```python\n# 2. not a heading\n```\n")
    monkeypatch.setattr(concordance, "NOTEBOOKS", tmp_path)
    concordance.notebook_headings.cache_clear()
    try:
        assert concordance.status("98_x", "1. Real section") == "covered"
        assert concordance.status("98_x", "2. not a heading") == "planned"
        assert concordance.status("99_missing", "1. Real section") == "planned"
    finally:
        concordance.notebook_headings.cache_clear()


def test_every_erratum_is_listed_under_its_document():
    listed = {(r.doc, e) for r in concordance.ROWS for e in r.errata}
    for e in errata.ERRATA:
        docs_listing = {d for d, eid in listed if eid == e.id}
        assert e.doc in docs_listing, f"{e.id} is not in [{e.doc}]'s concordance table"
    assert all(eid in {e.id for e in errata.ERRATA} for _, eid in listed)


def test_errata_chapters_exist_or_are_planned():
    existing = {p.stem for p in concordance.NOTEBOOKS.glob("[0-9][0-9]_*.md")}
    for e in errata.ERRATA:
        if e.chapter in existing:
            assert concordance.status(e.chapter, e.chapter_section) == "covered", e.id


def test_interview_questions_ten_and_four():
    qs = concordance.QUESTIONS
    assert [n for d, n, *_ in qs if d == "A"] == [str(i) for i in range(1, 11)]
    assert [n for d, n, *_ in qs if d == "D"] == ["Q1", "Q2", "Q3", "Q4"]
    assert len(concordance.questions_table().rows) == 14


def test_bad_document_letter():
    with pytest.raises(ValueError, match="doc"):
        concordance.table("F")
