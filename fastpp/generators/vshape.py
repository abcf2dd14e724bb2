"""V-Half and V-Min (Pipeline Parallelism with Controllable Memory, Qi et al. 2024).

V placement, two chunks per device (chunk 0 is stage ``r``, chunk 1 is stage ``2p-1-r``), split
backward. Each device's ops first sit in "slots" of unit length: one microbatch's building
block (F0, F1, I1, I0 on every device) repeats every 6 slots, and each ``W`` takes the first
free slot after its ``I``. Then the authors' greedy pass (``zbv_greedy.py`` in the Zero Bubble
repository) squeezes the warmup and the cooldown: walking all ops in slot order, each moves to
the earliest free slot after its inputs that does not raise the device's peak, first with the
W's in place, then without them; the W's are placed again and the slot order is the schedule.

Op types inside this module: 0 F(chunk 0), 1 F(chunk 1), 2 I(chunk 1), 3 I(chunk 0) and the W
lists 4 and 5. With one W list (``W_ONE``), its k-th W follows the device's k-th I in time.
"""

import numpy as np

from .._jit import ONE, U, jit
from ._emit import F, I, W, put

F0, F1, I1, I0, W_A, W_B = 0, 1, 2, 3, 4, 5
# how the W's are held: implied, one list, one per chunk (NumPy scalars: see fastpp.ops)
W_NONE, W_ONE, W_SPLIT = np.int64(0), np.int64(1), np.int64(2)
HALF, MIN = np.True_, np.False_
N_TYPES = np.array([4, 5, 6])  # op types present in each W mode
ALLOC = np.array([1, 1, 0, 0, -1, -1])  # chunk activations taken by each type


@jit
def building_block(p, half):
    """Slot of microbatch 0's F0, F1, I1, I0 on every device (V-Half or V-Min)."""
    base = np.empty((p, 4), np.int64)
    for i in range(p):
        if half:
            d = 3 if p % 2 == 0 else 0
            base[i, 0], base[i, 1] = 2 * i, 3 * p - 2 - i
            base[i, 2], base[i, 3] = 3 * p + d + 2 * i - 1, 6 * p + d - i - 2
        else:
            d = 2 if p % 3 == 0 else 0
            base[i, 0], base[i, 1] = i, 2 * p - 1 - i
            base[i, 2], base[i, 3] = 2 * p + d + i, 4 * p + d - 1 - i
    return base


@jit(internal=True)
def _slot_types(T, count, i, n_types):
    """Device ``i``'s slots: the type in each (-1: free)."""
    last = 0
    for t in range(n_types):
        if count[t] > 0:
            last = max(last, T[i, t, count[t] - 1])
    slots = np.full(last + 1, -1, np.int64)
    for t in range(n_types):
        for x in range(count[t]):
            slots[T[i, t, x]] = t
    return slots


@jit
def put_w(T, count, n, w_mode):
    """Give every I a W in the first free slot after it (``W_ONE`` or ``W_SPLIT``)."""
    p = T.shape[0]
    count[W_A] = 0
    count[W_B] = 0
    for i in range(p):
        slots = _slot_types(T, count, i, N_TYPES[W_NONE])
        pending = np.zeros(2, np.int64)
        na = nb = 0
        for s in range(slots.shape[0]):
            t = slots[s]
            if t == I1 or t == I0:
                pending[0 if (w_mode == W_ONE or t == I1) else 1] += 1
            elif t < 0:
                for w in range(2):
                    if pending[w] > 0:
                        if w == 0:
                            T[i, W_A, na] = s
                            na += 1
                        else:
                            T[i, W_B, nb] = s
                            nb += 1
                        pending[w] -= 1
                        break
        s = slots.shape[0] - 1
        while pending[0] > 0:
            s += 1
            T[i, W_A, na] = s
            na += 1
            pending[0] -= 1
        while pending[1] > 0:
            s += 1
            T[i, W_B, nb] = s
            nb += 1
            pending[1] -= 1
        count[W_A] = na
        count[W_B] = nb


@jit(internal=True)
def _slot_table(T, count, n_types):
    """Every device's slots: ``table[i, slot]`` is the type there (-1: free)."""
    p = T.shape[0]
    last = 0
    for i in range(p):
        for t in range(n_types):
            if count[t] > 0:
                last = max(last, T[i, t, count[t] - 1])
    table = np.full((p, last + 1), -1, np.int64)
    for i in range(p):
        for t in range(n_types):
            for x in range(count[t]):
                table[i, T[i, t, x]] = t
    return table


