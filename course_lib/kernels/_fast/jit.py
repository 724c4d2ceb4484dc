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
import contextlib
import inspect
import os
import sys
import time

import llvmlite.binding as llvm
from numba import config as numba_config
from numba import njit, prange

from .private import compiler_around

FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
CACHE = True    # blas.py turns it off where the fallback BLAS cannot write a cache of its own


# Said when Numba compiles a kernel instead of loading it from its cache (this compiler runs only
# on a cache miss): on a fresh install the first notebook's first cells spend ~10-20 s compiling,
# which would otherwise look like a cell that hangs. Once for the first kernel of a process, then
# once in each later cell that compiles (float64 kernels, say), or outside Jupyter after PAUSE
# seconds without compiling. On stderr, which nbval does not compare; instructor/execute.py keeps
# the lines out of the stored notebooks.
FIRST_COMPILE = ("course_lib: compiling its kernels for this processor, once (Numba keeps them in its cache "
                 "for every later session): about 20 s in all, spread over the first cells that use them")
MORE_COMPILE = "course_lib: compiling more of its kernels, once (kept in Numba's cache)"
PAUSE = 2.0     # seconds
_said = {"cell": None, "ended": None}    # where the last line was said; when the last compile ended


def _jupyter_cell():
    """The running cell's execution count in IPython or Jupyter, else None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "execution_count", None)


def announce_compile():
    """One line on stderr as a compile starts: the first in the process, the first of a cell, or
    (outside Jupyter) the first after a pause."""
    cell, ended = _jupyter_cell(), _said["ended"]
    new = cell != _said["cell"] if cell is not None else ended is None or time.monotonic() - ended > PAUSE
    if ended is None or new:
        print(FIRST_COMPILE if ended is None else MORE_COMPILE, file=sys.stderr, flush=True)
    _said["cell"] = cell


@contextlib.contextmanager
def _no_interleave():
    """LLVM's -force-vector-interleave=1 while a kernel compiles (0 = LLVM decides). Compiling a
    kernel compiles the kernels it calls inside it: the outermost one switches back."""
    global _depth
    if _depth == 0:
        announce_compile()
        llvm.set_option("", "-force-vector-interleave=1")
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            llvm.set_option("", "-force-vector-interleave=0")
            _said["ended"] = time.monotonic()


_depth = 0          # compiles in progress, the outermost first
_NoInterleaveCompiler = compiler_around(_no_interleave)


def kernel(fn=None, *, in_order=False, parallel=False, split=False):
    """`@kernel` = `@njit(cache=True, fastmath=FASTMATH, error_model="numpy")`, compiled without interleaving.

    `@kernel(in_order=True)` compiles without fastmath: its sums add in the order written.
    `@kernel(parallel=True)`: a kernel whose `prange` loop runs on Numba's threads, releasing the GIL.
    `@kernel(split=True)`: a kernel rows(*args, first, last) over the pieces first..last-1 (rows,
    (batch row, head) pairs, tiles), which threads.split_work runs on ranges of its pieces; it
    gets its parallel loop as rows.ranges (over_ranges)."""
    if fn is None:
        return lambda f: kernel(f, in_order=in_order, parallel=parallel, split=split)
    compiled = njit(cache=CACHE, nogil=parallel, parallel=parallel, error_model="numpy",
                    fastmath=False if in_order else FASTMATH, pipeline_class=_NoInterleaveCompiler)(fn)
    if split:
        compiled.ranges = over_ranges(compiled)
    return compiled


def over_ranges(rows):
    """The parallel kernel ranges(*args, bounds): rows(*args, bounds[i], bounds[i + 1]) for every
    range i, on Numba's threads. Its source is written from rows's parameters and compiled as if it
    stood at rows's line of rows's file, so that Numba caches it beside rows: a closure over rows, or
    rows passed in as an argument, would be compiled again in every process."""
    py = rows.py_func
    code = py.__code__
    if code.co_argcount < 2 or code.co_kwonlyargcount or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        raise ValueError(f"kernel(split=True): {py.__name__} must take plain parameters ending in first, last")
    params = code.co_varnames[:code.co_argcount - 2]                # all but first, last
    shadowed = sorted({py.__name__, "prange", "bounds", "i"} & set(params))
    if shadowed:
        raise ValueError(f"kernel(split=True): {py.__name__}'s parameters may not be named like its loop's "
                         f"names: {', '.join(shadowed)}")
    args, name = ", ".join(params), f"{py.__name__}_ranges"
    source = "\n" * (code.co_firstlineno - 1) + (              # the loop as it would be written
        f"def {name}({args}, bounds):\n"
        f"    for i in prange(bounds.size - 1):\n"
        f"        {py.__name__}({args}, bounds[i], bounds[i + 1])\n")
    namespace = {"prange": prange, py.__name__: rows, "__name__": py.__module__}
    exec(compile(source, code.co_filename, "exec"), namespace)
    ranges = namespace[name]
    ranges.__qualname__ = f"{py.__qualname__}.ranges"
    ranges.loop_of = rows            # its only definition is rows's (instructor/judge.definition_paths)
    return kernel(ranges, parallel=True)


def prefer_spinning_threads():
    """Numba's threads for `prange`: GNU OpenMP where it is (Linux; Windows has Microsoft's): its
    threads wait for work spinning a while, so a parallel loop starts in about 4 us (the workqueue
    layer wakes sleeping threads: 140 us on a 2-core cloud machine, 2026-11-28). Then TBB (safe as
    well, where a learner installed it), else workqueue (macOS's wheels), which aborts the process
    if two threads start parallel loops at once: split_work lets one thread at a time start one.
    A layer or priority the environment names is kept."""
    if "NUMBA_THREADING_LAYER" not in os.environ and "NUMBA_THREADING_LAYER_PRIORITY" not in os.environ:
        numba_config.THREADING_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]
