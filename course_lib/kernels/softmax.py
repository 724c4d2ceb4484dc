"""Softmax over the last axis, stable: the row maximum is subtracted before exp.

Shapes: x, y (N, K).
"""
import numpy as np

from ._jit import kernel


@kernel
def softmax_row(x, y, n):
    """y[:n] = softmax(x[:n]); y[n:] = 0 (masked entries). Returns nothing."""
    m = x[0]
    for j in range(1, n):
        if x[j] > m:
            m = x[j]
    total = 0.0
    for j in range(n):
        e = np.exp(x[j] - m)
        y[j] = e
        total += e
    inv = 1.0 / total
    for j in range(n):
        y[j] *= inv
    for j in range(n, y.shape[0]):
        y[j] = 0.0


@kernel
def softmax_forward(x):
    """y[i] = exp(x[i] - max x[i]) / sum exp(x[i] - max x[i]). x (N, K) -> y (N, K)."""
    y = np.empty_like(x)
    for i in range(x.shape[0]):
        softmax_row(x[i], y[i], x.shape[1])
    return y


@kernel
def softmax_backward(dy, y):
    """dx = y * (dy - sum(dy * y)) per row: the softmax Jacobian (diag(y) - y y^T) applied to dy."""
    dx = np.empty_like(dy)
    for i in range(y.shape[0]):
        s = 0.0
        for j in range(y.shape[1]):
            s += dy[i, j] * y[i, j]
        for j in range(y.shape[1]):
            dx[i, j] = y[i, j] * (dy[i, j] - s)
    return dx
