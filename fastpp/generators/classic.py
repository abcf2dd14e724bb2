"""GPipe, 1F1B and forward-only (inference): one stage per device, stage ``r`` on device ``r``.

Every generator takes ``(ops, length, p, n, m, G)`` and ignores what it does not use.
"""

import numpy as np

from .._jit import jit
from ._emit import B, F, put


@jit
def gpipe(ops, length, p, n, m, G):
    """GPipe (DeepSpeed/PyTorch order): all forwards, then all backwards, oldest first."""
    for r in range(p):
        k = 0
        # forwards: F x n
        for j in range(n):
            k = put(ops, r, k, F, r, j)
        # backwards: B x n
        for j in range(n):
            k = put(ops, r, k, B, r, j)
        length[r] = k


@jit
def one_f_one_b(ops, length, p, n, m, G):
    """1F1B (PipeDream-Flush, Megatron, DeepSpeed)."""
    for r in range(p):
        k = 0
        warmup = min(p - r - 1, n)
        # warmup: F x min(p-r-1, n)
        for j in range(warmup):
            k = put(ops, r, k, F, r, j)
        # steady: [F, B of the oldest] x (n - warmup)
        for i in range(n - warmup):
            k = put(ops, r, k, F, r, warmup + i)
            k = put(ops, r, k, B, r, i)
        # cooldown: B x warmup
        for j in range(n - warmup, n):
            k = put(ops, r, k, B, r, j)
        length[r] = k


@jit
def forward_only(ops, length, p, n, m, G):
    """Inference: F x n on every device; activations are freed when the forward ends."""
    for r in range(p):
        k = 0
        for j in range(n):
            k = put(ops, r, k, F, r, j)
        length[r] = k


# Closed forms (SCHEDULES.md section 5; zero latency, uniform costs), read by fastpp.theory
# through the registry. Each returns None where no closed form is known.


def flush_idle(p, n, m, f, b, w, fb, G):
    """GPipe's and 1F1B's idle: ``p-1`` forwards and backwards of ramp (Huang et al. 2019)."""
    return (p - 1) * (f + b)


def flush_bubble(p, n, m, f, b):
    """GPipe's and 1F1B's bubble fraction ``(p-1)/(n+p-1)``."""
    return (p - 1) / (n + p - 1)


def gpipe_peak_live(p, n, m, G):
    """GPipe holds every microbatch until the backwards start."""
    return np.full(p, n)


def one_f_one_b_peak_live(p, n, m, G):
    """1F1B's device ``r`` holds its ``p-r`` warm-up microbatches (or all ``n``)."""
    return np.minimum(n, p - np.arange(p))


def forward_only_idle(p, n, m, f, b, w, fb, G):
    """Forwards only: ``p-1`` forwards of ramp."""
    return (p - 1) * f


def forward_only_makespan(p, n, m, f, b, w, G):
    """``n`` forwards and the ramp: no backward."""
    return n * f + forward_only_idle(p, n, m, f, b, w, None, G)


def forward_only_peak_live(p, n, m, G):
    """A forward's activations are freed when it ends: one at a time."""
    return np.ones(p, int)
