"""A schedule compiled once: its ops in a topological order, and one pass per timeline.

A fixed-order schedule's dependency graph does not depend on its costs. ``Schedule.compiled()``
(cached on the schedule) lays it out once as a ``Compiled``; every timeline is then one pass of
max and add over the ops in that order, with no waiting loop, for a whole batch of cost vectors
(or Monte Carlo samples) at once, the batch innermost so that Numba emits SIMD.

The compiled form (``Compiled``, every array int64, ``N`` ops, ``i`` an op's place in the order)
-------------------------------------------------------------------------------------------------
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
- ``p, V, n, forward_only``: as on the schedule.

The rules are SCHEDULES.md section 2's, taken from ``fastpp.dependencies.edges``; the order is
the order in which ``kernels.timeline`` starts the ops when every op takes one time unit, so a
schedule that deadlocks raises ``simulate``'s ``ScheduleError`` from ``compiled()``.

The kernels (jitted; arrays ``[N, B]`` / ``[V, B]`` / ``[p, B]`` are C-contiguous float64)
------------------------------------------------------------------------------------------
- ``op_durations(kind, stage, stage2, tf, tb, tw, tfb, out)``: each op's time from per-stage
  times ``[V, B]`` (as ``kernels.timeline`` takes them: ``I`` runs ``tb - tw``, a pair ``tfb``
  or, where that is NaN, ``tf[s] + tb[s2]``) into ``out[N, B]``.
- ``timeline_batch(previous, producer, link, durations, handoff, start, end)``: ``start`` and
  ``end`` ``[N, B]`` of every op under column ``b``'s ``durations[:, b]`` and hand-off
  latencies ``handoff[:, b]`` (``[V, B]``). An op starts at the max of its device's previous
  end and each producer's end (plus ``handoff[link]`` across devices), exactly as
  ``kernels.timeline``: the same float operations, so equal bit for bit.
- ``reduce_batch(device_ops, device_first, start, end, busy, span, out)``: per column,
  ``busy`` and ``span`` ``[p, B]`` and ``out[0:3, b] = makespan, bubble_ratio,
  span_bubble_ratio`` (``kernels.reduce``'s arithmetic, bit for bit).
- ``latency_batch(link, handoff, out)``: ``out[b]``, the summed latency of every cross-device
  hand-off (``serial_time = busy.sum() + latency``; summed in another order than
  ``kernels.timeline``: equal to about 1e-15 relative).
- ``peaks_batch(kind, stage, stage2, device_ops, device_first, unit, gamma, forward_only,
  peak, live)``: per column, each device's peak activations ``peak[p, B]`` from ``unit`` and
  ``gamma`` ``[V, B]``, and its peak live pairs ``live[p]`` (cost-free), as ``kernels.peaks``.

``evaluate(compiled, stage_costs, durations=None)`` runs them all for a list of
``fastpp.StageCosts`` (or a given ``durations[N, B]``) and returns a ``Batch``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import kernels
from ._jit import jit
from .checks import ScheduleError
from .dependencies import deadlock_error, edges
from .ops import FB, B, F, I, W


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
    order (``start[compiled.index[r, k]]`` is op ``k`` of device ``r``), ``makespan,
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


def compile_schedule(schedule) -> Compiled:
    """The ``Compiled`` form of ``schedule`` (use ``schedule.compiled()``, which caches it).

    Raises
    ------
    ScheduleError
        If the schedule deadlocks (the message of ``simulate``).
    """
    p, V, shape = schedule.p, schedule.V, schedule.kind.shape
    # one timeline with every op one unit long and no latency: an op starts strictly after
    # each of its inputs, so sorting by start is a topological order
    start, end = np.zeros(shape), np.zeros(shape)
    pointer = np.empty(p, np.int64)
    zero = np.zeros(V)
    unit = np.ones(shape)
    if kernels.timeline(schedule.ops, schedule.length, schedule.stage_to_device,
                        schedule.route_first, schedule.route_last, schedule.n, zero, zero, zero,
                        zero, zero, unit, start, end, pointer) < 0:
        raise deadlock_error(schedule, pointer)
    rs, ks, producer = edges(schedule)
    order = np.argsort(start[rs, ks], kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    producer = producer[order]
    producer = np.where(producer >= 0, rank[np.maximum(producer, 0)], -1)
    device, position = rs[order], ks[order]
    ops = schedule.ops[:, device, position].astype(np.int64)
    pair = ops[0] == FB
    stage2 = np.where(pair, ops[3], -1)
    mb2 = np.where(pair, ops[4], -1)
    index = np.full(shape, -1, np.int64)
    index[device, position] = np.arange(len(order))
    previous = np.where(position > 0, index[device, np.maximum(position - 1, 0)], -1)
    # the link an edge crosses: a forward input comes over stage s-1's, a gradient over s2's
    backward_stage = np.where(pair, stage2, ops[1])
    crosses = (producer >= 0) & (device[np.maximum(producer, 0)] != device[:, None])
    link = np.full((len(order), 2), -1, np.int64)
    link[:, 0] = np.where(crosses[:, 0], ops[1] - 1, -1)
    link[:, 1] = np.where(crosses[:, 1], backward_stage, -1)
    used = np.arange(shape[1]) < schedule.length[:, None]
    device_ops = index[used]
    device_first = np.r_[0, np.cumsum(schedule.length)].astype(np.int64)
    return Compiled(device, position, ops[0], ops[1], ops[2], stage2, mb2, previous, producer,
                    link, index, device_ops, device_first, p, V, schedule.n,
                    bool(schedule.forward_only))


def evaluate(compiled: Compiled, stage_costs, durations=None) -> Batch:
    """Timelines, reductions and peaks of ``compiled`` under each of ``stage_costs``.

    Parameters
    ----------
    compiled : Compiled
        From ``Schedule.compiled()``.
    stage_costs : sequence of fastpp.StageCosts
        One per column (from ``Costs.per_stage``), all for this schedule.
    durations : ndarray, shape (N, B), optional
        Every op's time per column (in the compiled order), in place of the stage times; the
        hand-offs still take ``stage_costs``' latencies.

    Returns
    -------
    Batch
    """
    columns = len(stage_costs)
    if columns == 0:
        raise ScheduleError("stage_costs must hold at least one StageCosts (got none)")
    rows = np.stack([np.asarray(c, np.float64) for c in stage_costs], axis=2)  # [7, V, B]
    rows = np.ascontiguousarray(rows)
    N, p = compiled.num_ops, compiled.p
    if durations is None:
        durations = np.empty((N, columns))
        op_durations(compiled.kind, compiled.stage, compiled.stage2, rows[kernels.TF],
                     rows[kernels.TB], rows[kernels.TW], rows[kernels.TFB], durations)
    start, end = np.empty((N, columns)), np.empty((N, columns))
    timeline_batch(compiled.previous, compiled.producer, compiled.link, durations,
                   rows[kernels.COMM], start, end)
    busy, span, out = np.empty((p, columns)), np.empty((p, columns)), np.empty((3, columns))
    reduce_batch(compiled.device_ops, compiled.device_first, start, end, busy, span, out)
    latency = np.empty(columns)
    latency_batch(compiled.link, rows[kernels.COMM], latency)
    peak, live = np.empty((p, columns)), np.empty(p, np.int64)
    peaks_batch(compiled.kind, compiled.stage, compiled.stage2, compiled.device_ops,
                compiled.device_first, rows[kernels.UNIT], rows[kernels.GAMMA],
                compiled.forward_only, peak, live)
    return Batch(start, end, out[0], out[1], out[2], busy.sum(axis=0) + latency, busy, span,
                 peak, live)


@jit
def op_durations(kind, stage, stage2, tf, tb, tw, tfb, out):
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
                out[i, b] = tb[s, b] - tw[s, b]
            elif k == W:
                out[i, b] = tw[s, b]
            elif tfb[s, b] >= 0.0:  # (False for NaN: no pair time given)
                out[i, b] = tfb[s, b]
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
def reduce_batch(device_ops, device_first, start, end, busy, span, out):
    """Per column: ``busy``, ``span`` ``[p, B]`` and ``out[:, b] = makespan, bubble_ratio,
    span_bubble_ratio`` (``kernels.reduce``, column by column)."""
    p = device_first.shape[0] - 1
    columns = start.shape[1]
    first = np.full(columns, np.inf)
    last = np.full(columns, -np.inf)
    total = np.zeros(columns)
    longest = np.zeros(columns)
    for r in range(p):
        for b in range(columns):
            busy[r, b] = 0.0
            span[r, b] = 0.0
        a, z = device_first[r], device_first[r + 1]
        if a == z:
            continue
        for k in range(a, z):
            i = device_ops[k]
            for b in range(columns):
                busy[r, b] += end[i, b] - start[i, b]
        i0, i1 = device_ops[a], device_ops[z - 1]
        for b in range(columns):
            span[r, b] = end[i1, b] - start[i0, b]
            first[b] = min(first[b], start[i0, b])
            last[b] = max(last[b], end[i1, b])
            total[b] += busy[r, b]
            longest[b] = max(longest[b], span[r, b])
    for b in range(columns):
        makespan = last[b] - first[b]
        out[0, b] = makespan
        # ops of zero duration (per-op durations may be 0) can leave nothing to divide by
        out[1, b] = 1.0 - total[b] / (p * makespan) if makespan > 0.0 else 0.0
        out[2, b] = 1.0 - total[b] / p / longest[b] if longest[b] > 0.0 else 0.0


@jit
def latency_batch(link, handoff, out):
    """``out[b]``: the latency summed over every cross-device hand-off of column ``b``."""
    for b in range(out.shape[0]):
        out[b] = 0.0
    for i in range(link.shape[0]):
        for q in range(2):
            s = link[i, q]
            if s >= 0:
                for b in range(out.shape[0]):
                    out[b] += handoff[s, b]


@jit
def peaks_batch(kind, stage, stage2, device_ops, device_first, unit, gamma, forward_only, peak,
                live):
    """Per column, every device's peak activations ``peak[p, B]`` (units ``unit``, split
    fraction ``gamma``, both ``[V, B]``) and its peak live pairs ``live[p]``
    (``kernels.device_memory``'s rules and arithmetic)."""
    p = device_first.shape[0] - 1
    columns = unit.shape[1]
    mem = np.empty(columns)
    for r in range(p):
        mem[:] = 0.0
        count = 0
        live_peak = 0
        for b in range(columns):
            peak[r, b] = 0.0
        for k in range(device_first[r], device_first[r + 1]):
            i = device_ops[k]
            what = kind[i]
            s = stage[i]
            if what == F or what == FB:
                count += 1
                live_peak = max(live_peak, count)
                for b in range(columns):
                    mem[b] += unit[s, b]
                    peak[r, b] = max(peak[r, b], mem[b])
            if what == FB:
                count -= 1
                for b in range(columns):
                    mem[b] -= unit[stage2[i], b]
            elif what == B or (what == F and forward_only):
                count -= 1
                for b in range(columns):
                    mem[b] -= unit[s, b]
            elif what == I:
                for b in range(columns):
                    mem[b] -= (1.0 - gamma[s, b]) * unit[s, b]
            elif what == W:
                count -= 1
                for b in range(columns):
                    mem[b] -= gamma[s, b] * unit[s, b]
        live[r] = live_peak
