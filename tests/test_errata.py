"""Each erratum's flawed code really differs from the reference, each demo shows it, and the flawed
code that companion.code() prints is code the demo runs.

References are independent of normlab: torch.nn modules, torch.nn.functional, autograd, or a
value computed by hand here.
"""

from __future__ import annotations

import math
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import companion, variants
from normlab.companion import doc_a, doc_b, doc_c, doc_d, doc_e
from normlab.companion.base import load_toml
from normlab.lessons.batchnorm import GradModeBatchNorm, fold_batchnorm, running_update

ROOT = Path(__file__).resolve().parent.parent
IDS = [e.id for e in companion.ERRATA]


def test_catalogue_ids_unique_and_complete():
    assert len(IDS) == len(set(IDS)) == 32
    assert {e.doc for e in companion.ERRATA} == set("ABCDE")
    for e in companion.ERRATA:
        assert re.fullmatch(rf"{e.doc}\d", e.id) and e.says and e.right and e.fix and e.place.notebook[:2].isdigit()
    assert len(companion.catalogue().rows) == len(IDS)
    assert all(r[0].startswith("C") for r in companion.catalogue("C").rows)


def test_unknown_id_and_doc_give_clear_errors():
    with pytest.raises(KeyError, match="勘误"):
        companion.get("Z9")
    with pytest.raises(ValueError, match="A-E"):
        companion.catalogue("F")


@pytest.mark.parametrize("eid", IDS)
def test_every_demo_runs_and_returns_numbers(eid):
    d = companion.demo(eid)
    assert d.rows and d.values and all(isinstance(v, float) for v in d.values.values())
    assert "<table>" in d._repr_html_()


# --- the flawed code beside each demo --------------------------------------------------------


def _called_code(fn) -> set:
    """The code objects of every Python function called while fn() runs (sys.setprofile)."""
    seen = set()

    def profiler(frame, event, arg):
        if event == "call":
            seen.add(frame.f_code)
    old = sys.getprofile()
    sys.setprofile(profiler)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return seen


@pytest.mark.parametrize("eid", IDS)
def test_every_erratum_has_code_and_its_flawed_functions_run_in_its_demo(eid):
    e = companion.get(eid)
    assert e.snippet or e.flawed, f"{eid}: neither a flawed function nor a snippet"
    if e.snippet:
        assert 1 <= len(e.snippet.strip().splitlines()) <= 6, eid
    called = _called_code(lambda: companion.demo(eid))
    for fn in e.flawed:
        assert fn.__code__ in called, f"{eid}: {fn.__qualname__} is shown but the demo never runs it"
        assert len(companion.code(eid).body.splitlines()) <= 30, eid          # a few lines, not a module
    text = str(companion.code(eid))
    assert eid in text and "# fix: " in text and e.place.title in text
    assert all(fn.__name__ in text for fn in e.flawed)


def test_code_prints_the_real_source_and_show_prints_code_then_numbers(capsys):
    import inspect
    assert inspect.getsource(variants.layer_norm_eps_outside).strip() in str(companion.code("A3"))
    assert "```python" in companion.code("A3")._repr_markdown_()
    d = companion.show("E3", seed=1)
    out = capsys.readouterr().out
    assert "def bn_eval_no_root" in out and out.index("# fix: ") < out.index(f"{d.values['diff']:.3g}")
    assert d.values["diff"] > 0.5


def test_errata_data_is_toml_not_python_strings():
    """The catalogue's prose lives in the TOML files: no Python line of the companion is long."""
    for path in (ROOT / "normlab" / "companion").glob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert len(line) <= 130, f"{path.name}:{n} is {len(line)} characters"


# --- [A] -----------------------------------------------------------------------------------

def test_a1_residual_gain_is_product_of_jacobians():
    for c in (0.0, -0.9, 0.5):                                   # hand computation (1 + c)^10
        assert doc_a.residual_chain_grad(c) == pytest.approx((1 + c) ** 10, rel=1e-4)


