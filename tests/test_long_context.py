"""Context parallelism's ring by hand, and the long-context dataset
(shared/data/long_context_published.csv) against the model: its rows, exclusions and bounds."""

import dataclasses

import numpy as np
import pytest
from helpers import needs_data

from fastpp.model import HARDWARE, MODELS, Hardware, Link, Transformer
from fastpp.model.compute import _attention
from fastpp.model.stages import (
    context_parallel_times,
    ring_backward_exposed,
    ring_exposed,
    ring_merges,
    ring_steps,
)
from fastpp.model.validate import DATA

WIRE = Link("toy-node", bandwidth=1000.0, latency=0.01)
# products and attention at half the peak whatever their shape (no measured kernel for "toy")
TOY = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=WIRE,
               network=Link("toy-net", 100.0, 0.1), efficiency=0.5, gpus_per_node=4,
               memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)
MODEL = Transformer(layers=8, hidden=64, heads=8, kv_heads=4, ffn=160, vocab=500, swiglu=True,
                    name="toy")


def test_ring_backward_exposed_by_hand():
    # c = 4: step 0 sends a block (3 s hop under its 1 s), steps 1-2 a block and gradients
    # (6 s under 2 s each), step 3 the gradients (3 s under 2 s)
    assert float(ring_backward_exposed(3.0, 1.0, 2.0, 4)) == pytest.approx(2 + 2 * 4 + 1)
    assert float(ring_backward_exposed(0.5, 1.0, 2.0, 4)) == 0.0
    assert float(ring_backward_exposed(3.0, 1.0, 2.0, 1)) == 0.0


def test_ring_exposed_by_hand():
    # hop k + 1 under step k: the first under step 0 (1 s), the other two under 2 s steps
    assert float(ring_exposed(3.0, 1.0, 2.0, 4)) == pytest.approx((3 - 1) + 2 * (3 - 2))
    assert float(ring_exposed(1.5, 1.0, 2.0, 4)) == pytest.approx(0.5)  # the first only
    assert float(ring_exposed(3.0, 1.0, 2.0, 1)) == 0.0  # no ring


def test_ring_by_hand_on_a_small_case():
    """seq 32, 2 sequences, 2 ranks, one node. K and V of one rank's 16 tokens of both
    sequences: 2 x 2 bytes x 16 x 2 x kv 32 = 4096 bytes a hop, 4.096 s at 1000 B/s plus the
    0.01 s step. Each of the 2 steps computes 1/2 of the rank's causal FLOPs: 2/4 sequences'
    worth, 32^2 x core width 128 x 1/2 = 65,536 FLOPs, 0.131 s at half of 1e6 FLOP/s. One hop
    under step 0: forward exposed 4.106 - 0.131. Backward (Transformer Engine's order): step 0
    sends K and V, the last step their gradients, each one hop under 2.5 times the step."""
    step = 2 / 4 * 32 * 32 * 128 / (1e6 * 0.5)
    hop = 2 * 2 * 16 * 2 * 32 / 1000 + 0.01
    forward, backward = context_parallel_times(MODEL, TOY, 32, 2, 1, 2, "ring")
    # on "toy" every block runs at the same efficiency: the repriced core adds nothing
    assert float(forward) == pytest.approx(hop - step)
    assert float(backward) == pytest.approx(2 * (hop - 2.5 * step))
    steps = ring_steps(MODEL, TOY, 32, 2, 1, 2)
    assert float(steps["first_forward"]) == pytest.approx(step)
    assert float(steps["forward"]) == pytest.approx(step)
    # a fast link hides every hop: nothing added
    fast = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=Link("nv", 1e12, 0.0),
                    network=Link("ib", 1e11, 0.0), efficiency=0.5, gpus_per_node=4,
                    memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)
    forward, backward = context_parallel_times(MODEL, fast, 32, 2, 1, 2, "ring")
    assert float(forward) == pytest.approx(0.0, abs=1e-9)
    assert float(backward) == pytest.approx(0.0, abs=1e-9)
    assert context_parallel_times(MODEL, TOY, 32, 2, 1, 1, "ring") == (0.0, 0.0)


