"""Published MoE training throughput against fastpp: ``moe_published.csv`` and
``moe_published_more.csv`` (Megatron-Bridge's performance tables, NeMo 25.09-26.08; the
Megatron-MoE ModelZoo; Megatron-Core's MoE README and its DeepSeek-V3 GB200 guide; NeMo
AutoModel).

Each row is priced by ``fastpp.model.plan`` with its own layout (GPUs, ``t``, ``p``, ``vp``,
``ep``, ``etp``, microbatch, global batch, sequence, precision) and reported as Megatron's
TFLOP/s a GPU (``tflops_per_gpu``) against the table's. No constant is fitted on these rows:
the hardware curves are the dense tables' (H100's; Blackwell's assumed equal to it,
``fastpp.model.hardware``). But each mechanism priced below was kept for what it did on them
(docs/moe.md), so the rows are in sample: ``validate`` gives them the role "calibration",
and the MoE error bars borrow from the checked regimes nearby (``fastpp.model.errorbar``).

Where a row is silent, these settings are assumed (``ASSUMED``): the dispatcher is DeepEP's
or HybridEP's flex dispatcher (Megatron-Bridge's performance configs set
``moe_flex_dispatcher_backend`` for most MoE workloads, the ModelZoo's Qwen3 H100 script
``DISPATCHER=deepep``; a stated dispatcher is used as stated, and for the NeMo tables what
Megatron-Bridge's config for the workload sets, ``BRIDGE``); no recomputation unless the row,
its note (``NOTES``) or, for a NeMo 26 FP8 row, Megatron-Bridge's config states it;
the EP overlap (``combined-1f1b``) where the table's notes or ``BRIDGE`` turn it on;
DeepSeek-V3's routing to at most 4 nodes (its router's 4 of 8 groups); force-balanced routing
(``imbalance=1``, every table's footnote); ZeRO-1 (the distributed optimizer), or ZeRO-3 where
the row runs FSDP (NeMo AutoModel's FSDP2, the ModelZoo's Megatron-FSDP); MXFP8, FP8-CS and
FP8 as ``fp8``; a GB200 or GB300 "node" of the ModelZoo is a 4-GPU compute tray; the
gradient reduction and ZeRO's parameter gather overlapped (``gradient_overlap``: Megatron's
``--overlap-grad-reduce --overlap-param-gather``, which Megatron-Bridge's
``_pretrain_common`` sets for every pretraining recipe and the ModelZoo's benchmarking
configs pass; FSDP overlaps them by design); the gradients reduced in fp32 (Megatron's
default with bf16), or in bf16 where a NeMo row's Megatron-Bridge config says so
(``BF16_REDUCTION``).

Rows that cannot be priced are listed by ``excluded()`` with the reason: the models fastpp
cannot represent (hybrid Mamba, linear-attention or sliding-window layers), token-dropping
runs, NVFP4, rows without a layout or a throughput, and older releases of a configuration a
later release re-measured (the software's own gains between releases are not in the model:
the newest figure is the one checked).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ..checks import ScheduleError, one_of, require
from .errorbar import regime
from .hardware import HARDWARE
from .presets import MODELS

DATASET = "moe_published"

MODEL_NAMES = {
    "DeepSeekV3": "deepseek-v3", "DeepSeek-V3": "deepseek-v3", "DeepSeek-V3 671B": "deepseek-v3",
    "DeepSeekV3 (w/ MTP)": "deepseek-v3", "DeepSeekV3 (w/o MTP)": "deepseek-v3/no-mtp",
    "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3-MoE-30B": "qwen3-30b-a3b",
    "Qwen3_235B_a22B": "qwen3-235b-a22b", "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "Kimi_K2": "kimi-k2", "Kimi K2": "kimi-k2", "Mixtral-8x7B (dropless)": "mixtral-8x7b",
}
UNREPRESENTABLE = {
    "GPT OSS": "sliding-window attention in half the layers and attention sinks",
    "GPT-OSS": "sliding-window attention in half the layers and attention sinks",
    "Nemotron": "hybrid Mamba-Transformer layers",
    "Qwen3-Next": "gated DeltaNet linear-attention layers",
    "DeepSeekV4": "its architecture is in no preset (not published beside the table)",
}
HARDWARE_NAMES = {
    "DGX-GB300": "GB300", "GB300 NVL72": "GB300", "DGX-GB200": "GB200", "GB200 NVL72": "GB200",
    "DGX-B300": "B300-288GB", "DGX-B200": "B200-180GB", "DGX-H100": "H100-80GB",
    "H100 (IB 8x50 GB/s)": "H100-80GB", "H100-80GB": "H100-80GB",
    "H100-80GB (8/node, NVLink4, IB 8x400Gb/s)": "H100-80GB",
}
PRECISION = {"mxfp8": "fp8", "fp8-mx": "fp8", "fp8-cs": "fp8", "fp8": "fp8", "bf16": "bf16"}
DISPATCHER = {"a2a": "alltoall", "alltoall": "alltoall", "all-to-all": "alltoall",
              "deepep": "flex", "hybridep": "flex", "te + deepep": "flex"}
RECOMPUTE = {"full": ("full", None), "none listed": ("none", None),
             "norm, act": ("selective", ["layernorm", "moe_act"]),
             "norm, act, shared_expert": ("selective", ["layernorm", "moe_act",
                                                        "shared_experts"]),
             "mlp moe_act": ("selective", ["mlp", "moe_act"]),
             "mlp up_proj": ("selective", ["mlp", "mla_up_proj"])}
# What Megatron-Bridge's performance configs set for the NeMo tables' workloads, where it
# differs from the defaults above: scripts/performance/configs/deepseek/
# deepseek_workload_base_configs.py (commit 0426418: the FP8 DeepSeek-V3 workloads on GB300,
# GB200, B300 and B200 run moe_a2a_overlap=True; the pp_layouts below) and configs/qwen/
# qwen3_workload_base_configs.py (commit 01b2977: Qwen3-235B on B300 and B200 with the
# all-to-all dispatcher, on H100 with it and moe_a2a_overlap=True). Their recompute_modules
# (commit 0426418 for DeepSeek-V3's MXFP8 workloads, kimi_workload_base_configs.py at
# 013180a for Kimi K2's GB300 one) are read for the NeMo 26 releases' FP8 rows, those the
# configs ran; the NeMo 25 rows ran older configs and are read without. From NeMo 26.06
# (``since``) the Qwen3 FP8-MX configs on Blackwell run moe_a2a_overlap=True with
# full-iteration CUDA graphs, the CuTe DSL fused grouped MLP and FP8 attention (commits
# 06117fd, 98c1e00 and b654301 of 9 June 2026, "Enable Qwen3 ... FP8-MX full-iter CG fusion";
# v0.5.1's qwen3_workload_base_configs.py): Qwen3-30B-A3B on GB300, GB200, B300 and B200,
# Qwen3-235B-A22B at 256 GPUs on GB300 and GB200 (and B200, whose rows predate it)
SINCE_26_06 = {"overlap": True, "since": (26, 6)}
BRIDGE = {("deepseek-v3", "GB300"): {"overlap": True},
          ("deepseek-v3", "GB200"): {"overlap": True, "modules": ["mla_up_proj"]},
          ("deepseek-v3", "B300-288GB"): {"overlap": True, "modules": ["mla_up_proj"]},
          ("deepseek-v3", "B200-180GB"): {"overlap": True, "modules": ["mla_up_proj", "mlp"]},
          ("kimi-k2", "GB300"): {"modules": ["mla_up_proj"]},
          ("qwen3-235b-a22b", "B300-288GB"): {"dispatcher": "alltoall"},
          ("qwen3-235b-a22b", "B200-180GB"): {"dispatcher": "alltoall"},
          ("qwen3-235b-a22b", "H100-80GB"): {"dispatcher": "alltoall", "overlap": True},
          ("qwen3-235b-a22b", "GB300"): SINCE_26_06, ("qwen3-235b-a22b", "GB200"): SINCE_26_06,
          **{("qwen3-30b-a3b", hw): SINCE_26_06 for hw in ("GB300", "GB200", "B300-288GB",
                                                          "B200-180GB")}}
# the GPUs of one NVLink domain a NeMo row's job filled on GB200 and GB300 (4-GPU trays in
# 72-GPU domains): Megatron-Bridge's launcher (scripts/performance/utils/executors.py, since
# 568b3a3, 28 August 2025) asks Slurm for segments of every tray if the job has at most 18,
# else of the largest divisor of its trays up to 18 (256 GPUs: 64 trays in segments of 16,
# 64 GPUs a domain). The ModelZoo's commands set the segment per run ("Should be EP // 4"),
# sbatch_benchmarking.sh passing it as --segment: its Qwen3-235B GB200 and GB300 rows at
# e865051 (best_practice/qwen3/readme.md), (model, gpu_type, precision, release) -> trays a
# segment
TRAY, TRAYS_PER_DOMAIN = 4, 18
MODELZOO_SEGMENTS = {("Qwen3-235B-A22B", gpu, precision, "ModelZoo e865051"): trays
                     for gpu, precision, trays in (("GB200 NVL72", "bf16", 2),
                                                   ("GB200 NVL72", "mxfp8", 16),
                                                   ("GB300 NVL72", "mxfp8", 16))}


def bridge_domain(gpus: int) -> int:
    """GPUs per NVLink domain of a Megatron-Bridge job of ``gpus`` GB200 or GB300 GPUs."""
    trays = max(gpus // TRAY, 1)
    return TRAY * next(c for c in range(min(trays, TRAYS_PER_DOMAIN), 0, -1) if trays % c == 0)


# The CUDA graphs each NeMo row ran, as Megatron-Bridge's performance configs for its release
# set cuda_graph_impl and cuda_graph_scope: "none" (every kernel issued by the CPU; the
# recipes' default, cuda_graph_impl="none"), "partial" (Transformer Engine's graphs of
# attn, moe_router and moe_preprocess, or the last two: the routed experts and their
# dispatch stay eager) or "full" (full_iteration). NeMo 26.04.01 is read from the 26.04
# release branch (26.04-alpha; its tags 26.04-alpha.rc1 and rc2 hold the same configs) and
# 26.06 from v0.5.0, configs/{deepseek,qwen,kimi}/*_workload_base_configs.py; 26.08 from
# v0.6.0's perf_recipes/deepseek/{gb200,gb300}/deepseek_v3.py
# (_enable_deepseek_full_iteration_mxfp8) and the Qwen3 FP8-MX configs of SINCE_26_06. Read
# for the priced rows' precisions and layouts: DeepSeek-V3's B200 row of 26.04.01 ran PP8
# VP2 EP32, the layout of commit 5acef93 of 18 April 2026 ("b200 DSv3 better cfg"), which
# graphs attn, moe_router and moe_preprocess; the release branch and its rc tags hold it, the
# v0.4.x tags do not (v0.4.1 still has PP16 EP8, without graphs), and the branch's Qwen3 and
# Kimi configs differ from v0.4.1's only by VR200 entries. The NeMo 25.11
# rows' layouts (DeepSeek-V3 PP2 VP4 EP32 and PP4/PP8 VP4, Qwen3-235B PP4 VP12 EP16) are in
# none of the configs read (the v0.2.x tags; DeepSeek-V3's on main to February 2026): their
# graphs are not stated.
GRAPHS = {("deepseek-v3", "B200-180GB", "NeMo 26.04"): "partial",
          ("qwen3-235b-a22b", "B200-180GB", "NeMo 26.04"): "none",
          ("qwen3-235b-a22b", "B300-288GB", "NeMo 26.04"): "none",
          ("qwen3-235b-a22b", "H100-80GB", "NeMo 26.04"): "none",
          ("qwen3-30b-a3b", "B200-180GB", "NeMo 26.04"): "partial",
          ("deepseek-v3", "B300-288GB", "NeMo 26.06"): "partial",
          ("kimi-k2", "GB300", "NeMo 26.06"): "none",
          ("qwen3-30b-a3b", "H100-80GB", "NeMo 26.06"): "none",
          ("qwen3-30b-a3b", "B300-288GB", "NeMo 26.06"): "full",
          **{(model, hw, "NeMo 26.08"): "full" for model in ("deepseek-v3", "qwen3-30b-a3b",
                                                             "qwen3-235b-a22b")
             for hw in ("GB300", "GB200")}}
# The NeMo rows whose configs run the routed experts through Transformer Engine's fused
# grouped MLP (``Hardware.fused_grouped_mlp``), each with the setting that turns it on.
# NeMo 26.06 is v0.5.0's configs/qwen/qwen3_workload_base_configs.py, whose
# cutedsl_fused_grouped_mlp=True sets use_transformer_engine_op_fuser (QWEN3_30B_A3B_
# PRETRAIN_CONFIG_B300_FP8_MX_V1; DeepSeek-V3's B300 config does not set it). NeMo 26.08 is
# v0.6.0's perf_recipes, whose env_vars set NVTE_CUTEDSL_FUSED_GROUPED_MLP=1:
# deepseek/{gb300,gb200}/deepseek_v3.py's deepseek_v3_pretrain_256gpu_*_fp8mx_config and
# qwen/{gb300,gb200}/qwen3_moe.py's qwen3_30b_a3b_pretrain_8gpu_*_fp8mx_config and
# qwen3_235b_a22b_pretrain_256gpu_*_fp8mx_config. No NeMo 26.04 config sets either.
FUSED_GROUPED_MLP = {("qwen3-30b-a3b", "B300-288GB", "NeMo 26.06"),  # cutedsl_fused_grouped_mlp
                     *((model, hw, "NeMo 26.08")  # NVTE_CUTEDSL_FUSED_GROUPED_MLP=1
                       for model in ("deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b")
                       for hw in ("GB300", "GB200"))}
# The NeMo rows whose configs run the output layer in MXFP8 (``Hardware.fp8_output_layer``):
# DeepSeek-V3's fp8mx recipes on GB300 and GB200 in v0.6.0 (_enable_deepseek_full_iteration_
# mxfp8(cfg, fp8_output_proj=True)); the other priced rows' configs leave it in bf16.
FP8_OUTPUT_LAYER = {("deepseek-v3", hw, "NeMo 26.08") for hw in ("GB300", "GB200")}
# The NeMo rows whose configs reduce the gradients in bf16 (``plan``'s ``reduce_bytes=2``),
# not in fp32 as bf16_mixed() sets grad_reduce_in_fp32=True by default: NeMo 26.04.01 and
# 26.06 (the 26.04-alpha branch and v0.5.0, scripts/performance/configs/{deepseek,kimi,qwen}/
# *_llm_pretrain.py: set_{deepseek_v3,kimi_k2,qwen3}_common_configs set
# cfg.mixed_precision.grad_reduce_in_fp32 = cfg.ddp.grad_reduce_in_fp32 = False), NeMo 26.08
# (v0.6.0, perf_recipes/_common.py: _benchmark_common and _perf_precision set it False for
# every recipe; Kimi K2's sets it back, but no 26.08 Kimi row is priced) and DeepSeek-V3 in
# NeMo 25.11 (v0.2.0 and v0.2.2, configs/deepseek/deepseek_llm_pretrain.py lines 40-41;
# their configs/qwen3/qwen3_llm_pretrain.py leaves Qwen3's in fp32). The other sources keep
# Megatron's fp32 reduction (the ModelZoo passes no --grad-reduce-in-bf16).
BF16_REDUCTION = {"NeMo 26": ("deepseek-v3", "kimi-k2", "qwen3-30b-a3b", "qwen3-235b-a22b"),
                  "NeMo 25": ("deepseek-v3", "deepseek-v3/no-mtp")}
# The rows whose routed experts are padded for FP8 by copies of their own
# (``Hardware.fp8_padding``): the NeMo rows with the all-to-all dispatcher under an FP8 recipe.
# Megatron-Bridge's recipe turns the router's padding off (the 26.04 release branch's
# src/megatron/bridge/recipes/qwen/qwen3_moe.py, qwen3_235b_a22b_pretrain_config:
# moe_router_padding_for_fp8 = False, the alias of moe_router_padding_for_quantization), so
# Megatron-Core's TEGroupedMLP.forward pads each local expert's tokens with Transformer
# Engine's Fp8Padding and strips the padding after with Fp8Unpadding (Megatron-LM at
# ebfa13852f, 14 April 2026: experts.py lines 345-352; token_dispatcher.py line 622 pads the
# all-to-all dispatcher's routing map only with the router padding on;
# transformer_engine/pytorch/module/fp8_padding.py: a copy unless every count is already
# aligned). The flex rows' HybridEP pads as it permutes under any FP8 recipe
# (token_dispatcher.py line 1066: pad_multiple = get_align_size_for_quantization; the
# DeepSeek-V3 GB200 guide, section 2.5), so their Fp8Padding finds the counts aligned; the
# ModelZoo's FP8 commands pass --moe-router-padding-for-fp8 or
# --moe-router-padding-for-quantization.
FP8_PADDING_DISPATCHERS = ("alltoall",)
# what a row's note says of its recipe (the ModelZoo's Qwen3 GB200 MXFP8 command:
# --recompute-modules moe_act layernorm --offload-modules expert_fc1 moe_act)
NOTES = {"recompute moe_act layernorm": {"modules": ["moe_act", "layernorm"]},
         "activation offloading required": {"offload": ["expert_fc1", "moe_act"]}}
# The rows whose FP8 casts run Transformer Engine's per-tensor current scaling (an amax pass
# before each cast, ``Hardware.fp8_current_scaling``): "FP8-CS" as the table names it, and
# the NeMo tables' plain "FP8", which only their H100 rows carry and Megatron-Bridge's H100
# configs run as fp8_cs (perf_recipes/qwen/h100/qwen3_moe.py at 067f987:
# qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs_config, qwen3_235b_a22b_..._h100_fp8cs_config)
CURRENT_SCALING = ("fp8-cs",)
LAYOUTS = {("deepseek-v3", 2, 8): "Et*4|(t*4|)*14tmL", ("deepseek-v3", 8, 2): "Et*4|(t*4|)*14tmL",
           ("deepseek-v3", 8, 4): "Et|(tt|)*30mL"}
# NeMo AutoModel's split of the layers over its p vp stages, as its pipelining code stood when
# the table was measured (NVIDIA-NeMo/Automodel at ce005dd, 6 October 2025, the commit that
# added the table; the "+ 1" left on 12 November, b3c51c3): nemo_automodel/components/
# distributed/pipelining/functional.py, calculate_virtual_stages (ceil(layers /
# layers_per_stage) + 1 stages, rounded down to a multiple of p: 32 for 61 layers at the
# configs' layers_per_stage 2, the table's VP 8 at PP 4 and 4 at PP 8) and
# generate_hf_model_fqn_per_model_part (layers // stages each, the first layers % stages
# one more; the embedding on the first stage, the norm and lm_head on the last). The
# 1,024-GPU config with layers_per_stage 4 (deepseek_v3_te_deepep_1024.yaml) came two days
# after the table (bdb4dbc, 8 October), so its VP 8 is kept. Its DeepSeek-V3 has no MTP layer
# (AUTOMODEL_RUN).
AUTOMODEL = "NeMo AutoModel"
# NeMo AutoModel's benchmark as its table ran it (examples/benchmark/configs/*_te_deepep.yaml
# and nemo_automodel/components at ce005dd, 6 October 2025, the commit that added the table):
# activation_checkpointing: true, whose apply_ac wraps every block whole in PyTorch's
# checkpoint_wrapper (full recomputation); DeepSeek-V3 without its MTP module
# (DeepseekV3Model builds num_hidden_layers blocks); and fake_balanced_gate: true, whose
# FakeBalancedGate sends token i to the k consecutive experts from k i, on the EP ranks'
# consecutive GPUs: one node (node_limit=1). Priced otherwise until 7 December 2026 (no
# recomputation, MTP, DeepSeek-V3's 4 nodes), where the errors had partly cancelled
AUTOMODEL_RUN = {"recompute": "full", "node_limit": 1}
# Megatron's fused loss (Transformer.loss "fused", --cross-entropy-loss-fusion) where the
# framework's configs set it: Megatron-Bridge's and NeMo's model configs (cross_entropy_loss_
# fusion=True), the Megatron-MoE ModelZoo's benchmark configs (model_configs/benchmarking/*.yaml
# since 274316a, 20 August 2025: --cross-entropy-loss-fusion). Assumed for the other
# Megatron-Core rows (moe_published.csv's three, the MoE README's Mixtral row, the
# optimization guide's): the same team's MoE benchmarks, their configs not in the sources read.
# Not for the ModelZoo's rows of May 2025 (release "moe_dev/main", UNFUSED_RELEASES: their
# table came in 8017e11, 27 May 2025, when Qwen3-235B-A22B.yaml set no loss fusion). NeMo
# AutoModel's rows (PyTorch's FSDP2, their loss not stated) take Megatron's default, the
# unfused one
FUSED_LOSS = ("Megatron-Bridge", "Megatron-Core")
# Megatron-LM's releases whose TFLOP/s count the attention core as the full square: it is
# halved from core_r0.12.0 (8873b55, 6 March 2025, "Only half of the attention matrix is
# non-zero"); core_r0.9.0's training.py still adds ``seq_length / hidden_size`` (line 132).
# The MoE README's Mixtral row (468 TFLOP/s "as of MCore v0.9", c230e0d, 21 November 2024)
# is reported in that count, 4.0% over the halved one at 4K (``predict``)
FULL_SQUARE = ("Megatron-Core v0.8", "Megatron-Core v0.9")
UNFUSED_RELEASES = ("moe_dev/main", "moe_dev (f3e6c5)")
# moe_published.csv's rows where their source says more than the csv: its two Qwen3-235B rows
# are the ModelZoo's of May 2025 (examples/qwen3/readme.md at 8017e11: the same layout, 245
# and 276 TFLOP/s, "norm, act" recomputed, code moe_dev(f3e6c5)); priced without the
# recomputation and with the fused loss until 7 December 2026
CSV_SOURCES = {"Qwen3-235B-A22B": {"release": "moe_dev (f3e6c5)", "recompute": "norm, act"}}
ASSUMED = ("dispatcher flex unless stated or set by Megatron-Bridge's config; no "
           "recomputation unless the row, its note or Megatron-Bridge's config states it; EP "
           "overlap as the notes or Megatron-Bridge's configs say; DeepSeek-V3 routed to at "
           "most 4 nodes; balanced routing; ZeRO-1 (ZeRO-3 with FSDP); the gradient "
           "reduction and parameter gather overlapped, in fp32 unless the NeMo config reduces "
           "in bf16")


def _number(value):
    """A table cell as a float, NaN where it is empty or not a plain number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _release(text) -> tuple:
    found = re.findall(r"\d+", str(text)) if str(text).startswith("NeMo") else []
    return tuple(int(x) for x in found)


