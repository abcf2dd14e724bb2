"""Schedule search: the heuristic against a plain-Python transcription of the authors' algorithm,
and the bubble that improve and exact reach against time.

Run for real with ``pytest bench/bench_search.py --benchmark-enable -n 0 -s``; the normal suite runs
each once on a small input. Target: the heuristic (the authors' 8 runs and their choice, orders
out) at least 100x faster than ``tests/zb_authors.py`` over the 24 Table 5 solves; both give
identical orders. ``optimize(method="heuristic")`` end to end (problem set-up, the returned
schedule validated and re-simulated, bounds) is reported beside it.

The transcription is a fair baseline only if it runs no slower than the authors' own code.
``bench_heuristic_against_original`` checks that, and times fastpp against the original, when
``FASTPP_ZB_ORIGINAL`` names the authors' ``auto_schedule.py`` (tag zero-bubble-v0.1.0 of
sail-sg/zero-bubble-pipeline-parallelism, with ``pulp`` and ``torch`` importable, which it
imports); nothing of it is in this repository. Each side's inputs are made before its clock
(the authors' and the transcription's integer lists, fastpp's numbers); inside it, each side
checks them and sets itself up (the authors' ``GraphConfig``, fastpp's ``Costs`` and
``Problem``), then searches. Measured on 2026-12-06 on the 2-core machine, medians of 3
interleaved rounds, identical spans on every solve, in three runs: Table 5's 24 solves,
original 2.98-3.02 s, transcription 1.74-1.77 s, fastpp 7.3-7.9 ms (378-411x the original); 40
random uneven integer instances, original 0.170-0.174 s, transcription 0.109-0.110 s, fastpp
2.18-2.23 ms (78x); in the evening, with a ``Costs`` keeping read-only copies of its arrays
(2.3 us more a problem), 2.47-2.48 ms (70-71x) in two runs.
"""

import dataclasses
import importlib.util
import os
import statistics
import time

import numpy as np
import pytest
import test_search
import zb_authors
from speedup import check_speedup, record

from fastpp import Costs, optimize
from fastpp.ops import new_ops
from fastpp.search import exact
from fastpp.search.problem import Problem
from fastpp.search.zb_greedy import zb_best

TARGET = 100


def table5_problems(small):
    rows = test_search.table5_rows()
    problems = []
    for row in rows[:1] if small else rows:
        p, n = int(row["p"]), int(row["n"])
        costs, m_b, _ = test_search.table5_setting(row)
        for factor in (1, 2):
            problems.append(Problem.build(p, n, costs, factor * p * m_b, "loop", "span"))
    return problems


def fresh(problems):
    """Each problem's inputs as a user holds them before the clock: ``p``, ``n``, the
    numbers ``Costs`` is made of and the memory limit (the authors' side likewise gets its
    integer lists). ``run_fastpp`` makes the ``Costs`` inside its clock, as the authors'
    side makes its ``GraphConfig``: both check their inputs. (On 5 December 2026 a round
    reused the first round's ``Costs`` objects and their expansions; for a while on 6
    December the ``Costs`` was made outside the clock: 111-114x on the random instances,
    about 54x with it then, a benchmark review.)"""
    return [(pr.p, pr.n, {f.name: getattr(pr.costs, f.name)
                          for f in dataclasses.fields(Costs)}, pr.limit) for pr in problems]


def run_fastpp(problems):
    """fastpp's heuristic from each problem's inputs (``fresh``): the ``Costs`` made and
    the ``Problem`` built (its costs checked, expanded and laid out per stage, as the authors'
    side checks its inputs and builds its ``GraphConfig`` inside its clock), then
    ``zb_best``. Until 5 December 2026 the build was left out of the clock (178x on the
    random instances, 71x with it: a benchmark review)."""
    out = []
    for p, n, costs, limit in problems:
        pr = Problem.build(p, n, Costs(**costs), limit, "loop", "span")
        ops, length = new_ops(pr.p, pr.n, 1), np.zeros(pr.p, np.int32)
        zb_best(pr.cost, pr.memd, pr.comm, pr.cap, pr.n, True, ops, length)
        out.append((ops, length))
    return out


def python_inputs(problems):
    """The transcription's inputs (lists), made before its clock as fastpp's ``Costs`` are."""
    return [(test_search.transcription_inputs(pr), pr.n) for pr in problems]


def run_python(inputs):
    return [zb_authors.initial_solution(*args, n) for args, n in inputs]


def run_optimize(problems):
    return [optimize(p, n, Costs(**costs), memory=limit, objective="span",
                     method="heuristic", progress=False) for p, n, costs, limit in problems]


