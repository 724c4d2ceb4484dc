"""Linear layer y = x @ W + b.

Shapes: x (N, I), W (I, O), b (O,) or None, y (N, O). The products are BLAS's, in tiles
(_fast/products.py; the backward's two share one list of tiles); the bias (added by rows, summed by
columns: _fast/reduce.py) too runs on several threads for large arrays. A small layer (every
product one BLAS call, the bias under a thread's grain: all of the course model's) is one compiled
call that does the same operations in the same order, so the same bytes: a call from Python costs
more than such a layer's sums. Its backward's two products, each one BLAS call, run on two threads
where two are allowed, each is worth a parallel loop's start (PAIR_GRAIN) and that start is quick
(_pair_pays): the same calls, so the same bytes.
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.blas import NUMPY_BLAS, check_same_dtype, matmul, matmul_into
from ._fast.products import SMALL_PRODUCT, product, product_pair
from ._fast.reduce import column_sums, sum_columns
from ._fast.threads import blas_inline, get_num_threads, split_work, threads_spin
from ._fast.tuning import LINEAR_GRAIN as GRAIN, PAIR_GRAIN


@kernel(split=True)
def _add_bias_rows(y, b, first, last):
    for n in range(first, last):
        for o in range(y.shape[1]):
            y[n, o] += b[o]


def _one_call(x, w):
    """Whether the layer of x (N, I) @ w (I, O) is small enough for _forward_whole / _backward_whole."""
    N, I = x.shape
    O = w.shape[1]
    return N * I * O <= SMALL_PRODUCT and N * O < 2 * GRAIN and w.shape[0] == I


@kernel
def _forward_whole(x, w, b):
    y = matmul(x, w)
    if b is not None:
        _add_bias_rows(y, b, 0, y.shape[0])
    return y


@kernel(split=True)
def _backward_pieces(dy, x, w, has_bias, dx, dw, db, first, last):
    """Pieces first..last-1 of a small layer's backward: 0 is dx = dy @ W.T, 1 is dW = x.T @ dy
    and db."""
    for piece in range(first, last):
        if piece == 0:
            matmul_into(dy, w.T, dx)
        else:
            matmul_into(x.T, dy, dw)
            if has_bias:
                sum_columns(dy, None, db, None, 0, dy.shape[1])


@kernel
def _backward_whole(dy, x, w, has_bias):
    db = np.zeros(dy.shape[1], dtype=dy.dtype)
    if has_bias:
        sum_columns(dy, None, db, None, 0, dy.shape[1])
    return matmul(dy, w.T), matmul(x.T, dy), db     # the calls of _backward_pieces, into new arrays


def _pair_pays():
    """Whether a small layer's two products pay for a parallel loop's start: where each runs in
    the thread that calls it (NumPy's BLAS, blas_inline) and Numba's threads spin. On the
    workqueue layer the course model's step took 1.6x the time with the pair (2 cores, 2026-11-29)."""
    return NUMPY_BLAS is not None and threads_spin()


def linear_forward(x, w, b):
    """y = x @ W (+ b). x (N, I), w (I, O), b (O,) or None -> y (N, O).

    NumPy twin: numpy_ref.linear_forward.
    """
    check_same_dtype("linear_forward", "x", x, "w", w)
    if b is not None and b.shape[0] != w.shape[1]:
        raise ValueError("linear_forward: b must have O entries, w (I, O)")
    if _one_call(x, w):
        with blas_inline():
            return _forward_whole(x, w, b)
    y = product(x, w)
    if b is not None:
        split_work(_add_bias_rows, y.shape[0], y, b, work=y.size, grain=GRAIN)
    return y


def linear_backward(dy, x, w, has_bias):
    """dy (N, O) -> dx = dy @ W.T (N, I), dW = x.T @ dy (I, O), db = sum_n dy (O,) (zeros without a bias).

    NumPy twin: numpy_ref.linear_backward.
    """
    check_same_dtype("linear_backward", "dy", dy, "x", x)
    check_same_dtype("linear_backward", "dy", dy, "w", w)
    if _one_call(x, w) and dy.shape == (x.shape[0], w.shape[1]):
        with blas_inline():
            if dy.size * x.shape[1] < PAIR_GRAIN or get_num_threads() < 2 or not _pair_pays():
                return _backward_whole(dy, x, w, has_bias)      # one thread: no Python between
            dx, dw = np.empty(x.shape, dtype=dy.dtype), np.empty(w.shape, dtype=dy.dtype)
            db = np.zeros(dy.shape[1], dtype=dy.dtype)
            split_work(_backward_pieces, 2, dy, x, w, has_bias, dx, dw, db,
                       work=2 * dy.size * x.shape[1], grain=PAIR_GRAIN)
        return dx, dw, db
    dx, dw = product_pair(dy, w.T, x.T, dy)
    db = column_sums(dy)[0] if has_bias else np.zeros(dy.shape[1], dtype=dy.dtype)
    return dx, dw, db
