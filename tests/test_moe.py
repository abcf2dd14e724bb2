"""Mixture of experts (fastpp.model.moe): presets against model cards, FLOPs, bytes and
all-to-all volumes by hand, plan rows against simulate(), published throughput rows."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from helpers import held_bytes, needs_data

from fastpp import ScheduleError, build_schedule, simulate
from fastpp.model import (
    HARDWARE,
    MODELS,
    Hardware,
    Link,
    RunConfig,
    Transformer,
    device_bytes,
    layer_parts,
    plan,
    transformer_costs,
)
from fastpp.model.compute import attention_times, mlp_times
from fastpp.model.moe import (
    EXPERT_OPTIONS,
    all_to_all_bytes,
    all_to_all_times,
    expert_data_parallel,
    expert_times,
    fp8_casts,
    layer_seconds,
    moe_layer_costs,
    tensor_exchange,
)
from fastpp.model.validate import DATA

# h = 8, a = 2 (d = 4), g = 2 (kv = 8), SwiGLU experts of F_e = 4 (P_e = 3 * 8 * 4 = 96)
TINY = Transformer(layers=2, hidden=8, heads=2, ffn=16, expert_ffn=4, experts=4, top_k=2,
                   shared_experts=1, dense_layers=1, vocab=10, swiglu=True, name="tiny-moe")
EIGHT = dataclasses.replace(TINY, experts=8)
# 4 GPUs a node; the network 100 B/s with 0.1 s a step, NVLink 1000 B/s with 0.01 s
TOY = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=Link("toy-node", 1000.0, 0.01),
               network=Link("toy-net", 100.0, 0.1), efficiency=0.5, gpus_per_node=4,
               memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)


@pytest.mark.parametrize("name, total, active, rel", [
    ("deepseek-v3", 671e9, 37e9, 0.02),  # the card's "37B activated": 37.55B here (1.5%)
    ("mixtral-8x7b", 46.7e9, 12.9e9, 0.01),
    ("mixtral-8x22b", 141e9, 39e9, 0.01),
    ("qwen3-235b-a22b", 235e9, 22e9, 0.01),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02),  # the card's "30.5B, 3.3B activated"
    ("llama3.1-405b", 405e9, 405e9, 0.01),
])
def test_presets_match_the_model_cards(name, total, active, rel):
    model = MODELS[name]
    print(f"{name}: {model.parameters / 1e9:.2f}B total, {model.active_parameters / 1e9:.2f}B "
          f"active (card {total / 1e9:g}B / {active / 1e9:g}B)")
    assert model.parameters == pytest.approx(total, rel=0.01)
    assert model.active_parameters == pytest.approx(active, rel=rel)


def test_deepseek_v3_parameters_by_hand():
    m = MODELS["deepseek-v3"]
    # MLA: q 7168*1536 + 1536 (norm) + 1536*128*192; kv 7168*576 + 512 (norm) + 512*128*256;
    # output 128*128*7168
    attention = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
                 + 128 * 128 * 7168)
    assert m.attention_params() == attention == 187_107_328
    expert = 3 * 7168 * 2048
    moe_layer = attention + 7168 * 256 + 257 * expert + 2 * 7168
    dense_layer = attention + 3 * 7168 * 18432 + 2 * 7168
    assert m.parameters == 3 * dense_layer + 58 * moe_layer + 2 * 129280 * 7168
    assert m.active_parameters == (3 * dense_layer + 58 * (moe_layer - 248 * expert)
                                   + 2 * 129280 * 7168)
    # the MTP module (the card's 14B less its copies of the embedding and output layer): an
    # MoE layer, eh_proj, and the checkpoint's enorm, hnorm and shared_head.norm (two norms
    # until 6 December 2026; Megatron's MTP layer has the three too)
    assert m.params() - m.parameters == moe_layer + 2 * 7168 * 7168 + 3 * 7168


def test_moe_layer_flops_and_bytes_by_hand():
    # T = s b = 16 * 2 = 32 tokens; attention P = 8*8 + 2*8*8 + 8*8 = 256
    c = moe_layer_costs(TINY, 16, 2, 1, 1, False, 0)
    attention, core = 2 * 32 * 256, 2 * 2 * 16 * 16 * (2 * (4 + 4))  # 2 b s^2 a (d + d_v)
    # each of the 32 tokens to k = 2 experts: 2 * 64 * 96 routed, router 2 * 32 * 8 * 4,
    # shared 2 * 32 * 96
    mlp = 2 * 64 * 96 + 2 * 32 * 8 * 4 + 2 * 32 * 96
    assert (attention, core, mlp) == (16384, 16384, 20480)
    assert c["forward"] == attention + mlp + core
    assert c["input_grad"] == attention + mlp + 2 * core
    assert c["weight_grad"] == attention + mlp
    # per token: norms and inputs 4h + 4h, Q K V and the output's input 2*8 + 4*8 + 2*8, the
    # shared expert's inside 6 F_e (fused SwiGLU: gate and up, the product); the router's
    # fp32 logits and probabilities 8 E; per copy (64) the expert's input and output 4h and
    # inside 6 F_e
    assert c["activations"] == 32 * (32 + 32 + 64 + 24) + 32 * 8 * 4 + 64 * (32 + 24)
    # SwiGLU as separate ops keeps the SiLU's output too: 8 F_e, 2 F_e more a token and copy
    eager = dataclasses.replace(TINY, fused_swiglu=False)
    assert moe_layer_costs(eager, 16, 2, 1, 1, False, 0)["activations"] == (
        c["activations"] + 2 * 4 * (32 + 64))
    # t = 2, etp = 2: a GPU owns 16 tokens, its expert rank receives 16 * 2 * 2 = 64 copies,
    # of whose experts it computes half: 2 * 64 / 2 * 96 routed FLOPs (= 2 N k P_e)
    half = moe_layer_costs(TINY, 16, 2, 2, 2, True, 0)
    assert half["weight_grad"] == 2 * 32 * 256 / 2 + 2 * 64 / 2 * 96 + 2 * 16 * 8 * 4 \
        + 2 * 32 * 96 / 2
    # MoE FLOPs per token: 6 times the active matrices (the router's h E among them; the
    # embedding, output layer and norms 2h out), the core (non-causal) and the logits
    big = MODELS["mixtral-8x7b"]
    matrices = big.active_parameters - 2 * 32000 * 4096 - 32 * 2 * 4096
    assert big.flops_per_token(4096) == pytest.approx(
        3 * (2 * matrices + 32 * 4 * 4096 * 4096 + 2 * 4096 * 32000))


def test_all_to_all_volumes_by_hand():
    # 32 tokens a GPU (t = 1), k = 2 copies of h = 8 elements, bf16: 1024 bytes; EP 8 over
    # two nodes of 4 (q = 4)
    sent = all_to_all_bytes(EIGHT, TOY, 16, 2, 1,
                            8, 1, 2.0)
    assert (sent["network"], sent["nvlink"]) == (1024 * (1 - 4 / 8), 1024 * 3 / 8)
    # node-limited to one node: each token once to 1 node, remote half the time; then once
    # to each GPU it uses (DeepEP's is_token_in_rank), over NVLink to 3 of 4: one expert a
    # GPU here, so its 2 copies go to 2 GPUs
    limited = all_to_all_bytes(EIGHT, TOY, 16, 2,
                               1, 8, 1, 2.0, node_limit=1)
    assert (limited["network"], limited["nvlink"]) == (32 * 8 * 2 * 1 * 0.5, 1024 * 3 / 4)
    times = all_to_all_times(EIGHT, TOY, 16, 2, 1,
                             8, 1, "bf16")
    # the network rail and NVLink at once: max(512 / 100 + 0.1, 384 / 1000 + 0.01)
    assert times["dispatch_f"] == pytest.approx(512 / 100 + 0.1)
    # DeepSeek-V3, EP64 over 8 nodes of 8, 4096 tokens a GPU, FP8 (1 + 4/128 bytes), M = 4:
    # min(8 (1 - (7/8)^8), 4) = 4 nodes a token, 7/8 of them remote
    ds = all_to_all_bytes(MODELS["deepseek-v3"], HARDWARE["H800-80GB"], 4096, 1, 1, 64, 1,
                          1 + 4 / 128, node_limit=4)
    assert ds["network"] == pytest.approx(4096 * 7168 * 1.03125 * 4 * 7 / 8)
    assert ds["network"] / 1e6 == pytest.approx(105.97, abs=0.01)
    # inside the nodes one copy a GPU the token uses, not one an expert (DeepEP's
    # intranode test: a GPU receives a row per token routed to it, the permute then expands
    # it): 8 experts drawn among the 128 of the 4 nodes' 32 GPUs, 4 each, reach 32 (1 -
    # C(124, 8) / C(128, 8)) = 7.36 GPUs (7.68 over all 64), 7/8 of them over NVLink
    missed = np.prod([(124 - i) / (128 - i) for i in range(8)])
    assert 32 * (1 - missed) == pytest.approx(7.36, abs=0.01)
    assert ds["nvlink"] == pytest.approx(4096 * 32 * (1 - missed) * 7168 * 1.03125 * 7 / 8)


def test_hybrid_ep_inside_an_nvlink_domain_by_hand():
    """The flex dispatcher inside one NVLink5 domain takes HybridEP's measured rates
    (DeepEP's Hybrid-EP_Implementation.md, GB200, 32 SMs) on the bytes a rank receives, one
    copy a token per rank it is routed to; outside the domain, or on another link, the
    per-node volumes as before."""
    from fastpp.model.moe import HYBRID_EP, distinct_ranks

    # 4 experts on 2 ranks, top-2: a token misses a rank only if both its experts are the
    # other rank's, (2/4)(1/3) = 1/6, so it lands on 2 (1 - 1/6) = 5/3 ranks
    assert distinct_ranks(TINY, 2) == pytest.approx(5 / 3)
    # Qwen3-235B on 32 GB200s, microbatch 1: 4096 tokens, 128 experts, 4 a rank, top-8
    qwen, gb200 = MODELS["qwen3-235b-a22b"], HARDWARE["GB200"]
    missed = np.prod([(124 - i) / (128 - i) for i in range(8)])
    received = 4096 * 32 * (1 - missed) * 4096 * 2  # bytes a rank receives in bf16
    times = all_to_all_times(qwen, gb200, 4096, 1, 1, 32, 1, "bf16", dispatcher="flex")
    latency = gb200.node.latency
    assert times["dispatch_f"] == pytest.approx(received / 484.22e9 + latency)
    assert times["combine_f"] == pytest.approx(received / 464.54e9 + latency)
    assert times["dispatch_b"] == pytest.approx(received / 464.54e9 + latency)
    assert times["combine_b"] == pytest.approx(received / 484.22e9 + latency)
    # 28 ranks: halfway between the 24- and 32-rank measurements; FP8 its own column
    fp8 = all_to_all_times(qwen, gb200, 4096, 1, 1, 28, 1, "fp8", dispatcher="flex")
    missed = np.prod([(128 - 128 / 28 - i) / (128 - i) for i in range(8)])
    assert fp8["dispatch_f"] == pytest.approx(
        4096 * 28 * (1 - missed) * 4096 * (1 + 4 / 128) / ((403.20e9 + 392.70e9) / 2) + latency)
    assert HYBRID_EP["NVLink5"]["ranks"] == (8.0, 16.0, 24.0, 32.0, 36.0)
    # B200's 8 GPUs a node: EP 16 leaves the node, so the network prices it as before
    b200 = HARDWARE["B200-180GB"]
    wide = all_to_all_times(qwen, b200, 4096, 1, 1, 16, 1, "bf16", dispatcher="flex")
    sent = all_to_all_bytes(qwen, b200, 4096, 1, 1, 16, 1, 2.0, dispatcher="flex")
    assert wide["dispatch_f"] == pytest.approx(max(
        sent["network"] / b200.network.bandwidth + b200.network.latency,
        sent["nvlink"] / b200.node.bandwidth + latency))
    # H100's NVLink4 has no HybridEP measurement: DeepEP's volume over the link's rate, a
    # copy to each GPU a token uses (16 experts a GPU: 8 (1 - C(112, 8) / C(128, 8))), 7/8
    # of them to another GPU
    h100 = HARDWARE["H100-80GB"]
    inside = all_to_all_times(qwen, h100, 4096, 1, 1, 8, 1, "bf16", dispatcher="flex")
    missed = np.prod([(112 - i) / (128 - i) for i in range(8)])
    assert inside["dispatch_f"] == pytest.approx(
        4096 * 8 * (1 - missed) * 4096 * 2 * 7 / 8 / h100.node.bandwidth + h100.node.latency)


def test_fp8_casts_by_hand():
    # the memory-bound toy: 4 GB/s, no overhead, an fp8 peak; TINY's GQA attention products
    # (qkv 8 + 2 x 8 <- 8, 8 <- 8), one shared expert of 4, SwiGLU (G = 2)
    slow = dataclasses.replace(TOY, memory_bandwidth=4e9, fp8_flops=2e6)
    T, received = 16 * 2, 40.0  # one microbatch of 2 sequences of 16; 40 copies received
    got = fp8_casts(TINY, slow.with_precision("fp8"), 16, 2, 1, received, 1)
    cast = 2.0 + 2.0 * (1.0 + 1.0 / 32.0)  # read bf16, write row- and column-wise FP8
    inputs = T * (8 + 8 + 8 + 4) + received * (8 + 4)  # each product's input
    outputs = T * (24 + 8 + 8 + 2 * 4) + received * (8 + 2 * 4)  # each output's gradient
    assert got["forward"] == pytest.approx(cast * inputs / 4e9)
    assert got["input_grad"] == pytest.approx(cast * outputs / 4e9)
    # none in bf16; with products free, fp8's expert times are bf16's plus the casts of
    # N k = 32 x 2 = 64 copies each GPU receives (balanced)
    assert fp8_casts(TINY, slow, 16, 2, 1, received, 1)["forward"] == 0.0
    free = dataclasses.replace(slow, peak_flops=1e30, fp8_flops=1e30)
    bf16 = expert_times(TINY, free, 16, 2, 1, 2, 1, True)
    fp8 = expert_times(TINY, free.with_precision("fp8"), 16, 2, 1, 2, 1, True)
    casts = fp8_casts(TINY, free.with_precision("fp8"), 16, 2, 1, 64.0, 1)
    assert fp8["forward"] == pytest.approx(bf16["forward"] + casts["forward"])
    assert fp8["input_grad"] == pytest.approx(bf16["input_grad"] + casts["input_grad"])
    assert fp8["weight_grad"] == pytest.approx(bf16["weight_grad"])
    # per-tensor current scaling reads each cast's bf16 input once more first, for its amax:
    # 2 bytes an element more
    current = dataclasses.replace(slow, fp8_current_scaling=True).with_precision("fp8")
    got = fp8_casts(TINY, current, 16, 2, 1, received, 1)
    assert got["forward"] == pytest.approx((cast + 2.0) * inputs / 4e9)
    assert got["input_grad"] == pytest.approx((cast + 2.0) * outputs / 4e9)


def test_fused_grouped_mlp_by_hand():
    """Transformer Engine's fused grouped MLP (``Hardware.fused_grouped_mlp``): the first
    product's epilogue applies the SwiGLU and writes the second one's input in FP8, the
    second one's data-gradient epilogue applies the SwiGLU's backward and writes the first
    one's output gradient in FP8. The activation's two passes and those two casts go as
    kernels, but the epilogues still write the casts' FP8 copies (the backward's also reads
    the saved SwiGLU input); the products, bf16 and the weight gradients are unchanged."""
    slow = dataclasses.replace(TOY, memory_bandwidth=4e9, fp8_flops=2e6)
    fp8 = slow.with_precision("fp8")
    fused = dataclasses.replace(fp8, fused_grouped_mlp=True)
    copies = 2.0 * (1.0 + 1.0 / 32.0)  # MXFP8's row-wise and column-wise copies and scales
    cast = 2.0 + copies  # with the bf16 read
    # TINY's routed experts: F_e = 4, SwiGLU (G = 2); 40 copies received
    plain, got = (fp8_casts(TINY, hw, 16, 2, 1, 40.0, 1) for hw in (fp8, fused))
    assert plain["forward"] - got["forward"] == pytest.approx(cast * 40 * 4 / 4e9)
    assert plain["input_grad"] - got["input_grad"] == pytest.approx(cast * 40 * 2 * 4 / 4e9)
    # ep = 2 on one GPU: N k = 32 x 2 = 64 copies; the activation reads the gate and up
    # products and writes the output (3 x 2 bytes x F_e a copy), its backward reads them
    # and the gradient and writes both gradients (5 x 2 bytes x F_e); the epilogues write
    # the copies of F_e forward, of 2 F_e backward, where they also read 2 F_e in bf16
    a, b = (expert_times(TINY, hw, 16, 2, 1, 2, 1, True) for hw in (fp8, fused))
    assert a["forward"] - b["forward"] == pytest.approx((3 * 2 + cast - copies) * 64 * 4
                                                        / 4e9)
    assert a["input_grad"] - b["input_grad"] == pytest.approx(
        (5 * 2 + cast * 2 - (2 + copies) * 2) * 64 * 4 / 4e9)
    assert a["weight_grad"] == b["weight_grad"]
    bf16 = expert_times(TINY, dataclasses.replace(slow, fused_grouped_mlp=True), 16, 2, 1, 2, 1,
                        True)
    assert bf16 == expert_times(TINY, slow, 16, 2, 1, 2, 1, True)
    with pytest.raises(ScheduleError, match="fused_grouped_mlp must be one of"):
        dataclasses.replace(TOY, fused_grouped_mlp="yes")


def test_fp8_padding_by_hand():
    """Megatron-Core's FP8 padding of the experts' tokens (``Hardware.fp8_padding``):
    Transformer Engine's ``Fp8Padding`` copies the received tokens before the first product
    and ``Fp8Unpadding`` copies the output after the second, each a read and a write of
    2 h bytes a copy (with one op's overhead), and the backward copies their gradients
    back; the products, the weight gradients and bf16 are unchanged."""
    slow = dataclasses.replace(TOY, memory_bandwidth=4e9, fp8_flops=2e6)
    fp8 = slow.with_precision("fp8")
    padded = dataclasses.replace(fp8, fp8_padding=True)
    # ep = 2 on one GPU: N k = 32 x 2 = 64 copies of h = 8
    a, b = (expert_times(TINY, hw, 16, 2, 1, 2, 1, True) for hw in (fp8, padded))
    copy = 2 * 2 * 64 * 8 / 4e9 + TOY.op_overhead
    assert b["forward"] - a["forward"] == pytest.approx(2 * copy)
    assert b["input_grad"] - a["input_grad"] == pytest.approx(2 * copy)
    assert a["weight_grad"] == b["weight_grad"]
    bf16 = expert_times(TINY, dataclasses.replace(slow, fp8_padding=True), 16, 2, 1, 2, 1, True)
    assert bf16 == expert_times(TINY, slow, 16, 2, 1, 2, 1, True)
    with pytest.raises(ScheduleError, match="fp8_padding must be one of"):
        dataclasses.replace(TOY, fp8_padding="yes")


def test_all_to_all_dispatcher_sorts_by_local_expert_by_hand():
    """Megatron-Core's all-to-all dispatcher sorts what it received by local expert after the
    dispatch and back before the combine (``sort_chunks_by_idxs``), one more read and write
    of 2 h bytes a copy each way beyond the flex dispatchers' one permutation; none where a
    GPU holds one expert."""
    slow = dataclasses.replace(TOY, memory_bandwidth=4e9)
    # ep = 2 on one GPU (2 local experts): N k = 32 x 2 = 64 copies of h = 8
    a, b, flex = (expert_times(TINY, slow, 16, 2, 1, 2, 1, True, dispatcher=d)
                  for d in (None, "alltoall", "flex"))
    copy = 2 * 2 * 64 * 8 / 4e9 + TOY.op_overhead
    assert b["forward"] - a["forward"] == pytest.approx(2 * copy)
    assert b["input_grad"] - a["input_grad"] == pytest.approx(2 * copy)
    assert a["weight_grad"] == b["weight_grad"] and flex == a
    # ep = 4: one expert a GPU, nothing to sort
    one = [expert_times(TINY, slow, 16, 2, 1, 4, 1, True, dispatcher=d)
           for d in (None, "alltoall")]
    assert one[0] == one[1]
    # layer_parts passes its dispatcher on
    parts = [layer_parts(TINY, slow, seq=16, microbatch=2, ep=2, dispatcher=d)
             for d in ("alltoall", "flex")]
    assert parts[0].mlp_f - parts[1].mlp_f == pytest.approx(2 * copy)
    with pytest.raises(ScheduleError, match="dispatcher must be one of"):
        expert_times(TINY, slow, 16, 2, 1, 2, 1, True, dispatcher="nccl")


def test_layer_parts_are_the_pipeline_costs_without_overlap():
    """One MoE layer more on a stage adds the parts' sum to its f and b (the all-to-alls
    inside F and B), and a dense layer's parts have no all-to-all."""
    model, hw = MODELS["deepseek-v3"], HARDWARE["H800-80GB"]
    sched = build_schedule("gpipe", 2, 4)
    args = dict(seq=4096, tp=1, dp=64, ep=64, precision="fp8", node_limit=4)
    one, two = (transformer_costs(model, sched, hw, layers=x, **args)
                for x in ([4, 57], [5, 56]))
    parts = layer_parts(model, hw, seq=4096, ep=64, precision="fp8", node_limit=4)
    whole = layer_seconds(parts)
    assert two.f[0] - one.f[0] == pytest.approx(whole["forward"], rel=1e-9)
    assert two.w[0] - one.w[0] == pytest.approx(whole["weight_grad"], rel=1e-9)
    assert two.b[0] - one.b[0] == pytest.approx(whole["input_grad"] + whole["weight_grad"],
                                                rel=1e-9)
    assert min(parts) > 0
    dense = layer_parts(model, hw, seq=4096, ep=64, precision="fp8", moe=False)
    assert dense.dispatch_f == dense.combine_b == 0 and dense.mlp_f < parts.mlp_f
    # Megatron-Core dispatches the bf16 tokens whatever the products' precision; quantized
    # before the dispatch (DeepSeek-V3's recipe), FP8 halves its bytes (plus scales), not
    # the combine's
    bf16 = layer_parts(model, hw, seq=4096, ep=64, node_limit=4)
    assert bf16.dispatch_f == pytest.approx(parts.dispatch_f)
    wire = layer_parts(model, hw, seq=4096, ep=64, precision="fp8", node_limit=4,
                       dispatch="fp8")
    assert wire.combine_f == pytest.approx(parts.combine_f)
    assert parts.dispatch_f > 1.8 * wire.dispatch_f


