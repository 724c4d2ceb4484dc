"""Gradient checking: analytic gradients against float64 central differences.

    df/dx_i ~ (f(x + h e_i) - f(x - h e_i)) / (2h)      error O(h^2) + O(eps_machine / h)

The relative error of a gradient g against a numerical estimate n is
||g - n|| / (||g|| + ||n||): below 1e-6 in float64 means the gradient is right.
A gradient that is zero in exact arithmetic (the key bias: softmax ignores a shift
shared by a whole row of scores) comes out as rounding noise, ~1e-11, in both; below
`zero_tol` both count as zero.
"""
import numpy as np

def rel_error(analytic, numerical, zero_tol=0.0):
    """||a - n|| / (||a|| + ||n||), a scalar in [0, 1]; 0 when ||a|| + ||n|| <= zero_tol."""
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numerical, dtype=np.float64)
    if a.shape != n.shape:
        raise ValueError(f"shapes differ: analytic {a.shape} vs numerical {n.shape}")
    denom = np.linalg.norm(a) + np.linalg.norm(n)
    return float(np.linalg.norm(a - n) / denom) if denom > max(zero_tol, 1e-300) else 0.0


def elementwise_rel_error(analytic, numerical, floor=1e-8):
    """|a - n| / max(|a| + |n|, floor) per element, for heatmaps of where a gradient is wrong."""
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numerical, dtype=np.float64)
    return np.abs(a - n) / np.maximum(np.abs(a) + np.abs(n), floor)


def _require_float64(x, what):
    if not (isinstance(x, np.ndarray) and x.dtype == np.float64):
        raise TypeError(f"{what} must be a float64 NumPy array (gradient checks need float64), "
                        f"got {getattr(x, 'dtype', type(x).__name__)}")


def numerical_gradient(f, x, h=1e-5, indices=None):
    """Central-difference gradient of the scalar f() with respect to array x (changed in place, restored).

    indices: flat indices to estimate (default all). Returns an array shaped like x
    (NaN where not estimated) when indices is None, else a 1-D array of estimates.
    """
    _require_float64(x, "x")
    flat = x.reshape(-1)
    if not np.shares_memory(flat, x):
        raise ValueError("x must be contiguous so that it can be perturbed in place")
    idx = range(flat.size) if indices is None else indices
    out = np.empty(len(idx))
    for j, i in enumerate(idx):
        old = flat[i]
        flat[i] = old + h
        f_plus = float(f())
        flat[i] = old - h
        f_minus = float(f())
        flat[i] = old
        out[j] = (f_plus - f_minus) / (2 * h)
    return out.reshape(x.shape) if indices is None else out


def check_function(f, arrays, analytic, h=1e-5):
    """Compare analytic gradients of the scalar f() with numerical ones.

    arrays: dict name -> float64 array that f reads (perturbed in place);
    analytic: dict name -> gradient array. Returns dict name -> rel_error.
    """
    return {name: rel_error(analytic[name], numerical_gradient(f, x, h)) for name, x in arrays.items()}


def check_op(forward, backward, inputs, seed=0, h=1e-5):
    """Check one operation: y = forward(*inputs), backward(dy) -> gradients for each input.

    A random upstream gradient dy makes the scalar L = sum(y * dy); its exact
    gradients are what backward(dy) must return. inputs: dict name -> float64 array.
    backward is called after forward(*inputs.values()) and returns a dict (or tuple in
    the order of inputs). Returns dict name -> rel_error.
    """
    for name, x in inputs.items():
        _require_float64(x, f"input {name!r}")
    args = list(inputs.values())
    y = forward(*args)
    dy = np.random.default_rng(seed).standard_normal(np.shape(y))
    grads = backward(dy)
    if not isinstance(grads, dict):
        grads = dict(zip(inputs, grads))

    def f():
        return np.sum(forward(*args) * dy)

    return check_function(f, inputs, grads, h)


def check_model(model, tokens, targets, max_elements=40, seed=0, h=1e-5, zero_tol=1e-8):
    """Whole-model check in float64: dict parameter name -> relative error.

    The model is copied to float64; for each parameter at most `max_elements`
    elements (chosen by seed, all of a small tensor) are estimated numerically.
    """
    m64 = model.astype("float64")
    m64.loss(tokens, targets)
    grads = m64.backward()
    rng = np.random.default_rng(seed)
    report = {}
    for name, p in m64.params.items():
        idx = np.arange(p.size) if p.size <= max_elements else rng.choice(p.size, max_elements, replace=False)
        num = numerical_gradient(lambda: m64.loss(tokens, targets), p, h, idx)
        report[name] = rel_error(grads[name].reshape(-1)[idx], num, zero_tol)
    return report
