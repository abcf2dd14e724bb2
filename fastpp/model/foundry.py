"""``from_llm_foundry`` and ``to_llm_foundry``: llm-foundry's training YAML as a run.

llm-foundry (``scripts/train/train.py``, v0.3.0 to today) trains on Composer: FSDP over every
GPU, no pipeline. Read: ``max_seq_len``, ``global_train_batch_size``,
``device_train_microbatch_size``, ``precision``; ``fsdp_config``'s ``sharding_strategy``,
``mixed_precision``, ``activation_checkpointing`` and ``data_parallel_replicate_degree``;
``tp_config``'s ``tensor_parallel_degree`` (1 alone); and the ``model``: MPT's
(``mpt_causal_lm``) shape, attention, MLP, dropout, loss, ``fc_type`` and train metrics, or a
Hugging Face model's (``hf_causal_lm``) from ``from_llm_foundry``'s ``model``. OmegaConf's
interpolations of absolute keys (``${variables.max_seq_len}``, v0.3.0's ``${max_seq_len}``)
are resolved, whole values and inside text; its resolvers (``${oc.env:X}``) and relative
keys are left as written. Every other key of the model, ``fsdp_config`` and ``tp_config`` is
listed in ``ignored`` (a misspelling of a read key named so), and so is every other top-level
section but those that keep the books (the data, the tokenizer, logging, checkpoints,
evaluation: ``BOOKKEEPING``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

import numpy as np

from ..checks import (
    MAX_INT,
    MISSPELT,
    ScheduleError,
    ScheduleTypeError,
    known_keywords,
    near,
    require,
)
from .config import RunConfig, as_model, as_run
from .hf import given_model
from .megatron import Imported
from .transformer import Transformer

# fsdp_config's sharding_strategy: its ZeRO stage (Composer upper-cases the name)
SHARDING = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3,
            "_HYBRID_SHARD_ZERO2": 2}
HYBRID = ("HYBRID_SHARD", "_HYBRID_SHARD_ZERO2")
# fsdp_config's mixed_precision: the bytes a gradient is reduced in (Composer's presets:
# PURE reduces in the 16-bit type, DEFAULT and FULL in fp32)
MIXED_PRECISION = {"PURE": 2.0, "DEFAULT": 4.0, "FULL": 4.0}
# the custom form's dtypes, by Composer's names for them: their bytes
DTYPES = {**dict.fromkeys(("fp32", "float32", "float", "full", "torch.float32"), 4.0),
          **dict.fromkeys(("bf16", "bfloat16", "amp_bf16", "torch.bfloat16", "fp16", "float16",
                           "half", "amp_fp16", "torch.float16"), 2.0)}
# Composer's precision: fastpp's (amp_fp16 priced as bf16: the same products' peak; amp_fp8
# runs fp8 products only in Transformer Engine's layers, fc_type te or ffn_type te_ln_mlp)
PRECISION = {"amp_bf16": "bf16", "amp_fp16": "bf16", "amp_fp8": "fp8", "fp32": "bf16"}
# MPT's attn_impl: the measured kernel that prices it (fastpp.model.attention), or None
# (PyTorch's unfused attention). triton: FlashAttention in Triton, priced by the first
# FlashAttention, its stand-in (fastpp.model.validate_foundry); flash: the flash-attn package
KERNELS = {"flash": "FlashAttention-2", "triton": "FlashAttention", "torch": None}
ATTN_IMPL_DEFAULT = "flash"  # llm-foundry's default from v0.7.0 (triton up to v0.6.0)
ATTN_TYPES = ("multihead_attention", "multiquery_attention", "grouped_query_attention")
# ffn_type: whether it is gated (mptglu: GeLU-gated by default, priced as SwiGLU)
FFN_TYPES = {"mptmlp": False, "mptglu": True, "te_ln_mlp": False}
# loss_fn: Transformer.loss
LOSSES = {"fused_crossentropy": "flash-attn", "torch_crossentropy": "cross-entropy"}
TRAIN_METRICS = 2  # LanguageCrossEntropy and LanguagePerplexity, use_train_metrics' default
GPUS_PER_NODE = 8  # where Composer up to 0.22 hybrid-sharded: within a node of this many
MODEL_NAMES = ("mpt_causal_lm", "hf_causal_lm")
# transformers' attn_implementation (llm-foundry hf_base.py passes it to the config)
HF_ATTENTION = ("eager", "sdpa", "flash_attention_2")
MPT_MAX_SEQ_LEN = 2048  # MPTConfig's default
# the keys read, by section ("" the top level; "model.attn_config" nested)
READ = {"": ("max_seq_len", "global_train_batch_size", "device_train_microbatch_size",
             "precision", "fsdp_config", "tp_config", "model"),
        "fsdp_config": ("sharding_strategy", "mixed_precision", "activation_checkpointing",
                        "data_parallel_replicate_degree", "data_parallel_shard_degree"),
        "tp_config": ("tensor_parallel_degree",),
        # Composer's custom form (get_mixed_precision reads its dtypes by .get: a misspelt
        # reduce_dtype is dropped there and was not listed here, the reduction priced fp32)
        "fsdp_config.mixed_precision": ("param_dtype", "reduce_dtype"),
        "model": ("name", "d_model", "n_heads", "n_layers", "expansion_ratio", "vocab_size",
                  "resid_pdrop", "emb_pdrop", "tie_word_embeddings", "loss_fn",
                  "use_train_metrics", "fc_type", "attn_config", "ffn_config",
                  "pretrained_model_name_or_path", "use_flash_attention_2",
                  "attn_implementation", "max_seq_len"),
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
               "model.verbose", "model.use_cache", "model.use_auth_token",
               "model.trust_remote_code", "model.pretrained",
               "fsdp_config.state_dict_type", "fsdp_config.sync_module_states",
               "fsdp_config.verbose", "fsdp_config.load_monolith_rank0_only",
               "fsdp_config.use_orig_params", "fsdp_config.activation_checkpointing_reentrant",
               "tp_config.strategy")
STACK = ("Composer's stack: llm-foundry's own MPT benchmark (76 runs on A100, 2023) was "
         "priced within 6.7% on average, nothing fitted; this run's error bar and its lean "
         "come from those runs (docs/fidelity.md, llm-foundry's MPT runs)")
# OmegaConf's interpolation of an absolute key (its resolvers, "${oc.env:X}", and relative
# keys, "${.x}", do not match and are left as written)
_INTERPOLATION = re.compile(r"\$\{\s*([A-Za-z_][\w-]*(?:\.[A-Za-z_0-9][\w-]*)*)\s*\}")
_LONGEST = 100_000  # characters an interpolated string may reach (its doubling bounded)


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
            data = yaml.load(text, Loader=_unique_keys(yaml))
        except yaml.YAMLError as e:
            raise ScheduleError(f"{where} is not YAML ({e})") from None
        except RecursionError:
            raise ScheduleError(f"{where} is not YAML (nested too deep)") from None
    else:
        raise ScheduleTypeError(f"config must be a YAML path, YAML text or a dict (got "
                                f"{type(config).__name__})")
    if not isinstance(data, dict):
        raise ScheduleError(f"{where} must hold a mapping of llm-foundry's keys (got "
                            f"{type(data).__name__}: {str(data)[:60]!r})")
    try:
        return _Resolver(data, where).value(data), where
    except RecursionError:
        raise ScheduleError(f"{where}: nested too deep") from None


class _Resolver:
    """OmegaConf's interpolations of one config resolved, each node once (YAML's aliases
    share nodes: resolving a shared one again would double the work at each level)."""

    def __init__(self, root: dict, where: str):
        self.root, self.where = root, where
        self.done: dict[int, object] = {}  # id of a node: its resolved copy
        self.open: set[int] = set()  # nodes being resolved (met again: an anchor in itself)
        self.paths: dict[str, object] = {}  # an interpolated key: its value
        self.pending: set[str] = set()  # keys being resolved (met again: a cycle)

    def value(self, node):
        if isinstance(node, dict | list):
            key = id(node)
            if key in self.done:
                return self.done[key]
            if key in self.open:
                raise ScheduleError(f"{self.where}: a YAML anchor holds itself")
            self.open.add(key)
            out = ({k: self.value(v) for k, v in node.items()} if isinstance(node, dict)
                   else [self.value(v) for v in node])
            self.open.discard(key)
            self.done[key] = out
            return out
        if not isinstance(node, str) or "${" not in node:
            return node
        whole = _INTERPOLATION.fullmatch(node)
        if whole:
            return self.path(whole.group(1))
        out = _INTERPOLATION.sub(lambda m: str(self.path(m.group(1))), node)
        if len(out) > _LONGEST:
            raise ScheduleError(f"{self.where}: an interpolated string grows past {_LONGEST} "
                                f"characters ({node[:40]!r}...)")
        return out

    def path(self, path: str):
        """The resolved value of the dotted ``path`` of the root."""
        if path in self.paths:
            return self.paths[path]
        if path in self.pending:
            raise ScheduleError(f"{self.where}: the interpolation ${{{path}}} refers to itself")
        self.pending.add(path)
        node = self.root
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                raise ScheduleError(f"{self.where}: the interpolation ${{{path}}} names no key")
            node = node[key]
        self.paths[path] = out = self.value(node)
        self.pending.discard(path)
        return out


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
        otherwise. The run: ``d = gpus``; Composer's FSDP as ZeRO (``FULL_SHARD`` and
        ``HYBRID_SHARD`` 3, ``SHARD_GRAD_OP`` and ``_HYBRID_SHARD_ZERO2`` 2, ``NO_SHARD``
        0), hybrid sharding over ``data_parallel_replicate_degree`` groups where that is
        given (Composer from 0.23; a hybrid strategy without it shards over every GPU
        there, and within each node of 8 up to 0.22, which ``ignored`` says); without
        ``fsdp_config``, or on one GPU, DDP (ZeRO-0, fp32 gradients). Gradients reduced in
        16 bits under ``mixed_precision: PURE`` (or a custom ``reduce_dtype``, else
        ``param_dtype``, of 16 bits) and in fp32 otherwise; full recomputation with
        ``activation_checkpointing``; ``train_metrics = 2`` (the model's
        ``LanguageCrossEntropy`` and ``LanguagePerplexity``, which Composer computes on every
        microbatch's logits) unless ``use_train_metrics`` is false (since llm-foundry v0.6.0
        a third, ``TokenAccuracy``, an argmax over the logits, is said, not priced); fp8
        with ``amp_fp8`` where the model runs Transformer Engine's layers (``fc_type: te``
        or ``ffn_type: te_ln_mlp``), else bf16 as llm-foundry runs it. A microbatch above
        the per-GPU batch is that batch, as llm-foundry clamps it. MPT's model: GeLU
        (``mptmlp``, ``te_ln_mlp``) or gated (``mptglu``, GeLU-gated by default, priced as
        an unfused SwiGLU: the same products and elementwise ops), the output layer tied
        unless ``tie_word_embeddings`` is false, dropout where a rate is above 0, its loss
        flash-attn's fused one (``fused_crossentropy``, the default) or PyTorch's
        (``torch_crossentropy``); a Hugging Face model's loss is PyTorch's on fp32 logits,
        as transformers computes it, and its attention FlashAttention-2 with
        ``use_flash_attention_2`` (else PyTorch's SDPA, the GPU's own kernel). Biases and
        MPT's learned positions are not priced, as Megatron's biases are not.

    Raises
    ------
    ScheduleError
        A file that is not YAML, an interpolation naming no key or itself, a missing or
        mistyped key (naming it), ``device_train_microbatch_size: auto`` (Composer searches
        it at run time), a batch the GPUs and microbatch do not divide, an unknown sharding
        strategy, precision, dtype, attention, MLP or loss, ``kv_n_heads`` missing with
        grouped-query attention or given with another, tensor parallelism, a model name
        other than ``mpt_causal_lm`` and ``hf_causal_lm``, or ``model`` given with MPT's or
        missing with a Hugging Face model.
    """
    data, where = read_yaml(config)
    gpus = _count(gpus, "gpus", "from_llm_foundry")
    table = _section(data, "model", where)
    if table is None:
        raise ScheduleError(f"{where}: model must be given (llm-foundry's model section)")
    tp = _section(data, "tp_config", where) or {}
    degree = _count(tp.get("tensor_parallel_degree", 1), "tp_config tensor_parallel_degree",
                    where)
    if degree > 1:
        raise ScheduleError(f"{where}: tp_config tensor_parallel_degree must be 1 (got "
                            f"{degree}): llm-foundry's tensor parallelism is not read")
    built, attention, notes = _model(table, model, where)
    run, more = _run(data, _section(data, "fsdp_config", where), table, gpus, where)
    return Imported(built, run, _ignored(data) + notes + more + (STACK,), gpus=gpus,
                    attention=attention)


