"""Plots of notebook 11, training: one call each in the notebook, so that learners
see what is plotted, not the matplotlib that draws it."""
import numpy as np
from matplotlib.figure import Figure

from .figures import PALETTE, heatmap, line_plot, new_figure, style

__all__ = ["lr_trajectories", "schedule_curves", "training_curves", "training_frame",
           "embedding_basis", "ablation_curves", "lr_sweep", "your_run"]


def lr_trajectories(trajectories, target=3.0, ylim=(-6.0, 12.0), figsize=(9, 3.5)) -> Figure:
    """Notebook 11: gradient descent on 0.5 (w - target)^2, one line of w_k per learning rate
    (left), and |w_k - target| on a log scale (right).

    trajectories: dict label -> array (K + 1,) of w_0 .. w_K. Returns the Figure.
    """
    fig = new_figure(figsize)
    with style():
        ax1, ax2 = fig.subplots(1, 2)
    ks = np.arange(len(next(iter(trajectories.values()))))
    line_plot(ks, {k: np.clip(w, *ylim) for k, w in trajectories.items()},
              "w_k (clipped to the plot)", "step k", "w_k", ax=ax1)
    line_plot(ks, {k: np.maximum(np.abs(np.asarray(w) - target), 1e-12)
                   for k, w in trajectories.items()},
              f"distance to the minimum |w_k - {target:g}|", "step k", "|w_k - 3|", ax=ax2,
              logy=True)
    with style():
        ax1.axhline(target, color="gray", linewidth=0.8, linestyle=":")
        ax1.set_ylim(*ylim)
        ax2.get_legend().remove()
        handles, labels = ax1.get_legend_handles_labels()
        ax1.get_legend().remove()          # one legend below both panels, clear of the peaks
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels),
                   frameon=False, fontsize=8)
    return fig


def schedule_curves(schedules, steps, figsize=(7, 3.5)) -> Figure:
    """Notebook 11: learning rate against step for each schedule (dict label -> callable)."""
    s = np.arange(steps)
    return line_plot(s, {k: np.array([f(int(i)) for i in s]) for k, f in schedules.items()},
                     "Learning-rate schedules", "step", "learning rate", figsize=figsize)


def _smooth(y, n):
    """Running mean over the last n values (the first ones over what there is)."""
    c = np.cumsum(np.insert(np.asarray(y, dtype=float), 0, 0.0))
    i = np.arange(1, len(y) + 1)
    lo = np.maximum(i - n, 0)
    return (c[i] - c[lo]) / (i - lo)


def training_curves(history, per_op=None, smooth=20, figsize=(11, 3.4)) -> Figure:
    """Notebook 11: the loss per step (and its running mean), train and validation accuracy per
    epoch, and, if given, validation accuracy per operation against step.

    history: train.History (or anything with its lists); per_op: dict with "step" (list) and one
    list of accuracies per operation. Returns the Figure.
    """
    fig = new_figure(figsize)
    with style():
        axes = fig.subplots(1, 3 if per_op else 2)
    steps = np.asarray(history.step)
    if len(steps):
        with style():
            axes[0].plot(steps, history.loss, color=PALETTE[4], linewidth=0.6, alpha=0.6,
                         antialiased=False, label="per step")   # not antialiased: _plain
            axes[0].plot(steps, _smooth(history.loss, smooth), color=PALETTE[0],
                         label=f"mean of {smooth} steps")
            axes[0].set(yscale="log", title="training loss", xlabel="step",
                        ylabel="cross-entropy (log scale)")
            axes[0].axhline(np.log(20), color="gray", linestyle=":", linewidth=0.8)
            axes[0].legend(frameon=False, fontsize=8)
            axes[0].grid(alpha=0.3)
    if len(history.eval_step):
        line_plot(history.eval_step, {"train": history.train_acc, "validation": history.val_acc},
                  "accuracy at the end of each epoch", "step", "accuracy", ax=axes[1])
        with style():
            axes[1].set_ylim(0, 1.02)
    else:
        with style():
            axes[1].set(title="accuracy at the end of each epoch", xlabel="step", ylabel="accuracy")
    if per_op:
        x = np.asarray(per_op["step"])
        lines = {k: np.asarray(v) for k, v in per_op.items() if k != "step"}
        if len(x):
            line_plot(x, lines, "validation accuracy per operation", "step", "accuracy", ax=axes[2])
        with style():
            axes[2].set_ylim(0, 1.02)
    return fig


def embedding_basis(tok_emb, ids):
    """The two principal directions of the rows `ids` of tok_emb (V, C): a (C, 2) basis and the
    mean (C,), so that every snapshot is projected the same way."""
    E = np.asarray(tok_emb, dtype=float)[ids]
    mean = E.mean(axis=0)
    _, _, vt = np.linalg.svd(E - mean, full_matrices=False)
    return vt[:2].T, mean


