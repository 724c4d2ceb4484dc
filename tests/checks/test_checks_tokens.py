"""Checkers of notebook 01 (course_lib.checks.tokens): they pass the notebook's reference
solutions and reject realistic learner bugs at the right stage, with the right hint."""
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib import task
from course_lib.checks import (check_answer, check_central_difference, check_encode,
                               check_numerical_gradient)

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_tokens_and_task.ipynb"


# ---- the reference solutions: executed from the notebook's own cells ------------------------

def _notebook_functions():
    """Run the notebook's exercise cells (those with a solution region) and return their functions."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    namespace = {"np": np, "cl": cl}
    sources = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    for src in sources:
        exec(compile(src, str(NOTEBOOK), "exec"), namespace)
    names = ("my_encode", "my_answer", "central_difference", "numerical_gradient")
    return {name: namespace[name] for name in names}, sources


REFERENCES, SOLUTION_CELLS = _notebook_functions()


def lines(capsys):
    return capsys.readouterr().out.strip().splitlines()


def run(check, fn, capsys):
    result = check(fn)
    return result, lines(capsys)


def assert_passes(check, fn, capsys, n_stages):
    result, out = run(check, fn, capsys)
    assert result.passed and result.done, out
    assert out == [out[0]] and out[0].startswith("✓") and f"all {n_stages} stages passed" in out[0]


def assert_rejects(check, fn, capsys, stage, hint_part):
    result, out = run(check, fn, capsys)
    assert not result.passed and result.done, out
    assert result.stage == stage, (result.stage, out)
    assert hint_part in (result.hint or ""), (result.hint, out)
    assert out[0].startswith("✗") and f"[stage: {stage}]" in out[0]
    assert out[1].startswith("  Hint: ")
    assert "Traceback" not in "\n".join(out)
    return result


def test_notebook_has_four_solution_regions():
    assert len(SOLUTION_CELLS) == 4
    assert all("### END SOLUTION" in src for src in SOLUTION_CELLS)


# ---- hand-written encoders with realistic bugs --------------------------------------------------

def _greedy(text, table, strip=True, on_unknown="raise"):
    text = text.replace(" ", "") if strip else text
    ids, pos = [], 0
    while pos < len(text):
        for piece, i in table:
            if text.startswith(piece, pos):
                ids.append(i)
                pos += len(piece)
                break
        else:
            if on_unknown == "raise":
                raise ValueError(f"unknown text at {text[pos:]!r}")
            if on_unknown == "keyerror":
                raise KeyError(text[pos])
            pos += 1                    # "skip": silently drops what it cannot read
    return ids


VOCAB_TABLE = [(tok, i) for i, tok in enumerate(task.VOCAB)]


def encode_digit_offset(text):
    """Digit d -> id d (forgot that ids 0 and 1 are [PAD] and [EOS])."""
    return [i - 2 if 2 <= i <= 11 else i for i in _greedy(text, VOCAB_TABLE)]


def encode_keeps_spaces(text):
    return _greedy(text, VOCAB_TABLE, strip=False)


def encode_no_special_tokens(text):
    return _greedy(text, [(tok, i) for tok, i in VOCAB_TABLE if not tok.startswith("[")])


def encode_skips_unknown(text):
    return _greedy(text, VOCAB_TABLE, on_unknown="skip")


def encode_keyerror(text):
    return _greedy(text, VOCAB_TABLE, on_unknown="keyerror")


def encode_by_character(text):
    """Every character a token: 'Max' cannot be found -> a dict lookup raises KeyError."""
    return [task.TOKEN_TO_ID[ch] for ch in text.replace(" ", "")]


def encode_returns_pieces(text):
    return [task.VOCAB[i] for i in _greedy(text, VOCAB_TABLE)]


def encode_with_library(text):
    return cl.task.encode(text)


def encode_wrong_op_ids(text):
    """Operations numbered from 11 instead of 12."""
    return [i - 1 if 12 <= i <= 16 else i for i in _greedy(text, VOCAB_TABLE)]


def test_encode_reference_passes(capsys):
    assert_passes(check_encode, REFERENCES["my_encode"], capsys, 5)


@pytest.mark.parametrize("fn, stage, hint", [
    (encode_digit_offset, "the example Max(1,6,2)", "digit d has id d + 2"),
    (encode_wrong_op_ids, "the example Max(1,6,2)", "First=12"),
    (encode_returns_pieces, "the example Max(1,6,2)", "map each piece to its id"),
    (encode_by_character, "the example Max(1,6,2)", "ONE token"),
    (encode_keeps_spaces, "spaces are ignored", "spaces are not tokens"),
    (encode_no_special_tokens, "[PAD], [EOS] and the empty text", "[PAD] (id 0)"),
    (encode_skips_unknown, "unknown text raises ValueError", "must raise ValueError"),
    (encode_keyerror, "unknown text raises ValueError", "KeyError"),
    (encode_with_library, "the example Max(1,6,2)", "cl.task.VOCAB"),
])
def test_encode_rejects_bugs(fn, stage, hint, capsys):
    assert_rejects(check_encode, fn, capsys, stage, hint)


def test_encode_by_character_reports_the_exception(capsys):
    result, out = run(check_encode, encode_by_character, capsys)
    assert "your function raised KeyError" in result.message


def test_encode_restores_the_library_encoder(capsys):
    original = task.encode
    check_encode(encode_with_library)
    check_encode(REFERENCES["my_encode"])
    capsys.readouterr()
    assert task.encode is original and cl.task.encode("Max(1,6,2)") == [15, 17, 3, 19, 8, 19, 4, 18]


@pytest.mark.parametrize("value, message", [
    ("15 17 3", "returned the string"),
    (np.zeros((2, 4), dtype=int), "shape (2, 4)"),
    (None, "returned NoneType"),
    ([15.0, 17, 3, 19, 8, 19, 4, 18], "must be an int token id"),
])
def test_encode_wrong_type_or_shape_is_a_clear_failure(value, message, capsys):
    result, out = run(check_encode, lambda text: value, capsys)
    assert not result.passed and result.done and message in result.message, out


def test_encode_accepts_arrays_and_numpy_ints(capsys):
    ref = REFERENCES["my_encode"]
    assert_passes(check_encode, lambda text: np.array(ref(text), dtype=np.int64), capsys, 5)


# ---- the answer rule ----------------------------------------------------------------------------

def _answer_with(**overrides):
    rules = {"First": lambda a, b, c: a, "Second": lambda a, b, c: b, "Last": lambda a, b, c: c,
             "Max": lambda a, b, c: max(a, b, c), "Min": lambda a, b, c: min(a, b, c)}
    rules.update(overrides)

    def fn(op, digits):
        if op not in rules:
            raise ValueError(op)
        return rules[op](*digits)
    return fn


def answer_dict_lookup(op, digits):
    a, b, c = digits
    return {"First": a, "Second": b, "Last": c, "Max": max(a, b, c), "Min": min(a, b, c)}[op]


def answer_else_min(op, digits):
    a, b, c = digits
    if op == "First":
        return a
    if op == "Second":
        return b
    if op == "Last":
        return c
    if op == "Max":
        return max(a, b, c)
    return min(a, b, c)


RIGHT = _answer_with()        # a hand-written rule: the checker takes cl.task.answer away


def answer_token_id(op, digits):
    return RIGHT(op, tuple(digits)) + 2


def answer_text(op, digits):
    return str(RIGHT(op, tuple(digits)))


def answer_tuple_only(op, digits):
    if not isinstance(digits, tuple):
        raise TypeError("digits must be a tuple")
    return RIGHT(op, digits)


def test_answer_reference_passes(capsys):
    assert_passes(check_answer, REFERENCES["my_answer"], capsys, 5)


@pytest.mark.parametrize("fn, stage, hint", [
    (_answer_with(Max=lambda a, b, c: min(a, b, c)), "the example Max(1,6,2)", "largest of all THREE"),
    (_answer_with(Second=lambda a, b, c: c), "one case per operation", "middle digit"),
    (_answer_with(Last=lambda a, b, c: b), "one case per operation", "digits[2]"),
    (_answer_with(Max=lambda a, b, c: max(a, b)), "all 5,000 problems", "largest of all THREE"),
    (_answer_with(Min=lambda a, b, c: min(a, b)), "all 5,000 problems", "smallest of all THREE"),
    (answer_token_id, "the example Max(1,6,2)", "not its token id"),
    (answer_text, "the example Max(1,6,2)", "not '6'"),
    (answer_tuple_only, "digits as a list or an array", "print intermediate"),
    (answer_dict_lookup, "an unknown operation raises ValueError", "raise ValueError"),
    (answer_else_min, "an unknown operation raises ValueError", "`else:` branch"),
])
def test_answer_rejects_bugs(fn, stage, hint, capsys):
    assert_rejects(check_answer, fn, capsys, stage, hint)


def answer_float(op, digits):
    return float(RIGHT(op, tuple(digits)))


def answer_forgets_return(op, digits):
    RIGHT(op, tuple(digits))


def test_answer_float_is_not_told_to_return(capsys):
    """`return 6.0` is a float, not a missing return."""
    result = assert_rejects(check_answer, answer_float, capsys, "the example Max(1,6,2)", "not 6.0")
    assert "6.0" in result.message and "return`?" not in result.hint


def test_answer_none_is_a_missing_return(capsys):
    assert_rejects(check_answer, answer_forgets_return, capsys, "the example Max(1,6,2)",
                   "forget `return`")


@pytest.mark.parametrize("value", [10 ** 400, "six", np.array([6, 6]), 6.5, float("nan"), [6]])
def test_answer_odd_values_are_a_sentence(value, capsys):
    result, out = run(check_answer, lambda op, digits: value, capsys)
    assert not result.passed and result.done and "Traceback" not in "\n".join(out)
    assert result.message.startswith("my_answer('Max', (1, 6, 2)) returned")


def test_answer_reports_the_first_wrong_problem(capsys):

    result, _ = run(check_answer, _answer_with(Max=lambda a, b, c: max(a, b)), capsys)
    assert result.message == "my_answer('Max', (0, 0, 1)) = 0, expected 1"


# ---- the central difference ---------------------------------------------------------------------

def forward_difference(f, x, h=1e-5):
    return (f(x + h) - f(x)) / h


def backward_difference(f, x, h=1e-5):
    return (f(x) - f(x - h)) / h


def denominator_h(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / h


def precedence_bug(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / 2 * h


def ignores_h(f, x, h=1e-5):
    step = 1e-5
    return (f(x + step) - f(x - step)) / (2 * step)


def tiny_default_h(f, x, h=1e-13):
    return (f(x + h) - f(x - h)) / (2 * h)


def one_sided_for_small_h(f, x, h=1e-5):
    """Exact where the large-step stages look, one-sided where the accuracy stages look."""
    if h > 0.15:
        return (f(x + h) - f(x - h)) / (2 * h)
    return (f(x + h) - f(x)) / h


def returns_both(f, x, h=1e-5):
    return f(x + h), f(x - h)


def returns_array(f, x, h=1e-5):
    return np.array([(f(x + h) - f(x - h)) / (2 * h)] * 2)


def huge_default_h(f, x, h=1e-2):
    return (f(x + h) - f(x - h)) / (2 * h)


def default_1e_8(f, x, h=1e-8):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_central_difference_reference_passes(capsys):
    assert_passes(check_central_difference, REFERENCES["central_difference"], capsys, 7)


def test_central_difference_accepts_0d_arrays(capsys):
    ref = REFERENCES["central_difference"]
    assert_passes(check_central_difference, lambda f, x, h=1e-5: np.asarray(ref(f, x, h)), capsys, 7)


QUAD = "a quadratic is exact, even with a large step"
CUBIC = "a cubic: error h^2 f'''/6, with the h you are given"


@pytest.mark.parametrize("fn, stage, hint", [
    (forward_difference, QUAD, "forward difference"),
    (backward_difference, QUAD, "backward difference"),
    (denominator_h, QUAD, "divide by 2h, not h"),
    (precedence_bug, QUAD, "operator precedence"),
    (ignores_h, CUBIC, "use the step h passed in"),
    (tiny_default_h, "the default step h = 1e-5", "too small: round-off"),
    (default_1e_8, "the default step h = 1e-5", "too small: round-off"),
    (huge_default_h, "the default step h = 1e-5", "too large: the truncation"),
    (one_sided_for_small_h, CUBIC, "forward difference"),
])
def test_central_difference_rejects_bugs(fn, stage, hint, capsys):
    assert_rejects(check_central_difference, fn, capsys, stage, hint)


def test_default_step_1e_8_is_not_told_about_int_x(capsys):
    """The old checker blamed an int x for a default step of 1e-8; the step is the bug."""
    result, out = run(check_central_difference, default_1e_8, capsys)
    assert "int" not in result.hint and "1e-08" in result.message


def test_forward_difference_fails_the_accuracy_and_order_stages_too():
    """Were the early stages absent, the O(h) error alone would reject a forward difference."""
    x = 1.0
    err = abs(forward_difference(np.sin, x) - np.cos(x))
    assert err > 1e-8                                                # accuracy stage threshold
    e1 = abs(forward_difference(np.exp, 0.5, 1e-1) - np.exp(0.5))
    e2 = abs(forward_difference(np.exp, 0.5, 1e-2) - np.exp(0.5))
    assert not 50 < e1 / e2 < 200                                    # order stage


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("fn, message", [
    (returns_both, "returned a tuple"),
    (returns_array, "shape (2,)"),
    (lambda f, x, h=1e-5: None, "returned None"),
    (lambda f, x, h=1e-5: "0.54", "returned the str"),
    (lambda f, x, h=1e-5: (f(x + 1j * h) / h).imag + 0j, "complex"),
    (lambda f, x, h=1e-5: complex(0.54, 0.0), "complex"),
    (lambda f, x, h=1e-5: 10 ** 400, "int of 401 digits"),
    (lambda f, x, h=1e-5: True, "returned True"),
    (lambda f, x, h=1e-5: {"d": 0.54}, "returned"),
    (lambda f, x, h=1e-5: (f(x + h) - f(x - h)) / 0.0, "returned"),
])
def test_central_difference_wrong_type_or_shape_is_a_clear_failure(fn, message, capsys):
    result, out = run(check_central_difference, fn, capsys)
    assert not result.passed and result.done and result.stage == "returns one number"
    assert message in result.message, out


# ---- not done, exceptions, non-functions: for every checker ------------------------------------

# ---- numerical gradients of arrays --------------------------------------------------------------

def ng_reference(f, x, h=1e-5):
    return REFERENCES["numerical_gradient"](f, x, h)


def ng_no_restore(f, x, h=1e-5):
    """Moves x[idx] to +h, then to -h, and leaves it there."""
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        x[idx] += h
        f_plus = f()
        x[idx] -= 2 * h
        grad[idx] = (f_plus - f()) / (2 * h)
    return grad


def ng_arithmetic_restore(f, x, h=1e-5):
    """Restores by arithmetic: x + h - 2h + h, which is not always x in floating point."""
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        x[idx] += h
        f_plus = f()
        x[idx] -= 2 * h
        f_minus = f()
        x[idx] += h
        grad[idx] = (f_plus - f_minus) / (2 * h)
    return grad


def ng_other_names(func, arr, h=1e-5):
    """A learner's own parameter names: the report must name `arr`."""
    return ng_no_restore(func, arr, h)


