"""Checkers of notebook 05 (residuals and LayerNorm): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import layernorm as checks_layernorm
from support import notebook_asserts, notebook_solutions, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "05_residuals_and_layernorm.ipynb"


# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 2, {"np": np})
layernorm_forward = SOLVED["layernorm_forward"]
layernorm_backward = SOLVED["layernorm_backward"]


def forward_loops(x, gamma, beta, eps):
    N, C = x.shape
    y, xhat, rstd = np.empty((N, C)), np.empty((N, C)), np.empty(N)
    for n in range(N):
        mu = sum(x[n]) / C
        var = sum((v - mu) ** 2 for v in x[n]) / C
        rstd[n] = 1 / np.sqrt(var + eps)
        for c in range(C):
            xhat[n, c] = (x[n, c] - mu) * rstd[n]
            y[n, c] = gamma[c] * xhat[n, c] + beta[c]
    return y, xhat, rstd


def backward_loops(dy, xhat, rstd, gamma):
    """The unsimplified chain rule: through xhat, the variance and the mean, one row at a time."""
    N, C = dy.shape
    dx, dgamma, dbeta = np.zeros((N, C)), np.zeros(C), np.zeros(C)
    for n in range(N):
        d = xhat[n] / rstd[n]                       # x - mean
        dxhat = dy[n] * gamma
        dvar = np.sum(dxhat * d) * -0.5 * rstd[n] ** 3
        dmu = -np.sum(dxhat) * rstd[n] + dvar * np.sum(-2 * d) / C
        dx[n] = dxhat * rstd[n] + dvar * 2 * d / C + dmu / C
        dgamma += dy[n] * xhat[n]
        dbeta += dy[n]
    return dx, dgamma, dbeta


# ---- helpers ------------------------------------------------------------------------------


assert_passes, assert_rejects = notebook_asserts(5)


FWD, BWD = cl.checks.check_layernorm_forward, cl.checks.check_layernorm_backward
CHECKERS = [(FWD, layernorm_forward), (BWD, layernorm_backward)]
FWD_SHAPES = "returns (y, xhat, rstd) with shapes (N, C), (N, C), (N,)"
BWD_SHAPES = "returns (dx, dgamma, dbeta) with shapes (N, C), (C,), (C,)"


def test_exported_from_cl_checks():
    assert checks_layernorm.__all__
    for name in checks_layernorm.__all__:
        assert getattr(cl.checks, name) is getattr(checks_layernorm, name)


@pytest.mark.parametrize("check, fn", CHECKERS + [(FWD, forward_loops), (BWD, backward_loops)])
def test_reference_and_loop_versions_pass(check, fn, capsys):
    assert assert_passes(check, fn, capsys).n_stages >= 4


@pytest.mark.parametrize("check, _", CHECKERS)
def test_odd_returns(check, _, capsys):
    result, _out = run_check(check, lambda *a: None, capsys)
    assert not result.passed and "None" in result.message and "return" in result.hint
    result, _out = run_check(check, lambda *a: "a string", capsys)
    assert not result.passed and "should return 3 arrays" in result.message
    result, _out = run_check(check, lambda *a: ("a", "b", "c"), capsys)
    assert not result.passed and "NumPy array of numbers" in result.message
    result, out = run_check(check, lambda *a: undefined_name, capsys)  # noqa: F821
    assert not result.passed and "NameError" in result.message and "Traceback" not in out


@pytest.mark.parametrize("check, fn, name", [(FWD, layernorm_forward, "x"),
                                              (BWD, layernorm_backward, "dy")])
def test_in_place_is_rejected(check, fn, name, capsys):
    def in_place(a, *rest):
        out = fn(a, *rest)
        a *= 0
        return out

    result, _out = run_check(check, in_place, capsys)
    assert not result.passed and "`a`" in result.message and "in place" in result.message


@pytest.mark.parametrize("check, fn", CHECKERS)
def test_float32_is_named(check, fn, capsys):
    def f32(*args):
        return tuple(np.asarray(r, dtype=np.float32) for r in fn(*args))

    result, _out = run_check(check, f32, capsys)
    assert not result.passed and "float32" in result.hint and "dtype" in result.hint


# ---- Exercise 5.1: forward ------------------------------------------------------------------

def _forward_with(var_fn=None, rstd_fn=None, axis=1, centre=True, affine=lambda xh, g, b: g * xh + b,
                  rstd_shape=lambda r: r[:, 0]):
    def fn(x, gamma, beta, eps):
        mean = x.mean(axis=axis, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axis, keepdims=True) if var_fn is None else var_fn(x, mean)
        rstd = 1 / np.sqrt(var + eps) if rstd_fn is None else rstd_fn(var, eps)
        xhat = ((x - mean) if centre else x) * rstd
        r = rstd[:, 0] if axis == 1 else rstd[0]
        return affine(xhat, gamma, beta), xhat, rstd_shape(rstd) if axis == 1 else r
    return fn


HAND = "hand-checkable case, eps = 4"


@pytest.mark.parametrize("fn, stage, hint", [
    (_forward_with(rstd_fn=lambda v, e: 1 / (np.sqrt(v) + e)), HAND, "inside the square root"),
    (_forward_with(rstd_fn=lambda v, e: 1 / np.sqrt(v)), HAND, "eps inside the square root"),
    (_forward_with(var_fn=lambda x, m: x.var(axis=1, ddof=1, keepdims=True)), HAND, "ddof=1"),
    (_forward_with(rstd_fn=lambda v, e: 1 / (v + e)), HAND, "square ROOT"),
    (_forward_with(rstd_fn=lambda v, e: np.sqrt(v + e)), HAND, "reciprocal"),
    (_forward_with(centre=False), HAND, "subtract the row's mean"),
    (_forward_with(axis=0), FWD_SHAPES, "not each column"),
    (_forward_with(affine=lambda xh, g, b: xh), "random rows with gamma and beta", "scale by gamma"),
    (_forward_with(affine=lambda xh, g, b: b * xh + g), HAND,
     "not beta * xhat + gamma"),
    (_forward_with(affine=lambda xh, g, b: g * xh), "random rows with gamma and beta", "add beta"),
    (_forward_with(rstd_shape=lambda r: r), FWD_SHAPES, "rstd[:, 0]"),
    (_forward_with(var_fn=lambda x, m: (x ** 2).mean(axis=1, keepdims=True) - m ** 2),
     "edge cases: constant rows, tiny variance, an offset of 1e6", "mean(x**2) - mean**2"),
    (_forward_with(rstd_fn=lambda v, e: 1 / np.sqrt(v + e ** 2)), HAND, "not var + eps**2"),
])
def test_forward_rejects(fn, stage, hint, capsys):
    assert_rejects(FWD, fn, capsys, stage, hint)


def annotated_transformer_layernorm(x, gamma, beta, eps):
    """The Annotated Transformer's LayerNorm: a_2 * (x - mean) / (std + eps) + b_2, with
    PyTorch's x.std(-1), which is unbiased."""
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1 / (x.std(axis=-1, ddof=1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    return gamma * xhat + beta, xhat, rstd[:, 0]


def test_forward_annotated_transformer_convention_is_named(capsys):
    r = assert_rejects(FWD, annotated_transformer_layernorm, capsys, HAND,
                       "the Annotated Transformer's LayerNorm")
    assert "unbiased std" in r.hint and "eps inside the root" in r.hint


def _whole_array(keepdims):
    def fn(x, gamma, beta, eps):
        mean = x.mean(keepdims=keepdims)                    # one mean for the whole array
        var = ((x - mean) ** 2).mean(keepdims=keepdims)
        rstd = 1 / np.sqrt(var + eps)
        xhat = (x - mean) * rstd
        return gamma * xhat + beta, xhat, rstd[:, 0] if keepdims else rstd
    return fn


def _whole_array_broadcast(x, gamma, beta, eps):
    """The whole-array statistics, with rstd spread to the right shape (N,)."""
    y, xhat, rstd = _whole_array(False)(x, gamma, beta, eps)
    return y, xhat, np.full(x.shape[0], rstd)


@pytest.mark.parametrize("fn, stage", [(_whole_array(False), FWD_SHAPES),
                                       (_whole_array(True), FWD_SHAPES),
                                       (_whole_array_broadcast, HAND)])
def test_forward_whole_array_statistics(fn, stage, capsys):
    assert_rejects(FWD, fn, capsys, stage, "each row (token) gets its own mean")


def test_forward_xhat_and_rstd_swapped(capsys):
    def swapped(x, gamma, beta, eps):
        y, xhat, rstd = layernorm_forward(x, gamma, beta, eps)
        return y, rstd, xhat

    r = assert_rejects(FWD, swapped, capsys, FWD_SHAPES, "return y, xhat, rstd")
    assert "swapped" in r.message


def test_forward_default_hint_gives_the_structure_not_the_code(capsys):
    def odd(x, gamma, beta, eps):                           # wrong in no named way
        y, xhat, rstd = layernorm_forward(x, gamma, beta, eps)
        return y, xhat, 1.01 * rstd

    r = assert_rejects(FWD, odd, capsys, HAND, "biased variance")
    assert "eps inside the square root" in r.hint
    for code in ("x.mean(", "np.sqrt", "(x - mean) * rstd", "gamma * xhat + beta"):
        assert code not in r.hint, code


def test_forward_wrong_axis_on_square_input_is_named():
    x = np.random.default_rng(0).standard_normal((4, 4))
    with pytest.raises(cl.checks.CheckFailed) as err:
        checks_layernorm._check_forward_case(_forward_with(axis=0), x, np.ones(4), np.zeros(4), 1e-5)
    assert "not each column" in err.value.hint


def test_forward_returns_two_arrays(capsys):
    result, _out = run_check(FWD, lambda *a: layernorm_forward(*a)[:2], capsys)
    assert not result.passed and "return y, xhat, rstd" in result.hint


# ---- Exercise 5.3: backward -----------------------------------------------------------------

def _backward_with(dx_fn, dgamma=lambda dy, xh: (dy * xh).sum(0), dbeta=lambda dy: dy.sum(0)):
    def fn(dy, xhat, rstd, gamma):
        C, r, g = dy.shape[1], rstd[:, None], dy * gamma
        sg, sgx = g.sum(1, keepdims=True), (g * xhat).sum(1, keepdims=True)
        return dx_fn(dy, xhat, r, gamma, g, sg, sgx, C), dgamma(dy, xhat), dbeta(dy)
    return fn


def _c_transformer(dy, xhat, rstd, gamma):
    """The C-Transformer document's formula, as a learner would code it from x - mean."""
    C = dy.shape[1]
    xm = xhat / rstd[:, None]                                   # x - mean
    dx = (1 / C) * rstd[:, None] * (C * dy - dy.sum(1, keepdims=True)
                                     - xm * (dy * xm).sum(1, keepdims=True)) * gamma
    return dx, (dy * xhat).sum(0), dy.sum(0)


BH = "hand-checkable case"


@pytest.mark.parametrize("fn, stage, hint", [
    (_c_transformer, BH, "C-Transformer document"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C:
                    r / C * (C * dy - dy.sum(1, keepdims=True)
                             - xh * (dy * xh).sum(1, keepdims=True)) * gm), BH, "gamma is misplaced"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - sg - xh * sgx / r ** 2)),
     BH, "factor rstd**2"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - xh * sgx)), BH,
     "path through the mean"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - sg)), BH,
     "path through the variance"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r * g), BH, "only the direct path"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r * (C * g - sg - xh * sgx)), BH,
     "divided by C"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: (C * g - sg - xh * sgx) / C), BH,
     "multiplied by rstd"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C:
                    r / C * (C * g - g.sum(0, keepdims=True) - xh * (g * xh).sum(0, keepdims=True))),
     BH, "not over the rows"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - sg + xh * sgx)), BH,
     "sign"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C:
                    r / C * (C * dy - dy.sum(1, keepdims=True) - xh * (dy * xh).sum(1, keepdims=True))),
     BH, "g = dy * gamma"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C:
                    r / C * (C * g - dy.sum(1, keepdims=True) - xh * (dy * xh).sum(1, keepdims=True))),
     BH, "only in the first term"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C:
                    r / C * (C * g - sg - xh * (dy * xh).sum(1, keepdims=True))),
     BH, "missing from the variance's sum"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - sg - 2 * xh * sgx)), BH,
     "the 1/2 in dvar"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C:
                    r / C * (C * g - g.mean(1, keepdims=True) - xh * (g * xh).mean(1, keepdims=True))),
     BH, "divided by C twice"),
    (_backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - C * sg - xh * sgx)), BH,
     "dmean / C"),
])
def test_backward_dx_rejects(fn, stage, hint, capsys):
    r = assert_rejects(BWD, fn, capsys, stage, hint)
    assert r.message.startswith("dx")


