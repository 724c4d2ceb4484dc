"""A learner's function that hands its exercise to course_lib's own version fails (library.py).

Every exercise whose answer course_lib has (a kernel or its NumPy twin, optim, gradcheck,
task, the Block's or the model's backward) rejects a function that calls it, with a message
that names what was called; the same functions pass with the rule off, so it is the rule
that rejects them. Other course_lib functions stay allowed.
"""
import functools
import sys

import numpy as np
import pytest

import course_lib as cl
from course_lib import checks
from course_lib.checks import core, library
from course_lib.exercises import Exercise
from course_lib.kernels import layernorm_backward as imported_layernorm_backward
from course_lib.kernels import layernorm as layernorm_module
from support import expect_pass, expect_reject
from support import solutions_by_checker as _solutions

solutions_by_checker = functools.lru_cache(_solutions)     # the notebooks' solutions, read once
k, twin = cl.kernels, cl.kernels.numpy_ref


def without_rule(check, *fns):
    """The checker's stages on fns with no library rule: does the library's answer pass them?"""
    return core._run(check.__wrapped__, "Exercise 0.0", "rule off", fns[0], fns[1:], {})


# ----- learners' functions that call the library, one per exercise -------------------------
# (right answers, all of them: the rule is what rejects them)

def layernorm_forward(x, gamma, beta, eps):
    return cl.kernels.layernorm_forward(x, gamma, beta, eps)


def layernorm_backward(dy, xhat, rstd, gamma):
    return cl.kernels.layernorm_backward(dy, xhat, rstd, gamma)


def linear_backward(dy, x, W):
    return cl.kernels.linear_backward(dy, x, W, True)


def relu_backward(dy, h):
    return cl.kernels.relu_backward(dy, h)


def gelu_forward(h):
    return cl.kernels.gelu_forward(h)


def gelu_backward(dy, h):
    return cl.kernels.gelu_backward(dy, h)


def cross_entropy(logits, targets):
    return cl.kernels.cross_entropy_forward(logits, targets)[0]


def cross_entropy_backward(logits, targets):
    return cl.kernels.cross_entropy_backward(cl.kernels.softmax_forward(logits), targets)


def attention(Q, K, V):
    """One head through the multi-head kernel when Q, K, V have one shape; by hand otherwise."""
    if Q.shape == K.shape == V.shape:
        out, A = cl.kernels.attention_forward(np.concatenate([Q, K, V], -1)[None], 1, False)
        return out[0], A[0, 0]
    return solutions_by_checker()["check_single_head_attention"][0](Q, K, V)


def attention_backward(dout, Q, K, V, A):
    if Q.shape == K.shape == V.shape:
        dqkv = cl.kernels.numpy_ref.attention_backward(dout[None], np.concatenate([Q, K, V], -1)[None],
                                                       A[None, None])
        return np.split(dqkv[0], 3, axis=-1)
    return solutions_by_checker()["check_single_head_attention_backward"][0](dout, Q, K, V, A)


def numerical_gradient(f, x, h=1e-5):
    return cl.gradcheck.numerical_gradient(f, x, h)


def central_difference(f, x, h=1e-5):
    x = np.array(float(x))
    return float(cl.gradcheck.numerical_gradient(lambda: f(x[()]), x, h))


def sgd_momentum_step(param, grad, velocity, lr, momentum):
    param, velocity = param.copy(), velocity.copy()
    cl.optim.sgd_update(param, grad, velocity, lr, momentum, 0.0, False)
    return param, velocity


def adam_step(param, grad, m, v, t, lr, betas, eps):
    param, m, v = param.copy(), m.copy(), v.copy()
    cl.optim.adam_update(param, grad, m, v, lr, betas[0], betas[1], eps, 0.0, False, t)
    return param, m, v


def clip_by_global_norm(grads, max_norm):
    clipped = {name: g.copy() for name, g in grads.items()}
    return clipped, cl.optim.clip_grad_norm(clipped, max_norm)


def param_count(cfg):
    return cl.Transformer(cfg.replace(dtype="float64")).n_params


