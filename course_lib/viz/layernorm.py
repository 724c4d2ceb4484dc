"""Plots of notebook 05, residuals and LayerNorm: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, line_plot, style

__all__ = ["gradient_norms_by_depth", "layernorm_rows"]


def gradient_norms_by_depth(norms, title, ax=None, *, figsize=(6.5, 4)) -> Figure:
    """Notebook 05: gradient norm of each block's parameters against the block index, log y.

    norms: dict label -> array (L,) (block 0 first). Returns the Figure.
    """
    series = {k: np.asarray(v, dtype=float) for k, v in norms.items()}
    L = len(next(iter(series.values())))
    fig = line_plot(np.arange(L), series, title, "block index (0 = next to the embeddings)",
                    "gradient norm of the block's parameters", ax=ax, logy=True, figsize=figsize)
    ax = fig.axes[0] if ax is None else ax
    with style():
        for line in ax.get_lines():
            line.set_marker("o")
            line.set_markersize(3)
        ax.legend(frameon=False, fontsize=8)
    return fig


def layernorm_rows(ax, before, after, labels, title="one row per token"):
    """Notebook 05: the C values of each token's row before and after LayerNorm, as dots.

    before, after: (T, C); labels: T token labels. Each row is one token; its mean is marked.
    """
    before, after = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    T = before.shape[0]
    with style():
        for k, (arr, name, dy) in enumerate(((before, "before (x + Attn(x))", -0.17),
                                             (after, "after LayerNorm", 0.17))):
            for t in range(T):
                ax.plot(arr[t], np.full(arr.shape[1], t + dy), "o", markersize=2, alpha=0.6,
                        color=PALETTE[k], label=name if t == 0 else None)
                ax.plot([arr[t].mean()], [t + dy], "|", markersize=9, color="black")
        ax.set(yticks=range(T), yticklabels=labels, ylim=(T - 0.5, -0.5), title=title,
               xlabel="value of a feature (| marks the row's mean)", ylabel="token")
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(alpha=0.3, axis="x")
    return ax.figure
