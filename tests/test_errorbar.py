"""fastpp.model.errorbar: the error bar of a prediction from validate()'s residuals by regime.

The shipped table against a fresh validate() is checked in test_fidelity.py (it needs the
published data); here the lookup rules on hand-made groups, and that plan rows and
transformer_costs carry the bar of their regime."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

import fastpp
from fastpp.model import (
    HARDWARE,
    MODELS,
    ModelCosts,
    Transformer,
    errorbar,
    plan,
    transformer_costs,
)
from fastpp.model.errorbar import (
    MIN_ROWS,
    Regime,
    coverage,
    error_bar,
    regime,
    regime_table,
    step_error,
)

H100 = Regime("H100", "3-30B", "<=8K", "dense", "in node")


def group(where, rows, rms, bias=0.0, worst=None):
    return {**where._asdict(), "rows": rows, "rms": rms, "bias": bias,
            "worst": rms if worst is None else worst, "datasets": ["x"]}


def test_a_regime_with_enough_rows_gives_its_own_rms():
    groups = [group(H100, MIN_ROWS, 0.04, -0.01),
              group(H100._replace(gpu="A100"), 50, 0.20)]
    bar = error_bar(H100, groups)
    assert (bar.expected, bar.bias, bar.rows, bar.extrapolated) == (0.04, -0.01, MIN_ROWS, "")


def test_a_thin_regime_pools_its_nearest_neighbours_and_is_not_extrapolated():
    groups = [group(H100, 1, 0.10), group(H100._replace(size="<3B"), 2, 0.04),
              group(H100._replace(size="<3B", gpu="A100"), 40, 0.50)]
    bar = error_bar(H100, groups)
    assert bar.extrapolated == "" and bar.rows == 3
    assert bar.expected == pytest.approx(np.sqrt((0.10 ** 2 + 2 * 0.04 ** 2) / 3), abs=1e-4)


def test_an_unseen_fact_is_named_and_gets_the_worst_nearby_error():
    long = H100._replace(seq=">64K")
    groups = [group(H100, 5, 0.04, worst=0.09), group(H100._replace(gpu="A100"), 9, 0.03,
                                                      worst=0.30)]
    bar = error_bar(long, groups)
    assert bar.extrapolated == "seq >64K"
    assert bar.expected == 0.09  # the worst row of the nearest group, not the far one's


def test_an_unseen_combination_of_seen_facts_says_so():
    groups = [group(H100._replace(gpu="A100"), 5, 0.04),
              group(H100._replace(arch="moe", gpu="A100"), 5, 0.05),
              group(H100._replace(size="<3B"), 5, 0.06)]
    bar = error_bar(H100._replace(size="<3B", gpu="A100"), groups)
    assert bar.extrapolated.startswith("the combination A100, <3B")


def test_an_extrapolated_bar_is_no_narrower_than_what_it_is_made_from():
    """A fact the nearest groups lack takes the worst check that has it, and each nearest
    group's own bar is a floor: Llama 3 70B at 128K on A100 took its 4K checks' 3.9% where
    every long-context check erred 30-44%, and H200 a narrower bar than the H100 it borrows
    (a review, 7 December 2026)."""
    short_a100 = H100._replace(gpu="A100", size="30-200B")
    long_h100 = H100._replace(seq=">64K")
    h100_70b = H100._replace(size="30-200B")
    groups = [group(short_a100, 5, 0.02, worst=0.04), group(long_h100, 4, 0.42, worst=0.44),
              group(h100_70b, 1, 0.01), group(H100._replace(size="<3B"), 4, 0.10, worst=0.12)]
    # A100 at a long sequence: its nearest group is A100's short one; the long ones err 44%
    bar = error_bar(short_a100._replace(seq=">64K"), groups)
    assert bar.extrapolated and bar.expected == 0.44
    # a GPU no check ran on: no narrower than the H100 regime's own pooled bar
    own = error_bar(h100_70b, groups)
    assert own.extrapolated == "" and own.expected > 0.04
    bar = error_bar(h100_70b._replace(gpu="H200-141GB"), groups)
    assert bar.extrapolated == "gpu H200-141GB" and bar.expected == own.expected


def test_throughput_errors_count_as_step_time_errors():
    # a throughput predicted 25% high is a step time 20% short
    assert step_error([0.25, 0.25], ["tflops_per_gpu", "iteration_s"]).tolist() == \
        pytest.approx([-0.2, 0.25])


def test_regime_table_keeps_check_rows_of_the_model_only():
    where = tuple(H100)
    frame = pd.DataFrame(
        [("a", "r1", "iteration_s", 1.0, 1.1, "check", *where),
         ("a", "r2", "iteration_s", 1.0, 0.9, "check", *where),
         ("a", "r3", "iteration_s", 1.0, 2.0, "calibration", *where),
         ("zero_bubble_table4_profiled", "r4", "iteration_s", 1.0, 3.0, "check", *where)],
        columns=["dataset", "row", "quantity", "measured", "predicted", "role",
                 *Regime._fields])
    frame["error"] = frame["predicted"] / frame["measured"] - 1
    (only,) = regime_table(frame)
    assert only["rows"] == 2 and only["rms"] == pytest.approx(0.1)
    assert only["bias"] == pytest.approx(0.0) and only["worst"] == pytest.approx(0.1)


def test_coverage_judges_each_dataset_by_the_bars_of_the_others():
    # one regime: dataset a's errors 2%, b's 10%; a calibration row and the profiled table
    # (not the model's) count nowhere. Left out, a gets b's 10% bar and b gets a's 2%
    where = tuple(H100)
    rows = [("a", 1.02, "check"), ("a", 0.98, "check"), ("a", 1.02, "check"),
            ("b", 1.1, "check"), ("b", 0.9, "check"), ("b", 1.1, "check"),
            ("b", 3.0, "calibration"), ("zero_bubble_table4_profiled", 3.0, "check")]
    frame = pd.DataFrame([(d, "iteration_s", 1.0, x, role, *where) for d, x, role in rows],
                         columns=["dataset", "quantity", "measured", "predicted", "role",
                                  *Regime._fields])
    frame["error"] = frame["predicted"] / frame["measured"] - 1
    got = {r["dataset"]: r for r in coverage(frame)}
    assert set(got) == {"a", "b", "all"}
    assert got["a"]["bar"] == pytest.approx(0.1) and got["b"]["bar"] == pytest.approx(0.02)
    assert (got["a"]["within_bar"], got["b"]["within_bar"], got["b"]["within_two_bars"]) == \
        (1.0, 0.0, 0.0)
    assert got["all"]["rows"] == 6 and got["all"]["within_bar"] == 0.5
    assert got["all"]["rms"] == pytest.approx(np.sqrt((3 * 0.02 ** 2 + 3 * 0.1 ** 2) / 6), abs=1e-4)
    assert got["all"]["extrapolated"] == 0.0
    # the lean: a's mean error +2/3 %, b's +10/3 %; each left out gets the other's as its bias
    assert (got["a"]["mean_error"], got["a"]["bias"]) == pytest.approx((0.02 / 3, 0.1 / 3),
                                                                        abs=1e-4)
    assert got["b"]["bias"] == pytest.approx(0.02 / 3, abs=1e-4)
    assert got["a"]["rms_corrected"] == pytest.approx(
        np.sqrt(np.mean(((1 + np.array([0.02, -0.02, 0.02])) / (1 + 0.1 / 3) - 1) ** 2)),
        abs=1e-4)


def test_regimes_of_presets():
    assert regime(MODELS["llama2-7b"], HARDWARE["A100-80GB"], 2048, 8) == \
        Regime("A100", "3-30B", "<=8K", "dense", "in node")
    assert regime(MODELS["deepseek-v3"], HARDWARE["H800-80GB"], 131072, 16) == \
        Regime("H800-80GB", ">=200B", ">64K", "moe", "across nodes")


def test_a_gpu_no_table_checks_is_extrapolated():
    """H800, H200, the GB and B300 presets and a GPU of the user's own named like a checked
    one: until 5 December 2026 each took a checked GPU's bar by its name's prefix, as if runs
    on it had been checked."""
    own = dataclasses.replace(HARDWARE["H100-80GB"], name="H100-PCIe", peak_flops=756e12)
    for hw in (HARDWARE["H800-80GB"], HARDWARE["H200-141GB"], HARDWARE["GB200"],
               HARDWARE["B300-288GB"], own):
        bar = error_bar(regime(MODELS["llama3-8b"], hw, 4096, 1))
        assert bar.extrapolated.startswith(f"gpu {hw.name}")
    assert error_bar(regime(MODELS["llama3-8b"], HARDWARE["H100-80GB"], 4096, 1)).extrapolated \
        == ""


def test_a_checked_gpu_on_another_network_keeps_its_regime():
    """vTrain's cluster (``explain --vtrain``) is the A100 preset on vTrain's network: its own
    validated runs were flagged extrapolated ("no validated run shares gpu A100-80GB (200
    Gb/s a node)") with a borrowed 25% bar, where the A100 preset priced them at 8.6%. A
    change to the GPU itself (its peak) still makes a regime of its own."""
    from fastpp.model.vtrain import vtrain_cluster

    model = Transformer(24, 1024, 16, vocab=50304)
    a100 = error_bar(regime(model, HARDWARE["A100-80GB"], 1024, 1, 8))
    for cluster in (vtrain_cluster(200, 8), vtrain_cluster(800, 4)):
        assert cluster.name != "A100-80GB"
        assert error_bar(regime(model, cluster, 1024, 1, 8)) == a100
    faster = dataclasses.replace(vtrain_cluster(200, 8), peak_flops=400e12)
    assert error_bar(regime(model, faster, 1024, 1, 8)).extrapolated.startswith(
        f"gpu {faster.name}")


def test_a_preset_with_its_gpu_changed_is_extrapolated():
    """The bar was looked up by the hardware's name: an H100 at a tenth of its peak (9x
    slower steps), ``--efficiency 0.1`` or an H200 renamed H100-80GB took H100's ±13.6%,
    not extrapolated. A recipe (fp8) is no other GPU."""
    model, h100 = MODELS["llama2-7b"], HARDWARE["H100-80GB"]
    checked = error_bar(regime(model, h100, 4096, 1, 8))
    assert checked.extrapolated == ""
    assert error_bar(regime(model, dataclasses.replace(h100, precision="fp8"), 4096, 1, 8)) \
        == checked
    for hw, said in ((dataclasses.replace(h100, peak_flops=98.9e12), "peak_flops"),
                     (h100.with_efficiency(0.1), "efficiency"),
                     (dataclasses.replace(HARDWARE["H200-141GB"], name="H100-80GB"),
                      "memory_bytes, memory_bandwidth")):
        bar = error_bar(regime(model, hw, 4096, 1, 8))
        assert bar.extrapolated.startswith(f"gpu H100-80GB ({said} changed)"), bar
        assert bar.expected >= checked.expected


def test_a_run_larger_than_any_checked_is_extrapolated():
    """98,304 H100s had the bar of the runs of at most 3,072 GPUs it pools, unflagged (the
    physics trial): a run past the largest checked run of its bar is extrapolated, at the
    worst error nearby."""
    at = {g: error_bar(regime(MODELS["llama3-70b"], HARDWARE["H100-80GB"], 8192, 4, g))
          for g in (64, 98304)}
    largest = max(g["largest"] for g in errorbar._groups() if g["gpu"] == "H100")
    assert at[64].extrapolated == "" and largest < 98304
    assert at[98304].extrapolated.startswith("scale 98,304 GPUs (the largest checked run of "
                                             "its bar: ")
    assert at[98304].expected >= at[64].expected
    assert regime(MODELS["llama3-70b"], HARDWARE["H100-80GB"], 8192, 4).gpus == 0  # unknown
    # at its edge: the largest checked run is inside its bar, one GPU more is not
    edge = {g: error_bar(regime(MODELS["llama3-70b"], HARDWARE["H100-80GB"], 8192, 4, g))
            for g in (largest, largest + 1)}
    assert edge[largest].extrapolated == ""
    assert edge[largest + 1].extrapolated.startswith(f"scale {largest + 1:,} GPUs")
    assert edge[largest + 1].expected >= edge[largest].expected


def test_plan_rows_and_transformer_costs_carry_their_regimes_bar():
    df = plan("llama2-7b", 32, seq=4096, global_batch=64, tp=[2, 16], pp=[1, 2],
              microbatch=1, recompute="none", schedules=["1f1b"])
    for t, part in df.groupby("t"):
        bar = error_bar(regime(MODELS["llama2-7b"], HARDWARE["H100-80GB"], 4096, t, 32))
        assert (part["expected_error"] == bar.expected).all()
        assert (part["expected_bias"] == bar.bias).all()
        assert (part["extrapolated"] == bar.extrapolated).all()
    assert set(df.loc[df["t"] == 16, "extrapolated"]) == {"tp across nodes"}
    costs = transformer_costs("llama2-7b", fastpp.build_schedule("1f1b", 2, 4), seq=4096,
                              tp=2)
    assert isinstance(costs, ModelCosts) and isinstance(costs, fastpp.Costs)
    # the job's GPUs: t x the schedule's p (the keyword form's dp=1)
    assert costs.error_bar == error_bar(regime(MODELS["llama2-7b"], HARDWARE["H100-80GB"],
                                               4096, 2, 2 * 2))
    assert costs == fastpp.Costs(costs.f, costs.b, w=costs.w, i=costs.i, comm=costs.comm,
                                 gamma=costs.gamma, act=costs.act, bandwidth=costs.bandwidth,
                                 message_bytes=costs.message_bytes)


def test_plan_summary_says_what_its_error_means():
    """The terminal summary's legend under its table; the rows carry their checks' mean
    signed error (``expected_bias``); and no header for faster configurations that do not
    fit where there are none."""
    from fastpp.model.plan import summary

    df = plan("llama2-7b", 32, seq=4096, global_batch=64, tp=[2], pp=[2], microbatch=1,
              recompute="none", schedules=["1f1b"])
    bias = error_bar(regime(MODELS["llama2-7b"], HARDWARE["H100-80GB"], 4096, 2, 32)).bias
    assert bias < 0 and (df["expected_bias"] == bias).all()
    text = summary(df, 3)
    assert "error: the step time's expected error from validate's checks" in text
    assert df["fits"].all() and "do not fit" not in text


def test_explain_gives_a_neighbour_in_another_regime_its_own_bar():
    """A run with tensor parallelism across nodes is extrapolated; its faster neighbours
    inside a node are not, and say their own bar; one in the run's regime says nothing."""
    from fastpp.model import RunConfig
    from fastpp.model.explain import explain

    found = explain("llama2-7b", RunConfig(seq=4096, global_batch=256, t=16, p=2, d=2,
                                           microbatch=1, recompute="none"), "H100-80GB",
                    neighbours=4, workers=1)
    inside = error_bar(regime(MODELS["llama2-7b"], HARDWARE["H100-80GB"], 4096, 2, 64))
    assert found.row["extrapolated"] and inside.extrapolated == ""
    lines = [line for line in found.table().split("faster and fits")[1].splitlines()[1:]
             if "--tensor-model-parallel-size " in line]  # (each changes t, to 8 or fewer)
    assert lines and all(f"(error ±{inside.expected:.1%}: another regime)" in line
                         for line in lines), lines


