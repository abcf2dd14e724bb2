"""Jitted kernels: timeline, activation memory and per-schedule reduction.

Plain loops over arrays. They trust their inputs (``Schedule`` and ``Costs`` validated them) and
report a deadlock through their return value instead of raising.

Per-stage inputs (length ``V``): ``tf``, ``tb``, ``ti``, ``tw`` are the times of a chunk's
``F``, full ``B``, ``I`` and ``W`` (each with its op's fixed overhead and send), ``tfb`` the
overlapped pair's time keyed by its forward's stage (NaN when not given: ``tf[s_f] +
tb[s_b]``), to which the pair adds ``sb[s_b]``, its backward half's send; ``comm[s]`` the
latency of the hand-off between stages ``s`` and ``s+1`` (either direction, only across
devices), ``unit[s]`` what one forward of stage ``s`` allocates, ``gamma[s]`` the part of it a
split backward's ``W`` frees.
"""

import numpy as np

from ._jit import ONE, U, jit
from .ops import FB, B, F, I, W

# an op's or hand-off's time (and a chunk's activation) at most this: a schedule sums at most
# (p*n*m)**2 of them (MAX_WORK 4e6: 1.6e13) and stays finite in float64 (1.8e308)
MAX_TIME = 1e290

TF, TB, TI, TW, TFB, COMM, UNIT, GAMMA, SB = range(9)  # the rows of stage_costs


@jit(internal=True)
def _pick(values, s, d, V):
    """The value for stage ``s`` on device ``d``: one for all, one per stage or one per device."""
    if values.shape[0] == 1:
        return values[0]
    if values.shape[0] == V:
        return values[s]
    return values[d]


@jit
def stage_costs(f, b, w, i, comm, gamma, fb, act, bandwidth, message_bytes, overhead_f,
                overhead_b, overhead_i, overhead_w, send_f, send_b, send_i, stage_device, m):
    """Per-stage rows ``TF, TB, TI, TW, TFB, COMM, UNIT, GAMMA, SB`` (the module docstring).

    The inputs are ``fastpp.Costs``'s fields, in its order (its ``overhead`` as one input per
    kind ``F, B, I, W``, then its ``send`` per kind ``F, B, I``), each holding one value, one
    per stage or one per device. Chunk times and the activation ``act`` are divided by ``m``,
    then each op kind's fixed overhead is added undivided, and its send where it hands on to
    another device: ``F`` where stage ``s + 1`` is on another device, ``B`` and ``I`` where
    ``s - 1`` is. ``I`` takes ``i/m``, or ``b/m - w/m`` where ``i`` is NaN (not given), an
    overlapped pair ``fb/m`` plus the ``F`` and ``B`` overheads and the ``F`` send of its
    forward's stage (a NaN ``fb``, not given, stays NaN), and the ``B`` send of its backward's
    stage: ``SB``, what a stage's backward pays for its send, added where the pair runs. A
    hand-off takes its latency ``comm`` plus ``message_bytes / bandwidth`` when ``bandwidth``
    is given (not NaN).
    """
    V = stage_device.shape[0]
    out = np.empty((9, V), np.float64)
    for s in range(V):
        d = stage_device[s]
        tf, tb, tw = _pick(f, s, d, V) / m, _pick(b, s, d, V) / m, _pick(w, s, d, V) / m
        i_s = _pick(i, s, d, V)
        of, ob = _pick(overhead_f, s, d, V), _pick(overhead_b, s, d, V)
        sf = _pick(send_f, s, d, V) if s + 1 < V and stage_device[s + 1] != d else 0.0
        back = s > 0 and stage_device[s - 1] != d
        sb = _pick(send_b, s, d, V) if back else 0.0
        si = _pick(send_i, s, d, V) if back else 0.0
        out[TF, s] = tf + of + sf
        out[TB, s] = tb + ob + sb
        out[TI, s] = ((tb - tw) if np.isnan(i_s) else i_s / m) + _pick(overhead_i, s, d, V) + si
        out[TW, s] = tw + _pick(overhead_w, s, d, V)
        out[TFB, s] = _pick(fb, s, d, V) / m + of + ob + sf
        out[SB, s] = sb
        out[COMM, s] = _pick(comm, s, d, V)
        link = _pick(bandwidth, s, d, V)
        if not np.isnan(link):
            out[COMM, s] += _pick(message_bytes, s, d, V) / link
        out[UNIT, s] = _pick(act, s, d, V) / m
        out[GAMMA, s] = _pick(gamma, s, d, V)
    return out


