"""``from_llm_foundry`` and ``to_llm_foundry``: llm-foundry's training YAML as a run.

llm-foundry (``scripts/train/train.py``, v0.3.0 to today) trains on Composer: FSDP over every
GPU, no tensor or pipeline parallelism. Read: ``max_seq_len``, ``global_train_batch_size``,
``device_train_microbatch_size``, ``precision``; ``fsdp_config``'s ``sharding_strategy``,
``mixed_precision`` and ``activation_checkpointing``; ``tp_config``'s
``tensor_parallel_degree`` (1 alone); and the ``model``: MPT's (``mpt_causal_lm``) shape,
attention, MLP, dropout, loss and train metrics, or a Hugging Face model's
(``hf_causal_lm``) from ``from_llm_foundry``'s ``model``. OmegaConf's whole-value and
in-string interpolations (``${variables.max_seq_len}``, v0.3.0's ``${max_seq_len}``) are
resolved. Every other key of the model and of ``fsdp_config`` is listed in ``ignored``; the
sections that keep the books (the data, the tokenizer, logging, checkpoints, evaluation,
``BOOKKEEPING``) are not.
"""

from __future__ import annotations

import dataclasses
import os
import re

from ..checks import MAX_INT, ScheduleError, ScheduleTypeError, known_keywords, require
from .config import RunConfig, as_model, as_run
from .hf import from_hf
from .megatron import Imported
from .presets import MODELS
from .transformer import Transformer

# fsdp_config's sharding_strategy: (ZeRO stage, sharded within a node alone)
SHARDING = {"FULL_SHARD": (3, False), "SHARD_GRAD_OP": (2, False), "NO_SHARD": (0, False),
            "HYBRID_SHARD": (3, True), "_HYBRID_SHARD_ZERO2": (2, True)}
# fsdp_config's mixed_precision: the bytes a gradient is reduced in (Composer's presets:
# PURE reduces in the 16-bit type, DEFAULT and FULL in fp32)
MIXED_PRECISION = {"PURE": 2.0, "DEFAULT": 4.0, "FULL": 4.0}
# Composer's precision: fastpp's (amp_fp16 priced as bf16: the same products' peak)
PRECISION = {"amp_bf16": "bf16", "amp_fp16": "bf16", "amp_fp8": "fp8"}
# MPT's attn_impl: the measured kernel that prices it (fastpp.model.attention), or None
# (PyTorch's unfused attention). triton: FlashAttention in Triton, priced by the first
# FlashAttention, its stand-in (fastpp.model.validate_foundry); flash: the flash-attn package,
# FlashAttention-2 from llm-foundry v0.4.0
KERNELS = {"flash": "FlashAttention-2", "triton": "FlashAttention", "torch": None}
ATTN_IMPL_DEFAULT = "flash"  # llm-foundry's default since v0.4.0 (triton up to v0.3.0)
# attn_type: the key-value heads it gives (None: attn_config's kv_n_heads)
ATTN_TYPES = {"multihead_attention": "heads", "multiquery_attention": 1,
              "grouped_query_attention": None}
# ffn_type: whether it is gated (mptglu: GeLU-gated by default, priced as SwiGLU)
FFN_TYPES = {"mptmlp": False, "mptglu": True, "te_ln_mlp": False}
# loss_fn: Transformer.loss
LOSSES = {"fused_crossentropy": "flash-attn", "torch_crossentropy": "cross-entropy"}
TRAIN_METRICS = 2  # LanguageCrossEntropy and LanguagePerplexity, use_train_metrics' default
GPUS_PER_NODE = 8  # a hybrid-sharded run shards within a node of this many GPUs
MODEL_NAMES = ("mpt_causal_lm", "hf_causal_lm")
# the keys read, by section ("" the top level; "model.attn_config" nested)
READ = {"": ("max_seq_len", "global_train_batch_size", "device_train_microbatch_size",
             "precision", "fsdp_config", "tp_config", "model"),
        "fsdp_config": ("sharding_strategy", "mixed_precision", "activation_checkpointing"),
        "tp_config": ("tensor_parallel_degree", "strategy"),
        "model": ("name", "d_model", "n_heads", "n_layers", "expansion_ratio", "vocab_size",
                  "max_seq_len", "resid_pdrop", "emb_pdrop", "tie_word_embeddings", "loss_fn",
                  "use_train_metrics", "attn_config", "ffn_config",
                  "pretrained_model_name_or_path", "pretrained"),
        "model.attn_config": ("attn_type", "attn_impl", "attn_pdrop", "kv_n_heads"),
        "model.ffn_config": ("ffn_type", "ffn_hidden_size")}
