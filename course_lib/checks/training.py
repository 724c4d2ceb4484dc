"""Checkers for notebook 11, training.

    cl.checks.check_sgd_momentum_step(sgd_momentum_step)   # Exercise 11.2: (new_param, new_velocity)
    cl.checks.check_adam_step(adam_step)                   # Exercise 11.4: (new_param, m, v)
    cl.checks.check_clip_by_global_norm(clip_by_global_norm)  # Exercise 11.5: (clipped dict, norm)
    cl.checks.check_train_loop(train_loop)                 # Exercise 11.6: history dict of lists

(Exercises 11.1 and 11.3 are derivations on paper, the divergence threshold of gradient descent
on 0.5 (w - 3)^2 and Adam's bias correction: no checker.)

The default hints (a wrong result that matches no known mistake) point to the rule stated in
the notebook's text; they never spell out the solution.

Conventions, stated in the notebook and fixed here:
- every function is pure: it returns new arrays and changes none of its inputs (core.call fails
  a function that changes an input array in place, naming it; the clipping checker does the
  same for the arrays inside the dict it passes);
- momentum is PyTorch's: velocity = momentum * velocity + grad, param - lr * velocity. At
  momentum 0 the step is plain SGD and the velocity plays no part in it: the checker accepts
  the new velocity grad, or the old velocity returned unchanged (course_lib's optim.SGD, like
  PyTorch, keeps no velocity at momentum 0);
- Adam's step counter t starts at 1 (the first call has t = 1) and eps is added outside the
  square root: param - lr * m_hat / (sqrt(v_hat) + eps);
- clipping scales every gradient by max_norm / norm when norm > max_norm (course_lib adds
  1e-6 to the norm, a difference far below the tolerance) and returns the norm before clipping;
- the training loop (11.6) counts t from 1 over the whole run, for Adam and for schedule(t),
  takes each epoch's problems in the order rng.permutation(n) of one rng made from seed, leaves
  the arrays of `data` as they were, and logs the loss of each batch as model.loss returned it
  before the update (a history right but for its losses is named so).

Expected values come from float64 formulas written here, never from the learner's function;
a wrong result is compared with the usual mistakes, and the hint names the one it matches.
"""

import numpy as np

from .cases import call_hinted
from .core import (case_rng, CheckFailed, as_array, call, check_quietly, checker, diagnose, expect_finite,
                   expect_float64, expect_shape, foreign_array, low_precision, learner_helpers, short_repr,
                   show_digits, stage, tiered)
from .library import Solution
from .reference import adam_moments, adam_step

__all__ = ["check_sgd_momentum_step", "check_adam_step", "check_clip_by_global_norm",
           "check_train_loop"]


def _unpack(result, names, shapes):
    """The learner's tuple of arrays, each with its shape, or a failure naming what is wrong."""
    n = len(names)
    text = ", ".join(names)
    if result is None:
        raise CheckFailed("your function returned None", hint=f"return the tuple ({text})")
    if not isinstance(result, (tuple, list)) or isinstance(result, str):
        raise CheckFailed(f"your function returned a {type(result).__name__}, expected a tuple of "
                          f"{n} arrays ({text})", hint=f"end with `return {text}`")
    if len(result) != n:
        raise CheckFailed(f"your function returned {len(result)} values, expected {n} ({text})",
                          hint=f"end with `return {text}`, in this order")
    out = []
    for i, (r, name, s) in enumerate(zip(result, names, shapes)):
        what = f"`{name}` (returned value {i + 1})"
        out.append(expect_shape(r, s, what=what, hint=f"`{name}` has the shape of the parameter"))
        expect_float64(r, what)
    return out


# ----------------------------------------------------------------------------------------
# Exercise 11.2: SGD with momentum
# ----------------------------------------------------------------------------------------

def _momentum_ref(p, g, vel, lr, mu):
    new_v = mu * vel + g
    return p - lr * new_v, new_v


_MOMENTUM_HINT = ("re-read the rule in words above Exercise 11.2: what the velocity keeps of its "
                  "old value, what it adds, and which velocity (old or new) the parameter steps "
                  "along, in which direction")


def _momentum_case(fn, p, g, vel, lr, mu):
    got = _unpack(call_hinted(fn, (p, g, vel, lr, mu)), ("new_param", "new_velocity"),
                  (p.shape, p.shape))
    want_p, want_v = _momentum_ref(p, g, vel, lr, mu)
    ema_v = mu * vel + (1 - mu) * g
    classic_v = mu * vel - lr * g
    param_mistakes = [
        (p - lr * vel, "the parameter moved with the OLD velocity: update the velocity first, "
                       "then step with the new one"),
        (p - lr * ema_v, "your velocity is an average, momentum * velocity + (1 - momentum) * grad; "
                         "this course uses PyTorch's convention, velocity = momentum * velocity + grad "
                         "(no 1 - momentum factor)"),
        (p + classic_v, "your step is param + velocity with velocity = momentum * velocity - lr * "
                        "grad (the form of some textbooks); this course stores velocity = momentum "
                        "* velocity + grad and steps by - lr * velocity"),
        (p + lr * want_v, "the step goes uphill: subtract lr * velocity"),
        (p - lr * g, "the parameter moved by the gradient alone: the velocity is not used in the step"),
        (p - lr * mu * g, "momentum multiplies the old velocity, not the gradient"),
    ]
    diagnose(got[0], want_p, param_mistakes, _MOMENTUM_HINT, what="`new_param`")
    velocity_mistakes = [
        (classic_v, "your velocity is momentum * velocity - lr * grad (the step itself, the form of "
                    "some textbooks); this course stores velocity = momentum * velocity + grad and "
                    "steps by - lr * velocity"),
        (ema_v, "your velocity is momentum * velocity + (1 - momentum) * grad; this course uses "
                "velocity = momentum * velocity + grad"),
        (vel, "return the NEW velocity, not the one you were given"),
        (g, "the new velocity is momentum * velocity + grad: the old velocity is missing"),
    ]
    if mu == 0 and np.array_equal(got[1], vel):
        return      # momentum 0: plain SGD, no velocity kept (as course_lib's SGD and PyTorch)
    diagnose(got[1], want_v, velocity_mistakes, _MOMENTUM_HINT, what="`new_velocity`")


