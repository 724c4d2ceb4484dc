"""The layers' matrix products, as tiles of a fixed grid on course_lib's threads.

OpenBLAS splits a large product over its threads in a way that depends on how many there are,
and in float32 the bytes of the result do too (its one-thread and many-thread paths add in
different orders). So the layers cut a large product into tiles of out, by a grid that depends
only on the shapes and the machine, and multiply each tile by one BLAS call in the calling thread
(`blas_inline`); the tiles are shared among course_lib's threads (split_work). Every tile is the
same call on the same numbers whichever thread makes it: the same bytes on any thread count.

A tile does at least TILE_WORK multiply-adds, so that a call's own cost stays small beside its
work, and has at least MIN_SIDE rows and columns: BLAS packs each tile's operands again, (rows +
columns) x K numbers for rows x columns x K multiply-adds, so narrow tiles spend their time
packing. There are about MAX_TILES, one for each of the machine's cores (split_work gives each
thread a fixed range of tiles: more tiles than threads would only pack more). The machine's
cores, os.cpu_count(), not the threads or the cores this process is given: the grid, and so the
bytes, are the same for every thread count, limit and affinity on one machine (machines already
differ in their BLAS's kernels). A layer's backward has two independent products of the same
work, dx and dW: `product_pair` puts the tiles of both in one list, each product in half as many
tiles as alone (on 2 cores each is one call, on a thread of its own).

Products up to SMALL_PRODUCT multiply-adds (all of the course model's) are one call, on the
calling thread, whatever the thread count: cut in tiles they cost more on one thread (each tile
packs its operands again), and training the course model runs on one thread
(threads.threads_for_model).

On the fallback BLAS (blas.py) products are whole, through Numba's `a @ b` and its BLAS's threads.
"""
import functools
import os

import numpy as np

from .blas import INLINE_PRODUCT, NUMPY_BLAS, matmul, matmul_into, check_same_dtype
from .jit import kernel
from .threads import blas_inline, split_work
from .tuning import MIN_SIDE, SMALL_PRODUCT, TILE_WORK

MAX_TILES = os.cpu_count() or 1
ALIGN = 16              # a tile's sides are multiples of this (whole vectors of float32)


def _halve(n):
    """n / 2 rounded up to a multiple of ALIGN."""
    return -(-n // 2 // ALIGN) * ALIGN


def _count(M, N, rows, cols):
    """How many tiles of rows x cols cover an (M, N) output."""
    return -(-M // rows) * -(-N // cols)


@functools.lru_cache(maxsize=256)
def tile_shape(M, N, K, max_tiles=MAX_TILES):
    """(rows, columns) of the tiles of an (M, K) @ (K, N) product: halve the longer side that
    stays at least MIN_SIDE until there are as many tiles as the work is worth (up to max_tiles;
    the last halving may give up to twice as many). Depends on the shapes (and the machine) only."""
    want = min(max_tiles, M * N * K // TILE_WORK)
    rows, cols = M, N
    while _count(M, N, rows, cols) < want:
        if cols >= rows and _halve(cols) >= MIN_SIDE:
            cols = _halve(cols)
        elif _halve(rows) >= MIN_SIDE:
            rows = _halve(rows)
        elif _halve(cols) >= MIN_SIDE:
            cols = _halve(cols)
        else:
            break
    return rows, cols


@kernel(split=True)
def _tiles(a, b, out, rows, cols, first, last):
    """out's tiles first..last-1 (row-major over the grid) = a's rows @ b's columns."""
    M, N = out.shape
    per_row = -(-N // cols)
    for t in range(first, last):
        r0, c0 = t // per_row * rows, t % per_row * cols
        r1, c1 = min(M, r0 + rows), min(N, c0 + cols)
        matmul_into(a[r0:r1], b[:, c0:c1], out[r0:r1, c0:c1])


def _checked_shape(a, b):
    """(M, N, K) of a (M, K) @ b (K, N), after checking dtypes and shapes (before the tiles: a
    parallel loop cannot raise)."""
    check_same_dtype("matmul", "a", a, "b", b)
    (M, K), N = a.shape, b.shape[1]
    if b.shape[0] != K:
        raise ValueError("matmul: the shapes do not fit: a (M, K) @ b (K, N) -> out (M, N)")
    return M, N, K


def product(a, b):
    """a (M, K) @ b (K, N) -> (M, N): small products in one BLAS call on this thread, larger ones
    in tiles on course_lib's threads."""
    if NUMPY_BLAS is None:
        return matmul(a, b)
    M, N, K = _checked_shape(a, b)
    if M * N * K <= INLINE_PRODUCT:             # BLAS runs it here anyway
        return matmul(a, b)
    with blas_inline():
        if M * N * K <= SMALL_PRODUCT:
            return matmul(a, b)
        rows, cols = tile_shape(M, N, K)
        out = np.empty((M, N), dtype=a.dtype)
        split_work(_tiles, _count(M, N, rows, cols), a, b, out, rows, cols)
    return out


@kernel(split=True)
def _pair_tiles(a, b, out, rows, cols, n, c, d, out2, rows2, cols2, first, last):
    """Tiles first..last-1 of the list: out's n tiles (a @ b), then out2's (c @ d)."""
    if first < n:
        _tiles(a, b, out, rows, cols, first, min(last, n))
    if last > n:
        _tiles(c, d, out2, rows2, cols2, max(first, n) - n, last - n)


def product_pair(a, b, c, d):
    """(a @ b, c @ d) for two independent large products of about the same work (a layer's dx and
    dW): their tiles in one list on course_lib's threads, each product in half as many tiles as
    alone, so bigger ones (on 2 cores each product is one call, on a thread of its own)."""
    if NUMPY_BLAS is None:
        return matmul(a, b), matmul(c, d)
    M, N, K = _checked_shape(a, b)
    M2, N2, K2 = _checked_shape(c, d)
    if min(M * N * K, M2 * N2 * K2) <= SMALL_PRODUCT:
        return product(a, b), product(c, d)
    half = max(1, MAX_TILES // 2)
    rows, cols = tile_shape(M, N, K, half)
    rows2, cols2 = tile_shape(M2, N2, K2, half)
    out, out2 = np.empty((M, N), dtype=a.dtype), np.empty((M2, N2), dtype=c.dtype)
    n = _count(M, N, rows, cols)
    with blas_inline():
        split_work(_pair_tiles, n + _count(M2, N2, rows2, cols2),
                   a, b, out, rows, cols, n, c, d, out2, rows2, cols2)
    return out, out2
