"""The plots of notebook 11's last section: a learning-rate sweep and a run of the learner's
own loop beside fit's."""
import numpy as np
import pytest

from course_lib import viz


def test_lr_sweep_draws_every_rate():
    losses = {1e-3: np.linspace(3, 0.1, 40), 3e-2: np.full(40, np.log(10))}
    fig = viz.lr_sweep(losses, smooth=5)
    ax, = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["lr 0.001", "lr 0.03"]
    assert ax.get_yscale() == "log" and len(ax.lines) == 3            # two rates and ln 10
    np.testing.assert_allclose(ax.lines[1].get_ydata(), np.log(10))   # a flat line stays flat
    np.testing.assert_allclose(ax.lines[0].get_ydata()[4:], np.convolve(
        losses[1e-3], np.ones(5) / 5, mode="valid"))                  # a running mean of 5


def test_your_run_shows_the_share_clipped_above_each_epoch():
    history = {"loss": list(np.linspace(3, 0.01, 6)), "grad_norm": [4, 2, 0.5, 3, 0.1, 0.2]}
    fig = viz.your_run(history, reference=np.linspace(3, 0.01, 6), max_norm=1.0, per_epoch=3)
    loss, norm = fig.axes
    assert [t.get_text() for t in loss.get_legend().get_texts()] == ["fit (course_lib)",
                                                                     "your loop"]
    assert norm.lines[1].get_ydata()[0] == 1.0                       # the bound, drawn
    assert [t.get_text() for t in norm.texts] == ["67%\nclipped", "33%\nclipped"]
    with pytest.raises(ValueError):                                  # 6 steps are not epochs of 4
        viz.your_run(history, reference=np.ones(6), max_norm=1.0, per_epoch=4)
