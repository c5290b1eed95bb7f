"""A broadcast error, said only as far as it is verified (issue 37): "keepdim=True is missing" is said when the
submission's own source has a mean/var/std over a dimension without keepdim (the call is quoted); otherwise
the report gives what was measured — the error, the shapes of the input and of the parameters — and names no
cause. The advice is the card's: LayerNorm subtracts a mean over the last dimension, RMSNorm has no mean,
BatchNorm's statistics and parameters are per channel, GroupNorm's per group."""

from __future__ import annotations

import ast
import inspect
import textwrap

from ..report import Finding

STATS = ("mean", "var", "std", "nanmean", "amax", "amin")
# the submission being checked and its kind (set by drills.check; read where a broadcast error is reported)
CURRENT: dict[str, object] = {"kind": None, "impl": None}

ADVICE = {
    "layernorm": "x.mean(-1, keepdim=True)、x.var(-1, unbiased=False, keepdim=True)：形状 (B, T, 1)，才能和 (B, T, D) 的 x 对齐",
    "rmsnorm": "x.pow(2).mean(-1, keepdim=True)（RMSNorm 不减均值，只有这一个统计量）：形状 (B, T, 1)，才能和 (B, T, D) 的 x 对齐",
    "batchnorm": "BatchNorm 的统计量是每通道的：(N, C, H, W) 上用 x.mean((0, 2, 3), keepdim=True)（形状 (1, C, 1, 1)），"
                 "(C,) 的 γ/β 和 running_mean/running_var 也要 reshape 成 (1, C, 1, 1)",
    "groupnorm": "GroupNorm 的统计量是每个样本每组一个：x.reshape(N, G, -1).mean(-1, keepdim=True)（形状 (N, G, 1)），"
                 "算完再 reshape 回 (N, C, H, W)；γ/β reshape 成 (1, C, 1, 1)",
}

WANT = {"layernorm": "LayerNorm 的统计量在最后一维 (dim=-1) 上求，γ/β 的形状是 (D,)，按最后一维广播",
        "rmsnorm": "RMSNorm 的统计量是最后一维上的 mean(x²)，γ 的形状是 (D,)，按最后一维广播",
        "batchnorm": "BatchNorm 的统计量每通道一个（在 dim=1 以外的所有维上求），γ/β reshape 成 (1, C, 1, 1)",
        "groupnorm": "GroupNorm 每个样本每组一个统计量，γ/β 每通道一个，reshape 成 (1, C, 1, 1)"}


def _norm(kind: str | None) -> str:
    kind = (kind or "layernorm").replace("_backward", "")
    return kind if kind in ADVICE else "layernorm"


def _source_tree(obj) -> ast.Module | None:
    """The parsed source of ``obj``; a class loaded from a file outside sys.modules (the command line's
    import) is read method by method."""
    parts = [obj] if not inspect.isclass(obj) else [obj] + [v for v in vars(obj).values() if inspect.isfunction(v)]
    for part in parts:
        try:
            src = textwrap.dedent(inspect.getsource(part))
        except (OSError, TypeError):
            continue
        if part is obj:
            try:
                return ast.parse(src)
            except SyntaxError:
                return None
        break
    else:
        return None
    body = []
    for part in parts[1:]:
        try:
            body += ast.parse(textwrap.dedent(inspect.getsource(part))).body
        except (OSError, TypeError, SyntaxError):
            return None
    return ast.Module(body=body, type_ignores=[])


def calls_without_keepdim(obj) -> list[str] | None:
    """The source text of each mean/var/std over a dimension without keepdim in ``obj`` (a class or a function);
    None when there is no source to read."""
    tree = _source_tree(obj)
    if tree is None:
        return None
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STATS):
            continue
        owner = node.func.value
        module_call = isinstance(owner, ast.Name) and owner.id in ("torch", "np", "numpy")
        kws = {k.arg: k.value for k in node.keywords}
        has_dim = len(node.args) >= (2 if module_call else 1) or "dim" in kws or "axis" in kws
        keep = kws.get("keepdim", kws.get("keepdims"))
        kept = keep is not None and not (isinstance(keep, ast.Constant) and keep.value is False)
        if has_dim and not kept:
            found.append(ast.unparse(node))
    return list(dict.fromkeys(found))


def shapes_text(m, shape) -> str:
    """"输入 (2, 5, 8)；self.weight (1, 8, 1) ..." : what broadcast against what."""
    tensors = {n: tuple(t.shape) for n, t in getattr(m, "__dict__", {}).items() if hasattr(t, "shape")}
    if hasattr(m, "named_parameters"):
        tensors.update({n: tuple(t.shape) for n, t in m.named_parameters()})
    return "；".join([f"输入 {tuple(shape)}"] + [f"self.{n} {s}" for n, s in tensors.items()][:4])


def broadcast_finding(error: str, level: str = "interview", shapes: str = "", kind: str | None = None,
                      impl=None) -> Finding:
    """``keepdim_missing`` when the source shows a reduction without keepdim; else ``broadcast`` with the
    measurement only."""
    kind = kind or CURRENT["kind"]
    impl = impl if impl is not None else CURRENT["impl"]
    calls = calls_without_keepdim(impl) if impl is not None else None
    norm = _norm(kind)
    if calls:
        return Finding("keepdim_missing", False,
                       f"形状对不上 (broadcast error)：你的代码里 {'、'.join(f'`{c}`' for c in calls[:3])} 没有 keepdim=True，"
                       "求完统计量那一维就没了，再和 x 相减/相除时按最后一维对齐去广播，报错；输入恰好是方阵时不报错，"
                       f"却悄悄算错。修正：{ADVICE[norm]} (missing keepdim=True)", {}, level)
    said = ("你的代码里的均值/方差都带着 keepdim=True（或没有按维求），问题不在 keepdim" if calls == [] else
            "读不到源代码，无法确定原因")
    return Finding("broadcast", False,
                   f"形状对不上 (broadcast error)：{error[:160]}。{said}：检查统计量在哪一维上求、参数被 reshape 成了什么形状"
                   f"{('（' + shapes + '）') if shapes else ''}；{WANT[norm]}", {}, level)
