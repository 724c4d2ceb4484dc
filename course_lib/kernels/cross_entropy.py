"""Softmax cross-entropy, mean over scored targets; target -100 is not scored.

loss = mean over scored rows n of  logsumexp(z_n) - z_n[y_n].
Shapes: logits z (N, V), targets y (N,).
"""
import numpy as np

from ._fast.jit import kernel
from ._fast.exp import exp
from ._fast.maximum import maximum
from ._fast.threads import split_work
from ._fast.tuning import CROSS_ENTROPY_GRAIN as GRAIN
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


@kernel(split=True)
def _forward_rows(logits, targets, probs, row_loss, first, last):
    """probs and each scored row's loss (0 at the others) for the rows first..last-1."""
    V = logits.shape[1]
    f = logits.dtype.type               # the row loops stay in the logits' precision (vector lanes)
    for n in range(first, last):
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
        row_loss[n] = m + np.log(s) - z[y] if y != IGNORE else 0.0


@kernel(in_order=True)      # the rows' losses added one after another, in order
def _mean_in_order(row_loss, targets):
    total = 0.0
    count = 0
    for n in range(row_loss.size):
        if targets[n] != IGNORE:
            total += row_loss[n]
            count += 1
    return total / max(count, 1)


def cross_entropy_forward(logits, targets):
    """-> loss (float), probs (N, V). Rows with target -100 get probs but add no loss.

    Per row: m = max z, s = sum exp(z - m), p = exp(z - m) / s, loss = m + log s - z[y]
    (one exp per logit; log s is never log 0, since the largest term is exp(0) = 1).
    Large arrays in ranges of rows on several threads; the rows' losses added in order.

    NumPy twin: numpy_ref.cross_entropy_forward.
    """
    N = logits.shape[0]
    if targets.shape[0] != N:
        raise ValueError(f"cross_entropy_forward: {N} rows of logits but {targets.shape[0]} targets")
    probs = np.empty_like(logits)
    row_loss = np.empty(N)
    split_work(_forward_rows, N, logits, targets, probs, row_loss, work=logits.size, grain=GRAIN)
    return _mean_in_order(row_loss, targets), probs


@kernel(split=True)
def _backward_rows(probs, targets, inv, dz, first, last):
    V = probs.shape[1]
    for n in range(first, last):
        y = targets[n]
        if y != IGNORE:
            for v in range(V):
                dz[n, v] = probs[n, v] * inv
            dz[n, y] -= inv
        else:
            for v in range(V):
                dz[n, v] = 0.0


def cross_entropy_backward(probs, targets):
    """dz = (p - onehot(y)) / n_scored on scored rows, 0 on ignored rows. -> (N, V).

    NumPy twin: numpy_ref.cross_entropy_backward.
    """
    count = int(np.count_nonzero(targets != IGNORE))
    dz = np.empty_like(probs)
    split_work(_backward_rows, probs.shape[0], probs, targets, 1.0 / max(count, 1), dz,
               work=probs.size, grain=GRAIN)
    return dz
