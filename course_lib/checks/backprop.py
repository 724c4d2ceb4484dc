"""Checkers for notebook 09, backprop I, the chain rule.

    cl.checks.check_two_layer_mlp(mlp_forward, mlp_backward)   # Exercise 9.2
    cl.checks.check_fork_backward(fork_backward)               # Exercise 9.3

(Exercise 9.1 derives the gradients of the two-layer network on paper: no checker.)

The network of Exercise 9.2 (x (N, I), W1 (I, F), b1 (F,), W2 (F, O), b2 (O,)):

    z = x @ W1 + b1,   h = relu(z),   out = h @ W2 + b2
    mlp_forward(x, W1, b1, W2, b2) -> (z, h, out)
    mlp_backward(dout, x, W1, W2, z, h) -> (dx, dW1, db1, dW2, db2)

The fork of Exercise 9.3 (x (N, C), W (C, C)): y = x @ W + relu(x), x used twice.

    fork_backward(dy, x, W) -> (dx, dW)

Expected values come from formulas written here in float64, never from the learner's
function. A wrong result is compared with the usual mistakes (missing ReLU mask, mask of
the wrong array, a transposed weight, a bias gradient not summed over the batch, one path
of the fork kept or overwritten, the two paths chained instead of added) and the hint
names the one it matches.
"""
import numpy as np

from .core import (case_rng, CheckFailed, as_array, call, checker, diagnose, expect_float64, expect_shape,
                   stage)

__all__ = ["check_two_layer_mlp", "check_fork_backward"]

# the seed's network (notebook 09, Exercise 9.1): one example, I = F = 2, O = 1
SEED = {
    "x": np.array([[2.0, 1.0]]),
    "W1": np.array([[0.5, -0.3], [0.2, 0.4]]),
    "b1": np.array([0.1, -0.1]),
    "W2": np.array([[0.6], [0.3]]),
    "b2": np.array([0.2]),
    "target": np.array([[1.5]]),
}


# ----------------------------------------------------------------------------------------
# reference formulas (float64)
# ----------------------------------------------------------------------------------------

def _forward(x, W1, b1, W2, b2):
    z = x @ W1 + b1
    h = np.maximum(z, 0.0)
    return z, h, h @ W2 + b2


def _backward(dout, x, W1, W2, z, h, mask=None):
    """(dx, dW1, db1, dW2, db2); mask replaces (z > 0) to build known mistakes."""
    dW2 = h.T @ dout
    db2 = dout.sum(axis=0)
    dh = dout @ W2.T
    dz = dh * ((z > 0) if mask is None else mask(dh))
    return dz @ W1.T, x.T @ dz, dz.sum(axis=0), dW2, db2


def _tuple(result, names, what):
    """The learner's tuple as a list of arrays (float arrays kept as they are), or a failure."""
    n = len(names)
    if not isinstance(result, (tuple, list)) or isinstance(result, np.ndarray) or len(result) != n:
        got = type(result).__name__
        if isinstance(result, (tuple, list)):
            got += f" of length {len(result)}"
        raise CheckFailed(f"{what} should return {n} arrays ({', '.join(names)}), got {got}",
                          hint=f"end your function with `return {', '.join(names)}`")
    arrays = [as_array(r, name) for r, name in zip(result, names)]
    return [r if isinstance(r, np.ndarray) and r.dtype.kind == "f" else a
            for r, a in zip(result, arrays)]


def _float64_results(arrays, names, inputs):
    """For float64 inputs every result must be float64 (a float32 one's error, ~1e-8 relative, is
    too small for the value comparison to see)."""
    if all(getattr(a, "dtype", None) == np.float64 for a in inputs):
        for arr, name in zip(arrays, names):
            expect_float64(arr, name)


def _run(fn, *args, matmul_hint=None):
    """call() with a transpose hint for matrix products of mismatched shapes."""
    try:
        with np.errstate(all="ignore"):
            return call(fn, *args)
    except CheckFailed as e:
        if matmul_hint and ("matmul" in e.message or "not aligned" in e.message
                            or "broadcast" in e.message) and "one dtype" not in e.message:
            raise CheckFailed(e.message, matmul_hint) from None
        raise


# ----------------------------------------------------------------------------------------
# Exercise 9.2: the two-layer ReLU network, forward and backward
# ----------------------------------------------------------------------------------------

