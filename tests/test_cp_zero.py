"""Context parallelism, ZeRO-3 and the pair overlap in transformer_costs and plan: volumes and
times by hand, bad input, and plan rows against simulate(build_schedule, transformer_costs)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from helpers import held_bytes

from fastpp import SCHEDULES, ScheduleError, build_schedule, simulate
from fastpp.model import Hardware, Link, Transformer, device_bytes, plan, transformer_costs
from fastpp.model.stages import (
    context_parallel_times,
    cp_buffer_bytes,
    device_memory,
    ring_merges,
    stage_params,
    step_terms,
)

WIRE = Link("toy-node", bandwidth=1000.0, latency=0.01)
# products at half the peak whatever their shape, memory and launches free (as test_model.py)
TOY = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=WIRE,
               network=Link("toy-net", 100.0, 0.1), efficiency=0.5, gpus_per_node=4,
               memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)
MODEL = Transformer(layers=8, hidden=64, heads=8, kv_heads=4, ffn=160, vocab=500, swiglu=True,
                    name="toy")


def test_context_parallel_all_gather_by_hand():
    # K and V of the whole sequences: 2 x 2 bytes x seq 32 x 2 sequences x kv 32 = 8192 bytes;
    # all-gathered over 2 ranks in one node: (2-1)/2 of it at 1000 B/s plus one 0.01 s step
    forward, backward = context_parallel_times(MODEL, TOY, 32, 2, 1, 2, "all-gather")
    assert float(forward) == pytest.approx(0.5 * 8192 / 1000 + 0.01)
    # the backward gathers K and V again (Transformer Engine keeps only the local ones), then
    # reduce-scatters their gradients: the same volume and steps twice
    assert float(backward) == pytest.approx(2 * float(forward))
    # 8 ranks over 4-GPU nodes: the ring crosses nodes at the network's 100 B/s per rail x 4,
    # one of its 7 steps leaving a node (the network's 0.1 s), 6 inside one (0.01 s)
    forward, _ = context_parallel_times(MODEL, TOY, 32, 2, 1, 8, "all-gather")
    assert float(forward) == pytest.approx(7 / 8 * 8192 / min(1000, 4 * 100) + 0.1 + 6 * 0.01)
    assert context_parallel_times(MODEL, TOY, 32, 2, 1, 1, "all-gather") == (0.0, 0.0)


def test_pytorch_context_parallel_by_hand():
    """PyTorch's context parallelism as torchtitan runs it (``cp_comm="torch-allgather"``,
    ``"torch-alltoall"``): K and V with the KV heads repeated to all 8 heads (torchtitan's
    repeat_kv before the attention), 2 bytes x 32 tokens x 2 sequences x 8 x (8 + 8) =
    16,384 bytes, twice the 8,192 Transformer Engine's GQA sends; with the attention free,
    nothing hides the exchange."""
    free = dataclasses.replace(TOY, peak_flops=1e30)
    forward, backward = context_parallel_times(MODEL, free, 32, 2, 1, 2, "torch-allgather")
    gather = 0.5 * 16384 / 1000 + 0.01  # issued before step 0, waited at step 1
    grad_hop = 2 * 16384 / 2 / 1000 + 0.01  # a rank's dK and dV in fp32, one hop
    assert float(forward) == pytest.approx(gather)
    # the backward gathers again; dK and dV go on after each of the 2 steps, the last
    # waited at the end
    assert float(backward) == pytest.approx(gather + 2 * grad_hop)
    hop = 16384 / 2 / 1000 + 0.01  # the all-to-all rotation: a block a step, 1 of them
    forward, backward = context_parallel_times(MODEL, free, 32, 2, 1, 2, "torch-alltoall")
    assert float(forward) == pytest.approx(hop)
    assert float(backward) == pytest.approx(hop + 2 * grad_hop)
    # the fp32 merges, against the ring with free links: the output (2 x 32 / 2 tokens x 64
    # elements) read and written in fp32 with each later step's block read (10 bytes an
    # element), the first step's cast and the last's (12); dq (64), dK and dV (128) of each
    # token accumulated in fp32 each step (10 bytes) plus their zeros and casts (10); a
    # kernel each, at 1 ms a launch
    slow = dataclasses.replace(TOY, memory_bandwidth=1000.0, op_overhead=1e-3,
                               node=Link("fast", 1e30, 0.0))
    # (the ring's own merges, Transformer Engine's in bf16, apart: ring_merges)
    ring = np.subtract(context_parallel_times(MODEL, slow, 32, 2, 1, 2, "ring"),
                       ring_merges(MODEL, slow, 32, 2, 1, 2))
    torch_cp = context_parallel_times(MODEL, slow, 32, 2, 1, 2, "torch-allgather")
    assert float(torch_cp[0] - ring[0]) == pytest.approx(32 * 64 * (10 + 12) / 1000 + 2e-3)
    assert float(torch_cp[1] - ring[1]) == pytest.approx(32 * 192 * (10 * 2 + 10) / 1000
                                                         + 6e-3)
    for comm in ("torch-allgather", "torch-alltoall"):
        assert context_parallel_times(MODEL, TOY, 32, 2, 1, 1, comm) == (0.0, 0.0)
    # MLA's keys carry their RoPE part: 4 heads of K (16 + 8) and V (16) are 160 wide, Q
    # (16 + 8) 96; gathered whole in bf16 (2 x 32 x 160) and a rank's 16 tokens of dq, dk,
    # dv and the dK, dV in flight in fp32 (4 x 16 x (96 + 2 x 160))
    mla = Transformer(layers=2, hidden=64, heads=4, head_dim=16, v_head_dim=16, ffn=128,
                      vocab=256, q_rank=32, kv_rank=16, rope_dim=8)
    assert float(cp_buffer_bytes(mla, 32, 1, 1, 2, "torch-allgather")) == \
        2 * 32 * 160 + 4 * 16 * (96 + 2 * 160)


def test_context_parallel_splits_the_tokens():
    """cp = 2 with 2 sequences per microbatch prices each rank's 32 tokens of each sequence
    exactly as cp = 1 with one sequence (products, causal attention share, bytes, hand-offs),
    plus the K and V all-gather in every layer's forward, and in its backward the gather
    again and the gradients' reduce-scatter."""
    sched = build_schedule("1f1b", 2, 4)
    one = transformer_costs(MODEL, sched, TOY, seq=64, microbatch=1)
    two = transformer_costs(MODEL, sched, TOY, seq=64, microbatch=2, cp=2)
    forward, backward = context_parallel_times(MODEL, TOY, 64, 2, 1, 2, "all-gather")
    layers = MODEL.layers / 2
    assert np.allclose(two.arrays["f"], one.arrays["f"] + layers * forward)
    assert np.allclose(two.arrays["b"], one.arrays["b"] + layers * backward)
    assert np.allclose(two.arrays["act"], one.arrays["act"])  # activations: per rank, seq/cp
    np.testing.assert_array_equal(two.arrays["message_bytes"], one.arrays["message_bytes"])
    # the ring hides the hops under the attention core: never more exposed than the gather's
    ring = transformer_costs(MODEL, sched, TOY, seq=64, microbatch=2, cp=2, cp_comm="ring")
    assert np.all(ring.arrays["f"] <= two.arrays["f"] + 1e-12)


