"""Real costs: formulas against hand calculations, uneven stages against the reference."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from reference import assert_agrees, simulate_reference

from fastpp import Costs, ScheduleError, build_schedule, simulate
from fastpp.model import (
    HARDWARE,
    LINKS,
    Hardware,
    Link,
    Transformer,
    model_sweep,
    static_bytes,
    transformer_costs,
)

ROOT = Path(__file__).resolve().parents[1]
SMALL = Transformer(layers=4, hidden=8, heads=2, seq=16, microbatch=2, vocab=10)
SLOW = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, efficiency=0.5)  # 5e5 FLOP/s
WIRE = Link("toy", bandwidth=1000.0, latency=0.01)


def test_layer_formulas_by_hand():
    # s*b*h = 16*2*8 = 256; 24h = 192, 4s = 64, 8s = 128
    assert SMALL.layer_flops() == (256 * 256, 256 * 320, 256 * 192)
    # M_B = s*b*(34h + 5as) = 32*(272 + 160), M_W = 32*s*b*h
    assert SMALL.layer_activation_bytes() == (32 * 432, 32 * 256)
    assert SMALL.layer_params() == 12 * 64 + 13 * 8
    assert SMALL.message_bytes() == 256 * 2
    flash = Transformer(layers=4, hidden=8, heads=2, seq=16, microbatch=2, flash_attention=True)
    assert flash.layer_activation_bytes() == (32 * 272, 32 * 256)


def test_stage_costs_by_hand():
    sched = build_schedule("1f1b", 2, 4)  # two layers per stage
    c = transformer_costs(SMALL, sched, SLOW, WIRE).per_stage(sched)
    out = 2 * 16 * 2 * 8 * 10  # 2sbhv FLOPs of the output layer, on the last stage
    np.testing.assert_allclose(c.tf, [2 * 65536 / 5e5, (2 * 65536 + out) / 5e5])
    np.testing.assert_allclose(c.tb, [2 * (81920 + 49152) / 5e5,
                                      (2 * (81920 + 49152) + 2 * out) / 5e5])
    np.testing.assert_allclose(c.tw, [2 * 49152 / 5e5, (2 * 49152 + out) / 5e5])
    np.testing.assert_allclose(c.comm, 0.01 + 512 / 1000)  # latency + bytes / bandwidth
    # activations: layers * M_B, plus the embedding's 2sbh and the fp32 logits' 4sbv bytes
    np.testing.assert_allclose(c.unit, [2 * 13824 + 2 * 256, 2 * 13824 + 4 * 16 * 2 * 10])
    np.testing.assert_allclose(c.gamma, [2 * 8192 / (2 * 13824 + 512),
                                         2 * 8192 / (2 * 13824 + 1280)])
    # parameters: 2 layers plus the embedding (first) or the output layer (last), 16 B each
    assert static_bytes(SMALL, sched).tolist() == [(2 * 872 + 80) * 16] * 2
    assert static_bytes(SMALL, sched, zero_shards=4).tolist() == [(2 * 872 + 80) * 7.0] * 2


def test_chunk_split():
    assert Transformer(layers=10, hidden=8, heads=2, seq=4).chunk_layers(4).tolist() == \
        [2, 3, 3, 2]  # the remainder goes to the middle chunks
    with pytest.raises(ScheduleError, match=r"split must give 2 chunks"):
        Transformer(layers=4, hidden=8, heads=2, seq=4, split=(1, 1, 2)).chunk_layers(2)
    with pytest.raises(ScheduleError, match=r"layers must be at least the model chunks 8"):
        SMALL.chunk_layers(8)
    with pytest.raises(ScheduleError, match=r"hidden must be a positive integer"):
        Transformer(layers=4, hidden=0, heads=2, seq=4)


@pytest.mark.parametrize("name, p, n, m", [("1f1b", 2, 4, 1), ("interleaved-1f1b", 2, 4, 2),
                                           ("zbv", 2, 4, 2), ("dualpipe", 2, 4, 1),
                                           ("chimera", 2, 2, 1)])
def test_uneven_stages_agree_with_the_reference(name, p, n, m):
    sched = build_schedule(name, p, n, m)
    costs = transformer_costs(SMALL, sched, SLOW, WIRE)
    res = simulate(sched, costs)
    assert_agrees(res, simulate_reference(sched, costs))
    # a larger vocabulary loads the last stage of each route: the iteration gets longer
    big = Transformer(layers=4, hidden=8, heads=2, seq=16, microbatch=2, vocab=2000)
    assert simulate(sched, transformer_costs(big, sched, SLOW, WIRE)).makespan > res.makespan


def test_bandwidth_adds_bytes_over_the_link():
    sched = build_schedule("1f1b", 4, 8)
    a = simulate(sched, Costs(1.0, 2.0, comm=0.1, bandwidth=4.0, message_bytes=2.0))
    b = simulate(sched, Costs(1.0, 2.0, comm=0.6))
    assert a.makespan == b.makespan and a.serial_time == b.serial_time
    assert a.serial_time == pytest.approx(8 * 4 * 3 + 2 * 8 * 3 * 0.6)  # ops and hand-offs
    assert_agrees(a, simulate_reference(sched, a.costs))


def test_capacity_filters_with_the_reason():
    df = model_sweep(SMALL, SLOW, WIRE, p=[2, 4], n=[4, 8], m=[1, 2],
                     schedules=["gpipe", "1f1b", "v-min"], capacity=1.5e5)
    assert set(df["schedule"]) == {"gpipe", "1f1b", "v-min"}
    assert df["fits"].any() and (~df["fits"]).any()
    bad = df[~df["fits"]]
    assert bad["reason"].str.match(r"device \d+ needs [\d.]+ GB > capacity 0 GB").all()
    assert (bad["total_gb"] * 1e9 > 1.5e5).all()
    assert (df[df["fits"]]["total_gb"] * 1e9 <= 1.5e5).all()
    fits = df[df["fits"]]
    assert fits["tokens_per_s"].is_monotonic_decreasing
    assert df.index[df["fits"]].max() < df.index[~df["fits"]].min()  # what fits comes first
    gpipe = df[(df["schedule"] == "gpipe") & (df["p"] == 2) & (df["n"] == 8)].iloc[0]
    one = df[(df["schedule"] == "1f1b") & (df["p"] == 2) & (df["n"] == 8)].iloc[0]
    assert gpipe["activation_gb"] > one["activation_gb"]


def test_presets():
    assert HARDWARE["H100-80GB"].memory_bytes == 80e9 and HARDWARE["H200-141GB"].peak_flops > 0
    assert LINKS["IB-400G"].bandwidth == 50e9


def test_llama70b_script():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "llama70b.py")],
                         capture_output=True, text=True, check=True)
    assert "LLaMA-2-70B, seq 4096" in run.stdout and "fit in 80 GB, fastest first" in run.stdout
    assert "closest miss" in run.stdout
