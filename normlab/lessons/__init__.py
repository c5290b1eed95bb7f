"""Each lesson's experiment machinery. A lesson module imports the core (norms, variants, init,
blocks, models, data, train, probes, viz, record) and never another lesson module.

    residuals    01  the lesion study
    batchnorm    02  momentum conventions, the grad-mode bug, noisy BN, small BN/GN/LN networks, BN folding
    sync_bn      02  synchronised BatchNorm across two processes (torch.distributed, gloo)
    layernorm    03  variance algorithms rounded step by step (one-pass, two-pass, Welford)
    invariance   03, 04  Ba et al.'s Table 1, measured
    deepnorm     05  DeepNorm's wrong versions and DeepNet's measurements at init
    placement    06  Xiong et al. at small scale; Pre-Norm as width; which model uses which norm
    warmup       06  Post-LN with and without warm-up, and Pre-LN
    beyond       07  ScaleNorm, PowerNorm, QK-norm, DyT
"""
