"""The MoE validation set (fastpp.model.validate_moe): which published rows are priced, which
are excluded and why, how each is priced, and the error against the tables (nothing fitted on
them)."""

import numpy as np
import pandas as pd
import pytest
from helpers import needs_data

from fastpp import ScheduleError
from fastpp.model import validate_moe
from fastpp.model.validate import DATA, mape, validate

pytestmark = needs_data("moe_published.csv", "moe_published_more.csv")


@pytest.fixture(scope="module")
def split():
    done, out = validate_moe._priced(DATA)
    return done, out


def test_every_row_is_priced_or_excluded_once(split):
    done, out = split
    total = (len(pd.read_csv(DATA / "moe_published.csv"))
             + len(pd.read_csv(DATA / "moe_published_more.csv")))
    labels = [r["label"] for r, _ in done] + [r["label"] for r, _ in out]
    assert len(labels) == total == len(set(labels))
    assert all(why for _, why in out)
    assert len(done) >= 30  # the checked rows (34 today)


def test_the_exclusions_and_their_reasons(split):
    _, out = split
    why = {r["label"]: reason for r, reason in out}
    by_model = {}
    for r, reason in out:
        by_model.setdefault(str(r["model"]).split("_")[0].split(" ")[0], set()).add(reason)
    # hybrid and sliding-window models, every row of them
    assert by_model["Nemotron"] == {"model not representable: hybrid Mamba-Transformer layers"}
    assert all(x.startswith("model not representable: sliding-window") for x in
               by_model["GPT"] | by_model["GPT-OSS-20B"] | by_model["GPT-OSS-120B"])
    # token dropping, FP4, a guide without its sequence length, abstracts without a layout
    drops = [k for k in why if "tokendrop" in k]
    assert len(drops) == 8 and all("token-dropping" in why[k] for k in drops)
    assert not any(r["precision"] == "NVFP4" for r, _ in split[0])
    guide = [r for r, _ in out if str(r["release"]).startswith("MCore")]
    assert len(guide) == 13 and all(why[r["label"]] == "seq not stated" for r in guide)
    # an older release of a workload gives way to the newest one
    old = [r for r, reason in out if reason.startswith("superseded by NeMo 26.08")]
    assert any(r["model"] == "DeepSeekV3" and r["gpu_type"] == "DGX-GB300" for r in old)
    # a layout plan refuses (32 stages x 3 chunks > 94 layers)
    assert any(reason.startswith("plan refuses it: layers=94") for reason in why.values())
    table = validate_moe.excluded(DATA)
    assert list(table.columns) == ["source", "row", "reason"] and len(table) == len(out)


