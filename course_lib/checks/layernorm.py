"""Checkers for notebook 05, residuals and LayerNorm.

    cl.checks.check_layernorm_forward(layernorm_forward)     # Exercise 5.1: (y, xhat, rstd)
    cl.checks.check_layernorm_backward(layernorm_backward)   # Exercise 5.3: (dx, dgamma, dbeta)

(Exercise 5.2 derives the backward on paper: no checker.)

The signatures are those of course_lib's kernels (course_lib/kernels/layernorm.py):

    layernorm_forward(x, gamma, beta, eps) -> y (N, C), xhat (N, C), rstd (N,)
    layernorm_backward(dy, xhat, rstd, gamma) -> dx (N, C), dgamma (C,), dbeta (C,)

Expected values come from float64 formulas written here, never from the learner's function.
When a result is wrong, the usual mistakes are computed as well and the one the result
reproduces is named: eps outside the square root or squared, the unbiased variance (ddof=1),
the mean or variance over the wrong axis or over the whole array, the variance as
mean(x^2) - mean^2 (which loses digits at a large offset), xhat and rstd returned in the wrong
order; a backward without the mean term or the variance term, gamma applied after the sums,
only on the first term or missing from the variance's sum, the 1/2 of dvar lost, means in
place of the row sums, dmean not divided by C, and the backward of the C-Transformer document
(gamma misplaced and the variance term missing its factor rstd^2, from writing x - mean where
xhat belongs). The default hints, for a result that matches none of them, describe the
structure of the answer (which terms, which sums), not its code.
"""
import numpy as np

from ..kernels import numpy_ref
from .cases import call_hinted
from .core import (case_rng, CheckFailed, checker, diagnose, expect_arrays, expect_finite, expect_float64,
                   expect_shape, stage, tiered)

__all__ = ["check_layernorm_forward", "check_layernorm_backward"]


# ----------------------------------------------------------------------------------------
# the references are numpy_ref's layernorm_forward and layernorm_backward (float64 here)
# ----------------------------------------------------------------------------------------

def _c_transformer_dx(dy, xhat, rstd, gamma):
    """The C-Transformer document's dx, written with xhat and rstd:
    (1/C) rstd [C dy - sum(dy) - (x - mean) sum(dy (x - mean))] gamma, with x - mean = xhat / rstd."""
    C = dy.shape[1]
    r = rstd[:, None]
    xm = xhat / r
    return r / C * (C * dy - dy.sum(1, keepdims=True) - xm * (dy * xm).sum(1, keepdims=True)) * gamma


_BROADCAST_HINT = ("a statistic of each row (a mean, a sum, rstd) has N entries; keep it as an (N, 1) "
                   "column so that it broadcasts along the row: keepdims=True in the reduction, or "
                   "rstd[:, None] for rstd of shape (N,). gamma and beta (C,) broadcast as they are")
_ERRORS = [("broadcast", _BROADCAST_HINT)]      # call_hinted's: a failed broadcast gets it


def _arrays(result, names, what):
    """The learner's 3-tuple of float64 arrays, or a clear failure."""
    if result is None:
        raise CheckFailed(f"{what} returned None", hint="is the `return` statement missing?")
    arrays = expect_arrays(result, names, what)
    for r, name in zip(result, names):
        expect_float64(r, name)
    return arrays


# ----------------------------------------------------------------------------------------
# Exercise 5.1: LayerNorm forward
# ----------------------------------------------------------------------------------------

_FORWARD_HINT = ("go through the definition in order, one row at a time (statistics over axis=1, "
                 "kept as (N, 1) columns): the row's mean, its biased variance, rstd from the "
                 "variance with eps inside the square root, xhat from the centred row, then the "
                 "scale gamma and the shift beta")
_EPS_OUTSIDE = ("eps belongs inside the square root: rstd = 1 / np.sqrt(var + eps), not "
                "1 / (np.sqrt(var) + eps)")
_EPS_MISSING = "eps is missing: rstd = 1 / np.sqrt(var + eps)"
_ANNOTATED = ("this is the Annotated Transformer's LayerNorm, (x - mean) / (std + eps) with the "
              "unbiased std (x.std(-1) in PyTorch divides by C - 1), eps added to the std outside "
              "the root. This course, like PyTorch's nn.LayerNorm, uses the biased variance "
              "(divide by C) with eps inside the root: 1 / np.sqrt(var + eps). The two differ by "
              "a factor sqrt(C / (C - 1)) and where eps sits")