def _rows(data):
    """Both tables of the folder ``data`` as one list of dicts with the fields the pricing
    reads, in file order."""
    from .published import data_file

    pd = require("pandas", "sweep", "fastpp.model.validate_moe")

    out = []
    for r in pd.read_csv(data_file("moe_published.csv", data)).to_dict("records"):
        overlap = "--overlap" in str(r["note"])
        said = CSV_SOURCES.get(r["model"], {})
        out.append({"source": "moe_published.csv", "model": r["model"],
                    "gpu_type": r["hardware"], "gpus": _number(r["gpus"]),
                    "release": said.get("release", ""), "precision": r["precision"],
                    "seq": _number(r["seq"]),
                    "global_batch": _number(r["global_batch"]),
                    "microbatch": _number(r["microbatch"]), "t": _number(r["t"]),
                    "p": _number(r["p"]), "cp": _number(r["cp"]), "vp": _number(r["vp"]),
                    "ep": _number(r["ep"]), "etp": 1.0, "fsdp": "", "grad_accum": np.nan,
                    "framework": "Megatron-Core",
                    "dispatcher": "",
                    "recompute": said.get("recompute", ""), "metric": "model_tflops_per_gpu",
                    "value": _number(r["tflops_per_gpu"]), "overlap": overlap,
                    "routing": "", "note": str(r["note"]),
                    "label": f"{r['model']} {r['gpus']} {r['hardware']} "
                                            f"{'overlap' if overlap else 'no overlap'}"})
    more = pd.read_csv(data_file("moe_published_more.csv", data))
    for i, r in enumerate(more.to_dict("records")):
        gpus = str(r["gpus"])
        nodes = re.fullmatch(r"(\d+) nodes", gpus)
        note = str(r["note"])
        out.append({"source": "moe_published_more.csv", "model": r["model"],
                    "gpu_type": r["gpu_type"],
                    "gpus": 4.0 * int(nodes[1]) if nodes else _number(gpus),
                    "release": str(r["release"]), "precision": str(r["precision"]),
                    "seq": _number(r["seq_len"]), "global_batch": _number(r["global_batch_seqs"]),
                    "microbatch": _number(r["micro_batch"]), "t": _number(r["tp"]),
                    "p": _number(r["pp"]), "cp": _number(r["cp"]), "vp": _number(r["vp"]),
                    "ep": _number(r["ep"]), "etp": _number(r["etp"]),
                    "fsdp": str(r["fsdp"]), "grad_accum": _number(r["grad_accum"]),
                    "framework": str(r["framework"]),
                    "dispatcher": str(r["dispatcher"]),
                    "recompute": str(r["recompute"]), "metric": str(r["metric"]),
                    "value": _number(r["value"]), "routing": str(r["routing"]),
                    "overlap": "A2A overlap on" in note, "note": note,
                    "label": f"{r['model']} {gpus} {r['gpu_type']} {r['precision']} "
                             f"{r['release']} row {i + 2}"})
    return out


