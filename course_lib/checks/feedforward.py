"""Checkers for notebook 06, feed-forward and the block.

    cl.checks.check_linear_backward(linear_backward)   # Exercise 6.2: (dx, dW, db)
    cl.checks.check_relu_backward(relu_backward)       # Exercise 6.3: dh
    cl.checks.check_gelu(gelu_forward, gelu_backward)  # Exercise 6.5: y, then dh
    cl.checks.check_block_forward(block_forward)       # Exercise 6.6: one block, post- or pre-LN

(Exercises 6.1 and 6.4 derive the linear layer's backward and the GELU derivative on paper:
no checker.)

Expected values come from NumPy formulas written here in float64, never from the learner's
function. When a result is wrong, the checker computes the usual mistakes (a transposed
product, db not summed or averaged, the GELU product rule cut short, a constant rounded,
the norm placements swapped, a residual forgotten) and names the one the result matches.
The linear layer's cases use N, I and O all different, so that a product in the wrong
order cannot even be formed; when it fails, the checker runs the function once more on
square inputs, where such a product runs, to name the mistake.
"""
import math

import numpy as np

from . import reference as ref
from .cases import product_errors, result_of
from .core import (case_rng, CheckFailed, call, checker, diagnose, expect_arrays, expect_finite,
                   expect_shape, stage, tiered)

__all__ = ["check_linear_backward", "check_relu_backward", "check_gelu", "check_block_forward"]

GELU_A = math.sqrt(2.0 / math.pi)
GELU_B = 0.044715


# ----------------------------------------------------------------------------------------
# Exercise 6.2: linear backward (Exercise 6.1 derives it on paper)
# ----------------------------------------------------------------------------------------

_DX_HINT = tiered("dx has the shape of x, (N, I): which product of dy (N, O) and W (I, O) gives "
                  "it? Compare with your derivation of Exercise 6.1",
                  "dx = dy @ W.T: (N, O)(O, I) -> (N, I)")
_DW_HINT = tiered("dW has the shape of W, (I, O), and sums the contributions of all N rows: which "
                  "product of x (N, I) and dy (N, O) gives it?",
                  "dW = x.T @ dy: (I, N)(N, O) -> (I, O), the sum over n inside the product")
_DB_HINT = tiered("b is added to every row, so every row n adds its dy[n] to b's gradient, (O,) "
                  "like b", "db = dy.sum(axis=0)")
_SUM_NOT_MEAN = ("sum over the rows, do not average: b (and W) is used by every row, and the loss adds "
                 "the contributions of all rows; a mean is only right if the loss itself divided by N")


def _linear_backward(dy, x, W):
    return dy @ W.T, x.T @ dy, dy.sum(axis=0)


def _dx_mistakes(dy, x, W):
    return [(lambda: dy @ W, "dx = dy @ W.T: the transpose of W, (N, O)(O, I); dy @ W only runs when W is square"),
            (lambda: -(dy @ W.T), "the sign is flipped: dx = dy @ W.T")]


def _dw_mistakes(dy, x, W):
    N = dy.shape[0]
    return [(lambda: dy.T @ x, "dW = x.T @ dy, shaped like W (I, O); dy.T @ x is its transpose (O, I)"),
            (lambda: x @ dy.T, "dW = x.T @ dy: transpose x, not dy"),
            (lambda: x.T @ dy / N, "dW = x.T @ dy sums the rows' outer products x[n] dy[n]^T; do not divide by N"),
            (lambda: np.outer(x[0], dy[0]), "dW sums the outer product x[n] dy[n]^T over ALL rows n, not just "
                                            "the first: x.T @ dy"),
            (lambda: np.outer(x.sum(0), dy.sum(0)),
             "sum the outer products of each row, not the outer product of the sums: "
             "dW = sum_n x[n] dy[n]^T = x.T @ dy")]


def _db_mistakes(dy, x, W):
    return [(lambda: dy.mean(axis=0), _SUM_NOT_MEAN),
            (lambda: dy[0], "db sums dy over ALL rows: dy.sum(axis=0), not the first row"),
            (lambda: np.zeros(dy.shape[1]), "db is not zero: y = x W + b, so dy/db = 1 for every row: "
                                            "db = dy.sum(axis=0)")]


def _shape_hint(dy, x, W):
    N, I, O = x.shape[0], x.shape[1], W.shape[1]
    return (f"here dy is {dy.shape} (N, O), x {x.shape} (N, I), W {W.shape} (I, O): dx must be (N, I) = "
            f"{(N, I)}, dW (I, O) = {(I, O)}, db (O,) = {(O,)}; write each product with its shapes")


