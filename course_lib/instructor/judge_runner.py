"""Grade one learner's notebook in processes of its own, against a clock that no learner can stop.

    outcome = run_notebook("alice/01_tokens_and_task.ipynb", expected_exercises(nb),
                           {"Exercise 1.1": ["check_encode", ["my_encode"]]}, timeout=300, memory=4 * 2**30)
    outcome.rows      # [{"exercise", "status", "stage", "message"}], in the notebook's order

The processes, for each notebook:

    grade (this process: the report)
      └─ judge (python -m course_lib.instructor.judge; trusted, the grader's user): the checkers
           └─ worker, in a sandbox (sandbox.py: bubblewrap, or another user, or neither): the
              learner's exercise cells, one exercise at a time, on a course_lib without that
              exercise's solution (stripped.py); it talks with the judge over a data-only
              channel (channel.py) and can reach neither this process nor the report

The judge writes one JSON line per exercise as it ends; this process reads them against the
notebook's time limit and kills the judge and all it started at the limit (plus a grace for
the judge's own work), so a worker that stops, hangs or kills the judge costs its notebook
only. `stop_all()` (from another thread) kills every running judge: the runs end at once and
raise KeyboardInterrupt, as after Ctrl-C; no new run starts until resume().
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from ..exercises import limits
from ..exercises.cells import Exercise
from . import sandbox

GRACE = 30          # seconds the judge may take beyond the learner's time (its own imports, checks)
MAX_ROW = 8192      # bytes of one row from the judge

_running = set()                 # judge processes of the runs in progress (all threads)
_lock, _stopping = threading.Lock(), threading.Event()


@dataclass
class Outcome:
    """How a notebook's grading ended: the judge's rows, and why it stopped early if it did."""
    rows: list = field(default_factory=list)
    reason: str = ""                 # one line; empty when every exercise was graded
    seconds: float = 0.0


# what BLAS libraries read for their thread count (the worker's environment keeps them: sandbox.py)
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def kernel_user(name: str):
    """(uid, gid) of the user `name`, whose group the workers run in (each as a user id of its
    own: sandbox.fresh_account); ValueError when we are not root, it does not exist, or such
    a worker cannot run this Python and import the course's packages (installed in a folder only
    root may read, such as /root)."""
    if not sandbox.as_root():
        raise ValueError(f"only root can run the learners' code as {name!r}" if hasattr(os, "geteuid") else
                         "--user needs Linux or macOS: on this OS the learners' code runs as you")
    import pwd      # POSIX only
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"there is no user {name!r} on this machine") from None
    problem = sandbox.python_problem(sandbox.fresh_account(entry.pw_gid))
    if problem is not None:
        raise ValueError(f"learners' code would run in the group of {name!r}, which cannot run {sys.executable} "
                         f"with the course's packages ({problem[:200]}): install Python and the packages where "
                         f"every user can read them (not under /root)")
    return entry.pw_uid, entry.pw_gid


def stop_all() -> None:
    """Kill every running judge (any thread's) and let no new run start (until resume())."""
    _stopping.set()
    with _lock:
        for process in list(_running):
            limits.kill_tree(process.pid)


def resume() -> None:
    """Let runs start again after stop_all() (a new grading in the same process)."""
    _stopping.clear()


def _valid(row) -> bool:
    return isinstance(row, dict) and all(isinstance(row.get(k), str)
                                         for k in ("exercise", "status", "stage", "message"))


def _read_rows(stream, into: queue.Queue, workers: list) -> None:
    """The judge's lines: rows, and {"worker": pid, "account": its own [uid, gid] or None} as it
    starts each worker (killed at the end, in case the judge could not)."""
    for line in stream:
        try:
            row = json.loads(line[:MAX_ROW])
        except ValueError:      # the judge writes none such (judge._line): say so, never drop it silently
            into.put({"unreadable": line[:100]})
            continue
        if _valid(row):
            into.put(row)
        elif isinstance(row, dict) and type(row.get("worker")) is int:
            account = row.get("account")
            workers.append((row["worker"], tuple(account) if isinstance(account, list) and len(account) == 2
                            and all(type(n) is int for n in account) else None))
    into.put(None)


def run_notebook(path, exercises: list[Exercise], calls=None, *, timeout: float = 300, memory: int = 4 * 2**30,
                 user=None, threads: int | None = None) -> Outcome:
    """Grade the notebook at `path`; never raises for the learner's faults. exercises: the
    notebook's, as grade found them (cells.expected_exercises), handed to the judge. calls: exercise ->
    [checker name, [argument names]], as the instructor edition's check cells call them (None: as
    the learner's own do, each checker then checked to be its exercise's). user: (uid, gid) to run
    the learner's code as where bubblewrap cannot run (see kernel_user). threads: the BLAS threads
    of the judge and its workers (None: BLAS's default, every core), unless the environment sets them."""
    request = {"notebook": str(path), "calls": calls,
               "exercises": [[ex.name, ex.title, ex.first_cell, ex.check_cell] for ex in exercises],
               "timeout": timeout, "memory": memory, "user": list(user) if user else None,
               # asked here, once for the whole class: bubblewrap may start as a worker's own user id
               "bwrap_as_account": sandbox.as_root() and sandbox.bwrap_as_account(user[1] if user else None)}
    env = limits.package_env()
    for name in THREAD_VARIABLES if threads else ():
        env.setdefault(name, str(threads))
    with tempfile.TemporaryDirectory(prefix="course-grading-", ignore_cleanup_errors=True) as folder:
        # the judge's sandboxes go inside: removed here even where the judge was killed
        os.chmod(folder, 0o711)       # another user's worker reaches its folder inside, lists none
        return _judge(request, timeout, {**env, "TMPDIR": folder})


def _judge(request: dict, timeout: float, env: dict) -> Outcome:
    """Run one judge on the request and collect its rows until it ends or the time is up."""
    outcome, start = Outcome(), time.monotonic()
    with _lock:
        if _stopping.is_set():
            raise KeyboardInterrupt
        process = subprocess.Popen([sys.executable, "-m", "course_lib.instructor.judge", json.dumps(request)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=env, start_new_session=True, text=True, encoding="utf-8")
        _running.add(process)
    rows, errors, workers = queue.Queue(), [], []
    readers = [threading.Thread(target=_read_rows, args=(process.stdout, rows, workers), daemon=True),
               threading.Thread(target=lambda: errors.append(process.stderr.read(100_000)), daemon=True)]
    for t in readers:
        t.start()
    try:
        deadline = start + timeout + GRACE
        while True:
            try:
                row = rows.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                outcome.reason = f"time limit reached ({timeout:g} s for the whole notebook)"
                break
            if row is None:
                break
            if "unreadable" in row:
                outcome.reason = f"the grader's judge wrote a line it cannot read: {row['unreadable']!r}"
                continue
            outcome.rows.append(row)
    finally:
        limits.kill_tree(process.pid)
        for pid, account in workers:
            limits.kill_tree(pid)
            if account is not None:
                sandbox.clean_up(account)
        process.wait()
        with _lock:
            _running.discard(process)
        for t in readers:
            t.join(timeout=5)
    if _stopping.is_set():
        raise KeyboardInterrupt
    if not outcome.reason and process.returncode != 0:
        lines = (errors[0] if errors else "").strip().splitlines()
        outcome.reason = f"the grader's judge failed: {lines[-1][:300] if lines else f'exit {process.returncode}'}"
    outcome.seconds = time.monotonic() - start
    return outcome