def model_backward(model):
    return model.backward()


def block_backward(dy, cache, params):
    cfg = cl.ModelConfig(d_model=dy.shape[1], n_heads=2, d_ff=params["ffn.w1"].shape[1],
                         n_layers=1, dtype=str(dy.dtype))
    block = cl.block.Block(0, cfg, {"blocks.0." + n: p for n, p in params.items()}, cl.kernels)
    grads = {}
    dx = block.backward(dy, cache, grads)
    return dx, {n[len("blocks.0."):]: g for n, g in grads.items()}


CASES = [   # (checker, the learner's functions, what the report names)
    (checks.check_encode, [lambda text: cl.task.encode(text)], "course_lib.task.encode"),
    (checks.check_answer, [lambda op, digits: cl.task.answer(op, tuple(digits))],
     "course_lib.task.answer"),
    (checks.check_central_difference, [central_difference], "course_lib.gradcheck.numerical_gradient"),
    (checks.check_numerical_gradient, [numerical_gradient], "course_lib.gradcheck.numerical_gradient"),
    (checks.check_embed, [lambda tokens, E: k.embedding_forward(tokens, E, None)],
     "course_lib.kernels.embedding_forward"),
    (checks.check_embed_backward, [lambda tokens, dX, V: k.embedding_backward(tokens, dX, V)[0]],
     "course_lib.kernels.embedding_backward"),
    (checks.check_sinusoidal, [k.sinusoidal_table], "course_lib.kernels.sinusoidal_table"),
    (checks.check_stable_softmax, [k.softmax_forward], "course_lib.kernels.softmax_forward"),
    (checks.check_single_head_attention, [attention], "course_lib.kernels.attention_forward"),
    (checks.check_softmax_backward, [k.softmax_backward], "course_lib.kernels.softmax_backward"),
    (checks.check_single_head_attention_backward, [attention_backward],
     "course_lib.kernels.numpy_ref.attention_backward"),
    (checks.check_multihead_attention,
     [lambda x, W_q, W_k, W_v, W_o, H, causal: k.attention_forward(
         x @ np.concatenate([W_q, W_k, W_v], 1), H, causal)],
     "course_lib.kernels.attention_forward"),
    (checks.check_multihead_attention_backward,
     [lambda dy, x, W_q, W_k, W_v, W_o, A, H: k.attention_backward(
         dy @ W_o.T, x @ np.concatenate([W_q, W_k, W_v], 1), A)],
     "course_lib.kernels.attention_backward"),
    (checks.check_layernorm_forward, [layernorm_forward], "course_lib.kernels.layernorm_forward"),
    (checks.check_layernorm_backward, [layernorm_backward], "course_lib.kernels.layernorm_backward"),
    (checks.check_linear_backward, [linear_backward], "course_lib.kernels.linear_backward"),
    (checks.check_relu_backward, [relu_backward], "course_lib.kernels.relu_backward"),
    (checks.check_gelu, [gelu_forward, gelu_backward], "course_lib.kernels.gelu_forward"),
    (checks.check_param_count, [param_count], "course_lib.model.init_params"),
    (checks.check_param_count, [lambda cfg: sum(p.size for p in cl.init_params(cfg).values())],
     "course_lib.model.init_params"),
    (checks.check_cross_entropy_forward, [cross_entropy], "course_lib.kernels.cross_entropy_forward"),
    (checks.check_cross_entropy_forward,
     [lambda z, y: np.mean(twin.logsumexp(z[y != -100]) - z[y != -100][np.arange((y != -100).sum()),
                                                                        y[y != -100]])],
     "course_lib.kernels.numpy_ref.logsumexp"),
    (checks.check_cross_entropy_backward, [cross_entropy_backward],
     "course_lib.kernels.cross_entropy_backward"),
    (checks.check_block_backward, [block_backward], "course_lib.block.Block.backward"),
    (checks.check_model_backward, [model_backward], "course_lib.model.Transformer.backward"),
    (checks.check_sgd_momentum_step, [sgd_momentum_step], "course_lib.optim.sgd_update"),
    (checks.check_adam_step, [adam_step], "course_lib.optim.adam_update"),
    (checks.check_clip_by_global_norm, [clip_by_global_norm], "course_lib.optim.clip_grad_norm"),
]
IDS = [f"{check.__name__}-{name.rsplit('.', 1)[1]}" for check, _, name in CASES]


