import re
import subprocess
import sys

import numpy as np
import pytest

import course_lib as cl
from course_lib import train, train_command
from course_lib.__main__ import main
from support import files_that_are_not_models, small_config


@pytest.fixture(scope="module")
def small_data():
    return cl.task.splits(seed=1, n_train=400, n_val=200, n_test=200)


def quick_fit(data, seed=0, **kwargs):
    model = cl.Transformer(cl.presets.deep_dive(), seed=seed)
    opt = cl.optim.Adam(model.params, lr=2e-3)
    kwargs.setdefault("epochs", 2)
    hist = train.fit(model, opt, data["train"], data["val"], batch_size=50, seed=seed, progress=False, **kwargs)
    return model, opt, hist


def test_history_is_complete_and_consistent(small_data):
    model, _, hist = quick_fit(small_data, snapshot_steps=(0, 8, 16), epochs=2)
    assert hist.step == list(range(16)) and len(hist.loss) == len(hist.lr) == len(hist.grad_norm) == 16
    assert set(hist.grad_norm_by_group) == {"embed", "block 0", "block 1", "head"}
    for g in hist.grad_norm_by_group.values():
        assert len(g) == 16 and all(v > 0 for v in g)
    total = np.sqrt(sum(np.square(v) for v in hist.grad_norm_by_group.values()))
    np.testing.assert_allclose(total, hist.grad_norm, rtol=1e-9)
    assert hist.epoch == [0, 1] and hist.eval_step == [8, 16]
    assert set(hist.val_acc_per_op) == set(cl.task.OPERATIONS)
    assert [s["step"] for s in hist.snapshots] == [0, 8, 16]
    assert hist.snapshots[0]["attention"].shape == (2, 4, 8, 8)
    assert not np.array_equal(hist.snapshots[0]["tok_emb"], hist.snapshots[-1]["tok_emb"])
    arrays = hist.to_arrays()
    assert arrays["loss"].shape == (16,) and arrays["val_acc/Max"].shape == (2,)
    # the restored model is the best epoch's, and its accuracy is what the history says
    val = train.evaluate(model, *small_data["val"])
    assert val["acc"] == hist.val_acc[hist.best_epoch] == hist.best_val_acc
    assert val["loss"] == pytest.approx(hist.val_loss[hist.best_epoch], rel=1e-6)   # BLAS threads may differ
    assert hist.loss[-1] < hist.loss[0]


def test_same_seed_gives_identical_histories(small_data):
    _, _, a = quick_fit(small_data)
    _, _, b = quick_fit(small_data)
    for k, v in a.to_arrays().items():
        np.testing.assert_array_equal(v, b.to_arrays()[k], err_msg=k)


def test_nan_loss_is_caught_with_the_step_named(small_data):
    def poison(step, hist):
        if step == 3:
            model.params["blocks.0.ffn.w1"][0, 0] = np.nan
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    opt = cl.optim.Adam(model.params)
    with pytest.raises(train.TrainingDiverged,
                       match=r"loss became nan at step 3 \(epoch 0\): parameter 'blocks\.0\.ffn\.w1' holds 1 NaN "
                             r"or infinite value \(first at index \(0, 0\)\).*or a callback"):
        train.fit(model, opt, small_data["train"], small_data["val"], epochs=1, progress=False, callback=poison)


@pytest.mark.parametrize("name, index", [("blocks.0.ffn.w1", (0, 0)), ("tok_emb", (0, 5))])  # tok_emb row 0: [PAD]
def test_fit_refuses_to_start_from_non_finite_parameters(small_data, tmp_path, name, index):
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    model.params[name][index] = np.nan
    model.params[name][-1, -1] = np.inf
    opt = cl.optim.Adam(model.params)
    with pytest.raises(ValueError, match=rf"cannot start.*'{re.escape(name)}' holds 2 NaN or infinite values "
                                         rf"\(first at index {re.escape(str(index))}\)"):
        train.fit(model, opt, small_data["train"], small_data["val"], epochs=1, progress=False,
                  checkpoint=tmp_path / "c.npz")
    assert opt.t == 0 and not (tmp_path / "c.npz").exists()


def test_finite_parameters_and_non_finite_loss_blame_the_forward_pass(small_data, monkeypatch):
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    monkeypatch.setattr(model, "loss", lambda tokens, targets: float("inf"))
    opt = cl.optim.Adam(model.params, lr=0.5)
    with pytest.raises(train.TrainingDiverged, match=r"loss became inf at step 0.*every parameter is finite.*now 0\.5"):
        train.fit(model, opt, small_data["train"], small_data["val"], epochs=1, progress=False)


