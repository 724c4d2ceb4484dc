"""Plots of notebook 09, backprop I, the chain rule: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import LINESTYLES, PALETTE, figure_and_axes, style
from .widgets import WidgetPlot, widget_plot

__all__ = ["jacobian_structure", "gradcheck_step_plot", "gradcheck_step_slider"]


def jacobian_structure(J, block, title, *, figsize=(5.2, 4.4)) -> Figure:
    """log10 |J| of a full Jacobian (M, N), white where an entry is exactly 0; grid lines
    every `block` rows and columns (one position of the sequence per block)."""
    J = np.asarray(J, dtype=float)
    fig, ax = figure_and_axes(None, figsize)
    with style():
        shown = np.where(J == 0, np.nan, np.log10(np.maximum(np.abs(J), 1e-12)))
        im = ax.imshow(shown, cmap="viridis", interpolation="nearest")
        for k in range(block, J.shape[0], block):
            ax.axhline(k - 0.5, color=PALETTE[7], lw=0.4)
        for k in range(block, J.shape[1], block):
            ax.axvline(k - 0.5, color=PALETTE[7], lw=0.4)
        ax.set(title=title, xlabel="input entry (position, channel), flattened",
               ylabel="output entry, flattened")
        fig.colorbar(im, ax=ax, label="log10 |entry| (white: exactly 0)")
    return fig


def _curves(ax, hs, errors, h_mark=None):
    markers = ("o-", "s-", "^:", "v-.")
    for k, (label, err) in enumerate(errors.items()):
        err = np.maximum(np.asarray(err, dtype=float), 1e-18)
        ax.loglog(hs, err, markers[k % 4], ms=3, color=PALETTE[k], label=label)
        i = int(np.argmin(err))
        if i in (0, len(err) - 1):      # no balance point inside the range: no star
            continue
        ax.plot(hs[i], err[i], "*", ms=12, color=PALETTE[k], markeredgecolor="black",
                markeredgewidth=0.5)
    if h_mark is not None:
        ax.axvline(h_mark, color=PALETTE[7], lw=1, ls="--")
    ax.axhline(1e-6, color=PALETTE[7], lw=0.8, ls=":")
    ax.set(xlabel="step size h", ylabel="relative error of the numerical gradient",
           ylim=(1e-12, 2))
    ax.grid(alpha=0.3)


def gradcheck_step_plot(hs, errors, guides, title, *, figsize=(6.8, 4.2)) -> Figure:
    """Relative error of a whole numerical gradient against the step h, log-log; a star on
    each curve's minimum (when it lies inside the range of h), a dotted line at 1e-6 (above it a
    float64 check calls a gradient wrong).

    errors: dict label -> rel. error per h; guides: dict label -> predicted error per h (thin).
    """
    hs = np.asarray(hs, dtype=float)
    fig, ax = figure_and_axes(None, figsize)
    with style():
        _curves(ax, hs, errors)
        for k, (label, line) in enumerate(guides.items()):
            ax.loglog(hs, line, LINESTYLES[1 + k % 3], lw=1, color=PALETTE[4 + k % 3], label=label)
        ax.set_title(title)
        ax.legend(frameon=False, fontsize=8, loc="lower left")
    return fig


def gradcheck_step_slider(hs, errors, analytic, numericals, h_values, *, figsize=(9, 3.6),
                          dpi=72, title="Gradient check against step size") -> WidgetPlot:
    """A slider over h_values (a subset of hs): left, the error curves with the chosen h marked;
    right, every numerical gradient entry against the analytic one at that h, one colour per
    dtype (on the diagonal when they agree).

    errors: dict dtype label -> rel. error per h (N_h,); analytic: (P,) float64 gradient;
    numericals: dict dtype label -> (N_h, P) numerical gradients per h.
    """
    hs = np.asarray(hs, dtype=float)
    analytic = np.asarray(analytic, dtype=float)
    lim = 1.3 * float(np.abs(analytic).max())

    def draw(fig, h):
        i = int(np.argmin(np.abs(np.log10(hs / h))))
        left, right = fig.subplots(1, 2)
        _curves(left, hs, errors, h_mark=hs[i])
        left.set_title(f"error against h (dashed: h = {hs[i]:.0e})", fontsize=10)
        right.plot([-lim, lim], [-lim, lim], color=PALETTE[7], lw=0.8)
        for k, (label, num) in enumerate(numericals.items()):
            right.plot(analytic, np.clip(num[i], -lim, lim), "os"[k % 2], ms=4, color=PALETTE[k],
                       alpha=0.7, label=f"{label}: rel. error {errors[label][i]:.0e}")
        right.set(xlim=(-lim, lim), ylim=(-lim, lim), xlabel="analytic gradient entry",
                  ylabel="numerical gradient entry")
        right.set_title("every entry at this h (clipped to the axes)", fontsize=10)
        right.legend(frameon=False, fontsize=8, loc="upper left")
        right.grid(alpha=0.3)

    return widget_plot(draw, {"h": list(h_values)}, figsize=figsize, dpi=dpi, title=title)
