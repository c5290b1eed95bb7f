"""Lesson 06 (placement): measurements: Xiong et al. 2020 at small scale, and
"does Pre-Norm add width instead of depth?".

    ffn_grads(wiring, depth)    per layer ||dL/dW2|| of the FFN's second matrix (fc2) at initialisation,
                                averaged over seeds: the quantity of Xiong et al. 2020, Fig. 3
    layer_similarity(model, x)  cos(h_{l-1}, h_l) and ||h_l - h_{l-1}|| / ||h_{l-1}|| per layer
    parallel_pair_loss(...)     the loss when layers l and l+1 both read h_{l-1} (one wider layer)
    skip_layer_loss(...)        the loss with layer l removed (any wiring)
    MODELS                      which norm each model uses and where, each row with the source it was read in
    record_ranges(keys, labels) the sweep record's min / median / max of each key (a note when there is none yet)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import probes, runcache
from ..data import Task
from ..models import SequenceModel
from ..record import ranges
from ..train import one_thread

__all__ = ["ffn_grads", "layer_similarity", "parallel_pair_loss", "skip_layer_loss", "sequence_loss",
           "ModelNorm", "MODELS", "record_ranges"]


def record_ranges(keys: Sequence[str], labels: Sequence[str] | None = None, notebook: str = "06_placement"):
    """``normlab.record.ranges`` of this lesson's record (seeds 0-4, and the extra seeds when kept)."""
    return ranges(notebook, keys, labels)