def test_a_row_priced_as_stated_and_assumed(split):
    """DeepSeek-V3 on 256 GB300 (NeMo 26.08): Megatron-Bridge's layout for pp 2 x vp 8, the EP
    overlap its MXFP8 config turns on, the flex dispatcher, fp8, DeepSeek's 4-node routing."""
    done, _ = split
    r = next(r for r, _ in done if r["model"] == "DeepSeekV3" and r["gpu_type"] == "DGX-GB300")
    kw = validate_moe.settings(r)
    assert (kw["hardware"], kw["tp"], kw["pp"], kw["m"], kw["ep"], kw["microbatch"]) == (
        "GB300", 1, 2, 8, 32, 1)
    assert kw["layout"] == "Et*4|(t*4|)*14tmL" and kw["schedules"] == ["combined-1f1b"]
    assert (kw["dispatcher"], kw["precision"], kw["node_limit"], kw["zero"]) == (
        "flex", "fp8", 4, 1)
    # a stated dispatcher and recompute are used as stated (the ModelZoo's Qwen3 on H100)
    r = next(r for r, _ in done if r["release"] == "moe_dev/main" and r["recompute"] == "full")
    kw = validate_moe.settings(r)
    assert (kw["recompute"], kw["overlap"], kw["zero"], kw["dispatcher"]) == (
        "full", False, 3, "flex")
    assert kw["gradient_overlap"]  # --overlap-grad-reduce, as every row's source runs
    # a recipe in a row's note (the ModelZoo's Qwen3 GB200 MXFP8 command), and Megatron-
    # Bridge's recompute modules for a NeMo 26 FP8 row (DeepSeek-V3 on GB200: mla_up_proj)
    r = next(r for r, _ in done if r["gpu_type"] == "GB200 NVL72" and r["precision"] == "mxfp8")
    kw = validate_moe.settings(r)
    assert (kw["recompute"], kw["recompute_modules"], kw["offload_modules"]) == (
        "selective", ["moe_act", "layernorm"], ["expert_fc1", "moe_act"])
    r = next(r for r, _ in done if r["model"] == "DeepSeekV3" and r["gpu_type"] == "DGX-GB200")
    kw = validate_moe.settings(r)
    assert (kw["recompute"], kw["recompute_modules"]) == ("selective", ["mla_up_proj"])
    # from NeMo 26.06 Megatron-Bridge's Qwen3 FP8-MX configs on Blackwell run the EP overlap,
    # without a pipeline too (Megatron needs interleaving only where pp > 1); not before
    r = next(r for r, _ in done if r["model"] == "Qwen3_30B_a3B" and r["gpu_type"] == "DGX-GB200")
    kw = validate_moe.settings(r)
    assert (r["release"], kw["pp"], kw["overlap"], kw["schedules"]) == (
        "NeMo 26.08", 1, True, ["combined-1f1b"])
    r = next(r for r, _ in done if r["model"] == "Qwen3_30B_a3B" and r["gpu_type"] == "DGX-B200")
    assert r["release"] == "NeMo 26.04.01" and not validate_moe.settings(r)["overlap"]
    # FP8 on H100 in the NeMo tables is Megatron-Bridge's fp8_cs (current scaling, an amax pass
    # before each cast); MXFP8's scales come out of the cast, and moe_published.csv's
    # DeepSeek-V3 row does not name its recipe
    scaled = {r["label"] for r, _ in done if validate_moe.settings(r)["fp8_current_scaling"]}
    assert scaled == {r["label"] for r, _ in done if r["gpu_type"] == "DGX-H100"
                      and str(r["precision"]).upper() == "FP8"}
    assert len(scaled) == 2
    # Fp8Padding's copies: the NeMo rows with the all-to-all dispatcher in FP8 (Megatron-
    # Bridge's Qwen3-235B recipe turns the router's padding off); HybridEP pads as it permutes
    padded = {(r["gpu_type"], r["release"]) for r, _ in done
              if validate_moe.settings(r)["fp8_padding"]}
    assert padded == {(gpu, "NeMo 26.04.01") for gpu in ("DGX-B300", "DGX-B200", "DGX-H100")}
    assert all(validate_moe.settings(r)["dispatcher"] == "alltoall" for r, _ in done
               if validate_moe.settings(r)["fp8_padding"])
    # the NeMo 25 rows ran older configs: read as stated (nothing recomputed)
    r = next(r for r, _ in done if r["release"] == "NeMo 25.11" and r["precision"] == "FP8-MX"
             and r["gpu_type"] == "DGX-GB200")
    assert validate_moe.settings(r)["recompute"] == "none"
    # Megatron's fused loss where the framework's configs set it (Megatron-Bridge's and
    # NeMo's model configs, the ModelZoo's and Megatron-Core's MoE benchmarks, but for the
    # ModelZoo's runs of May 2025, before its configs set it); NeMo AutoModel's loss is not
    # stated: Megatron's default, unfused
    losses = {(r["framework"], r["release"], validate_moe.settings(r)["model"].loss)
              for r, _ in done}
    assert {loss for framework, _, loss in losses if framework.startswith("NeMo AutoModel")} \
        == {"in-place"}
    unfused = validate_moe.UNFUSED_RELEASES
    assert {loss for framework, release, loss in losses if framework.startswith("Megatron")
            and release not in unfused} == {"fused"}
    assert {loss for _, release, loss in losses if release in unfused} == {"in-place"}


