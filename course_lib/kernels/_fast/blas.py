"""Matrix products inside kernels, through NumPy's own BLAS.

Numba's `a @ b` calls SciPy's copy of OpenBLAS. NumPy has another, and each keeps
its own threads, which spin for a while after a call: on a small machine a loop that
mixes NumPy products with course_lib steps slows down badly while the two pools fight
over the cores. Calling NumPy's library (its CBLAS sgemm / dgemm) from the kernels
leaves one pool, and is also the faster of the two at the course's sizes.

NumPy's library is found through threadpoolctl, which lists the BLAS libraries loaded in
this process with their paths, whatever the platform names them (.so on Linux, .dll on
Windows, .dylib on macOS). NumPy 2's wheels ship OpenBLAS with 64-bit-integer CBLAS
functions (scipy_cblas_sgemm64_); where NumPy uses another BLAS (Accelerate on Apple
Silicon, MKL in some distributions), `matmul` is Numba's `a @ b` (SciPy's BLAS): the
fallback. COURSE_LIB_BLAS=numba forces the fallback (to test it, or to compare).
"""
import ctypes
import os
import tempfile

import llvmlite.binding as llvm
import numpy as np
from numba import config as numba_config
from numba import types
from numba.extending import overload
from threadpoolctl import ThreadpoolController

from . import jit
from .jit import kernel

_SGEMM, _DGEMM = "scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"   # NumPy 2 wheels: 64-bit integer CBLAS
FALLBACK_ENV = "COURSE_LIB_BLAS"     # "numba": the kernels' products go through Numba's a @ b
FALLBACK_CACHE = "blas-fallback"     # the fallback's cache folder, in NUMBA_CACHE_DIR or beside this file


def numpy_blas_controller():
    """threadpoolctl's controller of the BLAS library NumPy loaded (the first BLAS threadpoolctl
    knows whose file lies in NumPy's installation), or of the first BLAS; None if it knows none."""
    libraries = ThreadpoolController().select(user_api="blas").lib_controllers
    numpy_dir = os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))   # site-packages
    ours = [lib for lib in libraries
            if os.path.realpath(lib.filepath).startswith(os.path.join(numpy_dir, "numpy"))]
    return (ours or libraries or [None])[0]


def _numpy_cblas(controller):
    """Path of NumPy's BLAS if it exports the two CBLAS functions (and the fallback is not
    forced), else None."""
    if controller is None or os.environ.get(FALLBACK_ENV, "").lower() == "numba":
        return None
    lib = ctypes.CDLL(controller.filepath)
    return controller.filepath if hasattr(lib, _SGEMM) and hasattr(lib, _DGEMM) else None


def _writable(folder) -> bool:
    """Whether a file can be made in folder (made if missing), as Numba tries its cache folders."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


NUMPY_BLAS_CONTROLLER = numpy_blas_controller()
NUMPY_BLAS = _numpy_cblas(NUMPY_BLAS_CONTROLLER)   # its path, or None: the fallback
if NUMPY_BLAS is not None:
    llvm.load_library_permanently(NUMPY_BLAS)
else:
    # Numba's cache does not record which `matmul` a kernel was compiled with: a kernel compiled
    # for NumPy's BLAS, loaded here, would call a library that was never loaded (a crash). The
    # fallback keeps its compiled kernels in a cache of its own (set before any kernel is defined).
    numba_config.CACHE_DIR = os.path.join(
        numba_config.CACHE_DIR or os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__"),
        FALLBACK_CACHE)
    # Where Numba cannot write there, it would look beside the modules: no cache at all then.
    jit.CACHE = _writable(numba_config.CACHE_DIR)

# OpenBLAS runs a product with M * N * K up to this in the calling thread, larger ones on its
# threads (interface/gemm.c: SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4). Products
# that small may run on several threads of ours at once.
INLINE_PRODUCT = 1 << 18

_i32, _i64 = types.int32, types.int64
# cblas_?gemm(order, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); pointers passed as int64
_sgemm = types.ExternalFunction(_SGEMM, types.void(_i32, _i32, _i32, _i64, _i64, _i64, types.float32, _i64, _i64,
                                                   _i64, _i64, types.float32, _i64, _i64))
_dgemm = types.ExternalFunction(_DGEMM, types.void(_i32, _i32, _i32, _i64, _i64, _i64, types.float64, _i64, _i64,
                                                   _i64, _i64, types.float64, _i64, _i64))
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


@kernel
def _layout(row_stride, col_stride, n_rows, n_cols):
    """(transpose flag, leading dimension) for row-major CBLAS of a matrix with these strides (in elements):
    rows or columns must be unit-stride (C- or F-contiguous, or a block of columns of one); (-1, 0) otherwise."""
    if col_stride == 1 and row_stride >= max(1, n_cols):
        return _NO_TRANS, row_stride
    if row_stride == 1 and col_stride >= max(1, n_rows):
        return _TRANS, col_stride           # its transpose is row-major
    return -1, 0


@kernel
def _gemm(single, M, N, K, a, trans_a, lda, b, trans_b, ldb, c, ldc):
    """C = A @ B on raw addresses (int64), float32 if single else float64. Integers only: compiled once."""
    if single:
        _sgemm(_ROW_MAJOR, trans_a, trans_b, M, N, K, np.float32(1.0), a, lda, b, ldb, np.float32(0.0), c, ldc)
    else:
        _dgemm(_ROW_MAJOR, trans_a, trans_b, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, ldc)


@kernel
def dtype_name(a):
    """'float32' or 'float64' (or 'float16'): the name of a float array's dtype, inside a kernel."""
    if a.itemsize == 2:
        return "float16"
    return "float32" if a.itemsize == 4 else "float64"


