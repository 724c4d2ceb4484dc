"""Multi-head scaled dot-product attention, optional causal mask.

qkv (B, T, 3C) holds Q, K, V side by side; head h of each is the column block
h*D : (h+1)*D with D = C / H. For each batch row b and head h:
    S = Q_h K_h^T / sqrt(D)   (T, T), future masked when causal
    A = softmax(S)            row-wise, max subtracted
    O_h = A V_h               (T, D)
Output: out (B, T, C) with the heads side by side, A (B, H, T, T).
Below BLAS_MIN_T positions plain loops are fastest (the backward is then
attention_rows_backward with every position as a query row); from there on
the products of each (b, h) go through BLAS, reading and writing the heads' column
blocks in place, with BLAS's own threads (which help at long sequences).

attention_rows_forward / _backward compute the same for chosen query rows only
(flat positions n = b*T + t): what the last block needs when the loss reads only
some positions. Every key and value is still used.
"""
import math

import numpy as np

from ._fast.jit import kernel
from ._fast.blas import matmul_into
from ._fast.exp import exp
from .softmax import softmax_row

BLAS_MIN_T = 32


@kernel
def _softmax_scores(scores, scale, causal, att):
    """att[t] = softmax(scale * scores[t]) over the keys t may see."""
    T = scores.shape[0]
    for t in range(T):
        softmax_row(scores[t], att[t], t + 1 if causal else T, scale)


@kernel
def _dscores(dA, a, scale):
    """dA <- dS = a * (dA - rowsum(dA * a)) * scale, in place (the softmax backward)."""
    f = a.dtype.type
    c = f(scale)
    for t in range(a.shape[0]):
        row_sum = f(0.0)
        for s in range(a.shape[1]):
            row_sum += dA[t, s] * a[t, s]
        for s in range(a.shape[1]):
            dA[t, s] = a[t, s] * (dA[t, s] - row_sum) * c


@kernel
def _forward_small(qkv, n_heads, causal):
    """Loops over (b, h, t). Rows of qkv are taken as 1-D slices: unit-stride inner loops.
    Returns the weights as (B, T, H, T), the layout the backward reads them in."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    f = qkv.dtype.type
    scale = f(1.0 / math.sqrt(D))
    out = np.zeros((B, T, C), dtype=qkv.dtype)
    att = np.empty((B, T, n_heads, T), dtype=qkv.dtype)
    # 1. scores, less the row maximum, scaled; masked keys get -inf
    for b in range(B):
        for h in range(n_heads):
            q0, k0 = h * D, C + h * D
            for t in range(T):
                n_keys = t + 1 if causal else T
                row = att[b, t, h]
                q = qkv[b, t, q0:q0 + D]
                m = -np.inf
                for s in range(n_keys):
                    k = qkv[b, s, k0:k0 + D]
                    dot = f(0.0)
                    for d in range(D):
                        dot += q[d] * k[d]
                    row[s] = dot
                    m = max(m, dot)
                for s in range(n_keys):
                    row[s] = scale * (row[s] - m)
                for s in range(n_keys, T):
                    row[s] = -np.inf
    # 2. every exp in one long loop, so that it runs on the vector lanes (rows of T = 8 are too short)
    flat = att.reshape(-1)
    for i in range(flat.size):
        flat[i] = exp(flat[i])
    # 3. normalise each row, and out_t = sum_s a_ts v_s
    for b in range(B):
        for h in range(n_heads):
            q0, v0 = h * D, 2 * C + h * D
            for t in range(T):
                row = att[b, t, h]
                o = out[b, t, q0:q0 + D]
                total = f(0.0)
                for s in range(T):
                    total += row[s]
                inv = f(1.0) / total
                for s in range(T):
                    a = row[s] * inv
                    row[s] = a
                    v = qkv[b, s, v0:v0 + D]
                    for d in range(D):
                        o[d] += a * v[d]
    return out, att


@kernel
def _forward_blas(qkv, n_heads, causal):
    """Per (b, h): S = Q_h K_h^T and O_h = A V_h straight from / into the column blocks of qkv and out."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    out = np.empty((B, T, C), dtype=qkv.dtype)
    att = np.empty((B, n_heads, T, T), dtype=qkv.dtype)
    scores = np.empty((T, T), dtype=qkv.dtype)
    for b in range(B):
        for h in range(n_heads):
            q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
            q, k, v = qkv[b, :, q0:q0 + D], qkv[b, :, k0:k0 + D], qkv[b, :, v0:v0 + D]
            matmul_into(q, k.T, scores)
            _softmax_scores(scores, 1.0 / math.sqrt(D), causal, att[b, h])
            matmul_into(att[b, h], v, out[b, :, q0:q0 + D])
    return out, att


@kernel
def _backward_blas(dout, qkv, att):
    B, T, C3 = qkv.shape
    C = C3 // 3
    n_heads = att.shape[1]
    D = C // n_heads
    dqkv = np.empty_like(qkv)
    dA = np.empty((T, T), dtype=qkv.dtype)
    for b in range(B):
        for h in range(n_heads):
            q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
            q, k, v = qkv[b, :, q0:q0 + D], qkv[b, :, k0:k0 + D], qkv[b, :, v0:v0 + D]
            do = dout[b, :, q0:q0 + D]
            a = att[b, h]
            matmul_into(do, v.T, dA)
            _dscores(dA, a, 1.0 / math.sqrt(D))
            matmul_into(dA, k, dqkv[b, :, q0:q0 + D])
            matmul_into(dA.T, q, dqkv[b, :, k0:k0 + D])
            matmul_into(a.T, do, dqkv[b, :, v0:v0 + D])
    return dqkv


