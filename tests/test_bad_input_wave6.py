"""Bad input to the public entry points (the sixth wave) ends in a ``ScheduleError`` naming
the parameter, the column or the flag: never a silently wrong number, another library's error
or a flag quietly dropped.

One test per defect; each input escaped before its fix (the docstring says how).
"""

import re

import numpy as np
import pytest
from helpers import cli_stderr, needs_data

import fastpp
from fastpp import Costs, ScheduleError, build_schedule, simulate
from fastpp.__main__ import main
from fastpp.model.validate import DATA as SHARED

ST = SHARED / "whatif_st"  # $FASTPP_DATA or shared/data beside the repository
needs_st = needs_data("whatif_st/trace-ST.parquet", "whatif_st/meta-ST.yaml")  # (runs in CI)
MEGATRON = ("--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
            "--vocab-size 1000")


def st_copy(tmp_path, change):
    """Trace ST's table with ``change(table)`` applied, and its meta, written to tmp_path."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("yaml")
    table = pd.read_parquet(ST / "trace-ST.parquet")
    table = change(table)
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    (tmp_path / "meta-X.yaml").write_text((ST / "meta-ST.yaml").read_text())
    return path


def cli_error(capsys, argv) -> str:
    """``main(argv)``'s message: exit status 2, no traceback."""
    assert main(argv) == 2
    err = cli_stderr(capsys)
    assert err.startswith("error: ") and "Traceback" not in err, err
    return err


# ---- the what-if op table ----

@needs_st
def test_one_rank_for_several_stages(tmp_path):
    """Every op labelled rank 0: read, and M_W (which removes the worst ranks' ops by rank)
    came out 1.0 instead of 0.03, silently."""
    def one_rank(t):
        t["rank"] = 0
        return t

    with pytest.raises(ScheduleError, match=r"rank must name one \(dp_rank, stage\) \(rank 0 "
                                            r"holds \[\(0, 0\), \(0, 1\)"):
        fastpp.read_op_table(st_copy(tmp_path, one_rank))


@needs_st
def test_a_collective_ending_before_its_group_starts(tmp_path):
    """Collectives' durations 0: a member ends before its group's latest start, so its
    transfer (end less the latest start) is negative. The replay had refused it as
    ``durations must be finite and >= 0``, a parameter the caller never passed; then the
    reader refused any above the artifact's clock-skew floor, which also refused a send of
    no time whose end rounds 1.4e-14 early (a what-if reviewer's finding). A transfer
    counts as 0 at least: the replay runs, each collective no longer than in the trace."""
    def zero(t):
        t.loc[~t.optype.isin(["forward-compute", "backward-compute"]), "duration"] = 0.0
        return t

    job = fastpp.read_op_table(st_copy(tmp_path, zero))
    steps = fastpp.whatif(job).steps
    assert np.isfinite(steps.replayed).all() and (steps.replayed > 0).all()


# ---- Costs ----

@pytest.mark.parametrize("costs, match", [
    # (the terms the costs have: overhead and send 0 are not named)
    (Costs(1e308, 1e308), r"^costs\.f / m must be at most 1e\+290"),
    (Costs(1e308, 1e308, overhead={"F": 1.0}, send=1.0),
     r"^costs\.f / m \+ costs\.overhead\['F'\] \+ costs\.send\['F'\] must be at most 1e\+290"),
    (Costs(1.0, 2.0, bandwidth=1e-300, message_bytes=1e10),
     r"costs\.comm \+ costs\.message_bytes / costs\.bandwidth must be at most"),
    (Costs(1.0, 2.0, overhead={"W": 1e300}), r"costs\.w / m \+ costs\.overhead\['W'\] must be"),
    (Costs(1.0, 2.0, act=1e300), r"costs\.act / m must be at most"),
])
def test_finite_costs_whose_sums_overflow(costs, match):
    """Finite costs near float64's largest: simulate gave makespan inf and bubble NaN."""
    with pytest.raises(ScheduleError, match=match):
        simulate(build_schedule("interleaved-1f1b", 2, 4, 2), costs)


