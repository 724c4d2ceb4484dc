"""Checkers for notebook 03, single-head attention.

    cl.checks.check_stable_softmax(softmax)                      # Exercise 3.1: row-wise softmax
    cl.checks.check_single_head_attention(attention)             # Exercise 3.2: (out, A)
    cl.checks.check_softmax_backward(softmax_backward)           # Exercise 3.4: dz = y * (dy - sum(dy * y))
    cl.checks.check_single_head_attention_backward(attention_backward)  # Exercise 3.6: dQ, dK, dV

(Exercises 3.3 and 3.5 derive the softmax Jacobian and the backward of one head on paper:
no checker.)

Expected values come from NumPy formulas written here, never from the learner's function.
When a result is wrong, the checker also computes the usual mistakes and names the one
that matches, so the hint points at the actual bug. A result in float32 for float64
inputs that is right to float32's precision is named as a dtype problem.

Subtracting the maximum of the whole array instead of each row's maximum gives the same
softmax in exact arithmetic, but a row that lies far below the global maximum (more than
about 745 in float64, about 103 in float32) underflows to exp(...) = 0 and 0 / 0 = nan.
The checkers include such rows, so the global maximum fails with a hint that says so
(notebook 03's question on the global maximum says the same).
"""
import re

import numpy as np

from . import reference as ref
from .cases import result_of
from .library import equivalent
from .core import (case_rng, CheckFailed, call, checker, diagnose, expect_arrays, expect_finite, expect_shape,
                   stage, tiered)

__all__ = ["check_stable_softmax", "check_single_head_attention", "check_softmax_backward",
           "check_single_head_attention_backward"]

_KEEPDIMS_HINT = ("a reduction over each row (max or sum with axis=-1) gives shape (N,); keep it as (N, 1) "
                  "with keepdims=True so that it broadcasts against (N, K)")


# ----------------------------------------------------------------------------------------
# helpers: reference formulas and mistake diagnosis
# ----------------------------------------------------------------------------------------

_ROW_DOT_HINT = ("(dy · y) is one number per ROW: for (N, n) arrays it is np.sum(dy * y, axis=-1, "
                 "keepdims=True), an (N, 1) column. A matrix product (dy @ y, dy @ y.T, np.dot, np.inner) "
                 "is the one-row formula applied to a whole matrix: it pairs rows with rows or columns, "
                 "not each row of dy with its own row of y")


def _failing_line(message):
    """The learner's source line quoted in core.call's message ('(line 3: return ...)'), or ''."""
    head, sep, tail = message.rpartition("(line ")
    return tail.partition(": ")[2] if sep else ""


def _errors(matmul_hint=None, row_dot=False, broadcast_hint=None):
    """call_hinted's rows for these checkers, the first that matches wins.

    row_dot: the function should reduce each row (softmax backward); a matrix product that
    fails, or that breaks broadcasting, is the one-row formula used on (N, K) arrays.
    A broadcast gets the keepdims hint, or broadcast_hint(message) where that is not None (the two
    shapes may name another bug). matmul_hint: for a matrix product of mismatched shapes.
    """
    rows = [(_one_row_formula, _ROW_DOT_HINT)] if row_dot else []
    rows.append(("broadcast", lambda message: (broadcast_hint and broadcast_hint(message)) or _KEEPDIMS_HINT))
    return rows + ([("matmul", matmul_hint), ("not aligned", matmul_hint)] if matmul_hint else [])


def _one_row_formula(message) -> bool:
    """A failed matrix product, or a broadcast that a product on the failing line broke."""
    product = any(op in _failing_line(message) for op in ("@", "dot(", "inner(", "matmul("))
    return "matmul" in message or "not aligned" in message or ("broadcast" in message and product)


_ERRORS, _ROW_DOT_ERRORS = _errors(), _errors(row_dot=True)


def _attention(Q, K, V, scale=None):
    """Reference single-head attention: out = softmax(Q K^T / sqrt(D)) V, and A."""
    D = Q.shape[-1]
    S = (Q @ K.T) * (1.0 / np.sqrt(D) if scale is None else scale)
    A = ref.softmax(S)
    return A @ V, A


def _softmax_backward(dy, y):
    """Reference: dz = y * (dy - sum_j dy_j y_j), per row."""
    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))


def _attention_backward(dout, Q, K, V, A, softmax_backward=_softmax_backward, scale=None):
    """Reference single-head backward: (dQ, dK, dV)."""
    s = 1.0 / np.sqrt(Q.shape[-1]) if scale is None else scale
    dV = A.T @ dout
    dS = softmax_backward(dout @ V.T, A)
    return dS @ K * s, dS.T @ Q * s, dV