@pytest.mark.parametrize("check, fns, name", CASES, ids=IDS)
def test_calling_the_library_is_a_library_call(check, fns, name, capsys):
    result = expect_reject(check, *fns, capsys=capsys)
    assert result.library == name and repr(result).endswith(f"calls {name}>")
    assert result.message.startswith("your function calls ") and result.hint


# ----- the answer read from another course_lib function (library.equivalent) ---------------

def _dscores_backward(dy, y):
    """Exercise 3.4 from attention's own softmax backward, which works in place on its first argument."""
    d = np.array(dy, copy=True)
    cl.kernels.attention._dscores(d, y, y.shape[-1], 1.0)
    return d


EQUIVALENTS = [   # (checker, a learner's function that passes without the rule, what the report names)
    (checks.check_stable_softmax, lambda x: k.cross_entropy_forward(x, np.zeros(len(x), np.int64))[1],
     "course_lib.kernels.cross_entropy_forward"),
    (checks.check_stable_softmax, lambda x: (lambda e: e / e.sum(-1, keepdims=True))(
        np.exp(x - twin.logsumexp(x)[:, None])), "course_lib.kernels.numpy_ref.logsumexp"),
    (checks.check_softmax_backward, _dscores_backward, "course_lib.kernels.attention._dscores"),
    (checks.check_param_count, lambda cfg: int(sum(np.prod(s) for s in cl.io._expected_shapes(cfg).values())),
     "course_lib.io._expected_shapes"),
]


@pytest.mark.parametrize("check, fn, name", EQUIVALENTS, ids=[name.rsplit(".", 1)[1] for *_, name in EQUIVALENTS])
def test_an_answer_read_from_another_function_is_a_library_call(check, fn, name, capsys):
    """Cross-entropy's probabilities are a softmax, attention's score backward is a softmax
    backward, io's expected shapes count the parameters: each is listed with its exercise, so
    the checker names it here and the grader's sandbox holds none of it (test_stripped)."""
    assert without_rule(check, fn).passed, capsys.readouterr().out
    capsys.readouterr()
    result = expect_reject(check, fn, capsys=capsys)
    assert result.library == name, result
    assert result.message == (f"your function calls {name}, which computes what this exercise asks you "
                              "to write, inside it")


# exercises whose library call is named in the message, each passing with the watch turned off
NAMED = {"5.1": (checks.check_layernorm_forward, [layernorm_forward]),
         "5.3": (checks.check_layernorm_backward, [layernorm_backward]),
         "6.2": (checks.check_linear_backward, [linear_backward]),
         "6.3": (checks.check_relu_backward, [relu_backward]),
         "6.5": (checks.check_gelu, [gelu_forward, gelu_backward]),
         "8.1": (checks.check_cross_entropy_forward, [cross_entropy]),
         "8.3": (checks.check_cross_entropy_backward, [cross_entropy_backward])}


@pytest.mark.parametrize("exercise", NAMED)
def test_the_library_passes_without_the_rule_and_fails_with_it(exercise, capsys):
    check, fns = NAMED[exercise]
    assert without_rule(check, *fns).passed, capsys.readouterr().out
    capsys.readouterr()
    result = expect_reject(check, *fns, capsys=capsys, notebook=exercise.split(".")[0])
    assert result.message == (f"your function calls {result.library}, the kernel this exercise "
                              f"asks you to write")
    assert result.exercise == f"Exercise {exercise}"


def test_6_5_names_the_backward_kernel_too(capsys):
    solution = solutions_by_checker()["check_gelu"]
    result = expect_reject(checks.check_gelu, solution[0], gelu_backward, capsys=capsys)
    assert result.library == "course_lib.kernels.gelu_backward"
    assert result.stage.startswith("GELU backward")


