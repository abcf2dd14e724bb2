"""Pictures with matplotlib (the ``plot`` extra): sweep heat maps and Pareto fronts."""

from __future__ import annotations

from pathlib import Path

from .sweep import pareto_front


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("fastpp.plot needs matplotlib: pip install 'fastpp[plot]'") from None
    matplotlib.use("Agg")  # files only, no screen needed
    import matplotlib.pyplot as plt

    return plt


def bubble_heatmaps(df, path, metric: str = "bubble_ratio") -> Path:
    """One heat map per schedule: ``metric`` (best over ``m``) by ``p`` and ``n/p``.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep's table (one cost setting).
    path : path
        The PNG to write.

    Returns
    -------
    Path
    """
    plt = _pyplot()
    data = df.assign(n_per_p=df["n"] / df["p"])
    names = list(dict.fromkeys(data["schedule"]))
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.4 * rows), squeeze=False)
    # a fixed layout: matplotlib's automatic one takes seconds for a dozen panels
    fig.subplots_adjust(left=0.06, right=0.88, bottom=0.07, top=0.9, wspace=0.35, hspace=0.6)
    vmax = float(data[metric].max()) or 1.0
    image = None
    for ax, name in zip(axes.flat, names, strict=False):
        table = (data[data["schedule"] == name]
                 .pivot_table(index="p", columns="n_per_p", values=metric, aggfunc="min"))
        image = ax.imshow(table.to_numpy(), cmap="viridis_r", vmin=0, vmax=vmax, aspect="auto",
                          origin="lower")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(len(table.columns)), [f"{c:g}" for c in table.columns], fontsize=7)
        ax.set_yticks(range(len(table.index)), [str(i) for i in table.index], fontsize=7)
        ax.set_xlabel("n / p", fontsize=8)
        ax.set_ylabel("p", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, cax=fig.add_axes((0.91, 0.15, 0.015, 0.7)),
                     label=metric.replace("_", " "))
    fig.suptitle(f"{metric.replace('_', ' ')} (best over m)")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def pareto(df, path, x: str = "peak_activations_max", y: str = "bubble_ratio",
           title: str | None = None) -> Path:
    """Scatter of every point in ``(x, y)``, coloured by schedule, with the Pareto front."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.12, top=0.92)
    cmap = plt.get_cmap("tab20")
    for i, (name, group) in enumerate(df.groupby("schedule", sort=False)):
        ax.scatter(group[x], group[y], s=22, color=cmap(i % 20), label=name, alpha=0.85)
    front = pareto_front(df, x, y)
    ax.step(front[x], front[y], where="post", color="black", lw=1, label="Pareto front")
    ax.set_xlabel(x.replace("_", " ") + " (units of one microbatch's activations)")
    ax.set_ylabel(y.replace("_", " "))
    ax.set_title(title or "bubble against peak activation memory")
    ax.legend(fontsize=7, ncol=2, frameon=False)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