# keys that change neither a step's time nor its memory (the model's initialization, the
# file's own variables, the data, logging, checkpoints, evaluation, which runs between steps)
BOOKKEEPING = ("variables", "run_name", "seed", "global_seed", "data_local", "data_remote",
               "tokenizer", "train_loader", "eval_loader", "eval_loaders", "icl_tasks",
               "icl_tasks_str", "eval_gauntlet", "eval_gauntlet_str", "icl_subset_num_batches",
               "icl_seq_len", "eval_interval", "eval_first", "eval_subset_num_batches",
               "device_eval_batch_size", "scheduler", "loggers", "callbacks", "max_duration",
               "progress_bar", "log_to_console", "console_log_interval", "python_log_level",
               "log_config", "dist_timeout", "max_split_size_mb", "expandable_segments",
               "cuda_load_lazy", "code_paths", "autoresume", "save_folder",
               "save_latest_filename", "save_overwrite", "save_weights_only", "save_filename",
               "save_interval", "save_num_checkpoints_to_keep", "save_ignore_keys",
               "load_path", "load_weights_only", "load_strict_model_weights",
               "load_ignore_keys", "only_hf_checkpoint", "only_composer_checkpoint",
               "n_gpus", "device_train_batch_size", "device_train_grad_accum", "metadata",
               "integrations", "profiler", "spin_dataloaders", "train_subset_num_batches",
               "accumulate_train_batch_on_tokens", "model.init_device", "model.init_config",
               "model.verbose", "model.use_cache", "model.config_overrides",
               "model.use_auth_token", "model.trust_remote_code", "model.master_weights_dtype",
               "fsdp_config.state_dict_type", "fsdp_config.sync_module_states",
               "fsdp_config.verbose", "fsdp_config.load_monolith_rank0_only",
               "fsdp_config.use_orig_params", "fsdp_config.activation_checkpointing_reentrant")
STACK = ("Composer's stack: llm-foundry's own MPT benchmark (76 runs on A100, 2023) was "
         "priced within 6.7% on average, nothing fitted; this run's error bar and its lean "
         "come from those runs (docs/fidelity.md, llm-foundry's MPT runs)")
_INTERPOLATION = re.compile(r"\$\{([^${}]+)\}")


def read_yaml(config) -> tuple[dict, str]:
    """A training YAML as a dict, its interpolations resolved: a path, its text, or the
    parsed dict itself; and where it came from, for messages."""
    if isinstance(config, dict):
        data, where = config, "the config"
    elif isinstance(config, str | os.PathLike):
        yaml = require("yaml", "configs", "from_llm_foundry", "PyYAML")
        text, where = str(config), "the config"
        if "\n" not in text and (text.endswith((".yaml", ".yml")) or os.path.exists(text)):
            where = os.fspath(config)
            try:
                with open(where, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, ValueError) as e:
                raise ScheduleError(f"config must be a readable YAML file ({where}: {e})"
                                    ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ScheduleError(f"{where} is not YAML ({e})") from None
    else:
        raise ScheduleTypeError(f"config must be a YAML path, YAML text or a dict (got "
                                f"{type(config).__name__})")
    if not isinstance(data, dict):
        raise ScheduleError(f"{where} must hold a mapping of llm-foundry's keys (got "
                            f"{type(data).__name__}: {str(data)[:60]!r})")
    return _resolved(data, data, where, 0), where


def _resolved(value, root: dict, where: str, depth: int):
    """``value`` with OmegaConf's ``${a.b}`` interpolations of ``root`` resolved: a string
    that is one interpolation becomes the value it names, one that holds some the text."""
    if depth > 32:
        raise ScheduleError(f"{where}: interpolations nest too deep (a cycle?)")
    if isinstance(value, dict):
        return {k: _resolved(v, root, where, depth) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v, root, where, depth) for v in value]
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = _INTERPOLATION.fullmatch(value)
    if whole:
        return _resolved(_lookup(root, whole.group(1), where), root, where, depth + 1)
    return _INTERPOLATION.sub(
        lambda m: str(_resolved(_lookup(root, m.group(1), where), root, where, depth + 1)),
        value)


