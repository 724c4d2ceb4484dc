"""Run a learner's notebook, untrusted, in a scratch folder and a kernel of its own.

    outcome = run_notebook("alice/01_tokens_and_task.ipynb", timeout=300, memory=4 * 2**30)

What the grader relies on:

- the notebook is copied alone into a new temporary folder (one level down, in `work/`),
  and its kernel starts there: a cell that deletes its folder, or the one above, deletes
  only that copy (the folder is removed afterwards);
- the kernel is a separate process, so nothing the learner writes runs in the grader's;
  it is started under a memory limit (limits.py: RLIMIT_AS on Linux, inherited by anything
  it starts, so that an allocation past it raises MemoryError in the learner's cell; on
  macOS and Windows a watch that kills the kernel past the limit);
- `timeout` bounds the whole notebook, not each cell: every cell may only use what is left.
  At the limit the kernel (and its process group) is killed;
- the kernel uses this interpreter and imports this course_lib (PYTHONPATH is passed on),
  and $COURSE_LIB_RESULTS names a file outside the scratch folder where each checker
  call appends its result;
- `user` (only when the grader runs as root, as on Gradescope): the kernel runs as that
  user (e.g. "nobody"), its scratch folder and results file given to it, with its own HOME
  and a copy of the grader's compiled Numba kernels: it can change no file it does not own
  (the grader's, the submission, the results) and create files only in its scratch folder
  and world-writable ones (/tmp); a file it writes is at most `memory` bytes (RLIMIT_FSIZE);
- `stop_all()` (from another thread) kills every running kernel: the runs end at once and
  raise KeyboardInterrupt, as after Ctrl-C; no new run starts.

Without `user` this protects the machine from accidents (an endless loop, a runaway
allocation, an `rm -rf` of the working folder), not from a learner who means harm: the
kernel runs as the grader's user. Either way the checkers' records come from a file the
kernel writes: code in the learner's notebook runs in the same process as the checkers, so
a learner who means harm can write records ("passed") of its own. Nothing cheap prevents
that (the checker has to run the learner's function); the grade of a notebook is only as
trustworthy as the notebook's author.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from ..checks.core import RESULTS_ENV
from . import limits

KERNEL_NAME = "course-lib-grader"

MAX_RECORDS = 16 * 2**20   # bytes of checker records read: a learner's flood cannot fill the grader's memory

# Runs first in the kernel's process where something must be set before the learner's code
# (POSIX): the memory limit (limits.py), for another user (root only) the file-size limit and
# that user, then it becomes the IPython kernel (exec keeps all of it).
_LAUNCHER = limits.launcher_code(
    "import os; uid, gid = map(int, sys.argv[2:4])\n"
    "if uid >= 0:\n"
    "    resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); os.setgroups([]); os.setgid(gid); os.setuid(uid)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'ipykernel_launcher'] + sys.argv[4:])\n")

_running = set()                 # kernel managers of the runs in progress (all threads)
_lock, _stopping = threading.Lock(), threading.Event()


@dataclass
class Outcome:
    """How a notebook run ended: the checkers' records, and where and why it stopped."""
    records: list = field(default_factory=list)   # one dict per checker call, in order
    stopped_at: int | None = None                 # index of the cell that stopped it
    reason: str = ""                              # one line; empty when it ran to the end
    seconds: float = 0.0


class _KernelManager(AsyncKernelManager):
    """Gives the connection file to the kernel's user, who must read it."""
    owner = None                 # (uid, gid) or None

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        if self.owner:
            os.chown(self.connection_file, *self.owner)


class _Client(NotebookClient):
    """The grader reads the checkers' records, never the cells' outputs: keep none in memory
    (a cell that prints without end would fill the grader's)."""

    def output(self, outs, msg, display_id, cell_index):
        return None