# ----------------------------------------------------------------------------------------
# Exercise 3.1: stable softmax
# ----------------------------------------------------------------------------------------

_SOFTMAX_HINT = "softmax(x)[i, j] = exp(x[i, j]) / sum_k exp(x[i, k]): each row on its own"
_OVERFLOW_HINT = ("subtract each row's maximum before np.exp: exp(1000) overflows to inf and inf / inf is nan, "
                  "exp(-1000) underflows to 0 and 0 / 0 is nan; after the shift the largest term is exp(0) = 1")


def _rows_sum_to_one(y, what="your result", axis_name="row"):
    """Rows of y must sum to 1; name the usual normalisation mistakes."""
    sums = y.sum(axis=-1)
    if np.allclose(sums, 1.0, rtol=1e-6, atol=1e-8):
        return
    if y.ndim == 2 and np.allclose(y.sum(axis=0), 1.0, rtol=1e-6, atol=1e-8):
        raise CheckFailed(f"the columns of {what} sum to 1 but its rows do not",
                          hint=f"softmax over the wrong axis: normalise over the last axis (axis=-1), "
                               f"so that each {axis_name} sums to 1")
    if np.isclose(y.sum(), 1.0, rtol=1e-6, atol=1e-8):
        raise CheckFailed(f"the whole of {what} sums to 1, its rows do not",
                          hint="normalise each row by its own sum: np.sum(e, axis=-1, keepdims=True)")
    raise CheckFailed(f"the rows of {what} sum to {np.round(sums, 4)}, not to 1",
                      hint="divide exp(...) by its row sum: np.sum(e, axis=-1, keepdims=True)")


def _softmax_mistakes(x):
    return [
        (lambda: ref.softmax(x, axis=0), "softmax over the wrong axis: use axis=-1 (each row), not axis=0"),
        (lambda: np.exp(x), "divide by the row sum: np.exp alone is not normalised"),
        (lambda: np.exp(x - x.max(axis=-1, keepdims=True)),
         "after subtracting the maximum, still divide by the row sum of the exponentials"),
    ]


_GLOBAL_MAX_HINT = ("subtract each row's own maximum, np.max(x, axis=-1, keepdims=True), not the maximum of "
                    "the whole array: a row whose entries all lie more than about 745 below the global "
                    "maximum (float64; about 103 in float32) underflows to exp(...) = 0, and 0 / 0 is nan")


def _global_max_softmax(x):
    """What subtracting the maximum of the whole array gives, nan rows included (x's dtype)."""
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x))
        return e / np.sum(e, axis=-1, keepdims=True)


def _expect_finite_rows(y, global_max, what="your result", hint=_OVERFLOW_HINT):
    """y must be finite; NaN exactly where the global-maximum version has it gets its own hint."""
    y = np.asarray(y, dtype=float)
    if np.all(np.isfinite(y)):
        return
    bad_g = ~np.isfinite(np.asarray(global_max, dtype=float))
    if bad_g.any() and np.array_equal(~np.isfinite(y), bad_g):
        rows = sorted({int(i) for i in np.argwhere(bad_g)[:, 0]})
        raise CheckFailed(f"{what} contains NaN in row(s) {rows}, the rows far below the largest entry of "
                          f"the whole array", _GLOBAL_MAX_HINT)
    expect_finite(y, what=what, hint=hint)


def _check_softmax_case(softmax, x, rtol=1e-6, atol=1e-9, finite_hint=_OVERFLOW_HINT):
    raw = result_of(softmax, x, errors=_ERRORS)
    y = expect_shape(raw, x.shape, hint="softmax keeps the shape of its input: (N, K) in, (N, K) out")
    _expect_finite_rows(y, _global_max_softmax(x), hint=finite_hint)
    _rows_sum_to_one(y)
    return diagnose(raw, ref.softmax(x), _softmax_mistakes(np.asarray(x, dtype=float)), _SOFTMAX_HINT,
                     rtol=rtol, atol=atol)


@checker(library=[
    "kernels.softmax_forward", equivalent("kernels.cross_entropy_forward"), equivalent("kernels.numpy_ref.logsumexp"),
    equivalent("kernels.attention_forward")])
