"""Matrix products inside kernels, through NumPy's own OpenBLAS.

Numba's `a @ b` calls SciPy's copy of OpenBLAS. NumPy has another, and each keeps
its own threads, which spin for about 0.1 s after a call: on a 2-core machine a loop
that mixes NumPy products with course_lib steps ran about 9x slower while the two pools
fought over the cores. Calling NumPy's library (its CBLAS sgemm / dgemm) from the
kernels leaves one pool. It is also faster at the course's sizes: measured 39 against
45 µs for (256, 64) @ (64, 192), 44 against 55 µs for its weight gradient.

If this NumPy has no such library (another build), `matmul` is Numba's `a @ b`.
"""
import ctypes
import glob
import os

import llvmlite.binding as llvm
import numpy as np
from numba import types

from ._jit import kernel

_SGEMM, _DGEMM = "scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"   # NumPy 2 wheels: 64-bit integer CBLAS


def _numpy_openblas():
    """Path of NumPy's OpenBLAS if it exports the two functions, else None."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libs, "libscipy_openblas64_*.so")):
        lib = ctypes.CDLL(path)
        if hasattr(lib, _SGEMM) and hasattr(lib, _DGEMM):
            return path
    return None


NUMPY_BLAS = _numpy_openblas()
if NUMPY_BLAS is not None:
    llvm.load_library_permanently(NUMPY_BLAS)

_i32, _i64 = types.int32, types.int64
# cblas_?gemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); pointers passed as int64
_sgemm = types.ExternalFunction(_SGEMM, types.void(_i32, _i32, _i32, _i64, _i64, _i64, types.float32, _i64, _i64,
                                                   _i64, _i64, types.float32, _i64, _i64))
_dgemm = types.ExternalFunction(_DGEMM, types.void(_i32, _i32, _i32, _i64, _i64, _i64, types.float64, _i64, _i64,
                                                   _i64, _i64, types.float64, _i64, _i64))
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@kernel
def _layout(a):
    """(transpose flag, leading dimension) of a 2-D array whose rows or whose columns are unit-stride
    (any C- or F-contiguous array, or a block of columns of one); (-1, 0) for any other layout."""
    unit = a.itemsize
    if a.strides[1] == unit and a.strides[0] % unit == 0 and a.strides[0] // unit >= max(1, a.shape[1]):
        return _NO_TRANS, a.strides[0] // unit
    if a.strides[0] == unit and a.strides[1] % unit == 0 and a.strides[1] // unit >= max(1, a.shape[0]):
        return _TRANS, a.strides[1] // unit           # its transpose is row-major
    return -1, 0


@kernel
def _gemm_into(a, b, c):
    """c = a @ b through NumPy's OpenBLAS; c must have unit-stride rows."""
    M, K = a.shape
    N = b.shape[1]
    if K == 0:
        c[:] = 0.0
        return
    ta, lda = _layout(a)
    if ta < 0:
        a = np.ascontiguousarray(a)
        ta, lda = _layout(a)
    tb, ldb = _layout(b)
    if tb < 0:
        b = np.ascontiguousarray(b)
        tb, ldb = _layout(b)
    ldc = c.strides[0] // c.itemsize
    if a.itemsize == 4:
        _sgemm(_ROW_MAJOR, ta, tb, M, N, K, np.float32(1.0), a.ctypes.data, lda, b.ctypes.data, ldb,
               np.float32(0.0), c.ctypes.data, ldc)
    else:
        _dgemm(_ROW_MAJOR, ta, tb, M, N, K, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 0.0, c.ctypes.data, ldc)


@kernel
def _matmul_into_numpy_blas(a, b, out):
    """out[...] = a (M, K) @ b (K, N); out (M, N) with unit-stride rows (a block of columns is fine).
    Both float32 or both float64. a and b may be column blocks or transposes: no copies then."""
    if out.shape[0] > 0 and out.shape[1] > 0:
        _gemm_into(a, b, out)


@kernel
def _matmul_numpy_blas(a, b):
    """a (M, K) @ b (K, N) -> (M, N), both float32 or both float64, through NumPy's OpenBLAS."""
    c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    _matmul_into_numpy_blas(a, b, c)
    return c


@kernel
def _matmul_numba(a, b):
    """a (M, K) @ b (K, N) -> (M, N) through Numba (SciPy's OpenBLAS)."""
    return np.ascontiguousarray(a) @ np.ascontiguousarray(b)


@kernel
def _matmul_into_numba(a, b, out):
    """out[...] = a @ b through Numba."""
    out[...] = _matmul_numba(a, b)


matmul = _matmul_numpy_blas if NUMPY_BLAS is not None else _matmul_numba
matmul_into = _matmul_into_numpy_blas if NUMPY_BLAS is not None else _matmul_into_numba
