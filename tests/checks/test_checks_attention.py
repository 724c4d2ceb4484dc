"""Checkers of notebook 03 (single-head attention): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import attention as checks_attention
from support import notebook_asserts, notebook_solutions, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_single_head_attention.ipynb"


# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 4, {"np": np})
softmax = SOLVED["softmax"]
attention = SOLVED["attention"]
softmax_backward = SOLVED["softmax_backward"]
attention_backward = SOLVED["attention_backward"]


# ---- helpers ------------------------------------------------------------------------------


assert_passes, assert_rejects = notebook_asserts(3)


CHECKERS = [
    (cl.checks.check_stable_softmax, softmax),
    (cl.checks.check_single_head_attention, attention),
    (cl.checks.check_softmax_backward, softmax_backward),
    (cl.checks.check_single_head_attention_backward, attention_backward),
]


def test_exported_from_cl_checks():
    for name in checks_attention.__all__:
        assert getattr(cl.checks, name) is getattr(checks_attention, name)


@pytest.mark.parametrize("check, fn", CHECKERS)
def test_reference_passes(check, fn, capsys):
    result = assert_passes(check, fn, capsys)
    assert result.n_stages >= 4


# ---- Exercise 3.1: stable softmax ----------------------------------------------------------

def _global_max_softmax(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e, axis=-1, keepdims=True)


def test_softmax_global_max_fails_on_rows_far_apart(capsys):
    """The global maximum is exact maths but underflows a row far below it to 0 / 0: rejected,
    with the hint that says so (the notebook's question on the global maximum says the same)."""
    r = assert_rejects(cl.checks.check_stable_softmax, _global_max_softmax, capsys,
                       "rows far apart: one row 1000 below another", "each row's own maximum")
    assert "745" in r.hint and "103" in r.hint and "row(s) [1]" in r.message


def test_notebook_question_on_the_global_maximum_agrees_with_the_checker():
    md = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "markdown"]
    question = [m for m in md if "x.max()" in m and "<details>" in m]
    assert len(question) == 1
    assert "745" in question[0] and "103" in question[0] and "checker" in question[0]


def test_softmax_list_output_is_accepted(capsys):
    assert_passes(cl.checks.check_stable_softmax, lambda x: softmax(x).tolist(), capsys)


def test_softmax_naive_overflows(capsys):
    def naive(x):
        e = np.exp(x)
        return e / np.sum(e, axis=-1, keepdims=True)

    r = assert_rejects(cl.checks.check_stable_softmax, naive, capsys, "large logits: 1000 and -1000",
                       "subtract each row's maximum")
    assert "NaN" in r.message


