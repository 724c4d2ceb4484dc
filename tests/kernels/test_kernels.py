"""Every kernel's backward against float64 central differences (rel error < 1e-6)."""
import os

import numpy as np
import pytest

from course_lib import kernels as K
from course_lib.kernels import numpy_ref
from course_lib.gradcheck import check_function, check_op, numerical_gradient, rel_error

TOL = 1e-6
rng = np.random.default_rng(0)


def randn(*shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def assert_all_small(errors):
    assert errors and all(e < TOL for e in errors.values()), errors


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
    x, w, b = randn(5, 4), randn(4, 3), randn(3)

    def forward(x, w, b):
        return K.linear_forward(x, w, b if bias else None)

    def backward(dy):
        dx, dw, db = K.linear_backward(dy, x, w, bias)
        return {"x": dx, "w": dw, "b": db}
    errors = check_op(forward, backward, {"x": x, "w": w, "b": b})
    if not bias:
        errors.pop("b")
    assert_all_small(errors)


def test_linear_accepts_a_transposed_weight():
    x, e = randn(5, 4), randn(3, 4)
    np.testing.assert_allclose(K.linear_forward(x, e.T, None), x @ e.T, rtol=1e-12)


def test_embedding_with_repeated_tokens_accumulates():
    tokens = np.array([[3, 1, 3, 3], [0, 1, 2, 3]])
    E, P = randn(5, 6), randn(4, 6)

    def backward(dy):
        d_tok, d_pos = K.embedding_backward(tokens, dy, 5)
        return {"E": d_tok, "P": d_pos}
    assert_all_small(check_op(lambda E, P: K.embedding_forward(tokens, E, P), backward, {"E": E, "P": P}))
    dy = randn(2, 4, 6)
    d_tok, _ = K.embedding_backward(tokens, dy, 5)
    np.testing.assert_allclose(d_tok[3], dy[0, 0] + dy[0, 2] + dy[0, 3] + dy[1, 3], rtol=1e-12)
    assert np.all(d_tok[4] == 0)



@pytest.mark.parametrize("kernels", [K, numpy_ref], ids=["numba", "numpy"])
def test_embedding_gradient_adds_into_a_given_array(kernels):
    """With tied embeddings the token rows add into the head's share of dE, in place, not into a new array."""
    tokens = np.array([[3, 1, 3], [0, 1, 2]])
    dy, head_share = randn(2, 3, 6), randn(5, 6)
    expected = head_share + K.embedding_backward(tokens, dy, 5)[0]
    d_tok, _ = kernels.embedding_backward(tokens, dy, 5, head_share)
    assert d_tok is head_share
    np.testing.assert_allclose(d_tok, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="d_tok must be"):
        kernels.embedding_backward(tokens, dy, 5, randn(4, 6))

def test_embedding_without_positions():
    tokens = np.array([[1, 0]])
    E = randn(2, 3)
    np.testing.assert_array_equal(K.embedding_forward(tokens, E, None)[0], E[[1, 0]])


def test_sinusoidal_table_interleaves_sin_and_cos():
    P = K.sinusoidal_table(8, 6)
    pos, i = 5, 1
    assert P[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / 6)))
    assert P[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / 6)))
    assert np.all(P[0, 0::2] == 0) and np.all(P[0, 1::2] == 1)


@pytest.mark.parametrize("constant_row", [False, True])
def test_layernorm(constant_row):
    x, gamma, beta = randn(4, 8), 1 + randn(8, scale=0.3), randn(8)
    if constant_row:
        x[2] = 0.7      # var = 0: eps alone keeps 1/sqrt(var + eps) finite
    eps = 1e-5
    tape = {}

    def forward(x, gamma, beta):
        y, tape["xhat"], tape["rstd"] = K.layernorm_forward(x, gamma, beta, eps)
        return y

    def backward(dy):
        dx, dg, db = K.layernorm_backward(dy, tape["xhat"], tape["rstd"], gamma)
        return {"x": dx, "gamma": dg, "beta": db}
    assert_all_small(check_op(forward, backward, {"x": x, "gamma": gamma, "beta": beta}))


def test_layernorm_matches_definition():
    x = randn(3, 10)
    y, xhat, rstd = K.layernorm_forward(x, np.ones(10), np.zeros(10), 1e-5)
    expected = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, expected, rtol=1e-12)


