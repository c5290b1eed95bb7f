"""Which tensor of a submission does what, measured (issue 37): the gain is the learnable tensor that, set to 0,
makes every channel's output constant; the bias the one that, moved by δ, moves the output by δ; the running
mean and variance the non-learnable tensors a training forward changes toward the batch's mean and variance
(those created on the first forward included). Names are never the evidence: a BatchNorm whose γ/β are called
theta_sigma/theta_mu and whose statistics appear only after the first batch is read as it behaves.

The roles are kept per class (``ROLES``); probes.find_gain / find_bias / find_stats consult them first."""

from __future__ import annotations

import torch
from torch import Tensor

from ..report import SubmissionError
from .probes import ROLES, output_of, set_mode, set_tensor, tensors_of


def _sized(m, C: int) -> dict[str, Tensor]:
    return {n: t for n, t in tensors_of(m).items() if isinstance(t, Tensor) and t.numel() == C and t.is_floating_point()}


def _per_channel_spread(y: Tensor, axis: int) -> Tensor:
    return y.double().transpose(0, axis).reshape(y.shape[axis], -1).std(1)


def _fits(delta: Tensor, target: Tensor) -> float | None:
    """k with delta ≈ k·target across channels (None when it does not fit)."""
    den = float((target * target).sum())
    if den == 0:
        return None
    k = float((delta * target).sum()) / den
    return k if float((delta - k * target).norm()) <= 1e-3 * (float(delta.norm()) + 1e-12) and abs(k) > 1e-3 else None


def measure(build, C: int, shape: tuple[int, ...], axis: int, stat_axes: tuple[int, ...], g: torch.Generator,
            running: bool = True) -> dict[str, str]:
    """The roles in a fresh module built for ``shape``: {"gain", "bias", "mean", "var"} -> attribute name,
    and "created" when the running statistics appeared on the first forward. Cached per class."""
    m = build(C, eps=1e-5, momentum=0.1) if running else build(C, eps=1e-5)
    set_mode(m, True)
    before = {n: t.detach().double().flatten().clone() for n, t in _sized(m, C).items()}
    bshape = [1] * len(shape)
    bshape[axis] = C
    mu = torch.linspace(-3, 5, C, dtype=torch.float64).reshape(bshape)
    sd = torch.linspace(0.5, 2.5, C, dtype=torch.float64).reshape(bshape)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * sd + mu).float()
    output_of(m, x)
    roles: dict[str, str] = {}
    ROLES[type(m)] = roles
    after = _sized(m, C)
    xd = x.double()
    bmean, bvar = xd.mean(stat_axes), xd.var(stat_axes, unbiased=False)
    n = xd.numel() // C
    if running:
        for name, t in after.items():
            if t.requires_grad:
                continue
            v = t.detach().double().flatten()
            v0 = before.get(name)
            start = v0 if v0 is not None else torch.zeros(C, dtype=torch.float64)
            if v0 is not None and torch.equal(v, v0):
                continue
            if "mean" not in roles and (_fits(v - start, bmean - start) or (v0 is None and _fits(v, bmean))):
                roles["mean"] = name
                continue
            for target in (bvar * n / (n - 1), bvar, bvar + 1e-5):
                if "var" not in roles and (_fits(v - start, target - start) or (v0 is None and _fits(v, target))):
                    roles["var"] = name
                    break
        if roles.get("mean") and roles["mean"] not in before or roles.get("var") and roles["var"] not in before:
            roles["created"] = "yes"
            roles["rank"] = str(len(shape))
    learn = {n: t for n, t in _sized(m, C).items() if t.requires_grad}
    base = output_of(m, x).detach()
    acts: dict[str, list[str]] = {"gain": [], "bias": []}
    for name, t in learn.items():
        keep = t.detach().clone()
        try:
            set_tensor(t, torch.zeros(C))
            if bool((_per_channel_spread(output_of(m, x).detach(), axis) < 1e-6).all()) \
                    and bool((_per_channel_spread(base, axis) > 1e-3).all()):
                acts["gain"].append(name)
                continue
            delta = torch.linspace(0.5, 1.5, C)
            set_tensor(t, keep.flatten() + delta)
            moved = (output_of(m, x).detach() - base).double()
            set_tensor(t, keep.flatten())
            moved0 = (output_of(m, x).detach() - base).double()
            want = delta.double().reshape(bshape).expand(moved.shape)
            if torch.allclose(moved - moved0, want, atol=1e-4):
                acts["bias"].append(name)
        finally:
            set_tensor(t, keep.flatten())
    for role, names in acts.items():     # a role two tensors play (y = x̂ + w + b) is left to the names
        if len(names) == 1:
            roles[role] = names[0]
    return roles


def generator() -> torch.Generator:
    """The measurement's own random numbers (the probes' sequence is left as it was)."""
    return torch.Generator().manual_seed(7)


def learn(build, C, shape, axis, stat_axes, g, running=True) -> dict[str, str]:
    """Measure and remember the roles for the submission's class (an empty dict when the module cannot run)."""
    try:
        roles = measure(build, C, shape, axis, stat_axes, g, running)
    except SubmissionError as err:
        if "time limit" in str(err):
            raise
        roles = {"failed": "yes"}
    except Exception:  # noqa: BLE001 - a submission the measurement cannot use: names as before
        roles = {"failed": "yes"}
    return roles
