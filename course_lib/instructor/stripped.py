"""The course_lib that a learner's code imports while one exercise is graded: this one, without
any working version of that exercise.

    tree = Stripped()                                  # reads course_lib's sources once
    tree.build(folder, ["kernels.softmax_forward"])    # folder/course_lib, for Exercise 3.1

What is left out:
- every part an exercise's cells have no use for (KEPT lists the others): the checkers (their
  references; `checks` is an empty package), `yours`, the plots, the epilogue's `text`, the
  commands and the instructors' tools (but the worker and its channel);
- the exercise's solutions (its checker's `library`: a kernel brings its NumPy twin; the
  functions that compute its answer under another name are listed there too, as
  checks.library.equivalent), every
  function of the same module that they call (a kernel's helpers, such as softmax_row), and
  every function of course_lib that calls one of those (attention holds a softmax, the model
  holds attention): each body becomes `removed("course_lib.<path>")` (removed.py),
  so that a call of one is a library call because there is nothing else it can be.
The rest works as in course_lib: Exercise 8.3 still has kernels.softmax_forward, 10.2 the
kernels of the block. Numba's compiled kernels are copied only for the files left unchanged
(the cache of a changed file would hold the solution's machine code).
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

from numba import config as numba_config
from numba.core.caching import _CacheLocator

from ..kernels import machinery

PACKAGE = Path(__file__).resolve().parents[1]        # course_lib/
# the parts an exercise's cells may use (the model, its kernels, the optimisers, the task, the
# gradient checks), the worker and the channel; not the checkers, `yours`, the plots, the
# epilogue's text package, the commands (each holds references or re-implementations)
KEPT = ("__init__.py", "_files.py", "_words.py", "block.py", "config.py",
        "gradcheck.py", "io.py", "model.py", "optim.py", "task.py", "train.py", "kernels",
        "instructor/__init__.py", "instructor/channel.py", "instructor/frames.py",
        "instructor/removed.py", "instructor/worker.py")
NEVER_REMOVED = ("instructor.",)
CHECKS_STUB = '''"""The checkers are not part of the grading sandbox: the grader runs them outside it."""


def __getattr__(name):
    raise AttributeError("course_lib.checks is not available while a notebook is graded")
'''
_KEPT_DECORATORS = {"property", "staticmethod", "classmethod", "cached_property"}


def _files() -> list[Path]:
    """course_lib's files that the sandbox gets (sources and data, no caches)."""
    out = []
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE)
        if path.is_file() and "__pycache__" not in rel.parts and (
                rel.parts[0] in KEPT or rel.as_posix() in KEPT):
            out.append(rel)
    return out