def test_relu():
    h = randn(6, 7)
    h[np.abs(h) < 1e-3] = 0.5       # keep away from the kink, where the derivative is undefined
    assert_all_small(check_op(K.relu_forward, lambda dy: {"h": K.relu_backward(dy, h)}, {"h": h}))


def test_gelu_including_large_inputs():
    h = randn(6, 7, scale=2.0)
    h[0, :3] = [-12.0, 9.0, 30.0]
    assert_all_small(check_op(K.gelu_forward, lambda dy: {"h": K.gelu_backward(dy, h)}, {"h": h}))


def test_gelu_backward_reads_the_forward_output():
    h = randn(6, 7, scale=2.0)
    h[0, :6] = [0.0, -0.0, 1e-30, -12.0, 30.0, -5.0]
    y = K.gelu_forward(h)
    assert_all_small(check_op(K.gelu_forward, lambda dy: {"h": K.gelu_backward(dy, h, y)}, {"h": h}))
    dy = randn(6, 7)
    np.testing.assert_allclose(K.gelu_backward(dy, h, y), K.gelu_backward(dy, h), rtol=1e-13, atol=1e-15)
    assert K.gelu_backward(np.ones((1, 1)), np.zeros((1, 1)), np.zeros((1, 1)))[0, 0] == 0.5
    for dtype in (np.float32, np.float64):              # two halves of rows on two threads: the same
        from course_lib.kernels._fast.threads import set_num_threads
        big = randn(300, 301).astype(dtype)
        with set_num_threads(1):
            one = K.gelu_forward(big), K.gelu_backward(big, big, K.gelu_forward(big))
        with set_num_threads(2):
            np.testing.assert_array_equal(K.gelu_forward(big), one[0])
            np.testing.assert_array_equal(K.gelu_backward(big, big, K.gelu_forward(big)), one[1])


def test_gelu_in_float32_keeps_its_digits_in_both_tails():
    # 0.5 h (1 + tanh(u)) would cancel for negative u and keep only a few digits of y there.
    # What float32 cannot avoid: u's rounding, relative 2u * eps in exp(-2u), and in the
    # backward the cancellation of its two terms where GELU' crosses 0 (h near -0.75); values
    # within a few hundred times float32's smallest normal number (1.2e-38) may flush to 0.
    h = np.linspace(-12, 12, 24001).astype(np.float32)[None, :]
    x = h.astype(np.float64)
    eps = np.finfo(np.float32).eps
    u = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
    s = 1 / (1 + np.exp(-2 * u))
    du = np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x ** 2)
    slack = 4 * eps * (1 + 2 * np.abs(u))
    y = K.gelu_forward(h)
    assert np.all(np.abs(y - x * s) <= slack * np.abs(x * s) + 1e-35)
    terms = np.abs(s) + np.abs(2 * x * s * (1 - s) * du)
    for dh in (K.gelu_backward(np.ones_like(h), h), K.gelu_backward(np.ones_like(h), h, y)):
        assert np.all(np.abs(dh - (s + 2 * x * s * (1 - s) * du)) <= slack * terms + 1e-35)


def test_gelu_is_the_tanh_approximation():
    h = np.linspace(-4, 4, 9)[None, :]
    y = K.gelu_forward(h)
    ref = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-15)


def test_residual_sends_the_gradient_down_both_paths():
    x, fx = randn(3, 4), randn(3, 4)

    def backward(dy):
        dx, dfx = K.residual_backward(dy)
        return {"x": dx, "fx": dfx}
    assert_all_small(check_op(K.residual_forward, backward, {"x": x, "fx": fx}))


@pytest.mark.parametrize("scale", [1.0, 1000.0])
def test_softmax_stable_and_exact(scale):
    x = randn(4, 6, scale=scale)
    x[0] = [1000.0, 999.0, -1000.0, 998.5, 0.0, 1000.0]
    y = K.softmax_forward(x)
    assert np.all(np.isfinite(y)) and np.allclose(y.sum(1), 1.0)
    h = 1e-5 if scale == 1.0 else 1e-3
    errors = check_op(K.softmax_forward, lambda dy: {"x": K.softmax_backward(dy, K.softmax_forward(x))},
                      {"x": x}, h=h)
    assert_all_small(errors)


def test_softmax_input_gradient_sums_to_zero():
    x, dy = randn(3, 5), randn(3, 5)
    dx = K.softmax_backward(dy, K.softmax_forward(x))
    np.testing.assert_allclose(dx.sum(1), 0, atol=1e-14)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_heads", [1, 2])
