"""(maintainers) The seed x thread sweep: run every notebook for several seeds and torch thread
counts, and keep every number that an ``expect()`` checks or a ``measure()`` records.

    python3 run.py sweep                      # all notebooks, seeds 0-4 x threads 1, 2
    python3 run.py sweep --only 01 06         # some notebooks (name prefixes)
    python3 run.py sweep --seeds 5-9 --threads 1 --check   # other seeds, nothing written
    python3 run.py sweep --only 06 --extra-seeds 5-24     # seeds 0-4 x threads 1, 2, and seeds 5-24 x thread 1
    python3 run.py sweep --only 06 --seeds 5-24 --threads 1 --extra   # only add extra seeds to a fresh record
    python3 run.py sweep --only 06 --key width.skip_pre_l3_6_max --seeds 1000-1049 --threads 1 --extra
                                              # extra seeds run only up to the cell that records this key
    python3 run.py sweep --only 06 --rethreshold  # only thresholds moved: take them into the record, run nothing

In a sweep no check stops a run (NORMLAB_RECORD_ONLY: a failed check is recorded and the run marked failed), and
every key is tagged with the code cell that recorded it. The record keeps one fingerprint per code cell of the code
without the checks' thresholds (normlab.record.cell_fingerprints). When a notebook's code changes, a re-record keeps
each extra run's values recorded by the cells before the first changed one (same seed, same threads: the same
numbers), so a change to a lesson's last cells does not throw away the extra seeds of its earlier checks.

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

from sweep_carry import (carry_prefix, first_changed, key_cell, literal_checks, merge_runs,  # noqa: E402
                         rethreshold_record, tag_cells)


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


def read_run_record(lines: list[str]) -> tuple[dict, dict, dict, list[str], int | None]:
    """Parse one run's NORMLAB_RECORD file: (values, claims, cell_of, failed checks, the first code cell that
    raised or None). The child writes ``{"cell": i, "ok": bool}`` after code cell i ran; every entry before
    it was recorded by cell i."""
    values: dict[str, list[float]] = {}
    claims: dict[str, dict] = {}
    cell_of: dict[str, int] = {}
    pending: list[str] = []
    failed: list[str] = []
    error_cell = None
    for line in lines:
        e = json.loads(line)
        if "cell" in e:
            cell_of.update({k: e["cell"] for k in pending if k not in cell_of})
            pending = []
            if not e["ok"] and error_cell is None:
                error_cell = e["cell"]
            continue
        values.setdefault(e["key"], []).append(e["value"])
        pending.append(e["key"])
        if e["op"] is not None:
            claims[e["key"]] = {"op": e["op"], "threshold": e["threshold"]}
            if e.get("because"):
                claims[e["key"]]["because"] = e["because"]   # a causal check: "<key>.without" is recorded too
            if e.get("held") is False:
                failed.append(f"{e['key']} = {e['value']:.6g} fails {e['op']} {e['threshold']}")
    return values, claims, cell_of, failed, error_cell


def run_one(src: Path, seed: int, threads: int, timeout: int, upto: int | None = None) -> dict:
    """Execute one notebook (its first ``upto`` code cells when given) in a child process; return its recorded
    values, which code cell recorded each key, and its status. A failed check does not stop the run
    (NORMLAB_RECORD_ONLY): it is recorded, and the run is not ok."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "record.jsonl"
        rec.touch()
        # OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep instead of spinning, so a run is not slowed
        # many times over when other work shares the cores (it changes no result, only the waiting).
        env = dict(os.environ, NORMLAB_DRILLS_FILE="off", NORMLAB_PREDICT_WAIT="0", NORMLAB_SEED=str(seed),
                   NORMLAB_RECORD=str(rec), NORMLAB_RECORD_ONLY="1", OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", MPLBACKEND="Agg", PYTHONHASHSEED="0")
        t0 = time.time()
        proc = subprocess.run([sys.executable, __file__, "_one", str(src), str(timeout), str(upto or 0)], env=env,
                              cwd=ROOT, capture_output=True, text=True, encoding="utf-8")
        seconds = time.time() - t0
        lines = rec.read_text(encoding="utf-8").splitlines()
        values, claims, cell_of, failed, error_cell = read_run_record(lines)
    error = None if proc.returncode == 0 else (proc.stdout.strip().splitlines() or ["?"])[-1][:500]
    if error is not None and error_cell is None:      # killed or timed out inside a cell: the one after the last marker
        error_cell = sum('"cell"' in line for line in lines)
    if error is None and failed:
        error = "; ".join(failed)[:500]
    ran = len(code_cells(src)) if upto is None else upto
    return {"seed": seed, "threads": threads, "ok": error is None, "seconds": round(seconds, 1), "cells": ran, "cpu": cpu_name(),
            "error": error, "error_cell": error_cell, "values": values, "cell_of": cell_of, "claims": claims}


def execute_in_this_process(src: Path, timeout: int, upto: int = 0) -> int:
    """The child: run the solution version of one notebook (its first ``upto`` code cells if upto > 0) with
    nbclient (the kernel inherits env), and write a marker into the record after each code cell."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(src)
    if nbtools.has_solutions(nb):
        nb = nbtools.versions(nb, learner=False)
    if upto > 0:
        last = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"][upto - 1]
        nb.cells = nb.cells[:last + 1]
    nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
    code_index = {i: k for k, i in enumerate(i for i, c in enumerate(nb.cells) if c.cell_type == "code")}

    def mark(cell, cell_index, execute_reply):
        if cell.cell_type == "code" and os.environ.get("NORMLAB_RECORD"):
            ok = (execute_reply or {}).get("content", {}).get("status") == "ok"
            with open(os.environ["NORMLAB_RECORD"], "a", encoding="utf-8") as f:
                f.write(json.dumps({"cell": code_index[cell_index], "ok": ok}) + "\n")

    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", on_cell_executed=mark,
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


def rethreshold(src: Path) -> str | None:
    """Take moved thresholds of ``src`` into its record without running anything (sweep_carry.rethreshold_record)."""
    return rethreshold_record(RECORDS / f"{src.stem}.json", code_cells(src))


def run_probe(key: str, seed: int) -> tuple[dict, float, str | None]:
    """One probe (tools/seed_probes.py) in a child process with the sweep's environment: (values, seconds, error)."""
    env = dict(os.environ, NORMLAB_SEED=str(seed), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               MPLBACKEND="Agg", PYTHONHASHSEED="0", NORMLAB_DRILLS_FILE="off")
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "seed_probes.py"), key], env=env, cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")
    if proc.returncode:
        return {}, time.time() - t0, (proc.stderr.strip().splitlines() or ["?"])[-1][:500]
    return json.loads(proc.stdout.strip().splitlines()[-1]), time.time() - t0, None


