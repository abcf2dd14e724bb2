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
(a limit that a needed forward cannot fit).
"""

import numpy as np

from .._jit import jit
from ..generators._emit import F as OP_F
from ..generators._emit import I as OP_I
from ..generators._emit import W as OP_W
from ..generators._emit import put
from ..ops import PAD

KF, KI, KW = 0, 1, 2  # rows of ``cost`` and ``memd``; kinds in the greedies' own tables


@jit
def _place(r, k, j, s, cost, memd, ready, cnt, e, mem, bubble, t, ops, length):
    """Run op kind ``k`` of stage ``s`` (its ``cnt``-th, microbatch ``j``) next on device ``r``
    as soon as it can start; ``ready`` is when its cross-device input arrives (-1: none)."""
    c = cost[k, s]
    finish = e[r] + c
    if ready >= 0.0:
        finish = max(finish, ready + c)
    if cnt[KF, r] > 0:  # idle time counts from the device's first forward on
        bubble[r] += finish - (e[r] + c)
    e[r] = finish
    t[k, s, j] = finish
    mem[r] += memd[k, s]
    length[r] = put(ops, r, length[r], (OP_F, OP_I, OP_W)[k], s, j)
    cnt[k, r] += 1


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
    cnt = np.zeros((3, p), np.int64)  # F, I, W placed per stage
    e = np.zeros(p)  # when each stage is next free
    mem = np.zeros(p)
    bubble = np.zeros(p)
    t = np.zeros((3, p, n))  # end time of each placed op
    length[:] = 0
    ops[:] = PAD
    f_req = np.zeros(p, np.int64)
    for i in range(n):
        f_req[:] = 0
        if i == 0:
            # warm-up: F(s, 0) everywhere, then forwards while they fit before the first I
            for s in range(p):
                if mem[s] + memd[KF, s] > cap[s]:
                    return False, 0.0, 0.0
                ready = t[KF, s - 1, 0] + comm[s - 1] if s > 0 else -1.0
                _place(s, KF, 0, s, cost, memd, ready, cnt, e, mem, bubble, t, ops, length)
            last_t = t[KF, p - 1, 0] + cost[KI, p - 1]  # when the last stage's I(0) ends
            for s in range(p - 2, -1, -1):
                held = mem[s]
                busy_until = e[s]
                while cnt[KF, s] + f_req[s] < n and held + memd[KF, s] <= cap[s]:
                    if allow_bubble_before_first_b:
                        if busy_until + cost[KF, s] > last_t + comm[s]:
                            break
                    elif busy_until >= last_t + comm[s]:
                        break
                    held += memd[KF, s]
                    busy_until += cost[KF, s]
                    f_req[s] += 1
                last_t = max(busy_until, last_t + comm[s]) + cost[KI, s]
            # each stage fewer than the one before; capped at it when it would take them all
            for s in range(1, p):
                while (f_req[s] > 0 and f_req[s] >= f_req[s - 1]
                       and cnt[KF, s] + f_req[s] < n):
                    f_req[s] -= 1
                f_req[s] = min(f_req[s], f_req[s - 1])
            for s in range(p):
                for _ in range(f_req[s]):
                    j = cnt[KF, s]
                    ready = t[KF, s - 1, j] + comm[s - 1] if s > 0 else -1.0
                    _place(s, KF, j, s, cost, memd, ready, cnt, e, mem, bubble, t, ops,
                           length)
        else:
            for s in range(p):
                if cnt[KF, s] >= n:
                    continue
                if prioritize_b and s + 1 < p and cnt[KF, s] >= cnt[KF, s + 1] + 2:
                    # when the next I's input may arrive, if stage s+1 runs F then I next
                    due = e[s + 1] + cost[KF, s + 1] + cost[KI, s + 1] + comm[s]
                    if e[s] >= due:
                        continue
                    held = mem[s] + memd[KF, s]
                    w_cost = 0.0
                    w_cnt = 0
                    while held > cap[s] and cnt[KW, s] + w_cnt < cnt[KI, s]:
                        w_cost += cost[KW, s]
                        held += memd[KW, s]
                        w_cnt += 1
                    if e[s] + cost[KF, s] + w_cost <= due:
                        f_req[s] = 1
                        continue
                    if due - e[s] <= bubble.max() - bubble[s]:
                        continue
                f_req[s] = 1
            for s in range(p - 2, -1, -1):  # a stage takes a forward only if all later ones do
                f_req[s] = min(f_req[s], f_req[s + 1])
            for s in range(p):
                if f_req[s] == 0:
                    continue
                j = cnt[KF, s]
                ready = t[KF, s - 1, j] + comm[s - 1] if s > 0 else -1.0
                if not _fill_w(s, KF, ready, no_bubble_greedy, cost, memd, cap, cnt, e, mem,
                               bubble, t, ops, length):
                    return False, 0.0, 0.0
                _place(s, KF, j, s, cost, memd, ready, cnt, e, mem, bubble, t, ops, length)
        for s in range(p - 1, -1, -1):
            ready = t[KI, s + 1, i] + comm[s] if s + 1 < p else -1.0
            if not _fill_w(s, KI, ready, no_bubble_greedy, cost, memd, cap, cnt, e, mem, bubble,
                           t, ops, length):
                return False, 0.0, 0.0
            if s == 0 and cnt[KF, 0] == n:  # the first stage drains its W's before each I
                while cnt[KW, 0] < cnt[KI, 0]:
                    _place_w(0, cost, memd, cnt, e, mem, bubble, t, ops, length)
            _place(s, KI, i, s, cost, memd, ready, cnt, e, mem, bubble, t, ops, length)
    for s in range(p):
        while cnt[KW, s] < n:
            _place_w(s, cost, memd, cnt, e, mem, bubble, t, ops, length)
    span = 0.0
    makespan = 0.0
    for s in range(p):
        span = max(span, t[KW, s, n - 1] - t[KF, s, 0] + cost[KF, s])
        makespan = max(makespan, e[s])
    return True, span, makespan - (t[KF, 0, 0] - cost[KF, 0])


@jit
def _place_w(s, cost, memd, cnt, e, mem, bubble, t, ops, length):
    """The oldest pending ``W`` of stage ``s`` (loop placement: device ``s``)."""
    _place(s, KW, cnt[KW, s], s, cost, memd, -1.0, cnt, e, mem, bubble, t, ops, length)


@jit
def _fill_w(s, k, ready, no_bubble_greedy, cost, memd, cap, cnt, e, mem, bubble, t, ops, length):
    """Before op kind ``k`` on stage ``s``: ``W``s until it fits in memory, the ``W``s that end
    before its input arrives at ``ready``, and one more that overruns the arrival when the wait
    would exceed the bubble budget (or, with ``no_bubble_greedy``, when it would not)."""
    while mem[s] + memd[k, s] > cap[s]:
        if cnt[KW, s] >= cnt[KI, s]:
            return False  # "cannot fit memory"
        _place_w(s, cost, memd, cnt, e, mem, bubble, t, ops, length)
    if ready < 0.0:
        return True
    while cnt[KW, s] < cnt[KI, s] and e[s] + cost[KW, s] <= ready:
        _place_w(s, cost, memd, cnt, e, mem, bubble, t, ops, length)
    if cnt[KW, s] < cnt[KI, s] and e[s] < ready:
        if ready - e[s] > bubble.max() - bubble[s] or no_bubble_greedy:
            _place_w(s, cost, memd, cnt, e, mem, bubble, t, ops, length)
    return True


# The V greedy's op slots on device r, in the order one microbatch meets them: F of chunk 0
# (stage r, down the V), F of chunk 1 (stage 2p-1-r, up), I of chunk 1, I of chunk 0.
VF0, VF1, VI1, VI0 = 0, 1, 2, 3


@jit
def _v_stage(x, r, p):
    return r if x == VF0 or x == VI0 else 2 * p - 1 - r


@jit
def _v_ready(x, r, j, p, comm, t):
    """When slot ``x`` of microbatch ``j`` on device ``r`` gets its cross-device input:
    -1 if it has none (the bottom or the top of the V), -2 if that input is not placed yet."""
    if x == VF0 or x == VI1:
        if r == 0:
            return -1.0
        src = r - 1
        link = r - 1 if x == VF0 else 2 * p - 1 - r  # stages r-1 -> r, or 2p-r -> 2p-1-r
    else:
        if r == p - 1:
            return -1.0
        src = r + 1
        link = 2 * p - 2 - r if x == VF1 else r  # stages 2p-2-r -> 2p-1-r, or r+1 -> r
    if t[x, src, j] < 0.0:
        return -2.0
    return t[x, src, j] + comm[link]


@jit
def _v_put(x, r, cost, memd, comm, cap, n, cnt, e, mem, bubble, t, pend, ops, length):
    """Run slot ``x`` (``VF0..VI0``) of device ``r``'s next microbatch for it; ``False`` where
    the authors' code asserts (no microbatch left, no memory, an input not placed)."""
    p = cap.shape[0]
    j = cnt[r, x]
    if j >= n:
        return False
    s = _v_stage(x, r, p)
    k = KF if x <= VF1 else KI
    if mem[r] + memd[k, s] > cap[r]:
        return False
    if x > 0 and t[x - 1, r, j] < 0.0:  # this microbatch's previous slot on the device
        return False
    ready = _v_ready(x, r, j, p, comm, t)
    if ready == -2.0:
        return False
    c = cost[k, s]
    finish = e[r] + c
    if ready >= 0.0:
        finish = max(finish, ready + c)
    if cnt[r, VF0] > 0:
        bubble[r] += finish - (e[r] + c)
    e[r] = finish
    t[x, r, j] = finish
    mem[r] += memd[k, s]
    length[r] = put(ops, r, length[r], OP_F if k == KF else OP_I, s, j)
    cnt[r, x] += 1
    if k == KI:  # its W waits in the device's queue
        pend[r, cnt[r, 4] + cnt[r, 5]] = x
        cnt[r, 5] += 1
    return True


