"""Exercise checkers used by the notebooks: `cl.checks.check_<exercise>(your_function)`.

Each prints a one-line report (with a hint on failure) and returns a Result.
The shared machinery is in `core`; one module per notebook holds its checkers
and lists them in its __all__.
"""
from .core import CheckFailed, NotDone, Result, call, checker, expect_close, expect_shape, stage  # noqa: F401
from .tokens import *  # noqa: F401,F403  notebook 01
from .embeddings import *  # noqa: F401,F403  notebook 02
from .attention import *  # noqa: F401,F403  notebook 03
from .multihead import *  # noqa: F401,F403  notebook 04
from .layernorm import *  # noqa: F401,F403  notebook 05
from .feedforward import *  # noqa: F401,F403  notebook 06
from .stacking import *  # noqa: F401,F403  notebook 07
from .loss import *  # noqa: F401,F403  notebook 08
from .backprop import *  # noqa: F401,F403  notebook 09
from .whole_model import *  # noqa: F401,F403  notebook 10
from .training import *  # noqa: F401,F403  notebook 11
from .text import *  # noqa: F401,F403  notebook 12
