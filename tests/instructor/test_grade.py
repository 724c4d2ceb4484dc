"""`python -m course_lib grade`: a class made of copies of the course's own notebooks.

The class test runs a small notebook built from notebook 01's own exercise cells (a few
seconds a learner); one test runs the whole of notebook 01 (about 30 s).
"""
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell

from course_lib.exercises import limits
from course_lib.instructor import grade, judge_runner
from course_lib.__main__ import main
from course_lib.instructor.edition import student_notebook

NB01 = Path(__file__).resolve().parents[2] / "notebooks" / "01_tokens_and_task.ipynb"
EXERCISES = ["Exercise 1.1", "Exercise 1.2", "Exercise 1.4", "Exercise 1.5"]   # 1.3: on paper


def small_notebook():
    """A setup cell and notebook 01's code exercises (heading, solution, check), as they are."""
    source = nbformat.read(NB01, as_version=4)
    exercises = grade.expected_exercises(source)
    nb = nbformat.v4.new_notebook(metadata=source.metadata)
    nb.cells = [new_code_cell("import numpy as np\nimport course_lib as cl")]
    for ex in exercises:
        nb.cells += source.cells[ex.first_cell:ex.check_cell + 1]
    return nb


def solution_cell(nb, exercise):
    """The code cell that holds the solution of `exercise` (the one with the markers)."""
    ex = next(e for e in grade.expected_exercises(nb) if e.name == exercise)
    return next(c for c in nb.cells[ex.first_cell:ex.check_cell] if "### BEGIN SOLUTION" in c.source)


def write(nb, folder, name="01_small.ipynb"):
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def by_exercise(rows, learner):
    return {r["exercise"]: r for r in rows if r["learner"] == learner}


