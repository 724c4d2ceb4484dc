"""Command line: parses the arguments and hands them to each command's own module.

    python -m course_lib train --preset deep_dive --seed 0 --out model.npz   (train_command.py)
    python -m course_lib train --text FILE [--minutes M] --out model.npz   (the character GPT: text/command.py)
    python -m course_lib sample model.npz --prompt TEXT                   (what that model writes: text/command.py)
    python -m course_lib grade PATH --out report.csv      (instructors: instructor/command.py)
    python -m course_lib doctor                           (learners: doctor.py)
    python -m course_lib yours PATH [--train]             (a learner's own functions as one model: yours/command.py)
"""
import argparse
import sys

from . import doctor, train, train_command
from .instructor import command as grade_command
from .instructor.grade import GradeError
from .text import command as text_command
from .yours import command as yours_command, scratch as yours_scratch


class OneLineErrors(argparse.ArgumentParser):
    """A command's argument errors in one line: the usage is one --help away."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser():
    parser = OneLineErrors(prog="python -m course_lib", description="course_lib commands")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)
    t = sub.add_parser("train", help="train the course model on the operations task, or a GPT on a text (--text)",
                       description="Train a model on the operations task (Max(1,6,2) -> 6), print its accuracy "
                                   "on the held-out test split and the wall time, and save it. Ctrl-C stops "
                                   "cleanly and keeps the best model so far. With --text, train a character-level "
                                   "GPT on a text file instead.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    train_command.configure(t)
    text_command.configure_sample(sub.add_parser(
        "sample", help="continue a prompt with a model trained by `train --text`",
        description="Print the prompt and the characters a text model writes after it, sampled one at a time.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    grade_command.configure(sub.add_parser(
        "grade", help="run learners' notebooks and report what the checkers found",
        description="Run every notebook under PATH in a scratch copy and a kernel of its own, with time and "
                    "memory limits, and write one CSV row per learner, notebook and exercise.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    yours_command.configure(sub.add_parser(
        "yours", help="build the model from a learner's own notebooks, compare it with course_lib's, train it",
        description="Run the exercise cells of the learner's notebooks in PATH in a scratch process, assemble "
                    "their functions into the model (course_lib's stand in for what is not done), compare its "
                    "float64 loss and gradients with course_lib's, and with --train train it with their loop.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    sub.add_parser("doctor", help="check that this environment can run the course",
                   description="Check Python, package versions, Numba and its cache, BLAS, widgets and a "
                               "course-model step; print the fix for each problem.")
    return parser


def _one_line(run, args, errors, status=2, interrupted=None):
    """run(args); an error of the types in `errors` is printed as one line and gives `status`.
    With `interrupted`, Ctrl-C prints it and gives 130 (else the command handles Ctrl-C itself)."""
    try:
        return run(args)
    except errors as e:
        print(f"error: {e}", file=sys.stderr)
        return status
    except KeyboardInterrupt:
        if interrupted is None:
            raise
        print(interrupted, file=sys.stderr)
        return 130


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "doctor":
        return doctor.run()
    if args.command == "grade":       # a bad request or an unwritable report
        return _one_line(grade_command.command, args, (GradeError, OSError),
                         interrupted="interrupted: no report written")
    if args.command == "yours":
        return _one_line(yours_command.command, args, (ValueError, OSError, yours_scratch.ScratchError),
                         interrupted="interrupted")
    if args.command == "sample":      # an unreadable or non-text model, a prompt it cannot read
        return _one_line(text_command.sample, args, (ValueError, OSError))
    return _one_line(train_command.command, args, (ValueError, TypeError, OSError, train.TrainingDiverged),
                     status=1)


if __name__ == "__main__":
    sys.exit(main())
