"""The same kernels in plain NumPy: the simple path.

Same names, signatures and results as the Numba kernels (up to rounding), written
the way a learner writes them. `Transformer(config, backend="numpy")` runs on these;
tests check that both paths agree and benchmarks time both.
"""
import numpy as np

from .activations import GELU_A, GELU_B
from .cross_entropy import IGNORE
from .embedding import sinusoidal_table  # noqa: F401  (same table for both paths)


def linear_forward(x, w, b):
    y = x @ w
    return y if b is None else y + b


def linear_backward(dy, x, w, has_bias):
    db = dy.sum(0) if has_bias else np.zeros(dy.shape[1], dy.dtype)
    return dy @ w.T, x.T @ dy, db


def embedding_forward(tokens, tok_emb, pos):
    x = tok_emb[tokens]
    return x if pos is None else x + pos[:tokens.shape[1]]


def embedding_backward(tokens, dx, vocab_size):
    d_tok = np.zeros((vocab_size, dx.shape[2]), dx.dtype)
    np.add.at(d_tok, tokens, dx)
    return d_tok, dx.sum(0)


def layernorm_forward(x, gamma, beta, eps):
    mean = x.mean(1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    return xhat * gamma + beta, xhat, rstd[:, 0].astype(x.dtype)


def layernorm_backward(dy, xhat, rstd, gamma):
    g = dy * gamma
    C = dy.shape[1]
    dx = rstd[:, None] / C * (C * g - g.sum(1, keepdims=True) - xhat * (g * xhat).sum(1, keepdims=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def relu_forward(h):
    return np.where(h <= 0, np.zeros_like(h), h)


def relu_backward(dy, h):
    return np.where(h > 0, dy, np.zeros_like(dy))


def gelu_forward(h):
    return 0.5 * h * (1 + np.tanh(GELU_A * (h + GELU_B * h ** 3)))


def gelu_backward(dy, h):
    t = np.tanh(GELU_A * (h + GELU_B * h ** 3))
    return dy * (0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_A * (1 + 3 * GELU_B * h * h))


def residual_forward(x, fx):
    return x + fx


def residual_backward(dy):
    return dy.copy(), dy


def softmax_forward(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_backward(dy, y):
    return y * (dy - (dy * y).sum(-1, keepdims=True))


def _heads(qkv, n_heads):
    B, T, C3 = qkv.shape
    D = C3 // 3 // n_heads
    q, k, v = (a.reshape(B, T, n_heads, D).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=2))
    return q, k, v, D


def attention_forward(qkv, n_heads, causal):
    q, k, v, D = _heads(qkv, n_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D).astype(qkv.dtype)
    if causal:
        T = s.shape[-1]
        s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
    att = softmax_forward(s)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(qkv.shape[0], qkv.shape[1], -1)
    return out, att


def attention_backward(dout, qkv, att):
    n_heads = att.shape[1]
    q, k, v, D = _heads(qkv, n_heads)
    B, T, C = dout.shape
    do = dout.reshape(B, T, n_heads, D).transpose(0, 2, 1, 3)
    dv = att.transpose(0, 1, 3, 2) @ do
    ds = softmax_backward(do @ v.transpose(0, 1, 3, 2), att) / np.sqrt(D).astype(qkv.dtype)
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
    return np.concatenate([a.transpose(0, 2, 1, 3).reshape(B, T, C) for a in (dq, dk, dv)], axis=2)


def cross_entropy_forward(logits, targets):
    probs = softmax_forward(logits)
    scored = targets != IGNORE
    z = logits[scored].astype(np.float64)
    m = z.max(1)
    lse = m + np.log(np.exp(z - m[:, None]).sum(1))
    return float(np.mean(lse - z[np.arange(len(z)), targets[scored]])), probs


def cross_entropy_backward(probs, targets):
    scored = targets != IGNORE
    dz = np.zeros_like(probs)
    dz[scored] = probs[scored]
    dz[np.flatnonzero(scored), targets[scored]] -= 1
    return dz / scored.sum()


def attention_rows_forward(qkv, n_heads, causal, rows):
    out, att = attention_forward(qkv, n_heads, causal)
    B, T = qkv.shape[:2]
    return out.reshape(B * T, -1)[rows], att.transpose(0, 2, 1, 3).reshape(B * T, n_heads, T)[rows]


def attention_rows_backward(dout, qkv, att, rows):
    B, T, C3 = qkv.shape
    n_heads = att.shape[1]
    full_att = np.zeros((B * T, n_heads, T), qkv.dtype)
    full_att[rows] = att
    full_dout = np.zeros((B * T, C3 // 3), qkv.dtype)
    full_dout[rows] = dout
    full_att = full_att.reshape(B, T, n_heads, T).transpose(0, 2, 1, 3)
    return attention_backward(full_dout.reshape(B, T, -1), qkv, full_att)
