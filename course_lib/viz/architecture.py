"""The model drawn from its own configuration: one block (post-LN or pre-LN) and the whole model,
forward (bottom to top) or backward (top to bottom, gradients adding at the forks).

Every box is a station of `course_lib/block.py` or `course_lib/model.py`, labelled with the
parameters it owns (`model.params`) and the arrays it keeps for backward (`model.saved`). Those
names are read from a small model built with the same switches, so a station renamed in the code
fails here (`DiagramError`) instead of drifting from the picture.
"""
from __future__ import annotations

import base64
import html

from matplotlib.patches import Circle, FancyBboxPatch

from ..config import ModelConfig, check_integer, presets
from . import stations as _stations
from .figures import PALETTE, figure_png, new_figure, style
from .stations import DiagramError

__all__ = ["Diagram", "DiagramError", "block_diagram", "model_diagram"]

PARTS = ("attn", "ffn", "ln", "residual", "embed", "head", "loss")
GREY, INK, FAINT = "#9a9a9a", "#1a1a1a", "#f2f2f2"
FILL = {"attn": "#cfe3f3", "ffn": "#fbe3bf", "ln": "#cdeee0", "embed": "#f6d3e7",
        "head": "#f6d3e7", "loss": "#fad0bd", "block": "#e8eef5"}
EDGE = {"attn": PALETTE[0], "ffn": PALETTE[1], "ln": PALETTE[2], "embed": PALETTE[5],
        "head": PALETTE[5], "loss": PALETTE[3], "block": PALETTE[0], "residual": INK}


class Diagram:
    """A drawn figure and its alt text. In Jupyter and in the book it shows as an image that
    carries the alt text; `.png` is its bytes, `.save(path)` writes them."""

    def __init__(self, figure, alt: str, dpi: int = 100):
        self.figure, self.alt = figure, alt
        self.png = figure_png(figure, dpi=dpi)

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.png)

    def _repr_html_(self):
        data = base64.b64encode(self.png).decode("ascii")
        return (f'<img alt="{html.escape(self.alt, quote=True)}" style="max-width:100%;height:auto" '
                f'src="data:image/png;base64,{data}">')

    def __repr__(self):
        return f"<Diagram: {self.alt}>"


# ----- drawing --------------------------------------------------------------------------------
def _colours(part, highlight):
    if highlight is None or part in highlight or (part == "block" and "block" in highlight):
        return FILL.get(part, "white"), EDGE.get(part, INK), INK
    return FAINT, GREY, GREY


def _box(ax, x, y, w, h, st, highlight, backward):
    fill, edge, ink = _colours(st.part, highlight)
    if st.part == "residual":
        ax.add_patch(Circle((x, y), 0.22, facecolor="white", edgecolor=edge, lw=1.4, zorder=3))
        ax.text(x, y, "+", ha="center", va="center", fontsize=13, color=ink, zorder=4)
        return
    if st.part in ("io", "gap"):
        ax.text(x, y, st.title, ha="center", va="center", fontsize=9, color=ink,
                style="italic" if st.part == "io" else "normal")
        if st.saved and st.part == "io":
            ax.text(x, y - 0.27, "saved: " + ", ".join(st.saved), ha="center", va="center",
                    fontsize=7, color=ink, family="monospace")
        return
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=fill, edgecolor=edge, lw=1.3, zorder=2))
    lines = st.lines(backward)
    top = y + 0.13 * (len(lines) - 1)
    for k, line in enumerate(lines):
        ax.text(x, top - 0.26 * k, line, ha="center", va="center", zorder=4, color=ink,
                fontsize=9 if k == 0 else 7, weight="bold" if k == 0 else "normal",
                family=None if k == 0 else "monospace")


def _arrow(ax, start, end, backward, colour=INK, **kw):
    a, b = (end, start) if backward else (start, end)
    ax.annotate("", xy=b, xytext=a, zorder=1,
                arrowprops=dict(arrowstyle="-|>", color=colour, lw=1.3, shrinkA=0, shrinkB=0, **kw))