@pytest.mark.parametrize("dgamma, dbeta, hint", [
    (lambda dy, xh: dy * xh, lambda dy: dy.sum(0), "add up over the rows"),
    (lambda dy, xh: (dy * xh).sum(0), lambda dy: dy, "add up over the rows"),
    (lambda dy, xh: (dy * xh).sum(), lambda dy: dy.sum(0), "tokens & features"),
    (lambda dy, xh: (dy * xh).sum(1), lambda dy: dy.sum(0), "not over the features"),
])
def test_backward_param_grads_not_summed_over_rows(dgamma, dbeta, hint, capsys):
    fn = _backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - sg - xh * sgx),
                        dgamma=dgamma, dbeta=dbeta)
    assert_rejects(BWD, fn, capsys, BWD_SHAPES, hint)


def test_backward_dgamma_dbeta_swapped(capsys):
    def swapped(dy, xhat, rstd, gamma):
        return layernorm_backward(dy, xhat, rstd, gamma)[0], dy.sum(0), (dy * xhat).sum(0)

    r = assert_rejects(BWD, swapped, capsys, BH, "swapped")
    assert r.message.startswith("dbeta")


def test_backward_mean_instead_of_sum(capsys):
    fn = _backward_with(lambda dy, xh, r, gm, g, sg, sgx, C: r / C * (C * g - sg - xh * sgx),
                        dgamma=lambda dy, xh: (dy * xh).mean(0))
    assert_rejects(BWD, fn, capsys, "random rows, gamma = 1 (as at initialisation)", "not the mean")