def _square_probe(fn):
    """On square inputs (N = I = O = 3) a product in the wrong order runs: name the mistake it makes."""
    rng = case_rng(620)
    dy, x, W = (rng.standard_normal((3, 3)) for _ in range(3))
    try:
        with np.errstate(all="ignore"):
            got = call(fn, dy, x, W)
        dx, dW, db = (np.asarray(g, dtype=float) for g in got)
    except Exception:  # noqa: BLE001  the probe only refines a hint
        return None
    for g, want, mistakes in ((dx, dy @ W.T, _dx_mistakes), (dW, x.T @ dy, _dw_mistakes)):
        if g.shape == want.shape and np.allclose(g, want):
            continue
        for wrong, hint in mistakes(dy, x, W):
            try:
                cand = wrong()
            except ValueError:
                continue
            if np.shape(cand) == g.shape and np.allclose(g, cand):
                return hint
    return None


def _check_linear_case(fn, dy, x, W, rtol=1e-10, atol=1e-12):
    """float64 inputs: rtol 1e-10, far below float32's rounding, so a result cast to float32 fails
    (and core names the dtype); float32 inputs get their own, looser tolerance."""
    N, I, O = x.shape[0], x.shape[1], W.shape[1]
    raw = result_of(fn, dy, x, W, errors=product_errors(_shape_hint(dy, x, W)))
    dx, dW, db = expect_arrays(raw, ["dx", "dW", "db"], "linear_backward(dy, x, W)")
    if dW.shape == (O, I) and I != O:
        raise CheckFailed(f"dW has shape {dW.shape}, expected (I, O) = {(I, O)}",
                          hint="dW = x.T @ dy, shaped like W (I, O); dy.T @ x is its transpose (O, I)")
    if dx.shape == (N, I) and dW.shape == (I, O) and db.shape == (N, O) and O != I:
        raise CheckFailed(f"db has shape {db.shape}, expected (O,) = {(O,)}",
                          hint="db = dy.sum(axis=0): b is shared by every row, so its gradient adds dy over the "
                               "rows; returning dy itself gives one gradient per row")
    if db.shape == (N,) and N != O:
        raise CheckFailed(f"db has shape {db.shape}, expected (O,) = {(O,)}",
                          hint="sum over the rows, axis=0 (one entry per output), not over axis=1")
    if dx.shape == (I, O) and dW.shape == (N, I) and (I, O) != (N, I):
        raise CheckFailed(f"dx has shape {dx.shape} and dW {dW.shape}",
                          hint="you seem to return (dW, dx, db); return dx, dW, db in this order")
    expect_shape(dx, (N, I), what="dx", hint=_DX_HINT)
    expect_shape(dW, (I, O), what="dW", hint=_DW_HINT)
    expect_shape(db, (O,), what="db", hint=_DB_HINT)
    dy, x, W = (np.asarray(a, dtype=np.float64) for a in (dy, x, W))
    want = _linear_backward(dy, x, W)
    for got, w, name, mistakes, hint in ((dx, want[0], "dx", _dx_mistakes, _DX_HINT),
                                         (dW, want[1], "dW", _dw_mistakes, _DW_HINT),
                                         (db, want[2], "db", _db_mistakes, _DB_HINT)):
        expect_finite(got, what=name, hint=hint)
        diagnose(got, w, [(m, h) for m, h in mistakes(dy, x, W)], hint, what=name, rtol=rtol, atol=atol)


