"""The batch entry that sweeps and ``plan`` share: points and their costs in, rows out.

A point is ``(schedule id, p, n, m, G)`` and its ``fastpp.Costs`` fields. ``cost_layout`` lays
the fields out for the kernel (``fastpp.batch``), iterating ``costs.SLOTS`` (the fields, the
per-kind ``overhead`` and ``send`` once per kind), so a new cost field is one edit there;
``start`` hands the points to the kernel on threads (points that share a schedule stay
together, one build serves them all) and ``Pending.result`` gives each point's
``batch.COLUMNS``, its status and, if asked, every device's peak activations. A point whose
costs do not fit it is a status with its reason (``status_reason``); a generated schedule that
deadlocks is a fastpp bug and raises.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from . import batch
from .checks import ScheduleError, indices, positive_ints
from .costs import FIELDS, MAX_TIME, SLOTS, Costs, row_source, slot_name
from .placement import TWO_DIRECTIONS

# a field not given takes Costs's default (None: not given, NaN for the kernel)
DEFAULTS = {f.name: (np.nan if f.default is None else f.default)
            for f in dataclasses.fields(Costs) if f.name in FIELDS
            and f.default is not dataclasses.MISSING}
MIN_SLICE = 64  # the fewest points a thread takes at a time
_NONE, _NO_INT = np.zeros(0), np.zeros(0, np.int64)
_POOLS: dict[int, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()
# a forked child inherits the pools but not their threads: work sent to them would never run
os.register_at_fork(after_in_child=_POOLS.clear)


class Rows(NamedTuple):
    """What the kernel gives for each point: ``out[i]`` its ``batch.COLUMNS`` (NaN unless
    ``status[i] == batch.OK``), and device ``r``'s peak activations at ``peaks[peak_at[i] +
    r]`` (empty unless asked for)."""

    out: np.ndarray
    status: np.ndarray
    peaks: np.ndarray
    peak_at: np.ndarray


def stages(sid, p, m) -> np.ndarray:
    """Virtual stages ``V`` of each point: ``p * m``, ``2p`` for two-direction schedules."""
    sid, p, m = (np.asarray(x, np.int64) for x in (sid, p, m))
    return np.where(batch.PLACEMENT_CODE[sid] == TWO_DIRECTIONS, 2 * p, p * m)


def cost_layout(fields: dict, count: int, first=None, V=None) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's cost table for ``count`` points: flat ``values`` and ``at[i, k] = (offset,
    length)`` of point ``i``'s input ``k`` (``costs.SLOTS`` order).

    Each field of ``fields`` is one value for every point, an array with one value per point,
    an array with one value per stage of every point (stages of point ``i`` at ``first[i]``,
    ``V[i]`` of them), or ``(flat, start, length)``: point ``i``'s field is ``flat[start[i]:
    start[i] + length[i]]``. ``overhead`` and ``send`` are one of these for every op kind, or
    a dict from kind (``costs.PER_KIND``'s) to one of these (a missing kind 0). A field not
    given takes ``fastpp.Costs``'s default.
    """
    at = np.empty((count, len(SLOTS), 2), np.int64)
    parts, offset = [], 0
    total = None if V is None else int(np.sum(V))
    for k, (name, kind) in enumerate(SLOTS):
        given = fields.get(name, DEFAULTS.get(name))
        if given is None:
            raise ScheduleError(f"costs.{name} must be given (it has no default)")
        if kind is not None and isinstance(given, dict):
            given = given.get(kind, 0.0)
        if isinstance(given, tuple):
            flat, start, length = given
            flat = np.asarray(flat, np.float64).reshape(-1)
            at[:, k, 0], at[:, k, 1] = offset + np.asarray(start), length
        else:
            flat = np.asarray(given, np.float64).reshape(-1)
            if flat.size == 1:  # one value shared by every point
                at[:, k, 0], at[:, k, 1] = offset, 1
            elif flat.size == count:
                at[:, k, 0], at[:, k, 1] = offset + np.arange(count), 1
            elif flat.size == total:
                at[:, k, 0], at[:, k, 1] = offset + np.asarray(first), V
            else:
                raise ScheduleError(f"{slot_name(k)} must hold one value, one per point "
                                    f"({count}) or one per stage ({total}) (got {flat.size})")
        parts.append(flat)
        offset += flat.size
    return np.concatenate(parts), at


