"""fastpp.model.validate against the published runs: the MAPE per dataset that the README
reports ("How close to real runs"), the Zero Bubble rankings, and the calibration it states."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import needs_data

from fastpp import Costs, ScheduleError, build_schedule, optimize, simulate
from fastpp.model import HARDWARE, Transformer
from fastpp.model.hardware import A100_OVERHEADS
from fastpp.model.validate import (
    CALIBRATION,
    DATA,
    DATASETS,
    HELD_APART,
    IN_VIEW,
    MEGATRON_2021_PAIR,
    NARAYANAN_RUNS,
    ZB_VOCAB,
    _extras,
    _gpt,
    calibrate,
    mape,
    megatron_2021,
    model_costs,
    validate,
    zb_chunks,
    zb_handoff,
    zb_layers,
    zb_ranking,
)
from fastpp.model.validate_long import AS_PLANNED
from fastpp.model.validate_small import OVERHEAD_GRID, VTRAIN, fast_error, gpu_parts

ROOT = Path(__file__).resolve().parents[1]
pytestmark = needs_data(*(f"{name}.csv" for name in (
    "korthikanti_2022", "korthikanti_2022_layer", "narayanan_2021_table1",
    "megatron_core_h100_weak_scaling", "zero_bubble_table4")))

# MAPE in percent per dataset, all rows, before the fixed costs and NCCL's protocols came in
# (README "How close to real runs"; two decimals): nothing may regress by half a point
BASELINE_MAPE = {"korthikanti_2022": 3.93, "korthikanti_2022_layer": 1.52,
                 "narayanan_2021_table1": 4.48, "megatron_core_h100_weak_scaling": 3.08,
                 "zero_bubble_table4_profiled": 3.21, "zero_bubble_table4_model": 3.39}
BASELINE_CHECK_MAPE = {"megatron_core_h100_weak_scaling": 5.62}  # its held-out even rows
# Zero Bubble rankings that agree with the paper's (of 12 each): issue 26's goal, and the
# published count (a regression guard)
RANKING_GOAL = {"zero_bubble_table4_profiled": 12, "zero_bubble_table4_model": 10}
# vTrain's small models on one node: both halves, each within this bound, a regression guard
# (7.2% and 7.4% before Megatron's softmax fallback was priced, 5.9% and 6.4% now; issue 26
# asks 5%: the strict xfail below)
VTRAIN_BOUND = 7.0
# tables with no row fitted, whose MAPE is a check; Korthikanti's layer table is all
# calibration rows (A100's matrix-product curve), so its figure bounds the fit and checks nothing
FIT_ONLY = {"korthikanti_2022_layer"}


@pytest.fixture(scope="module")
def frame():
    return validate()


# the tables more than half a point above their baseline: open, strict. Zero Bubble's model
# run since its vocabulary is one its models' names fit (ZB_VOCAB), where GPT-2's had made its
# last stage 20% heavier than a middle one: 5.6%, and 4.5% since Megatron's loss is priced as
# its code runs it (within the 5%, met)
MISSES_BASELINE = {
    "zero_bubble_table4_model": "Zero Bubble from the model at 4.5%, 1.1 points above its "
                                "baseline (3.4%): the middle stages' forwards priced 2-17% "
                                "fast against Table 5's profile, the weight gradients 9-12% "
                                "slow"}


def _open(datasets, missed):
    """``datasets`` as parameters, those in ``missed`` (a dict of reasons) a strict xfail."""
    return [pytest.param(d, marks=pytest.mark.xfail(strict=True, reason=missed[d]))
            if d in missed else d for d in datasets]


@pytest.mark.parametrize("dataset", list(BASELINE_MAPE))
def test_every_dense_table_within_five_percent(frame, dataset):
    """The issue's 5% on the rows nothing was fitted on or chosen with in view (Megatron-Core's
    even rows but the 32B, every row of the other tables); the layer
    table, all calibration, is held to it as a fit."""
    role = "calibration" if dataset in FIT_ONLY else "check"
    rows = frame[frame["dataset"] == dataset]
    mixed = (set(BASELINE_CHECK_MAPE) | {name for name, _ in IN_VIEW}
             | {"narayanan_2021_table1"})  # its 1T row measures Megatron of 2021's speed
    assert set(rows["role"]) == ({role} if dataset in FIT_ONLY or dataset not in mixed
                                 else {"calibration", "check"})
    assert mape(frame, role)[dataset] <= 5.0, mape(frame, role)[dataset]


@pytest.mark.parametrize("dataset", _open(BASELINE_MAPE, MISSES_BASELINE))
def test_each_dataset_within_half_a_point_of_its_baseline(frame, dataset):
    """Every table within half a point of its baseline; Megatron-Core's held-out rows within
    the issue's 5% too."""
    got = mape(frame)[dataset]
    assert got <= BASELINE_MAPE[dataset] + 0.5, got
    if dataset in BASELINE_CHECK_MAPE:
        assert mape(frame, "check")[dataset] <= min(5.0, BASELINE_CHECK_MAPE[dataset] + 0.5)


