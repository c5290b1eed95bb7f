"""Norms beyond the big three (notebook 07): ScaleNorm, PowerNorm (the paper's and the source
material's), QK-norm attention, Dynamic Tanh (DyT). Each is tested in tests/test_beyond.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..blocks import SelfAttention
from ..variants import power_norm_source_c


class ScaleNorm(nn.Module):
    """ScaleNorm (Nguyen & Salazar 2019): y = g * x / max(||x||_2, eps), ONE scalar gain g,
    initialised to sqrt(d) (transformers_without_tears, layers.py). Compared with RMSNorm
    (x / sqrt(mean x^2) * gamma = sqrt(d) * x / ||x|| * gamma) it has a single gain, not d of them."""

    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.tensor(math.sqrt(d)))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp(min=self.eps)


class _ShenApproxScale(torch.autograd.Function):
    """z = x / sqrt(use + eps) forward; backward as in the authors' code (sIncerass/powernorm,
    fairseq/modules/norms/mask_powernorm.py, PowerFunction):

        g~ = g - (1 - alpha_bkw) * nu * z           # nu: running estimate of mean(g * z)
        nu <- nu + mean over (B, S) of (g~ * z)     # updated in place, per channel
        dL/dx = g~ / sqrt(psi_B^2 + eps)            # psi_B^2: this batch's quadratic mean

    The exact gradient of x / sqrt(psi_B^2(x) + eps) is (g - mean(g * z) * z) / sqrt(psi_B^2 + eps):
    the approximation replaces this batch's mean(g * z) by a running estimate."""

    @staticmethod
    def forward(ctx, x, use, quad, nu, alpha_bkw: float, eps: float):
        z = x / torch.sqrt(use + eps)
        ctx.save_for_backward(z, quad, nu)
        ctx.alpha_bkw, ctx.eps = alpha_bkw, eps
        return z

    @staticmethod
    def backward(ctx, g):
        z, quad, nu = ctx.saved_tensors
        g_tilde = g - (1 - ctx.alpha_bkw) * nu * z
        nu.add_((g_tilde * z).mean(tuple(range(z.dim() - 1))))
        return g_tilde / torch.sqrt(quad + ctx.eps), None, None, None, None, None


class PowerNormShen(nn.Module):
    """PowerNorm as in Shen et al. 2020 (arXiv 2003.07845): a BatchNorm-family norm for (B, S, C)
    inputs that (i) does not subtract a mean, (ii) divides by the quadratic mean psi^2 = mean over
    (B, S) of x^2 per channel, kept as a running average that is also used in training (after
    ``warmup_steps`` steps on the batch statistic; alpha = running decay), with gamma, beta per
    channel, and (iii) back-propagates with the authors' approximate gradient
    (``approx_backward``, see _ShenApproxScale; buffer ``running_gz`` = their ``ema_gz``).
    ``mask`` marks real tokens (True) so padding is left out of psi^2. (The authors' code also
    divides each token by its own RMS first, ``GroupScaling1D``, a per-token step; not modelled here.)"""

    def __init__(self, channels: int, alpha: float = 0.9, eps: float = 1e-5, warmup_steps: int = 0,
                 alpha_bkw: float = 0.9, approx_backward: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_phi", torch.ones(channels))
        self.register_buffer("running_gz", torch.zeros(channels))
        self.alpha, self.eps, self.warmup_steps = alpha, eps, warmup_steps
        self.alpha_bkw, self.approx_backward = alpha_bkw, approx_backward
        self.steps = 0

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if self.training:
            m = torch.ones(x.shape[:-1], dtype=torch.bool, device=x.device) if mask is None else mask
            quad = (x.pow(2) * m[..., None]).sum((0, 1)) / m.sum()        # psi_B^2 over real tokens
            use = quad if self.steps < self.warmup_steps else self.running_phi.clone()  # psi_{t-1}
            with torch.no_grad():
                self.running_phi.mul_(self.alpha).add_((1 - self.alpha) * quad.detach())
            self.steps += 1
            if self.approx_backward and x.requires_grad:
                z = _ShenApproxScale.apply(x, use.detach(), quad.detach(), self.running_gz, self.alpha_bkw, self.eps)
                return z * self.weight + self.bias
        else:
            use = self.running_phi
        return x / torch.sqrt(use + self.eps) * self.weight + self.bias


class PowerNormSourceC(nn.Module):
    """What [C] calls PowerNorm: a per-token p-mean normaliser, x / (mean(|x|^p)^(1/p) + eps) * gamma
    + beta. For p = 2 this is RMSNorm with eps outside the root and a bias: an LN-family method,
    not the paper's BN-family PowerNorm."""

    def __init__(self, d: int, p: float = 2.0, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))
        self.p, self.eps = p, eps

    def forward(self, x: Tensor) -> Tensor:
        return power_norm_source_c(x, self.p, self.eps) * self.weight + self.bias


QK_NORMS = ("none", "head_rms", "full_rms", "head_ln")