@checker(library=["kernels.linear_backward"])
def check_linear_backward(fn):
    rng = case_rng(62)
    with stage("returns (dx, dW, db) with the shapes of x, W, b"):
        # N = 5 rows, I = 3 inputs, O = 4 outputs: a product in the wrong order cannot be formed
        dy, x, W = rng.standard_normal((5, 4)), rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
        try:
            _check_linear_case(fn, dy, x, W)
        except CheckFailed as e:
            if e.message.startswith("your function raised"):
                raise CheckFailed(e.message, _square_probe(fn) or e.hint) from None
            raise
    with stage("hand-checkable case"):
        # x rows [1, 0], [0, 1], [1, 1]; dy = [1, 2, 3] (one output); W = [2, -1]:
        # dx = dy W^T = [[2, -1], [4, -2], [6, -3]], dW = x^T dy = [[1 + 3], [2 + 3]] = [[4], [5]], db = [6]
        x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        dy = np.array([[1.0], [2.0], [3.0]])
        W = np.array([[2.0], [-1.0]])
        _check_linear_case(fn, dy, x, W)
    with stage("random cases"):
        for N, I, O in ((6, 4, 5), (8, 64, 16), (2, 7, 3)):
            _check_linear_case(fn, rng.standard_normal((N, O)), rng.standard_normal((N, I)),
                               rng.standard_normal((I, O)))
    with stage("edge cases: one row, square, float32"):
        # one row: dW is the single outer product x[0] dy[0]^T and db = dy[0]
        _check_linear_case(fn, rng.standard_normal((1, 3)), rng.standard_normal((1, 2)),
                           rng.standard_normal((2, 3)))
        _check_linear_case(fn, *(rng.standard_normal((4, 4)) for _ in range(3)))
        dy, x, W = (rng.standard_normal(s).astype(np.float32) for s in ((16, 8), (16, 12), (12, 8)))
        _check_linear_case(fn, dy, x, W, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Exercise 6.3: ReLU backward
# ----------------------------------------------------------------------------------------

_RELU_HINT = tiered("ReLU's slope is 1 where its input h is positive and 0 where it is negative: "
                    "the gradient dy passes where h > 0 and is blocked elsewhere",
                    "In code: np.where(h > 0, dy, 0.0), or dy * (h > 0)")


_TINY_HINT = ("the mask is not h > 0: a positive h, however tiny (1e-30, even 1e-300), has slope 1, "
              "and a negative one slope 0. Compare h with 0 itself, not with a small threshold")
_AT_ZERO_HINT = ("at h = 0 ReLU has no derivative, and any slope in [0, 1] is a valid subgradient: dh "
                 "may be any value between 0 and dy there (course_lib and PyTorch take 0), but not "
                 "outside that range")


def _relu_mistakes(dy, h, got):
    """The usual wrong backwards; the last three are read off `got` (the learner's result):
    right everywhere except at tiny nonzero h, or at h = 0 outside [0, dy]."""
    want = np.where(h > 0, dy, 0.0)
    tiny = (np.abs(h) < 1e-3) & (h != 0)
    return [
        (lambda: (h > 0).astype(float), "multiply the mask by dy: dh = dy * (h > 0); the mask alone is dy/dh's "
                                        "local factor, not the gradient"),
        (lambda: np.where(dy > 0, dy, 0.0), tiered("the mask comes from the forward input h, not "
                                                   "from dy", "dh = np.where(h > 0, dy, 0.0)")),
        (lambda: np.maximum(h, 0.0), "that is the forward, ReLU(h); the backward multiplies dy by the slope "
                                     "(1 where h > 0, else 0)"),
        (lambda: dy * np.maximum(h, 0.0), tiered("the slope of ReLU is 1 where h > 0, not h itself",
                                                 "dh = dy * (h > 0)")),
        (lambda: np.where(h < 0, dy, 0.0), "the mask is reversed: the gradient passes where h > 0"),
        (lambda: dy, tiered("ReLU blocks the gradient where its input h is not positive",
                            "dh = np.where(h > 0, dy, 0.0)")),
        (lambda: np.where(tiny & (h > 0) & (got == 0), 0.0, want), _TINY_HINT),
        (lambda: np.where(tiny & (h < 0) & (got == dy), dy, want), _TINY_HINT),
        (lambda: np.where(h == 0, got, want), _AT_ZERO_HINT),
    ]


def _check_relu_case(fn, dy, h, rtol=1e-12, atol=0.0):
    """ReLU backward copies dy or writes 0: exact, so the tolerance is rounding-free."""
    raw = result_of(fn, dy, h)
    got = expect_shape(raw, h.shape, hint="dh has the shape of h (and of dy)")
    expect_finite(got, hint=_RELU_HINT)
    d64, h64 = np.asarray(dy, dtype=np.float64), np.asarray(h, dtype=np.float64)
    want = np.where(h64 > 0, d64, 0.0)
    # at h = 0 any slope in [0, 1] is a subgradient: every dh between 0 and dy is right there
    want = np.where(h64 == 0, np.clip(got, np.minimum(d64, 0.0), np.maximum(d64, 0.0)), want)
    diagnose(raw, want, _relu_mistakes(d64, h64, got), _RELU_HINT, rtol=rtol, atol=atol)


@checker(library=["kernels.relu_backward"])
def check_relu_backward(fn):
    rng = case_rng(63)
    with stage("shapes"):
        out = result_of(fn, rng.standard_normal((2, 5)), rng.standard_normal((2, 5)))
        expect_shape(out, (2, 5), hint="dh has the shape of h (and of dy)")
    with stage("hand-checkable case"):
        # h = [-2, -0.5, 0.5, 3], dy = [1, -2, 3, -4]: dh = [0, 0, 3, -4]
        _check_relu_case(fn, np.array([[1.0, -2.0, 3.0, -4.0]]), np.array([[-2.0, -0.5, 0.5, 3.0]]))
    with stage("random cases (dy of both signs)"):
        for shape in ((4, 6), (8, 256)):
            _check_relu_case(fn, rng.standard_normal(shape), rng.standard_normal(shape))
    with stage("h tiny but not 0 (1e-300 to 1e-7, both signs)"):
        # the slope is 1 for every h > 0 and 0 for every h < 0: a threshold such as h > 1e-6 fails
        _check_relu_case(fn, np.array([[1.0, -2.0, 3.0, -4.0, 5.0], [0.5, -1.5, 2.5, 1.0, -1.0]]),
                         np.array([[1e-300, 1e-30, 1e-12, 1e-8, 2.0], [-1e-300, -1e-30, -1e-8, 1e-7,
                                                                       -2.0]]))
    with stage("h exactly 0"):
        # ReLU has no derivative at 0: any slope in [0, 1] is a subgradient, so any dh between
        # 0 and dy is accepted there (course_lib, like PyTorch, takes 0; h >= 0 gives dy)
        _check_relu_case(fn, np.array([[1.5, -2.0, 3.0], [1.0, 1.0, 1.0]]),
                         np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 2.0]]))
    with stage("float32"):
        dy, h = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(2))
        h[0, :4] = 0.0
        h[1, :4] = np.array([1e-30, -1e-30, 1e-8, -1e-8], dtype=np.float32)
        _check_relu_case(fn, dy, h)


