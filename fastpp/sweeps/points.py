"""The points of a sweep: a cartesian grid or an explicit table, checked and cut into chunks."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence

import numpy as np

from ..checks import ScheduleError, ScheduleTypeError, numbers, positive_int, positive_ints, show
from ..costs import FIELDS, OPTIONAL, PER_KIND, Costs
from ..engine import DEFAULTS as ENGINE_DEFAULTS
from ..engine import cost_layout
from ..generators.registry import SCHEDULES, get_spec

COSTS = tuple(FIELDS)  # every fastpp.Costs field is a sweep keyword and a column
# Costs's own defaults (NaN: not given), and f=1, b=2 for the two it requires
DEFAULTS = ENGINE_DEFAULTS | {"f": 1.0, "b": 2.0}
INPUTS = ("schedule", "p", "n", "m", "G", *COSTS)
NAMES = np.array(list(SCHEDULES), dtype=object)  # schedule id -> name
DEFAULT_M = np.array([spec.default_m for spec in SCHEDULES.values()], np.int64)
DEFAULT_N_PER_P = (1, 2, 4)
# the most points a sweep takes: a chunk is numbered by an int64, and 10**10 points are days
# of work at this engine's speed (a list of their chunks would not fit in memory long before
# 2**63)
MAX_POINTS = 10**10


def as_list(value, name: str) -> list:
    """A grid axis: a value or a sequence of values (a 1-D array, a pandas Series or Index),
    at least one."""
    if hasattr(value, "__array__") and not isinstance(value, np.ndarray | np.generic):
        value = np.asarray(value)  # (a Series was one value, an Index raised IndexError)
    if isinstance(value, np.ndarray) and value.ndim != 1:  # (0-d: one value; 2-D: refused)
        if value.ndim:
            raise ScheduleError(f"{name} must be a value or a 1-D list of values (got an "
                                f"array of shape {value.shape})")
        value = value.item()
    values = list(value) if isinstance(value, Sequence | np.ndarray) and not isinstance(
        value, str) else [value]
    if not values:
        raise ScheduleError(f"{name} must hold at least one value (got an empty list)")
    nested = [v for v in values if (v.ndim > 0 if isinstance(v, np.ndarray) else
                                    isinstance(v, Sequence) and not isinstance(v, str))]
    if nested:
        raise ScheduleError(f"{name} must be a value or a 1-D list of values (got a list "
                            f"holding {show(nested[0])})")
    return values


def cost_column(name: str, values) -> np.ndarray:
    """A cost column under ``fastpp.Costs``'s rules; for ``i``, ``fb`` and ``bandwidth``, NaN
    (or None) means "not given"."""
    strict, upper = FIELDS[name]
    missing = name in OPTIONAL
    if missing and values is None:
        values = np.nan
    elif missing:
        values = [np.nan if v is None else v for v in np.atleast_1d(np.asarray(values, object))]
    return numbers(values, name, strict=strict, upper=upper, missing=missing)


class GridPlan:
    """A cartesian grid, never materialized: chunk ``c`` unravels its own indices.

    ``m=None`` gives each schedule its own ``default_m``; with neither ``n`` nor ``n_per_p``
    the grid takes ``n_per_p = (1, 2, 4)``.
    """

    def __init__(self, schedules, p, n, n_per_p, m, G, costs, objects):
        names = list(SCHEDULES) if schedules is None else as_list(schedules, "schedules")
        sids = [get_spec(name, "schedules").sid for name in names]
        if n is not None and n_per_p is not None:
            raise ScheduleError(f"give n or n_per_p, not both (got n={n!r}, "
                                f"n_per_p={n_per_p!r})")
        if n is None and n_per_p is None:
            n_per_p = DEFAULT_N_PER_P
        self.relative = n is None
        self.axes = {
            "schedule": np.array(sids, np.int64),
            "p": positive_ints(as_list(p, "p"), "p"),
            "n": positive_ints(as_list(n_per_p if self.relative else n,
                                       "n_per_p" if self.relative else "n"),
                               "n_per_p" if self.relative else "n"),
            # 0: each schedule's default_m
            "m": np.zeros(1, np.int64) if m is None else positive_ints(as_list(m, "m"), "m"),
        }
        self.objects = None if objects is None else _distinct(costs_list(as_list(objects,
                                                                              "costs")))
        if self.objects is not None:
            self.axes["costs"] = np.arange(len(self.objects))
        else:
            for name in COSTS:
                as_list(costs[name], name)  # not empty
                self.axes[name] = np.atleast_1d(cost_column(name, costs[name]))
        self.G = None if G is None else positive_int(G, "G")  # one group size, not an axis
        for name, values in self.axes.items():  # each value once, as plan takes its axes
            first = np.sort(np.unique(values, return_index=True)[1])  # (NaN: one)
            self.axes[name] = values[first]
        sids = self.axes["schedule"].tolist()
        self.schedules = [NAMES[s] for s in sids]  # what the warm-up compiles
        self.shape = tuple(len(v) for v in self.axes.values())
        self.total = math.prod(self.shape)  # (Python's: NumPy's wrapped 2**64 to 0 points)
        if self.total > MAX_POINTS:
            sizes = ", ".join(f"{len(v)} {name}" for name, v in self.axes.items()
                              if len(v) > 1)
            raise ScheduleError(f"a sweep must have at most {MAX_POINTS:,} points (got "
                                f"{self.total:,}: {sizes})")
        key = {k: v.tolist() for k, v in self.axes.items()}
        key.update(relative=self.relative, G=self.G, names=[NAMES[s] for s in sids],
                   costs=None if self.objects is None else [_key(c) for c in self.objects])
        self.fingerprint = digest(json.dumps(key, sort_keys=True, default=str))

    def chunk(self, c: int, size: int) -> dict[str, np.ndarray]:
        index = np.arange(c * size, min((c + 1) * size, self.total))
        cols = {name: values[i] for (name, values), i in
                zip(self.axes.items(), np.unravel_index(index, self.shape), strict=True)}
        if self.relative:
            cols["n"] = cols["n"] * cols["p"]
        cols["m"] = np.where(cols["m"] == 0, DEFAULT_M[cols["schedule"]], cols["m"])
        cols["G"] = cols["p"].copy() if self.G is None else np.full(len(index), self.G)
        cols["point"] = index
        if self.objects is not None:
            cols.update(scalar_columns(self.objects, cols["costs"]))
        return cols


class TablePlan:
    """An explicit table of points: columns ``schedule, p, n, m``, optionally ``G`` and either
    cost columns or a ``costs`` column of ``fastpp.Costs``."""

    def __init__(self, points, costs, objects):
        import pandas as pd

        if not isinstance(points, pd.DataFrame):
            raise ScheduleError(f"points must be a pandas DataFrame (got {type(points).__name__})")
        twice = sorted(set(points.columns[points.columns.duplicated()]))
        if twice:  # (pandas' "Per-column arrays must each be 1-dimensional")
            raise ScheduleError(f"points must name each column once (got {twice} twice)")
        missing = [c for c in ("schedule", "p", "n", "m") if c not in points.columns]
        if missing:
            raise ScheduleError(f"points must have the columns schedule, p, n, m (missing "
                                f"{missing})")
        unknown = sorted(set(points.columns) - {*INPUTS, "costs"})
        if unknown:
            raise ScheduleError(f"points may only have the columns {[*INPUTS, 'costs']} (got "
                                f"{unknown})")
        if points.empty:  # (as a grid axis must hold a value)
            raise ScheduleError("points must hold at least one row (got an empty table)")
        if objects is not None:
            raise ScheduleError("costs must be a column of points when points are given (got "
                                "costs= as well)")
        self.total = len(points)
        names = points["schedule"].to_numpy(dtype=object)
        self.schedules = list(pd.unique(names))  # what the warm-up compiles
        for name in self.schedules:
            get_spec(name)
        self.cols = {"schedule": np.array([SCHEDULES[x].sid for x in names], np.int64)}
        for name in ("p", "n", "m"):
            self.cols[name] = positive_ints(points[name].to_numpy(), name)
        self.cols["G"] = (positive_ints(points["G"].to_numpy(), "G") if "G" in points else
                          self.cols["p"].copy())
        self.objects = None
        if "costs" in points:
            both = sorted(set(points.columns) & set(COSTS))
            if both:
                raise ScheduleError(f"points must have a costs column or cost columns, not both "
                                    f"(got costs and {both})")
            distinct: dict[Costs, int] = {}
            ids = [distinct.setdefault(c, len(distinct))
                   for c in costs_list(points["costs"].tolist())]
            self.objects = list(distinct)
            self.cols["costs"] = np.array(ids, np.int64)
            self.cols.update(scalar_columns(self.objects, self.cols["costs"]))
        for name in COSTS:
            if name in self.cols:
                continue
            if name in points:
                self.cols[name] = cost_column(name, points[name].to_numpy())
                continue
            value = costs[name]
            if not (value is None or np.isscalar(value)):
                raise ScheduleError(f"{name} must be one value when points are given "
                                    f"(got {value!r}); add a '{name}' column instead")
            self.cols[name] = cost_column(name, [value] * self.total)
        self.cols["point"] = np.arange(self.total)
        frame = pd.DataFrame({k: self.cols[k] for k in (*INPUTS, "point")})
        data = pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()
        if self.objects is not None:  # (hash() is salted per process: resume needs stable)
            data += self.cols["costs"].tobytes() + json.dumps(
                [_key(c) for c in self.objects]).encode()
        self.fingerprint = digest(data)

    def chunk(self, c: int, size: int) -> dict[str, np.ndarray]:
        return {k: v[c * size: (c + 1) * size] for k, v in self.cols.items()}


def costs_list(values) -> list[Costs]:
    """``values`` if every one is a ``fastpp.Costs``."""
    for i, c in enumerate(values):
        if not isinstance(c, Costs):
            raise ScheduleTypeError(f"costs must hold fastpp.Costs (got {type(c).__name__} at "
                                    f"position {i})")
    return list(values)


def _distinct(objects: list[Costs]) -> list[Costs]:
    """Each ``Costs`` once, the first of equal ones, as every other axis takes its values."""
    seen, out = set(), []
    for c in objects:
        key = json.dumps(_key(c))  # (NaN, a field not given, as 'NaN': equal to itself)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _key(c: Costs) -> list:
    return [[name, arr.tolist()] for name, arr in c.arrays.items()]


def scalar_columns(objects: list[Costs], ids: np.ndarray) -> dict[str, np.ndarray]:
    """The cost columns of points given as ``Costs``: a field's value, NaN if it is an array
    (``overhead``, ``send``: its value if every kind has that one value)."""
    table = np.array([[_scalar(c.arrays[k], k) for k in COSTS]
                      for c in objects]).reshape(len(objects), len(COSTS))
    return {k: table[ids, i] for i, k in enumerate(COSTS)}


def _scalar(arr: np.ndarray, name: str) -> float:
    if name in PER_KIND:  # one row per kind
        return float(arr[0]) if arr.ndim == 1 and np.all(arr == arr[0]) else np.nan
    return float(arr) if arr.ndim == 0 else np.nan


def cost_table(cols: dict[str, np.ndarray], objects: list[Costs] | None
               ) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's cost layout for the points ``cols`` (``engine.cost_layout``): scalar
    columns are used in place; each ``Costs`` is stored once, however many points share it."""
    count = len(cols["point"])
    if objects is None:
        return cost_layout({k: cols[k] for k in COSTS}, count)
    ids, fields = cols["costs"], {}

    def stored(arrays):
        length = np.array([a.size for a in arrays], np.int64)
        start = np.cumsum(length) - length
        return np.concatenate(arrays), start[ids], length[ids]

    for name in COSTS:
        if name in PER_KIND:  # one row per kind
            fields[name] = {kind: stored([c.arrays[name][k].reshape(-1) for c in objects])
                            for k, kind in enumerate(PER_KIND[name])}
        else:
            fields[name] = stored([c.arrays[name].reshape(-1) for c in objects])
    return cost_layout(fields, count)


def digest(data) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return hashlib.sha256(raw).hexdigest()[:32]


def chunk_len(c: int, size: int, total: int) -> int:
    return min((c + 1) * size, total) - c * size