class QKNormAttention(SelfAttention):
    """Self-attention with optional QK-norm before the dot product. Records the largest |attention
    logit| of the last call in ``last_max_logit``; ``logit_bound()`` is the bound the variant gives.

        "head_rms"  RMSNorm(d_head) on each head's q and k (Qwen 3, Gemma 3: ``q_norm``/``k_norm`` over
                    head_dim; ViT-22B's LayerNorm "without bias and centering" is the same). ||norm(q)|| <= max|g_q| sqrt(d_head), so
                    |logit| <= sqrt(d_head) * max|g_q| * max|g_k|
        "full_rms"  RMSNorm(width) on the whole q and k projection, before the split into heads (OLMo 2).
                    Only the full vector's norm is fixed (<= max|g| sqrt(width)); one head's slice can
                    carry all of it, so per head |logit| <= width / sqrt(d_head) * max|g_q| * max|g_k|,
                    heads times the per-head bound.
        "head_ln"   LayerNorm(d_head) on each head's q and k, centred, with a gain and no bias: the lesson's
                    control (head_rms plus a centring), to show that centring leaves the bound alone. (ViT-22B's
                    QK LayerNorms are "without bias and centering", Dehghani et al. 2023 §2: that is head_rms.)
                    A centred, normalised vector of d_head entries has norm <= sqrt(d_head), so the bound is
                    head_rms's: |logit| <= sqrt(d_head) max|g_q| max|g_k|.

    ``qk_norm``: one of QK_NORMS, or True (= "head_rms") / False (= "none").
    """

    def __init__(self, width: int, heads: int = 4, causal: bool = False, qk_norm: bool | str = True) -> None:
        super().__init__(width, heads, causal)
        kind = {True: "head_rms", False: "none"}.get(qk_norm, qk_norm) if isinstance(qk_norm, bool) else qk_norm
        if kind not in QK_NORMS:
            raise ValueError(f"qk_norm 应为 {QK_NORMS} 之一或 True/False，实际收到 {qk_norm!r}。(unknown qk_norm)")
        self.kind = kind
        d = width // heads
        make = {"none": lambda: nn.Identity(), "head_rms": lambda: nn.RMSNorm(d, eps=1e-6),
                "full_rms": lambda: nn.RMSNorm(width, eps=1e-6), "head_ln": lambda: nn.LayerNorm(d, bias=False)}[kind]
        self.q_norm, self.k_norm = make(), make()
        self.last_max_logit = 0.0

    def forward(self, x: Tensor) -> Tensor:
        b, s, w = x.shape
        split = lambda t: t.view(b, s, self.heads, w // self.heads).transpose(1, 2)
        q, k, v = self.q_proj(x), self.k_proj(x), split(self.v_proj(x))
        if self.kind == "full_rms":
            q, k = split(self.q_norm(q)), split(self.k_norm(k))        # normalise the full width, then split
        else:
            q, k = self.q_norm(split(q)), self.k_norm(split(k))        # split, then normalise each head
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if self.causal:
            logits = logits.masked_fill(torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        self.last_max_logit = logits.detach().abs().masked_fill(torch.isinf(logits), 0).max().item()
        y = logits.softmax(-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(b, s, w))

    @torch.no_grad()
    def logit_bound(self) -> float:
        """The bound on |logit| that this variant guarantees (inf without QK-norm); see the class docstring."""
        d = self.q_proj.in_features // self.heads
        if self.kind == "none":
            return math.inf
        gq, gk = self.q_norm.weight.abs().max().item(), self.k_norm.weight.abs().max().item()
        if self.kind == "full_rms":
            return self.q_proj.in_features / math.sqrt(d) * gq * gk
        return math.sqrt(d) * gq * gk               # head_rms, and head_ln (centred, no bias)


def use_qk_attention(model: nn.Module, qk_norm: bool | str) -> list[QKNormAttention]:
    """Swap every SelfAttention of a normlab.blocks model for a QKNormAttention with the same weights."""
    swapped = []
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is SelfAttention:
                new = QKNormAttention(child.q_proj.in_features, child.heads, child.causal, qk_norm)
                new.load_state_dict(child.state_dict(), strict=False)
                setattr(module, name, new)
                swapped.append(new)
    return swapped


class DyT(nn.Module):
    """Dynamic Tanh (Zhu, Chen, He, LeCun, Liu 2025): y = gamma * tanh(alpha * x) + beta, alpha a
    learnable scalar (init 0.5 in jiachenzhu/DyT dynamic_tanh.py), gamma/beta per channel.
    No statistics at all: a drop-in replacement for LayerNorm."""

    def __init__(self, d: int, alpha_init: float = 0.5) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(alpha_init))
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(self.alpha * x) * self.weight + self.bias


def replace_layernorms(model: nn.Module, make) -> int:
    """Replace every nn.LayerNorm in ``model`` by ``make(d)``; returns how many were replaced."""
    n = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.LayerNorm):
                setattr(module, name, make(child.normalized_shape[0]))
                n += 1
    return n


def fit_tanh(x: Tensor, y: Tensor, steps: int = 300) -> tuple[float, float, float]:
    """Least-squares fit y ~ a * tanh(b * x); returns (a, b, R^2)."""
    a, b = torch.tensor(1.0, requires_grad=True), torch.tensor(0.5, requires_grad=True)
    opt = torch.optim.Adam([a, b], lr=0.05)
    for _ in range(steps):
        loss = F.mse_loss(a * torch.tanh(b * x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        r2 = 1 - F.mse_loss(a * torch.tanh(b * x), y) / y.var()
    return a.item(), b.item(), r2.item()
