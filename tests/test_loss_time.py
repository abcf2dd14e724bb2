"""The loss's time (``fastpp.model.compute.LOSS_BYTES``, by ``Transformer.loss``) against the
bytes its ops move as PyTorch dispatches them.

Each loss runs on bf16 logits on CPU under a dispatch mode that adds up, op by op, the bytes
each reads and writes (its inputs as stored, its outputs; an op that reads or writes only
each token's target element, a gather or a scatter, counts those alone). A GPU runs each op
as a kernel, one pass over what it touches, which is what ``LOSS_BYTES`` counts: Megatron's
unfused vocabulary-parallel loss ("in-place"), written here to run the ops its code runs
(``tensor_parallel.cross_entropy``, as ``tests/test_loss_memory.py`` writes it for its
memory), and PyTorch's own ``cross_entropy`` on ``logits.float()`` ("cross-entropy",
torchtitan's). Megatron's fused loss ("fused") compiles its parts with ``torch.compile``,
whose kernels the dispatcher does not show, and flash-attn's fused loss ("flash-attn",
llm-foundry's) is one CUDA kernel each way: their counts are read from their code
(``compute.LOSS_BYTES``' comment).
"""

import dataclasses
from pathlib import Path

import pytest
from test_loss_memory import _megatron_loss

from fastpp.model import HARDWARE, MODELS
from fastpp.model.compute import LOSS_BYTES, METRIC_KERNELS, head_times, metric_time

TOKENS, VOCAB = 64, 32000


def _moved(loss_of) -> tuple[float, float]:
    """Bytes a logit ``loss_of(logits, labels)`` moves, forward and backward."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    logits = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, VOCAB, (TOKENS,))
    Count = _counter(torch)
    forward, backward = Count(), Count()
    with forward:
        loss = loss_of(logits, labels)
    with backward:
        loss.backward()
    return forward.bytes / (TOKENS * VOCAB), backward.bytes / (TOKENS * VOCAB)


def _counter(torch):
    """A dispatch mode adding up the bytes (``bytes``) and the ops (``ops``, views left out)
    run under it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    # ops that touch each token's target element alone: their full-size inputs count nothing
    touching = {aten.index.Tensor, aten.gather.default, aten.nll_loss_forward.default}

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes = self.ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.is_view:
                return out
            inputs = [x for x in torch.utils._pytree.tree_leaves((args, kwargs))
                      if isinstance(x, torch.Tensor)]
            outputs = [x for x in torch.utils._pytree.tree_leaves(out)
                       if isinstance(x, torch.Tensor)]
            if func in touching:
                inputs = [x for x in inputs if x.numel() < TOKENS * VOCAB]
            elif func == aten.index_put_.default:  # the target elements read and written
                inputs, outputs = list(args[1]) + [args[2]], [args[2]]
            elif func == aten.nll_loss_backward.default:  # a zeroed gradient, then a scatter
                inputs = [x for x in inputs if x.numel() < TOKENS * VOCAB]
            self.bytes += sum(x.numel() * x.element_size() for x in inputs + outputs)
            self.ops += 1
            return out

    return Count


def test_megatron_s_loss_moves_what_its_count_says():
    """Megatron's unfused loss: the fp32 copy (2 read, 4 written), the max (4), the max
    subtracted, exp and the division by the sum in place (8 each), the sum (4): 38 bytes a
    logit; backward the gradient scaled in place (8) and cast back to bf16 (6): 14."""
    torch = pytest.importorskip("torch")
    assert _moved(_megatron_loss(torch)) == pytest.approx(LOSS_BYTES["in-place"], abs=0.02)


def test_pytorch_s_cross_entropy_moves_what_its_count_says():
    """torchtitan's loss: the fp32 copy (6) and log_softmax (8): 14; backward nll_loss's
    zeroed gradient (4), log_softmax's gradient (12) and the cast (6): 22."""
    torch = pytest.importorskip("torch")

    def loss_of(logits, labels):
        return torch.nn.functional.cross_entropy(logits.float(), labels)

    assert _moved(loss_of) == pytest.approx(LOSS_BYTES["cross-entropy"], abs=0.02)


