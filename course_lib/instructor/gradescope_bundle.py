"""Gradescope's autograder bundle: `python -m course_lib grade [NOTEBOOKS] --gradescope autograder.zip`.

NOTEBOOKS (default: the course's notebooks/) are the instructor edition of the assignment's
notebooks. The zip holds, at its root (Gradescope unzips it into /autograder/source):

    setup.sh          run once, as root, when Gradescope builds the image (Ubuntu): Python 3.11,
                      a venv with the pinned requirements and course_lib, the kernels compiled
    run_autograder    run for every submission: python -m course_lib.instructor.gradescope (see there)
    exercises.json    the assignment: each notebook's name and its exercises. The notebooks
                      themselves are not shipped: their solutions would be there to read
    requirements.txt, pyproject.toml, course_lib/   what setup.sh installs (nothing is on PyPI)
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import nbformat

from .._files import write_atomic
from .._words import count
from ..exercises.cells import expected_exercises
from .judge import checker_call
from .grade import GradeError, check_out

PACKAGE = Path(__file__).resolve().parents[1]     # course_lib/
REPOSITORY = PACKAGE.parent

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04:
# the pinned requirements were seen working with Python 3.11).
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
apt-get update
if apt-get install -y python3.11 python3.11-venv; then PYTHON=python3.11
else apt-get install -y python3 python3-venv; PYTHON=python3; fi
"$PYTHON" -m venv "$ROOT/venv"
grep -v '^-e' "$SOURCE/requirements.txt" > "$ROOT/requirements-pinned.txt"
"$ROOT/venv/bin/pip" install --no-cache-dir -r "$ROOT/requirements-pinned.txt"
# not editable: the grader's code lives in the venv, which only root may change
"$ROOT/venv/bin/pip" install --no-cache-dir --no-deps "$SOURCE"
# compile course_lib's kernels now, once, rather than in every submission's kernels
"$ROOT/venv/bin/python" -m course_lib doctor || true
# the learners' code runs as nobody: the bundle and the installed course_lib (its checkers and
# solutions) are root's alone; nobody imports the sandbox's copy, without the solutions
INSTALLED="$("$ROOT/venv/bin/python" -c 'import course_lib, os; print(os.path.dirname(course_lib.__file__))')"
chmod -R go-rwx "$SOURCE" "$INSTALLED"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as root, in a fresh container: grade the notebooks
# in $ROOT/submission and write $ROOT/results/results.json (see course_lib/instructor/gradescope.py).
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
exec "${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}" -m course_lib.instructor.gradescope "$ROOT" \\
    --timeout {timeout:g} --memory {memory:g}
"""


def assignment(path) -> list[dict]:
    """[{"notebook": name, "exercises": [[exercise, title, [checker, [argument names]]], ...]}] for
    each notebook of `path` (a notebook or a folder of them) that sets exercises."""
    path = Path(path)
    if not path.exists():
        raise GradeError(f"{path} does not exist")
    notebooks = [path] if path.is_file() else sorted(path.glob("*.ipynb"))
    found = []
    for nb_path in notebooks:
        try:
            nb = nbformat.read(nb_path, as_version=4)
        except Exception as err:  # nbformat raises several kinds for a broken file
            raise GradeError(f"{nb_path} is not a readable notebook ({type(err).__name__})") from None
        exercises = [[ex.name, ex.title, list(checker_call(ex.name, nb.cells[ex.check_cell].source) or [])]
                     for ex in expected_exercises(nb)]
        if exercises:
            found.append({"notebook": nb_path.name, "exercises": exercises})
    if not found:
        raise GradeError(f"no exercises with a checker in {path}: give the instructor edition's notebooks")
    return found


def _add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))   # same inputs, same bytes
    info.external_attr = (0o100000 | mode) << 16                      # a regular file, with its mode
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(notebooks, out, timeout: float = 300, memory_gb: float = 4) -> list[dict]:
    """Write the bundle to `out`; return the assignment it grades."""
    spec = assignment(notebooks)
    needed = [REPOSITORY / "requirements.txt", REPOSITORY / "pyproject.toml"]
    if not all(p.is_file() for p in needed):
        raise GradeError(f"requirements.txt and pyproject.toml are not beside {PACKAGE}: run this from "
                         "the course's repository (pip install -e .)")
    sources = sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                     and p.suffix in (".py", ".js"))

    def write(f):
        with zipfile.ZipFile(f, "w") as zf:
            _add(zf, "setup.sh", SETUP_SH.encode(), 0o755)
            _add(zf, "run_autograder", RUN_AUTOGRADER.format(timeout=timeout, memory=memory_gb).encode(), 0o755)
            _add(zf, "exercises.json", json.dumps(spec, indent=1).encode())
            for p in needed:
                _add(zf, p.name, p.read_bytes())
            for p in sources:
                _add(zf, p.relative_to(REPOSITORY).as_posix(), p.read_bytes())

    write_atomic(out, write)
    return spec


def command(path, out, timeout: float = 300, memory_gb: float = 4) -> int:
    """The --gradescope branch of `python -m course_lib grade`."""
    out = Path(out)
    if out.suffix != ".zip":
        raise GradeError(f"--gradescope {out}: give a file name ending in .zip")
    check_out(out, "autograder.zip")
    spec = build(path or REPOSITORY / "notebooks", out, timeout, memory_gb)
    n = sum(len(nb["exercises"]) for nb in spec)
    print(f"autograder: {out} ({count(len(spec), 'notebook')}, {count(n, 'exercise')} of 1 point each); "
          f"upload it to a Gradescope programming assignment (base image Ubuntu 22.04)")
    return 0
