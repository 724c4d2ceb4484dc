"""Checkers of notebook 08 (softmax and cross-entropy): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import loss as checks_loss
from support import notebook_asserts, notebook_solutions, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "08_softmax_and_cross_entropy.ipynb"


# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 2, {"np": np, "cl": cl})
cross_entropy = SOLVED["cross_entropy"]
cross_entropy_backward = SOLVED["cross_entropy_backward"]


def cross_entropy_loops(logits, targets):
    """The same loss, one row at a time."""
    total, count = 0.0, 0
    for z, y in zip(logits, targets):
        if y == -100:
            continue
        m = max(z)
        total += m + np.log(sum(np.exp(v - m) for v in z)) - z[y]
        count += 1
    return total / count


def cross_entropy_backward_loops(logits, targets):
    N, V = logits.shape
    count = sum(1 for y in targets if y != -100)
    d = np.zeros((N, V))
    for n in range(N):
        if targets[n] == -100:
            continue
        e = np.exp(logits[n] - logits[n].max())
        d[n] = e / e.sum()
        d[n, targets[n]] -= 1
    return d / count


# ---- helpers ------------------------------------------------------------------------------


assert_passes, assert_rejects = notebook_asserts(8)


FORWARD, BACKWARD = cl.checks.check_cross_entropy_forward, cl.checks.check_cross_entropy_backward
CHECKERS = [(FORWARD, cross_entropy), (BACKWARD, cross_entropy_backward)]


def test_exported_from_cl_checks():
    for name in checks_loss.__all__:
        assert getattr(cl.checks, name) is getattr(checks_loss, name)


@pytest.mark.parametrize("check, fn", CHECKERS + [(FORWARD, cross_entropy_loops),
                                                  (BACKWARD, cross_entropy_backward_loops)])
def test_reference_and_loop_versions_pass(check, fn, capsys):
    result = assert_passes(check, fn, capsys)
    assert result.n_stages >= 6


def test_float_return_passes(capsys):
    assert_passes(FORWARD, lambda z, y: float(cross_entropy(z, y)), capsys)


@pytest.mark.parametrize("check, _", CHECKERS)
def test_odd_returns(check, _, capsys):
    result, out = run_check(check, lambda *a: None, capsys)
    assert not result.passed and result.done and "None" in result.message
    result, out = run_check(check, lambda *a: "a string", capsys)
    assert not result.passed and "NumPy array of numbers" in result.message
    result, out = run_check(check, np.zeros(3), capsys)
    assert not result.passed and "pass your function itself" in out


@pytest.mark.parametrize("check, _", CHECKERS)
def test_other_exception_is_a_failed_result(check, _, capsys):
    def broken(*args):
        return undefined_name  # noqa: F821  a learner's NameError

    result, out = run_check(check, broken, capsys)
    assert not result.passed and result.done
    assert "NameError" in result.message and "Traceback" not in out


# ---- Exercise 8.1: forward -------------------------------------------------------------------

def _forward_with(log_p=None, denominator=None, sign=1.0, shift=0, mask=True):
    """A forward with one mistake; log_p(z) gives log-probabilities (default: stable)."""
    def fn(logits, targets):
        scored = targets != -100 if mask else np.ones(len(targets), bool)
        z, y = logits[scored], targets[scored]
        if log_p is None:
            m = z.max(axis=1, keepdims=True)
            lp = z - m - np.log(np.sum(np.exp(z - m), axis=1, keepdims=True))
        else:
            lp = log_p(z)
        rows = -lp[np.arange(len(y)), y + shift]
        return sign * np.sum(rows) / (len(y) if denominator is None else denominator(logits, targets))
    return fn


def _naive_log_p(z):
    return np.log(np.exp(z) / np.sum(np.exp(z), axis=1, keepdims=True))


def _log_of_stable_softmax(z):
    return np.log(cl.kernels.softmax_forward(z))


@pytest.mark.parametrize("wrong, stage, hint", [
    (_forward_with(log_p=_naive_log_p), "large logits: overflow", "overflows"),
    (_forward_with(log_p=_log_of_stable_softmax), "a target far below the row maximum: underflow",
     "Never take log(softmax(z))"),
    (_forward_with(denominator=lambda z, y: len(y)), "ignored targets (-100)", "divided by N = 5"),
    (_forward_with(denominator=lambda z, y: 1), "hand-checkable case", "1/M is missing"),
    (_forward_with(sign=-1.0), "hand-checkable case", "sign is flipped"),
    (_forward_with(shift=1), "hand-checkable case", "off by one"),
    (_forward_with(shift=-1), "hand-checkable case", "off by one"),
    (_forward_with(log_p=lambda z: np.log2(cl.kernels.softmax_forward(z))), "hand-checkable case",
     "np.log2"),
    (_forward_with(log_p=lambda z: np.log10(cl.kernels.softmax_forward(z))), "hand-checkable case",
     "np.log10"),
    (_forward_with(mask=False), "ignored targets (-100)", "not scored"),
])
def test_forward_rejects(wrong, stage, hint, capsys):
    assert_rejects(FORWARD, wrong, capsys, stage, hint)


def test_forward_dropped_maximum(capsys):
    """m taken out of the exponentials and never added back: log(sum(exp(z - m))) - z_y."""
    def dropped(logits, targets):
        keep = targets != -100
        z, y = logits[keep], targets[keep]
        m = z.max(axis=1, keepdims=True)
        return np.mean(np.log(np.sum(np.exp(z - m), axis=1)) - z[np.arange(len(y)), y])

    assert_rejects(FORWARD, dropped, capsys, "hand-checkable case", "did not add it back")


def test_forward_one_global_maximum(capsys):
    """m = z.max() for the whole array: exact until a row lies far below the global maximum,
    where every exp(z - m) underflows to 0 and log(0) = -inf."""
    def global_max(logits, targets):
        keep = targets != -100
        z, y = logits[keep], targets[keep]
        m = z.max()
        return np.mean(m + np.log(np.sum(np.exp(z - m), axis=1)) - z[np.arange(len(y)), y])

    r = assert_rejects(FORWARD, global_max, capsys, "large logits: overflow",
                       "one maximum for the whole array")
    assert "z.max(axis=1, keepdims=True)" in r.hint and "-inf" in r.message


def test_forward_counts_nonzero_targets(capsys):
    """M = np.count_nonzero(targets) is 1 on the first hand case, like a forgotten mean: the
    hint names the count first, and the second case ([1, 3], where it is right) passes."""
    wrong = _forward_with(denominator=lambda z, y: np.count_nonzero(y))
    r = assert_rejects(FORWARD, wrong, capsys, "hand-checkable case", "not the nonzero targets")
    assert r.hint.startswith("M counts the rows whose target is not -100")


def test_forward_divided_by_batch_size(capsys):
    """Dividing by B (the number of sequences) when the rows are a flattened (B, T) batch: the
    checker's ignored-target case has M != B*T and M != 1."""
    def per_sequence(logits, targets):
        return cross_entropy(logits, targets) * np.count_nonzero(targets != -100) / len(targets)

    assert_rejects(FORWARD, per_sequence, capsys, "ignored targets (-100)", "not by N nor by a batch")


