"""normlab/runcache.py: a training the learner copy replays from the solution copy's run leaves the kernel
exactly as the training itself would (issue 27 item 2), and nothing is replayed that could differ.

The reference is the training itself: each scenario is run as a "solution copy" (recording) and again
as a "learner copy" (replaying, with the training loop made to raise, so the replay is what ran), and
everything the training leaves behind is compared bit for bit: the History, every parameter and
buffer, every .grad, the modules' modes, their own generators, and the next draws of torch's, NumPy's
and Python's global random streams. The scenarios are the kinds the lessons run: the digits net with
ratios, an MLP with noisy BatchNorm (its own generator) and dropout (the global stream), SGD, and a
Transformer with warm-up and DeepNet's per-step update batch.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
import torch
from torch import nn

from normlab import data, env, models, runcache
from normlab import train as train_module
from normlab.lessons import batchnorm as bn_lab
from normlab.train import train

DIGITS = data.digits(n_train=300)


def digits_net():
    return models.DigitsNet(3, 32, "pre"), dict(data=(DIGITS[0], DIGITS[1]), steps=25, batch=32, ratios=True)


def noisy_mlp():
    model = nn.Sequential(bn_lab.mlp("bn_noise", depth=2, width=32), nn.Dropout(0.2))
    return model, dict(data=(DIGITS[0], DIGITS[1]), steps=25, batch=32, opt="sgd", lr=0.3)


def transformer():
    task = data.make_task("reverse", vocab=8, seq_len=6)
    model = models.SequenceModel(8, 6, depth=2, width=16, wiring="post")
    return model, dict(data=task, steps=20, batch=16, warmup=5, betas=(0.9, 0.98),
                       update_batch=task.batch(8, torch.Generator().manual_seed(1))[0])


SCENARIOS = {"digits_net": digits_net, "noisy_mlp": noisy_mlp, "transformer": transformer}


@pytest.fixture(autouse=True)
def record_every_call(monkeypatch):
    """These trainings are quick: record them whatever their size (test_a_quick_call_on_a_big_model... aside)."""
    monkeypatch.setattr(runcache, "WORTH", float("inf"))


@pytest.fixture
def kernel(monkeypatch, tmp_path):
    """start(kind): a fresh kernel in the solution copy's ("record") or the learner copy's ("replay") mode."""
    def start(kind: str | None):
        if kind is None:
            monkeypatch.delenv(runcache.VARIABLE, raising=False)
        else:
            monkeypatch.setenv(runcache.VARIABLE, f"{kind}:{tmp_path}")
        monkeypatch.setattr(runcache, "_cells", hashlib.sha256())
        monkeypatch.setattr(runcache, "_current", [None, 0])
    start.folder = tmp_path
    return start


def program(scenario: str, first_cell: str = "import normlab\nnormlab.setup()", build=None):
    """Two cells, as a lesson runs them: the set-up (seeds), then the cell that builds and trains."""
    runcache.cell(first_cell)
    env.seed_all(0)
    runcache.cell(f"model, kwargs = {scenario}()\nhistory = train(model, **kwargs)")
    model, kwargs = (build or SCENARIOS[scenario])()
    history = train(model, progress=False, **kwargs)
    return after(model, history)


def after(model, history) -> dict:
    """Everything a later cell could see of the training."""
    return {"history": history,
            "tensors": {k: t.detach().clone() for k, t in {**dict(model.named_parameters()),
                                                          **dict(model.named_buffers())}.items()},
            "grads": {k: None if p.grad is None else p.grad.clone() for k, p in model.named_parameters()},
            "modes": {k: m.training for k, m in model.named_modules()},
            "generators": {k: g.get_state() for k, g in runcache._generators(model).items()},
            "next draws": (torch.rand(4), np.random.rand(2), random.random())}


def assert_same(a: dict, b: dict) -> None:
    assert a["history"] == b["history"]
    assert a["history"].losses, "the history is empty"
    for part in ("tensors", "grads", "generators"):
        assert a[part].keys() == b[part].keys(), part
        for k in a[part]:
            x, y = a[part][k], b[part][k]
            assert (x is None) == (y is None), f"{part} {k}"
            assert x is None or torch.equal(x, y), f"{part} {k} differs"
    assert a["modes"] == b["modes"]
    ta, na, ra = a["next draws"]
    tb, nb, rb = b["next draws"]
    assert torch.equal(ta, tb) and np.array_equal(na, nb) and ra == rb, "the global random streams differ"


def replays(folder) -> list[str]:
    log = folder / runcache.LOG
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def no_loop(*args, **kwargs):
    raise AssertionError("the training loop ran: nothing was replayed")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_replayed_training_leaves_the_kernel_as_the_training_does(kernel, monkeypatch, scenario):
    kernel("record")
    trained = program(scenario)
    assert list(kernel.folder.glob("*.pt")), "the solution copy recorded nothing"
    kernel("replay")
    monkeypatch.setattr(train_module, "_loop", no_loop)
    replayed = program(scenario)
    assert len(replays(kernel.folder)) == 1
    assert_same(trained, replayed)


def test_the_comparison_fails_when_the_replay_leaves_a_random_stream_out(kernel, monkeypatch):
    """The check above can fail: a replay that does not put the global random states back is caught
    (the noisy MLP's dropout draws from torch's global stream)."""
    kernel("record")
    trained = program("noisy_mlp")
    kernel("replay")
    put_back = runcache._put_back

    def forgetful(model, saved):
        state = torch.get_rng_state()
        history = put_back(model, saved)
        torch.set_rng_state(state)
        return history
    monkeypatch.setattr(runcache, "_put_back", forgetful)
    with pytest.raises(AssertionError, match="random streams"):
        assert_same(trained, program("noisy_mlp"))


def test_nothing_is_replayed_after_a_cell_that_differs(kernel):
    """A learner copy's exercise cells differ from the solution's: a training there, even of a model with
    the same class name and the same weights, trains (the program so far is part of the key)."""
    kernel("record")
    program("digits_net")
    kernel("replay")
    program("digits_net", first_cell="import normlab\nnormlab.setup()\nx = 1  # a learner's edit")
    assert replays(kernel.folder) == []


def test_comments_and_a_prompts_choice_cell_are_not_the_program(kernel):
    """The learner copy's collapsed cells open with a comment line and its choice cells await the widget
    (``await predict.ask(...)``) where the solution copy's do not: neither computes anything, so the
    training after them is the solution copy's and is replayed (a code edit is not: the test above)."""
    ask = 'from normlab.widgets import predict\npredict.ask("01", "depth-std")'
    kernel("record")
    runcache.cell(ask)
    program("digits_net")
    kernel("replay")
    runcache.cell("# 先想一想 (predict first)：选一个预测。\nfrom normlab.widgets import predict\nawait predict.ask(\"01\", \"depth-std\")")
    program("digits_net", first_cell="# 这一格的代码在你预测之后展开\nimport normlab\nnormlab.setup()  # set-up")
    assert len(replays(kernel.folder)) == 1


