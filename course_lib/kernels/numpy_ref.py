"""The same kernels in plain NumPy: the readable twin of every fast kernel.

Same names, signatures and results as the Numba kernels (up to rounding), written
the way a learner writes them in the notebooks; each docstring names the notebook.
`Transformer(config, backend="numpy")` runs on these; tests check that both paths
agree, and benchmarks time both. This module needs only NumPy (no Numba), and it
holds the constants both paths share: IGNORE, the GELU constants, the sinusoidal table.

Shapes: N rows (N = B * T positions), C = d_model, F = d_ff, V = vocab, H heads of D = C / H.
"""
import math

import numpy as np

IGNORE = -100                       # target of a position that is not scored (PyTorch's convention)
GELU_A = math.sqrt(2.0 / math.pi)   # GELU, tanh approximation: 0.5 h (1 + tanh(A (h + B h^3)))
GELU_B = 0.044715


# ----- 02 embeddings and positions --------------------------------------------------------
def sinusoidal_table(n_positions, d_model, dtype=np.float64):
    """P (T, C): P[pos, 2i] = sin(pos / 10000^(2i/C)), P[pos, 2i+1] = cos(pos / 10000^(2i/C)).

    Notebook 02. Plain NumPy, the same table for both paths.
    """
    pos = np.arange(n_positions, dtype=np.float64)[:, None]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]
    angle = pos / 10000.0 ** (two_i / d_model)
    table = np.zeros((n_positions, d_model))
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return table.astype(dtype)


def embedding_forward(tokens, tok_emb, pos):
    """x = E[tokens] + P[:T]. tokens (B, T) int, E (V, C), P (T_max, C) or None -> x (B, T, C). Notebook 02."""
    x = tok_emb[tokens]
    return x if pos is None else x + pos[:tokens.shape[1]]


def embedding_backward(tokens, dx, vocab_size, d_tok=None):
    """dx (B, T, C) -> dE (V, C) (scatter-add: a repeated token accumulates), dP (T, C). Notebooks 09-10.
    d_tok: a (V, C) gradient to add into in place (the tied head's share); None: zeros."""
    if d_tok is None:
        d_tok = np.zeros((vocab_size, dx.shape[2]), dx.dtype)
    elif d_tok.shape != (vocab_size, dx.shape[2]):
        raise ValueError("embedding_backward: d_tok must be (vocab_size, C)")
    np.add.at(d_tok, tokens, dx)
    return d_tok, dx.sum(0)


# ----- 03 single-head attention and softmax -----------------------------------------------
def softmax_forward(x):
    """y = exp(x - max x) / sum exp(x - max x) over the last axis. x (..., K) -> y (..., K). Notebook 03."""
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_backward(dy, y):
    """dx = y * (dy - sum(dy * y)) over the last axis: the Jacobian diag(y) - y y^T applied to dy. Notebook 03."""
    return y * (dy - (dy * y).sum(-1, keepdims=True))


# ----- 04 multi-head attention and masks --------------------------------------------------
def _heads(qkv, n_heads):
    """qkv (B, T, 3C) -> q, k, v each (B, H, T, D), and D. Head h is the column block h*D:(h+1)*D."""
    B, T, C3 = qkv.shape
    D = C3 // 3 // n_heads
    q, k, v = (a.reshape(B, T, n_heads, D).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=2))
    return q, k, v, D


def attention_forward(qkv, n_heads, causal):
    """qkv (B, T, 3C) -> out (B, T, C) with the heads side by side, att (B, H, T, T).

    Per head: A = softmax(Q K^T / sqrt(D)), future keys masked when causal; O = A V.
    Notebooks 03 (one head) and 04 (several heads, the causal mask).
    """
    q, k, v, D = _heads(qkv, n_heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D).astype(qkv.dtype)
    if causal:
        T = s.shape[-1]
        s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
    att = softmax_forward(s)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(qkv.shape[0], qkv.shape[1], -1)
    return out, att


def attention_backward(dout, qkv, att, causal=False):
    """dout (B, T, C) -> dqkv (B, T, 3C).

    dV = A^T dO;  dS = softmax_backward(dO V^T, A) / sqrt(D);  dQ = dS K;  dK = dS^T Q.
    The mask needs nothing here (A = 0 where it applied): causal only lets the fast kernel
    skip those entries. Notebooks 03 (one head) and 09-10.
    """
    n_heads = att.shape[1]
    q, k, v, D = _heads(qkv, n_heads)
    B, T, C = dout.shape
    do = dout.reshape(B, T, n_heads, D).transpose(0, 2, 1, 3)
    dv = att.transpose(0, 1, 3, 2) @ do
    ds = softmax_backward(do @ v.transpose(0, 1, 3, 2), att) / np.sqrt(D).astype(qkv.dtype)
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q
    return np.concatenate([a.transpose(0, 2, 1, 3).reshape(B, T, C) for a in (dq, dk, dv)], axis=2)


def attention_rows_forward(qkv, n_heads, causal, rows):
    """Attention at chosen query rows only (flat positions n = b*T + t): qkv (B, T, 3C), rows (M,)
    -> out (M, C), att (M, H, T). The model's shortcut when the loss reads only some positions
    (the task of notebook 01 scores one per sequence); here simply full attention, then the rows."""
    out, att = attention_forward(qkv, n_heads, causal)
    B, T = qkv.shape[:2]
    return out.reshape(B * T, -1)[rows], att.transpose(0, 2, 1, 3).reshape(B * T, n_heads, T)[rows]


