"""fastpp.model.validate against the published runs: the MAPE per dataset that the README
reports ("How close to real runs"), the Zero Bubble rankings, and the calibration it states."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fastpp import ScheduleError, build_schedule, simulate
from fastpp.model import HARDWARE, Transformer
from fastpp.model.validate import (
    CALIBRATION,
    DATA,
    DATASETS,
    _extras,
    _gpt,
    calibrate,
    mape,
    model_costs,
    validate,
    zb_layers,
    zb_ranking,
)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (DATA / "korthikanti_2022.csv").exists(),
                                reason="shared/data is not beside the repository")

# README "How close to real runs": MAPE in percent per dataset, all rows (one decimal)
README_MAPE = {"korthikanti_2022": 3.9, "korthikanti_2022_layer": 1.5,
               "narayanan_2021_table1": 4.5, "megatron_core_h100_weak_scaling": 4.8,
               "zero_bubble_table4_profiled": 3.2, "zero_bubble_table4_model": 3.4}
README_CHECK_MAPE = {"megatron_core_h100_weak_scaling": 7.6}  # its held-out even rows
README_RANKINGS = {"zero_bubble_table4_profiled": 11, "zero_bubble_table4_model": 8}


@pytest.fixture(scope="module")
def frame():
    return validate()


@pytest.mark.parametrize("dataset", list(README_MAPE))
def test_each_dataset_within_the_reported_mape(frame, dataset):
    got = mape(frame)[dataset]
    assert round(got, 1) == README_MAPE[dataset], got
    assert got <= 5.0
    if dataset in README_CHECK_MAPE:
        assert round(mape(frame, "check")[dataset], 1) == README_CHECK_MAPE[dataset]


def test_every_published_row_is_there_once(frame):
    counts = frame.groupby("dataset").size().to_dict()
    assert counts == {"korthikanti_2022": 8, "korthikanti_2022_layer": 10,
                      "narayanan_2021_table1": 10, "megatron_core_h100_weak_scaling": 9,
                      "zero_bubble_table4_profiled": 48, "zero_bubble_table4_model": 48,
                      "moe_published": 34,
                      "long_context_published": 17}
    assert set(frame["dataset"]) == set(DATASETS)
    assert np.allclose(frame["error"], frame["predicted"] / frame["measured"] - 1)
    # calibration rows: the whole layer table and Megatron-Core's odd rows, nothing else
    fit = frame[frame["role"] == "calibration"]
    assert set(fit["dataset"]) == {"korthikanti_2022_layer", "megatron_core_h100_weak_scaling"}
    assert fit[fit["dataset"] == "megatron_core_h100_weak_scaling"]["row"].tolist() == [
        "1.7B", "16B", "70B", "177B", "462B"]


def test_zero_bubble_rankings(frame):
    ranks = zb_ranking(frame)
    assert len(ranks) == 24
    got = ranks.groupby("dataset")["agree"].sum().to_dict()
    assert got == README_RANKINGS


def test_the_presets_hold_what_calibrate_fits():
    for name, curve in CALIBRATION.items():
        assert calibrate(name) == curve
        assert {k: getattr(HARDWARE[name], k) for k in curve} == curve
    with pytest.raises(ScheduleError, match=r"name must be one of \['A100-80GB', 'H100-80GB'\]"):
        calibrate("B200-180GB")


def test_rows_are_the_engine_on_built_schedules(frame):
    """A Zero Bubble row by hand: its uneven stages, fastpp's 1F1B, the simulated makespan."""
    assert zb_layers(22, 8).tolist() == [2, 3, 3, 3, 3, 3, 3, 2]
    assert zb_layers(62, 64).tolist() == [0] + [1] * 62 + [0]
    model_rows = frame[frame["dataset"] == "zero_bubble_table4_model"]
    row = model_rows[model_rows["row"] == "1.5B n=24 1f1b"].iloc[0]
    model = _gpt({"layers": 22, "hidden": 2304, "heads": 24, "model": "1.5B"}, 50304)
    sched = build_schedule("1f1b", 8, 24)
    costs, table = model_costs(model, HARDWARE["A100-80GB"], sched, seq=1024, microbatch=6,
                               layers=zb_layers(22, 8))
    step = simulate(sched, costs).makespan + _extras(model, HARDWARE["A100-80GB"], sched,
                                                     table, 1, 1, 0, False)
    assert row["predicted"] == pytest.approx(24 * 6 / 8 / step, rel=1e-12)


def test_bad_validate_arguments():
    with pytest.raises(ScheduleError, match=r"datasets must be among \[.*\] \(got 'moe'\)"):
        validate(["moe"])
    with pytest.raises(ScheduleError, match=r"layers must give 8 stages adding up to 22"):
        model_costs(Transformer(22, 2304, 24), HARDWARE["A100-80GB"],
                    build_schedule("1f1b", 8, 8), seq=1024, microbatch=1, layers=[3] * 8)


def test_fidelity_script(tmp_path):
    rows = tmp_path / "rows.md"
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "fidelity.py"), "--out",
                          str(tmp_path), "--markdown", str(rows)], capture_output=True,
                         text=True, check=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert "Korthikanti 2022, Table 5 (A100)" in run.stdout
    assert "schedule ranking right in 11 of 12 settings" in run.stdout
    assert (tmp_path / "fidelity.png").stat().st_size > 20_000
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
