"""Every `normlab/...` path the course cites exists (issue 28 item 3).

The lessons, the book pages and the README send the learner to files ("the code is in
`normlab/lessons/beyond.py`"); a file that was moved leaves the learner looking for nothing. This
test reads notebooks/*.md, book/*.md and README.md, finds every path that starts with `normlab/`
and checks it against the repository. Placeholders written with NN (`normlab/records/NN_name.json`)
must match at least one file once NN is read as two digits and `name` as any name.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.glob("notebooks/*.md"), *ROOT.glob("book/*.md"), ROOT / "README.md"])
# A path starts at "normlab/" not preceded by a path character (so `~/.normlab/drills.json`, the
# learner's progress file in the home folder, and `foo/normlab/x` are not read as repository paths).
CITED = re.compile(r"(?<![\w./~-])normlab/[\w./*-]*")


def cited_paths(text: str) -> list[str]:
    """The `normlab/...` paths in a text, without trailing sentence punctuation."""
    return [m.group(0).rstrip(".,;:") for m in CITED.finditer(text)]


# Folders that exist only in a built wheel: setup.py writes them (the test checks setup.py names them).
BUILT_BY_SETUP = ("normlab/_course/",)


def missing(path: str, root: Path = ROOT) -> bool:
    """True when the cited path names nothing in the repository (a placeholder: nothing it could be)."""
    built = next((b for b in BUILT_BY_SETUP if path.startswith(b)), None)
    if built:
        setup = root / "setup.py"
        return not (setup.exists() and built.split("/")[1] in setup.read_text(encoding="utf-8"))
    if "NN" in path:                               # a placeholder: NN_name.json, lessons/NN
        pattern = path.replace("NN", "[0-9][0-9]").replace("_name", "_*")
        return not any(root.glob(pattern.rstrip("/")))
    if "*" in path:
        return not any(root.glob(path.rstrip("/")))
    return not (root / path).exists()


def test_the_pattern_finds_paths_and_skips_home_files():
    text = ("代码在 `normlab/lessons/beyond.py`，记录在 normlab/records/NN_name.json。进度在 "
            "`~/.normlab/drills.json`；见 normlab/norms.py.")
    assert cited_paths(text) == ["normlab/lessons/beyond.py", "normlab/records/NN_name.json", "normlab/norms.py"]


def test_a_moved_file_is_caught(tmp_path):
    """The check can fail: the two paths issue 28 found stale are missing in a tree that lacks them."""
    (tmp_path / "normlab" / "lessons").mkdir(parents=True)
    (tmp_path / "normlab" / "lessons" / "beyond.py").write_text("", encoding="utf-8")
    assert missing("normlab/beyond.py", tmp_path)
    assert missing("normlab/distributed.py", tmp_path)
    assert not missing("normlab/lessons/beyond.py", tmp_path)
    assert missing("normlab/records/NN_name.json", tmp_path)       # no record at all: the placeholder fails too
    assert missing("normlab/_course/", tmp_path)                   # a wheel-only folder that no setup.py writes


def test_sources_are_found():
    names = {p.name for p in SOURCES}
    assert {"README.md", "07_beyond.md", "instructor.md"} <= names, names


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_cited_normlab_path_exists(src):
    text = src.read_text(encoding="utf-8")
    bad = sorted({p for p in cited_paths(text) if missing(p)})
    assert not bad, f"{src.relative_to(ROOT)} cites paths that do not exist: {bad}"