def _ng_with(formula, default_h=1e-5):
    def fn(f, x, h=default_h):
        grad = np.zeros_like(x)
        f0 = f()
        for idx in np.ndindex(x.shape):
            old = x[idx]
            x[idx] = old + h
            fp = f()
            x[idx] = old - h
            fm = f()
            x[idx] = old
            grad[idx] = formula(fp, fm, f0, h)
        return grad
    return fn


ng_forward = _ng_with(lambda fp, fm, f0, h: (fp - f0) / h)
ng_backward = _ng_with(lambda fp, fm, f0, h: (f0 - fm) / h)
ng_over_h = _ng_with(lambda fp, fm, f0, h: (fp - fm) / h)
ng_precedence = _ng_with(lambda fp, fm, f0, h: (fp - fm) / 2 * h)
ng_tiny_default = _ng_with(lambda fp, fm, f0, h: (fp - fm) / (2 * h), default_h=1e-8)
ng_large_default = _ng_with(lambda fp, fm, f0, h: (fp - fm) / (2 * h), default_h=1e-2)


def ng_ignores_h(f, x, h=1e-5):
    return ng_reference(f, x, 1e-5)


def ng_rows(f, x, h=1e-5):
    """for i in range(len(x)): moves whole rows of a 2-D x."""
    grad = np.zeros_like(x)
    for i in range(len(x)):
        old = x[i].copy()
        x[i] = old + h
        fp = f()
        x[i] = old - h
        fm = f()
        x[i] = old
        grad[i] = (fp - fm) / (2 * h)
    return grad


