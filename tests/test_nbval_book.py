"""tools/nbval_book.py: nbval's execution of a notebook, saved for the book, equals the book's own executor's
(tools/execution.py, nbclient), output for output; the run's order keeps the book's tests after every
notebook copy; the time budget sorts items into their groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import execution  # noqa: E402
import nbval_book  # noqa: E402
import static_outputs  # noqa: E402

PROBE = "99_nbval_probe"
CELLS = [
    'print("归一化 stdout")\nimport sys\nprint("stderr", file=sys.stderr)',
    "from IPython.display import clear_output, display\ndisplay('first')\nclear_output(wait=True)\ndisplay('second')",
    "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.show()",
    "from tqdm.auto import tqdm\nfor _ in tqdm(range(5), desc='train'):\n    pass",
    "h = display('shown', display_id=True)\nh.update('updated')",
    "def answer():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION",
    "try:\n    print('answer', answer())\nexcept NotImplementedError:\n    print('not written yet')",
    "6 * 7",
]


def probe_source(folder: Path) -> Path:
    header = (ROOT / "notebooks" / "00_course_map.md").read_text(encoding="utf-8").split("---", 2)[1]
    body = "".join(f"\n```{{code-cell}} ipython3\n{c}\n```\n" for c in CELLS)
    src = folder / f"{PROBE}.md"
    src.write_text(f"---{header}---\n\n# 探针 probe\n{body}", encoding="utf-8")
    return src


def shape(nb) -> list:
    """Each code cell's outputs as what a reader sees: type, MIME types, text (figures by presence)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        out.append([(o.output_type, o.get("name"), sorted(o.get("data", {})),
                     o.get("text") or o.get("data", {}).get("text/plain")) for o in cell.outputs])
    return out


def progress(nb) -> list:
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return [static_outputs.progress_text(state, o["data"][static_outputs.WIDGET_MIME]["model_id"])
            for c in nb.cells for o in c.get("outputs", []) if static_outputs.WIDGET_MIME in o.get("data", {})]


def cleanup() -> None:
    for path in (execution.EXECUTED / f"{PROBE}.ipynb", nbval_book.marker(PROBE),
                 execution.EXECUTED / f"{PROBE}_learner.ipynb", nbval_book.marker(f"{PROBE}_learner")):
        path.unlink(missing_ok=True)
    for png in nbval_book.FIGURES.glob(f"{PROBE}-cell*.png"):
        png.unlink()


