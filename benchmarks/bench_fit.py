"""Time what the training command does: course_lib.train.fit against a PyTorch eager loop doing
the same work, side by side.

    python benchmarks/bench_fit.py                  # 3 epochs (where the command stops), 5 rounds
    python benchmarks/bench_fit.py --epochs 20      # the --full recipe; --repeats, --seed

Both train the course model (deep_dive) from the same parameters on the same batches (one
permutation per epoch from the same seed), with Adam, the command's warm-up + cosine schedule,
clipping at 1.0 and per-group gradient norms, and at the end of every epoch evaluate loss and
accuracy on the 4,000 training and 500 validation problems (batches of 1,000) and keep a copy of the
best epoch's parameters. PyTorch scores every position and then picks the answer's, as a plain
PyTorch loop does; course_lib runs its last block at the scored positions only (model.scored_logits).
No checkpoint is written and no progress bar drawn. Each runs in a worker process of its own
(workers.py), the rounds alternating (course_lib, PyTorch, ...) so that both see the same machine
load; medians are reported, with each side's test accuracy.
"""
import argparse
import math
import time

import numpy as np

import course_lib as cl
from bench_sizes import processor
from workers import alternate, started


def fit_course_lib(data, epochs, seed):
    """The training command's fit, timed. -> (seconds, test accuracy, loss of every step)."""
    model = cl.Transformer(cl.presets.deep_dive(), seed=seed)
    opt = cl.optim.Adam(model.params, lr=1e-3)
    total = epochs * math.ceil(len(data["train"][0]) / 32)
    t0 = time.perf_counter()
    hist = cl.train.fit(model, opt, data["train"], data["val"], epochs=epochs, seed=seed, clip=1.0,
                        progress=False, schedule=cl.optim.WarmupCosine(1e-3, 100, total))
    seconds = time.perf_counter() - t0
    return seconds, cl.train.evaluate(model, *data["test"])["acc"], hist.loss


def _torch_evaluate(ref, tokens, targets, batch_size=1000):
    """evaluate() in PyTorch: loss and accuracy at the scored positions."""
    import torch
    import torch.nn.functional as F
    total, hits, count = 0.0, 0, 0
    with torch.no_grad():
        for lo in range(0, len(tokens), batch_size):
            logits = ref.forward(tokens[lo:lo + batch_size])
            tgt = torch.as_tensor(targets[lo:lo + batch_size])
            scored = tgt != cl.kernels.IGNORE
            z, y = logits[scored].double(), tgt[scored]
            total += float(F.cross_entropy(z, y, reduction="sum"))
            hits += int((z.argmax(-1) == y).sum())
            count += len(y)
    return total / count, hits / count


def fit_torch(data, epochs, seed):
    """fit's loop in PyTorch eager, timed. -> (seconds, test accuracy, loss of every step)."""
    import torch
    from course_lib.torch_reference import TorchTransformer
    ref = TorchTransformer(cl.Transformer(cl.presets.deep_dive(), seed=seed))
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
    (tok, tgt), n = data["train"], len(data["train"][0])
    total = epochs * math.ceil(n / 32)
    schedule = cl.optim.WarmupCosine(1e-3, 100, total)
    groups = {}
    for name, p in ref.params.items():
        groups.setdefault(cl.train.parameter_groups([name])[name], []).append(p)
    rng, step, best, best_key = np.random.default_rng(seed), 0, None, None
    steps, evaluations = [], []         # what History keeps
    t0 = time.perf_counter()
    for epoch in range(epochs):
        order = rng.permutation(n)
        for lo in range(0, n, 32):
            rows = order[lo:lo + 32]
            for g in opt.param_groups:
                g["lr"] = schedule(step)
            opt.zero_grad(set_to_none=True)
            loss = ref.loss(tok[rows], tgt[rows])
            loss.backward()
            by_group = {g: float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in ps])))
                        for g, ps in groups.items()}
            norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
            opt.step()
            steps.append((loss.item(), float(norm), by_group))
            step += 1
        train_eval, (val_loss, val_acc) = _torch_evaluate(ref, tok, tgt), _torch_evaluate(ref, *data["val"])
        evaluations.append((train_eval, val_loss, val_acc))
        if best is None or (val_acc, -val_loss) > best_key:
            best_key, best = (val_acc, -val_loss), {k: v.detach().clone() for k, v in ref.params.items()}
    with torch.no_grad():
        for k, v in best.items():
            ref.params[k].copy_(v)
    seconds = time.perf_counter() - t0
    return seconds, _torch_evaluate(ref, *data["test"])[1], [loss for loss, _, _ in steps]


def make_fit(implementation, seed):
    """In a worker: one epoch to load the compiled kernels and warm PyTorch's allocator.
    -> run(epochs): (seconds, test accuracy)."""
    data = cl.task.splits(0)
    fit = fit_torch if implementation == "pytorch" else fit_course_lib
    fit(data, 1, seed)
    return lambda epochs: fit(data, epochs, seed)[:2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run (default 3: where the command stops)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import torch
    with started(make_fit, ["course_lib", "pytorch"], args.seed) as workers:
        results = alternate(workers, args.repeats, args.epochs)
    times = {name: [seconds for seconds, _ in runs] for name, runs in results.items()}
    accs = {name: [acc for _, acc in runs] for name, runs in results.items()}
    print(f"fit, deep_dive, batch 32, {args.epochs} epochs ({args.epochs * 125} steps, {args.epochs} evaluations "
          f"of 4,500 problems), seed {args.seed}; median and min of {args.repeats} interleaved rounds")
    print(f"processor: {processor()}; PyTorch {torch.__version__}, {torch.get_num_threads()} threads")
    for name in results:
        print(f"  {name:<11} {np.median(times[name]):7.2f} s (min {np.min(times[name]):.2f})   "
              f"test accuracy {np.median(accs[name]):.4f}")
    print(f"  speed-up over PyTorch eager: {np.median(times['pytorch']) / np.median(times['course_lib']):.2f}x")


if __name__ == "__main__":
    main()
