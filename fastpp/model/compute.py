"""Per-op compute times of a transformer layer: a roofline per op with a shape-dependent
matrix-product efficiency and a launch overhead.

Each op takes ``max(FLOPs / (peak x efficiency), bytes / memory_bandwidth) + op_overhead``
(``Hardware``). Matrix products ``(M x K) @ (K x N)`` reach

    efficiency(M, N, K) = e * M/(M + c) * N/(N + c) * K/(K + c)

of the peak, with ``e = Hardware.efficiency`` (the ceiling large products reach) and ``c =
Hardware.matmul_half`` (elements): a product thin in any dimension (a tensor-parallel slice, a
small hidden size, one short sequence) runs far below the peak, as the tile quantization and
the poor reuse of a thin product make it on real GPUs (NVIDIA's "Matrix Multiplication
Background" guide; Calculon and vTrain fit the same kind of curve). Every other op is bound by
memory: it moves its bytes at ``memory_bandwidth``.

The ops of one layer, Megatron's order, with ``T = s b`` tokens (``T/t`` rows in the
sequence-parallel regions), ``d = h/a`` per head, gate ``G = 2`` for SwiGLU (else 1):

- forward: two norms (read and write ``Th``); the QKV product ``T x h -> (h + 2kv)/t``; the
  attention core, either FlashAttention (one kernel, ``2 b s^2 h / t`` FLOPs for a causal mask,
  at the kernel's measured speed by length, head dimension and mask, ``fastpp.model.attention``,
  reading Q, K, V and writing the output) or the unfused
  ``QK^T``, scale-mask-softmax, dropout and ``PV`` (``b a / t`` products ``s x s x d_qk``
  and ``s x s x d_v``, the
  ``b a s^2 / t`` scores read and written by each elementwise op; the softmax Megatron's fused
  kernel where it takes the shape, else PyTorch's five kernels in fp32, ``fused_softmax``,
  whose extra ops also cost the framework's CPU, ``Hardware.host_op``); the output projection
  ``T x h/t -> h``; two fused bias-dropout-residual adds; the MLP's ``T x h -> G F/t``, its
  activation and ``T x F/t -> h``;
- input-grad backward: each product's data gradient (same FLOPs, transposed shape), the
  attention core's backward (FlashAttention: 2.5 times its forward FLOPs as it recomputes the
  scores; unfused: four batched products and the softmax and dropout backwards), each
  elementwise op's backward (read two tensors, write one);
- weight-grad backward: each product's weight gradient, ``K x T -> N`` (the tokens are the
  reduction dimension);
- recomputation adds the attention core's forward (selective) or the whole forward (full) to
  the input-grad backward;
- the first stage's embedding (a gather; its weight gradient a scatter-add into fp32), the last
  stage's final norm, the logits ``T x h -> v/t`` with its two gradients, and the loss in fp32
  as ``Transformer.loss`` runs it (``LOSS_BYTES``), and the training loop's metrics on the same
  logits after the backward (``metric_time``);
- the optimizer step: Adam over the fp32 master weights, ``OPTIMIZER_STEP_BYTES`` per
  parameter the device updates;
- with fp8 products, a dense layer's Transformer Engine casts and transposes
  (``fp8_cast_times``); the attention core stays in bf16, and so does the output layer
  (``head_times``) unless ``Hardware.fp8_output_layer``.
"""

from __future__ import annotations

import numpy as np

from .attention import attention_efficiency
from .hardware import HARDWARE, Hardware
from .transformer import BYTES, Transformer, window_pairs

