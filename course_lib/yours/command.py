"""`python -m course_lib yours PATH [--train]`: the learner's functions as one model, compared and trained.

Everything that runs the learner's code runs in the scratch process (scratch.py); this side
prints. The last line is always

    your transformer: K of N functions yours, largest gradient rel. error E, test accuracy A

K counts the functions that are the learner's and pass their exercise's checker; A is `-`, with
the reason after it, without --train. Exit code 0 when every function ran, every one of the
learner's passes its checker and E < 1e-8; 1 otherwise; 2 for a bad request.
"""
from __future__ import annotations

import math
from pathlib import Path

from .._words import count
from . import cells, passing_count, scratch, table_text
from .compare import Comparison

TOLERANCE = 1e-8


def configure(parser) -> None:
    parser.add_argument("path", help="the folder of the learner's notebooks (the student edition they work in; "
                                     "the instructor edition gives the reference solutions)")
    parser.add_argument("--train", action="store_true",
                        help="also train the course model with the learner's loop, Adam and clipping, beside fit")
    parser.add_argument("--epochs", type=int, default=20, help="epochs of the --train run")
    parser.add_argument("--timeout", type=float, default=900, help="seconds the whole scratch run may take")
    parser.add_argument("--memory", type=float, default=4, help="GB of address space the scratch process may use")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def command(args) -> int:
    folder = Path(args.path)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder (give the folder of the learner's notebooks)")
    if not any(cells.NOTEBOOK.match(p.name) for p in folder.iterdir()):
        raise ValueError(f"{folder} holds no course notebook (01_tokens_and_task.ipynb, ...)")
    if args.timeout <= 0 or args.memory <= 0 or args.epochs < 1:
        raise ValueError("--timeout and --memory must be positive, --epochs at least 1")
    train = {"epochs": args.epochs, "progress": not args.no_progress} if args.train else None
    report = scratch.run_in_scratch(folder, compare=True, train=train, timeout=args.timeout,
                                    memory=int(args.memory * 2**30), progress=not args.no_progress)
    table = [cells.Status(**s) for s in report["parts"]]
    print(table_text(table))
    comparison = Comparison(report["comparison"])
    print()
    print(comparison)
    accuracy = "- (not trained: --train trains it)"
    if "training" in report:
        runs = report["training"]
        print()
        who = _loop_name(runs["loop_is_yours"], table)
        print(f"the course model trained {count(args.epochs, 'epoch')}, warm-up + cosine from lr 1e-3, clip 1.0, "
              f"float32:")
        for name, run in ((f"{who}, your model", runs["yours"]), ("course_lib's fit and model", runs["fit"])):
            print(f"  {name:<48} test accuracy {run['test_acc']:.4f}  {count(run['steps'], 'step')}  "
                  f"{run['seconds']:.1f} s")
        accuracy = f"{runs['yours']['test_acc']:.4f}"
    largest = comparison.largest
    print(f"your transformer: {passing_count(table)} of {len(table)} functions yours, largest gradient rel. "
          f"error {largest:.1e}, test accuracy {accuracy}")
    failed = any(s.status == "error" or (s.status == "yours" and s.check != "passed") for s in table)
    return 0 if not failed and math.isfinite(largest) and largest < TOLERANCE else 1


def _loop_name(loop_is_yours, table) -> str:
    """The training loop's name in the --train lines, saying when it fails Exercise 11.6's checker."""
    if not loop_is_yours:
        return "course_lib's loop (11.6 is not yours)"
    check = next((s.check for s in table if s.name == "train_loop"), "passed")
    return "your train_loop" if check == "passed" else "your train_loop (not passing 11.6's checker)"
