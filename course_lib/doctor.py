"""`python -m course_lib doctor`: can this environment run the course? One line per check.

    ✓ fine    ✗ broken, with the fix on the next line    – not checked, and why

Checks: the Python version and the platform (first, with the standard library alone, so that
it answers where the packages did not install); the direct dependencies' installed versions
against the lock, requirements.txt (when the repository is there); Numba compiles, and can
write its cache; which BLAS NumPy and the kernels use, with how many threads; what limits
learners' code when `yours` and `grade` run it; the widget front end; a course-model step, its
float64 gradient check, and how long a step takes. Exit status 1 when any check is ✗.
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
# The supported range, as pyproject.toml's requires-python says; CI runs the first and the second.
OLDEST, NEWEST = (3, 11), (3, 15)
CI_PYTHONS = ((3, 11), (3, 13))
# (platform.system(), platform.machine()) of the platforms every pinned package has wheels for.
PLATFORMS = {("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "arm64"), ("Windows", "AMD64")}
INSTALL_PYTHON = ("install Python 3.13 (python.org, or your system's packages), then make a new environment "
                  "with it: book/setup.md, Install")


@dataclass
class Check:
    ok: bool | None     # True ✓, False ✗ (broken), None – (not applicable)
    text: str
    fix: str = ""
    ends: str = ""      # what the later checks need and this one found missing: they are not run


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _dotted(version) -> str:
    return ".".join(map(str, version))


def check_python(version=None, system=None, machine=None) -> Check:
    """The Python version and the platform (this interpreter's unless given): the standard library
    only, so that it answers where the packages are missing or cannot install."""
    version = tuple(version or sys.version_info[:3])
    system, machine = system or platform.system(), machine or platform.machine()
    where = f"Python {_dotted(version)} on {system} {machine}"
    supported = f"the course runs on Python {_dotted(OLDEST)} to {_dotted(NEWEST)}"
    if version[:2] < OLDEST:
        return Check(False, f"{where}: too old, {supported}", INSTALL_PYTHON, ends="that Python")
    if version[:2] > NEWEST:
        return Check(False, f"{where}: newer than the course supports ({supported}; its packages may have no "
                            f"wheels for {_dotted(version[:2])} yet)", INSTALL_PYTHON)
    if (system, machine) == ("Darwin", "x86_64"):
        return Check(False, f"{where}: Intel Macs are not supported (Numba has no macOS x86-64 wheels since "
                            f"0.63); on an Apple Silicon Mac this is an x86-64 Python under Rosetta",
                     "on Apple Silicon, use python.org's Python (universal2) or Homebrew's, natively, not under "
                     "Rosetta; on an Intel Mac, a Linux container or virtual machine (book/setup.md, Platforms)")
    tested = "" if version[:2] in CI_PYTHONS else (
        f" (CI tests {' and '.join(_dotted(v) for v in CI_PYTHONS)}; {supported})")
    untested = "" if (system, machine) in PLATFORMS else " (a platform the course is not tested on: see Setup)"
    return Check(True, f"{where}{tested}{untested}")


def read_pins(path: Path, environment: dict | None = None) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements file whose environment marker
    (`numpy==2.5.5 ; python_full_version >= '3.15'`) holds for this interpreter, or for the marker
    variables `environment` gives (.ci/wheel_matrix.py's targets); names normalised as pip does
    (PyYAML -> pyyaml)."""
    from packaging.markers import Marker
    from packaging.utils import canonicalize_name

    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        requirement, _, marker = line.partition(";")
        applies = not marker.strip() or Marker(marker).evaluate(environment)
        if "==" in requirement and not line.startswith("-") and applies:
            name, version = requirement.split("==", 1)
            pins[canonicalize_name(name.strip())] = version.strip()
    return pins


def direct_dependencies() -> dict[str, str]:
    """name -> what it is for ("" for the course itself, else the extra: lab, book, test), as
    pyproject.toml lists them: from course_lib's installed metadata, or the file beside the package
    where course_lib is imported from a folder without being installed."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        listed = []
        for requirement in map(Requirement, metadata.requires("course_lib") or []):
            marker = str(requirement.marker or "")      # an extra's: 'extra == "book"'
            listed.append((requirement, marker.split("extra ==")[-1].strip(" '\"") if "extra ==" in marker else ""))
    except metadata.PackageNotFoundError:
        import tomllib
        project = tomllib.loads((PACKAGE_DIR.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        listed = [(Requirement(text), "") for text in project["dependencies"]]
        listed += [(Requirement(text), extra) for extra, texts in project.get("optional-dependencies", {}).items()
                   for text in texts]
    found = {}
    for requirement, extra in listed:
        found.setdefault(canonicalize_name(requirement.name), extra)
    return found


def check_versions(requirements: Path | None = None) -> list[Check]:
    """Installed versions of the direct dependencies against the lock; a missing tool (book, tests,
    JupyterLab) is only noted."""
    path = Path(requirements) if requirements else REQUIREMENTS
    if not path.is_file():
        return [Check(None, "package versions not compared: course_lib is installed without the "
                            "repository (no requirements.txt beside it)")]
    try:
        pins, direct = read_pins(path), direct_dependencies()
    except ImportError:   # packaging comes with pip's dependencies of the course: the install failed
        return [Check(False, "packages missing: packaging, and most likely the rest",
                      f"pip install -r {path}", ends="those packages")]
    wrong, missing, tools = [], [], []
    for name, extra in direct.items():
        have, wanted = _version(name), pins.get(name)
        if have is None:
            (tools if extra else missing).append(name)
        elif wanted is not None and have != wanted:
            wrong.append(f"{name} {have} (requirements.txt: {wanted})")
    checks = []
    if wrong or missing:
        problems = wrong + [f"{name} not installed" for name in missing]
        checks.append(Check(False, "packages differ from requirements.txt: " + ", ".join(problems),
                            f"pip install -r {path}", ends="those packages" if missing else ""))
    else:
        checks.append(Check(True, f"installed versions match {path.name}"))
    if tools:
        checks.append(Check(None, "not installed, needed only for JupyterLab, the book or the tests: "
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

    from .kernels.machinery import (FALLBACK_ENV, NUMPY_BLAS, NUMPY_BLAS_CONTROLLER, blas_thread_count,
                                    get_num_threads, threading_layer)

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
    """What limits learners' code when `yours` and `grade` run it (course_lib.exercises.limits)."""
    from .instructor.sandbox import protections
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
    from course_lib.kernels.machinery import set_num_threads, threads_for_model

    model = cl.Transformer(cl.presets.deep_dive(), seed=0)
    tokens, targets = cl.task.splits(0)["train"]
    tokens, targets = tokens[:32], targets[:32]
    opt = cl.optim.Adam(model.params, lr=1e-3)
    times = []
    with set_num_threads(threads_for_model(model.config, tokens.size)):
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
    """Print one line per check (and the fix under each ✗); 1 when something is broken, else 0.

    A Python older than the course's, or packages the course needs that are missing, end the
    checks there: the rest would only fail for the same reason."""
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
        found = found if isinstance(found, list) else [found]
        for c in found:
            print(f"{ {True: '✓', False: '✗', None: '–'}[c.ok]} {c.text}", file=out, flush=True)
            if c.ok is False:
                broken += 1
                print(f"    fix: {c.fix}", file=out)
        ends = next((c.ends for c in found if c.ends), "")
        if ends:
            print(f"– the other checks not run: they need {ends}", file=out)
            break
    print("everything the course needs works" if not broken else
          f"{broken} problem{'s' if broken > 1 else ''}: see the fix under each ✗", file=out)
    return 1 if broken else 0

