"""vTrain's run configurations (Bang et al., MICRO 2024; VIA-Research/vTrain): the JSON its
``vTrainConfig`` reads, as a model, a run and the cluster it describes.

vTrain's configurations run Megatron's GPT (its ``ShardedGptModel``): GPT-2's vocabulary padded
to a multiple of ``128 t``, tied embeddings, dropout, the unfused attention, fp16 with the
gradients all-reduced in fp16 (assumed), no sequence parallelism and no distributed
optimizer, 1F1B with blocking hand-offs: what ``fastpp.model.validate_small`` prices vTrain's
measured single-node runs with, so a configuration read here is priced as those rows are.

The cluster is the A100 preset with vTrain's own description of the network: its
``inter_node_bandwidth`` (Gb/s a node, in all) shared by the node's ``node_size`` GPUs, at the
90% of the line rate the other InfiniBand presets take; its ``intra_node_bandwidth`` (a single
all-reduce bandwidth) is left for the preset's NCCL protocols, fitted to nccl-tests on a DGX
A100 (``fastpp.model.hardware``).
"""

from __future__ import annotations

from dataclasses import replace

from ..checks import ScheduleError, ScheduleTypeError, positive_int
from .config import RunConfig
from .hardware import HARDWARE, Hardware, Link
from .hf import read_config
from .megatron import Imported
from .transformer import Transformer

GPT2_VOCAB = 50257
LINE_RATE = 0.9  # of a NIC's line rate a ring reaches (the IB presets')
IB_LATENCY = 8e-6  # the IB presets' latency per step
# vTrainConfig's keys and defaults (src/config.py); None: required, or derived as vTrain does
KEYS = {"num_gpus": None, "tensor_parallel_size": None, "data_parallel_size": None,
        "pipeline_parallel_size": None, "gpu_name": "A100", "global_batch_size": 1920,
        "micro_batch_size": None, "model_arch": "ShardedGptModel", "num_layers": 105,
        "hidden_size": 20480, "num_attention_heads": 128, "max_length": 2048,
        "vocab_size": GPT2_VOCAB, "use_gradient_bucket": False, "use_checkpoint": True,
        "ddp_bucket_size": None, "inter_node_bandwidth": 800, "intra_node_bandwidth": 150,
        "pipeline_scheduling": "1f1b", "node_size": 8, "trace_path": "trace/"}
# keys read but not priced: intra_node_bandwidth (the preset's NCCL protocols price the node's
# collectives), ddp_bucket_size (the overlapped reduction is priced per backward, not per
# bucket), trace_path (vTrain's kernel traces)
IGNORED = ("intra_node_bandwidth", "ddp_bucket_size", "trace_path")
DEGREES = ("tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size")


