"""Linear layer y = x @ W + b.

Shapes: x (N, I), W (I, O), b (O,) or None, y (N, O). The products are BLAS's, in tiles
(_fast/products.py); the bias (added by rows, summed by columns: _fast/reduce.py) too runs on
several threads for large arrays.
"""
import numpy as np
from numba import prange

from ._fast.jit import kernel
from ._fast.blas import check_same_dtype
from ._fast.products import product
from ._fast.reduce import column_sums
from ._fast.threads import split_work

GRAIN = 1 << 16     # elements from which a thread pays for its hand-over


@kernel
def _add_bias_rows(y, b, first, last):
    for n in range(first, last):
        for o in range(y.shape[1]):
            y[n, o] += b[o]


@kernel(parallel=True)
def _add_bias_ranges(y, b, bounds):
    for i in prange(bounds.size - 1):
        _add_bias_rows(y, b, bounds[i], bounds[i + 1])


def linear_forward(x, w, b):
    """y = x @ W (+ b). x (N, I), w (I, O), b (O,) or None -> y (N, O).

    NumPy twin: numpy_ref.linear_forward.
    """
    check_same_dtype("linear_forward", "x", x, "w", w)
    y = product(x, w)
    if b is not None:
        if b.shape[0] != w.shape[1]:
            raise ValueError("linear_forward: b must have O entries, w (I, O)")
        split_work(_add_bias_rows, _add_bias_ranges, y.shape[0], y, b, work=y.size, grain=GRAIN)
    return y


def linear_backward(dy, x, w, has_bias):
    """dy (N, O) -> dx = dy @ W.T (N, I), dW = x.T @ dy (I, O), db = sum_n dy (O,).

    NumPy twin: numpy_ref.linear_backward.
    """
    check_same_dtype("linear_backward", "dy", dy, "x", x)
    check_same_dtype("linear_backward", "dy", dy, "w", w)
    dx, dw = product(dy, w.T), product(x.T, dy)
    db = column_sums(dy)[0] if has_bias else np.zeros(dy.shape[1], dtype=dy.dtype)
    return dx, dw, db
