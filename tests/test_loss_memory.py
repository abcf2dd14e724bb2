"""The loss's working set on the last stage (``Transformer.loss``,
``fastpp.model.stages.LOSS_WORKING_BYTES`` and ``LOSS_PIPELINE_KEPT``) against what PyTorch
holds.

torchtitan's loss is PyTorch's ``cross_entropy`` on ``logits.float()``, and with tensor
parallelism torchtitan's ``loss_parallel`` over vocabulary-sharded logits (DTensor). Each runs
on CPU under PyTorch's profiler, whose memory events are the allocator's own: the bytes held
at the forward's peak, once the logits are dropped (as torchtitan's training step drops them
outside a pipeline), and at the backward's peak, per logit a rank holds. The parallel loss runs
on two real ranks (gloo), started as ``tests/test_op_level_tp.py`` starts its ranks.
"""

import dataclasses
import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastpp.model import MODELS, plan, transformer_costs
from fastpp.model.stages import LOSS_PIPELINE_KEPT, LOSS_WORKING_BYTES, cp_buffer_bytes

KEPT = 4.0  # the fp32 logits a last stage keeps (stage_table's act: 4 s b v / t)
TOKENS, HIDDEN, VOCAB = 256, 512, 32000


def _measure(torch, pred_of, logits: int, loss_of=None) -> tuple[float, float, float]:
    """Bytes a logit held at the loss's forward peak, kept after it, and at its backward's
    peak, from the profiler's memory events (``pred_of()`` makes the logits, ``loss_of(pred,
    labels)`` the loss: by default PyTorch's cross entropy on ``pred.float()``)."""
    from torch.profiler import ProfilerActivity, profile

    if loss_of is None:
        def loss_of(pred, labels):
            return torch.nn.functional.cross_entropy(pred.float(), labels)

    labels = torch.randint(0, VOCAB, (TOKENS,))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        pred = pred_of()
        loss = loss_of(pred, labels)
        del pred
        with torch.profiler.record_function("backward"):
            loss.backward()
    events = list(prof.profiler.kineto_results.events())
    start = next(e.start_ns() for e in events if e.name() == "backward")
    now = forward = backward = 0
    kept = None
    for e in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        if kept is None and e.start_ns() >= start:
            kept = now
        now += e.nbytes()
        if e.start_ns() < start:
            forward = max(forward, now)
        else:
            backward = max(backward, now)
    return forward / logits, kept / logits, backward / logits


def _one_rank(loss_of=None, weight_grad=True):
    """``_measure`` on one rank; without ``weight_grad`` the output layer's weight takes no
    gradient, whose bytes (``2 HIDDEN / TOKENS`` a logit, 4 here) would otherwise be the
    backward's peak beside a loss that holds little (the input's gradient: 0.03)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, requires_grad=weight_grad)
    return _measure(torch, lambda: torch.nn.functional.linear(x, weight), TOKENS * VOCAB,
                    loss_of)


def _megatron_loss(torch):
    """A vocabulary-parallel cross entropy that holds its memory as Megatron-Core's
    (``tensor_parallel.cross_entropy``, read there, written here) on one rank: the forward
    copies the half-precision logits to fp32 and works in that copy in place (the max
    subtracted, exp, the softmax saved for the backward), the backward turns the saved
    softmax into the gradient in place; autograd casts it back to the logits' precision."""

    class VocabParallelCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels):
            work = logits.float()
            work -= work.max(dim=-1, keepdim=True)[0]
            picked = work.gather(-1, labels[:, None]).squeeze(-1)
            work.exp_()
            sums = work.sum(dim=-1)
            work.div_(sums[:, None])
            ctx.save_for_backward(work, labels)
            return (torch.log(sums) - picked).mean()

        @staticmethod
        def backward(ctx, grad):
            softmax, labels = ctx.saved_tensors
            softmax[torch.arange(labels.numel()), labels] -= 1.0
            softmax.mul_(grad / labels.numel())
            return softmax, None

    def loss_of(pred, labels):
        return VocabParallelCrossEntropy.apply(pred, labels)

    return loss_of