def test_routed_experts_make_no_tensor_parallel_exchange():
    """Megatron's MoE layer runs its routed experts on the sequence-parallel shard it is
    given: at ``t = 2`` only the attention's all-gather and reduce-scatter cross the ``t``
    ranks (and a shared expert's pair, a tensor-parallel MLP), where a dense layer makes
    two pairs; a full recomputation repeats them in the backward."""
    routed = dataclasses.replace(TINY, shared_experts=0)
    for model, pairs in ((routed, 1.0), (TINY, 2.0)):
        costs = moe_layer_costs(model, 64, 1, 2, 1, True, 0)
        assert float(costs["collectives_forward"]) == pairs
        assert float(costs["collectives_backward"]) == pairs
        assert float(moe_layer_costs(model, 64, 1, 2, 1, True, 2)["collectives_backward"]) \
            == 2 * pairs
        assert float(moe_layer_costs(model, 64, 1, 1, 1, True, 0)["collectives_forward"]) == 0
    hw = HARDWARE["H100-80GB"]
    model = MODELS["qwen3-235b-a22b"]
    assert model.shared_experts == 0
    args = dict(seq=4096, ep=8, gpus=64)
    one, two = layer_parts(model, hw, t=1, **args), layer_parts(model, hw, t=2, **args)
    mlp = {t: expert_times(model, hw, 4096, 1, t, 8, 1, True, 1.0, "alltoall")
           for t in (1, 2)}
    # the MLP half is the experts' time alone at t = 2 too; the attention half has the pair
    assert two.mlp_f == pytest.approx(float(mlp[2]["forward"]), rel=1e-12)
    assert two.mlp_i == pytest.approx(float(mlp[2]["input_grad"]), rel=1e-12)
    assert one.mlp_f == pytest.approx(float(mlp[1]["forward"]), rel=1e-12)
    # a dense layer's MLP half pays the same pair as its attention half
    pair = two.attention_f - float(attention_times(model, hw, 4096, 1, 2, True)["forward"])
    dense = layer_parts(model, hw, t=2, moe=False, **args)
    assert pair > 0 and dense.attention_f == pytest.approx(two.attention_f, rel=1e-12)
    assert dense.mlp_f - float(mlp_times(model, hw, 4096, 1, 2, True)["forward"]) \
        == pytest.approx(pair, rel=1e-9)


