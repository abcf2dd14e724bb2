"""Per-stage costs and per-device bytes of a transformer on a schedule, for many
configurations at once (NumPy over the stages of all of them)."""

from __future__ import annotations

import numpy as np

from .comm import (
    all_gather,
    all_reduce,
    data_parallel_per_node,
    pipeline_spans,
    reduce_scatter,
    tensor_parallel_per_node,
)
from .compute import head_times, layer_times, optimizer_time
from .hardware import Hardware
from .transformer import BYTES, Transformer, layer_costs

# bytes per parameter (mixed-precision Adam, Rajbhandari et al. 2020): half weights, half
# gradients, fp32 master weights, momentum and variance
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2.0, 2.0, 12.0
ZERO = (0, 1, 2)  # stage 1 shards the optimizer states over d, stage 2 the gradients too


def stage_table(model: Transformer, hardware: Hardware, seq: int, *, config, layers, embedding,
                loss, microbatch, t, d, p, m, sequence_parallel, recompute,
                tp_overlap: bool = False, blocking: bool = False):
    """Costs of every stage of many configurations, in the units of ``fastpp.Costs``.

    Per stage: ``config`` (its configuration), ``layers`` (transformer layers), ``embedding``
    and ``loss`` (whether it holds the embedding, or the output layer and the loss); per
    configuration (indexed by ``config``): ``microbatch``, ``t``, ``d``,
    ``p``, ``m`` and ``recompute`` (an index into ``transformer.RECOMPUTE``). Times are the
    per-op model of ``fastpp.model.compute`` plus the tensor-parallel collectives of
    ``fastpp.model.comm`` on the critical path; with ``tp_overlap`` (Transformer Engine's
    ``--tp-comm-overlap``) a layer's collectives run under its own compute, only what exceeds
    it exposed. With ``blocking`` (Megatron without ``--overlap-p2p-communication``: a batched
    send and receive between two ops), each chunk op with ``p > 1`` also holds its device for
    one hand-off's transfer.

    Returns
    -------
    dict
        Per stage ``f, b, w`` (seconds, per device of a plain pipeline: ``m`` times a chunk's
        time), ``act`` (bytes, likewise ``m`` times a chunk's), ``gamma`` and ``params`` (on
        one rank); per configuration ``comm`` (latency), ``bandwidth`` and ``message_bytes``
        of the pipeline's hand-offs.
    """
    # a layer's costs depend on its configuration only: priced once per configuration
    b, tp, rc = np.broadcast_arrays(np.asarray(microbatch), np.asarray(t),
                                    np.asarray(recompute))
    layer = layer_costs(model, seq, b, tp, sequence_parallel, rc)
    times = layer_times(model, hardware, seq, b, tp, sequence_parallel, rc)
    head = head_times(model, hardware, seq, b, tp, sequence_parallel)
    sbh = seq * b * model.hidden
    spans = tensor_parallel_per_node(hardware, tp)
    # the layer's two tensor-parallel exchanges of its 2sbh output each way: all-reduces, or
    # an all-gather and a reduce-scatter each with sequence parallelism (the same bytes)
    exchange = (all_gather(hardware, BYTES * sbh, tp, spans)
                + reduce_scatter(hardware, BYTES * sbh, tp, spans) if sequence_parallel
                else all_reduce(hardware, BYTES * sbh, tp, spans))
    tp_forward = layer["collectives_forward"] * exchange
    tp_backward = layer["collectives_backward"] * exchange
    if tp_overlap:
        tp_forward = np.maximum(tp_forward - times["forward"], 0.0)
        tp_backward = np.maximum(tp_backward - times["input_grad"] - times["weight_grad"], 0.0)
    # the embedding's output and the logits' input cross the ranks once each way; the
    # vocabulary-parallel loss all-reduces its max, sum and target logit (4 bytes a token)
    edge = np.where(tp > 1, exchange, 0.0) / (2.0 if sequence_parallel else 1.0)
    loss_sync = 3.0 * all_reduce(hardware, 4.0 * seq * b, tp, spans)

    def per_stage(x):
        return np.broadcast_to(x, b.shape)[config]

    starts, ends = embedding, loss
    forward = (layers * per_stage(times["forward"] + tp_forward)
               + starts * per_stage(head["embed_forward"] + edge)
               + ends * per_stage(head["head_forward"] + loss_sync
                                  + (edge if sequence_parallel else 0.0)))
    weight = (layers * per_stage(times["weight_grad"]) + ends * per_stage(head["head_weight_grad"])
              + starts * per_stage(head["embed_weight"]))
    backward = (layers * per_stage(times["input_grad"] + tp_backward) + weight
                + ends * per_stage(head["head_input_grad"] + edge))
    kept = layers * per_stage(layer["activations"])
    act = (kept + starts * per_stage(BYTES * sbh / np.where(sequence_parallel, tp, 1.0))
           + ends * per_stage(4.0 * seq * b * model.vocab / tp))
    gamma = np.divide(kept * per_stage(layer["gamma"]), act, out=np.zeros_like(act),
                      where=act > 0)
    params = stage_params(model, layers, embedding, loss, per_stage(tp))
    mm = m[config]
    # one node holds the whole pipeline, or hand-offs cross nodes (ranks: t fastest, then d, p)
    crossing = pipeline_spans(hardware, t, d, p)
    latency = np.where(crossing, hardware.network.latency, hardware.node.latency)
    bandwidth = np.where(crossing, hardware.network.bandwidth, hardware.node.bandwidth)
    # each tensor-parallel rank sends its 1/t slice (Megatron's scatter-gather hand-off)
    message = BYTES * seq * microbatch * model.hidden / t
    held = np.where(blocking & (np.asarray(p) > 1), latency + message / bandwidth, 0.0)
    held = np.where(forward > 0, per_stage(held), 0.0)  # a stage without work stays refused
    return {
        "f": (forward + held) * mm,
        "b": (backward + held) * mm,
        "w": weight * mm,
        "act": np.maximum(act, 1.0) * mm,
        "gamma": gamma,
        "params": params,
        "comm": latency,
        "bandwidth": bandwidth,
        "message_bytes": message,
    }


