"""A kernel backend made of a learner's functions: `cl.Transformer(cfg, backend=build(functions))`.

The model calls kernels (course_lib.kernels' names and signatures); the exercises have
signatures of their own. Each adapter below turns one into the other and checks what the
learner's function returned, so that a wrong shape is reported by exercise, not deep in
course_lib. Three exercises work above the kernels: the multi-head attention layer (4.4, 4.6,
with its projections), the block's forward (6.6) and the block's backward (10.2, which then
takes the place of 4.6 in the backward pass); `YourBlock` runs them.

Kernels without an exercise (linear forward, ReLU forward, the residual add) stay course_lib's.
"""
from __future__ import annotations

import numpy as np

from .. import kernels as course_kernels
from ..block import Block, scatter_rows
from .parts import BY_NAME, kernels_in_cells


class PartError(Exception):
    """A learner's function failed inside the model: `part` names it."""

    def __init__(self, part, message):
        super().__init__(f"{part} ({BY_NAME[part].exercise}): {message}")
        self.part, self.message = part, message


class Backend:
    """course_lib.kernels' functions, some replaced by adapters around a learner's functions.

    yours: the parts (function names) that are the learner's; every other kernel is course_lib's.
    """

    def __init__(self, functions: dict):
        for name in dir(course_kernels):
            if not name.startswith("_") and callable(getattr(course_kernels, name)):
                setattr(self, name, getattr(course_kernels, name))
        self.functions = dict(functions)
        self.yours = tuple(functions)
        self.last_part = None       # the learner's function that ran last (blamed for what follows)
        for kernel, adapter in _ADAPTERS.items():
            if all(part in functions for part in _NEEDS[kernel]):
                setattr(self, kernel, adapter.__get__(self))
        self.Block = YourBlock

    def __repr__(self):
        return f"<course_lib.yours backend: {len(self.yours)} functions yours>"

    def call(self, part, *args):
        """The learner's `part`(*args); any exception becomes a PartError naming it."""
        self.last_part = part
        try:
            return self.functions[part](*args)
        except PartError:
            raise
        except Exception as e:  # the learner's code: whatever it raised, say which function
            why = f"raised {type(e).__name__}: {e}"
            if isinstance(e, NameError):
                why += " (only the exercises' own cells run here: define what the function uses in them)"
            raise PartError(_innermost_part(e.__traceback__) or part, why) from e

    def has(self, part):
        return part in self.functions

    def block_backward(self, dy, cache, params, norm="post", activation="relu"):
        """The learner's block_backward (10.2) on a block's cache as YourBlock keeps it: the rows its
        block_forward (6.6) picked after it spread back first; (dx, grads under the short names)."""
        if not self.has("block_backward"):
            raise PartError("model_backward", "it calls block_backward (Exercise 10.2), which failed in the model")
        if cache.get("picked") is not None:
            dy = scatter_rows(dy, cache["picked"], cache["input"].shape[0])
            cache = {**cache, "output": cache["full_output"], "picked": None}
        N, C = cache["input"].shape
        with kernels_in_cells(self.functions["block_backward"], self):
            dx, grads = _tuple("block_backward", self.call("block_backward", dy, cache, params, norm, activation), 2)
        if not isinstance(grads, dict) or set(grads) != set(params):
            raise PartError("block_backward", "returned grads " + (f"with the keys {sorted(grads)}" if isinstance(
                grads, dict) else f"as a {type(grads).__name__}") + " where the model needs one per parameter")
        return (_array("block_backward", dx, (N, C), dy.dtype, "returned dx of"),
                {k: _array("block_backward", g, params[k].shape, dy.dtype, f"returned grads[{k!r}] of")
                 for k, g in grads.items()})


def _innermost_part(tb):
    """The last of the learner's parts on the traceback (a learner's 11.6 calls their adam_step itself)."""
    part = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_name
        if name in BY_NAME and tb.tb_frame.f_code.co_filename.startswith("<"):   # compiled from a cell
            part = name
        tb = tb.tb_next
    return part


