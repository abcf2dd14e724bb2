"""A plain pure-Python pipeline simulator, written the way a researcher would: the baseline
that fastpp's per-point figures are measured against (``tests/reference.py`` stays the slow,
obviously-correct oracle; this one is written for speed in ordinary Python: flat per-stage
lists and local variables. Until 7 December 2026 it looked each op's input up in a dict
keyed by tuples and filled start and end tables it never read, 2.2-2.7 times slower: a
review of the benchmarks' baselines halved the API's figures with it).

Ops per device as ``(kind, stage, microbatch)`` tuples with kind ``"F" | "B" | "I" | "W"``;
each device runs its list in order, an op starting when its device is free and its input
has arrived (a hand-off between devices adds ``comm``). Returns the makespan and each
device's peak activation memory (a forward allocates ``1/m`` when it starts; ``B`` frees it,
``I`` frees ``1 - gamma`` of it and ``W`` the rest, when they end).
"""


def simulate_plain(ops, stage_device, f, b, w=0.0, comm=0.0, gamma=1.0, m=1):
    p, last = len(ops), len(stage_device) - 1
    c_f, c_b, c_i, c_w = f / m, b / m, (b - w) / m, w / m
    n = 1 + max(j for row in ops for _, _, j in row)
    # when each stage's activation (F) and gradient (G) of each microbatch is ready
    done_f = [[None] * n for _ in stage_device]
    done_g = [[None] * n for _ in stage_device]
    free, pos, first = [0.0] * p, [0] * p, [None] * p
    lengths = [len(row) for row in ops]
    left = sum(lengths)
    while left:
        progressed = False
        for r in range(p):
            row, k, t_free, length = ops[r], pos[r], free[r], lengths[r]
            while k < length:
                kind, s, j = row[k]
                if kind == "F":
                    if s > 0:
                        x = done_f[s - 1][j]
                        if x is None:
                            break
                        if stage_device[s - 1] != r:
                            x += comm
                        t = x if x > t_free else t_free
                    else:
                        t = t_free
                    t_free = t + c_f
                    done_f[s][j] = t_free
                elif kind == "W":
                    x = done_g[s][j]
                    if x is None:
                        break
                    t = x if x > t_free else t_free
                    t_free = t + c_w
                else:  # B or I: the gradient from s + 1, or the last stage's own F
                    if s < last:
                        x = done_g[s + 1][j]
                        if x is None:
                            break
                        if stage_device[s + 1] != r:
                            x += comm
                    else:
                        x = done_f[s][j]
                        if x is None:
                            break
                    t = x if x > t_free else t_free
                    t_free = t + (c_b if kind == "B" else c_i)
                    done_g[s][j] = t_free
                if k == 0:
                    first[r] = t
                k += 1
            if k != pos[r]:
                left -= k - pos[r]
                pos[r], free[r] = k, t_free
                progressed = True
        if not progressed:
            raise RuntimeError("deadlock")
    makespan = (max(free[r] for r in range(p) if lengths[r])
                - min(x for x in first if x is not None))
    peaks = []
    add, free_b, free_i, free_w = 1 / m, 1.0 / m, (1 - gamma) / m, gamma / m
    for row in ops:
        held = peak = 0.0
        for kind, _, _ in row:
            if kind == "F":
                held += add
                if held > peak:
                    peak = held
            elif kind == "B":
                held -= free_b
            elif kind == "I":
                held -= free_i
            else:
                held -= free_w
        peaks.append(peak)
    return makespan, peaks


def ops_of(schedule):
    """A fastpp schedule as this simulator's inputs: per-device op lists and the stage map
    (for comparing the two on the same ops; building them is not part of the timing)."""
    from fastpp import Op

    names = {int(op): op.name for op in Op}
    ops = [[(names[int(k)], int(s), int(j)) for k, s, j in
            zip(schedule.kind[r, :L], schedule.stage[r, :L], schedule.mb[r, :L], strict=True)]
           for r, L in enumerate(schedule.length)]
    return ops, schedule.stage_to_device.tolist()