def _rank(rank: int, port: int, path: Path) -> None:
    """One rank of two: torchtitan's loss_parallel on its shard of the vocabulary."""
    import os

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = init_device_mesh("cpu", (2,))
    torch.manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16).chunk(2)[rank].clone()
    weight.requires_grad_()
    with loss_parallel():
        measured = _measure(torch, lambda: DTensor.from_local(
            torch.nn.functional.linear(x, weight), mesh, [Shard(1)], run_check=False),
            TOKENS * VOCAB // 2)
    path.write_text(json.dumps(measured))
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """Each rank's ``_measure`` of the parallel loss."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("loss_parallel")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-P", __file__, str(rank), str(port),
                               str(folder / f"rank{rank}.json")], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for rank in range(2)]
    try:
        errors = [proc.communicate(timeout=120)[1] for proc in procs]
    finally:
        for proc in procs:  # a rank left waiting for a failed peer
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    failed = [f"rank {r}: {e.decode()[-2000:]}" for r, (p, e) in
              enumerate(zip(procs, errors, strict=True)) if p.returncode]
    assert not failed, "\n".join(failed)
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(2)]


def test_the_loss_holds_what_its_working_set_says():
    """PyTorch's cross entropy on fp32 logits keeps the 4 bytes a logit fastpp counts as
    the last stage's activations, and holds ``LOSS_WORKING_BYTES["cross-entropy"][0]`` (8)
    more at the start of its backward, more than at its forward's peak (10)."""
    forward, kept, backward = _one_rank()
    alone = LOSS_WORKING_BYTES["cross-entropy"][0]
    assert kept == pytest.approx(KEPT, rel=1e-3)
    assert backward == pytest.approx(KEPT + alone, rel=1e-3)
    assert forward == pytest.approx(10.0, rel=1e-3) and forward < backward


def test_megatron_s_loss_holds_its_copy_beside_the_logits():
    """Megatron's in-place loss keeps its fp32 copy, 4 bytes a logit, and holds 2 more at
    its forward's peak (the half-precision logits it was cast from, alive in the caller) and
    at its backward's (the half-precision gradient cast from its own):
    ``LOSS_WORKING_BYTES["in-place"]`` (2, with or without tensor parallelism, whose
    all-reductions are of a number a token)."""
    torch = pytest.importorskip("torch")
    forward, kept, backward = _one_rank(_megatron_loss(torch), weight_grad=False)
    assert kept == pytest.approx(KEPT, rel=1e-3)
    for peak in (forward, backward):
        assert peak == pytest.approx(KEPT + LOSS_WORKING_BYTES["in-place"][0], rel=2e-3)
    assert LOSS_WORKING_BYTES["in-place"][0] == LOSS_WORKING_BYTES["in-place"][1]


def test_the_parallel_loss_holds_what_its_working_set_says(two_ranks):
    """torchtitan's ``loss_parallel`` (tensor parallelism) keeps the same 4 bytes a logit
    of its shard and holds ``LOSS_WORKING_BYTES["cross-entropy"][1]`` (12) more at the start
    of its backward, which builds its exp and sums apart (16 in all, 14 at its forward's
    peak), on each rank alike."""
    parallel = LOSS_WORKING_BYTES["cross-entropy"][1]
    for forward, kept, backward in two_ranks:
        assert kept == pytest.approx(KEPT, rel=1e-3)
        assert backward == pytest.approx(KEPT + parallel, rel=1e-3)
        assert forward == pytest.approx(14.0, rel=1e-3)


def test_plan_adds_the_loss_working_set_to_the_last_stage():
    """On the last stage's device a plan holds the loss's working set, ``8 s b v / (t cp)``
    bytes with torchtitan's loss (12 with ``t > 1``) and 2 with Megatron's, where it outlasts
    the context-parallel buffers (here without recomputation, whose working set would join
    the buffers); the step is shorter with PyTorch's loss, which moves 36 bytes a logit to
    the unfused Megatron loss's 52 (tests/test_loss_time.py)."""
    model = MODELS["llama3-8b"]
    keywords = dict(seq=8192, global_batch=16, tp=[1, 2], pp=[1, 2], cp=[1, 2], microbatch=1,
                    schedules=["1f1b"], recompute="none", zero=[3])
    rows = {loss: plan(dataclasses.replace(model, loss=loss), 8, **keywords)
            for loss in ("in-place", "cross-entropy")}
    both = rows["in-place"].merge(rows["cross-entropy"], on=["t", "p", "cp", "d"],
                                  suffixes=("", "_titan"))
    assert len(both) == len(rows["in-place"]) == 8
    more = both["peak_memory_titan"] - both["peak_memory"]
    logits = 8192 * 1 * model.vocab / (both["t"] * both["cp"])
    titan, megatron = (logits * both["t"].map({1: LOSS_WORKING_BYTES[loss][0],
                                               2: LOSS_WORKING_BYTES[loss][1]})
                       for loss in ("cross-entropy", "in-place"))
    # the working set replaces context parallelism's buffers, which a layer's backward holds
    buffers = np.array([float(cp_buffer_bytes(model, 8192, 1, t, cp, "all-gather"))
                        for t, cp in zip(both["t"], both["cp"], strict=True)])
    last = both["p"] == 1  # (with a pipeline the fullest device may be the first stage's)
    assert list(more[last]) == pytest.approx(
        list((np.maximum(titan, buffers) - np.maximum(megatron, buffers))[last]), rel=1e-9)
    assert (more >= 0).all() and (more[last] > 0).all()
    assert (both["step_time_titan"] < both["step_time"]).all()


def test_each_stage_s_working_set():
    """``ModelCosts.working``, per stage: a recomputed layer's working set with context
    parallelism's buffers on every stage, and on the loss's stage the loss's where larger:
    with Llama 3's 128,256 words the loss's (Megatron's 2 bytes a logit or PyTorch's 12),
    with 4,096 words the layer's."""
    from helpers import recomputed_bytes  # (not at the top: a rank runs this file alone)

    import fastpp

    schedule = fastpp.build_schedule("1f1b", 4, 8)
    for vocab, loss, cp, recompute in ((128256, "in-place", 1, "full"),
                                       (128256, "cross-entropy", 2, "full"),
                                       (128256, "in-place", 2, "none"),
                                       (4096, "in-place", 2, "full"),
                                       (4096, "cross-entropy", 1, "full")):
        model = dataclasses.replace(MODELS["llama3-8b"], vocab=vocab)
        costs = transformer_costs(dataclasses.replace(model, loss=loss), schedule, seq=8192,
                                  microbatch=1, tp=2, cp=cp, recompute=recompute)
        layer = recomputed_bytes(model, 8192, 1, 2, recompute, cp)
        buffers = float(cp_buffer_bytes(model, 8192, 1, 2, cp, "all-gather"))
        logits = 8192 / cp * model.vocab / 2
        expected = [layer + buffers] * 3 + [max(layer + buffers,
                                                LOSS_WORKING_BYTES[loss][1] * logits)]
        assert list(costs.working) == pytest.approx(expected, rel=1e-12)
        assert list(costs.recomputed) == pytest.approx([layer] * 4, rel=1e-12)
        # which side of the larger holds the last stage, as the cases say
        assert (expected[3] > layer + buffers) == (vocab > 4096), (vocab, loss)


def test_a_device_s_working_set_is_its_stages_largest():
    """``device_working_bytes``: per device the largest of its stages' working sets, as
    ``plan`` adds it; bad input named, not NumPy's error."""
    from fastpp import ScheduleError
    from fastpp.model import device_working_bytes

    assert device_working_bytes([5.0, 2.0, 7.0, 1.0], [0, 1, 1, 0], 3).tolist() == [5, 7, 0]
    for working, device, devices, message in (
            ([1.0], [3], 2, "device must hold integers in 0..1"),
            ([-1.0], [0], 1, "working must be finite and >= 0"),
            ([1.0, 2.0], [0], 1, "working and device must hold one value a stage"),
            ([1.0], [0], 0, "devices must be a positive integer")):
        with pytest.raises(ScheduleError, match=message):
            device_working_bytes(working, device, devices)


def test_a_pipeline_s_last_stage_keeps_its_logits():
    """In a pipeline the last stage's output, the bf16 logits, stays in the stage's forward
    cache until its microbatch's backward: ``LOSS_PIPELINE_KEPT`` (2 bytes a logit) more in
    the last stage's activations a microbatch, the other stages' unchanged, and nothing
    more without a pipeline."""
    import fastpp

    model = MODELS["llama3-8b"]
    for p in (1, 2, 4):
        schedule = fastpp.build_schedule("1f1b", p, 2 * p)
        acts = [transformer_costs(dataclasses.replace(model, loss=loss), schedule,
                                  seq=4096, microbatch=1, tp=2).arrays["act"]
                for loss in ("in-place", "cross-entropy")]
        more = (acts[1] - acts[0]).reshape(-1)
        kept = LOSS_PIPELINE_KEPT["cross-entropy"] * 4096 * model.vocab / 2 if p > 1 else 0.0
        assert list(more) == pytest.approx([0.0] * (more.size - 1) + [kept], abs=1e-3)


def test_flash_attn_s_loss_keeps_the_bf16_logits_alone():
    """The wiring of flash-attn's fused cross entropy (llm-foundry's), whose bytes are read
    from its code (its kernel is CUDA's alone: not measured here): it keeps the bf16 logits
    it reads, not an fp32 copy, so the last stage's activations hold 2 bytes a logit less
    than with Megatron's loss, with or without a pipeline (the stage's output is those
    logits), an MTP module's logits likewise, the other stages unchanged; its backward
    writes the gradient anew beside them, the last stage's working set."""
    import fastpp

    model = MODELS["llama3-8b"]
    logits = 4096 * model.vocab / 2
    for p in (1, 2):
        schedule = fastpp.build_schedule("1f1b", p, 2 * p)
        costs = [transformer_costs(dataclasses.replace(model, loss=loss), schedule, seq=4096,
                                   microbatch=1, tp=2) for loss in ("in-place", "flash-attn")]
        less = (costs[0].arrays["act"] - costs[1].arrays["act"]).reshape(-1)
        assert list(less) == pytest.approx([0.0] * (less.size - 1) + [2.0 * logits], abs=1e-3)
        assert costs[1].working[-1] == pytest.approx(
            max(costs[1].recomputed[-1], LOSS_WORKING_BYTES["flash-attn"][1] * logits))
        assert LOSS_WORKING_BYTES["flash-attn"][1] * logits > costs[1].recomputed[-1]
    mtp = MODELS["deepseek-v3"]  # one MTP module, with its own logits on the last stage
    schedule = fastpp.build_schedule("1f1b", 2, 4)
    acts = [transformer_costs(dataclasses.replace(mtp, loss=loss), schedule, seq=4096,
                              microbatch=1, tp=2).arrays["act"] for loss in ("in-place",
                                                                            "flash-attn")]
    less = (acts[0] - acts[1]).reshape(-1)
    assert list(less) == pytest.approx([0.0, 2.0 * 4096 * mtp.vocab / 2 * (1 + mtp.mtp_depth)])


if __name__ == "__main__":  # one rank of test_the_parallel_loss_holds_what_its_working_set_says
    _rank(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
