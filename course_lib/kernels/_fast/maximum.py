"""max(a, b) that vectorises when a loop reduces with it.

`m = max(m, x[j])` in a Numba loop is a compare and a select, which LLVM runs one element
at a time unless told that no value is NaN (the kernels keep NaN semantics, see jit.py):
a chain of dependent steps, 54 us for 100,000 float32 values. `maximum` is LLVM's maxnum,
which it knows how to reduce on the vector lanes: 12 us. Where one operand is NaN maxnum
returns the other, as `max(m, nan)` does in a Numba loop, so a NaN row still gives NaN
downstream (exp(x - m) of the NaN entry). Call `maximum(a, b)` on two floats of one type.
"""
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload


@intrinsic
def _maxnum(typingctx, a, b):
    if not (isinstance(a, types.Float) and a == b):
        return None

    def codegen(context, builder, signature, args):
        t = args[0].type
        fn = builder.module.declare_intrinsic("llvm.maxnum", [t], ir.FunctionType(t, [t, t]))
        return builder.call(fn, args)
    return a(a, b), codegen


def maximum(a, b):
    """The larger of a and b (the other one if either is NaN); inside Numba LLVM's maxnum."""
    if a != a:
        return b
    if b != b:
        return a
    return max(a, b)


@overload(maximum)
def _maximum_overload(a, b):
    if isinstance(a, types.Float) and a == b:
        return lambda a, b: _maxnum(a, b)
    return None
