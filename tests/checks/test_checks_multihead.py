"""Checkers of notebook 04 (multi-head attention and masks): they pass the reference solutions
and loop versions, and reject realistic learner bugs at the right stage with a hint that names
the bug."""
import types
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import multihead as checks_multihead
from support import expect_pass, expect_reject, notebook_solutions, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "04_multi_head_attention.ipynb"


# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 4, {"np": np})
split_heads = SOLVED["split_heads"]
merge_heads = SOLVED["merge_heads"]
apply_causal_mask = SOLVED["apply_causal_mask"]
multihead_attention = SOLVED["multihead_attention"]
multihead_attention_backward = SOLVED["multihead_attention_backward"]


# ---- loop versions: slower, right ---------------------------------------------------------

def split_loop(X, n_heads):
    D = X.shape[-1] // n_heads
    return np.stack([X[:, :, h * D:(h + 1) * D] for h in range(n_heads)], axis=1)


def merge_loop(Y):
    return np.concatenate([Y[:, h] for h in range(Y.shape[1])], axis=-1)


def mask_loop(S):
    out = S.copy()
    T = S.shape[-1]
    for t in range(T):
        for s in range(t + 1, T):
            out[..., t, s] = -np.inf
    return out


def mha_loop(x, W_q, W_k, W_v, W_o, n_heads, causal):
    B, T, C = x.shape
    D = C // n_heads
    A = np.zeros((B, n_heads, T, T))
    M = np.zeros((B, T, C))
    for b in range(B):
        for h in range(n_heads):
            cols = slice(h * D, (h + 1) * D)
            q, k, v = x[b] @ W_q[:, cols], x[b] @ W_k[:, cols], x[b] @ W_v[:, cols]
            for t in range(T):
                n = t + 1 if causal else T
                s = q[t] @ k[:n].T / np.sqrt(D)
                e = np.exp(s - s.max())
                A[b, h, t, :n] = e / e.sum()
            M[b, :, cols] = A[b, h] @ v
    return M @ W_o, A


