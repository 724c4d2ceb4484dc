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
blocks in place, BLOCK query rows at a time: under the causal mask a block's rows see
the keys up to its last row only, so the products skip most of the masked half. The
(b, h) pairs are independent: _fast/threads.split_work runs them on several threads, each
product in the thread that needs it (blas_inline): the same bytes on any thread count.

attention_rows_forward / _backward compute the same for chosen query rows only
(flat positions n = b*T + t): what the last block needs when the loss reads only
some positions. Every key and value is still used.
"""
import math

import numpy as np

from ._fast.jit import kernel
from ._fast.blas import INLINE_PRODUCT, NUMPY_BLAS, matmul_into
from ._fast.exp import exp
from ._fast.threads import blas_inline, split_work
from ._fast.tuning import BLAS_MIN_T, BLOCK
from .softmax import softmax_row


@kernel
def _dscores(dA, a, n, scale):
    """dA[t, :n] <- dS = a * (dA - rowsum(dA * a)) * scale, in place (the softmax backward).
    Entries past n are masked (a = 0 there) and left as they are."""
    f = a.dtype.type
    c = f(scale)
    for t in range(a.shape[0]):
        da, at = dA[t], a[t]
        row_sum = f(0.0)
        for s in range(n):
            row_sum += da[s] * at[s]
        for s in range(n):
            da[s] = at[s] * (da[s] - row_sum) * c


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
def _transpose_into(x, x_t):
    """x_t[...] = x.T: a (T, D) column block as a (D, T) array. BLAS multiplies short blocks of rows
    by it about twice as fast as by the transposed view (OpenBLAS's small-matrix kernels)."""
    for s in range(x.shape[0]):
        for d in range(x.shape[1]):
            x_t[d, s] = x[s, d]


@kernel(split=True)
def _heads_forward(qkv, n_heads, causal, out, att, first, last):
    """For the pairs p = b * H + h in first..last-1: S = Q_h K_h^T, A = softmax(S / sqrt(D)) into
    att[b, h], O_h = A V_h into out's column block; BLOCK query rows at a time."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    scores = np.empty((BLOCK, T), dtype=qkv.dtype)
    k_t = np.empty((D, T), dtype=qkv.dtype)
    for p in range(first, last):
        b, h = p // n_heads, p % n_heads
        q, v = qkv[b, :, h * D:(h + 1) * D], qkv[b, :, 2 * C + h * D:2 * C + (h + 1) * D]
        _transpose_into(qkv[b, :, C + h * D:C + (h + 1) * D], k_t)
        a = att[b, h]
        for r0 in range(0, T, BLOCK):
            r1 = min(T, r0 + BLOCK)
            n = r1 if causal else T                 # the keys rows r0..r1-1 may see
            matmul_into(q[r0:r1], k_t[:, :n], scores[:r1 - r0, :n])
            for t in range(r0, r1):
                softmax_row(scores[t - r0], a[t], t + 1 if causal else T, scale)
            matmul_into(a[r0:r1, :n], v[:n], out[b, r0:r1, h * D:(h + 1) * D])


@kernel(split=True)
def _heads_backward(dout, qkv, att, causal, dqkv, first, last):
    """For the pairs p = b * H + h in first..last-1: dQ_h, dK_h, dV_h into dqkv's column blocks."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    n_heads = att.shape[1]
    D = C // n_heads
    scale = 1.0 / math.sqrt(D)
    dS = np.empty((T, T), dtype=qkv.dtype)
    v_t = np.empty((D, T), dtype=qkv.dtype)
    for p in range(first, last):
        b, h = p // n_heads, p % n_heads
        cols = (h * D, C + h * D, 2 * C + h * D)
        q, k = qkv[b, :, cols[0]:cols[0] + D], qkv[b, :, cols[1]:cols[1] + D]
        dq, dk, dv = dqkv[b, :, cols[0]:cols[0] + D], dqkv[b, :, cols[1]:cols[1] + D], dqkv[b, :, cols[2]:cols[2] + D]
        _transpose_into(qkv[b, :, cols[2]:cols[2] + D], v_t)
        do = dout[b, :, h * D:(h + 1) * D]
        a = att[b, h]
        for r0 in range(0, T, BLOCK):               # query rows r0..r1-1 see keys 0..n-1
            r1 = min(T, r0 + BLOCK)
            n = r1 if causal else T
            matmul_into(do[r0:r1], v_t[:, :n], dS[r0:r1, :n])  # dA = dO V^T
            _dscores(dS[r0:r1], a[r0:r1], n, scale)             # dS, in place
            matmul_into(dS[r0:r1, :n], k[:n], dq[r0:r1])        # dQ = dS K
        for r0 in range(0, T, BLOCK):               # keys r0..r1-1 are seen by queries from r0 on
            r1 = min(T, r0 + BLOCK)
            seen = r0 if causal else 0
            matmul_into(dS[seen:, r0:r1].T, q[seen:], dk[r0:r1])  # dK = dS^T Q
            matmul_into(a[seen:, r0:r1].T, do[seen:], dv[r0:r1])  # dV = A^T dO


def attention_forward(qkv, n_heads, causal):
    """qkv (B, T, 3C) -> out (B, T, C), att (B, H, T, T).

    NumPy twin: numpy_ref.attention_forward.
    """
    B, T, C3 = qkv.shape
    if T < BLAS_MIN_T:
        out, att = _forward_small(qkv, n_heads, causal)
        return out, att.transpose(0, 2, 1, 3)      # a view: attention_backward takes it back without a copy
    qkv = np.ascontiguousarray(qkv)
    out = np.empty((B, T, C3 // 3), dtype=qkv.dtype)
    att = np.empty((B, n_heads, T, T), dtype=qkv.dtype)
    with blas_inline():
        split_work(_heads_forward, B * n_heads, qkv, n_heads, bool(causal), out, att,
                   work=None if _products_inline(T, C3 // 3 // n_heads) else 0)
    return out, att


def attention_backward(dout, qkv, att, causal=False):
    """dout (B, T, C) -> dqkv (B, T, 3C).

    dV_h = A^T dO_h;  dA = dO_h V_h^T;  dS = A * (dA - rowsum(dA * A)) / sqrt(D);
    dQ_h = dS K_h;  dK_h = dS^T Q_h.  Masked entries have A = 0, so they pass no gradient;
    causal=True (the forward's mask) lets the products skip them.

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
    qkv, att, dout = np.ascontiguousarray(qkv), np.ascontiguousarray(att), np.ascontiguousarray(dout)
    dqkv = np.empty_like(qkv)
    H = att.shape[1]
    with blas_inline():
        split_work(_heads_backward, B * H, dout, qkv, att, bool(causal), dqkv,
                   work=None if _products_inline(T, qkv.shape[2] // 3 // H) else 0)
    return dqkv


def _products_inline(T, D):
    """Whether BLAS runs each block's products in the calling thread: NumPy's BLAS inside
    `blas_inline`, the fallback's for small products. Then the (b, h) pairs go on several threads
    (split_work); else one after another, with BLAS's threads inside each product."""
    return NUMPY_BLAS is not None or BLOCK * T * D <= INLINE_PRODUCT


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
