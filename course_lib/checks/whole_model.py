"""Checkers for notebook 10, backprop II, the whole model.

    cl.checks.check_block_backward(block_backward)   # Exercise 10.2: (dx, grads) of a block
    cl.checks.check_model_backward(model_backward)   # Exercise 10.3: grads of every parameter

(Exercise 10.1 derives the backward of a post-LN block on paper: no checker.)

Signatures (the names are those of course_lib/block.py and course_lib/model.py):

    block_backward(dy, cache, params, norm="post", activation="relu") -> dx (N, C), grads
        dy (N, C), or (M, C) at cache['rows'], the gradient of the block's output; cache the
        dict a course_lib Block's forward keeps ('ln1.xhat', 'attn.qkv', 'ffn.h', 'rows', ...);
        params and grads dicts with the block's short names ('attn.w_q', 'ln1.gamma', ...).
    model_backward(model) -> grads, dict name -> array, after model.loss(tokens, targets); it
        runs the learner's block_backward on each block.

Block: the post-LN block at all rows is compared with float64 NumPy formulas written here
(tests prove them equal to course_lib's Block.backward); the pre-LN and GELU blocks and the
scored rows with Block.backward on the kernels' NumPy twins. When dx is wrong, the usual
mistakes are computed and the one the result reproduces is named: a residual's skip path not
added, the skip path fed with dy instead of the gradient after the LayerNorm, the LayerNorms
taken in the other placement's order, one of the three paths Q, K, V from x to the attention
left out, W_qkv stacked in another order than Q | K | V, W_o not transposed, the two
LayerNorms' caches swapped, a LayerNorm's gamma left out or taken from the other LayerNorm,
ReLU's backward in a GELU block, x's gradient kept at the scored rows only, the sign. A
parameter gradient that holds another's, or the first sequence's share alone, is named too.
Otherwise the first wrong parameter gradient in backward order says between which stations
the bug sits. A function that calls Block.backward, what the exercise rebuilds, fails (core's
`library`). A last stage runs a float32 block, the course model's dtype: its gradients must be
float32 (an array made in float64 reaches a kernel, which names the two dtypes, and core's
call() says which is whose).

Model: the learner's block_backward is checked first when model_backward calls it (a bug
there is named as Exercise 10.2's). The expected gradients come from course_lib's
model.backward() on small float64 models (post-LN like the course model, then a GPT-2 style
one: pre-LN, GELU, ln_f, tied head, learned positions, no attention biases), every
LayerNorm's gamma and beta (ln_f's too) moved away from 1 and 0. Named: a tied embedding's
gradient that holds only one of its two shares, the head's share transposed, dlogits not
divided by the number of scored rows or negated, head.b from one row or as a mean, the blocks
taken in forward order, a LayerNorm backward without its gamma. A function that calls
model.backward, its helpers or Block.backward fails; a float32 model's gradients must be
float32, as in the block.
"""
import copy
from itertools import permutations

import numpy as np

from .. import kernels
from ..block import Block
from ..config import ModelConfig
from ..kernels import numpy_ref
from . import reference
from .cases import call_hinted
from .core import (case_rng, FLOAT64_SOURCES, CheckFailed, NotDone, as_array, check_quietly, checker,
                   diagnose, expect_shape, float_dtype, learner_helpers, low_precision, stage, tiered)
from .library import Solution

__all__ = ["check_block_backward", "check_model_backward"]

BLOCK_NAMES = ["attn.w_q", "attn.w_k", "attn.w_v", "attn.w_o", "ln1.gamma", "ln1.beta",
               "ffn.w1", "ffn.b1", "ffn.w2", "ffn.b2", "ln2.gamma", "ln2.beta"]
# backward order: the station a gradient is reached at, last station first
_BACKWARD_ORDER = ["ln2.gamma", "ln2.beta", "ffn.w2", "ffn.b2", "ffn.w1", "ffn.b1",
                   "ln1.gamma", "ln1.beta", "attn.w_o", "attn.w_q", "attn.w_k", "attn.w_v"]


# ----------------------------------------------------------------------------------------
# reference formulas (float64)
# ----------------------------------------------------------------------------------------