def test_layer_parts_know_a_job_in_one_node():
    """``t = 6`` on 8-GPU nodes: in a job of 48 GPUs some groups straddle two nodes and pay
    the network, in a job of 6 the group is one node's (``tensor_parallel_per_node``), as
    ``plan`` prices it; ``layer_parts`` given the job's GPUs says the same."""
    model, hw = MODELS["qwen3-235b-a22b"], HARDWARE["H100-80GB"]
    alone = attention_times(model, hw, 4096, 1, 6, True)["forward"]
    pair = {gpus: layer_parts(model, hw, seq=4096, t=6, ep=8, gpus=gpus, moe=False
                              ).attention_f - float(alone) for gpus in (6, 48)}
    assert pair[6] == pytest.approx(float(tensor_exchange(hw, 4096, 1, 6, model.hidden, True,
                                                          gpus=6)), rel=1e-12)
    assert pair[48] > 2 * pair[6]


def test_experts_at_t_above_one_need_sequence_parallelism():
    """Megatron's MoELayer refuses to train with tensor parallelism and no sequence
    parallelism (moe_layer.py, since 28c8dd71f0 of 30 May 2024): such a run was priced as if
    it could run. ``transformer_costs`` refuses it naming ``sequence_parallel``, ``plan``
    gives its rows that reason, and ``t = 1`` stays priced."""
    schedule = build_schedule("1f1b", 2, 4)
    message = r"sequence_parallel must be True for a model with experts at t > 1.*\(got " \
              r"sequence_parallel=False, t=2\)"
    with pytest.raises(ScheduleError, match=message):
        transformer_costs("mixtral-8x7b", schedule, seq=4096, tp=2, dp=4, ep=8,
                          sequence_parallel=False)
    with pytest.raises(ScheduleError, match=message):
        transformer_costs("mixtral-8x7b", schedule, config=RunConfig(
            seq=4096, global_batch=16, t=2, d=4, p=2, ep=8, sequence_parallel=False))
    transformer_costs("mixtral-8x7b", schedule, seq=4096, tp=1, dp=8, ep=8,
                      sequence_parallel=False)
    rows = plan("mixtral-8x7b", 32, seq=4096, global_batch=32, tp=[1, 2], pp=[2], ep=[8],
                schedules=["1f1b"], sequence_parallel=False)
    assert rows[rows["t"] == 2]["reason"].str.match(message).all()
    assert (rows[rows["t"] == 1]["reason"] == "").any()
    # one layer's parts likewise (a dense layer of the same shape is priced)
    h100 = HARDWARE["H100-80GB"]
    with pytest.raises(ScheduleError, match=r"sequence_parallel must be True for a model "
                                            r"with experts at t > 1.*t=2\)"):
        layer_parts(MODELS["mixtral-8x7b"], h100, seq=4096, t=2, ep=8,
                    sequence_parallel=False)
    layer_parts(MODELS["mixtral-8x7b"], h100, seq=4096, t=2, ep=8, sequence_parallel=False,
                moe=False)