@pytest.mark.parametrize("check, fns", [
    (checks.check_embed, [lambda tokens, E: twin.embedding_forward(tokens, E, None)]),
    (checks.check_embed_backward, [lambda tokens, dX, V: k.embedding_backward(tokens, dX, V)[0]]),
    (checks.check_sinusoidal, [k.sinusoidal_table]),
    (checks.check_layernorm_forward, [k.layernorm_forward]),
    (checks.check_layernorm_backward, [k.layernorm_backward]),
    (checks.check_relu_backward, [twin.relu_backward]),
    (checks.check_gelu, [twin.gelu_forward, twin.gelu_backward]),
    (checks.check_numerical_gradient, [cl.gradcheck.numerical_gradient]),
    (checks.check_param_count, [param_count]),
])
def test_the_library_agrees_with_the_checkers_without_the_rule(check, fns, capsys):
    """course_lib's own versions pass the checkers' stages (a check of the checkers' formulas
    against independent code), and fail them only because of the rule."""
    assert without_rule(check, *fns).passed, capsys.readouterr().out


# ----- however the function reaches the kernel ---------------------------------------------

def _closure():
    ln = cl.kernels.layernorm_backward

    def fn(dy, xhat, rstd, gamma):
        return ln(dy, xhat, rstd, gamma)
    return fn


def _default_argument(dy, xhat, rstd, gamma, backward=cl.kernels.layernorm_backward):
    return backward(dy, xhat, rstd, gamma)


KERNELS = {"layernorm": cl.kernels.layernorm_backward}


class _Callable:
    def __call__(self, dy, xhat, rstd, gamma):
        return KERNELS["layernorm"](dy, xhat, rstd, gamma)


def _helper(dy, xhat, rstd, gamma):
    return imported_layernorm_backward(dy, xhat, rstd, gamma)


def _through_a_helper(dy, xhat, rstd, gamma):
    return _helper(dy, xhat, rstd, gamma)


def _numpy_backend(dy, xhat, rstd, gamma):
    model = cl.Transformer(cl.presets.deep_dive(dtype="float64"), backend="numpy")
    return model.kernels.layernorm_backward(dy, xhat, rstd, gamma)


def _catches_everything(dy, xhat, rstd, gamma):
    try:
        return cl.kernels.layernorm_backward(dy, xhat, rstd, gamma)
    except BaseException:          # noqa: BLE001  a learner's broad except changes nothing
        return None


def _rows_loop(dy, xhat, rstd, gamma, loop=None):
    dx = np.empty_like(dy)
    (loop or layernorm_module._backward_rows)(dy, xhat, rstd, gamma, dx, 0, dy.shape[0])
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _rows_py_func(dy, xhat, rstd, gamma):
    return _rows_loop(dy, xhat, rstd, gamma, layernorm_module._backward_rows.py_func)


def _parallel_loop(dy, xhat, rstd, gamma):
    dx = np.empty_like(dy)
    layernorm_module._backward_rows.ranges(dy, xhat, rstd, gamma, dx, np.array([0, dy.shape[0]]))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def _calls_then_raises(dy, xhat, rstd, gamma):
    cl.kernels.layernorm_backward(dy, xhat, rstd, gamma)
    raise ValueError("something of the learner's own, after the call")


