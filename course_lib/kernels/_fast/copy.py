"""Joining and splitting column blocks, and scaling in place, on several threads for large arrays.

Attention multiplies by W_q, W_k and W_v side by side, (C, 3C), and hands back their gradients
one (C, C) block each: at GPT-2 small's size each join or split copies 7 MB, which one thread
takes milliseconds over.
"""
import numpy as np

from .jit import kernel
from .threads import split_work
from .tuning import COPY_GRAIN as GRAIN


@kernel(split=True)
def _join_rows(a, b, c, out, first, last):
    C = a.shape[1]
    for i in range(first, last):
        for j in range(C):
            out[i, j] = a[i, j]
            out[i, C + j] = b[i, j]
            out[i, 2 * C + j] = c[i, j]


def join_columns(a, b, c):
    """a, b, c (I, C) -> [a b c] (I, 3C), in a's dtype."""
    if not a.shape == b.shape == c.shape or a.ndim != 2:
        raise ValueError(f"join_columns: a, b and c must be (I, C) alike, got {a.shape}, {b.shape}, {c.shape}")
    out = np.empty((a.shape[0], 3 * a.shape[1]), dtype=a.dtype)
    split_work(_join_rows, a.shape[0], a, b, c, out, work=out.size, grain=GRAIN)
    return out


@kernel(split=True)
def _block_rows(x, start, out, first, last):
    for i in range(first, last):
        for j in range(out.shape[1]):
            out[i, j] = x[i, start + j]


def column_block(x, start, stop):
    """x[:, start:stop] as a C-contiguous copy."""
    out = np.empty((x.shape[0], stop - start), dtype=x.dtype)
    split_work(_block_rows, x.shape[0], x, start, out, work=out.size, grain=GRAIN)
    return out


@kernel(split=True)
def _scale_range(x, factor, first, last):
    for i in range(first, last):
        x[i] *= factor


def scale_in_place(x, factor):
    """x *= factor (factor in x's dtype); a large C-contiguous x on several threads."""
    if not x.flags.c_contiguous:
        x *= factor
        return
    split_work(_scale_range, x.size, x.reshape(-1), factor, work=x.size, grain=GRAIN)