def _reason(r) -> str:
    """Why a row cannot be priced ("" if it can)."""
    name = str(r["model"])
    for prefix, why in UNREPRESENTABLE.items():
        if name.startswith(prefix):
            return f"model not representable: {why}"
    if "tokendrop" in name or "drop" in str(r["routing"]).replace("dropless", ""):
        return "token-dropping run: the capacity factor is not modelled"
    if r["metric"] != "model_tflops_per_gpu" or not np.isfinite(r["value"]):
        return f"no TFLOP/s a GPU with a layout (metric {r['metric']})"
    if name not in MODEL_NAMES:
        return "model in no preset"
    if r["gpu_type"] not in HARDWARE_NAMES:
        return f"hardware {r['gpu_type']!r} in no preset"
    if str(r["precision"]).lower() not in PRECISION:
        return f"precision {r['precision']} not modelled (no FP4 peak)"
    for k in ("gpus", "seq", "global_batch", "microbatch", "t", "p", "ep"):
        if not np.isfinite(r[k]):
            return f"{k} not stated"
    return ""


def _key(r):
    """A row's workload: a NeMo table's model on a GPU type in a precision (a later release
    may change the layout too), a guide's steps on one layout; else the row alone."""
    release = str(r["release"])
    if release.startswith(("NeMo", "MCore")):
        return (MODEL_NAMES.get(r["model"], r["model"]), r["gpu_type"],
                PRECISION.get(str(r["precision"]).lower()), release[:4])
    return r["label"]


