import json
import os
import subprocess
import sys

import numpy as np
import pytest

from course_lib import optim


def make_params(dtype=np.float64):
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((3, 4)).astype(dtype), "b": rng.standard_normal(4).astype(dtype)}


def test_adam_first_step_moves_each_weight_by_lr():
    p = make_params()
    before = {k: v.copy() for k, v in p.items()}
    opt = optim.Adam(p, lr=0.01)
    g = {k: np.random.default_rng(1).standard_normal(v.shape) for k, v in p.items()}
    opt.step(g)
    # bias correction: m_hat = g, v_hat = g^2, so the step is lr * sign(g)
    for k in p:
        np.testing.assert_allclose(before[k] - p[k], 0.01 * np.sign(g[k]), rtol=1e-6)
    assert opt.t == 1


def test_adam_minimises_a_quadratic():
    p = {"w": np.array([5.0, -3.0])}
    opt = optim.Adam(p, lr=0.1)
    for _ in range(500):
        opt.step({"w": p["w"] - np.array([1.0, 2.0])})
    np.testing.assert_allclose(p["w"], [1.0, 2.0], atol=1e-3)


def test_sgd_diverges_above_lr_2_on_a_parabola():
    # L(w) = 0.5 (w - 3)^2: w <- w - lr (w - 3); the error is multiplied by (1 - lr) each step
    for lr, converges in ((0.5, True), (1.9, True), (2.1, False)):
        p = {"w": np.array([0.0])}
        opt = optim.SGD(p, lr=lr)
        for _ in range(100):
            opt.step({"w": p["w"] - 3.0})
        assert (abs(p["w"][0] - 3.0) < 1e-3) == converges, lr


@pytest.mark.parametrize("call, error, words", [
    (lambda p: optim.Adam(p, lr=-1e-3), ValueError, r"learning rate lr must be >= 0"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=1.5), ValueError, "momentum must be"),
    (lambda p: optim.Adam(p, betas=(0.9,)), TypeError, "betas must be a pair"),
    (lambda p: optim.Adam(p, eps=0.0), ValueError, "eps must be > 0"),
    (lambda p: optim.Adam(p, lr=float("nan")), TypeError, "finite number"),
    (lambda p: optim.Adam([1, 2]), TypeError, "non-empty dict"),
])
def test_bad_hyperparameters(call, error, words):
    with pytest.raises(error, match=words):
        call(make_params())


@pytest.mark.parametrize("grads, error, words", [
    ({"w": np.zeros((3, 4))}, ValueError, r"missing \['b'\]"),
    ({"w": np.zeros((3, 4)), "b": np.zeros(4), "c": np.zeros(1)}, ValueError, r"unexpected \['c'\]"),
    ({"w": np.zeros((4, 3)), "b": np.zeros(4)}, ValueError, r"gradient 'w' has shape \(4, 3\)"),
    ({"w": np.zeros((3, 4)), "b": [0.0] * 4}, ValueError, r"gradient 'b' has shape None"),
    ([np.zeros((3, 4))], TypeError, "must be a dict"),
])
def test_bad_gradients_change_nothing(grads, error, words):
    p = make_params()
    before = {k: v.copy() for k, v in p.items()}
    opt = optim.Adam(p)
    with pytest.raises(error, match=words):
        opt.step(grads)
    assert opt.t == 0 and all(np.array_equal(before[k], p[k]) for k in p)
    assert all(np.all(m == 0) for m in opt.m.values())


def test_gradients_in_another_dtype_are_converted():
    p32, p_ref = make_params(np.float32), make_params(np.float32)
    g = {k: np.full(v.shape, 0.3) for k, v in p32.items()}           # float64 gradients
    optim.Adam(p32, lr=0.1).step(g)
    optim.Adam(p_ref, lr=0.1).step({k: v.astype(np.float32) for k, v in g.items()})
    assert all(p32[k].dtype == np.float32 and np.array_equal(p32[k], p_ref[k]) for k in p32)


