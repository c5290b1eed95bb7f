"""Review is part of done (issue 35 item 3): the notes of each fresh reading are committed in
notebooks/reviews/NN.md in the form notebooks/README.md describes ("Where the notes go"):

- one file per lesson (00.md for readings that span the course), each reading a "## " section;
- each reading names the commit it read and either says 无发现 or has the findings table;
- each finding has a category (错误 / 误导 / 无据 / 不准), a place, what the reader found, what was done
  (已改 with a commit, 已答 with the evidence, 未改 with the reason) and the check that guards it.

Cheap: reads a few small text files (well under 0.1 s).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REVIEWS = ROOT / "notebooks" / "reviews"
HEADER = ["#", "类别", "位置", "读者发现的", "处理", "守护"]
CATEGORIES = {"错误", "误导", "无据", "不准"}
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
READ_AT = re.compile(r"^读的版本 \(commit\)[:：]\s*([0-9a-f]{7,40})\s*$", re.M)
NOTHING = "无发现"


def readings(text: str) -> list[tuple[str, str]]:
    """(title, body) of each "## " section."""
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    return [(p.splitlines()[0].strip(), p) for p in parts]


def table_rows(body: str) -> tuple[list[str] | None, list[list[str]]]:
    """The findings table: its header cells and its rows' cells (the |---| line skipped)."""
    lines = [ln.strip() for ln in body.splitlines() if ln.strip().startswith("|")]
    if not lines:
        return None, []
    cells = lambda ln: [c.strip() for c in ln.strip("|").split("|")]
    return cells(lines[0]), [cells(ln) for ln in lines[2:]]


def problems_of(text: str) -> list[str]:
    out = []
    sections = readings(text)
    if not sections:
        return ["no reading (a '## ' section per reading)"]
    for title, body in sections:
        if not READ_AT.search(body):
            out.append(f"{title}: no line '读的版本 (commit): <sha>'")
        header, rows = table_rows(body)
        if header is None:
            if NOTHING not in body:
                out.append(f"{title}: neither a findings table nor '{NOTHING}'")
            continue
        if header != HEADER:
            out.append(f"{title}: the table's header should be {' | '.join(HEADER)}")
            continue
        if not rows:
            out.append(f"{title}: a findings table without rows")
        for row in rows:
            if len(row) != len(HEADER):
                out.append(f"{title}: row {row[:1]} has {len(row)} cells, not {len(HEADER)}")
                continue
            n, category, place, found, done, guard = row
            where = f"{title} #{n}"
            if category.split()[0] not in CATEGORIES:
                out.append(f"{where}: category {category!r} is not one of {sorted(CATEGORIES)}")
            if not place or not found:
                out.append(f"{where}: where and what the reader found must both be said")
            if not done.startswith(("已改", "已答", "未改")):
                out.append(f"{where}: 处理 should start with 已改, 已答 or 未改")
            elif done.startswith("已改") and not COMMIT.search(done):
                out.append(f"{where}: 已改 without the commit that fixed it")
            elif len(done) < 8:
                out.append(f"{where}: say what was done (or the evidence, or why not)")
            if not guard:
                out.append(f"{where}: name the check that guards it, or '—（只是措辞）'")
    return out


FILES = sorted(REVIEWS.glob("*.md"))


def test_review_notes_exist_and_are_named_by_lesson():
    assert FILES, "notebooks/reviews/ holds no review notes"
    for path in FILES:
        assert path.name == "README.md" or re.fullmatch(r"\d{2}\.md", path.name), path.name


@pytest.mark.parametrize("path", [p for p in FILES if p.name != "README.md"], ids=lambda p: p.name)
def test_review_notes_have_the_form(path):
    problems = problems_of(path.read_text(encoding="utf-8"))
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_a_note_without_a_guard_or_a_commit_fails():
    good = ("## 2026-11-27 · a reading\n\n读的版本 (commit): 90bb4d0\n\n| " + " | ".join(HEADER) + " |\n"
            "|---|---|---|---|---|---|\n| 1 | 错误 | 05 §1 | out_proj 的 std | 已改 0dbbe13：按代码实际走的路径 | `tests/test_init.py` |\n")
    assert problems_of(good) == []
    assert problems_of(good.replace("`tests/test_init.py`", "")), "an empty guard must fail"
    assert problems_of(good.replace("已改 0dbbe13", "已改 (later)")), "已改 without a commit must fail"
    assert problems_of(good.replace("| 错误 |", "| 有点问题 |")), "an unknown category must fail"
    assert problems_of(good.replace("读的版本 (commit): 90bb4d0\n", "")), "a reading must name its commit"
    assert problems_of("## 2026-11-28 · nothing\n\n读的版本 (commit): abcdef1\n\n无发现：清单 1–6。\n") == []