def test_small_models_on_one_node(frame):
    """vTrain's half A: the fixed costs fitted on its even rows, checked on its odd rows."""
    fitted, checked = (mape(frame, role)[VTRAIN] for role in ("calibration", "check"))
    assert fitted <= VTRAIN_BOUND and checked <= VTRAIN_BOUND, (fitted, checked)
    # the errors are spread, not one side: a fixed cost missing would bias them all
    errors = frame[frame["dataset"] == VTRAIN]["error"]
    assert abs(errors.mean()) < 0.03


@pytest.mark.xfail(strict=True, reason="vTrain half A at 5.9% (calibration) and 6.4% (check) "
                   "MAPE against issue 26's 5%: per (t, hidden, microbatch) offsets of -17% to "
                   "+22%, tight within each group (docs/fidelity-small.md)")
def test_small_models_within_the_target(frame):
    fitted, checked = (mape(frame, role)[VTRAIN] for role in ("calibration", "check"))
    assert fitted <= 5.0 and checked <= 5.0


def test_every_published_row_is_there_once(frame):
    counts = frame.groupby("dataset").size().to_dict()
    assert counts == {"korthikanti_2022": 8, "korthikanti_2022_layer": 10,
                      "narayanan_2021_table1": 10, "megatron_core_h100_weak_scaling": 9,
                      "zero_bubble_table4_profiled": 48, "zero_bubble_table4_model": 48,
                      "moe_published": 34,
                      "long_context_published": 17, "long_context_as_planned": 17,
                      "long_context_moe": 4, VTRAIN: 746, "torchtitan_h100": 18,
                      "llm_foundry_mpt": 76}
    assert set(frame["dataset"]) == set(DATASETS)
    assert np.allclose(frame["error"], frame["predicted"] / frame["measured"] - 1)
    # calibration rows: the whole layer table, Megatron-Core's odd rows, vTrain's even rows,
    # the long-context tables' 1M rows (their attention's speed); and the rows a choice was
    # made with in view (validate.IN_VIEW): Megatron-Core's 32B row, every MoE row; Narayanan's
    # 1T row, whose ratio to Korthikanti's is Megatron of 2021's speed (megatron_2021)
    fit = frame[frame["role"] == "calibration"]
    assert set(fit["dataset"]) == {"korthikanti_2022_layer", "megatron_core_h100_weak_scaling",
                                   VTRAIN, "long_context_published", "moe_published",
                                   "narayanan_2021_table1"}
    assert fit[fit["dataset"] == "narayanan_2021_table1"]["row"].tolist() == ["1008.0B"]
    assert (fit["dataset"] == "moe_published").sum() == 34
    # the long-context MoE runs: nothing fitted or chosen on them, every one a check
    assert set(frame[frame["dataset"] == "long_context_moe"]["role"]) == {"check"}
    assert fit[fit["dataset"] == "long_context_published"]["row"].str.contains(
        " 1024K ").sum() == 2 == (fit["dataset"] == "long_context_published").sum()
    small = frame[frame["dataset"] == VTRAIN]
    assert (small["role"] == "calibration").tolist() == [i % 2 == 0 for i in range(746)]
    assert fit[fit["dataset"] == "megatron_core_h100_weak_scaling"]["row"].tolist() == [
        "1.7B", "16B", "32B", "70B", "177B", "462B"]