_UNBIASED = ("LayerNorm uses the biased variance, the mean of (x - mean)**2 (divide by C): "
             "np.var's default ddof=0, not ddof=1 (divide by C - 1)")
_WRONG_AXIS = ("LayerNorm normalises each row (one token's C features, axis=1 or -1), not each "
               "column (axis=0, that would be BatchNorm)")
_NO_SQRT = "rstd is one over the square ROOT: 1 / np.sqrt(var + eps), not 1 / (var + eps)"
_NOT_RECIPROCAL = ("rstd is the reciprocal standard deviation, 1 / np.sqrt(var + eps); you return "
                   "np.sqrt(var + eps) itself")
_NO_CENTRE = "subtract the row's mean before scaling: xhat = (x - mean) * rstd"
_WHOLE_ARRAY = ("the statistics are per row: each row (token) gets its own mean and variance "
                "(axis=1, keepdims=True); without an axis, mean and var run over the whole array")
_EPS_SQUARED = ("eps is added to the variance as it is: rstd = 1 / np.sqrt(var + eps), not "
                "var + eps**2 (eps is not a standard deviation)")
_ORDER = "the three results go in the order of the signature: return y, xhat, rstd"
_ONE_PASS = ("compute the variance as the mean of (x - mean)**2 (two passes), not as "
             "mean(x**2) - mean**2: at an offset of 1e6 the subtraction of two numbers near 1e12 "
             "loses the digits of a variance near 1")


def _variants(x, eps):
    """Wrong (xhat, rstd) pairs for x (N, C): (name -> (xhat, rstd (N,)), hint)."""
    mu = x.mean(1, keepdims=True)
    d = x - mu
    var = (d ** 2).mean(1, keepdims=True)
    out = []

    def add(xhat_fn, rstd_fn, hint):
        out.append((xhat_fn, rstd_fn, hint))

    if x.shape[1] > 1:      # the unbiased std needs two features
        std1 = x.std(axis=1, ddof=1, keepdims=True)
        add(lambda: d / (std1 + eps), lambda: 1 / (std1[:, 0] + eps), _ANNOTATED)
    add(lambda: d / (np.sqrt(var) + eps), lambda: 1 / (np.sqrt(var[:, 0]) + eps), _EPS_OUTSIDE)
    add(lambda: d / np.sqrt(var), lambda: 1 / np.sqrt(var[:, 0]), _EPS_MISSING)
    v1 = x.var(axis=1, ddof=1, keepdims=True) if x.shape[1] > 1 else var
    add(lambda: d / np.sqrt(v1 + eps), lambda: 1 / np.sqrt(v1[:, 0] + eps), _UNBIASED)
    add(lambda: d / (var + eps), lambda: 1 / (var[:, 0] + eps), _NO_SQRT)
    add(lambda: d * np.sqrt(var + eps), lambda: np.sqrt(var[:, 0] + eps), _NOT_RECIPROCAL)
    add(lambda: x / np.sqrt(var + eps), lambda: 1 / np.sqrt(var[:, 0] + eps), _NO_CENTRE)
    add(lambda: x / np.sqrt((x ** 2).mean(1, keepdims=True) + eps),
        lambda: 1 / np.sqrt((x ** 2).mean(1) + eps), _NO_CENTRE)
    m0 = x.mean(0, keepdims=True)
    v0 = ((x - m0) ** 2).mean(0, keepdims=True)
    add(lambda: (x - m0) / np.sqrt(v0 + eps), lambda: 1 / np.sqrt(v0[0] + eps), _WRONG_AXIS)
    add(lambda: d / np.sqrt(var + eps ** 2), lambda: 1 / np.sqrt(var[:, 0] + eps ** 2), _EPS_SQUARED)
    m_all, v_all = x.mean(), x.var()
    add(lambda: (x - m_all) / np.sqrt(v_all + eps),
        lambda: np.full(x.shape[0], 1 / np.sqrt(v_all + eps)), _WHOLE_ARRAY)
    v_one = (x ** 2).mean(1, keepdims=True) - mu ** 2
    add(lambda: d / np.sqrt(v_one + eps), lambda: 1 / np.sqrt(v_one[:, 0] + eps), _ONE_PASS)
    return out


