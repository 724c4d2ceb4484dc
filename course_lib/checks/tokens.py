"""Checkers for notebook 01, tokens and the task.

    check_encode(my_encode)                    Exercise 1.1: text -> token ids, by hand
    check_answer(my_answer)                    Exercise 1.2: the answer rule of the five operations
    check_central_difference(central_difference)   Exercise 1.4: f'(x) ~ (f(x+h) - f(x-h)) / (2h)
    check_numerical_gradient(numerical_gradient)   Exercise 1.5: central differences, entry by
                                               entry, of a scalar f() that reads the array x

Expected values come from course_lib.task (encode, answer) or from exact derivatives
written here, never from the learner's function.
"""
import inspect
import math
import numbers

import numpy as np

from .. import task
from .core import (case_rng, CheckFailed, as_array, call, checker, diagnose, expect_close, short_repr, show_digits,
                   expect_value_error, foreign_array, low_precision, run_stages, stage)
from .library import Solution

__all__ = ["check_encode", "check_answer", "check_central_difference", "check_numerical_gradient"]


# ---------------------------------------------------------------- helpers ---
def _is_int(v):
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))


def _id_list(value, text):
    """The learner's encoding as a list of Python ints, or a clear failure."""
    what = f"my_encode({text!r})"
    if isinstance(value, (str, bytes)):
        raise CheckFailed(f"{what} returned the string {value!r}, but a list of token ids was expected",
                          hint="return a list of ints such as [15, 17, 3, ...], one id per token")
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise CheckFailed(f"{what} returned an array of shape {value.shape}, but a flat list of ids "
                              f"was expected", hint="return one id per token, in a 1-D list")
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise CheckFailed(f"{what} returned {type(value).__name__}, but a list of token ids was expected",
                          hint="collect the ids in a list and return it (did you forget `return`?)")
    bad = [v for v in value if not _is_int(v)]
    if bad:
        hint = ("map each piece to its id, its position in cl.task.VOCAB"
                if isinstance(bad[0], str) else "token ids are whole numbers from 0 to 19")
        raise CheckFailed(f"{what} contains {bad[0]!r} ({type(bad[0]).__name__}), but every entry "
                          f"must be an int token id", hint=hint)
    return [int(v) for v in value]


WHOLE = ("an operation name such as 'Max' is ONE token: at each position, find the vocabulary entry "
         "the text starts with (str.startswith(piece, pos)), not single characters")


def _encode_hint(got, want, text):
    """Name the likely bug behind a wrong encoding."""
    digit_ids = set(range(2, 12))
    if len(got) == len(want):
        pairs = [(g, w) for g, w in zip(got, want) if g != w]
        if pairs and all(w in digit_ids and g == w - 2 for g, w in pairs):
            return "digit d has id d + 2: ids 0 and 1 are [PAD] and [EOS]"
        if pairs and all(w in digit_ids for g, w in pairs):
            return "check the ids of the digits: '0' is id 2, '9' is id 11"
        if pairs and all(w >= 12 for g, w in pairs):
            return "operation names and brackets: First=12, Second=13, Last=14, Max=15, Min=16, (=17, )=18, ,=19"
        return "look each piece up in cl.task.VOCAB: its position is its id"
    if " " in text:
        return "spaces are not tokens: drop them before (or while) splitting"
    if len(got) > len(want):
        return WHOLE
    return "every piece of the text must give one id: did a piece get skipped?"


# the library's own versions of these exercises (see library.py)
_ENCODE = Solution("task.encode", message="your function calls cl.task.encode: this exercise "
                   "asks you to write the tokenizer yourself",
                   hint="use cl.task.VOCAB to find each piece's id")
_ANSWER = Solution("task.answer", message="your function calls cl.task.answer: write the rule "
                   "yourself", hint="compare op with the five names and return digits[0], "
                   "digits[1], ... or max/min")
_GRADIENT_FOR_DERIVATIVE = Solution("gradcheck.numerical_gradient",
                                    what="whose central differences this exercise asks you to write")


def _call_encode(fn, text, hint):
    """fn(text); a KeyError or ValueError (a piece it could not look up) gets this stage's hint."""
    try:
        return call(fn, text)
    except CheckFailed as e:
        lookup_failed = e.message.startswith(("your function raised KeyError", "your function raised ValueError"))
        raise CheckFailed(f"my_encode({text!r}): {e.message}", hint if lookup_failed else e.hint) from None