# Adam per parameter: read the fp32 gradient, master weight, momentum and variance (16 bytes),
# write the last three and the half-precision weight (14), read the gradient again for its norm
OPTIMIZER_STEP_BYTES = 34.0
# an FP8 product's operand cast: the bf16 tensor read (2 bytes an element) and written twice
# in FP8 (1 byte each, with a scale per 32 or 128 elements), row-wise for the product and
# column-wise for the other gradient's (MXFP8 on Blackwell; Hopper's FP8 needs the transpose);
# where a kernel before it already wrote FP8, only the column-wise copy: half of it
CAST_BYTES = 2.0 + 2.0 * (1.0 + 1.0 / 32.0)
# per-tensor current scaling reads each cast's bf16 input once more before it, for the amax
# (Transformer Engine's cast.cpp: amax, then the scale, then the cast; Hardware's
# fp8_current_scaling)
CURRENT_SCALING_BYTES = 2.0
# Bytes a logit the loss moves, forward and backward, by Transformer.loss, one pass a kernel.
# Megatron's vocabulary-parallel cross entropy ("in-place", tensor_parallel.cross_entropy):
# the fp32 copy of the bf16 logits (read 2, write 4), the max (4), the max subtracted, exp and
# the division by the sum, each in place (8 each), the sum (4); backward the gradient scaled
# in place (8) and cast back to bf16 (6). With --cross-entropy-loss-fusion ("fused",
# fusions/fused_cross_entropy.py: each of its functions compiled by torch.compile, one kernel
# each) the copy and the max (6), the subtraction, exp and sum (8), the division (8); backward
# the gradient, written back into the kept softmax (its input, mutated) and cast (10).
# PyTorch's cross_entropy on logits.float() ("cross-entropy", torchtitan's): the copy (6) and
# log_softmax (8); backward nll_loss's zeroed gradient (4), log_softmax's (12), the cast (6);
# its GPU kernels' extra passes over rows longer than shared memory are not counted.
# tests/test_loss_time.py counts the first and the last op by op as PyTorch dispatches them.
# flash-attn's fused cross entropy ("flash-attn", llm-foundry's MPT default, read from its
# csrc/xentropy kernel, not measured here): one kernel reads the bf16 logits twice (the max
# and the sum, then the exponentials' sum; 4); backward one reads them and writes the
# gradient anew (4).
LOSS_BYTES = {"in-place": (38.0, 14.0), "fused": (22.0, 10.0), "cross-entropy": (14.0, 22.0),
              "flash-attn": (4.0, 4.0)}
# A training metric's cross entropy over a microbatch's logits, outside autograd (Composer's
# LanguageCrossEntropy and LanguagePerplexity, RunConfig.train_metrics): PyTorch's
# cross_entropy forward under autocast, the fp32 copy and log_softmax (LOSS_BYTES'
# "cross-entropy", 14 bytes a logit), in 7 kernels: those two, nll_loss, the count of targets
# (ne, sum) and the two sums into the metric's state, the last five on a token or a number
METRIC_KERNELS = 7
# torchtitan's Llama block run by eager PyTorch (Transformer.eager): the bytes its elementwise
# ops move beyond what the fused kernels above are priced at, forward and backward, counted
# from the ops its code runs (torchtitan's model.py, its norms.py at 9dec370; each op reads
# its inputs, a broadcast one once, and writes its outputs; tests/test_eager.py holds each
# part and their sums to PyTorch's own ops):
# - torchtitan's 2024 RMSNorm ("fp32-norm"), an element of h: x.float(), pow, mean, x * rsqrt,
#   type_as, * weight move 36 bytes forward against a fused norm's 4; their backward (in
#   fp32, with the weight's gradient) 92 against 6. PyTorch's nn.RMSNorm ("native-norm") is
#   one kernel each way, priced as the fused norm;
# - the rotary embedding, an element of q and k: x.float(), the complex product, type_as move
#   20 forward and 20 backward, which no fused pricing counts (a fused kernel's 4 and 4 are
#   priced nowhere), the rotary table's reads left out (4/heads bytes an element);
# - SiLU and the product as two ops, an element of F: 10 forward and 18 backward against the
#   one op's 6 and 10 (Megatron's swiglu_back reads the gradient and both inputs, writes
#   both gradients; GeLU is one op either way);
# - each product's input gradient added apart where several products read one tensor (wq,
#   wk, wv; w1, w3), 6 bytes an element of h for each sum, and the residual's gradient added
#   to its branch's, 6 against 4.
EAGER_NORM = (32.0, 86.0)
EAGER_ROPE = (20.0, 20.0)
EAGER_GATE = (4.0, 8.0)
EAGER_SUM, EAGER_RESIDUAL = 6.0, 2.0
# the kernels each launches beyond the fused ones, forward and backward: the 2024 norm 8 and
# 16 against 1 and 1, the rotary embedding 6 and 8 against none, SiLU and the product 2 and 3
# against 1 and 1, each sum of input gradients one backward
EAGER_KERNELS = {"norm": (7, 15), "rope": (6, 8), "gate": (1, 2), "sum": (0, 1)}
# PyTorch's softmax path where Megatron's fused kernel refuses the shape: per kernel, the
# bytes it moves in half-precision score tensors. Forward: the fp32 cast (read 2 bytes a
# score, write 4), the scale, the in-place mask, the softmax (each read 4, write 4), the cast
# back (read 4, write 2); backward: each one's autograd node (the softmax's reads its output
# and the gradient). The fused kernel moves 2 (3 backward) in one kernel.
EAGER_SOFTMAX_FORWARD = (3.0, 4.0, 4.0, 4.0, 3.0)
EAGER_SOFTMAX_BACKWARD = (3.0, 6.0, 4.0, 4.0, 3.0)
EAGER_SOFTMAX_OPS = len(EAGER_SOFTMAX_FORWARD) - 1  # the ops the framework issues beyond one


