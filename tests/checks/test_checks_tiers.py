"""Hints in tiers (core.tiered): the idea at the first failure, the formula from the next
failure of the same exercise with the same idea, in the same process."""
import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from course_lib import checks
from course_lib.checks import core
from course_lib.checks.core import CheckFailed, checker, stage, tiered
from course_lib.exercises import Exercise
from support import expect_pass, expect_reject, solutions_by_checker

SOLUTIONS = solutions_by_checker()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_counts(monkeypatch):
    """Every test starts as a fresh kernel does: no failure seen yet."""
    monkeypatch.setattr(core, "_failures", collections.Counter())


@checker(exercise=Exercise("0.3", "double"))
def check_double(fn):
    with stage("values"):
        got = core.call(fn, np.array([1.0, 2.0]))
        if not np.allclose(got, [2.0, 4.0]):
            hint = (tiered("each entry doubles", "y = 2 * x") if np.allclose(got, [1.0, 2.0])
                    else "a hint without tiers")
            raise CheckFailed("wrong values", hint)


@checker(exercise=Exercise("0.4", "double again"))
def check_double_again(fn):
    check_double.__wrapped__(fn)


def identity(x):
    return x


def stub(x):
    raise NotImplementedError


def test_the_idea_first_then_the_formula(capsys):
    first = expect_reject(check_double, identity, capsys=capsys, hint="each entry doubles")
    assert "y = 2 * x" not in first.hint and "(hint 1 of 2: " in first.hint
    for _ in range(2):                               # the second failure, and every later one
        again = expect_reject(check_double, identity, capsys=capsys)
        assert again.hint == "each entry doubles. y = 2 * x (hint 2 of 2)"


def test_a_hint_without_tiers_is_shown_as_it_is(capsys):
    for _ in range(2):
        result = expect_reject(check_double, lambda x: 3 * x, capsys=capsys)
        assert result.hint == "a hint without tiers"


def test_counts_are_per_exercise_and_per_idea(capsys):
    expect_reject(check_double, identity, capsys=capsys)
    expect_reject(check_double, lambda x: 3 * x, capsys=capsys)        # another hint between
    other = expect_reject(check_double_again, identity, capsys=capsys)  # another exercise
    assert "(hint 1 of 2" in other.hint
    again = expect_reject(check_double, identity, capsys=capsys)
    assert "(hint 2 of 2)" in again.hint


def test_a_pass_resets_nothing(capsys):
    """The learner saw the idea once: after a pass, the same mistake again gets the formula;
    a pass, a stub or another exercise's failure leaves every count as it was."""
    expect_reject(check_double, identity, capsys=capsys)
    expect_pass(check_double, lambda x: 2 * x, capsys=capsys)
    assert not check_double(stub).done
    capsys.readouterr()
    expect_reject(check_double_again, identity, capsys=capsys)
    assert "(hint 2 of 2)" in expect_reject(check_double, identity, capsys=capsys).hint


def test_grading_is_unaffected(capsys):
    """Both tiers give the same status, stage and message; and the grader, which runs each
    notebook in a fresh process, sees the first tier each time."""
    one, two = check_double(identity), check_double(identity)
    capsys.readouterr()
    fields = ("status", "stage", "message", "exercise")
    assert [getattr(one, f) for f in fields] == [getattr(two, f) for f in fields]
    assert one.status == "failed" and one.hint != two.hint

    script = ("import json, numpy as np, course_lib as cl\n"
              "r = cl.checks.check_relu_backward(lambda dy, h: 0.5 * dy)\n"
              "print(json.dumps(r.hint))\n")
    hints = []
    for run in range(2):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True,
                             text=True).stdout
        hints.append(json.loads(out.strip().splitlines()[-1]))
    assert hints[0] == hints[1] and "(hint 1 of 2" in hints[0] and "np.where" not in hints[0]


# ----- checkers that once handed out the answer at the first failure: the formula only in tier 2 ------

def _gelu_pair(forward=None, backward=None):
    right = SOLUTIONS["check_gelu"]
    return [forward or right[0], backward or right[1]]


def _mlp_with_dw2_scaled(dout, x, W1, W2, z, h):
    dx, dW1, db1, dW2, db2 = SOLUTIONS["check_two_layer_mlp"][1](dout, x, W1, W2, z, h)
    return dx, dW1, db1, 0.3 * dW2, db2


CASES = [   # (checker, functions whose mistake no named hint matches, idea words, formula words)
    (checks.check_split_merge_heads,
     [lambda X, H: X.reshape(X.shape[0], X.shape[1], H, -1).transpose(0, 2, 1, 3)[..., ::-1],
      SOLUTIONS["check_split_merge_heads"][1]],
     "cut the last axis into H blocks of D", "X.reshape(B, T, H, D).transpose(0, 2, 1, 3)"),
    (checks.check_relu_backward, [lambda dy, h: 0.5 * dy],
     "the gradient dy passes where h > 0", "np.where(h > 0, dy, 0.0)"),
    (checks.check_gelu, _gelu_pair(forward=lambda h: np.tanh(h)),
     "factor by factor", "np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3))"),
    (checks.check_gelu, _gelu_pair(backward=lambda dy, h: 0.3 * dy),
     "the product rule gives two terms", "0.5 h (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 h^2)"),
    (checks.check_block_forward, [lambda x, attn, ffn, ln1, ln2, norm: ln2(ln1(x) + attn(x))],
     "the SUM is normalised", "x = ln1(x + attn(x)); then x = ln2(x + ffn(x))"),
    (checks.check_single_head_attention_backward,
     [lambda dout, Q, K, V, A: (Q, K, 2 * V)],
     "value s collects the gradient of every query t", "dV = A.T @ dout"),
    (checks.check_cross_entropy_backward, [lambda z, y: np.zeros_like(z) + 0.01],
     "use your result of Exercise 8.2", "(p - onehot(y)) / M"),
    (checks.check_two_layer_mlp, [SOLUTIONS["check_two_layer_mlp"][0], _mlp_with_dw2_scaled],
     "dW2 needs the input of the second layer and dout", "dW2 = h.T @ dout"),
    (checks.check_fork_backward, [lambda dy, x, W: (0.3 * dy, x.T @ dy)],
     "x is used twice", "dx = dy @ W.T + dy * (x > 0)"),
]


@pytest.mark.parametrize("check, fns, idea, formula", CASES,
                         ids=["4.1", "6.3", "6.5 forward", "6.5 backward", "6.6", "3.6", "8.3", "9.2", "9.3"])
def test_the_checkers_give_the_formula_only_at_the_second_failure(check, fns, idea, formula, capsys):
    first = expect_reject(check, *fns, capsys=capsys, hint=idea)
    assert formula not in first.hint and "hint 1 of 2" in first.hint
    second = expect_reject(check, *fns, capsys=capsys, hint=formula)
    assert second.stage == first.stage and second.message == first.message
    idea_shown = first.hint.split(" (hint 1 of 2")[0]
    assert second.hint.startswith(idea_shown + ". ") and second.hint.endswith("(hint 2 of 2)")
