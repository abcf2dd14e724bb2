"""Eager PyTorch's elementwise ops (``Transformer.eager``, ``fastpp.model.compute.eager_bytes``)
against the ops PyTorch runs.

A copy of torchtitan's Llama block as its code stood for its December 2024 benchmark (9dec370:
``norms.RMSNorm``, ``apply_rotary_emb``, ``repeat_kv``, ``FeedForward``) runs its forward and
backward in bf16 on CPU under a dispatch mode that adds up, op by op, the bytes each reads and
writes (its outputs, and its inputs as stored: a broadcast input once; views, which copy
nothing, the products and the attention core left out). Eager PyTorch runs the same ops on a
GPU, each a kernel; the CPU's flash kernel stands in for the GPU's. fastpp prices those ops as
fused kernels plus ``eager_bytes``; the two agree within what fastpp leaves out on purpose:
the rotary table's reads and the norms' ``T`` scalars, and ``repeat_kv``'s copies of K and V,
which a compiled block makes too.
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


def _stored(x) -> int:
    """The bytes of ``x`` an op moves: its elements', or its storage's where it is a
    broadcast view of fewer (an expanded gradient, the rotary table)."""
    return min(x.numel() * x.element_size(), x.untyped_storage().nbytes())


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
                moved = sum(_stored(x) for x in tensors)
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


def _model(hidden, heads, kv_heads, ffn, eager="fp32-norm"):
    return Transformer(layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                       vocab=256, swiglu=True, fused_swiglu=False, eager=eager)


@pytest.mark.parametrize("shape", SHAPES)
def test_eager_bytes_are_what_pytorch_s_ops_move(shape):
    """fastpp's fused kernels (per token: two norms reading and writing ``h``, 4 bytes an
    element forward and 6 backward; two residual adds, 6 and 4; SiLU and the product read as
    one op, ``6F`` and ``10F``) plus ``eager_bytes`` are what eager PyTorch's ops move in
    torchtitan's block, within 2% (most of the rest the rotary table's reads, 4/heads bytes
    an element of q and k at these 4 to 8 heads), forward and backward; with grouped-query
    attention less ``repeat_kv``'s copies and their backward's sums (priced nowhere: a
    compiled block makes them too)."""
    batch, seq, h, heads, kv_heads, ffn = shape
    forward, backward, copies, kernels = _counted(*shape)
    extra = eager_bytes(_model(h, heads, kv_heads, ffn), seq, batch, 1, False)
    tokens = batch * seq
    fused_forward = 2 * 2 * BYTES * h + 2 * 3 * BYTES * h + 3 * BYTES * ffn
    fused_backward = 2 * 1.5 * 2 * BYTES * h + 2 * 2 * BYTES * h + 5 * BYTES * ffn
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
    fused = _model(4096, 32, 8, 14336, eager="")
    eager = dataclasses.replace(fused, eager="fp32-norm")
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


def _part(torch, fn, inputs, elements):
    """Bytes an element and kernels of one part's forward and backward, run alone."""
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.kernels = 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view and func != aten.detach.default:
                self.bytes += sum(_stored(x) for x in torch.utils._pytree.tree_leaves(
                    (args, kwargs, out)) if isinstance(x, torch.Tensor))
                self.kernels += 1
            return out

    forward, backward = Count(), Count()
    with forward:
        out = fn(*inputs)
    grad = torch.randn_like(out)
    with backward:
        out.backward(grad)
    return (forward.bytes / elements, forward.kernels), (backward.bytes / elements,
                                                         backward.kernels)


