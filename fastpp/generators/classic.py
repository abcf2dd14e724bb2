"""GPipe, 1F1B and forward-only (inference): one stage per device, stage ``r`` on device ``r``.

Every generator takes ``(ops, length, p, n, m, G)`` and ignores what it does not use.
"""

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
