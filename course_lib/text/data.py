"""Real text for a character-level model: the vocabulary, reading a file, the held-out split,
windows as batches, the count baselines and a model's validation loss, all in nats per character.

    text = read_text("data/kjv.txt", seq_len=64)
    vocab = Vocabulary.from_text(text)
    train, val = split(vocab.encode(text))           # the last 10% of the characters held out
    tokens, targets = random_windows(train, 32, 64, np.random.default_rng(0))
"""
import math

import numpy as np

from .._words import count
from ..train import evaluate

HELD_OUT = 0.1      # the fraction of the characters, at the end of the text, kept for validation


class TextError(ValueError):
    """A file or a string the text model cannot use; the message says why, in one line."""


def _show(char):
    """A character as an error message can show it: 'é' (U+00E9)."""
    return f"{char!r} (U+{ord(char):04X})"


class Vocabulary:
    """The distinct characters of a text, sorted, id = position: encode(str) -> ids, decode(ids) -> str."""

    def __init__(self, chars):
        chars = "".join(chars)
        if not chars or len(set(chars)) != len(chars):
            raise ValueError(f"a vocabulary needs distinct characters, at least one, got {chars!r}")
        self.chars = chars
        self._ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text):
        return cls(sorted(set(text)))

    def __len__(self):
        return len(self.chars)

    def __repr__(self):
        return f"Vocabulary({count(len(self), 'character')}: {self.chars!r})"

    def encode(self, text, what="the text"):
        """str (N characters) -> int64 ids (N,). TextError naming the first character not in the vocabulary."""
        try:
            return np.array([self._ids[c] for c in text], dtype=np.int64)
        except KeyError as e:
            char = e.args[0]
            raise TextError(f"{what} has the character {_show(char)} at position {text.index(char)}, which "
                            f"the model's vocabulary of {count(len(self), 'character')} lacks") from None

    def decode(self, ids):
        """ids (N,) in 0..V-1 -> str of N characters."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            raise ValueError(f"ids must be in 0..{len(self) - 1}, got {ids.min()}..{ids.max()}")
        return "".join(self.chars[i] for i in ids)


def min_chars(seq_len, held_out=HELD_OUT):
    """The shortest text with a window of seq_len + 1 characters (inputs and their next characters)
    in its held-out part, and more than that before it for training."""
    return math.ceil((seq_len + 1) / held_out)


def read_text(path, seq_len):
    """The text of a UTF-8 file -> str. TextError, in one line, for a binary file, one that is not
    UTF-8, or one too short for windows of seq_len characters in both parts of the split."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TextError(f"cannot read {path!r}: {e.strerror or e}") from None
    if b"\x00" in data:     # UTF-8 text never holds a NUL byte; binary files nearly always do
        raise TextError(f"{path!r} is not a text file: it holds a NUL byte at offset {data.index(0)}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TextError(f"{path!r} is not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} "
                        f"is not valid UTF-8 (convert it first, e.g. iconv -t UTF-8)") from None
    text = text.removeprefix("\ufeff")      # a byte-order mark is not part of the text
    need = min_chars(seq_len)
    if len(text) < need:
        raise TextError(f"{path!r} is too short: {count(len(text), 'character', fmt=',')}; a context of "
                        f"{count(seq_len, 'character')} needs at least {need:,} "
                        f"({HELD_OUT:.0%} of them held out for validation)")
    return text


def split(ids, held_out=HELD_OUT):
    """ids (N,) -> (train, val): the first 90% and the last 10% of the characters, in order."""
    n_val = int(round(len(ids) * held_out))
    return ids[:len(ids) - n_val], ids[len(ids) - n_val:]


def random_windows(ids, batch_size, seq_len, rng):
    """batch_size windows at random starts: tokens (B, T) = ids[s:s+T], targets (B, T) = ids[s+1:s+T+1],
    the next character at every position (the causal mask keeps each position from seeing it)."""
    starts = rng.integers(0, len(ids) - seq_len, size=batch_size)
    rows = starts[:, None] + np.arange(seq_len + 1)
    windows = ids[rows]
    return windows[:, :-1], windows[:, 1:]


def fixed_windows(ids, seq_len, n_windows=None):
    """Deterministic windows for evaluation: (tokens (W, T), targets (W, T)). All non-overlapping
    windows, or n_windows of them spread evenly over the text."""
    total = (len(ids) - 1) // seq_len
    if total < 1:
        raise ValueError(f"{count(len(ids), 'character')} {'holds' if len(ids) == 1 else 'hold'} no window "
                         f"of {seq_len} + 1")
    which = np.arange(total) if n_windows is None or n_windows >= total else \
        np.linspace(0, total - 1, n_windows).round().astype(np.int64)
    rows = (which * seq_len)[:, None] + np.arange(seq_len + 1)
    windows = ids[rows]
    return windows[:, :-1], windows[:, 1:]


def baselines(train, val, vocab_size):
    """Cross-entropy in nats/char on `val` of three models counted on `train`, with add-one (Laplace)
    smoothing, so that a character or pair never seen in training still has a finite loss:

    uniform   ln V
    unigram   p(c) = (n(c) + 1) / (N + V)
    bigram    p(c | b) = (n(b c) + 1) / (n(b .) + V), for each character of val after its predecessor
              (the first one's predecessor is the last training character).
    -> dict uniform, unigram, bigram.
    """
    V = vocab_size
    unigram = np.bincount(train, minlength=V) + 1.0
    log_unigram = np.log(unigram / unigram.sum())
    pairs = np.zeros((V, V))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    pairs += 1.0
    log_bigram = np.log(pairs / pairs.sum(axis=1, keepdims=True))
    before = np.concatenate([train[-1:], val[:-1]])
    return {"uniform": math.log(V), "unigram": float(-log_unigram[val].mean()),
            "bigram": float(-log_bigram[before, val].mean())}


def validation_loss(model, windows, batch_size=64):
    """Mean cross-entropy (nats/char, float64 sums) of `model` over every position of `windows`
    (tokens, targets), e.g. fixed_windows(val, seq_len): the same number for the same model."""
    return evaluate(model, *windows, batch_size=batch_size, groups={})["loss"]