def test_moe_rows_against_the_tables():
    """No constant fitted on these rows, but each mechanism below was kept for what it did on
    them (in sample: no MoE rows are held out). The issue's target is 10% MAPE (the test below);
    9.99%: 15.9% before Megatron-Core's dispatch was priced in bf16 whatever the products'
    precision (15.1%), Megatron-Bridge's Qwen3 FP8-MX configs from NeMo 26.06 ran the EP
    overlap (13.8%), the H100 rows' current scaling had its amax pass (13.7%), the gradient
    reduction was overlapped as the sources run it (13.2%), NeMo AutoModel's pipeline flushed
    once per accumulation step (12.8%), current scaling's gradient products paid Hopper's
    split accumulator (12.6%), the Grace superchip's host link was shared by its two GPUs
    (12.1%), the full-iteration FP8-MX rows ran Transformer Engine's fused grouped MLP
    (11.7%), the output layer kept bf16's cost under FP8 recipes (10.7%) and the fused MLP's
    epilogues were priced writing the casts' FP8 copies (10.9%), the NeMo rows reduced their
    gradients in bf16 as their configs say (10.9%) and HybridEP's all-to-all inside an NVLink5
    domain took its measured rate (10.6%), NeMo AutoModel's layers were split as its
    pipelining code split them (10.5%), Megatron-Core's FP8 padding copies were priced on
    the all-to-all FP8 rows (10.2%) and the all-to-all dispatcher's sort by local expert
    (9.99%); then ZeRO-3 sharded the routed experts over their own replicas as FSDP does,
    Megatron-FSDP's per-microbatch gathers of them taking the ModelZoo's FSDP row from
    -12.5% to -19.1% (10.18%), and NeMo AutoModel's pipelined FSDP reduced its gradients
    once a flush after the last backward, exposed (9.96%); 16.5% before
    H100's curve was refit, 26.4% before the FP8 casts, the rows' recompute modules and
    B300's and GB300's attention kernel. The worst rows are still Qwen3-235B on B200 at
    microbatch 1 without CUDA graphs (+40%) and Qwen3-30B-A3B in FP8 on H100 (+36%)
    (docs/moe.md). The bound guards against regressions; the per-row errors are in
    docs/fidelity-rows.md."""
    frame = validate([validate_moe.DATASET])
    got = mape(frame)[validate_moe.DATASET]
    print(f"MoE rows: {len(frame)} priced, MAPE {got:.1f}% (in sample)")
    assert (frame["role"] == "calibration").all()  # in sample: never a check
    assert np.isfinite(frame["predicted"]).all()
    # the regression bound: 11.14% measured since the routed experts pay no tensor-parallel
    # exchange, as Megatron's MoE layer makes none (11.02% before; each earlier step in
    # docs/moe.md's table of mechanisms)
    assert got < 11.2
    # the three rows of moe_published.csv: Qwen3-235B's two within 10%, DeepSeek-V3's 15%
    first = frame[~frame["row"].str.contains("row ")].set_index("row")["error"].abs()
    assert len(first) == 3 and (first[first.index.str.startswith("Qwen3")] < 0.10).all()
    assert first[first.index.str.startswith("DeepSeek")].max() < 0.15


@pytest.mark.xfail(strict=True, reason="11.14% MAPE: NeMo AutoModel's rows priced as their "
                   "benchmark ran (full recomputation, no MTP, one node) leave Qwen3-30B-A3B "
                   "at -27% and DeepSeek-V3 on 1,024 GPUs at +21%; H100's curve prices an "
                   "expert's thin products (F_e = 768) slow; Qwen3-235B on B200 and "
                   "Qwen3-30B in FP8 on H100 at +41% and +38% (docs/moe.md)")
def test_moe_rows_within_the_target():
    """The issue's target, 10% MAPE over the 34 rows (docs/moe.md)."""
    frame = validate([validate_moe.DATASET])
    assert mape(frame)[validate_moe.DATASET] <= 10.0


def test_the_residuals_by_group(split):
    """The groups the residuals are read by (docs/moe.md), and the table of one group: every
    checked row counted once, and the groups' MAPEs weighted by their rows give the whole
    MAPE."""
    done, _ = split
    r = next(r for r, _ in done if r["model"] == "Qwen3_235B_a22B"
             and r["gpu_type"] == "DGX-B200")
    assert validate_moe.groups(r) == {
        "hardware": "B200-180GB", "precision": "MXFP8", "dispatcher": "alltoall",
        "microbatch": 1, "cuda_graphs": "none", "release": "NeMo 26.04.01"}
    zoo = [validate_moe.groups(r)["cuda_graphs"] for r, _ in done
           if r["release"].startswith("ModelZoo")]
    assert sorted(zoo) == ["not stated", "partial", "unstated scope"]  # the three rows' notes
    first = next(r for r, _ in done if r["source"] == "moe_published.csv")
    assert validate_moe.groups(first)["release"] == "moe_published.csv"
    frame = pd.DataFrame({"dataset": validate_moe.DATASET, "row": [r["label"] for r, _ in done],
                          "error": [v / r["value"] - 1.0 for r, v in done]})
    for group in validate_moe.GROUPS:
        table = validate_moe.by_group(frame, DATA, group)
        assert table["rows"].sum() == len(done)
        whole = 100.0 * frame["error"].abs().mean()
        assert abs((table["rows"] * table["mape"]).sum() / len(done) - whole) < 0.1
    with pytest.raises(ScheduleError, match="group must be one of"):
        validate_moe.by_group(frame, DATA, "gpu")


