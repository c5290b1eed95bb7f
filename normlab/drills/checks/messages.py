"""What the findings say (Chinese with the English term), kept apart so a candidate can read them."""

MISTAKE_TEXT = {
    "eps_ignored": "构造时传入的 eps 没有被使用 (the eps argument is ignored)：用 self.eps，不要把 1e-5 写死",
}


BW_TEXT = {
    "unbiased_variance": "用了无偏方差 (unbiased variance, n−1)：前向的方差是有偏的 (除以 n)，反向传播里的 σ、x̂ 也要用它",
    "eps_ignored": "传入的 eps 没有被使用 (the eps argument is ignored)：eps=1e-2 时结果相当于把 ε 写死了",
    "eps_missing": "ε 没有加进方差 (eps missing)：r = 1/sqrt(var + eps)",
    "eps_outside_root": "ε 放在了根号外 (eps outside the square root)：r = 1/sqrt(var + eps)，不是 1/(std + eps)",
    "missing_mean_term": "少了均值那一项 −mean(ĝ) (missing the mean term)：均值 μ 也依赖 x",
    "missing_var_term": "少了方差那一项 −x̂·mean(ĝ·x̂) (missing the variance term)：方差 σ² 也依赖 x",
    "stats_as_constants": "把均值和方差当成了常数 (mean and variance treated as constants)：少了 −mean(ĝ) 和 −x̂·mean(ĝ·x̂) 两项",
    "wrong_divisor": "平均除错了数 (wrong divisor in the averages)：{right}",
    "grad_weight_uses_y": "grad_weight 应为 Σ g·x̂（归一化之后、乘 γ 之前的值），不是 Σ g·y (grad_weight uses y instead of x̂)",
}



BROADCAST = ("must match the size of tensor", "expanded size", "doesn't match the broadcast shape",
             "operands could not be broadcast")


def is_broadcast_error(text: str) -> bool:
    return any(b in text for b in BROADCAST)


PRECISION = ("输出与 torch 只差一点（相对误差 {err:.1e}）：公式是对的，算术精度不够 (precision)——是否在 float16/bfloat16 "
             "里计算，或用了 E[x²]−E[x]² 的单遍方差？在 float32 里计算（x.float()），最后再转回输入的 dtype")


# measured: wrong at offset 1e4, right at the small offsets of the other probes; the cause is given as a condition
ONE_PASS = ("输入带大偏移 (offset 1e4) 时结果错误，偏移小时正确：方差在 float32 下损失了精度 (catastrophic cancellation)。"
            "E[x²]−E[x]² 的单遍写法 (one-pass variance) 会这样；先减均值再平方 (two-pass) 在这里是准确的")
