"""Checkers for notebook 02, embeddings and positions.

    cl.checks.check_embed(embed)                    # Exercise 2.1: E[tokens]
    cl.checks.check_embed_backward(embed_backward)  # Exercise 2.3: scatter-add into dE
    cl.checks.check_sinusoidal(sinusoidal)          # Exercise 2.4: the sinusoidal table

(Exercise 2.2 derives the gradient on paper: no checker.)

Expected values come from NumPy formulas written here (np.add.at for the scatter-add,
the interleaved sin/cos table of notebook 02), never from the learner's function. When a
result is wrong, the checker also computes the usual mistakes and names the one that
matches, so the hint points at the actual bug. Float64 cases are compared at float64
precision: a result computed or accumulated in float32 fails with a hint that names the
dtype.
"""
import dataclasses

import numpy as np

from ..task import encode
from .cases import Case, Output, Spec, Stage, run_cases
from .core import case_rng, checker

__all__ = ["check_embed", "check_embed_backward", "check_sinusoidal"]


def _int_tokens(array):
    return np.ascontiguousarray(array, dtype=np.int64)


_TIGHT = dict(rtol=1e-10, atol=1e-12)   # float64 cases: float32 rounding (~6e-8) fails


# ----------------------------------------------------------------------------------------
# Exercise 2.1: the lookup
# ----------------------------------------------------------------------------------------

def _lookup_mistakes(tokens, E):
    return [
        (lambda: E[tokens - 1], "off by one: token id v selects row v of E (ids start at 0, so id 0 is row 0)"),
        (lambda: np.broadcast_to(E[tokens[0]], tokens.shape + E.shape[1:]),
         "every sequence of the batch needs its own lookup: use all of tokens, not tokens[0]"),
        (lambda: E[tokens] + _table(tokens.shape[1], E.shape[1]),
         "only the lookup here: the positions P[:T] are added later, outside embed"),
    ]


LOOKUP = Spec(Output(
    "your result", want=lambda tokens, E: E[tokens].astype(float), mistakes=_lookup_mistakes,
    hint="row (b, t) of the result must be E[tokens[b, t]]: index the rows of E with the token ids",
    shape_hint="tokens (B, T) and E (V, C) give x of shape (B, T, C): one row of E, of length C, per token",
    **_TIGHT))


@checker(library=["kernels.embedding_forward"])
def check_embed(fn):
    rng = case_rng(21)
    float32 = rng.standard_normal((20, 64)).astype(np.float32)
    run_cases(fn, LOOKUP, [
        Stage("shapes", [(_int_tokens([[1, 0, 4], [3, 3, 2]]), rng.standard_normal((5, 4)))], values=False),
        # row v is [4v, 4v + 1, 4v + 2, 4v + 3]
        Stage("hand-checkable case", [(_int_tokens([[2, 0, 3]]), np.arange(16, dtype=float).reshape(4, 4))]),
        Stage("random cases", [(_int_tokens(rng.integers(0, V, (B, T))), rng.standard_normal((V, C)))
                               for B, T, V, C in ((4, 8, 20, 16), (3, 5, 7, 2), (2, 2, 9, 6))]),
        Stage("edge cases: ids 0 and V-1, repeated tokens, one token, float32 table",
              [(_int_tokens([encode(text)]), float32) for text in ("Max(1,1,1)", "[PAD][PAD],,", ",")]),
    ])


# ----------------------------------------------------------------------------------------
# Exercise 2.3: the backward of the lookup, a scatter-add
# ----------------------------------------------------------------------------------------

_OVERWRITE_HINT = ("a repeated token must ADD its gradients, not overwrite them: `dE[tokens] = dX` and "
                   "`dE[tokens] += dX` both keep only one of the repeats (fancy-index assignment is "
                   "buffered); add one position at a time (a loop over b and t with +=), or use "
                   "np.add.at(dE, tokens, dX), NumPy's unbuffered add")


def _scatter_add(tokens, dX, V):
    dE = np.zeros((V, dX.shape[-1]))
    np.add.at(dE, tokens, np.asarray(dX, dtype=float))
    return dE


def _overwrite(tokens, dX, V):
    dE = np.zeros((V, dX.shape[-1]))
    dE[tokens] = dX
    return dE


def _backward_mistakes(tokens, dX, V):
    dX = np.asarray(dX, dtype=float)
    return [
        (lambda: _overwrite(tokens, dX, V), _OVERWRITE_HINT),
        (lambda: _scatter_add(tokens[:1], dX[:1], V),
         "sum over the whole batch: every sequence b contributes, not only the first"),
        (lambda: _scatter_add(tokens, dX, V) / np.maximum(
            np.bincount(tokens.ravel(), minlength=V), 1)[:, None],
         "do not average the repeats: the gradient of a row used n times is the SUM of its n gradients"),
    ]


SCATTER = Spec(Output(
    "your result", want=_scatter_add, mistakes=_backward_mistakes,
    hint="dE[v] is the sum of dX[b, t] over every (b, t) whose token is v; rows of unused tokens are 0",
    shape=lambda tokens, dX, V: (V, dX.shape[-1]),
    shape_hint="dE has the shape of E: (V, C), one row per vocabulary entry", **_TIGHT))
# a float32 gradient summed in float32 is right to its own precision
SCATTER_FLOAT32 = Spec(dataclasses.replace(SCATTER.outputs[0], rtol=1e-5, atol=1e-6))


