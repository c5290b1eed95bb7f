"""Interview drills (手撕): check a hand-written norm and name the mistake.

    from normlab import drills
    report = drills.check("layernorm", MyLayerNorm)   # a class, as torch.nn.LayerNorm is called
    report.passed, report.findings                    # and it renders as a table in a notebook

Two levels in every report (issue 16), each with a one-line verdict ("面试级 ✓ · 工程级 2 项"):
    interview  (面试级)  the formula and semantics an interviewer checks. LN/RMS: the last dimension
                        given as an int, float32, eps passed through (eps 1e-5 and 1e-2, |x| 1e-3..1e3),
                        γ/β, gradients. BN: train/eval via self.training, running statistics as
                        buffers, the momentum convention, unbiased running variance, in the layout
                        the submission supports ((N, C) and/or (N, C, H, W)).
    production (工程级)  a drop-in for the torch module: tuple normalized_shape, float16/bfloat16 with
                        a float32 upcast, torch's default eps, both BN ranks, momentum=None,
                        state_dict names and shapes, torch's constructor signature.
``report.passed`` is the interview level; ``report.passed_production`` (or
``report.passed_at("production")``) the strict one. ``check(kind, impl, level="production")``
makes the strict level the one the report leads with (and the CLI's exit status).

Kinds and what ``impl`` is (signatures mirror torch.nn):
    "layernorm"           class LayerNorm(normalized_shape, eps=1e-5): weight, bias
    "rmsnorm"             class RMSNorm(normalized_shape, eps=1e-6): weight only
    "batchnorm"           class BatchNorm(num_features, eps=1e-5, momentum=0.1): weight, bias,
                          buffers running_mean / running_var; (N, C) and (N, C, H, W)
    "layernorm_backward"  f(grad_out, x, weight, eps) -> (grad_x, grad_weight, grad_bias), last dim
    "batchnorm_backward"  the same signature, (N, C) in training mode
    "rmsnorm_backward"    f(grad_out, x, weight, eps) -> (grad_x, grad_weight)
    "groupnorm"           class GroupNorm(num_groups, num_channels, eps=1e-5): weight, bias (C,); (N, C, H, W)
    "groupnorm_backward"  f(grad_out, x, weight, num_groups, eps) -> (grad_x, grad_weight, grad_bias), (N, C, H, W)
    "deepnorm_constants"  f(arch, N, M) -> (alpha, beta), arch in encoder / decoder /
                          encdec_encoder / encdec_decoder (Wang et al. 2022 §4.3)
    "deepnorm_residual"   f(x, fx, alpha) -> LN(alpha * x + fx)   (LN without affine, last dim)
    "deepnorm_init"       f(block, beta) initialises block.attn.{q,k,v,out}_proj and block.ffn.fc1/fc2
                          in place: Xavier with gain beta for v/out/fc1/fc2, gain 1 for q/k (§4.3)
    "prenorm_block"       f(x, sublayer, norm) -> x + sublayer(norm(x))
    "postnorm_block"      f(x, sublayer, norm) -> norm(x + sublayer(x))
    "dyt"                 class DyT(d, alpha_init=0.5): weight * tanh(alpha * x) + bias (notebook 07)

Timed mode and progress (issue 18, 28): ``drills.start("layernorm")`` in its own cell opens the card:
it starts the clock (a card name such as "blocks" or "deepnorm" starts all its kinds); a check
reports the time against the card's target and the first passing check stops the clock. The
checks of an opened card (and of the command line, and ``check(..., record=True)``) are the
learner's attempts, saved to a small JSON file (``$NORMLAB_DRILLS_FILE``, default
~/.normlab/drills.json); a plain ``check()`` from a script, test or tool writes nothing.
``python -m normlab.drills --progress`` prints it, ``--reset CARD`` forgets one card's progress
(never an answer); ``start CARD`` / ``check CARD FILE`` time an attempt written in one's own
editor. See progress.py and ``python -m normlab.drills --help``.

Every check compares with torch's own functions (F.layer_norm, F.rms_norm, F.batch_norm) or
float64 autograd; when an output differs, the known wrong formulas and their combinations
(unbiased variance, eps outside the root / missing / ignored, no square root, (1 + weight),
every subset of reduction axes, ...) are searched to name the mistake (the fast path); when none
fits, properties of the submission are measured as a black box (checks/properties.py, diagnosis.py):
which elements share statistics, how the output scales with the input, whether it is centred and to
what scale, where eps acts, how gamma and beta act, and for a backward a least-squares fit of grad_x
on the true formula's terms along each axis; each property that differs from torch's is a finding
in the candidate's words. A submission whose names
or shapes differ from torch's (gamma/beta, a_2/b_2, (1, C, 1, 1) parameters, a required num_dims)
is still checked; the difference is a production finding. Learner code runs under a time limit;
an exception in any step, a wrong shape or dtype, NaN or a timeout becomes a finding of that step,
never a crash of the checker or a lost report. Command line:
    python -m normlab.drills start layernorm                      # start the clock, say what to write
    python -m normlab.drills check layernorm my_ln.py [--level production]   # or: layernorm my_ln.py
    python -m normlab.drills --progress | --reset CARD | --help
"""

