"""course_lib.text (data, sampling, training): the vocabulary, reading a file, the split, windows,
the count baselines (against a hand computation), sample() and generate()."""
import math

import numpy as np
import pytest

import course_lib as cl
from course_lib import text
from course_lib.text import sampling, training as text_train


# ----- vocabulary ----------------------------------------------------------
def test_vocabulary_is_the_sorted_characters_and_round_trips():
    vocab = text.Vocabulary.from_text("héllo, world\n")
    assert vocab.chars == "\n ,dhlorwé" and len(vocab) == 10
    ids = vocab.encode("world, hé")
    assert ids.dtype == np.int64 and ids.tolist() == [8, 6, 7, 5, 3, 2, 1, 4, 9]
    assert vocab.decode(ids) == "world, hé"
    assert vocab.decode(vocab.encode("")) == ""


def test_unknown_characters_and_ids_are_named():
    vocab = text.Vocabulary.from_text("abc")
    with pytest.raises(text.TextError, match=r"the prompt has the character 'é' \(U\+00E9\) at position 2, "
                                             r"which the model's vocabulary of 3 characters lacks"):
        vocab.encode("abé", what="the prompt")
    with pytest.raises(ValueError, match=r"ids must be in 0..2"):
        vocab.decode([0, 3])
    for bad in ("", "aa"):
        with pytest.raises(ValueError, match="distinct characters"):
            text.Vocabulary(bad)


