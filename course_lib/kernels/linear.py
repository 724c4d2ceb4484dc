"""Linear layer y = x @ W + b.

Shapes: x (N, I), W (I, O), b (O,) or None, y (N, O).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.blas import matmul, same_dtype


@kernel
def linear_forward(x, w, b):
    """y = x @ W (+ b). x (N, I), w (I, O), b (O,) or None -> y (N, O).

    NumPy twin: numpy_ref.linear_forward.
    """
    same_dtype("linear_forward", "x", x, "w", w)
    y = matmul(x, w)
    if b is not None:
        if b.shape[0] != w.shape[1]:
            raise ValueError("linear_forward: b must have O entries, w (I, O)")
        for n in range(y.shape[0]):
            for o in range(y.shape[1]):
                y[n, o] += b[o]
    return y


@kernel
def linear_backward(dy, x, w, has_bias):
    """dy (N, O) -> dx = dy @ W.T (N, I), dW = x.T @ dy (I, O), db = sum_n dy (O,).

    NumPy twin: numpy_ref.linear_backward.
    """
    same_dtype("linear_backward", "dy", dy, "x", x)
    same_dtype("linear_backward", "dy", dy, "w", w)
    dx = matmul(dy, w.T)
    dw = matmul(x.T, dy)
    db = np.zeros(dy.shape[1], dtype=dy.dtype)
    if has_bias:
        for n in range(dy.shape[0]):
            for o in range(dy.shape[1]):
                db[o] += dy[n, o]
    return dx, dw, db
