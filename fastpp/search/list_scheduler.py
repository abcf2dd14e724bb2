"""A memory-aware list scheduler for any placement with one route (loop or V), jitted.

Source: fastpp's own, a list scheduler in Graham's sense (R. L. Graham, "Bounds for certain
multiprocessing anomalies", Bell System Technical Journal 45, 1966: whenever a machine is free
it takes a ready job by a fixed priority), with a memory limit per device and a rule that keeps
it from deadlocking on memory. ``fastpp.optimize`` runs it backward first and forward first.

Inputs: the per-stage arrays of ``fastpp.search.problem`` (``cost``, ``memd``, ``comm``,
``cap``). The kernel fills an op block and ``length``.
"""

import numpy as np

from .._jit import jit
from ..ops import PAD, ROW_F, ROW_I, ROW_W, SPLIT_KINDS


@jit
def list_schedule(cost, memd, comm, cap, stage_device, n, i_first, ops, length):
    """A memory-aware list scheduler for any placement with one route (loop or V).

    The device that is free earliest runs, at that time, a ready ``I`` (``i_first``) or a ready
    forward, later stages first, then the other kind; else its oldest pending ``W``; else it
    waits for the next arrival. A forward starts only if it fits, and a device's first-stage
    forward also keeps room for the same microbatch's forwards on the device's later stages:
    microbatches enter each stage in order and the oldest one can always move, so it never
    deadlocks on memory. Returns ``False`` if the limit leaves no room for one microbatch.
    """
    p = cap.shape[0]
    V = stage_device.shape[0]
    f_end = np.full((V, n), -1.0)
    i_end = np.full((V, n), -1.0)
    next_f = np.zeros(V, np.int64)
    next_i = np.zeros(V, np.int64)
    free = np.zeros(p)
    held = np.zeros(p)
    # each device's pending W's, (stage, mb): at most its V // p stages' n each (p*V*n
    # entries were 480 GB at p=10**5)
    w_queue = np.zeros((p, (V // p) * n, 2), np.int64)
    w_head = np.zeros(p, np.int64)
    w_tail = np.zeros(p, np.int64)
    first = np.full(p, V, np.int64)  # each device's first stage on the route
    later = np.zeros(p)  # memory one microbatch takes on a device's later stages
    for s in range(V):
        r = stage_device[s]
        if s < first[r]:
            first[r] = s
    for s in range(V):
        r = stage_device[s]
        if s != first[r]:
            later[r] += memd[ROW_F, s]
    waiting = np.zeros(p, np.int64)  # microbatches past the first stage, not past the last
    length[:] = 0
    ops[:] = PAD
    left = 3 * V * n
    idle = 0  # devices in a row that could only wait: all of them twice is a deadlock
    while left > 0:
        r = -1
        for d in range(p):  # the device free earliest that still has work
            if length[d] < 3 * n * (V // p) and (r < 0 or free[d] < free[r]):
                r = d
        t = free[r]
        pick_row = -1
        pick_s = -1
        arrival = np.inf  # the next input arrival on this device, if it must wait
        for phase in range(2):
            want_i = (phase == 0) == i_first
            for s in range(V - 1, -1, -1):
                if stage_device[s] != r or pick_row >= 0:
                    continue
                if want_i:
                    j = next_i[s]
                    if j >= n:
                        continue
                    ready = i_end[s + 1, j] if s < V - 1 else f_end[s, j]
                    if ready < 0.0:
                        continue
                    if s < V - 1 and stage_device[s + 1] != r:
                        ready += comm[s]
                    if ready <= t:
                        pick_row, pick_s = ROW_I, s
                    else:
                        arrival = min(arrival, ready)
                else:
                    j = next_f[s]
                    if j >= n:
                        continue
                    ready = 0.0
                    if s > 0:
                        ready = f_end[s - 1, j]
                        if ready < 0.0:
                            continue
                        if stage_device[s - 1] != r:
                            ready += comm[s - 1]
                    room = held[r] + memd[ROW_F, s]
                    if s == first[r]:  # and the later stages of this and every waiting one
                        room += later[r] * (waiting[r] + 1)
                    if room > cap[r]:
                        continue
                    if ready <= t:
                        pick_row, pick_s = ROW_F, s
                    else:
                        arrival = min(arrival, ready)
        if pick_row < 0 and w_head[r] < w_tail[r]:
            pick_row = ROW_W
        if pick_row < 0:
            if arrival == np.inf:  # nothing arrives until another device moves: wait for it
                idle += 1
                if idle > 4 * p + 4:
                    return False
                for d in range(p):
                    if d != r and free[d] > t:
                        arrival = min(arrival, free[d])
                if arrival == np.inf:  # the others are free now too: let them go first
                    arrival = np.nextafter(t, np.inf)  # (only the order is kept)
            free[r] = arrival
            continue
        idle = 0
        if pick_row == ROW_W:
            s = w_queue[r, w_head[r], 0]
            j = w_queue[r, w_head[r], 1]
            w_head[r] += 1
        else:
            s = pick_s
            j = next_f[s] if pick_row == ROW_F else next_i[s]
        finish = t + cost[pick_row, s]
        held[r] += memd[pick_row, s]
        if pick_row == ROW_F:
            f_end[s, j] = finish
            next_f[s] += 1
            if s == first[r]:
                waiting[r] += 1
            elif s == V - 1 or stage_device[s + 1] != r:  # its last stage on this device
                waiting[r] -= 1
        elif pick_row == ROW_I:
            i_end[s, j] = finish
            next_i[s] += 1
            w_queue[r, w_tail[r], 0] = s
            w_queue[r, w_tail[r], 1] = j
            w_tail[r] += 1
        q = length[r]
        ops[0, r, q] = SPLIT_KINDS[pick_row]
        ops[1, r, q] = s
        ops[2, r, q] = j
        length[r] = q + 1
        free[r] = finish
        left -= 1
    return True
