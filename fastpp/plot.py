"""Pictures with matplotlib (the ``plot`` extra): a schedule's Gantt chart and memory, and
sweep heat maps and Pareto fronts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .checks import (
    ScheduleError,
    atomic_write,
    dataframe,
    file_path,
    instance,
    number,
    numbers,
    optional_text,
    positive_ints,
    require,
    will_write,
    writable,
)
from .ops import Op
from .simulate import Result
from .sweeps import pareto_front
from .trace import check_run, measured_slices

# one colour per op kind
COLOURS = {Op.F: "#4C72B0", Op.B: "#55A868", Op.I: "#DD8452", Op.W: "#C44E52",
           Op.FB: "#8172B3"}


def _pyplot():
    matplotlib = require("matplotlib", "plot", "fastpp.plot")
    matplotlib.use("Agg")  # files only, no screen needed
    import matplotlib.pyplot as plt

    return plt


def check_picture(path, name: str = "path") -> None:
    """Refuse, before the work that draws it, a picture path matplotlib would not write: a
    suffix of no format it writes (none: PNG), or a path ``will_write`` refuses. ``None``
    (no picture) passes."""
    if path is None:
        return
    require("matplotlib", "plot", name)
    from matplotlib.backend_bases import FigureCanvasBase

    # matplotlib picks the format by the suffix and refuses others as its own ValueError
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix[1:].lower()
    if suffix and suffix not in kinds:
        raise ScheduleError(f"{name} must end in a format matplotlib writes "
                            f"({', '.join(sorted(kinds))}) (got {str(path)!r})")
    will_write(path, name)


def _save(plt, fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` and close it, also when writing fails."""
    try:
        check_picture(path)
        if not path.suffix:  # the file matplotlib writes, which the caller is told
            path = path.with_name(path.name + ".png")
        with writable(path):  # (through a temporary file: never half a picture)
            atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=100,
                                                       format=path.suffix[1:].lower()))
    finally:
        plt.close(fig)
    return path


def _result(result) -> Result:
    return instance(result, Result, "result", "fastpp.Result")