# ----------------------------------------------------------------------------------------
# Exercise 6.5: GELU forward (tanh approximation) and backward, one checker
# ----------------------------------------------------------------------------------------

_GELU_HINT = tiered("compare your code with the tanh approximation of notebook 06, factor by "
                    "factor: the 0.5, the factor h, 1 + tanh(u), and inside u the constant "
                    "sqrt(2/pi) and the cubic term",
                    "y = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))")
_CONST_B_HINT = ("the constant is 0.044715 (six decimals), not 0.0447: the difference is small but it shows "
                 "at |h| of 1 to 3, and the model was trained with 0.044715")
_CONST_A_HINT = "the factor in front is sqrt(2/pi) = 0.7979, not sqrt(pi/2) = 1.2533: np.sqrt(2 / np.pi)"
_ROUNDED_A_HINT = ("you used sqrt(2/pi) rounded to 0.7979; the rounding shows at the checker's tolerance: "
                   "compute it as np.sqrt(2 / np.pi)")
_NO_A_HINT = ("the factor sqrt(2/pi) is missing inside tanh: u = sqrt(2/pi) * (h + 0.044715 h^3), "
              "not h + 0.044715 h^3")


def _gelu(h, a=GELU_A, b=GELU_B):
    return 0.5 * h * (1.0 + np.tanh(a * (h + b * h ** 3)))


def _gelu_exact(h):
    from math import erf
    return 0.5 * h * (1.0 + np.vectorize(erf)(h / math.sqrt(2.0)))


def _gelu_mistakes(h):
    return [
        (lambda: _gelu(h, b=0.0447), _CONST_B_HINT),
        (lambda: _gelu(h, a=math.sqrt(math.pi / 2)), _CONST_A_HINT),
        (lambda: _gelu(h, a=0.7979), _ROUNDED_A_HINT),
        (lambda: _gelu(h, a=1.0), _NO_A_HINT),
        (lambda: _gelu(h, a=2.0 / math.pi), "the factor is the square root: sqrt(2/pi), not 2/pi"),
        (lambda: h * (1.0 + np.tanh(GELU_A * (h + GELU_B * h ** 3))),
         "the factor 0.5 is missing: y = 0.5 h (1 + tanh(u))"),
        (lambda: 0.5 * (1.0 + np.tanh(GELU_A * (h + GELU_B * h ** 3))),
         "multiply by h: y = 0.5 * h * (1 + tanh(u)); 0.5 (1 + tanh(u)) alone is the smooth step"),
        (lambda: 0.5 * h * (1.0 + np.tanh(GELU_A * (h + GELU_B * h ** 2))),
         "the cubic term is 0.044715 * h**3, not h**2"),
        (lambda: 0.5 * h * (1.0 + np.tanh(GELU_A * h + GELU_B * h ** 3)),
         "sqrt(2/pi) multiplies the whole bracket (h + 0.044715 h^3), not h alone"),
        (lambda: _gelu_exact(h), tiered("that is the exact GELU, h * Phi(h) with erf; the course uses "
                                        "the tanh approximation of notebook 06", _GELU_HINT.formula)),
    ]