# what packed_stage_costs found wrong: nothing, w > b at a stage, a time row above the bound
EXPANDED, W_ABOVE_B, ABOVE_LIMIT = 0, 1, 2


# typed once: called with the constants 0..16, it would otherwise compile once per constant
@jit(signature="float64[::1](float64[::1], int64[:, ::1], int64)", internal=True)
def _slot(values, at, k):
    """Cost input ``k`` packed in ``values``: its slice ``at[k, 0] : at[k, 0] + at[k, 1]``."""
    return values[at[k, 0]: at[k, 0] + at[k, 1]]


@jit
def packed_stage_costs(values, at, stage_device, m, limit):
    """``stage_costs`` of the 17 cost inputs packed in ``values`` (``_slot``), checked in the
    same call: ``(EXPANDED, -1, rows)``; ``(W_ABOVE_B, s, rows)`` for the first stage ``s``
    that ``w_above_b`` finds; ``(ABOVE_LIMIT, k, rows)`` for the first of the time rows
    (those before ``GAMMA``) holding a value above ``limit`` (NaN is not). One call, so that
    a new cost vector pays one dispatch of five arguments, not three of up to nineteen."""
    s = w_above_b(_slot(values, at, 1), _slot(values, at, 2), _slot(values, at, 3),
                  stage_device)
    if s >= 0:
        return W_ABOVE_B, s, np.empty((9, stage_device.shape[0]), np.float64)
    rows = stage_costs(_slot(values, at, 0), _slot(values, at, 1), _slot(values, at, 2),
                       _slot(values, at, 3), _slot(values, at, 4), _slot(values, at, 5),
                       _slot(values, at, 6), _slot(values, at, 7), _slot(values, at, 8),
                       _slot(values, at, 9), _slot(values, at, 10), _slot(values, at, 11),
                       _slot(values, at, 12), _slot(values, at, 13), _slot(values, at, 14),
                       _slot(values, at, 15), _slot(values, at, 16), stage_device, m)
    for k in range(GAMMA):
        for v in range(rows.shape[1]):
            if rows[k, v] > limit:
                return ABOVE_LIMIT, k, rows
    return EXPANDED, -1, rows


@jit
def w_above_b(b, w, i, stage_device):
    """The first stage whose ``w`` exceeds its ``b`` where its ``i`` is NaN (not given;
    inputs as for ``stage_costs``), or -1."""
    V = stage_device.shape[0]
    for s in range(V):
        d = stage_device[s]
        if np.isnan(_pick(i, s, d, V)) and _pick(w, s, d, V) > _pick(b, s, d, V):
            return s
    return -1


