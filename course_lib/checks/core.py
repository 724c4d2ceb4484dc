"""The machinery every exercise checker uses.

A checker runs the learner's function through stages (shapes, a small case you
can check by hand, random cases, edge cases) and stops at the first failure with
a hint that names the likely bug. It never crashes: a stub that raises
NotImplementedError gets "not done yet", any other exception a short report.

    @checker()                       # its exercise: the row of course_lib.exercises that names it
    def check_stable_softmax(fn):
        with stage("shapes"):
            y = call(fn, x)
            expect_shape(y, (2, 3))
        with stage("hand-checkable case"):
            expect_close(y, want, hint="is the maximum subtracted before exp?")

A hint that would hand out the answer comes in two tiers, tiered(idea, formula): the idea
at the first failure, the formula from the next failure with the same idea in this
process. A checker's `library` lists course_lib's own versions of its exercise: a
learner's function that calls one fails, and the report names it (see library.py).

Dtypes and numbers: a torch tensor (or another library's array) is refused with a message; a
float32 result for float64 inputs fails even when it is within the tolerance (call() notes
it); a kernel that refuses arrays of two dtypes gets a hint that says which inputs had which;
a float64 result right to about 1e-8 but not to the tolerance gets "a constant is rounded".
"""
import collections
import contextlib
import functools
import inspect
import os
import traceback
import warnings

import numpy as np

from ..exercises import BY_CHECKER
from .library import HandedToLibrary, watched


class NotDone(Exception):
    """The learner's function still raises NotImplementedError."""


class CheckFailed(Exception):
    def __init__(self, message, hint=None):
        super().__init__(message)
        self.message, self.hint = message, hint


class Tiered(str):
    """A hint in two tiers: as a string it is the idea; .formula is the rest of the answer."""

    def __new__(cls, idea, formula):
        hint = super().__new__(cls, idea)
        hint.formula = formula
        return hint


def tiered(idea, formula):
    """A hint that shows `idea` at the first failure and adds `formula` from the next failure
    of the same exercise with the same idea (in this process: a kernel, a test run)."""
    return Tiered(idea, formula)


FORMULA_FROM = 2                        # the failure from which a tiered hint shows its formula
_failures = collections.Counter()       # (exercise, idea) -> failures with that hint so far


def _shown(exercise, hint):
    """The text of `hint` at this failure: a tiered hint's idea, or idea and formula, labelled."""
    if not isinstance(hint, Tiered):
        return hint
    _failures[exercise, str(hint)] += 1
    if _failures[exercise, str(hint)] < FORMULA_FROM:
        return f"{hint} (hint 1 of 2: if this check fails here again, hint 2 gives the formula)"
    return f"{hint}. {hint.formula} (hint 2 of 2)"


LIBRARY_CALL = "library call"   # the status of a function that calls what it should compute


class Result:
    """What a checker found: passed, the stage it stopped at, message and hint; library: the
    course_lib function the learner's function handed the exercise to, or None."""

    def __init__(self, exercise, passed, done=True, stage=None, message="", hint=None, n_stages=0,
                 library=None):
        self.exercise, self.passed, self.done = exercise, passed, done
        self.stage, self.message, self.hint, self.n_stages = stage, message, hint, n_stages
        self.library = library

    def __bool__(self):
        return self.passed

    @property
    def status(self):
        """The grade report's status: passed, failed, not done, or library call."""
        if self.passed:
            return "passed"
        if not self.done:
            return "not done"
        return LIBRARY_CALL if self.library else "failed"

    def __repr__(self):
        state = "passed" if self.passed else ("not done" if not self.done else f"failed at {self.stage!r}")
        if self.library:
            state = f"calls {self.library}"
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


def run_stages(fn, stages):
    """Run test(fn) for each (name, test) of `stages`, in order, each as a named stage."""
    for name, test in stages:
        with stage(name):
            test(fn)


def checker(library=(), exercise=None):
    """Turn a function of the learner's function into a checker that prints a report and returns a Result.

    library: course_lib's own versions of the exercise (paths below course_lib such as
    "kernels.layernorm_backward", or library.Solution): the learner's functions may not call them.
    exercise: its row of course_lib.exercises; by default the row whose checker has this name.
    """
    def wrap(body):
        row = exercise or BY_CHECKER.get(body.__name__)
        if row is None:
            raise LookupError(f"{body.__name__} is no exercise's checker in course_lib.exercises.EXERCISES")

        @functools.wraps(body)
        def run(fn, *args, **kwargs):
            return _run(body, row.name, row.title, fn, args, kwargs, library)
        run.exercise, run.library = row.name, library
        return run
    return wrap


_fresh = {"seed": None, "drawn": 0}


