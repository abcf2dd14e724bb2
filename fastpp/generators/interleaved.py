"""Schedules with ``m`` chunks per device on the loop placement (stage ``s`` on device ``s % p``).

Chunk ``c`` of device ``r`` is virtual stage ``c*p + r``.
"""

import numpy as np

from .._jit import jit
from ._emit import B, F, I, W, put, put_pair


@jit(internal=True)
def megatron_table(n, m, G):
    """Megatron's order of forward "virtual microbatches" ``k = 0..n*m-1``.

    Microbatches are taken in groups of ``G``; within a group, all of chunk 0, then all of
    chunk 1, ...; the last group holds the remaining ``n mod G`` microbatches when ``G`` does
    not divide ``n``. Returns the microbatch and the forward chunk of each ``k``.
    """
    table_mb = np.empty(n * m, np.int32)
    table_chunk = np.empty(n * m, np.int32)
    k = 0
    for lo in range(0, n, G):
        hi = min(lo + G, n)
        for c in range(m):
            for j in range(lo, hi):
                table_mb[k] = j
                table_chunk[k] = c
                k += 1
    return table_mb, table_chunk


@jit
def interleaved_1f1b(ops, length, p, n, m, G):
    """Interleaved 1F1B (Megatron virtual pipeline); the backward of ``k`` runs chunk ``m-1-c``."""
    table_mb, table_chunk = megatron_table(n, m, G)
    total = n * m
    for r in range(p):
        k = 0
        warmup = min(2 * (p - r - 1) + (m - 1) * G, total)
        # warmup: F x min(2(p-r-1) + (m-1)G, n*m)
        for v in range(warmup):
            k = put(ops, r, k, F, table_chunk[v] * p + r, table_mb[v])
        # steady: [F, B] x (n*m - warmup)
        for i in range(total - warmup):
            v = warmup + i
            k = put(ops, r, k, F, table_chunk[v] * p + r, table_mb[v])
            k = put(ops, r, k, B, (m - 1 - table_chunk[i]) * p + r, table_mb[i])
        # cooldown: B x warmup
        for v in range(total - warmup, total):
            k = put(ops, r, k, B, (m - 1 - table_chunk[v]) * p + r, table_mb[v])
        length[r] = k


@jit
def looped_bfs(ops, length, p, n, m, G):
    """Looped BFS: every chunk's forwards breadth-first, then the backwards in reverse."""
    for r in range(p):
        k = 0
        # forwards: for chunk 0..m-1, F x n (microbatches 0..n-1)
        for c in range(m):
            for j in range(n):
                k = put(ops, r, k, F, c * p + r, j)
        # backwards: for chunk m-1..0, B x n (microbatches n-1..0, as PyTorch runs it)
        for c in range(m - 1, -1, -1):
            for j in range(n - 1, -1, -1):
                k = put(ops, r, k, B, c * p + r, j)
        length[r] = k



@jit
def interleaved_zb(ops, length, p, n, m, G):
    """Interleaved Zero Bubble (ZB1P; PyTorch ``ScheduleInterleavedZeroBubble``).

    Interleaved 1F1B's Megatron order in PyTorch's rounds of ``n // max(1, n // p)``
    microbatches (``G`` is not used), with half its warmup and the backward split: each
    ``I`` runs where interleaved 1F1B runs ``B`` and device ``r``'s weight-backwards trail its
    input-backwards by ``r``, filling the bubbles of the shorter warmup.
    """
    group = n // max(1, n // p)  # PyTorch's microbatches per round, not the argument G
    table_mb, table_chunk = megatron_table(n, m, group)
    total = n * m
    for r in range(p):
        k = 0
        warmup = min((p - r - 1) + (m - 1) * group, total)
        n_w = 0
        # warmup: F x min((p-r-1) + (m-1) group, n*m)
        for v in range(warmup):
            k = put(ops, r, k, F, table_chunk[v] * p + r, table_mb[v])
        # steady: [F, I, then W of the backward r steps back once there is one] x (n*m - warmup)
        # cooldown: [I, W likewise] x warmup
        for i in range(total):
            v = warmup + i
            if v < total:
                k = put(ops, r, k, F, table_chunk[v] * p + r, table_mb[v])
            k = put(ops, r, k, I, (m - 1 - table_chunk[i]) * p + r, table_mb[i])
            if i >= r:
                k = put(ops, r, k, W, (m - 1 - table_chunk[n_w]) * p + r, table_mb[n_w])
                n_w += 1
        # the last min(r, n*m) W
        for i in range(n_w, total):
            k = put(ops, r, k, W, (m - 1 - table_chunk[i]) * p + r, table_mb[i])
        length[r] = k


