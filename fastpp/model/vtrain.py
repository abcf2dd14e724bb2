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

from ..checks import (
    MAX_INT,
    ScheduleError,
    ScheduleTypeError,
    in_file,
    known_keywords,
    positive_int,
)
from .config import RunConfig, as_model, as_run
from .hardware import HARDWARE, LINKS, Hardware, Link
from .hf import read_config
from .megatron import TOKENIZER_VOCAB, Imported, padded_vocab
from .transformer import Transformer

GPT2_VOCAB = TOKENIZER_VOCAB["GPT2BPETokenizer"]  # vTrainConfig's default vocabulary
HDR = LINKS["IB-200G"]  # 200 Gb/s a GPU: its share of the line rate and its latency
LINE_RATE = HDR.bandwidth / (200e9 / 8)
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


# RunConfig's fields as a vTrain configuration names them, for its messages
FILE_KEYS = {"global_batch": "global_batch_size", "microbatch": "micro_batch_size",
             "seq": "max_length", "t": "tensor_parallel_size", "d": "data_parallel_size",
             "p": "pipeline_parallel_size"}


@known_keywords("from_vtrain")
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
        degree is what ``num_gpus`` leaves, and without a pipeline a missing microbatch is
        ``global_batch / d``. A given microbatch is kept with ``p = 1`` too: vTrain's
        simulator replaces it there by ``global_batch / d``, but its measured runs with one
        stage differ by microbatch, as a launch with gradient accumulation does.

    Raises
    ------
    ScheduleError
        Naming the key: a value of the wrong type, a missing degree that cannot be derived,
        degrees whose product is not ``num_gpus``, layers that the stages do not divide, a
        GPU other than the A100, a model other than ``ShardedGptModel``, a schedule other
        than ``"1f1b"``, an unknown key.
    """
    data, where = read_config(config, "a vTrain configuration's JSON file")
    unknown = sorted(set(data) - set(KEYS), key=str)
    if unknown:
        raise ScheduleError(f"{where}: {unknown[0]!r} is not a vTrain configuration key "
                            f"(known: {', '.join(KEYS)})")
    # null is "not given" where vTrain's default is None (derived or optional); elsewhere
    # vTrainConfig would take the null itself, which no run has
    nulls = [key for key, value in data.items() if value is None and KEYS[key] is not None]
    if nulls:
        raise ScheduleError(f"{nulls[0]} must be given a value, or left out for vTrain's "
                            f"default {KEYS[nulls[0]]!r} (got null)")
    a = {key: data.get(key, default) for key, default in KEYS.items()}
    for key in ("gpu_name", "model_arch", "pipeline_scheduling", "trace_path"):
        if not isinstance(a[key], str):
            raise ScheduleTypeError(f"{key} must be a string (got {key}={a[key]!r})")
    for key in ("use_gradient_bucket", "use_checkpoint"):
        if not isinstance(a[key], bool):
            raise ScheduleTypeError(f"{key} must be true or false (got {key}={a[key]!r})")
    for key, want in (("gpu_name", "A100"), ("model_arch", "ShardedGptModel"),
                      ("pipeline_scheduling", "1f1b")):
        if a[key] != want:
            why = ", the one GPU of vTrain's with a fastpp preset" if key == "gpu_name" else ""
            raise ScheduleError(f"{key} must be {want!r}{why} (got {key}={a[key]!r})")
    for key in ("global_batch_size", "num_layers", "hidden_size", "num_attention_heads",
                "max_length", "vocab_size", "inter_node_bandwidth", "intra_node_bandwidth",
                "node_size", *(("ddp_bucket_size",) if a["ddp_bucket_size"] is not None else ())):
        positive_int(a[key], key, MAX_INT - 1)
    t, d, p, gpus = _degrees(a)
    if a["micro_batch_size"] is None and p > 1:
        raise ScheduleError("micro_batch_size must be given with pipeline_parallel_size > 1 "
                            "(got none)")
    if a["micro_batch_size"] is None and a["global_batch_size"] % d:  # (b = B / d, derived)
        raise ScheduleError(f"global_batch_size must be a multiple of data_parallel_size = {d} "
                            f"without micro_batch_size (got {a['global_batch_size']})")
    b = (a["global_batch_size"] // d if a["micro_batch_size"] is None else
         positive_int(a["micro_batch_size"], "micro_batch_size", MAX_INT - 1))
    for key, divisor, degree in (("num_attention_heads", "tensor_parallel_size", t),
                                 ("num_layers", "pipeline_parallel_size", p)):
        if a[key] % degree:
            raise ScheduleError(f"{key} must be a multiple of {divisor} = {degree} (got "
                                f"{key}={a[key]})")
    if a["hidden_size"] % a["num_attention_heads"]:  # (vTrainConfig.validate_config's)
        raise ScheduleError(f"hidden_size must be a multiple of num_attention_heads = "
                            f"{a['num_attention_heads']} (got hidden_size={a['hidden_size']})")
    model = Transformer(a["num_layers"], a["hidden_size"], a["num_attention_heads"],
                        vocab=padded_vocab(a["vocab_size"], t), tied_embeddings=True,
                        dropout=True, flash_attention=False,
                        name=_name(config) if name is None else name)
    try:
        run = RunConfig(seq=a["max_length"], global_batch=a["global_batch_size"], t=t, d=d,
                        p=p, microbatch=b, recompute="full" if a["use_checkpoint"] else "none",
                        sequence_parallel=False, zero=0,
                        gradient_overlap=a["use_gradient_bucket"], reduce_bytes=2.0)
    except ScheduleError as error:  # named as the file names them, where it does
        raise ScheduleError(f"{error}{in_file(error, FILE_KEYS)}") from None
    hardware = vtrain_cluster(a["inter_node_bandwidth"], a["node_size"])
    # (vTrain's Megatron runs fp16, priced as bf16: the same tensor-core speed and bytes)
    ignored = tuple(key for key in IGNORED if data.get(key) is not None) + (
        "fp16 (vTrain's runs): priced as bf16",)
    return Imported(model, run, ignored, gpus, hardware)


@known_keywords("vtrain_cluster")
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
    positive_int(inter_node_bandwidth, "inter_node_bandwidth", MAX_INT - 1)
    positive_int(node_size, "node_size", MAX_INT - 1)
    per_gpu = inter_node_bandwidth / node_size
    a100 = HARDWARE["A100-80GB"]
    return replace(a100, name=f"{a100.name} ({inter_node_bandwidth} Gb/s a node)",
                   gpus_per_node=node_size,
                   network=Link(f"IB-{per_gpu:g}G", LINE_RATE * per_gpu * 1e9 / 8, HDR.latency))


def _degrees(a: dict) -> tuple[int, int, int, int]:
    """``t, d, p, gpus``: one degree left out is what ``num_gpus`` leaves, as vTrain's
    ``validate_config`` derives it."""
    given = {key: positive_int(a[key], key, MAX_INT - 1) for key in DEGREES
             if a[key] is not None}
    gpus = None if a["num_gpus"] is None else positive_int(a["num_gpus"], "num_gpus",
                                                            MAX_INT - 1)
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
    """The file's name without ``.json``, or ``"vtrain"`` for a dict."""
    if isinstance(config, dict):
        return "vtrain"
    base = str(config).replace("\\", "/").rsplit("/", 1)[-1]
    return base[:-5] if base.endswith(".json") else base


