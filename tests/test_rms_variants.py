"""RMSNorm variants against their definitions (torch's F.rms_norm, hand formulas), the invariance
table against Zhang & Sennrich 2019 Table 1, and the benchmark's bookkeeping."""

from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from normlab import bench, invariance, rms_variants


def test_llama_and_t5_equal_torch_in_float32():
    torch.manual_seed(0)
    x, w = torch.randn(3, 16) * 2, torch.randn(16)
    ref = F.rms_norm(x, (16,), w, 1e-6)
    assert torch.allclose(rms_variants.llama(x, w), ref, atol=1e-6)
    assert torch.allclose(rms_variants.t5(x, w), ref, atol=1e-6)


def test_llama_casts_back_before_the_weight_and_gemma_after():
    torch.manual_seed(1)
    x, w = (torch.randn(4, 32) * 3).to(torch.bfloat16), (torch.randn(32) * 0.3 + 1).to(torch.bfloat16)
    normed = F.rms_norm(x.float(), (32,), None, 1e-6)
    assert torch.equal(rms_variants.llama(x, w), w * normed.to(torch.bfloat16))
    assert torch.equal(rms_variants.gemma(x, w - 1), (normed * (1 + (w - 1).float())).to(torch.bfloat16))


def test_t5_casts_only_for_a_half_precision_weight():
    torch.manual_seed(2)
    xb = (torch.randn(4, 32) * 3).to(torch.bfloat16)
    exact = F.rms_norm(xb.float(), (32,), None, 1e-6)
    half = rms_variants.t5(xb, torch.ones(32, dtype=torch.bfloat16))
    full = rms_variants.t5(xb, torch.ones(32))
    assert half.dtype == torch.bfloat16 and full.dtype == torch.float32    # T5LayerNorm's rule
    assert torch.allclose(full, exact, atol=1e-6) and torch.allclose(half.float(), exact, atol=2e-2)


def test_gemma_zero_weight_is_identity_gain():
    x = torch.randn(2, 8)
    assert torch.allclose(rms_variants.gemma(x, torch.zeros(8)), F.rms_norm(x, (8,), None, 1e-6), atol=1e-6)


def test_partial_rms_uses_the_first_features_only():
    x = torch.randn(2, 16)
    out = rms_variants.partial(x, torch.ones(16), p=0.25, eps=0.0)
    rms = x[:, :4].pow(2).mean(-1, keepdim=True).sqrt()
    assert torch.allclose(out, x / rms)
    # the authors' rmsnorm_torch.py: partial_size = int(d * p) (floor: 10 * 0.25 -> 2), x / (rms + eps)
    x, w = torch.randn(3, 10), torch.randn(10)
    ref = x / (x[:, :2].norm(2, dim=-1, keepdim=True) * 2 ** -0.5 + 1e-8) * w
    assert torch.allclose(rms_variants.partial(x, w, p=0.25), ref)


def test_eps_outside_matches_the_reference_formula_and_differs_from_torch():
    x = torch.randn(2, 8) * 1e-4
    ref = x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)
    assert torch.allclose(rms_variants.eps_outside(x, torch.ones(8), 1e-6), ref)
    assert not torch.allclose(ref, F.rms_norm(x, (8,), None, 1e-6), atol=1e-2)


def test_naive_overflows_in_float16_and_upcast_does_not():
    x = (torch.ones(1, 8) * 300).to(torch.float16)
    assert rms_variants.naive(x, torch.ones(8, dtype=torch.float16)).abs().max() < 0.1   # inf RMS -> zeros
    assert torch.allclose(rms_variants.llama(x, torch.ones(8, dtype=torch.float16)).float(), torch.ones(1, 8), atol=1e-3)


def test_invariance_table_is_the_papers():
    # Zhang & Sennrich 2019, Table 1 (also the bzhangGo/rmsnorm README), columns in TRANSFORMS order
    paper = {"batchnorm": [1, 0, 1, 1, 1, 0], "layernorm": [1, 1, 0, 1, 0, 1], "rmsnorm": [1, 0, 0, 1, 0, 1]}
    for seed in (0, 1):
        m = invariance.measure(seed=seed)
        for norm, row in paper.items():
            assert [int(m[(norm, t)] < 1e-9) for t in invariance.TRANSFORMS] == row, norm


