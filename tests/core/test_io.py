import os
import numpy as np
import pytest

import course_lib as cl
from course_lib import io
from support import files_that_are_not_models, small_config


def trained(batch, optimizer="Adam"):
    model = cl.Transformer(small_config(norm="pre", positional="learned", tie_embeddings=True), seed=0)
    opt = getattr(cl.optim, optimizer)(model.params, lr=1e-2)
    for _ in range(3):
        model.loss(*batch)
        opt.step(model.backward())
    return model, opt


@pytest.mark.parametrize("optimizer", ["Adam", "AdamW", "SGD"])
def test_round_trip_is_bit_exact_with_optimiser_state(tmp_path, batch, optimizer):
    model, opt = trained(batch, optimizer)
    path = tmp_path / "m.npz"
    io.save(model, path, optimizer=opt, extra={"step": 3})
    model2, opt2, extra = io.load_checkpoint(path)
    assert model2.config == model.config and extra == {"step": 3}
    for k in model.params:
        assert model2.params[k].tobytes() == model.params[k].tobytes()
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s1["t"] == s2["t"] and s1["hparams"] == s2["hparams"]
    for key in s1["arrays"]:
        for k in s1["arrays"][key]:
            assert s1["arrays"][key][k].tobytes() == s2["arrays"][key][k].tobytes()
    # training continues identically
    for m, o in ((model, opt), (model2, opt2)):
        m.loss(*batch)
        o.step(m.backward())
    assert all(np.array_equal(model.params[k], model2.params[k]) for k in model.params)


def test_load_gives_a_working_model(tmp_path, batch):
    model, _ = trained(batch)
    io.save(model, tmp_path / "m.npz")
    loaded = io.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.forward(batch[0]), model.forward(batch[0]))


def test_interrupted_save_keeps_the_earlier_file(tmp_path, batch, monkeypatch):
    model, _ = trained(batch)
    path = tmp_path / "m.npz"
    io.save(model, path)
    good = path.read_bytes()

    def broken_savez(f, **arrays):
        f.write(b"half a file")
        raise KeyboardInterrupt
    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(KeyboardInterrupt):
        io.save(model, path)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_load_refuses_pickles_and_strangers(tmp_path):
    evil = tmp_path / "evil.npz"
    np.savez(evil, format=np.array("course_lib/1"), config=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="not a course_lib model file"):
        io.load(evil)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ValueError, match="not a course_lib model file"):
        io.load(other)
    with pytest.raises(FileNotFoundError, match="no saved model"):
        io.load(tmp_path / "missing.npz")



NOT_MODELS = ["objects.npy", "objects_npy.npz", "objects.npz", "text.npz", "empty.npz", "zip.npz", "pickle.npz",
              "folder.npz"]


@pytest.mark.parametrize("load", [io.load, io.load_checkpoint], ids=["load", "load_checkpoint"])
@pytest.mark.parametrize("name", NOT_MODELS)
def test_a_file_that_is_not_a_model_is_named_and_what_it_is_not_said_never_allow_pickle(tmp_path, load, name):
    path, says = files_that_are_not_models(tmp_path)[name]
    with pytest.raises(io.CheckpointError) as refused:
        load(path)
    message = str(refused.value)
    assert message.startswith(repr(str(path))) and says in message, message
    assert "allow_pickle" not in message and "\n" not in message, message


def test_every_load_refuses_pickles(tmp_path, monkeypatch):
    """np.load is never asked to unpickle, whatever the file."""
    calls, real = [], np.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("allow_pickle", False))
        return real(*args, **kwargs)
    monkeypatch.setattr(np, "load", spy)
    for path, _ in files_that_are_not_models(tmp_path).values():
        with pytest.raises(io.CheckpointError):
            io.load_checkpoint(path)
    io.save(cl.Transformer(small_config()), tmp_path / "m.npz")
    io.load_checkpoint(tmp_path / "m.npz")
    assert calls and not any(calls)


# ----- files that do not fit: one error type, naming the file and the problem ----------------------

