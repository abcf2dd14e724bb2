"""Pricing a transformer on a schedule: ``transformer_costs`` (per-stage seconds and bytes, a
``Costs`` with its error bar) and ``device_bytes`` (weights, gradients and optimizer states per
device), for one configuration; ``fastpp.model.plan`` prices many at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import MAX_INT, ScheduleError, instance, known_keywords, one_of, positive_int
from ..costs import Costs
from ..generators.registry import SCHEDULES, code_of
from ..ops import FB
from ..placement import copies, mirrored
from ..schedule import Schedule
from .config import (
    DEFAULTS,
    ZERO,
    ZERO3_GATHERS,
    RunConfig,
    RunGrid,
    as_run,
    check_cp,
    check_reduce_bytes,
    config_alone,
    replicate_reason,
)
from .errorbar import ErrorBar, error_bar, regime
from .hardware import HARDWARE, preset
from .layout import (
    as_layout,
    check_layout,
)
from .moe import check_imbalance, expert_data_parallel, expert_reasons, refuse_expert_options
from .overlap import expert_overlap, overlap_reason
from .presets import MODELS
from .recipes import make_recipe, optimizer_bytes, refuse_unpriced
from .stages import (
    chunk_kinds,
    device_memory,
    device_parameters,
    expert_stage_params,
    idle_reason,
    idle_stages,
    stage_costs,
    stage_params,
    stage_table,
)
from .transformer import RECOMPUTE, REPLICATED, Transformer, chunk_layers


def _chunks(model: Transformer, schedule, layout=None, layers=None):
    """Per virtual stage: its layers, whether it holds the embedding or the output layer
    and the loss (a two-direction schedule holds a second copy of the model's chunks), its
    MoE layers and its MTP modules (``stages.chunk_kinds``)."""
    instance(schedule, Schedule, "schedule", "fastpp.Schedule")
    schedule._check()
    chunks = schedule.V // int(copies(code_of(schedule)))  # two directions: a second copy
    chunk = np.arange(schedule.V) % chunks
    given = as_layout(layout, layers)
    if given is None:
        counts = chunk_layers(model.layers, chunks).astype(np.float64)
        starts, ends, mtp = np.arange(chunks) == 0, np.arange(chunks) == chunks - 1, 0.0
    else:
        check_layout(given, model.layers, chunks, model.mtp_depth)
        counts, starts, ends, mtp = (np.array(x) for x in (given.layers, given.embedding,
                                                            given.loss, given.mtp))
        counts = counts.astype(np.float64)
    moe, mtp = chunk_kinds(model, counts, ends, mtp + 0.0 * counts)
    return counts[chunk], starts[chunk], ends[chunk], moe[chunk], mtp[chunk]


@known_keywords("pair_partner")
def pair_partner(schedule: Schedule) -> np.ndarray:
    """Per stage, the stage of its overlapped pairs' backward half: the device's other stage
    where each device holds stages ``r`` and ``V-1-r`` (DualPipeV, DualPipe;
    ``fastpp.placement.mirrored``), else the stage itself.

    Parameters
    ----------
    schedule : Schedule

    Returns
    -------
    ndarray of int, shape (V,)
    """
    instance(schedule, Schedule, "schedule", "fastpp.Schedule")
    schedule._check()
    stages = np.arange(schedule.V)
    if mirrored(code_of(schedule), schedule.p, schedule.m):
        return stages[::-1].copy()
    return stages


def _fit(model: Transformer, seq: int | None, t: int, d: int, cp: int, ep: int, etp: int,
         t_name: str = "t", replicate: int = 1, zero: int = 1, imbalance: float = 1.0,
         sequence_parallel: bool = True) -> None:
    """What a run's degrees need of ``model`` (``RunConfig`` knows no model): ``cp``
    splitting ``seq`` (unless None: bytes alone need no sequence), ``t`` dividing the heads
    (named ``t_name``, the caller's spelling), an expert layout that exists and hybrid
    sharding's ``replicate`` groups dividing its expert-data-parallel replicas; each a
    ScheduleError naming the field."""
    if seq is not None:
        check_cp(seq, cp)
    if model.heads % t or model.kv_heads % t:
        raise ScheduleError(f"{t_name} must divide the heads {model.heads} and KV heads "
                            f"{model.kv_heads} (got {t_name}={t}){REPLICATED}")
    reason = expert_reasons(model, t, d, ep, etp, cp, imbalance, sequence_parallel).item()
    if reason:
        raise ScheduleError(reason)
    if model.moe:
        replicate_reason(replicate, zero, d * cp, expert_data_parallel(model, t, d, ep, etp, cp),
                         raise_it=True)


def _stages(model, hardware, schedule: Schedule, grid: RunGrid, layout=None, layers=None):
    """``stage_table`` of one configuration (``grid``, ``RunGrid.of``) on ``schedule``,
    its layers split by ``layout`` or ``layers``; a ScheduleError for an overlap the schedule
    refuses or a stage left without work."""
    per_stage, embedding, loss, moe, mtp = _chunks(model, schedule, layout, layers)
    overlap, recompute = bool(grid.overlap[0]), RECOMPUTE[int(grid.recompute[0])]
    if overlap or expert_overlap(schedule.name):
        # Megatron's combined 1F1B is its overlap: it refuses full recomputation as well
        # a schedule of pairs with none built (one microbatch) prices as without the
        # overlap, as plan prices it by the schedule's kind
        pairs = bool(np.any(schedule.kind == FB)) or (
            schedule.name in SCHEDULES and SCHEDULES[schedule.name].pairs)
        reason = overlap_reason(schedule.name, pairs or not overlap, recompute,
                                int(grid.cp[0]) if overlap else 1, int(grid.ep[0]),
                                grid.dispatcher)
        if reason:
            raise ScheduleError(reason)
    grid = grid.replace(p=np.full_like(grid.p, schedule.p), m=np.full_like(grid.m, schedule.m))
    table = stage_table(model, hardware, grid, config=np.zeros(schedule.V, np.int64),
                        layers=per_stage, embedding=embedding, loss=loss, moe_layers=moe,
                        mtp=mtp, partner=pair_partner(schedule),
                        placement=code_of(schedule))
    idle = np.flatnonzero(idle_stages(table))
    if idle.size:
        s = int(idle[0])
        what = "only the embedding" if embedding[s] else "nothing"
        raise ScheduleError(idle_reason(f"stage {s} holding {what}: it takes no time"))
    return table


@dataclass(frozen=True, eq=False)
class ModelCosts(Costs):
    """``Costs`` priced by the cost model (``transformer_costs`` makes them): equal to a
    ``Costs`` of the same arrays, which the engine reads as any ``Costs``, with what the
    model knows beside them.

    Parameters
    ----------
    f, b, w, ... :
        ``Costs``' own fields.
    error_bar : ErrorBar, optional
        The step time's expected relative error from ``validate``'s residuals in the
        configuration's regime, and whether it is extrapolated.
    recomputed : ndarray, optional
        Per stage, the bytes a recomputed layer (with uniform groups, a group) brings back
        during its backward (``fastpp.model.stages.recomputed_bytes``).
    working : ndarray, optional
        Per stage, what its device holds at its peak beyond the activations the engine
        counts: that recomputed layer's bytes and context parallelism's exchange buffers, or
        on the loss's stage the loss's working set where larger (``stage_table``'s). ``plan``
        adds each device's largest to its ``peak_activations``.
    after : ndarray, optional
        Per stage, what the loss's stage holds while the training metrics run
        (``RunConfig.train_metrics``; ``fastpp.model.stages.metric_bytes``): a device holds at
        least its largest (``device_held_bytes``).
    """

    error_bar: ErrorBar | None = None
    recomputed: np.ndarray | None = None
    working: np.ndarray | None = None
    after: np.ndarray | None = None


@known_keywords("transformer_costs")  # a misspelt keyword named, not a bare TypeError
def transformer_costs(model, schedule: Schedule | None = None, hardware="H100-80GB", *,
                      seq: int | None = None, microbatch: int = DEFAULTS["microbatch"],
                      tp: int = DEFAULTS["t"], dp: int = DEFAULTS["d"],
                      sequence_parallel: bool = DEFAULTS["sequence_parallel"],
                      recompute: str = DEFAULTS["recompute"], layout=None, layers=None,
                      blocking_handoffs: bool = DEFAULTS["blocking_handoffs"],
                      tp_overlap: bool = DEFAULTS["tp_overlap"], ep: int = DEFAULTS["ep"],
                      etp: int = DEFAULTS["etp"], precision: str | None = DEFAULTS["precision"],
                      node_limit: int | None = DEFAULTS["node_limit"],
                      imbalance: float = DEFAULTS["imbalance"], cp: int = DEFAULTS["cp"],
                      cp_comm: str = DEFAULTS["cp_comm"], zero: int = DEFAULTS["zero"],
                      zero3: str = DEFAULTS["zero3"], replicate: int = DEFAULTS["replicate"],
                      reduce_bytes: float = DEFAULTS["reduce_bytes"],
                      overlap: bool = DEFAULTS["overlap"],
                      dispatcher: str = DEFAULTS["dispatcher"], recipe=None,
                      recompute_modules=None, fp8_cache: bool = False, offload_modules=None,
                      train_metrics: int = DEFAULTS["train_metrics"],
                      framework: str = DEFAULTS["framework"],
                      config: RunConfig | None = None) -> Costs:
    """The ``Costs`` of running ``model`` on ``schedule``: seconds and bytes per stage.

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer`` or a preset name (``MODELS``).
    schedule : Schedule, optional
        Its virtual stages are the model's chunks (two copies for two-direction schedules),
        layers split as ``chunk_layers`` says unless ``layout`` or ``layers`` is given.
        Required without ``config`` (with it: ``RunConfig.build_schedule``'s).
    hardware : Hardware or str
        A ``Hardware`` or a preset name (``HARDWARE``).
    seq, microbatch : int
        Sequence length (required without ``config``) and sequences per microbatch.
    tp, dp : int
        Tensor-parallel degree (its collectives on the critical path) and data-parallel
        replicas (they decide whether the pipeline's hand-offs stay in a node).
    sequence_parallel : bool
        Megatron's sequence parallelism with ``tp > 1``.
    recompute : {"none", "selective", "full"}
    layout : str or Layout, optional
        The layers, embedding and loss of each model chunk: a Megatron
        ``--pipeline-model-parallel-layout`` string (``fastpp.model.layout``) or a ``Layout``
        (from ``megatron_layers``, ``torchtitan_layers``, ``even_layers``).
    layers : sequence of int, optional
        Layers per model chunk instead, the embedding on the first, the loss on the last.
    blocking_handoffs, tp_overlap : bool
        As for ``plan``: Megatron's blocking pipeline hand-offs (default) and Transformer
        Engine's tensor-parallel overlap.
    ep, etp : int
        Expert-parallel and expert-tensor-parallel degrees (``fastpp.model.moe``: Megatron's
        MoE parallel folding, ``etp ep`` dividing ``tp dp``; ``ep`` dividing the experts).
    precision : {"bf16", "fp8"}, optional
        The products' and the dispatch's precision (default: the hardware's).
    node_limit : int, optional
        DeepSeek's node-limited routing: each token reaches at most this many nodes.
    imbalance : float
        The busiest expert-parallel rank's tokens over the mean (>= 1; 1 balanced).
    cp : int
        Context-parallel degree: each sequence in ``2 cp`` chunks, two per rank
        (``fastpp.model.stages.stage_table``); ``seq`` must be a multiple of ``2 cp``.
    cp_comm : {"all-gather", "ring", "torch-allgather", "torch-alltoall"}, optional
        How K and V reach every context-parallel rank: all-gathered per layer (Llama 3) or
        passed round a ring under the attention (Transformer Engine's), or by PyTorch's own
        context parallelism with its rotate method (torchtitan's;
        ``fastpp.model.stages.context_parallel_times``). Default: the framework's
        (``fastpp.model.config.cp_comm_for``).
    zero : {0, 1, 2, 3}
        ZeRO stage over the ``dp * cp`` replicas; only ZeRO-3 changes the pipeline's times
        (default 1, as ``RunConfig``, ``device_bytes`` and ``plan``).
    zero3 : {"layer", "step"}
        ZeRO-3's collectives: per layer in each forward and backward, the gradients reduced
        in each (Megatron-FSDP), or once per step, the weights and accumulated gradients kept
        whole (FSDP2 under PyTorch's pipelining; ``fastpp.model.stages.stage_table``).
    replicate : int
        Hybrid sharding's groups (``RunConfig.replicate``): ZeRO-3's collectives run over
        the ``dp * cp / replicate`` ranks of a group.
    reduce_bytes : float
        Bytes a gradient is reduced in (4: fp32, 2: bf16), which per-layer ZeRO-3's
        reduce-scatters move inside the pipeline.
    train_metrics : int
        Metrics the training loop computes on each microbatch's logits after its backward
        (``RunConfig.train_metrics``; default 0).
    overlap : bool
        Price the schedule's overlapped pairs with ``fastpp.model.overlap`` (``Costs.fb``):
        DualPipe, DualPipeV and combined 1F1B. Without it a pair takes ``f + b``, the
        all-to-alls inside each.
    dispatcher : {"alltoall", "allgather", "flex"}
        Megatron's token dispatcher (``fastpp.model.moe``): flex is DeepEP's, each token
        sent once to each node it uses.
    recipe : Recipe or str, optional
        A memory recipe (``fastpp.model.recipes``; ``"deepseek-v3"`` for DeepSeek-V3's),
        instead of the next three.
    recompute_modules : list of str, optional
        Megatron's ``--recompute-modules`` for ``recompute="selective"`` (default
        ``["core_attn"]``).
    fp8_cache : bool
        The experts' dispatched tokens and SwiGLU inputs stored in FP8.
    offload_modules : list of str, optional
        Megatron's ``--offload-modules``: those activations kept in host memory.
    framework : {"megatron", "torchtitan", "composer", "deepspeed", "other"}
        The training stack the run is on (``RunConfig.framework``): priced as Megatron's but
        for its default ``cp_comm`` and its FP8 products' saved inputs, it chooses the checks
        behind the ``error_bar``.
    config : RunConfig, optional
        The run as one object, the form the keywords above are a thin layer over (they build
        one, one microbatch per replica; ``recipe``, ``fp8_cache`` and ``offload_modules``
        are theirs alone): its fields replace every keyword above, and a keyword set
        beside it to other than its default is a ``ScheduleError``. Its ``first_layers``
        and ``last_layers`` give the layout, and its schedule (``RunConfig.build_schedule``)
        is used when ``schedule`` is None.

    Returns
    -------
    ModelCosts
        A ``Costs``: ``f, b, w`` in seconds, ``act`` in bytes (``Result.peak_activations`` is
        then in bytes), ``gamma`` per stage, hand-offs of ``latency + message_bytes /
        bandwidth``, ``fb`` with ``overlap``; its ``error_bar``, the expected relative
        error of the step time priced with it (``fastpp.model.errorbar``); and per stage
        ``recomputed`` and ``working``, the bytes its device holds beyond the engine's
        activations, and ``after``, what it holds while the training metrics run
        (``device_held_bytes(result.peak_activations, costs.working, costs.after,
        schedule.stage_to_device, schedule.p)`` is ``plan``'s ``activation_bytes``).

    Raises
    ------
    ScheduleError
        For a bad count, a layout that does not parse (naming the position), one whose
        stages are not the schedule's model chunks or whose layers are not the model's, or
        one that leaves a stage without work; ``ep`` not dividing the experts or ``etp ep``
        not dividing ``tp cp dp``; fp8 on hardware without an fp8 peak; ``cp`` not splitting
        ``seq`` into ``2 cp`` chunks; an overlap asked of a schedule without pairs, with
        ``recompute="full"`` (which ``"combined-1f1b"`` refuses in any case) or with
        ``cp > 1``.
    """
    model, hardware = preset(MODELS, model, "model"), preset(HARDWARE, hardware, "hardware")
    if config is None:  # the keyword form: a thin layer making the RunConfig
        if schedule is None:
            raise ScheduleError("schedule must be a Schedule (got None; give one, or config=)")
        config = _keyword_run(model, seq=seq, microbatch=microbatch, tp=tp, dp=dp,
                              sequence_parallel=sequence_parallel, recompute=recompute,
                              blocking_handoffs=blocking_handoffs, tp_overlap=tp_overlap,
                              ep=ep, etp=etp, precision=precision, node_limit=node_limit,
                              imbalance=imbalance, cp=cp, cp_comm=cp_comm, zero=zero,
                              zero3=zero3, replicate=replicate, overlap=overlap,
                              dispatcher=dispatcher, reduce_bytes=reduce_bytes,
                              train_metrics=train_metrics, framework=framework)
        # the modules act on selective recomputation alone: otherwise they would price nothing
        if recompute_modules is not None and recompute != "selective":
            raise ScheduleError(f"recompute_modules must come with selective recomputation, "
                                f"which they act on: recompute must be 'selective' (got "
                                f"recompute={recompute!r} with recompute_modules="
                                f"{recompute_modules!r})")
        # the memory recipe is the keyword form's alone (a RunConfig carries the modules)
        recipe = make_recipe(recipe, recompute_modules, fp8_cache, offload_modules)
    else:
        config = as_run(config)
        config_alone("transformer_costs", seq=seq, microbatch=microbatch, tp=tp, dp=dp,
                      sequence_parallel=sequence_parallel, recompute=recompute, layout=layout,
                      layers=layers, blocking_handoffs=blocking_handoffs, tp_overlap=tp_overlap,
                      ep=ep, etp=etp, precision=precision, node_limit=node_limit,
                      imbalance=imbalance, cp=cp, cp_comm=cp_comm, zero=zero, zero3=zero3,
                      replicate=replicate, reduce_bytes=reduce_bytes, overlap=overlap,
                      dispatcher=dispatcher, recipe=recipe,
                      recompute_modules=recompute_modules, fp8_cache=fp8_cache,
                      offload_modules=offload_modules, train_metrics=train_metrics,
                      framework=framework)
        _fit(model, config.seq, config.t, config.d, config.cp, config.ep, config.etp,
             replicate=config.replicate, zero=config.zero, imbalance=config.imbalance,
             sequence_parallel=config.sequence_parallel)
        schedule = _config_schedule(config, schedule)
        layout, layers = config.chunk_layout(model), None
        recipe = config.priced_recipe
    if config.precision is not None:
        hardware.with_precision(config.precision)  # raises for fp8 without an fp8 peak
    check_imbalance(config.imbalance, model)  # (a RunConfig does not know the experts)
    refuse_expert_options(model, dispatcher=config.dispatcher, imbalance=config.imbalance,
                          node_limit=config.node_limit)
    refuse_unpriced(model, recipe)  # (FP8 caching and a named recipe's items too)
    table = _stages(model, hardware, schedule, RunGrid.of(config, recipe), layout, layers)
    return stage_costs(table, ModelCosts, fb=table.get("fb"),
                       # the job's GPUs: the keyword form's config holds p = 1
                       error_bar=error_bar(regime(model, hardware, config.seq, config.t,
                                                  config.gpus // config.p * schedule.p,
                                                  framework=config.framework)),
                       recomputed=table["recomputed"], working=table["working"],
                       after=table["after"])


def _config_schedule(config: RunConfig, schedule):
    """The schedule a ``RunConfig`` prices: ``schedule`` where given, which must have its ``p``
    devices of ``m`` chunks (its stages are what the layers spread over), else its own."""
    if schedule is None:
        return config.build_schedule()
    if isinstance(schedule, Schedule) and (schedule.p, schedule.m) != (config.p, config.m):
        raise ScheduleError(f"schedule must have config's p={config.p} devices of m={config.m} "
                            f"chunks (got a schedule with p={schedule.p}, m={schedule.m})")
    return schedule  # (anything else is refused where it is read)


def _keyword_run(model, *, seq, microbatch, tp, dp, cp, ep, etp, replicate=1,
                 **choices) -> RunConfig:
    """``transformer_costs``'s keywords as a ``RunConfig`` (one microbatch per replica: the
    schedule gives the rest), the degrees checked under their keyword names first."""
    # (each below 2**31, as RunConfig's: 2**63 overflowed NumPy's int64 in the checks)
    seq, microbatch = positive_int(seq, "seq", MAX_INT), positive_int(microbatch, "microbatch",
                                                                      MAX_INT)
    t, d, cp = (positive_int(v, k, MAX_INT) for v, k in ((tp, "tp"), (dp, "dp"), (cp, "cp")))
    ep, etp = positive_int(ep, "ep", MAX_INT), positive_int(etp, "etp", MAX_INT)
    replicate = positive_int(replicate, "replicate", MAX_INT - 1)
    one_of(choices["zero"], "zero", ZERO)
    _fit(model, seq, t, d, cp, ep, etp, t_name="tp", replicate=replicate, zero=choices["zero"],
         imbalance=check_imbalance(choices.get("imbalance", 1.0), model),
         sequence_parallel=choices.get("sequence_parallel", True))
    if microbatch * d >= MAX_INT:  # RunConfig's bound on the sequences of a step
        raise ScheduleError(f"microbatch * dp must be below 2**31 (got microbatch={microbatch}, "
                            f"dp={d})")
    return RunConfig(seq=seq, global_batch=microbatch * d, microbatch=microbatch, t=t, d=d,
                     cp=cp, ep=ep, etp=etp, replicate=replicate, **choices)


@known_keywords("device_bytes")
def device_bytes(model, schedule: Schedule | None = None, *, tp: int = DEFAULTS["t"],
                 dp: int = DEFAULTS["d"], zero: int = DEFAULTS["zero"], layout=None,
                 layers=None, ep: int = DEFAULTS["ep"], etp: int = DEFAULTS["etp"],
                 cp: int = DEFAULTS["cp"], zero3: str = DEFAULTS["zero3"],
                 replicate: int = DEFAULTS["replicate"],
                 reduce_bytes: float = DEFAULTS["reduce_bytes"], recipe=None,
                 config: RunConfig | None = None) -> dict[str, np.ndarray]:
    """Per device: ``parameter_bytes``, ``gradient_bytes`` and ``optimizer_bytes`` of the
    stages it holds (mixed-precision Adam: bf16 weights, the gradients at ``reduce_bytes``,
    an fp32 master copy and two moments: 2 + 4 + 12 bytes per parameter as Megatron holds
    them under ``--bf16``, 2 + 2 + 12 with ``reduce_bytes=2``; ZeRO ``zero`` over
    the ``dp * cp`` replicas, the routed experts' over the ``edp`` expert-data-parallel ones;
    a tied output layer on the embedding's device is one copy), the layers split by
    ``layout`` or ``layers`` as for ``transformer_costs``; ZeRO-3 as
    ``fastpp.model.stages.optimizer_split`` holds it (``zero3``), the routed experts' over
    their ``edp`` replicas. ``config`` (a ``RunConfig``) replaces the keywords (one set beside it
    to other than its default is a ``ScheduleError``) and gives the schedule when
    ``schedule`` is None. These parts are counted, not modelled (no error bar: a test holds
    them to a PyTorch model's bytes); the activations' expected error is
    ``fastpp.model.memorybar``'s, in ``plan``'s ``expected_memory_error``.

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer`` or a preset name (``fastpp.model.MODELS``).
    schedule : Schedule, optional
        The pipeline whose stages the devices hold (needed without ``config``).
    tp, dp, cp, ep, etp : int
        Tensor-, data-, context-, expert- and expert-tensor-parallel degrees.
    zero : int
        ZeRO stage 0-3 over the ``dp * cp`` replicas.
    layout, layers : optional
        The layers per model chunk, as for ``transformer_costs``.
    zero3 : {"layer", "step"}
        How ZeRO-3 gathers the weights and reduces the gradients (per layer, or once a step
        with the weights and gradients held whole).
    replicate : int
        Hybrid sharding's groups (``RunConfig.replicate``): ZeRO shards over the
        ``dp * cp / replicate`` ranks of a group (and the experts' over ``edp / replicate``).
    reduce_bytes : float
        Bytes a gradient is held and reduced in: 4 (Megatron's fp32 ``main_grad`` under
        ``--bf16``), 2 (``--grad-reduce-in-bf16``, fp16 training).
    recipe : Recipe or str, optional
        A memory recipe (``fastpp.model.recipes``): ``"deepseek-v3"`` keeps AdamW's moments
        in bf16 (8 optimizer bytes a parameter), as ``plan`` counts them with it.
    config : RunConfig, optional
        One run in place of the keywords.

    Returns
    -------
    dict of str to ndarray, each of shape (p,)
        ``parameter_bytes``, ``gradient_bytes``, ``optimizer_bytes``.

    Raises
    ------
    ScheduleError
        For an unknown preset, no ``schedule`` and no ``config``, a keyword set beside
        ``config``, a bad degree or ZeRO choice, or a layout that does not fit.
    """
    model = preset(MODELS, model, "model")
    if config is None:  # no RunConfig: it needs a seq, which bytes do not depend on
        if schedule is None:
            raise ScheduleError("schedule must be a Schedule (got None; give one, or config=)")
        one_of(zero, "zero", ZERO)
        one_of(zero3, "zero3", ZERO3_GATHERS)
        if zero3 != "layer" and zero != 3:  # (as RunConfig refuses it: it was ignored here)
            raise ScheduleError(f"zero3 chooses when ZeRO-3 gathers the weights: zero must be "
                                f"3 with zero3={zero3!r} (got zero={zero})")
        t, d, cp = (positive_int(v, k, MAX_INT - 1) for k, v in (("tp", tp), ("dp", dp),
                                                                   ("cp", cp)))
        ep, etp = positive_int(ep, "ep", MAX_INT - 1), positive_int(etp, "etp", MAX_INT - 1)
        replicate = positive_int(replicate, "replicate", MAX_INT - 1)
        reduce_bytes = check_reduce_bytes(reduce_bytes)
        recipe = make_recipe(recipe)
        replicate_reason(replicate, zero, d * cp, raise_it=True)
        _fit(model, None, t, d, cp, ep, etp, t_name="tp", replicate=replicate, zero=zero)
    else:
        config = as_run(config)
        config_alone("device_bytes", tp=tp, dp=dp, zero=zero, layout=layout, layers=layers,
                      ep=ep, etp=etp, cp=cp, zero3=zero3, replicate=replicate,
                      reduce_bytes=reduce_bytes, recipe=recipe)
        _fit(model, config.seq, config.t, config.d, config.cp, config.ep, config.etp,
             replicate=config.replicate, zero=config.zero, imbalance=config.imbalance,
             sequence_parallel=config.sequence_parallel)
        schedule = _config_schedule(config, schedule)
        layout, layers = config.chunk_layout(model), None
        t, d, cp, ep, etp = config.t, config.d, config.cp, config.ep, config.etp
        zero, zero3, replicate = config.zero, config.zero3, config.replicate
        # (the run's recipe: None had given DeepSeek-V3's recipe 12 optimizer bytes a
        # parameter where plan gives its bf16 moments 8, a review)
        reduce_bytes, recipe = config.reduce_bytes, config.priced_recipe
    edp = int(expert_data_parallel(model, t, d, ep, etp, cp))
    per_stage, embedding, loss, moe, mtp = _chunks(model, schedule, layout, layers)
    params, experts = device_parameters(
        model, schedule.stage_to_device, schedule.p,
        stage_params(model, per_stage, embedding, loss, t, moe, mtp),
        expert_stage_params(model, moe, mtp, ep + 0.0 * moe, etp), embedding, loss, t, mtp)
    weights, grads, optimizer = device_memory(
        model, params, experts, t, d * cp, edp, zero, zero3, replicate, reduce_bytes,
        optimizer_bytes(recipe))
    return {"parameter_bytes": weights, "gradient_bytes": grads, "optimizer_bytes": optimizer}


ModelCosts.__init__ = known_keywords("ModelCosts")(ModelCosts.__init__)
