"""The whole model: every parameter against float64 numerical gradients, every switch."""
import itertools

import numpy as np
import pytest

import course_lib as cl
from course_lib.gradcheck import check_model, numerical_gradient, rel_error
from support import small_config

SWITCHES = list(itertools.product(["post", "pre"], ["relu", "gelu"], ["sinusoidal", "learned"],
                                  [False, True], [False, True]))


@pytest.mark.parametrize("norm, activation, positional, causal, tied", SWITCHES)
def test_every_parameter_matches_numerical_gradients(norm, activation, positional, causal, tied, batch):
    cfg = small_config(norm=norm, activation=activation, positional=positional, causal=causal,
                       tie_embeddings=tied, attn_bias=(norm == "pre"))
    model = cl.Transformer(cfg, seed=1)
    tokens, targets = batch
    targets = targets.copy()
    targets[0, 2] = 5          # score a second position, so that several rows reach the head
    report = check_model(model, tokens, targets, max_elements=12)
    assert set(report) == set(model.params)
    worst = max(report, key=report.get)
    assert report[worst] < 1e-6, (worst, report[worst])


@pytest.mark.parametrize("ablation", [dict(use_attention=False), dict(use_ffn=False), dict(use_residual=False),
                                      dict(use_layernorm=False), dict(positional="none"), dict(n_layers=1),
                                      dict(use_layernorm=False, norm="pre"), dict(use_residual=False, norm="pre")])
def test_ablations_are_exact_too(ablation, batch):
    # GELU: a central difference is invalid where a ReLU input sits within ~h of its kink,
    # which happens for some ablations here; the ReLU path is proven by the test above.
    model = cl.Transformer(small_config(activation="gelu", **ablation), seed=2)
    report = check_model(model, *batch, max_elements=8)
    assert max(report.values()) < 1e-6, report


def test_parameter_names_and_shapes():
    cfg = cl.presets.deep_dive()
    model = cl.Transformer(cfg, seed=0)
    shapes = {k: v.shape for k, v in model.params.items()}
    assert shapes["tok_emb"] == (20, 64) and shapes["head.w"] == (64, 20) and shapes["head.b"] == (20,)
    assert shapes["blocks.1.attn.w_q"] == (64, 64) and shapes["blocks.0.ffn.w1"] == (64, 256)
    assert shapes["blocks.0.ffn.b1"] == (256,) and shapes["blocks.0.ffn.w2"] == (256, 64)
    assert shapes["blocks.0.ln1.gamma"] == (64,) and shapes["blocks.1.ln2.beta"] == (64,)
    assert "pos_emb" not in shapes and "ln_f.gamma" not in shapes and "blocks.0.attn.b_q" not in shapes
    assert model.n_params == 102036
    assert all(v.dtype == np.float32 for v in model.params.values())
    gpt = cl.Transformer(cl.presets.gpt2(vocab_size=50, seq_len=16, d_model=32, n_heads=4, n_layers=1, d_ff=64))
    names = set(gpt.params)
    assert {"pos_emb", "ln_f.gamma", "ln_f.beta", "blocks.0.attn.b_o"} <= names
    assert "head.w" not in names and "head.b" not in names


def test_same_seed_same_parameters():
    a, b = cl.Transformer(cl.presets.deep_dive(), seed=5), cl.Transformer(cl.presets.deep_dive(), seed=5)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    c = cl.Transformer(cl.presets.deep_dive(), seed=6)
    assert not np.array_equal(a.params["tok_emb"], c.params["tok_emb"])


def test_forward_shapes_and_cache(batch):
    tokens, targets = batch
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    logits = model.forward(tokens)
    assert logits.shape == (4, 8, 20)
    att = model.cache["blocks.1.attn.weights"]
    assert att.shape == (4, 4, 8, 8)
    np.testing.assert_allclose(att.sum(-1), 1.0, rtol=1e-5)
    loss = model.loss(tokens, targets)
    assert loss == pytest.approx(-np.mean(np.log(
        np.exp(logits[:, -1] - logits[:, -1].max(-1, keepdims=True)).T
        / np.exp(logits[:, -1] - logits[:, -1].max(-1, keepdims=True)).sum(-1)).T[np.arange(4), targets[:, -1]]),
        rel=1e-5)