def _array(part, value, shape, dtype, what="returned"):
    """value as a C-contiguous array of `dtype` and `shape`, or a PartError saying what was wrong."""
    if isinstance(value, (tuple, list)) and not isinstance(value, np.ndarray):
        raise PartError(part, f"{what} a {type(value).__name__} of {len(value)} where the model needs one "
                              f"array of shape {shape}")
    try:
        array = np.asarray(value)
    except Exception as e:  # a learner's object NumPy cannot read
        raise PartError(part, f"{what} a {type(value).__name__} that is not an array ({e})") from e
    if array.shape != tuple(shape):
        raise PartError(part, f"{what} shape {array.shape} where the model needs {tuple(shape)}")
    if array.dtype.kind not in "fiu":
        raise PartError(part, f"{what} dtype {array.dtype} where the model needs {np.dtype(dtype)}")
    return np.ascontiguousarray(array, dtype=dtype)


def _tuple(part, value, n):
    if not isinstance(value, (tuple, list)) or len(value) != n:
        got = f"a {type(value).__name__} of {len(value)}" if isinstance(value, (tuple, list)) else \
            f"a {type(value).__name__}"
        raise PartError(part, f"returned {got} where its exercise asks for {n} values")
    return value


# ----- kernels: (self = the Backend), same signatures as course_lib.kernels --------------------
def embedding_forward(self, tokens, tok_emb, pos):
    B, T = tokens.shape
    x = _array("embed", self.call("embed", tokens, tok_emb), (B, T, tok_emb.shape[1]), tok_emb.dtype)
    return x if pos is None else x + pos[:T]


def embedding_backward(self, tokens, dx, vocab_size, d_tok=None):
    shape = (vocab_size, dx.shape[2])
    dE = _array("embed_backward", self.call("embed_backward", tokens, dx, vocab_size), shape, dx.dtype)
    if d_tok is not None:       # the tied head's share, added in place as course_lib's kernel does
        d_tok += dE
        dE = d_tok
    return dE, dx.sum(0)


def sinusoidal_table(self, n_positions, d_model, dtype=np.float64):
    return _array("sinusoidal", self.call("sinusoidal", n_positions, d_model), (n_positions, d_model), dtype)


def layernorm_forward(self, x, gamma, beta, eps):
    y, xhat, rstd = _tuple("layernorm_forward", self.call("layernorm_forward", x, gamma, beta, eps), 3)
    N, C = x.shape
    return (_array("layernorm_forward", y, (N, C), x.dtype, "returned y of"),
            _array("layernorm_forward", xhat, (N, C), x.dtype, "returned xhat of"),
            _array("layernorm_forward", np.reshape(rstd, -1) if np.size(rstd) == N else rstd, (N,), x.dtype,
                   "returned rstd of"))


def layernorm_backward(self, dy, xhat, rstd, gamma):
    dx, dgamma, dbeta = _tuple("layernorm_backward", self.call("layernorm_backward", dy, xhat, rstd, gamma), 3)
    return (_array("layernorm_backward", dx, dy.shape, dy.dtype, "returned dx of"),
            _array("layernorm_backward", dgamma, gamma.shape, dy.dtype, "returned dgamma of"),
            _array("layernorm_backward", dbeta, gamma.shape, dy.dtype, "returned dbeta of"))


def linear_backward(self, dy, x, w, has_bias):
    dx, dw, db = _tuple("linear_backward", self.call("linear_backward", dy, x, w), 3)
    return (_array("linear_backward", dx, x.shape, dy.dtype, "returned dx of"),
            _array("linear_backward", dw, w.shape, dy.dtype, "returned dW of"),
            _array("linear_backward", db, (dy.shape[1],), dy.dtype, "returned db of") if has_bias else None)


def relu_backward(self, dy, h):
    return _array("relu_backward", self.call("relu_backward", dy, h), h.shape, dy.dtype)


def gelu_forward(self, h):
    return _array("gelu_forward", self.call("gelu_forward", h), h.shape, h.dtype)


def gelu_backward(self, dy, h, y=None):
    return _array("gelu_backward", self.call("gelu_backward", dy, h), h.shape, dy.dtype)


def softmax_forward(self, x):
    return _array("softmax", self.call("softmax", x), x.shape, x.dtype)


