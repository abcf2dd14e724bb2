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
    """Start of every stage's ``F`` and ``I`` for one microbatch alone in the pipeline.

    Each start is the previous one plus an op and a hand-off (0 on the same device), added in
    that order: one running sum over the terms interleaved gives every start with the same
    additions as a loop over the stages, in time linear in ``V`` without one.
    """
    cost, device, V = problem.cost, problem.stage_to_device, problem.V
    hop = np.where(device[1:] != device[:-1], problem.comm[:V - 1], 0.0)  # s to s + 1
    terms = np.empty(2 * (V - 1))
    terms[0::2], terms[1::2] = cost[0, :V - 1], hop
    f_start = np.zeros(V)
    f_start[1:] = np.add.accumulate(terms)[1::2]
    terms = np.empty(2 * V - 1)  # from the last stage's I back to stage 0's
    terms[0] = f_start[V - 1] + cost[0, V - 1]
    terms[1::2], terms[2::2] = cost[1, :0:-1], hop[::-1]
    i_start = np.add.accumulate(terms)[0::2][::-1].copy()
    return f_start, i_start


def lower_bound(problem: Problem) -> float:
    """The best of the analytic bounds for the problem's objective over every schedule:
    those that split every backward where a split one costs no more than a whole one (the
    others are their equals), else those of ``Problem.relaxed``, into which a schedule that
    splits all, none or some of its backwards maps with no op longer; and where an
    overlapped pair runs faster than its ops apart (``Costs.fb``), those of
    ``Problem.paired``, into which a schedule of pairs maps so too (DualPipeV's had beaten a
    bound that left them out by 15-18%)."""
    relaxed = problem.relaxed() if problem.split_costs_more else problem
    return _bound(problem.paired(relaxed) if problem.pairs_cheaper else relaxed)


def _bound(problem: Problem) -> float:
    """The best of the analytic bounds for the problem's objective, its backwards as its rows
    give them.

    Per device ``r`` with stages ``S_r`` and ``n`` microbatches:

    - span: its work ``n sum(F+I+W)``, and the way from its first forward to its first ``I``
      (one microbatch alone) plus all of its ``I`` and ``W``;
    - makespan: also the earliest its first forward and its first ``I`` can start, and, after
      all of its ``F`` and ``I``, the gradient's way to stage 0 and a ``W``;
    - both, under a memory limit: ``ceil(n / k)`` round trips of a stage, then its ``W``.

    The devices with the same number of stages are bounded together, one row each; every
    figure is a device's own sum or extreme, so the bound is the per-device loop's to the bit.
    """
    cost, n = problem.cost, problem.n
    f_start, i_start = one_microbatch(problem)
    i_end0 = i_start[0] + cost[1, 0]
    best = 0.0
    for mine in _devices(problem.stage_to_device, problem.p):
        work, iw = n * _device_sums(cost, mine), n * _device_sums(cost[1:], mine)
        first_f, first_i = f_start[mine].min(axis=1), i_start[mine].min(axis=1)
        trips = _round_trips(problem, mine, f_start, i_start)
        if problem.objective == "span":
            best = max(best, work.max(), (first_i - first_f + iw).max(),
                       (trips - first_f[:, None]).max())
            continue
        fi = n * _device_sums(cost[:2], mine)
        tail = np.maximum(cost[2, mine],
                          i_end0 - (i_start[mine] + cost[1, mine]) + cost[2, 0]).min(axis=1)
        best = max(best, trips.max(), (first_f + work).max(), (first_i + iw).max(),
                   (first_f + fi + tail).max())
    return float(best)


def _devices(device: np.ndarray, p: int):
    """The stages of every device, as one ``(devices, k)`` array per stage count ``k``: a
    device's stages in increasing order on its row."""
    order = np.argsort(device, kind="stable")
    count = np.bincount(device, minlength=p)
    first = np.cumsum(count) - count
    for k in np.unique(count).tolist():
        yield order[first[count == k, None] + np.arange(k)]


def _device_sums(rows: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """Each device's ``rows[:, S_r].sum()``, to the bit. numpy lays that selection out stage
    by stage and adds fewer than 8 values one after the other: the same additions, done for
    every device at once (the search's placements give a device at most 6 values here)."""
    if rows.shape[0] * mine.shape[1] >= 8:  # numpy's pairwise summation: its own sum
        return np.array([rows[:, stages].sum() for stages in mine])
    terms = rows[:, mine].transpose(1, 2, 0).reshape(len(mine), -1)
    total = terms[:, 0].copy()
    for j in range(1, terms.shape[1]):
        total += terms[:, j]
    return total


def _round_trips(problem: Problem, mine: np.ndarray, f_start: np.ndarray,
                 i_start: np.ndarray) -> np.ndarray:
    """Per stage ``s`` of each device (row) of ``mine``: the earliest ``F(s, .)`` start plus
    ``ceil(n / k)`` round trips and a ``W``, with ``k`` the intervals its memory limit lets
    overlap (0 where the device has no limit)."""
    cost, unit, n = problem.cost, problem.memd[0], problem.n
    out = np.zeros(mine.shape)
    limited = np.isfinite(problem.cap[problem.stage_to_device[mine[:, 0]]])
    if not limited.any():
        return out
    mine = mine[limited]
    cap = problem.cap[problem.stage_to_device[mine[:, 0]]]
    f, e = f_start[mine], i_start[mine] + cost[1, mine]
    # held[d, q]: what stage q of device d holds, with the device's stages that enclose it
    # on its route, summed one stage after the other as numpy sums a few values
    held = np.zeros(mine.shape)
    for t in range(mine.shape[1]):
        encloses = (f[:, t, None] <= f) & (e[:, t, None] >= e)
        held = held + np.where(encloses, unit[mine[:, t], None], 0.0)
    k = np.floor(cap[:, None] / held)
    out[limited] = f + np.ceil(n / k) * (e - f) + cost[2, mine]
    return out