def test_nbvals_execution_saved_for_the_book_equals_the_books_executor(tmp_path):
    """The reference is the book's executor (nbclient) on the same source; the plugin rebuilds its notebook
    from the messages nbval read. Same outputs (clear_output, display updates, a figure, stderr, a progress
    bar's final text from the widget state), and the book's cache key, so the book reuses it. The same
    for the learner copy (the learners' book: its stub's "not written yet")."""
    from normlab.course import versions

    src = probe_source(tmp_path)
    cleanup()
    try:
        execution.execute_all(jobs=1, srcs=[src])
        execution.execute_all(jobs=1, srcs=[src], learner=True)
        reference = nbformat.read(execution.EXECUTED / f"{PROBE}.ipynb", 4)
        learner = nbformat.read(execution.EXECUTED / f"{PROBE}_learner.ipynb", 4)
        cleanup()
        copy = tmp_path / "nbval" / f"{PROBE}.ipynb"
        copy.parent.mkdir()
        jupytext.write(versions(jupytext.read(src), learner=False), copy)
        jupytext.write(versions(jupytext.read(src), learner=True), copy.with_name(f"{PROBE}_learner.ipynb"))
        env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"), NORMLAB_NBVAL_SOURCES=str(tmp_path), MPLBACKEND="Agg")
        before = execution.source_hash(src)
        run = subprocess.run([sys.executable, "-m", "pytest", str(copy), str(copy.with_name(f"{PROBE}_learner.ipynb")),
                              "--nbval-lax", "--nbval-current-env",
                              "-p", "nbval_book", "-p", "no:cacheprovider", "-q", f"--rootdir={tmp_path}"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8")
        after = execution.source_hash(src)        # differs from before only if normlab/ was edited meanwhile
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "time budget" in run.stdout and "nbval solution copies" in run.stdout
        saved = nbformat.read(execution.EXECUTED / f"{PROBE}.ipynb", 4)
        assert json.loads(nbval_book.marker(PROBE).read_text(encoding="utf-8"))["status"] == "recorded"
        assert shape(saved) == shape(reference)
        assert [o["output_type"] for o in saved.cells[-1].outputs] == ["execute_result"]      # 42, as the executor has it
        assert progress(saved) == progress(reference) == ["train: 100% 5/5"]
        assert saved.metadata["normlab_hash"] in (before, after)          # the book's cache key
        assert any(nbval_book.FIGURES.glob(f"{PROBE}-cell*.png"))
        assert execution.is_current(src) or before != after    # the book build would execute nothing
        saved = nbformat.read(execution.EXECUTED / f"{PROBE}_learner.ipynb", 4)
        assert shape(saved)[-3:] == shape(learner)[-3:]             # the stub, its check, 42
        assert "not written yet" in shape(saved)[-2][0][3] and "NotImplementedError" in saved.cells[-3].source
        assert execution.is_current(src, learner=True) or before != after
    finally:
        cleanup()


def test_a_notebook_that_fails_under_nbval_is_marked_and_not_saved(tmp_path):
    src = probe_source(tmp_path)
    src.write_text(src.read_text(encoding="utf-8").replace("6 * 7", "raise RuntimeError('boom')"), encoding="utf-8")
    copy = tmp_path / "nbval" / f"{PROBE}.ipynb"
    copy.parent.mkdir()
    jupytext.write(jupytext.read(src), copy)
    cleanup()
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "tools"), NORMLAB_NBVAL_SOURCES=str(tmp_path), MPLBACKEND="Agg")
        run = subprocess.run([sys.executable, "-m", "pytest", str(copy), "--nbval-lax", "--nbval-current-env",
                              "-p", "nbval_book", "-p", "no:cacheprovider", "-q", f"--rootdir={tmp_path}"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8")
        assert run.returncode != 0
        assert not (execution.EXECUTED / f"{PROBE}.ipynb").exists()
        status = json.loads(nbval_book.marker(PROBE).read_text(encoding="utf-8"))
        assert status["status"] == "failed"
        # the book's fixture does not wait for it: it fails at once, naming the notebook
        os.environ["PYTEST_XDIST_TESTRUNUID"], saved = status["run"], os.environ.get("PYTEST_XDIST_TESTRUNUID")
        try:
            with pytest.raises(pytest.fail.Exception, match=PROBE):
                nbval_book.wait_for_executions([PROBE], timeout=5)
        finally:
            if saved is None:
                os.environ.pop("PYTEST_XDIST_TESTRUNUID")
            else:
                os.environ["PYTEST_XDIST_TESTRUNUID"] = saved
    finally:
        cleanup()


class Item:
    """What the ordering reads of a pytest item."""

    def __init__(self, module: str, fixtures=()):
        self.module = types.SimpleNamespace(__name__=module)
        self.fixturenames = list(fixtures)


def test_order_puts_the_book_after_every_notebook_copy(monkeypatch):
    """Solution copies (longest first), learner copies (the learners' book shows their exercise cells'
    outputs), the module that builds the book, the other modules that need the build, then the unit
    tests: no book test can wait for a notebook taken after it."""
    class Cell:
        def __init__(self, stem):
            self.parent = types.SimpleNamespace(path=Path(f"build/nbval/{stem}.ipynb"))

    monkeypatch.setattr(nbval_book, "is_cell", lambda item: isinstance(item, Cell))
    monkeypatch.setattr(nbval_book, "expected_seconds", lambda stem: {"01_residuals": 45, "02_batchnorm": 58}.get(stem, 1))
    items = [Item("test_norms"), Item("test_browser_book", ["book_url"]), Item("test_slides", ["executed_notebooks"]),
             Cell("01_residuals"), Cell("01_residuals_learner"), Cell("02_batchnorm"), Cell("00_course_map"),
             Item("test_browser_widgets_course", ["site_url"])]
    nbval_book.pytest_collection_modifyitems(None, None, items)
    names = [i.parent.path.stem if isinstance(i, Cell) else i.module.__name__ for i in items]
    assert names == ["02_batchnorm", "01_residuals", "00_course_map", "01_residuals_learner", "test_browser_book",
                     "test_browser_widgets_course", "test_slides", "test_norms"]
    # the longest module that needs the build (LATE_FIRST) builds it, and the long ones go first
    items.append(Item("test_slides_readable", ["decks_url"]))
    nbval_book.pytest_collection_modifyitems(None, None, items)
    names = [i.parent.path.stem if isinstance(i, Cell) else i.module.__name__ for i in items]
    assert names == ["02_batchnorm", "01_residuals", "00_course_map", "01_residuals_learner", "test_slides_readable",
                     "test_browser_book", "test_browser_widgets_course", "test_slides", "test_norms"]


def test_each_item_has_its_group():
    assert nbval_book.group_of("build/nbval/03_layernorm.ipynb::Cell 4") == "nbval solution copies"
    assert nbval_book.group_of("build/nbval/03_layernorm_learner.ipynb::Cell 4") == "nbval learner copies"
    assert nbval_book.group_of("tests/test_browser_book.py::test_x") == "browser tests"
    assert nbval_book.group_of("tests/test_norms.py::test_x[1]") == "unit tests"


def test_the_expected_times_come_from_the_sweeps_records():
    assert nbval_book.expected_seconds("01_residuals") > nbval_book.expected_seconds("00_course_map") > 0
    assert nbval_book.expected_seconds("no_such_notebook") == 0.0


def test_nbvals_message_log_is_made_only_when_logged(caplog):
    """conftest.lazy_nbval_message_log: nbval's per-message debug line no longer pretty-prints every
    kernel message up front; with debug logging on, the line says what pprint.pformat says."""
    import logging
    import pprint

    from nbval import kernel

    import conftest

    assert kernel.pformat is conftest._Pretty                 # this run's workers have it
    msg = {"header": {"msg_type": "stream"}, "content": {"name": "stdout", "text": "归一化\n" * 30}}
    made = []

    class Counting(conftest._Pretty):
        def __str__(self):
            made.append(1)
            return super().__str__()

    logger = logging.getLogger(kernel.__name__)
    with caplog.at_level(logging.INFO, logger=kernel.__name__):
        logger.debug("Kernel message (%s):\n%s", "iopub", Counting(msg))
    assert not made                                               # off: nothing formatted
    with caplog.at_level(logging.DEBUG, logger=kernel.__name__):
        logger.debug("Kernel message (%s):\n%s", "iopub", Counting(msg))
    assert made and caplog.records[-1].getMessage() == f"Kernel message (iopub):\n{pprint.pformat(msg)}"
