"""Student edition: strip solutions from the course notebooks.

    python -m course_lib.edition notebooks/ student/

For every `*.ipynb` in the source directory, writes a copy in which

- each region of a code cell from a line `### BEGIN SOLUTION` to a line `### END SOLUTION`
  (nbgrader's markers) becomes one line, at the BEGIN line's indentation:
  `raise NotImplementedError("Exercise N.k: your code here")`, N.k taken from the
  nearest preceding markdown cell that mentions `Exercise N.k` (a heading wins over
  other text in the same cell; "this exercise" if there is none);
- markdown cells tagged `solution` are dropped (untagged `{solution}` / dropdown answers
  stay: the book shows them folded);
- every code cell's outputs and execution count are cleared, and the notebook's saved
  widget state (metadata "widgets", output of the instructor's run) is removed.

Nothing else changes. The checkers in course_lib.checks turn the stub's
NotImplementedError into "not done yet", so the student edition runs top to bottom.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from .._files import write_atomic

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
END = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
EXERCISE = re.compile(r"Exercise (\d+\.\d+)")
HEADING_EXERCISE = re.compile(r"^ {0,3}#{1,6}[ \t].*?Exercise (\d+\.\d+)", re.M)
SOLUTION_TAG = "solution"
STUB = 'raise NotImplementedError("{exercise}: your code here")'


def _exercise_in(markdown: str):
    """'Exercise N.k' named by a markdown cell (its last heading match, else its last match), or None."""
    found = HEADING_EXERCISE.findall(markdown) or EXERCISE.findall(markdown)
    return f"Exercise {found[-1]}" if found else None


def strip_solutions(source: str, exercise: str, where: str) -> tuple[str, int]:
    """Replace each BEGIN/END SOLUTION region of a code cell's source by the stub line.

    Returns (new source, number of regions). Raises ValueError, naming `where`, on
    unbalanced or nested markers.
    """
    out, count, begin_line = [], 0, None
    lines = source.splitlines(keepends=True)
    for n, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        m = BEGIN.match(text)
        if m:
            if begin_line is not None:
                raise ValueError(f"{where}: '### BEGIN SOLUTION' at line {n} inside the solution "
                                 f"begun at line {begin_line} (missing '### END SOLUTION')")
            begin_line, indent = n, m["indent"]
            continue
        if END.match(text):
            if begin_line is None:
                raise ValueError(f"{where}: '### END SOLUTION' at line {n} without a '### BEGIN SOLUTION'")
            newline = line[len(text):]
            out.append(indent + STUB.format(exercise=exercise) + newline)
            begin_line, count = None, count + 1
            continue
        if begin_line is None:
            out.append(line)
    if begin_line is not None:
        raise ValueError(f"{where}: '### BEGIN SOLUTION' at line {begin_line} has no '### END SOLUTION'")
    return "".join(out), count


def check_notebook(nb, name: str = "notebook"):
    """Raise ValueError, in one line naming `name` and the cell index, unless nb is a valid v4 notebook."""
    try:
        nbformat.validate(nb, version=4)
    except nbformat.ValidationError as err:
        where = list(getattr(err, "absolute_path", []))
        cell = f" cell {where[1]}:" if len(where) >= 2 and where[0] == "cells" else ""
        message = str(getattr(err, "message", err)).splitlines()[0]
        if len(message) > 160:      # jsonschema may quote a whole cell
            message = message[:157] + "..."
        raise ValueError(f"{name}:{cell} not a valid notebook ({message})") from None


def student_notebook(nb, name: str = "notebook"):
    """Student edition of a notebook node (changed in place and returned) and the number of
    solution regions removed: (nb, n_solutions, n_dropped_cells). ValueError, naming the cell,
    if nb is not a valid notebook."""
    check_notebook(nb, name)
    exercise, kept, total, dropped = "this exercise", [], 0, 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            if SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
                dropped += 1
                continue
            exercise = _exercise_in(cell.source) or exercise
        elif cell.cell_type == "code":
            cell.source, n = strip_solutions(cell.source, exercise, f"{name}: cell {index}")
            total += n
            cell.outputs = []
            cell.execution_count = None
        kept.append(cell)
    nb.cells = kept
    nb.metadata.pop("widgets", None)
    return nb, total, dropped


def _write_notebook(nb, path: Path):
    text = nbformat.writes(nb)
    if not text.endswith("\n"):
        text += "\n"
    write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def _check_dirs(src_dir, out_dir) -> tuple[Path, Path]:
    src, out = Path(src_dir), Path(out_dir)
    if not src.is_dir():
        raise ValueError(f"source directory {str(src)!r} does not exist or is not a directory")
    if out.exists() and not out.is_dir():
        raise ValueError(f"output {str(out)!r} exists and is not a directory")
    if src.resolve() == out.resolve():
        raise ValueError(f"output directory {str(out)!r} is the source directory: the student "
                         f"edition would overwrite the notebooks with their solutions; choose another")
    return src, out


def make_student_edition(src_dir, out_dir, *, verbose=True, replace=False) -> dict[str, int]:
    """Write the student edition of every src_dir/*.ipynb into out_dir (created if missing).

    Reads every notebook (and checks its markers) before writing any; each write is
    atomic. A notebook already in out_dir is a learner's work: it is kept unless
    `replace`. Returns {notebook file name: number of solutions removed} for those written.
    """
    src, out = _check_dirs(src_dir, out_dir)
    paths = sorted(p for p in src.glob("*.ipynb") if p.is_file())
    editions = []
    for path in paths:
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as err:  # nbformat raises several kinds for a broken file (and JSON that is no notebook)
            message = str(err).splitlines()[0] if str(err) else ""
            raise ValueError(f"{path.name}: not a readable notebook ({type(err).__name__}: {message})") from None
        editions.append((path.name, *student_notebook(nb, path.name)))
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, nb, n, dropped in editions:
        if (out / name).exists() and not replace:
            if verbose:
                print(f"{name}: kept (already in {out}; --replace writes a fresh copy over it)")
            continue
        _write_notebook(nb, out / name)
        counts[name] = n
        if verbose:
            extra = f", {dropped} solution cell{'s' if dropped != 1 else ''} dropped" if dropped else ""
            print(f"{name}: {n} solution{'s' if n != 1 else ''} removed{extra}")
    if verbose and not paths:
        print(f"no notebooks in {src}")
    return counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_lib.edition",
        description="Write the student edition (solutions removed, outputs cleared) of every "
                    "notebook in SRC_DIR into OUT_DIR.")
    parser.add_argument("src_dir", help="directory with the course notebooks (*.ipynb)")
    parser.add_argument("out_dir", help="directory for the student edition (created; must differ from SRC_DIR)")
    parser.add_argument("--replace", action="store_true",
                        help="write over notebooks already in OUT_DIR (by default they are kept: "
                             "they may hold a learner's work)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)
    try:
        _check_dirs(args.src_dir, args.out_dir)
    except ValueError as err:
        parser.error(str(err))  # exit code 2
    try:
        make_student_edition(args.src_dir, args.out_dir, verbose=not args.quiet, replace=args.replace)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
