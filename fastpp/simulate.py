"""``simulate(schedule, costs) -> Result``: the public face of the kernels."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from . import kernels
from .checks import (
    ScheduleError,
    ScheduleTypeError,
    index,
    instance,
    known_keywords,
    number_array,
    positive_int,
)
from .compiled import BY_DEVICE, point
from .costs import MAX_TIME, Costs, StageCosts, stage_view
from .dependencies import deadlock_error
from .montecarlo import SIMULATE_SAMPLES, check_noise, run
from .schedule import Schedule


class Result:
    """Timeline and memory of one simulated schedule (read-only).

    Arrays indexed ``[r, k]`` follow the schedule's op matrices (op ``k`` of device ``r``);
    slots past ``schedule.length[r]`` hold nothing meaningful.

    Attributes
    ----------
    schedule, costs :
        What was simulated.
    start, end : ndarray, shape (p, L)
        Start and end time of every op.
    makespan : float
        Last end minus first start over all devices.
    bubble_ratio : float
        Makespan metric: ``1 - sum(busy) / (p * makespan)``.
    span_bubble_ratio : float
        Span metric (Zero Bubble section 5.3): ``1 - mean(busy) / max(span)``.
    busy, span : ndarray, shape (p,)
        Per device: time spent running ops; last end minus first start.
    serial_time : float
        The teaching chapter's serial total: every op and every cross-device hand-off added up.
    mem_start, mem_end : ndarray, shape (p, L)
        Activation memory (units of ``M_B``) on the device just after op ``k`` starts / ends;
        computed when first read.
    live_start, live_end : ndarray, shape (p, L)
        Live (stage, microbatch) pairs, PyTorch's liveness count, at the same moments.
    durations : ndarray, shape (p, L), or None
        The per-op compute times simulated, when given to ``simulate``.
    peak_activations : ndarray, shape (p,)
        Per device: the largest activation memory held, in units of ``M_B`` (or bytes).
    peak_live : ndarray of int64, shape (p,)
        Per device: the largest number of live (stage, microbatch) pairs.
    stage_costs : StageCosts
        ``costs`` expanded to the schedule's stages.
    """

    # a result is built on every simulate: its fields are set at once (by simulate, or from
    # one dict), and those a caller may not read (every op's times in the schedule's layout,
    # the memory) when read
    durations = None  # (set by simulate when given)

    def __init__(self, fields: dict):
        self.__dict__.update(fields)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Result is read-only (cannot set {name!r})")

    def __delattr__(self, name):
        raise AttributeError(f"a Result is read-only (cannot delete {name!r})")

    def __getattr__(self, name: str):
        # reached only for a name not in __dict__: a field made when first read, then kept
        # (functools.cached_property takes a lock on every read: a fifth of a point's time)
        make = _MADE_WHEN_READ.get(name)
        if make is None:
            raise AttributeError(f"'Result' object has no attribute {name!r}")
        value = make(self)
        for arr in value if isinstance(value, tuple) else (value,):
            if isinstance(arr, np.ndarray):  # (made here and held by nothing else)
                arr.setflags(write=False)
        self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return (f"Result(schedule={self.schedule!r}, makespan={self.makespan!r}, "
                f"bubble_ratio={self.bubble_ratio!r}, "
                f"span_bubble_ratio={self.span_bubble_ratio!r})")

    def _make_stage_costs(self) -> StageCosts:
        return stage_view(self._rows)

    def _make_serial_time(self) -> float:
        return float(self.busy.sum() + self._latency)

    def _make_start(self) -> np.ndarray:
        return self._layout(0)

    def _make_end(self) -> np.ndarray:
        return self._layout(1)

    def _layout(self, row: int) -> np.ndarray:
        """Row ``row`` (start, end) of a point's times, from the compiled order to ``[r, k]``."""
        built = self._built
        plan, device_first = built.point_plan()[0], built.device_first
        p, S, N = len(device_first) - 1, plan.shape[1], device_first[-1]
        times = self._sums.reshape(-1)[4 * p + row * S: 4 * p + (row + 1) * S]
        out = np.zeros(built.shape)
        device = np.repeat(np.arange(p), np.diff(device_first))
        position = np.arange(N) - device_first[device]
        out[device, position] = times[plan[BY_DEVICE, :N]]
        return out

    # (views of the read-only _sums: read-only too, at no cost a read)
    @property
    def busy(self) -> np.ndarray:
        return self._sums[0]

    @property
    def span(self) -> np.ndarray:
        return self._sums[1]

    @property
    def peak_activations(self) -> np.ndarray:
        return self._sums[2]

    def _make_memory(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        # the arrays that ran (the schedule's own may be written into since): a plan's, or
        # the copy Schedule._check kept
        if "_built" in self.__dict__:
            (ops, length), forward_only = self._built.arrays[:2], self._built.attributes[
                "forward_only"]
        else:
            ops, length, forward_only = (self._checked[i] for i in (0, 1, 7))
        shape = ops.shape[1:]
        arrays = (np.zeros(shape), np.zeros(shape), np.zeros(shape, np.int64),
                  np.zeros(shape, np.int64))
        # the writable rows: the read-only stage_costs would be another Numba specialisation
        kernels.memory(ops, length, self._rows[kernels.UNIT], self._rows[kernels.GAMMA],
                       forward_only, *arrays)
        return arrays

    @property
    def mem_start(self) -> np.ndarray:
        return self._memory[0]

    @property
    def mem_end(self) -> np.ndarray:
        return self._memory[1]

    @property
    def live_start(self) -> np.ndarray:
        return self._memory[2]

    @property
    def live_end(self) -> np.ndarray:
        return self._memory[3]

    @property
    def idle(self) -> np.ndarray:
        """Per device: ``makespan - busy``."""
        return self.makespan - self.busy

    @property
    def throughput(self) -> float:
        """Microbatches per unit time: ``n / makespan`` (infinite where ``durations`` of 0
        take no time)."""
        return self.schedule.n / self.makespan if self.makespan > 0 else math.inf

    def _make_peak_live(self) -> np.ndarray:
        return self._sums[3].astype(np.int64)

    @known_keywords("Result.grid")
    def grid(self, max_columns: int = 160, unit: str = "time units") -> str:
        """The devices' ops laid out by time, one text column per time step, idle steps ``.``.

        A step is the shortest op's time (coarsened until the grid has at most
        ``max_columns`` steps); an op fills the steps from its start to its end, rounded to the
        nearest step, with its token in the first. Ops that start in one step (shorter than a
        step, where the grid is coarsened) show the first one's token and ``+``. Bubbles read
        as runs of dots, as in PyTorch's pipeline visualizer.

        Parameters
        ----------
        max_columns : int, default 160
            The most text columns of time, >= 1.
        unit : str, default "time units"
            What the costs' times are in, for the header (``"s"`` for a model's costs).

        Returns
        -------
        str
            A header naming the step, then one line per device.
        """
        max_columns = positive_int(max_columns, "max_columns")
        instance(unit, str, "unit", "str")
        s = self.schedule
        ends = [self.end[r, : s.length[r]] for r in range(s.p)]
        starts = [self.start[r, : s.length[r]] for r in range(s.p)]
        durations = np.concatenate([e - b for e, b in zip(ends, starts, strict=True)])
        positive = durations[durations > 0]
        step = float(positive.min()) if positive.size else 1.0
        step = max(step, self.makespan / max_columns)
        origin = min((float(b[0]) for b in starts if b.size), default=0.0)
        columns = int(round(self.makespan / step))
        tokens = s.tokens()
        width = max((len(t) for row in tokens for t in row), default=1) + 1
        lines = [f"one column per {step:g} {unit}, '.' idle"]
        for r in range(s.p):
            cells = [".".center(width)] * columns
            # each step's first token: a later op starting in that step marks it with '+'
            # rather than draw over it (four forwards were drawn as one)
            first = {}
            for k, token in enumerate(tokens[r]):
                a = int(round((starts[r][k] - origin) / step))
                b = max(a + 1, int(round((ends[r][k] - origin) / step)))
                if a in first:
                    token = first[a].rstrip("+") + "+"
                first[a] = token
                cells[a:b] = [token.ljust(width)] + [" " * width] * (b - a - 1)
            lines.append(f"device {r:>2}: " + "".join(cells).rstrip())
        return "\n".join(lines)

    @known_keywords("Result.memory_curve")
    def memory_curve(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Device ``r``'s activation memory as a step function.

        Parameters
        ----------
        r : int
            The device, ``0..p-1``.

        Returns
        -------
        times, values : ndarray
            ``values[i]`` holds from ``times[i]`` until ``times[i+1]``; the curve starts at 0
            at time 0 and steps at every op start and end.

        Raises
        ------
        ScheduleError
            If ``r`` is not a device.
        """
        L = int(self.schedule.length[index(r, "r", self.schedule.p)])
        times = np.empty(2 * L + 1)
        values = np.empty(2 * L + 1)
        times[0], values[0] = 0.0, 0.0
        times[1::2], values[1::2] = self.start[r, :L], self.mem_start[r, :L]
        times[2::2], values[2::2] = self.end[r, :L], self.mem_end[r, :L]
        return times, values


class _Filling:
    """A ``Result`` as ``simulate`` fills it, then made one (its ``__class__`` set): without
    ``Result``'s ``__setattr__`` the fields are plain attribute stores, which CPython keeps
    in the object rather than in a dict of its own (one made so, its class set, took 0.4 us;
    with a dict set as its ``__dict__``, 0.6)."""


# Result's fields made when first read, by the method that makes each
_MADE_WHEN_READ = {name: getattr(Result, "_make_" + name.lstrip("_")) for name in (
    "serial_time", "start", "end", "_memory", "peak_live", "stage_costs")}


@known_keywords("simulate")
def simulate(schedule: Schedule, costs: Costs | None = None, *,
             durations: ArrayLike | None = None, noise=None, samples: int | None = None,
             seed: int = 0):
    """Simulate ``schedule`` under ``costs``: op times, bubbles and activation memory.

    With ``noise`` (a ``fastpp.Noise``), a Monte Carlo instead: ``samples`` noisy timelines in
    one pass of the compiled kernel, returned as a ``fastpp.MonteCarlo`` (makespans,
    quantiles, criticality, sensitivities). Without it the result is the deterministic one,
    ``seed`` unused and ``samples`` refused.

    Parameters
    ----------
    schedule : Schedule
        From ``build_schedule``, ``Schedule.from_tokens`` or ``fastpp.io``.
    costs : Costs, optional
        Default ``Costs(f=1, b=2)``.
    durations : array_like, shape (p, L), optional
        Compute time of every op, shaped like ``schedule.kind`` (op ``k`` of device ``r``;
        slots past ``schedule.length[r]`` are ignored), finite and >= 0. Replaces the per-stage
        op times of ``costs``; hand-offs still take ``costs``' latency (and bandwidth). A
        measured run's replay (``MeasuredRun.replay``) passes each op's measured time.
        Not with ``noise``.
    noise : fastpp.Noise, optional
        The variability to sample.
    samples : int, optional
        Monte Carlo samples (with ``noise`` only: default 1000), >= 1.
    seed : int, default 0
        The draws' key (with ``noise``): the same seed gives the same draws to every op of
        the same stage, kind and microbatch, in any schedule.

    Returns
    -------
    Result, or MonteCarlo with ``noise``

    Raises
    ------
    ScheduleError
        If the costs do not fit the schedule, or the schedule deadlocks (the message names the
        op each stuck device waits for and shows the grid).
    """
    if not isinstance(schedule, Schedule):
        raise ScheduleTypeError(f"schedule must be a fastpp.Schedule (got "
                                f"{type(schedule).__name__})")
    costs = Costs(1.0, 2.0) if costs is None else costs
    if not isinstance(costs, Costs):
        raise ScheduleTypeError(f"costs must be a fastpp.Costs (got {type(costs).__name__})")
    # (the common call, no noise and a plain seed, pays no function call for the checks)
    if noise is not None or samples is not None or type(seed) is not int or not (
            0 <= seed < 2**64):
        samples, seed = check_noise(noise, samples, seed, SIMULATE_SAMPLES)
    if noise is not None:
        if durations is not None:
            raise ScheduleError("durations and noise cannot be given together (noise draws "
                                "each op's time; Noise(empirical=run) draws measured ones)")
        return run(schedule, costs, noise, samples, seed)
    built = schedule.__dict__.get("_built")  # a generated schedule, its arrays not yet read
    if built is not None and durations is None and built.plannable:
        # _rows_for's and point_plan's lookups written out: two Python calls less a point
        rows = costs._expanded.get(built.placement)
        if rows is None:
            rows = costs._rows_for(built.placement, built.arrays[2])
        plan = built.plan
        if plan is None:
            plan = built.point_plan()[0]
        out = np.empty(built.out_shape)
        makespan, bubble, span_bubble, latency = point(plan, built.tables, rows, out)
        if not makespan >= schedule.n * _TINY:
            raise _too_short(makespan)
        # read-only, as a Result is: the idle time and the reductions read it (setflags: a
        # third of the cost of flags.writeable, 0.2 us)
        out.setflags(write=False)
        result = _Filling()
        result.schedule = schedule
        result.costs = costs
        result._rows = rows
        result.makespan = makespan
        result.bubble_ratio = bubble
        result.span_bubble_ratio = span_bubble
        result._latency = latency
        result._built = built
        result._sums = out
        result.__class__ = Result
        return result
    checked = schedule._check()
    rows = costs._per_stage(schedule)
    tf, tb, ti, tw, tfb, comm, unit, gamma, sb = rows
    shape = schedule.kind.shape
    per_op = np.zeros((0, 0)) if durations is None else _durations(durations, schedule)
    start, end = np.zeros(shape), np.zeros(shape)
    pointer, sums = np.empty(schedule.p, np.int64), np.empty((4, schedule.p))
    # two calls, not one fused kernel: these two are the sweep kernel's own callees, so a cold
    # start compiles them once (a fused kernel re-optimizes both: 3 s for a 2 us dispatch)
    latency = kernels.timeline(schedule.ops, schedule.length, schedule.stage_to_device,
                               schedule.route_first, schedule.route_last, schedule.n, tf, tb, ti,
                               tw, tfb, sb, comm, per_op, start, end, pointer, _NO_ORDER)
    if latency < 0:
        raise deadlock_error(schedule, pointer)
    makespan, bubble, span_bubble = kernels.reduce(start, end, schedule.length, sums[0], sums[1])
    if durations is None and not makespan >= schedule.n * _TINY:
        raise _too_short(makespan)
    live = np.empty(schedule.p, np.int64)
    kernels.peaks(schedule.ops, schedule.length, unit, gamma, schedule.forward_only, sums[2], live)
    sums[3] = live
    for arr in (sums, start, end):
        arr.setflags(write=False)
    # Python floats, with or without the JIT (NUMBA_DISABLE_JIT returns NumPy scalars)
    return Result({"schedule": schedule, "costs": costs, "_rows": rows,
                   "durations": None if durations is None else per_op,
                   "makespan": float(makespan), "bubble_ratio": float(bubble),
                   "span_bubble_ratio": float(span_bubble), "_latency": float(latency),
                   "start": start, "end": end, "_sums": sums, "_checked": checked})


_NO_ORDER = np.empty(0, np.int64)
# a makespan below n times this: n / makespan is inf (a Python float: a NumPy one's
# comparison cost the per-point path 0.1 us)
_TINY = float(1.0 / np.finfo(np.float64).max)


def _too_short(makespan: float) -> ScheduleError:
    """The error of costs too small for a finite throughput (``n / makespan``), as a sweep
    refuses the point: times so small that a chunk's share (``f / m``) rounds to 0, where
    the makespan is then no measure of them (measured ``durations`` of 0 are: a makespan of
    0, and an infinite throughput)."""
    return ScheduleError(f"costs must keep the throughput n / makespan finite (the times not "
                         f"subnormal; got a makespan of {float(makespan)!r})")


def _durations(durations: ArrayLike, schedule: Schedule) -> np.ndarray:
    """``durations`` as a float64 ``(p, L)`` array, its used slots finite, >= 0 and at most
    ``costs.MAX_TIME``."""
    shape = schedule.kind.shape
    arr = number_array(durations, "durations", f"an array of numbers of shape {shape}")
    if arr.shape != shape:
        raise ScheduleError(f"durations must have the shape of the schedule's op matrix "
                            f"{shape} (got shape {arr.shape})")
    used = np.arange(shape[1]) < schedule.length[:, None]
    bad = used & ~((arr >= 0) & (arr <= MAX_TIME))  # NaN fails both
    if np.any(bad):
        r, k = (int(x) for x in np.argwhere(bad)[0])
        if np.isfinite(arr[r, k]) and arr[r, k] > MAX_TIME:
            raise ScheduleError(f"durations must be at most {MAX_TIME:g} (a schedule sums them, "
                                f"past that to infinity; got {float(arr[r, k])!r} for op {k} "
                                f"({schedule.token(r, k)}) of device {r})")
        raise ScheduleError(f"durations must be finite and >= 0 (got {float(arr[r, k])!r} for "
                            f"op {k} ({schedule.token(r, k)}) of device {r})")
    arr[~used] = 0.0
    return arr

