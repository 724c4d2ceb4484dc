"""Checkers for notebook 04, multi-head attention and masks.

    cl.checks.check_split_merge_heads(split_heads, merge_heads)   # Exercise 4.1
    cl.checks.check_causal_mask(apply_causal_mask)                # Exercise 4.2
    cl.checks.check_multihead_attention(multihead_attention)      # Exercise 4.4: (y, A)
    cl.checks.check_multihead_attention_backward(multihead_attention_backward)  # Exercise 4.6

(Exercises 4.3 and 4.5 are derivations on paper: no checker.)

Head h of a (B, T, C) array is the column block h*D : (h+1)*D, D = C / H (book/notation.md).
Expected values come from float64 formulas written here, never from the learner's function;
when a result is wrong, the usual mistakes are computed too and the hint names the one the
result reproduces. Exercises 4.4 and 4.6 first run the checks of 4.1 and 4.2 on the learner's
own split_heads, merge_heads and apply_causal_mask, those the function calls, so that a bug
there is named there.
"""

import numpy as np

from . import reference as ref
from .cases import result_of
from .core import (case_rng, CheckFailed, check_quietly, checker, diagnose, expect_arrays, expect_finite,
                   expect_shape, float_dtype, learner_helpers, stage, tiered)

__all__ = ["check_split_merge_heads", "check_causal_mask", "check_multihead_attention",
           "check_multihead_attention_backward"]


# ----------------------------------------------------------------------------------------
# reference formulas (float64)
# ----------------------------------------------------------------------------------------

def _forward(x, W_q, W_k, W_v, W_o, H, causal, split=ref.split_heads, merge=ref.merge_heads, scale=None,
             mask=ref.apply_causal_mask):
    """y = merge(softmax(mask(Q_h K_h^T / sqrt(D))) V_h) W_o, and A (B, H, T, T)."""
    Q, K, V = (split(x @ W, H) for W in (W_q, W_k, W_v))
    D = Q.shape[-1]
    S = Q @ K.swapaxes(-1, -2) * (1 / np.sqrt(D) if scale is None else scale)
    if causal:
        S = mask(S)
    A = ref.softmax(S).astype(S.dtype, copy=False)      # float32 scores keep float32 weights
    return merge(A @ V) @ W_o, A


def _backward(dy, x, W_q, W_k, W_v, W_o, A, H, split=ref.split_heads, merge=ref.merge_heads, scale=None,
              smb=None, paths="qkv", split_dO=None, wo_T=True, dk_T=True, dw="sum"):
    """Reference backward: (dx, dW_q, dW_k, dW_v, dW_o).

    The keywords build the known mistakes: split_dO (how dM is cut into heads), wo_T=False
    (dy @ W_o), dk_T=False (dS @ Q), dw="mean" (weight gradients / (B T)) or "last" (from the
    last sequence only)."""
    Q, K, V = (split(x @ W, H) for W in (W_q, W_k, W_v))
    D = Q.shape[-1]
    s = 1 / np.sqrt(D) if scale is None else scale

    def weight_grad(a, g):                              # a^T g summed over (b, t), (C, C)
        if dw == "last":
            return a[-1].T @ g[-1]
        return np.einsum("btc,bte->ce", a, g) / (a.shape[0] * a.shape[1] if dw == "mean" else 1)

    M = merge(A @ V)                                   # (B, T, C) the heads side by side
    dW_o = weight_grad(M, dy)
    dO = (split_dO or split)(dy @ (W_o.T if wo_T else W_o), H)   # (B, H, T, D)
    dV = A.swapaxes(-1, -2) @ dO
    dA = dO @ V.swapaxes(-1, -2)
    dS = (smb or (lambda d, a: a * (d - np.sum(d * a, axis=-1, keepdims=True))))(dA, A)
    dQ, dK = dS @ K * s, (dS.swapaxes(-1, -2) if dk_T else dS) @ Q * s
    dQ, dK, dV = merge(dQ), merge(dK), merge(dV)
    dW = [weight_grad(x, g) for g in (dQ, dK, dV)]
    dx = sum(g @ W.T for g, W, p in zip((dQ, dK, dV), (W_q, W_k, W_v), "qkv") if p in paths)
    return dx, dW[0], dW[1], dW[2], dW_o