def _split(rows):
    """The rows priced and the rows excluded with their reasons (the newest release of a
    configuration kept; file order breaks ties, the later row kept)."""
    latest = {}
    for i, r in enumerate(rows):
        if not _reason(r):
            key = _key(r)
            rank = (_release(r["release"]), i)
            if key not in latest or rank > latest[key][0]:
                latest[key] = (rank, i)
    keep = {i for _, i in latest.values()}
    priced, excluded = [], []
    for i, r in enumerate(rows):
        why = _reason(r)
        if not why and i not in keep:
            newer = rows[latest[_key(r)][1]]
            why = (f"superseded by {newer['release'] or 'a later row'} for the same model, "
                   f"GPU and precision (software gains between releases are not modelled)")
        (excluded if why else priced).append((r, why))
    return [r for r, _ in priced], [(r, why) for r, why in excluded]


def excluded(data):
    """The rows of the tables in the folder ``data`` (``fastpp.model.validate.DATA``) not
    priced, with the reason: a ``pandas.DataFrame`` with ``source``, ``row`` (the label) and
    ``reason``."""
    pd = require("pandas", "sweep", "fastpp.model.validate_moe")

    _, out = _priced(data)
    return pd.DataFrame([(r["source"], r["label"], why) for r, why in out],
                        columns=["source", "row", "reason"])


