"""Concordance: every section of the five source documents [A]..[E] -> where the course covers it,
and the one table of course section titles that the errata, the claims and notebook 09 refer to.

Data, shipped in the package (nothing here reads ../notebooks):

    sections.toml      label ("02.mom") -> (notebook, section title); which sections are prose only
    concordance.toml   each document's title and headings; one row per heading (or part of one):
                       the section (a label), a phrase that section's text must contain, the errata in it;
                       the interview questions of [A] and [D] and where they are answered

A row's status is its section's: "covered" (the section has code cells, which the notebook run
executes) or "text" (answered in prose: the course map, the model answers, the references).
``tests/test_concordance.py`` checks every title against the notebook's headings, every phrase
against the section's text and every status against its cells.

    from normlab.companion import concordance
    concordance.table("A")          # one document's concordance as a Table
    concordance.questions_table()   # the interview questions, and where they are answered
    concordance.section("02.mom")   # Section(label='02.mom', notebook='02_batchnorm', title='3. ...')
"""

from __future__ import annotations

from dataclasses import dataclass

from ..viz import Table
from .base import load_toml

__all__ = ["Section", "SECTIONS", "section", "InCourse", "DOCS", "HEADINGS", "Row", "ROWS", "Question", "QUESTIONS",
           "MODEL_ANSWERS", "STATUSES", "rows_of", "table", "questions_table"]

STATUSES = ("covered", "text")


@dataclass(frozen=True)
class Section:
    label: str              # "02.mom"
    notebook: str           # "02_batchnorm"
    title: str              # the heading, exactly as the notebook has it
    status: str             # "covered" (has code cells) or "text" (prose only)

    def __str__(self) -> str:
        return f"{self.notebook} · {self.title}"


def _sections() -> dict[str, Section]:
    data = load_toml("sections.toml")
    text_only = set(data.pop("text_only"))
    out = {}
    for notebook, titles in data.items():
        for key, title in titles.items():
            label = f"{notebook[:2]}.{key}"
            out[label] = Section(label, notebook, title, "text" if label in text_only else "covered")
    unknown = text_only - set(out)
    if unknown:
        raise ValueError(f"sections.toml: text_only names unknown labels {sorted(unknown)}")
    return out


SECTIONS: dict[str, Section] = _sections()


def section(label: str) -> Section:
    """The course section with this label (e.g. "02.mom")."""
    if label not in SECTIONS:
        raise KeyError(f"没有标签为 {label!r} 的课程小节 (no course section with this label)；"
                       f"标签形如 '02.mom'，见 normlab/companion/sections.toml。")
    return SECTIONS[label]


class InCourse:
    """A record that names a course section by its label (``course``): a concordance row, an
    interview question, an erratum, a claim."""
    course: str

    @property
    def place(self) -> Section:
        """The course section: .notebook, .title, .status."""
        return section(self.course)


@dataclass(frozen=True)
class Row(InCourse):
    doc: str                # "A".."E"
    heading: str            # one of HEADINGS[doc]
    part: str               # what in that section (our words); "" for the whole section
    course: str             # the course section's label
    phrase: str             # text that the course section must contain (checked by the tests)
    errata: tuple[str, ...] = ()


@dataclass(frozen=True)
class Question(InCourse):
    doc: str                # "A" or "D"
    number: str             # "1".."10", "Q1".."Q4"
    question: str           # the question, short, our words
    course: str             # the course section's label
    phrase: str             # text that the section must contain (checked by the tests)


_DATA = load_toml("concordance.toml")
DOCS: dict[str, str] = {doc: d["title"] for doc, d in _DATA["docs"].items()}
HEADINGS: dict[str, list[str]] = {doc: d["headings"] for doc, d in _DATA["docs"].items()}
ROWS: list[Row] = [Row(doc, r["heading"], r["part"], r["course"], r["phrase"], tuple(r.get("errata", ())))
                   for doc, rows in _DATA["rows"].items() for r in rows]
QUESTIONS: list[Question] = [Question(**q) for q in _DATA["questions"]]
MODEL_ANSWERS: str = _DATA["model_answers"]          # the label of 08's section with the model answers

_LABEL = {"covered": "✓ 可运行", "text": "✓ 文字"}


def rows_of(doc: str) -> list[Row]:
    if doc not in DOCS:
        raise ValueError(f"doc 应为 {'/'.join(DOCS)} 之一 (expected a document letter)，实际收到 {doc!r}。")
    return [r for r in ROWS if r.doc == doc]


def table(doc: str) -> Table:
    """One document's concordance: its section, the part, the course notebook + section, status, errata."""
    rows = [[f"[{r.doc}] {r.heading}", r.part, r.place.notebook, r.place.title, _LABEL[r.place.status],
             ", ".join(r.errata) or "—"] for r in rows_of(doc)]
    return Table(rows, ["资料章节", "内容", "notebook", "课程小节", "状态", "勘误"],
                 title=f"[{doc}] {DOCS[doc]}：章节对照")


def questions_table() -> Table:
    """The interview questions of [A] and [D], where the course answers them (model answers in 08)."""
    rows = [[f"[{q.doc}] {q.number}", q.question, q.place.notebook, q.place.title, _LABEL[q.place.status]]
            for q in QUESTIONS]
    return Table(rows, ["题号", "问题", "notebook", "课程小节", "状态"],
                 title=f"资料中的面试题 → 课程中的回答（参考答案：{section(MODEL_ANSWERS)}）")
