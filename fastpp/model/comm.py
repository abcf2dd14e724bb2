"""Collectives and hand-offs: a bus-bandwidth model over NVLink or the network.

A ring collective over ``r`` ranks moves, on every rank, ``2 (r-1)/r`` of the message for an
all-reduce and ``(r-1)/r`` for a reduce-scatter or an all-gather (the message is the whole
tensor; NCCL's "bus bandwidth" is defined so that these fractions at ``busbw`` give the time),
plus one link latency per ring step (``2 (r-1)`` or ``r - 1``). A group inside one node runs
at the node link's bus bandwidth. A group that spans nodes with ``k`` members in each node runs
NCCL's parallel rings, one per member's network rail: ``min(node, k x network)`` bus
bandwidth (a tensor-parallel group of all 8 GPUs of each node gets 8 rails, a data-parallel
group of one GPU per node one rail); the ring's steps that leave a node wait on the network's
latency, the others on the node link's (the links' own latencies, in the form of NCCL's tuning
model), and an all-reduce takes NCCL's tree where it is faster (its ``log2`` of the nodes in
latency pays for the tree's lower bandwidth). A pipeline
hand-off is one message over one link: each rank sends its slice over its own rail; each hop
is priced by its own link (``hop_crosses``): NVLink between two stages in one node, the
network only where the hop leaves the node.

Ranks are ordered as Megatron orders them: tensor-parallel fastest, then context, data, then
pipeline, so a tensor-parallel group of ``t`` ranks spans nodes when ``t`` does not divide
``gpus_per_node`` (some groups do, and the slowest paces the rest), and a context-parallel
group (``c`` ranks ``t`` apart) or a data-parallel one (``c d`` ranks ``t`` apart, the
gradients' group with context parallelism) wherever a job beyond one node puts a node's
boundary inside one (``t 2``, ``d 3`` on 8 GPUs: ranks 6, 8, 10), not only where ``t c`` or
``t c d`` exceeds ``gpus_per_node`` (``data_parallel_per_node``, given the job's GPUs).
"""

from __future__ import annotations

import numpy as np

from .hardware import Hardware

TREE_BANDWIDTH = 0.9  # NCCL's tree: its bus bandwidth over the ring's (src/graph/tuning.cc)
NVLS_ARITY = 32  # NCCL's NCCL_MAX_NVLS_ARITY (src/include/device.h, 2.21-2.30.7)


def bus(hardware: Hardware, ranks, per_node):
    """Bus bandwidth of a group of ``ranks`` with ``per_node`` in each node."""
    ranks = np.asarray(ranks, np.float64)
    per_node = np.minimum(np.asarray(per_node, np.float64), ranks)
    return np.where(ranks > per_node, np.minimum(hardware.node.bandwidth,
                                                 per_node * hardware.network.bandwidth),
                    hardware.node.bandwidth)


def all_reduce(hardware: Hardware, message_bytes, ranks, per_node) -> np.ndarray:
    """Seconds of a ring all-reduce of ``message_bytes`` over ``ranks`` (0 for one rank), a
    group with ``per_node`` members in each node."""
    return _ring(hardware, message_bytes, ranks, per_node, 2.0)


def reduce_scatter(hardware: Hardware, message_bytes, ranks, per_node) -> np.ndarray:
    """Seconds of a ring reduce-scatter of a ``message_bytes`` tensor over ``ranks``."""
    return _ring(hardware, message_bytes, ranks, per_node, 1.0)


all_gather = reduce_scatter  # the same bytes and steps: each rank ends with the whole tensor


