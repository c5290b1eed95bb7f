"""A pytest plugin: the test run's nbval executions are the book's, and the run reports where its time went.

Registered by tests/conftest.py (``pytest_configure``), so `python3 run.py test` and any pytest run over
tests/ use it. Three jobs:

1. **Each solution copy executed once per test run.** nbval stays the validator: it runs every code
   cell of build/nbval/NAME.ipynb in one kernel and fails the cell that raises. This plugin only
   listens. For a solution copy (one with a source notebooks/NAME.md) it starts nbval's kernel with
   the book's kernel environment (tools/execution.py KERNEL_ENV: inline PNG figures, static widgets),
   keeps every iopub message nbval reads, and when the notebook's last cell has passed it turns those
   messages into outputs with nbclient's own message handling (the code that `tools/book.py`'s
   executor uses: clear_output, display updates, widget state for the progress bars) and writes
   build/executed/NAME.ipynb under the book's cache key (execution.source_hash of the source read at
   the notebook's start). `python3 run.py book` after a test run then executes nothing. The figures
   go to build/figures/ as `tools/notebooks.py execute` writes them, and the executor's check stays:
   a notebook that calls plt.show() but drew no figure fails its last cell. A notebook that failed,
   or was not run whole, leaves a marker build/executed/NAME.nbval (its status in this run), so that
   the book's fixture (``wait_for_executions``) never waits for it.

2. **Order** (``pytest_collection_modifyitems``). Solution copies first, learner copies, then the module
   that builds the book, the other modules that need the built book or the executed notebooks
   (they use a fixture in BUILD_FIXTURES), and last the unit tests. run.py runs xdist with --dist
   loadscope --no-loadscope-reorder: a worker takes modules in this order and runs them in the order
   taken, so when a worker reaches a book test every notebook copy is done or being run by another
   worker, which runs nothing it took later first: the wait cannot deadlock.

3. **A time budget**: tools/time_budget.py (registered here, in the controller).

The learner copy runs top to bottom in a kernel of its own with live widgets (JupyterLab's path),
replaying the trainings its solution copy recorded in this run (normlab/runcache.py says when that is
exact; tests/test_runcache.py shows it bit for bit): issue 27 item 2.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import warnings
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import execution  # noqa: E402
import notebooks as nbtools  # noqa: E402
from learner_book import plain_code  # noqa: E402
from time_budget import RUNCACHE, TimeBudget, group_of  # noqa: E402,F401  (job 3; group_of for its test)

ROOT = execution.ROOT
EXECUTED = execution.EXECUTED
FIGURES = execution.FIGURES
RUNCACHE_VARIABLE = "NORMLAB_RUN_CACHE"   # normlab.runcache.VARIABLE (tools import no normlab at module level)
SETUP_TAG = "normlab-setup"     # the setup cell normlab.course adds to every exported copy (no source cell)
BROWSER_FIXTURES = {"browser", "lab"}     # tests that drive Chromium (time budget: "browser tests")
# The longest modules that need the build, longest first (build/time_budget.json of a run).
LATE_FIRST = ("test_slides_readable", "test_browser_book", "test_browser_widgets_course")
EARLY_FIRST = ("test_browser_lab", "test_hub", "test_browser_widgets", "test_run")   # of the others
BUILD_FIXTURES = {"book_url", "slides_url", "decks_url", "site_url", "executed_notebooks"}


def run_id() -> str:
    """The same for every xdist worker of one run."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"


def source_of(path: Path) -> Path | None:
    """notebooks/NAME.md for a solution copy build/nbval/NAME.ipynb; None for a learner copy.
    (NORMLAB_NBVAL_SOURCES: another folder of sources, for the plugin's own test.)"""
    src = Path(os.environ.get("NORMLAB_NBVAL_SOURCES") or nbtools.SOURCES) / (Path(path).stem + ".md")
    return src if src.exists() else None


def is_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell"


def marker(stem: str) -> Path:
    return EXECUTED / f"{stem}.nbval"


def write_marker(stem: str, status: str, why: str = "") -> None:
    EXECUTED.mkdir(parents=True, exist_ok=True)
    marker(stem).write_text(json.dumps({"run": run_id(), "status": status, "why": why}), encoding="utf-8")


