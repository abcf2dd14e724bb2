"""The greedy heuristics: run the kernels' settings, keep the best schedule that fits."""

from __future__ import annotations

import itertools

import numpy as np

from ..generators.registry import SCHEDULES, build_schedule
from ..ops import new_ops
from .list_scheduler import list_schedule
from .problem import Problem
from .v_greedy import v_greedy
from .zb_greedy import zb_best

# the authors' order of the 8 runs: allow_bubble_before_first_b outermost, True before False
ZB_SETTINGS = tuple(itertools.product((True, False), repeat=3))
V_SETTINGS = tuple(itertools.product((True, False), repeat=2))  # (fill_b, fill_f)
MAX_V_REPEATS = 100  # runs of one V setting, each widening the bubble budget (see v_candidates)


def zb_heuristic(problem: Problem):
    """The authors' choice among their runs: the smallest objective, ties to the first.

    Returns ``(schedule, setting)``, or ``None`` when every run fails.
    """
    p, n = problem.p, problem.n
    ops, length = new_ops(p, n, 1), np.zeros(p, np.int32)
    ok, chosen = zb_best(problem.cost, problem.memd, problem.comm, problem.cap, n,
                         problem.objective == "span", ops, length)
    if not ok:
        return None
    return problem.schedule(ops, length, "zb-greedy"), ZB_SETTINGS[chosen]


def v_candidates(problem: Problem):
    """The V greedy's runs: ``(name, schedule)`` for each setting that completes.

    As in the authors' code, a run is repeated with the previous run's per-device idle as an
    approved bubble budget while that lowers the largest idle; the last improvement is kept.
    """
    p, n = problem.p, problem.n
    for fill_b, fill_f in V_SETTINGS:
        approved = np.full(p, -1.0)  # per device
        kept = None
        for _ in range(MAX_V_REPEATS):
            ops, length, bubble = new_ops(p, n, 2), np.zeros(p, np.int32), np.zeros(p)
            ok, worst = v_greedy(problem.cost, problem.memd, problem.comm, problem.cap, n,
                                 fill_f, fill_b, approved, ops, length, bubble)
            if not ok or (kept is not None and worst >= kept[0]):
                break
            kept = (worst, ops, length)
            approved = bubble
        if kept is not None:
            yield f"v-greedy(fill_b={fill_b}, fill_f={fill_f})", problem.schedule(
                kept[1], kept[2], "v-greedy")


def list_candidates(problem: Problem):
    """The memory-aware list scheduler, backward first and forward first: ``(name, schedule)``
    for each that completes (it fits any limit the problem accepts)."""
    p, n = problem.p, problem.n
    for i_first in (True, False):
        ops, length = new_ops(p, n, problem.m), np.zeros(p, np.int32)
        if list_schedule(problem.cost, problem.memd, problem.comm, problem.cap,
                         problem.stage_to_device, n, i_first, ops, length):
            yield f"list({'backward' if i_first else 'forward'} first)", problem.schedule(
                ops, length, "list")


def fixed_candidates(problem: Problem):
    """The registered schedules of the placement that are valid for ``(p, n)``."""
    for name in problem.fixed_schedules():
        if not SCHEDULES[name].reasons(problem.p, problem.n, problem.m, problem.p)[0]:
            yield name, build_schedule(name, problem.p, problem.n, problem.m)
