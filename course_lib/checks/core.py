"""The machinery every exercise checker uses.

A checker runs the learner's function through stages (shapes, a small case you
can check by hand, random cases, edge cases) and stops at the first failure with
a hint that names the likely bug. It never crashes: a stub that raises
NotImplementedError gets "not done yet", any other exception a short report.

    @checker("Exercise 3.1", "stable softmax")
    def check_softmax(fn):
        with stage("shapes"):
            y = call(fn, x)
            expect_shape(y, (2, 3))
        with stage("hand-checkable case"):
            expect_close(y, want, hint="is the maximum subtracted before exp?")
"""
import contextlib
import functools
import inspect
import json
import os
import traceback
import warnings

import numpy as np


class NotDone(Exception):
    """The learner's function still raises NotImplementedError."""


class CheckFailed(Exception):
    def __init__(self, message, hint=None):
        super().__init__(message)
        self.message, self.hint = message, hint


class Result:
    """What a checker found: passed, the stage it stopped at, message and hint."""

    def __init__(self, exercise, passed, done=True, stage=None, message="", hint=None, n_stages=0):
        self.exercise, self.passed, self.done = exercise, passed, done
        self.stage, self.message, self.hint, self.n_stages = stage, message, hint, n_stages

    def __bool__(self):
        return self.passed

    def __repr__(self):
        state = "passed" if self.passed else ("not done" if not self.done else f"failed at {self.stage!r}")
        return f"<{self.exercise}: {state}>"

    def _ipython_display_(self):
        """The checker already printed its report: show nothing more in a notebook."""


_current = {"stage": None, "count": 0}


@contextlib.contextmanager
def stage(name):
    """Name the stage the checks inside belong to (for the report)."""
    _current["stage"] = name
    _current["count"] += 1
    yield


RESULTS_ENV = "COURSE_LIB_RESULTS"


def _record(result, title):
    """Append the result as a JSON line to the file named by $COURSE_LIB_RESULTS, if set.

    The grader (`python -m course_lib grade`) sets it for each notebook it runs, so that
    grades come from the checkers themselves, not from printed text.
    """
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    status = "passed" if result.passed else ("not done" if not result.done else "failed")
    line = {"exercise": result.exercise, "title": title, "status": status, "stage": result.stage,
            "message": result.message, "hint": result.hint}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def run_stages(fn, stages):
    """Run test(fn) for each (name, test) of `stages`, in order, each as a named stage."""
    for name, test in stages:
        with stage(name):
            test(fn)


def checker(exercise, title):
    """Turn a function of the learner's function into a checker that prints a report and returns a Result."""
    def wrap(body):
        @functools.wraps(body)
        def run(fn, *args, **kwargs):
            result = _run(body, exercise, title, fn, args, kwargs)
            _record(result, title)
            return result
        return run
    return wrap


def _run(body, exercise, title, fn, args, kwargs):
    label = f"{exercise} ({title})"
    _current["stage"], _current["count"] = None, 0
    if not callable(fn):
        print(f"✗ {label}: pass your function itself, e.g. {body.__name__}(my_function), "
              f"not {type(fn).__name__}")
        return Result(exercise, False, stage="call", message="not callable")
    try:
        body(fn, *args, **kwargs)
    except NotDone:
        print(f"… {label}: not done yet. Replace the `raise NotImplementedError` line in your "
              f"function with your code, run that cell, then this one.")
        return Result(exercise, False, done=False, message="not done yet")
    except CheckFailed as e:
        where = f" [stage: {_current['stage']}]" if _current["stage"] else ""
        print(f"✗ {label}{where}: {e.message}")
        if e.hint:
            print(f"  Hint: {e.hint}")
        return Result(exercise, False, stage=_current["stage"], message=e.message, hint=e.hint)
    print(f"✓ {label}: all {_current['count']} stages passed.")
    return Result(exercise, True, n_stages=_current["count"])