def matmul_efficiency(hardware: Hardware, m, n, k) -> np.ndarray:
    """The fraction of the peak an ``(m x k) @ (k x n)`` product reaches (see the module),
    at least what ``hardware.floor``'s curve reaches at that shape (its bf16 FLOP/s)."""
    c = hardware.matmul_half
    m, n, k = (np.asarray(x, np.float64) for x in (m, n, k))
    own = hardware.efficiency * m / (m + c) * n / (n + c) * k / (k + c)
    other = HARDWARE.get(hardware.floor)
    if other is None or hardware.peak_flops < other.peak_flops:  # (a GPU made slower than
        return own                                                 # its floor: its own)
    c = other.matmul_half
    floor = (other.efficiency * m / (m + c) * n / (n + c) * k / (k + c) * other.peak_flops
             / hardware.peak)
    return np.maximum(own, np.minimum(floor, hardware.efficiency))  # (never past its ceiling)


def matmul_time(hardware: Hardware, m, n, k, count=1.0) -> np.ndarray:
    """Seconds of ``count`` independent ``(m x k) @ (k x n)`` products in one kernel (a batched
    product): the slower of its FLOPs and its half-precision operands, plus one overhead."""
    m, n, k = (np.asarray(x, np.float64) for x in (m, n, k))
    flops = 2.0 * m * n * k * count
    moved = BYTES * (m * k + k * n + m * n) * count
    return roofline(hardware, flops, moved, matmul_efficiency(hardware, m, n, k))


def memory_time(hardware: Hardware, moved) -> np.ndarray:
    """Seconds of a memory-bound op that moves ``moved`` bytes, plus one overhead."""
    return np.asarray(moved, np.float64) / hardware.memory_bandwidth + hardware.op_overhead


def roofline(hardware: Hardware, flops, moved, efficiency) -> np.ndarray:
    """``max(flops / (peak x efficiency), moved / memory_bandwidth) + op_overhead``."""
    return (np.maximum(np.asarray(flops, np.float64) / (hardware.peak * efficiency),
                       np.asarray(moved, np.float64) / hardware.memory_bandwidth)
            + hardware.op_overhead)


def host_times(hardware: Hardware, layers, recompute, ends=False, ops=0.0
               ) -> tuple[np.ndarray, np.ndarray]:
    """CPU seconds to issue a stage's forward and backward over ``layers`` layers
    (``Hardware.host_layer`` and ``host_backward`` per layer; full recomputation, ``recompute
    == 2``, issues the forward again in the backward), plus ``host_microbatch`` in the
    forward of a stage that ``ends`` the pipeline (holds the embedding or the loss), plus
    ``Hardware.host_op`` for each of ``ops`` more ops a layer's forward issues (and its
    backward as many autograd nodes, and its recomputed forward again). The framework runs
    ahead of the GPU only while the GPU's queue lasts: a stretch of ops takes ``max(GPU time,
    CPU time)``, not their sum, and Megatron's synchronized hand-offs end each stretch."""
    layers = np.asarray(layers, np.float64)
    full = np.asarray(recompute) == 2
    more = np.asarray(ops, np.float64) * hardware.host_op
    again = np.where(full, hardware.host_layer + more, 0.0)
    ends = np.where(np.asarray(ends, bool), hardware.host_microbatch, 0.0)
    return (layers * (hardware.host_layer + more) + ends,
            layers * (hardware.host_backward + more + again))


def fused_softmax(seq, batches) -> np.ndarray:
    """Whether Megatron's fused causal scale-mask-softmax kernel takes ``batches`` score
    matrices (microbatch times heads per rank) of ``seq`` keys (``FusedScaleMaskSoftmax.
    is_kernel_available``): 16 < seq <= 4096, seq a multiple of 4, and the batches a multiple
    of the kernel's batches per block (4: one per warp of a 128-thread block; 8 up to 128 keys,
    two per warp). Otherwise PyTorch's softmax runs (``EAGER_SOFTMAX_FORWARD``)."""
    seq = np.asarray(seq, np.float64)
    per_block = np.where(seq <= 128, 8.0, 4.0)
    return (seq > 16) & (seq <= 4096) & (np.mod(seq, 4) == 0) & (
        np.mod(np.asarray(batches, np.float64), per_block) == 0)


