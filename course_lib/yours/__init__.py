"""Your transformer: the model built from a learner's own notebooks.

    yours = cl.yours.load("my-course")        # the folder of the learner's notebooks
    yours                                      # which function is whose, and where it runs
    model = cl.Transformer(cfg, backend=yours.backend)
    grads = yours.model_backward(model)        # their Exercise 10.3 on their kernels
    run = yours.train_loop(model, yours.model_backward, data, epochs, schedule)   # their 11.6
    print(yours.compare())                     # float64 loss and gradients against course_lib's

load() first runs the learner's exercise cells in a scratch process, with time and memory
limits (see scratch.py): a cell that raises, loops or allocates without bound is reported by
exercise. Then it runs the cells that passed again in this process (only the exercise cells:
their definitions), and assembles the backend; course_lib's version stands in for every
exercise not done, and for every function that failed in the model.

    python -m course_lib yours PATH [--train]  (see command.py)
"""
from __future__ import annotations

import textwrap

from .backend import Backend, PartError, build, model_backward
from .compare import Comparison, compare
from .parts import ALONE, PARTS
from . import cells, scratch

__all__ = ["load", "Yours", "Backend", "PartError", "build", "model_backward", "Comparison", "compare", "PARTS"]

WHO = {"yours": "yours", "not done": "course_lib's (not done)", "missing": "course_lib's (missing)",
       "error": "course_lib's (error)"}


class Yours:
    """A learner's functions, assembled. .table: one cells.Status per part; .backend: for cl.Transformer."""

    def __init__(self, table, functions):
        self.table = table
        self.backend = build(functions)

    @property
    def functions(self) -> dict:
        """{name: the learner's function} for the parts that are theirs."""
        return dict(self.backend.functions)

    def model_backward(self, model):
        """The gradients of model's last loss, by the learner's model_backward (10.3) when it is theirs."""
        return model_backward(model)

    @property
    def train_loop(self):
        """The learner's train_loop (11.6), else course_lib's loop on their adam_step and clip_by_global_norm."""
        return cells.training_loop(self.functions)[0]

    def compare(self) -> Comparison:
        """Loss and gradients against course_lib's, in float64, on the course model and a GPT-style one."""
        return compare(self.backend)

    def __str__(self):
        return table_text(self.table)

    def __repr__(self):
        return str(self)

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def table_text(table) -> str:
    """The parts as a table: function, exercise, whose, what its checker says, where it runs; then
    the reasons, and how many are the learner's and pass their exercise's checker."""
    width = max(len(s.name) for s in table) + 2
    lines = [f"{'function':<{width}}{'exercise':<10}{'whose':<26}{'its checker':<14}runs as"]
    for s in table:
        lines.append(f"{s.name:<{width}}{s.exercise.replace('Exercise ', ''):<10}{WHO[s.status]:<26}"
                     f"{s.check or '-':<14}{s.role}")
    notes = [f"  {s.name}: {s.message}" for s in table if s.status in ("error", "missing") and s.message]
    if notes:
        lines += ["why course_lib's stands in:"] + notes
    failing = [f"  {s.name} ({s.exercise}): {s.check_message}" for s in table
               if s.status == "yours" and s.check not in ("passed", "")]
    if failing:
        lines += ["yours, but not passing the exercise's checker (the model runs it all the same):"] + failing
    lines.append(f"{yours_count(table)} of {len(table)} functions yours, {passing_count(table)} of them "
                 f"passing their exercise's checker")
    lines += textwrap.wrap(f"checked alone, not run by the model: {ALONE}", 100)
    return "\n".join(lines)


def yours_count(table) -> int:
    return sum(s.status == "yours" for s in table)


def passing_count(table) -> int:
    """The functions that are the learner's and pass their exercise's checker."""
    return sum(s.status == "yours" and s.check == "passed" for s in table)


def load(folder=".", *, timeout=300.0, memory=4.0, cell_seconds=30.0, model_seconds=120.0) -> Yours:
    """Assemble the learner's notebooks in `folder`. Limits of the scratch run: timeout (seconds, all of
    it), memory (GB), cell_seconds (each cell), model_seconds (the comparison with course_lib's)."""
    report = scratch.run_in_scratch(folder, compare=True, timeout=timeout, memory=int(memory * 2**30),
                                    cell_seconds=cell_seconds, model_seconds=model_seconds)
    table = [cells.Status(**s) for s in report["parts"]]
    exercises = cells.read_folder(folder)
    namespaces = cells.run(exercises, skip=set(report["cells_failed"]))   # what failed there is not run here
    ours = {s.name for s in table if s.status == "yours"}
    found = cells.functions(exercises, namespaces, [s for s in table if s.name in ours])
    return Yours(table, found)