# ------------------------------------------------------------ Exercise 1.1 ---
@checker(library=[_ENCODE])
def check_encode(fn):
    """my_encode(text) -> list of ids, as cl.task.encode, written without it."""
    example = "Max(1,6,2)"
    ops = [f"{op}({a},{b},{c})" for op, (a, b, c) in
           zip(task.OPERATIONS, [(0, 9, 5), (3, 1, 4), (2, 7, 1), (8, 8, 3), (6, 0, 0)])]
    rng = case_rng(1101)     # and problems at random (new ones in the grader's fresh cases)
    ops += [f"{task.OPERATIONS[i]}({a},{b},{c})" for i, (a, b, c) in
            zip(rng.integers(0, len(task.OPERATIONS), 5), rng.integers(0, 10, (5, 3)))]
    spaced = ["Min( 3, 3 ,7 )", " First (0,0,0)", "Last(9, 8, 7) ", "M a x(1,6,2)"]
    special = ["[EOS]", "[PAD][PAD]", "Max(1,6,2)[EOS]", "Second(4,4,4)[PAD]", ""]
    unknown = ["Sum(1,2,3)", "max(1,6,2)", "Max(1;6;2)", "Max(1,6,2)!"]
    want = {t: task.encode(t) for t in [example] + ops + spaced + special}

    with stage("the example Max(1,6,2)"):
        got = _id_list(_call_encode(fn, example, WHOLE), example)
        if got != want[example]:
            raise CheckFailed(f"my_encode({example!r}) = {got}, expected {want[example]}",
                              _encode_hint(got, want[example], example))

    with stage("all five operations"):
        for text in ops:
            got = _id_list(_call_encode(fn, text, WHOLE), text)
            if got != want[text]:
                raise CheckFailed(f"my_encode({text!r}) = {got}, expected {want[text]}",
                                  _encode_hint(got, want[text], text))

    with stage("spaces are ignored"):
        hint = "spaces are not tokens: remove them, e.g. text.replace(' ', '')"
        for text in spaced:
            got = _id_list(_call_encode(fn, text, hint), text)
            if got != want[text]:
                raise CheckFailed(f"my_encode({text!r}) = {got}, expected {want[text]}", hint)

    with stage("[PAD], [EOS] and the empty text"):
        hint = ("[PAD] (id 0) and [EOS] (id 1) are vocabulary entries too, matched whole like 'Max'; "
                "the empty text has no tokens: []")
        for text in special:
            got = _id_list(_call_encode(fn, text, hint), text)
            if got != want[text]:
                raise CheckFailed(f"my_encode({text!r}) = {got}, expected {want[text]}", hint)

    with stage("unknown text raises ValueError"):
        for text in unknown:
            expect_value_error(
                fn, (text,), f"my_encode({text!r})",
                raised_hint="a dict lookup of an unknown piece raises KeyError: catch that case and "
                            "raise ValueError('unknown text ...') yourself",
                returned_hint="text that matches no vocabulary entry (text is case-sensitive) must "
                              "raise ValueError, not be skipped")


# ------------------------------------------------------------ Exercise 1.2 ---
_OP_HINTS = {
    "First": "First is the first digit, digits[0]",
    "Second": "Second is the middle digit, digits[1]",
    "Last": "Last is the third digit, digits[2] (or digits[-1])",
    "Max": "Max is the largest of all THREE digits, max(a, b, c)",
    "Min": "Min is the smallest of all THREE digits, min(a, b, c)",
}


def _digit(value, op, digits):
    what = f"my_answer({op!r}, {tuple(int(d) for d in digits)})"
    if isinstance(value, str):
        raise CheckFailed(f"{what} returned the text {value!r}, but a digit (int) was expected",
                          hint="return the digit as a number, e.g. 6, not '6'")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if value is None:
        raise CheckFailed(f"{what} returned None, but an int from 0 to 9 was expected",
                          hint="did you forget `return`?")
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        raise CheckFailed(f"{what} returned {value!r}, a {type(value).__name__}, but an int was "
                          f"expected", hint="return an int: 6, not 6.0 (a value that went through "
                          "a float, e.g. np.mean or /, needs int(...))")
    if not _is_int(value):
        raise CheckFailed(f"{what} returned {short_repr(value)} ({type(value).__name__}), but an int "
                          f"from 0 to 9 was expected", hint="return one digit, as an int")
    if abs(int(value)) > 10 ** 6:
        raise CheckFailed(f"{what} returned an int of {len(str(abs(int(value))))} digits, but a "
                          f"digit from 0 to 9 was expected", hint="return one of the three digits, "
                                                                  "or their max or min")
    return int(value)


