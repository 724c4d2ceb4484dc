"""BLAS threads for training: moved to course_lib.kernels._fast.threads (kept importable here)."""
from .kernels._fast.threads import SMALL, blas_threads, blas_threads_for  # noqa: F401
