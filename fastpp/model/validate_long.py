"""Long-context training against ``shared/data/long_context_published.csv``, row by row.

Each row is priced as ``validate`` prices a configuration: the per-stage costs of
``stage_table`` with the row's layout (tensor, pipeline, context and data parallelism, its
precision), the schedule built and simulated by ``fastpp.simulate``, plus ``step_terms``
(the gradient reduction over the ``dp cp`` replicas, the optimizer step). The attention kernel
is ``fastpp.model.attention``'s (fitted on the kernel table's fit lengths), the rest the
presets' (``fastpp.model.hardware``).

What is counted (``nemo_flops_per_token``): NeMo's TFLOP/s per GPU count the attention's core
as the full square, not halved by the causal mask. NeMo's formulas (``calculate_tflops`` of
its auto-configurator, 2024; ``nemo/utils/flops_formulas.py`` from January 2025) halve it only
from "Discount FLOPs in dot-product att" (NeMo #14424, 9 August 2025), after both tables here
were published (October 2024 and May 2025); and NeMo's own summary tables, which print tokens
and TFLOP/s per GPU side by side, fit the full count to 0.1% (``NEMO_SUMMARY``). Counted
halved, the B200 rows at 512K-1M would put its attention at 82% of the bf16 peak.

What is calibrated (``ATTENTION_SPEED``, ``calibrate``): one constant per table, the speed
of its attention kernel against the kernel table's curve (``attention.with_attention_speed``),
fitted on the table's longest row (1M tokens, the attention 97% of the step); the other rows
of each table are checks (``long_roles``). NeMo 24.03's Transformer Engine (1.4) runs cuDNN's
fused attention on Hopper, a cuDNN release before the one FlashAttention-3's paper measured:
its fitted speed, 0.56 of that cuDNN curve, is near FlashAttention-2's on H100 (0.61 of
cuDNN's at long lengths without a mask, 0.64 with the causal one these runs use, the same
table). B200's is against the assumed kernel, H100's cuDNN
at the same fraction of the peak (0.73 of it: 42% of B200's bf16 peak at long lengths).

Rows priced (``PRICED``), and what is assumed where the source is silent:

- NeMo's Llama 2 7B FP8 on DGX-H100 (NeMo 24.03.01), the runs with context parallelism,
  4K to 1M tokens: the ``llama2-7b`` preset; context parallelism as Transformer Engine's
  p2p ring (``cp_comm="ring"``); fp8 products with Transformer Engine's casts
  (``compute.fp8_cast_times``), bf16 attention (its default recipe); assumed (the page
  does not say): microbatch 1, no recomputation, sequence parallelism and Transformer
  Engine's tensor-parallel overlap where ``tp > 1``, the
  distributed optimizer (ZeRO-1) with its gradient reduction overlapped (NeMo's defaults),
  plain 1F1B where ``pp > 1`` (no virtual stages stated).
- NeMo's Llama 3 8B FP8 on DGX-B200 (NeMo 25.04), 8K to 1M: likewise with the ``llama3-8b``
  preset and the ``B200-180GB`` preset (its product curve and attention kernel are H100's,
  at B200's peaks: no B200 table calibrates the products, so the short rows check that).

The MoE runs (``MOE_DATASET``, ``moe_rows``): the Megatron-MoE ModelZoo's Qwen3-235B-A22B
long-context table on 256 H100 (best_practice/qwen3/readme.md at e865051: 16K to 128K with
CP 1, 2, 4, 8, TP 4, PP 8, VP 4, EP 8, microbatch 1, global batch 256, bf16, DeepEP,
``--recompute-granularity selective --recompute-modules layernorm moe``), the runs with
forced-balance routing (``--moe-router-force-load-balancing``). Each is priced by
``fastpp.model.plan`` and reported as Megatron's TFLOP/s a GPU (``megatron_flops_per_token``:
the causal core halved, as Megatron-LM has counted it since 2025; the table names no code
commit), with ``validate_moe.settings``' conventions for a ModelZoo row where the row is
silent: the flex dispatcher (DeepEP), ZeRO-1 with the gradient reduction and parameter
gather overlapped (the ModelZoo's Qwen3 config), gradients reduced in fp32, plan's even
layer split (here Megatron's ``--account-for-embedding-in-pipeline-split`` and
``--account-for-loss-in-pipeline-split``: 2 layers on the first and last of the 32 chunks,
3 on the others), blocking pipeline hand-offs; and what the command states
(``MOE_COMMAND``): no EP overlap (``A2A_OVERLAP=0``), no tensor-parallel overlap (the
script of the table's commit adds no ``--tp-comm-overlap``), CP as Megatron's p2p ring
(``cp_comm="ring"``, no ``--cp-comm-type`` given); balanced routing (``imbalance=1``). The
attention runs at the kernel table's speed, as ``plan`` prices a preset. Nothing is fitted on
these rows: they are checks, the only MoE rows in the error bars
(``fastpp.model.errorbar``). Until 7 December 2026 they were priced with Transformer
Engine's TP overlap, read from a later script (the flag came six weeks after the table).

Rows excluded, each with its reason (``excluded``): the runs without context parallelism
(their layout is not stated: "the best non-CP layout within memory"); Megatron-Core's
GPT-175B speedup figure (GPU count, batch, PP and DP not stated; speedups over a baseline
not in the table); the Qwen3-235B runs with dropless routing (the ModelZoo's aux-loss
balancing: the experts' load imbalance, ``plan``'s ``imbalance``, is not stated, and priced
balanced each would be priced as its forced-balance twin, which ran 9-24% faster, so its
error would measure the imbalance, not the model) and on GB200 (MXFP8, HybridEP; its
GPU count inferred from its nodes; only the H100 table is checked here); USP, DeepSpeed-Ulysses,
Megatron-SP under DeepSpeed and FPDT (Ulysses all-to-all sequence parallelism and FPDT's
offloading, which fastpp does not model; layouts not stated); llm-foundry's MPT rows (FSDP
on H100; MPT's attention ran FlashAttention in Triton, ``attn_impl: triton``, which no table
measures and its author relates to a measured kernel on A100 alone,
``fastpp.model.validate_foundry``: priced as
FSDP with the FlashAttention-2 or cuDNN kernel and llm-foundry's MFU count, they come out
25% to 150% over, which measures the kernel's difference, not a check of this model).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from ..checks import require
from ..simulate import simulate
from .attention import with_attention_speed
from .config import RunConfig, RunGrid
from .errorbar import regime
from .hardware import HARDWARE
from .presets import MODELS
from .stages import device_held_bytes, stage_costs, step_terms

DATASET = "long_context_published"
# the same rows with the attention at the measured kernel's speed, as the planner prices them
# (no table's speed fitted): the error bars' rows (``errorbar.NOT_MODEL`` holds DATASET)
AS_PLANNED = "long_context_as_planned"
# the runs priced: (model column, gpu_type column prefix) -> (preset model, preset hardware)
PRICED = {("Llama2-7B", "H100"): ("llama2-7b", "H100-80GB"),
          ("Llama3-8B", "B200"): ("llama3-8b", "B200-180GB")}
MICROBATCH = 1  # assumed: NeMo's long-context table does not say
# the tables whose NeMo ran Megatron's fused loss (Transformer.loss "fused"): NeMo 2's
# GPTConfig sets cross_entropy_loss_fusion (B200, NeMo 25.04); the H100 table's NeMo 24.03
# predates Megatron-Core's fused loss (fusions/fused_cross_entropy.py, 14 June 2024)
FUSED_LOSS = ("B200",)
# the MoE runs checked as ``plan`` prices them (``moe_rows``): the Megatron-MoE ModelZoo's
# Qwen3-235B long-context table on H100, (model column, gpu_type column prefix) -> the names
# ``validate_moe`` reads them by (its ``MODEL_NAMES`` and ``HARDWARE_NAMES``)
MOE_DATASET = "long_context_moe"
MOE_PRICED = {("Qwen3-235B-A22B (MoE)", "H100"): ("Qwen3-235B-A22B", "H100-80GB")}
# what the ModelZoo's command states beyond the table's columns (best_practice/Qwen3/
# readme.md as the table came in, b0b92ff, 4 November 2025): A2A_OVERLAP=0 (no EP overlap);
# PR=bf16, for which sbatch_benchmarking.sh added no --tp-comm-overlap then (it does since
# b09773a, 16 December 2025; 38ce2ed, March 2026, only renamed the folder); no
# --cp-comm-type, so Megatron's p2p ring
MOE_COMMAND = {"overlap": False, "tp_overlap": False, "cp_comm": "ring"}
# each table's attention kernel against the kernel table's curve, fitted by ``calibrate`` on
# the row CALIBRATION names (tests/test_long_context.py refits it)
ATTENTION_SPEED = {"H100": 0.56, "B200": 0.73}
CALIBRATION = 1048576  # the sequence length of each table's calibration row
# NeMo's summary tables (DGX-H100, FP8): (preset, seq, tokens/s/GPU, TFLOP/s/GPU) as printed
# (NeMo 24.09 performance summary: LLAMA2-7B 8 GPUs GBS 128; LLAMA3-8B 8 GPUs GBS 128 CP 2)
NEMO_SUMMARY = (("llama2-7b", 4096, 16934, 780), ("llama3-8b", 8192, 12273, 711))


def nemo_flops_per_token(model, seq: int) -> float:
    """NeMo's count of one token's training FLOPs (see the module): Megatron's
    (``Transformer.megatron_flops_per_token``) with the attention core as the full square,
    ``6 s a (d_qk + d_v)`` per layer, not Megatron's half of it (``12 s h`` for standard
    heads: NeMo's llama2 formula's ``12 s / h`` term of ``L h^2``)."""
    return model.megatron_flops_per_token(seq, halved_core=False)


def _reason(row) -> str:
    """Why a row is not priced ("" if it is)."""
    model, gpu = str(row["model"]), str(row["gpu_type"])
    if str(row["metric"]).endswith("without_cp"):
        return "layout not stated (the best non-CP layout within memory)"
    if model.startswith("GPT-175B"):
        return "GPU count, batch, PP and DP not stated; a speedup over an unlisted baseline"
    if model.startswith("Qwen3"):
        return _moe_reason(row)
    if model.startswith("MPT"):
        return ("llm-foundry FSDP run on H100: MPT's attention ran FlashAttention in Triton, "
                "related to a measured kernel on A100 alone (priced with FA2/cuDNN these rows "
                "come out 25-150% over)")
    if not any(model == m and gpu.startswith(g) for m, g in PRICED):
        return (f"framework not modeled ({row['framework']}, {row['sp_method']}): Ulysses "
                f"all-to-all or offloaded sequence parallelism, layout not stated")
    return ""


def excluded(frame=None):
    """The rows not priced: a DataFrame of ``model``, ``seq_len``, ``gpus``, ``metric`` and
    ``reason``."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from .published import data_file

    frame = pd.read_csv(data_file(f"{DATASET}.csv")) if frame is None else frame
    reasons = frame.apply(_reason, axis=1)
    out = frame.loc[reasons != "", ["model", "seq_len", "gpus", "metric"]].copy()
    out["reason"] = reasons[reasons != ""]
    return out.reset_index(drop=True)


