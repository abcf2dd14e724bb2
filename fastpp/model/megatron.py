"""``from_megatron`` and ``to_megatron``: Megatron-LM's arguments as a model and a run.

``FLAGS`` is the one table: each modelled argument's ``dest`` (the snake_case name Megatron's
argparse gives it, and NeMo's, Megatron-Bridge's and ``MODEL_ARGS`` YAML's key), its type and
Megatron's default where the flag is absent (``megatron/training/arguments.py``). The shell
layer (``script_words``) reads a launch script as bash would for what matters here: comments,
line continuations, variables (``$X``, ``${X}``, ``${X:-default}``, ``$((arithmetic))``),
arrays (``X=(...)``, ``${X[@]}``), ``if`` and ``case``.
"""

from __future__ import annotations

import ast
import enum
import fnmatch
import os
import re
from dataclasses import dataclass, fields, replace

import numpy as np

from ..checks import (
    MAX_INT,
    MISSPELT,
    ScheduleError,
    ScheduleTypeError,
    by_flags,
    digits,
    known_keywords,
    near,
    one_of,
    positive_int,
)
from .config import RunConfig, as_model, as_run, data_parallel, global_batch_of
from .hardware import Hardware, preset
from .layout import Layout, even_layers, megatron_layers, parse_layout
from .moe import DISPATCHERS, sequence_parallel_reason
from .presets import MODELS
from .transformer import LARGEST, MAX_PLACED, Transformer, dense_placed

INT, FLOAT, STR, BOOL, LIST = int, float, str, bool, list
# dest: (type, Megatron's default). Bools are store_true flags (False when absent).
FLAGS = {
    # the model
    "num_layers": (INT, None), "hidden_size": (INT, None), "num_attention_heads": (INT, None),
    "ffn_hidden_size": (INT, None), "kv_channels": (INT, None),
    "group_query_attention": (BOOL, False), "num_query_groups": (INT, 1),
    "swiglu": (BOOL, False), "quick_geglu": (BOOL, False),
    "no_bias_swiglu_fusion": (BOOL, False), "no_bias_gelu_fusion": (BOOL, False),
    "disable_bias_linear": (BOOL, False), "cross_entropy_loss_fusion": (BOOL, False),
    "cross_entropy_fusion_impl": (STR, "native"),
    "untie_embeddings_and_output_weights": (BOOL, False),
    "vocab_size": (INT, None), "padded_vocab_size": (INT, None),
    "make_vocab_size_divisible_by": (INT, 128),
    "tokenizer_type": (STR, None), "merge_file": (STR, None),
    "attention_dropout": (FLOAT, 0.1),
    "hidden_dropout": (FLOAT, 0.1), "use_flash_attn": (BOOL, False),
    "attention_backend": (STR, "auto"), "num_experts": (INT, None),
    "moe_ffn_hidden_size": (INT, None), "moe_router_topk": (INT, 2),
    "moe_shared_expert_intermediate_size": (INT, None), "moe_layer_freq": (STR, "1"),
    "multi_latent_attention": (BOOL, False), "q_lora_rank": (INT, None),
    "kv_lora_rank": (INT, 32), "qk_head_dim": (INT, 128), "qk_pos_emb_head_dim": (INT, 64),
    "v_head_dim": (INT, 128), "mtp_num_layers": (INT, None), "seq_length": (INT, None),
    "window_size": (STR, None), "window_attn_skip_freq": (STR, None),
    # parallelism
    "tensor_model_parallel_size": (INT, 1), "pipeline_model_parallel_size": (INT, 1),
    "num_layers_per_virtual_pipeline_stage": (INT, None),
    "num_virtual_stages_per_pipeline_rank": (INT, None),
    "virtual_pipeline_model_parallel_size": (INT, None),
    "pipeline_model_parallel_layout": (STR, None),
    "decoder_first_pipeline_num_layers": (INT, None),
    "decoder_last_pipeline_num_layers": (INT, None),
    "account_for_embedding_in_pipeline_split": (BOOL, False),
    "account_for_loss_in_pipeline_split": (BOOL, False),
    "context_parallel_size": (INT, 1), "cp_comm_type": (STR, "p2p"),
    "moe_token_dispatcher_type": (STR, "allgather"),
    "expert_model_parallel_size": (INT, 1), "expert_tensor_parallel_size": (INT, None),
    "sequence_parallel": (BOOL, False),
    # batch
    "micro_batch_size": (INT, None), "global_batch_size": (INT, None),
    "optimizer": (STR, "adam"),
    # recomputation
    "recompute_granularity": (STR, None), "recompute_activations": (BOOL, False),
    "recompute_method": (STR, None), "recompute_num_layers": (INT, None),
    "recompute_modules": (LIST, None),
    # memory, overlap, precision
    "use_distributed_optimizer": (BOOL, False), "data_parallel_sharding_strategy": (STR, None),
    "use_torch_fsdp2": (BOOL, False), "use_megatron_fsdp": (BOOL, False),
    "num_distributed_optimizer_instances": (INT, 1),
    "overlap_grad_reduce": (BOOL, False),
    "overlap_param_gather": (BOOL, False), "tp_comm_overlap": (BOOL, False),
    # the EP all-to-all overlap: combined 1F1B (Megatron-Bridge's moe_a2a_overlap), its pair
    # priced with the weight grads deferred, and the shared experts' own overlap it refuses
    "overlap_moe_expert_parallel_comm": (BOOL, False), "delay_wgrad_compute": (BOOL, False),
    "moe_shared_expert_overlap": (BOOL, False),
    # None: not said (Megatron's default then depends on the schedule, _run)
    "overlap_p2p_communication": (BOOL, None), "no_overlap_p2p_communication": (BOOL, False),
    "bf16": (BOOL, False), "fp16": (BOOL, False), "fp8_format": (STR, None),
    "accumulate_allreduce_grads_in_fp32": (BOOL, False), "grad_reduce_in_bf16": (BOOL, False),
}
# other spellings of the same argument: Megatron's older flags, NeMo's and Megatron-Core's keys
ALIASES = {"encoder_seq_length": "seq_length", "num_moe_experts": "num_experts",
           "activations_checkpoint_granularity": "recompute_granularity",
           "activations_checkpoint_method": "recompute_method",
           "activations_checkpoint_num_layers": "recompute_num_layers",
           "gated_linear_unit": "swiglu", "fp8": "fp8_format",
           "overlap_p2p_comm": "overlap_p2p_communication",
           "use_custom_fsdp": "use_megatron_fsdp",
           "moe_a2a_overlap": "overlap_moe_expert_parallel_comm"}
# a dict's sections read beside its top level: the model (NeMo, Megatron-Bridge), the batch
# (Bridge's train), the optimizer's sharding and overlap (Bridge's ddp and optimizer) and the
# precision's fields (Bridge's mixed_precision given as a MixedPrecisionConfig)
SECTIONS = ("model", "train", "ddp", "optimizer", "mixed_precision")
# the precision as named rather than flagged: NeMo's trainer.precision (Lightning's names) and
# Megatron-Bridge's mixed_precision recipes (bf16_mixed, fp16_with_fp8_delayed_scaling_mixed,
# ...; hyphens or underscores), as the flags --bf16, --fp16 and --fp8-format
# (half precision, fp8: None where the name leaves fp8 to the model's own field)
LIGHTNING_PRECISIONS = {"bf16": ("bf16", None), "bf16-mixed": ("bf16", None),
                        "bf16-true": ("bf16", None), "16": ("fp16", None),
                        "16-mixed": ("fp16", None), "16-true": ("fp16", None),
                        "32": (None, None), "32-true": (None, None), "64": (None, None),
                        "64-true": (None, None), "transformer-engine": ("bf16", True),
                        "transformer-engine-float16": ("fp16", True)}
# NeMo's activation names: the gated ones are a two-matrix product like --swiglu
# NeMo's optimizers (model.optim.name) that shard their state: --use-distributed-optimizer
DISTRIBUTED_OPTIMIZERS = ("distributed_fused_adam", "mcore_distributed_optim")
GATED = {"swiglu", "fast-swiglu", "geglu", "fast-geglu", "reglu", "fast-reglu"}
# dict keys (Megatron-Core's TransformerConfig, NeMo's) that are the negation of a flag;
# TransformerConfig's bias_activation_fusion is the SwiGLU fusion with --swiglu
NEGATED = {"share_embeddings_and_output_weights": "untie_embeddings_and_output_weights",
           "bias_activation_fusion": "no_bias_swiglu_fusion",
           "bias_swiglu_fusion": "no_bias_swiglu_fusion"}
# Megatron's vocabulary for tokenizers whose size the script does not say
TOKENIZER_VOCAB = {"GPT2BPETokenizer": 50257}
PRESENCE = {"merge_file"}  # flags read for being there (a BPE merges file: GPT-2's tokenizer)
CP_COMM = {"p2p": "ring", "a2a": "all-gather", "allgather": "all-gather",
           "a2a+p2p": "ring"}
# the types fastpp does not model, and what prices them instead (listed in ``ignored``)
CP_COMM_APPROXIMATED = {
    "a2a": "the heads' all-to-all (Ulysses) is not modelled: priced as Llama 3's all-gather",
    "a2a+p2p": "the heads' all-to-all inside each group is not modelled: priced as the ring"}
SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
SCHEDULES = ("1f1b", "interleaved-1f1b")  # what Megatron-LM runs: m = 1, and m > 1
# integer flags for which 0 means "none" (every other integer flag is a count or size >= 1)
ZERO_OK = {"num_experts", "moe_shared_expert_intermediate_size", "mtp_num_layers",
           "q_lora_rank"}
# string flags whose values Megatron's argparse restricts (choices=)
CHOICES = {"cp_comm_type": tuple(CP_COMM), "data_parallel_sharding_strategy": tuple(SHARDING),
           "recompute_granularity": ("full", "selective"),
           "recompute_method": ("uniform", "block"),
           # argparse's choices (--fp8-format; --attention-backend, AttnBackend's names)
           "fp8_format": ("e4m3", "hybrid"),
           "attention_backend": ("flash", "fused", "unfused", "local", "auto")}


# Megatron-LM's own flags, not read here, that are near one read (``near``): no misspelling.
# Every option of its parser as of August 2026 (877, those its config dataclasses add too)
# and the encoder's of mid-2025 were tried, 6 December 2026: these alone
NEAR_BUT_REAL = {"decoder_seq_length", "tp_comm_overlap_cfg", "fp4_format",
                 "eval_micro_batch_size", "eval_global_batch_size",
                 "moe_shared_expert_glu_interleave_size", "encoder_tensor_model_parallel_size",
                 "encoder_pipeline_model_parallel_size"}
# flags of other frameworks' names that mean one of Megatron's (NeMo's pipeline ends)
MEANT = {"num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
         "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers"}
# Megatron's flags that change the model's layers into blocks fastpp does not price (Mamba
# hybrids, linear attention, gated attention outputs, latent experts, per-layer shapes):
# refused, where a plain transformer priced in their place had been off by -34% to +153%
ARCHITECTURE = {"hybrid_layer_pattern", "hybrid_override_pattern",
                "heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json",
                "experimental_attention_variant", "linear_attention_freq",
                "attention_output_gate", "moe_latent_size"}
# a Transformer's fields that are the run's kernels, not the model's shape (``Imported.on``)
KERNELS = ("name", "dropout", "flash_attention", "fused_swiglu", "eager", "loss")
EXPERT_FIELDS = ("experts", "top_k", "shared_experts", "expert_ffn", "dense_layers")


