"""What a norm costs: an honest micro-benchmark (python -m normlab.bench [--full] [--compile]).

Method: every contender runs on the same tensor (same shape, dtype, memory layout), after
``warmup`` untimed calls. The timings are interleaved: each of ``repeats`` rounds times every
contender once (``inner`` calls each), copy included, so slow phases of the machine hit all
contenders alike. We report the median time with its interquartile range, and the headline:
the ratio of each contender's fastest round to the copy's fastest round (load from other
processes can only make a round slower, never faster, so the minimum is the most repeatable).
Norms read x once and write y once, so once the tensor is larger than the caches they are
limited by memory traffic, and a copy (``x.clone()``) moves the same bytes (8 per float32
element). The default shape (16, 512, 1024) is 32 MiB per tensor: larger than L1 and L2, but not always than the
last-level cache (the course machine of 2026-11-28 has a 300 MiB L3), so on a CPU the ratios may time cache, not DRAM.
Every contender allocates its output, as the functional norms do. On Linux, glibc hands out
such large blocks as fresh pages from the kernel by default, and first-touching 32 MiB costs
more than moving it (page faults, not memory bandwidth); so on a CPU ``run`` first asks glibc
to reuse freed memory (``mallopt``), as PyTorch's caching allocator does on a GPU.

Nominal bytes moved per element (float32, params ignored): copy 8 (read 4 + write 4),
add 12, LayerNorm / RMSNorm 8 if done in one pass over memory, Add+Norm unfused 20
(the sum is written, then read again), Add+Norm fused 12 (16 when the sum h = x + r is also
written out as the next residual stream (in Pre-LN), as normlab.fused's Triton kernel does; GPU only).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from . import norms
from .console import console_safe
from .viz import Table

# Contenders by identifier (the keys of ``run``'s results); labels are for the table only.
LABELS = {"copy": "copy x.clone()", "add": "add x + r", "layer_norm": "F.layer_norm", "rms_norm": "F.rms_norm",
          "normlab_layer_norm": "normlab LayerNorm (readable)", "normlab_rms_norm": "normlab RMSNorm (readable)",
          "add_layer_norm": "Add + LayerNorm (unfused)", "add_rms_norm": "Add + RMSNorm (unfused)",
          "add_rms_norm_compiled": "Add + RMSNorm (torch.compile)",
          "add_rms_norm_triton": "Add + RMSNorm (Triton, h and y)"}
BYTES = {"copy": 8, "add": 12, "layer_norm": 8, "rms_norm": 8, "normlab_layer_norm": 8, "normlab_rms_norm": 8,
         "add_layer_norm": 20, "add_rms_norm": 20, "add_rms_norm_compiled": 12, "add_rms_norm_triton": 16}


def timeit(fn: Callable[[], object], warmup: int = 3, repeats: int = 15, inner: int = 3,
           sync: Callable[[], None] = lambda: None) -> list[float]:
    """Seconds per call, ``repeats`` samples, each the mean of ``inner`` calls after ``warmup`` calls.
    ``sync`` waits for queued work (torch.cuda.synchronize on a GPU, whose calls return early)."""
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / inner)
    return samples


def contenders(x: torch.Tensor, r: torch.Tensor, compile_fused: bool = False) -> dict[str, Callable[[], object]]:
    """The functions timed, by identifier (LABELS names them): each allocates its output."""
    d = x.shape[-1]
    w, b = torch.ones(d, dtype=x.dtype, device=x.device), torch.zeros(d, dtype=x.dtype, device=x.device)
    ln = norms.LayerNorm(d).to(device=x.device, dtype=x.dtype)
    rms = norms.RMSNorm(d, eps=1e-6).to(device=x.device, dtype=x.dtype)
    out = {
        "copy": lambda: x.clone(),
        "add": lambda: x + r,
        "layer_norm": lambda: F.layer_norm(x, (d,), w, b),
        "rms_norm": lambda: F.rms_norm(x, (d,), w, 1e-6),
        "normlab_layer_norm": lambda: ln(x),
        "normlab_rms_norm": lambda: rms(x),
        "add_layer_norm": lambda: F.layer_norm(x + r, (d,), w, b),
        "add_rms_norm": lambda: F.rms_norm(x + r, (d,), w, 1e-6),
    }
    if compile_fused:
        fused = torch.compile(lambda a, c: F.rms_norm(a + c, (d,), w, 1e-6))
        out["add_rms_norm_compiled"] = lambda: fused(x, r)
    if x.is_cuda:                               # normlab.fused: on a CPU it only runs interpreted (no timing)
        from . import fused as triton_fused
        if triton_fused.available():
            out["add_rms_norm_triton"] = lambda: triton_fused.add_rmsnorm(x, r, w, 1e-6)
    return out


def reuse_freed_memory() -> bool:
    """Ask glibc to keep freed blocks and hand them out again instead of mmap'ing fresh pages
    (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD). Process-wide; returns False where there is no glibc."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-3, 1 << 30) and libc.mallopt(-1, (1 << 31) - 1))  # -3 MMAP, -1 TRIM
    except (OSError, AttributeError):
        return False


