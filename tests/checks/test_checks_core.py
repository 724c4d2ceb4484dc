"""The checker machinery: what a result says, in-place changes named."""

import numpy as np
import pytest

from course_lib import checks
from course_lib.checks import core
from course_lib.checks.core import CheckFailed, call, checker, expect_close, stage
from course_lib.exercises import Exercise
from support import EVERY_CHECKER, n_functions, run_check


@checker(exercise=Exercise("0.1", "double"))
def check_double(fn):
    with stage("hand-checkable case"):
        expect_close(call(fn, np.array([1.0, 2.0])), [2.0, 4.0], hint="multiply by 2")


def test_a_result_says_what_the_grade_report_needs(capsys):
    def stub(x):
        raise NotImplementedError
    passed, failed, not_done = (check_double(f) for f in (lambda x: 2 * x, lambda x: 3 * x, stub))
    assert [r.status for r in (passed, failed, not_done)] == ["passed", "failed", "not done"]
    assert failed.stage == "hand-checkable case" and failed.hint == "multiply by 2"
    assert all(r.exercise == "Exercise 0.1" for r in (passed, failed, not_done))


def test_a_checker_writes_no_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert check_double(lambda x: 2 * x).passed
    assert not list(tmp_path.iterdir())


def test_in_place_change_names_the_parameter_positional_or_keyword(capsys):
    def scales(x, *, out):
        out *= 2
        return x
    try:
        call(scales, np.ones(2), out=np.ones(2))
    except CheckFailed as e:
        assert "`out` in place" in e.message
    else:
        raise AssertionError("an in-place change passed")


def test_float32_result_is_named_as_a_dtype_problem(capsys):
    x = np.random.default_rng(0).standard_normal((100, 1000))
    want = x.sum(axis=1)
    acc = np.zeros(100, dtype=np.float32)          # a float32 accumulator: 7 digits
    for j in range(1000):
        acc += x[:, j]
    try:
        expect_close(acc, want)
    except CheckFailed as e:
        assert "float32" in e.hint and "precision" in e.hint
        got, expected = e.message.split("got ")[1].split(" (")[0].split(", expected ")
        assert got != expected and float(got) != float(expected)
    else:
        raise AssertionError("a float32 result passed a float64 check")


def test_a_result_right_to_1e_9_is_named_a_rounded_constant():
    want = np.random.default_rng(0).standard_normal(7)

    def hint_for(got, **kwargs):
        with pytest.raises(CheckFailed) as e:
            expect_close(got, want, hint="the formula's hint", rtol=1e-12, atol=1e-14, **kwargs)
        return e.value.hint
    assert hint_for(want * (1 + 2e-9)).startswith("a constant is rounded")
    assert hint_for(want * (1 + 1e-6)) == "the formula's hint"          # a mistake: too far
    assert "dtype problem" in hint_for(want.astype(np.float32))          # float32 is named so
    assert hint_for(want * (1 + 2e-9), named=True) == "the formula's hint"   # a known mistake
    with pytest.raises(CheckFailed) as e:
        core.diagnose(want * (1 + 2e-9), want, [(want * (1 + 2e-9), "named")], "default",
                      rtol=1e-12, atol=1e-14)
    assert e.value.hint == "named"


# ----- what every checker in course_lib.checks does with a stub, a NameError, a non-function ---------
@pytest.mark.parametrize("name", EVERY_CHECKER)
def test_a_stub_is_not_done_in_one_line(name, capsys):
    check = getattr(checks, name)

    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise k: your code here")

    result = check(*[stub] * n_functions(check))
    out, err = capsys.readouterr()
    assert not result.passed and not result.done
    assert "not done yet" in out and "Traceback" not in out + err
    assert len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("name", EVERY_CHECKER)
def test_another_exception_is_a_failed_result(name, capsys):
    check = getattr(checks, name)

    def broken(*args, **kwargs):
        return undefined_name  # noqa: F821  a learner's NameError

    result, out = run_check(check, *[broken] * n_functions(check), capsys=capsys)
    assert not result.passed and result.done
    assert "NameError" in result.message and "Traceback" not in out


@pytest.mark.parametrize("name", EVERY_CHECKER)
def test_something_not_callable_is_named(name, capsys):
    check = getattr(checks, name)
    result, out = run_check(check, *[np.zeros(3)] * n_functions(check), capsys=capsys)
    assert not result.passed and "pass your function itself" in out


# ----- what every checker does with torch tensors, lists, None and mixed dtypes ----------------------
def _convert(value, leaf):
    """value with every number and array in it replaced by leaf(np.asarray(it)), containers kept."""
    if isinstance(value, (np.ndarray, np.generic, int, float)) and not isinstance(value, bool):
        return leaf(np.asarray(value))
    if isinstance(value, (tuple, list)):
        return type(value)(_convert(v, leaf) for v in value)
    if isinstance(value, dict):
        return {k: _convert(v, leaf) for k, v in value.items()}
    return value


def _every_other_float32():
    """A leaf that casts the 1st, 3rd, ... float it meets to float32 (a mixed result), and
    leaves everything else as it was; leaf.cast counts the casts."""
    def leaf(a):
        if a.dtype.kind != "f":
            return a if a.ndim else a[()]
        leaf.seen += 1
        leaf.cast += leaf.seen % 2
        b = a.astype(np.float32) if leaf.seen % 2 else a
        return b if b.ndim else b[()]
    leaf.seen = leaf.cast = 0
    return leaf


def _torch_leaf(a):
    import torch
    return torch.tensor(a, requires_grad=a.dtype.kind == "f")      # grad: np.asarray refuses it


LEARNER_RETURNS = {
    "torch tensors": lambda: _torch_leaf,
    "lists": lambda: lambda a: a.tolist() if a.ndim else [a.item()],
    "mixed float32 and float64": _every_other_float32,
}


@pytest.fixture(scope="module")
def solutions():
    from support import solutions_by_checker
    return solutions_by_checker()


@pytest.mark.parametrize("kind", list(LEARNER_RETURNS) + ["None"])
@pytest.mark.parametrize("name", EVERY_CHECKER)
def test_no_checker_raises_on_what_a_learner_returns(name, kind, solutions, capsys):
    """The notebook's own solutions, their results turned into torch tensors, lists, None or a mix
    of float32 and float64 arrays: a Result with a message, never an exception. Torch tensors,
    None and float32 among float64 always fail (right-shaped lists of the right numbers may pass,
    as they did before: NumPy reads them as arrays)."""
    if kind == "torch tensors":
        pytest.importorskip("torch")
    changed = []

    def returning(fn):
        def learner(*args, **kwargs):
            result = fn(*args, **kwargs)
            if kind == "None":
                changed.append(result is not None)
                return None
            leaf = LEARNER_RETURNS[kind]()
            new = _convert(result, leaf)
            # a Node (9.4) or nothing (9.5) holds no array to convert: nothing changed
            changed.append(getattr(leaf, "cast", 1) > 0 and new is not result)
            return new
        return learner

    result, out = run_check(getattr(checks, name), *map(returning, solutions[name]),
                            capsys=capsys)
    assert isinstance(result, checks.Result) and "Traceback" not in out
    if not result.passed:
        assert result.message and out.startswith(("✗", "…")), out
    if kind != "lists" and any(changed):
        assert not result.passed, out
        if kind == "torch tensors":
            assert "torch" in result.message or "Tensor" in result.message, out
        if kind.startswith("mixed"):
            assert "float32" in result.message + out, out
