"""requirements.txt is the lock that uv makes from pyproject.toml's dependencies, and those are
every package course_lib imports (so that `pip install .` alone gives a working course_lib)."""
import ast
import shlex
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.txt"


def _body(text):
    """The lock without its header (the two comment lines that name the command)."""
    return text.split("\n", 2)[2]


def test_the_lock_is_what_uv_makes_from_the_list(tmp_path):
    """The command in the lock's header, run again into a new file (no earlier lock to prefer),
    gives the same lock: the list changed means the lock must be made again."""
    header = LOCK.read_text(encoding="utf-8").splitlines()[1].lstrip("#").strip()
    command = shlex.split(header)
    assert command[:3] == ["uv", "pip", "compile"] and "--universal" in command and "--exclude-newer" in command
    out = tmp_path / "requirements.txt"
    command[command.index("--output-file") + 1] = str(out)
    done = subprocess.run([sys.executable, "-m", "uv", *command[1:], "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _body(out.read_text(encoding="utf-8")) == _body(LOCK.read_text(encoding="utf-8")), (
        "requirements.txt is not what uv makes from pyproject.toml: make it again (CONTRIBUTING.md, Dependencies)")


def _imported_packages():
    """The top-level names of everything course_lib's modules import."""
    names = set()
    for path in (ROOT / "course_lib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_package_course_lib_imports_is_a_dependency_of_its_own():
    """Outside the standard library, each import is a listed dependency or one of theirs; torch,
    the tests' reference (torch_reference.py, imported where PyTorch is installed), aside."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    needed = set(listed)
    for name in listed:         # and what they bring
        needed |= {canonicalize_name(Requirement(r).name) for r in metadata.requires(name) or []
                   if "extra ==" not in r}
    optional = {"torch"}        # torch_reference.py: the tests' reference, imported where installed
    distributions = metadata.packages_distributions()
    missing = []
    for name in sorted(_imported_packages() - set(sys.stdlib_module_names) - {"course_lib"} - optional):
        owners = {canonicalize_name(d) for d in distributions.get(name, [name])}
        if not owners & needed:
            missing.append(name)
    assert missing == [], f"imported by course_lib but not in pyproject.toml's dependencies: {missing}"