def test_ring_blocks_run_at_the_kernel_speed_of_their_length():
    """On H100 the ring's steps are the measured kernel's: step 0 causal over s/c keys, the
    others non-causal blocks of s/2c or s/c keys (their mean), each 1/c of the FLOPs; the
    exchange hidden (NVLink, 7B at 128K over 4 ranks), the core costs what its blocks cost."""
    model, h100 = MODELS["llama2-7b"], HARDWARE["H100-80GB"]
    seq, c, t = 131072, 4, 1
    steps = ring_steps(model, h100, seq, 1, t, c)
    share = 1 / c ** 2
    assert float(steps["first_forward"]) == pytest.approx(float(_attention(
        h100, model, seq, share, t, length=seq / c, causal=True)[0]))
    half, whole = (float(_attention(h100, model, seq, share, t, length=k, causal=False)[0])
                   for k in (seq / (2 * c), seq / c))
    assert float(steps["forward"]) == pytest.approx((half + whole) / 2)
    forward, backward = context_parallel_times(model, h100, seq, 1, t, c, "ring")
    plain = _attention(h100, model, seq, 1 / c, t)
    # and the merges after the steps: 6 bytes an element of the 1 + 0.75 (c - 1) passes over
    # the rank's output (32 heads of 128), and of its dQ, dK and dV
    merged = ring_merges(model, h100, seq, 1, t, c)
    passes, tokens = 1 + 0.75 * (c - 1), seq / c
    assert float(merged[0]) == pytest.approx(
        6 * passes * tokens * 4096 / h100.memory_bandwidth
        + c * h100.op_overhead)
    assert float(merged[1]) == pytest.approx(
        6 * passes * tokens * 3 * 4096 / h100.memory_bandwidth
        + 3 * c * h100.op_overhead)
    assert float(forward) == pytest.approx(float(steps["first_forward"] + 3 * steps["forward"]
                                                 - plain[0] + merged[0]))
    assert float(backward) == pytest.approx(float(steps["first_backward"]
                                                  + 3 * steps["backward"] - plain[1]
                                                  + merged[1]))
    # non-causal blocks of 16-32K keys run faster than one causal 128K pass
    assert float(forward) < 0 and float(backward) < 0


LONG = DATA / "long_context_published.csv"
long_data = needs_data(LONG.name)


@pytest.fixture(scope="module")
def long():
    from fastpp.model.validate_long import long_rows

    return long_rows()


@long_data
def test_exclusions_are_the_listed_ones():
    import pandas as pd

    from fastpp.model.validate_long import excluded

    frame = pd.read_csv(LONG)
    out = excluded(frame)
    assert len(frame) == 108 and len(out) == 87
    kinds = out["reason"].str.split(" ").str[0].value_counts().to_dict()
    assert kinds == {"layout": 16, "GPU": 7, "framework": 31, "MoE": 1, "dropless": 4,
                     "llm-foundry": 28}
    moe = out[out["reason"].str.startswith(("MoE", "dropless"))]
    assert set(moe["model"]) == {"Qwen3-235B-A22B (MoE)"}
    assert set(out[out["reason"].str.startswith("layout")]["metric"]) == {
        "model_tflops_per_gpu_without_cp"}


@long_data
def test_long_rows_are_the_nemo_cp_runs_and_fit_memory(long):
    rows, memory = long
    assert len(rows) == 17
    assert sum("H100" in r[1] for r in rows) == 9 and sum("B200" in r[1] for r in rows) == 8
    for label, peak in memory.items():
        capacity = HARDWARE["H100-80GB" if "H100" in label else "B200-180GB"].memory_bytes
        assert peak < capacity, label
    # NeMo 2's (B200, NeMo 25.04) fused loss; NeMo 24.03's Megatron-Core had none
    import pandas as pd

    from fastpp.model.published import data_file
    from fastpp.model.validate_long import DATASET, _runs

    frame = pd.read_csv(data_file(f"{DATASET}.csv"))
    assert {table: model.loss for _, table, model, *_ in _runs(frame)} == {
        "H100": "in-place", "B200": "fused"}


def _errors(rows, gpu="", role=None):
    from fastpp.model.validate_long import long_roles

    roles = long_roles()
    return np.array([r[4] / r[3] - 1 for r in rows if gpu in r[1]
                     and (role is None or roles.get(r[:3], "check") == role)])


@long_data
def test_nemo_count_is_the_full_square():
    """NeMo's summary tables print tokens and TFLOP/s per GPU side by side: their ratio is
    the full-square count within 0.1%, and Megatron's causal count misses it by 7-11%."""
    from fastpp.model.validate_long import NEMO_SUMMARY, nemo_flops_per_token

    for name, seq, tokens, tflops in NEMO_SUMMARY:
        model = MODELS[name]
        assert nemo_flops_per_token(model, seq) * tokens / 1e12 == pytest.approx(tflops,
                                                                                 rel=1e-3)
        assert model.megatron_flops_per_token(seq) * tokens / 1e12 < 0.95 * tflops


