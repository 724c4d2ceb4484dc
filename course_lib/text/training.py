"""Training a character-level GPT on a text for a wall-time budget: random windows each step,
Adam with a warm-up and a cosine decay over the budget, the best model by validation loss kept
(and saved as it improves), Ctrl-C stopping cleanly.

    cfg = text_config(len(vocab))
    hist = fit_text(model, optimizer, train_ids, fixed_windows(val_ids, cfg.seq_len, 64), seconds=300)
"""
import contextlib
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from .. import io, train
from ..config import presets
from ..kernels.machinery import set_num_threads, threads_for_model
from .data import random_windows, validation_loss

# The command's model: measured to reach 0.6 nats/char below the bigram baseline within 5 minutes on
# 2 shared cores (benchmarks/README.md); d_ff = 4 d_model as in GPT-2.
SIZES = {"seq_len": 64, "d_model": 128, "n_heads": 4, "n_layers": 4}
BATCH_SIZE, LR, WARMUP, MIN_LR = 32, 3e-3, 100, 0.1       # MIN_LR: the cosine ends at 10% of LR


def text_config(vocab_size, **sizes):
    """The GPT-2 architecture (pre-LN, GELU, learned positions, causal, tied head) at a size that
    learns on 2 cores in minutes: SIZES, any of them overridden, float32."""
    sizes = {**SIZES, **sizes}
    return presets.gpt2(vocab_size=vocab_size, d_ff=4 * sizes["d_model"], dtype="float32", **sizes)


def threads_for(config, rows):
    """BLAS threads for training: as fit chooses (threads_for_model), but 1 when the machine is already busy.
    OpenBLAS threads spin between calls; with another process on the second core, a step of the default
    model took 1.0-1.9 s on two threads against 0.29 s on one (2 cores, load 6)."""
    busy = hasattr(os, "getloadavg") and os.getloadavg()[0] > (os.cpu_count() or 1) - 1
    return 1 if busy else threads_for_model(config, rows)


def learning_rate(lr, step, done, warmup=WARMUP, min_lr=MIN_LR):
    """Linear warm-up over the first `warmup` steps, times a cosine from 1 to min_lr over the
    fraction `done` (0..1) of the time budget: the run's length is known in seconds, not steps."""
    ramp = min(1.0, (step + 1) / warmup) if warmup else 1.0
    return lr * ramp * (min_lr + (1 - min_lr) * 0.5 * (1 + math.cos(math.pi * min(done, 1.0))))


@dataclass
class TextHistory:
    """Per step: loss, lr. Per evaluation: eval_step, eval_seconds, val_loss. The best evaluation's
    step and validation loss; steps done, seconds, interrupted."""
    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    eval_step: list = field(default_factory=list)
    eval_seconds: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    best_step: int = -1
    best_val_loss: float = math.inf
    steps: int = 0
    seconds: float = 0.0
    interrupted: bool = False


def _evaluate(model, optimizer, hist, best, val_windows, step, seconds, checkpoint, extra):
    """Validation loss now; a new best is copied (and saved to `checkpoint` with `extra`)."""
    loss = validation_loss(model, val_windows)
    hist.eval_step.append(step)
    hist.eval_seconds.append(seconds)
    hist.val_loss.append(loss)
    if loss < hist.best_val_loss:
        hist.best_step, hist.best_val_loss = step, loss
        best.update({k: v.copy() for k, v in model.params.items()})
        if checkpoint is not None:
            io.save(model, checkpoint, optimizer, extra={**(extra or {}), "step": step, "val_loss": loss})


def fit_text(model, optimizer, train_ids, val_windows, *, seconds, batch_size=BATCH_SIZE, lr=LR, warmup=WARMUP,
             clip=1.0, seed=0, eval_every=None, checkpoint=None, extra=None, progress=True, threads=None):
    """Train on random windows of train_ids (B, seq_len) until `seconds` of wall time have passed.

    val_windows: (tokens, targets) evaluated every eval_every seconds (default: a twentieth of the
    budget) and at the end; the best parameters are restored at the end, and saved to `checkpoint`
    (with the JSON dict `extra`) whenever the validation loss improves. Ctrl-C stops after the current
    step, evaluates and keeps the best. threads: BLAS threads (None: threads_for's choice).
    -> TextHistory. TrainingDiverged for a NaN or infinite loss.
    """
    T = model.config.seq_len
    rng, groups, best, hist = np.random.default_rng(seed), train.parameter_groups(model.params), {}, TextHistory()
    eval_every = seconds / 20 if eval_every is None else eval_every
    t0 = time.perf_counter()
    next_eval, step = eval_every, 0
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(tqdm(total=round(seconds), disable=not progress, unit="s", leave=False,
                                       bar_format="{l_bar}{bar}| {n:.0f}/{total} s {postfix}"))
        stack.enter_context(set_num_threads(threads_for(model.config, batch_size * T) if threads is None else threads))
        ctrl_c = stack.enter_context(train.StopOnCtrlC())
        while (elapsed := time.perf_counter() - t0) < seconds and not ctrl_c.requested:
            optimizer.lr = learning_rate(lr, step, elapsed / seconds, warmup)
            tokens, targets = random_windows(train_ids, batch_size, T, rng)
            loss, _, _ = train.train_step(model, optimizer, tokens, targets, clip, None, groups, step, 0)
            hist.loss.append(loss)
            hist.lr.append(optimizer.lr)
            step += 1
            if elapsed >= next_eval:
                _evaluate(model, optimizer, hist, best, val_windows, step, elapsed, checkpoint, extra)
                next_eval = elapsed + eval_every
            bar.set_postfix_str(f"step {step}, loss {loss:.3f}, best val {hist.best_val_loss:.3f}", refresh=False)
            bar.update(min(elapsed, seconds) - bar.n)      # redraws at most every 0.1 s
        hist.interrupted = ctrl_c.requested
    if not hist.eval_step or hist.eval_step[-1] != step:
        _evaluate(model, optimizer, hist, best, val_windows, step, time.perf_counter() - t0, checkpoint, extra)
    for k, v in best.items():
        model.params[k][...] = v
    hist.steps, hist.seconds = step, time.perf_counter() - t0
    return hist
