"""course_lib.exercises, the one table of the course's exercises, against the notebooks, the
checkers, `yours` and the grader that read it."""
import re
from pathlib import Path

import nbformat
import pytest

import course_lib as cl
from course_lib.exercises import BY_CHECKER, BY_NUMBER, EXERCISES, NOTEBOOKS, Exercise
from course_lib.exercises.cells import HEADING, expected_exercises
from course_lib.instructor.judge import checker_call
from course_lib.yours.parts import PARTS

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"


def test_the_notebooks_are_the_registry_s():
    assert [p.stem for p in sorted(NOTEBOOK_DIR.glob("*.ipynb"))] == list(NOTEBOOKS)


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_each_heading_is_its_row_and_each_check_cell_calls_the_row_s_checker(stem):
    nb = nbformat.read(NOTEBOOK_DIR / f"{stem}.ipynb", as_version=4)
    headings = [(m[1], m[2].strip()) for cell in nb.cells if cell.cell_type == "markdown"
                for m in HEADING.finditer(cell.source)]
    rows = [ex for ex in EXERCISES if ex.notebook == stem]
    assert headings == [(ex.number, ex.title) for ex in rows]
    called = {ex.name: re.search(r"checks\.(check_\w+)\(", nb.cells[ex.check_cell].source)[1]
              for ex in expected_exercises(nb)}
    assert called == {ex.name: ex.checker for ex in rows if ex.checker}


def test_every_checker_is_a_row_s_and_reports_its_number():
    exported = {name for name in dir(cl.checks) if name.startswith("check_") and name != "check_case"}
    assert exported == set(BY_CHECKER)
    for ex in EXERCISES:
        if ex.checker:
            assert getattr(cl.checks, ex.checker).exercise == ex.name


def test_a_checker_outside_the_table_is_refused_in_one_line():
    with pytest.raises(LookupError, match="check_nothing is no exercise's checker"):
        @cl.checks.checker()
        def check_nothing(fn):
            pass


def test_a_checker_of_its_own_row_reports_that_row(capsys):
    @cl.checks.checker(exercise=Exercise("0.9", "a made-up exercise"))
    def check_anything(fn):
        pass
    result = check_anything(lambda: None)
    assert result.passed and result.exercise == "Exercise 0.9"
    assert "Exercise 0.9 (a made-up exercise)" in capsys.readouterr().out


def test_yours_parts_are_the_rows_parts():
    assert [(p.name, p.exercise, p.role, p.checker) for p in PARTS] == [
        (part.name, ex.name, part.role, ex.checker) for ex in EXERCISES for part in ex.parts]


def test_the_grader_calls_the_row_s_checker_whichever_the_cell_names():
    cell = "cl.checks.check_causal_mask(my_attention)"     # 4.2's checker, in 4.4's check cell
    assert checker_call("Exercise 4.4", cell) == ("check_multihead_attention", ["my_attention"])
    assert checker_call("Exercise 4.3", cell) is None       # a derivation: no checker to call
    assert checker_call("Exercise 99.1", cell) is None      # no such exercise
    assert checker_call("Exercise 4.4", "print(1)") is None


def test_numbers_are_unique_and_in_order():
    numbers = [tuple(int(n) for n in ex.number.split(".")) for ex in EXERCISES]
    assert numbers == sorted(set(numbers)) and len(BY_NUMBER) == len(EXERCISES)
