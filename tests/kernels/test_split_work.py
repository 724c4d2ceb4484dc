"""course_lib.kernels._fast.threads: how many threads the kernels use, and split_work's ranges."""
import inspect
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

from course_lib import presets
from course_lib.kernels._fast import jit, threads
from support import time_limit


def recorder():
    """(calls, rows): a fake of a kernel(split=True), rows and its rows.ranges, that records how
    they were called."""
    calls = []

    def rows(tag, first, last):
        calls.append(("rows", first, last, tag))

    def ranges(tag, bounds):
        calls.append(("ranges", bounds.tolist(), tag))
    rows.ranges = ranges
    return calls, rows


@pytest.mark.parametrize("n_threads, bounds", [(2, [0, 3, 7]), (3, [0, 2, 4, 7]), (8, list(range(8)))])
def test_the_pieces_in_as_many_ranges_as_threads_allowed(n_threads, bounds):
    calls, rows = recorder()
    with threads.set_num_threads(n_threads):
        threads.split_work(rows, 7, "x")
    assert calls == [("ranges", bounds, "x")]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_one_thread_when_one_is_allowed_or_there_is_one_piece(n):
    calls, rows = recorder()
    with threads.set_num_threads(1):
        threads.split_work(rows, n, "x")
    assert calls == [("rows", 0, n, "x")]


@pytest.mark.parametrize("work, grain, bounds", [(0, 1, None), (5, 3, None), (6, 3, [0, 4, 8]),
                                                 (100, 1, [0, 2, 4, 6, 8])])
def test_the_work_caps_the_threads(work, grain, bounds):
    calls, rows = recorder()
    with threads.set_num_threads(4):
        threads.split_work(rows, 8, "x", work=work, grain=grain)
    assert calls == ([("rows", 0, 8, "x")] if bounds is None else [("ranges", bounds, "x")])


def test_inner_boundaries_are_multiples_of_align():
    calls, rows = recorder()
    with threads.set_num_threads(3):
        threads.split_work(rows, 100, "x", align=16)
        threads.split_work(rows, 20, "x", align=16)      # one whole multiple: one range
    assert calls == [("ranges", [0, 32, 64, 100], "x"), ("rows", 0, 20, "x")]


def test_a_second_caller_meanwhile_and_a_forked_child_work_alone(monkeypatch):
    calls, rows = recorder()
    with threads.set_num_threads(2):
        with threads._pool_lock:                 # another thread's parallel loop is running
            threads.split_work(rows, 4, "second")
        monkeypatch.setattr(threads, "_parent", -1)
        threads.split_work(rows, 4, "child")
    assert calls == [("rows", 0, 4, "second"), ("rows", 0, 4, "child")]


@jit.kernel(split=True)
def _thread_of_each_piece(ids, first, last):
    for i in range(first, last):
        ids[i] = numba.get_thread_id()


def test_the_ranges_run_on_numbas_threads():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here")
    ids = np.full(6, -1)
    with threads.set_num_threads(2):
        threads.split_work(_thread_of_each_piece, 6, ids)
        assert sorted(set(ids.tolist())) == [0, 1] and ids[0] == ids[2] and ids[3] == ids[5]


def test_a_split_kernels_loop_takes_its_rows_arguments_and_bounds():
    from course_lib.kernels import layernorm
    loop = layernorm._backward_rows.ranges
    assert list(inspect.signature(loop.py_func).parameters) == ["dy", "xhat", "rstd", "gamma", "dx", "bounds"]
    assert loop.py_func.__code__.co_filename == layernorm._backward_rows.py_func.__code__.co_filename
    assert loop.targetoptions["parallel"] and not layernorm._backward_rows.targetoptions.get("parallel")


def _shadows(x, bounds, first, last):
    pass


def _no_range(first):
    pass


def _star_args(*args):
    pass


@pytest.mark.parametrize("rows, says", [(_shadows, "named like its loop's names: bounds"),
                                        (_no_range, "ending in first, last"),
                                        (_star_args, "ending in first, last")])
def test_a_split_kernel_its_loop_cannot_be_written_for_is_refused_in_one_line(rows, says):
    with pytest.raises(ValueError, match=says):
        jit.kernel(rows, split=True)