@long_data
def test_attention_speed_is_the_fit_on_the_longest_rows():
    from fastpp.model.validate_long import ATTENTION_SPEED, calibrate, long_roles

    assert calibrate() == ATTENTION_SPEED
    assert [k[1] for k in long_roles()] == ["Llama2-7B H100-80GB 1024K cp32",
                                            "Llama3-8B B200 1024K cp16"]


@long_data
def test_long_context_mape_bounds(long):
    """The attention's speed fitted per table on its 1M row, the 15 other rows checks:
    Llama 2 7B on H100 within 5% MAPE, Llama 3 8B on B200 within 12%, the checks together
    within 10% (the issue's bound; no priced row was read from a figure)."""
    rows, _ = long
    assert np.abs(_errors(rows, "H100", "check")).mean() < 0.05
    assert np.abs(_errors(rows, "B200", "check")).mean() < 0.12
    assert len(_errors(rows, role="calibration")) == 2
    assert np.abs(_errors(rows, role="check")).mean() < 0.10


@pytest.fixture(scope="module")
def moe():
    from fastpp.model.validate_long import moe_rows

    return moe_rows()


@long_data
def test_moe_rows_are_the_forced_balance_h100_runs_and_checks(moe):
    """The ModelZoo's four Qwen3-235B runs with forced-balance routing, 16K-128K with CP 1-8,
    each in its own H100 MoE regime with its 256 GPUs; the dropless twins and the GB200 run
    excluded with their reasons; ``validate`` calls every one a check."""
    import pandas as pd

    from fastpp.model.validate import validate
    from fastpp.model.validate_long import MOE_DATASET, excluded

    assert [r[1] for r in moe] == [f"Qwen3-235B-A22B H100 {k}K cp{c} forced-balance"
                                   for k, c in ((16, 1), (32, 2), (64, 4), (128, 8))]
    assert {r[0] for r in moe} == {MOE_DATASET} and {r[2] for r in moe} == {"tflops_per_gpu"}
    assert [r[3] for r in moe] == [295.0, 335.0, 368.0, 389.0]  # the table's, as published
    for r in moe:
        assert np.isfinite(r[4]) and r[4] > 0
        assert r[5][:5] == ("H100", ">=200B", ">64K" if " 128K " in r[1] else "8K-64K",
                            "moe", "in node") and r[5].gpus == 256
    frame = validate([MOE_DATASET])
    assert set(frame["role"]) == {"check"} and len(frame) == 4
    out = excluded(pd.read_csv(LONG))
    qwen = out[out["model"].str.startswith("Qwen3")]
    assert len(qwen) == 5
    dropless = qwen[qwen["reason"].str.startswith("dropless")]
    assert dropless["seq_len"].tolist() == [16384, 32768, 65536, 131072]
    assert dropless["reason"].str.contains("imbalance").all()
    assert dropless["reason"].str.contains("not stated").all()
    (gb200,) = qwen[qwen["reason"].str.startswith("MoE run on GB200")]["gpus"]
    assert "inferred" in gb200