def _interleaved_split(X, H):
    """Head h = the columns h, h + H, h + 2H, ...: every H-th column instead of a block."""
    B, T, C = X.shape
    return X.reshape(B, T, C // H, H).transpose(0, 3, 1, 2)


def _interleaved_merge(Y):
    B, H, T, D = Y.shape
    return Y.transpose(0, 2, 3, 1).reshape(B, T, H * D)


def _reshape_split(X, H):
    """A plain reshape with no transpose: mixes positions and heads."""
    B, T, C = X.shape
    return X.reshape(B, H, T, C // H)


def _reshape_merge(Y):
    B, H, T, D = Y.shape
    return Y.reshape(B, T, H * D)


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------

def _own_helpers_first(fn):
    """Exercises 4.4 and 4.6 run on the learner's own split_heads, merge_heads (Exercise 4.1)
    and apply_causal_mask (Exercise 4.2), when fn calls them: check those first, quietly, so
    that a bug there is named there and not as a bug of fn."""
    own = learner_helpers(fn, ("split_heads", "merge_heads", "apply_causal_mask"))
    if not own:
        return
    name = getattr(fn, "__name__", "function")
    with stage(f"first, the functions of Exercises 4.1-4.2 that {name} calls: {', '.join(own)}"):
        if "split_heads" in own or "merge_heads" in own:
            check_quietly(fn, check_split_merge_heads, "Exercise 4.1", own,
                     own.get("split_heads", ref.split_heads), own.get("merge_heads", ref.merge_heads))
        if "apply_causal_mask" in own:
            check_quietly(fn, check_causal_mask, "Exercise 4.2", own, own["apply_causal_mask"])


# ----------------------------------------------------------------------------------------
# Exercise 4.1: split_heads and merge_heads
# ----------------------------------------------------------------------------------------

_SPLIT_HINT = tiered("head h is the column block h*D:(h+1)*D of each row: cut the last axis into "
                     "H blocks of D, then move the head axis before the positions",
                     "In code: X.reshape(B, T, H, D).transpose(0, 2, 1, 3)")
_MERGE_HINT = tiered("merge undoes split: bring the positions back before the heads, then lay "
                     "the heads side by side",
                     "In code: Y.transpose(0, 2, 1, 3).reshape(B, T, H * D)")


def _split_mistakes(X, H):
    B, T, C = X.shape
    return [
        (lambda: _reshape_split(X, H),
         tiered("a reshape to (B, H, T, D) alone does not move the data: it cuts the flat "
                "row-major array in the wrong places and mixes positions with heads",
                "Reshape to (B, T, H, D), then transpose(0, 2, 1, 3)")),
        (lambda: _interleaved_split(X, H),
         "head h is the column BLOCK h*D:(h+1)*D, not every H-th column: reshape to (B, T, H, D) "
         "(heads before D), not (B, T, D, H)"),
        (lambda: X.reshape(B, T, H, C // H).transpose(0, 2, 3, 1),
         "the result is (B, H, T, D): transpose(0, 2, 1, 3), which keeps D last"),
    ]


def _merge_mistakes(Y):
    return [
        (lambda: _reshape_merge(Y),
         tiered("a reshape from (B, H, T, D) to (B, T, C) alone mixes positions and heads: move "
                "the heads back behind the positions first",
                "transpose(0, 2, 1, 3) first, so that the array is (B, T, H, D), then reshape")),
        (lambda: _interleaved_merge(Y),
         "head h goes back to the column block h*D:(h+1)*D, not to every H-th column: transpose to "
         "(B, T, H, D), not (B, T, D, H), before the reshape"),
    ]


def _check_split_case(split_heads, merge_heads, X, H):
    B, T, C = X.shape
    D = C // H
    got = result_of(split_heads, X, H)
    expect_shape(got, (B, H, T, D), what="split_heads(X, n_heads)",
                 hint=f"X is (B, T, C) = {X.shape} with H = {H} heads: the result is (B, H, T, D) = "
                      f"{(B, H, T, D)}, D = C // H")
    diagnose(got, ref.split_heads(X, H), _split_mistakes(X, H), _SPLIT_HINT, what="split_heads(X, n_heads)")
    Y = ref.split_heads(X, H)
    got = result_of(merge_heads, Y)
    expect_shape(got, (B, T, C), what="merge_heads(Y)",
                 hint=f"Y is (B, H, T, D) = {Y.shape}: the result is (B, T, H * D) = {(B, T, C)}")
    diagnose(got, X, _merge_mistakes(Y), _MERGE_HINT, what="merge_heads(Y)")


@checker()
def check_split_merge_heads(split_heads, merge_heads=None):
    rng = case_rng(41)
    if not callable(merge_heads):
        raise CheckFailed("pass both functions: check_split_merge_heads(split_heads, merge_heads)")
    with stage("shapes"):
        X = rng.standard_normal((2, 3, 12))
        expect_shape(result_of(split_heads, X, 4), (2, 4, 3, 3), what="split_heads(X, 4)",
                     hint="X (B, T, C) = (2, 3, 12) with 4 heads: (B, H, T, D) = (2, 4, 3, 3)")
        expect_shape(result_of(merge_heads, ref.split_heads(X, 4)), (2, 3, 12), what="merge_heads(Y)",
                     hint="Y (B, H, T, D) = (2, 4, 3, 3): (B, T, H * D) = (2, 3, 12)")
    with stage("hand-checkable case"):
        # one sequence of T = 2 positions, C = 6 columns numbered 0..5 (row 0) and 10..15 (row 1):
        # with H = 3, head 1 is the columns 2:4, i.e. [[2, 3], [12, 13]]
        X = np.array([[[0.0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15]]])
        _check_split_case(split_heads, merge_heads, X, 3)
    with stage("random cases"):
        for shape, H in (((2, 5, 12), 4), ((3, 4, 8), 2), ((1, 8, 64), 4)):
            _check_split_case(split_heads, merge_heads, rng.standard_normal(shape), H)
    with stage("round trip: merge_heads(split_heads(X)) == X"):
        X = rng.standard_normal((2, 6, 12))
        Y = result_of(split_heads, X, 3)
        back = result_of(merge_heads, np.asarray(Y, dtype=float))
        diagnose(back, X, [], "merge_heads must undo split_heads exactly", what="the round trip")
    with stage("edge cases: one head (D = C), C heads (D = 1), float32"):
        _check_split_case(split_heads, merge_heads, rng.standard_normal((2, 3, 4)), 1)
        _check_split_case(split_heads, merge_heads, rng.standard_normal((2, 3, 4)), 4)
        X32 = rng.standard_normal((2, 3, 8)).astype(np.float32)
        got = result_of(split_heads, X32, 2)
        if np.asarray(got).dtype != np.float32:
            raise CheckFailed(f"split_heads turned float32 input into {np.asarray(got).dtype}",
                              hint="reshape and transpose never change the dtype: no .astype, no "
                                   "np.zeros(...) filled by hand")


# ----------------------------------------------------------------------------------------
# Exercise 4.2: the causal mask
# ----------------------------------------------------------------------------------------

_MASK_HINT = ("query t (row) may see the keys s <= t (columns): every score with s > t becomes "
              "-np.inf, every other score stays as it is")


def _mask_mistakes(S):
    T = S.shape[-1]
    upper0 = np.triu(np.ones((T, T), bool), 0)
    lower = np.tril(np.ones((T, T), bool), -1)
    future = np.triu(np.ones((T, T), bool), 1)
    return [   # the value-based masks first: on the stage of zeros they look like others
        (lambda: np.where(np.tril(S) == 0, -np.inf, S), _VALUES_HINT),
        (lambda: np.where(np.tril(S) == S, S, -np.inf), _VALUES_HINT),
        (lambda: np.where(upper0, -np.inf, S),
         "the diagonal is masked too: a token may see itself (k=1 in np.triu, not k=0). "
         "Row 0 would then have no key left, and its softmax would be 0/0 = NaN"),
        (lambda: np.where(lower, -np.inf, S),
         "you masked the past: query t (row) must not see keys s > t (columns to the right of the "
         "diagonal), the upper triangle, np.triu(..., k=1)"),
        (lambda: np.where(np.tril(np.ones((T, T), bool), 0), -np.inf, S),
         "you masked the past and the diagonal: mask the columns s > t, np.triu(..., k=1)"),
        (lambda: np.where(future, -1e9, S),
         "use -np.inf, not -1e9: exp(-inf) is exactly 0, while a finite stand-in leaves a row whose "
         "keys are all masked with uniform weights over masked keys (see the float32 experiment below)"),
        (lambda: np.where(future, -1e4, S),
         "use -np.inf, not a finite number: only exp(-inf) is exactly 0"),
        (lambda: np.where(future, 0.0, S),
         "a score of 0 does not remove a key: exp(0) = 1. Masked scores must be -np.inf"),
    ]


_VALUES_HINT = ("the mask comes from the scores' values (np.tril(S) == 0, or np.tril(S) compared "
                "with S): a visible score can be exactly 0, and a future one can equal its "
                "np.tril, so a value says nothing about the position. Build the mask from the "
                "positions alone: query t (row) and key s (column), masked where s > t")


def _check_mask_case(fn, S):
    got = result_of(fn, S)
    expect_shape(got, S.shape, what="apply_causal_mask(S)",
                 hint="the masked scores have the shape of S: the mask broadcasts over leading axes")
    diagnose(got, ref.apply_causal_mask(S), _mask_mistakes(S), _MASK_HINT, what="apply_causal_mask(S)")


@checker()
def check_causal_mask(apply_causal_mask):
    rng = case_rng(42)
    with stage("shapes"):
        S = rng.standard_normal((3, 3))
        expect_shape(result_of(apply_causal_mask, S), (3, 3), what="apply_causal_mask(S)",
                     hint="(T, T) in, (T, T) out")
    with stage("hand-checkable case"):
        # T = 3: row t keeps the columns s <= t, the rest is -inf
        S = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        _check_mask_case(apply_causal_mask, S)
    with stage("batched scores (B, H, T, T)"):
        _check_mask_case(apply_causal_mask, rng.standard_normal((2, 4, 5, 5)))
        _check_mask_case(apply_causal_mask, rng.standard_normal((1, 2, 8, 8)))
    with stage("scores exactly 0, or equal, on both sides of the diagonal"):
        # the mask depends on the positions only: zeros (all scores 0, as with W_q = 0) and
        # repeated values must be masked above the diagonal and kept on and below it
        _check_mask_case(apply_causal_mask, np.zeros((4, 4)))
        _check_mask_case(apply_causal_mask, np.array([[0.0, 0.0, 2.0], [2.0, 0.0, 0.0],
                                                      [0.0, 2.0, 2.0]]))
        _check_mask_case(apply_causal_mask, np.full((2, 3, 3), 1.5))
    with stage("edge cases: T = 1, large scores, float32"):
        _check_mask_case(apply_causal_mask, np.array([[2.5]]))
        _check_mask_case(apply_causal_mask, 1e6 * rng.standard_normal((4, 4)))
        # float32 scores: as in Exercises 4.4 and 4.6, the values are checked; a float64
        # result is accepted (the dtype of a mask is not the point of this exercise)
        _check_mask_case(apply_causal_mask, rng.standard_normal((2, 6, 6)).astype(np.float32))


# ----------------------------------------------------------------------------------------
# Exercise 4.4: batched multi-head attention forward
# ----------------------------------------------------------------------------------------

_FWD_HINT = ("compare each step with Exercise 3.2's single head, applied to every head at once: "
             "the split, the scaled scores, the mask, the softmax, the merge, W_o")
_LATE_MASK_HINT = (
    "a future key's score is far larger than the visible ones here. If you subtract the row "
    "maximum over all keys (future ones included) and remove the future keys only after exp "
    "(np.tril, or a multiplication by 0), exp of every visible score underflows to 0 and the row "
    "becomes 0/0 = NaN. Mask the scores first, then take each row's maximum over what is left")


def _late_mask_weights(S):
    """The wrong softmax: maximum over all keys, then the future removed from exp by np.tril."""
    with np.errstate(all="ignore"):
        E = np.tril(np.exp(S - S.max(axis=-1, keepdims=True)))
        return E / E.sum(axis=-1, keepdims=True)


def _late_mask_forward(x, W_q, W_k, W_v, W_o, H, dtype=np.float64):
    """The causal forward with _late_mask_weights, computed in `dtype` (where it underflows)."""
    x, W_q, W_k, W_v, W_o = (np.asarray(a, dtype=dtype) for a in (x, W_q, W_k, W_v, W_o))
    Q, K, V = (ref.split_heads(x @ W, H) for W in (W_q, W_k, W_v))
    with np.errstate(all="ignore"):
        A = _late_mask_weights(Q @ K.swapaxes(-1, -2) / np.sqrt(dtype(Q.shape[-1])))
        return ref.merge_heads(A @ V) @ W_o, A


def _fwd_mistakes(args, causal):
    x, W_q, W_k, W_v, W_o, H = args
    C = x.shape[-1]
    D = C // H

    def f(**kw):
        return lambda: _forward(x, W_q, W_k, W_v, W_o, H, causal, **kw)

    return [
        (f(scale=1 / np.sqrt(C)), "scale by 1/sqrt(D), D = C / H the head size, not 1/sqrt(C)"),
        (f(scale=1.0), "the scores are not scaled: divide by sqrt(D), D = C / H"),
        (f(scale=1 / D), "divide by the square root of D, not by D"),
        (f(split=_reshape_split, merge=_reshape_merge),
         "a reshape alone mixes positions and heads: split with reshape(B, T, H, D) then "
         "transpose(0, 2, 1, 3), and merge with the inverse"),
        (f(split=_reshape_split),
         "the split is a reshape alone: reshape(B, H, T, D) mixes positions and heads. Use your "
         "split_heads of Exercise 4.1 (reshape to (B, T, H, D), then transpose) for Q, K and V"),
        (f(merge=_reshape_merge),
         "the merge is a reshape alone: (B, H, T, D) reshaped to (B, T, C) mixes positions and "
         "heads. Use your merge_heads of Exercise 4.1 (transpose first, then reshape)"),
        (f(split=_interleaved_split, merge=_interleaved_merge),
         "head h is the column block h*D:(h+1)*D, not every H-th column"),
        (lambda: _forward(x, W_q, W_k, W_v, W_o, H, not causal),
         "the mask is applied when causal is False, or not when causal is True: mask only if causal"),
        (lambda: _forward(x, W_q, W_k, W_v, W_o, H, causal, mask=lambda S: np.where(
            np.tril(np.ones(S.shape[-2:], bool), -1), -np.inf, S)),
         "the mask hides the past: hide the keys s > t, the strict upper triangle"),
        (lambda: _forward(x, W_q, W_k, W_v, np.eye(C), H, causal),
         "the merged heads still go through the output projection: y = merge_heads(A @ V) @ W_o"),
    ] + ([(lambda: _late_mask_forward(x, W_q, W_k, W_v, W_o, H), _LATE_MASK_HINT)] if causal
         else [])


def _fwd_a_mistakes(args, causal):
    return [(lambda w=w: w()[1], h) for w, h in _fwd_mistakes(args, causal)]


def _fwd_y_mistakes(args, causal):
    return [(lambda w=w: w()[0], h) for w, h in _fwd_mistakes(args, causal)]


def _check_fwd_case(fn, x, W_q, W_k, W_v, W_o, H, causal, rtol=1e-6, atol=1e-9):
    B, T, C = x.shape
    y, A = expect_arrays(result_of(fn, x, W_q, W_k, W_v, W_o, H, causal), ["y", "A"],
                  "multihead_attention(...)")
    expect_shape(A, (B, H, T, T), what="A", hint=f"A holds one (T, T) map per sequence and head: "
                                                  f"(B, H, T, T) = {(B, H, T, T)}")
    expect_shape(y, (B, T, C), what="y", hint=f"y has the shape of x: (B, T, C) = {(B, T, C)}")
    A_arr = np.asarray(A, dtype=float)
    if not np.all(np.isfinite(A_arr)):
        if causal:
            dtype = (float_dtype(A) or np.dtype(np.float64)).type
            late = _late_mask_forward(x, W_q, W_k, W_v, W_o, H, dtype)[1]
            if not np.all(np.isfinite(late)) and np.array_equal(np.isnan(A_arr), np.isnan(late)):
                raise CheckFailed("A contains NaN in the rows whose visible scores are all far "
                                  "below a future one", _LATE_MASK_HINT)
        if causal and np.all(np.isnan(A_arr[..., 0, :])):
            raise CheckFailed("A contains NaN in row 0 of every map (query 0)",
                              "the diagonal is masked, so query 0 sees no key at all and its softmax is "
                              "0/0. A token may see itself: mask s > t only (np.triu(..., k=1))")
        expect_finite(A_arr, what="A", hint="compute the softmax stably (Exercise 3.2): subtract "
                                            "each row's maximum")
    args = [np.asarray(a, dtype=np.float64) for a in (x, W_q, W_k, W_v, W_o)] + [H]
    want_y, want_A = _forward(*args[:5], H, causal)
    diagnose(A, want_A, _fwd_a_mistakes(args, causal), _FWD_HINT, what="A", rtol=rtol, atol=atol)
    expect_finite(y, what="y", hint="y = merge_heads(A @ V) @ W_o")
    diagnose(y, want_y, _fwd_y_mistakes(args, causal), _FWD_HINT, what="y", rtol=rtol, atol=atol)


def _weights(rng, C, scale=1.0):
    return [scale * rng.standard_normal((C, C)) / np.sqrt(C) for _ in range(4)]


@checker(library=["kernels.attention_forward", "kernels.attention_rows_forward"])
def check_multihead_attention(multihead_attention):
    rng = case_rng(44)
    _own_helpers_first(multihead_attention)
    with stage("returns (y, A) with shapes (B, T, C) and (B, H, T, T)"):
        x = rng.standard_normal((2, 3, 8))
        _tuple_shapes = expect_arrays(result_of(multihead_attention, x, *_weights(rng, 8), 2, False), ["y", "A"],
                               "multihead_attention(...)")
        expect_shape(_tuple_shapes[0], (2, 3, 8), what="y",
                     hint="here x is (B, T, C) = (2, 3, 8) with H = 2: y is (2, 3, 8)")
        expect_shape(_tuple_shapes[1], (2, 2, 3, 3), what="A",
                     hint="here B = 2, H = 2, T = 3: A is (B, H, T, T) = (2, 2, 3, 3)")
    with stage("hand-checkable case: W_q = 0, uniform weights"):
        # all scores 0: bidirectional rows are 1/T; causal row t is 1/(t + 1) over s <= t
        x = rng.standard_normal((1, 4, 6))
        _, W_k, W_v, W_o = _weights(rng, 6)
        for causal in (False, True):
            _check_fwd_case(multihead_attention, x, np.zeros((6, 6)), W_k, W_v, W_o, 3, causal)
    with stage("random cases, bidirectional"):
        for B, T, C, H in ((2, 5, 12, 4), (1, 8, 16, 2), (3, 4, 6, 3)):
            _check_fwd_case(multihead_attention, rng.standard_normal((B, T, C)),
                            *_weights(rng, C, 2.0), H, False)
    with stage("random cases, causal"):
        for B, T, C, H in ((2, 5, 12, 4), (1, 8, 16, 2)):
            _check_fwd_case(multihead_attention, rng.standard_normal((B, T, C)),
                            *_weights(rng, C, 2.0), H, True)
    with stage("edge cases: one head, large scores, float32"):
        _check_fwd_case(multihead_attention, rng.standard_normal((2, 4, 6)), *_weights(rng, 6), 1, True)
        _check_fwd_case(multihead_attention, rng.standard_normal((1, 5, 8)), *_weights(rng, 8, 60.0),
                        2, False)
        args32 = [a.astype(np.float32) for a in [rng.standard_normal((2, 8, 16))] + _weights(rng, 16)]
        _check_fwd_case(multihead_attention, *args32, 4, True, rtol=1e-4, atol=1e-5)
    with stage("causal edge case: a future key's score dominates every row (float32)"):
        # feature 0 of x is 1 everywhere and W_q reads it into query dimension 0 of each head;
        # the last position carries 2000 in feature 1, which W_k puts into key dimension 0:
        # every query scores the last key about 2000 / sqrt(D) = 1000 above the others (exp
        # underflows in float64 too), and only the last query may see it
        B, T, C, H = 2, 5, 8, 2
        x = 0.3 * rng.standard_normal((B, T, C))
        x[:, :, 0], x[:, -1, 1] = 1.0, 2000.0
        W_q, W_k, W_v, W_o = _weights(rng, C, 0.1)
        W_q[1], W_k[1] = 0.0, 0.0
        W_q[0, 0::C // H] = 1.0
        W_k[1, 0::C // H] = 1.0
        args32 = [a.astype(np.float32) for a in (x, W_q, W_k, W_v, W_o)]
        _check_fwd_case(multihead_attention, *args32, H, True, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Exercise 4.6: multi-head attention backward (Exercise 4.5 derives it on paper)
# ----------------------------------------------------------------------------------------

_BWD_NAMES = ["dx", "dW_q", "dW_k", "dW_v", "dW_o"]
_BWD_HINT = "compare each step with your derivation in Exercise 4.5"


def _bwd_mistakes(args, i):
    dy, x, W_q, W_k, W_v, W_o, A, H = args
    C = x.shape[-1]

    def f(**kw):
        return lambda: _backward(dy, x, W_q, W_k, W_v, W_o, A, H, **kw)[i]

    return [
        (f(scale=1.0), "dQ and dK carry the 1/sqrt(D) of the scores, as in notebook 03"),
        (f(scale=1 / np.sqrt(C)), "the scale is 1/sqrt(D), D = C / H the head size, not 1/sqrt(C)"),
        (f(scale=1 / (C // H)), "divide by the square root of D, not by D"),
        (f(smb=lambda d, a: a * (1 - a) * d),
         "your softmax backward keeps only the diagonal of its Jacobian: every weight of a row "
         "depends on every score of that row (Exercise 3.3)"),
        (f(smb=lambda d, a: a * (d - np.sum(d * a, axis=-2, keepdims=True))),
         "the sum in your softmax backward runs over axis=-2, the queries: the softmax normalises "
         "each row over the keys, the last axis, so the sum runs over that axis"),
        (f(wo_T=False),
         "the gradient of the merged heads is dy times the TRANSPOSE of W_o (y = M W_o, so "
         "dM = dy W_o^T): dy @ W_o has the right shape only because W_o is square"),
        (f(dk_T=False),
         "dK needs the transpose of dS: key s collects from column s of dS (every query that "
         "looked at it), so dK = dS^T Q / sqrt(D), not dS Q / sqrt(D)"),
        (f(split_dO=_reshape_split),
         "the gradient of the merged heads is cut into heads by a reshape alone: "
         "dM.reshape(B, H, T, D) mixes positions and heads. The backward of merge_heads is "
         "split_heads (reshape to (B, T, H, D), then transpose)"),
        (f(split=_reshape_split, merge=_reshape_merge),
         "a reshape alone mixes positions and heads: the backward of merge_heads is split_heads "
         "(reshape to (B, T, H, D), then transpose), and the backward of split_heads is merge_heads"),
        (f(dw="mean"),
         "a weight gradient sums over the batch and the positions: do not divide by B * T (each "
         "sequence and position adds its own contribution to the shared weight)"),
        (f(dw="last"),
         "the weight gradient comes from the last sequence of the batch only: W is shared by "
         "every sequence, so add the contributions of all B sequences (a loop that overwrites "
         "instead of adding?)"),
        (f(paths="v"), "x feeds Q, K and V: dx = dQ W_q^T + dK W_k^T + dV W_v^T, all three paths add "
                       "up (you kept only the value path)"),
        (f(paths="q"), "x feeds Q, K and V: dx = dQ W_q^T + dK W_k^T + dV W_v^T, all three paths add "
                       "up (you kept only the query path)"),
        (f(paths="qv"), "x feeds Q, K and V: dx = dQ W_q^T + dK W_k^T + dV W_v^T (the key path is "
                        "missing)"),
        (lambda: _backward(dy, x, W_q, W_k, W_v, W_o, A, H)[i].swapaxes(-1, -2),
         "dW_o is transposed: with M the merged heads, dW_o = M^T dy (rows: the entries of M, "
         "columns: the entries of y), not dy^T M" if i == 4 else
         f"{_BWD_NAMES[i]} is transposed: a weight gradient has the shape of its weight (in, out), "
         f"x^T times the gradient of the projection's output, not its transpose"),
    ] + _swap_mistakes(args, i)


def _swap_mistakes(args, i):
    """dW_q and dW_k exchanged (in the computation or in the return order)."""
    if i not in (1, 2):
        return []
    other = 3 - i
    return [(lambda: _backward(*args)[other],
             f"your {_BWD_NAMES[i]} is the right {_BWD_NAMES[other]}: dW_q and dW_k are swapped "
             f"(dW_q comes from dQ, dW_k from dK; check the return order too)")]


def _check_bwd_case(fn, dy, x, W_q, W_k, W_v, W_o, A, H, rtol=1e-6, atol=1e-9, values=True):
    B, T, C = x.shape
    got = expect_arrays(result_of(fn, dy, x, W_q, W_k, W_v, W_o, A, H), _BWD_NAMES,
                        "multihead_attention_backward(...)")
    shapes = [(B, T, C)] + [(C, C)] * 4
    for g, name, shape in zip(got, _BWD_NAMES, shapes):
        expect_shape(g, shape, what=name, hint=f"{name} has the shape of {name[1:]}: {shape}")
        if values:
            expect_finite(g, what=name, hint=_BWD_HINT)
    if not values:
        return
    args = [np.asarray(a, dtype=np.float64) for a in (dy, x, W_q, W_k, W_v, W_o, A)] + [H]
    want = _backward(*args)
    # W_o first (the last step of the forward is the first of the backward), then the rest
    for i in (4, 3, 1, 2, 0):
        diagnose(got[i], want[i], _bwd_mistakes(args, i), _BWD_HINT, what=_BWD_NAMES[i],
                 rtol=rtol, atol=atol)


def _bwd_case(rng, B, T, C, H, causal, scale=1.5, dtype=np.float64):
    x = rng.standard_normal((B, T, C))
    W = _weights(rng, C, scale)
    A = _forward(x, *W, H, causal)[1]
    dy = rng.standard_normal((B, T, C))
    return [a.astype(dtype) for a in [dy, x] + W + [A]] + [H]


@checker(library=["kernels.attention_backward", "kernels.attention_rows_backward"])
def check_multihead_attention_backward(multihead_attention_backward):
    rng = case_rng(46)
    fn = multihead_attention_backward
    _own_helpers_first(fn)
    with stage("returns (dx, dW_q, dW_k, dW_v, dW_o) with the shapes of x and the weights"):
        _check_bwd_case(fn, *_bwd_case(rng, 2, 3, 8, 2, False), values=False)
    with stage("small case: B = 1, T = 3, C = 4, H = 2"):
        _check_bwd_case(fn, *_bwd_case(rng, 1, 3, 4, 2, False))
    with stage("random cases, bidirectional"):
        for B, T, C, H in ((2, 5, 12, 4), (3, 4, 6, 3)):
            _check_bwd_case(fn, *_bwd_case(rng, B, T, C, H, False))
    with stage("random cases, causal (A has zeros above the diagonal)"):
        for B, T, C, H in ((2, 5, 12, 4), (1, 8, 16, 2)):
            _check_bwd_case(fn, *_bwd_case(rng, B, T, C, H, True))
    with stage("edge cases: one head, float32"):
        _check_bwd_case(fn, *_bwd_case(rng, 2, 4, 6, 1, True))
        _check_bwd_case(fn, *_bwd_case(rng, 2, 8, 16, 4, False, dtype=np.float32), rtol=1e-4,
                        atol=1e-5)
