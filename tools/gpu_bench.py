"""(maintainers, needs an NVIDIA GPU) The GPU numbers lesson 04 quotes: the hand-written Triton Add + RMSNorm
kernel checked against torch on the GPU, and the cost of each norm there.

    python3 tools/gpu_bench.py --out build/gpu_bench.json

Two timers, so that neither is taken on trust: ``normlab.bench.run`` (the course's own interleaved
rounds, wall clock with torch.cuda.synchronize; the same table ``python -m normlab.bench`` prints) and
``triton.testing.do_bench`` (CUDA events, L2 flushed between calls, median of many). Bandwidth is the
nominal bytes per element (normlab.bench.BYTES) over the do_bench median. The result is written as JSON
(committed as normlab/records/gpu_04.json and quoted by 04's GPU section; the course never needs a GPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from normlab import bench, fused  # noqa: E402


def kernel_errors() -> list[dict]:
    """Max |y_triton - y_torch| per dtype and shape; h must equal x + r exactly."""
    rows = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for shape in ((3, 48), (4, 1), (7, 100), (64, 1000), (4096, 4096), (16, 512, 1024)):
            g = torch.Generator().manual_seed(0)
            x = (torch.randn(shape, generator=g) * 3).to("cuda", dtype)
            r = torch.randn(shape, generator=g).to("cuda", dtype)
            w = (torch.rand(shape[-1], generator=g) + 0.5).to("cuda", dtype)
            h, y = fused.add_rmsnorm(x, r, w, eps=1e-6)
            ref = F.rms_norm((x + r).float(), (shape[-1],), w.float(), 1e-6)   # float32 reference
            rows.append({"dtype": str(dtype).split(".")[-1], "shape": list(shape),
                         "h_equal": bool(torch.equal(h, x + r)),
                         "y_max_abs_err": float((y.float() - ref).abs().max()),
                         "y_max_abs_err_torch_same_dtype": float(
                             (F.rms_norm(x + r, (shape[-1],), w, 1e-6).float() - ref).abs().max())})
    return rows


def do_bench_table(shape, dtype) -> dict[str, dict[str, float]]:
    from triton.testing import do_bench

    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to("cuda", dtype)
    r = torch.randn(shape, generator=g).to("cuda", dtype)
    fns = bench.contenders(x, r, compile_fused=True)
    out = {}
    size = x.element_size()
    for key, fn in fns.items():
        with torch.no_grad():
            ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
        nbytes = bench.BYTES.get(key, 0) * x.numel() * size / 4       # BYTES is per float32 element
        out[key] = {"median_ms": ms, "GBps": nbytes / (ms * 1e-3) / 1e9}
    copy = out["copy"]["median_ms"]
    for v in out.values():
        v["ratio_to_copy"] = v["median_ms"] / copy
    return out


def main(argv: list[str] | None = None) -> int:
    from normlab.console import console_safe   # ✓/✗ and the like readable on any console (a GBK one too)

    console_safe()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "build" / "gpu_bench.json"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("没有 GPU (no CUDA device): nothing to measure.")
        return 2
    import triton

    result = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "cuda": torch.version.cuda, "python": platform.python_version(),
              "triton_kernel_available": fused.available()}
    print(json.dumps(result, indent=1), flush=True)
    result["kernel_errors"] = kernel_errors()
    for row in result["kernel_errors"]:
        print(row, flush=True)
    result["normlab_bench_run"] = {}
    result["do_bench"] = {}
    for dtype in (torch.float32, torch.bfloat16):
        for shape in ((64, 512, 1024), (16, 2048, 4096)):
            name = f"{str(dtype).split('.')[-1]} {shape}"
            run = bench.run(shape, dtype=dtype, repeats=15, compile_fused=True, device="cuda", inner=5)
            print(bench.table(run, title=f"normlab.bench.run on {result['gpu']}, {name}"), flush=True)
            result["normlab_bench_run"][name] = run
            table = do_bench_table(shape, dtype)
            for key, v in table.items():
                print(f"  do_bench {name:28s} {key:24s} {v['median_ms']:.4f} ms  {v['GBps']:7.0f} GB/s  "
                      f"x copy {v['ratio_to_copy']:.2f}", flush=True)
            result["do_bench"][name] = table
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print("written", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