def attention_forward(qkv, n_heads, causal):
    """qkv (B, T, 3C) -> out (B, T, C), att (B, H, T, T).

    NumPy twin: numpy_ref.attention_forward.
    """
    if qkv.shape[1] < BLAS_MIN_T:
        out, att = _forward_small(qkv, n_heads, causal)
        return out, att.transpose(0, 2, 1, 3)      # a view: attention_backward takes it back without a copy
    return _forward_blas(qkv, n_heads, causal)


def attention_backward(dout, qkv, att):
    """dout (B, T, C) -> dqkv (B, T, 3C).

    dV_h = A^T dO_h;  dA = dO_h V_h^T;  dS = A * (dA - rowsum(dA * A)) / sqrt(D);
    dQ_h = dS K_h;  dK_h = dS^T Q_h.  Masked entries have A = 0, so they pass no gradient.

    NumPy twin: numpy_ref.attention_backward.
    """
    if not dout.dtype == qkv.dtype == att.dtype:
        raise ValueError(f"attention_backward: dout is {dout.dtype}, qkv {qkv.dtype} and att "
                         f"{att.dtype}: the arrays of one call need one dtype")
    B, T = qkv.shape[:2]
    if T < BLAS_MIN_T:      # every position is a query row: attention_rows_backward's loops
        att_rows = np.ascontiguousarray(att.transpose(0, 2, 1, 3)).reshape(B * T, att.shape[1], T)
        return attention_rows_backward(np.ascontiguousarray(dout).reshape(B * T, -1), qkv, att_rows,
                                       np.arange(B * T))
    return _backward_blas(dout, qkv, att)


@kernel
def attention_rows_forward(qkv, n_heads, causal, rows):
    """qkv (B, T, 3C), rows (M,) flat query positions -> out (M, C), att (M, H, T).

    NumPy twin: numpy_ref.attention_rows_forward.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    f = qkv.dtype.type
    scale = 1.0 / math.sqrt(D)
    out = np.zeros((rows.shape[0], C), dtype=qkv.dtype)
    att = np.empty((rows.shape[0], n_heads, T), dtype=qkv.dtype)
    scores = np.empty(T, dtype=qkv.dtype)
    for m in range(rows.shape[0]):
        b, t = rows[m] // T, rows[m] % T
        n_keys = t + 1 if causal else T
        # as in _forward_small, for one query row. The two loops stay written out in both kernels:
        # shared helpers for the scores and the weighted values made _forward_small slower.
        for h in range(n_heads):
            q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
            q = qkv[b, t, q0:q0 + D]
            for s in range(n_keys):
                k = qkv[b, s, k0:k0 + D]
                dot = f(0.0)
                for d in range(D):
                    dot += q[d] * k[d]
                scores[s] = dot
            a = att[m, h]
            softmax_row(scores, a, n_keys, scale)
            o = out[m, q0:q0 + D]
            for s in range(n_keys):
                v = qkv[b, s, v0:v0 + D]
                for d in range(D):
                    o[d] += a[s] * v[d]
    return out, att


@kernel
def attention_rows_backward(dout, qkv, att, rows):
    """dout (M, C) at the query rows -> dqkv (B, T, 3C); zero Q gradient at the other rows.

    Per row and head: ds = a * (dO V^T - sum(a * dO V^T)) / sqrt(D);  dq = ds K;
    dK += ds^T q;  dV += a^T dO.  A masked key has a = 0, so it gets no gradient.

    NumPy twin: numpy_ref.attention_rows_backward.
    """
    B, T, C3 = qkv.shape
    C = C3 // 3
    n_heads = att.shape[1]
    D = C // n_heads
    f = qkv.dtype.type
    scale = f(1.0 / math.sqrt(D))
    dqkv = np.zeros_like(qkv)
    da = np.empty(T, dtype=qkv.dtype)      # dA for one row: dO V^T
    for m in range(rows.shape[0]):
        b, t = rows[m] // T, rows[m] % T
        for h in range(n_heads):
            q0, k0, v0 = h * D, C + h * D, 2 * C + h * D
            a = att[m, h]
            do = dout[m, q0:q0 + D]         # rows as 1-D slices: unit-stride inner loops
            q = qkv[b, t, q0:q0 + D]
            dq = dqkv[b, t, q0:q0 + D]
            row_sum = f(0.0)
            for s in range(T):
                v = qkv[b, s, v0:v0 + D]
                dot = f(0.0)
                for d in range(D):
                    dot += do[d] * v[d]
                da[s] = dot
                row_sum += dot * a[s]
            for s in range(T):
                ds = a[s] * (da[s] - row_sum) * scale
                dv = dqkv[b, s, v0:v0 + D]
                for d in range(D):
                    dv[d] += a[s] * do[d]
                k = qkv[b, s, k0:k0 + D]
                for d in range(D):
                    dq[d] += ds * k[d]
                dk = dqkv[b, s, k0:k0 + D]
                for d in range(D):
                    dk[d] += ds * q[d]
    return dqkv