def eager_ops(model: Transformer, seq, microbatch, t) -> np.ndarray:
    """Ops a layer's forward issues beyond the fused layer's: PyTorch's softmax path where
    the unfused attention's fused kernel refuses the shape (``fused_softmax``), else none."""
    batches = np.asarray(microbatch, np.float64) * model.heads / np.asarray(t, np.float64)
    eager = (not model.flash_attention) & ~fused_softmax(seq, batches)
    return np.where(eager, float(EAGER_SOFTMAX_OPS), 0.0)


def optimizer_time(hardware: Hardware, params) -> np.ndarray:
    """Seconds of the Adam step over ``params`` parameters on one device (memory-bound; a
    handful of fused multi-tensor kernels, their overheads negligible)."""
    return np.asarray(params, np.float64) * OPTIMIZER_STEP_BYTES / hardware.memory_bandwidth


def _attention(hw: Hardware, model: Transformer, s, b, t, length=None, causal=True,
               window=True):
    """Forward and input-grad seconds of the attention core (scores to context), in bf16 even
    when the products run in fp8 (DeepSeek-V3's and Transformer Engine's FP8 recipes).

    FlashAttention's FLOPs are ``b`` causal sequences' of length ``s``; its kernel runs at the
    measured speed (``fastpp.model.attention``) of ``length`` keys (default ``s``; context
    parallelism's blocks are shorter) with or without a ``causal`` mask. With ``window``, the
    model's sliding layers count only the pairs within their window (``Transformer.window``;
    a chunked layer's, each chunk a causal core of ``window`` tokens);
    context parallelism's ring steps are priced without it (as full attention)."""
    if hw.precision != "bf16":
        hw = hw.with_precision("bf16")
    a, d = float(model.heads), float(model.head_dim + model.rope_dim)
    q, o = a * d, a * float(model.v_head_dim)  # Q (and K with MLA) and V (and the output)
    keys = q + o if model.mla else 2.0 * float(model.kv)  # K and V
    if model.flash_attention:
        flops = b * s * s * model.core_width() / t  # causal: half of the full square's
        moved = BYTES * s * b * (q + o + keys) / t
        length = s if length is None else length
        forward, backward = _flash(hw, flops, moved, length, d, causal)
        if not (window and model.sliding_layers):
            return forward, backward
        # the sliding layers' share of the core: the pairs within the window, at the speed of
        # a query tile's loop over at most w keys (the layers are summed: their mean is exact)
        w, share = float(model.window), model.sliding_layers / model.layers
        slide = _flash(hw, window_pairs(w, s, model.chunked) * flops, moved,
                       np.minimum(length, w), d, causal)
        return ((1.0 - share) * forward + share * slide[0],
                (1.0 - share) * backward + share * slide[1])
    count = b * a / t
    scores = BYTES * count * s * s  # bytes of one score tensor
    mask = 0.5 * scores if model.dropout else 0.0  # one byte per score
    qk = matmul_time(hw, s, s, d, count)  # QK^T (s x d x s)
    pv = matmul_time(hw, s, s, float(model.v_head_dim), count)  # PV (s x s x d_v): MLA's 128
    fused = fused_softmax(s, count)
    softmax = np.where(fused, memory_time(hw, 2.0 * scores),
                       sum(memory_time(hw, k * scores) for k in EAGER_SOFTMAX_FORWARD))
    softmax_grad = np.where(fused, memory_time(hw, 3.0 * scores),
                            sum(memory_time(hw, k * scores) for k in EAGER_SOFTMAX_BACKWARD))
    forward = qk + pv + softmax
    backward = 2.0 * (qk + pv) + softmax_grad  # dQ, dK at d; dP, dV at d_v
    if model.dropout:
        forward = forward + memory_time(hw, 2.0 * scores + mask)
        backward = backward + memory_time(hw, 2.0 * scores + mask)
    return forward, backward


