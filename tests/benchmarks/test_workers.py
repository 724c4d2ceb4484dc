"""benchmarks/workers.py: each implementation in its own process, rounds alternating."""
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from workers import Worker, WorkerError, alternate, started  # noqa: E402


def where_am_i(tag):
    """A worker's factory: run(x) -> (tag, x, the worker's pid, its WORKER_TEST variable, the time)."""
    return lambda x: (tag, x, os.getpid(), os.environ.get("WORKER_TEST"), time.monotonic())


def broken_at_run():
    return lambda: 1 / 0


def needs_a_missing_library(name=None):
    import no_such_library_here  # noqa: F401


def test_a_worker_runs_in_its_own_process_with_its_own_environment():
    worker = Worker(where_am_i, "a", env={"WORKER_TEST": "set"})
    try:
        tag, x, pid, env, _ = worker(3)
    finally:
        worker.close()
    assert (tag, x, env) == ("a", 3, "set") and pid != os.getpid()
    assert "WORKER_TEST" not in os.environ


def test_errors_come_back_to_the_parent():
    worker = Worker(broken_at_run)
    try:
        with pytest.raises(WorkerError, match="ZeroDivisionError"):
            worker()
    finally:
        worker.close()
    with pytest.raises(ImportError, match="no_such_library_here"):
        Worker(needs_a_missing_library)


def test_rounds_alternate_between_the_workers(monkeypatch):
    monkeypatch.setattr("workers.SETTLE", 0.0)
    with started(where_am_i, ["a", "b"]) as workers:
        results = alternate(workers, 2, 7)
    assert [r[:2] for r in results["a"]] == [("a", 7)] * 2 and [r[:2] for r in results["b"]] == [("b", 7)] * 2
    assert results["a"][0][2] != results["b"][0][2]
    a, b = ([r[4] for r in results[name]] for name in ("a", "b"))
    assert a[0] < b[0] < a[1] < b[1]                # a, b, a, b


def test_pytorch_alone_may_be_missing():
    with started(needs_a_missing_library, ["pytorch"]) as workers:
        assert workers == {}
    with pytest.raises(ImportError):
        with started(needs_a_missing_library, ["course_lib"]):
            pass


def malloc_switch(name):
    return lambda: os.environ.get("COURSE_LIB_KEEP_FREED_MEMORY")


def test_pytorch_runs_without_course_libs_malloc_settings():
    with started(malloc_switch, ["course_lib", "pytorch"]) as workers:
        assert workers["pytorch"]() == "0" and workers["course_lib"]() is None
    assert "COURSE_LIB_KEEP_FREED_MEMORY" not in os.environ
