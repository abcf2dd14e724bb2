"""Op kinds and their text form.

An op is ``(kind, stage, microbatch)``; DualPipe's overlapped pair also carries the stage and
microbatch of its backward half. A schedule's ops live in one int32 block ``ops[field, r, k]``
(fields ``KIND, STAGE, MB, STAGE2, MB2``): op ``k`` of device ``r`` in execution order, padded
with ``PAD`` past the device's length. The text form is PyTorch pipelining's action form:
``0F0`` (stage 0, forward, microbatch 0), ``4I3``, ``5W2`` and ``(0F7;7B3)OVERLAP_F_B``.
"""

from __future__ import annotations

import re
from enum import IntEnum

import numpy as np

from .checks import ScheduleError, ScheduleTypeError


class Op(IntEnum):
    """Op kinds, stored as small integers in a schedule's ``kind`` matrix."""

    F = 0  #: forward
    B = 1  #: full backward (input grad and weight grad together)
    I = 2  #: input-grad backward of a split backward  # noqa: E741
    W = 3  #: weight-grad backward of a split backward
    FB = 4  #: overlapped pair: a forward and a full backward launched together


# For jitted code. NumPy scalars, not ints: Numba compiles a callee once per distinct literal
# int it is passed, so put(..., F, ...) and put(..., B, ...) would each compile put again.
F, B, I, W, FB = (np.int64(op) for op in Op)  # noqa: E741
PAD = -1  # an empty slot past a device's last op

# the op block's fields (its first axis)
KIND, STAGE, MB, STAGE2, MB2 = range(5)
OP_FIELDS = 5

# The kinds of a split backward, in the order one (stage, microbatch) runs them. The search
# keeps one row per kind in its cost and memory tables: SPLIT_KINDS[row] is the op code,
# SPLIT_ROW[code] the row (-1 for B and FB, which the search does not place).
ROW_F, ROW_I, ROW_W = 0, 1, 2
SPLIT_KINDS = np.array([F, I, W], np.int64)
SPLIT_ROW = np.array([ROW_F, -1, ROW_I, ROW_W, -1], np.int64)

_PLAIN = re.compile(r"^(\d+)([FBIW])(\d+)$", re.ASCII)  # (a Unicode digit is no op)
_PAIR = re.compile(r"^\((\d+)F(\d+);(\d+)B(\d+)\)OVERLAP_F_B$", re.ASCII)


def new_ops(p: int, n: int, m: int) -> np.ndarray:
    """An empty op block big enough for any schedule: at most 3 ops per (stage, microbatch)."""
    return np.full((OP_FIELDS, p, 3 * n * m), PAD, np.int32)


def format_op(kind: int, stage: int, mb: int, stage2: int = -1, mb2: int = -1) -> str:
    """Return the action text of one op, e.g. ``format_op(Op.F, 0, 3) == '0F3'``."""
    if kind == FB:
        return f"({stage}F{mb};{stage2}B{mb2})OVERLAP_F_B"
    return f"{stage}{Op(kind).name}{mb}"


def parse_op(token: str) -> tuple[int, int, int, int, int]:
    """Parse one action token into ``(kind, stage, mb, stage2, mb2)``.

    Raises
    ------
    ScheduleError
        If the token is not of the form ``<stage><F|B|I|W><mb>`` or
        ``(<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B`` (``ScheduleTypeError``: not a string).
    """
    if not isinstance(token, str):
        raise ScheduleTypeError(f"token must be a string such as '0F0' (got {token!r})")
    text = token.strip()
    plain = _PLAIN.match(text)
    if plain:
        stage, name, mb = plain.groups()
        return int(Op[name]), int(stage), int(mb), -1, -1
    pair = _PAIR.match(text)
    if pair:
        s1, j1, s2, j2 = (int(x) for x in pair.groups())
        return FB, s1, j1, s2, j2
    raise ScheduleError(
        f"op token must look like '0F0', '4I3', '5W2' or '(0F7;7B3)OVERLAP_F_B' (got {token!r})"
    )
