"""course_lib: a transformer, forward and backward, written by hand with NumPy and Numba."""
from . import checks, gradcheck, io, kernels, optim, task, train
from .config import ModelConfig, presets
from .model import Transformer, init_params

__all__ = ["ModelConfig", "presets", "Transformer", "init_params", "checks", "gradcheck", "io", "kernels", "optim", "task", "train", "viz", "edition"]
__version__ = "0.1.0"


def __getattr__(name):
    """`cl.viz` and `cl.edition` load on first use (matplotlib and widgets are slow to import)."""
    if name in ("viz", "edition"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")
