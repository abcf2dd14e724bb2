"""llm-foundry's MPT benchmark: small models on one node under FSDP, priced as their code ran.

``small_model_overheads.csv``'s ``training_throughput`` rows are llm-foundry's benchmark
tables (``scripts/train/benchmarking/README.md``, last changed 2024-04-22): MPT models of
125M to 3B parameters on 8 GPUs of one node, Composer's FSDP ``FULL_SHARD``, sequences of
512 to 65,536 tokens, each with its microbatch and gradient accumulation. What the runs ran
where the table is silent is read from llm-foundry's code at the commits that made the tables
(``sweep.sh``, ``submit_benchmarks.py``, ``yamls/pretrain/mpt-*.yaml``,
``models/mpt/modeling_mpt.py``):

- the model (``mpt``): the row's layers, hidden size and heads; a 4h MLP with GeLU; no
  biases; LayerNorm; the output layer tied to the embedding; GPT-NeoX's vocabulary padded to
  50,368; no dropout. Its learned position table (``seq x h`` parameters, 6% of the 3B
  model's at 65,536 tokens) is not priced;
- the attention: ``attn_impl: triton``, ``submit_benchmarks.py``'s default, which runs
  llm-foundry's copy of FlashAttention in Triton (``flash_attn_triton.py``, on the Triton of
  December 2022): the A100 kernel ``"FlashAttention Triton"`` of
  ``fastpp.model.attention``, measured by FlashAttention-2's README figure at 0.4-0.6 of
  FlashAttention-2's speed;
- the loss: ``loss_fn: fused_crossentropy``, the model's default, flash-attn's fused cross
  entropy (``Transformer.loss = "flash-attn"``);
- FSDP ``FULL_SHARD`` with Composer's ``DEFAULT`` mixed precision (parameters gathered in
  bf16, gradients reduced in fp32): ZeRO-3 over the 8 GPUs, 4 bytes a gradient reduced;
  activation checkpointing of every block where the row says so: full recomputation.

Every stack is priced as Megatron's (fused kernels, Megatron's host constants on A100);
eager PyTorch's LayerNorm, GeLU and residual adds move what Megatron's fused kernels move
for a model without biases or dropout. Nothing is fitted on these rows: they are checks, in
``validate`` (``DATASET``), and the error bars of a run on Composer (``RunConfig.framework``)
come from them. The H100 rows (bf16 and FP8) are not priced: llm-foundry's Triton kernel,
"only tested on A100" by its authors, was never measured on H100 (``EXCLUDED``).
"""

from __future__ import annotations

import dataclasses

from ..checks import require
from .attention import with_attention_kernel
from .config import RunConfig
from .errorbar import regime
from .hardware import GB, HARDWARE
from .transformer import Transformer

DATASET = "llm_foundry_mpt"
SOURCE = "small_model_overheads.csv"
PRESET = "A100-80GB"  # the preset of the runs' GPUs (their regimes' generation)
GPU_MEMORY = {"a100_80gb": 80 * GB, "a100_40gb": 40 * GB}
ATTENTION = "FlashAttention Triton"  # attn_impl: triton (submit_benchmarks.py's default)
LOSS = "flash-attn"  # loss_fn: fused_crossentropy (modeling_mpt.py's default)
VOCAB = 50368  # yamls/pretrain/mpt-*.yaml: GPT-NeoX's tokenizer, padded
EXCLUDED = {"h100_80gb": "llm-foundry's Triton attention kernel was never measured on H100"}


def mpt(row) -> Transformer:
    """The MPT model of one row (see the module)."""
    return Transformer(int(row["layers"]), int(row["hidden"]), int(row["heads"]), vocab=VOCAB,
                       tied_embeddings=True, name=str(row["model"]), loss=LOSS)