def _flash(hw: Hardware, flops, moved, length, d, causal):
    """Forward and backward seconds of a FlashAttention kernel of ``flops`` forward FLOPs
    (the backward 2.5 times), its speed that of ``length`` keys."""
    eff = attention_efficiency(hw, "forward", length, d, causal)
    if eff is None:  # no measured kernel for this GPU: the dense-product curve
        eff = eff_b = matmul_efficiency(hw, length, length, d)
    else:
        eff_b = attention_efficiency(hw, "backward", length, d, causal)
    return roofline(hw, flops, moved, eff), roofline(hw, 2.5 * flops, 2.0 * moved, eff_b)


def amax_bytes(hw: Hardware) -> float:
    """Bytes an element each FP8 cast reads beyond its own: ``CURRENT_SCALING_BYTES`` under
    per-tensor current scaling (``Hardware.fp8_current_scaling``), else none."""
    return CURRENT_SCALING_BYTES if hw.fp8_current_scaling else 0.0


def gradient_hardware(hw: Hardware) -> Hardware:
    """The hardware the data- and weight-gradient products run on: ``hw`` itself, or, for
    FP8 products under Transformer Engine's current scaling, ``hw`` with its efficiency
    divided by ``Hardware.split_accumulator`` (the recipe accumulates those two products in
    split mode, ``use_split_accumulator=True``; the forward product in fast mode)."""
    if hw.precision != "fp8" or not hw.fp8_current_scaling or hw.split_accumulator == 1.0:
        return hw
    return hw.with_efficiency(hw.efficiency / hw.split_accumulator)


def fp8_cast_times(hw: Hardware, model: Transformer, T, t) -> tuple[np.ndarray, np.ndarray]:
    """Forward and input-grad seconds of Transformer Engine's fp8 casts in one dense layer
    (zero unless ``hw.precision`` is "fp8"), one memory-bound kernel each. Per product, bytes
    per element: its input's full cast (``CAST_BYTES``) where no kernel before it writes fp8
    (the output projection's input), the column-wise copy alone (half) where one does (the
    norms before QKV and FC1, the activation before FC2); in the backward each output
    gradient's full cast, FC1's fused into the activation's backward (half). The weights'
    casts, once a step, and the scaling factors' updates are left out. Current scaling adds
    its amax pass to each (``amax_bytes``)."""
    if hw.precision != "fp8":
        return 0.0, 0.0
    h, F = float(model.hidden), float(model.ffn)
    G = 2.0 if model.swiglu else 1.0
    (qkv, _), (_, out) = _attention_shapes(model, t)[0]
    full, half = CAST_BYTES + amax_bytes(hw), CAST_BYTES / 2.0 + amax_bytes(hw)
    forward = sum(memory_time(hw, k * T * w) for k, w in
                  ((half, h), (full, out), (half, h), (half, F / t)))
    backward = sum(memory_time(hw, k * T * w) for k, w in
                   ((full, qkv), (full, h), (half, G * F / t), (full, h)))
    return forward, backward


def _products(hw: Hardware, shapes, T):
    """Forward, input-grad and weight-grad seconds of products ``T x k -> n`` (``shapes`` a
    list of ``(n, k)``): ``T x k -> n``, its data gradient ``T x n -> k`` and its weight
    gradient ``k x T -> n``."""
    forward = sum(matmul_time(hw, T, n, k) for n, k in shapes)
    grad = gradient_hardware(hw)
    input_grad = sum(matmul_time(grad, T, k, n) for n, k in shapes)
    weight_grad = sum(matmul_time(grad, k, n, T) for n, k in shapes)
    return forward, input_grad, weight_grad


def _attention_shapes(model: Transformer, t):
    """The attention's products ``(n, k)`` on one rank, and MLA's latent widths (their norms)."""
    h, a = float(model.hidden), float(model.heads)
    d, dv, r = float(model.head_dim), float(model.v_head_dim), float(model.rope_dim)
    if not model.mla:
        return [(a * d / t + 2.0 * model.kv / t, h), (h, a * dv / t)], []
    q, kv = float(model.q_rank), float(model.kv_rank)
    query = [(q, h), (a * (d + r) / t, q)] if q else [(a * (d + r) / t, h)]
    return query + [(kv + r, h), (a * (d + dv) / t, kv), (h, a * dv / t)], \
        [q, kv] if q else [kv]