@dataclass(frozen=True)
class Imported:
    """What ``from_megatron`` (or ``from_vtrain``, ``from_torchtitan``, ``from_llm_foundry``)
    read: unpacks (and indexes) as ``model, config``;
    ``ignored`` lists the flags it does not model, ``gpus`` the launcher's GPU count (None if
    it gave none), ``hardware`` the cluster the file describes (None: it describes none),
    ``vocab_multiple`` the multiple of ``t`` Megatron pads a vocabulary to (1: none) and
    ``attention`` the measured attention kernel the run's code runs, which
    ``with_attention_kernel`` prices on a GPU it was measured on (None: its GPU's own)."""

    model: Transformer
    config: RunConfig
    ignored: tuple[str, ...] = ()
    gpus: int | None = None
    hardware: Hardware | None = None
    vocab_multiple: int = 1
    attention: str | None = None

    def __getitem__(self, index):  # as the (model, config) pair it once was
        return (self.model, self.config)[index]

    def on(self, model) -> Transformer:
        """``model`` (a ``Transformer`` or a preset name: its shape, e.g. ``from_hf``'s) with
        the kernels this launch runs: dropout, FlashAttention, the fused SwiGLU, eager
        kernels and the loss are the run's choices, which a ``config.json`` does not hold;
        its vocabulary padded as the launch pads one (``vocab_multiple``). ``reshaped`` says
        what of the launch's own shape it replaces.

        Parameters
        ----------
        model : Transformer or str

        Returns
        -------
        Transformer
        """
        model = preset(MODELS, model, "model")
        vocab = padded_vocab(model.vocab, self.config.t, self.vocab_multiple) \
            if self.vocab_multiple > 1 else model.vocab
        return replace(model, vocab=vocab, dropout=self.model.dropout,
                       flash_attention=self.model.flash_attention,
                       fused_swiglu=self.model.fused_swiglu, eager=self.model.eager,
                       loss=self.model.loss)

    def reshaped(self, model) -> list[str]:
        """The launch's shape that ``on(model)`` replaces, ``"field ours -> theirs"`` for each
        field of the shape that differs (every ``Transformer`` field but its name and the
        kernels ``on`` keeps; the vocabulary after padding): a user giving a script and a
        model is told, not silently priced another model (a script without ``--swiglu`` or
        ``--untie-embeddings-and-output-weights`` beside a Llama ``config.json`` too)."""
        mine, theirs = self.model, self.on(model)
        # (a dense model's expert fields follow its MLP: said once, as ffn)
        skip = KERNELS + (() if mine.moe or theirs.moe else EXPERT_FIELDS)
        return [f"{f.name} {getattr(mine, f.name)} -> {getattr(theirs, f.name)}"
                for f in fields(Transformer) if f.name not in skip
                and getattr(mine, f.name) != getattr(theirs, f.name)]


def _launch_text(args):
    """A launch script's path as the script's text; anything else as given. A path is a
    ``PathLike``, or one word naming a ``.sh`` or ``.bash`` file or an existing file (a
    missing script was read as a command without flags: "--num-layers must be given")."""
    word = isinstance(args, str) and args != "" and not any(c.isspace() for c in args)
    if isinstance(args, os.PathLike) or (word and (args.endswith((".sh", ".bash"))
                                                   or os.path.isfile(args))):
        try:
            with open(args, encoding="utf-8") as f:
                return f.read()
        except (OSError, ValueError) as e:
            raise ScheduleError(f"args must be a readable launch script ({os.fspath(args)}: "
                                f"{e})") from None
    return args


@known_keywords("from_megatron")
def from_megatron(args, gpus: int | None = None, *, vocab: int | None = None,
                  env: dict | None = None, name: str = "megatron") -> Imported:
    """The model and the run a Megatron-LM launch describes.

    Parameters
    ----------
    args : str, os.PathLike, list of str or dict
        A launch script (its path: a ``.sh`` or ``.bash`` name or an existing file, read as
        UTF-8), its text or a command string (bash: comments, ``\\`` continuations,
        variables and arrays set above the command and expanded, an unset one to nothing
        and listed in ``ignored``; ``if`` on string and integer tests and ``case`` followed,
        a test not decided listed; the training command the last running ``pretrain*.py``
        or giving model flags), a list of arguments, or a
        dict of snake_case keys or flags (NeMo, Megatron-Bridge, ``MODEL_ARGS`` YAML; its
        ``model``, ``train``, ``ddp``, ``optimizer`` and ``mixed_precision`` sections are read
        too; a null is the default; ``num_query_groups`` alone is grouped-query attention, as
        ``TransformerConfig`` takes it; NeMo's gated ``activation`` names are ``--swiglu``;
        NeMo's ``trainer.precision`` and a Bridge ``mixed_precision`` recipe's name are the
        precision flags they stand for; NeMo's ``model.optim.name`` of a distributed
        optimizer is ``--use-distributed-optimizer``).
    gpus : int, optional
        GPUs in all (default: the launcher's ``--nproc_per_node`` times ``--nnodes``, or
        NeMo's ``trainer.devices`` times ``trainer.num_nodes``);
        ``d = gpus / (t cp p)``.
    vocab : int, optional
        The tokenizer's vocabulary when the script does not give ``--vocab-size`` (Megatron
        pads it to a multiple of ``--make-vocab-size-divisible-by`` times ``t``).
    env : dict, optional
        Values of variables the script reads from its environment or arguments (``$1``).
    name : str
        The model's name.

    Returns
    -------
    Imported
        ``model, config = from_megatron(...)``; ``.ignored`` the flags not modelled.
        Megatron's defaults where a flag is absent: embeddings tied unless
        ``--untie-embeddings-and-output-weights``; ``--num-query-groups`` read only with
        ``--group-query-attention``; ``--moe-router-topk`` 2; the vocabulary padded to a
        multiple of ``128 t`` (``--padded-vocab-size`` as given); ``ffn`` ``4h``, or with
        ``--swiglu`` ``int(8h/3/64)*64`` (``--quick-geglu`` is gated as ``--swiglu`` is);
        an interleaved pipeline's hand-offs overlapped unless
        ``--no-overlap-p2p-communication``, a plain one's blocking;
        dropout 0.1; SwiGLU fused (``bias_swiglu``) unless ``--no-bias-swiglu-fusion`` (a
        dict's ``bias_activation_fusion: false``; a dict with neither is read as the command
        line reads it, fused, though Megatron-Core's ``TransformerConfig`` alone defaults to
        unfused and NeMo's model configs set it); the loss Megatron's vocabulary-parallel
        cross entropy, fused with ``--cross-entropy-loss-fusion`` (``Transformer.loss``
        ``"fused"``: Megatron-Core's native fused loss; ``--cross-entropy-fusion-impl te``,
        Transformer Engine's, is priced so and listed in ``ignored``; a dict's
        ``cross_entropy_loss_fusion``, which NeMo's and Megatron-Bridge's model configs set);
        ZeRO 0 without
        ``--use-distributed-optimizer``; fp32 without ``--bf16`` or ``--fp16`` (priced as
        bf16, and listed in ``ignored``), and ``--fp16`` priced as bf16 (listed too; as
        fp8 with ``--fp8-format``).

    Raises
    ------
    ScheduleError
        Naming the flag: a value of the wrong type, a required one missing
        (``--num-layers``, ``--hidden-size``, ``--num-attention-heads``, ``--seq-length``),
        two that contradict (naming both), a variable that cannot be resolved (naming it),
        torchrun's elastic ``--nnodes min:max`` without ``gpus=``, a
        degree that does not divide the GPUs, a value outside Megatron's choices, or a run
        Megatron refuses to start: layers (with the embedding and loss where they count as
        layers) that do not split evenly over the stages without a layout or end counts,
        virtual stages on one pipeline rank; a flag that misspells one read (Megatron's
        parser refuses a flag it does not have, and abbreviations).
    """
    if env is not None and not isinstance(env, dict):
        raise ScheduleTypeError(f"env must be a dict of variables (got {type(env).__name__})")
    if vocab is not None:
        positive_int(vocab, "vocab")
    values, ignored, launcher = _read(_launch_text(args), env or {})
    a = {dest: _typed(dest, values[dest]) if dest in values else default
         for dest, (_, default) in FLAGS.items()}
    _contradictions(a)
    refused = _refused_by_megatron(a)
    command = not isinstance(args, dict)  # (a dict is NeMo's or Bridge's: their own rules)
    if not command and a["tp_comm_overlap"] and not (
            a["sequence_parallel"] and a["tensor_model_parallel_size"] > 1):
        a["tp_comm_overlap"] = False
        refused += ("tp_comm_overlap without sequence parallelism at t > 1: off, as NeMo's and "
                    "Megatron-Bridge's overlap callbacks turn it off",)
    model = _model(a, vocab, name)
    if gpus is None and isinstance(launcher, str):
        raise ScheduleError(f"the GPU count must be given: torchrun's {launcher}")
    launcher = launcher if isinstance(launcher, int) else None
    config = _run(a, model, gpus if gpus is not None else launcher, command)
    extra = ("fp32 (no --bf16 or --fp16): priced as bf16",) if not (
        a["bf16"] or a["fp16"] or a["fp8_format"]) else ()
    if a["fp16"] and not a["fp8_format"]:  # RunConfig's precisions: bf16 and fp8
        extra += ("fp16: priced as bf16 (the same tensor-core rate; its loss scaling is not "
                  "priced)",)
    if not a["quick_geglu"] or a["swiglu"]:  # read for --quick-geglu's fusion alone
        extra += tuple(f"--{k.replace('_', '-')}" for k in ("no_bias_gelu_fusion",
                                                            "disable_bias_linear") if a[k])
    if a["cross_entropy_loss_fusion"] and a["cross_entropy_fusion_impl"] != "native":
        extra += (f"--cross-entropy-fusion-impl {a['cross_entropy_fusion_impl']}: priced as "
                  f"Megatron's native fused loss (Transformer Engine's kernel works in the bf16 "
                  f"logits, its bytes and memory not modelled)",)
    if config.gradient_overlap and config.zero == 1 and not a["overlap_param_gather"]:
        extra += ("--overlap-grad-reduce without --overlap-param-gather: the parameters' "
                  "all-gather is priced overlapped with the next forward as the gradients' "
                  "reduction is (fastpp's gradient_overlap holds both); Megatron runs it after "
                  "the optimizer step, exposed",)
    if vocab is not None and a["vocab_size"] is not None and vocab != a["vocab_size"]:
        extra += (f"vocab={vocab}: the script's --vocab-size {a['vocab_size']} priced",)
    if a["cp_comm_type"] in CP_COMM_APPROXIMATED and config.cp > 1:
        extra += (f"--cp-comm-type {a['cp_comm_type']}: "
                  f"{CP_COMM_APPROXIMATED[a['cp_comm_type']]}",)
    extra += tuple(f"--{k.replace('_', '-')}" for k in ("delay_wgrad_compute",
                                                        "moe_shared_expert_overlap")
                   if a[k] and not a["overlap_moe_expert_parallel_comm"])  # (not modelled)
    if a["overlap_moe_expert_parallel_comm"] and not a["delay_wgrad_compute"]:
        extra += ("--overlap-moe-expert-parallel-comm without --delay-wgrad-compute: its pair "
                  "priced with the weight grads deferred, as Megatron-Bridge and the MoE "
                  "ModelZoo run the overlap (without, the MLP's weight grad runs before the "
                  "backward's dispatch)",)
    return Imported(model, config, tuple(ignored) + refused + extra, launcher,
                    vocab_multiple=1 if a["padded_vocab_size"] else
                    a["make_vocab_size_divisible_by"])


def _read(args, env: dict) -> tuple[dict, list, int | None]:
    """The arguments as ``{dest: raw value}``, the flags not modelled, the launcher's GPUs."""
    if isinstance(args, dict):
        return _read_dict(args)
    notes = []
    if isinstance(args, str):
        words, notes = _script(args, env)
    elif isinstance(args, list | tuple) and all(isinstance(x, str) for x in args):
        words = [_Word(x) for x in args]
    else:
        raise ScheduleTypeError(f"args must be a script or command string, a list of strings "
                                f"or a dict (got {type(args).__name__})")
    values, ignored, launcher = _flags(words)
    return values, notes + ignored, launcher