def probe_sweep(key: str, seeds: list[int], verify: list[int], timeout: int) -> int:
    """Measure ``key`` with its probe for ``seeds`` and keep them as extra runs of its notebook (tagged "probe" and
    with this machine's CPU), after checking that the probe gives exactly what the notebook itself, run up to the
    key's cell, records on each ``verify`` seed."""
    import normlab.record as record
    import seed_probes

    notebook = seed_probes.PROBES[key][0]
    src = next(s for s in nbtools.sources() if s.stem == notebook)
    path = RECORDS / f"{notebook}.json"
    rec = json.loads(path.read_text(encoding="utf-8"))
    cells = code_cells(src)
    if rec["code_sha256"] != record.code_fingerprint(cells):
        print(f"[sweep] {notebook}: the record is stale; sweep it before probing")
        return 1
    cell = key_cell(cells, key, rec)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for s in verify:
            nb_run, (values, _, error) = pool.map(lambda job: job(), [lambda: run_one(src, s, 1, timeout, cell + 1),
                                                                       lambda: run_probe(key, s)])
            wrong = error or {k: (v, nb_run["values"].get(k)) for k, v in values.items() if [v] != nb_run["values"].get(k)}
            if wrong:
                print(f"[sweep] probe {key} does not reproduce {notebook} on seed {s}: {wrong}; nothing kept")
                return 1
        print(f"[sweep] probe {key} reproduces {notebook} (code cells 1-{cell + 1}) on seeds {verify}")
        done = list(pool.map(lambda s: (s, run_probe(key, s)), seeds))
    runs = []
    for s, (values, seconds, error) in done:
        failed = [k for k, v in values.items() if k in rec["claims"]
                  and not record._holds(v, rec["claims"][k]["op"], rec["claims"][k]["threshold"])]
        runs.append({"seed": s, "threads": 1, "ok": error is None and not failed, "seconds": round(seconds, 1),
                     "cells": None, "probe": key, "cpu": cpu_name(),
                     "error": error or (f"fails: {failed}" if failed else None),
                     "error_cell": cell if error else None, "values": {k: [v] for k, v in values.items()},
                     "cell_of": {k: cell for k in values}})
        print(f"[sweep] probe {key} seed {s}: {values.get(key)} {'ok' if runs[-1]['ok'] else 'FAILED'} ({seconds:.0f} s)")
    rec["cells"] = record.cell_fingerprints(cells)
    tag_cells(rec.get("extra_runs", []), cells, rec["runs"])
    rec["extra_runs"] = merge_runs(rec.get("extra_runs", []), runs)
    path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if any(not r["ok"] for r in runs) else 0


