"""The order in which pytest hands out the test files and notebooks, whatever folders are run.

The files that take longest (pytest --durations=0, 2026-11-28), longest first. xdist hands each
worker a whole file at a time (--dist loadfile), in the items' order: the long ones start first
and the short ones fill the end, so that both cores finish together (LPT scheduling; xdist's
own order, most tests first, left one core idle for minutes at the end). Fixtures and the
notebooks' comparison settings are in tests/conftest.py and notebooks/conftest.py.
"""

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
