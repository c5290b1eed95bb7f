"""Course setup (seeds, plot style) and the environment check of notebook 00."""

from __future__ import annotations

import os
import platform
import random

import numpy as np
import torch

from .viz import Table, find_cjk_font, use_style


def seed_all(seed: int = 0) -> None:
    """Seed Python, NumPy and torch so every run of a cell gives the same numbers."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def setup(seed: int = 0) -> str | None:
    """What every notebook runs first: fixed seeds and the plot style. Returns the CJK font."""
    seed_all(seed)
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
        ("GPU (CUDA)", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "无 (none): 全部课程只需 CPU"),
    ]
    return Table(rows, ["项目 item", "值 value"], title="NormLab 环境检查 (environment check)")
