"""The form rules of CONTRIBUTING.md ("Form rules") that a program can check.

Each stored notebook: executed in order from a fresh kernel, no absolute path, answers in
<details> (never a MyST dropdown, which Jupyter shows as plain text), at most 350 KB, no
code line over 88 characters, no per-cell timestamps, no solution line printed in a cell
before its exercise, at least one derivation exercise and two code exercises, each code
exercise followed by a checker call, and nothing near a checker to copy its answer from.
"""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def source(cell):
    return "".join(cell.get("source", ""))


@pytest.fixture(params=NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def notebook(request):
    path = request.param
    return path, json.loads(path.read_text(encoding="utf-8"))["cells"]


def code_cells(cells):
    return [c for c in cells if c["cell_type"] == "code" and source(c).strip()]


def test_executed_in_order_from_a_fresh_kernel(notebook):
    _, cells = notebook
    counts = [c.get("execution_count") for c in code_cells(cells)]
    assert counts == list(range(1, len(counts) + 1))


def test_size_and_line_width(notebook):
    path, cells = notebook
    assert path.stat().st_size <= 350 * 1024, f"{path.stat().st_size / 1024:.0f} KB"
    wide = [line for c in code_cells(cells) for line in source(c).splitlines() if len(line) > 88]
    assert not wide, wide[:3]


def test_no_timestamps_or_absolute_paths(notebook):
    _, cells = notebook
    assert not any("execution" in c.get("metadata", {}) for c in cells)
    assert not re.search(r"(?<![\w.~])/(home|root|Users|tmp|work)/", json.dumps(cells))


def test_answers_are_hidden_in_details(notebook):
    _, cells = notebook
    md = "\n".join(source(c) for c in cells if c["cell_type"] == "markdown")
    assert not re.search(r"\{(dropdown|toggle|solution)\}", md)
    assert md.count("<details>") == md.count("</details>") >= 3
    # a blank line after <summary>...</summary> and before </details>: Jupyter then parses the Markdown inside
    for block in re.findall(r"<details>.*?</details>", md, flags=re.S):
        assert re.match(r"<details>\s*<summary>[^<]*</summary>\n\n", block), block[:80]
        assert block.endswith("\n\n</details>"), block[-80:]


def test_exercises(notebook):
    _, cells = notebook
    md = [source(c) for c in cells if c["cell_type"] == "markdown"]
    derivations = [m for m in md if re.search(r"^###? Exercise \d+\.\d+: [Dd]erive", m, re.M)]
    assert derivations, "at least one derivation exercise ('### Exercise N.k: derive ...')"
    assert all("<details>" in m for m in derivations), "a derivation's worked answer is hidden"
    stubs = [i for i, c in enumerate(cells) if "### BEGIN SOLUTION" in source(c)]
    assert len(stubs) >= 2
    for i in stubs:
        after = source(cells[i + 1])
        assert "cl.checks.check_" in after, f"the cell after exercise cell {i} calls a checker"
        heading = next(source(c) for c in reversed(cells[:i]) if c["cell_type"] == "markdown")
        assert re.search(r"★|☆", heading) and re.search(r"about \d+ minutes", heading), heading[:80]


def test_no_solution_line_shown_before_its_exercise(notebook):
    _, cells = notebook
    for i, cell in enumerate(cells):
        s = source(cell)
        if "### BEGIN SOLUTION" not in s:
            continue
        earlier = "\n".join(source(e) for e in cells[:i])
        body = s.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        shown = [t for t in (line.split("#")[0].strip() for line in body.splitlines())
                 if len(t) >= 16 and not t.startswith(("return", "raise")) and t in earlier]
        assert not shown, shown


# backward kernels the cell after a check may call although its checker lets a learner's function
# call them: they compute the exercise's inputs, not its answer
COMPUTES_AN_INPUT = {("07", "cross_entropy_backward"): "dZ, which tied_embedding_grad receives"}
BACKWARD_CALL = re.compile(r"\b(?:k|kernels|cl\.kernels|model\.kernels)\.(\w+_backward)\(")


def test_nothing_to_copy_next_to_a_checker(notebook):
    """The cell after a check shows course_lib's version of the exercise; every backward kernel
    it calls is one the checker rejects (its `library`): a learner who copies it fails. (9.2
    could be built from the kernels printed under its checker, and passed.)"""
    import course_lib as cl

    path, cells = notebook
    code = code_cells(cells)
    for cell, after in zip(code, code[1:]):
        check = re.search(r"cl\.checks\.(check_\w+)\(", source(cell))
        if not check:
            continue
        forbidden = {getattr(s, "path", s).split(".")[-1] for s in getattr(cl.checks, check[1]).library}
        shown = set(BACKWARD_CALL.findall(source(after))) - forbidden
        allowed = {name for (nb, name) in COMPUTES_AN_INPUT if path.name.startswith(nb)}
        assert not shown - allowed, (f"{check[1]} lets a learner's function call {sorted(shown - allowed)}, "
                                     f"which the cell after it calls: list them in its library")


def test_solutions_are_folded_in_the_book(notebook):
    _, cells = notebook
    for cell in cells:
        if "### BEGIN SOLUTION" in source(cell):
            assert "hide-input" in cell.get("metadata", {}).get("tags", []), source(cell)[:60]


def test_nbval_markers_are_exact(notebook):
    """nbval honours a marker only when the comment is the marker alone: '# NBVAL_IGNORE_OUTPUT
    (reason)' is silently compared. The reason goes on a line of its own."""
    _, cells = notebook
    for cell in code_cells(cells):
        for line in source(cell).splitlines():
            words = line.strip().lstrip("#").split()
            if line.strip().startswith("#") and words and words[0].startswith("NBVAL_"):
                assert len(words) == 1, line