def _argument_names(fn, n_args, kwargs):
    """Names of the learner's parameters for the positional and keyword arguments of a call."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else f"argument {i + 1}" for i in range(n_args)]
    return names + list(kwargs)


def call(fn, *args, **kwargs):
    """Call the learner's function on copies of the arguments; turn its exceptions into reports.

    An array argument that the function changes in place fails the check, naming the argument:
    the caller's data would change under it (the model's activations, the optimiser's state).
    """
    originals = list(args) + list(kwargs.values())
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in originals]
    args, kwargs = copies[:len(args)], dict(zip(kwargs, copies[len(args):]))
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotDone() from None
    except Exception as e:  # the learner's bug, reported, never a crash of the checker
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = f" (line {frame.lineno}: {frame.line})" if frame.line else ""
        raise CheckFailed(f"your function raised {type(e).__name__}: {e}{where}",
                          hint="run it on a small input by hand and print intermediate shapes")
    for name, before, after in zip(_argument_names(fn, len(args), kwargs), originals, copies):
        if isinstance(before, np.ndarray) and not np.array_equal(before, after, equal_nan=True):
            raise CheckFailed(f"your function changed its input `{name}` in place",
                              hint=f"the caller still needs `{name}` as it was: compute a new array "
                                   f"(`y = {name} - 1`, not `{name} -= 1` or `{name}[...] = ...`), "
                                   f"or start from `{name}.copy()`")
    return result


def as_array(value, what="your result"):
    """The learner's output as a float array, or a clear failure (never an exception of NumPy's)."""
    if value is None:
        raise CheckFailed(f"{what} is None", hint="did you forget `return`?")
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        raise CheckFailed(f"{what} is a {type(value).__name__} of arrays, but one array was expected")
    try:
        if np.iscomplexobj(value):
            raise CheckFailed(f"{what} is complex ({np.asarray(value).dtype}), but real numbers were "
                              f"expected", hint="take the real part (`.real`) of a complex intermediate")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. an int too large for a float: refuse, do not round
            arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError, RuntimeWarning):  # ragged lists, strings, huge ints
        raise CheckFailed(f"{what} should be a NumPy array of numbers, got "
                          f"{_short(value)} ({type(value).__name__})") from None
    return arr


def _short(value, width=60):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _digits(got, want):
    """got and want as text with just enough significant digits to tell them apart."""
    got, want = float(got), float(want)
    for n in range(4, 18):
        a, b = f"{got:.{n}g}", f"{want:.{n}g}"
        if a != b:
            return a, b
    return a, b


def expect_arrays(result, names, what):
    """The learner's tuple of arrays (e.g. `return dx, dW, db`) as a list, or a clear failure.

    Float arrays are returned as they are: their dtype is part of the diagnosis."""
    n = len(names)
    if not isinstance(result, (tuple, list)) or len(result) != n:
        got = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list))
                                       else "")
        raise CheckFailed(f"{what} should return {n} arrays ({', '.join(names)}), got {got}",
                          hint=f"end your function with `return {', '.join(names)}`")
    arrays = [as_array(r, name) for r, name in zip(result, names)]
    return [r if isinstance(r, np.ndarray) and r.dtype.kind == "f" else a for r, a in zip(result, arrays)]


def expect_shape(value, shape, what="your result", hint=None):
    arr = as_array(value, what)
    if arr.shape != tuple(shape):
        raise CheckFailed(f"{what} has shape {arr.shape}, expected {tuple(shape)}", hint)
    return arr


def expect_finite(value, what="your result", hint=None):
    arr = as_array(value, what)
    if not np.all(np.isfinite(arr)):
        raise CheckFailed(f"{what} contains NaN or infinity", hint)
    return arr


def expect_close(value, expected, what="your result", hint=None, rtol=1e-6, atol=1e-9):
    arr = as_array(value, what)
    expected = np.asarray(expected, dtype=float)
    if arr.shape != expected.shape:
        raise CheckFailed(f"{what} has shape {arr.shape}, expected {expected.shape}", hint)
    if not np.allclose(arr, expected, rtol=rtol, atol=atol, equal_nan=False):
        bad = np.argwhere(~np.isclose(arr, expected, rtol=rtol, atol=atol))
        idx = tuple(int(i) for i in bad[0])
        got_v, want_v = _digits(arr[idx], expected[idx])
        dtype_hint = _dtype_hint(value, arr, expected)
        kind = f" ({value.dtype})" if dtype_hint else ""
        raise CheckFailed(f"{what}{kind} is wrong at index {idx}: got {got_v}, expected {want_v} "
                          f"({len(bad)} of {arr.size} entries differ)", dtype_hint or hint)
    return arr


def _dtype_hint(value, arr, expected):
    """A float32 (or float16) result that is right to its own precision: name the dtype.

    "Its own precision" allows for the rounding of inputs cast down and of a long sum:
    sqrt(eps) relative (3e-4 in float32), far below the error of any real mistake.
    """
    dtype = getattr(value, "dtype", None)
    if dtype is None or dtype.kind != "f" or dtype.itemsize >= 8:
        return None
    tol = float(np.sqrt(np.finfo(dtype).eps))
    scale = np.max(np.abs(expected)) if expected.size else 0.0
    if np.allclose(arr, expected, rtol=tol, atol=tol * scale):
        return (f"a dtype problem, not a formula problem: your result is {dtype}, right to its "
                f"precision, but float64 is expected. {dtype} keeps only about "
                f"{np.finfo(dtype).precision} digits: no np.zeros(..., dtype=np.{dtype}) accumulator, "
                f"no .astype(np.{dtype})")
    return None


def diagnose(got, expected, mistakes, default_hint, what="your result", rtol=1e-6, atol=1e-9):
    """Pass when got matches expected; else fail with the hint of the first known mistake
    that `got` reproduces, or `default_hint` when it matches none.

    mistakes: list of (wrong array, or a callable giving it, hint). Returns `got` as an array.
    """
    arr = as_array(got, what)
    expected = np.asarray(expected, dtype=float)
    if arr.shape == expected.shape and np.allclose(arr, expected, rtol=rtol, atol=atol):
        return arr
    hint = default_hint
    for wrong, wrong_hint in mistakes:
        try:
            with np.errstate(all="ignore"):
                candidate = np.asarray(wrong() if callable(wrong) else wrong, dtype=float)
        except Exception:  # a mistake that cannot even be formed for this input
            continue
        if candidate.shape == arr.shape and np.allclose(arr, candidate, rtol=rtol, atol=atol):
            hint = wrong_hint
            break
    return expect_close(got, expected, what=what, hint=hint, rtol=rtol, atol=atol)


def expect_value_error(fn, args, call_text, raised_hint, returned_hint, passthrough=()):
    """The learner's fn(*args) must raise ValueError; returning or raising anything else fails.

    call_text names the call in the report, e.g. "my_answer('Sum', (1, 2, 3))"; exceptions of the
    types in passthrough are re-raised for the caller to report.
    """
    try:
        got = fn(*args)
    except ValueError:
        return
    except NotImplementedError:
        raise NotDone() from None
    except passthrough:
        raise
    except Exception as e:
        raise CheckFailed(f"{call_text} raised {type(e).__name__}: {e}, but ValueError was expected",
                          raised_hint) from None
    raise CheckFailed(f"{call_text} returned {got!r} instead of raising ValueError", returned_hint)