# Settings pinned from Megatron-Bridge's configs, independent of validate_moe's tables: per
# row, (cuda_graph_impl, cuda_graph_scope, whether the fused grouped MLP is on); impl None
# where the config sets none (the recipes' default, "none"). NeMo 26.04.01: the 26.04-alpha.rc2
# tag's scripts/performance/configs/{qwen/qwen3,deepseek/deepseek}_workload_base_configs.py;
# 26.06: v0.5.0's; 26.08: v0.6.0's src/megatron/bridge/perf_recipes/.
PINNED = {
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_{B200,H100}_* set no cuda_graph_impl
    ("Qwen3_235B_a22B", "DGX-B200", "NeMo 26.04.01"): (None, None, False),
    ("Qwen3_235B_a22B", "DGX-H100", "NeMo 26.04.01"): (None, None, False),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1 = its BF16_V1
    ("Qwen3_30B_a3B", "DGX-B200", "NeMo 26.04.01"):
        ("transformer_engine", ("attn", "moe_router", "moe_preprocess"), False),
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 (commit 5acef93)
    ("DeepSeekV3", "DGX-B200", "NeMo 26.04.01"):
        ("transformer_engine", ("attn", "moe_router", "moe_preprocess"), False),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 sets none
    ("Qwen3_30B_a3B", "DGX-H100", "NeMo 26.06"): (None, None, False),
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1: cuda_graph_scope=[],
    # cutedsl_fused_grouped_mlp=True
    ("Qwen3_30B_a3B", "DGX-B300", "NeMo 26.06"): ("full_iteration", (), True),
    # deepseek/gb300/deepseek_v3.py's deepseek_v3_pretrain_256gpu_gb300_fp8mx_config:
    # _enable_deepseek_full_iteration_mxfp8, env NVTE_CUTEDSL_FUSED_GROUPED_MLP=1
    ("DeepSeekV3", "DGX-GB300", "NeMo 26.08"): ("full_iteration", (), True),
    # qwen/gb200/qwen3_moe.py's qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config:
    # _enable_hybridep_full_iteration_mxfp8, env NVTE_CUTEDSL_FUSED_GROUPED_MLP=1
    ("Qwen3_235B_a22B", "DGX-GB200", "NeMo 26.08"): ("full_iteration", (), True),
}


def test_the_cuda_graphs_each_nemo_row_ran(split):
    """``GRAPHS`` and ``FUSED_GROUPED_MLP`` against the configs' own settings (``PINNED``),
    classed here: no impl is "none", Transformer Engine's graphs of parts of the layer are
    "partial" (the routed experts and their dispatch stay eager), full_iteration is "full".
    Every NeMo 26 row is found in the tables."""
    done, _ = split
    nemo = [r for r, _ in done if r["release"].startswith("NeMo")]
    graphs = {r["label"]: validate_moe.cuda_graphs(r) for r in nemo}
    # every NeMo 26 row found; the NeMo 25.11 rows' layouts are in no config of the time
    assert len(graphs) == 21 and {r["label"] for r in nemo if graphs[r["label"]] == "not stated"
                                  } == {r["label"] for r in nemo if r["release"] == "NeMo 25.11"}
    row = {(r["model"], r["gpu_type"], r["release"]): r for r in nemo}
    kind = {None: "none", "transformer_engine": "partial", "full_iteration": "full"}
    for key, (impl, _, fused) in PINNED.items():
        assert validate_moe.cuda_graphs(row[key]) == kind[impl], key
        assert validate_moe.settings(row[key])["fused_grouped_mlp"] == fused, key
    fused = {key for key, r in row.items() if validate_moe.settings(r)["fused_grouped_mlp"]}
    # the two lists are written separately: every fused row runs full-iteration graphs
    assert len(fused) == 7 and all(validate_moe.cuda_graphs(row[key]) == "full" for key in fused)
    assert not any(release.startswith("NeMo 26.04") for _, _, release in fused)
    # the output layer in MXFP8: v0.6.0's DeepSeek-V3 fp8mx recipes (fp8_output_proj=True)
    output = {key for key, r in row.items() if validate_moe.settings(r)["fp8_output_layer"]}
    assert output == {("DeepSeekV3", gpu, "NeMo 26.08") for gpu in ("DGX-GB300", "DGX-GB200")}


