"""llm-foundry's MPT benchmark: small models on one node under FSDP, priced as their code ran.

``small_model_overheads.csv``'s ``training_throughput`` rows are llm-foundry's benchmark
tables (``scripts/train/benchmarking/README.md``, last changed 2024-04-22): MPT models of
125M to 3B parameters on 8 GPUs of one node, Composer's FSDP ``FULL_SHARD``, sequences of
512 to 65,536 tokens, each with its microbatch and gradient accumulation. What the runs ran
where the table is silent is read from the code that made each table: the A100 80 GB table
from llm-foundry at b2a43a147 (October 2023, which runs llm-foundry v0.3.0: Composer 0.16,
flash-attn 1.0.9), the A100 40 GB table from mosaicml/examples at 9fa3ceb9a (April 2023:
MosaicGPT, Composer 0.13, flash-attn 0.2.8), each with its ``submit_benchmarks.py``, its
``mpt-*.yaml`` configs and its model code:

- the model (``mpt``): the row's layers, hidden size and heads; a 4h MLP with GeLU;
  LayerNorm; the output layer tied to the embedding; GPT-NeoX's vocabulary padded to 50,368;
  no dropout. Its biases (MPT's ``no_bias`` is off by default) and its learned position
  table (``seq x h`` parameters, 6% of the 3B model's at 65,536 tokens) are not priced, as
  Megatron's biases are not;
- the attention: ``attn_impl: triton``, ``submit_benchmarks.py``'s default, which runs
  FlashAttention in Triton (``flash_attn_triton.py``, on the Triton of December 2022). No
  table here measures that kernel; its author states that its forward and backward
  together run slightly slower than the first FlashAttention's (CUDA), which
  FlashAttention-2's README figure measures on A100, so that kernel prices it
  (``ATTENTION``, a stand-in: 0.4-0.7 of FlashAttention-2's speed);
- the loss: ``loss_fn: fused_crossentropy``, the model's default, flash-attn's fused cross
  entropy (``Transformer.loss = "flash-attn"``);
- the train metrics: Composer computes the model's two, ``LanguageCrossEntropy`` and
  ``LanguagePerplexity``, on every microbatch's logits after its backward, each PyTorch's
  cross entropy in fp32 under autocast (``RunConfig.train_metrics``, ``TRAIN_METRICS``; the
  flag that turns them off, ``use_train_metrics``, defaults to on and neither table's
  configs set it);
- ZeRO-3 over the 8 GPUs (``FULL_SHARD``), gradients reduced in bf16 under the 40 GB table's
  ``PURE`` mixed precision and in fp32 under the 80 GB table's ``DEFAULT`` (as Composer has
  reduced them since 0.16.4; 0.16.3, which llm-foundry v0.3.0 also allows, reduced them in
  bf16: no row's price moves by 0.1% between the two); full recomputation where the row
  checkpoints its activations;
- the GPUs: the A100 preset with the row's memory, and on the 40 GB A100 its HBM2's 1,555
  GB/s against the 80 GB's 2,039 (the preset's memory-bound rate scaled by their ratio).

Every stack is priced as Megatron's: eager PyTorch's LayerNorm, GeLU and residual adds, with
the biases in the products' epilogues, move what Megatron's fused kernels move in a block
without dropout. Nothing is fitted on these rows: they are checks, in ``validate``
(``DATASET``), and the error bars of a run on Composer (``RunConfig.framework``) come from
them. The H100 rows (bf16 and FP8) are not priced (``EXCLUDED``): the Triton kernel's
author relates it to FlashAttention's speed on A100 alone ("only tested on A100").
"""

from __future__ import annotations

import dataclasses

from ..checks import require
from .attention import with_attention_kernel
from .config import RunConfig
from .errorbar import regime
from .foundry import TRAIN_METRICS  # MPT's two, as from_llm_foundry reads them
from .hardware import GB, HARDWARE
from .transformer import Transformer

DATASET = "llm_foundry_mpt"
SOURCE = "small_model_overheads.csv"
PRESET = "A100-80GB"  # the preset of the runs' GPUs (their regimes' generation)
# per GPU of the table: its memory, its HBM's peak rate over the preset's 2,039 GB/s, and the
# bytes a gradient is reduced in (the 40 GB table's PURE mixed precision: bf16)
GPUS = {"a100_80gb": (80 * GB, 1.0, 4.0), "a100_40gb": (40 * GB, 1555 / 2039, 2.0)}
ATTENTION = "FlashAttention"  # the stand-in for attn_impl: triton (see the module)
LOSS = "flash-attn"  # loss_fn: fused_crossentropy (the model's default)
VOCAB = 50368  # the mpt-*.yaml configs: GPT-NeoX's tokenizer, padded
EXCLUDED = {"h100_80gb": "llm-foundry's Triton attention kernel is related to a measured one "
                         "on A100 alone"}


