"""The course_lib that a learner's code imports while an exercise is graded (stripped.py): no
working version of that exercise in it, everything else that an exercise may use still working."""
import ast
import subprocess
import sys

import pytest

import course_lib.checks as checks
from course_lib.instructor import sandbox
from course_lib.instructor.judge import definition_paths
from course_lib.instructor.stripped import Stripped

CHECKERS = sorted((c for c in vars(checks).values() if callable(c) and hasattr(c, "exercise")),
                  key=lambda c: [int(n) for n in c.exercise.split()[1].split(".")])


@pytest.fixture(scope="module")
def tree():
    return Stripped()


def _defs(path):
    """{qualified name: def node} of a module file."""
    found = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + node.name] = node
            elif isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")
    walk(ast.parse(path.read_text()).body, "")
    return found


def test_every_checker_names_its_exercise_and_solutions():
    assert len(CHECKERS) == 38 and len({c.exercise for c in CHECKERS}) == 38
    for checker in CHECKERS:
        if checker.library:
            assert definition_paths(checker.library), checker.exercise


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.exercise)
def test_no_solution_is_left_in_the_sandbox(tree, tmp_path, checker):
    """Each solution of the exercise (and its NumPy twin) is a call of removed(), in the file the
    learner's code imports, or its module is not there at all; the checkers, references, plots,
    notebooks and tests are not there."""
    tree.build(tmp_path, list(definition_paths(checker.library)))
    root = tmp_path / "course_lib"
    for path in definition_paths(checker.library):
        module, _, name = path.rpartition(".")
        while module and not (root / (module.replace(".", "/") + ".py")).exists():   # Class.method
            module, _, cls = module.rpartition(".")
            name = f"{cls}.{name}"
        if not module:          # its whole module is left out (the epilogue's text package)
            assert not (root / path.split(".")[0]).exists(), path
            continue
        node = _defs(root / (module.replace(".", "/") + ".py"))[name]
        assert f"removed('course_lib.{path}')" in ast.unparse(node), path
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert "checks/__init__.py" in files and not [f for f in files if f.startswith("checks/") and
                                                  f != "checks/__init__.py"]
    assert not [f for f in files if f.startswith(("yours/", "viz/", "text/")) or f.endswith(".ipynb")
                or f in ("torch_reference.py", "instructor/grade.py", "instructor/judge.py")]


def _run(tmp_path, code):
    """Run code on the sandbox's course_lib in tmp_path, in the environment a grading worker has."""
    return subprocess.run([sys.executable, "-c", code], env=sandbox.worker_env(tmp_path, tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_softmax_takes_its_helper_and_what_holds_it_but_not_the_rest(tree, tmp_path):
    """Exercise 3.1: softmax_forward, its helper softmax_row and attention (which holds a softmax)
    are gone; LayerNorm still works, loaded from Numba's cache (its file is unchanged)."""
    tree.build(tmp_path, list(definition_paths(checks.check_stable_softmax.library)))
    done = _run(tmp_path, """
import numpy as np, course_lib as cl
from course_lib.instructor.removed import SolutionRemoved
from course_lib.kernels import softmax, layernorm
for f in (cl.kernels.softmax_forward, softmax.softmax_row, cl.kernels.attention_forward,
          cl.kernels.numpy_ref.softmax_forward):
    try:
        f(np.ones((2, 3)))
        print("ran", f.__name__)
    except SolutionRemoved as e:
        print("removed", e.name)
y = cl.kernels.layernorm_forward(np.ones((2, 4)), np.ones(4), np.zeros(4), 1e-5)
f = layernorm._forward_rows          # the kernel's compiled loops
print("layernorm", y[0].shape, sum(f.stats.cache_misses.values()))
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == [
        "removed course_lib.kernels.softmax.softmax_forward", "removed course_lib.kernels.softmax.softmax_row",
        "removed course_lib.kernels.attention.attention_forward",
        "removed course_lib.kernels.numpy_ref.softmax_forward"]
    assert done.stdout.split("\n")[4] == "layernorm (2, 4) 0"


def test_other_exercises_solutions_stay_usable(tree, tmp_path):
    """Exercise 8.3's cross-entropy backward may use the softmax kernel; 10.2's block backward the
    layer kernels (only Block.backward, and what calls it, is gone)."""
    tree.build(tmp_path / "83", list(definition_paths(checks.check_cross_entropy_backward.library)))
    tree.build(tmp_path / "102", list(definition_paths(checks.check_block_backward.library)))
    code = """
import numpy as np, course_lib as cl
from course_lib.instructor.removed import SolutionRemoved
print(cl.kernels.softmax_forward(np.zeros((1, 2))).tolist())
print(cl.kernels.layernorm_backward is not None, cl.kernels.linear_backward(
    np.ones((2, 4)), np.ones((2, 3)), np.ones((3, 4)), True)[0].shape)
try:
    cl.block.Block.backward(None, None, None)
except SolutionRemoved:
    print("Block.backward removed")
except Exception:
    print("Block.backward there")
"""
    out83, out102 = _run(tmp_path / "83", code), _run(tmp_path / "102", code)
    assert out83.returncode == 0 and out102.returncode == 0, out83.stderr + out102.stderr
    assert out83.stdout.splitlines() == ["[[0.5, 0.5]]", "True (2, 3)", "Block.backward there"]
    assert out102.stdout.splitlines() == ["[[0.5, 0.5]]", "True (2, 3)", "Block.backward removed"]
