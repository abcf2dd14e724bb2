"""The planner: configurations per second against the loop a user would write.

Run for real with ``pytest bench/bench_plan.py --benchmark-enable -n 0 -s``; the normal suite runs
each once on a small job. The baseline is the old ``model_sweep`` loop: per configuration
``build_schedule`` + ``transformer_costs`` + ``simulate`` + ``device_bytes``, the same numbers
(checked equal on the sample it times), reported per configuration on the default job
(LLaMA-3-70B on 64 H100s). Each is timed twice: with what it keeps across calls (plan's point
plans, ``fastpp.batch.PLANS``; the loop's built schedules and their plans, ``build_schedule``'s)
holding the job's schedules from an earlier call, as in a session that plans a second model,
hardware or sequence on the same cluster and batch; and with both emptied before each round,
as the first call in a process. Targets: LLaMA-70B-sized configurations (``p <= 16``, ``n <=
128``) at 20,000 or more per second on 2 threads (issue 19); 4x the ratio to the loop that
issue 27 opened at, 15.4x. Each is asserted with the plans kept, and is open (an xfail with
the figure) on the first call.
"""

import functools

import pytest
from speedup import check_speedup, record

from fastpp import batch, build_schedule, simulate
from fastpp.generators import registry
from fastpp.model import device_bytes, plan, transformer_costs
from fastpp.model.stages import device_working_bytes

# one thread, as the loop runs: the ratio is per configuration, not per machine
DEFAULT = dict(model="llama3-70b", gpus=64, hardware="H100-80GB", seq=8192, global_batch=512,
               workers=1)
SMALL = dict(model="llama3-8b", gpus=8, hardware="H100-80GB", seq=2048, global_batch=32,
             schedules=["1f1b", "zbv"], recompute="none", workers=1)
TARGET_RATE = 20_000
# issue 27: plan 4x its ratio to the loop when the issue opened (15.4x, docs/performance.md)
TARGET_OVER_LOOP = 4 * 15.4


def loop(rows, args):
    """The per-configuration loop (what fastpp.model.model_sweep did)."""
    out = []
    for r in rows.itertuples():
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(args["model"], sched, args["hardware"], seq=args["seq"],
                                  microbatch=r.microbatch, tp=r.t, dp=r.d,
                                  recompute=r.recompute)
        res = simulate(sched, costs)
        by = device_bytes(args["model"], sched, tp=r.t, dp=r.d, zero=r.zero)
        held = res.peak_activations + device_working_bytes(costs.working,
                                                           sched.stage_to_device, r.p)
        out.append((res.makespan, float((sum(by.values()) + held).max())))
    return out


@functools.cache
def default_job(small: bool):
    args = SMALL if small else DEFAULT
    plan(**args)  # compile or load the kernels
    return args, plan(**args)


def whole_builds(ran, size: int = 60):
    """About ``size`` configurations of the job, a schedule build at a time with every
    configuration that shares it, as the loop over the whole job builds each schedule once
    (60 configurations drawn one by one had needed 57 builds where the job needs 603 for
    3,429: the first call's loop was overstated by about a fifth, a benchmark review)."""
    import numpy as np
    import pandas as pd

    group = ran.groupby(["schedule", "p", "n", "m"], sort=False).ngroup().to_numpy()
    chosen, total = [], 0
    for g in np.random.default_rng(0).permutation(group.max() + 1):
        chosen.append(ran[group == g])
        total += len(chosen[-1])
        if total >= size:
            break
    return pd.concat(chosen)


def forget() -> None:
    """Empty what plan and the loop keep across calls: the first call in a process."""
    batch.PLANS.clear()
    with registry._BUILT_LOCK:
        registry._BUILT.clear()


@pytest.mark.parametrize("engine", ["plan", "loop", "plan-first", "loop-first"])
def bench_plan_per_configuration(benchmark, engine):
    benchmark.group = "plan: seconds per simulated configuration"
    args, df = default_job(benchmark.disabled)
    ran = df[df["step_time"].notna()]
    setup = forget if engine.endswith("-first") else None
    if engine.startswith("plan"):
        count = len(ran)
        result = benchmark.pedantic(plan, kwargs=args, setup=setup, rounds=3, iterations=1)
        assert result["makespan"].notna().sum() == count
    else:  # a sample: the loop takes 3-5 ms a configuration
        sample = whole_builds(ran)
        count = len(sample)
        loop(sample.head(3), args)  # load what it calls from the kernel cache first
        # the fastest of 3 rounds, as plan gets: one round would count its noise against it
        got = benchmark.pedantic(loop, args=(sample, args), setup=setup, rounds=3,
                                 iterations=1)
        assert got == list(zip(sample["makespan"], sample["peak_memory"], strict=True))
    if not benchmark.disabled:  # per configuration, so that the two compare
        benchmark.stats.stats.min /= count
        benchmark.extra_info["configurations"] = count
        print(f"\n{engine}: {count} configurations, {benchmark.stats.stats.min * 1e6:.0f} us each")
    record(benchmark, engine)
    if engine == "loop":
        check_speedup(benchmark, "plan", "loop", TARGET_OVER_LOOP)
    elif engine == "loop-first":  # the first call's ratio: open (an xfail with the figure)
        check_speedup(benchmark, "plan-first", "loop-first", TARGET_OVER_LOOP, open_target=True)


@pytest.mark.parametrize("side", ["kept", "first"])
def bench_plan_70b_two_threads(benchmark, side):
    """LLaMA-70B-sized configurations, p <= 16 and n <= 128, 2 threads: configurations/s,
    with the plans of an earlier call kept (the target's side) and made in each round (the
    first call in a process: reported)."""
    benchmark.group = "plan: LLaMA-70B configurations per second, 2 threads"
    args = dict(model="llama3-70b", gpus=64, hardware="H100-80GB", seq=8192,
                global_batch=128, pp=[4, 8, 16], workers=2)
    if benchmark.disabled:
        args |= dict(pp=[4], schedules=["1f1b"], recompute="none")
    plan(**args)
    setup = batch.PLANS.clear if side == "first" else None
    df = benchmark.pedantic(plan, kwargs=args, setup=setup, rounds=3, iterations=1)
    ran = df[df["step_time"].notna()]
    assert ran["p"].max() <= 16 and ran["n"].max() <= 128
    if benchmark.disabled:
        return
    rate = len(ran) / benchmark.stats.stats.min
    benchmark.extra_info["configurations per second"] = round(rate)
    print(f"\n{side}: {len(ran)} configurations in {benchmark.stats.stats.min:.3f} s: "
          f"{rate:,.0f} per second (target {TARGET_RATE:,})")
    message = f"{rate:,.0f} configurations per second < {TARGET_RATE:,}"
    if side == "first" and rate < TARGET_RATE:  # open: an xfail with the figure
        pytest.xfail(message)
    assert rate >= TARGET_RATE, message
