"""exp(x) that vectorises inside Numba loops.

Numba turns np.exp into one libm call per element (without Intel's SVML). This version
is branch-free arithmetic, so LLVM runs it on 8 float32 (or 4 float64) lanes at once;
it is within 2 ulps of the true value (most within 0.5).

    x = k ln2 + r,  k = round(x / ln2),  |r| <= ln2 / 2     (ln2 split in two: r is exact)
    exp(x) = 2^k * exp(r),  exp(r) by its Taylor series      (degree 7 for float32, 13 for float64)
    2^k is built from its bits: the biased exponent k + bias shifted into place.

Overflow gives inf and NaN stays NaN, as in NumPy; a result that would be subnormal
(below ~1e-38 in float32, ~1e-308 in float64) is flushed to 0. Call `exp(x)` on a float32 or
float64 scalar from a kernel.
"""
import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

LOG2E = 1.4426950408889634
LN2_HI = 0.693359375                  # 9 significant bits: k * LN2_HI is exact
LN2_LO = -2.12194440054690583e-4      # ln 2 - LN2_HI


@intrinsic
def _pow2(typingctx, k):
    """2.0 ** k for a whole-numbered float k within the normal exponents, from its bits."""
    if not isinstance(k, types.Float):
        return None
    width, mantissa, bias = (32, 23, 127) if k.bitwidth == 32 else (64, 52, 1023)

    def codegen(context, builder, signature, args):
        int_t = ir.IntType(width)
        n = builder.fptosi(args[0], int_t)
        bits = builder.shl(builder.add(n, ir.Constant(int_t, bias)), ir.Constant(int_t, mantissa))
        return builder.bitcast(bits, context.get_value_type(k))
    return k(k), codegen


def _exp_for(ftype, degree, lo, hi):
    """exp in the precision ftype. lo, hi: below lo the result is 0; hi lies past overflow."""
    f = ftype
    coefs = tuple(f(1.0 / math.factorial(i)) for i in range(degree, -1, -1))
    log2e, ln2_hi, ln2_lo, low, high = f(LOG2E), f(LN2_HI), f(LN2_LO), f(lo), f(hi)
    half, one, two, zero = f(0.5), f(1.0), f(2.0), f(0.0)

    def exp_impl(x):
        xc = high if x > high else x                  # written so that NaN passes through
        xc = low if xc < low else xc
        k = np.floor(xc * log2e + half)
        r = (xc - k * ln2_hi) - k * ln2_lo
        p = coefs[0]
        for c in coefs[1:]:
            p = p * r + c
        y = (p * _pow2(k - one)) * two                # 2^(k-1) * 2: k = 128 (or 1024) still fits
        y = zero if x < low else y
        return x if x != x else y
    return exp_impl


_EXP = {types.float32: _exp_for(np.float32, 7, -86.99, 88.8),
        types.float64: _exp_for(np.float64, 13, -708.05, 709.9)}


def exp(x):
    """exp(x) for a float32 or float64 scalar; inside Numba the vectorising version."""
    return np.exp(x)


# No "reassoc" here: it would fold the two-part ln 2 back into one and lose the exact r.
@overload(exp, jit_options={"fastmath": {"contract"}, "error_model": "numpy"})
def _exp_overload(x):
    return _EXP.get(x)