@jit
def _v_put_w(r, cost, memd, cnt, e, mem, pend, wdone, ops, length):
    """The oldest queued ``W`` of device ``r``."""
    p = cnt.shape[0]
    x = pend[r, cnt[r, 4]]
    cnt[r, 4] += 1
    cnt[r, 5] -= 1
    s = _v_stage(x, r, p)
    e[r] += cost[KW, s]
    mem[r] += memd[KW, s]
    side = 0 if x == VI1 else 1
    length[r] = put(ops, r, length[r], OP_W, s, wdone[r, side])
    wdone[r, side] += 1


@jit
def _v_fill(r, ready, fill, cost, memd, cnt, e, mem, bubble, approved, pend, wdone, ops,
            length):
    """Before an op whose input arrives at ``ready`` (-1: none): the queued ``W``s that end by
    then, and one more when the wait exceeds the bubble budget and ``fill`` is set."""
    p = cnt.shape[0]
    if ready < 0.0:
        return
    while cnt[r, 5] > 0 and ready >= e[r] + cost[KW, _v_stage(pend[r, cnt[r, 4]], r, p)]:
        _v_put_w(r, cost, memd, cnt, e, mem, pend, wdone, ops, length)
    budget = max(bubble.max(), approved.max() - approved[r]) - bubble[r]
    if cnt[r, 5] > 0 and ready - e[r] > budget and fill:
        _v_put_w(r, cost, memd, cnt, e, mem, pend, wdone, ops, length)