def settings(r) -> dict:
    """The ``plan`` arguments of a priced row (the module's assumptions where it is
    silent), and ``fp8_current_scaling``, ``fused_grouped_mlp``, ``fp8_output_layer``,
    ``fp8_padding`` and ``gpus_per_node``: the hardware's (``CURRENT_SCALING``,
    ``FUSED_GROUPED_MLP``, ``FP8_OUTPUT_LAYER``, ``FP8_PADDING_DISPATCHERS``, and the NVLink
    domain a NeMo row's job filled, ``bridge_domain``)."""
    name = MODEL_NAMES[r["model"]]
    automodel = str(r.get("framework", "")).startswith(AUTOMODEL)
    if automodel and name == "deepseek-v3":  # (AUTOMODEL_RUN: its DeepSeek-V3 has no MTP)
        name = "deepseek-v3/no-mtp"
    model = (dataclasses.replace(MODELS["deepseek-v3"], mtp_depth=0, name="deepseek-v3/no-mtp")
             if name == "deepseek-v3/no-mtp" else MODELS[name])
    if (str(r.get("framework", "")).startswith(FUSED_LOSS)
            and str(r.get("release", "")) not in UNFUSED_RELEASES):
        model = dataclasses.replace(model, loss="fused")
    hardware = HARDWARE_NAMES[r["gpu_type"]]
    t, p, ep = int(r["t"]), int(r["p"]), int(r["ep"])
    vp = int(r["vp"]) if np.isfinite(r["vp"]) and r["vp"] > 1 else 1
    bridge = (BRIDGE.get((model.name, hardware), {}) if str(r["release"]).startswith("NeMo")
              else {})
    if _release(r["release"]) < bridge.get("since", ()):
        bridge = {}  # a release before the config set it
    # Megatron runs the EP overlap with interleaved stages, or without a pipeline
    # (TransformerConfig: "virtual_pipeline_model_parallel_size must be specified when
    # pipeline_model_parallel_size > 1")
    overlap = bool(r["overlap"]) or (bridge.get("overlap", False) and (vp > 1 or p == 1)
                                     and str(r["precision"]).lower() != "bf16")
    recompute, modules = RECOMPUTE.get(str(r["recompute"]).strip().lower(), ("none", None))
    if automodel and recompute == "none":
        recompute = AUTOMODEL_RUN["recompute"]
    noted = {k: v for phrase, said in NOTES.items() if phrase in str(r["note"])
             for k, v in said.items()}
    if (recompute == "none" and str(r["release"]).startswith("NeMo 26")
            and str(r["precision"]).lower() != "bf16" and "modules" in bridge):
        noted.setdefault("modules", bridge["modules"])
    if recompute == "none" and "modules" in noted:
        recompute, modules = "selective", noted["modules"]
    if recompute == "full":
        overlap = False  # Megatron refuses the overlap with full recomputation
    schedule = "combined-1f1b" if overlap else ("interleaved-1f1b" if vp > 1 else "1f1b")
    fsdp = 2.0 if str(r["fsdp"]).strip().lower() == "on" else _number(r["fsdp"])
    out = {"model": model, "gpus": int(r["gpus"]), "hardware": hardware, "seq": int(r["seq"]),
           "global_batch": int(r["global_batch"]), "tp": t, "pp": p, "ep": ep,
           "cp": int(r["cp"]) if np.isfinite(r["cp"]) and r["cp"] > 1 else None,
           "etp": int(r["etp"]) if np.isfinite(r["etp"]) else 1, "m": vp,
           "microbatch": int(r["microbatch"]), "recompute": recompute,
           "zero": 3 if np.isfinite(fsdp) and fsdp > 1 else 1, "schedules": [schedule],
           # AutoModel's FSDP2 under PyTorch's pipelining keeps the weights gathered after
           # the forward and reduces the accumulated gradients once (its parallelizer's
           # reshard_after_forward=False with a pipeline, the stage's deferred gradient sync)
           "zero3": "step" if str(r.get("framework", "")).startswith(AUTOMODEL) and p > 1
           else "layer",
           "precision": PRECISION[str(r["precision"]).lower()], "overlap": overlap,
           "dispatcher": DISPATCHER.get(str(r["dispatcher"]).lower(),
                                        bridge.get("dispatcher", "flex")),
           "recompute_modules": modules, "offload_modules": noted.get("offload"),
           "layout": _layout(r, model, p, vp),
           "node_limit": (AUTOMODEL_RUN["node_limit"] if automodel else
                          4 if model.name.startswith("deepseek-v3") else None),
           "gradient_overlap": True, "fp8_current_scaling": _current_scaling(r),
           "reduce_bytes": 2.0 if name in BF16_REDUCTION.get(str(r["release"])[:7], ())
           else 4.0,
           "fused_grouped_mlp": _config(r) in FUSED_GROUPED_MLP,
           "fp8_output_layer": _config(r) in FP8_OUTPUT_LAYER,
           "flushes": _flushes(r),
           "gpus_per_node": _domain(r, HARDWARE[hardware])}
    out["fp8_padding"] = (str(r["release"]).startswith("NeMo") and out["precision"] == "fp8"
                          and out["dispatcher"] in FP8_PADDING_DISPATCHERS)
    return out