def read_marker(stem: str) -> dict:
    try:
        data = json.loads(marker(stem).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if data.get("run") == run_id() else {}


# --- 1. recording nbval's execution of a solution copy ---------------------------------------------

class Recording:
    """What one copy's nbval run said (every iopub message, the execute request of each cell): a solution
    copy, or a learner copy (the learners' book takes its exercise cells' outputs: tools/learner_book.py)."""

    def __init__(self, src: Path, learner: bool = False):
        import jupytext

        self.src, self.text, self.learner = src, src.read_bytes(), learner
        self.stem = execution.executed_path(src, learner).stem
        self.hash = execution.source_hash(src, self.text)
        from normlab.course.predictions import learner_layout, with_prediction_cells

        self.nb = with_prediction_cells(jupytext.read(src), src.stem)   # notes included; the 先想一想 choices as exported
        if nbtools.has_solutions(self.nb):
            self.nb = nbtools.versions(self.nb, learner=learner)
            self.nb = learner_layout(self.nb) if learner else self.nb    # as normlab.course.learner_copy lays it out
        self.messages: list[dict] = []
        self.requests: dict[int, str] = {}          # nbval's cell number -> msg_id of its execute request
        self.failed = ""

    def listen(self, nbfile) -> None:
        """Keep each message nbval reads from the kernel and the id of each execute request."""
        get, execute, kernel = nbfile.get_kernel_message, nbfile.kernel.execute_cell_input, nbfile.kernel

        def get_message(*args, **kwargs):
            msg = get(*args, **kwargs)
            self.messages.append(msg)
            return msg

        def execute_cell_input(*args, **kwargs):
            msg_id = execute(*args, **kwargs)
            self.requests[self.current] = msg_id
            return msg_id

        self.current = -1
        nbfile.get_kernel_message = get_message
        kernel.execute_cell_input = execute_cell_input

    def notebook(self, nbval_cells: list) -> tuple[object, int]:
        """The executed notebook (the source's cells with nbval's outputs), and its figure count.
        Raises ValueError when the copy nbval ran is not the source's solution version."""
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionComplete

        nb = self.nb
        own = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        ran = [(k, c) for k, c in enumerate(nbval_cells) if SETUP_TAG not in c.metadata.get("tags", [])]
        if [plain_code(c.source) for _, c in ran] != [plain_code(nb.cells[i].source) for i in own]:   # 09: a learner copy
            raise ValueError("the copy nbval ran differs from the source (exported before the source changed?)")
        client = NotebookClient(nb, record_timing=False)
        client.reset_execution_trackers()
        client.clear_before_next_output = False
        where = {self.requests[k]: i for (k, _), i in zip(ran, own) if k in self.requests}
        for i in own:
            nb.cells[i].outputs, nb.cells[i].execution_count = [], None
        for msg in self.messages:
            i = where.get(msg.get("parent_header", {}).get("msg_id"))
            if i is None:
                continue
            try:
                client.process_message(msg, nb.cells[i], i)
            except CellExecutionComplete:
                pass
        for n, i in enumerate(own, 1):      # nbval runs cells without history: number them as a fresh kernel would
            nb.cells[i].execution_count = n
        client.set_widgets_metadata()
        nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3", "mimetype": "text/x-python",
                                        "codemirror_mode": {"name": "ipython", "version": 3},
                                        "file_extension": ".py", "nbconvert_exporter": "python",
                                        "version": ".".join(map(str, sys.version_info[:3]))}
        nb.metadata["normlab_hash"] = self.hash
        nb.metadata["normlab_executed_by"] = "nbval"
        return nbformat.from_dict(nb), sum("image/png" in o.get("data", {}) for i in own for o in nb.cells[i].outputs)

    def save(self, nbval_cells: list) -> str:
        """Write build/executed/NAME.ipynb and its figures (NAME_learner.ipynb: none); return a problem or ""."""
        import jupytext

        stem = self.stem
        try:
            nb, figures = self.notebook(nbval_cells)
        except Exception as err:      # never the run's failure: the book build executes this notebook itself
            write_marker(stem, "not recorded", repr(err))
            warnings.warn(f"{stem}: nbval's execution not recorded for the book ({err!r}); "
                          "the book build will execute it")
            return ""
        draws = any("plt.show()" in c.source for c in nb.cells if c.cell_type == "code")
        if draws and figures == 0 and not self.learner:
            write_marker(stem, "failed", "plt.show() drew no figure")
            return f"{stem}: plt.show() drew no figure into the notebook (the book would have none)"
        EXECUTED.mkdir(parents=True, exist_ok=True)
        jupytext.write(nb, EXECUTED / f"{stem}.ipynb")
        if not self.learner:
            execution.save_figures(nb, stem)
        write_marker(stem, "recorded")
        return ""


