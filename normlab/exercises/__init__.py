"""练习 (exercises) at the end of each lesson, with checks that name the mistake.

    from normlab import exercises
    exercises.list_for("02")                  # the lesson's exercises, as a table
    report = exercises.check("02.1", my_bn_eval)
    report                                    # renders like a drill report; report.passed

Each exercise asks the learner to write or change code: a function (or class) is the answer. The
learner version of a notebook (tools/notebooks.py) leaves ``raise NotImplementedError`` in its
body; the check then reports "还没有写 (not written yet)" instead of crashing. Checks compare with
an independent reference (torch modules, autograd, the lesson's machinery) and name real mistakes
(the wrong axis, the unbiased variance, eps outside the root, the other momentum convention ...).
How to write a checker: base.py. Exercises per lesson: l01.py, l02.py, ... (each imports base).

A wing of the package: imports core, lessons and normlab.drills.report (Finding, Report, the
guarded call); nothing imports it but notebooks and tests.
"""

from __future__ import annotations

import importlib
import logging

from .base import REGISTRY, Exercise, ExerciseReport, Finding, exercise, list_for, run

# Lesson modules register their exercises on import; a module not written yet is skipped.
LESSON_MODULES = ("l01", "l02", "l03", "l04", "l05", "l06", "l07")
for _name in LESSON_MODULES:
    try:
        importlib.import_module(f".{_name}", __name__)
    except ModuleNotFoundError as _err:
        if _err.name != f"{__name__}.{_name}":
            raise
del _name


def check(id: str, answer: object) -> ExerciseReport:
    """Check ``answer`` against exercise ``id`` ("02.1"); returns a report, never raises for a
    mistake in the answer."""
    report = run(id, answer)
    # The class service's client listens here when a hub runs it (normlab/classroom/client.py); else no-op.
    logging.getLogger("normlab.events").info("check %s %s", id, report.passed, extra={"normlab_event": {
        "kind": "check", "id": id, "passed": report.passed, "findings": [f.id for f in report.failed]}})
    return report


__all__ = ["check", "list_for", "exercise", "REGISTRY", "Exercise", "ExerciseReport", "Finding"]
