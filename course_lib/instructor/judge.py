"""Grade one learner's notebook: the checkers run here, the learner's code in a sandbox.

    python -m course_lib.instructor.judge REQUEST_JSON     (grade.py starts it, one per notebook)

The judge is trusted (it runs as the grader's user and imports the real course_lib). For each
exercise of the learner's notebook, in order:

    judge ──channel (stdin/stdout: JSON and raw array bytes, no pickle)──> worker, in a sandbox (sandbox.py)
      the worker runs the notebook's exercise cells up to this one, on a course_lib without
      this exercise's solution (stripped.py), and answers calls of the learner's functions;
      the exercise's checker runs here, on proxies of them: every value it judges came back
      through the channel, and the functions it passes in (a gradient's f, a loop's backward)
      run here when the learner's code calls them.

The checker's random cases are drawn from a secret seed (the checks' fresh cases,
checks/core.py's case_rng): no answer table learned from the notebook's checker passes them.
Where they fail, the checker runs again on the notebook's own cases, so that the row reads as
the notebook printed it (or, where only the fresh cases fail, says so). One JSON line per exercise on stdout as it ends
({"exercise", "status", "stage", "message"}); the worker of each exercise is killed when it
ends (and at the notebook's time limit, counted from the judge's start).
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..exercises import BY_NUMBER, limits
from ..exercises.cells import Exercise, code_cells, read_cells
from . import sandbox
from .channel import ChannelError, Peer, exception
from .judge_runner import MAX_ROW
from .stripped import Stripped


class SandboxEnded(BaseException):
    """The worker ended or broke the channel while the checker waited on it (a BaseException: it
    passes the checkers' own handlers)."""


def checker_call(exercise: str, source: str) -> tuple[str, list[str]] | None:
    """(checker, argument names) that grade `exercise` ("Exercise 1.1"): the checker of its row of
    course_lib.exercises, whichever the check cell names, on the names the cell's
    `cl.checks.check_x(f, g)` call passes; None for an exercise without one or a cell without the call."""
    row = BY_NUMBER.get(exercise.removeprefix("Exercise "))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("check_") and all(isinstance(a, ast.Name) for a in node.args)):
            return (row.checker, [a.id for a in node.args]) if row and row.checker else None
    return None


def definition_paths(library) -> dict[str, object]:
    """{where each solution of a checker's library is defined, below course_lib ("kernels.softmax.
    softmax_forward"): its Solution}: the definitions stripped.py takes out."""
    from ..checks.library import solutions
    paths = {}
    for sol in solutions(library):
        obj = sol.target
        obj = getattr(obj, "fget", obj)
        obj = getattr(obj, "py_func", obj)
        obj = getattr(getattr(obj, "loop_of", None), "py_func", obj)      # a split kernel's loop: its rows
        module, qualname = getattr(obj, "__module__", ""), getattr(obj, "__qualname__", "")
        if module.startswith("course_lib.") and qualname:
            paths.setdefault(f"{module.removeprefix('course_lib.')}.{qualname}", sol)
    return paths