def test_expert_parameters_fold_over_edp():
    model = MODELS["mixtral-8x7b"]
    sched = build_schedule("1f1b", 4, 8)
    assert expert_data_parallel(model, 2, 8, 8, 1) == 2  # 16 GPUs a stage, 8 EP ranks
    base, wide = (device_bytes(model, sched, tp=2, dp=8, ep=e, zero=1) for e in (1, 8))
    # a device's 8 layers of 8 experts of 3 * 4096 * 14336; etp = 1: each expert whole on a
    # GPU (the folding gives experts their own tensor parallelism), ep = 8 keeps 1/8 of them
    experts = 8 * 8 * 3 * 4096 * 14336
    for k, size in (("parameter_bytes", 2), ("gradient_bytes", 4)):
        assert base[k][1] - wide[k][1] == pytest.approx(size * experts * (1 - 1 / 8))
    # their optimizer states shard over edp = t d / ep: 16 of them whole, or 2 of 1/8 each
    assert base["optimizer_bytes"][1] == pytest.approx(wide["optimizer_bytes"][1])
    assert 12 * experts / 16 == 12 * experts / 8 / 2


@pytest.mark.parametrize("call, message", [
    (lambda: Transformer(4, 8, 2, experts=4, top_k=5), r"top_k must be from 1 to the experts 4"),
    (lambda: Transformer(4, 8, 2, experts=0, top_k=2), r"top_k, shared_experts and "),
    (lambda: transformer_costs("mixtral-8x7b", build_schedule("1f1b", 2, 4), seq=128, ep=3),
     r"ep must divide the experts 8 \(got ep=3\)"),
    (lambda: transformer_costs("mixtral-8x7b", build_schedule("1f1b", 2, 4), seq=128, tp=2,
                               ep=4), r"etp x ep = 4 must divide the GPUs of a stage"),
    (lambda: transformer_costs("llama3-8b", build_schedule("1f1b", 2, 4), seq=128, ep=2),
     r"ep and etp must be 1 for a dense model"),
    (lambda: transformer_costs("mixtral-8x7b", build_schedule("1f1b", 2, 4), "A100-80GB",
                               seq=128, precision="fp8"), r"precision='fp8' needs fp8_flops"),
    # (at most experts / top_k: a token's experts are distinct; TINY has 4 and top_k 2)
    (lambda: layer_parts(TINY, TOY, seq=16, imbalance=0.5),
     r"imbalance must be a number in \[1, 2\] \(experts / top_k\)"),
    # transformer_costs took any imbalance: 100 priced silently, 1e300 overflowed the costs
    (lambda: transformer_costs("mixtral-8x7b", build_schedule("1f1b", 2, 4), seq=128, ep=8,
                               dp=8, imbalance=100.0),
     r"imbalance must be a number in \[1, 4\] \(experts / top_k\).* \(got 100.0\)"),
    (lambda: layer_parts(TINY, TOY, seq=16, dispatch="fp4"), r"dispatch must be one of"),
    # the busiest rank holds at most every token: 1e308 once overflowed into "deadlocked"
    (lambda: plan(TINY, 4, TOY, seq=16, global_batch=8, imbalance=1e308),
     r"imbalance must be a number in \[1, 2\] \(experts / top_k\).* \(got 1e\+308\)"),
    (lambda: plan(TINY, 4, TOY, seq=16, global_batch=8, imbalance=2.5),
     r"imbalance must be a number in \[1, 2\]"),
    # the busiest of ep ranks receives at most min(ep, E / top_k) times the mean: at ep = 1
    # the one rank receives the mean (imbalance 8 tripled a step, unsaid)
    (lambda: transformer_costs("mixtral-8x7b", build_schedule("1f1b", 2, 4), seq=128, dp=8,
                               ep=1, imbalance=2.0),
     r"imbalance must be at most min\(ep, experts / top_k\) = 1 at ep=1"),
    (lambda: transformer_costs("mixtral-8x7b", build_schedule("1f1b", 2, 4), seq=128, dp=8,
                               ep=2, imbalance=3.0),
     r"imbalance must be at most min\(ep, experts / top_k\) = 2 at ep=2"),
])
def test_bad_moe_input_is_a_schedule_error(call, message):
    with pytest.raises(ScheduleError, match=message):
        call()


