"""Lesson 02: normlab.lessons.batchnorm and normlab.lessons.sync_bn against torch's BatchNorm,
F.batch_norm, torch's own Linear+BN fusion and hand computations. The training loop and accuracy:
tests/test_train.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab.lessons import batchnorm as bn_lesson
from normlab.lessons.sync_bn import combine_gathered, sync_batchnorm_demo


def test_conventions_against_torch_running_mean():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(1, momentum=0.1)
    x = torch.randn(32, 1) + 3
    bn(x)
    mean = x.mean()
    assert torch.allclose(bn_lesson.running_update(torch.tensor(0.0), mean, 0.1, "pytorch"), bn.running_mean[0])
    assert torch.allclose(bn_lesson.running_update(torch.tensor(0.0), mean, 0.9, "old_weight"), bn.running_mean[0])
    with pytest.raises(ValueError, match="convention"):
        bn_lesson.running_update(torch.tensor(0.0), mean, 0.1, "keras")


def test_trace_converges_at_the_closed_form_rate():
    tr = bn_lesson.running_trace(0.01, "pytorch", steps=100, true_mean=5.0, noise=0.0)
    assert abs(tr[-1].item() - 5 * (1 - 0.99 ** 100)) < 1e-4


def test_grad_mode_batchnorm_reproduces_the_d2l_bug():
    torch.manual_seed(0)
    bn = bn_lesson.GradModeBatchNorm(3)
    for _ in range(3):
        bn(torch.randn(16, 3) * 2 + 4)
    bn.eval()
    x = torch.randn(5, 3)
    with torch.enable_grad():
        y = bn(x)
    assert torch.allclose(y, F.batch_norm(x, None, None, training=True), atol=1e-5)  # batch stats in eval
    assert not bn.training  # the flag itself is restored


def test_sync_batchnorm_across_two_processes_equals_full_batch_bn():
    torch.manual_seed(1)
    x = torch.randn(12, 4) * 2
    x[:6] += 5
    ranks = sync_batchnorm_demo(x, world=2)
    full = F.batch_norm(x.double(), None, None, training=True, eps=1e-5)
    assert torch.allclose(torch.cat([r["sync_out"] for r in ranks]), full, atol=1e-10)
    assert torch.allclose(torch.cat([r["gather_out"] for r in ranks]), full, atol=1e-10)   # nn.SyncBatchNorm's way
    for r, shard in zip(ranks, x.double().chunk(2)):
        assert torch.allclose(r["local_out"], F.batch_norm(shard, None, None, training=True, eps=1e-5), atol=1e-10)
    with pytest.raises(ValueError, match="N, C"):
        sync_batchnorm_demo(torch.randn(3, 2))


def test_combine_gathered_matches_full_batch_statistics_with_unequal_counts():
    """nn.SyncBatchNorm's combination (batch_norm_gather_stats_with_counts), by its formula, vs the whole batch."""
    torch.manual_seed(2)
    x = torch.randn(23, 5, dtype=torch.float64) * 3
    x[:7] += 4
    shards = [x[:7], x[7:10], x[10:]]
    mean = torch.stack([s.mean(0) for s in shards])
    invstd = torch.stack([1 / torch.sqrt(s.var(0, unbiased=False) + 1e-5) for s in shards])
    g_mean, g_invstd = combine_gathered(mean, invstd, torch.tensor([7.0, 3.0, 13.0]))
    assert torch.allclose(g_mean, x.mean(0), atol=1e-12)
    assert torch.allclose(g_invstd, 1 / torch.sqrt(x.var(0, unbiased=False) + 1e-5), atol=1e-10)


def test_noisy_shift_moves_the_distribution_every_step_and_is_identity_in_eval():
    layer = bn_lesson.NoisyShift(5, strength=2.0, seed=0)
    h = torch.randn(400, 5)
    a, b = layer(h), layer(h)
    assert not torch.allclose(a, b)                                  # a new scale and shift every step
    scale = a.std(0) / h.std(0)
    shift = a.mean(0) - scale * h.mean(0)
    assert ((scale >= 1 - 1e-4) & (scale <= 2 + 1e-4)).all() and (shift.abs() <= 2 + 1e-4).all()
    layer.eval()
    assert torch.equal(layer(h), h)
    with pytest.raises(ValueError, match="strength"):
        bn_lesson.NoisyShift(3, strength=0.5)


