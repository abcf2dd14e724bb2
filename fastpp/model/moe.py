"""Mixture-of-experts layers under expert parallelism: the experts' FLOPs, bytes and times,
the dispatch and combine all-to-alls, and one layer's ``LayerParts``.

Layout: Megatron's MoE parallel folding. The ``t cp d`` GPUs of one pipeline stage run
attention as tensor x context x data parallelism and the experts as expert-tensor x expert x
expert-data parallelism, ``etp ep edp = t cp d`` (ranks ordered ``etp`` fastest, then ``ep``,
then ``edp``). Each expert-parallel rank (a group of ``etp`` GPUs) holds ``E / ep`` experts,
each expert's matrices split over ``etp``; the expert parameters' gradients are reduced over
the ``edp`` replicas, the attention's over ``d``.

Tokens, per GPU and microbatch (``T = s b``): a GPU owns ``N = T / (t cp)`` (sequence
parallelism, which Megatron's MoE layer needs at ``t > 1``: ``expert_reasons``) and routes
them, ``N k`` copies for top-``k`` routing. Balanced, each
expert-parallel rank receives ``N k etp`` copies (the ``d T k`` copies of a stage over ``edp
ep`` ranks; ``etp ep edp = t cp d``), all of them gathered on each of its ``etp`` GPUs. With
``imbalance`` (the busiest rank's tokens over the mean, >= 1) the busiest rank receives that
many times more: it sets the pace of the experts and of the all-to-alls. The routed FLOPs per
GPU are then ``2 N k imbalance P_e`` (``P_e = 3 h F_e`` with SwiGLU): the same share ``1/t``
of the layer as tensor parallelism gives a dense MLP.

- Experts (forward): the router ``N x h -> E`` (not split) and its fp32 softmax and top-k;
  the permutation of the received copies into expert order and back (read and write ``2h``
  bytes a copy each way); one grouped product per matrix over the ``E / ep`` local experts,
  each ``(R / (E/ep)) x h -> G F_e / etp`` and back (``R`` the copies received); the
  activation; the shared experts as a dense MLP of width ``S F_e`` split over ``t``. The
  input-grad and weight-grad backwards follow ``fastpp.model.compute``'s rules.
- Stored bytes: the router's fp32 logits and probabilities (``8E`` a token owned); per copy
  received the expert input and output (``4h``) and the inside (``Transformer.inside_bytes``
  times ``F_e / etp``: ``6 F_e`` with fused SwiGLU, as Megatron-Core's grouped experts run
  its ``weighted_bias_swiglu``); the shared experts as a dense MLP.
- All-to-alls: the dispatch sends each owned token's ``k`` copies of ``h`` elements, in bf16
  (2 bytes) or FP8 (1 byte plus one fp32 scale per 128 elements, DeepSeek-V3's tile-wise
  quantization); the combine returns them in bf16, as do both backwards (DeepSeek-V3 keeps
  them in bf16). The dispatch goes in FP8 only where the tokens are quantized before it
  (``dispatch_precision``): DeepSeek-V3's recipe (its report, section 3.3.2, with the FP8
  caching of the dispatched tokens, ``fastpp.model.recipes``). Megatron-Core's dispatchers
  send the bf16 hidden states whatever the products' precision: the all-to-all dispatcher's
  ``all_to_all`` of the permuted tokens, DeepEP's ``buffer.dispatch`` given them as they are
  and HybridEP's (``fused_a2a.py``: "we do not support fp8 dispatch"); an FP8 payload needs
  ``moe_dispatch_fwd_dtype="mxfp8"`` on the NCCL-EP backend (``TransformerConfig``, from
  August 2026), after every published table here. An expert-parallel group of ``ep`` ranks
  has ``q = min(ep, gpus_per_node / etp)`` members in a node and spans ``ceil(ep / q)``
  nodes. Without node-limited routing (Megatron's all-to-all dispatcher) each copy travels
  alone: ``1 - q/ep`` of them over the
  network, ``(q-1)/ep`` over NVLink. With DeepSeek's node-limited routing (``node_limit = M``)
  each token goes once to each node it uses, at most ``M`` (the expected distinct nodes of
  ``k`` experts spread evenly, ``n (1 - (1 - 1/n)^k)``, capped at ``M``), ``(n-1)/n`` of
  them remote, and is forwarded inside the node over NVLink once to each GPU it uses (DeepEP's
  ``is_token_in_rank``; ``distinct_ranks``, ``(q-1)/q`` of them to another GPU), the local
  permutation then expanding it into its experts' copies.
  Each GPU sends over its own network rail and its NVLink at once: the slower of the two,
  plus that link's latency, times ``imbalance``. With ``etp > 1`` the received copies are
  then all-gathered over the ``etp`` GPUs (and reduce-scattered at the combine).
- Dispatchers (Megatron's ``--moe-token-dispatcher-type``, its ``token_dispatcher.py``):
  ``"alltoall"`` as above; ``"flex"`` (DeepEP, and NVIDIA's HybridEP) sends each token once
  to each node it uses, deduplicated, and forwards it inside the node over NVLink: the
  node-limited volume above with ``M`` the nodes of the group unless ``node_limit`` is
  smaller. A flex group inside one NVLink domain whose link HybridEP was measured on
  (``HYBRID_EP``: NVLink5) is priced from that measurement instead: each rank receives a
  token once per rank it is routed to (``distinct_ranks``), at the measured rate of the
  group's size; ``"allgather"`` all-gathers every GPU's ``N`` tokens over the ``etp ep`` GPUs of
  the group (each then keeps the copies its experts take) and reduce-scatters the outputs at
  the combine, ``(etp ep - 1) N h`` elements a GPU each way, a ring over NVLink inside a node
  and the rail across nodes.
- Tensor-parallel collectives stay in the compute parts: the attention's pair, as
  ``fastpp.model.stages`` prices a dense layer's, and the MLP's only with shared experts
  (Megatron's ``SharedExpertMLP``, a tensor-parallel MLP over the layer's ``t`` ranks).
  The routed experts take their sequence-parallel shard as it is: Megatron's ``MoELayer``
  makes no exchange over ``t`` around them, its dispatcher gathering over the expert
  tensor-parallel group alone (``pg_collection.expt_tp``, the ``etp`` gather above, priced
  with the all-to-alls; Megatron-LM ``moe_layer.py`` and ``token_dispatcher.py`` at
  d98e8a64dd).
"""

