"""Which re-scalings and re-centerings leave a normalised layer's output unchanged?

The layer is y = Norm(W x) for a batch x (N, d_in), W (d_out, d_in), no bias, eps = 0 in
float64 so that nothing but the algebra decides. Six transformations (Zhang & Sennrich 2019,
Table 1; Ba et al. 2016, §5.1):

    weight matrix re-scaling   W -> 3 W
    weight matrix re-centering W -> W + 1 v^T        (the same vector added to every row)
    weight vector re-scaling   W_0 -> 3 W_0          (one row only)
    dataset re-scaling         x -> 3 x              (every sample)
    dataset re-centering       x -> x + c            (every sample)
    single case re-scaling     x_0 -> 3 x_0          (one sample)

"Invariant" means the outputs of all samples are unchanged. Ba et al. 2016's Table 1 has the rows
BatchNorm, WeightNorm and LayerNorm; Zhang & Sennrich 2019's Table 1 adds RMSNorm. Lessons 03 and 04
show the same measured table (``table``) with the same names (``LABELS``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..viz import Table

NORMS = ("batchnorm", "layernorm", "rmsnorm")
TRANSFORMS = ("w_rescale", "w_recenter", "w_vector_rescale", "dataset_rescale", "dataset_recenter",
              "single_case_rescale")
# The column names of Ba et al. 2016 Table 1, for display.
PAPER_COLUMNS = dict(zip(TRANSFORMS, ("W rescale", "W recenter", "W-vector rescale", "dataset rescale",
                                      "dataset recenter", "single-case rescale")))
# One vocabulary for lessons 03 and 04: the papers' name, in Chinese, and what it does.
LABELS = {
    "w_rescale": "权重矩阵缩放 W → 3W",
    "w_recenter": "权重矩阵平移 W → W + 1vᵀ（每个样本的 h 各加一个常数）",
    "w_vector_rescale": "权重向量缩放 W₀ → 3W₀（所有样本的特征 h₀ 乘 3）",
    "dataset_rescale": "数据集缩放 x → 3x（所有样本乘同一个标量）",
    "dataset_recenter": "数据集平移 x → x + c（所有样本加同一个向量）",
    "single_case_rescale": "单个样本缩放 x₀ → 3x₀",
}
NAMES = {"batchnorm": "BatchNorm", "layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}
# The papers' Table 1 (1 = invariant), columns in TRANSFORMS order: BatchNorm and LayerNorm from
# Ba et al. 2016 §5.1, RMSNorm from Zhang & Sennrich 2019 (also the bzhangGo/rmsnorm README).
TABLE1 = {"batchnorm": (1, 0, 1, 1, 1, 0), "layernorm": (1, 1, 0, 1, 0, 1), "rmsnorm": (1, 0, 0, 1, 0, 1)}
TOLERANCE = 1e-9           # float64 and eps = 0: an invariant output changes by ~1e-15


def normalise(h: Tensor, norm: str) -> Tensor:
    """BN over the batch (dim 0), LN / RMSNorm over the features (dim -1); eps = 0."""
    if norm == "batchnorm":
        return (h - h.mean(0)) / h.var(0, unbiased=False).sqrt()
    if norm == "layernorm":
        return (h - h.mean(-1, keepdim=True)) / h.var(-1, unbiased=False, keepdim=True).sqrt()
    if norm == "rmsnorm":
        return h / h.pow(2).mean(-1, keepdim=True).sqrt()
    raise ValueError(f"norm 应为 {NORMS} 之一，实际 {norm!r}")


def transformed(W: Tensor, x: Tensor, name: str, g: torch.Generator) -> tuple[Tensor, Tensor]:
    W, x = W.clone(), x.clone()
    if name == "w_rescale":
        W = 3 * W
    elif name == "w_recenter":
        W = W + torch.randn(1, W.shape[1], generator=g, dtype=W.dtype)
    elif name == "w_vector_rescale":
        W[0] *= 3
    elif name == "dataset_rescale":
        x = 3 * x
    elif name == "dataset_recenter":
        x = x + torch.randn(1, x.shape[1], generator=g, dtype=x.dtype)
    elif name == "single_case_rescale":
        x[0] *= 3
    else:
        raise ValueError(f"未知的变换 (unknown transformation) {name!r}：可选 {TRANSFORMS}")
    return W, x


def measure(seed: int = 0, n: int = 32, d_in: int = 16, d_out: int = 12) -> dict[tuple[str, str], float]:
    """Max |output change| for every (norm, transformation); ~1e-15 means invariant."""
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(d_out, d_in, generator=g, dtype=torch.float64)
    x = torch.randn(n, d_in, generator=g, dtype=torch.float64)
    out = {}
    for norm in NORMS:
        base = normalise(x @ W.T, norm)
        for name in TRANSFORMS:
            W2, x2 = transformed(W, x, name, torch.Generator().manual_seed(seed + 1))
            out[(norm, name)] = (normalise(x2 @ W2.T, norm) - base).abs().max().item()
    return out


def pattern(measured: dict[tuple[str, str], float], tol: float = TOLERANCE) -> dict[str, tuple[int, ...]]:
    """Per norm, 1 where the measured change is below ``tol`` (invariant), in TRANSFORMS order."""
    return {n: tuple(int(measured[(n, t)] < tol) for t in TRANSFORMS) for n in NORMS}


def table(measured: dict[tuple[str, str], float], tol: float = TOLERANCE):
    """The measured table, one row per transformation: ✓ invariant / ✗ not, with max |change|."""
    mark = lambda d: f"✓ ({d:.0e})" if d < tol else f"✗ ({d:.2f})"
    rows = [[LABELS[t], PAPER_COLUMNS[t]] + [mark(measured[(n, t)]) for n in NORMS] for t in TRANSFORMS]
    return Table(rows, ["变换 transformation", "论文表 1 的列", *(NAMES[n] for n in NORMS)],
                 title=f"y = Norm(Wx)，float64，ε = 0：✓ = 所有输出不变（max |Δy| < {tol:.0e}），括号里是 max |Δy|")
