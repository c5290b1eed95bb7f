"""The two models the course trains, each an embedding, a ``normlab.blocks.Stack`` and a head.

    DigitsNet       64 pixels -> Linear -> Stack of blocks -> Linear -> 10 logits   (lessons 01, 02, 05)
    SequenceModel   tokens -> embeddings + learned positions -> Stack -> per-position logits (06, 07)

Building a model never moves torch's global random stream: its weights come from ``seed``
(``normlab.blocks.seeded``).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor, nn

from .blocks import Stack, build_stack, seeded

__all__ = ["INITS", "DigitsNet", "SequenceModel"]

# How DigitsNet initialises its Linear layers (``init=``):
#   xavier   normlab.init's Xavier-normal init (the stack's own init; the default)
#   he       variance-preserving for ReLU (He et al. 2015, "Delving Deep into Rectifiers", §2.2):
#            std sqrt(2 / fan_in) for a layer that reads a ReLU's output (fc2), sqrt(1 / fan_in) for one
#            that reads a linear output (embed, fc1), so the forward signal keeps its size at any depth
#   fixup    Fixup-style (Zhang et al. 2019, §3, rules 1-2): "he", then each branch's last layer (fc2) and
#            the classifier set to 0, the branch's other layer scaled by L^(-1/(2m-2)) = L^(-1/2) for
#            m = 2 layers per branch. (Fixup's scalar biases and multipliers, rule 3, are left out.)
INITS = ("xavier", "he", "fixup")


class DigitsNet(nn.Module):
    """64 pixels -> Linear -> Stack of ``depth`` blocks -> Linear -> 10 logits."""

    def __init__(self, depth: int, width: int = 64, wiring: str = "pre", norm: str = "layernorm",
                 seed: int = 0, init: str = "xavier", **stack_kwargs) -> None:
        super().__init__()
        if init not in INITS:
            raise ValueError(f"init 应为 {INITS} 之一，实际收到 {init!r}。(init expected one of {INITS}, got {init!r}.)")
        if init == "fixup" and wiring == "plain":
            raise ValueError("Fixup 初始化需要残差连接 (Fixup needs residual branches): wiring='plain' 不行。")
        with seeded(seed):
            self.embed = nn.Linear(64, width)
            self.stack: Stack = build_stack(depth, width, wiring, norm, seed=None, **stack_kwargs)
            self.head = nn.Linear(width, 10)
            if init != "xavier":
                self._reinit(init, depth)

    @torch.no_grad()
    def _reinit(self, init: str, depth: int) -> None:
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                gain = 2.0 if name.endswith("fc2") else 1.0          # fc2 reads ReLU(fc1 x)
                nn.init.normal_(m.weight, std=(gain / m.in_features) ** 0.5)
                nn.init.zeros_(m.bias)
        if init == "fixup":
            for block in self.stack.blocks:
                block.mlp.sublayer.fc1.weight.mul_(depth ** -0.5)     # L^(-1/(2m-2)), m = 2
                nn.init.zeros_(block.mlp.sublayer.fc2.weight)        # the branch starts at 0
            nn.init.zeros_(self.head.weight)

    def forward(self, x: Tensor, skip: Iterable[int] = ()) -> Tensor:
        """Logits; layers whose index is in ``skip`` are left out (the lesion study)."""
        skip = set(skip)
        h = self.embed(x)
        for i, block in enumerate(self.stack.blocks):
            if i not in skip:
                h = block(h)
        return self.head(self.stack.final_norm(h))


class SequenceModel(nn.Module):
    """Token + position embeddings -> Stack of Transformer layers -> linear head (per position)."""

    def __init__(self, vocab: int, seq_len: int, depth: int, width: int = 64, wiring: str = "pre",
                 norm: str = "layernorm", heads: int = 4, causal: bool = False, seed: int | None = 0,
                 sublayer: str = "transformer", **stack_kwargs) -> None:
        super().__init__()
        with seeded(seed):
            self.tok = nn.Embedding(vocab, width)                    # entries ~ N(0, 1)
            self.pos = nn.Parameter(torch.randn(seq_len, width))     # learned positions, N(0, 1)
            self.stack = build_stack(depth, width, wiring, norm, sublayer, heads=heads, causal=causal,
                                     seed=None, **stack_kwargs)
            self.head = nn.Linear(width, vocab)

    def embed(self, tokens: Tensor) -> Tensor:
        """The stream's input h_0 = tok(tokens) + pos."""
        return self.tok(tokens) + self.pos[: tokens.shape[1]]

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.stack(self.embed(tokens)))