def eager_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
                sequence_parallel: bool, width=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The seconds eager PyTorch's elementwise ops add to a layer (``model.eager``): the
    bytes of ``eager_bytes`` at the memory's bandwidth and ``Hardware.op_overhead`` for
    each kernel they launch beyond the fused ones (``EAGER_KERNELS``).

    Returns
    -------
    dict
        ``"attention"`` and ``"mlp"``, each ``(forward, backward)`` seconds (zero for a
        fused model).
    """
    moved = eager_bytes(model, seq, microbatch, t, sequence_parallel, width)
    if not model.eager:
        return moved
    parts = _eager_parts(model, width)
    k = EAGER_KERNELS
    norm = model.eager == "fp32-norm"
    kernels = {"attention": [norm * k["norm"][i] + k["rope"][i]
                             + (parts["readers"] - 1) * k["sum"][i] for i in (0, 1)],
               "mlp": [norm * k["norm"][i] + parts["gated"] * (k["gate"][i] + k["sum"][i])
                       for i in (0, 1)]}
    return {half: tuple(x / hardware.memory_bandwidth + n * hardware.op_overhead
                        for x, n in zip(moved[half], kernels[half], strict=True))
            for half in moved}


def _eager_parts(model: Transformer, width=None) -> dict[str, float]:
    """What of a layer eager PyTorch runs apart: the rotary embedding's width split over the
    tensor-parallel ranks (``roped``, each query head's) and whole on each (``shared``,
    MLA's one rotary key), how many products read the attention's normed input
    (``readers``), and whether the MLP's activation is SwiGLU's two ops (``gated``)."""
    F = float(model.ffn if width is None else width)
    if model.mla:  # wq (or wq_a) and wkv_a read the norm; k_pe is one head, on every rank
        roped, shared, readers = float(model.heads * model.rope_dim), float(model.rope_dim), 2
    else:
        roped, shared, readers = float(model.heads * model.head_dim + model.kv), 0.0, 3
    return {"roped": roped, "shared": shared, "readers": readers,
            "gated": int(model.swiglu and F > 0), "ffn": F}


def eager_bytes(model: Transformer, seq: int, microbatch, t, sequence_parallel: bool,
                width=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Bytes a layer's elementwise ops move in eager PyTorch beyond the fused kernels' price
    (``EAGER_*``; all zero unless ``model.eager``; the norms' part with ``"fp32-norm"``
    alone), for one microbatch on one tensor-parallel rank, with an MLP of ``width``
    (default ``ffn``; 0: the norm and residual alone). The norms and residuals run on
    ``T/t`` rows with sequence parallelism, the sums of the products' input gradients on
    all ``T`` (before their reduce-scatter), the rotary embedding and the activation on
    ``1/t`` of their heads and width. An MoE layer's experts and MLA's latent norms are left
    out (``from_torchtitan`` says so).

    Returns
    -------
    dict
        ``"attention"`` and ``"mlp"``, each ``(forward, backward)`` bytes.
    """
    s, h = float(seq), float(model.hidden)
    T = s * np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    if not model.eager:
        zero = 0.0 * T * t
        return {"attention": (zero, zero), "mlp": (zero, zero)}
    parts = _eager_parts(model, width)
    rows = T / t if sequence_parallel else T
    norm = 1.0 if model.eager == "fp32-norm" else 0.0
    norm_f, norm_b = (norm * x * rows * h for x in EAGER_NORM)
    residual = EAGER_RESIDUAL * rows * h
    rope = T * (parts["roped"] / t + parts["shared"])
    gated, F = parts["gated"], parts["ffn"]
    return {"attention": (norm_f + EAGER_ROPE[0] * rope,
                          norm_b + EAGER_ROPE[1] * rope
                          + EAGER_SUM * (parts["readers"] - 1) * T * h + residual),
            "mlp": (norm_f + gated * EAGER_GATE[0] * T * F / t,
                    norm_b + gated * (EAGER_GATE[1] * T * F / t + EAGER_SUM * T * h)
                    + residual)}


def attention_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
                    sequence_parallel: bool) -> dict[str, np.ndarray]:
    """Seconds of the attention half of a layer (its norm, projections, core and residual add)
    for one microbatch on one tensor-parallel rank: ``forward``, ``input_grad`` (without
    recomputation), ``weight_grad``, and ``core`` (the core's forward, what selective
    recomputation repeats)."""
    hw = hardware
    s, h = float(seq), float(model.hidden)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    T = s * b
    rows = T / t if sequence_parallel else T  # the norms' and residuals' rows
    drop = 0.5 if model.dropout else 0.0  # a one-byte mask per element, in half elements
    norm = memory_time(hw, 2.0 * BYTES * rows * h)
    residual = memory_time(hw, (3.0 + drop) * BYTES * rows * h)
    core_fwd, core_bwd = _attention(hw, model, s, b, t)
    shapes, latents = _attention_shapes(model, t)
    forward, input_grad, weight_grad = _products(hw, shapes, T)
    for width in latents:  # MLA's latent norms, whole on every rank
        forward = forward + memory_time(hw, 2.0 * BYTES * T * width)
        input_grad = input_grad + memory_time(hw, 3.0 * BYTES * T * width)
    if model.eager:
        more = eager_times(model, hw, seq, b, t, sequence_parallel)["attention"]
        forward, input_grad = forward + more[0], input_grad + more[1]
    return {"forward": norm + residual + core_fwd + forward + 0.0 * b,
            "input_grad": (1.5 * norm + (2.0 + drop) / (3.0 + drop) * residual + core_bwd
                           + input_grad + 0.0 * b),
            "weight_grad": weight_grad + 0.0 * b, "core": core_fwd + 0.0 * b}


