"""(maintainers) One check's quantity as a function of the seed, measured with the lesson's own functions, where
running the notebook 50 times costs too much (issue 35; ``tools/sweep.py --probe KEY``).

Each probe repeats exactly the calls of the notebook cells that lead to its keys, nothing else. tools/sweep.py runs it
in a child process with the sweep's environment (NORMLAB_SEED, one torch thread) and, before it keeps anything, runs
the notebook itself up to the key's cell on the verification seeds and checks that the probe gives the very same
values: a probe that drifted from its notebook is refused. The runs it keeps are extra runs of the notebook tagged
with the cell the keys belong to, so a later change to that cell drops them like any other run.

    NORMLAB_SEED=3 python3 tools/seed_probes.py multi.max_rise     # prints the probe's values as JSON
"""

from __future__ import annotations

import json
import sys


def residuals_multi() -> dict[str, float]:
    """01_residuals, section 3: the residual DigitsNet of the lesion cell, then the multi-block deletion cell."""
    import numpy as np
    import torch

    import normlab
    from normlab import data, models
    from normlab.lessons import residuals
    from normlab.train import train

    normlab.setup(quiet=True)
    x_tr, y_tr, x_te, y_te = data.digits()
    nets = {"残差 residual": models.DigitsNet(12, 64, "pre", seed=normlab.seed()),
            "普通 plain": models.DigitsNet(12, 64, "plain", seed=normlab.seed())}
    net = nets["残差 residual"]
    train(net, (x_tr, y_tr), steps=300, batch=128, lr=1e-3, seed=normlab.seed(), desc="residual", progress=False)
    net.eval()
    g = torch.Generator().manual_seed(normlab.seed())
    ks = [0, 1, 2, 3, 4, 6, 8]
    mean_acc = [float(np.mean([residuals.skip_accuracy(net, x_te, y_te, skip=(1 + torch.randperm(11, generator=g)[:k]).tolist())
                               for _ in range(8)])) for k in ks]
    return {"multi.max_rise": max(b - a for a, b in zip(mean_acc, mean_acc[1:])),
            "multi.k0-k8": mean_acc[0] - mean_acc[-1], "multi.k2": mean_acc[ks.index(2)], "multi.k8": mean_acc[-1]}


# key -> (notebook, probe): the probe measures this key and the others it returns
PROBES = {"multi.max_rise": ("01_residuals", residuals_multi)}


def main(argv: list[str]) -> int:
    print(json.dumps(PROBES[argv[0]][1]()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
