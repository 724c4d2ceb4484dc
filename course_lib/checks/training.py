"""Checkers for notebook 11, training.

    cl.checks.check_sgd_momentum_step(sgd_momentum_step)   # Exercise 11.2: (new_param, new_velocity)
    cl.checks.check_adam_step(adam_step)                   # Exercise 11.4: (new_param, m, v)
    cl.checks.check_clip_by_global_norm(clip_by_global_norm)  # Exercise 11.5: (clipped dict, norm)

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
  1e-6 to the norm, a difference far below the tolerance) and returns the norm before clipping.

Expected values come from float64 formulas written here, never from the learner's function;
a wrong result is compared with the usual mistakes, and the hint names the one it matches.
"""
import numpy as np

from .core import (CheckFailed, as_array, call, checker, diagnose, expect_finite, expect_shape,
                   low_precision, stage)

__all__ = ["check_sgd_momentum_step", "check_adam_step", "check_clip_by_global_norm"]


def _call_quiet(fn, *args):
    """call() with NumPy's warnings off (a division by zero is the checker's to explain)."""
    with np.errstate(all="ignore"):
        return call(fn, *args)


def _expect_float64(value, what):
    """A float32 (or float16) result for float64 inputs is named as a dtype problem, even when it
    is within the tolerance: it keeps only about 7 digits of a parameter that moves by 1e-3."""
    dtype = low_precision(value)
    if dtype is not None:
        raise CheckFailed(f"{what} is {dtype}, but the inputs are float64",
                          hint=f"a dtype problem, not a formula problem: no .astype(np.{dtype}) and "
                               f"no np.zeros(..., dtype=np.{dtype}); compute in the inputs' dtype")


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
        _expect_float64(r, what)
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
    got = _unpack(_call_quiet(fn, p, g, vel, lr, mu), ("new_param", "new_velocity"),
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


@checker("Exercise 11.2", "SGD with momentum", library=["optim.sgd_update"])
def check_sgd_momentum_step(fn):
    rng = np.random.default_rng(11)
    with stage("returns (new_param, new_velocity), shaped like param"):
        p, g, vel = (rng.standard_normal((3, 4)) for _ in range(3))
        _unpack(_call_quiet(fn, p, g, vel, 0.1, 0.9), ("new_param", "new_velocity"),
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

def _adam_parts(p, g, m, v, t, lr, b1, b2, eps):
    m1 = b1 * m + (1 - b1) * g
    v1 = b2 * v + (1 - b2) * g * g
    return m1, v1


def _adam_ref(p, g, m, v, t, lr, b1, b2, eps):
    m1, v1 = _adam_parts(p, g, m, v, t, lr, b1, b2, eps)
    m_hat, v_hat = m1 / (1 - b1 ** t), v1 / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m1, v1


_T_ZERO_HINT = ("at t = 1 your bias correction divides by zero: 1 - beta ** 0 = 0. The first step "
                "is t = 1; use the t you are given, as it is (1 - beta1 ** t)")


def _adam_param_mistakes(p, g, m, v, t, lr, b1, b2, eps):
    """The usual wrong Adam steps, each as (a thunk computing it, the hint that names it)."""
    m1, v1 = _adam_parts(p, g, m, v, t, lr, b1, b2, eps)

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
         "beta2 ** t) for eps (about 32 times larger at t = 1 with beta2 = 0.999). The course, like PyTorch, adds eps to "
         "sqrt(v_hat): param - lr * m_hat / (sqrt(v_hat) + eps)"),
        (lambda: p - lr * mh / (vh + eps), "the square root of v_hat is missing in the "
                                          "denominator"),
        (lambda: p + lr * mh / (np.sqrt(vh) + eps), "the step goes uphill: subtract it"),
        (lambda: _adam_ref(p, g, m, v, t, lr, b2, b1, eps)[0],
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
        result = _call_quiet(fn, p, g, m, v, t, lr, betas, eps)
    except CheckFailed as e:
        if "ZeroDivisionError" in e.message:
            raise CheckFailed(e.message, _T_ZERO_HINT) from None
        raise
    got = _unpack(result, ("new_param", "m", "v"), (p.shape,) * 3)
    want_p, want_m, want_v = _adam_ref(p, g, m, v, t, lr, b1, b2, eps)
    _adam_moments(got[1], got[2], g, m, v, t, b1, b2, want_m, want_v)   # the state first
    _adam_new_param(got[0], p, want_p, _adam_param_mistakes(p, g, m, v, t, lr, b1, b2, eps), t)


@checker("Exercise 11.4", "Adam step with bias correction",
         library=["optim.adam_update", "optim.adam_update_all"])
def check_adam_step(fn):
    rng = np.random.default_rng(113)
    betas = (0.9, 0.999)
    with stage("returns (new_param, m, v), each shaped like param"):
        p, g = rng.standard_normal((2, 3, 4))
        z = np.zeros((3, 4))
        _unpack(_call_quiet(fn, p, g, z, z, 3, 1e-3, betas, 1e-8), ("new_param", "m", "v"),
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
        result = _call_quiet(fn, grads, max_norm)
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
                          f"{_short(result)}, expected a pair (clipped, norm)",
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
        _expect_float64(clipped[k], f"`clipped[{k!r}]`")
    _expect_float64(norm, "`norm`")
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
    _expect_float64(norm, "`norm`")
    diagnose(norm_arr, total, norm_mistakes, "re-read the definition of the global norm above "
             "Exercise 11.5: one number for all arrays together", what="`norm`")


def _clip_arrays(clipped, grads, norms, total, max_norm):
    """Compare each clipped array with the usual mistakes (per entry, per array, always)."""
    scale = max_norm / total if total > max_norm else 1.0
    for k, g in grads.items():
        own = max_norm / norms[k] if norms[k] > max_norm else 1.0
        arr = expect_shape(clipped[k], g.shape, what=f"`clipped[{k!r}]`")
        _expect_float64(clipped[k], f"`clipped[{k!r}]`")
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


def _short(value, width=50):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


@checker("Exercise 11.5", "clipping by the global norm",
         library=["optim.clip_grad_norm", "optim.global_norm"])
def check_clip_by_global_norm(fn):
    rng = np.random.default_rng(114)
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
