"""The dependencies' private APIs behind kernels/_fast/private.py: each still where the course's
pinned versions have it (a release that moves one fails here, not silently in a learner's run)."""
import contextlib

import numba
import numpy as np
from threadpoolctl import ThreadpoolController

from course_lib.kernels._fast import private
from course_lib.kernels._fast.blas import NUMPY_BLAS_CONTROLLER


def test_compiler_around_runs_each_compile_inside_the_context():
    seen = []

    @contextlib.contextmanager
    def around():
        seen.append("in")
        yield
        seen.append("out")

    @numba.njit(pipeline_class=private.compiler_around(around), cache=False)
    def double(x):
        return 2 * x

    assert double(3) == 6 and seen == ["in", "out"]
    assert double(4.0) == 8.0 and seen == ["in", "out"] * 2      # a second signature, a second compile


def test_numba_threads_start_and_name_their_layer():
    assert private.launch_numba_threads() is True
    assert numba.threading_layer() in ("omp", "tbb", "workqueue")


def test_openblas_thread_functions_are_found_and_answer():
    assert NUMPY_BLAS_CONTROLLER is not None and NUMPY_BLAS_CONTROLLER.internal_api == "openblas"
    get = private.blas_symbol(NUMPY_BLAS_CONTROLLER, "openblas_get_num_threads")
    assert get is not None and get() == NUMPY_BLAS_CONTROLLER.get_num_threads()
    assert private.blas_symbol(NUMPY_BLAS_CONTROLLER, "no_such_function_here") is None
    assert private.blas_symbol(None, "openblas_get_num_threads") is None
    assert ThreadpoolController().select(user_api="blas").lib_controllers    # what blas.py reads
    np.ones((2, 2)) @ np.ones((2, 2))