def test_zero_bubble_rankings_reach_the_goal(frame):
    """Issue 26's 12 of 12 from the profile and 10 of 12 from the model: met since ZB-1p and
    ZB-2p are the schedules the authors' runtime plans (uniform median-stage times, the
    paper's memory units: validate._zb_runs); 9 of 12 before, the model's heuristic planning
    on each stage's own predicted times."""
    ranks = zb_ranking(frame)
    assert len(ranks) == 24
    got = ranks.groupby("dataset")["agree"].sum().to_dict()
    assert got.keys() == RANKING_GOAL.keys()
    assert all(got[k] >= RANKING_GOAL[k] for k in got), got


def test_zero_bubble_schedules_are_planned_as_the_runtime_plans_them(frame):
    """The authors' runtime (zb_schedules.py) plans ZB-1p and ZB-2p on every stage at the
    median stage's op times and runs the schedule on the real stages. The model's 1.5B n=24
    ZB-1p row is that: the heuristic on uniform costs (the middle stages' time, of the
    stages priced without their hand-offs; the measured hand-off; the paper's memory units),
    run on the stages as priced, where the heuristic on the stages' own times (uneven: one
    layer fewer, with the embedding or the loss, at each end) prices the run faster."""
    from fastpp.model.validate import _zb_planned

    row = {"T_comm_ms": 0.601}  # Table 5's, for this setting
    model = _gpt({"layers": 22, "hidden": 2304, "heads": 24, "model": "1.5B"}, ZB_VOCAB)
    a100, sched = HARDWARE["A100-80GB"], build_schedule("1f1b", 8, 24)
    table = model_costs(model, a100, sched, seq=1024, microbatch=6, layers=zb_layers(22, 8))[1]
    cluster = dataclasses.replace(a100, handoff=zb_handoff(row, table, 8))
    costs, table = model_costs(model, cluster, sched, seq=1024, microbatch=6,
                               layers=zb_layers(22, 8))
    planned = _zb_planned(model, cluster, sched, row, seq=1024, microbatch=6,
                          layers=zb_layers(22, 8))
    # uniform: a middle stage's op times, without the hand-off its device is held for
    middle = model_costs(model, cluster, sched, seq=1024, microbatch=6, layers=zb_layers(22, 8),
                         blocking=False)[0].arrays
    for k in ("f", "b", "w"):
        assert float(planned.arrays[k]) == pytest.approx(float(middle[k][3]), rel=1e-12)
        assert float(planned.arrays[k]) <= float(costs.arrays[k][3])
    m_b = 34.0 * 2304 + 5.0 * 24 * 1024
    assert float(planned.arrays["act"]) == m_b and float(planned.arrays["comm"]) == 0.601e-3
    uniform = optimize(8, 24, planned, memory=8 * m_b, objective="makespan",
                       method="heuristic", progress=False).schedule
    extra = _extras(model, a100, sched, table, 1, 1, 0, False)
    got = frame[(frame["dataset"] == "zero_bubble_table4_model")
                & (frame["row"] == "1.5B n=24 zb_1p")].iloc[0]
    assert got.predicted == pytest.approx(24 * 6 / 8 / (simulate(uniform, costs).makespan
                                                         + extra), rel=1e-12)
    own = optimize(8, 24, costs, memory=8 * np.asarray(costs.arrays["act"]),
                   objective="makespan", method="heuristic", progress=False)
    assert own.result.makespan < simulate(uniform, costs).makespan


