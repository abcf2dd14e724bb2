"""The Zero Bubble authors' V scheduler, a greedy with a memory limit (jitted).

Source: the scheduler behind ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024);
the authors' code, sail-sg/zero-bubble-pipeline-parallelism,
``megatron/core/pipeline_parallel/v_schedule.py`` (``PipelineGraph.try_v_schedule``). Written
from that algorithm's description, with per-stage costs and links. V placement: device ``r``
holds stages ``r`` and ``2p-1-r``.

Inputs: the per-stage arrays of ``fastpp.search.problem`` (``cost``, ``memd``, ``comm``,
``cap``). The kernel fills an op block and ``length``, and returns ``False`` where the authors'
code fails or asserts. Its helpers are closures over the kernel's arrays: Numba inlines a
closure without passing (and reference-counting) each array, which made the greedy seven times
faster than helpers taking the arrays as arguments.
"""

import numpy as np

from .._jit import jit
from ..ops import PAD, ROW_F, ROW_I, ROW_W, SPLIT_KINDS

# The V greedy's op slots on device r, in the order one microbatch meets them: F of chunk 0
# (stage r, down the V), F of chunk 1 (stage 2p-1-r, up), I of chunk 1, I of chunk 0.
VF0, VF1, VI1, VI0 = 0, 1, 2, 3