def test_an_update_that_overflows_is_caught_before_the_checkpoint(small_data, tmp_path, monkeypatch):
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    opt = cl.optim.Adam(model.params)
    step = opt.step

    def overflowing_step(grads):     # the epoch's last update leaves an infinity in a parameter
        step(grads)
        if opt.t == 8:
            model.params["head.b"][2] = np.inf
    monkeypatch.setattr(opt, "step", overflowing_step)
    with pytest.raises(train.TrainingDiverged, match=r"after step 7 \(epoch 0\) parameter 'head\.b' holds 1"):
        train.fit(model, opt, small_data["train"], small_data["val"], epochs=1, batch_size=50, progress=False,
                  checkpoint=tmp_path / "c.npz")
    assert not (tmp_path / "c.npz").exists()


def test_infinite_gradient_is_caught_with_the_parameter_named(small_data, monkeypatch):
    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    backward = model.backward
    calls = []

    def bad_backward():
        grads = backward()
        calls.append(1)
        if len(calls) == 5:
            grads["blocks.1.ffn.b2"][3] = np.inf
        return grads
    monkeypatch.setattr(model, "backward", bad_backward)
    opt = cl.optim.Adam(model.params)
    before = None

    def remember(step, hist):
        nonlocal before
        before = {k: v.copy() for k, v in model.params.items()}
    with pytest.raises(train.TrainingDiverged, match=r"gradient of 'blocks.1.ffn.b2' .* at step 4"):
        train.fit(model, opt, small_data["train"], small_data["val"], epochs=1, progress=False,
                  callback=remember, restore_best=False)
    assert all(np.array_equal(before[k], model.params[k]) for k in before)   # the bad step was not applied


def test_interrupted_run_leaves_a_loadable_checkpoint(small_data, tmp_path):
    path = tmp_path / "ckpt.npz"

    def interrupt(step, hist):
        if step == 12:
            raise KeyboardInterrupt
    model, _, hist = quick_fit(small_data, epochs=3, checkpoint=path, callback=interrupt)
    assert hist.interrupted and len(hist.step) == 12 and hist.best_epoch == 0
    loaded, opt, extra = cl.io.load_checkpoint(path)
    assert extra["epoch"] == 0 and opt.t == 8
    for k in model.params:
        np.testing.assert_array_equal(loaded.params[k], model.params[k])
    loaded.forward(small_data["test"][0][:3])


def test_early_stopping(small_data):
    _, _, hist = quick_fit(small_data, epochs=30, patience=1)
    assert hist.stopped_early and len(hist.epoch) < 30
    assert len(hist.epoch) - 1 - hist.best_epoch == 1


def test_bad_arguments(small_data):
    model = cl.Transformer(cl.presets.deep_dive())
    opt = cl.optim.Adam(model.params)
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        train.fit(model, opt, small_data["train"], small_data["val"], epochs=0)
    with pytest.raises(ValueError, match="another params dict"):
        train.fit(model, cl.optim.Adam(dict(model.params)), small_data["train"], small_data["val"])
    with pytest.raises(TypeError, match="pair"):
        train.fit(model, opt, small_data["train"][0], small_data["val"])
    with pytest.raises(ValueError, match="clip"):
        train.fit(model, opt, small_data["train"], small_data["val"], clip=-1)


@pytest.mark.parametrize("seed, n_train", [(0, 4000), (1, 500), (7, 2000)])
def test_test_split_never_overlaps_training(seed, n_train):
    data = cl.task.splits(seed, n_train=n_train)
    train_rows = {r.tobytes() for r in data["train"][0]}
    assert not any(r.tobytes() in train_rows for r in data["test"][0])
    assert not any(r.tobytes() in train_rows for r in data["val"][0])


def test_command_trains_prints_and_saves(tmp_path, capsys):
    out = tmp_path / "m.npz"
    code = main(["train", "--epochs", "2", "--n-train", "300", "--batch-size", "50", "--out", str(out),
                 "--no-progress", "--lr", "3e-3"])
    printed = capsys.readouterr().out
    assert code == 0
    acc = float(re.search(r"test accuracy (\d\.\d+)", printed).group(1))
    assert re.search(r"wall time \d+\.\d s: training \d+\.\d s \(12 steps\), loading the compiled kernels", printed)
    assert re.search(r"best epoch [12] of 2 trained", printed)
    model = cl.io.load(out)
    data = cl.task.splits(0, n_train=300)
    assert train.evaluate(model, *data["test"])["acc"] == pytest.approx(acc, abs=5e-5)


