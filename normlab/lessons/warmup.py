"""Lesson 06 (placement): the warm-up experiment — train Post-LN with and without learning-rate
warm-up, and Pre-LN.

    .venv/bin/python -m normlab.lessons.warmup             # the notebook's settings, 3 seeds, as a table
    .venv/bin/python -m normlab.lessons.warmup --full      # twice the steps, 3 seeds

``seed_table()`` shows the notebook's numbers for every seed the sweep ran, read from the
committed record (normlab/records/06_placement.json), so the lesson's seed table is measured, not typed.

Schedule (Xiong et al. 2020, §3.2, Eq. 1 style): lr(t) = lr_max * min(1, t / T_warmup), then constant
(``normlab.train.warmup_lr``; the loop is ``normlab.train.train``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from ..data import Task, make_task
from ..models import SequenceModel
from ..record import recorded
from ..train import History, train
from ..viz import Table

__all__ = ["Run", "run", "experiment", "SETTINGS", "seed_table", "NEVER"]


@dataclass
class Run:
    """One training run: its label, settings, what the loop recorded, and the trained model."""

    label: str
    wiring: str
    warmup: int
    seed: int
    history: History = field(default_factory=History)
    model: SequenceModel | None = field(default=None, repr=False)

    @property
    def losses(self) -> list[float]:
        return self.history.losses

    @property
    def lrs(self) -> list[float]:
        return self.history.lrs

    def final(self, last: int = 20, at: int | None = None) -> float:
        """Mean loss over the last ``last`` steps before step ``at`` (default: the end of the run)."""
        return self.history.final(last, at)

    def steps_to(self, threshold: float = 0.5, within: int | None = None) -> int | None:
        """First step whose loss is below ``threshold`` (None: never within the first ``within`` steps)."""
        return next((t for t, v in enumerate(self.losses[:within]) if v < threshold), None)


def run(task: Task, wiring: str, warmup: int, steps: int, lr: float, depth: int, width: int,
        batch: int = 64, seed: int = 0, label: str | None = None, progress: bool = True) -> Run:
    """Adam (betas 0.9, 0.98 as in Vaswani et al. 2017), cross-entropy on every position; the
    batches come from seed 1000 + seed (the model's weights from ``seed``)."""
    model = SequenceModel(task.vocab, task.seq_len, depth, width, wiring=wiring, seed=seed)
    label = label or f"{wiring}, warmup={warmup}"
    history = train(model, task, steps, batch=batch, lr=lr, betas=(0.9, 0.98), warmup=warmup, seed=1000 + seed,
                    desc=label, progress=progress)
    return Run(label, wiring, warmup, seed, history, model)


SETTINGS = {  # the notebook's small version and the command line's --full version
    "small": dict(task="reverse", vocab=16, seq_len=12, depth=6, width=32, batch=32, steps=200, lr=5e-3, warmup=66),
    "full": dict(task="reverse", vocab=16, seq_len=12, depth=6, width=32, batch=32, steps=400, lr=5e-3, warmup=66),
}


def experiment(size: str = "small", seeds: tuple[int, ...] = (0,), progress: bool = True,
               post_no_steps: int | None = None, same_schedule: bool = False) -> list[Run]:
    """Post-LN without warm-up, Post-LN with warm-up, Pre-LN without warm-up, for each seed; with
    ``same_schedule`` also Pre-LN with the same warm-up as Post-LN (the control for "Pre-LN learns
    faster": placement compared at one schedule, so the schedule is not the difference).

    ``post_no_steps``: train the Post-LN run without warm-up longer than the others (its first
    ``steps`` losses are the same as in a run of ``steps``: same seed, same batches, constant lr)."""
    s = SETTINGS[size]
    task = make_task(s["task"], s["vocab"], s["seq_len"])
    common = dict(steps=s["steps"], lr=s["lr"], depth=s["depth"], width=s["width"], batch=s["batch"], progress=progress)
    runs = []                         # each run on one torch thread (normlab.train): no result depends on the cores
    for seed in seeds:
        runs.append(run(task, "post", 0, seed=seed, label="Post-LN 无预热 (no warm-up)",
                        **(common | ({"steps": post_no_steps} if post_no_steps else {}))))
        runs.append(run(task, "post", s["warmup"], seed=seed, label="Post-LN 有预热 (warm-up)", **common))
        runs.append(run(task, "pre", 0, seed=seed, label="Pre-LN 无预热 (no warm-up)", **common))
        if same_schedule:
            runs.append(run(task, "pre", s["warmup"], seed=seed, label="Pre-LN 有预热 (warm-up)", **common))
    return runs


NEVER = 10 ** 6   # recorded as "steps to reach the threshold" when a run never reached it


def seed_table(notebook: str = "06_placement", keys: dict[str, str] | None = None):
    """One row per seed of the committed sweep record: each key's value, or its range over the
    thread counts when they differ (the warm-up runs use one thread, so they normally agree)."""
    keys = keys or {"warmup.post_no.final200": "Post-LN 无预热 200 步", "warmup.post_no.final400": "Post-LN 无预热 400 步",
                    "warmup.post_no.steps_to_0.5": "Post-LN 无预热：首次 <0.5",
                    "warmup.post_wu.steps_to_0.5": "Post-LN 有预热：首次 <0.5",
                    "warmup.pre_wu.steps_to_0.5": "Pre-LN 有预热：首次 <0.5",
                    "warmup.pre_no.steps_to_0.5": "Pre-LN 无预热：首次 <0.5"}
    try:
        rec = recorded(notebook)
    except FileNotFoundError:
        return f"（还没有测量记录 no sweep record yet: python3 run.py sweep --only {notebook[:2]}）"
    by_seed: dict[int, dict[str, list[float]]] = {}
    for run in rec["runs"]:
        row = by_seed.setdefault(run["seed"], {})
        for key in keys:
            row.setdefault(key, []).extend(run["values"].get(key, []))

    def cell(key: str, values: list[float]) -> str:
        if not values:
            return "—"
        fmt = (lambda v: "从未 never" if v >= NEVER else f"{v:.0f}") if "steps" in key else (lambda v: f"{v:.3g}")
        lo, hi = fmt(min(values)), fmt(max(values))
        return lo if lo == hi else f"{lo}–{hi}"

    rows = [[seed, *(cell(k, by_seed[seed][k]) for k in keys)] for seed in sorted(by_seed)]
    threads = sorted({r["threads"] for r in rec["runs"]})
    return Table(rows, ["种子 seed", *keys.values()],
                 title=f"测量记录 (sweep record)：每个种子，线程 threads {threads}（不同时给出范围）")


SUMMARY_KEYS = {"warmup.post_no.final200", "warmup.post_no.steps_to_0.5", "warmup.post_wu.steps_to_0.5",
                "warmup.pre_no.steps_to_0.5", "warmup.post_wu_over_post_no.steps_to_0.5"}


def seed_summary(notebook: str = "06_placement"):
    """What every seed the sweep ran says (seeds 0-4 and the extra seeds, notebooks/README.md), one
    run per seed (one thread): how many seeds show each outcome of section 3, and where."""
    try:
        rec = recorded(notebook)
    except FileNotFoundError:
        return f"（还没有测量记录 no sweep record yet: python3 run.py sweep --only {notebook[:2]}）"
    per_seed: dict[int, dict[str, float]] = {}
    for run in rec["runs"] + rec.get("extra_runs", []):
        values = {k: v[0] for k, v in run["values"].items() if v}
        if run.get("ok") and run["threads"] == 1 and SUMMARY_KEYS <= set(values):
            per_seed.setdefault(run["seed"], values)
    if not per_seed:
        return f"（记录里还没有这一节的数 no values yet: python3 run.py sweep --only {notebook[:2]}）"
    n = len(per_seed)
    v = lambda key: [s[key] for s in per_seed.values()]                       # noqa: E731
    left = sorted(s for s in v("warmup.post_no.steps_to_0.5") if s <= 200)
    ratio = v("warmup.post_wu_over_post_no.steps_to_0.5")
    span = lambda xs: f"{min(xs):.0f}–{max(xs):.0f}" if xs else "—"           # noqa: E731
    rows = [["不预热的 Post-LN：200 步内一直没降到 0.5 以下（平台上）", f"{n - len(left)} / {n}", ""],
            ["不预热的 Post-LN：200 步内降到 0.5 以下", f"{len(left)} / {n}", f"第 {span(left)} 步" if left else ""],
            ["预热后的 Post-LN：200 步内降到 0.5 以下", f"{sum(s <= 200 for s in v('warmup.post_wu.steps_to_0.5'))} / {n}",
             f"第 {span(v('warmup.post_wu.steps_to_0.5'))} 步"],
            ["同一个种子：预热后比不预热早降到 0.5 以下", f"{sum(r < 1 for r in ratio)} / {n}",
             f"用时之比 {min(ratio):.2f}–{max(ratio):.2f}" if ratio else ""],
            ["不预热的 Pre-LN：200 步内降到 0.5 以下", f"{sum(s <= 200 for s in v('warmup.pre_no.steps_to_0.5'))} / {n}",
             f"第 {span(v('warmup.pre_no.steps_to_0.5'))} 步"]]
    return Table(rows, ["结果 outcome", "种子数 seeds", "范围 range"],
                 title=f"sweep 记录里的全部 {n} 个种子（{min(per_seed)}–{max(per_seed)}，一个线程）")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="the larger version (400 steps instead of 200); both run 3 seeds")
    args = p.parse_args()
    size = "full" if args.full else "small"
    runs = experiment(size, seeds=(0, 1, 2), progress=False)
    rows = [[r.seed, r.label, r.final(), r.steps_to(0.5) if r.steps_to(0.5) is not None else "从未 never"] for r in runs]
    print(Table(rows, ["seed", "设置 setting", "最后 20 步平均损失 final loss", "loss<0.5 的步数 steps"],
                title=f"warm-up experiment ({size}): {SETTINGS[size]}"))


if __name__ == "__main__":
    main()
