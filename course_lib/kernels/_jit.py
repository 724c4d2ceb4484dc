"""The one Numba decorator every kernel uses.

fastmath here allows reassociation and fused multiply-add (faster, vectorised
reductions) but keeps IEEE NaN and infinity semantics, so a NaN still shows.
error_model="numpy": x / 0 gives inf or nan as in NumPy instead of raising, which
also lets loops with a division vectorise.
"""
from numba import njit

FASTMATH = {"reassoc", "contract", "nsz", "arcp"}


def kernel(fn):
    """`@kernel` = `@njit(cache=True, fastmath=FASTMATH, error_model="numpy")`."""
    return njit(cache=True, fastmath=FASTMATH, error_model="numpy")(fn)
