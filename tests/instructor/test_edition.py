"""course_lib.instructor.edition (python -m course_lib.edition): the student edition strips
solutions, clears outputs, changes nothing else."""
import ast
import builtins
import copy
import json
import re
import subprocess
import symtable
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_lib.instructor.edition import make_student_edition, strip_solutions

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

ENCODE = '''\
def encode(text):
    """Token ids of text."""
    ### BEGIN SOLUTION
    ids = [VOCAB[t] for t in text.split()]
    return ids  # SECRET-1
    ### END SOLUTION
'''
DERIV = '''\
def derivative(f, x, h=1e-5):
    if h <= 0:
        ### BEGIN SOLUTION
        raise ValueError("h must be positive")  # SECRET-2
        ### END SOLUTION
    ### BEGIN SOLUTION
    return (f(x + h) - f(x - h)) / (2 * h)  # SECRET-3
    ### END SOLUTION

print("defined")'''
SOLUTION_MD = ":::{solution} ex-1-2\n:class: dropdown\nCentral differences: error O(h^2).\n:::"


def course_notebook():
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": "python"},
                                "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}})
    nb.cells = [
        new_markdown_cell("# 01 Tokens\n\nWe start from text. See also Exercise 9.9 later."),
        new_code_cell("VOCAB = {'Max': 15, '(': 17}\nprint(len(VOCAB))", execution_count=1,
                      outputs=[new_output("stream", name="stdout", text="2\n")]),
        new_markdown_cell("## Exercise 1.1: encode (easy, 5 min)\n\nCompare with Exercise 0.3."),
        new_code_cell(ENCODE, metadata={"tags": ["exercise"]}),
        new_code_cell("check(encode)", execution_count=2,
                      outputs=[new_output("execute_result", data={"text/plain": "'all good'"},
                                          execution_count=2)]),
        new_markdown_cell("**Exercise 1.2** (medium, 10 min): a central-difference derivative."),
        new_code_cell(DERIV),
        new_markdown_cell(SOLUTION_MD),
        new_markdown_cell("Answer: the error is O(h^2). SECRET-4", metadata={"tags": ["solution"]}),
        new_code_cell("x = 1  # no exercise here", metadata={"tags": ["keep-me"]}, execution_count=5),
    ]
    return nb


def write(nb, directory, name="01_tokens.ipynb"):
    directory.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, directory / name)
    return directory / name


