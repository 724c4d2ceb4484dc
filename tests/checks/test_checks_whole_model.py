"""Checkers of notebook 10 (backprop II, the whole model): they pass the reference solutions and
reject realistic learner bugs with a hint that names the bug."""
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import whole_model as wm
from support import expect_reject, run_check

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "10_backprop_whole_model.ipynb"


def _solutions():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    ns = {"np": np, "cl": cl}
    for c in nb.cells:
        if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source:
            exec(compile(c.source, str(NOTEBOOK), "exec"), ns)
    return ns["block_backward"], ns["model_backward"]


block_backward, model_backward = _solutions()


def assert_rejects(check, fn, capsys, hint_part, stage=None):
    return expect_reject(check, fn, capsys=capsys, stage=stage, hint=hint_part)


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
    result, out = run_check(check, fn, capsys)
    assert result.passed, out


def _block_variant(**kw):
    """The checker's formulas with a mistake switched on (they know no scored rows)."""
    def fn(dy, cache, params, norm="post", activation="relu"):
        return wm._block_backward(dy, cache, params, **{"pre_order": norm == "pre", **kw})
    return fn


def test_block_formulas_pass_until_the_scored_rows(capsys):
    result, out = run_check(cl.checks.check_block_backward, _block_variant(), capsys)
    assert result.stage.startswith("the last block: only the scored rows"), out


@pytest.mark.parametrize("norm, rows", [("pre", None), ("post", [3, 7]), ("pre", [0, 5])])
def test_the_numpy_reference_equals_course_lib_block(norm, rows):
    """The reference of the pre-LN block and of the scored rows: Block.backward on the NumPy
    twins equals Block.backward on the compiled kernels, and the formulas where they apply."""
    from course_lib.block import Block
    dy, cache, params = wm._block_case(8, 2, 4, 8, 2, 16, norm=norm, rows=rows)
    dx, g = wm._numpy_block_backward(dy, cache, params, norm)
    cfg = wm._block_config(2, 4, 8, 2, 16, norm=norm)
    grads = {}
    ref = Block(0, cfg, {"blocks.0." + k: v for k, v in params.items()}, cl.kernels).backward(dy, cache, grads)
    np.testing.assert_allclose(dx, ref, rtol=1e-10, atol=1e-12)
    for k in params:
        np.testing.assert_allclose(g[k], grads["blocks.0." + k], rtol=1e-10, atol=1e-12)
    if rows is None:
        dx_formula, g_formula = wm._block_backward(dy, cache, params, pre_order=True)
        np.testing.assert_allclose(dx_formula, ref, rtol=1e-10, atol=1e-12)


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
    def fn(dy, cache, params, norm="post", activation="relu"):
        dx, g = block_backward(dy, cache, params, norm, activation)
        g["attn.w_q"], g["attn.w_k"] = g["attn.w_k"], g["attn.w_q"]
        return dx, g
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "holds the gradient of")


def test_block_in_place(capsys):
    def fn(dy, cache, params, norm="post", activation="relu"):
        out = block_backward(dy, cache, params, norm, activation)
        cache["ffn.h"][...] = 0
        return out
    result, out = run_check(cl.checks.check_block_backward, fn, capsys)
    assert not result.passed and "cache['ffn.h']" in out

    def fn2(dy, cache, params, norm="post", activation="relu"):
        out = block_backward(dy, cache, params, norm, activation)
        dy[...] = 0
        return out
    result, out = run_check(cl.checks.check_block_backward, fn2, capsys)
    assert not result.passed and "`dy`" in out


def test_block_float32_named(capsys):
    def f32(d):
        return {k: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                else v for k, v in d.items()}

    def fn(dy, cache, params, norm="post", activation="relu"):       # the whole computation in float32
        return block_backward(dy.astype(np.float32), f32(cache), f32(params), norm, activation)
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "dtype problem")


@pytest.mark.parametrize("ret", [None, "dx", (np.zeros(3), {})])
def test_block_odd_returns(ret, capsys):
    result, out = run_check(cl.checks.check_block_backward, lambda dy, c, p: ret, capsys)
    assert not result.passed and result.stage == "returns" and "Traceback" not in out


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
    result, out = run_check(cl.checks.check_model_backward, fn, capsys)
    assert not result.passed and "model.params" in out