def test_zero3_bytes_and_times_by_hand():
    sched = build_schedule("1f1b", 2, 4)
    layer = MODEL.layer_params()
    # device 0: 4 layers and the embedding; ZeRO-3 over 8 replicas holds 1/8 of each byte,
    # plus two whole layers gathered at once (the one computed, the one prefetched)
    params = 4 * layer + MODEL.vocab * MODEL.hidden
    by = device_bytes(MODEL, sched, dp=8, zero=3)
    assert by["parameter_bytes"][0] == pytest.approx(2 * params / 8 + 2 * 2 * layer)
    # the gradients at the 4 bytes Megatron holds and reduces them in (fp32 main_grad)
    assert by["gradient_bytes"][0] == pytest.approx(4 * params / 8)
    assert device_bytes(MODEL, sched, dp=8, zero=3, reduce_bytes=2)["gradient_bytes"][0] == \
        pytest.approx(2 * params / 8)
    assert by["optimizer_bytes"][0] == pytest.approx(12 * params / 8)
    # gathered once per step: the weights whole through the step, and the gradients, which
    # FSDP2 under PyTorch's pipelining accumulates whole and reduces after the last backward
    step = device_bytes(MODEL, sched, dp=8, zero=3, zero3="step")
    assert step["parameter_bytes"][0] == pytest.approx(2 * params)
    assert step["gradient_bytes"][0] == pytest.approx(4 * params)
    assert step["optimizer_bytes"][0] == pytest.approx(12 * params / 8)
    # context parallelism shards over d x cp
    assert device_bytes(MODEL, sched, dp=4, cp=2, zero=3)["gradient_bytes"][0] == \
        pytest.approx(4 * params / 8)
    # times: 5 all-gathers (4 layers, the embedding) of 2 bytes x params / 5 over 2 ranks in a
    # node, beside the forward's compute, only the excess exposed; the backward adds the
    # 4-byte gradients' reduce-scatter
    base = transformer_costs(MODEL, sched, TOY, seq=32, dp=2)
    z3 = transformer_costs(MODEL, sched, TOY, seq=32, dp=2, zero=3)
    gather = 5 * (0.5 * 2 * params / 5 / 1000 + 0.01)
    scatter = 5 * (0.5 * 4 * params / 5 / 1000 + 0.01)
    held = 0.01 + 2 * 32 * 64 / 1000  # the blocking hand-off in f and b, not hidden
    f0, b0 = base.arrays["f"][0] - held, base.arrays["b"][0] - held
    assert z3.arrays["f"][0] == pytest.approx(max(f0, gather) + held)
    assert z3.arrays["b"][0] == pytest.approx(max(b0, gather + scatter) + held)
    assert gather > f0  # the case checked is the one where the gather shows
    # per step: no collective in any microbatch; one all-gather and one reduce-scatter of all
    # the device's parameters a step (4 bytes a gradient), outside the pipeline
    z3s = transformer_costs(MODEL, sched, TOY, seq=32, dp=2, zero=3, zero3="step")
    np.testing.assert_array_equal(z3s.arrays["f"], base.arrays["f"])
    np.testing.assert_array_equal(z3s.arrays["b"], base.arrays["b"])
    terms = step_terms(TOY, params, 1, 2, 3, zero3="step")
    assert terms["parameter_gather"] == pytest.approx(0.5 * 2 * params / 1000 + 0.01)
    assert terms["gradient_sync"] == pytest.approx(0.5 * 4 * params / 1000 + 0.01)
    layer_terms = step_terms(TOY, params, 1, 2, 3, zero3="layer")
    assert layer_terms["parameter_gather"] == layer_terms["gradient_sync"] == 0.0