def check_stable_softmax(softmax):
    rng = case_rng(31)
    with stage("shapes"):
        x = np.array([[0.0, 1.0, 2.0], [3.0, 1.0, -1.0]])
        expect_shape(result_of(softmax, x, errors=_ERRORS), (2, 3),
                     hint="softmax keeps the shape of its input: (N, K) in, (N, K) out")
    with stage("hand-checkable case"):
        # exp of log([1, 2, 1]) is [1, 2, 1]: the row becomes [1, 2, 1] / 4
        x = np.log(np.array([[1.0, 2.0, 1.0], [1.0, 1.0, 2.0]]))
        _check_softmax_case(softmax, x, finite_hint=_SOFTMAX_HINT)  # [[.25, .5, .25], [.25, .25, .5]]
    with stage("random rows"):
        for shape in ((5, 7), (3, 2), (1, 10)):
            _check_softmax_case(softmax, 3.0 * rng.standard_normal(shape), finite_hint=_SOFTMAX_HINT)
    with stage("large logits: 1000 and -1000"):
        for row in ([1000.0, 1001.0, 1002.0], [1000.0, -1000.0], [-1000.0, -1001.0, -1002.0],
                    [800.0, 0.0, 790.0, -800.0]):
            _check_softmax_case(softmax, np.array([row]))
        _check_softmax_case(softmax, 1000.0 + 5.0 * rng.standard_normal((4, 6)))
    with stage("rows far apart: one row 1000 below another"):
        # each row's own maximum handles this; the maximum of the whole array does not
        _check_softmax_case(softmax, np.array([[0.0, 1.0, 2.0], [-1000.0, -999.0, -998.0]]))
        _check_softmax_case(softmax, np.array([[5.0, 3.0], [-200.0, -201.0]], dtype=np.float32),
                            rtol=1e-5, atol=1e-7)
    with stage("float32 input"):
        x = np.array([[100.0, 90.0, 80.0], [95.0, 100.0, 99.0]], dtype=np.float32)  # exp(100) > float32 max
        _check_softmax_case(softmax, x, rtol=1e-5, atol=1e-7)
    with stage("edge cases: constant row, one column, long row"):
        _check_softmax_case(softmax, np.full((2, 4), 7.0))   # uniform: 0.25 each
        _check_softmax_case(softmax, np.array([[3.0], [-2.0], [0.0]]))  # one entry per row: 1
        _check_softmax_case(softmax, 4.0 * rng.standard_normal((2, 50)))


# ----------------------------------------------------------------------------------------
# Exercise 3.2: single-head attention forward
# ----------------------------------------------------------------------------------------

_ATTN_HINT = tiered("follow out = softmax(Q K^T / sqrt(D)) V one step at a time: the scores of "
                    "every query against every key, their scale, the softmax over each query's "
                    "row, then the mix of the values",
                    "In code: S = Q @ K.T / np.sqrt(D) with D = Q.shape[-1]; A = softmax(S) over "
                    "each row; out = A @ V")


def _scale_mistakes(Q, K, V):
    """Each wrong scale of the scores with its own hint. The hand-checkable case has T_q, T_k, D
    and D_v all different (2, 3, 4, 5), so every one of these gives a different A."""
    D, Tq, Tk, Dv = Q.shape[-1], Q.shape[0], K.shape[0], V.shape[-1]
    raw = Q @ K.T
    head = "the scale is sqrt(D), D = Q.shape[-1] the width of the queries and keys"
    return [
        (lambda: ref.softmax(raw), "the scores are not scaled: divide Q @ K.T by np.sqrt(D), D = Q.shape[-1]"),
        (lambda: ref.softmax(raw / D), "divide by the square root of D, np.sqrt(D), not by D"),
        (lambda: ref.softmax(raw * np.sqrt(D)), "divide the scores by np.sqrt(D); do not multiply"),
        (lambda: ref.softmax(raw / np.sqrt(Dv)),
         f"{head}, not sqrt(D_v), the width of the values V.shape[-1]"),
        (lambda: ref.softmax(raw / np.sqrt(Tq)),
         f"{head}, not sqrt(T), the number of queries Q.shape[0]"),
        (lambda: ref.softmax(raw / np.sqrt(Tk)),
         f"{head}, not sqrt(T), the number of keys K.shape[0]"),
        (lambda: ref.softmax(raw / 8.0),
         "the scale uses the head size D = Q.shape[-1], not d_model = 64 (sqrt(64) = 8)"),
        (lambda: ref.softmax(raw / np.sqrt(D), axis=0),
         "softmax over the wrong axis: each query (a row of S) spreads its weight over the keys, axis=-1"),
        (lambda: ref.softmax(K @ Q.T / np.sqrt(D)).T,
         "S = Q @ K.T: row t scores every key for query t; you computed K @ Q.T"),
    ]


