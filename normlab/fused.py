"""Add + RMSNorm fused into one Triton kernel: the last step of hand-writing a norm (optional).

    h = x + r                                   # the residual add; h is the new residual stream
    y = h / sqrt(mean(h²) + eps) * w            # RMSNorm over the last dim (eps inside the root)

One program per row reads x and r once and writes h and y once: 16 bytes per float32 element,
where the unfused pair (``h = x + r``, then ``F.rms_norm(h)``) moves 20 (h is written, then
read back), and on a CPU ``F.rms_norm`` itself is several kernels. Forward only (inference);
a training kernel would also need the backward pass (see the drill card ``rmsnorm_backward``).

The kernel itself is ``normlab/fused_kernel.py`` (its text is ``KERNEL_SOURCE``). It needs the
optional ``triton`` package (``pip install -e .[fused]``, Linux x86-64); the course never needs
it, and importing this module never imports triton. On a GPU the kernel is compiled; without
one it runs under Triton's interpreter: on first use, when triton is installed and there is no
GPU, ``TRITON_INTERPRET=1`` is set (unless already set) just before the kernel module is
imported, since ``@triton.jit`` reads it when it decorates. Slow, but the same code, so its
correctness is tested on a CPU.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import torch

__all__ = ["available", "device", "interpreted", "add_rmsnorm", "KERNEL_SOURCE", "HINT", "NO_GPU"]

HINT = "需要可选依赖 triton (optional extra)：.venv/bin/pip install -e '.[fused]'（Linux x86-64）"
KERNEL_SOURCE = Path(__file__).with_name("fused_kernel.py").read_text(encoding="utf-8")

_kernel_module: ModuleType | None = None
# The oldest Triton the kernel was checked with (the `fused` extra's floor). Triton 3.0, which torch
# 2.4's CUDA wheel brings along, runs it in the interpreter but gives a wrong h = x + r (off by ~8).
TRITON_MIN = (3, 5)


def triton_version() -> tuple[int, ...]:
    """The installed Triton's (major, minor), from its metadata ((0,) when unknown)."""
    from importlib import metadata

    try:
        return tuple(int(p) for p in metadata.version("triton").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return (0,)


def _kernel() -> ModuleType | None:
    """normlab.fused_kernel, imported on first use (None where triton cannot be imported)."""
    global _kernel_module
    if _kernel_module is None:
        if importlib.util.find_spec("triton") is None:   # not installed: leave the environment alone
            return None
        if triton_version() < TRITON_MIN:                    # older than the kernel was checked with
            return None
        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")   # no GPU: Triton's interpreter runs the kernel
        try:
            from . import fused_kernel
        except ImportError:                                  # installed but unusable here
            return None
        _kernel_module = fused_kernel
    return _kernel_module


def available() -> bool:
    """True when ``normlab.fused_kernel`` imports (a Triton at least TRITON_MIN is installed); it does not promise
    the kernel runs. Usually it runs interpreted on the CPU or compiled on a GPU. Two exceptions: one set up for a
    GPU that is not here (a learner's own TRITON_INTERPRET=0 on a CPU), which ``add_rmsnorm`` refuses with the
    reason (NO_GPU); and, without a GPU, a triton imported before normlab.fused with TRITON_INTERPRET unset: Triton
    builds its interpreter helpers only at its own first import, so the interpreted kernel then fails with
    Triton's "Cannot call @triton.jit'd outside of the scope of a kernel" (import normlab.fused first, as 04 does,
    or start with TRITON_INTERPRET=1)."""
    return _kernel() is not None


def device() -> str:
    """Where ``add_rmsnorm``'s tensors must be: "cuda" when the kernel is compiled and a GPU is there, else "cpu"
    (Triton's interpreter; or a kernel compiled for a GPU that is not here, which ``add_rmsnorm`` then refuses
    with the reason)."""
    return "cuda" if not interpreted() and torch.cuda.is_available() else "cpu"


def interpreted() -> bool:
    """The kernel runs in Triton's interpreter, as Triton decided when ``@triton.jit`` decorated it (on the first
    import of ``normlab.fused_kernel``, reading TRITON_INTERPRET with its own spelling rules: 1, true, y, ... but
    not " 1"; the choice holds for the process): asked of the kernel object, not re-parsed from the environment.
    False when the kernel is not available."""
    kernel = _kernel()
    if kernel is None:
        return False
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(kernel.add_rmsnorm_kernel, InterpretedFunction)


NO_GPU = ("TRITON_INTERPRET 让 Triton 选了为 GPU 编译这个 Triton 内核，可这台机器没有 GPU：去掉这个环境变量（或设为不带空格的 1），"
          "然后重启 Jupyter 内核或这个 Python 进程（变量若来自启动 JupyterLab 的终端，也要重启 JupyterLab）。normlab 第一次"
          "载入这个 Triton 内核时（第一次调用 fused 的任一函数）Triton 就定下了解释还是编译，之后在进程里改变量不起作用。"
          "(the Triton kernel was set up for a GPU that is not here: unset TRITON_INTERPRET or set it to 1 without spaces, "
          "then restart the Jupyter kernel or the Python process)")


def add_rmsnorm(x: torch.Tensor, r: torch.Tensor, weight: torch.Tensor,
                eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, y) = (x + r, RMSNorm(x + r) * weight) in one kernel; normalises over the last dim."""
    kernel = _kernel()
    if kernel is None:
        raise RuntimeError(HINT)
    if not interpreted() and not torch.cuda.is_available():
        raise RuntimeError(NO_GPU)
    if x.shape != r.shape:
        raise ValueError(f"x 与残差 r 的形状必须相同 (shape mismatch): x {tuple(x.shape)}, r {tuple(r.shape)}")
    d = x.shape[-1]
    if weight.shape != (d,):
        raise ValueError(f"weight 的形状应为 ({d},)，即最后一维 (normalized dim)，实际是 {tuple(weight.shape)}")
    devices = {t.device.type for t in (x, r, weight)}
    if not interpreted() and devices != {"cuda"}:                       # compiled for the GPU
        raise ValueError("这台机器有 GPU，内核是为 GPU 编译的：x、r、weight 都要在 GPU 上，例如 x.to('cuda')。"
                         f"(the compiled kernel needs CUDA tensors; got {sorted(devices)})")
    if x.dtype != r.dtype or not x.is_floating_point():
        raise ValueError(f"x 和 r 应是同一种浮点类型 (same float dtype)，实际是 {x.dtype} 和 {r.dtype}")
    x2, r2 = x.reshape(-1, d).contiguous(), r.reshape(-1, d).contiguous()
    h, y = torch.empty_like(x2), torch.empty_like(x2)
    kernel.add_rmsnorm_kernel[(x2.shape[0],)](x2, r2, weight.contiguous(), h, y, d, eps,
                                              BLOCK=kernel.triton.next_power_of_2(d))
    return h.view(x.shape), y.view(x.shape)