def test_bench_ratio_and_timing_bookkeeping():
    calls = []
    samples = bench.timeit(lambda: calls.append(1), warmup=2, repeats=4, inner=3)
    assert len(samples) == 4 and len(calls) == 2 + 4 * 3
    res = bench.run(shape=(4, 64), repeats=3)
    assert set(res) <= set(bench.BYTES)                                  # every contender's bytes are stated
    assert {"copy x.clone()", "F.layer_norm", "F.rms_norm", "normlab LayerNorm (readable)",
            "normlab RMSNorm (readable)", "Add + LayerNorm (unfused)", "Add + RMSNorm (unfused)"} <= set(res)
    assert math.isclose(res["copy x.clone()"]["ratio_to_copy"], 1.0)
    assert all(r["median_ms"] > 0 and r["iqr_ms"] >= 0 for r in res.values())
    text = str(bench.table(res))
    assert "× copy" in text and "bytes/elem" in text and "F.rms_norm" in text


def test_bench_ratio_is_time_over_the_copy_of_the_same_run(monkeypatch):
    # contenders of known cost: a "copy" that sleeps 5 ms and one three times slower
    monkeypatch.setattr(bench, "contenders", lambda x, r, compile_fused=False: {
        "copy x.clone()": lambda: time.sleep(0.005), "slow": lambda: time.sleep(0.015)})
    res = bench.run(shape=(2, 8), repeats=3, inner=1)
    assert 2.0 < res["slow"]["ratio_to_copy"] < 4.0
    assert res["copy x.clone()"]["median_ms"] >= 5.0


def test_gpu_benchmark_is_optional_and_skips_with_a_clear_error():
    if torch.cuda.is_available():
        res = bench.run(shape=(4, 64), repeats=3, device="cuda")
        assert res["copy x.clone()"]["ratio_to_copy"] == 1.0
    else:
        import pytest
        with pytest.raises(RuntimeError, match="CUDA not available"):
            bench.run(shape=(4, 64), device="cuda")


def test_invariance_pattern_table_and_names():
    """One vocabulary for lessons 03 and 04: every transformation named, the paper's pattern as data."""
    assert set(invariance.LABELS) == set(invariance.TRANSFORMS)
    m = invariance.measure(seed=3)
    assert invariance.pattern(m) == invariance.TABLE1
    # a tolerance above every change marks everything invariant; one below every change, nothing
    assert all(all(row) for row in invariance.pattern(m, tol=1e9).values())
    assert not any(any(row) for row in invariance.pattern(m, tol=0.0).values())
    text = str(invariance.table(m))
    assert "数据集缩放 x → 3x" in text and "W-vector rescale" in text and text.count("✓ (") == sum(map(sum, invariance.TABLE1.values()))


def test_dataset_rescale_is_a_global_scalar_and_w_vector_rescale_one_feature():
    """Ba et al. Table 1's names: x -> 3x scales every sample by one scalar; W_0 -> 3 W_0 scales feature 0 of h."""
    g = torch.Generator().manual_seed(0)
    W, x = torch.randn(5, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    W2, x2 = invariance.transformed(W, x, "dataset rescale", g)
    assert torch.equal(W2, W) and torch.allclose(x2, 3 * x)
    W2, x2 = invariance.transformed(W, x, "W-vector rescale", g)
    h, h2 = x @ W.T, x2 @ W2.T
    assert torch.allclose(h2[:, 0], 3 * h[:, 0]) and torch.allclose(h2[:, 1:], h[:, 1:])


def test_paired_ratio_compares_fastest_rounds_and_restores_threads():
    import time

    before = torch.get_num_threads()
    calls = []
    ratio = bench.paired_ratio(lambda: (calls.append("a"), time.sleep(0.004)), lambda: (calls.append("b"), time.sleep(0.002)),
                               rounds=5, threads=1)
    assert 1.5 < ratio < 3.0                                   # 4 ms over 2 ms: sleeps only ever run long
    assert calls == ["a", "b"] * 6                             # one untimed call each, then strictly alternating
    assert torch.get_num_threads() == before
    assert bench.unfused_over_fused(shape=(4, 256), rounds=3) > 0
