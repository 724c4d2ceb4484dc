"""Fuzz tests (Hypothesis, a dev-only dependency): bad input ends in the module's own error or a
correct result, never another exception."""
import contextlib
import io as _io
import os

import pytest

pytest.importorskip("hypothesis")
import numpy as np  # noqa: E402
from hypothesis import HealthCheck, example, given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import course_lib as cl  # noqa: E402
from course_lib import checks, io, task  # noqa: E402
from support import EVERY_CHECKER, n_functions, small_config  # noqa: E402

FUZZ = settings(max_examples=60, deadline=None, database=None,   # no .hypothesis folder in the repo
                suppress_health_check=[HealthCheck.too_slow])


# ----- (a) io.load on damaged copies of a real checkpoint -------------------------------------------

@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny saved model with Adam state: (folder, file bytes, model)."""
    folder = tmp_path_factory.mktemp("fuzz")
    model = cl.Transformer(small_config(n_layers=1), seed=0)
    opt = cl.optim.Adam(model.params)
    io.save(model, folder / "good.npz", opt, extra={"val_acc": 0.5})
    return folder, (folder / "good.npz").read_bytes(), model


def load_or_refuse(path, original):
    """io.load_checkpoint either raises CheckpointError naming the file, or gives back `original` exactly."""
    try:
        model, opt, extra = io.load_checkpoint(path)
    except io.CheckpointError as e:
        assert os.fspath(path) in str(e)
        return False
    assert model.config == original.config and extra == {"val_acc": 0.5} and opt.t == 0
    for k, v in original.params.items():
        assert model.params[k].tobytes() == v.tobytes(), k
    return True


@FUZZ
@given(cut=st.integers(min_value=0))
def test_fuzz_truncated_checkpoint(checkpoint, cut):
    folder, data, model = checkpoint
    path = folder / "cut.npz"
    path.write_bytes(data[:cut % len(data)])
    assert not load_or_refuse(path, model)


@FUZZ
@given(flips=st.lists(st.integers(min_value=0), min_size=1, max_size=3))
def test_fuzz_bit_flipped_checkpoint(checkpoint, flips):
    folder, data, model = checkpoint
    damaged = bytearray(data)
    for bit in flips:
        bit %= 8 * len(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
    path = folder / "flipped.npz"
    path.write_bytes(bytes(damaged))
    load_or_refuse(path, model)     # a flip in a field zipfile ignores (a timestamp, say) may load


@FUZZ
@given(data=st.data())
def test_fuzz_shape_edited_checkpoint(checkpoint, data):
    folder, raw_bytes, model = checkpoint
    with np.load(folder / "good.npz") as f:
        arrays = {k: f[k] for k in f.files}
    key = data.draw(st.sampled_from(sorted(k for k in arrays if k.startswith(("param/", "optim/")))))
    dtype = data.draw(st.sampled_from(["float32", "float64", "int64", "int8", "bool", "complex64", "<U3", ">f4"]))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=40))
    arrays[key] = np.zeros(shape, dtype)
    np.savez(folder / "edited.npz", **arrays)
    fits = shape == model.params[key.split("/", 2)[-1]].shape and dtype == "float32"   # ">f4" is not
    if fits:
        io.load_checkpoint(folder / "edited.npz")    # zeros of the right shape and dtype: a valid file
    else:
        with pytest.raises(io.CheckpointError, match="edited.npz"):
            io.load_checkpoint(folder / "edited.npz")


# ----- (b) task.encode on arbitrary strings ---------------------------------------------------------

@FUZZ
@given(text=st.one_of(st.text(), st.lists(st.sampled_from(task.VOCAB + [" ", "x", "\t", "[", "Ma"])).map("".join)))
def test_fuzz_encode(text):
    try:
        ids = task.encode(text)
    except ValueError as e:
        assert str(e).startswith(f"cannot encode {text!r}: unknown text at ")
        return
    assert all(isinstance(i, int) and 0 <= i < len(task.VOCAB) for i in ids)
    assert task.decode(ids) == text.replace(" ", "")


# ----- (c) every checker on learner functions that return anything --------------------------------


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([10 ** 100, -10 ** 30, 2 ** 63]),
    st.floats(allow_nan=True, allow_infinity=True), st.complex_numbers(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.binary(max_size=8))
arrays = st.one_of(
    hnp.arrays(st.sampled_from([np.float32, np.float64, np.int64, np.int8, np.bool_, np.complex128, np.uint8]),
               hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6)),
    hnp.arrays(object, hnp.array_shapes(max_dims=2, max_side=4), elements=scalars),
    hnp.arrays(hnp.unicode_string_dtypes(), hnp.array_shapes(max_dims=2, max_side=4)))
values = st.recursive(
    st.one_of(scalars, arrays),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=12)

@pytest.mark.parametrize("name", EVERY_CHECKER)
@FUZZ
@given(value=values)
@example(value=[None, []])      # ragged results: NumPy cannot even tell whether they are complex
@example(value=((1, [None, []]), 2))
@example(value=([None, []], [None, []], [None, []]))
@example(value=float("nan"))    # a NaN or an infinity where an id (12.6's sample) was expected
@example(value=float("-inf"))
@example(value=np.array(np.nan))
def test_fuzz_checker_never_raises(name, value):
    check = getattr(checks, name)
    with contextlib.redirect_stdout(_io.StringIO()):
        result = check(*[lambda *args, **kwargs: value] * n_functions(check))
    assert isinstance(result, checks.Result) and not result.passed


# ----- (d) the checkers of notebooks 11 and 12 on solutions' results with odd numbers in them ---

LATE_CHECKERS = ["check_sgd_momentum_step", "check_adam_step", "check_clip_by_global_norm",
                 "check_train_loop", "check_char_windows", "check_baselines", "check_sample"]


def _torch_scalar(a):
    import torch
    return torch.tensor(a)


ODD_NUMBERS = {      # what takes the place of every number (and array) the solution returns
    "NaN": lambda a: np.full(a.shape, np.nan) if a.ndim else float("nan"),
    "NaN as a NumPy number": lambda a: np.full(a.shape, np.nan) if a.ndim else np.float64(np.nan),
    "inf": lambda a: np.full(a.shape, np.inf) if a.ndim else float("inf"),
    "-inf": lambda a: np.full(a.shape, -np.inf) if a.ndim else np.array(-np.inf),
    "None": lambda a: None,
    "a string": lambda a: "7",
    "a list": lambda a: a.tolist() if a.ndim else [a.item()],
    "a torch tensor": _torch_scalar,
}


def _replaced(value, leaf):
    """value with every number and array in it replaced by leaf(np.asarray(it)), containers kept."""
    if isinstance(value, (np.ndarray, np.generic, int, float)) and not isinstance(value, bool):
        return leaf(np.asarray(value))
    if isinstance(value, (tuple, list)):
        return type(value)(_replaced(v, leaf) for v in value)
    if isinstance(value, dict):
        return {k: _replaced(v, leaf) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def late_solutions():
    from support import solutions_by_checker
    found = solutions_by_checker()
    return {name: found[name] for name in LATE_CHECKERS}


@pytest.mark.parametrize("kind", list(ODD_NUMBERS))
@pytest.mark.parametrize("name", LATE_CHECKERS)
def test_late_checkers_answer_odd_numbers_with_a_report(name, kind, late_solutions):
    """The notebooks' own solutions of 11.2-11.6 and 12.1-12.6, every number they return replaced
    by NaN, an infinity, None, a string, a list or a torch tensor, and the odd value returned on its
    own: a failed Result with a message, never an exception (12.6's checker raised on NaN)."""
    if kind == "a torch tensor":
        pytest.importorskip("torch")
    leaf, check = ODD_NUMBERS[kind], getattr(checks, name)

    def replacing(fn):
        return lambda *args, **kwargs: _replaced(fn(*args, **kwargs), leaf)

    learners = ([replacing(fn) for fn in late_solutions[name]],
                [lambda *args, **kwargs: leaf(np.asarray(7.0))] * n_functions(check))
    for functions in learners:
        out = _io.StringIO()
        with contextlib.redirect_stdout(out):
            result = check(*functions)
        printed = out.getvalue()
        assert isinstance(result, checks.Result) and "Traceback" not in printed, printed
        if not result.passed:
            assert result.message and printed.startswith("✗"), printed
        if kind != "a list":      # the right numbers as lists may pass: NumPy reads them
            assert not result.passed, printed


def test_the_checkers_were_found():
    assert len(EVERY_CHECKER) >= 30 and "check_stable_softmax" in EVERY_CHECKER