def _out_mistakes(Q, K, V):
    _, A = _attention(Q, K, V)
    return [
        (lambda: (A @ V).T, "out = A @ V has shape (T_q, D_v): do not transpose it"),
        (lambda: A.T @ V, "out = A @ V (row t mixes the values with query t's weights), not A.T @ V"),
        (lambda: A @ K, "the weights mix the values V, not the keys K: out = A @ V"),
        (lambda: A @ Q, "the weights mix the values V, not the queries Q: out = A @ V"),
    ]


def _expect_not_swapped(out, A, Tq, Tk, Dv):
    """The pair returned as (A, out): out has A's shape (T_q, T_k) and A has out's (T_q, D_v)."""
    if Tk != Dv and out.shape == (Tq, Tk) and A.shape == (Tq, Dv):
        raise CheckFailed(f"out has shape {out.shape} and A {A.shape}: expected out {(Tq, Dv)} "
                          f"and A {(Tq, Tk)}", hint="you seem to return (A, out); return (out, A)")


def _check_attention_case(attention, Q, K, V, rtol=1e-6, atol=1e-9, values=True, errors=_ERRORS):
    Tq, Tk, Dv = Q.shape[0], K.shape[0], V.shape[1]
    out, A = expect_arrays(result_of(attention, Q, K, V, errors=errors), ["out", "A"], "attention(Q, K, V)")
    _expect_not_swapped(out, A, Tq, Tk, Dv)
    if A.shape == (Tk, Tq) and Tk != Tq:
        raise CheckFailed(f"A has shape {A.shape}, expected (T_q, T_k) = {(Tq, Tk)}",
                          hint="S = Q @ K.T has one row per query and one column per key; did you compute K @ Q.T?")
    expect_shape(A, (Tq, Tk), what="A", hint="A = softmax(Q @ K.T / sqrt(D)) has shape (T_q, T_k)")
    if out.shape == (Dv, Tq) and Dv != Tq:
        raise CheckFailed(f"out has shape {out.shape}, expected (T_q, D_v) = {(Tq, Dv)}",
                          hint="out = A @ V has one row per query: do not transpose it")
    expect_shape(out, (Tq, Dv), what="out", hint="out = A @ V has shape (T_q, D_v)")
    if not values:
        return
    _expect_finite_rows(A, _global_max_softmax(Q @ K.T / np.sqrt(Q.shape[-1])), what="A",
                        hint="compute the softmax stably (Exercise 3.1): subtract each row's maximum")
    _rows_sum_to_one(A, what="A", axis_name="query's row (over the keys)")
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    want_out, want_A = _attention(Q, K, V)
    diagnose(A, want_A, _scale_mistakes(Q, K, V), _ATTN_HINT, what="A", rtol=rtol, atol=atol)
    expect_finite(out, what="out", hint="out = A @ V")
    diagnose(out, want_out, _out_mistakes(Q, K, V), "out = A @ V", what="out", rtol=rtol, atol=atol)