def _check_gelu_case(fn, h, rtol=1e-9, atol=1e-12):
    raw = result_of(fn, h)
    got = expect_shape(raw, h.shape, hint="GELU acts element by element: y has the shape of h")
    expect_finite(got, hint="for very negative h, tanh(u) -> -1 and y -> 0; np.tanh never overflows")
    h64 = np.asarray(h, dtype=np.float64)
    diagnose(raw, _gelu(h64), _gelu_mistakes(h64), _GELU_HINT, rtol=rtol, atol=atol)


def _gelu_forward_stages(fn):
    rng = case_rng(64)
    with stage("GELU forward: shapes"):
        expect_shape(result_of(fn, rng.standard_normal((3, 4))), (3, 4),
                     hint="GELU acts element by element: y has the shape of h")
    with stage("GELU forward: h = 0 and large |h|"):
        # GELU(0) = 0; for large h, tanh -> 1 and y -> h; for very negative h, y -> 0
        _check_gelu_case(fn, np.array([[0.0, 10.0, -10.0]]))
    with stage("GELU forward: moderate h, where the constants matter"):
        _check_gelu_case(fn, np.array([[-3.0, -1.5, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0]]))
    with stage("GELU forward: random cases"):
        for shape in ((4, 6), (8, 256)):
            _check_gelu_case(fn, 2.0 * rng.standard_normal(shape))
    with stage("GELU forward: float32"):
        _check_gelu_case(fn, 2.0 * rng.standard_normal((8, 16)).astype(np.float32), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------
# Exercise 6.5, second part: GELU backward (Exercise 6.4 derives the derivative on paper)
# ----------------------------------------------------------------------------------------

_GELU_BACK_HINT = tiered("differentiate y = 0.5 h (1 + t), t = tanh(u), as in Exercise 6.4: the "
                         "product rule gives two terms, and the one through t takes the chain rule "
                         "through tanh and through u(h); then multiply by dy",
                         "With u = sqrt(2/pi) (h + 0.044715 h^3) and t = tanh(u): dh = dy * (0.5 (1 "
                         "+ t) + 0.5 h (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 h^2))")


def _gelu_grad(h, a=GELU_A, b=GELU_B, first=True, second=True, du_cubic=3.0, sech2=None, half2=0.5,
               a_du=None):
    """GELU'(h), or a known-wrong variant of it; a_du is the factor in front of u'(h) (default: a)."""
    t = np.tanh(a * (h + b * h ** 3))
    s2 = 1.0 - t * t if sech2 is None else sech2(t)
    g = 0.0
    if first:
        g = g + 0.5 * (1.0 + t)
    if second:
        g = g + half2 * h * s2 * (a if a_du is None else a_du) * (1.0 + du_cubic * b * h * h)
    return g


def _gelu_exact_grad(h):
    """The derivative of the exact GELU h Phi(h): Phi(h) + h phi(h)."""
    from math import erf
    return 0.5 * (1.0 + np.vectorize(erf)(h / math.sqrt(2.0))) + h * np.exp(-0.5 * h * h) / math.sqrt(2 * math.pi)


def _gelu_back_mistakes(dy, h):
    return [
        (lambda: dy * _gelu_grad(h, second=False),
         tiered("the product rule has two terms: y = 0.5 h (1 + t) depends on h through the factor h "
                "AND through t = tanh(u); the term through t is missing",
                "Add 0.5 h (1 - t^2) u'(h)")),
        (lambda: dy * _gelu_grad(h, first=False),
         tiered("the product rule has two terms: you kept only the one through tanh; the term "
                "through the factor h is missing", "Add 0.5 (1 + t)")),
        (lambda: dy * _gelu_grad(h, du_cubic=1.0),
         tiered("the derivative of h^3 is 3 h^2", "u'(h) = sqrt(2/pi) (1 + 3 * 0.044715 h^2)")),
        (lambda: dy * _gelu_grad(h, du_cubic=0.0),
         tiered("u'(h) is not sqrt(2/pi) alone: differentiate the cubic term too",
                "u'(h) = sqrt(2/pi) (1 + 3 * 0.044715 h^2)")),
        (lambda: dy * _gelu_grad(h, sech2=lambda t: 1.0 - t),
         "the derivative of tanh(u) is 1 - tanh(u)^2, not 1 - tanh(u)"),
        (lambda: dy * _gelu_grad(h, half2=1.0),
         "the second term keeps the 0.5 of the forward: 0.5 h (1 - t^2) u'(h)"),
        (lambda: dy * _gelu_grad(h, b=0.0447), _CONST_B_HINT),
        (lambda: dy * _gelu_grad(h, a=math.sqrt(math.pi / 2)), _CONST_A_HINT),
        (lambda: dy * _gelu_grad(h, a=0.7979), _ROUNDED_A_HINT),
        (lambda: dy * _gelu_grad(h, a=1.0), _NO_A_HINT),
        (lambda: dy * _gelu_grad(h, a_du=1.0),
         "u'(h) keeps the factor sqrt(2/pi): u'(h) = sqrt(2/pi) (1 + 3 * 0.044715 h^2)"),
        (lambda: dy * _gelu_exact_grad(h),
         tiered("that is the derivative of the exact GELU, Phi(h) + h phi(h); the forward is the "
                "tanh approximation, so the backward must differentiate it",
                "GELU'(h) = 0.5 (1 + t) + 0.5 h (1 - t^2) u'(h)")),
        (lambda: _gelu_grad(h), "multiply the local derivative by the upstream gradient dy"),
        (lambda: dy * _gelu(h), "that is dy times the forward GELU(h); the backward needs its derivative"),
    ]


def _check_gelu_back_case(fn, dy, h, rtol=1e-9, atol=1e-12):
    raw = result_of(fn, dy, h)
    got = expect_shape(raw, h.shape, hint="dh has the shape of h (and of dy)")
    expect_finite(got, hint="1 - tanh(u)^2 is finite for every h: compute it from tanh, not from cosh")
    d64, h64 = np.asarray(dy, dtype=np.float64), np.asarray(h, dtype=np.float64)
    diagnose(raw, d64 * _gelu_grad(h64), _gelu_back_mistakes(d64, h64), _GELU_BACK_HINT, rtol=rtol, atol=atol)


def _gelu_backward_stages(fn):
    rng = case_rng(66)
    with stage("GELU backward: shapes"):
        expect_shape(result_of(fn, rng.standard_normal((3, 4)), rng.standard_normal((3, 4))), (3, 4),
                     hint="dh has the shape of h (and of dy)")
    with stage("GELU backward: h = 0 and h = 10"):
        # at h = 0: t = 0, so GELU'(0) = 0.5 (1 + 0) + 0 = 0.5; at h = 10: t = 1 to 16 digits, so
        # GELU'(10) = 1 + 0.5 * 10 * (1 - t^2) u' = 1 (1 - t^2 < 1e-16). dy = [2, -4, 3]: dh = [1, -2, 3]
        _check_gelu_back_case(fn, np.array([[2.0, -4.0, 3.0]]), np.array([[0.0, 0.0, 10.0]]))
    with stage("GELU backward: moderate h, where every term matters"):
        h = np.array([[-3.0, -1.5, -0.5, 0.5, 1.0, 1.5, 2.0, 3.0]])
        _check_gelu_back_case(fn, np.ones_like(h), h)
        _check_gelu_back_case(fn, rng.standard_normal(h.shape), h)
    with stage("GELU backward: random cases"):
        for shape in ((4, 6), (8, 256)):
            _check_gelu_back_case(fn, rng.standard_normal(shape), 2.0 * rng.standard_normal(shape))
    with stage("GELU backward: large |h| and float32"):
        _check_gelu_back_case(fn, np.ones((1, 4)), np.array([[-20.0, -8.0, 8.0, 20.0]]))
        dy, h = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(2))
        _check_gelu_back_case(fn, dy, 2 * h, rtol=1e-5, atol=1e-6)


