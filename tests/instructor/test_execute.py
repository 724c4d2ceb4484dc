"""python -m course_lib.instructor.execute: what a stored notebook keeps of its run."""
import json

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from course_lib.instructor.execute import main

BAR = "from tqdm.auto import tqdm\nfor _ in tqdm(range(3), unit='run'):\n    pass"
SLIDER = "import ipywidgets\nipywidgets.IntSlider(value=4, max=9)"


def _run(tmp_path, *sources):
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(s) for s in sources]), path)
    assert main([str(path)]) == 0
    return nbformat.read(path, as_version=4)


def _models(nb):
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return {m["model_name"] for m in state.get("state", {}).values()}


def test_a_finished_bar_is_stored_as_its_text_and_a_live_widget_keeps_its_state(tmp_path):
    nb = _run(tmp_path, BAR, SLIDER)
    [bar] = nb.cells[0].outputs
    text = bar["data"]["text/plain"]
    assert list(bar["data"]) == ["text/plain"]
    assert text.startswith("100%|██████████| 3/3 [") and "run" in text and "&lt;" not in text
    assert _models(nb) == {"IntSliderModel", "LayoutModel", "SliderStyleModel"}  # no bar's
    [slider] = nb.cells[1].outputs
    assert "application/vnd.jupyter.widget-view+json" in slider["data"]


def test_with_only_bars_no_widget_state_is_left(tmp_path):
    nb = _run(tmp_path, BAR, "print('done')")
    assert "widgets" not in nb.metadata
    assert nb.cells[1].outputs[0]["text"] == "done\n"
    assert "execution" not in nb.cells[0].metadata            # no timestamps
    assert "IPY_MODEL_" not in json.dumps(nb)


def test_a_solution_cell_is_folded_in_the_book(tmp_path):
    nb = _run(tmp_path, "### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "y = 2")
    assert nb.cells[0].metadata["tags"] == ["hide-input"] and "tags" not in nb.cells[1].metadata


def test_a_notebook_that_raises_is_not_written(tmp_path, capsys):
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("1 / 0")]), path)
    before = path.read_bytes()
    assert main([str(path)]) == 1
    assert path.read_bytes() == before and "ZeroDivisionError" in capsys.readouterr().err


def test_the_kernels_compile_lines_are_not_stored(tmp_path):
    """Whether they appear depends on Numba's cache, not on the notebook (kernels/_fast/jit.py)."""
    said = "from course_lib.kernels._fast import jit\njit.announce_compile()\n"
    nb = _run(tmp_path, said, said + "import sys\nprint('a warning', file=sys.stderr)")
    assert nb.cells[0].outputs == []
    [kept] = nb.cells[1].outputs
    assert kept["name"] == "stderr" and kept["text"] == "a warning\n"