def test_a1_random_mlp_gain_matches_the_jacobian_product_and_is_not_one():
    # one block: the measured multiplier is ||(I + J_F)^T u|| / ||u||, J_F from torch.autograd.functional
    width, g = 8, torch.Generator().manual_seed(30)
    x0 = torch.randn(16, width, generator=g)
    w1 = torch.randn(4 * width, width, generator=g) * math.sqrt(2 / width)
    w2 = torch.randn(width, 4 * width, generator=g) * math.sqrt(2 / (4 * width))
    u = torch.randn(16, width, generator=g)
    jac = torch.autograd.functional.jacobian(lambda x: x + F.relu(x @ w1.T) @ w2.T, x0)   # (16, w, 16, w)
    hand = (torch.einsum("ij,ijkl->kl", u, jac).norm() / u.norm()).item()
    assert doc_a.residual_mlp_gain(depth=1, width=width) == pytest.approx(hand, rel=1e-5)
    assert doc_a.residual_mlp_gain() > 20 and doc_a.residual_mlp_gain(gain=0.5) > 1.3   # [A] would say 1


def test_a2_no_running_stats_single_sample_gives_beta():
    flawed, ref = doc_a.NoRunningStatsBatchNorm(3), nn.BatchNorm1d(3)
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
    assert torch.allclose(variants.layer_norm_eps_outside(big, eps=1e-6), ref(big), atol=1e-5)
    # hand: std s = 1e-3*sigma; ratio = sqrt(s^2 + 1e-6) / (s + 1e-6) is far from 1
    assert (variants.layer_norm_eps_outside(small, eps=1e-6) - ref(small)).abs().max() > 0.3
    assert not hasattr(nn, "Parmaeter")


def test_a4_dtype_differs_from_nn_rmsnorm_only_with_a_float32_weight():
    x = torch.randn(2, 8).to(torch.bfloat16)
    ref = nn.RMSNorm(8, eps=1e-6)                                # float32 weight, as in the demo
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")                          # torch warns (once) about the mixed dtypes
        assert ref(x).dtype == torch.bfloat16
    assert variants.rms_upcast_then_weight(x, ref.weight.detach()).dtype == torch.float32
    # a model cast to bfloat16 as a whole (weight bfloat16 too): same dtype, LLaMA's order is fine
    assert variants.rms_upcast_then_weight(x, ref.weight.detach().bfloat16()).dtype == torch.bfloat16


def test_a5_runtime_beta_ratios_match_hand_computation():
    beta = (8 * 24) ** -0.25
    assert doc_a.ffn_branch_ratio(beta) == pytest.approx(1 / beta, rel=1e-4)
    assert doc_a.adam_effective_step(beta) == pytest.approx(beta, rel=1e-3)


def test_a6_arxiv_order():
    # the arXiv ids as listed on the papers' abstract pages; an id's first four digits are yymm of submission
    titles = {"1809.10853": "Adaptive Input Representations", "1906.01787": "Learning Deep Transformer Models",
              "2002.04745": "On Layer Normalization in the Transformer"}
    assert sorted(doc_a.ARXIV.values()) == sorted(titles)
    assert all(titles[aid] in paper for paper, aid in doc_a.ARXIV.items())
    earlier = sum(aid[:4] < "2002" for aid in titles)                   # submitted before Xiong et al.
    assert companion.demo("A6").values["earlier_papers"] == earlier == 2


def test_a7_formula_2_without_mean_is_rmsnorm_formula_1_is_not():
    x = torch.randn(6, 16) * 2 + 1
    from1, from2 = variants.batch_rms_norm(x, eps=1e-6), variants.rms_norm(x, eps=1e-6)
    with torch.no_grad():
        assert torch.allclose(from2, nn.RMSNorm(16, eps=1e-6)(x), atol=1e-5)
        assert not torch.allclose(from1, nn.RMSNorm(16, eps=1e-6)(x), atol=1e-1)
    # hand: (1) without mu divides each feature by its quadratic mean over the batch -> that mean becomes 1
    assert torch.allclose(from1.pow(2).mean(0), torch.ones(16), atol=1e-4)
    y = x.clone()
    y[1:] *= 3
    assert not torch.allclose(from1[0], variants.batch_rms_norm(y, eps=1e-6)[0])
    assert torch.equal(from2[0], variants.rms_norm(y, eps=1e-6)[0])


