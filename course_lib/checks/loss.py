"""Checkers for notebook 08, softmax and cross-entropy.

    cl.checks.check_cross_entropy_forward(cross_entropy)              # Exercise 8.1: mean loss
    cl.checks.check_cross_entropy_backward(cross_entropy_backward)    # Exercise 8.3: dlogits

(Exercise 8.2 derives the gradient p - onehot on paper: no checker.)

Both functions take logits z (N, V) and integer targets y (N,), where -100 marks a row
that is not scored (PyTorch's convention). With M the number of scored rows:

    loss    = (1/M) sum over scored n of  logsumexp(z_n) - z_n[y_n]
    dlogits = (softmax(z_n) - onehot(y_n)) / M  on scored rows, 0 on ignored rows.

Expected values come from float64 formulas written here, never from the learner's function.
When a result is wrong, the checker computes the usual mistakes (naive exp, the maximum
taken out and not added back, one maximum for the whole array, the mean over all N rows, no
mean, the scored rows counted as the nonzero targets, the sign flipped, the target index off
by one, softmax over the wrong axis, a gradient left on the ignored rows, log base 2 or 10)
and names the one the result matches.
"""
import numpy as np

from . import reference as ref
from .cases import Output, Spec, Stage, result_of, run_cases
from .core import case_rng, CheckFailed, as_array, checker, diagnose, stage, tiered
from .library import Solution

__all__ = ["check_cross_entropy_forward", "check_cross_entropy_backward"]

IGNORE = -100

# ----------------------------------------------------------------------------------------
# reference formulas (float64)
# ----------------------------------------------------------------------------------------


def _logsumexp(z):
    """log sum_v exp(z[n, v]) per row, the row maximum taken out first. (N, V) -> (N,)"""
    m = z.max(axis=1)
    return m + np.log(np.exp(z - m[:, None]).sum(axis=1))


def _row_losses(z, y):
    """-log p_n[y_n] for every row whose target is given (no -100 here). (M,)"""
    return _logsumexp(z) - z[np.arange(len(y)), y]


def _loss(z, y, denominator=None):
    """Mean cross-entropy over the scored rows; denominator replaces the count M."""
    z = np.asarray(z, dtype=np.float64)
    scored = y != IGNORE
    total = np.sum(_row_losses(z[scored], y[scored]))
    return total / (np.count_nonzero(scored) if denominator is None else denominator)


def _dlogits(z, y, scale=None, sign=1.0, shift=0, ignored_rows="zero", axis=1):
    """(p - onehot(y + shift)) * sign * scale on scored rows; ignored rows: 0, or p * scale
    (ignored_rows="p"), or p - onehot(V - 100) (ignored_rows="negative index"). axis=0 takes
    the softmax down each column instead of along each row."""
    z = np.asarray(z, dtype=np.float64)
    N, V = z.shape
    scored = y != IGNORE
    M = np.count_nonzero(scored)
    scale = 1.0 / M if scale is None else scale
    p = ref.softmax(z) if axis == 1 else ref.softmax(z.T).T
    d = np.zeros_like(p)
    rows = np.flatnonzero(scored)
    d[rows] = p[rows]
    d[rows, (y[rows] + shift) % V] -= 1.0
    if ignored_rows == "p":
        d[~scored] = p[~scored]
    elif ignored_rows == "negative index":
        other = np.flatnonzero(~scored)
        d[other] = p[other]
        d[other, IGNORE % V] -= 1.0
    return sign * scale * d


# ----------------------------------------------------------------------------------------
# shared helpers
# ----------------------------------------------------------------------------------------

_MASK_HINT = ("rows whose target is -100 are not scored: pick the scored rows first "
              "(a boolean mask targets != -100) and index only those; z[n, -100] is not a logit "
              "of row n's answer (for V < 100 it does not exist, for V >= 100 it is entry V - 100)")
_NONZERO_HINT = ("M counts the rows whose target is not -100, np.count_nonzero(targets != -100), "
                 "not the nonzero targets (targets == 0 is a real target: id 0): "
                 "np.count_nonzero(targets) drops the rows whose target is 0 and counts the rows "
                 "with -100")
_OFF_BY_ONE_HINT = ("the target index is off by one: the loss of row n reads z[n, y[n]] itself (token id "
                    "y[n] is column y[n] of the logits; the ids start at 0, there is no +1 or -1)")


# the errors of a function that indexes z[n, -100] or one past the last column
_ERRORS = [(("IndexError", "-100"), _MASK_HINT),
           (("IndexError", "out of bounds"), "an index past the last column: " + _OFF_BY_ONE_HINT)]