def test_command_help_and_bad_options():
    help_text = subprocess.run([sys.executable, "-m", "course_lib", "train", "--help"],
                               capture_output=True, text=True, check=True).stdout
    for option in ("--preset", "--seed", "--epochs", "--batch-size", "--optimizer", "--lr", "--schedule",
                   "--clip", "--out"):
        assert option in help_text
    bad = subprocess.run([sys.executable, "-m", "course_lib", "train", "--epochs", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--epochs must be a positive integer" in bad.stderr


def test_experiment_runner_table():
    rows = train.run_experiments({"full": {}, "no attention": {"use_attention": False}, "small": {"n_train": 200}},
                                 seeds=(0, 1), steps=10)
    assert [r["name"] for r in rows] == ["full", "no attention", "small"]
    assert all(len(r["accs"]) == 2 and 0 <= r["mean"] <= 1 for r in rows)
    assert "no attention" in train.format_table(rows)


def test_ctrl_c_stops_the_command_cleanly_and_keeps_the_best_model(tmp_path):
    import signal
    import time
    out = tmp_path / "m.npz"
    proc = subprocess.Popen([sys.executable, "-m", "course_lib", "train", "--epochs", "200", "--n-train", "400",
                             "--out", str(out), "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 120
    while not out.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert out.exists(), "no checkpoint appeared"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted after" in stdout and "keeping the best model so far" in stdout
    assert "Traceback" not in stderr
    model = cl.io.load(out)
    model.forward(cl.task.splits(0)["test"][0][:2])


def no_training(*args, **kwargs):
    raise AssertionError("training started although an option was bad")


@pytest.mark.parametrize("options, message", [
    (["--lr", "0"], "--lr must be a positive finite number, got 0"),
    (["--lr=-1e-3"], "--lr must be a positive finite number"),
    (["--lr", "nan"], "--lr must be a positive finite number, got nan"),
    (["--lr", "inf"], "--lr must be a positive finite number, got inf"),
    (["--batch-size", "0"], "--batch-size must be a positive integer"),
    (["--epochs", "-2"], "--epochs must be a positive integer"),
    (["--seed", "-1"], "--seed must be an integer >= 0"),
    (["--split-seed", "-1"], "--split-seed must be an integer >= 0"),
    (["--warmup", "-1"], "--warmup must be an integer >= 0"),
    (["--patience", "0"], "--patience must be a positive integer"),
    (["--weight-decay", "nan"], "--weight-decay must be a finite number >= 0"),
    (["--clip", "-1"], "--clip must be a finite number >= 0"),
    (["--momentum", "1"], "--momentum must be >= 0 and < 1"),
    (["--n-train", "4500"], "--n-train can be at most 4000"),
    (["--out", "{tmp}/model"], "--out must end in .npz, e.g. '{tmp}/model.npz'"),
    (["--out", "{tmp}/missing/m.npz"], "the directory '{tmp}/missing' does not exist"),
    (["--out", "{tmp}/folder.npz"], "--out '{tmp}/folder.npz' is a directory"),
    (["--out", "{tmp}/good.npz"], "--out '{tmp}/good.npz' exists: choose another --out, or pass --overwrite"),
    (["--out", "{tmp}/good.npz", "--lr", "0", "--overwrite"], "--lr must be a positive finite number"),
])
def test_command_checks_every_option_before_training(tmp_path, capsys, monkeypatch, options, message):
    monkeypatch.setattr(train, "fit", no_training)
    (tmp_path / "folder.npz").mkdir()
    good = tmp_path / "good.npz"
    cl.io.save(cl.Transformer(cl.presets.deep_dive()), good, extra={"val_acc": 0.99})
    before = good.read_bytes()
    options = [o.replace("{tmp}", str(tmp_path)) for o in options]
    if "--out" not in options:
        options += ["--out", str(tmp_path / "new.npz")]
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--no-progress", *options])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert message.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("python -m course_lib train: error:")
    assert good.read_bytes() == before and not (tmp_path / "new.npz").exists()


def test_command_overwrite_replaces_a_better_model_and_says_so(tmp_path, capsys):
    out = tmp_path / "m.npz"
    cl.io.save(cl.Transformer(cl.presets.deep_dive()), out, extra={"val_acc": 0.99})
    code = main(["train", "--epochs", "1", "--n-train", "100", "--batch-size", "50", "--out", str(out),
                 "--no-progress", "--overwrite"])
    printed = capsys.readouterr().out
    assert code == 0
    new_acc = cl.io.load_checkpoint(out)[2]["val_acc"]
    assert new_acc < 0.99
    assert (f"replaced the model that was in {out}: its validation accuracy was 0.9900 "
            f"(higher than this run's: --overwrite was given)") in printed


def test_command_divergence_is_one_line_and_says_nothing_was_saved(tmp_path, capsys, monkeypatch):
    def diverge(*args, **kwargs):
        raise train.TrainingDiverged("the loss became nan at step 0 (epoch 0): ...")
    monkeypatch.setattr(train, "fit", diverge)
    out = tmp_path / "m.npz"
    assert main(["train", "--out", str(out), "--no-progress", "--n-train", "100"]) == 1
    err = capsys.readouterr().err
    assert err == "error: the loss became nan at step 0 (epoch 0): ... (nothing saved)\n"
    assert not out.exists()


def test_fit_stops_at_the_end_of_the_first_epoch_that_reaches_until_val_acc():
    data = cl.task.splits(0, n_train=200)
    model = cl.Transformer(small_config(), seed=0)
    hist = train.fit(model, cl.optim.Adam(model.params, lr=1e-3), data["train"], data["val"], epochs=4,
                     batch_size=50, until_val_acc=0.0, progress=False)
    assert len(hist.val_acc) == 1 and hist.stopped_early
    model = cl.Transformer(small_config(), seed=0)
    hist = train.fit(model, cl.optim.Adam(model.params, lr=1e-3), data["train"], data["val"], epochs=2,
                     batch_size=50, until_val_acc=1.01, progress=False)
    assert len(hist.val_acc) == 2 and not hist.stopped_early


def test_command_stops_once_validation_is_learned_unless_full(tmp_path, capsys, monkeypatch):
    seen = []
    real_fit = train.fit

    def fit(*args, **kwargs):
        seen.append(kwargs["until_val_acc"])
        return real_fit(*args, **{**kwargs, "epochs": 1})
    monkeypatch.setattr(train, "fit", fit)
    for extra, name in (([], "a.npz"), (["--full"], "b.npz")):
        assert main(["train", "--n-train", "300", "--no-progress", "--out", str(tmp_path / name), *extra]) == 0
    assert seen == [1.0, None]


def test_command_counts_agree_with_their_nouns(tmp_path, capsys, monkeypatch):
    """'1 problem: 1 epoch x 1 step', 'interrupted after 1 step': never '1 steps'."""
    monkeypatch.setattr(train, "fit", lambda *args, **kwargs: train.History(step=[0], interrupted=True))
    assert main(["train", "--n-train", "1", "--batch-size", "1", "--epochs", "1", "--no-progress",
                 "--out", str(tmp_path / "m.npz")]) == 130
    out = capsys.readouterr().out
    assert " on 1 problem: 1 epoch x 1 step, adam " in out, out
    assert "interrupted after 1 step, before the first epoch ended: nothing saved" in out, out


@pytest.mark.parametrize("name", ["objects.npy", "objects_npy.npz", "objects.npz", "text.npz", "empty.npz",
                                  "zip.npz", "pickle.npz"])
def test_overwrite_says_what_the_replaced_file_was_not(tmp_path, name):
    path, says = files_that_are_not_models(tmp_path)[name]
    why = train_command._stored_val_acc(str(path))
    assert why.startswith(repr(str(path))) and says in why and "allow_pickle" not in why, why


def test_command_overwrite_of_a_text_file_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    def one_epoch(model, *args, **kwargs):
        return train.History(step=[0, 1], epoch=[0], val_acc=[0.5], best_epoch=0, best_val_acc=0.5)
    monkeypatch.setattr(train, "fit", one_epoch)
    out = tmp_path / "m.npz"
    out.write_text("notes, not a model\n", encoding="utf-8")
    assert main(["train", "--n-train", "100", "--out", str(out), "--no-progress", "--overwrite"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (f"replaced the file that was in {out}: {str(out)!r} is not a course_lib model file: "
                    f"it is text, not an .npz archive"), last
    assert cl.io.load_checkpoint(out)[2]["val_acc"] == 0.5
