"""The transformer: parameters, forward (keeps a tape), loss, backward.

Data flows one way: embed -> blocks -> head -> loss, then back through the same
stations in reverse. Activations travel as 2-D arrays (N, C) with N = B * T.
Each station calls one kernel pair from `course_lib.kernels`.
"""
from functools import lru_cache

import numpy as np

from .config import ModelConfig
from . import kernels as numba_kernels
from .kernels import IGNORE, numpy_ref, sinusoidal_table

BACKENDS = {"numba": numba_kernels, "numpy": numpy_ref}


def init_params(config, seed=0):
    """Fresh parameters (dict name -> array), drawn from np.random.default_rng(seed).

    Weights of a layer with fan-in n are N(0, 1/n), biases and LayerNorm beta 0, gamma 1.
    Token (and learned position) embeddings are N(0, 1); when tied to the output
    layer they get its N(0, 1/C) scale instead.
    """
    cfg = config
    C, F, V = cfg.d_model, cfg.d_ff, cfg.vocab_size
    rng = np.random.default_rng(seed)
    emb_std = C ** -0.5 if cfg.tie_embeddings else 1.0
    p = {"tok_emb": rng.normal(0.0, emb_std, (V, C))}
    if cfg.positional == "learned":
        p["pos_emb"] = rng.normal(0.0, emb_std, (cfg.seq_len, C))

    def layernorm(name):
        if cfg.use_layernorm:
            p[name + ".gamma"] = np.ones(C)
            p[name + ".beta"] = np.zeros(C)

    for i in range(cfg.n_layers):
        b = f"blocks.{i}."
        if cfg.use_attention:
            for w in "qkvo":
                p[f"{b}attn.w_{w}"] = rng.normal(0.0, C ** -0.5, (C, C))
            if cfg.attn_bias:
                for w in "qkvo":
                    p[f"{b}attn.b_{w}"] = np.zeros(C)
            layernorm(b + "ln1")
        if cfg.use_ffn:
            p[b + "ffn.w1"] = rng.normal(0.0, C ** -0.5, (C, F))
            p[b + "ffn.b1"] = np.zeros(F)
            p[b + "ffn.w2"] = rng.normal(0.0, F ** -0.5, (F, C))
            p[b + "ffn.b2"] = np.zeros(C)
            layernorm(b + "ln2")
    if cfg.norm == "pre":
        layernorm("ln_f")
    if not cfg.tie_embeddings:
        p["head.w"] = rng.normal(0.0, C ** -0.5, (C, V))
        if cfg.head_bias:
            p["head.b"] = np.zeros(V)
    return {k: np.ascontiguousarray(v, dtype=cfg.dtype) for k, v in p.items()}


@lru_cache(maxsize=8)
def _sinusoidal(n_positions, d_model, dtype):
    table = sinusoidal_table(n_positions, d_model, np.dtype(dtype))
    table.flags.writeable = False
    return table


