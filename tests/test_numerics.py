"""normlab.numerics against float64 NumPy, torch.nn.functional and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from normlab import numerics as nm

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


def test_running_sum_rounds_at_every_step():
    # float16 has spacing 2 at 2048: 2048 + 1 rounds back to 2048 (ties to even), so the ones vanish
    x = torch.tensor([2048.0] + [1.0] * 7, dtype=torch.float16)
    assert nm.running_mean(x).item() == 2048.0 / 8
    assert nm.running_mean(x.float()).item() == (2048.0 + 7) / 8


def test_one_pass_cancels_with_a_large_offset_and_the_others_do_not():
    torch.manual_seed(0)
    x = (torch.randn(4, 1024, dtype=torch.float64) + 1e4).float()
    truth = x.double().var(dim=-1, unbiased=False)
    rel = {name: ((f(x).double() - truth).abs() / truth).max().item() for name, f in nm.VARIANCE_METHODS.items()}
    one, two, wel = rel.values()
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


def test_layer_norm_eps_inside_matches_torch():
    torch.manual_seed(1)
    x = torch.randn(5, 16, dtype=torch.float64) * 0.01
    for eps in (1e-5, 1e-3):
        torch.testing.assert_close(nm.layer_norm(x, eps), F.layer_norm(x, (16,), eps=eps))
    outside = nm.layer_norm_eps_outside(x, 1e-3)
    mu, sd = x.mean(-1, keepdim=True), x.std(-1, keepdim=True, unbiased=False)
    torch.testing.assert_close(outside, (x - mu) / (sd + 1e-3))
    assert (outside - F.layer_norm(x, (16,), eps=1e-3)).abs().max() > 0.1   # placement matters at small var


def test_constant_row_gives_zeros_with_eps_and_nan_without():
    x = torch.full((1, 8), 3.0, dtype=torch.float16)
    assert torch.equal(nm.layer_norm(x, 1e-5), torch.zeros_like(x))
    assert torch.isnan(nm.layer_norm(x, 1e-12)).all()                        # 1e-12 is 0 in float16: 0/0
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