def test_automodel_splits_its_layers_as_its_pipelining_code(split):
    """NeMo AutoModel's DeepSeek-V3 on 256 H100 (PP 4, VP 8): 32 stages for 61 layers, 61 //
    32 = 1 each and the first 61 % 32 = 29 one more, the embedding on the first and the
    output layer on the last (no MTP layer: AutoModel's DeepSeek-V3 builds none); Megatron's
    rows keep theirs."""
    done, _ = split
    r = next(r for r, _ in done if r["framework"].startswith("NeMo AutoModel")
             and r["gpus"] == 256 and r["model"].startswith("DeepSeek"))
    stages = validate_moe.settings(r)["layout"].split("|")
    assert len(stages) == 32 and stages[0] == "Ett" and stages[-1] == "tL"
    assert [s.count("t") for s in stages] == [2] * 29 + [1] * 3
    small = next(r for r, _ in done if r["framework"].startswith("NeMo AutoModel")
                 and r["gpus"] == 8)
    assert validate_moe.settings(small)["layout"] is None  # one stage, nothing to split
    nemo = next(r for r, _ in done if r["model"] == "DeepSeekV3" and r["gpu_type"] == "DGX-GB300")
    assert validate_moe.settings(nemo)["layout"] == "Et*4|(t*4|)*14tmL"


