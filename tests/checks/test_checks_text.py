"""Checkers of notebook 12 (a small GPT on real text): they pass the reference solutions and
reject realistic learner bugs at the right stage, with a hint that names the bug."""
import re

import numpy as np
import pytest

import course_lib as cl
import course_lib.text
from course_lib.checks import text as checks_text
from support import notebook_asserts

assert_passes, assert_rejects = notebook_asserts(12)
SAMPLE = cl.checks.check_sample
WINDOWS = cl.checks.check_char_windows
BASELINES = cl.checks.check_baselines


# ---- the reference solutions, as in the notebook ----------------------------------------

def char_windows(text, starts, T):
    chars = "".join(sorted(set(text)))
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text])
    tokens = np.stack([ids[s:s + T] for s in starts])
    targets = np.stack([ids[s + 1:s + T + 1] for s in starts])
    return chars, tokens, targets


def count_baselines(train, val, V):
    uni = np.bincount(train, minlength=V) + 1.0
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    before = np.concatenate([train[-1:], val[:-1]])
    unigram = -np.mean(np.log(uni[val] / uni.sum()))
    bigram = -np.mean(np.log(pairs[before, val] / pairs[before].sum(axis=1)))
    return unigram, bigram


def sample(logits, temperature, top_k, rng):
    z = logits / temperature
    if top_k is not None:
        kth = np.sort(z)[-top_k]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max())
    p = p / p.sum()
    return int(rng.choice(len(z), p=p))


def sample_by_cumsum(logits, temperature, top_k, rng):
    """The same distribution, drawn by inverting the cumulative sum."""
    order = np.argsort(logits)[::-1][:top_k]
    z = logits[order] / temperature
    p = np.exp(z - z.max())
    c = np.cumsum(p / p.sum())
    return int(order[min(np.searchsorted(c, rng.random()), len(c) - 1)])


def test_exported_from_cl_checks():
    for name in checks_text.__all__:
        assert getattr(cl.checks, name) is getattr(checks_text, name)


@pytest.mark.parametrize("check, fn", [(WINDOWS, char_windows), (BASELINES, count_baselines),
                                       (SAMPLE, sample), (SAMPLE, sample_by_cumsum)])
def test_references_pass(check, fn, capsys):
    assert_passes(check, fn, capsys)


def test_baselines_agree_with_course_lib():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 12, size=500)
    train, val = cl.text.split(ids)
    want = cl.text.baselines(train, val, 12)
    assert np.allclose(count_baselines(train, val, 12), (want["unigram"], want["bigram"]))


# ---- sample: known-wrong versions ---------------------------------------------------------

def _softmax(z):
    p = np.exp(z - z.max())
    return p / p.sum()


def _keep(z, top_k, which="largest", extra=0, fill=-np.inf):
    if top_k is None:
        return z
    order = np.argsort(z)
    keep = order[:top_k] if which == "smallest" else order[-(top_k + extra):]
    out = np.full_like(z, fill)
    out[keep] = z[keep]
    return out


def multiplied(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits * temperature, top_k))
    return int(rng.choice(len(p), p=p))


def softmax_first(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits, top_k)) / temperature
    return int(rng.choice(len(p), p=p / p.sum()))


def softmax_first_not_renormalised(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits, top_k)) / temperature
    return int(rng.choice(len(p), p=p))


def smallest(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k, "smallest"))
    return int(rng.choice(len(p), p=p))


def one_too_many(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k, extra=1))
    return int(rng.choice(len(p), p=p))


def zeros_outside(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k, fill=0.0))
    return int(rng.choice(len(p), p=p))


def not_renormalised(logits, temperature, top_k, rng):
    p = _softmax(logits / temperature)
    if top_k is not None:
        p = np.where(np.isin(np.arange(len(p)), np.argsort(p)[-top_k:]), p, 0.0)
    return int(rng.choice(len(p), p=p))


def global_random(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k))
    return int(np.random.choice(len(p), p=p))


def fresh_generator(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k))
    return int(np.random.default_rng().choice(len(p), p=p))


def argmax_always(logits, temperature, top_k, rng):
    rng.random()
    return int(np.argmax(logits))


def argmax_only(logits, temperature, top_k, rng):
    return int(np.argmax(logits))


def none_not_handled(logits, temperature, top_k, rng):
    z = logits / temperature
    z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)   # TypeError when top_k is None
    p = _softmax(z)
    return int(rng.choice(len(p), p=p))


