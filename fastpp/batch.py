"""Jitted sweeps: generation, simulation and reduction of many points.

One point is ``(schedule id, p, n, m, G)`` with uniform costs ``(f, b, w, comm, gamma, fb)``
(``fb < 0``: the pair takes ``f + b``). Kernels release the GIL, so ``fastpp.sweep`` runs
slices of points on several threads at once; every point is computed on its own, so results
do not depend on the thread count. Per-op timelines live only while their point runs.
"""

import numpy as np

from . import kernels
from ._jit import jit
from .generators import (
    CHIMERA,
    DUALPIPE,
    DUALPIPEV,
    FORWARD_ONLY,
    GPIPE,
    INTERLEAVED_1F1B,
    LOOPED_BFS,
    ONE_F_ONE_B,
    PLACEMENT,
    TWO_DIRECTIONS,
    V_HALF,
    V_MIN,
    ZB_H1,
    ZB_H2,
    ZBV,
    chimera,
    dualpipe,
    dualpipev,
    forward_only,
    gpipe,
    interleaved_1f1b,
    looped_bfs,
    one_f_one_b,
    zbv,
)
from .generators._emit import new_ops, placement, routes
from .generators.vshape import HALF, MIN, v_shape
from .generators.zero_bubble import H1, H2, zb_h

# columns of the output
COLUMNS = ("makespan", "bubble_ratio", "span_bubble_ratio", "peak_activations_max",
           "peak_activations_min", "peak_live_max", "num_ops", "parameter_units", "status")
OK, DEADLOCK = 0.0, 1.0


@jit
def simulate_points(sid, p, n, m, G, f, b, w, comm, gamma, fb, index, out):
    """Build and simulate the points ``index``; row ``i`` of ``out`` gets point ``i``'s
    ``COLUMNS``. Forward-only schedules free a forward's activations when it ends.

    Generators do not read costs, so consecutive points with the same ``(schedule, p, n, m,
    G)`` share one build (``fastpp.sweep`` orders points that way). The dispatch on the
    schedule id sits here rather than in a function of its own: every jitted caller compiles
    its callees' code again, and this is the one caller of them all.
    """
    built = -1  # the point whose schedule is in block (the first point always builds)
    unit_act = np.ones(1)  # sweeps count activations in units of M_B
    none = np.zeros((0, 0))  # device_memory stores nothing: the peaks are all a sweep keeps
    none_int = np.zeros((0, 0), np.int64)
    block = np.zeros((1, 1, 1), np.int32)
    length = stage_device = first = last = np.zeros(1, np.int32)
    for i in index:
        P, N, M, g = p[i], n[i], m[i], G[i]
        kind = sid[i]
        if (built < 0 or kind != sid[built] or P != p[built] or N != n[built]
                or M != m[built] or g != G[built]):
            built = i
            block = new_ops(P, N, M)
            length = np.zeros(P, np.int32)
            if kind == GPIPE:
                gpipe(block, length, P, N, M, g)
            elif kind == ONE_F_ONE_B:
                one_f_one_b(block, length, P, N, M, g)
            elif kind == INTERLEAVED_1F1B:
                interleaved_1f1b(block, length, P, N, M, g)
            elif kind == LOOPED_BFS:
                looped_bfs(block, length, P, N, M, g)
            elif kind == FORWARD_ONLY:
                forward_only(block, length, P, N, M, g)
            elif kind == ZB_H1:
                zb_h(block, length, P, N, H1)
            elif kind == ZB_H2:
                zb_h(block, length, P, N, H2)
            elif kind == ZBV:
                zbv(block, length, P, N, M, g)
            elif kind == V_HALF:
                v_shape(block, length, P, N, HALF)
            elif kind == V_MIN:
                v_shape(block, length, P, N, MIN)
            elif kind == DUALPIPE:
                dualpipe(block, length, P, N, M, g)
            elif kind == DUALPIPEV:
                dualpipev(block, length, P, N, M, g)
            elif kind == CHIMERA:
                chimera(block, length, P, N, M, g)
            stage_device = placement(PLACEMENT[kind], P, M)
            first, last = routes(PLACEMENT[kind], P, N, M)
        L = total = 0
        for r in range(P):  # (length.max() would compile NumPy's generic reduction)
            L = max(L, length[r])
            total += length[r]
        L = max(1, L)
        c = kernels.stage_costs(f[i:i + 1], b[i:i + 1], w[i:i + 1],
                                fb[i:i + 1] if fb[i] >= 0.0 else fb[:0], comm[i:i + 1],
                                gamma[i:i + 1], unit_act, stage_device, M)
        start = np.zeros((P, L))
        end = np.zeros((P, L))
        pointer = np.zeros(P, np.int64)
        if kernels.timeline(block, length, stage_device, first, last, N, c[0], c[1], c[2],
                            c[3], c[4], start, end, pointer) < 0.0:
            out[i, :] = np.nan
            out[i, 8] = DEADLOCK
            continue
        busy = np.zeros(P)
        span = np.zeros(P)
        makespan, bubble, span_bubble = kernels.reduce(start, end, length, busy, span)
        peak_max, peak_min, live_max = -np.inf, np.inf, 0
        for r in range(P):  # peaks only: no per-op memory arrays
            peak, live = kernels.device_memory(block, length, r, c[5], c[6],
                                               sid[i] == FORWARD_ONLY, none, none, none_int,
                                               none_int)
            peak_max = max(peak_max, peak)
            peak_min = min(peak_min, peak)
            live_max = max(live_max, live)
        out[i, 0], out[i, 1], out[i, 2] = makespan, bubble, span_bubble
        out[i, 3], out[i, 4], out[i, 5] = peak_max, peak_min, live_max
        out[i, 6] = total
        out[i, 7] = 2.0 if PLACEMENT[sid[i]] == TWO_DIRECTIONS else 1.0
        out[i, 8] = OK