def _domain(r, hardware) -> int:
    """The GPUs of one NVLink domain a row's job filled: on GB200 and GB300 a NeMo row's
    ``bridge_domain``, a ModelZoo row's ``MODELZOO_SEGMENTS``; else the preset's."""
    if hardware.gpus_per_node != TRAY * TRAYS_PER_DOMAIN:
        return hardware.gpus_per_node
    if str(r["release"]).startswith("NeMo"):
        return bridge_domain(int(r["gpus"]))
    segment = MODELZOO_SEGMENTS.get((str(r["model"]), str(r["gpu_type"]),
                                     str(r["precision"]).lower(), str(r["release"])))
    return TRAY * segment if segment else hardware.gpus_per_node


def _layout(r, model, p: int, vp: int):
    """A priced row's layers per pipeline stage as a layout string: NeMo AutoModel's own
    split (``AUTOMODEL``), Megatron-Bridge's ``pp_layout`` (``LAYOUTS``), else None (plan's
    even split)."""
    if str(r.get("framework", "")).startswith(AUTOMODEL) and p > 1:
        stages = p * vp
        base, extra = divmod(model.layers, stages)
        return "|".join(("E" if i == 0 else "") + "t" * (base + (i < extra))
                        + ("m" * model.mtp_depth + "L" if i == stages - 1 else "")
                        for i in range(stages))
    return LAYOUTS.get((model.name, p, vp))