def run(row) -> RunConfig:
    """The run of one row: ZeRO-3 over its 8 GPUs, its microbatch and global batch."""
    return RunConfig(seq=int(row["seq_len"]), global_batch=int(row["global_batch_seqs"]),
                     d=int(row["gpus"]), microbatch=int(row["micro_batch"]), zero=3,
                     recompute="full" if str(row["activation_checkpointing"]) == "True"
                     else "none", reduce_bytes=4.0, framework="composer")


def hardware(gpu_type: str):
    """The A100 preset with the row's memory and llm-foundry's attention kernel."""
    gpu = dataclasses.replace(HARDWARE[PRESET], memory_bytes=GPU_MEMORY[gpu_type])
    return with_attention_kernel(gpu, ATTENTION)


def _table(data=None):
    pd = require("pandas", "sweep", "fastpp.model.validate_foundry")
    from .published import data_file

    frame = pd.read_csv(data_file(SOURCE, data))
    return frame[frame["category"] == "training_throughput"].reset_index(drop=True)


def _label(row) -> str:
    """``MPT-3b 80GB 2048 b10x2``: the model, the GPU's memory, the sequence, the microbatch
    and the gradient accumulation."""
    memory = str(row["gpu_type"]).split("_")[1].upper()
    return (f"{row['model']} {memory} {int(row['seq_len'])} b{int(row['micro_batch'])}"
            f"x{int(row['grad_accum'])}")


def _priced(data=None):
    """Each priced row (a dict), ``explain``'s row of its price, and its regime."""
    from .explain import explain

    for row in _table(data).to_dict("records"):
        if row["gpu_type"] in EXCLUDED:
            continue
        model, config = mpt(row), run(row)
        priced = explain(model, config, hardware(row["gpu_type"]), neighbours=0).row
        yield row, priced, regime(model, PRESET, config.seq, 1, config.gpus,
                                  framework=config.framework)


def validation_rows(data=None) -> list[tuple]:
    """``validate``'s rows of ``DATASET``, all checks: ``(dataset, row, quantity, measured,
    predicted, regime)``, the throughput in tokens a second a GPU."""
    return [(DATASET, _label(row), "tokens_per_s_per_gpu", float(row["value"]),
             priced["tokens_per_s"] / row["gpus"], where)
            for row, priced, where in _priced(data)]


def excluded(data=None):
    """The rows not priced: a DataFrame of ``model``, ``gpu_type``, ``precision``,
    ``seq_len`` and ``reason``."""
    frame = _table(data)
    out = frame.loc[frame["gpu_type"].isin(list(EXCLUDED)),
                    ["model", "gpu_type", "precision", "seq_len"]].copy()
    out["reason"] = out["gpu_type"].map(EXCLUDED)
    return out.reset_index(drop=True)


def foundry_rows(data=None):
    """Each priced run against fastpp's price (see the module).

    Returns
    -------
    pandas.DataFrame
        ``row`` (a label), ``model``, ``gpu_type``, ``seq_len``, ``micro_batch``,
        ``grad_accum``, ``checkpointing``, ``measured`` and ``predicted`` (tokens a second a
        GPU), ``step_error`` (the predicted over the measured step time, less 1),
        ``predicted_memory_gib`` and ``fits`` (in the run's GPU memory: every run ran).
    """
    pd = require("pandas", "sweep", "fastpp.model.validate_foundry")
    out = []
    for row, priced, _ in _priced(data):
        predicted = priced["tokens_per_s"] / row["gpus"]
        out.append({"row": _label(row), "model": row["model"], "gpu_type": row["gpu_type"],
                    "seq_len": int(row["seq_len"]), "micro_batch": int(row["micro_batch"]),
                    "grad_accum": int(row["grad_accum"]),
                    "checkpointing": str(row["activation_checkpointing"]) == "True",
                    "measured": float(row["value"]), "predicted": predicted,
                    "step_error": float(row["value"]) / predicted - 1.0,
                    "predicted_memory_gib": priced["peak_memory"] / 2**30,
                    "fits": bool(priced["fits"])})
    return pd.DataFrame(out)