def _section(table: dict, key: str, where: str) -> dict | None:
    """The mapping at ``key`` of ``table`` (None where absent or null)."""
    value = table.get(key)
    if value is not None and not isinstance(value, dict):
        raise ScheduleError(f"{where}: {key} must be a mapping (got {value!r})")
    return value


def _count(value, name: str, where: str) -> int:
    """An integer from 1 to 2**31 - 1 (NumPy's integers too, as the rest of the API takes
    them)."""
    if (isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer)
            or not 1 <= value < MAX_INT):
        raise ScheduleError(f"{where}: {name} must be an integer from 1 to 2**31-1 (got "
                            f"{value!r})")
    return int(value)


def _rate(table: dict, key: str, name: str, where: str) -> float:
    """A dropout rate in [0, 1] (default 0)."""
    value = table.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ScheduleError(f"{where}: {name} must be a rate from 0 to 1 (got {value!r})")
    return float(value)


def _unique_keys(yaml):
    """A safe YAML loader that refuses a key given twice in one mapping, as OmegaConf, which
    llm-foundry loads its configs with, does (``safe_load`` keeps the last silently)."""
    class Unique(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            # the keys as written, before a merge (<<) brings its own in to be overridden
            seen = set()
            for key, _ in node.value if isinstance(node, yaml.MappingNode) else ():
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"found duplicate key {key.value!r}", key.start_mark)
                    seen.add(key.value)
            return super().construct_mapping(node, deep)

    return Unique


