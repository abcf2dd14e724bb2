"""fastpp.model's per-op compute, collectives and step terms against hand calculations, and
the bad hardware they refuse."""

import dataclasses

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import HARDWARE, MODELS, Hardware, Link, Transformer, layer_costs
from fastpp.model.comm import (
    all_gather,
    all_reduce,
    data_parallel_per_node,
    reduce_scatter,
    tensor_parallel_per_node,
)
from fastpp.model.compute import (
    OPTIMIZER_STEP_BYTES,
    head_times,
    layer_times,
    matmul_efficiency,
    matmul_time,
    mlp_times,
    optimizer_time,
)
from fastpp.model.stages import BUCKET_PARAMS, step_terms

NODE, NET = Link("node", 100e9, 1e-6), Link("net", 10e9, 5e-6)
HW = Hardware("hand", peak_flops=1e12, memory_bytes=80e9, node=NODE, network=NET,
              efficiency=0.5, matmul_half=64.0, memory_bandwidth=1e10, op_overhead=1e-6)


def test_a_product_on_the_compute_side_of_the_roofline():
    # 4096^3: 2 x 4096^3 FLOPs at 0.5 x (4096/4160)^3 of 1 TFLOP/s; its 3 x 4096^2 half
    # elements would take 10 ms at 10 GB/s, far less
    eff = 0.5 * (4096 / 4160) ** 3
    assert matmul_efficiency(HW, 4096, 4096, 4096) == pytest.approx(eff, rel=1e-12)
    flops = 2 * 4096**3
    assert flops / (1e12 * eff) > 2 * 3 * 4096**2 / 1e10
    assert matmul_time(HW, 4096, 4096, 4096) == pytest.approx(flops / (1e12 * eff) + 1e-6,
                                                              rel=1e-12)
    # a thin product (a TP slice of 64 columns) runs at a fraction of that efficiency
    assert matmul_efficiency(HW, 4096, 64, 4096) == pytest.approx(0.5 * (4096 / 4160) ** 2
                                                                  * 0.5, rel=1e-12)


def test_a_product_on_the_memory_side_of_the_roofline():
    # an outer-product-like 8192 x 4 x 8192 at a shape-blind 50%: 5.4e8 FLOPs take 1.07 ms,
    # its 2 (8192 x 4 + 4 x 8192 + 8192^2) bytes 13.4 ms at 10 GB/s: memory-bound
    hw = dataclasses.replace(HW, matmul_half=1e-9)
    moved = 2 * (8192 * 4 + 4 * 8192 + 8192 * 8192)
    assert 2 * 8192 * 4 * 8192 / 0.5e12 < moved / 1e10
    assert matmul_time(hw, 8192, 8192, 4) == pytest.approx(moved / 1e10 + 1e-6, rel=1e-9)


def test_layer_times_are_the_hand_checked_flops_at_a_shape_blind_peak():
    """With free memory traffic and launches and a vanishing half-size, every op takes its
    FLOPs at 50% of the peak: the per-op sums equal layer_costs' hand-checked FLOPs."""
    hw = dataclasses.replace(HW, matmul_half=1e-9, memory_bandwidth=1e30, op_overhead=0.0)
    gpt = Transformer(layers=4, hidden=8, heads=2, vocab=10, dropout=True,
                      flash_attention=False)
    for t, sp, rc in ((1, False, 0), (2, True, 1), (2, False, 2)):
        times = layer_times(gpt, hw, 16, 2, t, sp, rc)
        flops = layer_costs(gpt, 16, 2, t, sp, rc)
        for k in ("forward", "input_grad", "weight_grad"):
            assert times[k] == pytest.approx(flops[k] / 0.5e12, rel=1e-9), (t, sp, rc, k)


