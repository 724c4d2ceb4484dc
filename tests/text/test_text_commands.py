"""`python -m course_lib train --text FILE` and `python -m course_lib sample MODEL`, end to end on a
small text with a tiny model and a few seconds of training."""
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib import text
from course_lib.text import command as text_command
from course_lib.__main__ import main
from support import files_that_are_not_models

KJV = Path(__file__).resolve().parents[2] / "data" / "kjv.txt"
TINY = ["--seq-len", "16", "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--no-progress"]
LAST_LINE = re.compile(r"^validation loss (\d+\.\d{3}) nats/char \(bigram baseline (\d+\.\d{3}) nats/char\)$")


@pytest.fixture(scope="module")
def small_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "genesis.txt"
    path.write_text(KJV.read_text(encoding="utf-8")[:12_000], encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(small_text, tmp_path_factory):
    """One short run of the command: (its output, the checkpoint's path)."""
    out = tmp_path_factory.mktemp("model") / "m.npz"
    code = main(["train", "--text", str(small_text), "--minutes", "0.05", "--out", str(out), *TINY])
    assert code == 0
    return out


def test_the_shipped_text_is_plain_utf8_under_1_5_mb():
    data = KJV.read_bytes()
    assert len(data) <= 1_500_000 and b"\x00" not in data and b"\r" not in data
    assert data.decode("utf-8").startswith("Genesis 1\n\n  1 In the beginning God created the heaven")


def test_train_prints_the_validation_loss_of_the_saved_model_and_the_bigram_baseline(small_text, trained, capsys):
    main(["train", "--text", str(small_text), "--minutes", "0.05", "--out", str(trained), "--overwrite", *TINY])
    lines = capsys.readouterr().out.strip().splitlines()
    match = LAST_LINE.match(lines[-1])
    assert match, lines[-1]
    model, optimizer, extra = cl.io.load_checkpoint(trained)
    content = small_text.read_text(encoding="utf-8")
    vocab = text.Vocabulary.from_text(content)
    assert extra["vocabulary"] == vocab.chars and model.config.vocab_size == len(vocab)
    assert model.config.causal and model.config.norm == "pre" and model.config.seq_len == 16
    assert optimizer is not None and extra["step"] >= 0
    train_ids, val_ids = text.split(vocab.encode(content))
    assert float(match[2]) == pytest.approx(text.baselines(train_ids, val_ids, len(vocab))["bigram"], abs=5e-4)
    loss = text.validation_loss(model, text.fixed_windows(val_ids, 16))     # the saved model's, recomputed
    assert float(match[1]) == pytest.approx(loss, abs=5e-4) and extra["val_loss"] == pytest.approx(loss)
    assert loss < np.log(len(vocab))                                        # it learnt something


def test_sample_prints_the_prompt_and_a_seeded_continuation(trained, capsys):
    args = ["sample", str(trained), "--prompt", "And God said", "--chars", "40", "--seed", "5"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert first.startswith("And God said") and len(first) == len("And God said") + 40 + 1
    main(args)
    assert capsys.readouterr().out == first
    main(args[:-1] + ["6"])
    assert capsys.readouterr().out != first
    main(["sample", str(trained), "--prompt", "And", "--chars", "30", "--temperature", "0"])
    greedy = capsys.readouterr().out
    model, vocab = text_command.load_text_model(trained)
    assert greedy == "And" + cl.text.generate(model, vocab, "And", 30, temperature=0) + "\n"


def test_sample_errors_are_one_line(trained, tmp_path, capsys):
    operations = tmp_path / "ops.npz"
    cl.io.save(cl.Transformer(cl.presets.deep_dive()), operations, extra={"val_acc": 1.0})
    for args, message in [
        ([str(operations), "--prompt", "a"], "is not a text model"),
        ([str(trained), "--prompt", "Noë"], "the prompt has the character 'ë' (U+00EB) at position 2"),
        ([str(tmp_path / "none.npz"), "--prompt", "a"], "no saved model at"),
        ([str(trained), "--prompt", ""], "the prompt is empty"),
    ]:
        assert main(["sample", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
    for args, message in [(["--temperature", "-0.5"], "--temperature must be a finite number >= 0"),
                          (["--top-k", "0"], "--top-k must be a positive integer"),
                          (["--top-k", "500"], "--top-k must be at most the vocabulary's"),
                          (["--chars", "-1"], "--chars must be an integer >= 0")]:
        with pytest.raises(SystemExit) as exit_:
            main(["sample", str(trained), "--prompt", "a", *args])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err



@pytest.mark.parametrize("name", ["objects.npy", "objects_npy.npz", "objects.npz", "text.npz", "empty.npz", "zip.npz",
                                  "pickle.npz", "folder.npz"])
def test_sample_says_what_a_file_that_is_not_a_model_is_not_and_never_suggests_allow_pickle(tmp_path, capsys, name):
    path, says = files_that_are_not_models(tmp_path)[name]
    assert main(["sample", str(path), "--prompt", "a"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {str(path)!r} ") and says in err and len(err.strip().splitlines()) == 1, err
    assert "allow_pickle" not in err and "Traceback" not in err

@pytest.mark.parametrize("options, message", [
    (["--epochs", "3"], "--epochs does not apply to --text"),
    (["--preset", "deep_dive", "--n-train", "100"], "--n-train does not apply to --text"),
    (["--minutes", "0"], "--minutes must be a positive finite number"),
    (["--minutes", "nan"], "--minutes must be a positive finite number"),
    (["--d-model", "30", "--n-heads", "4"], "--d-model (30) must be divisible by --n-heads (4)"),
    (["--d-model", "10", "--n-heads", "4"],
     "error: --d-model (10) must be divisible by --n-heads (4): --n-heads can be 1, 2, 5 or 10 (see --help)"),
    (["--d-model", "7", "--n-heads", "2"], "(2): --n-heads can be 1 or 7 (see --help)"),
    (["--n-layers", "0"], "--n-layers must be a positive integer"),
])
def test_train_text_refuses_bad_options_before_reading(small_text, tmp_path, capsys, options, message):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--text", str(small_text), "--out", str(tmp_path / "m.npz"), *TINY, *options])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.npz").exists()


def test_train_text_refuses_unusable_files_and_keeps_an_existing_out(small_text, trained, tmp_path, capsys):
    before = trained.read_bytes()
    with pytest.raises(SystemExit):
        main(["train", "--text", str(small_text), "--out", str(trained), *TINY])
    assert "exists: choose another --out, or pass --overwrite" in capsys.readouterr().err
    (tmp_path / "short.txt").write_text("In the beginning", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("Zoë ".encode("latin-1") * 1000)
    for path, message in [(sys.executable, "is not a text file"), (tmp_path / "latin1.txt", "is not UTF-8 text"),
                          (tmp_path / "short.txt", "is too short: 16 characters")]:
        assert main(["train", "--text", str(path), "--out", str(tmp_path / "m.npz"), *TINY]) == 2   # bad input
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1, err
    assert trained.read_bytes() == before and not (tmp_path / "m.npz").exists()


def test_ctrl_c_stops_cleanly_keeping_the_best_model(small_text, tmp_path):
    out = tmp_path / "m.npz"
    proc = subprocess.Popen([sys.executable, "-m", "course_lib", "train", "--text", str(small_text), "--minutes", "1",
                             "--out", str(out), *TINY], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not out.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert out.exists(), "no checkpoint appeared"      # the first evaluation, after 3 s, saved one
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert "interrupted: keeping the best model so far" in stdout
    assert LAST_LINE.match(stdout.strip().splitlines()[-1])
    assert text_command.load_text_model(out)[0].config.seq_len == 16


def test_train_text_counts_agree_with_their_nouns(small_text, tmp_path, capsys, monkeypatch):
    """'1 step', never '1 steps': the run's first and last lines, and a text too short."""
    monkeypatch.setattr(text.training, "fit_text", lambda *args, **kwargs: text.TextHistory(steps=1, best_step=0))
    assert main(["train", "--text", str(small_text), "--out", str(tmp_path / "m.npz"), *TINY, "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "(warm-up 1 step, cosine)" in out and "\n1 step in 0 s; best at step 0;" in out, out
    (tmp_path / "one.txt").write_text("a", encoding="utf-8")
    assert main(["train", "--text", str(tmp_path / "one.txt"), "--out", str(tmp_path / "n.npz"), *TINY,
                 "--seq-len", "1"]) == 2
    assert "is too short: 1 character; a context of 1 character needs at least 20" in capsys.readouterr().err
