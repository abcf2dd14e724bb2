"""Physical invariants of the cost model and the planner, as properties over random small
dense and MoE models on the A100, H100 and B200 presets: faster hardware is never slower,
recomputation trades memory for time, ZeRO's stages shard, more work takes longer, and one
configuration is priced alike by ``plan``, ``explain`` and ``transformer_costs`` +
``simulate``."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastpp
from fastpp.model import HARDWARE, RunConfig, Transformer, plan, transformer_costs
from fastpp.model.explain import explain

KEY = ["t", "cp", "p", "d", "ep", "etp", "schedule", "m", "microbatch", "recompute", "zero",
       "overlap", "precision", "layout"]
# a plain, a split-backward (its I and W apart) and a V-shaped schedule keep each plan small
SCHEDULES = ["1f1b", "zb-h1", "v-half"]
RTOL = 1e-9
FEW = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def jobs(draw):
    """A toy model (dense or with experts), a GPU preset, the GPUs, sequence and batch."""
    heads = draw(st.sampled_from([8, 16]))
    hidden = heads * draw(st.sampled_from([64, 128]))
    moe = draw(st.booleans())
    model = Transformer(draw(st.sampled_from([4, 8])), hidden, heads,
                        kv_heads=heads // draw(st.sampled_from([1, 4])),
                        ffn=hidden * draw(st.sampled_from([2, 4])),
                        vocab=draw(st.sampled_from([8192, 32000])), swiglu=draw(st.booleans()),
                        tied_embeddings=draw(st.booleans()), experts=4 if moe else 0,
                        top_k=2 if moe else 0, name="toy")
    hardware = HARDWARE[draw(st.sampled_from(["A100-80GB", "H100-80GB", "B200-180GB"]))]
    return (model, hardware, draw(st.sampled_from([8, 16])),
            draw(st.sampled_from([1024, 2048])), draw(st.sampled_from([32, 64])))


def _plan(model, hardware, gpus, seq, global_batch, **kw):
    kw = {"schedules": SCHEDULES, "zero": [1, 3], "workers": 1, **kw}
    if model.moe and "overlap" not in kw:  # with its overlapped pairs, and without
        kw.update(schedules=[*kw["schedules"], "dualpipev"], overlap=[False, True])
    df = plan(model, gpus, hardware, seq=seq, global_batch=global_batch, **kw)
    return df[df["step_time"].notna()]


def _faster(link, by=2.0):
    """The link ``by`` times faster: its bandwidths up, its latencies down."""
    protocols = tuple((base / by, hop / by, rate * by, *rest)
                      for base, hop, rate, *rest in link.protocols)
    return dataclasses.replace(link, bandwidth=link.bandwidth * by, latency=link.latency / by,
                               protocols=protocols)


def _never_above(before, after, column):
    """Every configuration's ``column`` in ``after`` at most its value in ``before``."""
    both = before.merge(after, on=KEY, suffixes=("_before", "_after"))
    assert len(both) > 0
    worse = both[both[f"{column}_after"] > both[f"{column}_before"] * (1 + RTOL)]
    assert worse.empty, worse[KEY + [f"{column}_before", f"{column}_after"]].head()


@FEW
@given(job=jobs(), part=st.sampled_from(["node", "network", "flops", "memory"]))
def test_faster_hardware_is_never_slower(job, part):
    model, hardware, *rest = job
    faster = {"node": {"node": _faster(hardware.node)},
              "network": {"network": _faster(hardware.network)},
              "flops": {"peak_flops": 2 * hardware.peak_flops,
                        "fp8_flops": hardware.fp8_flops and 2 * hardware.fp8_flops},
              "memory": {"memory_bandwidth": 2 * hardware.memory_bandwidth}}[part]
    _never_above(_plan(model, hardware, *rest),
                 _plan(model, dataclasses.replace(hardware, **faster), *rest), "step_time")


