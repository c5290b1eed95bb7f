"""Exercises of lesson 01 (residuals).

01.1  ResidualBlock(branch): forward x + branch(x), the branch registered as a submodule
01.2  residual_jacobian(f, v): the block's Jacobian I + J_F at v (checked with autograd)
01.3  residual_forward(branches, x): the 24-block plain stack of section 2, made residual
01.4  ReZero(branch): x + alpha * branch(x), alpha a learnable scalar starting at 0
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.functional import jacobian

from .. import blocks
from .base import SubmissionError, call, close, compare, exercise, fail, ok, step, with_fix

__all__ = ["branches_24"]


def _mlp(width: int, seed: int, act: str = "relu") -> nn.Module:
    with blocks.seeded(seed):
        return blocks.MLP(width, mult=2, act=act)


def _sample(shape: tuple[int, ...], seed: int) -> Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _build(cls: object, branch: nn.Module) -> nn.Module:
    module = call(cls, branch)
    if not callable(module):
        raise SubmissionError(f"{getattr(cls, '__name__', cls)}(branch) 应得到一个可调用的模块，实际是 {type(module).__name__}")
    return module


# ----------------------------------------------------------------------------------------------- 01.1

@exercise("01.1", title="写一个残差块 (residual block)：x + F(x)", target_minutes=5, checks=4)
def check_residual_block(ResidualBlock) -> list:
    out = []
    f = _mlp(8, seed=1)
    block = _build(ResidualBlock, f)
    for name, shape in (("value_2d", (5, 8)), ("value_3d", (2, 3, 8))):
        with step(out, name):
            x = _sample(shape, seed=len(shape))
            x0 = x.clone()
            with torch.no_grad():
                got, want = call(block, x), x0 + f(x0)
            if not torch.equal(x, x0):
                out.append(fail("input_modified", with_fix("输入 x 被原地修改了 (modified in place)：`x += f(x)` 改写了调用者的张量，"
                                                           "也会让 autograd 出错；残差块要返回一个新的张量",
                                                           "`return x + self.branch(x)`"), input=x0))
                continue
            with torch.no_grad():
                mistakes = {"no_identity": (lambda: f(x), "输出是 F(x)：漏了恒等路径 (identity path) + x"),
                            "plus_one": (lambda: f(x) + 1,
                                         with_fix("输出是 F(x) + 1：恒等路径加的是输入 x 本身，不是常数 1。“对 x 求导得 1”"
                                                  "说的是 ∂x/∂x = I（勘误 A1），不是在输出上加 1",
                                                  "`return x + self.branch(x)`")),
                            "no_branch": (x, "输出就是 x：分支 F(x) 没有加上"),
                            "branch_twice": (lambda: x + f(x + f(x)), "分支用了两次：x + F(x + F(x))"),
                            "scaled": (lambda: (x + f(x)) / 2, "输出被除以 2：残差块就是 x + F(x)，不取平均")}
            out.append(compare(name, got, want, mistakes, f"输出 = x + F(x)，形状 {shape}",
                               "输出不等于 x + F(x)", input=x))
    value_ok = all(f.passed for f in out)
    with step(out, "registered"):
        if not isinstance(block, nn.Module):
            out.append(fail("registered", "ResidualBlock 应继承 nn.Module（否则没有 .parameters()，优化器找不到分支的权重）"))
        else:
            mine = {id(p) for p in block.parameters()}
            if all(id(p) in mine for p in f.parameters()):
                out.append(ok("registered", "分支的参数都在 block.parameters() 里（优化器会更新它们）"))
            else:
                out.append(fail("not_registered", with_fix("block.parameters() 里没有分支的权重：分支要登记为块的子模块"
                                                           " (submodule)，放进普通 list/dict 或只在 forward 里引用都不算",
                                                           "在 __init__ 里写 `self.branch = branch`")))
    with step(out, "gradient"):
        # g plays ∂L/∂y: a random upstream gradient, so ∂L/∂x = g + J_Fᵀ g; the identity path passes g back unchanged
        x = _sample((4, 8), seed=7).requires_grad_()
        g = _sample((4, 8), seed=8)
        (call(block, x) * g).sum().backward()
        ref = x.detach().clone().requires_grad_()
        (ref + f(ref)).mul(g).sum().backward()
        upstream = "（检查时用一个随机的上游梯度 (upstream gradient) g = ∂L/∂y；∂L/∂x 应为 g + J_Fᵀ g，恒等路径把 g 原样传回 x）"
        if close(x.grad, ref.grad, 1e-5):
            out.append(ok("gradient", "对 x 的梯度 = g + J_Fᵀ g（g = ∂L/∂y）：恒等路径把上游梯度原样传回"))
        elif x.grad is not None and close(x.grad, ref.grad - g, 1e-5) and value_ok:
            out.append(fail("identity_detached", with_fix("输出的值对，但梯度里少了恒等路径传回的那一份 g" + upstream +
                                                          "：x 在加上去之前被 `.detach()` 或 `.data` 切断了",
                                                          "`return x + self.branch(x)`（x 本身，不 detach）"),
                            input=x.detach(), expected=ref.grad, got=x.grad))
        elif x.grad is not None and close(x.grad, ref.grad - g, 1e-5):
            out.append(fail("no_identity_gradient", "梯度里也少了恒等路径传回的那一份 g" + upstream +
                            "：输出里没有 x 本身（见上面输出的结论），这一份梯度也就没有了",
                            input=x.detach(), expected=ref.grad, got=x.grad))
        else:
            out.append(fail("gradient", "对 x 的梯度与 autograd 的参考不一致" + upstream,
                            input=x.detach(), expected=ref.grad, got=x.grad))
    return out


# ----------------------------------------------------------------------------------------------- 01.2

@exercise("01.2", title="残差块的雅可比矩阵 (Jacobian) 是 I + J_F", target_minutes=10, checks=2)
def check_residual_jacobian(residual_jacobian) -> list:
    out = []
    d = 6
    with blocks.seeded(3):
        linear = nn.Linear(d, d)
    cases = (("linear", linear, "F 是一个 Linear 层：J_F = W"),
             ("tanh_mlp", _mlp(d, seed=4, act="tanh"), "F 是一个 tanh MLP：J_F 依赖于点 v"))
    for name, f, what in cases:
        with step(out, name):
            v = _sample((d,), seed=5) * 2
            got = call(residual_jacobian, f, v.clone())
            j_f = jacobian(f, v)
            want = jacobian(lambda t: t + f(t), v)
            eye = torch.eye(d)
            mistakes = {"missing_identity": (j_f, "结果是 J_F：漏了恒等路径的 I（残差块的雅可比矩阵是 I + J_F）"),
                        "scalar_one": (j_f + 1, "每个元素都加了 1：[A] 说的“导数为 1”其实是单位矩阵 I，不是把 1 加到每个偏导上"
                                                "（勘误 A1）"),
                        "transposed": (want.T, "转置了：J[i, j] 应为 ∂y_i/∂x_j（行是输出，列是输入），你的是 ∂y_j/∂x_i"),
                        "identity_only": (eye, "结果只有 I：分支 F 的雅可比矩阵 J_F 没有算进去"),
                        "wrong_point": (lambda: eye + jacobian(f, torch.zeros(d)),
                                        "在 v = 0 处求的导：雅可比矩阵要在给定的点 v 上求")}
            out.append(compare(name, got, want, mistakes, f"{what}；结果 = I + J_F(v)",
                               f"{what}；结果不等于 autograd 求出的 ∂(v + F(v))/∂v", tol=1e-5, input=v))
    return out


# ----------------------------------------------------------------------------------------------- 01.3

def branches_24(seed: int = 0, width: int = 32) -> list[nn.Module]:
    """The 24 branches F_l of section 2's plain stack (``build_stack(24, 32, "plain", "none")``)."""
    stack = blocks.build_stack(24, width, "plain", "none", seed=seed)
    return [b.mlp.sublayer for b in stack.blocks]