from __future__ import annotations

import math

import numpy as np

from ..checks import (
    ScheduleError,
    instance,
    known_keywords,
    one_of,
    positive_int,
    positive_ints,
    renamed,
)
from .comm import (
    all_gather,
    all_reduce,
    data_parallel_per_node,
    reduce_scatter,
    tensor_parallel_per_node,
)
from .compute import (
    CAST_BYTES,
    _attention_shapes,
    amax_bytes,
    attention_times,
    gradient_hardware,
    matmul_time,
    memory_time,
    mlp_times,
)
from .hardware import PRECISIONS, Hardware
from .overlap import LayerParts
from .transformer import BYTES, Transformer, attention_costs, combine

# bytes per dispatched element: bf16, or FP8 with one fp32 scale per 128 (1 x 128 tiles)
DISPATCH_BYTES = {"bf16": 2.0, "fp8": 1.0 + 4.0 / 128.0}
COMBINE_BYTES = 2.0  # the combine and both backwards stay in bf16
ROUTER_BYTES = 8.0  # fp32 logits and probabilities per expert and token
# a cast's writes: the row-wise and column-wise FP8 copies with their MXFP8 scales
FP8_COPIES_BYTES = CAST_BYTES - BYTES
DISPATCHERS = ("alltoall", "allgather", "flex")
# HybridEP's all-to-all inside one NVLink domain, measured (deepseek-ai/DeepEP,
# Hybrid-EP_Implementation.md at 07eea0c, "GB200 Platform": 4096 tokens a rank, hidden 7168,
# top-8 of 8 local experts a rank, uniform random routing, 32 SMs, "Torch API" times, the 32
# SMs Megatron-Bridge's configs and the ModelZoo give it: moe_hybridep_num_sms = 32): the
# bytes a rank receives, one copy a token per rank it is routed to and its own included
# (tests/test_hybrid_ep.py at 098da2a: dispatched_hidden.numel() * 2 / t), over the time, in
# bytes per second by the group's ranks: the BF16 and FP8 dispatch and the (BF16) combine.
# B200's one measured size (8 ranks at 16 SMs: 536 and 531 GB/s) is within 3% of GB200's
# (550 and 538), so both NVLink5 systems take it; held at the end points outside 8-36 ranks.
HYBRID_EP = {"NVLink5": {"ranks": (8.0, 16.0, 24.0, 32.0, 36.0),
                         "bf16": (545.71e9, 523.48e9, 507.32e9, 484.22e9, 479.02e9),
                         "fp8": (455.35e9, 444.67e9, 403.20e9, 392.70e9, 361.13e9),
                         "combine": (568.94e9, 521.55e9, 483.76e9, 464.54e9, 447.89e9)}}


def expert_data_parallel(model: Transformer, t, d, ep, etp, cp=1) -> np.ndarray:
    """``edp = t cp d / (etp ep)``, the expert-data-parallel replicas (arrays broadcast);
    raises ``ScheduleError`` unless ``ep`` divides the experts and ``etp ep`` the GPUs of a
    stage."""
    t, d, ep, etp, cp = (np.asarray(x, np.int64) for x in (t, d, ep, etp, cp))
    reason = expert_reasons(model, t, d, ep, etp, cp)
    bad = np.flatnonzero(np.atleast_1d(reason != ""))
    if bad.size:
        raise ScheduleError(str(np.atleast_1d(reason)[bad[0]]))
    return t * cp * d // (etp * ep)


def sequence_parallel_reason(t) -> str:
    """Why a model with experts cannot run at ``t > 1`` without sequence parallelism:
    Megatron's ``MoELayer`` refuses to train so (since 30 May 2024, 28c8dd71f0)."""
    return (f"sequence_parallel must be True for a model with experts at t > 1: Megatron's "
            f"MoE layer refuses to train tensor parallelism without it (got "
            f"sequence_parallel=False, t={t})")


