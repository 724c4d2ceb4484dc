"""The exercises a notebook sets, read from its own cells (grade, the Gradescope bundle and
`yours` read them alike): a markdown heading `### Exercise N.k: title`, then the stub/solution
code cell(s), then the first code cell that calls a checker (`cl.checks.check_...(`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from types import SimpleNamespace

HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+Exercise (\d+\.\d+)[ \t]*:?[ \t]*(.*)$", re.M)
CHECK_CALL = re.compile(r"\bchecks\.check_\w+\s*\(")


@dataclass
class Exercise:
    name: str          # "Exercise 1.2"
    title: str
    first_cell: int    # the heading's index
    check_cell: int    # the index of the cell that calls the checker


def expected_exercises(nb) -> list[Exercise]:
    """The exercises a notebook sets: heading, at least one code cell, then a checker call."""
    found, pending, has_code = [], None, False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            match = HEADING.search(cell.source)
            if match:
                pending, has_code = Exercise(f"Exercise {match[1]}", match[2].strip(), index, -1), False
        elif cell.cell_type == "code" and pending is not None:
            if CHECK_CALL.search(cell.source) and has_code:
                pending.check_cell = index
                found.append(pending)
                pending = None
            has_code = True
    return found


def code_cells(nb, ex: Exercise) -> list[int]:
    """The indices of the exercise's code cells, between its heading and its check cell (one
    tagged skip-execution left out, as a notebook run leaves it); grading and `yours` run these."""
    return [i for i in range(ex.first_cell + 1, ex.check_cell) if nb.cells[i].cell_type == "code"
            and "skip-execution" not in nb.cells[i].get("metadata", {}).get("tags", [])]


class _Cell(dict):
    """A cell as nbformat gives it (cell.source, cell.get("metadata", {}))."""
    __getattr__ = dict.get


def read_cells(path) -> SimpleNamespace:
    """A notebook's cells (nb.cells), read as JSON. For the judge, once per graded notebook, after
    grade.py has read the same file with nbformat: importing nbformat takes 2 s (its schema
    library's), reading a file this way a millisecond. An older format than 4 goes to nbformat."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("nbformat") != 4:
        import nbformat
        return nbformat.reads(json.dumps(data), as_version=4)
    cells = []
    for cell in data["cells"]:
        source = cell.get("source", "")
        cells.append(_Cell(cell, source="".join(source) if isinstance(source, list) else source))
    return SimpleNamespace(cells=cells)
