"""simulate() against the pure-Python reference on the same input; target >= 300x.

Run for real with ``pytest bench --benchmark-enable``; the normal suite runs each once.
"""

import pytest
from reference import simulate_reference
from speedup import check_speedup, record

from fastpp import Costs, build_schedule, simulate

CASES = {"1f1b p=8 n=64": ("1f1b", 8, 64, 1),
         "interleaved p=8 n=64 m=2": ("interleaved-1f1b", 8, 64, 2)}
COSTS = Costs(f=1.0, b=2.0, comm=0.05)
TARGET = 300


@pytest.mark.parametrize("case, engine", [(case, engine) for case in CASES
                                          for engine in ("fastpp", "reference")])
def bench_simulate(benchmark, case, engine):
    benchmark.group = f"simulate {case}"
    sched = build_schedule(*CASES[case])
    run = simulate if engine == "fastpp" else simulate_reference
    run(sched, COSTS)  # warm up: compile or load the kernels
    result = benchmark(run, sched, COSTS)
    assert result.makespan > 0
    record(benchmark, f"{engine} {case}")
    if engine == "reference":
        check_speedup(benchmark, f"fastpp {case}", f"reference {case}", TARGET)
