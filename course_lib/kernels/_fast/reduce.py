"""Sums on several threads whose bytes do not depend on how many there are.

column_sums: over the rows of an (N, C) array, column by column.

Each thread takes a range of columns and adds the rows into them in order, row 0 first, as one
thread would: every column's sum is the same bytes whatever the number of threads (a split by
rows would need partial sums whose order depends on it).

sum_columns: the same for a range of columns, on the calling thread (inside another kernel).

sum_squares: of a flat array, in chunks of fixed size added in order.
"""
import numpy as np

from .jit import kernel
from .threads import split_work
from .tuning import REDUCE_GRAIN as GRAIN, SQUARES_CHUNK as CHUNK

ALIGN = 16          # columns per range a multiple of a cache line of float32: no line shared


@kernel(split=True)
def sum_columns(a, b, sum_a, sum_ab, first, last):
    """The columns first..last-1, summed into arrays of this call's own: the loop then
    vectorises (LLVM cannot tell that sum_a does not overlap a)."""
    acc_a = np.zeros(last - first, dtype=sum_a.dtype)
    acc_ab = np.zeros(last - first if b is not None else 0, dtype=sum_a.dtype)
    for n in range(a.shape[0]):
        row = a[n, first:last]
        for c in range(last - first):
            acc_a[c] += row[c]
        if b is not None:
            row_b = b[n, first:last]
            for c in range(last - first):
                acc_ab[c] += row[c] * row_b[c]
    sum_a[first:last] = acc_a
    if b is not None:
        sum_ab[first:last] = acc_ab


def column_sums(a, b=None):
    """a (N, C) [, b (N, C)] -> sum over rows of a (C,), and of a * b (C,) (None without b)."""
    C = a.shape[1]
    sum_a = np.zeros(C, dtype=a.dtype)
    sum_ab = None if b is None else np.zeros(C, dtype=a.dtype)
    split_work(sum_columns, C, a, b, sum_a, sum_ab, work=a.size, grain=GRAIN, align=ALIGN)
    return sum_a, sum_ab


@kernel
def _sum_squares(x):
    """sum of x_i^2 over a flat array, accumulated in float64 (a loop, not BLAS: no thread pool)."""
    s = 0.0
    for i in range(x.size):
        s += np.float64(x[i]) * np.float64(x[i])
    return s


@kernel(split=True)
def _chunk_sums(x, partial, first, last):
    for i in range(first, last):
        partial[i] = _sum_squares(x[i * CHUNK:min((i + 1) * CHUNK, x.size)])


def sum_squares(x):
    """sum of x_i^2 over a flat array, in float64: in chunks of CHUNK elements, the chunks on several
    threads and their sums added in order (the same bytes on any thread count)."""
    n = -(-x.size // CHUNK)
    if n <= 1:
        return _sum_squares(x)
    partial = np.empty(n)
    split_work(_chunk_sums, n, x, partial)
    return sum(partial.tolist())