def expert_reasons(model: Transformer, t, d, ep, etp, cp=1, imbalance=1.0,
                   sequence_parallel: bool = True) -> np.ndarray:
    """Per configuration, why its expert layout cannot exist ("" if it can), ``imbalance``
    beyond what ``ep`` ranks allow among the reasons: a token's ``top_k`` experts are
    distinct, so the busiest of ``ep`` ranks (``E / ep`` experts each) receives at most
    ``min(top_k, E / ep)`` of its copies, ``min(ep, E / top_k)`` times the mean (1 at
    ``ep = 1``); and ``t > 1`` without ``sequence_parallel`` (``sequence_parallel_reason``)."""
    t, d, ep, etp, cp = np.broadcast_arrays(*(np.asarray(x, np.int64)
                                              for x in (t, d, ep, etp, cp)))
    reason = np.full(t.shape, "", dtype=object)
    if not model.moe:
        dense = (ep > 1) | (etp > 1)
        reason[dense] = (f"ep and etp must be 1 for a dense model ({model.name} has no "
                         f"experts)")
        return reason
    gpus = t * cp * d
    bad = (model.experts % ep) != 0
    reason[bad] = [f"ep must divide the experts {model.experts} (got ep={x})" for x in ep[bad]]
    bad = (reason == "") & (gpus % (etp * ep) != 0)
    reason[bad] = [f"etp x ep = {a * b} must divide the GPUs of a stage t x cp x d = {g} (got "
                   f"ep={b}, etp={a})" for a, b, g in zip(etp[bad], ep[bad], gpus[bad],
                                                         strict=True)]
    bad = (reason == "") & (model.expert_ffn % etp != 0)
    reason[bad] = [f"etp must divide the expert width {model.expert_ffn} (got etp={x})"
                   for x in etp[bad]]
    most = np.minimum(ep, model.experts / model.top_k)
    bad = (reason == "") & (imbalance > most * (1 + 1e-12))
    reason[bad] = [f"imbalance must be at most min(ep, experts / top_k) = {x:g} at ep={e}: "
                   f"the busiest rank receives no more (got imbalance={imbalance:g})"
                   for x, e in zip(most[bad], ep[bad], strict=True)]
    if not sequence_parallel:
        bad = (reason == "") & (t > 1)
        reason[bad] = [sequence_parallel_reason(x) for x in t[bad]]
    return reason


def _tokens(model: Transformer, seq, microbatch, t, etp, imbalance, cp=1):
    """Tokens owned by one GPU ``N`` and token copies its expert-parallel rank receives
    ``R`` (the busiest, ``imbalance`` times the mean)."""
    owned = float(seq) * np.asarray(microbatch, np.float64) / (np.asarray(t, np.float64)
                                                               * np.asarray(cp, np.float64))
    return owned, owned * model.top_k * np.asarray(etp, np.float64) * imbalance


def exchanges_around_experts(model: Transformer) -> int:
    """Tensor-parallel exchanges an MoE layer's MLP half makes each way: the shared experts'
    (a tensor-parallel MLP), none for routed experts alone (the module's rules)."""
    return 1 if model.shared_experts else 0


def expert_costs(model: Transformer, seq, microbatch, t, etp, imbalance=1.0, cp=1):
    """An MoE layer's MLP half for one microbatch on one GPU, as
    ``fastpp.model.transformer.mlp_costs`` gives a dense one (FLOPs ``forward`` =
    ``weight_grad``, bytes per token ``whole`` and ``split`` of the MLP's input and the shared
    experts), plus ``fixed``: the router's and the routed experts' stored bytes, already per
    GPU, and ``exchanges`` (``exchanges_around_experts``)."""
    s, h = float(seq), float(model.hidden)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    owned, received = _tokens(model, seq, b, t, etp, imbalance, cp)
    routed = 2.0 * received / np.asarray(etp, np.float64) * model.expert_params()
    router = 2.0 * owned * h * model.experts
    shared = 2.0 * s * b / cp * model.shared_experts * model.expert_params() / t
    inside = model.inside_bytes * model.expert_ffn
    whole = 4.0 * h + (h if model.dropout else 0.0)
    return {"forward": routed + router + shared, "weight_grad": routed + router + shared,
            "whole": whole, "split": model.shared_experts * inside,
            "exchanges": float(exchanges_around_experts(model)),
            "fixed": (ROUTER_BYTES * owned * model.experts
                      + received * (4.0 * h + inside / np.asarray(etp, np.float64)))}


def moe_layer_costs(model: Transformer, seq: int, microbatch, t, etp, sequence_parallel: bool,
                    recompute, imbalance=1.0) -> dict[str, np.ndarray]:
    """One MoE layer's FLOPs, stored bytes and ``gamma`` on one GPU, as
    ``fastpp.model.transformer.layer_costs`` gives a dense layer's."""
    b, t, etp, rc = np.broadcast_arrays(np.asarray(microbatch, np.float64),
                                        np.asarray(t, np.float64),
                                        np.asarray(etp, np.float64), np.asarray(recompute))
    experts = expert_costs(model, seq, b, t, etp, imbalance)
    return combine(attention_costs(model, seq, b, t), experts, float(seq) * b, t,
                   sequence_parallel, rc, experts["fixed"])