def searchsorted_plus_one(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k))
    return int(np.searchsorted(np.cumsum(p), rng.random()) + 1)


def searchsorted_minus_one(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k))
    return int(np.searchsorted(np.cumsum(p), rng.random()) - 1)


def sorted_cumsum_plus_one(logits, temperature, top_k, rng):
    """sample_by_cumsum with the index one too far, clipped to the last kept id."""
    order = np.argsort(logits)[::-1][:top_k]
    c = np.cumsum(_softmax(logits[order] / temperature))
    return int(order[min(np.searchsorted(c, rng.random()) + 1, len(c) - 1)])


def top_k_ignored_when_large(logits, temperature, top_k, rng):
    keep = top_k if top_k is not None and top_k <= len(logits) // 2 else None
    p = _softmax(_keep(logits / temperature, keep))
    return int(rng.choice(len(p), p=p))


def mutates(logits, temperature, top_k, rng):
    logits /= temperature
    p = _softmax(_keep(logits, top_k))
    return int(rng.choice(len(p), p=p))


def naive_exp(logits, temperature, top_k, rng):
    e = np.exp(_keep(logits / temperature, top_k))
    return int(rng.choice(len(e), p=e / e.sum()))


def reseeds_global(logits, temperature, top_k, rng):
    """Seeds np.random from rng, then draws with the familiar np.random.choice: the rng moves
    and the same seed gives the same draw, but the draw is the global generator's."""
    np.random.seed(rng.integers(2 ** 32))
    p = _softmax(_keep(logits / temperature, top_k))
    return int(np.random.choice(len(p), p=p))


def one_too_few(logits, temperature, top_k, rng):
    """`>` instead of `>=` drops the k-th largest itself: k - 1 ids kept, none at k = 1 (NaN)."""
    z = logits / temperature
    if top_k is not None:
        z = np.where(z > np.sort(z)[-top_k], z, -np.inf)
    p = np.exp(z - z.max())
    return int(rng.choice(len(z), p=p / p.sum()))


def returns_nan(logits, temperature, top_k, rng):
    p = _softmax(_keep(logits / temperature, top_k))
    return float(np.sum(np.arange(len(p)) * p) * np.nan)


def returns_probabilities(logits, temperature, top_k, rng):
    return _softmax(_keep(logits / temperature, top_k))


def calls_course_lib(logits, temperature, top_k, rng):
    return course_lib.text.sample(logits, temperature, top_k, rng)


def not_done(logits, temperature, top_k, rng):
    raise NotImplementedError


@pytest.mark.parametrize("fn, stage, hint", [
    (multiplied, "temperatures 0.5 and 2", "multiplying by it sharpens"),
    (softmax_first, "temperatures 0.5 and 2", "whatever the temperature"),
    (softmax_first_not_renormalised, "temperatures 0.5 and 2", "renormalise"),
    (smallest, "top_k = 1 gives the largest logit", "LARGEST"),
    (one_too_many, "top_k = 1 gives the largest logit", "LARGEST"),
    (zeros_outside, "top_k = 1 gives the largest logit", "probability 0"),
    (not_renormalised, "top_k = 1 gives the largest logit", "renormalise"),
    (global_random, "draws with the rng it is given", "np.random.choice"),
    (fresh_generator, "draws with the rng it is given", "np.random.choice"),
    (argmax_always, "draws with the rng it is given", "most likely id"),
    (argmax_only, "draws with the rng it is given", "most likely id"),
    (none_not_handled, "returns one id", "top_k = None means keep all V logits"),
    (searchsorted_plus_one, "draws with the rng it is given", "np.searchsorted(c, u)"),
    (searchsorted_minus_one, "draws with the rng it is given", "np.searchsorted(c, u)"),
    (sorted_cumsum_plus_one, "temperature 1, all ids: frequencies", "one id off"),
    (top_k_ignored_when_large, "top_k = V - 2", "ignore top_k = 4"),
    (mutates, "temperatures 0.5 and 2", "logits.copy()"),
    (naive_exp, "edge cases: large logits, a low temperature, top_k = V", "overflows"),
    (returns_probabilities, "returns one id", "not the probabilities"),
    (reseeds_global, "draws with the rng it is given", "np.random.seed"),
    (one_too_few, "top_k = 1 gives the largest logit", "kept fewer than k ids"),
    (returns_nan, "returns one id", "the id you return is an int in 0..V - 1"),
])
def test_sample_rejects(fn, stage, hint, capsys):
    assert_rejects(SAMPLE, fn, capsys, stage, hint)


