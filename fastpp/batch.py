"""Jitted sweeps: generation, simulation and reduction of many points.

One point is ``(schedule id, p, n, m, G)`` and its costs: ``fastpp.Costs``'s nine fields
(``costs.FIELDS``), each one value, one per device or one per stage, read from a flat table
``values`` at ``at[i, field] = (offset, count)``. Kernels release the GIL, so ``fastpp.sweep`` runs
slices of points on several threads at once; every point is computed on its own, so results
do not depend on the thread count. Per-op timelines live only while their point runs.
"""

import numpy as np

from . import kernels
from ._jit import jit
from .costs import FIELDS as COST_FIELDS
from .generators._emit import TWO_DIRECTIONS, new_ops, placement, routes
from .generators.chimera import chimera
from .generators.classic import forward_only, gpipe, one_f_one_b
from .generators.dualpipe import dualpipe, dualpipev
from .generators.interleaved import interleaved_1f1b, looped_bfs
from .generators.registry import SCHEDULES
from .generators.vshape import HALF, MIN, v_shape
from .generators.zero_bubble import H1, H2, zb_h, zbv

# what a point gives, in the order of simulate_points's output row
COLUMNS = ("makespan", "bubble_ratio", "span_bubble_ratio", "peak_activations_max",
           "peak_activations_min", "peak_live_max", "num_ops", "parameter_units", "status")
(MAKESPAN, BUBBLE, SPAN_BUBBLE, PEAK_MAX, PEAK_MIN, LIVE_MAX, NUM_OPS, PARAMETER_UNITS,
 STATUS) = range(len(COLUMNS))
# a point's status: simulated, or why not (BAD_LENGTH + k: field k has the wrong length)
OK, DEADLOCK, W_ABOVE_B, BAD_LENGTH = 0, 1, 2, 10
N_FIELDS = len(COST_FIELDS)

# the registry's ids, frozen into the kernel when it compiles
_ID = {name: spec.sid for name, spec in SCHEDULES.items()}
PLACEMENT = np.array([spec.kind for spec in SCHEDULES.values()], np.int64)
FORWARD_ONLY = np.array([spec.forward_only for spec in SCHEDULES.values()])
(_GPIPE, _1F1B, _INTERLEAVED, _LOOPED_BFS, _FORWARD_ONLY, _ZB_H1, _ZB_H2, _ZBV, _V_HALF,
 _V_MIN, _DUALPIPE, _DUALPIPEV, _CHIMERA) = (
    _ID[name] for name in ("gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "forward-only",
                           "zb-h1", "zb-h2", "zbv", "v-half", "v-min", "dualpipe",
                           "dualpipev", "chimera"))


@jit
def generate(kind, ops, length, p, n, m, G):
    """Run schedule ``kind``'s generator: the registry's dispatch inside Numba.

    A new schedule adds its line here (``tests/test_sweep.py`` checks that every registered
    schedule reaches its own generator). Numba cannot call a table of functions without its
    experimental first-class function types, hence the chain.
    """
    if kind == _GPIPE:
        gpipe(ops, length, p, n, m, G)
    elif kind == _1F1B:
        one_f_one_b(ops, length, p, n, m, G)
    elif kind == _INTERLEAVED:
        interleaved_1f1b(ops, length, p, n, m, G)
    elif kind == _LOOPED_BFS:
        looped_bfs(ops, length, p, n, m, G)
    elif kind == _FORWARD_ONLY:
        forward_only(ops, length, p, n, m, G)
    elif kind == _ZB_H1:
        zb_h(ops, length, p, n, H1)
    elif kind == _ZB_H2:
        zb_h(ops, length, p, n, H2)
    elif kind == _ZBV:
        zbv(ops, length, p, n, m, G)
    elif kind == _V_HALF:
        v_shape(ops, length, p, n, HALF)
    elif kind == _V_MIN:
        v_shape(ops, length, p, n, MIN)
    elif kind == _DUALPIPE:
        dualpipe(ops, length, p, n, m, G)
    elif kind == _DUALPIPEV:
        dualpipev(ops, length, p, n, m, G)
    elif kind == _CHIMERA:
        chimera(ops, length, p, n, m, G)
    else:
        return False
    return True


