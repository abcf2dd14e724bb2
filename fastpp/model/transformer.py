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
  (``2h + 4kv``), the output projection's input (``2h``) and the MLP's inside
  (``inside_bytes``: ``6F`` with fused SwiGLU, the first matrix's gate-and-up output, which
  the fused op keeps alone, and the product; ``8F`` with SwiGLU as separate ops, the SiLU's
  output too, as TorchTitan runs it; ``4F`` otherwise: the first matrix's output and its
  GeLU). Attention scores add ``5as`` (``2as`` without dropout) per ``sb``, split over
  ``t``, unless FlashAttention keeps none; with grouped-query attention the unfused core also
  keeps K and V repeated to every head (``4(h - kv)`` more, freed with the scores). With
  sequence parallelism everything is split over ``t``. A GPT layer without TP gives the
  paper's ``sbh(34 + 5as/h)``. ``fastpp.model.memorybar`` measures these bytes in PyTorch.
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
- Head widths: ``d`` per head (``head_dim``, default ``h/a``; Qwen3's 128 with ``a d != h``),
  so Q is ``a d`` wide and K, V ``kv = g d``; for a model with ``a d = h`` every formula above is
  the one written in ``h``. The attention core's FLOPs are ``2 b s^2 a (d_qk + d_v)`` forward
  (``4 b s^2 h`` when both are ``h/a``).
- DeepSeek's multi-head latent attention (MLA, ``kv_rank > 0``): queries through a
  ``q_rank`` latent (``h x q_rank``, a norm, ``q_rank x a (d + r)``; or ``h x a (d + r)`` when
  ``q_rank = 0``), keys and values through a ``kv_rank`` latent plus one shared RoPE key of
  ``r = rope_dim`` (``h x (kv_rank + r)``, a norm, ``kv_rank x a (d + d_v)``), output
  ``a d_v x h``: trained as Megatron trains it, the latents expanded (no weight absorption), so
  the core is plain attention with ``d_qk = d + r``. The two down-projections are not split
  over ``t`` (Megatron duplicates them); the stored bytes count the latents and the expanded
  Q, K, V as a standard layer counts Q, K, V.
- Mixture of experts (``experts > 0``; ``fastpp.model.moe`` prices them): every layer but
  the ``dense_layers`` (the first ones, or those at the indices given) replaces the MLP by a
  router (``h x E``, not split), ``E`` routed
  experts of width ``F_e = expert_ffn`` of which each token uses ``top_k``, and
  ``shared_experts`` always used; ``parameters`` counts them all, ``active_parameters`` what
  one token uses. ``mtp_depth`` multi-token-prediction modules (DeepSeek-V3) each add one MoE
  layer, a ``2h x h`` projection and three norms, sharing the embedding and the output layer
  (their logits and loss computed again): trained and in ``params()``, not in ``parameters``
  (the model cards count them apart).
- The embedding (``vh`` parameters; of its activations only its dropout's one-byte mask,
  ``sbh``, is stored: its output is the first layer's input, which that layer keeps) sits on
  the first stage of each route, the output layer (``vh`` parameters unless tied) and the
  loss on the last: its forward, input grad and weight grad each ``2sbhv/t`` FLOPs, fp32
  logits ``4sbv/t`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import (
    MAX_INT,
    ScheduleError,
    flag,
    indices,
    instance,
    known_keywords,
    nonnegative_int,
    numbers,
    one_of,
    positive_int,
)

BYTES = 2  # half precision
RECOMPUTE = ("none", "selective", "full")
# Transformer.eager: fused kernels, or eager PyTorch with PyTorch's RMSNorm or torchtitan's 2024
EAGER = ("", "native-norm", "fp32-norm")
# Transformer.loss: Megatron's vocabulary-parallel loss, unfused or fused, PyTorch's
# cross_entropy (torchtitan) or flash-attn's fused one (llm-foundry)
LOSSES = ("in-place", "fused", "cross-entropy", "flash-attn")
MAX_CHUNKS = 1_000_000  # model chunks of a layout: a count each, far past any pipeline
# where t is a multiple of the KV heads (a review: Qwen2.5-3B's 2 at t = 4)
REPLICATED = ("; Megatron-Core replicates the KV heads where t is a multiple of them, which "
              "fastpp does not price")
# the sizes a Transformer takes, far past any model's (Python's ints past int64 overflowed
# NumPy's conversions, a raw OverflowError): a width's square times the layers stays a float
LARGEST = {"layers": 100_000, "hidden": 2**24, "heads": 2**24, "ffn": 2**24,
           "vocab": 2**31}


def window_pairs(window, seq, chunked=False):
    """The share of a causal core's query-key pairs a sliding window of ``window`` keys keeps
    at sequence ``seq``: ``2w/s - (w/s)^2`` (``s w - w^2/2`` of ``s^2/2``), 1 when ``w >= s``.
    ``chunked``: the sequence cut into chunks of ``window`` tokens, causal within each (Llama
    4's chunked attention): ``(k w^2 + r^2) / s^2`` for ``k`` whole chunks and ``r`` tokens
    left."""
    w, s = np.asarray(window, np.float64), np.asarray(seq, np.float64)
    if chunked:
        whole = np.floor(s / w)
        return np.minimum((whole * w * w + (s - whole * w) ** 2) / (s * s), 1.0)
    return np.where(w < s, 2.0 * w / s - (w / s) ** 2, 1.0)


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
    head_dim : int, optional
        Per-head width ``d`` of Q and K (MLA: the part without RoPE); default ``h / a``.
    v_head_dim : int, optional
        Per-head width of V; default ``head_dim``.
    experts, top_k, shared_experts : int
        Routed experts ``E`` (0: a dense model), experts per token ``k`` (1 to ``E``) and
        shared experts every token uses.
    expert_ffn : int, optional
        Each expert's MLP width ``F_e``; default ``ffn``.
    dense_layers : int or tuple of int
        With experts, the layers that keep a dense MLP of width ``ffn``: a count of the first
        ones (DeepSeek-V3: 3), or their indices (Megatron's ``--moe-layer-freq 2`` makes the
        odd layers dense: ``(1, 3, 5, ...)``), kept as a count where they are the first
        ones. An MTP module is an MoE layer, so with ``mtp_depth`` the last layer must
        have experts (Megatron's module repeats the last layer).
    mtp_depth : int
        Multi-token-prediction modules after the last layer (DeepSeek-V3: 1).
    q_rank, kv_rank, rope_dim : int
        MLA's query and key-value compression ranks and decoupled RoPE head width
        (``kv_rank = 0``: standard attention; ``q_rank = 0``: queries uncompressed).
    fused_swiglu : bool
        With ``swiglu``, SiLU and the product run as one op that keeps only its input for the
        backward: Megatron-Core's ``bias_swiglu`` (on unless ``--no-bias-swiglu-fusion``) and
        Transformer Engine's ``swiglu``. False: separate ops that also keep the SiLU's output
        (TorchTitan's ``FeedForward``, ``fastpp.model.from_torchtitan``).
    window : int
        Sliding-window attention: each query attends to at most ``window`` keys (0: every
        earlier key). FlashAttention skips the tiles outside it, so a sliding layer's core
        takes ``2w/s - (w/s)^2`` of the causal FLOPs at sequence ``s > w``; an unfused core
        computes every score and masks them, as full attention.
    window_layers : int, optional
        How many layers slide (the rest attend to everything); default all of them
        (``sliding_layers``); more than 0 needs a ``window``.
    chunked : bool
        The sliding layers attend within fixed chunks of ``window`` tokens instead, causal in
        each (Llama 4's ``attention_chunk_size``): a query sees its chunk's keys up to it, not
        the ``window`` keys before it. At sequence ``s`` such a layer's core takes
        ``c / s`` of the causal FLOPs for ``s`` a multiple of the chunk ``c``
        (``window_pairs``). Needs a ``window``.
    eager : str
        ``""`` (the default): the block's elementwise ops are fused kernels (Megatron's, or
        ``torch.compile``'s). Otherwise eager PyTorch runs torchtitan's Llama code op by op
        (``fastpp.model.compute.eager_bytes``): the rotary embedding through complex
        numbers, SiLU and the product apart, each product's input gradient summed apart; and
        its RMSNorm as ``"native-norm"``, PyTorch's ``nn.RMSNorm``, one kernel each way
        (fused on PyTorch 2.8 and later; torchtitan's since March 2025), or as
        ``"fp32-norm"``, torchtitan's own RMSNorm of 2024 in six ops in fp32 (its December
        2024 benchmark's). ``fastpp.model.from_torchtitan`` sets ``"native-norm"`` where
        ``[compile]`` does not compile the model. Neither the framework's CPU time for the
        extra ops nor the activations they keep without checkpointing are priced.
    loss : str
        How the loss runs on the logits, for its time (``compute.LOSS_BYTES``) and the peak
        memory: ``"in-place"`` (the default), Megatron's vocabulary-parallel cross entropy,
        which keeps an fp32 copy of the logits (``4sbv/t`` bytes) and computes the softmax in
        it in place, beside the bf16 logits (its forward) or their gradient (its backward): 2
        bytes a logit more while it runs, in a kernel an op; ``"fused"``, the same with
        ``--cross-entropy-loss-fusion`` (Megatron-Core's native fused loss, NeMo's and
        Megatron-Bridge's default: its parts compiled, fewer passes); or ``"cross-entropy"``,
        PyTorch's ``cross_entropy`` on ``logits.float()`` (torchtitan's loss), whose
        log-softmax and gradients are new fp32 tensors: 12 bytes a logit at the start of
        its backward, 16 with tensor parallelism (torchtitan's ``loss_parallel``), and in a
        pipeline the bf16 logits kept with each microbatch (``stages.LOSS_WORKING_BYTES``,
        ``LOSS_PIPELINE_KEPT``). ``fastpp.model.from_torchtitan`` sets it unless the job
        compiles the loss. ``"flash-attn"``: flash-attn's fused cross entropy (llm-foundry's
        MPT default), one kernel each way on the bf16 logits, which it keeps in place of an
        fp32 copy (``stages.LOSS_KEPT_BYTES``), its gradient written anew.
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
    head_dim: int | None = None
    v_head_dim: int | None = None
    experts: int = 0
    top_k: int = 0
    shared_experts: int = 0
    expert_ffn: int | None = None
    dense_layers: int = 0
    mtp_depth: int = 0
    q_rank: int = 0
    kv_rank: int = 0
    rope_dim: int = 0
    # added last, each: positional calls written before it keep their meaning
    fused_swiglu: bool = True
    window: int = 0
    window_layers: int | None = None
    eager: str = ""
    loss: str = "in-place"
    chunked: bool = False

    def __post_init__(self):
        for name in ("layers", "hidden", "heads", "vocab"):
            positive_int(getattr(self, name), name, LARGEST[name], " (no model is larger)")
        for name in ("swiglu", "tied_embeddings", "dropout", "flash_attention", "fused_swiglu",
                     "chunked"):
            flag(getattr(self, name), name)
        one_of(self.eager, "eager", EAGER)
        one_of(self.loss, "loss", LOSSES)
        instance(self.name, str, "name", "string")
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.ffn is None:
            object.__setattr__(self, "ffn", 4 * self.hidden)
        positive_int(self.kv_heads, "kv_heads")
        positive_int(self.ffn, "ffn", LARGEST["ffn"], " (no model is larger)")
        if self.heads % self.kv_heads or (self.head_dim is None and self.hidden % self.heads):
            raise ScheduleError(f"kv_heads must divide heads and heads must divide hidden (got "
                                f"heads={self.heads}, kv_heads={self.kv_heads}, "
                                f"hidden={self.hidden})")
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.v_head_dim is None:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        if self.expert_ffn is None:
            object.__setattr__(self, "expert_ffn", self.ffn)
        for name in ("head_dim", "v_head_dim", "expert_ffn"):
            positive_int(getattr(self, name), name, LARGEST["ffn"], " (no model is larger)")
        if isinstance(self.dense_layers, tuple | list):
            at = _indices(self.dense_layers, self.layers)
            object.__setattr__(self, "dense_layers",
                               len(at) if at == tuple(range(len(at))) else at)
        for name in ("experts", "top_k", "shared_experts", "dense_layers", "mtp_depth",
                     "q_rank", "kv_rank", "rope_dim"):
            if name != "dense_layers" or not isinstance(self.dense_layers, tuple):
                nonnegative_int(getattr(self, name), name, LARGEST["ffn"],
                                " (no model is larger)")
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise ScheduleError(f"top_k must be from 1 to the experts {self.experts} (got "
                                f"top_k={self.top_k})")
        if not self.experts and (self.top_k or self.shared_experts or self.dense_layers):
            raise ScheduleError(f"top_k, shared_experts and dense_layers need experts > 0 (got "
                                f"experts=0, top_k={self.top_k}, shared_experts="
                                f"{self.shared_experts}, dense_layers={self.dense_layers})")
        if self.dense_count > self.layers:
            raise ScheduleError(f"dense_layers must be at most the layers {self.layers} (got "
                                f"dense_layers={self.dense_layers})")
        if self.mtp_depth and self.moe and self.dense_between(self.layers - 1, self.layers):
            raise ScheduleError(f"dense_layers must leave the last layer its experts with "
                                f"mtp_depth > 0 (an MTP module repeats the last layer, and "
                                f"fastpp prices it with experts; got dense_layers="
                                f"{self.dense_layers}, mtp_depth={self.mtp_depth})")
        nonnegative_int(self.window, "window")
        if self.window_layers and not self.window:  # sliding layers with no window to slide
            raise ScheduleError(f"window_layers needs a window > 0 (got window_layers="
                                f"{self.window_layers}, window={self.window})")
        if self.chunked and not self.window:
            raise ScheduleError(f"chunked attention needs a window > 0, its chunk (got "
                                f"chunked=True, window={self.window})")
        if self.window_layers is not None and nonnegative_int(
                self.window_layers, "window_layers") > self.layers:
            raise ScheduleError(f"window_layers must be at most the layers {self.layers} (got "
                                f"window_layers={self.window_layers})")
        if (self.q_rank or self.rope_dim) and not self.kv_rank:
            raise ScheduleError(f"q_rank and rope_dim are MLA's: they need kv_rank > 0 (got "
                                f"q_rank={self.q_rank}, rope_dim={self.rope_dim}, kv_rank=0)")

    @property
    def kv(self) -> int:
        """Width of K (and of V): ``g d`` (``g h / a`` with the default head width)."""
        return self.kv_heads * self.head_dim

    @property
    def sliding_layers(self) -> int:
        """Layers whose attention slides: ``window_layers`` (default all), none without a
        ``window``."""
        if not self.window:
            return 0
        return self.layers if self.window_layers is None else self.window_layers

    @property
    def moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.experts > 0

    @property
    def mla(self) -> bool:
        """Whether attention is DeepSeek's latent attention."""
        return self.kv_rank > 0

    @property
    def dense_count(self) -> int:
        """How many ``dense_layers``."""
        return (len(self.dense_layers) if isinstance(self.dense_layers, tuple)
                else self.dense_layers)

    def dense_between(self, start, stop) -> np.ndarray:
        """Per range ``[start, stop)`` of layer positions (arrays broadcast): its dense
        layers."""
        if not isinstance(self.dense_layers, tuple):
            start = np.asarray(start, np.float64)
            return np.clip(self.dense_layers - start, 0.0, np.asarray(stop) - start)
        at = np.asarray(self.dense_layers, np.float64)
        return (np.searchsorted(at, stop, "left")
                - np.searchsorted(at, start, "left")).astype(np.float64)

    @property
    def moe_layers(self) -> int:
        """Layers with experts (the rest, ``dense_layers``, are dense)."""
        return self.layers - self.dense_count if self.moe else 0

    @property
    def gates(self) -> float:
        """Matrices of an MLP per ``h x F``: 3 with SwiGLU, else 2."""
        return 3.0 if self.swiglu else 2.0

    @property
    def inside_bytes(self) -> float:
        """Bytes a token the MLP keeps inside per unit of its width (the module's list): 6
        with fused SwiGLU, 8 with SwiGLU's separate ops, 4 with GeLU."""
        if not self.swiglu:
            return 4.0
        return 6.0 if self.fused_swiglu else 8.0

    def attention_params(self) -> float:
        """One layer's attention matrices (and MLA's two latent norms).

        Returns
        -------
        float
        """
        h, a, d, dv = (float(x) for x in (self.hidden, self.heads, self.head_dim,
                                           self.v_head_dim))
        if not self.mla:
            return h * a * d + 2.0 * h * self.kv + a * dv * h
        q, kv, r = float(self.q_rank), float(self.kv_rank), float(self.rope_dim)
        query = h * q + q + q * a * (d + r) if q else h * a * (d + r)
        return query + h * (kv + r) + kv + kv * a * (d + dv) + a * dv * h

    def down_params(self) -> float:
        """MLA's two down-projections, ``h x q_rank`` and ``h x (kv_rank + r)`` (0 without
        MLA): Megatron duplicates them on every tensor-parallel rank.

        Returns
        -------
        float
        """
        if not self.mla:
            return 0.0
        h, q, kv, r = (float(x) for x in (self.hidden, self.q_rank, self.kv_rank,
                                          self.rope_dim))
        return h * q + h * (kv + r)

    def replicated_params(self, moe: bool = False) -> float:
        """The parameters of one layer that every tensor-parallel rank holds whole: MLA's
        down-projections and latent norms, and an MoE layer's router (``h x E``). (The
        layer norms, 2h, are counted split with the rest: 0.002% of a layer.)

        Parameters
        ----------
        moe : bool
            A layer with experts (else a dense one).

        Returns
        -------
        float
        """
        latent = float(self.q_rank + self.kv_rank) if self.mla else 0.0
        return self.down_params() + latent + (float(self.hidden) * self.experts if moe else 0.0)

    def expert_params(self) -> float:
        """One expert's matrices: ``3 h F_e`` (SwiGLU) or ``2 h F_e``.

        Returns
        -------
        float
        """
        return self.gates * self.hidden * self.expert_ffn

    def mlp_params(self, moe: bool = False, active: bool = False) -> float:
        """One layer's MLP: dense ``3hF``/``2hF``; with experts the router ``hE``, the shared
        experts and all routed experts (``active``: the ``top_k`` one token uses).

        Parameters
        ----------
        moe : bool
            A layer with experts (else a dense one).
        active : bool
            Count only the routed experts one token uses.

        Returns
        -------
        float
        """
        if not moe:
            return self.gates * self.hidden * self.ffn
        routed = self.top_k if active else self.experts
        return (float(self.hidden) * self.experts
                + (routed + self.shared_experts) * self.expert_params())

    def matrix_params(self, moe: bool = False, active: bool = False) -> float:
        """``P_mm``: one layer's matrix parameters (a dense layer unless ``moe``).

        Parameters
        ----------
        moe : bool
            A layer with experts (else a dense one).
        active : bool
            Count only the routed experts one token uses.

        Returns
        -------
        float
        """
        return self.attention_params() + self.mlp_params(moe, active)

    def layer_params(self, moe: bool = False) -> float:
        """One layer's parameters: ``P_mm`` plus two norms.

        Parameters
        ----------
        moe : bool
            A layer with experts (else a dense one).

        Returns
        -------
        float
        """
        return self.matrix_params(moe) + 2.0 * self.hidden

    def mtp_params(self) -> float:
        """One multi-token-prediction module without the shared embedding and output layer:
        a layer (with experts if the model has them), the ``2h x h`` projection and three
        norms (of the embedding, of the hidden state, and the module's last: Megatron's
        ``enorm``, ``hnorm`` and ``final_layernorm``).

        Returns
        -------
        float
        """
        h = float(self.hidden)
        return self.layer_params(self.moe) + 2.0 * h * h + 3.0 * h

    def _layers_params(self, active: bool) -> float:
        dense = self.layers - self.moe_layers
        return (dense * self.layer_params() + self.moe_layers
                * (self.matrix_params(True, active) + 2.0 * self.hidden))

    def params(self) -> float:
        """All trained parameters: layers, the MTP modules, the embedding and (untied) the
        output layer (the final norm's ``h`` left out, as the layers' biases are).

        Returns
        -------
        float
        """
        heads = 1 if self.tied_embeddings else 2
        return (self._layers_params(False) + self.mtp_depth * self.mtp_params()
                + heads * self.vocab * self.hidden)

    @property
    def parameters(self) -> float:
        """Total parameters as model cards count them: layers, embedding, output layer (the
        MTP modules apart; the final norm's ``h`` left out)."""
        heads = 1 if self.tied_embeddings else 2
        return self._layers_params(False) + heads * self.vocab * self.hidden

    @property
    def active_parameters(self) -> float:
        """Parameters one token uses: as ``parameters`` with only ``top_k`` routed experts.
        The input embedding is counted, as in ``parameters``: model cards often leave it
        out (DeepSeek-V3's "37B" is 37.55 B here, 36.6 B without it; Kimi K2's "32B" 32.9
        B, 31.7 B)."""
        heads = 1 if self.tied_embeddings else 2
        return self._layers_params(True) + heads * self.vocab * self.hidden

    def core_width(self) -> float:
        """``a (d_qk + d_v)``: the attention core's FLOPs are ``2 b s^2`` times it forward
        (``2h`` for standard heads of ``h/a``).

        Returns
        -------
        float
        """
        return float(self.heads) * (self.head_dim + self.rope_dim + self.v_head_dim)

    def flops_per_token(self, seq: int) -> float:
        """Model FLOPs of one token's forward and backward, without recomputation:
        ``3 (2 P_mm L + 4 s h L + 2 h v)``, i.e. ``6N + 12 L h s`` (PaLM's MFU count) for a
        dense model. With experts ``P_mm`` is what a token uses (``top_k`` routed experts),
        the core ``2 s a (d_qk + d_v)`` per layer (``4sh`` for standard heads; a sliding
        layer's the pairs its window keeps, ``core_layers``), and each MTP
        module adds a layer, its projection and the logits again.

        Parameters
        ----------
        seq : int
            Sequence length.

        Returns
        -------
        float

        Raises
        ------
        ScheduleError
            If ``seq`` is not a positive integer.
        """
        seq = positive_int(seq, "seq")
        dense = self.layers - self.moe_layers
        core = 2.0 * seq * self.core_width()
        mtp = self.mtp_depth * (2.0 * self.matrix_params(self.moe, True) + core
                                + 4.0 * self.hidden * self.hidden
                                + 2.0 * self.hidden * self.vocab)
        return 3.0 * (2.0 * self.matrix_params() * dense
                      + 2.0 * self.matrix_params(True, True) * self.moe_layers
                      + core * self.core_layers(seq) + 2.0 * self.hidden * self.vocab + mtp)

    def core_layers(self, seq: int) -> float:
        """The layers' attention cores in full layers' worth: a sliding (or chunked) layer
        counts the share of pairs its window keeps at ``seq`` (``window_pairs``)."""
        return (self.layers - self.sliding_layers
                + self.sliding_layers * float(window_pairs(self.window, seq, self.chunked)))

    def megatron_flops_per_token(self, seq: int, halved_core: bool = True) -> float:
        """Megatron-LM's count of one token's training FLOPs (``num_floating_point_operations``
        in ``megatron/training/training.py``, 2025), what its ``TFLOP/s/GPU`` reports: ``3 x
        2`` times the projections (MLA's latent norms in, as Megatron counts them), the dense
        MLPs, the ``top_k`` routed and the shared experts (the router left out), the causal
        core ``s a (d_qk + d_v) / 2``, each MTP module's layer (an MoE layer when the last
        layer has experts), norms ``3h`` and projection ``2h^2``, and the logits ``hv`` once
        per head. Two terms follow the model where Megatron-LM's function does not: a
        sliding layer's core counts the pairs within its window (as Megatron-Bridge's
        calculators count it; Megatron-LM's counts every pair), and a gated GeLU
        (``--quick-geglu``) its three matrices (Megatron-LM's counts two: it reads
        ``args.swiglu`` alone).

        Parameters
        ----------
        seq : int
            Sequence length.
        halved_core : bool, default True
            Count the causal core's half, as Megatron-LM has since ``core_r0.12.0`` (8873b55,
            March 2025); ``False``: its full square, as earlier releases (``core_r0.9.0``'s
            ``seq_length / hidden_size`` term) and NeMo's tables count it.

        Returns
        -------
        float
        """
        h, D = float(self.hidden), float(self.mtp_depth)
        dense = self.layers - self.moe_layers + (0.0 if self.moe else D)
        moe = self.moe_layers + (D if self.moe else 0.0)
        experts = (self.top_k + self.shared_experts) * self.expert_params()
        core = seq * self.core_width() / (2.0 if flag(halved_core, "halved_core") else 1.0)
        return 6.0 * (dense * self.mlp_params() + moe * experts
                      + (self.layers + D) * self.attention_params()
                      + (self.core_layers(seq) + D) * core
                      + D * (3.0 * h + 2.0 * h * h) + (1.0 + D) * h * self.vocab)


# a misspelt field names itself and the fields (the dataclass's own is a bare TypeError)
Transformer.__init__ = known_keywords("Transformer")(Transformer.__init__)


def attention_costs(model: Transformer, seq: int, microbatch, t) -> dict[str, np.ndarray]:
    """The attention half of a layer (its norm, projections and core) for one microbatch on
    one tensor-parallel rank: ``forward`` and ``weight_grad`` FLOPs of the projections (the
    input grad equals the forward), ``core`` (the core's forward FLOPs; its input grad is
    twice that), stored bytes per token ``whole`` (on every rank without sequence
    parallelism) and ``split`` (over ``t``), and the scores' bytes ``scores`` (unless
    FlashAttention)."""
    s, h, a = float(seq), float(model.hidden), float(model.heads)
    d, dv = float(model.head_dim), float(model.v_head_dim)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    sb = s * b
    whole = 4.0 * h + (h if model.dropout else 0.0)  # the norm's and the projections' input
    if model.mla:  # the down-projections run whole on every rank (Megatron duplicates them)
        q, kv, r = float(model.q_rank), float(model.kv_rank), float(model.rope_dim)
        duplicated = model.down_params()
        split_params = model.attention_params() - duplicated
        whole += 4.0 * q + 2.0 * (kv + r) + 2.0 * kv  # the latents, before and after norms
        split = 4.0 * a * (d + r) + 4.0 * a * dv  # expanded Q, K; V; the output's input
    else:
        duplicated, split_params = 0.0, model.attention_params()
        split = 2.0 * a * d + 4.0 * model.kv + 2.0 * a * dv
    mm = 2.0 * sb * (split_params / t + duplicated)
    scores = 0.0 if model.flash_attention else (
        (5.0 if model.dropout else 2.0) * a * s * sb / t
        # the unfused core repeats K and V to every head (Megatron's, Hugging Face's,
        # TorchTitan's repeat) and keeps the copies; its recomputation keeps neither
        + 4.0 * (a * d - model.kv) * sb / t)
    return {"forward": mm, "weight_grad": mm, "core": 2.0 * b * s * s * model.core_width() / t,
            "hidden": h,
            "whole": whole, "split": split, "scores": scores + 0.0 * b}


def mlp_costs(model: Transformer, seq: int, microbatch, t) -> dict[str, np.ndarray]:
    """The dense MLP half of a layer (its norm and matrices) as ``attention_costs`` gives the
    attention's: ``forward`` (= input grad = ``weight_grad``) FLOPs, ``whole`` and ``split``
    bytes per token."""
    s, h = float(seq), float(model.hidden)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    mm = 2.0 * s * b * model.mlp_params() / t
    whole = 4.0 * h + (h if model.dropout else 0.0)
    split = model.inside_bytes * model.ffn
    return {"forward": mm, "weight_grad": mm, "whole": whole, "split": split}


def combine(attention, mlp, sb, t, sequence_parallel: bool, recompute, fixed=0.0):
    """A layer's FLOPs, stored bytes and ``gamma`` from its two halves (``attention_costs``
    and ``mlp_costs`` or ``fastpp.model.moe``'s experts) over ``sb`` tokens, as
    ``layer_costs`` returns them; ``fixed`` bytes already per rank (the routed experts').
    The attention half makes one tensor-parallel exchange each way, the MLP half its
    ``exchanges`` (default one; none for routed experts alone)."""
    t = np.asarray(t, np.float64)
    rc = np.asarray(recompute)
    core = attention["core"]
    forward = attention["forward"] + mlp["forward"] + core
    weight = attention["weight_grad"] + mlp["weight_grad"]
    input_grad = attention["forward"] + mlp["forward"] + 2.0 * core
    input_grad = input_grad + np.where(rc == 1, core, np.where(rc == 2, forward, 0.0))
    whole = attention["whole"] + mlp["whole"]
    split = attention["split"] + mlp["split"]
    kept = sb * (whole + split) / t if sequence_parallel else sb * (whole + split / t)
    kept = kept + fixed
    inputs = BYTES * sb * attention["hidden"] / (t if sequence_parallel else 1.0)
    stored = np.where(rc == 0, kept + attention["scores"], kept)
    activations = np.where(rc == 2, inputs, stored)
    gamma = np.where(rc == 2, 1.0, 32.0 / 34.0 * kept / activations)
    tp = t > 1
    pairs = 1.0 + mlp.get("exchanges", 1.0)
    return {"forward": forward, "input_grad": input_grad, "weight_grad": weight,
            "activations": activations, "gamma": gamma,
            "collectives_forward": np.where(tp, pairs, 0.0),
            "collectives_backward": np.where(tp, np.where(rc == 2, 2.0 * pairs, pairs), 0.0)}


@known_keywords("layer_costs")
def layer_costs(model: Transformer, seq: int, microbatch, t, sequence_parallel: bool,
                recompute) -> dict[str, np.ndarray]:
    """One dense layer's FLOPs, stored bytes, ``gamma`` and collective bytes for one
    microbatch.

    Parameters
    ----------
    model : Transformer
    seq : int
        Sequence length.
    microbatch, t : int or array_like
        Sequences per microbatch; tensor-parallel degree (they broadcast).
    sequence_parallel : bool
        Megatron's sequence parallelism.
    recompute : int or array_like
        An index into ``RECOMPUTE`` (broadcasts with ``microbatch`` and ``t``).

    Returns
    -------
    dict of str to ndarray
        ``forward, input_grad, weight_grad`` (FLOPs on one rank), ``activations`` (bytes on
        one rank), ``gamma``, ``collectives_forward`` and ``collectives_backward`` (how many
        ``2sbh`` collectives, see the module).

    Raises
    ------
    ScheduleError
        If ``model`` is not a ``Transformer`` or a count or index is out of range.
    """
    instance(model, Transformer, "model", "fastpp.model.Transformer")
    seq = positive_int(seq, "seq")
    flag(sequence_parallel, "sequence_parallel")
    b, t, rc = np.broadcast_arrays(numbers(microbatch, "microbatch", strict=True),
                                   numbers(t, "t", strict=True),
                                   indices(recompute, "recompute", len(RECOMPUTE)))
    return combine(attention_costs(model, seq, b, t), mlp_costs(model, seq, b, t),
                   float(seq) * b, t, sequence_parallel, rc)


@known_keywords("chunk_layers")
def chunk_layers(layers: int, chunks: int) -> np.ndarray:
    """Layers of each of ``chunks`` model chunks: as even as possible, the remainder on the
    middle chunks, away from the embedding and the output layer.

    Parameters
    ----------
    layers, chunks : int
        Transformer layers; model chunks (``p * m``).

    Returns
    -------
    ndarray of int, shape (chunks,)

    Raises
    ------
    ScheduleError
        If a count is not a positive integer, or ``chunks > layers``.
    """
    layers = positive_int(layers, "layers", MAX_INT)
    chunks = positive_int(chunks, "chunks", MAX_CHUNKS, " (one count per chunk)")
    if chunks > layers:
        raise ScheduleError(f"layers must be at least the model chunks {chunks} (got "
                            f"layers={layers})")
    base, extra = divmod(layers, chunks)
    counts = np.full(chunks, base)
    middle = np.argsort(np.abs(np.arange(chunks) - (chunks - 1) / 2), kind="stable")
    counts[middle[:extra]] += 1
    return counts


# the most layers whose dense ones a pattern places one by one (``dense_placed``)
MAX_PLACED = 100_000


def dense_placed(layers: int, is_dense, what: str) -> tuple[int, ...]:
    """The indices ``i`` of ``layers`` layers for which ``is_dense(i)`` (``dense_layers`` of
    a model whose dense layers a pattern places), at most ``MAX_PLACED`` layers; ``what``
    names the pattern in the message."""
    if layers > MAX_PLACED:
        raise ScheduleError(f"{what} places each layer: the layers must be at most "
                            f"{MAX_PLACED:,} (got {layers:,})")
    return tuple(i for i in range(layers) if is_dense(i))


def _indices(values, layers: int) -> tuple[int, ...]:
    """``dense_layers`` given as indices: distinct integers in ``0..layers - 1``, sorted."""
    if not all(isinstance(i, int | np.integer) and not isinstance(i, bool) and 0 <= i < layers
               for i in values) or len(set(values)) != len(values):
        raise ScheduleError(f"dense_layers must be a count or distinct layer indices in "
                            f"0..{layers - 1} (got {values!r})")
    return tuple(sorted(int(i) for i in values))