@torch.no_grad()
def run(shape: tuple[int, ...] = (16, 512, 1024), dtype: torch.dtype = torch.float32, repeats: int = 7,
        compile_fused: bool = False, device: str = "cpu", inner: int = 2) -> dict[str, dict[str, float]]:
    """Median/IQR milliseconds, and the ratio of the fastest round to the copy's fastest, per contender:
    ``{identifier: {"median_ms", "iqr_ms", "ratio_to_copy"}}`` (identifiers as in LABELS; "copy" is 1)."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("没有可用的 GPU (CUDA not available)：GPU 部分是可选的，请用 device='cpu'。")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    r = torch.randn(shape, generator=g).to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    if device == "cpu":
        reuse_freed_memory()
    fns = contenders(x, r, compile_fused)
    for fn in fns.values():                       # warm-up (and compilation) outside the timed rounds
        timeit(fn, warmup=2, repeats=1, inner=1, sync=sync)
    rounds = {key: [] for key in fns}
    for _ in range(repeats):                      # interleaved: one sample of every contender per round
        for key, fn in fns.items():
            rounds[key].append(timeit(fn, warmup=0, repeats=1, inner=inner, sync=sync)[0])
    copy = rounds["copy"]
    results = {}
    for key, samples in rounds.items():
        s = sorted(samples)
        q1, med, q3 = s[len(s) // 4], statistics.median(s), s[(3 * len(s)) // 4]
        ratio = min(samples) / min(copy)
        results[key] = {"median_ms": med * 1e3, "iqr_ms": (q3 - q1) * 1e3, "ratio_to_copy": ratio}
    return results


def paired_ratio(fn_a: Callable[[], object], fn_b: Callable[[], object], rounds: int = 25, threads: int | None = 1,
                 sync: Callable[[], None] = lambda: None) -> float:
    """Median over ``rounds`` of time(``fn_a``) / time(``fn_b``), the two timed back to back in each round
    (a, b, a, b, ...), one call each, after one untimed call of each. A round's two timings are back to
    back and meet about the same load from other work, while the fastest a and the fastest b can come from
    two rounds under different loads. While fewer than half of the rounds are hit by a burst, the median
    stays within the range of the undisturbed rounds' ratios (it can still move inside it); a load that
    lasts the whole timing hits every round, and can move the median too.
    ``threads`` torch threads during the timing (restored afterwards; None keeps the current count)."""
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        fn_a(), fn_b()
        sync()
        ratios = []
        for _ in range(rounds):
            t_a = timeit(fn_a, warmup=0, repeats=1, inner=1, sync=sync)[0]
            t_b = timeit(fn_b, warmup=0, repeats=1, inner=1, sync=sync)[0]
            ratios.append(t_a / t_b)
    finally:
        torch.set_num_threads(old)
    return statistics.median(ratios)


@torch.no_grad()
def unfused_over_fused(shape: tuple[int, ...] = (16, 512, 1024), rounds: int = 25, threads: int | None = 1) -> float:
    """The claim the byte count makes on any CPU: unfused Add + LayerNorm (20 bytes per float32
    element: x + r is written, then read again) takes longer than F.layer_norm alone (8 bytes);
    the bytes predict 2.5x. Returns time(Add + LayerNorm unfused) / time(F.layer_norm), median of paired rounds."""
    g = torch.Generator().manual_seed(0)
    x, r = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    reuse_freed_memory()
    fns = contenders(x, r)
    return paired_ratio(fns["add_layer_norm"], fns["layer_norm"], rounds=rounds, threads=threads)


def table(results: dict[str, dict[str, float]], title: str = "") -> Table:
    """``run``'s results as a table: one row per contender, under its label."""
    rows = [(LABELS.get(key, key), f"{r['median_ms']:.3f}", f"{r['iqr_ms']:.3f}", f"{r['ratio_to_copy']:.2f}",
             BYTES.get(key, "?")) for key, r in results.items()]
    return Table(rows, ["contender", "median ms", "IQR ms", "× copy", "bytes/elem (nominal)"], title=title)


GPU_RECORD = "gpu_04.json"   # normlab/records/: tools/gpu_bench.py on a lent GPU (its name and versions inside)


def recorded_gpu() -> dict:
    """The GPU measurement the course ships (normlab/records/gpu_04.json): readable on any machine, GPU or not."""
    import json
    from importlib import resources

    return json.loads(resources.files("normlab").joinpath("records", GPU_RECORD).read_text(encoding="utf-8"))


def recorded_gpu_table(case: str = "float32 (64, 512, 1024)") -> Table:
    """One case of the GPU record as a table: do_bench median (CUDA events), bandwidth, × copy."""
    rec = recorded_gpu()
    rows = [(LABELS.get(key, key), f"{v['median_ms']:.4f}", f"{v['GBps']:.0f}", f"{v['ratio_to_copy']:.2f}",
             BYTES.get(key, "?")) for key, v in rec["do_bench"][case].items()]
    return Table(rows, ["contender", "median ms", "GB/s (nominal)", "× copy", "bytes/elem (float32)"],
                 title=f"{rec['gpu']} · torch {rec['torch']} · Triton {rec['triton']} · {case}（记录 record）")


def main(argv: list[str] | None = None) -> int:
    console_safe()   # ✓/✗ and the like readable on any console (a GBK one too), never a crash
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="bigger tensor (64, 512, 1024) and more rounds")
    ap.add_argument("--compile", action="store_true", help="add a torch.compile'd fused Add+RMSNorm (~20 s to compile)")
    args = ap.parse_args(argv)
    shape, repeats = ((64, 512, 1024), 15) if args.full else ((16, 512, 1024), 7)
    results = run(shape, repeats=repeats, compile_fused=args.compile)
    print(table(results, title=f"shape {shape}, float32, {torch.get_num_threads()} threads"))
    if torch.cuda.is_available():  # optional: the same contenders, ratio to the GPU's own copy
        gpu = run((64, 512, 1024), repeats=repeats, compile_fused=args.compile, device="cuda")
        print(table(gpu, title=f"GPU {torch.cuda.get_device_name(0)}, shape (64, 512, 1024), float32"))
    else:
        print("没有 GPU (no GPU): 仅 CPU 结果；GPU 部分为可选内容，已跳过 (skipped).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
