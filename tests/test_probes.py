"""normlab.probes on a network whose gradients are computed by hand (float64 matrix products)."""

import pytest
import torch
from torch import nn

from normlab import blocks, probes


def _linear_chain(n=4, w=5, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(*[nn.Linear(w, w, bias=False) for _ in range(n)]).double()


def test_gradients_of_a_linear_chain_match_hand_computation():
    net = _linear_chain()
    x = torch.randn(3, 5, dtype=torch.float64)
    loss = lambda y: 0.5 * (y ** 2).sum()                       # dL/dy = y
    p = probes.probe(net, x, loss)
    Ws = [layer.weight.detach() for layer in net]
    hs = [x]
    for W in Ws:
        hs.append(hs[-1] @ W.T)                                  # h_i = h_{i-1} W_i^T
    g = [None] * 4
    g[3] = hs[4]                                                 # dL/dh_N = y
    for i in (2, 1, 0):
        g[i] = g[i + 1] @ Ws[i + 1]                              # dL/dh_i = dL/dh_{i+1} W_{i+1}
    dW = [g[i].T @ hs[i] for i in range(4)]                      # dL/dW_i = g_i^T h_{i-1}
    assert p.grad_norm == pytest.approx([t.norm().item() for t in g], rel=1e-10)
    assert p.weight_grad_of("weight") == pytest.approx([t.norm().item() for t in dW], rel=1e-10)
    assert p.act_std == pytest.approx([h.std().item() for h in hs[1:]], rel=1e-10)
    assert p.act_mean == pytest.approx([h.mean().item() for h in hs[1:]], rel=1e-10)
    assert p.stream_norm == pytest.approx([h.norm(dim=1).mean().item() for h in hs[1:]], rel=1e-10)
    assert p.loss == pytest.approx(0.5 * (hs[4] ** 2).sum().item())


def test_residual_block_gradient_matches_autograd_of_unrolled_formula():
    stack = blocks.build_stack(3, 8, "post", final_norm=False).double()
    x = torch.randn(4, 8, dtype=torch.float64)
    p = probes.probe(stack, x)
    # independent path: differentiate each layer input with torch.autograd.grad
    hs = [x.clone().requires_grad_(True)]
    for b in stack.blocks:
        hs.append(b(hs[-1]))
    grads = torch.autograd.grad(probes.default_loss(hs[-1]), hs[1:])
    assert p.grad_norm == pytest.approx([g.norm().item() for g in grads], rel=1e-9)


def _no_hooks(model):
    return all(not m._forward_hooks and not m._forward_pre_hooks and not m._backward_hooks
               and not getattr(m, "_backward_pre_hooks", None) for m in model.modules())


def test_hooks_grads_and_weights_leave_no_residue():
    stack = blocks.build_stack(4, 8, "pre")
    before = {k: v.clone() for k, v in stack.state_dict().items()}
    x = torch.randn(6, 8)
    p = probes.probe(stack, x, steps=3, lr=1e-2)
    assert _no_hooks(stack)
    assert all(q.grad is None for q in stack.parameters())
    for k, v in stack.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert len(p.update_ratio) == 3 and len(p.update_ratio[0]) == 4
    probes.streams(stack, x)
    assert _no_hooks(stack)


def test_hooks_removed_when_the_loss_raises():
    stack = blocks.build_stack(2, 8)

    def bad_loss(y):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        probes.probe(stack, torch.randn(2, 8), bad_loss)
    assert _no_hooks(stack)


def test_first_adam_update_ratio_is_lr_sqrt_numel_over_norm():
    # Adam's first step moves every weight by lr * g/(|g| + eps') ~ lr: ||dW|| = lr * sqrt(numel)
    net = _linear_chain(2, 6).float()
    x = torch.randn(8, 6)
    p = probes.probe(net, x, steps=1, lr=1e-3)
    expected = [1e-3 * 6 / layer.weight.norm().item() for layer in net]
    assert p.update_ratio[0] == pytest.approx(expected, rel=1e-3)


def test_streams_and_jacobian_norms():
    net = _linear_chain(3, 4)
    x = torch.randn(2, 4, dtype=torch.float64)
    hs = probes.streams(net, x)
    assert len(hs) == 4 and torch.equal(hs[0], x)
    torch.testing.assert_close(hs[3], net(x))
    norms = probes.jacobian_norms(list(net), x[0])
    assert norms == pytest.approx([torch.linalg.svdvals(l.weight)[0].item() for l in net], rel=1e-9)
    rms = probes.jacobian_norms(list(net), x[0], kind="rms")
    assert rms == pytest.approx([(l.weight.norm() / 2).item() for l in net], rel=1e-9)   # ||W||_F / sqrt(4)
    res = blocks.Residual(nn.Linear(4, 4, bias=False).double(), 4, wiring="pre", norm="none")
    (j,) = probes.jacobian_norms([res], x[0])
    assert j == pytest.approx(torch.linalg.svdvals(torch.eye(4, dtype=torch.float64) + res.sublayer.weight)[0].item())


def test_bad_inputs():
    with pytest.raises(TypeError, match="nn.Module"):
        probes.probe(lambda t: t, torch.randn(2))
    with pytest.raises(TypeError, match="Tensor"):
        probes.probe(nn.Linear(2, 2), [1.0, 2.0], layers=[])
    with pytest.raises(ValueError, match="layers"):
        probes.probe(nn.Linear(2, 2), torch.randn(1, 2))
    with pytest.raises(ValueError, match="kind"):
        probes.jacobian_norms([nn.Linear(2, 2)], torch.randn(2), kind="frobenius")
    with pytest.raises(ValueError, match="1-D"):
        probes.jacobian_norms([nn.Linear(2, 2)], torch.randn(1, 2))