def test_automodel_runs_a_pipeline_flush_per_accumulation_step(split):
    """NeMo AutoModel's benchmark runs ``global_batch / (local_batch * dp)`` pipeline schedules
    a step, each over its local batch (here 8 microbatches); Megatron's ``grad_accum`` is the
    microbatches of its one schedule. The step is the flushes' pipelines, each with its FSDP
    reduce-scatter, and one optimizer step."""
    from fastpp.model import plan
    from fastpp.model.hardware import HARDWARE

    done, _ = split
    big = next(r for r, _ in done if r["framework"].startswith("NeMo AutoModel")
               and r["gpus"] == 1024)
    kw = validate_moe.settings(big)
    assert kw["flushes"] == 4 and kw["global_batch"] // 4 // (1024 // kw["pp"]) == 8
    assert all(validate_moe.settings(r)["flushes"] == 1 for r, _ in done
               if "AutoModel" not in r["framework"])
    for key in ("fp8_current_scaling", "fused_grouped_mlp", "fp8_output_layer", "fp8_padding",
                "flushes", "gpus_per_node"):  # (an H100 row's: its preset's 8)
        kw.pop(key)
    args = (kw.pop("model"), kw.pop("gpus"), HARDWARE[kw.pop("hardware")])
    one = plan(*args, workers=1, **{**kw, "global_batch": kw["global_batch"] // 4}).iloc[0]
    step = 4 * (one["step_time"] - one["optimizer_step"]) + one["optimizer_step"]
    flops = kw["global_batch"] * kw["seq"] * args[0].megatron_flops_per_token(kw["seq"])
    got, why = validate_moe.predict(big)
    assert not why and got == pytest.approx(flops / step / args[1] / 1e12, rel=1e-9)
    # one long schedule over all 32 microbatches would hide more of the pipeline's bubble
    whole = plan(*args, workers=1, **kw).iloc[0]
    assert got < 0.99 * whole["tflops_per_gpu"]


def test_a_megatron_core_v09_row_counts_the_full_square(split):
    """The MoE README's Mixtral 8x7B row (468 TFLOP/s "as of MCore v0.9", 21 November 2024)
    is in the count of core_r0.9.0's training.py, num_floating_point_operations: ``12 s L h^2
    ((1 + g/a + s/h) a d/h + k F/h 3/2 + v/2Lh)``, the core the full square (``s/h``, halved
    only from core_r0.12.0). Its prediction is plan's step in that count, 4.0% over the
    halved count plan reports."""
    from fastpp.model import plan
    from fastpp.model.hardware import HARDWARE

    done, _ = split
    r = next(r for r, _ in done if r["model"] == "Mixtral-8x7B (dropless)")
    kw = validate_moe.settings(r)
    for key in ("fp8_current_scaling", "fused_grouped_mlp", "fp8_output_layer", "fp8_padding",
                "flushes", "gpus_per_node"):  # (an H100 row's: its preset's 8)
        kw.pop(key)
    m, s = kw["model"], kw["seq"]
    a, g, h, L = m.heads, m.kv_heads, m.hidden, m.layers
    v09 = 12 * s * L * h * h * ((1 + g / a + s / h) * a * m.head_dim / h
                                + m.top_k * m.expert_ffn / h * 3 / 2 + m.vocab / (2 * L * h))
    assert v09 / s / m.megatron_flops_per_token(s) == pytest.approx(1.0404, abs=1e-4)
    one = plan(kw.pop("model"), kw.pop("gpus"), HARDWARE[kw.pop("hardware")], workers=1,
               **kw).iloc[0]
    got, why = validate_moe.predict(r)
    assert not why and got == pytest.approx(
        one["tflops_per_gpu"] * v09 / s / m.megatron_flops_per_token(s), rel=1e-9)


def test_automodel_rows_are_priced_as_its_benchmark_ran(split):
    """NeMo AutoModel's benchmark configs (examples/benchmark/configs/*_te_deepep.yaml at
    ce005dd) set activation_checkpointing (every block checkpointed whole) and
    fake_balanced_gate (token i to the k consecutive experts from k i: one node), and its
    DeepSeek-V3 has no MTP module; they had been priced without recomputation, with MTP and
    DeepSeek-V3's 4 nodes. Megatron's rows keep their own."""
    done, _ = split
    auto = [validate_moe.settings(r) for r, _ in done
            if r["framework"].startswith("NeMo AutoModel")]
    assert len(auto) == 4
    assert {(s["recompute"], s["node_limit"]) for s in auto} == {("full", 1)}
    assert {s["model"].name for s in auto} == {"deepseek-v3/no-mtp", "kimi-k2",
                                               "qwen3-30b-a3b"}
    assert all(s["model"].mtp_depth == 0 for s in auto)
    megatron = [validate_moe.settings(r) for r, _ in done if r["model"] == "DeepSeekV3"]
    assert {s["node_limit"] for s in megatron} == {4}


def test_a_nemo_row_on_gb200_fills_the_nvlink_domains_bridges_launcher_asks_for(split):
    """Megatron-Bridge's launcher (scripts/performance/utils/executors.py) asks Slurm for
    segments of all of a GB200 or GB300 job's 4-GPU trays up to 18, else of the largest
    divisor of them up to 18: 256 GPUs (64 trays) fill 64 GPUs of each 72-GPU domain, so an
    expert group of 64 stays in one and a data-parallel group of 32 straddles none. The
    ModelZoo's Qwen3-235B commands set theirs (SEGMENT, in trays): 2 for the GB200 bf16 run,
    16 for the MXFP8 ones."""
    assert [validate_moe.bridge_domain(g) for g in (4, 8, 64, 72, 76, 128, 256, 288, 1024)] == [
        4, 8, 64, 72, 4, 64, 64, 72, 64]  # 76: 19 trays, a prime past 18: one a segment
    done, _ = split
    nemo = next(r for r, _ in done if r["model"] == "DeepSeekV3" and r["gpu_type"] == "DGX-GB200")
    assert validate_moe.settings(nemo)["gpus_per_node"] == 64
    zoo = {(r["gpu_type"], r["precision"]): validate_moe.settings(r)["gpus_per_node"]
           for r, _ in done if r["release"] == "ModelZoo e865051" and "NVL72" in r["gpu_type"]}
    assert zoo == {("GB200 NVL72", "bf16"): 8, ("GB200 NVL72", "mxfp8"): 64,
                   ("GB300 NVL72", "mxfp8"): 64}
    h100 = next(r for r, _ in done if r["gpu_type"] == "DGX-H100")
    assert validate_moe.settings(h100)["gpus_per_node"] == 8