@jit
def timeline(ops, length, stage_device, route_first, route_last, n,
             tf, tb, ti, tw, tfb, sb, comm, duration, start, end, pointer, order):
    """Start and end of every op; each device runs its ops in order, one at a time.

    An op starts at ``max(device free, inputs ready)`` and takes its stage's time, or
    ``duration[r, k]`` when ``duration`` (shape ``(p, L)``, e.g. a measured run's) is given;
    shape ``(0, 0)`` means "use the per-stage times". A worklist of devices drives it: a
    device runs as far as its inputs allow, and a device is tried again only after an op whose
    output it may wait for has finished, so the work is linear in the number of ops. An empty
    worklist while ops remain is a deadlock: returns ``-1`` with ``pointer[r]`` at each
    device's stuck op. Otherwise returns the summed latency of all cross-device hand-offs.
    ``order`` (int64, empty: not kept) gets the ops in the order they ran, as ``r * L + k``:
    which op can run depends on which have run, not on their times, so this order is the
    same under any costs (``fastpp.compiled`` keeps it, to sum the latency in this order;
    ``fastpp.compiled.point_plan`` runs the same worklist).
    """
    p = ops.shape[1]
    V = stage_device.shape[0]
    f_ready = np.empty((V, n), np.float64)  # end of F(s, j)
    f_ready.fill(np.nan)
    g_ready = np.empty((V, n), np.float64)  # end of the B or I of (s, j): its input grad exists
    g_ready.fill(np.nan)
    free = np.empty(p, np.float64)
    free.fill(0.0)
    remaining = 0
    for r in range(p):
        remaining += length[r]
        pointer[r] = 0
    # every finished op wakes at most two devices; each device starts on the list once
    work = np.empty(p + 2 * remaining + 1, np.int64)
    top = 0
    for r in range(p - 1, -1, -1):
        work[top] = r
        top += 1
    latency = 0.0
    per_op = duration.shape[0] > 0
    keep = order.shape[0] > 0
    L = U(ops.shape[2])
    done = 0
    # every index unsigned (U, fastpp._jit): 1.3-1.6x faster an op
    while top > 0:
        top -= 1
        r = U(work[top])
        k = U(pointer[r])
        while k < U(length[r]):
            kind = ops[0, r, k]
            s = U(ops[1, r, k])
            j = U(ops[2, r, k])
            s2 = s
            j2 = j
            if kind == FB:
                s2 = U(ops[3, r, k])
                j2 = U(ops[4, r, k])
            t = free[r]
            forward_latency = 0.0  # added once the op runs (it may wait for its other input)
            gradient_latency = 0.0
            if kind == F or kind == FB:
                if s > U(route_first[j]):
                    ready = f_ready[s - ONE, j]
                    if np.isnan(ready):
                        break
                    if U(stage_device[s - ONE]) != r:
                        ready += comm[s - ONE]
                        forward_latency = comm[s - ONE]
                    t = max(t, ready)
            if kind == B or kind == I or kind == FB:
                if s2 < U(route_last[j2]):
                    ready = g_ready[s2 + ONE, j2]
                    if np.isnan(ready):
                        break
                    if U(stage_device[s2 + ONE]) != r:
                        ready += comm[s2]
                        gradient_latency = comm[s2]
                else:
                    ready = f_ready[s2, j2]
                    if np.isnan(ready):
                        break
                t = max(t, ready)
            elif kind == W:
                ready = g_ready[s, j]
                if np.isnan(ready):
                    break
                t = max(t, ready)
            if per_op:
                finish = t + duration[r, k]
            elif kind == F:
                finish = t + tf[s]
            elif kind == B:
                finish = t + tb[s]
            elif kind == I:
                finish = t + ti[s]
            elif kind == W:
                finish = t + tw[s]
            elif tfb[s] >= 0.0:  # (False for NaN: no pair time given)
                finish = t + (tfb[s] + sb[s2])
            else:
                finish = t + (tf[s] + tb[s2])
            start[r, k] = t
            end[r, k] = finish
            free[r] = finish
            # one hand-off at a time, as fastpp.compiled's passes add them
            latency += forward_latency
            latency += gradient_latency
            remaining -= 1
            if keep:
                order[done] = r * L + k
                done += 1
            k += ONE
            # wake the devices that may wait for this op's outputs
            if kind == F or kind == FB:
                f_ready[s, j] = finish
                if s < U(route_last[j]) and U(stage_device[s + ONE]) != r:
                    work[top] = stage_device[s + ONE]
                    top += 1
            if kind == B or kind == I or kind == FB:
                g_ready[s2, j2] = finish
                if s2 > U(route_first[j2]) and U(stage_device[s2 - ONE]) != r:
                    work[top] = stage_device[s2 - ONE]
                    top += 1
        pointer[r] = k
    if remaining > 0:
        return -1.0
    return latency


