"""The instructor guide (book/instructor.md, issue 18 item 6) is true of the course it plans:

- every lesson 01-09 has a section "## NN · ..." with its 90-minute plan, an in-class exercise,
  homework, the misconceptions to correct and the slow cells;
- each plan's minutes add up to 90;
- every section the guide names in 「」 is a heading of that lesson's notebook source (a renamed
  section fails here instead of leaving the guide pointing at nothing);
- every exercise id the guide names (`02.1`) is registered in normlab.exercises, belongs to that
  lesson, and every registered exercise of the lesson is named (the homework lists them all);
- every drill card it names (① ... ⑨) is a card of 08_drills.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "book" / "instructor.md"
NOTEBOOKS = ROOT / "notebooks"
LESSONS = [f"{n:02d}" for n in range(1, 10)]
MINUTES = 90
SUBSECTIONS = ["### 90 分钟安排", "### 课堂练习", "### 作业", "### 要纠正的误解", "### 现场运行较慢的单元格"]
CIRCLED = "①②③④⑤⑥⑦⑧⑨⑩"
EXERCISE_ID = re.compile(r"`(\d{2}\.\d+)`")
SECTION_REF = re.compile(r"「([^」]+)」")


def notebook(lesson: str) -> Path:
    (path,) = NOTEBOOKS.glob(f"{lesson}_*.md")
    return path


def headings(lines: list[str]) -> set[str]:
    """Heading titles (without the #s) of a MyST notebook source, code fences skipped."""
    titles, fenced = set(), False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"(#{1,6})\s+(.+?)\s*$", line)
        if m and not fenced:
            titles.add(m.group(2))
    return titles


def notebook_headings(lesson: str) -> set[str]:
    return headings(notebook(lesson).read_text(encoding="utf-8").splitlines())


def lesson_sections(text: str) -> dict[str, str]:
    """"01" -> the guide's text from "## 01 · ..." up to the next "## " heading."""
    out, current, buf = {}, None, []
    for line in text.splitlines():
        if line.startswith("## "):
            if current:
                out[current] = "\n".join(buf)
            m = re.match(r"## (\d{2}) · ", line)
            current, buf = (m.group(1) if m else None), []
        buf.append(line)
    if current:
        out[current] = "\n".join(buf)
    return out


def plan_rows(section: str) -> list[list[str]]:
    """The cells of each row of the lesson's plan table (the table whose header starts with 分钟)."""
    lines = section.splitlines()
    start = next((i for i, l in enumerate(lines) if re.match(r"\|\s*分钟\s*\|", l)), None)
    if start is None:
        return []
    rows = []
    for line in lines[start + 2:]:                 # skip the header and the |---| line
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def unknown_sections(section: str, titles: set[str]) -> list[str]:
    """Sections named in 「」 that are not headings of the notebook."""
    return [s for s in SECTION_REF.findall(section) if s not in titles]


GUIDE_TEXT = GUIDE.read_text(encoding="utf-8")
SECTIONS = lesson_sections(GUIDE_TEXT)


def test_every_lesson_has_a_section():
    assert sorted(SECTIONS) == LESSONS, f"lesson sections in {GUIDE.name}: {sorted(SECTIONS)}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_section_has_every_part(lesson):
    section = SECTIONS[lesson]
    missing = [s for s in SUBSECTIONS if s not in section.splitlines()]
    assert not missing, f"lesson {lesson}: missing {missing}"
    assert f"notebooks/{notebook(lesson).name}" in section, f"lesson {lesson} does not name its notebook"
    assert "待定" not in section, f"lesson {lesson} still has a placeholder (待定)"


@pytest.mark.parametrize("lesson", LESSONS)
def test_plan_minutes_add_up_to_90(lesson):
    rows = plan_rows(SECTIONS[lesson])
    assert rows, f"lesson {lesson}: no plan table (header starting with 分钟)"
    minutes = [int(r[0]) for r in rows]
    assert all(m > 0 for m in minutes), minutes
    assert sum(minutes) == MINUTES, f"lesson {lesson}: {' + '.join(map(str, minutes))} = {sum(minutes)} minutes"