@jit
def v_greedy(cost, memd, comm, cap, n, fill_f, fill_b, approved, ops, length, bubble):
    """The Zero Bubble authors' V scheduler: device ``r`` holds stages ``r`` and ``2p-1-r``.

    Warm-up: forwards of chunk 0 while they fit before chunk 1's first forward arrives, then
    both chunks until every device is at least as far as the one before. Then ``2n`` rounds,
    each an ``I`` and (while any is left) a forward on every device, ``W``s filling the waits
    longer than the bubble budget (``fill_b``, ``fill_f``: also before ``I``s of chunk 1 and
    forwards). ``approved`` (per device, -1: none) widens the budget to a previous run's
    idle. Returns ``(ok, largest idle after a device's first forward)``; ``bubble`` gets each
    device's idle.
    """
    p = cap.shape[0]
    cnt = np.zeros((p, 6), np.int64)  # per slot VF0..VI0; W's done; W's queued
    wdone = np.zeros((p, 2), np.int64)  # W's done for the stages of VI1 and VI0
    pend = np.zeros((p, 2 * n), np.int64)  # each device's queue of W's (as the slot of its I)
    e = np.zeros(p)
    mem = np.zeros(p)
    t = np.full((4, p, n), -1.0)
    bubble[:] = 0.0
    length[:] = 0
    ops[:] = PAD
    args = (cost, memd, comm, cap, n, cnt, e, mem, bubble, t, pend, ops, length)
    for r in range(p):
        if not _v_put(VF0, r, *args):
            return False, 0.0
    for r in range(p - 1, -1, -1):
        if r < p - 1:
            due = t[VF1, r + 1, 0] + comm[2 * p - 2 - r]
            while (mem[r] + memd[KF, r] * (2 + 2 * r) <= cap[r]
                   and e[r] + cost[KF, r] <= due and cnt[r, VF0] < n):
                for q in range(r + 1):
                    if not _v_put(VF0, q, *args):
                        return False, 0.0
        if not _v_put(VF1, r, *args):
            return False, 0.0
    chunk = 0
    for r in range(1, p):
        stuck = 0
        while (cnt[r, VF0] + cnt[r, VF1] < cnt[r - 1, VF0] + cnt[r - 1, VF1]
               or cnt[r, VF1] <= cnt[r - 1, VF1] < n):
            stuck += 1
            for q in range(p - 1, r - 1, -1):
                if cnt[q, chunk] < n:
                    if not _v_put(chunk, q, *args):
                        return False, 0.0
                    stuck = 0
            chunk = 1 - chunk
            if stuck == 2:  # neither chunk can move: the authors' loop would not end
                return False, 0.0
    order = np.empty(p, np.int64)
    for _ in range(2 * n):
        # an I on every device: chunk 1's (VI1) ascending, then chunk 0's (VI0) descending
        up = np.zeros(p, np.bool_)
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
            ready = _v_ready(x, r, cnt[r, x], p, comm, t) if cnt[r, x] < n else -1.0
            _v_fill(r, ready, fill_b or x == VI0, cost, memd, cnt, e, mem, bubble, approved,
                    pend, wdone, ops, length)
            if not _v_put(x, r, *args):
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
            s = _v_stage(x, r, p)
            while mem[r] + memd[KF, s] > cap[r]:
                if cnt[r, 5] == 0:
                    return False, 0.0
                _v_put_w(r, cost, memd, cnt, e, mem, pend, wdone, ops, length)
            ready = _v_ready(x, r, cnt[r, x], p, comm, t)
            _v_fill(r, ready, fill_f, cost, memd, cnt, e, mem, bubble, approved, pend, wdone,
                    ops, length)
            if not _v_put(x, r, *args):
                return False, 0.0
    for r in range(p):
        while cnt[r, 5] > 0:
            _v_put_w(r, cost, memd, cnt, e, mem, pend, wdone, ops, length)
        if cnt[r, VI0] < n or cnt[r, VI1] < n:
            return False, 0.0
    return True, bubble.max()