@pytest.mark.parametrize("name, value", [("dispatcher", "flex"), ("imbalance", 2.0),
                                         ("node_limit", 2), ("fp8_cache", True)])
def test_expert_options_on_a_dense_model_are_refused(name, value):
    """Options that act on experts alone, given a dense model away from their defaults: until
    6 December 2026 plan and transformer_costs priced the dense run as if not given. (FP8
    caching is the recipe's, refused with the recipe's other items.)"""
    defaults = {**EXPERT_OPTIONS, "fp8_cache": False}
    message = (rf"{name} must be {defaults[name]!r}: it acts on experts, and "
               rf"llama2-7b has none \(got {name}={value!r}\)")
    with pytest.raises(ScheduleError, match=message):
        plan("llama2-7b", 16, seq=4096, global_batch=64, tp=[2], pp=[2], workers=1,
             **{name: value})
    with pytest.raises(ScheduleError, match=message):
        transformer_costs("llama2-7b", build_schedule("1f1b", 2, 4), seq=128, tp=2,
                          **{name: value})
    # the defaults, given, are no option set
    plan("llama2-7b", 16, seq=4096, global_batch=64, tp=[2], pp=[2], workers=1,
         schedules=["1f1b"], **{name: defaults[name]})


@pytest.mark.parametrize("name", ["dispatcher", "imbalance", "node_limit"])
def test_an_array_expert_option_on_a_dense_model_is_named(name):
    """plan compared it with the default first: NumPy's ambiguous truth, not a ScheduleError."""
    with pytest.raises(ScheduleError, match=rf"{name} must be .*\(got {name}=array"):
        plan("llama2-7b", 16, seq=4096, global_batch=64, tp=[2], pp=[2], workers=1,
             **{name: np.array([1, 2])})


