"""Checkers of notebook 09 (backprop I): they pass the reference solutions and reject realistic
learner bugs at the right stage, with a hint that names the bug."""
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from support import expect_pass, expect_reject, notebook_solutions, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "09_backprop_chain_rule.ipynb"

# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 4, {"np": np, "cl": cl})
mlp_forward = SOLVED["mlp_forward"]
mlp_backward = SOLVED["mlp_backward"]
fork_backward = SOLVED["fork_backward"]
matmul, add, relu, backward = (SOLVED[n] for n in ("matmul", "add", "relu", "backward"))
Node = cl.gradcheck.Node


# ---- loop versions ---------------------------------------------------------------------------

def mlp_forward_loops(x, W1, b1, W2, b2):
    N, I = x.shape
    F, O = W2.shape
    z = np.zeros((N, F))
    for n in range(N):
        for f in range(F):
            z[n, f] = b1[f] + sum(x[n, i] * W1[i, f] for i in range(I))
    h = np.where(z > 0, z, 0.0)
    out = np.zeros((N, O))
    for n in range(N):
        for o in range(O):
            out[n, o] = b2[o] + sum(h[n, f] * W2[f, o] for f in range(F))
    return z, h, out


def mlp_backward_loops(dout, x, W1, W2, z, h):
    N, I = x.shape
    F, O = W2.shape
    dx, dW1, db1 = np.zeros((N, I)), np.zeros((I, F)), np.zeros(F)
    dW2, db2 = np.zeros((F, O)), np.zeros(O)
    for n in range(N):
        for o in range(O):
            db2[o] += dout[n, o]
            for f in range(F):
                dW2[f, o] += h[n, f] * dout[n, o]
        for f in range(F):
            dz = sum(dout[n, o] * W2[f, o] for o in range(O)) if z[n, f] > 0 else 0.0
            db1[f] += dz
            for i in range(I):
                dW1[i, f] += x[n, i] * dz
                dx[n, i] += dz * W1[i, f]
    return dx, dW1, db1, dW2, db2


def fork_backward_loops(dy, x, W):
    N, C = x.shape
    dx, dW = np.zeros((N, C)), np.zeros((C, C))
    for n in range(N):
        for c in range(C):
            dx[n, c] += dy[n, c] if x[n, c] > 0 else 0.0
            for d in range(C):
                dx[n, c] += dy[n, d] * W[c, d]
                dW[c, d] += x[n, c] * dy[n, d]
    return dx, dW


# ---- helpers ---------------------------------------------------------------------------------


def assert_passes(check, *fns, capsys):
    return expect_pass(check, *fns, capsys=capsys, notebook=9)


def assert_rejects(check, *fns, capsys, hint_part, stage=None):
    return expect_reject(check, *fns, capsys=capsys, notebook=9, stage=stage, hint=hint_part)


def test_checkers_are_exported():
    assert set(cl.checks.backprop.__all__) == {"check_two_layer_mlp", "check_fork_backward",
                                               "check_graph_ops", "check_reverse_mode"}
    assert cl.checks.check_two_layer_mlp is cl.checks.backprop.check_two_layer_mlp


# ---- Exercise 9.2 ----------------------------------------------------------------------------

check_mlp = cl.checks.check_two_layer_mlp


def test_mlp_reference_and_loops_pass(capsys):
    assert_passes(check_mlp, mlp_forward, mlp_backward, capsys=capsys)
    assert_passes(check_mlp, mlp_forward_loops, mlp_backward_loops, capsys=capsys)


def test_mlp_checker_knows_the_seed_numbers():
    s = cl.checks.backprop.SEED
    z, h, out = mlp_forward(s["x"], s["W1"], s["b1"], s["W2"], s["b2"])
    np.testing.assert_allclose(z, [[1.3, -0.3]])
    np.testing.assert_allclose(out, [[0.98]])
    dx, dW1, db1, dW2, db2 = mlp_backward(out - s["target"], s["x"], s["W1"], s["W2"], z, h)
    np.testing.assert_allclose(dW1, [[-0.624, 0], [-0.312, 0]])
    np.testing.assert_allclose(dx, [[-0.156, -0.0624]])


