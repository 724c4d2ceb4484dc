"""Checkers of notebook 06 (feed-forward and the block): they pass the reference solutions and
loop versions, and reject realistic learner bugs at the right stage, with a hint that names the bug."""
import math

from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import feedforward as checks_ff
from support import notebook_asserts, notebook_solutions, run_check


NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "06_feed_forward_and_block.ipynb"

# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 4, {"np": np})
linear_backward = SOLVED["linear_backward"]
relu_backward = SOLVED["relu_backward"]
gelu_forward = SOLVED["gelu_forward"]
gelu_backward = SOLVED["gelu_backward"]
block_forward = SOLVED["block_forward"]


# ---- loop versions: slower, right -------------------------------------------------------------

def linear_backward_loops(dy, x, W):
    N, I = x.shape
    O = W.shape[1]
    dx, dW, db = np.zeros((N, I)), np.zeros((I, O)), np.zeros(O)
    for n in range(N):
        dW += np.outer(x[n], dy[n])        # each row adds its outer product
        db += dy[n]
        for i in range(I):
            dx[n, i] = sum(dy[n, o] * W[i, o] for o in range(O))
    return dx, dW, db


def relu_backward_loops(dy, h):
    dh = np.zeros(np.shape(dy))
    for idx in np.ndindex(*np.shape(dy)):
        dh[idx] = dy[idx] if h[idx] > 0 else 0.0
    return dh.astype(np.result_type(dy, np.float64)) if np.asarray(dy).dtype == np.float64 else \
        dh.astype(np.asarray(dy).dtype)


def gelu_forward_math(h):
    out = np.empty(np.shape(h), dtype=np.asarray(h).dtype)
    for idx in np.ndindex(*np.shape(h)):
        v = float(h[idx])
        out[idx] = 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    return out


def gelu_backward_sigmoid(dy, h):
    """course_lib's form: s = sigma(2u) = 0.5 (1 + tanh u), dh = dy (s + 2 h s (1 - s) u')."""
    a = math.sqrt(2 / math.pi)
    s = 1 / (1 + np.exp(-2 * a * (h + 0.044715 * h ** 3)))
    return dy * (s + 2 * h * s * (1 - s) * a * (1 + 3 * 0.044715 * h * h))


def block_forward_dict(x, attn, ffn, ln1, ln2, norm):
    steps = {"post": lambda z: ln2(z + ffn(z)), "pre": lambda z: z + ffn(ln2(z))}
    first = {"post": lambda z: ln1(z + attn(z)), "pre": lambda z: z + attn(ln1(z))}
    return steps[norm](first[norm](x))


def check_gelu_forward(fn):
    """Exercise 6.5's checker with the learner's forward under test and the reference backward."""
    return cl.checks.check_gelu(fn, gelu_backward)


def check_gelu_backward(fn):
    """Exercise 6.5's checker with the reference forward and the learner's backward under test."""
    return cl.checks.check_gelu(gelu_forward, fn)


CHECKERS = [
    (cl.checks.check_linear_backward, linear_backward),
    (cl.checks.check_relu_backward, relu_backward),
    (check_gelu_forward, gelu_forward),
    (check_gelu_backward, gelu_backward),
    (cl.checks.check_block_forward, block_forward),
]


# ---- helpers ------------------------------------------------------------------------------


assert_passes, assert_rejects = notebook_asserts(6)


@pytest.mark.parametrize("check, fn", CHECKERS + [
    (cl.checks.check_linear_backward, linear_backward_loops),
    (cl.checks.check_relu_backward, relu_backward_loops),
    (check_gelu_forward, gelu_forward_math),
    (check_gelu_backward, gelu_backward_sigmoid),
    (cl.checks.check_block_forward, block_forward_dict),
])
def test_passes_right_versions(check, fn, capsys):
    assert_passes(check, fn, capsys)


# ---- Exercise 6.2: linear backward ---------------------------------------------------------

