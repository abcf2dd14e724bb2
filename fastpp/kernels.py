"""Jitted kernels: timeline, activation memory and per-schedule reduction.

Plain loops over arrays. They trust their inputs (``Schedule`` and ``Costs`` validated them) and
report a deadlock through a return code instead of raising.

Per-stage inputs (length ``V``): ``tf``, ``tb``, ``tw`` are chunk-op times (``I`` takes
``tb - tw``), ``tfb`` the overlapped pair's time (negative: ``tf[s_f] + tb[s_b]``), ``comm[s]``
the latency of the hand-off between stages ``s`` and ``s+1`` (either direction, only across
devices), ``unit[s]`` what one forward of stage ``s`` allocates, ``gamma[s]`` the part of it a
split backward's ``W`` frees.
"""

import numpy as np

from ._jit import jit
from .ops import B, F, FB, I, W

OK = 0
DEADLOCK = 1


@jit
def _op_time(kind, s, s2, tf, tb, tw, tfb):
    if kind == F:
        return tf[s]
    if kind == B:
        return tb[s]
    if kind == I:
        return tb[s] - tw[s]
    if kind == W:
        return tw[s]
    if tfb[s] >= 0.0:
        return tfb[s]
    return tf[s] + tb[s2]


@jit
def timeline(ops, length, stage_device, route_first, route_last, n,
             tf, tb, tw, tfb, comm, start, end, pointer):
    """Start and end of every op; each device runs its ops in order, one at a time.

    An op starts at ``max(device free, inputs ready)``. Devices are swept round-robin (forward
    then backward order, so both the F and the B chain advance every two sweeps), each running
    as far as its inputs allow. A sweep with no progress while ops remain is a deadlock:
    returns ``DEADLOCK`` with ``pointer[r]`` at each device's stuck op. Returns ``OK`` otherwise.
    """
    p = ops.shape[1]
    V = stage_device.shape[0]
    f_ready = np.full((V, n), np.nan)  # end of F(s, j)
    g_ready = np.full((V, n), np.nan)  # end of the B or I of (s, j): its input grad exists
    free = np.zeros(p)
    pointer[:] = 0
    remaining = 0
    for r in range(p):
        remaining += length[r]
    sweep = 0
    while remaining > 0:
        progress = False
        for i in range(p):
            r = i if sweep % 2 == 0 else p - 1 - i
            while pointer[r] < length[r]:
                k = pointer[r]
                kind = ops[0, r, k]
                s = ops[1, r, k]
                j = ops[2, r, k]
                t = free[r]
                blocked = False
                if kind == F or kind == FB:
                    if s > route_first[j]:
                        ready = f_ready[s - 1, j]
                        if np.isnan(ready):
                            blocked = True
                        elif stage_device[s - 1] != r:
                            ready += comm[s - 1]
                        t = max(t, ready)
                s2 = s
                j2 = j
                if kind == FB:
                    s2 = ops[3, r, k]
                    j2 = ops[4, r, k]
                if not blocked and (kind == B or kind == I or kind == FB):
                    if s2 < route_last[j2]:
                        ready = g_ready[s2 + 1, j2]
                        if np.isnan(ready):
                            blocked = True
                        elif stage_device[s2 + 1] != r:
                            ready += comm[s2]
                    else:
                        ready = f_ready[s2, j2]
                        blocked = np.isnan(ready)
                    t = max(t, ready)
                if not blocked and kind == W:
                    ready = g_ready[s, j]
                    blocked = np.isnan(ready)
                    t = max(t, ready)
                if blocked:
                    break
                finish = t + _op_time(kind, s, s2, tf, tb, tw, tfb)
                start[r, k] = t
                end[r, k] = finish
                free[r] = finish
                if kind == F or kind == FB:
                    f_ready[s, j] = finish
                if kind == B or kind == I or kind == FB:
                    g_ready[s2, j2] = finish
                pointer[r] = k + 1
                remaining -= 1
                progress = True
        if not progress:
            return DEADLOCK
        sweep += 1
    return OK


@jit
def memory(ops, length, unit, gamma, forward_only, mem_start, mem_end, live_start, live_end):
    """Activation memory of each device after every op's start and after its end.

    A forward allocates ``unit[s]`` when it starts; a ``B`` frees it all when it ends; a split
    backward frees ``(1 - gamma)`` of it at the end of ``I`` and ``gamma`` at the end of ``W``;
    an overlapped pair allocates its forward at the start and frees its backward at the end. In
    a forward-only schedule a forward frees its own allocation when it ends. ``live_*`` count
    live (stage, microbatch) pairs the same way with ``gamma = 1`` (PyTorch's liveness count).
    """
    p = ops.shape[1]
    for r in range(p):
        mem = 0.0
        live = 0
        for k in range(length[r]):
            kind = ops[0, r, k]
            s = ops[1, r, k]
            if kind == F or kind == FB:
                mem += unit[s]
                live += 1
            mem_start[r, k] = mem
            live_start[r, k] = live
            if kind == FB:
                s2 = ops[3, r, k]
                mem -= unit[s2]
                live -= 1
            elif kind == B or (kind == F and forward_only):
                mem -= unit[s]
                live -= 1
            elif kind == I:
                mem -= (1.0 - gamma[s]) * unit[s]
            elif kind == W:
                mem -= gamma[s] * unit[s]
                live -= 1
            mem_end[r, k] = mem
            live_end[r, k] = live


@jit
def reduce(start, end, length, busy, span):
    """Per-device busy time and span; returns ``(makespan, bubble_ratio, span_bubble_ratio)``.

    Makespan metric: ``1 - sum(busy) / (p * makespan)`` with makespan = last end - first start.
    Span metric (Zero Bubble section 5.3): ``1 - mean(busy) / max(span)``, where a device's span
    is its last end minus its first start.
    """
    p = start.shape[0]
    first = np.inf
    last = -np.inf
    total = 0.0
    longest = 0.0
    for r in range(p):
        busy[r] = 0.0
        span[r] = 0.0
        if length[r] == 0:
            continue
        for k in range(length[r]):
            busy[r] += end[r, k] - start[r, k]
        span[r] = end[r, length[r] - 1] - start[r, 0]
        first = min(first, start[r, 0])
        last = max(last, end[r, length[r] - 1])
        total += busy[r]
        longest = max(longest, span[r])
    makespan = last - first
    return makespan, 1.0 - total / (p * makespan), 1.0 - total / p / longest