@jit(internal=True)
def _in_slot_order(table):
    """Every op as ``(device, type)`` by (slot, device), the order the authors walk in: a
    device holds one op per slot, so reading the slot table slot by slot gives it."""
    p, n_slots = table.shape
    total = 0
    for i in range(p):
        for s in range(n_slots):
            total += table[i, s] >= 0
    order = np.empty((total, 2), np.int64)
    k = 0
    for s in range(n_slots):
        for i in range(p):
            if table[i, s] >= 0:
                order[k, 0], order[k, 1] = i, table[i, s]
                k += 1
    return order


@jit(internal=True)
def _latest_input(X, i, t, x):
    """The latest of ``X`` (slots or end times) over the op's inputs on the F and I chains
    and the same type's previous op (-1 if none): the dependency rule, written once."""
    # unsigned indices (fastpp._jit)
    i, t, x, p = U(i), U(t), U(x), U(X.shape[0])
    latest = -1
    if (t == F0 or t == I1) and i > 0:
        latest = X[i - ONE, t, x]  # the previous device's op of this chunk
    if (t == F1 or t == I0) and i + ONE < p:
        latest = X[i + ONE, t, x]  # down the V's second half: the next device's
    if 0 < t < 4:
        latest = max(latest, X[i, t - ONE, x])  # F0 -> F1 -> I1 -> I0 on one device
    if x > 0:
        latest = max(latest, X[i, t, x - ONE])
    return latest


@jit(internal=True)
def _xth_input_backward(T, i, x, n):
    """Slot of device ``i``'s ``x``-th I in time: bisect how many of the first ``x + 1`` come
    from its I1 list (both lists are in slot order)."""
    k = x + 1
    lo, hi = max(0, k - n), min(k, n)
    while lo < hi:
        a = (lo + hi) // 2
        if T[i, I1, a] < T[i, I0, k - a - 1]:
            lo = a + 1  # I1's a-th comes before the last I0 taken: take more from I1
        else:
            hi = a
    last = T[i, I1, lo - 1] if lo > 0 else -1
    return max(last, T[i, I0, k - lo - 1]) if k > lo else last


@jit(signature="int64(int64[::1], int64, int64, int64[:, ::1], int64, int64, int64[:, ::1])",
     internal=True)
def _walk(slots, start, old, state, w_mode, limit, trial):
    """Replay a device's memory from slot ``start`` on, from its stored state after slot
    ``start - 1``, after a move out of slot ``old``: fills ``trial[x]`` with (memory, waiting
    I's) after each slot. Returns the last slot replayed, or ``-1 - x`` as soon as the memory
    passes ``limit`` at slot ``x``. From slot ``old`` on, the replay stops where it meets the
    stored state again: the rest is unchanged, and every stored state is within the limit."""
    cur = waiting = 0
    if start > 0:
        cur, waiting = state[start - 1, 0], state[start - 1, 1]
    for x in range(start, slots.shape[0]):
        t = slots[x]
        if t >= 0:
            cur += ALLOC[t]
            if t == I1 or t == I0:
                waiting += 1
        elif w_mode == W_NONE and waiting > 0:
            cur -= 1
            waiting -= 1
        if cur > limit:
            return -1 - x
        trial[x, 0], trial[x, 1] = cur, waiting
        if x >= old and cur == state[x, 0] and waiting == state[x, 1]:
            return x
    return slots.shape[0] - 1


@jit
def squeeze(T, count, n, w_mode):
    """The greedy pass: move ops of the warmup (only with ``W_ONE``) and of the cooldown into
    earlier free slots while the devices' peak does not grow; the steady phase stays put.

    Each device's slots and memory states are kept: a move from slot ``old`` to ``s`` only
    replays the memory from ``s`` until it meets the stored states again (with implied W's a
    move can shift every later W), and a failed try skips every start that must fail too.
    """
    p = T.shape[0]
    n_types = N_TYPES[w_mode]
    slots = _slot_table(T, count, n_types)
    last = slots.shape[1] - 1
    state = np.zeros((p, last + 1, 2), np.int64)  # memory, waiting I's
    limit = 0  # the devices' peak, which no move may raise
    for i in range(p):
        _walk(slots[i], 0, last + 1, state[i], w_mode, 2**62, state[i])
        for x in range(last + 1):
            limit = max(limit, state[i, x, 0])
    trial = np.zeros((last + 1, 2), np.int64)
    taken = np.zeros((p, last + 1), np.bool_)
    head = np.zeros((p, n_types), np.int64)
    phase = 0  # 0 warmup, 1 steady (until the last F0), 2 cooldown
    # ops not yet visited never move, so the visiting order is known from the start
    order = _in_slot_order(slots)
    for k in range(order.shape[0]):
        i, t = order[k, 0], order[k, 1]
        x = head[i, t]
        head[i, t] += 1
        if t == I0 and i == 0 and phase == 0:
            phase = 1
        keep = phase == 1 or (phase == 0 and w_mode != W_ONE)
        if phase == 1 and t == F0 and x == count[F0] - 1:
            phase = 2
        if not keep:
            # the latest slot among the op's inputs, as the authors count them
            dep = _latest_input(T, i, t, x)
            if t == W_A:
                dep = max(dep, _xth_input_backward(T, i, x, n))
            old = T[i, t, x]
            s = dep + 1
            while s < old:
                if taken[i, s]:
                    s += 1
                    continue
                slots[i, old], slots[i, s] = -1, t
                end = _walk(slots[i], s, old, state[i], w_mode, limit, trial)
                if end >= 0:
                    T[i, t, x] = s
                    for y in range(s, end + 1):  # (a slice copy compiles its error text)
                        state[i, y, 0], state[i, y, 1] = trial[y, 0], trial[y, 1]
                    break
                slots[i, s], slots[i, old] = -1, t
                # with explicit W's a move adds ALLOC[t] to every slot in [s, old), so every
                # later start up to the slot that passed the limit passes it too
                s = s + 1 if w_mode == W_NONE else -end
        taken[i, T[i, t, x]] = True