def test_model_returns_none(capsys):
    result, out = run_check(cl.checks.check_model_backward, lambda m: None, capsys)
    assert not result.passed and "return grads" in (result.hint or "")


# ----- what the exercises rebuild is withheld while the learner's function runs ------------------

def test_block_backward_withheld(capsys):
    from course_lib.block import Block

    def fn(dy, cache, params, norm="post", activation="relu"):       # course_lib's block instead of the stations
        C, F = dy.shape[1], params["ffn.w1"].shape[1]
        B, T = cache["attn.qkv"].shape[:2]
        cfg = cl.ModelConfig(vocab_size=20, seq_len=T, d_model=C, n_heads=2, n_layers=1,
                             d_ff=F, dtype="float64")
        grads = {}
        dx = Block(0, cfg, {"blocks.0." + k: v for k, v in params.items()},
                   cl.kernels).backward(dy, cache, grads)
        return dx, {k[len("blocks.0."):]: v for k, v in grads.items()}
    original = Block.backward
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "write the stations yourself",
                   stage="returns")
    assert Block.backward is original


@pytest.mark.parametrize("body", [
    lambda m: m.backward(),
    lambda m: cl.Transformer.backward(m),
    lambda m: m._blocks_backward(None, 1, 1, m.saved, {}),
    lambda m: m._head_backward(None, m.saved["final"], {}),
])
def test_model_backward_withheld(body, capsys):
    from course_lib.model import Transformer
    originals = [Transformer.__dict__[n] for n in ("backward", "_head_backward",
                                                   "_blocks_backward")]
    assert_rejects(cl.checks.check_model_backward, body, capsys,
                   "model.backward is what you are rebuilding", stage="returns")
    assert [Transformer.__dict__[n] for n in ("backward", "_head_backward",
                                              "_blocks_backward")] == originals
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    model.loss(*cl.task.make_dataset([("Max", (1, 6, 2))]))
    assert "tok_emb" in model.backward()        # restored


# ----- named mistakes of the block ----------------------------------------------------------------

@pytest.mark.parametrize("gammas, hint", [
    ({"ln2": None}, "LN2's gamma is missing"),
    ({"ln1": None}, "LN1's gamma is missing"),
    ({"ln1": None, "ln2": None}, "both LayerNorms' gammas"),
    ({"ln2": "ln1"}, "LN2's backward uses ln1.gamma"),
    ({"ln1": "ln2"}, "LN1's backward uses ln2.gamma"),
    ({"ln1": "ln2", "ln2": "ln1"}, "gammas are swapped"),
])
def test_block_gamma_named(gammas, hint, capsys):
    fn = _block_variant(gammas=gammas)
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "gamma left out / wrong gamma")
    assert_rejects(cl.checks.check_block_backward, fn, capsys, hint)


def test_block_station_hint_names_layernorm_input_gradient():
    assert "LN2's input gradient (dr2" in wm._station_hint("ffn.w2")
    assert "LN1's input gradient (dr1" in wm._station_hint("attn.w_o")


def test_block_bug_after_ln_gamma_points_to_dr2(capsys):
    # LN2's gamma left out, and dx wrong in another way too
    def fn(dy, cache, params, norm="post", activation="relu"):
        dx, g = wm._block_backward(dy, cache, params, gammas={"ln2": None})
        return dx + 1.0, g
    assert_rejects(cl.checks.check_block_backward, fn, capsys,
                   "grads['ffn.w2']: the bug sits at LN2's input gradient (dr2, check its gamma)")


@pytest.mark.parametrize("order", ["qvk", "kqv", "vkq"])
def test_block_wqkv_order_named(order, capsys):
    assert_rejects(cl.checks.check_block_backward, _block_variant(qkv_order=order), capsys,
                   "[W_q | W_k | W_v] in that order (or use cache['attn.w_qkv'])")


