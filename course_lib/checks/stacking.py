"""Checkers for notebook 07, stacking blocks and the output head.

    cl.checks.check_param_count(param_count)          # Exercise 7.3: parameters of a ModelConfig
    cl.checks.check_tied_embedding_grad(tied_grad)    # Exercise 7.2: d tok_emb of a tied model

(Exercise 7.1 derives the gradient of a tied weight on paper: no checker.)

Expected values come from formulas written here, never from the learner's function. When a
result is wrong, the checker computes the usual mistakes and names the one that matches.
"""
import numpy as np

from .core import CheckFailed, as_array, call, checker, diagnose, expect_shape, stage
from ..config import ModelConfig

__all__ = ["check_param_count", "check_tied_embedding_grad"]


# ----------------------------------------------------------------------------------------
# Exercise 7.2: the parameter count of a configuration
# ----------------------------------------------------------------------------------------

def _count(cfg, *, biases=True, ln_per_block=2, head_bias_when_tied=False, pos_always=False,
           ln_f=True, attn_heads=None, head_w_when_tied=False, attn_bias_count=True):
    """Parameters of cfg (the ablation switches use_* are taken as True), with optional mistakes.

    attn_heads: None (right, 4 C^2), "per_head" (4 C D) or "times_heads" (4 H C^2).
    """
    V, T, C, H, L, F = (cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_heads, cfg.n_layers,
                        cfg.d_ff)
    n = V * C                                             # tok_emb
    if cfg.positional == "learned" or (pos_always and cfg.positional == "sinusoidal"):
        n += T * C                                        # pos_emb
    attn = {None: 4 * C * C, "per_head": 4 * C * (C // H), "times_heads": 4 * H * C * C}[attn_heads]
    if cfg.attn_bias and attn_bias_count:
        attn += 4 * C                                     # b_q b_k b_v b_o
    ffn = C * F + F * C + ((F + C) if biases else 0)      # w1 b1 w2 b2
    ln = 2 * C                                            # gamma, beta
    n += L * (attn + ffn + ln_per_block * ln)
    if cfg.norm == "pre" and ln_f:
        n += ln                                           # ln_f
    if not cfg.tie_embeddings:
        n += C * V + (V if cfg.head_bias and biases else 0)
    else:
        n += (C * V if head_w_when_tied else 0) + (V if head_bias_when_tied else 0)
    return n


_PARAM_MISTAKES = [
    (dict(biases=False), "the biases are missing: ffn.b1 has d_ff entries, ffn.b2 d_model, and the "
                         "untied head has head.b with vocab_size entries (when head_bias=True)"),
    (dict(ln_per_block=1), "each block has TWO LayerNorms, ln1 (around attention) and ln2 (around the "
                           "FFN), each with gamma and beta of d_model entries"),
    (dict(attn_bias_count=False), "with attn_bias=True, each of the four projections has a bias of "
                                  "d_model entries: b_q, b_k, b_v, b_o"),
    (dict(ln_per_block=0), "LayerNorm has parameters: gamma and beta, d_model each, twice per block "
                           "(ln1 and ln2)"),
    (dict(attn_heads="per_head"), "each of w_q, w_k, w_v, w_o is (d_model, d_model): the heads are "
                                  "column blocks of one matrix, so n_heads does not enter the count"),
    (dict(attn_heads="times_heads"), "each of w_q, w_k, w_v, w_o is (d_model, d_model) in total, not per "
                                     "head: the H heads share it as column blocks, so do not multiply "
                                     "by n_heads"),
    (dict(head_bias_when_tied=True), "a tied head has no bias: with tie_embeddings=True the head is "
                                     "tok_emb.T and head.b does not exist"),
    (dict(head_w_when_tied=True), "a tied head has no weight of its own: it reuses tok_emb (V, C), "
                                  "which is already counted once"),
    (dict(head_w_when_tied=True, head_bias_when_tied=True),
     "with tie_embeddings=True there is no head.w and no head.b: the head reuses tok_emb"),
    (dict(pos_always=True), "sinusoidal positions are a fixed table, not a parameter: pos_emb exists "
                            "only when positional='learned'"),
    (dict(ln_f=False), "a pre-LN model has one more LayerNorm, ln_f, before the head (gamma and beta, "
                       "d_model each)"),
]


def _describe(cfg):
    return (f"ModelConfig(vocab_size={cfg.vocab_size}, seq_len={cfg.seq_len}, d_model={cfg.d_model}, "
            f"n_heads={cfg.n_heads}, n_layers={cfg.n_layers}, d_ff={cfg.d_ff}, norm={cfg.norm!r}, "
            f"positional={cfg.positional!r}, tie_embeddings={cfg.tie_embeddings}, "
            f"attn_bias={cfg.attn_bias}, head_bias={cfg.head_bias})")


def _check_count(param_count, cfg):
    got = call(param_count, cfg)
    if got is None:
        raise CheckFailed("your function returned None", hint="is the `return` statement missing?")
    value = as_array(got, "your count")
    if value.shape != ():
        raise CheckFailed(f"your count has shape {value.shape}, but one number was expected",
                          hint="add up the sizes of all parameters into one integer")
    want = _count(cfg)
    mistakes = [(_count(cfg, **m), hint) for m, hint in _PARAM_MISTAKES if _count(cfg, **m) != want]
    diagnose(value, want, mistakes, "count each parameter of the table (name: shape) once, for this "
             "configuration's switches", what=f"your count for {_describe(cfg)}", rtol=0, atol=0.5)


_BASE = ModelConfig()     # the course model (deep_dive)


@checker("Exercise 7.3", "parameter count")
def check_param_count(param_count):
    with stage("the course model"):
        _check_count(param_count, _BASE)
    with stage("one switch at a time"):
        for change in (dict(norm="pre"), dict(tie_embeddings=True), dict(positional="learned"),
                       dict(attn_bias=True), dict(head_bias=False)):
            _check_count(param_count, _BASE.replace(**change))
    with stage("other sizes"):
        for sizes in (dict(vocab_size=7, seq_len=5, d_model=12, n_heads=3, n_layers=3, d_ff=10),
                      dict(vocab_size=31, seq_len=16, d_model=32, n_heads=8, n_layers=1, d_ff=50)):
            _check_count(param_count, ModelConfig(**sizes))
    with stage("everything switched: a GPT-2 small"):
        _check_count(param_count, ModelConfig(vocab_size=50257, seq_len=1024, d_model=768, n_heads=12,
                                              n_layers=12, d_ff=3072, norm="pre", activation="gelu",
                                              positional="learned", causal=True, tie_embeddings=True,
                                              attn_bias=True, head_bias=False))
    with stage("edge case: no blocks"):
        _check_count(param_count, _BASE.replace(n_layers=0))
        _check_count(param_count, _BASE.replace(n_layers=0, norm="pre", tie_embeddings=True))


# ----------------------------------------------------------------------------------------
# Exercise 7.3: the gradient of a tied embedding
# ----------------------------------------------------------------------------------------

def _head_path(dlogits, x):
    """d tok_emb from logits = x E^T: sum over (b, t) of dlogits[b, t, v] x[b, t, c] -> (V, C)."""
    return np.einsum("btv,btc->vc", dlogits, x)


def _embedding_path(tokens, d_emb, V):
    """Scatter-add: row v sums d_emb at the positions holding token v -> (V, C)."""
    out = np.zeros((V, d_emb.shape[-1]))
    np.add.at(out, tokens.reshape(-1), d_emb.reshape(-1, d_emb.shape[-1]))
    return out


def _embedding_path_overwrite(tokens, d_emb, V):
    """The fancy-index mistake: out[tokens] += d_emb keeps one row per repeated token."""
    out = np.zeros((V, d_emb.shape[-1]))
    out[tokens.reshape(-1)] += d_emb.reshape(-1, d_emb.shape[-1])
    return out


_TIED_HINT = ("d tok_emb has two parts that add: the head's, dlogits^T x summed over every (b, t), "
              "and the embedding's, the scatter-add of d_emb into the rows of the tokens")


def _tied_mistakes(dlogits, x, tokens, d_emb):
    V = dlogits.shape[-1]
    head, emb = _head_path(dlogits, x), _embedding_path(tokens, d_emb, V)
    return [
        (head, "only the head's path: add the embedding's share too, the scatter-add of d_emb into "
               "the rows of the tokens (tok_emb is used twice, so its gradient has two terms)"),
        (emb, "only the embedding's path: add the head's share too, dlogits^T x summed over the "
              "positions (logits = x @ tok_emb.T uses tok_emb a second time)"),
        (lambda: head + _embedding_path_overwrite(tokens, d_emb, V),
         "a repeated token must accumulate: `dE[tokens] += d_emb` keeps only one of the repeated rows; "
         "use np.add.at(dE, tokens, d_emb) or a loop over positions"),
        (lambda: _embedding_path_overwrite(tokens, d_emb, V) + head,
         "use np.add.at for the scatter-add (repeated tokens must accumulate)"),
        (lambda: _head_path(dlogits, x).T + emb, "the head's share is transposed: logits = x @ E.T, so "
                                                 "dE = dlogits^T x has E's shape (V, C), not x^T dlogits"),
        (lambda: 0.5 * (head + emb), "the two paths add; do not average them"),
        (lambda: _head_path(dlogits[:1], x[:1]) + _embedding_path(tokens[:1], d_emb[:1], V),
         "only the first sequence of the batch is counted: sum over every b and t"),
        (lambda: _head_path(dlogits[-1:], x[-1:]) + emb,
         "the head's share must be summed over the batch too, not taken from one sequence"),
        (lambda: head / (dlogits.shape[0] * dlogits.shape[1]) + emb,
         "do not average the head's share over positions: the loss's mean is already in dlogits"),
        (lambda: head - emb, "the two paths add, with the same sign"),
    ]


def _check_tied_case(fn, dlogits, x, tokens, d_emb):
    V, C = dlogits.shape[-1], x.shape[-1]
    got = call(fn, dlogits, x, tokens, d_emb)
    if got is None:
        raise CheckFailed("your function returned None", hint="is the `return` statement missing?")
    arr = as_array(got, "your d tok_emb")
    B = dlogits.shape[0]
    if arr.shape == (C, V) and V != C:
        raise CheckFailed(f"your d tok_emb has shape {arr.shape}, expected (V, C) = {(V, C)}",
                          hint="a gradient has the shape of its parameter: tok_emb is (V, C); the head's "
                               "share is dlogits^T x, not x^T dlogits")
    if arr.shape == (B, V, C) and B > 1:
        raise CheckFailed(f"your d tok_emb has shape {arr.shape}, expected (V, C) = {(V, C)}",
                          hint="sum over the batch axis as well: every sequence adds to the same tok_emb")
    expect_shape(got, (V, C), "your d tok_emb", hint=_TIED_HINT)
    want = _head_path(dlogits, x) + _embedding_path(tokens, d_emb, V)
    diagnose(got, want, _tied_mistakes(dlogits, x, tokens, d_emb), _TIED_HINT, what="your d tok_emb",
             rtol=1e-10, atol=1e-12)       # float64 sums; a float32 result is named as such


def _tied_case(rng, B, T, V, C, tokens=None):
    if tokens is None:
        tokens = rng.integers(0, V, size=(B, T))
    return (rng.standard_normal((B, T, V)), rng.standard_normal((B, T, C)), np.asarray(tokens),
            rng.standard_normal((B, T, C)))


@checker("Exercise 7.2", "tied embedding gradient")
def check_tied_embedding_grad(tied_grad):
    rng = np.random.default_rng(73)
    with stage("shapes"):
        _check_tied_case(tied_grad, *_tied_case(rng, 2, 3, 7, 4, tokens=[[0, 1, 2], [3, 4, 5]]))
    with stage("hand-checkable case: one sequence, distinct tokens"):
        dlogits = np.array([[[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]]])      # (1, 2, 3)
        x = np.array([[[1.0, 2.0], [3.0, 4.0]]])                      # (1, 2, 2)
        d_emb = np.array([[[10.0, 20.0], [30.0, 40.0]]])              # (1, 2, 2)
        _check_tied_case(tied_grad, dlogits, x, np.array([[2, 0]]), d_emb)
    with stage("repeated tokens"):
        _check_tied_case(tied_grad, *_tied_case(rng, 1, 6, 4, 3, tokens=[[1, 1, 2, 1, 0, 2]]))
    with stage("a batch of sequences"):
        _check_tied_case(tied_grad, *_tied_case(rng, 3, 4, 6, 5))
    with stage("square case V = C (a transposed share has the right shape)"):
        _check_tied_case(tied_grad, *_tied_case(rng, 2, 5, 4, 4))
    with stage("Max(1,6,2)-sized: B = 4, T = 8, V = 20, C = 64, some tokens unused"):
        _check_tied_case(tied_grad, *_tied_case(rng, 4, 8, 20, 64, tokens=rng.integers(0, 12, (4, 8))))
