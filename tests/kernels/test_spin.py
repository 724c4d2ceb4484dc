"""Importing course_lib shortens how long NumPy's OpenBLAS threads spin after a product."""
import json
import os
import subprocess
import sys

import pytest

from course_lib.kernels._fast.blas import NUMPY_BLAS
from course_lib.kernels._fast.spin import can_restart
from support import time_limit

pytestmark = pytest.mark.skipif(NUMPY_BLAS is None, reason="NumPy's own OpenBLAS only")

# In a new process: NumPy loaded (and its threads started) before course_lib, as in a notebook.
# The CPU time the process takes while it sleeps right after a product: the idle threads' spinning.
IDLE = """
import json, os, sys, time
import numpy as np
a = np.ones((1024, 1024), np.float32)
a @ a
if sys.argv[1] == "import":
    import course_lib
def idle_cpu():
    a @ a
    t0 = os.times(); time.sleep(0.3); t1 = os.times()
    return t1.user - t0.user + t1.system - t0.system
print(json.dumps([min(idle_cpu() for _ in range(3)), os.environ.get("OPENBLAS_THREAD_TIMEOUT")]))
"""


def idle_cpu(import_course_lib, **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_THREAD_TIMEOUT", "COURSE_LIB_SHORT_SPIN", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", IDLE, "import" if import_course_lib else "no"],
                         env=dict(full, OPENBLAS_NUM_THREADS="2", **env), capture_output=True, text=True,
                         timeout=time_limit(120))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_idle_threads_stop_spinning_once_course_lib_is_imported():
    if not can_restart(NUMPY_BLAS):         # NumPy 2.5's OpenBLAS (Python 3.15): left as it is
        assert idle_cpu(True)[1] is None
        return
    spun, _ = idle_cpu(False)
    if spun < 0.03:
        pytest.skip(f"OpenBLAS's threads did not spin here ({spun:.3f} s of CPU while idle)")
    idle, variable = idle_cpu(True)
    assert idle < spun / 3, (idle, spun)
    assert variable == "20"                 # processes started from here inherit it


def test_a_users_setting_and_the_off_switch_are_kept():
    assert idle_cpu(True, OPENBLAS_THREAD_TIMEOUT="28")[1] == "28"
    assert idle_cpu(True, COURSE_LIB_SHORT_SPIN="0")[1] is None
