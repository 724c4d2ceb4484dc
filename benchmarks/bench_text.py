"""Same wall time, same model, same batches: `train --text` (course_lib) against a PyTorch eager loop.

    python benchmarks/bench_text.py                       # data/kjv.txt, 5 minutes each (10 in all)
    python benchmarks/bench_text.py --minutes 1 --text FILE --seed 0

Both start from the same parameters (the command's default configuration, course_lib's
initialisation copied into PyTorch), draw the same random windows in the same order (one
generator from the same seed), follow the same learning rate (warm-up, then a cosine over the
elapsed fraction of the budget), clip at 1.0, evaluate the same 64 validation windows every
twentieth of the budget and keep the best parameters; at the end both report the best model's
loss on every held-out window. Each runs in a worker process of its own (workers.py), one after
the other, with the same number of threads (the command's choice: 1 on a busy machine).
"""
import argparse
import math
import os
import time

import numpy as np

import course_lib as cl
from bench_sizes import processor
from course_lib import text
from course_lib.text import training as text_train
from workers import started

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def load(path):
    """-> (train ids, val ids, vocabulary size) as the command splits the text."""
    content = text.read_text(path, text_train.SIZES["seq_len"])
    vocab = text.Vocabulary.from_text(content)
    return (*text.split(vocab.encode(content)), len(vocab))


def run_course_lib(path, seconds, seed, threads):
    """The command's training, without checkpoint or progress bar. -> (steps, validation loss)."""
    train_ids, val_ids, V = load(path)
    model = cl.Transformer(text_train.text_config(V), seed=seed)
    opt = cl.optim.Adam(model.params, lr=text_train.LR)
    T = model.config.seq_len
    hist = text_train.fit_text(model, opt, train_ids, text.fixed_windows(val_ids, T, 64), seconds=seconds,
                               seed=seed, progress=False, threads=threads)
    return hist.steps, text.validation_loss(model, text.fixed_windows(val_ids, T))


def _torch_loss(ref, windows, batch_size=64):
    """Mean cross-entropy (float64) over every position of the windows."""
    import torch
    import torch.nn.functional as F
    tokens, targets = windows
    total = 0.0
    with torch.no_grad():
        for lo in range(0, len(tokens), batch_size):
            logits = ref.forward(tokens[lo:lo + batch_size]).double()
            tgt = torch.as_tensor(targets[lo:lo + batch_size])
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="sum"))
    return total / targets.size


def run_torch(path, seconds, seed, threads):
    """fit_text's loop in PyTorch eager. -> (steps, validation loss)."""
    import torch
    from course_lib.torch_reference import TorchTransformer
    torch.set_num_threads(threads or os.cpu_count())
    train_ids, val_ids, V = load(path)
    ref = TorchTransformer(cl.Transformer(text_train.text_config(V), seed=seed))
    opt = torch.optim.Adam(ref.parameters(), lr=text_train.LR)
    T, B = ref.cfg.seq_len, text_train.BATCH_SIZE
    val_some, rng = text.fixed_windows(val_ids, T, 64), np.random.default_rng(seed)
    step, best, best_loss, eval_every = 0, None, math.inf, seconds / 20
    t0 = time.perf_counter()
    next_eval = eval_every
    while (elapsed := time.perf_counter() - t0) < seconds:
        for g in opt.param_groups:
            g["lr"] = text_train.learning_rate(text_train.LR, step, elapsed / seconds)
        tokens, targets = text.random_windows(train_ids, B, T, rng)
        opt.zero_grad(set_to_none=True)
        ref.loss(tokens, targets).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt.step()
        step += 1
        if elapsed >= next_eval or time.perf_counter() - t0 >= seconds:
            loss = _torch_loss(ref, val_some)
            if loss < best_loss:
                best_loss, best = loss, {k: v.detach().clone() for k, v in ref.params.items()}
            next_eval = elapsed + eval_every
    with torch.no_grad():
        for k, v in best.items():
            ref.params[k].copy_(v)
    return step, _torch_loss(ref, text.fixed_windows(val_ids, T))


def make_run(implementation, path, seed, threads):
    """In a worker: a few seconds' run first (compiled kernels loaded, allocator warm). -> run(seconds)."""
    run = run_torch if implementation == "pytorch" else run_course_lib
    run(path, 3, seed, threads)
    return lambda seconds: run(path, seconds, seed, threads)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default=os.path.join(ROOT, "data", "kjv.txt"), help="UTF-8 text file")
    ap.add_argument("--minutes", type=float, default=5.0, help="wall time of each run (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch
    train_ids, val_ids, V = load(args.text)
    cfg = text_train.text_config(V)
    threads = text_train.threads_for(cfg, text_train.BATCH_SIZE * cfg.seq_len)
    bigram = text.baselines(train_ids, val_ids, V)["bigram"]
    with started(make_run, ["course_lib", "pytorch"], args.text, args.seed, threads) as workers:
        results = {name: worker(60 * args.minutes) for name, worker in workers.items()}
    print(f"{os.path.basename(args.text)}: T={cfg.seq_len}, C={cfg.d_model}, H={cfg.n_heads}, L={cfg.n_layers}, "
          f"batch {text_train.BATCH_SIZE}, {args.minutes:g} min each, seed {args.seed}, "
          f"{'1 thread (busy machine)' if threads == 1 else 'all threads'}; bigram baseline {bigram:.3f} nats/char")
    print(f"processor: {processor()}; PyTorch {torch.__version__}; load average {os.getloadavg()[0]:.1f}")
    for name, (steps, loss) in results.items():
        print(f"  {name:<11} {steps:6d} steps   validation loss {loss:.3f} nats/char")


if __name__ == "__main__":
    main()