def test_a_learners_own_class_of_the_same_name_is_not_replayed(kernel):
    """Even in the same cells (the history already tells them apart in a real learner copy): two kernels'
    ``Net`` with the same name and weights but another forward are another model."""
    class Net(nn.Sequential):
        pass

    def solution():
        torch.manual_seed(0)
        return Net(nn.Linear(64, 16), nn.Tanh(), nn.Linear(16, 10)), dict(data=(DIGITS[0], DIGITS[1]), steps=5)

    class Learner(nn.Sequential):             # same layers, same weights; another class
        def forward(self, x):
            return super().forward(x) * 2
    Learner.__qualname__ = Net.__qualname__

    def learner():
        torch.manual_seed(0)
        return Learner(nn.Linear(64, 16), nn.Tanh(), nn.Linear(16, 10)), dict(data=(DIGITS[0], DIGITS[1]), steps=5)

    kernel("record")
    program("digits_net", build=solution)
    kernel("replay")
    program("digits_net", build=learner)
    assert replays(kernel.folder) == []


def test_other_inputs_are_not_replayed(kernel):
    """Same cells, other weights (e.g. a different seed upstream): the training runs."""
    kernel("record")
    program("digits_net")
    kernel("replay")

    def other():
        model, kwargs = digits_net()
        with torch.no_grad():
            model.head.bias.add_(1e-6)
        return model, kwargs
    program("digits_net", build=other)
    assert replays(kernel.folder) == []


def test_a_training_whose_effects_reach_further_is_never_recorded(kernel):
    """A callback, a hook, or a module attribute the training changes: not recorded, so never replayed."""
    kernel("record")
    runcache.cell("cell")
    model, kwargs = digits_net()
    seen = []
    train(model, progress=False, after_backward=seen.append, **kwargs)
    handle = model.head.register_forward_hook(lambda m, i, o: seen.append(1))
    train(model, progress=False, **kwargs)
    handle.remove()

    class Counting(nn.Linear):
        def forward(self, x):
            self.calls = getattr(self, "calls", 0) + 1
            return super().forward(x)
    train(nn.Sequential(Counting(64, 10)), (DIGITS[0], DIGITS[1]), 5, progress=False)
    assert len(seen) > 25
    assert not list(kernel.folder.glob("*.pt"))


def test_off_unless_the_test_run_sets_it(kernel):
    kernel(None)
    assert runcache.mode() is None
    program("digits_net")
    assert not list(kernel.folder.iterdir())