@checker(library=["optim.sgd_update"])
def check_sgd_momentum_step(fn):
    rng = case_rng(11)
    with stage("returns (new_param, new_velocity), shaped like param"):
        p, g, vel = (rng.standard_normal((3, 4)) for _ in range(3))
        _unpack(call_hinted(fn, (p, g, vel, 0.1, 0.9)), ("new_param", "new_velocity"),
                (p.shape, p.shape))
    with stage("hand-checkable case"):
        # velocity = 0.9 * [0.2, 0] + [0.5, -1] = [0.68, -1]; param = [1, 2] - 0.1 * velocity
        _momentum_case(fn, np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([0.2, 0.0]),
                       0.1, 0.9)
    with stage("random cases"):
        for shape, lr, mu in (((5,), 0.05, 0.9), ((4, 3), 0.3, 0.5), ((2, 3, 4), 0.01, 0.99)):
            p, g, vel = (rng.standard_normal(shape) for _ in range(3))
            _momentum_case(fn, p, g, vel, lr, mu)
    with stage("momentum 0 is plain SGD; a zero gradient still moves (the ball rolls on)"):
        # at momentum 0 new_velocity may be grad (the formula) or the old velocity unchanged
        p, g, vel = (rng.standard_normal((3, 3)) for _ in range(3))
        _momentum_case(fn, p, g, vel, 0.1, 0.0)
        _momentum_case(fn, p, np.zeros_like(g), vel, 0.1, 0.9)


# ----------------------------------------------------------------------------------------
# Exercise 11.4: Adam (its bias correction is derived in Exercise 11.3)
# ----------------------------------------------------------------------------------------

_T_ZERO_HINT = ("at t = 1 your bias correction divides by zero: 1 - beta ** 0 = 0. The first step "
                "is t = 1; use the t you are given, as it is (1 - beta1 ** t)")


def _adam_param_mistakes(p, g, m, v, t, lr, b1, b2, eps):
    """The usual wrong Adam steps, each as (a thunk computing it, the hint that names it)."""
    m1, v1 = adam_moments(g, m, v, b1, b2)

    def step(m_hat, v_hat, inside=False):
        return p - lr * m_hat / (np.sqrt(v_hat + eps) if inside else np.sqrt(v_hat) + eps)

    mh, vh = m1 / (1 - b1 ** t), v1 / (1 - b2 ** t)
    return [
        (lambda: step(m1, v1), "no bias correction: divide m by (1 - beta1 ** t) and v by "
                               "(1 - beta2 ** t) before the step (early steps are far too small "
                               "without it)"),
        (lambda: step(mh, v1), "only m is bias-corrected: divide v by (1 - beta2 ** t) as well"),
        (lambda: step(m1, vh), "only v is bias-corrected: divide m by (1 - beta1 ** t) as well"),
        (lambda: step(m1 / (1 - b1 ** (t + 1)), v1 / (1 - b2 ** (t + 1))),
         "the bias correction uses t + 1: the t you are given already counts this step (the "
         "first step is t = 1), so use 1 - beta ** t"),
        (lambda: step(m1 / (1 - b1 ** (t - 1)), v1 / (1 - b2 ** (t - 1))),
         _T_ZERO_HINT if t == 1 else "the bias correction uses t - 1: the t you are given already "
         "counts this step, so use 1 - beta ** t"),
        (lambda: p - lr * mh / np.sqrt(vh), "eps is missing: the denominator is sqrt(v_hat) + "
         "eps, which keeps the step finite where v_hat is tiny"),
        (lambda: step(mh, vh, inside=True), "eps is inside the square root: the course (and "
         "PyTorch) divide by sqrt(v_hat) + eps, with eps added after the root"),
        (lambda: p - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m1 / (np.sqrt(v1) + eps),
         "this is Keras's Adam (and the Adam paper's 'efficient' form): lr_t = lr * sqrt(1 - "
         "beta2 ** t) / (1 - beta1 ** t), param - lr_t * m / (sqrt(v) + eps). It adds eps to "
         "sqrt(v) before v's bias correction, which is this course's formula with eps / sqrt(1 - "
         "beta2 ** t) for eps (about 32 times larger at t = 1 with beta2 = 0.999). The course, "
         "like PyTorch, adds eps to "
         "sqrt(v_hat): param - lr * m_hat / (sqrt(v_hat) + eps)"),
        (lambda: p - lr * mh / (vh + eps), "the square root of v_hat is missing in the "
                                          "denominator"),
        (lambda: p + lr * mh / (np.sqrt(vh) + eps), "the step goes uphill: subtract it"),
        (lambda: adam_step(p, g, m, v, t, lr, b2, b1, eps)[0],
         "beta1 and beta2 are swapped: betas = (beta1, beta2), beta1 for m and beta2 for v"),
        (lambda: step(mh, v1 / (1 - b1 ** t)), "v is bias-corrected with beta1: v_hat = v / "
         "(1 - beta2 ** t), since v is the average kept with beta2 (Exercise 11.3)"),
        (lambda: step(m1 / (1 - b2 ** t), vh), "m is bias-corrected with beta2: m_hat = m / "
         "(1 - beta1 ** t), since m is the average kept with beta1 (Exercise 11.3)"),
        (lambda: step((b1 * m + g) / (1 - b1 ** t), vh), "m = beta1 * m + (1 - beta1) * grad: the "
                                                        "(1 - beta1) factor is missing"),
        (lambda: step(mh, (b2 * v + (1 - b2) * g) / (1 - b2 ** t)),
         "v averages the SQUARED gradient: v = beta2 * v + (1 - beta2) * grad ** 2"),
    ]


