"""course_lib.kernels._fast.threads.split_work: two halves on two threads, or all on one."""
import threading

import pytest

from course_lib.kernels._fast import threads


def recorder():
    seen = []

    def piece(tag, first, last):
        seen.append((first, last, threading.current_thread().name, tag))
    return seen, piece


def test_two_halves_on_two_threads_when_blas_may_use_two():
    seen, piece = recorder()
    with threads.blas_threads(2):
        threads.split_work(piece, 7, "x")
    assert sorted(s[:2] for s in seen) == [(0, 3), (3, 7)]
    assert {s[2] for s in seen} == {threading.current_thread().name, "course_lib split_work"}
    assert all(s[3] == "x" for s in seen)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_one_thread_when_blas_is_told_one_or_there_is_one_piece(n):
    seen, piece = recorder()
    with threads.blas_threads(1):
        threads.split_work(piece, n, "x")
    assert [s[:3] for s in seen] == [(0, n, threading.current_thread().name)]


def test_one_thread_when_the_caller_finds_it_not_worth_it():
    seen, piece = recorder()
    threads.split_work(piece, 7, "x", worth_it=False)
    assert [s[:3] for s in seen] == [(0, 7, threading.current_thread().name)]


def test_the_helpers_error_comes_back_and_the_helper_works_on():
    def second_half_fails(first, last):
        if first > 0:
            raise KeyError("from the helper")
    seen, piece = recorder()
    with threads.blas_threads(2):
        with pytest.raises(KeyError, match="from the helper"):
            threads.split_work(second_half_fails, 4)
        threads.split_work(piece, 4, "again")
    assert sorted(s[:2] for s in seen) == [(0, 2), (2, 4)]