def test_softmax_naive_prints_no_warning(capsys, recwarn):
    def naive(x):
        e = np.exp(x)
        return e / np.sum(e, axis=-1, keepdims=True)

    run_check(cl.checks.check_stable_softmax, naive, capsys)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_softmax_mean_shift_overflows(capsys):
    def mean_shift(x):
        e = np.exp(x - np.mean(x, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)

    assert_rejects(cl.checks.check_stable_softmax, mean_shift, capsys, "large logits: 1000 and -1000",
                   "subtract each row's maximum")


def test_softmax_wrong_axis(capsys):
    def columns(x):
        e = np.exp(x - np.max(x, axis=0, keepdims=True))
        return e / np.sum(e, axis=0, keepdims=True)

    r = assert_rejects(cl.checks.check_stable_softmax, columns, capsys, "hand-checkable case", "wrong axis")
    assert "columns" in r.message


def test_softmax_normalised_over_everything(capsys):
    def whole(x):
        e = np.exp(x - np.max(x))
        return e / np.sum(e)

    assert_rejects(cl.checks.check_stable_softmax, whole, capsys, "hand-checkable case", "each row by its own sum")


def test_softmax_without_keepdims(capsys):
    def no_keepdims(x):
        e = np.exp(x - np.max(x, axis=-1))
        return e / np.sum(e, axis=-1)

    r = assert_rejects(cl.checks.check_stable_softmax, no_keepdims, capsys, "shapes", "keepdims=True")
    assert "ValueError" in r.message


def test_softmax_not_normalised(capsys):
    def unnormalised(x):
        return np.exp(x - np.max(x, axis=-1, keepdims=True))

    assert_rejects(cl.checks.check_stable_softmax, unnormalised, capsys, "hand-checkable case", "row sum")


def test_softmax_wrong_shape_and_type(capsys):
    r = assert_rejects(cl.checks.check_stable_softmax, lambda x: softmax(x).ravel(), capsys, "shapes",
                       "keeps the shape")
    assert "shape (6,)" in r.message
    result, out = run_check(cl.checks.check_stable_softmax, lambda x: "a string", capsys)
    assert not result.passed and "NumPy array of numbers" in result.message


@pytest.mark.parametrize("check, _", CHECKERS)
def test_missing_return(check, _, capsys):
    result, out = run_check(check, lambda *args: None, capsys)
    assert not result.passed and result.done and result.stage is not None
    assert "returned None" in result.message and "return" in result.hint


# ---- Exercise 3.2: single-head attention forward -------------------------------------------

def _attention_with(scale=None, axis=-1, transpose_out=False, qk="QK"):
    def fn(Q, K, V):
        D = Q.shape[-1]
        S = (Q @ K.T if qk == "QK" else K @ Q.T) * (1 / np.sqrt(D) if scale is None else scale(Q, K, V))
        E = np.exp(S - np.max(S, axis=axis, keepdims=True))
        A = E / np.sum(E, axis=axis, keepdims=True)
        out = A @ V
        return (out.T if transpose_out else out), A
    return fn


@pytest.mark.parametrize("scale, hint", [
    (lambda Q, K, V: 1.0, "not scaled"),
    (lambda Q, K, V: 1.0 / Q.shape[-1], "square root of D"),
    (lambda Q, K, V: 1.0 / np.sqrt(64), "not d_model"),
    (lambda Q, K, V: 1.0 / np.sqrt(Q.shape[0]), "not sqrt(T), the number of queries"),
    (lambda Q, K, V: 1.0 / np.sqrt(K.shape[0]), "not sqrt(T), the number of keys"),
    (lambda Q, K, V: 1.0 / np.sqrt(V.shape[-1]), "not sqrt(D_v), the width of the values"),
])
def test_attention_wrong_scale(scale, hint, capsys):
    """Each mis-scaling gets its own hint: the hand case has T_q, T_k, D, D_v all different."""
    r = assert_rejects(cl.checks.check_single_head_attention, _attention_with(scale=scale), capsys,
                       "hand-checkable case", hint)
    assert r.message.startswith("A is wrong")


def test_attention_softmax_over_wrong_axis(capsys):
    assert_rejects(cl.checks.check_single_head_attention, _attention_with(axis=0), capsys,
                   "hand-checkable case", "wrong axis")


def test_attention_output_transposed(capsys):
    r = assert_rejects(cl.checks.check_single_head_attention, _attention_with(transpose_out=True), capsys,
                       "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)", "do not transpose")
    assert "out has shape (2, 3)" in r.message


def test_attention_keys_times_queries(capsys):
    r = assert_rejects(cl.checks.check_single_head_attention, _attention_with(qk="KQ"), capsys,
                       "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)",
                       "the scores and A are (T_q, T_k) = (3, 5)")
    assert "ValueError" in r.message


def test_attention_naive_softmax_overflows(capsys):
    def naive(Q, K, V):
        E = np.exp(Q @ K.T / np.sqrt(Q.shape[-1]))
        A = E / E.sum(axis=-1, keepdims=True)
        return A @ V, A

    assert_rejects(cl.checks.check_single_head_attention, naive, capsys,
                   "large scores, about +800 and -800", "subtract each row's maximum")


def test_attention_global_max_fails_on_rows_far_apart(capsys):
    def global_max(Q, K, V):
        S = Q @ K.T / np.sqrt(Q.shape[-1])
        E = np.exp(S - S.max())
        A = E / E.sum(axis=-1, keepdims=True)
        return A @ V, A

    r = assert_rejects(cl.checks.check_single_head_attention, global_max, capsys,
                       "large scores, about +800 and -800", "each row's own maximum")
    assert r.message.startswith("A contains NaN in row(s) [1, 3]")


def test_attention_a_transposed_times_v(capsys):
    """A.T @ V cannot be formed when T_q != T_k: a failed result at the first stage, not a crash."""
    def wrong(Q, K, V):
        _, A = attention(Q, K, V)
        return A.T @ V, A

    r = assert_rejects(cl.checks.check_single_head_attention, wrong, capsys,
                       "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)", "out = A @ V is (3, 2)")
    assert "ValueError" in r.message and "A.T @ V" in r.message


def test_attention_diagnoses_a_transposed_on_square_inputs():
    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((4, 4)) for _ in range(3))
    _, A = attention(Q, K, V)
    with pytest.raises(cl.checks.CheckFailed) as err:
        checks_attention.diagnose(A.T @ V, A @ V, checks_attention._out_mistakes(Q, K, V), "out = A @ V")
    assert "not A.T @ V" in err.value.hint