def _height(st):
    return {"io": 0.75, "residual": 0.75, "gap": 0.6}.get(st.part, 0.53 + 0.26 * len(st.lines(False)))


def _layout(stations):
    ys, y = [], 0.0
    for st in stations:
        h = _height(st)
        ys.append(y + h / 2)
        y += h + 0.35
    return ys, y


def _draw_column(ax, x, stations, forks, highlight, backward, w=5.8):
    ys, top = _layout(stations)
    for k in range(len(stations) - 1):
        y0 = ys[k] + _edge(stations[k])
        y1 = ys[k + 1] - _edge(stations[k + 1])
        _arrow(ax, (x, y0), (x, y1), backward)
    skip_x = x - w / 2 - 0.35
    for i, j in forks:
        fork_y = ys[i] + _edge(stations[i]) + 0.17
        _, edge, _ = _colours("residual", highlight)
        ax.plot([x, skip_x, skip_x], [fork_y, fork_y, ys[j]], color=edge, lw=1.3, zorder=1)
        _arrow(ax, (skip_x, ys[j]), (x - 0.22, ys[j]), backward, colour=edge)
        ax.plot([x], [fork_y], "o", color=edge, markersize=4, zorder=3)
        label = "gradients add:\nd_skip + d_f" if backward else "skip"
        ax.text(skip_x - 0.08, (fork_y + ys[j]) / 2, label, ha="right", va="center", fontsize=7,
                color=edge, rotation=0)
    for st, y in zip(stations, ys):
        _box(ax, x, y, w, _height(st) - 0.1, st, highlight, backward)
    return ys, top


def _edge(st):
    return {"residual": 0.22, "io": 0.3, "gap": 0.2}.get(st.part, (_height(st) - 0.1) / 2)


def _describe(stations, forks, backward):
    names = [("add the skip path" if st.part == "residual" else st.title.split("  ")[0])
             for st in stations]
    order = ("the gradient flows " + " -> ".join(reversed(names))) if backward else " -> ".join(names)
    if not forks:
        return order
    fork_text = (f"; at each of the {len(forks)} forks the gradients of the skip path and of the "
                 "sublayer add" if backward else
                 f"; {len(forks)} skip paths add each sublayer's input to its output")
    return order + fork_text


def _canvas(figsize):
    fig = new_figure(figsize)
    fig.set_layout_engine("none")   # one axes spanning the figure, placed by hand
    return fig


def _check_highlight(highlight):
    if highlight is None:
        return None
    highlight = (highlight,) if isinstance(highlight, str) else tuple(highlight)
    unknown = [h for h in highlight if h not in PARTS + ("block",)]
    if unknown:
        raise ValueError(f"highlight {', '.join(map(repr, unknown))} is unknown; "
                         f"allowed: {', '.join(PARTS + ('block',))}")
    return highlight


def _check_config(config):
    if config is None:
        return presets.deep_dive()
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be a cl.ModelConfig (e.g. model.config), got {type(config).__name__}")
    return config


