"""The character GPT of notebook 12: a text as data, its training, sampling, and the shipped texts.

    corpus = read_text(shipped_text("kjv.txt"), seq_len=64)
    vocab = Vocabulary.from_text(corpus)
    train, val = split(vocab.encode(corpus))
    tokens, targets = random_windows(train, 32, 64, np.random.default_rng(0))
    generate(model, vocab, "And God said, ", 60, temperature=0.8)

data.py (the text, its vocabulary, windows, baselines, the validation loss), training.py (fit_text,
for `train --text`), sampling.py (sample, generate), shipped.py (data/'s texts), command.py (the
`train --text` and `sample` commands).
"""
from .data import (HELD_OUT, TextError, Vocabulary, baselines, fixed_windows, min_chars, random_windows,
                   read_text, split, validation_loss)
from .sampling import generate, sample
from .shipped import shipped_text
from .training import TextHistory, fit_text, text_config

__all__ = ["HELD_OUT", "TextError", "Vocabulary", "baselines", "fixed_windows", "min_chars", "random_windows",
           "read_text", "split", "validation_loss", "generate", "sample", "shipped_text", "TextHistory",
           "fit_text", "text_config"]
