"""Checkers for notebook 12, a small GPT on real text.

    cl.checks.check_char_windows(char_windows)   # Exercise 12.1: (chars, tokens, targets)
    cl.checks.check_baselines(count_baselines)   # Exercise 12.3: (unigram, bigram) in nats/char
    cl.checks.check_sample(sample)               # Exercise 12.6: one id from softmax(top-k(z) / τ)

(Exercises 12.2 and 12.5 are derivations on paper: the best constant model and what the
temperature does to a distribution; 12.4 and 12.7 are predictions the notebook's cells test.
No checker.)

check_char_windows numbers the text as it is: a stage whose texts start and end with spaces and
newlines names a text stripped first, and ids numbered from 1, by code point or in another order
are named as such (the windows in the right places, the ids not).

check_baselines compares the unigram and the bigram each on its own, so that the report names
the wrong one and the mistake that gives it (counts on the held-out ids, no smoothing, + 1 where
the denominator needs + V, repeated pairs counted once, bits, a flipped sign, a sum, the pair
table the wrong way round). Its hand-checkable case prints its inputs and the expected losses;
where two mistakes give its numbers, one more call on a larger case tells them apart.

Sampling is random, so check_sample looks at it two ways. Deterministically: the function must
not always return the argmax, must draw from the generator it is given (the generator's state
moves, np.random's global generator is neither seeded nor drawn from, and the same seed gives
the same ids whatever np.random's global state is), and top_k = 1 gives the argmax; the caller's
np.random state is restored. A NaN, returned or raised, is traced to its cause (an exp that
overflows only with large logits; with small ones and top_k, fewer than k ids kept).
Statistically, with fixed seeds: a few thousand draws per case, their counts
against the exact distribution softmax(top-k(z) / τ) with a chi-square bound that a right
function exceeds with probability 1e-6 (and, the seeds being fixed, never in these tests); a
draw outside the top k fails at once. A wrong frequency table is compared with the usual
mistakes (the temperature multiplied, or applied after the softmax, the k smallest kept, k + 1
or k - 1 kept, the others set to 0 rather than -inf, uniform draws, always the argmax, a
cumulative-sum draw one id off) and the hint names the one it matches.
"""
import numpy as np

from .reference import softmax
from .core import (case_rng, CheckFailed, as_array, call, checker, diagnose, dtype_hint, expect_shape, show_digits,
                   stage, tiered)
from .library import Solution

__all__ = ["check_char_windows", "check_baselines", "check_sample"]

# ----------------------------------------------------------------------------------------
# Exercise 12.1: vocabulary, encoding and next-character windows
# ----------------------------------------------------------------------------------------

_WINDOWS_HINT = tiered("the inputs are T characters from each start, the targets the T characters "
                       "one further on: at every position the target is the character that "
                       "follows the input there",
                       "tokens[b] = ids[s:s + T], targets[b] = ids[s + 1:s + T + 1] for s = starts[b]")


_STRIP_HINT = ("your windows start too far on: was the text stripped (text.strip())? Every "
               "character counts, the spaces and newlines at its ends too: number the text as "
               "it is")
_FROM_ONE_HINT = ("your ids are one too large: a character's id is its index in chars, from 0 "
                  "(chars[0] has id 0), so that the ids run over 0..V - 1")
_CODE_POINT_HINT = ("your ids are the characters' code points (ord(c)): a character's id is its "
                    "index in chars, 0..V - 1, one row of the embedding table each")
_RENUMBERED_HINT = ("your windows are in the right places, but the ids are not their indices in "
                    "chars: a character's id is where it stands in the sorted string chars")


def _windows_of(text, chars, starts, T):
    """(tokens, targets) of `text` with each character numbered by its index in `chars`."""
    ids = np.array([chars.index(c) for c in text])
    rows = np.asarray(starts)[:, None] + np.arange(T + 1)
    return ids[rows[:, :-1]], ids[rows[:, 1:]]


def _ref_windows(text, starts, T):
    chars = "".join(sorted(set(text)))
    return (chars, *_windows_of(text, chars, starts, T))


def _renumbered(got, want):
    """`got` when it is `want` with the ids numbered another way (one id for each id), else an
    error (diagnose then skips it)."""
    got, want = np.asarray(got), np.asarray(want)
    pairs = set(zip(want.ravel().tolist(), got.ravel().tolist()))
    if got.shape != want.shape or not len(pairs) == len(set(want.ravel().tolist())) == len(
            {g for _, g in pairs}):
        raise ValueError("not a renumbering")
    return got