def _linear(dx=lambda dy, x, W: dy @ W.T, dW=lambda dy, x, W: x.T @ dy, db=lambda dy, x, W: dy.sum(0)):
    return lambda dy, x, W: (dx(dy, x, W), dW(dy, x, W), db(dy, x, W))


FIRST = "returns (dx, dW, db) with the shapes of x, W, b"


@pytest.mark.parametrize("wrong, stage, hint", [
    (_linear(dW=lambda dy, x, W: dy.T @ x), FIRST, "dy.T @ x is its transpose"),
    (_linear(dx=lambda dy, x, W: dy @ W), FIRST, "dy @ W only runs when W is square"),
    (_linear(db=lambda dy, x, W: dy), FIRST, "adds dy over the rows"),
    (_linear(db=lambda dy, x, W: dy.sum(1)), FIRST, "not over axis=1"),
    (_linear(db=lambda dy, x, W: dy.mean(0)), FIRST, "do not average"),
    (_linear(dW=lambda dy, x, W: x.T @ dy / len(x)), FIRST, "do not divide by N"),
    (_linear(dW=lambda dy, x, W: np.outer(x[0], dy[0])), FIRST, "not just the first"),
    (_linear(dW=lambda dy, x, W: np.outer(x.sum(0), dy.sum(0))), FIRST, "not the outer product of the sums"),
    (_linear(db=lambda dy, x, W: np.zeros(dy.shape[1])), FIRST, "db is not zero"),
    (_linear(dx=lambda dy, x, W: -(dy @ W.T)), FIRST, "sign is flipped"),
    (lambda dy, x, W: (x.T @ dy, dy @ W.T, dy.sum(0)), FIRST, "return dx, dW, db in this order"),
])
def test_linear_backward_rejects(wrong, stage, hint, capsys):
    assert_rejects(cl.checks.check_linear_backward, wrong, capsys, stage, hint)


def test_linear_backward_hand_case_numbers(capsys):
    """The hand-checkable case in the checker's comment is right."""
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    dy = np.array([[1.0], [2.0], [3.0]])
    W = np.array([[2.0], [-1.0]])
    dx, dW, db = linear_backward(dy, x, W)
    np.testing.assert_array_equal(dx, [[2, -1], [4, -2], [6, -3]])
    np.testing.assert_array_equal(dW, [[4], [5]])
    np.testing.assert_array_equal(db, [6])


def test_linear_backward_reference_matches_kernel():
    rng = np.random.default_rng(0)
    dy, x, W = rng.standard_normal((6, 5)), rng.standard_normal((6, 4)), rng.standard_normal((4, 5))
    for got, want in zip(cl.kernels.linear_backward(dy, x, W, True), checks_ff._linear_backward(dy, x, W)):
        np.testing.assert_allclose(got, want, atol=1e-12)


# ---- Exercise 6.3: ReLU backward -----------------------------------------------------------

TINY = "h tiny but not 0 (1e-300 to 1e-7, both signs)"


@pytest.mark.parametrize("wrong, stage, hint", [
    (lambda dy, h: np.where(h > 1e-6, dy, 0.0), TINY, "not h > 0: a positive h, however tiny"),
    (lambda dy, h: np.where(h > np.finfo(float).eps, dy, 0.0), TINY, "not with a small threshold"),
    (lambda dy, h: np.where(h > -1e-6, dy, 0.0), TINY, "a negative one slope 0"),
    (lambda dy, h: np.where(h == 0, 2.0 * dy, np.where(h > 0, dy, 0.0)), "h exactly 0",
     "any slope in [0, 1] is a valid subgradient"),
    (lambda dy, h: np.where(h == 0, -dy, np.where(h > 0, dy, 0.0)), "h exactly 0",
     "between 0 and dy"),
    (lambda dy, h: (h > 0).astype(float), "hand-checkable case", "multiply the mask by dy"),
    (lambda dy, h: np.where(dy > 0, dy, 0.0), "hand-checkable case", "not from dy"),
    (lambda dy, h: np.maximum(h, 0.0), "hand-checkable case", "that is the forward"),
    (lambda dy, h: dy * np.maximum(h, 0.0), "hand-checkable case", "not h itself"),
    (lambda dy, h: np.where(h < 0, dy, 0.0), "hand-checkable case", "reversed"),
    (lambda dy, h: dy.copy(), "hand-checkable case", "blocks the gradient"),
])
def test_relu_backward_rejects(wrong, stage, hint, capsys):
    assert_rejects(cl.checks.check_relu_backward, wrong, capsys, stage, hint)