def test_input_drift_against_a_hand_computation():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    xs = [torch.randn(8, 3) for _ in range(3)]
    with bn_lesson.InputDrift(model, torch.nn.Tanh) as drift:
        for x in xs:
            model(x)
    assert not model[1]._forward_hooks                               # hooks removed on exit
    with torch.no_grad():
        means = [model[0](x).mean(0) for x in xs]
    expected = (torch.stack(means[1:]) - torch.stack(means[:-1])).abs().mean().item()
    assert drift.per_layer() == pytest.approx([expected], rel=1e-5)
    with pytest.raises(ValueError, match="Tanh"):
        bn_lesson.InputDrift(torch.nn.Linear(2, 2), torch.nn.Tanh)


def test_noisy_bn_network_has_the_same_initial_weights_as_the_bn_network():
    a, b = bn_lesson.mlp("bn", seed=4), bn_lesson.mlp("bn_noise", seed=4)
    wa = [p for p in a.parameters() if p.dim() >= 2]
    wb = [p for p in b.parameters() if p.dim() >= 2]
    assert all(torch.equal(p, q) for p, q in zip(wa, wb))
    with pytest.raises(ValueError, match="未知的 norm"):
        bn_lesson.mlp("batchnorm")


def test_set_bn_momentum_reaches_every_batchnorm():
    model = bn_lesson.set_bn_momentum(bn_lesson.mlp("bn", depth=3), 0.5)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d)]
    assert len(bns) == 3 and all(m.momentum == 0.5 for m in bns)
    assert bn_lesson.set_bn_momentum(model, None) is model and all(m.momentum is None for m in bns)


@pytest.mark.parametrize("norm", ["none", "bn", "gn", "ln"])
def test_mlp_is_linear_norm_act_written_out_with_torch_functional(norm):
    model = bn_lesson.mlp(norm, depth=2, width=16, act="tanh", seed=1).train()
    x = torch.randn(12, 64)
    lin = [m for m in model if isinstance(m, nn.Linear)]
    normed = {"none": lambda h, i: h, "bn": lambda h, i: F.batch_norm(h, None, None, training=True),
              "gn": lambda h, i: F.group_norm(h, 8), "ln": lambda h, i: F.layer_norm(h, (16,))}[norm]
    h = x
    for i in range(2):
        h = torch.tanh(normed(F.linear(h, lin[i].weight, lin[i].bias), i))   # gamma = 1, beta = 0 at init
    torch.testing.assert_close(model(x), F.linear(h, lin[2].weight, lin[2].bias))
    assert [m.in_features for m in lin] == [64, 16, 16] and lin[-1].out_features == 10


def test_fold_batchnorm_equals_linear_then_eval_bn_and_torchs_own_fusion():
    from torch.nn.utils.fusion import fuse_linear_bn_eval

    torch.manual_seed(3)
    linear, bn = nn.Linear(6, 4), nn.BatchNorm1d(4)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(4))
        bn.bias.copy_(torch.randn(4))
    for _ in range(5):
        bn(linear(torch.randn(16, 6) * 2 + 1))                             # running stats away from (0, 1)
    linear.eval(), bn.eval()
    folded = bn_lesson.fold_batchnorm(linear, bn)
    x = torch.randn(10, 6)
    with torch.no_grad():
        torch.testing.assert_close(folded(x), bn(linear(x)))
        ref = fuse_linear_bn_eval(linear, bn)
        torch.testing.assert_close(folded.weight, ref.weight)
        torch.testing.assert_close(folded.bias, ref.bias)


def test_building_the_mlp_leaves_torchs_global_rng_alone():
    """Issue 14: builders must not reseed the notebook's random stream (torch.random.fork_rng)."""
    torch.manual_seed(11)
    state = torch.random.get_rng_state()
    a = bn_lesson.mlp("bn_noise", depth=2, seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), bn_lesson.mlp("bn_noise", depth=2, seed=4).parameters()))


