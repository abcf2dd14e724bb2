"""Per-stage costs and per-device bytes of a transformer on a schedule, for many
configurations at once (NumPy over the stages of all of them)."""

from __future__ import annotations

import functools
import warnings

import numpy as np

from ..checks import (
    ScheduleError,
    ScheduleTypeError,
    indices,
    instance,
    known_keywords,
    numbers,
    positive_int,
    show,
)
from ..costs import Costs
from ..placement import LOOP, NAMES, stage_devices
from .comm import (
    all_gather,
    all_reduce,
    context_parallel_per_node,
    data_parallel_per_node,
    hop_crosses,
    reduce_scatter,
    tensor_parallel_per_node,
)
from .compute import (
    _attention,
    eager_ops,
    head_times,
    host_times,
    layer_times,
    matmul_time,
    memory_time,
    metric_time,
    optimizer_time,
)
from .config import CP_COMMS as CP_COMMS  # their home until 0.1.0: read here still
from .config import (
    FP8_BF16_INPUTS,
    PARTIAL_DEFAULT,
    REDUCE_BYTES,
    RunGrid,
    check_cp,
    check_sequence_parallel,
)
from .config import ZERO as ZERO
from .config import ZERO3_GATHERS as ZERO3_GATHERS
from .hardware import Hardware
from .moe import (
    all_to_all_times,
    dispatch_precision,
    expert_reasons,
    expert_times,
    layer_parts,
    moe_layer_costs,
    tensor_exchange,
)
from .overlap import saving
from .recipes import OPTIMIZER_BYTES, fp8_saved_bytes, parts_with_recipe, recipe_terms
from .transformer import BYTES, RECOMPUTE, REPLICATED, Transformer, layer_costs

# bytes per parameter of mixed-precision Adam (Rajbhandari et al. 2020): bf16 weights here;
# the fp32 master weights, momentum and variance are the optimizer's (recipes.
# OPTIMIZER_BYTES); the gradients are held at the bytes they are reduced in
# (config.REDUCE_BYTES): Megatron under --bf16 accumulates them in an fp32 main_grad
# buffer, 2 + 4 + 12 = 18 bytes a parameter, 6 + 12/d with the distributed optimizer over
# its d cp / replicate shards (theoretical_memory_usage.py's d is the data-parallel ranks)
WEIGHT_BYTES = 2.0
IN_FLIGHT_LAYERS = 2  # ZeRO-3 per layer: the layer computed and the next one prefetched


def _check_layouts(model: Transformer, grid: RunGrid, used: np.ndarray) -> None:
    """Refuse a configuration ``used`` of ``grid`` that ``model`` cannot run, as
    ``transformer_costs`` and ``plan`` do: ``t`` not dividing the heads, an expert layout that
    cannot exist (or an imbalance its ``ep`` cannot have), ``cp`` not splitting the
    sequence, sequence parallelism not splitting it (a hand-built grid was priced: t = 3 on
    32 heads gave fractional bytes)."""
    t, d, ep, etp, cp = (np.broadcast_to(np.asarray(x), grid.microbatch.shape)[used]
                         for x in (grid.t, grid.d, grid.ep, grid.etp, grid.cp))
    heads = (model.heads % t != 0) | (model.kv_heads % t != 0)
    if heads.any():
        k = int(np.argmax(heads))
        raise ScheduleError(f"grid's t must divide the heads {model.heads} and KV heads "
                            f"{model.kv_heads} (got t={t[k]} in configuration {used[k]})"
                            f"{REPLICATED}")
    reason = expert_reasons(model, t, d, ep, etp, cp, grid.imbalance, grid.sequence_parallel)
    if (reason != "").any():
        k = int(np.argmax(reason != ""))
        raise ScheduleError(f"{reason[k]} (in configuration {used[k]} of the grid)")
    for c in np.unique(cp).tolist():
        check_cp(grid.seq, c)
    if grid.sequence_parallel:
        for tt, c in {(int(a), int(b)) for a, b in zip(t, cp, strict=True)}:
            check_sequence_parallel(grid.seq, tt, c)