OUTPUT_TIMEOUT = 60   # s nbval waits for a cell's next output message after its reply (nbval's own: 5)


def runcache_dir() -> Path:
    """This run's folder of recorded trainings (normlab/runcache.py), one subfolder per lesson."""
    return RUNCACHE / run_id()


def learner_stem(path) -> str | None:
    """NAME for a learner copy build/nbval/NAME_learner.ipynb whose solution copy has a source; else None."""
    stem = Path(path).stem
    return stem.removesuffix("_learner") if stem.endswith("_learner") and source_of(Path(stem.removesuffix("_learner"))) else None


def wait_for_solution(stem: str, timeout: float = 300.0) -> float:
    """Before a learner copy starts: give its solution copy (taken first, usually done) time to finish,
    so that its trainings are there to replay. Never fails: without them the learner copy trains."""
    t0 = time.time()
    while not read_marker(stem).get("status") and time.time() - t0 < timeout:
        time.sleep(0.5)
    return time.time() - t0


@contextmanager
def kernel_env(env: dict):
    """os.environ with ``env`` while nbval starts a kernel (the kernel inherits it), then as it was."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """The first cell of a solution copy: nbval starts its kernel here, in the book's environment, and
    recording its trainings (normlab/runcache.py); the first cell of a learner copy: replaying them.
    Every cell: nbval's 5 s wait for the outputs after the reply becomes OUTPUT_TIMEOUT (on a loaded
    machine a cell's progress-bar messages came more than 5 s late and failed a learner copy)."""
    if is_cell(item):
        item.output_timeout = max(getattr(item, "output_timeout", 0), OUTPUT_TIMEOUT)
    nbfile = item.parent if is_cell(item) else None
    starting = nbfile is not None and nbfile.kernel is None
    src = source_of(nbfile.path) if starting else None
    learner = learner_stem(nbfile.path) if starting else None
    if learner is not None:
        charge("normlab_wait_s", wait_for_solution(learner))
        marker(f"{learner}_learner").unlink(missing_ok=True)
        with kernel_env({**execution.PREDICT_WAIT, RUNCACHE_VARIABLE: f"replay:{runcache_dir() / learner}"}):
            yield
        if nbfile.kernel is None:
            write_marker(f"{learner}_learner", "failed", "the kernel did not start")
        else:
            nbfile._normlab_recording = Recording(source_of(Path(learner)), learner=True)
            nbfile._normlab_recording.listen(nbfile)
        return
    if src is None:
        yield
        return
    marker(src.stem).unlink(missing_ok=True)
    for old in RUNCACHE.glob("*"):                  # earlier runs' recordings
        if old.name != run_id():
            shutil.rmtree(old, ignore_errors=True)
    with kernel_env({**execution.KERNEL_ENV, RUNCACHE_VARIABLE: f"record:{runcache_dir() / src.stem}"}):
        yield
    if nbfile.kernel is None:                       # the kernel did not start: nbval fails the cell
        write_marker(src.stem, "failed", "the kernel did not start")
        return
    nbfile._normlab_recording = Recording(src)
    nbfile._normlab_recording.listen(nbfile)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    rec = getattr(item.parent, "_normlab_recording", None) if is_cell(item) else None
    if rec is not None:
        rec.current = item.cell_num


PENDING: dict[str, float] = defaultdict(float)   # seconds a fixture spent, for the item being set up


def charge(key: str, seconds: float) -> None:
    """Book ``seconds`` (key normlab_build_s or normlab_wait_s) to the item whose setup is running: its
    setup report carries them to the controller (user_properties), which subtracts them from its group."""
    PENDING[key] += seconds


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "setup" and PENDING:
        report = outcome.get_result()
        report.user_properties = list(report.user_properties) + list(PENDING.items())
        PENDING.clear()
    if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):     # a browser test wherever it lives
        report = outcome.get_result()
        report.user_properties = list(report.user_properties) + [("normlab_group", "browser tests")]
    rec = getattr(item.parent, "_normlab_recording", None) if is_cell(item) else None
    if rec is None or rec.failed == "done":
        return
    report = outcome.get_result()
    if report.failed or (report.skipped and call.when == "call"):
        rec.failed = "done"
        write_marker(rec.stem, "failed" if report.failed else "not recorded", f"cell {item.cell_num}: {call.when}")
        return
    cells = [c for c in item.parent.nb.cells if c.cell_type == "code"]
    if call.when == "call" and item.cell_num == len(cells) - 1:
        rec.failed = "done"
        problem = rec.save(cells)
        if problem:
            report.outcome, report.longrepr = "failed", problem


