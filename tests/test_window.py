"""Sliding-window attention (``Transformer.window``): FlashAttention skips the tiles outside
the window, so a sliding layer's core costs the pairs within it; read from ``config.json`` as
transformers' classes place the sliding layers. Before, every such layer was priced as full
attention (Gemma 3 4B at 32K, 29 of its 34 layers sliding over 1,024 keys: its attention cores
at 5x the FLOPs they do)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import HARDWARE, RunConfig, Transformer, from_hf, transformer_costs
from fastpp.model.attention import attention_efficiency
from fastpp.model.compute import _attention
from fastpp.model.megatron import from_megatron, to_megatron

HF = Path(__file__).parent / "data" / "hf"
H100 = HARDWARE["H100-80GB"]
MODEL = Transformer(8, 4096, 32, kv_heads=8, swiglu=True, vocab=32000)


def test_a_sliding_core_by_hand():
    """One sliding layer at s = 4096, w = 1024: the queries see 1024 keys but the first 1024,
    which see their prefix: ``s w - w^2/2`` pairs of the causal ``s^2/2``, 7/16, at the
    kernel's speed over 1024 keys."""
    s, w, b, t = 4096, 1024, 2, 2
    slide = dataclasses.replace(MODEL, window=w)
    flops = b * s * s * MODEL.core_width() / t
    moved = 2 * s * b * (MODEL.heads * 128 * 2 + 2 * MODEL.kv) / t  # Q, O, K, V in bf16
    hw = H100.with_precision("bf16")
    eff = attention_efficiency(hw, "forward", w, 128, True)
    want = max(7 / 16 * flops / (hw.peak * eff), moved / hw.memory_bandwidth) + hw.op_overhead
    assert float(_attention(H100, slide, s, b, t)[0]) == pytest.approx(want, rel=1e-12)
    full = _attention(H100, MODEL, s, b, t)
    # a window no shorter than the sequence is full attention, to the bit
    assert _attention(H100, dataclasses.replace(MODEL, window=s), s, b, t) == full
    # half the layers sliding: the mean of the two
    half = dataclasses.replace(MODEL, window=w, window_layers=4)
    got, one = _attention(H100, half, s, b, t), _attention(H100, slide, s, b, t)
    assert float(got[1]) == pytest.approx(0.5 * float(full[1] + one[1]), rel=1e-12)
    # an unfused core computes every score and masks them: no saving
    unfused = dataclasses.replace(MODEL, flash_attention=False)
    assert _attention(H100, dataclasses.replace(unfused, window=w), s, b, t) == _attention(
        H100, unfused, s, b, t)


def test_the_step_shrinks_with_the_window_and_cp_stays_full():
    run = RunConfig(seq=32768, global_batch=8, t=8, p=1, d=1, recompute="none")
    slide = dataclasses.replace(MODEL, window=1024)
    full, short = (transformer_costs(m, hardware=H100, config=run) for m in (MODEL, slide))
    # the forward is shorter by the 8 layers' saving on the core alone (18% of it here)
    saving = 8 * (_attention(H100, MODEL, 32768, 1, 8)[0] - _attention(H100, slide, 32768, 1,
                                                                       8)[0])
    assert float(full.f[0] - short.f[0]) == pytest.approx(float(saving), rel=1e-9)
    assert float(saving) > 0.15 * float(full.f[0])
    # context parallelism: the ring is priced as full attention; the all-gather runs each
    # rank's queries against the whole K and V, windowed as without it
    for comm, windowed in (("ring", False), ("all-gather", True)):
        cp = run.replace(cp=2, d=1, t=4, cp_comm=comm)
        got, want = (transformer_costs(m, hardware=H100, config=cp).f for m in (slide, MODEL))
        assert (float(got[0]) < 0.9 * float(want[0])) == windowed
        assert windowed or got == pytest.approx(want, rel=1e-9)


