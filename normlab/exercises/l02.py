"""Exercises of lesson 02 (BatchNorm).

02.1  bn_eval(x, running_mean, running_var, weight, bias, eps): the eval-mode forward
02.2  update_running(running_mean, running_var, x, momentum): one training step's running statistics
02.3  from_keras(num_features, momentum=0.99, epsilon=1e-3): Keras's running-mean update and epsilon in PyTorch
02.4  eval_accuracy(norm, batch, steps, seed): section 4.2's experiment, for the BN / GN crossover
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data import digits
from ..lessons import batchnorm as bn_lab
from ..train import accuracy, train
from .base import SubmissionError, call, close, compare, exercise, fail, ok, step

__all__ = ["reference_eval_accuracy"]


def _rand(shape: tuple[int, ...], seed: int) -> Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _channel(t: Tensor, x: Tensor) -> Tensor:
    """A per-channel vector (C,) shaped to broadcast along dim 1 of x."""
    return t.view(1, -1, *([1] * (x.dim() - 2)))


# ----------------------------------------------------------------------------------------------- 02.1

@exercise("02.1", title="从滑动统计量写推理模式 (eval mode) 的 BN", target_minutes=8, checks=5)
def check_bn_eval(bn_eval) -> list:
    out = []
    probes = (("eval_2d", (6, 4), 1e-5), ("eval_3d", (3, 4, 5), 1e-5), ("eval_4d", (2, 4, 3, 3), 1e-5),
              ("eps_argument", (6, 4), 1e-1), ("channels_like_last_dim", (3, 4, 4), 1e-5))
    for name, shape, eps in probes:
        with step(out, name):
            x = _rand(shape, seed=len(shape) + int(eps * 1000)) * 3 + 2
            rm = torch.tensor([5.0, -1.0, 0.5, 2.0])          # far from this batch's statistics
            rv = torch.tensor([4.0, 0.25, 1e-2, 9.0])
            w, b = torch.tensor([1.5, 0.5, 2.0, -1.0]), torch.tensor([0.1, -0.2, 0.3, 1.0])
            try:
                got = call(bn_eval, x.clone(), rm.clone(), rv.clone(), w.clone(), b.clone(), eps)
            except SubmissionError as err:
                if "size of tensor" not in str(err):
                    raise
                raise SubmissionError(f"{err}；形状 {shape}：通道是第 1 维，(C,) 的统计量要 reshape 成 (1, C, 1, …) "
                                      "才能沿通道广播 (broadcast)") from None
            want = F.batch_norm(x, rm, rv, w, b, training=False, eps=eps)
            dims = [d for d in range(x.dim()) if d != 1]
            m_, v_, w_, b_ = (_channel(t, x) for t in (rm, rv, w, b))
            mistakes = {
                "batch_stats": (lambda: F.batch_norm(x, None, None, w, b, training=True, eps=eps),
                                "用了这个 batch 的统计量：推理模式要用滑动统计量 running_mean / running_var"
                                "（否则输出依赖 batch 里的其他样本，单个样本时方差为 0，勘误 A2）"),
                "batch_stats_unbiased": (lambda: w_ * (x - x.mean(dims, keepdim=True)) / torch.sqrt(x.var(dims, keepdim=True) + eps) + b_,
                                         "用了这个 batch 的（无偏）统计量：推理模式要用滑动统计量"),
                "eps_outside_root": (lambda: w_ * (x - m_) / (v_.sqrt() + eps) + b_,
                                     "ε 在根号外 (x − μ)/(√σ² + ε)：应为 (x − μ)/√(σ² + ε)"),
                "no_sqrt": (lambda: w_ * (x - m_) / (v_ + eps) + b_, "分母没有开根号 (x − μ)/(σ² + ε)（勘误 E3）：应为 √(σ² + ε)"),
                "eps_ignored": (lambda: w_ * (x - m_) / torch.sqrt(v_ + 1e-5) + b_,
                                "传入的 eps 没有用上（用的是 1e-5）：用参数 eps"),
                "eps_missing": (lambda: w_ * (x - m_) / v_.sqrt() + b_, "公式里没有 ε：σ² 很小时分母接近 0"),
                "no_affine": (lambda: (x - m_) / torch.sqrt(v_ + eps), "没有乘 γ (weight)、加 β (bias)"),
                "affine_swapped": (lambda: b_ * (x - m_) / torch.sqrt(v_ + eps) + w_, "γ 和 β 用反了：y = γ·x̂ + β"),
                "wrong_axis": (lambda: (w * (x - rm) / torch.sqrt(rv + eps) + b),
                               "统计量沿最后一维广播了：通道是第 1 维 (channel axis is dim 1)，"
                               "要 reshape 成 (1, C, 1, …)"),
            }
            out.append(compare(name, got, want, mistakes, f"形状 {shape}、eps={eps:g}：与 F.batch_norm(training=False) 一致",
                               f"形状 {shape}、eps={eps:g}：与 F.batch_norm(training=False) 不一致", input=x))
    return out


# ----------------------------------------------------------------------------------------------- 02.2

def _pair(result) -> tuple[Tensor, Tensor]:
    if not (isinstance(result, tuple | list) and len(result) == 2 and all(isinstance(t, Tensor) for t in result)):
        raise SubmissionError(f"应返回 (new_mean, new_var) 两个张量，实际返回 {type(result).__name__}")
    return result[0], result[1]


@exercise("02.2", title="一步训练后的滑动统计量 (running statistics)：momentum 与无偏方差", target_minutes=8, checks=5)
def check_update_running(update_running) -> list:
    out = []
    C = 3
    for name, n, m in (("momentum_0.1", 4, 0.1), ("momentum_0.3", 8, 0.3)):
        with step(out, name):
            x = _rand((n, C), seed=n) * 2 + 3
            rm0, rv0 = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([1.0, 0.5, 3.0])
            ref = nn.BatchNorm1d(C, momentum=m)
            ref.running_mean.copy_(rm0)
            ref.running_var.copy_(rv0)
            ref(x)                                       # one training-mode step
            got_m, got_v = _pair(call(update_running, rm0.clone(), rv0.clone(), x.clone(), m))
            bm, bv, bvb = x.mean(0), x.var(0, unbiased=True), x.var(0, unbiased=False)
            mean_mistakes = {"old_weight_convention": (m * rm0 + (1 - m) * bm,
                                                       f"用了“旧值权重”写法 m·running + (1 − m)·batch：PyTorch 的 momentum 是"
                                                       f"新值的权重，running ← (1 − m)·running + m·batch（m = {m}）"),
                             "wrong_axis": (lambda: (1 - m) * rm0 + m * x.mean(1), "均值沿错了维：每个特征在 batch 维 (dim 0) 上求")}
            out.append(compare(f"{name}.mean", got_m, ref.running_mean, mean_mistakes,
                               f"m = {m}：running_mean 与 nn.BatchNorm1d 一致", f"m = {m}：running_mean 与 nn.BatchNorm1d 不一致",
                               input=x))
            var_mistakes = {"biased_running_var": ((1 - m) * rv0 + m * bvb,
                                                   f"滑动方差用了有偏方差（÷N）：running_var 存无偏估计（÷(N − 1)，N = {n}），"
                                                   "因为一个 batch 的有偏方差平均会低估总体方差"),
                            "old_weight_convention": (m * rv0 + (1 - m) * bv, "滑动方差用了“旧值权重”写法：应为 (1 − m)·running + m·batch"),
                            "old_weight_and_biased": (m * rv0 + (1 - m) * bvb, "滑动方差既用了“旧值权重”写法，又用了有偏方差")}
            out.append(compare(f"{name}.var", got_v, ref.running_var, var_mistakes,
                               f"m = {m}：running_var 与 nn.BatchNorm1d 一致（无偏）",
                               f"m = {m}：running_var 与 nn.BatchNorm1d 不一致", input=x))
    with step(out, "no_graph"):
        x = (_rand((4, C), seed=9) * 2).requires_grad_()
        got_m, got_v = _pair(call(update_running, torch.zeros(C), torch.ones(C), x, 0.1))
        if got_m.requires_grad or got_v.requires_grad:
            out.append(fail("graph_attached", "返回的滑动统计量带着计算图 (requires_grad=True)：用 torch.no_grad() 或 .detach()；"
                                              "否则每一步都连到上一步的图上（勘误 D2）"))
        else:
            out.append(ok("no_graph", "输入需要梯度时，滑动统计量不带计算图"))
    return out


# ----------------------------------------------------------------------------------------------- 02.3

def _keras_trace(m: float, batches: list[Tensor]) -> Tensor:
    r, out = torch.zeros(()), []
    for b in batches:
        r = bn_lab.running_update(r, b.mean(), m, "old_weight")
        out.append(r)
    return torch.stack(out)


@exercise("02.3", title="把 Keras 的 BatchNormalization 换成 PyTorch：momentum 与 epsilon", target_minutes=6, checks=4)
def check_from_keras(from_keras) -> list:
    out = []
    layer = call(from_keras, 1, momentum=0.99, epsilon=1e-3)
    if not isinstance(layer, nn.modules.batchnorm._BatchNorm):
        return [fail("not_batchnorm", f"应返回一个 nn.BatchNorm1d，实际是 {type(layer).__name__}")]
    batches = [_rand((16,), seed=100 + i) + 5 for i in range(30)]
    for keras_m in (0.99, 0.9):
        name = f"momentum_{keras_m}"
        with step(out, name):
            bn = call(from_keras, 1, momentum=keras_m, epsilon=1e-3)
            trace = []
            bn.train()
            for b in batches:
                with torch.no_grad():
                    bn(b[:, None])
                trace.append(bn.running_mean[0].clone())
            got, want = torch.stack(trace), _keras_trace(keras_m, batches)
            if close(got, want, 1e-4):
                out.append(ok(name, f"Keras momentum={keras_m}：30 步的滑动均值与 Keras 的更新一致（PyTorch momentum = {bn.momentum:g}）"))
            elif bn.momentum == keras_m:
                out.append(fail("same_number", f"把 Keras 的 {keras_m} 原样填进了 PyTorch 的 momentum：两种写法的参数含义相反，"
                                               f"Keras 的 m 是旧值的权重，PyTorch 的是新值的权重（勘误 D2）",
                                expected=f"momentum={1 - keras_m:g}", got=f"momentum={bn.momentum}"))
            elif bn.momentum is None:
                out.append(fail("cumulative", "momentum=None 在 PyTorch 里是所有 batch 的简单平均，不是滑动平均"))
            else:
                out.append(fail(name, f"Keras momentum={keras_m}：30 步的滑动均值与 Keras 的更新不一致", expected=want, got=got))
    with step(out, "epsilon"):
        if abs(layer.eps - 1e-3) <= 1e-12:
            out.append(ok("epsilon", "eps = Keras 的 epsilon（Keras 默认 1e-3，PyTorch 默认 1e-5）"))
        elif abs(layer.eps - 1e-5) <= 1e-12:
            out.append(fail("eps_default", "eps 还是 PyTorch 的默认 1e-5：Keras 的默认 epsilon 是 1e-3，"
                                           "方差小的通道上推理输出会不一样", expected=1e-3, got=layer.eps))
        else:
            out.append(fail("epsilon", "eps 应等于传入的 epsilon", expected=1e-3, got=layer.eps))
    with step(out, "eval_output"):
        bn = call(from_keras, 2, momentum=0.99, epsilon=1e-3)
        with torch.no_grad():
            bn.running_mean.copy_(torch.tensor([1.0, -2.0]))
            bn.running_var.copy_(torch.tensor([1e-3, 4.0]))
        bn.eval()
        x = _rand((5, 2), seed=7)
        with torch.no_grad():
            got = bn(x)
        keras = (x - bn.running_mean) / torch.sqrt(bn.running_var + 1e-3)     # gamma = 1, beta = 0 at init
        if close(got, keras, 1e-4):
            out.append(ok("eval_output", "推理输出与 Keras 的公式 (x − moving_mean)/√(moving_var + epsilon) 一致"))
        else:
            out.append(fail("eval_output", "推理输出与 Keras 的公式不一致（方差 1e-3 的通道上 ε 很重要）", expected=keras, got=got))
    return out


# ----------------------------------------------------------------------------------------------- 02.4

_DATA: dict = {}


def _digits():
    if not _DATA:
        _DATA["d"] = digits()
    return _DATA["d"]


def reference_eval_accuracy(norm: str, batch: int, steps: int = 400, seed: int = 0, mode: str = "eval",
                            test: bool = True, lr: float = 2e-3, depth: int = 3, act: str = "relu") -> float:
    """Section 4.2's experiment: bn_lab.mlp(norm, depth=3, act="relu", seed), Adam lr 2e-3 for
    ``steps`` steps at ``batch``, test accuracy in ``mode``. The other arguments make the mistakes."""
    x_tr, y_tr, x_te, y_te = _digits()
    model = bn_lab.mlp(norm, depth=depth, act=act, seed=seed)
    train(model, (x_tr, y_tr), steps=steps, batch=batch, opt="adam", lr=lr, seed=seed, progress=False)
    return accuracy(model, *((x_te, y_te) if test else (x_tr, y_tr)), mode=mode)


@exercise("02.4", title="小 batch：BN 与 GroupNorm 的推理准确率 (eval accuracy)", target_minutes=12, checks=2)
def check_eval_accuracy(eval_accuracy) -> list:
    out = []
    steps, seed = 25, 1
    for norm, batch in (("bn", 2), ("gn", 4)):
        name = f"{norm}_batch{batch}"
        with step(out, name):
            want = reference_eval_accuracy(norm, batch, steps, seed)   # first: imports torch.optim outside the time limit
            got = call(eval_accuracy, norm, batch, steps=steps, seed=seed, seconds=10.0)
            if not isinstance(got, int | float) and not (isinstance(got, Tensor) and got.numel() == 1):
                raise SubmissionError(f"应返回一个数（准确率），实际返回 {type(got).__name__}")
            got = float(got)
            if abs(got - want) < 1e-9:
                out.append(ok(name, f"{norm}, batch {batch}, {steps} 步：推理模式的测试准确率 {want:.3f} 与参考一致"))
                continue
            mistakes = {"train_mode": (dict(mode="train"), "这是训练模式 (train mode) 下、用测试集自己的 batch 统计量算的准确率："
                                                           "要先 model.eval()（normlab.train.accuracy 默认就是 eval）"),
                        "train_set": (dict(test=False), "这是训练集上的准确率：要在测试集 x_test, y_test 上量"),
                        "batch_ignored": (dict(batch=64), "batch 参数没有用上（用的是 train 的默认 64）"),
                        "seed_ignored": (dict(seed=0), "seed 参数没有用上：模型和取 batch 的顺序都要用它"),
                        "norm_ignored": (dict(norm="gn" if norm == "bn" else "bn"), "norm 参数用反了或没有用上"),
                        "lr": (dict(lr=3e-3), "学习率不是 2e-3（用了 train 的默认 3e-3）"),
                        "mlp_args": (dict(depth=4, act="tanh"), "模型应为 bn_lab.mlp(norm, depth=3, act=\"relu\", seed=seed)")}
            named = None
            for mistake, (change, message) in mistakes.items():
                if mistake == "train_mode" and norm != "bn":
                    continue                                 # GroupNorm: train and eval mode agree
                args = dict(norm=norm, batch=batch, steps=steps, seed=seed) | change
                if abs(got - reference_eval_accuracy(**args)) < 1e-9:
                    named = fail(mistake, message, expected=f"{want:.4f}", got=f"{got:.4f}")
                    break
            out.append(named or fail(name, f"{norm}, batch {batch}, {steps} 步：准确率与第 4.2 节的设置"
                                           "（depth=3, relu, Adam lr 2e-3, train(..., seed=seed)，推理模式的测试准确率）不一致",
                                     expected=f"{want:.4f}", got=f"{got:.4f}"))
    return out