def expert_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t, ep, etp,
                 sequence_parallel: bool, imbalance=1.0, dispatcher: str | None = None
                 ) -> dict[str, np.ndarray]:
    """Seconds of an MoE layer's MLP half (norm, router, permutations, routed and shared
    experts, residual add) for one microbatch on one GPU: ``forward``, ``input_grad``,
    ``weight_grad`` (the module's ops). With ``dispatcher="alltoall"`` the received tokens
    are also sorted by local expert after the dispatch and back before the combine, where a
    GPU holds more than one expert: Megatron-Core's ``MoEAlltoAllTokenDispatcher`` permutes
    the tokens by destination rank before its all-to-all and then calls
    ``sort_chunks_by_idxs`` on what it received (``dispatch_postprocess``;
    ``combine_preprocess`` undoes it; Megatron-LM at ebfa13852f, ``token_dispatcher.py``
    line 754), where DeepEP and HybridEP fuse the first permutation into their kernels
    (Megatron-LM's DeepSeek-V3 GB200 guide, section 2.1.1). None (or any other dispatcher):
    one permutation each way."""
    hw = hardware
    h, E, Fe = float(model.hidden), float(model.experts), float(model.expert_ffn)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    ep, etp = np.asarray(ep, np.float64), np.asarray(etp, np.float64)
    owned, received = _tokens(model, seq, b, t, etp, imbalance)
    local = E / ep  # experts on this GPU
    rows = received / local  # copies per local expert
    G = 2.0 if model.swiglu else 1.0
    width = Fe / etp
    shared = mlp_times(model, hw, seq, b, t, sequence_parallel,
                       width=model.shared_experts * model.expert_ffn)
    router = memory_time(hw, ROUTER_BYTES * owned * E)  # softmax and top-k in fp32
    permute = 2.0 * memory_time(hw, 2.0 * BYTES * received * h)  # into expert order, back
    if dispatcher is not None:
        one_of(dispatcher, "dispatcher", DISPATCHERS)
    if dispatcher == "alltoall":
        # the all-to-all dispatcher's second copy each way: sort_chunks_by_idxs by local
        # expert after the dispatch, back before the combine (none with one local expert)
        permute = permute + np.where(local > 1.0, 2.0, 0.0) * memory_time(
            hw, 2.0 * BYTES * received * h)
    if hw.fp8_padding and hw.precision == "fp8":
        # Fp8Padding's copy of the received tokens before the first product and
        # Fp8Unpadding's after the second (Hardware.fp8_padding), and their gradients' back
        permute = permute + 2.0 * memory_time(hw, 2.0 * BYTES * received * h)
    gate = hw.with_precision("bf16")  # the router's product stays out of the FP8 recipe
    activation = (memory_time(hw, (G + 1.0) * BYTES * received * width),
                  memory_time(hw, (2.0 * G + 1.0) * BYTES * received * width))  # and its backward
    if _fused_mlp(hw):
        # the products' epilogues apply them (Hardware.fused_grouped_mlp), inside the
        # products' kernels: the first one's still writes the second one's input in FP8 both
        # ways (Transformer Engine's d_tensor and d_col_tensor; its bf16 output, c_tensor, is
        # the product's own), the second one's data gradient reads that saved bf16 output
        # and writes the first one's output gradient in FP8 both ways
        activation = (FP8_COPIES_BYTES * received * width / hw.memory_bandwidth,
                      (BYTES + FP8_COPIES_BYTES) * received * G * width / hw.memory_bandwidth)
    forward = (matmul_time(gate, owned, E, h) + router + permute
               + matmul_time(hw, rows, G * width, h, local) + matmul_time(hw, rows, h, width, local)
               + activation[0])
    grad = gradient_hardware(hw)  # current scaling's split accumulator
    input_grad = (matmul_time(gate, owned, h, E) + router + permute
                  + matmul_time(grad, rows, h, G * width, local)
                  + matmul_time(grad, rows, width, h, local) + activation[1])
    weight_grad = (matmul_time(gate, h, E, owned) + matmul_time(grad, h, G * width, rows, local)
                   + matmul_time(grad, width, h, rows, local))
    casts = fp8_casts(model, hw, seq, b, t, received, etp)
    return {"forward": shared["forward"] + forward + casts["forward"],
            "input_grad": shared["input_grad"] + input_grad + casts["input_grad"],
            "weight_grad": shared["weight_grad"] + weight_grad}


def fp8_casts(model: Transformer, hardware: Hardware, seq: int, microbatch, t, received, etp
              ) -> dict[str, np.ndarray]:
    """Seconds of an MoE layer's FP8 casts for one microbatch on one GPU (zero in bf16):
    ``forward`` casts each FP8 product's input, ``input_grad`` its output's gradient
    (``CAST_BYTES`` an element, plus current scaling's amax pass, ``amax_bytes``;
    Transformer Engine quantizes both before each product and
    caches the weights' casts over a step's microbatches). The products are the attention's
    projections, the routed experts' (``received`` copies) and the shared experts'; the
    router's stays in bf16, the attention core too (``fastpp.model.compute``). They are
    priced with the MLP half, in the layer's forward and input-grad backward;
    ``attention_forward`` is the attention's inputs' share of ``forward`` (their bytes, the
    call's overhead left with the rest), which a rerun of the MoE block alone does not pay."""
    zero = 0.0 * np.asarray(received, np.float64)
    if hardware.precision == "bf16":
        return {"forward": zero, "input_grad": zero, "attention_forward": zero}
    h, G = float(model.hidden), 2.0 if model.swiglu else 1.0
    T = float(seq) * np.asarray(microbatch, np.float64)
    t, etp = np.asarray(t, np.float64), np.asarray(etp, np.float64)
    width = float(model.expert_ffn) / etp
    shared = float(model.shared_experts * model.expert_ffn) / t
    shapes, _ = _attention_shapes(model, t)
    attention = T * sum(k for _, k in shapes)
    inputs = attention + T * (h + shared if model.shared_experts else 0.0)
    outputs = T * (sum(n for n, _ in shapes) + (h + G * shared if model.shared_experts
                                                else 0.0))
    cast = CAST_BYTES + amax_bytes(hardware)  # with current scaling's amax pass
    # the fused grouped MLP's epilogues write the second product's input and the first
    # one's output gradient in FP8 (their writes priced in expert_times): only the first
    # product's input and the second one's output gradient are cast
    inner = 0.0 if _fused_mlp(hardware) else 1.0
    return {"forward": memory_time(hardware, cast * (inputs + received * (h + inner * width))),
            "input_grad": memory_time(hardware, cast * (outputs + received
                                                        * (h + inner * G * width))),
            "attention_forward": cast * attention / hardware.memory_bandwidth + zero}