def test_a8_deepnorm_ln_is_plain_and_gradient_scales_with_beta_over_alpha():
    from normlab.blocks import MLP, Residual, build_stack
    sub, alpha = MLP(8), 2.5
    x = torch.randn(4, 8)
    h = alpha * x + F.linear(F.relu(F.linear(x, sub.fc1.weight, sub.fc1.bias)), sub.fc2.weight, sub.fc2.bias)
    with torch.no_grad():                                         # reference: torch's layer_norm of alpha*x + G(x)
        assert torch.allclose(Residual(sub, 8, wiring="deepnorm", alpha=alpha)(x), F.layer_norm(h, (8,)), atol=1e-6)
    for N in (6, 96):                                             # hand: beta/alpha = (8N)^-1/4 / (2N)^1/4 = 1/(2 sqrt N)
        a, b = (2 * N) ** 0.25, (8 * N) ** -0.25
        assert b / a == pytest.approx(1 / (2 * math.sqrt(N)), rel=1e-12)
    g6, u6 = doc_a.deepnorm_probe(6, "deepnorm")
    g96, _ = doc_a.deepnorm_probe(96, "deepnorm")
    assert g6[0][0] / g96[0][0] == pytest.approx(math.sqrt(96 / 6), rel=0.1)    # so the gradient falls as 1/sqrt(N)
    for N, grads in ((6, g6), (96, g96)):                           # every block, fc1 and fc2: the same law
        ratio = 1 / (2 * math.sqrt(N))
        scaled = [gr / ratio for pair in grads for gr in pair]
        assert len(scaled) == 2 * N and max(scaled) / min(scaled) < 1.4
    assert u6 < doc_a.deepnorm_probe(6, "post")[1] / 3
    # the one-step update moves the sublayers only (DeepNet's theta): a copy of the same stack whose
    # LayerNorms are frozen by hand gives the same ||dF||
    frozen = build_stack(6, width=32, wiring="deepnorm", sublayer="mlp", seed=0)
    g0 = torch.Generator().manual_seed(300)
    xf, tf = torch.randn(64, 32, generator=g0), torch.randn(64, 32, generator=g0)
    with torch.no_grad():
        y0 = frozen(xf)
    for n, p in frozen.named_parameters():
        p.requires_grad_(".sublayer." in n)
    opt = torch.optim.Adam([p for p in frozen.parameters() if p.requires_grad], lr=1e-3)
    F.mse_loss(frozen(xf), tf).backward()
    opt.step()
    with torch.no_grad():
        assert ((frozen(xf) - y0).norm() / 8).item() == pytest.approx(u6, rel=1e-5)
    # the probe's gradients equal ones computed here with autograd on the same stack
    stack = build_stack(6, width=32, wiring="deepnorm", sublayer="mlp", seed=0)
    gen = torch.Generator().manual_seed(300)
    xs, t = torch.randn(64, 32, generator=gen), torch.randn(64, 32, generator=gen)
    ws = [stack.blocks[0].mlp.sublayer.fc1.weight, stack.blocks[-1].mlp.sublayer.fc2.weight]
    gw = torch.autograd.grad(((stack(xs) - t) ** 2).mean(), ws)
    assert gw[0].norm().item() == pytest.approx(g6[0][0], rel=1e-5)
    assert gw[1].norm().item() == pytest.approx(g6[-1][1], rel=1e-5)


# --- [B] / [E] §1.3 -------------------------------------------------------------------------

def test_b1_grad_mode_batchnorm_and_b_style_moving_stats_vs_torch():
    flawed = GradModeBatchNorm(2)
    x = torch.randn(8, 2) * 3 + 1
    flawed(x)
    flawed.eval()
    y = flawed(torch.randn(8, 2) + 5)                            # eval(), but grad enabled
    assert y.mean().abs() < 1e-5                                 # still batch statistics
    # one step from (0, 1) with m = 0.9 old-value weight: hand computation, biased variance
    mean, var = doc_b.moving_stats_like_b(torch.zeros(2), torch.ones(2), x)
    assert torch.allclose(var, 0.9 + 0.1 * x.var(0, unbiased=False))
    r2 = nn.BatchNorm1d(2)
    r2(x)
    assert torch.allclose(r2.running_var, 0.9 + 0.1 * x.var(0, unbiased=True))
    assert torch.allclose(mean, r2.running_mean)                 # 0.9-old == torch's 0.1-new
    v = companion.demo("B1").values                              # plain attributes are not in the state_dict
    assert v["flawed_in_state_dict"] == 0.0 and v["ref_in_state_dict"] == 1.0
    assert v["var_ratio"] == pytest.approx(7 / 8, rel=0.02)      # biased / unbiased, batch 8, after 30 batches