@checker(library=["kernels.attention_forward", "kernels.attention_rows_forward"])
def check_single_head_attention(attention):
    rng = case_rng(32)
    with stage("returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)"):
        # T_q = 3 queries, T_k = 5 keys, D = 4, D_v = 2: different sizes make transposes visible
        Q, K, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
        hint = tiered("here Q is (3, 4), K is (5, 4), V is (5, 2): the scores and A are (T_q, T_k) = "
                      "(3, 5) and out is (T_q, D_v) = (3, 2); print the shapes of your intermediate "
                      "arrays", "S = Q @ K.T is (3, 5), out = A @ V is (3, 2)")
        _check_attention_case(attention, Q, K, V, values=False, errors=_errors(matmul_hint=hint))
    with stage("hand-checkable case"):
        # T_q = 2, T_k = 3, D = 4, D_v = 5, all different, so that every wrong scale shows.
        # sqrt(D) = 2: query 0 scores [ln 3, 0, 0] -> A = [3/5, 1/5, 1/5]; query 1 scores 0 -> 1/3 each;
        # out = A @ V: the first three columns repeat A, the last two are 0 and 1.
        Q = np.array([[2 * np.log(3.0), 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
        K = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
        V = np.array([[1.0, 0.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0, 1.0]])
        _check_attention_case(attention, Q, K, V)
    with stage("random cases"):
        for Tq, Tk, D, Dv in ((6, 6, 8, 8), (3, 5, 4, 2), (8, 8, 16, 16)):
            _check_attention_case(attention, rng.standard_normal((Tq, D)), rng.standard_normal((Tk, D)),
                                  rng.standard_normal((Tk, Dv)))
    with stage("large scores, about +800 and -800"):
        # every score lies within a few units of +-800: exp(800) overflows, exp(-800) underflows
        for sign in (1.0, -1.0):
            Q = rng.standard_normal((4, 4))
            K = rng.standard_normal((5, 4))
            Q[:, 0], K[:, 0] = sign * 800.0, 2.0 + 0.01 * rng.standard_normal(5)
            _check_attention_case(attention, Q, K, rng.standard_normal((5, 3)))
        # rows far apart: queries 0 and 2 score about +800, queries 1 and 3 about -800
        Q, K = rng.standard_normal((4, 4)), rng.standard_normal((5, 4))
        Q[:, 0], K[:, 0] = [800.0, -800.0, 800.0, -800.0], 2.0 + 0.01 * rng.standard_normal(5)
        _check_attention_case(attention, Q, K, rng.standard_normal((5, 3)))
    with stage("edge cases: one token, repeated keys, float32"):
        _check_attention_case(attention, rng.standard_normal((1, 4)), rng.standard_normal((1, 4)),
                              rng.standard_normal((1, 3)))  # A = [[1]], out = V
        k = rng.standard_normal((1, 4))
        _check_attention_case(attention, rng.standard_normal((2, 4)), np.repeat(k, 3, axis=0),
                              rng.standard_normal((3, 2)))  # identical keys: uniform rows
        Q32, K32, V32 = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(3))
        _check_attention_case(attention, Q32, K32, V32, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------------------
# Exercise 3.4: softmax backward (Exercise 3.3 derives it on paper)
# ----------------------------------------------------------------------------------------

_SMB_HINT = tiered("apply the Jacobian diag(y) - y y^T of Exercise 3.3 to dy, row by row, without "
                   "building it: the diagonal gives one term, y y^T a second one with a sum over "
                   "the row", "dz = y * (dy - np.sum(dy * y, axis=-1, keepdims=True))")


def _smb_mistakes(dy, y):
    return [
        (lambda: dy * y, tiered("dy * y is only the diagonal term y_i dy_i; the off-diagonal entries "
                                "-y_i y_j of the Jacobian add a term too",
                                "They add -y_i * sum_j(dy_j y_j): dz = y * (dy - sum(dy * y))")),
        (lambda: y * (1 - y) * dy, tiered("y * (1 - y) * dy uses only the diagonal of the Jacobian "
                                          "diag(y) - y y^T; every y_j also depends on every x_i "
                                          "(the off-diagonal -y_i y_j)",
                                          "dz = y * (dy - sum(dy * y))")),
        (lambda: dy - np.sum(dy * y, axis=-1, keepdims=True),
         "multiply by y: dz = y * (dy - sum(dy * y))"),
        (lambda: y * (dy - np.sum(dy, axis=-1, keepdims=True)),
         "the sum is weighted by y: sum_j dy_j y_j, i.e. np.sum(dy * y, ...), not np.sum(dy)"),
        (lambda: y * (dy - np.sum(dy * y)),
         "(dy · y) is one number per ROW, not one for the whole array (np.sum(dy * y), or np.dot of the "
         "flattened arrays, adds up all rows together): np.sum(dy * y, axis=-1, keepdims=True) sums "
         "each row separately"),
        (lambda: y * (dy - dy @ y), _ROW_DOT_HINT),
        (lambda: y * (dy - dy @ y.T), _ROW_DOT_HINT),
        (lambda: y * (dy - np.sum(dy * y, axis=-1)), _KEEPDIMS_HINT),
        (lambda: y * (dy - np.sum(dy * y, axis=0, keepdims=True)),
         "sum over the last axis (each row, axis=-1), not over axis 0"),
        (lambda: -_softmax_backward(dy, y), "the sign is flipped: dz = y * (dy - sum(dy * y))"),
        (lambda: y * (dy - np.mean(dy, axis=-1, keepdims=True)),
         "dy itself need not sum to zero, and the subtracted term is sum(dy * y), not the mean of dy"),
    ]


def _check_smb_case(fn, dy, y, rtol=1e-6, atol=1e-9):
    raw = result_of(fn, dy, y, errors=_ROW_DOT_ERRORS)
    dz = expect_shape(raw, y.shape, hint="dz has the shape of z (and of y and dy): (N, n)")
    expect_finite(dz, hint=_SMB_HINT)
    return diagnose(raw, _softmax_backward(dy, y), _smb_mistakes(dy, y), _SMB_HINT, rtol=rtol, atol=atol)


def _square_probe(fn):
    """What the learner's softmax backward does on square (K, K) input, where a one-row formula
    applied to a matrix runs without error: the hint of the mistake it reproduces, or None."""
    rng = case_rng(330)
    dy, y = rng.standard_normal((3, 3)), ref.softmax(rng.standard_normal((3, 3)))
    try:
        with np.errstate(all="ignore"):
            got = np.asarray(call(fn, dy, y), dtype=float)
    except Exception:  # noqa: BLE001  the probe only refines a hint
        return None
    for wrong, hint in _smb_mistakes(dy, y):
        with np.errstate(all="ignore"):
            candidate = wrong()
        if got.shape == candidate.shape and np.allclose(got, candidate, rtol=1e-6, atol=1e-9):
            return hint
    return None


@checker(library=[
    "kernels.softmax_backward", equivalent("kernels.attention_backward"), equivalent("kernels.attention._dscores")])
def check_softmax_backward(fn):
    rng = case_rng(33)
    with stage("shapes"):
        y = ref.softmax(rng.standard_normal((2, 3)))
        try:
            out = result_of(fn, rng.standard_normal((2, 3)), y, errors=_ROW_DOT_ERRORS)
        except CheckFailed as e:  # on (2, 3) it fails; on (3, 3) it may run: see what it computes
            hint = _square_probe(fn) if e.message.startswith("your function raised") else None
            raise CheckFailed(e.message, hint or e.hint) from None
        expect_shape(out, (2, 3), hint="dz has the shape of z (and of y and dy): (N, n)")
    with stage("hand-checkable case"):
        # row 0: y = [1/2, 1/2], dy = [1, 0]: sum(dy * y) = 1/2, dz = [1/2 * 1/2, 1/2 * (-1/2)] = [0.25, -0.25]
        # row 1: y = [1/4, 3/4], dy = [1, 2]: sum(dy * y) = 7/4, dz = [1/4 * (-3/4), 3/4 * 1/4] = [-0.1875, 0.1875]
        _check_smb_case(fn, np.array([[1.0, 0.0], [1.0, 2.0]]), np.array([[0.5, 0.5], [0.25, 0.75]]))
    with stage("constant dy gives dz = 0"):
        # the outputs always sum to 1, so a loss weighting them all alike cannot change
        y = ref.softmax(rng.standard_normal((1, 4)))
        dz = result_of(fn, np.full((1, 4), 3.0), y, errors=_ROW_DOT_ERRORS)
        expect_shape(dz, (1, 4), hint="dz has the shape of z: (N, n)")
        diagnose(dz, np.zeros((1, 4)), _smb_mistakes(np.full((1, 4), 3.0), y),
                  "a constant dy must give dz = 0: shifting every y_j alike is impossible, they sum to 1")
    with stage("random rows (dy need not sum to zero)"):
        for shape in ((4, 6), (3, 2), (1, 8)):
            y = ref.softmax(2.0 * rng.standard_normal(shape))
            dy = rng.standard_normal(shape) + 1.5  # its rows sum far from zero; dz's rows sum to zero
            _check_smb_case(fn, dy, y)
    with stage("edge cases: one-hot row, one column, float32"):
        _check_smb_case(fn, rng.standard_normal((1, 3)), np.array([[1.0, 0.0, 0.0]]))  # saturated: dz = 0
        _check_smb_case(fn, rng.standard_normal((3, 1)), np.ones((3, 1)))             # dz = 0
        y32 = ref.softmax(rng.standard_normal((8, 8))).astype(np.float32)
        dy32 = rng.standard_normal((8, 8)).astype(np.float32)
        _check_smb_case(fn, dy32, y32, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------------------
# Exercise 3.6: single-head attention backward (Exercise 3.5 derives it on paper)
# ----------------------------------------------------------------------------------------

def _diag_only(dy, y):
    return y * (1 - y) * dy


def _unweighted_row_sum(dy, y):
    return y * (dy - np.sum(dy, axis=-1, keepdims=True))


def _unweighted_global_sum(dy, y):
    return y * (dy - np.sum(dy))


def _global_sum(dy, y):
    return y * (dy - np.sum(dy * y))


_WEIGHTED_SUM_HINT = tiered("the sum is weighted by y (here A): sum_j dA_tj A_tj, not np.sum(dA, ...)",
                            "dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))")
_GLOBAL_SUM_HINT = ("(dA · A) is one number per ROW (per query), not one for the whole array: "
                    "np.sum(dA * A, axis=-1, keepdims=True) sums each row separately")


def _transposed_da_hint(Tq, Tk):
    """Hint for a broadcast of (T_k, T_q) against (T_q, T_k): dA computed as V @ dout.T."""
    def hint(message):
        shapes = set(re.findall(r"\((\d+),\s*(\d+)\)", message))
        if {(str(Tq), str(Tk)), (str(Tk), str(Tq))} <= shapes:
            return (f"dA has shape (T_k, T_q) = {(Tk, Tq)} but A is (T_q, T_k) = {(Tq, Tk)}: "
                    f"dA = dout @ V.T (dA_ts = do_t · v_s, one row per query)")
        return None
    return hint


_DIAG_ONLY = tiered("dS uses only the diagonal of the softmax Jacobian; use the full one (your "
                    "softmax backward of Exercise 3.4)", "dS = A * (dA - sum(dA * A, axis=-1))")


def _dq_mistakes(dout, Q, K, V, A):
    D = Q.shape[-1]
    return [
        (lambda: _attention_backward(dout, Q, K, V, A, scale=1.0)[0],
         "the scores were divided by sqrt(D), so their gradient carries the same factor: dQ = dS @ K / sqrt(D)"),
        (lambda: _attention_backward(dout, Q, K, V, A, scale=1.0 / D)[0],
         "divide by sqrt(D), not by D: dQ = dS @ K / np.sqrt(D)"),
        (lambda: _attention_backward(dout, Q, K, V, A, scale=np.sqrt(D))[0],
         "divide by sqrt(D), do not multiply: dQ = dS @ K / np.sqrt(D)"),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=_unweighted_row_sum)[0],
         _WEIGHTED_SUM_HINT),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=_unweighted_global_sum)[0],
         _WEIGHTED_SUM_HINT),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=_global_sum)[0],
         _GLOBAL_SUM_HINT),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=_diag_only)[0], _DIAG_ONLY),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=lambda d, y: d * y)[0],
         "dS = A * dA misses the -A * sum(dA * A, axis=-1, keepdims=True) term of the softmax backward"),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=lambda d, y: d)[0],
         tiered("the gradient must go through the softmax (your softmax backward of Exercise 3.4)",
                "dS = A * (dA - sum(dA * A, axis=-1, keepdims=True))")),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=lambda d, y: _softmax_backward(d.T, y.T).T)[0],
         "dA = dout @ V.T (shape (T_q, T_k)); the softmax backward works on the rows of A"),
    ]


