"""One schedule under many cost vectors: the compiled one-pass batch against the per-point
kernel, timed in the same run (issue 27).

The per-point side is the engine with grouping switched off (``batch.GROUP`` above the point
count): each cost vector runs ``kernels.timeline`` (the worklist), ``reduce`` and the memory
peaks on its own. The batch side is the engine as shipped: one ``Schedule.compiled()`` (not
cached between rounds) and one ``evaluate_batch`` pass for all the cost vectors. The rows are
checked equal. Reported as ns per op and column, and as a ratio; no target (the issue's
targets are in bench_sweep.py, bench_api.py and bench_plan.py).
Run for real with ``pytest bench/bench_compiled.py --benchmark-enable -n 0 -s``.
"""

import numpy as np
import pytest
from speedup import check_speedup, record

import fastpp
from fastpp import batch, engine

CASES = {"1f1b p=8 n=64": ("1f1b", 8, 64, 1), "zbv p=8 n=64": ("zbv", 8, 64, 2),
         "interleaved p=16 n=128 m=2": ("interleaved-1f1b", 16, 128, 2)}
COLUMNS = 256


def points(name, p, n, m, count):
    sid = fastpp.SCHEDULES[name].sid
    keys = [np.full(count, x) for x in (sid, p, n, m, p)]
    rng = np.random.default_rng(0)
    costs = {"f": rng.uniform(0.8, 1.2, count), "b": rng.uniform(1.8, 2.2, count),
             "w": rng.uniform(0.5, 0.9, count), "comm": rng.uniform(0.0, 0.2, count)}
    return keys, costs


def run(keys, costs, group):
    saved = batch.GROUP
    batch.GROUP = group
    try:
        batch._COMPILED.clear()  # every round compiles: no cache between rounds
        return engine.run(*keys, costs).out
    finally:
        batch.GROUP = saved


@pytest.mark.parametrize("case, side", [(case, side) for case in CASES
                                        for side in ("batch", "per point")])
def bench_many_costs(benchmark, case, side):
    benchmark.group = f"{COLUMNS} cost vectors, {case}"
    name, p, n, m = CASES[case]
    count = 32 if benchmark.disabled else COLUMNS
    keys, costs = points(name, p, n, m, count)
    group = batch.GROUP if side == "batch" else 10**9
    expected = run(keys, costs, 10**9)
    got = benchmark.pedantic(run, args=(keys, costs, group), rounds=5, iterations=1)
    np.testing.assert_array_equal(got, expected)
    # the per-point side equals itself above: its rows against simulate (reference-checked)
    sched = fastpp.build_schedule(name, p, n, m)
    for i in range(3):
        point = fastpp.Costs(**{k: float(v[i]) for k, v in costs.items()})
        assert expected[i, batch.MAKESPAN] == fastpp.simulate(sched, point).makespan
    ops = int(expected[0, batch.NUM_OPS]) * count
    if not benchmark.disabled:
        benchmark.extra_info["ns per op and column"] = benchmark.stats.stats.min / ops * 1e9
        print(f"\n{side} {case}: {benchmark.stats.stats.min / ops * 1e9:.2f} ns per op and "
              "column")
    record(benchmark, f"{side} {case}")
    if side == "per point":
        check_speedup(benchmark, f"batch {case}", f"per point {case}", None)
