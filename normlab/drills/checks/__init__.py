"""The checks behind ``drills.check``, one file per card family. Read them in this order:

    probes.py      run the submission safely; find γ, β and the running statistics; build it as torch.nn is called
    references.py  torch's semantics written out in float64 (what "right" means)
    formulas.py    the fast path: known wrong formulas and their combinations, searched for the one that
                   reproduces the output (unbiased variance × ε outside the root × no root × wrong axes ...)
    properties.py  the general path: properties measured on the submission as a black box (which elements
                   share statistics, how the output scales with the input, where ε acts, the scale and
                   centring of the output, γ/β, a least-squares fit of a backward pass on the true terms)
    diagnosis.py   each property that differs from torch's, in the candidate's words, with the fix
    messages.py    the texts of the known mistakes
    roles.py       which tensor is γ, β, the running mean and variance: measured by what it does, never by its name
    keepdim.py     a broadcast error said only as far as the source shows it (a reduction without keepdim)
    geometry.py    where each norm's statistics and parameters live, in every layout a card allows
    backward_compare.py, backward_fit.py   a backward's gradients against autograd, named slip by slip or term by term
    running.py     BatchNorm's running statistics, term by term
    layernorm.py, batchnorm.py (+ batchnorm_modes.py), groupnorm.py, backward.py, blocks.py   the cards

Every check compares with torch's own semantics (F.layer_norm, F.rms_norm, F.batch_norm, float64
autograd) on several probes (eps 1e-5 and 1e-2, |x| from 1e-3 to 1e3). Every finding has a level:
``interview`` (the formula and its semantics) or ``production`` (a drop-in for the torch module)."""

from .backward import backward_checks
from .batchnorm import bn_checks
from .blocks import (block_checks, deepnorm_constant_checks, deepnorm_init_checks, deepnorm_residual_checks, dyt_checks,
                     paper_deepnorm)
from .groupnorm import gn_checks
from .layernorm import ln_checks
from .references import _bn_axes, _ln_reference, _torch_bn

__all__ = ["gn_checks", "backward_checks", "block_checks", "bn_checks", "deepnorm_constant_checks", "deepnorm_init_checks",
           "deepnorm_residual_checks", "dyt_checks", "ln_checks", "paper_deepnorm", "_ln_reference", "_torch_bn",
           "_bn_axes"]
