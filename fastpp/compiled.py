"""A schedule compiled once: its ops in a topological order, and one pass per timeline.

A fixed-order schedule's dependency graph does not depend on its costs. ``Schedule.compiled()``
(cached on the schedule) lays it out once as a ``Compiled``; every timeline is then one pass of
max and add over the ops in that order, with no waiting loop, for a whole batch of cost vectors
(or Monte Carlo samples) at once, the batch innermost so that Numba emits SIMD.

The compiled form (``Compiled``, every array int64, ``N`` ops, ``i`` an op's place in the order)
-------------------------------------------------------------------------------------------------
- The order: the one ``kernels.timeline`` runs the ops in (the same under any costs).
- ``device[i], position[i]``: the op's cell ``(r, k)`` of the schedule's op matrices;
  ``index[r, k]`` is the inverse (``-1`` on padding slots).
- ``kind[i], stage[i], mb[i]``: the op (``fastpp.ops`` codes); ``stage2[i], mb2[i]`` the
  backward half of an overlapped pair (``Op.FB``), ``-1`` elsewhere.
- ``previous[i]``: the op before it on its device (``-1`` for a device's first op).
- ``producer[i, 0]``: the op that made its forward input (for ``F`` and ``FB`` inside the
  route), ``producer[i, 1]`` the one that made its gradient input (``B``, ``I``, ``W``,
  ``FB``'s backward half; a ``B``/``I`` at the end of its route waits for its own ``F``);
  ``-1`` where none. Always earlier in the order.
- ``link[i, q]``: the stage ``s`` whose hand-off latency ``handoff[s]`` (the kernels' ``comm``:
  between stages ``s`` and ``s + 1``) edge ``q`` pays; ``-1`` when the edge stays on one
  device (no latency) or there is no edge.
- ``device_ops``, ``device_first``: the ops of device ``r`` in position order are
  ``device_ops[device_first[r]:device_first[r + 1]]`` (for the reductions).
- ``frontier``: each device's memory frontier (``kernels.device_memory``), packed:
  ``frontier[r]:frontier[r + 1]`` are the slots of device ``r``'s vectors; slot ``h`` holds
  where its terms start (they end where slot ``h + 1``'s start), each term three integers,
  a stage ``s`` and its counts ``held, split``. The device's memory just after a start is
  never above the largest over its vectors of the sum of their terms' ``held * unit[s] +
  split * (gamma[s] * unit[s])``, in order, and reaches it: that is its peak, equal to
  ``kernels.device_memory``'s to the bit. One or two vectors a device with one stage, up to
  a few dozen with interleaving.
- ``peak_live[r]``: device ``r``'s peak live pairs (they depend on the order alone).
- ``p, V, n, forward_only``: as on the schedule.

The rules are SCHEDULES.md section 2's, from ``kernels.producers`` (``dependencies.edges``);
a schedule that deadlocks raises ``simulate``'s ``ScheduleError`` from ``compiled()``.

The kernels (jitted; arrays ``[N, B]`` / ``[V, B]`` / ``[p, B]`` are C-contiguous float64)
------------------------------------------------------------------------------------------
- ``op_durations(kind, stage, stage2, tf, tb, ti, tw, tfb, sb, out)``: each op's time from
  per-stage times ``[V, B]`` (as ``kernels.timeline`` takes them: ``I`` runs ``ti``, a pair
  ``tfb[s] + sb[s2]`` or, where ``tfb`` is NaN, ``tf[s] + tb[s2]``) into ``out[N, B]``.
- ``timeline_batch(previous, producer, link, durations, handoff, start, end)``: ``start`` and
  ``end`` ``[N, B]`` of every op under column ``b``'s ``durations[:, b]`` and hand-off
  latencies ``handoff[:, b]`` (``[V, B]``). An op starts at the max of its device's previous
  end and each producer's end (plus ``handoff[link]`` across devices), exactly as
  ``kernels.timeline``: the same float operations, so equal bit for bit.
- ``evaluate_batch(previous, producer, link, device, kind, stage, stage2, rows, durations,
  start, end, busy, first, last, latency)``: the same pass with every per-device sum folded
  in: each op's time from the stage rows ``rows[9, V, B]`` (``kernels.TF ... SB``) or from
  ``durations[N, B]`` (when not empty, shape ``(0, 0)``); ``start`` stored unless empty; per
  device and column ``busy``, ``first`` (its first op's start), ``last`` (its last op's end)
  ``[p, B]``; ``latency[B]`` every cross-device hand-off summed (``serial_time = busy.sum() +
  latency``, in ``kernels.timeline``'s order, but an overlapped pair's two hand-offs added one
  at a time and ``busy`` summed along another axis: equal to about 1e-15
  relative). A device's ops come in position order, so busy adds in the order of
  ``kernels.reduce``: equal bit for bit.
- ``frontier_peaks(frontier, unit, gamma, peak)``: each device's peak activations ``[p, B]``
  from its ``frontier`` and the stage rows ``unit, gamma`` ``[V, B]``.
- ``finish_batch(device_first, busy, first, last, span, out)``: ``span[p, B]`` and
  ``out[:, b] = makespan, bubble_ratio, span_bubble_ratio`` (``kernels.reduce``'s arithmetic).

``evaluate(compiled, stage_costs, durations=None, times=True)`` runs them all for a list of
``fastpp.StageCosts`` (or their rows stacked ``[9, V, B]``; or a given ``durations[N, B]``)
and returns a ``Batch``; ``times=False`` keeps only the reductions and runs the columns a
slice at a time, in buffers kept per thread (a fresh ``[N, B]`` array costs more in page
faults than the pass that fills it).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from . import kernels
from ._jit import ONE, U, jit
from .checks import ScheduleError, ScheduleTypeError, instance, number_array, show
from .dependencies import deadlock_error
from .kernels import COMM, GAMMA, MAX_TIME, SB, TB, TF, TFB, TI, TW, UNIT
from .ops import FB, B, F, I, W

_NONE = np.zeros((0, 0))


class Compiled(NamedTuple):
    """A schedule's dependency graph in topological order (see the module docstring)."""

    device: np.ndarray
    position: np.ndarray
    kind: np.ndarray
    stage: np.ndarray
    mb: np.ndarray
    stage2: np.ndarray
    mb2: np.ndarray
    previous: np.ndarray
    producer: np.ndarray
    link: np.ndarray
    index: np.ndarray
    device_ops: np.ndarray
    device_first: np.ndarray
    frontier: np.ndarray
    peak_live: np.ndarray
    p: int
    V: int
    n: int
    forward_only: bool

    @property
    def num_ops(self) -> int:
        """``N``, the number of ops (an overlapped pair counts once)."""
        return len(self.device)


