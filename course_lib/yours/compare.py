"""The learner's model against course_lib's: loss and gradients in float64, and a training run.

Two models, so that every part runs: the course model (post-LN, ReLU, sinusoidal positions) and a
GPT-style one (pre-LN, GELU, learned positions, causal, tied head), on 16 training problems.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from .. import optim, task, train
from ..config import presets
from ..kernels.machinery import set_num_threads, threads_for_model
from ..model import Transformer
from .backend import model_backward

MODELS = {
    "course model": dict(dtype="float64"),
    "GPT-style model": dict(dtype="float64", norm="pre", activation="gelu", positional="learned", causal=True,
                            tie_embeddings=True, head_bias=False),
}


def relative_error(got, want) -> float:
    """max |got - want| / max |want| (the difference itself where want is all zeros)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.max(np.abs(want)) if want.size else 0.0
    diff = np.max(np.abs(got - want)) if want.size else 0.0
    if not np.isfinite(diff):
        return float("inf")
    return float(diff / scale) if scale > 0 else float(diff)


@dataclass
class Comparison:
    """Relative errors of the learner's model against course_lib's, per model: 'loss' and each parameter."""
    errors: dict = field(default_factory=dict)     # model name -> {"loss": e, param: e, ...}

    @property
    def largest(self) -> float:
        return max((e for errs in self.errors.values() for e in errs.values()), default=0.0)

    def __str__(self):
        from ..gradcheck import magnitude
        names = list(self.errors)
        rows = list(dict.fromkeys(k for errs in self.errors.values() for k in errs))
        width = max(map(len, rows), default=4) + 2
        lines = ["float64 relative error against course_lib's (max |yours - course_lib's| / max |course_lib's|):",
                 " " * width + "".join(f"{n:>18}" for n in names)]
        for row in rows:
            cells = [magnitude(self.errors[n][row], below=1e-12) if row in self.errors[n] else "-" for n in names]
            lines.append(f"{row:<{width}}" + "".join(f"{c:>18}" for c in cells))
        lines.append(f"largest: {magnitude(self.largest, below=1e-12)}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def batch(n=16):
    tokens, targets = task.splits(0)["train"]
    return tokens[:n], targets[:n]


def compare(backend, seed=0) -> Comparison:
    """Loss and gradients of the learner's model (their backward when done) against course_lib's."""
    tokens, targets = batch()
    out = Comparison()
    for name, overrides in MODELS.items():
        cfg = presets.deep_dive(**overrides)
        ours, yours = Transformer(cfg, seed=seed), Transformer(cfg, seed=seed, backend=backend)
        want_loss, got_loss = ours.loss(tokens, targets), yours.loss(tokens, targets)
        want, got = ours.backward(), model_backward(yours)
        errors = {"loss": relative_error(got_loss, want_loss)}
        errors.update({p: relative_error(got[p], want[p]) for p in want})
        out.errors[name] = errors
    return out


@dataclass
class Run:
    test_acc: float
    steps: int
    seconds: float
    history: dict


def train_course_model(loop, backend, epochs=20, batch_size=32, lr=1e-3, warmup=100, max_norm=1.0, seed=0,
                       progress=False) -> tuple[Run, Run]:
    """The course model trained by `loop` (Exercise 11.6's contract) on the learner's backend, and by
    course_lib's fit with the same settings: (yours, fit's)."""
    data = task.splits(0)
    steps = epochs * int(np.ceil(len(data["train"][0]) / batch_size))
    schedule = optim.WarmupCosine(lr, min(warmup, steps - 1), steps)
    model = Transformer(presets.deep_dive(), seed=seed, backend=backend)
    t0 = time.perf_counter()
    # the BLAS threads fit uses for this size (one: a second thread only waits on products this small)
    with set_num_threads(threads_for_model(model.config, batch_size * data["train"][0].shape[1])), \
            tqdm(total=steps, disable=not progress, unit="step", leave=False, desc="your loop") as bar:
        def backward(m):    # one call per step: the learner's loop moves the bar
            bar.update(1)
            return model_backward(m)
        history = loop(model, backward, data["train"], epochs, schedule, batch_size, max_norm, seed)
    mine = Run(train.evaluate(model, *data["test"])["acc"], len(history["loss"]), time.perf_counter() - t0,
               history)
    reference = Transformer(presets.deep_dive(), seed=seed)
    t0 = time.perf_counter()
    hist = train.fit(reference, optim.Adam(reference.params, lr=lr), data["train"], data["val"], epochs=epochs,
                     batch_size=batch_size, seed=seed, schedule=schedule, clip=max_norm, restore_best=False,
                     progress=progress)
    theirs = Run(train.evaluate(reference, *data["test"])["acc"], len(hist.step), time.perf_counter() - t0,
                 {"loss": list(hist.loss)})
    return mine, theirs
