"""course_lib: a transformer, forward and backward, written by hand with NumPy and Numba."""
from . import checks, gradcheck, io, kernels, optim, task, train
from .config import ModelConfig, presets
from .model import Transformer, init_params

__all__ = ["ModelConfig", "presets", "Transformer", "init_params", "checks", "gradcheck", "io", "kernels", "optim", "task"]
__version__ = "0.1.0"
