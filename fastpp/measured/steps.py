"""``MeasuredSteps``: several profiled steps of one schedule (``measure(..., steps=N)``), and what
they calibrate: ``costs()`` and the empirical ``noise()`` that predict any schedule's
step-time distribution with ``simulate(other, costs, noise=noise, samples=K)``.

Each op's measured time in step ``k`` is split into three factors:

- its ``Costs`` time (``costs()``: calibrated on the typical step, every per-op figure the
  median over the steps), which carries over to another schedule and another ``m``;
- the step's shared factor ``step_factors()[k]``: the median over the step's ops of measured
  over ``Costs`` time (the machine's load that step: a busy neighbour, the clock);
- the op's own factor, the rest (``op_ratios_by_kind()``), pooled per device and kind.

``Noise(empirical=steps)`` bootstraps both factors on another schedule's ``Costs`` times: each
sample one step's factor, each op one factor of its device and kind from that same step (a
moment that slowed some of a step's ops and not others stays in one sample).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

import numpy as np

from ..checks import ScheduleError, ScheduleTypeError, known_keywords
from ..costs import Costs
from ..noise import Noise
from ..ops import FB, B, F, I, W
from ..schedule import Schedule
from ..simulate import simulate
from .run import MeasuredRun, _used, read_torch_trace


def step_folders(folder) -> list[Path]:
    """The ``step0``, ``step1``, ... folders ``measure(..., steps=N)`` writes in ``folder``,
    in step order (a folder named otherwise is not one of them)."""
    found = (d for d in Path(folder).glob("step*") if re.fullmatch(r"step[0-9]+", d.name))
    return sorted(found, key=lambda d: int(d.name[4:]))


@known_keywords("read_steps")
def read_steps(folder) -> MeasuredSteps:
    """The steps ``measure(..., steps=N)`` (``--steps N``) wrote in ``folder``, read back.

    Parameters
    ----------
    folder : str or os.PathLike
        The run's ``out`` folder: ``step0``, ``step1``, ... each holding rank traces.

    Returns
    -------
    MeasuredSteps

    Raises
    ------
    ScheduleError
        Naming the folder where it holds no step with traces, or as ``read_torch_trace``
        for a step.
    """
    if not isinstance(folder, str | os.PathLike):
        raise ScheduleTypeError(f"folder must be a path to measure's run folder (got "
                                f"{type(folder).__name__})")
    steps = [d for d in step_folders(folder) if any(d.glob("rank*_trace.json*"))]
    if not steps:
        raise ScheduleError(f"folder must hold measure's step0, step1, ... folders of rank "
                            f"traces (got {str(folder)!r}, which holds none)")
    return MeasuredSteps([read_torch_trace(d) for d in steps])


# a kind the calibration schedule lacks takes the factors of these kinds (by op code)
_STAND_INS = {F: (F,), B: (B, I, W), I: (I, B, W), W: (W, B, I), FB: (FB, F)}


class MeasuredSteps(tuple):
    """The ``MeasuredRun`` of each profiled step of one schedule, in order (a tuple: its
    cached figures stay those of its steps). ``MeasuredSteps(runs)`` takes the steps' runs, a
    sequence of ``MeasuredRun`` (``read_steps`` reads them from a ``measure --steps`` folder).

    Raises
    ------
    ScheduleError
        Not a sequence of runs, no step, or steps that ran different orders.
    """

    def __new__(cls, runs):
        if isinstance(runs, str | bytes) or not isinstance(runs, Iterable):
            raise ScheduleTypeError(f"runs must be a sequence of fastpp.MeasuredRun objects "
                                    f"(got {type(runs).__name__})")
        self = super().__new__(cls, runs)
        if not self:
            raise ScheduleError("runs must hold at least one MeasuredRun (got none)")
        for k, run in enumerate(self):
            if not isinstance(run, MeasuredRun):
                raise ScheduleTypeError(f"runs must hold MeasuredRun objects (got "
                                        f"{type(run).__name__} at step {k})")
            if run.schedule.tokens() != self[0].schedule.tokens():
                raise ScheduleError(f"step {k} ran another order than step 0 "
                                    f"({run.schedule!r} against {self[0].schedule!r})")
        return self

    def __repr__(self) -> str:
        s = self[0].schedule
        return (f"MeasuredSteps({len(self)} steps, p={s.p}, n={s.n}, m={s.m}, makespan p50="
                f"{np.median(self.makespans):.6g} s)")

    @property
    def schedule(self):
        """The schedule every step ran."""
        return self[0].schedule

    @property
    def makespans(self) -> np.ndarray:
        """Each step's measured makespan (seconds)."""
        return np.array([run.makespan for run in self])

    @cached_property
    def typical(self) -> MeasuredRun:
        """The typical step: a ``MeasuredRun`` whose every per-op figure (times, splits,
        ``durations``, ``operators``, ``injected``), ``probe``, ``probe_fixed`` and
        ``latency`` is the median over the steps."""
        first = self[0]
        median = {name: np.median(np.stack([getattr(run, name) for run in self]), axis=0)
                  for name in ("start", "end", "release", "wait", "compute", "overhead",
                               "stall", "durations", "handed", "operators", "weight_operators",
                               "offsets", "probe", "probe_fixed", "injected")}
        return MeasuredRun(first.schedule, median["start"], median["end"], median["release"],
                           median["wait"], median["compute"], median["overhead"],
                           median["stall"], median["durations"], median["handed"],
                           float(np.median([run.latency for run in self])), median["offsets"],
                           max(run.offset_residual for run in self), first.files, first.hosts,
                           median["operators"], median["weight_operators"], median["probe"],
                           median["probe_fixed"], median["injected"])

    def costs(self, per: str = "device", statistic: str = "median",
              schedule: Schedule | None = None) -> Costs:
        """``MeasuredRun.costs`` of the typical step: for any schedule and any ``m``, or moved
        to ``schedule``'s stages by the layers they hold.

        Parameters
        ----------
        per : {"device", "stage"}
        statistic : {"median", "mean"}
        schedule : Schedule, optional
            As for ``MeasuredRun.costs``.

        Returns
        -------
        Costs
        """
        return self.typical.costs(per=per, statistic=statistic, schedule=schedule)

    @cached_property
    def _factors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(step factor per step, op factor [steps, p, L])`` against ``costs()``."""
        s = self.schedule
        used = _used(s)
        base = simulate(s, self.costs(), noise=Noise(cov=0.0), samples=1).op_times()[..., 0]
        measured = np.stack([run.durations for run in self])
        ratio = np.where(used, measured / np.where(used, base, 1.0), 1.0)
        step = np.median(ratio[:, used], axis=1)
        if not np.all(step > 0):  # (each op's factor is over its step's: 0/0)
            j = int(np.flatnonzero(~(step > 0))[0])
            raise ScheduleError(f"measured steps must have ops that take time: step {j}'s "
                                f"median op took {step[j]:g} times its Costs time")
        return step, ratio / step[:, None, None]

    def step_factors(self) -> np.ndarray:
        """Per step: the median over its ops of the measured time over the ``Costs`` time
        (the load the whole step saw).

        Returns
        -------
        ndarray, shape (steps,)
        """
        return self._factors[0].copy()

    def op_ratios_by_kind(self) -> list[list[np.ndarray]]:
        """Per device, per op code (F, B, I, W, FB): every step's factors of its ops of that
        kind, measured time over ``Costs`` time over the step's factor. A kind this schedule
        lacks takes the device's factors of the first kind it has of its stand-ins (``I``,
        ``W``: ``B``'s, then ``I`` or ``W``'s; ``B``: ``I``'s, then ``W``'s; ``FB``: ``F``'s).

        Returns
        -------
        list of list of ndarray
            ``[r][k]``: device ``r``'s factors of kind ``k``.
        """
        s = self.schedule
        ratio = self._factors[1]
        out = []
        for r in range(s.p):
            kinds = s.kind[r, : s.length[r]]
            mine = {k: ratio[:, r, : s.length[r]][:, kinds == k].ravel() for k in range(5)}
            row = []
            for k in range(5):
                pool = next((mine[x] for x in _STAND_INS[k] if mine[x].size), None)
                if pool is None:
                    pool = np.concatenate([mine[x] for x in _STAND_INS[k]])
                row.append(pool)
            out.append(row)
        return out

    def op_times_by_kind(self) -> list[list[np.ndarray]]:
        """Per device, per op code: the measured durations of its ops of that kind over
        every step.

        Returns
        -------
        list of list of ndarray
            ``[r][k]``: device ``r``'s durations of kind ``k``.
        """
        per_step = [run.op_times_by_kind() for run in self]
        return [[np.concatenate([times[r][k] for times in per_step]) for k in range(5)]
                for r in range(self.schedule.p)]

    def noise(self) -> Noise:
        """The empirical noise of these steps, ``Noise(empirical=self)``: with ``costs()`` it
        predicts another schedule's step-time distribution on the same ``p``.

        Returns
        -------
        Noise
        """
        return Noise(empirical=self)


MeasuredSteps.__new__ = known_keywords("MeasuredSteps")(MeasuredSteps.__new__)
