"""Plots of notebook 10, backprop II, the whole model: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, new_figure, style

__all__ = ["gradient_norms_by_station", "station_groups"]


def station_groups(grads, n_layers):
    """Gradient norm per parameter group, in forward order: embeddings, then per block
    attention (w_q, w_k, w_v, w_o and biases), ln1, ffn, ln2, then ln_f and head when present.

    grads: dict name -> array (a model's backward()). Returns (labels, norms (G,)).
    """
    groups = [("embed", ("tok_emb", "pos_emb"))]
    for i in range(n_layers):
        for part in ("attn", "ln1", "ffn", "ln2"):
            groups.append((f"{i}.{part}", (f"blocks.{i}.{part}.",)))
    groups += [("ln_f", ("ln_f.",)), ("head", ("head.",))]
    labels, norms = [], []
    for label, prefixes in groups:
        sq = [float(np.sum(np.asarray(g, dtype=np.float64) ** 2)) for k, g in grads.items()
              if any(k == p or k.startswith(p) for p in prefixes)]
        if sq:
            labels.append(label)
            norms.append(np.sqrt(sum(sq)))
    return labels, np.array(norms)


def gradient_norms_by_station(norms, title, ax=None, *, figsize=(8, 3.6)) -> Figure:
    """Notebook 10: gradient norm of each parameter group against the station, log y.

    norms: dict series label -> (station labels, norms); the stations in forward order
    (embeddings left, head right). Series with different stations share the x axis by label.
    """
    fig = None
    if ax is None:
        fig = new_figure(figsize)
        ax = fig.subplots()
    stations = []
    for labels, _ in norms.values():
        stations += [s for s in labels if s not in stations]
    stations.sort(key=_station_key)
    with style():
        for k, (name, (labels, values)) in enumerate(norms.items()):
            xs = [stations.index(s) for s in labels]
            ax.plot(xs, values, "o-", color=PALETTE[k % len(PALETTE)], markersize=4, label=name)
        ax.set_yscale("log")
        ax.set_xticks(range(len(stations)))
        ax.set_xticklabels(stations, rotation=60, fontsize=7)
        ax.set(title=title, xlabel="parameter group, forward order (the gradient flows right to left)",
               ylabel="gradient norm")
        ax.legend(frameon=False, fontsize=8)
        ax.grid(alpha=0.3)
    return fig if fig is not None else ax.figure


def _station_key(label):
    if label == "embed":
        return (-1, 0)
    if label in ("ln_f", "head"):
        return (10 ** 6, label == "head")
    i, part = label.split(".")
    return (int(i), ("attn", "ln1", "ffn", "ln2").index(part))
