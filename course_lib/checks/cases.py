"""Checkers as data: what an exercise's function must return, and the cases to try it on.

A checker is then its cases, its table of mistakes and its hints; this module runs them, with the
machinery of core.py (call, expect_shape, expect_finite, diagnose):

    LOOKUP = Spec(Output("x", want=lambda tokens, E: E[tokens], mistakes=lookup_mistakes,
                         hint="row (b, t) of x is E[tokens[b, t]]", shape_hint="x is (B, T, C)"))

    @checker(library=["kernels.embedding_forward"])
    def check_embed(fn):
        rng = case_rng(21)
        run_cases(fn, LOOKUP, [
            Stage("shapes", [(tokens, E)], values=False),
            Stage("hand-checkable case", [(hand_tokens, hand_E)]),
            Stage("random cases", [(random_tokens(rng, V), rng.standard_normal((V, C))) ...]),
        ])

Each case is the tuple of arguments the learner's function is called with; `want`, `mistakes`
and `shape` are functions of those same arguments. A stage runs its cases in order and stops at
the first failure (core.stage names it in the report).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .core import CheckFailed, call, diagnose, expect_arrays, expect_finite, expect_shape, stage


@dataclass(frozen=True)
class Output:
    """One array the learner's function returns, and how it is judged.

    want(*args): the right value (float64); mistakes(*args): [(wrong value or a function giving
    it, hint)], the typical mistakes that `diagnose` names; hint: for a wrong value that matches
    none; shape(*args): the expected shape (want's by default); shape_hint: the hint of a wrong
    shape; finite_hint: when given, NaN or infinity fails first, with this hint.
    """
    name: str
    want: Callable
    mistakes: Callable | None = None
    hint: str | None = None
    shape: Callable | None = None
    shape_hint: str | None = None
    finite_hint: str | None = None
    rtol: float = 1e-6
    atol: float = 1e-9


@dataclass(frozen=True)
class Spec:
    """What an exercise's function returns: one Output, or several (returned as a tuple).

    errors: [(substrings, hint)]: when the function raises and the report's text holds every one
    of `substrings`, `hint` replaces the generic one (e.g. an IndexError at target -100).
    """
    outputs: Sequence[Output]
    errors: Sequence[tuple] = ()

    def __init__(self, *outputs: Output, errors=()):
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "errors", tuple(errors))


@dataclass(frozen=True)
class Case:
    """A case judged by a Spec of its own (another tolerance, another hint) inside a stage."""
    spec: Spec
    args: tuple


@dataclass(frozen=True)
class Stage:
    """A named stage: its cases (argument tuples, or Case), judged by `spec` when given (else by
    run_cases's), on shape only when values=False."""
    name: str
    cases: Sequence = field(default_factory=tuple)
    values: bool = True
    spec: Spec | None = None


def call_hinted(fn, args, errors=()):
    """fn(*args) through core.call, quietly (overflow is the checker's to explain); an error whose
    text matches a row of `errors` gets that row's hint, unless a kernel refused mixed dtypes (core's
    hint says which inputs had which). A row is (match, hint): match a substring, a tuple of them
    (all must appear) or a function of the message; hint a text or a function of the message."""
    try:
        with np.errstate(all="ignore"):
            return call(fn, *args)
    except CheckFailed as e:
        for match, hint in errors if "one dtype" not in e.message else ():
            if _matches(match, e.message):
                raise CheckFailed(e.message, hint(e.message) if callable(hint) else hint) from None
        raise


def _matches(match, message) -> bool:
    if callable(match):
        return match(message)
    return all(s in message for s in ((match,) if isinstance(match, str) else match))


def result_of(fn, *args, errors=()):
    """call_hinted(fn, args, errors), where a None result fails: the `return` is missing."""
    result = call_hinted(fn, args, errors)
    if result is None:
        raise CheckFailed("your function returned None", hint="is the `return` statement missing?")
    return result


def product_errors(hint):
    """The rows of `errors` that give a matrix product of mismatched shapes `hint`."""
    return [(text, hint) for text in ("matmul", "not aligned", "broadcast")] if hint else []


def check_case(fn, spec: Spec, args, values=True):
    """Call fn on one case and judge every output: its shape, then (values=True) its value."""
    raw = call_hinted(fn, args, spec.errors)
    outputs = spec.outputs
    results = [raw] if len(outputs) == 1 else expect_arrays(raw, [o.name for o in outputs], "your function")
    for out, got in zip(outputs, results):
        want = None if out.shape is not None and not values else out.want(*args)
        shape = out.shape(*args) if out.shape is not None else np.shape(want)
        expect_shape(got, shape, what=out.name, hint=out.shape_hint)
        if not values:
            continue
        if out.finite_hint is not None:
            expect_finite(got, what=out.name, hint=out.finite_hint)
        mistakes = out.mistakes(*args) if out.mistakes is not None else []
        diagnose(got, want, mistakes, out.hint, what=out.name, rtol=out.rtol, atol=out.atol)
    return results


def run_cases(fn, spec: Spec, stages: Sequence[Stage]):
    """Every stage in order, every case in it, each judged by check_case."""
    for st in stages:
        with stage(st.name):
            for case in st.cases:
                if isinstance(case, Case):
                    check_case(fn, case.spec, case.args, st.values)
                else:
                    check_case(fn, st.spec or spec, case, st.values)
