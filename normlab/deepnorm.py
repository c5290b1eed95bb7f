"""DeepNorm (Wang et al. 2022, "DeepNet", arXiv 2203.00555): a Post-LN residual update with the
identity branch up-weighted, and a down-scaled initialisation.

    x_{l+1} = LN(alpha * x_l + G_l(x_l))                 (§4.2; Post-LN is alpha = 1)

alpha multiplies the identity branch x (not the sublayer output); beta is used once, at
initialisation, as the Xavier gain of the FFN weights and of the attention value and output
projections; the query and key projections keep gain 1 (§4.3). The wiring itself lives in
``normlab.blocks`` (``build_stack(..., wiring="deepnorm")``).
"""

from __future__ import annotations

import torch
from torch import nn

ARCHITECTURES = ("encoder", "decoder", "encdec_encoder", "encdec_decoder")
SCALED = ("fc1", "fc2", "v_proj", "out_proj")     # what beta scales (§4.3); q_proj, k_proj untouched


def constants(arch: str, N: int = 0, M: int = 0) -> tuple[float, float]:
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
def init_(model: nn.Module, beta: float) -> list[str]:
    """Xavier-normal init with gain beta for the weights named in SCALED, gain 1 for q/k;
    biases to zero. Returns the names of the parameters that were scaled by beta."""
    scaled = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            leaf = name.rsplit(".", 1)[-1]
            gain = beta if leaf in SCALED else 1.0
            nn.init.xavier_normal_(module.weight, gain=gain)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
            if leaf in SCALED:
                scaled.append(name + ".weight")
    return scaled


# --- the two wrong versions found in the wild, for the lesson (notebook 05) -----------------
class AlphaOnBranch(nn.Module):
    """LN(x + alpha * G(x)): alpha on the sublayer output (labml's deep_norm, issue #145)."""

    def __init__(self, residual: nn.Module) -> None:
        super().__init__()
        self.r = residual

    def forward(self, x):
        return self.r.norm(x + self.r.alpha * self.r.sublayer(x))


class BetaOnInput(nn.Module):
    """LN(alpha * x + G(beta * x)) with an unscaled init: beta applied to the input at run time."""

    def __init__(self, residual: nn.Module, beta: float) -> None:
        super().__init__()
        self.r, self.beta = residual, beta

    def forward(self, x):
        return self.r.norm(self.r.alpha * x + self.r.sublayer(self.beta * x))


def variant_model(variant: str, depth: int, width: int = 32, seed: int = 0):
    """A digits classifier (normlab.residuals.DigitsNet) whose residual blocks are wired as
    post / pre / deepnorm (correct) / alpha_on_branch / beta_on_input."""
    from .residuals import DigitsNet

    wiring = variant if variant in ("post", "pre", "deepnorm") else "deepnorm"
    model = DigitsNet(depth=depth, width=width, wiring=wiring, norm="layernorm", seed=seed)
    if variant in ("alpha_on_branch", "beta_on_input"):
        _, beta = constants("encoder", depth)
        for block in model.stack.blocks:
            if variant == "alpha_on_branch":
                block.mlp = AlphaOnBranch(block.mlp)
            else:
                for lin in (block.mlp.sublayer.fc1, block.mlp.sublayer.fc2):
                    nn.init.xavier_normal_(lin.weight)            # no beta in the init ...
                block.mlp = BetaOnInput(block.mlp, beta)         # ... beta on the input instead
    return model


def branch_share(model, x) -> list[float]:
    """Per layer at this input: ||G(x)|| / ||alpha x|| (how much each block changes the stream)."""
    shares, h = [], model.embed(x)
    for block in model.stack.blocks:
        r = block.mlp
        inner = getattr(r, "r", r)
        if isinstance(r, AlphaOnBranch):
            g, ident = inner.alpha * inner.sublayer(h), h
        elif isinstance(r, BetaOnInput):
            g, ident = inner.sublayer(r.beta * h), inner.alpha * h
        else:
            g, ident = inner.sublayer(h), inner.alpha * h
        shares.append((g.norm() / ident.norm()).item())
        h = block(h)
    return shares


def init_probe(model, x, y, probe, lr: float = 1e-4) -> dict[str, object]:
    """At initialisation: one cross-entropy backward on (x, y), then one Adam step (learning rate
    ``lr``) on the sublayer weights only (DeepNet's theta: the parameters of the residual branches;
    LN gains, embedding and head stay fixed).

    Returns ``grad_fc1`` / ``grad_fc2``: per layer ||dL/dW|| (bottom layer first), ``update``:
    ||F(probe; theta_1) - F(probe; theta_0)|| per probe sample, ``relative_update``: the same over
    ||F(probe; theta_0)||."""
    import torch.nn.functional as F

    branch = [p for n, p in model.named_parameters() if ".sublayer." in n]
    for p in model.parameters():
        p.grad = None
    with torch.no_grad():
        before = model(probe)
    F.cross_entropy(model(x), y).backward()
    inner = lambda block: getattr(block.mlp, "r", block.mlp).sublayer
    grad_fc1 = [inner(b).fc1.weight.grad.norm().item() for b in model.stack.blocks]
    grad_fc2 = [inner(b).fc2.weight.grad.norm().item() for b in model.stack.blocks]
    torch.optim.Adam(branch, lr=lr).step()
    with torch.no_grad():
        change = (model(probe) - before).norm()
    return {"grad_fc1": grad_fc1, "grad_fc2": grad_fc2, "update": (change / probe.shape[0] ** 0.5).item(),
            "relative_update": (change / before.norm()).item()}


def train_with_updates(model, x, y, probe, steps: int = 100, lr: float = 3e-3, seed: int = 0):
    """Adam without warm-up; per step the loss and ||F(probe; theta_t) - F(probe; theta_{t-1})||
    (the model-update magnitude of DeepNet §3, Figure 3), normalised per probe sample."""
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        prev = model(probe)
    losses, updates = [], []
    for _ in tqdm(range(steps), desc="train", leave=False):
        idx = torch.randint(0, len(y), (64,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():
            cur = model(probe)
        updates.append(((cur - prev).norm() / probe.shape[0] ** 0.5).item())
        losses.append(loss.item())
        prev = cur
    return losses, updates
