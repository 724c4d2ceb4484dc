"""The text model's commands (wired in __main__):

    python -m course_lib train --text FILE [--minutes M] --out model.npz
    python -m course_lib sample model.npz --prompt TEXT [--chars N] [--temperature T] [--top-k K] [--seed S]

The checkpoint carries the vocabulary in its `extra` dict ("vocabulary": the characters in id order),
so that `sample` can encode a prompt and decode what the model writes.
"""
import math
import os
import time

from .. import io, optim
from .._words import count
from ..config import check_integer
from ..model import Transformer
from . import training as text_train
from .sampling import generate
from .data import TextError, Vocabulary, baselines, fixed_windows, read_text, split, validation_loss

# The operations task's options, which mean nothing for a text run: refused when changed.
OPERATIONS_ONLY = ("preset", "split_seed", "n_train", "epochs", "optimizer", "weight_decay", "momentum",
                   "schedule", "patience", "full")
EVAL_WINDOWS = 64       # validation windows evaluated during training (all of them at the end)


def configure_train(t):
    """Add the text model's options to the train command's parser `t`."""
    g = t.add_argument_group("text model (with --text; --lr then defaults to "
                             f"{text_train.LR:g}, and the options of the operations task do not apply)")
    g.add_argument("--text", metavar="FILE", help="train a character-level GPT on this UTF-8 text file instead "
                   "(the last 10%% held out); the last line is its validation loss and the bigram baseline's")
    g.add_argument("--minutes", type=float, default=5.0, help="wall-time budget of the training")
    for name, value in text_train.SIZES.items():
        g.add_argument(f"--{name.replace('_', '-')}", type=int, default=value, help="model size (d_ff = 4 d_model)")


def configure_sample(s):
    s.add_argument("model", help="a model saved by `train --text`")
    s.add_argument("--prompt", required=True, help="the text to continue (characters of the model's vocabulary)")
    s.add_argument("--chars", type=int, default=500, help="characters to write")
    s.add_argument("--temperature", type=float, default=0.8, help="softmax temperature (0: always the most likely)")
    s.add_argument("--top-k", type=int, default=None, help="sample among the K most likely characters only")
    s.add_argument("--seed", type=int, default=0, help="seed of the sampling")
    s.set_defaults(parser=s)


def check_train_options(args):
    """The text run's own checks, after the train command's (check_options). Exits 2 on the first bad one."""
    parser = args.parser
    for name in OPERATIONS_ONLY:
        if getattr(args, name) != parser.get_default(name):
            parser.error(f"--{name.replace('_', '-')} does not apply to --text (a text run is bounded by --minutes)")
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        parser.error(f"--minutes must be a positive finite number, got {args.minutes:g}")
    try:
        for name in text_train.SIZES:
            check_integer(f"--{name.replace('_', '-')}", getattr(args, name))
        text_train.text_config(2, **{name: getattr(args, name) for name in text_train.SIZES})
    except ValueError as e:
        parser.error(str(e).replace("d_model", "--d-model").replace("n_heads", "--n-heads"))


def _start(args):
    """Read and split the text, count the baselines, build the model. TextError for an unusable file."""
    content = read_text(args.text, args.seq_len)
    vocab = Vocabulary.from_text(content)
    train_ids, val_ids = split(vocab.encode(content))
    base = baselines(train_ids, val_ids, len(vocab))
    cfg = text_train.text_config(len(vocab), **{name: getattr(args, name) for name in text_train.SIZES})
    return vocab, train_ids, val_ids, base, Transformer(cfg, seed=args.seed)


def train(args):
    """`train --text`: train for --minutes, keep the best model in --out, print its validation loss last."""
    t0 = time.perf_counter()
    vocab, train_ids, val_ids, base, model = _start(args)
    cfg = model.config
    lr = args.lr if args.lr != args.parser.get_default("lr") else text_train.LR
    opt = optim.Adam(model.params, lr=lr)
    extra = {"vocabulary": vocab.chars, "text": os.path.basename(args.text), "baselines": base}
    threads = text_train.threads_for(cfg, args.batch_size * cfg.seq_len)
    n_chars = count(len(train_ids) + len(val_ids), "character", fmt=",")
    print(f"training a character-level GPT ({model.n_params:,} parameters: T={cfg.seq_len}, C={cfg.d_model}, "
          f"H={cfg.n_heads}, L={cfg.n_layers}) on {args.text}: {n_chars}, the last "
          f"{len(val_ids):,} held out, {len(vocab)} distinct; {args.minutes:g} min, batch {args.batch_size}, "
          f"adam lr {lr:g} (warm-up {count(args.warmup, 'step')}, cosine), seed {args.seed}"
          f"{', one BLAS thread (the machine is busy)' if threads == 1 else ''}", flush=True)
    print("baselines on the held-out part: " + ", ".join(f"{k} {v:.3f}" for k, v in base.items()) + " nats/char",
          flush=True)
    hist = text_train.fit_text(model, opt, train_ids, fixed_windows(val_ids, cfg.seq_len, EVAL_WINDOWS),
                               seconds=60 * args.minutes, batch_size=args.batch_size, lr=lr, warmup=args.warmup,
                               clip=args.clip or None, seed=args.seed, checkpoint=args.out, extra=extra,
                               progress=not args.no_progress, threads=threads)
    loss = validation_loss(model, fixed_windows(val_ids, cfg.seq_len))
    io.save(model, args.out, opt, extra={**extra, "step": hist.best_step, "val_loss": loss})
    stopped = "interrupted: keeping the best model so far; " if hist.interrupted else ""
    print(f"{stopped}{count(hist.steps, 'step')} in {hist.seconds:.0f} s; best at step {hist.best_step}; "
          f"wall time {time.perf_counter() - t0:.0f} s; saved to {args.out}")
    print(f"validation loss {loss:.3f} nats/char (bigram baseline {base['bigram']:.3f} nats/char)")
    return 130 if hist.interrupted else 0


def load_text_model(path):
    """-> (model, vocabulary) of a checkpoint written by `train --text`. ValueError (one line) otherwise."""
    model, _, extra = io.load_checkpoint(path)
    chars = extra.get("vocabulary")
    if not isinstance(chars, str):
        raise TextError(f"{path!r} is not a text model (no vocabulary in it; a model of the operations task?): "
                        f"train one with `python -m course_lib train --text FILE`")
    if len(chars) != model.config.vocab_size or not model.config.causal:
        raise TextError(f"{path!r}: its vocabulary of {count(len(chars), 'character')} does not fit its causal "
                        f"model of vocab_size {model.config.vocab_size}")
    return model, Vocabulary(chars)


def sample(args):
    """`sample`: print the prompt and its continuation."""
    try:
        check_integer("--chars", args.chars, low=0)
        check_integer("--seed", args.seed, low=0)
        if args.top_k is not None:
            check_integer("--top-k", args.top_k)
    except ValueError as e:
        args.parser.error(str(e))
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        args.parser.error(f"--temperature must be a finite number >= 0 (0: always the most likely character), "
                          f"got {args.temperature:g}")
    model, vocab = load_text_model(args.model)
    if args.top_k is not None and args.top_k > len(vocab):
        args.parser.error(f"--top-k must be at most the vocabulary's {count(len(vocab), 'character')}, "
                          f"got {args.top_k}")
    continuation = generate(model, vocab, args.prompt, args.chars, args.temperature, args.top_k, args.seed)
    print(args.prompt + continuation)
    return 0
