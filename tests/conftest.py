import importlib.util
import os
from pathlib import Path

import pytest

import course_lib as cl


@pytest.fixture(scope="session")
def data():
    return cl.task.splits(seed=0)


@pytest.fixture
def batch(data):
    tokens, targets = data["train"]
    return tokens[:4], targets[:4]


WINDOWS_LIKE = Path(__file__).parent / "windows_like"


@pytest.fixture
def windows_like(monkeypatch):
    """As on Windows: no `resource`, `pwd`, SIGALRM, os.fork nor os.killpg, in this process (until
    the test ends) and in every Python it starts (windows_like/sitecustomize.py on PYTHONPATH)."""
    spec = importlib.util.spec_from_file_location("windows_like", WINDOWS_LIKE / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.hide(monkeypatch)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(WINDOWS_LIKE), os.environ.get("PYTHONPATH")) if p))