def run_keys(c: RunConfig) -> dict:
    """The keys of a vTrain configuration that state the run ``c`` (not its model or
    cluster), unchecked: ``to_vtrain`` checks that vTrain runs it."""
    return {"num_gpus": c.gpus, "tensor_parallel_size": c.t, "data_parallel_size": c.d,
            "pipeline_parallel_size": c.p, "global_batch_size": c.global_batch,
            "micro_batch_size": c.microbatch, "max_length": c.seq,
            "use_gradient_bucket": c.gradient_overlap, "use_checkpoint": c.recompute == "full"}


@known_keywords("to_vtrain")
def to_vtrain(config: RunConfig, model: Transformer, hardware: Hardware | None = None) -> dict:
    """``config`` on ``model`` as a vTrain configuration: ``from_vtrain`` of it gives ``model``
    and ``config`` back (and ``hardware``, a ``vtrain_cluster``).

    Parameters
    ----------
    config : RunConfig
    model : Transformer
    hardware : Hardware, optional
        A ``vtrain_cluster`` (default: vTrain's, 800 Gb/s a node over 8 GPUs).

    Returns
    -------
    dict
        ``vTrainConfig``'s keys.

    Raises
    ------
    ScheduleError
        Naming the field vTrain cannot state (its runs are Megatron's GPT in 1F1B, without
        sequence parallelism, a distributed optimizer or selective recomputation), or a
        ``hardware`` that is not a ``vtrain_cluster``.
    """
    c, model = as_run(config), as_model(model)
    if model is None:
        raise ScheduleTypeError("model must be a fastpp.model.Transformer (got None)")
    for field in ("cp", "ep", "etp"):  # (they would change num_gpus, not come back named)
        if getattr(c, field) != 1:
            raise ScheduleError(f"to_vtrain cannot state {field}={getattr(c, field)}: vTrain's "
                                f"runs have 1")
    hardware = vtrain_cluster() if hardware is None else hardware
    if not isinstance(hardware, Hardware):
        raise ScheduleTypeError(f"hardware must be a fastpp.model.Hardware (got "
                                f"{type(hardware).__name__})")
    node = round(hardware.network.bandwidth / LINE_RATE * 8 / 1e9 * hardware.gpus_per_node)
    out = {**run_keys(c), "gpu_name": "A100", "model_arch": "ShardedGptModel",
           "num_layers": model.layers, "hidden_size": model.hidden,
           "num_attention_heads": model.heads, "vocab_size": model.vocab,
           "pipeline_scheduling": "1f1b", "inter_node_bandwidth": node,
           "node_size": hardware.gpus_per_node}
    back = from_vtrain(out, name=model.name)
    for field in c.__dataclass_fields__:
        if getattr(back.config, field) != getattr(c, field):
            raise ScheduleError(f"to_vtrain cannot state {field}={getattr(c, field)!r}: "
                                f"vTrain's runs have {getattr(back.config, field)!r}")
    for field in model.__dataclass_fields__:
        if getattr(back.model, field) != getattr(model, field):
            raise ScheduleError(f"to_vtrain cannot state the model's {field}="
                                f"{getattr(model, field)!r}: vTrain's GPT has "
                                f"{getattr(back.model, field)!r}")
    if back.hardware != hardware:
        raise ScheduleError(f"hardware must be a vtrain_cluster (the A100 preset with an "
                            f"InfiniBand network; got {hardware.name})")
    return out
