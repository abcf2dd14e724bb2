"""A minimal compiled loop: 1F1B generate + timeline + peak count, nothing else.

The in-run baseline for the sweep kernels' time per op: what one would write in Numba for this
one schedule (its order generated straight into arrays, times by sweeping the devices until
every op has run, the peak as the largest count of forwards held). Checked against fastpp and
the reference in the benchmark.
"""

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def one_f_one_b_order(p, n):
    """1F1B's order on ``p`` devices: warm-up forwards, then F/B pairs, then the remaining
    backwards (kind 0 a forward, 1 a backward; and each op's microbatch)."""
    kind = np.empty((p, 2 * n), np.int8)
    mb = np.empty((p, 2 * n), np.int64)
    for r in range(p):
        warm = min(p - r - 1, n)
        k = 0
        for j in range(warm):
            kind[r, k], mb[r, k] = 0, j
            k += 1
        for j in range(n - warm):
            kind[r, k], mb[r, k] = 0, warm + j
            kind[r, k + 1], mb[r, k + 1] = 1, j
            k += 2
        for j in range(n - warm, n):
            kind[r, k], mb[r, k] = 1, j
            k += 1
    return kind, mb


@numba.njit(nogil=True, cache=True)
def one_f_one_b_timeline(kind, mb, f, b, comm):
    """Makespan and the largest peak activation count of an order of 1F1B's shape."""
    p, n = kind.shape[0], kind.shape[1] // 2
    f_done = np.full((p, n), -1.0)
    b_done = np.full((p, n), -1.0)
    free = np.zeros(p)
    pos = np.zeros(p, np.int64)
    left = 2 * n * p
    while left > 0:
        for r in range(p):
            while pos[r] < 2 * n:
                k = pos[r]
                j = mb[r, k]
                if kind[r, k] == 0:
                    ready = 0.0 if r == 0 else f_done[r - 1, j]
                    if ready < 0.0:
                        break
                    t = max(free[r], ready + (comm if r > 0 else 0.0))
                    free[r] = t + f
                    f_done[r, j] = free[r]
                else:
                    ready = f_done[r, j] if r == p - 1 else b_done[r + 1, j]
                    if ready < 0.0:
                        break
                    t = max(free[r], ready + (comm if r < p - 1 else 0.0))
                    free[r] = t + b
                    b_done[r, j] = free[r]
                pos[r] += 1
                left -= 1
    peak = 0  # forwards started and not yet freed by their backward, at the busiest
    for r in range(p):
        held = 0
        for k in range(2 * n):
            held += 1 if kind[r, k] == 0 else -1
            peak = max(peak, held)
    return free.max(), peak


@numba.njit(nogil=True, cache=True)
def one_f_one_b_point(p, n, f, b, comm):
    """Makespan and the largest peak activation count of 1F1B on ``p`` devices."""
    kind, mb = one_f_one_b_order(p, n)
    return one_f_one_b_timeline(kind, mb, f, b, comm)


@numba.njit(nogil=True, cache=True)
def one_f_one_b_shape(p, n, f, b, comms):
    """``one_f_one_b_point`` at each latency of ``comms``, the order generated once, as a
    loop over a sweep's cost axis would have it."""
    kind, mb = one_f_one_b_order(p, n)
    out = np.empty(comms.size)
    for k in range(comms.size):
        out[k] = one_f_one_b_timeline(kind, mb, f, b, comms[k])[0]
    return out