def _read_dict(args: dict) -> tuple[dict, list, int | None]:
    """A dict's arguments: its top level and ``SECTIONS``, keys in snake_case (NeMo's and
    Megatron-Core's configs, read by their rules) or as flags (``--num-layers``, Megatron-LM's
    ``MODEL_ARGS`` YAML, read as its command line); a null is the default."""
    # (key, value, the key as the message names it: its section's, ddp.overlap_grad_reduce)
    items = [(k, v, k) for k, v in args.items() if not isinstance(v, dict)
             and k != "mixed_precision"]
    for section in SECTIONS:
        if isinstance(args.get(section), dict):
            items += [(k, v, f"{section}.{k}") for k, v in args[section].items()]
    named = {"mixed_precision": args.get("mixed_precision")}  # Bridge's recipe, by name
    trainer = args.get("trainer") if isinstance(args.get("trainer"), dict) else {}
    if trainer:
        named["trainer.precision"] = trainer.get("precision")  # NeMo's
    # NeMo's optimizer by name: its distributed ones shard the optimizer state (ZeRO-1),
    # as --use-distributed-optimizer
    model = args.get("model") if isinstance(args.get("model"), dict) else {}
    optim = model.get("optim") if isinstance(model.get("optim"), dict) else {}
    if optim.get("name") in DISTRIBUTED_OPTIMIZERS:
        items.append(("model.optim.name", True, "model.optim.name"))
    flat, flags, said, place = {}, set(), {}, {}  # flags: the keys written as flags
    for key, value, shown in items:
        name = key[2:].replace("-", "_") if isinstance(key, str) and key.startswith("--") else key
        if key == "model.optim.name":  # (read as the flag, not listed as a key not modelled)
            name = "use_distributed_optimizer"
        if name != key:  # a flag: its value as Megatron's launchers pass it
            value = _launched(name, value)
        if value is None:
            continue
        if name in flat and flat[name] != value:  # two places, two values
            raise ScheduleError(f"{place[name]} and {shown} contradict: give one")
        flat[name], said[name], place[name] = value, key, shown
        if name != key:
            flags.add(name)
    # a named precision is applied over the model's fields, as NeMo's precision plugin and
    # Bridge's recipe set them (bf16, fp16 and fp8 together)
    notes = []
    for key, value in named.items():
        if value is not None and not isinstance(value, dict):
            for name, setting in _named_precision(key, value).items():
                for other in [name, *(k for k, v in ALIASES.items() if v == name)]:
                    flat.pop(other, None)
                if setting is not None:
                    flat[name], said[name] = setting, f"{key}={value!r}"
            if "fp4" in str(value):
                notes.append(f"{key}={value!r}: fp4 priced as bf16")
    # TransformerConfig and NeMo have no group_query_attention: their num_query_groups is it
    if flat.get("num_query_groups") and "group_query_attention" not in flat and \
            "num_query_groups" not in flags:
        flat["group_query_attention"] = True
    granularity = next((flat[k] for k in ("recompute_granularity",
                                          "activations_checkpoint_granularity") if k in flat),
                       None)
    values, ignored, first = {}, [], {}  # first: the key that set each argument
    for key, value in flat.items():
        dest = ALIASES.get(key, key)
        # NeMo's method and layer count mean nothing without a granularity
        if granularity is None and key not in flags and dest in ("recompute_method",
                                                                 "recompute_num_layers"):
            ignored.append(said[key])
            continue
        if key == "activation" and isinstance(value, str):  # NeMo's
            dest, value = "swiglu", value in GATED
        elif dest not in FLAGS and key in NEGATED:
            if not isinstance(value, bool):
                raise ScheduleError(f"{key} must be true or false (got {value!r})")
            dest, value = NEGATED[key], not value
        elif dest in ARCHITECTURE:
            if value in (False, 0, "", [], "none", "None"):  # (off: the plain transformer)
                ignored.append(said[key])
                continue
            raise ScheduleError(f"{said[key]} changes the model's layers into blocks fastpp "
                                f"does not price (it prices transformer layers: attention and "
                                f"an MLP or experts); remove it to price the plain "
                                f"transformer (got {value!r})")
        elif dest not in FLAGS:
            meant = _unknown_flag(said[key], dest) if key in flags else None
            ignored.append(said[key] if meant is None else
                           f"{said[key]} ({MISSPELT} --{meant.replace('_', '-')}?)")
            continue
        if dest in values and values[dest] != value:  # two spellings, two values
            raise ScheduleError(f"{said[first[dest]]} and {said[key]} contradict: give one")
        values[dest], first[dest] = value, key
    return values, ignored + notes, _trainer_gpus(trainer)