def case_rng(seed):
    """The generator of a checker's random cases: seeded with `seed`, the same in every run, so
    that a notebook prints the same report; within fresh_cases(secret), seeded with the secret
    too (the grader's cases, which no learner's code has seen)."""
    _fresh["drawn"] += 1
    return np.random.default_rng(seed if _fresh["seed"] is None else [_fresh["seed"], seed])


def generators_drawn() -> int:
    """How many case generators case_rng has made in this process (a checker that made none
    has no random cases: fresh_cases would not change what it checks)."""
    return _fresh["drawn"]


@contextlib.contextmanager
def fresh_cases(secret):
    """Random cases drawn from `secret` (a non-negative int) inside: see case_rng."""
    _fresh["seed"] = secret
    try:
        yield
    finally:
        _fresh["seed"] = None


def _run(body, exercise, title, fn, args, kwargs, library=()):
    label = f"{exercise} ({title})"
    _current["stage"], _current["count"], _current["narrowed"] = None, 0, None
    if not callable(fn):
        print(f"✗ {label}: pass your function itself, e.g. {body.__name__}(my_function), "
              f"not {type(fn).__name__}")
        return Result(exercise, False, stage="call", message="not callable")
    if library:     # every function the learner passed in (some checkers take two)
        fn, args = watched(fn, library), [watched(a, library) if callable(a) else a for a in args]
    try:
        body(fn, *args, **kwargs)
    except NotDone:
        print(f"… {label}: not done yet. Replace the `raise NotImplementedError` line in your "
              f"function with your code, run that cell, then this one.")
        return Result(exercise, False, done=False, message="not done yet")
    except CheckFailed as e:
        where = f" [stage: {_current['stage']}]" if _current["stage"] else ""
        hint = _shown(exercise, e.hint)
        print(f"✗ {label}{where}: {e.message}")
        if hint:
            print(f"  Hint: {hint}")
        return Result(exercise, False, stage=_current["stage"], message=e.message, hint=hint)
    except HandedToLibrary as e:
        where = f" [stage: {_current['stage']}]" if _current["stage"] else ""
        print(f"✗ {label}{where}: {e.message}\n  Hint: {e.hint}")
        return Result(exercise, False, stage=_current["stage"], message=e.message, hint=e.hint,
                      library=e.name)
    narrowed = _narrowing_failure()
    if narrowed:
        where, message, hint = narrowed
        print(f"✗ {label}{f' [stage: {where}]' if where else ''}: {message}\n  Hint: {hint}")
        return Result(exercise, False, stage=where, message=message, hint=hint)
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
    names = _argument_names(fn, len(args), kwargs)
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        raise NotDone() from None
    except Exception as e:  # the learner's bug, reported, never a crash of the checker
        frame = _learner_frame(e)
        where = f" (line {frame.lineno}: {frame.line})" if frame.line else ""
        hint = ("run it on a small input by hand and print intermediate shapes"
                if "one dtype" not in str(e) else _mixed_dtype_hint(names, originals))
        raise CheckFailed(f"your function raised {type(e).__name__}: {e}{where}", hint=hint)
    for name, before, after in zip(names, originals, copies):
        if isinstance(before, np.ndarray) and not np.array_equal(before, after, equal_nan=True):
            raise CheckFailed(f"your function changed its input `{name}` in place",
                              hint=f"the caller still needs `{name}` as it was: compute a new array "
                                   f"(`y = {name} - 1`, not `{name} -= 1` or `{name}[...] = ...`), "
                                   f"or start from `{name}.copy()`")
    _note_narrowing(result, originals)
    return result


def _learner_frame(e):
    """The last frame of the traceback in the learner's code (not in course_lib or a library);
    for a function that ran in the grading sandbox, the line it sent (channel.py)."""
    line = getattr(e, "learner_line", None)
    if line is not None:
        return traceback.FrameSummary("<cell>", line[0], "", line=line[1])
    frames = traceback.extract_tb(e.__traceback__)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    own = [f for f in frames if not os.path.abspath(f.filename).startswith(package)
           and "site-packages" not in f.filename]
    return (own or frames)[-1]