@pytest.mark.parametrize("slope", [0.0, 0.5, 1.0])
def test_relu_backward_any_subgradient_at_zero_passes(slope, capsys):
    """At h = 0 any slope in [0, 1] is a subgradient (the statement of 6.3 says so): h > 0,
    h >= 0 and the average 0.5 all pass."""
    def relu_backward(dy, h):
        return np.where(h > 0, dy, 0.0) + np.where(h == 0, slope * dy, 0.0)
    assert assert_passes(cl.checks.check_relu_backward, relu_backward, capsys).n_stages == 6


# ---- Exercise 6.5: GELU forward and backward, one checker ------------------------------------

FWD_MODERATE = "GELU forward: moderate h, where the constants matter"

def _gelu_with(a=math.sqrt(2 / math.pi), b=0.044715):
    return lambda h: 0.5 * h * (1 + np.tanh(a * (h + b * h ** 3)))


@pytest.mark.parametrize("wrong, stage, hint", [
    (_gelu_with(b=0.0447), FWD_MODERATE, "not 0.0447"),
    (_gelu_with(a=math.sqrt(math.pi / 2)), FWD_MODERATE, "not sqrt(pi/2)"),
    (_gelu_with(a=2 / math.pi), FWD_MODERATE, "not 2/pi"),
    (_gelu_with(a=0.7979), FWD_MODERATE, "rounded to 0.7979"),
    (_gelu_with(a=0.79788456), FWD_MODERATE, "a constant is rounded"),    # as BLOOM's code has it
    (_gelu_with(a=1.0), FWD_MODERATE, "sqrt(2/pi) is missing inside tanh"),
    (lambda h: h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3))),
     "GELU forward: h = 0 and large |h|", "0.5 is missing"),
    (lambda h: 0.5 * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3))),
     "GELU forward: h = 0 and large |h|", "multiply by h"),
    (lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 2))),
     "GELU forward: h = 0 and large |h|", "not h**2"),
    (lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * h + 0.044715 * h ** 3)),
     FWD_MODERATE, "not h alone"),
    (lambda h: checks_ff._gelu_exact(np.asarray(h, dtype=float)), FWD_MODERATE,
     "exact GELU"),
])
def test_gelu_forward_rejects(wrong, stage, hint, capsys):
    assert_rejects(check_gelu_forward, wrong, capsys, stage, hint)


# ---- Exercise 6.5, second part: GELU backward -------------------------------------------------

def _gelu_back_with(**kw):
    return lambda dy, h: dy * checks_ff._gelu_grad(np.asarray(h, dtype=float), **kw)


MODERATE = "GELU backward: moderate h, where every term matters"


