"""The vectorising exp of course_lib.kernels._fast.exp against NumPy's, in ulps, and at the edges."""
import numpy as np
import pytest
from numba import njit

from course_lib.kernels._fast.jit import kernel
from course_lib.kernels._fast.exp import exp


@njit(cache=True)
def exp_all(x):
    y = np.empty_like(x)
    for i in range(x.size):
        y[i] = exp(x[i])
    return y


@kernel
def exp_all_in_a_kernel(x):
    """The same loop under the kernels' fast-math flags, which allow reassociation."""
    y = np.empty_like(x)
    for i in range(x.size):
        y[i] = exp(x[i])
    return y


def ulps(y, x):
    """|y - exp(x)| in units of the last place of y's precision (reference in float64 / longdouble)."""
    ref = np.exp(x.astype(np.longdouble))
    return np.abs(y.astype(np.longdouble) - ref) / np.spacing(ref.astype(y.dtype)).astype(np.longdouble)


@pytest.mark.parametrize("dtype, low, high", [(np.float32, -86.9, 88.7), (np.float64, -708.0, 709.7)])
@pytest.mark.parametrize("exp_loop", [exp_all, exp_all_in_a_kernel])
def test_within_two_ulps_over_the_whole_range(dtype, low, high, exp_loop):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(low, high, 200_000), rng.uniform(-1, 1, 100_000),
                        np.arange(-80, 80, dtype=float) * np.log(2)]).astype(dtype)
    y = exp_loop(x)
    assert y.dtype == dtype
    err = ulps(y, x)
    assert err.max() <= 2.0 and np.mean(err <= 0.5) > 0.75


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edges_match_numpy(dtype):
    big = 89.0 if dtype == np.float32 else 710.0
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, 2 * big, -2 * big, 1.0], dtype=dtype)
    y = exp_all(x)
    with np.errstate(over="ignore"):
        ref = np.exp(x)
    np.testing.assert_array_equal(y[[0, 1, 2, 3, 4, 5, 7, 8]], ref[[0, 1, 2, 3, 4, 5, 7, 8]])
    assert y[6] == 0 and 0 < ref[6] < np.finfo(dtype).tiny      # a subnormal result is flushed to 0
    assert abs(y[9] - np.e) <= np.spacing(dtype(np.e))


def test_python_call_gives_numpy_exp():
    assert exp(1.0) == np.exp(1.0)