def mha_backward_loop(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
    B, T, C = x.shape
    D = C // n_heads
    grads = [np.zeros_like(x)] + [np.zeros_like(W_q) for _ in range(4)]
    dx, dWq, dWk, dWv, dWo = grads
    for b in range(B):
        M = np.zeros((T, C))
        for h in range(n_heads):
            cols = slice(h * D, (h + 1) * D)
            M[:, cols] = A[b, h] @ (x[b] @ W_v[:, cols])
        dWo += M.T @ dy[b]
        dM = dy[b] @ W_o.T
        for h in range(n_heads):
            cols = slice(h * D, (h + 1) * D)
            q, k, v = x[b] @ W_q[:, cols], x[b] @ W_k[:, cols], x[b] @ W_v[:, cols]
            a, do = A[b, h], dM[:, cols]
            dv = a.T @ do
            da = do @ v.T
            ds = a * (da - np.sum(da * a, axis=-1, keepdims=True))
            dq, dk = ds @ k / np.sqrt(D), ds.T @ q / np.sqrt(D)
            dWq[:, cols] += x[b].T @ dq
            dWk[:, cols] += x[b].T @ dk
            dWv[:, cols] += x[b].T @ dv
            dx[b] += dq @ W_q[:, cols].T + dk @ W_k[:, cols].T + dv @ W_v[:, cols].T
    return dx, dWq, dWk, dWv, dWo


# ---- helpers ------------------------------------------------------------------------------


def assert_passes(check, *fns, capsys):
    return expect_pass(check, *fns, capsys=capsys, notebook=4)


def assert_rejects(check, *fns, capsys, stage=None, hint=None, message=None):
    return expect_reject(check, *fns, capsys=capsys, notebook=4, stage=stage, hint=hint,
                         message=message)


# each checker with the functions it takes (the split/merge checker takes two)
CHECKERS = {
    "split_merge": (cl.checks.check_split_merge_heads, (split_heads, merge_heads)),
    "mask": (cl.checks.check_causal_mask, (apply_causal_mask,)),
    "forward": (cl.checks.check_multihead_attention, (multihead_attention,)),
    "backward": (cl.checks.check_multihead_attention_backward, (multihead_attention_backward,)),
}
LOOPS = {
    "split_merge": (split_loop, merge_loop),
    "mask": (mask_loop,),
    "forward": (mha_loop,),
    "backward": (mha_backward_loop,),
}


def replace_first(key, fn):
    """The checker's functions with the first one replaced by fn."""
    check, fns = CHECKERS[key]
    return check, (fn,) + fns[1:]


def test_exported_from_cl_checks():
    assert len(checks_multihead.__all__) == 4
    for name in checks_multihead.__all__:
        assert getattr(cl.checks, name) is getattr(checks_multihead, name)


@pytest.mark.parametrize("key", CHECKERS)
def test_reference_passes(key, capsys):
    check, fns = CHECKERS[key]
    assert assert_passes(check, *fns, capsys=capsys).n_stages >= 4


@pytest.mark.parametrize("key", CHECKERS)
def test_loop_version_passes(key, capsys):
    assert_passes(CHECKERS[key][0], *LOOPS[key], capsys=capsys)


@pytest.mark.parametrize("key", CHECKERS)
def test_stub_is_not_done(key, capsys):
    def stub(*args):
        raise NotImplementedError

    check, fns = replace_first(key, stub)
    result, out = run_check(check, *fns, capsys=capsys)
    assert not result.passed and not result.done
    assert "not done yet" in out and len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("key", CHECKERS)
def test_none_string_and_exception(key, capsys):
    for bad, words in ((lambda *a: None, "None"), (lambda *a: "a string", "str"),
                       (lambda *a: undefined_name, "NameError")):  # noqa: F821
        check, fns = replace_first(key, bad)
        result, out = run_check(check, *fns, capsys=capsys)
        assert not result.passed and result.done and "Traceback" not in out
        assert words in result.message or words in out, out


@pytest.mark.parametrize("key", CHECKERS)
def test_not_callable(key, capsys):
    check, fns = replace_first(key, np.zeros(3))
    result, out = run_check(check, *fns, capsys=capsys)
    assert not result.passed and "pass your function itself" in out


# ---- in place and float32 ----------------------------------------------------------------

def test_split_in_place_is_named(capsys):
    def in_place(X, n_heads):
        X *= 1.0
        X[0, 0, 0] = 0.0
        return split_heads(X, n_heads)

    assert_rejects(cl.checks.check_split_merge_heads, in_place, merge_heads, capsys=capsys,
                   message="changed its input `X` in place")


def test_mask_in_place_is_named(capsys):
    def in_place(S):
        T = S.shape[-1]
        S[..., np.triu(np.ones((T, T), bool), 1)] = -np.inf
        return S

    assert_rejects(cl.checks.check_causal_mask, in_place, capsys=capsys,
                   message="changed its input `S` in place")


def test_backward_in_place_is_named(capsys):
    def in_place(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
        A += 0.0
        A[..., 0] = 0.5
        return multihead_attention_backward(dy, x, W_q, W_k, W_v, W_o, A, n_heads)

    assert_rejects(cl.checks.check_multihead_attention_backward, in_place, capsys=capsys,
                   message="`A` in place")


def test_forward_float32_is_named(capsys):
    def f32(x, W_q, W_k, W_v, W_o, n_heads, causal):
        args = (a.astype(np.float32) for a in (x, W_q, W_k, W_v, W_o))   # float32 throughout
        y, A = multihead_attention(*args, n_heads, causal)
        return y.astype(np.float32), A.astype(np.float32)

    assert_rejects(cl.checks.check_multihead_attention, f32, capsys=capsys, hint="dtype problem")


def test_backward_float32_is_named(capsys):
    def f32(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
        args = (a.astype(np.float32) for a in (dy, x, W_q, W_k, W_v, W_o, A))
        grads = multihead_attention_backward(*args, n_heads)
        return tuple(g.astype(np.float32) for g in grads)

    assert_rejects(cl.checks.check_multihead_attention_backward, f32, capsys=capsys,
                   hint="dtype problem")


def test_mask_float32_upcast_passes(capsys):
    """As in Exercises 4.4 and 4.6 (and core), a float64 result from float32 input is fine."""
    assert_passes(cl.checks.check_causal_mask, lambda S: apply_causal_mask(S).astype(np.float64),
                  capsys=capsys)


# ---- Exercise 4.1 --------------------------------------------------------------------------

def test_split_reshape_only(capsys):
    assert_rejects(cl.checks.check_split_merge_heads,
                   lambda X, H: X.reshape(X.shape[0], H, X.shape[1], -1), merge_heads,
                   capsys=capsys, stage="hand-checkable case", hint="reshape to (B, H, T, D) alone")


def test_split_interleaved(capsys):
    assert_rejects(cl.checks.check_split_merge_heads,
                   lambda X, H: X.reshape(*X.shape[:2], -1, H).transpose(0, 3, 1, 2), merge_heads,
                   capsys=capsys, stage="hand-checkable case", hint="column BLOCK")


def test_split_wrong_shape(capsys):
    assert_rejects(cl.checks.check_split_merge_heads,
                   lambda X, H: X.reshape(*X.shape[:2], H, -1), merge_heads,
                   capsys=capsys, stage="shapes", message="expected (2, 4, 3, 3)")


def test_merge_reshape_only(capsys):
    assert_rejects(cl.checks.check_split_merge_heads, split_heads,
                   lambda Y: Y.reshape(Y.shape[0], Y.shape[2], -1),
                   capsys=capsys, stage="hand-checkable case", hint="move the heads back behind")


def test_merge_interleaved(capsys):
    assert_rejects(cl.checks.check_split_merge_heads, split_heads,
                   lambda Y: Y.transpose(0, 2, 3, 1).reshape(Y.shape[0], Y.shape[2], -1),
                   capsys=capsys, stage="hand-checkable case", hint="not to every H-th column")


def test_split_merge_missing_second_function(capsys):
    result, out = run_check(cl.checks.check_split_merge_heads, split_heads, capsys=capsys)
    assert not result.passed and "pass both functions" in out


# ---- Exercise 4.2 --------------------------------------------------------------------------

def _mask_with(fill=-np.inf, k=1, lower=False):
    def fn(S):
        T = S.shape[-1]
        m = np.tril(np.ones((T, T), bool), -k) if lower else np.triu(np.ones((T, T), bool), k)
        return np.where(m, fill, S)
    return fn


def test_mask_default_hint_gives_no_solution(capsys):
    """A mask matching no known mistake gets the rule, not the code."""
    def odd(S):
        out = apply_causal_mask(S)
        return np.where(np.isfinite(out), out + 1.0, out)

    result = assert_rejects(cl.checks.check_causal_mask, odd, capsys=capsys,
                            stage="hand-checkable case", hint="every score with s > t")
    assert "triu" not in result.hint and "k=1" not in result.hint


@pytest.mark.parametrize("fn, hint", [
    (_mask_with(k=0), "a token may see itself"),
    (_mask_with(lower=True), "you masked the past"),
    (_mask_with(fill=-1e9), "not -1e9"),
    (_mask_with(fill=0.0), "exp(0) = 1"),
])
def test_mask_rejects(fn, hint, capsys):
    assert_rejects(cl.checks.check_causal_mask, fn, capsys=capsys, stage="hand-checkable case",
                   hint=hint)


@pytest.mark.parametrize("fn", [lambda S: np.where(np.tril(S) == 0, -np.inf, S),
                                lambda S: np.where(np.tril(S) == S, S, -np.inf)])
def test_mask_built_from_the_scores_values(fn, capsys):
    """Right whenever no score is 0: the stage of zero and equal scores names the bug."""
    result = assert_rejects(cl.checks.check_causal_mask, fn, capsys=capsys,
                            stage="scores exactly 0, or equal, on both sides of the diagonal",
                            hint="the mask comes from the scores' values")
    assert "exp(0)" not in result.hint


def test_mask_2d_only(capsys):
    """A mask that works on one (T, T) map but not on a batch (B, H, T, T)."""
    def only_2d(S):
        T = S.shape[0]
        return np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, S)

    assert_rejects(cl.checks.check_causal_mask, only_2d, capsys=capsys,
                   stage="batched scores (B, H, T, T)")


# ---- Exercise 4.4 --------------------------------------------------------------------------

def _fwd_with(scale=None, causal_flip=False, mask_k=1, no_wo=False, split=split_heads,
              merge=merge_heads):
    def fn(x, W_q, W_k, W_v, W_o, n_heads, causal):
        Q, K, V = (split(x @ W, n_heads) for W in (W_q, W_k, W_v))
        D = Q.shape[-1]
        S = Q @ K.transpose(0, 1, 3, 2) * (1 / np.sqrt(D) if scale is None else scale(x, D))
        if causal != causal_flip:
            T = S.shape[-1]
            S = np.where(np.triu(np.ones((T, T), bool), mask_k), -np.inf, S)
        E = np.exp(S - np.max(S, axis=-1, keepdims=True))
        A = E / np.sum(E, axis=-1, keepdims=True)
        out = merge(A @ V)
        return (out if no_wo else out @ W_o), A
    return fn


def _reshape_split(X, H):
    return X.reshape(X.shape[0], H, X.shape[1], -1)


def _reshape_merge(Y):
    return Y.reshape(Y.shape[0], Y.shape[2], -1)


FWD_HAND = "hand-checkable case: W_q = 0, uniform weights"
FWD_DOMINANT = "causal edge case: a future key's score dominates every row (float32)"


@pytest.mark.parametrize("fn, stage, hint", [
    (_fwd_with(scale=lambda x, D: 1 / np.sqrt(x.shape[-1])), "random cases, bidirectional",
     "not 1/sqrt(C)"),
    (_fwd_with(scale=lambda x, D: 1.0), "random cases, bidirectional", "not scaled"),
    (_fwd_with(split=_reshape_split, merge=_reshape_merge), "hand-checkable case: W_q = 0, uniform weights",
     "reshape alone"),
    (_fwd_with(causal_flip=True), "hand-checkable case: W_q = 0, uniform weights", "mask only if causal"),
    (_fwd_with(mask_k=0), "hand-checkable case: W_q = 0, uniform weights", "A token may see itself"),
    (_fwd_with(no_wo=True), "hand-checkable case: W_q = 0, uniform weights", "output projection"),
    (_fwd_with(split=_reshape_split), FWD_HAND, "the split is a reshape alone"),
    (_fwd_with(merge=_reshape_merge), FWD_HAND, "the merge is a reshape alone"),
])
def test_forward_rejects(fn, stage, hint, capsys):
    assert_rejects(cl.checks.check_multihead_attention, fn, capsys=capsys, stage=stage, hint=hint)


def _late_mask(x, W_q, W_k, W_v, W_o, n_heads, causal):
    """Maximum over all keys (the future included), then np.tril on exp, then normalise."""
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    S = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1])
    E = np.exp(S - np.max(S, axis=-1, keepdims=True))
    if causal:
        E = np.tril(E)
    A = E / np.sum(E, axis=-1, keepdims=True)
    return merge_heads(A @ V) @ W_o, A


