"""How the course's stacks are initialised, in one place: Xavier, GPT-2's 1/sqrt(2N), and DeepNet's
alpha / beta (Wang et al. 2022, "DeepNet", arXiv 2203.00555).

DeepNorm is a Post-LN residual update with the identity branch up-weighted and a down-scaled init:

    x_{l+1} = LN(alpha * x_l + G_l(x_l))                 (§4.2; Post-LN is alpha = 1)

alpha multiplies the identity branch x (not the sublayer output); beta is used once, at
initialisation, as the Xavier gain of the FFN weights and of the attention value and output
projections; the query and key projections keep gain 1 (§4.3). The wiring is ``normlab.blocks``
(``build_stack(..., wiring="deepnorm")``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ARCHITECTURES", "SCALED", "WRITE_TO_STREAM", "deepnorm_constants", "init_weights_", "torchscale_init_"]

ARCHITECTURES = ("encoder", "decoder", "encdec_encoder", "encdec_decoder")
SCALED = ("fc1", "fc2", "v_proj", "out_proj")     # what beta scales (§4.3); q_proj, k_proj untouched
WRITE_TO_STREAM = ("fc2", "out_proj")             # what GPT-2's init scales: the layers that write into the stream


def deepnorm_constants(arch: str, N: int = 0, M: int = 0) -> tuple[float, float]:
    """(alpha, beta) from §4.3 for N encoder layers and M decoder layers.

    encoder-only        alpha = (2N)^(1/4)              beta = (8N)^(-1/4)
    decoder-only        alpha = (2M)^(1/4)              beta = (8M)^(-1/4)
    enc-dec, encoder    alpha = 0.81 (N^4 M)^(1/16)     beta = 0.87 (N^4 M)^(-1/16)
    enc-dec, decoder    alpha = (3M)^(1/4)              beta = (12M)^(-1/4)
    (torchscale's code gives the enc-dec encoder beta = 1.15 (N^4 M)^(-1/16): 1/1.15 = 0.87 was
    meant; see notebook 05.) For "decoder" a single count may be passed as N.
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch 应为 {ARCHITECTURES} 之一，实际 {arch!r} (unknown architecture)")
    if arch == "decoder" and M == 0:
        M = N
    if arch == "encoder":
        _positive(N=N)
        return (2 * N) ** 0.25, (8 * N) ** -0.25
    if arch == "decoder":
        _positive(M=M)
        return (2 * M) ** 0.25, (8 * M) ** -0.25
    _positive(N=N, M=M)
    if arch == "encdec_encoder":
        return 0.81 * (N ** 4 * M) ** (1 / 16), 0.87 * (N ** 4 * M) ** (-1 / 16)
    return (3 * M) ** 0.25, (12 * M) ** -0.25


def _positive(**counts: int) -> None:
    for name, v in counts.items():
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"层数 {name} 应为正整数 (layer count must be a positive integer)，实际 {v!r}")


@torch.no_grad()
def init_weights_(model: nn.Module, depth: int, scaling: str = "none", deepnorm_beta: float | None = None) -> list[str]:
    """Xavier-normal weights, zero biases (Xiong et al. 2020 §3.3 assume Xavier init). Returns the
    names of the weights scaled by beta.

    deepnorm_beta: the weights named in SCALED get xavier_normal_(gain=beta), q_proj / k_proj gain 1
    (DeepNet §4.3). scaling="gpt2": the weights named in WRITE_TO_STREAM times 1/sqrt(2N), N = number
    of blocks, as GPT-2's c_proj init std 0.02/sqrt(2*n_layer) (2 residual layers per block; an
    MLP-only stack has one per block, so this is a little stronger than GPT-2's 1/sqrt(#residuals)).
    """
    scaled = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        leaf = name.rsplit(".", 1)[-1]
        gain = deepnorm_beta if deepnorm_beta is not None and leaf in SCALED else 1.0
        nn.init.xavier_normal_(module.weight, gain=gain)
        if deepnorm_beta is not None and leaf in SCALED:
            scaled.append(name + ".weight")
        if scaling == "gpt2" and leaf in WRITE_TO_STREAM:
            module.weight.mul_(1 / math.sqrt(2 * depth))       # std / sqrt(2N)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    return scaled


@torch.no_grad()
def torchscale_init_(model: nn.Module, init_scale: float, seed: int = 0, bert_init: bool = False) -> None:
    """What the reference implementation (microsoft/torchscale @4d1e0e82) does on the path its code
    runs, for comparison with Figure 2's ``xavier_normal_(gain=beta)`` (``init_weights_``; the course's
    stacks use that one):

    - every ``nn.Linear`` -- fc1, fc2 (``component/feedforward_network.py``) and q/k/v/out_proj
      (``component/multihead_attention.py``) -- keeps PyTorch's default init (weight U(+-1/sqrt(fan_in)),
      std 1/sqrt(3 fan_in); bias U(+-1/sqrt(fan_in))). ``MultiheadAttention.reset_parameters`` (xavier_uniform_
      with gain 1/sqrt(2) on q, k, v; out_proj's bias 0) is never called: not by its constructor, not by
      any call site in the repository (fairseq's MultiheadAttention constructor does call its own);
    - with ``bert_init=True`` (``args.bert_init``, ``architecture/encoder.py`` L232-233 ->
      ``utils.init_bert_params``) every Linear weight is N(0, 0.02) and every Linear bias 0 instead;
    - then every parameter whose *name contains* fc1, fc2, out_proj or v_proj -- weights and biases --
      is divided by ``init_scale`` ((8N)^(1/4) for an encoder, i.e. times beta), ``architecture/encoder.py``
      L245-252.

    Draws from torch's RNG seeded with ``seed`` and restores the caller's stream afterwards."""
    if not init_scale > 0:
        raise ValueError(f"init_scale 应为正数 (must be positive)，实际 {init_scale!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in model.modules():
            if not isinstance(module, nn.Linear):
                continue
            if bert_init:
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            else:
                module.reset_parameters()                                   # nn.Linear's default, as constructed
    for name, p in model.named_parameters():
        if any(s in name for s in SCALED):                                  # substring, as torchscale: biases too
            p.div_(init_scale)
