"""BatchNorm's running statistics judged term by term (issue 37): each buffer's values after every training step
are matched against the update rule with each of its terms either torch's or a known slip —

    momentum      torch: running = (1 − m)·running + m·batch;  reversed (Keras): m·running + (1 − m)·batch
    seeding       torch: from the buffers' initial 0 / 1;      first batch: the first step stores the batch's statistic
    variance      torch: unbiased (n − 1) in running_var;      biased (n)
    ε             torch: not stored;                            stored: running_var holds var + ε

The mean and the variance buffer are matched on their own, so every slip present is named on its own, whatever
else is there. A counterexample names the buffer and the step after which it first differs."""

from __future__ import annotations

import itertools

import torch

from ..report import Finding, short

TEXT = {
    "momentum_reversed": "momentum 用反了 (momentum convention reversed, Keras 的约定)：PyTorch 是 running = (1−momentum)·running + "
                         "momentum·batch，momentum=0.1 时新 batch 只占 10%",
    "running_stats_seeded": "第一个 batch 直接写进了滑动统计量 (running statistics seeded from the first batch)：PyTorch 从初值 "
                            "running_mean=0、running_var=1 开始，第一步也按 momentum 更新",
    "running_var_biased": "running_var 存了有偏方差 (biased, 除以 n)：应存无偏方差（乘 n/(n−1)），归一化时才用有偏方差 "
                          "(Ioffe & Szegedy 2015 §3.1；F.batch_norm 也这样做)",
    "running_var_eps": "ε 被加进了 running_var (eps stored in the running variance)：running_var 存方差本身，ε 只在归一化时加 "
                       "(sqrt(running_var + ε))",
    "running_stats_not_updated": "训练时滑动统计量没有更新 (running statistics never updated)",
}
WHICH = {"mean": "running_mean", "var": "running_var"}


def simulate(xs, axes, C, conv, seed, var_kind="unbiased", eps_in=False, eps=1e-5, momentum=0.1, stat="mean"):
    """The buffer's value after each step under one update rule."""
    v = torch.zeros(C, dtype=torch.float64) if stat == "mean" else torch.ones(C, dtype=torch.float64)
    seq = []
    for k, x in enumerate(xs):
        b = x.mean(axes) if stat == "mean" else x.var(axes, unbiased=var_kind == "unbiased") + (eps if eps_in else 0.0)
        if conv == "frozen":
            pass
        elif k == 0 and seed:
            v = b
        elif conv == "torch":
            v = (1 - momentum) * v + momentum * b
        else:
            v = momentum * v + (1 - momentum) * b
        seq.append(v)
    return seq


def _near(a, b) -> bool:
    """Relative agreement (an ε of 1e-5 stored in a variance of 1e-6 shows)."""
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-8))


def _match(seen, seq):
    return all(_near(a, b) for a, b in zip(seen, seq))


def _error(seen, seq) -> float:
    """Summed relative error over the steps and channels: the rules within tolerance are ranked by it (an ε of
    1e-5 stored into a variance carried at ~1 shows only as a consistent 1e-5 shift)."""
    return sum(float(((a.double() - b.double()).abs() / (b.double().abs() + 1e-8)).sum()) for a, b in zip(seen, seq))


def _rules(stat):
    convs, seeds = ("torch", "reversed", "frozen"), (False, True)
    if stat == "mean":
        rules = [dict(conv=c, seed=s) for c, s in itertools.product(convs, seeds)]
    else:
        rules = [dict(conv=c, seed=s, var_kind=v, eps_in=e) for c, s, v, e in
                 itertools.product(convs, seeds, ("unbiased", "biased"), (False, True))]
    torch_rule = rules[0]
    return sorted(rules, key=lambda r: sum(r[k] != torch_rule[k] for k in r))


def _slips(rule) -> list[str]:
    ids = []
    if rule["conv"] == "reversed":
        ids.append("momentum_reversed")
    if rule["conv"] == "frozen":
        return ["running_stats_not_updated"]
    if rule["seed"]:
        ids.append("running_stats_seeded")
    if rule.get("var_kind") == "biased":
        ids.append("running_var_biased")
    if rule.get("eps_in"):
        ids.append("running_var_eps")
    return ids


def diagnose(seen, xs, axes, C, names=("running_mean", "running_var")) -> tuple[list[Finding], bool]:
    """(findings, all right) for the buffers' values ``seen`` [(mean, var) per step] after the steps ``xs``."""
    found: dict[str, list[str]] = {}
    examples = []
    unexplained = []
    for j, stat in enumerate(("mean", "var")):
        got = [s[j] for s in seen]
        right = simulate(xs, axes, C, "torch", False, stat=stat)
        fits = [r for r in _rules(stat) if _match(got, simulate(xs, axes, C, stat=stat, **r))]
        rule = min(fits, key=lambda r: _error(got, simulate(xs, axes, C, stat=stat, **r))) if fits else None
        if rule is not None and not _slips(rule):
            continue
        step = next((k for k, (a, b) in enumerate(zip(got, right)) if not _near(a, b)), len(xs) - 1)
        examples.append({"缓冲区 buffer": f"self.{names[j]}，第 {step + 1} 步之后 (after step {step + 1} of {len(xs)})",
                         "input": f"第 {step + 1} 步的 batch {short(xs[step].float())}",
                         "expected": short(right[step].float()), "got": short(got[step].float())})
        if rule is None:
            unexplained.append(names[j])
            continue
        for id in _slips(rule):
            found.setdefault(id, []).append(names[j])
    findings = []
    both = f"（同时有 {len(found)} 处错误）" if len(found) > 1 else ""
    for k, (id, where) in enumerate(found.items()):
        findings.append(Finding(id, False, TEXT[id] + f"（{', '.join('self.' + w for w in where)}）" + both,
                                examples[0] if k == 0 and examples else {}))
    if unexplained:
        findings.append(Finding("running_stats", False,
                                f"{', '.join('self.' + n for n in unexplained)} 的更新与 PyTorch 不一致，也不是已知的几种写法"
                                "（momentum 反向、首个 batch 直接写入、有偏方差、ε 存入方差）的组合 (running statistics differ)",
                                examples[-1] if examples else {}))
    return findings, not examples