def test_deepnorm_first_step_is_replayed_exactly(kernel, monkeypatch):
    """05's other heavy measurement (one backward and one Adam step at initialisation) goes through the same
    replay: its result and the model it leaves behind are the measurement's own, bit for bit."""
    from normlab.lessons import deepnorm

    def run():
        runcache.cell("import normlab\nnormlab.setup()")
        env.seed_all(0)
        runcache.cell("r = deepnorm.first_step(deepnorm.variant_model('post', 6), x, y, x_u)")
        model = deepnorm.variant_model("post", 6, seed=0)
        x, y = DIGITS[0][:64], DIGITS[1][:64]
        result = deepnorm.first_step(model, x, y, DIGITS[0][64:96])
        return result, after(model, train_module.History(losses=[result["update"]]))

    kernel("record")
    measured, left = run()
    kernel("replay")
    monkeypatch.setattr(deepnorm, "_first_step", no_loop)
    replayed, left_again = run()
    assert replays(kernel.folder) == [line for line in replays(kernel.folder) if "first_step" in line] != []
    assert measured == replayed
    assert_same(left, left_again)


def test_a_quick_call_on_a_big_model_is_not_recorded(kernel, monkeypatch):
    """Saving and loading its tensors would cost more than the call: it simply runs again. WORTH set to
    10 MB/s here (the course's 100 MB/s made the call's time, one step on 4096 x 4096 weights, the margin:
    on a machine at load 12 the step took longer than 0.1 s per 10 MB and was recorded)."""
    monkeypatch.setattr(runcache, "WORTH", 10e6)
    kernel("record")
    runcache.cell("cell")
    big = nn.Sequential(nn.Linear(64, 4096), nn.Linear(4096, 4096), nn.Linear(4096, 10))     # 70 MB of weights
    train(big, (DIGITS[0], DIGITS[1]), 1, progress=False)
    assert not list(kernel.folder.glob("*.pt"))
    program("digits_net")                                       # a real training of a small net still is
    assert list(kernel.folder.glob("*.pt"))


def test_a_module_that_holds_its_parent_is_keyed_without_recursing(kernel):
    """A submodule keeping a plain reference to its parent (a cycle) is keyed without recursing; it is not
    recorded, since what the attribute holds changes with the training (the safe side)."""
    kernel("record")
    runcache.cell("cell")
    model = nn.Sequential(nn.Linear(64, 10))
    object.__setattr__(model[0], "owner", model)         # a plain attribute, not a registered submodule
    assert runcache.key(model, ()) is not None
    assert len(train(model, (DIGITS[0], DIGITS[1]), 3, progress=False).losses) == 3
    assert not list(kernel.folder.glob("*.pt"))


def test_a_measurement_without_a_model_is_replayed_exactly(kernel, monkeypatch):
    """runcache.result (06's ffn_grads: models built from seeds inside the call): the replay returns the
    measurement's own result bit for bit and leaves the global random streams where the measurement
    left them; the same call with another input, or after a cell that differs, is measured again."""
    from normlab.lessons import placement

    task = data.make_task("reverse", vocab=8, seq_len=6)

    def run(width=16, first="import normlab\nnormlab.setup()"):
        runcache.cell(first)
        env.seed_all(0)
        runcache.cell("g = placement.ffn_grads(task, 'post', 3, width=16, seeds=(0, 1))")
        torch.rand(3)                                        # the program draws before the call too
        out = placement.ffn_grads(task, "post", 3, width=width, seeds=(0, 1))
        return out, (torch.rand(4), np.random.rand(2), random.random())

    kernel("record")
    measured, draws = run()
    kernel("replay")
    monkeypatch.setattr(placement, "_ffn_grads", no_loop)
    replayed, draws_again = run()
    assert [line.split("\t")[1] for line in replays(kernel.folder)] == ["placement.ffn_grads"]
    assert measured == replayed and measured[0] and measured[1]
    assert torch.equal(draws[0], draws_again[0]) and np.array_equal(draws[1], draws_again[1]) and draws[2] == draws_again[2]
    for other in (dict(width=24), dict(first="import normlab\nnormlab.setup()\nx = 1")):
        kernel("replay")
        with pytest.raises(AssertionError, match="nothing was replayed"):
            run(**other)


def test_the_sync_batchnorm_demo_is_replayed_not_spawned_again(kernel, monkeypatch):
    """02's two-process demo goes through runcache.result: recorded once (here a stand-in for the two
    processes), the learner copy gets its result back without starting them, for the same x only."""
    from normlab.lessons import sync_bn

    spawned = []

    def fake_spawn(x, world):
        spawned.append(world)
        return [{"local_mean": x[i::world].mean(0)} for i in range(world)]

    def run(x):
        runcache.cell("import normlab\nnormlab.setup()")
        runcache.cell("ranks = sync_batchnorm_demo(x, world=2)")
        return sync_bn.sync_batchnorm_demo(x, world=2)

    x = torch.randn(8, 3)
    monkeypatch.setattr(sync_bn, "_spawn", fake_spawn)
    kernel("record")
    measured = run(x)
    kernel("replay")
    replayed = run(x)
    assert spawned == [2] and torch.equal(measured[0]["local_mean"], replayed[0]["local_mean"])
    kernel("replay")
    run(x + 1)
    assert spawned == [2, 2]                                  # another x: the processes run again
