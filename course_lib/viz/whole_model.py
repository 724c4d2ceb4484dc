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


PART_STYLES = {"attn": "-", "ffn": "--", "ln1": ":", "ln2": "-."}


def gradient_norms_by_station(norms, title, ax=None, *, figsize=(9, 3.6)) -> Figure:
    """Notebook 10: gradient norm of each parameter group against its depth, log y.

    norms: dict series label -> (group labels, norms), as station_groups gives them. x is the
    depth in forward order: the embeddings, block 0, ..., block L-1, then ln_f and the head; a
    block's four groups are four lines (attn, ffn, ln1, ln2 by line style), so that a line's
    slope is the change with depth, not with the size of a group.
    """
    fig = None
    if ax is None:
        fig = new_figure(figsize)
        ax = fig.subplots()
    L = max((int(g.split(".")[0]) + 1 for labels, _ in norms.values() for g in labels
             if g[0].isdigit()), default=0)
    ends = {"embed": -1, "ln_f": L, "head": L + 1}
    with style():
        for k, (name, (labels, values)) in enumerate(norms.items()):
            colour = PALETTE[k % len(PALETTE)]
            got = dict(zip(labels, values))
            for part, ls in PART_STYLES.items():
                xs = [i for i in range(L) if f"{i}.{part}" in got]
                if xs:
                    ax.plot(xs, [got[f"{i}.{part}"] for i in xs], ls, marker="o", markersize=3,
                            color=colour, label=f"{name}, {part}")
            end = [(ends[g], got[g]) for g in ends if g in got]
            ax.plot(*zip(*end), "s", color=colour, markersize=5, label=f"{name}, embed / ln_f / head")
        ax.set_yscale("log")
        ax.set_xticks([-1, *range(L), L, L + 1],
                      ["embed", *(f"block {i}" for i in range(L)), "ln_f", "head"],
                      rotation=45 if L > 4 else 0, fontsize=8)
        ax.set(title=title, xlabel="depth, forward order (the gradient flows right to left)",
               ylabel="gradient norm")
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(alpha=0.3)
    return fig if fig is not None else ax.figure