def price(model, hardware, *, seq, global_batch, t, p, cp, d, precision,
          microbatch=MICROBATCH, cp_comm="ring"):
    """Seconds of one step of a NeMo/Megatron run with context parallelism (the module's
    assumptions) and its peak bytes on the fullest device."""
    from .pricing import _fit, _stages, device_bytes

    run = RunConfig(seq=seq, global_batch=global_batch, t=t, p=p, cp=cp, d=d,
                    microbatch=microbatch, sequence_parallel=t > 1, tp_overlap=t > 1,
                    precision=precision, cp_comm=cp_comm, zero=1)
    _fit(model, seq, t, d, cp, run.ep, run.etp)
    sched = run.build_schedule()
    table = _stages(model, hardware, sched, RunGrid.of(run))
    res = simulate(sched, stage_costs(table))  # each hop at its own link
    params = np.bincount(sched.stage_to_device, weights=table["params"], minlength=p)
    window = np.bincount(sched.stage_to_device, weights=table["b"] / sched.m, minlength=p)
    terms = step_terms(hardware, params.max(), t, d * cp, 1, overlap=True,
                       window=window.min(), gpus=t * cp * d * p)  # (as plan's)
    step = res.makespan + float(sum(np.max(v) for v in terms.values()))
    by = device_bytes(model, config=run)
    fixed = max(by["parameter_bytes"] + by["gradient_bytes"] + by["optimizer_bytes"])
    held = device_held_bytes(res.peak_activations, table["working"], table["after"],
                             sched.stage_to_device, p)
    return step, float(fixed + np.max(held))


