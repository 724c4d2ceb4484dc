import numpy as np
import pytest

from course_lib import task


def test_encode_the_running_example():
    assert task.encode("Max(1,6,2)") == [15, 17, 3, 19, 8, 19, 4, 18]
    assert task.decode([15, 17, 3, 19, 8, 19, 4, 18]) == "Max(1,6,2)"
    assert task.answer("Max", (1, 6, 2)) == 6


def test_vocabulary_ids():
    assert len(task.VOCAB) == 20
    assert task.VOCAB[0] == "[PAD]" and task.VOCAB[1] == "[EOS]"
    assert [task.TOKEN_TO_ID[w] for w in ("0", "9", "First", "Second", "Last", "Max", "Min", "(", ")", ",")] == \
        [2, 11, 12, 13, 14, 15, 16, 17, 18, 19]


@pytest.mark.parametrize("op, digits, expected", [
    ("First", (3, 1, 2), 3), ("Second", (3, 1, 2), 1), ("Last", (3, 1, 2), 2),
    ("Max", (3, 9, 2), 9), ("Min", (3, 9, 2), 2), ("Max", (5, 5, 5), 5)])
def test_answers(op, digits, expected):
    assert task.answer(op, digits) == expected


def test_bad_text_and_ids():
    with pytest.raises(ValueError, match="unknown text"):
        task.encode("Mean(1,2,3)")
    with pytest.raises(ValueError, match="ids run from 0 to 19"):
        task.decode([3, 25])
    with pytest.raises(ValueError, match="unknown operation"):
        task.answer("Sum", (1, 2, 3))


def test_all_problems_are_distinct():
    problems = task.all_problems()
    assert len(problems) == len(set(problems)) == 5000


def test_dataset_scores_only_the_last_position():
    tokens, targets = task.make_dataset([("Max", (1, 6, 2))])
    assert tokens.tolist() == [[15, 17, 3, 19, 8, 19, 4, 18]]
    assert targets.tolist() == [[-100] * 7 + [8]]


def test_splits_are_disjoint_seeded_and_consistent():
    a, b = task.splits(seed=3), task.splits(seed=3)
    for name in ("train", "val", "test"):
        assert np.array_equal(a[name][0], b[name][0]) and np.array_equal(a[name][1], b[name][1])
    rows = {name: {tuple(r) for r in a[name][0]} for name in a}
    assert len(rows["train"]) == 4000 and len(rows["val"]) == 500 and len(rows["test"]) == 500
    assert not rows["train"] & rows["val"] and not rows["train"] & rows["test"] and not rows["val"] & rows["test"]
    for tokens, targets in a.values():
        for row, target in zip(tokens[:50], targets[:50]):
            text = task.decode(row)
            op, args = text[:-1].split("(")
            assert task.TOKEN_TO_ID[str(task.answer(op, tuple(int(d) for d in args.split(","))))] == target[-1]
    c = task.splits(seed=4)
    assert not np.array_equal(a["train"][0], c["train"][0])


def test_split_sizes_checked():
    with pytest.raises(ValueError, match="exceeds the 5000 distinct problems"):
        task.splits(n_train=4900, n_val=100, n_test=100)