def test_reseeding_np_random_is_named_and_the_checker_leaves_it_as_it_was(capsys):
    """The checker restores np.random's global state, whatever the learner's function did to it."""
    np.random.seed(77)
    before = np.random.get_state()
    result, out = SAMPLE(reseeds_global), capsys.readouterr().out
    assert not result.passed and "global generator" in result.message, out
    assert "hint 2" not in result.hint and "rng.choice(V, p=p)" not in result.hint   # tier 1
    after = np.random.get_state()
    assert all(np.array_equal(a, b) for a, b in zip(before, after))


def test_nan_hints_name_the_cause():
    """NaN from large logits is an overflow; from small logits with top_k, too few ids kept."""
    z = np.array([1.0, 2.0, 0.5, 3.0, -1.0, 2.5])
    for fn, logits, k, hint in ((naive_exp, np.array([1000.0, 999.0, 998.0, 990.0]), None,
                                 "overflows"), (one_too_few, z, 1, "kept fewer than k ids")):
        with pytest.raises(checks_text.CheckFailed) as e, np.errstate(all="ignore"):
            checks_text._draw(fn, logits, 1.0, k, np.random.default_rng(0))
        assert hint in e.value.hint, (fn.__name__, e.value.hint)


def test_top_k_mistakes_named_on_their_own(capsys):
    """k + 1, the k smallest, zeros and top_k ignored, at k = 3 and k = V - 2 (the top_k = 1
    stage aside)."""
    z = np.array([1.0, 2.0, 0.5, 3.0, -1.0, 2.5])
    for fn, k, seed, hint in ((one_too_many, 3, 14, "you kept 4 ids"), (smallest, 3, 14, "LARGEST"),
                              (zeros_outside, 3, 14, "not to 0"), (one_too_many, 4, 19, "kept 5"),
                              (zeros_outside, 4, 19, "not to 0"),
                              (top_k_ignored_when_large, 4, 19, "ignore top_k")):
        with pytest.raises(checks_text.CheckFailed) as e:
            checks_text._check_distribution(fn, z, 1.0, k, seed)
        assert hint in e.value.hint, (fn.__name__, k, e.value.hint)


def test_hints_name_the_temperature_not_T():
    """T is the window length in notebook 12: the temperature is "the temperature" (or τ)."""
    z = np.array([1.0, 2.0, 0.5, 3.0, -1.0, 2.5])
    hints = [h for _, h in checks_text._mistakes(z, 2.0, 3)]
    hints += [checks_text._SAMPLE_HINT, checks_text._SAMPLE_HINT.formula]
    assert not any(re.search(r"\bT\b", h) for h in hints), hints


def test_library_call_and_not_done(capsys):
    result, out = SAMPLE(calls_course_lib), capsys.readouterr().out
    assert not result.passed and result.library == "course_lib.text.sample", out
    result, out = SAMPLE(not_done), capsys.readouterr().out
    assert not result.done and "not done yet" in out


# ---- windows and baselines: known-wrong versions ------------------------------------------

def targets_same(text, starts, T):
    chars, tokens, _ = char_windows(text, starts, T)
    return chars, tokens, tokens.copy()


def unsorted_chars(text, starts, T):
    chars = "".join(dict.fromkeys(text))
    ids = np.array([chars.index(c) for c in text])
    return (chars, np.stack([ids[s:s + T] for s in starts]),
            np.stack([ids[s + 1:s + T + 1] for s in starts]))


def chars_as_object_array(text, starts, T):
    """What Hypothesis found: chars an array that `!=` cannot turn into one truth value."""
    _, tokens, targets = char_windows(text, starts, T)
    return np.array([None, None], dtype=object), tokens, targets


def float_ids(text, starts, T):
    chars, tokens, targets = char_windows(text, starts, T)
    return chars, tokens.astype(float), targets.astype(float)


def stripped(text, starts, T):
    """Cleans the text first: every window shifts, and spaces or newlines at the ends are lost."""
    return char_windows(text.strip(), starts, T)


def ids_from_one(text, starts, T):
    chars = "".join(sorted(set(text)))
    index = {c: i + 1 for i, c in enumerate(chars)}      # "0 is kept for padding"
    ids = np.array([index[c] for c in text])
    return (chars, np.stack([ids[s:s + T] for s in starts]),
            np.stack([ids[s + 1:s + T + 1] for s in starts]))


