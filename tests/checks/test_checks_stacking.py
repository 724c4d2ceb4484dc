"""Checkers of notebook 07 (stacking and the output head): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import stacking as checks_stacking
from support import notebook_asserts, notebook_solutions, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "07_stacking_and_output_head.ipynb"


# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 2, {"np": np})
tied_embedding_grad = SOLVED["tied_embedding_grad"]
param_count = SOLVED["param_count"]


def tied_loops(dlogits, x, tokens, d_emb):
    B, T, V = dlogits.shape
    dE = np.zeros((V, x.shape[-1]))
    for b in range(B):
        for t in range(T):
            dE[tokens[b, t]] += d_emb[b, t]
            for v in range(V):
                dE[v] += dlogits[b, t, v] * x[b, t]
    return dE


# ---- helpers ------------------------------------------------------------------------------


assert_passes, assert_rejects = notebook_asserts(7)


CHECKERS = [(cl.checks.check_tied_embedding_grad, tied_embedding_grad),
            (cl.checks.check_param_count, param_count)]


def test_exported_from_cl_checks():
    assert checks_stacking.__all__
    for name in checks_stacking.__all__:
        assert getattr(cl.checks, name) is getattr(checks_stacking, name)


@pytest.mark.parametrize("check, fn", CHECKERS + [(cl.checks.check_tied_embedding_grad, tied_loops)])
def test_reference_passes(check, fn, capsys):
    assert assert_passes(check, fn, capsys).n_stages >= 4


@pytest.mark.parametrize("check, _", CHECKERS)
def test_none_and_string(check, _, capsys):
    for bad in (lambda *a: None, lambda *a: "abc"):
        result, out = run_check(check, bad, capsys)
        assert not result.passed and result.done and "Traceback" not in out


def test_checker_count_equals_model_n_params():
    base = cl.presets.deep_dive()
    for change in ({}, dict(norm="pre"), dict(tie_embeddings=True), dict(positional="learned"),
                   dict(positional="none"), dict(attn_bias=True), dict(head_bias=False),
                   dict(n_layers=0),
                   dict(norm="pre", tie_embeddings=True, attn_bias=True, positional="learned",
                        n_layers=3, d_model=48, n_heads=6, d_ff=40)):
        cfg = base.replace(**change)
        assert checks_stacking._count(cfg) == cl.Transformer(cfg, seed=0).n_params, change
    assert checks_stacking._count(cl.presets.gpt2()) == 124_439_808


# ---- Exercise 7.3: parameter count mistakes --------------------------------------------------

def _variant(**kw):
    def count(cfg):
        return checks_stacking._count(cfg, **kw)
    return count


POSITIONS = "every kind of positions: sinusoidal, learned, none"


@pytest.mark.parametrize("mistake, stage, hint", [
    (dict(biases=False), "the course model", "biases are missing"),
    (dict(ln_per_block=1), "the course model", "TWO LayerNorms"),
    (dict(attn_heads="per_head"), "the course model", "n_heads does not enter"),
    (dict(attn_heads="times_heads"), "the course model", "do not multiply"),
    (dict(head_bias_when_tied=True), "one switch at a time", "a tied head has no bias"),
    (dict(head_w_when_tied=True), "one switch at a time", "no weight of its own"),
    (dict(pos_for=("learned", "sinusoidal")), "the course model", "fixed table"),
    (dict(pos_for=("learned", "none")), POSITIONS, "positional='none' means no positions"),
    (dict(pos_for=()), POSITIONS, "learned positions are a parameter"),
    (dict(ln_f=False), "one switch at a time", "ln_f"),
    (dict(attn_bias_count=False), "one switch at a time", "b_q, b_k, b_v, b_o"),
    (dict(ln_f_always=True), "the course model", "ln_f exists only in a pre-LN model"),
    (dict(head_bias_always=True), "one switch at a time", "head.b exists only when head_bias=True"),
    (dict(ffn_biases="b1"), "the course model", "only ffn.b1 is counted"),
    (dict(ffn_biases="b2"), "the course model", "only ffn.b2 is counted"),
])
def test_param_count_mistakes(mistake, stage, hint, capsys):
    assert_rejects(cl.checks.check_param_count, _variant(**mistake), capsys, stage, hint)


def test_param_count_pos_emb_for_every_non_sinusoidal_model(capsys):
    """`positional != "sinusoidal"` counts pos_emb for positional="none" too: never tested
    before, so it passed."""
    def count(cfg):
        n = param_count(cfg.replace(positional="sinusoidal"))
        return n + (cfg.seq_len * cfg.d_model if cfg.positional != "sinusoidal" else 0)
    assert_rejects(cl.checks.check_param_count, count, capsys, POSITIONS, "positional='none'")


def test_param_count_hint_comes_from_the_failing_stage(capsys):
    """A forgotten pos_emb (T C = 512 here) equals a forgotten ffn.b1 in both blocks (2 x 256),
    but the course model, which passed, rules the biases out: the hint names pos_emb."""
    r = assert_rejects(cl.checks.check_param_count, _variant(pos_for=()), capsys, POSITIONS,
                       "pos_emb has seq_len x d_model entries")
    assert "ffn.b2" not in r.hint and " OR " not in r.hint


def test_param_count_ffn_b2_names_both_explanations(capsys):
    """With d_ff = 4 d_model, dropping ffn.b1 and dropping the LayerNorms give the same count."""
    r = assert_rejects(cl.checks.check_param_count, _variant(ffn_biases="b2"), capsys,
                       "the course model", "only ffn.b2 is counted")
    assert "LayerNorm has parameters" in r.hint and " OR " in r.hint


def test_param_count_prints_integers_and_the_difference(capsys):
    r = assert_rejects(cl.checks.check_param_count, _variant(ln_f_always=True), capsys,
                       "the course model", "ln_f")
    assert "got 102,164, expected 102,036 (difference +128)" in r.message
    assert "e+05" not in r.message and "index" not in r.message


def test_param_count_unknown_mistake_gets_the_generic_hint(capsys):
    r = assert_rejects(cl.checks.check_param_count, lambda cfg: param_count(cfg) - 3, capsys,
                       "the course model", "count each once")
    assert "(difference -3)" in r.message


def test_param_count_accepts_numpy_integers(capsys):
    assert_passes(cl.checks.check_param_count, lambda cfg: np.int64(param_count(cfg)), capsys)


@pytest.mark.parametrize("bad", [lambda cfg: float(param_count(cfg)),
                                 lambda cfg: np.float64(param_count(cfg)),
                                 lambda cfg: param_count(cfg) / 1])
def test_param_count_rejects_floats(bad, capsys):
    r = assert_rejects(cl.checks.check_param_count, bad, capsys, "the course model",
                       "Return an integer")
    assert "integer was expected" in r.message


def test_param_count_array_and_bool(capsys):
    r, out = run_check(cl.checks.check_param_count, lambda cfg: np.array([param_count(cfg)] * 2), capsys)
    assert not r.passed and "one number" in r.message
    r, out = run_check(cl.checks.check_param_count, lambda cfg: True, capsys)
    assert not r.passed and "boolean" in r.message


# ---- Exercise 7.2: tied embedding gradient mistakes -----------------------------------------

def head_only(dlogits, x, tokens, d_emb):
    return np.einsum("btv,btc->vc", dlogits, x)


def lookup_only(dlogits, x, tokens, d_emb):
    dE = np.zeros((dlogits.shape[-1], x.shape[-1]))
    np.add.at(dE, tokens.reshape(-1), d_emb.reshape(-1, x.shape[-1]))
    return dE


def overwrite(dlogits, x, tokens, d_emb):
    dE = head_only(dlogits, x, tokens, d_emb)
    dE[tokens.reshape(-1)] += d_emb.reshape(-1, x.shape[-1])
    return dE


def transposed(dlogits, x, tokens, d_emb):
    return np.einsum("btv,btc->cv", dlogits, x) + lookup_only(dlogits, x, tokens, d_emb).T


def transposed_square(dlogits, x, tokens, d_emb):
    V, C = dlogits.shape[-1], x.shape[-1]
    head = x.reshape(-1, C).T @ dlogits.reshape(-1, V)           # (C, V)
    if V != C:
        head = head.T
    return head + lookup_only(dlogits, x, tokens, d_emb)


def per_batch(dlogits, x, tokens, d_emb):
    return np.stack([tied_embedding_grad(dlogits[b:b + 1], x[b:b + 1], tokens[b:b + 1], d_emb[b:b + 1])
                     for b in range(len(tokens))])


def first_only(dlogits, x, tokens, d_emb):
    return tied_embedding_grad(dlogits[:1], x[:1], tokens[:1], d_emb[:1])


def averaged(dlogits, x, tokens, d_emb):
    return 0.5 * tied_embedding_grad(dlogits, x, tokens, d_emb)


def in_place(dlogits, x, tokens, d_emb):
    dE = head_only(dlogits, x, tokens, d_emb)
    d_emb *= 1.0
    d_emb += 1.0
    np.add.at(dE, tokens.reshape(-1), d_emb.reshape(-1, x.shape[-1]) - 1.0)
    return dE


def float32(dlogits, x, tokens, d_emb):
    return tied_embedding_grad(dlogits, x, tokens, d_emb).astype(np.float32)


def last_position_only(dlogits, x, tokens, d_emb):
    """The head's share from the scored position only."""
    return head_only(dlogits[:, -1:], x[:, -1:], tokens, d_emb) + lookup_only(dlogits, x, tokens, d_emb)