def test_b2_rmsnorm_has_gamma():
    assert [n for n, _ in nn.RMSNorm(8).named_parameters()] == ["weight"]
    assert companion.demo("B2").values["rms_params"] == 64


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
    d = companion.demo("C2").values
    assert d["paper_norm_params"] == 0
    assert d["c_norm_params"] == sum(p.numel() for p in nn.LayerNorm(32).parameters()) == 64
    assert d["identity_at_init"] == 0                                  # alpha = 0: both blocks start as identity


def test_c1_layerscale_drift_scales_with_init():
    small, tiny = doc_c.layerscale_drift(1e-5), doc_c.layerscale_drift(1e-6)
    assert small / tiny == pytest.approx(10, rel=0.01)            # linear in the init when small
    assert doc_c.layerscale_drift(0.1) > 1e3 * small
    # CaiT: init 1e-5 for the depth-24 models, 1e-6 for S36 (deit cait_models.py), 0.1 only up to depth 18
    assert doc_c.CAIT_INIT == {18: 0.1, 24: 1e-5, 36: 1e-6}
    v = companion.demo("C1").values
    assert v["drift_1e-05"] == pytest.approx(doc_c.layerscale_drift(doc_c.CAIT_INIT[24]), rel=1e-6)


def test_c3_runtime_multiplier_shrinks_adam_step():
    c = 1 / math.sqrt(200)
    assert doc_a.adam_effective_step(c) == pytest.approx(c, rel=1e-3)
    assert companion.demo("C3").values["c_adam_ratio"] == pytest.approx(c, rel=1e-3)


def test_c4_source_c_powernorm_is_rmsnorm_and_batch_independent():
    x = torch.randn(4, 5, 16)
    assert torch.allclose(variants.power_norm_source_c(x, eps=0.0), F.rms_norm(x, (16,), eps=0.0), atol=1e-6)
    y = x.clone()
    y[1:] *= 7
    assert torch.equal(variants.power_norm_source_c(x)[0], variants.power_norm_source_c(y)[0])
    assert not torch.allclose(variants.batch_rms_norm(x)[0], variants.batch_rms_norm(y)[0])
    # Shen et al. without mean subtraction: per feature, quadratic mean over batch and tokens = 1
    assert torch.allclose(variants.batch_rms_norm(x).pow(2).mean(dim=(0, 1)), torch.ones(16), atol=1e-3)


def test_c5_t5_norm_is_rmsnorm_not_layernorm():
    x = torch.randn(3, 16) + 2
    t5 = variants.rms_t5(x, torch.ones(16), eps=1e-6)
    assert torch.allclose(t5, nn.RMSNorm(16, eps=1e-6)(x), atol=1e-6)
    assert not torch.allclose(t5, nn.LayerNorm(16, eps=1e-6)(x), atol=1e-2)


def test_c6_monitor_raises_and_hooks_give_true_stats():
    model = doc_c.tiny_model()
    x = torch.randn(4, 8)
    with pytest.raises(AttributeError):
        doc_c.monitor_like_source_c(model, x)
    stats = doc_c.layernorm_stats(model, x)
    h = model[0](x)                                              # hand: input of the first LayerNorm
    assert stats[0]["in_std"] == pytest.approx(h.std().item(), rel=1e-5)
    assert stats[0]["out_std"] == pytest.approx(model[1](h).std().item(), rel=1e-5)
    assert all(len(m._forward_hooks) == 0 for m in model.modules())


def test_c7_hooks_accumulate():
    d = companion.demo("C7").values
    assert (d["calls_after_1"], d["calls_after_2"], d["calls_after_3"]) == (8.0, 16.0, 24.0)


