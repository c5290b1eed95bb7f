"""Lessons 06 and 01: normlab.lessons.placement, normlab.lessons.warmup and normlab.lessons.residuals,
checked by hand-built equivalents (forward passes written out block by block, hits counted in Python)."""

import math

import pytest
import torch
import torch.nn.functional as F

from normlab import record
from normlab.data import digits, make_task
from normlab.lessons import placement, residuals, warmup
from normlab.models import DigitsNet, SequenceModel
from normlab.train import History


@pytest.fixture(scope="module")
def task():
    return make_task("reverse", vocab=8, seq_len=6)


def _manual_forward(model, x, order):
    """Run the blocks in ``order`` (a list of block indices or tuples meaning 'in parallel')."""
    h = model.tok(x) + model.pos[: x.shape[1]]
    bl = model.stack.blocks
    for item in order:
        h = (h + sum(bl[i](h) - h for i in item)) if isinstance(item, tuple) else bl[item](h)
    return F.cross_entropy(model.head(model.stack.final_norm(h)).flatten(0, 1), x.flip(1).flatten()).item()


def test_parallel_and_skip_match_hand_written_forward(task):
    m = SequenceModel(8, 6, depth=4, width=16, wiring="pre", seed=1)
    x, y = task.batch(5, torch.Generator().manual_seed(0))
    assert placement.sequence_loss(m, x, y).item() == pytest.approx(_manual_forward(m, x, [0, 1, 2, 3]), rel=1e-6)
    assert placement.parallel_pair_loss(m, x, y, 1) == pytest.approx(_manual_forward(m, x, [0, (1, 2), 3]), rel=1e-6)
    assert placement.skip_layer_loss(m, x, y, 2) == pytest.approx(_manual_forward(m, x, [0, 1, 3]), rel=1e-6)
    assert placement.parallel_pair_loss(m, x, y, 1) != pytest.approx(placement.sequence_loss(m, x, y).item())


def test_parallel_pair_is_free_when_blocks_are_identity(task):
    # ReZero blocks are the identity at init: sequential, parallel and skipped all give one loss
    m = SequenceModel(8, 6, depth=3, width=16, wiring="pre", scaling="rezero", seed=0)
    x, y = task.batch(4, torch.Generator().manual_seed(0))
    full = placement.sequence_loss(m, x, y).item()
    assert placement.parallel_pair_loss(m, x, y, 0) == pytest.approx(full, rel=1e-6)
    assert placement.skip_layer_loss(m, x, y, 1) == pytest.approx(full, rel=1e-6)


def test_parallel_pair_refuses_post_norm(task):
    m = SequenceModel(8, 6, depth=3, width=16, wiring="post")
    x, y = task.batch(2)
    with pytest.raises(ValueError, match="Pre-Norm"):
        placement.parallel_pair_loss(m, x, y, 0)


def test_layer_similarity_by_hand():
    m = SequenceModel(8, 6, depth=2, width=16, wiring="pre")
    x = torch.randint(0, 8, (3, 6))
    cos, change = placement.layer_similarity(m, x)
    h0 = m.tok(x) + m.pos[:6]
    h1 = m.stack.blocks[0](h0)
    assert cos[0] == pytest.approx(F.cosine_similarity(h0, h1, dim=-1).mean().item(), rel=1e-5)
    assert change[0] == pytest.approx(((h1 - h0).norm(dim=-1) / h0.norm(dim=-1)).mean().item(), rel=1e-5)


def test_run_summary_by_hand():
    r = warmup.Run("x", "post", 0, 0, History(losses=[3.0, 1.0, 0.4, 0.2]))
    assert r.steps_to(0.5) == 2 and r.steps_to(0.1) is None and r.steps_to(0.5, within=2) is None
    assert r.final(last=2) == pytest.approx((0.4 + 0.2) / 2)
    assert r.final(last=2, at=3) == pytest.approx((1.0 + 0.4) / 2)