def assign_loop(dlogits, x, tokens, d_emb):
    """dE[t] = d_emb[n] in a loop, after the head's share."""
    dE = head_only(dlogits, x, tokens, d_emb)
    for t, row in zip(tokens.reshape(-1), d_emb.reshape(-1, x.shape[-1])):
        dE[t] = row
    return dE


def assign_loop_first(dlogits, x, tokens, d_emb):
    """dE[t] = d_emb[n] in a loop into zeros, then the head's share added."""
    dE = np.zeros((dlogits.shape[-1], x.shape[-1]))
    for t, row in zip(tokens.reshape(-1), d_emb.reshape(-1, x.shape[-1])):
        dE[t] = row
    return dE + head_only(dlogits, x, tokens, d_emb)


def d_emb_in_head(dlogits, x, tokens, d_emb):
    """dlogits^T d_emb instead of dlogits^T x."""
    return head_only(dlogits, d_emb, tokens, d_emb) + lookup_only(dlogits, x, tokens, d_emb)


def zeros(dlogits, x, tokens, d_emb):
    return np.zeros((dlogits.shape[-1], x.shape[-1]))


HAND = "hand-checkable case: one sequence, distinct tokens"


@pytest.mark.parametrize("fn, stage, hint", [
    (head_only, HAND, "only the head's path"),
    (lookup_only, HAND, "only the embedding's path"),
    (overwrite, "repeated tokens", "accumulate"),
    (assign_loop_first, "repeated tokens", "accumulate"),
    (assign_loop, HAND, "`=` overwrites: use `+=`"),
    (last_position_only, HAND, "not only the scored one"),
    (d_emb_in_head, HAND, "not by d_emb"),
    (transposed, "shapes", "dlogits^T x, not x^T dlogits"),
    (transposed_square, "square case V = C (a transposed share has the right shape)", "transposed"),
    (per_batch, "shapes", "sum over the batch"),
    (first_only, "a batch of sequences", "first sequence"),
    (averaged, HAND, "do not average"),
    (in_place, "shapes", "d_emb"),
    (float32, "repeated tokens", "dtype problem"),
    (zeros, HAND, "derivation of Exercise 7.1"),
])
def test_tied_mistakes(fn, stage, hint, capsys):
    assert_rejects(cl.checks.check_tied_embedding_grad, fn, capsys, stage, hint)


def test_tied_shapes_stage_checks_only_the_shape(capsys):
    """Any (V, C) array passes the first stage; the values are first compared on the hand case."""
    assert_rejects(cl.checks.check_tied_embedding_grad, zeros, capsys, HAND, "Exercise 7.1")


def test_tied_default_hint_does_not_give_the_solution():
    hint = checks_stacking._TIED_HINT
    assert "Exercise 7.1" in hint
    for part in ("dlogits^T", "scatter", "add.at", "x^T", "d_emb"):
        assert part not in hint, part


def test_tied_mistakes_are_all_reachable():
    """No two known mistakes give the same array on a repeated-token batch: every hint can show.
    (V = C, so that the transposed mistake can be formed too.)"""
    rng = np.random.default_rng(0)
    case = checks_stacking._tied_case(rng, 2, 6, 4, 4, tokens=[[1, 1, 2, 1, 0, 2], [3, 3, 1, 0, 0, 2]])
    arrays = [np.asarray(w() if callable(w) else w) for w, _ in checks_stacking._tied_mistakes(*case)]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert a.shape != b.shape or not np.allclose(a, b)
    hints = [h for _, h in checks_stacking._tied_mistakes(*case)]
    assert len(set(hints)) == len(hints)