@jit
def combined_1f1b(ops, length, p, n, m, G):
    """Megatron's combined 1F1B (``--overlap-moe-expert-parallel-comm``).

    Interleaved 1F1B's order (``get_schedule_table`` in Megatron-LM's
    ``megatron/core/pipeline_parallel/schedules.py``) with one more warm-up forward
    (``get_pp_rank_microbatches``: "to ensure the forward and backward computations are
    independent in all 1f1b steps"); each steady-state pair runs as one overlapped op
    (``combined_1f1b_schedule_for_interleaved_pipelining`` in ``combined_1f1b.py``, called
    with the forward ``k + warmup`` and the backward ``k``). With ``p = 1`` this is
    ``combined_1f1b_schedule_for_no_pipelining``: the first forward alone, then ``F(j+1)``
    with ``B(j)``, then the last backward alone. Megatron also asserts ``p = 1`` or
    interleaving, expert parallelism and no full recomputation (``TransformerConfig``).
    """
    table_mb, table_chunk = megatron_table(n, m, G)
    total = n * m
    for r in range(p):
        k = 0
        warmup = min(2 * (p - r - 1) + (m - 1) * G + 1, total)
        # warmup: F x min(2(p-r-1) + (m-1)G + 1, n*m)
        for v in range(warmup):
            k = put(ops, r, k, F, table_chunk[v] * p + r, table_mb[v])
        # steady: [F(warmup + i) & B(i)] x (n*m - warmup), each an overlapped pair
        for i in range(total - warmup):
            v = warmup + i
            k = put_pair(ops, r, k, table_chunk[v] * p + r, table_mb[v],
                         (m - 1 - table_chunk[i]) * p + r, table_mb[i])
        # cooldown: B x warmup
        for v in range(total - warmup, total):
            k = put(ops, r, k, B, (m - 1 - table_chunk[v]) * p + r, table_mb[v])
        length[r] = k


# Closed forms (SCHEDULES.md section 5; zero latency, uniform costs), read by fastpp.theory
# through the registry. Each returns None where no closed form is known.


def interleaved_idle(p, n, m, f, b, w, fb, G):
    """Interleaved 1F1B's ramp is ``1/m`` of 1F1B's (Narayanan et al. 2021), for groups of
    ``G = p`` and ``n`` a multiple of ``p``."""
    return (p - 1) * (f + b) / m if G == p and n % p == 0 else None


def interleaved_bubble(p, n, m, f, b):
    """Interleaved 1F1B's and looped BFS's bubble fraction ``(p-1)/(mn+p-1)`` (``p | n``)."""
    return (p - 1) / (m * n + p - 1) if n % p == 0 else None


def interleaved_peak_live(p, n, m, G):
    """Megatron's warm-up: ``2(p-r-1) + (m-1)G`` forwards before the first backward, plus
    the one in flight, at most every chunk of every microbatch."""
    r = np.arange(p)
    return np.minimum(2 * (p - r - 1) + (m - 1) * G + 1, n * m)


def looped_bfs_idle(p, n, m, f, b, w, fb, G):
    """Looped BFS's ramp, as interleaved 1F1B's, for ``n >= p``."""
    return (p - 1) * (f + b) / m if n >= p else None


def looped_bfs_peak_live(p, n, m, G):
    """Breadth first: every chunk of every microbatch is live before the backwards start."""
    return np.full(p, n * m)