def _dk_mistakes(dout, Q, K, V, A):
    dS = _softmax_backward(dout @ V.T, A)
    D = Q.shape[-1]
    return [
        (lambda: dS.T @ Q, "the scores were divided by sqrt(D): dK = dS.T @ Q / sqrt(D)"),
        (lambda: dS.T @ Q / D, "divide by sqrt(D), not by D: dK = dS.T @ Q / np.sqrt(D)"),
        (lambda: dS.T @ Q * np.sqrt(D), "divide by sqrt(D), do not multiply: dK = dS.T @ Q / np.sqrt(D)"),
        (lambda: dS @ Q / np.sqrt(D), "key s collects from every query t: dK = dS.T @ Q / sqrt(D) (transpose dS)"),
        (lambda: _attention_backward(dout, Q, K, V, A, softmax_backward=_diag_only)[1], _DIAG_ONLY),
        (lambda: dS.T @ K / np.sqrt(D), "dK = dS.T @ Q / sqrt(D): the partner of K in the scores is Q"),
    ]


def _dv_mistakes(dout, A, V):
    return [
        (lambda: A @ dout, "dV = A.T @ dout: value s collects the gradient of every query t that used it"),
        (lambda: dout @ A, "dV = A.T @ dout, shape (T_k, D_v)"),
        (lambda: A.T @ dout @ V.T @ V, "dV = A.T @ dout, nothing more"),
    ]