def _choice(table: dict, key: str, default, choices, name: str, where: str, upper=False):
    """One of ``choices`` (a mapping's keys or a tuple); ``upper``: as Composer reads a
    name, whatever its case."""
    value = table.get(key, default)
    if upper and isinstance(value, str):
        value = value.upper()
    if not isinstance(value, str | bool) or value not in choices:
        raise ScheduleError(f"{where}: {name} must be one of {sorted(choices)} (got "
                            f"{value!r})")
    return value


def _model(table: dict, given, where: str) -> tuple[Transformer, str | None, tuple]:
    """The ``Transformer`` of the ``model`` section, the measured attention kernel its
    ``attn_impl`` runs, and what is said of it."""
    name = _choice(table, "name", None, MODEL_NAMES, "model name", where)
    if name == "hf_causal_lm":
        if given is None:
            raise ScheduleError(f"{where}: model name hf_causal_lm needs from_llm_foundry's "
                                f"model= (a Transformer, a preset or a config.json of "
                                f"{table.get('pretrained_model_name_or_path', 'the model')}): "
                                f"the YAML names the model but does not hold its shape")
        shape = given_model(given)
        # transformers' attention: flash-attn's with use_flash_attention_2 (or
        # attn_implementation: flash_attention_2), else PyTorch's SDPA, the GPU's own kernel
        impl = table.get("attn_implementation")
        if impl not in (None, *HF_ATTENTION):
            raise ScheduleError(f"{where}: model attn_implementation must be one of "
                                f"{list(HF_ATTENTION)} (got {impl!r})")
        flash2 = _choice(table, "use_flash_attention_2", False, (True, False),
                         "model use_flash_attention_2", where) or impl == "flash_attention_2"
        eager = impl == "eager" and not flash2  # (use_flash_attention_2 overrides it)
        # transformers' causal LMs compute their loss with PyTorch's cross entropy on fp32
        # logits; its eager attention (eager_attention_forward) is unfused
        return (dataclasses.replace(shape, loss="cross-entropy",
                                    flash_attention=shape.flash_attention and not eager),
                "FlashAttention-2" if flash2 else None,
                () if flash2 else
                ("model attn_implementation: eager, transformers' unfused attention",) if eager
                else ("model: a Hugging Face model's attention (PyTorch's SDPA) "
                      "priced as its GPU's own kernel",))
    if given is not None:
        raise ScheduleError(f"{where}: model must not be given with mpt_causal_lm: the YAML "
                            f"holds its shape (got model={given!r})")
    attn = _section(table, "attn_config", where) or {}
    ffn = _section(table, "ffn_config", where) or {}
    layers, hidden, heads = (_count(table.get(k), f"model {k}", where)
                             for k in ("n_layers", "d_model", "n_heads"))
    impl = _choice(attn, "attn_impl", ATTN_IMPL_DEFAULT, KERNELS,
                   "model.attn_config attn_impl", where)
    kind = _choice(attn, "attn_type", "multihead_attention", ATTN_TYPES,
                   "model.attn_config attn_type", where)
    if kind == "grouped_query_attention":  # (its class takes kv_n_heads, no default)
        kv = _count(attn.get("kv_n_heads"), "model.attn_config kv_n_heads", where)
    elif "kv_n_heads" in attn:  # (llm-foundry's other attentions refuse the argument)
        raise ScheduleError(f"{where}: model.attn_config kv_n_heads goes with attn_type "
                            f"grouped_query_attention alone (got {kind})")
    else:
        kv = heads if kind == "multihead_attention" else 1
    kind = _choice(ffn, "ffn_type", "mptmlp", FFN_TYPES, "model.ffn_config ffn_type", where)
    width = ffn.get("ffn_hidden_size")
    if width is None:  # (MPT's MLP: d_model x expansion_ratio, a whole number)
        ratio = table.get("expansion_ratio", 4)
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not (
                math.isfinite(ratio) and ratio > 0 and float(hidden * ratio).is_integer()):
            raise ScheduleError(f"{where}: model expansion_ratio must be a number > 0 whose "
                                f"product with d_model = {hidden} is whole (got {ratio!r})")
        width = int(hidden * ratio)
    width = _count(width, "model.ffn_config ffn_hidden_size", where)
    dropout = any(_rate(t, k, f"{s} {k}", where) > 0 for t, k, s in (
        (table, "resid_pdrop", "model"), (table, "emb_pdrop", "model"),
        (attn, "attn_pdrop", "model.attn_config")))
    loss = LOSSES[_choice(table, "loss_fn", "fused_crossentropy", LOSSES, "model loss_fn",
                          where)]
    tied = _choice(table, "tie_word_embeddings", True, (True, False),
                   "model tie_word_embeddings", where)
    vocab = _count(table.get("vocab_size", 50368), "model vocab_size", where)
    if hidden % heads or heads % kv:
        raise ScheduleError(f"{where}: model d_model must be a multiple of n_heads and n_heads "
                            f"of model.attn_config kv_n_heads (got d_model={hidden}, "
                            f"n_heads={heads}, kv_n_heads={kv})")
    model = Transformer(layers, hidden, heads, kv_heads=kv, ffn=width, vocab=vocab,
                        swiglu=FFN_TYPES[kind], fused_swiglu=not FFN_TYPES[kind],
                        tied_embeddings=tied, dropout=dropout,
                        flash_attention=KERNELS[impl] is not None, loss=loss,
                        name=f"mpt-{layers}x{hidden}")
    notes = ()
    if "attn_impl" not in attn:
        notes += (f"model.attn_config attn_impl not given: llm-foundry's default from "
                  f"v0.7.0, {ATTN_IMPL_DEFAULT} (triton up to v0.6.0)",)
    if impl == "triton":
        notes += ("model.attn_config attn_impl: triton runs FlashAttention in Triton, which "
                  "no table measures: priced as the first FlashAttention, its stand-in "
                  "(checked on A100 alone)",)
    elif impl == "flash":
        notes += ("model.attn_config attn_impl: flash priced as FlashAttention-2 (llm-foundry "
                  "up to v0.5.0 installed the first FlashAttention: with_attention_kernel's "
                  "'FlashAttention' prices that)",)
    return model, KERNELS[impl], notes


