"""The kernels' two ways to multiply (kernels/_fast/blas.py): NumPy's own BLAS, found through
threadpoolctl, and the fallback (Numba's a @ b) that NumPy builds without it take (Accelerate on
Apple Silicon, MKL), forced here with COURSE_LIB_BLAS=numba. Both give the model's loss and
gradients to rounding, and the kernels' own threads do not depend on which one was found."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import course_lib as cl
from course_lib.kernels._fast import blas, threads
from support import time_limit

# A training step of a small model in float32 and float64: its loss and every gradient, as JSON,
# with the path the kernels took and the threads they may use.
STEP = """
import json, sys
import numpy as np
import course_lib as cl
from course_lib.kernels._fast import blas, threads
out = {"fallback": blas.NUMPY_BLAS is None, "threads": threads.blas_thread_count()}
for dtype in ("float32", "float64"):
    config = cl.ModelConfig(vocab_size=20, seq_len=8, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                            causal=True, dtype=dtype)
    net = cl.Transformer(config, seed=3)
    tokens = np.random.default_rng(0).integers(0, 20, size=(16, 8))
    loss = net.loss(tokens, np.roll(tokens, -1, axis=1))
    out[dtype] = {"loss": float(loss), **{k: g.tolist() for k, g in net.backward().items()}}
json.dump(out, sys.stdout)
"""


def step(fallback: bool) -> dict:
    # the machine's default threads (not the test worker's share): what each path makes of them
    env = {k: v for k, v in os.environ.items() if k not in (blas.FALLBACK_ENV, "OPENBLAS_NUM_THREADS",
                                                              "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if fallback:
        env[blas.FALLBACK_ENV] = "numba"
    run = subprocess.run([sys.executable, "-c", STEP], env=env, capture_output=True, text=True,
                         timeout=time_limit(300))
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def both():
    return step(fallback=False), step(fallback=True)


def test_the_fallback_is_taken_when_forced(both):
    default, fallback = both
    assert fallback["fallback"] is True
    if np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"] == "scipy-openblas":
        assert default["fallback"] is False


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-5), ("float64", 1e-12)])
def test_both_paths_give_the_same_step_to_rounding(both, dtype, rtol):
    default, fallback = both[0][dtype], both[1][dtype]
    assert default.keys() == fallback.keys()
    for name in default:
        a, b = np.asarray(default[name]), np.asarray(fallback[name])
        scale = max(np.abs(a).max(), 1e-30)
        assert np.abs(a - b).max() <= rtol * scale, f"{name} ({dtype}) differs between the BLAS paths"


def test_the_kernels_threads_do_not_depend_on_the_path(both):
    default, fallback = both
    assert default["threads"] == fallback["threads"]


@pytest.mark.parametrize("product", ["_matmul_numba", "_matmul_into_numba"])
def test_the_fallback_names_mixed_dtypes_as_the_cblas_path_does(product):
    """float32 @ float64 on the fallback: the one-line message, not Numba's typing error (`@` of
    two dtypes does not even compile there)."""
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float64)
    args = (a, b) if product == "_matmul_numba" else (a, b, np.empty((2, 4), np.float32))
    with pytest.raises(ValueError,
                       match="matmul: a is float32 but b is float64: the arrays of one call need one dtype"):
        getattr(blas, product)(*args)


def test_the_fallback_that_cannot_write_its_cache_compiles_its_kernels(tmp_path):
    """With its cache folder unwritable, Numba would load the kernels beside the modules, compiled
    for NumPy's BLAS (which the fallback never loads: a crash). The fallback compiles instead."""
    qkv = np.linspace(-1.0, 1.0, 2 * 32 * 12).reshape(2, 32, 12)     # T = 32: products through BLAS
    expected, _ = cl.kernels.attention_forward(qkv, 2, True)         # here: a cache beside the module
    blocker = tmp_path / "a_file"
    blocker.write_text("")                                 # no folder can be made under a file
    code = ("import json, numpy as np, course_lib as cl\n"
            "from course_lib.kernels import attention\n"
            "qkv = np.linspace(-1.0, 1.0, 2 * 32 * 12).reshape(2, 32, 12)\n"
            "out, _ = cl.kernels.attention_forward(qkv, 2, True)\n"
            "print(json.dumps(out.tolist()), type(attention._heads_forward._cache).__name__)\n")
    env = {**os.environ, blas.FALLBACK_ENV: "numba", "NUMBA_CACHE_DIR": str(blocker / "cache")}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=time_limit(300))
    assert run.returncode == 0, run.stderr[-2000:]
    out, cache = run.stdout.rsplit(" ", 1)
    assert cache.strip() == "NullCache"
    np.testing.assert_allclose(np.array(json.loads(out)), expected, rtol=1e-12, atol=1e-14)


def test_set_num_threads_limits_the_count_on_either_path():
    unlimited = threads.blas_thread_count()
    with threads.set_num_threads(1):
        assert threads.blas_thread_count() == 1
        with threads.set_num_threads(None):                 # None: the limit lifted, in the block
            assert threads.blas_thread_count() == unlimited
        assert threads.blas_thread_count() == 1
    assert threads.blas_thread_count() == unlimited


def test_without_a_blas_threadpoolctl_knows_the_cores_count(monkeypatch):
    """Where threadpoolctl sees no BLAS (Accelerate), split_work still splits on a machine with cores."""
    monkeypatch.setattr(threads, "NUMPY_BLAS_CONTROLLER", None)
    assert threads.blas_thread_count() == (os.cpu_count() or 1)
    with threads.set_num_threads(1):
        assert threads.blas_thread_count() == 1
