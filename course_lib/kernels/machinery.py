"""What the rest of course_lib uses of the speed machinery (_fast/): the modules outside kernels/
import it from here, never from _fast, so that _fast can change inside without them.

    kernel, split_work             a Numba kernel, and its rows run on threads (optim's updates),
    ADAM_GRAIN, ADAM_SMALL_MODEL   with their tuning (_fast/tuning.py)
    scale_in_place, sum_squares    optim's clipping: the same bytes on any thread count
    column_block, join_columns     block.py's W_qkv columns, split and joined on the kernels' threads
    set_num_threads                the public thread limit (kernels.set_num_threads), here as a block
    threads_for_model              the n a training step of this model uses: 1 for a small one
    FIRST_COMPILE, MORE_COMPILE    the lines that announce compiling (kept out of stored notebooks)
    what doctor reports            NUMPY_BLAS, NUMPY_BLAS_CONTROLLER, FALLBACK_ENV, FALLBACK_CACHE,
                                   blas_thread_count, get_num_threads, threading_layer
"""
from ._fast.blas import FALLBACK_CACHE, FALLBACK_ENV, NUMPY_BLAS, NUMPY_BLAS_CONTROLLER
from ._fast.copy import column_block, join_columns, scale_in_place
from ._fast.jit import FIRST_COMPILE, MORE_COMPILE, kernel
from ._fast.reduce import sum_squares
from ._fast.threads import (blas_thread_count, get_num_threads, set_num_threads, split_work, threading_layer,
                            threads_for_model)
from ._fast.tuning import ADAM_GRAIN, ADAM_SMALL_MODEL

__all__ = ["FALLBACK_CACHE", "FALLBACK_ENV", "NUMPY_BLAS", "NUMPY_BLAS_CONTROLLER", "column_block", "join_columns",
           "scale_in_place", "FIRST_COMPILE", "MORE_COMPILE", "kernel", "sum_squares", "blas_thread_count",
           "set_num_threads", "threads_for_model", "get_num_threads", "split_work", "threading_layer", "ADAM_GRAIN",
           "ADAM_SMALL_MODEL"]