def _expected(cases):
    """(op, digits, answer) from cl.task.answer, computed before the learner's function runs."""
    return [(op, digits, task.answer(op, tuple(int(d) for d in digits))) for op, digits in cases]


def _check_answers(fn, expected):
    for op, digits, want in expected:
        got = _digit(call(fn, op, digits), op, digits)
        if got != want:
            hint = _OP_HINTS[op]
            if got == want + 2 and got not in [int(d) for d in digits]:
                hint = f"return the digit itself, not its token id ({want + 2} is the id of '{want}')"
            raise CheckFailed(f"my_answer({op!r}, {tuple(int(d) for d in digits)}) = {got}, expected {want}",
                              hint)


@checker(library=[_ANSWER])
def check_answer(fn):
    """my_answer(op, digits) -> the answer digit of op over three digits, written without
    cl.task.answer (which computes the expected values)."""
    example = _expected([("Max", (1, 6, 2))])
    one_each = _expected([(op, (3, 8, 4)) for op in task.OPERATIONS])
    every = _expected(task.all_problems())
    containers = _expected([("Min", [4, 2, 8]), ("Last", np.array([4, 2, 8])),
                            ("Max", np.array([4, 9, 8]))])

    with stage("the example Max(1,6,2)"):
        _check_answers(fn, example)

    with stage("one case per operation"):
        _check_answers(fn, one_each)

    with stage("all 5,000 problems"):
        _check_answers(fn, every)

    with stage("digits as a list or an array"):
        _check_answers(fn, containers)

    with stage("an unknown operation raises ValueError"):
        for op in ("Sum", "max"):
            expect_value_error(
                fn, (op, (1, 2, 3)), f"my_answer({op!r}, (1, 2, 3))",
                raised_hint="check `op` against the five names first and raise "
                            "ValueError('unknown operation ...') yourself",
                returned_hint="an `else:` branch that returns a digit hides typos in the "
                              "operation name: raise ValueError for anything but the five "
                              "operations")


# ------------------------------------------------------------ Exercise 1.4 ---
def _number(value, what):
    """The learner's derivative as a Python float, or a clear failure (never an exception)."""
    if value is None:
        raise CheckFailed(f"{what} returned None, but one number was expected",
                          hint="did you forget `return`?")
    if isinstance(value, (tuple, list)):
        raise CheckFailed(f"{what} returned a {type(value).__name__}, but one number was expected",
                          hint="return the single number (f(x + h) - f(x - h)) / (2 * h)")
    if isinstance(value, (str, bytes)):
        raise CheckFailed(f"{what} returned the {type(value).__name__} {short_repr(value)}, but a number "
                          f"was expected", hint="return the number itself, not text")
    if isinstance(value, (bool, np.bool_)):
        raise CheckFailed(f"{what} returned {value!r}, but a number was expected",
                          hint="return the estimate itself, not a comparison")
    foreign = foreign_array(value)
    if foreign:
        raise CheckFailed(f"{what} returned a {foreign}, but one number was expected",
                          hint="compute with Python floats or NumPy and return a number (float(t) "
                               "of a one-element torch tensor t)")
    if np.iscomplexobj(value):
        raise CheckFailed(f"{what} returned a complex number ({short_repr(value)}), but a real number "
                          f"was expected", hint="a complex intermediate (a complex step?) needs `.real` "
                                                "on the result; here use real steps x + h and x - h")
    if isinstance(value, numbers.Integral) and abs(value) > 2 ** 63:
        raise CheckFailed(f"{what} returned an int of {len(str(abs(value)))} digits, but a "
                          f"derivative of size about 1 was expected",
                          hint="an int this large comes from integer arithmetic: compute with "
                               "floats, (f(x + h) - f(x - h)) / (2 * h)")
    try:
        arr = as_array(value, what)
    except CheckFailed as e:
        raise CheckFailed(f"{what} returned {short_repr(value)} ({type(value).__name__}), but one "
                          f"number was expected", hint=e.hint or "return one float") from None
    if arr.size != 1:
        raise CheckFailed(f"{what} returned an array of shape {arr.shape}, but one number was expected",
                          hint="x is a single number here: f(x + h) and f(x - h) are numbers too")
    dtype = low_precision(value)
    if dtype is not None:
        raise CheckFailed(f"{what} returned a {dtype} number, but a float64 one was expected",
                          hint=F32_HINT)
    out = float(arr.reshape(()))
    if not math.isfinite(out):
        raise CheckFailed(f"{what} returned {out}", hint="is the step h zero, or is h used in the denominator?")
    return out


