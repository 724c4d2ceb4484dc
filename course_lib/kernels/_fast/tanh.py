"""tanh(x) that vectorises inside Numba loops (float32); float64 keeps libm's.

Numba turns np.tanh into one libm call per element (~16 ns; no SVML here). In float32
this version is branch-free arithmetic, so LLVM runs it on the vector lanes:

    tanh(x) = x P(x^2) / Q(x^2)   for |x| < 9,   P, Q of degree 4, P(0) = Q(0) = 1
    tanh(x) = sign(x)             for |x| >= 9   (tanh(9) rounds to 1 in float32)

P and Q minimise the largest relative error on (0, 9] (2e-8 in exact arithmetic):
Lawson's iteratively reweighted least squares on the linearised residual x P - tanh(x) Q,
as `fit` below does. Evaluated in float32 the result is within 5 ulps of the true value,
0.4 on average and within 1 for 85% of |x| < 10 (tests/test_tanh.py measures it; libm's is
within 1). tanh(x) = x exactly for tiny |x|, it is odd bit for bit, -0.0 stays -0.0, +-inf
gives +-1 and NaN stays NaN.

float64 stays libm's tanh: its kernels serve the gradient checks, where exactness counts.
Call `tanh(x)` on a float32 or float64 scalar from a kernel.
"""
import numpy as np
from numba import types
from numba.extending import overload

CLAMP = 9.0
# from fit() below (tests/test_tanh.py checks that it still gives them)
P = (1.0, 0.13383929645462422, 0.0034989346552297042, 2.0660205406021556e-05, 1.3418291316081339e-08)
Q = (1.0, 0.4671725115283846, 0.02588997604979743, 0.00032909358091191533, 7.804115517809681e-07)


def fit(m=4, n=4, clamp=CLAMP, iterations=80):
    """-> (P, Q, largest relative error): the coefficients above, in powers of x^2 (float64 maths)."""
    x = np.linspace(0.0, clamp, 8001)[1:]
    x = np.union1d(x, clamp * (1 - np.cos(np.linspace(0, np.pi / 2, 4001)[1:])))
    t = np.tanh(x)
    u = (x / clamp) ** 2                              # scaled, for a well-conditioned system
    weights, q_prev = np.full(x.size, 1.0 / x.size), np.ones_like(x)
    for _ in range(iterations):
        # x (1 + sum p_k u^k) - t (1 + sum q_k u^k) = 0 for the unknowns p_1..p_m, q_1..q_n
        A = np.hstack([x[:, None] * u[:, None] ** np.arange(1, m + 1),
                       -t[:, None] * u[:, None] ** np.arange(1, n + 1)])
        scale = np.sqrt(weights) / (t * q_prev)       # relative error, linearised around the last Q
        c = np.linalg.lstsq(A * scale[:, None], (t - x) * scale, rcond=None)[0]
        p, q = np.concatenate([[1.0], c[:m]]), np.concatenate([[1.0], c[m:]])
        q_prev = np.polyval(q[::-1], u)
        error = np.abs(x * np.polyval(p[::-1], u) / q_prev - t) / t
        weights = weights * error                      # Lawson: weight where the error is largest
        weights /= weights.sum()
    powers = clamp ** (2 * np.arange(max(m, n) + 1))
    return p / powers[:m + 1], q / powers[:n + 1], float(error.max())


def _tanh32(x):
    f = np.float32
    p0, p1, p2, p3, p4 = (f(c) for c in P)
    q0, q1, q2, q3, q4 = (f(c) for c in Q)
    clamp, one = f(CLAMP), f(1.0)

    def tanh_impl(x):
        x2 = x * x
        p = (((p4 * x2 + p3) * x2 + p2) * x2 + p1) * x2 + p0
        q = (((q4 * x2 + q3) * x2 + q2) * x2 + q1) * x2 + q0
        t = x * p / q                                  # NaN for huge |x| (inf / inf): selected away
        t = one if t > one else t                      # rounding may overshoot 1 by an ulp near the clamp
        t = -one if t < -one else t
        t = one if x >= clamp else t                   # every select is written so that NaN passes through
        return -one if x <= -clamp else t
    return tanh_impl


def _tanh64(x):
    return np.tanh(x)


def tanh(x):
    """tanh(x) for a float32 or float64 scalar; inside Numba the vectorising version (float32)."""
    return np.tanh(x)


# contract only, as for exp: no reassociation of the two polynomials.
@overload(tanh, jit_options={"fastmath": {"contract"}, "error_model": "numpy"})
def _tanh_overload(x):
    if x == types.float32:
        return _tanh32(x)
    if x == types.float64:
        return _tanh64
    return None
