"""Softmax cross-entropy, mean over scored targets; target -100 is not scored.

loss = mean over scored rows n of  logsumexp(z_n) - z_n[y_n].
Shapes: logits z (N, V), targets y (N,).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.exp import exp
from ._fast.maximum import maximum
from .numpy_ref import IGNORE


@kernel
def scored_rows(targets, n_classes):
    """targets (N,) int -> rows (M,): the positions whose target is not IGNORE, and the first
    position whose target is neither IGNORE nor in 0..n_classes-1 (-1 if there is none). One pass."""
    rows = np.empty(targets.size, dtype=np.int64)
    m = 0
    bad = -1
    for n in range(targets.size):
        y = targets[n]
        if y != IGNORE:
            if bad < 0 and (y < 0 or y >= n_classes):
                bad = n
            rows[m] = n
            m += 1
    return rows[:m], bad


@kernel
def cross_entropy_forward(logits, targets):
    """-> loss (float), probs (N, V). Rows with target -100 get probs but add no loss.

    Per row: m = max z, s = sum exp(z - m), p = exp(z - m) / s, loss = m + log s - z[y]
    (one exp per logit; log s is never log 0, since the largest term is exp(0) = 1).

    NumPy twin: numpy_ref.cross_entropy_forward.
    """
    N, V = logits.shape
    f = logits.dtype.type               # the row loops stay in the logits' precision (vector lanes)
    probs = np.empty_like(logits)
    total = 0.0
    count = 0
    for n in range(N):
        z = logits[n]
        m = z[0]
        for v in range(1, V):
            m = maximum(m, z[v])            # on the vector lanes (_fast/maximum.py)
        s = f(0.0)
        for v in range(V):
            e = exp(z[v] - m)
            probs[n, v] = e
            s += e
        inv = f(1.0) / s
        for v in range(V):
            probs[n, v] *= inv
        y = targets[n]
        if y != IGNORE:
            total += m + np.log(s) - z[y]
            count += 1
    return total / max(count, 1), probs


@kernel
def cross_entropy_backward(probs, targets):
    """dz = (p - onehot(y)) / n_scored on scored rows, 0 on ignored rows. -> (N, V).

    NumPy twin: numpy_ref.cross_entropy_backward.
    """
    N, V = probs.shape
    count = 0
    for n in range(N):
        if targets[n] != IGNORE:
            count += 1
    inv = 1.0 / max(count, 1)
    dz = np.zeros_like(probs)
    for n in range(N):
        y = targets[n]
        if y != IGNORE:
            for v in range(V):
                dz[n, v] = probs[n, v] * inv
            dz[n, y] -= inv
    return dz