def test_megatron_2021_is_a_measured_ratio_the_other_shared_run_checks():
    """Megatron of 2021's speed against 2022's is the ratio of two measured steps of one
    configuration per pipeline, Narayanan's 1T (163 TFLOP/s per GPU: 102.6 s, less its
    gradient all-reduce over d = 6 as priced, which the d = 1 run has not) to Korthikanti's
    full recomputation (94.42 s). The other configuration both tables ran alike per pipeline,
    530B (t 8, p 35, microbatch 1, three chunks a device, 280 microbatches a pipeline), is its
    check: measured, 54.1 s (less its all-reduce over d = 9) against 49.05 s, within 2%."""
    import pandas as pd

    from fastpp.model.validate import _narayanan_flops, _narayanan_run

    assert MEGATRON_2021_PAIR == ("1008.0B", "1T")
    nara = pd.read_csv(DATA / "narayanan_2021_table1.csv").set_index("params_b")
    kort = pd.read_csv(DATA / "korthikanti_2022.csv").set_index("model")
    ratios = {}
    for size, name in ((1008.0, "1T"), (529.6, "530B")):
        ours, theirs = nara.loc[size].to_dict() | {"params_b": size}, kort.loc[name]
        for key in ("heads", "hidden", "layers", "t", "p"):
            assert ours[key] == theirs[key], (name, key)
        b, virtual, _ = NARAYANAN_RUNS[size]
        d = ours["gpus"] // (ours["t"] * ours["p"])
        chunks = 1 if virtual is None else ours["layers"] // (ours["p"] * virtual)
        assert (b, chunks, ours["global_batch"] // d) == (
            theirs["microbatch"], theirs["interleave"], theirs["global_batch"]), name
        assert theirs["gpus"] == ours["t"] * ours["p"]  # the 2022 run: d = 1
        step = _narayanan_flops(ours) / (ours["gpus"] * ours["tflops_per_gpu"] * 1e12)
        sync = _narayanan_run(ours, HARDWARE["A100-80GB"])[2]["gradient_sync"]
        assert 0 < sync < 0.01 * step
        ratios[name] = (step - sync) / theirs["iteration_s_full_recompute"]
    assert megatron_2021() == pytest.approx(ratios["1T"], rel=1e-12)
    assert 1.08 < ratios["1T"] < 1.09
    assert ratios["530B"] == pytest.approx(ratios["1T"], rel=0.02), ratios


def test_the_presets_hold_what_calibrate_fits():
    """Each curve is calibrate's optimum on its calibration rows, and nothing else chose it
    (A100's was once held a grid step off, with Narayanan's checks in view)."""
    for name, curve in CALIBRATION.items():
        assert {k: getattr(HARDWARE[name], k) for k in curve} == curve
        assert calibrate(name) == curve
    with pytest.raises(ScheduleError, match=r"name must be one of \['A100-80GB', 'H100-80GB'\]"):
        calibrate("B200-180GB")


def test_the_a100_preset_holds_the_fitted_fixed_costs(frame):
    """``calibrate_overheads``' result is a fixed point of its coordinate descent: on the
    calibration rows no neighbouring grid value of any constant does better (the whole
    fit, three passes over the grid, takes minutes: ``calibrate_overheads``)."""
    hw = HARDWARE["A100-80GB"]
    assert {k: getattr(hw, k) for k in A100_OVERHEADS} == A100_OVERHEADS
    parts = gpu_parts(hw, DATA)
    here = fast_error(parts, **A100_OVERHEADS)
    # the fit's quick pricing is validate's, row for row
    assert here == pytest.approx(mape(frame, "calibration")[VTRAIN] / 100, rel=1e-9)
    for name, values in OVERHEAD_GRID.items():
        k = int(np.argmin(np.abs(np.asarray(values) - A100_OVERHEADS[name])))
        assert values[k] == pytest.approx(A100_OVERHEADS[name])
        for j in (k - 1, k + 1):
            if 0 <= j < len(values):
                assert fast_error(parts, **(A100_OVERHEADS | {name: values[j]})) >= here


def test_rows_are_the_engine_on_built_schedules(frame):
    """A Zero Bubble row by hand: its uneven stages, fastpp's 1F1B, the simulated makespan."""
    assert zb_layers(22, 8).tolist() == [2, 3, 3, 3, 3, 3, 3, 2]
    assert zb_layers(62, 64).tolist() == [0] + [1] * 62 + [0]
    model_rows = frame[frame["dataset"] == "zero_bubble_table4_model"]
    row = model_rows[model_rows["row"] == "1.5B n=24 1f1b"].iloc[0]
    model = _gpt({"layers": 22, "hidden": 2304, "heads": 24, "model": "1.5B"}, ZB_VOCAB)
    sched = build_schedule("1f1b", 8, 24)
    a100 = HARDWARE["A100-80GB"]
    table = model_costs(model, a100, sched, seq=1024, microbatch=6, layers=zb_layers(22, 8))[1]
    # the cluster's hand-off: Table 5's measured 0.601 ms less the model's NVLink transfer
    # (28 MiB at 230 GB/s and 5 us: 0.128 ms)
    handoff = zb_handoff({"T_comm_ms": 0.601}, table, 8)
    assert handoff == pytest.approx(0.601e-3 - 5e-6 - 2 * 1024 * 6 * 2304 / 230e9, rel=1e-9)
    cluster = dataclasses.replace(a100, handoff=handoff)
    costs, table = model_costs(model, cluster, sched, seq=1024, microbatch=6,
                               layers=zb_layers(22, 8))
    step = simulate(sched, costs).makespan + _extras(model, a100, sched, table, 1, 1, 0, False)
    assert row["predicted"] == pytest.approx(24 * 6 / 8 / step, rel=1e-12)


