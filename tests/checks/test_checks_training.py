"""Checkers of notebook 11 (training): they pass the reference solutions and a loop version,
and reject realistic learner bugs at the right stage, with a hint that names the bug."""
import collections
import math
import re
import types

from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from support import expect_pass, expect_reject, notebook_solutions, run_check


NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "11_training.ipynb"

# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 4, {"np": np})
sgd_momentum_step = SOLVED["sgd_momentum_step"]
adam_step = SOLVED["adam_step"]
clip_by_global_norm = SOLVED["clip_by_global_norm"]


# ---- loop versions (one entry at a time): same numbers, another formulation ----------------

def sgd_momentum_loop(param, grad, velocity, lr, momentum):
    p, vel = np.empty_like(param), np.empty_like(velocity)
    for i in np.ndindex(param.shape):
        vel[i] = momentum * velocity[i] + grad[i]
        p[i] = param[i] - lr * vel[i]
    return p, vel


def adam_loop(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = betas
    p, m1, v1 = np.empty_like(param), np.empty_like(m), np.empty_like(v)
    for i in np.ndindex(param.shape):
        m1[i] = b1 * m[i] + (1 - b1) * grad[i]
        v1[i] = b2 * v[i] + (1 - b2) * grad[i] * grad[i]
        p[i] = param[i] - lr * (m1[i] / (1 - b1 ** t)) / (np.sqrt(v1[i] / (1 - b2 ** t)) + eps)
    return p, m1, v1


def clip_loop(grads, max_norm):
    total = 0.0
    for g in grads.values():
        for x in g.ravel():
            total += float(x) ** 2
    norm = total ** 0.5
    out = {}
    for k, g in grads.items():
        out[k] = g.copy()
        if norm > max_norm:
            out[k] = g * (max_norm / (norm + 1e-6))     # course_lib's form: passes as well
    return out, norm


# ---- helpers --------------------------------------------------------------------------------


def assert_passes(check, fn, capsys):
    return expect_pass(check, fn, capsys=capsys, notebook=11)


def assert_rejects(check, fn, capsys, hint_part, stage=None, message_part=None):
    return expect_reject(check, fn, capsys=capsys, notebook=11, stage=stage, hint=hint_part,
                         message=message_part)


MOMENTUM = cl.checks.check_sgd_momentum_step
ADAM = cl.checks.check_adam_step
CLIP = cl.checks.check_clip_by_global_norm
HAND = {MOMENTUM: "hand-checkable case",
        ADAM: "hand-checkable case: the first step (t = 1, m = v = 0)",
        CLIP: "hand-checkable case: norm 2.5, max_norm 1 (question 33 of the Deep Dive)"}
FIRST = {MOMENTUM: "returns (new_param, new_velocity), shaped like param",
         ADAM: "returns (new_param, m, v), each shaped like param",
         CLIP: "returns (clipped, norm): a dict like grads and one number"}


@pytest.mark.parametrize("check, fn", [(MOMENTUM, sgd_momentum_step), (MOMENTUM, sgd_momentum_loop),
                                       (ADAM, adam_step), (ADAM, adam_loop),
                                       (CLIP, clip_by_global_norm), (CLIP, clip_loop)])
def test_reference_and_loop_versions_pass(check, fn, capsys):
    assert_passes(check, fn, capsys)


def test_checkers_are_listed_and_labelled():
    from course_lib.checks import training
    assert set(training.__all__) == {"check_sgd_momentum_step", "check_adam_step",
                                     "check_clip_by_global_norm", "check_train_loop"}
    for name in training.__all__:
        assert getattr(cl.checks, name) is getattr(training, name)


# ---- Exercise 11.2: momentum mistakes --------------------------------------------------------

def _momentum_ema(param, grad, velocity, lr, momentum):
    vel = momentum * velocity + (1 - momentum) * grad
    return param - lr * vel, vel


def _momentum_classic(param, grad, velocity, lr, momentum):
    vel = momentum * velocity - lr * grad
    return param + vel, vel


def _momentum_old_velocity(param, grad, velocity, lr, momentum):
    return param - lr * velocity, momentum * velocity + grad


def _momentum_uphill(param, grad, velocity, lr, momentum):
    vel = momentum * velocity + grad
    return param + lr * vel, vel


def _momentum_returns_old(param, grad, velocity, lr, momentum):
    vel = momentum * velocity + grad
    return param - lr * vel, velocity


@pytest.mark.parametrize("fn, hint", [
    (_momentum_ema, "(1 - momentum)"),
    (_momentum_classic, "momentum * velocity - lr * grad"),
    (_momentum_old_velocity, "OLD velocity"),
    (_momentum_uphill, "uphill"),
    (_momentum_returns_old, "NEW velocity"),
])
def test_momentum_mistakes_are_named(fn, hint, capsys):
    assert_rejects(MOMENTUM, fn, capsys, hint, stage=HAND[MOMENTUM])


# ---- Exercise 11.4: Adam mistakes ------------------------------------------------------------

def _adam_variant(correct=(True, True), offset=0, inside=False, raw_state=True, swap=False,
                  v_linear=False, no_c1=False, v_beta1=False, no_eps=False):
    def adam(param, grad, m, v, t, lr, betas, eps):
        b1, b2 = betas[::-1] if swap else betas
        m = b1 * m + (grad if no_c1 else (1 - b1) * grad)
        v = b2 * v + (1 - b2) * (grad if v_linear else grad ** 2)
        tt = t + offset
        m_hat = m / (1 - b1 ** tt) if correct[0] else m
        v_hat = v / (1 - (b1 if v_beta1 else b2) ** tt) if correct[1] else v
        denom = np.sqrt(v_hat + eps) if inside else np.sqrt(v_hat) + eps
        denom = np.sqrt(v_hat) if no_eps else denom
        new = param - lr * m_hat / denom
        return (new, m, v) if raw_state else (new, m_hat, v_hat)
    return adam


def _adam_t_from_zero_python(param, grad, m, v, t, lr, betas, eps):
    b1, b2 = (float(b) for b in betas)
    m = b1 * m + (1 - b1) * grad
    v = b2 * v + (1 - b2) * grad ** 2
    c1, c2 = 1 / (1 - b1 ** (t - 1)), 1 / (1 - b2 ** (t - 1))      # ZeroDivisionError at t = 1
    return param - lr * m * c1 / (np.sqrt(v * c2) + eps), m, v


@pytest.mark.parametrize("fn, hint", [
    (_adam_variant(correct=(False, False)), "no bias correction"),
    (_adam_variant(correct=(True, False)), "only m is bias-corrected"),
    (_adam_variant(correct=(False, True)), "only v is bias-corrected"),
    (_adam_variant(offset=1), "uses t + 1"),
    (_adam_variant(offset=-1), "1 - beta ** 0 = 0"),
    (_adam_t_from_zero_python, "1 - beta ** 0 = 0"),
    (_adam_variant(raw_state=False), "raw moment m"),
    (_adam_variant(swap=True), "swapped"),
    (_adam_variant(v_linear=True), "SQUARED"),
    (_adam_variant(no_c1=True), "(1 - beta1) factor"),
    (_adam_variant(v_beta1=True), "v is bias-corrected with beta1"),
])
def test_adam_mistakes_are_named_at_the_first_step(fn, hint, capsys):
    assert_rejects(ADAM, fn, capsys, hint, stage=HAND[ADAM])


def test_adam_eps_inside_the_root_is_named(capsys):
    # at the first step with eps = 1e-8 the two forms agree to 1e-6 except for tiny gradients;
    # the random cases use eps = 1e-3, where they differ
    assert_rejects(ADAM, _adam_variant(inside=True), capsys, "eps is inside the square root",
                   stage="random cases (t = 2, 10, 1000; eps = 1e-3 so that where eps sits shows)")


def keras_adam_step(param, grad, m, v, t, lr, betas, eps):
    """Keras's Adam: the bias corrections folded into the rate, eps added to sqrt(v) itself."""
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    lr_t = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    return param - lr_t * m / (np.sqrt(v) + eps), m, v


def test_adam_keras_convention_is_named(capsys):
    r = assert_rejects(ADAM, keras_adam_step, capsys, "this is Keras's Adam", stage=HAND[ADAM])
    assert "before v's bias correction" in r.hint and "sqrt(v_hat) + eps" in r.hint


def test_adam_eps_missing_is_named(capsys):
    assert_rejects(ADAM, _adam_variant(no_eps=True), capsys, "eps is missing",
                   stage="random cases (t = 2, 10, 1000; eps = 1e-3 so that where eps sits shows)")


# ---- Exercise 11.5: clipping mistakes --------------------------------------------------------

def _clip_elementwise(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    return {k: np.clip(g, -max_norm, max_norm) for k, g in grads.items()}, norm


def _clip_per_array(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    out = {}
    for k, g in grads.items():
        n = np.sqrt(np.sum(g ** 2))
        out[k] = g * (max_norm / n) if n > max_norm else g
    return out, norm


def _clip_always(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    return {k: g * max_norm / norm for k, g in grads.items()}, norm


def _clip_norm_after(grads, max_norm):
    clipped, norm = clip_by_global_norm(grads, max_norm)
    return clipped, min(norm, max_norm)


def _clip_sum_of_norms(grads, max_norm):
    clipped, _ = clip_by_global_norm(grads, max_norm)
    return clipped, sum(np.sqrt(np.sum(g ** 2)) for g in grads.values())


def _clip_never(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    return {k: g.copy() for k, g in grads.items()}, norm


def _clip_inverted(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    scale = max_norm / norm if norm < max_norm else 1.0
    return {k: g * scale for k, g in grads.items()}, norm


def _clip_python_division(grads, max_norm):
    norm = math.sqrt(sum(float(np.sum(g ** 2)) for g in grads.values()))
    scale = max_norm / norm                      # ZeroDivisionError for all-zero gradients
    return {k: g * min(scale, 1.0) for k, g in grads.items()}, norm


@pytest.mark.parametrize("fn, hint, stage", [
    (_clip_never, "nothing was scaled although norm > max_norm", "hand"),
    (_clip_inverted, "nothing was scaled although norm > max_norm", "hand"),
    (_clip_python_division, "all-zero gradients have norm 0",
     "edge cases: all-zero gradients, one huge gradient"),
    (_clip_elementwise, "each entry was clipped", "hand"),
    (_clip_per_array, "its own norm", "hand"),
    (_clip_always, "clip only if norm > max_norm", "random cases, above and below max_norm"),
    (_clip_norm_after, "BEFORE clipping", "hand"),
    (_clip_sum_of_norms, "not the sum of the arrays' norms", "hand"),
])
def test_clip_mistakes_are_named(fn, hint, stage, capsys):
    assert_rejects(CLIP, fn, capsys, hint, stage=HAND[CLIP] if stage == "hand" else stage)


# ---- inputs changed in place ----------------------------------------------------------------

def _momentum_in_place(param, grad, velocity, lr, momentum):
    velocity *= momentum
    velocity += grad
    return param - lr * velocity, velocity


def _adam_in_place(param, grad, m, v, t, lr, betas, eps):
    new, m1, v1 = adam_step(param, grad, m, v, t, lr, betas, eps)
    m[...] = m1
    return new, m, v1


def _adam_param_in_place(param, grad, m, v, t, lr, betas, eps):
    new, m1, v1 = adam_step(param, grad, m, v, t, lr, betas, eps)
    param -= param - new
    return param, m1, v1


def _clip_in_place(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
    if norm > max_norm:
        for g in grads.values():
            g *= max_norm / norm
    return grads, norm


@pytest.mark.parametrize("check, fn, name", [
    (MOMENTUM, _momentum_in_place, "`velocity`"),
    (ADAM, _adam_in_place, "`m`"),
    (ADAM, _adam_param_in_place, "`param`"),
    (CLIP, _clip_in_place, "`grads['w']`"),
])
def test_in_place_changes_are_named(check, fn, name, capsys):
    result, out = run_check(check, fn, capsys)
    assert not result.passed and result.stage == FIRST[check], out
    assert f"changed its input {name} in place" in result.message \
        or f"changed {name} in place" in result.message, out


# ---- float32 is a dtype problem, even within the tolerance ----------------------------------

def _f32(fn):
    def wrapped(*args):
        args = [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args]
        return tuple(r.astype(np.float32) for r in fn(*args))
    return wrapped


def _clip_f32(grads, max_norm):
    clipped, norm = clip_by_global_norm({k: g.astype(np.float32) for k, g in grads.items()}, max_norm)
    return clipped, norm


@pytest.mark.parametrize("check, fn", [(MOMENTUM, _f32(sgd_momentum_step)), (ADAM, _f32(adam_step)),
                                       (CLIP, _clip_f32)])
def test_float32_is_named(check, fn, capsys):
    result = assert_rejects(check, fn, capsys, "dtype problem", stage=FIRST[check])
    assert "float32" in result.message


# ---- odd returns and stubs ------------------------------------------------------------------

ARGS = {MOMENTUM: 5, ADAM: 8, CLIP: 2}


def _returning(check, value):
    n = ARGS[check]
    if n == 5:
        return lambda param, grad, velocity, lr, momentum: value(param)
    if n == 8:
        return lambda param, grad, m, v, t, lr, betas, eps: value(param)
    return lambda grads, max_norm: value(grads)


@pytest.mark.parametrize("check", [MOMENTUM, ADAM, CLIP])
@pytest.mark.parametrize("value, text", [
    (lambda x: None, "None"),
    (lambda x: "done", "str"),
    (lambda x: (np.zeros((7, 7)),) * 3 if not isinstance(x, dict) else ({"w": np.zeros(9)}, 1.0),
     "shape"),
])
def test_odd_returns_fail_cleanly(check, value, text, capsys):
    result, out = run_check(check, _returning(check, value), capsys)
    assert not result.passed and result.done and result.stage == FIRST[check], out
    assert "Traceback" not in out and result.hint


def test_wrong_number_of_returned_values(capsys):
    result, out = run_check(ADAM, lambda param, grad, m, v, t, lr, betas, eps: (param, m), capsys)
    assert not result.passed and "returned 2 values, expected 3" in result.message, out


def test_a_crash_is_reported_not_raised(capsys):
    def broken(param, grad, velocity, lr, momentum):
        return param @ np.ones((99, 2)), velocity
    result, out = run_check(MOMENTUM, broken, capsys)
    assert not result.passed and "raised ValueError" in result.message, out


# ---- labels and default hints ----------------------------------------------------------------

@pytest.mark.parametrize("check, fn, label", [(MOMENTUM, sgd_momentum_step, "Exercise 11.2"),
                                              (ADAM, adam_step, "Exercise 11.4"),
                                              (CLIP, clip_by_global_norm, "Exercise 11.5")])
def test_labels_match_the_notebook_headings(check, fn, label, capsys):
    check(fn)
    out = capsys.readouterr().out
    assert out.startswith(f"✓ {label}"), out


def _momentum_odd(param, grad, velocity, lr, momentum):
    return param - 0.37 * lr * grad + 0.01, 1.3 * velocity + grad


def _adam_odd_step(param, grad, m, v, t, lr, betas, eps):
    _, m, v = adam_step(param, grad, m, v, t, lr, betas, eps)
    return param - 0.37 * lr * np.tanh(grad), m, v


def _adam_odd_moments(param, grad, m, v, t, lr, betas, eps):
    new, m, v = adam_step(param, grad, m, v, t, lr, betas, eps)
    return new, 0.5 * m + 0.1, v


def _clip_odd(grads, max_norm):
    clipped, norm = clip_by_global_norm(grads, max_norm)
    return {k: 0.77 * g for k, g in clipped.items()}, norm


def _clip_odd_norm(grads, max_norm):
    clipped, norm = clip_by_global_norm(grads, max_norm)
    return clipped, 1.7 * norm + 0.1


@pytest.mark.parametrize("check, fn", [(MOMENTUM, _momentum_odd), (ADAM, _adam_odd_step),
                                       (ADAM, _adam_odd_moments), (CLIP, _clip_odd),
                                       (CLIP, _clip_odd_norm)])
def test_default_hints_point_to_the_text_not_the_solution(check, fn, capsys):
    result, _ = run_check(check, fn, capsys)
    hint = result.hint
    assert not result.passed and hint and "Exercise 11." in hint, hint
    for formula in (r"=", r" \* ", r"sqrt\(", r"\blr\b", r"\bgrad\b", r"max_norm /", r"/ norm"):
        assert not re.search(formula, hint), (formula, hint)


# ---- momentum 0: the checker and course_lib's SGD agree --------------------------------------

def sgd_keeping_no_velocity_at_momentum_0(param, grad, velocity, lr, momentum):
    """course_lib's SGD (like PyTorch) keeps no velocity at momentum 0: it stays as it was."""
    if momentum == 0:
        return param - lr * grad, velocity.copy()
    return sgd_momentum_step(param, grad, velocity, lr, momentum)


@pytest.mark.parametrize("fn", [sgd_momentum_step, sgd_keeping_no_velocity_at_momentum_0])
def test_momentum_0_accepts_grad_or_the_old_velocity(fn, capsys):
    assert_passes(cl.checks.check_sgd_momentum_step, fn, capsys)


def test_momentum_0_still_rejects_another_velocity(capsys):
    def halves(param, grad, velocity, lr, momentum):
        new_param, new_velocity = sgd_momentum_step(param, grad, velocity, lr, momentum)
        return new_param, (0.5 * velocity if momentum == 0 else new_velocity)
    assert_rejects(cl.checks.check_sgd_momentum_step, halves, capsys, "re-read the rule",
                   stage="momentum 0 is plain SGD; a zero gradient still moves (the ball rolls on)")


def test_course_lib_sgd_keeps_no_velocity_at_momentum_0():
    """What the checker accepts at momentum 0 is what optim.SGD does: p -= lr * g, buf as it was."""
    rng = np.random.default_rng(0)
    p, g, vel = (rng.standard_normal((3, 4)) for _ in range(3))
    params = {"w": p.copy()}
    opt = cl.optim.SGD(params, lr=0.1, momentum=0.0)
    opt.buf["w"][...] = vel
    for _ in range(2):                       # the first step and a later one
        before = params["w"].copy()
        opt.step({"w": g})
        np.testing.assert_allclose(params["w"], before - 0.1 * g, rtol=1e-15)
        np.testing.assert_array_equal(opt.buf["w"], vel)


# ---- 11.5: a new dict, also when nothing is clipped ------------------------------------------

def test_clip_returning_the_callers_dict_fails(capsys):
    def same_dict(grads, max_norm):
        norm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
        if norm <= max_norm:
            return grads, norm                 # nothing to scale: the caller's own dict
        return {k: g * (max_norm / norm) for k, g in grads.items()}, norm
    assert_rejects(cl.checks.check_clip_by_global_norm, same_dict, capsys, "return a new dict",
                   stage="random cases, above and below max_norm",
                   message_part="is the dict `grads` you were given")


# ---- Exercise 11.6: the training loop ----------------------------------------------------------

def train_loop(model, backward, data, epochs, schedule, batch_size=32, max_norm=1.0, seed=0):
    """The notebook's solution: the learner's adam_step and clip_by_global_norm (defined above)."""
    (tokens, targets), n = data, len(data[0])
    rng, t = np.random.default_rng(seed), 0
    m = {name: np.zeros_like(p) for name, p in model.params.items()}
    v = {name: np.zeros_like(p) for name, p in model.params.items()}
    history = {"loss": [], "grad_norm": [], "lr": []}
    for epoch in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            rows = order[start:start + batch_size]
            t += 1
            loss = model.loss(tokens[rows], targets[rows])
            grads, norm = clip_by_global_norm(backward(model), max_norm)
            lr = schedule(t)
            for name in model.params:
                model.params[name], m[name], v[name] = adam_step(
                    model.params[name], grads[name], m[name], v[name], t, lr,
                    (0.9, 0.999), 1e-8)
            for key, value in zip(history, (loss, norm, lr)):
                history[key].append(float(value))
    return history


def buggy_loop(bug):
    """The loop written out once more, with one bug (None: none), in course_lib's in-place
    style: Adam's moments updated in place, clipping with course_lib's factor max_norm / (norm
    + 1e-6), which Exercise 11.5's checker accepts."""
    def loop(model, backward, data, epochs, schedule, batch_size=32, max_norm=1.0, seed=0):
        tokens, targets = data
        n, b1, b2 = len(tokens), 0.9, 0.999
        size = 32 if bug == "batch 32" else batch_size
        rng = np.random.default_rng(0 if bug == "seed ignored" else seed)
        state = {k: [np.zeros_like(p), np.zeros_like(p)] for k, p in model.params.items()}
        summed = {k: np.zeros_like(p) for k, p in model.params.items()}     # never zeroed
        hist, t = {"loss": [], "grad_norm": [], "lr": []}, -1 if bug == "t from 0" else 0
        for _ in range(1, epochs) if bug == "epochs - 1" else range(epochs):
            if bug in ("t per epoch", "state per epoch"):
                t = 0
            if bug in ("moments per epoch", "state per epoch"):
                state = {k: [np.zeros_like(p), np.zeros_like(p)] for k, p in model.params.items()}
            if bug == "rng per epoch":
                rng = np.random.default_rng(seed)
            if bug == "history per epoch":
                hist = {"loss": [], "grad_norm": [], "lr": []}
            order = np.arange(n) if bug == "no shuffle" else rng.permutation(n)
            if bug == "data in place":          # shuffle the problems themselves
                tokens[...], targets[...], order = tokens[order], targets[order], np.arange(n)
            for lo in range(0, n - n % size if bug == "drop last" else n, size):
                t += 1
                if bug == "loss of all data before":
                    logged = model.loss(tokens, targets)
                loss = model.loss(tokens[order[lo:lo + size]], targets[order[lo:lo + size]])
                grads = model.backward() if bug == "model.backward" else backward(model)
                if bug == "gradients accumulated":
                    for k in summed:
                        summed[k] += grads[k]
                    grads = summed
                norm = cl.optim.global_norm(grads)
                scale = max_norm / (norm + 1e-6) if norm > max_norm else 1.0
                grads = {k: g * (1.0 if bug == "no clipping" else scale)
                         for k, g in grads.items()}
                lr = schedule(t - 1 if bug == "schedule(t - 1)" else t)
                for k, (m, v) in state.items():
                    m[...] = b1 * m + (1 - b1) * grads[k]
                    v[...] = b2 * v + (1 - b2) * grads[k] ** 2
                    new = model.params[k] - lr * (m / (1 - b1 ** t)) / (
                        np.sqrt(v / (1 - b2 ** t)) + 1e-8)
                    if bug != "not assigned":
                        model.params[k] = new
                if bug == "loss after update":
                    loss = model.loss(tokens[order[lo:lo + size]], targets[order[lo:lo + size]])
                if bug == "loss of all data":       # "the training loss", after the step
                    loss = model.loss(tokens, targets)
                hist["loss"].append(float(logged if bug == "loss of all data before" else loss))
                hist["grad_norm"].append(min(norm, max_norm) if bug == "norm after clipping"
                                         else norm)
                hist["lr"].append(np.float32(lr) if bug == "float32 lr" else lr)
        return {k: h for k, h in hist.items() if not (bug == "no lr" and k == "lr")}
    return loop


LOOP = cl.checks.check_train_loop
SHAPES = "returns the history ('loss', 'grad_norm', 'lr', one entry per step) and updates model.params"
ONE_EPOCH = "one epoch of 3 batches, against a reference loop"
TWO_EPOCHS = ("two epochs of 37 problems in batches of 8 (the last one short), seed 5, max_norm 2 "
              "(some steps clipped, some not): what carries over between epochs")


@pytest.mark.parametrize("fn", [train_loop, buggy_loop(None)], ids=["solution", "in place"])
def test_the_loop_passes(fn, capsys):
    assert_passes(LOOP, fn, capsys)


@pytest.mark.parametrize("bug, stage, hint", [
    ("t from 0", SHAPES, "t is 0 at the first step"),
    ("not assigned", SHAPES, "assign it back"),
    ("no lr", SHAPES, "'lr'"),
    ("model.backward", SHAPES, "backward(model)"),
    ("float32 lr", SHAPES, "float64"),
    ("no clipping", ONE_EPOCH, "give Adam the clipped ones"),
    ("norm after clipping", ONE_EPOCH, "record the norm before"),
    ("schedule(t - 1)", ONE_EPOCH, "passes t - 1"),
    ("no shuffle", ONE_EPOCH, "stored order"),
    ("t per epoch", TWO_EPOCHS, "t starts again at 1 every epoch"),
    ("moments per epoch", TWO_EPOCHS, "m and v are made anew every epoch"),
    ("state per epoch", TWO_EPOCHS, "(t, m and v) is made anew"),
    ("rng per epoch", TWO_EPOCHS, "same order"),
    ("seed ignored", TWO_EPOCHS, "does not depend on `seed`"),
    ("drop last", TWO_EPOCHS, "last, shorter batch is missing"),
    ("history per epoch", TWO_EPOCHS, "made anew in each epoch"),
    ("batch 32", SHAPES, "batches of 32 whatever batch_size"),
    ("epochs - 1", SHAPES, "range(1, epochs)"),
    ("gradients accumulated", ONE_EPOCH, "add up from step to step"),
    ("loss after update", ONE_EPOCH, "the loss after the update"),
    ("loss of all data", ONE_EPOCH, "the loss of all the problems"),
    ("loss of all data before", ONE_EPOCH, "only history['loss'] differs"),
    ("data in place", SHAPES, "the caller's problems"),
])
def test_loop_mistakes_are_named(bug, stage, hint, capsys):
    assert_rejects(LOOP, buggy_loop(bug), capsys, hint, stage=stage)


def test_data_changed_in_place_is_named(capsys):
    result = assert_rejects(LOOP, buggy_loop("data in place"), capsys, None, stage=SHAPES,
                            message_part="your loop changed `data` in place")
    assert "tokens" in result.message, result.message


def test_epochs_minus_one_is_named_with_two_epochs():
    """range(1, epochs) with epochs = 2: one epoch of entries, as many as the steps it took."""
    from course_lib.checks import training
    hint = training._length_hint(5, 37, 8, 2, calls=5)
    assert "range(1, epochs)" in hint
    assert "made anew" in training._length_hint(5, 37, 8, 2, calls=10)


def _with_helpers(**helpers):
    """The solution's code with other adam_step / clip_by_global_norm in its globals."""
    return types.FunctionType(train_loop.__code__, {**globals(), **helpers}, "train_loop")


HELPERS = "first, the functions of Exercises 11.4-11.5 that train_loop calls: "


@pytest.mark.parametrize("helpers, exercise, hint", [
    ({"adam_step": _adam_variant(correct=(False, False))}, "Exercise 11.4", "no bias correction"),
    ({"clip_by_global_norm": _clip_odd}, "Exercise 11.5", "Exercise 11.5"),
])
def test_a_bug_in_a_helper_is_named_there(helpers, exercise, hint, capsys):
    result = assert_rejects(LOOP, _with_helpers(**helpers), capsys, hint,
                            stage=HELPERS + "adam_step, clip_by_global_norm")
    assert f"check of {exercise} fails" in result.message and "fix " + exercise in result.hint


def test_a_helper_not_done_is_named(capsys):
    def stub(*args):
        raise NotImplementedError
    result = assert_rejects(LOOP, _with_helpers(adam_step=stub), capsys, "finish Exercise 11.4")
    assert "which is not done yet" in result.message


def test_an_unknown_order_gets_the_idea_then_the_formula(capsys, monkeypatch):
    monkeypatch.setattr(cl.checks.core, "_failures", collections.Counter())   # a fresh kernel
    def other_order(model, backward, data, epochs, schedule, batch_size=32, max_norm=1.0,
                    seed=0):
        tokens, targets = data
        shuffled = np.random.default_rng(99).permutation(len(tokens))
        return train_loop(model, backward, (tokens[shuffled], targets[shuffled]), epochs,
                          schedule, batch_size, max_norm, seed)
    first = assert_rejects(LOOP, other_order, capsys, "the first batch already differs",
                           stage=ONE_EPOCH, message_part="history['loss'] differs first at step 1")
    assert "hint 1 of 2" in first.hint and "rng.permutation(len(tokens))" not in first.hint
    second = assert_rejects(LOOP, other_order, capsys, "rng.permutation(len(tokens))")
    assert "hint 2 of 2" in second.hint


def test_a_loop_on_course_lib_optimiser_is_a_library_call(capsys):
    def with_adam(model, backward, data, epochs, schedule, batch_size=32, max_norm=1.0, seed=0):
        opt = cl.optim.Adam(model.params, lr=schedule(1))
        tokens, targets = data
        model.loss(tokens[:batch_size], targets[:batch_size])
        opt.step(backward(model))
        return {"loss": [], "grad_norm": [], "lr": []}
    result, out = run_check(LOOP, with_adam, capsys)
    assert not result.passed and result.library == "course_lib.optim.Adam.step", out
    assert "your own adam_step (Exercise 11.4)" in result.hint, out


@pytest.mark.parametrize("value, text", [
    (None, "returned None"), ([1.0], "expected the dict"), ({"loss": [1.0]}, "no key 'grad_norm'"),
    ({"loss": np.array(1.0), "grad_norm": [], "lr": []}, "history['loss'] is a ndarray, expected a list"),
])
def test_odd_histories_fail_cleanly(value, text, capsys):
    def loop(model, backward, data, epochs, schedule, batch_size=32, max_norm=1.0, seed=0):
        return value
    assert_rejects(LOOP, loop, capsys, None, stage=SHAPES, message_part=text)
