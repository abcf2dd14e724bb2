"""The teaching chapter's API (``Device``, ``gpipe_schedule``, ``onef_oneb_schedule``,
``compute_theoretical_peak``), running on fastpp's engine.

The chapter simulated serially and reported the serial total (every op and hand-off added up),
which cannot compare schedules' speed; the events here carry the real parallel times as well.
One correction: the chapter's "1F1B peak = p-1" counts the activations held *between*
steady-state pairs. The forward of each pair allocates before the backward frees, so the true
peak on device 0 is ``min(n, p)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .checks import (
    MAX_INT,
    Frozen,
    ScheduleError,
    ScheduleTypeError,
    instance,
    known_keywords,
    number,
    positive_int,
)
from .costs import Costs
from .generators.registry import build_schedule
from .ops import Op
from .simulate import simulate
from .theory import MAX_P, peak_live


class Device(Frozen):
    """One pipeline stage as the chapter models it (checked when built, then unchanged: a
    time set later would reach the schedule unchecked).

    Parameters
    ----------
    name : str
        Label, e.g. ``"GPU0"``.
    layers : sequence
        The layers the device holds (kept for reports; times are given directly).
    comm_latency : float
        Latency of the link to the next device (both directions), >= 0.
    fwd_time, bwd_time : float
        Forward and full backward time of one microbatch on this device, > 0 (as
        ``fastpp.Costs`` takes them: a device that takes no time holds no layer).
    """

    def __init__(self, name, layers, comm_latency=0.01, fwd_time=0.02, bwd_time=0.04):
        instance(name, str, "name", "string")
        if isinstance(layers, str) or not isinstance(layers, Sequence | np.ndarray):
            raise ScheduleTypeError(f"layers must be a sequence (got {type(layers).__name__})")
        self._freeze(name=name, layers=list(layers),
                     comm_latency=number(comm_latency, "comm_latency"),
                     fwd_time=number(fwd_time, "fwd_time", strict=True),
                     bwd_time=number(bwd_time, "bwd_time", strict=True))

    def __repr__(self) -> str:
        return (f"Device({self.name!r}, layers={len(self.layers)}, "
                f"fwd={self.fwd_time}, bwd={self.bwd_time}, comm={self.comm_latency})")


class Event(NamedTuple):
    """One op: ``start``/``end`` on the parallel clock, ``serial_time`` on the chapter's clock
    (the running serial total when the op and its hand-off are done)."""

    device: str
    op: str  # "F" or "B"
    microbatch: int
    start: float
    end: float
    serial_time: float


def run(schedule_type: str, devices, num_microbatches: int):
    """Simulate ``"gpipe"`` or ``"1f1b"`` over the chapter's devices.

    Returns
    -------
    serial_total : float
        The chapter's serial time: every op and every cross-device hand-off added up.
    events : list of Event
        Every op, ordered by its parallel start time.
    result : fastpp.Result
        The full simulation (wall clock, bubbles, memory).
    """
    name = _schedule_name(schedule_type)
    num_microbatches = positive_int(num_microbatches, "num_microbatches")
    given = devices
    devices = list(devices) if isinstance(devices, Sequence) else []
    if not devices or not all(isinstance(d, Device) for d in devices):
        got = repr(devices) if isinstance(given, Sequence) else f"a {type(given).__name__}"
        raise ScheduleError(f"devices must be a non-empty list of Device (got {got})")
    costs = Costs(f=[d.fwd_time for d in devices], b=[d.bwd_time for d in devices],
                  comm=[d.comm_latency for d in devices])
    result = simulate(build_schedule(name, len(devices), num_microbatches), costs)
    sched, p = result.schedule, len(devices)
    order = sorted((result.start[r, k], r, k) for r in range(p) for k in range(sched.length[r]))
    clock, events = 0.0, []
    for start, r, k in order:
        kind = Op(sched.kind[r, k])
        clock += result.end[r, k] - start
        # the link between devices r and r+1 carries device r's latency, both ways
        if kind == Op.F and r < p - 1:
            clock += devices[r].comm_latency
        elif kind == Op.B and r > 0:
            clock += devices[r - 1].comm_latency
        events.append(Event(devices[r].name, kind.name, int(sched.mb[r, k]), float(start),
                            float(result.end[r, k]), clock))
    return result.serial_time, events, result


@known_keywords("gpipe_schedule")
def gpipe_schedule(devices, num_microbatches):
    """Run GPipe over ``devices``; return ``(serial_total, events)`` as the chapter does.

    Parameters
    ----------
    devices : list of Device
        The pipeline's devices, in stage order.
    num_microbatches : int
        ``n``.

    Returns
    -------
    serial_total : float
        The chapter's serial time: every op and every cross-device hand-off added up.
    events : list of Event
        Every op, ordered by its parallel start time.

    Raises
    ------
    ScheduleError
        If ``devices`` is not a non-empty list of ``Device`` or ``num_microbatches`` not a
        positive integer.
    """
    total, events, _ = run("gpipe", devices, num_microbatches)
    return total, events


@known_keywords("onef_oneb_schedule")
def onef_oneb_schedule(devices, num_microbatches):
    """Run 1F1B over ``devices``; return ``(serial_total, events)`` as the chapter does.

    Parameters
    ----------
    devices : list of Device
        The pipeline's devices, in stage order.
    num_microbatches : int
        ``n``.

    Returns
    -------
    serial_total : float
        The chapter's serial time: every op and every cross-device hand-off added up.
    events : list of Event
        Every op, ordered by its parallel start time.

    Raises
    ------
    ScheduleError
        If ``devices`` is not a non-empty list of ``Device`` or ``num_microbatches`` not a
        positive integer.
    """
    total, events, _ = run("1f1b", devices, num_microbatches)
    return total, events


@known_keywords("compute_theoretical_peak")
def compute_theoretical_peak(schedule_type, num_microbatches, num_stages):
    """Most microbatch activations one device holds at once (device 0).

    GPipe: ``n``. 1F1B: ``min(n, p)`` (the chapter's ``p-1`` is the count between
    steady-state pairs, one less than the true peak).

    Parameters
    ----------
    schedule_type : str
        ``"gpipe"`` or ``"1f1b"`` (also ``"1F1B"``, ``"one_f_one_b"`` and the like).
    num_microbatches, num_stages : int
        ``n`` and ``p``.

    Returns
    -------
    int

    Raises
    ------
    ScheduleError
        (a ``ValueError``) For a schedule type other than ``"gpipe"`` or ``"1f1b"``, or a
        count that is not a positive integer.
    """
    name = _schedule_name(schedule_type)
    if positive_int(num_stages, "num_stages") > MAX_P:
        raise ScheduleError(f"num_stages must be at most {MAX_P:,} (got {num_stages})")
    return int(peak_live(name, num_stages,
                         positive_int(num_microbatches, "num_microbatches", MAX_INT))[0])


def _schedule_name(schedule_type) -> str:
    kind = str(schedule_type).lower().replace("_", "").replace("-", "")
    names = {"gpipe": "gpipe", "1f1b": "1f1b", "onefoneb": "1f1b"}
    if kind not in names:
        raise ScheduleError(f"schedule_type must be 'gpipe' or '1f1b' (got {schedule_type!r})")
    return names[kind]


Device.__init__ = known_keywords("Device")(Device.__init__)