def test_block_wqkv_built_qvk_in_code(capsys):
    # the learner stacks W_qkv by hand, in the order Q | V | K
    def fn(dy, cache, params, norm="post", activation="relu"):
        c = dict(cache)
        c["attn.w_qkv"] = np.concatenate([params["attn.w_q"], params["attn.w_v"],
                                          params["attn.w_k"]], axis=1)
        return block_backward(dy, c, params, norm, activation)
    assert_rejects(cl.checks.check_block_backward, fn, capsys, "[W_q | W_k | W_v]")


# ----- named mistakes of the whole model ------------------------------------------------------

def _own_block(model, i, dx, grads):
    """Block i's backward by the notebook's block_backward (10.3 runs the learner's), its gradients
    put into grads under the model's names."""
    prefix = f"blocks.{i}."
    short = {n[len(prefix):]: v for n, v in model.params.items() if n.startswith(prefix)}
    dx, g = block_backward(dx, model.saved["blocks"][i], short, model.config.norm,
                          model.config.activation)
    grads.update({prefix + n: v for n, v in g.items()})
    return dx


def test_model_backward_order_by_station():
    post, gpt = wm._models()
    order = wm._backward_order(cl.Transformer(post))
    b1 = [n[len("blocks.1."):] for n in order if n.startswith("blocks.1.")]
    assert b1[:2] == ["ln2.gamma", "ln2.beta"] and b1[2:6] == ["ffn.w2", "ffn.b2", "ffn.w1",
                                                                "ffn.b1"]
    assert b1[6:8] == ["ln1.gamma", "ln1.beta"] and b1[8] == "attn.w_o"
    assert order[:2] == ["head.w", "head.b"] and order[-1] == "tok_emb"
    order = wm._backward_order(cl.Transformer(gpt))
    b1 = [n[len("blocks.1."):] for n in order if n.startswith("blocks.1.")]
    assert b1[0] == "ffn.w2" and b1[4:6] == ["ln2.gamma", "ln2.beta"]
    assert b1[6] == "attn.w_o" and b1[-2:] == ["ln1.gamma", "ln1.beta"]
    assert order[:2] == ["ln_f.gamma", "ln_f.beta"] and order[-2:] == ["pos_emb", "tok_emb"]
    assert sorted(order) == sorted(cl.Transformer(gpt).params)


def test_model_ln_bug_reported_at_its_station(capsys):
    def fn(model):    # block 1's attn.w_o and ln2.beta wrong: LN2 comes first going back
        g = model_backward(model)
        for k in g:
            if k.startswith("blocks.1.") and k.endswith("attn.w_o"):
                g[k] = g[k] + 1.0
            if k == "blocks.1.ln2.beta":
                g[k] = g[k] + 1.0
        return g
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "grads['blocks.1.ln2.beta']")


def _tied_share_transposed(model):
    k, p, cfg, s = model.kernels, model.params, model.config, model.saved
    if not cfg.tie_embeddings:
        return model_backward(model)
    grads = {}
    dlogits = k.cross_entropy_backward(s["probs"], s["targets"])
    head_share = s["final"].T @ dlogits                               # (C, V): transposed
    dx = dlogits @ p["tok_emb"]
    dx, grads["ln_f.gamma"], grads["ln_f.beta"] = k.layernorm_backward(
        dx, s["ln_f.xhat"], s["ln_f.rstd"], p["ln_f.gamma"])
    for i in reversed(range(cfg.n_layers)):
        dx = _own_block(model, i, dx, grads)
    B, T = s["tokens"].shape
    d_tok, d_pos = k.embedding_backward(s["tokens"], dx.reshape(B, T, -1), cfg.vocab_size)
    grads["tok_emb"] = d_tok + head_share
    grads["pos_emb"] = np.zeros_like(p["pos_emb"])
    grads["pos_emb"][:T] = d_pos
    return grads


def test_model_tied_share_transposed(capsys):
    assert_rejects(cl.checks.check_model_backward, _tied_share_transposed, capsys,
                   "the head's share must be in E's (V, C) layout: dlogits^T x")


def test_model_tied_share_transposed_returned(capsys):
    def fn(model):
        g = model_backward(model)
        if model.config.tie_embeddings:
            s = model.saved
            dl = cl.kernels.cross_entropy_backward(s["probs"], s["targets"])
            g["tok_emb"] = s["final"].T @ dl
        return g
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "E's (V, C) layout")


