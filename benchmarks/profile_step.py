"""Where one training step spends its time: course_lib kernel by kernel, PyTorch eager op by op.

    python benchmarks/profile_step.py                  # mid size
    python benchmarks/profile_step.py --size tiny      # or gpt2-small; --steps, --top

The steps are bench_sizes' own (loss + backward + Adam), each library in a worker process
of its own (workers.py). course_lib runs on a copy of its kernel module whose functions are
timed call by call; what is left of the step is Python between the kernels (and the input
checks). The timers' own cost outside the timed calls (measured on an empty call, about half
a microsecond a call) is a row of its own, not part of Python's. PyTorch is read by
torch.profiler (self CPU time per op). Both also report page faults and system time per step:
memory the step allocates fresh from the system is paid for there. Each of course_lib's rows
says how many threads the kernel ran on (the most its splits used). Profiling adds about a
microsecond a call, so the course model's step looks a little slower than in bench_sizes.
course_lib's report ends with the issue-25 figures: attention's share of the step, GELU's
time per element (forward and backward together), and Python between the kernels plus Adam;
then Adam and GELU timed alone, called again and again on the step's own arrays: how far the
step keeps them from their best on this machine; GELU alone with its saved arrays fetched
from memory, as the step has them: how much of its time in the step is memory's; and the step
with the kernels' work taken out (each returns what it returned before): what Python and Adam
cost at the least, with every array in the caches, on this processor.
"""
import argparse
import collections
import glob
import resource
import time
import types

import numpy as np

from bench_sizes import SIZES, make_batch, make_config, processor, torch_step
from workers import started


class ReplayedKernels(types.SimpleNamespace):
    """The functions of a kernel module; the kernel pairs (*_forward, *_backward) run for real and are
    recorded until play(), and from then on each call returns what the same call returned when
    recorded, in the same order, without doing the work."""

    def __init__(self, module):
        super().__init__()
        self.recorded, self.playing, self.served = [], False, 0
        for name in dir(module):
            value = getattr(module, name)
            if name.endswith(("_forward", "_backward")) and callable(value):
                value = self._replayed(name, value)
            setattr(self, name, value)

    def _replayed(self, name, fn):
        def call(*args):
            if not self.playing:
                out = fn(*args)
                self.recorded.append((name, out))
                return out
            recorded, out = self.recorded[self.served % len(self.recorded)]
            if recorded != name:
                raise RuntimeError(f"replay: the step called {name} where the recorded one called {recorded}")
            self.served += 1
            return out
        return call

    def play(self):
        self.playing, self.served = True, 0


class TimedKernels(types.SimpleNamespace):
    """The functions of a kernel module, each call's time added to seconds[name] (and the size of
    its first argument to elements[name])."""

    def __init__(self, module):
        super().__init__()
        self.seconds, self.calls, self.elements = collections.Counter(), collections.Counter(), collections.Counter()
        self.threads, self.current = {}, None      # the most threads a kernel's split_work used
        for name in dir(module):
            value = getattr(module, name)
            setattr(self, name, self._timed(name, value) if callable(value) and not isinstance(value, type) else value)

    def _timed(self, name, fn):
        def call(*args, **kwargs):
            self.current = name
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.current = None
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1
                self.elements[name] += getattr(args[0], "size", 0) if args else 0
        return call

    def clear(self):
        for counter in (self.seconds, self.calls, self.elements, self.threads):
            counter.clear()

    def observe(self, k):
        """threads.observer: the threads a split of the kernel running now (else of Adam) used."""
        name = self.current or "Adam (optimiser step)"
        self.threads[name] = max(k, self.threads.get(name, 1))

    def overhead(self, n=20000):
        """Seconds a timed call costs outside its own timer (measured on an empty function)."""
        module = types.ModuleType("probe")
        module.empty = lambda *args: None
        probe = TimedKernels(module)
        t0 = time.perf_counter()
        for _ in range(n):
            probe.empty(None)
        return max(0.0, (time.perf_counter() - t0 - probe.seconds["empty"]) / n)


