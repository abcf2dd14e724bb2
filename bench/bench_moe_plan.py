"""Planning DeepSeek-V3: configurations per second against the loop a user would write.

Run for real with ``pytest bench/bench_moe_plan.py --benchmark-enable -n 0 -s``; the normal suite
runs each once on a small job. The job (issue 20): every tp x pp x ep x cp x schedule x
microbatch (x recomputation, x the overlapped pair) of DeepSeek-V3 that can exist on 2048
H800s, sequence 4K, FP8, DeepSeek's first global batch (3,072 sequences), node-limited routing
to 4 nodes. The baseline is the
per-configuration loop, ``build_schedule`` + ``transformer_costs`` + ``simulate`` +
``device_bytes`` (the same numbers, checked equal on the sample it times), timed in the same
run. Target: 5,000 configurations per second on 2 threads.
"""

import functools

import numpy as np
import pytest
from speedup import check_speedup, min_times, record

from fastpp import build_schedule, simulate
from fastpp.model import device_bytes, plan, transformer_costs
from fastpp.model.stages import device_working_bytes

JOB = dict(model="deepseek-v3", gpus=2048, hardware="H800-80GB", seq=4096, global_batch=3072,
           precision="fp8", node_limit=4, cp=[1, 2, 4], overlap=[False, True], workers=2)
SMALL = JOB | dict(pp=[16], tp=[1], ep=[64], cp=[1], schedules=["1f1b", "dualpipev"],
                   recompute="none", microbatch=[1])
TARGET_RATE = 5_000


def loop(rows, args):
    """The per-configuration loop over the public functions."""
    out = []
    for r in rows.itertuples():
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(
            args["model"], sched, args["hardware"], seq=args["seq"], microbatch=r.microbatch,
            tp=r.t, dp=r.d, recompute=r.recompute, ep=r.ep, precision=args["precision"],
            node_limit=args["node_limit"], cp=r.cp, zero=r.zero, overlap=r.overlap)
        res = simulate(sched, costs)
        by = device_bytes(args["model"], sched, tp=r.t, dp=r.d, zero=r.zero, ep=r.ep, cp=r.cp)
        # and the working set plan counts too (a recomputed layer's with context
        # parallelism's buffers, or the loss's: left out, the buffers alone had left the
        # loop's peaks 0.07-2.1 GB short at cp > 1)
        held = res.peak_activations + device_working_bytes(costs.working,
                                                           sched.stage_to_device, r.p)
        out.append((res.makespan, float((sum(by.values()) + held).max())))
    return out


@functools.cache
def job(small: bool):
    args = SMALL if small else JOB
    plan(**args)  # compile or load the kernels
    return args, plan(**args)


@pytest.mark.parametrize("engine", ["moe-plan", "moe-loop"])
def bench_moe_plan(benchmark, engine):
    """DeepSeek-V3 on 2048 GPUs: plan's configurations per second (2 threads), and the loop's
    seconds per configuration on a sample (one thread)."""
    benchmark.group = "plan: DeepSeek-V3 on 2048 H800s, seconds per configuration"
    args, df = job(benchmark.disabled)
    ran = df[df["step_time"].notna()]
    assert len(ran) and ran["ep"].max() > 1
    if engine == "moe-plan":
        count = len(ran)
        result = benchmark.pedantic(plan, kwargs=args, rounds=3, iterations=1)
        assert result["makespan"].notna().sum() == count
    else:
        sample = ran.sample(min(len(ran), 40), random_state=0)
        count = len(sample)
        loop(sample.head(2), args)
        got = benchmark.pedantic(loop, args=(sample, args), rounds=3, iterations=1)  # as plan's
        expected = sample[["makespan", "peak_memory"]].to_numpy()
        np.testing.assert_allclose(np.array(got), expected, rtol=1e-12)
    if benchmark.disabled:
        return
    seconds = benchmark.stats.stats.min
    benchmark.stats.stats.min /= count
    benchmark.extra_info["configurations"] = count
    if engine == "moe-plan":
        rate = count / seconds
        benchmark.extra_info["configurations per second"] = round(rate)
        print(f"\n{count:,} DeepSeek-V3 configurations in {seconds:.3f} s: {rate:,.0f} per "
              f"second (target {TARGET_RATE:,})")
        assert rate >= TARGET_RATE, f"{rate:,.0f} configurations per second < {TARGET_RATE:,}"
    else:
        print(f"\nloop: {count} configurations, {benchmark.stats.stats.min * 1e3:.1f} ms each")
    record(benchmark, engine)
    times = min_times(benchmark)
    if engine == "moe-loop" and "moe-loop" in times:
        # plan runs on two workers, the loop on one: against half the loop's time, as if
        # it scaled perfectly (bench_sweep's "sweep 2" likewise)
        times["moe-loop, half"] = times["moe-loop"] / 2
        check_speedup(benchmark, "moe-plan", "moe-loop, half", None)
