"""``MeasuredRun``: a real pipeline run as fastpp sees it, and ``read_torch_trace``.

Each compute op's time on its device is split three ways (seconds):

- ``wait``: blocked on an input. PyTorch posts a receive in a ``RECV_*`` action and waits for it
  at the start of the compute action that needs it; the receive's own profiler range
  (``gloo:recv``) ends when that wait returns. So ``wait`` is the receive's end minus the range
  start, less the time every op spends before it reaches its wait (the device's smallest such
  gap over its ops: one that did not block). With device clocks (GPU ranges, CUDA events) the
  wait is the idle gap before an op that takes an input from another device.
- ``compute``: the rest of the op's range (its operators and the Python around them).
- ``overhead``: the device's time after the range until its next op's range: posting sends and
  receives, the scheduler's bookkeeping. It is work, not waiting, so the replay charges it.

The replay gives the engine ``compute + overhead`` for every op (``durations``), and the
hand-off latency measured from the ops that blocked, so the engine re-derives the waits.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from ..checks import ScheduleError, one_of
from ..costs import Costs
from ..ops import FB, PAD, B, F, I, Op, W, format_op
from ..schedule import Schedule
from ..simulate import Result, simulate
from .align import align
from .read import RankTrace, read_file, trace_files

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
        One row per op: ``device, position, label``, the measured and simulated ``start`` (the
        op's inputs ready and its device free) and ``end`` (its device free again), and
        ``late``: how much later the measured op ended, ``lost``: how much of that this op
        added (``late`` minus its device's previous op's ``late``).
    measured, simulated : float
        The makespans (seconds).
    error : float
        ``simulated / measured - 1``.
    device, op : int, str
        Where the most time was lost: the op with the largest ``lost``, and its device.
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
                f"({self.error:+.2%}); most time lost at {self.op} on device {self.device} "
                f"({self.lost * 1e3:+.3f} ms)")


class MeasuredRun:
    """A real pipeline run read from its per-rank traces (``fastpp.read_torch_trace``).

    Times are seconds from the run's start (its first op's start), on rank 0's host's clock.

    Attributes
    ----------
    schedule : Schedule
        The order each device ran its ops, validated.
    p, n, m : int
        Devices (ranks), microbatches, chunks per device.
    makespan : float
        First op start to last op end over all ranks.
    start, end, wait, compute, overhead : ndarray, shape (p, L)
        Per op, like ``schedule.kind``: its range, and its time split (module docstring).
    offsets : ndarray, shape (p,)
        How far each rank's clock was ahead of rank 0's host's (seconds, subtracted); 0 on
        rank 0's host.
    offset_residual : float
        How far the true offsets can be from ``offsets`` given the hand-offs (seconds).
    latency : float
        The hand-off latency: median over the ops that blocked of the time from their
        producer's device being free to them starting (seconds, >= 0).
    files : list of str
        Rank ``r``'s file at ``files[r]``.
    hosts : list of str
        Rank ``r``'s host.
    """

    def __init__(self, schedule: Schedule, start, end, wait, compute, overhead, offsets,
                 offset_residual: float, latency: float, files: list[str], hosts: list[str]):
        self.schedule = schedule
        self.p, self.n, self.m = schedule.p, schedule.n, schedule.m
        self.start, self.end, self.wait = start, end, wait
        self.compute, self.overhead = compute, overhead
        self.offsets = offsets
        self.offset_residual = float(offset_residual)
        self.latency = float(latency)
        self.files, self.hosts = files, hosts
        used = _used(schedule)
        self.makespan = float(end[used].max() - start[used].min())

    def __repr__(self) -> str:
        return (f"MeasuredRun(p={self.p}, n={self.n}, m={self.m}, ops={self.schedule.num_ops}, "
                f"makespan={self.makespan:.6g} s)")

    @property
    def durations(self) -> np.ndarray:
        """Each op's time on its device without its wait: ``compute + overhead``, the
        ``durations`` a replay simulates."""
        return self.compute + self.overhead

    @cached_property
    def ops(self) -> pd.DataFrame:
        """One row per op: ``device, position`` (its place in ``schedule``'s op matrix),
        ``label, kind, stage, microbatch, stage2, microbatch2`` (the backward half of an
        overlapped pair, else -1), ``start, end, wait, compute, overhead`` (seconds)."""
        s = self.schedule
        used = _used(s)
        device, position = np.nonzero(used)
        kinds = np.array([op.name for op in Op])
        return pd.DataFrame({
            "device": device, "position": position,
            "label": [s.token(r, k) for r, k in zip(device, position, strict=True)],
            "kind": kinds[s.kind[used]], "stage": s.stage[used], "microbatch": s.mb[used],
            "stage2": s.stage2[used], "microbatch2": s.mb2[used],
            "start": self.start[used], "end": self.end[used], "wait": self.wait[used],
            "compute": self.compute[used], "overhead": self.overhead[used]})

    def costs(self, per: str = "device") -> Costs:
        """Costs calibrated from the run, in fastpp's units (seconds).

        ``f``, ``b``, ``w`` and ``fb`` are medians of the ops' ``durations`` (compute and
        overhead) times ``m`` (a chunk op takes ``f/m``): ``b`` of the full backwards, or of
        ``I`` plus ``W`` in a split schedule, ``w`` of the ``W`` ops (0 without); ``comm`` is
        ``latency``. ``gamma`` and ``act`` keep their defaults (a trace has no memory).

        Parameters
        ----------
        per : {"device", "stage"}
            ``"device"``: arrays over the ``p`` devices, which any schedule on ``p`` devices
            accepts (with its own ``m``); ``"stage"``: arrays over the ``V`` virtual stages of
            this run's placement.
        """
        one_of(per, "per", ("device", "stage"))
        s = self.schedule
        used = _used(s)
        group = (np.broadcast_to(np.arange(s.p)[:, None], s.kind.shape) if per == "device"
                 else s.stage)
        size = s.p if per == "device" else s.V
        dur = self.durations

        def median(kind) -> np.ndarray:
            out = np.full(size, np.nan)
            pick = used & (s.kind == kind)
            for g in range(size):
                values = dur[pick & (group == g)]
                if values.size:
                    out[g] = np.median(values)
            return out * s.m

        f, full, i, w, fb = median(F), median(B), median(I), median(W), median(FB)
        split = np.isfinite(i) & np.isfinite(w)
        b = np.where(np.isfinite(full), full, np.where(split, i + w, np.nan))
        w = np.where(np.isfinite(w), np.minimum(w, b), 0.0)
        tiny = 1e-12  # a positive floor: Costs needs f, b > 0 even where every op took 0
        if not np.all(np.isfinite(f)) or not np.all(np.isfinite(b)):
            # forward-only runs and stages without a backward: only what was measured counts
            b = np.where(np.isfinite(b), b, f)
        has_pair = np.isfinite(fb)
        return Costs(np.maximum(f, tiny), np.maximum(b, tiny), w=w, comm=self.latency,
                     fb=np.where(has_pair, np.maximum(fb, tiny), f + b) if has_pair.any()
                     else None)

    def replay(self) -> Result:
        """The run's own schedule simulated with every op's measured ``durations`` and the
        measured hand-off ``latency``."""
        return simulate(self.schedule, self.costs(per="stage"), durations=self.durations)

    def compare(self, result: Result) -> Comparison:
        """Measured against simulated, op by op (``result`` simulates this run's schedule,
        e.g. ``replay()``, or ``simulate(run.schedule, costs)`` for calibrated costs)."""
        if not isinstance(result, Result):
            raise ScheduleError(f"result must be a fastpp.Result (got {type(result).__name__})")
        s = self.schedule
        if result.schedule.tokens() != s.tokens():
            raise ScheduleError(f"result must simulate this run's schedule (got "
                                f"{result.schedule!r}, the run is {s!r})")
        used = _used(s)
        busy_start = self.end - self.compute  # inputs ready, device free: the engine's start
        free = self.end + self.overhead
        late = np.where(used, free - result.end, 0.0)
        lost = late - np.concatenate([np.zeros((s.p, 1)), late[:, :-1]], axis=1)
        device, position = np.nonzero(used)
        table = pd.DataFrame({
            "device": device, "position": position,
            "label": [s.token(r, k) for r, k in zip(device, position, strict=True)],
            "measured_start": busy_start[used], "measured_end": free[used],
            "simulated_start": result.start[used], "simulated_end": result.end[used],
            "late": late[used], "lost": lost[used]})
        worst = int(np.argmax(table["lost"].to_numpy()))
        return Comparison(table, self.makespan, result.makespan,
                          result.makespan / self.makespan - 1.0, int(table["device"][worst]),
                          str(table["label"][worst]), float(table["lost"][worst]))


def _used(s: Schedule) -> np.ndarray:
    return np.arange(s.kind.shape[1]) < s.length[:, None]


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
    return build_run([read_file(f) for f in files])


def build_run(traces: list[RankTrace]) -> MeasuredRun:
    """A ``MeasuredRun`` from the ranks' parsed traces (``read.read_file``)."""
    traces = _ranked(traces)
    p = len(traces)
    _one_run(traces)
    where: dict[tuple, tuple[int, int]] = {}  # op -> (rank, index in its trace)
    for t in traces:
        missing_stage = t.ops[:, 1] < 0
        t.ops[missing_stage, 1] = t.chunk[missing_stage] * p + t.rank
        for k, op in enumerate(map(tuple, t.ops.tolist())):
            if op in where:
                r0, k0 = where[op]
                first = traces[r0]
                raise ScheduleError(
                    f"{t.file}: rank {t.rank}: event {t.labels[k]!r} at ts={t.start[k]:.3f}: "
                    f"duplicate op {format_op(*op)}, also at ts={first.start[k0]:.3f} on rank "
                    f"{r0} ({first.file}). A trace of several steps? Profile one step.")
            where[op] = (t.rank, k)
    schedule = _schedule(traces, where)
    L = schedule.kind.shape[1]
    base = min(t.base_ns for t in traces)
    shape = (p, L)
    start, end, child, ready, sent = (np.full(shape, np.nan) for _ in range(5))
    for t in traces:  # microseconds on each host's raw clock
        shift = (t.base_ns - base) / 1e3
        k = len(t.labels)
        start[t.rank, :k], end[t.rank, :k] = t.start + shift, t.end + shift
        sent[t.rank, :k] = (t.end if t.sent is None else t.sent) + shift
        child[t.rank, :k], ready[t.rank, :k] = t.first_child + shift, t.ready + shift
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
                f"after {schedule.token(rp, kp)} ended on rank {rp} ({traces[rp].file})")

    hosts = [t.host for t in traces]
    offsets, residual = align(hosts, pro[0], con[0], observed, describe)
    for a in (start, end, child, ready, arrival):
        a -= offsets[:, None]
    origin = np.nanmin(start)
    start, end, child, ready, arrival = ((a - origin) * 1e-6 for a in
                                         (start, end, child, ready, arrival))
    wait = _waits(schedule, start, end, ready, device_clock, con)
    used = _used(schedule)
    nxt = np.concatenate([start[:, 1:], np.full((p, 1), np.nan)], axis=1)
    nxt_wait = np.concatenate([wait[:, 1:], np.zeros((p, 1))], axis=1)
    last = np.arange(L)[None, :] == (schedule.length[:, None] - 1)
    overhead = np.where(last, 0.0, nxt - end - np.where(device_clock[:, None], nxt_wait, 0.0))
    overhead = np.where(used, np.maximum(overhead, 0.0), 0.0)
    compute = np.where(used, end - start - np.where(device_clock[:, None], 0.0, wait), 0.0)
    for a in (start, end, wait):
        a[~used] = 0.0
    busy_start = end - compute
    blocked = wait[con] > BLOCKED
    gaps = busy_start[con][blocked] - (end + overhead)[pro][blocked]
    latency = max(0.0, float(np.median(gaps))) if gaps.size else 0.0
    return MeasuredRun(schedule, start, end, wait, compute, overhead, offsets * 1e-6,
                       residual * 1e-6, latency, [t.file for t in traces], hosts)


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


