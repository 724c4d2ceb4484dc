"""Notice a learner's function that hands its exercise to course_lib's own implementation.

A checker names the course_lib functions that do its exercise:

    @checker(library=["kernels.layernorm_backward"])

(a kernel brings its NumPy twin, kernels.numpy_ref.layernorm_backward, along). While the
learner's function runs, a call to one of them is stopped and recorded, however the
function reached it: an attribute chain through `cl`, a name imported into the notebook,
a closure, a default argument, a dict, or the learner's function being the kernel itself.
The check fails, naming what was called. Other course_lib functions stay allowed:
Exercise 10.2's block backward may call cl.kernels.layernorm_backward. (Whatever runs
inside the learner's function counts, so a checker must not pass it a callable that uses
the exercise's own kernel.)

How calls are seen: a plain Python function by its code object, through a profile
function (sys.setprofile) that is on only while the learner's function runs; a Numba
kernel (a compiled dispatcher, which Python's profiler never sees) by giving the
dispatcher object, for that time, a subclass of its class that records each call. The
object stays the same, so every reference to it records. The call is stopped before the
library's code runs: a kernel given arrays of the wrong layout could crash the process.
"""
import contextlib
import functools
import importlib
import sys
import types

__all__ = ["Solution", "HandedToLibrary", "equivalent", "part", "watched"]

_HINT = ("write the computation yourself (other course_lib functions may help): course_lib's "
         "version is there to compare with once yours passes")


class HandedToLibrary(BaseException):
    """The learner's function called what its exercise asks for. A BaseException, so that it
    passes the checkers' `except Exception` (which report the learner's own errors) on its
    way to the checker's runner."""

    def __init__(self, solution):
        super().__init__(solution.message)
        self.name, self.message, self.hint = solution.name, solution.message, solution.hint


class Solution:
    """A course_lib function that does an exercise: path below course_lib, e.g.
    "kernels.layernorm_backward" or "model.Transformer.backward" (a property counts its
    getter). what: how the report describes it; message and hint replace the report's."""

    def __init__(self, path, what=None, message=None, hint=None):
        self.path, self.name = path, f"course_lib.{path}"
        if what is None:
            what = ("the NumPy twin of the kernel" if path.startswith("kernels.numpy_ref.")
                    else "the kernel" if path.startswith("kernels.") else "the function")
            what += " this exercise asks you to write"
        self.message = message or f"your function calls {self.name}, {what}"
        self.hint = hint or _HINT

    @functools.cached_property
    def target(self):
        """The object the path names (found on first use: checks load before kernels)."""
        parts = self.path.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module("course_lib." + ".".join(parts[:i]))
            except ImportError:
                continue
            for part in parts[i:]:
                obj = getattr(obj, part)
            return obj
        raise ImportError(f"no course_lib.{self.path}")


_INSIDE = "which computes what this exercise asks you to write, inside it"
_PART = "which does part of what this exercise asks you to write"


def equivalent(path):
    """A course_lib function that is not the exercise's solution but computes its answer inside
    (cross-entropy's probabilities are a softmax): as much a library call, and as absent while
    an exercise is graded. Each such function is listed, and tested, with its exercise."""
    sol = Solution(path, what=_INSIDE)
    sol.role = _INSIDE
    return sol


def part(path):
    """A course_lib kernel that does one step of the exercise (9.2's network is made of linear and
    ReLU layers): a library call there, reported as a part of the answer, not the whole of it."""
    sol = Solution(path, what=f"a kernel {_PART}")
    sol.role = _PART
    return sol


def solutions(entries):
    """Solution objects for a checker's `library` (paths or Solutions), each kernel's NumPy
    twin added after it, and the compiled helpers of its module that a kernel written in
    Python calls (layernorm_backward's _backward_rows: the kernel's loops themselves)."""
    out = []
    for entry in entries:
        sol = entry if isinstance(entry, Solution) else Solution(entry)
        out.append(sol)
        kernel = sol.path.removeprefix("kernels.")
        if kernel != sol.path and "." not in kernel:
            if hasattr(importlib.import_module("course_lib.kernels.numpy_ref"), kernel):
                role = getattr(sol, "role", None)
                twin = role and f"the NumPy twin of {sol.name}, {role}"
                out.append(Solution("kernels.numpy_ref." + kernel, what=twin))
            out += _helpers(sol)
    return out