def test_student_edition(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "out" / "student"
    original = course_notebook()
    write(original, src)
    counts = make_student_edition(src, out)
    assert counts == {"01_tokens.ipynb": 3}
    assert capsys.readouterr().out == "01_tokens.ipynb: 3 solutions removed, 1 solution cell dropped\n"
    assert sorted(p.name for p in out.iterdir()) == ["01_tokens.ipynb"]  # no temporary files left

    nb = nbformat.read(out / "01_tokens.ipynb", as_version=4)
    nbformat.validate(nb)
    text = json.dumps(nb)
    for secret in ("SECRET-1", "SECRET-2", "SECRET-3", "SECRET-4", "BEGIN SOLUTION", "END SOLUTION",
                   "VOCAB[t]", "(2 * h)"):
        assert secret not in text
    assert nb.cells[3].source == (
        'def encode(text):\n'
        '    """Token ids of text."""\n'
        '    raise NotImplementedError("Exercise 1.1: your code here")\n')
    assert nb.cells[6].source == (
        'def derivative(f, x, h=1e-5):\n'
        '    if h <= 0:\n'
        '        raise NotImplementedError("Exercise 1.2: your code here")\n'
        '    raise NotImplementedError("Exercise 1.2: your code here")\n'
        '\n'
        'print("defined")')

    # the tagged solution cell is gone, every other cell is there, unchanged but for outputs
    expected = [c for c in original.cells if "solution" not in c.metadata.get("tags", [])]
    assert len(nb.cells) == len(expected) == len(original.cells) - 1
    for got, want in zip(nb.cells, expected):
        assert got.cell_type == want.cell_type and got.metadata == want.metadata and got.id == want.id
        if got.cell_type == "markdown":
            assert got.source == want.source
        else:
            assert got.outputs == [] and got.execution_count is None
            if "BEGIN SOLUTION" not in want.source:
                assert got.source == want.source
    assert nb.cells[7].source == SOLUTION_MD  # the book's folded answer stays (untagged)
    want_meta = copy.deepcopy(original.metadata)
    del want_meta["widgets"]  # saved widget state is output of the instructor's run
    assert nb.metadata == want_meta


def test_stubs_are_valid_python_that_raise_with_the_exercise_number(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    write(course_notebook(), src)
    make_student_edition(src, out, verbose=False)
    nb = nbformat.read(out / "01_tokens.ipynb", as_version=4)
    namespace = {}
    for cell in (nb.cells[1], nb.cells[3], nb.cells[6]):
        exec(compile(cell.source, "<cell>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match=r"^Exercise 1\.1: your code here$"):
        namespace["encode"]("Max (")
    with pytest.raises(NotImplementedError, match=r"^Exercise 1\.2: your code here$"):
        namespace["derivative"](abs, 1.0)


def test_strip_solutions_details():
    assert strip_solutions("a = 1\n", "Exercise 1.1", "nb: cell 0") == ("a = 1\n", 0)
    # CRLF line ends, tabs, trailing spaces on a marker, no newline at the end
    src = "def f():\r\n\t### BEGIN SOLUTION  \r\n\treturn 1\r\n\t### END SOLUTION"
    new, n = strip_solutions(src, "this exercise", "nb: cell 0")
    assert n == 1
    assert new == 'def f():\r\n\traise NotImplementedError("this exercise: your code here")'
    # a marker mentioned inside a line is not a marker
    assert strip_solutions("s = '### BEGIN SOLUTION'\n", "E", "w") == ("s = '### BEGIN SOLUTION'\n", 0)


def test_fallback_exercise_name_and_heading_preference(tmp_path):
    nb = new_notebook()
    nb.cells = [new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n"),
                new_markdown_cell("Unlike Exercise 2.1, this one...\n\n### Exercise 2.3: masks\n\nAs in Exercise 2.2."),
                new_code_cell("### BEGIN SOLUTION\ny = 2\n### END SOLUTION\n")]
    write(nb, tmp_path / "src", "02.ipynb")
    make_student_edition(tmp_path / "src", tmp_path / "out", verbose=False)
    cells = nbformat.read(tmp_path / "out" / "02.ipynb", as_version=4).cells
    assert cells[0].source == 'raise NotImplementedError("this exercise: your code here")\n'
    assert cells[2].source == 'raise NotImplementedError("Exercise 2.3: your code here")\n'


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1\n", r"03_bad\.ipynb: cell 1: '### BEGIN SOLUTION' at line 1 has no"),
    ("x = 1\n### END SOLUTION\n", r"03_bad\.ipynb: cell 1: '### END SOLUTION' at line 2 without"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n",
     r"03_bad\.ipynb: cell 1: '### BEGIN SOLUTION' at line 2 inside"),
])
def test_unbalanced_markers(tmp_path, source, message):
    nb = new_notebook()
    nb.cells = [new_markdown_cell("## Exercise 3.1"), new_code_cell(source)]
    write(course_notebook(), tmp_path / "src")
    write(nb, tmp_path / "src", "03_bad.ipynb")
    with pytest.raises(ValueError, match=message):
        make_student_edition(tmp_path / "src", tmp_path / "out", verbose=False)
    assert not (tmp_path / "out").exists()  # all notebooks are checked before anything is written


def _course_json():
    return json.loads(nbformat.writes(course_notebook()))


def _without_source(cell):
    nb = _course_json()
    del nb["cells"][cell]["source"]
    return json.dumps(nb)


def _with(cell, key, value):
    nb = _course_json()
    nb["cells"][cell][key] = value
    return json.dumps(nb)


def _without_cells():
    nb = _course_json()
    del nb["cells"]
    return json.dumps(nb)


@pytest.mark.parametrize("text, message", [
    (_without_source(3), r"^05_bad\.ipynb: cell 3: not a valid notebook \('source' is a required property\)$"),
    (_without_source(0), r"^05_bad\.ipynb: cell 0: not a valid notebook \('source' is a required property\)$"),
    (_with(6, "source", 5), r"^05_bad\.ipynb: cell 6: not a valid notebook"),
    (_with(2, "cell_type", "weird"), r"^05_bad\.ipynb: cell 2: not a valid notebook"),
    (_with(8, "metadata", {"tags": "solution"}), r"^05_bad\.ipynb: cell 8: not a valid notebook \('solution' is not"),
    (_without_cells(), r"^05_bad\.ipynb: not a readable notebook \(.*cells"),
    ("{not json", r"^05_bad\.ipynb: not a readable notebook \(NotJSONError"),
    ("", r"^05_bad\.ipynb: not a readable notebook \(NotJSONError"),
    ("[1, 2]", r"^05_bad\.ipynb: not a readable notebook"),
    ('{"a": 1}', r"^05_bad\.ipynb: not a readable notebook"),
])
def test_malformed_notebook_is_named_with_its_cell_and_nothing_is_written(tmp_path, text, message):
    write(course_notebook(), tmp_path / "src")
    (tmp_path / "src" / "05_bad.ipynb").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as err:
        make_student_edition(tmp_path / "src", tmp_path / "out", verbose=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_cli_reports_a_malformed_notebook_in_one_line(tmp_path):
    write(course_notebook(), tmp_path / "notebooks")
    (tmp_path / "notebooks" / "05_bad.ipynb").write_text(_without_source(3), encoding="utf-8")
    result = run_cli("notebooks", "student", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == ("error: 05_bad.ipynb: cell 3: not a valid notebook "
                             "('source' is a required property)\n")
    assert not (tmp_path / "student").exists()


def test_refuses_to_write_over_the_source(tmp_path, monkeypatch):
    write(course_notebook(), tmp_path / "nbs")
    before = (tmp_path / "nbs" / "01_tokens.ipynb").read_bytes()
    with pytest.raises(ValueError, match="is the source directory"):
        make_student_edition(tmp_path / "nbs", tmp_path / "nbs")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="is the source directory"):
        make_student_edition("nbs", "./nbs/../nbs/")
    assert (tmp_path / "nbs" / "01_tokens.ipynb").read_bytes() == before
    with pytest.raises(ValueError, match="does not exist"):
        make_student_edition(tmp_path / "missing", tmp_path / "out")


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "course_lib.edition", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli(tmp_path):
    write(course_notebook(), tmp_path / "notebooks")
    write(new_notebook(cells=[new_markdown_cell("# no exercises")]), tmp_path / "notebooks", "00_intro.ipynb")
    ok = run_cli("notebooks", "student", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == ["00_intro.ipynb: 0 solutions removed",
                                      "01_tokens.ipynb: 3 solutions removed, 1 solution cell dropped"]
    assert (tmp_path / "student" / "01_tokens.ipynb").is_file()

    same = run_cli("notebooks", "notebooks", cwd=tmp_path)
    assert same.returncode == 2 and "is the source directory" in same.stderr
    missing = run_cli("notebooks", cwd=tmp_path)
    assert missing.returncode == 2 and "usage:" in missing.stderr
    nosrc = run_cli("nowhere", "out", cwd=tmp_path)
    assert nosrc.returncode == 2 and "does not exist" in nosrc.stderr

    bad = new_notebook(cells=[new_code_cell("### BEGIN SOLUTION\n")])
    write(bad, tmp_path / "notebooks", "02_bad.ipynb")
    broken = run_cli("notebooks", "student2", cwd=tmp_path)
    assert broken.returncode == 1
    assert broken.stderr.startswith("error: 02_bad.ipynb: cell 0:") and "Traceback" not in broken.stderr


def _leaked_solution_lines(instructor, student):
    """Lines of a solution (16+ characters) that the instructor edition has only inside solution
    regions and that the student edition still contains, anywhere."""
    regions, outside = [], []
    for cell in instructor.cells:
        parts = re.split(r"### (?:BEGIN|END) SOLUTION", cell.source)
        regions += parts[1::2]
        outside += parts[0::2]
    elsewhere = "\n".join(outside)
    lines = {line.split("#")[0].strip() for region in regions for line in region.splitlines()}
    lines = {t for t in lines if len(t) >= 16 and t not in elsewhere}
    text = "\n".join(cell.source for cell in student.cells)
    return sorted(t for t in lines if t in text)


def _reads_the_notebooks(source: str) -> bool:
    """Does the cell call cl.yours, which reads the learner's notebooks from their files?"""
    return any(isinstance(n, ast.Attribute) and n.attr == "yours" for n in ast.walk(ast.parse(source)))


def _scope_reads(table) -> set:
    """Module-level names that the functions, classes and comprehensions of a symbol table read."""
    names = set()
    for child in table.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
        names |= _scope_reads(child)
    return names


def _names(source: str) -> tuple[set, set, set]:
    """(read, bound, imported) module-level names of a cell, statement by statement (Python's own
    scoping, symtable): the names it reads before binding them itself (in its functions too), the
    names it binds, and those it binds by import."""
    read, bound, imported = set(), set(), set()
    for statement in ast.parse(source).body:
        table = symtable.symtable(ast.unparse(statement), "cell", "exec")
        symbols = table.get_symbols()
        read |= ({s.get_name() for s in symbols if s.is_referenced()} | _scope_reads(table)) - bound
        bound |= {s.get_name() for s in symbols if s.is_assigned() or s.is_imported()}
        imported |= {s.get_name() for s in symbols if s.is_imported()}
    return read - set(dir(builtins)), bound, imported


def cells_a_stub_can_reach(instructor, student) -> list[int]:
    """Indices of the student edition's code cells that must run to show what its stubs do.

    A cell the edition changed (a stub) is reached, and so is a cell that reads the learner's
    notebooks from their files (cl.yours); so is any later cell that mentions a name a
    reached cell bound or mentioned (it may have changed that object), modules aside. A reached
    cell then needs the earlier cells that bind what it mentions (its imports too) or mention it
    (they may change it). The other cells are
    the instructor edition's, with the instructor edition's inputs: the nbval run of the
    notebook runs them.
    """
    code = [i for i, c in enumerate(student.cells) if c.cell_type == "code"]
    theirs = [c.source for c in instructor.cells if c.cell_type == "code"]
    assert len(code) == len(theirs), "the student edition has other code cells than the instructor's"
    names = [_names(student.cells[i].source) for i in code]
    modules = set().union(*(imported for _, _, imported in names))
    reached, touched = set(), set()
    for k, i in enumerate(code):
        read, bound, _ = names[k]
        source = student.cells[i].source
        if source != theirs[k] or _reads_the_notebooks(source) or (read - modules) & touched:
            reached.add(k)
            touched |= (read | bound) - modules
    needed = set()
    for k in reversed(range(len(code))):
        read, bound, _ = names[k]
        if k in reached or bound & needed or (read - modules) & needed:
            reached.add(k)
            needed |= read
    return [code[k] for k in sorted(reached)]


def test_cells_a_stub_can_reach():
    """Of a setup, a stub, its check, an experiment on its own and a plot of it, a cell that uses
    the stub's function and a cell that needs the setup: all but the experiment and its plot."""
    instructor = new_notebook(cells=[
        new_code_cell("import numpy as np\ndata = np.arange(3)\nscale = 2"),          # 0: needed by 5
        new_markdown_cell("### Exercise 1.1: double"),
        new_code_cell("def double(x):\n    return x * scale"),                      # 2: the stub
        new_code_cell("check(double)"),                                             # 3: reaches double
        new_code_cell("def run(n):\n    return np.ones(n)\nlong = run(10**6)"),      # 4: on its own
        new_code_cell("print(long.sum())"),                                         # 5: reads only 4
        new_code_cell("doubled = double(data)"),                                    # 6: uses the stub
        new_code_cell("print(doubled, data)"),                                      # 7: reads 6's
        new_code_cell("yours = cl.yours.load('.')"),                               # 8: reads the files
    ])
    student = copy.deepcopy(instructor)
    student.cells[2].source = "def double(x):\n    raise NotImplementedError"
    assert cells_a_stub_can_reach(instructor, student) == [0, 2, 3, 6, 7, 8]
    # once a reached cell changes the experiment's array, the experiment and its plot are needed too
    for nb in (instructor, student):
        nb.cells += [new_code_cell("long[:3] = double(data)"), new_code_cell("print(long.max())")]
    assert cells_a_stub_can_reach(instructor, student) == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10]


def test_the_course_notebooks_are_there():
    """Without them the test below would have no cases, and pass by running none."""
    assert len(NOTEBOOKS) == 12, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_student_edition_of_course_notebook_runs(path, tmp_path):
    """No line of a solution is left; the stubs raise NotImplementedError, and the checkers
    turn that into 'not done yet', so the notebook runs top to bottom. Every cell a stub can
    reach runs, in order, with the cells it needs (cells_a_stub_can_reach); the others are the
    instructor edition's cells on the instructor edition's inputs, which its own run covers."""
    import nbclient

    src = tmp_path / "src"
    src.mkdir()
    (src / path.name).write_bytes(path.read_bytes())
    n = make_student_edition(src, tmp_path / "student", verbose=False)[path.name]
    nb = nbformat.read(tmp_path / "student" / path.name, as_version=4)
    instructor = nbformat.read(path, as_version=4)
    assert not _leaked_solution_lines(instructor, nb)
    nb.cells = [c for i, c in enumerate(nb.cells) if c.cell_type != "code"
                or i in set(cells_a_stub_can_reach(instructor, nb))]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path / "student")}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(err))  # no terminal colours in the report
        pytest.fail(f"student edition of {path.name} stops with an error "
                    f"(a stub escaped its checker?):\n{plain[-3000:]}")
    if n:
        printed = "\n".join(
            o.get("text", "") if o.output_type == "stream" else str(o.get("data", {}).get("text/plain", ""))
            for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert "not done yet" in printed.lower(), \
            f"{path.name}: {n} stubs but no checker printed 'not done yet'"


def test_a_learners_notebook_already_there_is_kept(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "my-course"
    write(course_notebook(), src)
    write(course_notebook(), src, name="02_next.ipynb")
    mine = write(new_notebook(cells=[new_code_cell("my work")]), out)   # 01 exists: the learner's
    before = mine.read_bytes()
    counts = make_student_edition(src, out)
    assert mine.read_bytes() == before and counts == {"02_next.ipynb": 3}
    assert "01_tokens.ipynb: kept" in capsys.readouterr().out
    assert make_student_edition(src, out, verbose=False, replace=True) == {"01_tokens.ipynb": 3,
                                                                           "02_next.ipynb": 3}
    assert "my work" not in mine.read_text()
