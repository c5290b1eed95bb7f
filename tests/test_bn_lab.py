"""normlab.bn_lab and normlab.distributed against torch's BatchNorm and F.batch_norm."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import bn_lab
from normlab.distributed import sync_batchnorm_demo


def test_conventions_against_torch_running_mean():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(1, momentum=0.1)
    x = torch.randn(32, 1) + 3
    bn(x)
    mean = x.mean()
    assert torch.allclose(bn_lab.running_update(torch.tensor(0.0), mean, 0.1, "pytorch"), bn.running_mean[0])
    assert torch.allclose(bn_lab.running_update(torch.tensor(0.0), mean, 0.9, "old_weight"), bn.running_mean[0])
    with pytest.raises(ValueError, match="convention"):
        bn_lab.running_update(torch.tensor(0.0), mean, 0.1, "keras")


def test_trace_converges_at_the_closed_form_rate():
    tr = bn_lab.running_trace(0.01, "pytorch", steps=100, true_mean=5.0, noise=0.0)
    assert abs(tr[-1].item() - 5 * (1 - 0.99 ** 100)) < 1e-4


def test_grad_mode_batchnorm_reproduces_the_d2l_bug():
    torch.manual_seed(0)
    bn = bn_lab.GradModeBatchNorm(3)
    for _ in range(3):
        bn(torch.randn(16, 3) * 2 + 4)
    bn.eval()
    x = torch.randn(5, 3)
    with torch.enable_grad():
        y = bn(x)
    assert torch.allclose(y, F.batch_norm(x, None, None, training=True), atol=1e-5)  # batch stats in eval
    assert not bn.training  # the flag itself is restored


def test_accuracy_in_train_mode_leaves_running_stats_alone():
    model = bn_lab.set_bn_momentum(bn_lab.mlp("bn", depth=2), 0.5)
    assert all(m.momentum == 0.5 for m in model.modules() if isinstance(m, nn.BatchNorm1d))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(40, 64), torch.randint(0, 10, (40,))
    bn_lab.accuracy(model, x, y, mode="train")
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_train_reduces_loss_on_digits():
    from normlab.residuals import digits
    x, y, _, _ = digits()
    losses = bn_lab.train(bn_lab.mlp("bn", depth=2), x, y, steps=60, batch=64, lr=0.3)
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10


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
    from normlab.distributed import combine_gathered

    torch.manual_seed(2)
    x = torch.randn(23, 5, dtype=torch.float64) * 3
    x[:7] += 4
    shards = [x[:7], x[7:10], x[10:]]
    mean = torch.stack([s.mean(0) for s in shards])
    invstd = torch.stack([1 / torch.sqrt(s.var(0, unbiased=False) + 1e-5) for s in shards])
    g_mean, g_invstd = combine_gathered(mean, invstd, torch.tensor([7.0, 3.0, 13.0]))
    assert torch.allclose(g_mean, x.mean(0), atol=1e-12)
    assert torch.allclose(g_invstd, 1 / torch.sqrt(x.var(0, unbiased=False) + 1e-5), atol=1e-10)


def test_update_ratios_equal_lr_times_grad_over_weight_for_sgd():
    """Karpathy's update:data ratio: with SGD, std(W_after - W_before) / std(W_before) = std(lr * grad) / std(W)."""
    from normlab.residuals import digits
    x, y, _, _ = digits()
    model = bn_lab.mlp("bn", depth=2, seed=3)
    twin = bn_lab.mlp("bn", depth=2, seed=3)
    ratios = []
    bn_lab.train(model, x, y, steps=1, batch=32, lr=0.5, seed=7, ratios=ratios)
    idx = torch.randint(0, len(y), (32,), generator=torch.Generator().manual_seed(7))   # the same batch
    twin.train()
    F.cross_entropy(twin(x[idx]), y[idx]).backward()
    weights = [p for p in twin.parameters() if p.dim() >= 2]
    expected = [((0.5 * w.grad).std() / w.detach().std()).item() for w in weights]
    assert len(ratios) == 1 and len(ratios[0]) == len(weights) == 3
    assert ratios[0] == pytest.approx(expected, rel=1e-4)


def test_noisy_shift_moves_the_distribution_every_step_and_is_identity_in_eval():
    layer = bn_lab.NoisyShift(5, strength=2.0, seed=0)
    h = torch.randn(400, 5)
    a, b = layer(h), layer(h)
    assert not torch.allclose(a, b)                                  # a new scale and shift every step
    scale = a.std(0) / h.std(0)
    shift = a.mean(0) - scale * h.mean(0)
    assert ((scale >= 1 - 1e-4) & (scale <= 2 + 1e-4)).all() and (shift.abs() <= 2 + 1e-4).all()
    layer.eval()
    assert torch.equal(layer(h), h)
    with pytest.raises(ValueError, match="strength"):
        bn_lab.NoisyShift(3, strength=0.5)


def test_input_drift_against_a_hand_computation():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    xs = [torch.randn(8, 3) for _ in range(3)]
    with bn_lab.InputDrift(model, torch.nn.Tanh) as drift:
        for x in xs:
            model(x)
    assert not model[1]._forward_hooks                               # hooks removed on exit
    with torch.no_grad():
        means = [model[0](x).mean(0) for x in xs]
    expected = (torch.stack(means[1:]) - torch.stack(means[:-1])).abs().mean().item()
    assert drift.per_layer() == pytest.approx([expected], rel=1e-5)
    with pytest.raises(ValueError, match="Tanh"):
        bn_lab.InputDrift(torch.nn.Linear(2, 2), torch.nn.Tanh)


def test_noisy_bn_network_has_the_same_initial_weights_as_the_bn_network():
    a, b = bn_lab.mlp("bn", seed=4), bn_lab.mlp("bn_noise", seed=4)
    wa = [p for p in a.parameters() if p.dim() >= 2]
    wb = [p for p in b.parameters() if p.dim() >= 2]
    assert all(torch.equal(p, q) for p, q in zip(wa, wb))
    with pytest.raises(ValueError, match="未知的 norm"):
        bn_lab.mlp("batchnorm")


def test_train_runs_on_one_thread_and_restores_the_thread_count():
    from normlab.residuals import digits

    x, y, _, _ = digits()
    seen = []

    class Spy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 10)

        def forward(self, v):
            seen.append(torch.get_num_threads())
            return self.lin(v)

    before = torch.get_num_threads()
    bn_lab.train(Spy(), x, y, steps=2, batch=8)
    assert seen == [1, 1] and torch.get_num_threads() == before
    bn_lab.train(Spy(), x, y, steps=1, batch=8, threads=None)
    assert seen[-1] == before