@jit
def memory(ops, length, unit, gamma, forward_only, mem_start, mem_end, live_start, live_end):
    """Activation memory of each device after every op's start and after its end.

    A forward allocates ``unit[s]`` when it starts; a ``B`` frees it all when it ends; a split
    backward keeps ``gamma`` of it from the end of ``I`` and frees that at the end of ``W``;
    an overlapped pair allocates its forward at the start and frees its backward at the end. In
    a forward-only schedule a forward frees its own allocation when it ends. ``live_*`` count
    live (stage, microbatch) pairs the same way with ``gamma = 1`` (PyTorch's liveness count).
    """
    none = np.empty((0, 0), np.int64)
    for r in range(ops.shape[1]):
        device_memory(ops, length, r, unit, gamma, forward_only, mem_start, mem_end, live_start,
                      live_end, none)


@jit
def peaks(ops, length, unit, gamma, forward_only, peak, live):
    """Every device's peaks (activations, live pairs), without the per-op arrays."""
    none = np.empty((0, 0), np.float64)
    none_int = np.empty((0, 0), np.int64)
    for r in range(ops.shape[1]):
        peak[r], live[r], _ = device_memory(ops, length, r, unit, gamma, forward_only, none,
                                            none, none_int, none_int, none_int)


@jit
def device_memory(ops, length, r, unit, gamma, forward_only, mem_start, mem_end, live_start,
                  live_end, frontier):
    """``memory`` for device ``r`` alone; returns its peaks (activations, live pairs: the
    largest values after a start) and the rows of ``frontier`` filled. Empty output arrays
    (shape ``(0, 0)``) store nothing.

    The memory held is a function of counts only, so that a peak can be read from them
    without the walk (``frontier``): over the stages in the device's ops, ascending, the sum
    of ``held[s] * unit[s] + split[s] * (gamma[s] * unit[s])``, with ``held[s]`` the forwards
    whose activations are all held and ``split[s]`` those whose ``I`` has run and ``W`` not.
    ``frontier`` (int64, ``[rows, 2K]`` for the device's ``K`` stages) gets the count vectors
    ``held, split`` (stages ascending) just after a forward starts that no other such vector
    covers (``frontier_add``): the memory after a start only grows with the counts (``unit``,
    ``gamma >= 0``; rounding is monotone), so the peak is the largest over them
    (``fastpp.compiled.Compiled.frontier``). The rows filled are returned, -1 when they did
    not fit (the caller tries again with more).
    """
    store = mem_start.shape[0] > 0
    keep = frontier.shape[0] > 0
    stages = np.empty(2 * length[r], np.int64)
    K = device_stages(ops, length, r, stages)
    held = np.empty(K, np.int64)
    held.fill(0)
    split = np.empty(K, np.int64)
    split.fill(0)
    mem = 0.0
    live = 0
    peak = 0.0
    live_peak = 0
    rows = 0
    for k in range(length[r]):
        kind = ops[0, r, k]
        a = 0  # the op's stage's place among the device's (a few: a linear search)
        while stages[a] != ops[1, r, k]:
            a += 1
        if kind == F or kind == FB:
            held[a] += 1
            live += 1
            mem = 0.0
            for q in range(K):
                mem += held[q] * unit[stages[q]] + split[q] * (gamma[stages[q]] * unit[stages[q]])
            peak = max(peak, mem)
            live_peak = max(live_peak, live)
            if keep and rows >= 0:
                rows = frontier_add(frontier, rows, held, split)
        if store:
            mem_start[r, k] = mem
            live_start[r, k] = live
        if kind == FB:
            a = 0
            while stages[a] != ops[3, r, k]:
                a += 1
            held[a] -= 1
            live -= 1
        elif kind == B or (kind == F and forward_only):
            held[a] -= 1
            live -= 1
        elif kind == I:
            held[a] -= 1
            split[a] += 1
        elif kind == W:
            split[a] -= 1
            live -= 1
        if store:
            mem = 0.0
            for q in range(K):
                mem += held[q] * unit[stages[q]] + split[q] * (gamma[stages[q]] * unit[stages[q]])
            mem_end[r, k] = mem
            live_end[r, k] = live
    return peak, live_peak, rows