def _with_own(fn, **helpers):
    """fn as a learner's notebook defines it: calling the split_heads, merge_heads and
    apply_causal_mask of its own namespace (the right ones, unless given in helpers)."""
    namespace = {"np": np, "split_heads": split_heads, "merge_heads": merge_heads,
                 "apply_causal_mask": apply_causal_mask, **helpers}
    return types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)


OWN_FIRST = "first, the functions of Exercises 4.1-4.2 that {} calls: {}"


@pytest.mark.parametrize("check, fn", [
    (cl.checks.check_multihead_attention, multihead_attention),
    (cl.checks.check_multihead_attention_backward, multihead_attention_backward)])
def test_own_helpers_are_checked_first_and_named(check, fn, capsys):
    """4.4 and 4.6 run on the learner's own 4.1 (and 4.2): a bug there is named there."""
    def mask_from_values(S):
        return np.where(np.tril(S) == 0, -np.inf, S)

    def split_interleaved(X, n_heads):
        return X.reshape(*X.shape[:2], -1, n_heads).transpose(0, 3, 1, 2)

    result = assert_rejects(check, _with_own(fn, split_heads=split_interleaved), capsys=capsys,
                            message="and the check of Exercise 4.1 fails")
    assert result.stage.startswith(OWN_FIRST.format(fn.__name__, "split_heads, merge_heads"))
    assert "fix Exercise 4.1 first" in result.hint and "column BLOCK" in result.hint
    if fn is multihead_attention:     # without this, 4.4 blamed "the diagonal is masked"
        result = assert_rejects(check, _with_own(fn, apply_causal_mask=mask_from_values),
                                capsys=capsys, stage=OWN_FIRST.format(
                                    fn.__name__, "split_heads, merge_heads, apply_causal_mask"),
                                hint="fix Exercise 4.2 first",
                                message="apply_causal_mask, and the check of Exercise 4.2 fails")
        assert "the scores' values" in result.hint and "diagonal is masked" not in result.hint

        def stub(S):
            raise NotImplementedError
        assert_rejects(check, _with_own(fn, apply_causal_mask=stub), capsys=capsys,
                       message="apply_causal_mask, which is not done yet", hint="Exercise 4.2")
    assert_passes(check, _with_own(fn), capsys=capsys)


