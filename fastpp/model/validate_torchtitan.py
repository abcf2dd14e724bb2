"""torchtitan's own runs, as ``from_torchtitan`` reads them and ``explain`` prices them.

``torchtitan_h100.csv`` (shipped beside this module) holds the 18 runs of torchtitan's
benchmark of Llama 3.1 on H100 (``benchmarks/llama3_h100_202412_torchtitan.md``, December
2024): FSDP, context, tensor and pipeline parallelism, torch.compile and Float8 on or off.
Each row is written as the job config it describes (v0.2's layout: the row's degrees and
batch, ``[compile] enable``, ``quantize.linear.float8`` for Float8, the op-level policy for
its selective checkpointing), read by ``fastpp.model.from_torchtitan`` with the flavor's
preset, and priced by ``fastpp.model.explain.explain`` on the ``H100-80GB`` preset, as a
user of torchtitan would price it. Nothing is fitted on these rows: they are checks of the
cost model on a stack it was not calibrated for (eager or compiled PyTorch, torchao's
Float8, PyTorch's SDPA), on a GPU below the preset (500 W, HBM2e), and in ``validate``
(``DATASET``) the checks behind the error bar of every run on torchtitan
(``RunConfig.framework``).
"""

from __future__ import annotations

from pathlib import Path

from ..checks import require
from .errorbar import regime
from .hardware import HARDWARE, preset

DATASET = "torchtitan_h100"
TORCHTITAN_H100 = Path(__file__).with_name("torchtitan_h100.csv")
FLAVORS = {"llama3-8b": "8B", "llama3-70b": "70B", "llama3-405b": "405B"}


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


def _priced(hardware):
    """Each row of ``torchtitan_h100.csv`` (a dict), its job as ``from_torchtitan`` reads it,
    and ``explain``'s row of its price on ``hardware``."""
    pd = require("pandas", "sweep", "fastpp.model.validate_torchtitan")
    from .explain import explain
    from .torchtitan import from_torchtitan

    for row in pd.read_csv(TORCHTITAN_H100, comment="#").to_dict("records"):
        imported = from_torchtitan(job_text(row), gpus=row["gpus"], model=row["model"])
        yield row, imported, explain(imported.model, imported.config, hardware,
                                     neighbours=0).row


def validation_rows(hardware="H100-80GB") -> list[tuple]:
    """``validate``'s rows of ``DATASET``, all checks: ``(dataset, row, quantity, measured,
    predicted, regime)``, the throughput in tokens a second a GPU, the regime on
    torchtitan's framework (``fastpp.model.errorbar``)."""
    hardware = preset(HARDWARE, hardware, "hardware")
    return [(DATASET, row["row"], "tokens_per_s_per_gpu", float(row["tokens_per_s_per_gpu"]),
             priced["tokens_per_s"] / row["gpus"],
             regime(imported.model, hardware, row["seq"], row["tp"], row["gpus"],
                    framework=imported.config.framework))
            for row, imported, priced in _priced(hardware)]


def torchtitan_rows(hardware="H100-80GB"):
    """Each run of ``torchtitan_h100.csv`` against fastpp's price of its job config.

    Returns
    -------
    pandas.DataFrame
        The file's columns, plus ``predicted`` (tokens a second a GPU), ``error`` (predicted
        over measured throughput, less 1), ``step_error`` (the predicted over the measured
        step time, less 1: measured over predicted throughput), ``expected_error`` and
        ``extrapolated`` (the prediction's error bar: in sample, these runs being its checks;
        ``errorbar.coverage`` leaves them out), ``within_bar``, ``predicted_memory_gib`` and
        ``fits``.
    """
    pd = require("pandas", "sweep", "fastpp.model.validate_torchtitan")
    out = []
    for row, _, priced in _priced(hardware):
        predicted = priced["tokens_per_s"] / row["gpus"]
        measured = row["tokens_per_s_per_gpu"]
        step_error = measured / predicted - 1.0
        out.append({**row, "predicted": predicted, "error": predicted / measured - 1.0,
                    "step_error": step_error, "expected_error": priced["expected_error"],
                    "extrapolated": priced["extrapolated"],
                    "within_bar": abs(step_error) <= priced["expected_error"],
                    "predicted_memory_gib": priced["peak_memory"] / 2**30,
                    "fits": bool(priced["fits"])})
    return pd.DataFrame(out)