# ----- reading a file ------------------------------------------------------
def test_read_text_accepts_utf8_and_drops_a_byte_order_mark(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeff".encode() + ("Zoë sang.\n" * 200).encode())
    assert text.read_text(path, seq_len=16) == "Zoë sang.\n" * 200


@pytest.mark.parametrize("content, message", [
    (b"\x7fELF\x02\x01\x01\x00" + b"a" * 5000, "is not a text file: it holds a NUL byte at offset 7"),
    (b"abc \xff\xfe" + b"a" * 5000, r"is not UTF-8 text: byte 0xff at offset 4"),
    (b"a" * 169, r"is too short: 169 characters; a context of 16 characters needs at least 170 \(10%"),
])
def test_read_text_refuses_binary_latin1_and_short_files_in_one_line(tmp_path, content, message):
    path = tmp_path / "t.bin"
    path.write_bytes(content)
    with pytest.raises(text.TextError, match=message) as e:
        text.read_text(path, seq_len=16)
    assert "\n" not in str(e.value)
    path.write_bytes(b"a" * 170)
    assert len(text.read_text(path, seq_len=16)) == 170      # the shortest accepted: 17 held out


def test_read_text_missing_file(tmp_path):
    with pytest.raises(text.TextError, match="cannot read .*No such file"):
        text.read_text(tmp_path / "none.txt", seq_len=8)


# ----- split and windows ---------------------------------------------------
def test_split_holds_out_the_last_tenth_in_order():
    ids = np.arange(1000)
    train, val = text.split(ids)
    assert len(val) == 100 and train.tolist() == list(range(900)) and val.tolist() == list(range(900, 1000))


def test_random_windows_targets_are_the_next_characters():
    ids = np.arange(500) * 7 % 101                  # next(i) is known from i's position only
    tokens, targets = text.random_windows(ids, 16, 12, np.random.default_rng(0))
    assert tokens.shape == targets.shape == (16, 12)
    starts = [int(np.flatnonzero(ids == row[0])[0]) for row in tokens]   # ids[:101] are distinct
    for s, row, tgt in zip(starts, tokens, targets):
        assert row.tolist() == ids[s:s + 12].tolist() and tgt.tolist() == ids[s + 1:s + 13].tolist()
    assert len(set(starts)) > 1
    a = text.random_windows(ids, 4, 12, np.random.default_rng(3))
    b = text.random_windows(ids, 4, 12, np.random.default_rng(3))
    np.testing.assert_array_equal(a[0], b[0])


def test_random_windows_reach_the_last_character():
    ids = np.arange(10)
    _, targets = text.random_windows(ids, 200, 9, np.random.default_rng(0))
    assert targets.max() == 9 and targets.shape == (200, 9)


def test_fixed_windows_tile_the_text_without_overlap():
    ids = np.arange(35)
    tokens, targets = text.fixed_windows(ids, 8)
    assert tokens.tolist() == [list(range(s, s + 8)) for s in (0, 8, 16, 24)]
    np.testing.assert_array_equal(targets, tokens + 1)
    some, _ = text.fixed_windows(np.arange(801), 8, n_windows=3)
    assert some[:, 0].tolist() == [0, 400, 792]      # windows 0, 50 and 99 of 100
    with pytest.raises(ValueError, match="no window"):
        text.fixed_windows(np.arange(8), 8)


# ----- baselines -----------------------------------------------------------
def test_baselines_match_a_hand_computation():
    vocab = text.Vocabulary("ab")
    train, val = vocab.encode("aab"), vocab.encode("ba")
    # unigram with add-one: n(a)=2, n(b)=1, N=3, V=2 -> p(a)=3/5, p(b)=2/5
    unigram = -(math.log(2 / 5) + math.log(3 / 5)) / 2
    # pairs in train: aa, ab; with add-one: p(.|a) = (1+1, 1+1)/4, p(.|b) = (0+1, 0+1)/2
    # val after train's last 'b': b|b = 1/2, then a|b = 1/2
    bigram = -(math.log(1 / 2) + math.log(1 / 2)) / 2
    got = text.baselines(train, val, 2)
    assert got["uniform"] == pytest.approx(math.log(2))
    assert got["unigram"] == pytest.approx(unigram) and got["bigram"] == pytest.approx(bigram)
    train, val = vocab.encode("abababab"), vocab.encode("ab")      # a pair seen often is cheap
    assert text.baselines(train, val, 2)["bigram"] == pytest.approx(-(math.log(4 / 5) + math.log(5 / 6)) / 2)


def test_a_pair_never_seen_has_a_finite_bigram_loss():
    vocab = text.Vocabulary("abc")
    base = text.baselines(vocab.encode("ababab"), vocab.encode("cc"), 3)
    assert all(math.isfinite(v) for v in base.values()) and base["bigram"] > base["uniform"]


def test_validation_loss_is_deterministic_and_near_uniform_for_a_tiny_init():
    cfg = text_train.text_config(7, seq_len=8, d_model=16, n_heads=2, n_layers=1)
    model = cl.Transformer(cfg, seed=0)
    windows = text.fixed_windows(np.arange(100) % 7, 8)
    loss = text.validation_loss(model, windows)
    assert loss == text.validation_loss(model, windows)
    assert abs(loss - math.log(7)) < 1.0


# ----- sample --------------------------------------------------------------
LOGITS = np.array([1.0, 3.0, -2.0, 2.5, 0.0])


def test_temperature_zero_and_top_k_one_give_the_argmax():
    rng = np.random.default_rng(0)
    assert {sampling.sample(LOGITS, 0, None, rng) for _ in range(20)} == {1}
    assert {sampling.sample(LOGITS, 5.0, 1, rng) for _ in range(20)} == {1}
    assert {sampling.sample(LOGITS, 1e-4, None, rng) for _ in range(50)} == {1}     # T -> 0 tends there


def test_top_k_keeps_only_the_k_largest():
    rng = np.random.default_rng(0)
    drawn = [sampling.sample(LOGITS, 10.0, 2, rng) for _ in range(400)]    # hot: all kept ones appear
    assert set(drawn) == {1, 3}
    drawn = [sampling.sample(LOGITS, 10.0, 3, rng) for _ in range(400)]
    assert set(drawn) == {0, 1, 3}


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.5, None), (2.0, None), (1.0, 3)])
def test_frequencies_match_softmax_of_logits_over_temperature(temperature, top_k):
    """A chi-square test with a fixed seed: 20,000 draws, 4 or 2 degrees of freedom; the 0.1%
    critical value (18.5 for 4, 13.8 for 2) fails a wrong distribution far more often than not."""
    z = LOGITS / temperature
    if top_k is not None:
        z = np.where(LOGITS >= np.sort(LOGITS)[-top_k], z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    rng, n = np.random.default_rng(1), 20_000
    counts = np.bincount([sampling.sample(LOGITS, temperature, top_k, rng) for _ in range(n)], minlength=5)
    kept = p > 0
    assert np.all(counts[~kept] == 0)
    chi2 = np.sum((counts[kept] - n * p[kept]) ** 2 / (n * p[kept]))
    assert chi2 < {4: 18.5, 2: 13.8}[kept.sum() - 1], (counts, n * p)


def test_the_chi_square_test_can_fail():
    """The same test catches a temperature applied the wrong way round (logits * T)."""
    z = LOGITS * 2.0                                     # what T=2 would give if applied as a product
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    rng, n = np.random.default_rng(1), 20_000
    counts = np.bincount([sampling.sample(LOGITS, 2.0, None, rng) for _ in range(n)], minlength=5)
    assert np.sum((counts - n * p) ** 2 / (n * p)) > 18.5


@pytest.mark.parametrize("kwargs, message", [
    ({"temperature": -1.0}, "temperature must be a finite number >= 0"),
    ({"temperature": float("nan")}, "temperature must be a finite number >= 0"),
    ({"temperature": True}, "temperature must be a finite number >= 0"),
    ({"top_k": 0}, r"top_k must be None \(all tokens\) or an integer in 1..5"),
    ({"top_k": 6}, r"top_k must be None \(all tokens\) or an integer in 1..5"),
    ({"top_k": 2.0}, r"top_k must be None"),
    ({"logits": np.ones((2, 5))}, r"logits must be a 1-D array"),
    ({"logits": np.array([0.0, np.nan])}, r"logits must be a 1-D array of finite numbers"),
])
def test_sample_refuses_bad_arguments(kwargs, message):
    args = {"logits": LOGITS, "temperature": 1.0, "top_k": None, "rng": np.random.default_rng(0), **kwargs}
    with pytest.raises(ValueError, match=message):
        sampling.sample(**args)


# ----- generate ------------------------------------------------------------
def test_generate_feeds_the_last_seq_len_characters_and_is_seeded():
    vocab = text.Vocabulary("abcd")
    model = cl.Transformer(text_train.text_config(4, seq_len=4, d_model=8, n_heads=2, n_layers=1), seed=0)
    seen = []
    forward = model.forward
    model.forward = lambda tokens: (seen.append(tokens.copy()), forward(tokens))[1]
    out = sampling.generate(model, vocab, "abcab", 6, temperature=1.0, seed=3)
    assert len(out) == 6 and set(out) <= set("abcd")
    assert [t.shape for t in seen] == [(1, 4)] * 6
    assert vocab.decode(seen[0][0]) == "bcab" and vocab.decode(seen[1][0]) == "cab" + out[0]
    assert sampling.generate(model, vocab, "abcab", 6, temperature=1.0, seed=3) == out
    greedy = sampling.generate(model, vocab, "a", 5, temperature=0)
    assert greedy == sampling.generate(model, vocab, "a", 5, temperature=0, seed=99)
    with pytest.raises(text.TextError, match="the prompt has the character 'e'"):
        sampling.generate(model, vocab, "abe", 3)
    with pytest.raises(ValueError, match="the prompt is empty"):
        sampling.generate(model, vocab, "", 3)
