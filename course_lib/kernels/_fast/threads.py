"""How many threads the model's kernels use: BLAS's, and a second thread for split work.

OpenBLAS threads spin between calls. At the course model's size every product
is small: on an idle machine a second thread helps a step only a little, and when
the machine is busy the spinning steals the core that the Numba kernels run on.
Training therefore uses one BLAS thread for small models.

Some kernels are many small independent pieces (attention: one per batch row and head,
each product too small for BLAS to split). split_work runs the first half of the pieces
here and the second half on one helper thread, when BLAS itself may use two threads or
more: a `with blas_threads(1)` block (or OPENBLAS_NUM_THREADS=1) keeps everything on one
core. Each piece is computed the same way whichever thread runs it, so results do not
depend on the split.
"""
import os
import threading

from threadpoolctl import ThreadpoolController

from .blas import NUMPY_BLAS_CONTROLLER

SMALL = 1 << 22   # rows x d_model x d_model below this: one thread is faster


def blas_threads_for(config, rows):
    """1 for small products (rows = tokens per step), else None (leave the default)."""
    return 1 if rows * config.d_model * config.d_model < SMALL else None


class blas_threads:
    """`with blas_threads(n):` limits BLAS to n threads inside the block (n=None: no change).
    The same object can be entered again and again (once per training step, say)."""

    def __init__(self, n):
        self.n = n
        self._limits = None

    _controller = None

    def __enter__(self):
        global _limit
        if self.n is not None:
            if blas_threads._controller is None:          # finding the libraries is slow: once
                blas_threads._controller = ThreadpoolController()
            self._limits = blas_threads._controller.limit(limits=self.n, user_api="blas")
            self._outer, _limit = _limit, self.n
        return self

    def __exit__(self, *exc):
        global _limit
        if self._limits is not None:
            self._limits.restore_original_limits()
            self._limits, _limit = None, self._outer


_limit = None     # the innermost `blas_threads(n)` block's n: the limit where threadpoolctl knows no BLAS


def blas_thread_count():
    """How many threads NumPy's BLAS may use now, whichever library it is and whether or not the
    kernels call it (blas.py's fallback): as threadpoolctl reads it (and sets it, in `blas_threads`
    or the learner's own threadpool_limits), else the cores, within any `blas_threads` block."""
    if NUMPY_BLAS_CONTROLLER is not None:
        n = NUMPY_BLAS_CONTROLLER.get_num_threads()
    else:        # a BLAS threadpoolctl cannot see (Accelerate): it uses every core
        n = os.cpu_count() or 1
    return min(n, _limit) if _limit is not None else n


class _Helper:
    """One daemon thread that runs one call at a time: start(fn, args), then wait()."""

    def __init__(self):
        self.pid = os.getpid()
        self._go, self._done = threading.Semaphore(0), threading.Semaphore(0)
        self._job, self._error = None, None
        threading.Thread(target=self._serve, name="course_lib split_work", daemon=True).start()

    def _serve(self):
        while True:
            self._go.acquire()
            fn, args = self._job
            try:
                fn(*args)
            except BaseException as e:      # raised again in the caller's thread
                self._error = e
            self._job = None
            self._done.release()

    def start(self, fn, args):
        self._job, self._error = (fn, args), None
        self._go.release()

    def wait(self):
        self._done.acquire()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


_helper = None
_helper_lock = threading.Lock()     # one split at a time; a second caller meanwhile works alone


def split_work(fn, n, *args, worth_it=True):
    """fn(*args, first, last) for the pieces first..last-1 of 0..n-1: two halves on two threads
    when the caller finds the work worth a second thread (worth_it), BLAS may use two or more
    and the helper is free; else all here. fn must release the GIL (`@kernel(nogil=True)`) and
    write each piece's results where no other piece does."""
    global _helper
    if not worth_it or n < 2 or blas_thread_count() < 2 or not _helper_lock.acquire(blocking=False):
        fn(*args, 0, n)
        return
    try:
        if _helper is None or _helper.pid != os.getpid():     # none yet, or this is a forked child
            _helper = _Helper()
        half = n // 2
        _helper.start(fn, args + (half, n))
        try:
            fn(*args, 0, half)
        finally:
            _helper.wait()
    finally:
        _helper_lock.release()