def mlp_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
              sequence_parallel: bool, width=None) -> dict[str, np.ndarray]:
    """Seconds of a dense MLP half (its norm, two or three matrices of ``width`` (default
    ``ffn``; 0: none), the activation and the residual add), as ``attention_times``."""
    hw = hardware
    s, h = float(seq), float(model.hidden)
    F = float(model.ffn if width is None else width)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    T = s * b
    rows = T / t if sequence_parallel else T
    G = 2.0 if model.swiglu else 1.0
    drop = 0.5 if model.dropout else 0.0
    norm = memory_time(hw, 2.0 * BYTES * rows * h)
    residual = memory_time(hw, (3.0 + drop) * BYTES * rows * h)
    more_f = more_b = 0.0 * b
    if model.eager:
        more_f, more_b = eager_times(model, hw, seq, b, t, sequence_parallel, F)["mlp"]
    if F == 0:  # the norm and residual add alone (an MoE layer without shared experts)
        return {"forward": norm + residual + more_f + 0.0 * b,
                "input_grad": (1.5 * norm + (2.0 + drop) / (3.0 + drop) * residual + more_b
                               + 0.0 * b),
                "weight_grad": 0.0 * b}
    forward, input_grad, weight_grad = _products(hw, [(G * F / t, h), (h, F / t)], T)
    return {"forward": norm + residual + memory_time(hw, (G + 1.0) * BYTES * T * F / t)
            + forward + more_f + 0.0 * b,
            "input_grad": (1.5 * norm + (2.0 + drop) / (3.0 + drop) * residual
                           + memory_time(hw, (2.0 * G + 1.0) * BYTES * T * F / t) + input_grad
                           + more_b + 0.0 * b),
            "weight_grad": weight_grad + 0.0 * b}


def layer_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
                sequence_parallel: bool, recompute, mlp=None) -> dict[str, np.ndarray]:
    """Compute seconds of one layer and one microbatch on one tensor-parallel rank:
    ``forward``, ``input_grad`` (with recomputation) and ``weight_grad``; collectives are
    not included (``fastpp.model.comm``). ``microbatch``, ``t`` and ``recompute`` (an index
    into ``RECOMPUTE``) broadcast. ``mlp``: the MLP half's times (default the dense MLP's,
    ``mlp_times``; ``fastpp.model.moe`` gives the experts')."""
    rc = np.asarray(recompute)
    if mlp is None and not model.mla:
        return _dense_layer_times(model, hardware, seq, microbatch, t, sequence_parallel, rc)
    attention = attention_times(model, hardware, seq, microbatch, t, sequence_parallel)
    if mlp is None:
        mlp = mlp_times(model, hardware, seq, microbatch, t, sequence_parallel)
    forward = attention["forward"] + mlp["forward"]
    input_grad = attention["input_grad"] + mlp["input_grad"]
    input_grad = input_grad + np.where(rc == 1, attention["core"],
                                       np.where(rc == 2, forward, 0.0))
    zero = 0.0 * rc
    return {"forward": forward + zero, "input_grad": input_grad + zero,
            "weight_grad": attention["weight_grad"] + mlp["weight_grad"] + zero}


