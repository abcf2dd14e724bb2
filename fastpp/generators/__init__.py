"""Schedule generators: one jitted function per schedule, reading like the paper's phases.

``generate`` dispatches on an integer schedule id so that sweeps can build schedules inside
Numba; ``registry`` holds the public names, their constraints and ``build_schedule``.
"""

import numpy as np

from .._jit import jit
from ._emit import LOOP, TWO_DIRECTIONS, VSHAPE, new_ops, placement, routes  # noqa: F401
from .classic import forward_only, gpipe, one_f_one_b
from .interleaved import interleaved_1f1b, looped_bfs

# schedule ids (the registry maps names to them)
GPIPE, ONE_F_ONE_B, FORWARD_ONLY, INTERLEAVED_1F1B, LOOPED_BFS = range(5)
# placement of each schedule id
PLACEMENT = np.array([LOOP, LOOP, LOOP, LOOP, LOOP], np.int32)


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
    stage_device = placement(PLACEMENT[sid], p, m)
    route_first, route_last = routes(PLACEMENT[sid], p, n, m)
    return ops, length, stage_device, route_first, route_last
