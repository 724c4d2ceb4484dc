"""`python -m course_lib doctor`: passes here, and names the fix for what it finds broken."""
import io
import os
import subprocess
import sys
from pathlib import Path

from course_lib import doctor

ROOT = Path(__file__).resolve().parents[2]


def run_doctor(**env):
    """The doctor as a learner runs it, in a new process importing this course_lib."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "course_lib", "doctor"], env=full, capture_output=True,
                          text=True, timeout=300)


def test_passes_in_the_project_environment():
    done = run_doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(line[0] in "✓–" for line in lines[:-1]) and lines[-1] == "everything the course needs works"
    for found in ("Python 3.", "match requirements.txt", "Numba", "BLAS: NumPy uses", "ipywidgets",
                  "a course-model step runs", "float64 gradient check of the model passes"):
        assert found in done.stdout
    assert done.stderr == ""
    assert "memory limit: enforced by the OS (RLIMIT_AS)" in done.stdout


def test_on_the_fallback_blas_and_without_posix_facilities_it_says_so():
    """COURSE_LIB_BLAS=numba, and the facilities that Windows lacks hidden (tests/windows_like)."""
    windows_like = Path(__file__).resolve().parents[1] / "windows_like"
    done = run_doctor(COURSE_LIB_BLAS="numba", PYTHONPATH=os.pathsep.join([str(windows_like), str(ROOT)]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the kernels call Numba's a @ b (COURSE_LIB_BLAS=numba)" in done.stdout
    assert "memory limit: watched" in done.stdout and "a watchdog thread (no SIGALRM here" in done.stdout
    assert " on Linux " in done.stdout.splitlines()[0]


def test_unwritable_numba_cache_names_the_fix(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")  # a folder cannot be made under a file, even by root
    done = run_doctor(NUMBA_CACHE_DIR=str(blocker / "cache"))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    bad = next(i for i, line in enumerate(lines) if line.startswith("✗"))
    assert "Numba cannot write its cache" in lines[bad] and str(blocker / "cache") in lines[bad]
    assert lines[bad + 1].startswith("    fix: set NUMBA_CACHE_DIR to a folder you can write to")
    assert "Traceback" not in done.stdout + done.stderr


def test_wrong_pinned_version_names_the_fix(tmp_path):
    pins = tmp_path / "requirements.txt"
    pins.write_text("# pinned\nnumpy==0.0.1\nthreadpoolctl==3.6.0\nnot-a-real-tool==1.0\n-e .\n")
    out = io.StringIO()
    assert doctor.run(requirements=pins, out=out) == 1
    text = out.getvalue()
    assert "✗ packages differ from requirements.txt: numpy " in text and "(requirements.txt: 0.0.1)" in text
    assert f"    fix: pip install -r {pins}" in text
    assert "– not installed, needed only to build the book or run the tests: not-a-real-tool" in text
    assert "threadpoolctl" not in text.split("differ from requirements.txt:")[1].splitlines()[0]


def test_without_the_repository_versions_are_not_compared(tmp_path):
    [check] = doctor.check_versions(tmp_path / "requirements.txt")
    assert check.ok is None and "installed without the repository" in check.text


def test_a_check_that_crashes_is_a_line_not_a_traceback(monkeypatch):
    def broken():
        raise RuntimeError("no BLAS today")

    monkeypatch.setattr(doctor, "check_blas", broken)
    out = io.StringIO()
    assert doctor.run(out=out) == 1
    assert "✗ BLAS: RuntimeError: no BLAS today\n    fix: pip install -r requirements.txt" in out.getvalue()
