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

__all__ = ["digits", "DigitsNet", "INITS", "train", "accuracy", "lesion_accuracy"]

# How DigitsNet initialises its Linear layers (``init=``):
#   xavier   normlab.blocks' Xavier-normal init (the stack's own init; the default)
#   he       variance-preserving for ReLU (He et al. 2015, "Delving Deep into Rectifiers", §2.2):
#            std sqrt(2 / fan_in) for a layer that reads a ReLU's output (fc2), sqrt(1 / fan_in) for one
#            that reads a linear output (embed, fc1), so the forward signal keeps its size at any depth
#   fixup    Fixup-style (Zhang et al. 2019, §3, rules 1-2): "he", then each branch's last layer (fc2) and
#            the classifier set to 0, the branch's other layer scaled by L^(-1/(2m-2)) = L^(-1/2) for
#            m = 2 layers per branch. (Fixup's scalar biases and multipliers, rule 3, are left out.)
INITS = ("xavier", "he", "fixup")


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
                 seed: int = 0, init: str = "xavier", **stack_kwargs) -> None:
        super().__init__()
        if init not in INITS:
            raise ValueError(f"init 应为 {INITS} 之一，实际收到 {init!r}。(init expected one of {INITS}, got {init!r}.)")
        if init == "fixup" and wiring == "plain":
            raise ValueError("Fixup 初始化需要残差连接 (Fixup needs residual branches): wiring='plain' 不行。")
        torch.manual_seed(seed)
        self.embed = nn.Linear(64, width)
        self.stack: Stack = build_stack(depth, width, wiring, norm, seed=None, **stack_kwargs)
        self.head = nn.Linear(width, 10)
        if init != "xavier":
            self._reinit(init, depth)

    @torch.no_grad()
    def _reinit(self, init: str, depth: int) -> None:
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                gain = 2.0 if name.endswith("fc2") else 1.0          # fc2 reads ReLU(fc1 x)
                nn.init.normal_(m.weight, std=(gain / m.in_features) ** 0.5)
                nn.init.zeros_(m.bias)
        if init == "fixup":
            for block in self.stack.blocks:
                block.mlp.sublayer.fc1.weight.mul_(depth ** -0.5)     # L^(-1/(2m-2)), m = 2
                nn.init.zeros_(block.mlp.sublayer.fc2.weight)        # the branch starts at 0
            nn.init.zeros_(self.head.weight)

    def forward(self, x: Tensor, skip: Iterable[int] = ()) -> Tensor:
        """Logits; layers whose index is in ``skip`` are left out (the lesion study)."""
        skip = set(skip)
        h = self.embed(x)
        for i, block in enumerate(self.stack.blocks):
            if i not in skip:
                h = block(h)
        return self.head(self.stack.final_norm(h))


def train(model: nn.Module, x: Tensor, y: Tensor, steps: int = 300, lr: float = 3e-3, batch: int = 128,
          seed: int = 0, desc: str = "train", opt: str = "adam") -> list[float]:
    """Adam (or plain SGD, ``opt="sgd"``) on mini-batches of cross-entropy; returns the loss of every
    step (tqdm bar). The loop itself is ``normlab.bn_lab.train``."""
    from .bn_lab import train as train_loop

    if opt not in ("adam", "sgd"):
        raise ValueError(f"opt 应为 'adam' 或 'sgd'，实际收到 {opt!r}。(opt expected 'adam' or 'sgd'.)")
    return train_loop(model, x, y, steps=steps, batch=batch, opt=opt, lr=lr, seed=seed, desc=desc)


@torch.no_grad()
def accuracy(model: DigitsNet, x: Tensor, y: Tensor, skip: Iterable[int] = ()) -> float:
    """Fraction of correct predictions, with the layers in ``skip`` deleted."""
    return (model(x, skip=skip).argmax(-1) == y).float().mean().item()


def lesion_accuracy(model: DigitsNet, x: Tensor, y: Tensor) -> list[float]:
    """Test accuracy with each single block deleted in turn (Veit et al. 2016, §4)."""
    return [accuracy(model, x, y, skip=[i]) for i in range(len(model.stack.blocks))]