def _runs(frame):
    """Per priced row: its label, table (``"H100"`` or ``"B200"``), model, hardware preset,
    layout keywords for ``price``, GPUs and the published TFLOP/s per GPU."""
    for r in frame.to_dict("records"):
        if _reason(r) or _moe_run(r):  # (the MoE runs: ``moe_rows``)
            continue
        (name, hw_name), table = next((v, g) for (m, g), v in PRICED.items()
                                      if r["model"] == m and str(r["gpu_type"]).startswith(g))
        seq = int(r["seq_len"])
        # the table's columns as RunConfig names them
        layout = {k: int(r[column]) for k, column in (("t", "tp"), ("p", "pp"), ("cp", "cp"),
                                                      ("d", "dp"))}
        label = f"{r['model']} {r['gpu_type'].split()[0]} {seq // 1024}K cp{layout['cp']}"
        model = MODELS[name]
        yield (label, table, replace(model, loss="fused") if table in FUSED_LOSS else model,
               HARDWARE[hw_name],
               {"seq": seq, "global_batch": int(r["global_batch_seqs"]), **layout,
                "precision": "fp8" if r["precision"] == "fp8" else "bf16"},
               int(np.prod(list(layout.values()))), float(r["value"]))


def _tflops(model, hardware, run, gpus, speed):
    """Predicted TFLOP/s per GPU (NeMo's count) of one run, and its peak bytes per GPU."""
    step, peak = price(model, with_attention_speed(hardware, speed), **run)
    flops = nemo_flops_per_token(model, run["seq"]) * run["seq"] * run["global_batch"]
    return flops / step / gpus / 1e12, peak


