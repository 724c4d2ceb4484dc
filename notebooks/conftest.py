"""nbval settings for the stored notebooks.

stderr is not compared: Numba and ipykernel write warnings there that carry
process ids and paths. stdout, text/plain and text/html still must match.

A gradient check's error at rounding level (printed as its power of ten by
cl.gradcheck.magnitude, e.g. `~1e-11`) depends on the last bits of the BLAS and
libm the processor runs, which differ between machines: any power from 1e-9 down,
and an exact 0, compare equal. A wrong gradient's error (`0.31`) is compared as printed.
"""
from nbval.plugin import IPyNbFile

ROUNDING_LEVEL = {r"(?<![\w.~-])(?:~1e-(?:9|1[0-9])|0)(?![\w.])": "(0 or rounding level)"}


def pytest_collectstart(collector):
    if isinstance(collector, IPyNbFile):
        collector.skip_compare += ("stderr",)
        collector.sanitize_patterns.update(ROUNDING_LEVEL)