def test_finite_durations_whose_sums_overflow():
    s = build_schedule("1f1b", 2, 4)
    with pytest.raises(ScheduleError, match=r"durations must be at most 1e\+290 .* op 0 "
                                            r"\(0F0\) of device 0"):
        simulate(s, durations=np.full(s.kind.shape, 1e300))


def test_a_sweep_point_whose_costs_overflow():
    """The sweep returned makespan inf and bubble NaN as a simulated row."""
    pytest.importorskip("pandas")
    df = fastpp.sweep("1f1b", p=2, n=4, f=[1.0, 1e308], b=1e308, invalid="keep",
                      progress=False)
    assert df["reason"].tolist() == [
        f"costs.{k} / m must be at most 1e+290 an op (a schedule sums these, past that to "
        f"infinity)" for k in ("b", "f")]
    assert df["makespan"].isna().all()
    assert fastpp.sweep("1f1b", p=2, n=4, f=1e308, b=1e308, progress=False).empty


def test_a_sweep_point_refused_as_simulate_refuses_it():
    """A sweep took ops of 1e290 to 1e300 that simulate refuses (the sums stayed finite, the
    check was after the kernel), and named no parameter for the point it dropped; now it
    refuses what ``Costs`` refuses, naming the row. Subnormal times leave the throughput
    ``n / makespan`` infinite: refused by both, saying so (simulate priced them until 7
    December 2026, and at 5e-324 a chunk's share rounded to a makespan of 0)."""
    pytest.importorskip("pandas")
    s = build_schedule("1f1b", 2, 2)
    for f in (1e291, 1e300):
        with pytest.raises(ScheduleError, match=r"costs.f / m must be at most 1e\+290"):
            simulate(s, fastpp.Costs(f, 2))
        row = fastpp.sweep("1f1b", p=2, n=2, f=f, invalid="keep", progress=False).iloc[0]
        # the terms the point gives, as Costs names them (each term named until 7 December)
        assert row["reason"].startswith("costs.f / m must be") and np.isnan(row["makespan"])
        given = fastpp.Costs(f, 2, overhead={"F": 1.0})
        with pytest.raises(ScheduleError, match=r"costs.f / m \+ costs.overhead\['F'\] must"):
            simulate(s, given)
        row = fastpp.sweep("1f1b", p=2, n=2, costs=[given], invalid="keep",
                           progress=False).iloc[0]
        assert row["reason"].startswith("costs.f / m + costs.overhead['F'] must be at most")
    assert fastpp.sweep("1f1b", p=2, n=2, f=1e290, progress=False)["makespan"].tolist() == [
        simulate(s, fastpp.Costs(1e290, 2)).makespan]
    with pytest.raises(ScheduleError, match=r"costs must keep the throughput n / makespan "
                                            r"finite \(the times not subnormal; got a makespan "
                                            r"of 6e-310\)"):
        simulate(s, fastpp.Costs(1e-310, 1e-310))
    tiny = fastpp.sweep("1f1b", p=2, n=2, f=1e-310, b=1e-310, invalid="keep", progress=False)
    assert tiny["reason"].tolist() == ["costs must keep the throughput n / makespan finite "
                                       "(the times not subnormal)"]


def test_for_placement_with_chunks_that_do_not_fit_the_map():
    """m=3 with a map of 4 stages on 2 devices (no such schedule): priced each chunk as f/3."""
    with pytest.raises(ScheduleError, match=r"stage_to_device must hold p \* m = 2 \* 3 = 6 "
                                            r"stages .*got 4"):
        Costs(1.0, 2.0).for_placement(p=2, stage_to_device=np.array([0, 1, 1, 0]), m=3)
    # the two-direction schedules' 2p stages with m = 1 stay valid
    Costs(1.0, 2.0).for_placement(p=2, stage_to_device=np.array([0, 1, 1, 0]), m=1)


# ---- plots ----

def test_a_plot_path_of_a_format_matplotlib_cannot_write(tmp_path):
    """``gantt.txt``: matplotlib's own ValueError (``Format 'txt' is not supported``)."""
    pytest.importorskip("matplotlib")
    from fastpp import plot

    result = simulate(build_schedule("1f1b", 2, 4))
    with pytest.raises(ScheduleError, match=r"path must end in a format matplotlib writes "
                                            r"\(.*png.*\) \(got '.*gantt\.txt'\)"):
        plot.gantt(result, tmp_path / "gantt.txt")
    assert not (tmp_path / "gantt.txt").exists()


