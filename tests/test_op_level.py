"""torchtitan's op-level selective checkpointing (``recompute_method="op"``,
``fastpp.model.recipes.op_level_terms``) against PyTorch's own selective checkpointing.

A Llama block written as torchtitan writes it (``wq, wk, wv`` then ``wo``; ``w2(silu(w1(x)) *
w3(x))``) runs its forward and backward under ``torch.utils.checkpoint`` with
``create_selective_checkpoint_contexts`` and torchtitan's policy: save the outputs of the ops
on its save list, and of every product but every second one. What the policy saves (with the
block's input, which the checkpoint keeps) is measured from the ops' outputs as they run, and
what the backward runs again from the products that reach a dispatch mode during the block's
second run (those the checkpoint returns from its cache never do). On CPU, PyTorch's SDPA is
``_scaled_dot_product_flash_attention_for_cpu``, the GPU's flash kernel's stand-in here.
"""

import dataclasses

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import HARDWARE, RunConfig, Transformer, plan, transformer_costs
from fastpp.model.recipes import op_level_terms
from fastpp.model.transformer import layer_costs

H, HEADS, KV_HEADS, F, SEQ, BATCH = 64, 4, 2, 176, 32, 2
MODEL = Transformer(layers=2, hidden=H, heads=HEADS, kv_heads=KV_HEADS, ffn=F, vocab=256,
                    swiglu=True, fused_swiglu=False, name="small-llama")


def _block(torch, swiglu: bool):
    nn, fn = torch.nn, torch.nn.functional
    d = H // HEADS

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(H), nn.RMSNorm(H)
            self.wq = nn.Linear(H, HEADS * d, bias=False)
            self.wk = nn.Linear(H, KV_HEADS * d, bias=False)
            self.wv = nn.Linear(H, KV_HEADS * d, bias=False)
            self.wo = nn.Linear(HEADS * d, H, bias=False)
            self.w1 = nn.Linear(H, F, bias=False)
            self.w2 = nn.Linear(F, H, bias=False)
            self.w3 = nn.Linear(H, F, bias=False) if swiglu else None

        def forward(self, x):
            b, s, _ = x.shape
            y = self.attention_norm(x)
            xq, xk, xv = self.wq(y), self.wk(y), self.wv(y)
            q = xq.view(b, s, HEADS, d).transpose(1, 2)
            k = xk.view(b, s, KV_HEADS, d).transpose(1, 2)
            v = xv.view(b, s, KV_HEADS, d).transpose(1, 2)
            o = fn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            h = x + self.wo(o.transpose(1, 2).reshape(b, s, H))
            z = self.ffn_norm(h)
            inner = fn.silu(self.w1(z)) * self.w3(z) if swiglu else fn.gelu(self.w1(z))
            return h + self.w2(inner)

    return Block().to(torch.bfloat16)