def gantt(result, path) -> Path:
    """One row per device, each op a box at its simulated time, coloured by kind and labelled
    with its microbatch; the gaps are idle time. Makespan and both bubbles in the title.

    Parameters
    ----------
    result : Result
        From ``fastpp.simulate``.
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).

    Returns
    -------
    Path
        The file written.
    """
    result, path = _result(result), file_path(path)
    plt = _pyplot()
    sched = result.schedule
    width = min(40.0, 4.0 + 0.12 * sched.length.max())
    fig, ax = plt.subplots(figsize=(width, 0.45 * sched.p + 1.4))
    # (0.55 inch on the right for the legend)
    fig.subplots_adjust(left=0.06 if width > 8 else 0.12, right=1 - 0.55 / width,
                        bottom=0.12 + 0.5 / (sched.p + 2), top=0.86)
    for r in range(sched.p):
        L = sched.length[r]
        kinds = sched.kind[r, :L]
        starts, ends = result.start[r, :L], result.end[r, :L]
        ax.broken_barh(list(zip(starts, ends - starts, strict=True)), (r - 0.4, 0.8),
                       facecolors=[COLOURS[Op(k)] for k in kinds], edgecolor="white",
                       linewidth=0.5)
        for k in range(L):
            if ends[k] - starts[k] >= 0.012 * result.makespan:  # room for a label
                label = (f"{sched.mb[r, k]}/{sched.mb2[r, k]}" if kinds[k] == Op.FB
                         else str(sched.mb[r, k]))
                ax.text((starts[k] + ends[k]) / 2, r, label, ha="center", va="center",
                        fontsize=6, color="white")
    ax.set_yticks(range(sched.p), [f"device {r}" for r in range(sched.p)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, result.makespan)
    ax.set_xlabel("time")
    ax.set_title(f"{sched.name}: p={sched.p}, n={sched.n}, m={sched.m}; makespan "
                 f"{result.makespan:g}, bubble {result.bubble_ratio:.1%} "
                 f"(span {result.span_bubble_ratio:.1%})", fontsize=10)
    used = sorted({Op(k) for r in range(sched.p) for k in sched.kind[r, :sched.length[r]]})
    for op in used:
        ax.bar(0, 0, color=COLOURS[op], label={"FB": "F&B"}.get(op.name, op.name))
    # beside the axis, as memory's: above it, it covered the title's bubbles
    ax.legend(loc="upper left", fontsize=7, frameon=False, bbox_to_anchor=(1.0, 1.0))
    return _save(plt, fig, path)


def memory(result, path) -> Path:
    """Each device's activation memory over time (units of one microbatch's activations).

    Parameters
    ----------
    result : Result
        From ``fastpp.simulate``.
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).

    Returns
    -------
    Path
        The file written.
    """
    result, path = _result(result), file_path(path)
    plt = _pyplot()
    sched = result.schedule
    fig, ax = plt.subplots(figsize=(8, 4))
    fig.subplots_adjust(left=0.09, right=0.8, bottom=0.13, top=0.9)
    for r in range(sched.p):
        times, values = result.memory_curve(r)
        ax.step(times, values, where="post", label=f"device {r} (peak "
                f"{result.peak_activations[r]:g})", lw=1.2)
    ax.set_xlabel("time")
    ax.set_ylabel("activations (units)")
    ax.set_title(f"{sched.name}: activation memory, p={sched.p}, n={sched.n}, m={sched.m}")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(plt, fig, path)


def bubble_heatmaps(df, path, metric: str = "bubble_ratio") -> Path:
    """One heat map per schedule: ``metric`` (best over ``m``) by ``p`` and ``n/p``.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep's table (one cost setting).
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).

    Returns
    -------
    Path
        The file written.
    """
    dataframe(df, "df", ("schedule", "p", "n"))
    dataframe(df, "df", {"metric": metric})
    if df.empty:  # (a ZeroDivisionError laying out no panel)
        raise ScheduleError("df must hold a sweep's rows (got an empty table)")
    for name in ("p", "n"):  # (n / p is an axis: p = 0 divided by zero, strings raised)
        positive_ints(df[name].to_numpy(), f"df's {name} column")
    # a metric of text, or below 0 everywhere, failed inside NumPy or matplotlib's colour scale
    numbers(df[metric].to_numpy(), f"df's metric column {metric!r}", missing=True)
    path = file_path(path)
    plt = _pyplot()
    which, names = df["schedule"].factorize()  # in order of first appearance
    ps, pi = np.unique(df["p"].to_numpy(), return_inverse=True)
    ks, ki = np.unique(df["n"].to_numpy() / df["p"].to_numpy(), return_inverse=True)
    values = df[metric].to_numpy(dtype=float)
    # every panel on the full (p, n/p) grid, blank (NaN) where a schedule has no point, so that
    # the tick labels sit on the outer panels only (ticks are most of the drawing time)
    tables = np.full((len(names), len(ps), len(ks)), np.nan)
    np.fmin.at(tables, (which, pi, ki), values)  # best over m; NaN where none
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.4 * rows), squeeze=False)
    # a fixed layout: matplotlib's automatic one takes seconds for a dozen panels
    fig.subplots_adjust(left=0.06, right=0.88, bottom=0.07, top=0.9, wspace=0.15, hspace=0.45)
    vmax = float(df[metric].max()) or 1.0
    image = None
    for q, (ax, name) in enumerate(zip(axes.flat, names, strict=False)):
        image = ax.imshow(tables[q], cmap="viridis_r", vmin=0, vmax=vmax, aspect="auto",
                          origin="lower")
        ax.set_title(name, fontsize=9)
        bottom = q + cols >= len(names)
        left = q % cols == 0
        ax.set_xticks(range(len(ks)) if bottom else [], [f"{c:g}" for c in ks] if bottom else [],
                      fontsize=7)
        ax.set_yticks(range(len(ps)) if left else [], [str(i) for i in ps] if left else [],
                      fontsize=7)
        if bottom:
            ax.set_xlabel("n / p", fontsize=8)
        if left:
            ax.set_ylabel("p", fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    if image is not None:
        fig.colorbar(image, cax=fig.add_axes((0.91, 0.15, 0.015, 0.7)),
                     label=metric.replace("_", " "))
    fig.suptitle(f"{metric.replace('_', ' ')} (best over m)")
    return _save(plt, fig, path)


def pareto(df, path, x: str = "peak_activations_max", y: str = "bubble_ratio",
           title: str | None = None) -> Path:
    """Scatter of every point in ``(x, y)``, coloured by schedule, with the Pareto front.

    Parameters
    ----------
    df : pandas.DataFrame
        Sweep rows (``fastpp.sweep``): a ``schedule`` column and the columns ``x`` and ``y``.
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).
    x, y : str
        The columns to plot; the front minimises both (``fastpp.pareto_front``).
    title : str, optional

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ScheduleError
        If ``df`` lacks a column.
    """
    dataframe(df, "df", ("schedule",))
    dataframe(df, "df", {"x": x, "y": y})
    path, title = file_path(path), optional_text(title, "title")
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
    return _save(plt, fig, path)


def plan_scatter(df, path, capacity: float | None = None, title: str | None = None) -> Path:
    """Tokens per second against bytes per GPU of a plan's configurations, those that fit
    coloured by schedule, those that do not grey; the capacity as a vertical line.

    Parameters
    ----------
    df : pandas.DataFrame
        Plan rows (``fastpp.model.plan``).
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).
    capacity : float, optional
        Bytes per GPU, drawn as a line (> 0).
    title : str, optional

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ScheduleError
        If ``df`` lacks a plan column or ``capacity`` is not a number > 0.
    """
    dataframe(df, "df", ("step_time", "schedule", "fits", "peak_memory", "tokens_per_s"))
    if df["fits"].dtype != bool:  # (~ of text or NaN raised a TypeError)
        raise ScheduleError(f"df's fits column must hold bools (got dtype {df['fits'].dtype})")
    ran = df[df["step_time"].notna()]
    for name in ("peak_memory", "tokens_per_s"):  # on log axes: > 0
        numbers(ran[name].to_numpy(), f"df's {name} column", strict=True)
    path, title = file_path(path), optional_text(title, "title")
    capacity = None if capacity is None else number(capacity, "capacity", strict=True)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.12, top=0.92)
    misses = ran[~ran["fits"]]
    ax.scatter(misses["peak_memory"] / 1e9, misses["tokens_per_s"], s=10, color="#BBBBBB",
               label="does not fit", alpha=0.6)
    cmap = plt.get_cmap("tab20")
    fits = ran[ran["fits"]]
    for i, (name, group) in enumerate(fits.groupby("schedule", sort=True)):
        ax.scatter(group["peak_memory"] / 1e9, group["tokens_per_s"], s=18, color=cmap(i % 20),
                   label=name, alpha=0.9)
    if capacity is not None:
        ax.axvline(capacity / 1e9, color="black", lw=1, ls="--", label="capacity")
    ax.set_xscale("log")  # misses run to many times the capacity
    ax.set_xlabel("memory per GPU, GB (parameters, gradients, optimizer, activations)")
    ax.set_ylabel("tokens per second")
    ax.set_title(title or "configurations: throughput against memory")
    ax.legend(fontsize=7, ncol=2, frameon=False)
    return _save(plt, fig, path)


