"""The plots of notebook 11's last section: a learning-rate sweep and a run of the learner's
own loop beside fit's."""
import numpy as np
import pytest

from course_lib import viz


def test_lr_sweep_shows_every_rate_and_its_accuracy():
    losses = {1e-3: np.linspace(3, 0.1, 40), 3e-2: np.full(40, np.log(10))}
    fig = viz.lr_sweep(losses, {1e-3: 0.97, 3e-2: 0.1}, smooth=5)
    left, right = fig.axes
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["lr 0.001", "lr 0.03"]
    assert left.get_yscale() == "log" and right.get_xscale() == "log"
    np.testing.assert_allclose(left.lines[1].get_ydata(), np.log(10))   # a flat line stays flat
    x, y = right.lines[-1].get_data()
    assert list(x) == [1e-3, 3e-2] and list(y) == [0.97, 0.1]


def test_your_run_counts_the_clipped_steps_per_epoch():
    history = {"loss": list(np.linspace(3, 0.01, 6)), "grad_norm": [4, 2, 0.5, 3, 0.1, 0.2]}
    fig = viz.your_run(history, reference=np.linspace(3, 0.01, 6), max_norm=1.0, per_epoch=3)
    loss, norm, bars = fig.axes
    assert [t.get_text() for t in loss.get_legend().get_texts()] == ["fit (course_lib)",
                                                                     "your loop"]
    assert norm.lines[1].get_ydata()[0] == 1.0                       # the bound, drawn
    assert [p.get_height() for p in bars.patches] == pytest.approx([2 / 3, 1 / 3])
    with pytest.raises(ValueError):                                  # 6 steps are not epochs of 4
        viz.your_run(history, reference=np.ones(6), max_norm=1.0, per_epoch=4)