def test_untrained_loss_is_near_chance(data):
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    loss = model.loss(*data["val"])
    assert abs(loss - np.log(20)) < 1.0


def test_only_scored_positions_change_the_loss(batch):
    tokens, targets = batch
    model = cl.Transformer(small_config(), seed=0)
    full = model.forward(tokens)
    loss = model.loss(tokens, targets)
    z = full[:, -1].astype(np.float64)
    ref = np.mean(np.log(np.exp(z).sum(-1)) - z[np.arange(len(z)), targets[:, -1]])
    assert loss == pytest.approx(ref, rel=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_recompute_gives_identical_gradients(norm, batch):
    cfg = cl.presets.deep_dive(norm=norm, activation="gelu")
    stored, recomputed = cl.Transformer(cfg, seed=3), cl.Transformer(cfg, seed=3, recompute=True)
    assert stored.loss(*batch) == recomputed.loss(*batch)
    g1, g2 = stored.backward(), recomputed.backward()
    for k in g1:
        np.testing.assert_array_equal(g1[k], g2[k], err_msg=k)
    assert "blocks.0.attn.weights" not in recomputed.cache


def test_backward_before_loss_is_refused(batch):
    model = cl.Transformer(small_config())
    with pytest.raises(ValueError, match="call model.loss"):
        model.backward()
    model.forward(batch[0])
    with pytest.raises(ValueError, match="call model.loss"):
        model.backward()


@pytest.mark.parametrize("tokens, error, words", [
    (np.array([[1, 2, 25]]), ValueError, r"token id 25 .* allowed ids: 0..19"),
    (np.array([[1, -2, 3]]), ValueError, "token id -2"),
    (np.array([[1, 2], [3, 40]]), ValueError, r"token id 40 at position \(1, 1\)"),
    (np.array([[2 ** 64 - 1]], dtype=np.uint64), ValueError, "token id 18446744073709551615"),
    (np.array([[1.0, 2.0]]), TypeError, "must be integer ids"),
    (np.zeros((1, 9), dtype=int), ValueError, "exceeds the model's seq_len = 8"),
    (np.zeros((2, 3, 4), dtype=int), ValueError, r"shape \(batch, time\)"),
    (np.zeros((0, 8), dtype=int), ValueError, r"shape \(batch, time\)"),
])
def test_bad_tokens(tokens, error, words):
    model = cl.Transformer(small_config())
    with pytest.raises(error, match=words):
        model.forward(tokens)


@pytest.mark.parametrize("targets, error, words", [
    (np.zeros((4, 7), dtype=int), ValueError, "must match"),
    (np.full((4, 8), 20), ValueError, r"target 20 .* allowed: 0..19, or -100"),
    (np.full((4, 8), -100), ValueError, "nothing to score"),
    (np.where(np.arange(32).reshape(4, 8) == 19, -5, -100), ValueError, r"target -5 at position \(2, 3\)"),
    (np.zeros((4, 8)), TypeError, "integer"),
])
def test_bad_targets_change_nothing(targets, error, words, batch):
    model = cl.Transformer(small_config())
    model.loss(*batch)
    before = {k: v.copy() for k, v in model.params.items()}
    grads_before = model.backward()
    with pytest.raises(error, match=words):
        model.loss(batch[0], targets)
    assert all(np.array_equal(before[k], model.params[k]) for k in before)
    after = model.backward()          # the previous loss is still the one backward sees
    assert all(np.array_equal(grads_before[k], after[k]) for k in after)


def test_transformer_needs_a_config():
    with pytest.raises(TypeError, match="ModelConfig"):
        cl.Transformer({"d_model": 64})


@pytest.mark.parametrize("norm, activation, positional, causal, tied", SWITCHES[::3])
def test_fast_and_simple_paths_agree(norm, activation, positional, causal, tied, batch):
    cfg = small_config(norm=norm, activation=activation, positional=positional, causal=causal,
                       tie_embeddings=tied, attn_bias=True, dtype="float64")
    fast, simple = cl.Transformer(cfg, seed=4), cl.Transformer(cfg, seed=4, backend="numpy")
    np.testing.assert_allclose(fast.forward(batch[0]), simple.forward(batch[0]), rtol=1e-12, atol=1e-13)
    assert fast.loss(*batch) == pytest.approx(simple.loss(*batch), rel=1e-13)
    g_fast, g_simple = fast.backward(), simple.backward()
    for k in g_fast:
        np.testing.assert_allclose(g_fast[k], g_simple[k], rtol=1e-10, atol=1e-13, err_msg=k)


def test_simple_path_is_exact_too(batch):
    model = cl.Transformer(small_config(norm="pre", activation="gelu", causal=True), seed=1, backend="numpy")
    report = check_model(model, *batch, max_elements=10)
    assert max(report.values()) < 1e-6, report
    with pytest.raises(ValueError, match="allowed: numba, numpy"):
        cl.Transformer(small_config(), backend="torch")


@pytest.mark.parametrize("overrides", [dict(), dict(norm="pre"), dict(use_attention=False), dict(n_layers=0),
                                       dict(n_layers=1, tie_embeddings=True)])
def test_loss_computes_the_last_block_only_where_scored(overrides, batch):
    """Scoring only some positions gives the same loss and gradients as scoring all of them
    with the others' contributions left out."""
    cfg = small_config(dtype="float64", activation="gelu", **overrides)
    tokens, targets = batch
    model = cl.Transformer(cfg, seed=5)
    loss = model.loss(tokens, targets)
    grads = model.backward()
    simple = cl.Transformer(cfg, seed=5, backend="numpy")
    assert simple.loss(tokens, targets) == pytest.approx(loss, rel=1e-13)
    logits = model.forward(tokens)[:, -1]
    ref = np.mean(np.log(np.exp(logits).sum(-1)) - logits[np.arange(len(logits)), targets[:, -1]])
    assert loss == pytest.approx(ref, rel=1e-12)
    report = check_model(model, tokens, targets, max_elements=6)
    assert max(report.values()) < 1e-6, report
    assert all(np.all(np.isfinite(g)) for g in grads.values())


def test_scored_logits_are_the_forward_logits_at_the_scored_positions(batch):
    """What evaluate() reads: the logits of forward() at targets != -100, in row order, and those targets."""
    cfg = small_config(dtype="float64")
    tokens, targets = batch
    targets = targets.copy()
    targets[0, 1] = 3                  # a second scored position in the first row
    model = cl.Transformer(cfg, seed=2)
    logits, scored = model.scored_logits(tokens, targets)
    where = targets != cl.kernels.IGNORE
    np.testing.assert_allclose(logits, model.forward(tokens)[where], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(scored, targets[where])


@pytest.mark.parametrize("tied", [False, True])
def test_token_gradient_of_used_and_unused_rows(tied, batch):
    """Every row of dE, of a token in the batch or not, matches the numerical gradient; an unused
    row gets only the tied head's share (exactly 0 when untied)."""
    model = cl.Transformer(small_config(dtype="float64", vocab_size=64, tie_embeddings=tied), seed=3)
    tokens, targets = batch
    assert tokens.size < 64
    model.loss(tokens, targets)
    d_tok = model.backward()["tok_emb"]
    rows = np.concatenate([np.unique(tokens), [40, 63]])        # every used token, and two unused ones
    idx = (rows[:, None] * 16 + np.arange(16)).ravel()
    num = numerical_gradient(lambda: model.loss(tokens, targets), model.params["tok_emb"], 1e-5, idx)
    assert rel_error(d_tok.reshape(-1)[idx], num) < 1e-6
    assert np.any(d_tok[rows[-2:]] != 0) == tied