@jit(signature="int64(int64[:, ::1], int64, int64[::1], int64[::1])", internal=True)
def frontier_add(frontier, rows, held, split):
    """Add the vector ``held, split`` to the first ``rows`` rows of ``frontier`` unless one
    of them is at least as large everywhere, dropping those it is at least as large as;
    returns the new row count, -1 when ``frontier`` has no row left for it."""
    K = held.shape[0]
    for v in range(rows):
        covers = True
        for q in range(K):
            if frontier[v, q] < held[q] or frontier[v, K + q] < split[q]:
                covers = False
                break
        if covers:
            return rows
    kept = 0
    for v in range(rows):
        covered = True
        for q in range(K):
            if frontier[v, q] > held[q] or frontier[v, K + q] > split[q]:
                covered = False
                break
        if not covered:
            for q in range(2 * K):  # (element by element: a slice assignment compiles
                frontier[kept, q] = frontier[v, q]  # its shape error's message, 2.4 s cold)
            kept += 1
    if kept == frontier.shape[0]:
        return -1
    for q in range(K):
        frontier[kept, q] = held[q]
        frontier[kept, K + q] = split[q]
    return kept + 1


@jit(internal=True)
def device_stages(ops, length, r, stages):
    """The stages of device ``r``'s ops (an overlapped pair's two), ascending, into
    ``stages`` (room for ``2 * length[r]``); returns how many."""
    K = 0
    for k in range(length[r]):
        for field in (1, 3):
            if field == 3 and ops[0, r, k] != FB:
                continue
            s = ops[field, r, k]
            at = K  # its place: after the smaller ones (insertion, as a device has a few)
            while at > 0 and stages[at - 1] > s:
                at -= 1
            if at > 0 and stages[at - 1] == s:
                continue
            for x in range(K, at, -1):
                stages[x] = stages[x - 1]
            stages[at] = s
            K += 1
    return K


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
    # ops of zero duration (per-op durations may be 0) can leave nothing to divide by
    bubble = 1.0 - total / (p * makespan) if makespan > 0.0 else 0.0
    span_bubble = 1.0 - total / p / longest if longest > 0.0 else 0.0
    return makespan, bubble, span_bubble


# check_ops's findings, in the order the checks run (Schedule formats their messages)
(OK, BAD_KIND, BAD_STAGE, BAD_MB, MISPLACED, OFF_ROUTE, BAD_STAGE2, BAD_MB2, MISPLACED2,
 OFF_ROUTE2, NOT_FORWARD, COUNT_F, COUNT_B, COUNT_IW, F_AFTER_GRAD, W_BEFORE_I) = range(16)