def _module(rel: Path) -> str:
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class _Def:
    """A function or method of a course_lib module, as the stripping sees it: refs are the
    names it reads (its own locals and parameters left out) and the attributes it reads."""

    def __init__(self, module, qualname, node):
        self.module, self.qualname, self.node = module, qualname, node
        self.path = f"{module}.{qualname}" if module else qualname
        local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        self.refs = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in local} | \
                    {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
        self.refs.discard(node.name)     # a recursive function does not call itself a caller


class Stripped:
    """course_lib's sources, parsed once; build() writes the sandbox's copy for one exercise."""

    def __init__(self):
        self.files = _files()
        self.sources = {rel: (PACKAGE / rel).read_bytes() for rel in self.files if rel.suffix == ".py"}
        self.defs = []
        for rel, source in self.sources.items():
            tree = ast.parse(source)
            self._collect(_module(rel), tree.body, "")

    def _collect(self, module, body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs.append(_Def(module, prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                self._collect(module, node.body, prefix + node.name + ".")

    def removed(self, paths) -> list[_Def]:
        """The definitions taken out for solutions at `paths` (below course_lib, as a checker's
        library names them): those, the module-level functions of their module that they call
        (transitively), then every function that calls one of these (transitively)."""
        by_path = {d.path: d for d in self.defs}
        out = {p: by_path[p] for p in paths if p in by_path}
        grow = True
        while grow:          # down: the solutions' own helpers
            grow = False
            for d in self.defs:
                if d.path not in out and "." not in d.qualname and any(
                        o.module == d.module and d.node.name in o.refs for o in out.values()):
                    out[d.path], grow = d, True
        grow = True
        while grow:          # up: what calls them (a private name only within its module)
            grow = False
            for d in self.defs:
                if d.path in out or d.path.startswith(NEVER_REMOVED):
                    continue
                if any(o.node.name in d.refs and (not o.node.name.startswith("_") or o.module == d.module)
                       for o in out.values()):
                    out[d.path], grow = d, True
        return list(out.values())

    def build(self, folder, paths) -> list[str]:
        """Write course_lib into folder/course_lib without the solutions at `paths`; -> the
        removed definitions' paths."""
        gone = self.removed(paths)
        root = Path(folder) / "course_lib"
        by_file = {}
        for d in gone:
            by_file.setdefault(d.module, []).append(d)
        for rel in self.files:
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            module = _module(rel) if rel.suffix == ".py" else None
            if module in by_file:
                target.write_text(_strip(self.sources[rel].decode(), by_file[module]), encoding="utf-8")
            else:
                shutil.copy2(PACKAGE / rel, target)      # the time stamp too: Numba's cache checks it
                if rel.suffix == ".py":
                    _copy_cache(PACKAGE / rel, target, _worker_cache_dir(root))
        (root / "checks").mkdir(exist_ok=True)
        (root / "checks" / "__init__.py").write_text(CHECKS_STUB, encoding="utf-8")
        return sorted(d.path for d in gone)


def _strip(source: str, defs: list[_Def]) -> str:
    """The module's source with each def's body replaced by a call of removed(), which any
    arguments reach (the text is rebuilt from the tree)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        d = next((t for t in defs if isinstance(node, type(t.node)) and node.name == t.node.name
                  and node.lineno == t.node.lineno), None)
        if d is None:
            continue
        call = ast.parse(f"return __import__('course_lib.instructor.removed', fromlist=['removed'])"
                         f".removed('course_lib.{d.path}')").body
        node.body = call
        node.args = ast.parse("def f(*args, **kwargs): pass").body[0].args   # any call reaches it
        node.decorator_list = [dec for dec in node.decorator_list
                               if _decorator_name(dec) in _KEPT_DECORATORS]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _decorator_name(node) -> str:
    while isinstance(node, ast.Call):
        node = node.func
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _cache_folder(py_file: Path, cache_dir) -> Path:
    """The folder where Numba keeps the compiled kernels of the module py_file: beside it, or
    under cache_dir (NUMBA_CACHE_DIR, or the fallback BLAS's own) in a folder named by Numba's
    rule from the module's folder (its name and a hash of its absolute path)."""
    if not cache_dir:
        return py_file.parent / "__pycache__"
    return Path(cache_dir) / _CacheLocator.get_suitable_cache_subpath(str(py_file))


def _worker_cache_dir(root: Path):
    """Numba's cache folder in the worker on the sandbox's course_lib at root (the worker has no
    NUMBA_CACHE_DIR): none on NumPy's BLAS, the fallback's own beside its blas.py otherwise."""
    return None if machinery.NUMPY_BLAS else root / "kernels" / "_fast" / "__pycache__" / machinery.FALLBACK_CACHE


def _copy_cache(source: Path, target: Path, target_cache_dir) -> None:
    """Numba's cache files of the module `source`, where this process keeps them, to where the
    worker will look for those of `target`."""
    cache = _cache_folder(source, numba_config.CACHE_DIR)
    if not cache.is_dir():
        return
    stem = source.stem + "."
    files = [f for f in cache.iterdir() if f.name.startswith(stem) and f.suffix in (".nbi", ".nbc")]
    if files:
        folder = _cache_folder(target, target_cache_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, folder / f.name)