def test_warmup_run_trains_a_fresh_model_with_the_schedule(task):
    steps, T, lr = 30, 10, 3e-3
    run = warmup.run(task, "post", T, steps=steps, lr=lr, depth=2, width=16, batch=16, seed=1, progress=False)
    assert isinstance(run, warmup.Run) and (run.wiring, run.warmup, run.seed) == ("post", T, 1)
    assert run.lrs == pytest.approx([lr * min(1, (t + 1) / T) for t in range(steps)], rel=1e-12)
    assert len(run.losses) == steps
    # step 0 by hand: the weights from ``seed``, the first batch from a generator seeded 1000 + seed
    fresh = SequenceModel(8, 6, 2, 16, wiring="post", seed=1)
    x, y = task.batch(16, torch.Generator().manual_seed(1001))
    with torch.no_grad():
        first = F.cross_entropy(fresh(x).flatten(0, 1), y.flatten()).item()
        assert not torch.equal(run.model(x), fresh(x))                   # the returned model was trained
    assert run.losses[0] == pytest.approx(first, rel=1e-6)
    assert first == pytest.approx(math.log(8), abs=0.5)                  # near chance: ln(vocab)
    assert run.model.stack.blocks[0].mlp.wiring == "post"


def test_skip_and_lesion_accuracy_against_hits_counted_by_hand():
    _, _, x_te, y_te = digits()
    net = DigitsNet(3, 16, "pre").eval()
    # skipping nothing / skipping block i = running the layers by hand, counting hits in Python
    def manual(order):
        with torch.no_grad():
            h = net.embed(x_te)
            for i in order:
                h = net.stack.blocks[i](h)
            pred = net.head(net.stack.final_norm(h)).argmax(-1).tolist()
        return sum(p == t for p, t in zip(pred, y_te.tolist())) / len(pred)

    assert residuals.skip_accuracy(net, x_te, y_te) == pytest.approx(manual([0, 1, 2]))
    assert residuals.skip_accuracy(net, x_te, y_te, skip=[0, 2]) == pytest.approx(manual([1]))
    assert residuals.lesion_accuracy(net, x_te, y_te) == pytest.approx([manual([1, 2]), manual([0, 2]), manual([0, 1])])


def test_model_table_rows_cite_a_source_and_a_config_field():
    # every row: a paper section or a transformers file read at a named commit; eps with its config field
    names = [m.model for m in placement.MODELS]
    assert len(set(names)) == len(names)
    for m in placement.MODELS:
        assert "§" in m.source or "@" in m.source, m
        for ref in m.source.split(";"):
            ref = ref.strip()
            if ".py" in ref:
                assert all(len(c.split()[0].strip(",")) >= 7 for c in ref.split("@")[1:]), ref   # a commit id each
        if m.eps is None:
            assert m.eps_field is None and m.eps_text == "—"
        else:
            cls, _, attr = m.eps_field.partition(".")
            assert cls.endswith("Config") and attr in ("layer_norm_eps", "layer_norm_epsilon", "rms_norm_eps"), m
            assert float(m.eps_text) == m.eps


def test_model_table_against_installed_transformers():
    # the published defaults, read from the config classes themselves when transformers is installed
    transformers = pytest.importorskip("transformers")
    for m in placement.MODELS:
        fields = ([(m.eps_field, m.eps)] if m.eps_field else []) + list(m.checks)
        for field, expected in fields:
            cls_name, _, attr = field.partition(".")
            cls = getattr(transformers, cls_name, None)
            if cls is None:
                continue                                    # an older transformers without this model
            assert getattr(cls(), attr) == expected, (m.model, field)


