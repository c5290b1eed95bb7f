"""The warm-up experiment: train Post-LN with and without learning-rate warm-up, and Pre-LN.

    .venv/bin/python -m normlab.warmup --full      # the larger version (more steps, 3 seeds)

Schedule (Xiong et al. 2020, §3.2, Eq. 1 style): lr(t) = lr_max * min(1, t / T_warmup), then constant.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .blocks import SequenceModel
from .tasks import Task, make_task

__all__ = ["warmup_lr", "Run", "train", "experiment", "SETTINGS"]


def warmup_lr(step: int, lr_max: float, warmup: int) -> float:
    """lr(t) = lr_max * min(1, (t+1) / T_warmup); T_warmup = 0 means no warm-up."""
    return lr_max if warmup <= 0 else lr_max * min(1.0, (step + 1) / warmup)


@dataclass
class Run:
    """One training run: its label, settings and the loss after every step."""

    label: str
    wiring: str
    warmup: int
    seed: int
    losses: list[float] = field(default_factory=list)

    def final(self, last: int = 20) -> float:
        """Mean loss over the last ``last`` steps (less noisy than the very last one)."""
        tail = self.losses[-last:]
        return sum(tail) / len(tail)


def train(task: Task, wiring: str, warmup: int, steps: int, lr: float, depth: int, width: int,
          batch: int = 64, seed: int = 0, label: str | None = None, progress: bool = True) -> Run:
    """Adam (betas 0.9, 0.98 as in Vaswani et al. 2017), cross-entropy on every position."""
    model = SequenceModel(task.vocab, task.seq_len, depth, width, wiring=wiring, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(1000 + seed)
    run = Run(label or f"{wiring}, warmup={warmup}", wiring, warmup, seed)
    bar = tqdm(range(steps), desc=run.label, leave=False, disable=not progress)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = warmup_lr(step, lr, warmup)
        x, y = task.batch(batch, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        run.losses.append(loss.item())
        if step % 20 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    return run


SETTINGS = {  # the notebook's small version and the command line's --full version
    "small": dict(task="reverse", vocab=16, seq_len=12, depth=6, width=32, batch=32, steps=200, lr=5e-3, warmup=66),
    "full": dict(task="reverse", vocab=16, seq_len=12, depth=6, width=32, batch=32, steps=400, lr=5e-3, warmup=66),
}


def experiment(size: str = "small", seeds: tuple[int, ...] = (0,), progress: bool = True) -> list[Run]:
    """Post-LN without warm-up, Post-LN with warm-up, Pre-LN without warm-up, for each seed."""
    s = SETTINGS[size]
    task = make_task(s["task"], s["vocab"], s["seq_len"])
    common = dict(steps=s["steps"], lr=s["lr"], depth=s["depth"], width=s["width"], batch=s["batch"], progress=progress)
    runs = []
    for seed in seeds:
        runs.append(train(task, "post", 0, seed=seed, label="Post-LN 无预热 (no warm-up)", **common))
        runs.append(train(task, "post", s["warmup"], seed=seed, label="Post-LN 有预热 (warm-up)", **common))
        runs.append(train(task, "pre", 0, seed=seed, label="Pre-LN 无预热 (no warm-up)", **common))
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="the larger version (3 seeds, more steps)")
    args = p.parse_args()
    runs = experiment("full" if args.full else "small", seeds=(0, 1, 2) if args.full else (0,))
    for r in runs:
        print(f"seed {r.seed}  {r.label:32s} final loss {r.final():.4f}")


if __name__ == "__main__":
    main()
