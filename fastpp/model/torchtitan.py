"""``from_torchtitan`` and ``to_torchtitan``: torchtitan's TOML job config (v0.2) as a run.

Read: ``[model]`` (``name``, ``flavor``, ``hf_assets_path``, ``converters``), ``[training]``
(``local_batch_size``, ``global_batch_size``, ``seq_len``), ``[parallelism]`` (the degrees,
``pipeline_parallel_schedule``, ``pipeline_parallel_microbatch_size``,
``pipeline_parallel_layers_per_stage``, ``fsdp_reshard_after_forward``,
``context_parallel_rotate_method``) and ``[activation_checkpoint]`` (``mode``,
``selective_ac_option``); torchtitan's older places of the same keys (``[training]`` and
``[experimental]`` degrees, ``[float8] enable_float8_linear``) too. Every other key that may
change the run is listed in ``ignored``.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib

from ..checks import (
    MAX_INT,
    ScheduleError,
    ScheduleTypeError,
    digits,
    known_keywords,
    near,
    nonnegative_int,
    one_of,
    positive_int,
)
from .config import OP_LEVEL, RunConfig, as_model, as_run, data_parallel, global_batch_of
from .hf import from_hf, given_model
from .layout import Layout, as_layout, even_layers, torchtitan_layers
from .megatron import Imported
from .presets import MODELS
from .transformer import Transformer

# torchtitan's schedule names (torch.distributed.pipelining's classes without "Schedule")
SCHEDULES = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved-1f1b",
             "LoopedBFS": "looped-bfs", "InterleavedZeroBubble": "interleaved-zb",
             "ZBVZeroBubble": "zbv", "DualPipeV": "dualpipev"}
SINGLE_STAGE = ("1F1B", "GPipe")
NAMES = {ours: theirs for theirs, ours in SCHEDULES.items()}  # fastpp's name -> torchtitan's
# context_parallel_rotate_method of a RunConfig's cp_comm: PyTorch's own, or the nearest for
# Transformer Engine's (which torchtitan does not run)
ROTATE = {"torch-allgather": "allgather", "torch-alltoall": "alltoall", "all-gather": "allgather",
          "ring": "alltoall"}
# converters whose products run in 8 bits: v0.1's "float8", v0.2's "quantize.linear.float8",
# "quantize.grouped_mm.float8" and the MX ones (MXFP8, priced as fp8)
FP8_CONVERTERS = ("float8", "mx")
# torchtitan's flavors with a preset of the same published shape
FLAVORS = {("llama3", "8B"): "llama3-8b", ("llama3", "70B"): "llama3-70b",
           ("llama3", "405B"): "llama3-405b", ("deepseek_v3", "671B"): "deepseek-v3",
           ("llama2", "7B"): "llama2-7b", ("llama2", "13B"): "llama2-13b",
           ("llama2", "70B"): "llama2-70b",
           **{("qwen3", size): f"qwen3-{size.lower()}" for size in (
               "0.6B", "1.7B", "4B", "8B", "14B", "32B", "30B-A3B", "235B-A22B")}}


# said of every job: what torchtitan's own runs measured against fastpp's price of them
# (fastpp.model.validate_torchtitan, docs/fidelity.md)
STACK = ("torchtitan's stack: its own benchmark's 18 runs (Llama 3.1 on H100, December 2024) "
         "took 1.06 to 1.85 times as long a step as fastpp prices their job configs on their "
         "GPUs; this run's error bar and its lean come from them, not from Megatron's runs "
         "(docs/fidelity.md, torchtitan's own runs)")


# torchao's Float8 training (Float8LinearConfig) as torchtitan converts to it by default: each
# tensor scaled as it is cast (dynamic tensorwise: an amax pass first) and the two gradient
# products without fast accumulation, which is Hardware.fp8_current_scaling's pricing
FLOAT8 = ("float8: torchao's tensorwise Float8, torchtitan's default, scales each tensor as it "
          "casts it (an amax pass first) and runs the gradient products in split "
          "accumulation; the presets price FP8 with the scale out of the cast and fast "
          "accumulation: dataclasses.replace(hardware, fp8_current_scaling=True) prices it as "
          "it runs, as fastpp's check of torchtitan's benchmark does")


# what an eager model's pricing leaves out (compute.eager_bytes)
EAGER_PARTS = ("[compile] enable = false: eager PyTorch's kernels are priced for the norms, "
               "the rotary embedding, a dense MLP's activation and the input gradients' sums; "
               "the experts' activations and MLA's latent norms are priced as fused kernels")


# the older layouts torchtitan read (its JobConfig before [parallelism], 2024): keys that
# moved to [parallelism] unchanged in meaning, by the section they were in
MOVED = {"training": ("data_parallel_shard_degree", "data_parallel_replicate_degree",
                      "tensor_parallel_degree", "pipeline_parallel_degree",
                      "enable_async_tensor_parallel"),
         "experimental": ("pipeline_parallel_degree", "pipeline_parallel_schedule",
                          "pipeline_parallel_split_points", "context_parallel_degree",
                          "context_parallel_rotate_method", "enable_async_tensor_parallel")}
# read beside them: [experimental] pipeline_parallel_microbatches, a count (the microbatch
# local_batch_size / count)
# the keys read, by section (a key elsewhere or not here is listed in ``ignored``)
READ = {"model": ("name", "flavor", "hf_assets_path", "converters"),
        "training": ("local_batch_size", "batch_size", "global_batch_size", "seq_len",
                     "data_parallel_degree", "fp8_linear", "enable_fp8_linear",
                     "enable_float8_linear", "compile", *MOVED["training"]),
        "parallelism": ("data_parallel_shard_degree", "data_parallel_replicate_degree",
                        "tensor_parallel_degree", "pipeline_parallel_degree",
                        "context_parallel_degree", "expert_parallel_degree",
                        "expert_tensor_parallel_degree", "pipeline_parallel_schedule",
                        "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size",
                        "pipeline_parallel_layers_per_stage",
                        "pipeline_parallel_first_stage_less_layers",
                        "pipeline_parallel_last_stage_less_layers",
                        "pipeline_parallel_split_points", "module_fqns_per_model_part",
                        "fsdp_reshard_after_forward", "enable_async_tensor_parallel",
                        "context_parallel_rotate_method",
                        "pipeline_parallel_expert_parallel_overlap",
                        "pipeline_parallel_microbatches"),
        "experimental": (*MOVED["experimental"], "pipeline_parallel_microbatches"),
        "activation_checkpoint": ("mode", "selective_ac_option"),
        "float8": ("enable_float8_linear",), "compile": ("enable", "components")}
# torchtitan's own keys of older layouts, not read, that are near one read: listed as not
# modelled, never refused as misspellings (a review found them in its 2024-2025 configs)
NEAR_BUT_REAL = {"experimental": ("pipeline_parallel_schedule_csv",
                                  "pipeline_parallel_split_mode")}
# sections that keep the books (logs, checkpoints, timeouts, the schedule of the learning
# rate) and change neither a step's time nor its memory: not listed
BOOKKEEPING = ("job", "profiling", "metrics", "checkpoint", "comm", "validation",
               "lr_scheduler", "fault_tolerance", "memory_estimation")


def read_toml(job) -> tuple[dict, str]:
    """A job config as a dict: a path to a TOML file, its text, or the dict itself."""
    if isinstance(job, dict):
        return job, "the job config"
    if not isinstance(job, str | os.PathLike):
        raise ScheduleTypeError(f"job must be a TOML path, TOML text or a dict (got "
                                f"{type(job).__name__})")
    text, where = str(job), "the job config"
    if "\n" not in text and (text.endswith(".toml") or os.path.exists(text)):
        where = os.fspath(job)
        try:
            with open(where, encoding="utf-8") as f:
                text = f.read()
        except (OSError, ValueError) as e:  # (ValueError: a bad encoding, a NUL)
            raise ScheduleError(f"job must be a readable TOML file ({where}: {e})") from None
    try:
        return tomllib.loads(text), where
    except ValueError as e:  # (tomllib's own errors, a number too long for int)
        if where == "the job config" and "\n" not in text and "=" not in text:
            raise ScheduleError(f"job must be a TOML file, TOML text or a dict (no file "
                                f"{text})") from None  # a path, mistyped
        raise ScheduleError(f"{where} is not TOML ({e})") from None
    except RecursionError:
        raise ScheduleError(f"{where} is not TOML (nested too deep)") from None


@known_keywords("from_torchtitan")
def from_torchtitan(job, gpus: int, model: Transformer | str | None = None) -> Imported:
    """The model and run of a torchtitan job config.

    Parameters
    ----------
    job : str, os.PathLike or dict
        A ``.toml`` path, TOML text, or its parsed dict.
    gpus : int
        GPUs in all: ``data_parallel_shard_degree = -1`` takes what the other degrees leave.
    model : Transformer or str, optional
        The model (a ``Transformer``, a preset name or a ``config.json`` path). Default: the
        ``config.json`` under ``[model] hf_assets_path`` if there is one, else the preset of
        ``name`` and ``flavor`` (``FLAVORS``).

    Returns
    -------
    Imported
        ``model, config = from_torchtitan(...)``; ``.ignored`` the keys not modelled, as
        ``[section] key``: every key of the file that is not read, except in the sections that only
        keep the books (``[job]``, ``[metrics]``, ``[checkpoint]``, ...). The older layouts'
        keys are read where they were (``[training] tensor_parallel_degree``,
        ``[experimental] pipeline_parallel_degree``, ``[float8] enable_float8_linear``, ...;
        ``MOVED``), and explicit splits (``pipeline_parallel_split_points``,
        ``module_fqns_per_model_part``) as the layout they give.
        FSDP is ZeRO-3 over the shard and context-parallel ranks (torchtitan's
        ``dp_shard_cp`` mesh, whenever it has more than one rank), gathered per layer
        (``zero3="layer"``) or, with ``fsdp_reshard_after_forward = "never"`` or with
        pipeline parallelism, once per step (PyTorch's pipelining neither reduces nor
        reshards an FSDP stage after its microbatches' backwards, but the last: its weights
        and gradients are whole through the step, resharded after the forward or not);
        with ``data_parallel_replicate_degree`` above 1 as well, hybrid sharding
        (``replicate``); replicas only, ZeRO-0. Without
        pipeline parallelism the microbatch is ``local_batch_size`` (one forward and backward
        per accumulation step); with it, ``pipeline_parallel_microbatch_size``. A float8 or MX
        converter is fp8. No multi-token prediction (``mtp_depth=0``): torchtitan has none.
        Layer-wise selective checkpointing (``selective_ac_option`` a number ``k``) is full
        recomputation of every ``k``-th layer of each model chunk (``recompute_method=
        "interval"``, counted per chunk, where torchtitan counts on across a rank's chunks:
        ``fastpp.model.stages.recomputed_layers``; every layer when ``k = 1``). With
        DualPipeV and expert parallelism its pairs overlap their all-to-alls
        (``overlap=True``, torchtitan's default); async TP is priced without an overlap
        (said in ``ignored``). The
        model's SwiGLU is unfused (``fused_swiglu=False``): torchtitan's separate SiLU and
        product; without ``[compile]`` compiling the model its elementwise ops are eager
        PyTorch's with PyTorch's RMSNorm (``eager="native-norm"``), and without it compiling
        the loss the loss is PyTorch's ``cross_entropy`` on fp32 logits
        (``loss="cross-entropy"``; compiled, it runs in fewer kernels and keeps less than the
        fp32 logits: priced as Megatron's fused loss, ``loss="fused"``, which keeps them, so
        its memory by up to 2 bytes a logit over). A float8 converter is
        torchao's tensorwise Float8, and ``ignored`` says how to price its scaling.

    Raises
    ------
    ScheduleError
        A file that is not TOML, an unknown schedule name (listing torchtitan's), a value of
        the wrong type (naming the key), degrees that do not divide the GPUs, an unknown
        flavor without ``model``, with pipeline parallelism a ``global_batch_size`` of
        several accumulation steps (torchtitan runs a flushed pipeline for each), one key in
        its old and new places with two values, a split the pipeline cannot run, or a key or
        section that misspells one read (torchtitan refuses fields its config has not).
    """
    data, where = read_toml(job)
    ignored = _ignored(data, where)
    section = {name: data.get(name, {}) for name in ("model", "training", "parallelism",
                                                     "activation_checkpoint", "experimental",
                                                     "float8", "compile")}
    for name, table in section.items():
        if not isinstance(table, dict):
            raise ScheduleError(f"{where}: [{name}] must be a table (got {table!r})")
    section["parallelism"] = _moved(section, where)
    # the switches _compiled reads, typed as torchtitan's Compile is (job_config.py: enable a
    # bool, components a list of "model" and "loss"): enable = "true" or components =
    # "model" had priced the model eager, without a word
    _choice(section["compile"], "enable", False, (False, True), where, "compile")
    _choice(section["training"], "compile", False, (False, True), where, "training")
    parts = section["compile"].get("components", ["model", "loss"])
    # (a name is a string: an array's `in` was NumPy's ambiguous truth)
    if not isinstance(parts, list) or not all(isinstance(x, str) and x in ("model", "loss")
                                              for x in parts):
        raise ScheduleError(f"{where}: [compile] components must be a list of 'model' and "
                            f"'loss' (got {parts!r})")
    # torchtitan's FeedForward and experts run SiLU and the product as separate ops, and it
    # trains no multi-token-prediction module (its DeepSeek-V3 has none)
    given = model
    model = dataclasses.replace(_model(section["model"], model, where), fused_swiglu=False,
                                mtp_depth=0, eager="" if _compiled(section) else "native-norm",
                                loss="fused" if _compiled(section, "loss")
                                else "cross-entropy")
    assets = section["model"].get("hf_assets_path")
    # (an assets folder not here, the flavor's preset priced: said, not silent)
    missing = (f"[model] hf_assets_path (no config.json in {assets!r} here: the flavor's "
               f"preset priced)",) if given is None and isinstance(assets, str) and \
        not os.path.exists(os.path.join(assets, "config.json")) else ()
    run = _run(section, model, gpus, where)
    async_tp = ("enable_async_tensor_parallel: torchtitan's async TP priced without the "
                "overlap (its benchmark measured +5.7% from it on Llama 3 70B; fastpp's "
                "tp_overlap, Transformer Engine's, would price +49% there)",) \
        if run.t > 1 and section["parallelism"].get("enable_async_tensor_parallel") else ()
    unpriced = ("pipeline_parallel_expert_parallel_overlap: DualPipeV's expert-parallel "
                "overlap with context parallelism priced without it (fastpp prices the "
                "overlap for whole sequences)",) if run.schedule == "dualpipev" and \
        run.ep > 1 and run.cp > 1 and not run.overlap and section["parallelism"].get(
            "pipeline_parallel_expert_parallel_overlap", True) else ()
    # (MX converters scale blocks in the cast itself, as the presets price FP8; rowwise and
    # delayed scaling are other recipes)
    recipe = data
    for key in ("quantize", "linear", "float8"):  # (a table not given, or not a table: none)
        recipe = recipe.get(key, {}) if isinstance(recipe, dict) else {}
    tensorwise = isinstance(recipe, dict) and recipe.get("recipe_name", "tensorwise") == \
        "tensorwise" and all(section["float8"].get(f"scaling_type_{x}", "dynamic") == "dynamic"
                             for x in ("input", "weight", "grad_output"))
    float8 = (FLOAT8,) if run.precision == "fp8" and tensorwise and (
        _fp8_switch(section, where) or any(c.split(".")[-1] == "float8"
                                           for c in section["model"].get("converters", []))) \
        else ()
    eager = (EAGER_PARTS,) if model.eager and (model.moe or model.mla) else ()
    return Imported(model, run, ignored + missing + _approximated(run, model) + async_tp
                    + unpriced + float8 + eager + (STACK,))


def _approximated(run: RunConfig, model: Transformer) -> tuple[str, ...]:
    """What the run does that fastpp prices otherwise, said (``Imported.ignored``)."""
    notes = ()
    # (the op policy: _run reads the rest as full) priced for dense layers without MLA
    if run.recompute_method == OP_LEVEL and (model.moe or model.mla):
        notes += ("[activation_checkpoint] selective_ac_option = 'op': torchtitan's op-level "
                  "policy priced on dense layers; its "
                  + ("MoE layers" if model.moe else "")
                  + (" and " if model.moe and model.mla else "")
                  + ("MLA attention" if model.mla else "")
                  + " priced as Megatron's selective recomputation (the attention core "
                  "alone)",)
    if run.zero == 0 and (run.t > 1 or run.p > 1) and run.precision == "bf16":
        # torchtitan's maybe_enable_amp: mixed precision is FSDP's, or autocast without TP/PP
        notes += ("fp32: torchtitan turns mixed precision off with tensor or pipeline "
                  "parallelism and no FSDP (data_parallel_shard_degree x "
                  "context_parallel_degree = 1): priced as bf16",)
    return notes


def _moved(section: dict, where: str) -> dict:
    """``[parallelism]`` with the older layouts' keys (``MOVED``; v0.1's
    ``[training] data_parallel_degree``, plain FSDP, as the shard degree) where they were;
    one key given twice must agree."""
    par = dict(section["parallelism"])
    said = {key: "parallelism" for key in par}
    old = [(name, key, section[name][key]) for name, keys in MOVED.items() for key in keys
           if key in section[name]]
    if "data_parallel_degree" in section["training"]:
        old.append(("training", "data_parallel_shard_degree",
                    section["training"]["data_parallel_degree"]))
    for name, key, value in old:
        if key in par and par[key] != value:
            raise ScheduleError(f"{where}: [{said[key]}] {key} = {par[key]!r} and [{name}] "
                                f"{key} = {value!r} contradict: give it once, in "
                                f"[parallelism]")
        par[key], said[key] = value, name
    return par


def _ignored(data: dict, where: str) -> tuple[str, ...]:
    """``[section] key`` for each key of ``data`` not read (``READ``), but the
    bookkeeping sections' (``BOOKKEEPING``); nested tables by their dotted name. One that
    misspells a key or section read is refused: torchtitan refuses a field its config has
    not ("Invalid field names"), and here it would be priced as the default it leaves."""
    out = []

    def walk(table, name):
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{name}.{key}" if name else key)
            elif not name:
                out.append(key)
            elif name.split(".")[0] not in BOOKKEEPING and key not in READ.get(name, ()):
                meant = _misspelt(name, key)
                if meant is not None:
                    raise ScheduleError(f"{where}: [{name}] {key} must be a field of "
                                        f"torchtitan's job config (torchtitan refuses "
                                        f"others): a misspelt {meant}?")
                out.append(f"[{name}] {key}")

    walk(data, "")
    return tuple(out)


def _misspelt(section: str, key: str) -> str | None:
    """What ``[section] key``, not read, misspells: a key of its section (``[section]
    key``), or the section another's name (``[section]``); None if neither."""
    if key in NEAR_BUT_REAL.get(section, ()):
        return None
    if section in READ:
        meant = near(key, READ[section])
        return None if meant is None else f"[{section}] {meant}"
    # (a looser match: the sections are few and their names short, [modle] 0.8 of [model])
    meant = near(section, (*READ, *BOOKKEEPING), cutoff=0.75)
    return None if meant is None else f"[{meant}]"


def _int(table: dict, key: str, default, where: str, section: str, low: int = 1) -> int:
    """An integer >= ``low``; -1 passes too where it is the default (torchtitan's "the
    rest" or "not set")."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not (
            low <= value < MAX_INT or value == default == -1):
        more = ", or -1" if default == -1 else ""
        raise ScheduleError(f"{where}: [{section}] {key} must be an integer in "
                            f"{low}..2**31-1{more} (got {value!r})")
    return value


def _choice(table: dict, key: str, default, choices, where: str, section: str):
    """One of ``choices`` (a string, or a bool where the choices are bools)."""
    value = table.get(key, default)
    try:
        one_of(value, key, choices)
    except ScheduleError:
        raise ScheduleError(f"{where}: [{section}] {key} must be one of {list(choices)} (got "
                            f"{value!r})") from None
    return value


def _model(table: dict, model, where: str) -> Transformer:
    if model is not None:
        return given_model(model)
    assets = table.get("hf_assets_path")
    if isinstance(assets, str) and os.path.exists(os.path.join(assets, "config.json")):
        return from_hf(assets)
    key = (str(table.get("name")), str(table.get("flavor")))
    if key not in FLAVORS:
        raise ScheduleError(f"{where}: [model] name and flavor must be one of "
                            f"{sorted(FLAVORS)} (got {key}), or give the model")
    return MODELS[FLAVORS[key]]


def _run(section: dict, model: Transformer, gpus: int, where: str) -> RunConfig:
    par, train, ac = section["parallelism"], section["training"], section["activation_checkpoint"]

    def degree(key, default=1):
        return _int(par, key, default, where, "parallelism")

    t, p, cp = (degree("tensor_parallel_degree"), degree("pipeline_parallel_degree"),
                degree("context_parallel_degree"))
    replicate, shard = degree("data_parallel_replicate_degree"), degree(
        "data_parallel_shard_degree", -1)
    gpus = positive_int(gpus, "gpus")
    if gpus % (t * cp * p):  # (data_parallel's message names RunConfig's t, cp and p)
        raise ScheduleError(f"{where}: [parallelism] tensor_parallel_degree x "
                            f"context_parallel_degree x pipeline_parallel_degree must divide "
                            f"the {gpus} GPUs (got {t} x {cp} x {p} = {t * cp * p})")
    d = data_parallel(gpus, t, cp, p)
    if d % replicate:
        raise ScheduleError(f"{where}: [parallelism] data_parallel_replicate_degree must divide "
                            f"the {d} GPUs left by t * cp * p (got {replicate}, gpus={gpus})")
    if shard != -1 and replicate * shard != d:
        raise ScheduleError(f"{where}: data_parallel_replicate_degree * "
                            f"data_parallel_shard_degree = {replicate * shard} must be the "
                            f"{d} GPUs left by t * cp * p (got gpus={gpus})")
    # torchtitan applies FSDP over dp_shard x cp wherever it has more than one rank, HSDP
    # with the replicas beside it; DDP over the replicas alone
    fsdp = d // replicate * cp > 1
    if not fsdp and replicate > 1 and replicate != gpus:  # (each model's parallelize.py)
        raise ScheduleError(f"{where}: [parallelism] data_parallel_replicate_degree without "
                            f"FSDP must be the run's only parallelism: torchtitan raises 'DDP "
                            f"has not supported > 1D parallelism' (got {replicate} replicas "
                            f"of {gpus} GPUs)")
    csv = par.get("pipeline_parallel_schedule_csv", "")
    if csv not in ("", None):  # torchtitan then runs the CSV's order, which fastpp does not read
        raise ScheduleError(f"{where}: [parallelism] pipeline_parallel_schedule_csv must be "
                            f"empty: the run is priced by pipeline_parallel_schedule (got "
                            f"{csv!r}; fastpp.io.read_torch_csv reads the CSV to simulate)")
    name = par.get("pipeline_parallel_schedule", "1F1B")
    # PyTorch's get_schedule_class matches the name without regard to case
    name = next((k for k in SCHEDULES if isinstance(name, str) and k.lower() == name.lower()),
                name)
    if not isinstance(name, str) or name not in SCHEDULES:
        raise ScheduleError(f"{where}: pipeline_parallel_schedule must be one of "
                            f"{sorted(SCHEDULES)} (got {name!r})")
    m, layout = _pipeline_split(par, name, p, model.layers, where)
    # torchtitan overlaps DualPipeV's pairs' all-to-alls with expert parallelism, by default
    # (dual_pipe_v.py's get_dual_pipe_v_flag), and refuses it with checkpointing
    ep, etp = degree("expert_parallel_degree"), degree("expert_tensor_parallel_degree")
    if (t * cp * d) % (ep * etp):  # (RunConfig's message names its ep and etp)
        raise ScheduleError(f"{where}: [parallelism] expert_parallel_degree x "
                            f"expert_tensor_parallel_degree must divide the {t * cp * d} GPUs "
                            f"of a pipeline stage (got {ep} x {etp})")
    dual_pipe_v = name == "DualPipeV" and ep > 1 and p > 1 and _choice(
        par, "pipeline_parallel_expert_parallel_overlap", True, (False, True), where,
        "parallelism")
    overlap = dual_pipe_v and cp == 1  # (with cp > 1 not priced: said in from_torchtitan)
    if dual_pipe_v and ac.get("mode", "selective") != "none":
        raise ScheduleError(f"{where}: [activation_checkpoint] mode must be 'none' with "
                            f"DualPipeV's expert-parallel overlap, as torchtitan requires (got "
                            f"{ac.get('mode', 'selective')!r}; or pipeline_parallel_expert_"
                            f"parallel_overlap = false)")
    local = _int(train, "local_batch_size", train.get("batch_size", 8), where, "training")
    global_batch = _int(train, "global_batch_size", -1, where, "training")
    if global_batch == -1:
        global_batch = global_batch_of(local, d, gpus, "local_batch_size")
    if global_batch % (local * d):  # (torchtitan's gradient accumulation asserts it)
        raise ScheduleError(f"{where}: [training] global_batch_size must be a multiple of "
                            f"local_batch_size x the {d} data-parallel ranks = {local * d} "
                            f"(got {global_batch})")
    if p == 1:  # one forward and backward of the local batch per accumulation step
        microbatch = local
    else:  # a pipeline of local / microbatch microbatches per accumulation step
        microbatch = _int(par, "pipeline_parallel_microbatch_size", 1, where, "parallelism")
        old = section["experimental"]
        if "pipeline_parallel_microbatch_size" not in par:  # the older count of them
            # ([experimental] before 2025, [parallelism] in March and April 2025); absent in
            # the [experimental] layout, the pipeline's degree (pipeline_llama.py at 9dec370)
            place = next((s for s, table in (("experimental", old), ("parallelism", par))
                          if "pipeline_parallel_microbatches" in table), None)
            n = (_int(section[place] if place == "experimental" else par,
                      "pipeline_parallel_microbatches", None, where, place) if place
                 else p if "pipeline_parallel_degree" in old else None)
            if n is not None and local % n:
                raise ScheduleError(f"{where}: the pipeline's microbatches ({n}: "
                                    f"pipeline_parallel_microbatches, or the pipeline's degree "
                                    f"where the older layout gives none) must divide [training] "
                                    f"local_batch_size = {local}")
            microbatch = local // n if n is not None else microbatch
        if local % microbatch:
            raise ScheduleError(f"{where}: [parallelism] pipeline_parallel_microbatch_size "
                                f"must divide [training] local_batch_size = {local} (got "
                                f"{microbatch})")
        if global_batch != local * d:
            raise ScheduleError(
                f"{where}: [training] global_batch_size must be local_batch_size x the {d} "
                f"data-parallel ranks = {local * d} with pipeline parallelism (got "
                f"{global_batch}): torchtitan then runs {global_batch / (local * d):g} "
                f"pipelines a step, each flushed, which fastpp does not price as one; price "
                f"one of them (global_batch_size = {local * d}) and scale")
    reshard = _choice(par, "fsdp_reshard_after_forward", "default",
                      ("default", "always", "never"), where, "parallelism")
    # torchtitan's "default" reshards after the forward unless the run is pipelined
    reshard = ("never" if p > 1 else "always") if reshard == "default" else reshard
    mode = _choice(ac, "mode", "selective", ("none", "selective", "full"), where,
                   "activation_checkpoint")
    option = ac.get("selective_ac_option", "2")
    # a string, as torchtitan declares it: its .isdigit() raises on a TOML integer 2
    if not isinstance(option, str) or (option != "op" and not digits(option)):
        raise ScheduleError(f"{where}: [activation_checkpoint] selective_ac_option must be "
                            f"'op' or a layer interval >= 0, a string such as \"2\" (got "
                            f"{option!r})")
    if option != "op" and int(option) == 0:  # (_apply_layer_sac: 0 checkpoints every layer)
        option = "1"
    recompute = {"none": "none", "full": "full"}.get(
        mode, "selective" if option == "op" else "full")
    # every k-th layer fully checkpointed (torchtitan's _apply_layer_sac); k = 1: all
    interval = mode == "selective" and option != "op" and int(option) > 1
    converters = section["model"].get("converters", [])
    if not isinstance(converters, list) or not all(isinstance(c, str) for c in converters):
        raise ScheduleError(f"{where}: [model] converters must be a list of names (got "
                            f"{converters!r})")
    async_tp = _choice(par, "enable_async_tensor_parallel", False, (False, True), where,
                       "parallelism")
    if async_tp and not _compiled(section):  # (maybe_enable_async_tp raises)
        raise ScheduleError(f"{where}: enable_async_tensor_parallel needs the model compiled "
                            f"([compile] enable = true with 'model' in its components; the "
                            f"older [training] compile = true), as torchtitan requires")
    rotate = _choice(par, "context_parallel_rotate_method", "allgather",
                     ("allgather", "alltoall"), where, "parallelism")
    seq = _int(train, "seq_len", 2048, where, "training")
    # torchtitan's tensor parallelism shards the heads and, always, the sequence: said in its
    # own terms before RunConfig's (whose way out, sequence_parallel=False, torchtitan lacks)
    if model.heads % t:
        raise ScheduleError(f"{where}: [parallelism] tensor_parallel_degree must divide the "
                            f"model's {model.heads} attention heads (got {t})")
    if t > 1 and seq % (t * cp):
        raise ScheduleError(f"{where}: [training] seq_len must be a multiple of "
                            f"tensor_parallel_degree x context_parallel_degree = {t * cp}, over "
                            f"which torchtitan splits each sequence (got {seq})")
    return RunConfig(
        seq=seq, global_batch=global_batch,
        t=t, cp=cp, p=p, d=d,
        ep=ep, etp=etp,
        schedule=SCHEDULES[name], m=m, microbatch=microbatch, layout=layout,
        recompute=recompute,
        recompute_method="interval" if interval else OP_LEVEL if recompute == "selective"
        else None,
        recompute_layers=int(option) if interval else None, sequence_parallel=t > 1,
        zero=3 if fsdp else 0, replicate=replicate if fsdp else 1,
        # (ZeRO-3's alone) PyTorch's pipelining neither reduces nor reshards an FSDP stage
        # after a microbatch's backward but the last (stage.py's backward_maybe_with_nosync):
        # its gradients accumulate whole, and its weights are whole again after each backward,
        # whether "always" reshards them after the forward or not
        zero3="step" if fsdp and (reshard == "never" or p > 1) else "layer",
        tp_overlap=False,  # (async TP: said in from_torchtitan's notes)
        overlap=overlap,
        blocking_handoffs=False,
        precision="fp8" if _fp8_converted(converters, model, where)
        or _fp8_switch(section, where) else "bf16",
        cp_comm=f"torch-{rotate}", framework="torchtitan")


def _compiled(section: dict, component: str = "model") -> bool:
    """Whether torch.compile compiles the model (or the loss): ``[compile] enable`` with
    ``component`` among its components, or for the model the older ``[training] compile``
    (which compiled the model alone)."""
    compiled = section["compile"]
    components = compiled.get("components", ["model", "loss"])
    # (checked by from_torchtitan: a bool, Python's or NumPy's, whose `is True` is False)
    return (bool(compiled.get("enable", False)) and isinstance(components, list)
            and component in components) or (
        component == "model" and bool(section["training"].get("compile", False)))


def _fp8_converted(converters: list, model: Transformer, where: str) -> bool:
    """Whether ``[model] converters`` run the products in 8 bits: ``quantize.linear.*``
    (v0.1's ``float8``) the dense ones, ``quantize.grouped_mm.*`` the experts'. A model with
    experts needs both or neither: fastpp prices one precision for every product."""
    kinds = {"grouped_mm" if "grouped_mm" in c else "linear" for c in converters
             if c.split(".")[-1] in FP8_CONVERTERS}
    if not model.moe:
        return "linear" in kinds
    if len(kinds) == 1:
        given, other = kinds.pop(), {"linear": "grouped_mm", "grouped_mm": "linear"}
        raise ScheduleError(f"{where}: [model] converters must convert both the dense and the "
                            f"experts' products of a model with experts, or neither (got "
                            f"quantize.{given}.* without quantize.{other[given]}.*): fastpp "
                            f"prices one precision for every product")
    return bool(kinds)


def _fp8_switch(section: dict, where: str) -> bool:
    """The older layouts' float8 switches: ``[float8] enable_float8_linear``, v0.1's
    ``[training] enable_fp8_linear`` and ``fp8_linear`` (a scaling's name, or empty), and
    ``[training] enable_float8_linear`` between them (July 2024)."""
    on = [_choice(section["float8"], "enable_float8_linear", False, (False, True), where,
                  "float8"),
          *(_choice(section["training"], key, False, (False, True), where, "training")
            for key in ("enable_fp8_linear", "enable_float8_linear"))]
    linear = section["training"].get("fp8_linear", "")
    if not isinstance(linear, str):
        raise ScheduleError(f"{where}: [training] fp8_linear must be a scaling's name, or "
                            f"empty for none (got {linear!r})")
    return any(on) or linear != ""


def _pipeline_split(par: dict, name: str, p: int, layers: int, where: str):
    """``(m, layout)`` as torchtitan splits the model: ``pipeline_parallel_layers_per_stage``
    sets the stages, ``ceil((layers + first + last) / per_stage)`` of them, ``p`` dividing
    them (else 1 a rank for 1F1B and GPipe, 2 for the others), and the layers go as even as
    can be over them with the embedding and the output layer weighing ``first`` and ``last``
    layers (``pipeline_parallel_first_stage_less_layers``, ``..._last_...``, 1 by default:
    ``torchtitan_layers``); the layout None where that is fastpp's even split."""
    weights = [_int(par, f"pipeline_parallel_{end}_stage_less_layers", 1, where, "parallelism",
                    low=0) for end in ("first", "last")]
    single = name in SINGLE_STAGE
    m = 1 if single else 2
    explicit = [k for k in ("pipeline_parallel_split_points", "module_fqns_per_model_part",
                            "pipeline_parallel_layers_per_stage") if par.get(k) is not None]
    if len(explicit) > 1:
        raise ScheduleError(f"{where}: [parallelism] {explicit[0]} and {explicit[1]} "
                            f"contradict: give one")
    if p == 1:  # (torchtitan pipelines only with more than one rank: no split to read)
        if explicit and explicit[0] != "pipeline_parallel_layers_per_stage":
            raise ScheduleError(f"{where}: [parallelism] {explicit[0]} needs "
                                f"pipeline_parallel_degree > 1 (got 1)")
        return m, None
    if explicit and explicit[0] != "pipeline_parallel_layers_per_stage":
        layout = _explicit_split(par, explicit[0], layers, where)
        stages = len(layout.layers)
        if stages % p or (stages // p != 1 if single else stages // p < 2):
            raise ScheduleError(f"{where}: [parallelism] {explicit[0]} makes {stages} stages, "
                                f"which torchtitan refuses: they must split evenly over "
                                f"pipeline_parallel_degree = {p}, "
                                f"{'exactly 1' if single else '2 or more'} a rank ({name})")
        return stages // p, str(layout)
    if par.get("pipeline_parallel_layers_per_stage") is not None:
        per_stage = _int(par, "pipeline_parallel_layers_per_stage", None, where, "parallelism")
        stages = -(-(layers + sum(weights)) // per_stage)
        if stages % p or (stages // p != 1 if single else stages // p < 2):
            raise ScheduleError(f"{where}: [parallelism] pipeline_parallel_layers_per_stage = "
                                f"{per_stage} makes {stages} stages of {layers} layers and "
                                f"{sum(weights)} weighed for the embedding and output, which "
                                f"torchtitan refuses: they must split evenly over "
                                f"pipeline_parallel_degree = {p}, "
                                f"{'exactly 1' if single else '2 or more'} a rank ({name})")
        m = stages // p
    try:
        return m, split_layout(layers, p * m, *weights)
    except ScheduleError as err:
        raise ScheduleError(f"{where}: [parallelism] pipeline_parallel_first_stage_less_layers "
                            f"and ..._last_stage_less_layers: {err}") from None


def split_layout(layers: int, stages: int, first: int = 1, last: int = 1) -> str | None:
    """torchtitan's split of ``layers`` over ``stages`` with the embedding and the output
    layer weighing ``first`` and ``last`` layers (``torchtitan_layers``) as a layout string,
    None where it is fastpp's even split; a ``ScheduleError`` where torchtitan refuses it."""
    split = torchtitan_layers(layers, stages, first, last)
    even = layers >= stages and split.layers == even_layers(layers, stages).layers
    return None if even else str(split)


def _explicit_split(par: dict, key: str, layers: int, where: str) -> Layout:
    """The stages of ``pipeline_parallel_split_points`` (``"layers.N"``, N the first layer
    of each stage but the first) or ``module_fqns_per_model_part`` (each stage's modules:
    ``tok_embeddings`` on the first, ``layers.N`` in order, ``norm`` and ``output`` on the
    last), or a ScheduleError naming ``key``."""
    value = par[key]
    bad = ScheduleError(f"{where}: [parallelism] {key} must be "
                        + ("a list of 'layers.N', N rising in 1.." if key.endswith("points")
                           else "a list of lists of module names, the 'layers.N' in order "
                                "0..") + f"{layers - 1}, the embedding first and the output "
                        f"last (got {value!r})")

    def index(name):
        head, _, n = str(name).partition(".")
        return int(n) if head == "layers" and digits(n) and int(n) < layers else None

    if not isinstance(value, list):
        raise bad
    if key == "pipeline_parallel_split_points":
        starts = [index(x) if isinstance(x, str) else None for x in value]
        if None in starts or starts != sorted(set(starts)) or 0 in starts:
            raise bad
        edges = [0, *starts, layers]
        return Layout.from_layers([b - a for a, b in zip(edges, edges[1:], strict=False)])
    if not all(isinstance(part, list) and all(isinstance(x, str) for x in part)
               for part in value) or not value:
        raise bad
    found = [[index(x) for x in part if x.startswith("layers.")] for part in value]
    order = [i for part in found for i in part]
    if order != list(range(layers)) or "tok_embeddings" not in value[0] or \
            "output" not in value[-1]:
        raise bad
    return Layout.from_layers([len(part) for part in found])


def _written_split(c: RunConfig, model: Transformer | None, weights=None) -> list[str]:
    """The ``[parallelism]`` lines that make torchtitan split ``model`` as ``c`` does: the
    embedding's and output layer's weights (``_pipeline_split``: ``weights`` where they
    make it, else the first pair that does) and, unless ``m`` is the schedule's default,
    the layers per stage."""
    stages = c.p * c.m
    default_m = 1 if NAMES[c.schedule] in SINGLE_STAGE else 2
    split = c.layout is not None or c.first_layers is not None or c.last_layers is not None
    if c.p == 1:  # torchtitan does not pipeline: a split or chunks it would not run
        # (a layout of one stage holds the whole model, as a plan row's 'Et*80L': no split)
        if (split and stages > 1) or c.m != default_m:
            raise ScheduleError(f"to_torchtitan cannot state a layer split or m = {c.m} "
                                f"without a pipeline (p = 1)")
        return []
    if model is None:
        if split or c.m != default_m:
            raise ScheduleError(f"to_torchtitan needs the model to write a layout or m = "
                                f"{c.m} (as torchtitan's layers per stage and stage weights)")
        # fastpp's even split: torchtitan's with neither end weighed (where the layers divide
        # evenly, which only the model says)
        return ["pipeline_parallel_first_stage_less_layers = 0",
                "pipeline_parallel_last_stage_less_layers = 0"]
    wanted = as_layout(c.chunk_layout(model)) if split else even_layers(model.layers, stages)
    pairs = [(first, last) for first in range(model.layers + 1)
             for last in range(model.layers + 1 - first)]
    for first, last in ([tuple(weights)] if weights is not None else []) + pairs:
        try:
            found = torchtitan_layers(model.layers, stages, first, last)
        except ScheduleError:
            continue
        if found.layers != wanted.layers:
            continue
        lines = [f"pipeline_parallel_first_stage_less_layers = {first}",
                 f"pipeline_parallel_last_stage_less_layers = {last}"]
        if c.m == default_m:
            return lines
        for per_stage in range(1, model.layers + first + last + 1):
            if -(-(model.layers + first + last) // per_stage) == stages:
                return lines + [f"pipeline_parallel_layers_per_stage = {per_stage}"]
    raise ScheduleError(f"to_torchtitan cannot state the split {str(wanted)!r} of {c.m} chunks "
                        f"a rank: torchtitan spreads the layers as evenly as can be, the "
                        f"remainder on the first stages, with the embedding and the output "
                        f"layer weighing whole layers (give layout=fastpp.model."
                        f"torchtitan_layers({model.layers}, {stages}) for its default split)")


@known_keywords("to_torchtitan")
def to_torchtitan(config: RunConfig, model: Transformer | None = None, *,
                  stage_weights: tuple[int, int] | None = None) -> str:
    """``config`` as a torchtitan TOML snippet (``[parallelism]``, ``[training]``,
    ``[activation_checkpoint]``, ``[model]`` converters for fp8); ``from_torchtitan`` reads
    it back, with torchtitan's asynchronous hand-offs, with ``t > 1`` its sequence
    parallelism, and ``framework="torchtitan"``: the snippet is the run on torchtitan. A
    field a job config cannot state (``reduce_bytes``, ``gradient_overlap``, Megatron's
    recomputation details, ``tp_overlap`` (torchtitan's async TP is another overlap),
    ``node_limit`` and ``imbalance``; ``overlap`` but on DualPipeV with expert parallelism,
    torchtitan's default there) must keep its default: a ``ScheduleError`` names it
    otherwise; full recomputation of every ``k``-th layer (``recompute_method="interval"``)
    is written as layer-wise selective checkpointing. The model and the loss are compiled
    (``[compile]``), since fastpp prices fused kernels, unless ``model`` is ``eager`` or its
    ``loss`` is ``"cross-entropy"``. The pipeline's split of the layers is
    written as torchtitan's stage weights (``pipeline_parallel_first_stage_less_layers`` and
    ``..._last_...``; fastpp's even split as 0 and 0, which is torchtitan's where the layers
    divide evenly over the stages: pass ``model`` to have it checked), and ``m`` other than
    the schedule's default as ``pipeline_parallel_layers_per_stage``: both need ``model``
    (but the even split), and a split torchtitan cannot make is refused, as is a split or
    another ``m`` without a pipeline.

    Parameters
    ----------
    config : RunConfig
    model : Transformer, optional
        The model, for the layers per stage.
    stage_weights : (int, int), optional
        The layers the embedding and the output layer weigh, written where they make the
        split (default, or where they do not: the smallest pair that does).

    Returns
    -------
    str
        The TOML text.

    Raises
    ------
    ScheduleError
        For a schedule torchtitan does not run, a ZeRO stage other than 0 or 3, or a field
        it cannot state set to other than its default.
    """
    c, model = as_run(config), as_model(model)
    if stage_weights is not None:
        if not isinstance(stage_weights, tuple | list) or len(stage_weights) != 2:
            raise ScheduleError(f"stage_weights must be two layer counts, the embedding's and "
                                f"the output layer's (got {stage_weights!r})")
        stage_weights = tuple(nonnegative_int(x, "stage_weights") for x in stage_weights)
    if c.schedule not in NAMES:
        raise ScheduleError(f"torchtitan runs {sorted(NAMES)} (got schedule={c.schedule!r})")
    if c.zero not in (0, 3):
        raise ScheduleError(f"torchtitan shards with FSDP (ZeRO-3) or not at all (got "
                            f"zero={c.zero})")
    if c.zero == 3 and c.d * c.cp // c.replicate == 1:
        raise ScheduleError(f"torchtitan applies FSDP over more than one rank: zero must be 0 "
                            f"where d * cp / replicate = 1 (got zero=3, d={c.d}, cp={c.cp}, "
                            f"replicate={c.replicate})")
    # FSDP under PyTorch's pipelining reduces the gradients once a step; without, per layer
    if c.zero == 3 and c.p > 1 and c.zero3 != "step":
        raise ScheduleError(f"torchtitan's FSDP under a pipeline reduces the gradients once a "
                            f"step: zero3 must be 'step' with p > 1 (got zero3={c.zero3!r}, "
                            f"p={c.p})")
    if c.zero == 0 and c.cp > 1:
        raise ScheduleError(f"torchtitan shards over the context-parallel ranks with FSDP: "
                            f"zero must be 3 with cp > 1 (got zero=0, cp={c.cp})")
    if c.d % c.replicate:  # (RunConfig's rule is d * cp: torchtitan folds cp into the shards)
        raise ScheduleError(f"torchtitan's data_parallel_replicate_degree divides the "
                            f"data-parallel ranks: replicate must divide d={c.d} (got "
                            f"replicate={c.replicate})")
    # what a torchtitan job config cannot say is refused, never dropped: fastpp's pricing
    # assumptions and Megatron's recomputation details must be RunConfig's defaults. How the
    # pipeline sends (asynchronously) and that TP shards the sequence are torchtitan's own,
    # not a job config's: from_torchtitan reads them back as torchtitan runs
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    fixed = {**{k: defaults[k] for k in ("gradient_overlap", "reduce_bytes",
                                         "recompute_modules", "node_limit", "imbalance",
                                         "dispatcher", "tp_overlap", "train_metrics",
                                         "recipe")}}
    # DualPipeV's all-to-all overlap, torchtitan's default with expert parallelism
    dual_pipe_v = c.schedule == "dualpipev" and c.ep > 1 and c.p > 1
    if c.overlap and not dual_pipe_v:
        raise ScheduleError(f"torchtitan overlaps a schedule's pairs with expert parallelism "
                            f"on DualPipeV alone: overlap must be False (got overlap=True, "
                            f"schedule={c.schedule!r}, ep={c.ep}, p={c.p})")
    if dual_pipe_v and c.overlap and c.recompute != "none":  # (get_dual_pipe_v_flag raises)
        raise ScheduleError(f"torchtitan refuses DualPipeV's expert-parallel overlap with "
                            f"activation checkpointing: recompute must be 'none' with "
                            f"overlap=True (got recompute={c.recompute!r})")
    if c.zero == 0 and c.d > 1 and c.d != c.gpus:
        raise ScheduleError(f"torchtitan runs DDP (zero=0 over d={c.d} replicas) as the only "
                            f"parallelism ('DDP has not supported > 1D parallelism'): zero "
                            f"must be 3, or d the {c.gpus} GPUs")
    interval = c.partial_recompute["recompute_method"] == "interval"
    if c.recompute == "selective" and c.recompute_method != OP_LEVEL:
        raise ScheduleError("to_torchtitan cannot state Megatron's selective recomputation "
                            "(recompute='selective' alone: the attention core): torchtitan's "
                            "selective checkpointing is its op-level policy, "
                            "recompute_method='op'")
    if not interval and c.recompute_method != OP_LEVEL:  # the methods torchtitan states
        fixed |= {k: defaults[k] for k in ("recompute_method", "recompute_layers")}
    for name, value in fixed.items():
        if getattr(c, name) != value:
            raise ScheduleError(f"to_torchtitan cannot state {name}={getattr(c, name)!r} in a "
                                f"torchtitan job config (it must be {value!r})")
    lines = ["[parallelism]",
             f"data_parallel_replicate_degree = {c.replicate if c.zero == 3 else c.d}",
             f"data_parallel_shard_degree = {c.d // c.replicate if c.zero == 3 else 1}",
             f'fsdp_reshard_after_forward = "{"never" if c.zero3 == "step" else "always"}"',
             f"tensor_parallel_degree = {c.t}",
             f"pipeline_parallel_degree = {c.p}",
             f'pipeline_parallel_schedule = "{NAMES[c.schedule]}"',
             f"pipeline_parallel_microbatch_size = {c.microbatch}",
             *_written_split(c, model, stage_weights),
             f"context_parallel_degree = {c.cp}",
             f'context_parallel_rotate_method = '
             f'"{ROTATE[c.cp_comm]}"',
             f"expert_parallel_degree = {c.ep}",
             f"expert_tensor_parallel_degree = {c.etp}",
             *([f"pipeline_parallel_expert_parallel_overlap = {str(c.overlap).lower()}"]
               if dual_pipe_v else []), "",
             # without a pipeline, torchtitan's microbatch is the local batch
             "[training]",
             f"local_batch_size = {c.global_batch // c.d if c.p > 1 else c.microbatch}",
             f"global_batch_size = {c.global_batch}", f"seq_len = {c.seq}", "",
             "[activation_checkpoint]",
             f'mode = "{"selective" if interval else c.recompute}"']
    if c.recompute == "selective":
        lines.append('selective_ac_option = "op"')
    elif interval:
        lines.append(f'selective_ac_option = "{c.partial_recompute["recompute_layers"]}"')
    if c.precision == "fp8":  # (v0.2's names; a dense model has no grouped products)
        lines += ["", "[model]",
                  'converters = ["quantize.linear.float8", "quantize.grouped_mm.float8"]']
    # what fastpp prices fused, the job compiles: the model unless it is eager, the loss
    # unless it is PyTorch's cross entropy as written (Transformer.eager, Transformer.loss)
    compiled = ["model", "loss"] if model is None else (
        ["model"] * (not model.eager) + ["loss"] * (model.loss != "cross-entropy"))
    lines += ["", "[compile]", f"enable = {str(bool(compiled)).lower()}"]
    if compiled:
        lines.append("components = [" + ", ".join(f'"{c}"' for c in compiled) + "]")
    return "\n".join(lines) + "\n"
