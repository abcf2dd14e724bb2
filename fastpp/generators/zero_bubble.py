"""Zero Bubble schedules with a split backward (``I`` input grad, ``W`` weight grad).

ZB-H1 and ZB-H2 (handcrafted, one stage per device) and ZB-V (V placement, two chunks per
device: chunk 0 is stage ``r``, chunk 1 is stage ``2p-1-r``), as PyTorch runs it.
"""

import numpy as np

from .._jit import jit
from ._emit import F, I, W, put

H1, H2 = np.int64(1), np.int64(2)  # warmup depth (NumPy scalars: see fastpp.ops)


# Plain Python: a jitted wrapper would compile zb_h once more.
def zb_h1(ops, length, p, n, m, G):
    """ZB-H1: 1F1B's warmup, W lagging ``r`` behind."""
    zb_h(ops, length, p, n, H1)


def zb_h2(ops, length, p, n, m, G):
    """ZB-H2: twice 1F1B's warmup, W lagging ``2r`` behind."""
    zb_h(ops, length, p, n, H2)


@jit
def zb_h(ops, length, p, n, depth):
    """ZB-H1 (``depth=1``) and ZB-H2 (``depth=2``).

    Device ``r`` warms up with ``depth*(p-r-1)`` forwards; each step runs a forward (if any is
    left), the input-backward of the oldest microbatch, and a weight-backward once more than
    ``depth*r`` input-backwards are done; the remaining weight-backwards close the iteration.
    The order of the authors' evaluation code (``get_hand_schedule``), op for op; their
    lightweight runtime (``zbpp_light``'s ``schedule_w``) keeps the pending weight-backwards
    newest first and fuses one that follows its input-backward into a whole backward while
    forwards remain, which sends the gradient later (slower under hand-off latency).
    """
    for r in range(p):
        k = 0
        n_f = min(depth * (p - r - 1), n)
        # warmup: F x min(depth*(p-r-1), n)
        for j in range(n_f):
            k = put(ops, r, k, F, r, j)
        # steady: [F, I, W lagging depth*r behind] until every I is done
        n_w = 0
        for n_i in range(n):
            if n_f < n:
                k = put(ops, r, k, F, r, n_f)
                n_f += 1
            k = put(ops, r, k, I, r, n_i)
            if n_i + 1 > depth * r:
                k = put(ops, r, k, W, r, n_w)
                n_w += 1
        # cooldown: the remaining W
        for j in range(n_w, n):
            k = put(ops, r, k, W, r, j)
        length[r] = k


@jit(signature="int64(int32[:, :, ::1], int64, int64, int64, int64, int64, int64)",
     internal=True)
def _put_if(ops, r, k, kind, s, j, n):
    """Write the op only for a real microbatch (ZB-V is built for at least 2p-1)."""
    if j < n:
        return put(ops, r, k, kind, s, j)
    return k


