"""Plots of notebook 12, a small GPT on real text."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, new_figure, style

__all__ = ["text_curves"]


def text_curves(steps, train_loss, val_loss, baselines, step_loss=None, figsize=(8, 3.8)) -> Figure:
    """Notebook 12: the loss in nats/char on both splits against the step, the count baselines
    (dict name -> nats/char) as horizontal lines, and, if given, the loss of every training
    batch (step_loss, one per step from step 1) in a light line behind."""
    fig = new_figure(figsize)
    with style():
        ax = fig.subplots()
        if step_loss is not None:
            ax.plot(np.arange(1, len(step_loss) + 1), step_loss, color=PALETTE[4], linewidth=0.5,
                    alpha=0.5, label="each training batch")
        ax.plot(steps, train_loss, color=PALETTE[0], marker="o", markersize=3,
                label="training text (fixed windows)")
        ax.plot(steps, val_loss, color=PALETTE[3], marker="o", markersize=3,
                label="held-out text (last 10%)")
        for (name, value), ls in zip(baselines.items(), (":", "--", "-.")):
            ax.axhline(value, color="gray", linestyle=ls, linewidth=1)
            ax.text(steps[-1], value, f"{name} {value:.2f}", ha="right", va="bottom", fontsize=8,
                    color="dimgray")
        ax.set(xlabel="training step", ylabel="cross-entropy (nats/char)",
               title="next-character loss",
               ylim=(0, max(max(baselines.values()), max(train_loss), max(val_loss)) + 0.3))
        ax.legend(frameon=False, fontsize=8, loc="upper right", bbox_to_anchor=(1, 0.92))
        ax.grid(alpha=0.3)
    return fig
