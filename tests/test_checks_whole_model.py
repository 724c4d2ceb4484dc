"""Checkers of notebook 10 (backprop II, the whole model): they pass the reference solutions and
reject realistic learner bugs with a hint that names the bug."""
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import whole_model as wm

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "10_backprop_whole_model.ipynb"


def _solutions():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    ns = {"np": np, "cl": cl}
    for c in nb.cells:
        if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source:
            exec(compile(c.source, str(NOTEBOOK), "exec"), ns)
    return ns["block_backward"], ns["model_backward"]


block_backward, model_backward = _solutions()


def run(check, fn, capsys):
    result = check(fn)
    return result, capsys.readouterr().out


def assert_rejects(check, fn, capsys, hint_part, stage=None):
    result, out = run(check, fn, capsys)
    assert not result.passed and result.done, out
    if stage:
        assert result.stage == stage, (result.stage, out)
    assert result.hint and hint_part in result.hint, (result.hint, out)
    assert "Traceback" not in out


def test_exported():
    for name in wm.__all__:
        assert getattr(cl.checks, name) is getattr(wm, name)


def test_reference_formulas_equal_course_lib_block():
    dy, cache, params = wm._block_case(7, 2, 5, 8, 2, 16)
    dx, g = wm._block_backward(dy, cache, params)
    cfg = cl.ModelConfig(vocab_size=20, seq_len=5, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                         dtype="float64")
    from course_lib.block import Block
    block = Block(0, cfg, {"blocks.0." + k: v for k, v in params.items()}, cl.kernels)
    grads = {}
    ref = block.backward(dy, cache, grads)
    np.testing.assert_allclose(dx, ref, rtol=1e-10, atol=1e-12)
    for k in params:
        np.testing.assert_allclose(g[k], grads["blocks.0." + k], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("check, fn", [(cl.checks.check_block_backward, block_backward),
                                       (cl.checks.check_model_backward, model_backward)])
def test_reference_passes(check, fn, capsys):
    result, out = run(check, fn, capsys)
    assert result.passed, out


def _block_variant(**kw):
    def fn(dy, cache, params):
        return wm._block_backward(dy, cache, params, **kw)
    return fn


def test_block_loop_version_passes(capsys):
    assert run(cl.checks.check_block_backward, _block_variant(), capsys)[0].passed


@pytest.mark.parametrize("kw, hint", [
    (dict(skip_ffn=False), "skip path is missing"),
    (dict(skip_attn=False), "skip path is missing"),
    (dict(skip_ffn=False, skip_attn=False), "both residuals"),
    (dict(skip_gets_dy=True), "OUT of the LayerNorm"),
    (dict(pre_order=True), "pre-LN order"),
    (dict(swap_ln=True), "swapped"),
    (dict(paths="qv"), "path through K is missing"),
    (dict(paths="v"), "only the path through V"),
    (dict(wo_transposed=False), "transpose"),
])
def test_block_rejects(kw, hint, capsys):
    assert_rejects(cl.checks.check_block_backward, _block_variant(**kw), capsys, hint)


def test_block_swapped_names(capsys):
    def fn(dy, cache, params):
        dx, g = block_backward(dy, cache, params)
        g["attn.w_q"], g["attn.w_k"] = g["attn.w_k"], g["attn.w_q"]
        return dx, g
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "holds the gradient of")


def test_block_in_place(capsys):
    def fn(dy, cache, params):
        out = block_backward(dy, cache, params)
        cache["ffn.h"][...] = 0
        return out
    result, out = run(cl.checks.check_block_backward, fn, capsys)
    assert not result.passed and "cache['ffn.h']" in out

    def fn2(dy, cache, params):
        out = block_backward(dy, cache, params)
        dy[...] = 0
        return out
    result, out = run(cl.checks.check_block_backward, fn2, capsys)
    assert not result.passed and "`dy`" in out


def test_block_float32_named(capsys):
    def f32(d):
        return {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                else v for k, v in d.items()}

    def fn(dy, cache, params):       # the whole computation in float32
        return block_backward(dy.astype(np.float32), f32(cache), f32(params))
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "dtype problem")


@pytest.mark.parametrize("ret", [None, "dx", (np.zeros(3), {})])
def test_block_odd_returns(ret, capsys):
    result, out = run(cl.checks.check_block_backward, lambda dy, c, p: ret, capsys)
    assert not result.passed and result.stage == "returns" and "Traceback" not in out


@pytest.mark.parametrize("check", [cl.checks.check_block_backward, cl.checks.check_model_backward])
def test_stub_not_done(check, capsys):
    def stub(*a):
        raise NotImplementedError
    result, out = run(check, stub, capsys)
    assert not result.done and "not done yet" in out


def test_model_tied_missing_head_share(capsys):
    def fn(model):
        g = model_backward(model)
        if model.config.tie_embeddings:
            s = model._saved
            dl = cl.kernels.cross_entropy_backward(s["probs"], s["targets"])
            g["tok_emb"] = g["tok_emb"] - dl.T @ s["final"]
        return g
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "PLUS the head's share")


def test_model_missing_ln_f(capsys):
    def fn(model):
        return {k: v for k, v in model_backward(model).items() if not k.startswith("ln_f")}
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "ln_f")


def test_model_wrong_block_gradient_named(capsys):
    def fn(model):
        g = model_backward(model)
        g["blocks.0.ffn.w1"] = 2 * g["blocks.0.ffn.w1"]
        return g
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "blocks.0.ffn.w1")


def test_model_changes_params(capsys):
    def fn(model):
        g = model_backward(model)
        model.params["head.w"] -= 0.1 * g["head.w"] if "head.w" in g else 0
        return g
    result, out = run(cl.checks.check_model_backward, fn, capsys)
    assert not result.passed and "model.params" in out


def test_model_returns_none(capsys):
    result, out = run(cl.checks.check_model_backward, lambda m: None, capsys)
    assert not result.passed and "return grads" in (result.hint or "")