def code_points(text, starts, T):
    chars = "".join(sorted(set(text)))
    ids = np.array([ord(c) for c in text])
    return (chars, np.stack([ids[s:s + T] for s in starts]),
            np.stack([ids[s + 1:s + T + 1] for s in starts]))


def reversed_ids(text, starts, T):
    """Another numbering of the characters: the windows are in place, the ids are not indices."""
    chars = "".join(sorted(set(text)))
    ids = np.array([len(chars) - 1 - chars.index(c) for c in text])
    return (chars, np.stack([ids[s:s + T] for s in starts]),
            np.stack([ids[s + 1:s + T + 1] for s in starts]))


def vocabulary_from_library(text, starts, T):
    vocab = cl.text.Vocabulary.from_text(text)
    ids = np.array([vocab.chars.index(c) for c in text])
    return (vocab.chars, np.stack([ids[s:s + T] for s in starts]),
            np.stack([ids[s + 1:s + T + 1] for s in starts]))


def encode_from_library(text, starts, T):
    chars = "".join(sorted(set(text)))
    ids = cl.text.Vocabulary(chars).encode(text)
    return (chars, np.stack([ids[s:s + T] for s in starts]),
            np.stack([ids[s + 1:s + T + 1] for s in starts]))


def _baselines(train, val, V, uni=None, pairs=None, uni_total=None, row_total=None, mean=np.mean):
    """count_baselines, each part replaceable by a wrong one."""
    if uni is None:
        uni = np.bincount(train, minlength=V) + 1.0
    if pairs is None:
        pairs = np.ones((V, V))
        np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    before = np.concatenate([train[-1:], val[:-1]])
    uni_total = uni.sum() if uni_total is None else uni_total
    row_total = pairs[before].sum(axis=1) if row_total is None else row_total[before]
    with np.errstate(all="ignore"):
        return -mean(np.log(uni[val] / uni_total)), -mean(np.log(pairs[before, val] / row_total))


def no_smoothing(train, val, V):
    uni = np.bincount(train, minlength=V).astype(float)
    pairs = np.zeros((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    before = np.concatenate([train[-1:], val[:-1]])
    with np.errstate(all="ignore"):
        return (-np.mean(np.log(uni[val] / uni.sum())),
                -np.mean(np.log(pairs[before, val] / pairs[before].sum(axis=1))))


def counted_on_val(train, val, V):
    return count_baselines(val, val, V)


def in_bits(train, val, V):
    u, b = count_baselines(train, val, V)
    return u / np.log(2), b / np.log(2)


def fancy_indexing(train, val, V):
    pairs = np.ones((V, V))
    pairs[train[:-1], train[1:]] += 1           # a repeated pair adds 1 once
    return _baselines(train, val, V, pairs=pairs)


def unigram_on_val(train, val, V):
    return _baselines(train, val, V, uni=np.bincount(val, minlength=V) + 1.0)


def unigram_unsmoothed(train, val, V):
    return _baselines(train, val, V, uni=np.bincount(train, minlength=V).astype(float))


def unigram_over_n(train, val, V):
    return _baselines(train, val, V, uni_total=len(train))


def bigram_plus_one(train, val, V):
    counts = np.zeros((V, V))
    np.add.at(counts, (train[:-1], train[1:]), 1.0)
    return _baselines(train, val, V, pairs=counts + 1.0, row_total=counts.sum(axis=1) + 1.0)


def sign_flipped(train, val, V):
    u, b = count_baselines(train, val, V)
    return -u, -b


def summed(train, val, V):
    return _baselines(train, val, V, mean=np.sum)


def swapped_pairs(train, val, V):
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[1:], train[:-1]), 1.0)     # (next, before): the table transposed
    return _baselines(train, val, V, pairs=pairs)


def transposed_lookup(train, val, V):
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    before = np.concatenate([train[-1:], val[:-1]])
    return (count_baselines(train, val, V)[0],
            -np.mean(np.log(pairs[val, before] / pairs[before].sum(axis=1))))


