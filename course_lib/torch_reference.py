"""The same transformer in PyTorch eager, for tests and benchmarks (PyTorch is optional).

`TorchTransformer(model)` copies a course_lib model's parameters; `loss(tokens, targets)`
and the parameters' `.grad` then compare one to one with course_lib's.
`TorchTransformer(model, attention="sdpa")` computes attention with
F.scaled_dot_product_attention, as PyTorch users write it (the benchmarks' second anchor);
`tensor_loss` takes tensors, for torch.compile (the third).
"""
import math

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("course_lib.torch_reference needs PyTorch: pip install torch==2.13.0") from e

from .kernels import IGNORE, sinusoidal_table


class TorchTransformer:
    def __init__(self, model, attention="manual"):
        if attention not in ("manual", "sdpa"):
            raise ValueError(f"attention must be 'manual' or 'sdpa', got {attention!r}")
        self.attention = attention
        self.cfg = cfg = model.config
        dtype = getattr(torch, cfg.dtype)
        self.params = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in model.params.items()}
        self.pos = (torch.tensor(sinusoidal_table(cfg.seq_len, cfg.d_model), dtype=dtype)
                    if cfg.positional == "sinusoidal" else None)

    def parameters(self):
        return list(self.params.values())

    def _ln(self, name, x):
        if not self.cfg.use_layernorm:
            return x
        return F.layer_norm(x, (x.shape[-1],), self.params[name + ".gamma"], self.params[name + ".beta"],
                            self.cfg.ln_eps)

    def _attn(self, p, x):
        cfg, params = self.cfg, self.params
        B, T, C = x.shape
        H, D = cfg.n_heads, cfg.d_model // cfg.n_heads

        def proj(w):
            y = x @ params[p + "w_" + w]
            return y + params[p + "b_" + w] if cfg.attn_bias else y
        q, k, v = (proj(w).view(B, T, H, D).transpose(1, 2) for w in "qkv")
        if self.attention == "sdpa":
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=cfg.causal)
        else:
            s = q @ k.transpose(-1, -2) / math.sqrt(D)
            if cfg.causal:
                s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            heads = torch.softmax(s, dim=-1) @ v
        o = heads.transpose(1, 2).reshape(B, T, C) @ params[p + "w_o"]
        return o + params[p + "b_o"] if cfg.attn_bias else o

    def _ffn(self, p, x):
        params = self.params
        h = x @ params[p + "w1"] + params[p + "b1"]
        h = torch.relu(h) if self.cfg.activation == "relu" else F.gelu(h, approximate="tanh")
        return h @ params[p + "w2"] + params[p + "b2"]

    def _sublayer(self, ln, f, x):
        cfg = self.cfg
        if cfg.norm == "post":
            fx = f(x)
            return self._ln(ln, x + fx if cfg.use_residual else fx)
        fx = f(self._ln(ln, x))
        return x + fx if cfg.use_residual else fx

    def forward(self, tokens):
        return self.tensor_forward(torch.as_tensor(np.asarray(tokens, dtype=np.int64)))

    def tensor_forward(self, tokens):
        """tokens: an int64 tensor (B, T) -> logits (B, T, V)."""
        cfg, params = self.cfg, self.params
        T = tokens.shape[1]
        x = params["tok_emb"][tokens]
        if cfg.positional == "learned":
            x = x + params["pos_emb"][:T]
        elif cfg.positional == "sinusoidal":
            x = x + self.pos[:T]
        for i in range(cfg.n_layers):
            b = f"blocks.{i}."
            if cfg.use_attention:
                x = self._sublayer(b + "ln1", lambda u: self._attn(b + "attn.", u), x)
            if cfg.use_ffn:
                x = self._sublayer(b + "ln2", lambda u: self._ffn(b + "ffn.", u), x)
        if cfg.norm == "pre":
            x = self._ln("ln_f", x)
        if cfg.tie_embeddings:
            return x @ params["tok_emb"].T
        logits = x @ params["head.w"]
        return logits + params["head.b"] if "head.b" in params else logits

    def loss(self, tokens, targets):
        return self.tensor_loss(torch.as_tensor(np.asarray(tokens, dtype=np.int64)),
                                torch.as_tensor(np.asarray(targets, dtype=np.int64)))

    def tensor_loss(self, tokens, targets):
        """tokens, targets: int64 tensors (B, T) -> the mean cross-entropy (a scalar tensor)."""
        logits = self.tensor_forward(tokens)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)

    def grads(self):
        return {k: v.grad.detach().numpy() for k, v in self.params.items()}