def test_backward_without_keepdims_names_broadcasting(capsys):
    def no_keepdims(dy, xhat, rstd, gamma):
        C, g = dy.shape[1], dy * gamma
        dx = rstd / C * (C * g - g.sum(1) - xhat * (g * xhat).sum(1))
        return dx, (dy * xhat).sum(0), dy.sum(0)

    r = assert_rejects(BWD, no_keepdims, capsys, BWD_SHAPES, "keepdims=True")
    assert "ValueError" in r.message


def backward_loops_with(dvar_factor=-0.5, dmu_over_c=True):
    """The unsimplified chain rule of backward_loops, with one step of it done wrong."""
    def fn(dy, xhat, rstd, gamma):
        N, C = dy.shape
        dx = np.zeros((N, C))
        for n in range(N):
            d = xhat[n] / rstd[n]
            dxhat = dy[n] * gamma
            dvar = np.sum(dxhat * d) * dvar_factor * rstd[n] ** 3
            dmu = -np.sum(dxhat) * rstd[n]
            dx[n] = dxhat * rstd[n] + dvar * 2 * d / C + (dmu / C if dmu_over_c else dmu)
        return dx, (dy * xhat).sum(0), dy.sum(0)
    return fn


@pytest.mark.parametrize("fn, hint", [(backward_loops_with(dvar_factor=-1.0), "the 1/2 in dvar"),
                                      (backward_loops_with(dmu_over_c=False), "dmean / C")])
def test_backward_chain_rule_slips_are_named(fn, hint, capsys):
    assert_rejects(BWD, fn, capsys, BH, hint)


def test_backward_default_hint_gives_the_structure_not_the_code(capsys):
    def odd(dy, xhat, rstd, gamma):                         # wrong in no named way
        dx, dgamma, dbeta = layernorm_backward(dy, xhat, rstd, gamma)
        return 1.01 * dx, dgamma, dbeta

    r = assert_rejects(BWD, odd, capsys, BH, "three terms")
    assert "sums over each row" in r.hint and "gamma is inside the sums" in r.hint
    for code in ("sum(g * xhat)", "C * g", "rstd / C *", "dx ="):
        assert code not in r.hint, code


def test_backward_wrong_dx_shape(capsys):
    r = assert_rejects(BWD, lambda *a: (layernorm_backward(*a)[0].T,) + layernorm_backward(*a)[1:],
                       capsys, BWD_SHAPES, "shape of x")
    assert "dx has shape" in r.message