_ADAM_HINT = ("your m and v are right, the step is not: compare it, piece by piece, with the "
              "description above Exercise 11.4 and the factor you derived in Exercise 11.3 "
              "(which average is corrected by which beta, where eps sits)")
_MOMENTS_HINT = ("re-read the description of the two averages above Exercise 11.4: what each "
                 "keeps of its old value and what it adds (v: of the squared gradient)")


def _adam_new_param(got, p, want_p, param_mistakes, t):
    """Compare the learner's new parameter, naming the mistake behind a NaN, an inf or a miss."""
    if not np.all(np.isfinite(got)):      # NaN or inf: name the mistake that makes them
        for wrong, hint in param_mistakes:
            with np.errstate(all="ignore"):
                candidate = np.asarray(wrong(), dtype=float)
            if np.allclose(got, candidate, rtol=1e-6, atol=1e-9, equal_nan=True):
                raise CheckFailed("`new_param` contains NaN or infinity", hint)
        raise CheckFailed("`new_param` contains NaN or infinity", _T_ZERO_HINT if t == 1 else
                          "print m_hat and v_hat: is a denominator zero, or a root negative?")
    # compared as the step new_param - param: where eps sits changes the step by ~1e-3 of
    # itself, far below the tolerance on the parameter, but far above it on the step
    steps = [(lambda wrong=wrong: wrong() - p, hint) for wrong, hint in param_mistakes]
    diagnose(got - p, want_p - p, steps, _ADAM_HINT, what="the step `new_param - param`")


def _adam_moments(got_m, got_v, g, m, v, t, b1, b2, want_m, want_v):
    """Compare the learner's new raw moments m and v with the usual mistakes."""
    mh, vh = want_m / (1 - b1 ** t), want_v / (1 - b2 ** t)
    m_mistakes = [(b1 * m + g, "your m is beta1 * m + grad: either the (1 - beta1) factor is "
                               "missing, or you returned m_hat (at t = 1 the two agree); return "
                               "the raw moment m, with its (1 - beta1) factor")]
    m_mistakes = m_mistakes if np.allclose(b1 * m + g, mh) else []
    m_mistakes += [(mh, "return the raw moment m (the running average); m_hat is only for the step, "
                       "and storing it would correct it again next time"),
                  (m, "return the NEW m, not the one you were given"),
                  (b2 * m + (1 - b2) * g, "beta1 and beta2 are swapped: betas = (beta1, beta2), "
                                          "beta1 for m and beta2 for v"),
                  (b1 * m + g, "m = beta1 * m + (1 - beta1) * grad: the (1 - beta1) factor is "
                               "missing")]
    diagnose(got_m, want_m, m_mistakes, _MOMENTS_HINT, what="`m`")
    v_mistakes = [(vh, "return the raw moment v (the running average); v_hat is only for the step"),
                  (v, "return the NEW v, not the one you were given"),
                  (b1 * v + (1 - b1) * g * g, "beta1 and beta2 are swapped: betas = (beta1, "
                                              "beta2), beta1 for m and beta2 for v"),
                  (b2 * v + (1 - b2) * g, "v averages the SQUARED gradient: (1 - beta2) * grad ** 2")]
    diagnose(got_v, want_v, v_mistakes, _MOMENTS_HINT, what="`v`")


def _adam_case(fn, p, g, m, v, t, lr, betas, eps):
    b1, b2 = betas
    try:
        result = call_hinted(fn, (p, g, m, v, t, lr, betas, eps))
    except CheckFailed as e:
        if "ZeroDivisionError" in e.message:
            raise CheckFailed(e.message, _T_ZERO_HINT) from None
        raise
    got = _unpack(result, ("new_param", "m", "v"), (p.shape,) * 3)
    want_p, want_m, want_v = adam_step(p, g, m, v, t, lr, b1, b2, eps)
    _adam_moments(got[1], got[2], g, m, v, t, b1, b2, want_m, want_v)   # the state first
    _adam_new_param(got[0], p, want_p, _adam_param_mistakes(p, g, m, v, t, lr, b1, b2, eps), t)


