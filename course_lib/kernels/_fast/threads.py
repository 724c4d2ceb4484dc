"""How many BLAS threads the model's matrix products use.

OpenBLAS threads spin between calls. At the course model's size every product
is small: on an idle machine a second thread helps a step only a little, and when
the machine is busy the spinning steals the core that the Numba kernels run on.
Training therefore uses one BLAS thread for small models.
"""
from threadpoolctl import ThreadpoolController

SMALL = 1 << 22   # rows x d_model x d_model below this: one thread is faster


def blas_threads_for(config, rows):
    """1 for small products (rows = tokens per step), else None (leave the default)."""
    return 1 if rows * config.d_model * config.d_model < SMALL else None


class blas_threads:
    """`with blas_threads(n):` limits BLAS to n threads inside the block (n=None: no change).
    The same object can be entered again and again (once per training step, say)."""

    def __init__(self, n):
        self.n = n
        self._limits = None

    _controller = None

    def __enter__(self):
        if self.n is not None:
            if blas_threads._controller is None:          # finding the libraries is slow: once
                blas_threads._controller = ThreadpoolController()
            self._limits = blas_threads._controller.limit(limits=self.n, user_api="blas")
        return self

    def __exit__(self, *exc):
        if self._limits is not None:
            self._limits.restore_original_limits()
            self._limits = None
