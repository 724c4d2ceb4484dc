"""The grade command (wired in __main__):

    python -m course_lib grade PATH --out report.csv [--jobs N] [--timeout 300] [--memory 4]
    python -m course_lib grade [NOTEBOOKS] --gradescope autograder.zip   (see gradescope_bundle)
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from ..exercises import limits
from . import grade, gradescope_bundle, sandbox, judge_runner
from .._words import count


def _positive_int(text: str) -> int:
    """argparse type of --jobs: a whole number >= 1 (argparse turns the error into one line)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of notebooks at a time, 1 or more, got {text!r}")
    return value


def configure(parser) -> None:
    """Add the grade command's arguments to an argparse parser."""
    parser.add_argument("path", nargs="?", help="a notebook, a folder of one learner's notebooks, or a folder "
                                                "with one sub-folder per learner; with --gradescope: the "
                                                "assignment's notebooks (default: all the course's)")
    parser.add_argument("--out", default="report.csv", help="the CSV report to write")
    parser.add_argument("--jobs", type=_positive_int, default=grade.default_jobs(),
                        help="notebooks graded at a time; the default is this machine's number of cores")
    parser.add_argument("--timeout", type=float, default=300, help="seconds a whole notebook may run")
    parser.add_argument("--memory", type=float, default=4, help="GB of address space a notebook's kernel may use")
    parser.add_argument("--user", help="run the kernels as this user, e.g. nobody (the grader must run as root)")
    parser.add_argument("--exercises", metavar="FOLDER", type=Path, default=grade.COURSE_NOTEBOOKS,
                        help="the instructor edition: each notebook is graded on the exercises of the one of "
                             "the same name there (default: the course's notebooks/)")
    parser.add_argument("--gradescope", metavar="ZIP", help="write Gradescope's autograder bundle for the "
                                                           "notebooks of PATH instead of grading")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(grade_parser=parser)


def _grade_into(out: Path, args, user):
    """Grade, writing each notebook's rows to `out` as it ends (a grader that dies keeps them; the
    file is begun with the first notebook that ends); -> (rows, None), or (None, Interrupted) after Ctrl-C."""
    report = {}

    def written(rows):
        if not report:
            report["file"] = open(out, "w", newline="", encoding="utf-8")
            report["csv"] = csv.DictWriter(report["file"], fieldnames=grade.COLUMNS, extrasaction="ignore")
            report["csv"].writeheader()
        report["csv"].writerows(rows)
        report["file"].flush()
    try:
        return grade.grade(args.path, timeout=args.timeout, memory=int(args.memory * 2**30),
                           progress=not args.no_progress, jobs=args.jobs, user=user,
                           exercises=args.exercises, on_done=written), None
    except grade.Interrupted as stop:
        return None, stop
    finally:
        if report:
            report["file"].close()


def command(args) -> int:
    """Run `grade` from parsed arguments: 0 when the class was graded, 2 for a bad request (checked
    before any notebook runs), 1 when the report cannot be written after all, 130 after Ctrl-C (the
    rows of the notebooks graded by then are written)."""
    if args.timeout <= 0 or args.memory <= 0:
        raise grade.GradeError("--timeout and --memory must be positive")
    if args.gradescope:
        return gradescope_bundle.command(args.path, args.gradescope, args.timeout, args.memory)
    if args.path is None:
        args.grade_parser.error("give PATH, the notebooks to grade (or --gradescope ZIP)")
    out = Path(args.out)
    grade.check_out(out, "report.csv")
    try:
        user = judge_runner.kernel_user(args.user) if args.user else None
    except ValueError as err:
        raise grade.GradeError(f"--user: {err}") from None
    if args.exercises != grade.COURSE_NOTEBOOKS and not args.exercises.is_dir():
        raise grade.GradeError(f"--exercises: {args.exercises} is not a folder of notebooks")
    rows, stop = _grade_into(out, args, user)
    if stop is not None:
        if not stop.rows:
            raise KeyboardInterrupt from None    # nothing graded: no report (__main__ says so)
        grade.write_csv(stop.rows, out)
        print(f"interrupted: {stop.done} of {count(stop.total, 'notebook')} graded; partial report: {out} "
              f"({count(len(stop.rows), 'row')})", file=sys.stderr)
        return 130
    grade.write_csv(rows, out)
    print(grade.summary(rows))
    print(f"report: {out} ({count(len(rows), 'row')})")
    if not limits.rlimit_as_works():
        print("note: this OS does not enforce memory limits (RLIMIT_AS): a watch stopped learners' code past "
              "--memory instead (book/instructors.md, 'Where grading runs')", file=sys.stderr)
    mode = sandbox.mode(user)
    if mode != "bwrap":
        who = "as the user you named" if mode == "user" else "as you"
        print(f"note: bubblewrap cannot run here, so learners' code ran {who}: it could read every file that "
              f"{'others' if mode == 'user' else 'you'} may read (book/instructors.md, 'What grading "
              f"guarantees')", file=sys.stderr)
    return 0
