"""Bad input to the variability and what-if API (the eighth wave, a fuzz of 3 December 2026,
evening) ends in a ``ScheduleError`` naming the parameter, or in the right number: never
another library's error, an inf or NaN, or a value quietly ignored.

One test per defect; each input escaped before its fix (the docstring says how).
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import needs_data

import fastpp
from fastpp import ScheduleError, build_schedule
from fastpp.model.validate import DATA as SHARED

TRACES = Path(__file__).parent / "data"
WHATIF = SHARED / "whatif_st"
ONE = build_schedule("1f1b", 4, 8)


def test_samples_past_the_memory_a_result_keeps():
    """10**8 samples at p = 128 passed (MAX_SAMPLES) and NumPy raised its MemoryError for a
    47.7 GiB array."""
    with pytest.raises(ScheduleError, match=r"samples must be at most 2,088,991 at p = 128"):
        fastpp.simulate(build_schedule("1f1b", 128, 128), noise=fastpp.Noise(0.1),
                        samples=10**8)


def test_mean_and_std_of_makespans_near_the_float_limit():
    """Finite makespans whose sums overflow: mean and std were inf."""
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.0, spike=(0.01, 1e160)), samples=1000)
    exact = np.asarray(mc.makespan, np.longdouble)
    assert mc.std == pytest.approx(float(exact.std(ddof=1)), rel=1e-12)
    assert mc.mean == pytest.approx(float(exact.mean()), rel=1e-12)
    # makespans past the costs' bound (1e290) are refused, as costs are: their sums, near
    # the float limit, overflowed
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.0, link_delay={(0, 1): 1e287},
                                                 blocking=True), samples=10)
    assert np.isfinite(mc.makespan).all() and mc.mean == pytest.approx(mc.makespan[0])
    assert mc.std == 0.0
    with pytest.raises(ScheduleError, match=r"noise must keep the makespan at most 1e\+290"):
        fastpp.simulate(ONE, noise=fastpp.Noise(0.0, link_delay={(0, 1): 1e307},
                                                blocking=True), samples=10)


def test_absorption_tolerance_that_overflows():
    """tolerance=1e308 passed its check and every delay came back inf."""
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.05), samples=100)
    with pytest.raises(ScheduleError, match=r"tolerance must keep \(1 \+ tolerance\) x the mean"):
        mc.absorption(tolerance=1e308, steps=2)


@pytest.mark.parametrize("noise", [fastpp.Noise(1e-155, "gamma"),
                                   fastpp.Noise(0.0, "gamma", step=1e-300)])
def test_gamma_with_a_coefficient_below_float_resolution(noise):
    """The shape 1/CoV^2 overflowed, and the run was refused for overflowing slow factors,
    spikes or link delays it did not have. Such a factor is exactly 1."""
    mc = fastpp.simulate(ONE, noise=noise, samples=8)
    assert (mc.makespan == fastpp.simulate(ONE).makespan).all()


def test_measure_link_delay_on_ranks_that_pass_nothing(tmp_path):
    """Ranks 0 and 3 of a 4-rank 1F1B exchange no message: the run went ahead with no delay
    at all."""
    from fastpp.measured import measure

    with pytest.raises(ScheduleError, match=r"link_delay must join ranks that pass "
                                            r"activations, one of \[\(0, 1\), \(1, 2\), "
                                            r"\(2, 3\)\] \(got ranks 0 and 3\)"):
        measure("1f1b", 4, 4, layers=4, hidden=16, microbatch=4, out=tmp_path / "m",
                link_delay=(0.2, 0, 3))


@pytest.mark.parametrize("delay", [5, 1.5, {"a": 1}])
def test_measure_delay_of_the_wrong_type(tmp_path, delay):
    """TypeError: 'int' object is not iterable."""
    from fastpp.measured import measure

    with pytest.raises(ScheduleError, match="delay must be STAGE:KIND:SECONDS"):
        measure("1f1b", 2, 4, out=tmp_path / "m", delay=delay)


def test_plots_return_the_file_they_write(tmp_path):
    """With no suffix matplotlib writes ``.png``, and the path returned had none; a folder
    was written beside as ``<folder>.png``."""
    pytest.importorskip("matplotlib")
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.1), samples=50)
    out = fastpp.plot.makespan_cdf([mc], tmp_path / "cdf")
    assert out == tmp_path / "cdf.png" and out.is_file()
    assert fastpp.plot.criticality(mc, tmp_path / "crit.svg").is_file()
    with pytest.raises(ScheduleError, match="path must be a file path that can be written"):
        fastpp.plot.criticality(mc, tmp_path)
    assert not (tmp_path.parent / f"{tmp_path.name}.png").exists()


def test_torch_trace_refuses_a_bool_duration(tmp_path):
    """``"dur": true`` read as a 1 us op."""
    folder = tmp_path / "gpipe"
    folder.mkdir()
    for file in sorted((TRACES / "gpipe").iterdir()):
        text = file.read_bytes()
        if file.suffix == ".gz":
            import gzip

            text = gzip.decompress(text)
        (folder / file.name.removesuffix(".gz")).write_bytes(text)
    file = sorted(folder.glob("*.json"))[-1]
    trace = json.loads(file.read_text())
    event = next(e for e in trace["traceEvents"] if e.get("name") == "Forward 2")
    event["dur"] = True
    file.write_text(json.dumps(trace))
    with pytest.raises(ScheduleError, match="numeric ts and dur"):
        fastpp.read_torch_trace(folder)


def test_best_within_budget_lam_and_columns():
    """An array ``lam`` raised NumPy's "truth value of an array is ambiguous"; a table without
    ``makespan_std`` a KeyError."""
    df = fastpp.sweep(["1f1b", "zb-h1"], p=4, n=8, w=1.0, progress=False,
                      noise=fastpp.Noise(0.1), samples=16)
    with pytest.raises(ScheduleError, match="lam must be"):
        fastpp.best_within_budget(df, math.inf, lam=np.array([1.0, 2.0]))
    with pytest.raises(ScheduleError, match=r"needs rows with makespan_mean, makespan_std "
                                            r"\(.*\); the rows have no makespan_std"):
        fastpp.best_within_budget(df.drop(columns="makespan_std"), math.inf,
                                  objective="mean+std")


# -- the op table ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table():
    pd = pytest.importorskip("pandas")
    pytest.importorskip("yaml")
    return pd.read_parquet(WHATIF / "trace-ST.parquet")


def _write(tmp_path, table):
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    (tmp_path / "meta-X.yaml").write_text((WHATIF / "meta-ST.yaml").read_text())
    return path


@needs_data("whatif_st/trace-ST.parquet", "whatif_st/meta-ST.yaml")
@pytest.mark.parametrize("column, dtype", [("duration", "Float64"), ("stage", "Int64"),
                                           ("rank", "Int64"), ("dp_rank", "Int64")])
def test_op_table_missing_values(tmp_path, table, column, dtype):
    """pandas' NA in a nullable column: accepted (duration, rank) and failing later in
    ``whatif`` with a raw TypeError or an error naming good values, or a TypeError at once."""
    import pandas as pd

    odd = table.copy()
    odd[column] = odd[column].astype(dtype)
    odd.loc[odd.index[9], column] = pd.NA
    with pytest.raises(ScheduleError, match=f"{column} must have no missing values "
                                            f"\\(row 9 is missing it\\)"):
        fastpp.read_op_table(_write(tmp_path, odd))


@needs_data("whatif_st/trace-ST.parquet", "whatif_st/meta-ST.yaml")
def test_op_table_times_past_the_float_range(tmp_path, table):
    """Times near 1e308 read, and ``whatif`` then overflowed its means and named finite
    values as not finite; ``replay`` gave inf."""
    odd = table.astype({"start_ts": np.float64, "duration": np.float64})
    odd[["start_ts", "duration"]] *= 5e307
    with pytest.raises(ScheduleError, match="start_ts must be finite and at most 1e\\+290"):
        fastpp.read_op_table(_write(tmp_path, odd))
    job = fastpp.read_op_table(WHATIF / "trace-ST.parquet")
    with pytest.raises(ScheduleError, match=r"durations must be in \[0, 1e\+290\]"):
        job.replay(np.full((len(job.ops), 1), 1e308))


KINDS = ["params-all-gather", "forward-compute", "backward-compute", "gc",
         "layernorm-grads-all-reduce", "embedding-grads-all-reduce", "grads-reduce-scatter",
         "optimizer-clip-main-grad", "optimizer"]


@pytest.mark.parametrize("duration", [1.0, 0.0])
def test_whatif_with_nothing_to_explain(tmp_path, duration):
    """One rank, no straggler: ``ms`` and ``mw`` were 0/0 = NaN; every op of no time made
    every figure NaN."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("yaml")
    path = tmp_path / "trace-min.parquet"
    pd.DataFrame([dict(dp_rank=0, stage=0, rank=0, step=0, optype=k, start_ts=float(i),
                       duration=duration, seq_id=0, mc=0, mb_id=0, gmc=0)
                  for i, k in enumerate(KINDS)]).to_parquet(path)
    if duration == 0.0:  # (refused as it is read: its start times give its ops no order)
        with pytest.raises(ScheduleError, match="job must have ops that take time"):
            fastpp.read_op_table(path, meta={"dp_size": 1, "pp_size": 1})
        return
    job = fastpp.read_op_table(path, meta={"dp_size": 1, "pp_size": 1})
    got = fastpp.whatif(job)
    assert (got.slowdown, got.ms, got.mw) == (1.0, 0.0, 0.0)