def _kernel_manager(private: Path, memory: int, owner) -> AsyncKernelManager:
    """A kernel manager whose kernel is this interpreter under the limits, as `owner` if set.

    Async: with a blocking manager nbclient waits for the kernel's messages without a
    time limit, and a cell that never ends would hang the grader.
    """
    uid, gid = owner or (-1, -1)
    if limits.rlimit_as_works() or owner:
        argv = [sys.executable, "-c", _LAUNCHER, str(memory), str(uid), str(gid), "-f", "{connection_file}"]
    else:   # nothing to set first (the memory is watched from here): no exec, which Windows only imitates
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "course_lib grader", "language": "python"}
    spec_dir = private / "kernels"
    (spec_dir / KERNEL_NAME).mkdir(parents=True)
    (spec_dir / KERNEL_NAME / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir)])
    km = _KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs,
                        connection_file=str(private / "connection.json"))
    km.owner = owner
    return km


def kernel_env(results: Path, home: Path | None) -> dict:
    """The grader's environment, plus the results file and the path to this course_lib; for
    another user, a HOME of its own and a copy of the compiled kernels it can write to."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])   # the folder that holds course_lib/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env[RESULTS_ENV] = str(results)
    env.setdefault("MPLBACKEND", "agg")
    if home is not None:
        env["HOME"] = env["TMPDIR"] = str(home)
        env["NUMBA_CACHE_DIR"] = str(home / ".numba")
    return env


def _give_away(scratch: Path, private: Path, results: Path, owner) -> None:
    """Hand the scratch folder and the results file to the kernel's user, with a copy of the
    grader's Numba cache (Numba needs a cache it can write to, else it refuses to import)."""
    _copy_numba_cache(scratch / ".numba")
    results.touch(mode=0o600)
    private.chmod(0o711)    # the kernel reaches its files inside, but cannot list the folder
    for path in [results, scratch, *scratch.rglob("*")]:
        os.chown(path, *owner, follow_symlinks=False)


def _copy_numba_cache(dest: Path) -> None:
    """Copy the compiled kernels of this course_lib (the `__pycache__` beside its sources)
    into `dest`, laid out as Numba reads a NUMBA_CACHE_DIR (Numba's own rule for the layout)."""
    from numba.core.caching import _CacheLocator
    package = Path(__file__).resolve().parents[1]     # course_lib/
    for cache in package.rglob("__pycache__"):
        files = [f for f in cache.iterdir() if f.suffix in (".nbi", ".nbc")]
        if files:
            target = dest / _CacheLocator.get_suitable_cache_subpath(str(cache.parent / "x.py"))
            target.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copyfile(f, target / f.name)


