"""The vectorising tanh of course_lib.kernels._fast.tanh against NumPy's, in ulps, and at the edges."""
import math

import numpy as np
import pytest
from numba import njit

from course_lib.kernels._fast import tanh as fast_tanh
from course_lib.kernels._fast.jit import kernel
from course_lib.kernels._fast.tanh import tanh


@njit(cache=True)
def tanh_all(x):
    y = np.empty_like(x)
    for i in range(x.size):
        y[i] = tanh(x[i])
    return y


@kernel
def tanh_all_in_a_kernel(x):
    """The same loop under the kernels' fast-math flags, which allow reassociation."""
    y = np.empty_like(x)
    for i in range(x.size):
        y[i] = tanh(x[i])
    return y


def ulps(y, x):
    """|y - tanh(x)| in units of the last place of y's precision (reference in float64)."""
    ref = np.tanh(x.astype(np.float64))
    return np.abs(y.astype(np.float64) - ref) / np.abs(np.spacing(ref.astype(y.dtype))).astype(np.float64)


def every_float32_range(n=400_000):
    """Uniform samples where tanh bends, magnitudes from 1e-38 to 3e38 (both signs), and the clamp."""
    rng = np.random.default_rng(0)
    magnitudes = 10.0 ** rng.uniform(-38, 38.5, n)
    x = np.concatenate([rng.uniform(-10, 10, n), magnitudes, -magnitudes,
                        np.nextafter(np.float32(9.0), [0, 10], dtype=np.float32),
                        np.float32([np.finfo(np.float32).tiny, np.finfo(np.float32).max])])
    return x.astype(np.float32)


@pytest.mark.parametrize("tanh_loop", [tanh_all, tanh_all_in_a_kernel])
def test_float32_within_six_ulps_over_the_whole_range(tanh_loop):
    x = every_float32_range()
    y = tanh_loop(x)
    assert y.dtype == np.float32
    err = ulps(y, x)
    bending = np.abs(x) < 10
    assert err.max() <= 6.0 and np.mean(err[bending] <= 1.0) > 0.8, (err.max(), x[np.argmax(err)])
    assert np.all(np.abs(y) <= 1)
    np.testing.assert_array_equal(tanh_loop(-x), -y)                 # odd, bit for bit


def test_float32_is_exact_where_tanh_rounds_to_x_or_to_one():
    tiny = np.float32([1e-30, 3e-8, 1e-5, -1e-5, np.finfo(np.float32).tiny])
    np.testing.assert_array_equal(tanh_all(tiny), tiny)
    big = np.float32([9.0, 12.0, 1e30, -9.0, -50.0])
    np.testing.assert_array_equal(tanh_all(big), np.sign(big))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edges_match_numpy(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], dtype=dtype)
    y = tanh_all(x)
    ref = np.tanh(x)
    np.testing.assert_array_equal(y[:5], ref[:5])
    assert np.signbit(y[1]) and not np.signbit(y[0])                  # -0.0 stays -0.0
    assert abs(y[5] - ref[5]) <= 2 * np.spacing(ref[5])


def test_float64_is_libms():
    x = np.random.default_rng(1).uniform(-20, 20, 1000)
    np.testing.assert_array_equal(tanh_all(x), [math.tanh(v) for v in x])


def test_coefficients_are_the_fit_they_say_they_are():
    p, q, largest = fast_tanh.fit()
    np.testing.assert_allclose(p, fast_tanh.P, rtol=1e-9)
    np.testing.assert_allclose(q, fast_tanh.Q, rtol=1e-9)
    assert largest < 3e-8


def test_python_call_gives_numpy_tanh():
    assert tanh(0.5) == np.tanh(0.5)
