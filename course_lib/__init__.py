"""course_lib: a transformer, forward and backward, written by hand with NumPy and Numba."""

__all__ = ["ModelConfig", "presets", "Transformer", "init_params", "checks", "gradcheck", "io", "kernels",
           "optim", "task", "train", "viz", "text", "yours", "edition"]
__version__ = "0.1.0"

# Every public name loads on first use, so that `import course_lib` imports nothing but this file:
# `python -m course_lib doctor` then gives its verdict on the Python version and the packages even
# where NumPy is missing or cannot be installed. matplotlib and widgets are slow to import, and the
# text GPT, the learner's own model and the student edition are needed by one notebook or command each.
_MODULES = {"checks": ".checks", "gradcheck": ".gradcheck", "io": ".io", "kernels": ".kernels",
            "optim": ".optim", "task": ".task", "train": ".train", "viz": ".viz", "text": ".text",
            "yours": ".yours", "edition": ".instructor.edition"}
_NAMES = {"ModelConfig": ".config", "presets": ".config", "Transformer": ".model", "init_params": ".model"}


def __getattr__(name):
    """`cl.Transformer`, `cl.kernels`, ...: each module is imported the first time it is used."""
    import importlib
    if name in _MODULES:
        return importlib.import_module(_MODULES[name], __name__)
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
