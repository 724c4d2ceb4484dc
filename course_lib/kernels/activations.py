"""Element-wise activations of the FFN: ReLU and GELU (tanh approximation).

Shapes: h, y (N, F).
"""
import math

import numpy as np

from ._jit import kernel

GELU_A = math.sqrt(2.0 / math.pi)
GELU_B = 0.044715


@kernel
def relu_forward(h):
    """y = max(h, 0). A NaN stays NaN, so a broken input shows in the loss."""
    y = np.empty_like(h)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            y[i, j] = 0.0 if h[i, j] <= 0 else h[i, j]
    return y


@kernel
def relu_backward(dy, h):
    """dh = dy where h > 0, else 0."""
    dh = np.empty_like(dy)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            dh[i, j] = dy[i, j] if h[i, j] > 0 else 0.0
    return dh


def gelu_forward(h):
    """y = 0.5 h (1 + tanh(u)), u = sqrt(2/pi) (h + 0.044715 h^3). -> y, tanh(u) (kept for backward).

    Computed as y = h * sigma(2u) with sigma(z) = 1 / (1 + exp(-z)), since 0.5 (1 + tanh(u)) = sigma(2u):
    NumPy's vectorised exp is twice as fast as its tanh here, and ~5x faster than exp in a Numba loop.
    """
    e = _gelu_minus_2u(h)
    with np.errstate(over="ignore"):        # exp(-2u) = inf for very negative h: then y = 0, t = -1
        np.exp(e, out=e)
    return _gelu_combine(h, e)


@kernel
def _gelu_minus_2u(h):
    """-2u = -2 sqrt(2/pi) (h + 0.044715 h^3), in one pass."""
    z = np.empty_like(h)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            x = h[i, j]
            z[i, j] = -2.0 * GELU_A * (x + GELU_B * x * x * x)
    return z


@kernel
def _gelu_combine(h, e):
    """From e = exp(-2u): s = 1 / (1 + e) = sigma(2u); y = h s and t = tanh(u) = 2 s - 1."""
    y = np.empty_like(h)
    t = np.empty_like(h)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            s = 1.0 / (1.0 + e[i, j])
            y[i, j] = h[i, j] * s
            t[i, j] = 2.0 * s - 1.0
    return y, t


@kernel
def gelu_backward(dy, h, t):
    """dh = dy * [0.5 (1 + t) + 0.5 h (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 h^2)], t = tanh(u)."""
    dh = np.empty_like(dy)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            x = h[i, j]
            tt = t[i, j]
            du = GELU_A * (1.0 + 3.0 * GELU_B * x * x)
            dh[i, j] = dy[i, j] * (0.5 * (1.0 + tt) + 0.5 * x * (1.0 - tt * tt) * du)
    return dh
