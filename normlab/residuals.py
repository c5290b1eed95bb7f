"""Machinery for the residuals lesson (notebook 01): a digits classifier built from a stack of
blocks, a tiny training loop, and the lesion study of Veit et al. 2016 (delete blocks at test time).

Data: scikit-learn's ``load_digits`` (1797 8x8 images shipped inside the package, no download),
pixels scaled to [0, 1], a fixed 1200 / 597 train / test split.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from .blocks import Stack, build_stack

__all__ = ["digits", "DigitsNet", "train", "accuracy", "lesion_accuracy"]


def digits(n_train: int = 1200, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x_train, y_train, x_test, y_test) from sklearn's load_digits, shuffled with ``seed``."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0           # pixel values 0..16 -> [0, 1]
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


class DigitsNet(nn.Module):
    """64 pixels -> Linear -> Stack of ``depth`` blocks -> Linear -> 10 logits."""

    def __init__(self, depth: int, width: int = 64, wiring: str = "pre", norm: str = "layernorm",
                 seed: int = 0, **stack_kwargs) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Linear(64, width)
        self.stack: Stack = build_stack(depth, width, wiring, norm, seed=None, **stack_kwargs)
        self.head = nn.Linear(width, 10)

    def forward(self, x: Tensor, skip: Iterable[int] = ()) -> Tensor:
        """Logits; layers whose index is in ``skip`` are left out (the lesion study)."""
        skip = set(skip)
        h = self.embed(x)
        for i, block in enumerate(self.stack.blocks):
            if i not in skip:
                h = block(h)
        return self.head(self.stack.final_norm(h))


def train(model: nn.Module, x: Tensor, y: Tensor, steps: int = 300, lr: float = 3e-3, batch: int = 128,
          seed: int = 0, desc: str = "train") -> list[float]:
    """Adam on mini-batches of cross-entropy; returns the loss of every step (tqdm bar).
    The loop itself is ``normlab.bn_lab.train``."""
    from .bn_lab import train as train_loop

    return train_loop(model, x, y, steps=steps, batch=batch, opt="adam", lr=lr, seed=seed, desc=desc)


@torch.no_grad()
def accuracy(model: DigitsNet, x: Tensor, y: Tensor, skip: Iterable[int] = ()) -> float:
    """Fraction of correct predictions, with the layers in ``skip`` deleted."""
    return (model(x, skip=skip).argmax(-1) == y).float().mean().item()


def lesion_accuracy(model: DigitsNet, x: Tensor, y: Tensor) -> list[float]:
    """Test accuracy with each single block deleted in turn (Veit et al. 2016, §4)."""
    return [accuracy(model, x, y, skip=[i]) for i in range(len(model.stack.blocks))]
