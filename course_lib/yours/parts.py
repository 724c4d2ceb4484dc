"""The learner's functions that make up the model, and course_lib's stand-ins for those not done.

A *part* is one function a learner writes in an exercise and the model runs. Each has a
stand-in of course_lib's, used when the exercise is not done (or broke): a kernel of
course_lib.kernels for the kernel-level parts, a reference for the helpers that other
learner functions call by name (split_heads, adam_step, ...).
"""
from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass

import numpy as np

from .. import optim
from ..checks import reference


@dataclass(frozen=True)
class Part:
    name: str        # the learner's function, as the exercise names it
    exercise: str    # "Exercise 2.1"
    role: str        # where it runs in the model
    checker: str     # the exercise's checker in course_lib.checks (the notebook's check cell calls it)


PARTS = (
    Part("embed", "Exercise 2.1", "embedding lookup", "check_embed"),
    Part("embed_backward", "Exercise 2.3", "embedding backward", "check_embed_backward"),
    Part("sinusoidal", "Exercise 2.4", "position table", "check_sinusoidal"),
    Part("softmax", "Exercise 3.1", "the loss's probabilities", "check_stable_softmax"),
    Part("split_heads", "Exercise 4.1", "inside multi-head attention", "check_split_merge_heads"),
    Part("merge_heads", "Exercise 4.1", "inside multi-head attention", "check_split_merge_heads"),
    Part("apply_causal_mask", "Exercise 4.2", "inside multi-head attention (causal model)",
         "check_causal_mask"),
    Part("multihead_attention", "Exercise 4.4", "attention layer forward", "check_multihead_attention"),
    Part("multihead_attention_backward", "Exercise 4.6", "attention layer backward (without 10.2)",
         "check_multihead_attention_backward"),
    Part("layernorm_forward", "Exercise 5.1", "LayerNorm forward", "check_layernorm_forward"),
    Part("layernorm_backward", "Exercise 5.3", "LayerNorm backward", "check_layernorm_backward"),
    Part("linear_backward", "Exercise 6.2", "FFN and head backward", "check_linear_backward"),
    Part("relu_backward", "Exercise 6.3", "ReLU backward (course model)", "check_relu_backward"),
    Part("gelu_forward", "Exercise 6.5", "GELU forward (GPT-style model)", "check_gelu"),
    Part("gelu_backward", "Exercise 6.5", "GELU backward (GPT-style model)", "check_gelu"),
    Part("block_forward", "Exercise 6.6", "each block's forward", "check_block_forward"),
    Part("cross_entropy", "Exercise 8.1", "the loss", "check_cross_entropy_forward"),
    Part("cross_entropy_backward", "Exercise 8.3", "the loss's gradient", "check_cross_entropy_backward"),
    Part("block_backward", "Exercise 10.2", "each block's backward", "check_block_backward"),
    Part("model_backward", "Exercise 10.3", "the whole backward", "check_model_backward"),
    Part("adam_step", "Exercise 11.4", "the update (--train)", "check_adam_step"),
    Part("clip_by_global_norm", "Exercise 11.5", "clipping (--train)", "check_clip_by_global_norm"),
    Part("train_loop", "Exercise 11.6", "the training loop (--train)", "check_train_loop"),
)
BY_NAME = {p.name: p for p in PARTS}

# exercises whose functions the model does not run, and why (the table says so)
ALONE = ("attention 3.2, softmax_backward 3.4 and attention_backward 3.6: 4.4 and 4.6 do their work for "
         "every head at once; tied_embedding_grad 7.2: model_backward adds the tied head's share itself; "
         "sgd_momentum_step 11.2: the loop uses Adam; the graph operations 9.4 and the engine 9.5: the model's "
         "backward is written out station by station")


def _adam_step(param, grad, m, v, t, lr, betas, eps):
    return reference.adam_step(param, grad, m, v, t, lr, betas[0], betas[1], eps)


def _clip_by_global_norm(grads, max_norm):
    norm = optim.global_norm(grads)
    scale = max_norm / norm if norm > max_norm else 1.0
    return {name: g * scale for name, g in grads.items()}, norm


def train_loop_in(names):
    """course_lib's training loop (Exercise 11.6's contract) calling adam_step and clip_by_global_norm
    from `names`: the learner's when they are done, course_lib's stand-ins otherwise."""
    def train_loop(model, backward, data, epochs, schedule, batch_size=32, max_norm=1.0, seed=0):
        tokens, targets = data
        rng = np.random.default_rng(seed)
        m = {k: np.zeros_like(p) for k, p in model.params.items()}
        v = {k: np.zeros_like(p) for k, p in model.params.items()}
        history, t = {"loss": [], "grad_norm": [], "lr": []}, 0
        for _ in range(epochs):
            order = rng.permutation(len(tokens))
            for lo in range(0, len(tokens), batch_size):
                batch = order[lo:lo + batch_size]
                t += 1
                loss = model.loss(tokens[batch], targets[batch])
                grads, norm = names["clip_by_global_norm"](backward(model), max_norm)
                lr = schedule(t)
                for k in model.params:
                    model.params[k], m[k], v[k] = names["adam_step"](model.params[k], grads[k], m[k], v[k], t, lr,
                                                                     (0.9, 0.999), 1e-8)
                history["loss"].append(float(loss))
                history["grad_norm"].append(float(norm))
                history["lr"].append(float(lr))
        return history
    return train_loop


def on_model_caches(block_backward):
    """The learner's block_backward (10.2) as their model_backward (10.3) calls it by name: on a block
    that `yours` ran, through the backend (which adapts its cache, and names the part that fails);
    on any other cache (their checker's), as it is."""
    def on_caches(dy, cache, params, *placement):      # (norm, activation), as the caller gave them
        backend = cache.get("yours") if isinstance(cache, dict) else None
        if backend is None:
            return block_backward(dy, cache, params, *placement)
        return backend.block_backward(dy, cache, params, *placement)
    on_caches.__name__ = getattr(block_backward, "__name__", "block_backward")
    return on_caches


@contextlib.contextmanager
def kernels_in_cells(fn, backend):
    """While fn runs, `cl.kernels` in the cells it was defined in is this backend: the block_backward
    of Exercise 10.2 calls `cl.kernels.layernorm_backward` and the rest, the learner's where they are
    done (5.3, 6.2, 6.3, 6.5), as the model's own blocks would."""
    import course_lib
    cells = getattr(fn, "__globals__", None)
    if not isinstance(cells, dict) or cells.get("cl") is not course_lib:
        yield
        return
    cells["cl"] = _CourseLibOn(backend)
    try:
        yield
    finally:
        cells["cl"] = course_lib


class _CourseLibOn(types.ModuleType):
    """course_lib, with `kernels` the learner's backend."""

    def __init__(self, backend):
        super().__init__("course_lib")
        self.kernels = backend

    def __getattr__(self, name):
        import course_lib
        return getattr(course_lib, name)


# course_lib's versions of the helpers a learner's function may call by name
HELPERS = {"split_heads": reference.split_heads, "merge_heads": reference.merge_heads,
           "apply_causal_mask": reference.apply_causal_mask,
           "adam_step": _adam_step, "clip_by_global_norm": _clip_by_global_norm}