@checker(library=["optim.adam_update", "optim.adam_update_all", "optim._adam_range", "optim._adam_range.ranges"])
def check_adam_step(fn):
    rng = case_rng(113)
    betas = (0.9, 0.999)
    with stage("returns (new_param, m, v), each shaped like param"):
        p, g = rng.standard_normal((2, 3, 4))
        z = np.zeros((3, 4))
        _unpack(call_hinted(fn, (p, g, z, z, 3, 1e-3, betas, 1e-8)), ("new_param", "m", "v"),
                ((3, 4),) * 3)
    with stage("hand-checkable case: the first step (t = 1, m = v = 0)"):
        # m_hat = grad and v_hat = grad^2, so every entry moves by lr * sign(grad), eps aside
        p = np.array([0.5, -1.0, 2.0])
        g = np.array([0.1, -2.0, 3.0])
        z = np.zeros(3)
        _adam_case(fn, p, g, z, z, 1, 0.01, betas, 1e-8)
    with stage("random cases (t = 2, 10, 1000; eps = 1e-3 so that where eps sits shows)"):
        for shape, t, lr, bs in (((6,), 2, 0.01, betas), ((3, 5), 10, 0.1, (0.8, 0.99)),
                                 ((2, 2, 3), 1000, 0.003, betas)):
            p, g, m = (rng.standard_normal(shape) for _ in range(3))
            v = rng.standard_normal(shape) ** 2
            _adam_case(fn, p, g, m, v, t, lr, bs, 1e-3)
    with stage("edge cases: a zero gradient, a tiny gradient where eps dominates"):
        p = rng.standard_normal(4)
        _adam_case(fn, p, np.zeros(4), np.zeros(4), np.zeros(4), 1, 0.01, betas, 1e-8)
        _adam_case(fn, p, np.full(4, 1e-10), np.zeros(4), np.zeros(4), 1, 0.01, betas, 1e-8)
    with stage("small v_hat: where eps sits, or whether it is there, shows (eps = 1e-3)"):
        g = np.array([1e-4, -2e-3, 5e-4, 1e-2])
        _adam_case(fn, p, g, 0.5 * g, 0.5 * g * g, 3, 0.01, betas, 1e-3)


# ----------------------------------------------------------------------------------------
# Exercise 11.5: clipping by the global norm
# ----------------------------------------------------------------------------------------

_ZERO_NORM_HINT = ("all-zero gradients have norm 0: divide only when norm > max_norm, and "
                   "return the gradients unchanged otherwise")
_CLIP_HINT = ("re-read the rule above Exercise 11.5: when is anything scaled, and which one "
              "factor, shared by every array, makes the global norm equal max_norm?")


def _clip_result(fn, grads, max_norm):
    """Call the learner's function; -> (clipped, norm), or a failure naming what is wrong."""
    copies = {k: g.copy() for k, g in grads.items()}
    try:
        result = call_hinted(fn, (grads, max_norm))
    except CheckFailed as e:
        if "ZeroDivisionError" in e.message:
            raise CheckFailed(e.message, _ZERO_NORM_HINT) from None
        raise
    for k, before in copies.items():         # core.call only sees arrays passed directly
        if not np.array_equal(before, grads[k], equal_nan=True):
            raise CheckFailed(f"your function changed `grads[{k!r}]` in place",
                              hint="return new arrays (`g * scale`, not `g *= scale`): the "
                                   "caller's gradients must stay as they were")
    if result is None:
        raise CheckFailed("your function returned None", hint="return the pair (clipped, norm)")
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CheckFailed(f"your function returned {type(result).__name__} "
                          f"{short_repr(result)}, expected a pair (clipped, norm)",
                          hint="end with `return clipped, norm`")
    clipped, norm = result
    if clipped is grads:
        raise CheckFailed("`clipped` is the dict `grads` you were given, not a new dict",
                          hint="return a new dict, also when nothing is scaled (the statement asks "
                               "for one): a caller that changes `clipped` must not change `grads`")
    if not isinstance(clipped, dict):
        raise CheckFailed(f"`clipped` is a {type(clipped).__name__}, expected a dict with the keys "
                          f"of grads", hint="build it as {name: g * scale for name, g in grads.items()}")
    if set(clipped) != set(grads):
        raise CheckFailed(f"`clipped` has the keys {sorted(clipped)}, expected {sorted(grads)}",
                          hint="one entry per gradient, under the same name")
    return clipped, norm


def _clip_shapes(clipped, norm, grads):
    """Shapes and dtypes only: each clipped array shaped like its gradient, one float64 norm."""
    for k, g in grads.items():
        expect_shape(clipped[k], g.shape, what=f"`clipped[{k!r}]`",
                     hint="each clipped gradient has the shape of its gradient")
        expect_float64(clipped[k], f"`clipped[{k!r}]`")
    expect_float64(norm, "`norm`")
    if as_array(norm, "`norm`").shape != ():
        raise CheckFailed(f"`norm` has shape {np.shape(norm)}, expected one number",
                          hint="the global norm is one number for all gradients together")


def _clip_norm(norm, norms, total, max_norm):
    """Compare the returned global norm with the usual mistakes."""
    norm_arr = as_array(norm, "`norm`")
    if norm_arr.shape != ():
        raise CheckFailed(f"`norm` has shape {norm_arr.shape}, expected one number",
                          hint="the global norm is one number for all gradients together")
    norm_mistakes = [(min(total, max_norm), "return the norm BEFORE clipping: it tells you how "
                                            "large the gradient was"),
                     (total ** 2, "the norm is the square root of the sum of squares"),
                     (sum(norms.values()), "the global norm is sqrt of the sum of ALL squares, not "
                                           "the sum of the arrays' norms")]
    expect_float64(norm, "`norm`")
    diagnose(norm_arr, total, norm_mistakes, "re-read the definition of the global norm above "
             "Exercise 11.5: one number for all arrays together", what="`norm`")