def _y_mistakes(xhat, gamma, beta):
    return [
        (lambda: xhat, "y = gamma * xhat + beta: scale by gamma and shift by beta after normalising"),
        (lambda: gamma * xhat, "add beta: y = gamma * xhat + beta"),
        (lambda: xhat + beta, "scale by gamma: y = gamma * xhat + beta"),
        (lambda: beta * xhat + gamma, "gamma scales and beta shifts: y = gamma * xhat + beta, "
                                      "not beta * xhat + gamma"),
        (lambda: gamma * (xhat + beta), "y = gamma * xhat + beta: beta is added after the scale"),
    ]


def _check_forward_case(fn, x, gamma, beta, eps, values=True):
    N, C = x.shape
    y, xhat, rstd = _arrays(call_hinted(fn, (x, gamma, beta, eps), _ERRORS), ["y", "xhat", "rstd"],
                            "layernorm_forward(x, gamma, beta, eps)")
    _expect_forward_shapes(y, xhat, rstd, N, C)
    if not values:
        return
    want_y, want_xhat, want_rstd = numpy_ref.layernorm_forward(x, gamma, beta, eps)
    variants = _variants(x, eps)
    expect_finite(rstd, what="rstd", hint="eps inside the square root keeps a constant row finite: "
                                          "1 / np.sqrt(0 + eps)")
    diagnose(rstd, want_rstd, [(r, h) for _, r, h in variants], _FORWARD_HINT, what="rstd")
    diagnose(xhat, want_xhat, [(xh, h) for xh, _, h in variants], _FORWARD_HINT, what="xhat")
    y_mistakes = _y_mistakes(want_xhat, gamma, beta)
    if N == C:      # the swap cannot show in the shapes: (y, rstd, xhat) on a square input
        y_mistakes.append((lambda: want_xhat, _ORDER))
    diagnose(y, want_y, y_mistakes, _FORWARD_HINT, what="y")


def _expect_forward_shapes(y, xhat, rstd, N, C):
    if xhat.shape == (N,) and rstd.shape == (N, C) and N != C:
        raise CheckFailed(f"the second result has shape {xhat.shape} and the third {rstd.shape}: "
                          f"xhat and rstd are swapped", hint=_ORDER)
    if rstd.shape in ((), (1,), (1, 1)) and N > 1:
        raise CheckFailed(f"rstd has shape {rstd.shape}, one number for the whole array; expected "
                          f"(N,) = {(N,)}", hint=_WHOLE_ARRAY)
    if rstd.shape == (C,) and N != C:
        raise CheckFailed(f"rstd has shape {rstd.shape}, one number per column; expected (N,) = {(N,)}",
                          hint=_WRONG_AXIS)
    if rstd.shape == (N, 1):
        raise CheckFailed(f"rstd has shape {rstd.shape}, expected (N,) = {(N,)}",
                          hint="return rstd as one number per row, shape (N,): e.g. rstd[:, 0] "
                               "of the (N, 1) column (the backward and course_lib's kernels take (N,))")
    expect_shape(rstd, (N,), what="rstd", hint="rstd = 1 / sqrt(var + eps): one number per row, (N,)")
    expect_shape(xhat, (N, C), what="xhat", hint="xhat has the shape of x: (N, C)")
    expect_shape(y, (N, C), what="y", hint="y has the shape of x: (N, C)")


@checker(library=["kernels.layernorm_forward"])
def check_layernorm_forward(fn):
    rng = case_rng(51)
    with stage("returns (y, xhat, rstd) with shapes (N, C), (N, C), (N,)"):
        x = rng.standard_normal((3, 5))
        _check_forward_case(fn, x, np.ones(5), np.zeros(5), 1e-5, values=False)
    with stage("hand-checkable case, eps = 4"):
        # row 0: mean 3, deviations -3 -1 1 3, var 5, var + eps = 9: rstd 1/3, xhat [-1, -1/3, 1/3, 1]
        # row 1: constant, var 0, var + eps = 4: rstd 1/2, xhat 0
        x = np.array([[0.0, 2.0, 4.0, 6.0], [1.0, 1.0, 1.0, 1.0]])
        _check_forward_case(fn, x, np.ones(4), np.zeros(4), 4.0)
    with stage("random rows with gamma and beta"):
        for N, C in ((6, 10), (4, 4), (1, 16)):
            x = 3.0 * rng.standard_normal((N, C)) + rng.standard_normal((N, 1))
            _check_forward_case(fn, x, 1 + 0.5 * rng.standard_normal(C), rng.standard_normal(C), 1e-5)
    with stage("edge cases: constant rows, tiny variance, an offset of 1e6"):
        x = np.array([[2.0, 2.0, 2.0], [-1.0, -1.0, -1.0]])          # xhat 0, y = beta
        _check_forward_case(fn, x, np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.5, 1.0]), 1e-5)
        x = 1e-3 * rng.standard_normal((3, 8))                       # var ~ 1e-6, eps matters
        _check_forward_case(fn, x, np.ones(8), np.zeros(8), 1e-5)
        x = 1e6 + rng.standard_normal((2, 64))                       # one-pass variance loses digits
        _check_forward_case(fn, x, np.ones(64), np.zeros(64), 1e-5)


