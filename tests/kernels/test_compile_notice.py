"""The first compile is said, not silent: one line on stderr when Numba compiles a kernel instead
of loading it, once a process, then once a Jupyter cell (or after a pause outside Jupyter)."""
import os
import subprocess
import sys
from pathlib import Path

from course_lib.kernels._fast import jit

ROOT = Path(__file__).resolve().parents[2]

COMPILES = """
import time
import numpy as np
from course_lib.kernels import relu_backward, relu_forward
relu_forward(np.ones((2, 3), np.float32)); relu_forward(np.ones((2, 3)))    # two, one after the other
time.sleep({pause})
relu_backward(np.ones((2, 3)), np.ones((2, 3)))
"""


def _run(cache, pause):
    return subprocess.run([sys.executable, "-c", COMPILES.format(pause=pause)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(cache)})


def test_a_cold_cache_says_it_compiles_and_a_warm_one_says_nothing(tmp_path):
    cold = _run(tmp_path, pause=jit.PAUSE + 0.5)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.splitlines() == [jit.FIRST_COMPILE, jit.MORE_COMPILE]
    warm = _run(tmp_path, pause=0)
    assert warm.returncode == 0 and warm.stderr == ""


def test_in_jupyter_each_cell_that_compiles_says_so_once(monkeypatch, capsys):
    cells = iter([7, 7, 8, 8, 8])
    monkeypatch.setattr(jit, "_jupyter_cell", lambda: next(cells))
    monkeypatch.setattr(jit, "_said", {"cell": None, "ended": None})
    for _ in range(5):
        jit.announce_compile()
        jit._said["ended"] = 0.0       # as the compile that follows would set it
    assert capsys.readouterr().err.splitlines() == [jit.FIRST_COMPILE, jit.MORE_COMPILE]