@jit
def pack(T, count, n_types):
    """Run every device's ops in slot order as early as their inputs allow, each taking one
    slot; the slots become the start times."""
    p = T.shape[0]
    end = np.zeros_like(T)
    free = np.zeros(p, np.int64)
    head = np.zeros((p, n_types), np.uint64)
    order = _in_slot_order(_slot_table(T, count, n_types))
    for k in range(order.shape[0]):
        i, t = U(order[k, 0]), U(order[k, 1])  # (unsigned, as in _latest_input)
        x = head[i, t]
        head[i, t] += ONE
        ready = max(free[i], _latest_input(end, i, t, x))
        end[i, t, x] = ready + 1
        free[i] = ready + 1
    for i in range(p):
        for t in range(n_types):
            for x in range(count[t]):
                T[i, t, x] = end[i, t, x] - 1


def v_half(ops, length, p, n, m, G):
    """V-Half: about half of 1F1B's activation memory."""
    v_shape(ops, length, p, n, HALF)


def v_min(ops, length, p, n, m, G):
    """V-Min: about a third of 1F1B's activation memory."""
    v_shape(ops, length, p, n, MIN)


# Plain Python over jitted steps: Numba links a kernel's callees into it and optimizes the
# whole tree again, so a jitted v_shape cost 2.6 s of compile (a third of this module's) for
# a dozen calls that take microseconds from Python.
def v_shape(ops, length, p, n, half):
    """V-Half (``half=True``) or V-Min: building block, greedy squeeze, slot order."""
    n = int(n)
    T = np.zeros((p, 6, 2 * n), np.int64)
    T[:, :4, :n] = building_block(p, half)[:, :, None] + 6 * np.arange(n)
    count = np.array([n, n, n, n, 0, 0], np.int64)
    # squeeze with the W's in place, then without them
    put_w(T, count, n, W_ONE)
    squeeze(T, count, n, W_ONE)
    pack(T, count, N_TYPES[W_ONE])
    count[W_A] = 0
    squeeze(T, count, n, W_NONE)
    put_w(T, count, n, W_ONE)
    pack(T, count, N_TYPES[W_ONE])
    # the W's once more, one list per chunk; the slot order is the schedule
    put_w(T, count, n, W_SPLIT)
    _emit(ops, length, T, count)


@jit
def _emit(ops, length, T, count):
    """Each device's ops in slot order: the schedule."""
    p = T.shape[0]
    kinds = np.array([F, F, I, I, W, W])
    chunk1 = np.array([False, True, True, False, True, False])
    for i in range(p):
        slots = _slot_types(T, count, i, N_TYPES[W_SPLIT])
        index = np.zeros(6, np.int64)
        k = 0
        for s in range(slots.shape[0]):
            t = slots[s]
            if t >= 0:
                stage = 2 * p - 1 - i if chunk1[t] else i
                k = put(ops, i, k, kinds[t], stage, index[t])
                index[t] += 1
        length[i] = k


# Closed forms (SCHEDULES.md section 5; zero latency, uniform costs), read by fastpp.theory
# through the registry. Each returns None where no closed form is known.


def v_half_peak_live_max(p, n, m, G):
    """V-Half's peak: ``floor((p+2)/2)`` units of two chunks, or ``n`` when fewer."""
    return 2 * min(n, (p + 2) // 2)


def v_min_peak_live_max(p, n, m, G):
    """V-Min's peak: ``floor((p+4)/3)`` units of two chunks, or ``n`` when fewer."""
    return 2 * min(n, (p + 4) // 3)
