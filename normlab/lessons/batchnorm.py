"""Lesson 02 (BatchNorm): momentum conventions, the d2l-style mode bug reproduced, small digits
networks with BN / GroupNorm / LayerNorm / no norm, the pieces of Santurkar et al.'s "noisy BN"
experiment (``NoisyShift``, ``InputDrift``), and BN folded into the previous Linear for inference.

Data: ``normlab.data.digits``; the loop (with Karpathy's update:data ratios): ``normlab.train.train``;
synchronised BN across two processes: ``normlab.lessons.sync_bn``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .. import norms
from ..blocks import seeded

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
    raise ValueError(f"滑动平均写法 convention 应为 {sorted(CONVENTIONS)} 之一，实际收到 {convention!r}。"
                     f"(convention must be one of {sorted(CONVENTIONS)}.)")


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


@torch.no_grad()
def reestimate_bn_stats(model: nn.Module, batches) -> nn.Module:
    """Re-estimate every BatchNorm's running statistics after training: ``reset_running_stats()``
    first (it zeroes ``num_batches_tracked``), then ``momentum=None`` (PyTorch's cumulative average,
    factor 1/num_batches_tracked) over ``batches`` in train mode. Without the reset the cumulative
    average would continue the training run's count and move the statistics only a few percent.
    Restores each layer's momentum and the model's mode."""
    layers = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved, was = [m.momentum for m in layers], model.training
    for m in layers:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    for x in batches:
        model(x)
    for m, momentum in zip(layers, saved):
        m.momentum = momentum
    model.train(was)
    return model


class NoisyShift(nn.Module):
    """Santurkar et al. 2018 (arXiv 1805.11604, §2.1) "noisy BN", in miniature: placed after a BN
    layer, it multiplies each feature by a random scale in [1, strength] and adds a random shift in
    [-strength, strength], both drawn anew at every training step. The next layer's input
    distribution then moves at every step (internal covariate shift injected on purpose).
    Identity in eval mode."""

    def __init__(self, num_features: int, strength: float = 2.0, seed: int = 0) -> None:
        super().__init__()
        if strength < 1:
            raise ValueError(f"NoisyShift 的噪声强度 strength 至少为 1，实际 {strength}。(strength must be >= 1.)")
        self.num_features, self.strength = num_features, float(strength)
        self.generator = torch.Generator().manual_seed(seed)

    def forward(self, h: Tensor) -> Tensor:
        if not self.training:
            return h
        n, g = self.strength, self.generator
        scale = 1 + torch.rand(self.num_features, generator=g) * (n - 1)       # std in [1, n]
        shift = (torch.rand(self.num_features, generator=g) * 2 - 1) * n      # mean in [-n, n]
        return h * scale + shift


class InputDrift:
    """Records, at every training-mode forward pass, the per-feature batch mean of the input of each
    layer of type ``kind`` (e.g. nn.Tanh). ``per_layer()``: the mean |change| of those means from one
    step to the next, per layer, a direct measure of how much the layer's input distribution moves.

        with InputDrift(model, nn.Tanh) as drift:
            train(model, ...)
        drift.per_layer()
    """

    def __init__(self, model: nn.Module, kind: type = nn.Tanh) -> None:
        self.layers = [m for m in model.modules() if isinstance(m, kind)]
        if not self.layers:
            raise ValueError(f"模型里没有 {kind.__name__} 层可以观察。(no {kind.__name__} layer in the model.)")
        self.means: list[list[Tensor]] = [[] for _ in self.layers]
        self._hooks: list = []

    def __enter__(self) -> "InputDrift":
        for i, layer in enumerate(self.layers):
            def hook(module, inputs, output, i=i):
                if module.training:
                    self.means[i].append(inputs[0].detach().reshape(-1, inputs[0].shape[-1]).mean(0))
            self._hooks.append(layer.register_forward_hook(hook))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def per_layer(self) -> list[float]:
        out = []
        for means in self.means:
            if len(means) < 2:
                raise ValueError("至少需要两个训练步才能比较分布的变化。(need at least 2 training steps.)")
            m = torch.stack(means)
            out.append((m[1:] - m[:-1]).abs().mean().item())
        return out


def mlp(norm: str = "none", depth: int = 4, width: int = 64, act: str = "tanh", seed: int = 0,
        noise: float = 2.0, init: str = "default") -> nn.Sequential:
    """64 pixels -> depth x [Linear -> norm -> act] -> 10 logits.
    norm: none / bn / gn (8 groups) / ln / bn_noise (BN followed by ``NoisyShift(noise)``) / noise
    (``NoisyShift`` alone: the noise without BN, a control for bn_noise).
    init: "default" keeps PyTorch's Linear init (uniform, std 1/sqrt(3 fan_in), a gain of 1/sqrt(3)
    for any activation); "xavier" uses Xavier-uniform with the activation's recommended gain
    (``nn.init.calculate_gain``: 5/3 for tanh, sqrt(2) for ReLU) on the hidden layers, gain 1 on the
    output layer, and zero biases. The weights come from ``seed``; torch's global random stream is
    left where it was."""
    makers = {"none": lambda c, i: nn.Identity(), "bn": lambda c, i: nn.BatchNorm1d(c),
              "gn": lambda c, i: nn.GroupNorm(8, c), "ln": lambda c, i: nn.LayerNorm(c),
              "bn_noise": lambda c, i: nn.Sequential(nn.BatchNorm1d(c), NoisyShift(c, noise, seed=1000 * seed + i)),
              "noise": lambda c, i: NoisyShift(c, noise, seed=1000 * seed + i)}
    if norm not in makers:
        raise ValueError(f"未知的 norm={norm!r}：可选 {', '.join(makers)}。(unknown norm)")
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
    if act not in acts:
        raise ValueError(f"未知的激活函数 act={act!r}：可选 {', '.join(acts)}。(unknown activation)")
    if init not in ("default", "xavier"):
        raise ValueError(f"未知的初始化 init={init!r}：可选 default、xavier。(unknown init)")
    make = makers[norm]
    layers, d = [], 64
    with seeded(seed):
        for i in range(depth):
            layers += [nn.Linear(d, width), make(width, i), acts[act]()]
            d = width
        model = nn.Sequential(*layers, nn.Linear(d, 10))
        if init == "xavier":
            linears = [m for m in model if isinstance(m, nn.Linear)]
            for k, lin in enumerate(linears):
                gain = nn.init.calculate_gain(act) if k < len(linears) - 1 else 1.0
                nn.init.xavier_uniform_(lin.weight, gain=gain)
                nn.init.zeros_(lin.bias)
        return model


def fold_batchnorm(linear: nn.Linear, bn: nn.BatchNorm1d) -> nn.Linear:
    """A Linear followed by an eval-mode BN, as one Linear (what inference engines do):
    W' = s W, b' = s (b - mu) + beta, with s = gamma / sqrt(running_var + eps)."""
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    fused = nn.Linear(linear.in_features, linear.out_features)
    with torch.no_grad():
        fused.weight.copy_(s[:, None] * linear.weight)
        fused.bias.copy_(s * (linear.bias - bn.running_mean) + bn.bias)
    return fused