def test_forward_late_mask_is_caught_and_named(capsys):
    """Right on ordinary scores, NaN when a future score dominates: the edge case names it."""
    result = assert_rejects(cl.checks.check_multihead_attention, _late_mask, capsys=capsys,
                            stage=FWD_DOMINANT, hint="Mask the scores first")
    assert "future ones included" in result.hint


def test_forward_late_mask_upcast_is_caught(capsys):
    """The same bug computed in float64 (inputs upcast): the gap of ~1000 underflows there too."""
    def upcast(x, *args):
        return _late_mask(*(np.asarray(a, np.float64) for a in (x, *args[:4])), *args[4:])

    assert_rejects(cl.checks.check_multihead_attention, upcast, capsys=capsys,
                   stage=FWD_DOMINANT, hint="Mask the scores first")


def test_forward_default_hint_gives_no_solution(capsys):
    def odd(*args):
        y, A = multihead_attention(*args)
        return 1.01 * y, A

    result = assert_rejects(cl.checks.check_multihead_attention, odd, capsys=capsys,
                            stage=FWD_HAND, hint="Exercise 3.2's single head")
    for formula in ("merge_heads(A @ V) @ W_o", "transpose(0, 1, 3, 2)", "sqrt(D)"):
        assert formula not in result.hint


