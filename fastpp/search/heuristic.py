"""Greedy schedulers with a memory limit, as jitted kernels.

``zb_greedy``: the Zero Bubble authors' automatic scheduler (Qi et al., ICLR 2024, section 3;
their ``Graph.manual_order``), loop placement, one stage per device. ``v_greedy``: the same
authors' scheduler for the V placement (their ``PipelineGraph.try_v_schedule``). Both are
written from the algorithms' descriptions in ``SEARCH.md`` with per-stage costs and links.

Inputs, per virtual stage ``s`` (length ``V``): ``cost[k, s]`` is the time of op kind ``k`` (rows
``F, I, W`` below), ``memd[k, s]`` what it adds to its device's memory (``+unit`` for ``F``,
``-(1-gamma) unit`` for ``I``, ``-gamma unit`` for ``W``: the engine's arithmetic, so the
running totals equal ``fastpp.kernels.memory`` to the bit), ``comm[s]`` the hand-off between
stages ``s`` and ``s+1``; ``cap[r]`` the memory limit of device ``r`` (tolerance included).
The kernels fill an op block and ``length`` and return ``False`` where the authors' code fails
(a limit that a needed forward cannot fit). Their helpers are closures over the kernels' arrays:
Numba inlines a closure without passing (and reference-counting) each array, which made the
greedy seven times faster than helpers taking the arrays as arguments.
"""

import numpy as np

from .._jit import jit
from ..ops import PAD, ROW_F, ROW_I, ROW_W, SPLIT_KINDS

# The loop greedy's inputs and state, packed into a few arrays that its helpers (closures,
# which Numba inlines without reference counting) read.
# table[...]: rows 0-2 op times (F, I, W), 3-5 memory changes, 6 the device's limit
MEM, CAP = 3, 6
# state[...]: rows 0 when each stage is next free, 1 its memory, 2 its idle (its largest last)
FREE, HELD, IDLE = 0, 1, 2


@jit
def zb_greedy(cost, memd, comm, cap, n, allow_bubble_before_first_b, prioritize_b,
              no_bubble_greedy, ops, length):
    """The Zero Bubble authors' greedy on the loop placement (stage ``r`` on device ``r``).

    Round ``i`` places ``I(., i)`` on every stage and at most one forward per stage; round 0
    also decides each stage's warm-up forwards. ``W``s fill waits that exceed the bubble
    budget, make room in memory, or run at the end. Returns ``(ok, span, makespan)`` where
    ``span`` is the authors' ``best``: the largest ``end of W(s, n-1) - start of F(s, 0)``.
    """
    p = cost.shape[1]
    table = np.empty((7, p))
    table[:3] = cost
    table[MEM:CAP] = memd
    table[CAP] = cap
    cnt = np.zeros((3, p), np.int64)  # F, I, W placed per stage
    state = np.zeros((3, p + 1))
    t = np.zeros((3, p, n))  # end time of each placed op
    ops[:] = PAD
    f_req = np.zeros(p, np.int64)
    ok = _zb_rounds(n, comm, allow_bubble_before_first_b, prioritize_b, no_bubble_greedy,
                    table, cnt, state, t, ops, f_req)
    for s in range(p):
        length[s] = cnt[ROW_F, s] + cnt[ROW_I, s] + cnt[ROW_W, s]
    if not ok:
        return False, 0.0, 0.0
    span = 0.0
    makespan = 0.0
    for s in range(p):
        span = max(span, t[ROW_W, s, n - 1] - t[ROW_F, s, 0] + cost[ROW_F, s])
        makespan = max(makespan, state[FREE, s])
    return True, span, makespan - (t[ROW_F, 0, 0] - cost[ROW_F, 0])


