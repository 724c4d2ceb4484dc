"""A learner's exercise cells: found in their notebooks, run into one namespace per notebook.

Only the cells between an exercise's heading and its checker call run (as `grade` finds them),
in the notebook's order, in a namespace that starts with `np`, `cl` and `math`: not the
notebook's other cells (plots, trainings), so a function that reads a variable of its notebook
fails by name when the model calls it. A cell that raises, or runs past `cell_seconds`, is
reported by exercise; the others still run.
"""
from __future__ import annotations

import ast
import contextlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import numpy as np

from ..exercises import limits
from ..exercises.cells import code_cells, expected_exercises
from .parts import HELPERS, PARTS, on_model_caches, train_loop_in

NOTEBOOK = re.compile(r"^(\d\d)_.*\.ipynb$")


class CellTimeLimit(BaseException):
    """Raised in a learner's cell at its time limit (BaseException: a bare `except Exception` in the
    learner's code does not swallow it)."""


@dataclass
class Exercise:
    name: str                       # "Exercise 2.1"
    notebook: str                   # file name
    sources: list                   # its code cells, in order
    status: str = "not run"         # ran / error / skipped
    message: str = ""


@dataclass
class Status:
    """What became of one part: yours, not done, missing or error (course_lib's stands in for all but yours);
    check: what its exercise's checker said of the learner's function (passed, failed, not done, library
    call, error; "" when it is not theirs), check_message: why, when it did not pass."""
    name: str
    exercise: str
    role: str
    status: str
    message: str = ""
    check: str = ""
    check_message: str = ""


