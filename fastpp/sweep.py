"""Sweeps: thousands of ``(schedule, p, n, m, costs)`` points, simulated inside Numba.

``sweep`` takes a cartesian grid (each argument a value or a list) or an explicit table of
points, cuts the points into chunks, simulates each chunk on a pool of threads (the kernels
release the GIL) or on a Dask cluster, and returns one row per point. With ``out`` every chunk
is written to its own file as it finishes, so an interrupted sweep resumed with
``resume=True`` recomputes only the chunks that are missing or damaged and ends with every row
exactly once. Needs the ``sweep`` extra (pandas, pyarrow, tqdm).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np

from . import batch
from ._jit import CACHE_DIR
from .costs import Costs
from .generators.registry import SCHEDULES, build_schedule, get_spec
from .schedule import ScheduleError
from .simulate import simulate

INPUTS = ("schedule", "p", "n", "m", "G", "f", "b", "w", "comm", "gamma", "fb")
COSTS = ("f", "b", "w", "comm", "gamma", "fb")
_NAMES = np.array(list(SCHEDULES), dtype=object)
_MIN_SLICE = 64  # the fewest points a thread takes at a time


def sweep(schedules=None, p=(2, 4, 8), n=None, m=(1, 2), *, n_per_p=None, G=None,
          f=1.0, b=2.0, w=0.0, comm=0.0, gamma=1.0, fb=None, points=None, out=None,
          resume: bool = False, chunk_size: int = 4096, workers: int | None = None,
          executor: str = "threads", scheduler: str | None = None, progress: bool = True,
          invalid: str = "drop", collect: bool = True):
    """Simulate every point of a grid or a table and return one row per point.

    Parameters
    ----------
    schedules : str or list of str, optional
        Registered names (default: all of ``fastpp.SCHEDULES``).
    p, n, m : int or list of int
        Devices, microbatches, chunks per device: the grid's axes.
    n_per_p : int or list of int, optional
        Microbatches as multiples of ``p`` (``n = k * p``), instead of ``n``.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).
    f, b, w, comm, gamma, fb : float or list of float
        Costs, as for ``fastpp.Costs`` (``fb=None``: the overlapped pair takes ``f + b``).
    points : pandas.DataFrame, optional
        An explicit table instead of a grid: columns ``schedule, p, n, m`` and optionally
        ``G`` and cost columns (missing costs take the keyword values).
    out : path, optional
        A folder for the results: one file per chunk (Parquet, or CSV without pyarrow) and a
        manifest naming the sweep.
    resume : bool
        Continue the sweep already in ``out``, recomputing only missing or damaged chunks.
    chunk_size : int
        Points per chunk (a chunk is the unit of progress, of writing and of Dask tasks).
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

    Returns
    -------
    pandas.DataFrame or None
        Columns: ``point`` (index in the grid or table), the inputs, ``makespan``,
        ``bubble_ratio``, ``span_bubble_ratio``, ``peak_activations_max``,
        ``peak_activations_min``, ``peak_live_max``, ``throughput`` (``n / makespan``),
        ``num_ops``, ``parameter_units`` and, with ``invalid="keep"``, ``reason``.

    Raises
    ------
    ScheduleError
        For an unknown schedule, a cost that is negative or not finite, or bad options.
    """
    import pandas as pd

    if invalid not in ("drop", "keep"):
        raise ScheduleError(f"invalid must be 'drop' or 'keep' (got {invalid!r})")
    if executor not in ("threads", "dask"):
        raise ScheduleError(f"executor must be 'threads' or 'dask' (got {executor!r})")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ScheduleError(f"chunk_size must be a positive integer (got {chunk_size!r})")
    costs = dict(f=f, b=b, w=w, comm=comm, gamma=gamma, fb=fb)
    plan = (_TablePlan(points, costs) if points is not None else
            _GridPlan(schedules, p, n, n_per_p, m, G, costs))
    workers = workers or os.cpu_count() or 1
    store = _Store(Path(out), plan, chunk_size, resume) if out is not None else None
    n_chunks = -(-plan.total // chunk_size)
    todo = [c for c in range(n_chunks) if store is None or not store.has(c)]
    parts: dict[int, pd.DataFrame] = {}
    skipped: dict[int, dict[str, int]] = {}

    def finished(c, frame, reasons):
        if store is not None:
            store.write(c, frame, reasons)
        skipped[c] = reasons
        if collect:
            parts[c] = frame

    if executor == "threads" and todo:
        warm_up(announce=progress)
    done = plan.total - sum(_chunk_len(c, chunk_size, plan.total) for c in todo)
    bar = _progress(plan.total, progress, done=done)
    try:
        if executor == "threads":
            with ThreadPoolExecutor(workers) as pool:
                # a pipeline: while one chunk runs on the pool, this thread writes the
                # previous one and validates the next (the kernels release the GIL)
                running = None
                for c in [*todo, None]:
                    started = None if c is None else _Chunk(plan.chunk(c, chunk_size), pool,
                                                            workers)
                    if running is not None:
                        finished(running[0], *running[1].result(invalid))
                        bar.update(_chunk_len(running[0], chunk_size, plan.total))
                    running = None if c is None else (c, started)
        else:
            for c, frame, reasons in _run_on_dask(plan, todo, chunk_size, invalid, workers,
                                                  scheduler):
                finished(c, frame, reasons)
                bar.update(_chunk_len(c, chunk_size, plan.total))
    finally:
        bar.close()
    if not collect:
        return None
    for c in range(n_chunks):  # chunks done by an earlier run come from disk
        if c not in parts:
            parts[c], skipped[c] = store.read(c), store.skipped(c)
    # chunks of only invalid points are empty: an empty CSV has no dtypes to keep
    frames = [parts[c] for c in range(n_chunks) if len(parts[c])]
    df = pd.concat(frames, ignore_index=True) if frames else _empty_frame(invalid)
    reasons: dict[str, int] = {}
    for counts in skipped.values():
        for reason, count in counts.items():
            reasons[reason] = reasons.get(reason, 0) + count
    df.attrs["skipped"] = sum(reasons.values())
    df.attrs["skip_reasons"] = reasons
    return df


def pareto_front(df, x: str = "peak_activations_max", y: str = "bubble_ratio"):
    """Rows of ``df`` not dominated in ``(x, y)`` (smaller is better in both), sorted by ``x``."""
    ordered = df.sort_values([x, y], kind="stable")
    values = ordered[y].to_numpy()
    keep = np.r_[True, values[1:] < np.minimum.accumulate(values)[:-1]]
    return ordered[keep]


def best_within_budget(df, budget="1f1b", by=("p", "n")):
    """Per group of ``by``, the fastest row whose peak activation memory fits the budget.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep's table.
    budget : str or float
        A schedule name (its peak in the same group is the budget; default ``"1f1b"``), or a
        number of activation units.
    by : tuple of str
        The columns that make a group.

    Returns
    -------
    pandas.DataFrame
        One row per group with the best point and a ``budget`` column; groups where nothing
        fits are left out.
    """
    by = list(by)
    data = df.copy()
    if isinstance(budget, str):
        ref = data[data["schedule"] == budget].groupby(by)["peak_activations_max"].min()
        data = data.join(ref.rename("budget"), on=by)
    else:
        data["budget"] = float(budget)
    fits = data[data["peak_activations_max"] <= data["budget"] + 1e-12]
    best = fits.sort_values(["makespan", "peak_activations_max"], kind="stable")
    return best.groupby(by, sort=True).head(1).sort_values(by).reset_index(drop=True)


# -- the points of a sweep --------------------------------------------------------------------


def _as_list(value, name: str) -> list:
    values = list(value) if isinstance(value, Sequence | np.ndarray) and not isinstance(
        value, str) else [value]
    if not values:
        raise ScheduleError(f"{name} must hold at least one value (got an empty list)")
    return values


def _check_ints(name: str, values) -> np.ndarray:
    """Positive and below 2**31, so that products like ``n_per_p * p`` cannot wrap."""
    arr = np.asarray(values)
    if (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 1)
            or np.any(arr >= 2**31)):
        raise ScheduleError(f"{name} must hold positive integers below 2**31 (got "
                            f"{list(values)[:8]})")
    return arr.astype(np.int64)


def _check_costs(name: str, values) -> np.ndarray:
    """Finite, >= 0 (> 0 for f, b, fb), gamma <= 1; ``fb`` NaN means "not given"."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ScheduleError(f"{name} must hold numbers (got {list(values)[:8]})") from None
    given = ~np.isnan(arr) if name == "fb" else np.ones(arr.shape, bool)
    strict = name in ("f", "b", "fb")
    bad = given & (~np.isfinite(arr) | ((arr <= 0) if strict else (arr < 0)))
    if name == "gamma":
        bad |= arr > 1
    if np.any(bad):
        need = {"gamma": "in [0, 1]"}.get(name, "finite and > 0" if strict else "finite and >= 0")
        raise ScheduleError(f"{name} must be {need} (got {arr[bad][0]})")
    return arr


