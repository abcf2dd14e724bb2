"""Bytes per device have one rule (``stages.device_parameters`` and ``device_memory``): a plan
row's weight, gradient and optimizer bytes are ``device_bytes``' on the row's fullest device."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from helpers import held_bytes

from fastpp import build_schedule, simulate
from fastpp.model import Hardware, Link, Transformer, device_bytes, plan, transformer_costs

TOY = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=Link("toy-node", 1000.0, 0.01),
               network=Link("toy-net", 100.0, 0.1), efficiency=0.5, gpus_per_node=4,
               memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)
DENSE = Transformer(layers=8, hidden=32, heads=4, ffn=64, vocab=400, swiglu=True, name="dense")
MOE = Transformer(layers=8, hidden=32, heads=4, ffn=64, expert_ffn=16, experts=4, top_k=2,
                  shared_experts=1, dense_layers=1, vocab=400, swiglu=True, name="moe")
BYTES = ("parameter_bytes", "gradient_bytes", "optimizer_bytes")


@pytest.mark.parametrize("model", [DENSE, dataclasses.replace(DENSE, tied_embeddings=True),
                                   dataclasses.replace(MOE, tied_embeddings=True)],
                         ids=["untied", "tied", "tied-moe"])
def test_plan_bytes_equal_device_bytes(model):
    df = plan(model, 8, TOY, seq=32, global_batch=32, capacity=1e9, zero=[0, 1, 2, 3],
              ep=[1, 2] if model.moe else None,
              schedules=["1f1b", "interleaved-1f1b", "zbv", "dualpipe"], microbatch=[1],
              recompute=["none"], workers=1)
    ran = df[df["step_time"].notna()]
    picks = [ran[ran["p"] == 1], ran[ran["schedule"] == "zbv"].sample(6, random_state=0),
             ran[ran["schedule"] == "dualpipe"].sample(4, random_state=1),
             ran[ran["p"] > 1].sample(12, random_state=2)]
    rows = pd.concat(picks).drop_duplicates()
    # the cases the rule tells apart are all there
    assert set(rows["zero"]) == {0, 1, 2, 3} and (rows["p"] == 1).any()
    assert (rows["schedule"] == "interleaved-1f1b").any() and (rows["schedule"] == "zbv").any()
    if model.moe:
        assert (rows["ep"] > 1).any()
    for r in rows.itertuples():
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(model, sched, TOY, seq=32, microbatch=1, tp=r.t, dp=r.d,
                                  ep=r.ep)
        by = device_bytes(model, sched, tp=r.t, dp=r.d, zero=r.zero, ep=r.ep)
        worst = int(np.argmax(sum(by.values()) + held_bytes(costs, sched,
                                                             simulate(sched, costs))))
        for k in BYTES:
            assert getattr(r, k) == pytest.approx(by[k][worst], rel=1e-12), (k, r)



def test_mla_down_projections_are_whole_on_every_tensor_rank():
    """Megatron duplicates MLA's down-projections (and their latent norms) on every
    tensor-parallel rank; they had been split over t with the rest of the layer, 45 MB of
    weights short on DeepSeek-V3's first device at t = 2 (a reviewer's hand count). By hand
    from DeepSeek-V3's config.json: h 7168, q_lora_rank 1536, kv_lora_rank 512, rope 64; its
    first device holds 3 of the first 3 dense layers (no router)."""
    sched = build_schedule("1f1b", p=16, n=32)
    one, two = (device_bytes("deepseek-v3", sched, tp=t, dp=32 // t, ep=32) for t in (1, 2))
    whole = 7168 * 1536 + 7168 * (512 + 64) + 1536 + 512  # per layer, on every rank
    assert two["parameter_bytes"][0] - one["parameter_bytes"][0] / 2 == pytest.approx(
        3 * whole * 2 / 2)  # bf16 weights: the half that splitting had left out


def test_device_bytes_of_a_run_take_its_recipe():
    """``device_bytes(config=RunConfig(recipe="deepseek-v3"))`` left the recipe out: 12
    optimizer bytes a parameter where its bf16 moments take 8, as its keyword form and plan
    count them (a review of the MoE memory)."""
    from fastpp import build_schedule
    from fastpp.model import RunConfig, Transformer, device_bytes

    model = Transformer(4, 256, 4, vocab=1024)
    run = RunConfig(seq=512, global_batch=8, p=2, d=4, zero=1, recipe="deepseek-v3")
    by_run = device_bytes(model, config=run)
    by_keywords = device_bytes(model, build_schedule("1f1b", 2, run.n), dp=4, zero=1,
                               recipe="deepseek-v3")
    for key in ("parameter_bytes", "gradient_bytes", "optimizer_bytes"):
        np.testing.assert_allclose(by_run[key], by_keywords[key])
    plain = device_bytes(model, config=run.replace(recipe=None))
    np.testing.assert_allclose(by_run["optimizer_bytes"] * 12, plain["optimizer_bytes"] * 8)


def test_a_megatron_mtp_stage_holds_an_embedding_of_its_own():
    """Megatron's GPTModel builds an embedding on the MTP's stage (``pre_process or
    mtp_process``), tied to the first stage's: a weight of its own, with its gradient and
    optimizer state, unpriced until a review; where the two stages share a device (a V
    placement, DeepSeek's DualPipe) it is the one weight."""
    from fastpp import build_schedule
    from fastpp.model import Transformer, device_bytes

    base = dict(layers=4, hidden=256, heads=4, vocab=1024, experts=4, top_k=2,
                expert_ffn=128, swiglu=True)
    with_mtp, without = Transformer(**base, mtp_depth=1), Transformer(**base)
    head = 1024 * 256 / 2  # its share at t = 2, 2 bytes a bf16 weight
    loop = build_schedule("1f1b", 2, 4)
    apart = device_bytes(with_mtp, loop, tp=2, dp=1, ep=1)["parameter_bytes"]
    # the MTP module's own parameters, from the model's count, beside the embedding's copy
    routed, whole = 4 * with_mtp.expert_params(), with_mtp.replicated_params(True)
    mtp_own = (with_mtp.mtp_params() - routed - whole) / 2 + whole + routed
    plain = device_bytes(without, loop, tp=2, dp=1, ep=1)["parameter_bytes"]
    np.testing.assert_allclose(apart[0], plain[0])
    np.testing.assert_allclose(apart[1] - plain[1], 2 * (mtp_own + head), rtol=1e-12)
    # a V placement: the last stage (MTP) on device 0 beside the embedding: no second copy
    v = build_schedule("zbv", 2, 4)
    shared = device_bytes(with_mtp, v, tp=2, dp=1, ep=1)["parameter_bytes"]
    plain_v = device_bytes(without, v, tp=2, dp=1, ep=1)["parameter_bytes"]
    np.testing.assert_allclose(shared[0] - plain_v[0], 2 * mtp_own, rtol=1e-12)