@jit
def v_greedy(cost, memd, comm, cap, n, fill_f, fill_b, approved, ops, length, bubble):
    """The Zero Bubble authors' V scheduler: device ``r`` holds stages ``r`` and ``2p-1-r``.

    Warm-up: forwards of chunk 0 while they fit before chunk 1's first forward arrives, then
    both chunks until every device is at least as far as the one before. Then ``2n`` rounds,
    each an ``I`` and (while any is left) a forward on every device, ``W``s filling the waits
    longer than the bubble budget (``fill_b``, ``fill_f``: also before ``I``s of chunk 1 and
    forwards). ``approved`` (per device, -1: none) widens the budget to a previous run's idle.
    Returns ``(ok, largest idle after a device's first forward)``; ``bubble`` gets each
    device's idle.
    """
    p = cap.shape[0]
    placed = np.zeros((p, 4), np.int64)  # microbatches placed per slot VF0..VI0
    w_head = np.zeros(p, np.int64)  # W's run: the head of each device's queue ``pend``
    w_queued = np.zeros(p, np.int64)  # W's waiting in it
    wdone = np.zeros((p, 2), np.int64)  # W's done for the stages of VI1 and VI0
    pend = np.zeros((p, 2 * n), np.int64)  # each device's queue of W's (as the slot of its I)
    free = np.zeros(p)
    held = np.zeros(p)
    t = np.full((4, p, n), -1.0)  # end of each slot's op, per device and microbatch
    bubble[:] = 0.0
    most_bubble = np.zeros(1)  # the largest of ``bubble``: the budget's ceiling
    most_approved = approved.max()
    length[:] = 0
    ops[:] = PAD

    def stage(x, r):
        return r if x == VF0 or x == VI0 else 2 * p - 1 - r

    def ready_at(x, r, j):
        """When slot ``x`` of microbatch ``j`` on device ``r`` gets its cross-device input:
        -1 if it has none (the bottom or the top of the V), -2 if it is not placed yet."""
        if x == VF0 or x == VI1:
            if r == 0:
                return -1.0
            src = r - 1
            link = r - 1 if x == VF0 else 2 * p - 1 - r  # stages r-1 -> r, 2p-r -> 2p-1-r
        else:
            if r == p - 1:
                return -1.0
            src = r + 1
            link = 2 * p - 2 - r if x == VF1 else r  # stages 2p-2-r -> 2p-1-r, r+1 -> r
        if t[x, src, j] < 0.0:
            return -2.0
        return t[x, src, j] + comm[link]

    def write(r, kind, s, j):
        q = length[r]
        ops[0, r, q] = kind
        ops[1, r, q] = s
        ops[2, r, q] = j
        length[r] = q + 1

    def put_slot(x, r):
        """Run slot ``x`` of device ``r``'s next microbatch for it; ``False`` where the
        authors' code asserts (no microbatch left, no memory, an input not placed)."""
        j = placed[r, x]
        if j >= n:
            return False
        s = stage(x, r)
        k = ROW_F if x <= VF1 else ROW_I
        if held[r] + memd[k, s] > cap[r]:
            return False
        if x > 0 and t[x - 1, r, j] < 0.0:  # this microbatch's previous slot on the device
            return False
        ready = ready_at(x, r, j)
        if ready == -2.0:
            return False
        c = cost[k, s]
        finish = free[r] + c
        if ready >= 0.0:
            finish = max(finish, ready + c)
        if placed[r, VF0] > 0:
            bubble[r] += finish - (free[r] + c)
            most_bubble[0] = max(most_bubble[0], bubble[r])  # it only grows: the max
        free[r] = finish
        t[x, r, j] = finish
        held[r] += memd[k, s]
        write(r, SPLIT_KINDS[k], s, j)
        placed[r, x] += 1
        if k == ROW_I:  # its W waits in the device's queue
            pend[r, w_head[r] + w_queued[r]] = x
            w_queued[r] += 1
        return True

    def put_w(r):
        """The oldest queued ``W`` of device ``r``."""
        x = pend[r, w_head[r]]
        w_head[r] += 1
        w_queued[r] -= 1
        s = stage(x, r)
        free[r] += cost[ROW_W, s]
        held[r] += memd[ROW_W, s]
        side = 0 if x == VI1 else 1
        write(r, SPLIT_KINDS[ROW_W], s, wdone[r, side])
        wdone[r, side] += 1

    def fill(r, ready, always):
        """Before an op whose input arrives at ``ready`` (-1: none): the queued ``W``s that end
        by then, and one more when the wait exceeds the bubble budget and ``always`` is set."""
        if ready < 0.0:
            return
        while w_queued[r] > 0 and ready >= free[r] + cost[ROW_W, stage(pend[r, w_head[r]], r)]:
            put_w(r)
        budget = max(most_bubble[0], most_approved - approved[r]) - bubble[r]
        if w_queued[r] > 0 and ready - free[r] > budget and always:
            put_w(r)

    def warm_up():
        """Chunk 0's forwards while they fit before chunk 1's first arrives, then both chunks
        until every device is at least as far as the one before it."""
        for r in range(p):
            if not put_slot(VF0, r):
                return False
        for r in range(p - 1, -1, -1):
            if r < p - 1:
                due = t[VF1, r + 1, 0] + comm[2 * p - 2 - r]
                while (held[r] + memd[ROW_F, r] * (2 + 2 * r) <= cap[r]
                       and free[r] + cost[ROW_F, r] <= due and placed[r, VF0] < n):
                    for q in range(r + 1):
                        if not put_slot(VF0, q):
                            return False
            if not put_slot(VF1, r):
                return False
        chunk = 0
        for r in range(1, p):
            stuck = 0
            while (placed[r, VF0] + placed[r, VF1] < placed[r - 1, VF0] + placed[r - 1, VF1]
                   or placed[r, VF1] <= placed[r - 1, VF1] < n):
                stuck += 1
                for q in range(p - 1, r - 1, -1):
                    if placed[q, chunk] < n:
                        if not put_slot(chunk, q):
                            return False
                        stuck = 0
                chunk = 1 - chunk
                if stuck == 2:  # neither chunk can move: the authors' loop would not end
                    return False
        return True

    order = np.empty(p, np.int64)
    up = np.zeros(p, np.bool_)

    def backward_round():
        """An I on every device: chunk 0's (VI0) descending where it may, then chunk 1's."""
        for r in range(p):
            up[r] = placed[r, VI0] < placed[r, VI1] and (
                r == p - 1 or t[VI0, r + 1, placed[r, VI0]] >= 0.0 or placed[r, VI1] >= n)
        n_up = 0
        for r in range(p - 1, -1, -1):
            if up[r]:
                order[n_up] = r
                n_up += 1
        q = n_up
        for r in range(p):
            if not up[r]:
                order[q] = r
                q += 1
        for q in range(p):
            r = order[q]
            x = VI0 if q < n_up else VI1
            fill(r, ready_at(x, r, placed[r, x]) if placed[r, x] < n else -1.0,
                 fill_b or x == VI0)
            if not put_slot(x, r):
                return False
        return True

    def forward_round():
        """A forward on every device that has one left and whose input is placed."""
        for r in range(p):
            if placed[r, VF1] >= n:
                continue
            x = -1
            if placed[r, VF1] >= placed[r, VF0]:
                x = VF0
            elif r == p - 1 or t[VF1, r + 1, placed[r, VF1]] >= 0.0:
                x = VF1
            elif placed[r, VF0] < n and (r == 0 or t[VF0, r - 1, placed[r, VF0]] >= 0.0):
                x = VF0
            if x < 0:
                continue
            while held[r] + memd[ROW_F, stage(x, r)] > cap[r]:
                if w_queued[r] == 0:
                    return False
                put_w(r)
            fill(r, ready_at(x, r, placed[r, x]), fill_f)
            if not put_slot(x, r):
                return False
        return True

    if not warm_up():
        return False, 0.0
    for _ in range(2 * n):
        if not backward_round() or not forward_round():
            return False, 0.0
    for r in range(p):
        while w_queued[r] > 0:
            put_w(r)
        if placed[r, VI0] < n or placed[r, VI1] < n:
            return False, 0.0
    return True, most_bubble[0]