def test_the_unfused_core_of_mla_multiplies_v_at_its_own_width():
    """MLA's Q and K are ``d + r`` wide a head, V ``d_v``: the unfused core's ``QK^T`` is
    ``2 s^2 (d + r)`` FLOPs a head and ``PV`` ``2 s^2 d_v`` (``2 b s^2 a (d_qk + d_v)``
    forward, twice that backward); ``PV`` priced at ``d + r`` made it 4/3 of that here
    (20% over at DeepSeek-V3's 192 and 128)."""
    from fastpp.model.compute import _attention

    hw = dataclasses.replace(HW, matmul_half=1e-9, memory_bandwidth=1e30, op_overhead=0.0)
    mla = Transformer(layers=4, hidden=16, heads=2, vocab=10, dropout=False,
                      flash_attention=False, q_rank=16, kv_rank=8, rope_dim=4, head_dim=8,
                      v_head_dim=6)
    s, b, a = 16, 2, 2
    forward, backward = _attention(hw, mla, float(s), float(b), 1.0)
    flops = 2 * b * a * s * s * ((8 + 4) + 6)
    assert float(forward) == pytest.approx(flops / 0.5e12, rel=1e-9)
    assert float(backward) == pytest.approx(2 * flops / 0.5e12, rel=1e-9)


def test_the_activation_backward_moves_what_megatrons_fused_kernels_move():
    """Megatron's fused SwiGLU backward (``fused_bias_swiglu.swiglu_back``) reads the output's
    gradient (F elements a token) and the input (2F) and writes the input's gradient (2F): 5F
    halves; GeLU's reads F and F and writes F: 3F (``2G + 1``). With products free, the MLP
    half's backward beyond its norm and residual is that traffic at 10 GB/s."""
    hw = dataclasses.replace(HW, peak_flops=1e30, op_overhead=0.0, matmul_half=1e-9)
    T, h, F = 512, 64, 256
    for swiglu, elements in ((True, 5), (False, 3)):
        model = Transformer(layers=2, hidden=h, heads=2, ffn=F, vocab=10, swiglu=swiglu)
        full, bare = (mlp_times(model, hw, T, 1, 1, False, width)["input_grad"]
                      for width in (None, 0))
        G = 2 if swiglu else 1
        products = sum(matmul_time(hw, T, k, n) for n, k in ((G * F, h), (h, F)))
        assert float(full - bare - products) == pytest.approx(elements * 2 * T * F / 1e10)


def test_all_reduce_within_a_node_and_across_nodes():
    # 8 ranks in one node: 2 x 7/8 of 1 GB at 100 GB/s, 14 steps of 1 us
    assert all_reduce(HW, 1e9, 8, 8) == pytest.approx(2 * 7 / 8 * 1e9 / 100e9 + 14e-6)
    # 16 ranks, 8 in each of 2 nodes: 8 rails of 10 GB/s (80 < 100), 30 steps, 2 of them
    # leaving a node at 5 us, 28 in a node at 1 us (NCCL's tree, at 0.9 of the bandwidth,
    # is slower at 1 GB)
    assert all_reduce(HW, 1e9, 16, 8) == pytest.approx(2 * 15 / 16 * 1e9 / 80e9 + 2 * 5e-6
                                                       + 28e-6)
    # a data-parallel group of one GPU per node (t = 8): one rail
    assert data_parallel_per_node(HW, 8, 4) == 1 and data_parallel_per_node(HW, 2, 8) == 4
    assert all_reduce(HW, 1e9, 4, 1) == pytest.approx(2 * 3 / 4 * 1e9 / 10e9 + 6 * 5e-6)
    # reduce-scatter and all-gather: half the all-reduce's bytes and steps; one rank: free
    assert reduce_scatter(HW, 1e9, 8, 8) == all_gather(HW, 1e9, 8, 8) == pytest.approx(
        7 / 8 * 1e9 / 100e9 + 7e-6)
    assert all_reduce(HW, 1e9, 1, 1) == 0.0
    # tensor parallelism beyond a node is priced over the network, not refused
    assert tensor_parallel_per_node(HW, 16) == 8
    assert all_reduce(HW, 1e9, 16, tensor_parallel_per_node(HW, 16)) > all_reduce(HW, 1e9, 8, 8)


