"""Lesson 01's measurements that live in the core: the smallest singular value of a block's Jacobian
(probes.jacobian_norms(kind="min"), section 2's sigma_min) against numpy's SVD of I + W, and the
course's one update:data ratio (probes.update_data_ratio, lessons 02 and 06) against a hand computation.
The lesion study: normlab.lessons.residuals against DigitsNet with the block removed by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from normlab import blocks, models, probes
from normlab.lessons import residuals


def test_sigma_min_of_a_linear_residual_block_is_numpys_smallest_singular_value_of_i_plus_w():
    torch.manual_seed(0)
    res = blocks.Residual(nn.Linear(5, 5, bias=False).double(), 5, wiring="pre", norm="none")
    with torch.no_grad():
        res.sublayer.weight.copy_(torch.randn(5, 5, dtype=torch.float64) * 0.8)
    x = torch.randn(5, dtype=torch.float64)
    w = res.sublayer.weight.detach().numpy()
    sv = np.linalg.svd(np.eye(5) + w, compute_uv=False)
    (smin,) = probes.jacobian_norms([res], x, kind="min")
    (smax,) = probes.jacobian_norms([res], x, kind="spectral")
    assert smin == pytest.approx(sv[-1], rel=1e-9) and smax == pytest.approx(sv[0], rel=1e-9)
    assert smin < 1 < smax                              # I + W shrinks one direction and stretches another
    with pytest.raises(ValueError, match="kind"):
        probes.jacobian_norms([res], x, kind="max")


def test_update_data_ratio_is_the_frobenius_ratio_pooled_over_tensors():
    before = [torch.tensor([[3.0, 0.0], [0.0, 4.0]]), torch.tensor([[0.0]])]   # ||W||_F = 5
    after = [torch.tensor([[3.0, 0.3], [0.0, 4.0]]), torch.tensor([[0.4]])]    # ||dW||_F = 0.5
    assert probes.update_data_ratio(before, after) == pytest.approx(0.1, rel=1e-6)
    with pytest.raises(ValueError, match="update_data_ratio"):
        probes.update_data_ratio([], [])


def test_lesion_accuracy_deletes_one_block_at_a_time():
    torch.manual_seed(1)
    net = models.DigitsNet(3, 16, "pre", seed=1).eval()
    x, y = torch.randn(40, 64), torch.randint(0, 10, (40,))
    got = residuals.lesion_accuracy(net, x, y)
    for i in range(3):
        with torch.no_grad():
            h = net.embed(x)
            for j, block in enumerate(net.stack.blocks):
                h = h if j == i else block(h)
            acc = (net.head(net.stack.final_norm(h)).argmax(-1) == y).float().mean().item()
        assert got[i] == pytest.approx(acc)