def raw(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def rewrite(src, dst, **changes):
    """Copy the checkpoint at src to dst with arrays changed (a value of None deletes the array).
    Keys use '__' for '/' and '_DOT_' for '.': param__head_DOT_b is 'param/head.b'."""
    arrays = raw(src)
    for key, value in changes.items():
        key = key.replace("__", "/").replace("_DOT_", ".")
        if value is None:
            del arrays[key]
        else:
            arrays[key] = value
    np.savez(dst, **arrays)
    return dst


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny model with Adam state, and the same model alone; float32, V = 20."""
    folder = tmp_path_factory.mktemp("ckpt")
    model = cl.Transformer(small_config(), seed=0)
    opt = cl.optim.Adam(model.params)
    io.save(model, folder / "with_opt.npz", opt, extra={"val_acc": 0.5})
    io.save(model, folder / "model_only.npz")
    return folder


def test_shape_that_does_not_fit_the_config_is_refused(saved, tmp_path):
    bad = rewrite(saved / "model_only.npz", tmp_path / "short_head.npz", param__head_DOT_b=np.zeros(10, np.float32))
    with pytest.raises(io.CheckpointError,
                       match=r"short_head\.npz.*'head\.b' has shape \(10,\), its config needs \(20,\)"):
        io.load(bad)


def test_dtype_is_checked_not_cast(saved, tmp_path):
    w = raw(saved / "model_only.npz")["param/head.w"].astype(np.int64)
    bad = rewrite(saved / "model_only.npz", tmp_path / "ints.npz", param__head_DOT_w=w)
    with pytest.raises(io.CheckpointError, match=r"ints\.npz.*'head\.w' has dtype int64, its config needs float32"):
        io.load(bad)
    w64 = raw(saved / "model_only.npz")["param/head.w"].astype(np.float64)
    bad = rewrite(saved / "model_only.npz", tmp_path / "f64.npz", param__head_DOT_w=w64)
    with pytest.raises(io.CheckpointError, match="dtype float64"):
        io.load(bad)


def test_missing_and_unexpected_names_are_refused(saved, tmp_path):
    src = saved / "model_only.npz"
    with pytest.raises(io.CheckpointError, match=r"missing 'head\.b'"):
        io.load(rewrite(src, tmp_path / "a.npz", param__head_DOT_b=None))
    with pytest.raises(io.CheckpointError, match=r"unexpected 'blocks\.9\.ffn\.w1'"):
        io.load(rewrite(src, tmp_path / "b.npz", param__blocks_DOT_9_DOT_ffn_DOT_w1=np.zeros((16, 32), np.float32)))
    with pytest.raises(io.CheckpointError, match=r"unexpected array\(s\) 'notes'"):
        io.load(rewrite(src, tmp_path / "c.npz", notes=np.zeros(3)))


def test_non_finite_parameters_are_never_saved_nor_loaded(saved, tmp_path):
    model = cl.Transformer(small_config(), seed=0)
    model.params["tok_emb"][0, 3] = np.nan      # the [PAD] row: no forward pass would show it
    with pytest.raises(ValueError, match=r"'tok_emb' holds 1 NaN or infinite value \(first at index \(0, 3\)\)"):
        io.save(model, tmp_path / "nan.npz")
    assert not (tmp_path / "nan.npz").exists()
    emb = raw(saved / "model_only.npz")["param/tok_emb"].copy()
    emb[0, 3] = np.inf
    with pytest.raises(io.CheckpointError, match=r"'tok_emb' holds 1 NaN or infinite value"):
        io.load(rewrite(saved / "model_only.npz", tmp_path / "inf.npz", param__tok_emb=emb))


@pytest.mark.parametrize("name, content, message", [
    ("empty.npz", b"", "not a course_lib model file"),
    ("zipsig.npz", b"PK\x03\x04", "not a course_lib model file"),
    ("text.npz", b"hello", "not a course_lib model file"),
])
def test_unreadable_bytes_are_refused(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(io.CheckpointError, match=f"{name}.*{message}"):
        io.load(tmp_path / name)


def test_truncated_file_is_refused(saved, tmp_path):
    data = (saved / "with_opt.npz").read_bytes()
    for cut in (len(data) // 3, len(data) - 10):
        (tmp_path / "cut.npz").write_bytes(data[:cut])
        with pytest.raises(io.CheckpointError, match=r"cut\.npz.*not a course_lib model file"):
            io.load(tmp_path / "cut.npz")


def test_directory_is_refused(tmp_path):
    with pytest.raises(io.CheckpointError, match="is a directory"):
        io.load(tmp_path)


@pytest.mark.parametrize("changes, message", [
    ({"config": None}, "lacks 'config'"),
    ({"extra": None}, "lacks 'extra'"),
    ({"config": np.array("{not json")}, "'config' is not valid JSON"),
    ({"config": np.array("[1, 2]")}, "'config' should be a JSON object"),
    ({"config": np.zeros(3)}, "'config' should be text"),
    ({"extra": np.array("{")}, "'extra' is not valid JSON"),
    ({"config": np.array('{"n_heads": 3, "d_model": 16}')}, "not a valid ModelConfig.*divisible"),
    ({"config": np.array('{"colour": "red"}')}, "not a valid ModelConfig.*colour"),
    ({"config": np.array('{"ln_eps": Infinity}')}, "not valid JSON.*Infinity"),
    ({"config": np.array('{"ln_eps": 1e999}')}, "not valid JSON.*not a finite number"),
    ({"config": np.array('{"n_layers": 100000000}')}, "n_layers=100000000"),
    ({"optim": np.array("{")}, "'optim' is not valid JSON"),
    ({"optim": np.array('{"type": "Transformer", "hparams": {}, "t": 0}')}, "unknown optimiser type 'Transformer'"),
    ({"optim": np.array('{"type": "Adam", "hparams": {"lr": -1}, "t": 0}')}, "Adam settings are invalid"),
    ({"optim": np.array('{"type": "Adam", "hparams": {}, "t": -4}')}, "'t' \\(an integer >= 0\\)"),
    ({"optim": np.array('{"type": "SGD", "hparams": {}, "t": 1}')}, "SGD state should hold 'buf'"),
    ({"optim": None}, "optimiser state 'm', 'v' without 'optim'"),
    ({"optim__m__head_DOT_b": np.zeros(10, np.float32)}, r"optimiser m array 'head\.b' has shape \(10,\)"),
    ({"optim__v__head_DOT_b": np.zeros(20, np.float64)}, r"optimiser v array 'head\.b' has dtype float64"),
    ({"optim__v__head_DOT_b": None}, r"optimiser v arrays do not fit its config: missing 'head\.b'"),
])
def test_contents_that_do_not_fit_are_refused(saved, tmp_path, changes, message):
    bad = rewrite(saved / "with_opt.npz", tmp_path / "bad.npz", **changes)
    with pytest.raises(io.CheckpointError, match=rf"bad\.npz.*{message}"):
        io.load_checkpoint(bad)


def test_checkpoint_error_is_a_value_error():
    assert issubclass(io.CheckpointError, ValueError)


@pytest.mark.parametrize("overrides", [
    {}, {"norm": "pre"}, {"positional": "learned"}, {"tie_embeddings": True}, {"attn_bias": True},
    {"head_bias": False}, {"use_attention": False}, {"use_ffn": False}, {"use_layernorm": False},
    {"n_layers": 0, "norm": "pre", "dtype": "float64"}])
def test_expected_shapes_match_the_model(overrides):
    cfg = small_config(**overrides)
    model = cl.Transformer(cfg)
    assert io._expected_shapes(cfg) == {k: v.shape for k, v in model.params.items()}


def test_a_saved_file_gets_normal_permissions_not_the_temporary_files(tmp_path):
    import stat
    path = tmp_path / "m.npz"
    cl.io.save(cl.Transformer(small_config(), seed=0), path)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    path.chmod(0o640)
    cl.io.save(cl.Transformer(small_config(), seed=0), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
