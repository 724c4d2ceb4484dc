"""Checkers for notebook 07, stacking blocks and the output head.

    cl.checks.check_param_count(param_count)          # Exercise 7.3: parameters of a ModelConfig
    cl.checks.check_tied_embedding_grad(tied_grad)    # Exercise 7.2: d tok_emb of a tied model

(Exercise 7.1 derives the gradient of a tied weight on paper: no checker.)

Expected values come from formulas written here, never from the learner's function. When a
result is wrong, the checker computes the usual mistakes and names the one that matches.
"""
import numpy as np

from ..config import ACTIVATIONS, NORMS, POSITIONALS, ModelConfig
from .core import case_rng, CheckFailed, as_array, call, checker, diagnose, expect_shape, stage
from .library import Solution, equivalent

__all__ = ["check_param_count", "check_tied_embedding_grad"]


# ----------------------------------------------------------------------------------------
# Exercise 7.3: the parameter count of a configuration
# ----------------------------------------------------------------------------------------

def _count(cfg, *, biases=True, ln_per_block=2, head_bias_when_tied=False, pos_for=("learned",),
           ln_f=True, attn_heads=None, head_w_when_tied=False, attn_bias_count=True,
           ln_f_always=False, head_bias_always=False, ffn_biases="both"):
    """Parameters of cfg (the ablation switches use_* are taken as True), with optional mistakes.

    pos_for: the positional settings for which pos_emb is counted (right: "learned" only).
    attn_heads: None (right, 4 C^2), "per_head" (4 C D) or "times_heads" (4 H C^2).
    ffn_biases: "both" (right), "b1" or "b2" (only that one counted).
    """
    V, T, C, H, L, F = (cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_heads, cfg.n_layers,
                        cfg.d_ff)
    n = V * C                                             # tok_emb
    if cfg.positional in pos_for:
        n += T * C                                        # pos_emb
    attn = {None: 4 * C * C, "per_head": 4 * C * (C // H), "times_heads": 4 * H * C * C}[attn_heads]
    if cfg.attn_bias and attn_bias_count:
        attn += 4 * C                                     # b_q b_k b_v b_o
    ffn_b = {"both": F + C, "b1": F, "b2": C}[ffn_biases]
    ffn = C * F + F * C + (ffn_b if biases else 0)        # w1 b1 w2 b2
    ln = 2 * C                                            # gamma, beta
    n += L * (attn + ffn + ln_per_block * ln)
    if (cfg.norm == "pre" and ln_f) or ln_f_always:
        n += ln                                           # ln_f
    if not cfg.tie_embeddings:
        n += C * V + (V if (cfg.head_bias or head_bias_always) and biases else 0)
    else:
        n += (C * V if head_w_when_tied else 0) + (V if head_bias_when_tied else 0)
    return n


_PARAM_MISTAKES = [
    (dict(biases=False), "the biases are missing: ffn.b1 has d_ff entries, ffn.b2 d_model, and the "
                         "untied head has head.b with vocab_size entries (when head_bias=True)"),
    (dict(ln_per_block=1), "each block has TWO LayerNorms, ln1 (around attention) and ln2 (around the "
                           "FFN), each with gamma and beta of d_model entries"),
    (dict(ffn_biases="b1"), "the FFN has two biases: ffn.b1 after w1 (d_ff entries) and ffn.b2 after "
                            "w2 (d_model entries); only ffn.b1 is counted"),
    (dict(ffn_biases="b2"), "the FFN has two biases: ffn.b1 after w1 (d_ff entries) and ffn.b2 after "
                            "w2 (d_model entries); only ffn.b2 is counted"),
    (dict(ln_f_always=True), "ln_f exists only in a pre-LN model (norm='pre'): a post-LN block already "
                             "ends with its ln2, so there is no final LayerNorm to count"),
    (dict(head_bias_always=True), "head.b exists only when head_bias=True: with head_bias=False the "
                                  "untied head has head.w alone"),
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
    (dict(pos_for=("learned", "sinusoidal")), "sinusoidal positions are a fixed table, not a "
                                              "parameter: pos_emb exists only when "
                                              "positional='learned'"),
    (dict(pos_for=("learned", "none")), "positional='none' means no positions at all, so no "
                                        "pos_emb: it exists only when positional='learned' (a "
                                        "test such as positional != 'sinusoidal' counts it for "
                                        "'none' too)"),
    (dict(pos_for=("learned", "sinusoidal", "none")),
     "pos_emb exists only when positional='learned': sinusoidal positions are a fixed table, "
     "and positional='none' has no positions"),
    (dict(pos_for=()), "learned positions are a parameter: with positional='learned', pos_emb "
                       "has seq_len x d_model entries"),
    (dict(ln_f=False), "a pre-LN model has one more LayerNorm, ln_f, before the head (gamma and beta, "
                       "d_model each)"),
]

_DEFAULT_COUNT_HINT = ("go through the parameters of the table, name by name, with the shape each has "
                       "(notebooks 02-06), and count each once, for this configuration's switches")


def _describe(cfg):
    return (f"ModelConfig(vocab_size={cfg.vocab_size}, seq_len={cfg.seq_len}, d_model={cfg.d_model}, "
            f"n_heads={cfg.n_heads}, n_layers={cfg.n_layers}, d_ff={cfg.d_ff}, norm={cfg.norm!r}, "
            f"positional={cfg.positional!r}, tie_embeddings={cfg.tie_embeddings}, "
            f"attn_bias={cfg.attn_bias}, head_bias={cfg.head_bias})")


def _as_count(got):
    """The learner's count as a Python int, or a failure that says why it is not one."""
    if got is None:
        raise CheckFailed("your function returned None", hint="is the `return` statement missing?")
    if isinstance(got, np.ndarray) and got.shape == ():
        got = got[()]
    if isinstance(got, (bool, np.bool_)):
        raise CheckFailed(f"your function returned {got!r}, a boolean, but a count was expected",
                          hint="return the number of parameters, an integer")
    if isinstance(got, (int, np.integer)):
        return int(got)
    if isinstance(got, (float, np.floating)):
        raise CheckFailed(f"your count is {_short_value(got)}, a {type(got).__name__}, but an "
                          f"integer was expected",
                          hint="Return an integer: a count is a whole number. Drop the float(...) "
                               "and use integer arithmetic (`*`, `+`, `//`, not `/`)")
    if isinstance(got, (list, tuple, np.ndarray)):
        raise CheckFailed(f"your count is a {type(got).__name__} ({_short_value(got)}), but one "
                          f"number was expected", hint="add up the sizes of all parameters into one "
                                                       "integer")
    raise CheckFailed(f"your count is {_short_value(got)} ({type(got).__name__}), but one integer "
                      f"was expected", hint="return the number of parameters, an integer")


def _short_value(value, width=40):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def _check_count(param_count, cfg, passed):
    """Compare the learner's count for cfg; `passed` lists the configurations it got right so
    far: a mistake that would have changed one of those counts is ruled out, so the hint comes
    from what this configuration adds (a forgotten pos_emb is not "only ffn.b2 is counted")."""
    got = _as_count(call(param_count, cfg))
    want = _count(cfg)
    if got == want:
        passed.append(cfg)
        return
    possible = [(m, h) for m, h in _PARAM_MISTAKES
                if all(_count(c, **m) == _count(c) for c in passed)]
    hints = [h for m, h in possible if _count(cfg, **m) == got]
    hint = (_DEFAULT_COUNT_HINT if not hints else hints[0] if len(hints) == 1 else
            "this count is what either of these mistakes gives: " + " -- OR -- ".join(hints))
    raise CheckFailed(f"your count for {_describe(cfg)}: got {got:,}, expected {want:,} "
                      f"(difference {got - want:+,})", hint=hint)


_BASE = ModelConfig()     # the course model (deep_dive)


def _random_configs(rng, n=3):
    """Configurations with every size and switch drawn from rng (the grader's fresh cases draw
    new ones: no table of counts learned from this checker passes)."""
    out = []
    for _ in range(n):
        heads = int(rng.integers(1, 9))
        out.append(ModelConfig(vocab_size=int(rng.integers(2, 200)), seq_len=int(rng.integers(1, 65)),
                               d_model=heads * int(rng.integers(1, 17)), n_heads=heads,
                               n_layers=int(rng.integers(0, 5)), d_ff=int(rng.integers(1, 257)),
                               norm=NORMS[rng.integers(len(NORMS))],
                               activation=ACTIVATIONS[rng.integers(len(ACTIVATIONS))],
                               positional=POSITIONALS[rng.integers(len(POSITIONALS))],
                               tie_embeddings=bool(rng.integers(2)), attn_bias=bool(rng.integers(2)),
                               head_bias=bool(rng.integers(2))))
    return out


_BUILT = Solution("model.init_params", message="your function calls course_lib.init_params (as "
                  "cl.Transformer does): it builds the parameters this exercise asks you to count",
                  hint="count them from the configuration: the exercise is to know which "
                       "parameters a configuration makes, and their shapes")


@checker(library=["model.Transformer.n_params", _BUILT, equivalent("io._expected_shapes")])
def check_param_count(param_count):
    passed = []
    with stage("the course model"):
        _check_count(param_count, _BASE, passed)
    with stage("one switch at a time"):
        for change in (dict(norm="pre"), dict(tie_embeddings=True), dict(attn_bias=True),
                       dict(head_bias=False)):
            _check_count(param_count, _BASE.replace(**change), passed)
    with stage("every kind of positions: sinusoidal, learned, none"):
        for positional in ("learned", "none"):      # sinusoidal: the course model above
            _check_count(param_count, _BASE.replace(positional=positional), passed)
    with stage("other sizes"):
        for sizes in (dict(vocab_size=7, seq_len=5, d_model=12, n_heads=3, n_layers=3, d_ff=10),
                      dict(vocab_size=31, seq_len=16, d_model=32, n_heads=8, n_layers=1, d_ff=50,
                           positional="none")):
            _check_count(param_count, ModelConfig(**sizes), passed)
        for cfg in _random_configs(case_rng(7301)):
            _check_count(param_count, cfg, passed)
    with stage("everything switched: a GPT-2 small"):
        _check_count(param_count, ModelConfig(vocab_size=50257, seq_len=1024, d_model=768, n_heads=12,
                                              n_layers=12, d_ff=3072, norm="pre", activation="gelu",
                                              positional="learned", causal=True, tie_embeddings=True,
                                              attn_bias=True, head_bias=False), passed)
    with stage("edge case: no blocks"):
        _check_count(param_count, _BASE.replace(n_layers=0), passed)
        _check_count(param_count, _BASE.replace(n_layers=0, norm="pre", tie_embeddings=True),
                     passed)


# ----------------------------------------------------------------------------------------
# Exercise 7.2: the gradient of a tied embedding
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


def _assigned_after(base, tokens, d_emb):
    """The `=` mistake: dE[t] = d_emb[n] in a loop, after the head's share: the row is replaced."""
    out = base.copy()
    for t, row in zip(tokens.reshape(-1), d_emb.reshape(-1, d_emb.shape[-1])):
        out[t] = row
    return out


_TIED_HINT = ("go back to the derivation of Exercise 7.1 (part 3) and code its result term by term; "
              "check each term on its own: it must have tok_emb's shape (V, C) and sum over every "
              "sequence b and position t")
_TIED_SHAPE_HINT = ("a gradient has the shape of its parameter: tok_emb is (V, C), and so is each "
                    "term of Exercise 7.1")


def _tied_mistakes(dlogits, x, tokens, d_emb):
    V = dlogits.shape[-1]
    head, emb = _head_path(dlogits, x), _embedding_path(tokens, d_emb, V)
    return [
        (head, "only the head's path: add the embedding's share too, the scatter-add of d_emb into "
               "the rows of the tokens (tok_emb is used twice, so its gradient has two terms)"),
        (emb, "only the embedding's path: add the head's share too (logits = x @ tok_emb.T uses "
              "tok_emb a second time)"),
        (lambda: _assigned_after(head, tokens, d_emb),
         "`=` overwrites: use `+=`. `dE[t] = d_emb[n]` replaces what the row already holds (the "
         "head's share, and the rows of earlier occurrences of the same token)"),
        (lambda: head + _embedding_path_overwrite(tokens, d_emb, V),
         "a repeated token must accumulate: `dE[tokens] += d_emb` (fancy indexing) or "
         "`dE[t] = d_emb[n]` in a loop keeps only one of the repeated rows; use "
         "np.add.at(dE, tokens, d_emb), or `+=` in a loop over positions"),
        (lambda: _head_path(dlogits[:, -1:], x[:, -1:]) + emb,
         "sum the head's share over every position, not only the scored one: the head computes "
         "logits at every position, and dlogits is given at all of them"),
        (lambda: _head_path(dlogits, d_emb) + emb,
         "the head's share multiplies dlogits by the head's input x, not by d_emb: in "
         "logits = x @ tok_emb.T the factor next to tok_emb is x (X_L of Exercise 7.1)"),
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


def _tied_result(fn, dlogits, x, tokens, d_emb):
    """Call fn and check the shape of its result only; returns the result."""
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
    expect_shape(got, (V, C), "your d tok_emb", hint=_TIED_SHAPE_HINT)
    return got


def _check_tied_case(fn, dlogits, x, tokens, d_emb):
    got = _tied_result(fn, dlogits, x, tokens, d_emb)
    want = _head_path(dlogits, x) + _embedding_path(tokens, d_emb, dlogits.shape[-1])
    diagnose(got, want, _tied_mistakes(dlogits, x, tokens, d_emb), _TIED_HINT, what="your d tok_emb",
             rtol=1e-10, atol=1e-12)       # float64 sums; a float32 result is named as such


def _tied_case(rng, B, T, V, C, tokens=None):
    if tokens is None:
        tokens = rng.integers(0, V, size=(B, T))
    return (rng.standard_normal((B, T, V)), rng.standard_normal((B, T, C)), np.asarray(tokens),
            rng.standard_normal((B, T, C)))


@checker(library=["kernels.embedding_backward"])
def check_tied_embedding_grad(tied_grad):
    rng = case_rng(73)
    with stage("shapes"):          # the shape only: values start with the hand case
        _tied_result(tied_grad, *_tied_case(rng, 2, 3, 7, 4, tokens=[[0, 1, 2], [3, 4, 5]]))
    with stage("hand-checkable case: one sequence, distinct tokens"):
        dlogits = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 2.0]]])      # (1, 2, 3)
        x = np.array([[[1.0, 2.0], [3.0, 4.0]]])                      # (1, 2, 2)
        d_emb = np.array([[[10.0, 20.0], [30.0, 40.0]]])              # (1, 2, 2)
        _check_tied_case(tied_grad, dlogits, x, np.array([[2, 0]]), d_emb)   # token 1 unused
    with stage("repeated tokens"):
        _check_tied_case(tied_grad, *_tied_case(rng, 1, 6, 4, 3, tokens=[[1, 1, 2, 1, 0, 2]]))
    with stage("a batch of sequences"):
        _check_tied_case(tied_grad, *_tied_case(rng, 3, 4, 6, 5))
    with stage("square case V = C (a transposed share has the right shape)"):
        _check_tied_case(tied_grad, *_tied_case(rng, 2, 5, 4, 4))
    with stage("Max(1,6,2)-sized: B = 4, T = 8, V = 20, C = 64, some tokens unused"):
        _check_tied_case(tied_grad, *_tied_case(rng, 4, 8, 20, 64, tokens=rng.integers(0, 12, (4, 8))))
