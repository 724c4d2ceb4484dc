"""Run a learner's exercise cells, the comparison and the training in a scratch process.

The process starts under the memory limit of course_lib.exercises.limits (RLIMIT_AS on Linux,
a watch from here elsewhere), in an empty scratch folder, and every learner cell under a time
limit of its own. What it finds goes back
as JSON. If the process dies anyway (a crash, or a loop inside NumPy that no signal
interrupts), the exercise it was running is set aside and the run starts again without it,
so one broken cell never costs the report of the others.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from ..exercises import limits
from . import cells

_LAUNCHER = limits.launcher_code("from course_lib.yours.scratch import main; main(sys.argv[2])")


class ScratchError(RuntimeError):
    """The scratch process could not give a report (not a learner's cell: those are reported)."""


def _log(path, **event):
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(event) + "\n")


def _isolate(found, run_phase, seconds, log):
    """run_phase(build(found without the failed parts)) within `seconds`, setting aside each part that
    fails in the model (an error, or the time limit while it ran) and trying again. -> (result, failed)."""
    from .backend import PartError, build
    failed = {}
    while True:
        backend = build({k: f for k, f in found.items() if k not in failed})
        try:
            with cells.time_limit(seconds):
                return run_phase(backend), failed
        except PartError as e:
            failed[e.part] = f"failed in the model: {e.message}"
        except (Exception, cells.CellTimeLimit) as e:   # in course_lib's code, after a learner's function ran
            if backend.last_part is None:
                raise ScratchError(f"the model failed with course_lib's functions alone: {cells.one_line(e)}") from e
            failed[backend.last_part] = ("ran past its time limit in the model (an endless loop?)"
                                         if isinstance(e, cells.CellTimeLimit) else
                                         f"the model failed after it ran: {cells.one_line(e)}")
        log(failed=sorted(failed))


def work(request: dict, events: str) -> dict:
    """Everything the scratch process does; -> the JSON-able report."""
    from .compare import compare, train_course_model
    exercises = cells.read_folder(request["folder"])
    namespaces = cells.run(exercises, skip=request["skip"], cell_seconds=request["cell_seconds"],
                           on_start=lambda ex: _log(events, exercise=ex.name))
    table = cells.statuses(exercises, namespaces)
    found = cells.functions(exercises, namespaces, table)     # course_lib's helpers stand in from here on
    cells.check(exercises, namespaces, table, request["cell_seconds"],
                on_start=lambda name: _log(events, exercise=name))
    report, failures = {}, {}
    if request["compare"]:
        _log(events, phase="compare")
        comparison, failed = _isolate(found, compare, request["phase_seconds"], lambda **e: _log(events, **e))
        report["comparison"] = comparison.errors
        failures.update(failed)
    if request["train"]:
        _log(events, phase="train")

        def run_training(backend):
            loop, own = cells.training_loop(backend.functions)
            mine, fit_run = train_course_model(_checked_loop(loop, backend), backend, **request["train"])
            return {"yours": asdict(mine) | {"history": None}, "fit": asdict(fit_run) | {"history": None},
                    "loop_is_yours": own}

        report["training"], failed = _isolate({k: f for k, f in found.items() if k not in failures},
                                              run_training, request["train_seconds"], lambda **e: _log(events, **e))
        failures.update(failed)
    for status in table:
        if status.name in failures:
            status.status, status.message = "error", failures[status.name]
    report["parts"] = [asdict(s) for s in table]
    report["cells_failed"] = [ex.name for ex in exercises if ex.status == "error"]
    return report


def _checked_loop(loop, backend):
    """The training loop, its calls routed through the backend (so a failure names it) and its
    history checked."""
    from .backend import PartError

    def run(model, backward, data, epochs, schedule, batch_size, max_norm, seed):
        history = backend.call("train_loop", model, backward, data, epochs, schedule, batch_size, max_norm,
                               seed) if backend.has("train_loop") else loop(model, backward, data, epochs,
                                                                            schedule, batch_size, max_norm, seed)
        if not isinstance(history, dict) or not isinstance(history.get("loss"), (list, tuple)):
            raise PartError("train_loop", "returned no history dict with a 'loss' list (Exercise 11.6's contract)")
        return history
    return run


def main(request_path: str) -> None:
    """The scratch process's entry point: request JSON in, report JSON out (beside it)."""
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    report = work(request, request["events"])
    Path(request["report"]).write_text(json.dumps(report), encoding="utf-8")


def run_in_scratch(folder, *, compare=True, train=None, timeout=600.0, memory=4 * 2**30, cell_seconds=30.0,
                   model_seconds=120.0, progress=False) -> dict:
    """The report of the scratch process for the learner's notebooks in `folder`.

    train: None, or fit-style settings (epochs, batch_size, lr, ...) to train the course model with.
    timeout bounds the whole run, cell_seconds each learner cell, model_seconds the comparison.
    Raises ScratchError if no report comes back even with the failing exercises set aside.
    """
    skip = {}
    with tempfile.TemporaryDirectory(prefix="course-yours-") as private:
        for _ in range(50):
            request = {"folder": str(Path(folder).resolve()), "skip": skip, "compare": compare,
                       "train": train, "cell_seconds": cell_seconds, "phase_seconds": model_seconds,
                       "train_seconds": 0.9 * timeout, "events": str(Path(private) / "events.jsonl"),
                       "report": str(Path(private) / "report.json")}
            for stale in ("events.jsonl", "report.json"):
                (Path(private) / stale).unlink(missing_ok=True)
            request_path = Path(private) / "request.json"
            request_path.write_text(json.dumps(request), encoding="utf-8")
            outcome = _run_process(request_path, private, timeout, memory, progress)
            if outcome is None and Path(request["report"]).exists():
                return json.loads(Path(request["report"]).read_text(encoding="utf-8"))
            running = _last_exercise(request["events"])
            if running is None or running in skip:
                raise ScratchError(f"the scratch process stopped ({outcome or 'no report'}) outside the "
                                   f"learner's cells")
            skip[running] = f"a cell {outcome}"
    raise ScratchError("too many exercises stopped the scratch process")


def _run_process(request_path, private, timeout, memory, progress):
    """None when the process ended normally, else why it stopped (a phrase)."""
    scratch = Path(private) / "work"
    scratch.mkdir(exist_ok=True)
    env = limits.package_env()
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(int(memory)), str(request_path)], cwd=scratch,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=None if progress else subprocess.PIPE, start_new_session=True)
    watch = limits.MemoryWatch(proc.pid, int(memory))
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        limits.kill_tree(proc.pid)
        proc.wait()
        return f"ran past the time limit ({timeout:g} s for the whole run)"
    except KeyboardInterrupt:
        limits.kill_tree(proc.pid)
        proc.wait()
        raise
    finally:
        watch.stop()
    if watch.tripped:
        return f"used more memory than its limit ({memory / 2**30:g} GB)"
    if proc.returncode == 0:
        return None
    last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or [""]
    if proc.returncode < 0:
        return f"stopped the process (signal {-proc.returncode}; out of memory?)"
    return f"stopped the process (exit {proc.returncode}: {last[0][:200]})"


def _last_exercise(events):
    """The exercise the scratch process was running when it stopped (None: it was past the cells)."""
    last = None
    if os.path.exists(events):
        for line in Path(events).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if "phase" in event:
                return None
            last = event.get("exercise", last)
    return last