def _clip_arrays(clipped, grads, norms, total, max_norm):
    """Compare each clipped array with the usual mistakes (per entry, per array, always)."""
    scale = max_norm / total if total > max_norm else 1.0
    for k, g in grads.items():
        own = max_norm / norms[k] if norms[k] > max_norm else 1.0
        arr = expect_shape(clipped[k], g.shape, what=f"`clipped[{k!r}]`")
        expect_float64(clipped[k], f"`clipped[{k!r}]`")
        expect_finite(arr, f"`clipped[{k!r}]`", _ZERO_NORM_HINT)
        unscaled = ([(g, "nothing was scaled although norm > max_norm: check the condition "
                         "(scale when the norm EXCEEDS max_norm)")] if total > max_norm else [])
        mistakes = unscaled + [(np.clip(g, -max_norm, max_norm), "each entry was clipped to [-max_norm, "
                     "max_norm]: that changes the direction. Scale ALL gradients by one factor, "
                     "max_norm / norm"),
                    (g * own, "each array was clipped by its own norm: use one global norm over "
                              "all arrays, so the direction of the whole gradient is kept"),
                    (g * max_norm / total if total > 0 else g,
                     "you scale even when the norm is below max_norm: clip only if norm > max_norm"),
                    (g * total / max_norm, "the factor is upside down: max_norm / norm"),
                    (g * min(total, max_norm), "multiply by max_norm / norm, which makes the norm "
                                               "max_norm; not by the norm itself")]
        diagnose(clipped[k], g * scale, mistakes, _CLIP_HINT, what=f"`clipped[{k!r}]`")


def _clip_case(fn, grads, max_norm, values=True):
    clipped, norm = _clip_result(fn, grads, max_norm)
    if not values:
        _clip_shapes(clipped, norm, grads)
        return
    norms = {k: float(np.sqrt(np.sum(g ** 2))) for k, g in grads.items()}
    total = float(np.sqrt(sum(n ** 2 for n in norms.values())))
    _clip_norm(norm, norms, total, max_norm)
    _clip_arrays(clipped, grads, norms, total, max_norm)


@checker(library=["optim.clip_grad_norm", "optim.global_norm"])
def check_clip_by_global_norm(fn):
    rng = case_rng(114)
    with stage("returns (clipped, norm): a dict like grads and one number"):
        _clip_case(fn, {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}, 1.0,
                   values=False)
    with stage("hand-checkable case: norm 2.5, max_norm 1 (question 33 of the Deep Dive)"):
        # sqrt(1.2^2 + 0.9^2 + 2^2) = 2.5, so every entry is multiplied by 1 / 2.5 = 0.4
        _clip_case(fn, {"a": np.array([1.2, 0.9]), "b": np.array([[2.0]])}, 1.0)
    with stage("random cases, above and below max_norm"):
        for max_norm in (0.5, 2.0, 100.0):
            grads = {"w1": rng.standard_normal((4, 3)), "b1": rng.standard_normal(3),
                     "w2": 3 * rng.standard_normal((3, 2))}
            _clip_case(fn, grads, max_norm)
    with stage("edge cases: all-zero gradients, one huge gradient"):
        _clip_case(fn, {"w": np.zeros((2, 2)), "b": np.zeros(2)}, 1.0)
        _clip_case(fn, {"w": np.array([[1e6, -2e6]]), "b": np.array([1e-3])}, 1.0)


# ----------------------------------------------------------------------------------------
# Exercise 11.6: the training loop
# ----------------------------------------------------------------------------------------

_BETAS, _EPS, _KEYS = (0.9, 0.999), 1e-8, ("loss", "grad_norm", "lr")
_HELPERS = {"adam_step": ("Exercise 11.4", check_adam_step),
            "clip_by_global_norm": ("Exercise 11.5", check_clip_by_global_norm)}


class _Schedule:
    """The schedule the checker passes: a learning rate that differs at every step, so that a
    step counted wrong shows; it records the t it is called with."""

    def __init__(self):
        self.calls = []

    def __call__(self, t):
        self.calls.append(t)
        return 0.02 / (1.0 + 0.25 * t)


class _Backward:
    """backward(model) as the loop receives it: the model's own backward, its calls counted."""

    def __init__(self):
        self.calls = 0

    def __call__(self, model):
        self.calls += 1
        return model.backward()


def _small_model():
    from ..config import presets
    from ..model import Transformer
    return Transformer(presets.deep_dive(d_model=16, n_heads=2, d_ff=32, dtype="float64"), seed=0)


def _problems(n):
    from ..task import splits
    tokens, targets = splits(0)["train"]
    return tokens[:n].copy(), targets[:n].copy()