def _targets(rng, N, V, n_ignored):
    y = rng.integers(0, V, size=N)
    y[rng.choice(N, size=n_ignored, replace=False)] = IGNORE
    return y


def _batch_stages(rng):
    """The stages the forward and backward checkers share: [(stage name, [(z, y), ...])]."""
    z = np.log(np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 2.0, 4.0], [3.0, 1.0, 1.0, 3.0],
                         [1.0, 2.0, 3.0, 2.0], [1.0, 1.0, 1.0, 5.0]]))
    ignored = [(z, np.array([-100, 3, -100, 2, -100])), (z, np.array([0, -100, -100, -100, -100]))]
    random = []
    for N, V, n_ignored in ((6, 5, 2), (10, 20, 7), (1, 3, 0), (32, 20, 0)):
        z = 2.0 * rng.standard_normal((N, V))
        random.append((z, _targets(rng, N, V, n_ignored)))
    y = np.full((4, 8), IGNORE)            # B = 4 sequences of T = 8
    z = rng.standard_normal((4 * 8, 20))
    y[:, -1] = rng.integers(2, 12, size=4)
    return [("ignored targets (-100)", ignored), ("random batches", random),
            ("the course's layout: B = 4 sequences of T = 8, only the last position scored",
             [(z, y.reshape(-1))])]


# ----------------------------------------------------------------------------------------
# Exercise 8.1: cross-entropy forward
# ----------------------------------------------------------------------------------------

_FORWARD_HINT = tiered("per scored row the loss is -log p_y, computed from the logits through the "
                       "log-sum-exp with the row's maximum taken out (no softmax, no log of a "
                       "probability); the result is the mean over the scored rows",
                       "loss_n = logsumexp(z_n) - z_n[y_n], with logsumexp(z) = m + "
                       "log(sum(exp(z - m))) and m the row maximum")
_OVERFLOW_HINT = tiered("np.exp of a large logit overflows (exp(1000) = inf, inf / inf = nan): take "
                        "each row's maximum m out of the exponentials first, and add it back "
                        "outside the log, so that the largest term is exp(0) = 1",
                        "logsumexp(z) = m + log(sum(exp(z - m)))")
_DROPPED_M_HINT = ("you took m out but did not add it back: lse = m + log(sum(exp(z - m))), so the "
                   "row's loss is m + log(sum(exp(z - m))) - z_y")
_GLOBAL_MAX_HINT = ("one maximum for the whole array: use each row's maximum, z.max(axis=1, "
                    "keepdims=True). With m = z.max() a row far below the largest logit of the array "
                    "has exp(z - m) = 0 in every entry, and log(0) = -inf")
_UNDERFLOW_HINT = tiered("log of a probability that rounds to 0: p = exp(-1000) / ... is 0.0 in "
                         "floating point and log(0) = -inf, even with a stable softmax. Never take "
                         "log(softmax(z)); compute log p_y from the logits directly, which stays "
                         "finite (here about -1000)", "log p_y = z_y - logsumexp(z)")


def _global_max_loss(z, y):
    """The loss with one maximum m = z.max() for all scored rows instead of each row's own."""
    z = np.asarray(z, dtype=np.float64)
    scored = y != IGNORE
    zs, ys = z[scored], y[scored]
    m = zs.max()
    with np.errstate(all="ignore"):
        lse = m + np.log(np.exp(zs - m).sum(axis=1))
        return np.mean(lse - zs[np.arange(len(ys)), ys])


