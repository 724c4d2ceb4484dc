"""Plots and widget plots: one call gives a live plot in Jupyter and a working one in the book.

    p = viz.slider_plot(draw, values=[0.25, 0.5, 1, 2], name="temperature", title="Attention")
    p            # last line of a cell (the cell carries `# NBVAL_IGNORE_OUTPUT`)

`draw(ax, value)` draws one state on a fresh Axes. Every state is drawn once, up front,
into a PNG frame, so a broken `draw` fails in its own cell. The displayed output carries
three mime types:

- application/vnd.jupyter.widget-view+json: ipywidgets sliders/checkboxes and an Image
  that changes with them (only in a live kernel; Jupyter shows this one);
- text/html: a self-contained slider over the precomputed frames (an `<input type=range>`
  per control, one `<img>`, a few lines of inline script); it needs no kernel, so it is
  what the built book shows (with text/html ranked above the widget view for the HTML
  builders, see `nb_mime_priority_overrides` in _config.yml);
- text/plain: a one-line summary.

The HTML is deterministic (same draw and values -> same bytes) so notebooks re-run to the
same stored output. Figures use a white face so they stay readable on a dark page,
viridis for heatmaps and the Okabe-Ito palette (`PALETTE`) for lines.
"""
from __future__ import annotations

import base64
import hashlib
import html
import inspect
import io
import itertools
import json
from collections.abc import Callable, Mapping, Sequence

import matplotlib as mpl
import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# Okabe & Ito (2008), colour-blind safe; yellow and black last (weak on white / heavy).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000")
LINESTYLES = ("-", "--", "-.", ":")
MAX_FRAMES = 60

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

_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


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


def _label(value) -> str:
    """Short, stable text for a control value (floats to 4 significant digits)."""
    if isinstance(value, (bool, np.bool_)):
        return "on" if value else "off"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value)


def _is_toggle(vals) -> bool:
    """A control with values exactly [False, True] is shown as a checkbox."""
    return len(vals) == 2 and all(isinstance(v, (bool, np.bool_)) for v in vals) and not vals[0] and vals[1]


