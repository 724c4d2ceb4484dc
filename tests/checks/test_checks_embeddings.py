"""Checkers of notebook 02 (course_lib.checks.embeddings): they pass the notebook's reference
solutions and reject realistic learner bugs at the right stage, with the right hint."""
from pathlib import Path

import numpy as np
import pytest

import course_lib as cl
from course_lib.checks import check_embed, check_embed_backward, check_sinusoidal
from support import notebook_solutions

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "02_embeddings_and_positions.ipynb"


# ---- the reference solutions: the notebook's own solution regions, read from it -----------

_, SOLVED = notebook_solutions(NOTEBOOK, 3, {"np": np})
embed, embed_backward, sinusoidal = SOLVED["embed"], SOLVED["embed_backward"], SOLVED["sinusoidal"]
REFERENCES = {"embed": embed, "embed_backward": embed_backward, "sinusoidal": sinusoidal}


def lines(capsys):
    return capsys.readouterr().out.strip().splitlines()


def assert_passes(check, fn, capsys, n_stages):
    result = check(fn)
    out = lines(capsys)
    assert result.passed and result.done, out
    assert result.n_stages == n_stages
    assert len(out) == 1 and out[0].startswith("✓ Exercise 2.") and f"all {n_stages} stages passed" in out[0]


def assert_rejects(check, fn, capsys, stage, hint):
    result = check(fn)
    out = lines(capsys)
    assert not result.passed and result.done, out
    assert result.stage is not None and result.stage.startswith(stage), (result.stage, out)
    assert result.hint is not None and hint in result.hint, (result.hint, out)
    assert out[0].startswith("✗ Exercise 2.") and f"[stage: {result.stage}]" in out[0]
    assert out[1] == f"  Hint: {result.hint}"
    return result


# ---- the notebook's solutions -------------------------------------------------------------

@pytest.mark.parametrize("name, check, n_stages", [
    ("embed", check_embed, 4), ("embed_backward", check_embed_backward, 6), ("sinusoidal", check_sinusoidal, 5)])
def test_notebook_solutions_pass(name, check, n_stages, capsys):
    assert_passes(check, REFERENCES[name], capsys, n_stages)


def test_checkers_are_exported():
    for name in ("check_embed", "check_embed_backward", "check_sinusoidal"):
        assert name in cl.checks.embeddings.__all__ and callable(getattr(cl.checks, name))


# ---- Exercise 2.1: embed ----------------------------------------------------------------

def test_embed_reference_passes(capsys):
    assert_passes(check_embed, embed, capsys, 4)


def test_embed_one_hot_matmul_passes(capsys):
    assert_passes(check_embed, lambda tokens, E: np.eye(E.shape[0])[tokens] @ E, capsys, 4)


def test_embed_off_by_one_is_named(capsys):
    assert_rejects(check_embed, lambda tokens, E: E[tokens - 1], capsys,
                   "hand-checkable", "off by one")


def test_embed_adding_positions_is_named(capsys):
    def with_positions(tokens, E):
        return E[tokens] + cl.kernels.sinusoidal_table(tokens.shape[1], E.shape[1])
    assert_rejects(check_embed, with_positions, capsys, "hand-checkable", "positions P[:T] are added later")


def test_embed_first_sequence_only_is_named(capsys):
    def first_only(tokens, E):
        return np.stack([E[tokens[0]]] * tokens.shape[0])
    assert_rejects(check_embed, first_only, capsys, "random cases", "every sequence of the batch")


def test_embed_transposed_tokens_fails_on_shape(capsys):
    result = assert_rejects(check_embed, lambda tokens, E: E[tokens.T], capsys, "shapes", "(B, T, C)")
    assert "has shape (3, 2, 4), expected (2, 3, 4)" in result.message


def test_embed_indexing_columns_is_a_failed_result(capsys):
    result = check_embed(lambda tokens, E: E[:, tokens])   # ids index the C axis: out of bounds
    lines(capsys)
    assert not result.passed and result.stage == "shapes" and "raised IndexError" in result.message