@pytest.mark.parametrize("wrong, stage, hint", [
    (_gelu_back_with(second=False), MODERATE, "product rule has two terms"),
    (_gelu_back_with(first=False), "GELU backward: h = 0 and h = 10", "through the factor h is missing"),
    (_gelu_back_with(du_cubic=1.0), MODERATE, "derivative of h^3 is 3 h^2"),
    (_gelu_back_with(du_cubic=0.0), MODERATE, "differentiate the cubic term too"),
    (_gelu_back_with(sech2=lambda t: 1 - t), MODERATE, "not 1 - tanh(u)"),
    (_gelu_back_with(half2=1.0), MODERATE, "keeps the 0.5"),
    (_gelu_back_with(b=0.0447), MODERATE, "not 0.0447"),
    (_gelu_back_with(a=math.sqrt(math.pi / 2)), MODERATE, "not sqrt(pi/2)"),
    (_gelu_back_with(a=0.7979), MODERATE, "rounded to 0.7979"),
    (_gelu_back_with(a=0.79788456), MODERATE, "a constant is rounded"),
    (_gelu_back_with(a=1.0), MODERATE, "sqrt(2/pi) is missing inside tanh"),
    (_gelu_back_with(a_du=1.0), MODERATE, "u'(h) keeps the factor sqrt(2/pi)"),
    (lambda dy, h: dy * checks_ff._gelu_exact_grad(np.asarray(h, dtype=float)), MODERATE,
     "derivative of the exact GELU"),
    (lambda dy, h: checks_ff._gelu_grad(np.asarray(h, dtype=float)), "GELU backward: h = 0 and h = 10",
     "multiply the local derivative by the upstream gradient"),
    (lambda dy, h: dy * gelu_forward(h), "GELU backward: h = 0 and h = 10", "needs its derivative"),
])
def test_gelu_backward_rejects(wrong, stage, hint, capsys):
    assert_rejects(check_gelu_backward, wrong, capsys, stage, hint)


def test_gelu_reference_matches_kernels():
    h = np.linspace(-6, 6, 49).reshape(7, 7)
    dy = np.cos(h)
    np.testing.assert_allclose(cl.kernels.gelu_forward(h), checks_ff._gelu(h), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cl.kernels.gelu_backward(dy, h), dy * checks_ff._gelu_grad(h), rtol=1e-10,
                               atol=1e-14)


# ---- Exercise 6.6: one block ---------------------------------------------------------------

def _swapped(x, attn, ffn, ln1, ln2, norm):
    return block_forward(x, attn, ffn, ln1, ln2, "pre" if norm == "post" else "post")


def _always_post(x, attn, ffn, ln1, ln2, norm):
    return block_forward(x, attn, ffn, ln1, ln2, "post")


def _no_ffn_residual(x, attn, ffn, ln1, ln2, norm):
    if norm == "post":
        return ln2(ffn(ln1(x + attn(x))))
    z = x + attn(ln1(x))
    return ffn(ln2(z))


def _no_attn_residual_pre(x, attn, ffn, ln1, ln2, norm):
    if norm == "post":
        return block_forward(x, attn, ffn, ln1, ln2, norm)
    z = attn(ln1(x))
    return z + ffn(ln2(z))


def _no_attn_residual_post(x, attn, ffn, ln1, ln2, norm):
    z = ln1(attn(x))
    return ln2(z + ffn(z))


def _pre_skip_normalised(x, attn, ffn, ln1, ln2, norm):
    if norm == "post":
        return block_forward(x, attn, ffn, ln1, ln2, norm)
    u = ln1(x)
    z = u + attn(u)
    v = ln2(z)
    return v + ffn(v)


def _post_norm_outside(x, attn, ffn, ln1, ln2, norm):
    z = x + ln1(attn(x))
    return z + ln2(ffn(z))


def _lns_swapped(x, attn, ffn, ln1, ln2, norm):
    return block_forward(x, attn, ffn, ln2, ln1, norm)


def _ffn_first(x, attn, ffn, ln1, ln2, norm):
    return block_forward(x, ffn, attn, ln1, ln2, norm)


def _ffn_first_with_lns(x, attn, ffn, ln1, ln2, norm):
    return block_forward(x, ffn, attn, ln2, ln1, norm)


def _parallel(x, attn, ffn, ln1, ln2, norm):
    if norm == "post":
        a = ln1(x + attn(x))
        return ln2(a + ffn(x))
    return x + attn(ln1(x)) + ffn(ln2(x))


