"""Synthetic sequence tasks generated in code (no downloads), for the warm-up experiment.

Each task returns ``(inputs, targets)``: LongTensors of shape (batch, seq_len), one target
token per position, so a model predicts every position (cross-entropy over the vocabulary).

    reverse  targets = inputs[::-1]                         (needs attention to position L-1-i)
    sort     targets = sorted(inputs)                       (needs comparisons across the sequence)
    modadd   inputs = running digits, targets = running sum mod p (prefix sums, a causal task)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["TASKS", "Task", "make_task"]

TASKS = ("reverse", "sort", "modadd")


@dataclass(frozen=True)
class Task:
    """A task: its name, vocabulary size and sequence length; ``batch(n, generator)`` draws data."""

    name: str
    vocab: int
    seq_len: int

    def batch(self, n: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        x = torch.randint(0, self.vocab, (n, self.seq_len), generator=generator)
        if self.name == "reverse":
            return x, x.flip(1)
        if self.name == "sort":
            return x, x.sort(dim=1).values
        return x, x.cumsum(1) % self.vocab                       # modadd: y_t = (x_1 + ... + x_t) mod p


def make_task(name: str, vocab: int = 16, seq_len: int = 12) -> Task:
    """A task by name; vocab >= 2 tokens, seq_len >= 2 positions."""
    if name not in TASKS:
        raise ValueError(f"任务 (task) 应为 {TASKS} 之一，实际收到 {name!r}。 (task expected one of {TASKS}.)")
    if not (isinstance(vocab, int) and vocab >= 2 and isinstance(seq_len, int) and seq_len >= 2):
        raise ValueError(f"vocab 和 seq_len 应为 ≥ 2 的整数 (integers >= 2)，实际为 vocab={vocab!r}, seq_len={seq_len!r}。")
    return Task(name, vocab, seq_len)
