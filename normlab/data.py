"""The course's data, all made in code or shipped inside a package (nothing is downloaded).

    digits()      scikit-learn's load_digits: 1797 8x8 images, 10 classes, pixels scaled to [0, 1],
                  a fixed 1200 / 597 train / test split (lessons 01, 02, 05)
    make_task()   synthetic sequence tasks (lessons 06, 07). Each returns ``(inputs, targets)``:
                  LongTensors of shape (batch, seq_len), one target token per position.

        reverse  targets = inputs[::-1]                         (needs attention to position L-1-i)
        sort     targets = sorted(inputs)                       (needs comparisons across the sequence)
        modadd   inputs = running digits, targets = running sum mod p (prefix sums, a causal task)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["digits", "TASKS", "Task", "make_task"]

TASKS = ("reverse", "sort", "modadd")


def digits(n_train: int = 1200, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x_train, y_train, x_test, y_test) from sklearn's load_digits, shuffled with ``seed``."""
    table = _digits_table()                                         # 1797 rows: 64 pixels, then the label
    x = torch.tensor(table[:, :-1], dtype=torch.float32) / 16.0     # pixel values 0..16 -> [0, 1]
    y = torch.tensor(table[:, -1].astype(int), dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def _digits_table():
    """The table scikit-learn's load_digits reads (sklearn/datasets/data/digits.csv.gz), read as it reads
    it (gzip, UTF-8 text, np.loadtxt with ","), without importing scikit-learn: its imports cost 1.4 s
    of CPU in every kernel whose lesson uses the digits (issue 27). Where that file is not found (another
    layout of the package), load_digits itself."""
    import gzip
    import importlib.util
    from pathlib import Path

    import numpy as np

    spec = importlib.util.find_spec("sklearn")                      # finds the package, runs none of it
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = next((Path(f) / "datasets" / "data" / "digits.csv.gz" for f in folders
                 if (Path(f) / "datasets" / "data" / "digits.csv.gz").is_file()), None)
    if path is None:
        from sklearn.datasets import load_digits
        d = load_digits()
        return np.column_stack([d.data, d.target])
    with gzip.open(path, mode="rt", encoding="utf-8") as f:
        return np.loadtxt(f, delimiter=",")


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
