"""Per-layer probes: what the signal and the gradient look like at every layer of a stack.

``probe(model, x)`` runs one forward and one backward pass with hooks on each layer and returns,
per layer i (h_i = output of layer i):

    act_mean, act_std   mean and std of h_i over all its entries
    stream_norm         mean over rows of ||h_i||_2 (the residual stream's size)
    grad_norm           ||dL/dh_i||_F (the gradient that reaches layer i's output)
    weight_grad         {parameter name: ||dL/dW||_F} for the layer's parameters
    update_ratio        with steps > 0: per step, the update:data ratio ``update_data_ratio`` of the
                        layer's weight matrices, on a copy of the model

Every hook is removed before ``probe`` returns (even if the loss raises), and the model you pass
is never changed: optimisation steps run on a deep copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

__all__ = ["Probe", "probe", "find_layers", "streams", "jacobian_norms", "default_loss", "update_data_ratio"]


def update_data_ratio(before: Sequence[Tensor], after: Sequence[Tensor]) -> float:
    """The course's one update:data ratio: ||W_after - W_before||_F / ||W_before||_F, the entries of all
    the given weight tensors pooled (= RMS(dW) / RMS(W)). Karpathy's diagnostic (makemore part 3); his
    code takes std(dW) / std(W), which differs only by the entries' means (weights: mean ~ 0)."""
    if not before or len(before) != len(after):
        raise ValueError("update_data_ratio 需要一一对应、非空的更新前后权重列表。(before/after: equal, non-empty lists)")
    b = torch.cat([t.detach().reshape(-1) for t in before])
    a = torch.cat([t.detach().reshape(-1) for t in after])
    return ((a - b).norm() / b.norm()).item()


@dataclass
class Probe:
    act_mean: list[float]
    act_std: list[float]
    stream_norm: list[float]
    grad_norm: list[float]
    weight_grad: list[dict[str, float]]
    loss: float
    update_ratio: list[list[float]] = field(default_factory=list)   # [step][layer]

    def weight_grad_of(self, name: str) -> list[float]:
        """Per layer: sqrt(sum of ||dL/dW||^2) over parameters whose name contains ``name`` (e.g. "fc2.weight")."""
        return [sum(v ** 2 for k, v in layer.items() if name in k) ** 0.5 for layer in self.weight_grad]