class _GridPlan:
    """A cartesian grid, never materialized: chunk ``c`` unravels its own indices."""

    def __init__(self, schedules, p, n, n_per_p, m, G, costs):
        names = list(SCHEDULES) if schedules is None else _as_list(schedules, "schedules")
        sids = [get_spec(name).sid for name in names]
        if (n is None) == (n_per_p is None):
            raise ScheduleError("give exactly one of n and n_per_p (got "
                                f"n={n!r}, n_per_p={n_per_p!r})")
        self.relative = n is None
        self.axes = {
            "schedule": np.array(sids, np.int64),
            "p": _check_ints("p", _as_list(p, "p")),
            "n": _check_ints("n_per_p" if self.relative else "n",
                             _as_list(n_per_p if self.relative else n, "n")),
            "m": _check_ints("m", _as_list(m, "m")),
        }
        for name in COSTS:
            value = costs[name]
            values = [np.nan if v is None else v for v in _as_list(value, name)]
            self.axes[name] = _check_costs(name, values)
        self.G = None if G is None else int(_check_ints("G", [G])[0])
        self.shape = tuple(len(v) for v in self.axes.values())
        self.total = int(np.prod(self.shape))
        key = {k: v.tolist() for k, v in self.axes.items()}
        key.update(relative=self.relative, G=self.G, names=[_NAMES[s] for s in sids])
        self.fingerprint = _digest(json.dumps(key, sort_keys=True, default=str))

    def chunk(self, c: int, size: int) -> dict[str, np.ndarray]:
        index = np.arange(c * size, min((c + 1) * size, self.total))
        cols = {name: values[i] for (name, values), i in
                zip(self.axes.items(), np.unravel_index(index, self.shape), strict=True)}
        if self.relative:
            cols["n"] = cols["n"] * cols["p"]
        cols["G"] = cols["p"].copy() if self.G is None else np.full(len(index), self.G)
        cols["point"] = index
        return cols