def test_c8_source_c_fused_is_many_ops_same_result():
    x, r = torch.randn(4, 32), torch.randn(4, 32)
    w, b = torch.randn(32), torch.randn(32)
    out = variants.add_layer_norm(x, r, w, b, eps=1e-5)
    assert torch.allclose(out, F.layer_norm(x + r, (32,), w, b, eps=1e-5), atol=1e-5)
    assert doc_c.count_torch_calls(lambda: variants.add_layer_norm(x, r, w, b)) >= 6
    assert doc_c.count_torch_calls(lambda: F.layer_norm(x + r, (32,), w, b)) <= 2


def test_c9_eps_underflows_in_half():
    assert float(torch.tensor(1e-12, dtype=torch.float16)) == 0.0
    d = companion.demo("C9").values
    assert d["nan_1e-12"] == 1.0 and d["nan_1e-5"] == 0.0


# --- [D] -------------------------------------------------------------------------------------

def test_d1_unbiased_var_ratio():
    d = companion.demo("D1").values
    assert d["ln_ratio"] == pytest.approx(math.sqrt(7 / 8), rel=1e-3)
    assert d["bn_ratio"] == pytest.approx(math.sqrt(3 / 4), rel=1e-3)


def test_d2_momentum_mixup_equals_torch_momentum_09_and_keeps_graph():
    flawed, ref09 = doc_d.MomentumMixupBatchNorm(3), nn.BatchNorm1d(3, momentum=0.9)
    lin = nn.Linear(3, 3)
    for _ in range(3):
        h = lin(torch.randn(8, 3))
        flawed(h), ref09(h.detach())
    assert torch.allclose(flawed.running_mean, ref09.running_mean, atol=1e-6)
    assert flawed.running_mean.grad_fn is not None and ref09.running_mean.grad_fn is None


def test_d3_preln_last_grad_decreases_with_depth():
    assert companion.demo("D3").values["slope"] < -0.2                # [D] claims +0.5


def test_d4_folded_batchnorm_matches_torch():
    lin, bn = nn.Linear(6, 4), nn.BatchNorm1d(4)
    bn(lin(torch.randn(16, 6)).detach() * 3)
    with torch.no_grad():
        bn.weight.fill_(1.5)
    bn.eval()
    x = torch.randn(5, 6)
    with torch.no_grad():
        assert torch.allclose(fold_batchnorm(lin, bn)(x), bn(lin(x)), atol=1e-5)


def test_claims_measured_here_name_their_function_and_d4_is_one():
    assert "D4" not in IDS                                        # a claim of degree, not an erratum
    here = {c.measured_by: c for c in companion.CLAIMS if c.measured_by}
    assert set(here) == {"bn_cost", "timing_pitfalls", "half_precision_stability"}
    assert all(c.course == "09.claims" and callable(getattr(companion, name)) for name, c in here.items())
    v = companion.bn_cost(batch=64, d_in=16, d_out=32).values
    assert v["fold_rel_diff"] < 1e-5
    assert v["train_step_ratio"] > 1.0                           # training pays for BN's reductions and backward
    assert 0.3 < v["fold_vs_linear"] < 3                          # the folded layer is a plain Linear


def test_timing_pitfalls_bn_is_built_but_never_timed():
    v = companion.timing_pitfalls(shape=(2, 8, 16), loops=2, rounds=3).values
    assert v["bn_calls"] == 0 and v["ln_calls"] == 1 + 15 + 2 * 3   # first call, 15 singles, the naive loops
    assert v["naive_ratio_min"] <= v["naive_ratio_max"]


def test_d5_preln_stream_grows_and_the_final_norm_resets_it():
    assert doc_d.preln_stream_growth(24) > 2 * doc_d.preln_stream_growth(6)
    x = torch.randn(64, 32)                                      # hand: LN(.) rows have mean 0, var 1
    y = F.layer_norm(x * 7 + 3, (32,))
    assert (y.pow(2).sum() / 64 / 32).item() == pytest.approx(1.0, abs=1e-4)
    v = companion.demo("D5").values                              # so ||LN(x_L)||^2/||x_0||^2 = 32/||x_0||^2 per row
    assert v["final_ln_6"] == pytest.approx(v["final_ln_96"], rel=1e-3) and 0.8 < v["final_ln_96"] < 1.2


# --- [E] -------------------------------------------------------------------------------------