_FWD_NAMES = ["z", "h", "out"]
_BWD_NAMES = ["dx", "dW1", "db1", "dW2", "db2"]
_FWD_HINT = ("go through the forward pass of Exercise 9.1 one value at a time: z before "
             "the ReLU, h after it, out from h; which of z, h, out is the first to differ?")
_BWD_HINT = {
    "dW2": "dW2 needs the input of the second layer and dout, every row of the batch adding "
           "its share; compare with your dW2 of Exercise 9.1",
    "db2": "db2 comes from dout alone, one value per output, collected over the batch; compare "
           "with your db2 of Exercise 9.1",
    "after": "{name} comes after the ReLU: compare with your dz from Exercise 9.1 first, then "
             "take the step from dz to {name} as you did on paper; on a batch, every row "
             "adds its share to a weight or bias gradient",
}
_MASK = "the ReLU mask"


def _forward_mistakes(x, W1, b1, W2, b2):
    z = x @ W1 + b1
    return {
        "h": [(lambda: z, "h = relu(z): set the negative entries of z to 0, np.maximum(z, 0)"),
              (lambda: np.maximum(x @ W1, 0), "add the bias b1 before the ReLU: h = relu(x @ W1 + b1)"),
              (lambda: np.abs(z), "relu(z) is np.maximum(z, 0), not np.abs(z): negative entries become 0")],
        "z": [(lambda: x @ W1, "z = x @ W1 + b1: the bias b1 is missing"),
              (lambda: np.maximum(z, 0), "z is the pre-activation x @ W1 + b1, before the ReLU; h is after")],
        "out": [(lambda: z @ W2 + b2, "out = h @ W2 + b2 uses h = relu(z), not z: the ReLU is missing"),
                (lambda: np.maximum(z, 0) @ W2, "out = h @ W2 + b2: the bias b2 is missing"),
                (lambda: np.maximum(z @ W2 + b2, 0), "the ReLU belongs to the hidden layer only: "
                                             "out = h @ W2 + b2 has no ReLU")],
    }


def _run_forward(fwd, x, W1, b1, W2, b2):
    """The learner's (z, h, out), their shapes checked, and the reference values."""
    N, F, O = x.shape[0], W1.shape[1], W2.shape[1]
    hint = (f"here x is {x.shape}, W1 {W1.shape}, W2 {W2.shape}: z and h are ({N}, {F}), "
            f"out is ({N}, {O}); no transposes in the forward pass")
    got = _tuple(_run(fwd, x, W1, b1, W2, b2, matmul_hint=hint), _FWD_NAMES,
                 "mlp_forward(x, W1, b1, W2, b2)")
    want = _forward(x, W1, b1, W2, b2)
    for name, g, w in zip(_FWD_NAMES, got, want):
        expect_shape(g, w.shape, what=name, hint=hint)
    return got, want


def _check_forward_case(fwd, x, W1, b1, W2, b2, rtol=1e-6, atol=1e-9):
    got, want = _run_forward(fwd, x, W1, b1, W2, b2)
    _float64_results(got, _FWD_NAMES, (x, W1, b1, W2, b2))
    mistakes = _forward_mistakes(x, W1, b1, W2, b2)
    for name, g, w in zip(_FWD_NAMES, got, want):
        diagnose(g, w, mistakes[name], _FWD_HINT, what=name, rtol=rtol, atol=atol)