def _id_mistakes(text, starts, T, part):
    """The usual wrong ids and windows of tokens (part 0) or targets (part 1): (thunk, hint)."""
    chars = "".join(sorted(set(text)))
    rows = np.asarray(starts)[:, None] + np.arange(T + 1)
    rows = rows[:, :-1] if part == 0 else rows[:, 1:]
    return [(lambda: _windows_of(text.strip(), chars, starts, T)[part], _STRIP_HINT),
            (lambda: _windows_of(text, chars, starts, T)[part] + 1, _FROM_ONE_HINT),
            (lambda: np.array([ord(c) for c in text])[rows], _CODE_POINT_HINT)]


def _chars_hint(chars, want_chars, text):
    """The hint for a wrong vocabulary: its order, whitespace lost (at the ends: stripped)..."""
    if sorted(chars) == sorted(want_chars):
        return "the vocabulary is the distinct characters in sorted order, as one string"
    missing = "".join(sorted(set(want_chars) - set(chars)))
    if missing and missing.isspace() and set(chars) <= set(want_chars):
        at_ends = set(missing) <= set(text) - set(text.strip())
        return (f"chars lacks {missing!r}, " + ("found only at the ends of the text: was the text "
                "stripped (text.strip())? " if at_ends else "") + "Every character of the text "
                "counts, spaces and newlines too")
    return ("every distinct character of the text once, sorted: spaces and newlines too, "
            "nothing else")


def _check_windows_case(fn, text, starts, T):
    got = call(fn, text, np.asarray(starts), T)
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        raise CheckFailed(f"your function returned {type(got).__name__}, but a tuple (chars, tokens, "
                          f"targets) was expected", hint="end with `return chars, tokens, targets`")
    chars, tokens, targets = got
    want_chars, want_tokens, want_targets = _ref_windows(text, starts, T)
    if (isinstance(chars, (list, tuple)) or isinstance(chars, np.ndarray) and chars.ndim == 1) and all(
            isinstance(c, str) for c in chars):
        chars = "".join(chars)          # the characters one by one: as good as the string
    if not isinstance(chars, str):
        raise CheckFailed(f"chars is {type(chars).__name__}, but a string was expected",
                          hint="chars is one string: the distinct characters of the text, sorted")
    if chars != want_chars:
        raise CheckFailed(f"chars is {chars!r} for the text {text!r}, expected {want_chars!r}",
                          _chars_hint(chars, want_chars, text))
    B = len(starts)
    for name, value in (("tokens", tokens), ("targets", targets)):
        expect_shape(value, (B, T), what=name,
                     hint="one row per start, T columns: shape (len(starts), T)")
        if not np.issubdtype(np.asarray(value).dtype, np.integer):
            raise CheckFailed(f"{name} has dtype {np.asarray(value).dtype}, but integer ids were expected",
                              hint="ids index the embedding table: keep them integers (np.int64)")
    mistakes = [(want_tokens, "your targets are the inputs themselves: the target at each position "
                              "is the NEXT character, one further on"),
                (lambda: _ref_windows(text, np.asarray(starts) + 1, T)[2],
                 "your targets are two characters on: the target is ids[s + 1:s + T + 1]")]
    diagnose(tokens, want_tokens, _id_mistakes(text, starts, T, 0)
             + [(lambda: _renumbered(tokens, want_tokens), _RENUMBERED_HINT)],
             _WINDOWS_HINT, what="tokens")
    diagnose(targets, want_targets, mistakes + _id_mistakes(text, starts, T, 1), _WINDOWS_HINT,
             what="targets")


# course_lib's Vocabulary builds the characters and ids this exercise asks for
_VOCABULARY = [Solution(f"text.Vocabulary.{name}", what=f"which {does} this exercise asks for",
                        hint="sort the distinct characters yourself and number them: "
                             "course_lib's Vocabulary is there to compare with once yours passes")
               for name, does in (("from_text", "builds the sorted characters"),
                                  ("encode", "turns characters into the ids"))]


