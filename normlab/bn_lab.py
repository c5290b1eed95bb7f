"""Machinery for the BatchNorm lesson (notebook 02): momentum conventions, the d2l-style mode
bug reproduced, small digits networks with BN / GroupNorm / no norm, and a training loop.

Data: ``normlab.residuals.digits`` (scikit-learn's load_digits, shipped inside the package).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from . import norms

CONVENTIONS = {
    # name: (how the library writes the update, the equivalent PyTorch momentum for a given m)
    "pytorch": "running = (1 - m) * running + m * batch      (PyTorch, default m = 0.1)",
    "old_weight": "running = m * running + (1 - m) * batch      (d2l-zh, [B], [E] §1.2; Keras/TF m = 0.99)",
}


def running_update(running: Tensor, batch: Tensor, m: float, convention: str) -> Tensor:
    """One step of the running-average update in either convention."""
    if convention == "pytorch":
        return (1 - m) * running + m * batch
    if convention == "old_weight":
        return m * running + (1 - m) * batch
    raise ValueError(f"convention 应为 {sorted(CONVENTIONS)} 之一，实际 {convention!r}")


def running_trace(m: float, convention: str, steps: int = 60, true_mean: float = 5.0, noise: float = 1.0,
                  batch: int = 16, seed: int = 0) -> Tensor:
    """running_mean after each of ``steps`` batches drawn from N(true_mean, noise^2), starting at 0."""
    g = torch.Generator().manual_seed(seed)
    r, out = torch.tensor(0.0), []
    for _ in range(steps):
        mean = (torch.randn(batch, generator=g) * noise + true_mean).mean()
        r = running_update(r, mean, m, convention)
        out.append(r.item())
    return torch.tensor(out)


class GradModeBatchNorm(norms.BatchNorm):
    """The d2l / [B] mistake, reproduced: the mode is read from ``torch.is_grad_enabled()``
    instead of ``self.training``, so ``model.eval()`` without ``torch.no_grad()`` still uses
    (and updates) batch statistics."""

    def forward(self, x: Tensor) -> Tensor:
        was = self.training
        self.training = torch.is_grad_enabled()
        try:
            return super().forward(x)
        finally:
            self.training = was


def set_bn_momentum(model: nn.Module, momentum: float | None) -> nn.Module:
    """Set ``momentum`` on every BatchNorm layer of ``model`` (PyTorch convention)."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.momentum = momentum
    return model


def mlp(norm: str = "none", depth: int = 4, width: int = 64, act: str = "tanh", seed: int = 0) -> nn.Sequential:
    """64 pixels -> depth x [Linear -> norm -> act] -> 10 logits. norm: none / bn / gn (8 groups) / ln."""
    torch.manual_seed(seed)
    make = {"none": lambda c: nn.Identity(), "bn": nn.BatchNorm1d, "gn": lambda c: nn.GroupNorm(8, c),
            "ln": nn.LayerNorm}[norm]
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
    layers, d = [], 64
    for _ in range(depth):
        layers += [nn.Linear(d, width), make(width), acts[act]()]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, 10))


def train(model: nn.Module, x: Tensor, y: Tensor, steps: int, batch: int, opt: str = "sgd", lr: float = 0.1,
          seed: int = 0, desc: str = "train") -> list[float]:
    """Mini-batch training (SGD or Adam) with a progress bar; returns the loss of every step."""
    optimizer = (torch.optim.SGD if opt == "sgd" else torch.optim.Adam)(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    for _ in tqdm(range(steps), desc=desc, leave=False):
        idx = torch.randint(0, len(y), (batch,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor, mode: str = "eval") -> float:
    """Test accuracy in eval mode (running stats), or in train mode on this batch's statistics
    (on a copy, so the real running stats are not touched)."""
    m = copy.deepcopy(model).train() if mode == "train" else model.eval()
    return (m(x).argmax(-1) == y).float().mean().item()
