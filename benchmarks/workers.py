"""Each implementation in its own process; the rounds alternate between them.

In one process the implementations would share more than the machine. NumPy's OpenBLAS
threads spin for a while after each call and take a core from the next implementation,
and course_lib's malloc settings (course_lib/kernels/_fast/memory.py) would serve
PyTorch's arrays too, which PyTorch's users do not get. So each implementation runs in
a worker process of its own, as its users run it. The parent asks the workers for one
round each in turn (A, B, C, A, B, C, ...), so that all of them see the same load of the
machine, and pauses SETTLE seconds before each round, for the threads of the previous
one to go to sleep.

    with started(make_round, ["course_lib", "pytorch"], "mid") as workers:
        seconds = workers["pytorch"](10)    # in its process: make_round("pytorch", "mid")(10)

A worker starts with the parent's environment (OPENBLAS_NUM_THREADS, say), plus its
implementation's ENVIRONMENT. `make_round` must be a function at the top level of a
module: it travels by name.
"""
import contextlib
import multiprocessing
import os
import time
import traceback

SETTLE = 0.3    # idle BLAS / OpenMP threads spin for ~0.1 s after their last call

# PyTorch imports course_lib for its starting parameters: without this it would get course_lib's malloc
# and OpenBLAS settings.
ENVIRONMENT = {name: {"COURSE_LIB_KEEP_FREED_MEMORY": "0", "COURSE_LIB_SHORT_SPIN": "0"}
               for name in ("pytorch", "pytorch-sdpa", "pytorch-compile")}


class WorkerError(RuntimeError):
    """Raised in the parent for an exception in the worker; the message is the worker's traceback."""


class Worker:
    def __init__(self, factory, *args, env=None):
        """Start a process that calls factory(*args) once and then runs what it returned on request.
        An exception there (an ImportError for a library not installed, say) is raised here."""
        context = multiprocessing.get_context("spawn")      # a fresh interpreter: nothing shared with this one
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=_serve, args=(theirs, factory, args), daemon=True)
        saved = dict(os.environ)
        os.environ.update(env or {})                        # the new process copies the environment as it starts
        try:
            self._process.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        theirs.close()
        try:
            self._answer()
        except BaseException:
            self.close()
            raise

    def __call__(self, *args):
        self._conn.send(args)
        return self._answer()

    def _answer(self):
        try:
            kind, value = self._conn.recv()
        except EOFError:
            raise WorkerError(f"the worker process ended (exit code {self._process.exitcode})") from None
        if kind == "import error":
            raise ImportError(value)
        if kind == "error":
            raise WorkerError(value)
        return value

    def close(self):
        if self._process.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()


def _serve(conn, factory, args):
    try:
        run = factory(*args)
    except ImportError as err:
        conn.send(("import error", str(err)))
        return
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    conn.send(("ready", None))
    while (request := conn.recv()) is not None:
        try:
            conn.send(("result", run(*request)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))


@contextlib.contextmanager
def started(factory, names, *args):
    """{name: Worker(factory, name, *args)} in name's ENVIRONMENT, all closed at the end.
    PyTorch is left out when it is not installed."""
    workers = {}
    try:
        for name in names:
            try:
                workers[name] = Worker(factory, name, *args, env=ENVIRONMENT.get(name))
            except ImportError:
                if not name.startswith("pytorch"):
                    raise
        yield workers
    finally:
        for worker in workers.values():
            worker.close()


def alternate(workers, repeats, *args):
    """repeats rounds of every worker in turn, each after a SETTLE pause: {name: [result of each round]}."""
    results = {name: [] for name in workers}
    for _ in range(repeats):
        for name, worker in workers.items():
            time.sleep(SETTLE)
            results[name].append(worker(*args))
    return results
