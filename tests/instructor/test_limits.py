"""course_lib.exercises.limits: the time and memory limits of learners' code, on the POSIX path and
on the path Windows (and, for memory, macOS) takes, shown here by the `windows_like` fixture."""
import subprocess
import sys
import time

import psutil
import pytest

from course_lib.exercises import limits


class Late(BaseException):
    pass


@pytest.mark.parametrize("posix", [True, False], ids=["SIGALRM", "watchdog thread"])
def test_time_limit_stops_an_endless_loop(posix, request):
    if not posix:
        request.getfixturevalue("windows_like")
    start = time.monotonic()
    with pytest.raises(Late):
        with limits.time_limit(0.2, Late):
            while True:
                pass
    assert time.monotonic() - start < 5
    time.sleep(0.3)           # and nothing is raised later, after the block


@pytest.mark.parametrize("posix", [True, False], ids=["SIGALRM", "watchdog thread"])
def test_time_limit_lets_a_quick_block_be(posix, request):
    if not posix:
        request.getfixturevalue("windows_like")
    with limits.time_limit(0.3, Late):
        total = sum(range(1000))
    time.sleep(0.5)
    assert total == 499500


def _child(code: str, memory: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", limits.launcher_code(code), str(memory)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_linux_enforces_the_limit_in_the_child():
    if not limits.rlimit_as_works():
        pytest.skip("this OS does not enforce RLIMIT_AS")
    child = _child("import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])\n"
                   "try:\n    bytearray(2 * n)\nexcept MemoryError:\n    print('MemoryError')\n", 2**30)
    out, err = child.communicate(timeout=60)
    assert out.split() == [str(2**30), "MemoryError"], err


def test_without_rlimits_a_watch_kills_the_child_past_its_memory(windows_like):
    assert not limits.rlimit_as_works()
    child = _child("import time; x = bytearray(400 * 2**20); x[::4096] = b'1' * len(x[::4096]); time.sleep(60)")
    watch = limits.MemoryWatch(child.pid, 200 * 2**20)
    try:
        child.wait(timeout=30)
    finally:
        watch.stop()
    assert watch.active and watch.tripped


def test_the_watch_leaves_a_small_child_alone(windows_like):
    child = _child("print(sum(range(10)))")
    watch = limits.MemoryWatch(child.pid, 2**30)
    out, _ = child.communicate(timeout=30)
    watch.stop()
    assert out.strip() == "45" and not watch.tripped


@pytest.mark.parametrize("posix", [True, False], ids=["process group", "psutil"])
def test_kill_tree_kills_what_the_child_started(posix, request):
    if not posix:
        request.getfixturevalue("windows_like")
    child = _child("import subprocess, sys, time\n"
                   "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                   "print(g.pid, flush=True); time.sleep(60)")
    grandchild = psutil.Process(int(child.stdout.readline()))
    limits.kill_tree(child.pid)
    child.wait(timeout=10)
    grandchild.wait(timeout=10)
    assert not grandchild.is_running()
    limits.kill_tree(child.pid)           # gone already: nothing to do


def test_protections_say_what_this_machine_enforces(windows_like):
    from course_lib.instructor.sandbox import protections
    lines = protections()
    assert "watched" in lines[0] and "watchdog thread" in lines[1]
