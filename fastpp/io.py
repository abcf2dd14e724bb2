"""PyTorch's schedule CSV (compute-only format), as ``torch.distributed.pipelining`` and
torchtitan read and write it: one row per rank, one action per cell (``0F0``, ``4I3``,
``5W2``, ``(0F7;7B3)OVERLAP_F_B``), an empty cell for an idle step."""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

import numpy as np

from .checks import (
    ScheduleError,
    ScheduleTypeError,
    atomic_write,
    file_path,
    instance,
    known_keywords,
    optional_text,
    positive_int,
    writable,
)
from .generators.registry import SCHEDULES
from .ops import FB, F, parse_op
from .placement import CODES, LOOP, VSHAPE, routes, stage_map
from .schedule import MAX_OPS, Schedule

_COMMS = re.compile(r"^\d+(SEND|RECV|UNSHARD|RESHARD|REDUCE_GRAD)", re.ASCII)


@known_keywords("read_torch_csv")
def read_torch_csv(path, *, n: int | None = None, placement: str | None = None,
                   name: str | None = None) -> Schedule:
    """Read a schedule from PyTorch's compute-only CSV.

    Parameters
    ----------
    path : path
        The CSV file: row ``r`` lists rank ``r``'s actions in order.
    n : int, optional
        Microbatches (default: the largest microbatch id + 1).
    placement : str, optional
        ``"loop"``, ``"v"``, ``"two-directions"`` or a registered schedule's name: the stage
        map and routes to use. Default: the stage map PyTorch infers (each stage on the rank
        whose row holds it), one route through all stages and ``m = V // p``.
        Two-direction schedules (DualPipe, Chimera) need it: the file does not say which
        microbatches run the second model copy.
    name : str, optional
        The schedule's name (default: the file's stem).

    Returns
    -------
    Schedule

    Raises
    ------
    ScheduleError
        Naming the row and column of a malformed cell, or what the schedule breaks.
    """
    if n is not None:
        n = positive_int(n, "n")
    if placement is not None and not isinstance(placement, str):
        raise ScheduleTypeError(f"placement must be a string: one of {sorted(CODES)} or a "
                                f"schedule name (got {placement!r})")
    name = optional_text(name, "name")
    if not isinstance(path, str | os.PathLike) or not str(path):
        raise ScheduleTypeError(f"path must be a file path (got {path!r})")
    path = Path(path)
    try:
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ScheduleError(f"{path}: cannot be read as CSV ({err})") from None
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()  # a trailing blank line is no rank
    if not rows:
        raise ScheduleError(f"{path}: must hold at least one row (one per rank); it is empty")
    ops = []  # every action, parsed once
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            if not cell.strip():
                continue
            if _COMMS.match(cell.strip()):
                raise ScheduleError(f"{path}: row {r + 1}, column {c + 1}: {cell.strip()!r} is "
                                    "a communication action; fastpp reads the compute-only "
                                    "format (dump it with format='compute_only')")
            try:
                ops.append(parse_op(cell))
            except ValueError as err:
                raise ScheduleError(f"{path}: row {r + 1}, column {c + 1}: {err}") from None
    name = name or path.stem
    p = len(rows)
    stages = 1 + max(op[i] for op in ops for i in (1, 3)) if ops else 0
    most = 1 + max(op[i] for op in ops for i in (2, 4)) if ops else 1  # the file's microbatches
    if n is not None and n < most:  # (else blamed on the file, or on its placement)
        raise ScheduleError(f"n must cover the microbatches of {path}: at least {most} (got "
                            f"n={n}; left out, the file's count is taken)")
    if placement is None:
        try:
            return Schedule.from_tokens(rows, n=n, name=name)
        except ScheduleError as err:
            if stages != 2 * p:
                raise ScheduleError(f"{path}: {err}") from None
            raise ScheduleError(f"{path}: {err}; if this is a two-direction schedule (DualPipe, "
                                "Chimera), pass placement='two-directions'") from None
    code = _placement_code(placement)
    if n is None:
        n = most
    m = {LOOP: max(1, -(-stages // p)), VSHAPE: 2}.get(code, 1)
    if p * m * n > MAX_OPS:  # (refused before a map of every stage a stray id makes is built)
        raise ScheduleError(f"{path}: V*n must be at most {MAX_OPS} (got V={p * m}, n={n})")
    first, last = routes(code, p, n, m)
    return Schedule.from_tokens(rows, stage_map(code, p, m), n=n, m=m, name=name,
                                routes=np.stack([first, last], axis=1))


def _placement_code(placement: str) -> int:
    if placement in SCHEDULES:
        placement = SCHEDULES[placement].placement
    if placement not in CODES:
        raise ScheduleError(f"placement must be one of {sorted(CODES)} or a schedule name "
                            f"(got {placement!r})")
    return CODES[placement]


@known_keywords("in_loss_order")
def in_loss_order(schedule: Schedule) -> Schedule:
    """``schedule`` with its microbatches renamed in the order its last stage runs their
    forwards (itself where they already run in order), as PyTorch's runtime needs it.

    The runtime appends each microbatch's loss as the last stage's forward makes it and reads
    it back by the microbatch's number: a last stage that runs microbatch 4's forward before
    3's takes another microbatch's loss for each backward, or fails where the number is not
    there yet (``optimize`` can find such orders). The microbatches are alike, so the renamed
    schedule runs the same ops in the same order, with the same dependencies.
    ``python -m fastpp optimize --csv`` writes it, and ``fastpp.measured`` runs it.

    Parameters
    ----------
    schedule : Schedule

    Returns
    -------
    Schedule
    """
    instance(schedule, Schedule, "schedule", "fastpp.Schedule")
    schedule._check()  # (its arrays may have been written into since it was made)
    last = schedule.V - 1
    device = int(schedule.stage_to_device[last])
    ops = schedule.ops[:, device, :schedule.length[device]]
    forward = ((ops[0] == F) | (ops[0] == FB)) & (ops[1] == last)
    seen = ops[2][forward]
    if seen.size != schedule.n or np.array_equal(seen, np.arange(schedule.n)):
        return schedule  # (in order; or routes that end elsewhere, which this does not name)
    name = np.empty(schedule.n, np.int64)
    name[seen] = np.arange(seen.size)
    renamed = schedule.ops.copy()
    used = np.arange(renamed.shape[2]) < schedule.length[:, None]
    renamed[2][used] = name[renamed[2][used]]
    pairs = used & (renamed[0] == FB)
    renamed[4][pairs] = name[renamed[4][pairs]]
    routes = np.empty((schedule.n, 2), np.int64)
    routes[name] = np.stack([schedule.route_first, schedule.route_last], axis=1)
    return Schedule(renamed, schedule.length, schedule.stage_to_device, n=schedule.n,
                    m=schedule.m, name=schedule.name, routes=routes,
                    forward_only=schedule.forward_only)


@known_keywords("write_torch_csv")
def write_torch_csv(schedule: Schedule, path) -> Path:
    """Write ``schedule`` as PyTorch's compute-only CSV (one row per device, no idle cells),
    as it is: for PyTorch's runtime, write ``in_loss_order(schedule)``.

    PyTorch 2.13's loader (``PipelineScheduleMulti._load_csv``) checks that each stage runs
    every microbatch's forward and backward once: it refuses the files of forward-only
    schedules ("expected ... total backwards") and of two-direction ones (DualPipe, Chimera:
    each direction feeds half the microbatches), which fastpp itself reads back
    (``read_torch_csv``).

    Parameters
    ----------
    schedule : Schedule
    path : path
        The CSV file to write.

    Returns
    -------
    Path
    """
    instance(schedule, Schedule, "schedule", "fastpp.Schedule")
    path = file_path(path)
    rows = schedule.tokens()

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as handle:
            csv.writer(handle).writerows(rows)

    with writable(path):
        atomic_write(path, write)
    return path
