"""Softmax over the last axis, stable: the row maximum is subtracted before exp.

Shapes: x, y (N, K).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.exp import exp
from ._fast.maximum import maximum


@kernel
def softmax_row(x, y, n, scale):
    """y[:n] = softmax(scale * x[:n]); y[n:] = 0 (masked entries). x, y of one length, 1 <= n, scale > 0.

    exp(scale * (x - max x)): for scale > 0 the maximum of scale * x is scale * max x.
    Sums in y's precision, so a float32 row stays on the vector lanes. The loops run to n
    rounded up to whole vectors (16 values), the entries past n masked, so that a row of any
    length runs on the vector lanes to its end; `maximum` reduces on them too (_fast/maximum.py).
    """
    f = y.dtype.type
    c = f(scale)
    width = min(y.shape[0], (n + 15) // 16 * 16)
    m = f(-np.inf)
    for j in range(width):
        m = maximum(m, x[j] if j < n else f(-np.inf))
    total = f(0.0)
    for j in range(width):
        e = exp(c * (x[j] - m)) if j < n else f(0.0)
        y[j] = e
        total += e
    inv = f(1.0) / total
    for j in range(width):
        y[j] *= inv
    for j in range(width, y.shape[0]):
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