def stage_params(model: Transformer, layers, embedding, loss, t):
    """Parameters of each stage on one tensor-parallel rank: its layers, plus the embedding
    and the output layer where it holds them."""
    head = model.vocab * model.hidden
    return (layers * model.layer_params() + np.asarray(embedding) * head
            + np.asarray(loss) * head) / t


def optimizer_split(params, d, zero):
    """Weight, gradient and optimizer bytes of ``params`` parameters under ZeRO ``zero``
    over ``d`` replicas (all broadcast)."""
    d = np.asarray(d, np.float64)
    zero = np.asarray(zero)
    grads = GRADIENT_BYTES / np.where(zero >= 2, d, 1.0)
    optimizer = OPTIMIZER_BYTES / np.where(zero >= 1, d, 1.0)
    return params * WEIGHT_BYTES, params * grads, params * optimizer


# gradients are reduced in fp32 (Megatron accumulates and reduces them so in bf16 training);
# ZeRO's all-gather moves the half-precision weights
REDUCE_BYTES, GATHER_BYTES = 4.0, 2.0
BUCKET_PARAMS = 40e6  # Megatron's default gradient bucket, in parameters


def step_terms(hardware: Hardware, params, t, d, zero, *, embedding_params=0.0,
               embedding_per_node=2, overlap: bool = False, window=0.0,
               reduce_bytes: float = REDUCE_BYTES               ) -> dict[str, np.ndarray]:
    """The step's time outside the pipeline, per configuration (arrays broadcast).

    Parameters
    ----------
    hardware : Hardware
    params : array_like
        Parameters on the fullest device (one tensor-parallel rank).
    t, d, zero : array_like
        Tensor-parallel degree, data-parallel replicas and ZeRO stage.
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

    Returns
    -------
    dict
        ``gradient_sync`` (exposed seconds of the gradient reduction, an all-reduce, or a
        reduce-scatter under ZeRO), ``parameter_gather`` (ZeRO's all-gather of the updated
        weights, exposed), ``embedding_sync`` and ``optimizer_step`` (Adam over the device's
        share, memory-bound), each in seconds.
    """
    params = np.asarray(params, np.float64)
    d = np.asarray(d, np.float64)
    zero = np.asarray(zero)
    spans = data_parallel_per_node(hardware, t, d)
    sharded = zero >= 1
    reduce = np.where(sharded, reduce_scatter(hardware, reduce_bytes * params, d, spans),
                      all_reduce(hardware, reduce_bytes * params, d, spans))
    gather = np.where(sharded, all_gather(hardware, GATHER_BYTES * params, d, spans), 0.0)
    if overlap:
        last = np.minimum(1.0, BUCKET_PARAMS / np.maximum(params, 1.0))
        reduce = np.maximum(reduce - np.asarray(window, np.float64), last * reduce)
        gather = last * gather
    embedding_params = np.asarray(embedding_params, np.float64)
    embedding = np.where(embedding_params > 0, all_reduce(
        hardware, reduce_bytes * embedding_params, 2, embedding_per_node), 0.0)
    return {"gradient_sync": reduce, "parameter_gather": gather,
            "embedding_sync": embedding + 0.0 * params,
            "optimizer_step": optimizer_time(hardware, params / np.where(sharded, d, 1.0))}