F32_HINT = ("float32 keeps about 7 digits, which rounds away most of f(x + h) - f(x - h) at "
            "h = 1e-5: compute and return in float64 (no np.float32, no dtype=np.float32)")


def _default_step(run):
    """The step h a function uses when none is passed, read from where it evaluates f.

    run(f) calls the learner's function with the probe f (a function of a number, or of
    nothing when an array is perturbed: `run` then makes f read that array). None if unknown.
    """
    seen = []

    def record(value):
        seen.append(float(np.asarray(value, dtype=float).reshape(-1)[0]))
        return float(np.sum(np.asarray(value, dtype=float)))

    try:
        run(record)
    except CheckFailed:
        return None
    return (max(seen) - min(seen)) / 2 if len(seen) >= 2 else None


def _step_hint(h):
    """Why a default step other than 1e-5 is wrong."""
    if h < 1e-5:
        return (f"the step is too small: round-off in f(x + h) - f(x - h), about eps*|f|/h = "
                f"{2.2e-16 / h:.0e} relative, outweighs what a smaller step gains; make h=1e-5 "
                f"the default")
    return (f"the step is too large: the truncation error h^2 |f'''| / 6 is about {h * h / 6:.0e}; "
            f"make h=1e-5 the default")


def _diagnose(got, f, x, h, want):
    """Name the formula the learner probably used, from its value on a case with a large step."""
    candidates = [
        ((f(x + h) - f(x)) / h, "this is the forward difference (f(x + h) - f(x)) / h, error O(h): "
                                "use both sides, (f(x + h) - f(x - h)) / (2h)"),
        ((f(x) - f(x - h)) / h, "this is the backward difference (f(x) - f(x - h)) / h, error O(h): "
                                "use both sides, (f(x + h) - f(x - h)) / (2h)"),
        (2 * want, "the two points x - h and x + h are 2h apart: divide by 2h, not h"),
        (want / 2, "(f(x + h) - f(x - h)) spans 2h: divide by 2h, not 4h"),
        (want * h * h, "operator precedence: `/ 2 * h` multiplies by h; write `/ (2 * h)`"),
    ]
    for value, hint in candidates:
        if abs(got - value) <= 1e-9 * max(1.0, abs(value)):
            return hint
    return "the central difference is (f(x + h) - f(x - h)) / (2 * h), with the h you are given"


def _exact_on_quadratics(fn):
    def quad(x):
        return 3.0 * x * x - 2.0 * x + 1.0
    for x, h in ((2.0, 0.5), (-1.0, 0.25)):
        want = 6.0 * x - 2.0
        got = _number(call(fn, quad, x, h=h), f"central_difference(f, {x}, h={h})")
        if abs(got - want) > 1e-9 * max(1.0, abs(want)):
            raise CheckFailed(f"for f(x) = 3x^2 - 2x + 1 at x = {x} with h = {h} you got {got:.6g}, "
                              f"expected f'(x) = {want:g} exactly (a central difference is exact for "
                              f"quadratics)", _diagnose(got, quad, x, h, want))


def _cubic_error_term(fn):
    def cube(x):
        return x ** 3
    for h in (0.1, 0.2):
        want = 3.0 + h * h   # 3x^2 + h^2 f'''(x)/6 at x = 1, exactly
        got = _number(call(fn, cube, 1.0, h=h), f"central_difference(f, 1.0, h={h})")
        if abs(got - want) > 1e-12 * want:
            if abs(got - want) <= 2e-7 * want:      # right to float32's 7 digits only
                hint = F32_HINT
            elif abs(got - 3.0) < 1e-6:
                hint = "use the step h passed in (h=...), not a fixed value"
            else:
                hint = _diagnose(got, cube, 1.0, h, 3.0)
            raise CheckFailed(f"for f(x) = x^3 at x = 1 with h = {h} you got {got:.10g}, expected "
                              f"3 + h^2 = {want:.10g}", hint)


