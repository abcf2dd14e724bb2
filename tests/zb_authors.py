"""The Zero Bubble authors' greedy scheduler, transcribed plainly (SEARCH.md section 2).

The algorithm of ``Graph.manual_order`` in the authors' repository (tag zero-bubble-v0.1.0,
``megatron/core/pipeline_parallel/auto_schedule.py``), rewritten as ordinary Python for tests:
the oracle that fastpp's jitted ``zb_greedy`` must agree with, and the baseline of the
heuristic benchmark. It keeps the authors' behaviour where fastpp deliberately differs: the
warm-up exemption (a stage that would take all ``n`` forwards is not trimmed) and their failure
modes (an assertion for a forward that cannot fit, "cannot fit memory", and their final check of
every dependency). The one generalization: a hand-off latency per link (``comm[s]`` between
stages ``s`` and ``s+1``) where the authors have one number.
"""

from __future__ import annotations

import itertools


class Failed(Exception):
    """The authors' code would stop here (an assertion or its ValueError)."""


def manual_order(f, b, w, comm, mem_f, mem_b, mem_w, max_mem, n, allow_bubble_before_first_b,
                 prioritize_b, no_bubble_greedy):
    """One run. Per stage lists: times ``f, b (the input grad), w``, memory changes, limits.

    Returns ``(orders, end_times, best)``: ``orders[s]`` the stage's ops as ``("F"|"B"|"W", j)``,
    ``end_times[(kind, s, j)]`` and the span the authors select by. Raises ``Failed``.
    """
    p = len(f)
    cost = {"F": f, "B": b, "W": w}
    memory = {"F": mem_f, "B": mem_b, "W": mem_w}
    done = {"F": [0] * p, "B": [0] * p, "W": [0] * p}
    free_at = [0] * p
    held = [0] * p
    idle = [0] * p
    t = {}
    orders = [[] for _ in range(p)]

    def put(s, kind):
        j = done[kind][s]
        if not held[s] + memory[kind][s] <= max_mem[s]:
            raise Failed("assert m + mem <= max_mem")
        finish = free_at[s] + cost[kind][s]
        no_wait = finish
        if kind == "F" and s > 0:
            finish = max(finish, t.get(("F", s - 1, j), 0) + comm[s - 1] + cost[kind][s])
        if kind == "B" and s < p - 1:
            finish = max(finish, t.get(("B", s + 1, j), 0) + comm[s] + cost[kind][s])
        if done["F"][s] > 0:
            idle[s] += finish - no_wait
        free_at[s] = finish
        t[(kind, s, j)] = finish
        held[s] += memory[kind][s]
        done[kind][s] += 1
        orders[s].append((kind, j))

    def fill_before(s, kind, arrival):
        while held[s] + memory[kind][s] > max_mem[s]:
            if done["W"][s] >= done["B"][s]:
                raise Failed("Cannot fit memory")
            put(s, "W")
        if arrival is None:
            return
        while done["W"][s] < done["B"][s] and free_at[s] + w[s] <= arrival:
            put(s, "W")
        if done["W"][s] < done["B"][s] and free_at[s] < arrival:
            if arrival - free_at[s] <= max(idle) - idle[s]:
                if no_bubble_greedy:
                    put(s, "W")
            else:
                put(s, "W")

    for i in range(n):
        wanted = [0] * p
        if i == 0:
            for s in range(p):
                put(s, "F")
            last_t = 0
            for s in range(p - 1, -1, -1):
                if s == p - 1:
                    last_t = t[("F", s, 0)] + b[s]
                    continue
                mem, busy = held[s], free_at[s]
                while done["F"][s] + wanted[s] < n and mem + mem_f[s] <= max_mem[s]:
                    if allow_bubble_before_first_b:
                        if busy + f[s] > last_t + comm[s]:
                            break
                    elif busy >= last_t + comm[s]:
                        break
                    mem += mem_f[s]
                    busy += f[s]
                    wanted[s] += 1
                last_t = max(busy, last_t + comm[s]) + b[s]
            for s in range(1, p):
                while (wanted[s] > 0 and wanted[s] >= wanted[s - 1]
                       and done["F"][s] + wanted[s] < n):
                    wanted[s] -= 1
            for s in range(p):
                for _ in range(wanted[s]):
                    put(s, "F")
            for s in range(p - 1, -1, -1):
                put(s, "B")
            continue
        for s in range(p):
            if done["F"][s] >= n:
                continue
            if s + 1 < p and done["F"][s] >= done["F"][s + 1] + 2 and prioritize_b:
                due = free_at[s + 1] + f[s + 1] + b[s + 1] + comm[s]
                if free_at[s] >= due:
                    continue
                mem = held[s] + mem_f[s]
                w_time, w_count = 0, 0
                while mem > max_mem[s] and done["W"][s] + w_count < done["B"][s]:
                    w_time += w[s]
                    mem += mem_w[s]
                    w_count += 1
                if free_at[s] + f[s] + w_time <= due:
                    wanted[s] = 1
                    continue
                if due - free_at[s] <= max(idle) - idle[s]:
                    continue
            wanted[s] = 1
        for s in range(p - 2, -1, -1):
            wanted[s] = min(wanted[s], wanted[s + 1])
        for s in range(p):
            if wanted[s]:
                j = done["F"][s]
                arrival = t.get(("F", s - 1, j), 0) + comm[s - 1] if s > 0 else None
                fill_before(s, "F", arrival)
                put(s, "F")
        for s in range(p - 1, -1, -1):
            arrival = t.get(("B", s + 1, i), 0) + comm[s] if s < p - 1 else None
            fill_before(s, "B", arrival)
            if s == 0 and done["F"][0] == n:
                while done["W"][0] < done["B"][0]:
                    put(0, "W")
            put(s, "B")
    for s in range(p):
        while done["W"][s] < n:
            put(s, "W")
    # An op never placed reads as time 0 in the authors' final check, so a run whose warm-up
    # exemption gave a stage more forwards than its predecessor can pass it while the
    # predecessor never runs its last forwards (the suffix rule stops it): such a schedule
    # lacks ops. Count it as failed; fastpp's cap avoids it.
    if any(len(row) != 3 * n for row in orders):
        raise Failed("ops missing from the order (passes the authors' check)")
    # the authors' final check of every dependency
    at = {key: t.get(key, 0) for key in itertools.product("FBW", range(p), range(n))}
    for s in range(p):
        for j in range(n):
            if not (at[("B", s, j)] >= at[("F", s, j)] + b[s]
                    and at[("W", s, j)] >= at[("B", s, j)] + w[s]
                    and (s == 0 or at[("F", s, j)] >= at[("F", s - 1, j)] + comm[s - 1] + f[s])
                    and (s == p - 1
                         or at[("B", s, j)] >= at[("B", s + 1, j)] + comm[s] + b[s])):
                raise Failed(f"dependency check at stage {s}, microbatch {j}")
    best = max(t[("W", s, n - 1)] - t[("F", s, 0)] + f[s] for s in range(p))
    return orders, t, best


SETTINGS = [(a, pb, nb) for a in (True, False) for pb in (True, False) for nb in (True, False)]


def initial_solution(f, b, w, comm, mem_f, mem_b, mem_w, max_mem, n):
    """The authors' choice among the 8 runs (smallest span, ties to the first). As in their
    code, one failing run fails the whole (raises ``Failed``)."""
    best = None
    for setting in SETTINGS:
        orders, _, span = manual_order(f, b, w, comm, mem_f, mem_b, mem_w, max_mem, n, *setting)
        if best is None or span < best[0]:
            best = (span, orders, setting)
    return best