def _ln_backward(dy, xhat, rstd, gamma):
    """dx = rstd / C (C g - sum(g) - xhat sum(g xhat)), g = dy gamma; dgamma, dbeta."""
    C = dy.shape[1]
    g = dy * gamma
    dx = rstd[:, None] / C * (C * g - g.sum(1, keepdims=True)
                              - xhat * (g * xhat).sum(1, keepdims=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _heads_backward(dheads, qkv, att):
    """dheads (N, C), qkv (B, T, 3C), att (B, H, T, T) -> dQ, dK, dV as (N, C) each."""
    B, T, C3 = qkv.shape
    C, H = C3 // 3, att.shape[1]
    D = C // H

    def split(a):                                    # (B, T, C) -> (B, H, T, D)
        return a.reshape(B, T, H, D).transpose(0, 2, 1, 3)

    Q, K, V = (split(qkv[..., j * C:(j + 1) * C]) for j in range(3))
    dO = split(dheads.reshape(B, T, C))
    dV = att.transpose(0, 1, 3, 2) @ dO
    dA = dO @ V.transpose(0, 1, 3, 2)
    dS = att * (dA - (dA * att).sum(-1, keepdims=True))
    dQ = dS @ K / D ** 0.5                           # a Python float keeps float32 float32
    dK = dS.transpose(0, 1, 3, 2) @ Q / D ** 0.5
    return [g.transpose(0, 2, 1, 3).reshape(B * T, C) for g in (dQ, dK, dV)]


def _block_backward(dy, s, p, skip_ffn=True, skip_attn=True, skip_gets_dy=False, pre_order=False,
                    paths="qkv", wo_transposed=True, swap_ln=False, gammas=None, qkv_order="qkv"):
    """Post-LN block backward from the cache s, with switches that reproduce known mistakes.

    gammas: {"ln1": "ln2"} uses ln2's gamma in LN1's backward, {"ln2": None} no gamma (1);
    qkv_order: the order W_q, W_k, W_v were stacked in when x's gradient is formed."""
    ln1, ln2 = ("ln2", "ln1") if swap_ln else ("ln1", "ln2")
    gammas = gammas or {}
    g = {}

    def ln(name, cache, d):
        gamma = p[gammas.get(name, name) + ".gamma"] if gammas.get(name, name) else 1.0
        dx, g[name + ".gamma"], g[name + ".beta"] = _ln_backward(
            d, s[cache + ".xhat"], s[cache + ".rstd"], gamma)
        return dx

    def ffn(d):
        g["ffn.w2"], g["ffn.b2"] = s["ffn.a"].T @ d, d.sum(0)
        dh = (d @ p["ffn.w2"].T) * (s["ffn.h"] > 0)
        g["ffn.w1"], g["ffn.b1"] = s["ffn.x"].T @ dh, dh.sum(0)
        return dh @ p["ffn.w1"].T

    def attn(d):
        g["attn.w_o"] = s["attn.heads"].T @ d
        dheads = d @ (p["attn.w_o"].T if wo_transposed else p["attn.w_o"])
        dq, dk, dv = _heads_backward(dheads, s["attn.qkv"], s["attn.weights"])
        x = s["attn.x"]
        dx = np.zeros_like(x)
        for w, stacked, dz in zip("qkv", qkv_order, (dq, dk, dv)):
            g["attn.w_" + w] = x.T @ dz
            if w in paths:
                dx = dx + dz @ p["attn.w_" + stacked].T
        return dx

    if pre_order:       # y = x + FFN(LN2(x)), x = x + Attn(LN1(x)): the LayerNorms inside the forks
        d = ln("ln2", ln2, ffn(dy)) + (dy if skip_ffn else 0.0)
        return ln("ln1", ln1, attn(d)) + (d if skip_attn else 0.0), g
    dr = ln("ln2", ln2, dy)                                      # y = LN2(r2), r2 = m + FFN(m)
    dm = ffn(dr) + ((dy if skip_gets_dy else dr) if skip_ffn else 0.0)
    dr = ln("ln1", ln1, dm)                                      # m = LN1(r1), r1 = x + Attn(x)
    dx = attn(dr) + ((dm if skip_gets_dy else dr) if skip_attn else 0.0)
    return dx, g


# ----------------------------------------------------------------------------------------
# random blocks: parameters, an input, and the cache of course_lib's Block forward
# ----------------------------------------------------------------------------------------

def _block_case(seed, B, T, C, H, F, dtype="float64", norm="post", rows=None, activation="relu"):
    """(dy, cache, params) of a random block; rows: the scored rows (the last block of a model
    whose loss reads one position per sequence), dy then (M, C)."""
    rng = case_rng(seed)
    p = {}
    for w in "qkvo":
        p["attn.w_" + w] = rng.normal(0, C ** -0.5, (C, C))
    p["ffn.w1"], p["ffn.b1"] = rng.normal(0, C ** -0.5, (C, F)), rng.normal(0, 0.1, F)
    p["ffn.w2"], p["ffn.b2"] = rng.normal(0, F ** -0.5, (F, C)), rng.normal(0, 0.1, C)
    for ln in ("ln1", "ln2"):       # gamma away from 1: a gamma left out shows
        p[ln + ".gamma"] = 1 + 0.5 * rng.standard_normal(C)
        p[ln + ".beta"] = 0.3 * rng.standard_normal(C)
    p = {k: v.astype(dtype) for k, v in p.items()}
    block = Block(0, _block_config(B, T, C, H, F, dtype, norm, activation),
                  {"blocks.0." + k: v for k, v in p.items()}, kernels)
    x = rng.standard_normal((B * T, C)).astype(dtype)
    y, cache = block.forward(x, B, T, None if rows is None else np.asarray(rows))
    dy = rng.standard_normal(y.shape).astype(dtype)
    return dy, cache, p


def _block_config(B, T, C, H, F, dtype="float64", norm="post", activation="relu"):
    return ModelConfig(vocab_size=20, seq_len=max(T, 1), d_model=C, n_heads=H, n_layers=1, d_ff=F,
                       dtype=dtype, norm=norm, activation=activation)


def _numpy_block_backward(dy, cache, params, norm, activation="relu"):
    """course_lib's Block.backward on the NumPy twins of the kernels, in float64: the reference
    of the pre-LN and GELU blocks and of the scored rows (tests prove it equal to the formulas)."""
    return reference.block_backward(dy, cache, params, norm, activation, kernels=numpy_ref)


def _deepcopy(d):
    return {k: (v.copy() if isinstance(v, np.ndarray) else copy.deepcopy(v)) for k, v in d.items()}


_OWN_BLOCK = Solution("block.Block.backward",
                      message="your function calls course_lib's Block.backward",
                      hint="write the stations yourself: Block.backward is what you are "
                           "rebuilding (use the kernels the exercise lists)")
_BLOCKS_BY_COURSE_LIB = Solution("block.Block.backward",
                                 message="your function calls course_lib's Block.backward",
                                 hint="run your own block_backward of Exercise 10.2 on each block, the "
                                      "last first, with the block's parameters under their short names")
_OWN_MODEL = [Solution(f"model.Transformer.{name}",
                       message=f"your function calls model.{name}, course_lib's own backward",
                       hint="write the stations yourself: model.backward is what you are "
                            "rebuilding (its helpers too)")
              for name in ("backward", "_head_backward", "_blocks_backward")]


_NORM_ARGUMENT = (("positional argument",), "block_backward(dy, cache, params, norm='post', "
                                           "activation='relu'): the fourth argument names the placement, "
                                           "'post' or 'pre', the fifth the FFN's activation")
_ROW_ERRORS = [
    (("reshape",), "this block kept only the scored rows (cache['rows']): its heads are (M, C), not "
                   "(B, T, C); k.attention_rows_backward(dheads, qkv, att, rows) gives dqkv (B, T, 3C)"),
    (("broadcast",), "this block kept only the scored rows (cache['rows']): after its attention every "
                     "array has M rows, x has N; a skip path adds at those rows only, dx[rows] += ..."),
]


def _call_block(fn, dy, cache, params, norm="post", activation="relu"):
    """The learner's block_backward on copies; a cache or params array changed in place fails. The
    arguments the exercise's default gives are left out (an older 3-argument function still runs)."""
    c, p = _deepcopy(cache), _deepcopy(params)
    errors = [_NORM_ARGUMENT] + (_ROW_ERRORS if cache.get("rows") is not None else [])
    args = (dy, c, p) + ((norm, activation) if activation != "relu" else (norm,) if norm != "post" else ())
    result = call_hinted(fn, args, errors)
    for what, before, after in (("cache", cache, c), ("params", params, p)):
        for k, v in before.items():
            if isinstance(v, np.ndarray) and not np.array_equal(v, after.get(k), equal_nan=True):
                raise CheckFailed(f"your function changed {what}[{k!r}] in place",
                                  hint=f"the model still needs {what}[{k!r}] as it was: compute new "
                                       f"arrays (`d = a + b`, not `a += b` on an array you were given)")
    return result


def _unpack_block(result, N, C, params):
    if (not isinstance(result, (tuple, list)) or isinstance(result, np.ndarray)
            or len(result) != 2 or not isinstance(result[1], dict)):
        got = type(result).__name__ + (f" of length {len(result)}"
                                       if isinstance(result, (tuple, list)) else "")
        raise CheckFailed(f"block_backward should return (dx, grads) with grads a dict, got {got}",
                          hint="end your function with `return dx, grads`")
    dx, grads = result
    expect_shape(dx, (N, C), what="dx", hint="dx is shaped like the block's input x: (N, C)")
    missing = [k for k in params if k not in grads]
    extra = [k for k in grads if k not in params]
    if missing or extra:
        raise CheckFailed(f"grads has the keys {sorted(grads)}"
                          + (f"; missing {missing}" if missing else "")
                          + (f"; not parameters: {extra}" if extra else ""),
                          hint="one gradient per parameter, under the parameter's name "
                               f"({', '.join(BLOCK_NAMES)})")
    for k, v in params.items():
        expect_shape(grads[k], v.shape, what=f"grads[{k!r}]",
                     hint="a gradient is shaped like its parameter")
    return dx, grads


def _first_wrong(grads, want, order, rtol=1e-6, atol=1e-9):
    for k in order:
        a = as_array(grads[k], f"grads[{k!r}]")
        if a.shape != want[k].shape or not np.allclose(a, want[k], rtol=rtol, atol=atol):
            return k
    return None


_WHERE = {"ln2": "LN2's backward (the first station)",
          "ffn": "LN2's input gradient (dr2, check its gamma) or the FFN's backward",
          "ln1": "the step between the FFN fork and LN1: the FFN's residual adds its skip path "
                 "(the gradient after LN2) to what came back through the FFN",
          "attn": "LN1's input gradient (dr1, check its gamma) or the attention's backward"}


def _station_hint(name):
    station = name.split(".")[0]
    return (f"the first wrong gradient in backward order is grads[{name!r}]: the bug sits at "
            f"{_WHERE[station]}")


def _gamma_mistakes(V):
    """LayerNorm backwards with gamma left out (1) or taken from the other LayerNorm."""
    what = "gamma left out / wrong gamma in a LayerNorm backward: "
    rule = "LN1's backward takes params['ln1.gamma'], LN2's params['ln2.gamma']"
    cases = [({"ln1": None, "ln2": None}, "both LayerNorms' gammas are missing"),
             ({"ln2": None}, "LN2's gamma is missing"), ({"ln1": None}, "LN1's gamma is missing"),
             ({"ln1": "ln2", "ln2": "ln1"}, "the two gammas are swapped"),
             ({"ln2": "ln1"}, "LN2's backward uses ln1.gamma"),
             ({"ln1": "ln2"}, "LN1's backward uses ln2.gamma")]
    return [(V(gammas=g), f"{what}{text} ({rule}; g = dy * gamma goes into the formula)")
            for g, text in cases]


def _expect_float32(dx, grads):
    """A float32 block's gradients are float32: the float32 model adds them to its own arrays
    and hands them to kernels that need one dtype."""
    for what, g in [("dx", dx)] + [(f"grads[{k!r}]", grads[k]) for k in _BACKWARD_ORDER]:
        dtype = float_dtype(g)
        if dtype != np.float32:
            raise CheckFailed(f"{what} is {dtype or type(g).__name__}, but the block is float32",
                              hint="a dtype problem: your inputs are float32 (the course model's "
                                   "dtype), so something in your function is float64: " + FLOAT64_SOURCES)


def _check_block_case(fn, dy, cache, params, norm="post", activation="relu", rtol=1e-6, atol=1e-9):
    N, C = cache["input"].shape
    dx, grads = _unpack_block(_call_block(fn, dy, cache, params, norm, activation), N, C, params)
    if dy.dtype == np.float32:
        _expect_float32(dx, grads)
        dy, cache, params = (_as_float64(d) for d in (dy, cache, params))
    if norm == "pre" or cache["rows"] is not None or activation != "relu":
        return _check_other_block(dx, grads, dy, cache, params, norm, activation, rtol, atol)
    want_dx, want = _block_backward(dy, cache, params)
    wrong = _first_wrong(grads, want, _BACKWARD_ORDER, rtol, atol)
    default = (_station_hint(wrong) if wrong else
               "every parameter gradient is right but dx is not: after the attention's backward, "
               "x's gradient adds the attention path and the skip path")
    V = lambda **kw: (lambda: _block_backward(dy, cache, params, **kw)[0])  # noqa: E731
    skip_hint = ("a residual's skip path is missing: r = x + f(x) sends its gradient down both "
                 "paths, so x's gradient is f's backward PLUS the gradient of r")
    fork_hint = ("Q, K and V all read the same x: x's gradient through the attention is "
                 "dQ W_q^T + dK W_k^T + dV W_v^T (one product with W_qkv^T gives all three)")
    mistakes = [
        (V(skip_ffn=False, skip_attn=False), skip_hint + " (both residuals' skips are missing)"),
        (V(skip_ffn=False), skip_hint + " (the FFN's residual: add the gradient after LN2)"),
        (V(skip_attn=False), skip_hint + " (the attention's residual: add the gradient after LN1)"),
        (V(skip_gets_dy=True), "the skip path carries the gradient of r = x + f(x), which is what "
                               "comes OUT of the LayerNorm's backward, not the dy that went into it"),
        (V(pre_order=True), "the LayerNorms are taken in the pre-LN order: in a post-LN block LN2 "
                            "comes last in the forward, so its backward comes first, before the "
                            "FFN fork (and LN1 before the attention fork)"),
        (V(swap_ln=True), "the two LayerNorms' caches are swapped: LN2's backward reads "
                          "cache['ln2.xhat'] and cache['ln2.rstd'], LN1's the ln1 ones"),
        (V(wo_transposed=False), "the heads' gradient is d_out W_o^T: the output projection's "
                                 "backward multiplies by the transpose"),
    ] + _gamma_mistakes(V)
    mistakes += [(V(qkv_order="".join(o)), "x's gradient pairs dQ, dK, dV with the wrong weights: "
                                           "stack [W_q | W_k | W_v] in that order (or use "
                                           "cache['attn.w_qkv'])")
                 for o in permutations("qkv") if o != ("q", "k", "v")]
    mistakes += [(V(paths="qkv".replace(w, "")), fork_hint + f" (the path through {w.upper()} is "
                                                             f"missing)") for w in "qkv"]
    mistakes += [(V(paths=w), fork_hint + f" (only the path through {w.upper()} is there)")
                 for w in "qkv"]
    mistakes.append((-want_dx, _SIGN))
    diagnose(dx, want_dx, mistakes, default, what="dx", rtol=rtol, atol=atol)
    _check_parameter_gradients(grads, want, _BACKWARD_ORDER, dy, cache, params, "post", rtol, atol)


_SIGN = "dx has the right size and the wrong sign: no step of the backward subtracts"


def _check_parameter_gradients(grads, want, order, dy, cache, params, norm, rtol, atol, activation="relu"):
    """Each parameter's gradient in backward order, against the right one; named when it holds
    another parameter's gradient, or the first sequence's share alone."""
    first = _first_sequence(dy, cache, params, norm, activation)
    for k in order:
        others = [(want[o], f"grads[{k!r}] holds the gradient of {o!r}: check which gradient "
                            f"goes under which name (W_qkv's columns are Q | K | V)")
                  for o in BLOCK_NAMES if o != k and want[o].shape == want[k].shape]
        others.append((lambda k=k: first()[k], f"grads[{k!r}] holds the first sequence's share alone: "
                                               f"every sequence of the batch adds to a weight's gradient "
                                               f"(work on all B * T rows, e.g. dqkv.reshape(B * T, 3 * C))"))
        others.append((-want[k], f"grads[{k!r}] has the wrong sign"))
        diagnose(grads[k], want[k], others,
                 "dx is right but this gradient is not: look at the line that computes it",
                 what=f"grads[{k!r}]", rtol=rtol, atol=atol)


def _first_sequence(dy, cache, params, norm, activation="relu"):
    """() -> the parameter gradients of the first sequence alone: the sequences of a block do
    not mix, so they are the gradients of dy with every other sequence's rows set to 0."""
    B, T = cache["attn.qkv"].shape[:2]
    rows = np.arange(dy.shape[0]) if cache["rows"] is None else np.asarray(cache["rows"])
    if B == 1:
        return lambda: {}
    return lambda: _numpy_block_backward(dy * (rows < T)[:, None], cache, params, norm, activation)[1]


_PRE_ORDER = ["ffn.w2", "ffn.b2", "ffn.w1", "ffn.b1", "ln2.gamma", "ln2.beta",
              "attn.w_o", "attn.w_q", "attn.w_k", "attn.w_v", "ln1.gamma", "ln1.beta"]
_PRE_WHERE = {"ffn": "the FFN's backward, the first station (it reads dy itself)",
              "ln2": "LN2's backward, which takes what came back through the FFN",
              "attn": "the gradient of m, dy plus what came back through LN2 (the FFN's skip path "
                      "carries dy unchanged), or the attention's backward",
              "ln1": "LN1's backward, which takes what came back through the attention"}


def _check_other_block(dx, grads, dy, cache, params, norm, activation, rtol, atol):
    """A pre-LN or GELU block, or a block at the scored rows: against course_lib's Block.backward on
    the NumPy twins, with the mistakes of the placement, the activation and the rows."""
    want_dx, want = _numpy_block_backward(dy, cache, params, norm, activation)
    rows = cache["rows"]
    mistakes = [(-want_dx, _SIGN)]
    if activation == "gelu":
        mistakes.append((lambda: _numpy_block_backward(dy, cache, params, norm)[0],
                         "this is ReLU's backward: with activation='gelu' the FFN's derivative is "
                         "GELU's, k.gelu_backward(da, cache['ffn.h'], cache['ffn.a'])"))
    elif rows is None:      # norm == "pre": the formulas above, with switches
        V = lambda **kw: (lambda: _block_backward(dy, cache, params, pre_order=True, **kw)[0])  # noqa: E731
        mistakes += [
            (lambda: _block_backward(dy, cache, params)[0],
             "this is the post-LN backward: with norm='pre' the LayerNorms sit inside the branches, "
             "so the backward takes the FFN first, then LN2, and the skip paths pass no LayerNorm"),
            (V(skip_ffn=False, skip_attn=False), "both skip paths are missing: m = x + Attn(LN1(x)) "
                                                 "and y = m + FFN(LN2(m)) each add their input"),
            (V(skip_ffn=False), "the FFN's skip path is missing: dm = dy + LN2's backward of the FFN's"),
            (V(skip_attn=False), "the attention's skip path is missing: dx = dm + LN1's backward of "
                                 "the attention's"),
            (V(swap_ln=True), "the two LayerNorms' caches are swapped: LN2's backward reads "
                              "cache['ln2.xhat'] and cache['ln2.rstd']"),
        ] + _gamma_mistakes(V)
    else:                   # the scored rows: x's gradient through K and V reaches every row
        at_rows = np.zeros_like(want_dx)
        at_rows[rows] = want_dx[rows]
        mistakes.append((at_rows, "x's gradient is right at the scored rows only: the keys and values "
                                  "come from every position, so the attention's backward reaches every "
                                  "row of x (only the skip path stops at the scored rows)"))
    order = _BACKWARD_ORDER if norm == "post" else _PRE_ORDER
    wrong = _first_wrong(grads, want, order, rtol, atol)
    where = _WHERE if norm == "post" else _PRE_WHERE
    default = (f"the first wrong gradient in backward order is grads[{wrong!r}]: the bug sits at "
               f"{where[wrong.split('.')[0]]}" if wrong else
               "every parameter gradient is right but dx is not: x's gradient adds the attention "
               "path and the skip path" + (" (at the scored rows)" if rows is not None else ""))
    diagnose(dx, want_dx, mistakes, default, what="dx", rtol=rtol, atol=atol)
    _check_parameter_gradients(grads, want, order, dy, cache, params, norm, rtol, atol, activation)


def _as_float64(a):
    """An array, or a dict's arrays, in float64 (the reference formulas' precision)."""
    if isinstance(a, dict):
        return {k: _as_float64(v) for k, v in a.items()}
    return a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a


@checker(library=[_OWN_BLOCK])
def check_block_backward(block_backward):
    with stage("returns"):
        dy, cache, params = _block_case(100, 1, 3, 4, 2, 8)
        _unpack_block(_call_block(block_backward, dy, cache, params), 3, 4, params)
    with stage("small post-LN block (B=1, T=3, C=4, 2 heads)"):
        _check_block_case(block_backward, dy, cache, params)
    with stage("random post-LN blocks"):
        for seed, shape in ((101, (2, 5, 8, 2, 16)), (102, (2, 4, 12, 3, 20))):
            _check_block_case(block_backward, *_block_case(seed, *shape))
    with stage("edge cases (one token; the course model's sizes)"):
        for seed, shape in ((103, (3, 1, 8, 2, 16)), (104, (2, 8, 64, 4, 256))):
            _check_block_case(block_backward, *_block_case(seed, *shape))
    with stage("pre-LN blocks, norm='pre' (GPT-2's placement)"):
        for seed, shape in ((106, (1, 3, 4, 2, 8)), (107, (2, 5, 8, 2, 16))):
            _check_block_case(block_backward, *_block_case(seed, *shape, norm="pre"), norm="pre")
    with stage("the last block: only the scored rows (cache['rows'], one per sequence)"):
        for seed, norm in ((108, "post"), (109, "pre")):
            B, T = 3, 4
            rows = [b * T + T - 1 for b in range(B)]            # the last position of each sequence
            _check_block_case(block_backward, *_block_case(seed, B, T, 8, 2, 16, norm=norm, rows=rows),
                              norm=norm)
    with stage("a GELU block, activation='gelu' (GPT-2's FFN), pre-LN and at the scored rows"):
        _check_block_case(block_backward, *_block_case(110, 2, 5, 8, 2, 16, norm="pre", activation="gelu"),
                          norm="pre", activation="gelu")
        _check_block_case(block_backward, *_block_case(111, 2, 4, 8, 2, 16, norm="pre", rows=[3, 7],
                                                       activation="gelu"), norm="pre", activation="gelu")
    with stage("a float32 block (the course model's dtype): float32 gradients"):
        # float64 inputs gave float64 gradients above (core notes a float32 one); here every
        # input is float32, and every array the function makes must be float32 too
        _check_block_case(block_backward, *_block_case(105, 2, 8, 64, 4, 256, dtype="float32"),
                          rtol=1e-3, atol=1e-4)


# ----------------------------------------------------------------------------------------
# Exercise 10.3: the whole model
# ----------------------------------------------------------------------------------------

def _models(dtype="float64"):
    """Small models whose blocks Exercise 10.2's block_backward handles (no attention biases): the
    course model's kind, then GPT-2's (pre-LN, GELU, ln_f, causal, tied head, learned positions)."""
    from ..config import presets
    post = presets.deep_dive().replace(d_model=16, d_ff=32, n_heads=2, dtype=dtype)
    pre = presets.gpt2(vocab_size=20, seq_len=8, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                       attn_bias=False, dtype=dtype)
    return post, pre


def _problems(seed, B, T):
    rng = case_rng(seed)
    tokens = rng.integers(0, 20, (B, T))
    targets = np.full((B, T), -100)
    targets[:, -1] = rng.integers(2, 12, B)
    return tokens, targets


_STATIONS = {"ln1": ["ln1.gamma", "ln1.beta"], "ln2": ["ln2.gamma", "ln2.beta"],
             "ffn": ["ffn.w2", "ffn.b2", "ffn.w1", "ffn.b1"],
             "attn": ["attn.w_o", "attn.b_o"] + [f"attn.{w}_{c}" for c in "qkv" for w in "wb"]}


def _backward_order(model):
    """Parameter names in the order the backward reaches them: head, ln_f, each block last
    first (post-LN: ln2, ffn, ln1, attn; pre-LN: ffn, ln2, attn, ln1), the embeddings."""
    names = set(model.params)
    stations = (["ln2", "ffn", "ln1", "attn"] if model.config.norm == "post"
                else ["ffn", "ln2", "attn", "ln1"])
    order = ["head.w", "head.b", "ln_f.gamma", "ln_f.beta"]
    for i in reversed(range(model.config.n_layers)):
        order += [f"blocks.{i}.{n}" for st in stations for n in _STATIONS[st]]
    order += ["pos_emb", "tok_emb"]
    assert names <= set(order), names - set(order)
    return [n for n in order if n in names]


_REVERSE_HINT = tiered("the blocks go backward in reverse order, the last block first, each with "
                       "its own saved dict; the last block works only at the scored rows, so its "
                       "gradient has fewer rows than block 0's output",
                       "for block, saved in reversed(list(zip(model.blocks, s['blocks']))):")


def _exception_hint(e, model):
    """The hint for an exception the learner's model_backward raised."""
    text = str(e).replace(" ", "")
    V, C = model.config.vocab_size, model.config.d_model
    if "Block.backward" in str(e):
        return _REVERSE_HINT
    if model.config.tie_embeddings and f"({V},{C})" in text and f"({C},{V})" in text:
        return ("tok_emb (V, C) cannot take a (C, V) array: the head's share must be in E's "
                "(V, C) layout: dlogits^T x")
    if any(word in text for word in ("shape", "broadcast", "align", "fit", "mustbe")):
        return ("a shape does not fit: the stations go backward in reverse (head, ln_f, "
                "reversed(blocks), embedding), each block with its own saved dict")
    return "run it on a small model and print the shape of dx after each station"


def _run_model_backward(fn, model):
    """The learner's model_backward(model), refusing one that changes the parameters or the
    saved activations in place. -> grads."""
    saved = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in model.saved.items()}
    params = {k: v.copy() for k, v in model.params.items()}
    try:
        with np.errstate(all="ignore"):
            grads = fn(model)
    except NotImplementedError:
        raise NotDone() from None
    except Exception as e:
        raise CheckFailed(f"your function raised {type(e).__name__}: {e}",
                          hint=_exception_hint(e, model)) from None
    for k, v in params.items():
        if not np.array_equal(v, model.params[k]):
            raise CheckFailed(f"your function changed model.params[{k!r}]",
                              hint="backward computes gradients; it never changes a parameter")
    for k, v in saved.items():
        if isinstance(v, np.ndarray) and not np.array_equal(v, model.saved[k]):
            raise CheckFailed(f"your function changed model.saved[{k!r}] in place",
                              hint="compute new arrays: a later backward still reads the cache")
    return grads


def _expect_one_gradient_per_parameter(grads, model):
    if not isinstance(grads, dict):
        raise CheckFailed(f"model_backward should return a dict name -> gradient, got "
                          f"{type(grads).__name__}", hint="end your function with `return grads`")
    missing = [k for k in model.params if k not in grads]
    extra = [k for k in grads if k not in model.params]
    if missing or extra:
        hint = "one gradient per parameter, under the names of model.params"
        if any(k.startswith("ln_f") for k in missing):
            hint = ("a pre-LN model ends with a final LayerNorm ln_f: its backward sits between "
                    "the head and the last block")
        elif "pos_emb" in missing:
            hint = ("with learned positions pos_emb is a parameter: embedding_backward returns "
                    "its gradient too (summed over the batch)")
        elif "head.w" in missing or "head.b" in missing:
            hint = "the head's backward gives head.w and head.b (linear_backward)"
        elif any(k.startswith("blocks.") for k in missing):
            hint = "every block's backward puts its gradients into grads: run all of them"
        raise CheckFailed(f"grads lacks {missing}" if missing else f"grads has extra keys {extra}",
                          hint=hint)
    hints = {"pos_emb": "pos_emb has seq_len rows: positions beyond T get a zero gradient",
             "tok_emb": "tok_emb's gradient is (V, C) like E; a tied head's share must be in "
                        "E's (V, C) layout: dlogits^T x"}
    for k in model.params:
        expect_shape(grads[k], model.params[k].shape, what=f"grads[{k!r}]",
                     hint=hints.get(k, "a gradient is shaped like its parameter"))
    for k, p in model.params.items():
        dtype = low_precision(grads[k])
        if dtype is not None and p.dtype == np.float64:
            raise CheckFailed(f"grads[{k!r}] is {dtype}, but the model is float64",
                              hint=f"a dtype problem, not a formula problem: a gradient has its "
                                   f"parameter's dtype (no .astype(np.{dtype}), no "
                                   f"np.zeros(..., dtype=np.{dtype}))")


def _perturb_norms(model, seed):
    """Every LayerNorm's gamma and beta (ln_f's too) away from a fresh model's 1 and 0, so that
    a gamma left out of a LayerNorm's backward shows (as in the block checker)."""
    rng = case_rng(seed)
    for k, v in model.params.items():
        if k.endswith(".gamma"):
            v[...] = 1 + 0.5 * rng.standard_normal(v.shape)
        elif k.endswith(".beta"):
            v[...] = 0.3 * rng.standard_normal(v.shape)


def _check_model_case(fn, cfg, tokens, targets, seed=0):
    from ..model import Transformer
    model = Transformer(cfg, seed=seed)
    _perturb_norms(model, 1000 + seed)
    model.loss(tokens, targets)
    want = model.backward()
    grads = _run_model_backward(fn, model)
    _expect_one_gradient_per_parameter(grads, model)
    cfg_ = model.config
    order = _backward_order(model)
    wrong = _first_wrong(grads, want, order)
    if wrong is None:
        return
    s = model.saved
    M = len(s["targets"])
    mistakes = []
    from .. import kernels
    dlogits = kernels.cross_entropy_backward(s["probs"], s["targets"])
    if wrong == order[0]:           # the first station already M times too large: dlogits
        mistakes = [(want[wrong] * M, f"dlogits = (p - onehot(y)) / M: the loss is the mean over "
                                      f"the M scored rows (here M = {M}), so divide by the number "
                                      f"of scored rows (cross_entropy_backward does)"),
                    (-want[wrong], "the gradient has the wrong sign from the first station on: "
                                   "dlogits = p - onehot(y), not onehot(y) - p")]
    if wrong == "head.b":
        mistakes += [(dlogits[0], "head.b sums dlogits over ALL the scored rows, not the first"),
                     (dlogits.mean(axis=0), "head.b is the SUM of dlogits over the scored rows (the "
                                            "1/M of the mean loss is already inside dlogits), not "
                                            "their mean")]
    if wrong == "tok_emb" and cfg_.tie_embeddings:
        head_part = dlogits.T @ s["final"]
        mistakes += [(want["tok_emb"] - head_part,
                     "tied embeddings: tok_emb is used twice, as the lookup table and as the "
                     "head's W^T, so its gradient is the embedding's scatter-add PLUS the head's "
                     "share dlogits^T x (you have only the scatter-add)"),
                    (head_part, "tied embeddings: you have only the head's share; add the "
                                "embedding's scatter-add (embedding_backward)")]
    mistakes += [(lambda ln=ln: _without_gamma(model, ln)[wrong],
                  f"{ln}'s backward leaves out gamma: LayerNorm's input gradient starts from "
                  f"g = dy * gamma, so layernorm_backward takes params['{ln}.gamma'] (the "
                  f"checker's gammas are not 1, as after training)")
                 for ln in sorted(k[:-len(".gamma")] for k in model.params if k.endswith(".gamma"))]
    where = ("the first wrong gradient in backward order is "
             f"grads[{wrong!r}]: the bug sits at that station or just before it")
    diagnose(grads[wrong], want[wrong], mistakes, where, what=f"grads[{wrong!r}]")


def _without_gamma(model, ln):
    """The model's gradients with LayerNorm `ln`'s gamma left out of the backward (taken as 1)."""
    key = ln + ".gamma"
    gamma = model.params[key]
    model.params[key] = np.ones_like(gamma)
    try:
        return model.backward()
    finally:
        model.params[key] = gamma


def _check_own_block(fn):
    """A model_backward that calls the learner's block_backward (Exercise 10.2): that one first,
    quietly, so that a bug there is named there."""
    own = learner_helpers(fn, ["block_backward"])
    if own:
        with stage("first, the block_backward of Exercise 10.2 that model_backward calls"):
            check_quietly(fn, check_block_backward, "Exercise 10.2", own, own["block_backward"])


@checker(library=[*_OWN_MODEL, _BLOCKS_BY_COURSE_LIB])
def check_model_backward(model_backward):
    post, gpt = _models()
    _check_own_block(model_backward)
    with stage("returns"):
        tokens, targets = _problems(110, 2, 8)
        _check_model_case(model_backward, post, tokens, targets)
    with stage("post-LN model (the course model's kind)"):
        _check_model_case(model_backward, post, *_problems(111, 4, 8), seed=1)
    with stage("a GPT-2 style model (pre-LN, GELU, ln_f, causal, tied head, learned positions)"):
        _check_model_case(model_backward, gpt, *_problems(112, 4, 8), seed=2)
    with stage("edge cases (T < seq_len, every position scored, one sequence)"):
        _check_model_case(model_backward, gpt, *_problems(113, 3, 5), seed=3)
        tokens, _ = _problems(114, 2, 8)
        every = case_rng(114).integers(0, 20, (2, 8))
        _check_model_case(model_backward, post, tokens, every, seed=4)
        _check_model_case(model_backward, gpt, *_problems(115, 1, 8), seed=5)
    with stage("a float32 model (the course model's dtype): float32 gradients"):
        _check_float32_model(model_backward, _models("float32")[0], *_problems(116, 4, 8))


def _check_float32_model(fn, cfg, tokens, targets):
    """The course model is float32: its gradients are float32 (the optimiser adds them to float32
    parameters), and right to float32's rounding."""
    from ..model import Transformer
    model = Transformer(cfg, seed=6)
    model.loss(tokens, targets)
    want = model.backward()
    grads = _run_model_backward(fn, model)
    _expect_one_gradient_per_parameter(grads, model)
    for k in _backward_order(model):
        dtype = float_dtype(grads[k])
        if dtype != np.float32:
            raise CheckFailed(f"grads[{k!r}] is {dtype or type(grads[k]).__name__}, but the model is "
                              "float32", hint="a dtype problem: the model's arrays are float32, so "
                                              "something in your function is float64: " + FLOAT64_SOURCES)
        diagnose(grads[k], want[k], [], "right in float64 but not in float32: look for a step that "
                                        "loses precision", what=f"grads[{k!r}]", rtol=1e-3, atol=1e-5)