@pytest.mark.parametrize("T", [5, K.attention.BLAS_MIN_T + 3])   # the loop path and the BLAS path
def test_attention(causal, n_heads, T):
    B, C = 2, 4
    qkv = randn(B, T, 3 * C)
    tape = {}

    def forward(qkv):
        out, tape["att"] = K.attention_forward(qkv, n_heads, causal)
        return out
    for told in (False, causal):        # the backward told of the mask skips its zeros: the same gradient
        assert_all_small(check_op(forward, lambda dy: {"qkv": K.attention_backward(dy, qkv, tape["att"], told)},
                                  {"qkv": qkv}))


@pytest.mark.parametrize("T", [K.attention.BLOCK, 2 * K.attention.BLOCK + 5, 3 * K.attention.BLOCK])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_in_blocks_of_rows_on_two_threads_is_the_definition_every_time(T, dtype):
    """The BLAS path: blocks of query rows (the causal ones skipping masked keys), the (b, h) pairs
    split over two threads. Same as the NumPy twin; bit for bit the same on one thread."""
    from course_lib.kernels._fast.threads import set_num_threads
    B, C, H = 3, 16, 4
    qkv = randn(B, T, 3 * C).astype(dtype)
    dout = randn(B, T, C).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for causal in (False, True):
        with set_num_threads(2):
            out, att = K.attention_forward(qkv, H, causal)
            dqkv = K.attention_backward(dout, qkv, att, causal)
        ref_out, ref_att = numpy_ref.attention_forward(qkv.astype(np.float64), H, causal)
        np.testing.assert_allclose(out, ref_out, rtol=tol, atol=tol)
        np.testing.assert_allclose(att, ref_att, rtol=tol, atol=tol)
        ref = numpy_ref.attention_backward(dout.astype(np.float64), qkv.astype(np.float64), ref_att)
        np.testing.assert_allclose(dqkv, ref, rtol=tol, atol=tol)
        with set_num_threads(1):
            out1, att1 = K.attention_forward(qkv, H, causal)
            dqkv1 = K.attention_backward(dout, qkv, att, causal)
        for a, b in ((out, out1), (att, att1), (dqkv, dqkv1)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("T", [4, K.attention.BLAS_MIN_T + 1])
def test_attention_matches_definition_and_masks_the_future(T):
    B, C, H = 1, 6, 2
    D = C // H
    qkv = randn(B, T, 3 * C)
    out, att = K.attention_forward(qkv, H, True)
    for h in range(H):
        q, k, v = (qkv[0, :, j * C + h * D: j * C + (h + 1) * D] for j in range(3))
        s = q @ k.T / np.sqrt(D) + np.triu(np.full((T, T), -np.inf), 1)
        a = np.exp(s - s.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        np.testing.assert_allclose(att[0, h], a, rtol=1e-12)
        np.testing.assert_allclose(out[0, :, h * D:(h + 1) * D], a @ v, rtol=1e-12)
    assert np.all(np.triu(att[0, 0], 1) == 0)
    # The first position sees only itself: no gradient reaches a later key or value from it.
    dout = np.zeros_like(out)
    dout[0, 0] = randn(C)
    dqkv = K.attention_backward(dout, qkv, att)
    assert np.all(dqkv[0, 1:, C:] == 0)


@pytest.mark.parametrize("large", [False, True])
def test_cross_entropy_with_ignored_targets(large):
    z = randn(5, 7, scale=1000.0 if large else 1.0)
    if large:
        z[0, :3] = [1000.0, -1000.0, 999.0]
    y = np.array([2, -100, 0, 6, -100])
    loss, probs = K.cross_entropy_forward(z, y)
    assert np.isfinite(loss)
    ref = np.mean([np.log(np.sum(np.exp(z[n] - z[n].max()))) + z[n].max() - z[n, y[n]] for n in (0, 2, 3)])
    assert loss == pytest.approx(ref, rel=1e-12)
    dz = K.cross_entropy_backward(probs, y)
    assert np.all(dz[[1, 4]] == 0)
    h = 1e-3 if large else 1e-5
    numerical = numerical_gradient(lambda: K.cross_entropy_forward(z, y)[0], z, h)
    assert rel_error(dz, numerical) < TOL


def test_gradcheck_catches_a_wrong_backward():
    x = randn(4, 5)
    wrong = check_op(K.softmax_forward, lambda dy: {"x": dy * K.softmax_forward(x)}, {"x": x})
    assert wrong["x"] > 1e-2


def test_check_function_needs_float64():
    with pytest.raises(TypeError, match="float64"):
        check_function(lambda: 0.0, {"x": np.ones(3, dtype=np.float32)}, {"x": np.zeros(3)})


def test_relu_keeps_nan_visible():
    y = K.relu_forward(np.array([[np.nan, -1.0, 2.0]]))
    assert np.isnan(y[0, 0]) and y[0, 1] == 0 and y[0, 2] == 2


@pytest.mark.parametrize("causal", [False, True])
def test_attention_at_chosen_query_rows(causal):
    B, T, C, H = 2, 5, 4, 2
    qkv = randn(B, T, 3 * C)
    rows = np.array([4, 7, 9])
    out, att = K.attention_forward(qkv, H, causal)
    r_out, r_att = K.attention_rows_forward(qkv, H, causal, rows)
    np.testing.assert_allclose(r_out, out.reshape(B * T, C)[rows], rtol=1e-12)
    np.testing.assert_allclose(r_att, att.transpose(0, 2, 1, 3).reshape(B * T, H, T)[rows], rtol=1e-12)
    tape = {}

    def forward(qkv):
        o, tape["att"] = K.attention_rows_forward(qkv, H, causal, rows)
        return o
    assert_all_small(check_op(forward, lambda dy: {"qkv": K.attention_rows_backward(dy, qkv, tape["att"], rows)},
                              {"qkv": qkv}))


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-14), (np.float32, 2e-6)])
def test_gelu_matches_the_tanh_formula_in_both_precisions(dtype, tol):
    h = np.concatenate([np.linspace(-60, 60, 241), np.linspace(-3, 3, 601)]).astype(dtype)[None, :]
    y = K.gelu_forward(h)
    h64 = h.astype(np.float64)
    ref_t = np.tanh(np.sqrt(2 / np.pi) * (h64 + 0.044715 * h64 ** 3))
    assert y.dtype == dtype and np.all(np.isfinite(y))
    np.testing.assert_allclose(y, 0.5 * h64 * (1 + ref_t), atol=tol * 60, rtol=tol)
    ref_dh = 0.5 * (1 + ref_t) + 0.5 * h64 * (1 - ref_t ** 2) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * h64 ** 2)
    for dh in (K.gelu_backward(np.ones_like(h), h), K.gelu_backward(np.ones_like(h), h, y)):  # d/dh of 0.5 h (1 + t)
        assert dh.dtype == dtype and np.all(np.isfinite(dh))
        np.testing.assert_allclose(dh, ref_dh, atol=tol * 60, rtol=tol)


