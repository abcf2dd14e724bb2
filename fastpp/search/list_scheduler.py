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
    waits for the next arrival (with none on its way, until a device runs an op that feeds
    it). A forward starts only if it fits, and a device's first-stage forward also keeps room
    for the same microbatch's forwards on the device's later stages: microbatches enter each
    stage in order and the oldest one can always move, so it never deadlocks on memory.
    Returns ``False`` if the limit leaves no room for one microbatch. Each op costs
    ``O(V/p + log p)``: the devices wait in a heap, and each looks only at its own stages.
    """
    p = cap.shape[0]
    V = stage_device.shape[0]
    per = V // p  # stages per device
    mine = _stages_of(stage_device, p, per)  # each device's stages, later first
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
    first, later = _first_stages(stage_device, memd, p)
    waiting = np.zeros(p, np.int64)  # microbatches past the first stage, not past the last
    length[:] = 0
    ops[:] = PAD

    def i_input(s, r):
        """When the next ``I`` of stage ``s`` (on device ``r``) has its input: the ``I`` of
        stage ``s+1`` (the last stage: its own forward); -1 if none is left or not yet."""
        j = next_i[s]
        if j >= n:
            return -1.0
        ready = i_end[s + 1, j] if s < V - 1 else f_end[s, j]
        if ready < 0.0:
            return -1.0
        if s < V - 1 and stage_device[s + 1] != r:
            ready += comm[s]
        return ready

    def f_input(s, r):
        """When the next forward of stage ``s`` (on device ``r``) has its input; -1 if none is
        left, its input is not yet placed, or it does not fit in memory."""
        j = next_f[s]
        if j >= n:
            return -1.0
        ready = 0.0
        if s > 0:
            ready = f_end[s - 1, j]
            if ready < 0.0:
                return -1.0
            if stage_device[s - 1] != r:
                ready += comm[s - 1]
        room = held[r] + memd[ROW_F, s]
        if s == first[r]:  # and the later stages of this and every waiting one
            room += later[r] * (waiting[r] + 1)
        if room > cap[r]:
            return -1.0
        return ready

    def pick(r, t):
        """The op device ``r`` starts at ``t``: ``(row, stage, arrival)``, the row ``ROW_I`` or
        ``ROW_F`` of a ready op by the priority, else ``ROW_W`` if a ``W`` is pending (its
        stage comes from the queue), else -1; ``arrival`` the next input arrival seen on the
        device (inf: none)."""
        arrival = np.inf
        for phase in range(2):
            row = ROW_I if (phase == 0) == i_first else ROW_F
            for k in range(per):
                s = mine[r, k]
                ready = i_input(s, r) if row == ROW_I else f_input(s, r)
                if ready < 0.0:
                    continue
                if ready <= t:
                    return row, s, arrival
                arrival = min(arrival, ready)
        if w_head[r] < w_tail[r]:
            return ROW_W, -1, arrival
        return -1, -1, arrival

    def run(r, row, s, t):
        """Device ``r`` runs the op of ``row`` from ``t`` (a ``W``: the oldest pending) and
        writes it to the op block."""
        if row == ROW_W:
            s = w_queue[r, w_head[r], 0]
            j = w_queue[r, w_head[r], 1]
            w_head[r] += 1
        else:
            j = next_f[s] if row == ROW_F else next_i[s]
        finish = t + cost[row, s]
        held[r] += memd[row, s]
        if row == ROW_F:
            f_end[s, j] = finish
            next_f[s] += 1
            if s == first[r]:
                waiting[r] += 1
            elif s == V - 1 or stage_device[s + 1] != r:  # its last stage on this device
                waiting[r] -= 1
        elif row == ROW_I:
            i_end[s, j] = finish
            next_i[s] += 1
            w_queue[r, w_tail[r], 0] = s
            w_queue[r, w_tail[r], 1] = j
            w_tail[r] += 1
        q = length[r]
        ops[0, r, q] = SPLIT_KINDS[row]
        ops[1, r, q] = s
        ops[2, r, q] = j
        length[r] = q + 1
        free[r] = finish

    # the devices that can move, in a heap by (free, device): the one free earliest (the
    # lowest-numbered of a tie) at its root. A device with nothing ready and no input on its
    # way leaves it until another device runs an op that feeds one of its stages, and a device
    # out of work leaves it for good; none left with work to do is a deadlock.
    heap = np.arange(p)
    size = p
    blocked = np.zeros(p, np.bool_)
    left = 3 * V * n
    while left > 0:
        if size == 0:
            return False
        r = heap[0]
        t = free[r]
        row, s, arrival = pick(r, t)
        if row >= 0:
            run(r, row, s, t)
            left -= 1
        if row < 0 and arrival < np.inf:
            free[r] = arrival
        elif row < 0 or length[r] == 3 * n * per:  # nothing on its way, or out of work
            blocked[r] = row < 0
            size -= 1
            heap[0] = heap[size]
        _sift_down(heap, size, free)
        # the device of the stage this op feeds can move again, from now
        to = s + 1 if row == ROW_F and s < V - 1 else s - 1 if row == ROW_I and s > 0 else -1
        if to >= 0 and blocked[stage_device[to]]:
            d = stage_device[to]
            blocked[d] = False
            free[d] = t
            heap[size] = d
            size += 1
            _sift_up(heap, size - 1, free)
    return True


@jit
def _stages_of(stage_device, p, per):
    """Each device's ``per`` stages, the later first (the order ``pick`` prefers)."""
    mine = np.empty((p, per), np.int64)
    count = np.zeros(p, np.int64)
    for s in range(stage_device.shape[0] - 1, -1, -1):
        r = stage_device[s]
        mine[r, count[r]] = s
        count[r] += 1
    return mine


@jit
def _before(a, b, free):
    """Whether device ``a`` comes before ``b``: free earlier, or as early and numbered lower."""
    return free[a] < free[b] or (free[a] == free[b] and a < b)


@jit
def _sift_down(heap, size, free):
    """Restore the heap's order after its root's key changed."""
    i = 0
    while True:
        low = i
        for c in (2 * i + 1, 2 * i + 2):
            if c < size and _before(heap[c], heap[low], free):
                low = c
        if low == i:
            return
        heap[i], heap[low] = heap[low], heap[i]
        i = low


@jit
def _sift_up(heap, i, free):
    """Restore the heap's order after a device joined it at ``i``."""
    while i > 0:
        up = (i - 1) // 2
        if not _before(heap[i], heap[up], free):
            return
        heap[i], heap[up] = heap[up], heap[i]
        i = up


@jit
def _first_stages(stage_device, memd, p):
    """Each device's first stage on the route, and the memory one microbatch's forwards take
    on the device's later stages."""
    V = stage_device.shape[0]
    first = np.full(p, V, np.int64)
    later = np.zeros(p)
    for s in range(V):
        r = stage_device[s]
        if s < first[r]:
            first[r] = s
    for s in range(V):
        r = stage_device[s]
        if s != first[r]:
            later[r] += memd[ROW_F, s]
    return first, later