@long_data
def test_moe_rows_are_priced_as_validate_moe_prices_a_modelzoo_row():
    """The long-context rows take validate_moe's settings of the ModelZoo's 4K run of the
    same layout (moe_published_more.csv row 191: TP 4, PP 8, VP 4, EP 8, DeepEP, 256 H100,
    bf16, microbatch 1), but for what the long-context table and its command state: the
    sequence, batch, CP as the p2p ring, the recomputation and the forced balance (no
    --tp-comm-overlap: the script of the table's commit adds none)."""
    import pandas as pd

    from fastpp.model import validate_moe
    from fastpp.model.validate_long import MOE_COMMAND, moe_settings

    frame = pd.read_csv(LONG)
    ours = [moe_settings(r) for r in frame.to_dict("records")
            if str(r["model"]).startswith("Qwen3") and str(r["gpu_type"]).startswith("H100")
            and "forced" in str(r["note"])]
    (short,) = [validate_moe.settings(r) for r in validate_moe._rows(DATA)
                if r["label"].endswith(" row 191")]
    stated = {"seq", "global_batch", "recompute", "recompute_modules", "cp", "cp_comm",
              "tp_overlap", "imbalance"}
    assert len(ours) == 4
    for kw in ours:
        assert kw.keys() == short.keys() | stated
        # (the model but its loss: row 191 ran in May 2025, before the ModelZoo's configs
        # fused it; this table in November)
        assert {k: kw[k] for k in short if k not in stated | {"model"}} == {
            k: v for k, v in short.items() if k not in stated | {"model"}}
        assert (short["model"].loss, kw["model"]) == (
            "in-place", dataclasses.replace(short["model"], loss="fused"))
        assert (kw["recompute"], kw["recompute_modules"]) == ("selective", ["layernorm", "moe"])
        assert (kw["cp_comm"], kw["tp_overlap"], kw["overlap"]) == ("ring", False, False)
        assert MOE_COMMAND == {"overlap": False, "tp_overlap": False, "cp_comm": "ring"}
        assert kw["imbalance"] == 1.0 and kw["dispatcher"] == "flex"
        assert (kw["tp"], kw["pp"], kw["m"], kw["ep"], kw["microbatch"], kw["gpus"]) == (
            4, 8, 4, 8, 1, 256)
        assert kw["gradient_overlap"] and kw["reduce_bytes"] == 4.0 and kw["zero"] == 1
    assert [kw["cp"] for kw in ours] == [1, 2, 4, 8]


@long_data
def test_moe_long_context_errors_rise_with_the_length(moe):
    """Nothing fitted on the four rows, so their errors are a check of plan on an MoE stack
    at long context. The prediction is slow at 16K and closes on the measurement as the
    sequence grows: the errors rise with the length, none above +5%."""
    errors = np.array([r[4] / r[3] - 1 for r in moe])
    assert (errors < 0.05).all() and (np.diff(errors) > 0).all(), errors


@long_data
def test_moe_long_context_bounds(moe):
    """MAPE within 10%, the bound the NeMo long-context checks are held to
    (``test_long_context_mape_bounds``), and each row within 15%, the bound DeepSeek-V3's
    own MoE configuration is held to (docs/fidelity.md). 8.7% (16K -12.8%) since the routed
    experts make no tensor-parallel exchange, as Megatron's MoE layer makes none (11.1%
    before, 16K -16.0%: a strict xfail until 7 December 2026)."""
    errors = np.array([r[4] / r[3] - 1 for r in moe])
    assert np.abs(errors).mean() < 0.10, errors
    assert np.abs(errors).max() < 0.15, errors


def test_fp8_casts_by_hand():
    """Transformer Engine's casts in a dense fp8 layer, T = 10 tokens, t = 2 (toy model: Q
    64 wide, K and V 32 each, FFN 160 with SwiGLU), a full cast 2 + 2 x (1 + 1/32) bytes an
    element (read bf16, write fp8 row- and column-wise with their scales), the column-wise
    copy alone half of it: forward, the QKV and FC1 inputs' copies (half x 64 each), the
    output projection's full cast (x 64/2), FC2's input copy (half x 160/2); backward, the
    output gradients' full casts (x 128/2 for QKV, x 64 for the output projection and FC2;
    FC1's half x 2 x 160/2), each a kernel with its overhead; nothing in bf16."""
    from fastpp.model.compute import fp8_cast_times

    full = 2 + 2 * (1 + 1 / 32)
    half = full / 2
    hw = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=WIRE,
                  network=Link("toy-net", 100.0, 0.1), memory_bandwidth=1e6, op_overhead=0.01,
                  fp8_flops=2e6)
    forward, backward = fp8_cast_times(hw.with_precision("fp8"), MODEL, 10.0, 2.0)
    assert float(forward) == pytest.approx(10 * (half * 64 + full * 32 + half * 64 + half * 80)
                                           / 1e6 + 4 * 0.01)
    assert float(backward) == pytest.approx(10 * (full * 64 + full * 64 + half * 160
                                                  + full * 64) / 1e6 + 4 * 0.01)
    assert fp8_cast_times(hw, MODEL, 10.0, 2.0) == (0.0, 0.0)
    # per-tensor current scaling: each of the eight casts reads its input once more (2 bytes
    # an element) for the amax
    current = dataclasses.replace(hw, fp8_current_scaling=True).with_precision("fp8")
    more_f, more_b = fp8_cast_times(current, MODEL, 10.0, 2.0)
    assert float(more_f - forward) == pytest.approx(10 * 2 * (64 + 32 + 64 + 80) / 1e6)
    assert float(more_b - backward) == pytest.approx(10 * 2 * (64 + 64 + 160 + 64) / 1e6)


