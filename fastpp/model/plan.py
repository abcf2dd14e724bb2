"""``plan``: every way to train a model on a number of GPUs, each an exact pipeline timeline."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from .. import batch, engine
from ..checks import (
    MAX_INT,
    ScheduleError,
    flag,
    known_keywords,
    nonnegative_int,
    numbers,
    one_of,
    positive_int,
    positive_ints,
    progress_bar,
    require,
)
from ..costs import FIELDS
from ..generators.registry import SCHEDULES, get_spec
from ..montecarlo import DEFAULT_SAMPLES, check_lam, check_noise
from ..placement import mirrored, stage_map
from ..sweeps.robust import (
    NOISE_COLUMNS,
    OBJECTIVES,
    costs_of,
    noise_rows,
    objective_values,
)
from ..sweeps.warmup import warm_up
from .comm import pipeline_spans
from .config import (
    FRAMEWORKS,
    OP_LEVEL,
    PARTIAL_DEFAULT,
    PER_CONFIGURATION,
    REDUCE_BYTES,
    RUN_METHODS,
    ZERO,
    ZERO3_GATHERS,
    RunGrid,
    as_run,
    check_cp,
    check_reduce_bytes,
    check_sequence_parallel,
    check_tp_overlap,
    check_train_metrics,
    config_alone,
    cp_comm_for,
    replicate_reason,
)
from .errorbar import error_bar, regime
from .hardware import GB, HARDWARE, LINKS, PRECISIONS, preset
from .layout import as_layout, check_layout, even_layers
from .memorybar import activation_error, unmeasured
from .moe import check_imbalance, expert_reasons, refuse_expert_options
from .overlap import overlap_reason
from .presets import MODELS
from .recipes import Recipe, optimizer_bytes, recipe_pricing, refuse_unpriced
from .stages import (
    chunk_kinds,
    device_memory,
    device_parameters,
    device_working_bytes,
    idle_reason,
    idle_stages,
    stage_table,
    step_terms,
)
from .transformer import RECOMPUTE, REPLICATED

# a row: its configuration, what the timeline and the bytes give, and whether it fits
CONFIG_COLUMNS = ("model", "gpus", "t", "cp", "p", "d", "ep", "etp", "schedule", "m",
                  "microbatch", "n", "recompute", "zero", "overlap", "precision", "layout")
NUMBERS = ("step_time", "makespan", "gradient_sync", "optimizer_step", "tokens_per_s", "mfu",
           "tflops_per_gpu", "bubble_ratio",
           "parameter_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes",
           "peak_memory")
# a plan with noise=: the pipeline's Monte Carlo and the step's figures under it
NOISY = (*NOISE_COLUMNS, "step_time_mean", "step_time_p50", "step_time_p95")
# the step time's expected relative error, its checks' mean signed error and, outside every
# validated regime, what is missing (fastpp.model.errorbar); the peak memory's expected
# relative error (fastpp.model.memorybar)
ERROR_COLUMNS = ("expected_error", "expected_bias", "extrapolated", "expected_memory_error")
PLAN_COLUMNS = (*CONFIG_COLUMNS, *NUMBERS, *ERROR_COLUMNS, "fits", "reason")
# configurations simulated at a time: the unit of a long plan's progress (a part's arrays of
# stage costs stay in the tens of MB)
PLAN_PART = 2**15


def divisors(x: int, upper: int) -> list[int]:
    """The divisors of ``x`` up to ``upper`` (a loop to ``x`` itself hangs on a huge x)."""
    return [k for k in range(1, min(x, upper) + 1) if x % k == 0]


@known_keywords("plan")  # a misspelt keyword named, not a bare TypeError
def plan(model, gpus=None, hardware="H100-80GB", *, seq=None, global_batch=None, link=None,
         schedules=None, tp=None, pp=None, microbatch=None, m=None, recompute=None, zero=1,
         capacity=None,
         sequence_parallel: bool = True, gradient_overlap: bool = False,
         blocking_handoffs: bool = True, tp_overlap: bool = False, layout=None,
         first_layers=None, last_layers=None, ep=None, etp=1, precision=None,
         node_limit=None, imbalance: float = 1.0, workers: int | None = None,
         progress: bool = False, cp=None,
         cp_comm: str | None = None, zero3: str = "layer", overlap=False, noise=None,
         samples: int | None = None, seed: int = 0, objective: str | None = None,
         lam: float = 1.0,
         dispatcher: str = "alltoall", recipe=None, recompute_modules=None,
         fp8_cache: bool = False, offload_modules=None, config=None,
         t=None, p=None, reduce_bytes: float = REDUCE_BYTES, recompute_method=None,
         recompute_layers=None, replicate: int = 1, train_metrics: int = 0,
         framework: str = "megatron"):
    """Every configuration of ``model`` on ``gpus`` GPUs: one row each, fastest that fits first.

    Each row's pipeline is an exact timeline of the schedule with the model's per-stage
    costs (``fastpp.model.transformer_costs``), simulated in the jitted sweep kernel.

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer``, or a preset name (``fastpp.model.MODELS``).
    gpus : int
        GPUs in all: ``t * cp * p * d``.
    hardware : Hardware or str
        A ``Hardware`` or a preset name (``fastpp.model.HARDWARE``).
    seq, global_batch : int
        Sequence length and sequences per step; ``n = global_batch / (microbatch * d)``.
    link : Link or str, optional
        The inter-node link, instead of the hardware's (a ``Link`` or a ``LINKS`` name).
    schedules : list of str, optional
        Registered training schedules (default: all; for a model without experts, all but
        those that are Megatron's expert-parallel overlap, e.g. ``"combined-1f1b"``, which
        could only give reason rows: named, they give them).
    tp, pp, microbatch, m : int or list of int, optional
        Tensor-parallel and pipeline degrees, sequences per microbatch, chunks per device
        (default: every ``t`` in a node dividing the heads, every ``p`` up to the layers,
        microbatches 1, 2, 4, each schedule's own chunk counts; ``summary`` says where the
        best run that fits takes the largest default microbatch).
    recompute : str or list of str, optional
        ``"none"``, ``"selective"``, ``"full"`` (default: all three).
    zero : int or list of int
        ZeRO stage over the ``d * cp`` replicas: 0, 1 (optimizer states sharded), 2 (and
        gradients) or 3 (and weights: ZeRO-3, FSDP; ``zero3`` says how they are gathered).
        ZeRO-3 holds two whole layers in flight beside its shards, as FSDP2 holds them: on
        a device of few layers it can hold more than ZeRO-2 (Llama 2 7B at ``p = 16``, ``d =
        2``: weights 1.07 GB under ZeRO-2, 1.35 GB under ZeRO-3).
    capacity : float, optional
        Bytes per GPU (default: the hardware's memory).
    sequence_parallel : bool
        Megatron's sequence parallelism with ``t > 1``.
    gradient_overlap : bool
        Megatron's ``--overlap-grad-reduce`` and ``--overlap-param-gather``: the gradient
        reduction runs in buckets under the last microbatch's backward and ZeRO's parameter
        all-gather under the next forward (``fastpp.model.stages.step_terms``). Default: not
        overlapped, as Megatron by default.
    blocking_handoffs : bool
        Megatron's blocking pipeline hand-offs (its plain pipeline's, and its interleaved
        one's with ``--no-overlap-p2p-communication``): each chunk op also holds its device
        for one hand-off's transfer (default, as validated in ``fastpp.model.validate``).
        False: the hand-offs overlap with compute (Megatron's interleaved default).
    tp_overlap : bool
        Transformer Engine's ``--tp-comm-overlap``: a layer's tensor-parallel collectives run
        under its own products, only what exceeds them exposed.
    layout : str, Layout or list of them, optional
        Layers per model chunk as Megatron's ``--pipeline-model-parallel-layout`` strings
        (``fastpp.model.layout``): rows whose model chunks (``p * m``) are not the layout's
        stages get a reason.
    first_layers, last_layers : int or list of int, optional
        Layers on the first model chunk (beside the embedding) and on the last (beside the
        output layer and loss), the rest as even as can be: axes (default: every chunk as
        even as can be, the remainder in the middle chunks).
    ep, etp : int or list of int, optional
        Expert-parallel and expert-tensor-parallel degrees (``fastpp.model.moe``; default:
        every ``ep`` dividing the experts and the GPUs, ``etp = 1``; 1 for a dense model):
        rows where ``ep`` does not divide the experts or ``etp ep`` the ``t d`` GPUs of a
        stage get a reason.
    precision : str or list of str, optional
        ``"bf16"`` or ``"fp8"``: the products' and the MoE dispatch's precision (default:
        the hardware's).
    node_limit : int, optional
        DeepSeek's node-limited routing (each token to at most this many nodes).
    imbalance : float
        The busiest expert-parallel rank's tokens over the mean (>= 1).
    workers : int, optional
        Threads (default: the machine's cores).
    progress : bool
        Say on stderr when the kernels compile (once per machine: about half a minute on an
        empty kernel cache, which ``plan`` splits over two processes), show a bar of the
        configurations past a second where there are more than ``PLAN_PART``, and with
        ``noise`` one of the Monte Carlos.
    cp : int or list of int, optional
        Context-parallel degrees (default 1): each sequence in ``2 cp`` chunks; rows whose
        ``cp`` does not split ``seq`` so get a reason.
    cp_comm : {"all-gather", "ring", "torch-allgather", "torch-alltoall"}, optional
        Context parallelism's K and V exchange (``fastpp.model.stages.stage_table``).
        Default: the framework's (``fastpp.model.config.cp_comm_for``: PyTorch's all-gather
        for torchtitan, Transformer Engine's for the others); the other framework's is
        refused.
    zero3 : {"layer", "step"}
        ZeRO-3's collectives: per layer in each forward and backward, the gradients reduced
        in each (Megatron-FSDP), or once per step, the weights and accumulated gradients kept
        whole (FSDP2 under PyTorch's pipelining; ``fastpp.model.stages.stage_table``).
    replicate : int
        Hybrid sharding (``RunConfig.replicate``): ZeRO over ``d cp / replicate`` ranks in
        each of ``replicate`` groups, the gradients' shards all-reduced across them once a
        step. Rows whose ``d cp`` (or a MoE model's expert-data-parallel replicas) it does
        not divide, or with ``zero=0``, get a reason.
    overlap : bool or list of bool
        The overlapped pair priced by ``fastpp.model.overlap`` (an axis): rows asking it of a
        schedule without pairs or with ``recompute="full"`` get a reason.
    dispatcher, recipe, recompute_modules, fp8_cache, offload_modules
        The token dispatcher and the memory recipe, as ``fastpp.model.transformer_costs``
        takes them (one each, not axes; the recompute modules act on the rows with
        ``recompute="selective"``).
    recompute_method, recompute_layers : optional
        The rows with ``recompute="full"`` recompute only some layers of each model chunk:
        with ``"block"`` (Megatron's ``--recompute-method``) the first ``recompute_layers``
        (default 1), with ``"interval"`` (torchtitan's layer-wise checkpointing) every
        ``recompute_layers``-th (default 2); the others keep their activations. None: every
        layer, each its own checkpoint; ``"uniform"``: every layer, in Megatron's
        checkpoints of ``recompute_layers`` (default 1) layers, whose backward brings a
        group's activations back at once. The method needs rows with ``recompute="full"``;
        ``"op"`` instead prices the rows with ``recompute="selective"`` as torchtitan's
        op-level checkpointing (``fastpp.model.recipes.op_level_terms``).
    framework : {"megatron", "torchtitan", "composer", "deepspeed", "other"}
        The training stack the runs are on (``RunConfig.framework``): every row is priced as
        Megatron's but for the default ``cp_comm`` and the FP8 products' saved inputs
        (``RunConfig``'s), and the framework chooses the checks behind its error bar.

    config : RunConfig, optional
        One run as every axis's only value (``RunConfig.plan_keywords``; ``gpus`` its
        ``t cp p d``); axes also given here (``t``, ``p``, ``microbatch``, ``m``,
        ``recompute``, ``schedules``, ``cp``, ``ep``; not None) replace its value, ``d``
        following from ``gpus``; any other run keyword given beside it is refused (the
        ``RunConfig`` holds it).
    t, p : int or list of int, optional
        The columns' names for ``tp`` and ``pp`` (either spelling; not both).
    reduce_bytes : float
        Bytes per gradient in the data-parallel reduction: 4 (fp32, Megatron's default) or 2
        (fp16 training without fp32 accumulation, or ``--grad-reduce-in-bf16``).
    train_metrics : int
        Metrics on each microbatch's logits after its backward (``RunConfig``'s; default 0).
    noise : fastpp.Noise, optional
        Also run each configuration's Monte Carlo (``fastpp.simulate`` with ``noise``,
        ``samples`` and ``seed``) on its pipeline: the rows gain ``makespan_mean``,
        ``makespan_std``, ``makespan_p50``, ``makespan_p95`` and the step's
        ``step_time_mean``, ``step_time_p50``, ``step_time_p95`` (the makespan's plus the
        same gradient sync and optimizer step). Without it nothing changes.
    samples : int, optional
        Monte Carlo samples per configuration (with ``noise`` only: default 64).
    seed : int, default 0
        The Monte Carlo's seed (with ``noise``; common to every configuration).
    objective : {"mean", "p50", "p95", "mean+std"}, optional
        Order the rows that fit by this noisy step time (``"mean+std"``: ``step_time_mean +
        lam * makespan_std``) instead of by ``tokens_per_s``; needs ``noise``.
    lam : float, default 1
        The weight of the standard deviation in ``"mean+std"``, in [0, 1e6].

    Returns
    -------
    pandas.DataFrame
        ``PLAN_COLUMNS``: the configuration (``layout``: its layers per model chunk as a
        Megatron layout string), ``step_time`` (s: the pipeline's ``makespan``
        plus the exposed ``gradient_sync``: gradient reduction, ZeRO's all-gather and a tied
        embedding's all-reduce, plus the ``optimizer_step``), ``tokens_per_s``, ``mfu``
        (``Transformer.flops_per_token`` over the bf16 peak), ``tflops_per_gpu`` (Megatron's
        count, ``Transformer.megatron_flops_per_token``, per GPU and second),
        ``bubble_ratio`` and, on the GPU with the most bytes, ``parameter_bytes``,
        ``gradient_bytes``, ``optimizer_bytes``, ``activation_bytes`` (its activations at
        their peak, ``Result.peak_activations``, with its working set: with ``cp > 1`` one
        layer's K and V exchange buffers, ``stages.cp_buffer_bytes``, and with recomputation a
        recomputed layer's, ``stages.recomputed_bytes``, or on the last stage the loss's where
        it is larger, ``stages.loss_bytes``, as ``ModelCosts.working`` holds them per stage;
        at least what the training metrics hold, ``stages.metric_bytes``: not the largest
        device's
        ``peak_activations``, which a sweep row's ``peak_activations_max`` is) and their sum
        ``peak_memory``; ``expected_error`` (the step time's expected relative error from
        ``validate``'s residuals in the row's regime, ``fastpp.model.errorbar``), ``expected_bias``
        (the same checks' mean signed error of the step time: < 0 where they were predicted fast,
        their measured steps longer; it describes them and corrects nothing: left out in turn, most
        tables' rows came out worse corrected by the others' bias, ``errorbar.coverage``) and
        ``extrapolated`` ("" inside a validated regime, else the facts no validated row shares);
        ``expected_memory_error`` (the counted peak memory's expected relative error: the
        activations' error measured against the bytes PyTorch saves, ``fastpp.model.memorybar``,
        times their share, and the no-recomputation regime's on a recomputed layer's working
        set; no bar on what a run reserves: torchtitan's 18 H100 runs reserved 6-28% more than
        counted, the allocator's reserve and buffers, ``docs/fidelity.md``; NaN where not
        measured,
        ``memorybar.unmeasured``: MoE, MLA, ``cp > 1``, offloading, recompute modules other than
        ``core_attn``); ``fits``, and ``reason``: why the configuration cannot run or does not fit
        ("" if it does). With ``noise``, the ``NOISY`` columns too (NaN where the noise does
        not fit a row's pipeline, said in its reason). ``attrs``: ``"layouts"`` (whether
        layouts were asked for), ``"objective"`` (the one given),
        ``"microbatch_default"`` (the default microbatches tried, or None where
        ``microbatch`` was given) and, with ``noise``, ``"ranked"`` (what the rows are ranked
        by, in words: ``summary`` prints it).

    Raises
    ------
    ScheduleError
        For an unknown preset, a bad count, ``t`` not dividing the heads,
        a microbatch that does not divide the global batch, no factorization at all, a
        layout that does not parse or does not hold the model's layers, or both a layout
        and first or last counts; values of an axis no row could run (``ep`` or ``etp``
        other than 1 for a dense model, a ``replicate`` not dividing the GPUs, first and
        last counts past the layers); a noise that fits none of the planned pipelines, or
        more samples than the widest one's result can keep.
    """
    pd = require("pandas", "sweep", "fastpp.model.plan")
    tp, pp = _spelling(t, tp, "t", "tp"), _spelling(p, pp, "p", "pp")
    if config is not None:  # the one-object form: a thin layer over the keywords
        config = as_run(config)
        config_alone("plan", seq=seq, global_batch=global_batch, zero=zero,
                     sequence_parallel=sequence_parallel, gradient_overlap=gradient_overlap,
                     blocking_handoffs=blocking_handoffs, tp_overlap=tp_overlap, layout=layout,
                     first_layers=first_layers, last_layers=last_layers, etp=etp,
                     precision=precision, node_limit=node_limit, imbalance=imbalance,
                     cp_comm=cp_comm, zero3=zero3, overlap=overlap, dispatcher=dispatcher,
                     replicate=replicate, recipe=recipe, recompute_modules=recompute_modules,
                     fp8_cache=fp8_cache,
                     offload_modules=offload_modules, reduce_bytes=reduce_bytes,
                     recompute_method=recompute_method, recompute_layers=recompute_layers,
                     train_metrics=train_metrics, framework=framework)
        axes = {"tp": tp, "pp": pp, "microbatch": microbatch, "m": m, "recompute": recompute,
                "schedules": schedules, "cp": cp, "ep": ep}
        run = {**config.plan_keywords(), **{k: v for k, v in axes.items() if v is not None}}
        if recompute is not None and "selective" not in np.atleast_1d(recompute):
            run["recompute_modules"] = None  # (the config's act on selective rows alone)
        own = run.pop("gpus")  # (given, gpus replaces it and d follows)
        gpus = own if gpus is None else gpus
        return plan(model, gpus, hardware, link=link, capacity=capacity, workers=workers,
                    progress=progress, noise=noise, samples=samples, seed=seed,
                    objective=objective, lam=lam, **run)
    if gpus is None or seq is None or global_batch is None:
        raise ScheduleError(f"plan needs gpus, seq and global_batch, or config= (got gpus="
                            f"{gpus}, seq={seq}, global_batch={global_batch})")

    model = preset(MODELS, model, "model")
    hardware = preset(HARDWARE, hardware, "hardware")
    if link is not None:
        hardware = dataclasses.replace(hardware, network=preset(LINKS, link, "link"))
    # (RunConfig's bound: products of counts such as microbatch * d stay in int64)
    gpus, seq, global_batch = (positive_int(v, k, MAX_INT - 1) for k, v in (
        ("gpus", gpus), ("seq", seq), ("global_batch", global_batch)))
    capacity = _capacity(hardware, capacity)
    for name, value in (("sequence_parallel", sequence_parallel),
                        ("gradient_overlap", gradient_overlap),
                        ("blocking_handoffs", blocking_handoffs), ("tp_overlap", tp_overlap)):
        one_of(value, name, (False, True))
    one_of(zero3, "zero3", ZERO3_GATHERS)
    replicate = positive_int(replicate, "replicate", MAX_INT - 1)
    if gpus % replicate:  # (it divides d cp, which divide the GPUs: no row could run)
        raise ScheduleError(f"replicate must divide gpus={gpus} (got replicate={replicate})")
    one_of(framework, "framework", FRAMEWORKS)
    cp_comm = cp_comm_for(cp_comm, framework)
    reduce_bytes = check_reduce_bytes(reduce_bytes)  # (RunConfig's rule: 1e30 was priced)
    train_metrics = check_train_metrics(train_metrics)
    # (checked before it is compared: an array's == was NumPy's ambiguous truth)
    one_of(recompute_method, "recompute_method", RUN_METHODS)
    if recompute_method == OP_LEVEL:  # torchtitan's op-level policy: a recipe's terms
        if recipe is not None or recompute_modules is not None:
            raise ScheduleError(f"recompute_method='op' is torchtitan's op-level policy: give "
                                f"no recipe or recompute_modules (Megatron's) beside it (got "
                                f"recipe={recipe!r}, recompute_modules={recompute_modules!r})")
        recipe = Recipe(op_level=True)
    recompute_method, recompute_layers = _partial(recompute_method, recompute_layers,
                                                  recompute)
    refuse_expert_options(model, dispatcher=dispatcher, imbalance=imbalance,
                          node_limit=node_limit)
    shared = {"blocking_handoffs": bool(blocking_handoffs), "tp_overlap": bool(tp_overlap),
              "recompute_method": recompute_method, "recompute_layers": recompute_layers,
              "cp_comm": cp_comm, "zero3": zero3, "replicate": replicate,
              "framework": framework,
              "sequence_parallel": sequence_parallel,
              "reduce_bytes": reduce_bytes, "train_metrics": train_metrics,
              **_moe_pricing(node_limit, imbalance, model),
              **recipe_pricing(dispatcher, recipe, recompute_modules, fp8_cache,
                               offload_modules)}
    refuse_unpriced(model, shared["recipe"])
    workers = (os.cpu_count() or 1) if workers is None else positive_int(workers, "workers")
    progress = flag(progress, "progress")
    axes = _axes(model, hardware, gpus, global_batch, tp=tp, pp=pp, microbatch=microbatch,
                 cp=cp, overlap=overlap, recompute=recompute, ep=ep, etp=etp,
                 precision=precision, zero=zero, schedules=schedules)
    widest = max(t for t, *_ in axes["shapes"]) if axes["shapes"] else 1
    check_tp_overlap(tp_overlap, sequence_parallel, widest, f"t up to {widest}")
    # the modules act on the selective rows alone: without one they would price nothing
    if (recompute_modules is not None and recompute is not None
            and "selective" not in _nonempty(recompute, "recompute")):
        raise ScheduleError(f"recompute_modules must come with selective recomputation, "
                            f"the rows they act on: recompute must include 'selective' (got "
                            f"recompute={recompute!r} with recompute_modules="
                            f"{recompute_modules!r})")
    splits = _splits(model, layout, first_layers, last_layers)
    chunk_counts = _axis(m, "m", None)
    sched = [(name, k) for name in axes.pop("schedules")
             for k in (chunk_counts or SCHEDULES[name].m_choices)]
    cols = _grid(axes, sched, len(splits))
    samples, seed = check_noise(noise, samples, seed, DEFAULT_SAMPLES, "configuration",
                                rows="plan")
    if objective is not None:
        one_of(objective, "objective", OBJECTIVES[1:])
    check_lam(lam)  # (before the simulation, and where unused, as optimize does)
    if objective is not None and noise is None:
        raise ScheduleError(f"objective={objective!r} ranks by the step time under noise: give "
                            f"noise= too (got noise=None)")
    rows = _simulate_in_parts(model, hardware, seq, shared, global_batch, cols, splits,
                              capacity, bool(gradient_overlap), reduce_bytes, workers,
                              progress, None if noise is None else (noise, samples, seed))
    frame = _table(pd, model, hardware, (seq, gpus, framework), cols, rows, shared["recipe"],
                   shared["recompute_method"] in PARTIAL_DEFAULT)
    if noise is not None:
        _fits_some(frame, noise)
    rank = -frame["tokens_per_s"].fillna(-1).to_numpy()
    if objective is not None:
        rank = objective_values(frame, objective, lam, "step_time").fillna(np.inf).to_numpy()
    order = np.lexsort((rank, ~frame["fits"].to_numpy()))
    frame = frame.iloc[order].reset_index(drop=True)
    frame.attrs["layouts"] = len(splits) > 1 or splits[0] != (None, None, None)
    frame.attrs["objective"] = objective
    # the default microbatches (1, 2, 4) suit large models; a small one's best lies beyond
    # them, which the summary says where the best run sits at the largest tried
    frame.attrs["microbatch_default"] = (sorted(int(b) for b in axes["microbatch"])
                                         if microbatch is None else None)
    if noise is not None:  # what the summary says its rows are ranked by
        frame.attrs["ranked"] = (f"by {objective}" if objective != "mean+std" else
                                 f"by mean + {lam:g} std") + f" under {noise!r}" if objective \
            else f"by tokens per second without noise (under {noise!r} in the mean and p95)"
    return frame


def _fits_some(frame, noise) -> None:
    """A noise that no simulated pipeline has the devices, stages or links of is a mistake
    (each row would say so, and the ranking would be the noiseless one): refused."""
    ran = frame[frame["step_time"].notna()]
    if len(ran) and ran["step_time_p95"].isna().all():
        widest = ran.loc[ran["p"].idxmax()]  # (the reason of the most devices and links)
        why = widest["reason"].partition("noise does not fit it: ")[2]
        raise ScheduleError(f"{why} (as in every planned pipeline, up to p = {widest['p']}: "
                            f"the noise fits none of them)")


def _capacity(hardware, capacity) -> float:
    """Bytes per GPU: the hardware's, or one number given."""
    capacity = numbers(hardware.memory_bytes if capacity is None else capacity, "capacity",
                       strict=True)
    if capacity.ndim:
        raise ScheduleError(f"capacity must be one number of bytes per GPU (got shape "
                            f"{capacity.shape})")
    capacity = float(capacity)
    if capacity < 1e-6 * hardware.memory_bytes:  # (the CLI's --capacity-gb is in GB)
        raise ScheduleError(f"capacity must be bytes per GPU, at least a millionth of "
                            f"{hardware.name}'s {hardware.memory_bytes:g} (got {capacity:g}; "
                            f"{capacity:g} GB is {capacity * 1e9:g})")
    return capacity


def _axes(model, hardware, gpus, global_batch, *, tp, pp, microbatch, cp, overlap, recompute,
          ep, etp, precision, zero, schedules) -> dict:
    """Each axis of the grid as a checked list (the default where not given): ``shapes`` the
    ``(t, cp, p, d)`` that multiply to ``gpus``, the others as named, ``schedules`` names."""
    tps = _axis(tp, "tp", [x for x in divisors(gpus, hardware.gpus_per_node)
                           if model.heads % x == 0 and model.kv_heads % x == 0])
    for x in tps:  # an explicit tp beyond a node is priced (its collectives on the network)
        if model.heads % x or model.kv_heads % x:
            raise ScheduleError(f"tp must divide the heads {model.heads} and KV heads "
                                f"{model.kv_heads} (got tp={x}){REPLICATED}")
    pps = _axis(pp, "pp", divisors(gpus, model.layers))
    mbs = _axis(microbatch, "microbatch", [x for x in (1, 2, 4) if global_batch % x == 0])
    for x in mbs:
        if global_batch % x:
            raise ScheduleError(f"microbatch must divide global_batch={global_batch} (got "
                                f"microbatch={x})")
    cps = _axis(cp, "cp", [1])
    overlaps = _nonempty(overlap, "overlap")
    for x in overlaps:
        one_of(x, "overlap", (False, True))
    rcs = RECOMPUTE if recompute is None else _nonempty(recompute, "recompute")
    for x in rcs:
        one_of(x, "recompute", RECOMPUTE)
    eps = _axis(ep, "ep", [x for x in divisors(gpus, model.experts) if model.experts % x == 0]
                if model.moe else [1])
    etps = _axis(etp, "etp", [1])
    for axis, values in (("ep", eps), ("etp", etps)):  # (a 1 beside others: their reasons)
        if not model.moe and 1 not in values:
            got = values[0] if len(values) == 1 else list(values)
            raise ScheduleError(f"{axis} must be 1 for a dense model ({model.name} has no "
                                f"experts; got {axis}={got})")
    precisions = [hardware.precision] if precision is None else _nonempty(precision,
                                                                          "precision")
    for x in precisions:
        one_of(x, "precision", PRECISIONS)
        hardware.with_precision(x)  # raises for fp8 without an fp8 peak
    zeros = _nonempty(zero, "zero")
    for x in zeros:
        one_of(x, "zero", ZERO)
    # by default no schedule that needs experts on a dense model: it would only give reasons
    names = ([k for k, spec in SCHEDULES.items()
              if not spec.forward_only and (model.moe or not spec.expert_overlap)]
             if schedules is None else _nonempty(schedules, "schedules"))
    for name in names:
        if get_spec(name, "schedules").forward_only:
            raise ScheduleError(f"schedules must be training schedules (got {name!r})")
    shapes = [(t, cp, p, gpus // (t * cp * p)) for t in tps for cp in cps for p in pps
              if gpus % (t * cp * p) == 0]
    if not shapes:
        # an axis none of whose degrees divides the GPUs is the fault (a degree that does
        # not, beside others that do, only has no shape: explain's neighbours ask for such)
        for axis, values in (("tp", tps), ("cp", cps), ("pp", pps)):
            if all(gpus % x for x in values):
                got = values[0] if len(values) == 1 else list(values)
                raise ScheduleError(f"{axis} must divide gpus={gpus} (got {axis}={got})")
        raise ScheduleError(f"gpus={gpus} has no factorization t * cp * p * d with t in {tps}, "
                            f"cp in {cps} and p in {pps}")
    return {"shapes": shapes, "ep": eps, "etp": etps,
            "precision": _unique(PRECISIONS.index(q) for q in precisions),
            "microbatch": mbs, "recompute": _unique(RECOMPUTE.index(r) for r in rcs),
            "zero": _unique(zeros), "overlap": _unique(int(o) for o in overlaps),
            "schedules": _unique(names)}


def _gb(x: float, more: int = 0) -> str:
    """Bytes as GB for a reason: 0.0042, 93.5, 80, 1,522 (a toy's capacity under 0.1 GB read
    as 0), with ``more`` digits."""
    if x < 0.1 * GB:
        return f"{x / GB:.{2 + more}g}"
    return f"{x / GB:,.{1 + more}f}".rstrip("0").rstrip(".")


def _over(need: float, device: int, capacity: float) -> str:
    """The reason of a configuration that needs ``need`` bytes on ``device``, over
    ``capacity``, in GB with the digits that tell the two apart (80.04 GB had read "needs 80
    GB ... > capacity 80 GB"), in bytes where six more digits do not."""
    more = next((k for k in range(6) if _gb(need, k) != _gb(capacity, k)), None)
    if more is None:
        return f"needs {need:,.0f} bytes on device {device} > capacity {capacity:,.0f} bytes"
    return f"needs {_gb(need, more)} GB on device {device} > capacity {_gb(capacity, more)} GB"


def _unique(values) -> list:
    """Each value once, in order: a repeated one (``pp=[2, 2]``) gave each of its rows twice."""
    return list(dict.fromkeys(values))


def _grid(axes: dict, sched: list, n_splits: int) -> dict[str, np.ndarray]:
    """The configurations, one column per axis: every combination of ``axes``, each
    ``(schedule, m)`` of ``sched`` (``which``, ``sid``, ``m``) and each layout ``split``.

    Each schedule runs at each chunk count and every p, p = 1 too: there the times agree but
    the memory does not (GPipe keeps every microbatch, 1F1B one)."""
    grid = np.array([(t, cp, p, d, e, et, q, b, r, z, o, i, k)
                     for t, cp, p, d in axes["shapes"] for e in axes["ep"]
                     for et in axes["etp"] for q in axes["precision"]
                     for b in axes["microbatch"] for r in axes["recompute"]
                     for z in axes["zero"] for o in axes["overlap"]
                     for i in range(len(sched)) for k in range(n_splits)],
                    np.int64).reshape(-1, 13)
    cols = {k: grid[:, i] for i, k in enumerate(("t", "cp", "p", "d", "ep", "etp", "precision",
                                                  "microbatch", "recompute", "zero", "overlap",
                                                  "which", "split"))}
    cols["sid"] = np.array([SCHEDULES[name].sid for name, _ in sched], np.int64)[cols["which"]]
    cols["m"] = np.array([k for _, k in sched], np.int64)[cols["which"]]
    return cols


def _table(pd, model, hardware, run, cols, rows, recipe, partial: bool):
    """The plan's frame (``PLAN_COLUMNS``, and ``NOISY`` under noise), in grid order;
    ``run`` the call's ``seq``, ``gpus`` and ``framework``;
    ``recipe`` the memory recipe priced (``fastpp.model.recipes``, or None); ``partial``
    whether full recomputation covers only some layers."""
    return pd.DataFrame({
        "model": model.name, "gpus": run[1], "t": cols["t"], "cp": cols["cp"], "p": cols["p"],
        "d": cols["d"], "ep": cols["ep"], "etp": cols["etp"],
        "schedule": np.array(list(SCHEDULES), object)[cols["sid"]], "m": cols["m"],
        "microbatch": cols["microbatch"], "n": rows["n"],
        "recompute": np.array(RECOMPUTE, object)[cols["recompute"]], "zero": cols["zero"],
        "overlap": cols["overlap"].astype(bool),
        "precision": np.array(PRECISIONS, object)[cols["precision"]],
        **{k: rows[k] for k in ("layout", *NUMBERS)},
        **_error_bars(model, hardware, run, cols["t"]),
        "expected_memory_error": _memory_error(model, cols, rows, recipe, partial),
        **{k: rows[k] for k in ("fits", "reason")},
        **{k: rows[k] for k in NOISY if k in rows}})


def _noisy(sid, p, n, m, fields, first, V, outside, noisy,
           progress: bool) -> dict[str, np.ndarray]:
    """``NOISY`` columns of the configurations run: each pipeline's Monte Carlo on its own
    stage costs, and the step's figures (the makespan's plus what lies ``outside`` it)."""
    values, at = engine.cost_layout(fields, len(sid), first, V)
    costs = [costs_of(values, at, i) for i in range(len(sid))]
    refused = np.full(len(sid), "", object)  # a noise of devices a shorter pipeline lacks
    out = noise_rows(np.array(list(SCHEDULES), object)[sid], p, n, m, p, costs, *noisy,
                     refused=refused, progress=progress)
    out["noise_refused"] = refused
    for q in ("mean", "p50", "p95"):
        out[f"step_time_{q}"] = out[f"makespan_{q}"] + outside
    return out


def _error_bars(model, hardware, run, t) -> dict[str, np.ndarray]:
    """``ERROR_COLUMNS`` of every row: of the ``t`` values' regimes (the rest is the call's
    ``run``: its ``seq``, ``gpus`` and ``framework``)."""
    seq, gpus, framework = run
    bars = {x: error_bar(regime(model, hardware, seq, x, gpus, framework=framework))
            for x in np.unique(t).tolist()}
    return {"expected_error": np.array([bars[x].expected for x in t.tolist()]),
            "expected_bias": np.array([bars[x].bias for x in t.tolist()]),
            "extrapolated": np.array([bars[x].extrapolated for x in t.tolist()], object)}


def _memory_error(model, cols, rows, recipe, partial: bool = False) -> np.ndarray:
    """``expected_memory_error`` of every row: its stored activations' measured error
    (``memorybar.activation_error`` of its recomputation; with ``partial`` recomputation the
    no-recomputation regime's, whose whole layers hold most of them) times their share of
    the peak memory, plus the no-recomputation regime's error times the share of a
    recomputed layer's working set (``stages.recomputed_bytes``; the rest of a device's
    working set, context parallelism's buffers or the loss's, and the weights, gradients and
    optimizer states are counted, no bar: see ``memorybar`` for the gradients' convention;
    where the loss's working set outweighs the recomputed layer's, that layer's bar is kept,
    a little wide);
    NaN where not measured (``memorybar.unmeasured``)."""
    rc, cp = cols["recompute"], cols["cp"]
    bars = np.array([activation_error(model, r) for r in RECOMPUTE])
    stored = np.where(partial & (rc == RECOMPUTE.index("full")), 0, rc)
    with np.errstate(invalid="ignore", divide="ignore"):
        error = (bars[stored] * (rows["activation_bytes"] - rows["working_bytes"])
                 + bars[0] * rows["recomputed_bytes"]) / rows["peak_memory"]
    for r, c in {(int(r), int(c)) for r, c in zip(rc, cp, strict=True)}:
        if unmeasured(model, RECOMPUTE[r], c, recipe):
            error[(rc == r) & (cp == c)] = np.nan
    return error


def _partial(method, layers, recompute):
    """``plan``'s ``recompute_method`` and ``recompute_layers`` as ``RunGrid`` takes them:
    both None for every layer its own checkpoint (None, or "uniform" with one layer a
    group), the framework's default count where none is given; a method without
    full-recomputation rows is refused, as the modules are."""
    one_of(method, "recompute_method", RUN_METHODS)
    if method == OP_LEVEL:
        if layers is not None:
            raise ScheduleError(f"recompute_layers counts the layers full recomputation covers: "
                                f"give none with recompute_method='op' (got recompute_layers="
                                f"{layers!r})")
        if recompute is not None and "selective" not in _nonempty(recompute, "recompute"):
            raise ScheduleError(f"recompute_method='op' acts on recompute='selective' rows: "
                                f"recompute must include 'selective' (got recompute="
                                f"{recompute!r})")
        return None, None
    if method is None and layers is not None:
        raise ScheduleError(f"recompute_layers needs recompute_method 'uniform', 'block' or "
                            f"'interval' (got recompute_layers={layers!r} alone)")
    if method is None or (method == "uniform" and positive_int(
            1 if layers is None else layers, "recompute_layers") == 1):
        return None, None
    if recompute is not None and "full" not in _nonempty(recompute, "recompute"):
        raise ScheduleError(f"recompute_method acts on recompute='full' rows: recompute must "
                            f"include 'full' (got recompute={recompute!r} with "
                            f"recompute_method={method!r})")
    return method, PARTIAL_DEFAULT[method] if layers is None else layers  # (uniform: > 1)


def _spelling(short, long, short_name: str, long_name: str):
    """One of two spellings of an axis (the column's ``t`` or the older ``tp``), not both."""
    if short is not None and long is not None:
        raise ScheduleError(f"give {short_name} or {long_name}, not both (got {short_name}="
                            f"{short!r}, {long_name}={long!r})")
    return long if short is None else short


def _as_list(value, name: str) -> list:
    """An axis's values: a list, tuple, range, flat array or pandas Series or Index, else one
    (a 0-d array too, as ``np.int64(2)`` is)."""
    if hasattr(value, "__array__") and not isinstance(value, np.ndarray | np.generic):
        value = np.asarray(value)  # (a range or a Series was one value: unhashable)
    if isinstance(value, np.ndarray) and value.ndim != 1:
        if value.ndim:  # (each row had been taken as one value)
            raise ScheduleError(f"{name} must be one value or a flat list of them (got an "
                                f"array of shape {value.shape})")
        value = value.item()  # (iterating it raised numpy's TypeError)
    return list(value) if isinstance(value, list | tuple | range | np.ndarray) else [value]


def _moe_pricing(node_limit, imbalance, model) -> dict:
    """``stage_table``'s MoE knobs, checked. The busiest of ``ep`` ranks receives at most every
    token, ``ep`` times the mean, and ``ep`` is at most the experts: a larger imbalance is no
    routing (1e308 once overflowed into a 'deadlocked' timeline)."""
    if node_limit is not None:
        positive_int(node_limit, "node_limit")
    return {"node_limit": node_limit, "imbalance": check_imbalance(imbalance, model)}


def _nonempty(value, name) -> list:
    values = _as_list(value, name)
    if not values:
        raise ScheduleError(f"{name} must hold at least one value (got an empty list)")
    return values


def _axis(value, name, default) -> list[int]:
    if value is None:
        return default
    return _unique(positive_ints(_as_list(value, name), name).tolist())


def _splits(model, layout, first_layers, last_layers) -> list[tuple]:
    """The layer splits to try: ``(Layout, None, None)`` for each layout given, else
    ``(None, first, last)`` for each pair of counts (None: as even as the rest)."""
    if layout is not None:
        if first_layers is not None or last_layers is not None:
            raise ScheduleError(f"give layout or first_layers/last_layers, not both (got "
                                f"layout={layout!r}, first_layers={first_layers!r}, "
                                f"last_layers={last_layers!r})")
        # each once, as every other axis (two alike gave each row twice)
        given = list(dict.fromkeys(as_layout(x) for x in _nonempty(layout, "layout")))
        for x in given:  # whatever the configuration, these must hold
            check_layout(x, model.layers, x.stages, model.mtp_depth)
        return [(x, None, None) for x in given]
    ends = [[None] if x is None else _counts(x, name)
            for x, name in ((first_layers, "first_layers"), (last_layers, "last_layers"))]
    pairs = [(None, a, z) for a in ends[0] for z in ends[1]]
    if all((a or 0) + (z or 0) > model.layers for _, a, z in pairs):  # (no row could run)
        raise ScheduleError(f"first_layers + last_layers must be at most the layers "
                            f"{model.layers} (got first_layers={first_layers!r}, "
                            f"last_layers={last_layers!r})")
    return pairs


def _counts(value, name) -> list[int]:
    values = _nonempty(value, name)
    for x in values:
        if isinstance(x, bool) or not isinstance(x, int | np.integer) or x < 0:
            raise ScheduleError(f"{name} must be integers >= 0 (got {x!r})")
    return [int(x) for x in values]


def _layouts(model, chunks, split, splits, reason) -> tuple[np.ndarray, list]:
    """Per configuration: the index of its ``Layout`` in the list returned (one per distinct
    chunk count and split; -1 where it cannot run), with the reason where the split does not
    fit its chunks."""
    index, found = np.full(len(chunks), -1, np.int64), []
    ok = reason == ""
    for c, k in sorted(set(zip(chunks[ok].tolist(), split[ok].tolist(), strict=True))):
        mine = np.flatnonzero((chunks == c) & (split == k) & ok)
        given, first, last = splits[k]
        try:
            if given is None:
                given = even_layers(model.layers, c, first, last)
            else:
                check_layout(given, model.layers, c, model.mtp_depth)
        except ScheduleError as error:
            reason[mine] = str(error)
            continue
        index[mine] = len(found)
        found.append(given)
    return index, found


def _stages(model, hardware, grid, cols, run, chunks, which, layouts):
    """The stages of the configurations ``run`` of ``grid`` in one flat table: per
    configuration ``V`` and where its stages start, per stage its configuration, model chunk
    and costs (``stage_table``), which configurations have a stage that takes no time, and
    which stages hold the embedding and which the loss."""
    grid = grid.take(run)
    p, m = grid.p, grid.m
    sid, chunks, precision = (x[run] for x in (cols["sid"], chunks, cols["precision"]))
    V = engine.stages(sid, p, m)
    config = np.repeat(np.arange(run.size), V)
    first = np.r_[0, np.cumsum(V)[:-1]].astype(np.int64)
    local = np.arange(V.sum()) - first[config]
    chunk = local % chunks[config]
    # a pair's backward half: the device's other stage where each device holds stages r and
    # V-1-r, else the stage itself (fastpp.model.pair_partner)
    partner = np.where(mirrored(batch.PLACEMENT_CODE[sid], p, m)[config],
                       first[config] + V[config] - 1 - local, np.arange(V.sum()))
    stage_layout = which[run][config]
    layers, embedding, loss, moe, mtp = (np.empty(chunk.size, dtype) for dtype in
                                         (float, bool, bool, float, float))
    for k, x in enumerate(layouts):
        mine = np.flatnonzero(stage_layout == k)
        layers[mine] = np.array(x.layers)[chunk[mine]]
        embedding[mine] = np.array(x.embedding)[chunk[mine]]
        loss[mine] = np.array(x.loss)[chunk[mine]]
        kinds = chunk_kinds(model, x.layers, x.loss, x.mtp)
        moe[mine], mtp[mine] = kinds[0][chunk[mine]], kinds[1][chunk[mine]]
    table = None
    for q in np.unique(precision):  # a table per precision, each configuration's kept
        one = stage_table(model, hardware, grid.replace(precision=PRECISIONS[q]),
                          config=config, layers=layers, embedding=embedding, loss=loss,
                          moe_layers=moe, mtp=mtp, partner=partner,
                          placement=batch.PLACEMENT_CODE[sid][config])
        if table is None:
            table = one
            continue
        mine = precision == q
        for key, value in one.items():
            table[key] = np.where(mine[config] if value.size == config.size else mine, value,
                                  table[key])
    idle = np.zeros(run.size, bool)
    np.logical_or.at(idle, config, idle_stages(table))
    return V, config, first, chunk, table, idle, (embedding, loss, mtp)


def _simulate_in_parts(model, hardware, seq, shared, global_batch, cols, splits, capacity,
                       grad_overlap, reduce_bytes, workers, progress, noisy):
    """``_simulate`` of every configuration in ``cols``, ``PLAN_PART`` at a time, with a bar
    past a second where ``progress`` (a plan of a million configurations ran 90 s without a
    word)."""
    count = len(cols["t"])
    bar = progress_bar(count, progress and count > PLAN_PART, unit="config", desc="plan",
                       delay=1.0)
    parts = []
    try:
        for start in range(0, count, PLAN_PART):
            part = {k: v[start:start + PLAN_PART] for k, v in cols.items()}
            # the configurations as stage_table reads them (a precision at a time: _stages)
            grid = RunGrid(seq=seq, **{k: part[k] for k in PER_CONFIGURATION if k != "overlap"},
                           overlap=part["overlap"].astype(bool), **shared)
            parts.append(_simulate(model, hardware, grid, global_batch, part, splits, capacity,
                                   grad_overlap, reduce_bytes, workers, progress, noisy))
            bar.update(len(part["t"]))
    finally:
        bar.close()
    return parts[0] if len(parts) == 1 else {
        k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def _simulate(model, hardware, grid, global_batch, cols, splits, capacity, grad_overlap,
              reduce_bytes, workers, progress, noisy=None) -> dict[str, np.ndarray]:
    """Reasons, costs, the kernel and the bytes of every configuration in ``cols`` (``grid``
    as ``stage_table`` reads them); ``reduce_bytes`` per gradient in the step's reduction."""
    seq = grid.seq
    count = len(cols["t"])
    t, p, d, b, m, sid = (cols[k] for k in ("t", "p", "d", "microbatch", "m", "sid"))
    n, chunks, reason = _shape(model, global_batch, t, p, d, b, m, sid,
                               (cols["ep"], cols["etp"]), cols["cp"], grid.imbalance,
                               grid.sequence_parallel)
    _context_and_overlap_reasons(seq, cols, sid, reason, grid.sequence_parallel,
                                 grid.dispatcher)
    replicas = cols["cp"] * d
    edp = t * replicas // (cols["etp"] * cols["ep"]) if model.moe else None
    groups = replicate_reason(grid.replicate, cols["zero"], replicas, edp)
    reason[:] = np.where((reason == "") & (groups != ""), groups, reason)
    which, layouts = _layouts(model, chunks, cols["split"], splits, reason)
    out = {k: np.full(count, np.nan) for k in (*NUMBERS, "recomputed_bytes", "working_bytes",
                                                 *(NOISY if noisy else ()))}
    out.update(n=n, fits=np.zeros(count, bool), reason=reason,
               layout=np.array([*map(str, layouts), ""], object)[which])
    run = np.flatnonzero(reason == "")
    if run.size == 0:
        return out
    V, config, first, chunk, table, idle, ends = _stages(
        model, hardware, grid, cols, run, chunks, which, layouts)
    if idle.any():  # a stage without work cannot run: its configurations get the reason
        reason[run[idle]] = idle_reason()
        run = run[~idle]
        if run.size == 0:
            return out
        V, config, first, chunk, table, _, ends = _stages(
            model, hardware, grid, cols, run, chunks, which, layouts)
    t, p, d, m, sid, n, chunks = (x[run] for x in (t, p, d, m, sid, n, chunks))
    ep, etp = cols["ep"][run], cols["etp"][run]
    cp = cols["cp"][run]
    zero3 = grid.zero3
    fields = {k: v for k, v in table.items() if k in FIELDS}
    # on an empty kernel cache the point plans' kernels compile in a second process
    warm_up(announce=progress, schedules=[batch.SPECS[s].name for s in np.unique(sid)],
            plans=True)
    rows = engine.run(sid, p, n, m, p, fields, first=first, V=V, workers=workers, peaks=True,
                      share=batch.PLAN_SHARE, keep=True)
    if np.any(rows.status != batch.OK):
        raise ScheduleError(f"the kernel rejected a generated configuration (status "
                            f"{rows.status[rows.status != batch.OK][0]}): a fastpp bug, please "
                            f"report it")
    slot = rows.peak_at[config] + _stage_devices(sid, p, m, first, chunk.size)
    # beyond the stored activations, each device's working set (stage_table's: a recomputed
    # layer's with context parallelism's buffers, or on a last stage the loss's)
    recomputed = device_working_bytes(table["recomputed"], slot, rows.peaks.size)
    working = device_working_bytes(table["working"], slot, rows.peaks.size)
    # and at least what the training metrics hold after a backward (stages.device_held_bytes,
    # here with the devices' working sets kept for the rows)
    after = device_working_bytes(table["after"], slot, rows.peaks.size)
    peaks, peak_at = np.maximum(rows.peaks + working, after), rows.peak_at
    owner = np.repeat(np.arange(run.size), p)
    edp = t * cp * d // (etp * ep)
    params, experts = device_parameters(model, slot, peaks.size, table["params"],
                                        table["expert_params"], *ends[:2], t[config],
                                        ends[2])
    weights, grads, optimizer = device_memory(
        model, params, experts, t[owner], (d * cp)[owner], edp[owner], cols["zero"][run][owner],
        zero3, grid.replicate, reduce_bytes, optimizer_bytes(grid.recipe))
    total = weights + grads + optimizer + peaks
    padded = np.full((run.size, int(p.max())), -np.inf)  # the device with the most bytes
    padded[owner, np.arange(peaks.size) - peak_at[owner]] = total
    worst = peak_at + np.argmax(padded, axis=1)
    # outside the pipeline: the gradient reduction, ZeRO's all-gather, the tied embedding's
    # all-reduce and the optimizer step of the fullest device, each backward's window
    window = np.bincount(slot, weights=(table["b"] / m[config]), minlength=peaks.size)
    # a tied weight all-reduces between the devices of a model copy's two ends; where one
    # device holds both (V-shaped placements) it is one weight
    apart = np.zeros(run.size, bool)
    np.logical_or.at(apart, config[ends[0]], slot[ends[0]] != slot[ends[1]])
    tied = model.tied_embeddings & apart
    terms = step_terms(hardware, np.maximum.reduceat(params, peak_at), t, d * cp,
                       cols["zero"][run], overlap=grad_overlap,
                       window=np.minimum.reduceat(window, peak_at),
                       embedding_params=tied * model.vocab * model.hidden / t,
                       embedding_per_node=np.where(pipeline_spans(hardware, t * cp, d, p), 1, 2),
                       zero3=zero3, reduce_bytes=reduce_bytes, replicate=grid.replicate,
                       gpus=t * cp * d * p)
    if model.moe:  # the routed experts' gradients reduce over edp, ranks etp x ep apart
        more = step_terms(hardware, np.maximum.reduceat(experts, peak_at), etp * ep, edp,
                          cols["zero"][run], overlap=grad_overlap,
                          window=np.minimum.reduceat(window, peak_at), zero3=zero3,
                          reduce_bytes=reduce_bytes, host_step=False, replicate=grid.replicate,
                          gpus=t * cp * d * p)
        terms = {k: v + more[k] for k, v in terms.items()}
    sync = terms["gradient_sync"] + terms["parameter_gather"] + terms["embedding_sync"]
    makespan = rows.out[:, batch.MAKESPAN]
    step = makespan + sync + terms["optimizer_step"]
    tokens = global_batch * seq / step
    values = {"step_time": step, "makespan": makespan, "gradient_sync": sync,
              "optimizer_step": terms["optimizer_step"],
              "tokens_per_s": tokens,
              "mfu": tokens * model.flops_per_token(seq) / (t * cp * p * d) / hardware.peak_flops,
              "tflops_per_gpu": tokens * model.megatron_flops_per_token(seq) / (t * cp * p * d)
              / 1e12,
              "bubble_ratio": rows.out[:, batch.BUBBLE], "activation_bytes": peaks[worst],
              "parameter_bytes": weights[worst], "gradient_bytes": grads[worst],
              "optimizer_bytes": optimizer[worst], "peak_memory": total[worst],
              "recomputed_bytes": recomputed[worst], "working_bytes": working[worst]}
    refused = None
    if noisy is not None:
        values.update(_noisy(sid, p, n, m, fields, first, V, step - makespan, noisy,
                             progress))
        refused = values.pop("noise_refused")
    for k, arr in values.items():
        out[k][run] = arr
    fits = total[worst] <= capacity
    out["fits"][run] = fits
    out["reason"][run[~fits]] = [
        _over(x, r, capacity)
        for x, r in zip(total[worst][~fits], (worst - peak_at)[~fits], strict=True)]
    if refused is not None:  # (its step time stands; its noisy columns are NaN)
        said = refused != ""
        out["reason"][run[said]] = [x if not r else f"{r}; {x}" for r, x in
                                    zip(out["reason"][run[said]], refused[said], strict=True)]
    return out


def _context_and_overlap_reasons(seq, cols, sid, reason, sequence_parallel,
                                 dispatcher: str) -> None:
    """Rows whose ``cp`` does not split ``seq`` into ``2 cp`` chunks, or whose ``t`` does not
    split each ``seq / cp`` under ``sequence_parallel``, and rows asking the pair overlap where
    it cannot run (``fastpp.model.overlap_reason``), get their reason."""
    for t, cp in np.unique(np.stack([cols["t"], cols["cp"]], axis=1), axis=0).tolist():
        mine = np.flatnonzero((cols["t"] == t) & (cols["cp"] == cp) & (reason == ""))
        try:
            check_cp(seq, cp)
            if sequence_parallel:
                check_sequence_parallel(seq, t, cp)
        except ScheduleError as error:
            reason[mine] = str(error)
    # a schedule that is Megatron's overlap itself: its rules hold whether or not it is priced
    combined = np.array([spec.expert_overlap for spec in batch.SPECS])[sid]
    ask = (cols["overlap"] == 1) | combined
    rows = np.flatnonzero(ask & (reason == ""))  # each row has one key: one pass suffices
    keys = np.stack([sid, cols["overlap"], cols["recompute"], cols["cp"], cols["ep"]],
                    axis=1)[rows]
    unique, which = np.unique(keys, axis=0, return_inverse=True)
    for k, (s, asked, r, cp, e) in enumerate(unique.tolist()):
        spec = batch.SPECS[s]
        text = overlap_reason(spec.name, spec.pairs or not asked, RECOMPUTE[r],
                              cp if asked else 1, e, dispatcher)
        if text:
            reason[rows[which.reshape(-1) == k]] = text


def _shape(model, global_batch, t, p, d, b, m, sid, cols_ep_etp, cp, imbalance=1.0,
           sequence_parallel=True):
    """Per configuration: ``n``, the model chunks, and why it cannot run ("" if it can)."""
    per_replica = b * d
    n = np.where(global_batch % per_replica == 0, global_batch // per_replica, 0)
    reason = np.full(len(t), "", dtype=object)
    reason[n == 0] = [f"global_batch={global_batch} must be a multiple of microbatch x d = "
                      f"{x}" for x in per_replica[n == 0]]
    chunks = p * m  # a two-direction schedule holds these chunks twice
    if model.moe or np.any(cols_ep_etp[0] > 1) or np.any(cols_ep_etp[1] > 1):
        why = expert_reasons(model, t, d, *cols_ep_etp, cp, imbalance, sequence_parallel)
        bad = (reason == "") & (why != "")
        reason[bad] = why[bad]
    too_deep = (reason == "") & (chunks > model.layers)
    reason[too_deep] = [f"layers={model.layers} must be at least the model chunks {x}"
                        for x in chunks[too_deep]]
    for s in np.unique(sid):
        mine = np.flatnonzero((sid == s) & (reason == ""))
        if mine.size:
            reason[mine] = batch.SPECS[s].reasons(p[mine], n[mine], m[mine], p[mine])
    return n, chunks, reason


def _stage_devices(sid, p, m, first, stages) -> np.ndarray:
    """The device of every stage in the flat stage table (one stage map per schedule, p, m)."""
    device = np.empty(stages, np.int64)
    for key in set(zip(sid.tolist(), p.tolist(), m.tolist(), strict=True)):
        mine = np.flatnonzero((sid == key[0]) & (p == key[1]) & (m == key[2]))
        stage_device = stage_map(int(batch.PLACEMENT_CODE[key[0]]), key[1], key[2])
        at_stage = (first[mine][:, None] + np.arange(len(stage_device))).reshape(-1)
        device[at_stage] = np.tile(stage_device, mine.size)
    return device


def _larger_microbatches(df, best) -> list[str]:
    """A note where the best run that fits uses the largest of the default microbatches plan
    tried (``attrs["microbatch_default"]``) and a larger one would divide the batch: a small
    model's best lies beyond them."""
    tried = df.attrs.get("microbatch_default")
    if not tried or best.microbatch != tried[-1]:
        return []
    batch = int(best.microbatch * best.d * best.n)
    # the next two sizes up that still divide the batch over the replicas
    larger = [b for b in range(tried[-1] + 1, 4 * tried[-1] + 1)
              if batch % (b * best.d) == 0][:2]
    if not larger:
        return []
    return ["", f"note: the best run that fits uses the largest microbatch tried "
                f"({best.microbatch} of {', '.join(map(str, tried))}): microbatch="
                f"{[*tried, *larger]} (--microbatch {' '.join(map(str, [*tried, *larger]))}) "
                f"tries larger"]


def summary(df, top: int = 10) -> str:
    """The fastest configurations that fit, and the faster ones that do not (closest to
    fitting first) with their reasons: text for a terminal. ``error`` is the step time's
    expected error (``expected_error``), starred where the row is extrapolated. Where the best
    run that fits takes the largest of plan's default microbatches, a note gives the next
    sizes to try."""
    top = nonnegative_int(top, "top")  # pandas' head(-1) would print all but the last
    cols = (f"{'t':>2} {'p':>3} {'d':>3} {'schedule':<17}{'m':>2} {'mb':>3} {'n':>5} "
            f"{'recompute':<10}{'step s':>8} {'tokens/s':>10} {'MFU':>6} {'bubble':>7} "
            f"{'act GB':>7} {'GB/GPU':>7} {'error':>7}")

    noisy = "step_time_p95" in df  # a plan under noise: its step's mean and p95 are shown
    if noisy:
        cols = cols.replace(f"{'step s':>8}", f"{'step s':>8} {'mean s':>7} {'p95 s':>7}")
    layouts = df.attrs.get("layouts", False)  # asked for: each row's layout is shown
    experts = bool(len(df)) and bool((df["ep"] > 1).any())  # an MoE plan: ep is shown
    if experts:
        cols += f" {'ep':>4}"
    # context parallelism, ZeRO and the pair overlap: shown where the plan varies them, and
    # cp wherever a row has it (t p d alone would not multiply to the GPUs)
    extra = [k for k in ("cp", "zero", "overlap") if k in df and (
        df[k].nunique() > 1 or (k == "cp" and bool((df[k] > 1).any())))]
    cols += "".join(f" {k:>7}" for k in extra)
    if layouts:
        cols += "  layout"

    def line(r):
        return (f"{r.t:>2} {r.p:>3} {r.d:>3} {r.schedule:<17}{r.m:>2} {r.microbatch:>3} "
                f"{r.n:>5} {r.recompute:<10}{r.step_time:>8.2f} "
                + (f"{r.step_time_mean:>7.2f} {r.step_time_p95:>7.2f} " if noisy else "")
                + f"{r.tokens_per_s:>10,.0f} "
                f"{r.mfu:>6.1%} {r.bubble_ratio:>7.1%} {r.activation_bytes / GB:>7.1f} "
                f"{r.peak_memory / GB:>7.1f} {bar_text(r.expected_error, r.extrapolated):>7}"
                + (f" {r.ep:>4}" if experts else "")
                + "".join(f" {str(getattr(r, k)):>7}" for k in extra)
                + (f"  {r.layout}" if layouts else ""))

    fits = df[df["fits"]]
    ran = df[df["step_time"].notna()]
    text = [f"{len(df):,} configurations: {len(ran):,} simulated, {len(fits):,} fit", ""]
    if len(fits) and top:
        shown = _fold_alike(fits)
        ranked = df.attrs.get("ranked")
        unfit = int(fits["step_time_p95"].isna().sum()) if noisy else 0
        text += [(f"best that fit, {ranked}" if ranked else "fastest that fit")
                 + f" ({min(top, len(shown))} of {len(fits):,}"
                 + (f"; {unfit} the noise does not fit, without its figures"
                    + (", ranked last" if df.attrs.get("objective") else "") if unfit else "")
                 + "):", cols]
        text += [line(r) for r in shown.head(top).itertuples()]
        text += _larger_microbatches(df, fits.iloc[0])
    elif not len(fits):
        text += ["nothing fits"]
        text += _why_not_simulated(df[df["step_time"].isna()])
    if not len(ran) or top == 0:  # (no rows asked for: no table, no header, no legend)
        return "\n".join(text).rstrip("\n")
    outside = sorted(set(ran["extrapolated"]) - {""})
    if outside:
        text += ["", "* extrapolated (starred rows): no validated run shares "
                 + "; ".join(outside)]
    text += ["", LEGEND]
    # stable sorts: rows needing the same bytes keep the faster first, on every platform
    misses = ran[~ran["fits"]].sort_values("tokens_per_s", ascending=False, kind="stable")
    faster = misses[misses["tokens_per_s"] > (fits["tokens_per_s"].max() if len(fits) else 0)]
    if not len(faster):  # (a header over no rows said there were some)
        return "\n".join(text)
    text += ["", "faster configurations that do not fit (closest to fitting first):", cols]
    for r in _fold_alike(faster.sort_values("peak_memory", kind="stable")).head(
            min(5, top)).itertuples():
        text += [line(r) + f"  {r.reason}"]
    return "\n".join(text)


LEGEND = ("error: the step time's expected error from validate's checks (the root mean square "
          "of its regime's, pooled with the nearest where thin; starred: the worst nearby)")


def bar_text(expected_error: float, extrapolated: str) -> str:
    """A row's error bar in a terminal table: ``±4.4%``, starred where extrapolated."""
    return f"±{expected_error:.1%}" + ("*" if extrapolated else "") if np.isfinite(
        expected_error) else "?"


def _why_not_simulated(rows, top: int = 5) -> list[str]:
    """The commonest reasons why ``rows`` were not simulated, with their counts."""
    if not len(rows):
        return []
    counts = rows["reason"].fillna("no reason given").value_counts()
    lines = ["", "not simulated (the commonest reasons):"]
    lines += [f"{k:>7,} x {reason}" for reason, k in counts.head(top).items()]
    if len(counts) > top:
        lines += [f"{counts.iloc[top:].sum():>7,} x {len(counts) - top} other reasons"]
    return lines


def alike_key(rows):
    """What makes rows without a pipeline (p = 1) one run whatever their schedule: their
    layout and choices, and their time and bytes to four digits (there many schedules run
    one timeline in the same bytes); ``rows[(rows["p"] == 1) & key.duplicated()]`` repeat
    an earlier row."""
    return rows[["t", "cp", "p", "d", "ep", "etp", "microbatch", "recompute", "zero",
                 "overlap", "precision"]].assign(
        **{k: rows[k].map(lambda x: f"{x:.4g}") for k in ("step_time", "peak_memory",
                                                           "activation_bytes")})


def _fold_alike(rows):
    """Rows without a pipeline (p = 1) whose time and bytes equal the first such row's to four
    digits, as one line ("1f1b (+5 alike)"), in the first one's place but shown as the
    simplest of them: one chunk, the registry's first schedule (the fastest row had been
    "interleaved-zb (+11 alike)" at m = 4, on one device)."""
    key = alike_key(rows)
    repeat = (rows["p"] == 1) & key.duplicated()
    out = rows[~repeat].copy()
    alike = key[rows["p"] == 1].groupby(list(key.columns), sort=False).ngroup()
    order = {name: k for k, name in enumerate(SCHEDULES)}
    ranked = rows.loc[alike.index].assign(
        _group=alike, _order=rows.loc[alike.index, "schedule"].map(order))
    simplest = ranked.sort_values(["_group", "m", "_order"], kind="stable").groupby(
        "_group").head(1).set_index("_group").drop(columns=["_order"])
    first = ranked.groupby("_group").head(1)
    out.loc[first.index] = simplest.loc[first["_group"]].to_numpy()
    count = alike.map(alike.value_counts())
    more = count[~repeat[count.index]] - 1
    more = more[more > 0]
    out.loc[more.index, "schedule"] = [f"{name} (+{k} alike)" for name, k in
                                       zip(out.loc[more.index, "schedule"], more, strict=True)]
    return out