def test_zero_bubble_vocabulary_gives_the_models_their_names():
    """Table 3's models with ``ZB_VOCAB`` words hold the parameters their names say, to the
    tenth of a billion; GPT-2's padded vocabulary does not give two of them theirs."""
    pd = pytest.importorskip("pandas")
    table = pd.read_csv(DATA / "zero_bubble_table4.csv").drop_duplicates("model")
    named = {r["model"]: float(r["model"].rstrip("B")) for r in table.to_dict("records")}
    assert len(named) == 4
    for vocab, right in ((ZB_VOCAB, 4), (50304, 2)):
        got = {r["model"]: round(_gpt(r, vocab).parameters / 1e9, 1)
               for r in table.to_dict("records")}
        assert sum(got[k] == named[k] for k in named) == right, (vocab, got)


def test_zero_bubble_interleaving_is_the_authors():
    """1F1B-I's chunks (one layer per virtual stage) reproduce Table 5's published 1F1B-I
    bubble rates on Table 5's own costs, and no other number of chunks does."""
    pd = pytest.importorskip("pandas")
    assert [zb_chunks(x, p) for x, p in ((22, 8), (30, 8), (46, 16), (62, 32))] == [3, 4, 3, 2]
    with pytest.raises(ScheduleError, match=r"layers \+ 2 must be a multiple of p = 8 "
                                            r"\(got layers = 24\)"):
        zb_chunks(24, 8)
    for q in pd.read_csv(DATA / "zero_bubble_table5.csv").to_dict("records"):
        p, n = int(q["p"]), int(q["n"])
        f, i, w, c = (q[k] for k in ("T_F_ms", "T_B_ms", "T_W_ms", "T_comm_ms"))
        error = {}
        for m in (1, 2, 3, 4):
            sched = (build_schedule("interleaved-1f1b", p, n, m) if m > 1 else
                     build_schedule("1f1b", p, n))
            span = simulate(sched, Costs(f=f, b=i + w, w=w, comm=c)).makespan
            error[m] = abs((span - n * (f + i + w)) / span / q["bubble_1f1b_i"] - 1)
        mine = zb_chunks(int(q["layers"]), p)
        assert error[mine] < 0.05, (q["model"], n, error)
        assert all(e > 0.05 for m, e in error.items() if m != mine), (q["model"], n, error)


def test_bad_validate_arguments():
    with pytest.raises(ScheduleError, match=r"datasets must hold names among \[.*\] \(got 'moe'\)"):
        validate(["moe"])
    # a dataset named twice had its rows counted twice in every figure
    with pytest.raises(ScheduleError, match=r"datasets must name each dataset once \(got "
                                            r"'korthikanti_2022' twice\)"):
        validate(["korthikanti_2022", "narayanan_2021_table1", "korthikanti_2022"])
    with pytest.raises(ScheduleError, match=r"layers must give 8 stages adding up to 22"):
        model_costs(Transformer(22, 2304, 24), HARDWARE["A100-80GB"],
                    build_schedule("1f1b", 8, 8), seq=1024, microbatch=1, layers=[3] * 8)


def test_fidelity_script(tmp_path):
    rows = tmp_path / "new" / "rows.md"  # folders that do not exist yet are made
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "fidelity.py"), "--out",
                          str(tmp_path / "pictures"), "--markdown", str(rows)], capture_output=True,
                         text=True, check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert "Korthikanti 2022, Table 5 (A100)" in run.stdout
    assert "schedule ranking right in 12 of 12 settings" in run.stdout
    assert (tmp_path / "pictures" / "fidelity.png").stat().st_size > 20_000
    # the docs' row-by-row tables are this code's output, not an older model's
    assert rows.read_text() == (ROOT / "docs" / "fidelity-rows.md").read_text()


