"""Training: fit() with mini-batches, evaluation, history, progress bar and checkpoints;
evaluate(); and run_experiments() for ablation tables.
"""
import contextlib
import math
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from . import io, optim, task
from .threads import blas_threads, blas_threads_for
from .kernels import IGNORE


class TrainingDiverged(FloatingPointError):
    """The loss or a gradient became NaN or infinite; the message names the step and the parameter."""


def evaluate(model, tokens, targets, batch_size=1000):
    """Loss and accuracy at the scored positions; accuracy per operation for the task's data.

    -> dict(loss, acc, acc_per_op={op: acc}) (acc_per_op empty when the rows are not task problems).
    """
    total_loss, correct, count = 0.0, [], 0
    for lo in range(0, len(tokens), batch_size):
        tok, tgt = tokens[lo:lo + batch_size], targets[lo:lo + batch_size]
        logits = model.forward(tok)
        scored = tgt != IGNORE
        z = logits[scored].astype(np.float64)
        y = tgt[scored]
        m = z.max(-1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(z - m).sum(-1))
        total_loss += float(np.sum(lse - z[np.arange(len(y)), y]))
        count += len(y)
        hit = z.argmax(-1) == y
        correct.append(hit)
    hits = np.concatenate(correct)
    out = {"loss": total_loss / max(count, 1), "acc": float(hits.mean()) if count else float("nan"),
           "acc_per_op": {}}
    if _is_task_data(tokens, targets):
        ops = task.operation_of(tokens)
        out["acc_per_op"] = {op: float(hits[ops == i].mean()) for i, op in enumerate(task.OPERATIONS)
                             if np.any(ops == i)}
    return out


def _is_task_data(tokens, targets):
    first = tokens[:, 0]
    return (tokens.shape[1] == task.SEQ_LEN and np.all((targets != IGNORE).sum(1) == 1)
            and np.all((first >= task.TOKEN_TO_ID["First"]) & (first <= task.TOKEN_TO_ID["Min"])))


def _culprit(params, lr):
    """Why a loss is not finite: the first parameter that is not, or else the forward pass overflowed."""
    bad = io.describe_non_finite(params)
    if bad:     # fit checked every parameter at the start: an update or a callback changed it since
        return (f"parameter {bad}; every parameter was finite when fit started, so an update (try a "
                f"smaller learning rate, now {lr:g}, or clipping) or a callback made it so")
    return (f"every parameter is finite, so the forward pass overflowed; try a smaller learning rate "
            f"(now {lr:g}) or clipping")


def _groups(names):
    """Parameter name -> group for per-layer gradient norms: 'embed', 'block i', 'head'."""
    out = {}
    for n in names:
        out[n] = ("embed" if n in ("tok_emb", "pos_emb") else
                  f"block {n.split('.')[1]}" if n.startswith("blocks.") else "head")
    return out


@dataclass
class History:
    """Everything fit() saw. Per step: step, loss, lr, grad_norm, grad_norm_by_group.
    Per evaluation (end of each epoch): epoch, step, train_loss, train_acc, val_loss, val_acc,
    val_acc_per_op. snapshots: list of dicts (step, attention, tok_emb)."""
    step: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    grad_norm_by_group: dict = field(default_factory=dict)
    epoch: list = field(default_factory=list)
    eval_step: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    train_acc: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    val_acc: list = field(default_factory=list)
    val_acc_per_op: dict = field(default_factory=dict)
    snapshots: list = field(default_factory=list)
    best_epoch: int = -1
    best_val_acc: float = float("nan")
    stopped_early: bool = False
    interrupted: bool = False
    seconds: float = 0.0

    def to_arrays(self):
        """Plain NumPy arrays for plotting: dict name -> array (per-op and per-group as 'name/key')."""
        out = {k: np.asarray(getattr(self, k)) for k in
               ("step", "loss", "lr", "grad_norm", "epoch", "eval_step", "train_loss", "train_acc",
                "val_loss", "val_acc")}
        out.update({f"grad_norm/{g}": np.asarray(v) for g, v in self.grad_norm_by_group.items()})
        out.update({f"val_acc/{op}": np.asarray(v) for op, v in self.val_acc_per_op.items()})
        return out