def test_exercises_are_read_from_the_notebook():
    """The code exercises of notebook 01 (1.3 is a derivation on paper: no checker, not graded),
    each from its heading to the cell that calls its checker."""
    nb = nbformat.read(NB01, as_version=4)
    found = grade.expected_exercises(nb)
    assert [(e.name, e.title) for e in found] == [
        ("Exercise 1.1", "encode by hand"), ("Exercise 1.2", "the answer function"),
        ("Exercise 1.4", "a central-difference derivative"),
        ("Exercise 1.5", "numerical gradients of arrays")]
    for e in found:
        assert nb.cells[e.first_cell].source.startswith(f"### {e.name}: {e.title}")
        assert "cl.checks.check_" in nb.cells[e.check_cell].source
        assert "### BEGIN SOLUTION" in nb.cells[e.check_cell - 1].source


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Grade a class of six learners once; return (class folder, rows, the files before)."""
    root = tmp_path_factory.mktemp("class")
    write(small_notebook(), root / "ann")                                       # every solution
    write(student_notebook(small_notebook())[0], root / "ben")                  # the student edition
    wrong = small_notebook()
    cell = solution_cell(wrong, "Exercise 1.2")
    cell.source = cell.source.replace("return min(a, b, c)", "return max(a, b, c)")
    write(wrong, root / "cat")                                                  # one wrong solution
    chaos = small_notebook()
    # deletes its own working folder (the scratch copy; refuses anywhere else), then an
    # exercise that never ends
    solution_cell(chaos, "Exercise 1.1").source = (
        "import os, shutil\n"
        "assert os.path.basename(os.path.dirname(os.getcwd())).startswith('course-scratch-')\n"
        "shutil.rmtree(os.getcwd())\n\n" + solution_cell(chaos, "Exercise 1.1").source)
    solution_cell(chaos, "Exercise 1.2").source = "while True:\n    pass"
    write(chaos, root / "dan")
    (root / "dan" / "keep.txt").write_text("mine")
    hog = small_notebook()
    solution_cell(hog, "Exercise 1.1").source = "hoard = []\nwhile True:\n    hoard.append(bytearray(10**8))"
    write(hog, root / "eve")                                                    # allocates without end
    (root / "fay").mkdir()
    (root / "fay" / "01_small.ipynb").write_text("{not json")                  # a broken file
    (root / "sentinel.txt").write_text("outside every scratch copy")
    originals = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    rows = grade.grade(root, timeout=20, memory=2 * 2**30, progress=False)
    return root, rows, originals


def test_solutions_pass_and_student_edition_is_not_done(graded_class):
    _, rows, _ = graded_class
    assert {e: r["status"] for e, r in by_exercise(rows, "ann").items()} == {
        e: "passed" for e in EXERCISES}
    assert {r["status"] for r in by_exercise(rows, "ben").values()} == {"not done"}
    assert len(by_exercise(rows, "ben")) == len(EXERCISES)


def test_wrong_solution_fails_at_its_stage(graded_class):
    _, rows, _ = graded_class
    cat = by_exercise(rows, "cat")
    assert cat["Exercise 1.2"]["status"] == "failed"
    assert cat["Exercise 1.2"]["stage"] == "one case per operation"
    assert "my_answer('Min', (3, 8, 4)) = 8, expected 3" in cat["Exercise 1.2"]["message"]
    assert all(cat[e]["status"] == "passed" for e in EXERCISES if e != "Exercise 1.2")


def test_endless_loop_stops_at_the_limit_and_deletion_stays_in_the_scratch_copy(graded_class):
    root, rows, originals = graded_class
    dan = by_exercise(rows, "dan")
    assert dan["Exercise 1.1"]["status"] == "passed"          # deleting its folder broke nothing else
    assert dan["Exercise 1.2"]["status"] == "error"
    assert "time limit reached" in dan["Exercise 1.2"]["message"]
    assert all(dan[e]["status"] == "not reached" for e in EXERCISES[2:])
    # every file of the class, the sentinel and the learner's own folder included, is as it was
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == originals
    assert all(20 <= r["seconds"] < 40 for r in dan.values())  # stopped at the limit, not long after


def test_runaway_allocation_and_broken_file_are_reported(graded_class):
    _, rows, _ = graded_class
    eve = by_exercise(rows, "eve")
    memory_error = "MemoryError" if limits.rlimit_as_works() else "more than its memory limit"  # windows_like
    assert eve["Exercise 1.1"]["status"] == "error" and memory_error in eve["Exercise 1.1"]["message"]
    # the other exercises are graded without the cell that failed (each in a sandbox of its own)
    assert all(eve[e]["status"] == "passed" for e in EXERCISES[1:])
    fay = [r for r in rows if r["learner"] == "fay"]
    assert len(fay) == 1 and fay[0]["status"] == "error" and "not a readable notebook" in fay[0]["message"]


def test_summary_counts_learners_and_exercises(graded_class):
    _, rows, _ = graded_class
    text = grade.summary(rows)
    assert "  ann  4/4" in text and "  ben  0/4" in text and "  cat  3/4" in text and "  dan  1/4" in text
    assert re.search(r"\n  Exercise 1\.1 encode by hand +3/6 \(50%\)\n", text)
    assert re.search(r"\n  Exercise 1\.2 the answer function +2/6 \(33%\)\n", text)


def test_real_notebook_one_learner(tmp_path, capsys):
    """The whole of notebook 01 with its solutions, graded through the command line."""
    shutil.copy(NB01, tmp_path / NB01.name)
    out = tmp_path / "report.csv"
    assert main(["grade", str(tmp_path / NB01.name), "--out", str(out), "--timeout", "240", "--no-progress"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(grade.COLUMNS)
    assert [(r["learner"], r["exercise"], r["status"]) for r in rows] == [
        (tmp_path.name, e, "passed") for e in EXERCISES]
    printed = capsys.readouterr().out
    assert f"{tmp_path.name}  4/4" in printed
    assert re.search(r"\n  Exercise 1\.4 a central-difference derivative +passed\n", printed)


def test_the_engine_of_notebook_09_is_graded_on_graphs_that_cross_the_channel(tmp_path):
    """9.4 returns Nodes and 9.5 fills in the grads of the judge's graph, through the sandbox: the
    solutions pass, and an engine that overwrites at forks fails at the fork, as in the notebook."""
    nb = nbformat.read(NB01.parent / "09_backprop_chain_rule.ipynb", as_version=4)
    exercises = grade.expected_exercises(nb)
    small = nbformat.v4.new_notebook(metadata=nb.metadata)
    small.cells = [new_code_cell("import numpy as np\nimport course_lib as cl")]
    for ex in exercises:
        if ex.name in ("Exercise 9.4", "Exercise 9.5"):
            small.cells += nb.cells[ex.first_cell:ex.check_cell + 1]
    right = write(small, tmp_path / "right", "09_small.ipynb")
    engine = solution_cell(small, "Exercise 9.5")
    engine.source = engine.source.replace("parent.grad = g if parent.grad is None else parent.grad + g",
                                          "parent.grad = g")
    assert "parent.grad = g  " in engine.source
    write(small, tmp_path / "overwrites", "09_small.ipynb")
    out = tmp_path / "report.csv"
    assert main(["grade", str(tmp_path), "--out", str(out), "--timeout", "120", "--no-progress"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert right.exists()
    assert {(r["exercise"], r["status"]) for r in by_exercise(rows, "right").values()} == {
        ("Exercise 9.4", "passed"), ("Exercise 9.5", "passed")}
    wrong = by_exercise(rows, "overwrites")["Exercise 9.5"]
    assert wrong["status"] == "failed" and wrong["stage"] == "a fork: y = x W + relu(x), x used twice"


def test_a_function_that_calls_the_library_is_marked(tmp_path, capsys):
    """Exercise 1.5 handed to cl.gradcheck.numerical_gradient: its own status in the CSV (the
    columns as before), named in the message; the other exercises as they were."""
    nb = small_notebook()
    cell = solution_cell(nb, "Exercise 1.5")
    cell.source = ("def numerical_gradient(f, x, h=1e-5):\n"
                   "    return cl.gradcheck.numerical_gradient(f, x, h)")
    path = write(nb, tmp_path / "gus")
    out = tmp_path / "report.csv"
    assert main(["grade", str(path), "--out", str(out), "--timeout", "120", "--no-progress"]) == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = {r["exercise"]: r for r in csv.DictReader(f)}
    assert list(next(iter(rows.values()))) == list(grade.COLUMNS)
    row = rows["Exercise 1.5"]
    assert row["status"] == "library call" and row["stage"]
    assert row["message"].startswith("your function calls course_lib.gradcheck.numerical_gradient")
    assert all(rows[e]["status"] == "passed" for e in EXERCISES if e != "Exercise 1.5")
    printed = capsys.readouterr().out
    assert "gus  3/4" in printed
    assert re.search(r"Exercise 1\.5 numerical gradients of arrays +library call \[.+\]: your "
                     r"function calls course_lib\.gradcheck\.numerical_gradient", printed)


@pytest.mark.parametrize("make_args, says", [
    (lambda d: [str(d / "missing")], "does not exist"),
    (lambda d: [str(d / "notes.txt")], "is not a notebook"),
    (lambda d: [str(d / "empty")], "no notebooks"),
    (lambda d: [str(d / "empty"), "--out", str(d / "nowhere" / "r.csv")], "does not exist"),
    (lambda d: [str(d / "empty"), "--timeout", "0"], "must be positive"),
    (lambda d: [str(d / "empty"), "--user", "no-such-user"], "--user: "),   # not root, or no such user
])
def test_errors_are_one_line(tmp_path, capsys, make_args, says):
    (tmp_path / "notes.txt").write_text("not a notebook")
    (tmp_path / "empty").mkdir()
    assert main(["grade", *make_args(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1 and "Traceback" not in err


def test_parallel_report_equals_the_serial_one(tmp_path):
    """--jobs 2 and --jobs 1 give the same rows in the same order (learner, then notebook),
    whichever notebook ends first: the first learner's first notebook is the slowest."""
    slow = small_notebook()     # in the last exercise: each exercise's worker runs the cells before it
    solution_cell(slow, "Exercise 1.5").source = "import time\ntime.sleep(4)\n" + solution_cell(
        slow, "Exercise 1.5").source
    write(slow, tmp_path / "ann", "01_a.ipynb")
    write(small_notebook(), tmp_path / "ann", "02_b.ipynb")
    write(student_notebook(small_notebook())[0], tmp_path / "ben")
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "01_small.ipynb").write_text("{not json")
    runs = {}
    for jobs in (1, 2):
        out = tmp_path / f"report{jobs}.csv"
        assert main(["grade", str(tmp_path), "--out", str(out), "--jobs", str(jobs), "--no-progress"]) == 0
        runs[jobs] = out.read_text()
    assert runs[1] == runs[2]
    rows = list(csv.DictReader(runs[1].splitlines()))
    assert [(r["learner"], r["notebook"]) for r in rows] == (
        [("ann", "01_a.ipynb")] * 4 + [("ann", "02_b.ipynb")] * 4 + [("ben", "01_small.ipynb")] * 4
        + [("cat", "01_small.ipynb")])
    assert [r["status"] for r in rows] == ["passed"] * 8 + ["not done"] * 4 + ["error"]


