"""Plots of notebook 07, stacking blocks and the output head: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import heatmap, new_figure, style

__all__ = ["cosine_similarity", "representation_similarity"]


def cosine_similarity(vectors):
    """Cosine similarity of every pair of rows of `vectors` (T, C) -> (T, T), in float64."""
    v = np.asarray(vectors, dtype=np.float64)
    unit = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)
    return unit @ unit.T


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
