"""`python -m course_lib doctor`: can this environment run the course? One line per check.

    ✓ fine    ✗ broken, with the fix on the next line    – not checked, and why

Checks: the Python version and the platform; installed versions against requirements.txt
(when the repository is there); Numba compiles, and can write its cache; which BLAS NumPy and
the kernels use, with how many threads; what limits learners' code when `yours` and `grade`
run it; the widget front end; a course-model step, its float64 gradient check, and how long
a step takes. Exit status 1 when any check is ✗.
"""
from __future__ import annotations

import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ._words import count

PACKAGE_DIR = Path(__file__).resolve().parent
REQUIREMENTS = PACKAGE_DIR.parent / "requirements.txt"
TESTED_PYTHON = (3, 11)


@dataclass
class Check:
    ok: bool | None     # True ✓, False ✗ (broken), None – (not applicable)
    text: str
    fix: str = ""


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_python() -> Check:
    version = platform.python_version()
    if sys.version_info < (3, 10):
        return Check(False, f"Python {version}: the course needs 3.10 or newer",
                     "install Python 3.11 and make a new environment with it (see Setup)")
    tested = "" if sys.version_info[:2] == TESTED_PYTHON else " (the course is tested with 3.11)"
    return Check(True, f"Python {version}{tested} on {platform.system()} {platform.machine()}")


def read_pins(path: Path) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            pins[name.strip()] = version.strip()
    return pins


def check_versions(requirements: Path | None = None) -> list[Check]:
    """Installed versions against the pins; a missing tool (book, tests) is only noted."""
    path = Path(requirements) if requirements else REQUIREMENTS
    if not path.is_file():
        return [Check(None, "package versions not compared: course_lib is installed without the "
                            "repository (no requirements.txt beside it)")]
    runtime = {r.split(";")[0].strip().lower() for r in (metadata.requires("course_lib") or [])}
    wrong, missing, tools = [], [], []
    for name, wanted in read_pins(path).items():
        have = _version(name)
        if have is None:
            (missing if name.lower() in runtime else tools).append(name)
        elif have != wanted:
            wrong.append(f"{name} {have} (requirements.txt: {wanted})")
    checks = []
    if wrong or missing:
        problems = wrong + [f"{name} not installed" for name in missing]
        checks.append(Check(False, "packages differ from requirements.txt: " + ", ".join(problems),
                            f"pip install -r {path}"))
    else:
        checks.append(Check(True, f"installed versions match {path.name}"))
    if tools:
        checks.append(Check(None, "not installed, needed only to build the book or run the tests: "
                                  + ", ".join(tools)))
    return checks


def check_numba() -> Check:
    import numba

    @numba.njit
    def add_one(x):
        return x + 1

    start = time.perf_counter()
    if add_one(1) != 2:
        return Check(False, "Numba compiled a function that gives a wrong answer", "pip install -r requirements.txt")
    return Check(True, f"Numba {numba.__version__} compiles ({time.perf_counter() - start:.1f} s for a tiny function)")


def numba_cache_dir() -> tuple[Path, bool]:
    """Where Numba caches the kernels, and whether NUMBA_CACHE_DIR chose it."""
    import numba
    if numba.config.CACHE_DIR:
        return Path(numba.config.CACHE_DIR), True
    return PACKAGE_DIR / "kernels" / "__pycache__", False


def check_cache() -> Check:
    folder, from_env = numba_cache_dir()
    try:  # as Numba does: create the folder, then a file in it (root may write where chmod forbids)
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        fix = ("set NUMBA_CACHE_DIR to a folder you can write to (e.g. export NUMBA_CACHE_DIR=$HOME/.cache/numba), "
               "or unset it" if from_env else
               f"make {folder} writable, or set NUMBA_CACHE_DIR to a folder you can write to "
               f"(e.g. export NUMBA_CACHE_DIR=$HOME/.cache/numba)")
        why = err.strerror or type(err).__name__
        return Check(False, f"Numba cannot write its cache in {folder} ({why}): compiled kernels may not be "
                            f"kept, and each session would compile them again (about 10 s)", fix)
    return Check(True, f"Numba's cache is writable: {folder}" + (" (NUMBA_CACHE_DIR)" if from_env else ""))