def _plain(branches, x):
    for f in branches:
        x = f(x)
    return x


def _grad_norms(branches, fn, x, r) -> list[float]:
    for f in branches:
        f.zero_grad(set_to_none=True)
    (call(fn, branches, x) * r).sum().backward()
    norms = []
    for f in branches:
        grads = [p.grad.flatten() for p in f.parameters() if p.grad is not None]
        norms.append(torch.cat(grads).norm().item() if grads else 0.0)
    return norms


@exercise("01.3", title="让 24 块的普通堆叠能训练：加上残差 (residual)", target_minutes=10, checks=2)
def check_residual_forward(residual_forward) -> list:
    out = []
    branches = branches_24(seed=11)
    x, r = _sample((16, 32), seed=12), _sample((16, 32), seed=13)
    with step(out, "output"):
        x0 = x.clone()
        with torch.no_grad():
            got = call(residual_forward, branches, x)
            want = x0
            for f in branches:
                want = want + f(want)
        if not torch.equal(x, x0):
            out.append(fail("input_modified", with_fix("输入 x 被原地修改了：`x += f(x)` 改写了调用者的张量；"
                                                       "每一块要得到一个新的 h", "`x = x + f(x)`")))
            return out
        with torch.no_grad():
            mistakes = {"still_plain": (lambda: _plain(branches, x), "输出和普通堆叠一样：每块还是 h = F(h)，没有加恒等路径"),
                        "one_skip": (lambda: x + _plain(branches, x),
                                     "只在整个堆叠外面加了一次残差 x + F₂₄(…F₁(x))：每一块都要有自己的 h = h + F(h)"),
                        "skip_from_input": (lambda: _from_input(branches, x),
                                            "每块加回的是最初的输入 x，而不是上一块的输出 h：应为 h = h + F(h)")}
        out.append(compare("output", got, want, mistakes, "输出 = 24 次 h ← h + F_l(h)", "输出与 24 次 h ← h + F_l(h) 不一致",
                           tol=1e-4, input=x))
    with step(out, "gradient_ratio"):
        g = _grad_norms(branches, residual_forward, x, r)
        ratio = g[0] / g[-1] if g[-1] > 0 else float("nan")
        if 0.1 < ratio < 10:
            out.append(ok("gradient_ratio", f"第 1 块与第 24 块参数的梯度范数之比 {ratio:.3g}（在 0.1–10 之内）：梯度到得了第 1 块"))
        else:
            plain = _grad_norms(branches, lambda b, t: _plain(b, t), x, r)
            out.append(fail("vanishing_gradient" if ratio < 0.1 else "gradient_ratio",
                            f"第 1 块与第 24 块参数的梯度范数之比是 {ratio:.3g}（普通堆叠是 {plain[0] / plain[-1]:.3g}）："
                            "应在 0.1–10 之内", first=f"{g[0]:.3g}", last=f"{g[-1]:.3g}"))
    return out