def _measured(swiglu: bool):
    """The bytes torchtitan's policy saves for one block (its input included) and the
    products its backward runs again, as (rows, n, k) of each ``aten.mm``. As torchtitan
    runs it, without early stop: the backward runs the whole block again."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    aten = torch.ops.aten
    save_list = {aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default}

    def policy():
        count = [0]

        def decide(ctx, func, *args, **kwargs):
            if func == aten.mm.default:
                count[0] += 1
            keep = func in save_list and not (func == aten.mm.default and count[0] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
        return decide

    class Ops(TorchDispatchMode):
        """Each op's output bytes in the forward; the products the backward's recomputation
        runs (those the checkpoint returns from its cache never reach this mode)."""

        def __init__(self):
            super().__init__()
            self.calls, self.again, self.phase = [], [], None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if self.phase == "recompute" and func == aten.mm.default:
                self.again.append((args[0].shape[0], args[1].shape[1], args[0].shape[1]))
            elif self.phase == "forward":
                outs = out if isinstance(out, tuple | list) else (out,)
                self.calls.append((func, sum(o.numel() * o.element_size() for o in outs
                                             if isinstance(o, torch.Tensor))))
            return out

    torch.manual_seed(0)
    block = _block(torch, swiglu)
    x = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
    ops, runs = Ops(), []
    # the block's first run is the forward, its second the backward's recomputation
    block.register_forward_pre_hook(lambda *_: setattr(
        ops, "phase", "recompute" if runs else "forward") or runs.append(1))
    block.register_forward_hook(lambda *_: setattr(ops, "phase", None))
    with ops:
        out = checkpoint(block, x, use_reentrant=False, early_stop=False,
                         context_fn=lambda: create_selective_checkpoint_contexts(policy()))
        out.sum().backward()
    assert len(runs) == 2
    kept, products = x.numel() * x.element_size(), 0  # the checkpoint keeps its input
    for func, size in ops.calls:
        if func == aten.mm.default:
            products += 1
            kept += size if products % 2 else 0
        elif func in save_list:
            kept += size
    return kept, sorted(ops.again)


@pytest.mark.parametrize("swiglu", [True, False])
def test_op_level_bytes_and_recomputed_products_are_pytorch_s(swiglu):
    """The bytes ``op_level_terms`` keeps a block (Megatron's selective count less its
    ``bytes``) equal what PyTorch's selective checkpointing saves under torchtitan's policy,
    to the byte; and the products it prices again are those the backward runs again."""
    model = dataclasses.replace(MODEL, swiglu=swiglu)
    kept, again = _measured(swiglu)
    hw = HARDWARE["H100-80GB"]
    terms = op_level_terms(model, hw, SEQ, BATCH, 1, 1, False)
    megatron = layer_costs(model, SEQ, BATCH, 1, False, 1)["activations"]
    assert float(megatron - terms["bytes"]) == kept
    T, d = SEQ * BATCH, H // HEADS
    expected = [(T, KV_HEADS * d, H), (T, H, HEADS * d)] + ([(T, F, H)] if swiglu else
                                                           [(T, H, F)])
    assert again == sorted(expected)


def test_op_level_prices_its_recomputation_and_keeps_less():
    """A dense run under torchtitan's policy: less memory than Megatron's selective count
    (the SwiGLU's insides, norms and K not kept) and a longer backward (``wk``, ``wo``, ``w3``,
    the norms and the activation again; the attention core not), at ``t = 1`` and with
    tensor and sequence parallelism (the partial sum of ``w2`` kept whole, and one more
    exchange)."""
    keywords = dict(seq=4096, global_batch=16, recompute="selective")
    for t in (1, 4):
        megatron = RunConfig(**keywords, t=t, d=8 // t, sequence_parallel=t > 1)
        op = megatron.replace(recompute_method="op")
        a, b = (plan("llama3-8b", config=c).iloc[0] for c in (megatron, op))
        assert b["activation_bytes"] < a["activation_bytes"]
        assert b["step_time"] > a["step_time"]
        assert np.isnan(b["expected_memory_error"])  # (not measured against PyTorch's bytes)
    costs = transformer_costs("llama3-8b", config=op)
    assert costs.error_bar == transformer_costs("llama3-8b", config=megatron).error_bar


@pytest.mark.parametrize("change, message", [
    (dict(recompute="full"), r"recompute_method='op' is torchtitan's op-level"),
    (dict(recompute_modules=("layernorm",)), r"recompute_modules \(Megatron's\) None"),
])
def test_op_level_needs_selective_rows_alone(change, message):
    with pytest.raises(ScheduleError, match=message):
        RunConfig(**{"seq": 4096, "global_batch": 8, "recompute": "selective",
                     "recompute_method": "op", **change})


def test_op_level_is_refused_where_megatron_or_torchtitan_cannot_state_it():
    from fastpp.model.megatron import to_megatron
    from fastpp.model.torchtitan import to_torchtitan

    op = RunConfig(seq=4096, global_batch=8, d=8, zero=3, recompute="selective",
                   recompute_method="op")
    with pytest.raises(ScheduleError, match="Megatron-LM has no op-level checkpointing"):
        to_megatron(op)
    with pytest.raises(ScheduleError, match="cannot state Megatron's selective"):
        to_torchtitan(op.replace(recompute_method=None))
    assert 'selective_ac_option = "op"' in to_torchtitan(op)
    with pytest.raises(ScheduleError, match="recompute_method='op' acts on recompute="):
        plan("llama3-8b", 8, seq=4096, global_batch=8, recompute=["full"],
             recompute_method="op")
    with pytest.raises(ScheduleError, match="give no recipe or recompute_modules"):
        plan("llama3-8b", 8, seq=4096, global_batch=8, recompute_method="op",
             recompute_modules=["layernorm"])