def _accurate_on_sin_and_exp(fn):
    rng = case_rng(1401)     # two points of each at random (new ones in the grader's fresh cases)
    cases = ([(np.sin, np.cos, x) for x in (1.0, 2.5, -0.7, *rng.uniform(-3, 3, 2).round(4))] +
             [(np.exp, np.exp, x) for x in (0.5, 3.0, -2.0, *rng.uniform(-2, 2, 2).round(4))])
    for f, df, x in cases:
        want = float(df(x))
        got = _number(call(fn, f, x), f"central_difference(np.{f.__name__}, {x})")
        if abs(got - want) > 1e-8 * max(1.0, abs(want)):
            raise CheckFailed(f"central_difference(np.{f.__name__}, {x}) = {got:.12g}, expected "
                              f"{want:.12g} (error {abs(got - want):.1e}, should be below 1e-8)",
                              hint="make h=1e-5 the default step: a larger h leaves truncation error, "
                                   "a much smaller one loses digits to round-off")


def _error_shrinks_like_h_squared(fn):
    x = 0.5
    errs = []
    for h in (1e-1, 1e-2):
        got = _number(call(fn, np.exp, x, h=h), f"central_difference(np.exp, {x}, h={h})")
        errs.append(abs(got - math.exp(x)))
    ratio = errs[0] / max(errs[1], 1e-300)
    if not 50.0 < ratio < 200.0:
        raise CheckFailed(f"dividing h by 10 divided the error by {ratio:.3g}, expected about 100 "
                          f"(error O(h^2))",
                          hint="an error that falls by about 10 is a one-sided (forward/backward) "
                               "difference: use f(x + h) and f(x - h)")


def _constant_linear_and_integer_x(fn):
    got = _number(call(fn, lambda x: 4.0, 1.5), "central_difference(lambda x: 4.0, 1.5)")
    if got != 0.0:
        raise CheckFailed(f"the derivative of a constant came out as {got!r}, expected 0.0",
                          hint="both evaluations of f give the same value: their difference is 0")
    got = _number(call(fn, lambda x: 7.0 * x - 3.0, 2, h=1e-5),
                  "central_difference(lambda x: 7x - 3, 2, h=1e-5)")
    if abs(got - 7.0) > 1e-8:
        raise CheckFailed(f"the derivative of 7x - 3 at the integer x = 2 came out as {got!r}, expected 7",
                          hint="x may be an int: x + h and x - h must still be floats")


def _returns_one_number(fn):
    _number(call(fn, np.sin, 1.0), "central_difference(np.sin, 1.0)")


def _central_default_step(fn):
    h = _default_step(lambda f: call(fn, f, 1.0))
    if h is not None and abs(math.log10(max(h, 1e-300) / 1e-5)) > 0.01:
        raise CheckFailed(f"called without h, your function evaluates f at points {2 * h:.3g} "
                          f"apart, so its step is {h:.3g}, not 1e-5", _step_hint(h))


@checker(library=[_GRADIENT_FOR_DERIVATIVE])
def check_central_difference(fn):
    """central_difference(f, x, h=1e-5) -> (f(x + h) - f(x - h)) / (2h)."""
    run_stages(fn, [("returns one number", _returns_one_number),
                    ("a quadratic is exact, even with a large step", _exact_on_quadratics),
                    ("a cubic: error h^2 f'''/6, with the h you are given", _cubic_error_term),
                    ("the default step h = 1e-5", _central_default_step),
                    ("accuracy on sin and exp with the default h", _accurate_on_sin_and_exp),
                    ("the error shrinks like h^2", _error_shrinks_like_h_squared),
                    ("edge cases: constant and linear functions, integer x", _constant_linear_and_integer_x)])


# ------------------------------------------------------------ Exercise 1.5 ---
def _input_name(fn, position=1, default="x"):
    try:
        params = [p for p in inspect.signature(fn).parameters]
    except (TypeError, ValueError):
        return default
    return params[position] if len(params) > position else default


def _call_gradient(fn, f, x, **kwargs):
    """fn(f, x) on the very array x that f reads (no copy: fn must perturb it in place);
    afterwards x must hold exactly its old values."""
    saved = x.copy()
    got = call(lambda: fn(f, x, **kwargs))
    if not np.array_equal(x, saved):
        name = _input_name(fn)
        diff = np.abs(x - saved)
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), x.shape))
        now, was = show_digits(x[idx], saved[idx])
        if diff.max() <= 1e-9 * max(1.0, float(np.abs(saved).max())):
            hint = (f"{name}[i] + h - h is not always {name}[i] in floating point: save "
                    f"old = {name}[i] first and assign it back with {name}[i] = old")
        else:
            hint = (f"after evaluating f at {name}[i] + h and {name}[i] - h, set {name}[i] back to "
                    f"its old value: the caller (a model's parameters) still needs `{name}`")
        raise CheckFailed(f"your function changed its input `{name}` and did not restore it: "
                          f"{name}{list(idx)} is {now}, it was {was}", hint)
    return got


