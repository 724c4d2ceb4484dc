"""Plots of notebook 07, stacking blocks and the output head: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import cosine_similarity, heatmap, style

__all__ = ["representation_similarity"]


def representation_similarity(fig, vectors, labels, title, mean_label=True) -> Figure:
    """Notebook 07: cosine similarity between the token vectors (T, C) of one sequence, on `fig`.

    Rows and columns are the positions (labelled by their tokens); the colour runs from -1
    (opposite) to 1 (same direction). mean_label: give the mean off-diagonal value in the title.
    """
    S = cosine_similarity(vectors)
    T = S.shape[0]
    if mean_label:
        off = S[~np.eye(T, dtype=bool)].mean()
        title = f"{title}\nmean off-diagonal cosine {off:.2f}"
    with style():
        ax = fig.add_subplot()
    heatmap(S, labels, labels, title, "cosine similarity", ax=ax, vmin=-1, vmax=1, cmap="RdBu_r",
            annotate=True, xlabel="position (token)", ylabel="position (token)")
    return fig
