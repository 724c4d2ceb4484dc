"""How long NumPy's OpenBLAS threads spin after a product before they sleep.

An idle OpenBLAS thread keeps polling for work for 2^28 CPU cycles (about 0.1 s) after a
product. On a 2-core machine it then holds the core that the second thread of attention and
GELU (threads.split_work) needs: right after a product both ran about twice as slow as
alone. 2^20 cycles (a few tenths of a millisecond) still bridges the gap between the
products of one layer, so that they find their threads awake, but not a whole attention
or GELU call.

OpenBLAS reads OPENBLAS_THREAD_TIMEOUT (the exponent) when it starts its threads, and NumPy
has usually started them already: shorten_spin() sets the variable, has OpenBLAS read its
environment again and stops its threads, which the next product starts anew. A value the
user set is kept, and COURSE_LIB_SHORT_SPIN=0 leaves OpenBLAS as it is.
"""
import ctypes
import os

from .tuning import SPIN_EXPONENT as EXPONENT      # 2^20 cycles


def can_restart(library_path) -> bool:
    """Whether the OpenBLAS at library_path exports what shorten_spin calls: NumPy 2.5's (0.3.34,
    Python 3.15 here) does not, and its threads are left as they are."""
    lib = ctypes.CDLL(library_path)
    return hasattr(lib, "openblas_read_env") and hasattr(lib, "blas_thread_shutdown_")


def shorten_spin(library_path):
    """Make the OpenBLAS at library_path (NumPy's) spin 2^EXPONENT cycles. -> True if changed."""
    if (library_path is None or "OPENBLAS_THREAD_TIMEOUT" in os.environ
            or os.environ.get("COURSE_LIB_SHORT_SPIN") == "0"):
        return False
    if not can_restart(library_path):
        return False
    lib = ctypes.CDLL(library_path)
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(EXPONENT)     # also for processes started from here
    lib.openblas_read_env()
    lib.blas_thread_shutdown_()         # the threads start again at the next product, with the new limit
    return True
