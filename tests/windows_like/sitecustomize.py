"""Windows as course_lib meets it, on Linux: every Python started with this folder on its
PYTHONPATH (CI's second run, the `windows_like` fixture's child processes) lacks the POSIX-only
facilities that course_lib would use: the modules `resource` and `pwd`, SIGALRM, os.fork,
os.killpg and os.geteuid. course_lib then takes the paths it takes on Windows (limits.py), which the tests
exercise here.
"""
import os
import signal
import sys

import psutil  # noqa: F401  (first: on Linux psutil itself needs `resource`; on Windows it does without)

MODULES = ("resource", "pwd")
ATTRIBUTES = ((signal, "SIGALRM"), (signal, "setitimer"), (os, "fork"), (os, "killpg"), (os, "geteuid"))


def hide(monkeypatch=None):
    """Hide them (through pytest's monkeypatch when given, so that it is undone after the test)."""
    for name in MODULES:
        if monkeypatch:
            monkeypatch.setitem(sys.modules, name, None)
        else:
            sys.modules[name] = None       # `import resource` now raises ImportError
    for owner, name in ATTRIBUTES:
        if hasattr(owner, name):
            monkeypatch.delattr(owner, name) if monkeypatch else delattr(owner, name)


if __name__ == "sitecustomize":       # started by Python itself, not imported by the fixture
    hide()
