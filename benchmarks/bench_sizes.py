"""Training-step benchmark at three sizes: course_lib, PyTorch and plain NumPy, side by side.

    python benchmarks/bench_sizes.py                 # all sizes
    python benchmarks/bench_sizes.py --sizes tiny    # one size; --repeats, --no-start, --no-memory
    python benchmarks/bench_sizes.py --pytorch eager # only the eager anchor (no 20 s compiles)
    python benchmarks/bench_sizes.py --cores 2 8 16  # each core count pinned, against PyTorch eager: a table

PyTorch runs three ways (--pytorch): eager, the reference model of course_lib.torch_reference
(the speed-ups are against it); sdpa, the same model with F.scaled_dot_product_attention, as
PyTorch users write attention; compile, the sdpa model under torch.compile (inductor), whose
compilation happens before the timing.

A step is loss + backward + Adam. Each implementation runs in a worker process of its own
and the rounds alternate between them (A, B, C, A, B, C, ...), so that they share the
machine's load and nothing else (workers.py says why); PyTorch's worker runs with glibc's
malloc as PyTorch's users have it. For tiny, --blas-threads 1 shows the one-thread figure that
course_lib.train.fit uses at this size. Medians and minima are reported with speed-ups
against PyTorch, achieved GFLOP/s against a measured matrix-multiply peak, and (in child
processes) peak memory and cold / warm start: import plus first step with an empty and
with a filled Numba cache.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from workers import WorkerError, alternate, started

SIZES = {
    "tiny": dict(preset="deep_dive", overrides={}, batch=32, seq=8),
    "mid": dict(preset="gpt2", overrides=dict(vocab_size=512, seq_len=128, d_model=256, n_heads=8, n_layers=4,
                                              d_ff=1024), batch=8, seq=128),
    "gpt2-small": dict(preset="gpt2", overrides=dict(seq_len=1024), batch=4, seq=64),
}


def make_config(size):
    import course_lib as cl
    spec = SIZES[size]
    return getattr(cl.presets, spec["preset"])(**spec["overrides"])


def make_batch(size):
    """Token ids and targets: the task's problems for tiny, random next-token data otherwise."""
    import course_lib as cl
    spec = SIZES[size]
    if size == "tiny":
        tokens, targets = cl.task.splits(seed=0)["train"]
        return tokens[:spec["batch"]], targets[:spec["batch"]]
    cfg = make_config(size)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg.vocab_size, (spec["batch"], spec["seq"] + 1))
    return tokens[:, :-1], tokens[:, 1:]


def step_flops(cfg, B, T):
    """Matrix-multiply FLOPs of one training step (forward x 3), every position scored."""
    N, C, F, V = B * T, cfg.d_model, cfg.d_ff, cfg.vocab_size
    per_layer = 2 * N * C * (4 * C + 2 * F) + 4 * B * T * T * C
    return 3 * (cfg.n_layers * per_layer + 2 * N * C * V)


def processor():
    """The processor's model name (Linux: /proc/cpuinfo), and its widest vector instructions."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{name} ({vector})"


def matmul_peak():
    a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    a @ a
    best = min(_timed(lambda: a @ a) for _ in range(5))
    return 2 * 1024 ** 3 / best / 1e9


def _timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def course_lib_step(size, backend="numba"):
    import course_lib as cl
    model = cl.Transformer(make_config(size), seed=0, backend=backend)
    opt = cl.optim.Adam(model.params, lr=1e-4)
    tokens, targets = make_batch(size)

    def step():
        model.loss(tokens, targets)
        opt.step(model.backward())
    return step


PYTORCH = {"eager": "pytorch", "sdpa": "pytorch-sdpa", "compile": "pytorch-compile"}   # --pytorch: worker name


def torch_step(size, variant="eager"):
    """PyTorch's step: variant "eager" (the reference model), "sdpa" or "compile" (see the top)."""
    import torch
    import course_lib as cl
    from course_lib.torch_reference import TorchTransformer
    ref = TorchTransformer(cl.Transformer(make_config(size), seed=0),
                           attention="manual" if variant == "eager" else "sdpa")
    opt = torch.optim.Adam(ref.parameters(), lr=1e-4)
    tokens, targets = (torch.as_tensor(np.asarray(a, dtype=np.int64)) for a in make_batch(size))
    loss = torch.compile(ref.tensor_loss) if variant == "compile" else ref.tensor_loss

    def step():
        opt.zero_grad(set_to_none=True)
        loss(tokens, targets).backward()
        opt.step()
    return step