def _gradient_array(got, x, what):
    """The learner's gradient as a float array shaped like x, or a clear failure."""
    dtype = low_precision(got)
    if isinstance(got, np.ndarray) and dtype is not None:
        raise CheckFailed(f"{what} is {dtype}, but gradient checks need float64",
                          hint=f"{dtype} keeps about 7 digits, and rounds away the differences "
                               f"f(x + h) - f(x - h) this check measures: make the result with "
                               f"np.zeros_like(x) (float64 like x), not dtype={dtype}")
    arr = as_array(got, what)
    if arr.shape != x.shape:
        if arr.size == x.size:
            hint = "return the gradient in the shape of x (np.zeros_like(x) to start from)"
        elif arr.ndim == 0:
            hint = "the gradient has one entry per entry of x, not one number in all"
        else:
            hint = ("one partial derivative per entry of x: fill an array made with "
                    "np.zeros_like(x)")
        raise CheckFailed(f"{what} has shape {arr.shape}, but x has shape {x.shape}", hint)
    return arr


def _formula_mistakes(want, h, atol=1e-9):
    """Wrong central-difference formulas, as (wrong gradient, hint) for diagnose. The
    precedence mistake is left out when h*h*want is too small to tell from zero."""
    mistakes = [
        (2 * want, "x[i] - h and x[i] + h are 2h apart: divide by 2h, not h"),
        (want / 2, "f(x + h) - f(x - h) spans 2h: divide by 2h, not 4h"),
    ]
    if h * h * float(np.max(np.abs(want))) > atol:
        mistakes.append((want * h * h, "operator precedence: `/ 2 * h` multiplies by h; "
                                       "write `/ (2 * h)`"))
    return mistakes


ZEROS = ("your gradient is all zeros: f() reads x itself, so move the entries of x in place, "
         "not a copy")


def _not_all_zero(arr, want, what):
    if not np.any(arr) and np.any(want):
        raise CheckFailed(f"{what} is all zeros, but the gradient is not", ZEROS)


ROWS_SIZE = ("x.size is not len(x) for a 2-D x: loop over np.ndindex(x.shape), or over a flat "
             "view x.reshape(-1)")


ROWS = ("x has two axes here: x[i] is a whole row. Perturb one entry at a time, e.g. "
        "`for idx in np.ndindex(x.shape):` and x[idx]")


def _gradient_of_linear(fn):
    x = np.array([0.5, -1.0, 2.0])
    w = np.array([3.0, -2.0, 0.25])
    got = _call_gradient(fn, lambda: float(np.sum(w * x)), x)
    arr = _gradient_array(got, x, "numerical_gradient(f, x) for x of shape (3,)")
    _not_all_zero(arr, w, "numerical_gradient(f, x) for f = sum(w * x)")
    diagnose(arr, w, _formula_mistakes(w, 1e-5, atol=1e-12),
             "entry i is (f() at x[i] + h minus f() at x[i] - h) / (2h), with only x[i] "
             "changed", what="the gradient of f = sum(w * x), which is w,", atol=1e-12)


def _gradient_by_hand(fn):
    x = np.array([1.0, 2.0])
    f = lambda: x[0] ** 2 + 3.0 * x[0] * x[1]       # noqa: E731  grad (2x0 + 3x1, 3x0)
    got = _call_gradient(fn, f, x, h=0.5)
    want = np.array([8.0, 3.0])
    arr = _gradient_array(got, x, "numerical_gradient(f, x, h=0.5)")
    _not_all_zero(arr, want, "numerical_gradient(f, x, h=0.5)")
    diagnose(arr, want, [
        (np.array([8.5, 3.0]), "this is the forward difference (f(x + h) - f(x)) / h, "
                               "error O(h): use x[i] + h and x[i] - h, divided by 2h"),
        (np.array([7.5, 3.0]), "this is the backward difference (f(x) - f(x - h)) / h: "
                               "use x[i] + h and x[i] - h, divided by 2h"),
    ] + _formula_mistakes(want, 0.5, atol=1e-12),
       "for f = x0^2 + 3 x0 x1 at x = (1, 2) the gradient is (2 x0 + 3 x1, 3 x0) = (8, 3), "
       "and a central difference is exact for a quadratic", what="numerical_gradient(f, x, "
       "h=0.5) for f = x0^2 + 3 x0 x1 at x = (1, 2)", rtol=1e-9, atol=1e-12)