def test_the_shipped_error_bars_are_what_the_model_gives_now(frame):
    """fastpp/model/errorbars.json is regime_table(validate()): a change to the cost model
    that moves a residual must rewrite it (python scripts/fidelity.py --errorbars)."""
    import json

    from fastpp.model.errorbar import FACTS, TABLE, regime_table

    assert frame[list(FACTS)].notna().all().all()
    shipped = json.loads(TABLE.read_text())["regimes"]
    assert shipped == regime_table(frame)


def test_a_bars_bias_is_its_check_rows_mean_signed_error(frame):
    """A plan row's ``expected_bias``, recomputed from ``validate``'s rows: the mean of the
    step-time errors of the check rows in its regime (throughputs turned into step times,
    1 / (1 + e) - 1), on vTrain's A100 regime and Korthikanti's."""
    from fastpp.model.errorbar import NOT_MODEL, Regime, error_bar

    for where in (Regime("A100", "<3B", "<=8K", "dense", "in node"),
                  Regime("A100", ">=200B", "<=8K", "dense", "in node")):
        part = frame[(frame["role"] == "check") & ~frame["dataset"].isin(NOT_MODEL)
                     & (frame["gpu"] == where.gpu) & (frame["size"] == where.size)
                     & (frame["seq"] == where.seq) & (frame["arch"] == where.arch)
                     & (frame["tp"] == where.tp) & (frame["framework"] == where.framework)]
        rate = part["quantity"].isin(["tflops_per_gpu", "samples_per_gpu_s",
                                      "tokens_per_s_per_gpu"])
        step = np.where(rate, 1.0 / (1.0 + part["error"]) - 1.0, part["error"])
        bar = error_bar(where)
        assert len(part) >= 3 and bar.rows == len(part) and bar.extrapolated == "", where
        assert bar.bias == pytest.approx(np.mean(step), abs=1e-4), where


def test_a_correction_by_the_bias_would_not_help(frame):
    """``expected_bias`` is shown as what the checks did, never applied: with each table left
    out in turn, dividing its predictions by ``1 + bias`` of the other tables' bars helps
    fewer tables than it hurts (three of nine), and leaves a larger error over the rows of
    Megatron's runs than the predictions as they are (9.6% -> 10.7% RMS without
    torchtitan's and llm-foundry's runs, the first of whose lean it halves: over all rows
    10.6% -> 10.7%; 10.9% and 10.8% until the routed experts stopped paying a
    tensor-parallel exchange, 9.7% -> 10.8% and 10.8% both ways until 7 December 2026, 9.9% -> 13.0%
    and 11.1% -> 13.1% before Megatron's loss was priced as its code runs it, 6 December
    2026, late)."""
    from fastpp.model.errorbar import coverage

    rows = {r["dataset"]: r for r in coverage(frame)}
    rows.pop("all")
    helped = [k for k, r in rows.items() if r["rms_corrected"] < r["rms"]]
    assert len(helped) < len(rows) / 2, helped
    megatron = frame[frame["framework"] == "megatron"]
    pooled = next(r for r in coverage(megatron) if r["dataset"] == "all")
    assert pooled["rms_corrected"] > pooled["rms"], pooled


def _tables(frame) -> dict:
    """``errorbar.coverage``'s rows by table, the pool and the tables held apart
    (``validate.HELD_APART``: the long-context rows as the planner prices them, torchtitan's
    and llm-foundry's runs; each tested on its own) left out."""
    from fastpp.model.errorbar import coverage

    rows = {r["dataset"]: r for r in coverage(frame)}
    pooled = rows.pop("all")
    assert pooled["rows"] == sum(r["rows"] for r in rows.values()) > 400
    for name in HELD_APART:
        rows.pop(name)
    return rows


def test_the_error_bars_hold_on_datasets_they_were_not_made_from(frame):
    """Each dataset left out of the bars in turn, its rows against the bars the others give
    (errorbar.coverage): a root-mean-square bar covers an unbiased normal error 68.3% of the
    time and twice it 95.4%. A table is one trial (its rows share their configurations'
    offsets: vTrain's 373 are one draw, most of the pool), so the shares are averaged over the
    tables (six, the long-context MoE runs among them: the fitted long-context table is out
    of the bars, ``errorbar.NOT_MODEL``, and the long-context rows as the planner prices them
    are held apart, a strict xfail below): within one bar at least 58%, within two at least
    90%. Bars half as wide would give 65% and 80% (measured 6 December 2026, late): the last
    fails.
    That no table of ten rows or more falls below 80% within two bars, and that the bars are
    not too wide (at most 78% within one), are the next tests."""
    rows = _tables(frame)
    assert len(rows) >= 5
    assert np.mean([r["within_bar"] for r in rows.values()]) >= 0.58, rows
    assert np.mean([r["within_two_bars"] for r in rows.values()]) >= 0.90, rows