def kernel_user(name: str):
    """(uid, gid) of the user `name`; ValueError when we are not root, it does not exist, or it
    cannot run this Python (installed in a folder only root may read, such as /root)."""
    if getattr(os, "geteuid", lambda: None)() != 0:
        raise ValueError(f"only root can run the kernels as {name!r}" if hasattr(os, "geteuid") else
                         "--user needs Linux or macOS: on this OS every kernel runs as you")
    import pwd      # POSIX only
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"there is no user {name!r} on this machine") from None
    try:
        subprocess.run([sys.executable, "-c", ""], user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                       check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        raise ValueError(f"the user {name!r} cannot run {sys.executable}: install Python where every "
                         f"user can read it") from None
    return entry.pw_uid, entry.pw_gid


def _kill(km) -> None:
    process = getattr(km.provisioner, "process", None)
    if process is not None and process.poll() is None:
        limits.kill_tree(process.pid)   # on POSIX jupyter_client makes it its group's leader


def stop_all() -> None:
    """Kill every running kernel (any thread's) and let no new run start (until resume())."""
    _stopping.set()
    with _lock:
        for km in list(_running):
            _kill(km)


def resume() -> None:
    """Let runs start again after stop_all() (a new grading in the same process)."""
    _stopping.clear()


RECORD_FIELDS = ("exercise", "status", "stage", "message", "hint", "title")


def _valid(record) -> bool:
    """A record as a checker writes it: a dict whose fields are strings (or absent, or null), the
    exercise and the status present: anything else is garbled (by a learner's code) and skipped."""
    return (isinstance(record, dict) and isinstance(record.get("exercise"), str)
            and isinstance(record.get("status"), str)
            and all(record.get(f) is None or isinstance(record.get(f), str) for f in RECORD_FIELDS))


def _read_records(results: Path) -> list:
    """The checkers' JSON lines; a line the learner's code garbled is skipped."""
    if not results.exists():
        return []
    records = []
    with open(results, encoding="utf-8", errors="replace") as f:
        text = f.read(MAX_RECORDS)
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if _valid(record):
            records.append(record)
    return records


def _why(error: Exception, cell: int | None, timeout: float, memory: int) -> str:
    """One line saying why the notebook stopped."""
    where = f"cell {cell}" if cell is not None else "before the first cell"
    if isinstance(error, CellTimeoutError):
        return f"time limit reached in {where} ({timeout:g} s for the whole notebook)"
    if isinstance(error, DeadKernelError):
        return f"the kernel died in {where} (a crash, or killed for using too much memory)"
    if isinstance(error, CellExecutionError):
        text = f"{error.ename}: {error.evalue}".strip().splitlines()[0] if error.evalue else error.ename
        if error.ename == "MemoryError":
            text += f" (memory limit {memory / 2**30:g} GB)"
        return f"{where} raised {text[:300]}"
    first_line = (str(error).strip().splitlines() or [""])[0][:300]
    return f"the notebook could not run: {type(error).__name__}: {first_line}"


def run_notebook(path, *, timeout: float = 300, memory: int = 4 * 2**30, user=None) -> Outcome:
    """Run the notebook at `path` top to bottom in a scratch copy; never raises for the learner's
    faults. user: (uid, gid) to run the kernel as (see kernel_user), or None for ours."""
    nb = nbformat.read(path, as_version=4)
    outcome, current = Outcome(), {"cell": None}
    start = time.monotonic()
    deadline = start + timeout
    # the scratch folder may be gone (the learner deleted it) or half-deletable: ignore that
    with tempfile.TemporaryDirectory(prefix="course-grade-") as private, \
            tempfile.TemporaryDirectory(prefix="course-scratch-", ignore_cleanup_errors=True) as scratch:
        private, scratch = Path(private), Path(scratch)
        # one level down, so that a careless `rm -rf ..` still stays inside the scratch folder
        work = scratch / "work"
        work.mkdir()
        shutil.copy(path, work / Path(path).name)
        results = private / "results.jsonl"
        if user:
            _give_away(scratch, private, results, user)
        km = _kernel_manager(private, memory, user)

        def cell_starts(cell, cell_index):
            current.update(cell=cell_index)
            process = getattr(km.provisioner, "process", None)
            if "watch" not in current and process is not None:   # the kernel's pid is known from here
                current["watch"] = limits.MemoryWatch(process.pid, memory)
            if _stopping.is_set():   # stop_all() came while this kernel was starting
                _kill(km)

        client = _Client(
            nb, km=km, timeout=timeout, startup_timeout=min(60, timeout), shutdown_kernel="immediate",
            # each cell may use only what is left of the notebook's time
            timeout_func=lambda cell: max(deadline - time.monotonic(), 0.001),
            on_cell_start=cell_starts, resources={"metadata": {"path": str(work)}})
        with _lock:
            if _stopping.is_set():
                raise KeyboardInterrupt
            _running.add(km)
        try:
            # the kernel's own stdout/stderr (not the cells' outputs) would garble the grader's
            client.execute(env=kernel_env(results, scratch if user else None), cleanup_kc=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except Exception as error:  # whatever the learner's notebook did, report it and go on
            outcome.stopped_at, outcome.reason = current["cell"], _why(error, current["cell"], timeout, memory)
            if "watch" in current and current["watch"].tripped:
                outcome.reason = (f"the kernel used more than its memory limit ({memory / 2**30:g} GB) in "
                                  f"cell {current['cell']} and was stopped")
        finally:
            if "watch" in current:
                current["watch"].stop()
            with _lock:
                _running.discard(km)
            if km.has_kernel:  # nbclient stops it; this is in case it could not
                run_sync(km.shutdown_kernel)(now=True)
        # nbclient's Ctrl-C/SIGTERM handler stops the kernel and carries on as if the cell had
        # failed (_async_cleanup_kernel_future is set only there); stop_all() likewise: stop instead
        if _stopping.is_set() or getattr(client, "_async_cleanup_kernel_future", None) is not None:
            raise KeyboardInterrupt
        outcome.records = _read_records(results)
    outcome.seconds = time.monotonic() - start
    return outcome