def training_frame(fig, snapshot, history, basis, ids, token_labels, key_labels):
    """Notebook 11, one frame of the slider: at the snapshot's step, the attention of the scored
    position (last query) in every head (rows: layer.head), the token embeddings `ids` projected
    on `basis` = (C, 2) basis and mean, and the loss curve with the step marked."""
    with style():
        ax1, ax2, ax3 = fig.subplots(1, 3, width_ratios=[1.2, 1, 1])
    att = np.asarray(snapshot["attention"])            # (L, H, T, T)
    L, H = att.shape[:2]
    rows = att[:, :, -1, :].reshape(L * H, -1)          # the last query of every head
    heatmap(rows, [f"{layer}.{h}" for layer in range(L) for h in range(H)], key_labels,
            "attention of ')' in each head", "weight", ax=ax1, xlabel="key",
            ylabel="layer.head", vmin=0, vmax=1)
    B, mean = basis
    xy = (np.asarray(snapshot["tok_emb"], dtype=float)[ids] - mean) @ B
    with style():
        for (x, y), label in zip(xy, token_labels):
            digit = label.isdigit()
            ax2.scatter(x, y, s=14, color=PALETTE[0] if digit else PALETTE[3])
            ax2.annotate(label, (x, y), fontsize=8, xytext=(2, 2), textcoords="offset points")
        ax2.set(title="token embeddings (2 principal directions)", xlabel="direction 1",
                ylabel="direction 2")
        ax2.grid(alpha=0.3)
        steps = np.asarray(history.step)
        ax3.plot(steps, _smooth(history.loss, 20), color=PALETTE[0])
        ax3.axvline(snapshot["step"], color=PALETTE[3], linestyle="--")
        ax3.set(yscale="log", title="training loss (mean of 20 steps)", xlabel="step",
                ylabel="cross-entropy")
        ax3.grid(alpha=0.3)
    return fig


def ablation_curves(curves, groups, figsize=(11, 3.6)) -> Figure:
    """Notebook 11: validation accuracy against step, mean over seeds, one panel per group.

    curves: dict name -> (steps (N,), accuracies (seeds, N)); groups: dict panel title -> names.
    """
    fig = new_figure(figsize)
    with style():
        axes = fig.subplots(1, len(groups))
    axes = np.atleast_1d(axes)
    for ax, (title, names) in zip(axes, groups.items()):
        x = curves[names[0]][0]
        line_plot(x, {n: np.mean(curves[n][1], axis=0) for n in names}, title, "step",
                  "validation accuracy (mean of seeds)", ax=ax)
        with style():
            ax.axhline(0.99, color="gray", linestyle=":", linewidth=0.8)
            ax.set_ylim(0, 1.02)
            ax.legend(frameon=False, fontsize=8)
    return fig


def _plain(ax):
    """Lines drawn without antialiasing: a notebook stores them in a third to half the bytes
    (they draw fewer shades of colour), and curves of hundreds of steps look the same."""
    for line in ax.lines:
        line.set_antialiased(False)


def lr_sweep(losses, smooth=25, figsize=(6, 2.8)) -> Figure:
    """Notebook 11, a learning-rate sweep: the training loss per step (mean of `smooth` steps)
    for each rate, and ln 10 (a uniform guess among the ten digits) dotted.

    losses: dict lr -> list of the losses per step."""
    steps = np.arange(1, len(next(iter(losses.values()))) + 1)
    fig = line_plot(steps, {f"lr {lr:g}": _smooth(y, smooth) for lr, y in losses.items()},
                    f"training loss (mean of {smooth} steps)", "step",
                    "cross-entropy (log scale)", logy=True, figsize=figsize)
    with style():
        ax = fig.axes[0]
        ax.axhline(np.log(10), color="gray", linestyle=":", linewidth=0.8)
        ax.legend(frameon=False, fontsize=7, ncol=2)
    _plain(ax)
    return fig


def your_run(history, reference, max_norm, per_epoch, smooth=20, figsize=(8.5, 2.6)) -> Figure:
    """Notebook 11, a run of your own loop: its training loss per step over a reference run's
    (fit's); and the global gradient norm per step before clipping, the bound max_norm, and
    above each epoch (per_epoch steps) the share of its steps that were clipped.

    history: dict with lists 'loss' and 'grad_norm'; reference: a list of losses per step."""
    fig = new_figure(figsize)
    with style():
        ax1, ax2 = fig.subplots(1, 2)
    steps = np.arange(1, len(history["loss"]) + 1)
    line_plot(steps, {"fit (course_lib)": _smooth(reference, smooth),
                      "your loop": _smooth(history["loss"], smooth)},
              f"training loss (mean of {smooth} steps)", "step", "cross-entropy (log scale)",
              ax=ax1, logy=True)
    norms = np.asarray(history["grad_norm"], dtype=float)
    clipped = (norms > max_norm).reshape(-1, per_epoch).mean(axis=1)
    with style():
        ax2.plot(steps, norms, color=PALETTE[4], linewidth=0.7, label="per step")
        ax2.axhline(max_norm, color=PALETTE[3], linestyle="--", label=f"max_norm = {max_norm:g}")
        ax2.set(yscale="log", title="gradient norm before clipping", xlabel="step",
                ylabel="global norm (log scale)")
        ax2.set_ylim(top=norms.max() * 8)               # room for the shares above the line
        for epoch, share in enumerate(clipped):
            ax2.axvline(epoch * per_epoch, color="gray", linewidth=0.5)
            ax2.text((epoch + 0.5) * per_epoch, 0.97, f"{share:.0%}\nclipped", ha="center",
                     va="top", fontsize=7, transform=ax2.get_xaxis_transform())
        ax2.legend(frameon=False, fontsize=8, loc="lower left")
    _plain(ax1)
    _plain(ax2)
    return fig
