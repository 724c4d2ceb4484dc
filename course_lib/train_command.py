"""The course model's train command (wired in __main__):

    python -m course_lib train --preset deep_dive --seed 0 --out model.npz

Every option is checked before training starts; the best model (by validation accuracy) is saved
whenever it improves, so Ctrl-C keeps it. With --text the same command trains the character GPT
(course_lib/text/command.py).
"""
import functools
import math
import os
import time

from . import io, optim, task, train
from ._words import count
from .config import check_integer, presets
from .model import Transformer
from .text import command as text_command

PRESETS = {"deep_dive": presets.deep_dive}


def configure(t):
    """Add the train command's options (the course model's, then the text model's) to parser `t`."""
    t.add_argument("--preset", choices=sorted(PRESETS), default="deep_dive", help="model configuration")
    t.add_argument("--seed", type=int, default=0, help="seed of the initial weights and the batch order")
    t.add_argument("--split-seed", type=int, default=0, help="seed of the train/validation/test split")
    t.add_argument("--n-train", type=int, default=4000, help="number of training problems (of 5,000)")
    t.add_argument("--epochs", type=int, default=20, help="passes over the training set")
    t.add_argument("--batch-size", type=int, default=32, help="problems per step")
    t.add_argument("--optimizer", choices=sorted(optim.OPTIMIZERS), default="adam", help="optimiser")
    t.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    t.add_argument("--weight-decay", type=float, default=0.0,
                   help="weight decay (L2 for adam/sgd, decoupled for adamw)")
    t.add_argument("--momentum", type=float, default=0.9, help="momentum (sgd only)")
    t.add_argument("--schedule", choices=sorted(optim.SCHEDULES), default="warmup_cosine",
                   help="learning-rate schedule")
    t.add_argument("--warmup", type=int, default=100, help="warm-up steps (warmup_cosine)")
    t.add_argument("--clip", type=float, default=1.0, help="max global gradient norm (0: no clipping)")
    t.add_argument("--patience", type=int, default=None, help="stop after this many epochs without improvement")
    t.add_argument("--full", action="store_true",
                   help="train all --epochs epochs (by default training stops at the end of the first epoch "
                        "whose validation accuracy is 1.0: nothing is left to learn there)")
    t.add_argument("--out", default="model.npz",
                   help="where to save the best model (by validation accuracy) and its optimiser state: a path "
                        "ending in .npz in an existing directory; the file is written whenever validation "
                        "improves, so an interrupted run keeps its best model")
    t.add_argument("--overwrite", action="store_true",
                   help="replace --out if it exists (without it, an existing --out is an error before training "
                        "starts, so no earlier model is ever lost; with it, the end of the run says what "
                        "validation accuracy the replaced model had)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    text_command.configure_train(t)
    t.set_defaults(parser=t)    # option errors then print this command's usage


def make_schedule(name, lr, total, warmup):
    if name == "constant":
        return optim.Constant(lr)
    if name == "cosine":
        return optim.Cosine(lr, total)
    if name == "warmup_cosine":
        return optim.WarmupCosine(lr, min(warmup, total - 1), total)
    if name == "step":
        return optim.StepDecay(lr, step_size=max(1, total // 3), gamma=0.1)
    return optim.Exponential(lr, gamma=0.01 ** (1 / total))


def check_options(args):
    """Every option is checked before training starts: a mistake costs nothing. Exits 2 on the first bad one."""
    parser = args.parser
    for name, low in (("epochs", 1), ("batch_size", 1), ("n_train", 1), ("seed", 0), ("split_seed", 0),
                      ("warmup", 0), ("patience", 1)):
        value = getattr(args, name)
        try:
            if value is not None:       # only --patience may be left out
                check_integer(f"--{name.replace('_', '-')}", value, low)
        except ValueError as e:
            parser.error(str(e))
    if args.n_train + 1000 > task.N_PROBLEMS:
        parser.error(f"--n-train can be at most {task.N_PROBLEMS - 1000} (1,000 problems are held out)")
    if not (math.isfinite(args.lr) and args.lr > 0):
        parser.error(f"--lr must be a positive finite number, got {args.lr:g} (with 0 nothing would be learnt)")
    for name, value in (("weight-decay", args.weight_decay), ("clip", args.clip)):
        if not (math.isfinite(value) and value >= 0):
            parser.error(f"--{name} must be a finite number >= 0, got {value:g}")
    if not (math.isfinite(args.momentum) and 0 <= args.momentum < 1):
        parser.error(f"--momentum must be >= 0 and < 1, got {args.momentum:g}")
    out = args.out
    if not out.endswith(".npz"):    # io.save writes exactly this path; .npz says what the file is
        parser.error(f"--out must end in .npz, e.g. {(out or 'model') + '.npz'!r}, got {out!r}")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        parser.error(f"--out {out!r}: the directory {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        parser.error(f"--out {out!r}: the directory {folder!r} is not writable")
    if os.path.isdir(out):
        parser.error(f"--out {out!r} is a directory; give a file name such as {os.path.join(out, 'model.npz')!r}")
    if os.path.exists(out) and not args.overwrite:
        parser.error(f"--out {out!r} exists: choose another --out, or pass --overwrite to replace it")


def _stored_val_acc(path):
    """The validation accuracy saved with the checkpoint at `path`, or why there is none (text, one line
    naming the file: it is printed after the run, when the file has been replaced)."""
    try:
        extra = io.load_checkpoint(path)[2]
    except (OSError, ValueError) as e:
        return str(e)
    acc = extra.get("val_acc")
    return float(acc) if isinstance(acc, (int, float)) else f"{path!r} held no validation accuracy"


def _mtime(path):
    return os.stat(path).st_mtime_ns if os.path.exists(path) else None


def _load_kernels(model, make_optimizer, data):
    """One step on a throwaway copy of the model, so that the compiled kernels load from Numba's
    cache now, and the training time printed later is training alone. -> seconds taken."""
    t0 = time.perf_counter()
    copy = model.astype(model.config.dtype)
    copy.loss(*(a[:2] for a in data["train"]))
    make_optimizer(copy.params).step(copy.backward())
    return time.perf_counter() - t0


def cmd_train(args):
    t0 = time.perf_counter()
    replaced = _stored_val_acc(args.out) if os.path.exists(args.out) else None
    before = _mtime(args.out)
    data = task.splits(args.split_seed, n_train=args.n_train)
    model = Transformer(PRESETS[args.preset](), seed=args.seed)
    kwargs = {"lr": args.lr, "weight_decay": args.weight_decay}
    if args.optimizer == "sgd":
        kwargs["momentum"] = args.momentum
    make_optimizer = functools.partial(optim.OPTIMIZERS[args.optimizer], **kwargs)
    opt = make_optimizer(model.params)
    per_epoch = math.ceil(args.n_train / args.batch_size)
    total = args.epochs * per_epoch
    print(f"training {args.preset} ({model.n_params:,} parameters) on {count(args.n_train, 'problem')}: "
          f"{count(args.epochs, 'epoch')} x {count(per_epoch, 'step')}, {args.optimizer} "
          f"lr {args.lr:g} ({args.schedule}), batch {args.batch_size}, seed {args.seed}", flush=True)
    loading = _load_kernels(model, make_optimizer, data)
    try:
        hist = train.fit(model, opt, data["train"], data["val"], epochs=args.epochs, batch_size=args.batch_size,
                         seed=args.seed, schedule=make_schedule(args.schedule, args.lr, total, args.warmup),
                         clip=args.clip or None, patience=args.patience, checkpoint=args.out,
                         until_val_acc=None if args.full else 1.0,
                         progress=not args.no_progress)
    except train.TrainingDiverged as e:
        saved = _mtime(args.out) not in (None, before)    # fit checkpointed an epoch before diverging
        kept = f"the best model before that is saved in {args.out}" if saved else "nothing saved"
        raise train.TrainingDiverged(f"{e} ({kept})") from None
    if hist.best_epoch < 0:
        print(f"interrupted after {count(len(hist.step), 'step')}, before the first epoch ended: nothing saved"
              + (f" ({args.out} is unchanged)" if replaced is not None else ""))
        return 130
    if hist.interrupted:
        print(f"interrupted after {count(len(hist.step), 'step')}: keeping the best model so far "
              f"(epoch {hist.best_epoch}, validation accuracy {hist.best_val_acc:.4f})")
    test = train.evaluate(model, *data["test"])
    io.save(model, args.out, opt, extra={"best_epoch": hist.best_epoch, "val_acc": hist.best_val_acc,
                                         "test_acc": test["acc"]})
    per_op = "  ".join(f"{op} {acc:.3f}" for op, acc in test["acc_per_op"].items())
    stopped = " (validation accuracy reached 1.0: stopped; --full trains every epoch)" if (
        hist.stopped_early and not args.full and hist.best_val_acc >= 1.0) else ""
    print(f"best epoch {hist.best_epoch + 1} of {len(hist.epoch)} trained: validation accuracy "
          f"{hist.best_val_acc:.4f}{stopped}")
    print(f"test accuracy {test['acc']:.4f} on {len(data['test'][0])} held-out problems ({per_op})")
    print(f"wall time {time.perf_counter() - t0:.1f} s: training {hist.seconds:.1f} s "
          f"({count(len(hist.step), 'step')}), loading the compiled kernels {loading:.1f} s; saved to {args.out}")
    if isinstance(replaced, float):
        worse = " (higher than this run's: --overwrite was given)" if replaced > hist.best_val_acc else ""
        print(f"replaced the model that was in {args.out}: its validation accuracy was {replaced:.4f}{worse}")
    elif replaced is not None:
        print(f"replaced the file that was in {args.out}: {replaced}")
    return 130 if hist.interrupted else 0


def command(args):
    """Run `train` from parsed arguments: the course model, or with --text the character GPT."""
    check_options(args)
    if args.text is not None:
        text_command.check_train_options(args)
        return text_command.train(args)
    return cmd_train(args)
