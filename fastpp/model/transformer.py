"""A decoder-only transformer's parameters, FLOPs and activation bytes, per layer and stage.

Symbols: ``s`` sequence length, ``b`` microbatch size (sequences), ``h`` hidden size, ``a``
attention heads, ``g`` key-value heads (grouped-query attention; ``kv = g h / a``), ``F`` the
MLP's width, ``v`` the vocabulary, ``t`` the tensor-parallel degree. Half precision (2 bytes
per element) throughout.

- Parameters per layer: attention ``2h^2 + 2h kv`` (Q and output ``h x h``, K and V
  ``h x kv``), MLP ``3hF`` with SwiGLU (gate, up, down) or ``2hF``, two norms ``2h``.
- FLOPs per layer and microbatch (Narayanan et al. 2021, counting a multiply-add as 2):
  forward ``2 sb P_mm + 4 b s^2 h`` (``P_mm`` the matrix parameters; the second term is the
  attention scores and their product with V), the input-grad backward ``2 sb P_mm +
  8 b s^2 h``, the weight grad ``2 sb P_mm``; all divided by ``t``. For a GPT layer (``P_mm =
  12h^2``) these are the Zero Bubble paper's Table 1: ``sbh(24h + 4s)``, ``sbh(24h + 8s)``,
  ``24sbh^2``.
- Activations per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation"), in
  units of ``sb`` bytes: kept whole on every tensor-parallel rank without sequence
  parallelism are the two norms' inputs (``4h``), the inputs of the QKV and first MLP matrices
  (``4h``) and, with dropout, two dropout masks (``2h``); split over ``t`` are Q, K, V
  (``2h + 4kv``), the output projection's input (``2h``) and the MLP's inside (``8F`` with
  SwiGLU: gate, up, their SiLU and product; ``4F`` otherwise: the first matrix's output and
  its GeLU). Attention scores add ``5as`` (``2as`` without dropout) per ``sb``, split over
  ``t``, unless FlashAttention keeps none. With sequence parallelism everything is split over
  ``t``. A GPT layer without TP gives the paper's ``sbh(34 + 5as/h)``.
- Recomputation: ``"selective"`` stores no attention scores and recomputes them in the
  backward (``+4bs^2h/t`` FLOPs); ``"full"`` stores only each layer's input (``2sbh``, over
  ``t`` with sequence parallelism) and recomputes the whole forward before the backward.
- ``gamma`` (the part a split backward's ``W`` keeps): the Zero Bubble paper's
  ``M_W / M_B = 32/34`` of everything but the attention scores (which ``I`` frees); 1 under
  full recomputation (the recomputed layer lives until ``W``).
- Tensor parallelism puts two collectives of the layer's ``2sbh`` output on the critical path
  of the forward and two of the input-grad backward (Megatron's all-reduces, or
  reduce-scatter plus all-gather with sequence parallelism: the same bytes), each a ring
  moving ``2(t-1)/t`` of the message over the intra-node link; a full recomputation repeats the
  forward's.
- The embedding (``vh`` parameters, its ``2sbh`` output stored) sits on the first stage of
  each route, the output layer (``vh`` parameters unless tied) and the loss on the last: its
  forward, input grad and weight grad each ``2sbhv/t`` FLOPs, fp32 logits ``4sbv/t`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import ScheduleError, flag, indices, instance, positive_int, positive_ints

BYTES = 2  # half precision
RECOMPUTE = ("none", "selective", "full")
MAX_CHUNKS = 1_000_000  # model chunks of a layout: a count each, far past any pipeline


@dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer's architecture.

    Parameters
    ----------
    layers, hidden, heads : int
        Depth ``L``, hidden size ``h``, attention heads ``a``.
    kv_heads : int, optional
        Key-value heads ``g`` (grouped-query attention); default ``heads``.
    ffn : int, optional
        The MLP's width ``F``; default ``4h``.
    vocab : int
        Vocabulary size ``v``.
    swiglu : bool
        Gated MLP with three matrices (LLaMA) instead of two with GeLU (GPT).
    tied_embeddings : bool
        The output layer reuses the embedding's weights (still a copy on the last stage when
        it is on another device).
    dropout : bool
        Dropout after attention and the MLP (its masks are stored).
    flash_attention : bool
        Attention scores are not stored.
    name : str
        For tables and messages.
    """

    layers: int
    hidden: int
    heads: int
    kv_heads: int | None = None
    ffn: int | None = None
    vocab: int = 32000
    swiglu: bool = False
    tied_embeddings: bool = False
    dropout: bool = False
    flash_attention: bool = True
    name: str = "transformer"

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "vocab"):
            positive_int(getattr(self, name), name)
        for name in ("swiglu", "tied_embeddings", "dropout", "flash_attention"):
            flag(getattr(self, name), name)
        instance(self.name, str, "name", "string")
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.ffn is None:
            object.__setattr__(self, "ffn", 4 * self.hidden)
        positive_int(self.kv_heads, "kv_heads")
        positive_int(self.ffn, "ffn")
        if self.heads % self.kv_heads or self.hidden % self.heads:
            raise ScheduleError(f"kv_heads must divide heads and heads must divide hidden (got "
                                f"heads={self.heads}, kv_heads={self.kv_heads}, "
                                f"hidden={self.hidden})")

    @property
    def kv(self) -> int:
        """Width of K (and of V): ``g h / a``."""
        return self.kv_heads * self.hidden // self.heads

    def matrix_params(self) -> float:
        """``P_mm``: one layer's matrix parameters."""
        h, F = self.hidden, self.ffn
        return 2.0 * h * h + 2.0 * h * self.kv + (3.0 if self.swiglu else 2.0) * h * F

    def layer_params(self) -> float:
        """One layer's parameters: ``P_mm`` plus two norms."""
        return self.matrix_params() + 2.0 * self.hidden

    def params(self) -> float:
        """All parameters: layers, the embedding and (untied) the output layer."""
        heads = 1 if self.tied_embeddings else 2
        return self.layers * self.layer_params() + heads * self.vocab * self.hidden

    def flops_per_token(self, seq: int) -> float:
        """Model FLOPs of one token's forward and backward, without recomputation:
        ``3 (2 P_mm L + 4 s h L + 2 h v)``, i.e. ``6N + 12 L h s`` (PaLM's MFU count)."""
        seq = positive_int(seq, "seq")
        return 3.0 * (2.0 * self.matrix_params() * self.layers
                      + 4.0 * seq * self.hidden * self.layers + 2.0 * self.hidden * self.vocab)


