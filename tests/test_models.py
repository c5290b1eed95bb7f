"""normlab.models: DigitsNet and SequenceModel against forward passes written out here layer by
layer, He's and Fixup's init rules computed here, and torch's RNG state (building never moves it)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from normlab import blocks
from normlab.models import INITS, DigitsNet, SequenceModel


def _by_hand(net: DigitsNet, x: torch.Tensor, order) -> torch.Tensor:
    """embed -> the blocks in ``order`` -> final norm -> head, each layer called separately."""
    h = F.linear(x, net.embed.weight, net.embed.bias)
    for i in order:
        h = net.stack.blocks[i](h)
    return F.linear(net.stack.final_norm(h), net.head.weight, net.head.bias)


def test_digitsnet_logits_and_skip_against_the_layers_by_hand():
    net = DigitsNet(4, 16, "pre", seed=3)
    x = torch.rand(5, 64)
    with torch.no_grad():
        assert net(x).shape == (5, 10)
        torch.testing.assert_close(net(x), _by_hand(net, x, [0, 1, 2, 3]))
        torch.testing.assert_close(net(x, skip=[1, 3]), _by_hand(net, x, [0, 2]))
        torch.testing.assert_close(net(x, skip=range(4)), _by_hand(net, x, []))
        assert not torch.allclose(net(x, skip=[2]), net(x))


def test_sequence_model_shapes_and_embedding():
    m = SequenceModel(vocab=11, seq_len=7, depth=2, width=16, causal=True)
    tokens = torch.randint(0, 11, (3, 7))
    assert m(tokens).shape == (3, 7, 11)
    torch.testing.assert_close(m.embed(tokens[:, :5]), m.tok.weight[tokens[:, :5]] + m.pos[:5])   # shorter input
    with torch.no_grad():
        expected = F.linear(m.stack(m.tok.weight[tokens] + m.pos), m.head.weight, m.head.bias)
        torch.testing.assert_close(m(tokens), expected)
    assert all(b.attn.sublayer.causal for b in m.stack.blocks)


@pytest.mark.parametrize("build", [
    lambda seed: DigitsNet(3, 16, "post", seed=seed, init="he"),
    lambda seed: SequenceModel(9, 5, 2, 16, seed=seed, sublayer="decoder"),
    lambda seed: blocks.build_stack(3, 16, "deepnorm", sublayer="transformer", seed=seed),
])
def test_building_with_a_seed_leaves_torchs_global_rng_alone_and_repeats(build):
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    a = build(7)
    assert torch.equal(torch.random.get_rng_state(), state)              # the notebook's stream did not move
    b, c = build(7), build(8)
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)


def test_seed_none_draws_from_the_global_stream():
    torch.manual_seed(0)
    a = SequenceModel(5, 4, 1, 8, seed=None)
    torch.manual_seed(0)
    b = SequenceModel(5, 4, 1, 8, seed=None)
    assert torch.equal(a.pos, b.pos)
    assert not torch.equal(a.pos, SequenceModel(5, 4, 1, 8, seed=None).pos)     # the stream moved on


# --- DigitsNet's initialisations (notebook 01's network without any norm layer) ---------------

def test_digitsnet_he_init_keeps_the_signal_size_through_a_plain_stack_without_norm():
    torch.manual_seed(0)
    x = torch.randn(512, 64)
    he, xavier = DigitsNet(12, 64, "plain", "none", init="he"), DigitsNet(12, 64, "plain", "none")
    fc1, fc2 = he.stack.blocks[0].mlp.sublayer.fc1, he.stack.blocks[0].mlp.sublayer.fc2
    assert fc1.weight.std().item() == pytest.approx((1 / 64) ** 0.5, rel=0.05)      # reads a linear output
    assert fc2.weight.std().item() == pytest.approx((2 / 256) ** 0.5, rel=0.05)     # reads ReLU(fc1 x)
    assert he.embed.weight.std().item() == pytest.approx((1 / 64) ** 0.5, rel=0.05)
    assert all(torch.count_nonzero(m.bias) == 0 for m in he.modules() if isinstance(m, torch.nn.Linear))

    def last_over_first(net):
        with torch.no_grad():
            h0 = net.embed(x)
            return (net.stack(h0).std() / h0.std()).item()
    assert 0.3 < last_over_first(he) < 3                     # He: the size survives 12 blocks (24 layers)
    assert last_over_first(xavier) < 1e-2                     # Xavier: ~0.57 per block


def test_digitsnet_fixup_init_zeroes_each_branch_end_and_the_classifier():
    net = DigitsNet(12, 64, "pre", "none", init="fixup")
    for block in net.stack.blocks:
        assert torch.count_nonzero(block.mlp.sublayer.fc2.weight) == 0
        assert block.mlp.sublayer.fc1.weight.std().item() == pytest.approx((1 / 64) ** 0.5 * 12 ** -0.5, rel=0.1)
    assert torch.count_nonzero(net.head.weight) == 0
    x = torch.randn(8, 64)
    with torch.no_grad():
        h = net.embed(x)
        assert torch.equal(net.stack(h), h)                   # every block starts as the identity
        assert torch.equal(net(x), torch.zeros(8, 10))        # and the classifier outputs 0


@pytest.mark.parametrize("kwargs, word", [(dict(init="kaiming"), "init"), (dict(wiring="plain", init="fixup"), "Fixup")])
def test_bad_init_gets_a_chinese_error(kwargs, word):
    assert "kaiming" not in INITS
    with pytest.raises(ValueError, match=word) as err:
        DigitsNet(2, 8, **kwargs)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(err.value))
