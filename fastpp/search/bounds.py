"""Analytic lower bounds on a search instance's objective (SEARCH.md section 3).

They hold for every order and every memory limit: each device must run all of its work, cannot
start before a forward reaches it, and its last ``I`` is followed by the gradient's way back to
the first stage and that stage's ``W``.
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
      all of its ``F`` and ``I``, the gradient's way to stage 0 and a ``W``.
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
        if problem.objective == "span":
            best = max(best, work, first_i - first_f + iw)
            continue
        fi = n * cost[:2, mine].sum()
        tail = min(max(cost[2, s], i_end0 - (i_start[s] + cost[1, s]) + cost[2, 0])
                   for s in mine)
        best = max(best, first_f + work, first_i + iw, first_f + fi + tail)
    return float(best)