def ng_flat(f, x, h=1e-5):
    return ng_reference(f, x, h).ravel()


def ng_float32(f, x, h=1e-5):
    return ng_reference(f, x, h).astype(np.float32)


def ng_scalar(f, x, h=1e-5):
    return float(ng_reference(f, x, h).sum())


def ng_list_of_rows(f, x, h=1e-5):
    return ng_reference(f, x, h).tolist()


def test_numerical_gradient_reference_passes(capsys):
    assert_passes(check_numerical_gradient, REFERENCES["numerical_gradient"], capsys, 6)


def test_numerical_gradient_list_result_of_the_right_shape_passes(capsys):
    assert_passes(check_numerical_gradient, ng_list_of_rows, capsys, 6)


SHAPE = "returns an array shaped like x, x restored"
NG_HAND = "a hand-checkable case, h = 0.5"
NG_CUBIC = "a cubic: error h^2 f'''/6, with the h you pass"
NG_2D = "every entry of a 2-D x"
NG_DEFAULT = "the default step h = 1e-5"


@pytest.mark.parametrize("fn, stage, hint", [
    (ng_no_restore, SHAPE, "set x[i] back to its old value"),
    (ng_arithmetic_restore, SHAPE, "save old = x[i]"),
    (ng_other_names, SHAPE, "arr[i] back"),
    (ng_flat, NG_2D, "in the shape of x"),
    (ng_scalar, SHAPE, "one entry per entry of x"),
    (ng_float32, SHAPE, "float64"),
    (ng_forward, NG_HAND, "forward difference"),
    (ng_backward, NG_HAND, "backward difference"),
    (ng_over_h, SHAPE, "divide by 2h, not h"),
    (ng_precedence, SHAPE, "operator precedence"),
    (ng_ignores_h, NG_CUBIC, "use the step h passed in"),
    (ng_tiny_default, NG_DEFAULT, "too small: round-off"),
    (ng_large_default, NG_DEFAULT, "too large"),
    (ng_rows, NG_2D, "x[i] is a whole row"),
])
def test_numerical_gradient_rejects_bugs(fn, stage, hint, capsys):
    assert_rejects(check_numerical_gradient, fn, capsys, stage, hint)


