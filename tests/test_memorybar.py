"""The memory error bar: fastpp's activation bytes against what PyTorch saves.

``fastpp.model.memorybar`` builds the layer the formula describes in PyTorch and counts the
storages autograd keeps; the tests given the ``torch`` fixture run it for real (no mock; they
skip without torch) and hold the formula to it. The rest read the shipped table.
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import recomputed_bytes

from fastpp import ScheduleError, build_schedule, simulate
from fastpp.model import MODELS, RunConfig, Transformer, device_bytes, plan, transformer_costs
from fastpp.model.explain import explain
from fastpp.model.memorybar import (
    FACTS,
    TABLE,
    activation_error,
    formula_bytes,
    measure,
    memory_table,
    saved_bytes,
)
from fastpp.model.stages import loss_bytes


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def measured(torch):
    return measure()


def keeps_qkv_output(r) -> bool:
    """Whether the layer keeps V as a view of the fused QKV output beside new Q and K."""
    model = r["model"]
    copied = 1 < model.kv_heads < model.heads or r["rope"]
    return (r["recompute"] == "selective" and copied) or (
        r["recompute"] == "none" and r["rope"] and not model.flash_attention
        and model.kv_heads == model.heads)


def test_the_shipped_memory_bars_are_a_fresh_measurement(measured):
    """memorybars.json is memory_table(measure()): a change to the activation formula must
    rewrite it (python scripts/memorybars.py --write)."""
    shipped = json.loads(TABLE.read_text())
    assert shipped["facts"] == list(FACTS)
    assert shipped["regimes"] == memory_table(measured)
    assert {len(FACTS)} == {len(g) - 4 for g in shipped["regimes"]}


def test_full_recomputation_keeps_exactly_the_layers_input(measured):
    full = [r for r in measured if r["recompute"] == "full"]
    assert full and all(r["measured"] == r["formula"] for r in full)


def test_the_formula_is_what_pytorch_keeps_where_the_kernels_keep_what_it_counts(measured):
    """Korthikanti's count within 1% (the norms' per-token statistics and the flash kernel's
    log-sum-exp are the rest; 2.5% with RoPE, whose angles weigh more at these small widths)
    wherever the layer keeps what the formula counts: every MLP (GeLU, SwiGLU as separate ops
    or fused), and V not kept as a view of the fused QKV output beside new Q and K (selective
    recomputation over a copied or rotated Q, and the eager core over rotated multi-head Q
    and K, keep that whole output)."""
    plain = [r for r in measured if not keeps_qkv_output(r)]
    assert len(plain) >= 60 and {r["model"].flash_attention for r in plain} == {True, False}
    for r in plain:
        assert abs(r["error"]) < (0.025 if r["rope"] else 0.01), r
    kept = [r for r in measured if keeps_qkv_output(r)]
    assert kept and all(-0.15 < r["error"] < -0.05 for r in kept)


def test_the_eager_core_keeps_k_and_v_repeated_to_every_head(torch):
    """Grouped-query attention without FlashAttention: Megatron's unfused core (as Hugging
    Face's and TorchTitan's) repeats K and V to the ``a`` heads and keeps the copies."""
    model = Transformer(layers=1, hidden=256, heads=8, kv_heads=2, ffn=1024,
                        flash_attention=False)
    measured = saved_bytes(model, 32, 2, "none", "rmsnorm")
    assert formula_bytes(model, 32, 2, "none") == pytest.approx(measured, rel=0.01)


@pytest.mark.parametrize("fused", [True, False])
def test_swiglu_is_counted_as_its_kernels_keep_it(torch, fused):
    """Megatron's ``bias_swiglu`` (and Transformer Engine's) keeps only its input, the gate and
    up products: 6F bytes a token with the product fc2 keeps; TorchTitan's separate SiLU and
    product keep the SiLU's output too: 8F. The formula follows ``fused_swiglu`` within the
    kernels' 1% (counting 8F for the fused op was 12-18% high)."""
    for h, a, g, s, b in ((128, 4, 4, 64, 2), (256, 8, 8, 32, 1)):
        model = Transformer(layers=1, hidden=h, heads=a, kv_heads=g, ffn=8 * h // 3,
                            swiglu=True, fused_swiglu=fused)
        for recompute in ("none", "selective"):
            measured = saved_bytes(model, s, b, recompute, "rmsnorm")
            assert formula_bytes(model, s, b, recompute) == pytest.approx(measured, rel=0.01)
    # the regimes' bars: the fused one as tight as GeLU's (the same kernels' rest)
    bars = {(g["attention"], g["mlp"], g["recompute"]): g["rms"]
            for g in json.loads(TABLE.read_text())["regimes"]}
    assert bars["flash", "fused-swiglu", "none"] < 0.02


