"""Residual blocks whose wiring is a parameter, and stacks of N of them.

One sublayer F (an MLP, or self-attention) wrapped by ``Residual`` in one of five wirings:

    plain      y = Norm(F(x))                 no residual (Norm may be "none")
    post       y = Norm(x + s*F(x))           Post-Norm: original Transformer, BERT
    pre        y = x + s*F(Norm(x))           Pre-Norm: GPT-2, LLaMA
    sandwich   y = x + s*Norm2(F(Norm(x)))    norm on the branch output too (Gemma 2/3, Peri-LN)
    deepnorm   y = Norm(alpha*x + F(x))       DeepNet (Wang et al. 2022, §4.2); beta is an init

``s`` is the residual scaling: 1 ("none"), ReZero's zero-init scalar, LayerScale's per-channel
vector (CaiT), or GPT-2's init rule ("gpt2": the weights that write into the stream, fc2 and
out_proj, get std/sqrt(2N) at init; s stays 1). Norms are ``torch.nn.LayerNorm`` /
``torch.nn.RMSNorm`` (faster than the reference ones in ``normlab.norms``, and identical to
them up to rounding: tests/test_norms.py).

Parameter names follow the usual implementations so ``normlab.init`` can find them:
attention ``q_proj k_proj v_proj out_proj``, MLP ``fc1 fc2``. The models built from a stack
(a digits classifier, a sequence model) are in ``normlab.models``.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .init import deepnorm_constants, init_weights_

__all__ = ["WIRINGS", "NORMS", "SCALINGS", "SUBLAYERS", "MLP", "SelfAttention", "CrossAttention", "Residual", "Block",
           "Stack", "build_stack", "make_norm", "seeded"]

WIRINGS = ("plain", "post", "pre", "sandwich", "deepnorm")
NORMS = ("layernorm", "rmsnorm", "none")
SCALINGS = ("none", "rezero", "layerscale", "gpt2")
SUBLAYERS = ("mlp", "transformer", "decoder")


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise ValueError(f"{what} 应为 {allowed} 之一，实际收到 {value!r}。"
                         f" ({what} expected one of {allowed}, got {value!r}.)")
    return value


def make_norm(norm: str, width: int) -> nn.Module:
    """torch.nn.LayerNorm, torch.nn.RMSNorm (eps 1e-6, as LLaMA) or Identity."""
    _choice(norm, NORMS, "norm")
    if norm == "layernorm":
        return nn.LayerNorm(width)
    if norm == "rmsnorm":
        return nn.RMSNorm(width, eps=1e-6)
    return nn.Identity()


class MLP(nn.Module):
    """F(x) = fc2(act(fc1(x))), hidden width ``mult * width``."""

    def __init__(self, width: int, mult: int = 4, act: str = "relu") -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, mult * width)
        self.fc2 = nn.Linear(mult * width, width)
        self.act = {"relu": nn.ReLU(), "gelu": nn.GELU(), "tanh": nn.Tanh()}[act]

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SelfAttention(nn.Module):
    """Multi-head self-attention on (batch, seq, width): softmax(q k^T / sqrt(d_head)) v, then out_proj."""

    def __init__(self, width: int, heads: int = 4, causal: bool = False) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width={width} 不能被头数 heads={heads} 整除 (width must be divisible by heads)。")
        self.heads, self.causal = heads, causal
        self.q_proj, self.k_proj = nn.Linear(width, width), nn.Linear(width, width)
        self.v_proj, self.out_proj = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() == 2:                        # (batch, width): treat as one token per sample
            return self.forward(x[:, None])[:, 0]
        b, s, w = x.shape
        split = lambda t: t.view(b, s, self.heads, w // self.heads).transpose(1, 2)  # (b, h, s, d_head)
        y = F.scaled_dot_product_attention(split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x)),
                                           is_causal=self.causal)
        return self.out_proj(y.transpose(1, 2).reshape(b, s, w))


class CrossAttention(SelfAttention):
    """Queries from x, keys and values from a fixed ``memory`` (1, M, width): a decoder's attention to
    the encoder output. Here the memory is a fixed random tensor standing in for an encoder."""

    def __init__(self, width: int, memory: Tensor, heads: int = 4) -> None:
        super().__init__(width, heads, causal=False)
        self.register_buffer("memory", memory, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() == 2:
            return self.forward(x[:, None])[:, 0]
        b, s, w = x.shape
        mem = self.memory.expand(b, -1, -1)
        split = lambda t: t.view(b, t.shape[1], self.heads, w // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(split(self.q_proj(x)), split(self.k_proj(mem)), split(self.v_proj(mem)))
        return self.out_proj(y.transpose(1, 2).reshape(b, s, w))


class Residual(nn.Module):
    """One sublayer F with its Add & Norm, wired as ``wiring`` (see the module docstring)."""

    def __init__(self, sublayer: nn.Module, width: int, wiring: str = "pre", norm: str = "layernorm",
                 scaling: str = "none", alpha: float = 1.0, layerscale_init: float = 1e-4) -> None:
        super().__init__()
        self.wiring = _choice(wiring, WIRINGS, "wiring")
        self.scaling = _choice(scaling, SCALINGS, "scaling")
        self.sublayer, self.alpha = sublayer, float(alpha)
        self.norm = make_norm(norm, width)
        self.norm2 = make_norm(norm, width) if wiring == "sandwich" else None
        if scaling == "rezero":
            self.gain = nn.Parameter(torch.zeros(()))                         # ReZero: s = 0 at init
        elif scaling == "layerscale":
            self.gain = nn.Parameter(torch.full((width,), layerscale_init))  # CaiT: diag(s), small
        else:
            self.gain = None

    def scale(self, fx: Tensor) -> Tensor:
        return fx if self.gain is None else self.gain * fx

    def forward(self, x: Tensor) -> Tensor:
        w = self.wiring
        if w == "plain":
            return self.norm(self.scale(self.sublayer(x)))          # Norm(F(x))
        if w == "post":
            return self.norm(x + self.scale(self.sublayer(x)))      # Norm(x + F(x))
        if w == "pre":
            return x + self.scale(self.sublayer(self.norm(x)))      # x + F(Norm(x))
        if w == "sandwich":
            return x + self.scale(self.norm2(self.sublayer(self.norm(x))))  # x + Norm2(F(Norm(x)))
        return self.norm(self.alpha * x + self.scale(self.sublayer(x)))     # deepnorm: Norm(alpha x + F(x))


class Block(nn.Module):
    """A layer of the stack: one MLP sublayer ("mlp"); self-attention then MLP ("transformer");
    or causal self-attention, cross-attention to ``memory``, then MLP ("decoder", 3 sublayers)."""

    def __init__(self, width: int, sublayer: str = "mlp", heads: int = 4, causal: bool = False,
                 act: str = "relu", memory: Tensor | None = None, **wiring) -> None:
        super().__init__()
        _choice(sublayer, SUBLAYERS, "sublayer")
        self.attn = (Residual(SelfAttention(width, heads, causal or sublayer == "decoder"), width, **wiring)
                     if sublayer != "mlp" else None)
        self.cross = (Residual(CrossAttention(width, memory, heads), width, **wiring)
                      if sublayer == "decoder" else None)
        self.mlp = Residual(MLP(width, act=act), width, **wiring)

    def forward(self, x: Tensor) -> Tensor:
        if self.attn is not None:
            x = self.attn(x)
        if self.cross is not None:
            x = self.cross(x)
        return self.mlp(x)


class Stack(nn.Module):
    """N blocks plus an optional final norm (GPT-2's ln_f). ``blocks[i]`` is layer i (0 = first)."""

    def __init__(self, blocks: list[Block], final_norm: nn.Module) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x)
        return self.final_norm(x)


