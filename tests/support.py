"""Helpers shared by the tests (fixtures live in conftest.py)."""
import inspect
import os
from pathlib import Path

import course_lib as cl


def time_limit(seconds: float) -> float:
    """A subprocess's time limit: `seconds`, times COURSE_LIB_TEST_SLOWDOWN where the tests run
    emulated (CONTRIBUTING.md, "Other platforms": ARM under qemu compiles 10-30 times slower)."""
    return seconds * float(os.environ.get("COURSE_LIB_TEST_SLOWDOWN", "1"))


def small_config(**overrides):
    """A small model for gradient checks: every code path, few parameters."""
    base = dict(d_model=16, n_heads=2, d_ff=32, n_layers=2)
    base.update(overrides)
    return cl.presets.deep_dive(**base)


def run_check(check, *fns, capsys=None):
    """Run a checker on the learner's function(s): run_check(check, fn, capsys) or
    run_check(check, *fns, capsys=capsys). -> (Result, what the checker printed)."""
    if capsys is None:
        *fns, capsys = fns
    result = check(*fns)
    return result, capsys.readouterr().out


# the checkers that meet every case there is (1.2: all 5,000 problems), so draw no random ones
EXHAUSTIVE = {"Exercise 1.2"}


def expect_pass(check, *fns, capsys, notebook=None):
    """The checker passes fns, printing one ✓ line (for Exercise <notebook>.k when given), and
    drew random cases on the way (the grader draws fresh ones: no table of its answers passes)."""
    from course_lib.checks import core
    drawn = core.generators_drawn()
    result, out = run_check(check, *fns, capsys=capsys)
    assert result.passed and result.done, out
    exercise = getattr(check, "exercise", None)
    graded = getattr(cl.checks, getattr(check, "__name__", ""), None) is check    # one of the course's
    assert not graded or exercise in EXHAUSTIVE or core.generators_drawn() > drawn, (
        f"{exercise}'s checker passed on cases it did not draw: fresh cases change nothing")
    assert out.startswith(f"✓ Exercise {notebook}." if notebook else "✓"), out
    assert "stages passed" in out and "Traceback" not in out, out
    return result


def expect_reject(check, *fns, capsys, notebook=None, stage=None, hint=None, message=None):
    """The checker rejects fns (a report, never a traceback), at `stage`, with `hint` and
    `message` among its words, when given."""
    result, out = run_check(check, *fns, capsys=capsys)
    assert not result.passed and result.done, out
    assert out.startswith(f"✗ Exercise {notebook}." if notebook else "✗"), out
    assert "Traceback" not in out, out
    if stage is not None:
        assert result.stage == stage and f"[stage: {stage}]" in out, (result.stage, out)
    if hint is not None:
        assert result.hint is not None and hint in result.hint and "  Hint: " in out, (result.hint, out)
    if message is not None:
        assert message in result.message, (result.message, out)
    return result


def notebook_asserts(notebook):
    """assert_passes(check, fn, capsys) and assert_rejects(check, fn, capsys, stage, hint) for
    the checkers of one notebook: the call convention most checker tests use."""
    def assert_passes(check, fn, capsys):
        return expect_pass(check, fn, capsys=capsys, notebook=notebook)

    def assert_rejects(check, fn, capsys, stage, hint):
        return expect_reject(check, fn, capsys=capsys, notebook=notebook, stage=stage, hint=hint)
    return assert_passes, assert_rejects


def notebook_solutions(path, n_cells, names):
    """The notebook's solution cells (those holding `### BEGIN SOLUTION`), run in one namespace
    that starts as `names`. -> (their sources, the namespace). A missing notebook fails: its
    checker's tests would otherwise vanish with it."""
    import nbformat

    assert path.exists(), f"{path} is missing: these tests read the exercises' solutions from it"
    nb = nbformat.read(path, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert len(cells) == n_cells
    namespace = dict(names)
    for source in cells:
        exec(compile(source, str(path), "exec"), namespace)
    return cells, namespace


EVERY_CHECKER = sorted(name for name in dir(cl.checks) if name.startswith("check_"))


def n_functions(check):
    """How many learner functions a checker takes: each parameter is one (some take two)."""
    return len(inspect.signature(check).parameters)


NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def solutions_by_checker():
    """Every checker the notebooks call, with the notebook's own solution functions it is called
    on: {'check_gelu': (gelu_forward, gelu_backward), ...}, read from the notebooks' check cells
    and their solution cells (run in one namespace per notebook)."""
    import re

    import nbformat
    import numpy as np

    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        namespace = {"np": np, "cl": cl}
        for source in code:
            if "### BEGIN SOLUTION" in source:
                exec(compile(source, str(path), "exec"), namespace)
        for source in code:
            for name, args in re.findall(r"checks\.(check_\w+)\(([^)]*)\)", source):
                found[name] = tuple(namespace[a.strip()] for a in args.split(","))
    return found


def files_that_are_not_models(folder):
    """Files a model loader may be handed by mistake or by malice, written into `folder`:
    {name: (path, the words a loader's one-line answer must hold)}. None is a course_lib model."""
    import pickle
    import zipfile

    import numpy as np

    folder = Path(folder)
    objects = np.array([{"code": "print('hi')"}], dtype=object)
    np.save(folder / "objects.npy", objects, allow_pickle=True)           # a pickled .npy ...
    (folder / "objects_npy.npz").write_bytes((folder / "objects.npy").read_bytes())  # ... renamed .npz
    np.savez(folder / "objects.npz", format=np.array("course_lib/1"), config=objects)
    (folder / "text.npz").write_text("hello, I am a text file\n", encoding="utf-8")
    (folder / "empty.npz").write_bytes(b"")
    with zipfile.ZipFile(folder / "zip.npz", "w") as z:
        z.writestr("readme.txt", "a zip archive, but no NumPy array in it")
    (folder / "pickle.npz").write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    (folder / "folder.npz").mkdir()
    return {name: (folder / name, says) for name, says in [
        ("objects.npy", "is a single NumPy array (.npy), not an .npz archive"),
        ("objects_npy.npz", "is a single NumPy array (.npy), not an .npz archive"),
        ("objects.npz", "its entry 'config' holds Python objects (pickled), which course_lib never loads"),
        ("text.npz", "is text, not an .npz archive"),
        ("empty.npz", "is empty"),
        ("zip.npz", "whose entry 'readme.txt' is not a NumPy array (not an .npz archive)"),
        ("pickle.npz", "is a Python pickle, not an .npz archive"),
        ("folder.npz", "is a directory, not a saved model"),
    ]}