# ----------------------------------------------------------------------------------------
# Exercise 5.3: LayerNorm backward (Exercise 5.2 derives it)
# ----------------------------------------------------------------------------------------

_BACKWARD_HINT = ("compare your dx with your derivation of Exercise 5.2, term by term: three terms, "
                  "one per path (direct, through the mean, through the variance), under one common "
                  "factor; the mean's and the variance's terms are sums over each row (axis=1, "
                  "keepdims=True), gamma is inside the sums (it multiplies dy before any sum), and "
                  "rstd is one number per row, a column rstd[:, None]")
_C_TRANSFORMER = ("this is the backward of the C-Transformer document, which is wrong twice: gamma "
                  "multiplies the result instead of dy before the sums (use g = dy * gamma inside), and "
                  "the variance term is missing a factor rstd**2 (with x - mean in place of xhat, "
                  "(x - mean) * sum(dy * (x - mean)) is xhat * sum(dy * xhat) / rstd**2)")
_GAMMA_OUTSIDE = ("gamma is misplaced: it multiplies dy before the sums (g = dy * gamma, used in all "
                  "three terms), not the finished result; the two agree only when gamma is constant")
_FACTOR_DROPPED = ("the variance term is off by a factor rstd**2: write it with xhat = (x - mean) * rstd, "
                   "xhat * sum(g * xhat); with x - mean in its place it needs rstd**2")
_NO_GAMMA = "y = gamma * xhat + beta: the gradient reaching xhat is g = dy * gamma"
_NO_MEAN = ("the path through the mean is missing: every x_j moves the mean, which moves every xhat_i; "
            "it contributes the term - sum(g) inside the brackets")
_NO_VAR = ("the path through the variance is missing: every x_j moves the variance and so rstd; "
           "it contributes the term - xhat * sum(g * xhat) inside the brackets")
_DIRECT_ONLY = ("dx = rstd * g is only the direct path: the mean and the variance depend on every "
                "x_j too, and each of the two adds a term (Exercise 5.2, steps 2 and 3)")
_NO_INV_C = ("the brackets are divided by C: the common factor is rstd / C (dmean and the variance "
             "carry a 1/C from their definitions)")
_NO_RSTD = "the whole bracket is multiplied by rstd: the common factor is rstd / C"
_SUM_AXIS0 = ("the sums of the dx formula run over each row (the C features of one token, axis=1), "
              "not over the rows (axis=0): LayerNorm couples the features of one row, not the rows")
_RSTD_COLUMNS = "rstd (N,) holds one number per row: use rstd[:, None], an (N, 1) column"
_SIGN = ("a sign is flipped: the direct term C * g comes with +, and the mean's and the "
         "variance's terms are both subtracted from it")
_GAMMA_FIRST_ONLY = ("gamma is only in the first term: the sums need it too, they add up g = dy * gamma "
                     "(the gradient reaching xhat), not dy")
_GAMMA_NOT_IN_VAR = ("gamma is missing from the variance's sum: it adds up g * xhat with g = dy * gamma, "
                     "not dy * xhat")
_HALF_LOST = ("the variance's term is twice too large: d(rstd)/d(var) = -1/2 rstd**3, and that 1/2 "
              "cancels the 2 of d(var)/dx_i = 2 (x_i - mean) / C; check the 1/2 in dvar")
_MEAN_AND_C = ("the sums are divided by C twice: inside the brackets they are sums over the row "
               "(the common factor rstd / C already divides by C), not means")