def stage_table(model: Transformer, hardware: Hardware, grid, *, config, layers,
                embedding, loss, moe_layers=0.0, mtp=0.0, partner=None, placement=None,
                **keywords):
    """Costs of every stage of many configurations, in the units of ``fastpp.Costs``.

    Per stage: ``config`` (its configuration), ``layers`` (transformer layers), ``embedding``
    and ``loss`` (whether it holds the embedding, or the output layer and the loss); per
    configuration (``grid``, a ``fastpp.model.config.RunGrid`` indexed by ``config``):
    ``microbatch``, ``t``, ``d``, ``p``, ``m``, ``recompute`` (an index into
    ``transformer.RECOMPUTE``), ``cp`` (context-parallel degree), ``zero`` (ZeRO stage) and
    ``overlap`` (the pair overlap), and the choices they share (``seq``, ``cp_comm``,
    ``zero3``, ...). Ranks are ordered as Megatron orders them: tensor, context, data,
    pipeline.

    Context parallelism splits each sequence into ``2 cp`` chunks, two per rank (the first and
    the last ones paired, for causal balance): a rank holds ``seq / cp`` tokens of each
    sequence, which prices exactly as ``microbatch / cp`` sequences (its products, its bytes
    and its share ``1/cp`` of the causal attention's FLOPs). Each layer's attention needs the
    whole sequence's K and V: ``cp_comm="all-gather"`` gathers them before the attention and
    reduce-scatters their gradients in the backward, exposed (Llama 3); ``"ring"`` passes each
    rank's chunk round the ``cp`` ranks in ``cp - 1`` steps under the attention core, only what
    exceeds it exposed (the backward passes K, V and their gradients: twice the bytes).

    ZeRO-3 (``zero=3``) shards the weights over the ``d cp`` replicas too, the routed
    experts' over their ``edp`` replicas (``ep etp`` ranks apart), as FSDP shards them: with
    ``zero3="layer"`` (Megatron-FSDP's ``optim_grads_params``, FSDP2 without a pipeline) each
    layer's weights are all-gathered in its forward and again in its backward, and its
    gradients reduce-scattered in the backward, each microbatch, under the layer's compute
    (FSDP's prefetch), only what exceeds it exposed; with ``"step"`` (FSDP2 under PyTorch's
    pipelining, not resharded after the forward: torchtitan's and AutoModel's default with a
    pipeline) the weights are gathered once per step and the gradients, accumulated whole,
    reduce-scattered once after the last microbatch (both in ``step_terms``).

    With ``overlap``, ``fb`` is the overlapped pair's time: the forward's ``f`` plus the
    backward half's ``b``, less what ``fastpp.model.overlap`` saves on each MoE layer both
    halves hold (``fastpp.model.moe.layer_parts``; a dense layer has no all-to-all and saves
    nothing: a dense model gets no ``fb``, its pairs take ``f + b``). It is keyed by the
    pair's forward stage; ``partner`` gives each stage the stage of its pairs' backward half
    (in DualPipe and DualPipeV the device's other stage; default: the stage itself, as for
    combined 1F1B, whose pairs mix a device's chunks: exact where they hold the same layers).
    The pair's parts are priced for whole sequences: the overlap with ``cp > 1`` is refused
    upstream (``overlap_reason``). Times are the
    per-op model of ``fastpp.model.compute`` plus the tensor-parallel collectives of
    ``fastpp.model.comm`` on the critical path; with ``tp_overlap`` (Transformer Engine's
    ``--tp-comm-overlap``) a layer's collectives run under its own compute, only what exceeds
    it exposed. With ``blocking_handoffs`` (Megatron without
    ``--overlap-p2p-communication``: a batched send and receive between two ops), each chunk
    op with ``p > 1`` also holds its device for one hand-off's transfer. With the grid's
    ``recompute_method`` (Megatron's ``--recompute-method block``, torchtitan's layer-wise
    checkpointing), full recomputation covers only some of each stage's layers
    (``recomputed_layers``), the others priced as the same configuration without it.

    With experts (``fastpp.model.moe``): per stage ``moe_layers`` (how many of its ``layers``
    have experts) and ``mtp`` (multi-token-prediction modules it holds), per configuration
    ``ep`` and ``etp``; the grid's ``precision`` for the products (default the
    hardware's), DeepSeek's ``node_limit``, the token ``imbalance`` and the token
    ``dispatcher`` (``fastpp.model.moe.DISPATCHERS``); a memory ``recipe``
    (``fastpp.model.recipes``) changes every layer's bytes and backward. An MoE layer's
    all-to-alls sit inside its forward and input-grad backward (no overlap). An MTP module
    costs a layer, its ``2h x h`` projection, and the output layer and loss again.

    Parameters
    ----------
    model : Transformer
    hardware : Hardware
    grid : RunGrid
        The configurations.
    config : array_like of int
        Per stage: its configuration (an index into ``grid``).
    layers : array_like of float
        Per stage: transformer layers.
    embedding, loss : array_like of bool
        Per stage: it holds the embedding; the output layer and the loss.
    moe_layers, mtp : float or array_like
        Per stage: how many of its layers have experts; MTP modules.
    partner : array_like of int, optional
        Per stage: the stage of its overlapped pairs' backward half (default: itself).
    placement : array_like of int, optional
        Per stage: its schedule's placement code (``fastpp.placement.CODES``), which says on
        which pipeline rank each stage runs and so which hand-offs cross nodes (default:
        the loop, stage ``v`` on rank ``v mod p``).
    **keywords
        Deprecated: 0.1.0's keywords in place of ``grid`` (a ``DeprecationWarning``).

    Returns
    -------
    dict
        Per stage ``f, b, w`` (seconds, per device of a plain pipeline: ``m`` times a chunk's
        time), ``i`` (a split backward's input-grad op, likewise: ``b - w`` unless the CPU or
        ZeRO-3's collectives bound the backward, each of ``i`` and ``w`` then bounded on its
        own), ``act`` (bytes, likewise ``m`` times a chunk's), ``gamma``,
        ``recomputed`` (the largest of its layers' ``recomputed_bytes``, once; with uniform
        groups a group's working set), ``working`` (what its device holds at its peak beyond
        ``act``: ``recomputed`` and ``cp_buffer_bytes``, or on the loss's stage the loss's
        working set, ``loss_bytes``, where larger; ``device_working_bytes``), ``after`` (what
        the loss's stage holds beyond its weights, gradients and optimizer state while the
        training metrics run, ``metric_bytes``; 0 elsewhere and without them), ``params`` (on
        one rank; reduced over ``d``) and ``expert_params`` (the routed experts' on one GPU,
        reduced over ``edp``), ``fb`` where a configuration's pairs save time, and ``comm``
        (latency), ``bandwidth`` and ``message_bytes`` of each stage's hand-off to the next,
        each hop over its own link (``handoff_links``).

    The form before ``RunGrid`` (0.1.0: ``stage_table(model, hardware, seq, microbatch=...,
    t=..., blocking=..., c=..., ...)``) still runs, with a ``DeprecationWarning``, for one
    release.

    Raises
    ------
    ScheduleTypeError
        If ``model``, ``hardware`` or ``grid`` is not of its class, or keywords are given
        beside a ``RunGrid``.
    """
    instance(model, Transformer, "model", "fastpp.model.Transformer")
    instance(hardware, Hardware, "hardware", "fastpp.model.Hardware")
    if not isinstance(grid, RunGrid):
        if not keywords:
            raise ScheduleTypeError(f"grid must be a fastpp.model.RunGrid (got "
                                    f"{type(grid).__name__})")
        grid = _keyword_grid(grid, **keywords)
    elif keywords:
        raise ScheduleTypeError(f"stage_table takes the configurations as one RunGrid, not "
                                f"keywords (got {sorted(keywords)})")
    if grid.precision is not None:
        hardware = hardware.with_precision(grid.precision)
    # a layer's costs depend on its configuration only: priced once per configuration
    grid = grid.broadcast()
    config, layers, embedding, loss, moe_layers, mtp, partner, placement = _stages(
        grid, config, layers, embedding, loss, moe_layers, mtp, partner, placement)
    _check_layouts(model, grid, np.unique(config))
    prices = _layer_prices(model, hardware, grid)

    def per_stage(x):
        return np.broadcast_to(x, grid.microbatch.shape)[config]

    t, cp, zero3 = grid.t, grid.cp, grid.zero3
    moe_layers, mtp = np.asarray(moe_layers, np.float64), np.asarray(mtp, np.float64)
    ends = np.asarray(embedding) | np.asarray(loss)
    ops = per_stage(eager_ops(model, grid.seq, grid.rank_batch, t))
    # full recomputation of some of a chunk's layers only (Megatron's block method,
    # torchtitan's interval): the rest priced as the same configuration without it
    full = per_stage(grid.recompute) == 2
    some = recomputed_layers(grid.recompute_method, grid.recompute_layers, layers,
                             layers - moe_layers)
    again, again_moe = np.where(full, some[0], layers), np.where(full, some[1], moe_layers)
    totals = _layer_terms(model, hardware, grid, prices, per_stage, again, again_moe, mtp,
                          embedding, loss)
    host_forward, host_backward = host_times(hardware, again, per_stage(grid.recompute), ends,
                                             ops)
    if grid.recompute_method in PARTIAL_DEFAULT:
        bare = grid.replace(recompute=np.zeros_like(grid.recompute), recompute_method=None,
                            recompute_layers=None)
        rest = _layer_terms(model, hardware, bare, _layer_prices(model, hardware, bare),
                            per_stage, layers - again, moe_layers - again_moe, 0.0, False,
                            False)
        totals = {k: v if k == "recomputed" else v + rest[k] for k, v in totals.items()}
        host_rest = host_times(hardware, layers - again, 0, False, ops)
        host_forward, host_backward = host_forward + host_rest[0], host_backward + host_rest[1]
    forward, backward, weight = totals["forward"], totals["backward"], totals["weight"]
    act, held_by_w, recomputed = totals["act"], totals["held_by_w"], totals["recomputed"]
    if grid.recompute_method == "uniform":
        if model.mtp_depth:  # (multi_token_prediction.py asserts recompute_num_layers == 1)
            raise ScheduleError(f"recompute_layers must be 1 with uniform recomputation of a "
                                f"model with MTP modules, as Megatron asserts (got "
                                f"recompute_layers={grid.recompute_layers})")
        act, held_by_w, recomputed = _grouped_checkpoints(
            grid.recompute_layers, layers, full, totals)
    gamma = np.divide(held_by_w, act, out=np.zeros_like(act), where=act > 0)
    # beyond the activations the engine counts: a recomputed layer's working set and context
    # parallelism's exchange buffers, both alive during one layer's backward, or on the loss's
    # stage the loss's, whichever is larger (an MTP module's loss is not given its own)
    working = np.maximum(
        recomputed + per_stage(cp_buffer_bytes(model, grid.seq, grid.microbatch, t, cp,
                                               grid.cp_comm)),
        np.asarray(loss) * per_stage(loss_bytes(model, grid.seq * grid.rank_batch, t)))
    after = np.asarray(loss) * per_stage(metric_bytes(model, grid.seq * grid.rank_batch, t)
                                         * (grid.train_metrics > 0))
    params = stage_params(model, layers, embedding, loss, per_stage(t), moe_layers, mtp)
    experts = expert_stage_params(model, moe_layers, mtp, per_stage(grid.ep),
                                  per_stage(grid.etp))
    # ZeRO-3 gathers and reduces the weights, the routed experts' over their own edp replicas
    # (ranks ep etp apart), as FSDP shards them (torchtitan's dp_mod_ep mesh, Megatron-FSDP's
    # expert data-parallel group)
    # (with hybrid sharding over a replica group's share of them: grid.replicate, which must
    # divide d cp, as plan's reasons and RunConfig see to; a RunGrid built by hand is checked)
    if np.any((grid.d * cp) % grid.replicate):
        raise ScheduleError(f"replicate={grid.replicate} must divide d * cp, the ranks ZeRO's "
                            f"groups split (got d * cp = {show(grid.d * cp)})")
    gather, scatter = zero3_times(hardware, params, layers + embedding + loss, per_stage(t),
                                  per_stage(grid.d * cp // grid.replicate), per_stage(grid.zero),
                                  zero3, grid.reduce_bytes, per_stage(grid.gpus))
    if model.moe:  # (none where a stage has no experts)
        apart = grid.ep * grid.etp
        more = zero3_times(hardware, experts, moe_layers + mtp, per_stage(apart),
                           per_stage(t * cp * grid.d // apart // grid.replicate),
                           per_stage(grid.zero), zero3, grid.reduce_bytes,
                           per_stage(grid.gpus))
        gather, scatter = (x + np.where(moe_layers + mtp > 0, y, 0.0)
                           for x, y in zip((gather, scatter), more, strict=True))
    # a split backward's I and W, each the longer of its GPU time and what bounds it: before
    # I the weights' gather and the CPU's issue (autograd's, a recomputed forward's), after W
    # the gradients' reduce-scatter. As b - w, the whole backward's floor made I longer as
    # W got faster (A100 at twice its peak: a recomputed ZB-H2 step 1.3% longer; FP8 11%
    # slower than bf16 on a ZeRO-3 V-Half step)
    input_grad = np.maximum(np.maximum(backward - weight, gather), host_backward)
    weight = np.maximum(weight, scatter)
    # an overlapped pair's bounds: both halves' GPU times, collectives and CPU times
    bounds = (forward, backward, gather, gather + scatter, host_forward, host_backward)
    forward = forward + np.maximum(gather - forward, 0.0)
    backward = backward + np.maximum(gather + scatter - backward, 0.0)
    # the CPU issues each op: a stage's pass takes the longer of its GPU and CPU times
    forward, backward = np.maximum(forward, host_forward), np.maximum(backward, host_backward)
    # the training loop's metrics on the logits: their own stretch after the backward
    metrics = np.asarray(loss) * per_stage(prices["metrics"])
    backward, input_grad = backward + metrics, input_grad + metrics
    mm = grid.m[config]
    latency, bandwidth, message, held = _handoff_terms(hardware, grid, config, placement,
                                                       model.hidden, forward, per_stage)
    table = {
        "f": (forward + held) * mm,
        "b": (backward + held) * mm,
        "w": weight * mm,
        "i": (input_grad + held) * mm,
        "act": np.maximum(act, 1.0) * mm,
        "gamma": gamma,
        "recomputed": recomputed,
        "working": working,
        "after": after,
        "params": params,
        "expert_params": experts,
        "comm": latency,
        "bandwidth": bandwidth,
        "message_bytes": message,
    }
    if model.moe and np.any(grid.overlap):  # a dense layer has no all-to-all: no saving
        table["fb"] = _pair_times(model, hardware, grid, config, partner, layers, moe_layers,
                                  per_stage, mm, bounds, held, metrics)
    return table


def _stages(grid, config, layers, embedding, loss, moe_layers, mtp, partner, placement):
    """``stage_table``'s per-stage arguments checked, each of the stages' one shape (the
    pricing indexes the grid by ``config`` and ``partner`` unchecked)."""
    if grid.microbatch.ndim != 1:
        raise ScheduleError(f"grid must hold its configurations as arrays of one dimension "
                            f"(got shape {grid.microbatch.shape})")
    config = indices(config, "config", grid.microbatch.size)
    if config.ndim != 1:
        raise ScheduleError(f"config must be an array of one dimension, a configuration per "
                            f"stage (got shape {config.shape})")
    out = [config]
    for name, value in (("layers", layers), ("embedding", embedding), ("loss", loss),
                        ("moe_layers", moe_layers), ("mtp", mtp)):
        if name in ("embedding", "loss"):
            try:
                arr = np.asarray(value)
            except ValueError:  # ragged
                arr = None
            if arr is None or arr.dtype != bool:
                raise ScheduleTypeError(f"{name} must hold bools, one per stage (got "
                                        f"{show(value)})")
        else:
            arr = numbers(value, name)
        if arr.shape not in (config.shape, ()) or (name in ("layers", "embedding", "loss")
                                                    and arr.shape != config.shape):
            raise ScheduleError(f"{name} must have one value per stage, shape {config.shape} "
                                f"as config (got shape {arr.shape})")
        out.append(arr)
    if np.any(out[4] > out[1]):  # a stage's MoE layers are some of its layers
        raise ScheduleError(f"moe_layers must be at most layers on every stage (got "
                            f"moe_layers={show(out[4])}, layers={show(out[1])})")
    out.append(None if partner is None else indices(partner, "partner", len(config)))
    if placement is None:
        out.append(np.full(config.shape, LOOP, np.int64))
    else:
        placement = indices(placement, "placement", len(NAMES))
        if placement.shape not in (config.shape, ()):
            raise ScheduleError(f"placement must have one value per stage, shape "
                                f"{config.shape} as config (got shape {placement.shape})")
        out.append(np.broadcast_to(placement, config.shape))
    return out


def _keyword_grid(seq, *, microbatch, t, d, p, m, sequence_parallel, recompute,
                  tp_overlap=False, blocking=False, ep=1, etp=1, precision=None,
                  node_limit=None, imbalance=1.0, c=1, zero=0, overlap=False,
                  cp_comm="all-gather", zero3="layer", dispatcher="alltoall",
                  recipe=None) -> RunGrid:
    """``stage_table``'s keywords of 0.1.0 as the ``RunGrid`` they name (``blocking`` is
    ``blocking_handoffs``, ``c`` is ``cp``), with a ``DeprecationWarning``."""
    warnings.warn("stage_table(model, hardware, seq, microbatch=..., t=..., ...) is "
                  "deprecated and goes in the next release: give the configurations as one "
                  "fastpp.model.RunGrid (the same names, blocking as blocking_handoffs and c "
                  "as cp)", DeprecationWarning, stacklevel=3)
    return RunGrid(seq=seq, microbatch=microbatch, t=t, d=d, p=p, m=m,
                   sequence_parallel=sequence_parallel, recompute=recompute,
                   tp_overlap=tp_overlap, blocking_handoffs=blocking, ep=ep, etp=etp,
                   precision=precision, node_limit=node_limit, imbalance=imbalance, cp=c,
                   zero=zero, overlap=overlap, cp_comm=cp_comm, zero3=zero3,
                   dispatcher=dispatcher, recipe=recipe)


def _layer_prices(model, hardware, grid) -> dict:
    """Per configuration of ``grid`` (a ``RunGrid``): one dense layer's costs (``layer``) and
    times (``times``), the embedding's and the head's (``head``), the context-parallel
    exchange's forward and backward, the tensor-parallel exchange of a layer's output
    (``exchange``) and what of it a layer's forward and backward expose, the embedding's and
    logits' crossing (``edge``), the loss's synchronisation and the training metrics
    (``metrics``, with the last stage's backward)."""
    seq, b, t, rc = grid.seq, grid.rank_batch, grid.t, grid.recompute
    sequence_parallel = grid.sequence_parallel
    layer = layer_costs(model, seq, b, t, sequence_parallel, rc)
    times = layer_times(model, hardware, seq, b, t, sequence_parallel, rc)
    stored = layer_costs(model, seq, b, t, sequence_parallel, 0)["activations"]
    if grid.recipe is not None:  # fastpp.model.recipes: a dense layer's terms
        layer, times = with_recipe(layer, times, recipe_terms(
            model, hardware, grid.recipe, seq, b, t, rc, sequence_parallel, moe=False,
            forward=times["forward"], input_grad=times["input_grad"]))
        stored = stored - recipe_terms(model, hardware, grid.recipe, seq, b, t, 0,
                                       sequence_parallel, moe=False)["bytes"]
    layer, stored = _fp8_inputs(layer, stored, model, hardware, grid, moe=False)
    layer["recomputed"] = recomputed_bytes(stored, layer["activations"], rc)
    head = head_times(model, hardware, seq, b, t, sequence_parallel)
    cp_forward, cp_backward = context_parallel_times(model, hardware, seq, grid.microbatch, t,
                                                     grid.cp, grid.cp_comm, grid.gpus)
    # a full recompute repeats it, and so does the selective one (the core with its exchange)
    # (not where a recipe's selective modules leave the core out: Megatron's core_attn alone
    # checkpoints the core attention, attention.py's checkpoint_core_attention)
    core_again = rc >= 1
    if grid.recipe is not None and (grid.recipe.op_level
                                    or "core_attn" not in grid.recipe.recompute_modules):
        core_again = rc == 2
    cp_backward = cp_backward + np.where(core_again, cp_forward, 0.0)
    spans = tensor_parallel_per_node(hardware, t, grid.gpus)
    # the layer's two tensor-parallel exchanges of its 2sbh output each way: all-reduces, or
    # an all-gather and a reduce-scatter each with sequence parallelism (the same bytes)
    exchange = tensor_exchange(hardware, seq, b, t, model.hidden, sequence_parallel,
                               grid.gpus)
    tp_forward, tp_backward = _exposed_exchange(layer, times, exchange, grid.tp_overlap)
    # the embedding's output and the logits' input cross the ranks once each way; the
    # vocabulary-parallel loss all-reduces its max, sum and target logit (4 bytes a token)
    edge = np.where(t > 1, exchange, 0.0) / (2.0 if sequence_parallel else 1.0)
    loss_sync = 3.0 * all_reduce(hardware, 4.0 * seq * b, t, spans)
    # the training loop's metrics on the logits, after the microbatch's backward
    metrics = grid.train_metrics * metric_time(model, hardware, seq, b, t)
    return {"layer": layer, "times": times, "head": head, "cp_forward": cp_forward,
            "cp_backward": cp_backward, "exchange": exchange, "tp_forward": tp_forward,
            "tp_backward": tp_backward, "edge": edge, "loss_sync": loss_sync,
            "metrics": metrics}


def _exposed_exchange(layer, times, exchange, tp_overlap: bool):
    """A layer's tensor-parallel seconds in its forward and backward: its collectives'
    ``exchange``, with ``tp_overlap`` only what exceeds its own compute."""
    forward = layer["collectives_forward"] * exchange
    backward = layer["collectives_backward"] * exchange
    if tp_overlap:
        forward = np.maximum(forward - times["forward"], 0.0)
        backward = np.maximum(backward - times["input_grad"] - times["weight_grad"], 0.0)
    return forward, backward


def recomputed_layers(method, count, layers, dense) -> tuple[np.ndarray, np.ndarray]:
    """Per model chunk of ``layers`` layers, ``dense`` of them without experts, taken as its
    first ones (exact where the model's dense layers lead it, as DeepSeek's first three):
    how many layers full recomputation covers, and how many of those have experts.
    ``method`` None or ``"uniform"``: every layer; ``"block"`` (Megatron's): the first
    ``count``; ``"interval"`` (torchtitan's layer-wise
    selective checkpointing): every ``count``-th, counting each chunk's layers from 1.
    torchtitan's counter runs on across a rank's model parts (``apply_ac`` never resets
    it), so where ``count`` does not divide a chunk it takes other layers of the later
    chunks, at most one more or fewer a rank."""
    layers, dense = np.asarray(layers, np.float64), np.asarray(dense, np.float64)
    if method in (None, "uniform"):
        return layers, layers - dense
    if method == "block":
        again = np.minimum(layers, count)
        return again, np.maximum(again - dense, 0.0)
    again = np.floor(layers / count)
    return again, again - np.floor(dense / count)


def _layer_terms(model, hardware, grid, prices, per_stage, layers, moe_layers, mtp, embedding,
                 loss) -> dict:
    """``_dense_terms`` of a stage's dense layers, embedding and loss, with its MoE layers
    and MTP modules added (``_expert_and_mtp_terms``)."""
    totals = _dense_terms(model, grid, prices, per_stage, layers - moe_layers, layers,
                          embedding, loss)
    if model.moe or model.mtp_depth:
        totals = _expert_and_mtp_terms(model, hardware, grid, prices, per_stage, moe_layers,
                                       mtp, totals)
    return totals


def _dense_terms(model, grid, prices, per_stage, dense, layers, starts, ends) -> dict:
    """Per stage: the forward, backward and weight-gradient times of its ``dense`` layers, the
    attention exchange of all its ``layers``, its embedding (``starts``) and its output layer
    and loss (``ends``); the activations it keeps (``kept``, ``act``) and those the weight
    gradient holds (``held_by_w``)."""
    seq, b, t, sequence_parallel = grid.seq, grid.rank_batch, grid.t, grid.sequence_parallel
    times, head, layer, edge = prices["times"], prices["head"], prices["layer"], prices["edge"]
    # every layer's attention (dense or MoE) exchanges K and V across the CP ranks
    forward = (dense * per_stage(times["forward"] + prices["tp_forward"])
               + layers * per_stage(prices["cp_forward"])
               + starts * per_stage(head["embed_forward"] + edge)
               + ends * per_stage(head["head_forward"] + prices["loss_sync"]
                                  + (edge if sequence_parallel else 0.0)))
    weight = (dense * per_stage(times["weight_grad"])
              + ends * per_stage(head["head_weight_grad"])
              + starts * per_stage(head["embed_weight"]))
    # with sequence parallelism the embedding's output is reduce-scattered, so its gradient
    # is all-gathered back (without, the forward's all-reduce needs no backward)
    backward = (dense * per_stage(times["input_grad"] + prices["tp_backward"])
                + layers * per_stage(prices["cp_backward"]) + weight
                + ends * per_stage(head["head_input_grad"] + edge)
                + starts * per_stage(np.where(sequence_parallel, edge, 0.0)))
    kept = dense * per_stage(layer["activations"])
    # the embedding keeps its dropout's one-byte mask alone: its output is the first layer's
    # input, which that layer keeps (it had been counted twice: tests/test_device_bytes.py
    # measures what PyTorch saves)
    mask = 0.5 * BYTES * seq * b * model.hidden if model.dropout else 0.0
    logits = LOSS_KEPT_BYTES[model.loss] + np.where(grid.p > 1, LOSS_PIPELINE_KEPT[model.loss],
                                                    0.0)
    act = (kept + starts * per_stage(mask / np.where(sequence_parallel, t, 1.0))
           + ends * per_stage(logits * seq * b * model.vocab / t + head_inputs(grid, model)))
    return {"forward": forward, "backward": backward, "weight": weight, "kept": kept,
            "act": act, "held_by_w": kept * per_stage(layer["gamma"]),
            "recomputed": np.where(dense > 0, per_stage(layer["recomputed"]), 0.0)}


def head_inputs(grid, model: Transformer):
    """Bytes a head (the model's, or an MTP module's) keeps for a microbatch besides its
    logits: its final norm's input and its output projection's, in half precision, split over
    ``t`` only under sequence parallelism (Korthikanti et al. 2022, section 4.2: ``4 s b h /
    t`` beside the logits' ``4 s b v / t``)."""
    return (2.0 * BYTES * grid.seq * grid.rank_batch * model.hidden
            / np.where(grid.sequence_parallel, grid.t, 1.0))


def _handoff_terms(hardware, grid, config, placement, hidden, forward, per_stage):
    """Per stage: its hand-off's latency, bandwidth and message, each hop over its own link,
    and what a blocking op holds its device for them (``held``)."""
    t, cp, p = grid.t, grid.cp, grid.p
    latency, bandwidth = handoff_links(hardware, config, per_stage(t * cp * grid.d),
                                       per_stage(p), placement)
    # each tensor-parallel rank sends its seq/cp tokens: all of them, as Megatron-Core's
    # schedules send, or its 1/t share under sequence parallelism or the older Megatron-LM's
    # scatter-gather (RunGrid.scatter_gather)
    split = grid.sequence_parallel or grid.scatter_gather
    message = per_stage(BYTES * grid.seq * grid.microbatch / cp * hidden
                        / np.where(split, t, 1))
    # a blocking op holds its device for its hand-offs, the slower of its two hops, and for
    # the device synchronize after them (``Hardware.handoff``: the GPU idles until the CPU
    # issues again)
    hop = latency + message / bandwidth
    # (a configuration's last stage sends nothing on: its hop to the first device, which
    # ``stage_devices`` wraps to, is no hand-off it waits for)
    position = stage_positions(config)
    last = position == np.bincount(config)[config] - 1
    held = np.maximum(np.where(last, 0.0, hop), incoming(config, hop)) + hardware.handoff
    held = np.where(grid.blocking_handoffs & (per_stage(p) > 1) & (forward > 0), held, 0.0)
    return latency, bandwidth, message, held


def _expert_and_mtp_terms(model, hardware, grid, prices, per_stage, moe_layers, mtp,
                          totals) -> dict:
    """``totals`` (a stage's ``forward``, ``backward``, ``weight``, ``kept``, ``act`` and
    ``held_by_w``) with its MoE layers and MTP modules added. An MTP module's layer is an MoE
    layer (``_moe_layer``), or a dense one (``prices``) where the model has no experts."""
    forward, backward, weight, kept, act, held_by_w = (totals[k] for k in (
        "forward", "backward", "weight", "kept", "act", "held_by_w"))
    times, layer, head = prices["times"], prices["layer"], prices["head"]
    one = {"forward": times["forward"] + prices["tp_forward"],
           "input_grad": times["input_grad"] + prices["tp_backward"],
           "weight_grad": times["weight_grad"], "activations": layer["activations"],
           "gamma": layer["gamma"], "recomputed": layer["recomputed"]}
    if model.moe:
        one = _moe_layer(model, hardware, grid, prices["exchange"])
        forward = forward + moe_layers * per_stage(one["forward"])
        w = moe_layers * per_stage(one["weight_grad"])
        weight = weight + w
        backward = backward + moe_layers * per_stage(one["input_grad"]) + w
        moe_kept = moe_layers * per_stage(one["activations"])
        kept, act = kept + moe_kept, act + moe_kept
        held_by_w = held_by_w + moe_kept * per_stage(one["gamma"])
    # an MTP module: a layer, its projection (split like a column-parallel matrix), the output
    # layer and the loss again
    seq, b, t = grid.seq, grid.rank_batch, grid.t
    T, h = seq * b, model.hidden
    sbh = seq * b * model.hidden
    proj = [matmul_time(hardware, T, h / t, 2.0 * h), matmul_time(hardware, T, 2.0 * h, h / t),
            matmul_time(hardware, 2.0 * h, h / t, T)]
    forward = forward + mtp * per_stage(one["forward"] + proj[0] + head["embed_forward"]
                                        + head["head_forward"] + prices["loss_sync"])
    w = mtp * per_stage(one["weight_grad"] + proj[2] + head["head_weight_grad"])
    weight = weight + w
    backward = backward + w + mtp * per_stage(one["input_grad"] + proj[1]
                                              + head["head_input_grad"])
    mtp_kept = mtp * per_stage(one["activations"] + BYTES * 2.0 * sbh / t)
    recomputed = np.maximum(totals["recomputed"], np.where(
        (moe_layers if model.moe else 0.0) + mtp > 0, per_stage(one["recomputed"]), 0.0))
    return {"forward": forward, "backward": backward, "weight": weight,
            "kept": kept, "held_by_w": held_by_w + mtp_kept * per_stage(one["gamma"]),
            "act": act + mtp_kept + mtp * per_stage(LOSS_KEPT_BYTES[model.loss] * seq * b
                                                    * model.vocab / t
                                                    + head_inputs(grid, model)),
            "recomputed": recomputed}


def _pair_times(model, hardware, grid, config, partner, layers, moe_layers, per_stage, mm,
                bounds, held, metrics) -> np.ndarray:
    """Per stage, the overlapped pair's time ``fb``: its two halves' GPU times less what the
    MoE layers both hold save (``fastpp.model.overlap``), at least both halves' ZeRO-3
    collectives and both halves' CPU times (``bounds``: the forward's and the backward's of
    each stage), plus their hand-offs' ``held`` and the loss's ``metrics``; NaN where its
    configuration does not overlap. Priced per configuration at each recomputation (none or
    selective: full recomputation refuses the overlap), for whole sequences
    (``grid.microbatch``). (The saving came off each half's time already bounded: where
    ZeRO-3's collectives bound the backward, a faster link lengthened the pair, +2.4% on a
    step with twice A100's NVLink.)"""
    rc, ov = grid.recompute, grid.overlap
    saved = np.zeros(ov.shape)
    shared = {"seq": grid.seq, "microbatch": grid.microbatch, "t": grid.t, "ep": grid.ep,
              "etp": grid.etp, "sequence_parallel": grid.sequence_parallel,
              "node_limit": grid.node_limit, "imbalance": grid.imbalance,
              "dispatcher": grid.dispatcher,
              # the job's GPUs, as _moe_layer prices the all-to-alls the saving comes off
              "gpus": grid.gpus}
    for r in np.unique(rc[ov]):
        parts = layer_parts(model, hardware, **shared, recompute=RECOMPUTE[r],
                            precision=hardware.precision,
                            dispatch=dispatch_precision(hardware.precision, grid.recipe))
        if grid.recipe is not None:
            parts = parts_with_recipe(parts, model, hardware, grid.recipe, **shared,
                                      recompute=RECOMPUTE[r])
        saved = np.where(ov & (rc == r), saving(parts), saved)
    mate = np.arange(config.size) if partner is None else np.asarray(partner)
    moe = np.broadcast_to(moe_layers, layers.shape)
    f, b, fc, bc, fh, bh = bounds
    held, metrics = (np.broadcast_to(x, layers.shape) for x in (held, metrics))
    pair = np.maximum.reduce([f + b[mate] - np.minimum(moe, moe[mate]) * per_stage(saved),
                              fc + bc[mate], fh + bh[mate]])
    return np.where(per_stage(ov), (pair + held + held[mate] + metrics[mate]) * mm, np.nan)


def stage_costs(table: dict, kind=Costs, **extra):
    """The ``Costs`` (or ``kind``, a subclass taking ``extra``) of a ``stage_table``: its
    per-stage times, ``gamma``, activations and hand-off prices, per hop."""
    return kind(f=table["f"], b=table["b"], w=table["w"], i=table["i"], gamma=table["gamma"],
                act=table["act"], comm=table["comm"], bandwidth=table["bandwidth"],
                message_bytes=table["message_bytes"], **extra)


def idle_stages(table: dict) -> np.ndarray:
    """Per stage of ``stage_table``'s ``table``: whether its forward or backward takes no
    time (a layout leaving it nothing, or only the embedding), which the engine cannot run."""
    return (table["f"] <= 0) | (table["b"] <= 0)


def idle_reason(got: str = "a stage whose ops take no time") -> str:
    """The reason a configuration with an idle stage (``idle_stages``) cannot run."""
    return f"layout must give every stage work (got {got}, which the engine cannot run)"


def stage_positions(config) -> np.ndarray:
    """Each stage's index among its own configuration's stages (``config`` per stage)."""
    config = np.asarray(config, np.int64)
    order = np.argsort(config, kind="stable")
    counts = np.bincount(config)
    position = np.empty_like(config)
    position[order] = np.arange(config.size) - (np.cumsum(counts) - counts)[config[order]]
    return position


def incoming(config, values) -> np.ndarray:
    """Per stage, ``values`` of the stage before it in its configuration (its own for a
    configuration's first stage)."""
    config = np.asarray(config, np.int64)
    order = np.argsort(config, kind="stable")
    out = np.array(values, np.float64, copy=True)
    follows = stage_positions(config)[order][1:] > 0
    out[order[1:][follows]] = np.asarray(values)[order[:-1][follows]]
    return out


def handoff_links(hardware: Hardware, config, stride, p, placement=LOOP):
    """Per stage: latency and bandwidth of its hand-off to the next stage, each hop over its
    own link (``fastpp.model.comm.hop_crosses``; each stage on the pipeline rank its
    ``placement`` code puts it, ``fastpp.placement.stage_devices``; ``stride = t cp d`` per
    stage): NVLink inside a node, the network where the hop leaves it."""
    position = stage_positions(config)
    crossing = hop_crosses(hardware, stride, stage_devices(placement, p, position),
                           stage_devices(placement, p, position + 1))
    latency = np.where(crossing, hardware.network.latency, hardware.node.latency)
    bandwidth = np.where(crossing, hardware.network.bandwidth, hardware.node.bandwidth)
    return latency, bandwidth


def context_parallel_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t, cp,
                           cp_comm: str, gpus=None):
    """Seconds per layer that context parallelism adds, forward and backward, per
    configuration (``microbatch`` whole sequences over ``cp`` ranks; see ``stage_table``):
    the K and V exchange's exposed part, and with the ring the attention core repriced in
    its blocks. Zero for ``cp = 1``.

    ``"all-gather"`` (Llama 3): K and V of the whole sequences gathered before the attention,
    gathered again for its backward (Transformer Engine's ``AttnFuncWithCPAndKVAllGather``
    keeps only the local K and V between the two) and their gradients reduce-scattered
    after it, all exposed; each rank's queries then attend causally over keys as long as the
    sequence, as without context parallelism.

    ``"ring"`` (Megatron with Transformer Engine's p2p context parallelism): the sequence in
    ``2 cp`` chunks, rank ``i`` holding chunks ``i`` and ``2 cp - 1 - i``; ``cp`` steps, step 0
    the local chunks' causal attention (``s/cp`` queries and keys), each later step one
    received K, V block against the local queries: rank ``i`` at step ``k <= i`` attends with
    its ``s/cp`` queries to the block's first half (``s/2cp`` keys), after it with its second
    chunk's ``s/2cp`` queries to the whole block: every step ``1/cp`` of the causal FLOPs (the
    load balance), non-causal. While step ``k`` computes, the block for step ``k + 1``
    travels to the next rank (one hop of ``s/cp`` tokens' K and V, over the node's link or one
    network rail): only a hop longer than its step is exposed, ``cp - 1`` hops in all. The
    backward passes K, V and their gradients under each step's backward
    (``ring_backward_exposed``). After the steps, the partial results merged
    (``ring_merges``).

    ``"torch-allgather"`` and ``"torch-alltoall"``: PyTorch's context parallelism
    (``torch.distributed.tensor.experimental.context_parallel``, its ``rotate_method``) as
    torchtitan runs it: ``torch_context_parallel_times``.

    ``gpus``, the job's, says where a group straddles two nodes
    (``comm.context_parallel_per_node``; default: unknown).
    """
    b = np.asarray(microbatch, np.float64)
    cp = np.asarray(cp, np.float64)
    t = np.asarray(t, np.float64)
    kv_bytes = 2.0 * BYTES * seq * b * model.kv / t  # the whole sequences' K and V, one rank
    per_node = context_parallel_per_node(hardware, t, cp, gpus)
    if cp_comm.startswith("torch-"):
        return torch_context_parallel_times(model, hardware, seq, b, t, cp, per_node, cp_comm)
    if cp_comm == "all-gather":
        gather = all_gather(hardware, kv_bytes, cp, per_node)
        return gather, gather + reduce_scatter(hardware, kv_bytes, cp, per_node)
    spans = cp > per_node
    link = np.where(spans, hardware.network.bandwidth, hardware.node.bandwidth)
    latency = np.where(spans, hardware.network.latency, hardware.node.latency)
    hop = kv_bytes / cp / link + latency
    steps = ring_steps(model, hardware, seq, b, t, cp)
    plain_forward, plain_backward = _attention(hardware, model, seq, b / cp, t)
    ring = cp > 1
    forward = np.where(ring, steps["first_forward"] + (cp - 1.0) * steps["forward"]
                       - plain_forward
                       + ring_exposed(hop, steps["first_forward"], steps["forward"], cp), 0.0)
    backward = np.where(ring, steps["first_backward"] + (cp - 1.0) * steps["backward"]
                        - plain_backward + ring_backward_exposed(
                            hop, steps["first_backward"], steps["backward"], cp), 0.0)
    merge_forward, merge_backward = ring_merges(model, hardware, seq, b, t, cp)
    return forward + np.where(ring, merge_forward, 0.0), backward + np.where(
        ring, merge_backward, 0.0)


def ring_merges(model: Transformer, hardware: Hardware, seq: int, microbatch, t, cp):
    """Seconds per layer of Transformer Engine's ring merging its steps' partial results
    (``AttnFuncWithCPAndKVP2P``), forward and backward, per configuration: after the steps,
    on the main stream, each step's bf16 output rescaled into the output
    (``flash_attn_fwd_out_correction``: it reads the step's output and reads and writes the
    output, 6 bytes an element, a half block on the steps past the rank's own); in the
    backward each step's dQ, dK and dV copied or added into their buffers (6 bytes an element,
    half blocks on half the steps). Over the ranks a mean of ``1 + 0.75 (cp - 1)`` full passes,
    one kernel a step (three in the backward). Unpriced until 7 December 2026 (a review)."""
    b, cp = np.asarray(microbatch, np.float64), np.asarray(cp, np.float64)
    passes = 1.0 + 0.75 * (cp - 1.0)
    tokens = b * seq / cp
    out = tokens * float(model.heads) * model.v_head_dim / t
    grads = tokens * (float(model.heads) * (model.head_dim + model.rope_dim) + 2.0 * model.kv) / t
    return (memory_time(hardware, 6.0 * passes * out) + (cp - 1.0) * hardware.op_overhead,
            memory_time(hardware, 6.0 * passes * grads)
            + (3.0 * cp - 1.0) * hardware.op_overhead)  # (memory_time holds one)


def torch_context_parallel_times(model: Transformer, hardware: Hardware, seq: int, microbatch,
                                 t, cp, per_node, cp_comm: str):
    """``context_parallel_times`` of PyTorch's context parallelism as torchtitan runs it
    (``torch/distributed/tensor/experimental/_attention.py`` of PyTorch 2.6, torchtitan
    9dec370, December 2024).

    - The attention is the ring's: ``cp`` calls of the flash kernel per pass, step 0 causal
      over the local chunks, the others a non-causal block, with the round-robin load
      balance of ``"ring"`` (``ring_steps``).
    - K and V travel as the kernel receives them: torchtitan's Llama repeats the KV heads
      (``repeat_kv``) before the attention, so all ``a`` heads of ``d + r`` and ``d_v``
      go (``_width``).
    - ``"torch-allgather"`` gathers the whole sequences' K and V in one collective issued
      before step 0 and waited at step 1, in each pass: only what exceeds step 0 is
      exposed. ``"torch-alltoall"`` passes one block a step under the step before, as the
      ring does.
    - Each step's output is merged into an fp32 one (``_SDPAMerger``: 10 bytes an element
      a step, 12 for the first step's cast and the last's back), the backward's dq, dk and
      dv accumulated in fp32 (10 bytes each a step; 30 for the zeros and the casts back), at
      the memory's bandwidth, one kernel each: priced fused, as the compiled block runs them.
    - The backward passes dK and dV on in fp32 after each step, waited a step later; the
      last is waited at the end, exposed whole.

    Parameters
    ----------
    model : Transformer
    hardware : Hardware
    seq : int
        Tokens of a whole sequence.
    microbatch, t, cp : int or ndarray
        Sequences a microbatch, tensor- and context-parallel degrees, per configuration.
    per_node : ndarray
        Context-parallel ranks a node holds (``comm.context_parallel_per_node``).
    cp_comm : {"torch-allgather", "torch-alltoall"}
        The rotate method.

    Returns
    -------
    tuple of ndarray
        Seconds a layer adds forward and backward (0 where ``cp = 1``).
    """
    b, cp = np.asarray(microbatch, np.float64), np.asarray(cp, np.float64)
    width = _width(model, t)
    kv_bytes = BYTES * seq * b * width  # the whole sequences' K and V as SDPA receives them
    spans = cp > per_node
    link = np.where(spans, hardware.network.bandwidth, hardware.node.bandwidth)
    latency = np.where(spans, hardware.network.latency, hardware.node.latency)
    hop = kv_bytes / cp / link + latency
    grad_hop = 2.0 * kv_bytes / cp / link + latency  # dK and dV in fp32
    steps = ring_steps(model, hardware, seq, b, t, cp)
    plain_forward, plain_backward = _attention(hardware, model, seq, b / cp, t)
    forward = steps["first_forward"] + (cp - 1.0) * steps["forward"] - plain_forward
    backward = steps["first_backward"] + (cp - 1.0) * steps["backward"] - plain_backward
    if cp_comm == "torch-allgather":
        gather = all_gather(hardware, kv_bytes, cp, per_node)
        forward = forward + np.maximum(gather - steps["first_forward"], 0.0)
        backward = backward + np.maximum(gather - steps["first_backward"], 0.0)
    else:
        forward = forward + ring_exposed(hop, steps["first_forward"], steps["forward"], cp)
        backward = backward + ring_exposed(hop, steps["first_backward"], steps["backward"], cp)
    backward = backward + grad_hop + (cp - 1.0) * np.maximum(grad_hop - steps["backward"], 0.0)
    output = b * seq / cp * float(model.heads) * model.v_head_dim / t  # a rank's elements
    grads = b * seq / cp * (_query_width(model, t) + width)  # dq, dk, dv
    # a kernel a step each: memory_time counts one of the cp forward, of the 3 cp backward
    forward = forward + memory_time(hardware, output * (10.0 * (cp - 1.0) + 12.0)) + (
        (cp - 1.0) * hardware.op_overhead)
    backward = backward + memory_time(hardware, grads * (10.0 * cp + 10.0)) + (
        (3.0 * cp - 1.0) * hardware.op_overhead)
    return np.where(cp > 1, forward, 0.0), np.where(cp > 1, backward, 0.0)


def _width(model: Transformer, t) -> np.ndarray:
    """The width of K and V together as PyTorch's context parallelism exchanges them
    under torchtitan (its KV heads repeated to all ``a`` heads; MLA's keys with their
    RoPE part, ``Transformer.core_width``), on one tensor-parallel rank."""
    return model.core_width() / np.asarray(t, np.float64)


def _query_width(model: Transformer, t) -> np.ndarray:
    """The width of Q on one tensor-parallel rank (MLA's with its RoPE part)."""
    return float(model.heads) * (model.head_dim + model.rope_dim) / np.asarray(t, np.float64)


def cp_buffer_bytes(model: Transformer, seq: int, microbatch, t, cp, cp_comm: str):
    """Bytes one rank holds for context parallelism's K and V exchange beyond its activations,
    at its peak in one layer's attention: the ring's, the larger of its backward's double
    buffers of a block and of its gradients, ``4`` blocks of ``s/cp`` tokens' K and V
    (Transformer Engine alternates two receive buffers), and its forward's every received
    block and every step's output, kept until the merge after the last step (the whole
    sequences' K and V and ``cp`` partial outputs; counted since 7 December 2026, a review);
    the all-gather's whole sequences' K and V and their gradients.
    PyTorch's (``torch_context_parallel_times``): the gathered K and V (all-gather) or a
    block and the next (all-to-all), all heads, and in fp32 the accumulated dq, dk and dv
    and the dK, dV in flight. Activations themselves are ``1/cp`` of a rank's without
    context parallelism (its ``seq/cp`` tokens, ``stage_table``). Zero for ``cp = 1``."""
    cp = np.asarray(cp, np.float64)
    b, t = np.asarray(microbatch, np.float64), np.asarray(t, np.float64)
    kv_bytes = 2.0 * BYTES * seq * b * model.kv / t
    if cp_comm.startswith("torch-"):
        whole = BYTES * seq * b * _width(model, t)
        kv = whole if cp_comm == "torch-allgather" else 2.0 * whole / cp
        local = seq * b / cp
        grads = 4.0 * local * (_query_width(model, t) + 2.0 * _width(model, t))
        return np.where(cp > 1, kv + grads, 0.0)
    # (AttnFuncWithCPAndKVP2P.forward's p2p_comm_buffers and out_per_step)
    outputs = BYTES * seq * b * float(model.heads) * model.v_head_dim / t
    held = (np.maximum(4.0 * kv_bytes / cp, kv_bytes + outputs) if cp_comm == "ring"
            else 2.0 * kv_bytes)
    return np.where(cp > 1, held, 0.0)


def ring_steps(model: Transformer, hardware: Hardware, seq: int, microbatch, t, cp) -> dict:
    """Seconds of one ring step's attention, forward and backward: ``first_*`` step 0 (the
    local chunks, causal), the others a block of ``s/2cp`` keys for ``s/cp`` queries or ``s/cp``
    keys for ``s/2cp`` queries (half the ranks each, their mean), each ``1/cp`` of the FLOPs
    (``context_parallel_times``)."""
    b, cp = np.asarray(microbatch, np.float64), np.asarray(cp, np.float64)
    share = b / (cp * cp)  # 1/cp of the 1/cp of the sequences' causal FLOPs a rank computes
    block = seq / cp
    # (a sliding window's skipped blocks are not priced: the ring runs full attention)
    first = _attention(hardware, model, seq, share, t, length=block, causal=True, window=False)
    short = _attention(hardware, model, seq, share, t, length=block / 2.0, causal=False,
                       window=False)
    long = _attention(hardware, model, seq, share, t, length=block, causal=False,
                      window=False)
    return {"first_forward": first[0], "first_backward": first[1],
            "forward": 0.5 * (short[0] + long[0]), "backward": 0.5 * (short[1] + long[1])}


def ring_backward_exposed(hop, first, step, cp):
    """Exposed seconds of the ring's backward exchange (Transformer Engine's order): each of
    the ``cp`` steps sends at its start, under its own compute, step 0 a K, V block
    (``hop``), the middle ones a block and the gradients of the last (``2 hop``), the last
    step the gradients alone (``hop``)."""
    cp = np.asarray(cp, np.float64)
    return np.where(cp > 1, np.maximum(hop - first, 0.0)
                    + np.maximum(cp - 2.0, 0.0) * np.maximum(2.0 * hop - step, 0.0)
                    + np.maximum(hop - step, 0.0), 0.0)


def ring_exposed(hop, first, step, cp):
    """Exposed seconds of a ring's ``cp - 1`` hops, hop ``k + 1`` under step ``k``'s compute
    (``first`` for step 0, ``step`` for the others)."""
    cp = np.asarray(cp, np.float64)
    return np.where(cp > 1, np.maximum(hop - first, 0.0)
                    + np.maximum(cp - 2.0, 0.0) * np.maximum(hop - step, 0.0), 0.0)


def zero3_times(hardware: Hardware, params, collectives, t, replicas, zero, zero3: str,
                reduce_bytes: float = REDUCE_BYTES, gpus=None):
    """Per stage, ZeRO-3's seconds of one microbatch: the weights' all-gather (of one pass)
    and the gradients' reduce-scatter (``reduce_bytes`` a gradient), ``collectives`` of each
    (one per layer, the embedding and the output layer), over ``replicas`` ranks ``t`` apart
    (0 where ``zero < 3``, and with ``zero3="step"``, whose collectives run once a step:
    ``step_terms``; ``gpus`` the job's, as there)."""
    collectives = np.maximum(np.asarray(collectives, np.float64), 1.0)
    spans = data_parallel_per_node(hardware, t, replicas, gpus)
    each = (np.asarray(zero) == 3) & (zero3 == "layer")
    gather = collectives * all_gather(hardware, GATHER_BYTES * params / collectives, replicas,
                                      spans)
    scatter = collectives * reduce_scatter(hardware, reduce_bytes * params / collectives,
                                           replicas, spans)
    return np.where(each, gather, 0.0), np.where(each, scatter, 0.0)


def _grouped_checkpoints(group, layers, full, totals):
    """A stage's ``act``, ``held_by_w`` and ``recomputed`` bytes where full recomputation
    checkpoints its layers in groups of ``group`` (Megatron's ``--recompute-method uniform``
    with ``--recompute-num-layers``, ``megatron/core/recompute.py``): one input kept a
    group, not a layer, and a group's backward re-runs its layers' forwards from that input
    at once, all their activations alive (``recomputed_bytes``' working set for each layer
    of the largest group, and the inputs of all but its first). ``totals``: the stage's
    terms with every layer its own checkpoint, ``kept`` its layers' inputs (MTP's aside);
    ``full``: the stages that recompute."""
    kept = totals["kept"]
    each = np.divide(kept, layers, out=np.zeros_like(kept), where=layers > 0)
    fewer = np.where(full, kept - np.ceil(layers / group) * each, 0.0)
    held = np.divide(totals["held_by_w"], kept, out=np.zeros_like(kept), where=kept > 0)
    largest = np.minimum(layers, group)
    recomputed = np.where(full & (largest > 1),
                          largest * totals["recomputed"] + (largest - 1) * each,
                          totals["recomputed"])
    return (totals["act"] - fewer, totals["held_by_w"] - fewer * held, recomputed)


def recomputed_bytes(stored, kept, recompute):
    """The bytes a recomputation brings back for one layer's backward beyond what the layer
    keeps (its working set, alive until that backward ends): the layer's ``stored`` bytes
    without recomputation less those it ``kept``, where ``recompute`` (an index into
    ``transformer.RECOMPUTE``) recomputes. Full recomputation re-runs the layer's forward from
    its input inside its backward (Megatron's ``CheckpointFunction``, PyTorch's reentrant
    ``checkpoint``), so the bytes Korthikanti et al. 2022 count for a layer without
    recomputation are alive at once beside the checkpoints; the selective one re-runs the
    attention core, whose scores (without FlashAttention) live through its backward. Megatron's
    ``theoretical_memory_usage.py`` counts neither. ``stage_table``'s ``working`` holds it
    with ``cp_buffer_bytes``."""
    return np.where(np.asarray(recompute) >= 1, np.maximum(stored - kept, 0.0), 0.0)


# The logits a last stage keeps for its loss's backward, bytes a logit by Transformer.loss
# (stage_table's act): an fp32 copy of them, or flash-attn's loss its bf16 input itself
LOSS_KEPT_BYTES = {"in-place": 4.0, "fused": 4.0, "cross-entropy": 4.0, "flash-attn": 2.0}
# Beyond the logits a last stage keeps (LOSS_KEPT_BYTES): the bytes a
# logit its loss holds at once besides, by Transformer.loss, without and with tensor
# parallelism. Megatron's vocabulary-parallel cross entropy works in place in its fp32 copy
# ("in-place"), beside the half-precision logits it was cast from (alive in the caller through
# the loss's forward) and, in its backward, the half-precision gradient cast from its own: 2;
# fused ("fused"), alike. PyTorch's cross_entropy on logits.float() ("cross-entropy",
# torchtitan's) makes its log-softmax and each gradient anew: 4 bytes a logit kept, 12 at its
# backward's start (the kept log-softmax, the gradient in, the gradient out); torchtitan's
# loss_parallel with t > 1 builds its backward's exp and sums apart: 16
# (tests/test_loss_memory.py measures both). flash-attn's ("flash-attn") keeps the bf16
# logits it reads and writes their gradient anew (inplace_backward off, llm-foundry's use): 2.
# An MTP module's own logits are not given it.
LOSS_WORKING_BYTES = {"in-place": (2.0, 2.0), "fused": (2.0, 2.0), "cross-entropy": (8.0, 12.0),
                      "flash-attn": (2.0, 2.0)}
# and a pipeline stage's output, the bf16 logits, kept with its microbatch until its backward
# (PyTorch's pipelining holds it in the stage's forward cache): bytes a logit more kept
LOSS_PIPELINE_KEPT = {"in-place": 0.0, "fused": 0.0, "cross-entropy": 2.0, "flash-attn": 0.0}


def loss_bytes(model: Transformer, tokens, t) -> np.ndarray:
    """The loss's working set on its stage, beyond the logits it keeps
    (``LOSS_KEPT_BYTES``).

    Parameters
    ----------
    model : Transformer
        Its ``loss`` and vocabulary.
    tokens, t : array_like
        A rank's tokens a microbatch (its share of the sequence under context parallelism)
        and the tensor-parallel degree, broadcast.

    Returns
    -------
    ndarray
        ``LOSS_WORKING_BYTES[model.loss]`` a logit (without or with tensor parallelism) of
        ``tokens * vocab / t`` logits.
    """
    t = np.asarray(t)
    alone, parallel = LOSS_WORKING_BYTES[model.loss]
    return np.where(t > 1, parallel, alone) * np.asarray(tokens, np.float64) * model.vocab / t


# The training metrics' bytes a logit (RunConfig.train_metrics): the bf16 logits the loop still
# holds and, one metric at a time, its fp32 copy and log_softmax's output
METRIC_BYTES = BYTES + 8.0


def metric_bytes(model: Transformer, tokens, t) -> np.ndarray:
    """What the loss's stage holds while a training metric runs, beyond its weights, gradients
    and optimizer state: ``METRIC_BYTES`` a logit of ``tokens * vocab / t`` logits. It runs
    after the microbatch's backward, its activations freed: the device's peak activations are
    at least this (exact with one stage, and on the last stage of 1F1B, which then holds no
    other microbatch; a lower bound where it does).

    Parameters
    ----------
    model : Transformer
    tokens, t : array_like
        A rank's tokens a microbatch and the tensor-parallel degree, broadcast.

    Returns
    -------
    ndarray
    """
    return METRIC_BYTES * np.asarray(tokens, np.float64) * model.vocab / np.asarray(t)


@known_keywords("device_working_bytes")
def device_working_bytes(working, device, devices: int) -> np.ndarray:
    """Per device, the largest of its stages' bytes: with ``stage_table``'s (or
    ``ModelCosts``') ``working``, what the device holds at its peak beyond the activations
    the engine counts (``Result.peak_activations``), as ``plan`` adds it; with
    ``recomputed``, the recomputed layer's part.

    Parameters
    ----------
    working : array_like
        Per stage, bytes >= 0.
    device : array_like of int
        Each stage's device (``Schedule.stage_to_device``), below ``devices``.
    devices : int

    Returns
    -------
    ndarray
        One value per device (0 for a device without stages).

    Raises
    ------
    ScheduleError
        If a device is out of range, a byte count negative, or the two differ in length.

    Examples
    --------
    >>> device_working_bytes([5.0, 2.0, 7.0, 1.0], [0, 1, 1, 0], 3).tolist()
    [5.0, 7.0, 0.0]
    """
    devices = positive_int(devices, "devices")
    device = indices(device, "device", devices)
    working = numbers(working, "working", strict=False)
    if working.shape != device.shape:
        raise ScheduleError(f"working and device must hold one value a stage (got shapes "
                            f"{working.shape} and {device.shape})")
    out = np.zeros(devices)
    np.maximum.at(out, device, working)
    return out


@known_keywords("device_held_bytes")
def device_held_bytes(peak_activations, working, after, device, devices: int) -> np.ndarray:
    """Per device, the activation bytes ``plan`` reports (``activation_bytes``): the engine's
    ``peak_activations`` plus the largest ``working`` of its stages, and at least the largest
    ``after`` (what the loss's stage holds while the training metrics run).

    Parameters
    ----------
    peak_activations : array_like
        Per device (``Result.peak_activations``).
    working, after : array_like
        Per stage (``stage_table``'s or ``ModelCosts``').
    device : array_like of int
        Each stage's device (``Schedule.stage_to_device``), below ``devices``.
    devices : int

    Returns
    -------
    ndarray

    Examples
    --------
    >>> device_held_bytes([3.0, 1.0], [1.0, 2.0], [0.0, 9.0], [0, 1], 2).tolist()
    [4.0, 9.0]
    """
    return np.maximum(np.asarray(peak_activations, np.float64)
                      + device_working_bytes(working, device, devices),
                      device_working_bytes(after, device, devices))


def with_recipe(layer: dict, times: dict, terms: dict) -> tuple[dict, dict]:
    """A layer's ``layer_costs`` and ``layer_times`` with a recipe's terms
    (``fastpp.model.recipes.recipe_terms``): its bytes less what the recipe saves (``gamma``,
    the share ``W`` keeps, unchanged), the recomputation and the exposed host copies added to
    its forward and input-grad backward, and the tensor-parallel exchanges its recomputation
    repeats (torchtitan's op-level policy: ``recipes.op_level_terms``)."""
    layer = {**layer, "activations": np.maximum(layer["activations"] - terms["bytes"], 0.0),
             "collectives_backward": layer["collectives_backward"]
             + terms.get("collectives_backward", 0.0)}
    times = {**times, "forward": times["forward"] + terms["offload_f"],
             "input_grad": times["input_grad"] + terms["attention"] + terms["mlp"]
             + terms["offload_b"]}
    return layer, times


def _fp8_inputs(layer: dict, stored, model, hardware, grid, **kind) -> tuple[dict, object]:
    """A layer's bytes (``layer_costs``' ``activations`` and the ``stored`` count without
    recomputation) less what its FP8 products keep as FP8 copies, as Transformer Engine
    keeps them (``recipes.fp8_saved_bytes``; ``kind`` its ``moe``, ``etp``, ``imbalance``):
    unchanged in bf16 and on the stacks whose inputs stay bf16 (``FP8_BF16_INPUTS``)."""
    if hardware.precision != "fp8" or grid.framework in FP8_BF16_INPUTS:
        return layer, stored
    fp8 = functools.partial(fp8_saved_bytes, model, grid.recipe, grid.seq, grid.rank_batch,
                            grid.t, sequence_parallel=grid.sequence_parallel, **kind)
    return ({**layer, "activations": np.maximum(layer["activations"] - fp8(grid.recompute),
                                                0.0)},
            stored - fp8(0))


def _moe_layer(model, hardware, grid, exchange):
    """An MoE layer's seconds, bytes and ``gamma`` per configuration of ``grid``, its four
    all-to-alls inside the forward and the input-grad backward (the recomputed forward's
    too); ``exchange`` is a layer's tensor-parallel exchange (``_layer_prices``)."""
    seq, b, t, ep, etp, rc = grid.seq, grid.rank_batch, grid.t, grid.ep, grid.etp, grid.recompute
    sequence_parallel, imbalance, recipe = grid.sequence_parallel, grid.imbalance, grid.recipe
    layer = moe_layer_costs(model, seq, b, t, etp, sequence_parallel, rc, imbalance)
    times = layer_times(model, hardware, seq, b, t, sequence_parallel, rc,
                        mlp=expert_times(model, hardware, seq, b, t, ep, etp,
                                         sequence_parallel, imbalance, grid.dispatcher))
    a2a = all_to_all_times(model, hardware, seq, b, t, ep, etp,
                           dispatch_precision(hardware.precision, recipe), grid.node_limit,
                           imbalance, dispatcher=grid.dispatcher,
                           gpus=grid.gpus)
    ahead = a2a["dispatch_f"] + a2a["combine_f"]
    behind = a2a["dispatch_b"] + a2a["combine_b"] + np.where(rc == 2, ahead, 0.0)
    stored = moe_layer_costs(model, seq, b, t, etp, sequence_parallel, 0,
                             imbalance)["activations"]
    if recipe is not None:
        terms = recipe_terms(model, hardware, recipe, seq, b, t, rc, sequence_parallel,
                             moe=True, ep=ep, etp=etp, imbalance=imbalance, a2a=a2a,
                             forward=times["forward"], input_grad=times["input_grad"],
                             dispatcher=grid.dispatcher)
        layer, times = with_recipe(layer, times, terms)
        behind = behind + terms["comm"]
        stored = stored - recipe_terms(model, hardware, recipe, seq, b, t, 0,
                                       sequence_parallel, moe=True, ep=ep, etp=etp,
                                       imbalance=imbalance)["bytes"]
    layer, stored = _fp8_inputs(layer, stored, model, hardware, grid, moe=True, etp=etp,
                                imbalance=imbalance)
    tp_forward, tp_backward = _exposed_exchange(layer, times, exchange, grid.tp_overlap)
    return {"forward": times["forward"] + tp_forward + ahead,
            "input_grad": times["input_grad"] + tp_backward + behind,
            "weight_grad": times["weight_grad"], "activations": layer["activations"],
            "gamma": layer["gamma"],
            "recomputed": recomputed_bytes(stored, layer["activations"], rc)}


def chunk_kinds(model: Transformer, layers, loss, mtp) -> tuple[np.ndarray, np.ndarray]:
    """Per model chunk (in model order): its MoE layers (the model's ``dense_layers`` are
    dense) and its MTP modules (the layout's, or all on the chunk holding the loss when the
    layout places none)."""
    layers = np.asarray(layers, np.float64)
    start = np.cumsum(layers) - layers
    if model.moe:
        moe = layers - model.dense_between(start, start + layers)
    else:
        moe = 0.0 * layers
    mtp = np.asarray(mtp, np.float64)
    if model.mtp_depth and not mtp.sum():
        mtp = np.where(np.asarray(loss, bool), float(model.mtp_depth), 0.0)
    return moe, mtp


def stage_params(model: Transformer, layers, embedding, loss, t, moe_layers=0.0, mtp=0.0):
    """Parameters of each stage on one tensor-parallel rank but the routed experts': its
    layers (an MoE layer's attention, norms, router and shared experts), its MTP modules,
    plus the embedding and the output layer where it holds them, and an embedding of its own
    where it holds MTP modules and not the embedding (Megatron's ``GPTModel`` builds one for
    ``mtp_process``, tied to the first stage's: a weight with its own gradient and optimizer
    state; unpriced until 7 December 2026, a review); split over ``t`` but what every rank
    holds whole (``Transformer.replicated_params``: MLA's down-projections, the router; they
    had been split too, DeepSeek-V3's 15 M a layer at t = 2)."""
    head = model.vocab * model.hidden
    whole = model.replicated_params()
    if not model.moe and not model.mtp_depth:
        return ((layers * (model.layer_params() - whole) + np.asarray(embedding) * head
                 + np.asarray(loss) * head) / t + layers * whole)
    routed = model.experts * model.expert_params()
    moe = model.layer_params(True) - routed if model.moe else 0.0
    mtp_dense = model.mtp_params() - (routed if model.moe else 0.0)
    moe_whole = model.replicated_params(True) if model.moe else 0.0
    mtp_whole = model.replicated_params(model.moe)
    dense_layers = layers - moe_layers
    copy = (np.asarray(mtp) > 0) & ~np.asarray(embedding, bool)  # (the MTP's embedding)
    return ((dense_layers * (model.layer_params() - whole) + moe_layers * (moe - moe_whole)
             + mtp * (mtp_dense - mtp_whole) + (np.asarray(embedding) + copy) * head
             + np.asarray(loss) * head) / t
            + dense_layers * whole + moe_layers * moe_whole + mtp * mtp_whole)


def expert_stage_params(model: Transformer, moe_layers, mtp, ep, etp):
    """The routed experts' parameters of each stage on one GPU: ``E / ep`` experts a layer
    (the MTP modules' too), each split over ``etp``."""
    if not model.moe:
        return 0.0 * np.asarray(moe_layers, np.float64) + 0.0 * np.asarray(ep, np.float64)
    return ((np.asarray(moe_layers, np.float64) + mtp) * model.experts * model.expert_params()
            / (np.asarray(ep, np.float64) * etp))


def optimizer_split(params, d, zero, zero3: str = "layer", in_flight=0.0,
                    reduce_bytes=REDUCE_BYTES, optimizer_bytes=OPTIMIZER_BYTES):
    """Weight, gradient and optimizer bytes of ``params`` parameters under ZeRO ``zero``
    over ``d`` replicas (all broadcast; with context parallelism ``d`` is ``d cp``), the
    gradients held at ``reduce_bytes`` a parameter and the optimizer's states at
    ``optimizer_bytes``. ZeRO-3 shards the weights too; gathered per layer
    (``zero3="layer"``) a device also holds ``in_flight`` parameters whole
    (``IN_FLIGHT_LAYERS`` layers), gathered per step it holds all its weights and gradients
    whole through the step (FSDP2 under PyTorch's pipelining reduces the accumulated gradients
    once, after the last microbatch)."""
    d = np.asarray(d, np.float64)
    zero = np.asarray(zero)
    # gathered per step, FSDP accumulates the microbatches' gradients whole, reduced at the end
    grads = reduce_bytes / np.where((zero >= 2) & ~((zero == 3) & (zero3 == "step")), d, 1.0)
    optimizer = optimizer_bytes / np.where(zero >= 1, d, 1.0)
    weights = params * WEIGHT_BYTES
    if zero3 == "layer":  # in flight: at most what the device holds, none when unsharded
        flight = np.where(d > 1, np.minimum(np.asarray(in_flight), params), 0.0)
        weights = np.where(zero == 3, weights / d + WEIGHT_BYTES * flight, weights)
    return weights, params * grads, params * optimizer



def device_parameters(model: Transformer, device, devices: int, params, expert_params,
                      embedding, loss, t, mtp=None) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the parameters of the stages it holds, and those of their routed experts.

    ``device`` gives each stage's device (below ``devices``; several configurations may share
    one flat table), ``params`` and ``expert_params`` each stage's (``stage_params``,
    ``expert_stage_params``), ``embedding`` and ``loss`` which stages hold each model copy's
    two ends (one of each per copy, in order), ``t`` the tensor-parallel degree (per stage or
    one), ``mtp`` each stage's MTP modules. A tied output layer on its embedding's device is
    one copy: the weight is shared there, and a second copy is kept only on another device;
    so is the MTP's own embedding (``stage_params``), as DeepSeek-V3's DualPipe shares it
    with the first stage on their one device."""
    device = np.asarray(device)
    held = np.bincount(device, weights=params, minlength=devices)
    tp = np.broadcast_to(np.asarray(t, np.float64), device.shape)
    if mtp is not None:
        copy = np.flatnonzero((np.asarray(mtp) > 0) & ~np.asarray(embedding, bool)
                              & np.isin(device, device[np.asarray(embedding, bool)]))
        np.subtract.at(held, device[copy], model.vocab * model.hidden / tp[copy])
    if model.tied_embeddings:
        ends = np.flatnonzero(embedding), np.flatnonzero(loss)
        shared = ends[0][device[ends[0]] == device[ends[1]]]
        np.subtract.at(held, device[shared], model.vocab * model.hidden / tp[shared])
    experts = np.bincount(device, weights=expert_params, minlength=devices)
    return held, experts


def device_memory(model: Transformer, params, experts, t, replicas, edp, zero,
                  zero3: str = "layer", replicate=1, reduce_bytes=REDUCE_BYTES,
                  optimizer_bytes=OPTIMIZER_BYTES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weight, gradient and optimizer bytes per device holding ``params`` dense and
    ``experts`` routed-expert parameters (``device_parameters``): the dense ones under ZeRO
    ``zero`` over ``replicas`` (``d cp``), the routed experts' over ``edp``
    expert-data-parallel replicas, each with ZeRO-3's ``IN_FLIGHT_LAYERS`` layers whole (a
    layer's experts on one GPU: ``E / (ep etp)`` of them, ``ep etp = t replicas / edp``).
    With ``replicate`` groups (hybrid sharding) ZeRO shards over a group's share of each:
    ``replicas / replicate`` and ``edp / replicate``. Gradients at ``reduce_bytes`` and the
    optimizer at ``optimizer_bytes`` a parameter (``optimizer_split``). Arrays broadcast."""
    # a layer whole, outside its routed experts: the largest kind of layer the model has
    t = np.asarray(t)
    unit = model.layer_params() / t + model.replicated_params() * (1 - 1 / t)
    if model.moe:
        moe = model.layer_params(True) - model.experts * model.expert_params()
        unit = np.maximum(unit if model.dense_layers else 0.0,
                          moe / t + model.replicated_params(True) * (1 - 1 / t))
    replicate = np.asarray(replicate, np.float64)
    dense = optimizer_split(params, np.asarray(replicas) / replicate, zero, zero3,
                            IN_FLIGHT_LAYERS * unit, reduce_bytes, optimizer_bytes)
    apart = np.asarray(t) * np.asarray(replicas) / np.asarray(edp)
    routed = optimizer_split(experts, np.asarray(edp) / replicate, zero, zero3,
                             IN_FLIGHT_LAYERS * expert_stage_params(model, 1.0, 0.0, apart, 1.0),
                             reduce_bytes, optimizer_bytes)
    return tuple(a + e for a, e in zip(dense, routed, strict=True))