def check_blas() -> Check:
    import os

    from .kernels._fast.blas import FALLBACK_ENV, NUMPY_BLAS, NUMPY_BLAS_CONTROLLER
    from .kernels._fast.threads import blas_thread_count, get_num_threads, threading_layer

    lib = NUMPY_BLAS_CONTROLLER
    if lib is None:
        numpy_blas = "a BLAS that threadpoolctl cannot see (Accelerate?)"
    else:
        numpy_blas = f"{lib.internal_api} {lib.version or ''}".strip() + f" ({Path(lib.filepath).name})"
    if NUMPY_BLAS is not None:
        kernels = "the kernels call the same library (one pool of threads)"
    elif os.environ.get(FALLBACK_ENV, "").lower() == "numba":
        kernels = f"the kernels call Numba's a @ b ({FALLBACK_ENV}=numba)"
    else:
        kernels = "the kernels call Numba's a @ b (this NumPy build has no CBLAS of its own)"
    return Check(True, f"BLAS: NumPy uses {numpy_blas} with {count(blas_thread_count(), 'thread')}; {kernels}; "
                       f"the kernels' own loops use up to {count(get_num_threads(), 'thread')} "
                       f"(Numba's {threading_layer() or 'unknown'} threading layer); "
                       f"training small models uses 1 thread")


def check_limits() -> list[Check]:
    """What limits learners' code when `yours` and `grade` run it (course_lib.instructor.limits)."""
    from .instructor.limits import protections
    return [Check(None if "not available" in line else True, f"learners' code, {line}") for line in protections()]


def check_widgets() -> Check:
    version = _version("ipywidgets")
    if version is None:
        return Check(False, "ipywidgets is not installed: interactive plots will not appear",
                     "pip install -r requirements.txt")
    lab, notebook = _version("jupyterlab"), _version("notebook")
    if lab is None and notebook is None:
        return Check(True, f"ipywidgets {version}; no Jupyter front end here: if you open the notebooks from "
                           f"another environment, install jupyterlab_widgets there")
    # JupyterLab and Notebook 7 load jupyterlab_widgets; the classic Notebook 6 widgetsnbextension
    classic = notebook is not None and lab is None and int(notebook.split(".")[0]) < 7
    needed = "widgetsnbextension" if classic else "jupyterlab_widgets"
    if _version(needed) is None:
        return Check(False, f"ipywidgets {version}, but {needed} is missing: the front end cannot draw widgets",
                     f"pip install {needed}, then restart Jupyter")
    return Check(True, f"widgets: ipywidgets {version}, {needed} {_version(needed)}")


def check_model() -> list[Check]:
    """A training step of the course model, timed, and the float64 gradient check of the model."""
    import numpy as np

    import course_lib as cl
    from course_lib.kernels._fast.threads import blas_threads, blas_threads_for

    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    tokens, targets = cl.task.splits(0)["train"]
    tokens, targets = tokens[:32], targets[:32]
    opt = cl.optim.Adam(model.params, lr=1e-3)
    times = []
    with blas_threads(blas_threads_for(model.config, tokens.size)):
        for _ in range(6):  # the first step compiles (or loads the cache): not timed
            start = time.perf_counter()
            loss = model.loss(tokens, targets)
            opt.step(model.backward())
            times.append(time.perf_counter() - start)
    if not np.isfinite(loss):
        return [Check(False, f"a course-model step gives loss {loss}", "clear the Numba cache (see Setup), "
                                                                         "then pip install -r requirements.txt")]
    step = Check(True, f"a course-model step runs: {1000 * float(np.median(times[1:])):.1f} ms (batch 32; the "
                       f"first, with compiling or cache loading, {times[0]:.1f} s)")
    report = cl.gradcheck.check_model(model, tokens[:2], targets[:2])
    worst = max(report.values())
    if not report.passed:
        return [step, Check(False, f"the float64 gradient check fails (worst rel. error {worst:.2g})",
                            "clear the Numba cache (see Setup); if it persists, reinstall course_lib")]
    return [step, Check(True, f"float64 gradient check of the model passes "
                              f"(worst rel. error {cl.gradcheck.magnitude(worst)})")]


def run(requirements: Path | None = None, out=None) -> int:
    """Print one line per check (and the fix under each ✗); 1 when something is broken, else 0."""
    out = out or sys.stdout
    checks = [("Python", check_python), ("package versions", lambda: check_versions(requirements)),
              ("Numba", check_numba), ("Numba's cache", check_cache), ("BLAS", check_blas),
              ("limits on learners' code", check_limits), ("widgets", check_widgets), ("course model", check_model)]
    broken = 0
    for name, check in checks:
        try:
            found = check()
        except Exception as err:  # a check that crashes is itself the finding: never a traceback
            found = Check(False, f"{name}: {type(err).__name__}: {err}", "pip install -r requirements.txt")
        for c in found if isinstance(found, list) else [found]:
            print(f"{ {True: '✓', False: '✗', None: '–'}[c.ok]} {c.text}", file=out, flush=True)
            if c.ok is False:
                broken += 1
                print(f"    fix: {c.fix}", file=out)
    print("everything the course needs works" if not broken else
          f"{broken} problem{'s' if broken > 1 else ''}: see the fix under each ✗", file=out)
    return 1 if broken else 0