def _backward_mistakes(dout, x, W1, W2, z, h):
    """name -> list of (callable giving a wrong array, hint); a mistake that cannot be formed
    for these shapes (a transpose of a non-square matrix) is skipped by diagnose."""
    def bwd(mask):
        return lambda: _backward(dout, x, W1, W2, z, h, mask=mask)
    wrong_mask = [
        (bwd(lambda d: 1.0), f"{_MASK} is missing: dz = dh * (z > 0), since relu passes the "
                             f"gradient only where z > 0"),
        (bwd(lambda d: d > 0), f"{_MASK} is taken on the wrong array: it comes from the forward "
                               f"pass, (z > 0) (or h > 0), not from the gradient dh; relu(dh) is "
                               f"not relu's backward"),
        (bwd(lambda d: h), f"multiply dh by {_MASK} (z > 0), a 0/1 array, not by h itself: "
                           f"relu's derivative is 1 where z > 0, not z"),
    ]
    dh = dout @ W2.T
    dz = dh * (z > 0)
    def dh_t():                                    # W2 not transposed (square W2 only)
        return (dout @ W2) * (z > 0)
    # the mask mistakes change every gradient that comes after the ReLU (dx, dW1, db1)
    m = {name: [] for name in _BWD_NAMES}
    for j, name in enumerate(("dx", "dW1", "db1")):
        m[name] += [((lambda f=f, j=j: f()[j]), hint) for f, hint in wrong_mask]
    m["dW2"] += [(lambda: dout.T @ h, "dW2 = h.T @ dout (shape (F, O)); you have its transpose"),
                 (lambda: z.T @ dout, "dW2 = h.T @ dout uses h = relu(z), the input of the "
                                      "second layer, not z")]
    m["db2"] += [(lambda: dout.mean(axis=0), "db2 is the SUM of dout over the batch axis (every "
                                             "example adds its gradient), not the mean"),
                 (lambda: dout[0], "db2 sums dout over ALL rows of the batch, not only the first")]
    m["dW1"] += [(lambda: dz.T @ x, "dW1 = x.T @ dz (shape (I, F)); you have its transpose"),
                 (lambda: x.T @ dh_t(), "dh = dout @ W2.T: W2 is transposed in the backward pass")]
    m["db1"] += [(lambda: dz.mean(axis=0), "db1 is the SUM of dz over the batch axis, not the mean"),
                 (lambda: dz[0], "db1 sums dz over ALL rows of the batch, not only the first"),
                 (lambda: dh.sum(axis=0), f"db1 sums dz = dh * (z > 0), after {_MASK}, not dh")]
    m["dx"] += [(lambda: dz @ W1, "dx = dz @ W1.T: the weight is transposed in the backward pass "
                                  "(W1 maps I to F, the gradient goes back from F to I)"),
                (lambda: dh_t() @ W1.T, "dh = dout @ W2.T: W2 is transposed in the backward pass")]
    return m


def _run_backward(bwd, dout, x, W1, b1, W2, b2):
    """The learner's five gradients, their shapes checked, and z, h of the forward pass."""
    z, h, _ = _forward(x, W1, b1, W2, b2)
    N, I, F, O = x.shape[0], x.shape[1], W1.shape[1], W2.shape[1]
    hint = (f"here dout is ({N}, {O}), x ({N}, {I}), W1 ({I}, {F}), W2 ({F}, {O}), so dh and "
            f"dz are ({N}, {F}); a product (a, b) @ (b, c) is (a, c), and .T swaps two axes")
    got = _tuple(_run(bwd, dout, x, W1, W2, z, h, matmul_hint=hint), _BWD_NAMES,
                 "mlp_backward(dout, x, W1, W2, z, h)")
    shapes = {"dx": x.shape, "dW1": W1.shape, "db1": b1.shape, "dW2": W2.shape, "db2": b2.shape}
    for name, g in zip(_BWD_NAMES, got):
        arr = as_array(g, name)
        if name.startswith("db") and arr.shape == (N, shapes[name][0]) and N > 1:
            raise CheckFailed(f"{name} has shape {arr.shape}, expected {shapes[name]}",
                              hint=f"a bias is added to every row of the batch, so its gradient "
                                   f"sums over the batch axis: {name} = np.sum(..., axis=0)")
        expect_shape(g, shapes[name], what=name,
                     hint=f"{hint}; every gradient has the shape of its array, in the order "
                          f"dx, dW1, db1, dW2, db2")
    return got, z, h


def _check_backward_case(bwd, dout, x, W1, b1, W2, b2, rtol=1e-6, atol=1e-9):
    got, z, h = _run_backward(bwd, dout, x, W1, b1, W2, b2)
    want = _backward(dout, x, W1, W2, z, h)
    _float64_results(got, _BWD_NAMES, (dout, x, W1, W2))
    mistakes = _backward_mistakes(dout, x, W1, W2, z, h)
    # the second layer first: its gradients do not depend on the ReLU backward
    for name in ("db2", "dW2", "dx", "dW1", "db1"):
        k = _BWD_NAMES.index(name)
        default = _BWD_HINT.get(name, _BWD_HINT["after"]).format(name=name)
        diagnose(got[k], want[k], mistakes[name], default, what=name, rtol=rtol, atol=atol)


