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

import pytest

from fastpp.model import MODELS, plan, transformer_costs
from fastpp.model.stages import LOSS_PIPELINE_KEPT, LOSS_WORKING_BYTES, cp_buffer_bytes

KEPT = 4.0  # the fp32 logits a last stage keeps (stage_table's act: 4 s b v / t)
TOKENS, HIDDEN, VOCAB = 256, 512, 32000


def _measure(torch, pred_of, logits: int) -> tuple[float, float, float]:
    """Bytes a logit held at the loss's forward peak, kept after it, and at its backward's
    peak, from the profiler's memory events (``pred_of()`` makes the logits)."""
    from torch.profiler import ProfilerActivity, profile

    labels = torch.randint(0, VOCAB, (TOKENS,))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        pred = pred_of()
        loss = torch.nn.functional.cross_entropy(pred.float(), labels)
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


def _one_rank():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    x = torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    return _measure(torch, lambda: torch.nn.functional.linear(x, weight), TOKENS * VOCAB)


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
    more at the start of its backward, more than at its forward's peak (10); Megatron's
    in-place loss is priced as keeping its copy alone."""
    forward, kept, backward = _one_rank()
    alone = LOSS_WORKING_BYTES["cross-entropy"][0]
    assert kept == pytest.approx(KEPT, rel=1e-3)
    assert backward == pytest.approx(KEPT + alone, rel=1e-3)
    assert forward == pytest.approx(10.0, rel=1e-3) and forward < backward
    assert LOSS_WORKING_BYTES["in-place"] == (0.0, 0.0)


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
    """A plan of torchtitan's loss holds ``8 s b v / (t cp)`` bytes more on the device of
    the last stage (12 with ``t > 1``), less the context-parallel buffers it outlasts (here
    without recomputation, whose working set would take the larger of the two); its step is
    unchanged."""
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
    working = logits * both["t"].map({1: LOSS_WORKING_BYTES["cross-entropy"][0],
                                      2: LOSS_WORKING_BYTES["cross-entropy"][1]})
    # the working set replaces context parallelism's buffers, which a layer's backward holds
    buffers = [float(cp_buffer_bytes(model, 8192, 1, t, cp, "all-gather"))
               for t, cp in zip(both["t"], both["cp"], strict=True)]
    last = both["p"] == 1  # (with a pipeline the fullest device may be the first stage's)
    assert list(more[last]) == pytest.approx(list((working - buffers)[last]), rel=1e-9)
    assert (more >= 0).all()
    assert list(both["step_time_titan"]) == list(both["step_time"])


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


if __name__ == "__main__":  # one rank of test_the_parallel_loss_holds_what_its_working_set_says
    _rank(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