def test_seed_table_reads_the_record_per_seed(monkeypatch):
    rec = {"runs": [{"seed": s, "threads": t, "values": {"warmup.post_no.final200": [2.5 + s / 100],
                                                         "warmup.post_no.steps_to_0.5": [warmup.NEVER if s else 392]}}
                    for s in (0, 1) for t in (1, 2)]}
    monkeypatch.setattr(warmup, "recorded", lambda name: rec)
    table = warmup.seed_table(keys={"warmup.post_no.final200": "final", "warmup.post_no.steps_to_0.5": "steps"})
    text = str(table)
    assert "2.5" in text and "2.51" in text and "392" in text and "从未" in text


def test_seed_summary_counts_every_seed_once_and_sees_a_seed_that_left_the_plateau(monkeypatch):
    """Seeds 0-4 (two thread counts each, counted once) and two extra seeds, one of which left the
    plateau at step 170: the counts say 6 of 7 on the plateau and 1 of 7 below 0.5 within 200 steps
    (the two rows add up to the seeds); a failed run is not counted."""
    def values(seed, left):
        post_no = 170 if left else warmup.NEVER
        return {"warmup.post_no.final200": [0.2 if left else 2.6], "warmup.post_no.steps_to_0.5": [post_no],
                "warmup.post_wu.steps_to_0.5": [120 + seed], "warmup.pre_no.steps_to_0.5": [60],
                "warmup.post_wu_over_post_no.steps_to_0.5": [(120 + seed) / min(post_no, 401)]}
    runs = [{"seed": s, "threads": t, "ok": True, "values": values(s, False)} for s in range(5) for t in (1, 2)]
    extra = [{"seed": 5, "threads": 1, "ok": True, "values": values(5, False)},
             {"seed": 6, "threads": 1, "ok": True, "values": values(6, True)},
             {"seed": 7, "threads": 1, "ok": False, "values": {"warmup.post_no.final200": [0.1]}}]
    monkeypatch.setattr(warmup, "recorded", lambda name: {"runs": runs, "extra_runs": extra})
    rows = {r[0]: r[1:] for r in warmup.seed_summary().rows}
    assert rows["不预热的 Post-LN：200 步内一直没降到 0.5 以下（平台上）"][0] == "6 / 7"
    assert rows["不预热的 Post-LN：200 步内降到 0.5 以下"] == ["1 / 7", "第 170–170 步"]
    assert rows["同一个种子：预热后比不预热早降到 0.5 以下"][0] == "7 / 7"
    assert rows["预热后的 Post-LN：200 步内降到 0.5 以下"] == ["7 / 7", "第 120–126 步"]


def test_record_helpers_without_a_record(monkeypatch):
    def missing(name):
        raise FileNotFoundError(name)
    monkeypatch.setattr(warmup, "recorded", missing)
    monkeypatch.setattr(record, "recorded", missing)
    assert "no sweep record" in warmup.seed_table()
    assert "no sweep record" in warmup.seed_summary()
    assert "no sweep record" in placement.record_ranges(["a"], ["A"])


def test_record_ranges_shows_the_extra_seeds_beside_seeds_0_to_4(monkeypatch):
    runs = [{"seed": s, "threads": t, "values": {"k": [1.0 + s]}} for s in range(5) for t in (1, 2)]
    extra = [{"seed": s, "threads": 1, "values": {"k": [10.0 + s]}} for s in range(5, 25)]
    monkeypatch.setattr(record, "recorded", lambda name: {"runs": runs, "extra_runs": extra})
    text = str(placement.record_ranges(["k"], ["K"]))
    # seeds 0-4: 1 .. 3 .. 5; extra seeds 5-24: 15 .. 24.5 .. 34 (computed by hand)
    assert all(x in text for x in ("15", "24.5", "34", "5–24")) and " 3 " in text, text
    monkeypatch.setattr(record, "recorded", lambda name: {"runs": runs})
    text = str(placement.record_ranges(["k"], ["K"]))
    assert "24.5" not in text and "10" in text                                # runs: 10
    assert "not yet in the sweep record" in placement.record_ranges(["k", "new"], ["K", "N"])