@jit
def zb_best(cost, memd, comm, cap, n, span_objective, ops, length):
    """The authors' 8 runs of ``zb_greedy`` (``allow_bubble_before_first_b`` outermost, True
    before False) and their choice: the smallest objective, ties to the first; runs that fail
    are skipped. Fills ``ops`` and ``length`` with the choice and returns ``(ok, setting)``,
    ``setting`` its index in that order."""
    scratch = np.empty_like(ops)
    scratch_length = np.empty_like(length)
    best = np.inf
    chosen = -1
    for setting in range(8):
        ok, span, makespan = zb_greedy(cost, memd, comm, cap, n, setting < 4,
                                       (setting // 2) % 2 == 0, setting % 2 == 0, scratch,
                                       scratch_length)
        value = span if span_objective else makespan
        if ok and value < best:
            best = value
            chosen = setting
            ops[:] = scratch
            length[:] = scratch_length
    return chosen >= 0, chosen


@jit
def _zb_rounds(n, comm, allow_bubble_before_first_b, prioritize_b, no_bubble_greedy, table,
               cnt, state, t, ops, f_req):
    """``zb_greedy``'s rounds; ``False`` where the authors' code fails."""
    p = table.shape[1]
    free, held, idle = state[FREE], state[HELD], state[IDLE]

    def place(r, k, j, ready):
        """Run op kind ``k`` of stage ``r`` (microbatch ``j``) next on device ``r`` as soon as
        it can start; ``ready`` is when its cross-device input arrives (-1: none)."""
        c = table[k, r]
        finish = free[r] + c
        if ready >= 0.0:
            finish = max(finish, ready + c)
        if cnt[ROW_F, r] > 0:  # idle time counts from the device's first forward on
            idle[r] += finish - (free[r] + c)
            idle[-1] = max(idle[-1], idle[r])  # idle only grows: the running max is the max
        free[r] = finish
        held[r] += table[MEM + k, r]
        t[k, r, j] = finish
        q = cnt[ROW_F, r] + cnt[ROW_I, r] + cnt[ROW_W, r]
        ops[0, r, q] = SPLIT_KINDS[k]
        ops[1, r, q] = r
        ops[2, r, q] = j
        cnt[k, r] += 1

    def fill_w(s, k, ready):
        """Before op kind ``k`` on stage ``s``: ``W``s until it fits in memory, the ``W``s that
        end before its input arrives at ``ready``, and one more that overruns the arrival when
        the wait would exceed the bubble budget (or, with ``no_bubble_greedy``, would not)."""
        while held[s] + table[MEM + k, s] > table[CAP, s]:
            if cnt[ROW_W, s] >= cnt[ROW_I, s]:
                return False  # "cannot fit memory"
            place(s, ROW_W, cnt[ROW_W, s], -1.0)
        if ready < 0.0:
            return True
        while cnt[ROW_W, s] < cnt[ROW_I, s] and free[s] + table[ROW_W, s] <= ready:
            place(s, ROW_W, cnt[ROW_W, s], -1.0)
        if cnt[ROW_W, s] < cnt[ROW_I, s] and free[s] < ready:
            if ready - free[s] > idle[-1] - idle[s] or no_bubble_greedy:
                place(s, ROW_W, cnt[ROW_W, s], -1.0)
        return True

    for i in range(n):
        f_req[:] = 0
        if i == 0:
            # warm-up: F(s, 0) everywhere, then forwards while they fit before the first I
            for s in range(p):
                if held[s] + table[MEM + ROW_F, s] > table[CAP, s]:
                    return False
                place(s, ROW_F, 0, t[ROW_F, s - 1, 0] + comm[s - 1] if s > 0 else -1.0)
            last_t = t[ROW_F, p - 1, 0] + table[ROW_I, p - 1]  # when the last stage's I(0) ends
            for s in range(p - 2, -1, -1):
                mem = held[s]
                busy_until = free[s]
                while cnt[ROW_F, s] + f_req[s] < n and mem + table[MEM + ROW_F, s] <= table[CAP, s]:
                    if allow_bubble_before_first_b:
                        if busy_until + table[ROW_F, s] > last_t + comm[s]:
                            break
                    elif busy_until >= last_t + comm[s]:
                        break
                    mem += table[MEM + ROW_F, s]
                    busy_until += table[ROW_F, s]
                    f_req[s] += 1
                last_t = max(busy_until, last_t + comm[s]) + table[ROW_I, s]
            # each stage fewer than the one before; capped at it when it would take them all
            for s in range(1, p):
                while (f_req[s] > 0 and f_req[s] >= f_req[s - 1]
                       and cnt[ROW_F, s] + f_req[s] < n):
                    f_req[s] -= 1
                f_req[s] = min(f_req[s], f_req[s - 1])
            for s in range(p):
                for _ in range(f_req[s]):
                    j = cnt[ROW_F, s]
                    place(s, ROW_F, j, t[ROW_F, s - 1, j] + comm[s - 1] if s > 0 else -1.0)
        else:
            for s in range(p):
                if cnt[ROW_F, s] >= n:
                    continue
                if prioritize_b and s + 1 < p and cnt[ROW_F, s] >= cnt[ROW_F, s + 1] + 2:
                    # when the next I's input may arrive, if stage s+1 runs F then I next
                    due = free[s + 1] + table[ROW_F, s + 1] + table[ROW_I, s + 1] + comm[s]
                    if free[s] >= due:
                        continue
                    mem = held[s] + table[MEM + ROW_F, s]
                    w_cost = 0.0
                    w_cnt = 0
                    while mem > table[CAP, s] and cnt[ROW_W, s] + w_cnt < cnt[ROW_I, s]:
                        w_cost += table[ROW_W, s]
                        mem += table[MEM + ROW_W, s]
                        w_cnt += 1
                    if free[s] + table[ROW_F, s] + w_cost <= due:
                        f_req[s] = 1
                        continue
                    if due - free[s] <= idle[-1] - idle[s]:
                        continue
                f_req[s] = 1
            for s in range(p - 2, -1, -1):  # a stage takes a forward only if all later ones do
                f_req[s] = min(f_req[s], f_req[s + 1])
            for s in range(p):
                if f_req[s] == 0:
                    continue
                j = cnt[ROW_F, s]
                ready = t[ROW_F, s - 1, j] + comm[s - 1] if s > 0 else -1.0
                if not fill_w(s, ROW_F, ready):
                    return False
                place(s, ROW_F, j, ready)
        for s in range(p - 1, -1, -1):
            ready = t[ROW_I, s + 1, i] + comm[s] if s + 1 < p else -1.0
            if not fill_w(s, ROW_I, ready):
                return False
            if s == 0 and cnt[ROW_F, 0] == n:  # the first stage drains its W's before each I
                while cnt[ROW_W, 0] < cnt[ROW_I, 0]:
                    place(0, ROW_W, cnt[ROW_W, 0], -1.0)
            place(s, ROW_I, i, ready)
    for s in range(p):
        while cnt[ROW_W, s] < n:
            place(s, ROW_W, cnt[ROW_W, s], -1.0)
    return True


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
    forwards). ``approved`` (per device, -1: none; its largest last) widens the budget to a
    previous run's idle. Returns ``(ok, largest idle after a device's first forward)``;
    ``bubble`` gets each device's idle and their largest last.
    """
    p = cap.shape[0]
    cnt = np.zeros((p, 6), np.int64)  # per slot VF0..VI0; W's done; W's queued
    wdone = np.zeros((p, 2), np.int64)  # W's done for the stages of VI1 and VI0
    pend = np.zeros((p, 2 * n), np.int64)  # each device's queue of W's (as the slot of its I)
    free = np.zeros(p)
    held = np.zeros(p)
    t = np.full((4, p, n), -1.0)  # end of each slot's op, per device and microbatch
    bubble[:] = 0.0
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
        j = cnt[r, x]
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
        if cnt[r, VF0] > 0:
            bubble[r] += finish - (free[r] + c)
            bubble[-1] = max(bubble[-1], bubble[r])
        free[r] = finish
        t[x, r, j] = finish
        held[r] += memd[k, s]
        write(r, SPLIT_KINDS[k], s, j)
        cnt[r, x] += 1
        if k == ROW_I:  # its W waits in the device's queue
            pend[r, cnt[r, 4] + cnt[r, 5]] = x
            cnt[r, 5] += 1
        return True

    def put_w(r):
        """The oldest queued ``W`` of device ``r``."""
        x = pend[r, cnt[r, 4]]
        cnt[r, 4] += 1
        cnt[r, 5] -= 1
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
        while cnt[r, 5] > 0 and ready >= free[r] + cost[ROW_W, stage(pend[r, cnt[r, 4]], r)]:
            put_w(r)
        budget = max(bubble[-1], approved[-1] - approved[r]) - bubble[r]
        if cnt[r, 5] > 0 and ready - free[r] > budget and always:
            put_w(r)

    for r in range(p):
        if not put_slot(VF0, r):
            return False, 0.0
    for r in range(p - 1, -1, -1):
        if r < p - 1:
            due = t[VF1, r + 1, 0] + comm[2 * p - 2 - r]
            while (held[r] + memd[ROW_F, r] * (2 + 2 * r) <= cap[r]
                   and free[r] + cost[ROW_F, r] <= due and cnt[r, VF0] < n):
                for q in range(r + 1):
                    if not put_slot(VF0, q):
                        return False, 0.0
        if not put_slot(VF1, r):
            return False, 0.0
    chunk = 0
    for r in range(1, p):
        stuck = 0
        while (cnt[r, VF0] + cnt[r, VF1] < cnt[r - 1, VF0] + cnt[r - 1, VF1]
               or cnt[r, VF1] <= cnt[r - 1, VF1] < n):
            stuck += 1
            for q in range(p - 1, r - 1, -1):
                if cnt[q, chunk] < n:
                    if not put_slot(chunk, q):
                        return False, 0.0
                    stuck = 0
            chunk = 1 - chunk
            if stuck == 2:  # neither chunk can move: the authors' loop would not end
                return False, 0.0
    order = np.empty(p, np.int64)
    up = np.zeros(p, np.bool_)
    for _ in range(2 * n):
        # an I on every device: chunk 0's (VI0) descending where it may, then chunk 1's (VI1)
        for r in range(p):
            up[r] = cnt[r, VI0] < cnt[r, VI1] and (
                r == p - 1 or t[VI0, r + 1, cnt[r, VI0]] >= 0.0 or cnt[r, VI1] >= n)
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
            fill(r, ready_at(x, r, cnt[r, x]) if cnt[r, x] < n else -1.0,
                 fill_b or x == VI0)
            if not put_slot(x, r):
                return False, 0.0
        # a forward on every device that has one left and whose input is placed
        for r in range(p):
            if cnt[r, VF1] >= n:
                continue
            x = -1
            if cnt[r, VF1] >= cnt[r, VF0]:
                x = VF0
            elif r == p - 1 or t[VF1, r + 1, cnt[r, VF1]] >= 0.0:
                x = VF1
            elif cnt[r, VF0] < n and (r == 0 or t[VF0, r - 1, cnt[r, VF0]] >= 0.0):
                x = VF0
            if x < 0:
                continue
            while held[r] + memd[ROW_F, stage(x, r)] > cap[r]:
                if cnt[r, 5] == 0:
                    return False, 0.0
                put_w(r)
            fill(r, ready_at(x, r, cnt[r, x]), fill_f)
            if not put_slot(x, r):
                return False, 0.0
    for r in range(p):
        while cnt[r, 5] > 0:
            put_w(r)
        if cnt[r, VI0] < n or cnt[r, VI1] < n:
            return False, 0.0
    return True, bubble[-1]


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
    w_queue = np.zeros((p, V * n, 2), np.int64)  # each device's pending W's: (stage, mb)
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
        pick_kind = -1
        pick_s = -1
        arrival = np.inf  # the next input arrival on this device, if it must wait
        for phase in range(2):
            want_i = (phase == 0) == i_first
            for s in range(V - 1, -1, -1):
                if stage_device[s] != r or pick_kind >= 0:
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
                        pick_kind, pick_s = ROW_I, s
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
                        pick_kind, pick_s = ROW_F, s
                    else:
                        arrival = min(arrival, ready)
        if pick_kind < 0 and w_head[r] < w_tail[r]:
            pick_kind = ROW_W
        if pick_kind < 0:
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
        if pick_kind == ROW_W:
            s = w_queue[r, w_head[r], 0]
            j = w_queue[r, w_head[r], 1]
            w_head[r] += 1
        else:
            s = pick_s
            j = next_f[s] if pick_kind == ROW_F else next_i[s]
        finish = t + cost[pick_kind, s]
        held[r] += memd[pick_kind, s]
        if pick_kind == ROW_F:
            f_end[s, j] = finish
            next_f[s] += 1
            if s == first[r]:
                waiting[r] += 1
            elif s == V - 1 or stage_device[s + 1] != r:  # its last stage on this device
                waiting[r] -= 1
        elif pick_kind == ROW_I:
            i_end[s, j] = finish
            next_i[s] += 1
            w_queue[r, w_tail[r], 0] = s
            w_queue[r, w_tail[r], 1] = j
            w_tail[r] += 1
        q = length[r]
        ops[0, r, q] = SPLIT_KINDS[pick_kind]
        ops[1, r, q] = s
        ops[2, r, q] = j
        length[r] = q + 1
        free[r] = finish
        left -= 1
    return True
