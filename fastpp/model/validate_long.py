"""Long-context training against ``shared/data/long_context_published.csv``, row by row.

Each row is priced as ``validate`` prices a configuration: the per-stage costs of
``stage_table`` with the row's layout (tensor, pipeline, context and data parallelism, its
precision), the schedule built and simulated by ``fastpp.simulate``, plus ``step_terms``
(the gradient reduction over the ``dp cp`` replicas, the optimizer step). Nothing is fitted
to these rows: the attention kernel is ``fastpp.model.attention``'s (fitted on the kernel
table's fit lengths), the rest the presets' (``fastpp.model.hardware``). Every row is a check.

Rows priced (``LONG_ROWS``), and what is assumed where the source is silent:

- NeMo's Llama 2 7B FP8 on DGX-H100 (NeMo 24.03.01), the runs with context parallelism,
  4K to 1M tokens: the ``llama2-7b`` preset; context parallelism as Transformer Engine's
  p2p ring (``cp_comm="ring"``); fp8 products, bf16 attention (Transformer Engine's default
  recipe); assumed (the page does not say): microbatch 1, no recomputation, sequence
  parallelism and Transformer Engine's tensor-parallel overlap where ``tp > 1``, the
  distributed optimizer (ZeRO-1) with its gradient reduction overlapped (NeMo's defaults),
  plain 1F1B where ``pp > 1`` (no virtual stages stated). TFLOP/s per GPU counted as NeMo's
  ``flops_formulas`` count Llama (``Transformer.megatron_flops_per_token``: the causal core
  halved; whether NeMo 24.03 halved it is not stated).
- NeMo's Llama 3 8B FP8 on DGX-B200 (NeMo 25.04), 8K to 1M: likewise with the ``llama3-8b``
  preset and the ``B200-180GB`` preset (its product curve and attention kernel are H100's,
  at B200's peaks: no B200 table calibrates them, so these rows check that assumption).

Rows excluded, each with its reason (``excluded``): the runs without context parallelism
(their layout is not stated: "the best non-CP layout within memory"); Megatron-Core's
GPT-175B speedup figure (GPU count, batch, PP and DP not stated; speedups over a baseline
not in the table); Qwen3-235B (MoE runs: forced-balance and dropless routing with DeepEP and
HybridEP, priced by ``fastpp.model.moe`` but not checked here); USP, DeepSpeed-Ulysses,
Megatron-SP under DeepSpeed and FPDT (Ulysses all-to-all sequence parallelism and FPDT's
offloading, which fastpp does not model; layouts not stated); llm-foundry's MPT rows (FSDP;
MPT's ALiBi attention ran a Triton kernel that the kernel table does not hold: priced as
FSDP with the FlashAttention-2 or cuDNN kernel and llm-foundry's MFU count, they come out
25% to 150% over, which measures the kernel's difference, not a check of this model).
"""

from __future__ import annotations

import numpy as np

from ..checks import require
from ..costs import Costs
from ..simulate import simulate
from .errorbar import regime
from .hardware import HARDWARE
from .presets import MODELS
from .stages import cp_buffer_bytes, step_terms

DATASET = "long_context_published"
# the runs priced: (model column, gpu_type column prefix) -> (preset model, preset hardware)
PRICED = {("Llama2-7B", "H100"): ("llama2-7b", "H100-80GB"),
          ("Llama3-8B", "B200"): ("llama3-8b", "B200-180GB")}
MICROBATCH = 1  # assumed: NeMo's long-context table does not say


def _reason(row) -> str:
    """Why a row is not priced ("" if it is)."""
    model, gpu = str(row["model"]), str(row["gpu_type"])
    if str(row["metric"]).endswith("without_cp"):
        return "layout not stated (the best non-CP layout within memory)"
    if model.startswith("GPT-175B"):
        return "GPU count, batch, PP and DP not stated; a speedup over an unlisted baseline"
    if model.startswith("Qwen3"):
        return "MoE run (DeepEP/HybridEP dispatch, routing): not checked in this dataset"
    if model.startswith("MPT"):
        return ("llm-foundry FSDP run: MPT's ALiBi attention runs a Triton kernel, not in the "
                "kernel table (priced with FA2/cuDNN these rows come out 25-150% over)")
    if not any(model == m and gpu.startswith(g) for m, g in PRICED):
        return (f"framework not modeled ({row['framework']}, {row['sp_method']}): Ulysses "
                f"all-to-all or offloaded sequence parallelism, layout not stated")
    return ""