def _schedule(traces: list[RankTrace], where: dict) -> Schedule:
    """The devices' orders as a validated ``Schedule``, after naming what is out of range or
    missing (the schedule's own check would only name the first problem)."""
    p = len(traces)
    stages = sorted({s for t in traces for s in t.ops[:, 1].tolist()}
                    | {s for t in traces for s in t.ops[t.ops[:, 0] == FB, 3].tolist()})
    V = next((v for v, s in enumerate(stages) if s != v), len(stages))
    forwards = Counter(s for (kind, s, *_rest) in where if kind in (F, FB))
    n = Counter(forwards.values()).most_common(1)[0][0] if forwards else 0
    for t in traces:
        for k, (kind, s, j, s2, j2) in enumerate(t.ops.tolist()):
            parts = [(s, j)] + ([(s2, j2)] if kind == FB else [])
            for stage, mb in parts:
                if stage >= V:
                    raise ScheduleError(
                        f"{t.file}: rank {t.rank}: event {t.labels[k]!r} at ts={t.start[k]:.3f}: "
                        f"stage {stage} is out of range: the run's stages are 0..{V - 1} "
                        f"(no op of stage {V} ran)")
                if mb >= n:
                    raise ScheduleError(
                        f"{t.file}: rank {t.rank}: event {t.labels[k]!r} at ts={t.start[k]:.3f}: "
                        f"microbatch {mb} is out of range: most stages ran n={n} forwards "
                        f"(microbatches 0..{n - 1})")
    owner: dict[int, int] = {}
    for (kind, s, _, s2, _), (r, k) in where.items():
        for stage in (s, s2) if kind == FB else (s,):
            if owner.setdefault(stage, r) != r:
                raise ScheduleError(
                    f"{traces[r].file}: rank {r}: event {traces[r].labels[k]!r}: stage {stage} "
                    f"also ran on rank {owner[stage]} ({traces[owner[stage]].file}); a stage "
                    f"lives on one rank")
    forward_only = not any(kind != F for (kind, *_rest) in where)
    missing = _missing(where, V, n, forward_only)
    if missing:
        shown = ", ".join(f"{text} (rank {owner[s]}, {traces[owner[s]].file})"
                          for text, s in missing[:_SHOWN])
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise ScheduleError(f"the run is missing {len(missing)} op(s): {shown}{more} (a trace "
                            f"cut short, or the profiler dropped events?)")
    L = max(len(t.labels) for t in traces)
    ops = np.full((5, p, max(L, 1)), PAD, np.int64)
    for t in traces:
        ops[:, t.rank, : len(t.labels)] = t.ops.T
    m = max(1, round(V / p))
    try:
        return Schedule(ops, [len(t.labels) for t in traces], [owner[s] for s in range(V)], n=n,
                        m=m, name="measured", forward_only=forward_only)
    except ScheduleError as err:
        raise ScheduleError(f"the ranks' orders ({', '.join(t.file for t in traces)}) are not "
                            f"a valid schedule: {err}") from None