def test_e1_be_plane_is_bn_over_positions():
    x = torch.randn(4, 6, 5) + torch.arange(5.0)
    assert torch.allclose(variants.bn_over_be_plane(x), nn.BatchNorm1d(6, affine=False)(x), atol=1e-5)
    true_bn = nn.BatchNorm1d(5, affine=False)(x.transpose(1, 2)).transpose(1, 2)
    assert not torch.allclose(variants.bn_over_be_plane(x), true_bn, atol=1e-2)


def test_e3_e5_flawed_formulas_by_hand():
    x, mean, var = torch.randn(6, 4) * 3 + 1, torch.full((4,), 1.0), torch.full((4,), 9.0)
    assert torch.allclose(doc_e.bn_eval_no_root(x, mean, var, eps=0.0), (x - 1) / 9)
    ref = F.batch_norm(x, mean, var, training=False, eps=0.0)     # torch's eval BN: (x - 1) / 3
    assert torch.allclose(doc_e.bn_eval_no_root(x, mean, var, eps=0.0) * 3, ref)
    y = torch.randn(3, 16) * 4                                   # hand: (x - mu) / sqrt(s) = LN(x) * sqrt(s)
    s = y.std(-1, keepdim=True, unbiased=False)
    assert torch.allclose(doc_e.layer_norm_sqrt_std(y, eps=0.0), F.layer_norm(y, (16,), eps=0.0) * s.sqrt(), atol=1e-5)


def test_e2_e3_e5_e6_demos_show_the_difference():
    assert companion.demo("E2").values["bhw_batch_dep"] > 0.1 and companion.demo("E2").values["ln_batch_dep"] == 0.0
    assert companion.demo("E3").values["diff"] > 0.5
    assert companion.demo("E5").values["diff"] > 0.5
    e6 = companion.demo("E6").values
    assert e6["formula_0.001"] > 0.3 and e6["code_0.001"] < 1e-5


def test_e4_text_vs_code_momentum():
    d = companion.demo("E4").values
    assert d["code_vs_torch"] < 1e-6 and d["text_vs_torch"] > 0.1


def test_e7_branch_share_ratio_is_alpha_squared():
    alpha, beta = (2 * 24) ** 0.25, (8 * 24) ** -0.25
    wrong, right = doc_e.branch_shares(alpha, beta)
    assert wrong / right == pytest.approx(alpha ** 2, rel=1e-5)


def test_e8_encdec_constants_differ():
    # DeepNet §4.3, written here by hand (N = M = 12)
    N = M = 12
    paper = {"encoder": ((2 * N) ** 0.25, (8 * N) ** -0.25), "decoder": ((2 * M) ** 0.25, (8 * M) ** -0.25),
             "encdec_encoder": (0.81 * (N ** 4 * M) ** (1 / 16), 0.87 * (N ** 4 * M) ** (-1 / 16)),
             "encdec_decoder": ((3 * M) ** 0.25, (12 * M) ** -0.25)}
    d = companion.demo("E8").values
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
    d = companion.demo("E9").values
    assert d["literal_var"] == 1.0 and d["torch_running_var"] > 7 and d["fixed_vs_torch"] < 1e-5
    assert d["single_batch_err"] > 0.3 and d["expectation_err"] < 1e-5


def test_half_precision_claim_d_q2():
    x = torch.randn(4, 64)
    with torch.no_grad():                                        # the float32 versions are torch's norms
        assert torch.allclose(variants.layer_norm(x), nn.LayerNorm(64, elementwise_affine=False)(x), atol=1e-5)
        assert torch.allclose(variants.rms_norm(x, eps=1e-6), nn.RMSNorm(64, eps=1e-6)(x), atol=1e-5)
    h = (x + 300).half()
    # hand: 300^2 = 90000 > 65504, so mean(x^2) is inf in float16, rsqrt(inf) = 0, every output is 0
    assert torch.isinf(h.pow(2)).all() and (variants.rms_norm(h) == 0).all()
    assert (F.rms_norm(h.float(), (64,), eps=1e-6) - 1).abs().max() < 0.02   # the right answer is about 1
    assert torch.isfinite(variants.layer_norm(h)).all()
    v = companion.half_precision_stability().values
    assert v["rms_raw_offset"] == pytest.approx(1.0, abs=0.05)          # every output 0 where the answer is ~1
    assert 0.01 < v["ln_raw_offset"] < 0.5 and v["rms_up_offset"] < 2e-3
    assert v["rms_raw_wide"] > 1 and v["ln_raw_wide"] > 1