def excluded(frame=None):
    """The rows not priced: a DataFrame of ``model``, ``seq_len``, ``gpus``, ``metric`` and
    ``reason``."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from .published import DATA

    frame = pd.read_csv(DATA / f"{DATASET}.csv") if frame is None else frame
    reasons = frame.apply(_reason, axis=1)
    out = frame.loc[reasons != "", ["model", "seq_len", "gpus", "metric"]].copy()
    out["reason"] = reasons[reasons != ""]
    return out.reset_index(drop=True)


def price(model, hardware, *, seq, global_batch, tp, pp, cp, dp, precision,
          microbatch=MICROBATCH, cp_comm="ring"):
    """Seconds of one step of a NeMo/Megatron run with context parallelism (the module's
    assumptions) and its peak bytes on the fullest device."""
    from ..generators.registry import build_schedule
    from .pricing import _stages, device_bytes

    n = global_batch // (dp * microbatch)
    sched = build_schedule("1f1b", pp, n)
    t = int(tp)
    table = _stages(model, hardware, sched, seq, microbatch, t, dp, t > 1, "none", None, None,
                    True, t > 1, precision=precision, cp=cp, cp_comm=cp_comm, zero=1)
    costs = Costs(f=table["f"], b=table["b"], w=table["w"], gamma=table["gamma"],
                  act=table["act"], comm=float(table["comm"][0]),
                  bandwidth=float(table["bandwidth"][0]),
                  message_bytes=float(table["message_bytes"][0]))
    res = simulate(sched, costs)
    params = np.bincount(sched.stage_to_device, weights=table["params"], minlength=pp)
    window = np.bincount(sched.stage_to_device, weights=table["b"] / sched.m, minlength=pp)
    terms = step_terms(hardware, params.max(), t, dp * cp, 1, overlap=True,
                       window=window.min())
    step = res.makespan + float(sum(np.max(v) for v in terms.values()))
    by = device_bytes(model, sched, tp=t, dp=dp, zero=1, cp=cp)
    fixed = max(by["parameter_bytes"] + by["gradient_bytes"] + by["optimizer_bytes"])
    buffers = cp_buffer_bytes(model, seq, microbatch, t, cp, cp_comm)
    return step, float(fixed + np.max(res.peak_activations) + buffers)


def long_rows(frame=None):
    """``(dataset, row, quantity, measured, predicted, regime)`` of every priced row, and the peak
    bytes per GPU each run needs (``memory``, by row label)."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from .published import DATA

    frame = pd.read_csv(DATA / f"{DATASET}.csv") if frame is None else frame
    rows, memory = [], {}
    for r in frame.to_dict("records"):
        if _reason(r):
            continue
        name, hw_name = next(v for (m, g), v in PRICED.items()
                             if r["model"] == m and str(r["gpu_type"]).startswith(g))
        model, hw = MODELS[name], HARDWARE[hw_name]
        seq, gbs = int(r["seq_len"]), int(r["global_batch_seqs"])
        tp, pp, cp, dp = (int(r[k]) for k in ("tp", "pp", "cp", "dp"))
        step, peak = price(model, hw, seq=seq, global_batch=gbs, tp=tp, pp=pp, cp=cp, dp=dp,
                           precision="fp8" if r["precision"] == "fp8" else "bf16")
        gpus = tp * pp * cp * dp
        flops = model.megatron_flops_per_token(seq) * seq * gbs
        label = f"{r['model']} {r['gpu_type'].split()[0]} {seq // 1024}K cp{cp}"
        rows.append((DATASET, label, "tflops_per_gpu", float(r["value"]),
                     flops / step / gpus / 1e12, regime(model, hw, seq, tp)))
        memory[label] = peak
    return rows, memory