class Transformer:
    """Transformer(config, seed=0, recompute=False, backend="numba").

    recompute=True stores only each block's input during forward and re-runs the
    block in backward: the same gradients, bit for bit, with less memory.
    backend="numpy" runs the same model on plain NumPy kernels (the simple path).
    """

    def __init__(self, config, seed=0, recompute=False, backend="numba"):
        if not isinstance(config, ModelConfig):
            raise TypeError(f"Transformer needs a ModelConfig (e.g. cl.presets.deep_dive()), got {type(config).__name__}")
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
        self.config = config
        self.recompute = bool(recompute)
        self.backend = backend
        self.params = init_params(config, seed)
        self._tape = None
        self._loss_tape = None

    # ----- sizes ---------------------------------------------------------
    @property
    def k(self):
        """The kernel module this model runs on."""
        return BACKENDS[self.backend]

    @property
    def dtype(self):
        return np.dtype(self.config.dtype)

    @property
    def n_params(self):
        return int(sum(v.size for v in self.params.values()))

    def astype(self, dtype):
        """A copy of this model with config and parameters in `dtype` ('float32' or 'float64')."""
        other = Transformer.__new__(Transformer)
        other.config = self.config.replace(dtype=str(np.dtype(dtype)))
        other.recompute = self.recompute
        other.backend = self.backend
        other.params = {k: v.astype(dtype, copy=True) for k, v in self.params.items()}
        other._tape = other._loss_tape = None
        return other

    # ----- input checks --------------------------------------------------
    def _check_tokens(self, tokens):
        cfg = self.config
        tokens = np.asarray(tokens)
        if tokens.dtype.kind not in "iu":
            raise TypeError(f"tokens must be integer ids in 0..{cfg.vocab_size - 1}, got dtype {tokens.dtype}")
        if tokens.ndim == 1:
            tokens = tokens[None, :]
        if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
            raise ValueError(f"tokens must have shape (batch, time) with both sizes >= 1, got {tokens.shape}")
        if tokens.shape[1] > cfg.seq_len:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds the model's seq_len = {cfg.seq_len}")
        ids = np.ascontiguousarray(tokens, dtype=np.int64)
        bad = numba_kernels.first_out_of_range(ids, cfg.vocab_size)
        if bad >= 0:
            where = tuple(int(i) for i in np.unravel_index(bad, tokens.shape))
            raise ValueError(f"token id {int(tokens[where])} at position {where} is out of range; "
                             f"allowed ids: 0..{cfg.vocab_size - 1}")
        return ids

    def _check_targets(self, targets, shape):
        """-> the targets as flat int64 (N,), and the positions that are scored (target != IGNORE)."""
        V = self.config.vocab_size
        targets = np.asarray(targets)
        if targets.dtype.kind not in "iu":
            raise TypeError(f"targets must be integer ids (or {IGNORE} for 'not scored'), got dtype {targets.dtype}")
        if targets.ndim == 1 and len(shape) == 2 and shape[0] == 1:
            targets = targets[None, :]
        if targets.shape != shape:
            raise ValueError(f"targets have shape {targets.shape}, but tokens have shape {shape}: they must match")
        flat = np.ascontiguousarray(targets, dtype=np.int64).ravel()
        rows, bad = numba_kernels.scored_rows(flat, V)
        if bad >= 0:
            where = tuple(int(i) for i in np.unravel_index(bad, targets.shape))
            raise ValueError(f"target {int(targets[where])} at position {where} is out of range; "
                             f"allowed: 0..{V - 1}, or {IGNORE} for 'not scored'")
        if len(rows) == 0:
            raise ValueError(f"every target is {IGNORE}: there is nothing to score")
        return flat, rows

    # ----- stations ------------------------------------------------------
    def _positions(self):
        cfg = self.config
        if cfg.positional == "learned":
            return self.params["pos_emb"]
        if cfg.positional == "sinusoidal":
            return _sinusoidal(cfg.seq_len, cfg.d_model, cfg.dtype)
        return None

    def _layernorm_forward(self, name, x):
        if not self.config.use_layernorm:
            return x, None
        y, xhat, rstd = self.k.layernorm_forward(x, self.params[name + ".gamma"], self.params[name + ".beta"],
                                                 self.config.ln_eps)
        return y, (xhat, rstd)

    def _layernorm_backward(self, name, dy, tape, grads):
        if tape is None:
            return dy
        dx, grads[name + ".gamma"], grads[name + ".beta"] = self.k.layernorm_backward(
            dy, tape[0], tape[1], self.params[name + ".gamma"])
        return dx

    def _attention_forward(self, prefix, x, B, T, rows=None):
        """Q, K, V at all N positions; attention and output projection only from the query `rows` (all if None)."""
        P, cfg = self.params, self.config
        w_qkv = np.concatenate([P[prefix + "w_q"], P[prefix + "w_k"], P[prefix + "w_v"]], axis=1)
        b_qkv = np.concatenate([P[prefix + "b_q"], P[prefix + "b_k"], P[prefix + "b_v"]]) if cfg.attn_bias else None
        qkv = self.k.linear_forward(x, w_qkv, b_qkv)
        if rows is None:
            heads, att = self.k.attention_forward(qkv.reshape(B, T, -1), cfg.n_heads, cfg.causal)
            heads = heads.reshape(B * T, -1)
        else:
            heads, att = self.k.attention_rows_forward(qkv.reshape(B, T, -1), cfg.n_heads, cfg.causal, rows)
        y = self.k.linear_forward(heads, P[prefix + "w_o"], P.get(prefix + "b_o"))
        return y, (x, w_qkv, qkv, att, heads, rows)

    def _attention_backward(self, prefix, dy, tape, grads):
        x, w_qkv, qkv, att, heads, rows = tape
        bias = self.config.attn_bias
        T = att.shape[-1]
        B = x.shape[0] // T
        dheads, grads[prefix + "w_o"], db_o = self.k.linear_backward(dy, heads, self.params[prefix + "w_o"], bias)
        if rows is None:
            dqkv = self.k.attention_backward(dheads.reshape(B, T, -1), qkv.reshape(B, T, -1), att)
        else:
            dqkv = self.k.attention_rows_backward(dheads, qkv.reshape(B, T, -1), att, rows)
        dqkv = dqkv.reshape(B * T, -1)
        dx, dw_qkv, db_qkv = self.k.linear_backward(dqkv, x, w_qkv, bias)
        C = x.shape[1]
        for j, w in enumerate("qkv"):
            grads[prefix + "w_" + w] = np.ascontiguousarray(dw_qkv[:, j * C:(j + 1) * C])
            if bias:
                grads[prefix + "b_" + w] = db_qkv[j * C:(j + 1) * C].copy()
        if bias:
            grads[prefix + "b_o"] = db_o
        return dx

    def _ffn_forward(self, prefix, x):
        P = self.params
        h = self.k.linear_forward(x, P[prefix + "w1"], P[prefix + "b1"])
        a = self.k.relu_forward(h) if self.config.activation == "relu" else self.k.gelu_forward(h)
        y = self.k.linear_forward(a, P[prefix + "w2"], P[prefix + "b2"])
        return y, (x, h, a)

    def _ffn_backward(self, prefix, dy, tape, grads):
        x, h, a = tape
        P = self.params
        da, grads[prefix + "w2"], grads[prefix + "b2"] = self.k.linear_backward(dy, a, P[prefix + "w2"], True)
        dh = self.k.relu_backward(da, h) if self.config.activation == "relu" else self.k.gelu_backward(da, h)
        dx, grads[prefix + "w1"], grads[prefix + "b1"] = self.k.linear_backward(dh, x, P[prefix + "w1"], True)
        return dx

    @staticmethod
    def _scatter_rows(d_rows, rows, n):
        """Gradient of x[rows]: d_rows (M, C) placed in zeros (n, C)."""
        full = np.zeros((n, d_rows.shape[1]), dtype=d_rows.dtype)
        full[rows] = d_rows
        return full

    def _sublayer_forward(self, ln, f, x, rows=None):
        """Post-LN: y = LN(x + f(x)).  Pre-LN: y = x + f(LN(x)).  (No residual: drop the `x +`.)

        With rows, f sees all of x but returns only those rows, and so does the sublayer.
        """
        cfg = self.config
        skip = x if rows is None else x[rows]
        if cfg.norm == "post":
            fx, f_tape = f(x)
            r = self.k.residual_forward(skip, fx) if cfg.use_residual else fx
            y, ln_tape = self._layernorm_forward(ln, r)
        else:
            u, ln_tape = self._layernorm_forward(ln, x)
            fx, f_tape = f(u)
            y = self.k.residual_forward(skip, fx) if cfg.use_residual else fx
        return y, (f_tape, ln_tape, rows)

    def _sublayer_backward(self, ln, f_backward, dy, tape, grads):
        f_tape, ln_tape, rows = tape
        cfg = self.config
        if cfg.norm == "post":
            dr = self._layernorm_backward(ln, dy, ln_tape, grads)
            dskip, dfx = self.k.residual_backward(dr) if cfg.use_residual else (None, dr)
            dx = f_backward(dfx, f_tape, grads)
        else:
            dskip, dfx = self.k.residual_backward(dy) if cfg.use_residual else (None, dy)
            du = f_backward(dfx, f_tape, grads)
            dx = self._layernorm_backward(ln, du, ln_tape, grads)
        if dskip is not None:       # dx is a new array from the kernels above: add the skip path in place
            if rows is None:
                dx += dskip
            else:
                dx[rows] += dskip   # rows are distinct
        return dx

    def _block_forward(self, i, x, B, T, rows=None):
        """Block i on x (N, C). With rows (the last block, when the loss reads only those
        positions), the attention still reads every position but the block returns (M, C)."""
        p, cfg, tape = f"blocks.{i}.", self.config, {}
        if cfg.use_attention:
            x, tape["attn"] = self._sublayer_forward(
                p + "ln1", lambda u: self._attention_forward(p + "attn.", u, B, T, rows), x, rows)
        elif rows is not None:
            x, tape["select"] = x[rows], (rows, x.shape[0])
        if cfg.use_ffn:
            x, tape["ffn"] = self._sublayer_forward(p + "ln2", lambda u: self._ffn_forward(p + "ffn.", u), x)
        return x, tape

    def _block_backward(self, i, dy, tape, grads):
        p = f"blocks.{i}."
        if "ffn" in tape:
            dy = self._sublayer_backward(
                p + "ln2", lambda d, t, g: self._ffn_backward(p + "ffn.", d, t, g), dy, tape["ffn"], grads)
        if "attn" in tape:
            dy = self._sublayer_backward(
                p + "ln1", lambda d, t, g: self._attention_backward(p + "attn.", d, t, g), dy, tape["attn"], grads)
        if "select" in tape:
            dy = self._scatter_rows(dy, *tape["select"])
        return dy

    def _head_weight(self):
        return self.params["tok_emb"].T if self.config.tie_embeddings else self.params["head.w"]

    # ----- the whole model -----------------------------------------------
    def _forward(self, tokens, rows=None):
        """tokens (B, T) -> logits (M, V) for the chosen rows of the N = B*T positions (all if None).

        Only the last block needs to know the rows: everything after it is per position.
        """
        cfg, P = self.config, self.params
        B, T = tokens.shape
        x = self.k.embedding_forward(tokens, P["tok_emb"], self._positions()).reshape(B * T, cfg.d_model)
        tape = {"tokens": tokens, "embeddings": x, "blocks": [], "rows": rows}
        if cfg.n_layers == 0 and rows is not None:
            x = x[rows]
        for i in range(cfg.n_layers):
            x_in, last = x, i == cfg.n_layers - 1
            x, block_tape = self._block_forward(i, x, B, T, rows if last else None)
            tape["blocks"].append((x_in, None if self.recompute else block_tape, x, rows if last else None))
        if cfg.norm == "pre":
            x, tape["ln_f"] = self._layernorm_forward("ln_f", x)
        tape["head_in"] = x
        logits = self.k.linear_forward(x, self._head_weight(), P.get("head.b"))
        self._tape = tape
        return logits

    def forward(self, tokens):
        """tokens int (B, T) -> logits (B, T, V)."""
        tokens = self._check_tokens(tokens)
        self._loss_tape = None
        return self._forward(tokens).reshape(*tokens.shape, self.config.vocab_size)

    __call__ = forward

    def loss(self, tokens, targets):
        """Mean cross-entropy over targets != -100. Keeps the tape for backward()."""
        tokens = self._check_tokens(tokens)
        targets, rows = self._check_targets(targets, tokens.shape)
        if len(rows) == targets.size:
            rows = None
        logits = self._forward(tokens, rows)
        scored = targets if rows is None else targets[rows]
        loss, probs = self.k.cross_entropy_forward(logits, scored)
        self._loss_tape = (probs, scored)
        return float(loss)

    def backward(self):
        """Gradients of the last loss() for every parameter: dict with the keys and shapes of params."""
        if self._loss_tape is None or self._tape is None:
            raise ValueError("backward() needs a loss: call model.loss(tokens, targets) first "
                             "(forward() alone does not define one)")
        cfg, P, tape = self.config, self.params, self._tape
        probs, scored = self._loss_tape
        grads = {}
        dlogits = self.k.cross_entropy_backward(probs, scored)
        tied_d_emb = None
        if cfg.tie_embeddings:
            # logits = x @ E^T: dx = dlogits @ E, and dE = dlogits^T @ x comes out in E's (V, C) layout.
            # (Products through the kernels: one BLAS library, one thread pool.)
            dx = self.k.linear_forward(dlogits, P["tok_emb"], None)
            tied_d_emb = self.k.linear_forward(dlogits.T, tape["head_in"], None)
        else:
            dx, grads["head.w"], db = self.k.linear_backward(dlogits, tape["head_in"], P["head.w"], "head.b" in P)
            if "head.b" in P:
                grads["head.b"] = db
        if cfg.norm == "pre":
            dx = self._layernorm_backward("ln_f", dx, tape["ln_f"], grads)
        tokens = tape["tokens"]
        B, T = tokens.shape
        for i in reversed(range(cfg.n_layers)):
            x_in, block_tape, _, rows = tape["blocks"][i]
            if block_tape is None:
                _, block_tape = self._block_forward(i, x_in, B, T, rows)
            dx = self._block_backward(i, dx, block_tape, grads)
        if cfg.n_layers == 0 and tape["rows"] is not None:
            dx = self._scatter_rows(dx, tape["rows"], B * T)
        d_tok, d_pos = self.k.embedding_backward(tokens, dx.reshape(B, T, cfg.d_model), cfg.vocab_size)
        if tied_d_emb is not None:
            d_tok += tied_d_emb
        grads["tok_emb"] = d_tok
        if cfg.positional == "learned":
            grads["pos_emb"] = np.zeros_like(P["pos_emb"])
            grads["pos_emb"][:T] = d_pos
        return {k: grads[k] for k in P}

    # ----- what plots and notebooks read -----------------------------------
    @property
    def cache(self):
        """Named activations of the last forward/loss: 'embeddings' (B, T, C),
        'blocks.{i}.input' / '.output' (B, T, C), 'blocks.{i}.attn.weights' (B, H, T, T),
        'final' (B, T, C). Attention weights are absent in recompute mode; after a loss() that
        scores only some positions, the last block ran only there, so its output, its attention
        weights and 'final' are left out (forward() or attention() gives them all)."""
        if self._tape is None:
            return {}
        tape = self._tape
        B, T = tape["tokens"].shape
        shape3 = (B, T, -1)
        out = {"tokens": tape["tokens"], "embeddings": tape["embeddings"].reshape(shape3)}
        for i, (x_in, block_tape, x_out, rows) in enumerate(tape["blocks"]):
            out[f"blocks.{i}.input"] = x_in.reshape(shape3)
            if rows is None:
                out[f"blocks.{i}.output"] = x_out.reshape(shape3)
            if block_tape is not None and "attn" in block_tape and rows is None:
                out[f"blocks.{i}.attn.weights"] = block_tape["attn"][0][3]
        if tape["rows"] is None:
            out["final"] = tape["head_in"].reshape(shape3)
        return out

    def attention(self, tokens):
        """Attention weights per layer for `tokens`: list of (B, H, T, T) arrays."""
        was = self.recompute
        self.recompute = False
        try:
            self.forward(tokens)
        finally:
            self.recompute = was
        return [self.cache[f"blocks.{i}.attn.weights"] for i in range(self.config.n_layers)
                if f"blocks.{i}.attn.weights" in self.cache]

    def predict(self, tokens):
        """Most likely token id at the last position of each sequence: (B,)."""
        return self.forward(tokens)[:, -1].argmax(-1)
