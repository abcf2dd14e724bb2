"""``RunConfig``: one training run's choices, named as ``plan``'s rows name them.

The importers (``from_megatron``, ``from_torchtitan``) give one; ``transformer_costs``,
``device_bytes`` and ``plan`` take one (``config=``); a plan row converts to one and back
(``RunConfig.from_row``, ``RunConfig.to_row``); ``to_megatron`` and ``to_torchtitan`` write
one as flags or a TOML snippet.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from ..checks import (
    MAX_INT,
    ScheduleError,
    ScheduleTypeError,
    flag,
    instance,
    known_keywords,
    listed,
    name_list,
    nonnegative_int,
    one_of,
    positive_int,
    show,
)
from ..generators.registry import SCHEDULES, build_schedule, get_spec
from .hardware import PRECISIONS
from .layout import as_layout, even_layers
from .moe import DISPATCHERS, check_imbalance
from .recipes import RECIPES, RECOMPUTE_MODULES, Recipe, make_recipe
from .transformer import RECOMPUTE, Transformer

DEGREES = ("t", "cp", "p", "d", "ep", "etp")
# the choices of the fields priced in fastpp.model.stages: ZeRO stage 1 shards the optimizer
# states over the data-parallel ranks, 2 the gradients too, 3 (ZeRO-3, FSDP) the weights too
ZERO = (0, 1, 2, 3)
# ZeRO-3's collectives: per layer in each forward and backward, the gradients reduced in
# each (Megatron-FSDP, FSDP2 resharding after the forward), or once per step, the weights
# and the accumulated gradients then kept whole (FSDP2 under PyTorch's pipelining, Llama 3)
ZERO3_GATHERS = ("layer", "step")
# context parallelism's K and V: all-gathered per layer (Llama 3), or passed round a ring of
# the CP ranks under the attention (Megatron's ring attention); or PyTorch's own context
# parallelism (torchtitan's), its K and V all-gathered or passed on with all-to-alls
CP_COMMS = ("all-gather", "ring", "torch-allgather", "torch-alltoall")
# a stack's context parallelism where cp_comm is not given: torchtitan runs PyTorch's, whose
# context_parallel_rotate_method is "allgather" by default; the others are priced as
# Transformer Engine's all-gather (Llama 3's scheme)
CP_COMM_DEFAULTS = {"torchtitan": "torch-allgather"}
# the stacks whose FP8 products keep their bf16 inputs for the weight gradient (torchtitan's
# are torchao's Float8Linear: save_for_backward(input_hp, ...)); the others' are Transformer
# Engine's modules, which keep the FP8 copies they cast (fastpp.model.recipes.fp8_saved_bytes)
FP8_BF16_INPUTS = ("torchtitan",)
# gradients are reduced in fp32 (Megatron accumulates and reduces them so in bf16 training)
REDUCE_BYTES = 4.0
# the training stack a run is on: the cost model prices Megatron's (Megatron-LM, Megatron-Core,
# NeMo, Megatron-Bridge); another's runs are checked apart, and their error bars are their own
# (fastpp.model.errorbar's "framework" fact)
FRAMEWORKS = ("megatron", "torchtitan", "composer", "deepspeed", "other")
# the plan row's configuration columns this object carries (plan.CONFIG_COLUMNS but "model")
ROW = ("gpus", "t", "cp", "p", "d", "ep", "etp", "schedule", "m", "microbatch", "n",
       "recompute", "zero", "overlap", "precision", "layout")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """A training run: parallelism, batch, sequence, recomputation, memory and overlap.

    Field names are ``plan``'s column names (``t``, ``p``, ``d``: the tensor-parallel,
    pipeline and data-parallel degrees); ``gpus`` and ``n`` are derived as the rows give them.

    Parameters
    ----------
    seq, global_batch : int
        Sequence length and sequences per step.
    t, cp, p, d : int
        Tensor-parallel, context-parallel, pipeline and data-parallel degrees
        (``gpus = t cp p d``).
    ep, etp : int
        Expert-parallel and expert-tensor-parallel degrees.
    schedule : str
        A registered training schedule (``fastpp.generators.registry.SCHEDULES``); Megatron's
        is ``"1f1b"``, or ``"interleaved-1f1b"`` with virtual stages.
    m : int
        Model chunks per device (Megatron's virtual pipeline stages).
    microbatch : int
        Sequences per microbatch; ``n = global_batch / (microbatch d)`` microbatches a step.
    recompute : {"none", "selective", "full"}
    recompute_method, recompute_layers, recompute_modules : optional
        Which layers full recomputation covers (with ``recompute="full"``), and Megatron's
        ``--recompute-modules``. ``"block"`` (Megatron's ``--recompute-method``, with
        ``--recompute-num-layers``): the first ``recompute_layers`` (default 1) layers of
        each model chunk, the others keeping their activations; ``"interval"`` (torchtitan's
        layer-wise selective checkpointing, ``selective_ac_option``): every
        ``recompute_layers``-th (default 2) layer of each chunk; ``"uniform"`` or None: every
        layer, in Megatron's uniform groups of ``recompute_layers`` (default 1) layers, each
        group one checkpoint whose layers' activations its backward brings back at once;
        ``recompute_layers`` needs ``recompute="full"``. ``"op"`` (with
        ``recompute="selective"``): torchtitan's op-level selective checkpointing
        (``selective_ac_option = "op"``, ``fastpp.model.recipes.op_level_terms``) instead of
        Megatron's selective recomputation, on dense layers without MLA (an MoE layer and MLA
        attention take Megatron's selective price under it). The
        modules are priced with ``recompute="selective"``, as Megatron uses them
        (``priced_modules``).
    sequence_parallel : bool
        Megatron's sequence parallelism with ``t > 1`` (default True, as ``plan``).
    zero : {0, 1, 2, 3}
        ZeRO stage over the ``d cp`` replicas. Default 1 (Megatron's distributed optimizer),
        as ``plan`` and ``device_bytes`` had it; ``transformer_costs`` had 0, which priced the
        same (only ZeRO-3 changes the times) and now is 1 too.
    zero3 : {"layer", "step"}
        ZeRO-3's collectives: per layer each microbatch, or once per step
        (``ZERO3_GATHERS``); ``"step"`` needs ``zero=3``.
    replicate : int
        Hybrid sharding (HSDP): ZeRO shards over the ``d cp / replicate`` ranks of each of
        ``replicate`` groups and keeps its state whole in each, and each rank's share of the
        reduced gradients is all-reduced across the groups once a step (torchtitan's
        ``data_parallel_replicate_degree``, Megatron's
        ``--num-distributed-optimizer-instances``). It must divide ``d cp`` (and a MoE
        model's expert-data-parallel replicas), with ``zero >= 1``. Default 1: ZeRO over all
        ``d cp``.
    overlap : bool
        The schedule's overlapped forward-backward pairs (``fastpp.model.overlap``).
    gradient_overlap, tp_overlap : bool
        Megatron's ``--overlap-grad-reduce``/``--overlap-param-gather`` and
        ``--tp-comm-overlap`` (which needs ``sequence_parallel`` where ``t > 1``; at ``t = 1``
        it has nothing to overlap).
    blocking_handoffs : bool
        Pipeline hand-offs hold their device (Megatron's plain pipeline, and its interleaved
        one with ``--no-overlap-p2p-communication``).
    precision : {"bf16", "fp8"}, optional
        Default: the hardware's.
    layout : str, optional
        Megatron's ``--pipeline-model-parallel-layout`` string.
    first_layers, last_layers : int, optional
        Layers on the first and last model chunk (the rest as even as can be).
    cp_comm : {"all-gather", "ring", "torch-allgather", "torch-alltoall"}, optional
        Context parallelism's K and V exchange. Default: the framework's (``cp_comm_for``),
        which ``replace`` follows when it changes the framework. Megatron runs Transformer
        Engine's (the first two) and torchtitan PyTorch's (the last two): the other pair is
        refused.
    dispatcher : {"alltoall", "allgather", "flex"}
        The MoE token dispatcher (Megatron's ``--moe-token-dispatcher-type``). Default
        alltoall, as ``plan``'s; ``from_megatron`` gives Megatron's own, allgather, where the
        flag is absent.
    node_limit : int, optional
    imbalance : float
        As for ``transformer_costs``.
    reduce_bytes : float
        Bytes per gradient in the data-parallel reduction: 4 (fp32, Megatron's default) or 2
        (fp16 without fp32 accumulation, or ``--grad-reduce-in-bf16``).
    train_metrics : int
        Metrics the training loop computes on each microbatch's logits after its backward,
        outside autograd, each a PyTorch cross entropy (``compute.metric_time``) on the
        stage holding the loss: Composer's train metrics (llm-foundry's MPT has two,
        ``LanguageCrossEntropy`` and ``LanguagePerplexity``; ``use_train_metrics: false``
        turns them off). Default 0, as Megatron and torchtitan train. Their time follows the
        backward's; what the stage holds while one runs (``stages.metric_bytes``) is a floor
        on its device's activation memory. With ``t > 1`` each rank's share of the
        vocabulary is priced.
    framework : {"megatron", "torchtitan", "composer", "deepspeed", "other"}
        The training stack the run is on (``from_torchtitan`` sets ``"torchtitan"``; plan
        rows do not carry it: ``from_row`` takes it as it takes ``seq``).
        Every stack is priced as Megatron's but for two things its framework decides: the
        default ``cp_comm`` and whether FP8 products keep their inputs' FP8 copies
        (``FP8_BF16_INPUTS``). The framework also chooses the published runs the
        prediction's error bar comes from (``fastpp.model.errorbar``), and a stack without
        checked runs is extrapolated.
    recipe : str, optional
        A named memory recipe (``fastpp.model.recipes.RECIPES``, e.g. ``"deepseek-v3"``), as
        ``plan``'s ``recipe=`` names one: its recompute modules (for ``recompute=
        "selective"``), FP8 caching and optimizer bytes; it sets the modules, so
        ``recompute_modules`` stays None. Plan rows do not carry it: ``from_row`` takes it
        as it takes ``seq``.
    """

    seq: int
    global_batch: int
    t: int = 1
    cp: int = 1
    p: int = 1
    d: int = 1
    ep: int = 1
    etp: int = 1
    schedule: str = "1f1b"
    m: int = 1
    microbatch: int = 1
    recompute: str = "none"
    recompute_method: str | None = None
    recompute_layers: int | None = None
    recompute_modules: tuple[str, ...] | None = None
    sequence_parallel: bool = True
    zero: int = 1
    zero3: str = "layer"
    replicate: int = 1
    overlap: bool = False
    gradient_overlap: bool = False
    tp_overlap: bool = False
    blocking_handoffs: bool = True
    precision: str | None = None
    layout: str | None = None
    first_layers: int | None = None
    last_layers: int | None = None
    cp_comm: str | None = None
    dispatcher: str = "alltoall"
    node_limit: int | None = None
    imbalance: float = 1.0
    reduce_bytes: float = REDUCE_BYTES
    train_metrics: int = 0
    framework: str = "megatron"
    recipe: str | None = None

    def __post_init__(self):
        for name in ("seq", "global_batch", *DEGREES, "m", "microbatch"):
            positive_int(getattr(self, name), name, MAX_INT - 1)
        if self.global_batch % (self.microbatch * self.d):
            raise ScheduleError(f"global_batch must be a multiple of microbatch * d = "
                                f"{self.microbatch} * {self.d} (got global_batch="
                                f"{self.global_batch})")
        stage = self.t * self.cp * self.d
        if stage % (self.ep * self.etp):  # Megatron's expert groups fold into a stage's GPUs
            raise ScheduleError(f"ep * etp = {self.ep * self.etp} must divide the GPUs of a "
                                f"pipeline stage t * cp * d = {stage} (got ep={self.ep}, "
                                f"etp={self.etp})")
        if not isinstance(self.schedule, str) or self.schedule not in SCHEDULES \
                or get_spec(self.schedule).forward_only:
            raise ScheduleError(f"schedule must be one of the training schedules "
                                f"{[k for k, s in SCHEDULES.items() if not s.forward_only]} "
                                f"(got {self.schedule!r})")
        one_of(self.recompute, "recompute", RECOMPUTE)
        one_of(self.recompute_method, "recompute_method", RUN_METHODS)
        if self.recompute_method in PARTIAL_DEFAULT and self.recompute != "full":
            raise ScheduleError(f"recompute_method={self.recompute_method!r} chooses the layers "
                                f"full recomputation covers: recompute must be 'full' (got "
                                f"recompute={self.recompute!r})")
        if self.recompute_method == OP_LEVEL and (self.recompute != "selective"
                                                  or self.recompute_modules is not None):
            raise ScheduleError(f"recompute_method='op' is torchtitan's op-level selective "
                                f"checkpointing: recompute must be 'selective' and "
                                f"recompute_modules (Megatron's) None (got recompute="
                                f"{self.recompute!r}, recompute_modules="
                                f"{self.recompute_modules!r})")
        one_of(self.zero, "zero", ZERO)
        one_of(self.zero3, "zero3", ZERO3_GATHERS)
        # fields that only mean something beside another: accepted alone they were ignored
        if self.zero3 != "layer" and self.zero != 3:
            raise ScheduleError(f"zero3 chooses when ZeRO-3 gathers the weights: zero must be "
                                f"3 with zero3={self.zero3!r} (got zero={self.zero})")
        if self.recompute_layers is not None and self.recompute != "full":
            raise ScheduleError(f"recompute_layers counts the layers full recomputation covers: "
                                f"recompute must be 'full' with recompute_layers="
                                f"{self.recompute_layers!r} (got recompute={self.recompute!r})")
        replicate_reason(positive_int(self.replicate, "replicate", MAX_INT - 1), self.zero,
                         self.d * self.cp, raise_it=True)
        one_of(self.dispatcher, "dispatcher", DISPATCHERS)
        one_of(self.framework, "framework", FRAMEWORKS)
        object.__setattr__(self, "cp_comm", cp_comm_for(self.cp_comm, self.framework))
        if self.recipe is not None:
            one_of(self.recipe, "recipe", sorted(RECIPES))
            if self.recompute_modules is not None or self.recompute_method == OP_LEVEL:
                raise ScheduleError(f"recipe sets the recompute modules: recompute_modules "
                                    f"must be None and recompute_method not 'op' with recipe="
                                    f"{self.recipe!r} (got recompute_modules="
                                    f"{self.recompute_modules!r}, recompute_method="
                                    f"{self.recompute_method!r})")
        if self.precision is not None:  # None: the hardware's
            one_of(self.precision, "precision", PRECISIONS)
        object.__setattr__(self, "reduce_bytes", check_reduce_bytes(self.reduce_bytes))
        check_train_metrics(self.train_metrics)
        for name in ("sequence_parallel", "overlap", "gradient_overlap", "tp_overlap",
                     "blocking_handoffs"):
            flag(getattr(self, name), name)
        if self.sequence_parallel:
            check_sequence_parallel(self.seq, self.t, self.cp)
        check_tp_overlap(self.tp_overlap, self.sequence_parallel, self.t, f"t={self.t}")
        for name in ("recompute_layers", "node_limit"):
            if getattr(self, name) is not None:
                positive_int(getattr(self, name), name)
        for name in ("first_layers", "last_layers"):  # 0: a chunk of the embedding or the
            if getattr(self, name) is not None:      # loss alone, as plan takes it
                nonnegative_int(getattr(self, name), name)
        if self.recompute_modules is not None:
            modules = self.recompute_modules
            if isinstance(modules, str) or not isinstance(modules, list | tuple) or not all(
                    isinstance(x, str) for x in modules):
                raise ScheduleTypeError(f"recompute_modules must be a list of module names "
                                        f"(got {modules!r})")
            # Megatron's names (an unknown one was carried unpriced and written as a flag)
            name_list(modules, "recompute_modules", RECOMPUTE_MODULES)
            object.__setattr__(self, "recompute_modules", tuple(modules))
        check_imbalance(self.imbalance)
        if self.layout is not None:
            stages = as_layout(self.layout).stages  # parses, or names the position
            if self.first_layers is not None or self.last_layers is not None:
                raise ScheduleError(f"give layout or first_layers/last_layers, not both (got "
                                    f"layout={self.layout!r}, first_layers="
                                    f"{self.first_layers}, last_layers={self.last_layers})")
            if stages != self.p * self.m:
                raise ScheduleError(f"layout must give p * m = {self.p} * {self.m} = "
                                    f"{self.p * self.m} model chunks (got {stages} in "
                                    f"layout={self.layout!r})")

    @property
    def gpus(self) -> int:
        """``t cp p d``."""
        return self.t * self.cp * self.p * self.d

    @property
    def n(self) -> int:
        """Microbatches per step on each pipeline: ``global_batch / (microbatch d)``."""
        return self.global_batch // (self.microbatch * self.d)

    def replace(self, **changes) -> RunConfig:
        """A copy with ``changes`` (validated again). A new ``framework`` brings its own
        ``cp_comm`` where the run had the old one's default and ``changes`` name none.

        Parameters
        ----------
        **changes
            Fields and their new values.

        Returns
        -------
        RunConfig
        """
        if ("framework" in changes and "cp_comm" not in changes
                and self.cp_comm == cp_comm_for(None, self.framework)):
            changes["cp_comm"] = None
        return dataclasses.replace(self, **changes)

    @classmethod
    def for_gpus(cls, gpus: int, **fields) -> RunConfig:
        """With ``d`` the GPUs left after ``t cp p`` (which must divide ``gpus``).

        Parameters
        ----------
        gpus : int
        **fields
            ``RunConfig``'s other fields.

        Returns
        -------
        RunConfig

        Raises
        ------
        ScheduleError
            If ``t cp p`` does not divide ``gpus``, ``d`` is given otherwise, or a field is
            not valid.
        """
        d = data_parallel(gpus, fields.get("t", 1), fields.get("cp", 1), fields.get("p", 1))
        if "d" in fields and fields["d"] != d:  # (it was replaced, unsaid)
            raise ScheduleError(f"d must be the {d} GPUs of {gpus} left by t * cp * p, or not "
                                f"given (got d={fields['d']!r})")
        return cls(**{**fields, "d": d})

    @classmethod
    def from_row(cls, row, **fields) -> RunConfig:
        """A ``plan`` row (a mapping or a pandas row) as a ``RunConfig``; ``fields`` give what
        rows do not carry: ``seq`` at least, and the plan's own keywords where it had them
        (``recipe``, ``node_limit``, ``imbalance``, ``dispatcher``, the overlaps, ...), else
        the run is priced without them. ``global_batch`` is ``n * microbatch * d``.

        Parameters
        ----------
        row : mapping or pandas.Series
            A row of ``plan``'s frame.
        **fields
            ``RunConfig``'s fields a row does not carry.

        Returns
        -------
        RunConfig

        Raises
        ------
        ScheduleError
            If ``row`` is not a mapping (a ``ScheduleTypeError``) or lacks a plan column, or a
            field is not valid.
        """
        if not hasattr(row, "get") or not hasattr(row, "keys"):
            raise ScheduleTypeError(f"row must be a mapping or a pandas row of a plan table "
                                    f"(got {type(row).__name__})")
        missing = [k for k in ROW if k not in row.keys()]
        if missing:
            raise ScheduleError(f"row must have the plan columns {missing} (got "
                                f"{listed(row.keys())})")
        get = row.get
        values = {k: _plain(get(k)) for k in ROW if k not in ("gpus", "n")}
        # the counts multiplied here are checked first (a string would be repeated)
        n, microbatch, d, gpus = (_count(get(k), f"row's {k}")
                                  for k in ("n", "microbatch", "d", "gpus"))
        values["global_batch"] = n * microbatch * d
        if values["global_batch"] >= MAX_INT:  # (named by the row's columns it comes from)
            raise ScheduleError(f"row's n * microbatch * d, the global batch, must be below "
                                f"2**31 (got n={n}, microbatch={microbatch}, d={d})")
        layout = values["layout"]  # ("" where plan gives none; pd.NA's truth is a TypeError)
        values["layout"] = None if isinstance(layout, str) and not layout else layout
        config = cls(**{**values, **fields})
        if config.gpus != gpus:
            raise ScheduleError(f"row's gpus must be t * cp * p * d = {config.gpus} (got "
                                f"gpus={get('gpus')})")
        return config

    def to_row(self) -> dict:
        """The plan row's configuration columns (``ROW``) of this run (no layout: ``""``, as
        plan writes it on a row that gives a reason).

        Returns
        -------
        dict
        """
        return {**{k: getattr(self, k) for k in ROW}, "layout": self.layout or ""}

    def build_schedule(self):
        """The ``Schedule`` of ``schedule`` on ``p`` devices, ``n`` microbatches, ``m``
        chunks each.

        Returns
        -------
        Schedule
        """
        return build_schedule(self.schedule, self.p, self.n, self.m)

    def plan_keywords(self) -> dict:
        """``plan``'s keywords giving this run as its only configuration.

        Returns
        -------
        dict
        """
        return {"gpus": self.gpus, "seq": self.seq, "global_batch": self.global_batch,
                "schedules": [self.schedule], "tp": [self.t], "pp": [self.p],
                "microbatch": [self.microbatch], "m": [self.m], "recompute": [self.recompute],
                "zero": [self.zero], "sequence_parallel": self.sequence_parallel,
                "gradient_overlap": self.gradient_overlap,
                "blocking_handoffs": self.blocking_handoffs, "tp_overlap": self.tp_overlap,
                "layout": self.layout, "first_layers": self.first_layers,
                "last_layers": self.last_layers, "ep": [self.ep], "etp": [self.etp],
                "precision": None if self.precision is None else [self.precision],
                "node_limit": self.node_limit, "imbalance": self.imbalance, "cp": [self.cp],
                "cp_comm": self.cp_comm, "zero3": self.zero3, "replicate": self.replicate,
                "overlap": [self.overlap],
                "reduce_bytes": self.reduce_bytes, "train_metrics": self.train_metrics,
                "dispatcher": self.dispatcher, "framework": self.framework,
                "recipe": self.recipe, **self.recompute_keywords}

    @property
    def recompute_keywords(self) -> dict:
        """``plan``'s ``recompute_modules``, ``recompute_method`` and ``recompute_layers`` of
        this run: its ``partial_recompute``, or torchtitan's op-level method."""
        if self.recompute_method == OP_LEVEL:
            return {"recompute_modules": None, "recompute_method": OP_LEVEL,
                    "recompute_layers": None}
        return {"recompute_modules": self.priced_modules, **self.partial_recompute}

    @property
    def partial_recompute(self) -> dict:
        """``plan``'s and ``RunGrid``'s ``recompute_method`` and ``recompute_layers`` where
        full recomputation covers only some layers (``"block"`` or ``"interval"``, with the
        frameworks' default counts) or checkpoints groups of layers (``"uniform"`` with
        more than one layer a group), else both None (every layer its own checkpoint)."""
        if self.recompute == "full" and self.recompute_method in PARTIAL_DEFAULT:
            return {"recompute_method": self.recompute_method,
                    "recompute_layers": (self.recompute_layers
                                         or PARTIAL_DEFAULT[self.recompute_method])}
        if self.recompute == "full" and (self.recompute_layers or 1) > 1:
            # (None or "uniform": Megatron's default method)
            return {"recompute_method": "uniform", "recompute_layers": self.recompute_layers}
        return {"recompute_method": None, "recompute_layers": None}

    @property
    def priced_recipe(self) -> Recipe | None:
        """The memory recipe this run is priced with: torchtitan's op-level policy
        (``recompute_method="op"``), else the named ``recipe``, else Megatron's
        ``priced_modules``, else None (the default accounting)."""
        if self.recompute_method == OP_LEVEL:
            return Recipe(op_level=True)
        if self.recipe is not None:
            return RECIPES[self.recipe]
        return make_recipe(recompute_modules=self.priced_modules)

    @property
    def priced_modules(self) -> tuple[str, ...] | None:
        """``recompute_modules`` where they apply, with ``recompute="selective"`` (Megatron
        reads ``--recompute-modules`` with selective granularity only), else ``None``."""
        return self.recompute_modules if self.recompute == "selective" else None

    def chunk_layout(self, model):
        """``layout``, or ``first_layers``/``last_layers`` as one over ``p m`` chunks
        (``model``: a ``fastpp.model.Transformer``).

        Parameters
        ----------
        model : Transformer
            Whose layers ``first_layers``/``last_layers`` leave the rest of.

        Returns
        -------
        str, Layout or None
            ``layout`` as given, or the ``Layout`` the end counts make, or None for neither.

        Raises
        ------
        ScheduleError
            If ``model`` is not a ``Transformer`` or the end counts do not fit its layers.
        """
        instance(model, Transformer, "model", "fastpp.model.Transformer")
        if self.layout is not None or (self.first_layers is None and self.last_layers is None):
            return self.layout
        return even_layers(model.layers, self.p * self.m, self.first_layers, self.last_layers)


def _known_fields(init):
    """``RunConfig``'s constructor, naming an unknown, a missing or a positional field in a
    ``ScheduleTypeError`` (the dataclass's own is a bare ``TypeError``)."""
    names = [f.name for f in dataclasses.fields(RunConfig)]
    required = [f.name for f in dataclasses.fields(RunConfig)
                if f.default is dataclasses.MISSING]

    @functools.wraps(init)
    def __init__(self, *args, **fields):
        if args:
            raise ScheduleTypeError(f"RunConfig takes its fields by name, e.g. "
                                    f"RunConfig(seq=4096, global_batch=512) (got {len(args)} "
                                    f"positional)")
        unknown = [k for k in fields if k not in names]
        if unknown:
            raise ScheduleTypeError(f"RunConfig has no field {unknown[0]!r} (its fields: "
                                    f"{', '.join(names)})")
        missing = [k for k in required if k not in fields]
        if missing:
            raise ScheduleTypeError(f"RunConfig needs {' and '.join(missing)} (no default)")
        init(self, **fields)

    return __init__


RunConfig.__init__ = _known_fields(RunConfig.__init__)
# every field's default, the one place they are written: the keyword forms of
# transformer_costs, device_bytes and plan take theirs from here
DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig)
            if f.default is not dataclasses.MISSING}