class Pending:
    """Points started on the kernel; ``result`` waits for them."""

    def __init__(self, keys, values, at, out, peaks, peak_at, jobs):
        self.keys, self.at = keys, at
        self._values = values  # the kernel reads it until the jobs end
        self._rows = Rows(out, np.empty(0, np.int64), peaks, peak_at)
        self._jobs = jobs

    def result(self) -> Rows:
        """The rows; raises ``ScheduleError`` if a generated schedule deadlocked."""
        for job in self._jobs:
            job.result()
        out = self._rows.out
        status = out[:, batch.STATUS].astype(np.int64)
        stuck = np.flatnonzero(status == batch.DEADLOCK)
        if stuck.size:
            sid, p, n, m, G = (int(k[stuck[0]]) for k in self.keys)
            raise ScheduleError(f"a generated schedule deadlocked at schedule="
                                f"{batch.SPECS[sid].name!r}, p={p}, n={n}, m={m}, G={G}: a "
                                f"fastpp bug, please report it")
        return self._rows._replace(status=status)


def start(sid, p, n, m, G, values: np.ndarray, at: np.ndarray, *, pool=None,
          threads: int = 1, peaks: bool = False, share: int | None = None,
          keep: bool = False) -> Pending:
    """Start simulating points on ``pool``, or here and now without one.

    Parameters
    ----------
    sid, p, n, m, G : array_like of int
        Per point: the schedule id (``batch.SPECS``), devices, microbatches, chunks per
        device and group size; checked against the schedule's rules by the caller.
    values, at : numpy.ndarray
        The points' costs, from ``cost_layout``.
    pool : concurrent.futures.Executor, optional
        Threads to run on, about four slices of points for each of ``threads``.
    peaks : bool
        Keep every device's peak activations.
    share : int, optional
        The fewest points of one build that share its point plan (default
        ``batch.SHARE``).
    keep : bool
        Keep the plans made in ``batch.PLANS`` for later calls (``plan``), as one call: what
        earlier calls kept may make room for them.

    Returns
    -------
    Pending
        ``result()`` waits and gives the ``Rows``.
    """
    keys = _keys(sid, p, n, m, G)
    count = len(keys[0])
    if np.shape(at) != (count, len(SLOTS), 2):  # the kernel would read past it
        raise ScheduleError(f"at must be cost_layout's, of shape {(count, len(SLOTS), 2)} for "
                            f"{count} points (got {np.shape(at)})")
    out = np.empty((count, len(batch.COLUMNS)))
    peak_at = np.r_[0, np.cumsum(keys[1])[:-1]].astype(np.int64) if peaks else _NO_INT
    device_peaks = np.zeros(int(keys[1].sum())) if peaks else _NONE
    order = _order(keys)

    def run(index):
        batch.build_and_simulate(*keys, values, at, index, out, device_peaks, peak_at, share,
                                 keep)

    if keep:
        batch.PLANS.begin()
    if pool is None or count == 0:
        run(order)
        jobs = []
    else:  # each slice's end waits for the GIL: a few slices per thread keep them all busy
        size = max(MIN_SLICE, -(-count // (4 * threads)))
        jobs = [pool.submit(run, order[i: i + size]) for i in range(0, count, size)]
    return Pending(keys, values, at, out, device_peaks, peak_at, jobs)


def run(sid, p, n, m, G, costs: dict, *, first=None, V=None, workers: int = 1,
        peaks: bool = False, share: int | None = None, keep: bool = False) -> Rows:
    """Simulate every point on ``workers`` threads: ``cost_layout``, ``start`` and
    ``result`` in one call.

    Parameters
    ----------
    sid, p, n, m, G : array_like of int
        The points, as for ``start``.
    costs : dict
        Their ``fastpp.Costs`` fields, as ``cost_layout`` takes them (per stage with
        ``first`` and ``V``).
    workers : int
        Threads (kept between calls).
    peaks : bool
        Keep every device's peak activations.
    share, keep : optional
        As for ``start``.

    Returns
    -------
    Rows
    """
    values, at = cost_layout(costs, np.size(sid), first, V)  # (start checks the keys)
    if workers <= 1:
        return start(sid, p, n, m, G, values, at, peaks=peaks, share=share,
                     keep=keep).result()
    return start(sid, p, n, m, G, values, at, pool=_pool(workers), threads=workers,
                 peaks=peaks, share=share, keep=keep).result()


def _keys(sid, p, n, m, G) -> list[np.ndarray]:
    """The points' keys as int64, checked. The callers (``sweep``, ``plan``) check each point
    against its schedule's rules; what is checked here is what a wrong call would otherwise
    turn silently into other numbers or a crash: a float (``p = 2.5`` read as 2), a count
    below 1 (``m = 0`` crashed the kernel), an unknown schedule id, lengths that differ. It
    costs O(points), nothing beside the points' simulation."""
    keys = [indices(sid, "sid", len(batch.SPECS)),
            *(positive_ints(x, name) for name, x in (("p", p), ("n", n), ("m", m), ("G", G)))]
    shapes = [k.shape for k in keys]
    if len(set(shapes)) > 1 or len(shapes[0]) != 1:
        raise ScheduleError(f"sid, p, n, m and G must be 1-D arrays of one length, a value per "
                            f"point (got shapes {shapes})")
    return [np.ascontiguousarray(k) for k in keys]


def _pool(workers: int) -> ThreadPoolExecutor:
    """A pool of ``workers`` threads kept for the next call: starting threads costs a few
    milliseconds, a tenth of a plan of a thousand configurations."""
    with _LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = ThreadPoolExecutor(workers, thread_name_prefix="fastpp")
        return _POOLS[workers]


def status_reason(status: int, p: int, V: int, at: np.ndarray, values: np.ndarray) -> str:
    """Why the kernel did not simulate a point (its ``status`` is not ``batch.OK``); ``at``
    is where its cost fields lie in ``values`` (its row of ``cost_table``'s, offset and
    length per slot)."""
    if status == batch.W_ABOVE_B:
        return "w must be <= b"
    if status >= batch.ABOVE_MAX:  # as simulate's Costs refuses it, naming the terms given
        def given(name, kinds):
            slots = [SLOTS.index((name, x)) for x in kinds] if kinds else \
                [SLOTS.index((name, None))]
            return any(np.any(values[at[k, 0]:at[k, 0] + at[k, 1]]) for k in slots)

        return (f"{row_source(status - batch.ABOVE_MAX, given)} must be at most "
                f"{MAX_TIME:g} an op (a schedule sums these, past that to infinity)")
    k = status - batch.BAD_LENGTH
    return (f"{slot_name(k)} must be a scalar or an array of length p={p} or V={V} (got "
            f"{at[k, 1]})")


def _order(keys) -> np.ndarray:
    """The points grouped by schedule (one build serves a group), the groups in a fixed
    shuffle that spreads large and small ones over the slices."""
    count = len(keys[0])
    by_key = np.lexsort(keys[::-1])
    new = np.zeros(count, bool)
    new[:1] = True
    for key in keys:
        ordered = key[by_key]
        new[1:] |= ordered[1:] != ordered[:-1]
    group = np.cumsum(new) - 1
    rank = np.random.default_rng(count).permutation(int(new.sum()))
    return by_key[np.argsort(rank[group], kind="stable")]
