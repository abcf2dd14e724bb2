"""``sweep``: chunks of points validated, simulated on threads (or Dask) and gathered."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from ..checks import (
    ScheduleError,
    flag,
    known_keywords,
    one_of,
    positive_int,
    progress_bar,
    require,
)
from ..montecarlo import DEFAULT_SAMPLES, check_noise
from .chunk import Chunk, empty_frame
from .cluster import run_on_dask
from .points import DEFAULTS, GridPlan, TablePlan, chunk_len
from .robust import NOISE_COLUMNS, add_noise, noise_fits
from .store import SkipReasons, Store
from .warmup import warm_up

MAX_CHUNK = 1_000_000  # points a chunk holds at most


@known_keywords("sweep")
def sweep(schedules=None, p=None, n=None, m=None, *, n_per_p=None, G=None,
          costs=None, f=None, b=None, w=None, i=None, comm=None, gamma=None, fb=None, act=None,
          bandwidth=None, message_bytes=None, overhead=None, send=None, points=None, out=None,
          resume: bool = False, chunk_size: int = 4096, workers: int | None = None,
          executor: str = "threads", scheduler: str | None = None, progress: bool = True,
          invalid: str = "drop", collect: bool = True, noise=None,
          samples: int | None = None, seed: int = 0, check_only: bool = False):
    """Simulate every point of a grid or a table and return one row per point.

    With no arguments: every schedule at ``p`` in 2, 4, 8 and ``n`` = 1, 2, 4 times ``p``,
    each with its own chunk count, ``f=1, b=2``.

    Parameters
    ----------
    schedules : str or list of str, optional
        Registered names (default: all of ``fastpp.SCHEDULES``).
    p, n, m : int or list of int
        Devices, microbatches, chunks per device: the grid's axes (``p`` default ``(2, 4,
        8)``). ``m=None`` gives each schedule its own (``ScheduleSpec.default_m``: 2 for
        the V-shaped and interleaved ones and looped BFS).
    n_per_p : int or list of int, optional
        Microbatches as multiples of ``p`` (``n = k * p``), instead of ``n``; the default
        when neither is given is ``(1, 2, 4)``.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).
    costs : fastpp.Costs or list of fastpp.Costs, optional
        Costs as a grid axis, any field an array over devices or stages, activations in any
        unit (bytes give byte peaks); instead of the scalar keywords below. The rows then
        have a ``costs`` column (the position in this list) and the scalar cost columns hold a
        field's value, or NaN where it is an array. A point whose arrays do not fit its
        ``p`` or ``V`` is an invalid point with its reason.
    f, b, w, i, comm, gamma, fb, act, bandwidth, message_bytes, overhead, send : float or list
        Scalar costs, each a grid axis, as for ``fastpp.Costs`` (defaults ``f=1, b=2``, the
        rest ``Costs``'s own: ``i``, ``fb`` and ``bandwidth`` not given, as ``None`` or NaN
        in an axis, the rows' mark for a field not given); ``overhead`` and
        ``send`` the same for every op kind (a ``Costs`` axis gives one per kind).
    points : pandas.DataFrame, optional
        An explicit table instead of a grid: columns ``schedule, p, n, m`` and optionally
        ``G`` and either cost columns (missing ones take the keyword values) or a ``costs``
        column of ``fastpp.Costs``.
    out : path, optional
        A new or empty folder for the results: one Parquet file per chunk (CSV without
        pyarrow), readable as one dataset by ``pandas.read_parquet(out)``, DuckDB and Dask;
        what resuming needs sits in ``out/_fastpp/``.
    resume : bool
        Continue the sweep already in ``out``, recomputing only missing or damaged chunks.
    chunk_size : int
        Points per chunk (a chunk is the unit of progress, of writing and of Dask tasks), at
        most 1,000,000.
    workers : int, optional
        Threads (or Dask workers of a local cluster); default: the machine's cores.
    executor : {"threads", "dask"}
        Where chunks run. ``"dask"`` uses the cluster at ``scheduler``, or starts a
        ``LocalCluster`` on 127.0.0.1.
    scheduler : str, optional
        Address of a Dask scheduler.
    progress : bool
        Show a progress bar.
    invalid : {"drop", "keep"}
        Points that break a schedule's constraints (or have ``w > b``) are dropped and counted
        in ``df.attrs["skipped"]`` (with ``df.attrs["skip_reasons"]``), or kept with their
        ``reason`` and no numbers.
    collect : bool
        Return the table; ``False`` returns ``None`` and leaves the rows only in ``out``
        (memory stays bounded however many points there are).
    noise : fastpp.Noise, optional
        Also run each point's Monte Carlo (``fastpp.simulate`` with ``noise``, ``samples``
        and ``seed``; the schedule built once per ``(schedule, p, n, m, G)``): the rows gain
        ``makespan_mean``, ``makespan_std``, ``makespan_p50`` and ``makespan_p95``. Every
        point draws under the same seed (common random numbers). Without it nothing changes.
        It must fit every point (its slow devices and stages, its delayed links, an
        empirical run's ``p`` and ``m``): checked before any point runs.
    samples : int, optional
        Monte Carlo samples per point (with ``noise`` only: default 64).
    seed : int, default 0
        The Monte Carlo's seed (with ``noise``).
    check_only : bool, default False
        Check every argument, raising what the sweep would, and return None without
        sweeping or compiling: a caller that compiles the kernels apart (``warm_up``, as
        ``scripts/sweep.py`` does to time them) refuses bad input before that work.

    Returns
    -------
    pandas.DataFrame or None
        Columns ``COLUMNS``: ``point`` (index in the grid or table), the inputs (every cost
        field among them), ``makespan``,
        ``bubble_ratio``, ``span_bubble_ratio``, ``peak_activations_max``,
        ``peak_activations_min``, ``peak_live_max``, ``throughput`` (``n / makespan``),
        ``num_ops``, ``parameter_units``, with ``invalid="keep"``, ``reason``, and with
        ``noise`` the ``NOISE_COLUMNS`` above.

    Raises
    ------
    ScheduleError
        For an unknown schedule, a cost that is negative or not finite, or bad options; a
        ``noise`` that some point's pipeline cannot take, or more ``samples`` than the widest
        one's result keeps; for an ``out`` another process's sweep is writing, or a resume by
        another fastpp.

    Examples
    --------
    >>> import fastpp
    >>> df = fastpp.sweep(["1f1b", "zb-h1"], p=4, n=8, w=1.0, progress=False)  # f=1, b=2
    >>> df[["schedule", "makespan", "peak_activations_max"]].values.tolist()
    [['1f1b', 33.0, 4.0], ['zb-h1', 27.0, 4.0]]
    """
    pd = require("pandas", "sweep", "fastpp.sweep")

    one_of(invalid, "invalid", ("drop", "keep"))
    one_of(executor, "executor", ("threads", "dask"))
    progress, collect = flag(progress, "progress"), flag(collect, "collect")
    resume = flag(resume, "resume")
    if resume and out is None:
        raise ScheduleError("resume=True needs out=, the folder of the sweep to continue (got "
                            "out=None)")
    if scheduler is not None and executor != "dask":
        raise ScheduleError(f"scheduler is Dask's address, for executor='dask' only (got "
                            f"scheduler={scheduler!r} with executor={executor!r})")
    if scheduler is not None and not (isinstance(scheduler, str) and scheduler.strip()):
        raise ScheduleError(f"scheduler must be a Dask scheduler's address, such as "
                            f"'tcp://host:8786' (got {scheduler!r})")
    if executor == "dask":
        require("dask.distributed", "dask", "executor='dask'", "Dask")
    # (a chunk's points and rows are built at once: 10**9 asked for 7 GiB)
    chunk_size = positive_int(chunk_size, "chunk_size", MAX_CHUNK)
    workers = (os.cpu_count() or 1) if workers is None else positive_int(workers, "workers")
    plan = _points(schedules, p, n, n_per_p, m, G, points, costs,
                   dict(f=f, b=b, w=w, i=i, comm=comm, gamma=gamma, fb=fb, act=act,
                        bandwidth=bandwidth, message_bytes=message_bytes, overhead=overhead,
                        send=send))
    samples, seed = check_noise(noise, samples, seed, DEFAULT_SAMPLES, "point", rows="sweep")
    if noise is not None:
        noise_fits(noise, samples, plan)
    if noise is not None and out is not None:  # the store's fingerprint knows the points,
        # not the noise
        raise ScheduleError("noise cannot be combined with out= (a stored sweep holds "
                            "deterministic rows only); got both")
    if not collect and out is None:  # (the whole sweep ran, and nothing was kept)
        raise ScheduleError("collect=False keeps the rows in out= alone: give out= (got "
                            "out=None)")
    # invalid= decides which rows a chunk holds: a resume with the other one mixed both
    identity = f"{plan.fingerprint}/{invalid}"
    if flag(check_only, "check_only"):
        if out is not None:  # what opening the folder would refuse, without taking it
            Store.check(out, identity, plan.total, chunk_size, resume)
        return None
    store = (Store(out, identity, plan.total, chunk_size, resume)
             if out is not None else None)
    try:  # the folder is this process's until it returns (or stops)
        n_chunks = -(-plan.total // chunk_size)
        todo = [c for c in range(n_chunks) if store is None or not store.has(c)]
        parts: dict[int, pd.DataFrame] = {}
        skipped: dict[int, dict[str, int]] = {}

        def finished(c, frame, reasons):
            if noise is not None:
                frame = add_noise(frame, noise, samples, seed, plan.objects)
            if store is not None:
                store.write(c, frame, reasons)
            skipped[c] = reasons
            if collect:
                parts[c] = frame

        if executor == "threads" and todo:
            warm_up(announce=progress, schedules=plan.schedules)
        done = plan.total - sum(chunk_len(c, chunk_size, plan.total) for c in todo)
        bar = progress_bar(plan.total, progress, initial=done, unit="pt", desc="sweep")
        try:
            if executor == "threads":
                _run_on_threads(plan, todo, chunk_size, invalid, workers, finished, bar)
            else:
                for c, frame, reasons in run_on_dask(plan, todo, chunk_size, invalid, workers,
                                                     scheduler, announce=progress):
                    finished(c, frame, reasons)
                    bar.update(chunk_len(c, chunk_size, plan.total))
        finally:
            bar.close()
        if not collect:
            return None
        for c in range(n_chunks):  # chunks done by an earlier run come from disk
            if c not in parts:
                parts[c], skipped[c] = store.read(c), store.skipped(c)
        df = _gather([parts[c] for c in range(n_chunks)], skipped.values(), invalid,
                     plan.objects is not None, noise is not None)
        if store is not None:  # the rows an earlier run computed (said apart from this run's)
            earlier = set(range(n_chunks)).difference(todo)
            df.attrs["resumed"] = sum(len(parts[c]) for c in earlier if parts[c] is not None)
        return df
    finally:
        if store is not None:
            store.close()


def _points(schedules, p, n, n_per_p, m, G, points, costs, given):
    """The sweep's points: a ``TablePlan`` of ``points`` or a ``GridPlan`` of the axes, the
    scalar costs not ``given`` (``None``) taking their defaults; costs and scalars exclude
    each other."""
    if costs is not None and any(v is not None for v in given.values()):
        raise ScheduleError(f"give costs or the scalar costs {', '.join(given)}, not both "
                            f"(got costs and {[k for k, v in given.items() if v is not None]})")
    scalars = {k: DEFAULTS[k] if v is None else v for k, v in given.items()}
    if points is None:
        return GridPlan(schedules, (2, 4, 8) if p is None else p, n, n_per_p, m, G, scalars,
                        costs)
    plan = TablePlan(points, scalars, costs)
    # the table gives its points and its cost columns: a grid axis or a keyword for one of
    # those columns would be dropped
    axes = dict(schedules=schedules, p=p, n=n, n_per_p=n_per_p, m=m, G=G)
    dropped = [k for k, v in axes.items() if v is not None]
    # (a costs column holds every cost: a scalar beside it was dropped too)
    dropped += [k for k, v in given.items() if v is not None and (
        k in points.columns or "costs" in points.columns)]
    if dropped:
        raise ScheduleError(f"{dropped[0]} must not be given with points, whose table gives "
                            f"the points and its cost columns (got {', '.join(dropped)} beside "
                            f"points)")
    return plan


def _run_on_threads(plan, todo, chunk_size, invalid, workers, finished, bar):
    """Run the chunks ``todo`` on a thread pool, handing each chunk's ``(frame, reasons)`` to
    ``finished`` in order.

    A pipeline: while one chunk runs on the pool, this thread hands on the previous one and
    validates the next (the kernels release the GIL).
    """
    with ThreadPoolExecutor(workers) as pool:
        try:
            running = None
            for c in [*todo, None]:
                started = None if c is None else Chunk(plan.chunk(c, chunk_size), plan.objects,
                                                       pool, workers)
                if running is not None:
                    finished(running[0], *running[1].result(invalid))
                    bar.update(chunk_len(running[0], chunk_size, plan.total))
                running = None if c is None else (c, started)
        except BaseException:
            # a Ctrl-C drops the slices not started (the pool's exit had run up to two
            # chunks' worth first: 1.6-6.6 s of a default sweep, their rows then discarded)
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _gather(parts, skipped, invalid, objects, noise):
    """One frame of the chunks' frames ``parts`` (in chunk order), with the skipped points'
    counts (``df.attrs["skipped"]`` and ``df.attrs["skip_reasons"]``) summed over the chunks'
    ``skipped`` counts by reason."""
    import pandas as pd  # sweep has required it

    # chunks of only invalid points are empty: an empty frame has no dtypes to keep
    frames = [part for part in parts if part is not None and len(part)]
    df = pd.concat(frames, ignore_index=True) if frames else empty_frame(invalid, objects)
    if noise and not frames:
        df = df.assign(**{k: [] for k in NOISE_COLUMNS})
    reasons: dict[str, int] = {}
    for counts in skipped:
        for reason, count in counts.items():
            reasons[reason] = reasons.get(reason, 0) + count
    df.attrs["skipped"] = sum(reasons.values())
    df.attrs["skip_reasons"] = SkipReasons(reasons)
    return df