# ZeRO's all-gather moves the half-precision weights (the gradients: config.REDUCE_BYTES)
GATHER_BYTES = 2.0
BUCKET_PARAMS = 40e6  # Megatron's default gradient bucket, in parameters


def step_terms(hardware: Hardware, params, t, d, zero, *, embedding_params=0.0,
               embedding_per_node=2, overlap: bool = False, window=0.0,
               reduce_bytes: float = REDUCE_BYTES, zero3: str = "layer", host_step: bool = True,
               replicate=1, gpus=None) -> dict[str, np.ndarray]:
    """The step's time outside the pipeline, per configuration (arrays broadcast).

    Parameters
    ----------
    hardware : Hardware
    params : array_like
        Parameters on the fullest device (one tensor-parallel rank).
    t, d, zero : array_like
        Tensor-parallel degree, data-parallel replicas (times the context-parallel degree:
        gradients are reduced over both) and ZeRO stage. ZeRO-3 gathered per layer
        (``zero3="layer"``) reduces its gradients in each backward (``stage_table``): none
        here; gathered per step (``"step"``), its weights' all-gather and its gradients'
        reduce-scatter are here, once.
    embedding_params : array_like
        Parameters of a tied embedding held on two pipeline stages (0 if none): their
        gradients are all-reduced between the two.
    embedding_per_node : array_like
        1 if that all-reduce crosses nodes, else 2.
    overlap : bool
        Megatron's ``--overlap-grad-reduce`` and ``--overlap-param-gather``: the gradient
        reduction runs in buckets of ``BUCKET_PARAMS`` under the last microbatch's backward
        (``window`` seconds), the parameter all-gather under the next forward; the last
        bucket of each stays exposed. Default: neither overlapped, as Megatron by default.
    window : array_like
        Seconds of backward the reduction can hide under.
    reduce_bytes : float
        Bytes per reduced gradient: 4 (fp32, Megatron with bf16), 2 (fp16 training).
    zero3 : {"layer", "step"}
        ZeRO-3's collectives (``ZERO3_GATHERS``): per layer in each microbatch, or once a
        step here (the reduction then exposed: it follows the last backward).
    host_step : bool
        Count ``Hardware.host_step`` in ``optimizer_step`` (once a step: False for a second
        group of parameters, the routed experts).
    replicate : array_like
        ZeRO's replica groups (hybrid sharding, ``RunConfig.replicate``): ZeRO shards over
        the ``d / replicate`` ranks of a group (ranks ``t`` apart), and each rank's share of
        the reduced gradients is all-reduced across the groups (ranks ``t d / replicate``
        apart), once a step, its time added to the reduction's.
    gpus : array_like, optional
        GPUs of the job, which say where a group straddles two nodes
        (``comm.data_parallel_per_node``; default: unknown).

    Returns
    -------
    dict
        ``gradient_sync`` (exposed seconds of the gradient reduction, an all-reduce, or a
        reduce-scatter under ZeRO), ``parameter_gather`` (ZeRO's all-gather of the updated
        weights, exposed), ``embedding_sync`` and ``optimizer_step`` (Adam over the device's
        share, memory-bound, plus the iteration's fixed CPU time ``Hardware.host_step``), each
        in seconds.
    """
    params = np.asarray(params, np.float64)
    d = np.asarray(d, np.float64)
    zero = np.asarray(zero)
    replicate = np.asarray(replicate, np.float64)
    shard = d / replicate  # ZeRO's group
    spans, shard_spans = (data_parallel_per_node(hardware, t, x, gpus) for x in (d, shard))
    sharded = zero >= 1
    each = (zero == 3) & (zero3 == "layer")  # reduced in each backward (stage_table)
    # across the replica groups, each rank's share of the gradients (hybrid sharding)
    across = np.where(sharded, all_reduce(
        hardware, reduce_bytes * params / shard, replicate,
        data_parallel_per_node(hardware, np.asarray(t) * shard, replicate, gpus)), 0.0)
    reduce = across + np.where(each, 0.0, np.where(
        sharded, reduce_scatter(hardware, reduce_bytes * params, shard, shard_spans),
        all_reduce(hardware, reduce_bytes * params, d, spans)))
    gather = np.where(sharded & ~each,
                      all_gather(hardware, GATHER_BYTES * params, shard, shard_spans), 0.0)
    if overlap:  # (FSDP under PyTorch's pipelining reduces after the last backward: exposed)
        last = np.where((zero == 3) & (zero3 == "step"), 1.0,
                        np.minimum(1.0, BUCKET_PARAMS / np.maximum(params, 1.0)))
        reduce = np.maximum(reduce - np.asarray(window, np.float64), last * reduce)
        gather = last * gather
    embedding_params = np.asarray(embedding_params, np.float64)
    embedding = np.where(embedding_params > 0, all_reduce(
        hardware, reduce_bytes * embedding_params, 2, embedding_per_node), 0.0)
    return {"gradient_sync": reduce, "parameter_gather": gather,
            "embedding_sync": embedding + 0.0 * params,
            "optimizer_step": optimizer_time(hardware, params / np.where(sharded, shard, 1.0))
            + (hardware.host_step if host_step else 0.0)}
