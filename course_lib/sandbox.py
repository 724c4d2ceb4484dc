"""Run a learner's notebook, untrusted, in a scratch folder and a kernel of its own.

    outcome = run_notebook("alice/01_tokens_and_task.ipynb", timeout=300, memory=4 * 2**30)

What the grader relies on:

- the notebook is copied alone into a new temporary folder (one level down, in `work/`),
  and its kernel starts there: a cell that deletes its folder, or the one above, deletes
  only that copy (the folder is removed afterwards);
- the kernel is a separate process, so nothing the learner writes runs in the grader's;
  it is started under a memory limit (RLIMIT_AS, inherited by anything it starts): an
  allocation past it raises MemoryError in the learner's cell;
- `timeout` bounds the whole notebook, not each cell: every cell may only use what is left.
  At the limit the kernel (and its process group) is killed;
- the kernel uses this interpreter and imports this course_lib (PYTHONPATH is passed on),
  and $COURSE_LIB_RESULTS names a file outside the scratch folder where each checker
  call appends its result.

This protects the machine from accidents (an endless loop, a runaway allocation, an
`rm -rf` of the working folder), not from a learner who means harm: the kernel runs as the
grader's user. Run the grader in a container or as a separate user for that.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from .checks.core import RESULTS_ENV

KERNEL_NAME = "course-lib-grader"

# Runs first in the kernel's process: set the memory limit, then become the IPython kernel
# (exec keeps the limit). Inline (-c), so that no module of the learner's folder or of
# course_lib is imported before the limit is in place.
_LAUNCHER = ("import os, resource, sys; n = int(sys.argv[1]); "
             "n > 0 and resource.setrlimit(resource.RLIMIT_AS, (n, n)); "
             "os.execv(sys.executable, [sys.executable, '-m', 'ipykernel_launcher'] + sys.argv[2:])")


@dataclass
class Outcome:
    """How a notebook run ended: the checkers' records, and where and why it stopped."""
    records: list = field(default_factory=list)   # one dict per checker call, in order
    stopped_at: int | None = None                 # index of the cell that stopped it
    reason: str = ""                              # one line; empty when it ran to the end
    seconds: float = 0.0


def _kernel_manager(spec_dir: Path, memory: int) -> AsyncKernelManager:
    """A kernel manager whose kernel is this interpreter under the memory limit.

    Async: with a blocking manager nbclient waits for the kernel's messages without a
    time limit, and a cell that never ends would hang the grader.
    """
    spec = {"argv": [sys.executable, "-c", _LAUNCHER, str(memory), "-f", "{connection_file}"],
            "display_name": "course_lib grader", "language": "python"}
    (spec_dir / KERNEL_NAME).mkdir(parents=True)
    (spec_dir / KERNEL_NAME / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir)])
    return AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


def _kernel_env(results: Path) -> dict:
    """The grader's environment, plus the results file and the path to this course_lib."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env[RESULTS_ENV] = str(results)
    env.setdefault("MPLBACKEND", "agg")
    return env


def _read_records(results: Path) -> list:
    """The checkers' JSON lines; a line the learner's code garbled is skipped."""
    if not results.exists():
        return []
    records = []
    for line in results.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "exercise" in record and "status" in record:
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


def run_notebook(path, *, timeout: float = 300, memory: int = 4 * 2**30) -> Outcome:
    """Run the notebook at `path` top to bottom in a scratch copy; never raises for the learner's faults."""
    nb = nbformat.read(path, as_version=4)
    outcome, current = Outcome(), {"cell": None}
    start = time.monotonic()
    deadline = start + timeout
    # the scratch folder may be gone (the learner deleted it) or half-deletable: ignore that
    with tempfile.TemporaryDirectory(prefix="course-grade-") as private, \
            tempfile.TemporaryDirectory(prefix="course-scratch-", ignore_cleanup_errors=True) as scratch:
        # one level down, so that a careless `rm -rf ..` still stays inside the scratch folder
        work = Path(scratch) / "work"
        work.mkdir()
        shutil.copy(path, work / Path(path).name)
        results = Path(private) / "results.jsonl"
        km = _kernel_manager(Path(private) / "kernels", memory)
        client = NotebookClient(
            nb, km=km, timeout=timeout, startup_timeout=min(60, timeout), shutdown_kernel="immediate",
            # each cell may use only what is left of the notebook's time
            timeout_func=lambda cell: max(deadline - time.monotonic(), 0.001),
            on_cell_start=lambda cell, cell_index: current.update(cell=cell_index),
            resources={"metadata": {"path": str(work)}})
        try:
            # the kernel's own stdout/stderr (not the cells' outputs) would garble the grader's
            client.execute(env=_kernel_env(results), cleanup_kc=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except Exception as error:  # whatever the learner's notebook did, report it and go on
            outcome.stopped_at, outcome.reason = current["cell"], _why(error, current["cell"], timeout, memory)
        finally:
            if km.has_kernel:  # nbclient stops it; this is in case it could not
                run_sync(km.shutdown_kernel)(now=True)
        if getattr(client, "_async_cleanup_kernel_future", None) is not None:
            # set only by nbclient's Ctrl-C/SIGTERM handler, which stops the kernel and carries
            # on as if the cell had failed: let the grader stop instead
            raise KeyboardInterrupt
        outcome.records = _read_records(results)
    outcome.seconds = time.monotonic() - start
    return outcome
