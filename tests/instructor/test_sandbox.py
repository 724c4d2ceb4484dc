"""course_lib.instructor.sandbox: what a worker's code can do in each sandbox, seen from inside.

Each test starts workers as the judge does (start_worker, then the channel), runs cells in them,
reads what they found through a function `result` of their own, then ends them as the judge
does and looks at what is left. The sandboxes, as root:
- bwrap-root: bubblewrap started as root (where the grader's Python is root's alone, as in CI);
- bwrap-own: bubblewrap started as the worker's own user id (a Python every user may read);
- user: no bubblewrap, the worker as its own user id in nobody's group (Gradescope's case).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from course_lib.instructor import sandbox
from test_gradescope import REPOSITORY, python_for_nobody

MARKER = "course-lib-isolation-marker"

# Run workers (argv[1]: a list of [mode, cells]; "PIDS" in a cell: the earlier workers' pids and
# the results that are numbers), then end each and print what it found, its user id, and what of
# that id is left (outside the sandbox's own folder, which the judge removes).
SCRIPT = r"""
import json, os, sys, tempfile, time
from pathlib import Path
import psutil
from course_lib.instructor import sandbox
from course_lib.instructor.channel import Peer
from course_lib.instructor.stripped import Stripped

def owner(path):           # (another test's files may go while this one looks)
    try:
        return os.lstat(path).st_uid
    except OSError:
        return None


tree, running, found = Stripped(), [], []
with tempfile.TemporaryDirectory() as tmp:
    os.chmod(tmp, 0o711)
    for k, (mode, cells) in enumerate(json.loads(sys.argv[1])):
        lib, scratch = Path(tmp) / f"lib{k}", Path(tmp) / f"work{k}"
        scratch.mkdir()
        tree.build(lib, [])
        account = None if mode == "bwrap-root" else sandbox.fresh_account(65534 if mode == "user" else None)
        process = sandbox.start_worker(lib, scratch, 2 * 2**30, account, bwrap_as=mode == "bwrap-own")
        peer = Peer(process.stdout, process.stdin)
        pids = repr([p.pid for p, _, _ in running] + [r for r in found if type(r) is int])
        peer.send({"op": "start", "cells": [["x", [c.replace("PIDS", pids) for c in cells]]]})
        assert peer.receive()[0]["errors"] == [], "a cell raised"
        peer.send({"op": "get", "names": ["result"]})
        document, arrays = peer.receive()
        found.append(peer.decode(document["value"], arrays)[0]())
        running.append((process, account, peer))
    out = []
    for (process, account, _), result in zip(running, found):
        sandbox.end(process, account)
        uid = account[0] if account else None
        for _ in range(50):        # (in bubblewrap, what is left is on its way out with its namespace)
            left = [p.pid for p in psutil.process_iter(["uids", "status"]) if uid is not None
                    and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE]
            if not left:
                break
            time.sleep(0.1)
        files = [os.path.join(d, n) for top in sandbox.SHARED_TMP for d, ds, fs in os.walk(top) for n in ds + fs
                 if uid is not None and owner(os.path.join(d, n)) == uid and not d.startswith(tmp)]
        out.append({"result": result, "uid": uid, "left": left, "files": files})
print(json.dumps(out))
"""


def _as_root():
    return pytest.mark.skipif(not sandbox.as_root(), reason="a worker of its own user id needs root")


_bwrap = pytest.mark.skipif(sandbox.bwrap() is None, reason="bubblewrap cannot run here")
MODES = {"bwrap-root": [_bwrap, _as_root()], "bwrap-own": [_bwrap, _as_root()], "user": [_as_root()]}


def modes(*names):
    return pytest.mark.parametrize("mode", [pytest.param(m, marks=MODES[m]) for m in names])


@pytest.fixture(scope="module")
def shared_python():
    """A Python (with this environment's packages) that any user id may run, in a folder every
    user may enter."""
    folder = Path(tempfile.mkdtemp(prefix="isolation-test-"))
    folder.chmod(0o755)
    yield lambda: python_for_nobody(folder)
    shutil.rmtree(folder)


def run_workers(shared_python, workers):
    """[{"result", "uid", "left", "files"}] of each (mode, cells) worker, run as the judge runs them."""
    python = sys.executable if workers[0][0] == "bwrap-root" else shared_python()
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    if workers[0][0] == "user":
        env[sandbox.WITHOUT_BWRAP] = "1"
    if workers[0][0] == "bwrap-own":
        assert subprocess.run([python, "-c", "from course_lib.instructor import sandbox as i; "
                               "assert i.bwrap_as_account(None)"], env=env).returncode == 0
    done = subprocess.run([python, "-c", SCRIPT, json.dumps(workers)], env=env, capture_output=True, text=True,
                          timeout=600, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


ROOT_POWERS = f"""
import ctypes, os, site, sys
libc = ctypes.CDLL(None, use_errno=True)
caps = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('CapEff'))
remount = libc.mount(None, sys.prefix.encode(), None, 32 | 4096, None)     # MS_REMOUNT | MS_BIND: read-write
unmount = libc.umount2(b'/tmp', 2)                                          # MNT_DETACH
try:
    open(os.path.join(site.getsitepackages()[0], '{MARKER}.pth'), 'w').write('import os\\n')
    wrote = True
except OSError:
    wrote = False
def result():
    return [caps, remount, unmount, wrote]
