"""Add + RMSNorm as one Triton kernel (imported by normlab.fused, which sets TRITON_INTERPRET first)."""

import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_kernel(X, R, W, H, Y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)                                    # one program per row
    cols = tl.arange(0, BLOCK)                                # BLOCK = next power of 2 >= n_cols
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    r = tl.load(R + row * n_cols + cols, mask=mask, other=0.0)
    h = x + r                                                 # h = x + r (in the input dtype)
    tl.store(H + row * n_cols + cols, h, mask=mask)           # the residual stream, written once
    hf = h.to(tl.float32)                                     # statistics in float32
    ms = tl.sum(hf * hf, axis=0) / n_cols                     # mean(h²); masked lanes are 0
    rstd = 1.0 / tl.sqrt(ms + eps)                            # 1 / sqrt(mean(h²) + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    y = hf * rstd * w                                         # y = h / RMS(h) * w
    tl.store(Y + row * n_cols + cols, y.to(Y.dtype.element_ty), mask=mask)