def recorded_stems(items) -> list[str]:
    """The copies this session runs whole (NAME, NAME_learner): the executions the book and the slides use."""
    files = defaultdict(int)
    for item in items:
        if is_cell(item) and (source_of(item.parent.path) is not None or learner_stem(item.parent.path)):
            files[item.parent] += 1
    return sorted(f.path.stem for f, n in files.items()
                  if n == sum(c.cell_type == "code" for c in f.nb.cells))


def wait_for_executions(stems: list[str], timeout: float = 1800.0) -> float:
    """Wait until nbval has recorded (or given up on) each of ``stems`` in this run; return the seconds
    waited. A notebook that failed under nbval fails the caller: the book cannot have its outputs."""
    t0 = time.time()
    pending = list(stems)
    while pending:
        for stem in list(pending):
            status = read_marker(stem).get("status")
            if status == "failed":
                pytest.fail(f"{stem} failed under nbval ({read_marker(stem).get('why')}): the book and the "
                            "slides need its outputs; see that notebook's failing cell above")
            if status:
                pending.remove(stem)
        if pending and time.time() - t0 > timeout:
            pytest.fail(f"nbval did not finish {', '.join(pending)} within {timeout:.0f} s")
        if pending:
            time.sleep(0.5)
    return time.time() - t0


# --- 2. order ---------------------------------------------------------------------------------------

def expected_seconds(stem: str) -> float:
    """How long a notebook runs: the mean of its one-thread runs in the sweep's record
    (normlab/records/NAME.json, kept current by `run.py sweep`); 0 when unknown."""
    try:
        runs = json.loads((ROOT / "normlab" / "records" / f"{stem}.json").read_text(encoding="utf-8"))["runs"]
        times = [r["seconds"] for r in runs if r.get("threads") == 1 and r.get("seconds")]
        return sum(times) / len(times) if times else 0.0
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0


def pytest_collection_modifyitems(session, config, items):
    """The order of the run, module by module (xdist's loadscope hands them out in this order):
    0. the solution copies, longest first (the sweep's record says how long each runs);
    1. the learner copies (longest first): the learners' book shows the output of their exercise cells;
    2. the first module that needs the built book: the worker that takes it waits for the others' last
       notebooks and builds the book and the slides, while the others go on with
    3. the other modules that need the build or the executed notebooks (BUILD_FIXTURES);
    4. the other modules (unit tests), short ones last to fill the gaps.
    Longest first (LATE_FIRST of 1 and 3, EARLY_FIRST of 4): no long module runs alone at the end."""
    late = {item.module.__name__ for item in items if getattr(item, "module", None) is not None
            and BUILD_FIXTURES & set(getattr(item, "fixturenames", ()))}
    first, early = ({name: i for i, name in enumerate(names)} for names in (LATE_FIRST, EARLY_FIRST))
    builders = sorted((item.module.__name__ for item in items if getattr(item, "module", None) is not None
                       and item.module.__name__ in late and {"book_url", "slides_url", "decks_url"}
                       & set(item.fixturenames)), key=lambda name: first.get(name, len(first)))
    builder = builders[0] if builders else None

    def rank(item) -> tuple[int, float]:
        if is_cell(item):
            stem = item.parent.path.stem
            return (0, -expected_seconds(stem)) if source_of(item.parent.path) is not None else \
                (1, -expected_seconds(stem.removesuffix("_learner")))
        module = getattr(item, "module", None)
        name = module.__name__ if module is not None else ""
        return (2, 0.0) if name == builder else (3, first.get(name, len(first))) if name in late else \
            (4, early.get(name, len(early)))

    items[:] = [item for _, item in sorted(enumerate(items), key=lambda p: (rank(p[1]), p[0]))]


def pytest_configure(config):
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False      # xdist keeps the order above (its default sorts by size)
    if not hasattr(config, "workerinput"):          # the controller (or a run without xdist) reports
        config.pluginmanager.register(TimeBudget(), "normlab-time-budget")