def attention_rows_backward(dout, qkv, att, rows):
    """dout (M, C) at the query rows -> dqkv (B, T, 3C): attention_backward with zeros at the other rows.

    Notebook 01's task scores one position per sequence: the model's shortcut, as above.
    """
    B, T, C3 = qkv.shape
    n_heads = att.shape[1]
    full_att = np.zeros((B * T, n_heads, T), qkv.dtype)
    full_att[rows] = att
    full_dout = np.zeros((B * T, C3 // 3), qkv.dtype)
    full_dout[rows] = dout
    full_att = full_att.reshape(B, T, n_heads, T).transpose(0, 2, 1, 3)
    return attention_backward(full_dout.reshape(B, T, -1), qkv, full_att)


# ----- 05 residuals and LayerNorm ---------------------------------------------------------
def residual_forward(x, fx):
    """y = x + f(x). All (N, C). Notebook 05."""
    return x + fx


def residual_backward(dy):
    """dy (N, C) -> (dx_skip, dfx), both dy: the gradient goes down both paths. Notebook 05."""
    return dy.copy(), dy


def layernorm_forward(x, gamma, beta, eps):
    """x (N, C) -> y = gamma * xhat + beta (N, C), xhat = (x - mean) * rstd (N, C), rstd (N,).

    rstd = 1 / sqrt(var + eps), biased variance. Notebook 05.
    """
    mean = x.mean(1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    return xhat * gamma + beta, xhat, rstd[:, 0].astype(x.dtype)


def layernorm_backward(dy, xhat, rstd, gamma):
    """dy (N, C) -> dx (N, C), dgamma (C,), dbeta (C,).

    With g = dy * gamma: dx = rstd / C * (C g - sum(g) - xhat sum(g xhat)). Notebooks 05 and 09-10.
    """
    g = dy * gamma
    C = dy.shape[1]
    dx = rstd[:, None] / C * (C * g - g.sum(1, keepdims=True) - xhat * (g * xhat).sum(1, keepdims=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


# ----- 06 the feed-forward network: linear, ReLU, GELU ------------------------------------
def linear_forward(x, w, b):
    """y = x @ W + b. x (N, I), W (I, O), b (O,) or None -> y (N, O). Notebook 06."""
    y = x @ w
    return y if b is None else y + b


def linear_backward(dy, x, w, has_bias):
    """dy (N, O) -> dx = dy W^T (N, I), dW = x^T dy (I, O), db = sum_n dy (O,) (zeros without bias).

    Notebooks 06 and 09-10.
    """
    db = dy.sum(0) if has_bias else np.zeros(dy.shape[1], dy.dtype)
    return dy @ w.T, x.T @ dy, db


def relu_forward(h):
    """y = max(h, 0), NaN kept. h (N, F) -> y (N, F). Notebook 06."""
    return np.where(h <= 0, np.zeros_like(h), h)


def relu_backward(dy, h):
    """dh = dy where h > 0, else 0. (N, F). Notebook 06."""
    return np.where(h > 0, dy, np.zeros_like(dy))


def gelu_forward(h):
    """y = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))). h (N, F) -> y (N, F). Notebook 06."""
    return 0.5 * h * (1 + np.tanh(GELU_A * (h + GELU_B * h ** 3)))


def gelu_backward(dy, h, y=None):
    """dh = dy * [0.5 (1 + t) + 0.5 h (1 - t^2) u'(h)], t = tanh(u), u' = sqrt(2/pi)(1 + 3 * 0.044715 h^2).

    (N, F). y, the forward's output, is for the fast kernel (which reads sigma(2u) from it); here t
    is computed again either way. Notebook 06.
    """
    t = np.tanh(GELU_A * (h + GELU_B * h ** 3))
    return dy * (0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_A * (1 + 3 * GELU_B * h * h))


# ----- 08 softmax and cross-entropy -------------------------------------------------------
def logsumexp(z):
    """log sum_v exp(z[n, v]) per row, stable: the row maximum m comes out first. z (N, V) -> (N,). Notebook 08."""
    m = z.max(1)
    return m + np.log(np.exp(z - m[:, None]).sum(1))


def cross_entropy_forward(logits, targets):
    """logits z (N, V), targets y (N,) -> loss = mean over scored rows of logsumexp(z_n) - z_n[y_n]
    (in float64), probs = softmax(z) (N, V). Rows with target IGNORE get probs but add no loss; with
    no scored row the loss is 0 (a sum over nothing, divided by max(n_scored, 1)). Notebook 08."""
    probs = softmax_forward(logits)
    scored = targets != IGNORE
    z = logits[scored].astype(np.float64)
    total = np.sum(logsumexp(z) - z[np.arange(len(z)), targets[scored]])
    return float(total / max(len(z), 1)), probs


def cross_entropy_backward(probs, targets):
    """dz = (probs - onehot(y)) / n_scored on scored rows, 0 on ignored rows. -> (N, V). Notebooks 08 and 09-10."""
    scored = targets != IGNORE
    dz = np.zeros_like(probs)
    dz[scored] = probs[scored]
    dz[np.flatnonzero(scored), targets[scored]] -= 1
    return dz / max(scored.sum(), 1)
