"""course_lib: a transformer, forward and backward, written by hand with NumPy and Numba."""
from . import checks, gradcheck, io, kernels, optim, task, train
from .config import ModelConfig, presets
from .model import Transformer, init_params

__all__ = ["ModelConfig", "presets", "Transformer", "init_params", "checks", "gradcheck", "io", "kernels",
           "optim", "task", "train", "viz", "text", "yours", "edition"]
__version__ = "0.1.0"

# Loaded on first use: matplotlib and widgets are slow to import, and the text GPT, the learner's
# own model and the student edition are needed by one notebook or command each.
_LAZY = {"viz": ".viz", "text": ".text", "yours": ".yours", "edition": ".instructor.edition"}


def __getattr__(name):
    """`cl.viz`, `cl.text`, `cl.yours` and `cl.edition` load on first use."""
    if name in _LAZY:
        import importlib
        return importlib.import_module(_LAZY[name], __name__)
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")
