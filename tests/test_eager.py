"""Eager PyTorch's elementwise ops (``Transformer.eager``, ``fastpp.model.compute.eager_bytes``)
against the ops PyTorch runs.

torchtitan's Llama block as its code stood for its December 2024 benchmark (9dec370:
``norms.RMSNorm``, ``apply_rotary_emb``, ``repeat_kv``, ``FeedForward``) runs its forward and
backward in bf16 on CPU under a dispatch mode that adds up, op by op, the bytes each reads and
writes (its inputs and outputs; views, which copy nothing, the products and the attention core
left out). Eager PyTorch runs the same ops on a GPU, each a kernel; the CPU's flash kernel
stands in for the GPU's. fastpp prices those ops as fused kernels plus ``eager_bytes``; the two
agree within what fastpp leaves out on purpose: the rotary table's reads and the norms' ``T``
scalars (under 2%), and ``repeat_kv``'s copies of K and V, which a compiled block makes too.
"""

import dataclasses

import pytest

from fastpp.model import HARDWARE, Transformer
from fastpp.model.compute import (
    EAGER_KERNELS,
    attention_times,
    eager_bytes,
    layer_times,
    mlp_times,
)
from fastpp.model.transformer import BYTES

# (batch, sequence, hidden, heads, kv heads, ffn): without and with grouped-query attention
SHAPES = [(1, 128, 256, 4, 4, 704), (2, 64, 512, 8, 8, 1408), (1, 128, 256, 4, 2, 704)]