@pytest.fixture(scope="module")
def moe_plan():
    model = Transformer(layers=6, hidden=32, heads=4, ffn=64, expert_ffn=16, experts=8,
                        top_k=2, shared_experts=1, dense_layers=1, mtp_depth=1, vocab=100,
                        swiglu=True, name="toy-moe")
    return model, plan(model, 16, TOY, seq=32, global_batch=64, capacity=1e6,
                       ep=[1, 2, 3, 4, 8], schedules=["1f1b", "interleaved-1f1b", "dualpipev"],
                       recompute=["none", "full"], workers=2)


def test_moe_plan_rows_equal_simulate(moe_plan):
    model, df = moe_plan
    ran = df[df["step_time"].notna()]
    assert set(ran["ep"]) == {1, 2, 4, 8}
    # ep = 3 divides no expert count of 8; ep = 8 cannot fold onto t d = 4 GPUs
    assert (df[df["ep"] == 3]["reason"].str.startswith("ep must divide the experts 8")).all()
    bad = df[(df["ep"] == 8) & (df["t"] * df["d"] == 4)]
    assert len(bad) and bad["reason"].str.startswith("etp x ep = 8 must divide").all()
    for r in ran.sample(30, random_state=0).itertuples():
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(model, sched, TOY, seq=32, microbatch=r.microbatch, tp=r.t,
                                  dp=r.d, recompute=r.recompute, ep=r.ep)
        res = simulate(sched, costs)
        by = device_bytes(model, sched, tp=r.t, dp=r.d, zero=r.zero, ep=r.ep)
        # and the largest working set the device holds (a recomputed layer's, the loss's)
        total = sum(by.values()) + held_bytes(costs, sched, res)
        assert (r.makespan, r.bubble_ratio) == (res.makespan, res.bubble_ratio), r
        assert r.peak_memory == pytest.approx(total.max(), rel=1e-12), r
        assert r.tflops_per_gpu == pytest.approx(
            r.tokens_per_s * model.megatron_flops_per_token(32) / 16 / 1e12)


