"""The sandbox's side of grading: runs a learner's exercise cells and answers calls of their
functions over the channel (channel.py). It runs untrusted, in a process of its own (see
sandbox.py); nothing it sends is believed: the judge checks what the functions return.

    python -m course_lib.instructor.worker      (stdin, stdout: the channel)

Requests, one at a time:
    {"op": "start", "cells": [[exercise, [source, ...]], ...]}  run them in one namespace (np,
        cl, math), in order -> {"op": "ready", "errors": [[exercise, cell k, one line], ...]}
    {"op": "get", "names": [...]}   -> {"op": "return", "value": [function or None, ...]}
    {"op": "call", ...}             -> callbacks, then {"op": "return" | "raise", ...}
"""
from __future__ import annotations

import io
import math
import os
import sys
import traceback


CELL_FILE = "<exercise cell"       # the file name of the learner's cells in tracebacks


class _Discard(io.TextIOBase):
    """Where the learner's printing goes: nowhere (the channel is stdout's file)."""

    def write(self, text):
        return len(text)


def _uses(fn, namespace) -> dict:
    """The notebook's functions that fn's code calls, by name (the judge checks those first)."""
    code = getattr(fn, "__code__", None)
    names, stack = set(), [code] if code is not None else []
    while stack:
        c = stack.pop()
        names |= set(c.co_names)
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    return {n: namespace[n] for n in sorted(names)[:200]
            if callable(namespace.get(n)) and getattr(namespace[n], "__module__", None) == namespace["__name__"]}


def _where(error: BaseException, filename: str):
    """[line number, line] of the last frame of the learner's cells in the traceback."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith(filename)]
    return [frames[-1].lineno, frames[-1].line or ""] if frames else None


def _worker_class():
    """The Peer of the sandbox's side: a call that reached a removed solution answers "raise"
    with its name (the judge makes it a library call), even where the learner's code caught it."""
    from course_lib.instructor import removed
    from course_lib.instructor.channel import Peer

    class Worker(Peer):
        def on_error(self, error):
            found = removed.calls[-1] if removed.calls else None
            return {"type": type(error).__name__, "message": str(error)[:2000],
                    "where": _where(error, CELL_FILE), "library": found}

        def answer(self, document, arrays):
            removed.calls.clear()
            try:
                super().answer(document, arrays)
            except removed.SolutionRemoved as e:     # a BaseException: it passed the learner's handlers
                self.send({"op": "raise", "type": "SolutionRemoved", "message": str(e), "library": e.name})

        def send(self, document, values=None):
            if document.get("op") == "return" and removed.calls:   # called one, and caught what it raised
                document = {"op": "raise", "type": "SolutionRemoved", "library": removed.calls[-1],
                            "message": "called a function that is not there while grading"}
                values = None
            super().send(document, values)

        def functions(self, names, namespace) -> None:
            """Answer "get": each name's function (with those of the notebook it calls), or None."""
            from course_lib.instructor.channel import describe
            found = []
            for name in names:
                fn = namespace.get(name)
                if callable(fn):
                    uses = {n: {"fn": self.keep(f), **describe(f)} for n, f in _uses(fn, namespace).items()}
                    found.append({"fn": self.keep(fn), **describe(fn), "uses": uses})
                else:
                    found.append(None)
            Peer.send(self, {"op": "return", "value": {"list": found}})
    return Worker


def _run_cells(cells, namespace) -> list:
    """Run each exercise's cells in the namespace; -> [exercise, index of the cell, one line] for
    each exercise whose cell raised (its later cells are not run)."""
    errors = []
    for exercise, sources in cells:
        for k, source in enumerate(sources):
            try:
                exec(compile(source, f"{CELL_FILE} {exercise} {k}>", "exec"), namespace)
            except BaseException as e:       # SystemExit and the removed solutions' too
                errors.append([exercise, k, (f"{type(e).__name__}: {e}".strip().splitlines() or [""])[0][:300]])
                break
    return errors


def main() -> None:
    # the channel keeps stdin and stdout; the learner's code (and anything it starts) gets neither
    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    sys.stdout = sys.stderr = _Discard()

    import numpy as np
    import course_lib
    from course_lib.instructor.channel import ChannelError

    namespace = {"__name__": "learner", "np": np, "cl": course_lib, "math": math}
    peer = _worker_class()(reader, writer)
    while True:
        try:
            document, arrays = peer.receive()
        except ChannelError:
            return                                   # the judge is done (or gone)
        op = document.get("op")
        if op == "start":
            peer.send({"op": "ready", "errors": _run_cells(document["cells"], namespace)})
        elif op == "get":
            peer.functions(document["names"], namespace)
        elif op == "call":
            peer.answer(document, arrays)
        else:
            return


if __name__ == "__main__":
    main()