from __future__ import annotations

import torch

from . import progress
from .checks import keepdim
from .checks import (backward_checks, block_checks, bn_checks, gn_checks, deepnorm_constant_checks, deepnorm_init_checks,
                     deepnorm_residual_checks, dyt_checks, ln_checks)
from .progress import CARDS, DEFINES, TARGETS, record_progress, start
from .report import LEVELS, Finding, Report, SubmissionError

KINDS = {
    "layernorm": lambda impl, out: ln_checks(impl, rms=False, out=out),
    "rmsnorm": lambda impl, out: ln_checks(impl, rms=True, out=out),
    "batchnorm": bn_checks,
    "layernorm_backward": lambda fn, out: backward_checks(fn, "layernorm", out),
    "batchnorm_backward": lambda fn, out: backward_checks(fn, "batchnorm", out),
    "rmsnorm_backward": lambda fn, out: backward_checks(fn, "rmsnorm", out),
    "groupnorm": gn_checks,
    "groupnorm_backward": lambda fn, out: backward_checks(fn, "groupnorm", out),
    "deepnorm_constants": deepnorm_constant_checks,
    "deepnorm_residual": deepnorm_residual_checks,
    "deepnorm_init": deepnorm_init_checks,
    "prenorm_block": lambda fn, out: block_checks(fn, "pre", out),
    "postnorm_block": lambda fn, out: block_checks(fn, "post", out),
    "dyt": dyt_checks,
}
# the name a submission file must define for each kind (its signature: progress.DEFINES)
NAMES = {kind: name for kind, (name, _, _) in DEFINES.items()}


def check(kind: str, impl, level: str = "interview", record: bool | None = None) -> Report:
    """Run every check of ``kind`` on ``impl`` and return a Report (never raises for learner bugs).

    ``report.passed`` is the interview level whatever ``level`` is; ``level`` picks the level the
    report leads with and ``report.passed_at()`` answers for (the CLI's ``--level``).

    ``record``: whether this check is one of the learner's attempts, saved to the progress file.
    Called as a library (a script, a test, a tool) a check writes nothing; ``record=True`` records
    (the command line does); the default ``None`` records only a kind whose card ``drills.start``
    opened in this process (notebook 08's cards)."""
    if kind not in KINDS:
        raise ValueError(f"未知的练习类型 (unknown drill kind) {kind!r}；可选: {sorted(KINDS)}")
    if level not in LEVELS:
        raise ValueError(f"未知的级别 (unknown level) {level!r}；可选: {list(LEVELS)}")
    findings: list[Finding] = []
    threads = torch.get_num_threads()
    # The probes are tiny tensors: one thread. With two, torch's CPU batch_norm took ~0.15 s a call
    # on the course machine (thread wake-ups), 20 000x its one-thread time.
    torch.set_num_threads(1)
    keepdim.CURRENT.update(kind=kind, impl=impl)        # a broadcast error is said for this card and this source
    try:
        KINDS[kind](impl, findings)
    except SubmissionError as err:   # a timeout stops the checks: keep what was found so far
        findings.append(Finding("timeout" if "time limit" in str(err) else "raised", False,
                                f"你的代码报错了 (your code raised): {err}；之后的检查没有运行"))
    except Exception as err:  # noqa: BLE001 - a checker must report, not crash
        findings.append(Finding("checker", False, f"检查时出错 (the submission broke a check): "
                                                  f"{type(err).__name__}: {err}"))
    finally:
        torch.set_num_threads(threads)
        keepdim.CURRENT.update(kind=None, impl=None)
    report = Report(kind, findings, level=level, target=progress.TARGETS[kind])
    recording = progress.wants(kind, record)
    report.elapsed, report.clock_running = progress.lap(kind, report.passed_at(), shared=recording)
    if recording:
        progress.record(report)
    return report


__all__ = ["check", "start", "record_progress", "KINDS", "NAMES", "DEFINES", "LEVELS", "CARDS", "TARGETS", "Report", "Finding"]