def _forward_mistakes(z, y):
    z = np.asarray(z, dtype=np.float64)
    N, V = z.shape
    scored = y != IGNORE
    M = np.count_nonzero(scored)
    wrapped = lambda s: np.where(scored, (y + s) % V, IGNORE)  # noqa: E731
    zs, ys = z[scored], y[scored]
    nonzero = np.count_nonzero(y)                 # the rows with target != 0, -100 included
    # np.count_nonzero(targets) for M, named before "1/M is missing", which gives the same
    # number when nonzero = 1 (the first hand case: the hint names both); when nonzero = N,
    # "divided by N" names it
    by_nonzero = [] if nonzero == N else [(
        lambda: _loss(z, y, denominator=nonzero),
        _NONZERO_HINT + ("; or, the same number here, 1/M is missing: the loss is the MEAN over "
                         "the M scored rows" if nonzero == 1 else ""))]
    return [
        (lambda: np.mean(_logsumexp(zs) - zs.max(axis=1) - zs[np.arange(M), ys]), _DROPPED_M_HINT),
        (lambda: _global_max_loss(z, y), _GLOBAL_MAX_HINT),
    ] + by_nonzero + [
        (lambda: _loss(z, y, denominator=N),
         f"you divided by N = {N}, the number of all rows (B*T for a flattened batch), but only the "
         f"{M} scored rows count: the rows with target -100 add no loss and are not counted; divide "
         f"by the number of scored rows, not by N nor by a batch size"),
        (lambda: _loss(z, y, denominator=1),
         "the loss is the MEAN over the scored rows: divide the sum by their number (1/M is missing)"),
        (lambda: -_loss(z, y), "the sign is flipped: the loss is -log p_y = logsumexp(z) - z_y, a "
                               "positive number (log p_y itself is negative)"),
        (lambda: _loss(z, wrapped(1)), _OFF_BY_ONE_HINT),
        (lambda: _loss(z, wrapped(-1)), _OFF_BY_ONE_HINT),
        (lambda: _loss(z, y) / np.log(2), "use the natural logarithm np.log, not np.log2"),
        (lambda: _loss(z, y) / np.log(10), "use the natural logarithm np.log, not np.log10"),
        (lambda: np.sum(_logsumexp(z[scored]) - z[scored].max(axis=1)) / M,
         "the loss reads the target's logit z[n, y[n]], not the row maximum"),
        (lambda: np.mean(_row_losses(z, np.where(scored, y, IGNORE % V))), _MASK_HINT),
    ]


def _scalar(raw):
    """The learner's loss as one float64 number (a 0-d array), or a clear failure."""
    if isinstance(raw, (tuple, list)):
        raise CheckFailed(f"your function returned a {type(raw).__name__} of length {len(raw)}, but one "
                          f"number (the mean loss) was expected",
                          hint="return only the loss, e.g. `return np.mean(row_losses)`")
    arr = as_array(raw, "your loss")
    if arr.shape != ():
        raise CheckFailed(f"your loss has shape {arr.shape}, but one number was expected",
                          hint="average the per-row losses of the scored rows into one number (np.mean)")
    return arr


def _check_forward_case(fn, z, y, finite_hint=_FORWARD_HINT):
    raw = result_of(fn, z, y, errors=_ERRORS)
    arr = _scalar(raw)
    if not np.isfinite(arr):
        if arr == _global_max_loss(z, y):          # the same -inf as one global maximum
            finite_hint = _GLOBAL_MAX_HINT
        raise CheckFailed(f"your loss is {float(arr)}", finite_hint)
    diagnose(raw, _loss(z, y), _forward_mistakes(z, y), _FORWARD_HINT, what="your loss",
             rtol=1e-9, atol=1e-12)


_LOGSUMEXP = Solution("kernels.numpy_ref.logsumexp",
                      what="the stable log-sum-exp this exercise asks you to write")


@checker(library=["kernels.cross_entropy_forward", _LOGSUMEXP])
def check_cross_entropy_forward(cross_entropy):
    rng = case_rng(81)
    with stage("returns one number"):
        z = rng.standard_normal((3, 4))
        _scalar(result_of(cross_entropy, z, np.array([0, 1, 2]), errors=_ERRORS))
    with stage("hand-checkable case"):
        # row 0: exp(z) = [1, 1, 1, 1], p = 1/4 each; row 1: exp(z) = [1, 1, 2, 4], p_2 = 2/8
        z = np.log(np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 2.0, 4.0]]))
        _check_forward_case(cross_entropy, z, np.array([0, 2]))   # (ln 4 + ln 4) / 2 = ln 4
        _check_forward_case(cross_entropy, z, np.array([1, 3]))   # (ln 4 + ln 2) / 2
    for name, cases in _batch_stages(rng):
        with stage(name):
            for z, y in cases:
                _check_forward_case(cross_entropy, z, y)
    with stage("large logits: overflow"):
        z = np.array([[1000.0, 999.0, 998.0], [-5.0, 800.0, 0.0], [0.0, 0.0, 0.0]])
        _check_forward_case(cross_entropy, z, np.array([0, 1, 2]), _OVERFLOW_HINT)
        _check_forward_case(cross_entropy, 1000.0 + rng.standard_normal((4, 6)),
                            np.array([1, 5, -100, 0]), _OVERFLOW_HINT)
    with stage("a target far below the row maximum: underflow"):
        z = np.array([[0.0, -1000.0, 1.0], [2.0, 1.0, 0.0]])
        _check_forward_case(cross_entropy, z, np.array([1, 0]), _UNDERFLOW_HINT)   # about 1001 / 2
    with stage("a vocabulary of 120: z[n, -100] exists"):
        z = rng.standard_normal((5, 120))
        _check_forward_case(cross_entropy, z, np.array([-100, 7, -100, 119, 0]), _MASK_HINT)


