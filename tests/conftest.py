from pathlib import Path

import pytest

import course_lib as cl

HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)     # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    """The tests of one file run on one worker (--dist loadgroup in pyproject.toml), so that they
    share their module's fixtures; a test marked `spread` runs each case wherever a core is free."""
    for item in items:
        if item.path.is_relative_to(HERE) and not item.get_closest_marker("spread"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.fixture(scope="session")
def data():
    return cl.task.splits(seed=0)


@pytest.fixture
def batch(data):
    tokens, targets = data["train"]
    return tokens[:4], targets[:4]