def cross_entropy_forward(self, logits, targets):
    """The loss from the learner's cross_entropy; the probabilities backward reads from their
    softmax (or course_lib's)."""
    loss = self.call("cross_entropy", logits, targets)
    try:
        loss = float(np.asarray(loss).reshape(()))
    except (TypeError, ValueError):
        raise PartError("cross_entropy", f"returned {type(loss).__name__} {np.shape(loss)}: the exercise "
                                         "asks for one number, the mean loss") from None
    return loss, self.softmax_forward(logits)


def cross_entropy_backward(self, probs, targets):
    """The learner's cross_entropy_backward takes logits; log(probs) are logits (up to a constant per
    row, which softmax ignores), equal to the model's to rounding."""
    with np.errstate(divide="ignore"):
        logits = np.log(probs)
    return _array("cross_entropy_backward", self.call("cross_entropy_backward", logits, targets),
                  probs.shape, probs.dtype)


_ADAPTERS = {f.__name__: f for f in (embedding_forward, embedding_backward, sinusoidal_table, layernorm_forward,
                                     layernorm_backward, linear_backward, relu_backward, gelu_forward,
                                     gelu_backward, softmax_forward, cross_entropy_forward,
                                     cross_entropy_backward)}
_NEEDS = {"embedding_forward": ("embed",), "embedding_backward": ("embed_backward",),
          "sinusoidal_table": ("sinusoidal",), "softmax_forward": ("softmax",),
          "cross_entropy_forward": ("cross_entropy",), "cross_entropy_backward": ("cross_entropy_backward",)}
_NEEDS.update({k: (k,) for k in _ADAPTERS if k not in _NEEDS})


# ----- above the kernels: the attention layer (4.4, 4.6) and the block (6.6) ---------------------
class YourBlock(Block):
    """A block that runs the learner's multi-head attention layer and block forward when they are
    done (and the model is one they were written for: no attention biases; every sublayer)."""

    def _own_attention(self):
        k = self.kernels
        return k.has("multihead_attention") and k.has("multihead_attention_backward") and not self.config.attn_bias

    def _own_block(self):
        cfg = self.config
        return self.kernels.has("block_forward") and cfg.use_attention and cfg.use_ffn and cfg.use_residual \
            and cfg.use_layernorm

    def _own_block_backward(self):
        """The learner's block_backward (10.2) runs the blocks it was written for: no attention biases,
        every sublayer."""
        cfg = self.config
        return self.kernels.has("block_backward") and not cfg.attn_bias and cfg.use_attention and cfg.use_ffn \
            and cfg.use_residual and cfg.use_layernorm

    def forward(self, x, B, T, rows=None):
        if not self._own_block():
            y, s = super().forward(x, B, T, rows)
            s["yours"] = self.kernels           # the learner's model_backward hands this cache to their 10.2
            return y, s
        # the learner's block sees whole sequences; the scored rows are picked after it
        s = {"input": x, "rows": None}
        y = self.kernels.call("block_forward", x, lambda u: self.attention(u, B, T, None, s),
                              lambda u: self.ffn(u, s), lambda u: self.layernorm("ln1", u, s),
                              lambda u: self.layernorm("ln2", u, s), self.config.norm)
        y = _array("block_forward", y, x.shape, x.dtype)
        s["full_output"] = y
        s["picked"] = rows
        s["output"] = y if rows is None else y[rows]
        s["yours"] = self.kernels
        return s["output"], s

    def backward(self, dy, s, grads):
        if self._own_block_backward():
            prefix = self.prefix
            short = {n[len(prefix):]: v for n, v in self.params.items() if n.startswith(prefix)}
            dx, own = self.kernels.block_backward(dy, s, short, self.config.norm, self.config.activation)
            grads.update({prefix + n: g for n, g in own.items()})
            return dx
        if s.get("picked") is not None:
            if dy.shape != s["output"].shape:
                raise ValueError(f"Block.backward: dy has shape {dy.shape}, but this block's output was "
                                 f"{s['output'].shape}")
            dy = scatter_rows(dy, s["picked"], s["input"].shape[0])
            s = {**s, "output": s["full_output"], "picked": None}
        return super().backward(dy, s, grads)

    def attention(self, x, B, T, rows, s):
        if not self._own_attention():
            return super().attention(x, B, T, rows, s)
        p, at, C = self.params, self.prefix + "attn.", self.config.d_model
        H = self.config.n_heads
        out = _tuple("multihead_attention", self.kernels.call(
            "multihead_attention", x.reshape(B, T, C), p[at + "w_q"], p[at + "w_k"], p[at + "w_v"], p[at + "w_o"],
            H, self.config.causal), 2)
        y = _array("multihead_attention", out[0], (B, T, C), x.dtype, "returned y of").reshape(B * T, C)
        A = _array("multihead_attention", out[1], (B, H, T, T), x.dtype, "returned A of")
        s.update({"attn.x": x, "attn.layer": A})
        s.update(_attention_cache(x, A, p, at, rows))       # what a block_backward (10.2) reads
        return y if rows is None else y[rows]

    def attention_backward(self, dy, s, grads):
        if "attn.layer" not in s:
            return super().attention_backward(dy, s, grads)
        p, at, x, A = self.params, self.prefix + "attn.", s["attn.x"], s["attn.layer"]
        (B, H, T, _), C = A.shape, x.shape[1]
        if s["rows"] is not None:
            dy = scatter_rows(dy, s["rows"], B * T)
        ws = [p[at + "w_" + w] for w in "qkvo"]
        out = _tuple("multihead_attention_backward", self.kernels.call(
            "multihead_attention_backward", dy.reshape(B, T, C), x.reshape(B, T, C), *ws, A, H), 5)
        dx = _array("multihead_attention_backward", out[0], (B, T, C), x.dtype, "returned dx of")
        for w, g in zip("qkvo", out[1:]):
            grads[at + "w_" + w] = _array("multihead_attention_backward", g, (C, C), x.dtype, f"returned dW_{w} of")
        return dx.reshape(B * T, C)