# ----------------------------------------------------------------------------------------
# Exercise 8.3: cross-entropy backward
# ----------------------------------------------------------------------------------------

_BACKWARD_HINT = tiered("use your result of Exercise 8.2 on each scored row, divided as the mean "
                        "over the M scored rows divides the loss; the rows with target -100 add "
                        "nothing to the loss",
                        "dlogits = (p - onehot(y)) / M on each scored row (p = softmax of that "
                        "row) and 0 on the rows with target -100")


_P_OVERFLOW_HINT = ("np.exp of a large logit overflows (exp(1000) = inf, inf / inf = nan): compute p "
                    "stably, p = exp(z - m) / sum(exp(z - m)) with m each row's maximum, or with "
                    "course_lib's cl.kernels.softmax_forward(logits)")


_AXIS_HINT = ("softmax over the wrong axis: each row must sum to 1. Take the maximum and the sum "
              "along the vocabulary, axis=1 with keepdims=True, not down the columns (axis=0)")


def _backward_mistakes(z, y):
    N, V = z.shape
    M = np.count_nonzero(y != IGNORE)
    nonzero = np.count_nonzero(y)                 # the rows with target != 0, -100 included
    return [
        (lambda: _dlogits(z, y, axis=0), _AXIS_HINT),
        (lambda: _dlogits(z, y, sign=-1.0),
         "the sign is flipped: the gradient is p - onehot(y), not onehot(y) - p. Raising z_y lowers "
         "the loss, so the entry of the target must be negative"),
        (lambda: _dlogits(z, y, scale=1.0),
         f"the factor 1/M is missing: the loss is a mean over the M = {M} scored rows, so every "
         f"row's p - onehot(y) is divided by M"),
        (lambda: _dlogits(z, y, scale=1.0 / N),
         f"you divided by N = {N}, the number of all rows (B*T for a flattened batch); the loss "
         f"averages over the M = {M} scored rows only: divide by M, not by N nor by a batch size"),
        (lambda: _dlogits(z, y, scale=1.0 / nonzero), _NONZERO_HINT),
        (lambda: _dlogits(z, y, ignored_rows="p"),
         "the rows with target -100 add nothing to the loss, so their gradient is exactly 0: "
         "set those rows to zero (you left p / M there)"),
        (lambda: _dlogits(z, y, scale=1.0, ignored_rows="p"),
         "two things: the rows with target -100 must be 0, and the scored rows are divided by M"),
        (lambda: _dlogits(z, y, ignored_rows="negative index"), _MASK_HINT),
        (lambda: _dlogits(z, y, shift=1), _OFF_BY_ONE_HINT),
        (lambda: _dlogits(z, y, shift=-1), _OFF_BY_ONE_HINT),
        (lambda: np.where((y != IGNORE)[:, None], ref.softmax(z) / M, 0.0),
         "the onehot(y) term is missing: subtract 1 at the target's entry of each scored row"),
    ]


DLOGITS = Spec(Output(
    "dlogits", want=_dlogits, mistakes=_backward_mistakes, hint=_BACKWARD_HINT,
    shape=lambda z, y: z.shape, finite_hint=_P_OVERFLOW_HINT, rtol=1e-9, atol=1e-12,
    shape_hint="a gradient has the shape of what it is the gradient of: (N, V) like the logits"),
    errors=_ERRORS)


@checker(library=["kernels.cross_entropy_backward"])
def check_cross_entropy_backward(cross_entropy_backward):
    rng = case_rng(83)
    # p = [1/4, 1/4, 1/4, 1/4], [1/8, 1/8, 1/4, 1/2] and [1/4, 1/4, 1/4, 1/4]; M = 3
    hand = np.log(np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 2.0, 4.0], [2.0, 2.0, 2.0, 2.0]]))
    large = np.array([[1000.0, 999.0, 998.0], [-5.0, 800.0, 0.0], [0.0, -1000.0, 1.0]])
    run_cases(cross_entropy_backward, DLOGITS, [
        Stage("shapes", [(rng.standard_normal((3, 4)), np.array([0, 1, 2]))], values=False),
        Stage("hand-checkable case", [(hand, np.array([0, 2, 1])), (hand, np.array([1, 3, 3]))]),
        *(Stage(name, cases) for name, cases in _batch_stages(rng)),
        Stage("large logits", [(large, np.array([0, 1, 1]))]),
        Stage("a vocabulary of 120: z[n, -100] exists",
              [(rng.standard_normal((5, 120)), np.array([-100, 7, -100, 119, 0]))]),
    ])
