"""V-Half / V-Min's greedy squeeze against the plain greedy it speeds up.

The plain version below follows the module docstring literally: every op of the warmup (with
explicit W's) and of the cooldown tries each free slot after its inputs in turn, and a try
replays the device's whole memory from that slot to the end. The jitted ``squeeze`` replays
only until the memory meets the stored states again, skips starts that must fail, and finds
an I by bisection; it must move every op to the same slot.
"""

import numpy as np
import pytest

from fastpp.generators import vshape as v


def _peak_from(slots, w_mode, start=0, cur=0, waiting=0):
    """Peak memory of a device's slots from ``start`` on (implied W's free at free slots)."""
    top = cur
    for t in slots[start:]:
        if t >= 0:
            cur += v.ALLOC[t]
            waiting += t in (v.I1, v.I0)
        elif w_mode == v.W_NONE and waiting > 0:
            cur, waiting = cur - 1, waiting - 1
        top = max(top, cur)
    return top


def _nth_input_backward(T, i, x, n):
    return sorted([*T[i, v.I1, :n], *T[i, v.I0, :n]])[x]


def plain_squeeze(T, count, n, w_mode):
    p = T.shape[0]
    n_types = v.N_TYPES[w_mode]
    last = max(T[i, t, count[t] - 1] for i in range(p) for t in range(n_types))
    slots = np.full((p, last + 1), -1)
    for i in range(p):
        for t in range(n_types):
            slots[i, T[i, t, :count[t]]] = t
    limit = max(_peak_from(slots[i], w_mode) for i in range(p))
    order = sorted((T[i, t, x], i, t) for i in range(p) for t in range(n_types)
                   for x in range(count[t]))
    head = np.zeros((p, n_types), int)
    taken = np.zeros(slots.shape, bool)
    phase = 0
    for _, i, t in order:
        x = head[i, t]
        head[i, t] += 1
        if t == v.I0 and i == 0 and phase == 0:
            phase = 1
        keep = phase == 1 or (phase == 0 and w_mode != v.W_ONE)
        if phase == 1 and t == v.F0 and x == count[v.F0] - 1:
            phase = 2
        if not keep:
            dep = -1
            if t in (v.F0, v.I1) and i > 0:
                dep = T[i - 1, t, x]
            if t in (v.F1, v.I0) and i + 1 < p:
                dep = T[i + 1, t, x]
            if 0 < t < 4:
                dep = max(dep, T[i, t - 1, x])
            if t == v.W_A:
                dep = max(dep, _nth_input_backward(T, i, x, n))
            if x > 0:
                dep = max(dep, T[i, t, x - 1])
            old = T[i, t, x]
            for s in range(dep + 1, old):
                if taken[i, s]:
                    continue
                trial = slots[i].copy()
                trial[old], trial[s] = -1, t
                if _peak_from(trial, w_mode) <= limit:
                    slots[i] = trial
                    T[i, t, x] = s
                    break
        taken[i, T[i, t, x]] = True


def _blocks(p, n, half):
    T = np.zeros((p, 6, 2 * n), np.int64)
    base = v.building_block(p, half)
    for i in range(p):
        for t in range(4):
            T[i, t, :n] = base[i, t] + 6 * np.arange(n)
    return T, np.array([n, n, n, n, 0, 0])


@pytest.mark.parametrize("half", [v.HALF, v.MIN], ids=["v-half", "v-min"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6, 8])
def test_squeeze_moves_every_op_where_the_plain_greedy_does(p, half):
    for n in sorted({1, 2, p, p + 1, 2 * p + 1, 3 * p}):
        # both passes of v_shape: W's in place, then implied
        T, count = _blocks(p, n, half)
        v.put_w(T, count, n, v.W_ONE)
        for w_mode in (v.W_ONE, v.W_NONE):
            if w_mode == v.W_NONE:
                v.pack(T, count, v.N_TYPES[v.W_ONE])
                count[v.W_A] = 0
            expected = T.copy()
            plain_squeeze(expected, count, n, w_mode)
            v.squeeze(T, count, n, w_mode)
            assert np.array_equal(T, expected), (p, n, w_mode)
