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

The rules are SCHEDULES.md section 2's, from ``kernels.producers`` (``dependencies.edges``);
a schedule that deadlocks raises ``simulate``'s ``ScheduleError`` from ``compiled()``.

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

``evaluate(compiled, stage_costs, durations=None, times=True)`` runs them all for a list of
``fastpp.StageCosts`` (or their rows stacked ``[7, V, B]``; or a given ``durations[N, B]``)
and returns a ``Batch``; ``times=False`` keeps only the reductions and runs the columns a
slice at a time, in buffers that stay in cache (a fresh ``[N, B]`` array costs more in page
faults than the pass that fills it).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from . import kernels
from ._jit import jit
from .checks import ScheduleError
from .dependencies import deadlock_error
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
    order, pointer = np.empty(N, np.int64), np.empty(p, np.int64)
    if _order(length, made, order, pointer) < N:
        raise deadlock_error(schedule, pointer)
    device, position, kind, stage, mb, stage2, mb2, previous, device_ops = (
        np.empty(N, np.int64) for _ in range(9))
    producer, link = np.empty((N, 2), np.int64), np.empty((N, 2), np.int64)
    index = np.full(schedule.kind.shape, -1, np.int64)
    _lay_out(schedule.ops, length, made, order, device, position, kind, stage, mb, stage2, mb2,
             previous, producer, link, index, device_ops)
    device_first = np.zeros(p + 1, np.int64)
    np.cumsum(length, out=device_first[1:])
    return Compiled(device, position, kind, stage, mb, stage2, mb2, previous, producer, link,
                    index, device_ops, device_first, p, schedule.V, schedule.n,
                    bool(schedule.forward_only))


@jit
def _order(length, made, order, pointer):
    """A topological order of the ops (device-major numbers, producers ``made``) into
    ``order``: sweep the devices, each running as far as its inputs are done, until none
    moves. Returns how many were ordered; fewer than all is a deadlock, with ``pointer[r]``
    at each device's stuck op (the ops ``kernels.timeline`` gets stuck at: both run every op
    whose inputs can be done)."""
    p = length.shape[0]
    first = np.zeros(p, np.int64)
    for r in range(1, p):
        first[r] = first[r - 1] + length[r - 1]
    done = np.zeros(order.shape[0], np.bool_)
    count = 0
    moved = True
    pointer[:] = 0
    while moved:
        moved = False
        for r in range(p):
            while pointer[r] < length[r]:
                i = first[r] + pointer[r]
                u, v = made[i, 0], made[i, 1]
                if (u >= 0 and not done[u]) or (v >= 0 and not done[v]):
                    break
                done[i] = True
                order[count] = i
                count += 1
                pointer[r] += 1
                moved = True
    return count


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
        for k in range(length[r]):
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
    stage_costs : sequence of fastpp.StageCosts, or ndarray, shape (7, V, B)
        One per column (from ``Costs.per_stage``), all for this schedule; or their rows
        stacked (``kernels.TF ... kernels.GAMMA``, one column per cost vector).
    durations : ndarray, shape (N, B), optional
        Every op's time per column (in the compiled order), in place of the stage times; the
        hand-offs still take ``stage_costs``' latencies.
    times : bool
        Keep every op's ``start`` and ``end``; without them (``None`` in the ``Batch``) the
        columns run a slice at a time in buffers that stay in cache.

    Returns
    -------
    Batch
    """
    rows = stage_costs
    if not isinstance(rows, np.ndarray):
        if len(rows) == 0:
            raise ScheduleError("stage_costs must hold at least one StageCosts (got none)")
        rows = np.stack([np.asarray(c, np.float64) for c in stage_costs], axis=2)
    columns = rows.shape[2]
    N, p = compiled.num_ops, compiled.p
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


SLICE = 1 << 17  # op-columns a slice of ``evaluate`` times at once: 1 MB per array
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
    N, width = c.num_ops, c1 - c0
    if durations is None:
        durations = _scratch(0, N, width)
        op_durations(c.kind, c.stage, c.stage2, rows[kernels.TF], rows[kernels.TB],
                     rows[kernels.TW], rows[kernels.TFB], durations)
    if out.start is not None:
        start, end = out.start, out.end
    else:
        start, end = _scratch(1, N, width), _scratch(2, N, width)
    timeline_batch(c.previous, c.producer, c.link, durations, rows[kernels.COMM], start, end)
    busy, span, flat = np.empty((c.p, width)), np.empty((c.p, width)), np.empty((3, width))
    reduce_batch(c.device_ops, c.device_first, start, end, busy, span, flat)
    latency = np.empty(width)
    latency_batch(c.link, rows[kernels.COMM], latency)
    peak = np.empty((c.p, width))
    peaks_batch(c.kind, c.stage, c.stage2, c.device_ops, c.device_first, rows[kernels.UNIT],
                rows[kernels.GAMMA], c.forward_only, peak, out.peak_live)
    out.makespan[c0:c1], out.bubble_ratio[c0:c1], out.span_bubble_ratio[c0:c1] = flat
    out.serial_time[c0:c1] = busy.sum(axis=0) + latency
    out.busy[:, c0:c1], out.span[:, c0:c1], out.peak_activations[:, c0:c1] = busy, span, peak


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
