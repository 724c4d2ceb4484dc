"""The operations task: `Max(1,6,2)` -> `6`.

Vocabulary of 20 ids, a tokenizer, the answer rule, all 5,000 problems and
seeded, disjoint train / validation / test splits.
"""
import re
from itertools import product

import numpy as np

from .config import is_integer
from .kernels.numpy_ref import IGNORE  # target id that is not scored

VOCAB = ["[PAD]", "[EOS]", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
         "First", "Second", "Last", "Max", "Min", "(", ")", ","]
TOKEN_TO_ID = {tok: i for i, tok in enumerate(VOCAB)}
OPERATIONS = ("First", "Second", "Last", "Max", "Min")
DIGITS = tuple(range(10))
SEQ_LEN = 8          # Op ( a , b , c )
N_PROBLEMS = len(OPERATIONS) * 10 ** 3

_PIECE = re.compile(r"\[PAD\]|\[EOS\]|First|Second|Last|Max|Min|[0-9(),]")


def encode(text):
    """'Max(1,6,2)' -> [15, 17, 3, 19, 8, 19, 4, 18]. Spaces are ignored."""
    if not isinstance(text, str):
        raise TypeError(f"encode expects a string such as 'Max(1,6,2)', got {type(text).__name__}")
    compact = text.replace(" ", "")
    pieces = _PIECE.findall(compact)
    if "".join(pieces) != compact:
        pos = 0
        for p in pieces:
            if compact.startswith(p, pos):
                pos += len(p)
            else:
                break
        raise ValueError(f"cannot encode {text!r}: unknown text at {compact[pos:]!r}; "
                         f"known tokens: {' '.join(VOCAB)}")
    return [TOKEN_TO_ID[p] for p in pieces]


def decode(ids):
    """[15, 17, 3, 19, 8, 19, 4, 18] -> 'Max(1,6,2)'."""
    out = []
    for i in np.asarray(ids).ravel().tolist():
        if not (isinstance(i, int) and 0 <= i < len(VOCAB)):
            raise ValueError(f"cannot decode id {i!r}: ids run from 0 to {len(VOCAB) - 1}")
        out.append(VOCAB[i])
    return "".join(out)


def answer(op, digits):
    """The answer digit of operation `op` ('Max', ...) over three digits."""
    if op not in OPERATIONS:
        raise ValueError(f"unknown operation {op!r}; allowed: {', '.join(OPERATIONS)}")
    a, b, c = digits
    return {"First": a, "Second": b, "Last": c, "Max": max(a, b, c), "Min": min(a, b, c)}[op]


def problem_text(op, digits):
    return f"{op}({','.join(str(d) for d in digits)})"


def all_problems():
    """All 5,000 problems as a list of (op, (a, b, c)) in a fixed order."""
    return [(op, ds) for op in OPERATIONS for ds in product(DIGITS, repeat=3)]


def make_dataset(problems):
    """Problems -> (tokens (N, 8) int64, targets (N, 8) int64).

    The answer's token id is the target at the last position; -100 elsewhere.
    """
    problems = list(problems)
    tokens = np.empty((len(problems), SEQ_LEN), dtype=np.int64)
    targets = np.full((len(problems), SEQ_LEN), IGNORE, dtype=np.int64)
    for n, (op, ds) in enumerate(problems):
        tokens[n] = encode(problem_text(op, ds))
        targets[n, -1] = TOKEN_TO_ID[str(answer(op, ds))]
    return tokens, targets


def operation_of(tokens):
    """Index into OPERATIONS of each row of tokens (N, 8) -> (N,)."""
    return np.asarray(tokens)[:, 0] - TOKEN_TO_ID[OPERATIONS[0]]


def is_task_data(tokens, targets):
    """True when the rows look like make_dataset's: length 8, one scored position each, an operation first."""
    first = tokens[:, 0]
    return (tokens.shape[1] == SEQ_LEN and np.all((targets != IGNORE).sum(1) == 1)
            and np.all((first >= TOKEN_TO_ID[OPERATIONS[0]]) & (first <= TOKEN_TO_ID[OPERATIONS[-1]])))


def operation_groups(tokens, targets):
    """{operation: boolean mask of its rows} for the operations present, in OPERATIONS order;
    {} when the rows are not the task's problems. What train.evaluate's acc_per_op is split by."""
    if not is_task_data(tokens, targets):
        return {}
    ops = operation_of(tokens)
    return {op: ops == i for i, op in enumerate(OPERATIONS) if np.any(ops == i)}


def splits(seed=0, n_train=4000, n_val=500, n_test=500):
    """Disjoint train / validation / test sets of distinct problems.

    Returns a dict name -> (tokens, targets). The same seed gives the same bytes.
    """
    sizes = (n_train, n_val, n_test)
    if not all(is_integer(n, low=0) for n in sizes):
        raise ValueError(f"split sizes must be non-negative integers, got {sizes}")
    if sum(sizes) > N_PROBLEMS:
        raise ValueError(f"n_train + n_val + n_test = {sum(sizes)} exceeds the {N_PROBLEMS} distinct problems")
    problems = all_problems()
    order = np.random.default_rng(seed).permutation(N_PROBLEMS)
    bounds = np.cumsum((0,) + sizes)
    return {name: make_dataset(problems[i] for i in order[lo:hi])
            for name, lo, hi in zip(("train", "val", "test"), bounds[:-1], bounds[1:])}
