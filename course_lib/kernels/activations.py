"""Element-wise activations of the FFN: ReLU and GELU (tanh approximation).

Shapes: h, y (N, F).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.exp import exp
from ._fast.threads import split_work
from ._fast.tuning import GELU_GRAIN as GRAIN
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


@kernel(split=True)
def _gelu_forward_rows(h, y, first, last):
    f = h.dtype.type                    # constants in h's precision: the loop stays in float32
    minus_2a, minus_2ab, one = f(-2.0 * GELU_A), f(-2.0 * GELU_A * GELU_B), f(1.0)
    for i in range(first, last):
        for j in range(h.shape[1]):
            x = h[i, j]
            y[i, j] = x / (one + exp(x * (minus_2a + minus_2ab * x * x)))   # exp = inf for very negative x: y = 0


def gelu_forward(h):
    """y = 0.5 h (1 + tanh(u)), u = sqrt(2/pi) (h + 0.044715 h^3).

    Computed as y = h * sigma(2u), since 0.5 (1 + tanh(u)) = sigma(2u) = 1 / (1 + exp(-2u)):
    one vectorised exp per element, and no 1 + tanh(u) that cancels for negative u (float32
    would keep only a few digits of y there). Large arrays in ranges of rows on several threads.

    NumPy twin: numpy_ref.gelu_forward.
    """
    y = np.empty_like(h)
    split_work(_gelu_forward_rows, h.shape[0], h, y, work=h.size, grain=GRAIN)
    return y


@kernel(split=True)
def _gelu_backward_rows(dy, h, y, dh, first, last):
    f = h.dtype.type
    minus_2a, minus_2ab, one, two = f(-2.0 * GELU_A), f(-2.0 * GELU_A * GELU_B), f(1.0), f(2.0)
    a, a3b, half, tiny = f(GELU_A), f(3.0 * GELU_A * GELU_B), f(0.5), f(1e-20)
    for i in range(first, last):
        for j in range(h.shape[1]):
            x = h[i, j]
            if y is None:
                s = one / (one + exp(x * (minus_2a + minus_2ab * x * x)))
                hs = x * s
            else:
                hs = y[i, j]
                s = half if abs(x) < tiny else hs / x
            du = a + a3b * x * x
            dh[i, j] = dy[i, j] * (s + two * hs * (one - s) * du)


def gelu_backward(dy, h, y=None):
    """dh = dy * (s + 2 h s (1 - s) u'(h)),  s = sigma(2u) = 0.5 (1 + tanh(u)),  u' = sqrt(2/pi) (1 + 3 * 0.044715 h^2).

    (The tanh form 0.5 (1 + t) + 0.5 h (1 - t^2) u' with s = (1 + t) / 2.) y: the forward's
    output, if at hand (the model keeps it): since y = h s, then s = y / h and h s = y, and no
    exp is computed again. At |h| < 1e-20 (y might lose digits there) s is GELU'(0) = 0.5.

    NumPy twin: numpy_ref.gelu_backward.
    """
    dh = np.empty_like(dy)
    split_work(_gelu_backward_rows, h.shape[0], dy, h, y, dh, work=h.size, grain=GRAIN)
    return dh
