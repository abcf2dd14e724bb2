"""Which op waits for which: SCHEDULES.md's dependency rule, op by op, in plain Python.

``fastpp.kernels.timeline`` states the same rule inside its loop (as ``f_ready`` and
``g_ready``); this is its readable twin for the places that need the edges themselves rather
than the times: the deadlock report, the trace's hand-off arrows, the tests' synthetic
traces, a measured run's hand-offs and the compiled schedule (``edges``, every op at once).
Each function takes a ``fastpp.Schedule`` (not imported: ``Schedule.compiled`` uses this
module). An op's inputs are named by what they are, not by the op that makes them:

- ``(Op.F, s, j)``: the output of the forward of stage ``s``, microbatch ``j``;
- ``(Op.B, s, j)``: the input gradient of stage ``s``, microbatch ``j`` (made by its ``B``,
  its ``I``, or the backward half of an overlapped pair).

A forward needs the forward before it on the microbatch's route; a ``B`` or ``I`` needs the
gradient of the stage after it (or, at the end of the route, its own forward); a ``W`` needs
its own stage's input gradient. An overlapped pair needs both halves' inputs.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .checks import ScheduleError, ScheduleTypeError
from .ops import FB, B, F, I, W


def inputs(schedule, r: int, k: int) -> list[tuple[int, int, int]]:
    """What op ``k`` of device ``r`` waits for, as ``(Op.F, stage, mb)`` (a forward's output)
    or ``(Op.B, stage, mb)`` (an input gradient, from a ``B`` or an ``I``)."""
    kind, s, j, s2, j2 = (int(x) for x in schedule.ops[:, r, k])
    needs = []
    if kind in (F, FB) and s > schedule.route_first[j]:
        needs.append((F, s - 1, j))
    if kind in (B, I, FB):
        sb, jb = (s2, j2) if kind == FB else (s, j)
        needs.append((B, sb + 1, jb) if sb < schedule.route_last[jb] else (F, sb, jb))
    if kind == W:
        needs.append((B, s, j))
    return needs


def producers(schedule) -> dict[tuple[int, int, int], tuple[int, int]]:
    """Where each output of ``inputs`` is made: ``(Op.F or Op.B, stage, mb) -> (r, k)``."""
    where = {}
    for r in range(schedule.p):
        for k in range(schedule.length[r]):
            kind, s, j, s2, j2 = (int(x) for x in schedule.ops[:, r, k])
            if kind in (F, FB):
                where[(F, s, j)] = (r, k)
            if kind in (B, I):
                where[(B, s, j)] = (r, k)
            if kind == FB:
                where[(B, s2, j2)] = (r, k)
    return where


def edges(schedule) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rule of ``inputs`` for every op at once, as arrays.

    Ops are numbered device by device in position order (op ``k`` of device ``r`` is number
    ``length[:r].sum() + k``). Returns ``(device, position, producer)``: the device and
    position of each op, and ``producer[i, 0]`` the number of the op that made op ``i``'s
    forward input (a forward's or an overlapped pair's), ``producer[i, 1]`` the one that made its
    gradient input (a ``B``'s, ``I``'s or ``W``'s, or an overlapped pair's backward half); ``-1``
    where it has none. A ``B`` or ``I`` at the end of its route waits for its own forward.
    """
    if not callable(getattr(schedule, "_check", None)):  # Schedule imports this module
        raise ScheduleTypeError(f"schedule must be a fastpp.Schedule (got "
                                f"{type(schedule).__name__})")
    schedule._check()
    used = np.arange(schedule.ops.shape[2]) < schedule.length[:, None]
    rs, ks = np.nonzero(used)
    producer = np.empty((len(rs), 2), np.int64)
    kernels.producers(schedule.ops, schedule.length, schedule.V, schedule.n,
                      schedule.route_first, schedule.route_last, producer)
    return rs.astype(np.int64), ks.astype(np.int64), producer


def deadlock_error(schedule, pointer: np.ndarray) -> ScheduleError:
    """The error for a schedule that deadlocked with device ``r`` stuck at ``pointer[r]``
    (``kernels.timeline``'s finding): each stuck op, what it waits for, and the grid."""
    where = producers(schedule)
    lines = []
    for r in range(schedule.p):
        k = int(pointer[r])
        if k >= schedule.length[r]:
            continue
        pending = [where[x] for x in inputs(schedule, r, k)
                   if where[x][1] >= pointer[where[x][0]]]
        text = ", ".join(f"{schedule.token(*at)} on device {at[0]}" for at in pending)
        lines.append(f"device {r} is stuck at op {k} ({schedule.token(r, k)}) waiting for "
                     f"{text or 'nothing'}")
    marks = {r: int(pointer[r]) for r in range(schedule.p)}
    return ScheduleError(f"schedule {schedule.name!r} deadlocks:\n  " + "\n  ".join(lines)
                         + "\n" + schedule.grid(marks))
