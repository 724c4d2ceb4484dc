"""Time one training step (loss, backward, Adam) of the deep_dive preset, batch 32:
course_lib and, side by side, PyTorch eager when installed.

    python benchmarks/bench_step.py [--batch 32] [--repeats 30]

Each runs in a worker process of its own (workers.py), the rounds alternating
(course_lib, PyTorch, course_lib, ...) so that both see the same machine load;
medians are reported. BLAS runs on one thread, as in course_lib.train.fit at this
size (--blas-threads=N to change; benchmarks/bench_sizes.py shows the other sizes).
The steps and workers are bench_sizes' own.
"""
import argparse
import os
import sys

if __name__ == "__main__":
    _threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--blas-threads=")), "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import numpy as np

from bench_sizes import make_round, processor
from workers import alternate, started


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=30, help="interleaved rounds (default 30)")
    ap.add_argument("--inner", type=int, default=10, help="steps per timed round (default 10)")
    ap.add_argument("--blas-threads", default="1",
                    help="OpenBLAS threads for NumPy/SciPy (default 1; use --blas-threads=N)")
    args = ap.parse_args()
    with started(make_round, ["course_lib", "pytorch"], "tiny", {"batch": args.batch}) as workers:
        if "pytorch" not in workers:
            print("PyTorch is not installed: timing course_lib alone")
        times = alternate(workers, args.repeats, args.inner)
    times = {name: np.array(ts) * 1e3 for name, ts in times.items()}
    print(f"training step, deep_dive preset, batch {args.batch} (median of {args.repeats} x {args.inner} steps, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}); {processor()}")
    for name, ts in times.items():
        print(f"  {name:<11} {np.median(ts):8.3f} ms   (min {np.min(ts):.3f})")
    if "pytorch" in times:
        print(f"  speed-up over PyTorch eager: {np.median(times['pytorch']) / np.median(times['course_lib']):.2f}x")


if __name__ == "__main__":
    main()