def _from_input(branches, x):
    h = x
    for f in branches:
        h = x + f(h)
    return h


# ----------------------------------------------------------------------------------------------- 01.4

@exercise("01.4", title="写 ReZero 块：x + α·F(x)，α 初值 0 (residual scaling)", target_minutes=10, checks=4)
def check_rezero(ReZero) -> list:
    out = []
    f = _mlp(8, seed=21)
    block = _build(ReZero, f)
    x = _sample((5, 8), seed=22)
    with step(out, "identity_at_init"):
        with torch.no_grad():
            got = call(block, x)
            mistakes = {"alpha_on_identity": (lambda: f(x), "初始化时输出是 F(x)：α 乘在了恒等路径上；ReZero 是 x + α·F(x)"),
                        "kept_layernorm": (lambda: nn.functional.layer_norm(x, (8,)),
                                           "初始化时输出是 LN(x)：ReZero 不用 LayerNorm（勘误 C2；LayerNorm 见第 03 课）"),
                        "alpha_init_one": (lambda: x + f(x), "初始化时输出是 x + F(x)：α 的初值应为 0，块一开始是恒等映射")}
        out.append(compare("identity_at_init", got, x, mistakes, "初始化时输出恰好是 x（恒等映射）",
                           "初始化时输出应恰好是 x（α = 0）", tol=1e-6, input=x))
    alpha = None
    with step(out, "alpha_parameter"):
        branch_ids = {id(p) for p in f.parameters()}
        own = [p for p in block.parameters() if id(p) not in branch_ids] if isinstance(block, nn.Module) else []
        scalars = [p for p in own if p.numel() == 1]
        if scalars:
            alpha = scalars[0]
            out.append(ok("alpha_parameter", "α 是一个可学习的标量 nn.Parameter"))
        elif any(p.numel() == 8 for p in own):
            out.append(fail("per_channel", "α 是每个通道一个的向量：那是 LayerScale 的 diag(λ)；ReZero 的 α 是一个标量"))
        elif not isinstance(block, nn.Module) or not any(id(p) in {id(q) for q in block.parameters()} for p in f.parameters()):
            out.append(fail("not_registered", with_fix("应继承 nn.Module，并把分支登记为子模块 (submodule)："
                                                       "否则 .parameters() 里没有它的权重", "`self.branch = branch`")))
        else:
            out.append(fail("not_parameter", with_fix("找不到可学习的 α：普通的 float 或张量不在 .parameters() 里，"
                                                      "优化器不会更新它，块就永远是恒等映射；α 要是一个标量 nn.Parameter",
                                                      "`self.alpha = nn.Parameter(torch.zeros(()))`")))
    if alpha is None:
        return out
    with step(out, "alpha_gradient"):
        block.zero_grad(set_to_none=True)
        r = _sample((5, 8), seed=23)
        (call(block, x) * r).sum().backward()
        want = (f(x) * r).sum().item()
        got = None if alpha.grad is None else alpha.grad.item()
        if got is not None and abs(got - want) <= 1e-4 * max(1.0, abs(want)):
            out.append(ok("alpha_gradient", "初始化时 α 收到梯度 ∂L/∂α = Σ F(x)·∂L/∂y ≠ 0：α 会离开 0，块开始学习"))
        else:
            out.append(fail("alpha_gradient", "初始化时 α 的梯度应为 Σ F(x)·∂L/∂y", expected=f"{want:.4g}", got=got))
    with step(out, "scaled_branch"):
        with torch.no_grad():
            alpha.fill_(0.5)
            got = call(block, x)
            mistakes = {"kept_layernorm": (lambda: x + 0.5 * f(nn.functional.layer_norm(x, (8,))),
                                           "α = 0.5 时输出是 x + α·F(LN(x))：ReZero 去掉了 LayerNorm（勘误 C2）"),
                        "alpha_squared": (lambda: x + 0.25 * f(x), "α 被用了两次（α²）：应为 x + α·F(x)")}
            out.append(compare("scaled_branch", got, x + 0.5 * f(x), mistakes, "α = 0.5 时输出 = x + 0.5·F(x)",
                               "α = 0.5 时输出应为 x + 0.5·F(x)", input=x))
    return out
