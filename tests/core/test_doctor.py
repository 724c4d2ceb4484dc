"""`python -m course_lib doctor`: passes here, and names the fix for what it finds broken."""
import ast
import io
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from course_lib import doctor
from course_lib.kernels._fast.jit import FIRST_COMPILE

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
    assert done.stderr in ("", FIRST_COMPILE + "\n")      # the kernels compile here if not cached
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


def test_wrong_pinned_version_names_the_fix(tmp_path, monkeypatch):
    pins = tmp_path / "requirements.txt"
    pins.write_text("# pinned\nnumpy==0.0.1 ; python_full_version >= '3.11'\n"
                    "numpy==0.0.2 ; python_full_version < '3.11'"
                    f"\nthreadpoolctl=={doctor._version('threadpoolctl')}\nnot-a-real-tool==1.0\n-e .\n")
    listed = {**doctor.direct_dependencies(), "not-a-real-tool": "book"}
    monkeypatch.setattr(doctor, "direct_dependencies", lambda: listed)
    out = io.StringIO()
    assert doctor.run(requirements=pins, out=out) == 1
    text = out.getvalue()
    assert "✗ packages differ from requirements.txt: numpy " in text and "(requirements.txt: 0.0.1)" in text
    assert f"    fix: pip install -r {pins}" in text
    assert "– not installed, needed only for JupyterLab, the book or the tests: not-a-real-tool" in text
    assert "threadpoolctl" not in text.split("differ from requirements.txt:")[1].splitlines()[0]
    assert "a course-model step runs" in text          # a wrong version does not end the checks


def test_a_missing_package_of_the_course_ends_the_checks_with_its_fix(monkeypatch):
    monkeypatch.setattr(doctor, "_version", lambda name: None if name == "numpy" else "0")
    out = io.StringIO()
    assert doctor.run(out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("✓ Python ")
    assert "numpy not installed" in lines[1] and lines[2] == f"    fix: pip install -r {doctor.REQUIREMENTS}"
    assert lines[3:] == ["– the other checks not run: they need those packages", "1 problem: see the fix under each ✗"]


# (version, platform.system(), platform.machine(), ✓ or ✗, words of the line)
PYTHONS = [
    ((3, 9, 6), "Darwin", "arm64", False, "too old, the course runs on Python 3.11 to 3.15"),   # a stock Mac's
    ((3, 10, 13), "Linux", "x86_64", False, "too old"),
    ((3, 11, 7), "Linux", "x86_64", True, "Python 3.11.7 on Linux x86_64"),
    ((3, 12, 1), "Windows", "AMD64", True, "(CI tests 3.11 and 3.13; the course runs on Python 3.11 to 3.15)"),
    ((3, 13, 0), "Linux", "aarch64", True, "Python 3.13.0 on Linux aarch64"),
    ((3, 15, 0), "Darwin", "arm64", True, "Python 3.15.0 on Darwin arm64 (CI tests"),
    ((3, 16, 0), "Linux", "x86_64", False, "newer than the course supports"),
    ((3, 13, 0), "Darwin", "x86_64", False, "Intel Macs are not supported"),
    ((3, 13, 0), "Linux", "riscv64", True, "a platform the course is not tested on"),
]


@pytest.mark.parametrize("version, system, machine, ok, words", PYTHONS)
def test_the_python_verdict(version, system, machine, ok, words):
    check = doctor.check_python(version, system, machine)
    assert check.ok is ok and words in check.text and bool(check.fix) is (not ok)


def test_a_too_old_python_ends_the_checks(monkeypatch):
    verdict = doctor.check_python((3, 10, 13), "Linux", "x86_64")
    monkeypatch.setattr(doctor, "check_python", lambda: verdict)
    out = io.StringIO()
    assert doctor.run(out=out) == 1
    assert out.getvalue().splitlines()[2:] == ["– the other checks not run: they need that Python",
                                               "1 problem: see the fix under each ✗"]


def test_the_supported_range_is_pyprojects():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == f">={doctor._dotted(doctor.OLDEST)},<3.{doctor.NEWEST[1] + 1}"


def test_doctor_starts_on_old_pythons_without_the_packages():
    """What runs before the Python verdict is Python 3.9's syntax and the standard library alone:
    the modules parse as 3.9, and `python -m course_lib doctor` imports neither NumPy nor Numba
    before its verdicts (a child in which importing either fails prints them, then one line each)."""
    for name in ("__init__.py", "__main__.py", "doctor.py", "_words.py"):
        ast.parse((ROOT / "course_lib" / name).read_text(encoding="utf-8"), feature_version=(3, 9))
    hide = "import sys; sys.modules.update(numpy=None, numba=None); import runpy; " \
           "sys.argv = ['-m', 'doctor']; runpy.run_module('course_lib', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", hide], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert lines[0].startswith("✓ Python ") and lines[1].startswith("✓ installed versions match")
    assert any(line.startswith("✗ Numba: ModuleNotFoundError: import of numba halted") for line in lines)


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
