"""Checkers of notebook 03 (single-head attention): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
import inspect
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import attention as checks_attention

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "03_single_head_attention.ipynb"


# ---- the reference solutions: the exact code of the notebook's solution regions ----------

def softmax(x):
    """Row-wise softmax of x (N, K): every row of the result sums to 1."""
    z = x - np.max(x, axis=-1, keepdims=True)   # the largest entry of each row becomes 0
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


def attention(Q, K, V):
    """Single-head attention. Q (T_q, D), K (T_k, D), V (T_k, D_v) -> out (T_q, D_v), A (T_q, T_k)."""
    D = Q.shape[-1]
    S = Q @ K.T / np.sqrt(D)
    E = np.exp(S - np.max(S, axis=-1, keepdims=True))
    A = E / np.sum(E, axis=-1, keepdims=True)
    return A @ V, A


def softmax_backward(dy, y):
    """dx = y * (dy - sum_j dy_j y_j) per row. dy, y (N, K) -> dx (N, K)."""
    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))


def attention_backward(dout, Q, K, V, A):
    """Backward of out = softmax(Q K^T / sqrt(D)) V. Returns dQ (T_q, D), dK (T_k, D), dV (T_k, D_v)."""
    D = Q.shape[-1]
    dV = A.T @ dout
    dA = dout @ V.T
    dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    dQ = dS @ K / np.sqrt(D)
    dK = dS.T @ Q / np.sqrt(D)
    return dQ, dK, dV


# ---- helpers ------------------------------------------------------------------------------

def run(check, fn, capsys):
    result = check(fn)
    out = capsys.readouterr().out
    return result, out


def assert_passes(check, fn, capsys):
    result, out = run(check, fn, capsys)
    assert result.passed and result.done, out
    assert out.startswith("✓ Exercise 3.") and "stages passed" in out
    assert "Traceback" not in out
    return result


def assert_rejects(check, fn, capsys, stage, hint_part):
    result, out = run(check, fn, capsys)
    assert not result.passed and result.done, out
    assert result.stage == stage, (result.stage, out)
    assert result.hint is not None and hint_part in result.hint, (result.hint, out)
    assert out.startswith("✗ Exercise 3.") and f"[stage: {stage}]" in out
    assert "  Hint: " in out and "Traceback" not in out
    return result


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


@pytest.mark.parametrize("check, _", CHECKERS)
def test_stub_is_not_done(check, _, capsys):
    def stub(*args):
        raise NotImplementedError("Exercise 3.k: your code here")

    result, out = run(check, stub, capsys)
    assert not result.passed and not result.done
    assert "not done yet" in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("check, _", CHECKERS)
def test_other_exception_is_a_failed_result(check, _, capsys):
    def broken(*args):
        return undefined_name  # noqa: F821  a learner's NameError

    result, out = run(check, broken, capsys)
    assert not result.passed and result.done
    assert "NameError" in result.message and "Traceback" not in out


@pytest.mark.parametrize("check, _", CHECKERS)
def test_not_callable(check, _, capsys):
    result, out = run(check, np.zeros(3), capsys)
    assert not result.passed and "pass your function itself" in out


def test_reference_solutions_match_the_notebook(capsys):
    """The functions above are the notebook's solution regions, and the notebook's pass."""
    if not NOTEBOOK.exists():
        pytest.skip("notebook not written yet")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert len(cells) == 4
    namespace = {"np": np}
    for source in cells:
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    for check, fn in CHECKERS:
        assert_passes(check, namespace[fn.__name__], capsys)
        own = [src for src in cells if f"def {fn.__name__}(" in src]
        assert len(own) == 1
        solution = own[0].split("### BEGIN SOLUTION\n")[1].split("### END SOLUTION")[0]
        assert solution.strip() in inspect.getsource(fn), fn.__name__


# ---- Exercise 3.1: stable softmax ----------------------------------------------------------

def test_softmax_global_max_is_accepted(capsys):
    """Subtracting the maximum of the whole array is a valid shift of every row: accept it."""
    def global_max(x):
        e = np.exp(x - np.max(x))
        return e / np.sum(e, axis=-1, keepdims=True)

    assert_passes(cl.checks.check_stable_softmax, global_max, capsys)


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

    run(cl.checks.check_stable_softmax, naive, capsys)
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
    result, out = run(cl.checks.check_stable_softmax, lambda x: "a string", capsys)
    assert not result.passed and "NumPy array of numbers" in result.message


@pytest.mark.parametrize("check, _", CHECKERS)
def test_missing_return(check, _, capsys):
    result, out = run(check, lambda *args: None, capsys)
    assert not result.passed and result.done and result.stage is not None
    assert "returned None" in result.message and "return" in result.hint


# ---- Exercise 3.2: single-head attention forward -------------------------------------------

def _attention_with(scale=None, axis=-1, transpose_out=False, qk="QK"):
    def fn(Q, K, V):
        D = Q.shape[-1]
        S = (Q @ K.T if qk == "QK" else K @ Q.T) * (1 / np.sqrt(D) if scale is None else scale(Q, K))
        E = np.exp(S - np.max(S, axis=axis, keepdims=True))
        A = E / np.sum(E, axis=axis, keepdims=True)
        out = A @ V
        return (out.T if transpose_out else out), A
    return fn


@pytest.mark.parametrize("scale, hint", [
    (lambda Q, K: 1.0, "not scaled"),
    (lambda Q, K: 1.0 / Q.shape[-1], "square root of D"),
    (lambda Q, K: 1.0 / np.sqrt(64), "not d_model"),
    (lambda Q, K: 1.0 / np.sqrt(Q.shape[0]), "not sqrt(T)"),
])
def test_attention_wrong_scale(scale, hint, capsys):
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
                       "returns (out, A) with shapes (T_q, D_v) and (T_q, T_k)", "S = Q @ K.T and A are (3, 5)")
    assert "ValueError" in r.message


def test_attention_naive_softmax_overflows(capsys):
    def naive(Q, K, V):
        E = np.exp(Q @ K.T / np.sqrt(Q.shape[-1]))
        A = E / E.sum(axis=-1, keepdims=True)
        return A @ V, A

    assert_rejects(cl.checks.check_single_head_attention, naive, capsys,
                   "large scores, about +800 and -800", "subtract each row's maximum")


def test_attention_global_max_is_accepted(capsys):
    def global_max(Q, K, V):
        S = Q @ K.T / np.sqrt(Q.shape[-1])
        E = np.exp(S - S.max())
        A = E / E.sum(axis=-1, keepdims=True)
        return A @ V, A

    assert_passes(cl.checks.check_single_head_attention, global_max, capsys)


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


# ---- Exercise 3.3: softmax backward --------------------------------------------------------

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
    result, out = run(cl.checks.check_softmax_backward, lambda dy, y: softmax_backward(y, dy), capsys)
    assert not result.passed and result.stage == "hand-checkable case"


def test_softmax_backward_explicit_jacobian_passes(capsys):
    """Building J = diag(y) - y y^T row by row is slower but right."""
    def jacobian(dy, y):
        dy, y = np.atleast_2d(dy), np.atleast_2d(y)
        return np.stack([(np.diag(yr) - np.outer(yr, yr)) @ dr for dr, yr in zip(dy, y)])

    assert_passes(cl.checks.check_softmax_backward, jacobian, capsys)


def test_softmax_backward_wrong_shape(capsys):
    r = assert_rejects(cl.checks.check_softmax_backward, lambda dy, y: softmax_backward(dy, y).sum(axis=0),
                       capsys, "shapes", "shape of x")
    assert "expected (2, 3)" in r.message


# ---- Exercise 3.4: single-head attention backward ------------------------------------------

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
                       capsys, "returns (dQ, dK, dV) with the shapes of Q, K, V", "dK = dS.T @ Q / sqrt(D) is (5, 4)")
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
                       "hand-checkable case: uniform attention", "dV = A.T @ dout")
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