@pytest.mark.parametrize("fn, name", [
    (cl.kernels.layernorm_backward, "kernels.layernorm_backward"),          # the kernel itself
    (imported_layernorm_backward, "kernels.layernorm_backward"),            # imported under a name
    (_helper, "kernels.layernorm_backward"),                                # a global name
    (_through_a_helper, "kernels.layernorm_backward"),                      # two calls deep
    (_closure(), "kernels.layernorm_backward"),
    (_default_argument, "kernels.layernorm_backward"),
    (_Callable(), "kernels.layernorm_backward"),                           # held in a dict
    (functools.partial(cl.kernels.layernorm_backward), "kernels.layernorm_backward"),
    (_rows_loop, "kernels.layernorm_backward"),                             # the kernel's own loops
    (_rows_py_func, "kernels.layernorm_backward"),                          # as Numba's Python function
    (_parallel_loop, "kernels.layernorm_backward"),                         # the loops' parallel loop
    (cl.kernels.numpy_ref.layernorm_backward, "kernels.numpy_ref.layernorm_backward"),
    (_numpy_backend, "kernels.numpy_ref.layernorm_backward"),
    (_catches_everything, "kernels.layernorm_backward"),
    (_calls_then_raises, "kernels.layernorm_backward"),
], ids=["kernel", "imported", "global", "helper", "closure", "default", "dict", "partial",
        "kernel's loops", "py_func", "parallel loop", "twin", "numpy backend", "broad except", "raises after"])
def test_every_way_to_reach_the_kernel_is_noticed(fn, name, capsys):
    result = expect_reject(checks.check_layernorm_backward, fn, capsys=capsys, notebook=5)
    assert result.library == "course_lib." + name
    assert result.stage == "returns (dx, dgamma, dbeta) with shapes (N, C), (C,), (C,)"


# ----- what stays allowed, and what is left as it was ---------------------------------------

def test_other_kernels_are_allowed(capsys):
    """10.2's solution calls layernorm_backward, linear_backward, relu_backward and
    attention_backward; 8.3's calls softmax_forward: both pass."""
    solutions = solutions_by_checker()
    expect_pass(checks.check_block_backward, *solutions["check_block_backward"], capsys=capsys)
    expect_pass(checks.check_cross_entropy_backward, *solutions["check_cross_entropy_backward"],
                capsys=capsys)


@core.checker(exercise=Exercise("0.2", "relu, checked with the library"), library=["kernels.relu_backward"])
def check_with_a_library_reference(fn):
    """A checker may use the kernel itself: only the learner's calls count."""
    dy, h = np.array([[1.0, -2.0, 3.0]]), np.array([[1.0, 1.0, -1.0]])
    with core.stage("values"):
        core.expect_close(core.call(fn, dy, h), cl.kernels.relu_backward(dy, h))


def test_the_checkers_own_calls_do_not_count(capsys):
    expect_pass(check_with_a_library_reference, lambda dy, h: np.where(h > 0, dy, 0.0),
                capsys=capsys)


def test_the_library_is_left_as_it_was(capsys):
    """After a library call, an exception or a pass: the kernel's class, no profiler, and a
    later call of the kernel outside any check records nothing."""
    kernel_class = type(cl.kernels.layernorm_backward)
    for fn in (layernorm_backward, _calls_then_raises,
               solutions_by_checker()["check_layernorm_backward"][0]):
        checks.check_layernorm_backward(fn)
        assert type(cl.kernels.layernorm_backward) is kernel_class
        assert sys.getprofile() is None and not library._active and not library._listeners
    capsys.readouterr()
    dy = np.ones((2, 3))
    cl.kernels.layernorm_backward(dy, dy, np.ones(2), np.ones(3))
    assert not library._active


def test_a_running_profiler_is_left_alone_and_kernels_are_still_seen(capsys):
    seen = []

    def profiler(frame, event, arg):
        seen.append(event)
    sys.setprofile(profiler)
    try:
        result = checks.check_layernorm_backward(layernorm_backward)
        assert sys.getprofile() is profiler
    finally:
        sys.setprofile(None)
    assert result.library == "course_lib.kernels.layernorm_backward" and seen
    capsys.readouterr()


def test_the_grader_gets_a_status_of_its_own(capsys):
    first = checks.check_layernorm_backward(layernorm_backward)
    second = checks.check_layernorm_backward(solutions_by_checker()["check_layernorm_backward"][0])
    capsys.readouterr()
    assert first.status == core.LIBRARY_CALL == "library call"
    assert first.library == "course_lib.kernels.layernorm_backward"
    assert first.message.startswith("your function calls course_lib.kernels.layernorm_backward")
    assert second.status == "passed" and second.library is None