def test_model_dlogits_not_divided(capsys):
    def fn(model):                  # dlogits = p - onehot(y), by hand, without / M
        s = model.saved
        M = len(s["targets"])
        return {k: v * M for k, v in model_backward(model).items()}
    assert_rejects(cl.checks.check_model_backward, fn, capsys,
                   "divide by the number of scored rows", stage="returns")
    _, out = run_check(cl.checks.check_model_backward, fn, capsys)
    assert "M = 2" in out


def test_model_blocks_not_reversed(capsys):
    def fn(model):
        k, p, s = model.kernels, model.params, model.saved
        grads = {}
        dlogits = k.cross_entropy_backward(s["probs"], s["targets"])
        dx, grads["head.w"], grads["head.b"] = k.linear_backward(dlogits, s["final"],
                                                                 p["head.w"], True)
        for i in range(model.config.n_layers):                         # forward order
            dx = _own_block(model, i, dx, grads)
        return grads
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "reversed(blocks)", stage="returns")


def test_model_loop_over_stations_passes(capsys):
    def fn(model):                  # the same assembly written with a loop over the stations
        k, p, s = model.kernels, model.params, model.saved
        grads = {}
        dx = k.cross_entropy_backward(s["probs"], s["targets"])
        if model.config.tie_embeddings:
            share, dx = dx.T @ s["final"], dx @ p["tok_emb"]
        else:
            dx, grads["head.w"], db = k.linear_backward(dx, s["final"], p["head.w"],
                                                        "head.b" in p)
            if "head.b" in p:
                grads["head.b"] = db
        if "ln_f.gamma" in p:
            dx, grads["ln_f.gamma"], grads["ln_f.beta"] = k.layernorm_backward(
                dx, s["ln_f.xhat"], s["ln_f.rstd"], p["ln_f.gamma"])
        for i in range(len(model.blocks) - 1, -1, -1):
            dx = _own_block(model, i, dx, grads)
        B, T = s["tokens"].shape
        d_tok, d_pos = k.embedding_backward(s["tokens"], dx.reshape(B, T, -1),
                                            model.config.vocab_size)
        grads["tok_emb"] = d_tok + share if model.config.tie_embeddings else d_tok
        if "pos_emb" in p:
            grads["pos_emb"] = np.zeros_like(p["pos_emb"])
            grads["pos_emb"][:T] = d_pos
        return grads
    assert run_check(cl.checks.check_model_backward, fn, capsys)[0].passed


# ----- dtypes in the block: a float32 block gives float32 gradients, every gamma of the model checked -----

BLOCK32 = "a float32 block (the course model's dtype): float32 gradients"


def _solution_source(name):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return next(c.source for c in nb.cells
                if c.cell_type == "code" and f"def {name}(" in c.source and "### BEGIN" in c.source)


def _edited_solution(name, old, new):
    """The notebook's solution of `name` with one piece of its code replaced."""
    source = _solution_source(name)
    assert old in source
    namespace = {"np": np, "cl": cl, "block_backward": block_backward}   # 10.3 calls 10.2's
    exec(compile(source.replace(old, new), str(NOTEBOOK), "exec"), namespace)
    return namespace[name]


def test_block_float32_gradients_for_float64_inputs_fail(capsys):
    """Right to 7 digits, within the tolerance of 1e-6: failed as a dtype problem all the same."""
    def fn(dy, cache, params, norm="post", activation="relu"):
        dx, g = block_backward(dy, cache, params, norm, activation)
        return dx, {k: v.astype(np.float32) for k, v in g.items()}
    result = assert_rejects(cl.checks.check_block_backward, fn, capsys, "dtype problem",
                            stage="returns")
    assert "is float32, but the inputs are float64" in result.message


