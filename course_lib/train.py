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
from .config import check_integer
from .kernels import numpy_ref
from .kernels.machinery import set_num_threads, threads_for_model


class TrainingDiverged(FloatingPointError):
    """The loss or a gradient became NaN or infinite; the message names the step and the parameter."""


def evaluate(model, tokens, targets, batch_size=1000, groups=None):
    """Loss and accuracy at the scored positions, and accuracy per group of rows.

    groups: dict label -> boolean mask (or indices) of the rows in that group; None: the task's
    operations when the rows are task problems (task.operation_groups), else none.
    -> dict(loss, acc, acc_per_op={label: acc}) (a group with no rows is left out).
    """
    total_loss, correct, count = 0.0, [], 0
    for lo in range(0, len(tokens), batch_size):
        tok, tgt = tokens[lo:lo + batch_size], targets[lo:lo + batch_size]
        logits, y = model.scored_logits(tok, tgt)
        z = logits.astype(np.float64)
        total_loss += float(np.sum(numpy_ref.logsumexp(z) - z[np.arange(len(y)), y]))
        count += len(y)
        correct.append(z.argmax(-1) == y)
    hits = np.concatenate(correct)
    if groups is None:
        groups = task.operation_groups(tokens, targets)
    return {"loss": total_loss / max(count, 1), "acc": float(hits.mean()) if count else float("nan"),
            "acc_per_op": _accuracy_by_group(hits, groups)}


def _accuracy_by_group(hits, groups):
    """{label: share of hits in the group's rows}, for the groups that have rows."""
    out = {}
    for label, rows in groups.items():
        picked = hits[rows]
        if picked.size:
            out[label] = float(picked.mean())
    return out


def _culprit(params, lr):
    """Why a loss is not finite: the first parameter that is not, or else the forward pass overflowed."""
    bad = io.describe_non_finite(params)
    if bad:     # fit checked every parameter at the start: an update or a callback changed it since
        return (f"parameter {bad}; every parameter was finite when fit started, so an update (try a "
                f"smaller learning rate, now {lr:g}, or clipping) or a callback made it so")
    return (f"every parameter is finite, so the forward pass overflowed; try a smaller learning rate "
            f"(now {lr:g}) or clipping")


def parameter_groups(names):
    """Parameter name -> group for per-layer gradient norms: 'embed', 'block i', 'head'."""
    return {n: ("embed" if n in ("tok_emb", "pos_emb") else
                f"block {n.split('.')[1]}" if n.startswith("blocks.") else "head") for n in names}


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

    def record_step(self, step, loss, lr, grad_norm, grad_norm_by_group):
        """One training step's numbers."""
        self.step.append(step)
        self.loss.append(loss)
        self.lr.append(lr)
        self.grad_norm.append(grad_norm)
        for g, v in grad_norm_by_group.items():
            self.grad_norm_by_group[g].append(v)

    def record_evaluation(self, epoch, step, train, val):
        """One end-of-epoch evaluation; train and val are evaluate()'s results."""
        self.epoch.append(epoch)
        self.eval_step.append(step)
        self.train_loss.append(train["loss"])
        self.train_acc.append(train["acc"])
        self.val_loss.append(val["loss"])
        self.val_acc.append(val["acc"])
        for op, acc in val["acc_per_op"].items():
            self.val_acc_per_op.setdefault(op, []).append(acc)

    def to_arrays(self):
        """Plain NumPy arrays for plotting: dict name -> array (per-op and per-group as 'name/key')."""
        out = {k: np.asarray(getattr(self, k)) for k in
               ("step", "loss", "lr", "grad_norm", "epoch", "eval_step", "train_loss", "train_acc",
                "val_loss", "val_acc")}
        out.update({f"grad_norm/{g}": np.asarray(v) for g, v in self.grad_norm_by_group.items()})
        out.update({f"val_acc/{op}": np.asarray(v) for op, v in self.val_acc_per_op.items()})
        return out


class StopOnCtrlC:
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
    model.check_inputs(tokens, targets)
    return tokens, targets


