"""DualPipe (two directions, DeepSeek) and DualPipeV (V placement, PyTorch ``ScheduleDualPipeV``).

Both run DeepSeek's eight phases on every device. A device works on two "phases": DualPipe's
phase 0 is the direction in which the device sits in the first half of the pipe, DualPipeV's
phase ``c`` is chunk ``c``. ``H`` is half the pipe's length in devices, ``h`` the device's
distance from the nearer end, ``M`` the microbatches per phase.
"""

import numpy as np

from .._jit import jit
from ._emit import B, F, I, W, put, put_pair

# slots of a device's generator state
K, HEAD, TAIL, NF, NB = 0, 1, 2, 3, 5  # next op, W queue head and tail, F and B counts per phase
# arguments of the phase helpers (NumPy scalars: see fastpp.ops)
PH0, PH1 = np.int64(0), np.int64(1)
FULL, SPLIT = np.False_, np.True_


@jit(internal=True)
def _forward(ops, r, st, stages, first_mb, ph):
    st[K] = put(ops, r, st[K], F, stages[ph], first_mb[ph] + st[NF + ph])
    st[NF + ph] += 1


@jit(internal=True)
def _backward(ops, r, st, stages, first_mb, ph, split, queue):
    """A full ``B``, or an ``I`` whose ``W`` joins the device's FIFO queue."""
    j = first_mb[ph] + st[NB + ph]
    st[NB + ph] += 1
    st[K] = put(ops, r, st[K], I if split else B, stages[ph], j)
    if split:
        queue[0, st[TAIL]] = stages[ph]
        queue[1, st[TAIL]] = j
        st[TAIL] += 1


@jit(internal=True)
def _weight(ops, r, st, queue):
    """The oldest deferred ``W``, if any."""
    if st[HEAD] < st[TAIL]:
        st[K] = put(ops, r, st[K], W, queue[0, st[HEAD]], queue[1, st[HEAD]])
        st[HEAD] += 1


@jit(internal=True)
def _pair(ops, r, st, stages, first_mb, ph_f, ph_b):
    """Overlapped pair: forward of phase ``ph_f`` with full backward of phase ``ph_b``."""
    j_f = first_mb[ph_f] + st[NF + ph_f]
    j_b = first_mb[ph_b] + st[NB + ph_b]
    st[NF + ph_f] += 1
    st[NB + ph_b] += 1
    st[K] = put_pair(ops, r, st[K], stages[ph_f], j_f, stages[ph_b], j_b)


@jit(internal=True)
def dualpipe_device(ops, r, H, h, M, stages, first_mb):
    """DeepSeek's eight phases on device ``r``; returns its op count."""
    st = np.zeros(7, np.int64)
    queue = np.empty((2, 2 * M), np.int32)
    # 1. F(0) x 2(H-h-1)
    for _ in range(2 * (H - h - 1)):
        _forward(ops, r, st, stages, first_mb, PH0)
    # 2. [F(0), F(1)] x (h+1)
    for _ in range(h + 1):
        _forward(ops, r, st, stages, first_mb, PH0)
        _forward(ops, r, st, stages, first_mb, PH1)
    # 3. [I(1), W, F(1)] x (H-h-1)
    for _ in range(H - h - 1):
        _backward(ops, r, st, stages, first_mb, PH1, SPLIT, queue)
        _weight(ops, r, st, queue)
        _forward(ops, r, st, stages, first_mb, PH1)
    # 4. [F(0)&B(1), F(1)&B(0)] x (M-2H+h+1); the middle devices run the first pair unoverlapped
    for i in range(M - 2 * H + h + 1):
        if i == 0 and h == H - 1:
            _forward(ops, r, st, stages, first_mb, PH0)
            _backward(ops, r, st, stages, first_mb, PH1, FULL, queue)
        else:
            _pair(ops, r, st, stages, first_mb, PH0, PH1)
        _pair(ops, r, st, stages, first_mb, PH1, PH0)
    # 5. [B(1), F(1)&B(0)] x (H-h-1)
    for _ in range(H - h - 1):
        _backward(ops, r, st, stages, first_mb, PH1, FULL, queue)
        _pair(ops, r, st, stages, first_mb, PH1, PH0)
    # 6. [back(1), back(0)] x (h+1): the first h+1 of these are full B, the rest I
    for t in range(2 * (h + 1)):
        _backward(ops, r, st, stages, first_mb, 1 - t % 2, t >= h + 1, queue)
    # 7. [W, I(0)] x (H-h-1)
    for _ in range(H - h - 1):
        _weight(ops, r, st, queue)
        _backward(ops, r, st, stages, first_mb, PH0, SPLIT, queue)
    # 8. W x (h+1)
    for _ in range(h + 1):
        _weight(ops, r, st, queue)
    return st[K]


@jit
def dualpipe(ops, length, p, n, m, G):
    """DualPipe: microbatches ``0..n/2-1`` run stages ``0..p-1`` down the devices, the rest
    run stages ``p..2p-1`` up them; device ``r`` holds stages ``r`` and ``2p-1-r``."""
    H = p // 2
    for r in range(p):
        # by direction: the device's stage and the direction's first microbatch
        stages, first_mb = np.array([r, 2 * p - 1 - r]), np.array([0, n // 2])
        if r >= H:  # phase 0 is the direction in which the device sits in the first half
            stages, first_mb = stages[::-1].copy(), first_mb[::-1].copy()
        length[r] = dualpipe_device(ops, r, H, min(r, p - 1 - r), n // 2, stages, first_mb)


@jit
def dualpipev(ops, length, p, n, m, G):
    """DualPipeV: phase ``c`` is chunk ``c`` (stage ``r``, then stage ``2p-1-r``)."""
    for r in range(p):
        length[r] = dualpipe_device(ops, r, p, r, n, np.array([r, 2 * p - 1 - r]),
                                    np.array([0, 0]))


# Closed forms (SCHEDULES.md section 5; zero latency, uniform costs), read by fastpp.theory
# through the registry. Each returns None where no closed form is known.


def dualpipe_idle(p, n, m, f, b, w, fb, G):
    """DualPipe's bubble ``(p/2-1)(fb+b-3w)`` (DeepSeek-V3 report, table 2), for ``f = i``,
    ``w <= f`` and a pair that takes between its longer half and both halves in a row
    (``max(f, b) <= fb <= f + b``: outside, its steady state is another, and the form went
    negative at ``fb = 0.25``)."""
    physical = max(f, b) * (1 - 1e-12) <= fb <= (f + b) * (1 + 1e-12)
    return (p / 2 - 1) * (fb + b - 3 * w) if (np.isclose(f, b - w) and w <= f
                                              and physical) else None


def dualpipe_makespan(p, n, m, f, b, w, G):
    """None: overlapped pairs make the busy time differ between devices."""
    return None


def dualpipe_peak_live(p, n, m, G):
    """DualPipe holds ``p+1`` stage activations per device."""
    return np.full(p, p + 1)


def dualpipev_peak_live(p, n, m, G):
    """DualPipeV holds ``2p+1`` chunk activations per device."""
    return np.full(p, 2 * p + 1)


def dualpipe_peak_activations(p, n, m, G, gamma):
    """DualPipe's peak, known only when a pending weight grad holds a whole stage."""
    return dualpipe_peak_live(p, n, m, G) / m if gamma == 1.0 else None


def dualpipev_peak_activations(p, n, m, G, gamma):
    """DualPipeV's peak, known only when a pending weight grad holds a whole chunk."""
    return dualpipev_peak_live(p, n, m, G) / m if gamma == 1.0 else None
