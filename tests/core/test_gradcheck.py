"""The gradient check itself: it passes right gradients and can fail every wrong one,
NaN and infinity included, and names what a backward returned that cannot be compared."""
import math

import numpy as np
import pytest

from course_lib.gradcheck import GradcheckError, Report, check_op, magnitude, rel_error

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
W = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.2]])


def matmul_inputs():
    return {"x": X.copy(), "w": W.copy()}


def matmul_backward(dy):
    return dy @ W.T, X.T @ dy


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_rel_error_of_a_non_finite_gradient_is_infinite(bad):
    g = np.ones(4)
    wrong = g.copy()
    wrong[2] = bad
    assert rel_error(wrong, g) == math.inf
    assert rel_error(g, wrong) == math.inf
    assert rel_error(np.full(4, np.nan), np.full(4, np.nan)) == math.inf


def test_right_backward_passes_with_its_magnitude_printed():
    report = check_op(lambda x, w: x @ w, matmul_backward, matmul_inputs())
    assert isinstance(report, Report) and report.passed
    assert set(report) == {"x", "w"} and max(report.values()) < 1e-9
    assert "x  rel. error ~1e-" in str(report) and "wrong" not in str(report)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_gradient_fails_and_the_report_says_so(bad):
    def backward(dy):
        dx, dw = matmul_backward(dy)
        return np.full_like(dx, bad), dw

    report = check_op(lambda x, w: x @ w, backward, matmul_inputs())
    assert report["x"] == math.inf and not report.passed
    name = "NaN" if np.isnan(bad) else "infinity"
    assert f"x  rel. error inf   <- wrong (the analytic gradient holds {name})" in str(report)


def test_non_finite_function_is_named_as_the_numerical_side():
    x = {"x": np.array([1.0, -1.0])}
    report = check_op(np.log, lambda dy: dy / x["x"], x)   # log(-1) is NaN
    assert report["x"] == math.inf
    assert "numerical gradient holds NaN (f itself is not finite near x)" in str(report)


@pytest.mark.parametrize("returned, words", [
    (None, "backward returned None: did you forget `return`?"),
    ((np.zeros((2, 3)),), "backward returned 1 gradients, one per input expected (2: x, w"),
    ({"x": np.zeros((2, 3))}, "['w'] missing"),
    ({"x": np.zeros((2, 3)), "w": np.zeros((3, 2)), "b": 0}, "['b'] are not inputs"),
    ((np.zeros((2, 3)), None), "the gradient of 'w' is None"),
    ((np.zeros((2, 3)), np.zeros((2, 3))), "the gradient of 'w' has shape (2, 3), but 'w' has shape (3, 2)"),
    ((np.zeros((2, 3)), "dw"), "the gradient of 'w' is not an array of numbers (str)"),
    (np.zeros((2, 3)), "backward returned one ndarray, but there are 2 inputs"),
])
def test_malformed_backward_results_are_named(returned, words):
    with pytest.raises(GradcheckError) as e:
        check_op(lambda x, w: x @ w, lambda dy: returned, matmul_inputs())
    assert words in str(e.value)


def test_one_input_may_return_its_gradient_alone_or_in_a_tuple_or_dict():
    x = np.array([0.3, -1.2, 2.0])
    for wrap in (lambda g: g, lambda g: (g,), lambda g: [g], lambda g: {"x": g}):
        assert check_op(np.tanh, lambda dy: wrap(dy * (1 - np.tanh(x) ** 2)), {"x": x}).passed


def test_a_wrong_gradient_fails_with_a_two_digit_error():
    report = check_op(np.tanh, lambda dy: dy, {"x": np.array([0.3, -1.2, 2.0])})
    assert not report.passed and 0.01 < report["x"] <= 1
    assert "<- wrong" in str(report)


def test_magnitude_text():
    assert magnitude(2e-11) == "~1e-11" and magnitude(4e-11) == "~1e-10" and magnitude(0.3141) == "0.31"
    assert magnitude(0.0) == "0" and magnitude(math.inf) == "inf" and magnitude(math.nan) == "inf"
    assert magnitude(-3e-16) == "~1e-16"


def test_magnitude_as_a_bound_or_as_noise():
    assert magnitude(2.2e-8, below=1e-6) == magnitude(3.7e-8, below=1e-6) == "below 1e-6"
    assert magnitude(0.0, below=1e-12) == "below 1e-12"
    assert magnitude(2e-3, below=1e-6) == "0.002"          # a bound that fails shows the value
    assert magnitude(0.0083, noisy=True) == magnitude(0.012, noisy=True) == "~1e-2"
