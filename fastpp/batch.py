"""Sweeps: many points built and simulated, the simulation and reduction inside Numba.

One point is ``(schedule id, p, n, m, G)`` and its costs: the kernel's cost inputs
(``costs.SLOTS``: ``fastpp.Costs``'s fields, ``overhead`` and ``send`` once per op kind), each
one value, one per device or one per stage, read from a flat table ``values`` at ``at[i, slot]
= (offset, count)``. ``build_and_simulate`` builds each run of consecutive points that share
a schedule once, with the registry's ``generate`` (so the kernel links no generator: it
compiles in a fraction of the time, and a schedule is added in the registry alone), and hands
the built schedules to the kernels: ``simulate_points`` runs a point's timeline and memory walk,
``simulate_planned`` one pass of its build's point plan (``fastpp.compiled.plan_schedule``),
made once for a build that several points share, and kept (``PLANS``) where the caller asks,
as ``plan`` does, for a later call that meets the same build. Kernels release the GIL, so
``fastpp.sweep`` runs slices of points on several threads at once; every point is computed on
its own, so results do not depend on the thread count, the slicing or what the cache holds.
"""

import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from . import kernels
from ._jit import jit
from .checks import nonnegative_int
from .compiled import plan_schedule, point
from .costs import MAX_TIME, SLOTS
from .generators.registry import SCHEDULES, generate
from .ops import OP_FIELDS
from .placement import TWO_DIRECTIONS

# what a point gives, in the order of simulate_points's output row
COLUMNS = ("makespan", "bubble_ratio", "span_bubble_ratio", "peak_activations_max",
           "peak_activations_min", "peak_live_max", "num_ops", "parameter_units", "status")
(MAKESPAN, BUBBLE, SPAN_BUBBLE, PEAK_MAX, PEAK_MIN, LIVE_MAX, NUM_OPS, PARAMETER_UNITS,
 STATUS) = range(len(COLUMNS))
# a point's status: simulated, or why not (BAD_LENGTH + k: input k has the wrong length;
# ABOVE_MAX + k: row k of kernels.stage_costs holds a time past Costs' MAX_TIME)
OK, DEADLOCK, W_ABOVE_B, BAD_LENGTH, ABOVE_MAX = 0, 1, 2, 10, 100
N_COSTS = len(SLOTS)

SPECS = list(SCHEDULES.values())  # by id
PLACEMENT_CODE = np.array([spec.placement_code for spec in SPECS], np.int64)
FORWARD_ONLY = np.array([spec.forward_only for spec in SPECS])
# a built schedule's row: its shape and where its arrays start in the flat tables
P_, N_, M_, W_, V_, BLOCK, LENGTH, STAGES, ROUTES = range(9)
BUDGET = 4_000_000  # op slots (16 bytes each with their times) built at once per thread


def build_and_simulate(sid, p, n, m, G, values, at, index, out, peaks, peak_at,
                       share: int | None = None, keep: bool = False) -> None:
    """Build and simulate the points ``index``: row ``i`` of ``out`` gets point ``i``'s
    ``COLUMNS``; unless ``peaks`` is empty, device ``r``'s peak activations of point ``i`` go
    to ``peaks[peak_at[i] + r]``.

    Consecutive points with the same ``(schedule, p, n, m, G)`` share one build (callers order
    points that way). A run of ``share`` (default ``SHARE``) or more of them goes to
    ``simulate_planned``, on the build's point plan from ``PLANS`` (made one build at a time,
    and kept there with ``keep``); the others to ``simulate_points`` (each point's own
    timeline and memory walk), their builds in batches of at most ``BUDGET`` op slots, so
    memory stays bounded whatever the points.
    """
    index = np.ascontiguousarray(index, np.int64)
    if index.size == 0:
        return
    keys = [x[index] for x in (sid, p, n, m, G)]
    new = np.zeros(index.size, bool)
    new[0] = True
    for key in keys:
        new[1:] |= key[1:] != key[:-1]
    first = np.flatnonzero(new)  # where each build's run of points starts
    size = np.diff(np.r_[first, index.size])
    shared = size >= (SHARE if share is None else share)
    for b in np.flatnonzero(shared).tolist():
        key = tuple(int(k[first[b]]) for k in keys)
        planned = PLANS.get(key, keep)
        simulate_planned(sid, index[first[b]: first[b] + size[b]], planned.plan,
                         planned.tables, planned.rows, planned.length, planned.stage_device,
                         key[3], values, at, out, peaks, peak_at)
    alone = np.flatnonzero(~shared)  # the builds of too few points for a plan
    work = (keys[1] * keys[2] * keys[3])[first[alone]] * 3
    b0 = 0
    while b0 < alone.size:
        b1 = b0 + 1  # at least one build per batch, however large
        total = work[b0]
        while b1 < alone.size and total + work[b1] <= BUDGET:
            total += work[b1]
            b1 += 1
        builds = alone[b0:b1]
        tables = _build([k[first[builds]] for k in keys])
        points = np.concatenate([np.arange(first[b], first[b] + size[b]) for b in builds])
        slot = np.repeat(np.arange(builds.size), size[builds])
        simulate_points(sid, index[points], slot, *tables, values, at, out, peaks, peak_at)
        b0 = b1


