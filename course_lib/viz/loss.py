"""Plots of notebook 08, softmax and cross-entropy: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, new_figure, style

__all__ = ["temperature_bars", "loss_vs_probability"]


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def temperature_bars(ax, logits, tau, labels, target):
    """Notebook 08: the probabilities softmax(logits / tau) of one row (V,) as bars on `ax`.

    The target's bar is drawn in another colour; the dotted line is the uniform 1/V; the
    title gives the target's probability and the loss -ln p_target at this temperature.
    """
    z = np.asarray(logits, dtype=np.float64)
    p = _softmax(z / tau)
    V = len(z)
    colours = [PALETTE[3] if v == target else PALETTE[0] for v in range(V)]
    with style():
        ax.bar(range(V), p, color=colours)
        ax.axhline(1 / V, color="gray", linestyle=":", linewidth=1)
        ax.text(V - 0.5, 1 / V + 0.015, f"uniform 1/{V}", color="gray", fontsize=8, ha="right")
        ax.set(xticks=range(V), ylim=(0, 1.02), xlim=(-0.6, V - 0.4), xlabel="token",
               ylabel="probability",
               title=f"p({labels[target]}) = {p[target]:.3f}   loss = -ln p = "
                     f"{-np.log(p[target]):.3f}   largest p = {p.max():.3f}")
        ax.set_xticklabels(labels, rotation=60, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    return ax


def loss_vs_probability(marks=None, figsize=(9, 3.4)) -> Figure:
    """Notebook 08: the loss -ln p and its gradient along the target's logit, p - 1, against the
    probability p of the right answer. marks: dict label -> p, drawn as points on both curves."""
    p = np.linspace(1e-3, 1.0, 500)
    fig = new_figure(figsize)
    with style():
        ax1, ax2 = fig.subplots(1, 2)
        ax1.plot(p, -np.log(p), color=PALETTE[0])
        ax1.set(xlabel="p of the right answer", ylabel="loss  -ln p", ylim=(0, 7),
                title="Cross-entropy of one row")
        ax2.plot(p, p - 1, color=PALETTE[0])
        ax2.axhline(0, color="gray", linewidth=0.8)
        ax2.set(xlabel="p of the right answer", ylabel="d loss / d z_y  =  p - 1", ylim=(-1.05, 0.05),
                title="Gradient of the right answer's logit")
        for k, (label, q) in enumerate((marks or {}).items()):
            c = PALETTE[(k + 1) % len(PALETTE)]
            ax1.plot([q], [-np.log(q)], "o", color=c, label=f"{label}: p = {q:.3f}, loss {-np.log(q):.3f}")
            ax2.plot([q], [q - 1], "o", color=c, label=f"{label}: p - 1 = {q - 1:.3f}")
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
            if marks:
                ax.legend(frameon=False, fontsize=8)
    return fig
