"""Plots of notebook 06, feed-forward and the block: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, line_plot, new_figure, style

__all__ = ["activation_curves", "preactivation_histogram"]


def activation_curves(h, curves, slopes, figsize=(9, 3.4)) -> Figure:
    """Notebook 06: activations (left) and their derivatives (right) against the pre-activation h.

    h: (K,) grid; curves, slopes: dict label -> (K,) values (same labels in both). Returns the Figure.
    """
    fig = new_figure(figsize)
    with style():
        ax1, ax2 = fig.subplots(1, 2)
    line_plot(h, curves, "Activations", "pre-activation h", "activation(h)", ax=ax1)
    line_plot(h, slopes, "Their derivatives", "pre-activation h", "d activation / dh", ax=ax2)
    with style():
        for ax in (ax1, ax2):
            ax.axhline(0, color="gray", linewidth=0.6)
            ax.axvline(0, color="gray", linewidth=0.6)
    return fig


def preactivation_histogram(ax, h, title, bins=np.linspace(-5, 5, 81)):
    """Notebook 06: histogram of FFN pre-activations h (any shape) on `ax`, the part h <= 0 (where
    ReLU passes no gradient) in its own colour, its share in the legend."""
    h = np.asarray(h, dtype=float).ravel()
    frac = float(np.mean(h <= 0))
    clipped = np.clip(h, bins[0], bins[-1])
    with style():
        ax.hist(clipped[h <= 0], bins=bins, color=PALETTE[3], alpha=0.85,
                label=f"h ≤ 0: {frac:.1%} (gradient 0)")
        ax.hist(clipped[h > 0], bins=bins, color=PALETTE[0], alpha=0.85,
                label=f"h > 0: {1 - frac:.1%}")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set(title=title, xlabel="pre-activation h (clipped to ±5)", ylabel="count")
        ax.legend(frameon=False, fontsize=8, loc="upper right")
        ax.grid(alpha=0.3)
    return ax