def test_plan_rows_carry_the_activations_bar_times_their_share():
    """The stored activations carry their regime's bar; a recomputed layer's working set
    (full recomputation: one layer's bytes without recomputation, its input aside) the
    no-recomputation regime's; the checkpoints themselves are exact."""
    df = plan("llama2-7b", 16, seq=4096, global_batch=64, tp=[2], pp=[2],
              microbatch=1, recompute=["none", "full"], schedules=["1f1b"], workers=1)
    llama = Transformer(32, 4096, 32, ffn=11008, swiglu=True)
    none = activation_error(llama, "none")
    for r in df.itertuples():
        working = recomputed_bytes(llama, 4096, 1, 2, r.recompute)
        assert r.expected_memory_error == pytest.approx(
            (activation_error(llama, r.recompute) * (r.activation_bytes - working)
             + none * working) / r.peak_memory, rel=1e-12)
    full = df.loc[df["recompute"] == "full", "expected_memory_error"]
    assert len(full) and (full > 0).all()
    # the loss's working set is measured, not modelled: no bar (one stage: its device's)
    alone = plan("llama2-7b", 16, seq=4096, global_batch=64, tp=[2], pp=[1], microbatch=1,
                 recompute=["none"], schedules=["1f1b"], workers=1).iloc[0]
    loss = float(loss_bytes(MODELS["llama2-7b"], 4096, 2))
    assert alone.expected_memory_error == pytest.approx(
        none * (alone.activation_bytes - loss) / alone.peak_memory, rel=1e-12)
    assert (df.loc[df["recompute"] == "none", "expected_memory_error"] > 0.001).all()
    moe = plan("mixtral-8x7b", 64, seq=4096, global_batch=64, tp=[2], pp=[4], ep=[8],
               microbatch=1, recompute=["full"], schedules=["1f1b"], workers=1)
    assert moe["expected_memory_error"].isna().all()  # experts' activations: not measured
    assert np.isnan(activation_error(MODELS["mixtral-8x7b"], "none"))  # nor its own bar


