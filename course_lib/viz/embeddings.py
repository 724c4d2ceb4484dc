"""Plots of notebook 02, embeddings and positions: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, cosine_similarity, heatmap, new_figure, style

__all__ = ['draw_sinusoid_pair', 'draw_position_similarity', 'position_similarity_pair']


def draw_sinusoid_pair(ax, i, d_model=64, seq_len=8, span=40):
    """Draw pair i of the sinusoidal table (columns 2i: sin, 2i+1: cos) over `span` positions,
    with dots at the positions 0..seq_len-1 a model of that length sees (for slider_plot)."""
    w = 1 / 10000.0 ** (2 * i / d_model)
    grid = np.linspace(0, span, 10 * span + 1)
    ax.plot(grid, np.sin(grid * w), color=PALETTE[0], label=f"column {2 * i}: sin")
    ax.plot(grid, np.cos(grid * w), color=PALETTE[1], linestyle="--",
            label=f"column {2 * i + 1}: cos")
    p = np.arange(seq_len)
    ax.plot(p, np.sin(p * w), "o", color=PALETTE[0])
    ax.plot(p, np.cos(p * w), "s", color=PALETTE[1])
    ax.plot([], [], "ko", label=f"positions 0-{seq_len - 1}")
    wavelength = 2 * np.pi / w
    text = f"{wavelength:,.1f}" if wavelength < 100 else f"{wavelength:,.0f}"
    ax.set(xlabel="position", ylabel="value", ylim=(-1.15, 1.75),
           title=f"pair i = {i}: wavelength {text} positions")
    ax.legend(loc="upper center", ncol=3, frameon=False, fontsize=8)
    ax.grid(alpha=0.3)


def draw_position_similarity(ax, n, table):
    """Cosine similarity between the rows of table[:, :n] (positions x positions), for slider_plot."""
    T = len(table)
    ticks = [str(p) if p % 4 == 0 else "" for p in range(T)]
    heatmap(cosine_similarity(np.asarray(table)[:, :n]), ticks, ticks,
            title=f"first {n} columns ({n // 2} pair{'s' if n > 2 else ''})",
            cbar_label="cosine similarity", ax=ax, xlabel="position q", ylabel="position p",
            vmin=-1, vmax=1)


def position_similarity_pair(tables, figsize=(10, 4)) -> Figure:
    """Cosine similarity between positions for each table of a dict title -> (T, C), side by side."""
    fig = new_figure(figsize)
    with style():
        axes = np.atleast_1d(fig.subplots(1, len(tables)))
    for ax, (name, table) in zip(axes, tables.items()):
        labels = list(range(len(table)))
        heatmap(cosine_similarity(table), labels, labels, title=name,
                cbar_label="cosine similarity", ax=ax, xlabel="position q",
                ylabel="position p", vmin=-1, vmax=1, annotate=False)
    return fig