def measured_timelines(run, result, path, title: str | None = None) -> Path:
    """A measured run above its simulation: per device, a row of the measured ops (each from
    the end of its wait for an input, hatched grey, to its release: its sends posted) over a
    row of the simulated ones.

    Parameters
    ----------
    run : fastpp.MeasuredRun
        From ``fastpp.read_torch_trace`` (times in seconds, drawn in ms).
    result : Result
        A simulation of ``run.schedule`` in seconds, e.g. ``run.replay()`` or
        ``simulate(run.schedule, costs)``.
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).

    Returns
    -------
    Path
        The file written.
    """
    run, result, path = check_run(run), _result(result), file_path(path)
    title = optional_text(title, "title")
    plt = _pyplot()
    ops, sched = run.ops, result.schedule
    p = sched.p
    fig, ax = plt.subplots(figsize=(12, 0.9 * p + 1.8))
    fig.subplots_adjust(left=0.1, right=0.99, bottom=0.5 / (p + 1) + 0.15, top=0.88)
    ms = 1e3
    for r in range(p):
        mine = ops[ops["device"] == r]
        # measured: the upper lane; the wait ends where the work begins, which runs to its
        # release (its sends posted): as in the Chrome trace
        waited, begin, release = (x * ms for x in measured_slices(mine))
        colours = [COLOURS[Op[kind]] for kind in mine["kind"]]
        ax.broken_barh(list(zip(waited, begin - waited, strict=True)), (r - 0.42, 0.38),
                       facecolors="none", edgecolor="#999999", hatch="////", linewidth=0)
        ax.broken_barh(list(zip(begin, release - begin, strict=True)),
                       (r - 0.42, 0.38), facecolors=colours, edgecolor="white", linewidth=0.4)
        # simulated: the lower lane
        L = sched.length[r]
        starts, ends = result.start[r, :L] * ms, result.end[r, :L] * ms
        ax.broken_barh(list(zip(starts, ends - starts, strict=True)), (r + 0.04, 0.38),
                       facecolors=[COLOURS[Op(k)] for k in sched.kind[r, :L]],
                       edgecolor="white", linewidth=0.4, alpha=0.75)
    ax.set_yticks([y for r in range(p) for y in (r - 0.23, r + 0.23)],
                  [f"{what} {r}" for r in range(p) for what in ("measured", "simulated")],
                  fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(run.makespan, result.makespan) * ms)
    ax.set_xlabel("ms from the first op's start")
    error = result.makespan / run.makespan - 1
    ax.set_title(title or f"{run.schedule.name}: p={p}, n={sched.n}, m={sched.m}; measured "
                 f"{run.makespan * ms:.2f} ms, simulated {result.makespan * ms:.2f} ms "
                 f"({error:+.1%})", fontsize=10, loc="left")
    used = sorted({Op(k) for r in range(p) for k in sched.kind[r, :sched.length[r]]})
    for op in used:
        ax.bar(0, 0, color=COLOURS[op], label={"FB": "F&B"}.get(op.name, op.name))
    ax.bar(0, 0, color="none", edgecolor="#999999", hatch="////", label="wait (measured)")
    ax.legend(loc="upper right", ncol=len(used) + 1, fontsize=7, frameon=False,
              bbox_to_anchor=(1.0, -0.1))  # below the axis: the title takes the top
    return _save(plt, fig, path)


