"""Gradescope's autograder: the bundle, and `run_autograder` run on four submissions in a
scratch directory laid out as Gradescope's (source/, submission/, results/).

The assignment is a small notebook made of notebook 01's exercise cells (a few seconds a
submission). As root, the kernels run as nobody, who must be able to run the grader's
Python; where that Python sits in a folder only root can read (/root/.pyenv), the test
runs the same packages with the system's interpreter of the same version.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

from course_lib.instructor import grade, gradescope, sandbox
from course_lib.__main__ import main
from course_lib.instructor.edition import student_notebook
from test_grade import EXERCISES, small_notebook, solution_cell, write

REPOSITORY = Path(__file__).resolve().parents[2]


def _runs_as_nobody(python) -> bool:
    try:
        import pwd                   # POSIX: where there is none, nobody does not exist either
        nobody = pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        return False
    try:
        return subprocess.run([python, "-c", ""], user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                              capture_output=True).returncode == 0
    except OSError:    # not even started: nobody may not reach the interpreter
        return False


@pytest.fixture(scope="module")
def layout():
    """A folder every user may enter (kernels as nobody import the bundle's course_lib from it)."""
    root = Path(tempfile.mkdtemp(prefix="gradescope-test-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root)


@pytest.fixture(scope="module")
def python(layout):
    return python_for_nobody(layout)


def python_for_nobody(folder: Path) -> str:
    """This interpreter, or (as root, when nobody cannot run it) the system's Python of the same
    version over this environment's packages, in a venv made in `folder` (which every user may enter).
    Gradescope's autograder runs on Linux, the learner's code as nobody: not where POSIX's users are not."""
    try:
        import pwd  # noqa: F401
    except ImportError:
        pytest.skip("Gradescope runs its autograders on Linux (POSIX users); this machine has none")
    if getattr(os, "geteuid", lambda: -1)() != 0 or _runs_as_nobody(sys.executable):
        return sys.executable
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        pytest.skip(f"nobody cannot run {sys.executable}, and there is no {system}")
    venv = folder / "venv"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert _runs_as_nobody(str(venv / "bin" / "python"))
    return str(venv / "bin" / "python")


@pytest.fixture(scope="module")
def bundle(layout):
    """The autograder zip of a one-notebook assignment, made through the command line."""
    instructor = layout / "instructor"
    write(small_notebook(), instructor, "01_tokens_and_task.ipynb")
    out = layout / "autograder.zip"
    assert main(["grade", str(instructor), "--gradescope", str(out), "--timeout", "60", "--memory", "2"]) == 0
    return out


def run_autograder(layout, bundle, python, name, files):
    """Lay out Gradescope's folders for one submission (files: relative path -> notebook, text, or
    a Path that the file is a symbolic link to), run `run_autograder` and return (results.json, the root)."""
    root = layout / name
    (root / "results").mkdir(parents=True)
    (root / "submission").mkdir()
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    for relative, content in files.items():
        if isinstance(content, Path):
            (root / "submission" / relative).symlink_to(content)
        elif isinstance(content, str):
            (root / "submission" / relative).write_text(content)
        else:
            path = root / "submission" / relative
            write(content, path.parent, path.name)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": python,
           "PYTHONPATH": str(root / "source"),   # the bundle's own course_lib, as setup.sh installs it
           sandbox.WITHOUT_BWRAP: "1"}          # as in Gradescope's container: another user instead
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text()), root


def assert_valid(results):
    """Gradescope's format: a score, and tests with name, score, max_score and output."""
    assert isinstance(results["score"], float) and isinstance(results["output"], str)
    assert [t["name"].split(":")[0] for t in results["tests"]] == EXERCISES
    for t in results["tests"]:
        assert set(t) >= {"name", "score", "max_score", "output"} and t["max_score"] == 1.0
        assert t["score"] in (0.0, 1.0) and isinstance(t["output"], str) and t["output"]
    assert results["score"] == sum(t["score"] for t in results["tests"])


def test_bundle_holds_what_setup_needs_and_no_notebook(bundle):
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        spec = json.loads(zf.read("exercises.json"))
        setup = zf.read("setup.sh")
    assert {"setup.sh", "run_autograder", "exercises.json", "requirements.txt", "pyproject.toml",
            "course_lib/instructor/grade.py", "course_lib/instructor/gradescope.py",
            "course_lib/instructor/judge_runner.py"} <= names
    assert not [n for n in names if n.endswith(".ipynb") or "__pycache__" in n]   # no solutions
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    checkers = [["check_encode", ["my_encode"]], ["check_answer", ["my_answer"]],
                ["check_central_difference", ["central_difference"]],
                ["check_numerical_gradient", ["numerical_gradient"]]]
    assert spec == [{"notebook": "01_tokens_and_task.ipynb",
                     "exercises": [[e, t, c] for e, t, c in zip(EXERCISES, [
                         "encode by hand", "the answer function", "a central-difference derivative",
                         "numerical gradients of arrays"], checkers)]}]
    assert subprocess.run(["bash", "-n"], input=setup, capture_output=True).returncode == 0


def test_a_passing_submission_nested_and_renamed(layout, bundle, python):
    results, _ = run_autograder(layout, bundle, python, "pass",
                                {"my work/01_tokens_and_task (2).ipynb": small_notebook()})
    assert_valid(results)
    assert results["score"] == 4.0 and {t["output"] for t in results["tests"]} == {"passed"}
    assert results["output"].startswith("4 of 4 exercises passed, 1 of 1 notebook graded")


def test_a_wrong_answer_and_a_library_call(layout, bundle, python):
    nb = small_notebook()
    cell = solution_cell(nb, "Exercise 1.2")
    cell.source = cell.source.replace("return min(a, b, c)", "return max(a, b, c)")
    solution_cell(nb, "Exercise 1.5").source = ("def numerical_gradient(f, x, h=1e-5):\n"
                                                "    return cl.gradcheck.numerical_gradient(f, x, h)")
    results, _ = run_autograder(layout, bundle, python, "wrong", {"notebook.ipynb": nb})  # found by its exercises
    assert_valid(results)
    tests = {t["name"].split(":")[0]: t for t in results["tests"]}
    assert results["score"] == 2.0
    assert tests["Exercise 1.2"]["score"] == 0.0
    assert tests["Exercise 1.2"]["output"].startswith("failed [one case per operation]: my_answer('Min'")
    assert tests["Exercise 1.5"]["score"] == 0.0
    assert tests["Exercise 1.5"]["output"].startswith(
        "library call [") and "calls course_lib.gradcheck.numerical_gradient" in tests["Exercise 1.5"]["output"]
    assert "0 points" in tests["Exercise 1.5"]["output"]


def test_a_message_no_strict_utf8_writer_takes_is_graded_like_any_other(layout, bundle, python):
    """A lone surrogate in the learner's exception (test_attacks.py's surrogate_message)."""
    nb = small_notebook()
    solution_cell(nb, "Exercise 1.2").source = "def my_answer(op, args):\n    raise ValueError('ends here \\udcff')\n"
    results, _ = run_autograder(layout, bundle, python, "surrogate", {"01_tokens_and_task.ipynb": nb})
    assert_valid(results)
    tests = {t["name"].split(":")[0]: t for t in results["tests"]}
    assert results["score"] == 3.0 and "ends here \\udcff" in tests["Exercise 1.2"]["output"]


HOSTILE = """\
import json, os, pathlib
root = pathlib.Path(ROOT)        # /autograder on Gradescope: a learner may know it
forged = json.dumps({"score": 100.0, "tests": []})
attempts = [lambda: (root / "results" / "results.json").write_text(forged),
            lambda: (root / "results" / "other.json").write_text(forged),
            lambda: open(root / "source" / "course_lib" / "instructor" / "grade.py", "a").write("# mine"),
            lambda: (root / "source" / "run_autograder").unlink(),
            lambda: (root / "submission" / "extra.txt").write_text("mine"),
            lambda: open(root / "submission" / "01_tokens_and_task.ipynb", "a").write(" "),
            lambda: os.chmod(root / "results", 0o777)]
refused = 0
for attempt in attempts:
    try:
        attempt()
    except OSError:
        refused += 1
pathlib.Path("mine.txt").write_text("its own scratch copy is writable")
print(refused, "of", len(attempts), "refused")
"""


def _stub_cell(nb, exercise):
    ex = next(e for e in grade.expected_exercises(nb) if e.name == exercise)
    return nb.cells[ex.check_cell - 1]


def test_a_hostile_notebook_writes_nothing_outside_its_scratch_copy(layout, bundle, python):
    if os.geteuid() != 0:
        pytest.skip("the kernels run as another user only when the grader runs as root")
    nb = student_notebook(small_notebook())[0]
    stub = _stub_cell(nb, "Exercise 1.1")
    stub.source = HOSTILE.replace("ROOT", repr(str(layout / "hostile"))) + stub.source
    _stub_cell(nb, "Exercise 1.2").source = (      # the library's answer, by a copy of its code
        "import types\nf = cl.task.answer\nmy_answer = types.FunctionType(f.__code__, f.__globals__)\n")
    results, root = run_autograder(layout, bundle, python, "hostile", {"01_tokens_and_task.ipynb": nb})
    assert_valid(results)
    assert results["score"] == 0.0
    outputs = [t["output"] for t in results["tests"]]
    assert outputs[0] == outputs[2] == outputs[3] == "not done yet" and outputs[1].startswith("library call")
    # every file of the layout is the test's or the grader's: none written, changed or removed
    with zipfile.ZipFile(bundle) as zf:
        for name in zf.namelist():
            assert (root / "source" / name).read_bytes() == zf.read(name), name
    assert sorted(p.name for p in (root / "submission").iterdir()) == ["01_tokens_and_task.ipynb"]
    assert sorted(p.name for p in (root / "results").iterdir()) == ["results.json"]
    assert stat.S_IMODE((root / "results").stat().st_mode) == 0o755


MARKER = "course-lib-gradescope-marker"
# one attack in each exercise's cells (each runs in a worker of its own, one after another)
ROUND_TWO = {
    "Exercise 1.1": ("import os\nfor k in range(48):\n    try:\n"        # fill the disk
                     f"        open('/tmp/{MARKER}-' + str(k), 'wb').write(bytes(2**25))\n"
                     "    except OSError:\n        break\n"),
    "Exercise 1.2": ("import subprocess, sys\n"                                 # outlive the worker
                     f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{MARKER}'],"
                     " start_new_session=True)\n"),
    "Exercise 1.4": ("import os, signal, time\nstopped = 0\n"                  # stop the other workers
                     "for pid in set(map(int, filter(str.isdigit, os.listdir('/proc')))) - {os.getpid()}:\n"
                     "    try:\n        os.kill(pid, signal.SIGSTOP)\n        stopped += 1\n"
                     "    except OSError:\n        pass\n"),
    "Exercise 1.5": ("import os\nn = 0\ntry:\n    for _ in range(2000):\n"      # a swarm
                     "        if os.fork() == 0:\n            import time; time.sleep(600); os._exit(0)\n"
                     "        n += 1\nexcept OSError:\n    pass\n"),
}


def test_the_second_rounds_attacks_earn_nothing_and_leave_nothing(layout, bundle, python):
    """As nobody's group without bubblewrap, as on Gradescope: a filled disk is stopped, a process
    left behind, a swarm and signals to every process end with their worker, and each exercise
    after them is graded as usual."""
    if os.geteuid() != 0:
        pytest.skip("the kernels run as another user only when the grader runs as root")
    nb = student_notebook(small_notebook())[0]
    for exercise, attack in ROUND_TWO.items():
        _stub_cell(nb, exercise).source = attack + _stub_cell(nb, exercise).source
    results, _ = run_autograder(layout, bundle, python, "round-two", {"01_tokens_and_task.ipynb": nb})
    assert_valid(results)
    outputs = [t["output"] for t in results["tests"]]
    assert results["score"] == 0.0 and "disk limit" in outputs[0] and outputs[1:] == ["not done yet"] * 3, outputs
    assert not [name for name in os.listdir("/tmp") if name.startswith(MARKER)]
    import psutil
    assert not [p for p in psutil.process_iter(["cmdline"]) if MARKER in " ".join(p.info["cmdline"] or [])]


def test_a_link_to_someone_elses_notebook_is_not_graded(layout, bundle, python):
    """A link (git and zip keep them) to a classmate's notebook would be graded as the learner's."""
    elsewhere = write(small_notebook(), layout / "a classmate", "01_tokens_and_task.ipynb")
    results, _ = run_autograder(layout, bundle, python, "link", {"01_tokens_and_task.ipynb": elsewhere})
    assert_valid(results)
    assert results["score"] == 0.0
    assert {t["output"] for t in results["tests"]} == {
        f"not graded: 01_tokens_and_task.ipynb is a symbolic link (to {elsewhere}): submit the notebook itself"}


def test_no_notebook_at_all(layout, bundle, python):
    results, _ = run_autograder(layout, bundle, python, "empty", {"README.txt": "I forgot"})
    assert_valid(results)
    assert results["score"] == 0.0
    assert results["output"].startswith("no notebook of the assignment in your submission: upload "
                                        "01_tokens_and_task.ipynb")
    assert {t["output"] for t in results["tests"]} == {
        "not graded: 01_tokens_and_task.ipynb is not in your submission"}


def test_notebooks_are_matched_by_name_then_by_their_exercises(tmp_path):
    spec = [{"notebook": "01_tokens_and_task.ipynb", "exercises": [["Exercise 1.1", "a"]]},
            {"notebook": "02_embeddings.ipynb", "exercises": [["Exercise 2.1", "b"]]},
            {"notebook": "03_attention.ipynb", "exercises": [["Exercise 3.1", "c"]]}]
    one = write(small_notebook(), tmp_path / "a" / "b", "untitled.ipynb")      # exercises 1.x
    two = write(small_notebook(), tmp_path, "jdoe_02_Embeddings-Copy1.ipynb")  # name, any case
    found = gradescope.match(spec, gradescope._submitted(tmp_path))
    assert found == {"01_tokens_and_task.ipynb": one, "02_embeddings.ipynb": two}


@pytest.mark.parametrize("args, says", [
    (lambda d: ["--gradescope", str(d / "autograder.tar")], "ending in .zip"),
    (lambda d: [str(d / "plain"), "--gradescope", str(d / "a.zip")], "no exercises with a checker"),
    (lambda d: [str(d / "missing"), "--gradescope", str(d / "a.zip")], "does not exist"),
])
def test_bad_bundle_requests_are_one_line(tmp_path, capsys, args, says):
    nb = small_notebook()
    nb.cells = nb.cells[:1]
    write(nb, tmp_path / "plain")
    assert main(["grade", *args(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1