class _TablePlan:
    """An explicit table of points."""

    def __init__(self, points, costs):
        import pandas as pd

        if not isinstance(points, pd.DataFrame):
            raise ScheduleError(f"points must be a pandas DataFrame (got {type(points).__name__})")
        missing = [c for c in ("schedule", "p", "n", "m") if c not in points.columns]
        if missing:
            raise ScheduleError(f"points must have the columns schedule, p, n, m (missing "
                                f"{missing})")
        unknown = sorted(set(points.columns) - set(INPUTS))
        if unknown:
            raise ScheduleError(f"points may only have the columns {list(INPUTS)} (got "
                                f"{unknown})")
        self.total = len(points)
        names = points["schedule"].to_numpy(dtype=object)
        for name in pd.unique(names):
            get_spec(name)
        self.cols = {"schedule": np.array([SCHEDULES[x].sid for x in names], np.int64)}
        for name in ("p", "n", "m"):
            self.cols[name] = _check_ints(name, points[name].to_numpy())
        self.cols["G"] = (_check_ints("G", points["G"].to_numpy()) if "G" in points else
                          self.cols["p"].copy())
        for name in COSTS:
            if name in points:
                self.cols[name] = _check_costs(name, points[name].to_numpy(dtype=np.float64))
            else:
                value = np.nan if costs[name] is None else costs[name]
                if not np.isscalar(value):
                    raise ScheduleError(f"{name} must be one value when points are given "
                                        f"(got {value!r}); add a '{name}' column instead")
                self.cols[name] = _check_costs(name, np.full(self.total, value, np.float64))
        self.cols["point"] = np.arange(self.total)
        frame = pd.DataFrame({k: self.cols[k] for k in (*INPUTS, "point")})
        self.fingerprint = _digest(pd.util.hash_pandas_object(frame, index=False).to_numpy())

    def chunk(self, c: int, size: int) -> dict[str, np.ndarray]:
        return {k: v[c * size: (c + 1) * size] for k, v in self.cols.items()}


