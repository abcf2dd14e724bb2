"""torchtitan's op-level selective checkpointing (``fastpp.model.recipes.op_level_terms``)
under tensor and sequence parallelism, ``t = 2``, against PyTorch's own, run for real.

Two rank processes (gloo on this machine's CPU, a ``DeviceMesh`` of 2, started as
``fastpp.measured.runner`` starts its ranks: this file run as a script, one process a rank, on
a free port) each build the block of ``tests/test_op_level.py`` in bf16, nested as torchtitan
nests it (``attention``, ``feed_forward``) so that torchtitan's ``apply_tp`` plan (at 238fa99,
the commit ``op_level_terms`` cites) applies as written: ``ColwiseParallel`` for ``wq, wk, wv,
w1, w3``, ``RowwiseParallel(output_layouts=Shard(1))`` for ``wo, w2``, ``SequenceParallel`` on
the norms, ``PrepareModuleInput`` all-gathering the sequence into each half; the block's input
and output are the local shards of the sequence, as the embedding's ``RowwiseParallel`` leaves
them. The block runs under ``torch.utils.checkpoint`` with ``create_selective_checkpoint_contexts``
and torchtitan's ``_apply_op_sac`` policy, its save list with the tensor-parallel
reduce-scatter (async TP, which needs CUDA's symmetric memory, is not applied).

What the policy saves is measured from the ops' outputs as they run in the forward (local
shards, the bytes each rank stores), each tagged by the policy's own ``MUST_SAVE``, with the
block's input, which the checkpoint keeps; what the backward runs again from the products and
collectives that reach a dispatch mode during the block's second run (those the checkpoint
returns from its cache never do). As in ``tests/test_op_level.py``, CPU's
``_scaled_dot_product_flash_attention_for_cpu`` stands in for the GPU's flash kernel.
"""

import dataclasses
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from fastpp.model import HARDWARE, Transformer  # noqa: E402
from fastpp.model.recipes import op_level_terms  # noqa: E402
from fastpp.model.transformer import layer_costs  # noqa: E402

H, HEADS, KV_HEADS, F, SEQ, BATCH = 64, 4, 2, 176, 32, 2
T = 2  # the tensor-parallel degree: one rank a process
MODEL = Transformer(layers=2, hidden=H, heads=HEADS, kv_heads=KV_HEADS, ffn=F, vocab=256,
                    swiglu=True, fused_swiglu=False, name="small-llama")
TIMEOUT = 120  # seconds for both ranks (they take a few, most of it importing torch)