def test_kernels_name_the_dtypes_they_refuse():
    x32, w = np.ones((3, 4), np.float32), np.ones((4, 2))
    with pytest.raises(ValueError, match="linear_forward: x is float32 but w is float64"):
        cl.kernels.linear_forward(x32, w, None)
    with pytest.raises(ValueError, match="linear_backward: dy is float64 but x is float32"):
        cl.kernels.linear_backward(np.ones((3, 2)), x32, w, True)
    from course_lib.kernels._fast.blas import matmul
    with pytest.raises(ValueError, match="matmul: a is float64 but b is float32"):
        matmul(w.T, x32.T)
    qkv = np.ones((1, 2, 6))
    with pytest.raises(ValueError, match="dout is float32, qkv float64 and att float64"):
        cl.kernels.attention_backward(np.ones((1, 2, 2), np.float32), qkv, np.ones((1, 1, 2, 2)))


def test_block_mixed_dtypes_get_a_dtype_hint(capsys):
    """A float32 array among float64 ones reaches a kernel: the hint names the dtypes, not
    "print intermediate shapes"."""
    fn = _edited_solution("block_backward", 'cache["ffn.a"], p["ffn.w2"]',
                          'cache["ffn.a"].astype(np.float32), p["ffn.w2"]')
    result = assert_rejects(cl.checks.check_block_backward, fn, capsys,
                            "your inputs are float64, so an array your function made is float32",
                            stage="returns")
    assert "linear_backward: dy is float64 but x is float32" in result.message
    assert "shapes" not in result.hint


def test_block_float64_array_in_a_float32_block_is_named(capsys):
    """np.zeros without dtype= is float64: harmless in float64, named in the float32 block."""
    fn = _edited_solution("block_backward", "dm = ffn(dr2) + dr2", "dm = ffn(dr2) + dr2 + np.zeros(dr2.shape)")
    result = assert_rejects(cl.checks.check_block_backward, fn, capsys,
                            "your inputs are float32, so an array your function made is float64",
                            stage=BLOCK32)
    assert "np.zeros(n)" in result.hint and "dtype=" in result.hint


def test_block_float64_result_of_a_float32_block_is_named(capsys):
    fn = _edited_solution("block_backward", "dx = add_skip(attention(dr1), dr1)",
                          "dx = add_skip(attention(dr1), dr1) / np.sqrt(1.0)")
    result = assert_rejects(cl.checks.check_block_backward, fn, capsys, "np.sqrt(D)", stage=BLOCK32)
    assert result.message == "dx is float64, but the block is float32"


def test_model_gamma_left_out_of_ln_f_is_named(capsys):
    """Every gamma of the checker's models is away from 1, ln_f's too: leaving it out fails."""
    fn = _edited_solution("model_backward", 's["ln_f.rstd"], p["ln_f.gamma"]',
                          's["ln_f.rstd"], np.ones_like(p["ln_f.gamma"])')
    result = assert_rejects(cl.checks.check_model_backward, fn, capsys,
                            "ln_f's backward leaves out gamma",
                            stage="a GPT-2 style model (pre-LN, GELU, ln_f, causal, tied head, learned positions)")
    assert "blocks.1" in result.message


def test_model_float32_gradients_of_a_float64_model_fail(capsys):
    def fn(model):
        return {k: v.astype(np.float32) for k, v in model_backward(model).items()}
    result = assert_rejects(cl.checks.check_model_backward, fn, capsys, "dtype problem",
                            stage="returns")
    assert "but the model is float64" in result.message


# ----- 10.2 for both placements and the scored rows; 10.3 on the learner's block -------------------

PRE = "pre-LN blocks, norm='pre' (GPT-2's placement)"
ROWS = "the last block: only the scored rows (cache['rows'], one per sequence)"


def _rows_ignored(dy, cache, params, norm="post", activation="relu"):
    """The scored rows read as if the block had kept every row."""
    return block_backward(dy, {**cache, "rows": None}, params, norm, activation)


def _only_at_rows(dy, cache, params, norm="post", activation="relu"):
    dx, g = block_backward(dy, cache, params, norm, activation)
    if cache["rows"] is not None:
        kept = np.zeros_like(dx)
        kept[cache["rows"]] = dx[cache["rows"]]
        dx = kept
    return dx, g


def _negated(dy, cache, params, norm="post", activation="relu"):
    dx, g = block_backward(dy, cache, params, norm, activation)
    return -dx, g