def _fused_mlp(hardware: Hardware) -> bool:
    """Whether the routed experts run Transformer Engine's fused grouped MLP: FP8 products
    with ``Hardware.fused_grouped_mlp``."""
    return hardware.fused_grouped_mlp and hardware.precision == "fp8"


def dispatch_precision(precision: str, recipe=None) -> str:
    """The dispatch's precision on the wire: ``"fp8"`` where the products are FP8 and the
    ``recipe`` (``fastpp.model.recipes.Recipe``) caches the dispatched tokens in FP8, as
    DeepSeek-V3 quantizes them before the dispatch; else ``"bf16"``, as Megatron-Core's
    dispatchers send them (the module's rules)."""
    cached = bool(getattr(recipe, "fp8_cache", False))
    return "fp8" if precision == "fp8" and cached else "bf16"


def all_to_all_bytes(model: Transformer, hardware: Hardware, seq, microbatch, t, ep, etp,
                     element_bytes, node_limit=None, cp=1, dispatcher: str = "alltoall",
                     gpus=None) -> dict[str, np.ndarray]:
    """Bytes one GPU sends in one dispatch (or combine) all-to-all, balanced: ``network``
    (to other nodes) and ``nvlink`` (inside its node), the module's rules (the all-to-all
    and flex dispatchers; ``all_to_all_times`` prices the all-gather one). ``gpus``, the
    job's, says where an expert group straddles two nodes (``expert_ranks_per_node``)."""
    h, k = float(model.hidden), float(model.top_k)
    ep, etp = np.asarray(ep, np.float64), np.asarray(etp, np.float64)
    owned, _ = _tokens(model, seq, microbatch, t, etp, 1.0, cp)
    q = expert_ranks_per_node(hardware, ep, etp, gpus)
    # the nodes a group spans: ep / q where its nodes hold q each; a group astride a node's
    # edge (q below what its node would hold) spans one more than its ranks fill, not ep / q
    # (ep 64 on GB200's 72: 8 and 56 ranks in 2 domains, where 8 "nodes" of 8 had sent
    # DeepEP's worst rank 4.6 copies of each token over the network for 1)
    whole = expert_ranks_per_node(hardware, ep, etp)  # (an aligned group's: gpus unknown)
    nodes = np.where(q < whole, np.minimum(np.ceil(ep * etp / hardware.gpus_per_node) + 1.0,
                                           np.ceil(ep / q)), np.ceil(ep / q))
    copies = owned * k * h * element_bytes
    if node_limit is None and dispatcher != "flex":
        return {"network": copies * (1.0 - q / ep), "nvlink": copies * (q - 1.0) / ep}
    limit = nodes if node_limit is None else np.minimum(nodes, float(node_limit))
    distinct = np.minimum(nodes * (1.0 - (1.0 - 1.0 / nodes) ** k), limit)
    # DeepEP (and DeepSeek's kernels) send a token once to each rank it uses, not once per
    # expert: the NVLink forwarding moves distinct ranks' copies (get_dispatch_layout's
    # is_token_in_rank), the local permutation expands them to the k experts' copies; a
    # node-limited token's experts lie among the ranks of its nodes
    reach = np.minimum(ep, limit * q)
    ranks = distinct_ranks(model, reach, experts=model.experts * reach / ep)
    return {"network": owned * h * element_bytes * distinct * (nodes - 1.0) / nodes,
            "nvlink": owned * h * element_bytes * ranks * (q - 1.0) / q}


def all_to_all_time(hardware: Hardware, sent: dict, imbalance=1.0) -> np.ndarray:
    """Seconds of one all-to-all whose per-GPU bytes are ``sent`` (``all_to_all_bytes``):
    the network rail and NVLink at once, the slower with its latency, times ``imbalance``."""
    net, nvl = sent["network"], sent["nvlink"]
    return imbalance * np.maximum(
        np.where(net > 0, net / hardware.network.bandwidth + hardware.network.latency, 0.0),
        np.where(nvl > 0, nvl / hardware.node.bandwidth + hardware.node.latency, 0.0))


def distinct_ranks(model: Transformer, ep, experts=None) -> np.ndarray:
    """The expected expert-parallel ranks one token's ``k`` distinct experts fall on, routed
    uniformly over the ``E`` experts (``experts``, default the model's), ``E / ep`` a rank:
    ``ep (1 - C(E - E/ep, k) / C(E, k))``."""
    ep = np.asarray(ep, np.float64)
    experts = float(model.experts) if experts is None else np.asarray(experts, np.float64)
    k = int(model.top_k)
    missed = np.ones(ep.shape)
    for i in range(k):  # the k draws without replacement all miss the rank's E/ep experts
        missed = missed * np.maximum(experts - experts / ep - i, 0.0) / (experts - i)
    return ep * (1.0 - missed)