def _lookup(root: dict, path: str, where: str):
    """The value at the dotted ``path`` of ``root``."""
    node = root
    for key in path.strip().split("."):
        if not isinstance(node, dict) or key not in node:
            raise ScheduleError(f"{where}: the interpolation ${{{path}}} names no key")
        node = node[key]
    return node


@known_keywords("from_llm_foundry")
def from_llm_foundry(config, gpus: int, model: Transformer | str | None = None) -> Imported:
    """The model and run of an llm-foundry training YAML.

    Parameters
    ----------
    config : str, os.PathLike or dict
        A ``.yaml`` path, YAML text (both need PyYAML: ``pip install 'fastpp[configs]'``),
        or its parsed dict.
    gpus : int
        GPUs in all: FSDP's data-parallel ranks.
    model : Transformer or str, optional
        The model (a ``Transformer``, a preset name or a ``config.json`` path): needed for
        ``hf_causal_lm``, whose shape the YAML names but does not hold; with
        ``mpt_causal_lm`` the YAML's shape is read and ``model`` must not be given.

    Returns
    -------
    Imported
        ``model, config = from_llm_foundry(...)``; ``.attention`` the measured kernel the
        run's attention is priced with (``with_attention_kernel``; None: its GPU's own, or
        PyTorch's unfused attention); ``.ignored`` the keys not modelled and what is priced
        otherwise. The run: ``d = gpus``, Composer's FSDP as ZeRO (``FULL_SHARD`` 3,
        ``SHARD_GRAD_OP`` 2, ``NO_SHARD`` and no ``fsdp_config`` 0; the hybrid strategies
        shard within a node of 8 GPUs, ``replicate = gpus / 8``), gradients reduced in 16
        bits under ``mixed_precision: PURE`` and in fp32 otherwise, full recomputation with
        ``activation_checkpointing``, and ``train_metrics = 2`` (the model's
        ``LanguageCrossEntropy`` and ``LanguagePerplexity``, which Composer computes on every
        microbatch's logits) unless ``use_train_metrics`` is false (since March 2024 a
        third, ``TokenAccuracy``, an argmax over the logits, is said, not priced). MPT's
        model: GeLU (``mptmlp``, ``te_ln_mlp``) or gated (``mptglu``, GeLU-gated by default,
        priced as an unfused SwiGLU: the same products and elementwise ops), the output
        layer tied unless ``tie_word_embeddings`` is false, dropout where a rate is above
        0, its loss flash-attn's fused one (``fused_crossentropy``, the default) or
        PyTorch's (``torch_crossentropy``); a Hugging Face model's loss is PyTorch's on
        fp32 logits, as transformers computes it. Biases and MPT's learned positions are
        not priced, as Megatron's biases are not.

    Raises
    ------
    ScheduleError
        A file that is not YAML, an interpolation naming no key, a missing or mistyped key
        (naming it), ``device_train_microbatch_size: auto`` (Composer searches it at run
        time), a batch the GPUs and microbatch do not divide, an unknown sharding
        strategy, precision, attention, MLP or loss, tensor parallelism, a model name other
        than ``mpt_causal_lm`` and ``hf_causal_lm``, or ``model`` given with MPT's or
        missing with a Hugging Face model.
    """
    data, where = read_yaml(config)
    gpus = _count(gpus, "gpus", "", "from_llm_foundry")
    section = {}
    for name in ("model", "fsdp_config", "tp_config"):
        value = data.get(name, {} if name != "model" else None)
        if value is None and name == "model":
            raise ScheduleError(f"{where}: model must be given (llm-foundry's model section)")
        if not isinstance(value, dict | None):
            raise ScheduleError(f"{where}: {name} must be a mapping (got {value!r})")
        section[name] = value
    if section["tp_config"] and _count(section["tp_config"].get("tensor_parallel_degree", 1),
                                       "tensor_parallel_degree", "tp_config", where) > 1:
        raise ScheduleError(f"{where}: tp_config tensor_parallel_degree must be 1 (got "
                            f"{section['tp_config']['tensor_parallel_degree']}): llm-foundry's "
                            f"tensor parallelism is not read")
    built, attention, notes = _model(section["model"], model, where)
    run = _run(data, section["fsdp_config"], section["model"], gpus, where)
    fsdp = section["fsdp_config"] or {}
    if fsdp.get("mixed_precision") == "FULL":
        notes += ("fsdp_config mixed_precision: FULL computes in fp32: priced as bf16",)
    if data.get("precision") == "amp_fp16":
        notes += ("precision: amp_fp16 priced as bf16 (the same products' peak)",)
    if SHARDING.get(fsdp.get("sharding_strategy", "FULL_SHARD"), (0, False))[1]:
        notes += (f"fsdp_config sharding_strategy: {fsdp['sharding_strategy']} priced as "
                  f"shards within nodes of {GPUS_PER_NODE} GPUs",)
    return Imported(built, run, _ignored(data) + notes + (STACK,), gpus=gpus,
                    attention=attention)