def _parallel_pre(x, attn, ffn, ln1, ln2, norm):
    if norm == "post":
        return block_forward(x, attn, ffn, ln1, ln2, norm)
    return _parallel(x, attn, ffn, ln1, ln2, norm)


def _attn_lost(x, attn, ffn, ln1, ln2, norm):
    y = ln1(x + attn(x)) if norm == "post" else x + attn(ln1(x))  # noqa: F841  computed, then forgotten
    return ln2(x + ffn(x)) if norm == "post" else x + ffn(ln2(x))


@pytest.mark.parametrize("wrong, stage, hint", [
    (_swapped, "post-LN", "you computed the pre-LN block for norm='post'"),
    (_always_post, "pre-LN", "you computed the post-LN block for norm='pre'"),
    (_no_ffn_residual, "post-LN", "the FFN's residual is missing"),
    (_no_attn_residual_post, "post-LN", "the attention's residual is missing"),
    (_no_attn_residual_pre, "pre-LN", "the attention's residual is missing"),
    (_pre_skip_normalised, "pre-LN", "the skip path carries x itself"),
    (_post_norm_outside, "post-LN", "normalises the SUM"),
    (_lns_swapped, "post-LN", "LN1 belongs to the attention"),
    (_ffn_first, "post-LN", "attention comes first"),
    (_ffn_first_with_lns, "post-LN", "attention comes first"),
    (_parallel, "post-LN", "both read the block's input x"),
    (_parallel_pre, "pre-LN", "both read the block's input x"),
    (_attn_lost, "post-LN", "the attention line's result is lost"),
    (lambda x, attn, ffn, ln1, ln2, norm: x.copy(), "post-LN", "returned its input"),
])
def test_block_forward_rejects(wrong, stage, hint, capsys):
    assert_rejects(cl.checks.check_block_forward, wrong, capsys, stage, hint)


def test_block_reference_matches_course_lib():
    """The checker's two formulas are the model's Block, on block 0 of the course model."""
    for norm in ("post", "pre"):
        model = cl.Transformer(cl.presets.deep_dive(norm=norm), seed=0).astype("float64")
        tokens = np.array([cl.task.encode("Max(1,6,2)")])
        model.forward(tokens)
        x = model.cache["blocks.0.input"][0]
        P, k = model.params, cl.kernels.numpy_ref
        W_qkv = np.concatenate([P["blocks.0.attn.w_q"], P["blocks.0.attn.w_k"], P["blocks.0.attn.w_v"]], 1)

        def attn(z):
            heads, _ = k.attention_forward((z @ W_qkv)[None], 4, False)
            return heads[0] @ P["blocks.0.attn.w_o"]

        def ffn(z):
            return np.maximum(z @ P["blocks.0.ffn.w1"] + P["blocks.0.ffn.b1"], 0) @ P["blocks.0.ffn.w2"] \
                + P["blocks.0.ffn.b2"]

        def ln(name):
            return lambda z: k.layernorm_forward(z, P[f"blocks.0.{name}.gamma"], P[f"blocks.0.{name}.beta"],
                                                 1e-5)[0]

        want = model.cache["blocks.0.output"][0]
        got = (checks_ff._post if norm == "post" else checks_ff._pre)(x, attn, ffn, ln("ln1"), ln("ln2"))
        np.testing.assert_allclose(got, want, atol=1e-10)


# ---- inputs changed in place, float32, odd returns -----------------------------------------------

def _linear_in_place(dy, x, W):
    grads = linear_backward(dy, x, W)
    dy *= 0.0
    return grads


def _relu_in_place(dy, h):
    dh = relu_backward(dy, h)
    h[h < 0] = 0.0
    return dh


def _gelu_in_place(h):
    y = gelu_forward(h)
    h *= 2
    return y


def _gelu_back_in_place(dy, h):
    dh = gelu_backward(dy, h)
    dy[...] = 0.0
    return dh