def expert_ranks_per_node(hardware: Hardware, ep, etp, gpus=None) -> np.ndarray:
    """Members per node (or NVLink domain) of an expert-parallel group, in the group that
    fares worst: ``ep`` ranks ``etp`` apart (Megatron's expert ranks: expert-tensor-parallel
    fastest, then expert-parallel), by ``comm.data_parallel_per_node``'s rule for a job of
    ``gpus`` (default unknown: ``min(ep, gpus_per_node / etp)``). On GB200's 72-GPU domains
    filled in rank order, ``ep 64`` puts ranks 64-71 in one domain and 72-127 in the next:
    the worst group's 8 send 56 of every 64 copies over the network."""
    etp = np.asarray(etp, np.float64)
    return np.asarray(data_parallel_per_node(hardware, etp, np.asarray(ep, np.float64), gpus),
                      np.float64)


def _hybrid_ep(model: Transformer, hardware: Hardware, seq, microbatch, t, ep, etp, kind: str,
               imbalance=1.0, cp=1, gpus=None) -> np.ndarray:
    """Seconds of one HybridEP all-to-all inside an NVLink domain (``HYBRID_EP``, measured on
    ``hardware.node``'s link): ``kind`` is the table's column (``"bf16"`` or ``"fp8"``
    dispatch, ``"combine"``); NaN where the group leaves the domain or its link was not
    measured."""
    table = HYBRID_EP.get(hardware.node.name)
    ep = np.asarray(ep, np.float64)
    if table is None:
        return np.full(np.broadcast(ep, np.asarray(microbatch)).shape, np.nan)
    q = expert_ranks_per_node(hardware, ep, etp, gpus)
    owned, _ = _tokens(model, seq, microbatch, t, etp, 1.0, cp)
    element = DISPATCH_BYTES["fp8"] if kind == "fp8" else 2.0
    received = owned * distinct_ranks(model, ep) * model.hidden * element
    rate = np.interp(ep, table["ranks"], table[kind])
    return np.where((ep > 1) & (q == ep), imbalance * (received / rate
                                                         + hardware.node.latency), np.nan)


def all_to_all_times(model: Transformer, hardware: Hardware, seq, microbatch, t, ep, etp,
                     precision="bf16", node_limit=None, imbalance=1.0, cp=1,
                     dispatcher: str = "alltoall", gpus=None) -> dict[str, np.ndarray]:
    """Seconds of an MoE layer's four all-to-alls on one GPU for one microbatch:
    ``dispatch_f`` (in ``precision``), ``combine_f``, and the backwards ``dispatch_b`` (the
    dispatched tokens' gradients sent home) and ``combine_b`` (the output's gradients sent to
    the experts), with the expert-tensor-parallel gather and scatter of ``etp > 1``; by the
    ``dispatcher`` (``DISPATCHERS``, the module's rules). ``gpus``, the job's (default
    unknown), says where an expert group straddles two nodes (``expert_ranks_per_node``)."""
    if dispatcher == "allgather":
        return _all_gather_dispatch(model, hardware, seq, microbatch, t, ep, etp, precision,
                                    imbalance, cp, gpus)
    fast = all_to_all_time(hardware, all_to_all_bytes(
        model, hardware, seq, microbatch, t, ep, etp, DISPATCH_BYTES[precision], node_limit,
        cp, dispatcher, gpus), imbalance)
    slow = all_to_all_time(hardware, all_to_all_bytes(
        model, hardware, seq, microbatch, t, ep, etp, COMBINE_BYTES, node_limit, cp,
        dispatcher, gpus), imbalance)
    back = slow  # the backward's dispatch-direction all-to-all (the output's gradients)
    if dispatcher == "flex":
        measured = [_hybrid_ep(model, hardware, seq, microbatch, t, ep, etp, kind, imbalance,
                               cp, gpus) for kind in (precision, "combine", "bf16")]
        fast, slow, back = (np.where(np.isnan(m), x, m) for m, x in
                            zip(measured, (fast, slow, back), strict=True))
    _, received = _tokens(model, seq, microbatch, t, etp, imbalance, cp)
    per_node = tensor_parallel_per_node(hardware, etp, gpus)
    gather = all_gather(hardware, DISPATCH_BYTES[precision] * received * model.hidden, etp,
                        per_node)
    scatter = reduce_scatter(hardware, COMBINE_BYTES * received * model.hidden, etp, per_node)
    return {"dispatch_f": fast + gather, "combine_f": slow + scatter,
            "dispatch_b": slow + scatter, "combine_b": back + all_gather(
                hardware, COMBINE_BYTES * received * model.hidden, etp, per_node)}


def _all_gather_dispatch(model, hardware, seq, microbatch, t, ep, etp, precision, imbalance,
                         cp, gpus=None):
    """Megatron's all-gather dispatcher: every GPU's tokens gathered over the ``etp ep``
    GPUs of the group (forward dispatch, backward combine), the outputs reduce-scattered
    (forward combine, backward dispatch); ``imbalance`` plays no part (every GPU gets all)."""
    owned, _ = _tokens(model, seq, microbatch, t, etp, 1.0, cp)
    group = np.asarray(ep, np.float64) * np.asarray(etp, np.float64)
    per_node = tensor_parallel_per_node(hardware, group, gpus)
    gathered = owned * group * model.hidden
    dispatch = all_gather(hardware, DISPATCH_BYTES[precision] * gathered, group, per_node)
    back = all_gather(hardware, COMBINE_BYTES * gathered, group, per_node)
    combine = reduce_scatter(hardware, COMBINE_BYTES * gathered, group, per_node)
    return {"dispatch_f": dispatch, "combine_f": combine, "dispatch_b": combine,
            "combine_b": back}


