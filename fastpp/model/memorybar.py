"""The error bar of predicted memory: the activation formula against the bytes PyTorch saves.

A device's predicted memory is its weights, gradients and optimizer states (counted, not
modelled: parameter counts times 2 + ``reduce_bytes`` + 12 bytes, over the ZeRO shares; a
test holds the counts to a PyTorch model's) plus the activations its schedule keeps alive,
each layer's ``fastpp.model.transformer.layer_costs`` bytes (Korthikanti et al. 2022's ``sbh(34 +
5as/h)`` and its variants), plus a recomputed layer's working set during its backward
(``fastpp.model.stages.recomputed_bytes``; on the last stage the loss's where larger,
``stages.loss_bytes``, measured apart by ``tests/test_loss_memory.py``). The
activations are a model, and this module measures them.

``saved_bytes`` builds the dense layer the formula describes in PyTorch, in bf16 on the CPU
(a norm, the fused QKV product, the attention core, the output projection, dropout, the
residual, the MLP with GeLU or SwiGLU) and runs one forward under
``torch.autograd.graph.saved_tensors_hooks``, counting each storage autograd keeps once (a
view counts its base once; the weights are not activations). The layer is laid out as
Megatron-LM lays it out: sequence first, the QKV product's output grouped by key-value head
(``[g, (a/g + 2) d]``), so its Q, K, V are views of one storage (with grouped-query
attention Megatron's reshape of Q copies it). The variants:

- attention ``"eager"``: Megatron's unfused core (``bmm``, a causal softmax, dropout on the
  probabilities, ``bmm`` with V; K and V repeated to ``a`` heads under grouped-query
  attention, as Megatron, Hugging Face and TorchTitan repeat them); ``"flash"``:
  ``scaled_dot_product_attention`` (PyTorch's flash kernel on the CPU), Q, K and V made
  contiguous ``[s, b, heads, d]`` first as Transformer Engine makes them (its ``sbhd``), no
  dropout inside (CUDA's kernels regenerate the mask from the RNG state);
- MLP ``"gelu"``, ``"swiglu"`` (SiLU and product as separate ops, as TorchTitan runs it) or
  ``"fused-swiglu"`` (one op keeping only its input, as Megatron's ``bias_swiglu`` and
  Transformer Engine keep it: ``Transformer.fused_swiglu``);
- LayerNorm (GPT-like shapes) or RMSNorm with rotary embeddings (Llama-like: RMSNorm kept as
  the fused kernels keep it, its input and one fp32 statistic per token; RoPE as fused RoPE,
  keeping only its angles), dropout on or off;
- recomputation ``"none"``, ``"selective"`` (the core under a reentrant
  ``torch.utils.checkpoint``, as Megatron checkpoints ``core_attn``) or ``"full"`` (the layer
  under one);
- hidden, heads, key-value heads, sequence and microbatch over a small grid: the bytes are
  sums of ``s b`` times widths, so small shapes check the same formula as large ones.

Two kernels differ on the CPU from CUDA's and are written as CUDA keeps them: dropout keeps a
one-byte mask (CPU's ``native_dropout`` keeps it in the input's dtype) and RMSNorm keeps its
bf16 input and an fp32 statistic (CPU's composite keeps fp32 copies).

Each variant's relative error ``formula / measured - 1`` is grouped by the three facts a
configuration gives (``MemoryRegime``: attention kernel, MLP, recomputation); a group's RMS is
the expected error of the activations (``activation_error``). ``plan`` rows carry
``expected_memory_error``: that error times the stored activations' share of the peak memory,
plus the ``"none"`` regime's error times the share of a recomputed layer's working set. Full
recomputation keeps each layer's input, exactly (RMS 0), but re-runs one layer's forward
inside its backward, so one layer's bytes without recomputation are alive beside the
checkpoints: its bar is the ``"none"`` regime's on those bytes. Selective recomputation
without FlashAttention likewise brings back one layer's scores, under the ``"none"``
regime's bar. ``unmeasured`` names what a run holds beyond the measured layer; its rows get
NaN.

Not covered (no measurement here): the framework's workspace and the allocator's
fragmentation, NCCL's and the pipeline's communication buffers, CUDA graphs' pools, the
loss's activations (the embedding's, its dropout's mask alone, are measured by a test), the
tensor-parallel split of the bytes (measured at
``t = 1``), the recomputed layer's working set as such (its bytes are the no-recomputation
layer's, measured; when they are alive is the schedule's), and, with NaN for their rows,
context parallelism's exchange buffers, offloaded activations, recompute modules other than
``core_attn``, MoE experts and MLA. Rotary
embeddings are in the layer but not in the formula: where V stays a view of the fused QKV
output beside new Q and K, whatever keeps V keeps that whole output, and the bar shows it.

``memory_table(measure())`` measures the grid and groups it; ``python scripts/memorybars.py
--write`` writes it to ``memorybars.json`` beside ``errorbars.json``; a test holds the file to
a fresh measurement.
"""