def test_xavier_mlp_uses_tanhs_recommended_gain_against_glorots_formula():
    """init="xavier": Xavier-uniform, U(+-a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio
    2010, eq. 16), gain 5/3 for tanh on the hidden layers, 1 on the output layer, zero biases; the
    default init is PyTorch's U(+-1/sqrt(fan_in))."""
    model = bn_lesson.mlp("none", depth=3, width=256, act="tanh", seed=2, init="xavier")
    lin = [m for m in model if isinstance(m, nn.Linear)]
    for k, m in enumerate(lin):
        gain = 5 / 3 if k < len(lin) - 1 else 1.0
        a = gain * (6 / (m.in_features + m.out_features)) ** 0.5
        w = m.weight.detach()
        assert w.abs().max() <= a and w.abs().max() > 0.95 * a               # fills U(-a, a)
        assert w.std().item() == pytest.approx(a / 3 ** 0.5, rel=0.08)        # std of U(-a, a)
        assert torch.count_nonzero(m.bias) == 0
    default = [m for m in bn_lesson.mlp("none", depth=3, width=256, seed=2) if isinstance(m, nn.Linear)]
    assert default[1].weight.abs().max() <= 1 / 256 ** 0.5 and torch.count_nonzero(default[1].bias) > 0
    relu = [m for m in bn_lesson.mlp("bn", depth=2, width=64, act="relu", seed=2, init="xavier") if isinstance(m, nn.Linear)]
    assert relu[1].weight.abs().max() <= 2 ** 0.5 * (6 / 128) ** 0.5      # ReLU's gain sqrt(2)
    with pytest.raises(ValueError, match="未知的初始化"):
        bn_lesson.mlp("none", init="he")
    with pytest.raises(ValueError, match="未知的激活函数"):
        bn_lesson.mlp("none", act="gelu")


def test_noise_only_network_is_bn_noise_without_the_batchnorm():
    """norm="noise" (section 6's control): the same NoisyShift draws as bn_noise, no BatchNorm layer."""
    a, b = bn_lesson.mlp("noise", depth=2, seed=4), bn_lesson.mlp("bn_noise", depth=2, seed=4)
    assert not any(isinstance(m, nn.BatchNorm1d) for m in a.modules())
    shifts_a = [m for m in a.modules() if isinstance(m, bn_lesson.NoisyShift)]
    shifts_b = [m for m in b.modules() if isinstance(m, bn_lesson.NoisyShift)]
    assert len(shifts_a) == 2 and [s.generator.initial_seed() for s in shifts_a] == [s.generator.initial_seed() for s in shifts_b]
    x = torch.randn(8, 64)
    lin = [m for m in a if isinstance(m, nn.Linear)]
    a.eval()                                                                 # eval: the noise is off, so a plain MLP
    h = torch.tanh(F.linear(torch.tanh(F.linear(x, lin[0].weight, lin[0].bias)), lin[1].weight, lin[1].bias))
    torch.testing.assert_close(a(x), F.linear(h, lin[2].weight, lin[2].bias))


def test_reestimate_bn_stats_resets_first_then_averages_every_batch():
    """After 300 training steps on data of mean 1, one pass of 19 batches of mean 5: with the reset the
    running mean is the plain mean of the 19 batch means (a hand computation), with momentum=None alone
    (no reset) it moves only a few percent of the way (num_batches_tracked keeps counting from 300)."""
    g = torch.Generator().manual_seed(0)
    train_batches = [torch.randn(16, 3, generator=g) + 1.0 for _ in range(300)]
    new_batches = [torch.randn(16, 3, generator=g) * 2 + 5.0 for _ in range(19)]

    def trained():
        bn = nn.BatchNorm1d(3)
        for x in train_batches:
            bn(x)
        return bn

    bn = bn_lesson.reestimate_bn_stats(trained(), new_batches)
    want = torch.stack([x.mean(0) for x in new_batches]).mean(0)
    want_var = torch.stack([x.var(0, unbiased=True) for x in new_batches]).mean(0)
    assert torch.allclose(bn.running_mean, want, atol=1e-5) and torch.allclose(bn.running_var, want_var, atol=1e-4)
    assert bn.momentum == 0.1 and bn.training and int(bn.num_batches_tracked) == 19

    naive = trained()                                       # momentum=None without reset_running_stats()
    before = naive.running_mean.clone()
    naive.momentum = None
    for x in new_batches:
        naive(x)
    moved = (naive.running_mean - before) / (want - before)
    assert (moved > 0).all() and (moved < 0.1).all()        # 19 / 319 of the way: ~6 %
