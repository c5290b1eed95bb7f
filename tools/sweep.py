"""(maintainers) The seed x thread sweep: run every notebook for several seeds and torch thread
counts, and keep every number that an ``expect()`` checks or a ``measure()`` records.

    python3 run.py sweep                      # all notebooks, seeds 0-4 x threads 1, 2
    python3 run.py sweep --only 01 06         # some notebooks (name prefixes)
    python3 run.py sweep --seeds 5-9 --threads 1 --check   # other seeds, nothing written
    python3 run.py sweep --only 06 --extra-seeds 5-24     # seeds 0-4 x threads 1, 2, and seeds 5-24 x thread 1
    python3 run.py sweep --only 06 --seeds 5-24 --threads 1 --extra   # only add extra seeds to a fresh record

Extra seeds ("holds for any seed", notebooks/README.md) are kept in the record as ``extra_runs``;
tests/test_record.py then holds every threshold (and every causal check's counterfactual) to the
margin rule over seeds 0-4 *and* the extra seeds, and fails if an extra run failed. The prose's
<!--rec--> markers quote seeds 0-4 only. A sweep that re-records a notebook keeps its extra runs only
while the code fingerprint is unchanged (``--extra`` needs a fresh record; ``--extra-seeds`` makes both
in one go, under one hold of the machine-wide lock).

Writes normlab/records/NN_name.json per notebook: the fingerprint of its code cells, the machine,
and for each run (seed, threads) whether it passed, its time and every recorded value.
tests/test_record.py checks each threshold against these values with the margin rule.

Runs with one torch thread go two at a time (two cores, one thread each); runs with two threads go
one at a time, so they never compete for cores (two OpenMP pools on two cores spin-wait).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import notebooks as nbtools  # noqa: E402  (tools/notebooks.py)

RECORDS = ROOT / "normlab" / "records"


def code_cells(src: Path) -> list[str]:
    """The code cells of a source as the solution version runs them (what the sweep executes)."""
    import jupytext

    nb = jupytext.read(src)
    if nbtools.has_solutions(nb):
        nb = nbtools.versions(nb, learner=False)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_one(src: Path, seed: int, threads: int, timeout: int) -> dict:
    """Execute one notebook in a child process; return its recorded values and status."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "record.jsonl"
        rec.touch()
        # OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning, so a run is not slowed
        # many times over when other work shares the cores (it changes no result, only the waiting).
        env = dict(os.environ, NORMLAB_DRILLS_FILE="off", NORMLAB_PREDICT_WAIT="0", NORMLAB_SEED=str(seed), NORMLAB_RECORD=str(rec), OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", MPLBACKEND="Agg", PYTHONHASHSEED="0")
        t0 = time.time()
        proc = subprocess.run([sys.executable, __file__, "_one", str(src), str(timeout)], env=env, cwd=ROOT,
                              capture_output=True, text=True, encoding="utf-8")
        seconds = time.time() - t0
        values: dict[str, list[float]] = {}
        claims: dict[str, dict] = {}
        for line in rec.read_text(encoding="utf-8").splitlines():
            e = json.loads(line)
            values.setdefault(e["key"], []).append(e["value"])
            if e["op"] is not None:
                claims[e["key"]] = {"op": e["op"], "threshold": e["threshold"]}
                if e.get("because"):
                    claims[e["key"]]["because"] = e["because"]   # a causal check: "<key>.without" is recorded too
    error = None if proc.returncode == 0 else (proc.stdout.strip().splitlines() or ["?"])[-1][:500]
    return {"seed": seed, "threads": threads, "ok": proc.returncode == 0, "seconds": round(seconds, 1),
            "error": error, "values": values, "claims": claims}


def execute_in_this_process(src: Path, timeout: int) -> int:
    """The child: run the solution version of one notebook with nbclient (kernel inherits env)."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(src)
    if nbtools.has_solutions(nb):
        nb = nbtools.versions(nb, learner=False)
    nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(src.parent)}}).execute()
    except CellExecutionError as err:
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        print(lines[-1] if lines else repr(err))
        return 1
    return 0


def parse_range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def main(argv: list[str]) -> int:
    from normlab.console import console_safe   # ✓/✗ and the like readable on any console (a GBK one too)

    console_safe()
    if argv[:1] == ["_one"]:
        return execute_in_this_process(Path(argv[1]), int(argv[2]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="notebook name prefixes, e.g. 01 06")
    ap.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 5-9 or 0,3")
    ap.add_argument("--threads", default="1,2", help="torch thread counts, e.g. 1,2")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    ap.add_argument("--check", action="store_true", help="run and report, but write no record")
    ap.add_argument("--extra", action="store_true",
                    help="keep these runs as the record's extra_runs (the record must be fresh), e.g. --seeds 5-24 --threads 1")
    ap.add_argument("--extra-seeds", default="", help="also run these seeds with one thread as the record's extra_runs, e.g. 5-24")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    import fcntl

    lock = open(Path(tempfile.gettempdir()) / "normlab-sweep.lock", "w", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("[sweep] another sweep is running on this machine; waiting for it to finish ...", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    chosen = [s for s in nbtools.sources() if not args.only or any(s.stem.startswith(p) for p in args.only)]
    seeds, threads = parse_range(args.seeds), parse_range(args.threads)
    jobs = [(src, s, t, False) for src in chosen for t in threads for s in seeds]
    jobs += [(src, s, 1, True) for src in chosen for s in parse_range(args.extra_seeds)] if args.extra_seeds else []
    results: dict[str, list[dict]] = {src.stem: [] for src in chosen}
    extra_results: dict[str, list[dict]] = {src.stem: [] for src in chosen}
    bar = tqdm(total=len(jobs), desc="sweep", unit="run")

    def go(job):
        src, s, t, extra = job
        r = run_one(src, s, t, args.timeout)
        bar.set_postfix_str(f"{src.stem[:2]} seed {s} threads {t}: {'ok' if r['ok'] else 'FAILED'} {r['seconds']:.0f}s")
        bar.update()
        return src.stem, r, extra

    t0 = time.time()
    single = [j for j in jobs if j[2] == 1]
    multi = [j for j in jobs if j[2] != 1]
    with ThreadPoolExecutor(max_workers=2) as pool:          # one thread each, two at a time
        for stem, r, extra in pool.map(go, single):
            (extra_results if extra else results)[stem].append(r)
    for job in multi:                                        # more threads: one at a time
        stem, r, extra = go(job)
        (extra_results if extra else results)[stem].append(r)
    bar.close()

    failed = 0
    for src in chosen:
        extra_runs = sorted(extra_results[src.stem], key=lambda r: r["seed"])
        for r in extra_runs:
            r.pop("claims")
            if not r["ok"]:
                failed += 1
                print(f"[sweep] {src.stem} extra seed {r['seed']}: FAILED: {r['error']}")
        runs = sorted(results[src.stem], key=lambda r: (r["threads"], r["seed"]))
        for r in runs:
            if not r["ok"]:
                failed += 1
                print(f"[sweep] {src.stem} seed {r['seed']} threads {r['threads']}: FAILED: {r['error']}")
        claims: dict[str, dict] = {}
        for r in runs:
            claims.update(r.pop("claims"))
        times = [r["seconds"] for r in runs]
        print(f"[sweep] {src.stem}: {sum(r['ok'] for r in runs)}/{len(runs)} ok, "
              f"{len(claims)} claims, {len({k for r in runs for k in r['values']})} keys, "
              f"{min(times):.0f}-{max(times):.0f} s per run")
        if args.check or not any(r["values"] for r in runs):
            continue
        RECORDS.mkdir(parents=True, exist_ok=True)
        import normlab.record as record

        path = RECORDS / f"{src.stem}.json"
        fingerprint = record.code_fingerprint(code_cells(src))
        old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        if args.extra:
            if old is None or old["code_sha256"] != fingerprint:
                print(f"[sweep] {src.stem}: --extra needs a fresh record of seeds 0-4 first "
                      f"(python3 run.py sweep --only {src.stem[:2]}); extra runs not kept")
                failed += 1
                continue
            old["extra_runs"] = runs
            old["extra_date"] = date.today().isoformat()
            path.write_text(json.dumps(old, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            continue
        out = {"notebook": src.stem, "code_sha256": fingerprint,
               "date": date.today().isoformat(),
               "machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                           "torch": __import__("torch").__version__},
               "claims": dict(sorted(claims.items())), "runs": runs}
        if extra_runs:
            out["extra_runs"], out["extra_date"] = extra_runs, out["date"]
        elif old is not None and old.get("extra_runs"):
            if old["code_sha256"] == fingerprint:
                out["extra_runs"], out["extra_date"] = old["extra_runs"], old.get("extra_date")
            else:
                print(f"[sweep] {src.stem}: the code changed, so its extra-seed runs were dropped; "
                      f"re-run them with --extra (seeds {sorted({r['seed'] for r in old['extra_runs']})})")
        path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"[sweep] {len(jobs)} runs in {time.time() - t0:.0f} s, {failed} failed"
          + ("" if args.check else f"; records in {RECORDS.relative_to(ROOT)}/"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