@checker(library=["text.random_windows", "text.fixed_windows", *_VOCABULARY])
def check_char_windows(char_windows):
    with stage("returns (chars, tokens, targets)"):
        _check_windows_case(char_windows, "abracadabra", [0], 4)
    with stage("hand-checkable case"):
        _check_windows_case(char_windows, "abracadabra", [0, 3, 6], 4)
    with stage("spaces, newlines and capitals"):
        _check_windows_case(char_windows, "In the beginning\nGod created", [0, 10, 2, 5], 8)
    with stage("spaces and newlines at the ends of the text"):
        # stripped, the first text shifts every window; the second loses its only newline
        _check_windows_case(char_windows, "  And the earth was without form, and void;\nand "
                            "darkness was upon the face of the deep.\n", [0, 20, 40, 60], 12)
        _check_windows_case(char_windows, "Let there be light:\n", [0, 4], 10)
    with stage("the last window of the text"):
        text = "And God said, Let there be light: and there was light."
        _check_windows_case(char_windows, text, [0, len(text) - 7], 6)
    with stage("random windows"):
        rng = case_rng(121)
        text = "".join(rng.choice(list("abcdefgh ,.\n"), size=300))
        _check_windows_case(char_windows, text, rng.integers(0, 300 - 17, size=8), 16)


# ----------------------------------------------------------------------------------------
# Exercise 12.3: unigram and bigram baselines
# ----------------------------------------------------------------------------------------

_BASELINE_HINT = tiered("count on the training ids only, add one to every count (unigram: per "
                        "character; bigram: per pair), turn the counts into probabilities, and "
                        "average -log p over the held-out characters",
                        "unigram p(c) = (n(c) + 1) / (N + V); bigram p(c | b) = (n(b c) + 1) / "
                        "(n(b .) + V), each held-out character after its predecessor (the first "
                        "one after the last training character)")


_NAMES = ("unigram", "bigram")
_DENOMINATOR_HINT = ("the denominator: adding one to each of the V counts adds V to their total, so "
                     "divide by N + V for the unigram and by n(b .) + V for the bigram (one per "
                     "possible next character); with + 1, or nothing, the probabilities do not sum "
                     "to 1")
_REPEATS_HINT = ("a repeated pair was counted once: `table[rows, cols] += 1` with arrays of indices "
                 "adds 1 once per distinct index, however often it repeats; np.add.at(table, "
                 "(rows, cols), 1.0) adds at every repeat (np.bincount for the characters)")
# the hand-checkable case, with a pair (1, 1) never seen in training: without smoothing its
# bigram is infinite, with + 1 in the denominator finite but wrong, so the two get their own hints
_HAND = (np.array([0, 1, 0, 1]), np.array([0, 1, 1]), 2,
         " (unigram = -(ln p(0) + 2 ln p(1)) / 3, bigram = -(ln p(0 | 1) + ln p(1 | 0) + "
         "ln p(1 | 1)) / 3: the first held-out 0 follows the last training 1)")


def _ref_baselines(train, val, V, smooth=1.0, extra=None, count_on=None, first="last", base=np.e,
                   once=False):
    """(unigram, bigram), or one of the usual mistakes: `smooth` added to every count, `extra` to
    every total (smooth * V when right), counts on `count_on`, the first held-out character left
    out (first="skip"), logarithms in `base`, repeated indices counted once (`once`)."""
    count_on = train if count_on is None else count_on
    extra = smooth * V if extra is None else extra
    uni = np.bincount(count_on, minlength=V).astype(float)
    pairs = np.zeros((V, V))
    np.add.at(pairs, (count_on[:-1], count_on[1:]), 1.0)
    if once:    # what `table[rows, cols] += 1` counts: 1 for every index present
        uni, pairs = np.minimum(uni, 1.0), np.minimum(pairs, 1.0)
    with np.errstate(all="ignore"):
        log_uni = np.log((uni + smooth) / (uni.sum() + extra)) / np.log(base)
        log_bi = np.log((pairs + smooth) / (pairs.sum(axis=1, keepdims=True) + extra)) / np.log(base)
    before = np.concatenate([train[-1:], val[:-1]])
    bigram = log_bi[before, val] if first == "last" else log_bi[val[:-1], val[1:]]
    return -np.array([log_uni[val].mean(), bigram.mean()])


def _joint_bigram(train, val, V):
    """The bigram with every pair divided by the count of all pairs (no unigram mistake)."""
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    before = np.concatenate([train[-1:], val[:-1]])
    return np.array([np.nan, -np.log(pairs / pairs.sum())[before, val].mean()])


