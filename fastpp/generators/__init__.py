"""Schedule generators: one jitted function per schedule, reading like the paper's phases.

``generate`` dispatches on an integer schedule id so that sweeps can build schedules inside
Numba; ``registry`` holds the public names, their constraints and ``build_schedule``.
"""

import numpy as np

from .._jit import jit
from ._emit import LOOP, TWO_DIRECTIONS, VSHAPE, new_ops, placement, routes  # noqa: F401
from .chimera import chimera
from .classic import forward_only, gpipe, one_f_one_b
from .dualpipe import dualpipe, dualpipev
from .interleaved import interleaved_1f1b, looped_bfs
from .vshape import v_shape
from .zero_bubble import zb_h, zbv

# schedule ids (the registry maps names to them)
(GPIPE, ONE_F_ONE_B, FORWARD_ONLY, INTERLEAVED_1F1B, LOOPED_BFS, ZB_H1, ZB_H2, ZBV, V_HALF,
 V_MIN, DUALPIPE, DUALPIPEV, CHIMERA) = range(13)
# placement of each schedule id
PLACEMENT = np.array([LOOP, LOOP, LOOP, LOOP, LOOP, LOOP, LOOP, VSHAPE, VSHAPE, VSHAPE,
                      TWO_DIRECTIONS, VSHAPE, TWO_DIRECTIONS], np.int32)


@jit
def generate(sid, p, n, m, G):
    """Build schedule ``sid``: returns ``(ops, length, stage_device, route_first, route_last)``."""
    ops = new_ops(p, n, m)
    length = np.zeros(p, np.int32)
    if sid == GPIPE:
        gpipe(ops, length, p, n)
    elif sid == ONE_F_ONE_B:
        one_f_one_b(ops, length, p, n)
    elif sid == FORWARD_ONLY:
        forward_only(ops, length, p, n)
    elif sid == INTERLEAVED_1F1B:
        interleaved_1f1b(ops, length, p, n, m, G)
    elif sid == LOOPED_BFS:
        looped_bfs(ops, length, p, n, m)
    elif sid == ZB_H1 or sid == ZB_H2:
        zb_h(ops, length, p, n, 1 if sid == ZB_H1 else 2)
    elif sid == ZBV:
        zbv(ops, length, p, n)
    elif sid == V_HALF or sid == V_MIN:
        v_shape(ops, length, p, n, sid == V_HALF)
    elif sid == DUALPIPE:
        dualpipe(ops, length, p, n)
    elif sid == DUALPIPEV:
        dualpipev(ops, length, p, n)
    elif sid == CHIMERA:
        chimera(ops, length, p, n)
    stage_device = placement(PLACEMENT[sid], p, m)
    route_first, route_last = routes(PLACEMENT[sid], p, n, m)
    return ops, length, stage_device, route_first, route_last
