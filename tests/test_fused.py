"""The optional Triton Add + RMSNorm kernel, run by Triton's interpreter on the CPU, against
torch's own ``x + r`` and ``F.rms_norm``. Skipped where the optional ``triton`` is missing, but
never in CI on Linux x86-64, where ``run.py test`` installs it (the extra ``fused``)."""

import ast
import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from normlab import fused

ROOT = Path(__file__).resolve().parent.parent
# With a GPU the kernel is compiled for it and takes CUDA tensors; without one it runs interpreted on the CPU.
DEV = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def triton_kernel():
    """Skip without triton, like the browser tests without Chromium: but in CI, where the extra is
    installed, a missing triton is a failure, not a silent skip."""
    if not fused.available():
        if os.environ.get("CI") and platform.system() == "Linux" and platform.machine() == "x86_64":
            pytest.fail("CI installs the optional extra 'fused' (run.py test), but triton does not import")
        pytest.skip("optional extra triton not installed: .venv/bin/pip install -e '.[fused]'")


@pytest.mark.usefixtures("triton_kernel")
@pytest.mark.parametrize("shape", [(3, 48), (2, 5, 64), (4, 1), (1, 7, 100)])
def test_add_rmsnorm_matches_torch_float32(shape):
    g = torch.Generator().manual_seed(0)
    x, r = (torch.randn(shape, generator=g) * 3).to(DEV), torch.randn(shape, generator=g).to(DEV)
    w = (torch.rand(shape[-1], generator=g) + 0.5).to(DEV)
    h, y = fused.add_rmsnorm(x, r, w, eps=1e-6)
    assert torch.equal(h, x + r)
    torch.testing.assert_close(y, F.rms_norm(x + r, (shape[-1],), w, 1e-6), rtol=1e-5, atol=1e-6)
    assert y.shape == x.shape and y.dtype == x.dtype


@pytest.mark.usefixtures("triton_kernel")
def test_add_rmsnorm_float16_upcasts_like_llama():
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(4, 96, generator=g) * 300).half().to(DEV)   # x² overflows float16 (max 65504)
    r = torch.randn(4, 96, generator=g).half().to(DEV)
    w = torch.ones(96, dtype=torch.float16, device=DEV)
    h, y = fused.add_rmsnorm(x, r, w)
    hf = (x + r).float()
    ref = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).half()
    assert torch.equal(h, x + r) and y.dtype == torch.float16
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, ref, rtol=2e-3, atol=2e-3)


@pytest.mark.usefixtures("triton_kernel")
def test_tiny_input_shows_eps_inside_the_root():
    x, r = torch.full((2, 8), 1e-4, device=DEV), torch.zeros(2, 8, device=DEV)
    _, y = fused.add_rmsnorm(x, r, torch.ones(8, device=DEV), eps=1e-6)
    torch.testing.assert_close(y, x / torch.sqrt(torch.tensor(1e-8 + 1e-6, device=DEV)))   # not x / (1e-4 + 1e-6)


@pytest.mark.usefixtures("triton_kernel")
def test_bad_input_is_named():
    x = torch.randn(2, 8, device=DEV)
    with pytest.raises(ValueError, match="形状必须相同"):
        fused.add_rmsnorm(x, torch.randn(2, 9, device=DEV), torch.ones(8, device=DEV))
    with pytest.raises(ValueError, match="weight"):
        fused.add_rmsnorm(x, torch.randn(2, 8, device=DEV), torch.ones(9, device=DEV))


@pytest.mark.usefixtures("triton_kernel")
def test_cpu_tensors_for_a_kernel_compiled_for_the_gpu_are_named(monkeypatch):
    """With a GPU the kernel is compiled and cannot read CPU memory (Triton's own error is a bare
    'Pointer argument cannot be accessed'); the call says which tensors to move, before launching."""
    monkeypatch.setattr(fused, "interpreted", lambda: False)           # as on a machine with a GPU:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)      # compiled, and a GPU to run it
    with pytest.raises(ValueError, match="GPU"):
        fused.add_rmsnorm(torch.randn(2, 8), torch.randn(2, 8), torch.ones(8))


@pytest.mark.usefixtures("triton_kernel")
def test_without_a_gpu_the_kernel_runs_interpreted():
    if torch.cuda.is_available():
        pytest.skip("a GPU compiles the kernel")
    assert os.environ.get("TRITON_INTERPRET")            # set before the kernel module was imported
    assert fused.interpreted() and fused.device() == "cpu"          # what Triton decided, whatever the spelling