def _swapped_bigram(train, val, V, how):
    """The bigram with the pair table the wrong way round: pairs counted as (next, before)
    ("counted"), or the right table read at [c, b], divided by row b ("read") or row c ("row c")."""
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    before = np.concatenate([train[-1:], val[:-1]])
    if how == "counted":
        p = pairs.T[before, val] / pairs.T[before].sum(axis=1)
    else:
        p = pairs[val, before] / pairs[before if how == "read" else val].sum(axis=1)
    return np.array([np.nan, -np.log(p).mean()])


_SWAPPED_HINT = ("the pair table is the wrong way round: its row is the character before (b), "
                 "its column the one that follows (c), and p(c | b) is read from row b. Check the "
                 "order of the indices where you count the pairs and where you read them")


def _baseline_mistakes(train, val, V):
    """(the wrong (unigram, bigram), hint) of the usual mistakes, in the order they are tried."""
    ref = lambda **kw: lambda: _ref_baselines(train, val, V, **kw)     # noqa: E731
    return [
        (ref(smooth=0.0), "no smoothing: add one to every count, so that a character or pair never "
                          "seen in training keeps a finite loss"),
        (ref(extra=1.0), _DENOMINATOR_HINT),
        (ref(extra=0.0), _DENOMINATOR_HINT),
        (ref(once=True), _REPEATS_HINT),
        (ref(count_on=val), "you counted on the held-out ids: the counts come from the training "
                            "ids only (a model may not see the text it is scored on)"),
        (ref(first="skip"), "the first held-out character counts too: its predecessor is the last "
                            "training character"),
        *[(lambda how=how: _swapped_bigram(train, val, V, how), _SWAPPED_HINT)
          for how in ("counted", "read", "row c")],
        (ref(base=2), "use the natural logarithm: nats, not bits"),
        (lambda: -_ref_baselines(train, val, V), "the loss is -ln p, a positive number (ln p < 0 "
                                                 "for p < 1): the sign is flipped"),
        (lambda: _ref_baselines(train, val, V) * len(val),
         "the loss is per character: the mean of -ln p over the held-out characters (np.mean), "
         "not their sum"),
        (lambda: _joint_bigram(train, val, V),
         "the bigram is p(c | b): divide each pair's count by the count of pairs starting with b "
         "(its row), not by the count of all pairs"),
    ]


def _matches(arr, wrong, mistakes):
    """(indices of the mistakes that give every wrong number, hint of the first that gives one)."""
    full, partial = [], None
    for i, (make, hint) in enumerate(mistakes):
        with np.errstate(all="ignore"):
            candidate = np.asarray(make(), dtype=float)
        hits = [j for j in wrong if np.isclose(arr[j], candidate[j], rtol=1e-9, atol=1e-12)]
        if hits == wrong:
            full.append(i)
        partial = partial or (hint if hits else None)
    return full, partial


# a case that tells apart mistakes that give the same numbers on a small one (the hand-checkable
# case's bigram is ln 2 both with the first held-out character left out and with the pair table
# counted the wrong way round)
_TIEBREAK = (np.array([0, 1, 3, 0, 2, 2, 1, 0, 3, 3, 1, 2, 0, 0, 1, 3, 2, 1, 1, 0]),
             np.array([2, 3, 0, 1, 1, 2, 0]), 4)


def _named_mistake(arr, wrong, mistakes, again=None):
    """The hint of the first mistake that gives every wrong number, else of the first that gives
    one of them, else None. When mistakes with different hints give every wrong number, again()
    (the learner's numbers on _TIEBREAK) picks the one that gives them there too."""
    full, partial = _matches(arr, wrong, mistakes)
    if len({mistakes[i][1] for i in full}) > 1 and again is not None:
        try:
            got = again()
        except CheckFailed:
            got = None
        if got is not None:
            want = _ref_baselines(*_TIEBREAK)
            off = [i for i in (0, 1) if not np.isclose(got[i], want[i], rtol=1e-9, atol=1e-12)]
            there, _ = _matches(got, off, _baseline_mistakes(*_TIEBREAK))
            full = [i for i in full if i in there] or full
    return mistakes[full[0]][1] if full else partial