def _digest(data) -> str:
    raw = data.encode() if isinstance(data, str) else np.ascontiguousarray(data).tobytes()
    return hashlib.sha256(raw).hexdigest()[:32]


def _chunk_len(c: int, size: int, total: int) -> int:
    return min((c + 1) * size, total) - c * size


# -- running a chunk ---------------------------------------------------------------------------


def _by_schedule(cols: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group the points by schedule ``(schedule, p, n, m, G)``: each point's group, and one
    point of each group. A grid's cost axes repeat every schedule many times."""
    keys = [cols[k] for k in ("schedule", "p", "n", "m", "G")]
    by_key = np.lexsort(keys[::-1])
    first = np.zeros(len(by_key), bool)  # a group's first point, in key order
    first[:1] = True
    for key in keys:
        ordered = key[by_key]
        first[1:] |= ordered[1:] != ordered[:-1]
    group = np.empty(len(by_key), np.int64)
    group[by_key] = np.cumsum(first) - 1
    return group, by_key[first]


def _reasons(cols: dict[str, np.ndarray], group: np.ndarray, one: np.ndarray) -> np.ndarray:
    """Per point, why it cannot run ("" when it can): the schedule's rules (checked once per
    group), then w <= b."""
    sid = cols["schedule"][one]
    per_group = np.full(len(one), "", dtype=object)
    for s in np.unique(sid):
        mine = sid == s
        sel = one[mine]
        per_group[mine] = SCHEDULES[_NAMES[s]].reasons(cols["p"][sel], cols["n"][sel],
                                                       cols["m"][sel], cols["G"][sel])
    reasons = per_group[group]
    bad_w = (reasons == "") & (cols["w"] > cols["b"])
    reasons[bad_w] = "w must be <= b"
    return reasons


class _Chunk:
    """One chunk: validated and started on construction, turned into a frame by ``result``."""

    def __init__(self, cols: dict[str, np.ndarray], pool=None, threads: int = 1):
        self.cols = cols
        group, one = _by_schedule(cols)
        self.reasons = _reasons(cols, group, one)
        self.ok = self.reasons == ""
        valid = {k: v[self.ok] for k, v in cols.items()}
        count = len(valid["point"])
        self.values = np.empty((count, len(batch.COLUMNS)))
        # points that share a schedule stay together (one build serves them all); a fixed
        # shuffle of the schedules spreads large and small points over the slices
        rank = np.random.default_rng(count).permutation(len(one))
        order = np.argsort(rank[group[self.ok]], kind="stable")
        fb = np.where(np.isnan(valid["fb"]), -1.0, valid["fb"])
        args = [np.ascontiguousarray(valid[k]) for k in ("schedule", "p", "n", "m", "G", "f",
                                                          "b", "w", "comm", "gamma")]

        def run(index):
            batch.simulate_points(*args, fb, index, self.values)

        if pool is None:
            run(order)
            self.jobs = []
        else:  # about four slices per thread: each slice's end waits for the GIL
            size = max(_MIN_SLICE, -(-count // (4 * threads)))
            self.jobs = [pool.submit(run, order[i: i + size]) for i in range(0, count, size)]

    def result(self, invalid: str):
        """The chunk's frame and the count of each skip reason."""
        import pandas as pd

        for job in self.jobs:
            job.result()
        cols, reasons, ok, values = self.cols, self.reasons, self.ok, self.values
        if np.any(values[:, -1] != batch.OK):
            raise RuntimeError("a generated schedule deadlocked: a fastpp bug, please report it")
        skipped = Counter(reasons[~ok].tolist())
        keep = invalid == "keep"
        rows = np.arange(len(reasons)) if keep else np.flatnonzero(ok)
        metrics = np.full((len(rows), len(batch.COLUMNS) - 1), np.nan)
        metrics[ok[rows] if keep else slice(None)] = values[:, :-1]
        data = {"point": cols["point"][rows],
                "schedule": pd.Series(_NAMES[cols["schedule"][rows]], dtype=object).astype(str),
                **{k: cols[k][rows] for k in INPUTS[1:]}}
        for i, name in enumerate(batch.COLUMNS[:-1]):  # one frame, built once: inserting
            if name == "num_ops":                        # column by column costs ~1 ms each
                data["throughput"] = data["n"] / data["makespan"]
            integer = name in ("peak_live_max", "num_ops") and not keep
            data[name] = metrics[:, i].astype(np.int64) if integer else metrics[:, i]
        if keep:
            data["reason"] = reasons[rows]
        return pd.DataFrame(data), dict(skipped)


def _empty_frame(invalid: str):
    import pandas as pd

    columns = ["point", *INPUTS, *batch.COLUMNS[:6], "throughput", *batch.COLUMNS[6:8]]
    return pd.DataFrame(columns=columns + (["reason"] if invalid == "keep" else []))


def _progress(total: int, enabled: bool, done: int):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the bar is a nicety, not a requirement
        enabled = False
    if not enabled:
        return _NoBar()
    return tqdm(total=total, initial=done, unit="pt", desc="sweep", dynamic_ncols=True)


class _NoBar:
    def update(self, k):
        pass

    def close(self):
        pass


# -- compiling ------------------------------------------------------------------------------


# On an empty kernel cache a second process compiles these generators while this one compiles
# the others and the simulation kernels: Numba compiles one function at a time per process.
# (V-Half and V-Min share one generator, as do DualPipe and DualPipeV.)
_SECOND_PROCESS = ("v-half", "v-min", "dualpipe", "dualpipev")
_warm = False


def warm_up(announce: bool = False) -> bool:
    """Compile the sweep kernel, or load it from the kernel cache, in this process.

    Runs before a sweep's first chunk and once on every Dask worker. With an empty cache the
    generators compile in two processes at once (a marker in the cache folder says when the
    kernel is there), then the sweep kernel, which finds its callees in the cache: the same
    functions with the same types as ``build_schedule`` and ``simulate`` compile.

    Parameters
    ----------
    announce : bool
        Say on stderr when the kernels compile (once per machine, about half a minute).

    Returns
    -------
    bool
        True (for ``dask.distributed.Client.run``).
    """
    global _warm
    if _warm:
        return True
    ready = Path(CACHE_DIR) / "sweep-kernel.ready"
    if not ready.exists():
        if announce:
            print("fastpp: compiling the kernels for this machine, once (about half a "
                  "minute)", file=sys.stderr, flush=True)
        helper = None
        if sys.executable:  # the same fastpp, whatever the working folder
            path = os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                    os.environ.get("PYTHONPATH", "")])
            code = f"from fastpp.sweep import _build_small; _build_small({_SECOND_PROCESS!r})"
            helper = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL,
                                      env=dict(os.environ, PYTHONPATH=path))
        _build_small([n for n in SCHEDULES if n not in _SECOND_PROCESS], run=True)
        if helper is not None:
            try:  # whatever it did not finish compiles in the kernel below
                helper.wait(timeout=600)
            except subprocess.TimeoutExpired:
                helper.kill()
    cols = {"schedule": np.array([0]), "p": np.array([1]), "n": np.array([1]),
            "m": np.array([1]), "G": np.array([1]), "f": np.array([1.0]),
            "b": np.array([2.0]), "w": np.array([0.0]), "comm": np.array([0.0]),
            "gamma": np.array([1.0]), "fb": np.array([np.nan]), "point": np.array([0])}
    _Chunk(cols)
    if not numba.config.DISABLE_JIT:  # (without the JIT nothing was compiled)
        Path(CACHE_DIR).mkdir(parents=True, exist_ok=True)
        ready.touch()
    _warm = True
    return True