def test_numerical_gradient_not_restoring_names_the_input(capsys):
    result, _ = run(check_numerical_gradient, ng_other_names, capsys)
    assert "changed its input `arr` and did not restore it" in result.message
    result, _ = run(check_numerical_gradient, ng_no_restore, capsys)
    assert "changed its input `x`" in result.message and "x[0] is 0.49999" in result.message


def test_numerical_gradient_arithmetic_restore_prints_enough_digits(capsys):
    result, _ = run(check_numerical_gradient, ng_arithmetic_restore, capsys)
    now, was = result.message.split(" is ")[1].split(", it was ")
    assert float(now) != float(was)


@pytest.mark.parametrize("value, message", [
    (None, "is None"),
    ("grad", "should be a NumPy array of numbers"),
    (np.zeros(3, dtype=complex), "complex"),
    (np.zeros((3, 2)), "has shape (3, 2)"),
    ([np.zeros(3)], "list of arrays"),
    (10 ** 400, "should be a NumPy array of numbers"),
])
def test_numerical_gradient_odd_values_are_a_sentence(value, message, capsys):
    result, out = run(check_numerical_gradient, lambda f, x, h=1e-5: value, capsys)
    assert not result.passed and result.done and result.stage == SHAPE
    assert message in result.message and "Traceback" not in "\n".join(out)