class Batch(NamedTuple):
    """``evaluate``'s output, one column per cost vector: ``start, end [N, B]`` in the compiled
    order (``start[compiled.index[r, k]]`` is op ``k`` of device ``r``; ``None`` unless
    ``times``), ``makespan,
    bubble_ratio, span_bubble_ratio, serial_time [B]``, ``busy, span, peak_activations
    [p, B]`` and ``peak_live [p]``."""

    start: np.ndarray
    end: np.ndarray
    makespan: np.ndarray
    bubble_ratio: np.ndarray
    span_bubble_ratio: np.ndarray
    serial_time: np.ndarray
    busy: np.ndarray
    span: np.ndarray
    peak_activations: np.ndarray
    peak_live: np.ndarray


@jit
def plan_schedule(ops, length, stage_device, route_first, route_last, n, forward_only):
    """A built schedule's ``point`` plan from scratch: one walk gives its memory's count
    vectors, ``point_plan`` the order of its ops and their inputs (the same under any costs);
    one call from Python, without the GIL.

    Returns
    -------
    tuple
        ``(plan, tables, rows, pointer)``: ``point_plan``'s three, or, where the schedule
        deadlocks, an empty plan and table, ``rows = -1`` and ``pointer[r]`` at device ``r``'s
        stuck op (for ``dependencies.deadlock_error``).
    """
    frontier, peak_live = memory_vectors(ops, length, stage_device.shape[0], forward_only)
    pointer = np.empty(length.shape[0], np.int64)
    plan, tables, rows = point_plan(ops, length, stage_device, route_first, route_last, n,
                                    frontier, peak_live, pointer)
    return plan, tables, rows, pointer


