"""Sampling the next token from logits, and generating text with a trained character model.

    rng = np.random.default_rng(0)
    next_id = sample(logits, temperature=0.8, top_k=10, rng=rng)
    text = generate(model, vocab, "In the beginning", n_chars=200, temperature=0.8)
"""
import math

import numpy as np

from ..kernels.machinery import set_num_threads


def _check_sampling(temperature, top_k, vocab_size):
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating, np.integer)) \
            or not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0 (0: always the most likely), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer))
                              or not 1 <= top_k <= vocab_size):
        raise ValueError(f"top_k must be None (all tokens) or an integer in 1..{vocab_size}, got {top_k!r}")


def sample(logits, temperature=1.0, top_k=None, rng=None):
    """One token id drawn from softmax(logits / temperature), among the top_k largest logits only.

    logits (V,); temperature 0 (or top_k=1) gives the argmax; temperature > 1 flattens the
    distribution, < 1 sharpens it (notebook 08); top_k=None keeps all V. rng: np.random.Generator.
    -> int in 0..V-1. ValueError for a temperature < 0, a top_k outside 1..V, or logits not (V,).
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 1 or z.size == 0 or not np.all(np.isfinite(z)):
        raise ValueError(f"logits must be a 1-D array of finite numbers (V,), got shape {z.shape}")
    _check_sampling(temperature, top_k, z.size)
    if temperature == 0 or top_k == 1:
        return int(np.argmax(z))
    if top_k is not None and top_k < z.size:
        keep = np.argpartition(z, -top_k)[-top_k:]      # the k largest, exactly k even with ties
        kept = np.full_like(z, -np.inf)
        kept[keep] = z[keep]
        z = kept
    z = z / temperature
    p = np.exp(z - z.max())                             # -inf (left out) becomes probability 0
    p /= p.sum()
    rng = np.random.default_rng() if rng is None else rng
    return int(rng.choice(z.size, p=p))


def generate(model, vocab, prompt, n_chars, temperature=1.0, top_k=None, seed=0):
    """The prompt's continuation, n_chars characters, one at a time: each step feeds the last seq_len
    characters (prompt and what came so far) and samples from the logits at the last position.
    -> str (the continuation only). TextError for a prompt character the vocabulary lacks."""
    if not prompt:
        raise ValueError("the prompt is empty: give at least one character to continue")
    _check_sampling(temperature, top_k, len(vocab))
    ids = list(vocab.encode(prompt, what="the prompt"))
    rng, T = np.random.default_rng(seed), model.config.seq_len
    with set_num_threads(1):    # one row of T tokens: a second thread only spins (5 ms a step, not 26-49)
        for _ in range(n_chars):
            logits = model.forward(np.array(ids[-T:])[None])[0, -1]
            ids.append(sample(logits, temperature, top_k, rng))
    return vocab.decode(ids[len(prompt):])
