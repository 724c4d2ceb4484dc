"""Softmax over the last axis, stable: the row maximum is subtracted before exp.

Shapes: x, y (N, K).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.exp import exp


@kernel
def softmax_row(x, y, n, scale):
    """y[:n] = softmax(scale * x[:n]); y[n:] = 0 (masked entries). scale > 0. Returns nothing.

    exp(scale * (x - max x)): for scale > 0 the maximum of scale * x is scale * max x.
    Sums in y's precision, so a float32 row stays on the vector lanes.
    """
    f = y.dtype.type
    c = f(scale)
    m = x[0]
    for j in range(1, n):
        m = max(m, x[j])
    total = f(0.0)
    for j in range(n):
        e = exp(c * (x[j] - m))
        y[j] = e
        total += e
    inv = f(1.0) / total
    for j in range(n):
        y[j] *= inv
    for j in range(n, y.shape[0]):
        y[j] = 0.0


@kernel
def softmax_forward(x):
    """y[i] = exp(x[i] - max x[i]) / sum exp(x[i] - max x[i]). x (N, K) -> y (N, K).

    NumPy twin: numpy_ref.softmax_forward.
    """
    y = np.empty_like(x)
    for i in range(x.shape[0]):
        softmax_row(x[i], y[i], x.shape[1], 1.0)
    return y


@kernel
def softmax_backward(dy, y):
    """dx = y * (dy - sum(dy * y)) per row: the softmax Jacobian (diag(y) - y y^T) applied to dy.

    NumPy twin: numpy_ref.softmax_backward.
    """
    dx = np.empty_like(dy)
    for i in range(y.shape[0]):
        s = 0.0
        for j in range(y.shape[1]):
            s += dy[i, j] * y[i, j]
        for j in range(y.shape[1]):
            dx[i, j] = y[i, j] * (dy[i, j] - s)
    return dx
