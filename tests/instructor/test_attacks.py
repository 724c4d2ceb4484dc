"""Learners who want marks they did not earn: every attack on the grader that we know of, kept as
a test. Each attacker's notebook is one exercise of notebook 01's student edition (nothing
solved) with the attack in its cell; an honest learner is graded beside them. Every attack must
earn nothing, and leave the honest learner's grade, the report and the class folder as they were.

Graded two ways: with bubblewrap (where it runs), and as the user nobody without it (root only:
as in Gradescope's container, which tests/instructor/test_gradescope.py runs too).
"""
import csv
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import numpy as np
import psutil
import pytest

from course_lib.instructor import grade, sandbox, judge_runner
from course_lib.instructor.edition import student_notebook
from test_grade import EXERCISES, by_exercise, small_notebook, write
from test_gradescope import REPOSITORY, python_for_nobody

MARKER = "course-lib-attack-marker"

# exercise -> attack cell source; REPORT, HONEST and NOTEBOOKS are replaced by the real paths
# (quoted): a learner may know them
ATTACKS = {
    # 1. forged records and patched checkers
    "forge_records": ("Exercise 1.1",
                      "import json, os, glob\n"
                      "for path in glob.glob('/tmp/**/*.jsonl', recursive=True):\n"
                      "    try:\n"
                      "        with open(path, 'a') as f:\n"
                      "            for n in ('1.1', '1.2', '1.4', '1.5'):\n"
                      "                f.write(json.dumps({'exercise': 'Exercise ' + n, 'status': 'passed'}) + '\\n')\n"
                      "    except OSError:\n"
                      "        pass\n"
                      "def my_encode(text):\n    raise NotImplementedError\n"),
    "patch_checker": ("Exercise 1.1",
                      "try:\n    cl.checks.core._run = lambda *a, **k: None\nexcept AttributeError:\n    pass\n"
                      "def my_encode(text):\n    return [0]\n"),
    "patch_expected": ("Exercise 1.2",
                       "cl.task.answer = lambda op, args: 0\ndef my_answer(op, args):\n    return 0\n"),
    # 2. library calls that a watch list would miss
    "code_copy": ("Exercise 1.2",
                  "import types\nf = cl.task.answer\n"
                  "my_answer = types.FunctionType(f.__code__, f.__globals__, 'my_answer', f.__defaults__)\n"),
    "getsource": ("Exercise 1.2",
                  "import inspect\nexec(inspect.getsource(cl.task.answer).replace('def answer', 'def my_answer'))\n"),
    "thread": ("Exercise 1.2",
               "import threading\n"
               "def my_answer(op, args):\n"
               "    out = []\n"
               "    t = threading.Thread(target=lambda: out.append(cl.task.answer(op, args)))\n"
               "    t.start(); t.join()\n"
               "    return out[0] if out else 0\n"),
    "swap_then_call": ("Exercise 1.2",
                       "real = cl.task.answer\ncl.task.answer = print\n"
                       "def my_answer(op, args):\n    try:\n        return real(op, args)\n"
                       "    except BaseException:\n        return 0\n"),
    "solutions_on_disk": ("Exercise 1.2",
                          "import glob\n"
                          "def my_answer(op, args):\n    raise NotImplementedError\n"
                          "for path in glob.glob(NOTEBOOKS + '/01_*.ipynb'):\n"
                          "    try:\n"
                          "        text = open(path).read()\n"
                          "    except OSError:\n"
                          "        continue\n"
                          "    import json\n"
                          "    for cell in json.loads(text)['cells']:\n"
                          "        src = ''.join(cell['source'])\n"
                          "        if 'def my_answer' in src and 'NotImplementedError' not in src:\n"
                          "            exec(src)\n"),
    # 4. other learners, the report, processes left behind
    "leftover_process": ("Exercise 1.1",
                         "import subprocess, sys\n"
                         "subprocess.Popen([sys.executable, '-c', 'import time, sys; time.sleep(6); "
                         "open(REPORT, \"w\").write(\"forged\"); open(HONEST, \"w\").write(\"{}\")', "
                         f"'{MARKER}'], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                         "def my_encode(text):\n    raise NotImplementedError\n"),
    "classmates": ("Exercise 1.2",
                   "import glob, json\n"
                   "def my_answer(op, args):\n    raise NotImplementedError\n"
                   "for proc in glob.glob('/proc/[0-9]*/cmdline'):\n"
                   "    try:\n"
                   "        words = open(proc, 'rb').read().split(b'\\0')\n"
                   "    except OSError:\n"
                   "        continue\n"
                   "    for w in words:\n"
                   "        for path in glob.glob(w.decode(errors='ignore') + '/*/*.ipynb'):\n"
                   "            try:\n"
                   "                cells = json.load(open(path))['cells']\n"
                   "            except (OSError, ValueError):\n"
                   "                continue\n"
                   "            for cell in cells:\n"
                   "                src = ''.join(cell['source'])\n"
                   "                if 'def my_answer' in src and 'NotImplementedError' not in src:\n"
                   "                    exec(src)\n"),
    # 5. crash the grader
    "kill_parent": ("Exercise 1.1",
                    "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n"
                    "def my_encode(text):\n    return [0]\n"),
    "unreadable_return": ("Exercise 1.2",
                          "def my_answer(op, args):\n    return np.array([object()])\n"),
    # fill the disk that the grader and the classmates' judges share (the scratch folder, /tmp)
    "fill_the_disk": ("Exercise 1.1",
                      "import os\n"
                      "for k in range(48):\n"
                      "    for folder in ('.', '/tmp'):\n"
                      "        try:\n"
                      f"            with open(os.path.join(folder, '{MARKER}-' + str(k)), 'wb') as f:\n"
                      "                f.write(bytes(2**25))\n"
                      "        except OSError:\n"
                      "            pass\n"
                      "def my_encode(text):\n    raise NotImplementedError\n"),
    # 6. end the class's report: a lone surrogate, which a strict UTF-8 writer refuses, in a message
    "surrogate_message": ("Exercise 1.2",
                          "def my_answer(op, args):\n    raise ValueError('the report ends here \\udcff')\n"),
}


def exercise_cell(nb, exercise):
    """The code cell just above the exercise's check cell (the student edition's stub)."""
    ex = next(e for e in grade.expected_exercises(nb) if e.name == exercise)
    return next(c for c in reversed(nb.cells[ex.first_cell:ex.check_cell]) if c.cell_type == "code")


def _only(nb, exercise):
    """The notebook's setup cell and the one exercise under attack (one worker per attacker)."""
    ex = next(e for e in grade.expected_exercises(nb) if e.name == exercise)
    nb.cells = nb.cells[:1] + nb.cells[ex.first_cell:ex.check_cell + 1]
    return nb


def _memorised(notebook, exercise, checker, spy, solution) -> nbformat.NotebookNode:
    """The exercise's cells of `notebook`, its solution cell replaced by `solution`, which starts
    with TABLE: what `spy` recorded while the notebook's checker ran on it (at home)."""
    import contextlib
    import io
    table = {}
    with contextlib.redirect_stdout(io.StringIO()):
        assert checker(lambda *args: spy(table, *args)).passed
    source = nbformat.read(Path(grade.COURSE_NOTEBOOKS) / notebook, as_version=4)
    ex = next(e for e in grade.expected_exercises(source) if e.name == exercise)
    nb = nbformat.v4.new_notebook(metadata=source.metadata)
    nb.cells = source.cells[ex.first_cell:ex.check_cell + 1]
    next(c for c in nb.cells if "### BEGIN SOLUTION" in c.source).source = f"TABLE = {table!r}\n" + solution
    return nb


def _memorised_softmax_notebook():
    """Exercise 3.1 answered from a table of the notebook checker's own cases: right on every
    case the notebook checks, wrong elsewhere."""
    import course_lib as cl
    from course_lib.checks import reference

    def spy(table, x):
        y = reference.softmax(x, axis=-1).astype(x.dtype)
        table[hashlib.sha1(x.tobytes() + str(x.shape).encode() + str(x.dtype).encode()).hexdigest()] = y.tolist()
        return y
    return _memorised("03_single_head_attention.ipynb", "Exercise 3.1", cl.checks.check_stable_softmax, spy,
                      "import hashlib\n"
                      "def softmax(x):\n"
                      "    key = hashlib.sha1(x.tobytes() + str(x.shape).encode()\n"
                      "                       + str(x.dtype).encode()).hexdigest()\n"
                      "    if key in TABLE:\n"
                      "        return np.array(TABLE[key], dtype=x.dtype)\n"
                      "    return np.full_like(x, 1 / x.shape[-1])\n")


def _memorised_count_notebook():
    """Exercise 7.3 (a checker of fixed configurations until fresh ones were drawn) answered from
    a table of the counts the notebook's checker asks for."""
    import course_lib as cl
    from course_lib.checks.stacking import _count

    def spy(table, cfg):
        table[repr(sorted(vars(cfg).items()))] = _count(cfg)
        return _count(cfg)
    return _memorised("07_stacking_and_output_head.ipynb", "Exercise 7.3", cl.checks.check_param_count, spy,
                      "def param_count(cfg):\n    return TABLE.get(repr(sorted(vars(cfg).items())), 0)\n")


def _grade_as_nobody(klass: Path, folder: Path) -> list[dict]:
    """Grade through the command line (a Python that nobody can run, made in `folder`, which
    every user may enter; removed afterwards): the report's rows."""
    folder.chmod(0o755)
    try:
        return _grade_with(klass, folder, python_for_nobody(folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _grade_with(klass, folder, python) -> list[dict]:
    out = folder / "graded.csv"
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), sandbox.WITHOUT_BWRAP: "1"}
    done = subprocess.run([python, "-m", "course_lib", "grade", str(klass), "--out", str(out), "--user", "nobody",
                           "--jobs", "2", "--timeout", "60", "--memory", "2", "--no-progress"],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "bubblewrap cannot run here, so learners' code ran as the user you named" in done.stderr
    with open(out, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _modes():
    modes = [pytest.param("bwrap", marks=pytest.mark.skipif(sandbox.bwrap() is None,
                                                            reason="bubblewrap cannot run here"))]
    as_root = getattr(os, "geteuid", lambda: 1)() == 0
    modes.append(pytest.param("user", marks=pytest.mark.skipif(not as_root, reason="--user needs root")))
    return modes


@pytest.fixture(scope="module", params=_modes())
def attacked(request, tmp_path_factory):
    """(mode, rows, class folder, files before, report path) of a class of attackers and an honest learner."""
    mode = request.param
    root = tmp_path_factory.mktemp(f"attacks-{mode}")
    klass, report = root / "class", root / "report.csv"
    honest = write(small_notebook(), klass / "honest", "01_small.ipynb")
    for name, (exercise, attack) in ATTACKS.items():
        nb = _only(student_notebook(small_notebook())[0], exercise)
        exercise_cell(nb, exercise).source = attack.replace("REPORT", repr(str(report))).replace(
            "HONEST", repr(str(honest))).replace("NOTEBOOKS", repr(str(grade.COURSE_NOTEBOOKS)))
        write(nb, klass / name, "01_small.ipynb")
    write(_memorised_softmax_notebook(), klass / "memorised", "03_small.ipynb")
    write(_memorised_count_notebook(), klass / "memorised", "07_small.ipynb")
    # links (git and tar keep them) to the honest learner's notebook, and to their folder
    (klass / "linked_notebook").mkdir()
    (klass / "linked_notebook" / "01_small.ipynb").symlink_to(honest)
    (klass / "linked_folder").symlink_to(honest.parent, target_is_directory=True)
    report.write_text("the instructor's report")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    if mode == "bwrap":
        rows = grade.grade(klass, timeout=60, memory=2 * 2**30, progress=False, jobs=2)
    else:                   # as root, the learners' code as nobody, with a Python that nobody can run
        rows = _grade_as_nobody(klass, Path(tempfile.mkdtemp(prefix="attacks-nobody-")))
    time.sleep(8)           # what a leftover process would have done by now
    return mode, rows, root, before, report


def test_no_attack_earns_credit(attacked):
    mode, rows, *_ = attacked
    for name in ATTACKS:
        if name == "solutions_on_disk" and mode == "user":
            continue        # without bubblewrap, files others may read are readable (instructors.md)
        got = {e: r["status"] for e, r in by_exercise(rows, name).items()}
        assert list(got) == [ATTACKS[name][0]] and "passed" not in got.values(), (name, got)


def test_library_calls_are_named_however_they_are_reached(attacked):
    _, rows, *_ = attacked
    for name in ("code_copy", "getsource", "thread", "swap_then_call"):
        row = by_exercise(rows, name)["Exercise 1.2"]
        assert row["status"] == "library call" and "task.answer" in row["message"], (name, row)


def test_patched_course_lib_and_records_change_nothing(attacked):
    _, rows, *_ = attacked
    assert by_exercise(rows, "forge_records")["Exercise 1.1"]["status"] == "not done"
    assert by_exercise(rows, "patch_checker")["Exercise 1.1"]["status"] == "failed"
    assert by_exercise(rows, "patch_expected")["Exercise 1.2"]["status"] == "failed"
    assert by_exercise(rows, "unreadable_return")["Exercise 1.2"]["status"] == "failed"


def test_a_link_to_a_classmates_notebook_or_folder_is_not_graded(attacked):
    _, rows, *_ = attacked
    for learner, says in (("linked_notebook", "a symbolic link (to "),
                          ("linked_folder", "in a folder that is a symbolic link (to ")):
        [row] = [r for r in rows if r["learner"] == learner]
        assert row["status"] == "error" and row["message"].startswith(says), row


def test_a_worker_that_fills_the_disk_is_stopped_and_its_files_are_gone(attacked):
    _, rows, *_ = attacked
    row = by_exercise(rows, "fill_the_disk")["Exercise 1.1"]
    assert row["status"] == "error" and "disk limit" in row["message"], row
    assert not [name for name in os.listdir("/tmp") if name.startswith(MARKER)]


def test_memorised_answers_fail_the_fresh_cases(attacked):
    _, rows, *_ = attacked
    for exercise in ("Exercise 3.1", "Exercise 7.3"):
        row = by_exercise(rows, "memorised")[exercise]
        assert row["status"] == "failed" and row["stage"].endswith("(the grader's fresh random cases)"), row


def test_the_honest_learner_the_report_and_the_class_are_untouched(attacked):
    _, rows, root, before, report = attacked
    assert {e: r["status"] for e, r in by_exercise(rows, "honest").items()} == {e: "passed" for e in EXERCISES}
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert report.read_text() == "the instructor's report"
    left = [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]
    assert not left


def test_any_text_a_learner_makes_is_written_to_the_report(attacked, tmp_path):
    """Under --user the report was written by the command itself (_grade_with); here, too, by the
    writer the command uses."""
    _, rows, *_ = attacked
    row = by_exercise(rows, "surrogate_message")["Exercise 1.2"]
    assert row["status"] == "failed" and "the report ends here \\udcff" in row["message"], row
    grade.write_csv(rows, tmp_path / "report.csv")
    with open(tmp_path / "report.csv", newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == len(rows)


def test_a_learner_who_stops_the_grader_costs_only_their_own_notebook(tmp_path, monkeypatch):
    """SIGSTOP to its parent: the notebook ends at its time limit (the clock is the grader's), the
    others are graded."""
    # the stopped judge cannot end its run: the grader waits out the limit and the judge's grace,
    # which is shortened here (30 s by default) to what this small notebook's judge needs
    monkeypatch.setattr(judge_runner, "GRACE", 10)
    write(small_notebook(), tmp_path / "class" / "honest")
    nb = student_notebook(small_notebook())[0]
    exercise_cell(nb, "Exercise 1.1").source = (
        "import os, signal, time\ntry:\n    os.kill(os.getppid(), signal.SIGSTOP)\nexcept OSError:\n    pass\n"
        "time.sleep(3600)\n")
    write(nb, tmp_path / "class" / "stopper")
    start = time.monotonic()
    rows = grade.grade(tmp_path / "class", timeout=15, progress=False, jobs=2)
    assert time.monotonic() - start < 15 + judge_runner.GRACE + 30
    assert {e: r["status"] for e, r in by_exercise(rows, "honest").items()} == {e: "passed" for e in EXERCISES}
    stopper = by_exercise(rows, "stopper")
    assert stopper["Exercise 1.1"]["status"] == "error" and "time limit" in stopper["Exercise 1.1"]["message"]
    assert "passed" not in {r["status"] for r in stopper.values()}


def test_fresh_cases_differ_between_runs():
    """The secret seed is drawn per run: two runs' fresh cases differ (so no table of them holds)."""
    from course_lib.checks import core
    seen = []
    for secret in (1, 2):
        with core.fresh_cases(secret):
            seen.append(core.case_rng(31).standard_normal(4))
    assert not np.array_equal(*seen)
    assert np.array_equal(core.case_rng(31).standard_normal(4), np.random.default_rng(31).standard_normal(4))


def test_the_fresh_run_is_for_checkers_with_random_cases():
    """The judge runs a failed checker again on the notebook's cases only where it drew random
    ones: 1.2's checker meets all 5,000 problems, the same in every run, so its fresh run is the
    notebook's."""
    import contextlib
    import io
    import course_lib as cl
    from course_lib.checks import core, reference

    def drawn_by(checker, fn):
        before = core.generators_drawn()
        with contextlib.redirect_stdout(io.StringIO()):
            assert checker(fn).passed
        return core.generators_drawn() - before

    def my_answer(op, digits):
        if op not in cl.task.OPERATIONS:
            raise ValueError(f"unknown operation {op!r}")
        a, b, c = digits
        return {"First": a, "Second": b, "Last": c, "Max": max(a, b, c), "Min": min(a, b, c)}[op]
    assert drawn_by(cl.checks.check_answer, my_answer) == 0
    assert drawn_by(cl.checks.check_stable_softmax, lambda x: reference.softmax(x, axis=-1).astype(x.dtype)) > 0