def test_each_eager_part_moves_what_its_constant_says():
    """Each part alone, at Llama 3 8B's 32 heads of 128: torchtitan's 2024 RMSNorm moves 36
    bytes an element in 8 kernels forward and 92 in 16 backward (a fused norm's 4 and 6, one
    kernel each, plus ``EAGER_NORM`` and ``EAGER_KERNELS``); the rotary embedding of one
    tensor 20 and 20 in 3 and 4 (of q and k: ``EAGER_ROPE``, 6 and 8 kernels), its table's
    reads (4/32 of a byte an element) and its conjugate's copy (a quarter) left out; SiLU
    and the product 10 and 18 in 2 and 3 (the fused 6 and 10 plus ``EAGER_GATE``)."""
    torch = pytest.importorskip("torch")
    from fastpp.model.compute import EAGER_GATE, EAGER_NORM, EAGER_ROPE

    tokens, h, heads, d = 1024, 1024, 32, 128
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.ones(h, dtype=torch.bfloat16))
    x = torch.randn(tokens, h, dtype=torch.bfloat16, requires_grad=True)

    def norm(x):  # torchtitan's norms.RMSNorm at 9dec370
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * weight

    q = torch.randn(1, tokens, heads, d, dtype=torch.bfloat16, requires_grad=True)
    table = torch.polar(torch.ones(tokens, d // 2), torch.rand(tokens, d // 2))

    def rotary(q):  # torchtitan's apply_rotary_emb, on one tensor
        z = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        return torch.view_as_real(z * table.view(1, tokens, 1, d // 2)).flatten(3).type_as(q)

    a, b = (torch.randn(tokens, h, dtype=torch.bfloat16, requires_grad=True) for _ in "ab")
    k = EAGER_KERNELS
    fused = 2 * BYTES  # a fused norm reads and writes each element
    measured = _part(torch, norm, (x,), tokens * h)
    assert [m[1] for m in measured] == [1 + k["norm"][0], 1 + k["norm"][1]]
    assert [m[0] for m in measured] == pytest.approx(
        [fused + EAGER_NORM[0], 1.5 * fused + EAGER_NORM[1]], rel=0.002)
    measured = _part(torch, rotary, (q,), tokens * heads * d)
    assert [2 * m[1] for m in measured] == list(k["rope"])
    assert [m[0] for m in measured] == pytest.approx(list(EAGER_ROPE), rel=0.02)
    measured = _part(torch, lambda a, b: torch.nn.functional.silu(a) * b, (a, b), tokens * h)
    assert [m[1] for m in measured] == [1 + k["gate"][0], 1 + k["gate"][1]]
    assert [m[0] for m in measured] == pytest.approx(
        [3 * BYTES + EAGER_GATE[0], 5 * BYTES + EAGER_GATE[1]], rel=1e-9)


def test_native_norm_is_the_fp32_norm_less_its_norm():
    """``"native-norm"`` (PyTorch's ``nn.RMSNorm``, one kernel each way, what
    ``from_torchtitan`` prices today) prices everything ``"fp32-norm"`` does but the norms'
    part: the same bytes less ``EAGER_NORM`` on each norm's rows, and its kernels less."""
    from fastpp.model.compute import EAGER_NORM, eager_times

    hw = HARDWARE["H100-80GB"]
    old = _model(4096, 32, 8, 14336)
    new = dataclasses.replace(old, eager="native-norm")
    for t, sp in ((1, False), (4, True)):
        a, b = (eager_bytes(m, 8192, 2, t, sp) for m in (old, new))
        rows = 8192 * 2 / (t if sp else 1)
        for half in ("attention", "mlp"):
            for k in (0, 1):
                assert float(a[half][k] - b[half][k]) == pytest.approx(
                    EAGER_NORM[k] * rows * 4096, rel=1e-12)
        ta, tb = (eager_times(m, hw, 8192, 2, t, sp) for m in (old, new))
        assert float(ta["mlp"][1] - tb["mlp"][1]) == pytest.approx(
            EAGER_NORM[1] * rows * 4096 / hw.memory_bandwidth
            + EAGER_KERNELS["norm"][1] * hw.op_overhead, rel=1e-9)


@pytest.mark.parametrize("bad", [True, False, 1, None, "eager", "fp32"])
def test_eager_must_name_its_norm(bad):
    """``eager`` is one of its three names: a flag or a misspelling is refused, naming the
    choices (``True`` would not say which norm)."""
    from fastpp import ScheduleError

    with pytest.raises(ScheduleError, match=r"eager must be one of \['', 'native-norm', "
                                            r"'fp32-norm'\] \(got "):
        Transformer(layers=1, hidden=64, heads=4, eager=bad)