@checker(library=["kernels.gelu_forward", "kernels.gelu_backward"])
def check_gelu(forward, backward):
    """gelu_forward(h) -> y first, then gelu_backward(dy, h) -> dh; each stage is named by its function."""
    if not callable(backward):
        raise CheckFailed(f"pass both functions: check_gelu(gelu_forward, gelu_backward); the second is "
                          f"{type(backward).__name__}, not a function")
    _gelu_forward_stages(forward)
    _gelu_backward_stages(backward)


# ----------------------------------------------------------------------------------------
# Exercise 6.6: one block, forward
# ----------------------------------------------------------------------------------------

def _sublayers(C, seed):
    """Stand-ins for the block's four sublayers, (T, C) -> (T, C), all different and non-linear,
    so that every wrong order or missing residual gives a different result."""
    rng = case_rng(seed)
    A = rng.standard_normal((C, C)) / np.sqrt(C)
    W1, W2 = rng.standard_normal((C, 2 * C)) / np.sqrt(C), rng.standard_normal((2 * C, C)) / np.sqrt(2 * C)
    b1 = 0.1 * rng.standard_normal(2 * C)
    g1, be1, g2, be2 = 1 + 0.3 * rng.standard_normal(C), 0.2 * rng.standard_normal(C), \
        1 + 0.3 * rng.standard_normal(C), 0.2 * rng.standard_normal(C)

    def attn(x):
        S = x @ x.T / np.sqrt(x.shape[1])
        return ref.softmax(S) @ x @ A

    def ffn(x):
        return np.maximum(x @ W1 + b1, 0.0) @ W2

    def layernorm(g, b):
        def ln(x):
            mu = x.mean(axis=1, keepdims=True)
            return g * (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5) + b
        return ln

    return attn, ffn, layernorm(g1, be1), layernorm(g2, be2)


