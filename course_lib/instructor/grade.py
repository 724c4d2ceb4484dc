"""Grade a class: run every learner's notebooks and collect what the checkers found.

    python -m course_lib grade PATH --out report.csv [--jobs N] [--timeout 300] [--memory 4]
    python -m course_lib grade [NOTEBOOKS] --gradescope autograder.zip   (see gradescope_bundle.py)

PATH is one notebook, a folder of one learner's notebooks (learner = the folder's name),
or a folder with one sub-folder per learner. Each notebook runs top to bottom in a
scratch copy, in a kernel of its own, with time and memory limits (see sandbox.py);
--jobs of them at a time (each waits on its kernel: threads suffice). The report is in the
same order whatever --jobs is. Ctrl-C stops every kernel and writes the rows of the
notebooks graded so far.

The exercises expected in a notebook are read from its own cells: a markdown heading
`### Exercise N.k: title`, then the stub/solution code cell(s), then the first code cell
that calls a checker (`cl.checks.check_...(`). Each gets one row in the report, with a
status:

    passed / failed / not done   what the checker recorded ($COURSE_LIB_RESULTS; the last call wins)
    library call                 the checker found that the learner's function calls course_lib's
                                 own version of the exercise (the message names it): not a pass
    error                        the notebook stopped inside the exercise's cells (raised, time or
                                 memory limit), so the checker had nothing to say
    not reached                  the checker never ran: an earlier cell stopped the notebook, or the
                                 check cell no longer calls it
"""
from __future__ import annotations

import csv
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from tqdm.auto import tqdm

from . import sandbox
from .._words import count
from ..checks.core import LIBRARY_CALL
from .exercises import Exercise, expected_exercises

COLUMNS = ("learner", "notebook", "exercise", "status", "stage", "message")


class GradeError(ValueError):
    """A problem with what the grader was asked to do (not with a learner's notebook)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while grading: the rows of the notebooks graded by then (in the report's order)."""

    def __init__(self, rows: list[dict], done: int, total: int):
        super().__init__(f"{done} of {count(total, 'notebook')} graded")
        self.rows, self.done, self.total = rows, done, total


def _notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if p.is_file() and not p.name.startswith("."))


def find_class(path) -> dict[str, list[Path]]:
    """learner -> notebooks, from one notebook, one learner's folder, or a folder of learners' folders."""
    path = Path(path)
    if not path.exists():
        raise GradeError(f"{path} does not exist")
    if path.is_file():
        if path.suffix != ".ipynb":
            raise GradeError(f"{path} is not a notebook (.ipynb) nor a folder of notebooks")
        return {path.resolve().parent.name: [path]}
    own = _notebooks(path)
    if own:
        return {path.resolve().name: own}
    learners = {d.name: _notebooks(d) for d in sorted(path.iterdir())
                if d.is_dir() and not d.name.startswith(".")}  # skips .ipynb_checkpoints, .git
    learners = {name: notebooks for name, notebooks in learners.items() if notebooks}
    if not learners:
        raise GradeError(f"no notebooks (.ipynb) in {path} nor in its sub-folders")
    return learners


def _from_record(record) -> tuple[str, str, str]:
    status = record.get("status")
    if status not in ("passed", "failed", "not done", LIBRARY_CALL):
        return "error", "", f"the checker recorded an unknown status {status!r}"
    message = record.get("message") or ""
    if record.get("hint"):
        message += f" Hint: {record['hint']}"
    return status, record.get("stage") or "", message


def exercise_statuses(exercises: list[Exercise], outcome) -> list[tuple[Exercise, str, str, str]]:
    """(exercise, status, stage, message) for each expected exercise, then any other recorded one."""
    last = {r["exercise"]: r for r in outcome.records}   # a check re-run later in the notebook wins
    rows = []
    for ex in exercises:
        record = last.pop(ex.name, None)
        stopped = outcome.stopped_at
        if record is not None:
            rows.append((ex, *_from_record(record)))
        elif outcome.reason and (stopped is None or ex.first_cell <= stopped <= ex.check_cell):
            rows.append((ex, "error", "", outcome.reason))
        elif outcome.reason and stopped < ex.first_cell:
            rows.append((ex, "not reached", "", f"the notebook stopped before it: {outcome.reason}"))
        else:
            rows.append((ex, "not reached", "", f"cell {ex.check_cell} ran but did not call the checker"))
    for name, record in last.items():
        rows.append((Exercise(name, record.get("title") or "", -1, -1), *_from_record(record)))
    return rows


