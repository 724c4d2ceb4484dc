"""Grade a class: run every learner's notebooks and collect what the checkers found.

    python -m course_lib grade PATH --out report.csv [--jobs N] [--timeout 300] [--memory 4]
    python -m course_lib grade [NOTEBOOKS] --gradescope autograder.zip   (see gradescope_bundle.py)

PATH is one notebook, a folder of one learner's notebooks (learner = the folder's name),
or a folder with one sub-folder per learner. For each notebook a judge runs the checkers and a
sandbox the learner's exercise cells, one exercise at a time, with time and memory limits (see
judge_runner.py: the learner's code never runs in the process that decides the grade); --jobs
notebooks at a time (each waits on its judge: threads suffice). The report is in the same
order whatever --jobs is. Ctrl-C stops every judge and writes the rows of the notebooks
graded so far.

The exercises expected in a notebook are those of the instructor edition of the same name
(`exercises`: the course's notebooks/ folder by default), so that a learner who deletes an
exercise's heading or check cell gets a `missing` row, and one who adds a heading gets no row;
a notebook the instructor edition does not have is read alone. In a notebook an exercise is a
markdown heading `### Exercise N.k: title`, then the stub/solution code cell(s), then the first
code cell that calls a checker (`cl.checks.check_...(`), graded by its row's checker in
course_lib.exercises, whichever the cell names. Each gets one row in the report, with a status:

    passed / failed / not done   what the checker found, its random cases drawn fresh for this
                                 run; a failure as on the notebook's own cases (stage "... (the
                                 grader's fresh random cases)" when only the fresh ones fail)
    library call                 the learner's function calls course_lib's own version of the
                                 exercise (the message names it), absent while grading: not a pass
    error                        the exercise's cells raised, or ran into the time or memory
                                 limit, or define no such function: the checker had nothing to call
    not reached                  the checker never ran: its check cell is tagged skip-execution,
                                 or the notebook's time ran out before it
    missing                      the instructor edition has this exercise, the learner's notebook not
    grader error                 the grader itself failed on this notebook (the message says how)

A notebook that cannot be graded at all has one row, `error`, that says why: not a readable
notebook, or a symbolic link (it, or its learner's folder: a link to a classmate's notebook
would otherwise be graded as the learner's own).

The column `hidden` lists the cells whose source the learner's notebook hides from view
(Jupyter's `source_hidden`), for an instructor who reads it.
"""
from __future__ import annotations

import csv
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from tqdm.auto import tqdm

from . import judge_runner
from .._words import count
from ..checks.core import LIBRARY_CALL
from ..exercises.cells import Exercise, expected_exercises

COLUMNS = ("learner", "notebook", "exercise", "status", "stage", "message", "hidden")
COURSE_NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"   # the instructor edition, in a clone


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


def exercise_statuses(exercises: list[Exercise], outcome) -> list[tuple[Exercise, str, str, str]]:
    """(exercise, status, stage, message) for each exercise found in the learner's notebook: the
    judge's row, or, where the judge ended before it, why."""
    judged = {r["exercise"]: r for r in outcome.rows}
    statuses = ("passed", "failed", "not done", LIBRARY_CALL, "error", "not reached")
    rows, first = [], True
    for ex in exercises:
        row = judged.get(ex.name)
        if row is not None and row["status"] in statuses:
            rows.append((ex, row["status"], row["stage"], row["message"]))
        elif row is not None:
            rows.append((ex, "grader error", "", f"the judge gave an unknown status {row['status']!r}"))
        else:       # the judge ended before it: the first such exercise is where it stopped
            reason = outcome.reason or "the judge ended without grading it"
            rows.append((ex, "error", "", reason) if first else
                        (ex, "not reached", "", f"grading stopped before it: {reason}"))
            first = False
    return rows


def reference_exercises(folder, names) -> dict[str, list[tuple]]:
    """Notebook file name -> its [(exercise, title, [checker, [argument names]])], for those of
    `names` that the instructor edition in `folder` has (only those are read): the exercises
    expected, and the checker that grades each, as the instructor edition's check cell calls it."""
    from .judge import checker_call
    paths = [Path(folder) / name for name in sorted(set(names))]
    out = {}
    for path in paths:
        if path.is_file():
            nb = nbformat.read(path, as_version=4)
            out[path.name] = [(ex.name, ex.title, list(checker_call(ex.name, nb.cells[ex.check_cell].source) or []))
                              for ex in expected_exercises(nb)]
    return out


