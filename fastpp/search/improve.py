"""Local search over device orders, evaluated by the engine's own kernels.

A move takes one op of one device and reinserts it a few positions earlier or later on the same
device. It is kept when it breaks no order on the device (``F`` before ``I`` before ``W`` of one
stage and microbatch), keeps the device within its memory limit (``kernels.device_memory``),
does not deadlock (``kernels.timeline``) and does not worsen ``(objective, tie-break)``;
sideways moves are kept so that the search can cross plateaus. After ``patience`` evaluations
without a new best, the search restarts from the best order with a few random legal moves.
The random numbers come from a xorshift generator whose state the caller holds, so a search
is the same for the same seed and the same number of evaluations.
"""

import numpy as np

from .. import kernels
from .._jit import jit
from ..ops import ROW_F, ROW_I, SPLIT_ROW, F, I, W

# value[]: the best value and its tie-break, the current value and its tie-break
BEST, BEST_TIE, CUR, CUR_TIE = 0, 1, 2, 3


def seed_state(seed: int) -> np.ndarray:
    """The generator's state for ``seed`` (never 0, which xorshift cannot leave)."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) % 2**64
    return np.array([x or 1], np.uint64)


@jit
def _random(state, bound):
    """A pseudo-random integer in ``0..bound-1`` (xorshift64)."""
    x = state[0]
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    state[0] = x
    return np.int64(x % np.uint64(bound))


@jit
def _order_ok(ops, r, a, b):
    """Moving op ``a`` of device ``r`` to position ``b`` keeps F < I < W of each (s, j)."""
    kind = ops[0, r, a]
    s = ops[1, r, a]
    j = ops[2, r, a]
    lo, hi = (b, a) if b < a else (a + 1, b + 1)
    for q in range(lo, hi):
        if ops[1, r, q] == s and ops[2, r, q] == j:
            other = ops[0, r, q]
            if b < a and (other == F or (other == I and kind == W)):
                return False  # would jump before its own earlier op
            if b > a and (kind == F or (kind == I and other == W)):
                return False
    return True


@jit
def _move(ops, r, a, b):
    """Reinsert op ``a`` of device ``r`` at position ``b``, shifting the ops between."""
    saved = ops[:, r, a].copy()
    if b < a:
        for q in range(a, b, -1):
            ops[:, r, q] = ops[:, r, q - 1]
    else:
        for q in range(a, b):
            ops[:, r, q] = ops[:, r, q + 1]
    ops[:, r, b] = saved


@jit
def _score(start, end, length, span_objective):
    """``(objective, tie-break)``: makespan and the sum of device end times, or the largest
    span and the sum of spans."""
    p = length.shape[0]
    first = np.inf
    last = -np.inf
    worst = 0.0
    total = 0.0
    for r in range(p):
        if length[r] == 0:
            continue
        a = start[r, 0]
        z = end[r, length[r] - 1]
        first = min(first, a)
        last = max(last, z)
        worst = max(worst, z - a)
        total += (z - a) if span_objective else z
    if span_objective:
        return worst, total
    return last - first, total


@jit
def evaluate(ops, length, stage_device, route_first, route_last, n, tf, tb, ti, tw, tfb, sb,
             comm, span_objective, start, end, pointer):
    """Times of every op and ``(objective, tie-break)``; ``(inf, inf)`` on a deadlock."""
    if kernels.timeline(ops, length, stage_device, route_first, route_last, n, tf, tb, ti, tw,
                        tfb, sb, comm, np.zeros((0, 0)), start, end, pointer,
                        np.empty(0, np.int64)) < 0.0:
        return np.inf, np.inf
    return _score(start, end, length, span_objective)


@jit
def _index(ops, length, where):
    """``where[row, s, j]``: the position of the op of ``(s, j)`` of row ``row`` (``ROW_F``,
    ``ROW_I``, ``ROW_W``) on its device."""
    for r in range(ops.shape[1]):
        for k in range(length[r]):
            kind = ops[0, r, k]
            where[SPLIT_ROW[kind], ops[1, r, k], ops[2, r, k]] = k


@jit
def _critical(ops, length, stage_device, route_last, start, end, where, span_objective, crit):
    """The ops on a longest chain to the objective's last op that wait for the op before them
    on their device, as ``crit[q] = (r, k)``; returns how many.

    The chain starts at the op that ends last (makespan) or at the last op of the device with
    the largest span, and steps back through whatever made each op start when it did: the
    device's previous op, or the op whose output it waited for.
    """
    p = ops.shape[1]
    r = -1
    best = -np.inf
    for d in range(p):
        if length[d] == 0:
            continue
        z = end[d, length[d] - 1] - (start[d, 0] if span_objective else 0.0)
        if z > best:
            best = z
            r = d
    k = length[r] - 1
    count = 0
    for _ in range(crit.shape[0]):
        t = start[r, k]
        if k > 0 and end[r, k - 1] >= t:
            crit[count, 0] = r
            crit[count, 1] = k
            count += 1
            k -= 1
            continue
        kind = ops[0, r, k]
        s = ops[1, r, k]
        j = ops[2, r, k]
        if kind == F:
            if s == 0 or (span_objective and k == 0):
                break
            s -= 1
            row = ROW_F
        elif kind == I:
            row = ROW_I if s < route_last[j] else ROW_F
            s = s + 1 if s < route_last[j] else s
        else:
            row = ROW_I
        r = stage_device[s]
        k = where[row, s, j]
    return count


@jit
def local_search(ops, length, best_ops, stage_device, route_first, route_last, n, tf, tb, ti, tw,
                 tfb, sb, comm, unit, gamma, cap, span_objective, state, stale, value, history,
                 evals, patience, max_shift):
    """Evaluate ``evals`` moves (timelines run; moves refused earlier do not count, up to
    ``20 * evals`` tries) from the order in ``ops`` (value ``value[CUR]``).

    Half of the moves take an op of the current critical chain that waits for its device's
    previous op and move it earlier, or that previous op later; the rest are random.
    ``best_ops`` and ``value[BEST]`` hold the best order seen, ``state`` the generator and
    ``stale[0]`` the evaluations since the last new best; all are updated in place, so the
    caller can run the search in slices. Returns ``(new bests found, moves evaluated)``.
    """
    p = ops.shape[1]
    V = stage_device.shape[0]
    shape = (p, ops.shape[2])
    start = np.zeros(shape)
    end = np.zeros(shape)
    pointer = np.zeros(p, np.int64)
    none = np.zeros((0, 0))  # device_memory stores nothing: only its peak is wanted
    none_int = np.zeros((0, 0), np.int64)
    where = np.zeros((3, V, n), np.int64)
    total = 0
    for r in range(p):
        total += length[r]
    crit = np.zeros((total, 2), np.int64)

    def timed():
        """Time the order in ``ops``: ``(objective, tie-break)``, inf if it deadlocks."""
        return evaluate(ops, length, stage_device, route_first, route_last, n, tf, tb, ti, tw,
                        tfb, sb, comm, span_objective, start, end, pointer)

    def chain():
        """Index the order's ops and find its critical chain (after ``timed``): its length
        in ``crit``."""
        _index(ops, length, where)
        return _critical(ops, length, stage_device, route_last, start, end, where,
                         span_objective, crit)

    def over(r):
        """Whether device ``r``'s peak exceeds its memory limit."""
        peak, _, _ = kernels.device_memory(ops, length, r, unit, gamma, False, none, none,
                                           none_int, none_int, none_int)
        return peak > cap[r]

    def restart():
        """Back to the best order, shaken by a few legal moves that fit and do not
        deadlock."""
        stale[0] = 0
        ops[:] = best_ops
        value[CUR] = value[BEST]
        value[CUR_TIE] = value[BEST_TIE]
        for _kick in range(1 + _random(state, 4)):
            r, a, b = _pick_move(length, total, max_shift, state)
            if b < 0 or not _order_ok(ops, r, a, b):
                continue
            _move(ops, r, a, b)
            too_big = over(r)
            obj, tie = timed()
            if too_big or obj == np.inf:
                _move(ops, r, b, a)
            else:
                value[CUR] = obj
                value[CUR_TIE] = tie

    def propose(n_crit):
        """A move ``(r, a, b)``: half the time along the critical chain (the waiting op
        earlier, or the op it waits for later), else random; ``b = -1`` if it falls off the
        device."""
        if n_crit > 0 and _random(state, 2) == 0:
            q = _random(state, n_crit)
            r = crit[q, 0]
            shift = 1 + _random(state, max_shift)
            if _random(state, 2) == 0:
                a, b = crit[q, 1], crit[q, 1] - shift  # the waiting op earlier
            else:
                a, b = crit[q, 1] - 1, crit[q, 1] - 1 + shift  # the op it waits for later
            if b >= length[r]:
                b = -1
            return r, a, b
        return _pick_move(length, total, max_shift, state)

    n_crit = -1  # the current order's chain is not known yet
    found = 0
    done = 0
    for _ in range(20 * evals):
        if done == evals:
            break
        if stale[0] >= patience:  # restart from the best, shaken by a few legal moves
            restart()
            n_crit = -1
        if n_crit < 0:
            timed()
            n_crit = chain()
        r, a, b = propose(n_crit)
        if b < 0 or not _order_ok(ops, r, a, b):
            continue
        _move(ops, r, a, b)
        if over(r):
            _move(ops, r, b, a)
            continue
        obj, tie = timed()
        slot = stale[0] % history.shape[0]
        done += 1
        stale[0] += 1
        worse = obj > value[CUR] or (obj == value[CUR] and tie > value[CUR_TIE])
        if worse and obj > history[slot]:  # late acceptance: no worse than a while ago
            history[slot] = value[CUR]
            _move(ops, r, b, a)
            continue
        history[slot] = min(value[CUR], obj)
        value[CUR] = obj
        value[CUR_TIE] = tie
        n_crit = chain()
        if obj < value[BEST] or (obj == value[BEST] and tie < value[BEST_TIE]):
            value[BEST] = obj
            value[BEST_TIE] = tie
            best_ops[:] = ops
            stale[0] = 0
            found += 1
    return found, done


@jit
def _pick_move(length, total, max_shift, state):
    """A random op (each equally likely) and a target within ``max_shift`` of it; ``b = -1``
    when the target falls off the device."""
    x = _random(state, total)
    r = 0
    while x >= length[r]:
        x -= length[r]
        r += 1
    shift = 1 + _random(state, max_shift)
    b = x - shift if _random(state, 2) == 0 else x + shift
    if b < 0 or b >= length[r]:
        return r, x, -1
    return r, x, b