def _reference_loop(setting, mistake=None):
    """The loop of Exercise 11.6 with the checker's own float64 formulas, or with one of the
    usual mistakes (a key of _LOOP_MISTAKES). -> (final params, history as arrays)."""
    (tokens, targets), epochs, batch_size, max_norm, seed = setting
    model, schedule, (b1, b2), n = _small_model(), _Schedule(), _BETAS, len(tokens)
    hist, t = {k: [] for k in _KEYS}, 0
    rng = np.random.default_rng(0 if mistake == "seed ignored" else seed)
    m = {k: np.zeros_like(p) for k, p in model.params.items()}
    v = {k: np.zeros_like(p) for k, p in model.params.items()}
    summed = {k: np.zeros_like(p) for k, p in model.params.items()}
    for _ in range(epochs):
        if mistake in ("t per epoch", "state per epoch"):
            t = 0
        if mistake in ("moments per epoch", "state per epoch"):
            m, v = ({k: np.zeros_like(p) for k, p in model.params.items()} for _ in range(2))
        if mistake == "rng per epoch":
            rng = np.random.default_rng(seed)
        order = np.arange(n) if mistake == "no shuffle" else rng.permutation(n)
        for lo in range(0, n, batch_size):
            rows, t = order[lo:lo + batch_size], t + 1
            loss = model.loss(tokens[rows], targets[rows])
            grads = model.backward()
            if mistake == "gradients accumulated":      # never zeroed: the sum of all so far
                grads = summed = {k: summed[k] + g for k, g in grads.items()}
            norm = float(np.sqrt(sum(np.sum(g * g) for g in grads.values())))
            scale = max_norm / norm if norm > max_norm and mistake != "no clipping" else 1.0
            lr = schedule(t - 1 if mistake == "schedule(t - 1)" else t)
            for k, p in model.params.items():
                g = grads[k] * scale
                m[k] = b1 * m[k] + (1 - b1) * g
                v[k] = b2 * v[k] + (1 - b2) * g * g
                step = lr * (m[k] / (1 - b1 ** t)) / (np.sqrt(v[k] / (1 - b2 ** t)) + _EPS)
                model.params[k] = p - step
            if mistake in ("loss after update", "loss of all data"):
                loss = (model.loss(tokens[rows], targets[rows]) if mistake == "loss after update"
                        else model.loss(tokens, targets))
            shown = min(norm, max_norm) if mistake == "norm after clipping" else norm
            for key, value in zip(_KEYS, (loss, shown, lr)):
                hist[key].append(float(value))
    return model.params, {k: np.array(h) for k, h in hist.items()}


_LOOP_MISTAKES = {
    "state per epoch": "Adam's state (t, m and v) is made anew every epoch: make it once, before "
                       "the first epoch; it carries over from epoch to epoch",
    "t per epoch": "t starts again at 1 every epoch: t counts the steps of the whole run (Adam's "
                   "bias correction and the schedule need the step number, not the step within "
                   "the epoch)",
    "moments per epoch": "Adam's m and v are made anew every epoch: make them once, before the "
                         "first epoch; they carry over from epoch to epoch",
    "no clipping": "Adam moved along the gradients as backward returned them: clip them with "
                   "clip_by_global_norm(grads, max_norm) and give Adam the clipped ones",
    "norm after clipping": "history['grad_norm'] holds the norm after clipping: record the norm "
                           "before, the one clip_by_global_norm returns",
    "schedule(t - 1)": "the learning rate of step t is schedule(t), with t = 1 at the first step: "
                       "your loop passes t - 1",
    "no shuffle": "every epoch takes the problems in their stored order: take them in the order "
                  "rng.permutation(n)",
    "rng per epoch": "every epoch takes the problems in the same order: make rng once, before the "
                     "first epoch, so that each epoch draws a new permutation",
    "seed ignored": "the order of the problems does not depend on `seed`: make rng with "
                    "np.random.default_rng(seed)",
    "gradients accumulated": "the gradients add up from step to step: each step clips and applies "
                             "the gradients backward(model) returns for its own batch, not their "
                             "sum over the steps so far (there is no zero_grad: keep no sum)",
    "loss after update": "history['loss'] holds the loss after the update: record the batch's loss "
                         "that model.loss returned before backward, the loss the gradients are of",
    "loss of all data": "history['loss'] holds the loss of all the problems: record the loss of "
                        "the batch, the one model.loss returned before backward and the update",
}

_ORDER_HINT = tiered("the first batch already differs: each epoch takes the problems in the "
                     "order rng.permutation(n), of one rng made once from seed, in batches of "
                     "batch_size (the last one shorter)",
                     "rng = np.random.default_rng(seed) before the epochs; order = "
                     "rng.permutation(len(tokens)) at the start of each epoch; rows = "
                     "order[lo:lo + batch_size] for lo in range(0, len(tokens), batch_size)")
_LOSS_ONLY_HINT = ("only history['loss'] differs: the gradient norms, the rates and the "
                   "parameters are right. Record the loss model.loss returned on the batch, before "
                   "backward and the update (not one computed after it, nor on all the problems)")
_STEP_HINTS = {
    "lr": "the learning rate of step t is schedule(t), with t counted from 1 over the whole run",
    "grad_norm": "record the global norm of backward's gradients before clipping (the norm "
                 "clip_by_global_norm returns)",
    "loss": tiered("the first steps agree, a later one does not: check the update of each "
                   "parameter (Adam on the clipped gradients, betas (0.9, 0.999), eps 1e-8, at "
                   "step t with lr schedule(t)), and that t, m and v are kept from step to step",
                   "per step: t += 1; grads, norm = clip_by_global_norm(backward(model), "
                   "max_norm); then for each name: model.params[name], m[name], v[name] = "
                   "adam_step(model.params[name], grads[name], m[name], v[name], t, lr, "
                   "(0.9, 0.999), 1e-8)"),
}