def test_optimizer_step_and_the_step_terms_by_hand():
    # Adam: 34 bytes per parameter at 10 GB/s
    assert OPTIMIZER_STEP_BYTES == 34.0
    assert optimizer_time(HW, 1e9) == pytest.approx(34e9 / 1e10)
    params = 1e9  # on the fullest device; t = 2, d = 4: one node
    plain = step_terms(HW, params, 2, 4, 0)
    assert plain["gradient_sync"] == pytest.approx(2 * 3 / 4 * 4e9 / 100e9 + 6e-6)  # fp32
    assert plain["parameter_gather"] == 0.0 and plain["embedding_sync"] == 0.0
    assert plain["optimizer_step"] == pytest.approx(34e9 / 1e10)
    zero = step_terms(HW, params, 2, 4, 1)  # ZeRO-1: reduce-scatter, all-gather, 1/d update
    assert zero["gradient_sync"] == pytest.approx(3 / 4 * 4e9 / 100e9 + 3e-6)
    assert zero["parameter_gather"] == pytest.approx(3 / 4 * 2e9 / 100e9 + 3e-6)
    assert zero["optimizer_step"] == pytest.approx(34e9 / 4 / 1e10)
    # overlapped in 40M-parameter buckets under 10 ms of backward: the last bucket stays
    over = step_terms(HW, params, 2, 4, 1, overlap=True, window=0.01)
    last = BUCKET_PARAMS / params
    assert over["gradient_sync"] == pytest.approx(max(zero["gradient_sync"] - 0.01,
                                                      last * zero["gradient_sync"]))
    assert over["parameter_gather"] == pytest.approx(last * zero["parameter_gather"])
    # a tied embedding held by the first and last stages, on two nodes: one rail, fp32
    tied = step_terms(HW, params, 8, 1, 0, embedding_params=1e8, embedding_per_node=1)
    assert tied["embedding_sync"] == pytest.approx(2 * 1 / 2 * 4e8 / 10e9 + 2 * 5e-6)


def test_precision_picks_the_peak():
    h100 = HARDWARE["H100-80GB"]
    assert h100.peak == 989e12 and h100.with_precision("fp8").peak == 1979e12
    assert (matmul_time(h100.with_precision("fp8"), 8192, 8192, 8192)
            < matmul_time(h100, 8192, 8192, 8192))


def test_current_scaling_accumulates_the_gradients_in_split_mode():
    """Transformer Engine's current scaling runs the data- and weight-gradient FP8 products
    with the split accumulator (``split_accumulator`` times slower), the forward's in fast
    mode; bf16 products and other FP8 recipes are not touched. Shape-blind, memory free: the
    weight gradients (products alone) take exactly 1.25 times as long, dense or expert."""
    from fastpp.model import MODELS
    from fastpp.model.moe import expert_times

    free = dataclasses.replace(HW, matmul_half=1e-9, memory_bandwidth=1e30, op_overhead=0.0,
                               fp8_flops=2e12, split_accumulator=1.25).with_precision("fp8")
    split = dataclasses.replace(free, fp8_current_scaling=True)
    gpt = Transformer(layers=4, hidden=64, heads=2, vocab=10)
    fast, slow = (layer_times(gpt, hw, 16, 2, 1, False, 0) for hw in (free, split))
    assert slow["forward"] == pytest.approx(fast["forward"], rel=1e-12)
    assert slow["weight_grad"] == pytest.approx(1.25 * fast["weight_grad"], rel=1e-12)
    assert slow["input_grad"] > fast["input_grad"]
    qwen = MODELS["qwen3-30b-a3b"]
    fast, slow = (expert_times(qwen, hw, 64, 1, 1, 8, 1, False) for hw in (free, split))
    assert slow["forward"] == pytest.approx(fast["forward"], rel=1e-12)
    # the router's product stays in bf16 (not in the recipe): the experts' alone scale
    router = expert_times(qwen, dataclasses.replace(free, fp8_flops=1e30), 64, 1, 1, 8, 1,
                          False)["weight_grad"]
    assert slow["weight_grad"] - router == pytest.approx(1.25 * (fast["weight_grad"] - router),
                                                         rel=1e-9)
    bf16 = split.with_precision("bf16")
    assert layer_times(gpt, bf16, 16, 2, 1, False, 0)["weight_grad"] == pytest.approx(
        layer_times(gpt, free.with_precision("bf16"), 16, 2, 1, False, 0)["weight_grad"])
    # the Hopper presets carry it; Blackwell's FP8 has no fast mode to lose
    assert HARDWARE["H100-80GB"].split_accumulator == 1.15
    assert HARDWARE["B200-180GB"].split_accumulator == 1.0