def grade_notebook(learner: str, path: Path, timeout: float, memory: int, user=None) -> list[dict]:
    """The report rows of one learner's notebook."""
    base = {"learner": learner, "notebook": path.name}
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:  # nbformat raises several kinds for a broken file
        first = (str(err).strip().splitlines() or [""])[0]     # a ValidationError's message has many lines
        return [{**base, "exercise": "", "title": "", "status": "error", "stage": "",
                 "message": f"not a readable notebook ({type(err).__name__}{': ' + first if first else ''})"}]
    try:
        outcome = sandbox.run_notebook(path, timeout=timeout, memory=memory, user=user)
    except OSError as err:  # the grader's side (a full disk): this notebook only, the others go on
        return [{**base, "exercise": "", "title": "", "status": "error", "stage": "",
                 "message": f"the grader could not run it ({type(err).__name__}: {err})"}]
    base["seconds"] = round(outcome.seconds, 1)   # kept in the rows, not written to the CSV
    return [{**base, "exercise": ex.name, "title": ex.title, "status": status, "stage": stage, "message": message}
            for ex, status, stage, message in exercise_statuses(expected_exercises(nb), outcome)]


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def grade_notebooks(todo: list[tuple[str, Path]], timeout: float, memory: int, jobs: int = 1,
                    progress: bool = True, user=None) -> list[dict]:
    """The rows of each (learner, notebook) of `todo`, in that order, `jobs` notebooks at a time.
    Ctrl-C: every kernel stops, and Interrupted carries the rows of the notebooks done."""
    sandbox.resume()
    done = [None] * len(todo)
    with tqdm(total=len(todo), unit="notebook", disable=not progress, desc="grading") as bar, \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(grade_notebook, learner, nb, timeout, memory, user): i
                   for i, (learner, nb) in enumerate(todo)}
        try:
            for future in as_completed(futures):
                i = futures[future]
                done[i] = future.result()
                bar.update()
                bar.set_postfix_str(f"{todo[i][0]}/{todo[i][1].name}")
        except KeyboardInterrupt:
            sandbox.stop_all()   # the running notebooks end at once, the others never start
            pool.shutdown(wait=True, cancel_futures=True)
            kept = [rows for rows in done if rows is not None]
            raise Interrupted([r for rows in kept for r in rows], len(kept), len(todo)) from None
    return [r for rows in done for r in rows]


def grade(path, timeout: float = 300, memory: int = 4 * 2**30, progress: bool = True,
          jobs: int = 1, user=None) -> list[dict]:
    """Grade every notebook under `path`: a list of report rows (dicts with COLUMNS and the title)."""
    try:
        learners = find_class(path)
    except OSError as err:     # a folder it may not list: the request, not a learner's notebook
        raise GradeError(f"cannot read {err.filename or path}: {err.strerror or err}") from None
    todo = [(learner, nb) for learner, notebooks in learners.items() for nb in notebooks]
    return grade_notebooks(todo, timeout, memory, jobs, progress, user)


def check_out(out: Path, example: str) -> None:
    """GradeError, before any work, when the file `out` (the report, the bundle) cannot be written;
    example: a file name the message suggests when `out` is a folder."""
    if not out.resolve().parent.is_dir():
        raise GradeError(f"cannot write {out}: folder {out.parent} does not exist")
    if out.is_dir():
        raise GradeError(f"cannot write {out}: it is a folder (give a file name such as {out / example})")
    if not os.access(out.resolve().parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise GradeError(f"cannot write {out}: permission denied")


def write_csv(rows: list[dict], out) -> None:
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def describe(row: dict) -> str:
    """A row's status, with the stage and message when they tell a learner what to do next."""
    text = row["status"] + (f" [{row['stage']}]" if row["stage"] else "")
    if row["status"] in ("failed", LIBRARY_CALL, "error", "not reached") and row["message"]:
        text += f": {row['message']}"
    return text


def summary(rows: list[dict]) -> str:
    """Per learner: exercises passed out of all; per exercise: learners who passed it
    (for a single learner: the status of each exercise, to show where they are)."""
    learners = list(dict.fromkeys(r["learner"] for r in rows))
    titles = {r["exercise"]: r["title"] for r in rows if r["exercise"]}
    passed = {(r["learner"], r["exercise"]) for r in rows if r["status"] == "passed"}
    lwidth, ewidth = max(map(len, learners)), max((len(f"{e} {t}") for e, t in titles.items()), default=0)
    lines = ["exercises passed, per learner:"]
    for learner in learners:
        n = sum((learner, ex) in passed for ex in titles)
        lines.append(f"  {learner:<{lwidth}}  {n}/{len(titles)}")
    if len(learners) == 1:
        lines += ["status, per exercise:"] if titles else []
        lines += [f"  {r['exercise'] + ' ' + r['title']:<{ewidth}}  {describe(r)}" for r in rows if r["exercise"]]
        return "\n".join(lines + _not_graded(rows))
    lines.append("learners who passed, per exercise:")
    for ex, title in titles.items():
        k = sum((learner, ex) in passed for learner in learners)
        lines.append(f"  {ex + ' ' + title:<{ewidth}}  {k}/{len(learners)} ({100 * k / len(learners):.0f}%)")
    return "\n".join(lines + _not_graded(rows))


def _not_graded(rows: list[dict]) -> list[str]:
    """Lines for the notebooks that gave no exercise rows (unreadable, or the grader could not run them)."""
    bad = [f"  {r['learner']}/{r['notebook']}: {r['message']}" for r in rows if not r["exercise"]]
    return ["notebooks not graded:", *bad] if bad else []
