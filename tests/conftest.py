import numpy as np
import pytest

import course_lib as cl


@pytest.fixture(scope="session")
def data():
    return cl.task.splits(seed=0)


@pytest.fixture
def batch(data):
    tokens, targets = data["train"]
    return tokens[:4], targets[:4]


def small_config(**overrides):
    """A small model for gradient checks: every code path, few parameters."""
    base = dict(d_model=16, n_heads=2, d_ff=32, n_layers=2)
    base.update(overrides)
    return cl.presets.deep_dive(**base)