def tensor_exchange(hardware: Hardware, seq, microbatch, t, hidden, sequence_parallel,
                    gpus=None):
    """Seconds of one tensor-parallel exchange of a ``2sbh`` activation (an all-gather plus a
    reduce-scatter with sequence parallelism, else an all-reduce): each layer half has one
    each way, as ``fastpp.model.stages`` prices them; ``gpus``, the job's, says whether a
    group of ``t`` can straddle two nodes (``tensor_parallel_per_node``)."""
    message = BYTES * float(seq) * np.asarray(microbatch, np.float64) * hidden
    spans = tensor_parallel_per_node(hardware, t, gpus)
    if sequence_parallel:
        return (all_gather(hardware, message, t, spans)
                + reduce_scatter(hardware, message, t, spans))
    return all_reduce(hardware, message, t, spans)


# the options that act on experts alone, and their defaults (``RunConfig``'s; the recipe's,
# FP8 caching among them, are recipes.refuse_unpriced's)
EXPERT_OPTIONS = {"dispatcher": "alltoall", "imbalance": 1.0, "node_limit": None}


def refuse_expert_options(model: Transformer, **given) -> None:
    """A ``ScheduleError`` for an option of ``EXPERT_OPTIONS`` set away from its default on a
    model without experts, which it would leave unpriced without a word."""
    if model.moe:
        return
    for name, value in given.items():
        # (an array is no default: its != was NumPy's ambiguous truth)
        if isinstance(value, np.ndarray) or value != EXPERT_OPTIONS[name]:
            raise ScheduleError(f"{name} must be {EXPERT_OPTIONS[name]!r}: it acts on "
                                f"experts, and {model.name or 'the model'} has none (got "
                                f"{name}={value!r})")


def check_imbalance(imbalance, model: Transformer | None = None) -> float:
    """``imbalance`` as a float: one finite number >= 1, the busiest expert-parallel rank's
    tokens over the mean (1 balanced), and with an MoE ``model`` at most its experts over
    ``top_k`` (the busiest rank receives at most every token's copies it holds:
    ``expert_reasons`` bounds it by ``ep`` too; 1e300 overflowed the costs); else a
    ``ScheduleError`` naming it."""
    most = model.experts / model.top_k if model is not None and model.moe else float("inf")
    number = isinstance(imbalance, int | float | np.number) and not isinstance(imbalance, bool)
    try:  # (an int past a float's range is no finite number either)
        x = float(imbalance) if number else math.nan
    except OverflowError:
        x = math.inf
    if not (number and 1.0 <= x <= most and math.isfinite(x)):
        within = (f"in [1, {most:g}] (experts / top_k)" if np.isfinite(most)
                  else "finite and >= 1")
        raise ScheduleError(f"imbalance must be a number {within}, the busiest expert-parallel "
                            f"rank's tokens over the mean (got {imbalance!r})")
    return float(imbalance)


