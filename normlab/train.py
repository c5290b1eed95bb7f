"""The course's one training loop, and the context that runs it on one torch thread.

    history = train(model, (x, y), steps=300, batch=128, lr=3e-3)        # digits: random rows each step
    history = train(model, task, steps=200, batch=32, warmup=66, betas=(0.9, 0.98))   # a sequence task
    history.losses, history.lrs, history.ratios, history.updates

One step: lr(t) -> batch -> cross-entropy on every position -> backward -> (after_backward) -> step.
Optional records (what the lessons measure while training):
    ratios=True    Karpathy's update:data ratio of each weight matrix (parameters with 2+ dims, in
                   model order): probes.update_data_ratio, ||W_after - W_before||_F / ||W_before||_F
    update_batch=x_u  DeepNet §3's model update ||F(x_u; theta_t) - F(x_u; theta_{t-1})|| per step,
                   normalised per sample of that fixed batch (Figure 3)
    warmup=T       lr(t) = lr * min(1, (t+1) / T) (Xiong et al. 2020, §3.2); 0: constant lr
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from .data import Task
from . import runcache
from .probes import update_data_ratio

__all__ = ["train", "History", "warmup_lr", "one_thread", "accuracy"]


@contextmanager
def one_thread(threads: int | None = 1) -> Iterator[None]:
    """Run torch on ``threads`` intra-op threads inside the block, then restore the count (None: leave it).

    The lessons' models are tiny (64-wide layers), so a second OpenMP thread only adds
    synchronisation, and when anything else uses the cores its spin-waiting makes a run many times
    slower (measured on 2 cores: 300 steps of 02's MLP 0.22 s with 1 thread, 0.4-1.6 s with 2 threads
    and OMP_WAIT_POLICY=PASSIVE, 22 s with 2 threads and the default policy; no subnormal floats
    anywhere). One thread also makes a trained number the same whatever torch's thread count."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def warmup_lr(step: int, lr_max: float, warmup: int) -> float:
    """lr(t) = lr_max * min(1, (t+1) / T_warmup); T_warmup = 0 means no warm-up."""
    return lr_max if warmup <= 0 else lr_max * min(1.0, (step + 1) / warmup)


@dataclass
class History:
    """What one run recorded, one entry per step."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    ratios: list[list[float]] = field(default_factory=list)
    updates: list[float] = field(default_factory=list)

    def final(self, last: int = 20, at: int | None = None) -> float:
        """Mean loss over the last ``last`` steps before step ``at`` (default: the end of the run)."""
        tail = self.losses[:at][-last:]
        return sum(tail) / len(tail)


def _sampler(data, batch: int, generator: torch.Generator) -> Callable[[], tuple[Tensor, Tensor]]:
    if isinstance(data, Task):
        return lambda: data.batch(batch, generator)
    if isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, Tensor) for t in data):
        x, y = data
        if len(x) != len(y) or len(y) == 0:
            raise ValueError(f"x 和 y 的样本数应相同且不为 0 (x and y need the same, non-zero length)：{len(x)} vs {len(y)}。")

        def rows():
            idx = torch.randint(0, len(y), (batch,), generator=generator)
            return x[idx], y[idx]
        return rows
    raise TypeError(f"data 应为 (x, y) 两个张量或一个 Task (data must be a pair of tensors or a Task)，"
                    f"实际收到 {type(data).__name__}。")


def train(model: nn.Module, data, steps: int, *, batch: int = 64, opt: str = "adam", lr: float = 3e-3,
          betas: tuple[float, float] = (0.9, 0.999), warmup: int = 0, seed: int = 0, threads: int | None = 1,
          ratios: bool = False, update_batch: Tensor | None = None,
          after_backward: Callable[[int], None] | None = None, desc: str = "train", progress: bool = True) -> History:
    """Mini-batch cross-entropy training with Adam (``betas``) or plain SGD, a progress bar, and the
    records named in the module docstring. Batches come from a generator seeded with ``seed``, so
    the same seed draws the same batches. ``after_backward(step)`` runs after each backward pass,
    before the optimiser step (e.g. to read attention logits or gradients)."""
    if opt not in ("adam", "sgd"):
        raise ValueError(f"opt 应为 'adam' 或 'sgd'，实际收到 {opt!r}。(opt expected 'adam' or 'sgd'.)")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps 应为正整数 (steps must be a positive integer)，实际收到 {steps!r}。")
    next_batch = _sampler(data, batch, torch.Generator().manual_seed(seed))
    # Under the test run only (NORMLAB_RUN_CACHE), a learner copy replays this call from the solution
    # copy's identical run (normlab/runcache.py says when that is exact); otherwise this is loop(model).
    inputs = (data, steps, batch, opt, lr, betas, warmup, seed, threads, ratios, update_batch)
    return runcache.run(lambda: _loop(model, next_batch, steps, opt, lr, betas, warmup, threads, ratios,
                                      update_batch, after_backward, desc, progress),
                        model, inputs, unsafe=after_backward is not None, desc=desc)


def _loop(model, next_batch, steps, opt, lr, betas, warmup, threads, ratios, update_batch, after_backward,
          desc, progress) -> History:
    # foreach=True: the same arithmetic per element as the default per-tensor loop on the CPU (the same
    # trained bits: tools/check_same_values.py), one call per operation for all tensors: about a third
    # less time per step on a lesson's many small tensors (01's 12-block net: 4.4 s -> 3.0 s for 300 steps)
    optimizer = (torch.optim.SGD(model.parameters(), lr=lr, foreach=True) if opt == "sgd"
                 else torch.optim.Adam(model.parameters(), lr=lr, betas=betas, foreach=True))
    weights = [p for p in model.parameters() if p.dim() >= 2] if ratios else []
    history = History()
    with one_thread(threads):
        model.train()
        if update_batch is not None:
            with torch.no_grad():
                previous = model(update_batch)
        bar = tqdm(range(steps), desc=desc, leave=False, disable=not progress)
        for step in bar:
            for group in optimizer.param_groups:
                group["lr"] = warmup_lr(step, lr, warmup)
            x, y = next_batch()
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))   # every position
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if after_backward is not None:
                after_backward(step)
            before = [w.detach().clone() for w in weights]
            optimizer.step()
            if ratios:
                history.ratios.append([update_data_ratio([b], [w]) for w, b in zip(weights, before)])
            if update_batch is not None:
                with torch.no_grad():
                    current = model(update_batch)
                history.updates.append(((current - previous).norm() / update_batch.shape[0] ** 0.5).item())
                previous = current
            history.losses.append(loss.item())
            history.lrs.append(optimizer.param_groups[0]["lr"])
            if step % 20 == 0:
                bar.set_postfix(loss=f"{history.losses[-1]:.3f}")
    return history


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor, mode: str = "eval", **forward_kwargs) -> float:
    """Test accuracy in eval mode (running stats), or in train mode on this batch's statistics (on a
    copy, so the real running stats are not touched). ``forward_kwargs`` go to the model (e.g. skip=)."""
    import copy

    if mode not in ("eval", "train"):
        raise ValueError(f"mode 应为 'eval' 或 'train'，实际收到 {mode!r}。")
    m = copy.deepcopy(model).train() if mode == "train" else model.eval()
    with torch.no_grad():                    # a measurement: no autograd graph (same numbers, less time)
        return (m(x, **forward_kwargs).argmax(-1) == y).float().mean().item()
