"""Schedule generators: one jitted function per schedule, reading like the paper's phases.

Every generator fills an op block from ``_emit.new_ops`` and the per-device lengths, with the
signature ``(ops, length, p, n, m, G)``. ``registry`` gives them their public names and
constraints; ``fastpp.batch`` dispatches on the integer ids below inside Numba for sweeps.
"""

import numpy as np

from ._emit import LOOP, TWO_DIRECTIONS, VSHAPE
from .chimera import chimera
from .classic import forward_only, gpipe, one_f_one_b
from .dualpipe import dualpipe, dualpipev
from .interleaved import interleaved_1f1b, looped_bfs
from .vshape import v_half, v_min
from .zero_bubble import zb_h1, zb_h2, zbv

# schedule ids, in the registry's order, with each one's generator and placement
GENERATORS = (gpipe, one_f_one_b, interleaved_1f1b, looped_bfs, forward_only, zb_h1, zb_h2, zbv,
              v_half, v_min, dualpipe, dualpipev, chimera)
(GPIPE, ONE_F_ONE_B, INTERLEAVED_1F1B, LOOPED_BFS, FORWARD_ONLY, ZB_H1, ZB_H2, ZBV, V_HALF,
 V_MIN, DUALPIPE, DUALPIPEV, CHIMERA) = range(len(GENERATORS))
PLACEMENT = np.array([LOOP, LOOP, LOOP, LOOP, LOOP, LOOP, LOOP, VSHAPE, VSHAPE, VSHAPE,
                      TWO_DIRECTIONS, VSHAPE, TWO_DIRECTIONS], np.int32)
