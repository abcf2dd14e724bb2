"""fastpp.model: formulas against hand calculations, plan rows against simulate()."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import held_bytes
from reference import assert_agrees, simulate_reference

from fastpp import ScheduleError, build_schedule, simulate
from fastpp.model import (
    MODELS,
    PLAN_COLUMNS,
    Hardware,
    Link,
    Transformer,
    chunk_layers,
    device_bytes,
    from_hf,
    layer_costs,
    plan,
    transformer_costs,
)
from fastpp.model.plan import summary
from fastpp.model.stages import loss_bytes

ROOT = Path(__file__).resolve().parents[1]
GPT = Transformer(layers=4, hidden=8, heads=2, vocab=10, dropout=True, flash_attention=False)
LLAMA = Transformer(layers=4, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10, swiglu=True)
WIRE = Link("toy-node", bandwidth=1000.0, latency=0.01)
# products at half the peak whatever their shape (a vanishing half-saturation size), memory
# and launches free: the per-op model reduces to FLOPs / (0.5 peak), checkable by hand
TOY = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=WIRE,
               network=Link("toy-net", 100.0, 0.1), efficiency=0.5, gpus_per_node=4,
               memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)


def test_parameters_by_hand():
    # GPT: 12h^2 matrix parameters, two norms; untied here: embedding and output 2vh
    assert GPT.matrix_params() == 12 * 64 and GPT.layer_params() == 768 + 16
    # SwiGLU with GQA: Q and O 2h^2, K and V 2h*kv (kv = 1 * 8 / 2 = 4), MLP 3hF
    assert LLAMA.kv == 4 and LLAMA.matrix_params() == 128 + 64 + 384
    assert LLAMA.params() == 4 * (576 + 16) + 2 * 10 * 8
    # the presets' published sizes
    assert MODELS["llama2-7b"].params() == pytest.approx(6.74e9, rel=1e-3)
    assert MODELS["llama3-70b"].params() == pytest.approx(70.55e9, rel=1e-3)
    assert MODELS["llama3-405b"].params() == pytest.approx(405.85e9, rel=1e-3)
    assert MODELS["gpt3-175b"].params() == pytest.approx(174.6e9, rel=1e-3)


def test_layer_flops_and_bytes_by_hand():
    # s*b*h = 16*2*8 = 256: the Zero Bubble paper's Table 1 and Korthikanti et al. 2022
    c = layer_costs(GPT, 16, 2, 1, False, 0)
    assert (c["forward"], c["input_grad"], c["weight_grad"]) == (256 * 256, 256 * 320,
                                                                 256 * 192)
    assert c["activations"] == 32 * (34 * 8 + 5 * 2 * 16)  # sb(34h + 5as)
    assert c["gamma"] == pytest.approx(32 * 256 / (32 * 432))  # M_W / M_B = 32sbh / M_B
    # t = 2: sbh(10 + 24/t + 5as/(ht)) without sequence parallelism, sbh(34/t + ...) with it
    assert layer_costs(GPT, 16, 2, 2, False, 0)["activations"] == 256 * (10 + 12 + 10)
    assert layer_costs(GPT, 16, 2, 2, True, 0)["activations"] == 256 * (17 + 10)
    assert layer_costs(GPT, 16, 2, 2, False, 0)["forward"] == 256 * 256 / 2
    # selective: no scores, their FLOPs again in the backward; full: the input, a forward
    selective = layer_costs(GPT, 16, 2, 2, True, 1)
    assert selective["activations"] == 256 * 17
    assert selective["input_grad"] == (256 * 320 + 4 * 2 * 16 * 16 * 8) / 2
    full = layer_costs(GPT, 16, 2, 2, True, 2)
    assert full["activations"] == 2 * 256 / 2 and full["gamma"] == 1.0
    assert full["input_grad"] == (256 * 320 + 256 * 256) / 2
    assert full["collectives_backward"] == 4 and full["collectives_forward"] == 2
    # fused SwiGLU (Megatron's bias_swiglu) stores 6F per sb in the MLP, its input and the
    # product, GQA 4kv for K and V; FlashAttention no scores
    assert layer_costs(LLAMA, 16, 2, 1, False, 0)["activations"] == 32 * (8 * 8 + 16 + 16 + 16
                                                                          + 96)
    # SwiGLU as separate ops (TorchTitan's) keeps the SiLU's output too: 8F
    eager = dataclasses.replace(LLAMA, fused_swiglu=False)
    assert layer_costs(eager, 16, 2, 1, False, 0)["activations"] == 32 * (8 * 8 + 16 + 16 + 16
                                                                          + 128)


def test_stage_costs_by_hand():
    sched = build_schedule("1f1b", 2, 4)  # two layers per stage
    c = transformer_costs(GPT, sched, TOY, seq=16, microbatch=2, tp=2,
                          blocking_handoffs=False).per_stage(sched)
    ring = 2 * 1 / 2 * 512 / 1000 + 2 * 0.01  # two-rank ring of the 2sbh-byte output
    layer = 256 * 256 / 2 / 5e5  # a layer's forward on one of two ranks, at 5e5 FLOP/s
    logits = 2 * 256 * 10 / 2 / 5e5  # the output layer's forward, on the last stage
    # the embedding's output is reduce-scattered (half a ring); the last stage all-gathers
    # the logits' input (half a ring) and all-reduces the loss's max, sum and target logit
    # (4 bytes for each of the s b = 32 tokens)
    loss = 3 * (2 * 1 / 2 * 4 * 32 / 1000 + 2 * 0.01)
    np.testing.assert_allclose(c.tf, [2 * layer + 4.5 * ring,
                                      2 * layer + 4.5 * ring + logits + loss], rtol=1e-9)
    assert c.tw[0] == pytest.approx(2 * 256 * 192 / 2 / 5e5, rel=1e-9)
    # the whole pipeline (t d p = 4) sits in one node: hand-offs of sbh over NVLink
    assert c.comm[0] == pytest.approx(0.01 + 2 * 256 / 2 / 1000)
    # Megatron's blocking hand-offs (the default): each chunk op also holds its device for
    # one hand-off, latency and transfer; the weight gradient sends nothing
    held = transformer_costs(GPT, sched, TOY, seq=16, microbatch=2, tp=2).per_stage(sched)
    np.testing.assert_allclose(held.tf - c.tf, c.comm, rtol=1e-9)
    np.testing.assert_allclose(held.tb - c.tb, c.comm, rtol=1e-9)
    np.testing.assert_array_equal(held.tw, c.tw)
    # activations: two layers, the embedding's dropout mask, a byte an element (first; its
    # output is the first layer's input, kept there), or fp32 logits and the final norm's and
    # output projection's bf16 inputs (last: Korthikanti et al.'s 4 s b h / t beside 4 s b v / t)
    act = 2 * 256 * 27
    np.testing.assert_allclose(c.unit, [act + 256 / 2, act + 4 * 32 * 10 / 2 + 4 * 256 / 2])
    # without sequence parallelism the mask and the head's inputs are whole on every rank:
    # the last stage keeps 4 s b v / t + 4 s b h - s b h more than the first
    whole = transformer_costs(GPT, sched, TOY, seq=16, microbatch=2, tp=2,
                              sequence_parallel=False).per_stage(sched)
    assert whole.unit[1] - whole.unit[0] == pytest.approx(4 * 32 * 10 / 2 + 4 * 256 - 256)


def test_device_bytes_tp_and_zero_by_hand():
    sched = build_schedule("1f1b", 2, 4)
    one = device_bytes(GPT, sched, zero=0)
    params = 2 * 784 + 80  # two layers plus the embedding (first) or the output layer (last)
    assert one["parameter_bytes"].tolist() == [2 * params] * 2
    assert one["optimizer_bytes"].tolist() == [12 * params] * 2
    two = device_bytes(GPT, sched, tp=2, zero=0)
    np.testing.assert_allclose(two["parameter_bytes"] * 2, one["parameter_bytes"])  # TP / t
    z2 = device_bytes(GPT, sched, dp=4, zero=2)
    assert z2["gradient_bytes"].tolist() == [4 * params / 4] * 2  # fp32, Megatron's main_grad
    assert z2["optimizer_bytes"].tolist() == [12 * params / 4] * 2
    # a V of 4 one-layer chunks: device 0 holds chunks 0 and 3, so the embedding and the
    # output layer; tied, they are one copy
    tied = Transformer(4, 8, 2, vocab=10, tied_embeddings=True)
    v = build_schedule("zbv", 2, 4, 2)
    assert device_bytes(GPT, v, zero=0)["parameter_bytes"].tolist() == [2 * (2 * 784 + 160),
                                                                         2 * 2 * 784]
    assert device_bytes(tied, v, zero=0)["parameter_bytes"].tolist() == [2 * (2 * 784 + 80),
                                                                          2 * 2 * 784]


@pytest.mark.parametrize("name, p, n, m", [("1f1b", 2, 4, 1), ("interleaved-1f1b", 2, 4, 2),
                                           ("zbv", 2, 4, 2), ("dualpipe", 2, 4, 1),
                                           ("chimera", 2, 2, 1)])
def test_uneven_stages_agree_with_the_reference(name, p, n, m):
    sched = build_schedule(name, p, n, m)
    costs = transformer_costs(GPT, sched, TOY, seq=16, microbatch=2, tp=2)
    res = simulate(sched, costs)
    assert_agrees(res, simulate_reference(sched, costs))
    big = Transformer(layers=4, hidden=8, heads=2, vocab=2000)  # loads the last stages
    assert simulate(sched, transformer_costs(big, sched, TOY, seq=16, microbatch=2,
                                             tp=2)).makespan > res.makespan


@pytest.fixture(scope="module")
def toy_plan():
    model = Transformer(layers=8, hidden=64, heads=8, kv_heads=4, ffn=160, vocab=500,
                        swiglu=True, name="toy")
    return model, plan(model, 16, TOY, seq=32, global_batch=64, capacity=4e6)


def test_plan_rows_equal_simulate(toy_plan):
    model, df = toy_plan
    assert list(df.columns) == list(PLAN_COLUMNS)
    assert (df["t"] * df["p"] * df["d"] == 16).all() and set(df["t"]) == {1, 2, 4}
    ran = df[df["step_time"].notna()]
    assert df["fits"].any() and (~df["fits"] & df["step_time"].notna()).any()
    # a random sample, plus rows of three virtual stages and rows without a pipeline
    three = ran[ran["m"] == 3].sample(8, random_state=1)
    alone = ran[ran["p"] == 1].sample(8, random_state=2)
    assert set(ran[ran["p"] == 1]["schedule"]) > {"gpipe", "1f1b", "zb-h1"}
    for r in pd.concat([ran.sample(40, random_state=0), three, alone]).itertuples():
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(model, sched, TOY, seq=32, microbatch=r.microbatch, tp=r.t,
                                  dp=r.d, recompute=r.recompute)
        res = simulate(sched, costs)
        by = device_bytes(model, sched, tp=r.t, dp=r.d, zero=r.zero)
        # and the working set: a recomputed layer's during one backward, or the loss's
        held = held_bytes(costs, sched, res)
        total = sum(by.values()) + held
        worst = int(np.argmax(total))
        assert (r.makespan, r.bubble_ratio) == (res.makespan, res.bubble_ratio), r
        assert (r.peak_memory, r.activation_bytes) == pytest.approx(
            (total[worst], held[worst]), rel=1e-12), r
        assert r.tokens_per_s == pytest.approx(64 * 32 / r.step_time)
        assert r.mfu == pytest.approx(r.tokens_per_s * model.flops_per_token(32) / 16 / 1e6)
    # fastest that fits first; misses carry their reason
    fits = df[df["fits"]]
    assert fits["tokens_per_s"].is_monotonic_decreasing and df["fits"].iloc[0]
    miss = ran[~ran["fits"]]
    needs = miss["reason"].str.extract(r"^needs ([\d.]+) GB on device \d+ > capacity 0.004 "
                                       r"GB$")[0].astype(float)
    assert needs.notna().all() and (needs > 0.004).all()  # (both read as GB, with digits)
    assert (miss["peak_memory"] > 4e6).all() and (fits["peak_memory"] <= 4e6).all()
    assert (df[df["step_time"].isna()]["reason"] != "").all()


def test_hand_checkable_facts(toy_plan):
    model, _ = toy_plan
    # weights alone (2 bytes each) beyond all GPUs' memory: nothing fits anywhere
    nowhere = plan(model, 16, TOY, seq=32, global_batch=64,
                   capacity=2 * model.params() / 16 * 0.99)
    assert not nowhere["fits"].any()
    # a larger global batch (more microbatches) shrinks 1F1B's bubble
    args = dict(seq=32, schedules=["1f1b"], tp=1, pp=4, microbatch=1, recompute="none")
    small, large = (plan(model, 16, TOY, global_batch=g, **args) for g in (16, 128))
    assert large["bubble_ratio"].iloc[0] < small["bubble_ratio"].iloc[0]
    assert (large["n"].iloc[0], small["n"].iloc[0]) == (32, 4)


def test_without_a_pipeline_each_schedule_has_its_own_memory():
    """p = 1: one timeline's time for every schedule, but GPipe keeps all n microbatches'
    activations and ZB-H1 one (the issue's example, 1.82 TB against 76 GB on 80 GB GPUs, with
    SwiGLU as separate ops; Megatron's fused SwiGLU keeps 2F s/t bytes a layer and microbatch
    less: 58.7 MB, by hand below)."""
    # the figures counted bf16 gradients (Megatron's --grad-reduce-in-bf16)
    setup = dict(seq=8192, global_batch=512, schedules=["gpipe", "zb-h1"], tp=8, pp=1,
                 microbatch=1, recompute="none", reduce_bytes=2)
    separate = plan(dataclasses.replace(MODELS["llama3-70b"], fused_swiglu=False), 64, **setup)
    df = plan("llama3-70b", 64, **setup)
    assert sorted(df["schedule"]) == ["gpipe", "zb-h1"] and (df["p"] == 1).all()
    gpipe, zb = (df[df["schedule"] == name].iloc[0] for name in ("gpipe", "zb-h1"))
    assert gpipe.n == zb.n == 512 // 8
    assert gpipe.makespan == pytest.approx(zb.makespan)
    # the loss's working set, 2 bytes a logit of the rank's share, beside the activations
    loss = float(loss_bytes(MODELS["llama3-70b"], 8192, 8))
    assert gpipe.activation_bytes - loss == pytest.approx(gpipe.n * (zb.activation_bytes - loss))
    sep_gpipe, sep_zb = (separate[separate["schedule"] == name].iloc[0]
                         for name in ("gpipe", "zb-h1"))
    assert sep_gpipe.peak_memory / 1e12 == pytest.approx(1.82, abs=0.005)
    assert (sep_zb.peak_memory - loss) / 1e9 == pytest.approx(76.2, abs=0.05)
    fused_saves = 2 * 28672 * 8192 / 8 * 80  # 2F s / t bytes a layer, 80 layers
    assert sep_gpipe.peak_memory - gpipe.peak_memory == pytest.approx(64 * fused_saves)
    assert sep_zb.peak_memory - zb.peak_memory == pytest.approx(fused_saves)
    assert not gpipe.fits and zb.fits
    need = gpipe.reason.removeprefix("needs ").split(" GB on device 0 >")[0]
    assert float(need.replace(",", "")) == pytest.approx(gpipe.peak_memory / 1e9, abs=0.05)
    assert zb.reason == ""
    for r in (gpipe, zb):  # each its own schedule's simulation
        sched = build_schedule(r.schedule, 1, r.n)
        costs = transformer_costs("llama3-70b", sched, seq=8192, tp=8, dp=8)
        bytes_ = device_bytes("llama3-70b", sched, tp=8, dp=8, zero=1, reduce_bytes=2)
        assert r.peak_memory == pytest.approx(
            sum(bytes_.values())[0] + held_bytes(costs, sched, simulate(sched, costs))[0],
            rel=1e-12)
    # more chunks on the one device: the same time, and each chunk count a row of its own
    model = Transformer(layers=8, hidden=64, heads=8, vocab=500, name="toy")
    one = plan(model, 4, TOY, seq=32, global_batch=8, schedules=["interleaved-1f1b"],
               m=[2, 3, 4], pp=1, tp=1, microbatch=1, recompute="none")
    assert sorted(one["m"]) == [2, 3, 4]
    np.testing.assert_allclose(one["makespan"], one["makespan"].iloc[0], rtol=1e-12)
    for r in one.itertuples():
        sched = build_schedule("interleaved-1f1b", 1, r.n, r.m)
        costs = transformer_costs(model, sched, TOY, seq=32, dp=4)
        res = simulate(sched, costs)
        assert (r.makespan, r.activation_bytes) == (res.makespan, held_bytes(costs, sched, res)[0])
    # the summary folds schedules alike without a pipeline into one line
    text = summary(plan(model, 4, TOY, seq=32, global_batch=32, pp=1, tp=1, microbatch=1,
                        recompute="none", schedules=["1f1b", "zb-h1", "gpipe"],
                        capacity=1e9))
    assert " 1f1b (+1 alike) " in text and " zb-h1 " not in text and " gpipe " in text
    # named by the simplest of them, whichever comes first (interleaved-zb at m = 4 on one
    # device had named the fastest line)
    text = summary(plan(model, 4, TOY, seq=32, global_batch=32, pp=1, tp=1, microbatch=1,
                        recompute="none", schedules=["interleaved-zb", "zb-h1"], m=[4, 1],
                        capacity=1e9))
    assert " zb-h1 (+1 alike)  1 " in text and "interleaved-zb" not in text, text
    # and the default search keeps both (it no longer lets one schedule stand for all)
    every = plan("llama3-70b", 64, seq=8192, global_batch=512, schedules=["gpipe", "zb-h1"],
                 tp=8, pp=1)
    assert every[every["fits"]]["schedule"].iloc[0] == "zb-h1"
    assert set(every["schedule"]) == {"gpipe", "zb-h1"}


def test_three_virtual_stages_and_any_m(toy_plan):
    """Interleaving with m = 3 by default (Korthikanti et al.'s 175B and 530B), any m on
    request, the layers' limit as a reason, and the extra hand-offs priced: every chunk edge
    crosses devices, so a slower link slows m = 3 more than m = 1."""
    model, df = toy_plan
    inter = df[df["schedule"] == "interleaved-1f1b"]
    assert {2, 3, 4} <= set(inter["m"])
    args = dict(seq=32, global_batch=64, schedules=["interleaved-1f1b"], tp=1, pp=2,
                microbatch=1, recompute="none", zero=1, blocking_handoffs=False)
    odd = plan(model, 16, TOY, m=[3, 4], **args)
    assert (odd["step_time"].notna()).all() and set(odd["m"]) == {3, 4}
    deep = plan(model, 16, TOY, m=5, **args)
    assert deep["reason"].iloc[0] == "layers=8 must be at least the model chunks 10"
    slow = dataclasses.replace(TOY, name="slow", node=Link("slow", 1e3, 1.0),
                               network=Link("slower", 1e2, 1.0))
    hop = {}
    for hw in (TOY, slow):
        for name, k in (("1f1b", 1), ("interleaved-1f1b", 3)):
            row = plan(model, 16, hw, m=k, **args | dict(schedules=[name])).iloc[0]
            hop[hw.name, k] = row.makespan
    # t d p = 16 spans nodes: each hand-off's latency goes from 0.1 s to 1 s. 1F1B's critical
    # path crosses 8 of them (8 x 0.9 s); m = 3's chains cross 5 stage edges each, not 1
    assert hop["slow", 1] - hop["toy", 1] == pytest.approx(8 * 0.9)
    assert hop["slow", 3] - hop["toy", 3] > 3 * (hop["slow", 1] - hop["toy", 1])


@pytest.mark.parametrize("kwargs, message", [
    (dict(gpus=0), r"gpus must be a positive integer \(got gpus=0\)"),
    (dict(gpus=2.5), r"gpus must be a positive integer \(got gpus=2.5\)"),
    (dict(tp=3), r"tp must divide the heads 8 and KV heads 4 \(got tp=3\)"),
    (dict(microbatch=3), r"microbatch must divide global_batch=64 \(got microbatch=3\)"),
    (dict(tp=4, pp=8), r"gpus=16 has no factorization t \* cp \* p \* d with t in \[4\], cp "
                       r"in \[1\] and p in \[8\]"),
    (dict(model="llama-9"), r"model must be one of \[.*'llama3-70b'.*\] or a model object "
                            r"\(got 'llama-9'\)"),
    (dict(hardware="TPU"), r"hardware must be one of \['A100-80GB', 'B200-180GB', "),
    (dict(capacity=-1.0), r"capacity must be finite and > 0 \(got -1.0\)"),
    # 80 meant as GB (the CLI's --capacity-gb) had planned with 80 bytes: nothing fitted
    (dict(capacity=80, hardware="H100-80GB"), r"capacity must be bytes per GPU, at least a "
                                              r"millionth of H100-80GB's 8e\+10 \(got 80; "
                                              r"80 GB is 8e\+10\)"),
    (dict(recompute="most"), r"recompute must be one of \['none', 'selective', 'full'\]"),
    (dict(zero=4), r"zero must be one of \[0, 1, 2, 3\] \(got 4\)"),
    (dict(schedules=["forward-only"]), r"schedules must be training schedules"),
    (dict(link="carrier-pigeon"),
     r"link must be one of \['IB-200G', 'IB-400G', 'IB-400G-H800', 'IB-800G', 'NVLink3'"),
    (dict(link=3), r"link must be a fastpp.model.Link or a preset name \(got int\)"),
])
def test_bad_plan_arguments_are_named(toy_plan, kwargs, message):
    model, _ = toy_plan
    args = dict(model=model, gpus=16, hardware=TOY, seq=32, global_batch=64) | kwargs
    with pytest.raises(ScheduleError, match=message):
        plan(args.pop("model"), args.pop("gpus"), args.pop("hardware"), **args)


def test_an_explicit_tp_beyond_a_node_is_priced_not_refused(toy_plan):
    """TOY has 4 GPUs a node: tp=8 runs its collectives over the network (100 B/s, 0.1 s),
    so the same rows on a node of 8 GPUs (NVLink-like WIRE) are faster; the default search
    keeps tp in a node."""
    _, df = toy_plan
    assert df["t"].max() <= TOY.gpus_per_node
    model = Transformer(layers=8, hidden=64, heads=8, ffn=160, vocab=500, name="toy-mha")
    args = dict(seq=32, global_batch=64, capacity=4e6, tp=8, pp=1, schedules=["1f1b"],
                recompute="none", microbatch=1)
    wide = plan(model, 16, TOY, **args)
    big_node = plan(model, 16, dataclasses.replace(TOY, gpus_per_node=8), **args)
    assert wide["step_time"].notna().all() and (wide["t"] == 8).all()
    assert (wide["step_time"] > big_node["step_time"]).all()


def test_a_slower_network_slows_the_steps_that_cross_nodes(toy_plan):
    model, df = toy_plan
    slow = plan(model, 16, TOY, seq=32, global_batch=64, capacity=4e6,
                link=Link("dial-up", 1.0, 1.0))
    key = ["t", "p", "d", "schedule", "m", "microbatch", "recompute"]
    both = df.merge(slow, on=key, suffixes=("", "_slow")).dropna(subset=["step_time"])
    # 16 GPUs on nodes of 4: every row crosses nodes, and each is slowed
    assert len(both) > 0 and (both["t"] * both["d"] * both["p"] > TOY.gpus_per_node).all()
    assert (both["step_time_slow"] > both["step_time"]).all()
    # on one node's 4 GPUs nothing crosses: the same step times (the check above compared
    # the rows of 16 GPUs that do not cross nodes, of which there are none)
    args = dict(seq=32, global_batch=64, capacity=4e6)
    inside = plan(model, 4, TOY, **args).merge(
        plan(model, 4, TOY, **args, link=Link("dial-up", 1.0, 1.0)), on=key,
        suffixes=("", "_slow")).dropna(subset=["step_time"])
    assert len(inside) > 3
    assert (inside["step_time_slow"] == inside["step_time"]).all()


def test_rows_that_cannot_run_have_reasons_not_exceptions(toy_plan):
    _, df = toy_plan
    reasons = set(df[df["step_time"].isna()]["reason"])
    assert any(r.startswith("global_batch=64 must be a multiple of microbatch x d") or
               r.startswith("layers=8 must be at least the model chunks") or
               " for '" in r for r in reasons)
    assert any("must be at least the model chunks" in r for r in reasons)


def test_chunk_split():
    assert chunk_layers(10, 4).tolist() == [2, 3, 3, 2]  # the remainder in the middle
    with pytest.raises(ScheduleError, match=r"layers must be at least the model chunks 8"):
        chunk_layers(4, 8)
    with pytest.raises(ScheduleError, match=r"hidden must be a positive integer"):
        Transformer(layers=4, hidden=0, heads=2)
    with pytest.raises(ScheduleError, match=r"kv_heads must divide heads"):
        Transformer(layers=4, hidden=8, heads=2, kv_heads=3)


def test_plan_script(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "plan.py"), "--model",
                          "llama2-7b", "--gpus", "8", "--seq", "4096", "--global-batch", "64",
                          "--out", str(tmp_path)], capture_output=True, text=True, check=True)
    text = run.stdout
    assert "llama2-7b on 8 x H100-80GB" in text and "fastest that fit" in text
    assert "faster configurations that do not fit" in text
    df = pd.read_parquet(tmp_path / "plan.parquet")
    assert len(df) > 100 and df["fits"].any()
    assert (tmp_path / "plan.png").stat().st_size > 10_000
    bad = subprocess.run([sys.executable, "-m", "fastpp", "plan", "--model", "gpt-5"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --model must be a preset, one of")


def test_summary_says_why_nothing_ran():
    """A plan where every configuration is refused once printed "0 simulated ... nothing
    fits" alone; the summary gives the reasons with their counts."""
    model = Transformer(layers=4, hidden=64, heads=8, vocab=500, name="toy")
    df = plan(model, 4, TOY, seq=32, global_batch=8, schedules=["interleaved-1f1b"],
              m=[4], pp=4, tp=1, microbatch=1, recompute="none")
    assert df["step_time"].isna().all()
    text = summary(df)
    assert "0 simulated" in text and "nothing fits" in text
    reasons = df["reason"].value_counts()
    assert f"{reasons.iloc[0]:>7,} x {reasons.index[0]}" in text
    assert "faster configurations" not in text


def test_summary_points_past_the_default_microbatches_where_the_best_sits_at_the_largest():
    """plan's default microbatches (1, 2, 4) suit large models; a small model's best run lies
    at or past the largest, which the summary says with the axis to try. A microbatch axis
    the caller gave, or a best below its largest, draws no note."""
    model = from_hf(ROOT / "tests" / "data" / "hf" / "qwen3-0.6b.json")
    args = dict(seq=2048, global_batch=256, tp=1, pp=1, schedules=["1f1b"], recompute="none")
    df = plan(model, 8, "A100-80GB", **args)
    assert df.loc[df["fits"], "microbatch"].iloc[0] == 4
    note = ("note: the best run that fits uses the largest microbatch tried (4 of 1, 2, 4): "
            "microbatch=[1, 2, 4, 8, 16] (--microbatch 1 2 4 8 16) tries larger")
    assert note in summary(df)
    # a frame filtered by the caller still says what plan tried
    assert note in summary(df[df["microbatch"] >= 2])
    wider = plan(model, 8, "A100-80GB", microbatch=[1, 2, 4, 8, 16], **args)
    assert wider.loc[wider["fits"], "step_time"].iloc[0] < df.loc[df["fits"], "step_time"].iloc[0]
    assert "note: the best run" not in summary(wider)
    assert "note: the best run" not in summary(plan(model, 8, "A100-80GB", microbatch=[1, 2, 4],
                                                    **args))
    # the next sizes up that divide the batch, doublings or not; a best below the largest
    # tried draws no note
    odd = plan(model, 1, "A100-80GB", **(args | {"global_batch": 12}))
    assert odd.loc[odd["fits"], "microbatch"].iloc[0] == 4
    assert "microbatch=[1, 2, 4, 6, 12] (--microbatch 1 2 4 6 12) tries larger" in summary(odd)
    big = plan("llama3-70b", 64, "H100-80GB", seq=8192, global_batch=512)  # (the CLI's job)
    assert big.loc[big["fits"], "microbatch"].iloc[0] < 4
    assert "note: the best run" not in summary(big)


def test_odd_sequence_without_context_parallelism():
    """cp = 1 splits no sequence: any length runs (1023 was refused as not a multiple of
    2 cp); cp = 2 still needs a multiple of 4."""
    sched = build_schedule("1f1b", 4, 8)
    odd = transformer_costs("llama2-7b", sched, seq=1023)
    even = transformer_costs("llama2-7b", sched, seq=1024)
    assert np.all(odd.f < even.f) and np.all(odd.f > 0.99 * even.f)
    with pytest.raises(ScheduleError, match=r"multiple of 2\*cp=4 \(got seq=1022, cp=2\)"):
        transformer_costs("llama2-7b", sched, seq=1022, cp=2)


def test_a_reason_tells_the_need_from_the_capacity():
    """A configuration over its capacity says by how much in as many digits as tell the two
    apart (a toy's 4.04 MB had read "needs 0.004 GB > capacity 0.004 GB"), in bytes where a
    few digits more do not."""
    from fastpp.model.plan import _over

    assert _over(85.8e9, 0, 80e9) == "needs 85.8 GB on device 0 > capacity 80 GB"
    assert _over(80.04e9, 3, 80e9) == "needs 80.04 GB on device 3 > capacity 80 GB"
    assert _over(4.04e6, 1, 4e6) == "needs 0.00404 GB on device 1 > capacity 0.004 GB"
    assert _over(80e9 + 1, 2, 80e9) == ("needs 80,000,000,001 bytes on device 2 > capacity "
                                        "80,000,000,000 bytes")


def test_a_hand_off_is_split_over_tensor_parallel_ranks_only_where_megatron_splits_it():
    """Megatron-Core sends each tensor-parallel rank's whole (seq/cp, b, h) output to the
    next stage, 1/t of it only under sequence parallelism (schedules.get_tensor_shapes);
    Megatron-LM of 2021-2023 split it with --scatter-gather-tensors-in-pipeline
    (RunGrid.scatter_gather). Counted by hand: 2 bytes x 16 tokens x 2 sequences x 8."""
    from fastpp.model.published import model_costs

    sched = build_schedule("1f1b", 2, 4)
    whole = 2 * 16 * 2 * 8
    for sp, expected in ((False, whole), (True, whole / 2)):
        c = transformer_costs(GPT, sched, TOY, seq=16, microbatch=2, tp=2,
                              sequence_parallel=sp)
        np.testing.assert_allclose(c.arrays["message_bytes"], expected, err_msg=str(sp))
    for split, expected in ((False, whole), (True, whole / 2)):
        costs, _ = model_costs(GPT, TOY, sched, seq=16, microbatch=2, t=2,
                               scatter_gather=split)
        np.testing.assert_allclose(costs.arrays["message_bytes"], expected,
                                   err_msg=str(split))


def test_a_plan_in_parts_is_the_plan_whole(toy_plan, monkeypatch):
    """A long plan runs ``PLAN_PART`` configurations at a time (its progress bar's unit):
    in parts of 7, every row, reason and memory as in one part."""
    model, whole = toy_plan
    monkeypatch.setattr(sys.modules["fastpp.model.plan"], "PLAN_PART", 7)
    parts = plan(model, 16, TOY, seq=32, global_batch=64, capacity=4e6, progress=True)
    assert len(whole) > 7 * 10
    pd.testing.assert_frame_equal(parts, whole)