def _build_small(names, run: bool = False) -> None:
    """Build (and with ``run`` simulate) a small point of each schedule: compiles them."""
    for name in names:
        spec = SCHEDULES[name]
        m = next(m for m in (1, 2) if not spec.reasons(4, 8, m, 4)[0])
        schedule = build_schedule(name, 4, 8, m)
        if run:
            simulate(schedule, Costs(1.0, 2.0, 1.0))


# -- Dask -----------------------------------------------------------------------------------


def _dask_task(cols, invalid):
    return _Chunk(cols).result(invalid)


def _run_on_dask(plan, todo, chunk_size, invalid, workers, scheduler) -> Iterator:
    """Yield ``(chunk, frame, reasons)`` as the cluster finishes them, a few in flight."""
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1",
                               dashboard_address=None, processes=True)
    client = Client(scheduler if scheduler is not None else cluster)
    try:
        if cluster is not None:
            warm_up()  # compiled here once, the local workers load the kernels from the cache
        client.run(warm_up)  # every worker compiles or loads the kernels once
        pending = iter(todo)
        window = as_completed()
        for c in itertools.islice(pending, 2 * max(1, len(client.scheduler_info()["workers"]))):
            window.add(_submit(client, plan, c, chunk_size, invalid))
        for future in window:
            c, (frame, reasons) = future.key_chunk, future.result()
            yield c, frame, reasons
            nxt = next(pending, None)
            if nxt is not None:
                window.add(_submit(client, plan, nxt, chunk_size, invalid))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _submit(client, plan, c, chunk_size, invalid):
    future = client.submit(_dask_task, plan.chunk(c, chunk_size), invalid, pure=False)
    future.key_chunk = c
    return future


