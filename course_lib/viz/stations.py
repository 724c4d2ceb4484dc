"""The stations the model diagrams draw (viz/architecture.py), with the names the code gives their
parameters and saved arrays, checked against a small model built with the same switches: a
station renamed in block.py or model.py fails here (DiagramError), not in a reader's head.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..config import ModelConfig


class DiagramError(RuntimeError):
    """A name drawn on a diagram that the model no longer has."""


@dataclass
class Station:
    part: str           # one of architecture.PARTS, or "block", "io", "gap"
    title: str
    params: tuple = ()  # names under this station's prefix in model.params
    saved: tuple = ()   # names in model.saved (the block's dict for block stations)
    note: str = ""
    reads: tuple | None = None  # what its backward reads, when not what it saved

    def lines(self, backward):
        """The box's text: title, then parameters (their gradients backward), then arrays."""
        out = [self.title]
        params = [p + "*" if p.endswith(".") else p for p in self.params]
        if params:
            out.append(("grads: " if backward else "params: ") + ", ".join(params))
        arrays = self.reads if backward and self.reads is not None else self.saved
        if arrays and self.part != "block":
            out.append(("reads: " if backward else "saves: ") + ", ".join(arrays))
        if self.note:
            out.append(self.note)
        return out


# ----- the names, as the code has them -----------------------------------------------------
def tiny(config: ModelConfig) -> ModelConfig:
    """The same switches at the smallest sizes: names depend on the switches only."""
    return config.replace(vocab_size=4, seq_len=2, d_model=config.n_heads, d_ff=2,
                          n_layers=min(config.n_layers, 1), dtype="float64")


def names(config: ModelConfig):
    """(params, model-level saved names, block-level saved names) of a model with these switches."""
    from ..model import Transformer     # viz is imported by the model's users, not the reverse

    m = Transformer(tiny(config), seed=0)
    tokens = np.zeros((1, 2), dtype=np.int64)
    m.loss(tokens, np.ones((1, 2), dtype=np.int64))
    saved = m.saved
    block = set(saved["blocks"][0]) if saved["blocks"] else set()
    return set(m.params), set(saved), block


def verified(stations, params, saved):
    """stations, after checking that every name on them is in params / saved (a name ending in
    "." is a prefix; blocks.{i}. is checked as blocks.0., the tiny model's one block)."""
    def has(name):
        name = re.sub(r"^blocks\.\d+\.", "blocks.0.", name)
        return any(p.startswith(name) for p in params) if name.endswith(".") else name in params

    for st in stations:
        missing = [p for p in st.params if not has(p)]
        missing += [s for s in st.saved if s not in saved]
        if missing:
            raise DiagramError(f"the diagram's station {st.title!r} names {', '.join(missing)}, "
                               f"which the model does not have: update course_lib/viz/architecture.py")
    return stations


def block_stations(cfg: ModelConfig):
    """The block's stations in forward order, and the forks: (stations, [(from_index, to_index)])."""
    act = cfg.activation.upper() if cfg.activation == "gelu" else "ReLU"
    attn = Station("attn", f"multi-head attention  (H = {cfg.n_heads}, D = {cfg.d_head}"
                           f"{', causal' if cfg.causal else ''})",
                   tuple(f"attn.w_{w}" for w in "qkvo") + (tuple(f"attn.b_{w}" for w in "qkvo")
                                                           if cfg.attn_bias else ()),
                   ("attn.x", "attn.w_qkv", "attn.qkv", "attn.weights", "attn.heads"))
    ffn = Station("ffn", f"feed-forward  (C = {cfg.d_model} → F = {cfg.d_ff} → C, {act})",
                  ("ffn.w1", "ffn.b1", "ffn.w2", "ffn.b2"), ("ffn.x", "ffn.h", "ffn.a"))
    out, forks = [Station("io", f"x  (N, C = {cfg.d_model}), block input", saved=("input",))], []
    for n, sub in ((1, attn), (2, ffn)):
        if not (cfg.use_attention if n == 1 else cfg.use_ffn):
            continue
        ln = [Station("ln", f"LN{n}  LayerNorm", (f"ln{n}.gamma", f"ln{n}.beta"),
                      (f"ln{n}.xhat", f"ln{n}.rstd"))] if cfg.use_layernorm else []
        fork = len(out) - 1
        out += ln + [sub] if cfg.norm == "pre" else [sub]
        if cfg.use_residual:
            out.append(Station("residual", "+"))
            forks.append((fork, len(out) - 1))
        if cfg.norm == "post":
            out += ln
    out.append(Station("io", "y  (N, C), block output", saved=("output",)))
    return out, forks


def model_stations(cfg: ModelConfig, shown_blocks):
    pos = {"learned": "+ P[:T], learned (pos_emb)", "sinusoidal": "+ P[:T], sinusoidal (fixed)",
           "none": "no positions"}[cfg.positional]
    out = [Station("io", f"token ids  (B, T = {cfg.seq_len})", saved=("tokens",)),
           Station("embed", f"embedding  E[tokens] {pos}",
                   ("tok_emb",) + (("pos_emb",) if cfg.positional == "learned" else ()),
                   ("embeddings",), reads=("tokens",),
                   note=f"E (V = {cfg.vocab_size}, C = {cfg.d_model})")]
    for i in shown_blocks:
        if i is None:
            out.append(Station("gap", "..."))
            continue
        last = " (in the loss: scored rows only)" if i == cfg.n_layers - 1 else ""
        out.append(Station("block", f"block {i}  ({cfg.norm}-LN){last}",
                           (f"blocks.{i}.",), ("blocks",)))
    if cfg.norm == "pre" and cfg.use_layernorm:
        out.append(Station("ln", "LN_f  final LayerNorm", ("ln_f.gamma", "ln_f.beta"),
                           ("ln_f.xhat", "ln_f.rstd")))
    head = (("tok_emb",), "logits = x E^T (tied to E)") if cfg.tie_embeddings else \
        (("head.w",) + (("head.b",) if cfg.head_bias else ()),
         "output head  logits = x W" + (" + b" if cfg.head_bias else ""))
    out.append(Station("head", f"{head[1]}  (M, V = {cfg.vocab_size})", head[0], ("final",)))
    out.append(Station("loss", "softmax + cross-entropy  → loss", saved=("probs", "targets")))
    return out
