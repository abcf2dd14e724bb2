"""Exact search with OR-Tools CP-SAT (the optional extra ``fastpp[search]``).

The model of SEARCH.md section 3: an interval per op, no overlap on a device, precedences with
hand-off latencies, and a reservoir per device for activation memory (``+unit`` at an ``F``'s
start, ``-(1-gamma) unit`` at an ``I``'s end, ``-gamma unit`` at a ``W``'s end). CP-SAT needs
integers: times are scaled and rounded *down*, and memory changes are scaled and rounded so that
the model can only hold less than the engine; the model is then a relaxation, and its bound is
a valid lower bound. Every order it returns is re-simulated by the engine with the real costs
and kept only if it is within the memory limit and better than the warm start.

Symmetry cuts: on each stage the ``F``s run in microbatch order, and so do the ``I``s and the
``W``s (relabelling microbatches first-in-first-out along each chain keeps every time).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass

import numpy as np

from .. import kernels
from ..checks import missing_extra
from ..ops import OP_FIELDS, PAD, SPLIT_KINDS, SPLIT_ROW
from ..schedule import Schedule
from .problem import Problem

MAX_SCALED = 10**7  # largest scaled duration: keeps CP-SAT's integer domains comfortable


@dataclass
class ExactOutcome:
    """What the solver found: an order (or ``None``), the proven bound and CP-SAT's status."""

    ops: np.ndarray | None
    length: np.ndarray | None
    bound: float
    status: str


def available() -> bool:
    """Whether OR-Tools is installed (imported only when a search uses it)."""
    return importlib.util.find_spec("ortools") is not None


def _scale(values: np.ndarray, limit: int = MAX_SCALED) -> float:
    """A power of ten that makes ``values`` integers, or the largest one that keeps them under
    ``limit`` (then they are rounded down)."""
    top = float(np.max(values, initial=0.0))
    for k in range(7):
        scale = 10.0**k
        if top * scale > limit:
            break
        scaled = values * scale
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return scale
    return 10.0 ** np.floor(np.log10(limit / top)) if top > 0 else 1.0


def _floor(x: np.ndarray) -> np.ndarray:
    return np.floor(x + 1e-9 * np.maximum(1.0, np.abs(x))).astype(np.int64)


def solve(problem: Problem, warm: Schedule, time_limit: float, seed: int = 0,
          workers: int | None = None, symmetry: bool = True) -> ExactOutcome:
    """Minimize the problem's objective with CP-SAT, warm-started from ``warm``.

    ``symmetry=False`` leaves out the symmetry cuts (a second formulation, for tests).

    Raises
    ------
    ScheduleError
        Without OR-Tools.
    """
    if not available():
        raise missing_extra("method='exact'", "OR-Tools", "search")
    from ortools.sat.python import cp_model

    p, n = problem.p, problem.n
    device = problem.stage_to_device
    comm = np.where(device[1:] != device[:-1], problem.comm[:-1], 0.0)  # hop s -> s+1
    scale = _scale(np.concatenate([problem.cost.ravel(), comm]))
    dur = _floor(problem.cost * scale)
    hop = _floor(comm * scale)
    model = cp_model.CpModel()
    horizon = int(dur.sum() * n + hop.sum() * 2 * n) + 1
    start, end = _intervals(model, device, p, dur, n, horizon)
    _precedences(model, start, end, hop, symmetry)
    _memory(model, problem, start, end)
    goal = _goal(model, problem, start, end, horizon)
    model.Minimize(goal)
    _hint(model, problem, warm, dur, hop, start)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit))
    solver.parameters.num_workers = workers or max(1, min(8, os.cpu_count() or 1))
    solver.parameters.random_seed = int(seed)
    status = _solve(solver, model)
    name = solver.StatusName(status)
    bound = solver.BestObjectiveBound() / scale if status != cp_model.UNKNOWN else 0.0
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactOutcome(None, None, bound, name)
    ops, length = _order(problem, solver, start, end)
    return ExactOutcome(ops, length, bound, name)


def _solve(solver, model):
    """``solver.Solve(model)`` on a thread of its own, so that Ctrl-C reaches Python: CP-SAT's
    own SIGINT handler stops the search and returns it as though its time had run out, and
    the main thread, held in its C++, would not see the interrupt. On Ctrl-C (or any
    exception in the waiting thread) the search is stopped and the exception raised."""
    solver.parameters.catch_sigint_signal = False
    done, out = threading.Event(), {}

    def run():
        try:
            out["status"] = solver.Solve(model)
        except BaseException as error:  # (raised again in the caller's thread)
            out["error"] = error
        finally:
            done.set()

    # started before the try: a thread that could not start would never set done
    threading.Thread(target=run, name="cp-sat", daemon=True).start()
    try:
        while not done.wait(0.1):  # (an Event's wait takes Ctrl-C; a join may not)
            pass
    except BaseException:  # Ctrl-C, SIGTERM's SystemExit: no solver left running
        solver.StopSearch()
        done.wait()
        raise
    if "error" in out:
        raise out["error"]
    return out["status"]


def _intervals(model, device, p: int, dur, n: int, horizon: int):
    """An interval per op (start and end variables ``[k, s, j]``, rows ``F, I, W``), none
    overlapping another on its device."""
    V = len(device)
    start = np.empty((3, V, n), dtype=object)
    end = np.empty((3, V, n), dtype=object)
    per_device = [[] for _ in range(p)]
    for k in range(3):
        for s in range(V):
            for j in range(n):
                a = model.NewIntVar(0, horizon, f"s{k}_{s}_{j}")
                z = model.NewIntVar(0, horizon, f"e{k}_{s}_{j}")
                per_device[device[s]].append(
                    model.NewIntervalVar(a, int(dur[k, s]), z, f"i{k}_{s}_{j}"))
                start[k, s, j], end[k, s, j] = a, z
    for intervals in per_device:
        model.AddNoOverlap(intervals)
    return start, end