_DV_HINT = tiered("out = A V: value s collects the gradient of every query t, weighted by A[t, s] "
                  "(compare with your derivation of Exercise 3.5)", "dV = A.T @ dout")
_DQ_HINT = tiered("go back through the head one step at a time, as in Exercise 3.5: out = A V "
                  "gives dA, the softmax backward of Exercise 3.4 gives dS, and the scaled "
                  "scores S = Q K^T / sqrt(D) give dQ",
                  "dA = dout @ V.T; dS = A * (dA - sum(dA * A, axis=-1, keepdims=True)); "
                  "dQ = dS @ K / sqrt(D)")
_DK_HINT = tiered("key s meets every query in S = Q K^T / sqrt(D): its gradient collects column s "
                  "of dS", "dK = dS.T @ Q / sqrt(D)")

def _check_attn_backward_case(fn, dout, Q, K, V, rtol=1e-6, atol=1e-9):
    A = _attention(Q, K, V)[1]
    if Q.dtype == np.float32:
        A = A.astype(np.float32)
    Tq, Tk, D, Dv = Q.shape[0], K.shape[0], Q.shape[1], V.shape[1]
    dQ, dK, dV = expect_arrays(result_of(fn, dout, Q, K, V, A, errors=_ERRORS), ["dQ", "dK", "dV"],
                               "attention_backward(dout, Q, K, V, A)")
    for arr, name, shape in ((dQ, "dQ", (Tq, D)), (dK, "dK", (Tk, D)), (dV, "dV", (Tk, Dv))):
        expect_shape(arr, shape, what=name,
                     hint=f"every gradient has the shape of its array: {name} like {name[1:]}, {shape}; "
                          f"return them in the order dQ, dK, dV")
        expect_finite(arr, what=name, hint="all of dQ, dK, dV are finite matrix products")
    A64 = A.astype(np.float64)
    dout, Q, K, V = (np.asarray(a, dtype=np.float64) for a in (dout, Q, K, V))
    want_dQ, want_dK, want_dV = _attention_backward(dout, Q, K, V, A64)
    diagnose(dV, want_dV, _dv_mistakes(dout, A64, V), _DV_HINT, what="dV", rtol=rtol, atol=atol)
    diagnose(dQ, want_dQ, _dq_mistakes(dout, Q, K, V, A64), _DQ_HINT, what="dQ", rtol=rtol, atol=atol)
    diagnose(dK, want_dK, _dk_mistakes(dout, Q, K, V, A64), _DK_HINT, what="dK", rtol=rtol, atol=atol)


