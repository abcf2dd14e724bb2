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
  shaped ``s x s x d``, reading Q, K, V and writing the output) or the unfused
  ``QK^T``, scale-mask-softmax, dropout and ``PV`` (``b a / t`` products ``s x s x d``, the
  ``b a s^2 / t`` scores read and written by each elementwise op); the output projection
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
  stage's final norm, the logits ``T x h -> v/t`` with its two gradients, and the fp32
  cross-entropy (the half-precision logits read, 4-byte copies written and read by the max,
  exp-sum and loss passes: 18 bytes per logit forward, 6 backward);
- the optimizer step: Adam over the fp32 master weights, ``OPTIMIZER_STEP_BYTES`` per
  parameter the device updates.
"""

from __future__ import annotations

import numpy as np

from .hardware import Hardware
from .transformer import BYTES, Transformer

# Adam per parameter: read the fp32 gradient, master weight, momentum and variance (16 bytes),
# write the last three and the half-precision weight (14), read the gradient again for its norm
OPTIMIZER_STEP_BYTES = 34.0
LOSS_FORWARD_BYTES, LOSS_BACKWARD_BYTES = 18.0, 6.0  # per logit, see the module


def matmul_efficiency(hardware: Hardware, m, n, k) -> np.ndarray:
    """The fraction of the peak an ``(m x k) @ (k x n)`` product reaches (see the module)."""
    c = hardware.matmul_half
    m, n, k = (np.asarray(x, np.float64) for x in (m, n, k))
    return hardware.efficiency * m / (m + c) * n / (n + c) * k / (k + c)


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


def optimizer_time(hardware: Hardware, params) -> np.ndarray:
    """Seconds of the Adam step over ``params`` parameters on one device (memory-bound; a
    handful of fused multi-tensor kernels, their overheads negligible)."""
    return np.asarray(params, np.float64) * OPTIMIZER_STEP_BYTES / hardware.memory_bandwidth


def _attention(hw: Hardware, model: Transformer, s, b, t):
    """Forward and input-grad seconds of the attention core (scores to context)."""
    h, a, kv = float(model.hidden), float(model.heads), float(model.kv)
    d = h / a
    if model.flash_attention:
        flops = 2.0 * b * s * s * h / t  # causal: half of the 4 b s^2 h of the full square
        moved = BYTES * s * b * (2.0 * h + 2.0 * kv) / t
        eff = matmul_efficiency(hw, s, s, d)
        forward = roofline(hw, flops, moved, eff)
        return forward, roofline(hw, 2.5 * flops, 2.0 * moved, eff)
    count = b * a / t
    scores = BYTES * count * s * s  # bytes of one score tensor
    mask = 0.5 * scores if model.dropout else 0.0  # one byte per score
    product = matmul_time(hw, s, s, d, count)  # QK^T (s x d x s) or PV (s x s x d): same
    forward = 2.0 * product + memory_time(hw, 2.0 * scores)
    backward = 4.0 * product + memory_time(hw, 3.0 * scores)
    if model.dropout:
        forward = forward + memory_time(hw, 2.0 * scores + mask)
        backward = backward + memory_time(hw, 2.0 * scores + mask)
    return forward, backward


def layer_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
                sequence_parallel: bool, recompute) -> dict[str, np.ndarray]:
    """Compute seconds of one layer and one microbatch on one tensor-parallel rank:
    ``forward``, ``input_grad`` (with recomputation) and ``weight_grad``; collectives are
    not included (``fastpp.model.comm``). ``microbatch``, ``t`` and ``recompute`` (an index
    into ``RECOMPUTE``) broadcast."""
    hw = hardware
    s, h, kv, F = float(seq), float(model.hidden), float(model.kv), float(model.ffn)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    rc = np.asarray(recompute)
    T = s * b
    rows = T / t if sequence_parallel else T  # the norms' and residuals' rows
    G = 2.0 if model.swiglu else 1.0
    qkv = (h + 2.0 * kv) / t
    drop = 0.5 if model.dropout else 0.0  # a one-byte mask per element, in half elements
    norms = 2.0 * memory_time(hw, 2.0 * BYTES * rows * h)
    residuals = 2.0 * memory_time(hw, (3.0 + drop) * BYTES * rows * h)
    act_fwd = memory_time(hw, (G + 1.0) * BYTES * T * F / t)
    core_fwd, core_bwd = _attention(hw, model, s, b, t)
    forward = (norms + residuals + act_fwd + core_fwd
               + matmul_time(hw, T, qkv, h) + matmul_time(hw, T, h, h / t)
               + matmul_time(hw, T, G * F / t, h) + matmul_time(hw, T, h, F / t))
    input_grad = (1.5 * norms + (2.0 + drop) / (3.0 + drop) * residuals
                  + memory_time(hw, (G + 2.0) * BYTES * T * F / t) + core_bwd
                  + matmul_time(hw, T, h, qkv) + matmul_time(hw, T, h / t, h)
                  + matmul_time(hw, T, h, G * F / t) + matmul_time(hw, T, F / t, h))
    weight_grad = (matmul_time(hw, h, qkv, T) + matmul_time(hw, h / t, h, T)
                   + matmul_time(hw, h, G * F / t, T) + matmul_time(hw, F / t, h, T))
    input_grad = input_grad + np.where(rc == 1, core_fwd, np.where(rc == 2, forward, 0.0))
    return {"forward": forward + 0.0 * b, "input_grad": input_grad + 0.0 * b,
            "weight_grad": weight_grad + 0.0 * b}


def head_times(model: Transformer, hardware: Hardware, seq: int, microbatch, t,
               sequence_parallel: bool) -> dict[str, np.ndarray]:
    """Compute seconds of the first stage's embedding and the last stage's final norm,
    logits and loss for one microbatch on one rank: ``embed_forward``, ``embed_weight``,
    ``head_forward``, ``head_input_grad``, ``head_weight_grad``."""
    hw = hardware
    s, h, v = float(seq), float(model.hidden), float(model.vocab)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    T = s * b
    rows = T / t if sequence_parallel else T
    logits = T * v / t
    return {
        "embed_forward": memory_time(hw, 2.0 * BYTES * T * h),
        "embed_weight": memory_time(hw, (BYTES + 8.0) * T * h),  # scatter-add into fp32
        "head_forward": (memory_time(hw, 2.0 * BYTES * rows * h) + matmul_time(hw, T, v / t, h)
                         + memory_time(hw, LOSS_FORWARD_BYTES * logits)),
        "head_input_grad": (memory_time(hw, LOSS_BACKWARD_BYTES * logits)
                            + matmul_time(hw, T, h, v / t)
                            + memory_time(hw, 3.0 * BYTES * rows * h)),
        "head_weight_grad": matmul_time(hw, h, v / t, T),
    }