@jit
def check_ops(ops, length, stage_device, route_first, route_last, n, forward_only, got):
    """Validate every op of a schedule in one pass per rule; returns ``(finding, a, b)``.

    ``finding`` is ``OK`` or the first rule broken: for an op rule, at op ``b`` of device ``a``
    (rules in order: kind; then for the op and for an overlapped pair's backward half: stage
    range, microbatch range, stage on this device, stage on the microbatch's route; forwards
    only); for a count or order rule, at stage ``a`` and microbatch ``b``, with ``got`` its
    counts of ``F, B, I, W``. Ranges are checked before anything indexes with them.
    """
    p = ops.shape[1]
    V = stage_device.shape[0]
    for r in range(p):
        for k in range(length[r]):
            if ops[0, r, k] < F or ops[0, r, k] > FB:
                return BAD_KIND, r, k
    for part in range(2):
        for rule in range(4):
            for r in range(p):
                for k in range(length[r]):
                    if part == 1 and ops[0, r, k] != FB:
                        continue
                    s = ops[1 + 2 * part, r, k]
                    j = ops[2 + 2 * part, r, k]
                    if rule == 0:
                        bad = s < 0 or s >= V
                    elif rule == 1:
                        bad = j < 0 or j >= n
                    elif rule == 2:
                        bad = stage_device[s] != r
                    else:
                        bad = s < route_first[j] or s > route_last[j]
                    if bad:
                        return BAD_STAGE + 4 * part + rule, r, k
    if forward_only:
        for r in range(p):
            for k in range(length[r]):
                if ops[0, r, k] != F:
                    return NOT_FORWARD, r, k
    count = np.empty((4, V, n), np.int64)  # F, B, I, W per (stage, microbatch)
    count.fill(0)
    pos = np.empty((4, V, n), np.int64)  # where on its device, the last one seen
    pos.fill(-1)
    for r in range(p):
        for k in range(length[r]):
            kind = ops[0, r, k]
            first = F if kind == FB else kind
            count[first, ops[1, r, k], ops[2, r, k]] += 1
            pos[first, ops[1, r, k], ops[2, r, k]] = k
            if kind == FB:
                count[B, ops[3, r, k], ops[4, r, k]] += 1
                pos[B, ops[3, r, k], ops[4, r, k]] = k
    for rule in range(1 if forward_only else 3):
        for s in range(V):
            for j in range(n):
                if s < route_first[j] or s > route_last[j]:
                    continue
                split = count[I, s, j] > 0 or count[W, s, j] > 0
                if rule == 0:
                    bad = count[F, s, j] != 1
                elif rule == 1:
                    bad = not split and count[B, s, j] != 1
                else:
                    bad = split and (count[I, s, j] != 1 or count[W, s, j] != 1
                                     or count[B, s, j] != 0)
                if bad:
                    for q in range(4):
                        got[q] = count[q, s, j]
                    return COUNT_F + rule, s, j
    if not forward_only:
        for rule in range(2):
            for s in range(V):
                for j in range(n):
                    if s < route_first[j] or s > route_last[j]:
                        continue
                    if rule == 0:
                        bad = pos[F, s, j] >= max(pos[B, s, j], pos[I, s, j])
                    else:
                        bad = pos[I, s, j] >= 0 and pos[I, s, j] >= pos[W, s, j]
                    if bad:
                        return F_AFTER_GRAD + rule, s, j
    return OK, 0, 0


@jit
def producers(ops, length, V, n, route_first, route_last, producer):
    """Which op made each op's inputs (``fastpp.dependencies.edges``, the rule of ``timeline``
    as edges). Ops are numbered device by device in position order; ``producer[i, 0]`` made op
    ``i``'s forward input, ``producer[i, 1]`` its gradient input (a ``B``/``I`` at the end of
    its route: its own forward), ``-1`` where it has none or its producer is missing."""
    p = ops.shape[1]
    fwd = np.empty((V, n), np.int64)  # the op that made F(s, j)'s output
    fwd.fill(-1)
    grad = np.empty((V, n), np.int64)  # the op that made stage s's input gradient, mb j
    grad.fill(-1)
    i = 0
    for r in range(p):
        for k in range(length[r]):
            kind = ops[0, r, k]
            if kind == F or kind == FB:
                fwd[ops[1, r, k], ops[2, r, k]] = i
            if kind == B or kind == I:
                grad[ops[1, r, k], ops[2, r, k]] = i
            elif kind == FB:
                grad[ops[3, r, k], ops[4, r, k]] = i
            i += 1
    i = 0
    for r in range(p):
        for k in range(length[r]):
            kind = ops[0, r, k]
            s = ops[1, r, k]
            j = ops[2, r, k]
            producer[i, 0] = -1
            producer[i, 1] = -1
            if (kind == F or kind == FB) and s > route_first[j]:
                producer[i, 0] = fwd[s - 1, j]
            if kind == FB:
                s = ops[3, r, k]
                j = ops[4, r, k]
            if kind == B or kind == I or kind == FB:
                producer[i, 1] = grad[s + 1, j] if s < route_last[j] else fwd[s, j]
            elif kind == W:
                producer[i, 1] = grad[s, j]
            i += 1