def calibrate(frame=None) -> dict:
    """``ATTENTION_SPEED``: per table, the attention kernel's speed (rounded to 0.01) at which
    the predicted TFLOP/s of its ``CALIBRATION`` row equals the published one (secant steps on
    the step time, which the speed moves only through the attention)."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from .published import data_file

    frame = pd.read_csv(data_file(f"{DATASET}.csv")) if frame is None else frame
    out = {}
    for _, table, model, hw, run, gpus, measured in _runs(frame):
        if run["seq"] != CALIBRATION:
            continue
        lo, hi = 0.5, 1.0
        f_lo, f_hi = (1.0 / _tflops(model, hw, run, gpus, x)[0] - 1.0 / measured
                      for x in (lo, hi))
        for _ in range(6):  # the step is nearly affine in 1/speed: a few secant steps
            if f_hi == f_lo:
                break
            x = 1.0 / (1.0 / hi - f_hi * (1.0 / hi - 1.0 / lo) / (f_hi - f_lo))
            lo, f_lo, hi = hi, f_hi, x
            f_hi = 1.0 / _tflops(model, hw, run, gpus, x)[0] - 1.0 / measured
        out[table] = round(hi, 2)
    return out


def long_roles(frame=None) -> dict:
    """``{(dataset, row, quantity): "calibration"}`` of the rows ``calibrate`` fits."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from .published import data_file

    frame = pd.read_csv(data_file(f"{DATASET}.csv")) if frame is None else frame
    return {(DATASET, label, "tflops_per_gpu"): "calibration"
            for label, _, _, _, run, _, _ in _runs(frame) if run["seq"] == CALIBRATION}


def long_rows(frame=None, speed=None):
    """``(dataset, row, quantity, measured, predicted, regime)`` of every priced row (the
    attention at its table's ``ATTENTION_SPEED``), and the peak bytes per GPU each run needs
    (``memory``, by row label). With ``speed`` (1.0: the measured kernel, as ``plan`` and
    ``transformer_costs`` price a preset) every row's attention runs at it instead, under the
    dataset name ``AS_PLANNED``: what the error bars are made from."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from .published import data_file

    frame = pd.read_csv(data_file(f"{DATASET}.csv")) if frame is None else frame
    rows, memory = [], {}
    name = DATASET if speed is None else AS_PLANNED
    for label, table, model, hw, run, gpus, measured in _runs(frame):
        at = ATTENTION_SPEED[table] if speed is None else speed
        predicted, memory[label] = _tflops(model, hw, run, gpus, at)
        rows.append((name, label, "tflops_per_gpu", measured, predicted,
                     regime(model, hw, run["seq"], run["t"], gpus)))
    return rows, memory


def _moe_run(row) -> tuple[str, str] | None:
    """The ``MOE_PRICED`` names of a row's model and hardware, None if not such a run."""
    return next((v for (m, g), v in MOE_PRICED.items()
                 if str(row["model"]) == m and str(row["gpu_type"]).startswith(g)), None)