def compile_schedule(schedule) -> Compiled:
    """The ``Compiled`` form of ``schedule`` (use ``schedule.compiled()``, which caches it).

    Raises
    ------
    ScheduleError
        If the schedule deadlocks (the message of ``simulate``).
    """
    p, length = schedule.p, schedule.length
    N = int(length.sum())
    made = np.empty((N, 2), np.int64)  # device-major numbering (dependencies.edges)
    kernels.producers(schedule.ops, length, schedule.V, schedule.n, schedule.route_first,
                      schedule.route_last, made)
    # the order kernels.timeline runs the ops in (the same under any costs): a pass in it
    # adds the hand-off latencies up in the timeline's order, so to the bit
    order, pointer = np.empty(N, np.int64), np.empty(p, np.int64)
    none = np.zeros(schedule.V)
    scratch = np.empty(schedule.kind.shape)
    if kernels.timeline(schedule.ops, length, schedule.stage_to_device, schedule.route_first,
                        schedule.route_last, schedule.n, none, none, none, none, none, none,
                        none, _NONE, scratch, scratch, pointer, order) < 0:
        raise deadlock_error(schedule, pointer)
    first = np.r_[0, np.cumsum(length)[:-1]]
    L = schedule.kind.shape[1]
    order = first[order // L] + order % L  # as device-major numbers, like made's
    device, position, kind, stage, mb, stage2, mb2, previous, device_ops = (
        np.empty(N, np.int64) for _ in range(9))
    producer, link = np.empty((N, 2), np.int64), np.empty((N, 2), np.int64)
    index = np.full(schedule.kind.shape, -1, np.int64)
    _lay_out(schedule.ops, length, made, order, device, position, kind, stage, mb, stage2, mb2,
             previous, producer, link, index, device_ops)
    device_first = np.zeros(p + 1, np.int64)
    np.cumsum(length, out=device_first[1:])
    return Compiled(device, position, kind, stage, mb, stage2, mb2, previous, producer, link,
                    index, device_ops, device_first, *_frontier(schedule), p, schedule.V,
                    schedule.n, bool(schedule.forward_only))


def _frontier(schedule) -> tuple[np.ndarray, np.ndarray]:
    """``Compiled.frontier`` and ``Compiled.peak_live`` of ``schedule``."""
    p = schedule.p
    vectors, peak_live = np.empty(p, np.int64), np.empty(p, np.int64)
    sizes, terms = _frontiers(schedule.ops, schedule.length, schedule.V, schedule.forward_only,
                              vectors, peak_live)
    Q, T = len(sizes), len(terms)
    head = p + 2 + Q  # where the terms start
    frontier = np.empty(head + 3 * T, np.int64)
    frontier[0], frontier[p + 1] = p + 1, head
    frontier[1:p + 1] = p + 1 + np.cumsum(vectors)
    frontier[p + 2:head] = head + 3 * np.cumsum(sizes)
    frontier[head:] = terms.reshape(-1)
    return frontier, peak_live


@jit
def _frontiers(ops, length, V, forward_only, vectors, peak_live):
    """Every device's memory frontier (``kernels.device_memory``) as terms ``(stage, held,
    split)``, a zero one left out (it adds exactly 0): ``vectors[r]`` vectors of device
    ``r``, ``peak_live[r]``; returns each vector's count of terms and the terms. The buffers
    start small and double when a device's frontier outgrows them (a handful of vectors is
    usual; room for every forward's would be ``N K`` terms)."""
    p = ops.shape[1]
    zeros = np.empty(V, np.float64)
    zeros.fill(0.0)
    none = np.empty((0, 0), np.float64)
    none_int = np.empty((0, 0), np.int64)
    most = 1
    for r in range(p):
        most = max(most, length[r])
    stages = np.empty(2 * most, np.int64)
    sizes = np.empty((4 * p, 1), np.int64)  # (2-D, to grow as terms do)
    terms = np.empty((4 * p, 3), np.int64)
    rows = 16
    Q = 0
    T = 0
    for r in range(p):
        here = kernels.device_stages(ops, length, r, stages)
        seen = -1
        while seen < 0:
            found = np.empty((rows, 2 * here), np.int64)
            _, peak_live[r], seen = kernels.device_memory(ops, length, r, zeros, zeros,
                                                          forward_only, none, none, none_int,
                                                          none_int, found)
            if seen < 0:
                rows *= 2
        vectors[r] = seen
        for v in range(seen):
            if Q == sizes.shape[0]:
                sizes = _grown(sizes)
            sizes[Q, 0] = 0
            for q in range(here):
                if found[v, q] != 0 or found[v, here + q] != 0:
                    if T == terms.shape[0]:
                        terms = _grown(terms)
                    terms[T, 0] = stages[q]
                    terms[T, 1], terms[T, 2] = found[v, q], found[v, here + q]
                    T += 1
                    sizes[Q, 0] += 1
            Q += 1
    return sizes[:Q, 0].copy(), terms[:T].copy()


@jit(internal=True)
def _grown(rows):
    """``rows`` (int64, 2-D) in twice the room, the first half a copy."""
    out = np.empty((2 * rows.shape[0], rows.shape[1]), np.int64)
    for i in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            out[i, j] = rows[i, j]
    return out


@jit
def _lay_out(ops, length, made, order, device, position, kind, stage, mb, stage2, mb2, previous,
             producer, link, index, device_ops):
    """Fill the ``Compiled`` arrays from the device-major producers ``made`` and ``order``."""
    N = order.shape[0]
    rank = np.empty(N, np.int64)
    owner = np.empty(N, np.int64)  # device of each device-major number
    for q in range(N):
        rank[order[q]] = q
    i = 0
    for r in range(length.shape[0]):
        for _ in range(length[r]):
            owner[i] = r
            i += 1
    i = 0
    for r in range(length.shape[0]):
        for k in range(length[r]):
            q = rank[i]
            device[q], position[q], index[r, k], device_ops[i] = r, k, q, q
            kind[q], stage[q], mb[q] = ops[0, r, k], ops[1, r, k], ops[2, r, k]
            pair = kind[q] == FB
            stage2[q] = ops[3, r, k] if pair else -1
            mb2[q] = ops[4, r, k] if pair else -1
            previous[q] = rank[i - 1] if k > 0 else -1
            # a forward input comes over stage s-1's link, a gradient over the backward's own
            crossed = (stage[q] - 1, stage2[q] if pair else stage[q])
            for e in range(2):
                u = made[i, e]
                producer[q, e] = rank[u] if u >= 0 else -1
                link[q, e] = crossed[e] if u >= 0 and owner[u] != r else -1
            i += 1


def evaluate(compiled: Compiled, stage_costs, durations=None, *, times: bool = True) -> Batch:
    """Timelines, reductions and peaks of ``compiled`` under each of ``stage_costs``.

    Parameters
    ----------
    compiled : Compiled
        From ``Schedule.compiled()``.
    stage_costs : sequence of fastpp.StageCosts, or ndarray, shape (9, V, B)
        One per column (from ``Costs.per_stage``), all for this schedule; or their rows
        stacked (``kernels.TF ... kernels.SB``, one column per cost vector).
    durations : ndarray, shape (N, B), optional
        Every op's time per column (in the compiled order), in place of the stage times; the
        hand-offs still take ``stage_costs``' latencies.
    times : bool
        Keep every op's ``start`` and ``end``; without them (``None`` in the ``Batch``) the
        columns run a slice at a time in buffers kept per thread.

    Returns
    -------
    Batch
    """
    instance(compiled, Compiled, "compiled", "fastpp.compiled.Compiled (Schedule.compiled())")
    rows = stage_costs
    want = (SB + 1, compiled.V)
    if not isinstance(rows, np.ndarray):
        # a StageCosts is a NamedTuple of the SB + 1 rows (costs.py, which imports this module
        # through the schedules: not imported here)
        if _stage_costs(rows) or not isinstance(rows, list | tuple) or not all(
                _stage_costs(c) for c in rows):
            raise ScheduleTypeError(f"stage_costs must be a list of StageCosts "
                                    f"(Costs.per_stage) or float64 rows of shape ({want[0]}, "
                                    f"V={want[1]}, B) (got {type(rows).__name__})")
        if len(rows) == 0:
            raise ScheduleError("stage_costs must hold at least one StageCosts (got none)")
        sizes = {np.shape(c.tf) for c in rows}
        if sizes != {(compiled.V,)}:
            raise ScheduleError(f"stage_costs must each have V={compiled.V} stages, this "
                                f"schedule's (got {sorted(s[0] for s in sizes)})")
        rows = np.stack([np.asarray(c, np.float64) for c in stage_costs], axis=2)
    # the kernels trust the shape (no bounds checks): one row per StageCosts field, V stages
    if rows.ndim != 3 or rows.shape[:2] != want or rows.dtype != np.float64 or not \
            rows.shape[2]:
        raise ScheduleError(f"stage_costs must be StageCosts of this schedule or float64 rows "
                            f"of shape ({want[0]}, V={want[1]}, B >= 1) (got shape "
                            f"{rows.shape}, {rows.dtype})")
    # (an fb row's NaN is "not given"; any other NaN, an inf or a negative time or weight
    # gave negative or infinite makespans)
    given = np.delete(rows, TFB, axis=0)
    if not (np.all(given >= 0) and np.all(given <= MAX_TIME)
            and not np.any((rows[TFB] < 0) | (rows[TFB] > MAX_TIME))):
        raise ScheduleError(f"stage_costs must be finite and >= 0, at most {MAX_TIME:g} (an fb row "
                            "NaN where not given), as Costs makes them")
    columns = rows.shape[2]
    N, p = compiled.num_ops, compiled.p
    if durations is not None:  # (the kernel reads a column per column of rows)
        if np.shape(durations) != (N, columns):
            raise ScheduleError(f"durations must have shape (N={N}, B={columns}), an op time "
                                f"per op and column (got shape {np.shape(durations)})")
        durations = number_array(durations, "durations")
        fine = (durations >= 0) & (durations <= MAX_TIME)
        if not fine.all():
            raise ScheduleError(f"durations must be finite and >= 0, at most {MAX_TIME:g} (got "
                                f"{show(durations[~fine][0])})")
    out = Batch(*(np.empty((N, columns)) if times else None for _ in range(2)),
                *(np.empty(columns) for _ in range(4)),
                *(np.empty((p, columns)) for _ in range(3)), np.empty(p, np.int64))
    step = columns if times else max(1, min(columns, SLICE // max(N, 1)))
    for c0 in range(0, columns, step):
        c1 = min(columns, c0 + step)
        part = np.ascontiguousarray(rows[:, :, c0:c1])
        given = None if durations is None else np.ascontiguousarray(durations[:, c0:c1])
        _evaluate(compiled, part, given, out, c0, c1)
    return out


def _stage_costs(value) -> bool:
    """Whether ``value`` is a ``fastpp.StageCosts``: a NamedTuple of the kernels' rows."""
    return isinstance(value, tuple) and getattr(value, "_fields", ())[:2] == ("tf", "tb") \
        and len(value) == SB + 1


# op-columns a slice of ``evaluate`` times at once (16 MB per buffer). Each op costs a fixed time
# per slice besides its columns' (its helpers' calls and array views): 1 MB slices, 2 columns
# of a 65,536-op schedule, ran the sweep's 1F1B grid at 16 ns an op and column, these at 3
SLICE = 1 << 21
_SCRATCH = threading.local()


def _scratch(slot: int, N: int, width: int) -> np.ndarray:
    """A C-contiguous ``[N, width]`` float64 buffer kept per thread between calls: a fresh
    array of a megabyte costs more in page faults than the pass over it."""
    buffers = _SCRATCH.__dict__.setdefault("buffers", [np.empty(0) for _ in range(3)])
    if buffers[slot].size < N * width:
        buffers[slot] = np.empty(max(N * width, 2 * buffers[slot].size))
    return buffers[slot][: N * width].reshape(N, width)


def _evaluate(c: Compiled, rows, durations, out: Batch, c0: int, c1: int) -> None:
    """Columns ``c0:c1`` of ``evaluate`` (``rows`` and ``durations`` those columns only)."""
    N, p, width = c.num_ops, c.p, c1 - c0
    start = out.start if out.start is not None else _NONE
    end = out.end if out.end is not None else _scratch(0, N, width)
    busy, first, last, peak = (np.empty((p, width)) for _ in range(4))
    latency, flat = np.empty(width), np.empty((3, width))
    evaluate_batch(c.previous, c.producer, c.link, c.device, c.kind, c.stage, c.stage2, rows,
                   _NONE if durations is None else durations, start, end, busy, first, last,
                   latency)
    frontier_peaks(c.frontier, rows[UNIT], rows[GAMMA], peak)
    out.peak_live[:] = c.peak_live
    span = np.empty((p, width))
    finish_batch(c.device_first, busy, first, last, span, flat)
    out.makespan[c0:c1], out.bubble_ratio[c0:c1], out.span_bubble_ratio[c0:c1] = flat
    out.serial_time[c0:c1] = busy.sum(axis=0) + latency
    out.busy[:, c0:c1], out.span[:, c0:c1], out.peak_activations[:, c0:c1] = busy, span, peak


@jit
def op_durations(kind, stage, stage2, tf, tb, ti, tw, tfb, sb, out):
    """Each op's time ``out[i, b]`` from the per-stage times ``[V, B]`` (module docstring)."""
    for i in range(kind.shape[0]):
        s = stage[i]
        k = kind[i]
        for b in range(out.shape[1]):
            if k == F:
                out[i, b] = tf[s, b]
            elif k == B:
                out[i, b] = tb[s, b]
            elif k == I:
                out[i, b] = ti[s, b]
            elif k == W:
                out[i, b] = tw[s, b]
            elif tfb[s, b] >= 0.0:  # (False for NaN: no pair time given)
                out[i, b] = tfb[s, b] + sb[stage2[i], b]
            else:
                out[i, b] = tf[s, b] + tb[stage2[i], b]


@jit
def timeline_batch(previous, producer, link, durations, handoff, start, end):
    """``start`` and ``end`` ``[N, B]`` of every op, one pass in the compiled order."""
    N, columns = durations.shape
    for i in range(N):
        a = previous[i]
        if a >= 0:
            for b in range(columns):
                start[i, b] = end[a, b]
        else:
            for b in range(columns):
                start[i, b] = 0.0
        for q in range(2):
            u = producer[i, q]
            if u < 0:
                continue
            s = link[i, q]
            if s >= 0:
                for b in range(columns):
                    start[i, b] = max(start[i, b], end[u, b] + handoff[s, b])
            else:
                for b in range(columns):
                    start[i, b] = max(start[i, b], end[u, b])
        for b in range(columns):
            end[i, b] = start[i, b] + durations[i, b]


@jit
def evaluate_batch(previous, producer, link, device, kind, stage, stage2, rows, durations, start,
                   end, busy, first, last, latency):
    """``timeline_batch`` and every per-device sum in the same pass (module docstring).

    Each op's time comes from ``durations[N, B]`` or, when that is empty (shape ``(0, 0)``),
    from the stage rows ``rows[9, V, B]``; ``start`` is stored unless empty. Per device and
    column: ``busy``, ``first`` (its first op's start) and ``last`` (its last op's end);
    ``latency[b]`` the cross-device hand-offs summed. A device's ops come in position order,
    so busy adds in ``kernels.reduce``'s order: equal bit for bit.
    """
    columns = busy.shape[1]
    t = np.empty(columns)
    d = np.empty(columns)
    busy[:] = 0.0
    latency[:] = 0.0
    given = durations.shape[0] > 0  # read in place, not copied op by op
    for i in range(previous.shape[0]):
        r = device[i]
        if not given:
            _op_time(kind[i], stage[i], stage2[i], rows, d)
        a = previous[i]
        for b in range(columns):
            t[b] = end[a, b] if a >= 0 else 0.0
        for q in range(2):
            u = producer[i, q]
            s = link[i, q]
            if u < 0:
                continue
            if s >= 0:
                for b in range(columns):
                    t[b] = max(t[b], end[u, b] + rows[COMM, s, b])
                    latency[b] += rows[COMM, s, b]
            else:
                for b in range(columns):
                    t[b] = max(t[b], end[u, b])
        for b in range(columns):
            e = t[b] + (durations[i, b] if given else d[b])
            end[i, b] = e
            busy[r, b] += e - t[b]
            last[r, b] = e
        if start.shape[0] > 0:
            _put(start[i], t)
        if a < 0:
            _put(first[r], t)


@jit
def frontier_peaks(frontier, unit, gamma, peak):
    """Each device's peak activations ``peak[r, b]`` from its memory frontier
    (``Compiled.frontier``) under the stage rows ``unit, gamma`` ``[V, B]``: the largest sum
    of a vector's terms, as ``kernels.device_memory`` sums them."""
    p, columns = peak.shape
    for r in range(p):
        for b in range(columns):
            peak[r, b] = 0.0
            for h in range(frontier[r], frontier[r + 1]):
                held = 0.0
                for x in range(frontier[h], frontier[h + 1], 3):
                    s = frontier[x]
                    held += frontier[x + 1] * unit[s, b] + frontier[x + 2] * (gamma[s, b]
                                                                              * unit[s, b])
                peak[r, b] = max(peak[r, b], held)


@jit(internal=True)
def _put(out, values):
    """``out[:] = values`` as a loop, ``values`` as long as ``out`` (the callers' shapes are
    checked before): the slice assignment compiled NumPy's broadcast checks and their
    messages, 3.9 s of LLVM on a cold Monte Carlo (measured 5 December)."""
    for b in range(values.shape[0]):
        out[b] = values[b]


@jit
def _op_time(kind, s, s2, rows, d):
    """One op's time per column into ``d``, from the stage rows (``op_durations``)."""
    if kind == F:
        _put(d, rows[TF, s])
    elif kind == B:
        _put(d, rows[TB, s])
    elif kind == I:
        _put(d, rows[TI, s])
    elif kind == W:
        _put(d, rows[TW, s])
    else:
        for b in range(d.shape[0]):
            pair = rows[TFB, s, b]
            d[b] = pair + rows[SB, s2, b] if pair >= 0.0 else rows[TF, s, b] + rows[TB, s2, b]


@jit
def finish_batch(device_first, busy, first, last, span, out):
    """Per column: ``span`` and ``out[:, b] = makespan, bubble_ratio, span_bubble_ratio`` from
    ``evaluate_batch``'s sums (``kernels.reduce``'s arithmetic)."""
    p, columns = busy.shape
    lowest = np.full(columns, np.inf)
    highest = np.full(columns, -np.inf)
    total = np.zeros(columns)
    longest = np.zeros(columns)
    for r in range(p):
        span[r] = 0.0
        if device_first[r] == device_first[r + 1]:
            continue
        for b in range(columns):
            span[r, b] = last[r, b] - first[r, b]
            lowest[b] = min(lowest[b], first[r, b])
            highest[b] = max(highest[b], last[r, b])
            total[b] += busy[r, b]
            longest[b] = max(longest[b], span[r, b])
    for b in range(columns):
        makespan = highest[b] - lowest[b]
        out[0, b] = makespan
        # ops of zero duration (per-op durations may be 0) can leave nothing to divide by
        out[1, b] = 1.0 - total[b] / (p * makespan) if makespan > 0.0 else 0.0
        out[2, b] = 1.0 - total[b] / p / longest[b] if longest[b] > 0.0 else 0.0


# the rows of a ``point`` plan (``point_plan``): one column per step, in the compiled order
# but for ``BY_DEVICE``, each device's ops in position order (``Compiled.device_ops``)
PREVIOUS, INPUT, LINK, TIME, DEVICE, BY_DEVICE = range(6)
PLAN_ROWS = BY_DEVICE + 1
# an op's time is row ``kind`` of the stage costs: the first op kinds and rows share their codes
assert (F, B, I, W) == (TF, TB, TI, TW)


@jit
def point_plan(ops, length, stage_device, route_first, route_last, n, frontier, peak_live,
               pointer):
    """The two blocks ``point`` reads (two arguments for Numba to unbox instead of thirteen),
    with no slot that ``point`` has to test, and the rows of its ``out``, for the schedule
    ``ops, length, stage_device, route_first, route_last, n`` and a memory ``frontier``
    (``Compiled``'s, or ``memory_vectors``'s) with each device's ``peak_live``:

    - ``plan``, C-contiguous int32 ``[6, S]``: the rows ``PREVIOUS ... BY_DEVICE`` of ``S``
      steps, one input each, in the order ``kernels.timeline`` runs the ops (the same under
      any costs): an op is one step, but an overlapped pair that waits for both a forward
      and a gradient input, which is two: the first, of no time, waits for its device and
      the forward input, the second for the first and the gradient input (the same max,
      taken in two: equal bit for bit; 1F1B p=8 n=64 0.6 us a point less than one step of
      two inputs an op). A step's inputs (``PREVIOUS``, ``INPUT``) are step numbers, ``S``
      where it has none (``point`` reads that as an end at time 0, which delays no step);
      its hand-off's latency (``LINK``) and its time (``TIME``) are slots of ``point``'s cost
      vector: ``0`` holds 0 (no hand-off across devices, no time), ``1 + row * V + s`` the
      stage costs' ``rows[row, s]`` for the rows ``TF ... COMM``, and ``1 + 6V + q`` the time
      of the ``q``-th distinct overlapped pair ``(s, s2)`` of ``tables``. ``DEVICE`` is the
      step's device; ``BY_DEVICE[:N]`` each op's (last) step, device by device in position
      order.
    - ``tables``, int64: ``device_first``, ``peak_live``, the number of distinct pairs and
      their stages ``s, s2``, and the ``frontier``, one after the other.
    - ``out``'s rows, ``4 + ceil((2S + 2 + 6V + P) / p)`` for ``P`` distinct pairs (``p``
      columns), or ``-1`` where the schedule deadlocks (``plan`` and ``tables`` empty,
      ``pointer[r]`` at device ``r``'s stuck op, for ``dependencies.deadlock_error``).

    One pass: ``kernels.timeline``'s worklist, each op's inputs found ready by the steps that
    made them (``kernels.timeline`` on zero costs, then a pass over its order, took about
    twice as long).
    """
    p, V = length.shape[0], stage_device.shape[0]
    device_first = np.empty(p + 1, np.int64)
    device_first[0] = 0
    for r in range(p):
        device_first[r + 1] = device_first[r] + length[r]
    N = device_first[p]
    # the distinct pairs (s, s2), numbered in their order, as the sorted keys s V + s2 (a
    # V x V table took 80 GB at p = 100,000)
    S = N  # steps: one an op, two for an overlapped pair with a forward input
    pairs = 0
    for r in range(p):
        for k in range(length[r]):
            if ops[0, r, k] == FB:
                pairs += 1
                S += 1 if ops[1, r, k] > route_first[ops[2, r, k]] else 0
    keys = np.empty(pairs, np.int64)
    if pairs:  # (a second pass only where there are pairs: most schedules have none)
        pairs = 0
        for r in range(p):
            for k in range(length[r]):
                if ops[0, r, k] == FB:
                    keys[pairs] = np.int64(ops[1, r, k]) * V + ops[3, r, k]
                    pairs += 1
    pair = np.unique(keys)
    P = pair.shape[0]
    plan = np.empty((PLAN_ROWS, S), np.int32)
    for q in range(S):
        plan[BY_DEVICE, q] = 0
    # every index unsigned (U), as in point; a step not yet made is S + 1 (above every one)
    made_f = np.empty((V, n), np.uint64)  # the (last) step of F(s, j)
    made_f.fill(S + 1)
    made_g = np.empty((V, n), np.uint64)  # of the B or I of (s, j): its input grad exists
    made_g.fill(S + 1)
    none = U(S + 1)
    previous = np.empty(p, np.uint64)  # each device's last step so far
    previous.fill(S)
    work = np.empty(p + 2 * N + 1, np.int64)  # kernels.timeline's worklist, in its order
    top = 0
    for r in range(p - 1, -1, -1):
        work[top] = r
        pointer[r] = 0
        top += 1
    comm = U(1 + COMM * V)
    step = U(0)
    while top > 0:
        top -= 1
        r = U(work[top])
        k = U(pointer[r])
        while k < U(length[r]):
            kind = ops[0, r, k]
            s = U(ops[1, r, k])
            j = U(ops[2, r, k])
            s2 = s
            j2 = j
            if kind == FB:
                s2 = U(ops[3, r, k])
                j2 = U(ops[4, r, k])
            forward = none  # the step that made the forward input, and its hand-off
            link0 = U(0)
            if (kind == F or kind == FB) and s > U(route_first[j]):
                forward = made_f[s - ONE, j]
                if forward == none:
                    break
                if U(stage_device[s - ONE]) != r:
                    link0 = comm + s - ONE
            gradient = none  # the gradient input's (or the route's end: its own forward)
            link1 = U(0)
            if kind == B or kind == I or kind == FB:
                if s2 < U(route_last[j2]):
                    gradient = made_g[s2 + ONE, j2]
                    if U(stage_device[s2 + ONE]) != r:
                        link1 = comm + s2
                else:
                    gradient = made_f[s2, j2]
                if gradient == none:
                    break
            elif kind == W:
                gradient = made_g[s, j]
                if gradient == none:
                    break
            # (signed: a signed and an unsigned integer add up to a float in Numba)
            time = (1 + 6 * V + np.searchsorted(pair, np.int64(ops[1, r, k]) * V + ops[3, r, k])
                    if kind == FB
                    else 1 + kind * V + ops[1, r, k])
            two = forward != none and gradient != none
            plan[PREVIOUS, step] = previous[r]
            plan[INPUT, step] = forward if forward != none else (
                gradient if gradient != none else U(S))
            plan[LINK, step] = link0 if forward != none else link1
            plan[TIME, step] = 0 if two else time
            plan[DEVICE, step] = r
            if two:
                step += ONE
                plan[PREVIOUS, step] = step - ONE
                plan[INPUT, step] = gradient
                plan[LINK, step] = link1
                plan[TIME, step] = time
                plan[DEVICE, step] = r
            plan[BY_DEVICE, U(device_first[r]) + k] = step
            previous[r] = step
            k += ONE
            # as kernels.timeline: wake the devices that may wait for this op's outputs (its
            # loop written out again: shared helpers for reading an op and waking, even
            # inlined, made both loops 2.6-3 times slower, 6 December 2026)
            if kind == F or kind == FB:
                made_f[s, j] = step
                if s < U(route_last[j]) and U(stage_device[s + ONE]) != r:
                    work[top] = stage_device[s + ONE]
                    top += 1
            if kind == B or kind == I or kind == FB:
                made_g[s2, j2] = step
                if s2 > U(route_first[j2]) and U(stage_device[s2 - ONE]) != r:
                    work[top] = stage_device[s2 - ONE]
                    top += 1
            step += ONE
        pointer[r] = k
    if step < U(S):
        return np.empty((PLAN_ROWS, 0), np.int32), np.empty(0, np.int64), -1
    tables = np.empty(2 * p + 2 + 2 * P + frontier.shape[0], np.int64)
    for r in range(p + 1):
        tables[r] = device_first[r]
    for r in range(p):
        tables[p + 1 + r] = peak_live[r]
    tables[2 * p + 1] = P
    for q in range(P):
        tables[2 * p + 2 + 2 * q] = pair[q] // V
        tables[2 * p + 3 + 2 * q] = pair[q] % V
    for x in range(frontier.shape[0]):
        tables[2 * p + 2 + 2 * P + x] = frontier[x]
    return plan, tables, 4 + -(-(2 * np.int64(S) + 2 + 6 * V + P) // p)


RECENT = 8  # kept vectors a new one is checked against (memory_vectors)


@jit
def memory_vectors(ops, length, V, forward_only) -> tuple[np.ndarray, np.ndarray]:
    """A memory frontier in ``Compiled.frontier``'s layout, and each device's peak live pairs,
    from one walk of ``kernels.device_memory``'s counts: a device's vectors just after each
    forward starts, but one that a vector among the ``RECENT`` kept last covers (and the last
    one dropped when the new one covers it). They include every vector of the least frontier,
    so ``point`` reads the same peaks from them, to the bit; at about one walk, where checking
    each vector against every kept one costs about five (``fastpp.batch`` makes one for each
    schedule that a few sweep points share)."""
    p = length.shape[0]
    most = 1
    for r in range(p):
        most = max(most, length[r])
    stages = np.empty(2 * most, np.int64)
    peak_live = np.empty(p, np.int64)
    vectors = np.empty(p, np.int64)
    starts = np.empty((4 * p + 1, 1), np.int64)  # each kept vector's first term
    terms = np.empty((4 * p, 3), np.int64)  # (2-D, to grow with _grown)
    # not the literal 0: a first call with literal arguments compiled the walk a second time
    # (3-4 s of a cold plan)
    Q = T = np.int64(0)
    for r in range(p):
        K = kernels.device_stages(ops, length, r, stages)
        found = -1
        while found < 0:  # (an array grown inside the walk would slow every step of it 4x)
            found, T_, vectors[r], peak_live[r] = _device_vectors(ops, length, r, stages, K,
                                                                  forward_only, starts, terms,
                                                                  Q, T)
            if found < 0:
                starts, terms = _grown(starts), _grown(terms)
        Q, T = found, T_
    starts[Q, 0] = T
    head = p + 2 + Q
    frontier = np.empty(head + 3 * T, np.int64)
    frontier[0] = p + 1
    for r in range(p):
        frontier[r + 1] = frontier[r] + vectors[r]
    for h in range(Q + 1):
        frontier[p + 1 + h] = head + 3 * starts[h, 0]
    for x in range(T):
        for y in range(3):
            frontier[head + 3 * x + y] = terms[x, y]
    return frontier, peak_live


@jit(internal=True)
def _device_vectors(ops, length, r, stages, K, forward_only, starts, terms, Q, T):
    """``memory_vectors``'s walk of device ``r`` (its ``K`` stages ``stages``): its kept
    vectors' first terms into ``starts`` from row ``Q``, their terms into ``terms`` from row
    ``T``; returns ``(Q, T)`` after them, the device's vectors and its peak live pairs, or
    ``Q = -1`` when the rows ran out."""
    count = np.empty(2 * K, np.int64)  # held, then split, by the device's stages
    count.fill(0)
    recent = np.empty((RECENT, 2 * K), np.int64)  # kept vector v at row v % RECENT
    kept = 0
    live = live_peak = 0
    for k in range(length[r]):
        kind = ops[0, r, k]
        a = 0  # the op's stage's place among the device's
        while stages[a] != ops[1, r, k]:
            a += 1
        if kind == F or kind == FB:
            count[a] += 1
            live += 1
            live_peak = max(live_peak, live)
            covered = False
            v = U(kept)
            while v > U(max(0, kept - RECENT)) and not covered:  # the last kept first
                v -= U(1)
                covered = True
                for x in range(2 * K):
                    if recent[v % U(RECENT), x] < count[x]:
                        covered = False
                        break
            if not covered:
                covers = kept > 0
                for x in range(2 * K):
                    if covers and count[x] < recent[U(kept - 1) % U(RECENT), x]:
                        covers = False
                        break
                if covers:  # in the place of the one kept last
                    Q -= 1
                    T = starts[Q, 0]
                else:
                    kept += 1
                if Q + 1 >= starts.shape[0] or T + K > terms.shape[0]:
                    return -1, T, kept, live_peak
                starts[Q, 0] = T
                for x in range(K):
                    if count[x] != 0 or count[K + x] != 0:  # a zero term adds exactly 0
                        terms[T, 0], terms[T, 1], terms[T, 2] = stages[x], count[x], count[K + x]
                        T += 1
                for x in range(2 * K):
                    recent[(kept - 1) % RECENT, x] = count[x]
                Q += 1
        if kind == FB:
            a = 0
            while stages[a] != ops[3, r, k]:
                a += 1
        if kind == FB or kind == B or (kind == F and forward_only):
            count[a] -= 1
            live -= 1
        elif kind == I:
            count[a] -= 1
            count[K + a] += 1
        elif kind == W:
            count[K + a] -= 1
            live -= 1
    return Q, T, kept, live_peak


@jit
def point(plan, tables, rows, out):
    """``simulate``'s numbers for one cost vector, from a ``point_plan``'s ``plan, tables``.

    ``rows[9, V]`` are the stage costs (``kernels.TF ... SB``). Fills ``out`` (``p`` columns,
    as many rows as ``point_plan`` returns): rows 0-3 per device its busy time, span, peak
    activations and peak live pairs, then from flat slot ``4p`` on every step's start and
    after them its end, in the compiled order, and a 0 (the end ``plan``'s missing inputs
    read), then the cost vector (``point_plan``); one array a call (an allocation in the
    kernel costs more), and its first rows the sums without a slice or reshape in Python.
    Returns ``(makespan, bubble_ratio, span_bubble_ratio, latency)`` as Python floats
    (``latency``: the hand-offs summed, as ``kernels.timeline`` returns it).
    The steps run in ``kernels.timeline``'s order, with its float operations, and each
    device's sums run in position order, those of ``kernels.reduce``; the peaks come from the
    frontier (as in ``frontier_peaks``), the sums of ``kernels.device_memory``: equal to them
    bit for bit.
    """
    N = plan.shape[1]  # steps
    p = out.shape[1]
    V = rows.shape[1]
    device_first, peak_live = tables[:p + 1], tables[p + 1:2 * p + 1]
    P = tables[2 * p + 1]
    pairs, frontier = tables[2 * p + 2:2 * p + 2 + 2 * P], tables[2 * p + 2 + 2 * P:]
    times = out.reshape(out.size)
    starts, ends = times[4 * p:4 * p + N], times[4 * p + N:4 * p + 2 * N + 1]
    ends[N] = 0.0
    cost = times[4 * p + 2 * N + 1:4 * p + 2 * N + 2 + 6 * V + P]  # point_plan's slots
    cost[0] = 0.0
    for row in range(TF, COMM + 1):
        for s in range(V):
            cost[1 + row * V + s] = rows[row, s]
    for q in range(P):
        s, s2 = pairs[2 * q], pairs[2 * q + 1]
        # (tfb >= 0 is False for NaN: no pair time given)
        cost[1 + 6 * V + q] = (rows[TFB, s] + rows[SB, s2] if rows[TFB, s] >= 0.0
                               else rows[TF, s] + rows[TB, s2])
    # kernels.timeline's step, its inputs ready, without a branch: a missing input ends at 0
    # and a hand-off on one device takes 0 (times are >= 0, so max and + give the same bits);
    # 1F1B p=8 n=64: 3.5 -> 2.6 us. Every index unsigned (np.uint64): Numba wraps a signed
    # index around (a compare and a select at every access). The plan read as plan[ROW, i],
    # not through a view of each row: a view takes and drops a reference (atomically); 1F1B
    # 0.06 us a point less, interleaved and ZB-V 0-0.15. Each device's busy time adds up as
    # its steps end: they come in position order, kernels.reduce's (0.2 us less than a
    # second pass over BY_DEVICE)
    for r in range(p):
        out[0, r] = 0.0
    latency = 0.0
    for i in range(np.uint64(N)):
        hand_off = cost[np.uint64(plan[LINK, i])]
        t = max(ends[np.uint64(plan[PREVIOUS, i])], ends[np.uint64(plan[INPUT, i])] + hand_off)
        end = t + cost[np.uint64(plan[TIME, i])]
        starts[i] = t
        ends[i] = end
        out[0, np.uint64(plan[DEVICE, i])] += end - t
        latency += hand_off
    lowest = np.inf
    highest = -np.inf
    total = 0.0
    longest = 0.0
    for r in range(p):  # kernels.reduce's spans and totals
        span = 0.0
        if device_first[r + 1] > device_first[r]:
            begin = starts[plan[BY_DEVICE, device_first[r]]]
            end = ends[plan[BY_DEVICE, device_first[r + 1] - 1]]
            span = end - begin
            lowest = min(lowest, begin)
            highest = max(highest, end)
            total += out[0, r]
            longest = max(longest, span)
        out[1, r] = span
        out[3, r] = peak_live[r]
    # frontier_peaks' sums for one column, written out: its call with the column views took
    # 0.1-0.15 us more a point (1F1B 8x64, same process, alternating)
    for r in range(p):
        peak = 0.0
        for h in range(frontier[r], frontier[r + 1]):
            held = 0.0
            for x in range(frontier[h], frontier[h + 1], 3):
                s = frontier[x]
                held += frontier[x + 1] * rows[UNIT, s] + frontier[x + 2] * (rows[GAMMA, s]
                                                                            * rows[UNIT, s])
            peak = max(peak, held)
        out[2, r] = peak
    makespan = highest - lowest
    bubble = 1.0 - total / (p * makespan) if makespan > 0.0 else 0.0
    span_bubble = 1.0 - total / p / longest if longest > 0.0 else 0.0
    # Python floats, with or without the JIT (NUMBA_DISABLE_JIT computes NumPy scalars)
    return float(makespan), float(bubble), float(span_bubble), float(latency)
