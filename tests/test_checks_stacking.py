"""Checkers of notebook 07 (stacking and the output head): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
import inspect
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import stacking as checks_stacking

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "07_stacking_and_output_head.ipynb"


# ---- the reference solutions: the exact code of the notebook's solution regions ----------

def tied_embedding_grad(dlogits, x, tokens, d_emb):
    """dlogits (B, T, V), x (B, T, C), tokens (B, T), d_emb (B, T, C) -> dE (V, C)."""
    V, C = dlogits.shape[-1], x.shape[-1]
    dE = dlogits.reshape(-1, V).T @ x.reshape(-1, C)           # the head's share
    np.add.at(dE, tokens.reshape(-1), d_emb.reshape(-1, C))     # the lookup's share
    return dE


def param_count(cfg):
    """cfg: a cl.ModelConfig -> the number of parameters (an int)."""
    V, T, C, L, F = cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.d_ff
    n = V * C                                          # tok_emb
    if cfg.positional == "learned":
        n += T * C                                     # pos_emb
    attn = 4 * C * C + (4 * C if cfg.attn_bias else 0)
    ffn = C * F + F + F * C + C
    n += L * (attn + ffn + 2 * 2 * C)                  # two LayerNorms per block
    if cfg.norm == "pre":
        n += 2 * C                                     # ln_f
    if not cfg.tie_embeddings:
        n += C * V + (V if cfg.head_bias else 0)       # head.w, head.b
    return n


def tied_loops(dlogits, x, tokens, d_emb):
    B, T, V = dlogits.shape
    dE = np.zeros((V, x.shape[-1]))
    for b in range(B):
        for t in range(T):
            dE[tokens[b, t]] += d_emb[b, t]
            for v in range(V):
                dE[v] += dlogits[b, t, v] * x[b, t]
    return dE


def param_count_from_model(cfg):
    return cl.Transformer(cfg.replace(dtype="float64"), seed=0).n_params if cfg.vocab_size < 1000 \
        else param_count(cfg)


# ---- helpers ------------------------------------------------------------------------------

def run(check, fn, capsys):
    result = check(fn)
    return result, capsys.readouterr().out


def assert_passes(check, fn, capsys):
    result, out = run(check, fn, capsys)
    assert result.passed and result.done, out
    assert out.startswith("✓ Exercise 7.") and "Traceback" not in out
    return result


def assert_rejects(check, fn, capsys, stage, hint_part):
    result, out = run(check, fn, capsys)
    assert not result.passed and result.done, out
    assert result.stage == stage, (result.stage, out)
    assert result.hint is not None and hint_part in result.hint, (result.hint, out)
    assert out.startswith("✗ Exercise 7.") and "  Hint: " in out and "Traceback" not in out
    return result


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
def test_stub_is_not_done(check, _, capsys):
    def stub(*args):
        raise NotImplementedError

    result, out = run(check, stub, capsys)
    assert not result.passed and not result.done and "not done yet" in out


@pytest.mark.parametrize("check, _", CHECKERS)
def test_none_and_string(check, _, capsys):
    for bad in (lambda *a: None, lambda *a: "abc"):
        result, out = run(check, bad, capsys)
        assert not result.passed and result.done and "Traceback" not in out


def test_checker_count_equals_model_n_params():
    base = cl.presets.deep_dive()
    for change in ({}, dict(norm="pre"), dict(tie_embeddings=True), dict(positional="learned"),
                   dict(attn_bias=True), dict(head_bias=False), dict(n_layers=0),
                   dict(norm="pre", tie_embeddings=True, attn_bias=True, positional="learned",
                        n_layers=3, d_model=48, n_heads=6, d_ff=40)):
        cfg = base.replace(**change)
        assert checks_stacking._count(cfg) == cl.Transformer(cfg, seed=0).n_params, change
    assert checks_stacking._count(cl.presets.gpt2()) == 124_439_808


def test_param_count_from_model_passes(capsys):
    assert_passes(cl.checks.check_param_count, param_count_from_model, capsys)


# ---- Exercise 7.3: parameter count mistakes --------------------------------------------------

def _variant(**kw):
    def count(cfg):
        return checks_stacking._count(cfg, **kw)
    return count


@pytest.mark.parametrize("mistake, stage, hint", [
    (dict(biases=False), "the course model", "biases are missing"),
    (dict(ln_per_block=1), "the course model", "TWO LayerNorms"),
    (dict(attn_heads="per_head"), "the course model", "n_heads does not enter"),
    (dict(attn_heads="times_heads"), "the course model", "do not multiply"),
    (dict(head_bias_when_tied=True), "one switch at a time", "a tied head has no bias"),
    (dict(head_w_when_tied=True), "one switch at a time", "no weight of its own"),
    (dict(pos_always=True), "the course model", "fixed table"),
    (dict(ln_f=False), "one switch at a time", "ln_f"),
    (dict(attn_bias_count=False), "one switch at a time", "b_q, b_k, b_v, b_o"),
])
def test_param_count_mistakes(mistake, stage, hint, capsys):
    assert_rejects(cl.checks.check_param_count, _variant(**mistake), capsys, stage, hint)


def test_param_count_float_and_array(capsys):
    assert_passes(cl.checks.check_param_count, lambda cfg: float(param_count(cfg)), capsys)
    r, out = run(cl.checks.check_param_count, lambda cfg: np.array([param_count(cfg)] * 2), capsys)
    assert not r.passed and "one number" in r.message


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


@pytest.mark.parametrize("fn, stage, hint", [
    (head_only, "shapes", "only the head's path"),
    (lookup_only, "shapes", "only the embedding's path"),
    (overwrite, "repeated tokens", "accumulate"),
    (transposed, "shapes", "dlogits^T x, not x^T dlogits"),
    (transposed_square, "square case V = C (a transposed share has the right shape)", "transposed"),
    (per_batch, "shapes", "sum over the batch"),
    (first_only, "shapes", "first sequence"),
    (averaged, "shapes", "do not average"),
    (in_place, "shapes", "d_emb"),
    (float32, "shapes", "dtype problem"),
])
def test_tied_mistakes(fn, stage, hint, capsys):
    assert_rejects(cl.checks.check_tied_embedding_grad, fn, capsys, stage, hint)


def test_reference_solutions_match_the_notebook(capsys):
    if not NOTEBOOK.exists():
        pytest.skip("notebook not written yet")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert len(cells) == 2
    namespace = {"np": np}
    for source in cells:
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    for check, fn in CHECKERS:
        assert_passes(check, namespace[fn.__name__], capsys)
        own = [src for src in cells if f"def {fn.__name__}(" in src][0]
        solution = own.split("### BEGIN SOLUTION\n")[1].split("### END SOLUTION")[0]
        assert solution.strip() in inspect.getsource(fn), fn.__name__
