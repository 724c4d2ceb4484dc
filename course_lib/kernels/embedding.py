"""Token embedding plus positions: x[b, t] = E[tokens[b, t]] + P[t].

Shapes: tokens (B, T) int, E (V, C), P (T_max, C), x (B, T, C).
"""
import numpy as np

from ._fast.jit import kernel


def sinusoidal_table(n_positions, d_model, dtype=np.float64):
    """P[pos, 2i] = sin(pos / 10000^(2i/C)), P[pos, 2i+1] = cos(pos / 10000^(2i/C)). -> (T, C)."""
    pos = np.arange(n_positions, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angle = pos / 10000.0 ** (two_i / d_model)
    table = np.zeros((n_positions, d_model))
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return table.astype(dtype)


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
    """x = E[tokens] + P[:T]. tokens (B, T), E (V, C), P (T_max, C) or None -> x (B, T, C)."""
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
def embedding_backward(tokens, dx, vocab_size):
    """Scatter-add: dE[v] = sum of dx[b, t] over positions holding token v; dP[t] = sum_b dx[b, t].

    tokens (B, T), dx (B, T, C) -> dE (V, C), dP (T, C). A repeated token accumulates.
    """
    B, T, C = dx.shape
    d_tok = np.zeros((vocab_size, C), dtype=dx.dtype)
    d_pos = np.zeros((T, C), dtype=dx.dtype)
    for b in range(B):
        for t in range(T):
            v = tokens[b, t]
            for c in range(C):
                d_tok[v, c] += dx[b, t, c]
                d_pos[t, c] += dx[b, t, c]
    return d_tok, d_pos
