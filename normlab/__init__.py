"""NormLab (归一化实验室): the helper package of the course.

Modules, one concern each (import them explicitly, e.g. ``from normlab import norms``):
    norms         reference BatchNorm / LayerNorm / RMSNorm / GroupNorm / InstanceNorm (= torch.nn)
    viz, env      plot style with Chinese glyphs, small tables; setup() (seed from NORMLAB_SEED) and the environment report
    record        expect(): a checked claim on a measured number, recorded by the seed x thread sweep
    explorer      the axes explorer: which elements share one mean and variance
    numerics      one-pass / two-pass / Welford variance, eps placement
    blocks        residual blocks whose wiring is a parameter (post / pre / sandwich / deepnorm ...)
    probes        per-layer activation / gradient / update:data probes (hooks removed afterwards)
    gradflow      the gradient-flow widget
    tasks, warmup, placement, residuals   experiments of the residuals and placement lessons
    bn_lab, distributed                   experiments of the BatchNorm lesson (2-process sync BN)
    rms_variants, invariance, bench       RMSNorm variants, invariance table, micro-benchmark
    fused         Add + RMSNorm as one Triton kernel (optional extra; interpreted on a CPU)
    deepnorm      DeepNet's alpha / beta and init
    beyond        ScaleNorm, PowerNorm (paper and [C]), QK-norm attention, DyT
    drills        the interview-drill checker (python -m normlab.drills KIND FILE.py)
    errata, concordance   the source-material companion: mistakes with demos, section map
"""

from .env import report, seed, seed_all, setup

__version__ = "0.1.0"
__all__ = ["setup", "seed", "seed_all", "report", "__version__"]
