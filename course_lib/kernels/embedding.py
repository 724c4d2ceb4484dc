"""Token embedding plus positions: x[b, t] = E[tokens[b, t]] + P[t].

Shapes: tokens (B, T) int, E (V, C), P (T_max, C), x (B, T, C).
"""
import numpy as np

from ._fast.jit import kernel
from .numpy_ref import sinusoidal_table  # noqa: F401  (plain NumPy: one table for both paths)


@kernel
def first_out_of_range(tokens, vocab_size):
    """tokens (B, T) int -> flat index of the first id outside 0..vocab_size-1, or -1. One pass."""
    flat = tokens.ravel()
    for i in range(flat.size):
        if flat[i] < 0 or flat[i] >= vocab_size:
            return i
    return -1


@kernel
def embedding_forward(tokens, tok_emb, pos):
    """x = E[tokens] + P[:T]. tokens (B, T), E (V, C), P (T_max, C) or None -> x (B, T, C).

    NumPy twin: numpy_ref.embedding_forward.
    """
    B, T = tokens.shape
    C = tok_emb.shape[1]
    x = np.empty((B, T, C), dtype=tok_emb.dtype)
    for b in range(B):
        for t in range(T):
            row = tok_emb[tokens[b, t]]
            if pos is None:
                x[b, t] = row
            else:
                for c in range(C):
                    x[b, t, c] = row[c] + pos[t, c]
    return x


@kernel
def embedding_backward(tokens, dx, vocab_size, d_tok=None):
    """Scatter-add: dE[v] = sum of dx[b, t] over positions holding token v; dP[t] = sum_b dx[b, t].

    tokens (B, T), dx (B, T, C) -> dE (V, C), dP (T, C). A repeated token accumulates.
    d_tok: a (V, C) gradient to add dE into, in place (with tied embeddings, the head's
    share), returned as dE; None starts from zeros.

    NumPy twin: numpy_ref.embedding_backward.
    """
    B, T, C = dx.shape
    if d_tok is None:
        dE = np.zeros((vocab_size, C), dtype=dx.dtype)
    else:
        if d_tok.shape[0] != vocab_size or d_tok.shape[1] != C:
            raise ValueError("embedding_backward: d_tok must be (vocab_size, C)")
        dE = d_tok
    d_pos = np.zeros((T, C), dtype=dx.dtype)
    for b in range(B):
        for t in range(T):
            v = tokens[b, t]
            for c in range(C):
                dE[v, c] += dx[b, t, c]
                d_pos[t, c] += dx[b, t, c]
    return dE, d_pos
