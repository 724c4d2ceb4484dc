"""Figures as the course draws them: a white face (readable on a dark page), viridis for
heatmaps, the Okabe-Ito palette (`PALETTE`) for lines, PNGs that are the same bytes on every
run, and the plots every notebook uses (heatmap, line plot, gradient-check maps).
"""
from __future__ import annotations

import io
from collections.abc import Mapping

import matplotlib as mpl
import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# Okabe & Ito (2008), colour-blind safe; yellow and black last (weak on white / heavy).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
LINESTYLES = ("-", "--", "-.", ":")

# Applied on top of matplotlib's defaults whenever this module draws: the user's style
# (e.g. dark_background) must not leak into figures that are stored in the notebooks.
STYLE = {
    "figure.facecolor": "white", "axes.facecolor": "white", "savefig.facecolor": "white",
    "text.color": "black", "axes.labelcolor": "black", "axes.edgecolor": "black",
    "xtick.color": "black", "ytick.color": "black",
    "axes.prop_cycle": mpl.cycler(color=PALETTE), "image.cmap": "viridis",
    "font.size": 10, "axes.titlesize": 11, "figure.titlesize": 12,
    "svg.hashsalt": "course_lib", "path.simplify": True,
}


def style():
    """Context manager: matplotlib defaults + this module's STYLE (white face, Okabe-Ito, viridis)."""
    return mpl.style.context(["default", STYLE])


class CourseFigure(Figure):
    """A matplotlib Figure outside pyplot that shows itself as a PNG in Jupyter.

    Outside pyplot, a figure is shown once (when it is a cell's value or passed to
    display), with or without `%matplotlib inline` / `import matplotlib.pyplot`.
    """

    def _repr_png_(self):
        return figure_png(self, dpi=100)


def new_figure(figsize=(6, 4)) -> Figure:
    """A white, constrained-layout CourseFigure, not registered with pyplot (no double display)."""
    with style():
        fig = CourseFigure(figsize=figsize, facecolor="white", layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig: Figure, dpi: int = 100, compact: bool = True) -> bytes:
    """PNG bytes of `fig`, reproducible: no 'Software' version stamp, white background.

    compact: reduce to a 256-colour palette (median cut, no dither): ~3x smaller, no
    visible change for plots; every figure and slider frame is stored in the notebooks.
    """
    buf = io.BytesIO()
    with style():
        fig.savefig(buf, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
    if not compact:
        return buf.getvalue()
    from PIL import Image  # a dependency of matplotlib

    img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    img = img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=True)
    return out.getvalue()


def figure_and_axes(ax, figsize):
    if ax is None:
        fig = new_figure(figsize)
        with style():
            ax = fig.add_subplot()
        return fig, ax
    return ax.figure, ax


def heatmap(matrix, row_labels, col_labels, title, cbar_label, ax=None, *,
            xlabel="key position", ylabel="query position", cmap="viridis",
            vmin=None, vmax=None, annotate=False, figsize=(5, 4)) -> Figure:
    """Heatmap of a 2-D array (R, C) with labelled rows/columns and a labelled colorbar.

    row_labels / col_labels: R / C tick labels (e.g. tokens), or None for 0..R-1.
    Defaults label the axes as an attention map (rows = queries, columns = keys).
    annotate: print each value (2 decimals) in its cell. Draws on `ax` if given (then
    returns ax.figure), else on a new Figure. Returns the Figure.
    """
    m = np.asarray(matrix)
    if m.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {m.shape}")
    if not np.issubdtype(m.dtype, np.number) and m.dtype != np.bool_:
        raise TypeError(f"heatmap needs numbers, got dtype {m.dtype}")
    rows = list(range(m.shape[0])) if row_labels is None else list(row_labels)
    cols = list(range(m.shape[1])) if col_labels is None else list(col_labels)
    if len(rows) != m.shape[0] or len(cols) != m.shape[1]:
        raise ValueError(f"matrix is {m.shape[0]} x {m.shape[1]} but got {len(rows)} row labels "
                         f"and {len(cols)} column labels")
    if not title or not cbar_label:
        raise ValueError("heatmap needs a title and a colorbar label (what the colour means)")
    fig, ax = figure_and_axes(ax, figsize)
    with style():
        im = ax.imshow(m.astype(float), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                       interpolation="nearest")
        ax.set_xticks(range(len(cols)), [str(c) for c in cols],
                      rotation=45 if max((len(str(c)) for c in cols), default=0) > 2 else 0)
        ax.set_yticks(range(len(rows)), [str(r) for r in rows])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        cbar = fig.colorbar(im, ax=ax)
        cbar.set_label(cbar_label)
        if annotate:
            lo, hi = im.get_clim()
            mid = (lo + hi) / 2
            for (i, j), v in np.ndenumerate(m.astype(float)):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if v > mid else "white")
    return fig


