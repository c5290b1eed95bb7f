"""normlab.exercises: the registry, the guarded check, and the exercises of lessons 01-03
(each textbook solution passes; each real mistake is named by its finding id; the learner's blank
gives the "not written" finding; the learner export of 01-03 holds no solution code)."""

from __future__ import annotations

import pytest
import torch

from normlab import exercises
from normlab.exercises import base
from normlab.exercises.base import call, exercise, fail, ok, step


def blank(*args, **kwargs):
    raise NotImplementedError("在这里写出你的实现 (write your implementation here)")


# --------------------------------------------------------------------------- the infrastructure

@pytest.fixture
def demo():
    @exercise("99.1", title="平方 (square)", target_minutes=3)
    def check(answer):
        out = []
        with step(out, "value"):
            got = call(answer, 3)
            out.append(ok("value", "3² = 9") if got == 9 else fail("value", "3² 应为 9", input=3, expected=9, got=got))
        with step(out, "tensor"):
            x = torch.arange(4.0)
            got = call(answer, x)
            out.append(ok("tensor", "逐元素") if base.close(got, x * x) else fail("tensor", "应逐元素平方", expected=x * x, got=got))
        return out
    yield "99.1"
    base.REGISTRY.pop("99.1")


def test_a_right_answer_passes(demo):
    report = exercises.check(demo, lambda v: v * v)
    assert report.passed and report.ids(failed_only=False) == {"value", "tensor"}
    assert "通过 PASSED" in str(report) and "2/2" in report._repr_html_()


def test_the_learners_blank_is_not_written(demo):
    report = exercises.check(demo, blank)
    assert not report.passed and report.ids() == {"not_written"}
    assert "还没有写 (not written yet)" in str(report)


def test_an_exception_becomes_a_finding_of_its_step(demo):
    report = exercises.check(demo, lambda v: v * v if isinstance(v, int) else v.foo())
    assert report.ids() == {"tensor"} and "AttributeError" in str(report)
    assert exercises.check(demo, None).ids() == {"value", "tensor"}          # not callable: named, no crash


def test_a_wrong_value_shows_its_counterexample(demo):
    report = exercises.check(demo, lambda v: v + v)
    assert report.ids() == {"value", "tensor"}
    assert "expected: 9" in str(report) and "got: 6" in str(report)


def test_a_runaway_answer_is_stopped(demo):
    def forever(v):
        while True:
            pass
    report = exercises.check(demo, forever)
    assert not report.passed and "time limit" in str(report)


def test_a_broken_checker_reports_instead_of_crashing():
    @exercise("99.2", title="坏的检查 (broken checker)")
    def check(answer):
        raise KeyError("oops")
    try:
        assert exercises.check("99.2", lambda: 0).ids() == {"checker"}
    finally:
        base.REGISTRY.pop("99.2")


def test_ids_and_unknown_exercises_are_refused():
    with pytest.raises(ValueError, match="02.1"):
        exercise("2.1", title="x")
    with pytest.raises(ValueError, match="unknown exercise"):
        exercises.check("99.9", None)


def test_list_for_gives_a_table(demo):
    table = exercises.list_for("99")
    assert table.rows == [["99.1", "平方 (square)", 3]]
    assert exercises.list_for(99).rows == table.rows
