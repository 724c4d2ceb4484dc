"""Start the process that runs a learner's code while it is graded, as cut off as this machine allows.

    account = fresh_account(group)                        # root only: a user id of this worker's own
    process = start_worker(lib, scratch, memory=4 * 2**30, account=account)   # a subprocess.Popen
    # its stdin and stdout are the channel; end(process, account) ends it and all it started

Three ways, the best first (book/instructors.md has the table):
- bubblewrap (`bwrap`, Linux, where user namespaces are allowed): new user, PID, IPC, network,
  UTS and cgroup namespaces and no capabilities; a read-only file system of only the system's
  and Python's folders, the sandbox's course_lib and its scratch folder, and a private /tmp and
  /dev/shm of SANDBOX_TMP bytes each: the class folder, the instructor notebooks, course_lib's
  own sources and the other sandboxes do not exist in it. Its first process is PID 1 of its
  namespace: when it ends, the kernel ends every process it started; and it dies with the
  judge that started it (--die-with-parent).
- `user` (root only, where bwrap cannot run, as in a Docker container such as Gradescope's): the
  process runs in the group of the user named to `grade --user`, as a user id of its own
  (fresh_account), which can write only its scratch folder and world-writable places (what
  it leaves there is removed when it ends) and can signal no other worker.
- neither: a process of the grader's own user, in a session of its own (killed as a group):
  protection from accidents (an endless loop, a runaway allocation), not from intent.
As root, bubblewrap itself runs as the worker's own user id too where it can (else as root,
with every capability dropped). Memory: RLIMIT_AS where Linux enforces it, else
limits.MemoryWatch from the judge. Disk: DISK_LIMIT bytes in all (`written`, watched by the
judge's limits.DiskWatch), each file too (RLIMIT_FSIZE). Processes: a worker with a user id
of its own at most process_limit() processes and threads (RLIMIT_NPROC).
"""
from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import site
import stat
import subprocess
import sys
from pathlib import Path

import psutil

from ..exercises import limits

# the limits (exercises/limits.py; then files and processes), the worker's user if asked (root only), then the worker
_LAUNCHER = limits.launcher_code(
    "import os; size, nproc, uid, gid = map(int, sys.argv[2:6])\n"
    "if resource is not None:\n"
    "    if size > 0: resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))\n"
    "    if nproc > 0: resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))\n"
    "if uid >= 0:\n"
    "    os.setgroups([]); os.setgid(gid); os.setuid(uid)\n"
    "import runpy; sys.argv[1:] = []; runpy.run_module('course_lib.instructor.worker', run_name='__main__')\n")

SANDBOX_TMP = 64 * 2**20        # bytes of the bubblewrap sandbox's /tmp and of its /dev/shm (memory)
DISK_LIMIT = 2**30              # bytes a worker may write on disk (limits.DiskWatch), each file too
ENTRY = 4096                    # bytes `written` counts at least for a file or folder (its inode and block)
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")   # where any user may leave files, without bubblewrap
FRESH_UIDS = range(2**30, 2**31 - 1)            # the user ids a worker may get (none an account's)
# what a worker imports before any learner's code: a user who cannot import them cannot be one
WORKER_IMPORTS = ("import importlib.util, numpy, psutil\n"
                  "if importlib.util.find_spec('numba') is None: raise ImportError('No module named numba')")

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
    # --cap-drop: as root, the sandbox's processes would keep root's powers (remount a read-only
    # folder read-write, unmount a tmpfs): none are kept
    return ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]


def as_root() -> bool:
    return getattr(os, "geteuid", lambda: -1)() == 0


def process_limit() -> int:
    """RLIMIT_NPROC of a worker with a user id of its own: its threads (BLAS's and Numba's, a
    few per core) and room for the learner's own processes, but no swarm."""
    return 64 + 4 * (os.cpu_count() or 1)


def fresh_account(group: int | None = None) -> tuple[int, int]:
    """(uid, gid) for one worker (root only): a user id that no account has and no process runs
    as, drawn at random (two graders on one machine do not meet), in `group` (the --user's
    group; None: a group numbered as the uid, which has no members)."""
    import pwd      # POSIX only, as root is
    running = {p.info["uids"].real for p in psutil.process_iter(["uids"]) if p.info["uids"]}
    while True:
        uid = FRESH_UIDS[secrets.randbelow(len(FRESH_UIDS))]
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in running:
                return uid, uid if group is None else group


def python_problem(account: tuple[int, int], wrap: tuple = ()) -> str | None:
    """Why a worker running as `account` (wrapped in the command `wrap`) cannot start this
    Python and import what the worker needs (one line), or None when it can."""
    try:
        done = subprocess.run([*wrap, sys.executable, "-s", "-c", WORKER_IMPORTS], user=account[0],
                              group=account[1], extra_groups=[], capture_output=True, text=True, timeout=120,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd="/")
    except (OSError, subprocess.SubprocessError) as err:
        return f"{type(err).__name__}: {err}"
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")


@functools.lru_cache(maxsize=None)
def bwrap_as_account(group: int | None) -> bool:
    """Can bubblewrap run as a fresh account of `group` (an unprivileged user namespace, the
    Python readable by others)? Then a root grader's sandboxes get user ids of their own."""
    return bwrap() is not None and python_problem(fresh_account(group),
                                                  (bwrap(), *_namespaces(), "--ro-bind", "/", "/")) is None


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
    size = ["--size", str(SANDBOX_TMP)]
    command = [bwrap(), *_namespaces(), *size, "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
               *size, "--tmpfs", "/dev/shm"]
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
    # the sandbox's own root and /dev are tmpfs folders that would take any file: read-only
    return command + ["--bind", str(root), str(root), "--remount-ro", "/dev", "--remount-ro", "/",
                      "--chdir", str(scratch)]


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


