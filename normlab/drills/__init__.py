"""Interview drills (手撕): check a hand-written norm and name the mistake.

    from normlab import drills
    report = drills.check("layernorm", MyLayerNorm)   # a class, as torch.nn.LayerNorm is called
    report.passed, report.findings                    # and it renders as a table in a notebook

Kinds and what ``impl`` is (signatures mirror torch.nn):
    "layernorm"           class LayerNorm(normalized_shape, eps=1e-5): weight, bias
    "rmsnorm"             class RMSNorm(normalized_shape, eps=1e-6): weight only
    "batchnorm"           class BatchNorm(num_features, eps=1e-5, momentum=0.1): weight, bias,
                          buffers running_mean / running_var; (N, C) and (N, C, H, W)
    "layernorm_backward"  f(grad_out, x, weight, eps) -> (grad_x, grad_weight, grad_bias), last dim
    "batchnorm_backward"  the same signature, (N, C) in training mode
    "rmsnorm_backward"    f(grad_out, x, weight, eps) -> (grad_x, grad_weight)
    "deepnorm_constants"  f(arch, N, M) -> (alpha, beta), arch in encoder / decoder /
                          encdec_encoder / encdec_decoder (Wang et al. 2022 §4.3)
    "deepnorm_residual"   f(x, fx, alpha) -> LN(alpha * x + fx)   (LN without affine, last dim)
    "prenorm_block"       f(x, sublayer, norm) -> x + sublayer(norm(x))
    "postnorm_block"      f(x, sublayer, norm) -> norm(x + sublayer(x))
    "dyt"                 class DyT(d, alpha_init=0.5): weight * tanh(alpha * x) + bias (notebook 07)

Every check compares with torch's own functions (F.layer_norm, F.rms_norm, F.batch_norm) or
float64 autograd; when an output differs, the usual wrong formulas are tried to name the mistake.
Learner code runs under a time limit; an exception, a wrong shape or dtype, NaN or a timeout
becomes a finding, never a crash of the checker. Command line:
    python -m normlab.drills layernorm path/to/my_ln.py
"""

from __future__ import annotations

import time

from .checks import (backward_checks, block_checks, bn_checks, deepnorm_constant_checks, deepnorm_residual_checks,
                     dyt_checks, ln_checks)
from .report import Finding, Report, SubmissionError

KINDS = {
    "layernorm": lambda impl: ln_checks(impl, rms=False),
    "rmsnorm": lambda impl: ln_checks(impl, rms=True),
    "batchnorm": bn_checks,
    "layernorm_backward": lambda fn: backward_checks(fn, "layernorm"),
    "batchnorm_backward": lambda fn: backward_checks(fn, "batchnorm"),
    "rmsnorm_backward": lambda fn: backward_checks(fn, "rmsnorm"),
    "deepnorm_constants": deepnorm_constant_checks,
    "deepnorm_residual": deepnorm_residual_checks,
    "prenorm_block": lambda fn: block_checks(fn, "pre"),
    "postnorm_block": lambda fn: block_checks(fn, "post"),
    "dyt": dyt_checks,
}
NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "batchnorm": "BatchNorm",
         "layernorm_backward": "layernorm_backward", "batchnorm_backward": "batchnorm_backward",
         "rmsnorm_backward": "rmsnorm_backward", "deepnorm_constants": "deepnorm_constants",
         "deepnorm_residual": "deepnorm_residual", "prenorm_block": "prenorm_block", "postnorm_block": "postnorm_block", "dyt": "DyT"}


_started: dict[str, float] = {}


def start(kind: str) -> None:
    """Timed mode: start the clock for a drill; the next ``check`` of that kind reports the time."""
    _started[kind] = time.time()


def check(kind: str, impl) -> Report:
    """Run every check of ``kind`` on ``impl`` and return a Report (never raises for learner bugs)."""
    if kind not in KINDS:
        raise ValueError(f"未知的练习类型 (unknown drill kind) {kind!r}；可选: {sorted(KINDS)}")
    try:
        findings = KINDS[kind](impl)
    except SubmissionError as err:
        findings = [Finding("raised", False, f"你的代码报错了 (your code raised): {err}")]
    except Exception as err:  # noqa: BLE001 - a checker must report, not crash
        findings = [Finding("unexpected", False, f"检查时出错 (the submission broke a check): "
                                                 f"{type(err).__name__}: {err}")]
    report = Report(kind, findings)
    if kind in _started:
        report.elapsed = time.time() - _started[kind]
    return report


__all__ = ["check", "start", "KINDS", "NAMES", "Report", "Finding"]