def test_embed_one_hot_sized_by_max_token_is_a_failed_result(capsys):
    # np.eye(tokens.max() + 1) is too small when the largest id V-1 does not occur: matmul raises
    result = check_embed(lambda tokens, E: np.eye(tokens.max() + 1)[tokens] @ E)
    out = lines(capsys)
    assert not result.passed and result.done
    assert "your function raised ValueError" in result.message and out[0].startswith("✗ Exercise 2.1")


def test_embed_returning_a_list_is_a_clear_failure(capsys):
    result = check_embed(lambda tokens, E: [E[t] for t in tokens])
    lines(capsys)
    assert not result.passed and result.stage == "shapes"
    assert "list of arrays" in result.message


# ---- Exercise 2.2: embed_backward -------------------------------------------------------

def overwrite(tokens, dX, V):
    dE = np.zeros((V, dX.shape[-1]))
    dE[tokens] = dX
    return dE


def plus_equals(tokens, dX, V):
    dE = np.zeros((V, dX.shape[-1]))
    dE[tokens] += dX
    return dE


def loop_overwrite(tokens, dX, V):
    dE = np.zeros((V, dX.shape[-1]))
    for b in range(tokens.shape[0]):
        for t in range(tokens.shape[1]):
            dE[tokens[b, t]] = dX[b, t]
    return dE


def test_embed_backward_reference_passes(capsys):
    assert_passes(check_embed_backward, embed_backward, capsys, 6)


def test_embed_backward_one_hot_product_passes(capsys):
    def one_hot(tokens, dX, V):
        OH = np.eye(V)[tokens.reshape(-1)]
        return OH.T @ dX.reshape(-1, dX.shape[-1])
    assert_passes(check_embed_backward, one_hot, capsys, 6)


@pytest.mark.parametrize("wrong", [overwrite, plus_equals, loop_overwrite])
def test_embed_backward_overwrite_is_caught_on_repeats(wrong, capsys):
    result = assert_rejects(check_embed_backward, wrong, capsys, "repeated token in one sequence",
                            "must ADD its gradients")
    assert "np.add.at" in result.hint and "loop" in result.hint


def test_embed_backward_overwrite_message_is_hand_checkable(capsys):
    # Max(1,1,1), dX[t] = [3t-10, 3t-9, 3t-8]: '1' sits at t = 2, 4, 6 -> -4 + 2 + 8 = 6; overwrite keeps 8
    result = check_embed_backward(overwrite)
    lines(capsys)
    assert "index (3, 0): got 8, expected 6" in result.message


def test_embed_backward_first_sequence_only_is_named(capsys):
    def first_only(tokens, dX, V):
        dE = np.zeros((V, dX.shape[-1]))
        np.add.at(dE, tokens[0], dX[0])
        return dE
    assert_rejects(check_embed_backward, first_only, capsys, "tokens repeated across the batch",
                   "sum over the whole batch")


def test_embed_backward_averaging_repeats_is_named(capsys):
    def mean_of_repeats(tokens, dX, V):
        dE = np.zeros((V, dX.shape[-1]))
        np.add.at(dE, tokens, dX)
        return dE / np.maximum(np.bincount(tokens.ravel(), minlength=V), 1)[:, None]
    assert_rejects(check_embed_backward, mean_of_repeats, capsys, "repeated token", "do not average")


def test_embed_backward_transposed_result_fails_on_shape(capsys):
    result = assert_rejects(check_embed_backward, lambda tokens, dX, V: embed_backward(tokens, dX, V).T,
                            capsys, "shapes", "shape of E: (V, C)")
    assert "has shape (4, 6), expected (6, 4)" in result.message


def test_embed_backward_forgetting_to_zero_is_caught(capsys):
    def ones_start(tokens, dX, V):   # e.g. np.ones / a reused buffer instead of np.zeros
        dE = np.ones((V, dX.shape[-1]))
        np.add.at(dE, tokens, dX)
        return dE
    assert_rejects(check_embed_backward, ones_start, capsys, "hand-checkable", "rows of unused tokens are 0")


# ---- Exercise 2.3: sinusoidal -----------------------------------------------------------

