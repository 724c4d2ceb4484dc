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
from ..exercises import EXERCISES


@dataclass(frozen=True)
class Part:
    name: str        # the learner's function, as the exercise names it
    exercise: str    # "Exercise 2.1"
    role: str        # where it runs in the model
    checker: str     # the exercise's checker in course_lib.checks (the notebook's check cell calls it)


# the registry's parts, in the course's order
PARTS = tuple(Part(part.name, ex.name, part.role, ex.checker) for ex in EXERCISES for part in ex.parts)
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