def _post(x, attn, ffn, ln1, ln2):
    x = ln1(x + attn(x))
    return ln2(x + ffn(x))


def _pre(x, attn, ffn, ln1, ln2):
    x = x + attn(ln1(x))
    return x + ffn(ln2(x))


_ORDER_HINT = ("attention comes first, then the FFN: the first line is the attention sublayer (with LN1), "
               "the second the FFN (with LN2)")
_PARALLEL_HINT = ("attention and the FFN both read the block's input x: the sublayers run one after the other, "
                  "so the FFN's line starts from the attention line's result (a parallel block, attention "
                  "and FFN side by side on the same x, is a different architecture)")
_LOST_ATTN_HINT = ("the attention line's result is lost: the FFN's line must start from it, not from the "
                   "block's input x")


def _block_mistakes(x, norm, attn, ffn, ln1, ln2):
    ident = lambda z: z  # noqa: E731
    other = _pre if norm == "post" else _post
    other_name = "pre" if norm == "post" else "post"
    right = _post if norm == "post" else _pre
    m = [
        (lambda: other(x, attn, ffn, ln1, ln2),
         tiered(f"you computed the {other_name}-LN block for norm={norm!r}: post-LN normalises "
                f"the sum of a sublayer's input and output, pre-LN the sublayer's input",
                "Post-LN is x = LN1(x + Attn(x)); x = LN2(x + FFN(x)), pre-LN is "
                "x = x + Attn(LN1(x)); x = x + FFN(LN2(x))")),
        (lambda: right(x, attn, ffn, ln2, ln1), "LN1 belongs to the attention sublayer and LN2 to the FFN: "
                                               "they have different gamma and beta"),
        (lambda: right(x, ffn, attn, ln1, ln2), _ORDER_HINT),
        (lambda: right(x, ffn, attn, ln2, ln1), _ORDER_HINT),
        (lambda: right(x, attn, ffn, ident, ident), "both LayerNorms are missing"),
    ]
    if norm == "post":
        m += [
            (lambda: ln2(ln1(x + attn(x)) + ffn(x)), _PARALLEL_HINT),
            (lambda: ln2(ln1(x + attn(x)) + ffn(ln1(x))), _PARALLEL_HINT),
            (lambda: ln2(x + ffn(x)), _LOST_ATTN_HINT),
            (lambda: ln2(ffn(ln1(x + attn(x)))),
             "the FFN's residual is missing: x = LN2(x + FFN(x)), the input of the FFN added back"),
            (lambda: ln2(ln1(attn(x)) + ffn(ln1(attn(x)))),
             "the attention's residual is missing: x = LN1(x + Attn(x)), the block's input added back"),
            (lambda: ln2(ffn(ln1(attn(x)))), tiered("both residuals are missing: each sublayer's "
                                                    "input is added back to its output",
                                                    "x = LN1(x + Attn(x)); x = LN2(x + FFN(x))")),
            (lambda: (lambda z: z + ln2(ffn(z)))(x + ln1(attn(x))),
             "post-LN normalises the SUM: LN1(x + Attn(x)), not x + LN1(Attn(x))"),
            (lambda: (lambda z: ln2(z + ffn(z)))(x + ln1(attn(x))),
             "post-LN normalises the SUM: LN1(x + Attn(x)), not x + LN1(Attn(x))"),
            (lambda: (lambda z: ln2(x + z + ffn(z)))(ln1(x + attn(x))),
             "the FFN's residual adds the FFN's own input (the output of LN1), not the block's input"),
        ]
    else:
        m += [
            (lambda: x + attn(ln1(x)) + ffn(ln2(x)), _PARALLEL_HINT),
            (lambda: x + ffn(ln2(x)), _LOST_ATTN_HINT),
            (lambda: (lambda z: ffn(ln2(z)))(x + attn(ln1(x))),
             "the FFN's residual is missing: x = x + FFN(LN2(x))"),
            (lambda: (lambda z: z + ffn(ln2(z)))(attn(ln1(x))),
             "the attention's residual is missing: x = x + Attn(LN1(x)), the block's input added back"),
            (lambda: ffn(ln2(attn(ln1(x)))), tiered("both residuals are missing: each sublayer's "
                                                    "output is added to the stream x",
                                                    "x = x + Attn(LN1(x)); x = x + FFN(LN2(x))")),
            (lambda: (lambda z: ln2(z) + ffn(ln2(z)))(ln1(x) + attn(ln1(x))),
             "the skip path carries x itself, not LN(x): x = x + Attn(LN1(x)), so the residual stream is "
             "never normalised inside the block"),
            (lambda: (lambda z: z + ffn(ln2(z)))(ln1(x) + attn(ln1(x))),
             "the skip path carries x itself, not LN1(x): x = x + Attn(LN1(x))"),
            (lambda: (lambda z: z + ffn(ln2(z)))(x + ln1(attn(x))),
             "pre-LN normalises the sublayer's INPUT: Attn(LN1(x)), not LN1(Attn(x))"),
            (lambda: (lambda z: x + z + ffn(ln2(z)))(x + attn(ln1(x))),
             "the FFN's residual adds the FFN sublayer's own input (x after attention), not the block's input"),
        ]
    m.append((lambda: x, "the block returned its input: compute the two sublayers"))
    return m