def _loop_helpers_first(fn):
    """The loop runs on the learner's adam_step (Exercise 11.4) and clip_by_global_norm (11.5)
    when it calls them: check those first, quietly, so that a bug there is named there."""
    own = learner_helpers(fn, _HELPERS)
    if not own:
        return
    name = getattr(fn, "__name__", "function")
    with stage(f"first, the functions of Exercises 11.4-11.5 that {name} calls: "
               f"{', '.join(own)}"):
        for helper, f in own.items():
            exercise, check = _HELPERS[helper]
            check_quietly(fn, check, exercise, own, f)


def _history(hist, steps, n, batch_size, epochs, calls=None):
    """The learner's history as {key: float array (steps,)}, or a failure naming what is wrong."""
    if hist is None:
        raise CheckFailed("your function returned None", hint="end with `return history`")
    if not isinstance(hist, dict):
        raise CheckFailed(f"your function returned a {type(hist).__name__}, expected the dict "
                          f"history", hint="history = {'loss': [], 'grad_norm': [], 'lr': []}, "
                                           "one entry appended to each list at every step")
    missing = [k for k in _KEYS if k not in hist]
    if missing:
        raise CheckFailed(f"history has no key {missing[0]!r} (its keys: {sorted(map(str, hist))})",
                          hint="history holds three lists: 'loss', 'grad_norm' (before "
                               "clipping) and 'lr', one entry per step")
    out = {}
    for key in _KEYS:
        values = hist[key]
        try:
            size = len(values)
        except TypeError:               # a number, a 0-d array, a generator
            raise CheckFailed(f"history[{key!r}] is a {type(values).__name__}, expected a list "
                              f"with one entry per step", hint="start each list empty and "
                              "append one entry at every step") from None
        if size != steps:
            raise CheckFailed(f"history[{key!r}] has {size} entries, expected {steps} (one per "
                              f"step: {epochs} epochs of {-(-n // batch_size)} batches)",
                              hint=_length_hint(size, n, batch_size, epochs, calls))
        for i, value in enumerate(values):
            foreign, low = foreign_array(value), low_precision(value)
            if foreign or low is not None:
                raise CheckFailed(f"history[{key!r}][{i}] is a {foreign or low}, expected a "
                                  f"float64 number", hint="append float(loss), float(norm) "
                                  "and float(lr): plain Python numbers, computed in float64")
        out[key] = as_array(list(values), f"history[{key!r}]")
        if out[key].shape != (steps,):
            raise CheckFailed(f"history[{key!r}] should hold one number per step, got entries "
                              f"of shape {out[key].shape[1:]}", hint="append one number per step")
    return out