@FEW
@given(job=jobs())
def test_more_recomputation_holds_less_and_takes_longer(job):
    df = _plan(*job)
    by = df.pivot_table(index=[k for k in KEY if k != "recompute"], columns="recompute",
                        values=["activation_bytes", "step_time"])
    for less, more in (("none", "selective"), ("selective", "full")):
        # (the overlapped pairs refuse full recomputation: their rows have no "full")
        both = by.dropna(subset=[("step_time", less), ("step_time", more)])
        assert (both["activation_bytes", more]
                <= both["activation_bytes", less] * (1 + RTOL)).all()
        assert (both["step_time", more] >= both["step_time", less] * (1 - RTOL)).all()


@FEW
@given(job=jobs())
def test_zero_stages_shard(job):
    """ZeRO 0 -> 1 -> 2 never adds bytes on a GPU; ZeRO-3 holds the gradients and optimizer
    states of ZeRO-2 or fewer (its weights may exceed ZeRO-2's by the layers it has in flight,
    whole beside their shards: ``stages.optimizer_split``)."""
    df = _plan(*job, zero=[0, 1, 2, 3], schedules=["1f1b"])
    by = df.pivot_table(index=[k for k in KEY if k != "zero"], columns="zero",
                        values=["peak_memory", "gradient_bytes", "optimizer_bytes"])
    by = by.dropna()
    for z in (0, 1):
        assert (by["peak_memory", z + 1] <= by["peak_memory", z] * (1 + RTOL)).all()
    for part in ("gradient_bytes", "optimizer_bytes"):
        assert (by[part, 3] <= by[part, 2] * (1 + RTOL)).all()


@FEW
@given(job=jobs())
def test_more_work_takes_longer_and_more_memory(job):
    """A larger global batch at one layout takes longer; a longer sequence takes longer and
    holds more."""
    model, hardware, gpus, seq, global_batch = job
    df = _plan(*job)
    longer = _plan(model, hardware, gpus, 2 * seq, global_batch)
    for column in ("step_time", "peak_memory"):
        _never_above(longer, df, column)
    _never_above(_plan(model, hardware, gpus, seq, 2 * global_batch), df, "step_time")


@FEW
@given(job=jobs())
def test_plan_rows_are_one_price(job):
    """``tokens_per_s * step_time`` is the step's tokens; the error bar is finite and >= 0;
    a row is priced alike by ``explain`` and by ``transformer_costs`` + ``simulate``."""
    model, hardware, gpus, seq, global_batch = job
    df = _plan(*job)
    assert np.allclose(df["tokens_per_s"] * df["step_time"], global_batch * seq, rtol=RTOL)
    assert (np.isfinite(df["expected_error"]) & (df["expected_error"] >= 0)).all()
    assert df["extrapolated"].map(lambda x: isinstance(x, str)).all()
    for _, row in df.sample(2, random_state=0).iterrows():
        config = RunConfig.from_row(row, seq=seq)
        again = explain(model, config, hardware, neighbours=0, workers=1).row
        assert again["step_time"] == pytest.approx(row["step_time"], rel=RTOL)
        assert again["peak_memory"] == pytest.approx(row["peak_memory"], rel=RTOL)
        costs = transformer_costs(model, hardware=hardware, config=config)
        span = fastpp.simulate(config.build_schedule(), costs).makespan
        assert span == pytest.approx(row["makespan"], rel=RTOL)


@pytest.mark.parametrize("name", ["A100-80GB", "H100-80GB", "B200-180GB"])
def test_equal_stages_cost_alike(name):
    """A pipeline of equal layers in one node: its middle stages' costs are equal."""
    model = Transformer(8, 1024, 16, vocab=32000, swiglu=True, name="toy")
    sched = fastpp.build_schedule("zb-h1", 8, 16)
    costs = transformer_costs(model, sched, name, seq=2048, microbatch=1, tp=1)
    for field in ("f", "b", "w", "act"):
        middle = np.asarray(getattr(costs, field))[1:-1]
        assert np.allclose(middle, middle[0], rtol=RTOL), field


