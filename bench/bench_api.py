"""A research script's point through the public API (``build_schedule`` + ``Costs`` +
``simulate`` + peak memory) against the same point in plain pure Python
(``bench/plain.py``); target >= 200x (issue 27), open.

Each round is a new point, as in a script that sweeps a cost: the next of 64 latencies, its
``Costs`` made inside the clock, so that no cache of a ``Costs`` object (its per-stage
expansion) hits; the schedule of the same shape is kept by ``build_schedule``, as a script
calling it again gets it (``fastpp_point`` times both). Until 5 December 2026 every round
simulated one ``Costs`` object again, a point no script repeats: 211-245x there, the kept
expansion and plan doing the work (a benchmark review). ``fastpp_costs_outside`` times the
same with the ``Costs`` made before the clock, for the part of the gap that is ``Costs``'s
own checks. The plain simulator is given the op lists ready-made (its schedule generation is
not timed). Both results are checked against ``tests/reference.py``. Run for real with
``pytest bench/bench_api.py --benchmark-enable -n 0 -s``.
"""

import itertools

import pytest
from plain import ops_of, simulate_plain
from reference import simulate_reference
from speedup import check_speedup, record

from fastpp import Costs, build_schedule, simulate

CASES = {"1f1b p=8 n=64": ("1f1b", 8, 64, 1),
         "interleaved p=8 n=64 m=2": ("interleaved-1f1b", 8, 64, 2),
         "zbv p=8 n=64": ("zbv", 8, 64, 2)}
COSTS = dict(f=1.0, b=2.0, w=0.8, comm=0.05, gamma=0.4)
COMMS = [0.05 + 1e-3 * k for k in range(64)]  # a new point each round
TARGET = 200


def fastpp_point(name, p, n, m, costs):
    res = simulate(build_schedule(name, p, n, m), Costs(**costs))
    return res.makespan, res.peak_activations


def fastpp_costs_outside(name, p, n, m, costs):
    res = simulate(build_schedule(name, p, n, m), costs)
    return res.makespan, res.peak_activations


@pytest.mark.parametrize("case, engine", [(case, engine) for case in CASES
                                          for engine in ("fastpp", "costs outside", "plain")])
def bench_point(benchmark, case, engine):
    benchmark.group = f"one point {case}"
    name, p, n, m = CASES[case]
    sched = build_schedule(name, p, n, m)
    ref = simulate_reference(sched, Costs(**COSTS))
    ops, stage_device = ops_of(sched)
    comms = itertools.cycle(COMMS)
    if engine == "costs outside":  # a new Costs object each round, made before its clock
        fastpp_costs_outside(name, p, n, m, Costs(**COSTS))  # compile or load the kernels
        benchmark.pedantic(fastpp_costs_outside, rounds=2000, setup=lambda: (
            (name, p, n, m, Costs(**{**COSTS, "comm": next(comms)})), {}))
    else:
        run = {"fastpp": lambda: fastpp_point(name, p, n, m, {**COSTS, "comm": next(comms)}),
               "plain": lambda: simulate_plain(ops, stage_device, m=m,
                                               **{**COSTS, "comm": next(comms)})}[engine]
        run()  # compile or load the kernels
        benchmark(run)
    # the point of the reference's costs, on the same path
    one = {"fastpp": lambda: fastpp_point(name, p, n, m, COSTS),
           "costs outside": lambda: fastpp_costs_outside(name, p, n, m, Costs(**COSTS)),
           "plain": lambda: simulate_plain(ops, stage_device, m=m, **COSTS)}[engine]
    makespan, peaks = one()
    assert makespan == pytest.approx(ref.makespan, rel=1e-12)
    assert list(peaks) == pytest.approx(ref.peak_activations, abs=1e-9)
    record(benchmark, f"{engine} {case}")
    if engine == "plain":
        check_speedup(benchmark, f"costs outside {case}", f"plain {case}", None)
        check_speedup(benchmark, f"fastpp {case}", f"plain {case}", TARGET, open_target=True)
