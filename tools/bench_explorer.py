"""Time one interaction of the axes explorer (goal: under 100 ms on a 2-core CPU).

    .venv/bin/python tools/bench_explorer.py [--repeats 30]

An interaction is what a control's callback does: ``AxesExplorer.update(...)`` (groups,
live statistics, in-place redraw) plus encoding the PNG the widget shows. Prints the
median and 90th percentile per kind of interaction, at the default sizes.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import torch  # noqa: E402

import normlab  # noqa: E402
from normlab import explorer as ex  # noqa: E402
from normlab.viz import Table  # noqa: E402


def interactions(layout: str) -> dict[str, list[dict]]:
    """Sequences of state changes a learner makes, cycled through during the benchmark."""
    shape = ex.DEFAULT_SHAPE[layout]
    channels = shape[1] if layout == "image" else shape[2]
    cells = [tuple((i * k) % s for s in shape) for k in (1, 2, 3) for i in range(1, 4)]
    bigger = [tuple(s + d for s in shape[:3]) + tuple(shape[3:]) for d in (0, 1, 2)]
    return {
        "换归一化 norm": [{"norm": n} for n in ex.NORMS],
        "移动格子 cell": [{"cell": c} for c in cells],
        "组数 G (GroupNorm)": [{"norm": "groupnorm", "num_groups": g} for g in range(1, channels + 1) if channels % g == 0],
        "改大小 sizes (首次)": [{"shape": s} for s in bigger],
        "重新抽样 resample": [{"seed": k} for k in range(1, 4)],
    }


def bench(layout: str, repeats: int) -> list[list]:
    rows = []
    for name, steps in interactions(layout).items():
        e = ex.AxesExplorer(layout)
        e.png()  # warm up the renderer
        times = []
        first_only = "首次" in name
        for k, change in zip(range(repeats), itertools.cycle(steps)):
            if first_only:
                ex._groups_cached.cache_clear()  # a new shape: the Jacobian has to be taken again
            t0 = time.perf_counter()
            e.update(**change)
            e.png()
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        rows.append([layout, name, statistics.median(times), times[int(0.9 * (len(times) - 1))], max(times)])
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    normlab.setup()
    rows = bench("image", args.repeats) + bench("text", args.repeats)
    print(Table(rows, ["布局 layout", "交互 interaction", "中位数 median ms", "p90 ms", "最大 max ms"],
                title=f"axes explorer, {torch.get_num_threads()} torch threads, default sizes", floatfmt=".1f"))
    worst = max(r[3] for r in rows)
    print(f"worst p90: {worst:.1f} ms ({'OK' if worst < 100 else 'OVER'} the 100 ms budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
