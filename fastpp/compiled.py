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
- ``p, V, n, forward_only``: as on the schedule.

The rules are SCHEDULES.md section 2's, from ``kernels.producers`` (``dependencies.edges``);
a schedule that deadlocks raises ``simulate``'s ``ScheduleError`` from ``compiled()``.

The kernels (jitted; arrays ``[N, B]`` / ``[V, B]`` / ``[p, B]`` are C-contiguous float64)
------------------------------------------------------------------------------------------
- ``op_durations(kind, stage, stage2, tf, tb, ti, tw, tfb, out)``: each op's time from
  per-stage times ``[V, B]`` (as ``kernels.timeline`` takes them: ``I`` runs ``ti``, a pair ``tfb``
  or, where that is NaN, ``tf[s] + tb[s2]``) into ``out[N, B]``.
- ``timeline_batch(previous, producer, link, durations, handoff, start, end)``: ``start`` and
  ``end`` ``[N, B]`` of every op under column ``b``'s ``durations[:, b]`` and hand-off
  latencies ``handoff[:, b]`` (``[V, B]``). An op starts at the max of its device's previous
  end and each producer's end (plus ``handoff[link]`` across devices), exactly as
  ``kernels.timeline``: the same float operations, so equal bit for bit.
- ``evaluate_batch(previous, producer, link, device, kind, stage, stage2, forward_only, rows,
  durations, start, end, busy, first, last, peak, live, latency)``: the same pass with every
  per-device sum folded in: each op's time from the stage rows ``rows[8, V, B]``
  (``kernels.TF ... GAMMA``) or from ``durations[N, B]`` (when not empty, shape ``(0, 0)``);
  ``start`` stored unless empty; per device and column ``busy``, ``first`` (its first op's
  start), ``last`` (its last op's end), ``peak`` activations ``[p, B]``; ``live[p]`` the peak
  live pairs; ``latency[B]`` every cross-device hand-off summed (``serial_time = busy.sum() +
  latency``, in ``kernels.timeline``'s order, but an overlapped pair's two hand-offs added one
  at a time and ``busy`` summed along another axis: equal to about 1e-15
  relative). A device's ops come in position order, so busy and memory add in the order of
  ``kernels.reduce`` and ``kernels.device_memory``: equal bit for bit.
- ``finish_batch(device_first, busy, first, last, span, out)``: ``span[p, B]`` and
  ``out[:, b] = makespan, bubble_ratio, span_bubble_ratio`` (``kernels.reduce``'s arithmetic).

``evaluate(compiled, stage_costs, durations=None, times=True)`` runs them all for a list of
``fastpp.StageCosts`` (or their rows stacked ``[8, V, B]``; or a given ``durations[N, B]``)
and returns a ``Batch``; ``times=False`` keeps only the reductions and runs the columns a
slice at a time, in buffers kept per thread (a fresh ``[N, B]`` array costs more in page
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
from .kernels import COMM, GAMMA, TB, TF, TFB, TI, TW, UNIT
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
    # the order kernels.timeline runs the ops in (the same under any costs): a pass in it
    # adds the hand-off latencies up in the timeline's order, so to the bit
    order, pointer = np.empty(N, np.int64), np.empty(p, np.int64)
    none = np.zeros(schedule.V)
    scratch = np.empty(schedule.kind.shape)
    if kernels.timeline(schedule.ops, length, schedule.stage_to_device, schedule.route_first,
                        schedule.route_last, schedule.n, none, none, none, none, none, none,
                        _NONE, scratch, scratch, pointer, order) < 0:
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
                    index, device_ops, device_first, p, schedule.V, schedule.n,
                    bool(schedule.forward_only))


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
    stage_costs : sequence of fastpp.StageCosts, or ndarray, shape (8, V, B)
        One per column (from ``Costs.per_stage``), all for this schedule; or their rows
        stacked (``kernels.TF ... kernels.GAMMA``, one column per cost vector).
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
    evaluate_batch(c.previous, c.producer, c.link, c.device, c.kind, c.stage, c.stage2,
                   c.forward_only, rows, _NONE if durations is None else durations, start, end,
                   busy, first, last, peak, out.peak_live, latency)
    span = np.empty((p, width))
    finish_batch(c.device_first, busy, first, last, span, flat)
    out.makespan[c0:c1], out.bubble_ratio[c0:c1], out.span_bubble_ratio[c0:c1] = flat
    out.serial_time[c0:c1] = busy.sum(axis=0) + latency
    out.busy[:, c0:c1], out.span[:, c0:c1], out.peak_activations[:, c0:c1] = busy, span, peak


@jit
def op_durations(kind, stage, stage2, tf, tb, ti, tw, tfb, out):
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
def evaluate_batch(previous, producer, link, device, kind, stage, stage2, forward_only, rows,
                   durations, start, end, busy, first, last, peak, live, latency):
    """``timeline_batch`` and every per-device sum in the same pass (module docstring).

    Each op's time comes from ``durations[N, B]`` or, when that is empty (shape ``(0, 0)``),
    from the stage rows ``rows[8, V, B]``; ``start`` is stored unless empty. Per device and
    column: ``busy``, ``first`` (its first op's start), ``last`` (its last op's end) and
    ``peak`` activations; ``live[r]`` its peak live pairs; ``latency[b]`` the cross-device
    hand-offs summed. A device's ops come in position order, so every sum adds in
    ``kernels.reduce``'s and ``kernels.device_memory``'s order: equal bit for bit.
    """
    p, columns = busy.shape
    mem = np.zeros((p, columns))
    count = np.zeros(p, np.int64)
    t = np.empty(columns)
    d = np.empty(columns)
    busy[:] = 0.0
    peak[:] = 0.0
    live[:] = 0
    latency[:] = 0.0
    for i in range(previous.shape[0]):
        r = device[i]
        if durations.shape[0] > 0:
            d[:] = durations[i]
        else:
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
            e = t[b] + d[b]
            end[i, b] = e
            busy[r, b] += e - t[b]
            last[r, b] = e
        if start.shape[0] > 0:
            start[i] = t
        if a < 0:
            first[r] = t
        started, count[r] = _memory_step(kind[i], stage[i], stage2[i], forward_only, rows,
                                         mem[r], peak[r], count[r])
        live[r] = max(live[r], started)


@jit
def _op_time(kind, s, s2, rows, d):
    """One op's time per column into ``d``, from the stage rows (``op_durations``)."""
    if kind == F:
        d[:] = rows[TF, s]
    elif kind == B:
        d[:] = rows[TB, s]
    elif kind == I:
        d[:] = rows[TI, s]
    elif kind == W:
        d[:] = rows[TW, s]
    else:
        for b in range(d.shape[0]):
            pair = rows[TFB, s, b]
            d[b] = pair if pair >= 0.0 else rows[TF, s, b] + rows[TB, s2, b]


@jit
def _memory_step(kind, s, s2, forward_only, rows, mem, peak, count):
    """One op on a device: its activations ``mem`` per column after the op's end and the peak
    after its start (``kernels.device_memory``); returns the live pairs after its start and
    after its end."""
    if kind == F or kind == FB:
        count += 1
        for b in range(mem.shape[0]):
            mem[b] += rows[UNIT, s, b]
            peak[b] = max(peak[b], mem[b])
    started = count
    if kind == FB:
        count -= 1
        for b in range(mem.shape[0]):
            mem[b] -= rows[UNIT, s2, b]
    elif kind == B or (kind == F and forward_only):
        count -= 1
        for b in range(mem.shape[0]):
            mem[b] -= rows[UNIT, s, b]
    elif kind == I:
        for b in range(mem.shape[0]):
            mem[b] -= (1.0 - rows[GAMMA, s, b]) * rows[UNIT, s, b]
    elif kind == W:
        count -= 1
        for b in range(mem.shape[0]):
            mem[b] -= rows[GAMMA, s, b] * rows[UNIT, s, b]
    return started, count


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


# the rows of a ``point`` plan (``point_plan``): one column per op; row ``BY_DEVICE`` lists the
# ops device by device in position order (``Compiled.device_ops``), the others follow the order
PREVIOUS, FORWARD, GRADIENT, FORWARD_LINK, GRADIENT_LINK, KIND, STAGE, STAGE2, BY_DEVICE = range(9)
PLAN_ROWS = BY_DEVICE + 1


def point_plan(c: Compiled) -> np.ndarray:
    """``c``'s arrays as the one C-contiguous int32 block ``[9, N]`` that ``point`` reads (rows
    ``PREVIOUS ... BY_DEVICE``): one argument for Numba to unbox instead of nine."""
    return np.stack([c.previous, c.producer[:, 0], c.producer[:, 1], c.link[:, 0], c.link[:, 1],
                     c.kind, c.stage, c.stage2, c.device_ops]).astype(np.int32)


def point_out_shape(N: int, p: int) -> tuple[int, int]:
    """The shape of ``point``'s ``out`` for ``N`` ops on ``p`` devices."""
    return 4 + -(-2 * N // p), p


@jit
def point(plan, device_first, rows, forward_only, out):
    """``simulate``'s numbers for one cost vector, from a ``point_plan``.

    ``rows[8, V]`` are the stage costs (``kernels.TF ... GAMMA``). Fills ``out``
    (``point_out_shape``, ``[4 + ceil(2N / p), p]``): rows 0-3 per device its busy time, span,
    peak activations and peak live pairs, then from flat slot ``4p`` on every op's start and
    after them its end, in the compiled order (one array a call, and its first rows the sums
    without a slice or reshape in Python). Returns ``(makespan, bubble_ratio,
    span_bubble_ratio, latency)`` as Python floats (``latency``: the hand-offs summed, as
    ``kernels.timeline`` returns it). The ops run in ``kernels.timeline``'s order, with its
    float operations, and the sums run device by device in position order, those of
    ``kernels.reduce`` and ``kernels.device_memory``: equal to them bit for bit.
    """
    N = plan.shape[1]
    p = device_first.shape[0] - 1
    tf, tb, ti, tw, tfb, comm = rows[TF], rows[TB], rows[TI], rows[TW], rows[TFB], rows[COMM]
    previous = plan[PREVIOUS]
    producers, links = plan[FORWARD:GRADIENT + 1], plan[FORWARD_LINK:GRADIENT_LINK + 1]
    kinds, stages, stages2, by_device = plan[KIND], plan[STAGE], plan[STAGE2], plan[BY_DEVICE]
    times = out.reshape(out.size)
    starts, ends = times[4 * p:4 * p + N], times[4 * p + N:4 * p + 2 * N]
    # every index unsigned (np.uint64) once known >= 0, the rows taken once: Numba wraps a
    # signed index around (a compare and a select at every access), measured a third of the
    # kernel's time (1F1B p=8 n=64: 5.7 -> 3.7 us a call)
    latency = 0.0
    for i in range(np.uint64(N)):  # kernels.timeline's step, its inputs ready
        a = previous[i]
        t = ends[np.uint64(a)] if a >= 0 else 0.0
        lat = 0.0
        for q in range(2):
            u = producers[q, i]
            if u >= 0:
                ready = ends[np.uint64(u)]
                s = links[q, i]
                if s >= 0:
                    ready += comm[np.uint64(s)]
                    lat += comm[np.uint64(s)]
                t = max(t, ready)
        kind = kinds[i]
        s = np.uint64(stages[i])
        if kind == F:
            e = t + tf[s]
        elif kind == B:
            e = t + tb[s]
        elif kind == I:
            e = t + ti[s]
        elif kind == W:
            e = t + tw[s]
        elif tfb[s] >= 0.0:  # (False for NaN: no pair time given)
            e = t + tfb[s]
        else:
            e = t + (tf[s] + tb[np.uint64(stages2[i])])
        starts[i] = t
        ends[i] = e
        latency += lat
    lowest = np.inf
    highest = -np.inf
    total = 0.0
    longest = 0.0
    unit, gamma = rows[UNIT], rows[GAMMA]
    for r in range(p):  # kernels.reduce and kernels.device_memory, device by device
        busy = 0.0
        mem = 0.0
        held = 0
        peak = 0.0
        live = 0
        for j in range(np.uint64(device_first[r]), np.uint64(device_first[r + 1])):
            i = np.uint64(by_device[j])
            busy += ends[i] - starts[i]
            # kernels.device_memory's step (and above kernels.timeline's), written out: Numba
            # calls a jitted helper rather than inlining it, and reference-counts its arrays
            # (measured: the kernel 1.7x slower; with scalar arguments only, 1.1x)
            kind = kinds[i]
            s = np.uint64(stages[i])
            if kind == F or kind == FB:
                mem += unit[s]
                held += 1
                peak = max(peak, mem)
                live = max(live, held)
            if kind == FB:
                mem -= unit[np.uint64(stages2[i])]
                held -= 1
            elif kind == B or (kind == F and forward_only):
                mem -= unit[s]
                held -= 1
            elif kind == I:
                mem -= (1.0 - gamma[s]) * unit[s]
            elif kind == W:
                mem -= gamma[s] * unit[s]
                held -= 1
        span = 0.0
        if device_first[r + 1] > device_first[r]:
            begin = starts[by_device[device_first[r]]]
            end = ends[by_device[device_first[r + 1] - 1]]
            span = end - begin
            lowest = min(lowest, begin)
            highest = max(highest, end)
            total += busy
            longest = max(longest, span)
        out[0, r] = busy
        out[1, r] = span
        out[2, r] = peak
        out[3, r] = live
    makespan = highest - lowest
    bubble = 1.0 - total / (p * makespan) if makespan > 0.0 else 0.0
    span_bubble = 1.0 - total / p / longest if longest > 0.0 else 0.0
    # Python floats, with or without the JIT (NUMBA_DISABLE_JIT computes NumPy scalars)
    return float(makespan), float(bubble), float(span_bubble), float(latency)