def from_vtrain(config, name: str | None = None) -> Imported:
    """The model, run and cluster of a vTrain configuration.

    Parameters
    ----------
    config : str, os.PathLike or dict
        A vTrain configuration file (``vTrainConfig.save_to_file``'s JSON) or its dict.
    name : str, optional
        The model's name (default: the file's name without ``.json``, or ``"vtrain"``).

    Returns
    -------
    Imported
        ``model, config = from_vtrain(...)``; ``.hardware`` the cluster (the A100 preset, its
        network per vTrain's ``inter_node_bandwidth`` and ``node_size``), ``.gpus`` the GPUs,
        ``.ignored`` the keys not priced. Price it with ``plan(run.model,
        hardware=run.hardware, config=run.config)``. As ``vTrainConfig`` does, one missing
        degree is what ``num_gpus`` leaves. The microbatch is the file's, with ``p = 1``
        too: vTrain's simulator takes ``global_batch / d`` there, but its measured runs with
        one stage differ by microbatch, as a launch with gradient accumulation does.

    Raises
    ------
    ScheduleError
        Naming the key: a value of the wrong type, a missing degree that cannot be derived,
        degrees whose product is not ``num_gpus``, a GPU other than the A100, a model other
        than ``ShardedGptModel``, a schedule other than ``"1f1b"``, an unknown key.
    """
    data, where = read_config(config)
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ScheduleError(f"{where}: {unknown[0]} is not a vTrain configuration key (known: "
                            f"{', '.join(KEYS)})")
    a = {key: data.get(key, default) for key, default in KEYS.items()}
    for key in ("gpu_name", "model_arch", "pipeline_scheduling"):
        if not isinstance(a[key], str):
            raise ScheduleTypeError(f"{key} must be a string (got {key}={a[key]!r})")
    for key in ("use_gradient_bucket", "use_checkpoint"):
        if not isinstance(a[key], bool):
            raise ScheduleTypeError(f"{key} must be true or false (got {key}={a[key]!r})")
    if a["gpu_name"] != "A100":
        raise ScheduleError(f"gpu_name must be 'A100', the one GPU of vTrain's with a fastpp "
                            f"preset (got gpu_name={a['gpu_name']!r})")
    if a["model_arch"] != "ShardedGptModel":
        raise ScheduleError(f"model_arch must be 'ShardedGptModel' (got "
                            f"model_arch={a['model_arch']!r})")
    if a["pipeline_scheduling"] != "1f1b":
        raise ScheduleError(f"pipeline_scheduling must be '1f1b' (got "
                            f"pipeline_scheduling={a['pipeline_scheduling']!r})")
    t, d, p, gpus = _degrees(a)
    for key in ("global_batch_size", "num_layers", "hidden_size", "num_attention_heads",
                "max_length", "vocab_size", "inter_node_bandwidth", "node_size"):
        positive_int(a[key], key)
    if a["micro_batch_size"] is None:
        raise ScheduleError("micro_batch_size must be given (got none)")
    b = positive_int(a["micro_batch_size"], "micro_batch_size")
    if a["num_attention_heads"] % t:
        raise ScheduleError(f"num_attention_heads must be a multiple of tensor_parallel_size "
                            f"= {t} (got num_attention_heads={a['num_attention_heads']})")
    step = 128 * t  # Megatron's padding of the vocabulary
    model = Transformer(a["num_layers"], a["hidden_size"], a["num_attention_heads"],
                        vocab=-(-a["vocab_size"] // step) * step, tied_embeddings=True,
                        dropout=True, flash_attention=False, name=name or _name(config))
    run = RunConfig(seq=a["max_length"], global_batch=a["global_batch_size"], t=t, d=d, p=p,
                    microbatch=b, recompute="full" if a["use_checkpoint"] else "none",
                    sequence_parallel=False, zero=0, gradient_overlap=a["use_gradient_bucket"],
                    reduce_bytes=2.0)
    hardware = vtrain_cluster(a["inter_node_bandwidth"], a["node_size"])
    ignored = tuple(key for key in IGNORED if data.get(key) is not None)
    return Imported(model, run, ignored, gpus, hardware)


def vtrain_cluster(inter_node_bandwidth: int = 800, node_size: int = 8) -> Hardware:
    """The A100 preset on vTrain's network: ``inter_node_bandwidth`` Gb/s a node, in all,
    over ``node_size`` GPUs (vTrain's defaults: 800 and 8).

    Parameters
    ----------
    inter_node_bandwidth : int
        Gb/s a node sends, all its NICs together (vTrain's key).
    node_size : int
        GPUs in a node.

    Returns
    -------
    Hardware
    """
    positive_int(inter_node_bandwidth, "inter_node_bandwidth")
    positive_int(node_size, "node_size")
    per_gpu = inter_node_bandwidth / node_size
    a100 = HARDWARE["A100-80GB"]
    return replace(a100, name=f"{a100.name} ({inter_node_bandwidth} Gb/s a node)",
                   gpus_per_node=node_size,
                   network=Link(f"IB-{per_gpu:g}G", LINE_RATE * per_gpu * 1e9 / 8, IB_LATENCY))


def _degrees(a: dict) -> tuple[int, int, int, int]:
    """``t, d, p, gpus``: one degree left out is what ``num_gpus`` leaves, as vTrain's
    ``validate_config`` derives it."""
    given = {key: positive_int(a[key], key) for key in DEGREES if a[key] is not None}
    gpus = None if a["num_gpus"] is None else positive_int(a["num_gpus"], "num_gpus")
    missing = [key for key in DEGREES if key not in given]
    if missing and (gpus is None or len(missing) > 1):
        raise ScheduleError(f"{missing[0]} must be given (got none; vTrain derives one degree "
                            f"from num_gpus, with the other two given)")
    if missing:
        rest = 1
        for value in given.values():
            rest *= value
        if gpus % rest:
            raise ScheduleError(f"num_gpus must be a multiple of the other degrees' product "
                                f"{rest} (got num_gpus={gpus})")
        given[missing[0]] = gpus // rest
    t, d, p = (given[key] for key in DEGREES)
    if gpus is not None and gpus != t * d * p:
        raise ScheduleError(f"num_gpus must be tensor_parallel_size * data_parallel_size * "
                            f"pipeline_parallel_size = {t * d * p} (got num_gpus={gpus})")
    return t, d, p, t * d * p


def _name(config) -> str:
    if isinstance(config, dict):
        return "vtrain"
    base = str(config).replace("\\", "/").rsplit("/", 1)[-1]
    return base[:-5] if base.endswith(".json") else base