@pytest.mark.parametrize("lesson", LESSONS)
def test_plan_rows_name_a_section_and_say_where(lesson):
    """Each plan row says which part of the lesson it covers and whether it is slides or JupyterLab."""
    for row in plan_rows(SECTIONS[lesson]):
        assert len(row) == 5, row
        assert row[1], row
        assert any(w in row[3] for w in ("幻灯片", "JupyterLab", "黑板", "网页版")), row


@pytest.mark.parametrize("lesson", LESSONS)
def test_named_sections_are_headings_of_the_notebook(lesson):
    section = SECTIONS[lesson]
    assert SECTION_REF.search(section), f"lesson {lesson} names no section of its notebook"
    missing = unknown_sections(section, notebook_headings(lesson))
    assert not missing, f"{notebook(lesson).name} has no heading {missing}: update book/instructor.md"


def test_a_renamed_section_fails():
    titles = notebook_headings("03")
    section = SECTIONS["03"]
    assert not unknown_sections(section, titles)
    renamed = {t.replace("谁和谁共用一组统计量", "谁和谁共享统计量") for t in titles}
    assert set(unknown_sections(section, renamed)) == {"2. 谁和谁共用一组统计量？"}


def test_headings_skip_code_fences():
    lines = ["## 1. 真的", "```{code-cell} ipython3", "# 不是标题", "```", "### 1.1 也是"]
    assert headings(lines) == {"1. 真的", "1.1 也是"}


@pytest.mark.parametrize("lesson", LESSONS)
def test_drill_cards_exist(lesson):
    cards = {t[0] for t in notebook_headings("08") if t and t[0] in CIRCLED}
    named = set(re.findall(f"[{CIRCLED}]", SECTIONS[lesson]))
    assert named <= cards, f"lesson {lesson} names cards {sorted(named - cards)} that 08_drills does not have"


def test_drill_cards_are_homework_for_every_lesson_with_an_interview_box():
    """Each lesson's homework names at least one drill card."""
    for lesson in LESSONS:
        homework = SECTIONS[lesson].split("### 作业", 1)[1].split("###", 1)[0]
        assert re.search(f"卡片.*[{CIRCLED}]", homework), f"lesson {lesson}: homework names no drill card"


@pytest.mark.parametrize("lesson", LESSONS)
def test_exercise_ids_are_registered(lesson):
    exercises = pytest.importorskip("normlab.exercises", reason="normlab.exercises is not there yet")
    named = set(EXERCISE_ID.findall(SECTIONS[lesson]))
    registered = {i for i, e in exercises.REGISTRY.items() if e.lesson == lesson}
    if not registered:
        if named:
            pytest.skip(f"lesson {lesson}: no exercise registered yet (normlab/exercises/l{lesson}.py); "
                        f"the guide names {sorted(named)}")
        return
    assert named <= set(exercises.REGISTRY), f"lesson {lesson}: unknown exercise ids {sorted(named - set(exercises.REGISTRY))}"
    assert {i[:2] for i in named} <= {lesson}, f"lesson {lesson} names another lesson's exercises: {sorted(named)}"
    assert registered <= named, f"lesson {lesson}: the homework should list {sorted(registered - named)}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_recorded_numbers_in_the_guide_hold_on_the_lessons_record(lesson):
    """A number the guide quotes with a ``<!--rec KEY FORM-->`` marker holds for every recorded run of
    that lesson's record (the check the notebooks' prose gets in tests/test_record.py), and the prose
    before an X..Y marker quotes X and Y."""
    from test_record import MARKER, load_record, markers_problems

    text = lesson_sections(GUIDE.read_text(encoding="utf-8"))[lesson]
    markers = [(m.group(1), m.group(2), text[max(0, m.start() - 40): m.start()]) for m in MARKER.finditer(text)]
    if not markers:
        pytest.skip("no <!--rec--> marker in this section")
    rec = load_record(notebook(lesson).stem)
    assert rec is not None, f"{lesson}: the guide quotes recorded numbers but the lesson has no record"
    problems = markers_problems(rec, markers)
    assert not problems, f"instructor.md, lesson {lesson}:\n" + "\n".join(problems)


def test_a_guide_number_that_drifted_from_the_record_fails():
    from test_record import load_record, marker_problem, values_of

    vals = values_of(load_record("02_batchnorm"), "ics.noisy/bn_drift")
    assert marker_problem("324..358", vals) is None
    assert marker_problem("1900..2100", vals) is not None          # "两千倍", the number the guide had
