"""course_lib.kernels._fast.maximum: a max that reduces on the vector lanes, NaN stepped over."""
import numpy as np
import pytest

from course_lib.kernels._fast.jit import kernel
from course_lib.kernels._fast.maximum import maximum


@kernel
def row_max(x):
    m = x[0]
    for i in range(1, x.size):
        m = maximum(m, x[i])
    return m


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maximum_reduces_to_the_largest_and_steps_over_nan(dtype):
    x = np.random.default_rng(0).standard_normal(1001).astype(dtype)
    assert row_max(x) == x.max()
    x[[0, 500]] = np.nan
    assert row_max(x) == np.nanmax(x)
    assert maximum(np.nan, 2.0) == 2.0 and maximum(1.0, 2.0) == 2.0      # the Python twin