def make_round(implementation, size, overrides=None):
    """In a worker: implementation's step at this size (SIZES[size] updated by overrides), run twice.
    -> run(inner): seconds per step over inner steps."""
    SIZES[size] = dict(SIZES[size], **(overrides or {}))
    if implementation.startswith("pytorch"):
        variant = {name: v for v, name in PYTORCH.items()}[implementation]
        step = torch_step(size, variant)
    else:
        step = course_lib_step(size, backend="numpy" if implementation == "numpy" else "numba")
    step()
    step()
    return lambda inner: _timed(lambda: [step() for _ in range(inner)]) / inner


def bench_size(size, repeats, with_numpy=True, pytorch=("eager", "sdpa", "compile")):
    import course_lib as cl
    cfg = make_config(size)
    spec = SIZES[size]
    names = ["course_lib"] + [PYTORCH[v] for v in pytorch] + (["numpy"] if with_numpy else [])
    with started(make_round, names, size) as workers:
        inner = max(1, int(0.2 / max(1e-4, min(workers["course_lib"](1) for _ in range(3)))))   # ~0.2 s a round
        times = alternate(workers, repeats, inner)
    flops = step_flops(cfg, spec["batch"], spec["seq"])
    return {"size": size, "params": int(cl.Transformer(cfg, seed=0).n_params) if size != "gpt2-small" else None,
            "flops": flops, "inner": inner,
            "median": {k: float(np.median(v)) for k, v in times.items()},
            "min": {k: float(np.min(v)) for k, v in times.items()}}


CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {bench_dir!r})
import course_lib as cl
import bench_sizes as b
t_import = time.perf_counter() - t0
step = b.course_lib_step({size!r})
step()
t_first = time.perf_counter() - t0
print(json.dumps({{"import": t_import, "first": t_first,
                  "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}}))
"""


def child(size, cache_dir, seq=None):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    code = CHILD.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), size=size)
    if seq is not None:
        code = code.replace("step = b.course_lib_step",
                            f"b.SIZES[{size!r}].update(seq={seq}, batch=1)\nstep = b.course_lib_step")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    ap.add_argument("--repeats", type=int, default=7, help="interleaved rounds per size (default 7)")
    ap.add_argument("--no-numpy", action="store_true", help="skip the plain NumPy reference")
    ap.add_argument("--pytorch", nargs="+", choices=list(PYTORCH), default=list(PYTORCH),
                    help="PyTorch anchors (default: all three; speed-ups are against eager)")
    ap.add_argument("--no-start", action="store_true", help="skip cold/warm start measurements")
    ap.add_argument("--no-memory", action="store_true", help="skip the GPT-2 small T=1024 memory check")
    ap.add_argument("--blas-threads", type=int, default=None, help="OpenBLAS threads (default: all cores)")
    ap.add_argument("--cores", type=int, nargs="+", help="run each core count pinned to that many cores "
                    "(Linux), every library's threads to match, against PyTorch eager, and print a table")
    ap.add_argument("--json", help=argparse.SUPPRESS)          # --cores' children write their results here
    args = ap.parse_args()
    if args.blas_threads:
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)     # for the workers, which start after this
    if args.cores:
        return scaling(args.cores, args.sizes, args.repeats)
    peak = matmul_peak()
    print(f"{time.strftime('%Y-%m-%d')}, {processor()}, {_cores()} cores")
    print(f"matrix-multiply peak (float32 1024^3, NumPy): {peak:.0f} GFLOP/s")
    for size in args.sizes:
        try:
            r = bench_size(size, args.repeats, with_numpy=not args.no_numpy, pytorch=args.pytorch)
        except WorkerError as err:
            print(f"\n{size}: failed: {str(err).strip()[-500:]}")
            continue
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")
        spec = SIZES[size]
        print(f"\n{size}: batch {spec['batch']}, T {spec['seq']} ({r['flops'] / 1e9:.2f} GFLOP per step; "
              f"median and min of {args.repeats} interleaved rounds of {r['inner']} steps)")
        for name in r["median"]:
            med = r["median"][name]
            print(f"  {name:<15} {med * 1e3:10.2f} ms (min {r['min'][name] * 1e3:9.2f})  "
                  f"{r['flops'] / med / 1e9:6.1f} GFLOP/s = {r['flops'] / med / 1e9 / peak:5.1%} of peak")
        for name in r["median"]:
            if not name.startswith("pytorch"):
                ratios = [(other, r["median"][other] / r["median"][name], r["min"][other] / r["min"][name])
                          for other in r["median"] if other.startswith("pytorch")]
                print(f"  {name} speed-up (medians / minima):"
                      + ",".join(f" vs {other} {med:.2f}x / {low:.2f}x" for other, med, low in ratios))
    if not args.no_start:
        with tempfile.TemporaryDirectory() as cache:
            cold = child("tiny", cache)
            warm = child("tiny", cache)
        print(f"\nstart (tiny: import + first step): cold {cold.get('first', float('nan')):.2f} s "
              f"(empty Numba cache), warm {warm.get('first', float('nan')):.2f} s "
              f"(import {warm.get('import', 0):.2f} s)")
    if not args.no_memory:
        numba_cache = os.environ.get("NUMBA_CACHE_DIR", tempfile.gettempdir() + "/course_lib_numba")
        for size in args.sizes:
            if size == "tiny":
                continue
            m = child(size, numba_cache)
            print(f"peak memory, {size} step: {m.get('rss_gb', float('nan')):.2f} GB")
        m = child("gpt2-small", numba_cache, seq=1024)
        if "error" in m:
            print(f"GPT-2 small, B 1, T 1024: failed: {m['error']}")
        else:
            print(f"peak memory, GPT-2 small step at B 1, T 1024: {m['rss_gb']:.2f} GB")


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def scaling(cores, sizes, repeats):
    """bench_sizes for each core count in a child pinned to cores 0..n-1 with every library's threads
    set to n (BLAS, PyTorch, Numba and so course_lib's kernels); then the table of speed-ups."""
    if not hasattr(os, "sched_setaffinity"):
        sys.exit("--cores pins processes to cores: Linux only")
    available = sorted(os.sched_getaffinity(0))
    print(f"{time.strftime('%Y-%m-%d')}, {processor()}, {len(available)} cores; PyTorch eager, {repeats} rounds")
    rows = {}
    for n in cores:
        if n > len(available):
            print(f"{n} cores: this machine lets the process use {len(available)}; skipped")
            continue
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
            env = {**os.environ, **{name: str(n) for name in THREAD_VARIABLES}}
            subprocess.run([sys.executable, __file__, "--sizes", *sizes, "--pytorch", "eager", "--no-numpy",
                            "--no-start", "--no-memory", "--repeats", str(repeats), "--json", out.name],
                           env=env, preexec_fn=lambda: os.sched_setaffinity(0, available[:n]), check=False)
            rows[n] = {r["size"]: r for r in map(json.loads, open(out.name).read().splitlines())}
    print("\n| cores | " + " | ".join(sizes) + " |\n|---|" + "---|" * len(sizes))
    for n, results in rows.items():
        cells = []
        for size in sizes:
            r = results.get(size)
            if r is None:
                cells.append("failed")
                continue
            ours, theirs = r["median"]["course_lib"], r["median"]["pytorch"]
            cells.append(f"{_ms(ours)} vs {_ms(theirs)}: **{theirs / ours:.2f}x** "
                         f"({r['min']['pytorch'] / r['min']['course_lib']:.2f}x)")
        print(f"| {n} | " + " | ".join(cells) + " |")


def _cores():
    """The cores this process may use (its affinity where the system has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _ms(seconds):
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


if __name__ == "__main__":
    main()