@checker(library=["kernels.attention_backward", "kernels.attention_rows_backward"])
def check_single_head_attention_backward(fn):
    rng = case_rng(34)
    with stage("returns (dQ, dK, dV) with the shapes of Q, K, V"):
        # T_q = 3, T_k = 5, D = 4, D_v = 2: different sizes make transposes visible
        Q, K, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
        A = _attention(Q, K, V)[1]
        hint = tiered("here dout is (3, 2), Q (3, 4), K (5, 4), V (5, 2), A (3, 5): each gradient has "
                      "the shape of its array (dA that of A); write each product with its shapes",
                      "dV = A.T @ dout is (5, 2), dA = dout @ V.T is (3, 5), dQ = dS @ K / sqrt(D) "
                      "is (3, 4), dK = dS.T @ Q / sqrt(D) is (5, 4)")
        errors = _errors(matmul_hint=hint, broadcast_hint=_transposed_da_hint(3, 5))
        dQ, dK, dV = expect_arrays(result_of(fn, rng.standard_normal((3, 2)), Q, K, V, A, errors=errors),
                                   ["dQ", "dK", "dV"], "attention_backward(dout, Q, K, V, A)")
        for arr, name, shape in ((dQ, "dQ", (3, 4)), (dK, "dK", (5, 4)), (dV, "dV", (5, 2))):
            expect_shape(arr, shape, what=name,
                         hint=f"every gradient has the shape of its array: {name} like {name[1:]}, {shape}; "
                              f"return them in the order dQ, dK, dV")
    with stage("hand-checkable case: uniform attention"):
        # Q = 0 makes every score 0, so A = 1/2 everywhere: dV = A^T dout is the column mean of dout, twice
        Q = np.zeros((2, 4))
        K = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
        V = np.array([[1.0, 0.0], [0.0, 1.0]])
        _check_attn_backward_case(fn, np.array([[1.0, 0.0], [0.0, 0.0]]), Q, K, V)
    with stage("random cases"):
        for Tq, Tk, D, Dv in ((3, 5, 4, 2), (6, 6, 8, 8), (8, 8, 16, 16)):
            _check_attn_backward_case(fn, rng.standard_normal((Tq, Dv)), rng.standard_normal((Tq, D)),
                                      rng.standard_normal((Tk, D)), rng.standard_normal((Tk, Dv)))
    with stage("edge cases: one token, nearly one-hot attention, float32"):
        _check_attn_backward_case(fn, rng.standard_normal((1, 3)), rng.standard_normal((1, 4)),
                                  rng.standard_normal((1, 4)), rng.standard_normal((1, 3)))  # dQ = dK = 0
        _check_attn_backward_case(fn, rng.standard_normal((4, 3)), 6.0 * rng.standard_normal((4, 4)),
                                  6.0 * rng.standard_normal((4, 4)), rng.standard_normal((4, 3)))
        Q32, K32, V32, d32 = (rng.standard_normal((8, 16)).astype(np.float32) for _ in range(4))
        _check_attn_backward_case(fn, d32, Q32, K32, V32, rtol=1e-4, atol=1e-5)