# A split backward's I and W each took their share of the whole backward's floor (the CPU's
# issue time, ZeRO-3's collectives) as I = b - w: a faster W made I longer


def _toy(**kw):
    return Transformer(4, 1024, 8, ffn=2048, vocab=8192, swiglu=True, tied_embeddings=True,
                       name="toy", **kw)


def test_a_faster_gpu_never_lengthens_a_host_bound_split_backward():
    """A100's CPU time bounds a recomputed layer's backward: at twice the peak a ZB-H2 step
    took 1.3% longer (113.6 -> 115.1 ms), its I longer by what W lost."""
    sched = fastpp.build_schedule("zb-h2", p=4, n=16)
    a100 = HARDWARE["A100-80GB"]
    spans, inputs = [], []
    for hardware in (a100, dataclasses.replace(a100, peak_flops=2 * a100.peak_flops)):
        costs = transformer_costs(_toy(), sched, hardware, seq=2048, microbatch=1, dp=4,
                                  recompute="full")
        spans.append(fastpp.simulate(sched, costs).makespan)
        inputs.append(np.asarray(costs.i))
    assert spans[1] <= spans[0]
    assert (inputs[1] <= inputs[0]).all()


def test_fp8_is_not_slower_on_a_collective_bound_split_backward():
    """ZeRO-3's collectives bound the backward on B200: V-Half's step in FP8 came out 11%
    slower than in bf16 (170 -> 190 ms), its I longer by what FP8 took off W."""
    model = Transformer(4, 2048, 16, ffn=8192, vocab=32000, swiglu=True, experts=4, top_k=2,
                        name="toy")
    spans = {}
    for precision in ("bf16", "fp8"):
        config = RunConfig(t=4, p=2, d=2, schedule="v-half", m=2, microbatch=1, zero=3,
                           precision=precision, seq=2048, global_batch=64)
        costs = transformer_costs(model, hardware="B200-180GB", config=config)
        spans[precision] = fastpp.simulate(config.build_schedule(), costs).makespan
    assert spans["fp8"] <= spans["bf16"]


def test_split_backward_unchanged_where_nothing_bounds_it():
    """Where neither the CPU nor ZeRO-3's collectives bound the backward, I is b - w as
    before, so a plain 1F1B and a split schedule price the same ops."""
    sched = fastpp.build_schedule("zb-h1", p=4, n=8)
    costs = transformer_costs(_toy(), sched, "H100-80GB", seq=2048, microbatch=1)
    assert np.allclose(costs.i, np.asarray(costs.b) - np.asarray(costs.w), rtol=1e-12)
    assert pd.notna(costs.i).all()


def test_a_faster_link_never_lengthens_an_overlapped_pair():
    """ZeRO-3's collectives bound the backward of Qwen3-30B-A3B's combined 1F1B on 16 A100s:
    the pair's saving came off that bound, so with twice the NVLink the saving (the
    all-to-all hidden) shrank and the pair grew, 1.056 -> 1.093 s, the step 2.4% longer."""
    config = RunConfig(t=1, p=1, d=16, ep=4, schedule="combined-1f1b", m=1, microbatch=1,
                       zero=3, overlap=True, seq=4096, global_batch=64)
    a100 = HARDWARE["A100-80GB"]
    spans, pairs = [], []
    for hardware in (a100, dataclasses.replace(a100, node=_faster(a100.node))):
        costs = transformer_costs("qwen3-30b-a3b", hardware=hardware, config=config)
        spans.append(fastpp.simulate(config.build_schedule(), costs).makespan)
        pairs.append(np.asarray(costs.fb))
    assert spans[1] <= spans[0]
    assert (pairs[1] <= pairs[0]).all()
    # an overlapped pair never takes longer than its halves apart
    assert (pairs[1] <= np.asarray(costs.f) + np.asarray(costs.b)).all()