def _launched(name: str, value):
    """A ``MODEL_ARGS`` YAML's flag value as Megatron's launchers pass it to its parser: one
    pair of outer quotes gone (the MoE ModelZoo's ``--moe-layer-freq: "'([0]*1+[1]*60)'"``,
    which ``bash -c`` unquotes), and ``false`` on a flag that takes a value left out (``None``:
    its ``sbatch_benchmarking.sh`` drops such flags, ``select(.value != "false")``, as
    Qwen3-30B-A3B's ``--num-layers-per-virtual-pipeline-stage: ${LAYERS_PER_VP}`` is without a
    virtual pipeline)."""
    if value is False and FLAGS.get(ALIASES.get(name, name), (None,))[0] is not BOOL:
        return None
    if isinstance(value, str) and len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _trainer_gpus(trainer: dict) -> int | None:
    """NeMo's ``trainer.devices * trainer.num_nodes`` (GPUs a node, nodes; 1 node where not
    given), None where ``devices`` is not a count (absent, ``auto`` or -1, a list of ids)."""
    devices, nodes = trainer.get("devices"), trainer.get("num_nodes", 1)
    if devices is None or isinstance(devices, str | list) or (
            devices == -1 and not isinstance(devices, bool)):  # (-1: Lightning's "all")
        return None
    for key, value in (("devices", devices), ("num_nodes", nodes)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < MAX_INT:
            raise ScheduleError(f"trainer.{key} must be an integer in 1..2**31-1 (got "
                                f"{value!r})")
    return devices * nodes


def _named_precision(key: str, value) -> dict:
    """The flags (``bf16``, ``fp16``, ``fp8_format``; None: unset) a precision named by
    ``key`` sets: NeMo's ``trainer.precision`` (``LIGHTNING_PRECISIONS``; fp8 left to the
    model but for Transformer Engine's names) or a Megatron-Bridge ``mixed_precision``
    recipe's name (its half precision first, ``fp8`` in it for ``--fp8-format hybrid``: all
    three, as Bridge's recipes set them)."""
    if key == "trainer.precision":
        given = str(value).lower()
        if isinstance(value, bool) or given not in LIGHTNING_PRECISIONS:
            raise ScheduleError(f"{key} must be one of {sorted(LIGHTNING_PRECISIONS)} "
                                f"(got {value!r})")
        half, fp8 = LIGHTNING_PRECISIONS[given]
    else:
        given = str(value).lower().replace("-", "_")
        half = given.removesuffix("_mixed").split("_with_")[0].split("_")[-1]
        if not isinstance(value, str) or not given.endswith("_mixed") or \
                half not in ("bf16", "fp16"):
            raise ScheduleError(f"{key} must be a Megatron-Bridge recipe's name, e.g. "
                                f"'bf16_mixed' or 'bf16_with_fp8_current_scaling_mixed', or "
                                f"its fields (got {value!r})")
        fp8 = "fp8" in given
    flags = {"bf16": half == "bf16", "fp16": half == "fp16"}
    if fp8 is not None:
        flags["fp8_format"] = "hybrid" if fp8 else None
    return flags


class _Word(str):
    """A word of the command; ``unresolved`` names a variable its expansion could not read
    (the word shows it as ``$X``), ``bash`` is the word as bash expands it (unset: empty)."""

    unresolved: str | None = None

    @property
    def bash(self) -> str:
        return getattr(self, "_bash", str(self))


def _flags(words) -> tuple[dict, list, int | None]:
    """``--flag value`` pairs after the training script (the launcher's flags before it)."""
    start = next((i + 1 for i, w in enumerate(words) if w.endswith(".py")), 0)
    launcher = _launcher(words[:start])
    values, ignored, i = {}, [], start
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            i += 1  # a stray word (a value of a flag we do not know takes no room here)
            if getattr(word, "unresolved", None):  # bash expands it to nothing: say so
                ignored.append(f"${word.unresolved} (the script does not set it: flags it "
                               f"holds are read from env=)")
            continue
        key, _, inline = word[2:].partition("=")
        dest = key.replace("-", "_")
        dest = ALIASES.get(dest, dest)
        kind = FLAGS.get(dest, (None,))[0]
        taken = []
        if inline:
            taken = [inline]
        elif kind is not BOOL:
            j = i + 1
            while j < len(words) and not words[j].startswith("--"):
                taken.append(words[j])
                j += 1
                if kind not in (LIST, None):
                    break
            i = j - 1
        i += 1
        if dest in ARCHITECTURE:
            raise ScheduleError(f"--{key} changes the model's layers into blocks fastpp does "
                                f"not price (it prices transformer layers: attention and an "
                                f"MLP or experts); remove it to price the plain transformer")
        if kind is None:
            meant = _unknown_flag("--" + key, dest)
            ignored.append("--" + key if meant is None else
                           f"--{key} ({MISSPELT} --{meant.replace('_', '-')}?)")
            # its value holds a variable the script does not set: bash expands it to
            # nothing (the flag is not modelled, so the run is read all the same)
            ignored += [f"{w.unresolved} (a command, not run here)"
                        if w.unresolved.startswith(("$(", "`")) else
                        f"${w.unresolved} (the script does not set it: expanded to nothing, "
                        f"as bash does)" for w in taken if getattr(w, "unresolved", None)]
            continue
        for w in taken if dest not in PRESENCE else ():
            if getattr(w, "unresolved", None):
                raise ScheduleError(f"--{key}'s value {str(w)!r} needs the variable "
                                    f"{w.unresolved!r}, which the script does not set (give "
                                    f"it in env=)")
        if kind is BOOL:
            values[dest] = True if not inline else inline
        elif kind is LIST:
            values[dest] = taken
        elif not taken:
            raise ScheduleError(f"--{key} needs a value")
        else:
            values[dest] = taken[0]
    return values, ignored, launcher


def _unknown_flag(shown: str, dest: str) -> str | None:
    """Of a flag read nowhere here (``dest``, as ``shown``): the flag another framework's name
    means (``MEANT``), else ``None``; refused where it abbreviates or misspells one read here
    (``near``): Megatron's parser takes no abbreviation (``allow_abbrev=False``), so
    --micro-batch is no flag, though argparse's default would read it as --micro-batch-size,
    and Megatron would not start."""
    if dest in NEAR_BUT_REAL:
        return None
    if dest in MEANT:
        return MEANT[dest]
    meant = next((f for f in (*FLAGS, *ALIASES) if f.startswith(dest + "_")), None) or near(
        dest, (*FLAGS, *ALIASES))
    if meant is not None:
        raise ScheduleError(f"{shown} must be a Megatron-LM flag (its parser refuses others, "
                            f"and abbreviations): a misspelt --{meant.replace('_', '-')}?")
    return None


def _launcher(words) -> int | str | None:
    """``torchrun``'s ``--nproc_per_node`` times ``--nnodes`` (None if not both integers), or
    why it names no count: the flag and variable it could not resolve (``--nnodes $NNODES``:
    not read as 1 node), or an elastic range."""
    found = {}
    for i, w in enumerate(words):
        key, _, inline = w.lstrip("-").partition("=")
        key = key.replace("-", "_")
        if key in ("nproc_per_node", "nnodes"):
            value = inline or (words[i + 1] if i + 1 < len(words) else "")
            if getattr(w if inline else value, "unresolved", None):
                return (f"--{key} needs the variable {(w if inline else value).unresolved!r}, "
                        f"which the script does not set (give it in env=, or gpus=N)")
            if key == "nnodes" and ":" in value:  # an elastic range: no one count
                return (f"--nnodes {value}, an elastic range (min:max nodes), which names no "
                        f"one node count (give gpus=N)")
            if digits(value):
                found[key] = int(value)
    zero = next((key for key in ("nproc_per_node", "nnodes") if found.get(key) == 0), None)
    if zero:  # (torchrun refuses it; a count of 0 read as gpus=0 named a flag not given)
        return f"--{zero} 0 starts no process (give it a count >= 1, or gpus=N)"
    if "nproc_per_node" in found:
        return found["nproc_per_node"] * found.get("nnodes", 1)
    return None


def _typed(dest: str, raw):
    """``raw`` (a word or a YAML value) as ``dest``'s type, or a ScheduleError naming it."""
    kind, flag = FLAGS[dest][0], "--" + dest.replace("_", "-")
    if kind is LIST:  # (a config's string of words, as Megatron's launchers split it)
        return ([str(x) for x in raw] if isinstance(raw, list | tuple) else
                str(raw).strip("[]").replace(",", " ").split())
    if kind is BOOL:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("true", "1", "yes"):
            return True
        if str(raw).lower() in ("false", "0", "no"):
            return False
        raise ScheduleError(f"{flag} must be a switch (true or false) (got {raw!r})")
    if kind is STR:
        if isinstance(raw, enum.Enum):  # a config made from Python objects: AttnBackend.flash
            raw = raw.name
        if dest == "fp8_format" and isinstance(raw, bool):  # NeMo's switch, fp8: true/false
            return "hybrid" if raw else None  # (its default format; both price as fp8)
        if raw is not None and dest in CHOICES:
            one_of(str(raw), flag, CHOICES[dest])
        return None if raw is None else str(raw)
    if kind is FLOAT:  # the dropout rates: probabilities
        try:
            value = float(raw) if not isinstance(raw, bool | np.bool_) else None
        except (TypeError, ValueError):
            value = None
        if value is None or not 0 <= value <= 1:
            raise ScheduleError(f"{flag} must be a number in [0, 1] (got {raw!r})")
        return value
    low = 0 if dest in ZERO_OK else 1
    try:
        # (NumPy's bool too: int(np.True_) is 1, a switch read as a count)
        if isinstance(raw, bool | np.bool_) or isinstance(raw, float) and raw != int(raw):
            raise ValueError
        value = int(raw, 10) if isinstance(raw, str) else int(raw)
    except (TypeError, ValueError, OverflowError):
        value = None
    if value is None or not low <= value < MAX_INT:
        raise ScheduleError(f"{flag} must be an integer in {low}..2**31-1 (got {raw!r})")
    return value


def _contradictions(a: dict) -> None:
    """Two flags that cannot both hold: a ScheduleError naming both."""
    pairs = [("bf16", "fp16"),
             # at most one of the three, as Megatron asserts (arguments.py)
             ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank"),
             ("pipeline_model_parallel_layout", "num_layers_per_virtual_pipeline_stage"),
             ("pipeline_model_parallel_layout", "num_virtual_stages_per_pipeline_rank"),
             ("pipeline_model_parallel_layout", "decoder_first_pipeline_num_layers"),
             ("pipeline_model_parallel_layout", "decoder_last_pipeline_num_layers"),
             ("overlap_p2p_communication", "no_overlap_p2p_communication"),
             *((x, y) for x in ("pipeline_model_parallel_layout",
                                "decoder_first_pipeline_num_layers",
                                "decoder_last_pipeline_num_layers")
               for y in ("account_for_embedding_in_pipeline_split",
                         "account_for_loss_in_pipeline_split"))]
    for x, y in pairs:
        if a[x] and a[y]:
            raise ScheduleError(f"--{x.replace('_', '-')} and --{y.replace('_', '-')} "
                                f"contradict: give one")
    if a["recompute_activations"] and a["recompute_granularity"] not in (None, "selective"):
        raise ScheduleError(f"--recompute-activations (selective) and --recompute-granularity "
                            f"{a['recompute_granularity']} contradict: give one")
    if a["recompute_method"] and a["recompute_granularity"] != "full":
        raise ScheduleError(f"--recompute-method needs --recompute-granularity full (got "
                            f"--recompute-granularity {a['recompute_granularity']})")
    v = a["virtual_pipeline_model_parallel_size"]
    if v and a["num_virtual_stages_per_pipeline_rank"] not in (None, v):
        raise ScheduleError("--virtual-pipeline-model-parallel-size and "
                            "--num-virtual-stages-per-pipeline-rank contradict: give one")
    for name in ("num_layers", "hidden_size", "num_attention_heads", "seq_length"):
        if a[name] is None:
            raise ScheduleError(f"--{name.replace('_', '-')} must be given (Megatron has no "
                                f"default for it)")


def _refused_by_megatron(a: dict) -> tuple[str, ...]:
    """Settings Megatron refuses, priced with a default here and said (``Imported.ignored``):
    the scripts are read to price, not to launch. Sets ``a``'s microbatch to 1 where none
    is given (a recomputation's missing method and layer count are ``RunConfig``'s own
    defaults, uniform and 1)."""
    notes = ()
    if a["micro_batch_size"] is None:  # arguments.py asserts it
        a["micro_batch_size"] = 1
        notes += ("--micro-batch-size not given (Megatron asserts it): priced as 1",)
    if a["recompute_granularity"] == "full" and not a["recompute_method"]:
        notes += ("--recompute-granularity full without --recompute-method (Megatron's "
                  "TransformerConfig refuses it): priced as uniform",)
    if a["recompute_method"] == "block" and a["recompute_num_layers"] is None:
        notes += ("--recompute-method block without --recompute-num-layers (Megatron's "
                  "TransformerConfig refuses it): priced as 1",)
    if str(a["optimizer"]).lower() not in ("adam", "adamw"):
        notes += (f"--optimizer {a['optimizer']}: its states priced as Adam's, with the ZeRO "
                  f"stage given (Megatron runs some without the distributed optimizer)",)
    return notes


def padded_vocab(vocab: int, t: int, multiple: int = 128) -> int:
    """Megatron's padded vocabulary: the next multiple of ``multiple x t``
    (``--make-vocab-size-divisible-by``, 128 by default)."""
    step = multiple * t
    return -(-vocab // step) * step


def _model(a: dict, vocab: int | None, name: str) -> Transformer:
    """The ``Transformer`` of Megatron's model arguments, its defaults where absent."""
    h, heads, t = a["hidden_size"], a["num_attention_heads"], a["tensor_model_parallel_size"]
    ffn = a["ffn_hidden_size"] or (int(8 * h / 3 / 64) * 64 if a["swiglu"] else 4 * h)
    tokenizer = a["tokenizer_type"] or ("GPT2BPETokenizer" if a["merge_file"] else None)
    size = a["vocab_size"] or vocab or TOKENIZER_VOCAB.get(tokenizer)
    if size is None and a["padded_vocab_size"] is None:
        said = (f"for tokenizer {tokenizer!r}" if tokenizer is not None else
                "(the script names no tokenizer whose vocabulary is known)")
        raise ScheduleError(f"--vocab-size must be given {said} (or from_megatron(..., "
                            f"vocab=N))")
    multiple = a["make_vocab_size_divisible_by"]
    padded = a["padded_vocab_size"] or padded_vocab(size, t, multiple)
    if padded > LARGEST["vocab"]:  # (Transformer's check named the padded vocab alone)
        # the vocabulary as the user gave it: the flag, vocab=, or the tokenizer's
        said = (f"--vocab-size {size}" if a["vocab_size"] else f"vocab={size}" if vocab
                else f"the {tokenizer} tokenizer's vocabulary {size}")
        raise ScheduleError(f"{said} padded to a multiple of "
                            f"--make-vocab-size-divisible-by x --tensor-model-parallel-size "
                            f"= {multiple} x {t} must be at most {LARGEST['vocab']:,} (no "
                            f"model is larger) (got {padded:,})")
    shape = {"layers": a["num_layers"], "hidden": h, "heads": heads, "ffn": ffn,
             # --padded-vocab-size is taken as given, as Megatron takes it
             "vocab": padded,
             # --quick-geglu (gpt-oss) is gated too: three matrices (argument_utils.py)
             "swiglu": a["swiglu"] or a["quick_geglu"],
             "tied_embeddings": not a["untie_embeddings_and_output_weights"],
             "dropout": a["attention_dropout"] > 0 or a["hidden_dropout"] > 0,
             "flash_attention": a["use_flash_attn"] or a["attention_backend"] not in (
                 "unfused", "local"),
             # --quick-geglu's fusion is the GeLU one, which Megatron also turns off without
             # biases (arguments.py, argument_utils.py); --swiglu's its own
             "fused_swiglu": (not a["no_bias_gelu_fusion"] and not a["disable_bias_linear"])
             if a["quick_geglu"] and not a["swiglu"] else not a["no_bias_swiglu_fusion"],
             "loss": "fused" if a["cross_entropy_loss_fusion"] else "in-place",
             "kv_heads": a["num_query_groups"] if a["group_query_attention"] else heads,
             "head_dim": a["kv_channels"], "mtp_depth": a["mtp_num_layers"] or 0, "name": name}
    if a["multi_latent_attention"]:
        shape.update(kv_heads=heads, head_dim=a["qk_head_dim"], v_head_dim=a["v_head_dim"],
                     q_rank=a["q_lora_rank"] or 0, kv_rank=a["kv_lora_rank"],
                     rope_dim=a["qk_pos_emb_head_dim"])
    if a["window_size"] is not None:
        shape.update(_window(a["window_size"], a["window_attn_skip_freq"], a["num_layers"]))
    if a["num_experts"]:
        width = a["moe_ffn_hidden_size"] or ffn
        layers, flag = a["num_layers"], "--moe-layer-freq"
        # Megatron's integer k: the layers i with i % k == 0 have experts
        marks = _layer_marks(a["moe_layer_freq"], layers, flag)
        if isinstance(marks, int):
            k = marks
            dense = 0 if k == 1 else dense_placed(layers, lambda i: i % k != 0, flag)
            last = (layers - 1) % k == 0
        else:
            dense, last = tuple(i for i, x in enumerate(marks) if not x), marks[-1]
        shared = a["moe_shared_expert_intermediate_size"] or 0
        if shared % width:  # (fastpp prices shared experts as routed experts' MLPs)
            raise ScheduleError(f"--moe-shared-expert-intermediate-size must be a multiple of "
                                f"--moe-ffn-hidden-size = {width} (got {shared})")
        if a["mtp_num_layers"] and not last:
            raise ScheduleError(f"--moe-layer-freq must give the last layer experts with "
                                f"--mtp-num-layers: Megatron's MTP module repeats the last "
                                f"layer, and fastpp prices an MTP module with experts (got "
                                f"--moe-layer-freq {a['moe_layer_freq']}, a dense last layer)")
        shape.update(experts=a["num_experts"], top_k=a["moe_router_topk"], expert_ffn=width,
                     shared_experts=shared // width,
                     dense_layers=dense)
    try:
        return Transformer(**shape)
    except ScheduleError as err:  # its checks name its fields: said as the flags given them
        mla = a["multi_latent_attention"]
        given = {field: "--" + dest.replace("_", "-") for field, dest, said in (
            ("layers", "num_layers", True), ("hidden", "hidden_size", True),
            ("heads", "num_attention_heads", True),
            ("ffn", "ffn_hidden_size", a["ffn_hidden_size"] is not None),
            ("kv_heads", "num_query_groups", a["group_query_attention"] and not mla),
            ("head_dim", "kv_channels", a["kv_channels"] is not None and not mla),
            ("experts", "num_experts", bool(a["num_experts"])),
            ("expert_ffn", "moe_ffn_hidden_size", a["moe_ffn_hidden_size"] is not None),
            ("top_k", "moe_router_topk", bool(a["num_experts"]))) if said}
        raise ScheduleError(by_flags(str(err), given)) from None


def _moe_pattern(model: Transformer) -> str:
    """``--moe-layer-freq`` of ``model``'s dense layers: ``([0]*d+[1]*e)`` where they lead,
    else one 0 or 1 a layer."""
    if not isinstance(model.dense_layers, tuple):
        return f"([0]*{model.dense_layers}+[1]*{model.moe_layers})"
    dense = set(model.dense_layers)
    return "[" + ",".join("0" if i in dense else "1" for i in range(model.layers)) + "]"


def _window(size: str, skip: str | None, layers: int) -> dict:
    """``Transformer``'s ``window`` and ``window_layers`` of ``--window-size`` (``left,right``,
    or ``(left, right)``: Transformer Engine's window, in which a causal query sees itself and
    ``left`` keys back, ``left + 1`` keys, as Megatron-Bridge maps a config.json's
    ``sliding_window`` to ``(sliding_window - 1, 0)``; ``-1,-1`` is no window) and
    ``--window-attn-skip-freq`` (every N-th layer full attention, or a pattern of 1 for a
    sliding layer and 0 for a full one; absent: every layer slides). The right side is
    masked anyway in a causal model."""
    parts = str(size).strip().strip("()[]").split(",")
    try:
        left, right = (int(x) for x in parts)
    except ValueError:
        left = right = -2
    if (left, right) == (-1, -1):
        return {}
    if left < 0 or right < 0:
        raise ScheduleError(f"--window-size must be two integers left,right >= 0, or -1,-1 "
                            f"for none (got {size!r})")
    # (an integer k: every k-th layer attends to everything)
    marks = None if skip is None else _layer_marks(skip, layers, "--window-attn-skip-freq")
    sliding = (layers if marks is None else layers - layers // marks
               if isinstance(marks, int) else sum(marks))
    return {"window": left + 1, "window_layers": sliding}


def _layer_marks(freq: str, layers: int, flag: str) -> int | list:
    """A Megatron layer-frequency argument: an integer ``k`` as itself, or a pattern like
    ``([0]*3+[1]*58)`` or ``[0,1,1]`` as its 0 or 1 a layer (at most ``MAX_PLACED``
    layers)."""
    text = str(freq).strip()
    if digits(text):
        k = int(text)
        if k < 1:
            raise ScheduleError(f"{flag} must be >= 1 or a pattern (got {freq!r})")
        return k
    if layers > MAX_PLACED:
        raise ScheduleError(f"{flag}'s pattern places each layer: --num-layers must be at most "
                            f"{MAX_PLACED:,} (got {layers:,})")
    try:
        pattern = _pattern(ast.parse(text, mode="eval").body, layers)
    except (SyntaxError, ValueError, RecursionError):
        raise ScheduleError(f"{flag} must be an integer or a list pattern such as "
                            f"([0]*3+[1]*58) (got {freq!r})") from None
    bad = next((k for k, x in enumerate(pattern) if type(x) is not int or x not in (0, 1)),
               None)
    if len(pattern) != layers or bad is not None:
        got = (f"{pattern[bad]!r} for layer {bad}" if bad is not None
               else f"{len(pattern)} values")
        raise ScheduleError(f"{flag}'s pattern must give 0 or 1 for each of the "
                            f"{layers} layers (got {got})")
    return pattern


def _pattern(node, layers: int) -> list:
    """A list expression of literals, ``+`` and ``*`` (no names, no calls), refused once it
    grows past ``layers`` entries (``[0]*10**12`` would not fit in memory)."""
    if isinstance(node, ast.List) and all(isinstance(x, ast.Constant) for x in node.elts):
        out = [x.value for x in node.elts]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        out = _pattern(node.left, layers) + _pattern(node.right, layers)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) \
            and isinstance(node.right, ast.Constant) and type(node.right.value) is int \
            and 0 <= node.right.value <= layers:
        out = _pattern(node.left, layers) * node.right.value
    else:
        raise ValueError(node)
    if len(out) > layers:
        raise ValueError(node)
    return out


def _uneven_rest(layers: int, c: RunConfig) -> bool:
    """Whether Megatron refuses ``c.first_layers`` and ``c.last_layers`` as per-rank counts
    of ``layers`` (the rest not even over the other ranks: ``megatron_layers``' rule)."""
    try:
        megatron_layers(layers, c.p, 1, c.first_layers, c.last_layers)
    except ScheduleError:
        return True
    return False


def _same_virtual(a: dict, m: int, said: str) -> None:
    """``--virtual-pipeline-model-parallel-size`` (a NeMo or Megatron-Core config's
    ``virtual_pipeline_model_parallel_size``), where given, must be the ``m`` that ``said``
    gives (Megatron derives it from that flag)."""
    v = a["virtual_pipeline_model_parallel_size"]
    if v and v != m:
        raise ScheduleError(f"--virtual-pipeline-model-parallel-size {v} and {said} (which "
                            f"gives {m} virtual stages) contradict: give one")


def _check_interleaved(m: int, p: int, blocking: bool, said: str) -> None:
    """Megatron's rule for an interleaved pipeline (``validate_args``): more than one pipeline
    rank, and more than two where the hand-offs block (two batched sends and receives between
    the same two ranks in one batch)."""
    if m > 1 and p <= (2 if blocking else 1):
        raise ScheduleError(f"Megatron-LM runs an interleaved pipeline on more than "
                            f"{2 if blocking else 1} pipeline ranks"
                            f"{f' with {said}' if blocking else ''} (got "
                            f"pipeline-model-parallel-size {p})")


def _run(a: dict, model: Transformer, gpus: int | None, command: bool = True) -> RunConfig:
    """The ``RunConfig`` of Megatron's run arguments."""
    t, p, cp = (a["tensor_model_parallel_size"], a["pipeline_model_parallel_size"],
                a["context_parallel_size"])
    m, layout, first, last = _chunks(a, model, p)
    if gpus is None:
        raise ScheduleError("the GPU count must be given: from_megatron(..., gpus=N), or "
                            "torchrun's --nproc_per_node (and --nnodes) in the script")
    gpus = positive_int(gpus, "gpus")
    if gpus % (t * cp * p):  # (data_parallel's message names RunConfig's t, cp and p)
        raise ScheduleError(f"--tensor-model-parallel-size x --context-parallel-size x "
                            f"--pipeline-model-parallel-size must divide the {gpus} GPUs (got "
                            f"{t} x {cp} x {p} = {t * cp * p})")
    d = data_parallel(gpus, t, cp, p)
    ep = a["expert_model_parallel_size"]
    etp = (a["expert_tensor_parallel_size"] or t) if model.moe else 1
    if (t * cp * d) % (ep * etp):  # (RunConfig's message names its ep and etp)
        said = ("--expert-tensor-parallel-size" if a["expert_tensor_parallel_size"] else
                "--tensor-model-parallel-size (--expert-tensor-parallel-size's default)")
        raise ScheduleError(f"--expert-model-parallel-size x {said} must divide the "
                            f"{t * cp * d} GPUs of a pipeline stage (got {ep} x {etp})")
    _asserted(a, t, p, cp, m, command)
    if model.moe and t > 1 and not a["sequence_parallel"]:
        # (else refused later as RunConfig's sequence_parallel=False, not by its flag)
        raise ScheduleError(f"--tensor-model-parallel-size {t} with --num-experts needs "
                            f"--sequence-parallel, as Megatron-Core's MoE layer raises in "
                            f"training without it (moe_layer.py)")
    recompute = ("selective" if a["recompute_activations"] else
                 a["recompute_granularity"] or "none")
    # the sharding strategy is Megatron FSDP's, its flag's default optim_grads_params
    # (arguments.py; DistributedDataParallelConfig's 'no_shard' is not the command line's)
    zero = (SHARDING[a["data_parallel_sharding_strategy"] or "optim_grads_params"]
            if a["use_megatron_fsdp"] else
            3 if a["use_torch_fsdp2"] else 1 if a["use_distributed_optimizer"] else 0)
    blocking = m == 1 or a["no_overlap_p2p_communication"] or \
        a["overlap_p2p_communication"] is False
    _check_interleaved(m, p, blocking, "--no-overlap-p2p-communication")
    overlap = bool(a["overlap_moe_expert_parallel_comm"])  # (Megatron's own schedule for it)
    # ZeRO in groups of d cp / instances ranks, the gradients' shards all-reduced across them
    instances = a["num_distributed_optimizer_instances"]
    if instances > 1 and (zero == 0 or (d * cp) % instances):
        raise ScheduleError(f"--num-distributed-optimizer-instances {instances} needs "
                            f"--use-distributed-optimizer (or Megatron-FSDP) and must divide "
                            f"the data- and context-parallel ranks d * cp = {d * cp}, as "
                            f"Megatron asserts")
    if a["global_batch_size"] and a["global_batch_size"] % (a["micro_batch_size"] * d):
        raise ScheduleError(f"--global-batch-size must be a multiple of --micro-batch-size x "
                            f"the {d} data-parallel ranks = {a['micro_batch_size'] * d} (got "
                            f"{a['global_batch_size']}), as Megatron asserts")
    if (recompute == "full" and a["recompute_method"] in (None, "uniform")
            and (a["recompute_num_layers"] or 1) > 1 and a["mtp_num_layers"]):
        raise ScheduleError(f"--recompute-num-layers must be 1 with --recompute-method uniform "
                            f"and --mtp-num-layers, as Megatron asserts (got "
                            f"{a['recompute_num_layers']})")
    return RunConfig(
        seq=a["seq_length"], global_batch=a["global_batch_size"] or global_batch_of(
            a["micro_batch_size"], d, gpus, "--micro-batch-size"),
        t=t, cp=cp, p=p, d=d, ep=ep, etp=etp,
        schedule="combined-1f1b" if overlap else SCHEDULES[m > 1], m=m, overlap=overlap,
        microbatch=a["micro_batch_size"], recompute=recompute,
        # (Megatron reads --recompute-num-layers with full recomputation alone)
        recompute_method=a["recompute_method"],
        recompute_layers=a["recompute_num_layers"] if recompute == "full" else None,
        recompute_modules=None if a["recompute_modules"] is None else tuple(
            a["recompute_modules"]),
        sequence_parallel=a["sequence_parallel"], zero=zero, replicate=instances,
        gradient_overlap=a["overlap_grad_reduce"], tp_overlap=a["tp_comm_overlap"],
        # Megatron overlaps an interleaved pipeline's hand-offs unless told not to (its
        # default since October 2023; --overlap-p2p-communication asked for it before), and
        # never a plain one's
        blocking_handoffs=blocking,
        precision="fp8" if a["fp8_format"] else "bf16", layout=layout, first_layers=first,
        last_layers=last, cp_comm=CP_COMM.get(a["cp_comm_type"], "ring"),
        dispatcher=_dispatcher(a["moe_token_dispatcher_type"]) if model.moe else "alltoall",
        reduce_bytes=2.0 if a["grad_reduce_in_bf16"] or (
            a["fp16"] and not a["accumulate_allreduce_grads_in_fp32"]) else 4.0)


def _asserted(a: dict, t: int, p: int, cp: int, m: int, command: bool) -> None:
    """What Megatron's ``validate_args`` asserts of these flags, refused naming them (each
    had been priced: a review, 7 December 2026); of a dict (NeMo's, Megatron-Bridge's, which
    validate otherwise) only what Megatron-Core itself needs, the experts and the sequence."""
    def refuse(why, how="as Megatron asserts"):
        raise ScheduleError(f"{why}, {how}")

    if command and a["tp_comm_overlap"] and not (a["sequence_parallel"] and t > 1):
        refuse("--tp-comm-overlap needs --sequence-parallel with --tensor-model-parallel-size "
               "> 1 (Megatron turns sequence parallelism off at 1)")
    if command and a["overlap_param_gather"] and not (
            (a["use_distributed_optimizer"] or a["use_megatron_fsdp"])
            and a["overlap_grad_reduce"]):
        refuse("--overlap-param-gather needs --use-distributed-optimizer (or Megatron-FSDP) and "
               "--overlap-grad-reduce")
    if command and a["use_torch_fsdp2"]:
        for flag, on in (("--use-distributed-optimizer", a["use_distributed_optimizer"]),
                         ("--pipeline-model-parallel-size > 1", p > 1), ("--fp16", a["fp16"]),
                         ("--expert-model-parallel-size > 1",
                          a["expert_model_parallel_size"] > 1),
                         ("tied embeddings (without --untie-embeddings-and-output-weights)",
                          not a["untie_embeddings_and_output_weights"])):
            if on:
                refuse(f"--use-torch-fsdp2 cannot run with {flag}")
    if command and a["num_layers_per_virtual_pipeline_stage"] and (
            a["decoder_first_pipeline_num_layers"] or a["decoder_last_pipeline_num_layers"]):
        refuse("--num-layers-per-virtual-pipeline-stage cannot run with "
               "--decoder-first/last-pipeline-num-layers (give "
               "--num-virtual-stages-per-pipeline-rank)")
    ep, experts = a["expert_model_parallel_size"], a["num_experts"]
    if ep > 1 and not experts:
        refuse(f"--expert-model-parallel-size {ep} needs --num-experts")
    if experts and experts % ep:
        refuse(f"--num-experts {experts} must be a multiple of --expert-model-parallel-size "
               f"{ep}")
    if cp > 1 and a["seq_length"] % (2 * cp):
        refuse(f"--seq-length {a['seq_length']} must split into 2 x --context-parallel-size "
               f"= {2 * cp} equal chunks", "as Megatron's get_batch_on_this_cp_rank splits it")
    if a["overlap_moe_expert_parallel_comm"]:
        _overlap_asserted(a, p, m, command, refuse)


def _overlap_asserted(a: dict, p: int, m: int, command: bool, refuse) -> None:
    """What Megatron-Core's ``TransformerConfig`` asserts of its EP all-to-all overlap
    (``overlap_moe_expert_parallel_comm``; Megatron-LM d98e8a6, transformer_config.py), which
    runs as ``combined-1f1b``; its half precision of the command line's flags alone (a dict
    may name it otherwise)."""
    flag = "--overlap-moe-expert-parallel-comm"
    modules = a["recompute_modules"] or ()
    for why, bad in (
            ("a virtual pipeline with --pipeline-model-parallel-size > 1", p > 1 and m == 1),
            ("--expert-model-parallel-size > 1", a["expert_model_parallel_size"] == 1),
            ("--moe-token-dispatcher-type alltoall or flex",
             a["moe_token_dispatcher_type"] not in ("alltoall", "flex")),
            ("no full recomputation", a["recompute_granularity"] == "full"),
            ("no --recompute-method", a["recompute_method"] is not None),
            ("no --recompute-num-layers", a["recompute_num_layers"] is not None),
            ("no moe in --recompute-modules", "moe" in modules),
            ("--bf16 or --fp16", command and not (a["bf16"] or a["fp16"])),
            ("at most one MTP layer", (a["mtp_num_layers"] or 0) > 1),
            ("no --moe-shared-expert-overlap", a["moe_shared_expert_overlap"])):
        if bad:
            refuse(f"{flag} needs {why}")


def _dispatcher(value: str) -> str:
    """``--moe-token-dispatcher-type`` checked (Megatron's default, where absent, is
    allgather). Megatron-Core 0.10-0.12's ``alltoall_seq`` sends what alltoall sends."""
    if value == "alltoall_seq":
        return "alltoall"
    if value not in DISPATCHERS:
        raise ScheduleError(f"--moe-token-dispatcher-type must be one of {list(DISPATCHERS)} "
                            f"(got {value!r})")
    return value


def _chunks(a: dict, model: Transformer, p: int):
    """Chunks per device ``m`` from any of Megatron's three virtual-stage flags or the layout
    string, and the layout (Megatron's first/last counts with ``m > 1`` as a layout, and its
    split that counts the embedding or the loss as a layer). The divisions Megatron asserts
    exact (``arguments.py``, ``TransformerConfig``) must be."""
    layout = a["pipeline_model_parallel_layout"]
    per_stage = a["num_layers_per_virtual_pipeline_stage"]
    if layout is not None:
        stages = parse_layout(layout).stages
        if stages % p:
            raise ScheduleError(f"--pipeline-model-parallel-layout must give a multiple of "
                                f"--pipeline-model-parallel-size {p} stages (got {stages})")
        _same_virtual(a, stages // p, "--pipeline-model-parallel-layout")
        return stages // p, layout, None, None
    ends = (a["account_for_embedding_in_pipeline_split"], a["account_for_loss_in_pipeline_split"])
    units = model.layers + sum(ends)  # layers, the embedding and the loss counted as ends ask
    counted = "".join(f" + 1 ({flag})" for flag, on in zip(
        ("--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"),
        ends, strict=True) if on)
    if per_stage is not None:
        if units % (per_stage * p):
            raise ScheduleError(f"--num-layers-per-virtual-pipeline-stage {per_stage} times "
                                f"--pipeline-model-parallel-size {p} must divide --num-layers "
                                f"{model.layers}{counted}")
        m = units // (per_stage * p)
        _same_virtual(a, m, "--num-layers-per-virtual-pipeline-stage")
    else:
        m = (a["num_virtual_stages_per_pipeline_rank"]
             or a["virtual_pipeline_model_parallel_size"] or 1)
    if m > 1 and p == 1:
        raise ScheduleError(f"virtual pipeline stages (m={m}) need --pipeline-model-parallel-"
                            f"size > 1, as Megatron asserts (got 1)")
    first, last = a["decoder_first_pipeline_num_layers"], a["decoder_last_pipeline_num_layers"]
    if m > 1 and (first is not None or last is not None):
        return m, str(megatron_layers(model.layers, p, m, first, last)), None, None
    if first is None and last is None:
        if units % (p * m):
            raise ScheduleError(f"--num-layers {model.layers}{counted} must be a multiple of "
                                f"--pipeline-model-parallel-size {p}"
                                + (f" times {m} virtual stages" if m > 1 else "")
                                + " (Megatron's even split; --decoder-first-pipeline-num-layers "
                                  "or a layout give others)")
        if any(ends):  # each virtual stage units / (p m); the ends' take a layer's place
            counts = [units // (p * m)] * (p * m)
            counts[0] -= ends[0]
            counts[-1] -= ends[1]
            return m, str(Layout.from_layers(counts)), None, None
    elif first is not None or last is not None:  # the rest even over the others, as Megatron
        megatron_layers(model.layers, p, 1, first, last)  # asserts (else it refuses to start)
    return m, None, first, last


# ---- the shell: a launch script's words as bash expands them ----

_ASSIGN = re.compile(r"^(?:export\s+|declare\s+-a\s+|local\s+)?([A-Za-z_]\w*)(\+?)=(.*)$",
                     re.S)
# $((...)) with parentheses inside, two deep: $((N/(T*P))) (the lazy .*? stopped at its
# first "))" and left the variable unread, a review)
_ARITH = r"(?:[^()]|\((?:[^()]|\([^()]*\))*\))*"
_VAR = re.compile(r"\$(?:\{([^}]*)\}|\(\((" + _ARITH + r")\)\)|([A-Za-z_]\w*|[0-9@*#?]))")
_ARRAY = re.compile(r'"?\$\{([A-Za-z_]\w*)\[[@*]\]\}"?')  # a whole array, "${A[@]}"
_CONTROL = ("then", "do", "done", "for", "while")


def script_words(text: str, env: dict | None = None) -> list[_Word]:
    """The words of ``text``'s training command, variables and arrays expanded (see
    ``_script``)."""
    return _script(text, env)[0]


def _script(text: str, env: dict | None = None) -> tuple[list[_Word], list[str]]:
    """The words of ``text``'s training command (the last statement running a
    ``pretrain*.py`` or passing model flags, else the last naming a ``.py`` file, else every
    statement that is not an assignment), variables and arrays expanded; and notes for
    ``ignored``: the tests this could not decide and the unset variables tests read.

    ``if`` blocks are followed on string tests (``=``, ``==``, ``!=``, ``-z``, ``-n``; a
    pattern on the right of ``[[ == ]]``) and integer ones (``-eq``, ``-ne``, ``-gt``,
    ``-ge``, ``-lt``, ``-le``); ``case`` arms are matched as bash's glob patterns. An unset
    variable is empty there, as bash has it (and noted); a test this cannot decide (a file,
    a command, a number the script does not set) counts as true, and is noted with the
    branch taken."""
    scope = {k: str(v) for k, v in (env or {}).items()}
    arrays: dict[str, list[_Word]] = {}
    commands, notes = [], []
    frames = []  # open if/case blocks: [kind, this branch runs, some branch ran, the word]
    for statement in _statements(text):
        head, _, rest = statement.partition(" ")
        if head in ("then", "do", "else") and rest.strip():  # a command after its keyword
            if head == "else":
                _branch(head, head, frames, scope, arrays, notes)
            statement = rest.strip()
            head = statement.split(None, 1)[0]
        if head in ("if", "elif", "else", "fi"):
            _branch(head, statement, frames, scope, arrays, notes)
            continue
        if head == "case":
            statement = _case(statement, frames, scope, arrays, notes)
        elif head == "esac":
            _esac(frames, notes)
            continue
        elif frames and frames[-1][0] == "case":
            statement = _arm(statement, frames, notes)
        if not statement:
            continue
        head = statement.split(None, 1)[0]
        if head in _CONTROL or not all(f[1] for f in frames):
            continue
        match = _ASSIGN.match(statement)
        words = _split(match.group(3)) if match else []
        if match and len(words) > 1 and not match.group(3).startswith("("):
            # X=1 command ...: the command (X set for it alone, not read here)
            statement = match.group(3)[len(words[0][0]):].strip()
        elif match:
            _assign(*match.groups(), scope, arrays)
            continue
        commands.append(_expand_words(_split(statement), scope, arrays))
    ran = [c for c in commands if any(w.endswith(".py") for w in c)]
    # a script may run other Python after training (a checkpoint's conversion): the
    # training command is the one running pretrain*.py or giving a model flag
    training = [c for c in ran if any(
        re.search(r"(^|/)pretrain\w*\.py$", w) or w.split("=")[0] in _MODEL_FLAGS for w in c)]
    words = training[-1] if training else ran[-1] if ran else [w for c in commands for w in c]
    return words, notes


# the flags that say a command trains the model
_MODEL_FLAGS = ("--num-layers", "--hidden-size", "--num-attention-heads")


def _assign(key: str, append: str, value: str, scope: dict, arrays: dict) -> None:
    """``X=value``, ``X=(...)`` or ``X+=(...)``: a scalar (unset if it is only unset
    variables; an unset variable amid other text kept, marked) or an array,
    at most ``MAX_VALUE`` characters (``X="$X$X"`` repeated doubles it each line)."""
    if value.startswith("("):
        items = _expand_words(_split(value[1:value.rfind(")")]), scope, arrays)
        arrays[key] = (arrays.get(key, []) if append else []) + items
        _check_size(key, len(arrays[key]) + sum(len(w) for w in arrays[key]))
        return
    array = _ARRAY.fullmatch(value)
    text = (" ".join(arrays.get(array.group(1), [])) if array else
            " ".join(_expand(w, scope, arrays) for w, _ in _split(value)))
    if _UNSET.search(text) and not _UNSET.sub("", text).strip():
        # nothing but unset variables: X is unset too (named as X where it is used)
        if not append:
            scope.pop(key, None)
        return
    # an unset variable amid other text is kept, marked: bash expands it to nothing, and a
    # flag whose value it is is refused where the command reads it
    scope[key] = (scope.get(key, "") if append else "") + text
    _check_size(key, len(scope[key]))


# characters in one variable of a script (an array's items count one each, so that empty
# ones doubling each line stop too): no launch script comes close
MAX_VALUE = 1_000_000


def _check_size(key: str, size: int) -> None:
    if size > MAX_VALUE:
        raise ScheduleError(f"the script's variable {key} must expand to at most "
                            f"{MAX_VALUE:,} characters (got {size:,})")


def _branch(head: str, statement: str, frames: list, scope: dict, arrays: dict,
            notes: list) -> None:
    """Follow ``if``/``elif``/``else``/``fi``: each branch runs when its test holds and no
    earlier one ran."""
    outer = all(f[1] for f in frames)
    if head == "if":
        test = _decide(statement[2:], scope, arrays, notes if outer else None)
        frames.append(["if", test, test, None])
    elif not frames or frames[-1][0] != "if":
        raise ScheduleError(f"the script's {head!r} has no 'if'")
    elif head == "fi":
        frames.pop()
    else:
        ran = frames[-1][2]
        outer = all(f[1] for f in frames[:-1])
        test = not ran and (head == "else" or _decide(
            statement[4:], scope, arrays, notes if outer else None))
        frames[-1][1:3] = [test, ran or test]


def _decide(text: str, scope: dict, arrays: dict, notes: list | None) -> bool:
    """``_test``'s answer, a test it cannot decide taken as true; noted in ``notes`` (None:
    the block does not run anyway)."""
    value, unset = _test(text, scope, arrays)
    said = " ".join(text.split())
    if notes is not None and value is None:
        notes.append(f"if {said}: not decided here (a file, a command or a number the script "
                     f"does not set): its branch was taken")
    elif notes is not None and unset:
        notes.append(f"if {said}: ${unset[0]} is not set in the script, empty as bash has "
                     f"it: its branch was {'taken' if value else 'skipped'}")
    return True if value is None else value


def _test(text: str, scope: dict, arrays: dict) -> tuple[bool | None, list[str]]:
    """A bash test joined by ``||`` and ``&&`` (left to right): True, False or None (a test
    not read here: files, commands, unset numbers); and the unset variables it read."""
    result, join, unset = False, "||", []
    for part in re.split(r"(\|\||&&)", text):
        if part in ("||", "&&"):
            join = part
            continue
        part = part.strip()
        pattern = part.startswith("[[")  # [[ x == pat ]]: the right side a glob pattern
        bracket = part.startswith("[") and part.endswith("]") or part.startswith("test ")
        raw = _split(part.removeprefix("test ").strip("[]").strip())
        words = _expand_words(raw, scope, arrays)
        unset += [w.unresolved for w in words if w.unresolved]
        if bracket:
            value = _one_test([w.bash for w in words],
                              pattern and len(raw) == 3 and not raw[2][1])
        else:  # a command: true and false are known, others are not run here
            value = {"true": True, ":": True, "false": False}.get(part)
        # three-valued: an undecided side decides nothing unless the other does
        if join == "||":
            result = True if True in (result, value) else None if None in (
                result, value) else False
        else:
            result = False if False in (result, value) else None if None in (
                result, value) else True
    return result, unset


_INTEGER_TESTS = {"-eq": int.__eq__, "-ne": int.__ne__, "-gt": int.__gt__,
                  "-ge": int.__ge__, "-lt": int.__lt__, "-le": int.__le__}


def _one_test(words: list[str], pattern: bool = False) -> bool | None:
    """One ``[ ... ]`` of ``words`` (expanded), None if not read here."""
    negate = bool(words) and words[0] == "!"
    words = words[1:] if negate else words
    if len(words) == 3 and words[1] in ("==", "=", "!="):
        same = fnmatch.fnmatchcase(words[0], words[2]) if pattern else words[0] == words[2]
        value = same == (words[1] != "!=")
    elif len(words) == 3 and words[1] in _INTEGER_TESTS:
        if not all(re.fullmatch(r"\s*-?\d+\s*", w) for w in (words[0], words[2])):
            return None  # bash: "integer expression expected"
        value = _INTEGER_TESTS[words[1]](int(words[0]), int(words[2]))
    elif len(words) == 2 and words[0] in ("-z", "-n"):
        value = (words[1] == "") == (words[0] == "-z")
    elif len(words) == 1 and words[0] not in ("", "!"):
        value = True  # [ word ]: a non-empty string
    else:
        return None
    return value != negate


def _case(statement: str, frames: list, scope: dict, arrays: dict, notes: list) -> str:
    """``case WORD in``: a block whose arms ``_arm`` matches against WORD expanded; what
    follows ``in`` on the line (a first arm)."""
    match = re.fullmatch(r"case\s+(\S+)\s+in\b\s*(.*)", statement, re.S)
    if match is None:
        raise ScheduleError(f"the script's case must read 'case WORD in' (got "
                            f"{statement[:60]!r})")
    words = _expand_words(_split(match.group(1)), scope, arrays, join=True)
    word = words[0] if words else _Word("")
    frames.append(["case", False, False, (match.group(1), word)])
    return _arm(match.group(2), frames, notes) if match.group(2) else ""


_ARM = re.compile(r"\(?\s*([^()\s|]+(?:\s*\|\s*[^()\s|]+)*)\s*\)\s*(.*)", re.S)


def _arm(statement: str, frames: list, notes: list) -> str:
    """A ``pattern)`` line of a case block starts an arm (which runs if none before it did
    and a pattern matches); the command after it on the line, or the statement as it is."""
    match = _ARM.fullmatch(statement)
    if match is None:
        return statement
    frame = frames[-1]
    said, word = frame[3]
    runs = not frame[2] and any(fnmatch.fnmatchcase(word.bash, p.strip().strip("\"'"))
                                for p in match.group(1).split("|"))
    frame[1:3] = [runs, frame[2] or runs]
    if runs and word.unresolved and all(f[1] for f in frames[:-1]):
        notes.append(f"case {said}: ${word.unresolved} is not set in the script, empty as "
                     f"bash has it: the arm {match.group(1)!r} ran")
    return match.group(2).strip()


def _esac(frames: list, notes: list) -> None:
    if not frames or frames[-1][0] != "case":
        raise ScheduleError("the script's 'esac' has no 'case'")
    frame = frames.pop()
    said, word = frame[3]
    if not frame[2] and word.unresolved and all(f[1] for f in frames):
        notes.append(f"case {said}: ${word.unresolved} is not set in the script, empty as "
                     f"bash has it: no arm ran")


def _statements(text: str) -> list[str]:
    """Statements with comments dropped, continuations joined, and an array's lines or an
    assignment's quoted string's (``ARGS="`` then a flag a line, as Megatron-LM's older
    examples set them) as one; the string's line breaks become spaces, as an unquoted
    expansion splits them. (Other lines' quotes are not followed across lines: here-docs and
    echoed text hold quotes of their own.)"""
    lines = [_uncomment(line) for line in text.replace("\\\r\n", " ").replace("\\\n", " ")
             .splitlines()]
    out, open_array, open_string = [], None, None
    for line in lines:
        line = line.strip()
        if open_string is not None:
            line = f"{open_string} {line}"
            open_string = None
            if _open_quote(line):  # (the string goes on)
                open_string = line
                continue
        elif _ASSIGN.match(line) and _open_quote(line):
            open_string = line
            continue
        if open_array is not None:
            open_array += " " + line
            if _closes(open_array):
                out.append(open_array)
                open_array = None
            continue
        if not line:
            continue
        match = _ASSIGN.match(line)
        if match and match.group(3).startswith("(") and not _closes(line):
            open_array = line
            continue
        out.extend(s.strip() for s in re.split(r"\s*;\s*", line) if s.strip())
    if open_array is not None:
        raise ScheduleError(f"the script's array is not closed: {open_array[:60]!r}")
    if open_string is not None:
        raise ScheduleError(f"the script's quoted string is not closed: {open_string[:60]!r}")
    left = _left_open(text)
    if left is not None:  # (_split drops a lone quote: '--foo "bar' was read as --foo bar)
        raise ScheduleError(f"the script's quoted string is not closed: {left!r}")
    return out


# bash's metacharacters but blanks: a word, a comment's "#" too, starts after one ("a;# it's")
_BREAKS = ";&|()<>"
# (its end word is a whole word, END-OF or EOF.txt, not its letters alone)
_HEREDOC = re.compile(r"<<-?[ \t]*\\?(['\"]?)([^\s'\"\\;&|()<>]+)\1")


def _left_open(text: str) -> str | None:
    """The quote ``text`` leaves open at its end, which bash refuses, as bash reads it: a
    string may span lines, a comment runs from a ``#`` starting a word outside quotes (after a
    blank or one of ``_BREAKS``) to the line's end, a here-document's body (``<<EOF`` to
    ``EOF``) holds no quotes. Its first 60 characters from the quote; None where every quote
    closes."""
    quote, at, i, body = None, 0, 0, None  # body: a here-document's end word, pending
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "'":
            i += 1
        elif quote:
            quote = None if c == quote[-1] else quote
        elif c in "'\"`":  # (a backquoted command too: bash refuses one left open)
            # $'...' (ANSI-C quoting, its $ not escaped) takes \' as a quote inside it
            ansi = c == "'" and text[i - 1:i] == "$" and text[i - 2:i - 1] != "\\"
            quote, at = ("$'" if ansi else c), i
        elif c == "#" and (i == 0 or text[i - 1].isspace() or text[i - 1] in _BREAKS):
            line_end = text.find("\n", i)
            i = (len(text) if line_end < 0 else line_end) - 1  # (its newline read next)
        elif c == "<" and (m := _HEREDOC.match(text, i)) and text[i - 1:i] != "<" \
                and not _in_arithmetic(text[text.rfind("\n", 0, i) + 1:i]):
            body, i = m.group(2), m.end() - 1
        elif c == "\n" and body is not None:
            end = re.compile(rf"^[ \t]*{re.escape(body)}[ \t\r]*$", re.M).search(text, i + 1)
            i, body = (end.end() if end else len(text)), None
        i += 1
    return text[at:at + 60] if quote else None


def _in_arithmetic(before: str) -> bool:
    """Whether a line's ``before`` leaves an arithmetic ``((`` open: a ``<<`` there is a
    shift (``$((1<<3))``), not a here-document, whose end word ``3`` no line held, so the
    scan skipped the rest of the script, an unclosed quote after it accepted."""
    return before.count("((") > before.count("))")


def _closes(text: str) -> bool:
    return text.count("(") <= text.count(")")


def _open_quote(line: str) -> bool:
    """Whether ``line`` leaves a quote open (a string that goes on to the next line); a
    backslash escapes the next character outside single quotes, as in bash."""
    quote, escaped = None, False
    for i, c in enumerate(line):
        if escaped:
            escaped = False
        elif c == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if c == quote[-1] else quote
        elif c in "'\"":  # ($'...' as _left_open reads it)
            ansi = c == "'" and line[i - 1:i] == "$" and line[i - 2:i - 1] != "\\"
            quote = "$'" if ansi else c
    return quote is not None


def _uncomment(line: str) -> str:
    """``line`` without a ``#`` comment (a ``#`` starting a word outside quotes: after a
    blank or a metacharacter, ``_BREAKS``)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace() or line[i - 1] in _BREAKS):
            return line[:i]
    return line


def _split(text: str) -> list[tuple[str, bool]]:
    """Words and whether each was quoted (quoted words do not split after expansion)."""
    words = re.findall(r"""(?:"[^"]*"|'[^']*'|\$\(\(""" + _ARITH
                       + r"""\)\)|\$\([^)]*\)|`[^`]*`|[^\s"'])+""", text)
    return [(w, w[:1] in "'\"") for w in words]


def _expand_words(words, scope: dict, arrays: dict, join: bool = False) -> list[_Word]:
    out = []
    for word, quoted in words:
        array = _ARRAY.fullmatch(word)
        if array:  # "${A[@]}" keeps each element one word; ${A[@]} splits them
            for item in arrays.get(array.group(1), []):
                out.extend([item] if quoted else _resplit(item))
            continue
        value = _expand(word, scope, arrays)
        out.extend(_marked(part) for part in ([value] if quoted or join else value.split()))
    return out


def _resplit(word: _Word) -> list[_Word]:
    parts = []
    for part in str(word).split():
        w = _Word(part)
        w.unresolved = word.unresolved
        parts.append(w)
    return parts


# An unset variable inside an expanded text: NUL name SOH shown NUL, its whitespace and $
# hidden (so that it stays one word, is not expanded again, and a variable holding it
# carries it): a word made from it shows it as $X and names X in ``unresolved``.
_UNSET = re.compile("\x00([^\x00\x01]*)\x01([^\x00]*)\x00")
_HIDE = str.maketrans(" \t\n$", "\x02\x03\x04\x05")
_SHOW = str.maketrans("\x02\x03\x04\x05", " \t\n$")


def _unset(name: str, shown: str) -> str:
    return f"\x00{name.translate(_HIDE)}\x01{shown.translate(_HIDE)}\x00"


def _marked(text: str) -> _Word:
    """A word of ``text`` (which may hold ``_unset`` marks)."""
    found = _UNSET.search(text)
    if found is None:
        return _Word(text)
    w = _Word(_UNSET.sub(lambda m: m.group(2).translate(_SHOW), text))
    w.unresolved = found.group(1).translate(_SHOW)
    w._bash = _UNSET.sub("", text)  # an unset variable is empty, as bash has it
    return w


def _expand(word: str, scope: dict, arrays: dict) -> str:
    """One word with its variables replaced and its quotes removed, a variable that could
    not be resolved marked (``_unset``)."""

    def one(match):
        brace, arith, plain = match.groups()
        if arith is not None:
            return _arithmetic(arith, scope)
        parts = re.fullmatch(r"([A-Za-z_]\w*(?:\[\w+\])?|[0-9@*#?])(?::?[-=](.*))?",
                             brace if brace is not None else plain, re.S)
        if parts is None:  # ${#X}, ${X/a/b} and the like: not read here
            return _unset(brace, "$" + brace)
        key, default = parts.groups()
        if key.endswith("]"):  # ${ARR[0]}
            base, index = key[:-1].split("[", 1)
            items = arrays.get(base, [])
            return str(items[int(index)]) if digits(index) and int(index) < len(items) \
                else _unset(key, "$" + key)
        if key in scope:
            return scope[key]
        if default is not None:
            return _expand(default, scope, arrays)
        return _unset(key, "$" + key)

    if "'" in word and word.startswith("'"):
        return word.strip("'")
    # $(command) and `command`: not run here (hidden first, so that its own $X is not
    # expanded; a backquoted one was read as words, its GPU count the launcher's default)
    word = re.sub(r"\$\((?!\()[^)]*\)|`[^`]*`", lambda m: _unset(m.group(0), m.group(0)),
                  word)
    return _VAR.sub(one, word).replace('"', "").replace("'", "")


def _arithmetic(expr: str, scope: dict) -> str:
    """Bash's ``$((...))`` on integers: + - * / % and parentheses, variables by name."""
    missing = []

    def value(match):
        name = match.group(1)
        if name not in scope or _UNSET.search(scope[name]):
            missing.append(name)
            return name
        return scope[name]

    text = re.sub(r"\$?\{?([A-Za-z_]\w*)\}?", value, expr)
    if missing or not re.fullmatch(r"[\d\s+\-*/%()]+", text):
        return _unset(missing[0] if missing else f"$(({expr}))", f"$(({expr}))")
    try:
        return str(_integer(ast.parse(text.strip().replace("/", "//"), mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return _unset(f"$(({expr}))", f"$(({expr}))")


def _integer(node) -> int:
    ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
           ast.FloorDiv: int.__floordiv__, ast.Mod: int.__mod__}
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        return ops[type(node.op)](_integer(node.left), _integer(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_integer(node.operand)
    raise ValueError(node)


# ---- export ----

@known_keywords("to_megatron")
def to_megatron(config: RunConfig, model: Transformer | None = None) -> list[str]:
    """``config`` (and ``model``, if given) as Megatron-LM arguments;
    ``from_megatron(to_megatron(c, model), gpus=c.gpus)`` gives ``model, c`` back, but for a
    vocabulary that ``c.t`` does not divide: it comes back padded to a multiple of ``t``, as
    Megatron runs it whatever ``--make-vocab-size-divisible-by`` says, for ``framework``,
    which comes back ``"megatron"``: the arguments are the run on Megatron, and for
    ``model``'s eager kernels and another stack's loss (``Transformer.eager``, ``loss=
    "cross-entropy"``, torchtitan's, or ``"flash-attn"``, llm-foundry's), which come back as
    Megatron's fused kernels and unfused loss.

    ``first_layers``/``last_layers`` with ``m > 1`` (per model chunk, which Megatron's
    per-device flags are not) or a count of 0 (the flags must be > 0) are written as the
    layout they make, which needs ``model``; so
    is a split of ``model``'s layers that is not even over the ``p m`` stages (fastpp's
    default spreads them; Megatron refuses to start without a layout), or over the ranks
    besides those the end counts give, which then comes back as that layout.

    Parameters
    ----------
    config : RunConfig
    model : Transformer, optional
        The model, whose architecture flags are written too.

    Returns
    -------
    list of str
        The arguments, as a command line takes them.

    Raises
    ------
    ScheduleError
        For a field no Megatron-LM flag states set to other than its default (``overlap``
        but combined 1F1B's, which ``--overlap-moe-expert-parallel-comm`` states,
        ``node_limit``, ``imbalance``, ``train_metrics``, ZeRO-3's ``zero3``, a ``recipe``;
        a model's chunked attention), a schedule Megatron-LM does not run, or per-chunk
        layer counts without ``model``.
    """
    c, model = as_run(config), as_model(model)
    # fields no Megatron-LM flag states (fastpp's pricing assumptions or another framework's
    # choice): written silently they would not come back
    # (the EP overlap is Megatron's as combined 1F1B: --overlap-moe-expert-parallel-comm)
    combined = c.schedule == "combined-1f1b"
    unwritable = {"overlap": (c.overlap, combined), "node_limit": (c.node_limit, None),
                  "imbalance": (c.imbalance, 1.0), "train_metrics": (c.train_metrics, 0),
                  "zero3": (c.zero3 if c.zero == 3 else "layer", "layer"),
                  "recipe": (c.recipe, None)}
    for name, (value, default) in unwritable.items():
        if value != default:
            raise ScheduleError(f"to_megatron cannot state {name}={value!r} as a Megatron-LM "
                                f"flag (it must be {default!r})")
    flags = ["--tensor-model-parallel-size", c.t, "--pipeline-model-parallel-size", c.p,
             "--context-parallel-size", c.cp, "--expert-model-parallel-size", c.ep,
             "--expert-tensor-parallel-size", c.etp, "--micro-batch-size", c.microbatch,
             "--global-batch-size", c.global_batch, "--seq-length", c.seq]
    if c.schedule != SCHEDULES[c.m > 1] and not combined:
        raise ScheduleError(f"Megatron-LM runs 1f1b (m=1), interleaved-1f1b (m>1) or "
                            f"combined-1f1b (got schedule={c.schedule!r}, m={c.m})")
    if not c.blocking_handoffs and c.m == 1:
        raise ScheduleError("Megatron-LM overlaps the hand-offs of an interleaved pipeline "
                            "only (m > 1): blocking_handoffs must be True at m = 1 (got "
                            "False)")
    _check_interleaved(c.m, c.p, c.blocking_handoffs, "blocking_handoffs=True")
    if model is not None and model.moe and c.t > 1 and not c.sequence_parallel:
        # (from_megatron refuses these flags back: Megatron-Core's MoE layer raises on them)
        raise ScheduleError(sequence_parallel_reason(c.t))
    layout = c.layout
    ends = c.first_layers is not None or c.last_layers is not None
    # Megatron's first- and last-stage counts are per rank and must be > 0, and leave the
    # other ranks the rest evenly (it refuses to start otherwise): others as a layout
    if ends and (c.m > 1 or 0 in (c.first_layers, c.last_layers)
                 or model is not None and _uneven_rest(model.layers, c)):
        if model is None:
            raise ScheduleError("to_megatron needs the model to write first_layers/last_layers "
                                "with m > 1 or a count of 0 (as a layout)")
        layout = str(c.chunk_layout(model))
    elif layout is None and not ends and model is not None and model.layers % (c.p * c.m):
        # Megatron splits evenly or not at all: fastpp's default spread, written out
        layout = str(even_layers(model.layers, c.p * c.m))
    if layout is not None:
        flags += ["--pipeline-model-parallel-layout", layout]
    elif c.m > 1:
        flags += ["--num-virtual-stages-per-pipeline-rank", c.m]
    else:
        flags += [f for name, v in (("first", c.first_layers), ("last", c.last_layers))
                  if v is not None for f in (f"--decoder-{name}-pipeline-num-layers", v)]
    if c.recompute == "selective":
        if c.recompute_method is not None:  # ("op": RunConfig allows no other)
            raise ScheduleError("Megatron-LM has no op-level checkpointing (torchtitan's): "
                                "recompute_method must be None with recompute='selective' "
                                "(got 'op'; Megatron's selective takes recompute_modules)")
        flags += ["--recompute-granularity", "selective"]
    elif c.recompute == "full":
        if c.recompute_method == "interval":
            raise ScheduleError("Megatron-LM recomputes a chunk's layers uniformly or its "
                                "first ones (block), not every k-th: recompute_method must "
                                "be None, 'uniform' or 'block' (got 'interval')")
        flags += ["--recompute-granularity", "full",
                  "--recompute-method", c.recompute_method or "uniform",
                  "--recompute-num-layers", c.recompute_layers or 1]
    if c.recompute_modules is not None:
        flags += ["--recompute-modules", *c.recompute_modules]
    if c.zero in (2, 3):
        flags += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                  {2: "optim_grads", 3: "optim_grads_params"}[c.zero]]
    switches = {"--sequence-parallel": c.sequence_parallel,
                "--use-distributed-optimizer": c.zero == 1,
                "--overlap-grad-reduce": c.gradient_overlap,
                "--overlap-param-gather": c.gradient_overlap and c.zero >= 1,
                "--tp-comm-overlap": c.tp_overlap and c.t > 1,  # (Megatron refuses it at 1)
                "--no-overlap-p2p-communication": c.blocking_handoffs and c.m > 1,
                # (with the weight grads deferred, as its pair is priced)
                "--overlap-moe-expert-parallel-comm": combined, "--delay-wgrad-compute": combined}
    flags += [k for k, on in switches.items() if on]
    flags += ["--num-distributed-optimizer-instances", c.replicate] * (c.replicate > 1)
    flags += ["--bf16"] + (["--fp8-format", "hybrid"] if c.precision == "fp8" else [])
    flags += ["--grad-reduce-in-bf16"] * (c.reduce_bytes == 2.0)
    # PyTorch's context parallelism (a torchtitan job's) as Transformer Engine's nearest
    written = {"ring": "p2p", "all-gather": "allgather", "torch-alltoall": "p2p",
               "torch-allgather": "allgather"}
    flags += ["--cp-comm-type", written[c.cp_comm]]
    if model is None or model.moe:  # absent, Megatron's is allgather
        flags += ["--moe-token-dispatcher-type", c.dispatcher]
    if model is not None:
        flags += _model_flags(model)
    return [str(x) for x in flags]


def _model_flags(model: Transformer) -> list:
    """A ``Transformer`` as Megatron's model arguments (vocabulary already padded: divisible
    by 1)."""
    m = model
    flags = ["--num-layers", m.layers, "--hidden-size", m.hidden, "--num-attention-heads",
             m.heads, "--ffn-hidden-size", m.ffn, "--vocab-size", m.vocab,
             "--make-vocab-size-divisible-by", 1, "--attention-dropout", 0.1 if m.dropout else 0,
             "--hidden-dropout", 0.1 if m.dropout else 0]
    flags += ["--swiglu"] * m.swiglu + ["--untie-embeddings-and-output-weights"] * (
        not m.tied_embeddings)
    flags += [] if m.flash_attention else ["--attention-backend", "unfused"]
    flags += ["--no-bias-swiglu-fusion"] * (m.swiglu and not m.fused_swiglu)
    flags += ["--cross-entropy-loss-fusion"] * (m.loss == "fused")
    if m.mla:
        flags += ["--multi-latent-attention", "--qk-head-dim", m.head_dim, "--v-head-dim",
                  m.v_head_dim, "--kv-lora-rank", m.kv_rank, "--qk-pos-emb-head-dim",
                  m.rope_dim] + (["--q-lora-rank", m.q_rank] if m.q_rank else [])
    else:
        flags += ["--kv-channels", m.head_dim]
        if m.kv_heads != m.heads:
            flags += ["--group-query-attention", "--num-query-groups", m.kv_heads]
    if m.moe:
        flags += ["--num-experts", m.experts, "--moe-router-topk", m.top_k,
                  "--moe-ffn-hidden-size", m.expert_ffn,
                  "--moe-layer-freq", _moe_pattern(m)]
        if m.shared_experts:
            flags += ["--moe-shared-expert-intermediate-size", m.shared_experts * m.expert_ffn]
    if m.mtp_depth:
        flags += ["--mtp-num-layers", m.mtp_depth]
    if m.sliding_layers and m.chunked:  # (written as a window, it would come back as one)
        raise ScheduleError(f"to_megatron cannot state chunked attention as a Megatron-LM "
                            f"flag (chunked must be False; got chunked=True, window="
                            f"{m.window})")
    if m.sliding_layers:  # the full layers first, as Qwen's max_window_layers has them
        flags += ["--window-size", f"{m.window - 1},0"]
        if m.sliding_layers < m.layers:
            flags += ["--window-attn-skip-freq",
                      f"([0]*{m.layers - m.sliding_layers}+[1]*{m.sliding_layers})"]
    return flags
