import pytest

import course_lib as cl


def test_deep_dive_preset():
    cfg = cl.presets.deep_dive()
    assert (cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff) == (20, 8, 64, 4, 2, 256)
    assert (cfg.norm, cfg.activation, cfg.positional, cfg.causal, cfg.tie_embeddings) == \
        ("post", "relu", "sinusoidal", False, False)
    assert cfg.d_head == 16


def test_gpt2_preset_and_overrides():
    cfg = cl.presets.gpt2()
    assert (cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff) == \
        (50257, 1024, 768, 12, 12, 3072)
    assert (cfg.norm, cfg.activation, cfg.positional, cfg.causal, cfg.tie_embeddings, cfg.attn_bias) == \
        ("pre", "gelu", "learned", True, True, True)
    small = cl.presets.gpt2(vocab_size=512, d_model=256, n_heads=8, n_layers=4, d_ff=1024, seq_len=128)
    assert small.d_model == 256 and small.norm == "pre"


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(d_model=64, n_heads=5), ValueError, "divisible by n_heads"),
    (dict(norm="middle"), ValueError, "allowed: post, pre"),
    (dict(activation="tanh"), ValueError, "allowed: relu, gelu"),
    (dict(positional="rotary"), ValueError, "allowed: sinusoidal, learned"),
    (dict(d_model=0), ValueError, "positive integer"),
    (dict(vocab_size=-3), ValueError, "positive integer"),
    (dict(d_ff=2.5), ValueError, "positive integer"),
    (dict(dtype="float16"), ValueError, "allowed: float32, float64"),
    (dict(causal="yes"), TypeError, "True or False"),
    (dict(ln_eps=0), ValueError, "positive finite number"),
])
def test_bad_config_says_what_is_wrong(kwargs, error, words):
    with pytest.raises(error, match=words):
        cl.ModelConfig(**kwargs)


def test_replace_rejects_unknown_field():
    with pytest.raises(TypeError, match="unknown ModelConfig field"):
        cl.presets.deep_dive(d_modle=32)


def test_ln_eps_must_be_finite_and_a_huge_d_model_is_refused_quickly():
    with pytest.raises(ValueError, match="positive finite"):
        cl.ModelConfig(ln_eps=float("inf"))
    with pytest.raises(ValueError, match=r": n_heads can be 1, 2, 4, 8, 16, 32 or 64 \(or a larger divisor of "
                                         r"1099511627776\)$"):
        cl.ModelConfig(d_model=2**40, n_heads=3)