def _helpers(sol):
    """Solutions for the module's private compiled kernels that sol's Python function names (and
    the parallel loop of each that has one)."""
    fn = sol.target
    if not isinstance(fn, types.FunctionType):
        return []
    module = sys.modules[fn.__module__]
    path = fn.__module__.removeprefix("course_lib.")
    out = []
    what = f"the loops of {sol.name}, " + getattr(sol, "role", "the kernel this exercise asks you to write")
    for name in fn.__code__.co_names:
        kernel = getattr(module, name, None)
        if name.startswith("_") and _is_dispatcher(kernel):
            paths = [f"{path}.{name}"] + ([f"{path}.{name}.ranges"] if hasattr(kernel, "ranges") else [])
            for helper in (Solution(p, what=what) for p in paths):      # a kernel(split=True): its loop too
                helper.name = sol.name          # reported as the kernel it is part of
                out.append(helper)
    return out


def watched(fn, entries):
    """fn, but raising HandedToLibrary when it calls one of `entries` (at that call; or when it
    returns, if fn caught the exception)."""
    targets = _targets(solutions(entries))

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with _recording(*targets) as calls:
            try:
                result = fn(*args, **kwargs)
            except Exception:
                if calls:       # what the library did, not the error that followed, is the news
                    raise HandedToLibrary(calls[0]) from None
                raise
        if calls:
            raise HandedToLibrary(calls[0])
        return result
    return run


# ----- recording --------------------------------------------------------------------------

_active = []            # the calls list of the recording under way (at most one)
_listeners = {}         # id(dispatcher) -> Solution, while recording
_RECORDING_CLASSES = {}


def _code_objects(obj):
    """The code objects whose run is a call of obj (a function, method, property or kernel)."""
    if isinstance(obj, property):
        obj = obj.fget
    obj = getattr(obj, "__func__", obj)                     # a bound or class method
    codes = [getattr(obj, "__code__", None), getattr(getattr(obj, "py_func", None), "__code__", None)]
    return [c for c in codes if c is not None]


def _is_dispatcher(obj):
    """A Numba dispatcher: compiled, called without running Python code."""
    return hasattr(obj, "py_func") and not isinstance(obj, types.FunctionType)


def _recording_class(cls):
    """A subclass of a dispatcher class whose calls are reported to _listeners first."""
    if cls not in _RECORDING_CLASSES:
        def __call__(self, *args, **kwargs):
            solution = _listeners.get(id(self))
            if solution is not None and _active:
                _active[0].append(solution)
                raise HandedToLibrary(solution)
            return cls.__call__(self, *args, **kwargs)
        _RECORDING_CLASSES[cls] = type(cls.__name__, (cls,), {"__call__": __call__,
                                                              "__module__": cls.__module__})
    return _RECORDING_CLASSES[cls]


def _targets(sols):
    """({code object: Solution}, {id: (dispatcher, Solution)}): what _recording watches."""
    by_code, dispatchers = {}, {}
    for sol in sols:
        obj = sol.target
        for code in _code_objects(obj):
            by_code.setdefault(code, sol)
        if _is_dispatcher(obj):
            dispatchers.setdefault(id(obj), (obj, sol))
    return by_code, dispatchers


@contextlib.contextmanager
def _recording(by_code, dispatchers):
    """Stop and record calls of the watched code objects and dispatchers while inside; yields
    the list of calls (Solutions). A recording inside another one shares it."""
    if _active:
        yield _active[0]
        return
    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in by_code:
            calls.append(by_code[frame.f_code])
            raise HandedToLibrary(by_code[frame.f_code])    # (Python then turns profiling off)

    # a profiler already running (%prun) is left alone: only the kernels are watched then
    profiling = by_code and sys.getprofile() is None
    swapped = []
    _active.append(calls)
    try:
        for obj, sol in dispatchers.values():
            cls = type(obj)
            try:
                obj.__class__ = _recording_class(cls)
            except TypeError:       # a layout Python refuses: its py_func is still watched
                continue
            _listeners[id(obj)] = sol
            swapped.append((obj, cls))
        if profiling:
            sys.setprofile(profile)
        yield calls
    finally:
        if profiling:
            sys.setprofile(None)
        for obj, cls in swapped:
            obj.__class__ = cls
            del _listeners[id(obj)]
        _active.clear()