def _run(data: dict, fsdp: dict | None, table: dict, gpus: int, where: str
         ) -> tuple[RunConfig, tuple]:
    """The ``RunConfig`` of the top level, ``fsdp_config`` and the model's train metrics and
    Transformer Engine layers (fp8's), and what is said of it."""
    notes = ()
    loader = data.get("train_loader")
    loader = loader.get("dataset") if isinstance(loader, dict) else None
    if isinstance(loader, dict) and loader.get("max_seq_len") is not None:
        # (train.py uses the top level for ICL alone; the samples are cut to the loader's)
        seq = _count(loader["max_seq_len"], "train_loader.dataset max_seq_len", where)
    else:
        seq = _count(data.get("max_seq_len"), "max_seq_len", where)
    if table.get("name") == "mpt_causal_lm":  # MPTModel.forward asserts S <= max_seq_len
        longest = _count(table.get("max_seq_len", MPT_MAX_SEQ_LEN), "model max_seq_len", where)
        if seq > longest:
            raise ScheduleError(f"{where}: max_seq_len must be at most model max_seq_len = "
                                f"{longest} (MPT's forward refuses longer; got {seq})")
    batch = _count(data.get("global_train_batch_size"), "global_train_batch_size", where)
    micro = data.get("device_train_microbatch_size", "auto")
    if isinstance(micro, str) and micro == "auto":  # (an array's == is ambiguous)
        raise ScheduleError(f"{where}: device_train_microbatch_size must be a number (got "
                            f"'auto', llm-foundry's default: Composer searches the largest "
                            f"that fits at run time; give the microbatch to price)")
    micro = _count(micro, "device_train_microbatch_size", where)
    if batch % gpus:
        raise ScheduleError(f"{where}: global_train_batch_size must be a multiple of gpus = "
                            f"{gpus} (got {batch})")
    if micro > batch // gpus:  # (llm-foundry's calculate_batch_size_info clamps it)
        notes += (f"device_train_microbatch_size: {micro} is the per-GPU batch, "
                  f"{batch // gpus}, as llm-foundry clamps it",)
        micro = batch // gpus
    if (batch // gpus) % micro:
        raise ScheduleError(f"{where}: device_train_microbatch_size must divide the per-GPU "
                            f"batch global_train_batch_size / gpus = {batch // gpus} (got "
                            f"{micro})")
    precision = PRECISION[_choice(data, "precision", "amp_bf16", PRECISION, "precision",
                                  where)]
    fc_type = table.get("fc_type", "torch")
    te = (fc_type == "te" or isinstance(fc_type, dict) and fc_type.get("name") == "te"
          or (_section(table, "ffn_config", where) or {}).get("ffn_type") == "te_ln_mlp")
    if data.get("precision") == "amp_fp16":
        notes += ("precision: amp_fp16 priced as bf16 (the same products' peak)",)
    if data.get("precision") == "fp32":  # (Composer's own; Megatron's fp32 is priced so too)
        notes += ("precision: fp32 priced as bf16 (fastpp prices bf16 and fp8 products)",)
    if precision == "fp8" and not te:
        notes += ("precision: amp_fp8 without model fc_type te or ffn_type te_ln_mlp runs "
                  "llm-foundry's products in bf16: priced as bf16",)
        precision = "bf16"
    if fsdp is not None and gpus == 1:  # llm-foundry reverts to DDP on one GPU
        notes += ("fsdp_config: on one GPU llm-foundry runs DDP: priced so",)
        fsdp = None
    metrics = _choice(table, "use_train_metrics", True, (True, False),
                      "model use_train_metrics", where)
    if metrics:
        notes += ("model use_train_metrics: llm-foundry from v0.6.0 computes a third train "
                  "metric, TokenAccuracy, an argmax over the logits (2 bytes a logit beside "
                  "the two cross entropies' 28): not priced",)
    zero, replicate, reduce_bytes, checkpoint = 0, 1, 4.0, False  # DDP: fp32 gradients
    if fsdp is not None:
        fsdp_notes, (zero, replicate, reduce_bytes) = _sharding(fsdp, gpus, where,
                                                                data.get("precision"))
        notes += fsdp_notes
        checkpoint = _choice(fsdp, "activation_checkpointing", False, (True, False),
                             "fsdp_config activation_checkpointing", where)
    return RunConfig(seq=seq, global_batch=batch, d=gpus, microbatch=micro, zero=zero,
                     replicate=replicate, recompute="full" if checkpoint else "none",
                     reduce_bytes=reduce_bytes,
                     precision=None if precision == "bf16" else precision,
                     train_metrics=TRAIN_METRICS if metrics else 0,
                     framework="composer"), notes


def _sharding(fsdp: dict, gpus: int, where: str, precision=None) -> tuple[tuple, tuple]:
    """What is said of ``fsdp_config``, and its ZeRO stage, hybrid-sharding groups and
    bytes a gradient is reduced in."""
    notes = ()
    strategy = _choice(fsdp, "sharding_strategy", "FULL_SHARD", SHARDING,
                       "fsdp_config sharding_strategy", where, upper=True)
    zero, replicate = SHARDING[strategy], 1
    groups = fsdp.get("data_parallel_replicate_degree")
    shard = fsdp.get("data_parallel_shard_degree", -1)
    for key, value in (("replicate", groups), ("shard", shard)):
        # (a number or nothing: an array's != -1 below was NumPy's ambiguous truth)
        if zero > 0 and value is not None and not isinstance(value, int | float | str):
            raise ScheduleError(f"{where}: fsdp_config data_parallel_{key}_degree must be an "
                                f"integer from 1 to 2**31-1, or -1 (got {value!r})")
    if zero > 0 and (groups is not None or shard != -1):
        # Composer's mesh (core/state.py _create_device_mesh): one degree may be -1, the
        # GPUs the other leaves; their product must be every GPU
        if groups == -1 and shard == -1:
            raise ScheduleError(f"{where}: fsdp_config data_parallel_replicate_degree and "
                                f"data_parallel_shard_degree cannot both be -1")
        if shard != -1:
            shard = _count(shard, "fsdp_config data_parallel_shard_degree", where)
        if groups == -1 and gpus % shard:  # (gpus // shard replicas: "got 0" at 16 of 8)
            raise ScheduleError(f"{where}: fsdp_config data_parallel_shard_degree must divide "
                                f"gpus = {gpus} with data_parallel_replicate_degree -1 (got "
                                f"{shard})")
        if groups in (None, -1):
            groups = 1 if groups is None else gpus // shard
        replicate = _count(groups, "fsdp_config data_parallel_replicate_degree", where)
        if shard == -1 and gpus % replicate:
            raise ScheduleError(f"{where}: fsdp_config data_parallel_replicate_degree must "
                                f"divide gpus = {gpus} (got {replicate})")
        shard = gpus // replicate if shard == -1 else shard
        if replicate * shard != gpus:
            raise ScheduleError(f"{where}: fsdp_config data_parallel_replicate_degree x "
                                f"data_parallel_shard_degree must be gpus = {gpus} (got "
                                f"{replicate} x {shard})")
    elif strategy in HYBRID:
        notes += (f"fsdp_config sharding_strategy: {strategy} without "
                  f"data_parallel_replicate_degree priced as Composer runs it from 0.23, "
                  f"sharded over every GPU (up to 0.22 it shards within each node of "
                  f"{GPUS_PER_NODE} GPUs: data_parallel_replicate_degree = gpus / "
                  f"{GPUS_PER_NODE} prices that)",)
    mixed = fsdp.get("mixed_precision", "DEFAULT")
    if isinstance(mixed, dict):  # Composer's custom form: the reduction in reduce_dtype,
        given = mixed.get("reduce_dtype")  # else in param_dtype, else in fp32
        given = mixed.get("param_dtype") if given is None else given
        given = "fp32" if given is None else given
        if not isinstance(given, str) or given.lower() not in DTYPES:
            raise ScheduleError(f"{where}: fsdp_config mixed_precision reduce_dtype must be "
                                f"one of {sorted(DTYPES)} (got {given!r})")
        reduce_bytes = DTYPES[given.lower()]
    else:
        mixed = _choice(fsdp, "mixed_precision", "DEFAULT", MIXED_PRECISION,
                        "fsdp_config mixed_precision", where, upper=True)
        reduce_bytes = MIXED_PRECISION[mixed]
        if precision == "fp32":  # (Composer's get_mixed_precision: PURE reduces in it)
            reduce_bytes = 4.0
        if mixed == "FULL":
            notes += ("fsdp_config mixed_precision: FULL gathers the parameters in fp32, "
                      "twice ZeRO's gather bytes: priced as 16-bit gathers",)
    return notes, (zero, replicate, reduce_bytes)


def _ignored(data: dict) -> tuple[str, ...]:
    """Each key of ``data`` not read (``READ``) and not bookkeeping (``BOOKKEEPING``), by its
    dotted name; one that may misspell a read key says so."""
    out = []

    def walk(table: dict, name: str):
        for key, value in table.items():
            key = str(key)
            dotted = f"{name}.{key}" if name else key
            if dotted in BOOKKEEPING:
                continue
            if isinstance(value, dict) and dotted in READ:
                walk(value, dotted)
            elif key not in READ.get(name, ()):
                meant = near(key, READ.get(name, ()))
                out.append(dotted if meant is None else
                           f"{dotted} ({MISSPELT} {f'{name}.' if name else ''}{meant}?)")

    walk(data, "")
    return tuple(out)


def run_keys(config: RunConfig) -> dict:
    """The top-level keys and ``fsdp_config`` of an llm-foundry YAML that state ``config``
    (``to_llm_foundry``'s, without the model); a ``ScheduleError`` for a run llm-foundry
    does not run (another parallelism, schedule or recomputation, ZeRO-1), which no key
    would state. ``to_llm_foundry`` checks the rest by reading its keys back."""
    c = as_run(config)
    for name, value in (("t", c.t), ("p", c.p), ("cp", c.cp), ("ep", c.ep), ("m", c.m)):
        if value != 1:
            raise ScheduleError(f"to_llm_foundry cannot state {name}={value}: llm-foundry "
                                f"runs FSDP alone (it must be 1)")
    if c.schedule != "1f1b" or c.recompute == "selective":
        what = (f"schedule={c.schedule!r}" if c.schedule != "1f1b"
                else f"recompute={c.recompute!r}")
        raise ScheduleError(f"to_llm_foundry cannot state {what}: Composer accumulates "
                            f"microbatches one forward and backward at a time (1f1b) and "
                            f"checkpoints whole blocks")
    out = {"max_seq_len": c.seq, "global_train_batch_size": c.global_batch,
           "device_train_microbatch_size": c.microbatch,
           "precision": "amp_fp8" if c.precision == "fp8" else "amp_bf16"}
    strategy = {3: "FULL_SHARD", 2: "SHARD_GRAD_OP", 0: "NO_SHARD"}.get(c.zero)
    if strategy is None:
        raise ScheduleError(f"to_llm_foundry cannot state zero={c.zero}: Composer's FSDP "
                            f"shards as ZeRO 0, 2 or 3")
    # DDP (no fsdp_config) where FSDP's NO_SHARD states nothing more
    if c.zero > 0 or c.reduce_bytes == 2 or c.recompute != "none":
        out["fsdp_config"] = {"sharding_strategy": strategy,
                              "mixed_precision": "PURE" if c.reduce_bytes == 2 else "DEFAULT",
                              "activation_checkpointing": c.recompute == "full"}
        if c.replicate > 1:
            out["fsdp_config"]["data_parallel_replicate_degree"] = c.replicate
    return out


@known_keywords("to_llm_foundry")
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
        For a field of the run or the model that the YAML read back does not give (naming
        it): tensor, pipeline, context or expert parallelism, ZeRO-1, selective or partial
        recomputation, another schedule, train metrics other than 0 or 2, a framework
        other than Composer's, or a loss, MLP or attention MPT does not run (experts, MLA,
        windows, eager kernels, another head size).
    """
    c, m = as_run(config), as_model(model)
    if m is None:
        raise ScheduleTypeError("model must be a fastpp.model.Transformer (got None)")
    loss = next((k for k, v in LOSSES.items() if v == m.loss), None)
    if loss is None:
        raise ScheduleError(f"to_llm_foundry cannot state the model's loss={m.loss!r}: MPT's "
                            f"is flash-attn's or PyTorch's ({sorted(LOSSES.values())})")
    attn = {"attn_impl": "flash" if m.flash_attention else "torch",
            "attn_type": ("multihead_attention" if m.kv_heads == m.heads else
                          "multiquery_attention" if m.kv_heads == 1 else
                          "grouped_query_attention")}
    if attn["attn_type"] == "grouped_query_attention":
        attn["kv_n_heads"] = m.kv_heads
    body = {"name": "mpt_causal_lm", "max_seq_len": c.seq, "d_model": m.hidden, "n_heads": m.heads,
            "n_layers": m.layers, "vocab_size": m.vocab, "attn_config": attn,
            "ffn_config": {"ffn_type": "mptglu" if m.swiglu else "mptmlp"},
            "tie_word_embeddings": m.tied_embeddings, "resid_pdrop": 0.1 if m.dropout else 0.0,
            "loss_fn": loss, "use_train_metrics": c.train_metrics > 0}
    # (v0.3.0's MLP takes an integer expansion_ratio alone; a width it does not give, the
    # later ffn_hidden_size)
    if m.ffn % m.hidden:
        body["ffn_config"]["ffn_hidden_size"] = m.ffn
    else:
        body["expansion_ratio"] = m.ffn // m.hidden
    if c.precision == "fp8":  # (fp8 products in Transformer Engine's layers alone)
        body["fc_type"] = "te"
    out = {**run_keys(c), "model": body}
    back = from_llm_foundry(out, c.d)
    for field in dataclasses.fields(RunConfig):
        ours, theirs = getattr(c, field.name), getattr(back.config, field.name)
        if ours != theirs:
            raise ScheduleError(f"to_llm_foundry cannot state {field.name}={ours!r}: "
                                f"llm-foundry's YAML gives {theirs!r}")
    for field in dataclasses.fields(Transformer):
        ours, theirs = getattr(m, field.name), getattr(back.model, field.name)
        if field.name != "name" and ours != theirs:
            raise ScheduleError(f"to_llm_foundry cannot state the model's {field.name}="
                                f"{ours!r}: MPT's YAML gives {theirs!r}")
    return out
