"""BatchNorm across devices, for real: two CPU processes talking through torch.distributed (gloo).

Each process ("device") sees only its shard of the batch. Plain BN normalises with the shard's
own statistics; synchronised BN gives every device the statistics of the whole batch. Two
equivalent ways to get them, both run here:

1. All-reduce of sums (written by hand):
       S = sum_devices sum_i x_i,   Q = sum_devices sum_i x_i^2,   n = total count
       mean = S / n,                var = Q / n - mean^2        (accumulated in float64)
2. What ``nn.SyncBatchNorm`` does (torch/nn/modules/_functions.py, ``SyncBatchNorm.forward``): each
   rank computes its (mean_r, invstd_r) with ``torch.batch_norm_stats``, the ranks all-gather
   (mean_r, invstd_r, count_r), and ``torch.batch_norm_gather_stats_with_counts`` combines them:
       mean = sum_r n_r mean_r / n
       var  = sum_r n_r (var_r + (mean_r - mean)^2) / n,   var_r = 1 / invstd_r^2 - eps
   That op has no CPU kernel (and ``nn.SyncBatchNorm`` refuses CPU tensors), so ``combine_gathered``
   writes the same combination out.

The worker lives in this module because ``torch.multiprocessing.spawn`` pickles functions by
reference: a function defined in a notebook cell cannot be found by the child processes.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor

from .. import runcache


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def combine_gathered(mean: Tensor, invstd: Tensor, count: Tensor, eps: float = 1e-5) -> tuple[Tensor, Tensor]:
    """Global (mean, invstd) from per-rank rows mean (R, C), invstd (R, C), count (R,): the
    combination ``torch.batch_norm_gather_stats_with_counts`` computes for ``nn.SyncBatchNorm``."""
    w = count.to(mean.dtype)[:, None]
    n = w.sum()
    g_mean = (w * mean).sum(0) / n
    var_r = 1.0 / invstd ** 2 - eps
    g_var = (w * (var_r + (mean - g_mean) ** 2)).sum(0) / n
    return g_mean, 1.0 / torch.sqrt(g_var + eps)


def _worker(rank: int, world: int, port: int, shards: list[Tensor], out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=60))
    try:
        x = shards[rank].double()                                   # (n_rank, C)
        local_mean, local_var = x.mean(0), x.var(0, unbiased=False)
        packed = torch.cat([x.sum(0), (x * x).sum(0), torch.tensor([float(x.shape[0])], dtype=torch.float64)])
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)              # way 1: all-reduce of sums
        C = x.shape[1]
        S, Q, n = packed[:C], packed[C:2 * C], packed[-1]
        mean = S / n
        var = Q / n - mean ** 2
        # nn.SyncBatchNorm's way: all-gather (mean_r, invstd_r, count_r), then combine
        row = torch.cat([local_mean, 1.0 / torch.sqrt(local_var + 1e-5), torch.tensor([float(x.shape[0])], dtype=torch.float64)])
        rows = [torch.empty_like(row) for _ in range(world)]
        dist.all_gather(rows, row)
        table = torch.stack(rows)
        g_mean, g_invstd = combine_gathered(table[:, :C], table[:, C:2 * C], table[:, -1])
        torch.save({"local_mean": local_mean, "local_var": local_var, "sync_mean": mean, "sync_var": var,
                    "gather_mean": g_mean, "gather_invstd": g_invstd, "gather_out": (x - g_mean) * g_invstd,
                    "local_out": (x - local_mean) / torch.sqrt(local_var + 1e-5),
                    "sync_out": (x - mean) / torch.sqrt(var + 1e-5)}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def sync_batchnorm_demo(x: Tensor, world: int = 2) -> list[dict[str, Tensor]]:
    """Split ``x`` (N, C) into ``world`` shards, run one process per shard, return each rank's
    local and synchronised statistics and outputs (BN without affine): ``sync_*`` from the
    all-reduce of sums, ``gather_*`` from nn.SyncBatchNorm's all-gather of (mean, invstd, count)."""
    if x.dim() != 2 or x.shape[0] < 2 * world:
        raise ValueError(f"sync_batchnorm_demo 需要形状 (N, C) 且 N >= {2 * world} 的输入（每个进程至少 2 行），"
                         f"实际收到 {tuple(x.shape)}。(expected an (N, C) tensor with N >= {2 * world}.)")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # under the test run, a learner copy replays it (normlab/runcache.py): the same x, the same result
    return runcache.result(lambda: _spawn(x, world), (x, world), desc="sync_bn.sync_batchnorm_demo")


def _spawn(x: Tensor, world: int) -> list[dict[str, Tensor]]:
    shards = list(x.chunk(world, dim=0))
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(world, _free_port(), shards, out_dir), nprocs=world, join=True)
        return [torch.load(Path(out_dir) / f"rank{r}.pt") for r in range(world)]
