"""Course setup (seeds, plot style) and the environment check of notebook 00."""

from __future__ import annotations

import os
import platform
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import runcache
from .viz import Table, find_cjk_font, use_style


SEED_VARIABLE = "NORMLAB_SEED"
_session_seed: int | None = None


def seed_all(seed: int = 0) -> None:
    """Seed Python, NumPy and torch so every run of a cell gives the same numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def seed_from_environment() -> int:
    """The course's seed: the environment variable NORMLAB_SEED (an integer >= 0), default 0."""
    raw = os.environ.get(SEED_VARIABLE, "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"环境变量 {SEED_VARIABLE} 应为非负整数（随机种子 seed），实际是 {raw!r}。"
                         f"({SEED_VARIABLE} must be an integer >= 0, got {raw!r}.)")
    return value


def seed(offset: int = 0) -> int:
    """The seed this notebook runs with (set by ``setup()``), plus ``offset`` for a second stream.

    Use it wherever a cell or a function needs a seed, instead of a literal 0, so that
    ``NORMLAB_SEED=3`` re-runs the whole notebook on another seed."""
    return (seed_from_environment() if _session_seed is None else _session_seed) + offset


def setup(seed: int | None = None, quiet: bool = False) -> str | None:
    """What every notebook runs first: fixed seeds and the plot style. Returns the CJK font.

    The seed is ``NORMLAB_SEED`` from the environment (default 0) unless given; one line says
    which seed and how many torch threads this run uses (both can move a trained number)."""
    global _session_seed
    _session_seed = seed_from_environment() if seed is None else int(seed)
    seed_all(_session_seed)
    runcache.track()          # nothing unless the test run set NORMLAB_RUN_CACHE (normlab/runcache.py)
    if not quiet:
        print(f"normlab: 随机种子 seed = {_session_seed}（环境变量 {SEED_VARIABLE}）· "
              f"torch 线程 threads = {torch.get_num_threads()}")
    return use_style()



# --- the environment check (notebook 00) ---------------------------------------------------------

TESTED_PYTHONS = ((3, 11), (3, 12), (3, 13))   # the matrix `python3 run.py test --python 3.N` runs


def torch_build(t=torch) -> str:
    """Which build of torch this is: "CUDA 13.0", "ROCm 6.4", "CPU + MPS" (macOS) or "CPU"."""
    if getattr(t.version, "cuda", None):
        return f"CUDA {t.version.cuda}"
    if getattr(t.version, "hip", None):
        return f"ROCm {t.version.hip}"
    mps = getattr(t.backends, "mps", None)
    if mps is not None and mps.is_built():
        return "CPU + MPS"
    return "CPU"


def usable_gpu(t=torch) -> str | None:
    """The GPU torch can compute on here (its name), or None."""
    if t.cuda.is_available():
        return t.cuda.get_device_name(0)
    mps = getattr(t.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "Apple MPS"
    return None


def nvidia_driver_present() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def pinned_torch() -> str | None:
    """The torch versions normlab's own requirements declare, the range the lessons were tested with
    ("<2.15,>=2.4"; an exact "==2.13.0" once), from the installed package's metadata."""
    from importlib import metadata

    try:
        reqs = metadata.requires("normlab") or []
    except metadata.PackageNotFoundError:
        return None
    for r in reqs:
        req = r.split(";")[0].replace(" ", "")
        if req.lower().startswith("torch") and req[5:6] in ("=", "<", ">", "!", "~"):
            return req[5:]
    return None


def torch_in(version: str, declared: str) -> bool:
    """Whether torch `version` ("2.13.0+cpu") satisfies `declared` ("<2.15,>=2.4", or a bare "2.13.0")."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return Version(version.split("+")[0]) in SpecifierSet(declared if declared[:1] in "=<>!~" else f"=={declared}")


def unexpected(python: tuple[int, int], build: str, gpu: str | None, driver: bool, system: str,
               torch_version: str, pin: str | None) -> list[str]:
    """Warnings for a combination that works but is not what the setup meant to install."""
    out = []
    if tuple(python) not in TESTED_PYTHONS:
        out.append(f"Python {python[0]}.{python[1]} 不在测试过的版本 (3.11–3.13) 里：多半能用，出问题请换 3.11–3.13。")
    if pin and not torch_in(torch_version, pin):
        out.append(f"torch {torch_version} 不在课程测试过的版本 (torch{pin}) 里：数字可能和课本不同。用 python3 run.py course 重装。")
    if build.startswith(("CUDA", "ROCm")) and gpu is None:
        out.append(f"装的是 {build} 版 torch，但没有可用的 GPU：白占了几 GB 磁盘，课程照样能跑。"
                   + ("换成小得多的 CPU 版：删掉 .venv/ 后运行 python3 run.py course --torch cpu。"
                      if system.startswith("linux") else ""))
        if driver:
            out.append("有 NVIDIA 驱动，但 torch 用不了 GPU：驱动可能比 torch 的 CUDA 版本旧（nvidia-smi 可查）。")
    if build == "CPU" and driver and system.startswith("linux"):
        out.append("这台机器有 NVIDIA GPU，装的却是 CPU 版 torch：课程不需要 GPU，只有第 04 课末尾的可选 GPU 小节会跳过；"
                   "想用 GPU：python3 run.py course --torch default。")
    return out


@dataclass
class EnvCheck:
    python: tuple[int, int]
    torch: str
    build: str
    gpu: str | None
    pin: str | None
    warnings: list[str] = field(default_factory=list)

    @property
    def torch_as_pinned(self) -> bool:
        """The installed torch is one normlab declares (tested), whatever its build (+cpu, CUDA, MPS)."""
        return self.pin is None or torch_in(self.torch, self.pin)


def check() -> EnvCheck:
    """Which torch build is installed, whether a GPU is usable, the Python version, and warnings."""
    python = sys.version_info[:2]
    build, gpu, pin = torch_build(), usable_gpu(), pinned_torch()
    warnings = unexpected(python, build, gpu, nvidia_driver_present(), sys.platform, torch.__version__, pin)
    return EnvCheck(python, torch.__version__, build, gpu, pin, warnings)


def report() -> Table:
    """Versions, the torch build, the GPU, the Chinese font and the hardware as a table (notebook 00's
    check cell), with a warning row for each unexpected combination."""
    import ipywidgets
    import matplotlib

    env = check()
    rows = [
        ("Python", platform.python_version()),
        ("torch", env.torch + ("" if env.pin is None else f"（课程测试过 tested torch{env.pin}）")),
        ("torch 版本类型 build", env.build),
        ("可用的 GPU (usable GPU)", env.gpu or "无 (none)：整门课只需 CPU"),
        ("numpy", np.__version__),
        ("matplotlib", matplotlib.__version__),
        ("ipywidgets", ipywidgets.__version__),
        ("中文字体 CJK font", find_cjk_font() or "未找到 (none found)"),
        ("CPU 核数 cores", str(os.cpu_count())),
        ("torch 线程 threads", str(torch.get_num_threads())),
        ("随机种子 seed (NORMLAB_SEED)", str(seed())),
    ]
    rows += [("⚠ 提醒 warning", w) for w in env.warnings] or [("检查结论 verdict", "正常 (as expected)")]
    return Table(rows, ["项目 item", "值 value"], title="NormLab 环境检查 (environment check)")