def _workers(grader) -> list:
    """The grader's sandboxed workers running now (bubblewrap's processes aside)."""
    found = []
    for child in psutil.Process(grader.pid).children(recursive=True):
        try:
            if "course_lib.instructor.worker" in " ".join(child.cmdline()) and child.name() != "bwrap":
                found.append(child)
        except psutil.Error:        # a process that ended meanwhile
            pass
    return found


def _wait_for_workers(grader, n, seconds=120):
    """Until the grader runs `n` workers (on a busy machine its own start can take 10 s and more:
    a Ctrl-C before its imports end is Python's, not the grader's), then 3 s more; -> them."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and grader.poll() is None and len(_workers(grader)) < n:
        time.sleep(0.2)
    time.sleep(3)
    return _workers(grader)


def test_each_notebook_graded_at_once_gets_its_share_of_the_cores(tmp_path, monkeypatch):
    """--jobs 2: the BLAS of each judge and its workers may use half the cores (one thread at
    least), so that the notebooks graded side by side do not fight over them."""
    for name in judge_runner.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    share = max(1, grade.default_jobs() // 2)
    nb = small_notebook()
    cell = solution_cell(nb, "Exercise 1.1")
    cell.source = f"import os\nassert os.environ['OPENBLAS_NUM_THREADS'] == '{share}'\n" + cell.source
    write(nb, tmp_path / "ann")
    rows = grade.grade(tmp_path, timeout=60, progress=False, jobs=2)
    assert by_exercise(rows, "ann")["Exercise 1.1"]["status"] == "passed", by_exercise(rows, "ann")


def test_ctrl_c_keeps_the_graded_rows_and_stops_every_worker(tmp_path):
    """Two endless notebooks and a quick one, two at a time: Ctrl-C after the quick one is graded
    writes its rows, says the report is partial, and leaves no process of a learner running and
    no file in the temporary folder."""
    endless = small_notebook()
    solution_cell(endless, "Exercise 1.1").source = "while True:\n    pass"
    write(small_notebook(), tmp_path / "class" / "ann")
    write(endless, tmp_path / "class" / "bob")
    write(endless, tmp_path / "class" / "cat")
    out, scratch = tmp_path / "r.csv", tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": str(NB01.parent.parent), "TMPDIR": str(scratch)}
    grader = subprocess.Popen([sys.executable, "-m", "course_lib", "grade", str(tmp_path / "class"), "--out",
                               str(out), "--jobs", "2", "--timeout", "120", "--no-progress"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120           # ann's notebook, first in line, is graded
    while time.monotonic() < deadline and len(out.read_text().splitlines() if out.exists() else []) < 5:
        time.sleep(0.2)
    workers = _wait_for_workers(grader, 2)       # then both endless ones run
    assert len(workers) == 2
    grader.send_signal(signal.SIGINT)
    stdout, err = grader.communicate(timeout=60)
    assert grader.returncode == 130 and stdout == ""
    assert err == f"interrupted: 1 of 3 notebooks graded; partial report: {out} (4 rows)\n"
    with open(out, newline="", encoding="utf-8") as f:
        assert [(r["learner"], r["status"]) for r in csv.DictReader(f)] == [("ann", "passed")] * 4
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive
    assert not list(scratch.iterdir())           # the sandboxes' copies of the killed judges too


def test_ctrl_c_stops_grading_in_one_line(tmp_path):
    """Ctrl-C (SIGINT) in the middle of an endless notebook: the grader stops, worker and all."""
    nb = small_notebook()
    solution_cell(nb, "Exercise 1.1").source = "while True:\n    pass"
    write(nb, tmp_path / "ann")
    env = {**os.environ, "PYTHONPATH": str(NB01.parent.parent)}
    grader = subprocess.Popen([sys.executable, "-m", "course_lib", "grade", str(tmp_path), "--out",
                               str(tmp_path / "r.csv"), "--timeout", "120", "--no-progress"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers = _wait_for_workers(grader, 1)
    grader.send_signal(signal.SIGINT)
    out, err = grader.communicate(timeout=60)
    assert grader.returncode == 130 and err == "interrupted: no report written\n" and out == ""
    assert not (tmp_path / "r.csv").exists()
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert workers and not alive


@pytest.mark.parametrize("argv", [["grade"], ["grade", ".", "--timeout", "soon"], ["grade", ".", "--jobs", "0"],
                                  ["grade", ".", "--jobs", "two"], ["doctor", "--fast"]])
def test_argument_errors_are_one_line(capsys, argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "error:" in err and "Traceback" not in err


def test_where_the_os_has_no_memory_limit_a_watch_stops_the_worker(tmp_path, capsys, windows_like):
    """As on Windows (and, for memory, macOS): a watch stops a worker past its memory and names the
    cause, the command says so in one line; honest notebooks grade as on Linux."""
    write(small_notebook(), tmp_path / "class" / "ann")
    write(student_notebook(small_notebook())[0], tmp_path / "class" / "ben")
    hog = small_notebook()
    solution_cell(hog, "Exercise 1.2").source = "hoard = []\nwhile True:\n    hoard.append(bytearray(10**8))"
    write(hog, tmp_path / "class" / "eve")
    out = tmp_path / "report.csv"
    assert main(["grade", str(tmp_path / "class"), "--out", str(out), "--timeout", "60", "--memory", "1",
                 "--no-progress"]) == 0
    assert capsys.readouterr().err.startswith("note: this OS does not enforce memory limits (RLIMIT_AS)")
    with open(out, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {e: r["status"] for e, r in by_exercise(rows, "ann").items()} == {e: "passed" for e in EXERCISES}
    assert {r["status"] for r in by_exercise(rows, "ben").values()} == {"not done"}
    eve = by_exercise(rows, "eve")
    assert eve["Exercise 1.1"]["status"] == "passed"
    assert eve["Exercise 1.2"]["status"] == "error"
    assert "more than its memory limit (1 GB) and was stopped" in eve["Exercise 1.2"]["message"]


@pytest.fixture(scope="module")
def tampered_class(tmp_path_factory):
    """A class graded against an instructor edition (ref/01_small.ipynb): each learner's notebook is
    that notebook, changed the way a learner who wants credit might change it."""
    root = tmp_path_factory.mktemp("tampered")
    write(small_notebook(), root / "ref")
    deleted = small_notebook()
    ex = next(e for e in grade.expected_exercises(deleted) if e.name == "Exercise 1.2")
    del deleted.cells[ex.first_cell:ex.check_cell + 1]             # 1.2's heading, solution and check
    write(deleted, root / "class" / "del")
    added = small_notebook()
    added.cells += [nbformat.v4.new_markdown_cell("### Exercise 1.9: a bonus of my own"),
                    new_code_cell("x = 1"), new_code_cell("cl.checks.check_answer(None)")]
    write(added, root / "class" / "add")
    skipped = student_notebook(small_notebook())[0]
    ex = next(e for e in grade.expected_exercises(skipped) if e.name == "Exercise 1.4")
    skipped.cells[ex.check_cell].metadata["tags"] = ["skip-execution"]
    write(skipped, root / "class" / "skip")
    hidden = small_notebook()
    hidden.cells[0].metadata["jupyter"] = {"source_hidden": True}
    write(hidden, root / "class" / "hide")
    rows = grade.grade(root / "class", timeout=60, memory=2 * 2**30, progress=False, jobs=2,
                       exercises=root / "ref")
    return rows


def test_a_deleted_exercise_is_missing_and_an_added_one_has_no_row(tampered_class):
    deleted = by_exercise(tampered_class, "del")
    assert list(deleted) == EXERCISES                                  # the instructor edition's, in order
    assert deleted["Exercise 1.2"]["status"] == "missing"
    assert deleted["Exercise 1.2"]["title"] == "the answer function"
    assert all(deleted[e]["status"] == "passed" for e in EXERCISES if e != "Exercise 1.2")
    assert list(by_exercise(tampered_class, "add")) == EXERCISES       # no row for Exercise 1.9


def test_a_skipped_check_cell_says_so_and_hidden_cells_are_listed(tampered_class):
    skip = by_exercise(tampered_class, "skip")["Exercise 1.4"]
    assert skip["status"] == "not reached" and "tagged skip-execution" in skip["message"]
    assert {r["hidden"] for r in tampered_class if r["learner"] == "hide"} == {"0"}
    assert {r["hidden"] for r in tampered_class if r["learner"] != "hide"} == {""}
    assert "cells hidden from view (Jupyter's source_hidden):\n  hide/01_small.ipynb: cells 0" in \
        grade.summary(tampered_class)


def test_a_grader_failure_is_that_notebooks_rows_and_rows_land_as_notebooks_end(tmp_path, monkeypatch):
    write(small_notebook(), tmp_path / "class" / "ann")
    write(small_notebook(), tmp_path / "class" / "bob")
    real = judge_runner.run_notebook

    def fails_for_bob(path, *args, **kwargs):
        if "bob" in str(path):
            raise RuntimeError("a bug of the grader's")
        return real(path, *args, **kwargs)
    monkeypatch.setattr(judge_runner, "run_notebook", fails_for_bob)
    seen = []
    rows = grade.grade(tmp_path / "class", timeout=60, progress=False, on_done=seen.append)
    assert [r["status"] for r in rows if r["learner"] == "bob"] == ["grader error"]
    assert "RuntimeError: a bug of the grader's" in rows[-1]["message"]
    assert {e: r["status"] for e, r in by_exercise(rows, "ann").items()} == {e: "passed" for e in EXERCISES}
    assert sorted(map(len, seen)) == [1, len(EXERCISES)]


def test_the_report_holds_each_notebook_as_it_ends_if_the_grader_dies(tmp_path, monkeypatch):
    write(small_notebook(), tmp_path / "class" / "ann")
    write(small_notebook(), tmp_path / "class" / "bob")
    real = grade.grade_notebook

    def dies_at_bob(learner, *args):
        if learner == "bob":
            raise SystemExit("the grader is killed")
        return real(learner, *args)
    monkeypatch.setattr(grade, "grade_notebook", dies_at_bob)
    out = tmp_path / "report.csv"
    with pytest.raises(SystemExit):
        main(["grade", str(tmp_path / "class"), "--out", str(out), "--jobs", "1", "--no-progress"])
    with open(out, encoding="utf-8") as f:
        kept = list(csv.DictReader(f))
    assert [r["exercise"] for r in kept] == EXERCISES and {r["learner"] for r in kept} == {"ann"}