def _moe_reason(row) -> str:
    """Why an MoE row is not priced ("" if ``moe_rows`` prices it)."""
    if _moe_run(row) is None:
        return (f"MoE run on {str(row['gpu_type']).split()[0]} ({row['precision']}, "
                f"{row['framework']}): only the ModelZoo's H100 table is checked here (this "
                f"row's GPU count is inferred from its nodes)")
    if "dropless" in str(row["note"]):
        return ("dropless routing (aux-loss balanced MoE run): its experts' load imbalance "
                "(plan's imbalance) is not stated; priced balanced, it would be priced as its "
                "forced-balance twin")
    return ""


def _moe_label(row) -> str:
    routing = str(row["note"]).split(";")[0].replace(" routing", "")
    return (f"Qwen3-235B-A22B {str(row['gpu_type']).split()[0]} {int(row['seq_len']) // 1024}K "
            f"cp{int(row['cp'])} {routing}")


def moe_settings(row) -> dict:
    """The ``plan`` keywords of a priced MoE row (and ``hardware``, the preset's name, and
    the flags ``validate_moe.settings`` gives beside them): ``validate_moe.settings`` of the
    row read as a ModelZoo row of the MoE tables (that module's conventions where the row is
    silent), with the row's context parallelism and recomputation, the command's settings
    (``MOE_COMMAND``) and balanced routing (``imbalance=1``: the runs force the balance)."""
    from . import validate_moe

    as_moe, changes = _as_moe(row)
    return validate_moe.settings(as_moe) | changes


def _as_moe(row) -> tuple[dict, dict]:
    """A priced MoE row as ``validate_moe`` reads a ModelZoo row of its tables, and the
    ``plan`` keywords this table and its command change (``moe_settings``)."""
    model, hardware = _moe_run(row)
    text = str(row["recompute"])
    granularity = re.search(r"--recompute-granularity (\w+)", text)
    modules = re.search(r"--recompute-modules ([\w ]+?)(?= --|$)", text)
    dispatcher = re.search(r"\((\w+)\)", str(row["framework"]))
    commit = re.search(r"HEAD (\w+)", str(row["source"]))
    nan = float("nan")
    as_moe = {"source": f"{DATASET}.csv", "model": model, "gpu_type": hardware,
              "gpus": float(row["gpus"]), "release": f"ModelZoo {commit[1] if commit else ''}",
              "precision": str(row["precision"]), "seq": float(row["seq_len"]),
              "global_batch": float(row["global_batch_seqs"]),
              "microbatch": float(row["micro_batch"]), "t": float(row["tp"]),
              "p": float(row["pp"]), "cp": float(row["cp"]), "vp": float(row["vp"]),
              "ep": float(row["ep"]), "etp": nan, "fsdp": "", "grad_accum": nan,
              "framework": "Megatron-Core", "dispatcher": dispatcher[1] if dispatcher else "",
              "recompute": "", "metric": "model_tflops_per_gpu", "value": float(row["value"]),
              "routing": "", "overlap": MOE_COMMAND["overlap"], "note": str(row["note"]),
              "label": _moe_label(row)}
    changes = {"cp": int(row["cp"]), "cp_comm": MOE_COMMAND["cp_comm"],
               "tp_overlap": MOE_COMMAND["tp_overlap"], "imbalance": 1.0}
    if granularity:
        changes |= {"recompute": granularity[1],
                    "recompute_modules": modules[1].split() if modules else None}
    return as_moe, changes


def moe_rows(frame=None):
    """``(dataset, row, quantity, measured, predicted, regime)`` of every priced MoE row
    (``MOE_DATASET``): ``plan``'s TFLOP/s a GPU (Megatron's count) against the table's, in
    the regime of the row's model, hardware, sequence, ``t`` and GPUs. Nothing is fitted
    on these rows, which count as checks; one setting, the TP overlap their script states,
    was read after a pricing without it had been seen (the module docstring)."""
    pd = require("pandas", "sweep", "fastpp.model.validate_long")
    from . import validate_moe
    from .published import data_file

    frame = pd.read_csv(data_file(f"{DATASET}.csv")) if frame is None else frame
    rows = []
    for r in frame.to_dict("records"):
        if _reason(r) or _moe_run(r) is None:
            continue
        as_moe, changes = _as_moe(r)
        kw = validate_moe.settings(as_moe)
        rows.append((MOE_DATASET, _moe_label(r), "tflops_per_gpu", float(r["value"]),
                     validate_moe.predict(as_moe, **changes)[0],
                     regime(kw["model"], HARDWARE[kw["hardware"]], kw["seq"], kw["tp"],
                            kw["gpus"])))
    return rows