def _config(r) -> tuple:
    """A priced row's key in ``GRAPHS``, ``FUSED_GROUPED_MLP`` and ``FP8_OUTPUT_LAYER``: its
    model preset, its hardware preset and its release to the minor version ("NeMo 26.04"
    for 26.04.01)."""
    return MODEL_NAMES[r["model"]], HARDWARE_NAMES[r["gpu_type"]], str(r["release"])[:10]


def _flushes(r) -> int:
    """The pipeline's flushes in a step: NeMo AutoModel runs one pipeline schedule a
    gradient-accumulation step (``benchmark_recipe.py``: ``ga_steps = global_batch_size //
    (local_batch_size * dp_size)`` calls of ``_forward_backward_step``, each one
    ``torch.distributed.pipelining`` schedule over the local batch), Megatron one a step
    (its ``grad_accum`` is the microbatches of that one schedule)."""
    accumulate = r.get("grad_accum", np.nan)
    if "AutoModel" not in str(r.get("framework", "")) or not np.isfinite(accumulate):
        return 1
    return max(int(accumulate), 1)


def _current_scaling(r) -> bool:
    """Whether a row's FP8 recipe is per-tensor current scaling (``CURRENT_SCALING``)."""
    precision = str(r["precision"]).lower()
    return precision in CURRENT_SCALING or (precision == "fp8"
                                            and str(r["release"]).startswith("NeMo"))


GROUPS = ("hardware", "precision", "dispatcher", "microbatch", "cuda_graphs", "release")