def _in_kernel() -> bool:
    """True inside a running IPython kernel (Jupyter, nbclient, nbval): widgets can talk to it."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


class WidgetPlot:
    """A plot over a grid of control states: live ipywidgets in Jupyter, static HTML in the book.

    Build it with `slider_plot` or `widget_plot`. Attributes: `names` (control names),
    `values` (list of value lists), `frames` (dict: index tuple -> PNG bytes, one per state).
    """

    def __init__(self, render: Callable[[dict], Figure], controls: Mapping[str, Sequence],
                 *, title=None, dpi=100, max_frames=MAX_FRAMES, initial=None):
        if not callable(render):
            raise TypeError(f"draw must be callable, got {type(render).__name__}")
        if not isinstance(controls, Mapping) or not controls:
            raise ValueError("controls must be a non-empty dict: name -> list of values")
        self.names = [str(n) for n in controls]
        self.values = []
        for name, vals in controls.items():
            if isinstance(vals, (str, bytes)) or not isinstance(vals, (Sequence, np.ndarray)):
                raise TypeError(f"control {name!r}: values must be a list of values, got {type(vals).__name__}")
            vals = list(vals)
            if not vals:
                raise ValueError(f"control {name!r} has no values: give at least one")
            self.values.append(vals)
        self.labels = [[_label(v) for v in vals] for vals in self.values]
        for name, labels in zip(self.names, self.labels):
            if len(set(labels)) != len(labels):
                raise ValueError(f"control {name!r}: two values print the same ({labels}); give distinct values")
        shape = tuple(len(v) for v in self.values)
        n = int(np.prod(shape))
        if n > max_frames:
            raise ValueError(f"{' x '.join(map(str, shape))} = {n} states for controls {self.names}: "
                             f"more than max_frames={max_frames} frames for the static book version; "
                             f"use fewer values per control")
        self.shape, self.title, self.dpi = shape, title, dpi
        self.initial = self._initial_index(initial)
        self.frames = {}
        for idx in itertools.product(*(range(s) for s in shape)):
            state = {name: vals[i] for name, vals, i in zip(self.names, self.values, idx)}
            with style():  # the user's style must not reach stored figures
                fig = render(state)
            self.frames[idx] = figure_png(fig, dpi)
        self._widget = None

    def _initial_index(self, initial):
        if initial is None:
            return (0,) * len(self.names)
        unknown = sorted(set(initial) - set(self.names))
        if unknown:
            raise ValueError(f"initial names {unknown} are not controls ({self.names})")
        idx = []
        for name, vals in zip(self.names, self.values):
            if name not in initial:
                idx.append(0)
                continue
            matches = [i for i, v in enumerate(vals) if v is initial[name] or _label(v) == _label(initial[name])]
            if not matches:
                raise ValueError(f"initial value {initial[name]!r} is not among the values of {name!r}")
            idx.append(matches[0])
        return tuple(idx)

    def __len__(self):
        return len(self.frames)

    def __repr__(self):
        ctl = ", ".join(f"{n}: {len(v)} values" for n, v in zip(self.names, self.values))
        title = f" {self.title!r}" if self.title else ""
        return f"<{type(self).__name__}{title}: {ctl}; {len(self)} frames>"

    # ---- static, kernel-free HTML -------------------------------------------------------
    def to_html(self) -> str:
        """Self-contained HTML: one control per name, one <img>, inline JS swapping frames."""
        unique, index = [], []
        seen = {}
        for idx in itertools.product(*(range(s) for s in self.shape)):
            png = self.frames[idx]
            if png not in seen:
                seen[png] = len(unique)
                unique.append(base64.b64encode(png).decode("ascii"))
            index.append(seen[png])
        strides = [int(np.prod(self.shape[i + 1:])) for i in range(len(self.shape))]
        flat0 = sum(i * s for i, s in zip(self.initial, strides))
        first = unique[index[flat0]]
        frames = ["" if f == first else f for f in unique]  # the <img> already holds it
        data = {"labels": self.labels, "names": self.names, "strides": strides,
                "index": index, "frames": frames, "title": self.title or ""}
        payload = json.dumps(data, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")
        uid = "clwp-" + hashlib.sha1((payload + first).encode()).hexdigest()[:12]
        alt = html.escape(self._alt(self.initial), quote=True)
        rows = []
        for c, (name, labels) in enumerate(zip(self.names, self.labels)):
            k = self.initial[c]
            esc = html.escape(name, quote=True)
            if _is_toggle(self.values[c]):
                ctl = (f'<input type="checkbox" data-clwp-control="{c}" aria-label="{esc}"'
                       f'{" checked" if k else ""}>')
            else:
                ctl = (f'<input type="range" data-clwp-control="{c}" min="0" max="{len(labels) - 1}" '
                       f'step="1" value="{k}" aria-label="{esc}" style="vertical-align:middle;width:14em">')
            rows.append(f'<label style="display:block;margin:2px 0">{esc} {ctl} '
                        f'<output data-clwp-readout="{c}">{html.escape(labels[k])}</output></label>')
        script = (
            "(function(){var s=document.currentScript;"
            f"var r=(s&&s.parentNode)||document.getElementById('{uid}');if(!r)return;"
            "var d=JSON.parse(r.querySelector('script.clwp-data').textContent);"
            "var img=r.querySelector('img.clwp-frame');var p0=img.getAttribute('src');"
            "var cs=r.querySelectorAll('[data-clwp-control]');"
            "function u(){var f=0,a=[];for(var i=0;i<cs.length;i++){var e=cs[i];"
            "var k=e.type==='checkbox'?(e.checked?1:0):parseInt(e.value,10);f+=k*d.strides[i];"
            "a.push(d.names[i]+' = '+d.labels[i][k]);"
            "var o=r.querySelector('[data-clwp-readout=\"'+i+'\"]');if(o)o.textContent=d.labels[i][k];}"
            "var b=d.frames[d.index[f]];img.src=b?'data:image/png;base64,'+b:p0;img.setAttribute('data-frame',f);"
            "img.alt=(d.title?d.title+': ':'')+a.join(', ');}"
            "for(var i=0;i<cs.length;i++){cs[i].addEventListener('input',u);cs[i].addEventListener('change',u);}"
            "})();")
        return (
            f'<div class="clwp" id="{uid}" style="display:inline-block;background:#fff;color:#111;'
            f'padding:6px 8px;border-radius:4px;font-family:sans-serif;font-size:14px">'
            + "".join(rows)
            + f'<img class="clwp-frame" data-frame="{flat0}" alt="{alt}" style="max-width:100%;height:auto;display:block" '
            f'src="data:image/png;base64,{first}">'
            f'<script type="application/json" class="clwp-data">{payload}</script>'
            f"<script>{script}</script></div>")

    def _alt(self, idx):
        state = ", ".join(f"{n} = {lab[i]}" for n, lab, i in zip(self.names, self.labels, idx))
        return f"{self.title}: {state}" if self.title else state

    # ---- live widget -------------------------------------------------------------------
    def widget(self):
        """The live view: an ipywidgets VBox of controls and an Image showing the current frame."""
        import ipywidgets as w

        if self._widget is not None and self._widget.comm is not None:
            return self._widget
        controls = []
        for c, (name, labels) in enumerate(zip(self.names, self.labels)):
            k = self.initial[c]
            if _is_toggle(self.values[c]):
                controls.append(w.Checkbox(value=bool(k), description=name, indent=False))
            else:
                controls.append(w.SelectionSlider(options=[(lab, i) for i, lab in enumerate(labels)],
                                                  value=k, description=name, continuous_update=True,
                                                  style={"description_width": "initial"}))
        image = w.Image(value=self.frames[self.initial], format="png", layout=w.Layout(max_width="100%"))

        def update(_change=None):
            idx = tuple(int(ctl.value) for ctl in controls)
            image.value = self.frames[idx]

        for ctl in controls:
            ctl.observe(update, names="value")
        self._widget = w.VBox([*controls, image])
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = {"text/plain": repr(self), "text/html": self.to_html()}
        if _in_kernel():
            try:
                view = self.widget()._repr_mimebundle_()
            except ImportError:  # no ipywidgets: the HTML slider still works
                view = None
            if view and _WIDGET_MIME in view:
                data[_WIDGET_MIME] = view[_WIDGET_MIME]
        return data


def _check_draw(draw):
    if not callable(draw):
        raise TypeError(f"draw must be a function draw(ax, value) / draw(fig, **controls), "
                        f"got {type(draw).__name__}")


def _suptitle(fig, title, state):
    if title:
        desc = ", ".join(f"{k} = {_label(v)}" for k, v in state.items())
        fig.suptitle(f"{title} ({desc})")


def _call_draw(draw, state, args, kwargs):
    try:
        with style():
            draw(*args, **kwargs)
    except Exception as err:
        desc = ", ".join(f"{k}={v!r}" for k, v in state.items())
        raise RuntimeError(f"draw failed for {desc}: {type(err).__name__}: {err}") from err


def slider_plot(draw, values, name="value", *, figsize=(6, 4), title=None, dpi=100,
                initial=None, max_frames=MAX_FRAMES) -> WidgetPlot:
    """One slider over `values`; `draw(ax, value)` draws one state on a fresh Axes.

    ax: a matplotlib Axes on a new white Figure of size `figsize` (ax.figure for colorbars).
    values: list of states (numbers, strings, ...), at most `max_frames`. title: suptitle,
    followed by "(name = value)". Returns a WidgetPlot; display it (last line of a cell).
    """
    _check_draw(draw)
    if isinstance(values, np.ndarray):
        values = values.tolist()

    def render(state):
        fig = new_figure(figsize)
        with style():
            ax = fig.add_subplot()
        _call_draw(draw, state, (ax, state[name]), {})
        _suptitle(fig, title, state)
        return fig

    return WidgetPlot(render, {name: values}, title=title, dpi=dpi, max_frames=max_frames,
                      initial=None if initial is None else {name: initial})


def widget_plot(draw, controls, *, figsize=(6, 4), title=None, dpi=100, initial=None,
                max_frames=MAX_FRAMES) -> WidgetPlot:
    """Several controls; `draw(fig, **state)` draws one state on a fresh, empty Figure.

    controls: dict name -> list of values (a toggle is [False, True]); the static version
    holds every combination, so the product of the list lengths must be <= max_frames.
    initial: optional dict name -> starting value.
    """
    _check_draw(draw)
    if not isinstance(controls, Mapping) or not controls:
        raise ValueError("controls must be a non-empty dict: name -> list of values")
    bad = [n for n in controls if not str(n).isidentifier()]
    if bad:
        raise ValueError(f"control names must be Python identifiers (they are passed as keywords): {bad}")
    controls = {n: (v.tolist() if isinstance(v, np.ndarray) else v) for n, v in controls.items()}
    params = inspect.signature(draw).parameters if _has_signature(draw) else None
    if params is not None and not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        missing = [n for n in controls if n not in params]
        if missing:
            raise TypeError(f"draw(fig, ...) does not accept the control(s) {missing} as keywords")

    def render(state):
        fig = new_figure(figsize)
        _call_draw(draw, state, (fig,), state)
        _suptitle(fig, title, state)
        return fig

    return WidgetPlot(render, controls, title=title, dpi=dpi, max_frames=max_frames, initial=initial)


def _has_signature(f):
    try:
        inspect.signature(f)
    except (TypeError, ValueError):
        return False
    return True


def _target_axes(ax, figsize):
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
    fig, ax = _target_axes(ax, figsize)
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
    fig, ax = _target_axes(ax, figsize)
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
    from .gradcheck import elementwise_rel_error, rel_error
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


# ---- notebook 02 ----

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


def cosine_similarity(rows):
    """(N, C) -> (N, N) cosine similarity between the rows."""
    m = np.asarray(rows, dtype=float)
    unit = m / np.linalg.norm(m, axis=1, keepdims=True)
    return unit @ unit.T


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


# ---- notebook 01 ----
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
    fig, ax = _target_axes(None, figsize)
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
    from .gradcheck import elementwise_rel_error, magnitude, rel_error
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


# ---- notebook 03 ----

def score_scaling(Ds, stats, n_keys=8, figsize=(9, 3.5)) -> Figure:
    """Notebook 03: variance of q·k against head size D, and the softmax's largest weight.

    stats: dict with lists over Ds: "var unscaled", "var scaled", "max weight unscaled",
    "max weight scaled". Returns the Figure.
    """
    fig = new_figure(figsize)
    with style():
        ax1, ax2 = fig.subplots(1, 2)
    line_plot(Ds, {"q·k": stats["var unscaled"], "q·k / √D": stats["var scaled"]},
              "Variance of a dot product", "head size D", "variance", ax=ax1, logx=True, logy=True)
    line_plot(Ds, {"unscaled": stats["max weight unscaled"],
                   "scaled by 1/√D": stats["max weight scaled"]},
              f"Softmax over {n_keys} keys", "head size D", "mean largest weight", ax=ax2, logx=True)
    with style():
        ax2.axhline(1 / n_keys, color="gray", linewidth=0.8, linestyle=":")
        ax2.text(Ds[0], 1 / n_keys + 0.02, f"uniform: 1/{n_keys}", color="gray", fontsize=8)
    return fig


def attention_with_entropy(fig, A, labels, title="attention weights"):
    """Notebook 03: an attention map (T, T) beside the entropy of each row, on `fig`.

    A row's entropy -sum_s A_ts ln A_ts is ln T for a uniform row and 0 for a one-hot row.
    """
    A = np.asarray(A, dtype=float)
    T = A.shape[0]
    entropy = -np.sum(A * np.log(np.maximum(A, 1e-300)), axis=1)
    with style():
        ax1, ax2 = fig.subplots(1, 2, width_ratios=[1.5, 1])
    heatmap(A, labels, labels, title, "weight", ax=ax1, vmin=0, vmax=1)
    with style():
        ax2.barh(range(T), entropy, color=PALETTE[0])
        ax2.axvline(np.log(T), color=PALETTE[3], linestyle="--", label=f"uniform: ln {T}")
        ax2.set(yticks=range(T), yticklabels=labels, ylim=(T - 0.5, -0.5), xlim=(0, 1.1 * np.log(T)),
                title="entropy of each row", xlabel="entropy (nats)", ylabel="query position")
        ax2.legend(loc="lower right", fontsize=8)
    return fig


def gradient_error_maps(grads, numerical, row_labels, col_labels, title, *, xlabel="column",
                        ylabel="row", figsize=(10, 4)) -> Figure:
    """log10 of the per-element relative error of each gradient in `grads` (dict name ->
    array (R, C)) against the same numerical gradient (R, C), side by side on one colour scale
    from 1e-16 to 1: a right gradient is dark everywhere, a wrong one lights up where it is wrong."""
    from .gradcheck import elementwise_rel_error
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