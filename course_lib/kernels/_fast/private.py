"""The private APIs of dependencies that the speed machinery uses, each behind one function here
and held by a test (tests/kernels/test_private.py) that fails where a release moves or drops it.
Where one is gone its caller goes on without it (the answer then says so: None, or no hook).

    compiler_around(around)      Numba's Compiler._compile_core: LLVM's options while a kernel
                                 compiles (jit.py)
    launch_numba_threads()       numba.np.ufunc.parallel._launch_threads: Numba's threads started
                                 so that numba.threading_layer() can answer (threads.py)
    blas_symbol(controller, n)   threadpoolctl's LibController._get_symbol: OpenBLAS's own
                                 thread-count functions, looked up once (threads.py)
"""
from numba.core.compiler import Compiler


def compiler_around(around):
    """Numba's Compiler with every compile of a function run inside `around()`, a context manager
    (a kernel's callees compile inside its own compile)."""
    class CompilerAround(Compiler):
        def _compile_core(self):
            with around():
                return super()._compile_core()
    return CompilerAround


def launch_numba_threads() -> bool:
    """Start Numba's threads as its first parallel loop does. -> False where this Numba lacks the call."""
    try:
        from numba.np.ufunc import parallel
        launch = parallel._launch_threads
    except (ImportError, AttributeError):
        return False
    launch()
    return True


def blas_symbol(controller, name):
    """The C function `name` of the BLAS library behind a threadpoolctl controller, or None."""
    get = getattr(controller, "_get_symbol", None)
    return get(name) if get is not None else None