"""


@modes("bwrap-root", "bwrap-own")
def test_code_in_bubblewrap_has_none_of_roots_powers(mode, shared_python):
    """As root, bubblewrap kept every capability: the sandbox's code remounted a read-only folder
    read-write and wrote a .pth file into the grader's own site-packages (which every later
    Python of the grader, the judge included, would run)."""
    [worker] = run_workers(shared_python, [(mode, [ROOT_POWERS])])
    assert worker["result"] == ["0000000000000000", -1, -1, False], worker
    import site
    assert not any(os.path.exists(os.path.join(p, f"{MARKER}.pth")) for p in site.getsitepackages())


SWARM = """
import os, time
started = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        started += 1
except OSError:
    pass
def result():
    return started
"""


@modes("bwrap-own", "user")
def test_a_worker_of_its_own_user_id_cannot_start_a_swarm(mode, shared_python):
    [worker] = run_workers(shared_python, [(mode, [SWARM])])
    assert 0 < worker["result"] < sandbox.process_limit() and worker["left"] == [], worker


FILES = f"""
import os
def attempt(path, size, sparse):
    try:
        with open(path, 'wb') as f:
            if sparse:
                f.seek(size - 1)
                f.write(b'x')
            else:
                f.write(bytes(size))
        return 'written'
    except OSError as e:
        return e.strerror
big = attempt('big', {sandbox.DISK_LIMIT} + 2, True)                     # past the disk limit: RLIMIT_FSIZE
tmp = attempt('/tmp/{MARKER}', {sandbox.SANDBOX_TMP} + 2**20, False)    # past the sandbox's /tmp
shm = attempt('/dev/shm/{MARKER}', {sandbox.SANDBOX_TMP} + 2**20, False)
os.makedirs('/tmp/{MARKER}-folder', exist_ok=True)
open('/tmp/{MARKER}-folder/library.py', 'w').write('SOLUTION = 1')
def result():
    return [big, tmp, shm]
"""


@modes("bwrap-root", "bwrap-own", "user")
def test_files_have_a_size_and_what_is_left_in_tmp_is_removed(mode, shared_python):
    [worker] = run_workers(shared_python, [(mode, [FILES])])
    big, tmp, shm = worker["result"]
    assert big == "File too large", worker
    if mode != "user":         # the sandbox's own /tmp and /dev/shm: each SANDBOX_TMP bytes
        assert tmp == shm == "No space left on device", worker
    else:                      # the machine's: what the worker left there is gone when it ends
        assert tmp == shm == "written" and worker["files"] == [], worker
        assert not any(MARKER in name for name in os.listdir("/tmp") + os.listdir("/dev/shm"))


LEAVE_A_PROCESS = """
import subprocess, sys
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)
def result():
    return child.pid
"""

SIGNAL_OTHERS = """
import os, signal
answers = []
for pid in PIDS:
    try:
        os.kill(pid, signal.SIGSTOP)
        answers.append('stopped')
    except OSError as e:
        answers.append(type(e).__name__)
def result():
    return answers
"""


@modes("bwrap-own", "user")
def test_workers_cannot_signal_each_other_and_leave_nothing_running(mode, shared_python):
    """Under --user, every worker was nobody: a process that left its worker's session outlived
    it and could stop classmates' workers until grading ended."""
    first, second = run_workers(shared_python, [(mode, [LEAVE_A_PROCESS]), (mode, [SIGNAL_OTHERS])])
    assert first["uid"] != second["uid"]
    assert second["result"] and set(second["result"]) <= {"PermissionError", "ProcessLookupError"}, second
    assert first["left"] == [], first
    if mode == "user":         # (in bubblewrap the child's pid is its namespace's)
        assert not psutil.pid_exists(first["result"]) or psutil.Process(first["result"]).status() == "zombie"


@pytest.mark.skipif(not sandbox.as_root(), reason="--user needs root")
def test_a_python_the_workers_cannot_run_is_one_line_before_grading(tmp_path, monkeypatch):
    """A Python in a folder only root may read, or one without the course's packages for the
    workers' user ids: `grade --user` says so at once (it answered every exercise with "the
    sandbox ... ended: a crash, or killed for memory")."""
    from course_lib.instructor import judge_runner
    hidden = tmp_path / "root-only"
    hidden.mkdir(mode=0o700)
    (hidden / "python").symlink_to(sys.executable)
    bare = Path(tempfile.mkdtemp(prefix="bare-python-"))
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")   # (as python_for_nobody)
    try:
        bare.chmod(0o755)
        cases = [(hidden / "python", "Permission denied")]
        if system.exists():      # a Python every user may run, in a venv without the packages
            subprocess.run([str(system), "-m", "venv", "--without-pip", str(bare / "venv")], check=True)
            cases.append((bare / "venv" / "bin" / "python", "No module named 'numpy'"))
        for python, says in cases:
            monkeypatch.setattr(sys, "executable", str(python))
            with pytest.raises(ValueError) as error:
                judge_runner.kernel_user("nobody")
            assert says in str(error.value) and "install Python and the packages where every user can read them" \
                in str(error.value) and "\n" not in str(error.value), error.value
    finally:
        shutil.rmtree(bare)


def test_what_a_worker_wrote_counts_its_folders_and_empty_files(tmp_path):
    """300,000 empty folders took 1.14 GB of a disk and counted 0 bytes: every entry counts
    sandbox.ENTRY bytes at least."""
    for k in range(300):
        (tmp_path / f"{k:03d}").mkdir()
        (tmp_path / f"{k:03d}" / "empty").touch()
    assert sandbox.written(tmp_path) >= 601 * sandbox.ENTRY