def _plain(value):
    """NumPy scalars as Python's (a row read from a DataFrame holds them); an array left
    for the field's check to refuse (its item() was NumPy's ValueError)."""
    return value.item() if hasattr(value, "item") and np.ndim(value) == 0 else value


def _count(value, name: str) -> int:
    """A plan row's count as an ``int``: a positive integer, or a float that is one (a
    column with a missing value holds floats)."""
    value = _plain(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return positive_int(value, name)


def data_parallel(gpus: int, t: int, cp: int, p: int) -> int:
    """``d = gpus / (t cp p)``, or a ScheduleError when ``t cp p`` does not divide ``gpus``."""
    gpus = positive_int(gpus, "gpus")
    rest = positive_int(t, "t") * positive_int(cp, "cp") * positive_int(p, "p")
    if gpus % rest:
        raise ScheduleError(f"t * cp * p = {rest} must divide the gpus (got gpus={gpus}, "
                            f"t={t}, cp={cp}, p={p})")
    return gpus // rest


def global_batch_of(per_replica: int, d: int, gpus: int, what: str) -> int:
    """An importer's global batch when the file gives none: ``per_replica`` (``what``) times
    ``d``, or a ScheduleError naming the GPUs when that passes ``2**31 - 1``."""
    batch = per_replica * d
    if batch >= MAX_INT:
        raise ScheduleError(f"gpus={gpus} gives d={d} replicas of {what}={per_replica}: a "
                            f"global batch of {batch:,}, which must be below 2**31 (give "
                            f"fewer gpus, or the global batch)")
    return batch


# the run keywords' defaults, under their keyword names: config= replaces them all
KEYWORD_DEFAULTS = {**DEFAULTS, "tp": DEFAULTS["t"], "dp": DEFAULTS["d"], "seq": None,
                    "layout": None, "layers": None, "recipe": None,
                    "recompute_modules": None, "fp8_cache": False, "offload_modules": None,
                    "global_batch": None}


def config_alone(function: str, **keywords) -> None:
    """A ``ScheduleError`` naming the run keywords given beside ``config=``, which would
    otherwise be dropped without a word: the ``RunConfig`` holds the whole run."""
    given = [name for name, value in keywords.items()
             if _differs(value, KEYWORD_DEFAULTS[name])]
    if given:
        raise ScheduleError(
            f"{function}: config replaces the run's keywords, so {', '.join(given)} must be "
            f"left out (got config= and {', '.join(f'{k}={keywords[k]!r}' for k in given)}; "
            f"set them in the RunConfig, e.g. config.replace(...), or drop config=)")


def _differs(value, default) -> bool:
    """Whether a keyword's value is other than its default (an array or a list always is:
    no run keyword's default is one)."""
    if value is default:
        return False
    if default is None or isinstance(value, np.ndarray | list | tuple):
        return True
    return bool(value != default)


def cp_comm_for(cp_comm: str | None, framework: str) -> str:
    """The context parallelism a run on ``framework`` is priced with.

    Parameters
    ----------
    cp_comm : {"all-gather", "ring", "torch-allgather", "torch-alltoall"} or None
        The one asked for, or None for the framework's default (``CP_COMM_DEFAULTS``:
        torchtitan's is PyTorch's all-gather, the others' Transformer Engine's).
    framework : str
        One of ``FRAMEWORKS``.

    Returns
    -------
    str

    Raises
    ------
    ScheduleError
        An unknown ``cp_comm``, or one the framework does not run: Megatron's context
        parallelism is Transformer Engine's, torchtitan's PyTorch's.
    """
    if cp_comm is None:
        return CP_COMM_DEFAULTS.get(framework, "all-gather")
    one_of(cp_comm, "cp_comm", CP_COMMS)
    torch = cp_comm.startswith("torch-")
    if (framework == "megatron" and torch) or (framework == "torchtitan" and not torch):
        runs = [c for c in CP_COMMS if c.startswith("torch-") != (framework == "megatron")]
        raise ScheduleError(f"cp_comm must be one of {runs} with framework={framework!r}, "
                            f"whose context parallelism is "
                            f"{'Transformer Engine' if framework == 'megatron' else 'PyTorch'}'s "
                            f"(got cp_comm={cp_comm!r})")
    return cp_comm


def as_run(config, name: str = "config") -> RunConfig:
    """``config`` if it is a ``RunConfig``, else a ``ScheduleTypeError`` naming ``name``."""
    return instance(config, RunConfig, name, "fastpp.model.RunConfig")


def check_cp(seq: int, cp: int) -> None:
    """Context parallelism splits each sequence into ``2 cp`` equal chunks (``cp = 1``
    splits nothing: any length runs)."""
    if cp > 1 and seq % (2 * cp):
        raise ScheduleError(f"cp must split seq into 2 x cp equal chunks: seq must be a "
                            f"multiple of 2*cp={2 * cp} (got seq={seq}, cp={cp})")


def check_sequence_parallel(seq: int, t, cp) -> None:
    """Sequence parallelism splits each context-parallel rank's ``seq / cp`` tokens over the
    ``t`` tensor-parallel ranks, evenly (Megatron asserts it, ``_split_along_first_dim``;
    torchtitan's ``seq_len_divisor`` is ``tp * 2 cp``)."""
    if t > 1 and seq % (t * cp):
        raise ScheduleError(f"sequence_parallel splits each of the cp ranks' seq / cp tokens "
                            f"over t: seq must be a multiple of t*cp={t * cp} (got seq={seq}, "
                            f"t={t}, cp={cp}), or give sequence_parallel=False")


def check_tp_overlap(tp_overlap: bool, sequence_parallel: bool, t: int, given: str) -> None:
    """Transformer Engine's TP overlap splits the sequence-parallel all-gathers and
    reduce-scatters: at ``t > 1`` it needs sequence parallelism (Megatron asserts it);
    ``given`` says the ``t`` checked, for the message."""
    if tp_overlap and not sequence_parallel and t > 1:
        raise ScheduleError(f"tp_overlap needs sequence_parallel where t > 1: Transformer "
                            f"Engine's overlap splits the sequence-parallel all-gathers and "
                            f"reduce-scatters (got tp_overlap=True, sequence_parallel=False, "
                            f"{given})")


def replicate_reason(replicate: int, zero, replicas, edp=None, raise_it: bool = False):
    """Why ``replicate`` hybrid-sharding groups cannot run (``""`` if they can), per
    configuration of ``zero`` and ``replicas`` (``d cp``) and, for a MoE model, ``edp``
    (arrays broadcast); with ``raise_it``, the first reason as a ``ScheduleError``."""
    zero, replicas = np.asarray(zero), np.asarray(replicas)
    edp = replicas if edp is None else np.asarray(edp)
    out = np.full(np.broadcast_shapes(zero.shape, replicas.shape, edp.shape), "", object)
    if replicate > 1:
        out[np.broadcast_to(edp % replicate != 0, out.shape)] = (
            f"replicate={replicate} must divide the expert-data-parallel replicas (each group "
            f"holds its own copy of the experts)")
        out[np.broadcast_to(replicas % replicate != 0, out.shape)] = (
            f"replicate={replicate} must divide d * cp, the ranks ZeRO's groups split")
        out[np.broadcast_to(zero == 0, out.shape)] = (
            f"replicate={replicate} splits ZeRO's sharding into groups: zero must be 1, 2 or 3")
    if raise_it and out.size and out.flat[0]:
        said = "" if edp is replicas else f", edp = {np.broadcast_to(edp, out.shape).flat[0]}"
        raise ScheduleError(f"{out.flat[0]} (got zero={np.broadcast_to(zero, out.shape).flat[0]}, "
                            f"d * cp = {np.broadcast_to(replicas, out.shape).flat[0]}{said})")
    return out


def check_reduce_bytes(value) -> float:
    """``value`` as a float if it is 2 or 4 (bytes per gradient in the data-parallel
    reduction: fp16/bf16 or fp32), else a ``ScheduleError``."""
    if (not isinstance(value, int | float | np.number) or isinstance(value, bool)
            or value not in (2, 4)):
        raise ScheduleError(f"reduce_bytes must be 2 or 4 (bytes per gradient; got {value!r})")
    return float(value)


def check_train_metrics(value) -> int:
    """``value`` as an ``int`` if it is an integer from 0 to ``MAX_INT - 1`` (metrics on each
    microbatch's logits), else a ``ScheduleError``."""
    value = nonnegative_int(value, "train_metrics")
    if value >= MAX_INT:
        raise ScheduleError(f"train_metrics must be an integer >= 0 and below 2**31 (got "
                            f"{value})")
    return value


def as_model(model, name: str = "model"):
    """``model`` if it is a ``Transformer`` (or None), else a ``ScheduleTypeError``."""
    if model is not None and not isinstance(model, Transformer):
        raise ScheduleTypeError(f"{name} must be a fastpp.model.Transformer (got "
                                f"{type(model).__name__})")
    return model


@dataclass(frozen=True, kw_only=True)
class RunGrid:
    """Many configurations as ``stage_table`` prices them at once: ``RunConfig``'s (and
    ``plan``'s columns') names, one array per field that varies, indexed by configuration,
    and one value for the choices the configurations share.

    ``plan`` builds one from its grid, ``transformer_costs`` and
    ``fastpp.model.published`` one of a single configuration; ``stage_table`` and its helpers
    read the fields by name. Arrays broadcast against each other (a scalar is every
    configuration's); the defaults are those a bare ``stage_table`` call had.

    Parameters
    ----------
    seq : int
        Sequence length.
    microbatch, t, d, p, m, cp, ep, etp, zero : array_like of int
        Per configuration, as ``RunConfig``'s fields.
    recompute : array_like of int
        Per configuration, an index into ``fastpp.model.transformer.RECOMPUTE``.
    overlap : array_like of bool
        Per configuration, the schedule's overlapped pairs.
    sequence_parallel, tp_overlap, blocking_handoffs : bool
    scatter_gather : bool
        Megatron-LM's hand-off of 2021 to 2023 (``--scatter-gather-tensors-in-pipeline``, on
        by default then): each tensor-parallel rank sends ``1/t`` of the activations and the
        receiving stage all-gathers them in its node (that all-gather is not priced).
        Megatron-Core's hand-off sends every rank the whole tensor, ``1/t`` of it only with
        sequence parallelism. Default False, as Megatron-Core sends; the published runs of the
        older code set it.
    precision : {"bf16", "fp8"}, optional
    dispatcher, zero3 : str
    cp_comm : str, optional
        Default: the framework's (``cp_comm_for``).
    node_limit : int, optional
    imbalance : float
        As ``RunConfig``'s, shared by every configuration.
    recipe : Recipe, optional
        The memory recipe (``fastpp.model.recipes.make_recipe``; ``RunConfig``'s
        ``recompute_modules`` become one).
    recompute_method, recompute_layers : optional
        Which layers of each model chunk full recomputation covers: ``"block"``, the first
        ``recompute_layers``; ``"interval"``, every ``recompute_layers``-th
        (``recomputed_layers``); ``"uniform"``, every layer, in checkpoints of
        ``recompute_layers`` layers; None, every layer, each its own checkpoint.
    reduce_bytes : float
        Bytes per gradient in ZeRO-3's per-layer reduce-scatter (``RunConfig``'s).
    train_metrics : int
        ``RunConfig``'s metrics on each microbatch's logits.
    replicate : int
        ``RunConfig``'s hybrid-sharding groups, shared by every configuration (each one's
        ``d cp`` a multiple of it: ``replicate_reason``).
    framework : str
        ``RunConfig``'s training stack: its context parallelism where ``cp_comm`` is None
        (``cp_comm_for``), and whether its FP8 products keep their inputs' FP8 copies
        (``FP8_BF16_INPUTS``).
    """

    seq: int
    microbatch: object
    t: object
    d: object
    p: object
    m: object
    recompute: object
    cp: object = 1
    ep: object = 1
    etp: object = 1
    zero: object = 0
    overlap: object = False
    sequence_parallel: bool = False
    tp_overlap: bool = False
    blocking_handoffs: bool = False
    scatter_gather: bool = False
    precision: str | None = None
    dispatcher: str = "alltoall"
    cp_comm: str | None = None
    zero3: str = "layer"
    node_limit: int | None = None
    imbalance: float = 1.0
    recipe: object = None
    recompute_method: str | None = None
    recompute_layers: int | None = None
    reduce_bytes: float = REDUCE_BYTES
    replicate: int = 1
    train_metrics: int = 0
    framework: str = "megatron"

    def __post_init__(self):
        positive_int(self.seq, "seq", MAX_INT - 1)
        positive_int(self.replicate, "replicate", MAX_INT - 1)
        object.__setattr__(self, "reduce_bytes", check_reduce_bytes(self.reduce_bytes))
        check_train_metrics(self.train_metrics)
        arrays = {}
        for k in PER_CONFIGURATION:
            try:
                arrays[k] = np.array(getattr(self, k))
            except ValueError:  # ragged, e.g. [1, [2]]
                raise ScheduleError(f"{k} must be an array of one shape (got "
                                    f"{show(getattr(self, k))})") from None
        try:
            np.broadcast_shapes(*(a.shape for a in arrays.values()))
        except ValueError:
            raise ScheduleError(f"RunGrid's per-configuration fields must broadcast together "
                                f"(got shapes {({k: a.shape for k, a in arrays.items()})})"
                                ) from None
        for name, a in arrays.items():
            if name == "overlap":
                if a.dtype != bool and not (np.issubdtype(a.dtype, np.integer)
                                            and np.isin(a, (0, 1)).all()):
                    raise ScheduleError(f"overlap must hold bools (got {show(a)})")
                continue
            low, high = ((0, len(RECOMPUTE) - 1) if name == "recompute" else
                         (min(ZERO), max(ZERO)) if name == "zero" else (1, np.inf))
            if (a.dtype == bool or not np.issubdtype(a.dtype, np.integer)
                    or np.any(a < low) or np.any(a > high)):
                what = ("indices into RECOMPUTE, 0 to 2" if name == "recompute" else
                        "ZeRO stages, 0 to 3" if name == "zero" else
                        "positive integers")
                raise ScheduleError(f"{name} must hold {what} (got {show(a)})")
        for name, a in arrays.items():  # the grid's own read-only copies: checked once, here
            if a.ndim:
                a.flags.writeable = False
                object.__setattr__(self, name, a)
        for name in ("sequence_parallel", "tp_overlap", "blocking_handoffs", "scatter_gather"):
            flag(getattr(self, name), name)
        if self.precision is not None:
            one_of(self.precision, "precision", PRECISIONS)
        one_of(self.dispatcher, "dispatcher", DISPATCHERS)
        one_of(self.framework, "framework", FRAMEWORKS)
        object.__setattr__(self, "cp_comm", cp_comm_for(self.cp_comm, self.framework))
        one_of(self.zero3, "zero3", ZERO3_GATHERS)
        if self.node_limit is not None:
            positive_int(self.node_limit, "node_limit")
        one_of(self.recompute_method, "recompute_method", RECOMPUTE_METHODS)
        if (self.recompute_method is None) != (self.recompute_layers is None):
            raise ScheduleError(f"recompute_method and recompute_layers go together (got "
                                f"recompute_method={self.recompute_method!r}, "
                                f"recompute_layers={self.recompute_layers!r})")
        if self.recompute_layers is not None:
            positive_int(self.recompute_layers, "recompute_layers")
        check_imbalance(self.imbalance)
        if self.recipe is not None and not isinstance(self.recipe, Recipe):
            raise ScheduleTypeError(f"recipe must be a fastpp.model.Recipe or None (got "
                                    f"{type(self.recipe).__name__})")

    @classmethod
    def of(cls, run: RunConfig, recipe=None) -> RunGrid:
        """``run`` as a grid of its one configuration, with the memory ``recipe`` (a
        ``Recipe`` or None; ``make_recipe`` gives one).

        Parameters
        ----------
        run : RunConfig
        recipe : Recipe, optional

        Returns
        -------
        RunGrid
        """
        one = {k: np.array([getattr(run, k)], np.int64) for k in PER_CONFIGURATION
               if k not in ("recompute", "overlap")}
        return cls(seq=run.seq, **one, recompute=np.array([RECOMPUTE.index(run.recompute)]),
                   overlap=np.array([run.overlap]), sequence_parallel=run.sequence_parallel,
                   tp_overlap=run.tp_overlap, blocking_handoffs=run.blocking_handoffs,
                   precision=run.precision, dispatcher=run.dispatcher, cp_comm=run.cp_comm,
                   zero3=run.zero3, node_limit=run.node_limit, imbalance=float(run.imbalance),
                   recipe=recipe, reduce_bytes=run.reduce_bytes, replicate=run.replicate,
                   train_metrics=run.train_metrics, framework=run.framework,
                   **run.partial_recompute)

    def replace(self, **changes) -> RunGrid:
        """A copy with ``changes`` (validated again).

        Parameters
        ----------
        **changes
            Fields and their new values.

        Returns
        -------
        RunGrid
        """
        return dataclasses.replace(self, **changes)

    def broadcast(self) -> RunGrid:
        """With every per-configuration field (``PER_CONFIGURATION``) an array of one shape,
        ``overlap`` as bools.

        Returns
        -------
        RunGrid
        """
        arrays = np.broadcast_arrays(*(np.asarray(getattr(self, k)) for k in PER_CONFIGURATION))
        fields = dict(zip(PER_CONFIGURATION, arrays, strict=True))
        return self.replace(**{**fields, "overlap": fields["overlap"].astype(bool)})

    def take(self, index) -> RunGrid:
        """The configurations ``index`` (an index array into every per-configuration
        field).

        Parameters
        ----------
        index : array_like of int or bool

        Returns
        -------
        RunGrid
        """
        full = self.broadcast()
        return full.replace(**{k: getattr(full, k)[index] for k in PER_CONFIGURATION})

    @property
    def rank_batch(self):
        """The sequences one rank prices per microbatch: ``microbatch / cp`` (context
        parallelism gives each rank ``seq / cp`` tokens of each sequence, which prices exactly
        as ``microbatch / cp`` sequences: ``fastpp.model.stages.stage_table``)."""
        return self.microbatch / self.cp

    @property
    def gpus(self):
        """Each configuration's GPUs, ``t cp d p``: the job's, which says where a group
        straddles two nodes (``fastpp.model.comm``)."""
        return self.t * self.cp * self.d * self.p


# RunGrid's recompute methods; full recomputation of some layers only: each one's default
# count (Megatron's --recompute-num-layers, torchtitan's selective_ac_option)
RECOMPUTE_METHODS = (None, "uniform", "block", "interval")
PARTIAL_DEFAULT = {"block": 1, "interval": 2}
# torchtitan's op-level selective checkpointing (selective_ac_option = "op"): RunConfig's and
# plan's method for recompute="selective", priced as a memory recipe (recipes.op_level_terms)
OP_LEVEL = "op"
RUN_METHODS = (*RECOMPUTE_METHODS, OP_LEVEL)
# RunGrid's fields that hold one value per configuration
PER_CONFIGURATION = ("microbatch", "t", "d", "p", "m", "recompute", "cp", "ep", "etp", "zero",
                     "overlap")


# a misspelt keyword named, not a bare TypeError
RunGrid.__init__ = known_keywords("RunGrid")(RunGrid.__init__)
