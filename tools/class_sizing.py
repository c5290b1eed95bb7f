"""How big a machine a class needs, measured with the course's test hub (tools/hub.py):

    python3 tools/class_sizing.py sizing --learners 1 2 4    # lesson 01 Run All by K learners at once
    python3 tools/class_sizing.py idle --learners 3          # the memory of an idle learner's server

Both update the "measured" part of deploy/sizing.json (its "rule" is kept); class_sizes() turns the file
into the machines the instructor guide lists (20, 40 and 100 learners, lockstep and self-paced), and
tests/test_deploy.py checks the guide, install.sh and the Helm values against it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hub as hubtool  # noqa: E402  (tools/hub.py)

ROOT = hubtool.ROOT
lesson_cells = hubtool.lesson_cells


def server_rss_mb(state_dir: Path) -> list[float]:
    """Resident memory of each learner's server (jupyterhub-singleuser, its kernels not counted): the
    processes whose working directory is under state_dir (Linux /proc)."""
    root, out = str(Path(state_dir).resolve()), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            if "singleuser" in cmd and "ipykernel" not in cmd and os.readlink(proc / "cwd").startswith(root):
                rss = next(line for line in (proc / "status").read_text(encoding="utf-8").splitlines() if line.startswith("VmRSS"))
                out.append(round(int(rss.split()[1]) / 1024, 1))
        except (OSError, StopIteration, ValueError):
            pass
    return sorted(out)


def idle_servers(n: int, state_dir: Path, settle: float = 10.0) -> list[float]:
    """n learners' servers started and left idle for `settle` seconds: each one's resident memory (MB)."""
    with hubtool.Hub(state_dir) as hub:
        names = [f"learner{i}" for i in range(n)]
        for name in names:
            hub.add_learner(name)
            hub.start_server(name)
        time.sleep(settle)
        return server_rss_mb(state_dir)


SIZES, MODES = (20, 40, 100), ("lockstep", "self-paced")


def class_sizes(sizing: dict) -> list[dict]:
    """The machine a class needs, from deploy/sizing.json: for 20, 40 and 100 learners, lockstep (everybody
    runs the same cell at once) and self-paced (rule["self_paced_computing_share"] of them at once).
    Cores: the learners computing at once, rule["learners_per_core"] to a core (the measured K / C slope),
    plus the system's; memory: each learner's guarantee (one server + one lesson kernel, measured) plus
    the system's."""
    import math

    rule, rows = sizing["rule"], []
    per_learner_gb = float(rule["memory_guarantee"].rstrip("M")) / 1000
    for n in SIZES:
        for mode in MODES:
            computing = n if mode == "lockstep" else math.ceil(n * rule["self_paced_computing_share"])
            cores = math.ceil(computing / rule["learners_per_core"]) + rule["system_cores"]
            rows.append({"learners": n, "mode": mode, "cores": cores,
                         "memory_gb": math.ceil(n * per_learner_gb + rule["system_gb"])})
    return rows


def sizing(learners: list[int], state_dir: Path, notebook: str = "01_residuals.ipynb") -> list[dict]:
    """K learners run `notebook` at the same moment, each in their own kernel on the hub: wall time per
    learner and each kernel's peak resident memory."""
    from concurrent.futures import ThreadPoolExecutor

    rows = []
    with hubtool.Hub(state_dir) as hub:
        names = [f"learner{i}" for i in range(max(learners))]
        for name in names:
            hub.add_learner(name)
            hub.start_server(name)
        tokens = {name: hub.token(name) for name in names}
        for k in learners:
            print(f"[hub] {k} learner(s) run {notebook} at once ...", flush=True)
            with ThreadPoolExecutor(k) as pool:
                runs = list(pool.map(lambda n: hub.run_code(n, tokens[n], lesson_cells(hub.home(n), notebook)),
                                     names[:k]))
            for name, r in zip(names[:k], runs):
                peak = r["stdout"].split("RESULT peak_mb=", 1)[-1].split()[0] if "RESULT" in r["stdout"] else "nan"
                rows.append({"K": k, "learner": name, "seconds": round(r["seconds"], 1), "peak_mb": float(peak),
                             "error": r["error"]})
                print(f"    K={k} {name}: {r['seconds']:.1f} s, peak {peak} MB"
                      + (f", ERROR {r['error']}" if r["error"] else ""), flush=True)
    return rows


def main(argv: list[str]) -> int:
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sizing", help="K learners run lesson 01 at once")
    s.add_argument("--learners", type=int, nargs="+", default=[1, 2, 4])
    s.add_argument("--notebook", default="01_residuals.ipynb")
    i = sub.add_parser("idle", help="the resident memory of N idle learners' servers")
    i.add_argument("--learners", type=int, default=3)
    for p in (s, i):
        p.add_argument("--out", default=str(ROOT / "deploy" / "sizing.json"),
                       help="the sizing file whose 'measured' part is updated (its 'rule' is kept)")
    args = ap.parse_args(argv)
    why = hubtool.available()
    if why:
        print(why)
        return 2
    out = Path(args.out)
    data = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {"measured": {}, "rule": {}}
    data["measured"]["cpu_count"] = os.cpu_count()
    with tempfile.TemporaryDirectory(prefix="normlab-hub-") as tmp:
        if args.cmd == "sizing":
            data["measured"]["rows"] = sizing(args.learners, Path(tmp), args.notebook)
        else:
            data["measured"]["server_idle_mb"] = idle_servers(args.learners, Path(tmp))
            print(f"idle servers: {data['measured']['server_idle_mb']} MB")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
