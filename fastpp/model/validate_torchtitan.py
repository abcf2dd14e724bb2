"""torchtitan's own runs, as ``from_torchtitan`` reads them and ``explain`` prices them.

``torchtitan_h100.csv`` (shipped beside this module) holds the 18 runs of torchtitan's
benchmark of Llama 3.1 on H100 (``benchmarks/llama3_h100_202412_torchtitan.md``, December
2024): FSDP, context, tensor and pipeline parallelism, torch.compile and Float8 on or off.
Each row is written as the job config it describes (v0.2's layout: the row's degrees and
batch, ``[compile] enable``, ``quantize.linear.float8`` for Float8, the op-level policy for
its selective checkpointing), read by ``fastpp.model.from_torchtitan`` with the flavor's
preset, and priced by ``fastpp.model.explain.explain`` on the GPUs the benchmark states
(``benchmark_hardware``: the H100 preset with their memory, the attention kernel their
PyTorch ran and torchao's Float8 scaling; an uncompiled run with torchtitan's 2024 RMSNorm,
``BENCHMARK_EAGER``), as a user of torchtitan would price them. Nothing is fitted on these
rows: they are checks of the cost model on a stack it was not calibrated for (torchtitan's
kernels, eager or compiled), on GPUs held to a 500 W power limit, which is not priced, and in
``validate`` (``DATASET``) the checks behind the error bar of every run on torchtitan
(``RunConfig.framework``), in H100's regimes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..checks import require
from .attention import with_attention_kernel
from .errorbar import error_bar, regime
from .hardware import GB, HARDWARE

DATASET = "torchtitan_h100"
TORCHTITAN_H100 = Path(__file__).with_name("torchtitan_h100.csv")
FLAVORS = {"llama3-8b": "8B", "llama3-70b": "70B", "llama3-405b": "405B"}
PRESET = "H100-80GB"  # the preset of the runs' GPU generation: their regimes' (errorbar)
# The benchmark's GPUs as it states them: 96 GB of HBM2e at 2.4 TB/s peak, a 500 W power limit
BENCHMARK_MEMORY, BENCHMARK_BANDWIDTH_PEAK, H100_BANDWIDTH_PEAK = 96 * GB, 2.4e12, 3.35e12
# The attention kernel the runs ran: torchtitan at 9dec370 calls PyTorch's
# scaled_dot_product_attention with PyTorch's own backend order, and PyTorch's nightlies of
# December 2024 put FlashAttention (2) first on H100, cuDNN's attention being opt-in since
# pytorch/pytorch#138522 (pytorch#142132, on 2.6.0.dev20241204: "expected"). torchtitan has
# asked for cuDNN first since March 2025 (pytorch/torchtitan#1000; its ScaledDotProductAttention
# at 238fa99), the preset's own kernel, which a job of today's torchtitan is priced with.
BENCHMARK_ATTENTION = "FlashAttention-2"
# An uncompiled run's RMSNorm: torchtitan's own at 9dec370 (norms.RMSNorm, six ops in fp32),
# which it replaced by PyTorch's nn.RMSNorm in March 2025 (pytorch/torchtitan#985), the one
# from_torchtitan prices for a job of today
BENCHMARK_EAGER = "fp32-norm"
# Its loss: PyTorch's cross_entropy on fp32 logits, never compiled (torchtitan compiled the
# model's blocks alone at 9dec370), whatever [compile] says of a job of today
BENCHMARK_LOSS = "cross-entropy"


def benchmark_hardware():
    """The benchmark's GPUs as it states them, on the H100 preset.

    96 GB of memory; a memory-bound kernel's rate at the preset's share of its peak (2.9 of
    3.35 TB/s) of their HBM2e's 2.4 TB/s; PyTorch's attention of December 2024
    (``BENCHMARK_ATTENTION``); and torchao's Float8 as torchtitan at 9dec370 configures it
    (its ``Float8LinearConfig``: every cast scaled dynamically, tensor by tensor, the
    output's product in fast accumulation and the gradients' not), which is what
    ``fp8_current_scaling`` prices (``torchtitan.FLOAT8``). Their 500 W power limit is not
    priced: no source here says what it takes from the products' speed (the benchmark:
    "tuning it up to 700W TDP can potentially provide further speedups").

    Returns
    -------
    Hardware
        A ``StackHardware`` of the ``H100-80GB`` preset with those changes.
    """
    h100 = HARDWARE[PRESET]
    gpu = dataclasses.replace(h100, memory_bytes=BENCHMARK_MEMORY,
                              memory_bandwidth=h100.memory_bandwidth * BENCHMARK_BANDWIDTH_PEAK
                              / H100_BANDWIDTH_PEAK, fp8_current_scaling=True)
    return with_attention_kernel(gpu, BENCHMARK_ATTENTION)


def job_text(row) -> str:
    """The torchtitan job config (TOML text) of one row of ``torchtitan_h100.csv``."""
    lines = ["[model]", 'name = "llama3"', f'flavor = "{FLAVORS[row["model"]]}"']
    if row["fp8"]:
        lines.append('converters = ["quantize.linear.float8"]')
    lines += ["[training]", f"local_batch_size = {row['local_batch']}",
              f"global_batch_size = {row['global_batch']}", f"seq_len = {row['seq']}",
              "[parallelism]", "data_parallel_replicate_degree = 1",
              f"data_parallel_shard_degree = {row['dp']}",
              f"tensor_parallel_degree = {row['tp']}",
              f"pipeline_parallel_degree = {row['pp']}",
              f"context_parallel_degree = {row['cp']}",
              f"enable_async_tensor_parallel = {str(bool(row['async_tp'])).lower()}"]
    if row["pp"] > 1:
        lines += [f'pipeline_parallel_schedule = "{row["schedule"]}"',
                  f"pipeline_parallel_microbatch_size = {row['microbatch']}"]
    lines += ["[compile]", f"enable = {str(bool(row['compile'])).lower()}",
              "[activation_checkpoint]", f'mode = "{row["ac"]}"']
    if row["ac"] == "selective":
        lines.append('selective_ac_option = "op"')
    return "\n".join(lines) + "\n"


def _priced():
    """Each row of ``torchtitan_h100.csv`` (a dict), ``explain``'s row of its job's price on
    ``benchmark_hardware()`` (an uncompiled run with ``BENCHMARK_EAGER``'s norm, every run
    with ``BENCHMARK_LOSS``), and its
    regime: on H100 (the GPU's generation) and torchtitan's framework. ``explain``'s own
    bar is on a GPU no check ran on (extrapolated); the rows' bars are their regime's."""
    pd = require("pandas", "sweep", "fastpp.model.validate_torchtitan")
    from .explain import explain
    from .torchtitan import from_torchtitan

    hardware = benchmark_hardware()
    for row in pd.read_csv(TORCHTITAN_H100, comment="#").to_dict("records"):
        model, config = from_torchtitan(job_text(row), gpus=row["gpus"], model=row["model"])
        model = dataclasses.replace(model, eager=BENCHMARK_EAGER if model.eager else "",
                                    loss=BENCHMARK_LOSS)
        yield row, explain(model, config, hardware, neighbours=0).row, \
            regime(model, PRESET, row["seq"], row["tp"], row["gpus"],
                   framework=config.framework)


def validation_rows() -> list[tuple]:
    """``validate``'s rows of ``DATASET``, all checks: ``(dataset, row, quantity, measured,
    predicted, regime)``, the throughput in tokens a second a GPU."""
    return [(DATASET, row["row"], "tokens_per_s_per_gpu", float(row["tokens_per_s_per_gpu"]),
             priced["tokens_per_s"] / row["gpus"], where) for row, priced, where in _priced()]


def torchtitan_rows():
    """Each run of ``torchtitan_h100.csv`` against fastpp's price of its job config on the
    benchmark's GPUs (``benchmark_hardware``).

    Returns
    -------
    pandas.DataFrame
        The file's columns, plus ``predicted`` (tokens a second a GPU), ``error`` (predicted
        over measured throughput, less 1), ``step_error`` (the predicted over the measured
        step time, less 1: measured over predicted throughput), ``expected_error`` and
        ``extrapolated`` (the error bar of a torchtitan job in the run's regime on H100: in
        sample, these runs being its checks; ``errorbar.coverage`` leaves them out),
        ``within_bar``, ``predicted_memory_gib`` and ``fits`` (in the runs' 96 GB).
    """
    pd = require("pandas", "sweep", "fastpp.model.validate_torchtitan")
    out = []
    for row, priced, where in _priced():
        predicted = priced["tokens_per_s"] / row["gpus"]
        measured = row["tokens_per_s_per_gpu"]
        step_error = measured / predicted - 1.0
        bar = error_bar(where)
        out.append({**row, "predicted": predicted, "error": predicted / measured - 1.0,
                    "step_error": step_error, "expected_error": bar.expected,
                    "extrapolated": bar.extrapolated,
                    "within_bar": abs(step_error) <= bar.expected,
                    "predicted_memory_gib": priced["peak_memory"] / 2**30,
                    "fits": bool(priced["fits"])})
    return pd.DataFrame(out)
