"""The test run's time budget (issue 27 item 4): after the run, the ten slowest items (setup + call +
teardown) and the total of each group, so that a regression shows where it comes from; every item's
time also goes to build/time_budget.json. Registered by tools/nbval_book.py in the controller (or in
a run without xdist). The book's build time and the waits for nbval are measured inside the fixtures
(nbval_book.charge) and arrive with the setup report of the item that triggered them (user_properties).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNCACHE = ROOT / "build" / "runcache"        # normlab/runcache.py's recordings, one folder per test run
REPORT = ROOT / "build" / "time_budget.json"
GROUPS = ("unit tests", "nbval solution copies", "nbval learner copies", "book/slides build",
          "waiting for nbval", "browser tests")


def group_of(nodeid: str, tagged: str = "") -> str:
    """An item's group: its path says nbval copies; ``tagged`` (from its report) says a browser test."""
    path = nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        return "nbval learner copies" if Path(path).stem.endswith("_learner") else "nbval solution copies"
    return tagged or ("browser tests" if Path(path).name.startswith("test_browser_") else "unit tests")


class TimeBudget:
    """Collects every report's duration (in the controller under xdist) and prints the summary."""

    def __init__(self):
        self.items: dict[str, float] = defaultdict(float)
        self.groups: dict[str, float] = defaultdict(float)
        self.ended: list[tuple[str, str, float]] = []
        self.t0 = time.time()

    def pytest_runtest_logreport(self, report):
        spent = dict(p for p in report.user_properties if isinstance(p, tuple) and len(p) == 2)
        build, wait = spent.get("normlab_build_s", 0.0), spent.get("normlab_wait_s", 0.0)
        self.items[report.nodeid] += max(report.duration - build - wait, 0.0)
        node = getattr(getattr(report, "node", None), "gateway", None)
        if report.when == "teardown" or report.outcome != "passed":       # when each item ended, on which worker
            self.ended.append((report.nodeid, getattr(node, "id", "main"), round(time.time() - self.t0, 1)))
        if build:
            self.items[f"[book/slides build, in the setup of] {report.nodeid}"] += build
        self.groups["book/slides build"] += build
        self.groups["waiting for nbval"] += wait
        self.groups[group_of(report.nodeid, spent.get("normlab_group", ""))] += max(report.duration - build - wait, 0.0)

    def pytest_terminal_summary(self, terminalreporter):
        if not self.items:
            return
        tr = terminalreporter
        tr.write_sep("=", "time budget (issue 27): where the test run's time went")
        tr.write_line("the ten slowest items (setup + call + teardown, s):")
        for nodeid, s in sorted(self.items.items(), key=lambda p: -p[1])[:10]:
            tr.write_line(f"  {s:7.1f}  {nodeid}")
        tr.write_line("total per group (s, summed over the workers):")
        for group in GROUPS:
            tr.write_line(f"  {self.groups.get(group, 0.0):7.1f}  {group}")
        tr.write_line(f"  {sum(self.groups.values()):7.1f}  all items; {time.time() - self.t0:.0f} s of wall time")
        if not any(".ipynb::" in k for k in self.items):      # a run of a few tests keeps the last full report
            return
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps({"groups": self.groups, "items": dict(sorted(self.items.items(), key=lambda p: -p[1])),
                                      "wall_s": time.time() - self.t0, "ended": self.ended}, indent=1), encoding="utf-8")
        replayed = replay_summary(since=self.t0)
        if replayed:
            tr.write_line("learner copies, trainings replayed from their solution copy's run (normlab/runcache.py):")
            for stem, (n, seconds) in sorted(replayed.items()):
                tr.write_line(f"  {stem}: {n} calls, {seconds:.1f} s of training not repeated")


def replay_summary(since: float = 0.0) -> dict[str, tuple[int, float]]:
    """{lesson: (calls replayed, seconds their recording took)} from the replays.log files of the newest
    run's recordings (none when no recording is newer than ``since``: this run made none)."""
    runs = sorted((d for d in RUNCACHE.glob("*") if d.stat().st_mtime >= since),
                  key=lambda d: d.stat().st_mtime) if RUNCACHE.exists() else []
    out = {}
    for log in (runs[-1].glob("*/replays.log") if runs else ()):
        seconds = [float(line.split("\t")[0]) for line in log.read_text(encoding="utf-8").splitlines() if line]
        out[log.parent.name] = (len(seconds), sum(seconds))
    return out