def profile_course_lib(size, steps):
    """-> (wall seconds per step, {row: seconds per step}, {kernel: calls per step}, faults, system s per step)."""
    import course_lib as cl
    from course_lib.kernels._fast import threads

    timed = TimedKernels(cl.kernels)
    threads.observer = timed.observe
    model = swappable(make_config(size))
    model.swapped = timed
    opt = cl.optim.Adam(model.params, lr=1e-4)
    tokens, targets = make_batch(size)
    adam = [0.0]

    def step():
        model.loss(tokens, targets)
        grads = model.backward()
        t0 = time.perf_counter()
        opt.step(grads)
        adam[0] += time.perf_counter() - t0
        return grads
    step()
    step()                      # the first steps also grow the heap to what a step needs
    timed.clear()
    adam[0] = 0.0
    wall, usage = _run(step, steps)
    rows = {name: s / steps for name, s in timed.seconds.items()}
    rows["Adam (optimiser step)"] = adam[0] / steps
    rows["profiling: the timers' own cost"] = timed.overhead() * sum(timed.calls.values()) / steps
    rows["the rest: Python between the kernels"] = np.sum(wall) / steps - sum(rows.values())
    calls = {name: n / steps for name, n in timed.calls.items()}
    calls["gelu elements"] = timed.elements["gelu_forward"] / steps
    calls["threads"] = dict(timed.threads)
    threads.observer = None
    figures = alone(model, opt, step())
    figures["Python + Adam, kernels' work taken out"] = without_kernels(model, opt, tokens, targets)
    return float(np.median(wall)), rows, calls, *usage, figures


def swappable(config):
    """A Transformer (seed 0) that runs on the kernel module in its attribute `swapped`."""
    import course_lib as cl

    class Swappable(cl.Transformer):
        kernels = property(lambda self: self.swapped)
    return Swappable(config, seed=0)


def without_kernels(model, opt, tokens, targets, repeats=30):
    """Median seconds of a step (loss, backward, Adam) of model (from swappable()), whose kernels return
    what they returned in a step recorded first, without the work: Python around the kernels,
    NumPy's work between them, the input checks and Adam, with every array in the caches.
    (The skip paths add into the recorded arrays again and again: their values grow, their time does not.)"""
    import course_lib as cl
    kept = model.swapped
    model.swapped = replay = ReplayedKernels(cl.kernels)
    try:
        model.loss(tokens, targets)
        model.backward()                    # recorded
        replay.play()

        def step():
            model.loss(tokens, targets)
            opt.step(model.backward())
        step()
        return median_seconds(step, repeats)
    finally:
        model.swapped = kept


def alone(model, opt, grads, repeats=30):
    """Medians of GELU (on the first block's hidden layer of the last step) and of Adam (on the last
    step's gradients), each called again and again by itself: with its data in the caches and the
    other core idle, the least time it takes on this machine. GELU also with its saved arrays
    fetched from memory, as in the step: there the products between forward and backward push
    h and y out of the caches, and only the array just made (h for the forward, dy for the
    backward) is still in them. -> {row: seconds or s per element}."""
    import course_lib as cl

    def median(fn, before=None):
        return median_seconds(fn, repeats, before)
    figures = {"Adam": median(lambda: opt.step(grads))}
    saved = model.saved["blocks"][0] if model.saved["blocks"] else {}
    if model.config.activation == "gelu" and "ffn.h" in saved:
        h, y = saved["ffn.h"], saved["ffn.a"]
        dy = np.ones_like(h)
        forward, backward = lambda: cl.kernels.gelu_forward(h), lambda: cl.kernels.gelu_backward(dy, h, y)
        figures["GELU forward per element"] = median(forward) / h.size
        figures["GELU backward per element"] = median(backward) / h.size
        evict = _cache_flusher()
        figures["GELU forward per element, from memory"] = median(forward, lambda: (evict(), h.sum())) / h.size
        figures["GELU backward per element, from memory"] = median(backward, lambda: (evict(), dy.sum())) / h.size
    return figures