def _random_net(rng, N, I, F, O, dtype=np.float64):
    arrays = (rng.standard_normal((N, I)), rng.standard_normal((I, F)), rng.standard_normal(F),
              rng.standard_normal((F, O)), rng.standard_normal(O), rng.standard_normal((N, O)))
    return [a.astype(dtype) for a in arrays]


@checker("Exercise 9.2", "two-layer ReLU network, forward and backward")
def check_two_layer_mlp(mlp_forward, mlp_backward):
    if not callable(mlp_backward):
        raise CheckFailed("pass both functions: check_two_layer_mlp(mlp_forward, mlp_backward)")
    rng = case_rng(92)
    s = SEED
    seed_net = (s["x"], s["W1"], s["b1"], s["W2"], s["b2"])
    x, W1, b1, W2, b2, dout = _random_net(rng, 5, 3, 4, 2)
    with stage("forward: shapes (N = 5, I = 3, F = 4, O = 2)"):
        _run_forward(mlp_forward, x, W1, b1, W2, b2)               # shapes only
    with stage("backward: shapes (N = 5, I = 3, F = 4, O = 2)"):
        _run_backward(mlp_backward, dout, x, W1, b1, W2, b2)       # shapes only
    with stage("forward: the numbers of Exercise 9.1"):
        # z = [1.3, -0.3], h = [1.3, 0], out = 0.98: compare the report with your paper
        _check_forward_case(mlp_forward, *seed_net)
    with stage("backward: the numbers of Exercise 9.1"):
        # dout = out - target = -0.52 for the loss 0.5 (out - target)^2
        dout = _forward(*seed_net)[2] - s["target"]
        _check_backward_case(mlp_backward, dout, *seed_net)
    with stage("random batches, forward and backward"):
        for N, I, F, O in ((5, 3, 4, 2), (6, 4, 4, 4), (8, 3, 7, 2), (1, 5, 6, 3)):
            x, W1, b1, W2, b2, dout = _random_net(rng, N, I, F, O)
            _check_forward_case(mlp_forward, x, W1, b1, W2, b2)
            _check_backward_case(mlp_backward, dout, x, W1, b1, W2, b2)
    with stage("backward: a whole hidden unit dead, float32"):
        x, W1, b1, W2, b2, dout = _random_net(rng, 4, 3, 5, 2)
        b1[2] = -100.0                      # unit 2 is negative for every example
        _check_backward_case(mlp_backward, dout, x, W1, b1, W2, b2)
        x, W1, b1, W2, b2, dout = _random_net(rng, 4, 3, 5, 2, np.float32)
        _check_backward_case(mlp_backward, dout, x, W1, b1, W2, b2, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------
# Exercise 9.3: a fork, y = x @ W + relu(x)
# ----------------------------------------------------------------------------------------

def fork_forward(x, W):
    """y = x @ W + relu(x): x (N, C) is used twice, W (C, C)."""
    return x @ W + np.maximum(x, 0.0)


def _fork_backward(dy, x, W):
    return dy @ W.T + dy * (x > 0), x.T @ dy


_TWO_USES = "x is used twice: each use sends back a gradient, and the two meet at x. "
_IN_SEQUENCE = ("the two uses of x are side by side, not in sequence: add the paths, "
                "don't multiply (the ReLU path does not come after x @ W)")
_DW_HINT = ("W appears only in the path x @ W: its gradient is that of a linear layer without "
            "bias (notebook 06), with the shape of W")


def _fork_mistakes(dy, x, W):
    mask = x > 0
    dx = [
        (dy @ W.T, _TWO_USES + "Yours is the path through x @ W alone: the ReLU path is missing "
                               "(or a second `dx = ...` line overwrote the first; use `+`)"),
        (dy * mask, _TWO_USES + "Yours is the ReLU path alone: the path through x @ W is missing "
                                "(or a second `dx = ...` line overwrote the first; use `+`)"),
        ((dy @ W.T) * mask, _IN_SEQUENCE),
        ((dy * mask) @ W.T, _IN_SEQUENCE),
        (dy @ W + dy * mask, "the path through x @ W gives dy @ W.T: W is transposed in the "
                             "backward pass"),
        (dy @ W.T + dy, "the ReLU path passes the gradient only where x > 0: "
                        "dy * (x > 0), not dy"),
        (dy @ W.T + dy * np.maximum(x, 0), "the ReLU path multiplies dy by the mask (x > 0), "
                                           "a 0/1 array, not by relu(x)"),
        (dy @ W.T + np.maximum(dy, 0), "the ReLU mask comes from the forward input x, "
                                       "(x > 0), not from the gradient: relu(dy) is not "
                                       "relu's backward"),
        (2 * dy @ W.T, _TWO_USES + "Yours doubles the path through x @ W"),
        (2 * dy * mask, _TWO_USES + "Yours doubles the ReLU path"),
    ]
    dW = [(dy.T @ x, "dW = x.T @ dy; you have its transpose"),
          (dy.T @ x + x.T @ dy, "dW = x.T @ dy: W appears only in x @ W, the ReLU path has no W"),
          (np.maximum(x, 0).T @ dy, "dW = x.T @ dy uses x itself, not relu(x)")]
    return dx, dW


def _check_fork_case(fn, dy, x, W, rtol=1e-6, atol=1e-9):
    N, C = x.shape
    got = _tuple(_run(fn, dy, x, W), ["dx", "dW"], "fork_backward(dy, x, W)")
    dx_want, dW_want = _fork_backward(dy, x, W)
    expect_shape(got[0], (N, C), what="dx", hint="dx has the shape of x; return (dx, dW)")
    expect_shape(got[1], (C, C), what="dW", hint="dW has the shape of W; return (dx, dW)")
    _float64_results(got, ["dx", "dW"], (dy, x, W))
    dx_m, dW_m = _fork_mistakes(dy, x, W)
    diagnose(got[0], dx_want, dx_m, _TWO_USES.strip(), what="dx", rtol=rtol, atol=atol)
    diagnose(got[1], dW_want, dW_m, _DW_HINT, what="dW", rtol=rtol, atol=atol)


@checker("Exercise 9.3", "a fork that accumulates")
def check_fork_backward(fork_backward):
    rng = case_rng(93)
    with stage("shapes"):
        x, W, dy = rng.standard_normal((5, 3)), rng.standard_normal((3, 3)), rng.standard_normal((5, 3))
        got = _tuple(_run(fork_backward, dy, x, W), ["dx", "dW"], "fork_backward(dy, x, W)")
        expect_shape(got[0], (5, 3), what="dx", hint="dx has the shape of x; return (dx, dW)")
        expect_shape(got[1], (3, 3), what="dW", hint="dW has the shape of W; return (dx, dW)")
    with stage("hand-checkable case: W = [[1, 2], [0, -1]]"):
        # dy @ W.T = [[3, -1], [0, 1]], dy * (x > 0) = [[1, 0], [0, -1]]: dx = [[4, -1], [0, 0]]
        # ((dy @ W.T) * (x > 0), the paths chained, is [[3, 0], [0, 1]]);
        # dW = [[0, 1.5], [4, -5]]
        x, W = np.array([[1.0, -2.0], [-0.5, 3.0]]), np.array([[1.0, 2.0], [0.0, -1.0]])
        _check_fork_case(fork_backward, np.array([[1.0, 1.0], [2.0, -1.0]]), x, W)
    with stage("random cases"):
        for N, C in ((4, 4), (7, 3), (1, 6)):
            _check_fork_case(fork_backward, rng.standard_normal((N, C)), rng.standard_normal((N, C)),
                             rng.standard_normal((C, C)))
    with stage("edge cases: all x negative, all x positive, float32"):
        x, W, dy = -np.abs(rng.standard_normal((3, 4))) - 0.1, rng.standard_normal((4, 4)), \
            rng.standard_normal((3, 4))
        _check_fork_case(fork_backward, dy, x, W)
        _check_fork_case(fork_backward, dy, -x, W)
        x32, W32, dy32 = (rng.standard_normal(s).astype(np.float32) for s in ((4, 4), (4, 4), (4, 4)))
        _check_fork_case(fork_backward, dy32, x32, W32, rtol=1e-4, atol=1e-5)