def groups(r) -> dict:
    """A priced row's groups (``GROUPS``), to read the residuals by: the hardware preset, the
    table's precision as it names the recipe (FP8 on H100 is Transformer Engine's current
    scaling, MXFP8 Blackwell's), the dispatcher and microbatch it is priced with, its CUDA
    graphs (``cuda_graphs``) and its release (a NeMo container, or the source's)."""
    kw = settings(r)
    return {"hardware": kw["hardware"], "precision": str(r["precision"]).upper(),
            "dispatcher": kw["dispatcher"], "microbatch": kw["microbatch"],
            "cuda_graphs": cuda_graphs(r),
            "release": str(r["release"]) if r["release"] == r["release"] and r["release"]
            not in ("", "nan") else str(r["source"])}


def cuda_graphs(r) -> str:
    """The CUDA graphs a priced row ran: ``GRAPHS`` for a NeMo row; for the ModelZoo's, what
    its note states ("partial" where it names the scopes, "unstated scope" where it says
    only "CUDA graphs"); else "not stated". Not priced: a group to read the residuals by."""
    if str(r["release"]).startswith("NeMo"):
        return GRAPHS.get(_config(r), "not stated")
    note = str(r["note"]).lower()
    if "cuda graphs attn" in note:
        return "partial"
    return "unstated scope" if "cuda graph" in note else "not stated"


def by_group(frame, data, group: str):
    """``validate``'s MoE rows (``frame``) by one of ``GROUPS``: a ``pandas.DataFrame`` of
    ``rows``, ``mape`` (%) and ``mean_error`` (%) per value of the group, worst first. The
    groups are read from the tables in the folder ``data``, unpriced."""
    pd = require("pandas", "sweep", "fastpp.model.validate_moe")
    one_of(group, "group", GROUPS)
    priced, _ = _split(_rows(data))
    key = {r["label"]: groups(r)[group] for r in priced}
    rows = frame[frame["dataset"] == DATASET]
    error = 100.0 * rows["error"].to_numpy()
    table = pd.DataFrame({group: [key[x] for x in rows["row"]], "error": error})
    out = table.groupby(group)["error"].agg(
        rows="size", mape=lambda x: float(np.abs(x).mean()), mean_error="mean")
    return out.sort_values("mape", ascending=False).round(1)


def predict(r, **changes) -> tuple[float, str]:
    """A priced row's predicted TFLOP/s a GPU (Megatron's FLOP count), and ``plan``'s reason
    where it cannot run the layout (the prediction then NaN). A row that does not fit in
    the GPU's memory is still priced (the tables ran it; the reason says by how much).
    ``changes`` replace ``settings``' plan keywords (what another table states of a run)."""
    from .plan import plan

    kw = settings(r) | changes
    hardware = HARDWARE[kw.pop("hardware")]
    hardware = dataclasses.replace(hardware, fp8_current_scaling=kw.pop("fp8_current_scaling"),
                                   fused_grouped_mlp=kw.pop("fused_grouped_mlp"),
                                   fp8_output_layer=kw.pop("fp8_output_layer"),
                                   fp8_padding=kw.pop("fp8_padding"),
                                   gpus_per_node=kw.pop("gpus_per_node"))
    flushes = kw.pop("flushes")
    if kw["global_batch"] % flushes:
        raise ScheduleError(f"{r['label']}: global_batch {kw['global_batch']} must split into "
                            f"its {flushes} accumulation steps")
    kw["global_batch"] //= flushes  # one flush priced; the step runs ``flushes`` of them
    model = kw.pop("model")
    row = plan(model, kw.pop("gpus"), hardware, workers=1, **kw).iloc[0]
    reason = "" if np.isfinite(row["tflops_per_gpu"]) else f"plan refuses it: {row['reason']}"
    # each flush ends in FSDP's gradient reduce-scatter and reshard (PyTorch's
    # PipelineStage.backward_maybe_with_nosync: FSDP's post_backward at a schedule's last
    # backward); the optimizer steps once
    once = row["optimizer_step"]
    step = flushes * (row["step_time"] - once) + once
    count = 1.0
    if str(r.get("framework", "")) in FULL_SQUARE:  # its Megatron's count (FULL_SQUARE)
        count = (model.megatron_flops_per_token(kw["seq"], halved_core=False)
                 / model.megatron_flops_per_token(kw["seq"]))
    return float(count * row["tflops_per_gpu"] * flushes * row["step_time"] / step), reason


def _priced(data):
    """The priced rows with their predictions, and the excluded rows with their reasons."""
    priced, out = _split(_rows(data))
    done = []
    for r in priced:
        value, why = predict(r)
        if why:
            out.append((r, why))
        else:
            done.append((r, value))
    return done, out


def rows(data):
    """``fastpp.model.validate``'s rows: ``(dataset, row, quantity, measured, predicted,
    regime)`` for every priced row of the tables in the folder ``data``."""
    done, _ = _priced(data)
    out = []
    for r, value in done:
        kw = settings(r)
        where = regime(kw["model"], HARDWARE[kw["hardware"]], kw["seq"], kw["tp"], kw["gpus"])
        out.append((DATASET, r["label"], "tflops_per_gpu", float(r["value"]), value, where))
    return out


__all__ = ["ASSUMED", "DATASET", "FP8_OUTPUT_LAYER", "FUSED_GROUPED_MLP", "GRAPHS", "GROUPS",
           "bridge_domain", "by_group", "cuda_graphs", "excluded", "groups", "predict", "rows",
           "settings"]
