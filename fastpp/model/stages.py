"""Per-stage costs and per-device bytes of a transformer on a schedule, for many
configurations at once (NumPy over the stages of all of them)."""

from __future__ import annotations

import numpy as np

from .hardware import Hardware
from .transformer import BYTES, Transformer, layer_costs

# bytes per parameter (mixed-precision Adam, Rajbhandari et al. 2020): half weights, half
# gradients, fp32 master weights, momentum and variance
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2.0, 2.0, 12.0
ZERO = (0, 1, 2)  # stage 1 shards the optimizer states over d, stage 2 the gradients too


def stage_table(model: Transformer, hardware: Hardware, seq: int, *, config, layers, embedding,
                loss, microbatch, t, d, p, m, sequence_parallel, recompute):
    """Costs of every stage of many configurations, in the units of ``fastpp.Costs``.

    Per stage: ``config`` (its configuration), ``layers`` (transformer layers), ``embedding``
    and ``loss`` (whether it holds the embedding, or the output layer and the loss); per
    configuration (indexed by ``config``): ``microbatch``, ``t``, ``d``,
    ``p``, ``m`` and ``recompute`` (an index into ``transformer.RECOMPUTE``).

    Returns
    -------
    dict
        Per stage ``f, b, w`` (seconds, per device of a plain pipeline: ``m`` times a chunk's
        time), ``act`` (bytes, likewise ``m`` times a chunk's), ``gamma`` and ``params`` (on
        one rank); per configuration ``comm`` (latency), ``bandwidth`` and ``message_bytes``
        of the pipeline's hand-offs.
    """
    b, tp, rc = microbatch[config], t[config], recompute[config]
    layer = layer_costs(model, seq, b, tp, sequence_parallel, rc)
    sbh = seq * b * model.hidden
    starts, ends = embedding, loss
    logits = 2.0 * sbh * model.vocab / tp  # each of the output layer's three products
    tp_time = hardware.node.ring(BYTES * sbh, tp)
    forward = layers * layer["forward"] + ends * logits
    weight = layers * layer["weight_grad"] + ends * logits
    backward = layers * (layer["input_grad"] + layer["weight_grad"]) + 2.0 * ends * logits
    act = (layers * layer["activations"]
           + starts * BYTES * sbh / np.where(sequence_parallel, tp, 1.0)
           + ends * 4.0 * seq * b * model.vocab / tp)
    gamma = np.divide(layers * layer["activations"] * layer["gamma"], act,
                      out=np.zeros_like(act), where=act > 0)
    params = stage_params(model, layers, embedding, loss, tp)
    mm = m[config]
    # one node holds the whole pipeline, or hand-offs cross nodes (ranks: t fastest, then d, p)
    in_node = t * d * p <= hardware.gpus_per_node
    link_bw = np.where(in_node, hardware.node.bandwidth, hardware.network.bandwidth)
    link_lat = np.where(in_node, hardware.node.latency, hardware.network.latency)
    return {
        "f": (hardware.seconds(forward) + layers * layer["collectives_forward"] * tp_time) * mm,
        "b": (hardware.seconds(backward) + layers * layer["collectives_backward"] * tp_time)
        * mm,
        "w": hardware.seconds(weight) * mm,
        "act": np.maximum(act, 1.0) * mm,
        "gamma": gamma,
        "params": params,
        "comm": link_lat,
        "bandwidth": link_bw,
        "message_bytes": BYTES * seq * microbatch * model.hidden
        / np.where(sequence_parallel, t, 1.0),
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