# ---- the command line: a flag the chosen source does not read ----

def test_explain_refuses_run_flags_with_a_megatron_run(capsys):
    """``--tp 3`` (and ``--schedule wat``) with ``--megatron``: dropped, and the run priced as
    the flags say, exit status 0."""
    err = cli_error(capsys, ["explain", "--megatron", MEGATRON, "--gpus", "2", "--tp", "3"])
    assert "--tp must be given with --hf only: --megatron gives the run" in err
    err = cli_error(capsys, ["explain", "--megatron", MEGATRON, "--gpus", "2",
                             "--schedule", "wat"])
    assert "--schedule must be given with --hf only" in err


def test_simulate_refuses_placement_with_a_schedule(capsys):
    """``--placement wat`` with ``--schedule``: dropped (it is read with ``--from-csv``)."""
    err = cli_error(capsys, ["simulate", "-s", "1f1b", "-p", "2", "-n", "4",
                             "--placement", "wat"])
    assert "--placement must be given with --from-csv only" in err


def test_simulate_refuses_p_with_a_csv(tmp_path, capsys):
    """``-p 3`` with ``--from-csv`` of a 2-device schedule: dropped, the CSV's 2 simulated."""
    csv = fastpp.io.write_torch_csv(build_schedule("zb-h1", 2, 4), tmp_path / "z.csv")
    err = cli_error(capsys, ["simulate", "--from-csv", str(csv), "-p", "3"])
    assert re.search(r"-p must be given with --schedule only: the CSV gives its own", err)


def test_measure_refuses_placement_with_a_schedule(capsys):
    err = cli_error(capsys, ["measure", "-s", "1f1b", "-p", "2", "-n", "4",
                             "--placement", "v"])
    assert "--placement must be given with --from-csv only" in err


def test_plan_summary_top_must_not_be_negative(capsys):
    """``--top -1``: pandas' ``head(-1)`` printed every row but the last, after the plan."""
    err = cli_error(capsys, ["plan", "--model", "llama2-7b", "--gpus", "8", "--top", "-1"])
    assert "--top must be an integer >= 0 (got -1)" in err
    from fastpp.model.plan import summary

    with pytest.raises(ScheduleError, match=r"top must be an integer >= 0 \(got -1\)"):
        summary(None, top=-1)


def test_plan_refuses_recompute_modules_without_selective_rows():
    """``recompute="none"`` with ``recompute_modules=["moe_act"]``: the modules act on the
    selective rows alone, so they priced nothing, silently."""
    with pytest.raises(ScheduleError, match=r"recompute_modules must come with selective "
                                            r"recomputation, the rows they act on: "
                                            r"recompute must include 'selective'"):
        fastpp.model.plan("mixtral-8x7b", 8, seq=1024, global_batch=8, tp=1, pp=2,
                          microbatch=1, schedules=["1f1b"], ep=2, recompute="none",
                          recompute_modules=["moe_act"], workers=1)