def start_worker(lib: Path, scratch: Path, memory: int, account=None, bwrap_as: bool = False) -> subprocess.Popen:
    """Start the worker on the sandbox's course_lib (the folder `lib` holds it), in `scratch`.
    account: (uid, gid) of the worker's own (fresh_account; root only), or None: the grader's
    user; bwrap_as: bubblewrap may run as it (bwrap_as_account, asked once by the grader)."""
    uid, gid = account or (-1, -1)
    own = account is not None and (not bwrap() or bwrap_as)
    setuid = account is not None and not bwrap()
    # RLIMIT_AS only where it is enforced: elsewhere the judge's MemoryWatch stands in
    command = [sys.executable, "-s", "-c", _LAUNCHER, str(memory if limits.rlimit_as_works() else 0), str(DISK_LIMIT),
               str(process_limit() if own else 0), str(uid if setuid else -1), str(gid if setuid else -1)]
    as_user = {}
    if bwrap():
        command = _bwrap_command(lib, scratch) + command
        if own:
            as_user = {"user": uid, "group": gid, "extra_groups": []}
    if own:
        for path in [lib, scratch, *lib.rglob("*"), *scratch.rglob("*")]:
            os.chown(path, uid, gid, follow_symlinks=False)
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=scratch, env=worker_env(lib, scratch), start_new_session=True, **as_user)


def end(process: subprocess.Popen, account=None) -> None:
    """Kill the worker and everything it started (in bwrap, all of its PID namespace; otherwise
    its process group), then clean_up(account)."""
    limits.kill_tree(process.pid)
    process.wait()
    if account is not None:
        clean_up(account)


def clean_up(account: tuple[int, int]) -> None:
    """Kill every process of the worker's own user id, then (without bwrap, where /tmp is the
    machine's) remove every file and folder it owns in SHARED_TMP: nothing of one worker
    reaches a later one (another exercise's, another learner's)."""
    if bwrap():     # its PID namespace ends with it: what is left is on its way out, unseen by others
        kill_user(account[0], wait=False)
        return
    kill_user(account[0])
    for path, st in [found for top in SHARED_TMP for found in _owned(top, *account)]:
        with contextlib.suppress(OSError):
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)


def _owned(top: str, uid: int, gid: int):
    """(path, lstat) of each file and folder below `top` that `uid` owns (a folder it owns, not
    what is in it), looking only in the folders it could write in: no other holds one of its."""
    try:
        entries = list(os.scandir(top))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == uid:
            yield entry.path, st
        elif stat.S_ISDIR(st.st_mode) and (st.st_mode & stat.S_IWOTH or
                                           (st.st_gid == gid and st.st_mode & stat.S_IWGRP)):
            yield from _owned(entry.path, uid, gid)


def written(root: Path, account=None) -> int:
    """Bytes on disk of what a worker may write: its sandbox folder `root` (its course_lib and
    scratch), and without bwrap the files its own user id has in SHARED_TMP."""
    def on_disk(st):       # (Windows has no st_blocks: the file's length); every entry, an empty
        # file or a folder too, costs the disk an inode and a block: ENTRY bytes at least
        return max(st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size, ENTRY)

    def size(path, st):
        if not stat.S_ISDIR(st.st_mode):
            return on_disk(st)
        total = 0
        for folder, _, files in os.walk(path):
            for name in [".", *files]:
                with contextlib.suppress(OSError):
                    total += on_disk(os.lstat(os.path.join(folder, name)))
        return total
    total = size(root, os.lstat(root))
    if account is not None and not bwrap():
        total += sum(size(path, st) for top in SHARED_TMP for path, st in _owned(top, *account))
    return total


def kill_user(uid: int, wait: bool = True) -> None:
    """Kill every process of the user `uid` (a worker's own: nothing else runs as it), and with
    `wait` again while any is left (one forking as it is killed), until none runs (5 s at most)."""
    for _ in range(50 if wait else 1):
        found = [p for p in psutil.process_iter(["uids", "status"]) if p.info["uids"]
                 and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE]
        if not found:
            return
        for p in found:
            with contextlib.suppress(psutil.Error):
                p.kill()
        if wait:
            psutil.wait_procs(found, timeout=0.1)


def protections() -> list[str]:
    """What this machine enforces when it runs learners' code (for doctor), a line each."""
    lines = ["memory limit: " + ("enforced by the OS (RLIMIT_AS)" if limits.rlimit_as_works() else
                                 "watched (psutil reads the process's memory 10 times a second and kills it "
                                 "past the limit; this OS does not enforce RLIMIT_AS)")]
    lines.append("time limit: the whole run, from the grader's process; each cell of `yours`: " +
                 ("SIGALRM" if hasattr(signal, "SIGALRM") else
                  "a watchdog thread (no SIGALRM here: a cell blocked in C runs on to the run's limit)"))
    lines.append("grading sandbox: " + ("bubblewrap (own user, PID and network namespaces, no capabilities; a "
                                        "read-only file system without the solutions)" if bwrap() else
                                        "not available (no bubblewrap here, or it may not make namespaces)"))
    lines.append("as another user (grade --user): " +
                 ("available (running as root): each worker a user id of its own" if as_root() else
                  "not available (needs root on Linux or macOS)" if hasattr(os, "geteuid") else
                  "not available on this OS: learners' code runs as you"))
    return lines
