"""Multi-head scaled dot-product attention, optional causal mask.

qkv (B, T, 3C) holds Q, K, V side by side; head h of each is the column block
h*D : (h+1)*D with D = C / H. For each batch row b and head h:
    S = Q_h K_h^T / sqrt(D)   (T, T), future masked when causal
    A = softmax(S)            row-wise, max subtracted
    O_h = A V_h               (T, D)
Output: out (B, T, C) with the heads side by side, A (B, H, T, T).
Each (b, h) copies its Q, K, V blocks into contiguous (T, D) arrays; from
T >= BLAS_MIN_T the products go through BLAS, below that plain loops are faster.
"""
import math

import numpy as np

from ._jit import kernel
from .softmax import softmax_row

BLAS_MIN_T = 32


@kernel
def _head(qkv, b, col, D):
    """Copy qkv[b, :, col:col+D] into a contiguous (T, D) array."""
    return np.ascontiguousarray(qkv[b, :, col:col + D])


@kernel
def _matmul_nt(a, b, out, use_blas):
    """out = a @ b.T for a (M, D), b (N, D)."""
    if use_blas:
        out[:, :] = a @ b.T
        return
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            s = 0.0
            for d in range(a.shape[1]):
                s += a[i, d] * b[j, d]
            out[i, j] = s


@kernel
def _matmul_nn(a, b, use_blas):
    """a @ b for a (M, K), b (K, D)."""
    if use_blas:
        return a @ b
    out = np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            w = a[i, k]
            if w != 0.0:
                for d in range(b.shape[1]):
                    out[i, d] += w * b[k, d]
    return out


@kernel
def attention_forward(qkv, n_heads, causal):
    """qkv (B, T, 3C) -> out (B, T, C), att (B, H, T, T)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    use_blas = T >= BLAS_MIN_T
    out = np.empty((B, T, C), dtype=qkv.dtype)
    att = np.empty((B, n_heads, T, T), dtype=qkv.dtype)
    scores = np.empty((T, T), dtype=qkv.dtype)
    for b in range(B):
        for h in range(n_heads):
            q, k, v = _head(qkv, b, h * D, D), _head(qkv, b, C + h * D, D), _head(qkv, b, 2 * C + h * D, D)
            _matmul_nt(q, k, scores, use_blas)
            for t in range(T):
                row = scores[t]
                for s in range(T):
                    row[s] *= scale
                softmax_row(row, att[b, h, t], t + 1 if causal else T)
            out[b, :, h * D:(h + 1) * D] = _matmul_nn(att[b, h], v, use_blas)
    return out, att


@kernel
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
    use_blas = T >= BLAS_MIN_T
    dqkv = np.empty_like(qkv)
    dA = np.empty((T, T), dtype=qkv.dtype)
    for b in range(B):
        for h in range(n_heads):
            q, k, v = _head(qkv, b, h * D, D), _head(qkv, b, C + h * D, D), _head(qkv, b, 2 * C + h * D, D)
            do = np.ascontiguousarray(dout[b, :, h * D:(h + 1) * D])
            a = att[b, h]
            _matmul_nt(do, v, dA, use_blas)
            for t in range(T):
                row_sum = 0.0
                for s in range(T):
                    row_sum += dA[t, s] * a[t, s]
                for s in range(T):
                    dA[t, s] = a[t, s] * (dA[t, s] - row_sum) * scale      # now dS
            dqkv[b, :, h * D:(h + 1) * D] = _matmul_nn(dA, k, use_blas)
            dqkv[b, :, C + h * D:C + (h + 1) * D] = _matmul_nn(np.ascontiguousarray(dA.T), q, use_blas)
            dqkv[b, :, 2 * C + h * D:2 * C + (h + 1) * D] = _matmul_nn(np.ascontiguousarray(a.T), do, use_blas)
    return dqkv
