"""tools/notebooks.py: the learner's copies never carry the speaker notes (they hold the answers)."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import notebooks as nbtools  # noqa: E402


def note_count(path: Path) -> int:
    return path.read_text(encoding="utf-8").count('"slide_type": "notes"')


def test_exported_copies_have_no_speaker_notes(tmp_path):
    assert sum(note_count(s) for s in nbtools.sources()) >= 10          # the sources do have notes
    written = nbtools.export(tmp_path, keep_existing=False)
    assert len(written) >= len(nbtools.sources())
    for path in written:
        nb = nbformat.read(path, 4)
        notes = [c for c in nb.cells if nbtools.is_teacher_note(c)]
        assert not notes, f"{path.name}: {len(notes)} speaker note(s) in a learner copy"
        assert not any("讲课提示" in c.source for c in nb.cells), path.name


def test_only_notes_are_removed():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("问题 question", metadata={"slideshow": {"slide_type": "slide"}}),
        nbformat.v4.new_markdown_cell("讲课提示：答案", metadata={"slideshow": {"slide_type": "notes"}}),
        nbformat.v4.new_code_cell("x = 1", metadata={"slideshow": {"slide_type": "notes"}}),
    ])
    kept = nbtools.without_teacher_notes(nb).cells
    assert [c.source for c in kept] == ["问题 question", "x = 1"]