@pytest.mark.xfail(strict=True, reason=(
    "vTrain's small models, left out, fall within two bars 74% of the time: their regime "
    "(A100, under 3B) borrows Zero Bubble's 1.5B and Narayanan's 1.7B checks, priced closer "
    "(a 4.5% bar) since Megatron's loss is priced as its code runs it, where vTrain's rows "
    "err 8.3% RMS (95% within two bars before); Zero Bubble's from the model 88%"))
def test_no_table_falls_outside_two_bars_often(frame):
    """No table of ten rows or more below 80% within two bars (Zero Bubble's model rows
    would be 46% with bars half as wide)."""
    sized = {k: r["within_two_bars"] for k, r in _tables(frame).items() if r["rows"] >= 10}
    assert len(sized) >= 2 and min(sized.values()) >= 0.80, sized


def test_coverage_in_regime_is_over_the_rows_not_extrapolated(frame):
    """``coverage``'s in-regime shares are its shares over the rows whose bar is not
    extrapolated: the same as the whole table's where none is, none where all are, and
    where the table mixes both, the whole table's share is the in-regime rows' weighted by
    their part plus the extrapolated rows' within their bars, between none and all."""
    from fastpp.model.errorbar import coverage

    for r in coverage(frame):
        if r["extrapolated"] == 0:
            assert (r["within_bar_in_regime"], r["within_two_bars_in_regime"]) == (
                r["within_bar"], r["within_two_bars"]), r
        elif r["extrapolated"] == 1:
            assert np.isnan(r["within_bar_in_regime"]), r
        else:
            inside = 1 - r["extrapolated"]
            for k in ("bar", "two_bars"):
                share = inside * r[f"within_{k}_in_regime"]
                assert share - 1e-4 <= r[f"within_{k}"] <= share + r["extrapolated"] + 1e-4, r


@pytest.mark.xfail(strict=True, reason=(
    "within their regimes the bars are too narrow: of the six tables' 433 rows whose bar is "
    "not extrapolated, 46% fall within one bar and 76% within two (vTrain's 373 take a 4.5% "
    "bar from Narayanan's and Zero Bubble's checks against their own 8.3% RMS; Zero Bubble's "
    "from the model 46% and 88%); the 80% over the tables comes from the extrapolated rows, "
    "whose bar is the worst nearby check, 4 to 10 times their errors"))
def test_the_bars_hold_within_their_regimes(frame):
    """The six tables' rows not extrapolated, pooled: at least 58% within one bar and 90%
    within two (a root-mean-square bar's 68% and 95%, as the mean over tables is held)."""
    from fastpp.model.errorbar import coverage

    names = set(_tables(frame))
    rows = [r for r in coverage(frame) if r["dataset"] in names]
    inside = [r["rows"] * (1 - r["extrapolated"]) for r in rows]
    share = {k: sum(n * r[k] for n, r in zip(inside, rows, strict=True) if n) / sum(inside)
             for k in ("within_bar_in_regime", "within_two_bars_in_regime")}
    assert share["within_bar_in_regime"] >= 0.58 and \
        share["within_two_bars_in_regime"] >= 0.90, share


@pytest.mark.xfail(strict=True, reason=(
    "80% of the six tables' rows within one bar (83% before Megatron's loss was priced as its "
    "code runs it; all four long-context MoE runs within the 38% bar they borrow, "
    "extrapolated): the bars are wide. "
    "Megatron-Core's rows, left out, take H100's short-context bars, which now hold NeMo's "
    "4K-8K rows at the planner's attention speed (+14% to +24%): an 18% bar on a 4% error"))
def test_the_error_bars_are_not_too_wide(frame):
    """The mean over the six tables within one bar at most 78% (bars twice as wide give
    97%)."""
    rows = _tables(frame)
    assert np.mean([r["within_bar"] for r in rows.values()]) <= 0.78, rows


