"""Grade one Gradescope submission and write Gradescope's results.json.

    python -m course_lib.instructor.gradescope ROOT [--timeout 300] [--memory 4]

`run_autograder` (see gradescope_bundle) runs this for every submission, as root, with ROOT
Gradescope's /autograder:

    ROOT/source/exercises.json   the assignment: each notebook's name and its exercises
    ROOT/submission/             the learner's files, notebooks anywhere below
    ROOT/results/results.json    written here: one test per exercise of the assignment

Each notebook of the assignment is found in the submission by its name (nested in folders,
or with something added, such as `01_tokens_and_task (2).ipynb`), else by its exercises'
numbers, and graded with the grader's own code (grade.py), its notebooks in
parallel. An exercise is worth 1 point when its checker passed, else 0; a function that
calls course_lib's own version of its exercise scores 0 and its output says so. Exercises
come from the assignment, not from the submission: a deleted exercise scores 0.

As root, the learner's code runs as the user nobody (judge_runner.kernel_user) where bubblewrap
cannot run (as in Gradescope's container): it cannot read the installed course_lib, nor write to
ROOT/source, ROOT/results or the submission. results.json is written first with zero points,
in space reserved before any learner's code runs (code that fills the disk cannot stop the
grade being written), then, once every notebook is graded, with the grades.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat

from . import grade, judge_runner
from .._words import count
from ..checks.core import LIBRARY_CALL

RESERVED = 2**20          # bytes of results.json written before grading; the grades fit in them
MAX_OUTPUT = 2000         # characters of one test's output
KERNEL_USER = "nobody"


def _submitted(folder: Path) -> list[Path]:
    """Every notebook below `folder`, outside hidden folders (.ipynb_checkpoints, __MACOSX...)."""
    found = [p for p in folder.rglob("*.ipynb") if p.is_file()
             and not any(part.startswith((".", "__")) for part in p.relative_to(folder).parts)]
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


def _numbers(path: Path) -> set[str]:
    """The notebook numbers of the exercises a notebook sets ("1" for Exercise 1.2), if readable."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # not a notebook: matched by name only
        return set()
    return {ex.name.split()[1].split(".")[0] for ex in grade.expected_exercises(nb)}


def match(assignment: list[dict], submitted: list[Path]) -> dict[str, Path]:
    """Notebook name of the assignment -> the submitted notebook that is its copy: same name,
    else a name containing it, else the one whose exercises have its number."""
    found, left = {}, list(submitted)
    rules = [lambda want, p: p.name == want["notebook"],
             lambda want, p: Path(want["notebook"]).stem.lower() in p.stem.lower(),
             lambda want, p: _number(want) in _numbers(p)]
    for rule in rules:
        for want in assignment:
            hit = next((p for p in left if want["notebook"] not in found and rule(want, p)), None)
            if hit is not None:
                found[want["notebook"]] = hit
                left.remove(hit)
    return found


def _number(want: dict) -> str:
    return want["exercises"][0][0].split()[1].split(".")[0]


def _test(name: str, title: str, row: dict | None, missing: str) -> dict:
    """Gradescope's test of one exercise; row: the grader's report row, or None."""
    number = name.split()[-1]
    if row is None:
        score, output = 0.0, missing
    else:
        score = 1.0 if row["status"] == "passed" else 0.0
        output = "not done yet" if row["status"] == "not done" else grade.describe(row)
        if row["status"] == LIBRARY_CALL:
            output += (" (0 points: the function calls course_lib's own version of this exercise; "
                       "write the computation yourself)")
    return {"name": f"{name}: {title}", "number": number, "score": score, "max_score": 1.0,
            "output": output[:MAX_OUTPUT]}


def results(assignment: list[dict], found: dict[str, Path], rows: list[dict], seconds: float) -> dict:
    """results.json's content from the grader's rows (learner = the notebook's assignment name)."""
    by_exercise = {(r["learner"], r["exercise"]): r for r in rows}
    unreadable = {r["learner"]: r["message"] for r in rows if not r["exercise"]}
    tests, notes = [], []
    for want in assignment:
        name = want["notebook"]
        if name not in found:
            notes.append(f"{name}: not in your submission (nor a notebook with its exercises)")
            missing = f"not graded: {name} is not in your submission"
        elif name in unreadable:
            missing = f"not graded: {found[name].name} is {unreadable[name]}"
        else:
            missing = f"not graded: this exercise's heading or check cell is not in {found[name].name}"
        for exercise, title, *_ in want["exercises"]:
            tests.append(_test(exercise, title, by_exercise.get((name, exercise)), missing))
    passed = sum(t["score"] for t in tests)
    lines = [f"{passed:g} of {count(len(tests), 'exercise')} passed, {len(found)} of "
             f"{count(len(assignment), 'notebook')} graded ({seconds:.0f} s; each exercise's cells ran "
             f"in a sandbox of their own)."] + notes
    return {"score": passed, "execution_time": round(seconds), "output": "\n".join(lines), "tests": tests}


def _write(path: Path, content: dict, reserve: bool = False) -> None:
    """Write results.json. The first write pads it to RESERVED bytes; later writes overwrite
    those bytes in place, which needs no free disk space."""
    data = json.dumps(content, indent=1).encode()
    if reserve:
        path.write_bytes(data.ljust(RESERVED))
    elif path.exists() and len(data) <= path.stat().st_size:
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate()
    else:
        path.write_bytes(data)


def _kernel_user():
    """nobody's (uid, gid) when we are root (on Gradescope), else None."""
    return judge_runner.kernel_user(KERNEL_USER) if getattr(os, "geteuid", lambda: None)() == 0 else None


def run(root: Path, timeout: float = 300, memory: int = 4 * 2**30) -> dict:
    """Grade ROOT/submission against ROOT/source/exercises.json; write and return results.json."""
    start = time.monotonic()
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    assignment = json.loads((root / "source" / "exercises.json").read_text(encoding="utf-8"))
    empty = results(assignment, {}, [], 0)
    _write(out, {**empty, "output": "grading did not finish: " + empty["output"]}, reserve=True)
    try:
        user = _kernel_user()
        found = match(assignment, _submitted(root / "submission"))
        expected = {found[w["notebook"]].name: [tuple(e) for e in w["exercises"]]
                    for w in assignment if w["notebook"] in found}
        rows = grade.grade_notebooks(list(found.items()), timeout, memory, jobs=grade.default_jobs(), progress=False,
                                     user=user, expected=expected)
        content = results(assignment, found, rows, time.monotonic() - start)
        if not found:
            content["output"] = ("no notebook of the assignment in your submission: upload "
                                 + ", ".join(w["notebook"] for w in assignment) + "\n" + content["output"])
    except Exception as err:  # the grader's own failure: say so in results.json, for the instructor
        content = {**empty, "output": f"the autograder failed: {type(err).__name__}: {err}"}
    _write(out, content)
    return content


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.instructor.gradescope",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="Gradescope's /autograder")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a whole notebook may run")
    parser.add_argument("--memory", type=float, default=4, help="GB of address space the learner's code may use")
    args = parser.parse_args(argv)
    content = run(args.root, args.timeout, int(args.memory * 2**30))
    print(content["output"])
    for test in content["tests"]:
        print(f"  {test['score']:g}/{test['max_score']:g}  {test['name']}: {test['output'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
