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

from ..gradcheck import Node
from .cases import Output, Spec, call_hinted, check_case, product_errors
from .core import (case_rng, CheckFailed, as_array, checker, diagnose, expect_arrays, expect_float64,
                   expect_shape, short_repr, stage, tiered)
from .library import part as library_part

__all__ = ["check_two_layer_mlp", "check_fork_backward", "check_graph_ops", "check_reverse_mode"]

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


def _float64_results(arrays, names, inputs):
    """For float64 inputs every result must be float64 (a float32 one's error, ~1e-8 relative, is
    too small for the value comparison to see)."""
    if all(getattr(a, "dtype", None) == np.float64 for a in inputs):
        for arr, name in zip(arrays, names):
            expect_float64(arr, name)


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
_BWD_FORMULA = {"dW2": "dW2 = h.T @ dout", "db2": "db2 = dout.sum(axis=0)",
                "dx": "dz = (dout @ W2.T) * (z > 0), then dx = dz @ W1.T",
                "dW1": "dz = (dout @ W2.T) * (z > 0), then dW1 = x.T @ dz",
                "db1": "dz = (dout @ W2.T) * (z > 0), then db1 = dz.sum(axis=0)"}
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
    got = expect_arrays(call_hinted(fwd, (x, W1, b1, W2, b2), product_errors(hint)), _FWD_NAMES,
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
    # a sign lost on the way: dout = target - out, or a minus in one step
    for j, name in enumerate(_BWD_NAMES):
        m[name].append((lambda j=j: -np.asarray(_backward(dout, x, W1, W2, z, h)[j]),
                        f"{name} has the right size and the wrong sign: the chain rule multiplies, "
                        f"it never subtracts (and dout = out - target, not target - out)"))
    return m


def _run_backward(bwd, dout, x, W1, b1, W2, b2):
    """The learner's five gradients, their shapes checked, and z, h of the forward pass."""
    z, h, _ = _forward(x, W1, b1, W2, b2)
    N, I, F, O = x.shape[0], x.shape[1], W1.shape[1], W2.shape[1]
    hint = (f"here dout is ({N}, {O}), x ({N}, {I}), W1 ({I}, {F}), W2 ({F}, {O}), so dh and "
            f"dz are ({N}, {F}); a product (a, b) @ (b, c) is (a, c), and .T swaps two axes")
    got = expect_arrays(call_hinted(bwd, (dout, x, W1, W2, z, h), product_errors(hint)), _BWD_NAMES,
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
        default = tiered(_BWD_HINT.get(name, _BWD_HINT["after"]).format(name=name), _BWD_FORMULA[name])
        diagnose(got[k], want[k], mistakes[name], default, what=name, rtol=rtol, atol=atol)


def _random_net(rng, N, I, F, O, dtype=np.float64):
    arrays = (rng.standard_normal((N, I)), rng.standard_normal((I, F)), rng.standard_normal(F),
              rng.standard_normal((F, O)), rng.standard_normal(O), rng.standard_normal((N, O)))
    return [a.astype(dtype) for a in arrays]


# course_lib's kernels compute this network (notebook 06): 9.2 and 9.3 write it from the formulas
_KERNELS = [library_part(f"kernels.{name}")
            for name in ("linear_forward", "relu_forward", "linear_backward", "relu_backward")]


@checker(library=_KERNELS)
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
        ((dy @ W.T) * (dy * mask), _TWO_USES + "Yours multiplies the two paths' gradients: they add "
                                               "(the fork rule), dx = path 1 + path 2"),
        (dy @ W + dy * mask, "the path through x @ W gives dy @ W.T: W is transposed in the "
                             "backward pass"),
        (dy @ W.T + dy, "the ReLU path passes the gradient only where x > 0: "
                        "dy * (x > 0), not dy"),
        (dy @ W.T + dy * np.maximum(x, 0), "the ReLU path multiplies dy by the mask (x > 0), "
                                           "a 0/1 array, not by relu(x)"),
        (dy @ W.T + np.maximum(dy, 0), "the ReLU mask comes from the forward input x, "
                                       "(x > 0), not from the gradient: relu(dy) is not "
                                       "relu's backward"),
        (dy @ W.T - dy * mask, _TWO_USES + "The two paths add (the fork rule); yours subtracts "
                                           "the ReLU path"),
        (-(dy @ W.T + dy * mask), "dx has the right size and the wrong sign: the chain rule "
                                  "multiplies dy by each path's local gradient, no minus"),
        (2 * dy @ W.T, _TWO_USES + "Yours doubles the path through x @ W"),
        (2 * dy * mask, _TWO_USES + "Yours doubles the ReLU path"),
    ]
    dW = [(dy.T @ x, "dW = x.T @ dy; you have its transpose"),
          (dy.T @ x + x.T @ dy, "dW = x.T @ dy: W appears only in x @ W, the ReLU path has no W"),
          (np.maximum(x, 0).T @ dy, "dW = x.T @ dy uses x itself, not relu(x)")]
    return dx, dW


def _check_fork_case(fn, dy, x, W, rtol=1e-6, atol=1e-9):
    N, C = x.shape
    got = expect_arrays(call_hinted(fn, (dy, x, W)), ["dx", "dW"], "fork_backward(dy, x, W)")
    dx_want, dW_want = _fork_backward(dy, x, W)
    expect_shape(got[0], (N, C), what="dx", hint="dx has the shape of x; return (dx, dW)")
    expect_shape(got[1], (C, C), what="dW", hint="dW has the shape of W; return (dx, dW)")
    _float64_results(got, ["dx", "dW"], (dy, x, W))
    dx_m, dW_m = _fork_mistakes(dy, x, W)
    diagnose(got[0], dx_want, dx_m, tiered(_TWO_USES.strip(), "dx = dy @ W.T + dy * (x > 0)"),
             what="dx", rtol=rtol, atol=atol)
    diagnose(got[1], dW_want, dW_m, tiered(_DW_HINT, "dW = x.T @ dy"), what="dW", rtol=rtol, atol=atol)


@checker(library=_KERNELS[2:])
def check_fork_backward(fork_backward):
    rng = case_rng(93)
    with stage("shapes"):
        x, W, dy = rng.standard_normal((5, 3)), rng.standard_normal((3, 3)), rng.standard_normal((5, 3))
        got = expect_arrays(call_hinted(fork_backward, (dy, x, W)), ["dx", "dW"], "fork_backward(dy, x, W)")
        expect_shape(got[0], (5, 3), what="dx", hint="dx has the shape of x; return (dx, dW)")
        expect_shape(got[1], (3, 3), what="dW", hint="dW has the shape of W; return (dx, dW)")
    with stage("hand-checkable case: x = [[1, -2], [-0.5, 3]], W = [[1, 2], [0, -1]], dy = [[1, 1], [2, -1]]"):
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


# ----------------------------------------------------------------------------------------
# Exercises 9.4 and 9.5: a reverse-mode engine on a graph of Nodes
# ----------------------------------------------------------------------------------------
# gradcheck.Node (value, parents, vjp, grad) is the data structure; 9.4 writes three operations
# that build Nodes, 9.5 the walk backward(root) that fills every node's grad. The checker of 9.5
# builds its graphs from the operations below (the same contract), so that 9.5 is judged alone,
# whatever 9.4 returned.

def _matmul(a, b):
    return Node(a.value @ b.value, (a, b), lambda g: (g @ b.value.T, a.value.T @ g))


def _add(a, b):
    """a + b, b the same shape as a or a row (F,) added to every row. When the shapes agree the
    vjp hands the same array g to both parents (an engine must not add into it in place)."""
    same = b.value.shape == a.value.shape
    return Node(a.value + b.value, (a, b), lambda g: (g, g if same else g.sum(axis=0)))


def _relu(a):
    return Node(np.maximum(a.value, 0.0), (a,), lambda g: (g * (a.value > 0),))


def half_sse(a, target):
    """L = 0.5 * sum((a - target)^2): a Node, target an array -> a Node holding one number."""
    e = a.value - target
    return Node(0.5 * np.sum(e ** 2), (a,), lambda g: (g * e,))


# ---- Exercise 9.4: the operations --------------------------------------------------------

def _node_result(out, inputs, what):
    """The learner's Node, its parents the input nodes themselves, or a failure saying which."""
    if not all(hasattr(out, attr) for attr in ("value", "parents", "vjp")):
        raise CheckFailed(f"{what} returned {short_repr(out)}, not a Node",
                          hint="build the result as Node(value, parents, vjp) and return it")
    parents = out.parents
    if not isinstance(parents, (tuple, list)) or len(parents) != len(inputs) or \
            any(p is not n for p, n in zip(parents, inputs)):
        names = ("a", "b")[:len(inputs)]
        raise CheckFailed(f"the parents of the Node {what} returned are {short_repr(parents)}, "
                          f"expected the input node(s) ({', '.join(names)}) themselves",
                          hint="the parents are the input Nodes, in the order the vjp returns "
                               "their gradients: Node(value, (a, b), vjp)")
    if not callable(out.vjp):
        raise CheckFailed(f"the vjp of the Node {what} returned is {short_repr(out.vjp)}, not a "
                          "function", hint="vjp is a function of the node's gradient g, e.g. "
                                           "lambda g: (g * 2,)")
    return out


def _check_op(op, spec, args):
    """op on Nodes of args[:-1]; its value and its vjp(g), g = args[-1], judged by spec."""
    *values, g = args
    inputs = [Node(v) for v in values]
    what = f"{getattr(op, '__name__', 'your function')}({', '.join('ab'[:len(inputs)])})"
    out = _node_result(call_hinted(op, inputs), inputs, what)
    grads = call_hinted(out.vjp, (g,), spec.errors)
    if isinstance(grads, np.ndarray) or not isinstance(grads, (tuple, list)):
        raise CheckFailed(f"the vjp returned {short_repr(grads)}, not a tuple of {len(inputs)} "
                          "gradient(s)", hint="the vjp returns one gradient per parent, as a "
                                              "tuple: (g_a,) for one parent, (g_a, g_b) for two")
    check_case(lambda *_: (out.value, *grads), spec, args)


_SHAPES = [(("matmul", "mismatch"), "(N, F) @ (F, I) is (N, I): each gradient has the shape of its "
                                    "input; which of g, b.value.T and a.value.T go together?")]


def _op_spec(name, want, mistakes, hint, parents):
    """The Spec of one operation: its value, then one gradient per parent."""
    outputs = [Output("value", want=lambda *args: want(*args)[0],
                      hint=f"{name}'s value is its forward result, as in Exercise 9.2")]
    for j, part in enumerate(parents):
        outputs.append(Output(
            f"grad of {part}", want=lambda *args, j=j: want(*args)[1 + j],
            mistakes=lambda *args, part=part: mistakes(*args)[part], hint=hint,
            shape=lambda *args, j=j: np.shape(args[j]),
            shape_hint=f"the gradient of {part} has the shape of {part}"
                       + (": b was added to every row, so its gradient sums over the rows"
                          if name == "add" and part == "b" else "")))
    return Spec(*outputs, errors=_SHAPES)


def _matmul_mistakes(a, b, g):
    return {"a": [(lambda: g @ b, "a's gradient is g @ b.T: b is transposed going back"),
                  (lambda: -(g @ b.T), "the sign: a's gradient is g @ b.T, with no minus")],
            "b": [(lambda: g.T @ a, "b's gradient is a.T @ g (the shape of b); yours is its "
                                    "transpose"),
                  (lambda: -(a.T @ g), "the sign: b's gradient is a.T @ g, with no minus")]}


def _add_mistakes(a, b, g):
    return {"a": [(lambda: 2 * g, "each term of a + b passes g on once, not twice")],
            "b": [(lambda: g.mean(axis=0), "the row b was added to every row: its gradient is "
                                           "the SUM of g over the rows, not the mean"),
                  (lambda: g[0], "the row b was added to EVERY row: sum g over all of them, not "
                                 "only the first"),
                  (lambda: -(g if b.shape == a.shape else g.sum(axis=0)),
                   "a + b passes +g to b; -g would be the gradient of a - b")]}


def _relu_mistakes(a, g):
    return {"a": [(lambda: g, "the mask is missing: the gradient passes only where a > 0"),
                  (lambda: g * np.maximum(a, 0), "multiply g by the 0/1 mask (a > 0), not by "
                                                 "relu(a)"),
                  (lambda: np.maximum(g, 0), "the mask comes from the forward input a.value, "
                                             "not from g: relu(g) is not relu's backward")]}


_MATMUL = _op_spec("matmul", lambda a, b, g: (a @ b, g @ b.T, a.T @ g), _matmul_mistakes,
                   tiered("each gradient has the shape of its input: which product of g with "
                          "the other input has that shape?",
                          "vjp: g -> (g @ b.value.T, a.value.T @ g)"), "ab")
_ADD = _op_spec("add", lambda a, b, g: (a + b, g, g if b.shape == a.shape else g.sum(axis=0)),
                _add_mistakes,
                tiered("an addition passes g to both terms unchanged; a term that was "
                       "broadcast adds up what it received",
                       "vjp: g -> (g, g) when the shapes agree, (g, g.sum(axis=0)) for a row b"),
                "ab")
_RELU = _op_spec("relu", lambda a, g: (np.maximum(a, 0), g * (a > 0)), _relu_mistakes,
                 tiered("relu passes the gradient where its input was positive",
                        "vjp: g -> (g * (a.value > 0),)"), "a")


@checker()
def check_graph_ops(matmul, add=None, relu=None):
    if not (callable(add) and callable(relu)):
        raise CheckFailed("pass the three functions: check_graph_ops(matmul, add, relu)")
    rng = case_rng(94)
    with stage("matmul: hand-checkable, a = [[1, 2]], b = [[3], [4]], g = [[1]]"):
        # value [[11]]; grad of a = g @ b.T = [[3, 4]], grad of b = a.T @ g = [[1], [2]]
        _check_op(matmul, _MATMUL, (np.array([[1.0, 2.0]]), np.array([[3.0], [4.0]]),
                                    np.array([[1.0]])))
    with stage("matmul: random (N, I) @ (I, F), then square"):
        for N, I, F in ((4, 3, 5), (3, 3, 3)):
            _check_op(matmul, _MATMUL, (rng.standard_normal((N, I)), rng.standard_normal((I, F)),
                                        rng.standard_normal((N, F))))
    with stage("add: a = [[1, 2], [3, 4]] and a row b = [10, 20], g = [[1, 2], [3, 4]]"):
        # value [[11, 22], [13, 24]]; grad of a = g, grad of b = [1 + 3, 2 + 4] = [4, 6]
        _check_op(add, _ADD, (np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([10.0, 20.0]),
                              np.array([[1.0, 2.0], [3.0, 4.0]])))
    with stage("add: random, same shapes and a row"):
        _check_op(add, _ADD, tuple(rng.standard_normal((3, 4)) for _ in range(3)))
        _check_op(add, _ADD, (rng.standard_normal((5, 3)), rng.standard_normal(3),
                              rng.standard_normal((5, 3))))
    with stage("relu: a = [[-1, 2, 0.5, -3]], g = [[1, 1, 2, 1]], then random"):
        # value [[0, 2, 0.5, 0]]; grad of a = [[0, 1, 2, 0]]
        _check_op(relu, _RELU, (np.array([[-1.0, 2.0, 0.5, -3.0]]),
                                np.array([[1.0, 1.0, 2.0, 1.0]])))
        _check_op(relu, _RELU, (rng.standard_normal((4, 6)), rng.standard_normal((4, 6))))


# ---- Exercise 9.5: the engine ------------------------------------------------------------

def _walk(root, order):
    """The nodes from the root down: "topological" (the reverse of a depth-first post-order:
    every node after all the nodes that use it) or "breadth" (breadth-first, each node once:
    a mistake, a node can come before one of its users)."""
    if order == "breadth":
        seen, queue, out = {id(root)}, [root], []
        while queue:
            node = queue.pop(0)
            out.append(node)
            for p in node.parents:
                if id(p) not in seen:
                    seen.add(id(p))
                    queue.append(p)
        return out
    seen, post, stack = set(), [], [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            post.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack += [(p, False) for p in reversed(node.parents)]
    return post[::-1]


def _engine_grads(root, order="topological", overwrite=False, alias=False, sign=1.0):
    """{id(node): gradient} by reverse mode, with switches that reproduce known mistakes:
    overwrite (a second use replaces the first), alias (a gradient stored as the vjp handed it
    over, then added into in place), sign (the root's seed)."""
    grads = {id(root): sign * np.ones_like(root.value)}
    for node in _walk(root, order):
        g = grads.get(id(node))
        if node.vjp is None or g is None:
            continue
        for p, gp in zip(node.parents, node.vjp(g)):
            if id(p) not in grads or overwrite:
                grads[id(p)] = gp if alias else np.array(gp, dtype=float)
            elif alias:
                grads[id(p)] += gp
            else:
                grads[id(p)] = grads[id(p)] + gp
    return grads


def _neuron(w, x, b, t):
    return half_sse(_add(_matmul(w, x), b), t.value)


def _two_layer(x, W1, b1, W2, b2, t):
    return half_sse(_add(_matmul(_relu(_add(_matmul(x, W1), b1)), W2), b2), t.value)


def _fork(x, W, t):
    return half_sse(_add(_matmul(x, W), _relu(x)), t.value)


def _uneven_paths(x, W, t):
    """s feeds the sum along a path of one relu and a path of two."""
    s = _matmul(x, W)
    return half_sse(_add(_relu(s), _relu(_relu(s))), t.value)


def _shared_gradient(a, b, t, first="u"):
    """u = a + b hands one array to both a and b; a is also read by relu(a), added second or first."""
    u, v = _add(a, b), _relu(a)
    return half_sse(_add(u, v) if first == "u" else _add(v, u), t.value)


def _ladder(x, t):
    """Two forks in a row: each value read by two relus that are added again."""
    h = x
    for _ in range(2):
        h = _add(_relu(h), _relu(h))
    return half_sse(h, t.value)


_ENGINE_MISTAKES = [
    ({"order": "breadth"}, "a node passed its gradient on before every node that uses it had "
                           "added its share: visit the nodes in the reverse of a topological "
                           "order (a node after all its users), not breadth-first"),
    ({"overwrite": True}, "a node used twice kept only one of its gradients: `p.grad = g` "
                          "replaced the other; where a value is used twice the gradients add "
                          "(the fork rule): p.grad = p.grad + g"),
    ({"alias": True}, "`+=` added into an array that another node's grad holds too (add's vjp "
                      "hands the same g to both parents): write p.grad = p.grad + g, or store "
                      "a copy"),
    ({"sign": -1.0}, "every gradient has the wrong sign: the root's seed is dL/dL = +1"),
]
_ENGINE_HINT = tiered("compare with the rule: seed the root with dL/dL = 1, then visit each node "
                      "once, after all the nodes that use it, and add what its vjp returns to "
                      "each parent's grad",
                      "order = reversed(topological order from the root); root.grad = "
                      "np.ones_like(root.value); for node in order: for p, g in zip(node."
                      "parents, node.vjp(node.grad)): p.grad = g if p.grad is None else "
                      "p.grad + g")
_ENGINE_ERRORS = [
    ("'NoneType' object is not callable",
     "an input node has vjp None: it has no parents to pass a gradient to, so skip it"),
    ("NoneType", "a node's grad was still None when its vjp was called: seed the root "
                 "(root.grad = np.ones_like(root.value)) and visit every node after all the "
                 "nodes that use it"),
]


def _counted(root):
    """Every node of the graph below root, its vjp wrapped to count its calls."""
    nodes = _walk(root, "topological")
    for node in nodes:
        if node.vjp is not None:
            node.vjp = _Counter(node.vjp)
    return nodes


class _Counter:
    def __init__(self, vjp):
        self.vjp, self.calls = vjp, 0

    def __call__(self, g):
        self.calls += 1
        return self.vjp(g)


def _check_engine(backward, build, names, values):
    """backward(root) on the graph build(*leaves): every leaf's grad against reverse mode's,
    each vjp run once, no value changed."""
    leaves = [Node(v) for v in values]
    root = build(*leaves)
    nodes = _counted(root)
    kept = [n.value.copy() for n in nodes]
    call_hinted(backward, (root,), _ENGINE_ERRORS)
    twice = [n for n in nodes if isinstance(n.vjp, _Counter) and n.vjp.calls > 1]
    if twice:
        raise CheckFailed(f"a node's vjp ran {twice[0].vjp.calls} times: every node passes its "
                          f"gradient on once",
                          hint="a recursion that pushes each share as it arrives runs a node "
                               "once per path to it (exponentially many in a deep net): visit "
                               "the nodes in the reverse of a topological order, each once, "
                               "after all its shares have been added")
    if any(not np.array_equal(n.value, v) for n, v in zip(nodes, kept)):
        raise CheckFailed("your backward changed a node's value",
                          hint="backward reads the values of the forward pass and writes only "
                               "grad")
    for name, leaf in zip(names, leaves):
        if leaf.grad is None:
            raise CheckFailed(f"the grad of the input {name} is still None after backward(root)",
                              hint="every node the loss depends on gets a grad, the inputs "
                                   "(vjp None) too: their parents' loop is where they get it")

    def reference(**switches):
        fresh = [Node(v) for v in values]
        grads = _engine_grads(build(*fresh), **switches)
        return [grads.get(id(n)) for n in fresh[:len(names)]]

    want = reference()
    spec = Spec(*[Output(f"the grad of {name}", want=lambda j=j: want[j], hint=_ENGINE_HINT,
                         mistakes=lambda j=j: [(lambda s=s: reference(**s)[j], h)
                                               for s, h in _ENGINE_MISTAKES])
                  for j, name in enumerate(names)])
    got = [leaf.grad for leaf in leaves[:len(names)]]
    check_case(lambda: got[0] if len(got) == 1 else tuple(got), spec, ())


@checker()
def check_reverse_mode(backward):
    rng = case_rng(95)

    def r(*shape):
        return rng.standard_normal(shape)

    with stage("hand-checkable: L = 0.5 (w x + b - t)^2 at w = 0.8, x = 2, b = 0.1, t = 1"):
        # the table of the first section: dw = 1.4, dx = 0.56, db = 0.7
        _check_engine(backward, _neuron, ["w", "x", "b"],
                      [np.array([[0.8]]), np.array([[2.0]]), np.array([0.1]), np.array([[1.0]])])
    with stage("the two-layer network of Exercise 9.2, N = 5, I = 3, F = 4, O = 2"):
        _check_engine(backward, _two_layer, ["x", "W1", "b1", "W2", "b2"],
                      [r(5, 3), r(3, 4), r(4), r(4, 2), r(2), r(5, 2)])
    with stage("a fork: y = x W + relu(x), x used twice"):
        _check_engine(backward, _fork, ["x", "W"], [r(4, 3), r(3, 3), r(4, 3)])
    with stage("one value reached by a path of one relu and a path of two"):
        _check_engine(backward, _uneven_paths, ["x", "W"], [r(4, 3), r(3, 3), r(4, 3)])
    with stage("add hands one gradient array to both of its parents"):
        for first in ("u", "v"):
            _check_engine(backward, lambda a, b, t, f=first: _shared_gradient(a, b, t, f), ["a", "b"],
                          [r(3, 4), r(3, 4), r(3, 4)])
    with stage("two forks in a row"):
        _check_engine(backward, _ladder, ["x"], [r(3, 4), r(3, 4)])