def seeded(seed: int | None):
    """A context in which torch's global RNG starts at ``seed`` and is restored afterwards, so building
    a model never moves the notebook's own random stream (None: no reseeding, use the stream as it is)."""
    return nullcontext() if seed is None else _forked(seed)


@contextmanager
def _forked(seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def build_stack(depth: int, width: int = 64, wiring: str = "pre", norm: str = "layernorm",
                sublayer: str = "mlp", scaling: str = "none", final_norm: bool | None = None,
                heads: int = 4, causal: bool = False, act: str = "relu", layerscale_init: float = 1e-4,
                seed: int | None = 0) -> Stack:
    """N = ``depth`` blocks of the given wiring, Xavier init, and a final norm.

    sublayer="decoder": every layer cross-attends to one fixed N(0, 1) memory of 8 positions.

    final_norm=None: a final norm for pre/sandwich (they leave the stream unnormalised), none otherwise.
    deepnorm: alpha, beta from ``normlab.init.deepnorm_constants`` with N = depth: the encoder(-only)
    constants, or for sublayer="decoder" (three sublayers per layer) those of an encoder-decoder's decoder.
    """
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth 应为正整数 (depth must be a positive integer)，实际收到 {depth!r}。")
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width 应为正整数 (width must be a positive integer)，实际收到 {width!r}。")
    _choice(wiring, WIRINGS, "wiring")
    _choice(norm, NORMS, "norm")
    if wiring in ("post", "deepnorm", "sandwich") and norm == "none":
        raise ValueError(f"wiring={wiring!r} 需要一个归一化层 (needs a norm): 请选 'layernorm' 或 'rmsnorm'。")
    arch = "encdec_decoder" if sublayer == "decoder" else "encoder"
    alpha, beta = deepnorm_constants(arch, depth, depth) if wiring == "deepnorm" else (1.0, None)
    with seeded(seed):
        memory = torch.randn(1, 8, width) if sublayer == "decoder" else None   # stands in for an encoder output
        blocks = [Block(width, sublayer, heads, causal, act, memory, wiring=wiring, norm=norm, scaling=scaling,
                        alpha=alpha, layerscale_init=layerscale_init) for _ in range(depth)]
        if final_norm is None:
            final_norm = wiring in ("pre", "sandwich")
        stack = Stack(blocks, make_norm(norm, width) if final_norm else nn.Identity())
        init_weights_(stack, depth, scaling, beta)
    return stack