@pytest.mark.parametrize("engine", ["fastpp", "optimize", "python"])
def bench_heuristic_table5(benchmark, engine):
    benchmark.group = "zero-bubble heuristic, Table 5 (24 solves)"
    problems = table5_problems(small=benchmark.disabled)
    run = {"fastpp": run_fastpp, "optimize": run_optimize, "python": run_python}[engine]
    inputs = python_inputs if engine == "python" else fresh  # each round's, outside its clock
    run(inputs(problems[:1]))  # compile or load the kernels
    # the same rounds on every side (the least of each is compared)
    results = benchmark.pedantic(run, setup=lambda: ((inputs(problems),), {}), rounds=3,
                                 iterations=1)
    if engine == "python":  # identical orders, every solve
        for pr, ours, theirs in zip(problems, run_fastpp(fresh(problems)), results,
                                    strict=True):
            sched = pr.schedule(*ours, "zb-greedy")
            assert sched.tokens() == test_search.tokens_of(theirs[1])
    record(benchmark, engine)
    if engine == "python":
        check_speedup(benchmark, "fastpp", "python", TARGET)
        check_speedup(benchmark, "optimize", "python", None)  # reported, not a target


def quality_cases(small):
    """Table 5 settings at 1p, 1.5p, 2p (both objectives), and small random uneven ones."""
    cases = []
    rows = test_search.table5_rows()
    for row in rows[:1] if small else [r for r in rows if int(r["p"]) == 8]:
        costs, m_b, _ = test_search.table5_setting(row)
        p, n = int(row["p"]), int(row["n"])
        for factor in ((1.5,) if small else (1, 1.5, 2)):
            for objective in ("makespan", "span"):
                cases.append((f"{row['model']} p={p} n={n} {factor}p {objective}", p, n, costs,
                              factor * p * m_b, objective))
    rng = np.random.default_rng(2024)
    for q in range(1 if small else 12):
        p, n = int(rng.integers(2, 5)), int(rng.integers(2, 9))
        costs = Costs(f=np.round(rng.uniform(1, 3, p), 1), b=np.round(rng.uniform(3, 6, p), 1),
                      w=np.round(rng.uniform(0.5, 2, p), 1), comm=0.2, gamma=0.5)
        cases.append((f"random {q} p={p} n={n}", p, n, costs, float(rng.choice([1.5, 2, p])),
                      "makespan"))
    return cases


def bench_search_quality(benchmark):
    """Bubble reached against time: improve at growing budgets, exact on small instances."""
    benchmark.group = "search quality"
    small = benchmark.disabled
    budgets = (0.05,) if small else (0.25, 1.0, 4.0)
    lines, beat_improve, beat_exact, proven, reached = [], [], [], [], []
    optimize(3, 4, Costs(1, 2, w=1), memory=2, method="improve", time_limit=0.1,
             progress=False)  # compile or load the local search before timing it

    def once():
        for name, p, n, costs, memory, objective in quality_cases(small):
            kw = dict(memory=memory, objective=objective, progress=False)
            base = optimize(p, n, costs, method="heuristic", **kw)
            row = [name, f"heuristic {base.value:.6g}"]
            best, bound = base.value, base.lower_bound
            for budget in budgets:
                t0 = time.perf_counter()
                found = optimize(p, n, costs, method="improve", time_limit=budget, **kw)
                row.append(f"improve {budget:g}s {found.value:.6g} "
                           f"({time.perf_counter() - t0:.2f}s)")
                best, bound = min(best, found.value), max(bound, found.lower_bound)
            improved = best
            beat_improve.append(1 - improved / base.value)
            if p * n <= 32 and exact.available():
                found = optimize(p, n, costs, method="exact", time_limit=budgets[-1] * 5, **kw)
                row.append(f"exact {found.value:.6g} optimal={found.optimal}")
                beat_exact.append(1 - found.value / base.value)
                proven.append(found.optimal)
                reached.append(found.optimal and improved <= found.value * (1 + 1e-12))
                best, bound = min(best, found.value), max(bound, found.lower_bound)
            row.append(f"bound {bound:.6g} gap {(best - bound) / best:.2%}")
            lines.append(" | ".join(row))

    benchmark.pedantic(once, rounds=1, iterations=1)
    better = [x for x in beat_improve if x > 1e-12]
    summary = (f"improve beat the heuristic on {len(better)}/{len(beat_improve)} instances"
               + (f", by {np.mean(better):.2%} on average (at most {max(better):.2%})"
                  if better else ""))
    if beat_exact:
        exact_better = [x for x in beat_exact if x > 1e-12]
        summary += (f"; exact beat it on {len(exact_better)}/{len(beat_exact)} small ones, "
                    f"proved {sum(proven)} optimal; improve had reached {sum(reached)} of "
                    "those optima")
    benchmark.extra_info["summary"] = summary
    print("\n" + "\n".join(lines) + "\n" + summary)
    assert all(x >= 0 for x in beat_improve + beat_exact)  # never worse than the start