def test_forward_returns_only_y(capsys):
    assert_rejects(cl.checks.check_multihead_attention, lambda *a: multihead_attention(*a)[0],
                   capsys=capsys, message="should return 2 arrays")


def test_forward_naive_softmax_overflows(capsys):
    def naive(x, W_q, W_k, W_v, W_o, n_heads, causal):
        Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
        S = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1])
        if causal:
            S = apply_causal_mask(S)
        E = np.exp(S)
        A = E / np.sum(E, axis=-1, keepdims=True)
        return merge_heads(A @ V) @ W_o, A

    assert_rejects(cl.checks.check_multihead_attention, naive, capsys=capsys,
                   stage="edge cases: one head, large scores, float32", hint="stably")


# ---- Exercise 4.6 --------------------------------------------------------------------------

def _bwd_with(**kw):
    def fn(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
        return checks_multihead._backward(dy, x, W_q, W_k, W_v, W_o, A, n_heads, **kw)
    return fn


BWD_SMALL = "small case: B = 1, T = 3, C = 4, H = 2"
BWD_RANDOM = "random cases, bidirectional"


def _bwd_edit(edit):
    """The reference backward with its returned tuple changed by edit(list of gradients, dy,
    x, W_q, W_k, W_v, W_o, A, H)."""
    def fn(*args):
        g = list(multihead_attention_backward(*args))
        edit(g, *args)
        return tuple(g)
    return fn


def _dk_untransposed(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
    """dK = dS @ Q instead of dS^T @ Q: the learner's code, written out."""
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    D = Q.shape[-1]
    M = merge_heads(A @ V)
    dO = split_heads(dy @ W_o.T, n_heads)
    dV = A.transpose(0, 1, 3, 2) @ dO
    dA = dO @ V.transpose(0, 1, 3, 2)
    dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    dQ = merge_heads(dS @ K / np.sqrt(D))
    dK = merge_heads(dS @ Q / np.sqrt(D))
    dV = merge_heads(dV)
    dx = dQ @ W_q.T + dK @ W_k.T + dV @ W_v.T
    return (dx, *(np.einsum("btc,bte->ce", x, g) for g in (dQ, dK, dV)),
            np.einsum("btc,bte->ce", M, dy))


def _merge_backward_by_reshape(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
    """Cell 42's tempting shortcut: dO = dM.reshape(B, H, T, D), everything else right."""
    B, T, C = x.shape
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    D = Q.shape[-1]
    dM = dy @ W_o.T
    dO = dM.reshape(B, n_heads, T, D)
    dA = dO @ V.transpose(0, 1, 3, 2)
    dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    dQ = merge_heads(dS @ K / np.sqrt(D))
    dK = merge_heads(dS.transpose(0, 1, 3, 2) @ Q / np.sqrt(D))
    dV = merge_heads(A.transpose(0, 1, 3, 2) @ dO)
    dx = dQ @ W_q.T + dK @ W_k.T + dV @ W_v.T
    return (dx, *(np.einsum("btc,bte->ce", x, g) for g in (dQ, dK, dV)),
            np.einsum("btc,bte->ce", merge_heads(A @ V), dy))


def _swap_q_k(g, *args):
    g[1], g[2] = g[2], g[1]


def _mean_dw(g, dy, x, *rest):
    for i in (1, 2, 3, 4):
        g[i] = g[i] / (x.shape[0] * x.shape[1])


def _dwo_last_sequence(g, dy, x, W_q, W_k, W_v, W_o, A, n_heads):
    M = merge_heads(A @ split_heads(x @ W_v, n_heads))
    g[4] = M[-1].T @ dy[-1]


@pytest.mark.parametrize("fn, stage, hint", [
    (_bwd_with(scale=1.0), BWD_SMALL, "carry the 1/sqrt(D)"),
    (_bwd_with(smb=lambda d, a: a * (1 - a) * d), BWD_SMALL,
     "your softmax backward keeps only the diagonal of its Jacobian"),
    (_bwd_with(smb=lambda d, a: a * (d - np.sum(d * a, axis=-2, keepdims=True))), BWD_SMALL,
     "runs over axis=-2"),
    (_bwd_with(wo_T=False), BWD_SMALL, "TRANSPOSE of W_o"),
    (_dk_untransposed, BWD_SMALL, "dK needs the transpose of dS"),
    (_merge_backward_by_reshape, BWD_SMALL, "cut into heads by a reshape alone"),
    (_bwd_with(split=_reshape_split, merge=_reshape_merge), BWD_SMALL,
     "backward of merge_heads is split_heads"),
    (_bwd_edit(_mean_dw), BWD_SMALL, "do not divide by B * T"),
    (_bwd_edit(_dwo_last_sequence), BWD_RANDOM, "from the last sequence of the batch only"),
    (_bwd_edit(_swap_q_k), BWD_SMALL, "dW_q and dW_k are swapped"),
    (_bwd_with(paths="v"), BWD_SMALL, "only the value path"),
    (_bwd_with(paths="qv"), BWD_SMALL, "key path is missing"),
])
def test_backward_rejects(fn, stage, hint, capsys):
    assert_rejects(cl.checks.check_multihead_attention_backward, fn, capsys=capsys,
                   stage=stage, hint=hint)


def test_backward_diagonal_hint_gives_no_formula(capsys):
    result = assert_rejects(cl.checks.check_multihead_attention_backward,
                            _bwd_with(smb=lambda d, a: a * (1 - a) * d), capsys=capsys)
    assert "np.sum" not in result.hint and "dA * A" not in result.hint


def test_backward_default_hint_gives_no_solution(capsys):
    result = assert_rejects(cl.checks.check_multihead_attention_backward,
                            _bwd_edit(lambda g, *a: g.__setitem__(0, 1.01 * g[0])),
                            capsys=capsys, stage=BWD_SMALL)
    assert result.hint == "compare each step with your derivation in Exercise 4.5"


def test_backward_dwo_transposed(capsys):
    def wrong(*args):
        g = list(multihead_attention_backward(*args))
        g[4] = g[4].T
        return tuple(g)

    result = assert_rejects(cl.checks.check_multihead_attention_backward, wrong, capsys=capsys,
                            hint="dW_o is transposed")
    assert "M^T dy" in result.hint and "x^T" not in result.hint


def test_backward_dwv_transposed(capsys):
    def wrong(*args):
        g = list(multihead_attention_backward(*args))
        g[3] = g[3].T
        return tuple(g)

    assert_rejects(cl.checks.check_multihead_attention_backward, wrong, capsys=capsys,
                   hint="dW_v is transposed")


def test_backward_wrong_count_and_shape(capsys):
    assert_rejects(cl.checks.check_multihead_attention_backward,
                   lambda *a: multihead_attention_backward(*a)[:4], capsys=capsys,
                   message="should return 5 arrays")

    def flat_dx(*a):
        g = list(multihead_attention_backward(*a))
        g[0] = g[0].reshape(-1, g[0].shape[-1])
        return tuple(g)

    assert_rejects(cl.checks.check_multihead_attention_backward, flat_dx, capsys=capsys,
                   stage="returns (dx, dW_q, dW_k, dW_v, dW_o) with the shapes of x and the weights",
                   message="dx has shape (6, 8)")


def test_backward_agrees_with_gradcheck():
    """The checker's reference backward is a gradient: central differences agree."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6))
    W = [rng.standard_normal((6, 6)) / 2 for _ in range(4)]
    for causal in (False, True):
        _, A = multihead_attention(x, *W, 3, causal)
        report = cl.gradcheck.check_op(
            lambda *a: multihead_attention(*a, 3, causal)[0],
            lambda dy: multihead_attention_backward(dy, x, *W, A, 3),
            {"x": x, "W_q": W[0], "W_k": W[1], "W_v": W[2], "W_o": W[3]})
        assert report.passed, str(report)


def test_viz_attention_heads():
    att = np.full((4, 8, 8), 1 / 8)
    fig = cl.viz.attention_heads(att, list("abcdefgh"))
    assert len(fig.axes) == 5   # four heads and a colour bar
    with pytest.raises(ValueError):
        cl.viz.attention_heads(att[0], list("abcdefgh"))
