"""Start the process that runs a learner's code while it is graded, as cut off as this machine allows.

    process = start_worker(lib, scratch, memory=4 * 2**30, user=None)   # a subprocess.Popen
    # its stdin and stdout are the channel; kill_tree(process.pid) ends it and all it started

Three ways, the best first (book/instructors.md has the table):
- bubblewrap (`bwrap`, Linux, where user namespaces are allowed): new user, PID, IPC, network,
  UTS and cgroup namespaces; a file system of only the system's and Python's folders (read-only),
  the sandbox's course_lib and its scratch folder, and a private /tmp: the class folder, the
  instructor notebooks, course_lib's own sources and the other sandboxes do not exist in it. Its
  first process is PID 1 of its namespace: when it ends, the kernel ends every process it started;
  and it dies with the judge that started it (--die-with-parent).
- `user` (root only, where bwrap cannot run, as in a Docker container such as Gradescope's): the
  process runs as that user, which can write only its scratch folder and world-writable places,
  and whose processes are all killed when it ends (kill_user).
- neither: a process of the grader's own user, in a session of its own (killed as a group):
  protection from accidents (an endless loop, a runaway allocation), not from intent.
Memory: RLIMIT_AS where Linux enforces it, else limits.MemoryWatch from the judge.
"""
from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import psutil

from . import limits

# set the limits (limits.py), become the user if asked (root only), then run the worker
_LAUNCHER = limits.launcher_code(
    "import os; uid, gid = map(int, sys.argv[2:4])\n"
    "if uid >= 0:\n"
    "    if n > 0: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))\n"
    "    os.setgroups([]); os.setgid(gid); os.setuid(uid)\n"
    "import runpy; sys.argv[1:] = []; runpy.run_module('course_lib.instructor.worker', run_name='__main__')\n")


_KEPT_ENV = {"PATH", "LANG", "LANGUAGE", "TZ", "COURSE_LIB_BLAS"}
_KEPT_PREFIXES = ("LC_", "NUMBA_", "OMP_", "OPENBLAS_", "MKL_")
WITHOUT_BWRAP = "COURSE_LIB_NO_BWRAP"     # set (to 1): grade as where bubblewrap cannot run


@functools.lru_cache(maxsize=None)
def bwrap() -> str | None:
    """The bwrap program, if it is installed and may make namespaces here (not in every container)."""
    path = shutil.which("bwrap")
    if path is None or os.environ.get(WITHOUT_BWRAP):
        return None
    try:
        subprocess.run([path, *_namespaces(), "--ro-bind", "/", "/", "true"], check=True,
                       capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return path


def _namespaces() -> list[str]:
    return ["--unshare-all", "--die-with-parent", "--new-session"]


def _system_folders() -> list[str]:
    """Folders that Python, NumPy and Numba need, read-only: the system's, this Python's, and the
    folders on its path (those with packages .pth files add included), but not a folder that
    holds course_lib's sources beside other things of the project (a clone's root: its
    notebooks, its tests): the sandbox's own course_lib stands in for it."""
    wanted = {"/usr", "/etc", sys.prefix, sys.base_prefix, sys.exec_prefix,
              *site.getsitepackages(), site.getusersitepackages()}
    wanted |= {p for p in sys.path if p and Path(p).is_dir() and (
        not (Path(p) / "course_lib").is_dir() or Path(p).name in ("site-packages", "dist-packages"))}
    wanted |= {str(Path(p).resolve()) for p in wanted}
    return sorted(p for p in wanted if p and Path(p).is_dir())


def _bwrap_command(lib: Path, scratch: Path) -> list[str]:
    command = [bwrap(), *_namespaces(), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if Path(top).is_symlink():                         # merged /usr: /lib -> usr/lib
            command += ["--symlink", os.readlink(top), top]
        elif Path(top).is_dir():
            command += ["--ro-bind", top, top]
    for folder in _system_folders():
        command += ["--ro-bind", folder, folder]
    for folder in _system_folders():       # an installed course_lib (its checkers, its solutions): empty
        if (Path(folder) / "course_lib").is_dir():
            command += ["--tmpfs", str(Path(folder) / "course_lib")]
    # the folder that holds both, so that neither is a mount point (which a learner's rmtree
    # of its own working folder could not remove)
    root = Path(os.path.commonpath([lib, scratch]))
    return command + ["--bind", str(root), str(root), "--chdir", str(scratch)]


def mode(user) -> str:
    """How the workers will be cut off: "bwrap", "user" or "none"."""
    return "bwrap" if bwrap() else ("user" if user else "none")


def worker_env(lib: Path, scratch: Path) -> dict:
    """The worker's environment. The grader's may hold secrets (tokens, paths): only what the
    libraries read passes, and no NUMBA_CACHE_DIR: Numba looks beside the sandbox's modules,
    where stripped.py put the grader's compiled kernels."""
    env = {k: v for k, v in os.environ.items() if (k in _KEPT_ENV or k.startswith(_KEPT_PREFIXES))
           and k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(lib), HOME=str(scratch), TMPDIR=str(scratch), MPLBACKEND="agg",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def start_worker(lib: Path, scratch: Path, memory: int, user=None) -> subprocess.Popen:
    """Start the worker on the sandbox's course_lib (the folder `lib` holds it), in `scratch`.
    user: (uid, gid) to run as where bwrap cannot run (root only), or None."""
    uid, gid = user if (user and not bwrap()) else (-1, -1)
    env = worker_env(lib, scratch)
    # RLIMIT_AS only where it is enforced: elsewhere the judge's MemoryWatch stands in
    command = [sys.executable, "-s", "-c", _LAUNCHER, str(memory if limits.rlimit_as_works() else 0),
               str(uid), str(gid)]
    if bwrap():
        command = _bwrap_command(lib, scratch) + command
    elif uid >= 0:
        for path in [lib, scratch, *lib.rglob("*"), *scratch.rglob("*")]:
            os.chown(path, uid, gid, follow_symlinks=False)
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=scratch, env=env, start_new_session=True)


def end(process: subprocess.Popen) -> None:
    """Kill the worker and everything it started (in bwrap, all of its PID namespace; otherwise
    its process group: what left the group is ended by kill_user when grading ends)."""
    limits.kill_tree(process.pid)
    process.wait()


def kill_user(uid: int) -> None:
    """Kill every process of the user `uid` (the sandboxes' own user: nothing else runs as it)."""
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] and p.info["uids"].real == uid:
                p.kill()
        except psutil.Error:
            pass
