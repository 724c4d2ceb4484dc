"""The process-wide settings the kernels' speed depends on, made in one call, settle(), when
course_lib.kernels is imported. Each leaves alone what the environment sets:

    Numba's threads    OpenMP first, then TBB, then the workqueue (jit.prefer_spinning_threads)
    glibc's malloc     freed memory kept for the next step (memory.keep_freed_memory)
    NumPy's OpenBLAS   its idle threads spin 2^20 cycles, not 2^28 (spin.shorten_spin)
    BLAS's threads     limited by COURSE_LIB_NUM_THREADS and the like (threads.limit_blas_from_environment)
"""
from .blas import NUMPY_BLAS
from .jit import prefer_spinning_threads
from .memory import keep_freed_memory
from .spin import shorten_spin
from .threads import limit_blas_from_environment


def settle():
    """Make every setting above, once for the process (before the first parallel loop starts)."""
    prefer_spinning_threads()
    keep_freed_memory()
    shorten_spin(NUMPY_BLAS)
    limit_blas_from_environment()