# -- the output folder ----------------------------------------------------------------------


class _Store:
    """One file per chunk beside a manifest naming the sweep.

    Chunk ``c`` is ``part-c.parquet`` (or ``.csv``) plus ``part-c.json`` (its row count and
    skipped points), each written through a temporary file and renamed, the JSON last. A chunk
    counts as done only when both exist and the part reads back with that row count, so a
    sweep killed at any moment, or a file damaged on disk, costs at most a recomputation.
    """

    def __init__(self, folder: Path, plan, chunk_size: int, resume: bool):
        try:
            import pyarrow  # noqa: F401

            fmt = "parquet"
        except ImportError:
            fmt = "csv"
        manifest = {"fingerprint": plan.fingerprint, "points": plan.total,
                    "chunk_size": chunk_size}
        path = folder / "manifest.json"
        if path.exists():
            old = json.loads(path.read_text())
            if not resume:
                raise ScheduleError(f"out {str(folder)!r} already holds a sweep; pass "
                                    "resume=True to continue it or choose another folder")
            if {k: old.get(k) for k in manifest} != manifest:
                raise ScheduleError(f"out {str(folder)!r} holds a different sweep (other "
                                    "points or chunk size); resume needs the same arguments")
            fmt = old["format"]
        folder.mkdir(parents=True, exist_ok=True)
        manifest["format"] = fmt
        _atomic_write(path, lambda tmp: tmp.write_text(json.dumps(manifest, indent=1)))
        self.folder, self.format = folder, fmt

    def _part(self, c: int) -> Path:
        return self.folder / f"part-{c:06d}.{self.format}"

    def _meta(self, c: int) -> Path:
        return self.folder / f"part-{c:06d}.json"

    def has(self, c: int) -> bool:
        """Is chunk ``c`` complete on disk? A damaged chunk is removed, to be recomputed."""
        try:
            rows = json.loads(self._meta(c).read_text())["rows"]
            if self.format == "parquet":
                import pyarrow.parquet as pq

                ok = pq.read_metadata(self._part(c)).num_rows == rows
            else:
                ok = len(self.read(c)) == rows
        except Exception:  # missing, truncated or garbled
            ok = False
        if not ok:
            self._part(c).unlink(missing_ok=True)
            self._meta(c).unlink(missing_ok=True)
        return ok

    def write(self, c: int, frame, skipped: dict[str, int]) -> None:
        if self.format == "parquet":
            _atomic_write(self._part(c), lambda tmp: frame.to_parquet(tmp, index=False))
        else:
            _atomic_write(self._part(c), lambda tmp: frame.to_csv(tmp, index=False))
        meta = json.dumps({"rows": len(frame), "skipped": skipped})
        _atomic_write(self._meta(c), lambda tmp: tmp.write_text(meta))

    def read(self, c: int):
        import pandas as pd

        path = self._part(c)
        if self.format == "parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, float_precision="round_trip")  # the exact floats written

    def skipped(self, c: int) -> dict[str, int]:
        return json.loads(self._meta(c).read_text())["skipped"]


def _atomic_write(path: Path, write) -> None:
    """Write through a temporary file and rename it, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