def _count(value, key: str, section: str, where: str) -> int:
    """An integer from 1 to 2**31 - 1, named as the YAML names it."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < MAX_INT:
        name = f"{section} {key}" if section else key
        raise ScheduleError(f"{where}: {name} must be an integer from 1 to 2**31-1 (got "
                            f"{value!r})")
    return value


def _rate(table: dict, key: str, where: str, section: str) -> float:
    """A dropout rate in [0, 1] (default 0)."""
    value = table.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ScheduleError(f"{where}: {section} {key} must be a rate from 0 to 1 (got "
                            f"{value!r})")
    return float(value)


def _choice(table: dict, key: str, default, choices, where: str, section: str):
    """One of ``choices`` (keys of a mapping or a tuple)."""
    value = table.get(key, default)
    if not isinstance(value, str | bool) or value not in choices:
        raise ScheduleError(f"{where}: {section} {key} must be one of {sorted(choices)} (got "
                            f"{value!r})")
    return value


def _model(table: dict, given, where: str) -> tuple[Transformer, str | None, tuple]:
    """The ``Transformer`` of the ``model`` section, the measured attention kernel its
    ``attn_impl`` runs, and what is said of it."""
    name = _choice(table, "name", None, MODEL_NAMES, where, "model")
    if name == "hf_causal_lm":
        if given is None:
            raise ScheduleError(f"{where}: model name hf_causal_lm needs from_llm_foundry's "
                                f"model= (a Transformer, a preset or a config.json of "
                                f"{table.get('pretrained_model_name_or_path', 'the model')}): "
                                f"the YAML names the model but does not hold its shape")
        shape = (given if isinstance(given, Transformer) else MODELS[given]
                 if isinstance(given, str) and given in MODELS else from_hf(given))
        # transformers' causal LMs compute their loss with PyTorch's cross entropy on fp32
        # logits
        return (dataclasses.replace(shape, loss="cross-entropy"), None,
                ("model: a Hugging Face model's attention priced with its GPU's kernel",))
    if given is not None:
        raise ScheduleError(f"{where}: model must not be given with mpt_causal_lm: the YAML "
                            f"holds its shape (got model={given!r})")
    attn = table.get("attn_config", {}) or {}
    ffn = table.get("ffn_config", {}) or {}
    for sub, value in (("attn_config", attn), ("ffn_config", ffn)):
        if not isinstance(value, dict):
            raise ScheduleError(f"{where}: model {sub} must be a mapping (got {value!r})")
    layers, hidden, heads = (_count(table.get(k), k, "model", where)
                             for k in ("n_layers", "d_model", "n_heads"))
    impl = _choice(attn, "attn_impl", ATTN_IMPL_DEFAULT, KERNELS, where, "model.attn_config")
    kind = _choice(attn, "attn_type", "multihead_attention", ATTN_TYPES, where,
                   "model.attn_config")
    if kind == "grouped_query_attention":
        kv = _count(attn.get("kv_n_heads", 1), "kv_n_heads", "model.attn_config", where)
    else:
        kv = heads if ATTN_TYPES[kind] == "heads" else ATTN_TYPES[kind]
    gated = FFN_TYPES[_choice(ffn, "ffn_type", "mptmlp", FFN_TYPES, where, "model.ffn_config")]
    ratio = table.get("expansion_ratio", 4)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio <= 0:
        raise ScheduleError(f"{where}: model expansion_ratio must be a number > 0 (got "
                            f"{ratio!r})")
    width = _count(ffn.get("ffn_hidden_size", int(hidden * ratio)), "ffn_hidden_size",
                   "model.ffn_config", where)
    dropout = any(_rate(t, k, where, s) > 0 for t, k, s in (
        (table, "resid_pdrop", "model"), (table, "emb_pdrop", "model"),
        (attn, "attn_pdrop", "model.attn_config")))
    loss = LOSSES[_choice(table, "loss_fn", "fused_crossentropy", LOSSES, where, "model")]
    tied = _choice(table, "tie_word_embeddings", True, (True, False), where, "model")
    model = Transformer(layers, hidden, heads, kv_heads=kv, ffn=width,
                        vocab=_count(table.get("vocab_size", 50368), "vocab_size", "model",
                                     where),
                        swiglu=gated, fused_swiglu=not gated, tied_embeddings=tied,
                        dropout=dropout, flash_attention=KERNELS[impl] is not None,
                        loss=loss, name=f"mpt-{layers}x{hidden}")
    notes = ()
    if "attn_impl" not in attn:
        notes += (f"model.attn_config attn_impl not given: llm-foundry's default, "
                  f"{ATTN_IMPL_DEFAULT} (triton up to v0.3.0)",)
    if impl == "triton":
        notes += ("model.attn_config attn_impl: triton runs FlashAttention in Triton, which "
                  "no table measures: priced as the first FlashAttention, its stand-in "
                  "(checked on A100 alone)",)
    if table.get("use_train_metrics", True) is True:
        notes += ("model use_train_metrics: llm-foundry since March 2024 (#1052) computes a "
                  "third train metric, TokenAccuracy, an argmax over the logits (2 bytes a "
                  "logit beside the two cross entropies' 28): not priced",)
    return model, KERNELS[impl], notes


def _run(data: dict, fsdp: dict | None, table: dict, gpus: int, where: str) -> RunConfig:
    """The ``RunConfig`` of the top level and ``fsdp_config``."""
    seq = _count(data.get("max_seq_len"), "max_seq_len", "", where)
    batch = _count(data.get("global_train_batch_size"), "global_train_batch_size", "", where)
    micro = data.get("device_train_microbatch_size", "auto")
    if micro == "auto":
        raise ScheduleError(f"{where}: device_train_microbatch_size must be a number (got "
                            f"'auto', llm-foundry's default: Composer searches the largest "
                            f"that fits at run time; give the microbatch to price)")
    micro = _count(micro, "device_train_microbatch_size", "", where)
    if batch % (micro * gpus):
        raise ScheduleError(f"{where}: global_train_batch_size must be a multiple of "
                            f"device_train_microbatch_size x gpus = {micro} x {gpus} (got "
                            f"{batch})")
    precision = PRECISION[_choice(data, "precision", "amp_bf16", PRECISION, where, "")]
    sharded = fsdp is not None and "fsdp_config" in data
    fsdp = fsdp or {}
    strategy = _choice(fsdp, "sharding_strategy", "FULL_SHARD", SHARDING, where,
                       "fsdp_config") if sharded else "NO_SHARD"
    zero, hybrid = SHARDING[strategy]
    replicate = 1
    if hybrid:
        if gpus % GPUS_PER_NODE or gpus == GPUS_PER_NODE:
            raise ScheduleError(f"{where}: fsdp_config sharding_strategy {strategy} shards "
                                f"within nodes of {GPUS_PER_NODE} GPUs: gpus must be a "
                                f"multiple of {GPUS_PER_NODE} above it (got {gpus})")
        replicate = gpus // GPUS_PER_NODE
    mixed = fsdp.get("mixed_precision", "DEFAULT")
    if isinstance(mixed, dict):  # Composer's custom form: reduce_dtype
        reduce_type = mixed.get("reduce_dtype", "fp32")
        if reduce_type not in ("fp32", "float32", "bf16", "bfloat16", "fp16", "float16"):
            raise ScheduleError(f"{where}: fsdp_config mixed_precision reduce_dtype must be "
                                f"fp32, bf16 or fp16 (got {reduce_type!r})")
        reduce_bytes = 4.0 if reduce_type in ("fp32", "float32") else 2.0
    else:
        reduce_bytes = MIXED_PRECISION[_choice(fsdp, "mixed_precision", "DEFAULT",
                                               MIXED_PRECISION, where, "fsdp_config")]
    if zero == 0:  # DDP: the fp32 gradients all-reduced
        reduce_bytes = 4.0
    checkpoint = _choice(fsdp, "activation_checkpointing", False, (True, False), where,
                         "fsdp_config")
    metrics = _choice(table, "use_train_metrics", True, (True, False), where, "model")
    return RunConfig(seq=seq, global_batch=batch, d=gpus, microbatch=micro, zero=zero,
                     replicate=replicate, recompute="full" if checkpoint else "none",
                     reduce_bytes=reduce_bytes, precision=None if precision == "bf16"
                     else precision, train_metrics=TRAIN_METRICS if metrics else 0,
                     framework="composer")


def _ignored(data: dict) -> tuple[str, ...]:
    """Each key of ``data`` not read (``READ``) and not bookkeeping (``BOOKKEEPING``), by its
    dotted name."""
    out = []

    def walk(table: dict, name: str):
        for key, value in table.items():
            dotted = f"{name}.{key}" if name else key
            if dotted in BOOKKEEPING:
                continue
            if isinstance(value, dict) and dotted in READ:
                walk(value, dotted)
            elif key not in READ.get(name, ()):
                out.append(dotted)

    walk(data, "")
    return tuple(out)


def to_llm_foundry(config: RunConfig, model: Transformer) -> dict:
    """An llm-foundry training YAML's keys for ``config`` and an MPT ``model``: what
    ``from_llm_foundry`` reads back as the same run (``yaml.safe_dump`` writes it; the data,
    tokenizer, optimizer and the rest are the user's).

    Parameters
    ----------
    config : RunConfig
    model : Transformer

    Returns
    -------
    dict

    Raises
    ------
    ScheduleError
        For what llm-foundry's YAML cannot state: tensor, pipeline, context or expert
        parallelism, ZeRO-1, selective recomputation, train metrics other than 0 or 2, a
        framework other than Composer's, hybrid sharding off nodes of 8 GPUs, a loss, an
        MLP or an attention MPT does not run (experts, MLA, windows, eager kernels, another
        head size).
    """
    c, m = as_run(config), as_model(model)
    if m is None:
        raise ScheduleTypeError("model must be a fastpp.model.Transformer (got None)")
    for name in ("t", "p", "cp", "ep", "etp", "m"):
        if getattr(c, name) != 1:
            raise ScheduleError(f"to_llm_foundry cannot state {name}={getattr(c, name)}: "
                                f"llm-foundry runs FSDP alone (it must be 1)")
    if c.zero == 1 or c.recompute == "selective" or c.train_metrics not in (0, TRAIN_METRICS) \
            or c.framework != "composer":
        what = ("zero=1" if c.zero == 1 else f"recompute={c.recompute!r}"
                if c.recompute == "selective" else f"train_metrics={c.train_metrics}"
                if c.train_metrics not in (0, TRAIN_METRICS) else f"framework={c.framework!r}")
        raise ScheduleError(f"to_llm_foundry cannot state {what}: Composer's FSDP shards as "
                            f"ZeRO 0, 2 or 3, checkpoints whole blocks, computes "
                            f"{TRAIN_METRICS} train metrics or none, and is 'composer'")
    strategy = {(3, 1): "FULL_SHARD", (2, 1): "SHARD_GRAD_OP", (0, 1): "NO_SHARD"}.get(
        (c.zero, c.replicate))
    if c.replicate > 1:
        strategy = {3: "HYBRID_SHARD", 2: "_HYBRID_SHARD_ZERO2"}[c.zero]
        if c.d != c.replicate * GPUS_PER_NODE:
            raise ScheduleError(f"to_llm_foundry cannot state replicate={c.replicate} with "
                                f"d={c.d}: Composer's hybrid sharding shards within nodes of "
                                f"{GPUS_PER_NODE} GPUs (d must be replicate x "
                                f"{GPUS_PER_NODE})")
    loss = next((k for k, v in LOSSES.items() if v == m.loss), None)
    shape = (m.moe or m.mla or m.window or m.eager or m.mtp_depth or loss is None
             or m.head_dim * m.heads != m.hidden or m.v_head_dim != m.head_dim
             or (m.swiglu and m.fused_swiglu) or m.heads % m.kv_heads)
    if shape:
        raise ScheduleError(f"to_llm_foundry cannot state the model {m.name!r}: MPT runs "
                            f"dense layers of {m.hidden} / heads wide heads, GeLU or unfused "
                            f"SwiGLU, without windows, and its loss is flash-attn's or "
                            f"PyTorch's (loss {m.loss!r})")
    attn = {"attn_impl": "flash" if m.flash_attention else "torch",
            "attn_type": ("multihead_attention" if m.kv_heads == m.heads else
                          "multiquery_attention" if m.kv_heads == 1 else
                          "grouped_query_attention")}
    if attn["attn_type"] == "grouped_query_attention":
        attn["kv_n_heads"] = m.kv_heads
    out = {"max_seq_len": c.seq, "global_train_batch_size": c.global_batch,
           "device_train_microbatch_size": c.microbatch,
           "precision": "amp_fp8" if c.precision == "fp8" else "amp_bf16",
           "model": {"name": "mpt_causal_lm", "d_model": m.hidden, "n_heads": m.heads,
                     "n_layers": m.layers, "vocab_size": m.vocab, "attn_config": attn,
                     "ffn_config": {"ffn_type": "mptglu" if m.swiglu else "mptmlp"},
                     "tie_word_embeddings": m.tied_embeddings,
                     "resid_pdrop": 0.1 if m.dropout else 0.0, "loss_fn": loss,
                     "use_train_metrics": c.train_metrics > 0}}
    # (v0.3.0's MLP takes an integer expansion_ratio alone; a width it does not give, the
    # later ffn_hidden_size)
    if m.ffn % m.hidden:
        out["model"]["ffn_config"]["ffn_hidden_size"] = m.ffn
    else:
        out["model"]["expansion_ratio"] = m.ffn // m.hidden
    if c.zero > 0:
        out["fsdp_config"] = {"sharding_strategy": strategy,
                              "mixed_precision": "PURE" if c.reduce_bytes == 2 else "DEFAULT",
                              "activation_checkpointing": c.recompute == "full"}
    elif c.reduce_bytes != 4 or c.recompute == "full":
        raise ScheduleError(f"to_llm_foundry cannot state reduce_bytes={c.reduce_bytes:g} or "
                            f"recompute={c.recompute!r} with zero=0: DDP reduces fp32 "
                            f"gradients and llm-foundry checkpoints under FSDP")
    return out
