"""How many threads the model's kernels use, and split_work, which runs a kernel on them.

One number limits course_lib's threads: the kernels' own (Numba's parallel loops) and BLAS's. By
default it is the cores this process may run on (os.sched_getaffinity where the system has it),
lowered by COURSE_LIB_NUM_THREADS, NUMBA_NUM_THREADS or OMP_NUM_THREADS when set on import
(applied to BLAS too, by limit_blas_from_environment) and by BLAS's own limit. `set_num_threads(n)`
sets it to n for both, from then on or inside a `with` block (more than the cores if asked: the
tests do that). The kernels' threads and BLAS's take turns: a kernel that multiplies on its
own threads has BLAS run each product in the calling thread (blas_inline), so the two never ask
for more cores than that number between them.

OpenBLAS threads spin between calls. At the course model's size every product is small: on an
idle machine a second thread helps a step only a little, and when the machine is busy the
spinning steals the core that the Numba kernels run on. Training therefore uses one BLAS thread
for small models (threads_for_model), and with it one thread for the kernels.

split_work runs a kernel's independent pieces (rows, (batch row, head) pairs, tiles, stretches
of Adam's parameters) as contiguous ranges, in a Numba `prange` loop, on as many threads as the
work is worth. Each piece is computed by the same code, in the same order, whichever thread runs
it, and a sum over rows is split by columns (each thread sums whole columns, rows in order): so
the results are the same bytes for every thread count (tests/kernels/test_thread_count.py).
"""
import os
import threading

import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

from .blas import NUMPY_BLAS_CONTROLLER
from .private import blas_symbol, launch_numba_threads
from .tuning import SMALL_MODEL_PRODUCTS

LIMIT_VARIABLES = ("COURSE_LIB_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS")


def available_cores():
    """The cores this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _limit_from_environment():
    """The smallest positive whole number among LIMIT_VARIABLES, or None."""
    limits = []
    for name in LIMIT_VARIABLES:
        try:
            n = int(os.environ.get(name, "").split(",")[0])     # OMP may hold a list per level
        except ValueError:
            continue
        if n > 0:
            limits.append(n)
    return min(limits) if limits else None


ENVIRONMENT_LIMIT = _limit_from_environment()   # read once, on import (as Numba and OpenBLAS do)


def limit_blas_from_environment():
    """Once, on import: BLAS limited to LIMIT_VARIABLES' number where that is lower than its own."""
    if ENVIRONMENT_LIMIT is not None and ENVIRONMENT_LIMIT < blas_thread_count():
        threadpool_limits(limits=ENVIRONMENT_LIMIT, user_api="blas")


_limit = None               # set_num_threads' n now (None: none set)
_blas_unlimited = None      # BLAS's own count when the first limit was set: what n=None gives back
_controller = None          # threadpoolctl's, found once (finding the libraries is slow)


class set_num_threads:
    """`set_num_threads(n)`: course_lib uses n threads from now on, for its kernels and for NumPy's
    BLAS (which the kernels call); `with set_num_threads(n):` only inside the block (the limit
    before it comes back at its end). n=None lifts the limit set here (the environment's and the
    cores' remain). threads_for_model(config, rows) is the n that training uses."""

    def __init__(self, n):
        global _limit, _blas_unlimited, _controller
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"set_num_threads: n must be a whole number >= 1, got {n!r}")
        if _limit is None and NUMPY_BLAS_CONTROLLER is not None:
            _blas_unlimited = NUMPY_BLAS_CONTROLLER.get_num_threads()
        blas = n if n is not None else _blas_unlimited if _limit is not None else None
        self._outer, self._blas = _limit, None
        if blas is not None:
            if _controller is None:
                _controller = ThreadpoolController()
            self._blas = _controller.limit(limits=blas, user_api="blas")
        _limit = n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        global _limit
        if self._blas is not None:
            self._blas.restore_original_limits()
        _limit = self._outer


def get_num_threads():
    """The threads course_lib's kernels may use now: set_num_threads' n, else the cores this
    process may use, lowered by LIMIT_VARIABLES and by BLAS's own limit (OPENBLAS_NUM_THREADS,
    threadpool_limits)."""
    if _limit is not None:
        return _limit
    n = min(available_cores(), blas_thread_count())
    return n if ENVIRONMENT_LIMIT is None else min(n, ENVIRONMENT_LIMIT)


def threads_for_model(config, rows):
    """The threads a training step of this model uses (rows = tokens per step): 1 for small products
    (a second thread only spins, see the module's docstring), else as many as allowed now."""
    return 1 if rows * config.d_model * config.d_model < SMALL_MODEL_PRODUCTS else get_num_threads()