_DMU_NO_C = ("the mean's path is C times too large: dmean reaches x_i through d(mean)/dx_i = 1/C, "
             "so it contributes dmean / C")


def _dx_mistakes(dy, xhat, rstd, gamma):
    C = dy.shape[1]
    r = rstd[:, None]
    g = dy * gamma
    sg, sgx = g.sum(1, keepdims=True), (g * xhat).sum(1, keepdims=True)
    sd, sdx = dy.sum(1, keepdims=True), (dy * xhat).sum(1, keepdims=True)
    return [
        (lambda: _c_transformer_dx(dy, xhat, rstd, gamma), _C_TRANSFORMER),
        (lambda: r / C * (C * dy - sd - xhat * sdx) * gamma, _GAMMA_OUTSIDE),
        (lambda: r / C * (C * g - sg - xhat * sgx / r ** 2), _FACTOR_DROPPED),
        (lambda: r / C * (C * dy - sd - xhat * sdx), _NO_GAMMA),
        (lambda: r / C * (C * g - sd - xhat * sdx), _GAMMA_FIRST_ONLY),
        (lambda: r / C * (C * g - sg - xhat * sdx), _GAMMA_NOT_IN_VAR),
        (lambda: r / C * (C * g - sg - 2 * xhat * sgx), _HALF_LOST),
        (lambda: r / C * (C * g - sg / C - xhat * sgx / C), _MEAN_AND_C),
        (lambda: r / C * (C * g - C * sg - xhat * sgx), _DMU_NO_C),
        (lambda: r * g, _DIRECT_ONLY),
        (lambda: r / C * (C * g - xhat * sgx), _NO_MEAN),
        (lambda: r / C * (C * g - sg), _NO_VAR),
        (lambda: r * (C * g - sg - xhat * sgx), _NO_INV_C),
        (lambda: (C * g - sg - xhat * sgx) / C, _NO_RSTD),
        (lambda: r / C * (C * g - g.sum(0, keepdims=True) - xhat * (g * xhat).sum(0, keepdims=True)),
         _SUM_AXIS0),
        (lambda: rstd[None, :] / C * (C * g - sg - xhat * sgx), _RSTD_COLUMNS),
        (lambda: r / C * (C * g + sg + xhat * sgx), _SIGN),
        (lambda: r / C * (C * g - sg + xhat * sgx), _SIGN),
        (lambda: -r / C * (C * g - sg - xhat * sgx), _SIGN),
    ]


_DGAMMA_ROWS = ("dgamma and dbeta are (C,): gamma and beta are shared by all N rows, so their "
                "gradients add up over the rows: np.sum(..., axis=0)")
_DGAMMA_ALL = ("dgamma and dbeta are (C,), one number per feature: sum over the rows only (axis=0), "
               "not over the features as well (the C-Transformer document says 'sum over tokens & "
               "features', which would give one number)")


def _expect_param_grad_shape(g, C, N, name):
    if g.shape == (N, C):
        raise CheckFailed(f"{name} has shape {g.shape}, expected (C,) = {(C,)}", hint=_DGAMMA_ROWS)
    if g.shape in ((), (1,)):
        raise CheckFailed(f"{name} has shape {g.shape}, expected (C,) = {(C,)}", hint=_DGAMMA_ALL)
    if g.shape == (N,) and N != C:
        raise CheckFailed(f"{name} has shape {g.shape}, one number per row; expected (C,) = {(C,)}",
                          hint="sum over the rows (axis=0), not over the features (axis=1): "
                               "one gradient per entry of " + name[1:])
    expect_shape(g, (C,), what=name, hint=f"{name} has the shape of {name[1:]}: (C,)")


