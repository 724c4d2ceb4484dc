"""One transformer block: attention and FFN, each inside a residual and a LayerNorm.

    Post-LN (the paper's Add & Norm):  x = LN1(x + Attn(x));   x = LN2(x + FFN(x))
    Pre-LN (GPT-2):                    x = x + Attn(LN1(x));   x = x + FFN(LN2(x))

Activations are 2-D, (N, C) with N = B * T. Each station calls one kernel pair,
and forward keeps what backward needs in a dict under names (`saved`):

    input, output (N, C)            the block's input and output
    ln1.xhat (N, C), ln1.rstd (N,)  LayerNorm 1 (ln2 alike)
    attn.x (N, C)                   what attention read, attn.w_qkv (C, 3C) its weights side by side,
    attn.qkv (B, T, 3C)             Q, K, V,  attn.weights (B, H, T, T),  attn.heads (N, C)
    ffn.x (N, C), ffn.h (N, F)      FFN input, hidden pre-activation,  ffn.a (N, F) after ReLU/GELU
    rows                            the scored rows (below), or None

Scored rows: when the loss reads only some positions, the last block computes attention
for those query rows only (keys and values still come from every position), and
returns (M, C): everything after it works per position.
"""
import numpy as np

from .kernels.machinery import column_block, join_columns


