"""The order in which pytest hands out the test files and notebooks, whatever folders are run,
and the BLAS threads each xdist worker may use.

The files that take longest (pytest --durations=0, 2026-11-28), longest first. xdist hands each
worker a whole file at a time (--dist loadfile), in the items' order: the long ones start first
and the short ones fill the end, so that both cores finish together (LPT scheduling; xdist's
own order, most tests first, left one core idle for minutes at the end). Fixtures and the
notebooks' comparison settings are in tests/conftest.py and notebooks/conftest.py.

xdist runs one test per core. A worker whose BLAS (or the kernels' split_work) also took a
second thread would fight the other workers for the cores, and OpenBLAS's threads then wait for
a time slice at every product: a student edition's run took 57 s instead of 10 s beside one busy
process. So each worker, and what it starts (notebook kernels, judges, commands), gets its share
of the cores, as scikit-learn's tests do; the tests of the threads ask for two explicitly.
"""
import os

from threadpoolctl import threadpool_limits

LONGEST_FIRST = [
    "tests/instructor/test_edition.py", "notebooks/11_training.ipynb", "tests/instructor/test_grade.py",
    "tests/yours/test_yours.py", "notebooks/12_small_gpt_on_text.ipynb", "tests/instructor/test_attacks.py",
    "tests/book/test_book.py", "tests/core/test_doctor.py", "tests/checks/test_checks_core.py",
    "notebooks/10_backprop_whole_model.ipynb", "tests/instructor/test_gradescope.py",
    "tests/kernels/test_blas_paths.py", "notebooks/07_stacking_and_output_head.ipynb", "tests/core/test_train.py",
    "notebooks/04_multi_head_attention.ipynb", "notebooks/02_embeddings_and_positions.ipynb",
    "tests/checks/test_checks_text.py", "tests/checks/test_fuzz.py",
]


def pytest_collection_modifyitems(items):
    """Files in LONGEST_FIRST order, then the others as collected; each file's items in their order
    (a notebook's cells run in order)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_configure(config):
    """In an xdist worker: BLAS and OpenMP limited to cores / workers threads (at least one),
    here and, through the environment, in every process a test starts; a setting of the user's
    is kept."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    share = str(max(1, cores // int(workers)))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, share)
    threadpool_limits(int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")