def halves(T, C):
    pos = np.arange(T)[:, None]
    angle = pos / 10000.0 ** (np.arange(0, C, 2)[None, :] / C)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def exponent_i(T, C):
    pos = np.arange(T)[:, None]
    angle = pos / 10000.0 ** (np.arange(C // 2)[None, :] / C)
    P = np.zeros((T, C))
    P[:, 0::2] = np.sin(angle)
    P[:, 1::2] = np.cos(angle)
    return P


def swapped(T, C):
    P = sinusoidal(T, C)
    return np.stack([P[:, 1::2], P[:, 0::2]], axis=-1).reshape(T, C)


def column_exponent(T, C):
    j = np.arange(C)[None, :]
    angle = np.arange(T)[:, None] / 10000.0 ** (j / C)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))


def from_one(T, C):
    return sinusoidal(T + 1, C)[1:]


def test_sinusoidal_reference_passes(capsys):
    assert_passes(check_sinusoidal, sinusoidal, capsys, 5)


def test_sinusoidal_float32_table_is_named_as_a_dtype_problem(capsys):
    # the exercise asks for float64; float32 is right to 7 digits only
    result = assert_rejects(check_sinusoidal, lambda T, C: sinusoidal(T, C).astype(np.float32),
                            capsys, "hand-checkable", "float32")
    assert "float64" in result.hint


def test_sinusoidal_rounded_log_10000_is_named(capsys):
    """ln(10000) typed with 9 digits: right to ~1e-9, which no formula mistake is (core)."""
    def typed_log(T, C):
        angle = np.arange(T)[:, None] * np.exp(-9.21034037 * np.arange(0, C, 2)[None, :] / C)
        P = np.zeros((T, C))
        P[:, 0::2], P[:, 1::2] = np.sin(angle), np.cos(angle)
        return P
    result = assert_rejects(check_sinusoidal, typed_log, capsys, "course size",
                            "a constant is rounded")
    assert "np.log(10000.0)" in result.hint


def test_sinusoidal_halves_is_named(capsys):
    assert_rejects(check_sinusoidal, halves, capsys, "position 0", "interleave the columns")


def test_sinusoidal_exponent_i_is_named(capsys):
    assert_rejects(check_sinusoidal, exponent_i, capsys, "hand-checkable", "the exponent is 2i/C")


def test_sinusoidal_swapped_is_named(capsys):
    assert_rejects(check_sinusoidal, swapped, capsys, "position 0", "sin and cos are swapped")


def test_sinusoidal_own_frequency_for_cos_is_named(capsys):
    assert_rejects(check_sinusoidal, column_exponent, capsys, "hand-checkable", "share one angle")


def test_sinusoidal_positions_from_one_is_named(capsys):
    assert_rejects(check_sinusoidal, from_one, capsys, "position 0", "positions start at 0")


def test_sinusoidal_transposed_fails_on_shape(capsys):
    result = assert_rejects(check_sinusoidal, lambda T, C: sinusoidal(T, C).T, capsys, "shapes", "(T, C)")
    assert "has shape (16, 8), expected (8, 16)" in result.message


def test_sinusoidal_odd_sizes_crash_is_a_failed_result(capsys):
    def needs_big_C(T, C):
        if C < 4:
            raise IndexError("index 2 is out of bounds")
        return sinusoidal(T, C)
    result = check_sinusoidal(needs_big_C)
    out = lines(capsys)
    assert not result.passed and result.done and result.stage.startswith("edge cases")
    assert "your function raised IndexError" in out[0]


# ---- common behaviour -------------------------------------------------------------------

@pytest.mark.parametrize("check", [check_embed, check_embed_backward, check_sinusoidal])
def test_other_exception_is_a_failed_result(check, capsys):
    def broken(*args):
        return {}["missing"]
    result = check(broken)
    out = lines(capsys)
    assert not result.passed and result.done and result.stage == "shapes"
    assert "your function raised KeyError" in result.message
    assert out[0].startswith("✗ Exercise 2.") and out[1].startswith("  Hint:")


@pytest.mark.parametrize("check", [check_embed, check_embed_backward, check_sinusoidal])
def test_non_numeric_result_is_a_clear_failure(check, capsys):
    result = check(lambda *args: "not an array")
    lines(capsys)
    assert not result.passed and result.stage == "shapes"
    assert "should be a NumPy array of numbers" in result.message