@known_keywords("layer_parts")
def layer_parts(model: Transformer, hardware: Hardware, *, seq: int, microbatch=1, t=1,
                ep=1, etp=1, moe: bool | None = None, sequence_parallel: bool = True,
                recompute: str = "none", precision: str = "bf16", node_limit=None,
                imbalance: float = 1.0, dispatcher: str = "alltoall",
                dispatch: str = "bf16", tp=None, gpus=None) -> LayerParts:
    """One layer's ``LayerParts`` for one microbatch on one GPU, in seconds.

    Parameters
    ----------
    model : Transformer
    hardware : Hardware
        Its ``precision`` is replaced by ``precision``.
    seq, microbatch, t, ep, etp : int or array_like
        Sequence length, sequences per microbatch, tensor-parallel, expert-parallel and
        expert-tensor-parallel degrees (the last four broadcast).
    moe : bool, optional
        An MoE layer (default: whether the model has experts); ``False`` gives a dense layer
        (DeepSeek-V3's first three), its all-to-alls zero.
    sequence_parallel : bool
    recompute : {"none", "selective", "full"}
        Selective adds the attention core's forward to ``attention_i``; full adds each
        forward part to its backward (the all-to-alls too: the recomputed forward repeats
        them).
    precision : {"bf16", "fp8"}
        The products' precision.
    node_limit : int, optional
        DeepSeek's node-limited routing: each token reaches at most this many nodes, once
        each (default: Megatron's all-to-all, every copy alone).
    imbalance : float
        The busiest expert-parallel rank's tokens over the mean (>= 1).
    dispatcher : {"alltoall", "allgather", "flex"}
        The token dispatcher (the module's rules). A memory recipe's terms are added by
        ``fastpp.model.recipes.parts_with_recipe``.
    dispatch : {"bf16", "fp8"}
        The dispatch's precision on the wire: bf16 as Megatron-Core sends it, fp8 where the
        tokens are quantized before it (DeepSeek-V3's recipe; ``dispatch_precision``).
    tp : int or array_like, optional
        Deprecated: ``t``'s name in 0.1.0 (a ``DeprecationWarning``; goes in the next
        release).
    gpus : int or array_like, optional
        The job's GPUs, which say where an expert group straddles two nodes
        (``expert_ranks_per_node``; default unknown), as ``plan`` prices it.

    Returns
    -------
    LayerParts
        ``attention_*`` (norm, projections, core, residual, router-free; with the attention's
        tensor-parallel exchange), ``mlp_*`` (router, permutations, routed and shared experts;
        with the MLP's tensor-parallel exchange), the four all-to-alls.

    Raises
    ------
    ScheduleError
        If an argument is not of its kind or choices (``model`` a ``Transformer``,
        ``hardware`` a ``Hardware``, ``precision``, ``recompute``, ``dispatcher``, a count).
    """
    from .transformer import RECOMPUTE

    t = renamed("layer_parts", "tp", "t", tp, t, 1)
    instance(model, Transformer, "model", "fastpp.model.Transformer")
    instance(hardware, Hardware, "hardware", "fastpp.model.Hardware")
    one_of(precision, "precision", PRECISIONS)
    one_of(recompute, "recompute", RECOMPUTE)
    one_of(sequence_parallel, "sequence_parallel", (False, True))
    one_of(dispatcher, "dispatcher", DISPATCHERS)
    one_of(dispatch, "dispatch", PRECISIONS)
    positive_int(seq, "seq")
    imbalance = check_imbalance(imbalance, model)
    if node_limit is not None:
        positive_int(node_limit, "node_limit")
    if gpus is not None:
        gpus = positive_ints(gpus, "gpus")
    moe = model.moe if moe is None else moe
    one_of(moe, "moe", (False, True))
    if moe and not model.moe:
        raise ScheduleError(f"moe=True needs a model with experts ({model.name} has none)")
    hw = hardware.with_precision(precision)
    counts = [positive_ints(x, name) for x, name in
              ((microbatch, "microbatch"), (t, "t"), (ep, "ep"), (etp, "etp"))]
    try:
        b, t, ep, etp = np.broadcast_arrays(*counts)
    except ValueError:
        raise ScheduleError(f"microbatch, t, ep and etp must broadcast together (got shapes "
                            f"{[x.shape for x in counts]})") from None
    if moe:
        bad = (model.experts % ep) != 0
        if np.any(bad):
            raise ScheduleError(f"ep must divide the experts {model.experts} (got "
                                f"ep={int(ep[bad].flat[0])})")
        if not sequence_parallel and np.any(t > 1):
            raise ScheduleError(sequence_parallel_reason(int(t[t > 1].flat[0])))
    attention = attention_times(model, hw, seq, b, t, sequence_parallel)
    exchange = np.where(t > 1, tensor_exchange(hw, seq, b, t, model.hidden,
                                               sequence_parallel, gpus), 0.0)
    if moe:
        mlp = expert_times(model, hw, seq, b, t, ep, etp, sequence_parallel, imbalance,
                           dispatcher)
        comm = all_to_all_times(model, hw, seq, b, t, ep, etp, dispatch, node_limit,
                                imbalance, dispatcher=dispatcher, gpus=gpus)
    else:
        mlp = mlp_times(model, hw, seq, b, t, sequence_parallel)
        comm = dict.fromkeys(("dispatch_f", "combine_f", "dispatch_b", "combine_b"),
                             np.zeros(b.shape))
    around = exchange * (exchanges_around_experts(model) if moe else 1.0)
    parts = {"attention_f": attention["forward"] + exchange,
             "attention_i": attention["input_grad"] + exchange,
             "attention_w": attention["weight_grad"],
             "mlp_f": mlp["forward"] + around, "mlp_i": mlp["input_grad"] + around,
             "mlp_w": mlp["weight_grad"], **comm}
    if recompute == "selective":
        parts["attention_i"] = parts["attention_i"] + attention["core"]
    elif recompute == "full":
        for k in ("attention", "mlp"):
            parts[f"{k}_i"] = parts[f"{k}_i"] + parts[f"{k}_f"]
        parts["dispatch_b"] = parts["dispatch_b"] + parts["dispatch_f"]
        parts["combine_b"] = parts["combine_b"] + parts["combine_f"]
    return LayerParts(**{k: np.asarray(v, np.float64) for k, v in parts.items()})


def layer_seconds(parts: LayerParts) -> dict[str, np.ndarray]:
    """A layer's ``forward``, ``input_grad`` and ``weight_grad`` without overlap: each the sum
    of its parts, the all-to-alls inside the forward and the input-grad backward."""
    return {"forward": parts.attention_f + parts.dispatch_f + parts.mlp_f + parts.combine_f,
            "input_grad": (parts.combine_b + parts.mlp_i + parts.dispatch_b
                           + parts.attention_i),
            "weight_grad": parts.attention_w + parts.mlp_w}


__all__ = ["CAST_BYTES", "COMBINE_BYTES", "DISPATCHERS", "DISPATCH_BYTES", "HYBRID_EP",
           "all_to_all_bytes", "dispatch_precision", "distinct_ranks",
           "all_to_all_times", "exchanges_around_experts", "expert_costs",
           "expert_data_parallel", "expert_ranks_per_node", "expert_reasons",
           "expert_times", "fp8_casts",
           "layer_parts", "layer_seconds", "moe_layer_costs", "sequence_parallel_reason"]