def _compare_baselines(got, arr, want, mistakes, case, again=None):
    """Fail naming the wrong number(s) and the mistake that gives them; `case` ends the message."""
    wrong = [i for i in (0, 1) if not np.isclose(arr[i], want[i], rtol=1e-9, atol=1e-12)]
    if not wrong:
        return
    said = ["your {} is {}, expected {}".format(_NAMES[i], *show_digits(arr[i], want[i])) for i in wrong]
    if len(wrong) == 1:
        said.append(f"your {_NAMES[1 - wrong[0]]} is right")
    dtype = next((h for i in wrong if (h := dtype_hint(got[i], arr[i], np.asarray(want[i])))), None)
    raise CheckFailed("; ".join(said) + case,
                      dtype or _named_mistake(arr, wrong, mistakes, again) or _BASELINE_HINT)


def _baseline_result(fn, train, val, V):
    """(what the learner's function returned, its two numbers as a float array), or a failure."""
    got = call(fn, train, val, V)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise CheckFailed(f"your function returned {type(got).__name__}, but a pair (unigram, bigram) "
                          f"was expected", hint="end with `return unigram, bigram`")
    parts = [as_array(v, name) for v, name in zip(got, _NAMES)]
    if any(p.shape != () for p in parts):
        raise CheckFailed(f"(unigram, bigram) should be two numbers, got shapes "
                          f"{[p.shape for p in parts]}",
                          hint="each loss is one number: the mean over the held-out characters")
    return got, np.array([float(p) for p in parts])


def _check_baseline_case(fn, train, val, V, terms=""):
    got, arr = _baseline_result(fn, train, val, V)
    want = _ref_baselines(train, val, V)
    # a case small enough to work by hand is printed with its answer
    case = (f". The case: train = {train.tolist()}, val = {val.tolist()}, V = {V}; expected unigram "
            f"{want[0]:.4f}, bigram {want[1]:.4f}{terms}" if len(train) <= 10 else "")
    for i in (0, 1):
        if not np.isfinite(arr[i]):     # -inf: a probability above 1, a count divided by 0
            seen = "character" if i == 0 else "pair"
            raise CheckFailed(f"your {_NAMES[i]} is {arr[i]}{case}",
                              _DENOMINATOR_HINT if arr[i] == -np.inf else
                              f"a {seen} never seen in training has count 0 (ln 0 = -inf, 0 / 0 = "
                              f"nan): add one to every count (add-one smoothing) and V to every total")
    _compare_baselines(got, arr, want, _baseline_mistakes(train, val, V), case,
                       lambda: _baseline_result(fn, *_TIEBREAK)[1])