def test_the_last_stage_takes_its_loss_s_time():
    """The output layer's forward and input-grad backward carry the loss's bytes at the
    memory's rate, by ``Transformer.loss``: PyTorch's cross entropy against Megatron's
    unfused loss by the difference of the bytes their ops move (measured above: it moves 24
    fewer a logit forward and 8 more backward); the fused loss fewer than the unfused one."""
    torch = pytest.importorskip("torch")
    a100, model = HARDWARE["A100-80GB"], MODELS["llama3-8b"]
    logits = 4096 * 2 * model.vocab / 2
    times = {loss: head_times(dataclasses.replace(model, loss=loss), a100, 4096, 2, 2, True)
             for loss in LOSS_BYTES}
    megatron = _moved(_megatron_loss(torch))
    pytorch = _moved(lambda logits, labels: torch.nn.functional.cross_entropy(logits.float(),
                                                                              labels))
    for k, key in enumerate(("head_forward", "head_input_grad")):
        more = (pytorch[k] - megatron[k]) * logits / a100.memory_bandwidth
        assert float(times["cross-entropy"][key] - times["in-place"][key]) == pytest.approx(
            more, rel=1e-3)
        assert float(times["fused"][key]) < float(times["in-place"][key])
        # flash-attn's one kernel a pass (4 bytes a logit each way) is the lightest
        others = [float(times[loss][key]) for loss in LOSS_BYTES if loss != "flash-attn"]
        assert float(times["flash-attn"][key]) < min(others)


def test_a_training_metric_moves_what_its_count_says():
    """Composer's train metric (``LanguageCrossEntropy.update``, composer/metrics/nlp.py at
    v0.13.3 and v0.16.4; ``LanguagePerplexity`` runs the same) on a microbatch's bf16 logits,
    outside autograd: CUDA's autocast runs ``log_softmax`` in fp32 (PyTorch's own list of its
    fp32 ops holds it), so ``cross_entropy`` reads an fp32 copy (CUDA's log_softmax reads
    fp16 input as it converts, but not bf16, the runs' type: the copy is made). 14 bytes a
    logit, as
    PyTorch's cross entropy forward (``LOSS_BYTES["cross-entropy"]``), in ``METRIC_KERNELS``
    ops; ``metric_time`` prices them at the memory's rate."""
    torch = pytest.importorskip("torch")
    # (read, not imported: the module needs PyTorch's test-only dependencies)
    lists = (Path(torch.__file__).parent / "testing" / "_internal" / "autocast_test_lists.py")
    cuda = lists.read_text().split("class AutocastCPUTestLists")[0]
    fp32 = cuda.split("self.torch_fp32 = [")[1].split("\n        ]")[0]
    assert '("log_softmax",' in fp32
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, reduction="sum")
    sum_loss, total_items = torch.tensor(0.0), torch.tensor(0)
    logits = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16)
    target = torch.randint(0, VOCAB, (TOKENS,))
    count = _counter(torch)()
    with torch.no_grad(), count:
        losses = loss_fn(logits.float(), target.view(-1))  # (the autocast cast, on CUDA)
        total_items += (target != -100).sum()
        sum_loss += losses
    assert count.bytes / (TOKENS * VOCAB) == pytest.approx(LOSS_BYTES["cross-entropy"][0],
                                                           abs=0.02)
    assert count.ops == METRIC_KERNELS
    a100, model = HARDWARE["A100-80GB"], MODELS["llama3-8b"]
    logits = 4096 * 2 * model.vocab / 2
    assert float(metric_time(model, a100, 4096, 2, 2)) == pytest.approx(
        14.0 * logits / a100.memory_bandwidth + METRIC_KERNELS * a100.op_overhead)
