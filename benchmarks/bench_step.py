"""Time one training step (loss, backward, Adam) of the deep_dive preset, batch 32:
course_lib and, side by side in the same process, PyTorch eager when installed.

    python benchmarks/bench_step.py [--batch 32] [--repeats 30]

Runs are interleaved (course_lib, PyTorch, course_lib, ...) so that both see the
same machine load; medians are reported. NumPy's OpenBLAS threads spin between
calls and slow PyTorch's own threads in the same process, so BLAS runs on one
thread here, as in course_lib.train.fit at this size (--blas-threads=N to change;
benchmarks/bench_sizes.py shows the other sizes). The steps are bench_sizes' own.
"""
import argparse
import os
import sys

if __name__ == "__main__":
    _threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--blas-threads=")), "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import numpy as np

from bench_sizes import SIZES, _timed, course_lib_step, processor, torch_step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=30, help="interleaved rounds (default 30)")
    ap.add_argument("--inner", type=int, default=10, help="steps per timed round (default 10)")
    ap.add_argument("--blas-threads", default="1", help="OpenBLAS threads for NumPy/SciPy (default 1; use --blas-threads=N)")
    args = ap.parse_args()
    SIZES["tiny"]["batch"] = args.batch
    steps = {"course_lib": course_lib_step("tiny")}
    try:
        steps["pytorch"] = torch_step("tiny")
    except ImportError:
        print("PyTorch is not installed: timing course_lib alone")
    for step in steps.values():
        for _ in range(5):
            step()
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            times[name].append(_timed(lambda: [step() for _ in range(args.inner)]) / args.inner * 1e3)
    print(f"training step, deep_dive preset, batch {args.batch} (median of {args.repeats} x {args.inner} steps, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}); {processor()}")
    for name, ts in times.items():
        print(f"  {name:<11} {np.median(ts):8.3f} ms   (min {np.min(ts):.3f})")
    if "pytorch" in times:
        print(f"  speed-up over PyTorch eager: {np.median(times['pytorch']) / np.median(times['course_lib']):.2f}x")


if __name__ == "__main__":
    main()
