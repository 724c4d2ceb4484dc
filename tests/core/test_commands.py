"""One exit-status convention for every command, said at the end of each --help:

    0 done, 1 failed while running, 2 bad input, 130 interrupted (Ctrl-C)

Each case makes one command meet one situation (most without training or running a notebook:
the step that would fail or be interrupted is replaced) and checks the status and the one line
on stderr. The counts the commands print agree with their nouns: '1 row', never '1 rows'."""
import errno
import re

import pytest

import course_lib as cl
from course_lib import doctor, io, task, train
from course_lib.__main__ import main
from course_lib.instructor import grade, gradescope
from course_lib.text import command as text_command, text_config
from course_lib.yours import scratch


def run(argv):
    """main(argv)'s exit status, whether it returns it or argparse exits with it (a Ctrl-C that
    escapes main is a failure of the test, not the end of the test session)."""
    try:
        return main(argv)
    except SystemExit as stop:
        return stop.code
    except KeyboardInterrupt:
        return "KeyboardInterrupt escaped main (a traceback)"


@pytest.mark.parametrize("command", [None, "train", "sample", "grade", "yours", "doctor"])
def test_every_help_ends_with_what_each_exit_status_means(command, capsys):
    assert run(([command] if command else []) + ["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"exit status: 0 [^,]+.*, 1 failed while running.*, 2 bad input \(.+\), "
                     r"130 interrupted \(Ctrl-C\)$", text), text


def _raise(error):
    def raiser(*args, **kwargs):
        raise error
    return raiser


def _text_model(folder):
    """A tiny model as `train --text` saves it (vocabulary 'ab')."""
    path = folder / "text_model.npz"
    io.save(cl.Transformer(text_config(2, seq_len=8, d_model=8, n_heads=2, n_layers=1)), path,
            extra={"vocabulary": "ab"})
    return path


def _learner(folder):
    (folder / "01_tokens_and_task.ipynb").write_text("{}", encoding="utf-8")
    return folder


def _good_checks(mp):
    for name in ("check_python", "check_numba", "check_cache", "check_blas", "check_widgets"):
        mp.setattr(doctor, name, lambda: doctor.Check(True, "fine"))
    mp.setattr(doctor, "check_versions", lambda requirements=None: [doctor.Check(True, "fine")])
    mp.setattr(doctor, "check_model", lambda: [doctor.Check(True, "fine")])


DISK_FULL = OSError(errno.ENOSPC, "No space left on device")

# (situation, setup(tmp_path, monkeypatch) -> argv, exit status, words of the one line on stderr or None)
CASES = [
    ("train: a bad option", lambda d, mp: ["train", "--epochs", "0"], 2, "--epochs must be a positive integer"),
    ("train: a --text file it cannot use", lambda d, mp: ["train", "--text", str(d), "--out", str(d / "m.npz")], 2,
     "cannot read"),
    ("train: training diverged", lambda d, mp: (
        mp.setattr(train, "fit", _raise(train.TrainingDiverged("the loss became nan at step 0"))),
        ["train", "--n-train", "100", "--no-progress", "--out", str(d / "m.npz")])[1], 1, "the loss became nan"),
    ("train: --out could not be written", lambda d, mp: (
        mp.setattr(train, "fit", lambda *a, **k: train.History(step=[0], epoch=[0], best_epoch=0, best_val_acc=0.5)),
        mp.setattr(io, "save", _raise(DISK_FULL)),
        ["train", "--n-train", "100", "--no-progress", "--out", str(d / "m.npz")])[2], 1, "No space left"),
    ("train: Ctrl-C before training", lambda d, mp: (
        mp.setattr(task, "splits", _raise(KeyboardInterrupt)),
        ["train", "--no-progress", "--out", str(d / "m.npz")])[1], 130, "interrupted"),
    ("train --text: Ctrl-C while reading", lambda d, mp: (
        mp.setattr(text_command, "read_text", _raise(KeyboardInterrupt)),
        ["train", "--text", str(d), "--out", str(d / "m.npz")])[1], 130, "interrupted"),
    ("sample: a bad option", lambda d, mp: ["sample", str(d / "m.npz"), "--prompt", "a", "--chars", "-1"], 2,
     "--chars must be an integer >= 0"),
    ("sample: no model", lambda d, mp: ["sample", str(d / "m.npz"), "--prompt", "a"], 2, "no saved model"),
    ("sample: not a model", lambda d, mp: (
        (d / "m.npz").write_text("text"), ["sample", str(d / "m.npz"), "--prompt", "a"])[1], 2, "is text"),
    ("sample: Ctrl-C while writing", lambda d, mp: (
        mp.setattr(text_command, "generate", _raise(KeyboardInterrupt)),
        ["sample", str(_text_model(d)), "--prompt", "a"])[1], 130, "interrupted"),
    ("grade: no such PATH", lambda d, mp: ["grade", str(d / "class"), "--out", str(d / "r.csv")], 2,
     "does not exist"),
    ("grade: --out is a folder", lambda d, mp: ["grade", str(d), "--out", str(d)], 2, "it is a folder"),
    ("grade --gradescope: ZIP is a folder", lambda d, mp: (
        (d / "a.zip").mkdir(), ["grade", "--gradescope", str(d / "a.zip")])[1], 2, "it is a folder"),
    ("grade: the report could not be written", lambda d, mp: (
        (d / "01_a.ipynb").write_text("not json"), mp.setattr(grade, "write_csv", _raise(DISK_FULL)),
        ["grade", str(d / "01_a.ipynb"), "--out", str(d / "r.csv"), "--no-progress"])[2], 1, "No space left"),
    ("grade: Ctrl-C before any notebook was graded", lambda d, mp: (
        (d / "01_a.ipynb").write_text("{}"), mp.setattr(grade, "grade", _raise(KeyboardInterrupt)),
        ["grade", str(d), "--out", str(d / "r.csv")])[2], 130, "interrupted: no report written"),
    ("yours: PATH is not a folder", lambda d, mp: ["yours", str(d / "none")], 2, "is not a folder"),
    ("yours: the scratch process gave no report", lambda d, mp: (
        mp.setattr(scratch, "run_in_scratch", _raise(scratch.ScratchError("too many exercises stopped it"))),
        ["yours", str(_learner(d)), "--no-progress"])[1], 1, "too many exercises stopped it"),
    ("yours: Ctrl-C", lambda d, mp: (mp.setattr(scratch, "run_in_scratch", _raise(KeyboardInterrupt)),
                                     ["yours", str(_learner(d)), "--no-progress"])[1], 130, "interrupted"),
    ("doctor: everything works", lambda d, mp: (_good_checks(mp), ["doctor"])[1], 0, None),
    ("doctor: a check found a problem", lambda d, mp: (
        _good_checks(mp), mp.setattr(doctor, "check_cache", lambda: doctor.Check(False, "no cache", "fix it")),
        ["doctor"])[2], 1, None),
    ("doctor: a bad option", lambda d, mp: ["doctor", "--fast"], 2, "unrecognized arguments: --fast"),
    ("doctor: Ctrl-C", lambda d, mp: (_good_checks(mp), mp.setattr(doctor, "check_numba", _raise(KeyboardInterrupt)),
                                      ["doctor"])[2], 130, "interrupted"),
]


@pytest.mark.parametrize("setup, status, says", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_exit_status_follows_the_convention(tmp_path, capsys, monkeypatch, setup, status, says):
    argv = setup(tmp_path, monkeypatch)
    assert run(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if says is not None:
        assert says in err and len(err.strip().splitlines()) == 1, err


def test_grade_counts_agree_with_their_nouns(tmp_path, capsys):
    """One unreadable notebook: '(1 row)', and the summary says which notebook and why."""
    (tmp_path / "01_a.ipynb").write_bytes(b"\x80\x04binary")
    assert main(["grade", str(tmp_path / "01_a.ipynb"), "--out", str(tmp_path / "r.csv"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"report: {tmp_path / 'r.csv'} (1 row)\n" in out, out
    learner = tmp_path.resolve().name
    assert f"notebooks not graded:\n  {learner}/01_a.ipynb: not a readable notebook (UnicodeDecodeError" in out
    assert str(grade.Interrupted([], 0, 1)) == "0 of 1 notebook graded"


def test_gradescope_and_doctor_counts_agree_with_their_nouns(tmp_path):
    assignment = [{"notebook": "01_a.ipynb", "exercises": [["Exercise 1.1", "encode"]]}]
    row = {"learner": "01_a.ipynb", "notebook": "01_a.ipynb", "exercise": "Exercise 1.1", "title": "encode",
           "status": "passed", "stage": "", "message": ""}
    output = gradescope.results(assignment, {"01_a.ipynb": tmp_path / "01_a.ipynb"}, [row], 1.0)["output"]
    assert output.startswith("1 of 1 exercise passed, 1 of 1 notebook graded"), output
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1):
        text = doctor.check_blas().text
    assert " with 1 thread;" in text and "1 threads" not in text, text
    assert re.search(r"\(Numba's (omp|tbb|workqueue) threading layer\)", text), text
