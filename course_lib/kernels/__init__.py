"""The model's kernels: one module per layer, each a *_forward / *_backward pair.

    embedding.py      x = E[tokens] + P[:T]                        notebook 02
    softmax.py        softmax over the last axis                   notebook 03
    attention.py      multi-head attention, causal mask            notebooks 03-04
    residual.py       y = x + f(x)                                 notebook 05
    layernorm.py      y = gamma * (x - mean) / sqrt(var + eps) + beta   notebook 05
    linear.py         y = x W + b                                  notebook 06
    activations.py    ReLU, GELU                                   notebook 06
    cross_entropy.py  softmax cross-entropy, targets -100 not scored   notebook 08

How to read them: each fast kernel (Numba loops, compiled) has a plain-NumPy twin of
the same name in numpy_ref.py, the few lines a notebook teaches; the kernel's docstring
names it (`NumPy twin: numpy_ref.layernorm_forward`). Read the twin for the maths, then
the kernel for how it runs fast: same inputs, same outputs, and tests/core/test_model.py
proves the two paths agree. numpy_ref imports without Numba.

The speed machinery the kernels stand on (compile flags, BLAS calls, a vectorised exp, the
threads the kernels run on and how many, BLAS's spin, memory kept between steps) is in _fast/,
below the layers (what the rest of course_lib uses of it: machinery.py). set_num_threads(n)
limits the kernels' threads and BLAS's together, from then on or inside a `with` block.
"""
from ._fast.process import settle as _settle
from ._fast.threads import get_num_threads, set_num_threads
from .activations import gelu_backward, gelu_forward, relu_backward, relu_forward
from .attention import attention_backward, attention_forward, attention_rows_backward, attention_rows_forward
from .cross_entropy import IGNORE, cross_entropy_backward, cross_entropy_forward, scored_rows
from .embedding import embedding_backward, embedding_forward, first_out_of_range, sinusoidal_table
from .layernorm import layernorm_backward, layernorm_forward
from .linear import linear_backward, linear_forward
from .residual import residual_backward, residual_forward
from .softmax import softmax_backward, softmax_forward

__all__ = [
    "get_num_threads", "set_num_threads",
    "gelu_backward", "gelu_forward", "relu_backward", "relu_forward",
    "attention_backward", "attention_forward", "attention_rows_backward", "attention_rows_forward",
    "IGNORE", "cross_entropy_backward", "cross_entropy_forward", "scored_rows",
    "embedding_backward", "embedding_forward", "first_out_of_range", "sinusoidal_table",
    "layernorm_backward", "layernorm_forward", "linear_backward", "linear_forward",
    "residual_backward", "residual_forward", "softmax_backward", "softmax_forward",
]

_settle()   # the process-wide settings, once: see _fast/process.py