def median_seconds(fn, repeats, before=None):
    """Median seconds of fn() over `repeats` calls, each after before() (untimed) if given."""
    times = []
    for _ in range(repeats):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _cache_flusher():
    """-> flush(): reads an array of four times the largest cache (at least 64 MB), pushing out what was there."""
    largest, units = 0, {"K": 1 << 10, "M": 1 << 20}
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):     # "32768K"; none off Linux
        with open(path) as f:
            text = f.read().strip()
        number = text.rstrip("KM")
        if number.isdigit():
            largest = max(largest, int(number) * units.get(text[-1:], 1))
    return np.ones(min(max(4 * largest, 64 << 20), 1 << 30) // 8).sum


def targets(rows, calls):
    """The issue-25 figures of a course_lib profile (shares of the mean step, which the rows add up to)."""
    wall = sum(rows.values())
    attention = sum(s for name, s in rows.items() if name.startswith("attention"))
    gelu = rows.get("gelu_forward", 0.0) + rows.get("gelu_backward", 0.0)
    fixed = rows["Adam (optimiser step)"] + rows["the rest: Python between the kernels"]
    line = (f"  attention (forward + backward) {attention * 1e3:.2f} ms = {attention / wall:.1%} of the step; "
            f"Python between the kernels + Adam {fixed * 1e3:.3f} ms")
    if calls.get("gelu elements"):
        line += f"; GELU {gelu / calls['gelu elements'] * 1e9:.2f} ns per element (forward + backward)"
    return line


def profile_torch(size, steps):
    """-> (wall seconds per step, {op: self CPU seconds per step}, {op: calls per step}, faults, system s per step)."""
    from torch.profiler import ProfilerActivity, profile
    step = torch_step(size)
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        wall, usage = _run(step, steps)
    ops = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    rows = {e.key: e.self_cpu_time_total / 1e6 / steps for e in ops}
    calls = {e.key: e.count / steps for e in ops}
    return float(np.median(wall)), rows, calls, *usage


def _run(step, steps):
    """Times each step; -> (wall times, (page faults per step, system seconds per step))."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    wall = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        wall.append(time.perf_counter() - t0)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, ((after.ru_minflt - before.ru_minflt) / steps, (after.ru_stime - before.ru_stime) / steps)


def report(name, wall, rows, calls, faults, system, top, alone=None):
    print(f"\n{name}: {wall * 1e3:.2f} ms a step (median); {faults:,.0f} page faults and "
          f"{system * 1e3:.1f} ms of system time a step")
    ranked = sorted(rows.items(), key=lambda kv: -kv[1])
    for key, seconds in ranked[:top]:
        n = f"{calls[key]:g} calls" if key in calls else ""
        if key in calls.get("threads", {}):
            n += f"{', ' if n else ''}up to {calls['threads'][key]} threads"
        print(f"  {key[:44]:<44} {seconds * 1e3:9.3f} ms  {seconds / wall:6.1%}  {n}")
    if len(ranked) > top:
        print(f"  {len(ranked) - top} more, together {sum(s for _, s in ranked[top:]) * 1e3:.3f} ms")
    if "Adam (optimiser step)" in rows:
        print(targets(rows, calls))
    if alone:
        line = f"  alone, called again and again: Adam {alone['Adam'] * 1e3:.3f} ms"
        if "GELU forward per element" in alone:
            line += (f"; GELU forward {alone['GELU forward per element'] * 1e9:.2f} + backward "
                     f"{alone['GELU backward per element'] * 1e9:.2f} ns per element")
        print(line)
        floor = alone.get("Python + Adam, kernels' work taken out")
        if floor is not None:
            print(f"  the step with the kernels' work taken out (each returns what it returned): Python between "
                  f"the kernels + Adam {floor * 1e3:.3f} ms")
        if "GELU forward per element, from memory" in alone:
            print(f"  alone, its saved arrays from memory (as in the step): GELU forward "
                  f"{alone['GELU forward per element, from memory'] * 1e9:.2f} + backward "
                  f"{alone['GELU backward per element, from memory'] * 1e9:.2f} ns per element")


def make_profile(implementation, size):
    """In a worker: -> run(steps), the profile of that many steps."""
    profile = profile_torch if implementation == "pytorch" else profile_course_lib
    return lambda steps: profile(size, steps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=list(SIZES), default="mid")
    ap.add_argument("--steps", type=int, default=None, help="profiled steps (default: about 3 s of each)")
    ap.add_argument("--top", type=int, default=15, help="rows shown per library (default 15)")
    args = ap.parse_args()
    steps = args.steps or {"tiny": 300, "mid": 12, "gpt2-small": 2}[args.size]
    spec = SIZES[args.size]
    print(f"{time.strftime('%Y-%m-%d')}, {processor()}; {args.size}: batch {spec['batch']}, T {spec['seq']}, "
          f"{steps} steps each")
    titles = {"course_lib": "course_lib", "pytorch": "PyTorch eager (self CPU time per op)"}
    with started(make_profile, list(titles), args.size) as workers:
        for name, worker in workers.items():
            wall, rows, calls, faults, system, *alone = worker(steps)
            report(titles[name], wall, rows, calls, faults, system, args.top, *alone)
        if "pytorch" not in workers:
            print("\nPyTorch is not installed: course_lib alone")

if __name__ == "__main__":
    main()