def blas_thread_count():
    """How many threads NumPy's BLAS may use now, whichever library it is and whether or not the
    kernels call it (blas.py's fallback): as threadpoolctl reads it (and sets it, in set_num_threads
    or the learner's own threadpool_limits), else the cores, within set_num_threads' n."""
    if _inline_depth:
        n = _inline_outside
    elif NUMPY_BLAS_CONTROLLER is not None:
        n = NUMPY_BLAS_CONTROLLER.get_num_threads()
    else:        # a BLAS threadpoolctl cannot see (Accelerate): it uses every core
        n = os.cpu_count() or 1
    return min(n, _limit) if _limit is not None else n


_inline_lock = threading.Lock()
_inline_depth, _inline_outside = 0, None


def _native_thread_functions(controller):
    """(get, set) of the BLAS's own thread-count functions, looked up once (threadpoolctl looks
    them up at every call), or None."""
    functions = (blas_symbol(controller, "openblas_get_num_threads"),
                 blas_symbol(controller, "openblas_set_num_threads"))
    if None in functions:
        return None if controller is None else (controller.get_num_threads, controller.set_num_threads)
    return functions


_BLAS_THREADS = _native_thread_functions(NUMPY_BLAS_CONTROLLER)


class blas_inline:
    """`with blas_inline():` BLAS runs every product in the calling thread (one thread of its own),
    for kernels that run their products on course_lib's threads. Nested and concurrent blocks
    share one change: the first in sets it, the last out restores it."""

    def __enter__(self):
        global _inline_depth, _inline_outside
        if _BLAS_THREADS is None:
            return self
        with _inline_lock:
            if _inline_depth == 0:
                _inline_outside = _BLAS_THREADS[0]()
                if _inline_outside != 1:
                    _BLAS_THREADS[1](1)
            _inline_depth += 1
        return self

    def __exit__(self, *exc):
        global _inline_depth
        if _BLAS_THREADS is None:
            return
        with _inline_lock:
            _inline_depth -= 1
            if _inline_depth == 0 and _inline_outside != 1:
                _BLAS_THREADS[1](_inline_outside)


observer = None     # benchmarks/profile_step.py's: told the threads of every split_work
_pool_lock = threading.Lock()     # one parallel launch at a time; a second caller meanwhile works alone
_parent = os.getpid()             # a forked child runs everything on one thread (GNU OpenMP hangs there)


def _bounds(n, k, align):
    """k + 1 boundaries of nearly equal ranges of 0..n, the inner ones multiples of align."""
    inner = [i * n // k // align * align for i in range(1, k)]
    return np.array([0] + inner + [n], dtype=np.int64)


_layer = None       # Numba's threading layer, once found out


def threading_layer():
    """Numba's threading layer: "omp", "tbb" or "workqueue" ("" in a forked child, which runs on
    one thread, or where it cannot be found). Finding out starts Numba's threads, as a first
    parallel loop does."""
    global _layer
    if _layer is None and os.getpid() == _parent:
        import numba
        try:
            _layer = numba.threading_layer() if launch_numba_threads() else ""
        except Exception:                   # (no layer could start)
            _layer = ""
    return _layer if os.getpid() == _parent else ""


def threads_spin():
    """Whether Numba's threads wait for work spinning (OpenMP, TBB: a parallel loop starts in about
    4 us) rather than asleep (the workqueue, usually macOS's: 90-150 us to wake them on a 2-core cloud
    machine, 2026-11-29)."""
    return threading_layer() in ("omp", "tbb")


def split_work(rows, n, *args, work=None, grain=1, align=1):
    """rows(*args, first, last) over ranges that together cover the pieces 0..n-1: all here, or
    rows.ranges(*args, bounds) with bounds (k + 1,) when k >= 2 threads are allowed (get_num_threads())
    and worth it: work / grain (work: how much there is, in the caller's unit; grain: how much
    makes a thread worth its start) caps k; work=None: as many as allowed. Inner boundaries are
    multiples of align. rows is a jit.kernel(split=True), each piece's results written where no
    other piece writes them. It may not raise: an exception inside a parallel loop does not come
    back (check first)."""
    k = n if work is None else min(n, work // grain)
    if k >= 2:
        k = min(k, get_num_threads())
    if k >= 2 and n // align < k:
        k = n // align
    if k < 2 or os.getpid() != _parent or not _pool_lock.acquire(blocking=False):
        if observer is not None:
            observer(1)
        rows(*args, 0, n)
        return
    if observer is not None:
        observer(k)
    try:
        rows.ranges(*args, _bounds(n, k, align))
    finally:
        _pool_lock.release()