def block_diagram(config=None, *, norms=("post", "pre"), backward=False, highlight=None) -> Diagram:
    """One block of `config` (the course model by default) for each LayerNorm placement in `norms`,
    side by side; forward bottom to top, or backward top to bottom. highlight: parts to colour
    ("attn", "ffn", "ln", "residual"), the rest grey; None colours all."""
    config, highlight = _check_config(config), _check_highlight(highlight)
    norms = (norms,) if isinstance(norms, str) else tuple(norms)
    if not norms or any(n not in ("post", "pre") for n in norms):
        raise ValueError(f"norms must be 'post', 'pre' or both, got {norms!r}")
    columns, alts = [], []
    for norm in norms:
        cfg = config.replace(norm=norm)
        params, _, saved = _stations.names(cfg.replace(n_layers=1))   # one block, even of a model with none
        own = {p.removeprefix("blocks.0.") for p in params if p.startswith("blocks.0.")}
        stations, forks = _stations.block_stations(cfg)
        columns.append((norm, _stations.verified(stations, own, saved), forks))
        alts.append(f"{norm}-LN block: " + _describe(stations, forks, backward))
    tops = [_layout(st)[1] for _, st, _ in columns]
    fig = _canvas((5.0 * len(columns) + 0.7, 0.62 * max(tops) + 0.6))
    with style():
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(-0.9, 7.6 * len(columns)), ax.set_ylim(-0.5, max(tops) + 0.2)
        ax.axis("off")
        for c, (norm, stations, forks) in enumerate(columns):
            x = 7.6 * c + 4.2
            _draw_column(ax, x, stations, forks, highlight, backward)
            what = "backward: dy enters at the top" if backward else "forward"
            ax.text(x - 0.3, max(tops) - 0.05, f"{norm}-LN block, {what}", ha="center", va="top",
                    fontsize=10, weight="bold", color=INK)
    direction = "Backward, top to bottom" if backward else "Forward, bottom to top"
    return Diagram(fig, f"{direction}. " + ". ".join(alts) + ".")


def model_diagram(config=None, *, backward=False, highlight=None, max_blocks=4) -> Diagram:
    """The whole model of `config` (the course model by default): token ids, embedding, the blocks,
    (LN_f,) head, loss; forward bottom to top or backward top to bottom. With more than
    `max_blocks` blocks the middle ones are drawn as '...'."""
    config, highlight = _check_config(config), _check_highlight(highlight)
    check_integer("max_blocks", max_blocks, low=3)      # the first two, '...', the last
    L = config.n_layers
    shown = list(range(L)) if L <= max_blocks else [0, 1, None, L - 1]
    params, saved, _ = _stations.names(config)
    stations = _stations.model_stations(config, shown)
    _stations.verified(stations, params, saved)
    ys, top = _layout(stations)
    room = 0.9 if backward else 0.6      # the backward title has two lines
    fig = _canvas((6.4, 0.62 * (top + room) + 0.3))
    with style():
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(-0.2, 9.6), ax.set_ylim(-0.5, top + room)
        ax.axis("off")
        _draw_column(ax, 4.6, stations, [], highlight, backward, w=6.2)
        if config.tie_embeddings:
            i, j = 1, next(k for k, s in enumerate(stations) if s.part == "head")
            edge = _colours("head", highlight)[1]
            ax.plot([7.7, 8.2, 8.2, 7.7], [ys[i], ys[i], ys[j], ys[j]], color=edge, lw=1.3, ls="--")
            label = "tied: dE gets\nboth parts,\nadded" if backward else "tied: the\nsame E"
            ax.text(8.3, (ys[i] + ys[j]) / 2, label, ha="left", va="center", fontsize=7, color=edge)
        what = "backward:\ndlogits = p - onehot enters at the top" if backward else "forward"
        ax.text(4.6, top + room - 0.1, f"the whole model ({L} blocks), {what}", ha="center", va="top",
                fontsize=10, weight="bold", color=INK)
    direction = "Backward, top to bottom" if backward else "Forward, bottom to top"
    tied = "; the head is tied to the embedding E, so E's gradient has two parts that add" \
        if config.tie_embeddings else ""
    return Diagram(fig, f"{direction}. The whole model: {_describe(stations, [], backward)}{tied}.")


# The figures the book's pages and the README show as files (notebooks draw theirs in a cell);
# tests/book/test_architecture.py fails when a file is not what this code draws.
BOOK_IMAGES = {
    "architecture-model.png": lambda: model_diagram(),
    "architecture-block.png": lambda: block_diagram(),
}


def save_book_images(folder):
    """Draw BOOK_IMAGES into `folder`, e.g. from the repository's root:
    python -c 'import course_lib.viz.architecture as a; a.save_book_images("book/images")'
    """
    import pathlib

    for name, draw in BOOK_IMAGES.items():
        draw().save(pathlib.Path(folder) / name)