def test_attention_returns_only_out(capsys):
    r = assert_rejects(cl.checks.check_single_head_attention, lambda Q, K, V: attention(Q, K, V)[0], capsys,
                       "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)", "return out, A")
    assert "2 arrays" in r.message


# ---- Exercise 3.4: softmax backward --------------------------------------------------------

@pytest.mark.parametrize("wrong, hint", [
    (lambda dy, y: dy * y, "only the diagonal term"),
    (lambda dy, y: y * (1 - y) * dy, "only the diagonal of the Jacobian"),
    (lambda dy, y: dy - np.sum(dy * y, axis=-1, keepdims=True), "multiply by y"),
    (lambda dy, y: y * (dy - np.sum(dy, axis=-1, keepdims=True)), "weighted by y"),
    (lambda dy, y: y * (dy - np.sum(dy * y)), "each row separately"),
    (lambda dy, y: y * (dy - np.sum(dy * y, axis=0, keepdims=True)), "not over axis 0"),
    (lambda dy, y: -softmax_backward(dy, y), "sign"),
    (lambda dy, y: y * (dy - np.mean(dy, axis=-1, keepdims=True)), "need not sum to zero"),
])
def test_softmax_backward_rejects(wrong, hint, capsys):
    assert_rejects(cl.checks.check_softmax_backward, wrong, capsys, "hand-checkable case", hint)


def test_softmax_backward_arguments_swapped(capsys):
    result, out = run_check(cl.checks.check_softmax_backward, lambda dy, y: softmax_backward(y, dy), capsys)
    assert not result.passed and result.stage == "hand-checkable case"


def test_softmax_backward_explicit_jacobian_passes(capsys):
    """Building J = diag(y) - y y^T row by row is slower but right."""
    def jacobian(dy, y):
        dy, y = np.atleast_2d(dy), np.atleast_2d(y)
        return np.stack([(np.diag(yr) - np.outer(yr, yr)) @ dr for dr, yr in zip(dy, y)])

    assert_passes(cl.checks.check_softmax_backward, jacobian, capsys)


def test_softmax_backward_wrong_shape(capsys):
    r = assert_rejects(cl.checks.check_softmax_backward, lambda dy, y: softmax_backward(dy, y).sum(axis=0),
                       capsys, "shapes", "shape of z")
    assert "expected (2, 3)" in r.message


# ---- Exercise 3.6: single-head attention backward ------------------------------------------

def _backward_with(scale=lambda D: 1 / np.sqrt(D), smb=softmax_backward, dk_transpose=True):
    def fn(dout, Q, K, V, A):
        s = scale(Q.shape[-1])
        dV = A.T @ dout
        dS = smb(dout @ V.T, A)
        dK = (dS.T @ Q if dk_transpose else dS @ Q) * s
        return dS @ K * s, dK, dV
    return fn