def test_coverage_leaves_out_rows_without_a_prediction_and_needs_two_datasets():
    where = tuple(H100)
    rows = [("a", 1.02), ("a", 0.98), ("a", float("nan")), ("b", 1.1), ("b", 0.9)]
    frame = pd.DataFrame([(d, "iteration_s", 1.0, x, "check", *where) for d, x in rows],
                         columns=["dataset", "quantity", "measured", "predicted", "role",
                                  *Regime._fields])
    frame["error"] = frame["predicted"] / frame["measured"] - 1
    got = {r["dataset"]: r for r in coverage(frame)}
    # a's NaN row neither counts nor spoils the bar b is judged by (a's 2%)
    assert got["a"]["rows"] == 2 and got["b"]["bar"] == pytest.approx(0.02)
    assert coverage(frame[frame["dataset"] == "a"]) == []


def test_a_framework_pools_its_own_checks_and_one_without_any_is_extrapolated():
    """A stack's error is its own: a torchtitan run's bar pools torchtitan's groups alone,
    however thin, Megatron's never take torchtitan's, and a framework with no group at all
    is extrapolated, named, at the worst error nearby or each other checked stack's RMS over
    all its checks, whichever is wider (it had taken Megatron's alone, and DeepSpeed's runs of
    MT-NLG and BLOOM, priced by an out-of-sample review, erred 18-33% under 3.9-5.2% bars)."""
    titan = H100._replace(framework="torchtitan")
    thin = H100._replace(size="<3B")  # one Megatron check: it borrows its neighbours
    groups = [group(H100, 40, 0.05, worst=0.12), group(thin, 1, 0.02, worst=0.02),
              group(titan, 1, 0.30), group(titan._replace(size="<3B"), 2, 0.45)]
    mine = error_bar(titan, groups)
    assert mine.extrapolated == "" and mine.rows == 3
    assert mine.expected == pytest.approx(np.sqrt((2 * 0.45 ** 2 + 0.30 ** 2) / 3), abs=1e-4)
    assert error_bar(thin, groups) == error_bar(thin, groups[:2])
    assert error_bar(thin, groups).rows == 41
    # a framework without checks: Megatron's nearest at their worst (0.12), or as far as the
    # checked stack strays over all its checks (torchtitan's three rows: 0.405), the wider;
    # the same in a regime where torchtitan has no check, and at any scale
    other = error_bar(H100._replace(framework="deepspeed"), groups)
    assert other.extrapolated == "framework deepspeed" and other.expected == pytest.approx(
        np.sqrt((2 * 0.45 ** 2 + 0.30 ** 2) / 3), abs=1e-4)
    far = H100._replace(framework="deepspeed", gpu="A100", seq=">64K", gpus=100_000)
    assert error_bar(far, groups).expected == other.expected
    assert error_bar(H100._replace(framework="deepspeed"), groups[:2]).expected == 0.12
    with pytest.raises(fastpp.ScheduleError, match="where.framework must be one of"):
        error_bar(H100._replace(framework=3), groups)