def hidden_cells(nb) -> str:
    """The cells whose source the notebook hides from view, as "3, 7" ("" for none)."""
    return ", ".join(str(i) for i, c in enumerate(nb.cells)
                     if c.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def _rows(base: dict, nb, exercises, outcome, expected) -> list[dict]:
    found = exercise_statuses(exercises, outcome)
    if expected is not None:    # the instructor edition's exercises, in its order, with its titles, and no others
        expected = [(e[0], e[1]) for e in expected]
        by_name = {ex.name: (ex, *rest) for ex, *rest in found}
        found = []
        for name, title in expected:
            if name in by_name:
                ex, *rest = by_name[name]
                found.append((Exercise(name, title, ex.first_cell, ex.check_cell), *rest))
            else:
                found.append((Exercise(name, title, -1, -1), "missing", "", "the notebook has no such exercise: "
                              "its heading or check cell was deleted or changed"))
    hidden = hidden_cells(nb)
    return [{**base, "exercise": ex.name, "title": ex.title, "status": status, "stage": stage,
             "message": message, "hidden": hidden} for ex, status, stage, message in found]


def grade_notebook(learner: str, path: Path, timeout: float, memory: int, user=None,
                   expected: list[tuple] | None = None, threads: int | None = None) -> list[dict]:
    """The report rows of one learner's notebook; expected: the instructor edition's (exercise,
    title, checker call) list (reference_exercises), or None to read the exercises and their
    checkers from the notebook itself. Never raises: a failure of the grader's own becomes a row
    ("grader error")."""
    base = {"learner": learner, "notebook": path.name}

    def whole_notebook(status, message):      # the one row of a notebook that gave no exercise rows
        return [{**base, "exercise": "", "title": "", "status": status, "stage": "", "hidden": "", "message": message}]
    try:
        link = next((p for p in (path, path.parent) if p.is_symlink()), None)
        if link is not None:     # a link to a classmate's notebook would be graded as theirs
            return whole_notebook("error", ("a symbolic link" if link == path else "in a folder that is a symbolic "
                                            "link") + f" (to {os.readlink(link)[:200]}): submit the notebook itself")
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as err:  # nbformat raises several kinds for a broken file
            first = (str(err).strip().splitlines() or [""])[0]     # a ValidationError's message has many lines
            detail = f"{type(err).__name__}{': ' + first if first else ''}"
            return whole_notebook("error", f"not a readable notebook ({detail})")
        exercises = expected_exercises(nb)      # found once: the judge grades these, the rows are theirs
        try:
            calls = {e[0]: e[2] for e in expected if len(e) > 2} if expected is not None else None
            outcome = judge_runner.run_notebook(path, exercises, calls, timeout=timeout, memory=memory, user=user,
                                                threads=threads)
        except OSError as err:  # the grader's side (a full disk): this notebook only, the others go on
            return whole_notebook("error", f"the grader could not run it ({type(err).__name__}: {err})")
        base["seconds"] = round(outcome.seconds, 1)   # kept in the rows, not written to the CSV
        return _rows(base, nb, exercises, outcome, expected)
    except Exception as err:    # a bug of ours, or a record we did not foresee: this notebook's rows only
        return whole_notebook("grader error", f"the grader failed on this notebook ({type(err).__name__}: "
                                              f"{str(err)[:300]})")


def _writable_rows(*args) -> list[dict]:
    """grade_notebook's rows with every text made writable in UTF-8: a learner's exception message,
    or a file name, may hold a lone surrogate ('\\udcff'), which the report's writer, print and
    Gradescope's results.json would refuse. It becomes its escape, as text."""
    return [{key: value.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, str) else value
             for key, value in row.items()} for row in grade_notebook(*args)]


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def grade_notebooks(todo: list[tuple[str, Path]], timeout: float, memory: int, jobs: int = 1,
                    progress: bool = True, user=None, expected: dict | None = None,
                    on_done=None) -> list[dict]:
    """The rows of each (learner, notebook) of `todo`, in that order, `jobs` notebooks at a time.
    expected: notebook file name -> the instructor edition's [(exercise, title, checker call)]
    (reference_exercises); on_done(rows): called with each notebook's rows as it finishes.
    Ctrl-C: every judge stops, and Interrupted carries the rows of the notebooks done."""
    judge_runner.resume()
    done = [None] * len(todo)
    expected = expected or {}
    with tqdm(total=len(todo), unit="notebook", disable=not progress, desc="grading") as bar, \
            ThreadPoolExecutor(max_workers=jobs) as pool:
        # each notebook graded at once gets its share of the cores: BLAS threads beyond it
        # would wait for one another's time slices at every product
        threads = max(1, default_jobs() // jobs)
        return _grade_all(pool, bar, todo, done, timeout, memory, user, expected, on_done, threads)


def _grade_all(pool, bar, todo, done, timeout, memory, user, expected, on_done, threads):
    futures = {pool.submit(_writable_rows, learner, nb, timeout, memory, user, expected.get(nb.name), threads): i
               for i, (learner, nb) in enumerate(todo)}
    try:
        for future in as_completed(futures):
            i = futures[future]
            done[i] = future.result()
            if on_done is not None:
                on_done(done[i])
            bar.update()
            bar.set_postfix_str(f"{todo[i][0]}/{todo[i][1].name}")
    except KeyboardInterrupt:
        judge_runner.stop_all()   # the running notebooks end at once, the others never start
        pool.shutdown(wait=True, cancel_futures=True)
        kept = [rows for rows in done if rows is not None]
        raise Interrupted([r for rows in kept for r in rows], len(kept), len(todo)) from None
    return [r for rows in done for r in rows]


def grade(path, timeout: float = 300, memory: int = 4 * 2**30, progress: bool = True,
          jobs: int = 1, user=None, exercises=COURSE_NOTEBOOKS, on_done=None) -> list[dict]:
    """Grade every notebook under `path`: a list of report rows (dicts with COLUMNS and the title).
    exercises: the folder of the instructor edition whose exercises are expected (None: each
    notebook's own); on_done: see grade_notebooks."""
    try:
        learners = find_class(path)
        todo = [(learner, nb) for learner, notebooks in learners.items() for nb in notebooks]
        expected = (reference_exercises(exercises, [nb.name for _, nb in todo])
                    if exercises is not None and Path(exercises).is_dir() else {})
    except OSError as err:     # a folder it may not list: the request, not a learner's notebook
        raise GradeError(f"cannot read {err.filename or path}: {err.strerror or err}") from None
    return grade_notebooks(todo, timeout, memory, jobs, progress, user, expected, on_done)


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
    if row["status"] in ("failed", LIBRARY_CALL, "error", "not reached", "missing", "grader error") and row["message"]:
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
        return "\n".join(lines + _not_graded(rows) + _hidden(rows))
    lines.append("learners who passed, per exercise:")
    for ex, title in titles.items():
        k = sum((learner, ex) in passed for learner in learners)
        lines.append(f"  {ex + ' ' + title:<{ewidth}}  {k}/{len(learners)} ({100 * k / len(learners):.0f}%)")
    return "\n".join(lines + _not_graded(rows) + _hidden(rows))


def _not_graded(rows: list[dict]) -> list[str]:
    """Lines for the notebooks that gave no exercise rows (unreadable, or the grader could not run them)."""
    bad = [f"  {r['learner']}/{r['notebook']}: {r['message']}" for r in rows if not r["exercise"]]
    return ["notebooks not graded:", *bad] if bad else []


def _hidden(rows: list[dict]) -> list[str]:
    """Lines for the notebooks that hide cells' source from view (an instructor reading them should look)."""
    seen = {(r["learner"], r["notebook"]): r.get("hidden") for r in rows if r.get("hidden")}
    return ["cells hidden from view (Jupyter's source_hidden):",
            *[f"  {learner}/{notebook}: cells {cells}" for (learner, notebook), cells in seen.items()]] if seen else []
