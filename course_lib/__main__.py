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

# doctor first, and alone: its verdict on the Python version and the packages must run where NumPy
# is missing or cannot install. The other commands' modules (NumPy, Numba) load in main().
from . import doctor


# One convention for every command's exit status; each --help ends with its own line of it.
EXIT_STATUS = {
    None: ("done", "", "an option, a path or a file it cannot use"),
    "train": ("done", "training diverged, or --out could not be written",
              "an option, --out, or a --text file it cannot use"),
    "sample": ("done", "", "an option, a file that is not a text model, a prompt it cannot encode"),
    "grade": ("graded (a learner's notebook that cannot be read is a row of the report)",
              "the report could not be written", "PATH, --out or an option"),
    "yours": ("every function ran, each of the learner's passes its checker, and the largest error is below 1e-8",
              "a function failed or fails its checker, an error is 1e-8 or more, or the scratch process gave "
              "no report",
              "PATH or an option"),
    "doctor": ("everything works", "a check found a problem (✗)", "an option"),
}


def exit_status(command=None):
    """The epilog of a command's --help: what each exit status means."""
    done, failed, bad = EXIT_STATUS[command]
    return (f"exit status: 0 {done}, 1 failed while running{f' ({failed})' if failed else ''}, "
            f"2 bad input ({bad}), 130 interrupted (Ctrl-C)")


DOCTOR_DESCRIPTION = ("Check Python, package versions, Numba and its cache, BLAS, widgets and a course-model "
                      "step; print the fix for each problem.")


class OneLineErrors(argparse.ArgumentParser):
    """A command's argument errors in one line: the usage is one --help away."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser():
    from . import train_command
    from .instructor import command as grade_command
    from .text import command as text_command
    from .yours import command as yours_command

    parser = OneLineErrors(prog="python -m course_lib", description="course_lib commands", epilog=exit_status())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)

    def add(name, **kwargs):
        return sub.add_parser(name, epilog=exit_status(name), **kwargs)
    t = add("train", help="train the course model on the operations task, or a GPT on a text (--text)",
            description="Train a model on the operations task (Max(1,6,2) -> 6), print its accuracy "
                        "on the held-out test split and the wall time, and save it. Ctrl-C stops "
                        "cleanly and keeps the best model so far. With --text, train a character-level "
                        "GPT on a text file instead.",
            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    train_command.configure(t)
    text_command.configure_sample(add(
        "sample", help="continue a prompt with a model trained by `train --text`",
        description="Print the prompt and the characters a text model writes after it, sampled one at a time.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    grade_command.configure(add(
        "grade", help="run learners' notebooks and report what the checkers found",
        description="Run every notebook under PATH in a scratch copy and a kernel of its own, with time and "
                    "memory limits, and write one CSV row per learner, notebook and exercise.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    yours_command.configure(add(
        "yours", help="build the model from a learner's own notebooks, compare it with course_lib's, train it",
        description="Run the exercise cells of the learner's notebooks in PATH in a scratch process, assemble "
                    "their functions into the model (course_lib's stand in for what is not done), compare its "
                    "float64 loss and gradients with course_lib's, and with --train train it with their loop.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    add("doctor", help="check that this environment can run the course", description=DOCTOR_DESCRIPTION)
    return parser


def _one_line(run, args, bad_input=(), failed=(), interrupted="interrupted"):
    """run(args) under the exit-status convention: an error of the types in `bad_input` gives 2, one
    in `failed` 1, each printed as one line; Ctrl-C that the command does not handle itself prints
    `interrupted` and gives 130."""
    try:
        return run(args)
    except bad_input as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except failed as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return 130


def doctor_parser():
    """`doctor`'s own parser, which needs nothing beyond the standard library."""
    return OneLineErrors(prog="python -m course_lib doctor", epilog=exit_status("doctor"),
                         description=DOCTOR_DESCRIPTION)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["doctor"]:
        doctor_parser().parse_args(argv[1:])
        return _one_line(lambda _: doctor.run(), None)
    try:
        from . import train, train_command
        from .instructor import command as grade_command
        from .instructor.grade import GradeError
        from .text import command as text_command
        from .text.data import TextError
        from .yours import command as yours_command, scratch as yours_scratch
    except ImportError as err:   # an install that failed: doctor says why, in one line each
        print(f"error: {err}: run `python -m course_lib doctor`", file=sys.stderr)
        return 1
    args = build_parser().parse_args(argv)
    if args.command == "grade":       # a bad request; a report that cannot be written after grading
        return _one_line(grade_command.command, args, bad_input=(GradeError,), failed=(OSError,),
                         interrupted="interrupted: no report written")
    if args.command == "yours":
        return _one_line(yours_command.command, args, bad_input=(ValueError, OSError),
                         failed=(yours_scratch.ScratchError,))
    if args.command == "sample":      # an unreadable or non-text model, a prompt it cannot read
        return _one_line(text_command.sample, args, bad_input=(ValueError, OSError))
    return _one_line(train_command.command, args, bad_input=(TextError,),     # a --text file it cannot use
                     failed=(ValueError, TypeError, OSError, train.TrainingDiverged))


if __name__ == "__main__":
    sys.exit(main())