class Block:
    """Block i of a model: block = Block(i, config, params, kernels); y, saved = block.forward(x, B, T).

    Its parameters are params["blocks.{i}.attn.w_q"] and so on; their gradients go into grads under the same names.
    """

    def __init__(self, i, config, params, kernels):
        self.prefix = f"blocks.{i}."
        self.config, self.params, self.kernels = config, params, kernels

    # ----- the block: the two lines of maths, forward and back ------------------------
    def forward(self, x, B, T, rows=None):
        """x (N, C) -> y (N, C), or (M, C) at `rows`; and saved, the dict backward reads."""
        cfg, s = self.config, {"input": x, "rows": rows}
        post = cfg.norm == "post"
        if cfg.use_attention:
            if post:    # x = LN1(x + Attn(x))
                x = self.layernorm("ln1", self.residual(x, self.attention(x, B, T, rows, s), rows), s)
            else:       # x = x + Attn(LN1(x))
                x = self.residual(x, self.attention(self.layernorm("ln1", x, s), B, T, rows, s), rows)
        elif rows is not None:
            x = x[rows]
        if cfg.use_ffn:
            if post:    # x = LN2(x + FFN(x))
                x = self.layernorm("ln2", self.residual(x, self.ffn(x, s)), s)
            else:       # x = x + FFN(LN2(x))
                x = self.residual(x, self.ffn(self.layernorm("ln2", x, s), s))
        s["output"] = x
        return x, s

    def backward(self, dy, s, grads):
        """dy (N, C) (or (M, C) at s["rows"]) -> dx (N, C); the parameters' gradients go into grads.

        The two lines again, last first. dy is always the gradient of the sublayer's output y.
        """
        cfg, rows = self.config, s["rows"]
        if dy.shape != s["output"].shape:   # the kernels index by the saved shapes
            raise ValueError(f"Block.backward: dy has shape {dy.shape}, but this block's output was "
                             f"{s['output'].shape}: is it the gradient of this block's output?")
        post = cfg.norm == "post"
        if cfg.use_ffn:
            if post:    # y = LN2(r),  r = x + FFN(x)
                dr = self.layernorm_backward("ln2", dy, s, grads)
                d_skip, d_f = self.residual_backward(dr)
                dy = self.add_skip(self.ffn_backward(d_f, s, grads), d_skip)
            else:       # y = x + FFN(u),  u = LN2(x)
                d_skip, d_f = self.residual_backward(dy)
                du = self.ffn_backward(d_f, s, grads)
                dy = self.add_skip(self.layernorm_backward("ln2", du, s, grads), d_skip)
        if cfg.use_attention:
            if post:    # y = LN1(r),  r = x + Attn(x)
                dr = self.layernorm_backward("ln1", dy, s, grads)
                d_skip, d_f = self.residual_backward(dr)
                dy = self.add_skip(self.attention_backward(d_f, s, grads), d_skip, rows)
            else:       # y = x + Attn(u),  u = LN1(x)
                d_skip, d_f = self.residual_backward(dy)
                du = self.attention_backward(d_f, s, grads)
                dy = self.add_skip(self.layernorm_backward("ln1", du, s, grads), d_skip, rows)
        elif rows is not None:      # y = x[rows]: the gradient goes back to those rows, zeros elsewhere
            dy = scatter_rows(dy, rows, s["input"].shape[0])
        return dy

    # ----- residual: y = x + f(x) ---------------------------------------------------
    def residual(self, x, fx, rows=None):
        """x + f(x) (x[rows] + f(x) when f returned only those rows); f(x) alone without residuals."""
        if not self.config.use_residual:
            return fx
        return self.kernels.residual_forward(x if rows is None else x[rows], fx)

    def residual_backward(self, dy):
        """-> (d_skip, d_f): the gradient goes down both paths (d_skip None without residuals)."""
        return self.kernels.residual_backward(dy) if self.config.use_residual else (None, dy)

    @staticmethod
    def add_skip(dx, d_skip, rows=None):
        """x's gradient: what came back through f, plus the skip path's (at `rows` if only those were kept)."""
        if d_skip is not None:      # dx is a new array from the kernels: add in place
            if rows is None:
                dx += d_skip
            else:
                dx[rows] += d_skip  # rows are distinct
        return dx

    # ----- LayerNorm ----------------------------------------------------------------
    def layernorm(self, name, x, s):
        """LN `name` ("ln1", "ln2"): x (N, C) -> y (N, C); x itself when the model has no LayerNorm."""
        if not self.config.use_layernorm:
            return x
        params, ln = self.params, self.prefix + name
        y, s[name + ".xhat"], s[name + ".rstd"] = self.kernels.layernorm_forward(
            x, params[ln + ".gamma"], params[ln + ".beta"], self.config.ln_eps)
        return y

    def layernorm_backward(self, name, dy, s, grads):
        if not self.config.use_layernorm:
            return dy
        ln = self.prefix + name
        dx, grads[ln + ".gamma"], grads[ln + ".beta"] = self.kernels.layernorm_backward(
            dy, s[name + ".xhat"], s[name + ".rstd"], self.params[ln + ".gamma"])
        return dx

    # ----- multi-head attention -----------------------------------------------------
    def attention(self, x, B, T, rows, s):
        """x (N, C) -> [Q K V] = x W_qkv (+ b) -> heads = softmax(Q K^T / sqrt(D)) V -> heads W_o (+ b_o).

        Q, K, V at all N positions; the heads and the output projection only at `rows` (all if None).
        """
        params, at = self.params, self.prefix + "attn."
        w_qkv = join_columns(params[at + "w_q"], params[at + "w_k"], params[at + "w_v"])
        b_qkv = None
        if self.config.attn_bias:
            b_qkv = np.concatenate([params[at + "b_q"], params[at + "b_k"], params[at + "b_v"]])
        qkv = self.kernels.linear_forward(x, w_qkv, b_qkv).reshape(B, T, -1)
        heads, att = self.heads(qkv, rows)
        s.update({"attn.x": x, "attn.w_qkv": w_qkv, "attn.qkv": qkv, "attn.weights": att, "attn.heads": heads})
        return self.kernels.linear_forward(heads, params[at + "w_o"], params.get(at + "b_o"))

    def attention_backward(self, dy, s, grads):
        k, at = self.kernels, self.prefix + "attn."
        bias, C = self.config.attn_bias, self.config.d_model
        dheads, grads[at + "w_o"], db_o = k.linear_backward(dy, s["attn.heads"], self.params[at + "w_o"], bias)
        dqkv = self.heads_backward(dheads, s["attn.qkv"], s["attn.weights"], s["rows"])
        dx, dw_qkv, db_qkv = k.linear_backward(dqkv, s["attn.x"], s["attn.w_qkv"], bias)   # [Q K V] = x W_qkv
        for j, w in enumerate("qkv"):
            grads[at + "w_" + w] = column_block(dw_qkv, j * C, (j + 1) * C)
            if bias:
                grads[at + "b_" + w] = db_qkv[j * C:(j + 1) * C].copy()
        if bias:
            grads[at + "b_o"] = db_o
        return dx

    def heads(self, qkv, rows):
        """qkv (B, T, 3C) -> heads (N, C), weights (B, H, T, T); at `rows`: (M, C), (M, H, T)."""
        H, causal = self.config.n_heads, self.config.causal
        if rows is not None:
            return self.kernels.attention_rows_forward(qkv, H, causal, rows)
        heads, att = self.kernels.attention_forward(qkv, H, causal)
        return heads.reshape(-1, heads.shape[2]), att

    def heads_backward(self, dheads, qkv, att, rows):
        """dheads (N, C) or (M, C) at rows -> dqkv (N, 3C)."""
        B, T = qkv.shape[:2]
        if rows is not None:
            dqkv = self.kernels.attention_rows_backward(dheads, qkv, att, rows)
        else:
            dqkv = self.kernels.attention_backward(dheads.reshape(B, T, -1), qkv, att, self.config.causal)
        return dqkv.reshape(B * T, -1)

    # ----- feed-forward: relu/gelu(x W1 + b1) W2 + b2 -------------------------------
    def ffn(self, x, s):
        """x (N, C) -> h = x W1 + b1 (N, F) -> a = act(h) -> a W2 + b2 (N, C)."""
        k, params, ff = self.kernels, self.params, self.prefix + "ffn."
        h = k.linear_forward(x, params[ff + "w1"], params[ff + "b1"])
        a = k.relu_forward(h) if self.config.activation == "relu" else k.gelu_forward(h)
        s.update({"ffn.x": x, "ffn.h": h, "ffn.a": a})
        return k.linear_forward(a, params[ff + "w2"], params[ff + "b2"])

    def ffn_backward(self, dy, s, grads):
        k, params, ff, h = self.kernels, self.params, self.prefix + "ffn.", s["ffn.h"]
        da, grads[ff + "w2"], grads[ff + "b2"] = k.linear_backward(dy, s["ffn.a"], params[ff + "w2"], True)
        dh = k.relu_backward(da, h) if self.config.activation == "relu" else k.gelu_backward(da, h, s["ffn.a"])
        dx, grads[ff + "w1"], grads[ff + "b1"] = k.linear_backward(dh, s["ffn.x"], params[ff + "w1"], True)
        return dx


def scatter_rows(d_rows, rows, n):
    """Gradient of x[rows]: d_rows (M, C) placed in zeros (n, C)."""
    full = np.zeros((n, d_rows.shape[1]), dtype=d_rows.dtype)
    full[rows] = d_rows
    return full