class _StopOnCtrlC:
    """While active, Ctrl-C (SIGINT) asks the loop to stop after the current step instead of
    interrupting it half-way (inside a kernel, say). A second Ctrl-C interrupts at once."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def _check_split(name, split, model):
    if not (isinstance(split, (tuple, list)) and len(split) == 2):
        raise TypeError(f"{name} must be a pair (tokens, targets), e.g. cl.task.splits()['{name}']")
    tokens, targets = (np.asarray(a) for a in split)
    if len(tokens) == 0:
        raise ValueError(f"{name} split is empty")
    model._check_targets(targets, model._check_tokens(tokens).shape)
    return tokens, targets


def fit(model, optimizer, train, val, *, epochs=10, batch_size=32, seed=0, schedule=None, clip=None,
        patience=None, restore_best=True, snapshot_steps=(), snapshot_tokens=None, checkpoint=None,
        callback=None, progress=True):
    """Train `model` with `optimizer` on train = (tokens, targets); evaluate on val each epoch.

    schedule: callable step -> lr (course_lib.optim schedules), clip: max global gradient norm,
    patience: stop after this many epochs without a better validation accuracy, restore_best: end
    with the parameters of the best epoch, snapshot_steps: steps at which to record attention
    weights (on snapshot_tokens, default `Max(1,6,2)`) and token embeddings, checkpoint: path that
    receives the best model (and optimiser state) whenever validation improves, callback(step,
    history): called after every step. Ctrl-C stops cleanly, keeping the best model so far.
    Parameters holding NaN or infinity are refused at the start (ValueError, naming them); a loss,
    gradient or parameter that becomes NaN or infinite raises TrainingDiverged naming the step and
    the first such parameter or gradient, before any checkpoint could store it.
    -> History.
    """
    train_tok, train_tgt = _check_split("train", train, model)
    val_tok, val_tgt = _check_split("val", val, model)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be a positive number (max gradient norm) or None, got {clip!r}")
    if optimizer.params is not model.params:
        raise ValueError("the optimizer was built on another params dict: use Adam(model.params, ...)")
    bad = io.describe_non_finite(model.params)
    if bad:     # e.g. a NaN in the [PAD] row: no loss would ever show it, yet it would be saved
        raise ValueError(f"fit cannot start from parameters holding NaN or infinity: {bad}")
    if snapshot_tokens is None:
        snapshot_tokens = np.array([task.encode("Max(1,6,2)")])
    snapshot_steps = set(int(s) for s in snapshot_steps)

    rng = np.random.default_rng(seed)
    groups = _groups(model.params)
    hist = History(grad_norm_by_group={g: [] for g in dict.fromkeys(groups.values())})
    n = len(train_tok)
    steps_per_epoch = math.ceil(n / batch_size)
    best_params, best_loss, step, t0 = None, float('inf'), 0, time.perf_counter()
    bar = tqdm(total=epochs * steps_per_epoch, disable=not progress, unit="step", leave=False)

    def snapshot():
        attention = model.attention(snapshot_tokens)
        hist.snapshots.append({"step": step, "attention": np.stack([a[0] for a in attention]) if attention else None,
                               "tok_emb": model.params["tok_emb"].copy()})

    with contextlib.ExitStack() as stack:
        stack.enter_context(blas_threads(blas_threads_for(model.config, batch_size * train_tok.shape[1])))
        ctrl_c = stack.enter_context(_StopOnCtrlC())
        try:
            for epoch in range(epochs):
                order = rng.permutation(n)
                for lo in range(0, n, batch_size):
                    rows = order[lo:lo + batch_size]
                    if step in snapshot_steps:
                        snapshot()
                    if schedule is not None:
                        optimizer.lr = schedule(step)
                    loss = model.loss(train_tok[rows], train_tgt[rows])
                    if not math.isfinite(loss):
                        raise TrainingDiverged(f"the loss became {loss} at step {step} (epoch {epoch}): "
                                               + _culprit(model.params, optimizer.lr))
                    grads = model.backward()
                    sq = {g: 0.0 for g in hist.grad_norm_by_group}
                    for name, g in grads.items():
                        sq[groups[name]] += optim.sum_squares(g.reshape(-1))
                    total = math.sqrt(sum(sq.values()))
                    if not math.isfinite(total):
                        bad = next(k for k, g in grads.items() if not np.all(np.isfinite(g)))
                        raise TrainingDiverged(f"the gradient of {bad!r} became NaN or infinite at step {step} "
                                               f"(epoch {epoch}); try a smaller learning rate or clipping")
                    if clip is not None:
                        optim.clip_grad_norm(grads, clip, norm=total)
                    optimizer.step(grads)
                    hist.step.append(step)
                    hist.loss.append(loss)
                    hist.lr.append(optimizer.lr)
                    hist.grad_norm.append(total)
                    for g, v in sq.items():
                        hist.grad_norm_by_group[g].append(math.sqrt(v))
                    step += 1
                    bar.update(1)
                    if callback is not None:
                        callback(step, hist)
                    if ctrl_c.requested:
                        raise KeyboardInterrupt
                bad = io.describe_non_finite(model.params)
                if bad:     # the last update overflowed; found before evaluating, never checkpointed
                    raise TrainingDiverged(f"after step {step - 1} (epoch {epoch}) parameter {bad}; "
                                           f"try a smaller learning rate (now {optimizer.lr:g}) or clipping")
                tr = evaluate(model, train_tok, train_tgt)
                va = evaluate(model, val_tok, val_tgt)
                hist.epoch.append(epoch)
                hist.eval_step.append(step)
                hist.train_loss.append(tr["loss"])
                hist.train_acc.append(tr["acc"])
                hist.val_loss.append(va["loss"])
                hist.val_acc.append(va["acc"])
                for op, acc in va["acc_per_op"].items():
                    hist.val_acc_per_op.setdefault(op, []).append(acc)
                bar.set_postfix(loss=f"{loss:.3f}", val_acc=f"{va['acc']:.3f}")
                if best_params is None or (va["acc"], -va["loss"]) > (hist.best_val_acc, -best_loss):
                    hist.best_epoch, hist.best_val_acc, best_loss = epoch, va["acc"], va["loss"]
                    best_params = {k: v.copy() for k, v in model.params.items()}
                    if checkpoint is not None:
                        io.save(model, checkpoint, optimizer, extra={"epoch": epoch, "step": step,
                                                                     "val_acc": va["acc"]})
                elif patience is not None and epoch - hist.best_epoch >= patience:
                    hist.stopped_early = True
                    break
            if step in snapshot_steps:
                snapshot()
        except KeyboardInterrupt:
            hist.interrupted = True
        finally:
            bar.close()
    if restore_best and best_params is not None:
        for k, v in best_params.items():
            model.params[k][...] = v
    hist.seconds = time.perf_counter() - t0
    return hist


def run_experiments(experiments, seeds=(0, 1, 2), *, base=None, split_seed=0, steps=2500, batch_size=32,
                    lr=1e-3, progress=False):
    """Train every experiment with every seed; held-out (test split) accuracy per experiment.

    experiments: dict name -> dict of ModelConfig overrides, plus optionally 'n_train' (training-set size).
    Every run takes about `steps` steps (whole epochs), whatever its training-set size.
    -> list of dicts (name, mean, std, accs), in the given order.
    """
    from .config import presets
    from .model import Transformer
    base = base or presets.deep_dive()
    rows = []
    for name, spec in experiments.items():
        spec = dict(spec)
        n_train = spec.pop("n_train", 4000)
        cfg = base.replace(**spec)
        accs = []
        for seed in seeds:
            data = task.splits(split_seed, n_train=n_train)
            model = Transformer(cfg, seed=seed)
            per_epoch = math.ceil(n_train / batch_size)
            epochs = max(1, round(steps / per_epoch))
            total = epochs * per_epoch
            opt = optim.Adam(model.params, lr=lr)
            fit(model, opt, data["train"], data["val"], epochs=epochs, batch_size=batch_size, seed=seed,
                schedule=optim.WarmupCosine(lr, max(1, min(100, total // 10)), total), clip=1.0,
                progress=progress)
            accs.append(evaluate(model, *data["test"])["acc"])
        rows.append({"name": name, "mean": float(np.mean(accs)), "std": float(np.std(accs)), "accs": accs})
    return rows


def format_table(rows):
    """Rows of run_experiments as a text table."""
    lines = [f"{'experiment':<22} {'test acc':>9} {'± std':>7}   per seed"]
    for r in rows:
        lines.append(f"{r['name']:<22} {r['mean']:>9.3f} {r['std']:>7.3f}   "
                     + " ".join(f"{a:.3f}" for a in r["accs"]))
    return "\n".join(lines)