def test_zero3_shards_the_routed_experts_over_their_replicas():
    """FSDP shards the routed experts over the expert-data-parallel ranks (torchtitan's and
    AutoModel's expert mesh, Megatron-FSDP's expert data-parallel group), ZeRO-3's two
    in-flight layers whole, and gathers and reduces them each microbatch."""
    moe = Transformer(layers=4, hidden=64, heads=8, ffn=160, expert_ffn=32, experts=8,
                      top_k=2, vocab=500, swiglu=True, name="toy-moe")
    # 8 ranks a stage, ep = 4 (ep etp = t replicas / edp): 2 experts a GPU, edp = 2 replicas
    dense, routed, layer = 1e6, 4e5, 2 * 3 * 64 * 32  # a layer's 2 experts a GPU
    # an MoE layer without its routed experts: attention, two norms and the router
    outside = (64 * 64 * 2 + 2 * 64 * 64) + 2 * 64 + 64 * 8
    for zero3, whole in (("layer", 2), ("step", None)):
        weights, grads, optimizer = device_memory(moe, dense, routed, 1, 8, 2, 3, zero3)
        if whole:  # sharded, and two layers whole of each kind
            assert weights == pytest.approx(2 * (dense / 8 + 2 * outside)
                                            + 2 * (routed / 2 + 2 * layer))
            assert grads == pytest.approx(4 * (dense / 8 + routed / 2))
        else:  # gathered once a step: weights and gradients whole
            assert weights == pytest.approx(2 * (dense + routed))
            assert grads == pytest.approx(4 * (dense + routed))
        assert optimizer == pytest.approx(12 * (dense / 8 + routed / 2))
    # each microbatch's backward pays the experts' collectives beside the dense ones': d = 4
    # in one 4-GPU node, ep = 2, so the experts' 2 replicas are 2 ranks apart in it too; each
    # of device 0's 2 MoE layers gathers (2 bytes) and reduce-scatters (4 bytes) its 4 experts
    # over 2 ranks, and 3 dense ones (2 layers, the embedding) over 4
    sched = build_schedule("1f1b", 2, 4)
    base = transformer_costs(moe, sched, TOY, seq=32, dp=4, ep=2)
    z3 = transformer_costs(moe, sched, TOY, seq=32, dp=4, zero=3, ep=2)
    experts = 2 * 4 * moe.expert_params()
    params = float(stage_params(moe, 2.0, True, False, 1, 2.0, 0.0))
    by_hand = (2 * (2 * 0.01 + 0.5 * (2 + 4) * experts / 2 / 1000)
               + 3 * (2 * 3 * 0.01 + 0.75 * (2 + 4) * params / 3 / 1000))
    # the blocking hand-off, not hidden: pipeline ranks 4 GPUs apart, over the network
    held = 0.1 + 2 * 32 * 64 / 100
    assert by_hand > base.arrays["b"][0]  # the collectives show
    assert z3.arrays["b"][0] == pytest.approx(by_hand + held)