def test_torchtitan_runs_left_out_of_the_bars_are_extrapolated_on_their_framework(frame):
    """torchtitan's runs left out of the bars (``errorbar.coverage``): every row is
    extrapolated, naming its framework (no other table runs on torchtitan), and its bar is
    the worst of the nearest Megatron checks, or Composer's 9.3% over all its checks where
    wider (10 of 18 within one of them, all within two, since the runs were priced on the
    GPUs and kernels they ran; 2 and 14 before: the bars of a stack that was never checked
    are not to be trusted, and say so). In the bars,
    a torchtitan run takes its own framework's checks alone, and Megatron's never take
    torchtitan's (the other tables' coverage is what it was without them)."""
    from fastpp.model.errorbar import Regime, coverage, error_bar, regime_table

    rows = {r["dataset"]: r for r in coverage(frame)}
    assert rows["torchtitan_h100"]["extrapolated"] == 1.0
    assert rows["torchtitan_h100"]["mean_error"] < -0.2  # the steps priced short
    others = regime_table(frame[frame["dataset"] != "torchtitan_h100"])
    titan = Regime("H100", "3-30B", "<=8K", "dense", "in node", framework="torchtitan")
    assert "framework torchtitan" in error_bar(titan, others).extrapolated
    inside = error_bar(titan)
    assert inside.extrapolated == "" and inside.rows == 6 and inside.bias < -0.2
    # H100's 70B regime holds one Megatron check and borrows its neighbours: among them
    # torchtitan's 70B runs, were the frameworks pooled (7.8% -> 10.9%)
    thin = Regime("H100", "30-200B", "<=8K", "dense", "in node")
    assert error_bar(thin) == error_bar(thin, others) and error_bar(thin).expected < 0.08


def test_llm_foundry_runs_left_out_of_the_bars_are_extrapolated_on_their_framework(frame):
    """llm-foundry's runs left out of the bars: every row extrapolated on its framework
    ("framework composer"), under the worst nearby Megatron check or torchtitan's 28.5% over
    all its checks, the wider (31.0% on average, three times their error: too wide; 22.7%
    with Megatron's alone), all within one; in the bars, a
    Composer job takes their checks alone (its regime's rows, those up to 8K tokens), and
    vTrain's A100 regime (Megatron's, the same GPU, size and sequences) none of them."""
    from fastpp.model.errorbar import Regime, coverage, error_bar, regime_table

    rows = {r["dataset"]: r for r in coverage(frame)}
    mpt = rows["llm_foundry_mpt"]
    assert mpt["extrapolated"] == 1.0 and mpt["within_two_bars"] == 1.0
    assert mpt["within_bar"] >= 0.9
    others = regime_table(frame[frame["dataset"] != "llm_foundry_mpt"])
    composer = Regime("A100", "<3B", "<=8K", "dense", "in node", framework="composer")
    assert "framework composer" in error_bar(composer, others).extrapolated
    inside = error_bar(composer)
    short = (frame["dataset"] == "llm_foundry_mpt") & (frame["seq"] == "<=8K")
    assert inside.extrapolated == "" and inside.rows == short.sum() > 0
    vtrain = Regime("A100", "<3B", "<=8K", "dense", "in node")
    assert error_bar(vtrain) == error_bar(vtrain, others)


@pytest.mark.xfail(strict=True, reason=(
    "long context as the planner prices it (the attention at the measured kernel's speed): "
    "4 of its 17 rows within two of the bars the other tables give (the count follows the "
    "MoE long-context checks' bar, which its H100 rows over 64K take), its error 30% RMS: the "
    "stack's attention speed (NeMo's 0.56 and 0.73 of the kernel) is measured by no other "
    "table, so their bars cannot foresee it; inside the bars it is a check of its own regime"))
def test_the_error_bars_hold_on_long_context_as_planned(frame):
    """The long-context rows priced as ``plan`` prices them, held against the bars the other
    tables give, as ``test_the_error_bars_hold_on_datasets_they_were_not_made_from`` holds
    each table: at least 80% within two bars."""
    from fastpp.model.errorbar import coverage

    rows = {r["dataset"]: r for r in coverage(frame)}
    assert rows[AS_PLANNED]["within_two_bars"] >= 0.80, rows[AS_PLANNED]