def _bwd(**change):
    """mlp_backward with one step replaced."""
    def backward(dout, x, W1, W2, z, h):
        dW2 = change.get("dW2", lambda: h.T @ dout)()
        db2 = change.get("db2", lambda: dout.sum(axis=0))()
        dh = change.get("dh", lambda: dout @ W2.T)()
        dz = change.get("dz", lambda dh: dh * (z > 0))(dh) if "dz" in change else dh * (z > 0)
        dW1 = x.T @ dz
        db1 = change["db1"](dz) if "db1" in change else dz.sum(axis=0)
        dx = change["dx"](dz) if "dx" in change else dz @ W1.T
        return dx, dW1, db1, dW2, db2
    return backward


def _mask_missing(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = dh
    return dz @ W1.T, x.T @ dz, dz.sum(axis=0), h.T @ dout, dout.sum(axis=0)


def _mask_of_gradient(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = np.maximum(dh, 0)          # relu applied to the gradient
    return dz @ W1.T, x.T @ dz, dz.sum(axis=0), h.T @ dout, dout.sum(axis=0)


def _mask_times_h(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = dh * h
    return dz @ W1.T, x.T @ dz, dz.sum(axis=0), h.T @ dout, dout.sum(axis=0)


def _w1_not_transposed(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = dh * (z > 0)
    return dz @ W1, x.T @ dz, dz.sum(axis=0), h.T @ dout, dout.sum(axis=0)


def _bias_not_summed(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = dh * (z > 0)
    return dz @ W1.T, x.T @ dz, dz, h.T @ dout, dout


def _bias_mean(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = dh * (z > 0)
    return dz @ W1.T, x.T @ dz, dz.mean(axis=0), h.T @ dout, dout.mean(axis=0)


def _dW1_transposed(dout, x, W1, W2, z, h):
    dh = dout @ W2.T
    dz = dh * (z > 0)
    return dz @ W1.T, dz.T @ x, dz.sum(axis=0), h.T @ dout, dout.sum(axis=0)


@pytest.mark.parametrize("wrong, hint", [
    (_mask_missing, "mask is missing"),
    (_mask_of_gradient, "wrong array"),
    (_mask_times_h, "0/1 array"),
    (_bias_not_summed, "sums over the batch axis"),
    (_bias_mean, "SUM of dout"),
])
def test_mlp_backward_mistakes_named(wrong, hint, capsys):
    assert_rejects(check_mlp, mlp_forward, wrong, capsys=capsys, hint_part=hint)


def test_mlp_transposed_weights(capsys):
    # distinct sizes: a transposed weight cannot even be multiplied; the hint lists the shapes
    assert_rejects(check_mlp, mlp_forward, _w1_not_transposed, capsys=capsys,
                   hint_part="W1 (3, 4)", stage="backward: shapes (N = 5, I = 3, F = 4, O = 2)")
    r = assert_rejects(check_mlp, mlp_forward, _dW1_transposed, capsys=capsys,
                       hint_part="every gradient has the shape of its array",
                       stage="backward: shapes (N = 5, I = 3, F = 4, O = 2)")
    assert "dW1 has shape (4, 3), expected (3, 4)" in r.message


def test_mlp_transposed_weights_by_value():
    """On square sizes a transposed weight has the right shape: diagnose names it by value."""
    from course_lib.checks import backprop as bp
    rng = np.random.default_rng(0)
    x, W1, b1, W2, b2, dout = bp._random_net(rng, 6, 4, 4, 4)
    z, h, _ = bp._forward(x, W1, b1, W2, b2)
    m = bp._backward_mistakes(dout, x, W1, W2, z, h)
    dz = (dout @ W2.T) * (z > 0)
    hints = [hint for wrong, hint in m["dx"]
             if np.allclose(wrong(), dz @ W1)]
    assert hints and "transposed" in hints[0]
    dz_t = (dout @ W2) * (z > 0)
    hints = [hint for wrong, hint in m["dx"] if np.allclose(wrong(), dz_t @ W1.T)]
    assert hints and "W2 is transposed" in hints[0]


def _fwd_no_relu(x, W1, b1, W2, b2):
    z = x @ W1 + b1
    return z, z, z @ W2 + b2


def _fwd_no_bias(x, W1, b1, W2, b2):
    z = x @ W1
    h = np.maximum(z, 0)
    return z, h, h @ W2 + b2


def test_mlp_forward_mistakes(capsys):
    # value bugs pass the shape stage and are reported on the numbers of Exercise 9.1
    assert_rejects(check_mlp, _fwd_no_relu, mlp_backward, capsys=capsys,
                   hint_part="relu(z)", stage="forward: the numbers of Exercise 9.1")
    assert_rejects(check_mlp, _fwd_no_bias, mlp_backward, capsys=capsys,
                   hint_part="bias b1 is missing", stage="forward: the numbers of Exercise 9.1")


def test_mlp_value_bugs_reported_on_the_seed_numbers_first(capsys):
    """The shape stages check shapes only: a value bug is found on the 9.1 numbers."""
    for wrong in (_mask_missing, _mask_of_gradient, _mask_times_h):
        assert_rejects(check_mlp, mlp_forward, wrong, capsys=capsys, hint_part="mask",
                       stage="backward: the numbers of Exercise 9.1")
    # the mean equals the sum for one example: found on the random batches
    assert_rejects(check_mlp, mlp_forward, _bias_mean, capsys=capsys, hint_part="SUM of dout",
                   stage="random batches, forward and backward")
    result, out = run_check(check_mlp, _fwd_no_relu, mlp_backward, capsys=capsys)
    assert "0.98" in out or "1.3" in out or "-0.3" in out, out      # numbers from the paper


def test_mlp_in_place_float32_odd_returns_and_stub(capsys):
    def in_place(dout, x, W1, W2, z, h):
        z *= (z > 0)                        # changes z in place
        return mlp_backward(dout, x, W1, W2, z, h)

    result, out = run_check(check_mlp, mlp_forward, in_place, capsys=capsys)
    assert not result.passed and "`z` in place" in out

    def f32(dout, x, W1, W2, z, h):
        return tuple(g.astype(np.float32) for g in mlp_backward(dout, x, W1, W2, z, h))

    result, out = run_check(check_mlp, mlp_forward, f32, capsys=capsys)
    assert not result.passed and "float32" in out and "dtype" in out

    for odd, text in ((lambda *a: None, "got NoneType"), (lambda *a: "dx", "got str"),
                      (lambda *a: mlp_backward(*a)[:4], "of length 4")):
        result, out = run_check(check_mlp, mlp_forward, odd, capsys=capsys)
        assert not result.passed and text in out, out

    def wrong_shape(*a):
        dx, dW1, db1, dW2, db2 = mlp_backward(*a)
        return dx, dW1, db1, dW2.T, db2

    result, out = run_check(check_mlp, mlp_forward, wrong_shape, capsys=capsys)
    assert not result.passed and "dW2 has shape" in out

    def stub(*a):
        raise NotImplementedError

    result, out = run_check(check_mlp, mlp_forward, stub, capsys=capsys)
    assert not result.done and "not done yet" in out
    result, out = run_check(check_mlp, stub, stub, capsys=capsys)
    assert not result.done and "not done yet" in out


# ---- Exercise 9.3 ----------------------------------------------------------------------------

check_fork = cl.checks.check_fork_backward


def test_fork_reference_and_loops_pass(capsys):
    assert_passes(check_fork, fork_backward, capsys=capsys)
    assert_passes(check_fork, fork_backward_loops, capsys=capsys)

    def one_line(dy, x, W):
        return dy @ W.T + dy * (x > 0), x.T @ dy

    assert_passes(check_fork, one_line, capsys=capsys)


def _overwrite(dy, x, W):
    dx = dy @ W.T
    dx = dy * (x > 0)            # overwrites the first path
    return dx, x.T @ dy


def _linear_only(dy, x, W):
    return dy @ W.T, x.T @ dy


@pytest.mark.parametrize("wrong, hint", [
    (_overwrite, "ReLU path alone"),
    (_linear_only, "path through x @ W alone"),
    (lambda dy, x, W: (dy @ W + dy * (x > 0), x.T @ dy), "W is transposed"),
    (lambda dy, x, W: (dy @ W.T + dy, x.T @ dy), "only where x > 0"),
    (lambda dy, x, W: (dy @ W.T + np.maximum(dy, 0), x.T @ dy), "not from the gradient"),
    (lambda dy, x, W: (dy @ W.T + dy * np.maximum(x, 0), x.T @ dy), "not by relu(x)"),
    (lambda dy, x, W: (dy @ W.T + dy * (x > 0), dy.T @ x), "its transpose"),
    (lambda dy, x, W: ((dy @ W.T) * (x > 0), x.T @ dy), "side by side, not in sequence"),
    (lambda dy, x, W: ((dy * (x > 0)) @ W.T, x.T @ dy), "add the paths, don't multiply"),
    (lambda dy, x, W: ((dy @ W.T) * (dy * (x > 0)), x.T @ dy), "multiplies the two paths' gradients"),
    (lambda dy, x, W: (2 * dy @ W.T, x.T @ dy), "doubles the path through x @ W"),
])
def test_fork_mistakes_named(wrong, hint, capsys):
    r = assert_rejects(check_fork, wrong, capsys=capsys, hint_part=hint)
    assert r.stage == HAND_STAGE, (r.stage, hint)


HAND_STAGE = "hand-checkable case: x = [[1, -2], [-0.5, 3]], W = [[1, 2], [0, -1]], dy = [[1, 1], [2, -1]]"


def test_fork_chained_paths_not_called_doubling(capsys):
    """Chaining the paths, (dy @ W.T) * (x > 0), gets its own hint, not "doubles"."""
    r = assert_rejects(check_fork, lambda dy, x, W: ((dy @ W.T) * (x > 0), x.T @ dy),
                       capsys=capsys, hint_part="side by side", stage=HAND_STAGE)
    assert "doubles" not in r.hint


# ---- default hints point to the step, never give the formula ---------------------------------

SOLUTION_FORMULAS = ("x.T @ dy", "dy @ W.T", "dy * (x > 0)", "h.T @ dout", "dout @ W2.T",
                     "dh * (z > 0)", "x.T @ dz", "dz @ W1.T", "x @ W1 + b1", "h @ W2 + b2",
                     "np.maximum(z, 0)", "= dout", "sum(axis=0)")


def _no_formula(text):
    assert text is not None
    for formula in SOLUTION_FORMULAS:
        assert formula not in text, (formula, text)


def test_default_hints_contain_no_solution_formula(capsys):
    from course_lib.checks import backprop as bp
    for text in [bp._FWD_HINT, bp._TWO_USES, bp._DW_HINT, *bp._BWD_HINT.values()]:
        _no_formula(text)
    # wrong by a factor no known mistake explains: the default hint of each array
    for j in range(3):
        def fwd(*a, j=j):
            out = list(mlp_forward(*a))
            out[j] = out[j] * 1.7 + 0.3
            return tuple(out)
        r = assert_rejects(check_mlp, fwd, mlp_backward, capsys=capsys, hint_part="Exercise 9.1")
        _no_formula(r.hint)
    for j, name in enumerate(("dx", "dW1", "db1", "dW2", "db2")):
        def bwd(*a, j=j):
            out = list(mlp_backward(*a))
            out[j] = out[j] * 1.7 + 0.3
            return tuple(out)
        r = assert_rejects(check_mlp, mlp_forward, bwd, capsys=capsys, hint_part="Exercise 9.1",
                           stage="backward: the numbers of Exercise 9.1")
        assert r.hint.startswith(name), r.hint
        _no_formula(r.hint)
    r = assert_rejects(check_fork, lambda dy, x, W: (1.7 * dy + 0.3, x.T @ dy), capsys=capsys,
                       hint_part="each use sends back a gradient", stage=HAND_STAGE)
    _no_formula(r.hint)
    r = assert_rejects(check_fork, lambda dy, x, W: fork_backward(dy, x, W)[:1] + (0 * W,),
                       capsys=capsys, hint_part="linear layer", stage=HAND_STAGE)
    _no_formula(r.hint)


def test_shape_hints_contain_no_formula(capsys):
    r = assert_rejects(check_mlp, mlp_forward, _w1_not_transposed, capsys=capsys,
                       hint_part="(a, b) @ (b, c)")
    _no_formula(r.hint)

    def fwd_transposed(x, W1, b1, W2, b2):
        z = x @ W1.T + b1
        return z, np.maximum(z, 0), np.maximum(z, 0) @ W2 + b2

    r = assert_rejects(check_mlp, fwd_transposed, mlp_backward, capsys=capsys,
                       hint_part="no transposes", stage="forward: shapes (N = 5, I = 3, F = 4, O = 2)")
    _no_formula(r.hint)


def test_fork_in_place_float32_odd_returns_and_stub(capsys):
    def in_place(dy, x, W):
        dy += dy * 0 + 0.0
        x[x < 0] = 0                       # changes x in place
        return fork_backward(dy, x, W)

    result, out = run_check(check_fork, in_place, capsys=capsys)
    assert not result.passed and "`x` in place" in out

    def f32(dy, x, W):
        return tuple(g.astype(np.float32) for g in fork_backward(dy, x, W))

    result, out = run_check(check_fork, f32, capsys=capsys)
    assert not result.passed and "float32" in out and "dtype" in out

    for odd, text in ((lambda *a: None, "got NoneType"), (lambda *a: "dx", "got str"),
                      (lambda *a: fork_backward(*a)[0], "got ndarray")):
        result, out = run_check(check_fork, odd, capsys=capsys)
        assert not result.passed and text in out, out

    result, out = run_check(check_fork, lambda dy, x, W: (fork_backward(dy, x, W)[0].T, x.T @ dy),
                      capsys=capsys)
    assert not result.passed and "dx has shape" in out

    def stub(dy, x, W):
        raise NotImplementedError

    result, out = run_check(check_fork, stub, capsys=capsys)
    assert not result.done and "not done yet" in out


def test_fork_forward_matches_the_notebook():
    x, W = np.array([[1.0, -2.0]]), np.eye(2)
    np.testing.assert_allclose(cl.checks.backprop.fork_forward(x, W), [[2.0, -2.0]])


# ---- 9.2 and 9.3 are written from the formulas, not from course_lib's kernels ---------------

def test_kernel_built_network_and_fork_are_library_calls(capsys):
    k = cl.kernels

    def mlp_backward_kernels(dout, x, W1, W2, z, h):
        dh, dW2, db2 = k.linear_backward(dout, h, W2, True)
        dz = k.relu_backward(dh, z)
        dx, dW1, db1 = k.linear_backward(dz, x, W1, True)
        return dx, dW1, db1, dW2, db2

    def fork_backward_kernels(dy, x, W):
        dx, dW, _ = k.linear_backward(dy, x, W, False)
        return dx + k.relu_backward(dy, x), dW

    for check, fns in ((check_mlp, (mlp_forward, mlp_backward_kernels)),
                       (cl.checks.check_fork_backward, (fork_backward_kernels,))):
        result, out = run_check(check, *fns, capsys=capsys)
        assert result.status == "library call" and "linear_backward" in out, out
        assert "a kernel which does part of what this exercise asks you to write" in out, out


def test_mlp_and_fork_signs_named(capsys):
    def negated(dout, x, W1, W2, z, h):
        return mlp_backward(-dout, x, W1, W2, z, h)

    assert_rejects(check_mlp, mlp_forward, negated, capsys=capsys, hint_part="wrong sign",
                   stage="backward: the numbers of Exercise 9.1")

    def subtracted(dy, x, W):
        return dy @ W.T - dy * (x > 0), x.T @ dy

    def negated_fork(dy, x, W):
        return -(dy @ W.T + dy * (x > 0)), x.T @ dy

    assert_rejects(cl.checks.check_fork_backward, subtracted, capsys=capsys, hint_part="subtracts")
    assert_rejects(cl.checks.check_fork_backward, negated_fork, capsys=capsys, hint_part="wrong sign")


# ---- Exercise 9.4: three operations as nodes --------------------------------------------------

check_ops = cl.checks.check_graph_ops


def _op(value, vjp):
    """An operation of one or two nodes with its own value and vjp (functions of the inputs)."""
    def op(*nodes):
        arrays = [n.value for n in nodes]
        return Node(value(*arrays), nodes, lambda g: vjp(g, *arrays))
    return op


def test_graph_ops_pass(capsys):
    assert_passes(check_ops, matmul, add, relu, capsys=capsys)


@pytest.mark.parametrize("which, wrong, stage, hint", [
    ("add", _op(np.add, lambda g, a, b: (g, g if b.shape == a.shape else g.mean(axis=0))),
     "add: a = [[1, 2], [3, 4]] and a row b = [10, 20], g = [[1, 2], [3, 4]]", "not the mean"),
    ("add", _op(np.add, lambda g, a, b: (g, g)),
     "add: a = [[1, 2], [3, 4]] and a row b = [10, 20], g = [[1, 2], [3, 4]]", "sums over the rows"),
    ("add", _op(np.add, lambda g, a, b: (g, g if b.shape == a.shape else g[0])),
     "add: a = [[1, 2], [3, 4]] and a row b = [10, 20], g = [[1, 2], [3, 4]]", "not only the first"),
    ("add", _op(np.add, lambda g, a, b: (g, -(g if b.shape == a.shape else g.sum(axis=0)))),
     "add: a = [[1, 2], [3, 4]] and a row b = [10, 20], g = [[1, 2], [3, 4]]", "a - b"),
    ("relu", _op(lambda a: np.maximum(a, 0), lambda g, a: (g,)),
     "relu: a = [[-1, 2, 0.5, -3]], g = [[1, 1, 2, 1]], then random", "mask is missing"),
    ("relu", _op(lambda a: np.maximum(a, 0), lambda g, a: (g * np.maximum(a, 0),)),
     "relu: a = [[-1, 2, 0.5, -3]], g = [[1, 1, 2, 1]], then random", "not by relu(a)"),
    ("relu", _op(lambda a: np.maximum(a, 0), lambda g, a: g * (a > 0)),
     "relu: a = [[-1, 2, 0.5, -3]], g = [[1, 1, 2, 1]], then random", "as a tuple"),
    ("matmul", _op(np.matmul, lambda g, a, b: (-(g @ b.T), a.T @ g)),
     "matmul: hand-checkable, a = [[1, 2]], b = [[3], [4]], g = [[1]]", "the sign"),
    ("matmul", _op(np.matmul, lambda g, a, b: (g @ b, a.T @ g)),
     "matmul: hand-checkable, a = [[1, 2]], b = [[3], [4]], g = [[1]]", "which of g, b.value.T"),
    ("matmul", _op(np.matmul, lambda g, a, b: (g @ b.T, g.T @ a)),
     "matmul: hand-checkable, a = [[1, 2]], b = [[3], [4]], g = [[1]]", "the shape of b"),
    ("matmul", _op(np.matmul, lambda g, a, b: (a.T @ g, g @ b.T)),
     "matmul: hand-checkable, a = [[1, 2]], b = [[3], [4]], g = [[1]]", "the shape of a"),
])
def test_graph_op_mistakes_named(which, wrong, stage, hint, capsys):
    ops = {"matmul": matmul, "add": add, "relu": relu, which: wrong}
    assert_rejects(check_ops, ops["matmul"], ops["add"], ops["relu"], capsys=capsys, stage=stage,
                   hint_part=hint)


def test_graph_ops_wrong_nodes_and_in_place(capsys):
    def swapped(a, b):
        return Node(a.value @ b.value, (b, a), lambda g: (g @ b.value.T, a.value.T @ g))

    def no_vjp(a, b):
        return Node(a.value @ b.value, (a, b), "g @ b.T")

    assert_rejects(check_ops, swapped, add, relu, capsys=capsys, hint_part="Node(value, (a, b), vjp)")
    assert_rejects(check_ops, lambda a, b: a.value @ b.value, add, relu, capsys=capsys,
                   hint_part="build the result as Node")
    assert_rejects(check_ops, no_vjp, add, relu, capsys=capsys, hint_part="vjp is a function")

    def relu_in_place(a):
        def vjp(g):
            g[a.value <= 0] = 0
            return (g,)
        return Node(np.maximum(a.value, 0), (a,), vjp)
    result, out = run_check(check_ops, matmul, add, relu_in_place, capsys=capsys)
    assert not result.passed and "changed its input `g` in place" in out, out
    result, out = run_check(check_ops, matmul, add, capsys=capsys)
    assert not result.passed and "pass the three functions" in out, out


def test_graph_ops_stub_is_not_done(capsys):
    def stub(a, b):
        raise NotImplementedError
    result, out = run_check(check_ops, stub, add, relu, capsys=capsys)
    assert not result.done and "not done yet" in out


# ---- Exercise 9.5: the engine ------------------------------------------------------------------

check_engine = cl.checks.check_reverse_mode


def _order(root):
    order, seen = [], set()

    def visit(node):
        if id(node) not in seen:
            seen.add(id(node))
            for p in node.parents:
                visit(p)
            order.append(node)
    visit(root)
    return order


def _engine(store, order=lambda root: reversed(_order(root)), seed=1.0):
    """An engine with the accumulation `store(parent, g)` and the visiting order given."""
    def engine(root):
        root.grad = seed * np.ones_like(root.value)
        for node in order(root):
            if node.vjp is None:
                continue
            for p, g in zip(node.parents, node.vjp(node.grad)):
                store(p, g)
    return engine


def _add_new(p, g):
    p.grad = g if p.grad is None else p.grad + g


def _overwrite(p, g):
    p.grad = g


def _add_in_place(p, g):
    if p.grad is None:
        p.grad = g
    else:
        p.grad += g


def _breadth_first(root):
    queue, seen = [root], {id(root)}
    while queue:
        node = queue.pop(0)
        yield node
        for p in node.parents:
            if id(p) not in seen:
                seen.add(id(p))
                queue.append(p)


def _pushing(root):
    def push(node, g):
        node.grad = g if node.grad is None else node.grad + g
        if node.vjp is not None:
            for p, gp in zip(node.parents, node.vjp(g)):
                push(p, gp)
    push(root, np.ones_like(root.value))


def _forward_order(root):
    root.grad = np.ones_like(root.value)
    for node in _order(root):
        for p, g in zip(node.parents, node.vjp(node.grad)):
            _add_new(p, g)


def _no_seed(root):
    for node in reversed(_order(root)):
        if node.vjp is not None:
            for p, g in zip(node.parents, node.vjp(node.grad)):
                _add_new(p, g)


def _changes_values(root):
    _engine(_add_new)(root)
    for node in _order(root):
        node.value = node.value * 1.0 + 1.0


def test_engine_passes(capsys):
    assert_passes(check_engine, backward, capsys=capsys)
    assert_passes(check_engine, _engine(_add_new), capsys=capsys)


@pytest.mark.parametrize("wrong, stage, hint", [
    (_engine(_overwrite), "a fork: y = x W + relu(x), x used twice", "the fork rule"),
    (_engine(_add_in_place), "add hands one gradient array to both of its parents", "p.grad + g"),
    (_engine(_add_new, order=_breadth_first), "one value reached by a path of one relu and a path of two",
     "not breadth-first"),
    (_pushing, "one value reached by a path of one relu and a path of two", "once per path"),
    (_engine(_add_new, seed=-1.0), "hand-checkable: L = 0.5 (w x + b - t)^2 at w = 0.8, x = 2, b = 0.1, t = 1",
     "dL/dL = +1"),
    (_no_seed, "hand-checkable: L = 0.5 (w x + b - t)^2 at w = 0.8, x = 2, b = 0.1, t = 1", "seed the root"),
    (_forward_order, "hand-checkable: L = 0.5 (w x + b - t)^2 at w = 0.8, x = 2, b = 0.1, t = 1",
     "an input node has vjp None"),
    (lambda root: None, "hand-checkable: L = 0.5 (w x + b - t)^2 at w = 0.8, x = 2, b = 0.1, t = 1",
     "the inputs (vjp None) too"),
    (_changes_values, "hand-checkable: L = 0.5 (w x + b - t)^2 at w = 0.8, x = 2, b = 0.1, t = 1",
     "writes only grad"),
])
def test_engine_mistakes_named(wrong, stage, hint, capsys):
    assert_rejects(check_engine, wrong, capsys=capsys, stage=stage, hint_part=hint)


def test_engine_hand_case_is_the_first_sections_table(capsys):
    """The stage's numbers are those of the neuron table: dw = 1.4, db = 0.7."""
    w, x, b = Node([[0.8]]), Node([[2.0]]), Node([0.1])
    backward(cl.checks.backprop._neuron(w, x, b, Node([[1.0]])))
    np.testing.assert_allclose([w.grad[0, 0], x.grad[0, 0], b.grad[0]], [1.4, 0.56, 0.7])