def _gradient_of_cubic(fn):
    x = np.array([1.0, -2.0, 0.5])
    f = lambda: float(np.sum(x ** 3))               # noqa: E731
    got = _call_gradient(fn, f, x, h=0.1)
    exact = 3 * x ** 2
    diagnose(_gradient_array(got, x, "numerical_gradient(f, x, h=0.1)"), exact + 0.01, [
        (exact, "use the step h passed in (h=...), not a fixed value"),
        (exact + 3 * x * 0.1 + 0.01, "this is the forward difference: use x[i] + h and "
                                     "x[i] - h, divided by 2h"),
    ], "for f = sum(x^3) a central difference with step h gives 3x^2 + h^2 exactly",
        what="numerical_gradient(f, x, h=0.1) for f = sum(x^3)", rtol=1e-9, atol=1e-12)


def _gradient_default_step(fn):
    x = np.array([1.0])

    def run(record):
        _call_gradient(fn, lambda: record(x), x)

    h = _default_step(run)
    if h is not None and abs(math.log10(max(h, 1e-300) / 1e-5)) > 0.01:
        raise CheckFailed(f"called without h, your function evaluates f at x[i] +- {h:.3g}, "
                          f"not x[i] +- 1e-5", _step_hint(h))


def _gradient_in_2d(fn):
    rng = case_rng(1)
    x = rng.standard_normal((3, 4))
    c = rng.standard_normal((3, 4))
    f = lambda: float(np.sum(np.tanh(x) * c))       # noqa: E731
    want = (1 - np.tanh(x) ** 2) * c
    try:
        got = _call_gradient(fn, f, x)
    except CheckFailed as e:
        if e.message.startswith("your function raised IndexError"):
            raise CheckFailed(e.message, ROWS_SIZE) from None
        raise
    by_rows = np.repeat(want.sum(axis=1, keepdims=True), 4, axis=1)
    diagnose(_gradient_array(got, x, "numerical_gradient(f, x) for x of shape (3, 4)"), want,
             [(by_rows, ROWS)], "entry (i, j) changes x[i, j] alone, by +h and by -h",
             what="numerical_gradient(f, x) for f = sum(tanh(x) * c), x of shape (3, 4),",
             rtol=1e-7, atol=1e-10)


def _gradient_edge_cases(fn):
    x = np.arange(8.0).reshape(2, 2, 2) / 4
    got = _call_gradient(fn, lambda: np.asarray(np.sum(x ** 2)), x)
    expect_close(_gradient_array(got, x, "numerical_gradient(f, x) for x of shape (2, 2, 2)"),
                 2 * x, what="the gradient of sum(x^2) over a (2, 2, 2) array",
                 hint=ROWS.replace("two axes", "three axes"), rtol=1e-7, atol=1e-10)
    x = np.array([3.0, -1.0])
    got = _call_gradient(fn, lambda: 4.0, x)
    expect_close(_gradient_array(got, x, "numerical_gradient(lambda: 4.0, x)"), np.zeros(2),
                 what="the gradient of a constant", atol=0.0,
                 hint="both evaluations of a constant f give the same value: each entry is 0")


@checker(library=["gradcheck.numerical_gradient"])
def check_numerical_gradient(fn):
    """numerical_gradient(f, x, h=1e-5): central differences of the scalar f() w.r.t. each
    entry of the float64 array x, which f reads; x perturbed in place and restored."""
    run_stages(fn, [("returns an array shaped like x, x restored", _gradient_of_linear),
                    ("a hand-checkable case, h = 0.5", _gradient_by_hand),
                    ("a cubic: error h^2 f'''/6, with the h you pass", _gradient_of_cubic),
                    ("the default step h = 1e-5", _gradient_default_step),
                    ("every entry of a 2-D x", _gradient_in_2d),
                    ("edge cases: a 3-D x, a constant f, f returning a 0-d array", _gradient_edge_cases)])