def test_without_triton_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)     # `import triton` fails, as when it is not installed
    monkeypatch.setattr(fused, "_kernel_module", None)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not fused.available()
    with pytest.raises(RuntimeError, match=r"\.\[fused\]"):
        fused.add_rmsnorm(torch.randn(2, 8), torch.randn(2, 8), torch.ones(8))
    assert "TRITON_INTERPRET" not in os.environ            # nothing to interpret: the environment is left alone


def test_importing_normlab_fused_neither_imports_triton_nor_sets_the_interpreter():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = ("import os, sys; import normlab.fused as f; "
            "print('triton' in sys.modules, 'TRITON_INTERPRET' in os.environ, len(f.KERNEL_SOURCE) > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True, encoding="utf-8")
    assert out.stdout.split() == ["False", "False", "True"], out.stdout + out.stderr


def test_kernel_source_is_the_kernel_file():
    """04 prints KERNEL_SOURCE: the whole kernel file, which holds the @triton.jit kernel and nothing else."""
    path = ROOT / "normlab" / "fused_kernel.py"
    assert fused.KERNEL_SOURCE == path.read_text(encoding="utf-8")
    tree = ast.parse(fused.KERNEL_SOURCE)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert [d.name for d in defs] == ["add_rmsnorm_kernel"]
    assert ast.unparse(defs[0].decorator_list[0]) == "triton.jit"
    assert "h = x + r" in fused.KERNEL_SOURCE and "tl.sqrt(ms + eps)" in fused.KERNEL_SOURCE


def test_the_lesson_s_kernel_cell_puts_its_tensors_where_the_kernel_runs():
    """04's kernel cell ran only under the interpreter: on a GPU machine with Triton the kernel is compiled for the
    GPU and CPU tensors are refused (seen on an H200, 2026-11-28: the old cell raised, the new one ran, max |diff|
    9.5e-07). The cell moves its tensors to ``fused.device()`` and back."""
    import re
    from pathlib import Path
    src = (Path(__file__).resolve().parent.parent / "notebooks" / "04_rmsnorm.md").read_text(encoding="utf-8")
    cell = next(c for c in re.findall(r"```\{code-cell\} ipython3\n(.*?)```", src, re.S) if "fused.add_rmsnorm" in c)
    assert "dev = fused.device()" in cell and "add_rmsnorm(x.to(dev), r.to(dev), w.to(dev)" in cell, cell


@pytest.mark.skipif(importlib.util.find_spec("triton") is None or fused.triton_version() < fused.TRITON_MIN,
                    reason="no Triton the kernel supports")
@pytest.mark.parametrize("value", ["y", " 1", "0", None])          # None: unset, as run.py leaves it
def test_the_interpreter_is_what_triton_decided(value):
    """fused.interpreted() is Triton's own decision, whatever TRITON_INTERPRET's spelling: a re-parse of the
    variable first missed "true" (a fresh read of d21645a), then "y", and counted " 1" (a fresh read of f0051b3),
    and device() sent the tensors of 04's kernel cell to the wrong device. Where Triton compiled the kernel for a
    GPU that is not here, add_rmsnorm says so and how to fix it. In a child process, as a learner's kernel starts."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if value is not None:
        env["TRITON_INTERPRET"] = value
    code = ("import json, torch; from normlab import fused; fused.available()\n"     # as 04's cell: fused first
            "import triton, triton.knobs\n"
            "said = None\n"
            "try: fused.add_rmsnorm(torch.randn(2, 8).to(fused.device()), torch.randn(2, 8).to(fused.device()), "
            "torch.ones(8).to(fused.device()))\n"
            "except RuntimeError as e: said = str(e)\n"
            "print(json.dumps([fused.interpreted(), bool(triton.knobs.runtime.interpret), fused.available(), "
            "fused.device(), torch.cuda.is_available(), said]))")
    env["PYTHONUTF8"] = "1"                                    # UTF-8 mode for the child (the rule for every child)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, encoding="utf-8",
                         timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    interpreted, triton_says, available, device, cuda, said = json.loads(out.stdout.strip().splitlines()[-1])
    assert interpreted == triton_says and available
    assert device == ("cuda" if cuda and not interpreted else "cpu")
    if interpreted or cuda:
        assert said is None                                    # the kernel ran
    else:                                                      # compiled for a GPU that is not here
        assert said and "TRITON_INTERPRET" in said and "重启 Jupyter 内核" in said, said