def test_momentum_traces_follow_torch_formula_by_hand():
    t = companion.momentum_traces(steps=5)
    r = 0.0
    for b, got in zip(t["batch"], t["new_weight_0.1"]):
        r = 0.9 * r + 0.1 * b                                    # hand: torch's documented update
        assert got == pytest.approx(r, rel=1e-5, abs=1e-6)
    r = 0.0
    for b, got in zip(t["batch"], t["new_weight_0.9"]):
        r = 0.1 * r + 0.9 * b
        assert got == pytest.approx(r, rel=1e-5, abs=1e-6)


def test_momentum_conventions_per_document_are_the_torch_momentum_they_claim():
    """Each document's rule with its own m, one step, equals nn.BatchNorm1d(momentum=torch_momentum)."""
    rows = {c["where"][:3]: c for c in load_toml("momentum.toml")["convention"]}
    assert len(companion.MOMENTUM_CONVENTIONS) == 5 and len(companion.momentum_table().rows) == 5
    assert rows["[A]"]["convention"] == "none"                   # erratum A2: no running statistics at all
    x = torch.randn(8, 3) + 2
    checked = 0
    for c in rows.values():
        if "m" not in c:
            continue
        ref = nn.BatchNorm1d(3, momentum=c["torch_momentum"])
        ref(x)
        assert torch.allclose(running_update(torch.zeros(3), x.mean(0), c["m"], c["convention"]), ref.running_mean)
        checked += 1
    assert checked == 3
    # [B]'s m = 0.9 (old-value weight) is torch's default 0.1; [D]'s 0.9 in torch's form is not
    assert (rows["[B]"]["torch_momentum"], rows["[D]"]["torch_momentum"]) == (0.1, 0.9)


def test_every_erratum_has_a_labelled_callout_in_its_chapter():
    """Each correction is shown where it belongs: its id in bold (e.g. **A3**) in its chapter."""
    notebooks = ROOT / "notebooks"
    missing = [e.id for e in companion.ERRATA
               if not re.search(rf"\*\*{e.id}\*\*", (notebooks / f"{e.place.notebook}.md").read_text(encoding="utf-8"))]
    assert not missing, f"no labelled callout in the chapter for: {missing}"


def test_demo_seed_changes_inputs_and_leaves_the_global_rng_alone():
    a, b = companion.demo("E3", seed=0).values, companion.demo("E3", seed=1).values
    assert a["diff"] != b["diff"]
    assert companion.demo("E3", seed=1).values == b                    # same seed, same numbers
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    companion.demo("A8", seed=2)                                        # builds models, reseeds inside
    assert torch.equal(torch.rand(3), expected)


def test_the_notes_the_course_names_are_the_catalogue_s_notes():
    """09's summary and the guide name which errata are notes (补充: not wrong, what a document leaves out); the
    list is the catalogue's (B2 and C9 became notes after a fresh read of 920d5f9, and the texts had to follow)."""
    notes = sorted(e.id for e in companion.ERRATA if e.kind.startswith("补充"))
    named = "、".join(notes)
    root = Path(__file__).resolve().parent.parent
    for path in (root / "notebooks" / "09_companion.md", root / "book" / "instructor.md"):
        text = path.read_text(encoding="utf-8")
        found = re.findall(r"(\d+) 条勘误（(?:其中 )?([A-E]\d(?:、[A-E]\d)*) 是补充", text)
        assert found and all(ids == named for _, ids in found), (path.name, found, named)
        assert all(int(n) == len(companion.ERRATA) for n, _ in found), (path.name, found, len(companion.ERRATA))
    heads = dict(re.findall(r"^#### ([A-E]\d) · (.*)$", (root / "notebooks" / "09_companion.md").read_text(encoding="utf-8"),
                            re.M))
    assert sorted(i for i, h in heads.items() if "补充" in h) == notes, heads        # 09's headings say it too