@pytest.mark.parametrize("change, message", [
    (dict(memory_bandwidth=-1.0), r"memory_bandwidth must be finite and >= 1 \(got -1.0\)"),
    (dict(memory_bandwidth=float("nan")), r"memory_bandwidth must be finite and >= 1"),
    (dict(op_overhead=float("inf")), r"op_overhead must be in \[0, 3600\] \(got inf\)"),
    (dict(op_overhead=-1e-6), r"op_overhead must be in \[0, 3600\] \(got -1e-06\)"),
    (dict(efficiency=1.5), r"efficiency must be a number in \(0.01, 1\] \(got 1.5\)"),
    (dict(efficiency=0.0), r"efficiency must be a number in \(0.01, 1\] \(got 0.0\)"),
    # rates so slow that a step's time overflowed: plan printed inf as a fitting row, or
    # called the overflow a deadlock and a fastpp bug
    (dict(efficiency=1e-320), r"efficiency must be a number in \(0.01, 1\]"),
    (dict(memory_bandwidth=1e-300), r"memory_bandwidth must be finite and >= 1 \(got "
                                    r"1e-300\)"),
    (dict(peak_flops=1e-300), r"peak_flops must be finite and >= 1"),
    (dict(host_bandwidth=1e-300), r"host_bandwidth must be finite and >= 1"),
    (dict(peak_flops=[]), r"peak_flops must be one number"),
    # the gradient products' ceiling, which the user did not write down, named by its parts
    (dict(efficiency=0.011, fp8_current_scaling=True, split_accumulator=2.0),
     r"efficiency / split_accumulator must be above 0.01 with fp8_current_scaling \(got "
     r"0.011 / 2.0\)"),
    (dict(matmul_half=0.0), r"matmul_half must be a number in \(0, 65536\] \(got 0.0\)"),
    (dict(matmul_half=1e6), r"matmul_half must be a number in \(0, 65536\] \(got 1000000.0\)"),
    (dict(matmul_half=float("nan")), r"matmul_half must be a number in \(0, 65536\]"),
    (dict(precision="fp16"), r"precision must be one of \['bf16', 'fp8'\] \(got 'fp16'\)"),
    (dict(precision="fp8"), r"precision='fp8' needs fp8_flops, the GPU's FP8 peak, which "
                            r"hand lacks \(.*got fp8_flops=None\)"),
    (dict(fp8_flops=-2.0), r"fp8_flops must be finite and >= 1 \(got -2.0\)"),
    (dict(fp8_current_scaling=1), r"fp8_current_scaling must be one of \[False, True\]"),
    (dict(split_accumulator=0.5), r"split_accumulator must be >= 1 \(got 0.5\)"),
    (dict(split_accumulator=float("nan")), r"split_accumulator must be finite and >= 0"),
])
def test_bad_hardware_is_named(change, message):
    with pytest.raises(ScheduleError, match=message):
        dataclasses.replace(HW, **change)


@pytest.mark.parametrize("bandwidth, latency, message", [
    (-1.0, 0.0, r"bad.bandwidth must be finite and >= 1 \(got -1.0\)"),
    (float("inf"), 0.0, r"bad.bandwidth must be finite and >= 1 \(got inf\)"),
    (1e-300, 0.0, r"bad.bandwidth must be finite and >= 1 \(got 1e-300\)"),
    (1e9, float("nan"), r"bad.latency must be in \[0, 3600\] \(got nan\)"),
])
def test_bad_links_are_named(bandwidth, latency, message):
    with pytest.raises(ScheduleError, match=message):
        Link("bad", bandwidth, latency)


def test_every_preset_is_valid_and_priced():
    for hw in HARDWARE.values():
        assert np.isfinite(matmul_time(hw, 4096, 4096, 4096)) and hw.precision == "bf16"