def test_scored_rows_and_id_range_checks():
    rows, bad = K.scored_rows(np.array([-100, 3, -100, 0]), 20)
    assert rows.tolist() == [1, 3] and bad == -1
    assert K.scored_rows(np.array([5, -100, 20, -7]), 20)[1] == 2      # the first bad one
    assert K.first_out_of_range(np.array([[0, 19], [3, 4]]), 20) == -1
    assert K.first_out_of_range(np.array([[0, 19], [-1, 20]]), 20) == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_in_every_layout(dtype):
    from course_lib.kernels._fast import blas
    matmul = blas.matmul
    a, b = randn(5, 3).astype(dtype), randn(3, 4).astype(dtype)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    for x, y in [(a, b), (a.T.copy().T, b), (a, b.T.copy().T),            # C and F layouts
                 (a[:1], b), (a[:, :1], b[:1])]:                           # one row, K = 1
        np.testing.assert_allclose(matmul(x, y), x @ y, rtol=tol, atol=tol)
    assert matmul(a[:, :0], b[:0]).shape == (5, 4) and not matmul(a[:, :0], b[:0]).any()
    if blas.NUMPY_BLAS is not None:      # CBLAS needs unit strides; the fallback copies what it gets
        with pytest.raises(ValueError, match="unit-stride"):
            matmul(randn(5, 6).astype(dtype)[:, ::2], b)                  # every other column: refused