def test_explain_shows_the_memory_error_bar(capsys):
    from fastpp.__main__ import main

    hf = str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    assert main(["explain", "--hf", hf, "--gpus", "8", "--tp", "2", "--pp", "2",
                 "--global-batch", "16", "--seq", "4096", "--recompute", "none",
                 "--neighbours", "0", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    memory = out[out.index("memory per GPU"):]
    total = memory[memory.index("total"):]
    assert "% expected error of the count (activations measured against PyTorch" in total
    assert "not covered: workspace, fragmentation, communication buffers" in total
    assert "reserved 6-28% more" in total


def test_weights_gradients_and_optimizer_states_are_a_torch_models_bytes(torch):
    """The parts counted, not modelled: a PyTorch model's parameters times bf16 weights,
    Adam's fp32 master copy and two moments, and the gradients as Megatron holds them by
    default under ``--bf16``, an fp32 ``main_grad`` buffer per parameter
    (``accumulate_allreduce_grads_in_fp32``; 18 bytes a parameter in its
    ``theoretical_memory_usage.py``), or with ``reduce_bytes=2`` as the bf16 ``.grad``
    PyTorch keeps (Megatron's ``--grad-reduce-in-bf16``). fastpp leaves out the final norm
    (``h`` parameters), so the counts differ by exactly that."""
    h, a, g, ffn, v, layers = 64, 4, 2, 160, 300, 2
    model = Transformer(layers, h, a, kv_heads=g, ffn=ffn, vocab=v, swiglu=True)
    nn = torch.nn
    d = h // a
    blocks = [nn.ModuleList([nn.RMSNorm(h), nn.Linear(h, (a + 2 * g) * d, bias=False),
                             nn.Linear(h, h, bias=False), nn.RMSNorm(h),
                             nn.Linear(h, 2 * ffn, bias=False), nn.Linear(ffn, h, bias=False)])
              for _ in range(layers)]
    net = nn.ModuleList([nn.Embedding(v, h), *blocks, nn.RMSNorm(h), nn.Linear(h, v, bias=False)])
    master = [p.detach().float().requires_grad_() for p in net.parameters()]
    for p in master:
        p.grad = torch.zeros_like(p)
    adam = torch.optim.Adam(master)
    adam.step()
    moments = sum(t.numel() * t.element_size() for s in adam.state.values()
                  for t in s.values() if t.dim())
    count = sum(p.numel() for p in net.parameters())
    kept = sum(p.numel() * p.element_size() for p in master) + moments  # fp32 copy, moments
    assert kept == 12 * count
    net.to(torch.bfloat16)  # a bf16 forward and backward: the .grad PyTorch keeps
    x = net[0](torch.arange(8)[None])
    for block in blocks:
        x = x + block[2](block[1](block[0](x))[..., :h])
        x = x + block[5](block[4](block[3](x))[..., :ffn])
    net[-1](net[-2](x)).float().square().sum().backward()
    bf16 = sum(p.grad.numel() * p.grad.element_size() for p in net.parameters())
    # Megatron's DDP buffer: one fp32 main_grad per parameter under --bf16
    main_grad = sum(torch.zeros(p.shape, dtype=torch.float32).nbytes for p in net.parameters())
    assert bf16 == 2 * count and main_grad == 4 * count
    schedule = build_schedule("1f1b", 1, 1)
    got = {k: float(x[0]) for k, x in device_bytes(model, schedule, zero=0).items()}
    assert got == {"parameter_bytes": 2 * (count - h), "gradient_bytes": main_grad - 4 * h,
                   "optimizer_bytes": 12 * (count - h)}
    half = device_bytes(model, schedule, zero=0, reduce_bytes=2)["gradient_bytes"][0]
    assert half == bf16 - 2 * h
    # ZeRO-1 splits the optimizer states over the data-parallel replicas, ZeRO-2 the
    # gradients too
    for zero, split in ((1, ("optimizer_bytes",)), (2, ("optimizer_bytes", "gradient_bytes"))):
        part = device_bytes(model, schedule, dp=4, zero=zero)
        for k, x in part.items():
            assert float(x[0]) == pytest.approx(got[k] / (4 if k in split else 1), rel=1e-12)


def test_a_recomputed_layer_is_alive_during_its_backward():
    """Full recomputation re-runs a layer's forward inside its backward: beside the
    checkpoints, one layer's bytes without recomputation are alive (the review's llama2-7b,
    t = 2, pp = 4: 0.54 GB of checkpoints, the first stage's 8 layers' inputs for its 4
    microbatches in flight, and 0.27 GB for one layer, its input among them).
    By hand, with sequence parallelism over t = 2: (16h + 6F) s b / t bytes without
    recomputation (Korthikanti's count: norms' and matrices' inputs 8h, Q K V and the
    projection's input 8h; Megatron's fused SwiGLU keeps its input, 6F), less the 2h s b / t
    input."""
    df = plan("llama2-7b", 32, seq=4096, global_batch=64, tp=[2], pp=[4], microbatch=1,
              recompute=["none", "full"], schedules=["1f1b"], workers=1)
    full = df[df["recompute"] == "full"].iloc[0]
    h, F, sb, t = 4096, 11008, 4096, 2
    layer = (16 * h + 6 * F) * sb / t
    assert layer / 1e9 == pytest.approx(0.27, abs=0.01)
    sched = build_schedule("1f1b", 4, int(full.n))
    stored = simulate(sched, transformer_costs("llama2-7b", sched, seq=4096, tp=2, dp=4,
                                               recompute="full")).peak_activations.max()
    assert stored == pytest.approx(8 * 4 * 2 * h * sb / t, rel=1e-12)  # 0.54 GB
    assert full.activation_bytes == pytest.approx(stored + layer - 2 * h * sb / t, rel=1e-9)


def test_selective_recomputation_holds_the_scores_of_the_core_it_reruns():
    """Without FlashAttention the re-run core keeps its scores (5as bytes a token with
    dropout) through its backward; with it, nothing more."""
    eager = Transformer(8, 1024, 16, vocab=1000, dropout=True, flash_attention=False,
                        name="eager")
    rows = {}
    for model in (eager, dataclasses.replace(eager, flash_attention=True, name="flash")):
        df = plan(model, 8, seq=2048, global_batch=16, tp=[2], pp=[2], microbatch=1,
                  recompute=["selective"], schedules=["1f1b"], workers=1)
        sched = build_schedule("1f1b", 2, int(df.n.iloc[0]))
        stored = simulate(sched, transformer_costs(model, sched, seq=2048, tp=2, dp=2,
                                                   recompute="selective")).peak_activations
        rows[model.name] = df.activation_bytes.iloc[0] - stored.max()
    assert rows["eager"] == pytest.approx(5 * 16 * 2048 * 2048 / 2, rel=1e-9)
    assert rows["flash"] == 0


def test_runs_the_bar_does_not_measure_get_none():
    """Context parallelism's buffers, offloading and recompute modules other than core_attn
    are not measured: NaN, and explain says what is not."""
    kw = dict(seq=4096, global_batch=64, tp=[2], pp=[2], microbatch=1, schedules=["1f1b"],
              workers=1)
    assert plan("llama2-7b", 16, **kw, recompute=["selective"])[
        "expected_memory_error"].notna().all()
    for extra in (dict(cp=[2]), dict(offload_modules=["attn_norm"]),
                  dict(recompute_modules=["core_attn", "mlp"])):
        df = plan("llama2-7b", 32 if "cp" in extra else 16, **kw, recompute=["selective"],
                  **extra)
        assert df["expected_memory_error"].isna().all(), extra
    run = RunConfig(seq=4096, global_batch=64, t=2, p=2, cp=2, d=2, microbatch=1)
    text = explain("llama2-7b", run, neighbours=0, workers=1).table()
    assert "not measured: context parallelism's exchange buffers (cp > 1)" in text


def test_bad_input_is_a_schedule_error_naming_the_parameter():
    assert activation_error("llama2-7b", "none") == activation_error(MODELS["llama2-7b"],
                                                                     "none")
    gelu = Transformer(1, 128, 4, name="gelu")
    for call, name in ((lambda: activation_error(None, "none"), "model"),
                       (lambda: activation_error("no-such-model", "none"), "model"),
                       (lambda: saved_bytes(gelu, 0, 1), "seq"),
                       (lambda: saved_bytes(gelu, 64, -1), "microbatch"),
                       (lambda: saved_bytes(gelu, 64, 1, rope="yes"), "rope"),
                       (lambda: formula_bytes(gelu, 0, 1, "none"), "seq")):
        with pytest.raises(ScheduleError, match=name):
            call()


@pytest.mark.parametrize("dropout", [False, True])
def test_the_embedding_keeps_only_its_dropout_mask(torch, dropout):
    """What autograd saves for an embedding (and its dropout) feeding the first layer's norm,
    beyond what the norm saves of an input that is no embedding's: the token ids and, with
    dropout, its mask (an element a value; CUDA keeps it in a byte, the CPU kernel in the
    input's dtype). The embedding's output is the norm's input, kept once: fastpp had stored
    it twice (2sbh more a microbatch on the first stage)."""
    import numpy as np

    from fastpp.model import HARDWARE, RunGrid, stage_table

    s, b, h, v = 64, 2, 128, 1000
    table = torch.nn.Embedding(v, h)
    norm = torch.nn.LayerNorm(h)
    ids = torch.randint(0, v, (s, b))

    def saved(embedded: bool) -> int:
        storages = {}

        def pack(x):
            storages[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
            return x

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            if embedded:
                x = table(ids)
                if dropout:
                    x = torch.nn.functional.dropout(x, 0.1, training=True)
            else:
                x = torch.randn(s, b, h, requires_grad=True)
            norm(x).sum()
        return sum(storages.values())

    # the ids (8 bytes a token) and, with dropout, its mask (fp32 here); never the output
    mask = s * b * h * 4 if dropout else 0
    assert saved(True) - saved(False) == ids.nelement() * 8 + mask
    model = Transformer(layers=2, hidden=h, heads=4, ffn=4 * h, vocab=v, dropout=dropout)
    grid = RunGrid(seq=s, microbatch=np.array([b]), t=np.array([1]), d=np.array([1]),
                   p=np.array([2]), m=np.array([1]), recompute=np.array([0]))
    act = stage_table(model, HARDWARE["H100-80GB"], grid, config=np.zeros(2, np.int64),
                      layers=np.array([1.0, 1.0]), embedding=np.array([True, False]),
                      loss=np.array([False, False]))["act"]
    # a one-byte mask an element (CUDA's) with dropout, nothing without
    assert act[0] - act[1] == (s * b * h if dropout else 0)