def _published(model_name, note):
    rows = pd.read_csv(DATA / "moe_published.csv")
    return rows[(rows["model"] == model_name) & rows["note"].str.contains(note)].iloc[0]


def _predict(row, model, **extra):
    """The row's configuration in plan (interleaved 1F1B with its vp chunks, ZeRO-1, no
    recomputation, H100's curve fitted on the dense Megatron-Core rows alone)."""
    df = plan(model, int(row.gpus), row.hardware, seq=int(row.seq),
              global_batch=int(row.global_batch), tp=int(row.t), pp=int(row.p),
              ep=int(row.ep), m=int(row.vp), microbatch=int(row.microbatch),
              recompute="none", zero=1, schedules=["interleaved-1f1b"],
              precision=row.precision, workers=2, **extra)
    return df.iloc[0]


@needs_data("moe_published.csv")
def test_deepseek_v3_published_throughput():
    """Megatron-Core's DeepSeek-V3 on 1024 H100, FP8: 338 TFLOP/s a GPU. Node-limited routing
    to 4 nodes is the model's own router (8 groups, the top 4 used; EP64 puts one group on
    each of its 8 nodes)."""
    row = _published("DeepSeek-V3", "dropless")
    got = _predict(row, "deepseek-v3", layout="Et|(tt|)*30mL", node_limit=4)
    error = got.tflops_per_gpu / row.tflops_per_gpu - 1
    print(f"DeepSeek-V3 1024 H100 fp8: measured {row.tflops_per_gpu} TFLOP/s/GPU, predicted "
          f"{got.tflops_per_gpu:.0f} ({error:+.1%}); tokens/s/GPU measured "
          f"{row.tokens_per_s_per_gpu}, predicted {got.tokens_per_s / row.gpus:.0f}")
    assert abs(error) < 0.15


def test_qwen3_published_throughput_without_overlap():
    """Megatron-Core's Qwen3-235B-A22B on 256 H100 without the EP overlap: 245 TFLOP/s a GPU.
    The row does not name its dispatcher; the ModelZoo's Qwen3 H100 recipes run DeepEP, the
    flex dispatcher (each token once to each node it uses). Nothing fitted on this row. With
    Megatron's all-to-all dispatcher instead the model gives 171 (-30%)."""
    row = _published("Qwen3-235B-A22B", "without")
    got = _predict(row, "qwen3-235b-a22b", dispatcher="flex")
    error = got.tflops_per_gpu / row.tflops_per_gpu - 1
    print(f"Qwen3-235B-A22B 256 H100 bf16: measured {row.tflops_per_gpu} TFLOP/s/GPU, "
          f"predicted {got.tflops_per_gpu:.0f} ({error:+.1%})")
    assert abs(error) < 0.10


def test_dense_models_keep_their_numbers():
    """A dense model's plan rows carry ep = etp = 1 and the hardware's precision."""
    df = plan("llama3-8b", 8, seq=2048, global_batch=16, tp=2, pp=2, microbatch=1,
              recompute="none", schedules=["1f1b"])
    assert (df["ep"] == 1).all() and (df["etp"] == 1).all() and (df["precision"] == "bf16").all()
    with pytest.raises(ScheduleError, match="ep must hold positive integers"):
        plan("llama3-8b", 8, seq=2048, global_batch=16, ep=[0])
    assert np.isfinite(df["tflops_per_gpu"]).all()