def _original(path):
    spec = importlib.util.spec_from_file_location("zb_original", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _integer_inputs(pr):
    """The authors' GraphConfig takes integer times, one link latency and exact memory sums."""
    f, b, w, comm, mem_f, _, mem_w, cap = test_search.transcription_inputs(pr)
    mem_f, mem_w = [round(float(x)) for x in mem_f], [round(float(x)) for x in mem_w]
    return dict(cost_f=[int(x) for x in f], cost_b=[int(x) for x in b],
                cost_w=[int(x) for x in w], cost_comm=int(comm[0]), mem_f=mem_f,
                mem_b=[-(x + y) for x, y in zip(mem_f, mem_w, strict=True)], mem_w=mem_w,
                max_mem=[float(x) for x in cap])


def _random_problems(count, seed=0):
    """Uneven integer instances that all 8 of the authors' runs complete."""
    rng, out = np.random.default_rng(seed), []
    while len(out) < count:
        p = int(rng.integers(2, 9))
        n = int(rng.integers(p, 4 * p + 1))
        w = np.round(rng.uniform(100, 1500, p))
        costs = Costs(f=np.round(rng.uniform(500, 2000, p)),
                      b=np.round(rng.uniform(500, 2000, p)) + w, w=w,
                      comm=float(round(rng.uniform(0, 300))), gamma=0.5, act=1000.0)
        pr = Problem.build(p, n, costs, float(rng.uniform(1, 3)) * p * 1000, "loop", "span")
        try:
            run_python(python_inputs([pr]))
        except zb_authors.Failed:
            continue
        out.append(pr)
    return out


@pytest.mark.skipif(not os.environ.get("FASTPP_ZB_ORIGINAL"),
                    reason="FASTPP_ZB_ORIGINAL does not name the authors' auto_schedule.py "
                           "(third-party code, not in this repository)")
def bench_heuristic_against_original():
    """fastpp's heuristic >= 100x the authors' own code (an open target), and the
    transcription no slower."""
    original = _original(os.environ["FASTPP_ZB_ORIGINAL"])

    # each side's inputs made before its clock: the authors' integer lists, fastpp's numbers
    # (``fresh``); inside it, the authors' GraphConfig, fastpp's Costs and Problem
    def run_original(problems):
        return [original.do_heuristic_search(pr.p, pr.n, original.GraphConfig(**i))
                for pr, i in problems]

    def run_transcription(problems):
        return [zb_authors.initial_solution(
            i["cost_f"], i["cost_b"], i["cost_w"], [i["cost_comm"]] * pr.p, i["mem_f"],
            i["mem_b"], i["mem_w"], i["max_mem"], pr.n) for pr, i in problems]

    short = []
    for name, problems in (("Table 5", table5_problems(small=False)),
                           ("random", _random_problems(40))):
        given = [(pr, _integer_inputs(pr)) for pr in problems]
        run_fastpp(fresh(problems[:1]))
        spans = [r[0] for r in run_original(given)]
        assert spans == [r[0] for r in run_transcription(given)]
        times = {"original": [], "transcription": [], "fastpp": []}
        for _ in range(3):  # interleaved rounds, so that the machine's load hits all three
            for key, run in (("original", run_original), ("transcription", run_transcription),
                             ("fastpp", run_fastpp)):
                inputs = fresh(problems) if key == "fastpp" else given
                t0 = time.perf_counter()
                run(inputs)
                times[key].append(time.perf_counter() - t0)
        t = {k: statistics.median(v) for k, v in times.items()}
        print(f"\n{name}: original {t['original']:.3g} s, transcription "
              f"{t['transcription']:.3g} s, fastpp {t['fastpp']:.3g} s: "
              f"{t['original'] / t['fastpp']:.0f}x the original")
        assert t["transcription"] <= t["original"] * 1.1, "the transcription is no fair baseline"
        if t["original"] / t["fastpp"] < TARGET:
            short.append(f"{name} {t['original'] / t['fastpp']:.0f}x")
    if short:  # an open target: the figure, not a failure
        pytest.xfail(f"fastpp's heuristic under {TARGET}x the authors' code: {', '.join(short)}")
