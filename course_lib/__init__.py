"""course_lib: a transformer, forward and backward, written by hand with NumPy and Numba."""
import sys as _sys

__all__ = ["ModelConfig", "presets", "Transformer", "init_params", "checks", "gradcheck", "io", "kernels",
           "optim", "task", "train", "viz", "text", "yours", "edition"]
__version__ = "0.1.0"

# `python -m course_lib doctor` gives its verdicts on the Python version and the packages where
# NumPy is missing or this Python is too old for the course: while that command starts (Python
# imports this package first, with sys.argv[0] "-m" as it looks for __main__), nothing is imported
# here, and every name below loads on first use instead.
if _sys.argv[:2] != ["-m", "doctor"]:
    from . import checks, gradcheck, io, kernels, optim, task, train
    from .config import ModelConfig, presets
    from .model import Transformer, init_params

# Loaded on first use: matplotlib and widgets are slow to import, and the text GPT, the learner's
# own model and the student edition are needed by one notebook or command each.
_LAZY = {"viz": ".viz", "text": ".text", "yours": ".yours", "edition": ".instructor.edition",
         "checks": ".checks", "gradcheck": ".gradcheck", "io": ".io", "kernels": ".kernels", "optim": ".optim",
         "task": ".task", "train": ".train"}
_LAZY_NAMES = {"ModelConfig": ".config", "presets": ".config", "Transformer": ".model", "init_params": ".model"}


def __getattr__(name):
    """`cl.viz`, `cl.text`, `cl.yours` and `cl.edition` load on first use (and, under doctor, the rest)."""
    import importlib
    if name in _LAZY:
        return importlib.import_module(_LAZY[name], __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(_LAZY_NAMES[name], __name__), name)
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")