def test_a_dense_layer_is_its_two_halves():
    """layer_times adds a dense layer's halves in one fixed order; the halves that
    layer_parts reads sum to it, with eager kernels too."""
    from fastpp.model.compute import attention_times, layer_times, mlp_times

    for name, eager in (("gpt3-175b", ""), ("llama3-70b", ""), ("llama3-70b", "fp32-norm"),
                        ("llama3-70b", "native-norm")):
        model, hw = dataclasses.replace(MODELS[name], eager=eager), HARDWARE["H100-80GB"]
        for sp in (False, True):
            whole = layer_times(model, hw, 2048, 2, 4, sp, 0)
            halves = [f(model, hw, 2048, 2, 4, sp) for f in (attention_times, mlp_times)]
            for k in ("forward", "input_grad", "weight_grad"):
                assert whole[k] == pytest.approx(halves[0][k] + halves[1][k], rel=1e-12)


def test_dense_layers_by_index():
    """``dense_layers`` as indices (Megatron's ``--moe-layer-freq``, Qwen's
    ``decoder_sparse_step``): sorted, the first ones read as their count, and each pipeline
    chunk holding the experts of its own layers."""
    shape = dict(layers=4, hidden=64, heads=4, ffn=128, experts=4, top_k=1, vocab=100)
    assert Transformer(**shape, dense_layers=(3, 1)).dense_layers == (1, 3)
    assert Transformer(**shape, dense_layers=[1, 0]) == Transformer(**shape, dense_layers=2)
    model = Transformer(**shape, dense_layers=(1, 3))
    assert model.moe_layers == 2 and model.dense_count == 2
    assert model.dense_between([0, 1, 2], [1, 3, 4]).tolist() == [0.0, 1.0, 1.0]
    for bad in ((4,), (1, 1), (-1,), (True,), (1.0,)):
        with pytest.raises(ScheduleError, match=r"dense_layers must be a count or distinct "
                                                r"layer indices in 0..3"):
            Transformer(**shape, dense_layers=bad)
    with pytest.raises(ScheduleError, match=r"dense_layers must leave the last layer its "
                                            r"experts with mtp_depth > 0"):
        Transformer(**shape, dense_layers=(3,), mtp_depth=1)


def test_an_expert_group_astride_two_nvlink_domains_pays_the_network():
    """Expert ranks run expert-tensor-parallel fastest, then expert-parallel: on GB200's
    72-GPU domains filled in rank order, ep 64 of a 256-GPU job puts ranks 64-71 in one
    domain and 72-127 in the next, so the worst group has 8 members a domain
    (``expert_ranks_per_node``, checked against the groups enumerated). Until 7 December
    2026 the all-to-all took ``min(ep, 72 / etp)``: the whole group on NVLink, 0.65 ms a
    DeepSeek-V3 dispatch of 4K tokens where the network's share takes 9.1 ms. A job that
    fits one domain, or the preset's unknown job, keeps its group whole."""
    from fastpp.model.moe import all_to_all_times, expert_ranks_per_node

    def enumerated(g, etp, ep, gpus):  # the fewest of a group's ranks in one domain
        groups = [range(start + r, start + etp * ep, etp)
                  for start in range(0, gpus, etp * ep) for r in range(etp)]
        return min(min(np.unique(np.asarray(x) // g, return_counts=True)[1]) for x in groups)

    gb200 = HARDWARE["GB200"]
    for etp in (1, 2, 4):
        for ep in (2, 4, 8, 16, 32, 64):
            gpus = 2 * 72 * etp * ep  # enough groups for every boundary
            assert int(expert_ranks_per_node(gb200, ep, etp, gpus)) == enumerated(
                72, etp, ep, gpus), (etp, ep)
    model = MODELS["deepseek-v3"]
    whole, astride = (all_to_all_times(model, gb200, 4096, 1, 1, 64, 1, gpus=g)["dispatch_f"]
                      for g in (64, 256))
    assert float(astride) > 10 * float(whole)
    assert float(whole) == float(all_to_all_times(model, gb200, 4096, 1, 1, 64, 1)["dispatch_f"])
    # DeepEP sends a token once to each node it reaches: the worst rank (8 of its group in its
    # domain, 56 in the next) about one copy over the network, not one for each of 8 "nodes"
    # of 8 (4.6 copies, 270 MB, until the group's two domains were counted as two)
    from fastpp.model.moe import all_to_all_bytes

    sent = all_to_all_bytes(model, gb200, 4096, 1, 1, 64, 1, 2.0, dispatcher="flex", gpus=256)
    one_copy = 4096 * model.hidden * 2.0
    assert 0.95 * one_copy < float(sent["network"]) <= one_copy


def test_the_overlap_saves_the_all_to_alls_the_stage_pays():
    """The overlapped pair's saving (``overlap.saving`` of ``layer_parts``) is priced on the
    all-to-alls its stage's forward and backward pay: ep 64 on a 256-GPU GB200 job has 8
    members a 72-GPU domain in its worst group (``expert_ranks_per_node``), as on 8-GPU
    nodes, and every other term of this layout is the same on both, so the pairs must be.
    Until 7 December 2026 the saving took the group whole in its domain (layer_parts had no
    ``gpus``): 0.46 ms a layer where the stage paid 10.2, a middle stage's pair 832.1 ms on
    GB200 against 590.4 ms on 8-GPU nodes."""
    gb200 = HARDWARE["GB200"]
    config = RunConfig(seq=4096, global_batch=1024, t=1, p=4, d=64, ep=64, schedule="dualpipev",
                       m=2, overlap=True)
    domains, nodes = (transformer_costs("deepseek-v3", hardware=hw, config=config)
                      for hw in (gb200, dataclasses.replace(gb200, gpus_per_node=8)))
    np.testing.assert_allclose(domains.f, nodes.f)
    np.testing.assert_allclose(domains.b, nodes.b)
    np.testing.assert_allclose(domains.fb, nodes.fb)
