"""One schedule under many cost vectors, three ways, timed in the same run (issue 27).

- "per point": the engine with point plans switched off (``batch.SHARE`` above the point
  count): each cost vector runs ``kernels.timeline`` (the worklist), ``reduce`` and the memory
  walk on its own.
- "point plan": the engine as shipped: the first vector's timeline gives the order, the
  build's point plan is made once, and each vector is one ``compiled.point`` pass.
- "batch": ``Schedule.compiled()`` (made each round) and one ``compiled.evaluate`` pass for all
  the cost vectors, the batch innermost; their stage rows laid out before the clock starts
  (the engine's sides lay theirs out inside), so this side is timed in its favour.

The makespans are checked equal. Reported as ns per op and column, and as ratios; no target
(the issue's targets are in bench_sweep.py, bench_api.py and bench_plan.py).
Run for real with ``pytest bench/bench_compiled.py --benchmark-enable -n 0 -s``.
"""

import numpy as np
import pytest
from speedup import check_speedup, record

import fastpp
from fastpp import batch, engine
from fastpp.compiled import evaluate

CASES = {"1f1b p=8 n=64": ("1f1b", 8, 64, 1), "zbv p=8 n=64": ("zbv", 8, 64, 2),
         "interleaved p=16 n=128 m=2": ("interleaved-1f1b", 16, 128, 2)}
COLUMNS = 256
SIDES = ("batch", "point plan", "per point")


def points(name, p, n, m, count):
    sid = fastpp.SCHEDULES[name].sid
    keys = [np.full(count, x) for x in (sid, p, n, m, p)]
    rng = np.random.default_rng(0)
    costs = {"f": rng.uniform(0.8, 1.2, count), "b": rng.uniform(1.8, 2.2, count),
             "w": rng.uniform(0.5, 0.9, count), "comm": rng.uniform(0.0, 0.2, count)}
    return keys, costs


def run_engine(keys, costs, share):
    saved = batch.SHARE
    batch.SHARE = share
    try:
        return engine.run(*keys, costs).out[:, batch.MAKESPAN]
    finally:
        batch.SHARE = saved


def stage_rows(case, costs):
    """The stage costs of every vector, stacked ``[9, V, B]`` as ``evaluate`` takes them."""
    schedule = fastpp.build_schedule(*CASES[case])
    count = len(costs["f"])
    return np.stack([np.asarray(fastpp.Costs(**{k: float(v[i]) for k, v in costs.items()})
                                .per_stage(schedule), np.float64) for i in range(count)], axis=-1)


def run_batch(case, rows):
    schedule = fastpp.build_schedule(*CASES[case])  # a new one: compiled each round
    return evaluate(schedule.compiled(), rows, times=False).makespan


@pytest.mark.parametrize("case, side", [(case, side) for case in CASES for side in SIDES])
def bench_many_costs(benchmark, case, side):
    benchmark.group = f"{COLUMNS} cost vectors, {case}"
    name, p, n, m = CASES[case]
    count = 32 if benchmark.disabled else COLUMNS
    keys, costs = points(name, p, n, m, count)
    expected = run_engine(keys, costs, 10**9)
    if side == "batch":
        got = benchmark.pedantic(run_batch, args=(case, stage_rows(case, costs)), rounds=5,
                                 iterations=1)
    else:
        share = batch.SHARE if side == "point plan" else 10**9
        got = benchmark.pedantic(run_engine, args=(keys, costs, share), rounds=5, iterations=1)
    np.testing.assert_array_equal(got, expected)
    # the per-point side against simulate (reference-checked)
    sched = fastpp.build_schedule(name, p, n, m)
    for i in range(3):
        point = fastpp.Costs(**{k: float(v[i]) for k, v in costs.items()})
        assert expected[i] == fastpp.simulate(sched, point).makespan
    ops = int(sched.length.sum()) * count
    if not benchmark.disabled:
        benchmark.extra_info["ns per op and column"] = benchmark.stats.stats.min / ops * 1e9
        print(f"\n{side} {case}: {benchmark.stats.stats.min / ops * 1e9:.2f} ns per op and "
              "column")
    record(benchmark, f"{side} {case}")
    if side == "per point":
        for faster in ("batch", "point plan"):
            check_speedup(benchmark, f"{faster} {case}", f"per point {case}", None)
