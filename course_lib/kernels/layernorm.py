"""LayerNorm over the last axis: y = gamma * (x - mean) / sqrt(var + eps) + beta.

Biased variance, eps inside the square root. Shapes: x, y (N, C); gamma, beta (C,).
"""
import numpy as np

from ._fast.jit import kernel


@kernel
def layernorm_forward(x, gamma, beta, eps):
    """x (N, C) -> y (N, C), xhat (N, C), rstd (N,)  with xhat = (x - mean) * rstd.

    Sums in x's precision (two passes: mean, then the squares of x - mean).

    NumPy twin: numpy_ref.layernorm_forward.
    """
    N, C = x.shape
    if gamma.shape[0] != C or beta.shape[0] != C:
        raise ValueError("layernorm_forward: gamma and beta must have C entries, x (N, C)")
    f = x.dtype.type
    inv_c = f(1.0 / C)
    y = np.empty_like(x)
    xhat = np.empty_like(x)
    rstd = np.empty(N, dtype=x.dtype)
    for n in range(N):
        mean = f(0.0)
        for c in range(C):
            mean += x[n, c]
        mean *= inv_c
        var = f(0.0)
        for c in range(C):
            d = x[n, c] - mean
            var += d * d
        r = f(1.0) / np.sqrt(var * inv_c + f(eps))
        rstd[n] = r
        for c in range(C):
            xh = (x[n, c] - mean) * r
            xhat[n, c] = xh
            y[n, c] = gamma[c] * xh + beta[c]
    return y, xhat, rstd


@kernel
def layernorm_backward(dy, xhat, rstd, gamma):
    """dy (N, C) -> dx (N, C), dgamma (C,), dbeta (C,).

    With g = dy * gamma:  dx = rstd / C * (C * g - sum(g) - xhat * sum(g * xhat)).

    NumPy twin: numpy_ref.layernorm_backward.
    """
    N, C = dy.shape
    if xhat.shape != dy.shape or rstd.shape[0] != N or gamma.shape[0] != C:
        raise ValueError("layernorm_backward: dy and xhat must be (N, C), rstd (N,), gamma (C,)")
    f = dy.dtype.type
    C_float = f(C)          # C in dy's precision: the loop stays in float32
    dx = np.empty_like(dy)
    for n in range(N):
        sum_g = f(0.0)
        sum_gx = f(0.0)
        for c in range(C):
            g = dy[n, c] * gamma[c]
            sum_g += g
            sum_gx += g * xhat[n, c]
        scale = rstd[n] / C_float
        for c in range(C):
            dx[n, c] = scale * (C_float * dy[n, c] * gamma[c] - sum_g - xhat[n, c] * sum_gx)
    dgamma = np.zeros(C, dtype=dy.dtype)
    dbeta = np.zeros(C, dtype=dy.dtype)
    for n in range(N):          # a pass of its own: the loop above stays free of stores to (C,) arrays
        for c in range(C):
            dgamma[c] += dy[n, c] * xhat[n, c]
            dbeta[c] += dy[n, c]
    return dx, dgamma, dbeta
