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


def split_demo():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    return nbformat.v4.new_notebook(cells=[
        md("# 标题 title"),
        md("任务 task\n\n<!-- BEGIN SOLUTION -->\n推导 derivation: dL/dx = r (g - <g>)\n<!-- END SOLUTION -->\n\n后文 after"),
        code("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"),
        code("check(f)\nexpect('k', 1, '==', 1)  # solution-only"),
        code("expect('only', 1, '==', 1)  # solution-only"),
        md("<!-- BEGIN SOLUTION -->\n只有答案 answer note\n<!-- END SOLUTION -->"),
        md("参考写法 reference", metadata={"tags": ["solution"]}),
        code("class Good:  # a correct implementation in a demo\n    pass", metadata={"tags": ["solution"]}),
    ])


def test_learner_version_drops_every_kind_of_answer_and_the_empty_cells():
    nb = split_demo()
    assert nbtools.has_solutions(nb)
    learner = nbtools.versions(nb, learner=True)
    sources = [c.source for c in learner.cells]
    text = "\n".join(sources)
    for answer in ("2 * x", "dL/dx", "answer note", "参考写法", "class Good", "expect(", "SOLUTION"):
        assert answer not in text, answer
    assert sources[1] == "任务 task\n\n后文 after"
    assert sources[2] == "def f(x):\n    " + nbtools.BLANK and sources[3] == "check(f)"
    assert len(learner.cells) == 4 and all(s.strip() for s in sources)            # no empty leftover cell
    assert "学习版" in sources[0]


def test_solution_version_keeps_the_answers_without_the_markers():
    nb = split_demo()
    solution = nbtools.versions(nb, learner=False)
    text = "\n".join(c.source for c in solution.cells)
    assert len(solution.cells) == len(nb.cells)
    for answer in ("return 2 * x", "dL/dx", "answer note", "参考写法", "class Good", "expect('only', 1, '==', 1)"):
        assert answer in text, answer
    assert "SOLUTION" not in text and "solution-only" not in text and "学习版" not in text
    assert [c.source for c in nb.cells] == [c.source for c in split_demo().cells]  # the source is not changed


def test_markdown_or_tags_alone_make_a_solution_version():
    md = nbformat.v4.new_markdown_cell
    assert not nbtools.has_solutions(nbformat.v4.new_notebook(cells=[md("text"), nbformat.v4.new_code_cell("x = 1")]))
    assert nbtools.has_solutions(nbformat.v4.new_notebook(cells=[md("a\n<!-- BEGIN SOLUTION -->\nb\n<!-- END SOLUTION -->")]))
    assert nbtools.has_solutions(nbformat.v4.new_notebook(cells=[md("b", metadata={"tags": ["solution"]})]))