def first_skipped(train, val, V):
    pairs = np.ones((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    return (count_baselines(train, val, V)[0],
            -np.mean(np.log(pairs[val[:-1], val[1:]] / pairs[val[:-1]].sum(axis=1))))


@pytest.mark.parametrize("check, fn, stage, hint", [
    (WINDOWS, targets_same, "returns (chars, tokens, targets)", "NEXT character"),
    (WINDOWS, unsorted_chars, "returns (chars, tokens, targets)", "sorted order"),
    (WINDOWS, float_ids, "returns (chars, tokens, targets)", "integers"),
    (WINDOWS, chars_as_object_array, "returns (chars, tokens, targets)", "one string"),
    (BASELINES, no_smoothing, "hand-checkable case", "add one"),
    (BASELINES, in_bits, "hand-checkable case", "natural logarithm"),
    (BASELINES, fancy_indexing, "hand-checkable case", "np.add.at"),
    (BASELINES, unigram_over_n, "hand-checkable case", "N + V"),
    (BASELINES, bigram_plus_one, "hand-checkable case", "n(b .) + V"),
    (BASELINES, sign_flipped, "hand-checkable case", "sign is flipped"),
    (BASELINES, summed, "hand-checkable case", "not their sum"),
    (BASELINES, unigram_on_val, "hand-checkable case", "training ids only"),
    (BASELINES, unigram_unsmoothed, "a character never seen in training", "add one"),
    (WINDOWS, stripped, "spaces and newlines at the ends of the text", "text.strip()"),
    (WINDOWS, ids_from_one, "returns (chars, tokens, targets)", "one too large"),
    (WINDOWS, code_points, "returns (chars, tokens, targets)", "code points"),
    (WINDOWS, reversed_ids, "returns (chars, tokens, targets)", "not their indices in chars"),
    (BASELINES, swapped_pairs, "hand-checkable case", "the wrong way round"),
    (BASELINES, transposed_lookup, "random ids", "the wrong way round"),
    (BASELINES, first_skipped, "hand-checkable case", "first held-out character counts too"),
])
def test_windows_and_baselines_reject(check, fn, stage, hint, capsys):
    assert_rejects(check, fn, capsys, stage, hint)


def test_stripping_only_the_end_is_named(capsys):
    """text.rstrip() keeps every window in place, but loses a newline found only at the end."""
    def rstripped(text, starts, T):
        return char_windows(text.rstrip(), starts, T)
    result = assert_rejects(WINDOWS, rstripped, capsys,
                            "spaces and newlines at the ends of the text", "text.strip()")
    assert "chars is" in result.message


@pytest.mark.parametrize("as_characters", [list, tuple, np.array])
def test_chars_one_by_one_pass(as_characters, capsys):
    """The sorted characters as a list, a tuple or an array of one-character strings: as good as the string."""
    def one_by_one(text, starts, T):
        chars, tokens, targets = char_windows(text, starts, T)
        return as_characters(list(chars)), tokens, targets
    result, out = WINDOWS(one_by_one), capsys.readouterr().out
    assert result.passed, out


def test_counted_on_val_is_named(capsys):
    result, out = BASELINES(counted_on_val), capsys.readouterr().out
    assert not result.passed and "training ids only" in result.hint, out


@pytest.mark.parametrize("fn, name", [(vocabulary_from_library, "from_text"),
                                      (encode_from_library, "encode")])
def test_vocabulary_is_a_library_call(fn, name, capsys):
    result, out = WINDOWS(fn), capsys.readouterr().out
    assert not result.passed and result.library == f"course_lib.text.Vocabulary.{name}", out


@pytest.mark.parametrize("fn, wrong, right", [(unigram_on_val, "unigram", "bigram"),
                                              (unigram_unsmoothed, "unigram", "bigram"),
                                              (fancy_indexing, "bigram", "unigram"),
                                              (bigram_plus_one, "bigram", "unigram")])
def test_baselines_name_the_wrong_number(fn, wrong, right, capsys):
    result, out = BASELINES(fn), capsys.readouterr().out
    assert not result.passed and f"your {wrong} is" in result.message, out
    assert f"your {right} is" not in result.message or f"your {right} is right" in result.message


def test_hand_checkable_case_is_shown(capsys):
    """Its inputs and expected losses are in the message, and they are what the text says."""
    result, out = BASELINES(sign_flipped), capsys.readouterr().out
    assert "train = [0, 1, 0, 1], val = [0, 1, 1], V = 2" in result.message, out
    assert "unigram 0.6931, bigram 0.5973" in result.message, out
    train, val, V, _ = checks_text._HAND
    # p(0) = p(1) = 3/6; p(0 | 1) = 2/3, p(1 | 0) = 3/4, p(1 | 1) = 1/3
    assert np.allclose(count_baselines(train, val, V), (np.log(2), np.log(6) / 3))
