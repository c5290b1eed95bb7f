"""Executing the course notebooks for the book and the slides, and the cache key of an execution.

    python tools/book.py execute     # execute what changed into build/executed/ (two at a time)

An executed notebook, build/executed/NAME.ipynb, carries ``normlab_hash`` in its metadata: the hash of
its source, of everything in normlab/ it depends on and of EXEC_VERSION (``source_hash``). A notebook
whose hash is unchanged is never executed again. Two things write them: ``execute_all`` here (a
kernel per notebook through tools/notebooks.py's ``execute``) and, during a test run, the nbval
plugin tools/nbval_book.py, which saves each solution copy as nbval executed it, under the same key
and the same kernel environment (``KERNEL_ENV``), so that the book and the slides built after a test
run execute nothing.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import notebooks as nbtools  # noqa: E402

ROOT = nbtools.ROOT
EXECUTED = ROOT / "build" / "executed"
FIGURES = ROOT / "build" / "figures"


# The kernels that execute the notebooks must draw figures as PNG outputs. A caller's MPLBACKEND
# (run.py test sets Agg for pytest) would reach the kernels and make plt.show() draw nothing, so the
# book and the slides would have no figures: the executors always get the inline backend.
KERNEL_BACKEND = "module://matplotlib_inline.backend_inline"
EXEC_VERSION = "static-widgets-1"   # part of the hash: executions made under another setup are redone

# The kernels of the book's executions (and of nbval's solution copies in a test run): figures as PNG
# outputs, the course's widgets as their static, precomputed-grid version (web_host.mimebundle), and
# no stop at a 先想一想 prompt nobody answers (NORMLAB_PREDICT_WAIT=0: normlab.course.predictions.WAIT_ENV).
PREDICT_WAIT = {"NORMLAB_PREDICT_WAIT": "0"}
KERNEL_ENV = {"MPLBACKEND": KERNEL_BACKEND, "NORMLAB_STATIC": "1", **PREDICT_WAIT}


def hashed_files() -> list[Path]:
    """What an execution depends on besides the notebook: normlab's code, its data (records, the
    gradient-flow grid, the companion's TOML) and the widgets' front-ends (their ES modules and CSS
    are inlined into the static widgets' outputs)."""
    kinds = (".py", ".js", ".css", ".json", ".gz", ".toml")
    return sorted(f for f in (ROOT / "normlab").rglob("*") if f.suffix in kinds and f.is_file())


def source_hash(src: Path, text: bytes | None = None) -> str:
    """Hash of the notebook source (``text``: its bytes, read from ``src`` when not given) and all of
    normlab: an unchanged hash needs no re-execution."""
    h = hashlib.sha256((src.read_bytes() if text is None else text) + EXEC_VERSION.encode())
    for f in hashed_files():
        h.update(f.read_bytes())
    return h.hexdigest()


def executed_path(src: Path, learner: bool = False) -> Path:
    """build/executed/NAME.ipynb (the solution version), or NAME_learner.ipynb (the learner version)."""
    return EXECUTED / (src.stem + ("_learner" if learner else "") + ".ipynb")


def is_current(src: Path, learner: bool = False) -> bool:
    """The execution (executed_path) exists and was made from this source and this normlab."""
    out = executed_path(src, learner)
    return out.exists() and nbformat.read(out, 4).metadata.get("normlab_hash") == source_hash(src)


def has_answers(src: Path) -> bool:
    """The source has answers (a learner version that differs from the solution version)."""
    import jupytext

    return nbtools.has_solutions(jupytext.read(src))


# One notebook in a fresh process, through tools/notebooks.py's execute (outputs, figures, timing),
# for a source in any folder: the course's notebooks/, or a test's temporary one.
RUN_ONE = """import pathlib, sys
sys.path.insert(0, sys.argv[1])
import notebooks
src = pathlib.Path(sys.argv[2])
notebooks.SOURCES = src.parent
sys.exit(1 if notebooks.execute([src.stem], learner=sys.argv[3] == "learner") else 0)
"""


def execute_all(jobs: int = 2, srcs: list[Path] | None = None, learner: bool = False) -> list[Path]:
    """Execute every course notebook (or each of ``srcs``) that changed, `jobs` at a time, into
    build/executed/; fail loudly (SystemExit) when a cell raises. ``learner``: the learner versions
    of the notebooks with answers (NAME_learner.ipynb, for the learners' book); returns their paths."""
    srcs = nbtools.sources() if srcs is None else srcs
    if learner:
        srcs = [src for src in srcs if has_answers(src)]
    todo = [src for src in srcs if not is_current(src, learner)]
    if len(todo) < len(srcs):
        kept = [executed_path(s, learner).stem for s in srcs if s not in todo]
        print(f"[normlab] {len(kept)} notebook(s) unchanged since their last execution, reused from "
              f"build/executed/: {', '.join(kept)}")

    # Two executors at once: idle OpenMP threads must sleep, not spin (see tools/notebooks.py).
    # NORMLAB_STATIC=1: the widgets display their static, precomputed-grid version (web_host.mimebundle).
    env = dict(os.environ, **KERNEL_ENV,
               OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))

    logs = ROOT / "build" / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def run_one(src: Path) -> int:
        # The executor's stderr (the failing cell's traceback) goes to build/logs/NAME.log, so a
        # failed book build can be diagnosed; it is echoed below when the notebook fails.
        with open(logs / f"{executed_path(src, learner).stem}.log", "w", encoding="utf-8") as log:
            return subprocess.call([sys.executable, "-c", RUN_ONE, str(ROOT / "tools"), str(src),
                                    "learner" if learner else "solution"], cwd=ROOT, stderr=log, env=env)

    t0 = time.time()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        codes = list(pool.map(run_one, todo))
    failed = [executed_path(s, learner).stem for s, c in zip(todo, codes) if c != 0]
    for src, code in zip(todo, codes):
        if code == 0:
            out = executed_path(src, learner)
            nb = nbformat.read(out, 4)
            nb.metadata["normlab_hash"] = source_hash(src)
            nbformat.write(nb, out)
    print(f"[normlab] executed {len(todo)} notebook(s) in {time.time() - t0:.0f} s" if todo else
          "[normlab] executed no notebook: every one is current")
    for stem in failed:
        tail = (logs / f"{stem}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        print(f"[normlab] {stem} failed; last lines of build/logs/{stem}.log:\n  " + "\n  ".join(tail))
    if failed:
        raise SystemExit(f"[normlab] notebook(s) failed to execute: {', '.join(failed)} (logs in build/logs/)")
    return [executed_path(s, learner) for s in srcs]


def save_figures(nb, stem: str) -> int:
    """Each image output as build/figures/NAME-cellK-J.png (as `tools/notebooks.py execute` saves them)."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    for old in FIGURES.glob(stem + "-cell*.png"):
        old.unlink()
    n = 0
    for k, cell in enumerate(nb.cells):
        for j, o in enumerate(cell.get("outputs", [])):
            if "image/png" in o.get("data", {}):
                (FIGURES / f"{stem}-cell{k}-{j}.png").write_bytes(base64.b64decode(o["data"]["image/png"]))
                n += 1
    return n
