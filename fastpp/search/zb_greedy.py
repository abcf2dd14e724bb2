"""The Zero Bubble authors' automatic scheduler, a greedy with a memory limit (jitted).

Source: Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3 (automatic
scheduling) and appendix; the authors' code, sail-sg/zero-bubble-pipeline-parallelism,
``megatron/core/pipeline_parallel/auto_schedule.py`` (``Graph.manual_order``). Written from the
algorithm's description in ``SEARCH.md`` section 2, with per-stage costs and links. Loop
placement, one stage per device; the authors' "B" is fastpp's ``I``.

Inputs: the per-stage arrays of ``fastpp.search.problem`` (``cost``, ``memd``, ``comm``,
``cap``). The kernel fills an op block and ``length``, and returns ``False`` where the authors'
code fails (a limit that a needed forward cannot fit). Its helpers are closures over the
kernel's arrays: Numba inlines a closure without passing (and reference-counting) each array,
which made the greedy seven times faster than helpers taking the arrays as arguments.
"""

import numpy as np

from .._jit import jit
from ..ops import PAD, ROW_F, ROW_I, ROW_W, SPLIT_KINDS

# The loop greedy's inputs and state, packed into a few arrays that its helpers (closures,
# which Numba inlines without reference counting) read.
# table[...]: rows ROW_F..ROW_W op times, MEM + row memory changes, CAP the device's limit
MEM, CAP = 3, 6
# state[...]: rows FREE when each stage is next free, HELD its memory, IDLE its idle time
FREE, HELD, IDLE = 0, 1, 2
DONE, FAILED, REPEAT = 0, 1, 2  # how a run of the greedy ends (_zb_rounds)


@jit
def zb_greedy(cost, memd, comm, cap, n, allow_bubble_before_first_b, prioritize_b,
              no_bubble_greedy, ops, length):
    """The Zero Bubble authors' greedy on the loop placement (stage ``r`` on device ``r``).

    Round ``i`` places ``I(., i)`` on every stage and at most one forward per stage; round 0
    also decides each stage's warm-up forwards. ``W``s fill waits that exceed the bubble
    budget, make room in memory, or run at the end. Returns ``(ok, span, makespan)`` where
    ``span`` is the authors' ``best``: the largest ``end of W(s, n-1) - start of F(s, 0)``.
    """
    p = cost.shape[1]
    ok, span, makespan, _ = _zb_run(cost, memd, comm, cap, n, allow_bubble_before_first_b,
                                    prioritize_b, no_bubble_greedy, ops, length,
                                    np.full((2, p), -1, np.int64), np.zeros(2, np.int64))
    return ok, span, makespan


@jit
def _zb_run(cost, memd, comm, cap, n, allow_bubble_before_first_b, prioritize_b,
            no_bubble_greedy, ops, length, warm, used):
    """``zb_greedy``, and whether it stopped as a repeat (``_zb_rounds``: ``warm`` and
    ``used``)."""
    p = cost.shape[1]
    table = np.empty((7, p))
    table[:3] = cost
    table[MEM:CAP] = memd
    table[CAP] = cap
    placed = np.zeros((3, p), np.int64)  # F's, I's and W's placed, per stage
    state = np.zeros((3, p))
    most_idle = np.zeros(1)  # the largest IDLE of any stage: the bubble budget's ceiling
    t = np.zeros((3, p, n))  # end time of each placed op
    ops[:] = PAD
    f_req = np.zeros(p, np.int64)
    outcome = _zb_rounds(n, comm, allow_bubble_before_first_b, prioritize_b, no_bubble_greedy,
                         table, placed, state, most_idle, t, ops, f_req, warm, used)
    for s in range(p):
        length[s] = placed[ROW_F, s] + placed[ROW_I, s] + placed[ROW_W, s]
    if outcome != DONE:
        return False, 0.0, 0.0, outcome == REPEAT
    span = 0.0
    makespan = 0.0
    for s in range(p):
        span = max(span, t[ROW_W, s, n - 1] - t[ROW_F, s, 0] + cost[ROW_F, s])
        makespan = max(makespan, state[FREE, s])
    return True, span, makespan - (t[ROW_F, 0, 0] - cost[ROW_F, 0]), False


