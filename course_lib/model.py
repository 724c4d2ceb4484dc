"""The transformer: parameters, forward (keeps what backward needs, by name), loss, backward.

Data flows one way: embed -> blocks -> head -> loss, then back through the same
stations in reverse. Activations travel as 2-D arrays (N, C) with N = B * T.
Each station calls one kernel pair from `course_lib.kernels`; the block is in block.py.
"""
from functools import lru_cache

import numpy as np

from . import kernels as numba_kernels
from .block import Block, scatter_rows
from .config import ModelConfig
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
def _sinusoidal(n_positions, d_model, dtype, table=sinusoidal_table):
    table = table(n_positions, d_model, np.dtype(dtype))
    table.flags.writeable = False
    return table


class Transformer:
    """Transformer(config, seed=0, recompute=False, backend="numba").

    recompute=True keeps only each block's input and output during forward and runs the
    block again in backward: the same gradients, bit for bit, with less memory.
    backend="numpy" runs the same model on the plain NumPy kernels (kernels/numpy_ref.py).

    What backward needs is kept by name in one dict: 'tokens', 'embeddings' (N, C), 'blocks'
    (one dict per block, names in block.py), 'ln_f.xhat' / 'ln_f.rstd' (pre-LN), 'final' (the
    head's input), and after loss() 'probs' (N, V) and 'targets'. `cache` shows it as (B, T, ...) arrays.
    """

    def __init__(self, config, seed=0, recompute=False, backend="numba"):
        if not isinstance(config, ModelConfig):
            raise TypeError(f"Transformer needs a ModelConfig (e.g. cl.presets.deep_dive()), "
                            f"got {type(config).__name__}")
        if isinstance(backend, str) and backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}, or a learner's "
                             f"backend from course_lib.yours")
        if not isinstance(backend, str) and not hasattr(backend, "linear_forward"):
            raise TypeError(f"backend must be one of {', '.join(BACKENDS)} or a kernel backend (course_lib.yours), "
                            f"got {type(backend).__name__}")
        self.config = config
        self.recompute = bool(recompute)
        self.backend = backend
        self.params = init_params(config, seed)
        self._saved = None

    @property
    def kernels(self):
        """The kernels this model runs on: course_lib.kernels, kernels.numpy_ref, or a learner's backend."""
        return BACKENDS[self.backend] if isinstance(self.backend, str) else self.backend

    @property
    def blocks(self):
        block = getattr(self.kernels, "Block", Block)     # a learner's backend brings its own (course_lib.yours)
        return [block(i, self.config, self.params, self.kernels) for i in range(self.config.n_layers)]

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
        other._saved = None
        return other

    # ----- input checks --------------------------------------------------
    def check_inputs(self, tokens, targets):
        """Check tokens (B, T) and targets (B, T) against the model, as loss() does; ValueError or
        TypeError saying what is wrong. -> (tokens int64 (B, T), targets flat int64 (N,), scored rows)."""
        tokens = self.check_tokens(tokens)
        return (tokens, *self.check_targets(targets, tokens.shape))

    def check_tokens(self, tokens):
        """Token ids (B, T), or (T,) for one sequence, in 0..V-1 with T <= seq_len -> int64 (B, T)."""
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

    def check_targets(self, targets, shape):
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

    # ----- forward: embed -> blocks -> (ln_f) -> head ----------------------
    def _forward(self, tokens, rows=None):
        """tokens (B, T) -> logits (N, V); or (M, V) at the scored `rows` of the N = B*T positions."""
        k, params, cfg = self.kernels, self.params, self.config
        B, T = tokens.shape
        s = {"tokens": tokens, "rows": rows, "recompute": self.recompute}
        x = k.embedding_forward(tokens, params["tok_emb"], self._positions()).reshape(B * T, cfg.d_model)
        s["embeddings"] = x                                                 # x = E[tokens] + P[:T]
        x = self._blocks_forward(x, B, T, rows, s)
        if "ln_f.gamma" in params:                                           # pre-LN: x = LN_f(x)
            x, s["ln_f.xhat"], s["ln_f.rstd"] = k.layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"],
                                                                    cfg.ln_eps)
        s["final"] = x
        logits = k.linear_forward(x, self._head_weight(), params.get("head.b"))  # logits = x W_head (+ b)
        self._saved = s
        return logits

    def _positions(self):
        cfg = self.config
        if cfg.positional == "learned":
            return self.params["pos_emb"]
        if cfg.positional == "sinusoidal":
            return _sinusoidal(cfg.seq_len, cfg.d_model, cfg.dtype, self.kernels.sinusoidal_table)
        return None

    def _head_weight(self):
        return self.params["tok_emb"].T if self.config.tie_embeddings else self.params["head.w"]

    def _blocks_forward(self, x, B, T, rows, s):
        """x through every block; s["blocks"][i] is what block i saved. Only the last block is told
        the scored rows: everything after it works per position. Recompute: keep input and output."""
        s["blocks"] = []
        for i, block in enumerate(self.blocks):
            last = i == self.config.n_layers - 1
            x, saved = block.forward(x, B, T, rows if last else None)
            if self.recompute:
                saved = {"input": saved["input"], "output": x, "rows": saved["rows"]}
            s["blocks"].append(saved)
        if not s["blocks"] and rows is not None:      # no blocks: pick the scored rows here
            x = x[rows]
        return x

    def forward(self, tokens):
        """tokens int (B, T) -> logits (B, T, V)."""
        tokens = self.check_tokens(tokens)
        return self._forward(tokens).reshape(*tokens.shape, self.config.vocab_size)

    __call__ = forward

    def scored_logits(self, tokens, targets):
        """Logits at the scored positions only (targets != -100): (M, V), and their targets (M,).
        The last block runs only at those positions (everything after attention works per position)."""
        tokens, targets, rows = self.check_inputs(tokens, targets)
        if len(rows) == targets.size:
            rows = None                 # every position is scored
        return self._forward(tokens, rows), (targets if rows is None else targets[rows])

    def loss(self, tokens, targets):
        """Mean cross-entropy over targets != -100. Keeps what backward() needs."""
        logits, scored = self.scored_logits(tokens, targets)
        loss, probs = self.kernels.cross_entropy_forward(logits, scored)
        self._saved.update({"probs": probs, "targets": scored})
        return float(loss)

    # ----- backward: loss -> head -> (ln_f) -> blocks -> embed -------------
    def backward(self):
        """Gradients of the last loss() for every parameter: dict with the keys and shapes of params."""
        s = self._saved
        if s is None or "probs" not in s:
            raise ValueError("backward() needs a loss: call model.loss(tokens, targets) first "
                             "(forward() alone does not define one)")
        k, params, cfg = self.kernels, self.params, self.config
        B, T = s["tokens"].shape
        grads = {}
        dlogits = k.cross_entropy_backward(s["probs"], s["targets"])
        dx = self._head_backward(dlogits, s["final"], grads)
        if "ln_f.gamma" in params:
            dx, grads["ln_f.gamma"], grads["ln_f.beta"] = k.layernorm_backward(dx, s["ln_f.xhat"], s["ln_f.rstd"],
                                                                               params["ln_f.gamma"])
        dx = self._blocks_backward(dx, B, T, s, grads)
        head_share = grads["tok_emb"] if cfg.tie_embeddings else None   # tied: the token rows add into it
        grads["tok_emb"], d_pos = k.embedding_backward(s["tokens"], dx.reshape(B, T, cfg.d_model), cfg.vocab_size,
                                                       head_share)
        if cfg.positional == "learned":
            grads["pos_emb"] = np.zeros_like(params["pos_emb"])
            grads["pos_emb"][:T] = d_pos
        return {name: grads[name] for name in params}

    def _head_backward(self, dlogits, x, grads):
        """logits = x W (+ b) -> dx; dW, db into grads. Tied, W = E^T: dx = dlogits E, and
        dE = dlogits^T x comes out in E's (V, C) layout (kept in grads["tok_emb"] for now)."""
        k, params = self.kernels, self.params
        if self.config.tie_embeddings:
            grads["tok_emb"] = k.linear_forward(dlogits.T, x, None)
            return k.linear_forward(dlogits, params["tok_emb"], None)
        dx, grads["head.w"], db = k.linear_backward(dlogits, x, params["head.w"], "head.b" in params)
        if "head.b" in params:
            grads["head.b"] = db
        return dx

    def _blocks_backward(self, dx, B, T, s, grads):
        """The blocks in reverse. Recompute: run each block again from its input first."""
        for block, saved in reversed(list(zip(self.blocks, s["blocks"]))):
            if s["recompute"]:
                _, saved = block.forward(saved["input"], B, T, saved["rows"])
            dx = block.backward(dx, saved, grads)
        if not s["blocks"] and s["rows"] is not None:   # no blocks: the scored rows were picked after embed
            dx = scatter_rows(dx, s["rows"], B * T)
        return dx

    # ----- what plots and notebooks read -----------------------------------
    @property
    def saved(self):
        """What backward() reads, as the last forward/loss stored it (None before any): a dict
        with 'tokens', 'embeddings', 'blocks' (one dict per block, under the names of block.py),
        and after a loss 'final', 'probs', 'targets', 'rows'. Read it; do not change it."""
        return self._saved

    @property
    def cache(self):
        """Named activations of the last forward/loss: 'tokens', 'embeddings' (B, T, C),
        'blocks.{i}.input' / '.output' (B, T, C), 'blocks.{i}.attn.weights' (B, H, T, T),
        'final' (B, T, C). Attention weights are absent in recompute mode; after a loss() that
        scores only some positions, the last block ran only there, so its output, its attention
        weights and 'final' are left out (forward() or attention() gives them all)."""
        s = self._saved
        if s is None:
            return {}
        B, T = s["tokens"].shape
        out = {"tokens": s["tokens"], "embeddings": s["embeddings"].reshape(B, T, -1)}
        for i, saved in enumerate(s["blocks"]):
            out[f"blocks.{i}.input"] = saved["input"].reshape(B, T, -1)
            if saved["rows"] is None:
                out[f"blocks.{i}.output"] = saved["output"].reshape(B, T, -1)
                if "attn.weights" in saved:
                    out[f"blocks.{i}.attn.weights"] = saved["attn.weights"]
        if s["rows"] is None:
            out["final"] = s["final"].reshape(B, T, -1)
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
