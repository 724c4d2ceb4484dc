"""Time one training step (loss, backward, Adam) of the deep_dive preset, batch 32:
course_lib and, side by side in the same process, PyTorch eager when installed.

    python benchmarks/bench_step.py [--batch 32] [--repeats 30]

Runs are interleaved (course_lib, PyTorch, course_lib, ...) so that both see the
same machine load; medians are reported. NumPy's OpenBLAS threads spin between
calls and slow PyTorch's own threads in the same process, so BLAS runs on one
thread here (--blas-threads to change); at this size course_lib is fastest so too.
"""
import argparse
import os
import sys
import time

if __name__ == "__main__":
    _threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--blas-threads=")), "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import numpy as np

import course_lib as cl


def course_lib_step(cfg, tokens, targets):
    model = cl.Transformer(cfg, seed=0)
    opt = cl.optim.Adam(model.params, lr=1e-3)

    def step():
        model.loss(tokens, targets)
        opt.step(model.backward())
    return step


def torch_step(cfg, tokens, targets):
    import torch
    from course_lib.torch_reference import TorchTransformer
    ref = TorchTransformer(cl.Transformer(cfg, seed=0))
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        ref.loss(tokens, targets).backward()
        opt.step()
    return step


def median_ms(step, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        step()
    return (time.perf_counter() - t0) / inner * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=30, help="interleaved rounds (default 30)")
    ap.add_argument("--inner", type=int, default=10, help="steps per timed round (default 10)")
    ap.add_argument("--blas-threads", default="1", help="OpenBLAS threads for NumPy/SciPy (default 1; use --blas-threads=N)")
    args = ap.parse_args()
    cfg = cl.presets.deep_dive()
    tokens, targets = cl.task.splits(seed=0)["train"]
    tokens, targets = tokens[:args.batch], targets[:args.batch]
    steps = {"course_lib": course_lib_step(cfg, tokens, targets)}
    try:
        steps["pytorch"] = torch_step(cfg, tokens, targets)
    except ImportError:
        print("PyTorch is not installed: timing course_lib alone")
    for step in steps.values():
        for _ in range(5):
            step()
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            times[name].append(median_ms(step, args.inner))
    print(f"training step, deep_dive preset, batch {args.batch} (median of {args.repeats} x {args.inner} steps, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')})")
    for name, ts in times.items():
        print(f"  {name:<11} {np.median(ts):8.3f} ms   (min {np.min(ts):.3f})")
    if "pytorch" in times:
        print(f"  speed-up over PyTorch eager: {np.median(times['pytorch']) / np.median(times['course_lib']):.2f}x")


if __name__ == "__main__":
    main()
