"""Lesson 05 (DeepNorm): the two wrong versions found in the wild, and DeepNet's measurements at init.

DeepNorm itself, x_{l+1} = LN(alpha * x_l + G_l(x_l)) with beta as an init gain (Wang et al. 2022,
"DeepNet", §4.2-4.3), is core: the constants and the init in ``normlab.init``, the wiring in
``normlab.blocks`` (``wiring="deepnorm"``). Training with DeepNet §3's per-step model update:
``normlab.train.train(..., update_batch=x_u)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import runcache
from ..blocks import seeded
from ..init import deepnorm_constants
from ..models import DigitsNet

__all__ = ["AlphaOnBranch", "BetaOnInput", "VARIANTS", "variant_model", "branch_share", "first_step"]

VARIANTS = ("post", "pre", "deepnorm", "alpha_on_branch", "beta_on_input")


# --- the two wrong versions found in the wild, for the lesson (notebook 05) -----------------
class AlphaOnBranch(nn.Module):
    """LN(x + alpha * G(x)): alpha on the sublayer output (labml's deep_norm, issue #145)."""

    def __init__(self, residual: nn.Module) -> None:
        super().__init__()
        self.r = residual

    def forward(self, x):
        return self.r.norm(x + self.r.alpha * self.r.sublayer(x))


class BetaOnInput(nn.Module):
    """LN(alpha * x + G(beta * x)) with an unscaled init: beta applied to the input at run time."""

    def __init__(self, residual: nn.Module, beta: float) -> None:
        super().__init__()
        self.r, self.beta = residual, beta

    def forward(self, x):
        return self.r.norm(self.r.alpha * x + self.r.sublayer(self.beta * x))


def variant_model(variant: str, depth: int, width: int = 32, seed: int = 0):
    """A digits classifier (``normlab.models.DigitsNet``) whose residual blocks are wired as
    post / pre / deepnorm (correct) / alpha_on_branch / beta_on_input."""
    if variant not in VARIANTS:
        raise ValueError(f"variant 应为 {VARIANTS} 之一，实际收到 {variant!r}。(unknown variant)")
    wiring = variant if variant in ("post", "pre", "deepnorm") else "deepnorm"
    model = DigitsNet(depth=depth, width=width, wiring=wiring, norm="layernorm", seed=seed)
    if variant in ("alpha_on_branch", "beta_on_input"):
        _, beta = deepnorm_constants("encoder", depth)
        with seeded(seed + 1):                                    # the re-init draws from its own stream
            for block in model.stack.blocks:
                if variant == "alpha_on_branch":
                    block.mlp = AlphaOnBranch(block.mlp)
                else:
                    for lin in (block.mlp.sublayer.fc1, block.mlp.sublayer.fc2):
                        nn.init.xavier_normal_(lin.weight)        # no beta in the init ...
                    block.mlp = BetaOnInput(block.mlp, beta)     # ... beta on the input instead
    return model


def branch_share(model, x) -> list[float]:
    """Per layer at this input: ||G(x)|| / ||alpha x|| (how much each block changes the stream)."""
    shares, h = [], model.embed(x)
    for block in model.stack.blocks:
        r = block.mlp
        inner = getattr(r, "r", r)
        if isinstance(r, AlphaOnBranch):
            g, ident = inner.alpha * inner.sublayer(h), h
        elif isinstance(r, BetaOnInput):
            g, ident = inner.sublayer(r.beta * h), inner.alpha * h
        else:
            g, ident = inner.sublayer(h), inner.alpha * h
        shares.append((g.norm() / ident.norm()).item())
        h = block(h)
    return shares


def first_step(model, x, y, update_batch, lr: float = 1e-4) -> dict[str, object]:
    """At initialisation: one cross-entropy backward on (x, y), then one Adam step (learning rate
    ``lr``) on the sublayer weights only (DeepNet's theta: the parameters of the residual branches;
    LN gains, embedding and head stay fixed).

    Returns ``grad_fc1`` / ``grad_fc2``: per layer ||dL/dW|| (bottom layer first), ``update``:
    ||F(x_u; theta_1) - F(x_u; theta_0)|| per sample of ``update_batch`` (x_u), ``relative_update``: the
    same over ||F(x_u; theta_0)||. (Under the test run, a learner copy replays it: normlab/runcache.py.)"""
    return runcache.run(lambda: _first_step(model, x, y, update_batch, lr), model, (x, y, update_batch, lr),
                        desc="deepnorm.first_step")


def _first_step(model, x, y, update_batch, lr: float) -> dict[str, object]:
    branch = [p for n, p in model.named_parameters() if ".sublayer." in n]
    for p in model.parameters():
        p.grad = None
    with torch.no_grad():
        before = model(update_batch)
    F.cross_entropy(model(x), y).backward()
    inner = lambda block: getattr(block.mlp, "r", block.mlp).sublayer
    grad_fc1 = [inner(b).fc1.weight.grad.norm().item() for b in model.stack.blocks]
    grad_fc2 = [inner(b).fc2.weight.grad.norm().item() for b in model.stack.blocks]
    torch.optim.Adam(branch, lr=lr).step()
    with torch.no_grad():
        change = (model(update_batch) - before).norm()
    return {"grad_fc1": grad_fc1, "grad_fc2": grad_fc2, "update": (change / update_batch.shape[0] ** 0.5).item(),
            "relative_update": (change / before.norm()).item()}
