"""Chimera (Li and Hoefler, SC'21): two model copies running in opposite directions.

fastpp builds the order of the authors' ``chimera_pipeline_rank.py`` for two pipelines: a
step-by-step walk in which every in-flight microbatch moves one device per step (forward down
its direction, a turn on the last device, backward back), each "unit" of ``p/2`` microbatches
injects one every two steps at its direction's first device, and whenever a unit retires a
microbatch while others are still in flight a new unit of the next ``p/2`` microbatches starts
in the same direction. With ``n = p`` this is the paper's basic unit (makespan ``3p-2`` slots
when F and B take one slot each); with ``n > p`` later units fill the earlier units' tail
bubbles, as the paper's formula needs. Device ``r`` holds stage ``r`` of the first copy and
stage ``2p-1-r`` of the second; microbatches ``0..n/2-1`` go down, the rest up, each direction
numbered in the order it is injected.
"""

import numpy as np

from .._jit import jit
from ._emit import B, F, put


@jit
def chimera(ops, length, p, n, m, G):
    rec, n_rec, direction_of = _walk(p, n)
    # number each direction's microbatches in the order they were injected
    label = np.empty(n, np.int64)
    seen = np.zeros(2, np.int64)
    for g in range(n):
        d = direction_of[g]
        label[g] = d * (n // 2) + seen[d]
        seen[d] += 1
    for r in range(p):
        length[r] = 0
    for e in range(n_rec):
        r = rec[0, e]
        j = label[rec[2, e]]
        s = r if j < n // 2 else 2 * p - 1 - r
        length[r] = put(ops, r, length[r], rec[1, e], s, j)


@jit(internal=True)
def _walk(p, n):
    """The authors' step-by-step walk: ``(rec, n_rec, direction_of)``, the ops as ``(device,
    kind, global id)`` in ``rec[:, :n_rec]`` in the order they run, and each microbatch's
    direction (0: down from device 0, 1: up from device p-1) by global id."""
    half = p // 2
    # a unit per p/2 microbatches, each direction's first unit included: n is a multiple of p
    # (the registry's rule), so exactly 2n/p units ever start
    n_units = 2 * n // p
    unit_dir = np.zeros(n_units, np.int64)  # 0: down from device 0, 1: up from device p-1
    unit_first = np.zeros(n_units, np.int64)  # global id of the unit's first microbatch
    unit_count = np.zeros(n_units, np.int64)
    unit_step = np.full(n_units, -1, np.int64)
    unit_lo = np.zeros(n_units, np.int64)  # in-flight microbatches: local ids lo..hi-1
    unit_hi = np.zeros(n_units, np.int64)
    dist = np.zeros((n_units, half), np.int64)  # devices travelled from the direction's start
    going = np.zeros((n_units, half), np.bool_)  # forward (True) or backward
    rec = np.empty((3, 2 * n * p), np.int64)
    n_rec = 0
    direction_of = np.zeros(n, np.int64)
    # the first unit of each direction
    for d in range(2):
        unit_dir[d], unit_first[d], unit_count[d] = d, d * half, min(half, n - d * half)
        direction_of[d * half: d * half + unit_count[d]] = d
    units, taken = 2, min(n, p)
    busy = True
    while busy:
        busy = False
        u = 0
        while u < units:  # units started during this step also move in it
            if unit_count[u] == 0 or (unit_step[u] >= 0 and unit_lo[u] == unit_hi[u]):
                u += 1
                continue
            busy = True
            if unit_step[u] <= 2 * (unit_count[u] - 1):
                unit_step[u] += 1
            retired = 0
            for x in range(unit_lo[u], unit_hi[u]):
                i = x % half
                if going[u, i] and dist[u, i] >= p - 1:
                    going[u, i] = False  # turn: the backward runs on the same device
                elif not going[u, i] and dist[u, i] == 0:
                    retired += 1  # backward done on the first device
                else:
                    dist[u, i] += 1 if going[u, i] else -1
            unit_lo[u] += retired
            if unit_step[u] % 2 == 0:  # inject the next microbatch every two steps
                i = unit_hi[u] % half
                dist[u, i], going[u, i] = 0, True
                unit_hi[u] += 1
            for x in range(unit_lo[u], unit_hi[u]):
                i = x % half
                device = dist[u, i] if unit_dir[u] == 0 else p - 1 - dist[u, i]
                rec[0, n_rec], rec[1, n_rec] = device, F if going[u, i] else B
                rec[2, n_rec] = unit_first[u] + x
                n_rec += 1
            if retired > 0 and unit_lo[u] < unit_hi[u] and taken < n:
                count = min(half, n - taken)
                unit_dir[units], unit_first[units], unit_count[units] = unit_dir[u], taken, count
                direction_of[taken: taken + count] = unit_dir[u]
                taken += count
                units += 1
            u += 1
    return rec, n_rec, direction_of


# Closed forms (SCHEDULES.md section 5; zero latency, uniform costs), read by fastpp.theory
# through the registry. Each returns None where no closed form is known.


def chimera_idle(p, n, m, f, b, w, fb, G):
    """Chimera's basic unit (``n = p``, ``f = b``) runs in ``3p-2`` slots (Li and Hoefler)."""
    return (3 * p - 2) * f - n * (f + b) if n == p and f == b else None


def chimera_bubble(p, n, m, f, b):
    """Chimera's basic unit's bubble fraction ``(p-2)/(2n+p-2)`` (``n = p``, ``f = b``)."""
    return (p - 2) / (2 * n + p - 2) if n == p and f == b else None
