"""Memory recipes: Megatron's recompute modules, FP8 caching of the experts' activations,
activation offloading to the host, and DeepSeek-V3's recipe by name.

A recipe changes what one layer stores for its backward and what its backward recomputes;
``fastpp.model.stages.stage_table`` adds its terms to each layer's bytes and seconds. Every
figure is per layer, microbatch and GPU, in the units of ``fastpp.model.transformer`` (``T =
s b`` tokens; ``whole`` bytes per token split over ``t`` only with sequence parallelism,
``split`` bytes over ``t``; ``R`` the token copies an MoE layer's GPU receives).

Recompute modules (Megatron's ``--recompute-granularity selective --recompute-modules``; they
act on rows with ``recompute="selective"``; Megatron's default is ``["core_attn"]``, which is
what ``"selective"`` means without a recipe). Output-discarding checkpointing frees a module's
output once its consumer has run and recomputes it before the consumer's backward; normal
checkpointing keeps the module's input and frees everything inside it:

- ``core_attn`` (normal): the attention scores (none with FlashAttention); recomputes the core.
- ``layernorm`` (output-discarding): the outputs of the norms that stand apart from the
  product after them, ``2h`` whole each; recomputes them. Megatron-Core's Transformer Engine
  spec fuses a norm into that product (``TELayerNormColumnParallelLinear``; the layer's norm
  an ``IdentityOp``, which ``TransformerLayer`` does not checkpoint), so that only MLA's input
  norm and an MoE layer's pre-MLP norm (its output feeds the router) stand apart; with
  ``Recipe.fused_norms`` off (Megatron-Core's local spec, DeepSeek's own framework) both
  norms of every layer do.
- ``mla_up_proj`` (output-discarding, MLA only): the expanded Q and K (``2a(d+r)`` each) and V
  (``2a d_v``), split; recomputes the two up-projections.
- ``moe_act`` (output-discarding): what the routed experts' activation keeps beyond its input
  (the gate and up products, which stay): with fused SwiGLU its product, ``2 F_e / etp`` a
  copy; with separate ops the SiLU's output too, ``4 F_e / etp``
  (``Transformer.inside_bytes``); recomputes the activation.
- ``mlp`` (normal, dense layers): the MLP's inside (``Transformer.inside_bytes`` times ``F``:
  ``6F`` fused SwiGLU, ``8F`` separate, ``4F`` GeLU), split, and with fused norms the output
  of the norm fused into its first product (``2h`` whole: the checkpoint's input is then the
  residual); recomputes the MLP's forward, its tensor-parallel exchange with it.
- ``shared_experts`` (normal): the shared experts' inside; recomputes them, their exchange
  with them.
- ``moe`` (normal): the whole MoE block but its input: the router's bytes, every received
  copy's and the shared experts'; recomputes router, experts and the dispatch and combine
  all-to-alls, and a shared expert's exchange (supersedes ``moe_act`` and
  ``shared_experts``).

With any recipe the experts are counted as current Megatron-Core runs them: the routing
probabilities are applied inside the activation (its weighted SwiGLU), so the combine keeps no
copy of the experts' outputs (``2h`` a copy fewer than the default count, which keeps them as
the older unpermute-with-probabilities did).

FP8 caching (``fp8_cache``, DeepSeek-V3's report, section 3.3.3): the dispatched tokens (the
experts' first product's input, ``2h`` a copy) and the SwiGLU's input (``2 G F_e / etp``) are
kept in FP8 with one fp32 scale per 128 elements (``1 + 4/128`` bytes an element), where they
are kept at all (not under ``moe`` recomputation).

Offloading (``offload_modules``, Megatron's ``--fine-grained-activation-offloading
--offload-modules``): the named tensors go to host memory during the forward and come back
before the backward, over ``Hardware.host_bandwidth`` each way. The copy runs beside the
layer's compute: only what exceeds the layer's forward (out) or input-grad backward (in) is
exposed. The layer being computed holds its own tensors until the copy ends; the bytes
counted off are those of the layers in flight (the module's saving, as Megatron states it).

- ``attn_norm``: the attention norm's input (``2h`` whole); ``qkv_linear``: the QKV product's
  input (the norm's output, ``2h`` whole, unless ``layernorm`` frees it); ``core_attn``: Q, K
  and V (what ``mla_up_proj`` left); ``attn_proj``: the output projection's input (``2a d_v``);
  ``mlp_norm``: the MLP norm's input (``2h`` whole); ``expert_fc1``: the dispatched copies;
  ``moe_act``: the activation's input (the gate and up products).

DeepSeek-V3's recipe (``RECIPES["deepseek-v3"]``, report section 3.2.3): recomputed RMSNorm
(``layernorm``) and MLA up-projections (``mla_up_proj``), the SwiGLU recomputed from its
FP8-cached input (``moe_act`` with ``fp8_cache``). Its other two items are how fastpp counts
already: the EMA of the weights lives on the host (no GPU bytes), and the MTP module shares
the embedding and the output layer on the device that holds both (``Transformer.mtp_params``
holds neither; DualPipe puts the first and the last stage on one device).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import ScheduleError, flag, instance, known_keywords, name_list, one_of, renamed
from .compute import (
    _attention_shapes,
    _products,
    attention_times,
    matmul_time,
    memory_time,
    mlp_times,
)
from .moe import (
    DISPATCHERS,
    _tokens,
    all_to_all_times,
    dispatch_precision,
    exchanges_around_experts,
    expert_costs,
    expert_times,
    fp8_casts,
    tensor_exchange,
)
from .overlap import LayerParts
from .transformer import BYTES, RECOMPUTE, Transformer, attention_costs, layer_costs

# mixed-precision Adam's bytes a parameter: the fp32 master copy and two fp32 moments, or with
# the moments in bf16 (DeepSeek-V3's report, section 3.3.2)
OPTIMIZER_BYTES, BF16_MOMENTS_BYTES = 12.0, 8.0

RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                     "shared_experts")
OUTPUT_DISCARDING = ("moe_act", "layernorm", "mla_up_proj")  # the others: normal checkpoints
OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                   "expert_fc1", "moe_act")
FP8_CACHED = 1.0 + 4.0 / 128.0  # bytes an element: FP8 plus one fp32 scale per 128
# bytes an element of a product's input Transformer Engine keeps under an FP8 recipe: the
# quantized copy alone, MXFP8's with one E8M0 scale per 32 elements (per-tensor scaling's
# 1 byte is within 3% of it; fp8_saved_bytes)
FP8_SAVED = 1.0 + 1.0 / 32.0


@dataclass(frozen=True)
class Recipe:
    """A memory recipe (see the module).

    Parameters
    ----------
    recompute_modules : tuple of str
        Megatron's recompute modules (``RECOMPUTE_MODULES``), for ``recompute="selective"``.
    fp8_cache : bool
        The experts' dispatched tokens and SwiGLU inputs kept in FP8.
    offload_modules : tuple of str
        Tensors sent to host memory (``OFFLOAD_MODULES``).
    name : str
    bf16_moments : bool
        AdamW's two moments kept in bf16 beside the fp32 master weights (8 optimizer bytes
        a parameter, not 12).
    op_level : bool
        torchtitan's op-level selective checkpointing (``RunConfig.recompute_method="op"``;
        ``op_level_terms``) instead of Megatron's modules, which must then be the default.
    fused_norms : bool
        Each norm before a product fused into it, as Megatron-Core's Transformer Engine spec
        runs them (the default); ``False`` for the local spec or a framework whose norms run
        apart (DeepSeek's): what ``layernorm`` and ``mlp`` free (see the module).
    """

    recompute_modules: tuple = ("core_attn",)
    fp8_cache: bool = False
    offload_modules: tuple = ()
    name: str = "recipe"
    bf16_moments: bool = False
    op_level: bool = False
    fused_norms: bool = True

    def __post_init__(self):
        for field, allowed in (("recompute_modules", RECOMPUTE_MODULES),
                               ("offload_modules", OFFLOAD_MODULES)):
            object.__setattr__(self, field, name_list(getattr(self, field), field, allowed))
        for field in ("fp8_cache", "bf16_moments", "op_level", "fused_norms"):
            value = getattr(self, field)
            # a bool, not a number equal to one (op_level=1 passed the check below; an
            # array's `in (False, True)` was NumPy's ambiguous truth)
            if not isinstance(value, bool | np.bool_):
                raise ScheduleError(f"{field} must be True or False (got {value!r})")
            object.__setattr__(self, field, bool(value))
        if self.op_level and self.recompute_modules != ("core_attn",):
            raise ScheduleError(f"recompute_modules are Megatron's: with torchtitan's op-level "
                                f"policy (op_level=True) they must be the default ('core_attn',) "
                                f"(got {self.recompute_modules!r})")

    @property
    def optimizer_bytes(self) -> float:
        """Optimizer bytes a parameter: the fp32 master copy and the two moments."""
        return BF16_MOMENTS_BYTES if self.bf16_moments else OPTIMIZER_BYTES


def optimizer_bytes(recipe: Recipe | None) -> float:
    """``recipe``'s optimizer bytes a parameter; without one, ``OPTIMIZER_BYTES``."""
    return OPTIMIZER_BYTES if recipe is None else recipe.optimizer_bytes


RECIPES = {r.name: r for r in (
    # the report recomputes "all RMSNorm operations": its framework's norms run apart
    Recipe(("layernorm", "mla_up_proj", "moe_act"), fp8_cache=True,
           name="deepseek-v3", bf16_moments=True, fused_norms=False),
)}


def make_recipe(recipe=None, recompute_modules=None, fp8_cache=False, offload_modules=None):
    """The ``Recipe`` a call's arguments name: ``recipe`` (a ``Recipe`` or a name in
    ``RECIPES``), else one built from the three options; ``None`` when none is given (the
    default accounting)."""
    # checked before their truth is asked (an array's is ambiguous), and a number kept whole
    # for name_list to refuse by name (tuple(5) was Python's TypeError)
    fp8_cache = flag(fp8_cache, "fp8_cache")
    modules, offload = (x if x is None or isinstance(x, str) or not np.iterable(x) else tuple(x)
                        for x in (recompute_modules, offload_modules))
    # (not `== ()`: a 0-d array's is an empty array, whose truth NumPy refuses)
    no_offload = offload is None or (isinstance(offload, tuple) and not offload)
    if recipe is not None:
        if modules is not None or fp8_cache or not no_offload:
            given = ", ".join(f"{k}={v!r}" for k, v in (
                ("recompute_modules", recompute_modules), ("fp8_cache", fp8_cache or None),
                ("offload_modules", offload_modules)) if v is not None)
            raise ScheduleError(f"recipe must be given alone: it sets recompute_modules, "
                                f"fp8_cache and offload_modules (got recipe={recipe!r} with "
                                f"{given})")
        if isinstance(recipe, Recipe):
            return recipe
        instance(recipe, str, "recipe", "Recipe or a name")
        if recipe not in RECIPES:
            raise ScheduleError(f"recipe must be one of {sorted(RECIPES)} or a Recipe (got "
                                f"{recipe!r})")
        return RECIPES[recipe]
    if modules is None and not fp8_cache and no_offload:
        return None
    return Recipe(("core_attn",) if modules is None else modules, fp8_cache,
                  () if offload is None else offload)


# the recipe items that act on a part some models lack, and that part: on a model without it
# they price nothing (Megatron refuses mla_up_proj without MLA, and moe_act without grouped
# experts)
NEEDS = {("recompute_modules", "moe_act"): "experts", ("recompute_modules", "moe"): "experts",
         ("recompute_modules", "shared_experts"): "shared experts",
         ("recompute_modules", "mla_up_proj"): "multi-head latent attention",
         ("offload_modules", "expert_fc1"): "experts", ("offload_modules", "moe_act"): "experts",
         ("fp8_cache", True): "experts"}


def refuse_unpriced(model: Transformer, recipe: Recipe | None) -> None:
    """A ``ScheduleError`` for an item of ``recipe`` that acts on a part ``model`` lacks
    (``NEEDS``), which it would leave unpriced without a word."""
    if recipe is None:
        return
    has = {"experts": model.moe, "shared experts": model.moe and model.shared_experts > 0,
           "multi-head latent attention": model.mla}
    named = f" (recipe {recipe.name!r})" if recipe.name in RECIPES else ""
    for field, values in (("recompute_modules", recipe.recompute_modules),
                          ("offload_modules", recipe.offload_modules),
                          ("fp8_cache", (recipe.fp8_cache,))):
        for value in values:
            part = NEEDS.get((field, value))
            if part is not None and not has[part]:
                what = "be False" if field == "fp8_cache" else f"not hold {value!r}"
                raise ScheduleError(f"{field} must {what}: it acts on {part}, and "
                                    f"{model.name or 'the model'} has none (got {field}="
                                    f"{getattr(recipe, field)!r}{named})")


def recipe_pricing(dispatcher: str = "alltoall", recipe=None, recompute_modules=None,
                   fp8_cache=False, offload_modules=None) -> dict:
    """The ``stage_table`` arguments ``dispatcher`` and ``recipe`` from a call's options,
    checked (``make_recipe``)."""
    one_of(dispatcher, "dispatcher", DISPATCHERS)
    return {"dispatcher": dispatcher,
            "recipe": make_recipe(recipe, recompute_modules, fp8_cache, offload_modules)}


def _attention_split(model: Transformer):
    """Per token, the split bytes of Q, K, V (``qkv``) and of the output projection's input
    (``out``); with MLA, of the expanded Q, K, V that ``mla_up_proj`` frees (``up``)."""
    a, d, dv = float(model.heads), float(model.head_dim), float(model.v_head_dim)
    if model.mla:
        r = float(model.rope_dim)
        qkv = 4.0 * a * (d + r) + 2.0 * a * dv
        return {"qkv": qkv, "out": 2.0 * a * dv, "up": qkv}
    return {"qkv": 2.0 * a * d + 4.0 * model.kv, "out": 2.0 * a * dv, "up": 0.0}


def recipe_terms(model: Transformer, hardware, recipe: Recipe, seq: int, microbatch, t, rc,
                 sequence_parallel: bool, *, moe: bool, ep=1, etp=1, imbalance=1.0,
                 a2a=None, forward=0.0, input_grad=0.0, dispatcher=None
                 ) -> dict[str, np.ndarray]:
    """One layer's recipe terms for one microbatch on one GPU, per configuration.

    ``rc`` indexes ``transformer.RECOMPUTE`` (the modules act where it is 1, selective; no
    term under full recomputation, which stores only the layer's input). ``moe``: an MoE
    layer (its experts' terms) or a dense one. ``a2a``: the MoE layer's all-to-all seconds
    (``fastpp.model.moe.all_to_all_times``), repeated by ``moe`` recomputation. ``forward``
    and ``input_grad``: the layer's seconds, under which offloading hides. ``dispatcher``:
    the MoE layer's (``fastpp.model.moe.expert_times``), whose permutations ``moe``
    recomputation repeats.

    Returns
    -------
    dict
        ``bytes`` (stored bytes saved; negative where the recipe keeps more), ``attention``,
        ``mlp`` and ``comm`` (seconds the backward recomputes, by part), ``offload_f`` and
        ``offload_b`` (exposed seconds of the host copies, forward and backward), and
        ``collectives_backward`` (tensor-parallel exchanges the recomputation repeats: a
        checkpointed ``mlp``, or shared experts under ``moe`` or ``shared_experts``, runs its
        module's forward again, the all-gather into its first product and the reduce-scatter
        out of its second with it, or the all-reduce without sequence parallelism).
    """
    if recipe.op_level:
        zero = 0.0 * (np.asarray(microbatch, np.float64) + np.asarray(t, np.float64)
                      + np.asarray(rc))
        terms = {"bytes": zero, "attention": zero, "mlp": zero, "comm": zero,
                 "offload_f": zero, "offload_b": zero, "collectives_backward": zero}
        if moe or model.mla:  # (priced as Megatron's selective: op_level_terms)
            return terms
        return {**terms, **op_level_terms(model, hardware, seq, microbatch, t, rc,
                                          sequence_parallel)}
    s, h = float(seq), float(model.hidden)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    rc = np.asarray(rc)
    T = s * b
    whole = T / t if sequence_parallel else T  # rows of the whole-stored tensors
    hw = hardware
    mods = set(recipe.recompute_modules)
    selective = rc == 1
    zero = 0.0 * (b + t + rc)
    att = attention_times(model, hw, seq, b, t, sequence_parallel)
    split = _attention_split(model)
    saved, attention_s, mlp_s, comm_s = zero, zero, zero, zero

    def on(name, byte, seconds=0.0, side="attention"):
        nonlocal saved, attention_s, mlp_s
        if name in mods:
            saved = saved + np.where(selective, byte, 0.0)
            extra = np.where(selective, seconds, 0.0)
            if side == "attention":
                attention_s = attention_s + extra
            else:
                mlp_s = mlp_s + extra

    norm = memory_time(hw, 2.0 * BYTES * whole * h)
    if "core_attn" not in mods:  # the default selective's scores and core recompute undone
        saved = saved - np.where(selective, attention_costs(model, seq, b, t)["scores"], 0.0)
        attention_s = attention_s - np.where(selective, att["core"], 0.0)
    # which norms stand apart from the product after them (the module's ``layernorm``)
    input_apart = model.mla or not recipe.fused_norms
    if input_apart:
        on("layernorm", BYTES * whole * h, norm)
    if moe or not recipe.fused_norms:
        on("layernorm", BYTES * whole * h, norm, side="mlp")
    if model.mla:
        a, r = float(model.heads), float(model.rope_dim)
        up = matmul_time(hw, T, a * (model.head_dim + model.v_head_dim) / t, model.kv_rank)
        if model.q_rank:
            up = up + matmul_time(hw, T, a * (model.head_dim + r) / t, model.q_rank)
        on("mla_up_proj", split["up"] * T / t, up)
    G = 2.0 if model.swiglu else 1.0
    off = zero
    names = set(recipe.offload_modules)
    layernorm_freed = selective & ("layernorm" in mods) & input_apart
    up_freed = selective & ("mla_up_proj" in mods)
    if "attn_norm" in names:
        off = off + BYTES * whole * h
    if "qkv_linear" in names:
        off = off + np.where(layernorm_freed, 0.0, BYTES * whole * h)
    if "core_attn" in names:
        off = off + np.where(up_freed, split["qkv"] - split["up"], split["qkv"]) * T / t
    if "attn_proj" in names:
        off = off + split["out"] * T / t
    if "mlp_norm" in names:
        off = off + BYTES * whole * h
    # what a checkpointed MLP or MoE module does not run again: the residual add after it
    # (TransformerLayer's mlp_bda) and the pre-MLP norm before it where that stands apart
    outside = mlp_times(model, hw, seq, b, t, sequence_parallel, width=0)["forward"]
    if not moe:
        # a norm fused into the first product (an IdentityOp before the MLP): the checkpoint
        # keeps the residual and frees the norm's output too, and runs the norm again
        fused = BYTES * whole * h if recipe.fused_norms else 0.0
        on("mlp", model.inside_bytes * model.ffn * T / t + fused,
           mlp_times(model, hw, seq, b, t, sequence_parallel)["forward"] - outside
           + (norm if recipe.fused_norms else 0.0), side="mlp")
    else:
        owned, received = _tokens(model, seq, b, t, etp, imbalance)
        etp_ = np.asarray(etp, np.float64)
        Fe = float(model.expert_ffn)
        width = model.shared_experts * model.expert_ffn
        # current Megatron-Core keeps no copy of the experts' outputs (probabilities applied
        # inside the activation): the default count's 2h a copy
        saved = saved + np.where(rc == 2, 0.0, BYTES * h * received)
        experts = expert_costs(model, seq, b, t, etp, imbalance)
        shared_bytes = experts["split"] * T / t
        if "moe" in mods:
            routed = experts["fixed"] - BYTES * h * received  # what the recipe still counts
            # the dispatcher's own permutations run again too: the all-to-all one's
            # sort_chunks_by_idxs is inside MoELayer.forward, which the checkpoint reruns
            # (not the attention's FP8 casts, which expert_times prices with the MLP half:
            # the checkpoint's input is the norm's output, the attention not rerun)
            casts = fp8_casts(model, hw, seq, b, t, received, etp)["attention_forward"]
            on("moe", routed + shared_bytes, expert_times(
                model, hw, seq, b, t, ep, etp, sequence_parallel, imbalance,
                dispatcher)["forward"] - outside - casts, side="mlp")
            if a2a is not None:
                comm_s = comm_s + np.where(selective, a2a["dispatch_f"] + a2a["combine_f"],
                                           0.0)
        moe_recomputed = selective & ("moe" in mods)
        if "moe" not in mods:
            act = memory_time(hw, (G + 1.0) * BYTES * received * Fe / etp_)
            # the activation's outputs: all it keeps but its input, G F_e in bf16
            on("moe_act", (model.inside_bytes - BYTES * G) * received * Fe / etp_, act,
               side="mlp")
            if width:
                on("shared_experts", shared_bytes, mlp_times(
                    model, hw, seq, b, t, sequence_parallel, width=width)["forward"]
                   - outside, side="mlp")
        if recipe.fp8_cache:
            per_copy = (BYTES - FP8_CACHED) * (h + G * Fe / etp_)
            saved = saved + np.where((rc == 2) | moe_recomputed, 0.0, per_copy * received)
        fc1_in = np.where(recipe.fp8_cache, FP8_CACHED, BYTES) * h * received
        if "expert_fc1" in names:
            off = off + np.where(moe_recomputed, 0.0, fc1_in)
        if "moe_act" in names:
            gate_up = np.where(recipe.fp8_cache, FP8_CACHED, BYTES) * G * Fe / etp_ * received
            off = off + np.where(moe_recomputed, 0.0, gate_up)
    off = np.where(rc == 2, 0.0, off)
    copy = off / hw.host_bandwidth
    # the tensor-parallel MLP a module reruns (a routed expert's has no exchange over t)
    again = (("moe" in mods or "shared_experts" in mods) and exchanges_around_experts(model)
             if moe else "mlp" in mods)
    exchanges = np.where(selective & (t > 1) & again, 1.0, 0.0)
    return {"bytes": saved + off, "attention": attention_s, "mlp": mlp_s, "comm": comm_s,
            "offload_f": np.maximum(copy - forward, 0.0) + zero,
            "offload_b": np.maximum(copy - input_grad, 0.0) + zero,
            "collectives_backward": exchanges}


def op_level_terms(model: Transformer, hardware, seq: int, microbatch, t, rc,
                   sequence_parallel: bool) -> dict[str, np.ndarray]:
    """torchtitan's op-level selective checkpointing of a dense layer without MLA, against
    Megatron's selective recomputation (``recipe_terms``' units; rows with ``rc`` 1).

    torchtitan (``apply_ac`` with ``selective_ac_option = "op"``, its ``_apply_op_sac`` at
    238fa99) checkpoints each block and, inside it, saves the outputs of the ops on its save
    list, SDPA's and the tensor-parallel reduce-scatters among them, and of every product
    (``aten.mm``) but every second one, counted in the order they run: ``wq, wk, wv, wo``,
    then ``w1, w3, w2`` (SwiGLU; ``w1, w2`` otherwise). It keeps:

    - the block's input (``2h`` a token, over ``t`` with sequence parallelism);
    - ``wq``'s, ``wv``'s and ``w1``'s outputs (over ``t``: column-parallel), and with SwiGLU
      ``w2``'s, whose row-parallel product is a partial sum of ``2h`` whole on each rank;
    - SDPA's output (``2 a d_v``) and its log-sum-exp (``4a``, fp32), over ``t``;
    - with ``t > 1`` and sequence parallelism, the two reduce-scatters' outputs (``2h`` over
      ``t`` each).

    Its backward runs the block's forward again but for those: the norms, residual adds, the
    activation and the other products (``wk``, ``wo``, ``w3``; without SwiGLU ``wk``, ``wo``,
    ``w2``), and with ``t > 1`` the collectives whose outputs are not kept (sequence
    parallelism's two all-gathers, one exchange; without it, the two all-reduces). The
    attention core is not run again. ``tests/test_op_level.py`` (``t = 1``) and
    ``tests/test_op_level_tp.py`` (``t = 2``, sequence parallelism) hold both to PyTorch's
    own selective checkpointing under torchtitan's policy.

    Returns
    -------
    dict
        ``bytes`` (stored bytes saved against Megatron's selective count; negative where
        torchtitan keeps more), ``attention`` and ``mlp`` (seconds the backward adds to
        Megatron's selective recomputation, which repeats the core), and
        ``collectives_backward`` (tensor-parallel exchanges it adds to the backward).
    """
    hw = hardware
    s, h = float(seq), float(model.hidden)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    selective = np.asarray(rc) == 1
    T = s * b
    a, d, dv, kv, F = (float(x) for x in (model.heads, model.head_dim, model.v_head_dim,
                                          model.kv, model.ffn))
    # the block's products in the order they run: its half, and (n, k) on one rank
    products = [("attention", a * d / t, h), ("attention", kv / t, h), ("attention", kv / t, h),
                ("attention", h, a * dv / t)]
    products += [("mlp", F / t, h)] * (2 if model.swiglu else 1) + [("mlp", h, F / t)]
    saved, again = products[0::2], products[1::2]
    rows = T / t if sequence_parallel else T
    kept = BYTES * rows * h + sum(BYTES * T * n for _, n, _ in saved)
    kept = kept + T * (BYTES * a * dv + 4.0 * a) / t
    kept = kept + np.where((t > 1) & sequence_parallel, 2.0 * BYTES * T * h / t, 0.0)
    megatron = layer_costs(model, seq, b, t, sequence_parallel, 1)["activations"]
    # the elementwise ops run again: each half's forward less its core and its products
    att = attention_times(model, hw, seq, b, t, sequence_parallel)
    mlp = mlp_times(model, hw, seq, b, t, sequence_parallel)
    G = 2.0 if model.swiglu else 1.0
    rest_att = att["forward"] - att["core"] - _products(hw, _attention_shapes(model, t)[0], T)[0]
    rest_mlp = mlp["forward"] - _products(hw, [(G * F / t, h), (h, F / t)], T)[0]
    times = {side: sum((matmul_time(hw, T, n, k) for part, n, k in again if part == side),
                       0.0 * b) for side in ("attention", "mlp")}
    exchanges = np.where(t > 1, 1.0 if sequence_parallel else 2.0, 0.0)
    return {"bytes": np.where(selective, megatron - kept, 0.0),
            "attention": np.where(selective, rest_att + times["attention"] - att["core"], 0.0),
            "mlp": np.where(selective, rest_mlp + times["mlp"], 0.0),
            "collectives_backward": np.where(selective, exchanges, 0.0)}


def parts_with_recipe(parts: LayerParts, model: Transformer, hardware, recipe: Recipe, *,
                      seq: int, microbatch=1, t=1, ep=1, etp=1, moe: bool | None = None,
                      sequence_parallel: bool = True, recompute: str = "selective",
                      node_limit=None, imbalance: float = 1.0,
                      dispatcher: str = "alltoall", tp=None, gpus=None) -> LayerParts:
    """One layer's ``LayerParts`` (``fastpp.model.moe.layer_parts``, called with the same
    arguments) with a recipe's terms: its recomputation added to ``attention_i`` and
    ``mlp_i`` (the ``moe`` module's repeated dispatch and combine to ``dispatch_b`` and
    ``combine_b``, a rerun tensor-parallel MLP's exchange to ``mlp_i``), its exposed host
    copies to ``mlp_f`` and ``mlp_i``; ``gpus``, the job's,
    as there. ``tp``, ``t``'s name in 0.1.0, still works with a ``DeprecationWarning``."""
    t = renamed("parts_with_recipe", "tp", "t", tp, t, 1)
    moe = model.moe if moe is None else moe
    rc = RECOMPUTE.index(recompute)
    att = attention_times(model, hardware, seq, microbatch, t, sequence_parallel)
    if moe:
        mlp = expert_times(model, hardware, seq, microbatch, t, ep, etp, sequence_parallel,
                           imbalance, dispatcher)
        a2a = all_to_all_times(model, hardware, seq, microbatch, t, ep, etp,
                               dispatch_precision(hardware.precision, recipe), node_limit,
                               imbalance, dispatcher=dispatcher, gpus=gpus)
    else:
        mlp, a2a = mlp_times(model, hardware, seq, microbatch, t, sequence_parallel), None
    terms = recipe_terms(model, hardware, recipe, seq, microbatch, t, rc, sequence_parallel,
                         moe=moe, ep=ep, etp=etp, imbalance=imbalance, a2a=a2a,
                         forward=att["forward"] + mlp["forward"],
                         input_grad=att["input_grad"] + mlp["input_grad"],
                         dispatcher=dispatcher)
    again = moe and rc == 1 and "moe" in recipe.recompute_modules
    exchanges = terms["collectives_backward"] * tensor_exchange(
        hardware, seq, microbatch, t, model.hidden, sequence_parallel, gpus)
    out = {"attention_i": parts.attention_i + terms["attention"],
           "mlp_i": parts.mlp_i + terms["mlp"] + terms["offload_b"] + exchanges,
           "mlp_f": parts.mlp_f + terms["offload_f"],
           "dispatch_b": parts.dispatch_b + (parts.dispatch_f if again else 0.0),
           "combine_b": parts.combine_b + (parts.combine_f if again else 0.0)}
    return parts._replace(**{k: np.asarray(v, np.float64) for k, v in out.items()})


def fp8_saved_bytes(model: Transformer, recipe: Recipe | None, seq: int, microbatch, t, rc,
                    sequence_parallel: bool, *, moe: bool, etp=1, imbalance=1.0) -> np.ndarray:
    """Bytes one layer stores fewer when its products run in FP8, per configuration.

    Under an FP8 recipe Transformer Engine's modules keep each product's input for the weight
    gradient as the quantized copy they made of it, not the bf16 tensor (``_Linear.forward``
    drops the rowwise data and saves ``inputmat``; ``_LayerNormLinear`` saves ``ln_out`` so;
    ``_GroupedLinear`` each expert's; TE v2.4 to v2.14). Those stored apart from any other
    use then take ``FP8_SAVED`` bytes an element, not 2:

    - the QKV product's input, the norm's output (``h`` whole; a norm apart from it frees
      it under ``layernorm`` instead, where Megatron has the product keep the bf16 one,
      ``set_for_recompute_input_layernorm``); with MLA the normed Q and KV latents the
      up-projections take (``q_rank + kv_rank``, whole);
    - a dense layer's first MLP product's input (``h`` whole, the same way) and the second
      product's, the activation's output (``F`` over ``t``), unless ``mlp`` recomputes them;
    - each received expert copy's first product input (``h``; not under ``fp8_cache``, which
      counts it already) and second product input (``F_e / etp``; ``moe_act`` frees it, and
      Megatron then saves the bf16 one), and the shared experts' second product input, unless
      ``moe`` or ``shared_experts`` recomputes them.

    The norms' inputs, Q, K, V, the attention's output (FlashAttention's backward takes them
    in bf16) and the activation's input stay bf16, and full recomputation stores only the
    layer's input. torchtitan keeps every bf16 input (torchao's ``Float8Linear`` casts again
    in the backward): its op-level policy takes nothing off here, and ``stage_table`` calls
    this for no torchtitan run (``config.FP8_BF16_INPUTS``).

    Parameters
    ----------
    model : Transformer
    recipe : Recipe or None
        The run's memory recipe (None: Megatron's default modules, fused norms).
    seq, microbatch, t, rc, sequence_parallel
        As ``recipe_terms``' (``rc`` indexes ``transformer.RECOMPUTE``).
    moe : bool
        An MoE layer (its experts) or a dense one.
    etp, imbalance
        The experts' tensor parallelism and the busiest rank's tokens over the mean.

    Returns
    -------
    numpy.ndarray
    """
    s, h = float(seq), float(model.hidden)
    b = np.asarray(microbatch, np.float64)
    t = np.asarray(t, np.float64)
    rc = np.asarray(rc)
    zero = 0.0 * (b + t + rc)
    if recipe is not None and recipe.op_level:
        return zero
    T = s * b
    whole = T / t if sequence_parallel else T
    cut = BYTES - FP8_SAVED
    mods = set(recipe.recompute_modules) if recipe is not None else {"core_attn"}
    fused = recipe is None or recipe.fused_norms
    offloaded = set(recipe.offload_modules) if recipe is not None else set()
    selective = rc == 1
    # a norm's output the product after it keeps: always where the norm is fused into it,
    # else unless layernorm's recomputation frees it (recipe_terms counts it freed)
    normed = cut * whole * h * np.where(fused, True, ~(selective & ("layernorm" in mods)))
    if model.mla:
        saved = cut * whole * float(model.q_rank + model.kv_rank) + zero
    else:  # (an offloaded QKV input is off the GPU already)
        saved = normed * ("qkv_linear" not in offloaded) + zero
    if not moe:
        mlp = normed + cut * T / t * model.ffn
        return np.where(rc == 2, 0.0, saved + np.where(selective & ("mlp" in mods), 0.0, mlp))
    _, received = _tokens(model, seq, b, t, etp, imbalance)
    cached = recipe is not None and recipe.fp8_cache
    fc1 = 0.0 if cached or "expert_fc1" in offloaded else cut * h * received
    fc2 = np.where(selective & ("moe_act" in mods), 0.0,
                   cut * received * model.expert_ffn / np.asarray(etp, np.float64))
    shared = cut * T / t * model.shared_experts * model.expert_ffn
    shared = np.where(selective & ("shared_experts" in mods), 0.0, shared)
    experts = np.where(selective & ("moe" in mods), 0.0, fc1 + fc2 + shared)
    return np.where(rc == 2, 0.0, saved + experts)


__all__ = ["FP8_CACHED", "FP8_SAVED", "OFFLOAD_MODULES", "OUTPUT_DISCARDING", "RECIPES",
           "RECOMPUTE_MODULES", "Recipe", "fp8_saved_bytes", "make_recipe", "optimizer_bytes",
           "parts_with_recipe", "recipe_pricing", "recipe_terms"]


# a misspelt keyword named, not a bare TypeError
Recipe.__init__ = known_keywords("Recipe")(Recipe.__init__)
