"""House style that keeps course_lib readable: short functions, modules of one concern.

Every function or method of course_lib is at most 60 lines; every module at most 350 lines,
except the exercise checkers (course_lib/checks/*.py), whose hint tables are data.
"""
import ast
from pathlib import Path

import pytest

import course_lib

ROOT = Path(course_lib.__file__).parent
MODULES = sorted(ROOT.rglob("*.py"))
MAX_FUNCTION, MAX_MODULE = 60, 350


def _name(path):
    return path.relative_to(ROOT.parent).as_posix()


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_functions_are_at_most_60_lines(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION]
    assert not long, f"{_name(path)}: split into named steps: " + "; ".join(long)


@pytest.mark.parametrize("path", [p for p in MODULES if p.parent.name != "checks"], ids=_name)
def test_modules_are_at_most_350_lines(path):
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_MODULE, f"{_name(path)} has {n} lines (at most {MAX_MODULE}): one concern per module"


def test_the_longest_first_list_names_files_that_exist():
    """The scheduling order (conftest.py at the top): a file renamed or removed must leave it too."""
    import importlib.util        # by its path: tests/ and notebooks/ have a conftest.py too
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT.parent / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    missing = [p for p in conftest.LONGEST_FIRST if not (ROOT.parent / p).is_file()]
    assert not missing, missing


def test_at_most_14_modules_at_the_top():
    """The front door: course_lib's top level holds at most 14 modules beside its packages."""
    top = [p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= 14, f"{len(top)} modules at the top of course_lib: group them by concern ({sorted(top)})"


def test_only_the_kernels_import_the_speed_machinery():
    """Outside kernels/, course_lib reaches _fast through kernels/machinery.py only."""
    found = []
    for path in MODULES:
        if "kernels" in path.relative_to(ROOT).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{_name(path)}:{node.lineno}" for name in names if "_fast" in name.split(".")]
    assert not found, f"import course_lib.kernels.machinery instead: {found}"