def _block_in_place(x, attn, ffn, ln1, ln2, norm):
    y = block_forward(x, attn, ffn, ln1, ln2, norm)
    x += 1.0
    return y


@pytest.mark.parametrize("check, fn, name, stage", [
    (cl.checks.check_linear_backward, _linear_in_place, "dy", FIRST),
    (cl.checks.check_relu_backward, _relu_in_place, "h", "shapes"),
    (check_gelu_forward, _gelu_in_place, "h", "GELU forward: shapes"),
    (check_gelu_backward, _gelu_back_in_place, "dy", "GELU backward: shapes"),
    (cl.checks.check_block_forward, _block_in_place, "x", "shapes"),
])
def test_input_changed_in_place_is_rejected(check, fn, name, stage, capsys):
    r = assert_rejects(check, fn, capsys, stage, f"`{name}`")
    assert f"changed its input `{name}` in place" in r.message


def _f32(fn):
    def wrapped(*args):
        args = [np.asarray(a).astype(np.float32) if isinstance(a, np.ndarray) else a for a in args]
        if fn is block_forward:  # the sublayers compute in float64: cast their outputs down too
            args[1:5] = [(lambda f: (lambda z: f(z).astype(np.float32)))(f) for f in args[1:5]]
        result = fn(*args)
        return tuple(r.astype(np.float32) for r in result) if isinstance(result, tuple) else \
            np.asarray(result).astype(np.float32)
    return wrapped


@pytest.mark.parametrize("check, fn", CHECKERS)
def test_float64_computation_cast_to_float32_is_named(check, fn, capsys):
    """Right in float64, then .astype(np.float32) on the way out: the float64 stages catch it."""
    def cast(*args):
        result = fn(*args)
        return tuple(np.asarray(r).astype(np.float32) for r in result) if isinstance(result, tuple) else \
            np.asarray(result).astype(np.float32)
    result, out = run_check(check, cast, capsys)
    assert not result.passed and result.done, out
    assert "float32" in result.message and "dtype problem" in result.hint, out


@pytest.mark.parametrize("check, fn", CHECKERS)
def test_float32_computation_is_named_as_a_dtype_problem(check, fn, capsys):
    result, out = run_check(check, _f32(fn), capsys)
    assert not result.passed and result.done, out
    assert "float32" in result.message and "dtype problem" in result.hint, out


@pytest.mark.parametrize("check, fn", CHECKERS)
@pytest.mark.parametrize("odd, words", [
    (lambda r: None, "None"),
    (lambda r: "done", "str"),
    (lambda r: tuple(np.asarray(a) * (1 + 1j) for a in r) if isinstance(r, tuple) else r * (1 + 1j),
     "complex"),
    (lambda r: r[:2] if isinstance(r, tuple) else np.asarray(r)[:1], "shape"),
])
def test_odd_return_values(check, fn, odd, words, capsys):
    result, out = run_check(check, lambda *args: odd(fn(*args)), capsys)
    assert not result.passed and result.done, out
    assert "Traceback" not in out and out.startswith("✗ Exercise 6.")
    if words == "shape" and fn is linear_backward:
        words = "3 arrays"
    assert words in result.message or words in (result.hint or ""), (result.message, result.hint)


def test_gelu_checker_needs_both_functions(capsys):
    result = cl.checks.check_gelu(gelu_forward, None)
    out = capsys.readouterr().out
    assert not result.passed and "pass both functions" in out and out.startswith("✗ Exercise 6.5")


def test_gelu_checker_reports_each_function(capsys):
    """A right forward and a stub backward: the forward's stages pass, then 'not done'."""
    def stub(dy, h):
        raise NotImplementedError

    result = cl.checks.check_gelu(gelu_forward, stub)
    out = capsys.readouterr().out
    assert not result.done and "not done yet" in out


def test_every_checker_is_exported():
    for name in checks_ff.__all__:
        assert getattr(cl.checks, name) is getattr(checks_ff, name)
