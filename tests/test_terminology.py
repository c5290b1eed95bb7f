"""One word per idea: the terminology table of notebooks/README.md, enforced in the prose."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
TEXTS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md")) + sorted((ROOT / "normlab").rglob("*.py"))
# Words that must not appear, and why (the preferred word is in notebooks/README.md's table).
BANNED = {
    "主干": "residual stream is 残差流 (主干 reads as backbone)",
    "恒等支路": "identity path is 恒等路径",
    "诚实地说": "a calque of 'honestly'; say what was measured instead",
}


def test_table_names_the_banned_words():
    table = README.split("## 术语表", 1)[1]
    for word in ("主干", "恒等支路"):
        assert word in table
    for term in ("残差流", "分支", "恒等路径", "Pre-Norm"):
        assert re.search(rf"^\| {re.escape(term)}", table, re.M), term


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_banned_word(path):
    text = path.read_text(encoding="utf-8")
    found = [f"{w} (line {text[:text.index(w)].count(chr(10)) + 1}): {why}" for w, why in BANNED.items() if w in text]
    assert not found, found