def _length_hint(size, n, batch_size, epochs, calls=None):
    """Why the history has `size` entries; calls: how many times the loop called backward."""
    per_epoch = -(-n // batch_size)
    if size == calls:       # an entry at every step it took: the steps are counted wrong
        if batch_size != 32 and size == epochs * -(-n // 32):
            return (f"your loop takes batches of 32 whatever batch_size says: use the argument "
                    f"batch_size (here {batch_size}) for the batches and their starts")
        if size == (epochs - 1) * per_epoch:
            return (f"your loop ran {epochs - 1} epochs for epochs = {epochs}: range(1, epochs) "
                    f"runs epochs - 1 times; run the epochs over range(epochs)")
    if size == epochs * (n // batch_size):
        return ("the last, shorter batch is missing: with n problems an epoch has "
                "ceil(n / batch_size) batches, range(0, n, batch_size)")
    if size == epochs:
        return "append once per step (per batch), not once per epoch"
    if size == per_epoch:
        return "one entry per step of every epoch: is history made anew in each epoch?"
    if size == calls:
        return (f"your loop took {size} steps: one per batch of batch_size problems, "
                f"ceil(n / batch_size) in each of the `epochs` epochs")
    return "append one entry to each list at every step, after the update"


def _final_params(model, start):
    """The model's parameters after the loop, as {name: array}, or a failure."""
    params = getattr(model, "params", None)
    if not isinstance(params, dict) or set(params) != set(start):
        raise CheckFailed("model.params no longer holds the model's parameters",
                          hint="assign each parameter back under its name: "
                               "model.params[name] = new_param")
    for k, p0 in start.items():
        expect_shape(params[k], p0.shape, what=f"model.params[{k!r}]")
    if all(np.array_equal(params[k], p0) for k, p0 in start.items()):
        raise CheckFailed("the model's parameters did not change",
                          hint="adam_step returns the new parameter and changes nothing in "
                               "place: assign it back, model.params[name] = new_param")
    return {k: as_array(params[k], f"model.params[{k!r}]") for k in start}


# relative to the largest entry of each array. The right loop agrees with the reference to
# 1e-15; clipping with course_lib's factor max_norm / (norm + 1e-6), which Exercise 11.5's
# checker accepts, moves the parameters by up to 1e-7 of their size, and up to 1e-5 in a loop
# that restarts Adam's moments (coordinates whose gradient is near eps amplify it). Every
# mistake named below changes the loss by 1e-3 or more.
_RTOL = 1e-4
_NAN_HINT = ("is t 0 at the first step? Adam's bias correction divides by 1 - beta1 ** t, which "
             "is 0 at t = 0: count t from 1. Else print the loss and the gradient norm of each "
             "step to see where it breaks")


def _agree(got, want):
    scale = float(np.max(np.abs(want))) if np.size(want) else 0.0
    return np.allclose(got, want, rtol=0.0, atol=_RTOL * scale)


def _same_run(hist, params, want):
    want_params, want_hist = want
    return (all(_agree(hist[k], want_hist[k]) for k in _KEYS)
            and all(_agree(params[k], p) for k, p in want_params.items()))


def _first_difference(hist, params, want):
    """(message, default hint) for the first step, or parameter, where the learner's run differs."""
    want_params, want_hist = want
    only_loss = (all(_agree(hist[k], want_hist[k]) for k in _KEYS[1:])
                 and all(_agree(params[k], p) for k, p in want_params.items()))
    for i in range(len(want_hist["loss"])):
        for key in _KEYS:
            if not _agree(hist[key][i], want_hist[key][i]):
                got_v, want_v = show_digits(hist[key][i], want_hist[key][i])
                hint = (_LOSS_ONLY_HINT if only_loss else _ORDER_HINT if key == "loss" and i == 0
                        else _STEP_HINTS[key])
                return (f"history[{key!r}] differs first at step {i + 1}: got {got_v}, "
                        f"expected {want_v}"), hint
    for k, p in want_params.items():
        if not _agree(params[k], p):
            return (f"the history is right, but after the loop model.params[{k!r}] differs from "
                    f"a reference loop's (largest difference "
                    f"{float(np.max(np.abs(params[k] - p))):.3g})"), _STEP_HINTS["loss"]
    return "", None


def _data_kept(data, original):
    """core.call sees only arrays passed directly: the two inside `data` are compared here."""
    for name, now, before in zip(("tokens", "targets"), data, original):
        if not np.array_equal(now, before):
            raise CheckFailed(f"your loop changed `data` in place: the caller's {name} are no "
                              f"longer as they were",
                              hint="the caller's problems must stay as they were (the next "
                              "epoch, another run and the evaluation read them): "
                              "take each batch by indexing with the permutation, which makes new "
                              "arrays, and never shuffle or assign into tokens and targets")


def _loop_case(fn, n, batch_size, epochs, max_norm, seed, values=True):
    """Run the learner's loop on the small float64 model and compare it with the reference."""
    model, schedule, backward = _small_model(), _Schedule(), _Backward()
    start = {k: p.copy() for k, p in model.params.items()}
    data = _problems(n)
    with np.errstate(all="ignore"):
        hist = call(fn, model, backward, data, epochs, schedule, batch_size=batch_size,
                    max_norm=max_norm, seed=seed)
    _data_kept(data, _problems(n))
    steps = epochs * -(-n // batch_size)
    hist = _history(hist, steps, n, batch_size, epochs, backward.calls)
    if backward.calls != steps:
        raise CheckFailed(f"your loop called backward(model) {backward.calls} times in {steps} "
                          f"steps", hint="take each step's gradients from the `backward` you are "
                          "given, backward(model), once per step: it is how your own backward "
                          "(Exercise 10.3) trains the model below")
    params = _final_params(model, start)
    if not (all(np.all(np.isfinite(h)) for h in hist.values())
            and all(np.all(np.isfinite(p)) for p in params.values())):
        t0 = any(t == 0 for t in schedule.calls if isinstance(t, (int, np.integer)))
        raise CheckFailed("the loss or the parameters became NaN or infinite",
                          hint=_NAN_HINT if not t0 else "t is 0 at the first step: count t from "
                          "1, for Adam (whose bias correction divides by 1 - beta1 ** t, 0 at "
                          "t = 0) and for schedule(t)")
    if not values:
        return
    setting = (_problems(n), epochs, batch_size, max_norm, seed)
    want = _reference_loop(setting)
    if _same_run(hist, params, want):
        return
    message, hint = _first_difference(hist, params, want)
    for mistake, named in _LOOP_MISTAKES.items():
        if _same_run(hist, params, _reference_loop(setting, mistake)):
            raise CheckFailed(message, named)
    raise CheckFailed(message, hint)


def _own_not_library(path, yours):
    return Solution(path, message=f"your loop calls course_lib.{path}",
                    hint=f"the loop trains with your own {yours}: call it instead")


_LOOP_LIBRARY = [Solution("train.fit", what="which trains a model for you"),
                 _own_not_library("optim.Adam.step", "adam_step (Exercise 11.4)"),
                 _own_not_library("optim.adam_update", "adam_step (Exercise 11.4)"),
                 _own_not_library("optim.clip_grad_norm", "clip_by_global_norm (Exercise 11.5)")]


@checker(library=_LOOP_LIBRARY)
def check_train_loop(fn):
    _loop_helpers_first(fn)
    with stage("returns the history ('loss', 'grad_norm', 'lr', one entry per step) and "
               "updates model.params"):
        _loop_case(fn, 12, 4, 1, 1.0, 0, values=False)
    with stage("one epoch of 3 batches, against a reference loop"):
        _loop_case(fn, 12, 4, 1, 1.0, 0)
    with stage("two epochs of 37 problems in batches of 8 (the last one short), seed 5, "
               "max_norm 2 (some steps clipped, some not): what carries over between epochs"):
        _loop_case(fn, 37, 8, 2, 2.0, 5)
        # and a seed at random (the grader's fresh cases draw another: no history learned from
        # this checker passes)
        seed = int(case_rng(1106).integers(6, 10_000))
        try:
            _loop_case(fn, 37, 8, 2, 2.0, seed)
        except CheckFailed as e:
            raise CheckFailed(f"with seed {seed} (instead of 5): {e.message}", e.hint) from None
