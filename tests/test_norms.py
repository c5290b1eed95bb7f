"""normlab.norms against torch.nn: forward, backward, running statistics, dtypes, state_dict."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from normlab import norms

TORCH_BN = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d}
TORCH_IN = {3: nn.InstanceNorm1d, 4: nn.InstanceNorm2d}


def randomize(*modules: nn.Module, seed: int = 0) -> None:
    """Give both modules the same non-trivial parameters (ones/zeros would hide bugs)."""
    g = torch.Generator().manual_seed(seed)
    params = [dict(m.named_parameters()) for m in modules]
    for name, p in params[0].items():
        value = torch.randn(p.shape, generator=g, dtype=torch.float64)
        for ps in params:
            with torch.no_grad():
                ps[name].copy_(value.to(ps[name].dtype))


def step(m: nn.Module, x: torch.Tensor, g: torch.Tensor):
    """One forward+backward; returns output, input grad and parameter grads."""
    for p in m.parameters():
        p.grad = None
    x = x.clone().requires_grad_(True)
    y = m(x)
    (y * g).sum().backward()
    return y.detach(), x.grad, {n: p.grad for n, p in m.named_parameters()}


def assert_same_step(ours, ref, x, g, atol=1e-5, rtol=1e-5):
    y1, gx1, gp1 = step(ours, x, g)
    y2, gx2, gp2 = step(ref, x, g)
    torch.testing.assert_close(y1, y2, atol=atol, rtol=rtol)
    torch.testing.assert_close(gx1, gx2, atol=atol, rtol=rtol)
    assert gp1.keys() == gp2.keys()
    for k in gp1:
        torch.testing.assert_close(gp1[k], gp2[k], atol=atol, rtol=rtol)


def assert_same_buffers(ours: nn.Module, ref: nn.Module) -> None:
    b1, b2 = dict(ours.named_buffers()), dict(ref.named_buffers())
    assert b1.keys() == b2.keys()
    for k in b1:
        torch.testing.assert_close(b1[k], b2[k], atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- BatchNorm
@pytest.mark.parametrize("shape", [(8, 4), (6, 4, 5), (4, 4, 3, 3)])
@pytest.mark.parametrize("momentum", [0.1, 0.35, None])
@pytest.mark.parametrize("affine,track", [(True, True), (False, True), (True, False)])
def test_batchnorm_matches_torch_over_steps(shape, momentum, affine, track):
    torch.manual_seed(0)
    ours = norms.BatchNorm(4, momentum=momentum, affine=affine, track_running_stats=track)
    ref = TORCH_BN[len(shape)](4, momentum=momentum, affine=affine, track_running_stats=track)
    randomize(ours, ref)
    for _ in range(4):  # several steps: the running statistics accumulate
        x = torch.randn(shape) * 3 + 2
        assert_same_step(ours, ref, x, torch.randn(shape))
        assert_same_buffers(ours, ref)
    ours.eval(), ref.eval()
    x = torch.randn(shape) * 3 + 2
    assert_same_step(ours, ref, x, torch.randn(shape))  # eval uses running stats (or batch stats if untracked)
    assert_same_buffers(ours, ref)


def test_batchnorm_eval_without_no_grad_uses_running_stats():
    """model.eval() switches the mode even with autograd on (d2l's is_grad_enabled() bug)."""
    torch.manual_seed(1)
    ours, ref = norms.BatchNorm(3), nn.BatchNorm1d(3)
    for _ in range(3):
        x = torch.randn(16, 3) * 2 + 1
        ours(x), ref(x)
    ours.eval(), ref.eval()
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    x = torch.randn(5, 3, requires_grad=True)
    assert torch.is_grad_enabled()
    y = ours(x)
    torch.testing.assert_close(y, ref(x))
    expected = (x - ours.running_mean) / torch.sqrt(ours.running_var + ours.eps)
    torch.testing.assert_close(y, expected)
    for k, v in ours.state_dict().items():  # eval never updates the statistics
        assert torch.equal(v, before[k]), k
    ours.train()
    with torch.no_grad():  # and no_grad alone does not switch to eval
        ours(torch.randn(16, 3))
    assert ours.num_batches_tracked.item() == 4


def test_batchnorm_running_stats_are_buffers_without_graph():
    m = norms.BatchNorm(3)
    x = torch.randn(10, 3, requires_grad=True)
    m(x).sum().backward()
    sd = m.state_dict()
    assert set(sd) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    assert not m.running_mean.requires_grad and m.running_mean.grad_fn is None
    assert m.running_var.grad_fn is None
    assert {n for n, _ in m.named_parameters()} == {"weight", "bias"}


def test_batchnorm_running_var_is_unbiased_and_momentum_is_pytorch_convention():
    m = norms.BatchNorm(1, momentum=0.1)
    x = torch.tensor([[1.0], [2.0], [4.0], [7.0]])
    m(x)
    mean, var_unbiased = x.mean(), x.var(unbiased=True)
    torch.testing.assert_close(m.running_mean, 0.9 * torch.zeros(1) + 0.1 * mean.reshape(1))
    torch.testing.assert_close(m.running_var, 0.9 * torch.ones(1) + 0.1 * var_unbiased.reshape(1))


def test_batchnorm_momentum_none_is_cumulative_average():
    m = norms.BatchNorm(2, momentum=None)
    batches = [torch.randn(8, 2) * (i + 1) + i for i in range(5)]
    for b in batches:
        m(b)
    torch.testing.assert_close(m.running_mean, torch.stack([b.mean(0) for b in batches]).mean(0))
    torch.testing.assert_close(m.running_var, torch.stack([b.var(0) for b in batches]).mean(0))


def test_batchnorm_batch_of_one_with_spatial_is_allowed():
    """N=1 is fine in training when H*W>1: what must exceed 1 is values per channel."""
    ours, ref = norms.BatchNorm(3), nn.BatchNorm2d(3)
    x = torch.randn(1, 3, 4, 4)
    torch.testing.assert_close(ours(x), ref(x))
    assert_same_buffers(ours, ref)


# ---------------------------------------------------------------- LayerNorm
@pytest.mark.parametrize("shape,normalized", [((4, 10), 10), ((2, 5, 8), (8,)), ((2, 3, 4, 5), (4, 5)),
                                              ((3, 2, 4, 5), (2, 4, 5)), ((7,), 7)])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_layernorm_matches_torch(shape, normalized, affine, bias):
    torch.manual_seed(0)
    ours = norms.LayerNorm(normalized, elementwise_affine=affine, bias=bias)
    ref = nn.LayerNorm(normalized, elementwise_affine=affine, bias=bias)
    randomize(ours, ref)
    for train in (True, False):
        ours.train(train), ref.train(train)
        assert_same_step(ours, ref, torch.randn(shape) * 5 - 3, torch.randn(shape))


# ---------------------------------------------------------------- RMSNorm
@pytest.mark.parametrize("shape,normalized", [((4, 10), 10), ((2, 5, 8), (8,)), ((2, 3, 4, 5), (4, 5))])
@pytest.mark.parametrize("eps", [None, 1e-6, 0.1])
@pytest.mark.parametrize("affine", [True, False])
def test_rmsnorm_matches_torch(shape, normalized, eps, affine):
    torch.manual_seed(0)
    ours = norms.RMSNorm(normalized, eps=eps, elementwise_affine=affine)
    ref = nn.RMSNorm(normalized, eps=eps, elementwise_affine=affine)
    randomize(ours, ref)
    assert_same_step(ours, ref, torch.randn(shape) * 2 + 1, torch.randn(shape))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_rmsnorm_default_eps_follows_compute_dtype(dtype):
    """Tiny inputs make eps visible: eps=None must be the eps torch really uses."""
    x = (torch.randn(4, 8) * 1e-3).to(dtype)
    ref = nn.RMSNorm(8).to(dtype)(x)
    torch.testing.assert_close(norms.RMSNorm(8).to(dtype)(x), ref, atol=0, rtol={torch.float64: 1e-10, torch.float32: 1e-5}.get(dtype, 1e-3))
    if dtype in (torch.float16, torch.bfloat16):  # the docs' finfo(x.dtype).eps would be far off
        wrong = norms.RMSNorm(8, eps=torch.finfo(dtype).eps).to(dtype)(x)
        assert (wrong.float() - ref.float()).abs().max() > 0.5


# ---------------------------------------------------------------- GroupNorm / InstanceNorm
@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("shape", [(4, 6), (3, 6, 5), (2, 6, 3, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_groupnorm_matches_torch(groups, shape, affine):
    torch.manual_seed(0)
    ours, ref = norms.GroupNorm(groups, 6, affine=affine), nn.GroupNorm(groups, 6, affine=affine)
    randomize(ours, ref)
    # one value per group (G = C on (N, C)): x - mu = 0, so y = beta and the grads are ~0; torch's
    # fused kernel leaves float32 rounding noise (~1e-5) there, hence the looser tolerance
    tol = 5e-4 if groups == 6 and len(shape) == 2 else 1e-5
    assert_same_step(ours, ref, torch.randn(shape) * 4 + 1, torch.randn(shape), atol=tol, rtol=1e-5)



@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("shape", [(0, 6), (0, 6, 3), (0, 6, 3, 4), (0, 6, 0)])
def test_groupnorm_empty_batch_returns_what_torch_returns(groups, shape):
    """An empty batch (N = 0, as in PyTorch's own OpInfo samples for group_norm): torch returns an
    empty tensor of the input's shape, an empty input grad and zero parameter grads; so do we
    (a reshape to (N, G, -1) once raised 'cannot reshape tensor of 0 elements')."""
    ours, ref = norms.GroupNorm(groups, 6), nn.GroupNorm(groups, 6)
    randomize(ours, ref)
    x = torch.randn(shape)
    assert ours(x).shape == ref(x).shape == x.shape
    assert_same_step(ours, ref, x, torch.randn(shape))
    assert ours.double()(x.double()).dtype == torch.float64


def test_groupnorm_empty_spatial_dims_return_an_empty_tensor():
    """N = 2 samples with no positions (N, C, 0): the same empty output as torch. (torch's weight
    grad there is NaN, 0/0 in its fused backward; ours is the empty sum, 0: not compared.)"""
    x = torch.randn(2, 6, 0)
    y = norms.GroupNorm(2, 6)(x)
    assert y.shape == nn.GroupNorm(2, 6)(x).shape == (2, 6, 0)

@pytest.mark.parametrize("shape", [(4, 3, 7), (2, 3, 4, 5)])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_instancenorm_matches_torch(shape, affine, track, momentum):
    torch.manual_seed(0)
    ours = norms.InstanceNorm(3, affine=affine, track_running_stats=track, momentum=momentum)
    ref = TORCH_IN[len(shape)](3, affine=affine, track_running_stats=track, momentum=momentum)
    randomize(ours, ref)
    for _ in range(3):
        assert_same_step(ours, ref, torch.randn(shape) * 2 + 1, torch.randn(shape))
        assert_same_buffers(ours, ref)
    ours.eval(), ref.eval()
    assert_same_step(ours, ref, torch.randn(shape) * 2 + 1, torch.randn(shape))


def test_groupnorm_spectrum_endpoints():
    """GroupNorm(1, C) = LayerNorm over (C, H, W); GroupNorm(C, C) = InstanceNorm (no affine)."""
    x = torch.randn(2, 4, 3, 3)
    gn1 = norms.GroupNorm(1, 4, affine=False)(x)
    torch.testing.assert_close(gn1, nn.LayerNorm((4, 3, 3), elementwise_affine=False)(x))
    gnc = norms.GroupNorm(4, 4, affine=False)(x)
    torch.testing.assert_close(gnc, nn.InstanceNorm2d(4)(x))


# ---------------------------------------------------------------- all norms: dtypes, gradcheck, state_dict
def make_pair(kind: str):
    """(ours, torch's, example input shape) for each norm."""
    return {
        "bn": (norms.BatchNorm(4), nn.BatchNorm2d(4), (3, 4, 5, 5)),
        "ln": (norms.LayerNorm(16), nn.LayerNorm(16), (3, 7, 16)),
        "rms": (norms.RMSNorm(16), nn.RMSNorm(16), (3, 7, 16)),
        "rms_eps": (norms.RMSNorm(16, eps=1e-6), nn.RMSNorm(16, eps=1e-6), (3, 7, 16)),
        "gn": (norms.GroupNorm(2, 4), nn.GroupNorm(2, 4), (3, 4, 5, 5)),
        "in": (norms.InstanceNorm(4, affine=True, track_running_stats=True),
               nn.InstanceNorm2d(4, affine=True, track_running_stats=True), (3, 4, 5, 5)),
    }[kind]


KINDS = ["bn", "ln", "rms", "rms_eps", "gn", "in"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mixed", [False, True])
def test_half_precision_matches_torch(kind, dtype, mixed):
    """float16/bfloat16 inputs, with the module in that dtype or kept in float32 (mixed)."""
    torch.manual_seed(0)
    ours, ref, shape = make_pair(kind)
    randomize(ours, ref)
    if not mixed:
        ours, ref = ours.to(dtype), ref.to(dtype)
    x = (torch.randn(shape) * 3 + 1).to(dtype)
    y1, y2 = ours(x), ref(x)
    assert y1.dtype == y2.dtype == dtype
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    torch.testing.assert_close(y1.float(), y2.float(), atol=tol, rtol=tol)
    assert_same_buffers_tol(ours, ref, tol)


def assert_same_buffers_tol(ours, ref, tol):
    for (k1, b1), (k2, b2) in zip(ours.named_buffers(), ref.named_buffers()):
        assert k1 == k2 and b1.dtype == b2.dtype
        torch.testing.assert_close(b1.float(), b2.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("training", [True, False])
def test_gradcheck_float64(kind, training):
    torch.manual_seed(0)
    ours, _, shape = make_pair(kind)
    ours = ours.double().train(training)
    randomize(ours)
    if not training and hasattr(ours, "running_var") and ours.running_var is not None:
        ours.running_mean.normal_(), ours.running_var.uniform_(0.5, 2.0)
    small = (2, shape[1], 3, 3) if len(shape) == 4 else (2, 3, shape[-1])
    x = torch.randn(small, dtype=torch.float64, requires_grad=True)
    params = tuple(ours.parameters())

    def f(x, *ps):
        with torch.no_grad():
            state = {k: v.clone() for k, v in ours.named_buffers()}
        out = torch.func.functional_call(ours, dict(zip([n for n, _ in ours.named_parameters()], ps)), (x,))
        for k, v in ours.named_buffers():  # gradcheck calls f many times: keep the stats fixed
            v.copy_(state[k])
        return out

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_round_trip(kind):
    torch.manual_seed(0)
    ours, ref, shape = make_pair(kind)
    randomize(ours)
    for _ in range(2):
        ours(torch.randn(shape) + 1)  # move running stats away from their initial values
    ref.load_state_dict(ours.state_dict(), strict=True)
    ours.eval(), ref.eval()
    x = torch.randn(shape)
    torch.testing.assert_close(ours(x), ref(x))
    back, _, _ = make_pair(kind)
    back.load_state_dict(ref.state_dict(), strict=True)
    back.eval()
    torch.testing.assert_close(back(x), ref(x))


@pytest.mark.parametrize("kind", KINDS)
def test_input_is_not_modified(kind):
    ours, _, shape = make_pair(kind)
    x = torch.randn(shape)
    x0 = x.clone()
    ours(x)
    assert torch.equal(x, x0)


def test_parameter_names_and_initial_values_match_torch():
    for kind in KINDS:
        ours, ref, _ = make_pair(kind)
        sd1, sd2 = ours.state_dict(), ref.state_dict()
        assert sd1.keys() == sd2.keys(), kind
        for k in sd1:
            assert torch.equal(sd1[k], sd2[k]), (kind, k)


@pytest.mark.parametrize("ours_cls, ref_cls", [(norms.BatchNorm, nn.BatchNorm1d), (norms.InstanceNorm, nn.InstanceNorm1d)])
@pytest.mark.parametrize("affine, track", [(True, True), (False, True), (True, False), (False, False)])
def test_shared_base_registers_parameters_and_buffers_as_torch_does(ours_cls, ref_cls, affine, track):
    """BatchNorm and InstanceNorm share one registration (_NormBase): the same parameters, buffers
    (None where torch has None), dtypes after .to(), no gradient on buffers."""
    kw = dict(eps=1e-3, momentum=0.2, affine=affine, track_running_stats=track, dtype=torch.float64)
    ours, ref = ours_cls(5, **kw), ref_cls(5, **kw)
    for get in ("named_parameters", "named_buffers"):
        a, b = dict(getattr(ours, get)()), dict(getattr(ref, get)())
        assert {k: (v.shape, v.dtype) for k, v in a.items()} == {k: (v.shape, v.dtype) for k, v in b.items()}, get
    assert [getattr(ours, n) is None for n in ("weight", "running_mean", "num_batches_tracked")] == \
           [getattr(ref, n) is None for n in ("weight", "running_mean", "num_batches_tracked")]
    assert not any(v.requires_grad for v in ours.buffers())
    ours, ref = ours.half(), ref.half()
    assert [v.dtype for v in ours.state_dict().values()] == [v.dtype for v in ref.state_dict().values()]   # long stays long


# ---------------------------------------------------------------- errors a learner will meet
@pytest.mark.parametrize("module,x,needle", [
    (norms.BatchNorm(4), torch.randn(8, 3, 5, 5), "num_features=4"),
    (norms.BatchNorm(4), torch.randn(8, 4, 2, 2, 2), "2 到 4 维"),
    (norms.BatchNorm(4), torch.randn(4), "2 到 4 维"),
    (norms.BatchNorm(4), torch.randn(1, 4), "至少需要 2 个值"),
    (norms.BatchNorm(4), torch.randn(1, 4, 1, 1), "至少需要 2 个值"),
    (norms.LayerNorm(8), torch.randn(2, 7), "normalized_shape=(8,)"),
    (norms.LayerNorm((3, 8)), torch.randn(2, 4, 8), "normalized_shape=(3, 8)"),
    (norms.LayerNorm((3, 8)), torch.randn(8), "最后 2 维"),
    (norms.RMSNorm(8), torch.randn(2, 6), "normalized_shape=(8,)"),
    (norms.GroupNorm(2, 4), torch.randn(2, 6, 3), "num_channels = 4"),
    (norms.InstanceNorm(3), torch.randn(2, 3), "(N, C, L)"),
    (norms.InstanceNorm(3), torch.randn(2, 3, 1), "至少需要 2 个空间位置"),
])
def test_bad_input_raises_clear_value_error(module, x, needle):
    with pytest.raises(ValueError) as err:
        module(x)
    assert needle in str(err.value)
    assert str(tuple(x.shape)) in str(err.value) or needle == "至少需要 2 个空间位置"


def test_batch_of_one_in_eval_is_fine():
    ours, ref = norms.BatchNorm(4), nn.BatchNorm1d(4)
    x = torch.randn(32, 4) * 2 + 1
    ours(x), ref(x)
    ours.eval(), ref.eval()
    one = torch.randn(1, 4)
    torch.testing.assert_close(ours(one), ref(one))


def test_non_tensor_and_integer_inputs_raise_type_error():
    with pytest.raises(TypeError, match="torch.Tensor"):
        norms.LayerNorm(3)([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="x.float()"):
        norms.BatchNorm(3)(torch.ones(4, 3, dtype=torch.long))


def test_groupnorm_rejects_indivisible_groups():
    with pytest.raises(ValueError, match="整除"):
        norms.GroupNorm(3, 4)


@pytest.mark.parametrize("kind", KINDS)
def test_eps_placement_shows_on_tiny_inputs(kind):
    """With |x| ~ 1e-3 the variance (~1e-6) is comparable to eps: eps outside the root would fail."""
    torch.manual_seed(0)
    ours, ref, shape = make_pair(kind)
    x = torch.randn(shape) * 1e-3
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("shape", [(0, 3, 5), (0, 3, 4, 4)])
@pytest.mark.parametrize("affine", [False, True])
def test_instancenorm_empty_batch_returns_what_torch_returns(shape, affine):
    """N = 0 without running statistics: torch returns an empty tensor of the same shape (ours raised a
    raw IndexError). With running statistics torch itself raises an IndexError (select() on the empty batch);
    ours says why in Chinese with the English term in training, and normalises the empty batch in eval."""
    ref_cls = nn.InstanceNorm1d if len(shape) == 3 else nn.InstanceNorm2d
    x = torch.randn(shape)
    ours = norms.InstanceNorm(3, affine=affine)
    assert ours(x).shape == x.shape
    if not affine:                       # torch's affine InstanceNorm raises an IndexError on N = 0 itself
        assert ref_cls(3)(x).shape == x.shape
    tracked = norms.InstanceNorm(3, affine=affine, track_running_stats=True)
    with pytest.raises(ValueError, match="空 batch"):
        tracked(x)
    tracked.eval()                       # the running statistics normalise an empty batch to an empty batch
    assert tracked(x).shape == x.shape
