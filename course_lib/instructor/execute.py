"""Run notebooks top to bottom in a fresh kernel and store them executed, as the course keeps them.

    python -m course_lib.instructor.execute notebooks/01_tokens_and_task.ipynb [more.ipynb ...]

Each notebook runs in its own directory, in a new kernel, cell after cell (so the
execution counts are 1, 2, 3, ...). What is stored is only what a reader needs:

- no per-cell timestamps (nbclient's `execution` metadata): they change on every run;
- the widget state of live plots, without the images of `ipywidgets.Image` models: the
  same frame is already in the plot's HTML fallback, and a live kernel sends it again;
- every cell holding a solution (`### BEGIN SOLUTION`) tagged `hide-input`, so that the
  book shows it folded.

A notebook that raises is not written: the error names the cell, the file keeps its last
good run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .._files import write_atomic


def _drop_image_frames(nb) -> None:
    """Empty the `value` of stored Image widget models (a second copy of a PNG frame)."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    for model in state.get("state", {}).values():
        if model.get("model_name") == "ImageModel":
            model.get("state", {}).pop("value", None)
            model.pop("buffers", None)


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