def _missing(where: dict, V: int, n: int, forward_only: bool) -> list[tuple[str, int]]:
    done = set()
    for kind, s, j, s2, j2 in where:
        if kind == FB:
            done |= {(F, s, j), (B, s2, j2)}
        else:
            done.add((kind, s, j))
    out = []
    for s in range(V):
        for j in range(n):
            if (F, s, j) not in done:
                out.append((format_op(F, s, j), s))
            if forward_only:
                continue
            has_i, has_w = (I, s, j) in done, (W, s, j) in done
            if (B, s, j) not in done and not (has_i or has_w):
                out.append((format_op(B, s, j), s))
            elif has_i != has_w:
                out.append((format_op(W if has_i else I, s, j), s))
    return out


def _handoffs(s: Schedule) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Every cross-device hand-off: ``(producer (r, k), consumer (r, k))`` index arrays (the
    inputs of ``Schedule.inputs``, for all ops at once)."""
    rs, ks = np.nonzero(_used(s))
    kind, st, mb, st2, mb2 = (x.astype(np.int64) for x in s.ops[:, rs, ks])
    index = np.arange(len(rs))
    fwd = np.full((s.V, s.n), -1)  # the op that made F(s, j)'s output
    grad = np.full((s.V, s.n), -1)  # the op that made the input gradient of stage s, mb j
    has_f = (kind == F) | (kind == FB)
    fwd[st[has_f], mb[has_f]] = index[has_f]
    has_g = (kind == B) | (kind == I)
    grad[st[has_g], mb[has_g]] = index[has_g]
    pair = kind == FB
    grad[st2[pair], mb2[pair]] = index[pair]
    first, last = s.route_first.astype(np.int64), s.route_last.astype(np.int64)
    needs_f = has_f & (st > first[mb])
    needs_g = has_g & (st < last[mb])
    needs_pair_g = pair & (st2 < last[np.maximum(mb2, 0)])
    producer = np.concatenate([fwd[st[needs_f] - 1, mb[needs_f]], grad[st[needs_g] + 1,
                               mb[needs_g]], grad[st2[needs_pair_g] + 1, mb2[needs_pair_g]]])
    consumer = np.concatenate([index[needs_f], index[needs_g], index[needs_pair_g]])
    cross = rs[producer] != rs[consumer]
    producer, consumer = producer[cross], consumer[cross]
    return (rs[producer], ks[producer]), (rs[consumer], ks[consumer])


def _waits(s: Schedule, start, end, ready, device_clock, con) -> np.ndarray:
    """Each op's wait (seconds; module docstring)."""
    wait = np.zeros(start.shape)
    for r in range(s.p):
        L = s.length[r]
        if device_clock[r]:
            before = np.concatenate([[0.0], end[r, : L - 1]])
            takes_input = np.zeros(L, bool)
            takes_input[con[1][con[0] == r]] = True
            wait[r, :L] = np.where(takes_input, np.maximum(start[r, :L] - before, 0.0), 0.0)
            continue
        reach = ready[r, :L] - start[r, :L]
        if np.all(np.isnan(reach)):
            continue
        wait[r, :L] = np.where(np.isnan(reach), 0.0, np.maximum(reach - np.nanmin(reach), 0.0))
    return wait

