"""course_lib.yours: the learner's functions assembled into the model, compared and trained."""
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import course_lib as cl
from course_lib import yours
from course_lib.instructor.edition import make_student_edition
from course_lib.exercises.cells import expected_exercises
from course_lib.checks import reference
from course_lib.kernels import numpy_ref
from course_lib.yours.backend import PartError
from course_lib.yours.parts import HELPERS, PARTS

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


# ----- the adapters, on plain functions (no notebook) ------------------------------------------
def _reference_functions():
    """The parts written as a learner would, from course_lib's NumPy twins (not through its kernels;
    the block backward through `cl.kernels`, as 10.2 is written, which `yours` makes these)."""
    def linear_backward(dy, x, W):
        return dy @ W.T, x.T @ dy, dy.sum(0)

    def layernorm_forward(x, gamma, beta, eps):
        return numpy_ref.layernorm_forward(x, gamma, beta, eps)

    def multihead_attention(x, W_q, W_k, W_v, W_o, n_heads, causal):
        from course_lib.checks.multihead import _forward
        return _forward(x, W_q, W_k, W_v, W_o, n_heads, causal)

    def multihead_attention_backward(dy, x, W_q, W_k, W_v, W_o, A, n_heads):
        from course_lib.checks.multihead import _backward
        return _backward(dy, x, W_q, W_k, W_v, W_o, A, n_heads)

    return {
        "embed": lambda tokens, E: E[tokens],
        "embed_backward": lambda tokens, dX, V: numpy_ref.embedding_backward(tokens, dX, V)[0],
        "sinusoidal": lambda T, C: numpy_ref.sinusoidal_table(T, C),
        "softmax": numpy_ref.softmax_forward,
        "multihead_attention": multihead_attention,
        "multihead_attention_backward": multihead_attention_backward,
        "layernorm_forward": layernorm_forward,
        "layernorm_backward": numpy_ref.layernorm_backward,
        "linear_backward": linear_backward,
        "relu_backward": numpy_ref.relu_backward,
        "gelu_forward": numpy_ref.gelu_forward,
        "gelu_backward": lambda dy, h: numpy_ref.gelu_backward(dy, h),
        "block_forward": _block,
        # 10.2 as the notebook writes it: on `cl.kernels`, which `yours` makes the learner's kernels
        "block_backward": lambda dy, cache, params, norm, activation: reference.block_backward(
            dy, cache, params, norm, activation, kernels=cl.kernels),
        "cross_entropy": lambda logits, targets: numpy_ref.cross_entropy_forward(logits, targets)[0],
        "cross_entropy_backward": lambda logits, targets: numpy_ref.cross_entropy_backward(
            numpy_ref.softmax_forward(logits), targets),
    }


def _block(x, attn, ffn, ln1, ln2, norm):
    if norm == "post":
        x = ln1(x + attn(x))
        return ln2(x + ffn(x))
    x = x + attn(ln1(x))
    return x + ffn(ln2(x))


def test_every_part_assembled_equals_course_lib_in_float64():
    backend = yours.build(_reference_functions())
    comparison = yours.compare(backend)
    assert set(comparison.errors) == {"course model", "GPT-style model"}
    assert len(comparison.errors["course model"]) == 1 + 27      # the loss and every parameter
    assert comparison.largest < 1e-12, str(comparison)


def test_the_learners_functions_are_the_ones_that_run():
    """A wrong part shows in the gradients it feeds, and only those; the loss stays exact."""
    functions = _reference_functions()
    right = functions["layernorm_backward"]
    functions["layernorm_backward"] = lambda dy, xhat, rstd, gamma: (
        lambda dx, dg, db: (dx, 2 * dg, db))(*right(dy, xhat, rstd, gamma))
    errors = yours.compare(yours.build(functions)).errors["course model"]
    assert errors["loss"] < 1e-12
    assert errors["blocks.1.ln2.gamma"] > 0.5 and errors["blocks.1.ln2.beta"] < 1e-12