def _check_settings(model, optimizer, epochs, batch_size, clip):
    """fit's settings, and parameters that a loss would never show broken, checked before any step."""
    check_integer("epochs", epochs)
    check_integer("batch_size", batch_size)
    if clip is not None and not clip > 0:
        raise ValueError(f"clip must be a positive number (max gradient norm) or None, got {clip!r}")
    if optimizer.params is not model.params:
        raise ValueError("the optimizer was built on another params dict: use Adam(model.params, ...)")
    bad = io.describe_non_finite(model.params)
    if bad:     # e.g. a NaN in the [PAD] row: no loss would ever show it, yet it would be saved
        raise ValueError(f"fit cannot start from parameters holding NaN or infinity: {bad}")


def _grad_norms(grads, groups):
    """-> (global norm, {group: norm}) of the gradients, summed in the order of `grads`."""
    sq = dict.fromkeys(groups.values(), 0.0)
    for name, g in grads.items():
        sq[groups[name]] += optim.sum_squares(g.reshape(-1))
    return math.sqrt(sum(sq.values())), {g: math.sqrt(v) for g, v in sq.items()}


def train_step(model, optimizer, tokens, targets, clip, schedule, groups, step, epoch):
    """Step `step`: learning rate from the schedule, loss, gradients, their norms, clipping, update.
    -> (loss, global gradient norm, {group: norm}). TrainingDiverged, naming the step, for a loss
    or gradient that is NaN or infinite."""
    where = f"step {step} (epoch {epoch})"
    if schedule is not None:
        optimizer.lr = schedule(step)
    loss = model.loss(tokens, targets)
    if not math.isfinite(loss):
        raise TrainingDiverged(f"the loss became {loss} at {where}: " + _culprit(model.params, optimizer.lr))
    grads = model.backward()
    total, by_group = _grad_norms(grads, groups)
    if not math.isfinite(total):
        bad = next(k for k, g in grads.items() if not np.all(np.isfinite(g)))
        raise TrainingDiverged(f"the gradient of {bad!r} became NaN or infinite at {where}; "
                               f"try a smaller learning rate or clipping")
    if clip is not None:
        optim.clip_grad_norm(grads, clip, norm=total)
    optimizer.step(grads)
    return loss, total, by_group
class _Best:
    """The best epoch so far, by validation accuracy, then loss: a copy of its parameters and its
    validation loss (History keeps its epoch and accuracy)."""

    def __init__(self):
        self.params, self.loss = None, float("inf")

    def restore(self, model):
        if self.params is not None:
            for k, v in self.params.items():
                model.params[k][...] = v


def _end_of_epoch(model, optimizer, hist, best, splits, epoch, step, checkpoint, stop_rules):
    """Check the parameters, evaluate on train and val (splits: the two and the val groups), record,
    keep the best parameters (and save them to `checkpoint`). -> True to stop early (stop_rules:
    patience, or a validation accuracy to reach)."""
    patience, until_val_acc = stop_rules
    bad = io.describe_non_finite(model.params)
    if bad:     # the last update overflowed; found before evaluating, never checkpointed
        raise TrainingDiverged(f"after step {step - 1} (epoch {epoch}) parameter {bad}; "
                               f"try a smaller learning rate (now {optimizer.lr:g}) or clipping")
    (train_tok, train_tgt), (val_tok, val_tgt), val_groups = splits
    hist.record_evaluation(epoch, step, evaluate(model, train_tok, train_tgt, groups={}),
                           evaluate(model, val_tok, val_tgt, groups=val_groups))
    acc, loss = hist.val_acc[-1], hist.val_loss[-1]
    if best.params is None or (acc, -loss) > (hist.best_val_acc, -best.loss):
        hist.best_epoch, hist.best_val_acc, best.loss = epoch, acc, loss
        best.params = {k: v.copy() for k, v in model.params.items()}
        if checkpoint is not None:
            io.save(model, checkpoint, optimizer, extra={"epoch": epoch, "step": step, "val_acc": acc})
    elif patience is not None and epoch - hist.best_epoch >= patience:
        hist.stopped_early = True
    if until_val_acc is not None and acc >= until_val_acc:
        hist.stopped_early = True
    return hist.stopped_early