@checker(library=["text.baselines"])
def check_baselines(count_baselines):
    with stage("hand-checkable case"):
        train, val, V, terms = _HAND
        _check_baseline_case(count_baselines, train, val, V, terms)
    with stage("a character never seen in training"):
        _check_baseline_case(count_baselines, np.array([0, 1, 1, 0, 1]), np.array([2, 0, 2]), 3)
    with stage("random ids"):
        rng = case_rng(123)
        for n, V in ((200, 5), (1000, 30)):
            ids = rng.integers(0, V, size=n)
            _check_baseline_case(count_baselines, ids[:9 * n // 10], ids[9 * n // 10:], V)


# ----------------------------------------------------------------------------------------
# Exercise 12.6: sampling with temperature and top-k
# ----------------------------------------------------------------------------------------

_SAMPLE_HINT = tiered("divide the logits by the temperature, keep the top_k largest (the others "
                      "get probability 0), take the softmax of what is left, and draw one id "
                      "with rng",
                      "z = logits / temperature; z[i] = -inf for every i outside the k largest; "
                      "p = softmax(z); return rng.choice(V, p=p)")
_RNG_HINT = ("draw with the generator you are given, rng.choice(V, p=p) or rng.random(): not "
             "np.random.choice, np.random.rand or a new np.random.default_rng(), so that the same "
             "seed gives the same text")
_GREEDY_HINT = ("your function always returns the most likely id (greedy, temperature 0): draw "
                "at random from p with rng")
_NAN_HINT = ("np.exp of a large logit overflows (exp(1000) = inf, inf / inf = nan): subtract the "
             "largest logit before exp, as in notebook 08's stable softmax")
_NAN_OTHER_HINT = ("print p before the draw: a NaN comes from 0 / 0 or inf / inf in the softmax "
                   "(are all logits -inf?); the id you return is an int in 0..V - 1")
_GLOBAL_HINT = ("np.random.seed(...) resets NumPy's global generator for the whole program, and "
                "np.random.choice or np.random.rand draw from it, not from rng: draw with the "
                "generator you are given itself, and leave np.random alone")
_SUM_HINT = ("the probabilities you drew from do not sum to 1: after the temperature and top_k, "
             "divide by their sum (renormalise), or take the softmax of the kept logits")
_NONE_HINT = ("top_k = None means keep all V logits: skip the top-k step when top_k is None "
              "(your function runs with top_k = V)")
_OFF_BY_ONE_HINT = ("your draws are one id off: with c the cumulative sum of p and u = "
                    "rng.random(), the id is np.searchsorted(c, u), the number of entries of c "
                    "below u, with no + 1 or - 1 (ids run from 0 to V - 1)")
N_DRAWS, P_VALUE = 3000, 1e-6


def _ref_probs(z, tau, top_k):
    z = np.asarray(z, dtype=float) / tau
    if top_k is not None:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
    return softmax(z)


def _top_probs(z, tau, keep):
    """softmax(z / τ) over the indices `keep` only."""
    kept = np.full(len(z), -np.inf)
    kept[keep] = np.asarray(z, dtype=float)[keep] / tau
    return softmax(kept)


def _one_off(p):
    """p drawn one place off by a cumulative-sum draw: along the ids (over all V) or along the
    kept ids sorted by p (as a draw over the top k does), by + 1 or - 1, the index clipped to
    the ends or wrapped round (a Python index of -1)."""
    live = np.argsort(-p)[:np.count_nonzero(p)]
    out = []
    for order in (np.arange(len(p)), live):
        for step in (1, -1):
            for moved in (np.clip(np.arange(len(order)) + step, 0, len(order) - 1),
                          (np.arange(len(order)) + step) % len(order)):
                q = np.zeros_like(p)
                np.add.at(q, order[moved], p[order])
                out.append((q, _OFF_BY_ONE_HINT))
    return out


def _mistakes(z, tau, k):
    V, order = len(z), np.argsort(z)
    k_ = V if k is None else k
    uniform = lambda idx: np.isin(np.arange(V), idx) / len(idx)      # noqa: E731
    zeroed = np.where(np.isin(np.arange(V), order[-k_:]), np.asarray(z, float) / tau, 0.0)
    out = [(_ref_probs(z, 1.0 / tau, k), "the temperature divides the logits, logits / "
                                         "temperature: multiplying by it sharpens where it "
                                         "should flatten, and the reverse (notebook 08)"),
           (_ref_probs(z, 1.0, k), "your draws follow softmax(z) whatever the temperature: divide "
                                   "the logits by the temperature before the softmax (dividing "
                                   "the probabilities by it and renormalising cancels it)"),
           (np.eye(V)[order[-1]], _GREEDY_HINT),
           (uniform(order[-k_:]), "every kept id is drawn equally often: draw with the "
                                  "probabilities, rng.choice(V, p=p)")]
    if k is not None and k < V:
        out += [(_top_probs(z, tau, order[:k]), "top_k keeps the k LARGEST logits: you kept the k "
                                                "smallest (np.argsort sorts in increasing order)"),
                (softmax(zeroed),
                 "the ids outside the top k must get probability 0: set their logits to -inf "
                 "(exp(-inf) = 0), not to 0")]
        if k + 1 <= V:
            out.append((_top_probs(z, tau, order[-(k + 1):]), f"you kept {k + 1} ids for top_k = "
                                                              f"{k}: keep exactly k"))
        if k > 1:
            out.append((_top_probs(z, tau, order[-(k - 1):]), f"you kept {k - 1} ids for top_k = "
                                                              f"{k}: keep exactly k"))
        # after k + 1, whose counts fit all V too when the one id more is rarely drawn
        out.append((_ref_probs(z, tau, None), f"your draws ignore top_k = {k}: keep only the k "
                                              f"largest logits, for every k up to V"))
    return out + _one_off(_ref_probs(z, tau, k))


def _nan_hint(z, tau, k):
    """What a NaN probability points to: exp overflowing (only large logits / τ make it overflow),
    else, with top_k, no id kept; else a NaN to print and trace."""
    if np.max(np.abs(np.asarray(z, dtype=float))) / tau > 700:     # exp(710) = inf in float64
        return _NAN_HINT
    if k is not None:
        return (f"NaN with top_k = {k}, from logits too small for exp to overflow: your function "
                f"kept fewer than k ids (at k = 1 none, and the softmax of logits that are all "
                f"-inf is 0 / 0 = NaN). Keep the k largest, the k-th largest itself too")
    return _NAN_OTHER_HINT


def _explained(e, fn, z, tau, k):
    """The failure `e` of one call, with the hint that its message points to."""
    if "do not sum to 1" in e.message:
        return CheckFailed(e.message, _SUM_HINT)
    if "NaN" in e.message:
        return CheckFailed(e.message, _nan_hint(z, tau, k))
    if k is None and e.message.startswith("your function raised"):
        try:    # the same call with top_k = V, which keeps the same logits
            call(fn, z, tau, len(z), np.random.default_rng(0))
        except CheckFailed:
            return e
        return CheckFailed(e.message, _NONE_HINT)
    return e


def _draw(fn, z, tau, k, rng):
    """One call; the id as an int, or a clear failure."""
    try:
        got = call(fn, z, tau, k, rng)
    except CheckFailed as e:
        raise _explained(e, fn, z, tau, k) from None
    if isinstance(got, np.ndarray) and got.shape == () or isinstance(got, np.generic):
        got = got.item()
    if isinstance(got, np.ndarray) and got.shape == (len(z),):
        raise CheckFailed(f"your function returned an array of shape {got.shape}, but one id was "
                          f"expected", hint="return the id you drew, not the probabilities")
    if isinstance(got, float) and not np.isfinite(got):      # int(nan) would raise
        raise CheckFailed(f"your function returned {got}, but one id (an integer in "
                          f"0..{len(z) - 1}) was expected", _nan_hint(z, tau, k))
    if isinstance(got, bool) or not isinstance(got, (int, float)) or got != int(got):
        raise CheckFailed(f"your function returned {got!r} ({type(got).__name__}), but one id "
                          f"(an integer in 0..{len(z) - 1}) was expected",
                          hint="return the drawn id, e.g. int(rng.choice(V, p=p))")
    if not 0 <= got < len(z):
        raise CheckFailed(f"your function returned {got}, outside 0..{len(z) - 1}",
                          hint=_OFF_BY_ONE_HINT if got in (-1, len(z))
                          else "ids index the logits: 0..V-1")
    return int(got)


def _counts(fn, z, tau, k, seed, n=N_DRAWS):
    rng = case_rng(seed)      # the grader's fresh cases: other draws, which no table of ids foresaw
    counts = np.zeros(len(z))
    with np.errstate(all="ignore"):
        for _ in range(n):
            counts[_draw(fn, z, tau, k, rng)] += 1
    return counts


def _fits(counts, p):
    """Counts drawn from p: nothing where p = 0, and a chi-square below its 1e-6 bound."""
    if np.any(counts[p == 0] > 0):
        return False
    live = p > 0
    if live.sum() == 1:
        return True
    expected = counts.sum() * p[live]
    stat = np.sum((counts[live] - expected) ** 2 / expected)
    from scipy.stats import chi2     # here, not at the top: scipy.stats takes a second to import
    return stat < chi2.isf(P_VALUE, live.sum() - 1)


def _check_distribution(fn, z, tau, k, seed):
    z = np.asarray(z, dtype=float)
    counts = _counts(fn, z, tau, k, seed)
    p = _ref_probs(z, tau, k)
    if _fits(counts, p):
        return
    freq = counts / counts.sum()
    outside = np.flatnonzero((p == 0) & (counts > 0))
    hint = next((h for q, h in _mistakes(z, tau, k) if _fits(counts, q)), None)
    if hint is None and outside.size:
        hint = "ids outside the top k must never be drawn: keep only the k largest logits"
    where = (f"id {outside[0]} is outside the top {k} but was drawn {int(counts[outside[0]])} times"
             if outside.size else f"frequencies {np.round(freq, 3).tolist()}, expected "
                                  f"{np.round(p, 3).tolist()}")
    raise CheckFailed(f"over {N_DRAWS} draws (temperature {tau}, top_k {k}), {where}",
                      hint or _SAMPLE_HINT)


# the largest logit first, in the middle and last: a draw that is always the argmax is greedy
# (a cumulative-sum draw at one fixed u, from a generator seeded inside, lands on all three
# only if it runs along the sorted ids)
_PEAKS = np.array([[2.0, 1.0, 0.5, 1.5, 0.0], [0.5, 1.5, 2.0, 0.0, 1.0], [1.0, 0.0, 1.5, 0.5, 2.0]])


def _leaves_np_random(fn, z):
    """Whether one call leaves np.random's global state as it was (the caller's state restored)."""
    saved = np.random.get_state()
    try:
        np.random.seed(2024)
        before = np.random.get_state()
        _draw(fn, z, 1.0, None, np.random.default_rng(8))
        after = np.random.get_state()
    finally:
        np.random.set_state(saved)
    return all(np.array_equal(a, b) for a, b in zip(before, after))


def _check_rng(fn):
    rng = np.random.default_rng(3)
    if all(_draw(fn, z, 1.0, None, rng) == np.argmax(z) for z in _PEAKS for _ in range(10)):
        raise CheckFailed("30 draws at temperature 1 with all ids kept, from three sets of logits, "
                          "all gave the id of the largest logit", _GREEDY_HINT)
    z = np.array([0.5, 1.0, 0.0, 2.0, -1.0])
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    _draw(fn, z, 1.0, None, rng)
    if rng.bit_generator.state == before:
        raise CheckFailed("the generator `rng` you were given did not move: your function drew "
                          "its random number elsewhere", _RNG_HINT)
    if not _leaves_np_random(fn, z):
        raise CheckFailed("your function changed NumPy's global generator (np.random): it seeds "
                          "it or draws from it", _GLOBAL_HINT)
    global_state = np.random.get_state()
    try:
        runs = []
        for global_seed in (1, 2):
            np.random.seed(global_seed)
            rng = np.random.default_rng(5)
            runs.append([_draw(fn, z, 1.0, None, rng) for _ in range(40)])
    finally:
        np.random.set_state(global_state)
    if runs[0] != runs[1]:
        raise CheckFailed("two generators with the same seed gave different ids", _RNG_HINT)


@checker(library=["text.sample"])
def check_sample(sample):
    saved = np.random.get_state()   # a function that seeds np.random must not change the caller's
    try:
        with np.errstate(all="ignore"):     # a NaN or an overflow is the checker's to explain
            _check_sample(sample)
    finally:
        np.random.set_state(saved)


def _check_sample(sample):
    z = np.array([1.0, 2.0, 0.5, 3.0, -1.0, 2.5])
    with stage("returns one id"):
        _draw(sample, z, 1.0, None, np.random.default_rng(0))
    with stage("draws with the rng it is given"):
        _check_rng(sample)
    # before top_k = 1, whose one failure would name top_k whatever the bug (one id off, say)
    with stage("temperature 1, all ids: frequencies"):
        _check_distribution(sample, z, 1.0, None, 11)
    with stage("top_k = 1 gives the largest logit"):
        rng = np.random.default_rng(1)
        got = [_draw(sample, z, 1.0, 1, rng) for _ in range(20)]
        if set(got) != {3}:
            raise CheckFailed(f"top_k = 1 drew ids {sorted(set(got))}, expected always 3 (logit 3.0)",
                              "top_k keeps the k LARGEST logits and gives every other id "
                              "probability 0 (logit -inf): with k = 1 only the argmax is left")
    with stage("temperatures 0.5 and 2"):
        _check_distribution(sample, z, 0.5, None, 12)
        _check_distribution(sample, z, 2.0, None, 13)
    with stage("top_k = 3"):
        _check_distribution(sample, z, 1.0, 3, 14)
        _check_distribution(sample, z, 2.0, 3, 15)
    with stage("top_k = V - 2"):     # a large k too: a function may drop top_k beyond V / 2
        _check_distribution(sample, z, 1.0, len(z) - 2, 19)
    with stage("edge cases: large logits, a low temperature, top_k = V"):
        _check_distribution(sample, np.array([1000.0, 999.0, 998.0, 990.0]), 1.0, None, 16)
        _check_distribution(sample, np.array([1.0, 1.2, 0.9, 0.0]), 0.1, 2, 17)
        _check_distribution(sample, z, 1.5, len(z), 18)
