"""The same bytes from every thread count: a model's training steps (loss, every gradient,
clipping, Adam's update) under 1, 2, 3, 8 and 16 threads (more threads than this machine's
cores: the split is what matters), with the thresholds that keep small work on one thread
lowered so that every kernel splits, and with them as they are."""
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

import course_lib as cl
from course_lib import optim
from course_lib.kernels import activations, cross_entropy, layernorm, linear, residual
from course_lib.kernels._fast import blas, copy, products, reduce, threads
from course_lib.kernels._fast.threads import set_num_threads, get_num_threads
from support import time_limit

pytestmark = pytest.mark.skipif(blas.NUMPY_BLAS is None, reason="on the fallback BLAS the products are "
                                "Numba's a @ b, whole, whose bytes depend on SciPy's BLAS threads")
THREADS = (1, 2, 3, 8, 16)
GRAINS = (activations, cross_entropy, layernorm, linear, residual, copy, reduce, optim)


def config(dtype, T):
    return cl.presets.gpt2(vocab_size=384, seq_len=T, d_model=64, n_heads=4, n_layers=2, d_ff=256,
                      dtype=dtype)


def steps(cfg, threads, n_steps=2):
    """Losses, gradient norms and the bytes of every gradient and parameter after n_steps
    (threads None: as the caller set them)."""
    model = cl.Transformer(cfg, seed=0)
    opt = optim.AdamW(model.params, lr=1e-3)
    rng = np.random.default_rng(1)
    out = []
    with set_num_threads(threads):
        assert threads is None or get_num_threads() == threads
        for _ in range(n_steps):
            tokens = rng.integers(0, cfg.vocab_size, size=(4, cfg.seq_len))
            targets = np.roll(tokens, -1, axis=1)
            targets[:, -3:] = -100                      # some rows not scored
            out.append(model.loss(tokens, targets))
            grads = model.backward()
            out.append(optim.clip_grad_norm(grads, max_norm=0.1))      # clips: the scaling runs too
            out += [g.tobytes() for g in grads.values()]
            opt.step(grads)
    return out + [p.tobytes() for p in model.params.values()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("T", [40, 8])      # attention through BLAS in blocks of rows; plain loops
def test_every_kernel_split_gives_the_same_bytes(monkeypatch, dtype, T):
    for module in GRAINS:
        monkeypatch.setattr(module, "GRAIN", 1)
    monkeypatch.setattr(linear, "PAIR_GRAIN", 1)
    cfg = config(dtype, T)
    one = steps(cfg, 1)
    for n in THREADS[1:]:
        assert steps(cfg, n) == one, f"{n} threads differ from one"


def test_the_thresholds_as_they_are_give_the_same_bytes():
    cfg = cl.presets.gpt2(vocab_size=2048, seq_len=64, d_model=128, n_heads=4, n_layers=1,
                     d_ff=512, dtype="float32")       # tok_emb: 2 chunks of the gradient norm
    one = steps(cfg, 1, n_steps=1)
    for n in THREADS[1:]:
        assert steps(cfg, n, n_steps=1) == one, f"{n} threads differ from one"


def test_two_python_threads_training_at_once_get_the_same_bytes(monkeypatch):
    """Two models trained at once from two Python threads (a learner's widget beside a loop):
    no crash, and each gets what it gets alone. One of them at a time runs parallel loops."""
    import threading
    for module in GRAINS:
        monkeypatch.setattr(module, "GRAIN", 1)
    cfg = config("float32", 40)
    alone = steps(cfg, 2)
    results = [None, None]

    def train(i):
        results[i] = steps(cfg, None)
    with set_num_threads(2):
        workers = [threading.Thread(target=train, args=(i,)) for i in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(300)
    assert results[0] == alone and results[1] == alone


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_small_layer_in_one_call_gives_the_bytes_of_the_split_one(monkeypatch, dtype):
    rng = np.random.default_rng(0)
    x, w, b, dy = (rng.standard_normal(s).astype(dtype) for s in ((48, 32), (32, 64), (64,), (48, 64)))
    assert linear._one_call(x, w)
    whole = [linear.linear_forward(x, w, b), *linear.linear_backward(dy, x, w, True)]
    monkeypatch.setattr(linear, "GRAIN", 1)     # the bias added by rows, summed by columns, split
    assert not linear._one_call(x, w)
    with set_num_threads(3):
        split = [linear.linear_forward(x, w, b), *linear.linear_backward(dy, x, w, True)]
    assert [a.tobytes() for a in whole] == [a.tobytes() for a in split]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_small_layers_backward_runs_its_two_products_on_two_threads(monkeypatch, dtype):
    """The course model's feed-forward layer (256, 64) @ (64, 256): dx and dW one BLAS call each,
    on two threads where two are allowed, the bytes of one thread; a layer under PAIR_GRAIN on one."""
    rng = np.random.default_rng(0)
    x, w, dy = (rng.standard_normal(s).astype(dtype) for s in ((256, 64), (64, 256), (256, 256)))
    assert linear._one_call(x, w)
    used = []
    monkeypatch.setattr(threads, "observer", used.append)
    with set_num_threads(1):
        alone = linear.linear_backward(dy, x, w, True)
    with set_num_threads(2):
        pair = linear.linear_backward(dy, x, w, True)
        linear.linear_backward(dy[:, :4], x, w[:, :4], True)       # 65,536 multiply-adds each: one thread
    assert used == ([2] if threads.threads_spin() else [])      # (the workqueue: the test below)
    assert [a.tobytes() for a in alone] == [a.tobytes() for a in pair]
    assert np.allclose(pair[0], dy @ w.T) and np.allclose(pair[1], x.T @ dy) and np.allclose(pair[2], dy.sum(0))


def test_where_numbas_threads_sleep_a_small_layers_backward_stays_on_one_thread():
    """On the workqueue layer (usually macOS's) waking a thread costs more than the course model's
    products: the pair above runs on the calling thread."""
    code = ("import numpy as np\n"
            "from course_lib.kernels import linear\n"
            "from course_lib.kernels._fast import threads\n"
            "used = []\n"
            "threads.observer = used.append\n"
            "x, w, dy = (np.ones(s, np.float32) for s in ((256, 64), (64, 256), (256, 256)))\n"
            "with threads.set_num_threads(2):\n"
            "    dx, dw, db = linear.linear_backward(dy, x, w, True)\n"
            "print(threads.threads_spin(), used, dx[0, 0], dw[0, 0], db[0])\n")
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "NUMBA_NUM_THREADS": "2"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=time_limit(120))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["False", "[]", "256.0", "256.0", "256.0"]


@pytest.mark.parametrize("cores", [1, 2, 8, 16])
@pytest.mark.parametrize("M, N, K", [(1024, 256, 256), (1024, 768, 256), (256, 2304, 768), (256, 256, 1024),
                                     (100, 5000, 3000), (16, 100_000, 64), (4096, 4096, 4096)])
def test_a_products_tiles_are_wide_and_few(M, N, K, cores):
    """The grid of a large product on a machine of so many cores: as many tiles as the work is
    worth (up to one a core; halving a side may give up to twice that), each at least MIN_SIDE
    rows and columns where the product has them (narrow tiles spend their time packing): a mid
    layer's (1024, 256) output has one for each of 16 cores. The tiles' product is the product."""
    rows, cols = products.tile_shape(M, N, K, cores)
    count = products._count(M, N, rows, cols)
    want = min(cores, M * N * K // products.TILE_WORK)
    assert rows >= min(M, products.MIN_SIDE) and cols >= min(N, products.MIN_SIDE)
    narrowest = max(products._halve(rows), products._halve(cols)) < products.MIN_SIDE
    assert want <= count < 2 * want or count < want and narrowest
    if (M, N, cores) == (1024, 256, 16):
        assert count == 16
    if cores == 2 and M * N * K <= 1 << 31:
        a, b = (np.random.default_rng(0).standard_normal(s) for s in ((M, K), (K, N)))
        assert np.allclose(products.product(a, b), a @ b, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cores", [1, 2, 3, 16])
def test_a_pair_of_products_is_both_in_the_same_bytes_on_any_thread_count(monkeypatch, dtype, cores):
    """A layer's backward (dx = dy @ W.T, dW = x.T @ dy) as one list of tiles, on a machine of so
    many cores: the two products, the same bytes on 1, 2, 3 and 8 threads."""
    monkeypatch.setattr(products, "MAX_TILES", cores)
    rng = np.random.default_rng(0)
    x, w, dy = (rng.standard_normal(s).astype(dtype) for s in ((1024, 256), (256, 768), (1024, 768)))
    pairs = []
    for n in (1, 2, 3, 8):
        with set_num_threads(n):
            pairs.append([p.tobytes() for p in products.product_pair(dy, w.T, x.T, dy)])
    assert all(p == pairs[0] for p in pairs)
    dx, dw = products.product_pair(dy, w.T, x.T, dy)
    tolerance = dict(rtol=1e-4, atol=1e-3) if dtype == "float32" else dict(rtol=1e-12, atol=1e-10)
    assert np.allclose(dx, dy.astype(float) @ w.T, **tolerance)
    assert np.allclose(dw, x.T.astype(float) @ dy, **tolerance)


GRID_CHECK = """
import os, numpy as np
from course_lib.kernels._fast import products
from course_lib.kernels._fast.threads import available_cores, set_num_threads
rng = np.random.default_rng(0)
a, b = rng.standard_normal((1024, 256), dtype=np.float32), rng.standard_normal((256, 768), dtype=np.float32)
whole = products.product(a, b).tobytes()
cores = os.sched_getaffinity(0)
os.sched_setaffinity(0, {min(cores)})
assert available_cores() == 1
print(products.product(a, b).tobytes() == whole)
os.sched_setaffinity(0, cores)
with set_num_threads(3):
    print(products.product(a, b).tobytes() == whole)
other = 32 if products.MAX_TILES == 2 else 2
products.tile_shape = lambda M, N, K, tile_shape=products.tile_shape: tile_shape(M, N, K, other)
print(products.product(a, b).tobytes() == whole)
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or platform.machine() != "x86_64",
                    reason="affinity and OpenBLAS's Haswell kernels: Linux on x86")
def test_a_products_grid_is_the_machines_not_the_processes():
    """The grid follows the machine's cores (os.cpu_count), not the cores this process is given
    (taskset) nor its thread limit: a large product's bytes move with neither. Shown with
    OpenBLAS's Haswell kernels (every AVX2 processor's), whose bytes depend on the grid: another
    grid gives other bytes."""
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
    run = subprocess.run([sys.executable, "-c", GRID_CHECK], env=env, capture_output=True, text=True,
                         timeout=time_limit(120))
    assert run.stdout.split() == ["True", "True", "False"], run.stderr