def _snapshot(model, tokens, step):
    """What fit records at a snapshot step: attention weights on `tokens` (first row; None:
    `Max(1,6,2)`) and the token embeddings."""
    attention = model.attention(np.array([task.encode("Max(1,6,2)")]) if tokens is None else tokens)
    return {"step": step, "attention": np.stack([a[0] for a in attention]) if attention else None,
            "tok_emb": model.params["tok_emb"].copy()}


def fit(model, optimizer, train, val, *, epochs=10, batch_size=32, seed=0, schedule=None, clip=None,
        patience=None, until_val_acc=None, restore_best=True, snapshot_steps=(), snapshot_tokens=None,
        checkpoint=None, callback=None, progress=True, val_groups=None):
    """Train `model` with `optimizer` on train = (tokens, targets); evaluate on val each epoch.

    schedule: callable step -> lr (course_lib.optim schedules), clip: max global gradient norm,
    patience: stop after this many epochs without a better validation accuracy, until_val_acc: stop
    after the first epoch whose validation accuracy reaches it (1.0: nothing left to learn there),
    restore_best: end with the parameters of the best epoch, snapshot_steps: steps at which to record
    attention weights (on snapshot_tokens, default `Max(1,6,2)`) and token embeddings, checkpoint:
    path that receives the best model (and optimiser state) whenever validation improves,
    callback(step, history): called after every step, val_groups: the groups of validation rows
    val_acc_per_op reports (as evaluate's groups; None: the task's operations). Ctrl-C stops
    cleanly, keeping the best model so far.
    Parameters holding NaN or infinity are refused at the start (ValueError, naming them); a loss,
    gradient or parameter that becomes NaN or infinite raises TrainingDiverged naming the step and
    the first such parameter or gradient, before any checkpoint could store it.
    -> History.
    """
    train = _check_split("train", train, model)
    splits = (train, _check_split("val", val, model), val_groups)
    _check_settings(model, optimizer, epochs, batch_size, clip)
    snapshot_steps = set(int(s) for s in snapshot_steps)
    rng, groups, best, n = np.random.default_rng(seed), parameter_groups(model.params), _Best(), len(train[0])
    hist = History(grad_norm_by_group={g: [] for g in dict.fromkeys(groups.values())})
    step, t0 = 0, time.perf_counter()
    with contextlib.ExitStack() as stack:
        bar = stack.enter_context(tqdm(total=epochs * math.ceil(n / batch_size), disable=not progress,
                                       unit="step", leave=False))
        stack.enter_context(set_num_threads(threads_for_model(model.config, batch_size * train[0].shape[1])))
        ctrl_c = stack.enter_context(StopOnCtrlC())
        try:
            for epoch in range(epochs):
                order = rng.permutation(n)
                for lo in range(0, n, batch_size):
                    rows = order[lo:lo + batch_size]
                    if step in snapshot_steps:
                        hist.snapshots.append(_snapshot(model, snapshot_tokens, step))
                    loss, norm, by_group = train_step(model, optimizer, train[0][rows], train[1][rows], clip,
                                                       schedule, groups, step, epoch)
                    hist.record_step(step, loss, optimizer.lr, norm, by_group)
                    step += 1
                    bar.update(1)
                    if callback is not None:
                        callback(step, hist)
                    if ctrl_c.requested:
                        raise KeyboardInterrupt
                stop = _end_of_epoch(model, optimizer, hist, best, splits, epoch, step, checkpoint,
                                     (patience, until_val_acc))
                bar.set_postfix(loss=f"{loss:.3f}", val_acc=f"{hist.val_acc[-1]:.3f}")
                if stop:
                    break
            if step in snapshot_steps:
                hist.snapshots.append(_snapshot(model, snapshot_tokens, step))
        except KeyboardInterrupt:
            hist.interrupted = True
    if restore_best:
        best.restore(model)
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
