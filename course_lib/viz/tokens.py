"""Plots of notebook 01, tokens and the task: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import LINESTYLES, PALETTE, figure_and_axes, new_figure, style
from .widgets import WidgetPlot, slider_plot

__all__ = ['answer_digits_plot', 'step_size_plot', 'secant_slider', 'per_element_errors']


def answer_digits_plot(operations, share_train, share_all, guess, examples, *,
                       figsize=(5.6, 3.3), dpi=90) -> WidgetPlot:
    """A slider over the operations: the answer digits of each, and its best constant guess.

    share_train, share_all: (n_ops, 10) fractions of problems per answer digit (train split,
    all problems); guess: (n_ops,) the best constant guess of each operation (highlighted);
    examples: dict operation -> a few lines of text drawn in the corner.
    """
    share_train, share_all = np.asarray(share_train), np.asarray(share_all)
    top = max(float(share_train.max()), float(share_all.max())) * 1.15

    def draw(ax, op):
        k = list(operations).index(op)
        colours = [PALETTE[1] if d == guess[k] else PALETTE[0] for d in range(10)]
        ax.bar(np.arange(10), share_train[k], color=colours, label="train split")
        ax.plot(np.arange(10), share_all[k], "o", color=PALETTE[7], label="all 1000 problems")
        ax.set(xlabel="answer digit", ylabel="fraction of problems", ylim=(0, top),
               xticks=range(10), title=f"{op}: best constant guess {guess[k]} (orange bar)")
        ax.text(0.02, 0.97, "\n".join(examples[op]), transform=ax.transAxes, va="top",
                family="monospace", fontsize=9)
        ax.legend(frameon=False, loc="upper right")

    return slider_plot(draw, values=list(operations), name="operation", figsize=figsize,
                       title="Answer digits per operation", dpi=dpi)


def step_size_plot(hs, errors, guides, title, *, ylim=(1e-14, 1), figsize=(6.5, 4),
                   guide_colors=(0, 1, 7, 2)) -> Figure:
    """Error of numerical derivatives against the step size h, log-log.

    errors: dict label -> |estimate - exact| per h (markers); guides: dict label -> a
    predicted error per h (thin dashed lines, coloured by the PALETTE indices guide_colors,
    e.g. the colour of the curve a guide explains). Errors of exactly 0 are drawn at 1e-18.
    """
    hs = np.asarray(hs, dtype=float)
    fig, ax = figure_and_axes(None, figsize)
    markers = ("o-", "s-", "^:", "v-.")
    with style():
        for k, (label, err) in enumerate(errors.items()):
            ax.loglog(hs, np.maximum(np.asarray(err, dtype=float), 1e-18), markers[k % 4], ms=3,
                      color=PALETTE[k], label=label)
        for k, (label, line) in enumerate(guides.items()):
            ax.loglog(hs, line, LINESTYLES[1 + k % 3], lw=1,
                      color=PALETTE[guide_colors[k % len(guide_colors)]], label=label)
        ax.set(xlabel="step size h", ylabel="|estimate - exact derivative|", ylim=ylim,
               title=title)
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=8, ncol=2, loc="lower left")
    return fig


def secant_slider(f, df, x0, hs, *, name="f", figsize=(5.6, 3.3), dpi=90) -> WidgetPlot:
    """A slider over step sizes: the forward and central secants of f at x0 and the tangent.

    f, df: NumPy functions (f and its exact derivative); hs: the step sizes of the slider.
    """
    xs = np.linspace(x0 - 1.2, x0 + 1.2, 200)

    def draw(ax, h):
        fwd = (f(x0 + h) - f(x0)) / h
        cen = (f(x0 + h) - f(x0 - h)) / (2 * h)
        ax.plot(xs, f(xs), color=PALETTE[7], lw=2, label=f"{name}(x)")
        ax.plot(xs, f(x0) + df(x0) * (xs - x0), ":", color=PALETTE[2],
                label=f"tangent, slope {df(x0):.4f}")
        ax.plot(xs, f(x0) + fwd * (xs - x0), "--", color=PALETTE[0],
                label=f"forward secant, slope {fwd:.4f}")
        ax.plot(xs, f(x0 + h) + cen * (xs - x0 - h), "-.", color=PALETTE[1],
                label=f"central secant, slope {cen:.4f}")
        ax.plot([x0 - h, x0, x0 + h], f(np.array([x0 - h, x0, x0 + h])), "o",
                color=PALETTE[3], ms=5)
        lo, hi = float(f(xs).min()), float(f(xs).max())
        ax.set(xlabel="x", ylabel="y", xlim=(xs[0], xs[-1]),
               ylim=(lo - 0.3 * (hi - lo), hi + 0.6 * (hi - lo)))
        ax.legend(frameon=False, fontsize=8, loc="upper left")

    return slider_plot(draw, values=list(hs), name="h", figsize=figsize, dpi=dpi,
                       title=f"Secant slopes of {name} at x = {x0:g}")


def per_element_errors(numerical, candidates, labels, title, *, floor=1e-8,
                       figsize=(9, 3.2)) -> Figure:
    """Per-element relative error of 1-D gradients against a numerical one, as bars (log scale).

    candidates: dict name -> analytic gradient (N,); labels: N tick labels. One panel each.
    """
    from ..gradcheck import elementwise_rel_error, magnitude, rel_error
    fig = new_figure(figsize)
    with style():
        axes = np.atleast_1d(fig.subplots(1, len(candidates), sharey=True))
        for k, (ax, (name, grad)) in enumerate(zip(axes, candidates.items())):
            err = np.maximum(elementwise_rel_error(grad, numerical, floor), 1e-16)
            ax.bar(np.arange(len(err)), err, bottom=1e-16, color=PALETTE[k])
            ax.set_yscale("log")
            ax.set(ylim=(1e-16, 2), xlabel="logit (vocabulary entry)",
                   title=f"{name}: rel. error {magnitude(rel_error(grad, numerical))}")
            ax.set_xticks(range(len(labels)), [str(s) for s in labels], rotation=90, fontsize=7)
            ax.axhline(1e-6, color=PALETTE[7], lw=1, ls="--")
            ax.grid(alpha=0.3, axis="y")
        axes[0].set_ylabel("relative error per element")
        fig.suptitle(title)
    return fig