def test_a_run_on_torchtitan_carries_torchtitan_s_bar():
    """``RunConfig.framework`` (``from_torchtitan`` sets it) reaches the bar of plan rows,
    ``explain`` and ``transformer_costs``: a torchtitan job of Llama 3 8B on H100 takes
    the bar of torchtitan's own runs (their steps priced about a quarter short), not Megatron's
    (14% before). A framework not in the list is refused, naming it."""
    from fastpp.model import RunConfig
    from fastpp.model.explain import explain
    from fastpp.model.torchtitan import from_torchtitan

    job = ('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 2\n'
           'seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 8\n')
    model, config = from_torchtitan(job, gpus=8)
    assert config.framework == "torchtitan"
    row = explain(model, config, "H100-80GB", neighbours=0).row
    titan = error_bar(regime(model, HARDWARE["H100-80GB"], 8192, 1, 8,
                             framework="torchtitan"))
    megatron = error_bar(regime(model, HARDWARE["H100-80GB"], 8192, 1, 8))
    assert row["expected_error"] == titan.expected > 0.2 > megatron.expected
    assert row["expected_bias"] == titan.bias < -0.2
    keywords = dict(seq=8192, global_batch=16, d=8, zero=3)
    rows = plan(model, config=RunConfig(**keywords, framework="deepspeed"))
    assert "framework deepspeed" in rows["extrapolated"].iloc[0]
    costs = transformer_costs(model, config=RunConfig(**keywords, framework="torchtitan"))
    assert costs.error_bar == titan
    with pytest.raises(fastpp.ScheduleError, match="framework must be one of"):
        RunConfig(**keywords, framework="titan")
    with pytest.raises(fastpp.ScheduleError, match="framework"):
        plan(model, 8, seq=8192, global_batch=16, framework="titan")
    with pytest.raises(fastpp.ScheduleError, match="framework"):
        plan(model, config=RunConfig(**keywords), framework="torchtitan")