@pytest.mark.parametrize("wrong, stage, hint", [
    (_backward_with(scale=lambda D: 1.0), "hand-checkable case: uniform attention", "carries the same factor"),
    (_backward_with(scale=lambda D: 1.0 / D), "hand-checkable case: uniform attention", "not by D"),
    (_backward_with(smb=lambda d, y: y * (1 - y) * d), "hand-checkable case: uniform attention",
     "only the diagonal"),
    (_backward_with(smb=lambda d, y: d * y), "hand-checkable case: uniform attention", "misses the"),
    (_backward_with(smb=lambda d, y: d), "hand-checkable case: uniform attention", "through the softmax"),
])
def test_attention_backward_rejects(wrong, stage, hint, capsys):
    r = assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys, stage, hint)
    assert r.message.startswith("dQ is wrong")


def test_attention_backward_dk_not_transposed(capsys):
    """dS @ Q cannot be formed when T_q != T_k: a failed result at the first stage, not a crash."""
    r = assert_rejects(cl.checks.check_single_head_attention_backward, _backward_with(dk_transpose=False),
                       capsys, "returns (dQ, dK, dV) with the shapes of Q, K, V",
                       "each gradient has the shape of its array")
    assert "ValueError" in r.message


def test_attention_backward_dk_missing_scale(capsys):
    def wrong(dout, Q, K, V, A):
        dQ, dK, dV = attention_backward(dout, Q, K, V, A)
        return dQ, dK * np.sqrt(Q.shape[-1]), dV

    r = assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys, "random cases",
                       "dK = dS.T @ Q / sqrt(D)")
    assert r.message.startswith("dK is wrong")


def test_attention_backward_dv_wrong(capsys):
    def wrong(dout, Q, K, V, A):
        dQ, dK, _ = attention_backward(dout, Q, K, V, A)
        return dQ, dK, (A.T @ dout) * 2

    r = assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys,
                       "hand-checkable case: uniform attention",
                       "value s collects the gradient of every query t")
    assert r.message.startswith("dV is wrong")


def test_attention_backward_wrong_order(capsys):
    def swapped(dout, Q, K, V, A):
        dQ, dK, dV = attention_backward(dout, Q, K, V, A)
        return dK, dQ, dV

    r = assert_rejects(cl.checks.check_single_head_attention_backward, swapped, capsys,
                       "returns (dQ, dK, dV) with the shapes of Q, K, V", "order dQ, dK, dV")
    assert "dQ has shape (5, 4)" in r.message


def test_attention_backward_returns_two(capsys):
    r = assert_rejects(cl.checks.check_single_head_attention_backward,
                       lambda dout, Q, K, V, A: attention_backward(dout, Q, K, V, A)[:2], capsys,
                       "returns (dQ, dK, dV) with the shapes of Q, K, V", "return dQ, dK, dV")
    assert "tuple of length 2" in r.message


def test_attention_backward_reference_matches_kernel():
    """The checker's reference agrees with course_lib's kernel (n_heads = 1)."""
    rng = np.random.default_rng(0)
    Q, K, V, dout = (rng.standard_normal((6, 8)) for _ in range(4))
    qkv = np.ascontiguousarray(np.concatenate([Q, K, V], axis=1)[None])
    out, att = cl.kernels.attention_forward(qkv, 1, False)
    ref_out, A = checks_attention._attention(Q, K, V)
    np.testing.assert_allclose(out[0], ref_out, atol=1e-12)
    dqkv = cl.kernels.attention_backward(np.ascontiguousarray(dout[None]), qkv, att)[0]
    for got, want in zip(np.split(dqkv, 3, axis=1), checks_attention._attention_backward(dout, Q, K, V, A)):
        np.testing.assert_allclose(got, want, atol=1e-12)


# ---- misdiagnoses fixed in version 2 -------------------------------------------------------

@pytest.mark.parametrize("wrong", [
    lambda dy, y: y * (dy - dy @ y),
    lambda dy, y: y * (dy - np.dot(dy, y)),
    lambda dy, y: dy * y - y * (dy @ y),
    lambda dy, y: y * (dy - dy @ y.T),
    lambda dy, y: y * (dy - np.inner(dy, y)),
])
def test_softmax_backward_one_row_formula_on_a_matrix(wrong, capsys):
    """The single-row formula applied to (N, K): not 'use keepdims', but 'one number per ROW'."""
    r = assert_rejects(cl.checks.check_softmax_backward, wrong, capsys, "shapes", "one number per ROW")
    assert "keepdims=True), an (N, 1) column" in r.hint