# the fewest points of one build that share its point plan (simulate_planned), measured
# while the plan (a timeline recording the ops' inputs, a memory walk and two passes) cost
# about two points' walks; since 6 December it is a memory walk and one pass, about 20 ns an
# op. At 3, plan's default job's kernels measured 13% faster than at 4, but the main job
# (builds of 3 points) would compile the shared path (then in one kernel: cold 25.6 and
# 30.5 s against 15.2 and 16.6 s at 4); so plan asks for 3 (PLAN_SHARE), and sweeps keep 4.
# From 16 to 2,048 points a build it measured as fast as the compiled batch pass
# (fastpp.compiled.evaluate) with the compiled form cached, and faster with the form made in
# the call, so the engine has no other path (docs/performance.md)
SHARE = 4
PLAN_SHARE = 3
# bytes of point plans kept across calls (PLANS): plan's default job (LLaMA-70B on 64 GPUs,
# 603 builds) holds 146 MB (139 MiB)
PLAN_CACHE_BYTES = 256 * 2**20


class Planned(NamedTuple):
    """A build's point plan (``fastpp.compiled.plan_schedule``'s ``plan, tables, rows``;
    ``rows`` -1 where the schedule deadlocks) and the arrays its points' costs are expanded
    with."""

    plan: np.ndarray
    tables: np.ndarray
    rows: int
    length: np.ndarray
    stage_device: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes held by its arrays."""
        return sum(x.nbytes for x in (self.plan, self.tables, self.length, self.stage_device))


class PlanCache:
    """Point plans by build ``(schedule id, p, n, m, G)``, made on first use, and kept up to
    ``limit`` bytes where the caller asks (``plan`` does, sweeps do not): a plan depends on
    the schedule's order alone, so a later ``plan`` on the same cluster and global batch
    (another model, GPU or sequence) reuses it. When full, plans not used since the last
    ``begin()`` (an earlier call's) make room, the least recently used first, and one used in
    this call never does: a job larger than the cache keeps what fits, where dropping the
    oldest would drop each plan before its next use. Safe on several threads; two that make
    the same plan at once keep one. (``build_schedule``'s schedules hold their own plans,
    beside the op matrices a ``Result`` reads.)"""

    def __init__(self, limit: int):
        self._limit = nonnegative_int(limit, "limit")
        self._kept: OrderedDict[tuple, Planned] = OrderedDict()  # least recently used first
        self._used: dict[tuple, int] = {}  # the call that last used each
        self._call = 0
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """Bytes kept at most; set lower, it drops the least recently used at once."""
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        with self._lock:
            self._limit = nonnegative_int(value, "limit")
            while self._bytes > self._limit:
                self._drop(next(iter(self._kept)))

    def begin(self) -> None:
        """Start a call: what earlier calls used may now make room."""
        with self._lock:
            self._call += 1

    def get(self, key: tuple, keep: bool = True) -> Planned:
        """The plan of build ``key``: the kept one, or made (and kept, with ``keep``, if it
        fits)."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                self._used[key] = self._call
                return kept
        s, P, N, M, G = key
        ops, length, stage_device, first, last = generate(SPECS[s], P, N, M, G)
        plan, tables, rows, _ = plan_schedule(ops, length, stage_device, first, last, N,
                                              FORWARD_ONLY[s])
        made = Planned(plan, tables, int(rows), length, stage_device)
        if keep:
            with self._lock:
                if key not in self._kept and self._room(made.nbytes):
                    self._kept[key] = made
                    self._used[key] = self._call
                    self._bytes += made.nbytes
        return made

    def _room(self, size: int) -> bool:
        """Drop earlier calls' plans, least recently used first, until ``size`` more bytes
        fit; whether they do. (Those this call used sit after all of them, by recency.)"""
        # the oldest one at a time: listing every kept plan for each new one cost the default
        # job's first call 10 ms (603 plans)
        while self._bytes + size > self._limit and self._kept:
            key = next(iter(self._kept))
            if self._used[key] == self._call:
                break
            self._drop(key)
        return self._bytes + size <= self._limit

    def _drop(self, key: tuple) -> None:
        self._bytes -= self._kept.pop(key).nbytes
        del self._used[key]

    def clear(self) -> None:
        """Drop every kept plan."""
        with self._lock:
            self._kept.clear()
            self._used.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return self._bytes


PLANS = PlanCache(PLAN_CACHE_BYTES)


def _build(keys):
    """The schedules ``keys`` (arrays of schedule id, p, n, m, G), flat: the built rows and
    the op blocks, lengths, stage maps and routes they point into."""
    rows = np.empty((len(keys[0]), 9), np.int64)
    blocks, lengths, stages, firsts, lasts = [], [], [], [], []
    offsets = np.zeros(4, np.int64)
    for g, (s, P, N, M, G) in enumerate(zip(*(k.tolist() for k in keys), strict=True)):
        ops, length, stage_device, first, last = generate(SPECS[s], P, N, M, G)
        W = ops.shape[2]
        block = ops.reshape(-1)
        rows[g] = (P, N, M, W, len(stage_device), *offsets)
        for part, store in ((block, blocks), (length, lengths), (stage_device, stages)):
            store.append(part)
        firsts.append(first)
        lasts.append(last)
        offsets += (block.size, P, len(stage_device), N)
    return (rows, np.concatenate(blocks), np.concatenate(lengths), np.concatenate(stages),
            np.concatenate(firsts), np.concatenate(lasts))


@jit(internal=True)
def point_costs(values, at, i, P, stage_device, M):
    """Point ``i``'s ``(status, kernels.stage_costs rows)``: ``OK``, or ``BAD_LENGTH + k``
    when its field ``k`` has neither one, ``P`` nor ``V`` values, ``W_ABOVE_B``, or
    ``ABOVE_MAX + k`` when row ``k`` holds a time past ``MAX_TIME`` (as ``Costs`` refuses)."""
    V = stage_device.shape[0]
    for k in range(N_COSTS):
        count = at[i, k, 1]
        if count != 1 and count != P and count != V:
            return BAD_LENGTH + k, np.empty((9, V), np.float64)
    problem, k, c = kernels.packed_stage_costs(values, at[i], stage_device, M, MAX_TIME)
    if problem == kernels.W_ABOVE_B:
        return W_ABOVE_B, c
    return (ABOVE_MAX + k if problem == kernels.ABOVE_LIMIT else OK), c


@jit
def simulate_points(sid, index, slot, built, blocks, lengths, stages, firsts, lasts, values,
                    at, out, peaks, peak_at):
    """Simulate the points ``index`` on their built schedules (point ``index[q]`` on row
    ``slot[q]`` of ``built``; see ``build_and_simulate``). Forward-only schedules free a forward's
    activations when it ends; activations are in the unit of ``act``.
    """
    none = np.empty((0, 0), np.float64)  # device_memory stores nothing: the peaks are all a
    none_int = np.empty((0, 0), np.int64)  # sweep keeps
    none_order = np.empty(0, np.int64)  # nor does the timeline keep its order
    for q in range(index.shape[0]):
        i, g = index[q], slot[q]
        schedule = sid[i]
        block, length, stage_device, first, last = _row(built, g, blocks, lengths, stages,
                                                        firsts, lasts)
        P, N, W = block.shape[1], built[g, N_], block.shape[2]
        out[i, :] = np.nan
        status, c = point_costs(values, at, i, P, stage_device, built[g, M_])
        if status != OK:
            out[i, STATUS] = status
            continue
        start = np.empty((P, W), np.float64)  # (the timeline writes every used slot, the
        end = np.empty((P, W), np.float64)  # only ones reduce reads)
        pointer = np.empty(P, np.int64)
        if kernels.timeline(block, length, stage_device, first, last, N, c[kernels.TF],
                            c[kernels.TB], c[kernels.TI], c[kernels.TW], c[kernels.TFB],
                            c[kernels.SB], c[kernels.COMM],
                            none, start, end, pointer, none_order) < 0.0:
            out[i, STATUS] = DEADLOCK
            continue
        busy = np.empty(P, np.float64)
        span = np.empty(P, np.float64)
        makespan, bubble, span_bubble = kernels.reduce(start, end, length, busy, span)
        peak_max, peak_min, live_max = -np.inf, np.inf, 0.0
        for r in range(P):  # peaks only: no per-op memory arrays
            peak, live, _ = kernels.device_memory(block, length, r, c[kernels.UNIT],
                                                  c[kernels.GAMMA], FORWARD_ONLY[schedule], none,
                                                  none, none_int, none_int, none_int)
            if peaks.shape[0] > 0:
                peaks[peak_at[i] + r] = peak
            peak_max = max(peak_max, peak)
            peak_min = min(peak_min, peak)
            live_max = max(live_max, float(live))
        _store(out, i, schedule, length, makespan, bubble, span_bubble, peak_max, peak_min,
               live_max)


@jit
def simulate_planned(sid, index, plan, tables, rows, length, stage_device, M, values, at, out,
                     peaks, peak_at):
    """``simulate_points`` for the points ``index`` of one build, each one pass of the build's
    point plan (``fastpp.compiled.point``, equal to the timeline and memory walk to the bit);
    ``rows`` -1 where the build deadlocks (the order of its ops decides it, not their
    costs)."""
    P = length.shape[0]
    sums = np.empty((max(rows, 0), P), np.float64)
    for q in range(index.shape[0]):
        i = index[q]
        out[i, :] = np.nan
        status, c = point_costs(values, at, i, P, stage_device, M)
        if status != OK:
            out[i, STATUS] = status
            continue
        if rows < 0:
            out[i, STATUS] = DEADLOCK
            continue
        makespan, bubble, span_bubble, _ = point(plan, tables, c, sums)
        peak_max, peak_min, live_max = -np.inf, np.inf, 0.0
        for r in range(P):  # (point's rows: busy, span, peak activations, peak live pairs)
            if peaks.shape[0] > 0:
                peaks[peak_at[i] + r] = sums[2, r]
            peak_max = max(peak_max, sums[2, r])
            peak_min = min(peak_min, sums[2, r])
            live_max = max(live_max, sums[3, r])
        _store(out, i, sid[i], length, makespan, bubble, span_bubble, peak_max, peak_min,
               live_max)


@jit(internal=True)
def _row(built, g, blocks, lengths, stages, firsts, lasts):
    """Built schedule ``g``'s arrays: its op block ``[OP_FIELDS, p, W]``, lengths, stage map
    and routes' first and last stages."""
    P, N, W, V = built[g, P_], built[g, N_], built[g, W_], built[g, V_]
    at_block = built[g, BLOCK]
    return (blocks[at_block: at_block + OP_FIELDS * P * W].reshape((OP_FIELDS, P, W)),
            lengths[built[g, LENGTH]: built[g, LENGTH] + P],
            stages[built[g, STAGES]: built[g, STAGES] + V],
            firsts[built[g, ROUTES]: built[g, ROUTES] + N],
            lasts[built[g, ROUTES]: built[g, ROUTES] + N])


@jit(internal=True)
def _store(out, i, schedule, length, makespan, bubble, span_bubble, peak_max, peak_min,
           live_max):
    """Point ``i``'s row of ``out``, simulated."""
    total = 0
    for r in range(length.shape[0]):
        total += length[r]
    out[i, MAKESPAN], out[i, BUBBLE], out[i, SPAN_BUBBLE] = makespan, bubble, span_bubble
    out[i, PEAK_MAX], out[i, PEAK_MIN], out[i, LIVE_MAX] = peak_max, peak_min, live_max
    out[i, NUM_OPS] = total
    out[i, PARAMETER_UNITS] = 2.0 if PLACEMENT_CODE[schedule] == TWO_DIRECTIONS else 1.0
    out[i, STATUS] = OK
