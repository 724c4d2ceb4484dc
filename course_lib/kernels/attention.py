"""Multi-head scaled dot-product attention, optional causal mask.

qkv (B, T, 3C) holds Q, K, V side by side; head h of each is the column block
h*D : (h+1)*D with D = C / H. For each head:
    S = Q_h K_h^T / sqrt(D)   (T, T), future masked when causal
    A = softmax(S)            row-wise, max subtracted
    O_h = A V_h               (T, D)
Output: out (B, T, C) with the heads side by side, A (B, H, T, T).
"""
import math

import numpy as np
from numba import prange

from ._jit import kernel
from .softmax import softmax_row


@kernel(parallel=False)
def attention_forward(qkv, n_heads, causal):
    """qkv (B, T, 3C) -> out (B, T, C), att (B, H, T, T)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    out = np.zeros((B, T, C), dtype=qkv.dtype)
    att = np.empty((B, n_heads, T, T), dtype=qkv.dtype)
    for bh in prange(B * n_heads):
        b = bh // n_heads
        h = bh % n_heads
        q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
        scores = np.empty(T, dtype=qkv.dtype)
        for t in range(T):
            n_keys = t + 1 if causal else T
            for s in range(n_keys):
                dot = 0.0
                for d in range(D):
                    dot += qkv[b, t, q0 + d] * qkv[b, s, k0 + d]
                scores[s] = dot * scale
            softmax_row(scores, att[b, h, t], n_keys)
            for s in range(n_keys):
                a = att[b, h, t, s]
                for d in range(D):
                    out[b, t, q0 + d] += a * qkv[b, s, v0 + d]
    return out, att


@kernel(parallel=False)
def attention_backward(dout, qkv, att):
    """dout (B, T, C) -> dqkv (B, T, 3C).

    dV_h = A^T dO_h;  dA = dO_h V_h^T;  dS = A * (dA - rowsum(dA * A)) / sqrt(D);
    dQ_h = dS K_h;  dK_h = dS^T Q_h.  Masked entries have A = 0, so they pass no gradient.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    n_heads = att.shape[1]
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    dqkv = np.zeros_like(qkv)
    for bh in prange(B * n_heads):
        b = bh // n_heads
        h = bh % n_heads
        q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
        dA = np.empty(T, dtype=qkv.dtype)
        for t in range(T):
            row_sum = 0.0
            for s in range(T):
                a = att[b, h, t, s]
                dot = 0.0
                for d in range(D):
                    dot += dout[b, t, q0 + d] * qkv[b, s, v0 + d]
                    dqkv[b, s, v0 + d] += a * dout[b, t, q0 + d]
                dA[s] = dot
                row_sum += dot * a
            for s in range(T):
                ds = att[b, h, t, s] * (dA[s] - row_sum) * scale
                if ds != 0.0:
                    for d in range(D):
                        dqkv[b, t, q0 + d] += ds * qkv[b, s, k0 + d]
                        dqkv[b, s, k0 + d] += ds * qkv[b, t, q0 + d]
    return dqkv
