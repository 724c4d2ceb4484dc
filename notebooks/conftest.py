"""nbval settings for the stored notebooks.

stderr is not compared: Numba and ipykernel write warnings there that carry
process ids and paths. stdout, text/plain and text/html still must match.

A value at rounding level (a gradient check's error, the difference between two exact
computations) is printed by cl.gradcheck.magnitude as its power of ten, e.g. `~1e-11`.
That power depends on the last bits of the BLAS and the Numba kernels the processor
runs, so every power from 1e-7 down, and an exact 0, compare as one, with the spaces
that pad them in a table (their width changes with the power). A right float64
gradient checks below 1e-6 (cl.gradcheck.TOL); a wrong one (`0.31`) is compared as printed.
"""
from nbval.plugin import IPyNbFile

ROUNDING_LEVEL = {r" *(?<![\w.~-])(?:~1e-(?:[7-9]|1[0-9])|0)(?![\w.]) *": " (rounding level) "}


def pytest_collectstart(collector):
    if isinstance(collector, IPyNbFile):
        collector.skip_compare += ("stderr",)
        collector.sanitize_patterns.update(ROUNDING_LEVEL)