def _first_sequence_w_v(dy, cache, params, norm="post", activation="relu"):
    dx, g = block_backward(dy, cache, params, norm, activation)
    T = cache["attn.qkv"].shape[1]
    rows = np.arange(len(dy)) if cache["rows"] is None else np.asarray(cache["rows"])
    _, first = block_backward(dy * (rows < T)[:, None], cache, params, norm, activation)
    return dx, {**g, "attn.w_v": first["attn.w_v"]}


def _pre_without_ffn_skip(dy, cache, params, norm="post", activation="relu"):
    if norm == "post":
        return block_backward(dy, cache, params, norm, activation)
    return wm._block_backward(dy, cache, params, pre_order=True, skip_ffn=False)   # ReLU's only


@pytest.mark.parametrize("fn, stage, hint", [
    (lambda dy, cache, params: block_backward(dy, cache, params), PRE, "the fourth argument"),
    (lambda dy, cache, params, norm="post": block_backward(dy, cache, params), PRE,
     "this is the post-LN backward"),
    (_pre_without_ffn_skip, PRE, "the FFN's skip path is missing"),
    (lambda dy, cache, params, norm="post", activation="relu": block_backward(dy, cache, params, norm),
     "a GELU block, activation='gelu' (GPT-2's FFN), pre-LN and at the scored rows", "this is ReLU's backward"),
    (_rows_ignored, ROWS, "k.attention_rows_backward"),
    (_only_at_rows, ROWS, "right at the scored rows only"),
    (_negated, "small post-LN block (B=1, T=3, C=4, 2 heads)", "wrong sign"),
    (_first_sequence_w_v, "random post-LN blocks", "the first sequence's share alone"),
])
def test_block_placement_rows_and_sums_named(fn, stage, hint, capsys):
    assert_rejects(cl.checks.check_block_backward, fn, capsys, hint, stage=stage)


def _model_with(block):
    """The notebook's model_backward, its blocks run by `block` in place of the notebook's."""
    source = _solution_source("model_backward")
    namespace = {"np": np, "cl": cl, "block_backward": block}
    exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    return namespace["model_backward"]


def test_model_names_a_wrong_block_backward_as_10_2s(capsys):
    result = assert_rejects(cl.checks.check_model_backward, _model_with(_negated), capsys,
                            "fix Exercise 10.2 first",
                            stage="first, the block_backward of Exercise 10.2 that model_backward calls")
    assert "the check of Exercise 10.2 fails" in result.message


def test_model_on_course_libs_block_is_a_library_call(capsys):
    def fn(model):
        grads = {}
        for block, saved in reversed(list(zip(model.blocks, model.saved["blocks"]))):
            block.backward(np.zeros(saved["output"].shape), saved, grads)
        return model_backward(model)
    result, out = run_check(cl.checks.check_model_backward, fn, capsys)
    assert result.status == "library call" and "run your own block_backward" in result.hint, out


@pytest.mark.parametrize("wrong, hint", [
    (lambda dl: dl[0], "not the first"),
    (lambda dl: dl.mean(axis=0), "not their mean"),
])
def test_model_head_bias_not_summed_named(wrong, hint, capsys):
    def fn(model):
        g = model_backward(model)
        if "head.b" in g:
            s = model.saved
            g["head.b"] = wrong(cl.kernels.cross_entropy_backward(s["probs"], s["targets"]))
        return g
    assert_rejects(cl.checks.check_model_backward, fn, capsys, hint, stage="returns")


def test_model_dlogits_negated_named(capsys):
    def fn(model):
        return {k: -v for k, v in model_backward(model).items()}
    assert_rejects(cl.checks.check_model_backward, fn, capsys, "onehot(y) - p", stage="returns")


def test_model_float64_gradients_of_a_float32_model_fail(capsys):
    """The same dtype rule as 10.2's: a float32 model's gradients are float32."""
    def fn(model):
        return {k: v.astype(np.float64) for k, v in model_backward(model).items()}
    result = assert_rejects(cl.checks.check_model_backward, fn, capsys, "dtype problem",
                            stage="a float32 model (the course model's dtype): float32 gradients")
    assert "is float64, but the model is float32" in result.message
