"""Plots of notebook 04, multi-head attention and masks: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import new_figure, style

__all__ = ["attention_heads"]


def attention_heads(att, labels, title="attention weights per head", fig=None,
                    figsize=(12, 3.4), head_names=None) -> Figure:
    """Notebook 04: the H attention maps (H, T, T) of one sequence side by side, one colour
    scale from 0 to 1 and one colour bar. Rows are queries, columns keys.

    Draws on `fig` if given (as in a widget's draw function), else on a new Figure.
    """
    att = np.asarray(att, dtype=float)
    if att.ndim != 3 or att.shape[1] != att.shape[2]:
        raise ValueError(f"attention_heads needs weights of shape (H, T, T), got {att.shape}")
    H, T, _ = att.shape
    if len(labels) != T:
        raise ValueError(f"{len(labels)} labels for T = {T} positions")
    names = head_names or [f"head {h}" for h in range(H)]
    fig = new_figure(figsize) if fig is None else fig
    with style():
        axes = np.atleast_1d(fig.subplots(1, H, sharey=True))
        for h, ax in enumerate(axes):
            im = ax.imshow(att[h], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks(range(T), labels, fontsize=8)
            ax.set_yticks(range(T), labels, fontsize=8)
            ax.set_title(names[h])
            ax.set_xlabel("key")
            if h == 0:
                ax.set_ylabel("query")
        cbar = fig.colorbar(im, ax=list(axes), shrink=0.9)
        cbar.set_label("attention weight")
        fig.suptitle(title)
    return fig