def test_load_refuses_a_part_of_another_table(tmp_path):
    """A sweep's part file overwritten by another table: ``sweeps.load`` concatenated it, a
    frame with the other table's column and one chunk's points missing."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = tmp_path / "sweep"
    fastpp.sweep("1f1b", p=2, n=[2, 4, 6, 8], out=out, chunk_size=2, progress=False)
    pd.DataFrame({"x": [1]}).to_parquet(out / "part-000000.parquet")
    with pytest.raises(ScheduleError, match=r"out '.*' has a damaged chunk 0 "
                                            r"\(part-000000.parquet"):
        fastpp.sweeps.load(out)


# ---- the scripts: a bad flag is its message and exit status 2, no traceback ----

def run_script(name, *argv, cwd):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, str(root / "scripts" / name), *argv], cwd=cwd,
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    return run.stderr


@pytest.mark.parametrize("argv, match", [
    (["-p", "0"], "error: -p must be a positive integer (got -p=0)"),  # fastpp's, named
    (["--budgets", "-1"], "--budgets must be an integer >= 0"),  # NumPy's ValueError
    (["--threads", "0"], "--threads must be an integer >= 1"),  # the pool's ValueError
    (["--hidden", "0"], "--hidden must be an integer >= 1"),  # a gamma of 0, silently
])
def test_frontier_script_flags(tmp_path, argv, match):
    assert match in run_script("frontier.py", *argv, "--out", str(tmp_path), cwd=tmp_path)


def test_sweep_script_summary_latency_not_swept(tmp_path):
    """``--summary-comm 5`` where ``--comm 0``: no row at that latency, and the summary
    raised ``budget must be ... one of []`` from deep inside, as a traceback."""
    err = run_script("sweep.py", "--schedules", "1f1b", "-p", "2", "--n-per-p", "1", "-m", "1",
                     "--comm", "0", "--summary-comm", "5", "--out", str(tmp_path), cwd=tmp_path)
    assert "--summary-comm must be one of the --comm values [0.0] (got 5)" in err


def test_seed_demo_script_time_not_a_number(tmp_path):
    err = run_script("seed_demo.py", "--fwd-time", "nan", cwd=tmp_path)
    assert "--fwd-time must be finite and > 0 (got nan)" in err


def test_compile_profile_script_unknown_schedule(tmp_path):
    """``build wat``: a KeyError from the registry."""
    err = run_script("compile_profile.py", "build", "wat", cwd=tmp_path)
    assert "names must be registered schedules" in err


def test_report_refuses_a_sweep_row_without_figures(tmp_path):
    """A sweep table whose simulated row (no reason) has makespan NaN: the page's JSON
    raised ``ValueError: Out of range float values are not JSON compliant``."""
    pytest.importorskip("pandas")
    df = fastpp.sweep("1f1b", p=2, n=[2, 4], progress=False)
    df.loc[0, "makespan"] = np.nan
    with pytest.raises(ScheduleError, match=r"input 'table 0' must hold finite numbers in its "
                                            r"sweep's column 'makespan' where a row has no "
                                            r"reason \(got nan in row 0\)"):
        fastpp.report(df, output=tmp_path / "report.html")


def test_theory_gamma_past_one():
    """``gamma=2`` (M_W twice M_B, which Costs refuses): ZB-H1's closed form gave peaks
    [4, 5, 6, 7], growing down the pipeline, for a run that cannot exist."""
    with pytest.raises(ScheduleError, match=r"gamma must be in \[0, 1\] \(got 2\)"):
        fastpp.theory.peak_activations("zb-h1", 4, 8, 1, gamma=2)


@pytest.mark.parametrize("extra, name", [(dict(p=4), "p"), (dict(schedules="gpipe"),
                                                             "schedules"),
                                         (dict(f=3.0), "f")])
def test_sweep_refuses_axes_beside_points(extra, name):
    """``points`` with ``p=4``, ``schedules="gpipe"`` or ``f=3.0`` beside an ``f`` column: the
    table's values were swept and the keyword dropped."""
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame({"schedule": ["1f1b", "zb-h1"], "p": [2, 2], "n": [4, 4], "m": [1, 1],
                          "f": [1.0, 2.0]})
    with pytest.raises(ScheduleError, match=f"{name} must not be given with points"):
        fastpp.sweep(points=table, progress=False, **extra)
    assert len(fastpp.sweep(points=table, b=3.0, progress=False)) == 2  # no b column: used


def test_torchtitan_schedule_csv_is_not_dropped():
    """``pipeline_parallel_schedule_csv``: torchtitan runs the CSV's order; the import priced
    ``pipeline_parallel_schedule`` (default 1F1B) and said nothing."""
    job = ('[parallelism]\npipeline_parallel_degree = 2\n'
           'pipeline_parallel_schedule_csv = "custom.csv"\n[training]\nseq_len = 128\n')
    with pytest.raises(ScheduleError, match=r"pipeline_parallel_schedule_csv must be empty: the "
                                            r"run is priced by pipeline_parallel_schedule "
                                            r"\(got 'custom.csv'"):
        fastpp.model.from_torchtitan(job, 4, model="llama3-8b")
