"""Course setup (seeds, plot style) and the environment check of notebook 00."""

from __future__ import annotations

import os
import platform
import random

import numpy as np
import torch

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
    if not quiet:
        print(f"normlab: 随机种子 seed = {_session_seed}（环境变量 {SEED_VARIABLE}）· "
              f"torch 线程 threads = {torch.get_num_threads()}")
    return use_style()


def report() -> Table:
    """Versions, the Chinese font and the hardware, as a table (notebook 00's check cell)."""
    import ipywidgets
    import matplotlib

    rows = [
        ("Python", platform.python_version()),
        ("torch", torch.__version__),
        ("numpy", np.__version__),
        ("matplotlib", matplotlib.__version__),
        ("ipywidgets", ipywidgets.__version__),
        ("中文字体 CJK font", find_cjk_font() or "未找到 (none found)"),
        ("CPU 核数 cores", str(os.cpu_count())),
        ("torch 线程 threads", str(torch.get_num_threads())),
        ("随机种子 seed (NORMLAB_SEED)", str(seed())),
        ("GPU (CUDA)", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "无 (none): 全部课程只需 CPU"),
    ]
    return Table(rows, ["项目 item", "值 value"], title="NormLab 环境检查 (environment check)")
