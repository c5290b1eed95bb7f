"""Measurements for the placement lesson (notebook 06): Xiong et al. 2020 at small scale, and
"does Pre-Norm add width instead of depth?".

    ffn_grads(wiring, depth)    per layer ||dL/dW2|| of the FFN's second matrix (fc2) at initialisation,
                                averaged over seeds: the quantity of Xiong et al. 2020, Fig. 3
    layer_similarity(model, x)  cos(h_{l-1}, h_l) and ||h_l - h_{l-1}|| / ||h_{l-1}|| per layer
    parallel_pair_loss(...)     the loss when layers l and l+1 both read h_{l-1} (one wider layer)
    skip_layer_loss(...)        the loss with layer l removed (any wiring)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from . import probes
from .blocks import SequenceModel
from .tasks import Task

__all__ = ["ffn_grads", "layer_similarity", "parallel_pair_loss", "skip_layer_loss", "sequence_loss"]


def sequence_loss(model: SequenceModel, x: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy over every position."""
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def ffn_grads(task: Task, wiring: str, depth: int, width: int = 64, seeds: Sequence[int] = (0, 1, 2, 3),
              sublayer: str = "transformer", batch: int = 32) -> tuple[list[float], list[float]]:
    """(mean over seeds of ||dL/dW_fc2|| per layer, mean stream norm at each layer's input) at init."""
    grads = torch.zeros(depth)
    stream = torch.zeros(depth)
    for s in seeds:
        model = SequenceModel(task.vocab, task.seq_len, depth, width, wiring=wiring, seed=s, sublayer=sublayer)
        x, y = task.batch(batch, torch.Generator().manual_seed(100 + s))
        p = probes.probe(model, x, lambda logits, y=y: F.cross_entropy(logits.flatten(0, 1), y.flatten()))
        grads += torch.tensor(p.weight_grad_of("mlp.sublayer.fc2.weight"))
        hs = probes.streams(model, x)
        stream += torch.tensor([h.norm(dim=-1).mean().item() for h in hs[:-1]])
    return (grads / len(seeds)).tolist(), (stream / len(seeds)).tolist()


@torch.no_grad()
def layer_similarity(model: SequenceModel, x: Tensor) -> tuple[list[float], list[float]]:
    """Per layer l: mean over tokens of cos(h_{l-1}, h_l), and ||h_l - h_{l-1}|| / ||h_{l-1}||."""
    hs = probes.streams(model, x)
    cos, change = [], []
    for a, b in zip(hs[:-1], hs[1:]):
        cos.append(F.cosine_similarity(a, b, dim=-1).mean().item())
        change.append(((b - a).norm(dim=-1) / a.norm(dim=-1)).mean().item())
    return cos, change


@torch.no_grad()
def parallel_pair_loss(model: SequenceModel, x: Tensor, y: Tensor, l: int) -> float:
    """Loss when layers l and l+1 (0-based) both read h = their common input (Pre-Norm only):

        sequential  h + D_l(h) + D_{l+1}(h + D_l(h))        (what the model computes)
        parallel    h + D_l(h) + D_{l+1}(h)                 (one layer of twice the width)

    with D_i(h) = block_i(h) - h, the residual branches' contribution.
    """
    blocks = model.stack.blocks
    if blocks[0].mlp.wiring != "pre":
        raise ValueError("parallel_pair_loss 只对 Pre-Norm 有意义 (only defined for Pre-Norm: block(h) = h + D(h))。")
    if not 0 <= l < len(blocks) - 1:
        raise ValueError(f"l 应在 0..{len(blocks) - 2} 之间 (l must index a layer with a successor)，实际 {l}。")
    h = model.tok(x) + model.pos[: x.shape[1]]
    for i, block in enumerate(blocks):
        if i == l:
            h = block(h) + blocks[l + 1](h) - h          # h + D_l(h) + D_{l+1}(h)
        elif i != l + 1:
            h = block(h)
    logits = model.head(model.stack.final_norm(h))
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()


@torch.no_grad()
def skip_layer_loss(model: SequenceModel, x: Tensor, y: Tensor, l: int) -> float:
    """Loss with layer l (0-based) left out: h_{l+1} = block_{l+1}(h_{l-1}). Works for every wiring."""
    blocks = model.stack.blocks
    if not 0 <= l < len(blocks):
        raise ValueError(f"l 应在 0..{len(blocks) - 1} 之间 (l must index a layer)，实际 {l}。")
    h = model.tok(x) + model.pos[: x.shape[1]]
    for i, block in enumerate(blocks):
        if i != l:
            h = block(h)
    logits = model.head(model.stack.final_norm(h))
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