@pytest.mark.parametrize("check", [check_embed, check_embed_backward, check_sinusoidal])
def test_none_result_is_a_clear_failure(check, capsys):
    result = check(lambda *args: None)   # forgot the return statement
    lines(capsys)
    assert not result.passed and result.stage == "shapes"
    assert "is None" in result.message and "return" in result.hint


def test_non_callable_is_reported(capsys):
    result = check_embed(np.zeros(3))
    out = lines(capsys)
    assert not result.passed and "pass your function itself" in out[0]


def test_a_function_that_changes_its_input_in_place_fails_naming_it(capsys):
    def clobbers(tokens, dX, V):
        dE = embed_backward(tokens, dX, V)
        dX *= 0.0
        return dE
    result = check_embed_backward(clobbers)
    lines(capsys)
    assert not result.passed and "`dX` in place" in result.message


# ---- in-place changes, dtypes, odd return values -----------------

def scales_table(tokens, E):
    out = E[tokens].copy()
    E *= 0.0                 # e.g. reusing E as a scratch buffer
    return out


def sorts_tokens(tokens, dX, V):
    dE = embed_backward(tokens, dX, V)
    tokens.sort(axis=1)
    return dE


def scales_dX(tokens, dX, V):
    dX *= 1.0 + 1e-3         # e.g. folding a scale into the upstream gradient
    return embed_backward(tokens, dX, V) / (1.0 + 1e-3)


@pytest.mark.parametrize("check, fn, name", [(check_embed, scales_table, "E"),
                                             (check_embed_backward, sorts_tokens, "tokens"),
                                             (check_embed_backward, scales_dX, "dX")])
def test_changing_an_input_in_place_fails_naming_it(check, fn, name, capsys):
    result = check(fn)
    lines(capsys)
    assert not result.passed and f"`{name}` in place" in result.message


def test_embed_backward_float32_accumulator_is_named_as_a_dtype_problem(capsys):
    def float32_buffer(tokens, dX, V):
        dE = np.zeros((V, dX.shape[-1]), dtype=np.float32)
        np.add.at(dE, tokens, dX)
        return dE
    result = assert_rejects(check_embed_backward, float32_buffer, capsys,
                            "tokens repeated across the batch", "float32")
    assert "float64" in result.hint and "accumulator" in result.hint
    assert "got " in result.message and "expected " in result.message


def test_embed_float32_result_is_named_as_a_dtype_problem(capsys):
    result = assert_rejects(check_embed, lambda tokens, E: E[tokens].astype(np.float32), capsys,
                            "random cases", "float32")
    assert "float64" in result.hint


def test_embed_backward_loop_passes(capsys):
    def loop(tokens, dX, V):
        dE = np.zeros((V, dX.shape[-1]))
        for b in range(tokens.shape[0]):
            for t in range(tokens.shape[1]):
                dE[tokens[b, t]] += dX[b, t]
        return dE
    assert_passes(check_embed_backward, loop, capsys, 6)


ODD_VALUES = {
    "None": (None, "is None"),
    "complex": (np.ones((2, 3, 4)) * 1j, "complex"),
    "string": ("dE", "should be a NumPy array of numbers"),
    "huge int": (10 ** 400, "should be a NumPy array of numbers"),
    "list of huge ints": ([10 ** 400, 1], "should be a NumPy array of numbers"),
    "dict": ({"dE": 1}, "should be a NumPy array of numbers"),
}


@pytest.mark.parametrize("check", [check_embed, check_embed_backward, check_sinusoidal])
@pytest.mark.parametrize("odd", list(ODD_VALUES))
def test_odd_return_values_are_reported_in_a_sentence(check, odd, capsys):
    value, words = ODD_VALUES[odd]
    result = check(lambda *args: value)
    out = lines(capsys)
    assert not result.passed and result.done and result.stage == "shapes"
    assert words in result.message, result.message
    assert out[0].startswith("✗ Exercise 2.") and "Traceback" not in "\n".join(out)
