"""simulate() on a built schedule against the plain pure-Python simulator (bench/plain.py) on
the same ops; the ratio is reported (the per-point target lives in bench_api.py, which times a
new cost vector each call: here one ``Costs`` object is simulated again, its per-stage
expansion kept, the kernel's path alone). Results are checked against tests/reference.py,
which is a correctness oracle here, not a baseline.

Run for real with ``pytest bench --benchmark-enable -n 0``; the normal suite runs each once.
"""

import pytest
from plain import ops_of, simulate_plain
from reference import simulate_reference
from speedup import check_speedup, record

from fastpp import Costs, build_schedule, simulate

CASES = {"1f1b p=8 n=64": ("1f1b", 8, 64, 1),
         "interleaved p=8 n=64 m=2": ("interleaved-1f1b", 8, 64, 2)}
COSTS = dict(f=1.0, b=2.0, comm=0.05)


@pytest.mark.parametrize("case, engine", [(case, engine) for case in CASES
                                          for engine in ("fastpp", "plain")])
def bench_simulate(benchmark, case, engine):
    benchmark.group = f"simulate {case}"
    name, p, n, m = CASES[case]
    sched = build_schedule(name, p, n, m)
    costs = Costs(**COSTS)
    if engine == "fastpp":
        simulate(sched, costs)  # warm up: compile or load the kernels
        makespan = benchmark(simulate, sched, costs).makespan
    else:
        ops, stage_device = ops_of(sched)
        makespan = benchmark(simulate_plain, ops, stage_device, m=m, **COSTS)[0]
    assert makespan == pytest.approx(simulate_reference(sched, costs).makespan, rel=1e-12)
    record(benchmark, f"{engine} {case}")
    if engine == "plain":
        check_speedup(benchmark, f"fastpp {case}", f"plain {case}", None)
