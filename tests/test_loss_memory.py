"""The loss's working set on the last stage (``Transformer.loss``,
``fastpp.model.stages.LOSS_WORKING_BYTES``) against what PyTorch holds.

torchtitan's loss is PyTorch's ``cross_entropy`` on ``logits.float()``. Run on CPU under a
dispatch mode that counts the bytes of the storages its ops make while a tensor holds them
(a storage once, however many views; freed with its last tensor), its forward holds 10 bytes
a logit at once (the bf16 logits, their fp32 copy, the log-softmax), keeps 4 (the
log-softmax, for the backward) once the logits are dropped, as torchtitan's training step
drops them, and holds 12 at the start of its backward (the kept log-softmax, the gradient
coming in, the gradient going out).
"""

import weakref

import pytest

from fastpp.model import MODELS, plan
from fastpp.model.stages import LOSS_WORKING_BYTES

KEPT = 4.0  # the fp32 logits a last stage keeps (stage_table's act: 4 s b v / t)


def _loss_bytes():
    """Bytes a logit of torchtitan's loss: at its forward's peak, kept after it, at its
    backward's peak."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.refs, self.size, self.now, self.peak = {}, {}, 0, 0

        def _drop(self, key):
            self.refs[key] -= 1
            if not self.refs[key]:
                self.now -= self.size.pop(key)
                del self.refs[key]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for o in torch.utils._pytree.tree_leaves(out):
                if isinstance(o, torch.Tensor) and o.numel():
                    key = o.untyped_storage().data_ptr()
                    if key not in self.refs:
                        if func.is_view:  # (a view of a storage made before: not the loss's)
                            continue
                        self.refs[key], self.size[key] = 0, o.untyped_storage().nbytes()
                        self.now += self.size[key]
                        self.peak = max(self.peak, self.now)
                    self.refs[key] += 1
                    weakref.finalize(o, self._drop, key)
            return out

    torch.manual_seed(0)
    tokens, hidden, vocab = 256, 512, 32000
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))
    live = Live()
    with live:
        pred = torch.nn.functional.linear(x, weight)  # the output layer's bf16 logits
        loss = torch.nn.functional.cross_entropy(pred.float(), labels)
        forward = live.peak
        del pred  # (torchtitan's train step drops them before the backward)
        kept = live.now
        live.peak = live.now
        loss.backward()
    logits = tokens * vocab
    return forward / logits, kept / logits, live.peak / logits


def test_the_loss_holds_what_its_working_set_says():
    """PyTorch's cross entropy on fp32 logits keeps the 4 bytes a logit fastpp counts as
    the last stage's activations, and holds ``LOSS_WORKING_BYTES["cross-entropy"]`` (8) more
    at the start of its backward, more than at its forward's peak; Megatron's in-place loss
    is priced as keeping its copy alone."""
    forward, kept, backward = _loss_bytes()
    assert kept == pytest.approx(KEPT, rel=1e-3)
    assert backward == pytest.approx(KEPT + LOSS_WORKING_BYTES["cross-entropy"], rel=1e-3)
    assert forward == pytest.approx(10.0, rel=1e-3) and forward < backward
    assert LOSS_WORKING_BYTES["in-place"] == 0.0


def test_plan_adds_the_loss_working_set_to_the_last_stage():
    """A plan of torchtitan's loss holds ``8 s b v / (t cp)`` bytes more on the device of
    the last stage (here without recomputation, whose working set would take the larger of
    the two); its step is unchanged."""
    import dataclasses

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
    last = both["p"] == 1  # (with a pipeline the fullest device may be the first stage's)
    assert list(more[last]) == pytest.approx(
        list(LOSS_WORKING_BYTES["cross-entropy"] * logits[last]), rel=1e-9)
    assert (more >= 0).all() and (more <= LOSS_WORKING_BYTES["cross-entropy"] * logits).all()
    assert list(both["step_time_titan"]) == list(both["step_time"])