def line_plot(x, ys, title, xlabel, ylabel, ax=None, *, logx=False, logy=False,
              figsize=(6, 4)) -> Figure:
    """Lines y(x) with a legend: ys is a dict label -> array (N,) (or a single array (N,)).

    Colours from PALETTE and alternating line styles (readable without colour). Returns the Figure.
    """
    x = np.asarray(x)
    series = ys if isinstance(ys, Mapping) else {ylabel: ys}
    if not series:
        raise ValueError("line_plot needs at least one line")
    if len(series) > len(PALETTE):
        raise ValueError(f"at most {len(PALETTE)} lines fit the palette, got {len(series)}")
    fig, ax = figure_and_axes(ax, figsize)
    with style():
        for k, (label, y) in enumerate(series.items()):
            y = np.asarray(y)
            if y.shape != x.shape:
                raise ValueError(f"line {label!r}: y has shape {y.shape}, x has shape {x.shape}")
            ax.plot(x, y, color=PALETTE[k], linestyle=LINESTYLES[k % len(LINESTYLES)], label=str(label))
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        if len(series) > 1 or isinstance(ys, Mapping):
            ax.legend(frameon=False)
        ax.grid(alpha=0.3)
    return fig


def gradient_check(analytic, numerical, name="gradient", floor=1e-8, figsize=(11, 3.2)) -> Figure:
    """Analytic vs numerical gradient side by side, and where they differ.

    Three panels for a 1-D or 2-D gradient: the analytic values, the numerical values, and
    log10 of the per-element relative error |a - n| / max(|a| + |n|, floor). A right gradient
    is dark everywhere in the third panel (below 1e-6); a wrong one lights up where it is wrong.
    The title gives the overall relative error ||a - n|| / (||a|| + ||n||). Returns the Figure.
    """
    from ..gradcheck import elementwise_rel_error, rel_error
    a, n = np.asarray(analytic, dtype=float), np.asarray(numerical, dtype=float)
    if a.shape != n.shape:
        raise ValueError(f"analytic {a.shape} and numerical {n.shape} gradients differ in shape")
    if a.ndim not in (1, 2):
        raise ValueError(f"gradient_check shows 1-D or 2-D gradients, got {a.ndim}-D: reshape or slice it first")
    a2, n2 = (x.reshape(1, -1) if x.ndim == 1 else x for x in (a, n))
    err = np.log10(np.maximum(elementwise_rel_error(a2, n2, floor), 1e-16))
    fig = new_figure(figsize)
    with style():
        axes = fig.subplots(1, 3)
    lim = max(np.abs(a2).max(), np.abs(n2).max(), 1e-300)
    for ax, m, t in ((axes[0], a2, "analytic"), (axes[1], n2, "numerical")):
        heatmap(m, None, None, f"{t} d loss / d {name}", "gradient", ax=ax, xlabel="column", ylabel="row",
                cmap="cividis", vmin=-lim, vmax=lim)
    heatmap(err, None, None, "per-element relative error", "log10 relative error", ax=axes[2],
            xlabel="column", ylabel="row", cmap="viridis", vmin=-16, vmax=0)
    with style():
        fig.suptitle(f"{name}: relative error {rel_error(a, n):.1e}")
    return fig


def gradient_error_maps(grads, numerical, row_labels, col_labels, title, *, xlabel="column",
                        ylabel="row", figsize=(10, 4)) -> Figure:
    """log10 of the per-element relative error of each gradient in `grads` (dict name ->
    array (R, C)) against the same numerical gradient (R, C), side by side on one colour scale
    from 1e-16 to 1: a right gradient is dark everywhere, a wrong one lights up where it is wrong."""
    from ..gradcheck import elementwise_rel_error
    fig = new_figure(figsize)
    with style():
        axes = np.atleast_1d(fig.subplots(1, len(grads)))
    for ax, (name, grad) in zip(axes, grads.items()):
        e = elementwise_rel_error(grad, numerical)
        heatmap(np.log10(np.maximum(e, 1e-16)), row_labels, col_labels, name, "log10 relative error",
                ax=ax, vmin=-16, vmax=0, xlabel=xlabel, ylabel=ylabel)
    with style():
        fig.suptitle(title)
    return fig


def cosine_similarity(vectors):
    """Cosine similarity of every pair of rows of `vectors` (T, C) -> (T, T), in float64."""
    v = np.asarray(vectors, dtype=np.float64)
    unit = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)
    return unit @ unit.T