def test_forward_unmasked_with_large_vocabulary(capsys):
    """V >= 100: z[n, -100] exists, so a forgotten mask gives a number, not an IndexError."""
    def unmasked(logits, targets):
        if logits.shape[1] < 100:
            return cross_entropy(logits, targets)
        return np.mean(checks_loss._logsumexp(logits) - logits[np.arange(len(targets)), targets])

    assert_rejects(FORWARD, unmasked, capsys, "a vocabulary of 120: z[n, -100] exists", "not scored")


def test_forward_returns_pair_or_rows(capsys):
    r = assert_rejects(FORWARD, lambda z, y: (cross_entropy(z, y), z), capsys, "returns one number",
                       "return only the loss")
    assert "tuple" in r.message
    r = assert_rejects(FORWARD, lambda z, y: np.full(len(y), cross_entropy(z, y)), capsys,
                       "returns one number", "np.mean")
    assert "shape (3,)" in r.message


def test_forward_in_place(capsys):
    def in_place(logits, targets):
        logits -= logits.max(axis=1, keepdims=True)
        return cross_entropy(logits, targets)

    result, out = run_check(FORWARD, in_place, capsys)
    assert not result.passed and "changed its input `logits` in place" in result.message


def test_forward_float32_is_a_dtype_problem(capsys):
    def single(logits, targets):
        return np.float32(cross_entropy(logits.astype(np.float32), targets))

    result, out = run_check(FORWARD, single, capsys)
    assert not result.passed and "float32" in result.message and "dtype problem" in result.hint, out


def test_forward_prints_no_warning(capsys, recwarn):
    run_check(FORWARD, _forward_with(log_p=_naive_log_p), capsys)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# ---- Exercise 8.3: backward ------------------------------------------------------------------

def _backward_with(scale=None, sign=1.0, shift=0, zero_ignored=True, onehot=True, naive=False):
    def fn(logits, targets):
        N, V = logits.shape
        keep = np.flatnonzero(targets != -100)
        if naive:
            e = np.exp(logits)
            p = e / e.sum(axis=1, keepdims=True)
        else:
            p = cl.kernels.softmax_forward(logits)
        d = p.copy() if not zero_ignored else np.zeros_like(p)
        d[keep] = p[keep]
        if onehot:
            d[keep, (targets[keep] + shift) % V] -= 1.0
        return sign * d * (1.0 / len(keep) if scale is None else scale(logits, targets))
    return fn


