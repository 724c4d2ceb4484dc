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


def loss_vs_probability(marks=None, figsize=None, panels=("loss", "slope")) -> Figure:
    """Notebook 08: the loss -ln p and its gradient along the target's logit, p - 1, against the
    probability p of the right answer. marks: dict label -> p, drawn as points on every curve.
    panels: which panels to draw, in order, from "loss" (-ln p) and "slope" (p - 1); the notebook
    shows the loss alone before Exercise 8.2 derives the slope, and both after it."""
    panels = tuple(panels)
    if not panels or any(k not in ("loss", "slope") for k in panels):
        raise ValueError(f"panels must be a non-empty subset of ('loss', 'slope'), got {panels!r}")
    p = np.linspace(1e-3, 1.0, 500)
    fig = new_figure(figsize or (4.6 * len(panels), 3.4))
    with style():
        axes = np.atleast_1d(fig.subplots(1, len(panels)))
        for ax, kind in zip(axes, panels):
            if kind == "loss":
                ax.plot(p, -np.log(p), color=PALETTE[0])
                ax.set(xlabel="p of the right answer", ylabel="loss  -ln p", ylim=(0, 7),
                       title="Cross-entropy of one row")
            else:
                ax.plot(p, p - 1, color=PALETTE[0])
                ax.axhline(0, color="gray", linewidth=0.8)
                ax.set(xlabel="p of the right answer", ylabel="d loss / d z_y  =  p - 1",
                       ylim=(-1.05, 0.05), title="Gradient of the right answer's logit")
            for k, (label, q) in enumerate((marks or {}).items()):
                c = PALETTE[(k + 1) % len(PALETTE)]
                if kind == "loss":
                    ax.plot([q], [-np.log(q)], "o", color=c,
                            label=f"{label}: p = {q:.3f}, loss {-np.log(q):.3f}")
                else:
                    ax.plot([q], [q - 1], "o", color=c, label=f"{label}: p - 1 = {q - 1:.3f}")
            ax.grid(alpha=0.3)
            if marks:
                ax.legend(frameon=False, fontsize=8)
    return fig