def read_folder(folder) -> list[Exercise]:
    """The exercises of every course notebook (NN_name.ipynb) in `folder`, in order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder of notebooks")
    found = []
    for path in sorted(p for p in folder.iterdir() if NOTEBOOK.match(p.name)):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as e:  # nbformat raises several kinds for a broken file
            found.append(Exercise(f"{path.name}", path.name, [], "error", f"not a readable notebook ({e})"))
            continue
        for ex in expected_exercises(nb):
            cells = [nb.cells[i].source for i in code_cells(nb, ex)]
            found.append(Exercise(ex.name, path.name, cells))
    return found


def time_limit(seconds):
    """CellTimeLimit in this (main) thread after `seconds`; none when seconds is None."""
    return limits.time_limit(seconds, CellTimeLimit)


def one_line(error: BaseException, limit=300) -> str:
    if isinstance(error, CellTimeLimit):
        return "ran past its time limit (an endless loop?)"
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    return text[:limit]


def run(exercises, skip=(), cell_seconds=None, on_start=None) -> dict:
    """Run the exercises' cells (all but those named in `skip`): notebook file name -> namespace.
    Each exercise's status and message are set in place. The learner's printing is swallowed."""
    import course_lib
    namespaces = {}
    for ex in exercises:
        if ex.status == "error":        # an unreadable notebook
            continue
        ns = namespaces.setdefault(ex.notebook, {"__name__": f"yours_{ex.notebook[:2]}", "np": np,
                                                 "cl": course_lib, "math": math})
        if ex.name in skip:
            ex.status, ex.message = "error", skip[ex.name] if isinstance(skip, dict) else "skipped"
            continue
        if on_start:
            on_start(ex)
        ex.status = "ran"
        for source in ex.sources:
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                        time_limit(cell_seconds):
                    exec(compile(source, f"<{ex.notebook}, {ex.name}>", "exec"), ns)
            except (Exception, CellTimeLimit) as e:   # the learner's cell: report it and go on
                ex.status, ex.message = "error", f"a cell raised {one_line(e)}" if not isinstance(
                    e, CellTimeLimit) else f"a cell {one_line(e)}"
                break
    return namespaces


def _is_stub(sources, name) -> bool:
    """True when the def of `name` in these cells still raises NotImplementedError (the stub)."""
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Raise) and inner.exc is not None:
                        target = inner.exc.func if isinstance(inner.exc, ast.Call) else inner.exc
                        if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                            return True
    return False


def statuses(exercises, namespaces) -> list[Status]:
    """One Status per part of the model, from the exercises that ran."""
    by_name = {ex.name: ex for ex in exercises}
    unreadable = {int(ex.notebook[:2]): f"{ex.notebook} {ex.message}" for ex in exercises
                  if ex.name == ex.notebook}           # read_folder's entry for a notebook it could not read
    out = []
    for part in PARTS:
        ex = by_name.get(part.exercise)
        number = int(part.exercise.split()[1].split(".")[0])
        if ex is None and number in unreadable:
            out.append(Status(part.name, part.exercise, part.role, "error", f"its notebook, {unreadable[number]}"))
        elif ex is None:
            out.append(Status(part.name, part.exercise, part.role, "missing",
                              f"no notebook in the folder sets {part.exercise}"))
        elif ex.status == "error":
            out.append(Status(part.name, part.exercise, part.role, "error", ex.message))
        elif not callable(namespaces.get(ex.notebook, {}).get(part.name)):
            out.append(Status(part.name, part.exercise, part.role, "missing",
                              f"{part.exercise}'s cells define no function {part.name}"))
        elif _is_stub(ex.sources, part.name):
            out.append(Status(part.name, part.exercise, part.role, "not done"))
        else:
            out.append(Status(part.name, part.exercise, part.role, "yours"))
    return out


def check(exercises, namespaces, table, cell_seconds=None, on_start=None) -> None:
    """Run each exercise's checker, as its check cell does, on the learner's functions of the parts that
    are theirs; set each such Status's check and check_message in place. The reports are swallowed."""
    import course_lib.checks
    notebook = {ex.name: ex.notebook for ex in exercises}
    yours = [s for s in table if s.status == "yours"]
    for exercise in dict.fromkeys(s.exercise for s in yours):
        parts = [p for p in PARTS if p.exercise == exercise]       # 4.1 and 6.5 check two functions
        ns = namespaces[notebook[exercise]]
        if on_start:
            on_start(exercise)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                    time_limit(cell_seconds):
                result = getattr(course_lib.checks, parts[0].checker)(*(ns.get(p.name) for p in parts))
            verdict = _verdict(result)
        except (Exception, CellTimeLimit) as e:    # the learner's code, inside the checker
            verdict = ("error", f"the checker stopped: {one_line(e)}")
        for s in yours:
            if s.exercise == exercise:
                s.check, s.check_message = verdict


def _verdict(result) -> tuple:
    """(check, check_message) from a checker's Result."""
    if result.passed:
        return "passed", ""
    if not result.done:
        return "not done", "not done yet"
    where = f"[{result.stage}] " if result.stage else ""
    return ("library call" if result.library else "failed"), where + (result.message or "")


def functions(exercises, namespaces, table) -> dict:
    """{part: the learner's function} for the parts that are yours; course_lib's helpers stand in,
    in every namespace, for the helpers that are not (so that a learner's 4.4 or 11.6 can call them)."""
    notebook = {ex.name: ex.notebook for ex in exercises}
    yours = {s.name for s in table if s.status == "yours"}
    found = {s.name: namespaces[notebook[s.exercise]][s.name] for s in table if s.status == "yours"}
    for ns in namespaces.values():
        for name, helper in HELPERS.items():
            if name not in yours:
                ns[name] = helper
        if "block_backward" in found:   # what the learner's model_backward (10.3) calls by name
            ns["block_backward"] = on_model_caches(found["block_backward"])
    return found


def training_loop(found) -> tuple:
    """(the training loop, True when it is the learner's): their train_loop (11.6), else course_lib's
    loop on their adam_step and clip_by_global_norm (or course_lib's where those are not done)."""
    if "train_loop" in found:
        return found["train_loop"], True
    return train_loop_in({name: found.get(name, HELPERS[name]) for name in ("adam_step", "clip_by_global_norm")}), False
