"""Plots of notebook 03, single-head attention: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, heatmap, line_plot, new_figure, style

__all__ = ['score_scaling', 'attention_with_entropy']


def score_scaling(Ds, stats, n_keys=8, figsize=(9, 3.5)) -> Figure:
    """Notebook 03: variance of q·k against head size D, and the softmax's largest weight.

    stats: dict with lists over Ds: "var unscaled", "var scaled", "max weight unscaled",
    "max weight scaled". Returns the Figure.
    """
    fig = new_figure(figsize)
    with style():
        ax1, ax2 = fig.subplots(1, 2)
    line_plot(Ds, {"q·k": stats["var unscaled"], "q·k / √D": stats["var scaled"]},
              "Variance of a dot product", "head size D", "variance", ax=ax1, logx=True, logy=True)
    line_plot(Ds, {"unscaled": stats["max weight unscaled"],
                   "scaled by 1/√D": stats["max weight scaled"]},
              f"Softmax over {n_keys} keys", "head size D", "mean largest weight", ax=ax2, logx=True)
    with style():
        ax2.axhline(1 / n_keys, color="gray", linewidth=0.8, linestyle=":")
        ax2.text(Ds[0], 1 / n_keys + 0.02, f"uniform: 1/{n_keys}", color="gray", fontsize=8)
    return fig


def attention_with_entropy(fig, A, labels, title="attention weights"):
    """Notebook 03: an attention map (T, T) beside the entropy of each row, on `fig`.

    A row's entropy -sum_s A_ts ln A_ts is ln T for a uniform row and 0 for a one-hot row.
    """
    A = np.asarray(A, dtype=float)
    T = A.shape[0]
    entropy = -np.sum(A * np.log(np.maximum(A, 1e-300)), axis=1)
    with style():
        ax1, ax2 = fig.subplots(1, 2, width_ratios=[1.5, 1])
    heatmap(A, labels, labels, title, "weight", ax=ax1, vmin=0, vmax=1)
    with style():
        ax2.barh(range(T), entropy, color=PALETTE[0])
        ax2.axvline(np.log(T), color=PALETTE[3], linestyle="--", label=f"uniform: ln {T}")
        ax2.set(yticks=range(T), yticklabels=labels, ylim=(T - 0.5, -0.5), xlim=(0, 1.1 * np.log(T)),
                title="entropy of each row", xlabel="entropy (nats)", ylabel="query position")
        ax2.legend(loc="lower right", fontsize=8)
    return fig