def sequence_loss(model: SequenceModel, x: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy over every position."""
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


def ffn_grads(task: Task, wiring: str, depth: int, width: int = 64, seeds: Sequence[int] = (0, 1, 2, 3),
              sublayer: str = "transformer", batch: int = 32) -> tuple[list[float], list[float]]:
    """(mean over seeds of ||dL/dW_fc2|| per layer, mean stream norm at each layer's input) at init.
    (Under the test run, a learner copy replays it: normlab/runcache.py.)"""
    return runcache.result(lambda: _ffn_grads(task, wiring, depth, width, seeds, sublayer, batch),
                           (task, wiring, depth, width, tuple(seeds), sublayer, batch), desc="placement.ffn_grads")


def _ffn_grads(task: Task, wiring: str, depth: int, width: int, seeds: Sequence[int], sublayer: str,
               batch: int) -> tuple[list[float], list[float]]:
    grads = torch.zeros(depth)
    stream = torch.zeros(depth)
    with one_thread():
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
    h = model.embed(x)
    for i, block in enumerate(blocks):
        if i == l:
            h = block(h) + blocks[l + 1](h) - h          # h + D_l(h) + D_{l+1}(h)
        elif i != l + 1:
            h = block(h)
    return _head_loss(model, h, y)


@torch.no_grad()
def skip_layer_loss(model: SequenceModel, x: Tensor, y: Tensor, l: int) -> float:
    """Loss with layer l (0-based) left out: h_{l+1} = block_{l+1}(h_{l-1}). Works for every wiring."""
    blocks = model.stack.blocks
    if not 0 <= l < len(blocks):
        raise ValueError(f"l 应在 0..{len(blocks) - 1} 之间 (l must index a layer)，实际 {l}。")
    h = model.embed(x)
    for i, block in enumerate(blocks):
        if i != l:
            h = block(h)
    return _head_loss(model, h, y)


def _head_loss(model: SequenceModel, h: Tensor, y: Tensor) -> float:
    """The loss of a stream h that has passed the blocks: final norm, head, cross-entropy."""
    logits = model.head(model.stack.final_norm(h))
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()


# --- which norm each model uses, and where (notebook 06 §5) --------------------------------------

@dataclass(frozen=True)
class ModelNorm:
    """One model's Add & Norm as read in its reference implementation or paper.

    ``eps`` is the published default of the config field ``eps_field`` (``Class.attribute`` of
    HuggingFace transformers; None where the paper gives none), read in ``source``: files under
    transformers' ``src/transformers/models/`` at the commit named, or a paper section.
    ``checks`` are further published config defaults, {``Class.attribute``: value}, that the
    placement column relies on; tests/test_placement.py compares eps and checks with an installed
    transformers when there is one."""

    model: str
    norm: str
    placement: str
    eps: float | None
    eps_field: str | None
    source: str
    checks: tuple[tuple[str, object], ...] = ()

    @property
    def eps_text(self) -> str:
        return "—" if self.eps is None else f"{self.eps:g}"


MODELS = (
    ModelNorm("BERT", "LayerNorm", "Post-LN：LayerNorm(dropout(dense(h)) + 输入)；另有嵌入层 LayerNorm",
              1e-12, "BertConfig.layer_norm_eps",
              "bert/modeling_bert.py @8ec58104, configuration_bert.py @6294b787"),
    ModelNorm("GPT-2", "LayerNorm", "Pre-LN（ln_1、ln_2）+ 最后的 ln_f；c_proj 初始化 std 0.02/√(2·n_layer)",
              1e-5, "GPT2Config.layer_norm_epsilon",
              "Radford et al. 2019 §2.3; gpt2/modeling_gpt2.py @c44b2d99, configuration_gpt2.py @1c70522e"),
    ModelNorm("T5", "T5LayerNorm：只除以 RMS，不减均值、没有 β", "Pre-Norm（每个子层前的 layer_norm）+ 最后的 final_layer_norm",
              1e-6, "T5Config.layer_norm_epsilon", "Raffel et al. 2020 §2.1; t5/modeling_t5.py @6b8b757d"),
    ModelNorm("LLaMA", "RMSNorm（LlamaRMSNorm）", "Pre-Norm（input_layernorm；post_attention_layernorm 其实在 MLP 之前）+ 最后的 norm",
              1e-6, "LlamaConfig.rms_norm_eps",
              "Touvron et al. 2023 §2.2; llama/modeling_llama.py @5dd4a635, configuration_llama.py @4bdeeced"),
    ModelNorm("Qwen2", "RMSNorm（Qwen2RMSNorm，同 Llama）", "Pre-Norm + 最后的 norm",
              1e-6, "Qwen2Config.rms_norm_eps", "qwen2/modeling_qwen2.py @63bb7237, configuration_qwen2.py @caa31776"),
    ModelNorm("Qwen3", "RMSNorm + QK-norm（只在 head_dim 上）", "Pre-Norm + 最后的 norm",
              1e-6, "Qwen3Config.rms_norm_eps", "qwen3/modular_qwen3.py @be64c806, configuration_qwen3.py @1f3ae2b3"),
    ModelNorm("Gemma", "RMSNorm，输出乘 (1 + w)，w 初始化为 0", "Pre-Norm",
              1e-6, "GemmaConfig.rms_norm_eps", "gemma/modeling_gemma.py @c4cdd1a0"),
    ModelNorm("Gemma 2", "(1 + w) RMSNorm", "三明治：子层前后各一个 norm，每层共 4 个",
              1e-6, "Gemma2Config.rms_norm_eps", "gemma2/modeling_gemma2.py @9a80143c"),
    ModelNorm("Gemma 3", "(1 + w) RMSNorm + QK-norm（head_dim 上）", "三明治（每层 4 个 norm）",
              1e-6, "Gemma3TextConfig.rms_norm_eps", "gemma3/modeling_gemma3.py @f14d0cbc"),
    ModelNorm("OLMo 2", "RMSNorm + QK-norm（整个投影宽度，分头之前）", "只在子层输出上：x + Norm(Attn(x))，x + Norm(MLP(x))",
              1e-5, "Olmo2Config.rms_norm_eps", "olmo2/modeling_olmo2.py @7264638d, configuration_olmo2.py @d9ba0a3f"),
    ModelNorm("BLOOM", "LayerNorm", "Pre-LN + 嵌入后的 word_embeddings_layernorm + 最后的 ln_f",
              1e-5, "BloomConfig.layer_norm_epsilon", "bloom/modeling_bloom.py @9d97831a, configuration_bloom.py @d94ee404",
              (("BloomConfig.apply_residual_connection_post_layernorm", False),)),
    ModelNorm("Falcon", "LayerNorm", "并行块：x + Attn(LN(x)) + MLP(LN(x))；7B 共用一个 LN，40B (new_decoder_architecture) 两个",
              1e-5, "FalconConfig.layer_norm_epsilon", "falcon/modeling_falcon.py @44272086, configuration_falcon.py @5fd8edad",
              (("FalconConfig.parallel_attn", True),)),
    ModelNorm("GPT-NeoX / Pythia", "LayerNorm", "并行残差：x + Attn(LN1(x)) + MLP(LN2(x))，两个 LN；+ final_layer_norm",
              1e-5, "GPTNeoXConfig.layer_norm_eps", "gpt_neox/modular_gpt_neox.py @fbc88309, configuration_gpt_neox.py @35aa9bd7",
              (("GPTNeoXConfig.use_parallel_residual", True),)),
    ModelNorm("PaLM", "LayerNorm，没有 bias", "并行块：x + MLP(LN(x)) + Attn(LN(x))", None, None, "Chowdhery et al. 2022 §2"),
)