class _Judge:
    """Grades the exercises of one notebook, one worker each, against the notebook's deadline."""

    def __init__(self, request: dict, emit):
        self.request, self.emit = request, emit
        self.memory, self.user = request["memory"], request.get("user")
        self.deadline = time.monotonic() + request["timeout"]
        self.tree = Stripped()
        self.cell_index = {}      # exercise -> the notebook indices of the cells sent
        self.broken = set()       # exercises whose cells raised: not run again for later ones

    def proxy_maker(self, peer, library):
        """Stand-ins for the learner's functions: a call runs in the worker; a removed solution it
        reached is HandedToLibrary (as in the notebook), an end of the channel SandboxEnded."""
        from ..checks.library import HandedToLibrary, Solution
        named = {f"course_lib.{path}": sol for path, sol in definition_paths(library).items()}

        def on_raise(document):
            found = document.get("library")
            if found:
                sol = named.get(found) or Solution(str(found).removeprefix("course_lib.")[:200],
                                                   what="which holds what this exercise asks you to write")
                return HandedToLibrary(sol)
            error = exception(document.get("type"), document.get("message"))
            where = document.get("where")
            if isinstance(where, list) and len(where) == 2 and isinstance(where[0], int):
                error.learner_line = (where[0], str(where[1])[:200])     # core._learner_frame shows it
            return error
        peer.on_raise = on_raise

        def make_proxy(handle, name, params, uses):
            def proxy(*args, **kwargs):
                try:
                    return peer.call(handle, args, kwargs)
                except ChannelError as e:
                    raise SandboxEnded(str(e)) from None
            proxy.__name__ = proxy.__qualname__ = name
            proxy.__signature__ = inspect.Signature(
                [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params if p.isidentifier()])
            proxy.uses = uses
            return proxy
        return make_proxy

    def grade(self, cells: list, exercise: str, names: list[str], checker) -> tuple[str, str, str]:
        """(status, stage, message) of one exercise: cells, [exercise, [sources]] up to it."""
        try:
            return self._grade(cells, exercise, names, checker)
        except OSError as err:    # the grader's side (a disk that another's worker filled): this exercise only
            return "error", "", f"the grader could not run it ({type(err).__name__}: {str(err)[:200]})"

    def _grade(self, cells, exercise, names, checker):
        with tempfile.TemporaryDirectory(prefix="course-scratch-", ignore_cleanup_errors=True) as tmp:
            lib, scratch = Path(tmp) / "lib", Path(tmp) / "work"
            scratch.mkdir()
            # as root, every worker runs as a user id of its own (sandbox.fresh_account): it
            # can signal no other worker, and what it leaves behind is found by its owner
            account = (sandbox.fresh_account(self.user[1] if self.user else None)
                       if sandbox.as_root() and (self.user or sandbox.bwrap()) else None)
            if account:
                os.chmod(tmp, 0o711)     # the worker's user reaches its folders inside, lists nothing
            self.tree.build(lib, list(definition_paths(checker.library)))
            process = sandbox.start_worker(lib, scratch, self.memory, account, self.request.get("bwrap_as_account"))
            self.emit({"worker": process.pid, "account": list(account) if account else None})
            watch = limits.MemoryWatch(process.pid, self.memory)
            disk = limits.DiskWatch(process.pid, lambda: sandbox.written(Path(tmp), account), sandbox.DISK_LIMIT)
            timer = threading.Timer(max(self.deadline - time.monotonic(), 0.001), limits.kill_tree, [process.pid])
            timer.start()
            try:
                peer = Peer(process.stdout, process.stdin)
                peer.make_proxy = self.proxy_maker(peer, checker.library)
                peer.send({"op": "start", "cells": [[name, [] if name in self.broken and name != exercise
                                                     else sources] for name, sources in cells]})
                self.broken.add(exercise)  # until its cells have run: if the worker dies in them,
                ready, _ = peer.receive()  # later exercises' workers do not run them again
                self.broken.discard(exercise)
                errors = {e[0]: e for e in ready.get("errors", []) if isinstance(e, list) and len(e) == 3}
                for name in errors:        # later exercises' workers do not run these cells again
                    self.broken.add(name)
                if exercise in errors:
                    _, k, text = errors[exercise]
                    if str(text).startswith("MemoryError"):
                        text = f"{text} (memory limit {self.memory / 2**30:g} GB)"
                    index = self.cell_index[exercise][k] if isinstance(k, int) and 0 <= k < len(
                        self.cell_index[exercise]) else "?"
                    return "error", "", f"cell {index} raised {str(text)[:300]}"
                peer.send({"op": "get", "names": names})
                found, arrays = peer.receive()
                fns = peer.decode(found.get("value"), arrays)
                if not isinstance(fns, list) or len(fns) != len(names):
                    raise ChannelError("an answer of unknown form")
                missing = [n for n, f in zip(names, fns) if not callable(f)]
                if missing:
                    return "error", "", f"its cells define no function {missing[0]} (NameError)"
                return self._check(checker, fns)
            except (ChannelError, SandboxEnded) as e:
                if time.monotonic() >= self.deadline:
                    return "error", "", f"time limit reached ({self.request['timeout']:g} s for the whole notebook)"
                if watch.tripped:
                    return "error", "", f"used more than its memory limit ({self.memory / 2**30:g} GB) and was stopped"
                if disk.tripped:
                    return "error", "", (f"wrote more than its disk limit ({sandbox.DISK_LIMIT / 2**30:g} GB) "
                                         f"and was stopped")
                return "error", "", f"the sandbox that ran its code ended ({e}): a crash, or killed for memory"
            finally:
                timer.cancel()
                watch.stop()
                disk.stop()
                sandbox.end(process, account)

    def _check(self, checker, fns) -> tuple[str, str, str]:
        from ..checks import core
        with contextlib.redirect_stdout(io.StringIO()):
            drawn = core.generators_drawn()
            # the random cases from a secret seed, which no learner's code has seen: they decide
            with core.fresh_cases(secrets.randbits(62)):
                result = checker(*fns)
            fresh = ""
            # a failure, where the checker has random cases: the notebook's own, so that the row
            # reads as the notebook printed it (unless only the fresh cases fail)
            if not result.passed and core.generators_drawn() > drawn:
                notebook = checker(*fns)
                if notebook.passed:
                    fresh = " (the grader's fresh random cases)"
                else:
                    result = notebook
        if result.passed:
            return "passed", "", ""
        message = result.message + (f" Hint: {result.hint}" if result.hint else "")
        return result.status, (result.stage or "") + (fresh if result.stage else ""), message