def test_kernels_share_numpys_blas():
    """One OpenBLAS thread pool for NumPy and the kernels (two pools fight over the cores);
    Numba's a @ b only where NumPy has no CBLAS of its own, or COURSE_LIB_BLAS=numba says so."""
    from course_lib.kernels._fast import blas
    if os.environ.get(blas.FALLBACK_ENV) == "numba":
        assert blas.NUMPY_BLAS is None and blas.matmul is blas._matmul_numba
        return
    if np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"] != "scipy-openblas":
        pytest.skip("this NumPy is not the PyPI wheel with its own OpenBLAS")
    assert blas.NUMPY_BLAS is not None and blas.matmul is blas._matmul_numpy_blas
    assert blas.NUMPY_BLAS == blas.NUMPY_BLAS_CONTROLLER.filepath      # found by threadpoolctl


@pytest.mark.parametrize("which", ["numpy_blas", "numba"])     # the second serves NumPy builds without the library
def test_matmul_into_column_blocks(which):
    """Attention's products read and write heads' column blocks in place (leading dimension > width)."""
    from course_lib.kernels._fast import blas
    if which == "numpy_blas" and blas.NUMPY_BLAS is None:
        pytest.skip("NumPy's BLAS is not loaded for the kernels here (the fallback)")
    matmul_into = getattr(blas, "_matmul_into_" + which)
    big, other = randn(6, 9), randn(7, 9)
    a, b = big[:, 2:5], other[1:5, 3:6].T          # (6, 3) row-major block, (3, 4) transposed block
    dest = np.zeros((6, 10))
    matmul_into(a, b, dest[:, 4:8])
    np.testing.assert_allclose(dest[:, 4:8], a @ b, rtol=1e-13)
    assert not dest[:, :4].any() and not dest[:, 8:].any()           # nothing written outside the block
    np.testing.assert_allclose(getattr(blas, "_matmul_" + which)(a, b), a @ b, rtol=1e-13)


def test_numpy_twins_import_without_numba_and_every_kernel_names_its_twin():
    """numpy_ref is plain NumPy (a learner can read and run it alone); each fast kernel's docstring
    points at its twin, and each twin's docstring has its shapes and the notebook that teaches it."""
    import subprocess
    import sys
    from course_lib.kernels import numpy_ref
    code = ("import importlib.util, sys\n"
            "sys.modules['numba'] = None\n"         # `import numba` now fails
            f"spec = importlib.util.spec_from_file_location('numpy_ref', {numpy_ref.__file__!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(m.layernorm_forward(m.np.ones((2, 3)), m.np.ones(3), m.np.zeros(3), 1e-5)[0].shape)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "(2, 3)", out.stderr
    twins = [n for n in dir(numpy_ref) if n.endswith(("_forward", "_backward"))]
    assert len(twins) == 20
    for name in twins:
        assert f"NumPy twin: numpy_ref.{name}." in getattr(K, name).__doc__, name
        doc = getattr(numpy_ref, name).__doc__
        assert "notebook" in doc.lower() and "(" in doc, name


def test_cross_entropy_with_no_scored_row_is_zero_in_the_kernel_and_its_twin():
    from course_lib.kernels import numpy_ref
    logits = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    targets = np.full(3, -100)
    for forward, backward in ((K.cross_entropy_forward, K.cross_entropy_backward),
                              (numpy_ref.cross_entropy_forward, numpy_ref.cross_entropy_backward)):
        loss, probs = forward(logits, targets)
        assert loss == 0.0 and not np.any(backward(probs, targets))


@pytest.mark.parametrize("call", [
    lambda r: K.linear_backward(r((1, 4)), r((8, 3)), r((3, 4)), True),        # dy of another batch
    lambda r: K.linear_backward(r((8, 5)), r((8, 3)), r((3, 4)), True),        # dy of another width
    lambda r: K.linear_forward(r((8, 3)), r((3, 4)), r((5,))),                 # bias of another width
    lambda r: K.layernorm_forward(r((8, 4)), r((5,)), r((4,)), 1e-5),
    lambda r: K.layernorm_backward(r((1, 4)), r((8, 4)), r((8,)), r((4,))),
])
def test_kernels_refuse_shapes_that_do_not_fit_instead_of_reading_past_an_array(call):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="must|do not fit"):
        call(lambda shape: rng.standard_normal(shape))


def test_block_backward_names_a_gradient_of_the_wrong_shape(batch):
    import course_lib as cl
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    model.forward(batch[0])
    s = model.saved["blocks"][0]
    with pytest.raises(ValueError, match="Block.backward: dy has shape"):
        model.blocks[0].backward(np.ones((1, 64), np.float32), s, {})
