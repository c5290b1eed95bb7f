"""(maintainers) Does a change to normlab leave the lessons' numbers bit for bit as recorded? Runs each notebook
once as the sweep does (one thread, seed 0, tools/sweep.py's ``run_one``) and compares every recorded value with
the record's seed-0 one-thread run. For speed-ups meant to change nothing (e.g. the optimiser's foreach).

    python3 tools/check_same_values.py            # every notebook
    python3 tools/check_same_values.py 01 06      # these
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sweep  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def compare(src: Path) -> tuple[str, int, list[str]]:
    rec = json.loads((ROOT / "normlab" / "records" / f"{src.stem}.json").read_text(encoding="utf-8"))
    old = next(r for r in rec["runs"] if r["seed"] == 0 and r["threads"] == 1)["values"]
    new = sweep.run_one(src, seed=0, threads=1, timeout=600)
    if not new["ok"]:
        return src.stem, 0, [f"run failed: {new['error']}"]
    # timings are measurements of the machine, not of the code: never the same twice
    timed = ("bench.", "bn_cost.fold_vs_linear", "bn_cost.log10_train_step_ratio")
    differ = [f"{k}: {old[k]} -> {new['values'].get(k)}" for k in old
              if not k.startswith(timed) and old[k] != new["values"].get(k)]
    if differ and rec.get("machine", {}).get("cpu") != sweep.cpu_name():   # float results differ between CPUs
        differ.insert(0, f"(recorded on {rec['machine'].get('cpu')}, this is {sweep.cpu_name()}: compare with the old code here)")
    return src.stem, len(old), differ


def main(argv: list[str]) -> int:
    srcs = [s for s in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.md")) if not argv or s.stem[:2] in argv]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(compare, srcs))
    bad = 0
    for stem, n, differ in results:
        print(f"{stem}: {n} values, {'all the same' if not differ else f'{len(differ)} differ'}")
        for d in differ[:10]:
            print("   ", d)
        bad += bool(differ)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
