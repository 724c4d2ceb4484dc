"""The same model in PyTorch: logits, loss, gradients and optimiser steps agree."""
import numpy as np
import pytest

import course_lib as cl
from support import small_config

try:
    import torch
    from course_lib.torch_reference import TorchTransformer
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")


def assert_loss_and_gradients_match(model, ref, tokens, targets):
    """Loss to 1e-12 and every gradient to 1e-8 (float64)."""
    loss = model.loss(tokens, targets)
    t_loss = ref.loss(tokens, targets)
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=1e-12)
    grads, t_grads = model.backward(), ref.grads()
    for k in grads:
        np.testing.assert_allclose(grads[k], t_grads[k], rtol=1e-8, atol=1e-12, err_msg=k)


@needs_torch
@pytest.mark.parametrize("overrides", [
    dict(),
    dict(norm="pre", activation="gelu", positional="learned", causal=True, tie_embeddings=True, attn_bias=True),
    dict(causal=True, tie_embeddings=True),
    dict(norm="pre", positional="learned", head_bias=False),
])
def test_logits_loss_and_gradients_match_pytorch(overrides, batch):
    cfg = small_config(dtype="float64", **overrides)
    model = cl.Transformer(cfg, seed=4)
    ref = TorchTransformer(model)
    tokens, targets = batch
    np.testing.assert_allclose(model.forward(tokens), ref.forward(tokens).detach().numpy(), rtol=1e-10, atol=1e-12)
    assert_loss_and_gradients_match(model, ref, tokens, targets)


@needs_torch
def test_course_model_in_float32_matches_pytorch(batch):
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    ref = TorchTransformer(model)
    loss = model.loss(*batch)
    t_loss = ref.loss(*batch)
    t_loss.backward()
    assert loss == pytest.approx(t_loss.item(), rel=1e-5)
    grads, t_grads = model.backward(), ref.grads()
    for k in grads:
        assert cl.gradcheck.rel_error(grads[k], t_grads[k]) < 1e-5, k


@needs_torch
@pytest.mark.parametrize("name, kwargs", [
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
])
def test_optimisers_match_pytorch(name, kwargs):
    rng = np.random.default_rng(0)
    p = {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}
    tp = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in p.items()}
    opt = getattr(cl.optim, name)(p, **kwargs)
    t_opt = getattr(torch.optim, name)(list(tp.values()), **kwargs)
    for _ in range(5):
        g = {k: rng.standard_normal(v.shape) for k, v in p.items()}
        for k in tp:
            tp[k].grad = torch.tensor(g[k])
        opt.step(g)
        t_opt.step()
    for k in p:
        np.testing.assert_allclose(p[k], tp[k].detach().numpy(), rtol=1e-10, err_msg=k)


@needs_torch
def test_long_sequences_gpt2_style_match_pytorch():
    """T >= BLAS_MIN_T takes the BLAS attention path; every position scored (next-token targets)."""
    cfg = cl.presets.gpt2(vocab_size=30, seq_len=40, d_model=16, n_heads=2, n_layers=2, d_ff=32, dtype="float64")
    model = cl.Transformer(cfg, seed=6)
    ref = TorchTransformer(model)
    data = np.random.default_rng(0).integers(0, 30, (2, 41))
    assert_loss_and_gradients_match(model, ref, data[:, :-1], data[:, 1:])


@needs_torch
@pytest.mark.parametrize("causal", [False, True])
def test_the_sdpa_anchor_computes_the_same_model(causal, batch):
    """The benchmarks' second PyTorch anchor (F.scaled_dot_product_attention) is the same model."""
    cfg = small_config(dtype="float64", causal=causal, norm="pre", activation="gelu", attn_bias=True)
    model = cl.Transformer(cfg, seed=2)
    assert_loss_and_gradients_match(model, TorchTransformer(model, attention="sdpa"), *batch)
    with pytest.raises(ValueError, match="'manual' or 'sdpa'"):
        TorchTransformer(model, attention="flash")