def _ring(hardware, message_bytes, ranks, per_node, passes):
    ranks = np.asarray(ranks, np.float64)
    per_node = np.minimum(np.asarray(per_node, np.float64), ranks)
    bandwidth = bus(hardware, ranks, per_node)
    steps = passes * (ranks - 1.0)
    fraction = steps / np.maximum(ranks, 1.0)
    inside = link_time(hardware.node, message_bytes, steps, fraction, passes)
    # NCCL's form of latency across nodes (src/graph/tuning.cc), at the links' own latencies
    # (not NCCL's per protocol): of a ring's steps, those that leave a node (``passes (nodes -
    # 1)``) wait on the network, the rest on the node's link; an all-reduce may run as a tree
    # instead, up and down ``ranks // nodes - 1`` hops in each node and ``floor(log2 nodes)``
    # between them, at 0.9 of the ring's bus bandwidth
    nodes = np.ceil(ranks / np.maximum(per_node, 1.0))
    crossing = passes * (nodes - 1.0)
    node_lat, network_lat = hardware.node.latency, hardware.network.latency
    across = (fraction * message_bytes / bandwidth + crossing * network_lat
              + (steps - crossing) * node_lat)
    if passes == 2.0:
        tree = (2.0 * message_bytes / (TREE_BANDWIDTH * bandwidth)
                + 2.0 * ((np.floor(ranks / nodes) - 1.0) * node_lat
                         + np.floor(np.log2(nodes)) * network_lat))
        across = np.minimum(across, tree)
    # never faster than the node link's protocols moving the message without a ring step:
    # NCCL's model (src/graph/tuning.cc) adds its base latency (baseLat) to every collective,
    # and the node's fitted protocol bases (NVLink3's LL 25.3 us) hold launch costs a call
    # across nodes pays too; the per-step latencies alone priced a 64 B all-reduce of 2
    # A100s, one a node, at 16 us against 26.2 us inside one node
    across = np.maximum(across, link_time(hardware.node, message_bytes, 0.0, fraction, passes))
    return np.where(ranks > 1, np.where(ranks > per_node, across, inside), 0.0)


def link_time(link, message_bytes, steps, fraction, passes=2.0) -> np.ndarray:
    """Seconds of ``steps`` ring steps over ``link`` moving ``fraction`` of ``message_bytes``
    through each rank: the fastest of the link's NCCL protocols (``Link.protocols``) that runs
    the message, each ``base + steps hop + fraction bytes / bandwidth``, or without them
    ``steps latency + fraction bytes / bandwidth``. With ``passes`` 1 (an all-gather or a
    reduce-scatter, not an all-reduce), a protocol without a per-step latency (an in-switch
    one, NVLink SHARP, its bandwidth an all-reduce's) runs at ``fraction**2 / 2`` of it, as
    NCCL's tuner prices them (src/graph/tuning.cc, 2.30.7: ``(r - 1) / r`` of the link where
    an all-reduce "pipelines two operations"; 0.38 of the all-reduce's bus bandwidth on 8
    GPUs, 0.5 in 2.17-2.21; ``fraction`` is at least 1/2 but for one rank), and over at most
    ``NVLS_ARITY`` ranks (``fraction`` up to 31/32), past which NCCL 2.27-2.30.7 runs them
    without it (src/enqueue.cc's updateCollCostTable)."""
    message_bytes, steps, fraction = (np.asarray(x, np.float64) for x in (
        message_bytes, steps, fraction))
    if not link.protocols:
        return steps * link.latency + fraction * message_bytes / link.bandwidth
    best = np.full(np.broadcast(message_bytes, steps, fraction).shape, np.inf)
    for base, hop, rate, *largest in link.protocols:
        runs = message_bytes <= (largest[0] if largest else np.inf)
        if hop == 0 and passes != 2.0:  # an in-switch all-gather or reduce-scatter
            # over at most 32 ranks ((r - 1) / r up to 31/32): NCCL 2.27-2.30.7 skips it
            # past NCCL_MAX_NVLS_ARITY (enqueue.cc's updateCollCostTable)
            runs = runs & (fraction * NVLS_ARITY <= NVLS_ARITY - 1.0 + 1e-9)
            rate = rate * np.maximum(fraction, 0.5)**2 / 2.0
        best = np.minimum(best, np.where(runs, base + steps * hop
                                         + fraction * message_bytes / rate, np.inf))
    # (a link of in-switch protocols alone then runs the plain ring)
    return np.where(np.isinf(best), steps * link.latency + fraction * message_bytes
                    / link.bandwidth, best)