@pytest.mark.parametrize("kwargs, message", [
    (dict(cp=3), r"cp must split seq into 2 x cp equal chunks: seq must be a multiple of "
                 r"2\*cp=6 \(got seq=32, cp=3\)"),
    (dict(cp=0), r"cp must be a positive integer \(got cp=0\)"),
    (dict(zero=4), r"zero must be one of"),
    (dict(cp_comm="p2p"), r"cp_comm must be one of"),
    (dict(zero3="never"), r"zero3 must be one of"),
    (dict(overlap=True), r"overlap needs a schedule with overlapped forward-and-backward "
                         r"pairs, one of \['dualpipe', 'dualpipev', 'combined-1f1b'\] "
                         r"\(got '1f1b'\)"),
])
def test_bad_input(kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        transformer_costs(MODEL, build_schedule("1f1b", 2, 4), TOY, seq=32, **kwargs)


def test_overlap_refuses_full_recomputation():
    for name, m, kwargs in (("dualpipev", 2, dict(overlap=True)),
                            ("combined-1f1b", 2, {})):  # combined 1F1B is Megatron's overlap
        with pytest.raises(ScheduleError, match=r"overlap cannot run with recompute='full'"):
            transformer_costs(MODEL, build_schedule(name, 2, 4, m), TOY, seq=32,
                              recompute="full", **kwargs)


def test_combined_1f1b_needs_expert_parallelism():
    with pytest.raises(ScheduleError, match=r"'combined-1f1b' needs expert parallelism: "
                                            r"Megatron's EP overlap asserts "
                                            r"expert_model_parallel_size > 1 \(got ep=1\)"):
        transformer_costs(MODEL, build_schedule("combined-1f1b", 2, 4, 2), TOY, seq=32)


def test_overlap_of_a_dense_model_keeps_each_pair_at_f_plus_b():
    # no all-to-all to hide: the pair model saves nothing, the pairs keep the kernel's f + b
    sched = build_schedule("dualpipev", 2, 4, 2)
    plain = transformer_costs(MODEL, sched, TOY, seq=32)
    paired = transformer_costs(MODEL, sched, TOY, seq=32, overlap=True)
    assert simulate(sched, plain).makespan == simulate(sched, paired).makespan


@pytest.fixture(scope="module")
def wide_plan():
    return plan(MODEL, 16, TOY, seq=32, global_batch=64, capacity=4e6, cp=[1, 2, 4],
                zero=[1, 3], overlap=[False, True], recompute=["none", "full"],
                schedules=["1f1b", "interleaved-1f1b", "dualpipe", "dualpipev",
                           "combined-1f1b"], microbatch=[1, 2])


def test_plan_rows_equal_simulate_with_cp_zero3_overlap(wide_plan):
    df = wide_plan
    assert (df["t"] * df["cp"] * df["p"] * df["d"] == 16).all()
    assert set(df["cp"]) == {1, 2, 4} and set(df["zero"]) == {1, 3}
    ran = df[df["step_time"].notna()]
    picks = [ran[(ran["cp"] > 1) & (ran["p"] > 1)].sample(12, random_state=0),
             ran[(ran["zero"] == 3) & (ran["p"] > 1)].sample(12, random_state=1),
             ran[(ran["schedule"] == "dualpipe") & (ran["zero"] == 3)].sample(6, random_state=2)]
    for r in pd.concat(picks).itertuples():
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(MODEL, sched, TOY, seq=32, microbatch=r.microbatch, tp=r.t,
                                  dp=r.d, cp=r.cp, zero=r.zero, recompute=r.recompute,
                                  overlap=r.overlap)
        res = simulate(sched, costs)
        by = device_bytes(MODEL, sched, tp=r.t, dp=r.d, cp=r.cp, zero=r.zero)
        # the exchange's buffers of one layer (plan's default cp_comm, the all-gather's) and a
        # recomputed layer's working set, or the loss's
        total = sum(by.values()) + held_bytes(costs, sched, res)
        worst = int(np.argmax(total))
        assert (r.makespan, r.bubble_ratio) == pytest.approx((res.makespan, res.bubble_ratio),
                                                             rel=1e-12), r
        assert r.peak_memory == pytest.approx(total[worst], rel=1e-12), r
        assert r.mfu == pytest.approx(r.tokens_per_s * MODEL.flops_per_token(32) / 16 / 1e6)


def test_plan_reasons(wide_plan):
    df = wide_plan
    for name, asked, recompute, start in (
            ("1f1b", True, "none", "overlap needs a schedule"),
            ("dualpipev", True, "full", "overlap cannot run with recompute='full'"),
            ("combined-1f1b", False, "full", "overlap cannot run with recompute='full'"),
            ("combined-1f1b", False, "none", "'combined-1f1b' needs expert parallelism")):
        rows = df[(df["schedule"] == name) & (df["overlap"] == asked)
                  & (df["recompute"] == recompute)]
        # never run; the overlap's reason wherever no earlier one (n, the layers, combined
        # 1F1B's m: 1 at p = 1 alone) applies
        assert rows["step_time"].isna().all()
        if name == "combined-1f1b":
            rows = rows[(rows["p"] > 1) == (rows["m"] > 1)]
        assert rows["reason"].str.startswith(start).mean() > 0.5
    odd = plan(MODEL, 12, TOY, seq=32, global_batch=48, cp=3, schedules=["1f1b"], tp=1,
               microbatch=1, recompute="none")
    assert odd["reason"].str.startswith("cp must split seq into 2 x cp equal chunks").all()


def test_plan_default_schedules_leave_expert_overlap_out_of_dense_models():
    """By default a dense model is not offered a schedule that is Megatron's EP overlap (it
    could only give reason rows); an MoE model is, and naming one for a dense model still
    gives its reasons (test_plan_reasons)."""
    overlap = {k for k, spec in SCHEDULES.items() if spec.expert_overlap}
    assert overlap == {"combined-1f1b"}
    small = dict(seq=32, global_batch=16, tp=1, pp=2, microbatch=1, recompute="none")
    dense = plan(MODEL, 4, TOY, **small)
    assert set(dense["schedule"]) == {k for k, spec in SCHEDULES.items()
                                      if not spec.forward_only} - overlap
    moe = Transformer(layers=8, hidden=64, heads=8, kv_heads=4, ffn=160, expert_ffn=32,
                      experts=4, top_k=2, vocab=500, name="toy-moe")
    rows = plan(moe, 4, TOY, **small)
    assert overlap <= set(rows["schedule"])
    ran = rows[(rows["schedule"] == "combined-1f1b") & rows["step_time"].notna()]
    assert len(ran) and (ran["ep"] > 1).all()  # it runs only with expert parallelism


@pytest.mark.parametrize("kwargs, message", [
    (dict(cp=0), r"cp must hold positive integers below 2\*\*31 \(got \[0\]\)"),
    (dict(cp_comm="p2p"), r"cp_comm must be one of"),
    (dict(zero3="never"), r"zero3 must be one of"),
    (dict(overlap="yes"), r"overlap must be one of"),
    (dict(overlap=[]), r"overlap must hold at least one value"),
    (dict(zero=[4]), r"zero must be one of \[0, 1, 2, 3\] \(got 4\)"),
])
def test_bad_plan_input(kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        plan(MODEL, 16, TOY, seq=32, global_batch=64, **kwargs)


def test_zero3_edges():
    """In flight: at most what a device holds, and nothing unsharded; gathered per step, the
    gradients' reduction follows the last backward, exposed whatever the overlap; the fixed
    CPU time of a step counted once."""
    moe = Transformer(layers=4, hidden=64, heads=8, ffn=160, expert_ffn=32, experts=8,
                      top_k=2, vocab=500, swiglu=True, name="toy-moe")
    # a device without experts holds no experts in flight; one replica shards nothing
    assert device_memory(moe, 1e6, 0.0, 1, 8, 1, 3)[0] == pytest.approx(
        2 * (1e6 / 8 + 2 * (moe.layer_params(True) - 8 * moe.expert_params())))
    assert device_memory(moe, 1e6, 4e5, 1, 1, 1, 3)[0] == device_memory(
        moe, 1e6, 4e5, 1, 1, 1, 2)[0]
    hidden = step_terms(TOY, 1e6, 1, 2, 3, zero3="step", overlap=True, window=1e9)
    plain = step_terms(TOY, 1e6, 1, 2, 3, zero3="step")
    assert hidden["gradient_sync"] == plain["gradient_sync"] > 0
    assert step_terms(TOY, 1e9, 1, 2, 1, overlap=True, window=1e9)["gradient_sync"] < \
        step_terms(TOY, 1e9, 1, 2, 1)["gradient_sync"]  # ZeRO-1's buckets do hide
    once = dataclasses.replace(TOY, host_step=0.002)
    assert step_terms(once, 0.0, 1, 1, 0)["optimizer_step"] == pytest.approx(0.002)
    assert step_terms(once, 0.0, 1, 1, 0, host_step=False)["optimizer_step"] == 0.0


def test_zero3_reduces_each_layer_in_the_run_s_gradient_bytes():
    """ZeRO-3's per-layer reduce-scatter moves reduce_bytes a gradient, as the step's
    reduction does (it had moved 4 whatever the run said: bf16 gradients priced as fp32). On a
    slow network the backward is that collective's."""
    from fastpp.model import HARDWARE, MODELS, Link, RunConfig, RunGrid, stage_table
    from fastpp.model.comm import reduce_scatter

    slow = dataclasses.replace(HARDWARE["H100-80GB"], node=Link("slow", 1e8, 0.0),
                               network=Link("slow-net", 1e8, 0.0), gpus_per_node=8)
    model = MODELS["llama3-8b"]

    def backward(reduce_bytes):
        run = RunConfig(seq=512, global_batch=8, d=8, zero=3, recompute="none",
                        reduce_bytes=reduce_bytes)
        grid = RunGrid.of(run)
        assert grid.reduce_bytes == reduce_bytes
        return stage_table(model, slow, grid, config=np.zeros(1, np.int64),
                           layers=np.array([32.0]), embedding=np.array([True]),
                           loss=np.array([True]))["b"][0]

    params = model.parameters
    layers = model.layers + 2  # a collective a layer, the embedding's and the output's
    moved = layers * (reduce_scatter(slow, 4.0 * params / layers, 8, 8)
                      - reduce_scatter(slow, 2.0 * params / layers, 8, 8))
    assert backward(4.0) - backward(2.0) == pytest.approx(moved, rel=1e-6)


def test_sequence_parallel_embedding_gathers_its_gradient_back():
    """With sequence parallelism the embedding's output is reduce-scattered over the tensor
    ranks, so the backward all-gathers its gradient; the first stage's backward had left it
    out. Without, the forward's all-reduce needs none back."""
    from fastpp.model import HARDWARE, MODELS, RunConfig, RunGrid, stage_table
    from fastpp.model.comm import all_gather, reduce_scatter

    hw, model = HARDWARE["H100-80GB"], MODELS["llama3-8b"]

    def first_over_second(sequence_parallel):
        grid = RunGrid.of(RunConfig(seq=4096, global_batch=8, t=4, p=2, recompute="none",
                                    sequence_parallel=sequence_parallel))
        b = stage_table(model, hw, grid, config=np.zeros(2, np.int64),
                        layers=np.array([16.0, 16.0]), embedding=np.array([True, False]),
                        loss=np.array([False, False]))["b"]
        return b[0] - b[1]

    sbh = 2 * 4096 * model.hidden  # bytes of one sequence's hidden states
    # the one exchange of an sbh tensor with sequence parallelism: (all-gather + its
    # reduce-scatter) / 2, as every layer's are priced
    once = (all_gather(hw, sbh, 4, 4) + reduce_scatter(hw, sbh, 4, 4)) / 2
    assert first_over_second(True) - first_over_second(False) == pytest.approx(once, rel=1e-9)