def test_output_layer_keeps_bf16_cost_under_fp8():
    """An FP8 recipe leaves the output layer's products in bf16 (Megatron-Core's
    ``ColumnParallelLinear``, DeepSeek-V3's report); ``Hardware.fp8_output_layer`` (Megatron's
    ``fp8_output_proj``) runs them at the fp8 peak, and changes nothing else."""
    model, h100 = MODELS["llama2-7b"], HARDWARE["H100-80GB"]
    fp8 = h100.with_precision("fp8")
    mxfp8 = dataclasses.replace(fp8, fp8_output_layer=True)
    bf16, kept, moved = (head_times(model, hw, 4096, 2, 1, False) for hw in (h100, fp8, mxfp8))
    assert kept == bf16
    T, v, h = 4096 * 2, float(model.vocab), float(model.hidden)
    for key, shape in (("head_forward", (T, v, h)), ("head_input_grad", (T, h, v)),
                       ("head_weight_grad", (h, v, T))):
        gain = matmul_time(h100, *shape) - matmul_time(fp8, *shape)
        assert gain > 0 and bf16[key] - moved[key] == pytest.approx(gain)
    assert moved["embed_forward"] == bf16["embed_forward"]
    with pytest.raises(ScheduleError, match="fp8_output_layer must be one of"):
        dataclasses.replace(h100, fp8_output_layer="yes")


def test_no_newer_gpu_runs_a_product_slower_than_an_a100():
    """``Hardware.floor``: H100's curve, fitted on large models' products, priced a thin one
    below an A100's (62 against 134 TFLOP/s at 4096 x 4096 x 128), and MoE steps on H100 at
    up to 1.49 times an A100's (a review, 7 December 2026)."""
    from fastpp.model import plan
    from fastpp.model.compute import matmul_time

    sizes = np.array([16, 64, 128, 512, 1024, 4096, 16384], float)
    m, n, k = (x.ravel() for x in np.meshgrid(sizes, sizes, sizes))
    a100 = matmul_time(HARDWARE["A100-80GB"], m, n, k)
    for name, hw in HARDWARE.items():
        if name != "A100-80GB":
            assert hw.floor == "A100-80GB", name
            assert (matmul_time(hw, m, n, k) <= a100 * (1 + 1e-12)).all(), name
    # large products keep their own curve (the dense tables do not move)
    h100 = HARDWARE["H100-80GB"]
    own = dataclasses.replace(h100, floor="")
    assert matmul_time(h100, 8192, 8192, 8192) == matmul_time(own, 8192, 8192, 8192)
    assert matmul_time(h100, 4096, 4096, 128) < matmul_time(own, 4096, 4096, 128) / 2
    kw = dict(seq=4096, global_batch=64, pp=1, ep=1, microbatch=1, schedules=["1f1b"],
              recompute="full", precision="bf16", capacity=1e15)
    for model, t in (("qwen3-30b-a3b", 1), ("mixtral-8x7b", 8)):
        steps = [plan(model, 8, hw, tp=t, **kw).iloc[0]["step_time"]
                 for hw in ("A100-80GB", "H100-80GB")]
        assert steps[1] < steps[0], (model, steps)
    with pytest.raises(ScheduleError, match=r"floor must be '' or a preset of HARDWARE"):
        dataclasses.replace(h100, floor="V100")


def test_the_embeddings_times_by_hand():
    """The embedding's forward reads a table row and writes it for each token (2 + 2 bytes a
    value); its weight gradient reads the bf16 gradient and adds it into the fp32 main
    gradient, read and written (2 + 4 + 4): at 10 GB/s, each plus the op's 1 us."""
    model = Transformer(layers=2, hidden=64, heads=4, vocab=1000)
    times = head_times(model, HW, 128, 2, 1, False)
    tokens_h = 128 * 2 * 64
    assert times["embed_forward"] == pytest.approx(4 * tokens_h / 1e10 + 1e-6)
    assert times["embed_weight"] == pytest.approx(10 * tokens_h / 1e10 + 1e-6)