def makespan_cdf(results, path, title: str | None = None) -> Path:
    """The distribution of each Monte Carlo's makespan (``simulate(..., noise=)``) as an
    empirical CDF, one line per result, labelled with its schedule, mean and p95.

    Parameters
    ----------
    results : MonteCarlo, sequence of MonteCarlo, or dict
        Best drawn with the same ``noise`` and ``seed`` (common random numbers); a dict
        labels each line by its key (else by its schedule's name).
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).
    title : str, optional

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    ScheduleError
        If ``results`` is empty or holds something other than a ``MonteCarlo``.
    """
    import numpy as np

    from .montecarlo import MonteCarlo

    if isinstance(results, dict):
        keys, results = list(results), list(results.values())
    else:
        results = [results] if isinstance(results, MonteCarlo) else list(
            results if isinstance(results, list | tuple) else [results])
        keys = range(len(results))
    if not results:
        raise ScheduleError("results must hold at least one MonteCarlo (got none)")
    for k, mc in zip(keys, results, strict=True):
        instance(mc, MonteCarlo, f"results[{k!r}]", "fastpp.MonteCarlo")
    labels = ([mc.schedule.name for mc in results] if isinstance(keys, range)
              else [str(k) for k in keys])
    path, title = file_path(path), optional_text(title, "title")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.13, top=0.9)
    for label, mc in zip(labels, results, strict=True):
        x = np.sort(mc.makespan)
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", lw=1.4,
                label=f"{label}: mean {mc.mean:.4g}, p95 {mc.quantile(0.95):.4g}")
    ax.axhline(0.95, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("makespan")
    ax.set_ylabel("share of samples")
    ax.set_title(title or f"makespan distribution ({results[0].samples} samples)", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="best")
    return _save(plt, fig, path)


def criticality(mc, path) -> Path:
    """The schedule's timeline without jitter (``MonteCarlo.shaded``: one sample of
    ``mc.noise.fixed()``, its slow devices, stages and link delays kept), each op shaded by
    its criticality: the share of a Monte Carlo's samples whose critical path runs through it
    (dark: always).

    Parameters
    ----------
    mc : MonteCarlo
        From ``simulate(..., noise=)``.
    path : path
        The picture to write: PNG, or the format its suffix names (none: ``.png`` is added;
        a folder is refused, not drawn beside as ``<folder>.png``).

    Returns
    -------
    Path
        The file written.
    """
    from .montecarlo import MonteCarlo

    mc = instance(mc, MonteCarlo, "mc", "fastpp.MonteCarlo")
    path = file_path(path)
    plt = _pyplot()
    what, makespan, start, end = mc.shaded()
    sched, share = mc.schedule, mc.criticality
    fig, ax = plt.subplots(figsize=(min(40.0, 4.0 + 0.12 * sched.length.max()),
                                    0.45 * sched.p + 1.4))
    fig.subplots_adjust(left=0.12, right=0.99, bottom=0.2, top=0.86)
    cmap = plt.get_cmap("Reds")
    for r in range(sched.p):
        L = sched.length[r]
        starts, ends = start[r, :L], end[r, :L]
        ax.broken_barh(list(zip(starts, ends - starts, strict=True)), (r - 0.4, 0.8),
                       facecolors=[cmap(0.1 + 0.9 * x) for x in share[r, :L]],
                       edgecolor="white", linewidth=0.5)
    ax.set_yticks(range(sched.p), [f"device {r}" for r in range(sched.p)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, makespan)
    ax.set_xlabel(f"time ({what})")
    ax.set_title(f"{sched.name}: criticality over {mc.samples} samples (dark: on the "
                 f"critical path of every sample)", fontsize=10)
    return _save(plt, fig, path)