def _precedences(model, start, end, hop, symmetry: bool) -> None:
    """The dependency rule with the hand-offs ``hop[s]`` (stage ``s`` to ``s+1``): a forward
    after the previous stage's, an ``I`` after the next stage's (the last stage's after its
    own forward), a ``W`` after its ``I``; with ``symmetry``, each kind of a stage in
    microbatch order."""
    _, V, n = start.shape
    for j in range(n):
        for s in range(V):
            if s > 0:
                model.Add(start[0, s, j] >= end[0, s - 1, j] + int(hop[s - 1]))
            if s < V - 1:
                model.Add(start[1, s, j] >= end[1, s + 1, j] + int(hop[s]))
            else:
                model.Add(start[1, s, j] >= end[0, s, j])
            model.Add(start[2, s, j] >= end[1, s, j])
            if j > 0 and symmetry:
                for k in range(3):
                    model.Add(start[k, s, j] >= start[k, s, j - 1])


def _goal(model, problem: Problem, start, end, horizon: int):
    """The objective's variable: at least every device's last end (``makespan``), or its last
    end minus its first start (``span``)."""
    device, n = problem.stage_to_device, problem.n
    goal = model.NewIntVar(0, horizon, problem.objective)
    for r in range(problem.p):  # a device's first op is an F of its first stage, its last a W
        mine = np.flatnonzero(device == r)
        last = model.NewIntVar(0, horizon, f"last{r}")
        model.AddMaxEquality(last, [end[2, s, j] for s in mine for j in range(n)])
        if problem.objective == "makespan":
            model.Add(goal >= last)
        else:
            first = model.NewIntVar(0, horizon, f"first{r}")
            model.AddMinEquality(first, [start[0, mine[0], j] for j in range(n)])
            model.Add(goal >= last - first)
    return goal


def _memory(model, problem: Problem, start, end) -> None:
    """One reservoir per device with a limit; changes scaled and rounded so the model never
    holds more than the engine (allocations down, frees up). (Until 7 December 2026 one
    device without a limit left every device without one: a review.)"""
    limited = np.flatnonzero(np.isfinite(problem.cap))
    if not limited.size:
        return
    memd = problem.memd
    scale = _scale(np.concatenate([np.abs(memd).ravel(), problem.limit[limited]]))
    alloc = _floor(memd[0] * scale)
    free = _floor(memd[1:] * scale)  # negative changes rounded down: larger frees
    device, n = problem.stage_to_device, problem.n
    for r in limited:
        times, changes = [], []
        for s in np.flatnonzero(device == r):
            for j in range(n):
                times += [start[0, s, j], end[1, s, j], end[2, s, j]]
                changes += [int(alloc[s]), int(free[0, s]), int(free[1, s])]
        model.AddReservoirConstraint(times, changes, -(2**40),
                                     int(_floor(np.array(problem.cap[r] * scale))))


def _hint(model, problem: Problem, warm: Schedule, dur, hop, start) -> None:
    """Hint the warm start's order, timed as the engine runs it with the scaled costs."""
    V = problem.V
    tf = dur[0].astype(np.float64)
    tw = dur[2].astype(np.float64)
    ti = dur[1].astype(np.float64)
    tb = ti + tw  # (no full backward in a searched schedule)
    comm = np.zeros(V)
    comm[:-1] = hop
    shape = warm.kind.shape
    t0, t1 = np.zeros(shape), np.zeros(shape)
    pointer = np.zeros(warm.p, np.int64)
    if kernels.timeline(warm.ops, warm.length, warm.stage_to_device, warm.route_first,
                        warm.route_last, warm.n, tf, tb, ti, tw, np.full(V, np.nan), np.zeros(V),
                        comm, np.zeros((0, 0)), t0, t1, pointer, np.zeros(0, np.int64)) < 0:
        return
    for r in range(warm.p):
        for k in range(warm.length[r]):
            kind, s, j = (int(x) for x in warm.ops[:3, r, k])
            model.AddHint(start[SPLIT_ROW[kind], s, j], int(round(t0[r, k])))


def _order(problem: Problem, solver, start, end) -> tuple[np.ndarray, np.ndarray]:
    """Each device's ops sorted by their solved start (ties: end, then F < I < W, then along
    the route: a forward's stages up, an input gradient's down, so that zero-length ops
    tied in time keep their dependencies' order, as V's two stages on one device need)."""
    p, n = problem.p, problem.n
    device = problem.stage_to_device
    rows = [[] for _ in range(p)]
    for k in range(3):
        for s in range(problem.V):
            for j in range(n):
                a, z = solver.Value(start[k, s, j]), solver.Value(end[k, s, j])
                rows[device[s]].append((a, z, k, s if k == 0 else -s, j))
    L = max(len(row) for row in rows)
    ops = np.full((OP_FIELDS, p, L), PAD, np.int32)
    length = np.zeros(p, np.int32)
    for r, row in enumerate(rows):
        row.sort()
        for q, (_, _, k, s, j) in enumerate(row):
            ops[:3, r, q] = (SPLIT_KINDS[k], abs(s), j)
        length[r] = len(row)
    return ops, length
