"""A slow, obviously-correct pipeline simulator, independent of fastpp's kernels.

Discrete-event simulation: a global clock jumps from event to event (an op finishing, a message
arriving); whenever a device is idle and every input of its next op has arrived, the op starts
now. Memory is measured from the resulting times, by summing allocations and frees up to an
instant. It reads a schedule only through its text tokens, stage map and routes, and expands
the costs itself, so it shares no code path with the kernels.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

TOKEN = re.compile(r"^(\d+)([FBIW])(\d+)$")
PAIR = re.compile(r"^\((\d+)F(\d+);(\d+)B(\d+)\)OVERLAP_F_B$")


class Deadlock(Exception):
    pass


@dataclass
class RefResult:
    start: list[list[float]]
    end: list[list[float]]
    makespan: float
    busy: list[float]
    span: list[float]
    bubble_ratio: float
    span_bubble_ratio: float
    serial_time: float
    peak_activations: list[float]
    peak_live: list[int]
    memory_during: list[list[float | None]]  # activations while op k runs (None: zero length)


def parse(token):
    """-> list of parts (kind, stage, mb); an overlapped pair has two parts."""
    plain = TOKEN.match(token)
    if plain:
        return [(plain.group(2), int(plain.group(1)), int(plain.group(3)))]
    s1, j1, s2, j2 = (int(x) for x in PAIR.match(token).groups())
    return [("F", s1, j1), ("B", s2, j2)]


def per_stage(value, p, V, stage_device):
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return [float(arr)] * V
    if len(arr) == V:
        return [float(x) for x in arr]
    assert len(arr) == p
    return [float(arr[stage_device[s]]) for s in range(V)]


def simulate_reference(schedule, costs, durations=None):
    """``durations[r][k]``, when given, is op ``k`` of device ``r``'s time (costs then give
    only the hand-off latencies)."""
    rows = [[parse(t) for t in row] for row in schedule.tokens()]
    dev = [int(d) for d in schedule.stage_to_device]
    p, V, m = schedule.p, schedule.V, schedule.m
    first = [int(x) for x in schedule.route_first]
    last = [int(x) for x in schedule.route_last]
    f = [x / m for x in per_stage(costs.f, p, V, dev)]
    b = [x / m for x in per_stage(costs.b, p, V, dev)]
    w = [x / m for x in per_stage(costs.w, p, V, dev)]
    # I: i/m where given, else b/m - w/m
    i = ([bs - ws for bs, ws in zip(b, w, strict=True)] if costs.i is None
         else [x / m for x in per_stage(costs.i, p, V, dev)])
    fb = None if costs.fb is None else [x / m for x in per_stage(costs.fb, p, V, dev)]
    comm = per_stage(costs.comm, p, V, dev)
    if costs.bandwidth is not None:  # latency, then the message over the link
        size = per_stage(costs.message_bytes, p, V, dev)
        speed = per_stage(costs.bandwidth, p, V, dev)
        comm = [c + x / y for c, x, y in zip(comm, size, speed, strict=True)]
    gamma = per_stage(costs.gamma, p, V, dev)
    unit_of = [a / m for a in per_stage(costs.act, p, V, dev)]

    def by_kind(value, kinds):
        """One value for all kinds or a mapping (a missing kind 0), per kind and stage."""
        given = value if isinstance(value, Mapping) else dict.fromkeys(kinds, value)
        return {kind: per_stage(given.get(kind, 0.0), p, V, dev) for kind in kinds}

    fixed = by_kind(costs.overhead, "FBIW")  # each op kind's fixed time, not divided by m
    # what an op pays more when its output goes to another device (this microbatch's route)
    send = by_kind(costs.send, "FBI")

    def sent(kind, s, j):
        if kind == "F":
            return send["F"][s] if s < last[j] and dev[s + 1] != dev[s] else 0.0
        if kind in ("B", "I"):
            return send[kind][s] if s > first[j] and dev[s - 1] != dev[s] else 0.0
        return 0.0

    def duration(parts, r, k):
        if durations is not None:
            return float(durations[r][k])
        if len(parts) == 2:  # the pair: both halves' fixed times (the forward stage's with fb)
            (_, s1, j1), (_, s2, j2) = parts
            if fb is not None:  # each half sends by its own stage and microbatch
                return (fb[s1] + fixed["F"][s1] + fixed["B"][s1] + sent("F", s1, j1)
                        + sent("B", s2, j2))
            return (f[s1] + fixed["F"][s1] + sent("F", s1, j1)) + (
                b[s2] + fixed["B"][s2] + sent("B", s2, j2))
        kind, s, j = parts[0]
        scaled = {"F": f[s], "B": b[s], "I": i[s], "W": w[s]}[kind]
        return scaled + fixed[kind][s] + sent(kind, s, j)

    def needs(kind, s, j):
        """What an op part waits for: ('fwd_in', s, j) the activation arriving at stage s,
        ('grad_in', s, j) the gradient arriving at stage s, ('f_done'/'g_done', s, j) the
        stage's own F or B/I having finished on this device."""
        if kind == "F":
            return [("fwd_in", s, j)] if s > first[j] else []
        if kind in ("B", "I"):
            return [("grad_in", s, j)] if s < last[j] else [("f_done", s, j)]
        return [("g_done", s, j)]  # W after its own I

    arrived = set()
    heap = []  # (time, seq, what, payload)
    seq = 0
    pos = [0] * p
    busy_dev = [False] * p
    start = [[None] * len(row) for row in rows]
    end = [[None] * len(row) for row in rows]
    serial = 0.0
    clock = 0.0
    remaining = sum(len(row) for row in rows)

    def push(t, what, payload):
        nonlocal seq
        heapq.heappush(heap, (t, seq, what, payload))
        seq += 1

    while remaining:
        started = True
        while started:
            started = False
            for r in range(p):
                if busy_dev[r] or pos[r] >= len(rows[r]):
                    continue
                parts = rows[r][pos[r]]
                if all(msg in arrived for part in parts for msg in needs(*part)):
                    k = pos[r]
                    start[r][k] = clock
                    end[r][k] = clock + duration(parts, r, k)
                    busy_dev[r] = True
                    push(end[r][k], "done", (r, k))
                    started = True
        if not heap:
            raise Deadlock([rows[r][pos[r]] for r in range(p) if pos[r] < len(rows[r])])
        clock = heap[0][0]
        while heap and heap[0][0] == clock:
            _, _, what, payload = heapq.heappop(heap)
            if what == "arrive":
                arrived.add(payload)
                continue
            r, k = payload
            busy_dev[r] = False
            pos[r] += 1
            remaining -= 1
            serial += end[r][k] - start[r][k]
            for kind, s, j in rows[r][k]:
                if kind == "F":
                    arrived.add(("f_done", s, j))
                    if s < last[j]:
                        lat = comm[s] if dev[s + 1] != r else 0.0
                        serial += lat
                        push(end[r][k] + lat, "arrive", ("fwd_in", s + 1, j))
                if kind in ("B", "I"):
                    arrived.add(("g_done", s, j))
                    if s > first[j]:
                        lat = comm[s - 1] if dev[s - 1] != r else 0.0
                        serial += lat
                        push(end[r][k] + lat, "arrive", ("grad_in", s - 1, j))

    busy = [sum(e - s for s, e in zip(start[r], end[r], strict=True)) for r in range(p)]
    span = [end[r][-1] - start[r][0] if rows[r] else 0.0 for r in range(p)]
    t0 = min(start[r][0] for r in range(p) if rows[r])
    t1 = max(end[r][-1] for r in range(p) if rows[r])
    makespan = t1 - t0

    # memory: allocations at starts and frees at ends, summed up to an instant; events at
    # one instant in the device's op order, an op's allocation before its own free (an op
    # of no time, a zero in measured durations, still holds its activations once)
    peaks, lives, during = [], [], []
    for r in range(p):
        allocs, frees = [], []  # ((time, op, phase), activations, live count)
        for k, parts in enumerate(rows[r]):
            for kind, s, _ in parts:
                unit = unit_of[s]
                at_start, at_end = (start[r][k], k, 0), (end[r][k], k, 1)
                if kind == "F":
                    allocs.append((at_start, unit, 1))
                    if schedule.forward_only:
                        frees.append((at_end, unit, 1))
                elif kind == "B":
                    frees.append((at_end, unit, 1))
                elif kind == "I":
                    frees.append((at_end, (1 - gamma[s]) * unit, 0))
                else:
                    frees.append((at_end, gamma[s] * unit, 1))

        totals = {field: (_running(allocs, field), _running(frees, field)) for field in (1, 2)}

        def held(key, field, totals=totals):
            """Allocated minus freed at instant ``key`` (time, op, phase), its events
            included."""
            (a_keys, a_sums), (f_keys, f_sums) = totals[field]
            return a_sums[bisect_right(a_keys, key)] - f_sums[bisect_right(f_keys, key)]

        f_starts = [(start[r][k], k, 0) for k, parts in enumerate(rows[r])
                    if parts[0][0] == "F"]
        peaks.append(max([held(key, 1) for key in f_starts], default=0.0))
        lives.append(max([held(key, 2) for key in f_starts], default=0))
        during.append([held(((s + e) / 2, k, 0.5), 1) if e > s else None
                       for k, (s, e) in enumerate(zip(start[r], end[r], strict=True))])
    return RefResult(start, end, makespan, busy, span,
                     1 - sum(busy) / (p * makespan), 1 - (sum(busy) / p) / max(span),
                     serial, peaks, lives, during)


