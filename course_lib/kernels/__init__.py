"""Numba kernels, one module per layer, each a *_forward / *_backward pair."""
from .activations import gelu_backward, gelu_forward, relu_backward, relu_forward
from .attention import attention_backward, attention_forward, attention_rows_backward, attention_rows_forward
from .cross_entropy import IGNORE, cross_entropy_backward, cross_entropy_forward, scored_rows
from .embedding import embedding_backward, embedding_forward, first_out_of_range, sinusoidal_table
from .layernorm import layernorm_backward, layernorm_forward
from .linear import linear_backward, linear_forward
from .residual import residual_backward, residual_forward
from .softmax import softmax_backward, softmax_forward
