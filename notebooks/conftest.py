"""nbval settings for the stored notebooks.

stderr is not compared: Numba and ipykernel write warnings there that carry
process ids and paths. stdout, text/plain and text/html still must match.
"""
from nbval.plugin import IPyNbFile


def pytest_collectstart(collector):
    if isinstance(collector, IPyNbFile):
        collector.skip_compare += ("stderr",)