def tensor_parallel_per_node(hardware: Hardware, t, gpus=None) -> np.ndarray:
    """Members per node of a tensor-parallel group of ``t`` consecutive ranks: in the group
    that fares worst, ``gcd(t, gpus_per_node)``. Groups start at multiples of ``t``, so where
    ``t`` does not divide the node some straddle two nodes, and the smallest piece of one
    (``t = 6`` on 8 GPUs: ranks 6-7 on one node, 8-11 on the next) sets the network's share:
    that group paces every stage it serves. A job of ``gpus`` (default: unknown, as large as
    need be) that fits in one node has no group astride two: ``t`` members."""
    t = np.asarray(t)
    per_node = np.gcd(t.astype(np.int64), hardware.gpus_per_node)
    if gpus is not None:
        per_node = np.where(np.asarray(gpus) <= hardware.gpus_per_node, t, per_node)
    return per_node.astype(t.dtype)


def context_parallel_per_node(hardware: Hardware, t, cp, gpus=None) -> np.ndarray:
    """Members per node of a context-parallel group (``cp`` ranks, ``t`` apart), in the group
    that fares worst of a job of ``gpus`` (``data_parallel_per_node``'s rule: ``t 2``, ``cp
    3`` on 8 GPUs, ranks 6, 8, 10 straddle two nodes)."""
    return data_parallel_per_node(hardware, t, cp, gpus)


def data_parallel_per_node(hardware: Hardware, t, d, gpus=None) -> np.ndarray:
    """Members per node of a data-parallel group (``d`` ranks, ``t`` apart). Of a job of
    ``gpus`` beyond one node, in the group that fares worst: where ``t`` divides the node,
    each group's ``d`` ranks are consecutive among a node's ``gpus_per_node / t`` slots, a
    group starting at every ``d``-th, so ``gcd(d, gpus_per_node / t)`` as in
    ``tensor_parallel_per_node`` (``t 2``, ``d 3`` on 8 GPUs: ranks 6, 8, 10 straddle two
    nodes). Where ``t`` does not, ``gcd(t d, gpus_per_node) // t``, at least one (the
    same where it does): a node boundary falls that far into some group's block of ``t d``
    ranks (``t 3``, ``d 2`` on 8 GPUs: ranks 6, 9). Default (``gpus`` unknown): ``min(
    gpus_per_node / t, d)``, exact where ``t d`` and the node divide one another."""
    g, t, d = hardware.gpus_per_node, np.asarray(t), np.asarray(d)
    per_node = np.minimum(np.maximum(g // t, 1), d)
    if gpus is None:
        return per_node
    # (min(gpus_per_node / t, d) where t does not divide the node put ranks 6 and 9 on one)
    stride = np.rint(t).astype(np.int64)
    worst = np.maximum(np.gcd(stride * np.rint(d).astype(np.int64), g) // stride, 1)
    return np.where(np.asarray(gpus) <= g, d, worst)


def hop_crosses(hardware: Hardware, stride, device, following) -> np.ndarray:
    """Whether the hand-off from pipeline rank ``device`` to ``following`` crosses nodes: the
    ranks ``device stride + j`` and ``following stride + j`` (``j < stride``; ``stride = t cp
    d`` as Megatron orders ranks) sit in different nodes for some ``j`` (exact where the
    stride and the node size divide one another: the first and the last ``j`` decide)."""
    g = hardware.gpus_per_node
    stride, device, following = (np.asarray(x, np.int64) for x in (stride, device, following))
    first = (device * stride) // g != (following * stride) // g
    last = (device * stride + stride - 1) // g != (following * stride + stride - 1) // g
    return first | last


def pipeline_spans(hardware: Hardware, t, d, p) -> np.ndarray:
    """Whether the pipeline's hand-offs cross nodes: all of them stay in a node only when the
    whole ``t d p`` job does (between those, some hops cross; they are priced as crossing)."""
    return np.asarray(t) * np.asarray(d) * np.asarray(p) > hardware.gpus_per_node