def find_layers(model: nn.Module) -> list[nn.Module]:
    """The layers to probe: ``model.blocks``, ``model.stack.blocks``, or the children of a Sequential."""
    for path in ("blocks", "stack.blocks"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
            return list(obj)
        except AttributeError:
            continue
    if isinstance(model, nn.Sequential):
        return list(model)
    raise ValueError("找不到要探测的层 (no layers to probe)：请传入 layers=[...]，"
                     "或使用带 .blocks 的模型 (a model with .blocks, e.g. normlab.blocks.build_stack)。")


def default_loss(output: Tensor) -> Tensor:
    """L = mean((y - t)^2) with a fixed random target t (seed 0): dL/dy stays O(1) even if y -> 0."""
    g = torch.Generator().manual_seed(0)
    target = torch.randn(output.shape, generator=g, dtype=output.dtype)
    return ((output - target) ** 2).mean()


def _check(model: object, x: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"probe 期望一个 nn.Module (expected an nn.Module)，实际收到 {type(model).__name__}。")
    if not isinstance(x, Tensor):
        raise TypeError(f"probe 期望输入 torch.Tensor (expected a torch.Tensor input)，实际收到 {type(x).__name__}。")


def probe(model: nn.Module, x: Tensor, loss_fn: Callable[[Tensor], Tensor] = default_loss,
          layers: Sequence[nn.Module] | None = None, steps: int = 0, lr: float = 1e-3) -> Probe:
    """One forward + backward with per-layer hooks; ``steps`` Adam steps for update:data ratios."""
    _check(model, x)
    layers = list(layers) if layers is not None else find_layers(model)
    outputs: list[Tensor | None] = [None] * len(layers)
    grads: list[Tensor | None] = [None] * len(layers)
    handles = []

    def on_forward(i: int):
        def hook(_module, _inputs, out):
            outputs[i] = out.detach()
            if out.requires_grad:
                def save(g, i=i):
                    grads[i] = g.detach()
                out.register_hook(save)      # a hook on this forward's tensor: it dies with the graph
        return hook

    for i, layer in enumerate(layers):
        handles.append(layer.register_forward_hook(on_forward(i)))
    saved_grads = {p: p.grad for p in model.parameters()}
    try:
        for p in model.parameters():
            p.grad = None
        loss = loss_fn(model(x))
        loss.backward()
        weight_grad = [{n: p.grad.norm().item() for n, p in layer.named_parameters() if p.grad is not None}
                       for layer in layers]
    finally:
        for h in handles:
            h.remove()
        for p, g in saved_grads.items():     # leave .grad as it was before the probe
            p.grad = g
    missing = [i for i, o in enumerate(outputs) if o is None]
    if missing:
        raise ValueError(f"这些层在前向传播中没有被调用 (layers never called in forward): {missing}")
    flat = lambda t: t.reshape(-1, t.shape[-1])
    result = Probe(
        act_mean=[o.mean().item() for o in outputs],
        act_std=[o.std().item() for o in outputs],
        stream_norm=[flat(o).norm(dim=-1).mean().item() for o in outputs],
        grad_norm=[g.norm().item() if g is not None else 0.0 for g in grads],
        weight_grad=weight_grad,
        loss=loss.item(),
    )
    if steps > 0:
        result.update_ratio = _update_ratios(model, layers, x, loss_fn, steps, lr)
    return result


def _update_ratios(model: nn.Module, layers: Sequence[nn.Module], x: Tensor,
                   loss_fn: Callable[[Tensor], Tensor], steps: int, lr: float) -> list[list[float]]:
    """update_data_ratio per layer (its weight matrices pooled) for each of ``steps`` Adam steps, on a copy."""
    index = {id(m): i for i, m in enumerate(model.modules())}
    twin = copy.deepcopy(model)
    twin_modules = list(twin.modules())
    twin_layers = [twin_modules[index[id(layer)]] for layer in layers]
    opt = torch.optim.Adam(twin.parameters(), lr=lr)
    ratios = []
    for _ in range(steps):
        weights = [[p for p in layer.parameters() if p.dim() >= 2] for layer in twin_layers]
        before = [[p.detach().clone() for p in ws] for ws in weights]
        opt.zero_grad(set_to_none=True)
        loss_fn(twin(x)).backward()
        opt.step()
        ratios.append([update_data_ratio(bs, ws) if ws else 0.0 for ws, bs in zip(weights, before)])
    return ratios


@torch.no_grad()
def streams(model: nn.Module, x: Tensor, layers: Sequence[nn.Module] | None = None) -> list[Tensor]:
    """[h_0, h_1, ..., h_N]: the input of the first layer, then every layer's output (no grad)."""
    _check(model, x)
    layers = list(layers) if layers is not None else find_layers(model)
    seen: list[Tensor] = []
    handles = [layers[0].register_forward_pre_hook(lambda _m, inp: seen.append(inp[0].detach()))]
    handles += [layer.register_forward_hook(lambda _m, _i, out: seen.append(out.detach())) for layer in layers]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return seen


def jacobian_norms(layers: Sequence[nn.Module], x: Tensor, kind: str = "spectral") -> list[float]:
    """Norm of each layer's Jacobian d h_i / d h_{i-1} at one input vector x (shape (width,)).

    kind="spectral": ||J||_2, the largest stretch of any direction; the product over layers bounds
                     the end-to-end Jacobian's norm (chain rule), often loosely.
    kind="rms":      ||J||_F / sqrt(n_out), the root-mean-square singular value: how much a typical
                     (random) direction is stretched.
    kind="min":      the smallest singular value sigma_min: how much the most-shrunk direction keeps
                     (the worst case for vanishing; the product over layers bounds the end-to-end
                     sigma_min from below).
    """
    if not isinstance(x, Tensor) or x.dim() != 1:
        raise ValueError("jacobian_norms 期望一个一维向量 x (expected a 1-D input vector of shape (width,)).")
    if kind not in ("spectral", "rms", "min"):
        raise ValueError(f"kind 应为 'spectral'、'rms' 或 'min'，实际 {kind!r} (kind expected 'spectral', 'rms' or 'min').")
    norms = []
    h = x.detach()
    for layer in layers:
        f = lambda v, layer=layer: layer(v[None])[0]
        jac = torch.autograd.functional.jacobian(f, h)
        norms.append(torch.linalg.matrix_norm(jac, ord=2).item() if kind == "spectral"
                     else torch.linalg.svdvals(jac)[-1].item() if kind == "min"
                     else (jac.norm() / jac.shape[0] ** 0.5).item())
        with torch.no_grad():
            h = f(h)
    return norms