@jit
def zbv(ops, length, p, n, m, G):
    """ZB-V (PyTorch ``ScheduleZBVZeroBubble``), built for ``n' = max(n, 2p-1)`` microbatches
    with the ops of microbatches ``>= n`` dropped."""
    n_built = max(n, 2 * p - 1)
    for r in range(p):
        c0 = r  # chunk 0's stage
        c1 = 2 * p - 1 - r  # chunk 1's stage
        k = 0
        f0 = f1 = i0 = i1 = 0
        # warmup 1: F(chunk 0) x (2(p-r) - 1)
        for _ in range(2 * (p - r) - 1):
            k = _put_if(ops, r, k, F, c0, f0, n)
            f0 += 1
        # warmup 2: [F(chunk 1), F(chunk 0)] x r
        for _ in range(r):
            k = _put_if(ops, r, k, F, c1, f1, n)
            f1 += 1
            k = _put_if(ops, r, k, F, c0, f0, n)
            f0 += 1
        # warmup 3: [F, I, W](chunk 1) x (p - r)
        for _ in range(p - r):
            k = _put_if(ops, r, k, F, c1, f1, n)
            f1 += 1
            k = _put_if(ops, r, k, I, c1, i1, n)
            k = _put_if(ops, r, k, W, c1, i1, n)
            i1 += 1
        # steady: [F(chunk 0) while any is left, I, W (chunk 0), F, I, W (chunk 1)] x (n' - p)
        # (chunk 1 has had p forwards, chunk 0 2p-r-1 <= n': both reach n' together)
        for _ in range(n_built - p):
            if f0 < n_built:
                k = _put_if(ops, r, k, F, c0, f0, n)
                f0 += 1
            k = _put_if(ops, r, k, I, c0, i0, n)
            k = _put_if(ops, r, k, W, c0, i0, n)
            i0 += 1
            k = _put_if(ops, r, k, F, c1, f1, n)
            f1 += 1
            k = _put_if(ops, r, k, I, c1, i1, n)
            k = _put_if(ops, r, k, W, c1, i1, n)
            i1 += 1
        # cooldown: [I(chunk 0), I(chunk 1)] x r, then [I, W](chunk 0) x (p - r)
        w0, w1 = i0, i1
        for _ in range(r):
            k = _put_if(ops, r, k, I, c0, i0, n)
            i0 += 1
            k = _put_if(ops, r, k, I, c1, i1, n)
            i1 += 1
        for _ in range(p - r):
            k = _put_if(ops, r, k, I, c0, i0, n)
            i0 += 1
            k = _put_if(ops, r, k, W, c0, w0, n)
            w0 += 1
        # the remaining W of chunk 1, then of chunk 0
        for j in range(w1, i1):
            k = _put_if(ops, r, k, W, c1, j, n)
        for j in range(w0, i0):
            k = _put_if(ops, r, k, W, c0, j, n)
        length[r] = k


# Closed forms (SCHEDULES.md section 5; zero latency, uniform costs), read by fastpp.theory
# through the registry. Each returns None where no closed form is known.


def zb_h1_idle(p, n, m, f, b, w, fb, G):
    """ZB-H1's idle ``(p-1)(f+i-w)`` (Qi et al. 2024), for ``n >= p``, ``w <= f``, ``w <= i``."""
    i = b - w
    return (p - 1) * (f + i - w) if n >= p and w <= f and w <= i else None


def zb_h1_peak_live(p, n, m, G):
    """ZB-H1 keeps 1F1B's warm-up depth: ``p`` on every device (``n >= p``)."""
    return np.full(p, p) if n >= p else None


def zb_h1_peak_activations(p, n, m, G, gamma):
    """ZB-H1's ``(p-r) + r*gamma``: a pending weight grad holds ``gamma`` (``n >= p``)."""
    r = np.arange(p)
    return (p - r) + r * gamma if n >= p else None


def zb_h2_span_idle(p, n, m, f, b, w):
    """ZB-H2's span idle ``(p-1)(f+i-2w)``, for ``n >= 2p-1``, ``w <= f``, ``w <= i``."""
    i = b - w
    return (p - 1) * (f + i - 2 * w) if n >= 2 * p - 1 and w <= f and w <= i else None


def zb_h2_peak_live(p, n, m, G):
    """ZB-H2 warms up twice as deep: ``2p-1`` on every device (``n >= 2p-1``)."""
    return np.full(p, 2 * p - 1) if n >= 2 * p - 1 else None


def zb_h2_peak_activations(p, n, m, G, gamma):
    """ZB-H2's ``(2p-2r-1) + 2r*gamma`` (``n >= 2p-1``)."""
    r = np.arange(p)
    return (2 * p - 2 * r - 1) + 2 * r * gamma if n >= 2 * p - 1 else None


def zbv_span_idle(p, n, m, f, b, w):
    """ZB-V has no bubble for ``n >= 2p-1`` when ``f = i = w``."""
    i = b - w
    return 0.0 if n >= 2 * p - 1 and np.isclose(f, i) and np.isclose(f, w) else None


def zbv_peak_live(p, n, m, G):
    """ZB-V holds ``2p`` chunks on every device (``n >= 2p-1``): 1F1B's peak."""
    return np.full(p, 2 * p) if n >= 2 * p - 1 else None


def zbv_peak_activations(p, n, m, G, gamma):
    """ZB-V's peak is known only when a pending weight grad holds a whole chunk."""
    live = zbv_peak_live(p, n, m, G)
    return None if live is None or gamma != 1.0 else live / m
