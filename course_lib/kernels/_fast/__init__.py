"""The speed machinery under the layers. Nothing here is transformer maths.

    jit.py      `@kernel`: Numba's njit with the compile flags every kernel uses
                (fastmath without losing NaN, LLVM loop interleaving off); `@kernel(split=True)`
                also writes a kernel's parallel loop over ranges of its rows
    blas.py     matmul / matmul_into: matrix products inside kernels through NumPy's own
                OpenBLAS (found by threadpoolctl, CBLAS called directly), so that one BLAS thread
                pool serves everything; Numba's a @ b where NumPy has another BLAS
    exp.py      exp(x) that vectorises inside Numba loops (np.exp is one libm call per element)
    threads.py  how many threads the kernels and BLAS use (one setting), and split_work, which
                runs a kernel's ranges on Numba's threads
    products.py the layers' matrix products, in tiles on those threads (the same bytes on any count)
    reduce.py   sums over rows by columns, sums of squares in fixed chunks (ditto)
    copy.py     joining and splitting column blocks, scaling in place, on those threads
    memory.py   glibc's malloc told to keep freed memory for the next step (no page faults)
    process.py  settle(): every process-wide setting above, made once when course_lib.kernels is
                imported
    tuning.py   the tuning constants (grains, tile sizes, thresholds) in one table, with what set each
    private.py  the dependencies' private APIs used here (Numba's, threadpoolctl's), one function each

The layers (kernels/layernorm.py, attention.py, ...) import these; the rest of course_lib
reaches them only through kernels/machinery.py. A reader learning the model can skip this
folder. Timings are in benchmarks/README.md.
"""