from __future__ import annotations

import json
import math
from functools import cache
from itertools import product
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..checks import ScheduleError, flag, nonnegative_int, one_of, positive_int
from .hardware import preset
from .presets import MODELS
from .transformer import RECOMPUTE, Transformer, layer_costs

TABLE = Path(__file__).with_name("memorybars.json")
FACTS = ("attention", "mlp", "recompute")
ATTENTION = ("eager", "flash")
MLP = ("gelu", "swiglu", "fused-swiglu")
NORMS = ("layernorm", "rmsnorm")
DROPOUT = 0.1
# (hidden, heads, kv_heads, seq, microbatch, norm, rope): GPT-like multi-head, Llama-like
# multi-head and grouped (Q copied by the reshape), and multi-query attention; s above and
# below h, b 1 and 2
SHAPES = ((128, 4, 4, 64, 2, "layernorm", False), (128, 4, 4, 64, 1, "rmsnorm", True),
          (256, 8, 2, 32, 1, "rmsnorm", True), (128, 2, 1, 128, 2, "layernorm", False))


class MemoryRegime(NamedTuple):
    """The facts the activations' error bar is looked up by."""

    attention: str
    mlp: str
    recompute: str


def regime_of(model: Transformer, recompute: str) -> MemoryRegime:
    """``model``'s ``MemoryRegime`` under ``recompute``.

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer`` or a preset name (``fastpp.model.MODELS``).
    recompute : {"none", "selective", "full"}

    Returns
    -------
    MemoryRegime
    """
    model = preset(MODELS, model, "model")
    one_of(recompute, "recompute", RECOMPUTE)
    mlp = ("fused-swiglu" if model.fused_swiglu else "swiglu") if model.swiglu else "gelu"
    return MemoryRegime("flash" if model.flash_attention else "eager", mlp, recompute)


def formula_bytes(model: Transformer, seq: int, microbatch: int, recompute: str) -> float:
    """One layer's activation bytes as fastpp prices them (``layer_costs`` at ``t = 1``).

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer`` or a preset name (``fastpp.model.MODELS``).
    seq, microbatch : int
        Sequence length and sequences, each at least 1.
    recompute : {"none", "selective", "full"}

    Returns
    -------
    float
        Bytes the layer keeps for its backward.
    """
    model = preset(MODELS, model, "model")
    one_of(recompute, "recompute", RECOMPUTE)
    return float(layer_costs(model, positive_int(seq, "seq"),
                             positive_int(microbatch, "microbatch"), 1, False,
                             RECOMPUTE.index(recompute))["activations"])


