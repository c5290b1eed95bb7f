"""normlab.train against a training loop written out here with torch.optim directly (same seed, same
batches): identical losses; the update:data ratios, DeepNet's model update and the warm-up schedule
computed by hand; the thread count seen inside the loop; accuracy counted by hand."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab.data import make_task
from normlab.models import SequenceModel
from normlab.train import History, accuracy, one_thread, train, warmup_lr


@pytest.fixture
def two_threads():
    """torch on 2 threads for the test, so that 'set to 1 inside' and 'restored after' can both fail."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


@pytest.fixture
def single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)                    # the reference loop on one thread too: bit-identical sums
    yield
    torch.set_num_threads(before)


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 10))


def _data(n: int = 200, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)


def _reference(model, draw, steps, opt, lr, warmup=0, betas=(0.9, 0.999), update_batch=None):
    """The loop by hand: lr(t) = lr * min(1, (t+1)/T), cross-entropy over every position, Adam/SGD."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas) if opt == "adam" else torch.optim.SGD(model.parameters(), lr=lr)
    weights = [p for p in model.parameters() if p.dim() >= 2]
    out = {"losses": [], "lrs": [], "ratios": [], "updates": []}
    model.train()
    with torch.no_grad():
        before_out = model(update_batch) if update_batch is not None else None
    for t in range(steps):
        rate = lr * min(1.0, (t + 1) / warmup) if warmup else lr
        for group in optimizer.param_groups:
            group["lr"] = rate
        xb, yb = draw()
        logits = model(xb)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        old = [w.detach().clone() for w in weights]
        optimizer.step()
        out["ratios"].append([((w.detach() - o).norm() / o.norm()).item() for w, o in zip(weights, old)])
        if update_batch is not None:
            with torch.no_grad():
                after_out = model(update_batch)
            out["updates"].append(((after_out - before_out) ** 2).sum().sqrt().item() / update_batch.shape[0] ** 0.5)
            before_out = after_out
        out["losses"].append(loss.item())
        out["lrs"].append(rate)
    return out


def _rows(x, y, batch, seed):
    g = torch.Generator().manual_seed(seed)

    def draw():
        idx = torch.randint(0, len(y), (batch,), generator=g)
        return x[idx], y[idx]
    return draw


def test_adam_with_warmup_equals_the_hand_written_loop(single_thread):
    x, y = _data()
    model, twin = _net(), _net()
    h = train(model, (x, y), steps=12, batch=16, lr=1e-2, betas=(0.8, 0.95), warmup=5, seed=3, ratios=True,
              progress=False)
    ref = _reference(twin, _rows(x, y, 16, 3), 12, "adam", 1e-2, warmup=5, betas=(0.8, 0.95))
    assert h.losses == ref["losses"]                                       # bit for bit
    assert h.lrs == pytest.approx([1e-2 * min(1, (t + 1) / 5) for t in range(12)], rel=1e-15)
    assert [len(r) for r in h.ratios] == [2] * 12                          # the two weight matrices, every step
    assert sum(h.ratios, []) == pytest.approx(sum(ref["ratios"], []), rel=1e-6)
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.equal(p, q)


def test_sgd_ratios_are_lr_times_grad_over_weight(single_thread):
    """The update:data ratio: with SGD, ||W_after - W_before||_F / ||W_before||_F = ||lr * grad||_F / ||W||_F."""
    x, y = _data()
    model, twin = _net(2), _net(2)
    h = train(model, (x, y), steps=1, batch=32, opt="sgd", lr=0.5, seed=7, ratios=True, progress=False)
    xb, yb = _rows(x, y, 32, 7)()                                          # the same batch
    F.cross_entropy(twin(xb), yb).backward()
    expected = [((0.5 * w.grad).norm() / w.detach().norm()).item() for w in twin.parameters() if w.dim() >= 2]
    assert len(h.ratios) == 1 and h.ratios[0] == pytest.approx(expected, rel=1e-4)
    assert h.losses == pytest.approx([F.cross_entropy(_net(2)(xb), yb).item()], rel=1e-6)
    assert train(_net(), (x, y), steps=2, progress=False).ratios == []     # only recorded when asked


def test_model_update_per_sample_of_the_update_batch_by_hand(single_thread):
    """DeepNet §3: ||F(x_p; theta_t) - F(x_p; theta_{t-1})|| / sqrt(n) at every step."""
    x, y = _data()
    x_u = torch.randn(24, 64, generator=torch.Generator().manual_seed(9))
    model, twin = _net(4), _net(4)
    h = train(model, (x, y), steps=6, batch=16, opt="sgd", lr=0.1, seed=1, update_batch=x_u, progress=False)
    ref = _reference(twin, _rows(x, y, 16, 1), 6, "sgd", 0.1, update_batch=x_u)
    assert h.losses == ref["losses"]
    assert len(h.updates) == 6 and h.updates == pytest.approx(ref["updates"], rel=1e-5)
    assert all(u > 0 for u in h.updates)


def test_a_task_trains_on_every_position_as_by_hand(single_thread):
    task = make_task("sort", vocab=8, seq_len=6)
    model = SequenceModel(8, 6, depth=2, width=16, seed=0)
    twin = SequenceModel(8, 6, depth=2, width=16, seed=0)
    h = train(model, task, steps=5, batch=8, lr=3e-3, seed=2, progress=False)
    g = torch.Generator().manual_seed(2)
    ref = _reference(twin, lambda: task.batch(8, g), 5, "adam", 3e-3)
    assert h.losses == ref["losses"] and h.lrs == [3e-3] * 5


def test_warmup_lr_is_the_formula():
    assert [warmup_lr(t, 1.0, 4) for t in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert [warmup_lr(t, 3e-3, 0) for t in range(3)] == [3e-3] * 3           # T = 0: no warm-up
    assert warmup_lr(9, 2.0, 100) == pytest.approx(2.0 * 10 / 100)


def test_one_thread_sets_the_count_inside_and_restores_it(two_threads):
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == two_threads
    with one_thread(None):
        assert torch.get_num_threads() == two_threads                    # None: leave it
    with pytest.raises(RuntimeError, match="inside"):
        with one_thread():
            raise RuntimeError("inside")
    assert torch.get_num_threads() == two_threads                        # restored after an exception too


def test_train_runs_its_steps_on_one_thread_and_restores_the_count(two_threads):
    x, y = _data()
    seen = []

    class Spy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(64, 10)

        def forward(self, v):
            seen.append(torch.get_num_threads())
            return self.lin(v)

    train(Spy(), (x, y), steps=2, batch=8, progress=False)
    assert seen == [1, 1] and torch.get_num_threads() == two_threads
    train(Spy(), (x, y), steps=1, batch=8, threads=None, progress=False)
    assert seen[-1] == two_threads


def test_after_backward_sees_the_gradients_before_the_step():
    x, y = _data()
    model = _net(5)
    calls = []

    def look(step):
        w = model[0].weight
        calls.append((step, w.grad is not None, torch.equal(w, snapshot[-1])))
        snapshot.append(w.detach().clone())

    snapshot = [model[0].weight.detach().clone()]
    train(model, (x, y), steps=3, batch=8, progress=False, after_backward=look)
    assert calls == [(0, True, True), (1, True, False), (2, True, False)]    # weights moved only by the step
    assert not torch.equal(model[0].weight, snapshot[-1])


def _has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


@pytest.mark.parametrize("data, kwargs, error", [
    ([torch.randn(4, 64)], {}, TypeError),                                  # one tensor, not (x, y)
    ((torch.randn(4, 64).numpy(), torch.zeros(4, dtype=torch.long).numpy()), {}, TypeError),
    ((torch.randn(4, 64), torch.zeros(3, dtype=torch.long)), {}, ValueError),   # lengths differ
    ((torch.randn(0, 64), torch.zeros(0, dtype=torch.long)), {}, ValueError),   # no rows
    ((torch.randn(4, 64), torch.zeros(4, dtype=torch.long)), {"opt": "rmsprop"}, ValueError),
    ((torch.randn(4, 64), torch.zeros(4, dtype=torch.long)), {"steps": 0}, ValueError),
])
def test_bad_data_gets_a_chinese_error(data, kwargs, error):
    with pytest.raises(error) as err:
        train(_net(), data, **({"steps": 1} | kwargs), progress=False)
    assert _has_chinese(str(err.value))


def test_accuracy_counts_hits_and_train_mode_uses_batch_statistics_on_a_copy():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 10))
    x, y = _data(60)
    model.train()
    with torch.no_grad():
        model(x * 3 + 1)                                                    # running stats away from (0, 1)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    lin1, bn, lin2 = model[0], model[1], model[3]
    with torch.no_grad():
        h = lin1(x)
        by_eval = lin2(F.relu(F.batch_norm(h, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)))
        by_batch = lin2(F.relu(F.batch_norm(h, None, None, bn.weight, bn.bias, True, 0.0, bn.eps)))
    hits = lambda logits: sum(int(p == t) for p, t in zip(logits.argmax(-1).tolist(), y.tolist())) / len(y)
    assert accuracy(model, x, y) == pytest.approx(hits(by_eval))
    assert accuracy(model, x, y, mode="train") == pytest.approx(hits(by_batch))
    assert hits(by_eval) != hits(by_batch)                                  # the two modes differ here
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())   # running stats untouched
    with pytest.raises(ValueError, match="mode") as err:
        accuracy(model, x, y, mode="test")
    assert _has_chinese(str(err.value))


def test_history_final_is_the_mean_of_the_last_losses():
    h = History(losses=[5.0, 4.0, 3.0, 2.0, 1.0])
    assert h.final(last=2) == pytest.approx((2.0 + 1.0) / 2)
    assert h.final(last=2, at=3) == pytest.approx((4.0 + 3.0) / 2)
    assert h.final() == pytest.approx(15.0 / 5)