def main(argv: list[str]) -> int:
    from normlab.console import console_safe   # ✓/✗ and the like readable on any console (a GBK one too)

    console_safe()
    if argv[:1] == ["_one"]:
        return execute_in_this_process(Path(argv[1]), int(argv[2]), int(argv[3]) if len(argv) > 3 else 0)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="notebook name prefixes, e.g. 01 06")
    ap.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 5-9 or 0,3")
    ap.add_argument("--threads", default="1,2", help="torch thread counts, e.g. 1,2")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    ap.add_argument("--check", action="store_true", help="run and report, but write no record")
    ap.add_argument("--extra", action="store_true",
                    help="keep these runs as the record's extra_runs (the record must be fresh), e.g. --seeds 5-24 --threads 1")
    ap.add_argument("--extra-seeds", default="", help="also run these seeds with one thread as the record's extra_runs, e.g. 5-24")
    ap.add_argument("--key", default="",
                    help="extra runs execute the code cells only up to the one that records this key, e.g. width.skip_pre_l3_6_max")
    ap.add_argument("--probe", default="",
                    help="measure this key with tools/seed_probes.py, after checking it against the notebook run up to the "
                         "key's cell on --verify seeds, e.g. --probe multi.max_rise --seeds 1000-1049")
    ap.add_argument("--verify", default="0", help="seeds on which --probe must reproduce the notebook")
    ap.add_argument("--workers", type=int, default=2,
                    help="one-thread runs at a time (1 leaves a core free on a shared 2-core machine)")
    ap.add_argument("--rethreshold", action="store_true",
                    help="only thresholds moved (record.cell_fingerprints unchanged): take them into the record, run nothing")
    args = ap.parse_args(argv)
    if args.probe:
        return probe_sweep(args.probe, parse_range(args.seeds), parse_range(args.verify), args.timeout)
    if args.rethreshold:
        failed = 0
        for src in (s for s in nbtools.sources() if not args.only or any(s.stem.startswith(p) for p in args.only)):
            why = rethreshold(src)
            print(f"[sweep] {src.stem}: {why or 'thresholds taken into the record'}")
            failed += why is not None
        return 1 if failed else 0
    from tqdm import tqdm

    import fcntl

    import normlab.record as record

    lock = open(Path(tempfile.gettempdir()) / "normlab-sweep.lock", "w", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("[sweep] another sweep is running on this machine; waiting for it to finish ...", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    chosen = [s for s in nbtools.sources() if not args.only or any(s.stem.startswith(p) for p in args.only)]
    if args.key and len(chosen) != 1:
        raise SystemExit("[sweep] --key needs one notebook (--only NN)")
    upto = None
    if args.key:
        path = RECORDS / f"{chosen[0].stem}.json"
        upto = 1 + key_cell(code_cells(chosen[0]), args.key,
                            json.loads(path.read_text(encoding="utf-8")) if path.exists() else None)
        print(f"[sweep] --key {args.key}: extra runs execute code cells 1-{upto} of {len(code_cells(chosen[0]))}")
    seeds, threads = parse_range(args.seeds), parse_range(args.threads)
    jobs = [(src, s, t, args.extra, upto if args.extra else None) for src in chosen for t in threads for s in seeds]
    jobs += [(src, s, 1, True, upto) for src in chosen for s in parse_range(args.extra_seeds)] if args.extra_seeds else []
    results: dict[str, list[dict]] = {src.stem: [] for src in chosen}
    extra_results: dict[str, list[dict]] = {src.stem: [] for src in chosen}
    bar = tqdm(total=len(jobs), desc="sweep", unit="run")

    def go(job):
        src, s, t, extra, cells = job
        r = run_one(src, s, t, args.timeout, cells)
        bar.set_postfix_str(f"{src.stem[:2]} seed {s} threads {t}: {'ok' if r['ok'] else 'FAILED'} {r['seconds']:.0f}s")
        bar.update()
        return src.stem, r, extra

    t0 = time.time()
    single = [j for j in jobs if j[2] == 1]
    multi = [j for j in jobs if j[2] != 1]
    with ThreadPoolExecutor(max_workers=args.workers) as pool:   # one thread each, two at a time by default
        for stem, r, extra in pool.map(go, single):
            (extra_results if extra else results)[stem].append(r)
    for job in multi:                                        # more threads: one at a time
        stem, r, extra = go(job)
        (extra_results if extra else results)[stem].append(r)
    bar.close()

    failed = 0
    for src in chosen:
        extra_runs = sorted(extra_results[src.stem], key=lambda r: r["seed"])
        runs = sorted(results[src.stem], key=lambda r: (r["threads"], r["seed"]))
        for r in runs + extra_runs:
            if not r["ok"]:
                failed += 1
                print(f"[sweep] {src.stem} seed {r['seed']} threads {r['threads']}"
                      f"{' (extra)' if r in extra_runs else ''}: FAILED: {r['error']}")
        claims: dict[str, dict] = {}
        for r in runs:
            claims.update(r.pop("claims"))
        for r in extra_runs:
            r.pop("claims")
        shown = runs or extra_runs
        if shown:
            times = [r["seconds"] for r in shown]
            print(f"[sweep] {src.stem}: {sum(r['ok'] for r in shown)}/{len(shown)} ok, "
                  f"{len({k for r in shown for k in r['values']})} keys, {min(times):.0f}-{max(times):.0f} s per run")
        if args.check or not any(r["values"] for r in runs + extra_runs):
            continue
        RECORDS.mkdir(parents=True, exist_ok=True)
        path = RECORDS / f"{src.stem}.json"
        cells = code_cells(src)
        fingerprint, fingerprints = record.code_fingerprint(cells), record.cell_fingerprints(cells)
        old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        if args.extra:
            if old is None or old["code_sha256"] != fingerprint:
                print(f"[sweep] {src.stem}: --extra needs a fresh record of seeds 0-4 first "
                      f"(python3 run.py sweep --only {src.stem[:2]}); extra runs not kept")
                failed += 1
                continue
            old["cells"] = fingerprints
            tag_cells(old.get("extra_runs", []), cells, old["runs"] + extra_runs)
            old["extra_runs"] = merge_runs(old.get("extra_runs", []), extra_runs)
            old["extra_date"] = date.today().isoformat()
            path.write_text(json.dumps(old, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            continue
        out = {"notebook": src.stem, "code_sha256": fingerprint, "cells": fingerprints,
               "date": date.today().isoformat(),
               "machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                           "torch": __import__("torch").__version__},
               "claims": dict(sorted(claims.items())), "runs": runs}
        kept: list[dict] = []
        if old is not None and old.get("extra_runs"):
            if old["code_sha256"] == fingerprint:
                kept = old["extra_runs"]
                tag_cells(kept, cells, runs)
            elif old.get("cells"):
                same = first_changed(old["cells"], fingerprints)
                kept = carry_prefix(old["extra_runs"], same, out["claims"])
                print(f"[sweep] {src.stem}: code cells 1-{same} unchanged (thresholds aside): kept the extra runs' "
                      f"values they recorded ({len(kept)} seeds); later cells' values dropped")
            else:
                print(f"[sweep] {src.stem}: the code changed, so its extra-seed runs were dropped; "
                      f"re-run them with --extra (seeds {sorted({r['seed'] for r in old['extra_runs']})})")
        if kept or extra_runs:
            out["extra_runs"] = merge_runs(kept, extra_runs)
            out["extra_date"] = date.today().isoformat() if extra_runs else old.get("extra_date")
        path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"[sweep] {len(jobs)} runs in {time.time() - t0:.0f} s, {failed} failed"
          + ("" if args.check else f"; records in {RECORDS.relative_to(ROOT)}/"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