def saved_bytes(model: Transformer, seq: int, microbatch: int, recompute: str = "none",
                norm: str = "layernorm", rope: bool = False, seed: int = 0) -> int:
    """Bytes one forward of ``model``'s layer keeps for its backward in PyTorch (needs torch).

    Parameters
    ----------
    model : Transformer or str
        A dense ``Transformer`` with heads of ``hidden / heads`` (or a preset name): its
        ``hidden``, ``heads``, ``kv_heads``, ``ffn``, ``swiglu``, ``fused_swiglu`` (one op
        keeping its input, as Megatron's and Transformer Engine's, else TorchTitan's separate
        SiLU and product), ``dropout`` and ``flash_attention`` (``"flash"``:
        ``scaled_dot_product_attention``) shape the layer.
    seq, microbatch : int
        Sequence length and sequences, each at least 1.
    recompute : {"none", "selective", "full"}
    norm : {"layernorm", "rmsnorm"}
    rope : bool
        Rotary embeddings on Q and K, as one op keeping only its angles (Megatron's and
        Transformer Engine's fused RoPE): Q and K become new tensors while V stays a view.
    seed : int
        PyTorch's seed for the weights and the input, at least 0.

    Returns
    -------
    int
        The bytes of the distinct storages saved for backward, the weights left out. The
        backward is run once, so the saved set is one the layer can train with.
    """
    model = preset(MODELS, model, "model")
    seq, microbatch = positive_int(seq, "seq"), positive_int(microbatch, "microbatch")
    one_of(recompute, "recompute", RECOMPUTE)
    one_of(norm, "norm", NORMS)
    flag(rope, "rope")
    seed = nonnegative_int(seed, "seed")
    if model.moe or model.mla or model.head_dim * model.heads != model.hidden:
        raise ScheduleError(f"model must be a dense layer with standard attention, heads of "
                            f"hidden/heads (got {model.name!r})")
    import torch

    torch.manual_seed(seed)
    layer, params = _torch_layer(torch, model, norm, rope)
    run = layer
    if recompute == "full":
        def run(x):
            return torch.utils.checkpoint.checkpoint(layer, x, "none", use_reentrant=True)
    weights = {p.untyped_storage().data_ptr() for p in params}
    kept: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    x = torch.randn(seq, microbatch, model.hidden, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = run(x) if recompute == "full" else layer(x, recompute)
    out.float().square().sum().backward()
    return int(sum(kept.values()))


def _torch_layer(torch, model: Transformer, norm: str, rope: bool):
    """The layer as ``forward(x, recompute)`` on ``[s, b, h]`` bf16, and its weights."""
    F = torch.nn.functional
    h, a, g, d, ffn = model.hidden, model.heads, model.kv_heads, model.head_dim, model.ffn
    p = DROPOUT if model.dropout else 0.0

    def weight(*shape):
        return torch.nn.Parameter(0.02 * torch.randn(*shape, dtype=torch.bfloat16))

    w = {"norm1": weight(h), "norm2": weight(h), "bias1": weight(h), "bias2": weight(h),
         "qkv": weight(g * (a // g + 2) * d, h), "proj": weight(h, h),
         "fc1": weight((2 if model.swiglu else 1) * ffn, h), "fc2": weight(h, ffn)}

    class RMSNorm(torch.autograd.Function):
        """Keeps the input and one fp32 statistic per token, as the fused kernels do."""

        @staticmethod
        def forward(ctx, x, gain):
            rstd = torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-5)
            ctx.save_for_backward(x, gain, rstd)
            return (x.float() * rstd).to(x.dtype) * gain

        @staticmethod
        def backward(ctx, grad):
            x, gain, rstd = ctx.saved_tensors
            xhat = x.float() * rstd
            gg = grad.float() * gain.float()
            dx = rstd * (gg - xhat * (gg * xhat).mean(-1, keepdim=True))
            return dx.to(x.dtype), (grad.float() * xhat).flatten(0, -2).sum(0).to(gain.dtype)

    class SwiGLU(torch.autograd.Function):
        """``silu(gate) * up`` keeping only its input, as Megatron's ``bias_swiglu`` does."""

        @staticmethod
        def forward(ctx, both):
            ctx.save_for_backward(both)
            gate, up = both.chunk(2, -1)
            return F.silu(gate) * up

        @staticmethod
        def backward(ctx, grad):
            (both,) = ctx.saved_tensors
            gate, up = both.float().chunk(2, -1)
            sig = torch.sigmoid(gate)
            dgate = grad.float() * up * sig * (1 + gate * (1 - sig))
            return torch.cat([dgate, grad.float() * gate * sig], -1).to(both.dtype)

    class RoPE(torch.autograd.Function):
        """Rotates ``x`` (``[s, b, heads, d]``) keeping only the angles, as fused RoPE does."""

        @staticmethod
        def forward(ctx, x, angles):
            ctx.save_for_backward(angles)
            return RoPE.turn(x, angles)

        @staticmethod
        def backward(ctx, grad):
            (angles,) = ctx.saved_tensors
            return RoPE.turn(grad, -angles), None

        @staticmethod
        def turn(x, angles):
            one, two = x.float().chunk(2, -1)
            cos, sin = angles.cos(), angles.sin()
            return torch.cat([one * cos - two * sin, two * cos + one * sin], -1).to(x.dtype)

    def normed(x, which):
        if norm == "rmsnorm":
            return RMSNorm.apply(x, w[f"norm{which}"])
        return F.layer_norm(x, (h,), w[f"norm{which}"], w[f"bias{which}"])

    def dropout(x):
        # a one-byte mask, as CUDA's native_dropout keeps it
        if not p:
            return x
        return x * (torch.rand_like(x, dtype=torch.float32) >= p) * (1.0 / (1.0 - p))

    def core(q, k, v):
        s, b = q.shape[:2]
        if model.flash_attention:
            # contiguous [s, b, heads, d] as Transformer Engine's sbhd; the kernel's output
            # then follows that layout and the projection's input is a view of it
            q, k, v = (y.contiguous().permute(1, 2, 0, 3) for y in (q, k, v))
            # no dropout inside: the CPU's flash kernel has none (its math fallback keeps the
            # probabilities); CUDA's regenerates the mask from the RNG state, keeping nothing
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=g < a)
            return o.permute(2, 0, 1, 3).reshape(s, b, h)
        if g < a:
            k, v = (y.repeat_interleave(a // g, 2) for y in (k, v))
        q, k, v = (y.reshape(s, b * a, d).transpose(0, 1) for y in (q, k, v))
        causal = torch.full((s, s), -math.inf, dtype=q.dtype).triu(1)
        probs = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * d ** -0.5 + causal, -1)
        out = torch.bmm(dropout(probs), v)
        return out.view(b, a, s, d).permute(2, 0, 1, 3).contiguous().view(s, b, h)

    def forward(x, recompute):
        s, b = x.shape[:2]
        qkv = F.linear(normed(x, 1), w["qkv"]).view(s, b, g, (a // g + 2) * d)
        q, k, v = qkv.split([a // g * d, d, d], -1)
        q = q.reshape(s, b, a, d)
        if rope:
            angles = (torch.arange(s, dtype=torch.float32)[:, None]
                      * 10000.0 ** (-torch.arange(d // 2) / (d // 2)))[:, None, None, :]
            q, k = RoPE.apply(q, angles), RoPE.apply(k, angles)
        out = (torch.utils.checkpoint.checkpoint(core, q, k, v, use_reentrant=True)
               if recompute == "selective" else core(q, k, v))
        x = x + dropout(F.linear(out, w["proj"]))
        up = F.linear(normed(x, 2), w["fc1"])
        if not model.swiglu:
            act = F.gelu(up)
        elif model.fused_swiglu:
            act = SwiGLU.apply(up)
        else:
            gate, lin = up.chunk(2, -1)
            act = F.silu(gate) * lin
        return x + dropout(F.linear(act, w["fc2"]))

    return forward, list(w.values())


def variants() -> list[dict]:
    """The measured grid.

    Returns
    -------
    list of dict
        One dict of ``saved_bytes``' arguments per variant: ``SHAPES`` times the attention
        kernels, MLPs and recomputations, dropout on and off, SwiGLU eager and fused.
    """
    out = []
    for (h, a, g, s, b, norm, rope), attention, mlp, recompute, dropout in product(
            SHAPES, ATTENTION, MLP, RECOMPUTE, (False, True)):
        swiglu = mlp != "gelu"
        model = Transformer(layers=1, hidden=h, heads=a, kv_heads=g,
                            ffn=(8 * h // 3) if swiglu else 4 * h, swiglu=swiglu,
                            fused_swiglu=mlp == "fused-swiglu", dropout=dropout,
                            flash_attention=attention == "flash", name=f"h{h} a{a} g{g}")
        out.append({"model": model, "seq": s, "microbatch": b, "recompute": recompute,
                    "norm": norm, "rope": rope})
    return out


def measure(rows=None) -> list[dict]:
    """The variants measured in PyTorch (needs torch).

    Parameters
    ----------
    rows : list of dict, optional
        ``saved_bytes``' arguments per variant (default ``variants()``).

    Returns
    -------
    list of dict
        Each row with its ``measured`` (``saved_bytes``) and ``formula``
        (``formula_bytes``) bytes and ``error = formula / measured - 1``.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the shapes are small: a second thread only costs (twice)
    try:
        out = []
        for row in variants() if rows is None else rows:
            measured = saved_bytes(**row)
            formula = formula_bytes(row["model"], row["seq"], row["microbatch"],
                                    row["recompute"])
            out.append({**row, "measured": measured, "formula": formula,
                        "error": formula / measured - 1.0})
        return out
    finally:
        torch.set_num_threads(threads)


def memory_table(measured) -> list[dict]:
    """The measured rows grouped by ``MemoryRegime``.

    Parameters
    ----------
    measured : list of dict
        ``measure()``'s rows.

    Returns
    -------
    list of dict
        Per regime (sorted): its ``FACTS``, ``rows``, and the ``rms``, ``bias`` and ``worst``
        (the largest absolute) relative errors of the activations, rounded to 4 places.
    """
    groups: dict[tuple, list[float]] = {}
    for r in measured:
        groups.setdefault(tuple(regime_of(r["model"], r["recompute"])), []).append(r["error"])
    return [{**dict(zip(FACTS, key, strict=True)), "rows": len(e),
             "rms": round(float(np.sqrt(np.mean(np.square(e)))), 4),
             "bias": round(float(np.mean(e)), 4), "worst": round(float(np.max(np.abs(e))), 4)}
            for key, e in sorted(groups.items())]


@cache
def _groups() -> dict[tuple, dict]:
    regimes = json.loads(TABLE.read_text())["regimes"]
    return {tuple(g[f] for f in FACTS): g for g in regimes}


def unmeasured(model: Transformer, recompute: str, cp: int = 1, recipe=None) -> str:
    """What of a run's activations the measured layer does not cover ("" if none).

    Parameters
    ----------
    model : Transformer or str
        A ``Transformer`` or a preset name (``fastpp.model.MODELS``).
    recompute : {"none", "selective", "full"}
    cp : int
        The context-parallel degree: its exchange buffers (``cp > 1``) are not measured.
    recipe : fastpp.model.recipes.Recipe, optional
        The memory recipe: offloading, recompute modules other than ``core_attn`` and
        torchtitan's op-level policy are not measured.

    Returns
    -------
    str
        The parts not measured, ``"; "``-joined; empty where the bar covers the run.
    """
    model = preset(MODELS, model, "model")
    one_of(recompute, "recompute", RECOMPUTE)
    out = [what for what, missing in (
        ("MoE experts' activations", model.moe), ("MLA's activations", model.mla),
        ("context parallelism's exchange buffers (cp > 1)", positive_int(cp, "cp") > 1),
        ("offloaded activations (offload_modules)", recipe is not None
         and bool(recipe.offload_modules) and recompute != "full"),
        ("recompute modules other than core_attn", recipe is not None
         and recompute == "selective" and set(recipe.recompute_modules) != {"core_attn"}),
        ("torchtitan's op-level checkpointing", recipe is not None and recipe.op_level
         and recompute == "selective"))
        if missing]
    return "; ".join(out)


def activation_error(model: Transformer, recompute: str) -> float:
    """The expected relative error of ``model``'s dense layers' stored activation bytes.

    Parameters
    ----------
    model, recompute
        As ``regime_of`` takes them.

    Returns
    -------
    float
        The RMS relative error of the measured regime (``regime_of``; see the module), of
        what the layers keep between their forward and backward; NaN where not measured
        (MoE, MLA). A recomputed layer's working set carries the ``"none"`` regime's.
    """
    model = preset(MODELS, model, "model")
    regime = regime_of(model, recompute)
    if model.moe or model.mla:
        return math.nan
    group = _groups().get(tuple(regime))
    return math.nan if group is None else float(group["rms"])