def _block(torch, swiglu: bool):
    """The block of ``tests/test_op_level.py``, its halves in submodules as torchtitan's
    ``TransformerBlock`` has them; head counts from the local width (``-1``), as torchtitan's
    ``Attention`` does, since column-parallel products hand back local tensors."""
    nn, fn = torch.nn, torch.nn.functional
    d = H // HEADS

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(H, HEADS * d, bias=False)
            self.wk = nn.Linear(H, KV_HEADS * d, bias=False)
            self.wv = nn.Linear(H, KV_HEADS * d, bias=False)
            self.wo = nn.Linear(HEADS * d, H, bias=False)

        def forward(self, y):
            b, s, _ = y.shape
            xq, xk, xv = self.wq(y), self.wk(y), self.wv(y)
            q = xq.view(b, s, -1, d).transpose(1, 2)
            k = xk.view(b, s, -1, d).transpose(1, 2)
            v = xv.view(b, s, -1, d).transpose(1, 2)
            o = fn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(H, F, bias=False)
            self.w2 = nn.Linear(F, H, bias=False)
            self.w3 = nn.Linear(H, F, bias=False) if swiglu else None

        def forward(self, z):
            return self.w2(fn.silu(self.w1(z)) * self.w3(z) if swiglu else fn.gelu(self.w1(z)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(H), nn.RMSNorm(H)
            self.attention, self.feed_forward = Attention(), FeedForward()

        def forward(self, x):
            h = x + self.attention(self.attention_norm(x))
            return h + self.feed_forward(self.ffn_norm(h))

    return Block().to(torch.bfloat16)


def _rank_measures(rank: int, port: int, path: Path) -> None:
    """One rank's run of each block (SwiGLU and not), written to ``path`` as JSON: the
    tensors the policy saves (op, local shape, dtype, bytes), the products the backward runs
    again as local (rows, n, k), the collectives it runs again (op, output bytes) and how
    many attention cores."""
    import os
    from collections import defaultdict

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    torch.set_num_threads(1)  # two ranks on a small machine: no oversubscription
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=T)
    mesh = init_device_mesh("cpu", (T,))
    aten, c10d = torch.ops.aten, torch.ops._c10d_functional
    # torchtitan's _op_sac_save_list at 238fa99 as it applies here (the GPU's SDPA kernels
    # replaced by CPU's, its fp8 max, flex and varlen attention and compiled code never met)
    save_list = {aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default,
                 c10d.reduce_scatter_tensor.default}

    def local(x):
        return x._local_tensor if isinstance(x, DTensor) else x

    class Ops(TorchDispatchMode):
        """Each op's outputs in the forward, local (the policy tags the ones it saves); the
        products, collectives and attention cores the backward's recomputation runs."""

        def __init__(self):
            super().__init__()
            self.calls, self.products, self.collectives, self.phase = [], [], [], None
            self.cores = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            outs = [local(o) for o in (out if isinstance(out, tuple | list) else (out,))
                    if isinstance(o, torch.Tensor)]
            if self.phase == "forward":
                self.calls.append({"op": str(func), "func": func, "saved": False,
                                   "shapes": [list(o.shape) for o in outs],
                                   "dtypes": [str(o.dtype) for o in outs],
                                   "bytes": sum(o.numel() * o.element_size() for o in outs)})
            elif self.phase == "recompute" and func == aten.mm.default:
                a, w = local(args[0]), local(args[1])
                self.products.append([a.shape[0], w.shape[1], a.shape[1]])
            elif (self.phase == "recompute"
                  and func == aten._scaled_dot_product_flash_attention_for_cpu.default):
                self.cores += 1
            elif (self.phase == "recompute" and func.namespace == "_c10d_functional"
                  and func not in (c10d.wait_tensor.default,
                                   c10d._wrap_tensor_autograd.default)):
                self.collectives.append([str(func), sum(o.numel() * o.element_size()
                                                        for o in outs)])
            return out

    def policy(ops):
        """torchtitan's ``_custom_policy`` (its mm counts kept apart by mode), which tags the
        op it decides on: the caching mode calls it just after the op ran through ``ops``."""
        meta = defaultdict(int)

        def decide(ctx, func, *args, **kwargs):
            mode = "recompute" if ctx.is_recompute else "forward"
            if func == aten.mm.default:
                meta[f"{mode}_mm_count"] += 1
            to_save = func in save_list and not (
                func == aten.mm.default and meta[f"{mode}_mm_count"] % 2 == 0)
            if to_save and not ctx.is_recompute:
                assert ops.calls[-1]["func"] == func
                ops.calls[-1]["saved"] = True
            return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE
        return decide

    results = {}
    for swiglu in (True, False):
        torch.manual_seed(0)
        block = _block(torch, swiglu)
        half = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
        plan = {"attention_norm": SequenceParallel(),
                "attention": PrepareModuleInput(**half),
                "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
                "attention.wv": ColwiseParallel(),
                "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
                "ffn_norm": SequenceParallel(),
                "feed_forward": PrepareModuleInput(**half),
                "feed_forward.w1": ColwiseParallel(),
                "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1))}
        if swiglu:
            plan["feed_forward.w3"] = ColwiseParallel()
        parallelize_module(block, mesh, plan)
        # this rank's shard of the sequence, as the embedding's RowwiseParallel(Shard(1))
        # hands it to the first block: a plain local tensor
        x = torch.randn(BATCH, SEQ // T, H, dtype=torch.bfloat16, requires_grad=True)
        ops, runs = Ops(), []
        # the block's first run is the forward, its second the backward's recomputation
        block.register_forward_pre_hook(lambda *_, o=ops, r=runs: setattr(
            o, "phase", "recompute" if r else "forward") or r.append(1))
        block.register_forward_hook(lambda *_, o=ops: setattr(o, "phase", None))
        with ops:
            out = checkpoint(block, x, use_reentrant=False, early_stop=False,
                             context_fn=lambda o=ops: create_selective_checkpoint_contexts(
                                 policy(o)))
            out.sum().backward()
        assert len(runs) == 2 and x.grad is not None
        # the checkpoint keeps its input, the local shard
        saved = [{"op": "block input", "shapes": [list(x.shape)], "dtypes": [str(x.dtype)],
                  "bytes": x.numel() * x.element_size()}]
        saved += [{k: c[k] for k in ("op", "shapes", "dtypes", "bytes")}
                  for c in ops.calls if c["saved"]]
        results["swiglu" if swiglu else "gelu"] = {
            "saved": saved, "products": sorted(ops.products),
            "collectives": sorted(ops.collectives), "cores": ops.cores}
    path.write_text(json.dumps(results))
    dist.destroy_process_group()


def _free_port() -> int:
    """A port free now (bound to 0 first), as ``fastpp.measured.runner`` takes one."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """``[rank 0's, rank 1's]`` measurements (``_rank_measures``), one launch for both
    blocks (starting the ranks dominates)."""
    folder = tmp_path_factory.mktemp("op_level_tp")
    port = _free_port()
    procs, errs = [], [folder / f"rank{r}.err" for r in range(T)]
    try:
        for rank in range(T):
            with open(errs[rank], "w") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-P", __file__, str(rank), str(port),
                     str(folder / f"rank{rank}.json")],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err))
        for proc in procs:
            proc.wait(timeout=TIMEOUT)
    finally:
        for proc in procs:  # a rank left waiting for a failed peer
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    failed = [f"rank {r} (exit code {p.returncode}): {errs[r].read_text()[-2000:]}"
              for r, p in enumerate(procs) if p.returncode]
    assert not failed, "\n".join(failed)
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(T)]


@pytest.mark.parametrize("swiglu", [True, False])
def test_op_level_bytes_per_rank_with_sequence_parallelism_are_pytorch_s(measured, swiglu):
    """The bytes ``op_level_terms`` keeps a block on one rank at ``t = 2`` with sequence
    parallelism (Megatron's selective count less its ``bytes``) equal what each rank's
    selective checkpointing saves under torchtitan's policy, to the byte: the input's shard,
    ``wq``'s, ``wv``'s and ``w1``'s column-parallel shards, with SwiGLU ``w2``'s partial sum
    whole, SDPA's output and log-sum-exp over the ranks' heads and the two reduce-scatters'
    shards."""
    name = "swiglu" if swiglu else "gelu"
    model = dataclasses.replace(MODEL, swiglu=swiglu)
    terms = op_level_terms(model, HARDWARE["H100-80GB"], SEQ, BATCH, T, 1, True)
    megatron = layer_costs(model, SEQ, BATCH, T, True, 1)["activations"]
    assert measured[0][name]["saved"] == measured[1][name]["saved"]  # the ranks alike
    saved = measured[0][name]["saved"]
    rows, d = SEQ * BATCH, H // HEADS
    ops = [(s["op"], s["shapes"]) for s in saved]
    expected = [("block input", [[BATCH, SEQ // T, H]]),
                ("aten.mm.default", [[rows, HEADS * d // T]]),
                ("aten.mm.default", [[rows, KV_HEADS * d // T]]),
                ("aten._scaled_dot_product_flash_attention_for_cpu.default",
                 [[BATCH, HEADS // T, SEQ, d], [BATCH, HEADS // T, SEQ]]),
                ("_c10d_functional.reduce_scatter_tensor.default", [[BATCH, SEQ // T, H]]),
                ("aten.mm.default", [[rows, F // T]])]
    expected += [("aten.mm.default", [[rows, H]])] if swiglu else []
    expected += [("_c10d_functional.reduce_scatter_tensor.default", [[BATCH, SEQ // T, H]])]
    assert ops == expected
    assert float(megatron - terms["bytes"]) == sum(s["bytes"] for s in saved)


@pytest.mark.parametrize("swiglu", [True, False])
def test_op_level_recomputes_the_products_and_all_gathers_it_prices(measured, swiglu):
    """The products ``op_level_terms`` prices again at ``t = 2`` (local ``n, k`` over all the
    sequence's rows) are those each rank's backward runs again; the collectives it runs again
    are sequence parallelism's two all-gathers of the ``2sbh`` input of each half, which
    fastpp counts as one exchange (an all-gather and a reduce-scatter of those bytes); the
    attention core and the reduce-scatters are not run again."""
    name = "swiglu" if swiglu else "gelu"
    model = dataclasses.replace(MODEL, swiglu=swiglu)
    terms = op_level_terms(model, HARDWARE["H100-80GB"], SEQ, BATCH, T, 1, True)
    rows, d = SEQ * BATCH, H // HEADS
    expected = [[rows, KV_HEADS * d // T, H], [rows, H, HEADS * d // T]]
    expected += [[rows, F // T, H]] if swiglu else [[rows, H, F // T]]
    gathered = 2 * rows * H  # bf16, the whole sequence
    for rank in measured:
        assert rank[name]["products"] == sorted(expected)
        assert rank[name]["collectives"] == [
            ["_c10d_functional.all_gather_into_tensor.default", gathered]] * 2
        assert rank[name]["cores"] == 0
    assert float(terms["collectives_backward"]) == 1.0


if __name__ == "__main__":  # one rank: rank, port, output file
    _rank_measures(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