@pytest.mark.parametrize("wrong, stage, hint", [
    (_backward_with(sign=-1.0), "hand-checkable case", "sign is flipped"),
    (_backward_with(scale=lambda z, y: 1.0), "hand-checkable case", "1/M is missing"),
    (_backward_with(scale=lambda z, y: 1.0 / len(y)), "ignored targets (-100)", "divided by N = 5"),
    (_backward_with(zero_ignored=False), "ignored targets (-100)", "exactly 0"),
    (_backward_with(shift=1), "hand-checkable case", "off by one"),
    (_backward_with(shift=-1), "hand-checkable case", "off by one"),
    (_backward_with(onehot=False), "hand-checkable case", "onehot(y) term is missing"),
    (_backward_with(naive=True), "large logits", "overflows"),
])
def test_backward_rejects(wrong, stage, hint, capsys):
    assert_rejects(BACKWARD, wrong, capsys, stage, hint)


def test_backward_softmax_over_wrong_axis(capsys):
    def columns(logits, targets):
        keep = np.flatnonzero(targets != -100)
        e = np.exp(logits - logits.max(axis=0, keepdims=True))
        p = e / e.sum(axis=0, keepdims=True)                 # each column sums to 1
        d = np.zeros_like(p)
        d[keep] = p[keep]
        d[keep, targets[keep]] -= 1.0
        return d / len(keep)

    assert_rejects(BACKWARD, columns, capsys, "hand-checkable case", "wrong axis: each row must sum to 1")


def test_backward_counts_nonzero_targets(capsys):
    """M = np.count_nonzero(targets): drops the rows whose target is id 0, counts the -100 rows."""
    def nonzero(logits, targets):
        keep = np.flatnonzero(targets != -100)
        p = cl.kernels.softmax_forward(logits)
        d = np.zeros_like(p)
        d[keep] = p[keep]
        d[keep, targets[keep]] -= 1.0
        return d / np.count_nonzero(targets)

    r = assert_rejects(BACKWARD, nonzero, capsys, "hand-checkable case", "whose target is not -100")
    assert "targets == 0 is a real target: id 0" in r.hint


def test_backward_forgotten_mask_small_vocabulary(capsys):
    def unmasked(logits, targets):
        p = cl.kernels.softmax_forward(logits)
        p[np.arange(len(targets)), targets] -= 1.0
        return p / len(targets)

    r = assert_rejects(BACKWARD, unmasked, capsys, "ignored targets (-100)", "not scored")
    assert "IndexError" in r.message


def test_backward_forgotten_mask_large_vocabulary(capsys):
    def unmasked(logits, targets):
        if logits.shape[1] < 100:
            return cross_entropy_backward(logits, targets)
        p = cl.kernels.softmax_forward(logits)
        p[np.arange(len(targets)), targets] -= 1.0
        return p / np.count_nonzero(targets != -100)

    assert_rejects(BACKWARD, unmasked, capsys, "a vocabulary of 120: z[n, -100] exists", "not scored")


def test_backward_wrong_shape(capsys):
    r = assert_rejects(BACKWARD, lambda z, y: cross_entropy_backward(z, y).sum(axis=0), capsys,
                       "shapes", "shape of what it is the gradient of")
    assert "shape (4,)" in r.message and "expected (3, 4)" in r.message


def test_backward_in_place(capsys):
    def in_place(logits, targets):
        logits -= logits.max(axis=1, keepdims=True)
        return cross_entropy_backward(logits, targets)

    result, out = run_check(BACKWARD, in_place, capsys)
    assert not result.passed and "changed its input `logits` in place" in result.message


def test_backward_float32_is_a_dtype_problem(capsys):
    def single(logits, targets):
        return cross_entropy_backward(logits.astype(np.float32), targets)

    result, out = run_check(BACKWARD, single, capsys)
    assert not result.passed and "float32" in result.message and "dtype problem" in result.hint, out


def test_reference_gradient_checks_with_check_op():
    """What the notebook does: the learner's backward against central differences."""
    rng = np.random.default_rng(0)
    z = rng.standard_normal((6, 20))
    y = np.array([3, -100, 8, -100, -100, 19])
    report = cl.gradcheck.check_op(lambda a: np.array(cross_entropy(a, y)),
                                   lambda dy: dy * cross_entropy_backward(z, y), {"logits": z})
    assert report.passed and report["logits"] < 1e-8
