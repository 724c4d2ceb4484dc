"""Residual connection y = x + f(x): the gradient reaches x along both paths."""
from ._jit import kernel


@kernel
def residual_forward(x, fx):
    """y = x + f(x). All (N, C)."""
    return x + fx


@kernel
def residual_backward(dy):
    """dy (N, C) -> (dx_skip, dfx): both equal dy; x's total gradient adds f's backward to dx_skip."""
    return dy.copy(), dy