def _input_dtypes(names, values):
    """{argument name: set of the float dtypes among its arrays} (a dict argument's values too)."""
    found = {}
    for name, value in zip(names, values):
        parts = value.values() if isinstance(value, dict) else [value]
        dtypes = {str(v.dtype) for v in parts if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
        if dtypes:
            found[name] = dtypes
    return found


# where a float64 array comes from in a float32 computation (a mixed-dtype hint, 10.2's float32 block)
FLOAT64_SOURCES = ("np.zeros(n) and np.array of Python floats are float64 unless you pass dtype= "
                   "(np.zeros_like(x) is not), and a NumPy float64 number such as np.sqrt(D) turns "
                   "a float32 array into float64 (math.sqrt(D) does not)")


def _mixed_dtype_hint(names, values):
    """The hint for a kernel that refused arrays of two dtypes, from the dtypes of the inputs."""
    found = _input_dtypes(names, values)
    every = set().union(*found.values()) if found else set()
    if every == {"float32"}:
        return ("a dtype problem: your inputs are float32, so an array your function made is "
                "float64: " + FLOAT64_SOURCES)
    if every == {"float64"}:
        return ("a dtype problem: your inputs are float64, so an array your function made is "
                "float32: no .astype(np.float32), no dtype=np.float32")
    described = " and ".join(f"{n} {'/'.join(sorted(d))}" for n, d in found.items())
    return (f"a dtype problem: one call mixed float32 and float64 arrays ({described}): "
            f"course_lib's kernels need one dtype, so bring every array to one dtype before "
            f"the call")


def _narrowed(result, where="your result", depth=0):
    """(where, dtype) of the first float16/float32 array in the learner's result, searching
    tuples, lists and dicts; None if there is none."""
    dtype = low_precision(result)
    if dtype is not None:
        return where, dtype
    if depth > 2:
        return None
    if isinstance(result, (tuple, list)):
        items = [(f"returned value {i + 1}" if depth == 0 else f"{where}[{i}]", v)
                 for i, v in enumerate(result[:50])]
    elif isinstance(result, dict):
        items = [(f"{where}[{k!r}]", v) for k, v in list(result.items())[:200]]
    else:
        return None
    for w, v in items:
        found = _narrowed(v, w, depth + 1)
        if found:
            return found
    return None


def _note_narrowing(result, inputs):
    """For float64 inputs every float result must be float64. A float32 one is noted (the first,
    with its stage) and fails the check at the end, even if every comparison passed: a float32
    result right to its 7 digits passes a tolerance of 1e-6, and still loses the digits that
    gradient checks need. A wrong float32 result fails earlier, at its comparison."""
    if _current.get("narrowed"):
        return
    dtypes = set().union(*_input_dtypes(range(len(inputs)), inputs).values()) if inputs else set()
    found = _narrowed(result) if dtypes == {"float64"} else None
    if found:
        _current["narrowed"] = (_current["stage"],) + found


def _narrowing_failure():
    """(stage, message, hint) for a float32 result noted by call(), or None."""
    if not _current.get("narrowed"):
        return None
    where_stage, where, dtype = _current["narrowed"]
    return (where_stage, f"{where} is {dtype}, but the inputs are float64",
            f"a dtype problem, not a formula problem: keep float64 all through (no "
            f"np.zeros(..., dtype=np.{dtype}) accumulator, no .astype(np.{dtype})); {dtype} keeps "
            f"only about {np.finfo(dtype).precision} digits")


def as_array(value, what="your result"):
    """The learner's output as a float array, or a clear failure (never an exception of NumPy's)."""
    if value is None:
        raise CheckFailed(f"{what} is None", hint="did you forget `return`?")
    foreign = foreign_array(value)
    if foreign:
        raise CheckFailed(f"{what} is a {foreign}, but a NumPy array was expected",
                          hint="the course computes with NumPy, and the kernels that take your "
                               "result read NumPy arrays: compute with NumPy"
                               + (", or return t.detach().numpy()" if foreign.startswith("torch")
                                  else ", or return np.asarray(...) of it"))
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
                          f"{short_repr(value)} ({type(value).__name__})") from None
    return arr


def foreign_array(value):
    """'torch.Tensor' (module.type) for an array of another library than NumPy, else None."""
    if isinstance(value, (np.ndarray, np.generic)) or not hasattr(type(value), "__array__"):
        return None
    return f"{type(value).__module__.split('.')[0]}.{type(value).__name__}"


def float_dtype(value):
    """The NumPy float dtype of an array or scalar, or None (for ints, lists, torch tensors...)."""
    if not isinstance(value, (np.ndarray, np.generic)) or value.dtype.kind != "f":
        return None
    return value.dtype


def low_precision(value):
    """The dtype of a float16 or float32 NumPy array or scalar, else None."""
    dtype = float_dtype(value)
    return dtype if dtype is not None and dtype.itemsize < 8 else None


def expect_float64(value, what):
    """A float32 (or float16) result for float64 inputs is named as a dtype problem, even within
    the tolerance: it keeps only about 7 digits, and a float64 check must see every digit."""
    dtype = low_precision(value)
    if dtype is not None:
        raise CheckFailed(f"{what} is {dtype}, but the inputs are float64",
                          hint=f"a dtype problem, not a formula problem: keep float64 all through (no "
                               f".astype(np.{dtype}), no np.zeros(..., dtype=np.{dtype}) accumulator); "
                               f"{dtype} keeps only about {np.finfo(dtype).precision} digits")


def short_repr(value, width=60):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def show_digits(got, want):
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