def test_the_learners_block_backward_runs_every_block_and_their_kernels_inside_it():
    """10.2 runs each block's backward; a wrong one shows in the gradients of the blocks only. The
    kernels it calls through `cl.kernels` are the learner's (6.2's linear_backward here)."""
    functions = _reference_functions()
    right = functions["block_backward"]

    def doubled_w1(dy, cache, params, norm, activation):
        dx, g = right(dy, cache, params, norm, activation)
        return dx, {**g, "ffn.w1": 2 * g["ffn.w1"]}

    functions["block_backward"] = doubled_w1
    errors = yours.compare(yours.build(functions)).errors
    for model in ("course model", "GPT-style model"):
        assert errors[model]["blocks.0.ffn.w1"] > 0.5 and errors[model]["blocks.0.ffn.w2"] < 1e-12
        assert errors[model]["loss"] < 1e-12

    calls = []
    functions["block_backward"] = right
    functions["linear_backward"] = lambda dy, x, W: calls.append(1) or (dy @ W.T, x.T @ dy, dy.sum(0))
    assert yours.compare(yours.build(functions)).largest < 1e-12 and calls


def test_instructor_model_backward_runs_the_learners_block_backward(tmp_path):
    """The instructor edition's 10.3 calls its 10.2 by name: a wrong 10.2 shows in its gradients."""
    nb = nbformat.read(NOTEBOOKS / "10_backprop_whole_model.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("def block_backward("))
    assert cell.source.endswith("    return dx, g")
    cell.source = cell.source.replace("    return dx, g", '    g["ffn.w1"] = 2 * g["ffn.w1"]\n    return dx, g')
    nbformat.write(nb, tmp_path / "10_backprop_whole_model.ipynb")
    got = yours.load(tmp_path)
    statuses = _status(got.table)
    assert statuses["block_backward"][0] == "yours" and statuses["model_backward"][0] == "yours"
    assert {s.name: s.check for s in got.table if s.status == "yours"} == {
        "block_backward": "failed", "model_backward": "failed"}
    cfg = cl.presets.deep_dive(dtype="float64")
    model, plain = cl.Transformer(cfg, backend=got.backend), cl.Transformer(cfg)
    tokens, targets = cl.task.splits(0)["train"]
    for m in (model, plain):
        m.params.update({k: v.copy() for k, v in model.params.items()})
        m.loss(tokens[:8], targets[:8])
    ref = plain.backward()
    for mine in (got.model_backward(model), model.backward()):     # 10.3's, and the model's own blocks
        assert np.allclose(mine["blocks.0.ffn.w1"], 2 * ref["blocks.0.ffn.w1"])
        assert np.allclose(mine["blocks.0.ffn.w2"], ref["blocks.0.ffn.w2"])


@pytest.mark.parametrize("part, fn, says", [
    ("embed", lambda tokens, E: E[tokens][:, :-1], "embed (Exercise 2.1): returned shape (16, 7, 64) where the "
                                                   "model needs (16, 8, 64)"),
    ("linear_backward", lambda dy, x, W: (dy @ W.T, x.T @ dy), "asks for 3 values"),
    ("relu_backward", lambda dy, h: 1 / 0, "relu_backward (Exercise 6.3): raised ZeroDivisionError"),
    ("cross_entropy", lambda logits, targets: np.zeros(3), "one number, the mean loss"),
])
def test_a_part_that_fails_in_the_model_is_named(part, fn, says):
    functions = _reference_functions()
    functions[part] = fn
    with pytest.raises(PartError) as err:
        yours.compare(yours.build(functions))
    assert err.value.part == part and says in str(err.value)


def test_the_model_takes_a_learners_backend_and_refuses_others():
    cfg = cl.presets.deep_dive(dtype="float64")
    model = cl.Transformer(cfg, backend=yours.build({}))
    tokens, targets = cl.task.splits(0)["train"]
    assert model.loss(tokens[:4], targets[:4]) == cl.Transformer(cfg).loss(tokens[:4], targets[:4])
    with pytest.raises(TypeError, match="kernel backend"):
        cl.Transformer(cfg, backend=object())
    with pytest.raises(ValueError, match="unknown backend"):
        cl.Transformer(cfg, backend="torch")


def test_course_lib_loop_trains_with_the_stand_ins():
    from course_lib.yours.parts import train_loop_in
    loop = train_loop_in(HELPERS)
    model = cl.Transformer(cl.presets.deep_dive(d_model=16, n_heads=2, d_ff=32, dtype="float64"))
    tokens, targets = cl.task.splits(0)["train"]
    history = loop(model, yours.model_backward, (tokens[:64], targets[:64]), 3, lambda t: 3e-3, 32)
    assert len(history["loss"]) == 6 and history["loss"][-1] < history["loss"][0]


# ----- from notebooks, in the scratch process ---------------------------------------------------
def _learner(tmp_path, changes):
    """A copy of the instructor edition with exercises' solution cells replaced: {exercise: source}."""
    folder = tmp_path / "learner"
    folder.mkdir()
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for ex in expected_exercises(nb):
            if ex.name in changes:
                first = next(i for i in range(ex.first_cell + 1, ex.check_cell) if nb.cells[i].cell_type == "code")
                nb.cells[first].source = changes[ex.name]
        nbformat.write(nb, folder / path.name)
    return folder


def test_an_older_solved_edition_still_loads(tmp_path):
    """A learner's edition from before the engine and the new 10.2: notebook 09 without 9.4 and 9.5,
    10.2 the post-LN backward of three arguments. It loads (the engine is no part of the model), the
    old 10.2 and the 10.3 that calls it are named in one line each, course_lib's stand in, and the
    model stays exact."""
    folder = _learner(tmp_path, {"Exercise 10.2": "def block_backward(dy, cache, params):\n    return dy, {}"})
    path = folder / "09_backprop_chain_rule.ipynb"
    nb = nbformat.read(path, as_version=4)
    engine = [ex for ex in expected_exercises(nb) if ex.name in ("Exercise 9.4", "Exercise 9.5")]
    assert len(engine) == 2
    del nb.cells[engine[0].first_cell:engine[1].check_cell + 1]
    nbformat.write(nb, path)
    got = yours.load(folder)
    statuses = _status(got.table)
    assert statuses["block_backward"][0] == "error" and "takes 3 positional arguments" in statuses["block_backward"][1]
    assert statuses["model_backward"][0] == "error", statuses["model_backward"]   # it calls that 10.2
    assert statuses["embed"][0] == "yours" and statuses["adam_step"][0] == "yours"
    assert got.compare().largest < 1e-10


def _status(table):
    return {s.name: (s.status, s.message) for s in table}


def test_instructor_edition_is_all_yours_and_exact():
    got = yours.load(NOTEBOOKS)
    statuses = _status(got.table)
    assert {status for status, _ in statuses.values()} == {"yours"}, statuses
    assert {s.check for s in got.table} == {"passed"}, [(s.name, s.check_message) for s in got.table]
    assert f"{len(PARTS)} of {len(PARTS)} functions yours, {len(PARTS)} of them passing" in str(got)
    assert got.compare().largest < 1e-10
    model = cl.Transformer(cl.presets.deep_dive(dtype="float64"), backend=got.backend)
    tokens, targets = cl.task.splits(0)["train"]
    model.loss(tokens[:8], targets[:8])
    assert set(got.model_backward(model)) == set(model.params)
    assert got.train_loop is got.functions["train_loop"]           # their Exercise 11.6


def test_student_edition_is_not_done_and_course_lib_stands_in(tmp_path):
    make_student_edition(NOTEBOOKS, tmp_path / "student", verbose=False)
    got = yours.load(tmp_path / "student")
    assert {s.status for s in got.table} == {"not done"}
    assert {s.check for s in got.table} == {""}          # no checker runs on course_lib's stand-ins
    assert got.functions == {}
    assert got.compare().largest < 1e-12
    assert got.train_loop.__module__ == "course_lib.yours.parts"    # course_lib's loop stands in


@pytest.mark.parametrize("posix", [True, False], ids=["posix", "windows-like"])
def test_broken_looping_and_hungry_cells_are_named_and_the_rest_runs(tmp_path, posix, request):
    """Also where there is no SIGALRM nor RLIMIT_AS (Windows): a watchdog thread stops the endless
    cells, and the allocation fails by itself or the memory watch stops the process."""
    if not posix:
        request.getfixturevalue("windows_like")
    folder = _learner(tmp_path, {
        "Exercise 2.4": "raise ValueError('half-written')",
        "Exercise 3.1": "while True:\n    pass",
        "Exercise 5.1": "big = np.ones(2 ** 40)",
        "Exercise 6.3": "def relu_backward(dy, h):\n    while True:\n        pass",
        "Exercise 5.3": "def layernorm_backward(dy, xhat, rstd, gamma):\n    return dy * undefined_name",
    })
    got = yours.load(folder, memory=3, cell_seconds=3, model_seconds=10, timeout=120)
    statuses = _status(got.table)
    assert statuses["sinusoidal"] == ("error", "a cell raised ValueError: half-written")
    assert statuses["softmax"][0] == "error" and "time limit" in statuses["softmax"][1]
    assert statuses["layernorm_forward"][0] == "error" and "MemoryError" in statuses["layernorm_forward"][1]
    assert statuses["relu_backward"][0] == "error" and "time limit in the model" in statuses["relu_backward"][1]
    assert statuses["layernorm_backward"][0] == "error" and "NameError" in statuses["layernorm_backward"][1]
    assert statuses["multihead_attention"][0] == "yours" and statuses["embed"][0] == "yours"
    assert "relu_backward" not in got.functions and "embed" in got.functions
    assert got.compare().largest < 1e-10
    assert "why course_lib's stands in:" in str(got)


def _command(*args):
    return subprocess.run([sys.executable, "-m", "course_lib", "yours", *map(str, args), "--no-progress"],
                          capture_output=True, text=True, cwd=NOTEBOOKS.parent, timeout=900)


def test_command_trains_the_learners_model(tmp_path):
    """The learner's loop trains the learner's model (8 epochs: the task is learned by then; the
    default 20 take twice as long)."""
    run = _command(NOTEBOOKS, "--train", "--epochs", "8")
    assert run.returncode == 0, run.stderr
    assert "the course model trained 8 epochs" in run.stdout
    last = run.stdout.strip().splitlines()[-1]
    head, accuracy = last.rsplit("test accuracy ", 1)
    assert head.startswith("your transformer: ") and float(accuracy) >= 0.995, run.stdout
    k, n = head.split(": ")[1].split(" functions")[0].split(" of ")
    assert int(n) == int(k) == len(PARTS)
    assert "your train_loop, your model" in run.stdout
    assert float(head.split("largest gradient rel. error ")[1].rstrip(", ")) < 1e-10


def test_command_says_what_is_wrong_in_one_line(tmp_path):
    wrong = _learner(tmp_path, {"Exercise 6.2": "def linear_backward(dy, x, W):\n    return dy @ W.T, 2 * x.T @ dy, "
                                                "dy.sum(0)"})
    run = _command(wrong)
    last = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 1 and last.endswith("test accuracy - (not trained: --train trains it)"), run.stdout
    assert last.startswith(f"your transformer: {len(PARTS) - 1} of {len(PARTS)} functions yours,")
    row = next(line for line in run.stdout.splitlines() if line.startswith("linear_backward "))
    assert row.split()[1:4] == ["6.2", "yours", "failed"], row
    assert "linear_backward (Exercise 6.2): [" in run.stdout      # the checker's stage and message
    for bad, says in ((tmp_path / "nowhere", "is not a folder"), (tmp_path, "holds no course notebook")):
        run = _command(bad)
        assert run.returncode == 2 and says in run.stderr and "Traceback" not in run.stderr


def _solution(exercise):
    """The source of the instructor edition's solution cell of `exercise`."""
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for ex in expected_exercises(nb):
            if ex.name == exercise:
                return next(nb.cells[i].source for i in range(ex.first_cell + 1, ex.check_cell)
                            if nb.cells[i].cell_type == "code")
    raise LookupError(exercise)


def _loop_reset_every_epoch():
    """Exercise 11.6's solution with the step counter started again every epoch."""
    right = _solution("Exercise 11.6")
    epoch = "        order = rng.permutation(n)\n"
    assert epoch in right
    return right.replace(epoch, "        order, t = rng.permutation(n), 0\n")


def test_a_function_failing_its_checker_is_not_counted_and_its_run_says_so(tmp_path):
    """A train_loop that fails Exercise 11.6's checker still trains (the model runs what the learner
    wrote), but the table, the training line and the last line say that it does not pass."""
    run = _command(_learner(tmp_path, {"Exercise 11.6": _loop_reset_every_epoch()}), "--train", "--epochs", "1")
    row = next(line for line in run.stdout.splitlines() if line.startswith("train_loop "))
    assert row.split()[1:4] == ["11.6", "yours", "failed"], run.stdout
    assert "your train_loop (not passing 11.6's checker), your model" in run.stdout
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith(f"your transformer: {len(PARTS) - 1} of {len(PARTS)} functions yours,"), last
    assert float(last.rsplit("test accuracy ", 1)[1]) >= 0 and run.returncode == 1


def test_every_part_names_the_checker_its_notebook_calls():
    """parts.PARTS says which checker judges each function: the one the notebook's check cell calls."""
    calls = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        calls.update({ex.name: nb.cells[ex.check_cell].source for ex in expected_exercises(nb)})
    for part in PARTS:
        assert f"checks.{part.checker}(" in calls[part.exercise], (part, calls[part.exercise])
        assert part.name in calls[part.exercise], (part, calls[part.exercise])


def test_an_unreadable_notebook_is_named_for_its_functions(tmp_path):
    folder = _learner(tmp_path, {})
    (folder / "05_residuals_and_layernorm.ipynb").write_text("{ not json", encoding="utf-8")
    got = yours.load(folder)
    statuses = _status(got.table)
    for name in ("layernorm_forward", "layernorm_backward"):
        status, message = statuses[name]
        assert status == "error" and message.startswith("its notebook, 05_residuals_and_layernorm.ipynb "), message
        assert "not a readable notebook" in message
    assert statuses["embed"][0] == "yours" and "why course_lib's stands in:" in str(got)


def test_a_cell_tagged_skip_execution_is_left_out_as_the_grader_leaves_it(tmp_path):
    """An exercise's code cell tagged skip-execution does not run in `yours`, as in grading."""
    from course_lib.yours.cells import read_folder
    nb = nbformat.read(NOTEBOOKS / "01_tokens_and_task.ipynb", as_version=4)
    ex = expected_exercises(nb)[0]
    cell = next(c for c in nb.cells[ex.first_cell + 1:ex.check_cell] if c.cell_type == "code")
    kept = cell.source
    cell.metadata["tags"] = ["skip-execution"]
    nbformat.write(nb, tmp_path / "01_tokens_and_task.ipynb")
    got = next(e for e in read_folder(tmp_path) if e.name == ex.name)
    assert kept not in got.sources
    cell.metadata["tags"] = []
    nbformat.write(nb, tmp_path / "01_tokens_and_task.ipynb")
    assert kept in next(e for e in read_folder(tmp_path) if e.name == ex.name).sources
