import numpy as np
import pytest

import course_lib as cl
from course_lib import io
from support import small_config


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
