"""How many BLAS threads the model's matrix products use.

OpenBLAS threads spin between calls. At the course model's size every product
is small, so two threads gain little and the spinning steals the core that the
Numba kernels run on (measured: a training run took 3x longer). Training and the
benchmarks therefore use one BLAS thread for small models.
"""
import contextlib

from threadpoolctl import threadpool_limits

SMALL = 1 << 22   # rows x d_model x d_model below this: one thread is faster


def blas_threads_for(config, rows):
    """1 for small products (rows = tokens per step), else None (leave the default)."""
    return 1 if rows * config.d_model * config.d_model < SMALL else None


@contextlib.contextmanager
def blas_threads(n):
    """Limit BLAS to n threads inside the block (n=None: no change)."""
    if n is None:
        yield
        return
    with threadpool_limits(limits=n, user_api="blas"):
        yield