@checker(library=["kernels.embedding_backward"])
def check_embed_backward(fn):
    rng = case_rng(22)
    run_cases(fn, SCATTER, [
        Stage("shapes", [(_int_tokens([[1, 0, 4], [3, 5, 2]]), rng.standard_normal((2, 3, 4)), 6)],
              values=False),
        # dE = [[1, 2], [0, 0], [3, 4], [5, 6], [0, 0]]
        Stage("hand-checkable case, all tokens different",
              [(_int_tokens([[0, 2, 3]]), np.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]]), 5)]),
        # '1' three times, ',' twice
        Stage("repeated token in one sequence: Max(1,1,1)",
              [(_int_tokens([encode("Max(1,1,1)")]), np.arange(8 * 3, dtype=float).reshape(1, 8, 3) - 10.0, 20)]),
        Stage("tokens repeated across the batch",
              [(_int_tokens([encode("Max(1,6,2)"), encode("Min(1,6,2)"), encode("Max(1,6,2)")]),
                rng.standard_normal((3, 8, 5)), 20)]),
        Stage("random cases", [(_int_tokens(rng.integers(0, V, (B, T))), rng.standard_normal((B, T, C)), V)
                               for B, T, V, C in ((4, 8, 20, 16), (2, 6, 3, 4), (1, 1, 7, 3))]),
        Stage("edge cases: one id everywhere, float32 gradient",
              [(_int_tokens(np.full((2, 8), 19)), rng.standard_normal((2, 8, 4)), 20),
               Case(SCATTER_FLOAT32, (_int_tokens([encode("Last(9,9,0)")]),
                                      rng.standard_normal((1, 8, 64)).astype(np.float32), 20))]),
    ])


# ----------------------------------------------------------------------------------------
# Exercise 2.4: the sinusoidal table
# ----------------------------------------------------------------------------------------
def _table(T, C, pos_offset=0, exponent="2i", layout="interleaved", swap=False, cos_own_freq=False):
    """The sinusoidal table and its usual mistakes (the defaults give the right table)."""
    pos = np.arange(T, dtype=float)[:, None] + pos_offset
    i = np.arange(C // 2, dtype=float)[None, :]
    power = {"2i": 2 * i / C, "i": i / C}[exponent]
    angle = pos / 10000.0 ** power
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    second_angle = pos / 10000.0 ** ((2 * i + 1) / C) if cos_own_freq else angle
    if layout == "halves":
        return np.concatenate([first(angle), second(second_angle)], axis=1)
    P = np.zeros((T, C))
    P[:, 0::2] = first(angle)
    P[:, 1::2] = second(second_angle)
    return P


_SIN_HINT = ("P[pos, 2i] = sin(pos / 10000^(2i/C)) and P[pos, 2i+1] = cos(pos / 10000^(2i/C)), "
             "for pos = 0..T-1 and i = 0..C/2-1")


def _sin_mistakes(T, C):
    return [
        (lambda: _table(T, C, swap=True),
         "sin and cos are swapped: even columns (0, 2, ...) hold sin, odd columns hold cos"),
        (lambda: _table(T, C, layout="halves"),
         "interleave the columns: column 2i is sin and column 2i+1 is cos of the same angle, "
         "not a [sin | cos] split into two halves"),
        (lambda: _table(T, C, layout="halves", swap=True),
         "interleave the columns (not [cos | sin] halves): even columns sin, odd columns cos"),
        (lambda: _table(T, C, exponent="i"),
         "the exponent is 2i/C, with 2i the even column index (0, 2, 4, ...): i/C gives the wrong "
         "frequencies"),
        (lambda: _table(T, C, cos_own_freq=True),
         "the sin and cos of one pair share one angle: column 2i+1 uses 10000^(2i/C), "
         "not 10000^((2i+1)/C)"),
        (lambda: _table(T, C, pos_offset=1), "positions start at 0: row 0 is sin(0) = 0, cos(0) = 1"),
        (lambda: _table(T, C, layout="halves", exponent="i"),
         "two mistakes: interleave sin and cos (no halves) and use the exponent 2i/C, not i/C"),
    ]


_SINUSOIDS = Output("your result", want=_table, mistakes=_sin_mistakes, hint=_SIN_HINT,
                    shape=lambda T, C: (T, C), shape_hint="sinusoidal(T, C) has shape (T, C)",
                    rtol=1e-9, atol=1e-10)
SINUSOIDS = Spec(_SINUSOIDS)
SINUSOID_SHAPES = Spec(dataclasses.replace(
    _SINUSOIDS, shape_hint="sinusoidal(T, C) returns one row of length C per position: (T, C)"))
POSITION_0 = Spec(dataclasses.replace(
    _SINUSOIDS, hint="at pos = 0 every angle is 0: even columns sin(0) = 0, odd columns cos(0) = 1", **_TIGHT))


@checker(library=["kernels.sinusoidal_table"])
def check_sinusoidal(fn):
    rng = case_rng(2401)     # a size at random (a new one in the grader's fresh cases)
    run_cases(fn, SINUSOIDS, [
        Stage("shapes", [(8, 16)], values=False, spec=SINUSOID_SHAPES),
        Stage("position 0 is [0, 1, 0, 1, ...]", [(1, 8)], spec=POSITION_0),
        # pair 0 turns at frequency 1, pair 1 at 1/10000^(2/4) = 1/100
        Stage("hand-checkable case, T=3, C=4", [(3, 4)]),
        Stage("course size, T=8, C=64", [(8, 64), (int(rng.integers(1, 100)), 2 * int(rng.integers(1, 64)))]),
        Stage("edge cases: one pair (C=2), long table (T=200, C=128)", [(5, 2), (200, 128)]),
    ])