_BLOCK_HINTS = {
    "post": tiered("post-LN: each sublayer's output is added to its input, and the SUM is "
                   "normalised; attention (with ln1) first, then the FFN (with ln2) on its result",
                   "x = ln1(x + attn(x)); then x = ln2(x + ffn(x))"),
    "pre": tiered("pre-LN: each sublayer reads a normalised copy of x, and its output is added "
                  "to x itself; attention (with ln1) first, then the FFN (with ln2) on its result",
                  "x = x + attn(ln1(x)); then x = x + ffn(ln2(x))")}


def _check_block_case(fn, x, norm, seed):
    layers = _sublayers(x.shape[1], seed)
    raw = result_of(fn, x, *layers, norm)
    got = expect_shape(raw, x.shape, hint="a block maps (T, C) to (T, C)")
    expect_finite(got, hint=_BLOCK_HINTS[norm])
    x64 = np.asarray(x, dtype=np.float64)
    want = (_post if norm == "post" else _pre)(x64, *layers)
    # float64 sublayers in, the same operations as the formula: rtol 1e-10 leaves room for the order of the
    # operations only, so a result cast to float32 fails and is named as a dtype problem
    diagnose(raw, want, _block_mistakes(x64, norm, *layers), _BLOCK_HINTS[norm], what=f"the {norm}-LN block",
             rtol=1e-10, atol=1e-12)


@checker()
def check_block_forward(fn):
    rng = case_rng(67)
    with stage("shapes"):
        x = rng.standard_normal((5, 6))
        expect_shape(result_of(fn, x, *_sublayers(6, 0), "post"), (5, 6), hint="a block maps (T, C) to (T, C)")
    with stage("post-LN"):
        for T, C, seed in ((5, 6, 1), (8, 16, 2)):
            _check_block_case(fn, 2.0 * rng.standard_normal((T, C)) + 1.0, "post", seed)
    with stage("pre-LN"):
        for T, C, seed in ((5, 6, 3), (8, 16, 4)):
            _check_block_case(fn, 2.0 * rng.standard_normal((T, C)) + 1.0, "pre", seed)
    with stage("one token"):
        for norm in ("post", "pre"):
            _check_block_case(fn, rng.standard_normal((1, 4)), norm, 5)