def _check_backward_case(fn, dy, xhat, rstd, gamma, values=True):
    N, C = dy.shape
    dx, dgamma, dbeta = _arrays(call_hinted(fn, (dy, xhat, rstd, gamma), _ERRORS), ["dx", "dgamma", "dbeta"],
                                "layernorm_backward(dy, xhat, rstd, gamma)")
    expect_shape(dx, (N, C), what="dx", hint="dx has the shape of x: (N, C)")
    _expect_param_grad_shape(dgamma, C, N, "dgamma")
    _expect_param_grad_shape(dbeta, C, N, "dbeta")
    if not values:
        return
    want_dx, want_dgamma, want_dbeta = numpy_ref.layernorm_backward(dy, xhat, rstd, gamma)
    diagnose(dbeta, want_dbeta, [
        (lambda: (dy * xhat).sum(0), "dgamma and dbeta are swapped: dbeta = sum over rows of dy"),
        (lambda: dy.mean(0), "dbeta is the SUM over rows of dy, not the mean"),
        (lambda: (dy * gamma).sum(0), "y = gamma * xhat + beta: dy/dbeta = 1, so dbeta = sum of dy, "
                                      "without gamma")],
        tiered("beta is added to every row, so every row adds its dy to beta's gradient",
               "dbeta = dy.sum(axis=0)"), what="dbeta")
    diagnose(dgamma, want_dgamma, [
        (lambda: dy.sum(0), "dgamma and dbeta are swapped: dgamma = sum over rows of dy * xhat"),
        (lambda: (dy * xhat).mean(0), "dgamma is the SUM over rows of dy * xhat, not the mean"),
        (lambda: (dy * xhat * gamma).sum(0), "dy/dgamma = xhat: dgamma = sum over rows of dy * xhat, "
                                             "without gamma"),
        (lambda: (dy * (gamma * xhat)).sum(0) + dy.sum(0),
         "dy/dgamma = xhat, not y: dgamma = sum over rows of dy * xhat"),
        (lambda: (dy * xhat / rstd[:, None]).sum(0),
         "dy/dgamma = xhat = (x - mean) * rstd, not x - mean: dgamma = sum over rows of dy * xhat")],
        tiered("gamma multiplies xhat in every row, so every row adds its share to gamma's "
               "gradient", "dgamma = (dy * xhat).sum(axis=0)"), what="dgamma")
    expect_finite(dx, what="dx", hint=_BACKWARD_HINT)
    diagnose(dx, want_dx, _dx_mistakes(dy, xhat, rstd, gamma), _BACKWARD_HINT, what="dx")


def _inputs(rng, N, C, gamma=None, scale=2.0, offset=0.0):
    """dy, xhat, rstd, gamma of a float64 forward on random x (N, C)."""
    x = scale * rng.standard_normal((N, C)) + offset
    g = np.ones(C) if gamma is None else gamma
    _, xhat, rstd = numpy_ref.layernorm_forward(x, g, np.zeros(C), 1e-5)
    return rng.standard_normal((N, C)), xhat, rstd, g


@checker(library=["kernels.layernorm_backward"])
def check_layernorm_backward(fn):
    rng = case_rng(53)
    with stage("returns (dx, dgamma, dbeta) with shapes (N, C), (C,), (C,)"):
        _check_backward_case(fn, *_inputs(rng, 3, 5), values=False)
    with stage("hand-checkable case"):
        # x = [0, 2, 4, 6] with eps = 4: rstd = 1/3, xhat = [-1, -1/3, 1/3, 1].
        # dy = [1, 0, 0, 0], gamma = [2, 1, 1, 1]: g = [2, 0, 0, 0], sum(g) = 2, sum(g xhat) = -2,
        # dx = (1/3)/4 * (4 g - 2 + 2 xhat) = [1/3, -2/9, -1/9, 0]; dgamma = [-1, 0, 0, 0], dbeta = dy
        xhat = np.array([[-1.0, -1 / 3, 1 / 3, 1.0]])
        _check_backward_case(fn, np.array([[1.0, 0.0, 0.0, 0.0]]), xhat, np.array([1 / 3]),
                             np.array([2.0, 1.0, 1.0, 1.0]))
    with stage("random rows, gamma = 1 (as at initialisation)"):
        for N, C in ((4, 6), (5, 5)):
            _check_backward_case(fn, *_inputs(rng, N, C, scale=0.5))
    with stage("random gamma (as after training)"):
        for N, C in ((5, 8), (6, 6), (2, 32)):
            _check_backward_case(fn, *_inputs(rng, N, C, gamma=1 + 0.5 * rng.standard_normal(C)))
    with stage("edge cases: one row, wide rows, small variance"):
        _check_backward_case(fn, *_inputs(rng, 1, 7, gamma=rng.standard_normal(7)))
        _check_backward_case(fn, *_inputs(rng, 3, 256, gamma=1 + 0.1 * rng.standard_normal(256)))
        _check_backward_case(fn, *_inputs(rng, 4, 8, scale=1e-3, gamma=rng.standard_normal(8)))
