"""The speed machinery under the layers. Nothing here is transformer maths.

    jit.py      `@kernel`: Numba's njit with the compile flags every kernel uses
                (fastmath without losing NaN, LLVM loop interleaving off)
    blas.py     matmul / matmul_into: matrix products inside kernels through NumPy's own
                OpenBLAS (found by threadpoolctl, CBLAS called directly), so that one BLAS thread
                pool serves everything; Numba's a @ b where NumPy has another BLAS
    exp.py      exp(x) that vectorises inside Numba loops (np.exp is one libm call per element)
    threads.py  how many BLAS threads a training step uses, and a `with` block to set it
    memory.py   glibc's malloc told to keep freed memory for the next step (no page faults)

The layers (kernels/layernorm.py, attention.py, ...) import these; a reader learning the
model can skip this folder. Timings are in benchmarks/README.md.
"""