def layer_costs(model: Transformer, seq: int, microbatch, t, sequence_parallel: bool,
                recompute) -> dict[str, np.ndarray]:
    """One layer's FLOPs, stored bytes, ``gamma`` and collective bytes for one microbatch.

    ``microbatch``, ``t`` and ``recompute`` (an index into ``RECOMPUTE``) broadcast; the
    result holds arrays ``forward, input_grad, weight_grad`` (FLOPs on one rank),
    ``activations`` (bytes on one rank), ``gamma``, ``collectives_forward`` and
    ``collectives_backward`` (how many ``2sbh`` collectives, see the module).
    """
    instance(model, Transformer, "model", "fastpp.model.Transformer")
    flag(sequence_parallel, "sequence_parallel")
    rc = indices(recompute, "recompute", len(RECOMPUTE))  # into RECOMPUTE
    s, h, a = float(positive_int(seq, "seq")), float(model.hidden), float(model.heads)
    b = positive_ints(microbatch, "microbatch").astype(np.float64)
    t = positive_ints(t, "t").astype(np.float64)
    sb = s * b
    p_mm = model.matrix_params()
    scores_flops = 4.0 * b * s * s * h / t
    forward = 2.0 * sb * p_mm / t + scores_flops
    weight = 2.0 * sb * p_mm / t
    input_grad = weight + 2.0 * scores_flops
    input_grad = input_grad + np.where(rc == 1, scores_flops, np.where(rc == 2, forward, 0.0))
    whole = 8.0 * h + (2.0 * h if model.dropout else 0.0)
    split = 2.0 * h + 4.0 * model.kv + 2.0 * h + (8.0 if model.swiglu else 4.0) * model.ffn
    kept = sb * (whole + split) / t if sequence_parallel else sb * (whole + split / t)
    scores = 0.0 if model.flash_attention else (5.0 if model.dropout else 2.0) * a * s * sb / t
    stored = np.where(rc == 0, kept + scores, kept)
    inputs = BYTES * sb * h / (t if sequence_parallel else 1.0)
    activations = np.where(rc == 2, inputs, stored)
    gamma = np.where(rc == 2, 1.0, 32.0 / 34.0 * kept / activations)
    tp = t > 1
    return {"forward": forward, "input_grad": input_grad, "weight_grad": weight,
            "activations": activations, "gamma": gamma,
            "collectives_forward": np.where(tp, 2.0, 0.0),
            "collectives_backward": np.where(tp, np.where(rc == 2, 4.0, 2.0), 0.0)}


def chunk_layers(layers: int, chunks: int) -> np.ndarray:
    """Layers of each of ``chunks`` model chunks: as even as possible, the remainder on the
    middle chunks, away from the embedding and the output layer."""
    layers = positive_int(layers, "layers")
    chunks = positive_int(chunks, "chunks", MAX_CHUNKS, " (one count per chunk)")
    if chunks > layers:
        raise ScheduleError(f"layers must be at least the model chunks {chunks} (got "
                            f"layers={layers})")
    base, extra = divmod(layers, chunks)
    counts = np.full(chunks, base)
    middle = np.argsort(np.abs(np.arange(chunks) - (chunks - 1) / 2), kind="stable")
    counts[middle[:extra]] += 1
    return counts
