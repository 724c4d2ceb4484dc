"""Multi-head scaled dot-product attention, optional causal mask.

qkv (B, T, 3C) holds Q, K, V side by side; head h of each is the column block
h*D : (h+1)*D with D = C / H. For each batch row b and head h:
    S = Q_h K_h^T / sqrt(D)   (T, T), future masked when causal
    A = softmax(S)            row-wise, max subtracted
    O_h = A V_h               (T, D)
Output: out (B, T, C) with the heads side by side, A (B, H, T, T).
Each (b, h) copies its Q, K, V blocks into contiguous (T, D) arrays; from
T >= BLAS_MIN_T the products go through BLAS, below that plain loops are faster.

attention_rows_forward / _backward compute the same for chosen query rows only
(flat positions n = b*T + t): what the last block needs when the loss reads only
some positions. Every key and value is still used.
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


@kernel
def _attend_row(qkv, b, t, h, T, D, causal, scale, a_row, out_row):
    """One query row of one head: a_row (T,) = softmax(q_t K^T * scale), out_row (D,) = a_row V."""
    C = qkv.shape[2] // 3
    q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
    n_keys = t + 1 if causal else T
    for s in range(n_keys):
        dot = 0.0
        for d in range(D):
            dot += qkv[b, t, q0 + d] * qkv[b, s, k0 + d]
        a_row[s] = dot * scale
    softmax_row(a_row, a_row, n_keys)
    for d in range(D):
        out_row[d] = 0.0
    for s in range(n_keys):
        a = a_row[s]
        for d in range(D):
            out_row[d] += a * qkv[b, s, v0 + d]


@kernel
def attention_rows_forward(qkv, n_heads, causal, rows):
    """qkv (B, T, 3C), rows (M,) flat query positions -> out (M, C), att (M, H, T)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    out = np.empty((rows.shape[0], C), dtype=qkv.dtype)
    att = np.empty((rows.shape[0], n_heads, T), dtype=qkv.dtype)
    for m in range(rows.shape[0]):
        b, t = rows[m] // T, rows[m] % T
        for h in range(n_heads):
            _attend_row(qkv, b, t, h, T, D, causal, scale, att[m, h], out[m, h * D:(h + 1) * D])
    return out, att


@kernel
def attention_rows_backward(dout, qkv, att, rows):
    """dout (M, C) at the query rows -> dqkv (B, T, 3C); zero Q gradient at the other rows.

    Per row and head: dV += a^T dO;  da = dO V^T;  ds = a * (da - sum(da * a)) / sqrt(D);
    dq = ds K;  dK += ds^T q.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    n_heads = att.shape[1]
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    dqkv = np.zeros_like(qkv)
    da = np.empty(T, dtype=qkv.dtype)
    for m in range(rows.shape[0]):
        b, t = rows[m] // T, rows[m] % T
        for h in range(n_heads):
            q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
            a = att[m, h]
            row_sum = 0.0
            for s in range(T):
                dot = 0.0
                for d in range(D):
                    dot += dout[m, q0 + d] * qkv[b, s, v0 + d]
                    dqkv[b, s, v0 + d] += a[s] * dout[m, q0 + d]
                da[s] = dot
                row_sum += dot * a[s]
            for s in range(T):
                ds = a[s] * (da[s] - row_sum) * scale
                if ds != 0.0:
                    for d in range(D):
                        dqkv[b, t, q0 + d] += ds * qkv[b, s, k0 + d]
                        dqkv[b, s, k0 + d] += ds * qkv[b, t, q0 + d]
    return dqkv