def mpt(row) -> Transformer:
    """The MPT model of one benchmark row.

    Parameters
    ----------
    row : mapping
        A row of ``table()``: its ``layers``, ``hidden``, ``heads`` and ``model``.

    Returns
    -------
    Transformer
        GeLU, tied embeddings, ``VOCAB`` words, flash-attn's loss (see the module).
    """
    return Transformer(int(row["layers"]), int(row["hidden"]), int(row["heads"]), vocab=VOCAB,
                       tied_embeddings=True, name=str(row["model"]), loss=LOSS)


def run(row) -> RunConfig:
    """The run of one benchmark row.

    Parameters
    ----------
    row : mapping
        A row of ``table()``.

    Returns
    -------
    RunConfig
        ZeRO-3 over its GPUs, its sequence, microbatch and global batch, full recomputation
        where it checkpoints, its table's gradient bytes and the train metrics, on
        Composer's framework.
    """
    return RunConfig(seq=int(row["seq_len"]), global_batch=int(row["global_batch_seqs"]),
                     d=int(row["gpus"]), microbatch=int(row["micro_batch"]), zero=3,
                     recompute="full" if str(row["activation_checkpointing"]) == "True"
                     else "none", reduce_bytes=GPUS[row["gpu_type"]][2],
                     train_metrics=TRAIN_METRICS, framework="composer")


def hardware(gpu_type: str, attention: str = ATTENTION):
    """The GPUs of one of the benchmark's tables.

    Parameters
    ----------
    gpu_type : {"a100_80gb", "a100_40gb"}
        The table's ``gpu_type``.
    attention : str
        The measured kernel that prices the attention (``fastpp.model.attention``).

    Returns
    -------
    StackHardware
        The A100 preset with the table's memory and memory-bound rate, and ``attention``.
    """
    memory, rate, _ = GPUS[gpu_type]
    preset = HARDWARE[PRESET]
    gpu = dataclasses.replace(preset, memory_bytes=memory,
                              memory_bandwidth=preset.memory_bandwidth * rate)
    return with_attention_kernel(gpu, attention)


def table(data=None):
    """The benchmark's rows: ``small_model_overheads.csv``'s ``training_throughput`` rows.

    Parameters
    ----------
    data : path, optional
        The published data folder (default ``fastpp.model.published.DATA``).

    Returns
    -------
    pandas.DataFrame
    """
    pd = require("pandas", "sweep", "fastpp.model.validate_foundry")
    from .published import data_file

    frame = pd.read_csv(data_file(SOURCE, data))
    frame = frame[frame["category"] == "training_throughput"].reset_index(drop=True)
    return frame.astype({"value": float})


def _label(row) -> str:
    """``MPT-3b 80GB 2048 b10x2``: the model, the GPU's memory, the sequence, the microbatch
    and the gradient accumulation."""
    memory = str(row["gpu_type"]).split("_")[1].upper()
    return (f"{row['model']} {memory} {int(row['seq_len'])} b{int(row['micro_batch'])}"
            f"x{int(row['grad_accum'])}")


def _priced(data=None):
    """Each priced row (a dict), ``explain``'s row of its price, and its regime."""
    from .explain import explain

    for row in table(data).to_dict("records"):
        if row["gpu_type"] in EXCLUDED:
            continue
        model, config = mpt(row), run(row)
        priced = explain(model, config, hardware(row["gpu_type"]), neighbours=0).row
        yield row, priced, regime(model, PRESET, config.seq, 1, config.gpus,
                                  framework=config.framework)


def validation_rows(data=None) -> list[tuple]:
    """``validate``'s rows of ``DATASET``, all checks: ``(dataset, row, quantity, measured,
    predicted, regime)``, the throughput in tokens a second a GPU."""
    return [(DATASET, _label(row), "tokens_per_s_per_gpu", row["value"],
             priced["tokens_per_s"] / row["gpus"], where)
            for row, priced, where in _priced(data)]


def excluded(data=None):
    """The rows not priced.

    Parameters
    ----------
    data : path, optional
        As for ``table``.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``gpu_type``, ``precision``, ``seq_len`` and ``reason``.
    """
    frame = table(data)
    out = frame.loc[frame["gpu_type"].isin(list(EXCLUDED)),
                    ["model", "gpu_type", "precision", "seq_len"]].copy()
    out["reason"] = out["gpu_type"].map(EXCLUDED)
    return out.reset_index(drop=True)


def foundry_rows(data=None):
    """Each priced run against fastpp's price (see the module).

    Parameters
    ----------
    data : path, optional
        As for ``table``.

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
                    "measured": row["value"], "predicted": predicted,
                    "step_error": row["value"] / predicted - 1.0,
                    "predicted_memory_gib": priced["peak_memory"] / 2**30,
                    "fits": bool(priced["fits"])})
    return pd.DataFrame(out)
