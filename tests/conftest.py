import pytest

import course_lib as cl

# The files that take minutes, first. With --dist loadfile --no-loadscope-reorder (pyproject.toml)
# each file is one unit of work, handed to the next free worker in this order: a long file that
# started last would leave the other core idle at the end (2-core AMD EPYC, 2026-11-27: the
# student editions 10 minutes, notebook 11 3.5, test_yours 2.5, notebook 12 2, test_grade 2).
SLOW_FIRST = ("tests/instructor/test_edition.py", "notebooks/11_training.ipynb", "tests/yours/test_yours.py",
              "notebooks/12_small_gpt_on_text.ipynb", "tests/instructor/test_grade.py",
              "tests/book/test_book.py")


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))   # stable: files stay whole


@pytest.fixture(scope="session")
def data():
    return cl.task.splits(seed=0)


@pytest.fixture
def batch(data):
    tokens, targets = data["train"]
    return tokens[:4], targets[:4]