def test_a_split_kernels_loop_is_loaded_from_numbas_cache_in_the_next_process(tmp_path):
    """The loop is written at run time, yet cached on disk like a kernel written in the file: the
    second process loads it and compiles nothing."""
    code = ("import numpy as np\n"
            "from course_lib.kernels import activations\n"
            "from course_lib.kernels._fast import threads\n"
            "with threads.set_num_threads(2):\n"
            "    activations.gelu_forward(np.ones((256, 4096)))\n"
            "stats = activations._gelu_forward_rows.ranges.stats\n"
            "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_NUM_THREADS": "2"}
    seen = []
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=time_limit(300))
        assert run.returncode == 0, run.stderr[-2000:]
        seen.append(run.stdout.split())
    assert seen == [["0", "1"], ["1", "0"]]


@pytest.mark.parametrize("name", threads.LIMIT_VARIABLES)
def test_the_environment_limits_the_threads(monkeypatch, name):
    for other in threads.LIMIT_VARIABLES:
        monkeypatch.delenv(other, raising=False)
    assert threads._limit_from_environment() is None
    monkeypatch.setenv(name, "3")
    assert threads._limit_from_environment() == 3
    monkeypatch.setenv(name, "not a number")
    assert threads._limit_from_environment() is None
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    monkeypatch.setattr(threads, "blas_thread_count", lambda: 8)
    monkeypatch.setattr(threads, "ENVIRONMENT_LIMIT", None)     # what this process was started with
    with threads.set_num_threads(None):
        assert threads.get_num_threads() == 8
        monkeypatch.setattr(threads, "ENVIRONMENT_LIMIT", 3)
        assert threads.get_num_threads() == 3


def test_course_lib_num_threads_on_import_limits_the_kernels_and_blas():
    code = ("from course_lib.kernels._fast import threads\n"
            "print(threads.get_num_threads(), threads.blas_thread_count())\n")
    env = {**os.environ, "COURSE_LIB_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=time_limit(120))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["1", "1"]


def test_set_num_threads_sets_the_kernels_and_blas_until_lifted_or_the_block_ends():
    before = (threads.get_num_threads(), threads.blas_thread_count())
    try:
        threads.set_num_threads(3)                          # a call: from now on
        assert threads.get_num_threads() == 3 and threads.blas_thread_count() == 3
        with threads.set_num_threads(1):                    # a block inside decides inside it
            assert threads.get_num_threads() == 1 and threads.blas_thread_count() == 1
        assert threads.get_num_threads() == 3 and threads.blas_thread_count() == 3
        threads.set_num_threads(5)                          # a second call replaces the first
        assert threads.get_num_threads() == 5 and threads.blas_thread_count() == 5
    finally:
        threads.set_num_threads(None)
    assert (threads.get_num_threads(), threads.blas_thread_count()) == before
    for bad in (0, -1, 2.0, True, "2"):
        with pytest.raises(ValueError, match="whole number >= 1"):
            threads.set_num_threads(bad)


def test_threads_for_model_is_one_for_a_small_model_else_the_limit():
    small, large = presets.deep_dive(), presets.gpt2(d_model=768)
    assert threads.threads_for_model(small, 32 * small.seq_len) == 1
    with threads.set_num_threads(3):
        assert threads.threads_for_model(large, 32 * 128) == 3


def test_blas_inline_runs_blas_on_one_thread_and_restores_it():
    from course_lib.kernels._fast.blas import NUMPY_BLAS_CONTROLLER
    if NUMPY_BLAS_CONTROLLER is None:
        pytest.skip("a BLAS threadpoolctl cannot see")
    with threads.set_num_threads(3):
        with threads.blas_inline():
            with threads.blas_inline():
                assert NUMPY_BLAS_CONTROLLER.get_num_threads() == 1
                assert threads.blas_thread_count() == 3 and threads.get_num_threads() == 3
            assert NUMPY_BLAS_CONTROLLER.get_num_threads() == 1      # the outer block still holds
        assert NUMPY_BLAS_CONTROLLER.get_num_threads() == 3
