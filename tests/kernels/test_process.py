"""_fast/process.settle(): the process-wide settings, made when course_lib.kernels is imported,
each left alone where the environment sets it."""
import json
import os
import subprocess
import sys

CODE = ("import json, os, numba, course_lib.kernels\n"
        "print(json.dumps([numba.config.THREADING_LAYER_PRIORITY, os.environ.get('OPENBLAS_THREAD_TIMEOUT')]))")


def _settings(**env):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY", "OPENBLAS_THREAD_TIMEOUT")}
    done = subprocess.run([sys.executable, "-c", CODE], env={**clean, **env}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_import_prefers_spinning_threads_and_keeps_what_the_environment_says():
    layers, _ = _settings()
    assert layers == ["omp", "tbb", "workqueue"]
    layers, _ = _settings(NUMBA_THREADING_LAYER_PRIORITY="workqueue omp tbb")
    assert layers == ["workqueue", "omp", "tbb"]


def test_the_import_shortens_openblas_spin_unless_told_not_to():
    from course_lib.kernels._fast.blas import NUMPY_BLAS
    from course_lib.kernels._fast.spin import EXPONENT, can_restart
    if NUMPY_BLAS is None or not can_restart(NUMPY_BLAS):
        assert _settings()[1] is None           # nothing to restart: left as it is
    else:
        assert _settings()[1] == str(EXPONENT)
    assert _settings(COURSE_LIB_SHORT_SPIN="0")[1] is None
    assert _settings(OPENBLAS_THREAD_TIMEOUT="4")[1] == "4"