def expect_close(value, expected, what="your result", hint=None, rtol=1e-6, atol=1e-9,
                 named=False):
    """named: `hint` names a mistake the result reproduces (diagnose); otherwise a result right
    to about 1e-8 gets the rounded-constant hint in its place."""
    arr = as_array(value, what)
    expected = np.asarray(expected, dtype=float)
    if arr.shape != expected.shape:
        raise CheckFailed(f"{what} has shape {arr.shape}, expected {expected.shape}", hint)
    if not np.allclose(arr, expected, rtol=rtol, atol=atol, equal_nan=False):
        bad = np.argwhere(~np.isclose(arr, expected, rtol=rtol, atol=atol))
        idx = tuple(int(i) for i in bad[0])
        got_v, want_v = show_digits(arr[idx], expected[idx])
        dtype_problem = dtype_hint(value, arr, expected)
        kind = f" ({value.dtype})" if dtype_problem else ""
        hint = dtype_problem or (None if named else _rounded_hint(arr, expected)) or hint
        raise CheckFailed(f"{what}{kind} is wrong at index {idx}: got {got_v}, expected {want_v} "
                          f"({len(bad)} of {arr.size} entries differ)", hint)
    return arr


ROUNDED = 3e-8      # relative to the largest entry: see _rounded_hint


def _rounded_hint(arr, expected):
    """A float64 result right to ROUNDED of its largest entry, but not to the checker's
    tolerance: a rounded constant. Formulas in float64 agree to ~1e-15, a constant typed with
    8 or 9 digits (0.79788456 for sqrt(2/pi)) is off by 1e-9 to 1e-8, and every formula mistake
    by far more (float32, ~6e-8 per step, is named by dtype_hint when the result is float32)."""
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    if not (scale > 0 and np.all(np.isfinite(arr))
            and np.allclose(arr, expected, rtol=0.0, atol=ROUNDED * scale)):
        return None
    error = float(np.max(np.abs(arr - expected))) / scale
    return (f"a constant is rounded: your result is right to {error:.0e} of its largest entry, "
            f"far closer than any mistake in the formula, but not to float64's 1e-15. Compute "
            f"constants instead of typing them (np.sqrt(2 / np.pi), not 0.79788456; "
            f"np.log(10000.0), not 9.2103404), or type every digit of a number you were given")


def dtype_hint(value, arr, expected):
    """A float32 (or float16) result that is right to its own precision: name the dtype.

    "Its own precision" allows for the rounding of inputs cast down and of a long sum:
    sqrt(eps) relative (3e-4 in float32), far below the error of any real mistake.
    """
    dtype = low_precision(value)
    if dtype is None:
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
    hint, named = default_hint, False
    for wrong, wrong_hint in mistakes:
        try:
            with np.errstate(all="ignore"):
                candidate = np.asarray(wrong() if callable(wrong) else wrong, dtype=float)
        except Exception:  # a mistake that cannot even be formed for this input
            continue
        if candidate.shape == arr.shape and np.allclose(arr, candidate, rtol=rtol, atol=atol):
            hint, named = wrong_hint, True
            break
    return expect_close(got, expected, what=what, hint=hint, rtol=rtol, atol=atol, named=named)


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


def names_used(code):
    """Every global name a function's code reads, its inner generators and lambdas included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= names_used(const)
    return names


def learner_helpers(fn, names):
    """{name: function} for those of `names` that the learner's fn calls and defines in its notebook
    (read from its code; a function run in the grading sandbox says which it calls: `uses`)."""
    if hasattr(fn, "uses"):
        return {n: fn.uses[n] for n in names if callable(fn.uses.get(n))}
    fn = inspect.unwrap(fn)           # the learner's own function, not a checker's wrapper
    code, found = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    used = names_used(code) if code is not None else set()
    return {n: found[n] for n in names if n in used and callable(found.get(n))}


def check_quietly(fn, check, exercise, own, *helpers):
    """Run another exercise's checker on the learner's helpers without a report of its own."""
    names = " and ".join(n for n, f in own.items() if f in helpers)
    name = getattr(fn, "__name__", "function")
    saved = dict(_current)
    try:
        check.__wrapped__(*helpers)
    except NotDone:
        raise CheckFailed(f"your {name} calls your {names}, which is not done yet",
                          hint=f"finish {exercise} first, then run this check again") from None
    except CheckFailed as e:
        where = f" [stage: {_current['stage']}]" if _current["stage"] else ""
        raise CheckFailed(f"your {name} calls your {names}, and the check of {exercise} "
                          f"fails{where}: {e.message}",
                          hint=f"fix {exercise} first, then run this check again"
                               + (f": {e.hint}" if e.hint else "")) from None
    finally:
        _current.update(saved)       # this checker's stage and count, as they were