# typed once: called with the constants 0..8, it would otherwise compile once per constant
@jit(signature="float64[::1](float64[::1], int64[:, :, ::1], int64, int64)")
def _field(values, at, i, k):
    """Point ``i``'s cost field ``k``: its slice of the flat table."""
    return values[at[i, k, 0]: at[i, k, 0] + at[i, k, 1]]


@jit
def simulate_points(sid, p, n, m, G, values, at, index, out, peaks, peak_at):
    """Build and simulate the points ``index``; row ``i`` of ``out`` gets point ``i``'s
    ``COLUMNS`` (activations in the unit of ``act``). Forward-only schedules free a
    forward's activations when it ends. Unless ``peaks`` is empty, device ``r``'s peak
    activations of point ``i`` also go to ``peaks[peak_at[i] + r]``.

    Generators do not read costs, so consecutive points with the same ``(schedule, p, n, m,
    G)`` share one build (``fastpp.sweep`` orders points that way).
    """
    built = -1  # the point whose schedule is in block (the first point always builds)
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
            generate(kind, block, length, P, N, M, g)
            stage_device = placement(PLACEMENT[kind], P, M)
            first, last = routes(PLACEMENT[kind], P, N, M)
        out[i, :] = np.nan
        V = stage_device.shape[0]
        bad = -1
        for k in range(N_FIELDS):
            count = at[i, k, 1]
            if bad < 0 and count != 1 and count != P and count != V:
                bad = k
        if bad >= 0:
            out[i, STATUS] = BAD_LENGTH + bad
            continue
        c = kernels.stage_costs(_field(values, at, i, 0), _field(values, at, i, 1),
                                _field(values, at, i, 2), _field(values, at, i, 3),
                                _field(values, at, i, 4), _field(values, at, i, 5),
                                _field(values, at, i, 6), _field(values, at, i, 7),
                                _field(values, at, i, 8), stage_device, M)
        w_above_b = False
        for s in range(V):
            w_above_b |= c[kernels.TW, s] > c[kernels.TB, s]
        if w_above_b:
            out[i, STATUS] = W_ABOVE_B
            continue
        L = total = 0
        for r in range(P):  # (length.max() would compile NumPy's generic reduction)
            L = max(L, length[r])
            total += length[r]
        L = max(1, L)
        start = np.zeros((P, L))
        end = np.zeros((P, L))
        pointer = np.zeros(P, np.int64)
        if kernels.timeline(block, length, stage_device, first, last, N, c[kernels.TF],
                            c[kernels.TB], c[kernels.TW], c[kernels.TFB], c[kernels.COMM],
                            start, end, pointer) < 0.0:
            out[i, STATUS] = DEADLOCK
            continue
        busy = np.zeros(P)
        span = np.zeros(P)
        makespan, bubble, span_bubble = kernels.reduce(start, end, length, busy, span)
        peak_max, peak_min, live_max = -np.inf, np.inf, 0
        for r in range(P):  # peaks only: no per-op memory arrays
            peak, live = kernels.device_memory(block, length, r, c[kernels.UNIT],
                                               c[kernels.GAMMA], FORWARD_ONLY[kind], none,
                                               none, none_int, none_int)
            if peaks.shape[0] > 0:
                peaks[peak_at[i] + r] = peak
            peak_max = max(peak_max, peak)
            peak_min = min(peak_min, peak)
            live_max = max(live_max, live)
        out[i, MAKESPAN], out[i, BUBBLE], out[i, SPAN_BUBBLE] = makespan, bubble, span_bubble
        out[i, PEAK_MAX], out[i, PEAK_MIN], out[i, LIVE_MAX] = peak_max, peak_min, live_max
        out[i, NUM_OPS] = total
        out[i, PARAMETER_UNITS] = 2.0 if PLACEMENT[kind] == TWO_DIRECTIONS else 1.0
        out[i, STATUS] = OK
