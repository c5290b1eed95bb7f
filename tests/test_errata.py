"""Each erratum's flawed function really differs from the reference, and each demo shows it.

References are independent of normlab: torch.nn modules, torch.nn.functional, autograd, or a
value computed by hand here.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import errata


def test_catalogue_ids_unique_and_complete():
    ids = [e.id for e in errata.ERRATA]
    assert len(ids) == len(set(ids))
    assert {e.doc for e in errata.ERRATA} == set("ABCDE")
    for e in errata.ERRATA:
        assert e.id.startswith(e.doc) and e.says and e.right and e.chapter[:2].isdigit()
    assert len(errata.catalogue().rows) == len(ids)
    assert all(r[0].startswith("C") for r in errata.catalogue("C").rows)


def test_unknown_id_and_doc_give_clear_errors():
    with pytest.raises(KeyError, match="勘误"):
        errata.get("Z9")
    with pytest.raises(ValueError, match="A-E"):
        errata.catalogue("F")


@pytest.mark.parametrize("eid", [e.id for e in errata.ERRATA])
def test_every_demo_runs_and_returns_numbers(eid):
    d = errata.demo(eid)
    assert d.rows and d.values and all(isinstance(v, float) for v in d.values.values())
    assert "<table>" in d._repr_html_()


# --- [A] -----------------------------------------------------------------------------------

def test_a1_residual_gain_is_product_of_jacobians():
    for c in (0.0, -0.9, 0.5):                                   # hand computation (1 + c)^10
        assert errata.residual_chain_grad(c) == pytest.approx((1 + c) ** 10, rel=1e-4)


def test_a1_random_mlp_gain_matches_the_jacobian_product_and_is_not_one():
    # one block: the measured multiplier is ||(I + J_F)^T u|| / ||u||, J_F from torch.autograd.functional
    width, g = 8, torch.Generator().manual_seed(30)
    x0 = torch.randn(16, width, generator=g)
    w1 = torch.randn(4 * width, width, generator=g) * math.sqrt(2 / width)
    w2 = torch.randn(width, 4 * width, generator=g) * math.sqrt(2 / (4 * width))
    u = torch.randn(16, width, generator=g)
    jac = torch.autograd.functional.jacobian(lambda x: x + F.relu(x @ w1.T) @ w2.T, x0)   # (16, w, 16, w)
    hand = (torch.einsum("ij,ijkl->kl", u, jac).norm() / u.norm()).item()
    assert errata.residual_mlp_gain(depth=1, width=width) == pytest.approx(hand, rel=1e-5)
    assert errata.residual_mlp_gain() > 20 and errata.residual_mlp_gain(gain=0.5) > 1.3   # [A] would say 1


def test_a2_no_running_stats_single_sample_gives_beta():
    flawed, ref = errata.NoRunningStatsBatchNorm(3), nn.BatchNorm1d(3)
    for _ in range(20):
        ref(torch.randn(16, 3) + 2)
    ref.eval()
    x = torch.randn(1, 3) + 2
    assert torch.equal(flawed(x), flawed.bias.detach().expand(1, 3))  # (x - x) / ... = 0 -> beta
    assert ref(x).abs().max() > 0.1
    with pytest.raises((IndexError, RuntimeError)):
        flawed(torch.randn(2, 3, 4))


def test_a3_eps_outside_differs_from_torch_only_for_small_inputs():
    ref = nn.LayerNorm(16, eps=1e-6, elementwise_affine=False)
    big, small = torch.randn(4, 16), torch.randn(4, 16) * 1e-3
    assert torch.allclose(errata.layer_norm_std_eps(big), ref(big), atol=1e-5)
    # hand: std s = 1e-3*sigma; ratio = sqrt(s^2 + 1e-6) / (s + 1e-6) is far from 1
    assert (errata.layer_norm_std_eps(small) - ref(small)).abs().max() > 0.3
    assert not hasattr(nn, "Parmaeter")


def test_a4_dtype_differs_from_nn_rmsnorm_only_with_a_float32_weight():
    x = torch.randn(2, 8).to(torch.bfloat16)
    ref = nn.RMSNorm(8, eps=1e-6)                                # float32 weight, as in the demo
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")                          # torch warns (once) about the mixed dtypes
        assert ref(x).dtype == torch.bfloat16
    assert errata.rms_norm_upcast_then_weight(x, ref.weight.detach()).dtype == torch.float32
    # a model cast to bfloat16 as a whole (weight bfloat16 too): same dtype, LLaMA's order is fine
    assert errata.rms_norm_upcast_then_weight(x, ref.weight.detach().bfloat16()).dtype == torch.bfloat16


def test_a5_runtime_beta_ratios_match_hand_computation():
    beta = (8 * 24) ** -0.25
    assert errata.ffn_branch_ratio(beta) == pytest.approx(1 / beta, rel=1e-4)
    assert errata.adam_effective_step(beta) == pytest.approx(beta, rel=1e-3)


def test_a6_arxiv_order():
    # the arXiv ids as listed on the papers' abstract pages; an id's first four digits are yymm of submission
    titles = {"1809.10853": "Adaptive Input Representations", "1906.01787": "Learning Deep Transformer Models",
              "2002.04745": "On Layer Normalization in the Transformer"}
    assert sorted(errata.ARXIV.values()) == sorted(titles)
    assert all(titles[aid] in paper for paper, aid in errata.ARXIV.items())
    earlier = sum(aid[:4] < "2002" for aid in titles)                   # submitted before Xiong et al.
    assert errata.demo("A6").values["earlier_papers"] == earlier == 2


def test_a7_formula_2_without_mean_is_rmsnorm_formula_1_is_not():
    x = torch.randn(6, 16) * 2 + 1
    with torch.no_grad():
        assert torch.allclose(errata.ln_formula_without_mean(x), nn.RMSNorm(16, eps=1e-6)(x), atol=1e-5)
        assert not torch.allclose(errata.bn_formula_without_mean(x), nn.RMSNorm(16, eps=1e-6)(x), atol=1e-1)
    # hand: (1) without mu divides each feature by its quadratic mean over the batch -> that mean becomes 1
    assert torch.allclose(errata.bn_formula_without_mean(x).pow(2).mean(0), torch.ones(16), atol=1e-4)
    y = x.clone()
    y[1:] *= 3
    assert not torch.allclose(errata.bn_formula_without_mean(x)[0], errata.bn_formula_without_mean(y)[0])
    assert torch.equal(errata.ln_formula_without_mean(x)[0], errata.ln_formula_without_mean(y)[0])


def test_a8_deepnorm_ln_is_plain_and_gradient_scales_with_beta_over_alpha():
    from normlab.blocks import MLP, Residual
    sub, alpha = MLP(8), 2.5
    x = torch.randn(4, 8)
    h = alpha * x + F.linear(F.relu(F.linear(x, sub.fc1.weight, sub.fc1.bias)), sub.fc2.weight, sub.fc2.bias)
    with torch.no_grad():                                         # reference: torch's layer_norm of alpha*x + G(x)
        assert torch.allclose(Residual(sub, 8, wiring="deepnorm", alpha=alpha)(x), F.layer_norm(h, (8,)), atol=1e-6)
    for N in (6, 96):                                             # hand: beta/alpha = (8N)^-1/4 / (2N)^1/4 = 1/(2 sqrt N)
        a, b = (2 * N) ** 0.25, (8 * N) ** -0.25
        assert b / a == pytest.approx(1 / (2 * math.sqrt(N)), rel=1e-12)
    g6, u6 = errata.deepnorm_probe(6, "deepnorm")
    g96, _ = errata.deepnorm_probe(96, "deepnorm")
    assert g6[0][0] / g96[0][0] == pytest.approx(math.sqrt(96 / 6), rel=0.1)    # so the gradient falls as 1/sqrt(N)
    for N, grads in ((6, g6), (96, g96)):                           # every block, fc1 and fc2: the same law
        ratio = 1 / (2 * math.sqrt(N))
        scaled = [gr / ratio for pair in grads for gr in pair]
        assert len(scaled) == 2 * N and max(scaled) / min(scaled) < 1.4
    assert u6 < errata.deepnorm_probe(6, "post")[1] / 3
    # the probe's gradients equal ones computed here with autograd on the same stack
    from normlab.blocks import build_stack
    stack = build_stack(6, width=32, wiring="deepnorm", sublayer="mlp", seed=0)
    gen = torch.Generator().manual_seed(300)
    xs, t = torch.randn(64, 32, generator=gen), torch.randn(64, 32, generator=gen)
    ws = [stack.blocks[0].mlp.sublayer.fc1.weight, stack.blocks[-1].mlp.sublayer.fc2.weight]
    gw = torch.autograd.grad(((stack(xs) - t) ** 2).mean(), ws)
    assert gw[0].norm().item() == pytest.approx(g6[0][0], rel=1e-5)
    assert gw[1].norm().item() == pytest.approx(g6[-1][1], rel=1e-5)


# --- [B] / [E] §1.3 -------------------------------------------------------------------------

def test_b1_grad_mode_batchnorm_vs_torch():
    flawed, ref = errata.GradModeBatchNorm(2), nn.BatchNorm1d(2)
    x = torch.randn(8, 2) * 3 + 1
    flawed(x), ref(x)
    flawed.eval(), ref.eval()
    y = flawed(torch.randn(8, 2) + 5)                            # eval(), but grad enabled
    assert y.mean().abs() < 1e-5                                 # still batch statistics
    assert "running_mean" in ref.state_dict() and not any("moving" in k for k in flawed.state_dict())
    # one step from (0, 1) with m = 0.9 old-value weight: hand computation, biased variance
    f2 = errata.GradModeBatchNorm(2)
    f2(x)
    assert torch.allclose(f2.moving_var, 0.9 + 0.1 * x.var(0, unbiased=False))
    r2 = nn.BatchNorm1d(2)
    r2(x)
    assert torch.allclose(r2.running_var, 0.9 + 0.1 * x.var(0, unbiased=True))
    assert torch.allclose(f2.moving_mean, r2.running_mean)      # 0.9-old == torch's 0.1-new


def test_b2_rmsnorm_has_gamma():
    assert [n for n, _ in nn.RMSNorm(8).named_parameters()] == ["weight"]
    assert errata.demo("B2").values["rms_params"] == 64


# --- [C] -------------------------------------------------------------------------------------

def test_c2_rezero_block_has_no_norm_and_is_x_plus_alpha_f():
    from normlab.blocks import MLP, Residual

    torch.manual_seed(0)
    x = torch.randn(5, 32)
    paper = Residual(MLP(32), 32, wiring="pre", norm="none", scaling="rezero")
    with torch.no_grad():
        paper.gain.fill_(0.7)
        sub = paper.sublayer
        hand = x + 0.7 * F.linear(F.relu(F.linear(x, sub.fc1.weight, sub.fc1.bias)), sub.fc2.weight, sub.fc2.bias)
        torch.testing.assert_close(paper(x), hand)                     # Bachlechner et al. 2020, eq. (1)
    d = errata.demo("C2").values
    assert d["paper_norm_params"] == 0
    assert d["c_norm_params"] == sum(p.numel() for p in nn.LayerNorm(32).parameters()) == 64
    assert d["identity_at_init"] == 0                                  # alpha = 0: both blocks start as identity


def test_c1_layerscale_drift_scales_with_init():
    small, tiny = errata.layerscale_drift(1e-5), errata.layerscale_drift(1e-6)
    assert small / tiny == pytest.approx(10, rel=0.01)            # linear in the init when small
    assert errata.layerscale_drift(0.1) > 1e3 * small
    # CaiT: init 1e-5 for the depth-24 models, 1e-6 for S36 (deit cait_models.py), 0.1 only up to depth 18
    assert errata.CAIT_INIT == {18: 0.1, 24: 1e-5, 36: 1e-6}
    v = errata.demo("C1").values
    assert v["drift_1e-05"] == pytest.approx(errata.layerscale_drift(errata.CAIT_INIT[24]), rel=1e-6)


def test_c3_runtime_multiplier_shrinks_adam_step():
    c = 1 / math.sqrt(200)
    assert errata.adam_effective_step(c) == pytest.approx(c, rel=1e-3)


def test_c4_source_c_powernorm_is_rmsnorm_and_batch_independent():
    x = torch.randn(4, 5, 16)
    assert torch.allclose(errata.powernorm_source_c(x, eps=0.0), F.rms_norm(x, (16,), eps=0.0), atol=1e-6)
    y = x.clone()
    y[1:] *= 7
    assert torch.equal(errata.powernorm_source_c(x)[0], errata.powernorm_source_c(y)[0])
    assert not torch.allclose(errata.powernorm_shen_train(x)[0], errata.powernorm_shen_train(y)[0])
    # Shen et al. without mean subtraction: per feature, quadratic mean over batch and tokens = 1
    assert torch.allclose(errata.powernorm_shen_train(x).pow(2).mean(dim=(0, 1)), torch.ones(16), atol=1e-3)


def test_c5_t5_norm_is_rmsnorm_not_layernorm():
    x = torch.randn(3, 16) + 2
    assert torch.allclose(errata.t5_norm(x), nn.RMSNorm(16, eps=1e-6)(x), atol=1e-6)
    assert not torch.allclose(errata.t5_norm(x), nn.LayerNorm(16, eps=1e-6)(x), atol=1e-2)


def test_c6_monitor_raises_and_hooks_give_true_stats():
    model = errata._tiny_model()
    x = torch.randn(4, 8)
    with pytest.raises(AttributeError):
        errata.monitor_like_source_c(model, x)
    stats = errata.layernorm_stats(model, x)
    h = model[0](x)                                              # hand: input of the first LayerNorm
    assert stats[0]["in_std"] == pytest.approx(h.std().item(), rel=1e-5)
    assert stats[0]["out_std"] == pytest.approx(model[1](h).std().item(), rel=1e-5)
    assert all(len(m._forward_hooks) == 0 for m in model.modules())


def test_c7_hooks_accumulate():
    d = errata.demo("C7").values
    assert (d["calls_after_1"], d["calls_after_2"], d["calls_after_3"]) == (8.0, 16.0, 24.0)


def test_c8_source_c_fused_is_many_ops_same_result():
    x, r = torch.randn(4, 32), torch.randn(4, 32)
    w, b = torch.randn(32), torch.randn(32)
    out = errata.add_layer_norm_source_c(x, r, w, b, eps=1e-5)
    assert torch.allclose(out, F.layer_norm(x + r, (32,), w, b, eps=1e-5), atol=1e-5)
    assert errata.count_torch_calls(lambda: errata.add_layer_norm_source_c(x, r, w, b)) >= 6
    assert errata.count_torch_calls(lambda: F.layer_norm(x + r, (32,), w, b)) <= 2


def test_c9_eps_underflows_in_half():
    assert float(torch.tensor(1e-12, dtype=torch.float16)) == 0.0
    d = errata.demo("C9").values
    assert d["nan_1e-12"] == 1.0 and d["nan_1e-5"] == 0.0


# --- [D] -------------------------------------------------------------------------------------

def test_d1_unbiased_var_ratio():
    d = errata.demo("D1").values
    assert d["ln_ratio"] == pytest.approx(math.sqrt(7 / 8), rel=1e-3)
    assert d["bn_ratio"] == pytest.approx(math.sqrt(3 / 4), rel=1e-3)


def test_d2_momentum_mixup_equals_torch_momentum_09_and_keeps_graph():
    flawed, ref09 = errata.MomentumMixupBatchNorm(3), nn.BatchNorm1d(3, momentum=0.9)
    lin = nn.Linear(3, 3)
    for _ in range(3):
        h = lin(torch.randn(8, 3))
        flawed(h), ref09(h.detach())
    assert torch.allclose(flawed.running_mean, ref09.running_mean, atol=1e-6)
    assert flawed.running_mean.grad_fn is not None and ref09.running_mean.grad_fn is None


def test_d3_preln_last_grad_decreases_with_depth():
    assert errata.demo("D3").values["slope"] < -0.2                # [D] claims +0.5


def test_d4_folded_batchnorm_matches_torch():
    lin, bn = nn.Linear(6, 4), nn.BatchNorm1d(4)
    bn(lin(torch.randn(16, 6)).detach() * 3)
    with torch.no_grad():
        bn.weight.fill_(1.5)
    bn.eval()
    x = torch.randn(5, 6)
    with torch.no_grad():
        assert torch.allclose(errata.fold_batchnorm(lin, bn)(x), bn(lin(x)), atol=1e-5)


def test_d4_is_a_claim_with_both_sides_measured():
    assert "D4" not in {e.id for e in errata.ERRATA}             # a claim of degree, not an erratum
    assert any(c[0].startswith("[D] 知识总结") and "bn_cost" in c[2] for c in errata.CLAIMS)
    v = errata.bn_cost(batch=64, d_in=16, d_out=32).values
    assert v["fold_rel_diff"] < 1e-5
    assert v["train_step_ratio"] > 1.0                           # training pays for BN's reductions and backward
    assert 0.3 < v["fold_vs_linear"] < 3                          # the folded layer is a plain Linear


def test_timing_pitfalls_bn_is_built_but_never_timed():
    v = errata.timing_pitfalls(shape=(2, 8, 16), loops=2, rounds=3).values
    assert v["bn_calls"] == 0 and v["ln_calls"] == 1 + 15 + 2 * 3   # first call, 15 singles, the naive loops
    assert v["naive_ratio_min"] <= v["naive_ratio_max"]


def test_d5_preln_stream_grows_and_the_final_norm_resets_it():
    assert errata.preln_stream_growth(24) > 2 * errata.preln_stream_growth(6)
    x = torch.randn(64, 32)                                      # hand: LN(.) rows have mean 0, var 1
    y = F.layer_norm(x * 7 + 3, (32,))
    assert (y.pow(2).sum() / 64 / 32).item() == pytest.approx(1.0, abs=1e-4)
    v = errata.demo("D5").values                                 # so ||LN(x_L)||^2/||x_0||^2 = 32/||x_0||^2 per row
    assert v["final_ln_6"] == pytest.approx(v["final_ln_96"], rel=1e-3) and 0.8 < v["final_ln_96"] < 1.2


# --- [E] -------------------------------------------------------------------------------------

def test_e1_be_plane_is_bn_over_positions():
    x = torch.randn(4, 6, 5) + torch.arange(5.0)
    assert torch.allclose(errata.bn_over_be_plane(x), nn.BatchNorm1d(6, affine=False)(x), atol=1e-5)
    true_bn = nn.BatchNorm1d(5, affine=False)(x.transpose(1, 2)).transpose(1, 2)
    assert not torch.allclose(errata.bn_over_be_plane(x), true_bn, atol=1e-2)


def test_e2_e3_e5_e6_demos_show_the_difference():
    assert errata.demo("E2").values["bhw_batch_dep"] > 0.1 and errata.demo("E2").values["ln_batch_dep"] == 0.0
    assert errata.demo("E3").values["diff"] > 0.5
    assert errata.demo("E5").values["diff"] > 0.5
    e6 = errata.demo("E6").values
    assert e6["formula_0.001"] > 0.3 and e6["code_0.001"] < 1e-5


def test_e4_text_vs_code_momentum():
    d = errata.demo("E4").values
    assert d["code_vs_torch"] < 1e-6 and d["text_vs_torch"] > 0.1


def test_e7_branch_share_ratio_is_alpha_squared():
    alpha, beta = (2 * 24) ** 0.25, (8 * 24) ** -0.25
    wrong, right = errata.branch_shares(alpha, beta)
    assert wrong / right == pytest.approx(alpha ** 2, rel=1e-5)


def test_e8_encdec_constants_differ():
    # DeepNet §4.3, written here by hand (N = M = 12)
    N = M = 12
    paper = {"encoder": ((2 * N) ** 0.25, (8 * N) ** -0.25), "decoder": ((2 * M) ** 0.25, (8 * M) ** -0.25),
             "encdec_encoder": (0.81 * (N ** 4 * M) ** (1 / 16), 0.87 * (N ** 4 * M) ** (-1 / 16)),
             "encdec_decoder": ((3 * M) ** 0.25, (12 * M) ** -0.25)}
    d = errata.demo("E8").values
    for arch, (a, b) in paper.items():
        assert d[f"{arch}_alpha"] == pytest.approx(a, rel=1e-3) and d[f"{arch}_beta"] == pytest.approx(b, rel=1e-3)
    assert abs(d["encdec_encoder_alpha"] - d["e_alpha"]) > 0.3


def test_e9_literal_update_is_a_no_op_and_the_fixed_one_is_torchs():
    p, v = 0.9, torch.tensor([1.0, 2.0])
    assert torch.equal(p * v + (1 - p) * v, v)                   # hand: bar on both terms -> nothing moves
    ref, fixed = nn.BatchNorm1d(2, momentum=1 - p), torch.ones(2)
    batches = [torch.randn(16, 2) * 3 for _ in range(5)]
    for xb in batches:
        ref(xb)
        fixed = p * fixed + (1 - p) * xb.var(0, unbiased=True)
    assert torch.allclose(fixed, ref.running_var, atol=1e-5)
    # hand: with equal-size batches the mean of the batch means is the mean of all the data
    assert torch.allclose(torch.stack([b.mean(0) for b in batches]).mean(0), torch.cat(batches).mean(0), atol=1e-6)
    d = errata.demo("E9").values
    assert d["literal_var"] == 1.0 and d["torch_running_var"] > 7 and d["fixed_vs_torch"] < 1e-5
    assert d["single_batch_err"] > 0.3 and d["expectation_err"] < 1e-5


def test_half_precision_claim_d_q2():
    x = torch.randn(4, 64)
    with torch.no_grad():                                        # the float32 versions are torch's norms
        assert torch.allclose(errata.layer_norm_no_upcast(x), nn.LayerNorm(64, elementwise_affine=False)(x), atol=1e-5)
        assert torch.allclose(errata.rms_norm_no_upcast(x), nn.RMSNorm(64, eps=1e-6)(x), atol=1e-5)
    h = (x + 300).half()
    # hand: 300^2 = 90000 > 65504, so mean(x^2) is inf in float16, rsqrt(inf) = 0, every output is 0
    assert torch.isinf(h.pow(2)).all() and (errata.rms_norm_no_upcast(h) == 0).all()
    assert (F.rms_norm(h.float(), (64,), eps=1e-6) - 1).abs().max() < 0.02   # the right answer is about 1
    assert torch.isfinite(errata.layer_norm_no_upcast(h)).all()
    v = errata.half_precision_stability().values
    assert v["rms_raw_offset"] == pytest.approx(1.0, abs=0.05)          # every output 0 where the answer is ~1
    assert 0.01 < v["ln_raw_offset"] < 0.5 and v["rms_up_offset"] < 2e-3
    assert v["rms_raw_wide"] > 1 and v["ln_raw_wide"] > 1


def test_momentum_traces_follow_torch_formula_by_hand():
    t = errata.momentum_traces(steps=5)
    r = 0.0
    for b, got in zip(t["batch"], t["new_weight_0.1"]):
        r = 0.9 * r + 0.1 * b                                    # hand: torch's documented update
        assert got == pytest.approx(r, rel=1e-5, abs=1e-6)
    r = 0.0
    for b, got in zip(t["batch"], t["new_weight_0.9"]):
        r = 0.1 * r + 0.9 * b
        assert got == pytest.approx(r, rel=1e-5, abs=1e-6)


def test_every_erratum_has_a_labelled_callout_in_its_chapter():
    """Each correction is shown where it belongs: its id in bold (e.g. **A3**) in its chapter."""
    import re
    from pathlib import Path

    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    missing = [e.id for e in errata.ERRATA
               if not re.search(rf"\*\*{e.id}\*\*", (notebooks / f"{e.chapter}.md").read_text(encoding="utf-8"))]
    assert not missing, f"no labelled callout in the chapter for: {missing}"


def test_every_erratum_has_a_flawed_snippet_and_show_prints_it(capsys):
    assert set(errata.SNIPPETS) == {e.id for e in errata.ERRATA}
    for eid, code in errata.SNIPPETS.items():
        lines = code.splitlines()
        assert 2 <= len(lines) <= 6 and any(line.startswith("# fix:") for line in lines), eid
    d = errata.show("E3", seed=1)
    out = capsys.readouterr().out
    assert errata.SNIPPETS["E3"] in out and "E3" in out and d.values["diff"] > 0.5


def test_demo_seed_changes_inputs_and_leaves_the_global_rng_alone():
    a, b = errata.demo("E3", seed=0).values, errata.demo("E3", seed=1).values
    assert a["diff"] != b["diff"]
    assert errata.demo("E3", seed=1).values == b                    # same seed, same numbers
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    errata.demo("A8", seed=2)                                        # builds models, reseeds inside
    assert torch.equal(torch.rand(3), expected)


def test_momentum_conventions_per_document():
    rows = {where: (rule, value, torch_eq) for where, rule, value, torch_eq in errata.MOMENTUM_CONVENTIONS}
    # [B] and [E]'s text weight the old value; [D] and [E]'s code use PyTorch's form (errata B1, D2, E4)
    assert "旧值" in rows["[B] BatchNorm 代码"][0] and rows["[B] BatchNorm 代码"][1] == "m = 0.9"
    assert "新值" in rows["[D] BatchNorm1d 代码"][0] and rows["[D] BatchNorm1d 代码"][1] == "m = 0.9"
    assert "新值" in rows["[E] §1.3 代码"][0] and rows["[E] §1.3 代码"][1] == "m = 0.1"
    # the numbers: [B]'s m = 0.9 old-value form is torch's momentum 0.1; [D]'s is torch's 0.9
    x = torch.randn(8, 3)
    b_form = errata.GradModeBatchNorm(3, m=0.9)
    b_form(x)
    torch01 = nn.BatchNorm1d(3, momentum=0.1)
    torch01(x)
    assert torch.allclose(b_form.moving_mean, 0.1 * x.mean(0)) and torch.allclose(torch01.running_mean, 0.1 * x.mean(0))
    d_form, torch09 = errata.MomentumMixupBatchNorm(3), nn.BatchNorm1d(3, momentum=0.9)
    d_form(x), torch09(x)
    assert torch.allclose(d_form.running_mean, torch09.running_mean)