def test_numerical_gradient_runs_f_on_the_callers_array(capsys):
    """The checker must not hand the learner a copy of x: f reads the original."""
    seen = []

    def spy(f, x, h=1e-5):
        seen.append(f())
        return ng_reference(f, x, h)
    check_numerical_gradient(spy)
    capsys.readouterr()
    assert seen and all(np.isfinite(seen))


CHECKERS = [check_encode, check_answer, check_central_difference, check_numerical_gradient]


def crashes(*args, **kwargs):
    return [][1]


@pytest.mark.parametrize("check", CHECKERS)
def test_other_exception_is_a_failed_result(check, capsys):
    result = check(crashes)
    out = lines(capsys)
    assert not result.passed and result.done
    assert "IndexError" in result.message and "Traceback" not in "\n".join(out)
    assert out[0].startswith("✗")


# ---- the library's own functions cannot stand in for the learner's (review fixes) -------------

from course_lib.task import answer as imported_answer    # noqa: E402
from course_lib.task import encode as imported_encode    # noqa: E402


def answer_with_library(op, digits):
    return cl.task.answer(op, digits)


def answer_imported(op, digits):
    return imported_answer(op, tuple(digits))


def encode_imported(text):
    return imported_encode(text)


def _closure_encoder():
    enc = cl.task.encode

    def my_encode(text):
        return enc(text)
    return my_encode