def _attention_cache(x, A, p, at, rows):
    """course_lib's cache of an attention layer (attn.w_qkv, attn.qkv, attn.weights, attn.heads, at
    `rows` when given) from the learner's weights A (B, H, T, T) and course_lib's products."""
    B, H, T, _ = A.shape
    C = x.shape[1]
    w_qkv = np.concatenate([p[at + "w_q"], p[at + "w_k"], p[at + "w_v"]], axis=1)
    qkv = (x @ w_qkv).reshape(B, T, 3 * C)
    V = qkv[..., 2 * C:].reshape(B, T, H, C // H).transpose(0, 2, 1, 3)            # (B, H, T, D)
    heads = (A @ V).transpose(0, 2, 1, 3).reshape(B * T, C)
    weights = A
    if rows is not None:
        weights, heads = A.transpose(0, 2, 1, 3).reshape(B * T, H, T)[rows], heads[rows]
    return {"attn.w_qkv": w_qkv, "attn.qkv": qkv, "attn.weights": weights, "attn.heads": heads}


def build(functions: dict) -> Backend:
    """A backend from {part name: the learner's function} (parts left out stay course_lib's)."""
    unknown = set(functions) - set(BY_NAME)
    if unknown:
        raise ValueError(f"not parts of the model: {', '.join(sorted(unknown))}; parts: {', '.join(BY_NAME)}")
    return Backend(functions)


def model_backward(model):
    """The gradients of the model's last loss: the learner's model_backward (10.3) when its backend has
    it, else model.backward()."""
    k = model.kernels
    if isinstance(k, Backend) and k.has("model_backward"):
        grads = k.call("model_backward", model)
        if not isinstance(grads, dict) or set(grads) != set(model.params):
            raise PartError("model_backward", "returned "
                            + (f"keys {sorted(grads)}" if isinstance(grads, dict) else f"a {type(grads).__name__}")
                            + " where the model needs a dict with the keys of model.params")
        return {name: _array("model_backward", g, model.params[name].shape, model.params[name].dtype,
                             f"returned grads[{name!r}] of") for name, g in grads.items()}
    return model.backward()
