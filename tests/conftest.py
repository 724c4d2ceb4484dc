import pytest

import course_lib as cl


@pytest.fixture(scope="session")
def data():
    return cl.task.splits(seed=0)


@pytest.fixture
def batch(data):
    tokens, targets = data["train"]
    return tokens[:4], targets[:4]