@jit
def zb_best(cost, memd, comm, cap, n, span_objective, ops, length):
    """The authors' 8 runs of ``zb_greedy`` (``allow_bubble_before_first_b`` outermost, True
    before False) and their choice: the smallest objective, ties to the first; runs that fail
    are skipped. Fills ``ops`` and ``length`` with the choice and returns ``(ok, setting)``,
    ``setting`` its index in that order."""
    p = cost.shape[1]
    scratch = np.empty_like(ops)
    scratch_length = np.empty_like(length)
    best = np.inf
    chosen = -1
    warm = np.full((2, p), -1, np.int64)
    counts = np.empty((4, p), np.int64)  # the first four runs' warm-up counts
    used = np.zeros((8, 2), np.int64)  # what each run's prioritize_b and no_bubble_greedy did
    for setting in range(8):
        prioritize_b, no_bubble_greedy = (setting // 2) % 2 == 0, setting % 2 == 0
        # a run whose setting changed no decision of the run that differs from it in that
        # setting alone repeats it op for op: its result would tie, and ties go to the first
        twin = (setting - 2 if not prioritize_b and used[setting - 2, 0] == 0 else
                setting - 1 if not no_bubble_greedy and used[setting - 1, 1] == 0 else -1)
        if twin >= 0:
            used[setting] = used[twin]
            if setting < 4:
                counts[setting] = counts[twin]
            continue
        if setting >= 4:  # the same setting but the warm-up's: a repeat stops after it
            warm[0] = counts[setting - 4]
        ok, span, makespan, repeat = _zb_run(cost, memd, comm, cap, n, setting < 4,
                                             prioritize_b, no_bubble_greedy, scratch,
                                             scratch_length, warm, used[setting])
        if setting < 4:
            counts[setting] = warm[1]
        if repeat:
            used[setting] = used[setting - 4]
            continue
        value = span if span_objective else makespan
        if ok and value < best:
            best = value
            chosen = setting
            ops[:] = scratch
            length[:] = scratch_length
    return chosen >= 0, chosen


@jit
def _zb_rounds(n, comm, allow_bubble_before_first_b, prioritize_b, no_bubble_greedy, table,
               placed, state, most_idle, t, ops, f_req, warm, used):
    """``zb_greedy``'s rounds: ``DONE``, ``FAILED`` where the authors' code fails, or
    ``REPEAT``.

    The settings' traces, by which ``zb_best`` skips runs that would repeat another op for
    op: ``warm[1]`` receives the warm-up counts (``allow_bubble_before_first_b`` is read only
    there), and the run stops as a ``REPEAT`` where they equal ``warm[0]``; ``used[0]`` is
    set where ``prioritize_b`` turned a forward down, ``used[1]`` where ``no_bubble_greedy``
    placed a ``W`` the budget alone would not have."""
    p = table.shape[1]
    free, held, idle = state[FREE], state[HELD], state[IDLE]

    def place(r, k, j, ready):
        """Run op kind ``k`` of stage ``r`` (microbatch ``j``) next on device ``r`` as soon as
        it can start; ``ready`` is when its cross-device input arrives (-1: none)."""
        c = table[k, r]
        finish = free[r] + c
        if ready >= 0.0:
            finish = max(finish, ready + c)
        if placed[ROW_F, r] > 0:  # idle time counts from the device's first forward on
            idle[r] += finish - (free[r] + c)
            most_idle[0] = max(most_idle[0], idle[r])  # idle only grows: the running max is it
        free[r] = finish
        held[r] += table[MEM + k, r]
        t[k, r, j] = finish
        q = placed[ROW_F, r] + placed[ROW_I, r] + placed[ROW_W, r]
        ops[0, r, q] = SPLIT_KINDS[k]
        ops[1, r, q] = r
        ops[2, r, q] = j
        placed[k, r] += 1

    def fill_w(s, k, ready):
        """Before op kind ``k`` on stage ``s``: ``W``s until it fits in memory, the ``W``s that
        end before its input arrives at ``ready``, and one more that overruns the arrival when
        the wait would exceed the bubble budget (or, with ``no_bubble_greedy``, would not)."""
        while held[s] + table[MEM + k, s] > table[CAP, s]:
            if placed[ROW_W, s] >= placed[ROW_I, s]:
                return False  # "cannot fit memory"
            place(s, ROW_W, placed[ROW_W, s], -1.0)
        if ready < 0.0:
            return True
        while placed[ROW_W, s] < placed[ROW_I, s] and free[s] + table[ROW_W, s] <= ready:
            place(s, ROW_W, placed[ROW_W, s], -1.0)
        if placed[ROW_W, s] < placed[ROW_I, s] and free[s] < ready:
            over = ready - free[s] > most_idle[0] - idle[s]
            if over or no_bubble_greedy:
                if not over:
                    used[1] = 1
                place(s, ROW_W, placed[ROW_W, s], -1.0)
        return True

    def warm_up_counts():
        """``f_req[s]``: the forwards stage ``s`` runs after ``F(s, 0)`` and before its first
        ``I``, from the next-to-last stage to the first: those that fit in memory and start
        (``allow_bubble_before_first_b``: end) before that ``I``'s input can arrive; then each
        stage fewer than the one before, capped at it when it would take them all."""
        last_t = t[ROW_F, p - 1, 0] + table[ROW_I, p - 1]  # when the last stage's I(0) ends
        for s in range(p - 2, -1, -1):
            mem = held[s]
            busy_until = free[s]
            while (placed[ROW_F, s] + f_req[s] < n
                   and mem + table[MEM + ROW_F, s] <= table[CAP, s]):
                if allow_bubble_before_first_b:
                    if busy_until + table[ROW_F, s] > last_t + comm[s]:
                        break
                elif busy_until >= last_t + comm[s]:
                    break
                mem += table[MEM + ROW_F, s]
                busy_until += table[ROW_F, s]
                f_req[s] += 1
            last_t = max(busy_until, last_t + comm[s]) + table[ROW_I, s]
        for s in range(1, p):
            while (f_req[s] > 0 and f_req[s] >= f_req[s - 1]
                   and placed[ROW_F, s] + f_req[s] < n):
                f_req[s] -= 1
            f_req[s] = min(f_req[s], f_req[s - 1])

    def warm_up():
        """Round 0's forwards: ``F(s, 0)`` on every stage, then the forwards ``warm_up_counts``
        gives each stage; ``False`` where ``F(s, 0)`` does not fit."""
        for s in range(p):
            if held[s] + table[MEM + ROW_F, s] > table[CAP, s]:
                return False
            place(s, ROW_F, 0, t[ROW_F, s - 1, 0] + comm[s - 1] if s > 0 else -1.0)
        warm_up_counts()
        for s in range(p):
            for _ in range(f_req[s]):
                j = placed[ROW_F, s]
                place(s, ROW_F, j, t[ROW_F, s - 1, j] + comm[s - 1] if s > 0 else -1.0)
        return True

    def wants_forward(s):
        """1 if stage ``s`` takes a forward in this round, by its own state: it has one left
        and (with ``prioritize_b``, when it is two or more forwards ahead of stage ``s+1``) the
        forward, with the ``W``s it needs for memory, ends before the next ``I``'s input may
        arrive, or the wait for that input would exceed the bubble budget."""
        if placed[ROW_F, s] >= n:
            return 0
        if prioritize_b and s + 1 < p and placed[ROW_F, s] >= placed[ROW_F, s + 1] + 2:
            # when the next I's input may arrive, if stage s+1 runs F then I next
            due = free[s + 1] + table[ROW_F, s + 1] + table[ROW_I, s + 1] + comm[s]
            if free[s] >= due:
                used[0] = 1
                return 0
            mem = held[s] + table[MEM + ROW_F, s]
            w_cost = 0.0
            w_cnt = 0
            while mem > table[CAP, s] and placed[ROW_W, s] + w_cnt < placed[ROW_I, s]:
                w_cost += table[ROW_W, s]
                mem += table[MEM + ROW_W, s]
                w_cnt += 1
            if free[s] + table[ROW_F, s] + w_cost <= due:
                return 1
            if due - free[s] <= most_idle[0] - idle[s]:
                used[0] = 1
                return 0
        return 1

    def forward_round():
        """A later round's forwards: on each stage that wants one and whose later stages all
        take one, after the ``W``s it needs; ``False`` where one cannot fit."""
        for s in range(p):
            f_req[s] = wants_forward(s)
        for s in range(p - 2, -1, -1):  # a stage takes a forward only if all later ones do
            f_req[s] = min(f_req[s], f_req[s + 1])
        for s in range(p):
            if f_req[s] == 0:
                continue
            j = placed[ROW_F, s]
            ready = t[ROW_F, s - 1, j] + comm[s - 1] if s > 0 else -1.0
            if not fill_w(s, ROW_F, ready):
                return False
            place(s, ROW_F, j, ready)
        return True

    def backward_round(i):
        """``I(s, i)`` on every stage, from the last one up, after the ``W``s it needs (the
        first stage, once its forwards are all placed, drains its ``W``s first); ``False``
        where one cannot fit."""
        for s in range(p - 1, -1, -1):
            ready = t[ROW_I, s + 1, i] + comm[s] if s + 1 < p else -1.0
            if not fill_w(s, ROW_I, ready):
                return False
            if s == 0 and placed[ROW_F, 0] == n:  # the first stage drains its W's before each I
                while placed[ROW_W, 0] < placed[ROW_I, 0]:
                    place(0, ROW_W, placed[ROW_W, 0], -1.0)
            place(s, ROW_I, i, ready)
        return True

    warm[1] = -1
    used[:] = 0
    for i in range(n):
        f_req[:] = 0
        if not (warm_up() if i == 0 else forward_round()):
            return FAILED
        if i == 0:
            warm[1] = f_req
            if np.all(warm[1] == warm[0]):
                return REPEAT
        if not backward_round(i):
            return FAILED
    for s in range(p):  # the W's left run at the end
        while placed[ROW_W, s] < n:
            place(s, ROW_W, placed[ROW_W, s], -1.0)
    return DONE