def _running(events, field):
    """``events`` ((time, op, phase), activations, live count) in that order, and the total
    of ``field`` over the first ``i`` of them for each ``i``: what is held at an instant is a
    difference of two."""
    events = sorted(events, key=lambda x: x[0])
    return [x[0] for x in events], list(accumulate((x[field] for x in events), initial=0))


def assert_agrees(result, ref: RefResult):
    """Every output of ``fastpp.simulate`` equals the reference's (times exactly)."""
    sched = result.schedule
    for r in range(sched.p):
        L = sched.length[r]
        np.testing.assert_array_equal(result.start[r, :L], ref.start[r], err_msg=f"start, dev {r}")
        np.testing.assert_array_equal(result.end[r, :L], ref.end[r], err_msg=f"end, dev {r}")
        for k, held in enumerate(ref.memory_during[r]):
            if held is not None:
                assert abs(result.mem_start[r, k] - held) < 1e-9, (r, k, held)
    assert result.makespan == ref.makespan
    np.testing.assert_allclose(result.busy, ref.busy, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(result.span, ref.span, rtol=1e-12, atol=1e-12)
    assert abs(result.bubble_ratio - ref.bubble_ratio) < 1e-12
    assert abs(result.span_bubble_ratio - ref.span_bubble_ratio) < 1e-12
    assert abs(result.serial_time - ref.serial_time) < 1e-9 * max(1.0, ref.serial_time)
    np.testing.assert_allclose(result.peak_activations, ref.peak_activations, atol=1e-9)
    np.testing.assert_array_equal(result.peak_live, ref.peak_live)
