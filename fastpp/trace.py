"""Chrome / Perfetto traces of a simulated schedule, with the real op durations."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .checks import ScheduleError, atomic_write, file_path, instance, number, writable
from .dependencies import inputs, producers
from .ops import FB, Op
from .simulate import Result


def check_run(run):
    """``run`` if it is a ``fastpp.MeasuredRun`` (pandas imported only here).

    Parameters
    ----------
    run : fastpp.MeasuredRun

    Returns
    -------
    fastpp.MeasuredRun
        ``run`` itself.

    Raises
    ------
    ScheduleTypeError
        If ``run`` is something else.
    """
    from .measured import MeasuredRun

    return instance(run, MeasuredRun, "run", "fastpp.MeasuredRun")


def chrome_trace(result: Result, time_scale: float = 1000.0) -> dict:
    """The trace as a dict in the Chrome trace event format.

    One process per device; one complete slice per op, named in the ``0F0`` form, at its
    simulated start and duration, with stage, microbatch and kind as arguments; flow arrows
    from every op to the op on another device that waits for its output; and a counter track
    of each device's activation memory.

    Parameters
    ----------
    result : Result
        From ``fastpp.simulate``.
    time_scale : float
        Microseconds per unit of simulated time (default 1000: one unit shows as 1 ms).

    Returns
    -------
    dict
        ``traceEvents``, ``displayTimeUnit`` and ``otherData`` (the schedule, ``p``, ``n``,
        ``m``, ``makespan`` and ``bubble_ratio``).

    Raises
    ------
    ScheduleError
        If ``result`` is not a ``Result`` (a ``ScheduleTypeError``) or ``time_scale`` not a
        number > 0.
    """
    instance(result, Result, "result", "fastpp.Result")
    time_scale = number(time_scale, "time_scale", strict=True)
    # every time scaled stays finite (twice the makespan: a margin for times from a later
    # origin): a file holding Infinity is no JSON a viewer reads
    if not math.isfinite(2.0 * result.makespan * time_scale):
        raise ScheduleError(f"time_scale must keep the times finite (got {time_scale!r} for a "
                            f"makespan of {result.makespan:g})")
    sched = result.schedule
    events: list[dict] = []
    for r in range(sched.p):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                       "args": {"name": f"device {r}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                       "args": {"sort_index": r}})
        for k in range(sched.length[r]):
            kind, s, j, s2, j2 = (int(x) for x in sched.ops[:, r, k])
            start, end = result.start[r, k] * time_scale, result.end[r, k] * time_scale
            args = {"kind": Op(kind).name, "stage": s, "microbatch": j}
            if kind == FB:
                args.update(backward_stage=s2, backward_microbatch=j2)
            events.append({"ph": "X", "name": sched.token(r, k), "cat": Op(kind).name, "pid": r,
                           "tid": 0, "ts": start, "dur": end - start, "args": args})
        times, values = result.memory_curve(r)
        for t, v in zip(times, values, strict=True):
            events.append({"ph": "C", "name": "activations", "pid": r, "ts": t * time_scale,
                           "args": {"units": float(v)}})
    producer = producers(sched)
    flow = 0
    for r in range(sched.p):
        for k in range(sched.length[r]):
            for source in inputs(sched, r, k):
                rp, kp = producer[source]
                if rp == r:  # a hand-off only between devices
                    continue
                flow += 1
                # a flow start binds to the slice enclosing it: at the producer's end it is the
                # next op's start too, and Perfetto (a slice sorts before a flow at one ts)
                # drew the arrow from that next op; its middle is inside it alone
                middle = (result.start[rp, kp] + result.end[rp, kp]) / 2
                events.append({"ph": "s", "id": flow, "name": "hand-off", "cat": "hand-off",
                               "pid": rp, "tid": 0, "ts": middle * time_scale})
                events.append({"ph": "f", "bp": "e", "id": flow, "name": "hand-off",
                               "cat": "hand-off", "pid": r, "tid": 0,
                               "ts": result.start[r, k] * time_scale})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schedule": sched.name, "p": sched.p, "n": sched.n, "m": sched.m,
                          "makespan": result.makespan, "bubble_ratio": result.bubble_ratio}}


def write_chrome_trace(result: Result, path, time_scale: float = 1000.0) -> Path:
    """Write ``chrome_trace(result)`` as JSON; open it in https://ui.perfetto.dev or
    chrome://tracing.

    Parameters
    ----------
    result : Result
        From ``fastpp.simulate``.
    path : path
        The JSON file to write.
    time_scale : float
        As for ``chrome_trace``.

    Returns
    -------
    Path
    """
    return _write_json(file_path(path), lambda: chrome_trace(result, time_scale))


def _write_json(path: Path, make) -> Path:
    # the trace is made (and its inputs checked) before the file is opened for writing
    text = json.dumps(make())
    with writable(path):
        atomic_write(path, lambda tmp: tmp.write_text(text))
    return path


def measured_slices(ops):
    """Where a measured op's wait ends and its work begins: ``end - compute`` for each row of
    ``MeasuredRun.ops`` (seconds). The wait runs from ``begin - wait`` to ``begin``, the work
    to ``release``: inside the op's range on CPU, before it for a device's first op (from the
    run's start) and with device clocks (the idle gap), so neither slice is ever negative.

    Parameters
    ----------
    ops : pandas.DataFrame
        ``MeasuredRun.ops``.

    Returns
    -------
    wait_start, begin, release : ndarray
    """
    begin = (ops["end"] - ops["compute"]).to_numpy()
    return begin - ops["wait"].to_numpy(), begin, ops["release"].to_numpy()


def measured_trace(run, result) -> dict:
    """A measured run and a simulation of it in one Chrome trace: per device one process with
    a ``measured`` track (each op from the end of its wait for an input, a ``wait`` slice, to
    its release: its sends posted; ``measured_slices``) above a ``simulated`` track
    (``chrome_trace(result)``'s slices, flows and memory).

    Parameters
    ----------
    run : fastpp.MeasuredRun
        From ``fastpp.read_torch_trace`` (seconds).
    result : Result
        A simulation of ``run.schedule`` in seconds, e.g. ``run.replay()``.

    Returns
    -------
    dict
        As ``chrome_trace``'s, its ``otherData`` also holding ``measured_makespan``.

    Raises
    ------
    ScheduleTypeError
        If ``run`` is not a ``MeasuredRun`` or ``result`` not a ``Result``.
    """
    check_run(run)
    trace = chrome_trace(result, time_scale=1e6)  # seconds to microseconds
    events = trace["traceEvents"]
    for event in events:
        if event["ph"] in ("X", "s", "f"):
            event["tid"] = 1
    for r in range(result.schedule.p):
        for tid, name in ((0, "measured"), (1, "simulated")):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                           "args": {"name": name}})
    slices = zip(*measured_slices(run.ops), strict=True)
    for op, (waited, begin, release) in zip(run.ops.itertuples(index=False), slices, strict=True):
        args = {"kind": op.kind, "stage": int(op.stage), "microbatch": int(op.microbatch),
                "compute_us": op.compute * 1e6, "overhead_us": op.overhead * 1e6,
                "wait_us": op.wait * 1e6, "stall_us": op.stall * 1e6}
        if op.wait > 0:
            events.append({"ph": "X", "name": "wait", "cat": "wait", "pid": int(op.device),
                           "tid": 0, "ts": waited * 1e6, "dur": (begin - waited) * 1e6})
        events.append({"ph": "X", "name": op.label, "cat": op.kind, "pid": int(op.device),
                       "tid": 0, "ts": begin * 1e6, "dur": (release - begin) * 1e6,
                       "args": args})
    trace["otherData"].update(measured_makespan=run.makespan)
    return trace


def write_measured_trace(run, result, path) -> Path:
    """Write ``measured_trace(run, result)`` as JSON (open it in https://ui.perfetto.dev).

    Parameters
    ----------
    run : fastpp.MeasuredRun
    result : Result
        As for ``measured_trace``.
    path : path
        The JSON file to write.

    Returns
    -------
    Path
    """
    return _write_json(file_path(path), lambda: measured_trace(run, result))
