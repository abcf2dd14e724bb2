"""Jitted helpers every generator uses: writing ops, placements and routes.

A schedule's ops live in one int32 block ``ops[field, r, k]`` (fields below): op ``k`` of
device ``r`` in execution order, padded with ``PAD`` past ``length[r]``.
"""

import numpy as np

from .._jit import jit
from ..ops import FB, PAD, B, F, I, W  # noqa: F401  (re-exported for the generator modules)

KIND, STAGE, MB, STAGE2, MB2 = 0, 1, 2, 3, 4
N_FIELDS = 5

# placements (virtual stage -> device), SCHEDULES.md section 1
LOOP, VSHAPE, TWO_DIRECTIONS = 0, 1, 2


# the op block and the int64 arguments of the writers (see fastpp._jit.jit)
_WRITE = "int64(int32[:, :, ::1], int64, int64, int64, int64, int64)"


@jit(signature=_WRITE)
def put(ops, r, k, kind, s, j):
    """Write op ``(kind, s, j)`` at slot ``k`` of device ``r``; return the next slot."""
    ops[KIND, r, k] = kind
    ops[STAGE, r, k] = s
    ops[MB, r, k] = j
    return k + 1


@jit(signature="int64(int32[:, :, ::1], int64, int64, int64, int64, int64, int64)")
def put_pair(ops, r, k, s_f, j_f, s_b, j_b):
    """Write an overlapped pair: forward ``(s_f, j_f)`` with full backward ``(s_b, j_b)``."""
    ops[KIND, r, k] = FB
    ops[STAGE, r, k] = s_f
    ops[MB, r, k] = j_f
    ops[STAGE2, r, k] = s_b
    ops[MB2, r, k] = j_b
    return k + 1


@jit
def placement(kind, p, m):
    """Device of each virtual stage for a placement kind (loop, V or two directions)."""
    if kind == TWO_DIRECTIONS:
        stage_device = np.empty(2 * p, np.int32)
        for s in range(p):
            stage_device[s] = s  # first copy runs down the devices
            stage_device[p + s] = p - 1 - s  # second copy runs up
        return stage_device
    stage_device = np.empty(p * m, np.int32)
    for s in range(p * m):
        if kind == VSHAPE and s >= p:
            stage_device[s] = 2 * p - 1 - s
        else:
            stage_device[s] = s % p
    return stage_device


@jit
def routes(kind, p, n, m):
    """First and last virtual stage of each microbatch's route."""
    first = np.zeros(n, np.int32)
    last = np.full(n, p * m - 1, np.int32)
    if kind == TWO_DIRECTIONS:
        for j in range(n // 2, n):  # the second half of the microbatches runs the second copy
            first[j] = p
            last[j] = 2 * p - 1
        for j in range(n // 2):
            last[j] = p - 1
    return first, last


@jit
def new_ops(p, n, m):
    """An empty op block big enough for any schedule: at most 3 ops per (stage, microbatch)."""
    return np.full((N_FIELDS, p, 3 * n * m), PAD, np.int32)
