"""Random malformed input ends in a clear ``ScheduleError``, never another error, a crash or
a hang.

Each batch runs in a subprocess with a time limit, so a segfault or a hang fails the test
instead of taking the suite down. ``FASTPP_MALFORMED=2000`` tries more cases per batch.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = int(os.environ.get("FASTPP_MALFORMED", "150"))
COUNTS = {"cases": 0, "clear errors": 0, "accepted as valid": 0, "crashes": 0}
HERE = Path(__file__).resolve().parent

BATCH = r'''
import json, sys, traceback
import numpy as np
import fastpp
from fastpp import Costs, Schedule, ScheduleError, build_schedule, simulate
from fastpp.io import read_torch_csv

seed, cases, kind, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = np.random.default_rng(seed)
names = sorted(fastpp.SCHEDULES)
counts = {"cases": 0, "clear errors": 0, "accepted as valid": 0, "crashes": 0}
crashes = []


def a_schedule():
    name = names[rng.integers(len(names))]
    spec = fastpp.SCHEDULES[name]
    for p in (2, 3, 4):
        for n in (p, 2 * p, 8):
            for m in (1, 2):
                if not spec.reasons(p, n, m, p)[0]:
                    return build_schedule(name, p, n, m)
    return build_schedule("1f1b", 2, 2)


def damaged_schedule():
    s = a_schedule()
    ops, length = s.ops.copy(), s.length.copy()
    r = int(rng.integers(s.p))
    k = int(rng.integers(max(1, length[r])))
    what = rng.integers(9)
    if what == 0:  # missing op
        ops[:, r, k:length[r] - 1] = ops[:, r, k + 1:length[r]].copy(); length[r] -= 1
    elif what == 1:  # duplicated op
        ops[:, r, (k + 1) % ops.shape[2]] = ops[:, r, k]
    elif what == 2:  # stage out of range or misplaced
        ops[1, r, k] = rng.choice([-5, s.V, s.V + 7, int(rng.integers(s.V))])
    elif what == 3:  # microbatch out of range
        ops[2, r, k] = rng.choice([-1, s.n, 2**31 - 1])
    elif what == 4:  # unknown kind
        ops[0, r, k] = rng.choice([-2, 5, 99])
    elif what == 5:  # two ops swapped: out of order, or a cyclic wait
        k2 = int(rng.integers(max(1, length[r])))
        ops[:, r, [k, k2]] = ops[:, r, [k2, k]]
    elif what == 6:  # an op moved to another device
        r2 = (r + 1) % s.p
        if length[r2] < ops.shape[2]:
            ops[:, r2, length[r2]] = ops[:, r, k]; length[r2] += 1
    elif what == 7:  # wrong dtype or shape
        ops = [ops.astype(float), ops[0], ops[..., None]][int(rng.integers(3))]
    else:  # a length past the ops
        length[r] = ops.shape[2] + int(rng.integers(1, 5))
    sched = Schedule(ops, length, s.stage_to_device, n=s.n, m=s.m,
                     routes=np.stack([s.route_first, s.route_last], 1))
    simulate(sched, Costs(1.0, 2.0, w=0.5))


def bad_costs():
    s = a_schedule()
    field = ["f", "b", "w", "comm", "gamma", "fb", "act", "bandwidth"][rng.integers(8)]
    value = [np.nan, -1.0, np.inf, 0.0, 2.0, [1.0] * (s.V + 1), [[1.0]], "x", []][
        rng.integers(9)]
    simulate(s, Costs(**{"f": 1.0, "b": 2.0, **{field: value}}))


def absurd_parameters():
    name = names[rng.integers(len(names))] if rng.random() < 0.9 else "not-a-schedule"
    pick = lambda: [0, -1, 1, 2, 3, 7, 10**9, 2**63 - 1, 1.5, True][rng.integers(10)]
    build_schedule(name, pick(), pick(), pick())


def garbled_csv():
    s = a_schedule()
    path = f"{tmp}/s{rng.integers(1 << 30)}.csv"
    fastpp.io.write_torch_csv(s, path)
    data = bytearray(open(path, "rb").read())
    what = rng.integers(4)
    if what == 0:
        data = data[: int(rng.integers(len(data)))]  # truncated
    elif what == 1:
        for _ in range(3):  # garbled bytes
            data[int(rng.integers(len(data)))] = int(rng.integers(256))
    elif what == 2:
        data += b"\n0Q0,(1F2;3B)OVERLAP_F_B\n"
    else:
        data = bytes(rng.integers(0, 256, 64, dtype=np.uint8))
    open(path, "wb").write(data)
    simulate(read_torch_csv(path), Costs(1.0, 2.0, w=0.5))


job = {"schedule": damaged_schedule, "costs": bad_costs, "parameters": absurd_parameters,
       "csv": garbled_csv}[kind]
for case in range(cases):
    counts["cases"] += 1
    try:
        job()
        counts["accepted as valid"] += 1
    except ScheduleError as err:  # the library's own error: not NumPy's, Numba's or Python's
        assert str(err), "an error must say what is wrong"
        counts["clear errors"] += 1
    except Exception:
        counts["crashes"] += 1
        crashes.append(traceback.format_exc(limit=3))
print(json.dumps({"counts": counts, "crashes": crashes[:3]}))
'''


@pytest.mark.parametrize("kind", ["schedule", "costs", "parameters", "csv"])
def test_malformed_input_ends_in_a_clear_error(kind, tmp_path):
    seed = 20261129 + len(kind)
    run = subprocess.run([sys.executable, "-c", BATCH, str(seed), str(CASES), kind,
                          str(tmp_path)], capture_output=True, text=True, timeout=300,
                         cwd=HERE)
    assert run.returncode == 0, f"seed {seed}: the batch died ({run.returncode}): {run.stderr}"
    report = json.loads(run.stdout.splitlines()[-1])
    for key, value in report["counts"].items():
        COUNTS[key] += value
    assert report["counts"]["crashes"] == 0, f"seed {seed}:\n" + "\n".join(report["crashes"])
    assert report["counts"]["clear errors"] > CASES // 3