def judge(request: dict, emit) -> None:
    """Grade the notebook of `request` ({"notebook", "exercises", "calls", "timeout", "memory", "user"}: see
    judge_runner.run_notebook), calling emit(row) as each exercise ends."""
    from .. import checks
    nb = read_cells(request["notebook"])
    exercises = [Exercise(*ex) for ex in request["exercises"]]      # as grade found them, in order
    calls = request.get("calls")
    if calls is None:        # no instructor edition: the learner's check cells, each checker its exercise's
        calls = {ex.name: checker_call(ex.name, nb.cells[ex.check_cell].source) for ex in exercises}
    judge_ = _Judge(request, emit)
    done = []
    for ex in exercises:
        indices = code_cells(nb, ex)
        row = {"exercise": ex.name, "stage": "", "message": ""}
        tags = nb.cells[ex.check_cell].get("metadata", {}).get("tags", [])
        call = calls.get(ex.name)
        if not call:                # not an exercise of the instructor edition (grade drops its row)
            emit({**row, "status": "not reached", "message": "its check cell calls no checker by name"})
            continue
        checker = getattr(checks, str(call[0]), None)
        if getattr(checker, "exercise", None) != ex.name:
            emit({**row, "status": "error", "message": f"its check cell calls {str(call[0])[:60]}, which is "
                                                       f"not the checker of {ex.name}"})
            continue
        done.append([ex.name, [nb.cells[i].source for i in indices]])
        judge_.cell_index[ex.name] = indices
        if "skip-execution" in tags:
            row.update(status="not reached", message=f"its check cell (cell {ex.check_cell}) is tagged "
                                                     f"skip-execution: it never ran")
        elif time.monotonic() >= judge_.deadline:
            row.update(status="not reached", message=f"the notebook's time ({request['timeout']:g} s) "
                                                     f"ran out before it")
        else:
            status, stage, message = judge_.grade(done, ex.name, [str(n) for n in call[1]], checker)
            row.update(status=status, stage=stage, message=message)
        emit(row)


def _line(row: dict) -> str:
    """The row as one JSON line that judge_runner.py reads whole (MAX_ROW bytes at most): a longer
    message (a learner's text in it) is cut."""
    line, message = json.dumps(row), str(row.get("message", ""))
    while len(line) >= MAX_ROW and message:
        message = message[:len(message) * 3 // 4]
        line = json.dumps({**row, "message": message + " [cut]"})
    return line


def main(argv=None) -> None:
    request = json.loads((argv or sys.argv[1:])[0])
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)     # nothing else may write on the rows' stream

    def emit(row):
        out.write(_line(row) + "\n")
        out.flush()
    judge(request, emit)


if __name__ == "__main__":
    main()
