"""Add + RMSNorm fused into one Triton kernel: the last step of hand-writing a norm (optional).

    h = x + r                                   # the residual add; h is the new residual stream
    y = h / sqrt(mean(h²) + eps) * w            # RMSNorm over the last dim (eps inside the root)

One program per row reads x and r once and writes h and y once: 16 bytes per float32 element,
where the unfused pair (``h = x + r``, then ``F.rms_norm(h)``) moves 20 (h is written, then
read back), and on a CPU ``F.rms_norm`` itself is several kernels. Forward only (inference);
a training kernel would also need the backward pass (see the drill card ``rmsnorm_backward``).

Needs the optional ``triton`` package (``pip install -e .[fused]``, Linux x86-64); the course
never needs it. On a GPU the kernel is compiled; without one it runs under Triton's interpreter
(``TRITON_INTERPRET=1``, set here before triton is imported): slow, but the same code, so its
correctness is tested on a CPU.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: run the kernel in Triton's interpreter

try:
    import triton
    import triton.language as tl
except ImportError:  # the optional extra is not installed
    triton = None

__all__ = ["available", "add_rmsnorm", "KERNEL_SOURCE"]

HINT = "需要可选依赖 triton (optional extra)：.venv/bin/pip install -e '.[fused]'（Linux x86-64）"


def available() -> bool:
    """True when triton is importable (natively on a GPU, or interpreted on the CPU)."""
    return triton is not None


if triton is not None:

    @triton.jit
    def _add_rmsnorm_kernel(X, R, W, H, Y, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)                                    # one program per row
        cols = tl.arange(0, BLOCK)                                # BLOCK = next power of 2 >= n_cols
        mask = cols < n_cols
        x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
        r = tl.load(R + row * n_cols + cols, mask=mask, other=0.0)
        h = x + r                                                 # h = x + r (in the input dtype)
        tl.store(H + row * n_cols + cols, h, mask=mask)           # the residual stream, written once
        hf = h.to(tl.float32)                                     # statistics in float32
        ms = tl.sum(hf * hf, axis=0) / n_cols                     # mean(h²); masked lanes are 0
        rstd = 1.0 / tl.sqrt(ms + eps)                            # 1 / sqrt(mean(h²) + eps)
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        y = hf * rstd * w                                         # y = h / RMS(h) * w
        tl.store(Y + row * n_cols + cols, y.to(Y.dtype.element_ty), mask=mask)


def add_rmsnorm(x: torch.Tensor, r: torch.Tensor, weight: torch.Tensor,
                eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, y) = (x + r, RMSNorm(x + r) * weight) in one kernel; normalises over the last dim."""
    if triton is None:
        raise RuntimeError(HINT)
    if x.shape != r.shape:
        raise ValueError(f"x 与残差 r 的形状必须相同 (shape mismatch): x {tuple(x.shape)}, r {tuple(r.shape)}")
    d = x.shape[-1]
    if weight.shape != (d,):
        raise ValueError(f"weight 的形状应为 ({d},)，即最后一维 (normalized dim)，实际是 {tuple(weight.shape)}")
    if x.dtype != r.dtype or not x.is_floating_point():
        raise ValueError(f"x 和 r 应是同一种浮点类型 (same float dtype)，实际是 {x.dtype} 和 {r.dtype}")
    x2, r2 = x.reshape(-1, d).contiguous(), r.reshape(-1, d).contiguous()
    h, y = torch.empty_like(x2), torch.empty_like(x2)
    _add_rmsnorm_kernel[(x2.shape[0],)](x2, r2, weight.contiguous(), h, y, d, eps,
                                         BLOCK=triton.next_power_of_2(d))
    return h.view(x.shape), y.view(x.shape)


def _kernel_source() -> str:
    import inspect

    src = inspect.getsource(inspect.getmodule(add_rmsnorm))
    start = src.index("    @triton.jit")
    end = src.index("\ndef add_rmsnorm")
    return "\n".join(line[4:] for line in src[start:end].rstrip().splitlines())


KERNEL_SOURCE = _kernel_source()