def test_softmax_backward_row_product_on_its_own_line(capsys):
    """The product on one line, the failing broadcast on the next: found by running it on (3, 3)."""
    def wrong(dy, y):
        s = dy @ y.T
        return y * (dy - s)

    assert_rejects(cl.checks.check_softmax_backward, wrong, capsys, "shapes", "one number per ROW")


def test_softmax_backward_flattened_dot(capsys):
    def flat(dy, y):
        return y * (dy - np.dot(dy.ravel(), y.ravel()))

    r = assert_rejects(cl.checks.check_softmax_backward, flat, capsys, "hand-checkable case",
                       "one number per ROW")
    assert "flattened" in r.hint


def test_softmax_backward_without_keepdims_is_told_keepdims(capsys):
    def no_keepdims(dy, y):
        return y * (dy - np.sum(dy * y, axis=-1))

    assert_rejects(cl.checks.check_softmax_backward, no_keepdims, capsys, "shapes", "keepdims=True")


# ---- inputs changed in place ---------------------------------------------------------------

def _softmax_in_place(x):
    x -= np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)


def _attention_in_place(Q, K, V):
    Q /= np.sqrt(Q.shape[-1])
    return attention(Q * np.sqrt(Q.shape[-1]), K, V)


def _softmax_backward_in_place(dy, y):
    dx = softmax_backward(dy, y)
    dy *= 0.0
    return dx


def _attention_backward_in_place(dout, Q, K, V, A):
    grads = attention_backward(dout, Q, K, V, A)
    A -= A
    return grads


@pytest.mark.parametrize("check, fn, name", [
    (cl.checks.check_stable_softmax, _softmax_in_place, "x"),
    (cl.checks.check_single_head_attention, _attention_in_place, "Q"),
    (cl.checks.check_softmax_backward, _softmax_backward_in_place, "dy"),
    (cl.checks.check_single_head_attention_backward, _attention_backward_in_place, "A"),
])
def test_right_answer_computed_in_place_is_rejected(check, fn, name, capsys):
    r = assert_rejects(check, fn, capsys, r_stage(check), f"`{name}`")
    assert f"changed its input `{name}` in place" in r.message


def r_stage(check):
    """The first stage of each checker, where the in-place change is found."""
    return {cl.checks.check_stable_softmax: "shapes",
            cl.checks.check_single_head_attention: "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)",
            cl.checks.check_softmax_backward: "shapes",
            cl.checks.check_single_head_attention_backward:
                "returns (dQ, dK, dV) with the shapes of Q, K, V"}[check]


# ---- float32 accumulation is a dtype problem -------------------------------------------------

def _f32(fn):
    def wrapped(*args):
        result = fn(*(np.asarray(a).astype(np.float32) for a in args))
        return tuple(r.astype(np.float32) for r in result) if isinstance(result, tuple) else result
    return wrapped


@pytest.mark.parametrize("check, fn", CHECKERS)
def test_float32_computation_is_named_as_a_dtype_problem(check, fn, capsys):
    result, out = run_check(check, _f32(fn), capsys)
    assert not result.passed and result.done, out
    assert "float32" in result.message and "dtype problem" in result.hint, out
    assert "Traceback" not in out


# ---- odd return values: a sentence, never a crash --------------------------------------------

