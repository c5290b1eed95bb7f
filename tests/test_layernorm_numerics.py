"""Lesson 03: normlab.lessons.layernorm (variance algorithms rounded step by step) against float64
NumPy, torch.nn.functional and hand-computed values; normlab.lessons.invariance against Ba et al.
2016 / Zhang & Sennrich 2019 Table 1 typed here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from normlab import variants
from normlab.lessons import invariance
from normlab.lessons import layernorm as nm

METHODS = list(nm.VARIANCE_METHODS.values())


@pytest.mark.parametrize("method", METHODS)
def test_variance_matches_numpy_in_float64(method):
    rng = np.random.default_rng(0)
    a = rng.normal(2.0, 3.0, size=(3, 4, 50))
    got = method(torch.from_numpy(a)).numpy()
    np.testing.assert_allclose(got, a.var(axis=-1), rtol=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_variance_by_hand(method):
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0]], dtype=torch.float64)
    torch.testing.assert_close(method(x), torch.tensor([1.25, 0.0], dtype=torch.float64))  # mean 2.5: (2.25+.25)*2/4


def test_sequential_mean_rounds_at_every_step():
    # float16 has spacing 2 at 2048: 2048 + 1 rounds back to 2048 (ties to even), so the ones vanish
    x = torch.tensor([2048.0] + [1.0] * 7, dtype=torch.float16)
    assert nm.sequential_mean(x).item() == 2048.0 / 8
    assert nm.sequential_mean(x.float()).item() == (2048.0 + 7) / 8
    assert x.float().mean().item() == (2048.0 + 7) / 8                     # torch's mean accumulates in float32


def test_one_pass_cancels_with_a_large_offset_and_the_others_do_not():
    torch.manual_seed(0)
    x = (torch.randn(4, 1024, dtype=torch.float64) + 1e4).float()
    truth = x.double().var(dim=-1, unbiased=False)
    rel = {name: ((f(x).double() - truth).abs() / truth).max().item() for name, f in nm.VARIANCE_METHODS.items()}
    one, two, wel = rel["one_pass"], rel["two_pass"], rel["welford"]
    assert one > 0.5 and two < 1e-4 and wel < 1e-3, rel


def test_half_precision_accumulators_overflow_but_welford_does_not():
    torch.manual_seed(0)
    x = (torch.randn(2, 1024) + 300).half()             # x^2 ~ 9e4 > 65504, sum ~ 3e5 > 65504
    assert not torch.isfinite(nm.variance_one_pass(x)).any()
    assert not torch.isfinite(nm.variance_two_pass(x)).any()
    assert torch.isfinite(nm.variance_welford(x)).all()
    truth = x.double().var(dim=-1, unbiased=False)
    for f in (nm.variance_two_pass, nm.variance_welford):     # float32 accumulators fix both
        torch.testing.assert_close(f(x, torch.float32).double(), truth, rtol=1e-4, atol=0)


@pytest.mark.parametrize("name", ["one_pass", "two_pass", "welford"])
def test_layer_norm_with_each_variance_method_matches_torch_in_float64(name):
    torch.manual_seed(1)
    x = torch.randn(5, 16, dtype=torch.float64) * 0.01 + 3
    for eps in (1e-5, 1e-3):
        y = variants.layer_norm(x, eps, variance=nm.VARIANCE_METHODS[name])
        torch.testing.assert_close(y, F.layer_norm(x, (16,), eps=eps), rtol=1e-6, atol=1e-6)


def test_one_pass_layer_norm_fails_in_float32_with_a_large_offset():
    torch.manual_seed(2)
    x64 = torch.randn(3, 256, dtype=torch.float64) + 1e4
    ref = F.layer_norm(x64, (256,), eps=1e-5)
    x = x64.float()
    good = variants.layer_norm(x, 1e-5, variance=nm.variance_two_pass).double()
    bad = variants.layer_norm(x, 1e-5, variance=nm.variance_one_pass).double()
    assert (good - ref).abs().max() < 1e-2 and not ((bad - ref).abs().max() < 0.1)   # nan or far off


def test_method_labels_name_every_method_for_display():
    assert set(nm.METHOD_LABELS) == set(nm.VARIANCE_METHODS) == {"one_pass", "two_pass", "welford"}
    assert all(k.isidentifier() for k in nm.VARIANCE_METHODS)             # keys are identifiers, labels for display


def test_constant_row_gives_zeros_with_eps_and_nan_without():
    x = torch.full((1, 8), 3.0, dtype=torch.float16)
    assert torch.equal(variants.layer_norm(x, 1e-5), torch.zeros_like(x))
    assert torch.isnan(variants.layer_norm(x, 1e-12)).all()                # 1e-12 is 0 in float16: 0/0
    assert torch.equal(F.layer_norm(x.float(), (8,), eps=1e-12), torch.zeros(1, 8))


def test_representable_and_absorbed_eps():
    assert nm.representable(1e-12, torch.float16) == 0.0
    assert nm.representable(1e-12, torch.bfloat16) == pytest.approx(1e-12, rel=0.01)
    assert nm.representable(1e-5, torch.float16) == pytest.approx(1e-5, rel=0.01)   # a subnormal
    assert not nm.eps_changes_var(1.0, 1e-12, torch.float32)                   # ulp(1) = 1.19e-7
    assert nm.eps_changes_var(1e-3, 1e-5, torch.float16)                       # ulp(1e-3) ~ 9.5e-7
    assert not nm.eps_changes_var(1e-3, 1e-12, torch.bfloat16)


def test_bad_input_gets_a_clear_error():
    with pytest.raises(TypeError, match="浮点"):
        nm.variance_two_pass(torch.arange(4))
    with pytest.raises(ValueError, match="最后一维"):
        nm.variance_welford(torch.zeros(3, 0))


# --- invariance (lessons 03 and 04): Ba et al. 2016 Table 1, Zhang & Sennrich 2019 Table 1 --------

# The papers' Table 1 (1 = invariant), typed here, columns: W rescale, W recenter, W-vector rescale,
# dataset rescale, dataset recenter, single-case rescale.
PAPER = {"batchnorm": (1, 0, 1, 1, 1, 0), "layernorm": (1, 1, 0, 1, 0, 1), "rmsnorm": (1, 0, 0, 1, 0, 1)}
COLUMNS = ("W rescale", "W recenter", "W-vector rescale", "dataset rescale", "dataset recenter", "single-case rescale")


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_measured_invariance_is_the_papers_table(seed):
    assert tuple(invariance.PAPER_COLUMNS[t] for t in invariance.TRANSFORMS) == COLUMNS
    m = invariance.measure(seed=seed)
    for norm, row in PAPER.items():
        assert tuple(int(m[(norm, t)] < 1e-9) for t in invariance.TRANSFORMS) == row, norm
        assert all(m[(norm, t)] > 1e-3 for t, inv in zip(invariance.TRANSFORMS, row) if not inv), norm
    assert invariance.pattern(m) == PAPER and invariance.TABLE1 == PAPER


def test_invariance_table_and_names():
    """One vocabulary for lessons 03 and 04: every transformation named, identifiers as keys."""
    assert set(invariance.LABELS) == set(invariance.PAPER_COLUMNS) == set(invariance.TRANSFORMS)
    assert all(t.isidentifier() for t in invariance.TRANSFORMS)
    m = invariance.measure(seed=3)
    # a tolerance above every change marks everything invariant; one below every change, nothing
    assert all(all(row) for row in invariance.pattern(m, tol=1e9).values())
    assert not any(any(row) for row in invariance.pattern(m, tol=0.0).values())
    text = str(invariance.table(m))
    assert "数据集缩放 x → 3x" in text and "W-vector rescale" in text
    assert text.count("✓ (") == sum(map(sum, PAPER.values()))


def test_dataset_rescale_is_a_global_scalar_and_w_vector_rescale_one_feature():
    """Ba et al. Table 1's names: x -> 3x scales every sample by one scalar; W_0 -> 3 W_0 scales feature 0 of h."""
    g = torch.Generator().manual_seed(0)
    W, x = torch.randn(5, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    W2, x2 = invariance.transformed(W, x, "dataset_rescale", g)
    assert torch.equal(W2, W) and torch.allclose(x2, 3 * x)
    W2, x2 = invariance.transformed(W, x, "w_vector_rescale", g)
    h, h2 = x @ W.T, x2 @ W2.T
    assert torch.allclose(h2[:, 0], 3 * h[:, 0]) and torch.allclose(h2[:, 1:], h[:, 1:])
    W2, x2 = invariance.transformed(W, x, "w_recenter", g)                 # every row of W + the same v
    d = W2 - W
    assert torch.allclose(d, d[:1].expand_as(d)) and torch.equal(x2, x)
    with pytest.raises(ValueError, match="transformation"):
        invariance.transformed(W, x, "dataset rescale", g)
