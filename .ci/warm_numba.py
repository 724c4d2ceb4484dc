"""Compile course_lib's kernels for one dtype into Numba's cache: a training step of the course
model and of a small GPT-2-shaped one (pre-LN, GELU, learned positions, causal, tied head).

    python .ci/warm_numba.py float32

CI runs it for each dtype, beside the last installs, so that the test processes that start
together later load the kernels rather than each compiling them again.
"""
import sys

import numpy as np

import course_lib as cl

SMALL_GPT = cl.presets.gpt2(vocab_size=20, seq_len=8, d_model=32, n_heads=4, n_layers=2, d_ff=64)

for config in (cl.presets.deep_dive(), SMALL_GPT):
    net = cl.Transformer(config.replace(dtype=sys.argv[1]), seed=0)
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, size=(4, config.seq_len))
    net.loss(tokens, tokens)
    grads = net.backward()
    cl.optim.clip_grad_norm(grads, 1.0)
    cl.optim.Adam(net.params, lr=1e-3).step(grads)
