"""Analytic lower bounds on a search instance's objective (SEARCH.md section 3).

Each device must run all of its work, cannot start before a forward reaches it, and its last
``I`` is followed by the gradient's way back to the first stage and that stage's ``W``. Under a
memory limit, microbatch ``j`` holds stage ``s``'s activations (and those of the stages on the
same device that enclose it on its route) from ``F(s, j)``'s start to ``I(s, j)``'s end, at
least the round trip ``R_s``; at most ``k = floor(limit / held)`` such intervals overlap, and
intervals with at most ``k`` overlapping split into ``k`` sets of disjoint ones (interval
graphs are perfect), so one set chains ``ceil(n / k)`` round trips.
"""

from __future__ import annotations

import numpy as np

from .problem import Problem


def one_microbatch(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Start of every stage's ``F`` and ``I`` for one microbatch alone in the pipeline."""
    cost, comm, device = problem.cost, problem.comm, problem.stage_to_device
    V = problem.V
    f_start, i_start = np.zeros(V), np.zeros(V)
    for s in range(1, V):
        hop = comm[s - 1] if device[s] != device[s - 1] else 0.0
        f_start[s] = f_start[s - 1] + cost[0, s - 1] + hop
    i_start[V - 1] = f_start[V - 1] + cost[0, V - 1]
    for s in range(V - 2, -1, -1):
        hop = comm[s] if device[s] != device[s + 1] else 0.0
        i_start[s] = i_start[s + 1] + cost[1, s + 1] + hop
    return f_start, i_start


def lower_bound(problem: Problem) -> float:
    """The best of the analytic bounds for the problem's objective.

    Per device ``r`` with stages ``S_r`` and ``n`` microbatches:

    - span: its work ``n sum(F+I+W)``, and the way from its first forward to its first ``I``
      (one microbatch alone) plus all of its ``I`` and ``W``;
    - makespan: also the earliest its first forward and its first ``I`` can start, and, after
      all of its ``F`` and ``I``, the gradient's way to stage 0 and a ``W``;
    - both, under a memory limit: ``ceil(n / k)`` round trips of a stage, then its ``W``.
    """
    cost, n, device = problem.cost, problem.n, problem.stage_to_device
    f_start, i_start = one_microbatch(problem)
    i_end0 = i_start[0] + cost[1, 0]
    best = 0.0
    for r in range(problem.p):
        mine = np.flatnonzero(device == r)
        work = n * cost[:, mine].sum()
        iw = n * cost[1:, mine].sum()
        first_f, first_i = f_start[mine].min(), i_start[mine].min()
        trips = _round_trips(problem, mine, f_start, i_start)
        if problem.objective == "span":
            best = max(best, work, first_i - first_f + iw, *(trips - first_f))
            continue
        best = max(best, *trips)
        fi = n * cost[:2, mine].sum()
        tail = min(max(cost[2, s], i_end0 - (i_start[s] + cost[1, s]) + cost[2, 0])
                   for s in mine)
        best = max(best, first_f + work, first_i + iw, first_f + fi + tail)
    return float(best)


def _round_trips(problem: Problem, mine: np.ndarray, f_start: np.ndarray,
                 i_start: np.ndarray) -> np.ndarray:
    """Per stage ``s`` of a device: the earliest ``F(s, .)`` start plus ``ceil(n / k)`` round
    trips and a ``W``, with ``k`` the intervals its memory limit lets overlap (0 if none)."""
    cost, unit, n = problem.cost, problem.memd[0], problem.n
    cap = problem.cap[problem.stage_to_device[mine[0]]]
    out = np.zeros(len(mine))
    if not np.isfinite(cap):
        return out
    i_end = i_start + cost[1]
    for q, s in enumerate(mine):
        enclosing = mine[(f_start[mine] <= f_start[s]) & (i_end[mine] >= i_end[s])]
        k = int(np.floor(cap / unit[enclosing].sum()))
        out[q] = f_start[s] + np.ceil(n / k) * (i_end[s] - f_start[s]) + cost[2, s]
    return out
