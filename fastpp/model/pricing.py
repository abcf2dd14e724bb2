"""Pricing a transformer on a schedule: ``transformer_costs`` (per-stage seconds and bytes, a
``Costs`` with its error bar) and ``device_bytes`` (weights, gradients and optimizer states per
device), for one configuration; ``fastpp.model.plan`` prices many at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import ScheduleError, ScheduleTypeError, one_of, positive_int
from ..costs import Costs
from ..generators.registry import code_of
from ..ops import FB
from ..placement import copies, mirrored
from ..schedule import Schedule
from .config import RunConfig, RunGrid
from .errorbar import ErrorBar, error_bar, regime
from .hardware import HARDWARE, PRECISIONS, preset
from .layout import (
    as_layout,
    check_layout,
)
from .moe import expert_data_parallel, expert_reasons
from .overlap import expert_overlap, overlap_reason
from .presets import MODELS
from .recipes import recipe_pricing
from .stages import (
    CP_COMMS,
    ZERO,
    ZERO3_GATHERS,
    check_cp,
    chunk_kinds,
    device_memory,
    device_parameters,
    expert_stage_params,
    idle_reason,
    idle_stages,
    stage_params,
    stage_table,
)
from .transformer import RECOMPUTE, Transformer, chunk_layers


def _chunks(model: Transformer, schedule, layout=None, layers=None):
    """Per virtual stage: its layers, whether it holds the embedding or the output layer
    and the loss (a two-direction schedule holds a second copy of the model's chunks), its
    MoE layers and its MTP modules (``stages.chunk_kinds``)."""
    if not isinstance(schedule, Schedule):
        raise ScheduleTypeError(f"schedule must be a fastpp.Schedule (got "
                                f"{type(schedule).__name__})")
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


def pair_partner(schedule: Schedule) -> np.ndarray:
    """Per stage, the stage of its overlapped pairs' backward half: the device's other stage
    where each device holds stages ``r`` and ``V-1-r`` (DualPipeV, DualPipe;
    ``fastpp.placement.mirrored``), else the stage itself."""
    stages = np.arange(schedule.V)
    if mirrored(code_of(schedule), schedule.p, schedule.m):
        return stages[::-1].copy()
    return stages


def _one_grid(model, hardware, *, seq, microbatch=1, tp=1, dp=1, sequence_parallel=True,
              recompute="none", blocking_handoffs=True, tp_overlap=False, ep=1, etp=1,
              precision=None, node_limit=None, imbalance=1.0, cp=1, cp_comm="all-gather",
              zero=1, zero3="layer", overlap=False, dispatcher="alltoall", recipe=None,
              recompute_modules=None, fp8_cache=False, offload_modules=None) -> RunGrid:
    """``transformer_costs``'s keywords (the public names: ``tp``, ``dp``) checked, each
    error naming its keyword, as the one ``RunGrid`` the model's internals read
    (``t``, ``d``); its ``p`` and ``m`` are 1 until ``_stages`` gives it a schedule's."""
    seq, microbatch = positive_int(seq, "seq"), positive_int(microbatch, "microbatch")
    t, d, cp = positive_int(tp, "tp"), positive_int(dp, "dp"), positive_int(cp, "cp")
    one_of(recompute, "recompute", RECOMPUTE)
    one_of(cp_comm, "cp_comm", CP_COMMS)
    one_of(zero, "zero", ZERO)
    one_of(zero3, "zero3", ZERO3_GATHERS)
    one_of(overlap, "overlap", (False, True))
    check_cp(seq, cp)
    for flag, name in ((sequence_parallel, "sequence_parallel"),
                       (blocking_handoffs, "blocking_handoffs"), (tp_overlap, "tp_overlap")):
        one_of(flag, name, (False, True))
    if model.heads % t or model.kv_heads % t:
        raise ScheduleError(f"tp must divide the heads {model.heads} and KV heads "
                            f"{model.kv_heads} (got tp={t})")
    ep, etp = positive_int(ep, "ep"), positive_int(etp, "etp")
    reason = expert_reasons(model, t, d, ep, etp, cp).item()
    if reason:
        raise ScheduleError(reason)
    if precision is not None:
        one_of(precision, "precision", PRECISIONS)
        hardware.with_precision(precision)  # raises for fp8 without an fp8 peak
    if node_limit is not None:
        positive_int(node_limit, "node_limit")
    if (isinstance(imbalance, bool) or not isinstance(imbalance, int | float | np.number)
            or not 1.0 <= float(imbalance) < float("inf")):
        raise ScheduleError(f"imbalance must be a number >= 1, the busiest expert-parallel "
                            f"rank's tokens over the mean (got {imbalance!r})")
    one = np.zeros(1, np.int64)
    return RunGrid(seq=seq, microbatch=one + microbatch, t=one + t, d=one + d, p=one + 1,
                   m=one + 1, recompute=one + RECOMPUTE.index(recompute), cp=one + cp,
                   zero=one + zero, overlap=one + bool(overlap), ep=np.array([ep]),
                   etp=np.array([etp]), sequence_parallel=sequence_parallel,
                   tp_overlap=bool(tp_overlap), blocking_handoffs=bool(blocking_handoffs),
                   precision=precision, cp_comm=cp_comm, zero3=zero3, node_limit=node_limit,
                   imbalance=float(imbalance), **recipe_pricing(
                       dispatcher, recipe, recompute_modules, fp8_cache, offload_modules))


def _stages(model, hardware, schedule: Schedule, grid: RunGrid, layout=None, layers=None):
    """``stage_table`` of one configuration (``grid``, from ``_one_grid``) on ``schedule``,
    its layers split by ``layout`` or ``layers``; a ScheduleError for an overlap the schedule
    refuses or a stage left without work."""
    per_stage, embedding, loss, moe, mtp = _chunks(model, schedule, layout, layers)
    overlap, recompute = bool(grid.overlap[0]), RECOMPUTE[int(grid.recompute[0])]
    if overlap or expert_overlap(schedule.name):
        # Megatron's combined 1F1B is its overlap: it refuses full recomputation as well
        pairs = bool(np.any(schedule.kind == FB))
        reason = overlap_reason(schedule.name, pairs or not overlap, recompute,
                                int(grid.cp[0]) if overlap else 1, int(grid.ep[0]))
        if reason:
            raise ScheduleError(reason)
    grid = grid.replace(p=np.full_like(grid.p, schedule.p), m=np.full_like(grid.m, schedule.m))
    table = stage_table(model, hardware, grid, config=np.zeros(schedule.V, np.int64),
                        layers=per_stage, embedding=embedding, loss=loss, moe_layers=moe,
                        mtp=mtp, partner=pair_partner(schedule))
    idle = np.flatnonzero(idle_stages(table))
    if idle.size:
        s = int(idle[0])
        what = "only the embedding" if embedding[s] else "nothing"
        raise ScheduleError(idle_reason(f"stage {s} holding {what}: it takes no time"))
    return table


@dataclass(frozen=True, eq=False)
class ModelCosts(Costs):
    """``Costs`` priced by the cost model, with the ``error_bar`` of the step time they give
    (``fastpp.model.errorbar.ErrorBar``: the expected relative error from ``validate``'s
    residuals in the configuration's regime, and whether it is extrapolated). Equal to a
    ``Costs`` of the same arrays; the engine reads them as any ``Costs``."""

    error_bar: ErrorBar | None = None


def transformer_costs(model, schedule: Schedule | None = None, hardware="H100-80GB", *,
                      seq: int | None = None, microbatch: int = 1, tp: int = 1, dp: int = 1,
                      sequence_parallel: bool = True, recompute: str = "none", layout=None,
                      layers=None, blocking_handoffs: bool = True,
                      tp_overlap: bool = False, ep: int = 1, etp: int = 1,
                      precision: str | None = None, node_limit: int | None = None,
                      imbalance: float = 1.0, cp: int = 1, cp_comm: str = "all-gather",
                      zero: int = 1, zero3: str = "layer", overlap: bool = False,
                      dispatcher: str = "alltoall", recipe=None, recompute_modules=None,
                      fp8_cache: bool = False, offload_modules=None,
                      config: RunConfig | None = None) -> Costs:
    """The ``Costs`` of running ``model`` on ``schedule``: seconds and bytes per stage.

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer`` or a preset name (``MODELS``).
    schedule : Schedule
        Its virtual stages are the model's chunks (two copies for two-direction schedules),
        layers split as ``chunk_layers`` says unless ``layout`` or ``layers`` is given.
    hardware : Hardware or str
        A ``Hardware`` or a preset name (``HARDWARE``).
    seq, microbatch : int
        Sequence length and sequences per microbatch.
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
    cp_comm : {"all-gather", "ring"}
        How K and V reach every context-parallel rank: all-gathered per layer (Llama 3) or
        passed round a ring under the attention.
    zero : {0, 1, 2, 3}
        ZeRO stage over the ``dp * cp`` replicas; only ZeRO-3 changes the pipeline's times
        (default 1, as ``RunConfig``, ``device_bytes`` and ``plan``).
    zero3 : {"layer", "step"}
        ZeRO-3's weight all-gathers: per layer in each forward and backward, or once per step.
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
    config : RunConfig, optional
        The run as one object: its fields replace every keyword above, and its schedule
        (``RunConfig.build_schedule``) is used when ``schedule`` is None.

    Returns
    -------
    ModelCosts
        A ``Costs``: ``f, b, w`` in seconds, ``act`` in bytes (``Result.peak_activations`` is
        then in bytes), ``gamma`` per stage, hand-offs of ``latency + message_bytes /
        bandwidth``, ``fb`` with ``overlap``; and its ``error_bar``, the expected relative
        error of the step time priced with it (``fastpp.model.errorbar``).

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
    if config is not None:  # the one-object form: a thin layer over the keywords
        model = preset(MODELS, model, "model")
        return transformer_costs(model, config.build_schedule() if schedule is None
                                 else schedule, hardware, **config.costs_keywords(model))
    if schedule is None:
        raise ScheduleError("schedule must be a Schedule (got None; give one, or config=)")
    model, hardware = preset(MODELS, model, "model"), preset(HARDWARE, hardware, "hardware")
    grid = _one_grid(model, hardware, seq=seq, microbatch=microbatch, tp=tp, dp=dp,
                     sequence_parallel=sequence_parallel, recompute=recompute,
                     blocking_handoffs=blocking_handoffs, tp_overlap=tp_overlap, ep=ep,
                     etp=etp, precision=precision, node_limit=node_limit, imbalance=imbalance,
                     cp=cp, cp_comm=cp_comm, zero=zero, zero3=zero3, overlap=overlap,
                     dispatcher=dispatcher, recipe=recipe, recompute_modules=recompute_modules,
                     fp8_cache=fp8_cache, offload_modules=offload_modules)
    table = _stages(model, hardware, schedule, grid, layout, layers)
    return ModelCosts(f=table["f"], b=table["b"], w=table["w"], comm=table["comm"],
                      gamma=table["gamma"], act=table["act"],
                      bandwidth=table["bandwidth"],
                      message_bytes=table["message_bytes"], fb=table.get("fb"),
                      error_bar=error_bar(regime(model, hardware, grid.seq, tp)))


def device_bytes(model, schedule: Schedule | None = None, *, tp: int = 1, dp: int = 1,
                 zero: int = 1, layout=None, layers=None, ep: int = 1, etp: int = 1,
                 cp: int = 1, zero3: str = "layer",
                 config: RunConfig | None = None) -> dict[str, np.ndarray]:
    """Per device: ``parameter_bytes``, ``gradient_bytes`` and ``optimizer_bytes`` of the
    stages it holds (mixed-precision Adam, 2 + 2 + 12 bytes per parameter, ZeRO ``zero`` over
    the ``dp * cp`` replicas, the routed experts' over the ``edp`` expert-data-parallel ones;
    a tied output layer on the embedding's device is one copy), the layers split by
    ``layout`` or ``layers`` as for ``transformer_costs``; ZeRO-3 as
    ``fastpp.model.stages.optimizer_split`` holds it (``zero3``; the routed experts stay as
    ZeRO-2 keeps them). ``config`` (a ``RunConfig``) replaces the keywords and gives the
    schedule when ``schedule`` is None. These parts are exact by construction (no error
    bar: a test holds them to a PyTorch model's bytes); the activations' expected error is
    ``fastpp.model.memorybar``'s, in ``plan``'s ``expected_memory_error``."""
    if config is not None:
        model = preset(MODELS, model, "model")
        return device_bytes(model, config.build_schedule() if schedule is None else schedule,
                            **config.bytes_keywords(model))
    if schedule is None:
        raise ScheduleError("schedule must be a Schedule (got None; give one, or config=)")
    one_of(zero, "zero", ZERO)
    one_of(zero3, "zero3", ZERO3_GATHERS)
    model = preset(MODELS, model, "model")
    t, d, cp = positive_int(tp, "tp"), positive_int(dp, "dp"), positive_int(cp, "cp")
    ep, etp = positive_int(ep, "ep"), positive_int(etp, "etp")
    edp = int(expert_data_parallel(model, t, d, ep, etp, cp))
    per_stage, embedding, loss, moe, mtp = _chunks(model, schedule, layout, layers)
    params, experts = device_parameters(
        model, schedule.stage_to_device, schedule.p,
        stage_params(model, per_stage, embedding, loss, t, moe, mtp),
        expert_stage_params(model, moe, mtp, ep + 0.0 * moe, etp), embedding, loss, t)
    weights, grads, optimizer = device_memory(model, params, experts, t, d * cp, edp, zero,
                                              zero3)
    return {"parameter_bytes": weights, "gradient_bytes": grads, "optimizer_bytes": optimizer}
