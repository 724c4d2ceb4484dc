"""LayerNorm over the last axis: y = gamma * (x - mean) / sqrt(var + eps) + beta.

Biased variance, eps inside the square root. Shapes: x, y (N, C); gamma, beta (C,).
"""
import numpy as np

from ._jit import kernel


@kernel
def layernorm_forward(x, gamma, beta, eps):
    """x (N, C) -> y (N, C), xhat (N, C), rstd (N,)  with xhat = (x - mean) * rstd."""
    N, C = x.shape
    y = np.empty_like(x)
    xhat = np.empty_like(x)
    rstd = np.empty(N, dtype=x.dtype)
    for n in range(N):
        mean = 0.0
        for c in range(C):
            mean += x[n, c]
        mean /= C
        var = 0.0
        for c in range(C):
            d = x[n, c] - mean
            var += d * d
        var /= C
        r = 1.0 / np.sqrt(var + eps)
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
    """
    N, C = dy.shape
    dx = np.empty_like(dy)
    dgamma = np.zeros(C, dtype=dy.dtype)
    dbeta = np.zeros(C, dtype=dy.dtype)
    for n in range(N):
        sum_g = 0.0
        sum_gx = 0.0
        for c in range(C):
            g = dy[n, c] * gamma[c]
            sum_g += g
            sum_gx += g * xhat[n, c]
            dgamma[c] += dy[n, c] * xhat[n, c]
            dbeta[c] += dy[n, c]
        scale = rstd[n] / C
        for c in range(C):
            dx[n, c] = scale * (C * dy[n, c] * gamma[c] - sum_g - xhat[n, c] * sum_gx)
    return dx, dgamma, dbeta
