"""``MeasuredRun``: a real pipeline run as fastpp sees it, and ``read_torch_trace``.

An op's outputs leave when the sends PyTorch posts right after it are posted: its ``release``.
The device's time from one op's release to the next one's is split (seconds):

- ``wait``: blocked on an input. PyTorch posts a receive in a ``RECV_*`` action and waits for it
  at the start of the compute action that needs it; the receive's profiler range
  (``gloo:recv``) ends when that wait returns. So ``wait`` is the receive's end minus the range
  start, less the time every op spends before it reaches its wait (the least over the ops
  whose inputs had all left before they began, which did not block; 0 where every op
  blocked, as under a slow link). With device clocks (GPU ranges, CUDA events) it is the idle gap
  before an op that takes an input from another device. A device's first op also waits from
  the run's start to its range.
- ``compute``: the rest of the op's range (its operators and the Python around them).
- ``overhead``: the device's time outside ranges charged to the op: from the previous op's
  release to this range (posting receives, the scheduler's bookkeeping, the process being
  descheduled) and posting its own sends. Work, not waiting.
- ``stall``: the part of ``wait`` that its inputs' producers' ``handed`` (below) plus the hand-off
  ``latency`` does not explain. gloo moves a message only once both its send and its receive
  are posted, so an input sent before its receive was posted still arrives a rendezvous after
  the receive; and a descheduled process answers late. The device pays that wherever the op
  runs.

A replay runs each op for its ``durations``: its whole slot, from the previous op's ``handed``
to its own, less the time the engine idles for its inputs (their producers' ``handed`` plus the
run's ``latency``, at most the op's wait and the work before it, which the wait overlaps in the
run: receives are posted while inputs travel). An op's ``handed`` is its release, or earlier
when a consumer on another device had its output before that (``ScheduleGPipe`` posts its
sends inside its ranges, and a send's range may outlast the transfer): the consumer's input
time less ``latency``, no earlier than the op's work began. Idle plus duration is then the
op's slot, so the replay is exact op by op as long as no input came sooner after its
producer's ``handed`` than ``latency``; one that did makes its op end that much later in the
replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..checks import (
    Frozen,
    ScheduleError,
    instance,
    known_keywords,
    number,
    number_array,
    one_of,
    require,
    show,
)
from ..costs import Costs
from ..dependencies import edges
from ..ops import FB, PAD, B, F, I, Op, W, format_op
from ..schedule import Schedule, route_positions
from ..simulate import Result, simulate
from .align import align
from .read import RankTrace, collector_paused, read_file, trace_files

pd = require("pandas", "measured", "fastpp.measured")

_SHOWN = 8  # at most this many items listed in an error message
# An op blocked on its input when its wait exceeds this (seconds). On CPU the time from a range's
# start to its wait call varies by ~20 us between ops that did not block (gloo, torch 2.13, the
# sample traces: 11-30 us), so shorter waits are that noise, not a hand-off's latency.
BLOCKED = 50e-6


@dataclass(frozen=True, eq=False)
class Comparison:
    """A measured run against a simulated one, op by op.

    Attributes
    ----------
    ops : DataFrame
        One row per op: ``device, position, label``, the measured and simulated ``start``
        (measured: ``handed - durations``, where the engine would start it) and ``end`` (its
        outputs handed on: the measured ``handed``), and
        ``late``: how much later the measured op ended, ``lost``: how much of that this op
        added (``late`` minus its device's previous op's ``late``; negative where the
        simulation lost the time).
    measured, simulated : float
        The makespans (seconds).
    error : float
        ``simulated / measured - 1``.
    device, op : int, str
        Where the simulation strayed most: the op with the largest ``|lost|``, and its device.
    lost : float
        That op's ``lost`` (seconds).
    """

    ops: pd.DataFrame
    measured: float
    simulated: float
    error: float
    device: int
    op: str
    lost: float

    def __str__(self) -> str:
        return (f"measured {self.measured * 1e3:.3f} ms, simulated {self.simulated * 1e3:.3f} ms "
                f"({self.error:+.2%}); largest op error at {self.op} on device {self.device} "
                f"({self.lost * 1e3:+.3f} ms)")


class MeasuredRun(Frozen):
    """A real pipeline run read from its per-rank traces (``fastpp.read_torch_trace``).

    Times are seconds from the run's start (its first op's start), on rank 0's host's clock.
    A run does not change once read: its attributes cannot be set and its arrays are read-only.

    Attributes
    ----------
    schedule : Schedule
        The order each device ran its ops, validated.
    p, n, m : int
        Devices (ranks), microbatches, chunks per device.
    makespan : float
        First op start to last op end over all ranks.
    start, end, release : ndarray, shape (p, L)
        Per op, like ``schedule.kind``: its range, and when its sends were posted.
    wait, compute, overhead, stall : ndarray, shape (p, L)
        Its time split (module docstring): the device's time from the previous op's
        ``release`` to this op's is ``wait + compute + overhead`` (from the run's start for a
        device's first op).
    durations, handed : ndarray, shape (p, L)
        What a replay runs each op for, and when it handed its outputs on as the replay sees it
        (its ``release`` or earlier; module docstring).
    operators : ndarray, shape (p, L)
        The part of ``compute`` from its first profiled operator's start to its last one's
        end (the ``aten::`` work and the Python between its layers), the part that shrinks
        with a smaller chunk, less a forward's warm-up (its operators' first half beyond
        their second: ``fastpp.measured.read._warm_up``); the rest of an op's duration (the
        runtime's Python before and after its layers, posting messages, the warm-up) does
        not. With device clocks all of ``compute``.
    weight_operators : ndarray, shape (p, L)
        Of an unsplit backward's (``B``'s) ``operators``, the part that computes or
        accumulates the parameters' gradients, told by the autograd nodes its profile holds
        (``fastpp.measured.read._weight_span``); 0 for other ops, with device clocks, for a
        trace without the autograd engine's node events, and when not given.
    probe : ndarray, shape (V, 3)
        Per virtual stage, the median operator span (seconds) of a whole microbatch's full
        backward ``B``, and of the input-grad ``I`` and weight-grad ``W`` halves of PyTorch's
        split one, run on the stage's layers apart from the schedule
        (``fastpp.measured.measure``'s ``probe``, after each step): what a split backward
        costs against a full one, which ``costs()`` prices. NaN where not measured (a trace
        without the probe's ranges, and when not given).
    probe_fixed : ndarray, shape (V, 3)
        Per virtual stage, the median of each probe range's span less its operators' (the
        same ``B, I, W``): the Python of PyTorch's backward call itself outside its
        operators (``stage_backward``, ``stage_backward_input``, ``stage_backward_weight``),
        which an op of that kind pays within its fixed time; 0 with device clocks, NaN where
        not measured.
    injected : ndarray, shape (p, L)
        Per op, the delays ``fastpp.measured.measure`` injected in it or after it (``delay``: a
        sleep in the op's ``compute``; ``link_delay``: one before each send over the slow
        link, after the op's range in its send action, so in its ``overhead``, but in its
        ``compute`` under ``ScheduleGPipe``, which sends inside its ranges), as long as they
        took (the trace's ``DELAY`` ranges, the CPU's; seconds, 0 elsewhere and with device
        clocks, a GPU run's): a sleep wakes late, a 3 ms one 0.04-0.2 ms (95% of them) after
        the delay asked for here (3.06-3.12 ms on average, sessions 54-58), which
        ``Noise(link_delay=...)`` is then given to predict the run. Part of ``durations``.
    offsets : ndarray, shape (p,)
        How far each rank's clock was ahead of rank 0's host's (seconds, subtracted); 0 on
        rank 0's host, unless its ranks' clocks disagree (``fastpp.measured.align``).
    offset_residual : float
        How far the true offsets can be from ``offsets`` given the hand-offs (seconds).
    latency : float
        The hand-off latency: the median, over the ops that blocked on an input still being
        made when they began to wait, of the time from its producer's ``release`` to the wait's
        end (seconds, >= 0).
    files : list of str
        Rank ``r``'s file at ``files[r]``.
    hosts : list of str
        Rank ``r``'s host.
    """

    def __init__(self, schedule: Schedule, start, end, release, wait, compute, overhead, stall,
                 durations, handed, latency: float, offsets, offset_residual: float,
                 files: list[str], hosts: list[str], operators, weight_operators=None,
                 probe=None, probe_fixed=None, injected=None):
        instance(schedule, Schedule, "schedule", "fastpp.Schedule")
        if weight_operators is None:  # nothing measured of it: no weight's part
            weight_operators = np.zeros(schedule.kind.shape)
        if injected is None:
            injected = np.zeros(schedule.kind.shape)
        if probe is None:
            probe = np.full((schedule.V, 3), np.nan)
        if probe_fixed is None:
            probe_fixed = np.full((schedule.V, 3), np.nan)
        per_op = {"start": start, "end": end, "release": release, "wait": wait,
                  "compute": compute, "overhead": overhead, "stall": stall,
                  "durations": durations, "handed": handed, "operators": operators,
                  "weight_operators": weight_operators, "injected": injected}
        arrays = {}
        shapes = {"offsets": (schedule.p,), "probe": (schedule.V, 3),
                  "probe_fixed": (schedule.V, 3)}
        for name, value in [*per_op.items(), ("offsets", offsets), ("probe", probe),
                            ("probe_fixed", probe_fixed)]:
            arrays[name] = number_array(value, name)
            shape = shapes.get(name, schedule.kind.shape)
            if arrays[name].shape != shape:
                raise ScheduleError(f"{name} must have shape {shape}, the schedule's (got "
                                    f"{arrays[name].shape})")
        used = _used(schedule)
        for name in [*per_op, "offsets"]:
            values = arrays[name][used] if name in per_op else arrays[name]
            if not np.all(np.isfinite(values)):
                where = " at every op" if name in per_op else ""
                raise ScheduleError(f"{name} must be finite{where} (got "
                                    f"{show(values[~np.isfinite(values)][0])})")
        for name, values in (("durations", arrays["durations"][used]),
                             ("end - start", (arrays["end"] - arrays["start"])[used]),
                             ("injected", arrays["injected"][used])):
            if np.any(values < 0):
                raise ScheduleError(f"{name} must be >= 0 at every op (got "
                                    f"{show(values[values < 0][0])})")
        latency = number(latency, "latency")
        offset_residual = number(offset_residual, "offset_residual")
        part, whole = arrays["weight_operators"], arrays["operators"]
        if np.any(part < 0) or np.any(part > whole):
            raise ScheduleError("weight_operators must lie in 0..operators, op by op (got "
                                f"{show(part[(part < 0) | (part > whole)][0])} against "
                                f"{show(whole[(part < 0) | (part > whole)][0])})")
        for name in ("probe", "probe_fixed"):
            bad = (arrays[name] < 0) | np.isinf(arrays[name])
            if np.any(bad):
                raise ScheduleError(f"{name} must hold finite times >= 0 or NaN (not measured) "
                                    f"(got {show(arrays[name][bad][0])})")
        self._freeze(
            schedule=schedule, p=schedule.p, n=schedule.n, m=schedule.m, **arrays,
            offset_residual=float(offset_residual), latency=float(latency), files=files,
            hosts=hosts, makespan=float(arrays["end"][used].max() - arrays["start"][used].min()),
            _costs={})  # calibrations, kept with the schedule as checked (costs())

    def __repr__(self) -> str:
        return (f"MeasuredRun(p={self.p}, n={self.n}, m={self.m}, ops={self.schedule.num_ops}, "
                f"makespan={self.makespan:.6g} s)")

    @cached_property
    def ops(self) -> pd.DataFrame:
        """One row per op: ``device, position`` (its place in ``schedule``'s op matrix),
        ``label, kind, stage, microbatch, stage2, microbatch2`` (the backward half of an
        overlapped pair, else -1), and in seconds ``start, end`` (its range), ``release`` (its
        sends posted), ``wait, compute, overhead, stall`` (the module docstring), ``operators``
        (of ``compute``, the span of its profiled operators), ``weight_operators`` (of those,
        an unsplit backward's parameters' part), ``injected`` (the delays slept in it or
        after it, before its sends)."""
        s = self.schedule
        used = _used(s)
        device, position = np.nonzero(used)
        kinds = np.array([op.name for op in Op])
        return pd.DataFrame({
            "device": device, "position": position,
            "label": [s.token(r, k) for r, k in zip(device, position, strict=True)],
            "kind": kinds[s.kind[used]], "stage": s.stage[used], "microbatch": s.mb[used],
            "stage2": s.stage2[used], "microbatch2": s.mb2[used],
            "start": self.start[used], "end": self.end[used], "release": self.release[used],
            "wait": self.wait[used], "compute": self.compute[used],
            "overhead": self.overhead[used], "stall": self.stall[used],
            "operators": self.operators[used], "weight_operators": self.weight_operators[used],
            "injected": self.injected[used]})

    def costs(self, per: str = "device", statistic: str = "median",
              schedule: Schedule | None = None) -> Costs:
        """Costs calibrated from the run, in fastpp's units (seconds), for any schedule and
        any ``m``, or moved to one ``schedule``'s stages by the layers they hold.

        Each op's ``durations`` (its time on the device without the engine's idle) splits into
        the span of its profiled operators (``operators``: the layers' work and the Python
        between them), which shrinks with the chunk, and the rest (the runtime's Python
        around the layers, posting messages), which every op pays whatever its chunk. Per op
        kind, the typical operators' time times this run's ``m`` goes to ``f``, ``b``, ``w``
        (a chunk op of a schedule with ``m`` chunks takes its ``1/m`` share) and the typical
        rest to ``Costs.overhead`` (undivided; not this run's ``overhead``, the
        time outside the ranges), so that the two add up to the typical duration: ``b`` of
        the full backwards, or of ``I`` plus ``W`` in a split schedule, ``w`` of the ``W``
        ops. A run without ``W`` ops gives ``w`` as the typical share of its full backwards'
        operators that computed the parameters' gradients (``weight_operators``: the
        autograd nodes of a CPU profile say which) times ``b``; 0 for a trace without the
        autograd engine's node events (a GPU range, Megatron's timers), which then runs all
        of ``b`` in ``I``. Without a probe, a kind the run lacks takes the backward's fixed
        time: ``I`` and ``W`` each ``B``'s, ``B`` the ``I``'s (on the traces in tests/data, the
        fixed parts of ``B``, ``I`` and ``W`` are all 0.09-0.53 ms).

        A run with a ``probe`` (``measure`` runs one after each step) prices the split
        backward by what it measured, per group (device: its stages' probes summed; stage),
        as ratios of the probe's medians, since the probe runs apart from the schedule's
        timing: without ``I`` and ``W`` ops, ``i = b * I/B`` and ``w = b * W/B`` (PyTorch's
        split took 1.38-1.50x a full backward in docs/measured.md's runs, which ``b - w``
        cannot show); a split run gives ``i`` and ``w`` from its ``I`` and ``W`` ops and
        prices the full backward ``b = (I + W) * B/(I + W)``, not ``I + W``, which would
        overprice unsplit schedules. With the probe, a kind the run lacks takes its fixed
        time from what the backward's is made of: the runtime around the call (dispatch,
        posting and receiving messages: the backward's fixed time less its call's own
        Python outside its operators, ``probe_fixed``, per device the mean over its
        stages), the same for ``B`` and ``I``, plus the call's own: ``I = B - own B + own
        I`` and from a split run ``B = I - own I + own B`` (the runtime part at least 0);
        ``W``, which posts and receives nothing, its call's own, ``own W`` (the runtime's
        dispatch of an action, 0.02-0.08 ms in ZB-V's and interleaved ZB's own ``W`` ops on
        this machine, is not in it). docs/measured.md has the runs.
        Without a probe, a run with ``I`` ops gives ``i`` from them (DualPipeV's, which also
        runs full backwards, then keeps both), and one without gives no ``i`` (``I`` takes
        ``b - w``). An op that hands its
        output to another device takes longer (posting the message): ``send`` per kind is the
        typical fixed time of the run's ops of that kind that send less that of those that do
        not, over every device (0 where one side is missing; ``B`` and ``I`` stand in for each
        other), and each group's overhead is its fixed time less its ops' share of it, so that
        a schedule whose stages send where this run's did not (an interleaved chunk on the
        last device) pays it. An overlapped pair's ``fb`` is its typical duration less the
        ``F`` and ``B`` overheads and sends it takes, at least 0: where the run's pairs took
        less than those, they are priced above their measured time (docs/measured.md). ``comm``
        is ``latency``. ``gamma`` and ``act`` keep their defaults (a trace has no memory).

        Parameters
        ----------
        per : {"device", "stage"}
            ``"device"``: arrays over the ``p`` devices, which any schedule on ``p`` devices
            accepts (with its own ``m``); ``"stage"``: arrays over the ``V`` virtual stages of
            this run's placement.
        statistic : {"median", "mean"}
            The median resists the odd slow op; the mean keeps the run's total device time,
            descheduled moments included: on a busy machine the better predictor of a whole
            run (each of the six runs in tests/data simulated with its own calibrated costs:
            -9%..+3% of its makespan with means, -41%..-3% with medians).
        schedule : Schedule, optional
            The schedule to price, on any ``p`` and ``m``: arrays over its ``V`` virtual
            stages (``per`` is then not used), each stage priced by the layers it holds.
            A stage holds an equal share of its route's layers (one route of ``p * m``
            stages; DualPipe's two copies of the model, two routes of ``p``). It takes the
            operators' time of this run's stages over the same layers, in proportion to the
            share of theirs it holds, and their fixed time per op, weighed alike. With
            ``"device"`` a stage takes its device's times: a V-shaped schedule's device 0,
            which holds the model's first and last layers, then prices the last ones as this
            run's first stage ran the first. The split backward's ``i`` and ``w`` move as
            shares of ``b``, and PyTorch's first stage of a route computes no input gradient
            (its ``I`` does nothing, its ``W`` the whole backward): a stage that starts a
            route where this run's stage over its layers did not, or the reverse, takes the
            shares of this run's stages that did (or did not), pooled. On 1F1B's steps
            predicting ZB-V's (m = 2), six sessions of 180 steps, the deterministic price of
            ZB-V's median step went from +0.7%..+2.7% to -1.3%..+0.4%, and the Monte Carlo's
            Kolmogorov-Smirnov distance from 0.27-0.46 to 0.06-0.11 (docs/variability.md).

        Returns
        -------
        Costs

        Raises
        ------
        ScheduleError
            If ``per`` or ``statistic`` is not one of its choices, or ``schedule`` is not a
            ``Schedule``.
        """
        one_of(per, "per", ("device", "stage"))
        one_of(statistic, "statistic", ("median", "mean"))
        if schedule is not None:
            instance(schedule, Schedule, "schedule", "fastpp.Schedule")
            return _moved(self.costs("stage", statistic), self.schedule, schedule)
        # a run does not change (it is frozen), but its schedule may be written into: kept with
        # the schedule as checked, and calibrated again when that changed
        checked = self.schedule._check()
        found = self._costs.get((per, statistic))
        if found is None or found[0] is not checked:
            found = self._costs[(per, statistic)] = (checked, self._calibrate(per, statistic))
        return found[1]

    def _calibrate(self, per: str, statistic: str) -> Costs:
        s = self.schedule
        used = _used(s)
        group = (np.broadcast_to(np.arange(s.p)[:, None], s.kind.shape) if per == "device"
                 else s.stage)
        size = s.p if per == "device" else s.V
        scaled, fixed = {}, {}
        for kind in (F, B, I, W, FB):  # per group: the typical chunk-scaled and fixed times
            pick = used & (s.kind == kind)
            whole = _by_group(group[pick], self.durations[pick], size, statistic)
            operators = _by_group(group[pick], self.operators[pick], size, statistic)
            fixed[kind] = np.clip(whole - operators, 0.0, whole)
            scaled[kind] = whole - fixed[kind]
        flags = _sends(s)
        send = self._send(statistic, flags, used)
        # each group's fixed time less its ops' share of the send: the rest every op pays. A
        # send above a group's fixed time over its share would leave that group less than 0:
        # it is capped there, so that every group keeps its measured time
        for kind, name, which in _SENDERS:
            pick = used & (s.kind == kind)
            share = _by_group(group[pick], flags[which][pick].astype(float), size, "mean")
            sending = share > 0
            if sending.any():
                send[name] = min(send[name], float(np.min(fixed[kind][sending]
                                                          / share[sending])))
            fixed[kind] = np.maximum(fixed[kind] - send[name] * share, 0.0)
        for name, kind, other in (("B", B, "I"), ("I", I, "B")):
            if not np.isfinite(fixed[kind]).any():  # none ran: the other's, as capped
                send[name] = send[other]
        # a pair pays its forward's F send and its backward half's B send
        pick = used & (s.kind == FB)
        pair_sends = sum(send[name] * _by_group(group[pick], flags[which][pick].astype(float),
                                                size, "mean")
                         for name, which in (("F", 0), ("B", 1)))
        f = scaled[F] * s.m
        split = np.isfinite(scaled[I]) & np.isfinite(scaled[W])
        # the probe's full backward B and split halves I, W per group (NaN where it lacks one)
        full, part_i, part_w = self._probe_by(per)
        probed = (full > 0) & (part_i + part_w > 0)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            to_full = np.where(probed, full / (part_i + part_w), 1.0)
            i_share, w_share = part_i / full, part_w / full
        bad = probed & ~np.isfinite(np.stack([to_full, i_share, w_share])).all(axis=0)
        if bad.any():
            raise ScheduleError(f"probe must time its split halves I, W within a finite ratio "
                                f"of its full backward B (got B, I, W = "
                                f"{show(np.stack([full, part_i, part_w], axis=1)[bad][0])})")
        # a split run's I + W priced as the full backward it stands for, by the probe's ratio
        b = np.where(np.isfinite(scaled[B]), scaled[B], np.where(
            split, (scaled[I] + scaled[W]) * to_full, np.nan)) * s.m
        # without W ops, the weight's share of the unsplit backwards' operators
        pick = used & (s.kind == B)
        if statistic == "mean":  # the ratio of the totals, as the mean keeps total time
            with np.errstate(invalid="ignore", divide="ignore"):  # (a group of no time: 0)
                share = (_by_group(group[pick], self.weight_operators[pick], size, statistic)
                         / _by_group(group[pick], self.operators[pick], size, statistic))
        else:
            share = _by_group(group[pick], np.divide(
                self.weight_operators[pick], self.operators[pick],
                out=np.zeros(int(pick.sum())), where=self.operators[pick] > 0), size, statistic)
        share = np.nan_to_num(share)
        # the split's own halves where the run has them (I and W ops), else with the probe b
        # by its ratios
        i = np.where(split, scaled[I] * s.m, np.where(probed, i_share * b, np.nan))
        w = np.where(np.isfinite(scaled[W]), scaled[W] * s.m,
                     np.where(probed, w_share * b, np.where(np.isfinite(b), share * b, 0.0)))
        w = np.where(np.isfinite(i), w, np.minimum(w, b))  # w <= b where I takes b - w
        tiny = 1e-12  # a positive floor: Costs needs f, b > 0 even where every op took 0
        if not np.all(np.isfinite(f)) or not np.all(np.isfinite(b)):
            # forward-only runs and stages without a backward: only what was measured counts
            b = np.where(np.isfinite(b), b, f)
        w = np.nan_to_num(w)
        # a kind the run lacks: with the probe, what its fixed time is made of, the runtime
        # around the call (dispatch, posting and receiving messages), the same for B and I,
        # plus the call's own Python outside its operators (probe_fixed; W posts and
        # receives nothing: its call's own); without it the backward's (I and W each B's,
        # B the I's)
        own_b, own_i, own_w = self._probe_fixed_by(per)
        backward = np.isfinite(fixed[B]) | np.isfinite(fixed[I])
        lacking = {B: _either(np.maximum(fixed[I] - own_i, 0.0) + own_b, fixed[I]),
                   I: _either(np.maximum(fixed[B] - own_b, 0.0) + own_i, fixed[B]),
                   W: _either(np.where(backward, own_w, np.nan), fixed[B])}
        overhead = {"F": np.nan_to_num(fixed[F]), **{
            name: np.nan_to_num(_either(fixed[kind], lacking[kind]))
            for name, kind in (("B", B), ("I", I), ("W", W))}}
        has_pair = np.isfinite(scaled[FB])
        pair = (scaled[FB] + fixed[FB] - overhead["F"] - overhead["B"] - pair_sends) * s.m
        floored = np.maximum(b, tiny)
        # a group with neither I ops nor the probe: I takes b - w, as Costs's default
        i = np.where(np.isfinite(i), i, floored - w) if np.isfinite(i).any() else None
        return Costs(np.maximum(f, tiny), floored, w=w, i=i, comm=self.latency,
                     fb=np.where(has_pair, np.maximum(pair, tiny), f + b) if has_pair.any()
                     else None, overhead=overhead, send=send)

    def _send(self, statistic: str, flags: tuple[np.ndarray, np.ndarray],
              used: np.ndarray) -> dict[str, float]:
        """``Costs.send`` per kind, before ``_calibrate`` caps it: the typical fixed time
        (duration less operators) of this run's ops of that kind that hand on to another
        device, less that of those that do not, over every device (in a plain pipeline a
        device's forwards all send or none do); at least 0, and 0 where the run has no op on
        one side. ``B`` and ``I`` post the same gradient: a run that has one of them gives
        both. ``flags``: ``_sends``'s; ``used``: ``_used``'s."""
        s = self.schedule
        fixed = np.maximum(self.durations - self.operators, 0.0)
        typical = np.mean if statistic == "mean" else np.median
        out = {}
        for kind, name, which in _SENDERS:
            pick = used & (s.kind == kind)
            yes, no = fixed[pick & flags[which]], fixed[pick & ~flags[which]]
            out[name] = (max(float(typical(yes) - typical(no)), 0.0) if yes.size and no.size
                         else np.nan)
        for name, other in (("B", "I"), ("I", "B")):
            if np.isnan(out[name]):
                out[name] = out[other]
        return {name: float(np.nan_to_num(value)) for name, value in out.items()}

    def _probe_by(self, per: str) -> np.ndarray:
        """The probe's ``B, I, W`` spans (``probe``'s columns) per stage, or per device: the
        sums over its stages, NaN where one of them lacks the kind."""
        if per == "stage":
            return self.probe.T
        device = self.schedule.stage_to_device
        return np.stack([np.bincount(device, column, minlength=self.p) for column in self.probe.T])

    def _probe_fixed_by(self, per: str) -> np.ndarray:
        """``probe_fixed``'s ``B, I, W`` per stage, or per device: the means over its stages
        (a fixed time per op, not a sum), NaN where one of them lacks the kind."""
        if per == "stage":
            return self.probe_fixed.T
        device = self.schedule.stage_to_device
        count = np.bincount(device, minlength=self.p)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.stack([np.bincount(device, column, minlength=self.p) / count
                             for column in self.probe_fixed.T])

    def op_times_by_kind(self) -> list[list[np.ndarray]]:
        """Per device, per op code (``fastpp.ops.Op``: F, B, I, W, FB): the measured durations
        of its ops of that kind (what ``fastpp.Noise(empirical=run)`` draws from).

        Returns
        -------
        list of list of ndarray
            ``[r][k]``: device ``r``'s durations of kind ``k``.
        """
        s = self.schedule
        kinds = [s.kind[r, : s.length[r]] for r in range(self.p)]
        return [[self.durations[r, : s.length[r]][kinds[r] == k] for k in range(5)]
                for r in range(self.p)]

    def replay(self) -> Result:
        """The run's own schedule simulated with every op's measured ``durations`` and the
        measured hand-off ``latency``.

        Returns
        -------
        Result
        """
        return simulate(self.schedule, self.costs(per="stage"), durations=self.durations)

    def compare(self, result: Result) -> Comparison:
        """Measured against simulated, op by op (``result`` simulates this run's schedule,
        e.g. ``replay()``, or ``simulate(run.schedule, costs)`` for calibrated costs).

        Parameters
        ----------
        result : Result
            A simulation of this run's schedule.

        Returns
        -------
        Comparison
            Per op (``ops``) and in all: the makespans, the error and the op that strayed
            most.

        Raises
        ------
        ScheduleError
            If ``result`` is not a ``Result`` or simulates another schedule.
        """
        if not isinstance(result, Result):
            raise ScheduleError(f"result must be a fastpp.Result (got {type(result).__name__})")
        s = self.schedule
        if result.schedule.tokens() != s.tokens():
            raise ScheduleError(f"result must simulate this run's schedule (got "
                                f"{result.schedule!r}, the run is {s!r})")
        used = _used(s)
        begin = np.where(used, self.handed - self.durations, 0.0)  # as the engine sees it
        free = self.handed
        late = np.where(used, free - result.end, 0.0)
        lost = late - np.concatenate([np.zeros((s.p, 1)), late[:, :-1]], axis=1)
        device, position = np.nonzero(used)
        table = pd.DataFrame({
            "device": device, "position": position,
            "label": [s.token(r, k) for r, k in zip(device, position, strict=True)],
            "measured_start": begin[used], "measured_end": free[used],
            "simulated_start": result.start[used], "simulated_end": result.end[used],
            "late": late[used], "lost": lost[used]})
        worst = int(np.argmax(np.abs(table["lost"].to_numpy())))
        return Comparison(table, self.makespan, result.makespan,
                          result.makespan / self.makespan - 1.0, int(table["device"][worst]),
                          str(table["label"][worst]), float(table["lost"][worst]))


def _layers(s: Schedule) -> tuple[np.ndarray, np.ndarray, int]:
    """Each stage's share of the model's layers, ``[lo, hi)`` as fractions of its route, and
    how many routes (copies of the model: 2 for DualPipe and Chimera) the stages hold."""
    place, size = route_positions(s)
    return place / size, (place + 1) / size, int(np.sum(place == 0))


def _moved(own: Costs, run: Schedule, target: Schedule) -> Costs:
    """``own`` (``run``'s costs per stage) moved to ``target``'s stages by their layers
    (``MeasuredRun.costs``' ``schedule``)."""
    lo, hi, copies = _layers(run)
    lo_t, hi_t, _ = _layers(target)
    # weight[u, v]: the part of run stage u's layers that target stage v holds (a model's
    # copies share its layers)
    weight = np.clip(np.minimum(hi[:, None], hi_t) - np.maximum(lo[:, None], lo_t), 0.0, None)
    weight /= (hi - lo)[:, None] * copies
    scale = target.m / run.m  # chunk times are f/m: back to a plain pipeline's at target's m
    arrays = own.arrays

    def row(name, k=None):  # a field over the run's stages (overhead: its kind k's row)
        values = arrays[name] if k is None else arrays[name][k]
        return np.broadcast_to(values, (run.V,))

    def chunk(values):
        return (values @ weight) * scale

    def per_op(values):  # a fixed time per op, whatever the chunk: a weighted mean
        return (values @ weight) / weight.sum(axis=0)

    first = np.isin(np.arange(run.V), run.route_first)
    first_t = np.isin(np.arange(target.V), target.route_first)

    def split(name):  # i or w, moved as shares of b
        b, values = row("b"), row(name)
        # pooled over the run's stages that do not start a route, and over those that do
        pooled = np.array([values[first == x].sum() / b[first == x].sum()
                           if np.any(first == x) else np.nan for x in (False, True)])
        like = pooled[first_t.astype(int)]  # per target stage: the run's stages like it
        # [u, v]: run stage u's share of b, or the pooled one where u and v differ in
        # starting a route (and the run has a stage like v)
        differ = (first[:, None] != first_t) & np.isfinite(like)
        share = np.where(differ, like, (values / b)[:, None])
        return np.sum(weight * b[:, None] * share, axis=0) * scale

    # without i (I takes b - w), w is still swapped at a first stage: its full backward's
    # weight share is the larger (no input gradient there)
    i, w = (None if own.i is None else split("i")), split("w")
    overhead = {name: per_op(row("overhead", k)) for k, name in enumerate("FBIW")}
    return Costs(chunk(row("f")), chunk(row("b")), w=w, i=i, comm=own.comm,
                 fb=None if own.fb is None else chunk(row("fb")), overhead=overhead,
                 send=own.send)


def _either(value: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``value``, or ``other`` where ``value`` is NaN (not measured)."""
    return np.where(np.isfinite(value), value, other)


def _by_group(keys: np.ndarray, values: np.ndarray, size: int, statistic: str) -> np.ndarray:
    """The median or mean of ``values`` for each key ``0..size-1`` (NaN for a key without
    values), all groups at once."""
    count = np.bincount(keys, minlength=size)
    out = np.full(size, np.nan)
    has = count > 0
    if statistic == "mean":
        out[has] = np.bincount(keys, values, minlength=size)[has] / count[has]
        return out
    ordered = values[np.lexsort((values, keys))]
    first = np.cumsum(count) - count
    c = count[has]
    out[has] = (ordered[first[has] + (c - 1) // 2] + ordered[first[has] + c // 2]) / 2
    return out


def _used(s: Schedule) -> np.ndarray:
    return np.arange(s.kind.shape[1]) < s.length[:, None]


# the kinds that send, their Costs.send key, and which of _sends' flags says they do
_SENDERS = ((F, "F", 0), (B, "B", 1), (I, "I", 1))


def _sends(s: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per op ``(p, L)``: does it hand its forward output on to another device (an ``F``, or
    a pair's forward), does it hand an input gradient on (a ``B``, ``I``, or a pair's
    backward), by its microbatch's route."""
    dev, V = s.stage_to_device, s.V
    r = np.arange(s.p)[:, None]
    stage, mb = s.stage, s.mb
    last, first = s.route_last[mb], s.route_first[mb]
    forward = (stage < last) & (dev[np.minimum(stage + 1, V - 1)] != r)
    stage2 = np.where(s.kind == FB, s.stage2, stage)
    first2 = np.where(s.kind == FB, s.route_first[s.mb2], first)
    backward = (stage2 > first2) & (dev[np.maximum(stage2 - 1, 0)] != r)
    return forward, backward


@known_keywords("read_torch_trace")
def read_torch_trace(path) -> MeasuredRun:
    """Read a real pipeline run from its per-rank PyTorch profiler traces.

    Parameters
    ----------
    path : str, PathLike or list of them
        A folder of per-rank traces (``*.json`` or ``*.json.gz``, e.g. torchtitan's
        ``rank{r}_trace.json``), a list of files, or one file. Chrome/Kineto traces from
        ``torch.profiler`` (``export_chrome_trace``) of ``torch.distributed.pipelining``
        schedules, or PP-Schedule-Visualization's Megatron-LM timer files.

    Returns
    -------
    MeasuredRun

    Raises
    ------
    ScheduleError
        Naming the file, the rank and the event: a file that is not JSON or truncated, no
        pipeline labels, missing or duplicate ranks, duplicate or missing ops, an op out of
        range, two runs in one folder, clocks that cannot be aligned.
    """
    files = trace_files(path)
    with collector_paused():
        return build_run([read_file(f) for f in files])


def build_run(traces: list[RankTrace]) -> MeasuredRun:
    """A ``MeasuredRun`` from the ranks' parsed traces (``read.read_file``)."""
    traces = _ranked(traces)
    p = len(traces)
    _one_run(traces)
    for t in traces:
        missing_stage = t.ops[:, 1] < 0
        t.ops[missing_stage, 1] = t.chunk[missing_stage] * p + t.rank
    ops = np.concatenate([t.ops for t in traces])  # every op in rank order, as in the files
    rank = np.repeat(np.arange(p), [len(t.ops) for t in traces])
    index = np.concatenate([np.arange(len(t.ops)) for t in traces])
    _each_once(traces, ops, rank, index)
    schedule = _schedule(traces, ops, rank, index)
    L = schedule.kind.shape[1]
    base = min(t.base_ns for t in traces)
    shape = (p, L)
    start, end, child, ready, release, sent = (np.full(shape, np.nan) for _ in range(6))
    operators, weight_operators, injected = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for t in traces:  # microseconds on each host's raw clock
        shift = (t.base_ns - base) / 1e3
        k = len(t.labels)
        start[t.rank, :k], end[t.rank, :k] = t.start + shift, t.end + shift
        child[t.rank, :k], ready[t.rank, :k] = t.first_child + shift, t.ready + shift
        release[t.rank, :k], sent[t.rank, :k] = t.release + shift, t.sent + shift
        operators[t.rank, :k] = t.operators * 1e-6
        weight_operators[t.rank, :k] = t.weight_operators * 1e-6
        if t.injected is not None:
            injected[t.rank, :k] = t.injected * 1e-6
    device_clock = np.array([t.device_clock for t in traces])
    pro, con = _handoffs(schedule)
    # the latest a hand-off can have arrived: the receive's end, else the op's first operator
    # (CPU ranges) or the op's start (device clocks)
    arrival = np.where(np.isnan(ready), np.where(device_clock[:, None], start, child), ready)
    observed = arrival[con] - sent[pro]

    def describe(i: int) -> str:
        (rp, kp), (rc, kc) = (pro[0][i], pro[1][i]), (con[0][i], con[1][i])
        ts = arrival[rc, kc] - (traces[rc].base_ns - base) / 1e3  # in the file's own ts
        return (f"{schedule.token(rc, kc)} on rank {rc} ({traces[rc].file}, event "
                f"{traces[rc].labels[kc]!r}) had its input at ts={ts:.3f}, {observed[i]:.1f} us "
                f"after {schedule.token(rp, kp)} sent it on rank {rp} ({traces[rp].file})")

    hosts = [t.host for t in traces]
    offsets, residual = align(hosts, pro[0], con[0], observed, describe)
    origin = np.nanmin(start - offsets[:, None])
    used = _used(schedule)
    start, end, ready, release = (np.where(used, (a - offsets[:, None] - origin) * 1e-6, 0.0)
                                  for a in (start, end, ready, release))
    ready[~used] = np.nan
    times = _split(schedule, start, end, ready, release, device_clock, pro, con)
    operators = np.minimum(operators, times[1])
    return MeasuredRun(schedule, start, end, release, *times, offsets * 1e-6, residual * 1e-6,
                       [t.file for t in traces], hosts, operators,
                       np.minimum(weight_operators, operators), *_probe(traces, schedule.V),
                       injected)


def _probe(traces: list[RankTrace], V: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``MeasuredRun.probe`` and ``probe_fixed`` from the ranks' probe ranges: per stage and
    kind ``B, I, W``, the median operator span and the median of range less operators
    (seconds; NaN where none ran); ``None`` when no rank probed. A probe of a stage the run
    does not have is a damaged trace."""
    rows = np.concatenate([t.probe for t in traces])
    if not len(rows):
        return None, None
    stage, kind = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64)
    bad = np.flatnonzero((stage < 0) | (stage >= V))
    if bad.size:
        raise ScheduleError(f"the run's probe ranges name stage {stage[bad[0]]}, out of range: "
                            f"the run's stages are 0..{V - 1}")
    key = stage * 3 + (kind - B)  # the columns B, I, W
    operators, rest = rows[:, 2] * 1e-6, np.maximum(rows[:, 3] - rows[:, 2], 0.0) * 1e-6
    return tuple(_by_group(key, x, 3 * V, "median").reshape(V, 3) for x in (operators, rest))


def _split(s: Schedule, start, end, ready, release, device_clock, pro, con):
    """Each op's ``wait, compute, overhead, stall``, the ``durations`` a replay runs, when it
    ``handed`` its outputs on and the run's hand-off ``latency`` (seconds; the module docstring
    says what each is)."""
    p, L = s.kind.shape
    used = _used(s)
    first = np.arange(L)[None, :] == 0
    before = np.concatenate([np.zeros((p, 1)), release[:, :-1]], axis=1)  # device free
    takes_input = np.zeros((p, L), bool)
    takes_input[con] = True
    gpu = np.broadcast_to(device_clock[:, None], (p, L))
    # CPU: blocked inside the range, from its start to the receive's end, less the time every
    # op spends before reaching its wait: the least over the ops whose inputs had all left
    # before they began (they did not block; the same runtime code on every rank). A rank may
    # block at every receive, as GPipe's last ones do in the forward, and under a slow link
    # every op does: the least over all ops had then taken the link's delay for that work
    # and priced the consumers' waits as their compute. (An input that left less than a
    # hand-off before its op began may still have blocked it: the least holds as long as one
    # of these ops did not.)
    reach = ready - start
    late = np.zeros((p, L), bool)
    np.logical_or.at(late, con, release[pro] > start[con])
    unblocked = reach[takes_input & ~late & np.isfinite(reach)]
    least = np.min(unblocked) if unblocked.size else 0.0
    inside = np.where(np.isfinite(reach), np.maximum(reach - least, 0.0), 0.0)
    inside = np.where(gpu, 0.0, inside)
    gap = np.maximum(start - before, 0.0)  # before the range: posting receives, the scheduler
    gap_wait = np.where(first | (gpu & takes_input), gap, 0.0)  # devices idle before an op
    wait = np.where(used, inside + gap_wait, 0.0)
    compute = np.where(used, end - start - inside, 0.0)
    overhead = np.where(used, gap - gap_wait + np.maximum(release - end, 0.0), 0.0)
    # the latency: ops that blocked on an input whose producer released it only after the op
    # began waiting (the wait is then the hand-off's own)
    latest = np.full((p, L), -np.inf)
    np.maximum.at(latest, con, release[pro])
    began = np.where(gpu | first, before, start)
    busy = end - compute  # the wait over: inputs in, device free
    blocked = used & (busy - began > BLOCKED) & (latest > began)
    gaps = (busy - latest)[blocked]
    latency = max(0.0, float(np.median(gaps))) if gaps.size else 0.0
    # an output a consumer on another device had before its producer's release left earlier
    # (sends posted inside the range, a send's range outlasting the transfer): the producer's
    # slot ends in time for it to come after the latency, no earlier than its own work began
    arrived = np.full((p, L), np.inf)
    np.minimum.at(arrived, pro, busy[con])
    handed = np.where(arrived < release, np.maximum(arrived - latency, busy), release)
    handed = np.where(used, handed, 0.0)
    opens = np.concatenate([np.zeros((p, 1)), handed[:, :-1]], axis=1)  # the op's slot
    inputs = np.full((p, L), -np.inf)
    np.maximum.at(inputs, con, handed[pro])
    # the engine idles until the producer's handed plus the latency, then runs the op's
    # whole slot; that idle can stand for the op's wait and for the work before it (posting
    # receives overlaps the wait). The rest of a wait (an input sent before its receive was
    # posted comes a rendezvous later, ...) the device pays anyway: its stall.
    due = inputs + latency  # -inf without an input from another device
    idle = np.where(used, np.clip(due - opens, 0.0, busy - opens), 0.0)
    stall = np.where(used, np.clip(busy - due, 0.0, wait), 0.0)
    durations = np.where(used, handed - opens - idle, 0.0)
    return wait, compute, overhead, stall, durations, handed, latency


def _ranked(traces: list[RankTrace]) -> list[RankTrace]:
    """The traces in rank order, every rank ``0..p-1`` once."""
    by_rank: dict[int, RankTrace] = {}
    for t in traces:
        if t.rank in by_rank:
            raise ScheduleError(f"{t.file}: rank {t.rank}: duplicate rank, also in "
                                f"{by_rank[t.rank].file} (two runs in one folder?)")
        by_rank[t.rank] = t
    worlds = {t.world_size for t in traces if t.world_size is not None}
    if len(worlds) > 1:
        shown = ", ".join(f"{t.file} (world size {t.world_size})" for t in traces
                          if t.world_size is not None)
        raise ScheduleError(f"two runs mixed: the files' world sizes differ: {shown}")
    p = worlds.pop() if worlds else max(by_rank) + 1
    missing = [r for r in range(p) if r not in by_rank]
    if missing:
        raise ScheduleError(f"missing rank(s) {missing[:_SHOWN]} of world size {p}: found files "
                            f"for ranks {sorted(by_rank)[:_SHOWN]} "
                            f"({', '.join(t.file for t in traces[:_SHOWN])})")
    extra = [r for r in by_rank if r >= p]
    if extra:
        raise ScheduleError(f"{by_rank[extra[0]].file}: rank {extra[0]}: out of range for world "
                            f"size {p}")
    return [by_rank[r] for r in range(p)]


def _one_run(traces: list[RankTrace]) -> None:
    """Ranks on one host share a clock, and one run's ranks are busy at overlapping times: a
    gap between them longer than the longest rank's span means two runs."""
    by_host: dict[str, list[RankTrace]] = {}
    for t in traces:
        by_host.setdefault(t.host, []).append(t)
    for host, group in by_host.items():
        spans = sorted(((t.base_ns / 1e3 + t.start.min(), t.base_ns / 1e3 + t.end.max(), t)
                        for t in group if len(t.labels)), key=lambda x: x[0])
        longest = max((b - a for a, b, _ in spans), default=0.0)
        reach, owner = -np.inf, None
        for a, b, t in spans:
            if owner is not None and a - reach > longest:
                raise ScheduleError(
                    f"two runs mixed on host {host!r}: {t.file} (rank {t.rank}) starts "
                    f"{(a - reach) * 1e-6:.3f} s after {owner.file} (rank {owner.rank}) ended, "
                    f"more than one rank's whole span ({longest * 1e-6:.3f} s)")
            if b > reach:
                reach, owner = b, t


def _each_once(traces: list[RankTrace], ops: np.ndarray, rank: np.ndarray, index: np.ndarray):
    """Each op once in the run (``ops`` rows in rank order, each with its ``rank`` and
    ``index`` in its trace): the first repeat in that order is named, with its first copy."""
    order = np.lexsort(ops.T[::-1])  # stable: equal ops stay in rank order
    repeats = order[1:][np.all(ops[order[1:]] == ops[order[:-1]], axis=1)]
    if not repeats.size:
        return
    again = repeats.min()
    first = np.flatnonzero(np.all(ops == ops[again], axis=1))[0]
    t, k = traces[rank[again]], index[again]
    r0, k0 = rank[first], index[first]
    raise ScheduleError(
        f"{t.file}: rank {t.rank}: event {t.labels[k]!r} at ts={t.start[k]:.3f}: duplicate op "
        f"{format_op(*ops[again].tolist())}, also at ts={traces[r0].start[k0]:.3f} on rank {r0} "
        f"({traces[r0].file}). A trace of several steps? Profile one step.")


def _schedule(traces: list[RankTrace], ops: np.ndarray, rank: np.ndarray,
              index: np.ndarray) -> Schedule:
    """The devices' orders as a validated ``Schedule``, after naming what is out of range or
    missing (the schedule's own check would only name the first problem). ``ops`` holds every
    op once, in rank order, with its ``rank`` and ``index`` in its trace."""
    p = len(traces)
    pair = ops[:, 0] == FB
    stages = np.unique(np.concatenate([ops[:, 1], ops[pair, 3]]))
    gaps = np.flatnonzero(stages != np.arange(len(stages)))
    V = int(gaps[0]) if gaps.size else len(stages)
    n = _forwards(ops)
    for t in traces:
        pair = t.ops[:, 0] == FB
        for stage, mb in ((t.ops[:, 1], t.ops[:, 2]),
                          (np.where(pair, t.ops[:, 3], 0), np.where(pair, t.ops[:, 4], 0))):
            k = int(np.argmax((stage >= V) | (mb >= n)))
            if stage[k] >= V:
                rule = (f"stage {stage[k]} is out of range: the run's stages are 0..{V - 1} (no "
                        f"op of stage {V} ran)")
            elif mb[k] >= n:
                rule = (f"microbatch {mb[k]} is out of range: most stages ran n={n} forwards "
                        f"(microbatches 0..{n - 1})")
            else:
                continue
            raise ScheduleError(f"{t.file}: rank {t.rank}: event {t.labels[k]!r} at "
                                f"ts={t.start[k]:.3f}: {rule}")
    owner = _owners(traces, ops, rank, index, V)
    forward_only = bool(np.all(ops[:, 0] == F))
    count, missing = _missing(ops, V, n, forward_only)
    if count:
        shown = ", ".join(f"{text} (rank {owner[s]}, {traces[owner[s]].file})"
                          for text, s in missing)
        more = f" and {count - _SHOWN} more" if count > _SHOWN else ""
        raise ScheduleError(f"the run is missing {count} op(s): {shown}{more} (a trace "
                            f"cut short, or the profiler dropped events?)")
    L = max(len(t.labels) for t in traces)
    block = np.full((5, p, max(L, 1)), PAD, np.int64)
    for t in traces:
        block[:, t.rank, : len(t.labels)] = t.ops.T
    m = max(1, round(V / p))
    try:
        return Schedule(block, [len(t.labels) for t in traces], owner.tolist(), n=n, m=m,
                        name="measured", forward_only=forward_only)
    except ScheduleError as err:
        raise ScheduleError(f"the ranks' orders ({', '.join(t.file for t in traces)}) are not "
                            f"a valid schedule: {err}") from None


def _forwards(ops: np.ndarray) -> int:
    """``n``: the number of forwards most stages ran (of equally common counts, the largest:
    a trace more often loses an event than gains one, so that the stage short of it is named
    as missing an op, not the others as holding one too many)."""
    forward = ops[np.isin(ops[:, 0], (F, FB)), 1]
    if not forward.size:
        return 0
    counts = np.unique(forward, return_counts=True)[1]
    values, often = np.unique(counts, return_counts=True)
    return int(values[np.lexsort((-values, -often))[0]])


def _owners(traces: list[RankTrace], ops: np.ndarray, rank: np.ndarray, index: np.ndarray,
            V: int) -> np.ndarray:
    """The rank of each stage ``0..V-1``; a stage on two ranks is named at its first op on the
    second (a pair's backward stage counts after its forward stage)."""
    pair = np.flatnonzero(ops[:, 0] == FB)
    at = np.concatenate([np.arange(len(ops)), pair])
    stage = np.concatenate([ops[:, 1], ops[pair, 3]])
    order = np.lexsort((np.arange(len(at)) >= len(ops), at))
    at, stage = at[order], stage[order]
    owner = np.zeros(V, np.int64)
    _, first = np.unique(stage, return_index=True)  # every stage 0..V-1 ran
    owner[stage[first]] = rank[at[first]]
    clash = np.flatnonzero(rank[at] != owner[stage])
    if clash.size:
        i = at[clash[0]]
        r, k, s = rank[i], index[i], stage[clash[0]]
        raise ScheduleError(
            f"{traces[r].file}: rank {r}: event {traces[r].labels[k]!r}: stage {s} also ran on "
            f"rank {owner[s]} ({traces[owner[s]].file}); a stage lives on one rank")
    return owner


def _missing(ops: np.ndarray, V: int, n: int, forward_only: bool) -> tuple[int, list]:
    """How many ops the run lacks (every stage ``0..V-1`` runs microbatches ``0..n-1``), and the
    first ``_SHOWN`` of them, by stage then microbatch, as ``(text, stage)``."""
    kind, s, j, s2, j2 = ops.T
    pair = kind == FB
    done = np.zeros((4, V, n), bool)  # by kind F, B, I, W
    done[kind[~pair], s[~pair], j[~pair]] = True
    done[F, s[pair], j[pair]] = True
    done[B, s2[pair], j2[pair]] = True
    has_f, has_b, has_i, has_w = done
    lacks = np.zeros((V, n, 2), bool)  # the forward; the backward or a half of a split one
    lacks[..., 0] = ~has_f
    if not forward_only:
        lacks[..., 1] = (~has_b & ~has_i & ~has_w) | (has_i != has_w)
    found = np.flatnonzero(lacks)
    shown = []
    for at in found[:_SHOWN].tolist():
        stage, mb, half = at // (2 * n), at // 2 % n, at % 2
        if not half:
            what = F
        elif has_i[stage, mb] or has_w[stage, mb]:
            what = W if has_i[stage, mb] else I
        else:
            what = B
        shown.append((format_op(what, stage, mb), stage))
    return len(found), shown


def _handoffs(s: Schedule) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Every cross-device hand-off: ``(producer (r, k), consumer (r, k))`` index arrays (the
    edges of ``fastpp.dependencies.edges`` that cross devices)."""
    rs, ks, producer = edges(s)
    consumer = np.repeat(np.arange(len(rs)), 2)
    producer = producer.reshape(-1)
    has = producer >= 0
    producer, consumer = producer[has], consumer[has]
    cross = rs[producer] != rs[consumer]
    producer, consumer = producer[cross], consumer[cross]
    return (rs[producer], ks[producer]), (rs[consumer], ks[consumer])


MeasuredRun.__init__ = known_keywords("MeasuredRun")(MeasuredRun.__init__)