def test_explain_s_neighbours_of_a_torchtitan_run_stay_on_torchtitan():
    """explain's neighbours were planned on Megatron's bars (``plan``'s default) beside a
    torchtitan run priced on torchtitan's: each now carries the run's framework and its bar."""
    from fastpp.model.explain import explain
    from fastpp.model.torchtitan import from_torchtitan

    job = ('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\n'
           'seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 8\n')
    model, config = from_torchtitan(job, gpus=8)
    found = explain(model, config, "H100-80GB", neighbours=5, workers=1).neighbours
    assert found and all(r["expected_bias"] < -0.2 for r in found)


def test_the_buckets_follow_their_labels():
    """A size of exactly 3B or 200B parameters falls where its label says ("<3B" is below
    3B, ">=200B" from 200B on; the bucket had taken 3B into "<3B"), a length of exactly 8K
    or 64K tokens into "<=8K" and "8K-64K"."""
    from fastpp.model.errorbar import SEQS, SIZES, _bucket

    assert [_bucket(x, SIZES, strict=True) for x in (3e9 - 1, 3e9, 30e9, 200e9 - 1, 200e9)] \
        == ["<3B", "3-30B", "30-200B", "30-200B", ">=200B"]
    assert [_bucket(x, SEQS) for x in (8192, 8193, 65536, 65537)] == \
        ["<=8K", "8K-64K", "8K-64K", ">64K"]
