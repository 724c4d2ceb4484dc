"""Reference formulas in float64, the ones a checker compares a learner's function with and
`course_lib.yours` stands in with where an exercise is not done. Plain NumPy, one line of maths
each; the checkers' known mistakes are variations of these.

    split_heads(X, H)      (B, T, C) -> (B, H, T, C/H)       Exercise 4.1
    merge_heads(Y)         (B, H, T, D) -> (B, T, H D)       Exercise 4.1
    apply_causal_mask(S)   (..., T, T), -inf above the diagonal    Exercise 4.2
    softmax(x, axis)       row-wise, the row maximum subtracted    Exercise 3.1
    adam_step(p, g, m, v, t, lr, b1, b2, eps) -> (p, m, v)  Exercise 11.4
    block_backward(dy, cache, params, norm, activation) -> (dx, grads)   Exercise 10.2
"""
import numpy as np


def split_heads(X, H):
    B, T, C = X.shape
    return X.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)


def merge_heads(Y):
    B, H, T, D = Y.shape
    return Y.transpose(0, 2, 1, 3).reshape(B, T, H * D)


def apply_causal_mask(S):
    T = S.shape[-1]
    return np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, S)


def softmax(x, axis=-1):
    """Row-wise softmax in float64 (row maximum subtracted); a row of -inf alone is NaN, quietly."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def adam_moments(g, m, v, b1, b2):
    """The moments after one step: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2."""
    return b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g


def adam_step(p, g, m, v, t, lr, b1, b2, eps):
    """One Adam step at step t (from 1), eps outside the square root: (new p, new m, new v)."""
    m1, v1 = adam_moments(g, m, v, b1, b2)
    m_hat, v_hat = m1 / (1 - b1 ** t), v1 / (1 - b2 ** t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m1, v1


def block_backward(dy, cache, params, norm="post", activation="relu", kernels=None):
    """Exercise 10.2's contract by course_lib's Block.backward: a block's cache and its parameters
    under short names ("attn.w_q", ...) -> (dx, grads under the short names). kernels: course_lib's
    (the default) or their NumPy twins (kernels.numpy_ref)."""
    from .. import kernels as course_kernels
    from ..block import Block
    from ..config import ModelConfig
    B, T = cache["attn.qkv"].shape[:2]
    C, F = params["ffn.w1"].shape
    cfg = ModelConfig(vocab_size=2, seq_len=T, d_model=C, n_heads=cache["attn.weights"].shape[1], n_layers=1,
                      d_ff=F, norm=norm, activation=activation, dtype=str(dy.dtype))
    grads = {}
    block = Block(0, cfg, {"blocks.0." + k: v for k, v in params.items()}, kernels or course_kernels)
    dx = block.backward(dy, cache, grads)
    return dx, {k[len("blocks.0."):]: v for k, v in grads.items()}
