"""A research script's point through the public API (``build_schedule`` + ``simulate`` + peak
memory) against the same point in plain pure Python (``bench/plain.py``); target >= 200x. The
plain loop takes about 1 ms for 1F1B 8x64, so 200x needs about 5 us per point through a
validating Python API: 1F1B 211-245x in nine runs at load 2-5 on 3 December 2026 (5.4-6.5 us
a point), interleaved and ZB-V more; a run under it xfails with the measured figure.

The plain simulator is given the op lists ready-made (its schedule generation is not timed), so
the ratio is if anything conservative. Both results are checked against ``tests/reference.py``.
Run for real with ``pytest bench/bench_api.py --benchmark-enable -n 0 -s``.
"""

import pytest
from plain import ops_of, simulate_plain
from reference import simulate_reference
from speedup import check_speedup, record

from fastpp import Costs, build_schedule, simulate

CASES = {"1f1b p=8 n=64": ("1f1b", 8, 64, 1),
         "interleaved p=8 n=64 m=2": ("interleaved-1f1b", 8, 64, 2),
         "zbv p=8 n=64": ("zbv", 8, 64, 2)}
COSTS = dict(f=1.0, b=2.0, w=0.8, comm=0.05, gamma=0.4)
TARGET = 200


def fastpp_point(name, p, n, m, costs):
    res = simulate(build_schedule(name, p, n, m), costs)
    return res.makespan, res.peak_activations


@pytest.mark.parametrize("case, engine", [(case, engine) for case in CASES
                                          for engine in ("fastpp", "plain")])
def bench_point(benchmark, case, engine):
    benchmark.group = f"one point {case}"
    name, p, n, m = CASES[case]
    sched = build_schedule(name, p, n, m)
    costs = Costs(**COSTS)
    ref = simulate_reference(sched, costs)
    if engine == "fastpp":
        fastpp_point(name, p, n, m, costs)  # compile or load the kernels
        makespan, peaks = benchmark(fastpp_point, name, p, n, m, costs)
    else:
        ops, stage_device = ops_of(sched)
        makespan, peaks = benchmark(simulate_plain, ops, stage_device, m=m, **COSTS)
    assert makespan == pytest.approx(ref.makespan, rel=1e-12)
    assert list(peaks) == pytest.approx(ref.peak_activations, abs=1e-9)
    record(benchmark, f"{engine} {case}")
    if engine == "plain":
        check_speedup(benchmark, f"fastpp {case}", f"plain {case}", TARGET, open_target=True)
