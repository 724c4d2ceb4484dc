"""Element-wise activations of the FFN: ReLU and GELU (tanh approximation).

Shapes: h, y (N, F).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.exp import exp
from .numpy_ref import GELU_A, GELU_B


@kernel
def relu_forward(h):
    """y = max(h, 0). A NaN stays NaN, so a broken input shows in the loss.

    NumPy twin: numpy_ref.relu_forward.
    """
    y = np.empty_like(h)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            y[i, j] = 0.0 if h[i, j] <= 0 else h[i, j]
    return y


@kernel
def relu_backward(dy, h):
    """dh = dy where h > 0, else 0.

    NumPy twin: numpy_ref.relu_backward.
    """
    dh = np.empty_like(dy)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            dh[i, j] = dy[i, j] if h[i, j] > 0 else 0.0
    return dh


@kernel
def gelu_forward(h):
    """y = 0.5 h (1 + tanh(u)), u = sqrt(2/pi) (h + 0.044715 h^3).

    Computed as y = h * sigma(2u), since 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + exp(-2u)):
    one vectorised exp per element. Backward needs only h: it recomputes sigma(2u).

    NumPy twin: numpy_ref.gelu_forward.
    """
    f = h.dtype.type                    # constants in h's precision: the loop stays in float32
    minus_2a, b, one = f(-2.0 * GELU_A), f(GELU_B), f(1.0)
    y = np.empty_like(h)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            x = h[i, j]
            y[i, j] = x / (one + exp(minus_2a * (x + b * x * x * x)))   # exp = inf for very negative x: y = 0
    return y


@kernel
def gelu_backward(dy, h):
    """dh = dy * [s + 2 h s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 h^2)],  s = sigma(2u) = 0.5 (1 + tanh(u)).

    (The tanh form: 0.5 (1 + t) + 0.5 h (1 - t^2) u'(h) with t = 2 s - 1.)

    NumPy twin: numpy_ref.gelu_backward.
    """
    f = h.dtype.type
    minus_2a, a, b, one, two = f(-2.0 * GELU_A), f(GELU_A), f(GELU_B), f(1.0), f(2.0)
    dh = np.empty_like(dy)
    for i in range(h.shape[0]):
        for j in range(h.shape[1]):
            x = h[i, j]
            s = one / (one + exp(minus_2a * (x + b * x * x * x)))
            du = a * (one + f(3.0) * b * x * x)
            dh[i, j] = dy[i, j] * (s + two * x * s * (one - s) * du)
    return dh