def _dense_layer_times(model: Transformer, hw: Hardware, seq: int, microbatch, t,
                       sequence_parallel: bool, rc) -> dict[str, np.ndarray]:
    """``layer_times`` of a standard dense layer: the sum of ``attention_times`` and
    ``mlp_times`` added in one fixed order, the order the validated figures were computed in
    (a reordered sum moves the last bits, and the Zero Bubble heuristic's ties with them)."""
    s, h, F = float(seq), float(model.hidden), float(model.ffn)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    T = s * b
    rows = T / t if sequence_parallel else T  # the norms' and residuals' rows
    G = 2.0 if model.swiglu else 1.0
    (qkv, _), (_, out) = _attention_shapes(model, t)[0]
    drop = 0.5 if model.dropout else 0.0
    norms = 2.0 * memory_time(hw, 2.0 * BYTES * rows * h)
    residuals = 2.0 * memory_time(hw, (3.0 + drop) * BYTES * rows * h)
    act_fwd = memory_time(hw, (G + 1.0) * BYTES * T * F / t)
    core_fwd, core_bwd = _attention(hw, model, s, b, t)
    forward = (norms + residuals + act_fwd + core_fwd
               + matmul_time(hw, T, qkv, h) + matmul_time(hw, T, h, out)
               + matmul_time(hw, T, G * F / t, h) + matmul_time(hw, T, h, F / t))
    grad = gradient_hardware(hw)
    input_grad = (1.5 * norms + (2.0 + drop) / (3.0 + drop) * residuals
                  + memory_time(hw, (2.0 * G + 1.0) * BYTES * T * F / t) + core_bwd
                  + matmul_time(grad, T, h, qkv) + matmul_time(grad, T, out, h)
                  + matmul_time(grad, T, h, G * F / t) + matmul_time(grad, T, F / t, h))
    weight_grad = (matmul_time(grad, h, qkv, T) + matmul_time(grad, out, h, T)
                   + matmul_time(grad, h, G * F / t, T) + matmul_time(grad, F / t, h, T))
    casts_fwd, casts_bwd = fp8_cast_times(hw, model, T, t)
    forward, input_grad = forward + casts_fwd, input_grad + casts_bwd
    if model.eager:
        more = eager_times(model, hw, seq, b, t, sequence_parallel)
        forward = forward + more["attention"][0] + more["mlp"][0]
        input_grad = input_grad + more["attention"][1] + more["mlp"][1]
    input_grad = input_grad + np.where(rc == 1, core_fwd, np.where(rc == 2, forward, 0.0))
    return {"forward": forward + 0.0 * b, "input_grad": input_grad + 0.0 * b,
            "weight_grad": weight_grad + 0.0 * b}


def metric_time(model: Transformer, hardware: Hardware, seq: int, microbatch, t
                ) -> np.ndarray:
    """Seconds of one training metric's cross entropy over a microbatch's logits on one rank
    (``RunConfig.train_metrics``): PyTorch's, on the ``T v / t`` logits, 14 bytes a logit in
    ``METRIC_KERNELS`` kernels (see ``METRIC_KERNELS``)."""
    logits = float(seq) * np.asarray(microbatch, np.float64) * model.vocab / np.asarray(t)
    return (memory_time(hardware, LOSS_BYTES["cross-entropy"][0] * logits)
            + (METRIC_KERNELS - 1) * hardware.op_overhead)


def head_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
               sequence_parallel: bool) -> dict[str, np.ndarray]:
    """Compute seconds of the first stage's embedding and the last stage's final norm,
    logits and loss for one microbatch on one rank: ``embed_forward``, ``embed_weight``,
    ``head_forward``, ``head_input_grad``, ``head_weight_grad``. The logits' products run in
    bf16 under an FP8 recipe unless ``Hardware.fp8_output_layer``."""
    hw = hardware
    out = hw if hw.fp8_output_layer else hw.with_precision("bf16")
    s, h, v = float(seq), float(model.hidden), float(model.vocab)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    T = s * b
    rows = T / t if sequence_parallel else T
    logits = T * v / t
    return {
        "embed_forward": memory_time(hw, 2.0 * BYTES * T * h),
        "embed_weight": memory_time(hw, (BYTES + 8.0) * T * h),  # scatter-add into fp32
        "head_forward": (memory_time(hw, 2.0 * BYTES * rows * h) + matmul_time(out, T, v / t, h)
                         + memory_time(hw, LOSS_BYTES[model.loss][0] * logits)),
        "head_input_grad": (memory_time(hw, LOSS_BYTES[model.loss][1] * logits)
                            + matmul_time(out, T, h, v / t)
                            + memory_time(hw, 3.0 * BYTES * rows * h)),
        "head_weight_grad": matmul_time(out, h, v / t, T),
    }
