"""Run notebooks top to bottom in a fresh kernel and store them executed, as the course keeps them.

    python -m course_lib.instructor.execute notebooks/01_tokens_and_task.ipynb [more.ipynb ...]

Each notebook runs in its own directory, in a new kernel, cell after cell (so the
execution counts are 1, 2, 3, ...). What is stored is only what a reader needs:

- no per-cell timestamps (nbclient's `execution` metadata): they change on every run;
- the widget state of live plots, without the images of `ipywidgets.Image` models: the
  same frame is already in the plot's HTML fallback, and a live kernel sends it again;
- a finished progress bar (tqdm's widget) as its last line of text, not as the nine widget
  models behind it (about 9 KB of state, for a bar that no longer moves);
- every cell holding a solution (`### BEGIN SOLUTION`) tagged `hide-input`, so that the
  book shows it folded;
- not the lines that say the kernels are compiling (kernels/_fast/jit.py): whether they appear
  depends on Numba's cache, not on the notebook.

A notebook that raises is not written: the error names the cell, the file keeps its last
good run.
"""
from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .._files import write_atomic


def _widget_models(nb) -> dict:
    """The stored widget models, by id (empty when the notebook stores none)."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return state.get("state", {})


def _drop_image_frames(nb) -> None:
    """Empty the `value` of stored Image widget models (a second copy of a PNG frame)."""
    for model in _widget_models(nb).values():
        if model.get("model_name") == "ImageModel":
            model.get("state", {}).pop("value", None)
            model.pop("buffers", None)


def _named_models(models, model_id) -> set:
    """`model_id` and every model its state names ("IPY_MODEL_<id>"), transitively."""
    found, todo = set(), [model_id]
    while todo:
        current = todo.pop()
        if current in found or current not in models:
            continue
        found.add(current)
        for value in models[current]["state"].values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item.startswith("IPY_MODEL_"):
                    todo.append(item.removeprefix("IPY_MODEL_"))
    return found


_BAR = ["HTMLModel", "FloatProgressModel", "HTMLModel"]    # tqdm's bar: an HBox of these


def _progress_bars_as_text(nb) -> None:
    """Store each tqdm bar's output as its text, "100%|██████████| 80/80 [01:20<00:00, ...]",
    and drop its widget models (the bar, its three parts, their layouts and styles)."""
    models = _widget_models(nb)

    def parts(model_id):
        model = models.get(model_id, {})
        if model.get("model_name") != "HBoxModel":
            return None
        children = [c.removeprefix("IPY_MODEL_") for c in model["state"].get("children", [])]
        names = [models.get(c, {}).get("model_name") for c in children]
        return [models[c]["state"] for c in children] if names == _BAR else None

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            bar = parts(view["model_id"]) if view else None
            if bar is None:
                continue
            left, progress, right = bar
            filled = round(10 * progress["value"] / progress["max"]) if progress["max"] else 10
            text = f"{left['value']}|{'█' * filled}{' ' * (10 - filled)}|{right['value']}"
            output["data"] = {"text/plain": html.unescape(text).replace("\u2007", " ")}
            for model_id in _named_models(models, view["model_id"]):
                models.pop(model_id, None)
    if "widgets" in nb.metadata and not models:
        del nb.metadata["widgets"]


def _drop_compile_notice(nb) -> None:
    """Remove the compile lines from the stderr outputs (and a stderr output it leaves empty)."""
    from ..kernels.machinery import FIRST_COMPILE, MORE_COMPILE
    for cell in nb.cells:
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                for line in (FIRST_COMPILE, MORE_COMPILE):
                    out["text"] = out["text"].replace(line + "\n", "")
                if not out["text"]:
                    continue
            kept.append(out)
        if "outputs" in cell:
            cell["outputs"] = kept


def execute(path, timeout=600):
    """Execute the notebook at `path` in a fresh kernel and write it back executed."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    client.execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if "### BEGIN SOLUTION" in cell.source and "hide-input" not in tags:
            cell.metadata["tags"] = [*tags, "hide-input"]
    _drop_image_frames(nb)
    _progress_bars_as_text(nb)
    _drop_compile_notice(nb)
    write_atomic(path, lambda f: f.write(nbformat.writes(nb).encode("utf-8")))
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.instructor.execute", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", help="the .ipynb files to run and store")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take (default 600)")
    args = parser.parse_args(argv)
    for name in args.notebooks:
        path = Path(name)
        if path.suffix != ".ipynb" or not path.is_file():
            print(f"error: {name} is not a notebook file (.ipynb)", file=sys.stderr)
            return 2
        try:
            execute(path, args.timeout)
        except CellExecutionError as e:
            print(f"error: {name} failed; it was not written.\n{e}", file=sys.stderr)
            return 1
        size = path.stat().st_size / 1024
        print(f"{name}: executed and stored ({size:.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
