"""Time and memory limits for a process that runs a learner's code, on Linux, macOS and Windows.

- Memory. Linux enforces RLIMIT_AS, which the child sets on itself before it runs anything
  (`launcher_code`): an allocation past it raises MemoryError in the learner's cell. macOS
  accepts RLIMIT_AS without enforcing it, and Windows has no rlimits: there a MemoryWatch
  thread in the parent reads the child's memory (psutil: the resident memory of it and of
  every process it started) ten times a second and kills it past the limit.
- Disk. A DiskWatch thread in the parent measures what the child wrote four times a second
  and kills it past its limit (each file is limited by RLIMIT_FSIZE as well, where it exists).
- Starting. package_env() is the environment of a child Python that imports this course_lib;
  launcher_code(then) the code it runs first (its memory limit, then `then`).
- Killing. kill_tree(pid) kills a child and everything it started: its process group where
  there are process groups (the child leads a session of its own), else its psutil descendants.
- A time limit inside the child (yours/cells.py's cells): SIGALRM where it exists, else a
  watchdog thread that raises the exception in the main thread between two bytecodes
  (a cell blocked in C, such as time.sleep, then runs on until the whole run's limit).

Every choice is made by what the running Python has (resource, os.killpg, signal.SIGALRM),
not by the platform's name, so that tests can take the other path by hiding them.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from pathlib import Path

import psutil


def rlimit_as_works() -> bool:
    """Does this OS enforce a memory limit set with RLIMIT_AS? (Linux: yes; macOS: not enforced;
    Windows: no resource module.)"""
    try:
        import resource     # POSIX only
    except ImportError:
        return False
    return sys.platform.startswith("linux") and hasattr(resource, "RLIMIT_AS")


# Inline (-c) code that starts a child: set RLIMIT_AS (argv[1] bytes; 0: none) where it can,
# then go on with the code `then`. Inline, so that nothing of the learner's folder or of
# course_lib is imported before the limit holds.
_LIMIT = ("import sys; n = int(sys.argv[1])\n"
          "try:\n    import resource\nexcept ImportError:\n    resource = None\n"
          "if n > 0 and resource is not None and sys.platform.startswith('linux'):\n"
          "    resource.setrlimit(resource.RLIMIT_AS, (n, n))\n")


def package_env() -> dict:
    """This process's environment with this course_lib on the path (for a child Python)."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])   # the folder that holds course_lib/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.setdefault("MPLBACKEND", "agg")
    return env


def launcher_code(then: str) -> str:
    """Python source for `python -c`: the memory limit of argv[1] (where the OS enforces it), then `then`."""
    return _LIMIT + then


def kill_tree(pid: int) -> None:
    """Kill the process `pid` and every process it started (it must lead its own process group
    where there are groups: start_new_session=True). Gone already: nothing to do."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        return
    try:
        parent = psutil.Process(pid)
        family = parent.children(recursive=True) + [parent]
    except psutil.Error:
        return
    for process in family:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(family, timeout=5)


class _Watch:
    """Kill the process tree of `pid` once `measure()` passes `limit` (`tripped` then says so),
    read every `every` seconds in a thread of this process; `ended`: the errors measure() raises
    once the process or its folder is gone."""

    def __init__(self, pid: int, measure, limit: int, every: float, ended, name: str, active: bool = True):
        self.tripped, self.active = False, active
        self._pid, self._measure, self._limit, self._every, self._ended = pid, measure, limit, every, ended
        self._stop = threading.Event()
        if active:
            threading.Thread(target=self._watch, name=name, daemon=True).start()

    def _watch(self):
        while not self._stop.wait(self._every):
            try:
                over = self._measure() > self._limit
            except self._ended:
                return
            if over:
                self.tripped = True
                kill_tree(self._pid)
                return

    def stop(self):
        self._stop.set()


class MemoryWatch(_Watch):
    """Where the OS does not enforce RLIMIT_AS: kill the process tree of `pid` once its resident
    memory passes `limit` bytes (`tripped` then says so). A no-op where RLIMIT_AS works or limit <= 0."""

    def __init__(self, pid: int, limit: int, every: float = 0.1):
        super().__init__(pid, self._memory, limit, every, psutil.Error, "course_lib memory watch",
                         active=limit > 0 and not rlimit_as_works())

    def _memory(self) -> int:
        root = psutil.Process(self._pid)
        total = 0
        for process in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
        return total


class DiskWatch(_Watch):
    """Kill the process tree of `pid` once `measure()` (bytes it has written) passes `limit`
    (`tripped` then says so), read every `every` seconds: a quota on a file system the
    learner's workers share with the grader, which has none of its own."""

    def __init__(self, pid: int, measure, limit: int, every: float = 0.25):
        super().__init__(pid, measure, limit, every, OSError, "course_lib disk watch")


@contextlib.contextmanager
def time_limit(seconds, error: type[BaseException]):
    """Raise `error` (a class) in this thread, the main one, after `seconds`; no limit when None."""
    if seconds is None:
        yield
        return
    if hasattr(signal, "SIGALRM"):
        def stop(signum, frame):
            raise error()
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    target, lock, state = threading.get_ident(), threading.Lock(), {"done": False}

    def stop():
        with lock:
            if not state["done"]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(error))
    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        timer.cancel()

