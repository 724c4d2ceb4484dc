"""Widget plots: one call gives a live plot in Jupyter and a working one in the book.

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
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources

import numpy as np
from matplotlib.figure import Figure

from .figures import figure_png, new_figure, style

MAX_FRAMES = 60
_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _read_script(name):
    """A script of this package without its comment lines and indentation (it is inlined in
    every plot's HTML, which the notebooks store)."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    code = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in code if line and not line.startswith("//"))


_SLIDER_JS = _read_script("slider.js")


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
        script = _SLIDER_JS.replace("__UID__", uid)
        return (
            f'<div class="clwp" id="{uid}" style="display:inline-block;background:#fff;color:#111;'
            f'padding:6px 8px;border-radius:4px;font-family:sans-serif;font-size:14px">'
            + "".join(rows)
            + f'<img class="clwp-frame" data-frame="{flat0}" alt="{alt}" '
            'style="max-width:100%;height:auto;display:block" '
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