def encode_default_argument(text, enc=cl.task.encode):
    return enc(text)


@pytest.mark.parametrize("fn", [answer_with_library, answer_imported])
def test_answer_calling_the_library_is_rejected(fn, capsys):
    result = assert_rejects(check_answer, fn, capsys, "the example Max(1,6,2)",
                            "compare op with the five names")
    assert result.message == "your function calls cl.task.answer: write the rule yourself"
    assert task.answer("Max", (1, 6, 2)) == 6           # restored afterwards


@pytest.mark.parametrize("fn", [encode_imported, _closure_encoder(), encode_default_argument])
def test_encode_holding_the_library_function_is_rejected(fn, capsys):
    result = assert_rejects(check_encode, fn, capsys, "the example Max(1,6,2)", "cl.task.VOCAB")
    assert "calls cl.task.encode" in result.message


def test_importing_encode_elsewhere_does_not_fail_a_handwritten_encoder(capsys):
    assert_passes(check_encode, REFERENCES["my_encode"], capsys, 5)


# ---- numerical gradient: all zeros, x.size on a 2-D x; float32 central difference -------------

def gradient_moves_a_copy(f, x, h=1e-5):
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xc = x.copy()
        xc[idx] += h
        f_plus = f()
        xc[idx] -= 2 * h
        f_minus = f()
        grad[idx] = (f_plus - f_minus) / (2 * h)
    return grad


def gradient_unfilled(f, x, h=1e-5):
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        f_plus = f()
        x[idx] = old - h
        f_minus = f()
        x[idx] = old
        (f_plus - f_minus) / (2 * h)            # computed, never stored
    return grad


def gradient_loops_over_size(f, x, h=1e-5):
    grad = np.zeros_like(x)
    for i in range(x.size):
        old = x[i].copy()
        x[i] = old + h
        f_plus = f()
        x[i] = old - h
        f_minus = f()
        x[i] = old
        grad[i] = (f_plus - f_minus) / (2 * h)
    return grad


@pytest.mark.parametrize("fn", [gradient_moves_a_copy, gradient_unfilled])
def test_numerical_gradient_all_zeros_gets_the_in_place_hint(fn, capsys):
    result = assert_rejects(check_numerical_gradient, fn, capsys,
                            "returns an array shaped like x, x restored", "all zeros")
    assert "in place, not a copy" in result.hint and "precedence" not in result.hint


def test_precedence_candidate_is_left_out_when_it_cannot_be_told_from_zero():
    from course_lib.checks.tokens import _formula_mistakes
    want = np.array([3.0, -2.0])
    hints = lambda m: " ".join(h for _, h in m)        # noqa: E731
    assert "precedence" not in hints(_formula_mistakes(want, 1e-5, atol=1e-9))
    assert "precedence" in hints(_formula_mistakes(want, 1e-5, atol=1e-12))


def test_numerical_gradient_x_size_loop_gets_the_ndindex_hint(capsys):
    result = assert_rejects(check_numerical_gradient, gradient_loops_over_size, capsys,
                            "every entry of a 2-D x", "x.size is not len(x)")
    assert "IndexError" in result.message and "np.ndindex(x.shape)" in result.hint


def central_difference_float32(f, x, h=1e-5):
    return np.float32((f(x + h) - f(x - h)) / (2 * h))


def central_difference_rounded_through_float32(f, x, h=1e-5):
    return float(np.float32((f(x + h) - f(x - h)) / (2 * h)))


@pytest.mark.parametrize("fn, stage", [
    (central_difference_float32, "returns one number"),
    (central_difference_rounded_through_float32, "a cubic: error h^2 f'''/6, with the h you are given"),
])
def test_central_difference_float32_is_named(fn, stage, capsys):
    result = assert_rejects(check_central_difference, fn, capsys, stage, "float32")
    assert "float64" in result.hint