@kernel
def same_dtype(where, name_a, a, name_b, b):
    """Refuse two arrays of different dtypes, naming both: BLAS reads every operand as one type, so
    a float32 array among float64 ones would be read as other numbers (and its strides misjudged)."""
    if a.itemsize != b.itemsize:
        raise ValueError(where + ": " + name_a + " is " + dtype_name(a) + " but " + name_b + " is "
                         + dtype_name(b) + ": the arrays of one call need one dtype")


# The same check, called from Python (products.py, linear.py): the compiled one types its str
# arguments in Python at every call, about 10 us (forty calls a step of the course model).
check_same_dtype = same_dtype.py_func


@kernel
def _matmul_into_numpy_blas(a, b, out):
    """out[...] = a (M, K) @ b (K, N), both float32 or both float64, without copies. Every array needs
    unit-stride rows (a C-contiguous array or a block of its columns); a and b may also be transposes of such."""
    M, K = a.shape
    N = b.shape[1]
    if b.shape[0] != K or out.shape[0] != M or out.shape[1] != N:
        raise ValueError("matmul: the shapes do not fit: a (M, K) @ b (K, N) -> out (M, N)")
    same_dtype("matmul", "a", a, "b", b)
    same_dtype("matmul", "a", a, "out", out)
    if M == 0 or N == 0:
        return
    if K == 0:
        out[...] = 0.0
        return
    unit = a.itemsize
    ta, lda = _layout(a.strides[0] // unit, a.strides[1] // unit, M, K)
    tb, ldb = _layout(b.strides[0] // unit, b.strides[1] // unit, K, N)
    if ta < 0 or tb < 0:
        raise ValueError("matmul: each operand needs unit-stride rows or unit-stride columns")
    _gemm(unit == 4, M, N, K, a.ctypes.data, ta, lda, b.ctypes.data, tb, ldb, out.ctypes.data, out.strides[0] // unit)


@kernel
def _matmul_numpy_blas(a, b):
    """a (M, K) @ b (K, N) -> (M, N), both float32 or both float64, through NumPy's OpenBLAS."""
    c = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    _matmul_into_numpy_blas(a, b, c)
    return c


def _product(a, b):
    """a @ b where both have one dtype (Numba cannot even type `@` on two)."""


@overload(_product)
def _product_typed(a, b):
    if a.dtype != b.dtype:      # never run: same_dtype has raised its message before
        return lambda a, b: np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    return lambda a, b: np.ascontiguousarray(a) @ np.ascontiguousarray(b)


@kernel
def _matmul_numba(a, b):
    """a (M, K) @ b (K, N) -> (M, N) through Numba (SciPy's BLAS): the fallback, with the checks and
    messages of the CBLAS path (unit strides aside: it copies what it gets)."""
    if b.shape[0] != a.shape[1]:
        raise ValueError("matmul: the shapes do not fit: a (M, K) @ b (K, N) -> out (M, N)")
    same_dtype("matmul", "a", a, "b", b)
    return _product(a, b)


@kernel
def _matmul_into_numba(a, b, out):
    """out[...] = a @ b through Numba."""
    if a.shape[1] != b.shape[0] or out.shape[0] != a.shape[0] or out.shape[1] != b.shape[1]:
        raise ValueError("matmul: the shapes do not fit: a (M, K) @ b (K, N) -> out (M, N)")
    same_dtype("matmul", "a", a, "b", b)
    same_dtype("matmul", "a", a, "out", out)
    out[...] = _matmul_numba(a, b)


matmul = _matmul_numpy_blas if NUMPY_BLAS is not None else _matmul_numba
matmul_into = _matmul_into_numpy_blas if NUMPY_BLAS is not None else _matmul_into_numba