@pytest.mark.parametrize("check, fn", CHECKERS)
@pytest.mark.parametrize("odd, words", [
    (lambda r: None, "None"),
    (lambda r: "done", "str"),
    (lambda r: tuple(np.asarray(a) * (1 + 1j) for a in r) if isinstance(r, tuple) else r * (1 + 1j),
     "complex"),
    (lambda r: (r, r, r, r) if not isinstance(r, tuple) else r + (r[0],), "length"),
    (lambda r: r[:1] if isinstance(r, tuple) else [r, r], "length"),
])
def test_odd_return_values(check, fn, odd, words, capsys):
    result, out = run_check(check, lambda *args: odd(fn(*args)), capsys)
    assert not result.passed and result.done, out
    assert "Traceback" not in out and out.startswith("✗ Exercise 3.")
    if words != "length" or isinstance(fn(*_SAMPLE_ARGS[fn.__name__]), tuple):
        assert words in result.message or words in (result.hint or ""), (result.message, result.hint)


_RNG = np.random.default_rng(5)
_SAMPLE_ARGS = {
    "softmax": (_RNG.standard_normal((2, 3)),),
    "attention": tuple(_RNG.standard_normal((3, 4)) for _ in range(3)),
    "softmax_backward": (_RNG.standard_normal((2, 3)), np.full((2, 3), 1 / 3)),
    "attention_backward": (_RNG.standard_normal((3, 4)),) + tuple(_RNG.standard_normal((3, 4)) for _ in range(3))
    + (np.full((3, 3), 1 / 3),),
}


# ---- misdiagnoses fixed after the learner's review -----------------------------------------

def test_attention_outputs_swapped(capsys):
    """return A, out: named as the swapped pair, not as a wrong shape of A."""
    r = assert_rejects(cl.checks.check_single_head_attention,
                       lambda Q, K, V: attention(Q, K, V)[::-1], capsys,
                       "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)",
                       "you seem to return (A, out); return (out, A)")
    assert r.message.startswith("out has shape (3, 5)")


def test_attention_backward_da_transposed(capsys):
    """dA = V @ dout.T is (T_k, T_q): the broadcast against A fails, and the hint names dA,
    not keepdims."""
    def wrong(dout, Q, K, V, A):
        D = Q.shape[-1]
        dV = A.T @ dout
        dA = V @ dout.T
        dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
        return dS @ K / np.sqrt(D), dS.T @ Q / np.sqrt(D), dV

    r = assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys,
                       "returns (dQ, dK, dV) with the shapes of Q, K, V", "dA = dout @ V.T")
    assert "(T_k, T_q)" in r.hint and "keepdims" not in r.hint


def test_attention_backward_without_keepdims_is_still_told_keepdims(capsys):
    def wrong(dout, Q, K, V, A):
        D = Q.shape[-1]
        dA = dout @ V.T
        dS = A * (dA - np.sum(dA * A, axis=-1))
        return dS @ K / np.sqrt(D), dS.T @ Q / np.sqrt(D), A.T @ dout

    assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys,
                   "returns (dQ, dK, dV) with the shapes of Q, K, V", "keepdims=True")


@pytest.mark.parametrize("wrong, stage, hint", [
    (_backward_with(scale=lambda D: np.sqrt(D)), "hand-checkable case: uniform attention",
     "divide by sqrt(D), do not multiply"),
    (_backward_with(smb=lambda d, y: y * (d - np.sum(d, axis=-1, keepdims=True))),
     "hand-checkable case: uniform attention", "the sum is weighted by y (here A)"),
    (_backward_with(smb=lambda d, y: y * (d - np.sum(d * y))),
     "hand-checkable case: uniform attention", "one number per ROW"),
    (_backward_with(smb=lambda d, y: y * (d - np.sum(d))),
     "hand-checkable case: uniform attention", "the sum is weighted by y (here A)"),
])
def test_attention_backward_rejects_after_review(wrong, stage, hint, capsys):
    r = assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys, stage, hint)
    assert r.message.startswith("dQ is wrong")


def test_attention_backward_dk_multiplied_by_sqrt_d(capsys):
    def wrong(dout, Q, K, V, A):
        dQ, dK, dV = attention_backward(dout, Q, K, V, A)
        return dQ, dK * Q.shape[-1], dV

    r = assert_rejects(cl.checks.check_single_head_attention_backward, wrong, capsys, "random cases",
                       "divide by sqrt(D), do not multiply")
    assert r.message.startswith("dK is wrong")
