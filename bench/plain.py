"""A plain pure-Python pipeline simulator, written the way a researcher would: the baseline
that fastpp's per-point figures are measured against (``tests/reference.py`` stays the slow,
obviously-correct oracle; this one is written for speed in ordinary Python).

Ops per device as ``(kind, stage, microbatch)`` tuples with kind ``"F" | "B" | "I" | "W"``;
each device runs its list in order, an op starting when its device is free and its input
has arrived (a hand-off between devices adds ``comm``). Returns the makespan and each
device's peak activation memory (a forward allocates ``1/m`` when it starts; ``B`` frees it,
``I`` frees ``1 - gamma`` of it and ``W`` the rest, when they end).
"""


def simulate_plain(ops, stage_device, f, b, w=0.0, comm=0.0, gamma=1.0, m=1):
    p, last = len(ops), len(stage_device) - 1
    cost = {"F": f / m, "B": b / m, "I": (b - w) / m, "W": w / m}
    done = {}  # ("F" | "G", stage, mb) -> when the activation or gradient is ready
    free, pos = [0.0] * p, [0] * p
    start = [[0.0] * len(row) for row in ops]
    end = [[0.0] * len(row) for row in ops]
    left = sum(len(row) for row in ops)
    while left:
        progressed = False
        for r in range(p):
            while pos[r] < len(ops[r]):
                kind, s, j = ops[r][pos[r]]
                if kind == "F":
                    need = ("F", s - 1, j) if s > 0 else None
                elif kind in "BI":
                    need = ("G", s + 1, j) if s < last else ("F", s, j)
                else:
                    need = ("G", s, j)
                t = free[r]
                if need is not None:
                    if need not in done:
                        break
                    hop = comm if stage_device[need[1]] != r else 0.0
                    t = max(t, done[need] + hop)
                start[r][pos[r]], end[r][pos[r]] = t, t + cost[kind]
                free[r] = t + cost[kind]
                if kind != "W":
                    done[("F" if kind == "F" else "G", s, j)] = free[r]
                pos[r] += 1
                left -= 1
                progressed = True
        if not progressed:
            raise RuntimeError("deadlock")
    makespan = max(e[-1] for e in end if e) - min(s[0] for s in start if s)
    peaks = []
    freed = {"B": 1.0 / m, "I": (1 - gamma) / m, "W": gamma / m}
    for row in ops:
        held = peak = 0.0
        for kind, _, _ in row:
            if kind == "F":
                held += 1 / m
                peak = max(peak, held)
            else:
                held -= freed[kind]
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
