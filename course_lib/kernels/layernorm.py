"""LayerNorm over the last axis: y = gamma * (x - mean) / sqrt(var + eps) + beta.

Biased variance, eps inside the square root. Shapes: x, y (N, C); gamma, beta (C,).
Large arrays run in ranges of rows on several threads, dgamma and dbeta in ranges of
columns (each column summed over the rows in order): the same bytes on any thread count.
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.reduce import column_sums
from ._fast.threads import split_work
from ._fast.tuning import LAYERNORM_GRAIN as GRAIN


@kernel(split=True)
def _forward_rows(x, gamma, beta, eps, y, xhat, rstd, first, last):
    """The rows first..last-1: sums in x's precision (two passes: mean, then the squares of x - mean)."""
    C = x.shape[1]
    f = x.dtype.type
    inv_c = f(1.0 / C)
    for n in range(first, last):
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


def layernorm_forward(x, gamma, beta, eps):
    """x (N, C) -> y (N, C), xhat (N, C), rstd (N,)  with xhat = (x - mean) * rstd.

    NumPy twin: numpy_ref.layernorm_forward.
    """
    N, C = x.shape
    if gamma.shape[0] != C or beta.shape[0] != C:
        raise ValueError("layernorm_forward: gamma and beta must have C entries, x (N, C)")
    y, xhat, rstd = np.empty_like(x), np.empty_like(x), np.empty(N, dtype=x.dtype)
    split_work(_forward_rows, N, x, gamma, beta, float(eps), y, xhat, rstd, work=x.size, grain=GRAIN)
    return y, xhat, rstd


@kernel
def _backward_sums(dy, xhat, gamma, n):
    """(sum of g, sum of g * xhat) over row n, g = dy * gamma."""
    f = dy.dtype.type
    sum_g = f(0.0)
    sum_gx = f(0.0)
    for c in range(dy.shape[1]):
        g = dy[n, c] * gamma[c]
        sum_g += g
        sum_gx += g * xhat[n, c]
    return sum_g, sum_gx


@kernel(in_order=True, split=True)
def _backward_rows(dy, xhat, rstd, gamma, dx, first, last):
    """dx at the rows first..last-1. Compiled in order: with fused multiply-adds allowed, LLVM
    fused dx's formula one way here and another inside its parallel loop on ARM (other bytes on
    two threads); the sums keep fastmath (_backward_sums)."""
    C = dy.shape[1]
    f = dy.dtype.type
    C_float = f(C)          # C in dy's precision: the loop stays in float32
    for n in range(first, last):
        sum_g, sum_gx = _backward_sums(dy, xhat, gamma, n)
        scale = rstd[n] / C_float
        for c in range(C):
            dx[n, c] = scale * (C_float * dy[n, c] * gamma[c] - sum_g - xhat[n, c] * sum_gx)


def layernorm_backward(dy, xhat, rstd, gamma):
    """dy (N, C) -> dx (N, C), dgamma (C,), dbeta (C,).

    With g = dy * gamma:  dx = rstd / C * (C * g - sum(g) - xhat * sum(g * xhat));
    dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.

    NumPy twin: numpy_ref.layernorm_backward.
    """
    N, C = dy.shape
    if xhat.shape != dy.shape or rstd.shape[0] != N or gamma.shape[0] != C:
        raise ValueError("layernorm_backward: dy and xhat must be (N, C), rstd (N,), gamma (C,)")
    dx = np.empty_like(dy)
    split_work(_backward_rows, N, dy, xhat, rstd, gamma, dx, work=dy.size, grain=GRAIN)
    dbeta, dgamma = column_sums(dy, xhat)
    return dx, dgamma, dbeta