def test_plan_holds_the_exchange_buffers():
    """A plan row with context parallelism: its peak activations are the engine's peak plus
    one layer's exchange buffers (the ring's four blocks, the all-gather's whole K, V and
    their gradients), or on the last stage's device the loss's working set where larger, and
    a row without context parallelism holds no buffers."""
    from fastpp import build_schedule, simulate
    from fastpp.model import plan, transformer_costs
    from fastpp.model.stages import cp_buffer_bytes, loss_bytes

    model = MODELS["llama2-7b"]
    # K and V of 2 sequences of 8192 over t = 2: 2 x 2 bytes x 8192 x 2 x 4096 / 2 bytes
    kv = 2 * 2 * 8192 * 2 * 4096 / 2
    # the ring's forward keeps every block and every step's output (of 32 heads of 128 over
    # t = 2) until its merge: more than its backward's four blocks (a review)
    outputs = 2 * 8192 * 2 * 32 * 128 / 2
    assert float(cp_buffer_bytes(model, 8192, 2, 2, 4, "ring")) == pytest.approx(
        max(4 * kv / 4, kv + outputs))
    assert kv + outputs > 4 * kv / 4
    assert float(cp_buffer_bytes(model, 8192, 2, 2, 4, "all-gather")) == pytest.approx(2 * kv)
    assert float(cp_buffer_bytes(model, 8192, 2, 2, 1, "ring")) == 0.0
    # PyTorch's (torchtitan's): its K and V as the attention receives them (all heads; llama2
    # has no fewer KV heads), gathered whole or a block and the next, and in fp32 a rank's
    # dq, dk, dv accumulated and its dK, dV in flight: 4 bytes x 4096 tokens x 5 x 4096 / 2
    fp32 = 4 * 8192 * 2 / 4 * 5 * 4096 / 2
    assert float(cp_buffer_bytes(model, 8192, 2, 2, 4, "torch-allgather")) == \
        pytest.approx(kv + fp32)
    assert float(cp_buffer_bytes(model, 8192, 2, 2, 4, "torch-alltoall")) == \
        pytest.approx(2 * kv / 4 + fp32)
    for comm, framework in (("ring", "megatron"), ("all-gather", "megatron"),
                            ("torch-allgather", "torchtitan")):
        row = plan(model, 16, "H100-80GB", seq=8192, global_batch=8, tp=2, pp=2, cp=[1, 4],
                   microbatch=2, schedules=["1f1b"], recompute="none", cp_comm=comm,
                   workers=1, framework=framework)
        for c in (1, 4):
            got = row[row.cp == c].iloc[0]
            costs = transformer_costs(model, build_schedule("1f1b", 2, got.n), "H100-80GB",
                                      seq=8192, microbatch=2, tp=2, dp=got.d, cp=c,
                                      cp_comm=comm, framework=framework)
            sched = build_schedule("1f1b", 2, got.n)
            engine = simulate(sched, costs).peak_activations
            # each device's peak and one layer's exchange buffers, or on the last stage's
            # device the loss's working set (2 bytes a logit of its share) where larger
            loss = float(loss_bytes(model, 8192 * 2 / c, 2))
            buffers = float(cp_buffer_bytes(model, 8192, 2, 2, c, comm))
            assert got.activation_bytes == pytest.approx(
                max(engine[0] + buffers, engine[1] + max(buffers, loss)), rel=1e-9)


def test_price_tells_the_step_terms_where_its_groups_straddle(monkeypatch):
    """``price`` (the long-context rows') gave ``step_terms`` no ``gpus``, so its data-parallel
    groups took the old rule, inside a node wherever 8 / t >= d cp, while its stage table
    (ZeRO-3, context parallelism) took the job's: t 2, d 3, p 4 on 8-GPU nodes put ranks 6,
    8, 10 on NVLink (0.13% of the step of Llama 2 7B at 16K)."""
    from fastpp.model import validate_long

    seen = []
    original = validate_long.step_terms

    def spy(*args, **keywords):
        seen.append(keywords.get("gpus"))
        return original(*args, **keywords)

    monkeypatch.setattr(validate_long, "step_terms", spy)
    validate_long.price(MODELS["llama2-7b"], HARDWARE["H100-80GB"], seq=16384, global_batch=24,
                        t=2, p=4, cp=1, d=3, precision="bf16")
    assert seen == [2 * 1 * 3 * 4]
