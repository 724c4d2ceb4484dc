"""The one Numba decorator every kernel uses.

fastmath here allows reassociation and fused multiply-add (faster, vectorised
reductions) but keeps IEEE NaN and infinity semantics, so a NaN still shows.
error_model="numpy": x / 0 gives inf or nan as in NumPy instead of raising, which
also lets loops with a division vectorise.

Kernels are compiled with LLVM's loop interleaving off. By default LLVM runs 4
vectors side by side, so a vectorised float32 loop needs 32 iterations, and the
course model's loops over one head (D = 16) fell back to half-width vectors. One
vector at a time handles them in two full-width steps, which makes the attention
kernels at the course's size faster and leaves larger sizes as they were. The
switch is LLVM's own option, set only while a kernel compiles, so other Numba code
in the process is compiled as usual.
"""
import llvmlite.binding as llvm
from numba import njit
from numba.core.compiler import Compiler

FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
CACHE = True    # blas.py turns it off where the fallback BLAS cannot write a cache of its own


class _NoInterleaveCompiler(Compiler):
    """Numba's compiler with LLVM's -force-vector-interleave=1 while it runs (0 = LLVM decides).

    Compiling a kernel compiles the kernels it calls inside it: the outermost one switches back.
    """
    _depth = 0

    def _compile_core(self):
        if _NoInterleaveCompiler._depth == 0:
            llvm.set_option("", "-force-vector-interleave=1")
        _NoInterleaveCompiler._depth += 1
        try:
            return super()._compile_core()
        finally:
            _NoInterleaveCompiler._depth -= 1
            if _NoInterleaveCompiler._depth == 0:
                llvm.set_option("", "-force-vector-interleave=0")


def kernel(fn=None, *, nogil=False):
    """`@kernel` = `@njit(cache=True, fastmath=FASTMATH, error_model="numpy")`, compiled without interleaving.

    `@kernel(nogil=True)` releases the GIL while it runs, so that two threads can run it at once
    (threads.split_work); the others keep it (releasing costs a little at every call)."""
    if fn is None:
        return lambda f: kernel(f, nogil=nogil)
    return njit(cache=CACHE, nogil=nogil, fastmath=FASTMATH, error_model="numpy",
                pipeline_class=_NoInterleaveCompiler)(fn)
