"""Jitted helpers every generator uses to write ops into an op block (``fastpp.ops.new_ops``).

Private to ``fastpp.generators``: the op block's layout is ``fastpp.ops``'s, placements are
``fastpp.placement``'s.
"""

from .._jit import jit

# B, F, I, W: re-exported, the generators take the op codes with the writers
from ..ops import FB, KIND, MB, MB2, STAGE, STAGE2, B, F, I, W  # noqa: F401

# the op block and the int64 arguments of the writers (see fastpp._jit.jit)
_WRITE = "int64(int32[:, :, ::1], int64, int64, int64, int64, int64)"


@jit(signature=_WRITE, internal=True)
def put(ops, r, k, kind, s, j):
    """Write op ``(kind, s, j)`` at slot ``k`` of device ``r``; return the next slot."""
    ops[KIND, r, k] = kind
    ops[STAGE, r, k] = s
    ops[MB, r, k] = j
    return k + 1


@jit(signature="int64(int32[:, :, ::1], int64, int64, int64, int64, int64, int64)",
     internal=True)
def put_pair(ops, r, k, s_f, j_f, s_b, j_b):
    """Write an overlapped pair: forward ``(s_f, j_f)`` with full backward ``(s_b, j_b)``."""
    ops[KIND, r, k] = FB
    ops[STAGE, r, k] = s_f
    ops[MB, r, k] = j_f
    ops[STAGE2, r, k] = s_b
    ops[MB2, r, k] = j_b
    return k + 1