def test_read_from_config_json():
    gemma = from_hf({"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size":
                     10240, "num_hidden_layers": 34, "sliding_window": 1024})
    assert (gemma.window, gemma.sliding_layers) == (1024, 34 - 34 // 6)  # 5 local : 1 global
    oss = json.loads((HF / "gpt-oss-20b.json").read_text())
    assert (from_hf(oss).window, from_hf(oss).sliding_layers) == (
        oss["sliding_window"], oss["layer_types"].count("sliding_attention"))
    mistral = from_hf(HF / "mistral-7b-v0.1.json")
    assert (mistral.window, mistral.sliding_layers) == (4096, 32)
    v03 = {**json.loads((HF / "mistral-7b-v0.1.json").read_text()), "sliding_window": None}
    assert from_hf(v03).sliding_layers == 0  # an explicit null: none
    qwen = json.loads((HF / "qwen2-7b.json").read_text())
    assert from_hf(qwen).sliding_layers == 0  # use_sliding_window false
    qwen.update(use_sliding_window=True, sliding_window=4096, max_window_layers=20)
    assert from_hf(qwen).sliding_layers == qwen["num_hidden_layers"] - 20
    assert from_hf(HF / "llama-3.1-8b.json").window == 0
    with pytest.raises(ScheduleError, match="'sliding_window' must be null or an integer"):
        from_hf({**json.loads((HF / "mistral-7b-v0.1.json").read_text()),
                 "sliding_window": "4096"})


def test_bad_windows():
    with pytest.raises(ScheduleError, match="window must be an integer >= 0"):
        Transformer(2, 64, 4, window=-1)
    with pytest.raises(ScheduleError, match="window_layers must be at most the layers 2"):
        Transformer(2, 64, 4, window=16, window_layers=3)
    with pytest.raises(ScheduleError, match="window_layers needs a window > 0"):
        Transformer(2, 64, 4, window_layers=2)  # no window: none slide (16th wave)


def test_megatron_windows():
    """--window-size left,right (Transformer Engine's: a causal query sees itself and left
    keys back, as Megatron-Bridge maps sliding_window to (sliding_window - 1, 0)) on every
    layer, or with --window-attn-skip-freq N every N-th layer full attention (Megatron's
    is_layer_window_attention: layer_number % N != 0 slides), or a pattern of 1 (slides) and
    0 (full)."""
    base = ("--num-layers 12 --hidden-size 512 --num-attention-heads 8 --seq-length 4096 "
            "--max-position-embeddings 4096 --vocab-size 32000 --micro-batch-size 1 "
            "--global-batch-size 8 ")
    model = from_megatron(base + "--window-size 127,0", gpus=1).model
    assert (model.window, model.sliding_layers) == (128, 12)  # gpt-oss's sliding_window 128
    model = from_megatron(base + "--window-size (1023,0) --window-attn-skip-freq 4",
                          gpus=1).model
    assert (model.window, model.sliding_layers) == (1024, 9)  # 4, 8, 12 full
    model = from_megatron(base + "--window-size 63,0 --window-attn-skip-freq "
                          "'([1]*3+[0])*3'", gpus=1).model
    assert (model.window, model.sliding_layers) == (64, 9)
    assert from_megatron(base + "--window-size -1,-1", gpus=1).model.sliding_layers == 0
    nemo = from_megatron({"num_layers": 12, "hidden_size": 512, "num_attention_heads": 8,
                          "seq_length": 4096, "vocab_size": 32000, "window_size": [255, 0],
                          "window_attn_skip_freq": 2}, gpus=1).model
    assert (nemo.window, nemo.sliding_layers) == (256, 6)
    # written back: the full layers first, as Qwen's max_window_layers has them
    windowed = Transformer(12, 512, 8, vocab=32000, window=512, window_layers=10)
    flags = to_megatron(RunConfig(seq=4096, global_batch=8), windowed)
    assert flags[flags.index("--window-size") + 1] == "511,0"
    assert flags[flags.index("--window-attn-skip-freq") + 1] == "([0]*2+[1]*10)"
    back = from_megatron(flags, gpus=1).model
    assert (back.window, back.sliding_layers) == (512, 10)
    for bad, message in (("--window-size 128", r"--window-size must be two integers "
                                               r"left,right >= 0, or -1,-1 for none "
                                               r"\(got '128'\)"),
                         ("--window-size -1,0", r"\(got '-1,0'\)"),
                         ("--window-size 128,0 --window-attn-skip-freq 0",
                          r"--window-attn-skip-freq must be >= 1 or a pattern \(got '0'\)"),
                         ("--window-size 128,0 --window-attn-skip-freq [1,0]",
                          r"--window-attn-skip-freq's pattern must give 0 or 1 for each of the "
                          r"12 layers \(got 2 values\)")):
        with pytest.raises(ScheduleError, match=message):
            from_megatron(base + bad, gpus=1)


def test_a_windowed_prediction_is_extrapolated():
    """No published table has a sliding window: its predictions said "± 3.0% expected error
    (validate's checks in its regime)"; they are extrapolated, naming it, once the window is
    shorter than the sequence."""
    from fastpp.model.errorbar import error_bar, regime

    mistral = from_hf(HF / "mistral-7b-v0.1.json")
    bar = error_bar(regime(mistral, H100, 32768, 8))
    assert bar.extrapolated == "arch dense with a sliding window"
    assert error_bar(regime(mistral, H100, 4096, 8)).extrapolated == ""


def test_model_flops_count_the_pairs_within_the_window():
    """MFU and TFLOP/s gave a windowed model credit for the full attention it no longer
    computes (gpt-oss-20b at 128K: 66.7% MFU, 44.0% counted as done)."""
    slide = dataclasses.replace(MODEL, window=1024, window_layers=4)
    s = 32768
    core = 2.0 * s * MODEL.core_width() * 3.0  # forward and backward, one full layer
    kept = 2 * 1024 / s - (1024 / s) ** 2
    assert MODEL.flops_per_token(s) - slide.flops_per_token(s) == pytest.approx(
        4 * core * (1 - kept), rel=1e-12)
    assert MODEL.megatron_flops_per_token(s) - slide.megatron_flops_per_token(s) == \
        pytest.approx(4 * 6.0 * s * MODEL.core_width() / 2.0 * (1 - kept), rel=1e-12)
    assert slide.flops_per_token(1024) == MODEL.flops_per_token(1024)


def test_chunked_attention_by_hand():
    """Llama 4's chunked attention (``Transformer.chunked``): the sequence cut into chunks of
    ``window`` tokens, causal within each. At s = 4096 and chunks of 1024, four causal cores
    of 1024: ``4 * 1024^2 / 4096^2`` = 1/4 of the pairs (a sliding window of 1024 keeps 7/16),
    at the kernel's speed over 1024 keys. A chunk left over counts its own square."""
    from fastpp.model.transformer import window_pairs

    assert float(window_pairs(1024, 4096, chunked=True)) == 0.25
    assert float(window_pairs(2048, 5000, chunked=True)) == pytest.approx(
        (2 * 2048**2 + 904**2) / 5000**2, rel=1e-15)
    assert float(window_pairs(8192, 8192, chunked=True)) == 1.0  # one chunk: full attention
    assert float(window_pairs(8192, 1000, chunked=True)) == 1.0
    # a query sees at most the chunk's keys, never more than a window's: fewer pairs, and as
    # many only where the sequence is one chunk
    s, w = np.meshgrid(np.arange(1, 3000, 7), np.arange(1, 3000, 11))
    chunked, sliding = window_pairs(w, s, chunked=True), window_pairs(w, s)
    assert np.all(chunked <= sliding + 1e-12)
    assert np.all((chunked == 1.0) == (w >= s))
    s, w, b, t = 4096, 1024, 2, 2
    chunk = dataclasses.replace(MODEL, window=w, chunked=True)
    flops = b * s * s * MODEL.core_width() / t
    moved = 2 * s * b * (MODEL.heads * 128 * 2 + 2 * MODEL.kv) / t
    hw = H100.with_precision("bf16")
    eff = attention_efficiency(hw, "forward", w, 128, True)
    want = max(flops / 4 / (hw.peak * eff), moved / hw.memory_bandwidth) + hw.op_overhead
    assert float(_attention(H100, chunk, s, b, t)[0]) == pytest.approx(want, rel=1e-12)
    # the model's FLOPs (MFU) count the pairs kept: four full layers' cores less 3/4 each
    half = dataclasses.replace(chunk, window_layers=4)
    assert MODEL.flops_per_token(s) - half.flops_per_token(s) == pytest.approx(
        4 * 6.0 * s * MODEL.core_width() * 0.75, rel=1e-12)
    with pytest.raises(ScheduleError, match=r"chunked attention needs a window > 0, its chunk "
                                            r"\(got chunked=True, window=0\)"):
        Transformer(2, 64, 4, chunked=True)
    with pytest.raises(ScheduleError,
                       match=r"chunked must be one of \[False, True\] \(got 'yes'\)"):
        Transformer(2, 64, 4, window=16, chunked="yes")


def test_llama4_chunks_its_rope_layers():
    """``Llama4TextConfig``: its RoPE layers (a 1 in ``no_rope_layers``; absent, all but every
    ``no_rope_layer_interval``-th, 4) attend in chunks of ``attention_chunk_size`` (8,192);
    ``layer_types`` names them ``chunked_attention``. At 8K a chunk is the whole sequence; at
    128K Scout's step is cheaper, and its prediction extrapolated, naming chunked attention.
    Megatron-LM has no flag for it: ``to_megatron`` says so rather than write a window."""
    from fastpp.model.errorbar import error_bar, regime

    scout = from_hf({"model_type": "llama4", "text_config": {}})
    assert (scout.window, scout.sliding_layers, scout.chunked) == (8192, 36, True)
    text = {"model_type": "llama4_text", "num_hidden_layers": 8}
    assert from_hf(text | {"no_rope_layers": [1, 1, 0, 0] * 2}).sliding_layers == 4
    assert from_hf(text | {"no_rope_layer_interval": 2}).sliding_layers == 4
    types = ["chunked_attention"] * 7 + ["full_attention"]
    toy = from_hf(text | {"layer_types": types, "attention_chunk_size": 1024})
    assert (toy.window, toy.sliding_layers, toy.chunked) == (1024, 7, True)
    assert from_hf(text | {"attention_chunk_size": None}).window == 0  # a null: none
    with pytest.raises(ScheduleError, match="'attention_chunk_size' must be null or an "
                                            "integer in 1..2\\*\\*31-1 \\(got 0\\)"):
        from_hf(text | {"attention_chunk_size": 0})
    full = dataclasses.replace(scout, window=0, window_layers=None, chunked=False)
    run = RunConfig(seq=131072, global_batch=16, t=8, p=4, d=1, recompute="full")
    short = run.replace(seq=8192, global_batch=256)
    cost = {(i, c): transformer_costs(m, hardware=H100, config=c).f.sum()
            for i, m in enumerate((scout, full)) for c in (run, short)}
    assert cost[0, short] == cost[1, short]
    # at 128K the forward is shorter by the 36 chunked layers' saving on the core alone
    saving = 36 * (_attention(H100, full, 131072, 1, 8)[0]
                   - _attention(H100, dataclasses.replace(full, window=8192, chunked=True),
                                131072, 1, 8)[0])
    assert float(cost[1, run] - cost[0, run]) == pytest.approx(float(saving), rel=1e-9)
    assert float(saving) > 0.3 * float(cost[1, run])
    assert error_bar(regime(scout, H100, 131072, 8)).extrapolated == (
        "arch moe with chunked attention")
    assert error_bar(regime(scout, H100, 8192, 8)).extrapolated != (
        "arch moe with chunked attention")
    with pytest.raises(ScheduleError, match="to_megatron cannot state chunked attention"):
        to_megatron(RunConfig(seq=8192, global_batch=8), scout)
    assert "--window-size" not in to_megatron(RunConfig(seq=8192, global_batch=8), full)