def test_setting_a_negative_lr_is_refused():
    opt = optim.SGD(make_params(), lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        opt.lr = -0.5
    assert opt.lr == 0.1


def test_clip_grad_norm():
    g = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    assert optim.clip_grad_norm(g, max_norm=1.0) == pytest.approx(5.0)
    assert optim.global_norm(g) == pytest.approx(1.0, rel=1e-5)
    small = {"a": np.array([0.3, 0.4])}
    assert optim.clip_grad_norm(small, 1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(small["a"], [0.3, 0.4])
    with pytest.raises(ValueError, match="max_norm"):
        optim.clip_grad_norm(g, max_norm=0)
    known = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    assert optim.clip_grad_norm(known, max_norm=2.5, norm=5.0) == 5.0      # a norm the caller already has
    assert optim.global_norm(known) == pytest.approx(2.5, rel=1e-5)


def test_schedules():
    assert optim.Constant(0.1)(500) == 0.1
    s = optim.StepDecay(1.0, step_size=10, gamma=0.5)
    assert [s(0), s(9), s(10), s(25)] == [1.0, 1.0, 0.5, 0.25]
    assert optim.Exponential(1.0, 0.9)(2) == pytest.approx(0.81)
    c = optim.Cosine(1.0, total_steps=100, min_lr=0.1)
    assert c(0) == pytest.approx(1.0) and c(50) == pytest.approx(0.55) and c(100) == pytest.approx(0.1)
    assert c(1000) == pytest.approx(0.1)
    w = optim.WarmupCosine(1.0, warmup_steps=10, total_steps=110)
    assert w(0) == pytest.approx(0.1) and w(9) == pytest.approx(1.0) and w(60) == pytest.approx(0.5)
    assert w(110) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="warmup_steps"):
        optim.WarmupCosine(1.0, warmup_steps=10, total_steps=10)


TRAIN_SCRIPT = """
import json, sys
import numpy as np
import course_lib as cl
tokens, targets = cl.task.splits(seed=0)["train"]
model = cl.Transformer(cl.presets.deep_dive(), seed=7)
opt = cl.optim.Adam(model.params, lr=1e-3)
losses = []
for step in range(20):
    rows = slice(32 * step, 32 * step + 32)
    losses.append(model.loss(tokens[rows], targets[rows]))
    opt.step(model.backward())
digest = {k: v.tobytes().hex() for k, v in model.params.items()}
print(json.dumps({"losses": losses, "digest": digest}))
"""


def run_training(threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", TRAIN_SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_same_seed_bitwise_identical_and_thread_count_independent():
    a, b = run_training(2), run_training(2)
    assert a["digest"] == b["digest"] and a["losses"] == b["losses"]
    c = run_training(1)
    np.testing.assert_allclose(c["losses"], a["losses"], rtol=1e-6)
    assert a["losses"][-1] < a["losses"][0]


def test_adam_with_mixed_precision_parameters_matches_one_by_one():
    p = {"a": np.ones(3, dtype=np.float32), "b": np.ones((2, 2))}
    q = {"a": np.ones(3, dtype=np.float32)}
    r = {"b": np.ones((2, 2))}
    g = {"a": np.array([1.0, -2.0, 3.0], dtype=np.float32), "b": np.full((2, 2), 0.5)}
    for params in (p, q, r):
        opt = optim.Adam(params, lr=0.1)
        for _ in range(3):
            opt.step({k: g[k] for k in params})
    np.testing.assert_array_equal(p["a"], q["a"])
    np.testing.assert_array_equal(p["b"], r["b"])


@pytest.mark.parametrize("make", [lambda p: optim.Adam(p, lr=0.1), lambda p: optim.SGD(p, lr=0.1, momentum=0.9)])
def test_a_parameter_array_replaced_in_the_dict_is_the_one_updated(make):
    """io.load puts new arrays into model.params: the optimiser must update those, not the old ones."""
    p = make_params()
    opt = make(p)
    g = {k: np.ones_like(v) for k, v in p.items()}
    opt.step(g)
    old_w, p["w"] = p["w"], np.zeros((3, 4))
    frozen = old_w.copy()
    opt.step(g)
    assert np.all(p["w"] < 0)                      # the new array moved against the gradient
    np.testing.assert_array_equal(old_w, frozen)   # the replaced one was left alone


def test_parameters_that_are_views_and_a_parameter_added_later():
    base = np.zeros((4, 3))
    p = {"w": base[1:3]}                           # a contiguous view: updated in place, step after step
    opt = optim.SGD(p, lr=0.5)
    for _ in range(2):
        opt.step({"w": np.ones((2, 3))})
    np.testing.assert_array_equal(base[1:3], -1.0)
    p["b"] = np.zeros(2)
    with pytest.raises(ValueError, match="make a new optimiser"):
        opt.step({"w": np.ones((2, 3)), "b": np.ones(2)})
    assert opt.t == 2                              # the refused step changed nothing
