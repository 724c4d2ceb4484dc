"""Gradient checking: analytic gradients against float64 central differences.

    df/dx_i ~ (f(x + h e_i) - f(x - h e_i)) / (2h)      error O(h^2) + O(eps_machine / h)

The relative error of a gradient g against a numerical estimate n is
||g - n|| / (||g|| + ||n||). At h = 1e-5 in float64 the two error terms are each
about 1e-11 relative to the gradient's size (notebook 01 derives this), so a right
gradient checks at 1e-10 or below, and anything above 1e-6 is wrong.
A gradient that is zero in exact arithmetic (the key bias: softmax ignores a shift
shared by a whole row of scores) comes out as rounding noise, ~1e-11, in both; below
`zero_tol` both count as zero. A NaN or infinity on either side is the largest error
there is: rel_error returns inf, and the report says which side is not finite.
"""
import math

import numpy as np

TOL = 1e-6  # a right float64 gradient checks at 1e-10 or below; above this it is wrong


class GradcheckError(ValueError):
    """What a backward returned cannot be compared: None, a missing gradient, a wrong shape."""


def rel_error(analytic, numerical, zero_tol=0.0):
    """||a - n|| / (||a|| + ||n||), a scalar in [0, 1]; 0 when ||a|| + ||n|| <= zero_tol.

    inf when either side holds a NaN or an infinity: such a gradient is never right.
    """
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numerical, dtype=np.float64)
    if a.shape != n.shape:
        raise GradcheckError(f"shapes differ: analytic {a.shape} vs numerical {n.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(n))):
        return math.inf
    denom = np.linalg.norm(a) + np.linalg.norm(n)
    return float(np.linalg.norm(a - n) / denom) if denom > max(zero_tol, 1e-300) else 0.0


def magnitude(value, *, below=None, noisy=False):
    """A value at rounding level as the notebooks print it: what it means, not its noise.

    Its power of ten when small ('~1e-11'), two digits when large ('0.31'), '0' for an
    exact zero, 'inf' when not finite. The last bits of a BLAS or of a Numba kernel differ
    from one processor to another, so a rounding-level value moves in its digits and even
    in its power of ten; the notebooks' nbval settings compare every power from 1e-7 down
    as one. Two ways to print a figure that holds on every processor:

    below=b: 'below b' when |value| < b (the claim the text makes), else the value.
    noisy=True: the power of ten even when large, for a value that is rounding noise
        itself (a float32 difference quotient at a tiny step).
    """
    if not math.isfinite(value):
        return "inf"
    if below is not None and abs(value) < below:
        return f"below {below:.0e}".replace("e-0", "e-").replace("e+0", "e+")
    if value == 0:
        return "0"
    if abs(value) >= 1e-4 and not noisy:
        return f"{value:.2g}"
    return f"~1e{round(math.log10(abs(value)))}"


class Report(dict):
    """name -> relative error (a dict), printed one line per name with its magnitude.

    notes: name -> why the error is inf (which side holds NaN or infinity).
    """

    def __init__(self, errors, notes=None, tol=TOL):
        super().__init__(errors)
        self.notes, self.tol = dict(notes or {}), tol

    @property
    def passed(self):
        return all(e < self.tol for e in self.values())

    def __str__(self):
        width = max((len(k) for k in self), default=0)
        lines = []
        for name, e in self.items():
            flag = "" if e < self.tol else "   <- wrong"
            note = f" ({self.notes[name]})" if name in self.notes else ""
            lines.append(f"{name:<{width}}  rel. error {magnitude(e)}{flag}{note}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def _finite_note(analytic, numerical):
    """Why rel_error is inf, in words; None when both sides are finite."""
    sides = [f"the {side} gradient holds {'NaN' if np.isnan(v).any() else 'infinity'}"
             for side, v in (("analytic", analytic), ("numerical", numerical))
             if not np.all(np.isfinite(v))]
    if not sides:
        return None
    if sides[0].startswith("the numerical"):
        sides[0] += " (f itself is not finite near x)"
    return "; ".join(sides)


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


def check_function(f, arrays, analytic, h=1e-5, zero_tol=0.0):
    """Compare analytic gradients of the scalar f() with numerical ones.

    arrays: dict name -> float64 array that f reads (perturbed in place);
    analytic: dict name -> gradient array. Returns a Report: name -> rel_error.
    """
    errors, notes = {}, {}
    for name, x in arrays.items():
        a = np.asarray(analytic[name], dtype=np.float64)
        n = numerical_gradient(f, x, h)
        errors[name] = rel_error(a, n, zero_tol)
        note = _finite_note(a, n)
        if note:
            notes[name] = note
    return Report(errors, notes)


def _gradients_by_name(grads, inputs):
    """What backward returned, as dict name -> float64 array shaped like its input, or a clear error.

    Accepted: a dict keyed by the input names, a tuple or list in the order of the inputs,
    or (for one input) the gradient array itself.
    """
    names = list(inputs)
    if grads is None:
        raise GradcheckError("backward returned None: did you forget `return`? It must return the "
                             f"gradient of each input ({', '.join(names)})")
    if isinstance(grads, dict):
        missing = [k for k in names if k not in grads]
        extra = [k for k in grads if k not in inputs]
        if missing or extra:
            raise GradcheckError(f"backward returned gradients for {sorted(map(str, grads))}, but the inputs "
                                 f"are {names}" + (f": {missing} missing" if missing else "")
                                 + (f"; {extra} are not inputs" if extra else ""))
    elif isinstance(grads, (tuple, list)):
        if len(grads) != len(names):
            raise GradcheckError(f"backward returned {len(grads)} gradients, one per input expected "
                                 f"({len(names)}: {', '.join(names)}, in this order)")
        grads = dict(zip(names, grads))
    elif len(names) == 1:
        grads = {names[0]: grads}
    else:
        raise GradcheckError(f"backward returned one {type(grads).__name__}, but there are {len(names)} "
                             f"inputs: return a tuple ({', '.join('d' + n for n in names)})")
    out = {}
    for name in names:
        g = grads[name]
        if g is None:
            raise GradcheckError(f"the gradient of {name!r} is None: did a branch of backward not return it?")
        try:
            g = np.asarray(g, dtype=np.float64)
        except (TypeError, ValueError):
            raise GradcheckError(f"the gradient of {name!r} is not an array of numbers "
                                 f"({type(grads[name]).__name__})") from None
        if g.shape != np.shape(inputs[name]):
            raise GradcheckError(f"the gradient of {name!r} has shape {g.shape}, but {name!r} has shape "
                                 f"{np.shape(inputs[name])}: a gradient is shaped like what it is the "
                                 f"gradient of")
        out[name] = g
    return out


def check_op(forward, backward, inputs, seed=0, h=1e-5):
    """Check one operation: y = forward(*inputs), backward(dy) -> gradients for each input.

    A random upstream gradient dy makes the scalar L = sum(y * dy); its exact
    gradients are what backward(dy) must return. inputs: dict name -> float64 array.
    backward is called after forward(*inputs.values()) and returns a tuple in the
    order of the inputs (or a dict keyed by their names, or the one gradient).
    Returns a Report: name -> rel_error.
    """
    for name, x in inputs.items():
        _require_float64(x, f"input {name!r}")
    args = list(inputs.values())
    y = forward(*args)
    dy = np.random.default_rng(seed).standard_normal(np.shape(y))
    grads = _gradients_by_name(backward(dy), inputs)

    def f():
        return np.sum(forward(*args) * dy)

    return check_function(f, inputs, grads, h)


def check_model(model, tokens, targets, max_elements=40, seed=0, h=1e-5, zero_tol=1e-8):
    """Whole-model check in float64: a Report, parameter name -> relative error.

    The model is copied to float64; for each parameter at most `max_elements`
    elements (chosen by seed, all of a small tensor) are estimated numerically.
    """
    m64 = model.astype("float64")
    m64.loss(tokens, targets)
    grads = m64.backward()
    rng = np.random.default_rng(seed)
    errors, notes = {}, {}
    for name, p in m64.params.items():
        idx = np.arange(p.size) if p.size <= max_elements else rng.choice(p.size, max_elements, replace=False)
        num = numerical_gradient(lambda: m64.loss(tokens, targets), p, h, idx)
        analytic = grads[name].reshape(-1)[idx]
        errors[name] = rel_error(analytic, num, zero_tol)
        note = _finite_note(analytic, num)
        if note:
            notes[name] = note
    return Report(errors, notes)


class Node:
    """A value in a computational graph, for notebook 09's reverse-mode engine.

    value: the array this node holds; parents: the Nodes it was computed from; vjp: a function
    of this node's gradient that returns a tuple, one gradient per parent (None for an input);
    grad: d loss / d value, filled in by a backward pass (None before).
    """

    def __init__(self, value, parents=(), vjp=None):
        self.value = np.asarray(value, dtype=np.float64)
        self.parents, self.vjp, self.grad = tuple(parents), vjp, None

    def __repr__(self):           # never raises: a graded learner's Node may hold anything
        return f"Node{getattr(getattr(self, 'value', None), 'shape', '(?)')}"
