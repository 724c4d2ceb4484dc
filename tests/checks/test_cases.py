"""checks/cases.py, the machinery of checkers as data: CONTRIBUTING.md's walk-through checker,
run as it stands there, passes its reference and names each mistake at its stage."""
import pathlib
import re

import numpy as np
import pytest

from course_lib import exercises
from course_lib.checks import cases
from course_lib.checks.core import CheckFailed
from support import expect_pass, expect_reject

CONTRIBUTING = pathlib.Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"


def _blocks():
    """The walk-through's two code blocks: the registry's row, the checker."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    row, code = re.findall(r"```python\n(.*?)```", text[text.index("### Writing a checker"):], re.S)[:2]
    return row, code


@pytest.fixture(scope="module")
def walkthrough():
    row, code = _blocks()
    ex = eval(row, vars(exercises))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(exercises.BY_CHECKER, ex.checker, ex)
        namespace = {}
        exec(compile(code, "CONTRIBUTING.md", "exec"), namespace)
    assert namespace[ex.checker].exercise == "Exercise 6.7"
    return namespace


def test_the_walkthrough_checker_is_about_30_lines():
    code = _blocks()[1]
    assert 25 <= len([line for line in code.splitlines() if line.strip()]) <= 40


def test_it_passes_the_reference(walkthrough, capsys):
    result = expect_pass(walkthrough["check_leaky_relu_backward"], walkthrough["leaky_relu_backward"],
                         capsys=capsys)
    assert result.n_stages == 4


@pytest.mark.parametrize("wrong, stage, hint", [
    (lambda dy, h, a: np.where(h > 0, dy, 0.0), "hand-checkable case", "that is ReLU"),
    (lambda dy, h, a: np.where(h > 0, a * dy, dy), "hand-checkable case", "swapped"),
    (lambda dy, h, a: np.where(h > 0, 1.0, a), "random cases", "multiplies the slope by dy"),
    (lambda dy, h, a: np.where(h >= 0, dy, a * dy), "edge case: h = 0 passes alpha * dy",
     "scaled by alpha elsewhere"),
    (lambda dy, h, a: dy[0], "shapes", "dh has the shape of h"),
    (lambda dy, h, a: None, "shapes", "return"),
])
def test_it_names_each_mistake_at_its_stage(walkthrough, capsys, wrong, stage, hint):
    expect_reject(walkthrough["check_leaky_relu_backward"], wrong, capsys=capsys, stage=stage, hint=hint)


def test_several_outputs_are_judged_one_by_one():
    spec = cases.Spec(cases.Output("a", want=lambda x: 2 * x, hint="double it"),
                      cases.Output("b", want=lambda x: x + 1, hint="add one"))
    cases.check_case(lambda x: (2 * x, x + 1), spec, (np.ones(3),))
    with pytest.raises(CheckFailed, match="b is wrong") as e:
        cases.check_case(lambda x: (2 * x, x), spec, (np.ones(3),))
    assert e.value.hint == "add one"
    with pytest.raises(CheckFailed, match=r"should return 2 arrays \(a, b\)"):
        cases.check_case(lambda x: 2 * x, spec, (np.ones(3),))


def test_an_error_table_replaces_the_generic_hint():
    spec = cases.Spec(cases.Output("y", want=lambda x: x), errors=[(("IndexError", "-100"), "mask first")])

    def reads_minus_100(x):
        return x[np.array([-100])]
    with pytest.raises(CheckFailed, match="IndexError") as e:
        cases.check_case(reads_minus_100, spec, (np.ones(3),))
    assert e.value.hint == "mask first"


def test_finite_hint_fails_nan_first():
    spec = cases.Spec(cases.Output("y", want=lambda x: x, hint="formula", finite_hint="overflow"))
    with pytest.raises(CheckFailed, match="NaN or infinity") as e:
        cases.check_case(lambda x: x * np.nan, spec, (np.ones(2),))
    assert e.value.hint == "overflow"