def _counted(batch, seq, hidden, heads, kv_heads, ffn):
    """Bytes per token the block's elementwise ops move, forward and backward, but
    ``repeat_kv``'s copies and their sums in the backward; the copies' own bytes (forward);
    and how many ops ran, forward and backward."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    nn, fn, aten = torch.nn, torch.nn.functional, torch.ops.aten
    d = hidden // heads
    skip = {aten.mm.default, aten.t.default, aten.detach.default, aten._unsafe_view.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten._scaled_dot_product_flash_attention_for_cpu_backward.default}

    class RMSNorm(nn.Module):  # torchtitan's norms.RMSNorm
        def __init__(self):
            super().__init__()
            self.eps, self.weight = 1e-6, nn.Parameter(torch.ones(hidden))

        def forward(self, x):
            y = x.float()
            return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) \
                * self.weight

    def rotary(xq, xk, freqs):  # torchtitan's apply_rotary_emb
        q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs = freqs[:xq.shape[1]].view(1, xq.shape[1], 1, q.shape[-1])
        return (torch.view_as_real(q * freqs).flatten(3).type_as(xq),
                torch.view_as_real(k * freqs).flatten(3).type_as(xk))

    def repeat(x):  # torchtitan's repeat_kv
        b, s, g, _ = x.shape
        n = heads // g
        return x if n == 1 else x.unsqueeze(3).expand(b, s, g, n, d).reshape(b, s, heads, d)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()
            self.wq = nn.Linear(hidden, heads * d, bias=False)
            self.wk = nn.Linear(hidden, kv_heads * d, bias=False)
            self.wv = nn.Linear(hidden, kv_heads * d, bias=False)
            self.wo = nn.Linear(heads * d, hidden, bias=False)
            self.w1 = nn.Linear(hidden, ffn, bias=False)
            self.w2 = nn.Linear(ffn, hidden, bias=False)
            self.w3 = nn.Linear(hidden, ffn, bias=False)

        def forward(self, x, freqs):
            b, s, _ = x.shape
            y = self.attention_norm(x)
            xq, xk = rotary(self.wq(y).view(b, s, -1, d), self.wk(y).view(b, s, -1, d), freqs)
            xv = self.wv(y).view(b, s, -1, d)
            o = fn.scaled_dot_product_attention(xq.transpose(1, 2), repeat(xk).transpose(1, 2),
                                                repeat(xv).transpose(1, 2), is_causal=True)
            h = x + self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))
            z = self.ffn_norm(h)
            return h + self.w2(fn.silu(self.w1(z)) * self.w3(z))

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.copies, self.kernels = 0, 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view and func not in skip:
                tensors = [x for x in torch.utils._pytree.tree_leaves((args, kwargs, out))
                           if isinstance(x, torch.Tensor)]
                moved = sum(x.numel() * x.element_size() for x in tensors)
                self.bytes += moved
                self.kernels += 1
                # repeat_kv's copy of an expanded K or V (read as its elements), and in the
                # backward its sum over the repeats (a 5-D gradient)
                self.copies += moved if func == aten.clone.default or (
                    func == aten.sum.dim_IntList and args[0].dim() == 5) else 0
            return out

    torch.manual_seed(0)
    block = Block().to(torch.bfloat16)
    x = torch.randn(batch, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
    freqs = torch.polar(torch.ones(seq, d // 2), torch.rand(seq, d // 2))
    forward, backward = Count(), Count()
    with forward:
        out = block(x, freqs)
    grad = torch.randn_like(out)
    with backward:
        out.backward(grad)
    tokens = batch * seq
    return ((forward.bytes - forward.copies) / tokens,
            (backward.bytes - backward.copies) / tokens, forward.copies / tokens,
            (forward.kernels, backward.kernels))


def _model(hidden, heads, kv_heads, ffn, eager=True):
    return Transformer(layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                       vocab=256, swiglu=True, fused_swiglu=False, eager=eager)


@pytest.mark.parametrize("shape", SHAPES)
def test_eager_bytes_are_what_pytorch_s_ops_move(shape):
    """fastpp's fused kernels (per token: two norms reading and writing ``h``, 4 bytes an
    element forward and 6 backward; two residual adds, 6 and 4; SiLU and the product read as
    one op, ``6F`` and ``8F``) plus ``eager_bytes`` are what eager PyTorch's ops move in
    torchtitan's block, within 2%, forward and backward; with grouped-query attention less
    ``repeat_kv``'s copies and their backward's sums (priced nowhere: a compiled block makes
    them too)."""
    batch, seq, h, heads, kv_heads, ffn = shape
    forward, backward, copies, kernels = _counted(*shape)
    extra = eager_bytes(_model(h, heads, kv_heads, ffn), seq, batch, 1, False)
    tokens = batch * seq
    fused_forward = 2 * 2 * BYTES * h + 2 * 3 * BYTES * h + 3 * BYTES * ffn
    fused_backward = 2 * 1.5 * 2 * BYTES * h + 2 * 2 * BYTES * h + 4 * BYTES * ffn
    priced_forward = fused_forward + float(extra["attention"][0] + extra["mlp"][0]) / tokens
    priced_backward = fused_backward + float(extra["attention"][1] + extra["mlp"][1]) / tokens
    assert (copies > 0) == (kv_heads < heads)
    assert priced_forward == pytest.approx(forward, rel=0.02)
    assert priced_backward == pytest.approx(backward, rel=0.02)
    # the fused kernels alone leave out most of it: eager moves 3-4 times their bytes
    assert forward > 2.5 * fused_forward and backward > 3.5 * fused_backward
    # and launches 26 and 48 kernels where the fused ones are 5 (two norms, two residual
    # adds, the activation) each way: EAGER_KERNELS' 21 and 43 more
    if kv_heads == heads:  # (repeat_kv adds its copies and sums)
        k = EAGER_KERNELS
        more = [2 * k["norm"][i] + k["rope"][i] + k["gate"][i] + 3 * k["sum"][i]
                for i in (0, 1)]
        assert kernels == (5 + more[0], 5 + more[1]) == (26, 48)


def test_eager_kernels_are_priced_where_the_model_says_so():
    """``eager`` adds ``eager_bytes`` at the memory's bandwidth and a launch for each kernel
    it adds (``EAGER_KERNELS``: 21 a layer forward and 43 backward, as the trace above counts
    them against the fused kernels) to each half's forward and backward, which the whole layer
    and its recomputation carry; a fused model's times do not move, and the weights'
    gradients never do."""
    hw = HARDWARE["H100-80GB"]
    fused = _model(4096, 32, 8, 14336, eager=False)
    eager = dataclasses.replace(fused, eager=True)
    extra = eager_bytes(eager, 8192, 2, 1, False)
    assert all(float(x) == 0 for pair in eager_bytes(fused, 8192, 2, 1, False).values()
               for x in pair)
    kernels = {"attention": (13, 25), "mlp": (8, 18)}
    for half, times in (("attention", attention_times), ("mlp", mlp_times)):
        a, b = (times(m, hw, 8192, 2, 1, False) for m in (fused, eager))
        for k, key in enumerate(("forward", "input_grad")):
            assert b[key] - a[key] == pytest.approx(
                float(extra[half][k]) / hw.memory_bandwidth
                + kernels[half][k] * hw.op_overhead, rel=1e-9)
        assert b["weight_grad"] == a["weight_grad"]
    added = [float(extra["attention"][k] + extra["mlp"][k]) / hw.memory_bandwidth
             + (21, 43)[k] * hw.op_overhead for k in (0, 1)]
    full = [layer_times(m, hw, 8192, 2, 1, False, 2) for m in (fused, eager)]
    assert full[1]["forward"] - full[0]["forward"] == pytest.approx(added[0], rel=1e-9)
    # full recomputation runs the eager forward again in the backward
    assert full[1]["input_grad"] - full[0]["input_grad"] == pytest.approx(sum(added),
                                                                          rel=1e-9)