def test_report_takes_a_run_of_several_steps(tmp_path):
    """docs/cli.md's ``measure --steps 20 --out runs/zbv`` then ``report runs/zbv``: the
    report refused the folder (its traces are in step0..step19); it takes the last step,
    the one ``measure`` prints."""
    import shutil

    from fastpp.reports.inputs import load

    for k in (0, 1, 10):
        shutil.copytree(TRACES / "gpipe", tmp_path / "run" / f"step{k}")
    kind, label, run = load(tmp_path / "run", 0)
    assert kind == "measured" and label.endswith("run, step 10 of 3")
    assert run.makespan == fastpp.read_torch_trace(tmp_path / "run" / "step10").makespan


def test_measure_script_rereads_its_own_step_folders_only(tmp_path):
    """``scripts/measure.py --reread`` on a class folder holding a ``stepfoo`` (or
    ``step²``: a digit to ``str.isdigit``, not to ``int``) raised ValueError."""
    import importlib.util
    import shutil

    spec = importlib.util.spec_from_file_location(
        "measure_script", Path(__file__).parents[1] / "scripts" / "measure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("step0", "step1", "stepfoo", "step\u00b2"):
        shutil.copytree(TRACES / "gpipe", tmp_path / "gpipe" / name)
    runs = module.read_steps(tmp_path, ["gpipe"])
    assert len(runs["gpipe"]) == 2
