"""The eighteenth bad-input wave (6 December 2026, night): a reviewer's cross-check of the
Python API against a simulator of their own, and its edge cases. Each case failed on the code
before it."""

import re

import numpy as np
import pytest

import fastpp
from fastpp import Costs, Noise, ScheduleError, ScheduleTypeError, build_schedule, simulate

ONE = build_schedule("1f1b", 2, 4)


@pytest.mark.parametrize("call", [
    lambda: simulate(ONE, noise=Noise(), samples=2, seed=None),
    lambda: simulate(ONE, noise=Noise(), samples=2, seed=1.5),
    lambda: simulate(ONE, noise=Noise(), samples=2, seed=True),
    lambda: simulate(ONE).memory_curve("0"),
    lambda: simulate(ONE, noise=Noise(), samples=2).times(1.0),
    lambda: simulate(ONE, noise=Noise(), samples=2).op_times(0.0),
    lambda: ONE.token(0.0, 0),
    lambda: fastpp.sweep("1f1b", p=2.0, n=2, progress=False),
    lambda: Noise(spike=0.1),
    lambda: Noise(blocking="yes"),
    lambda: Noise(dist=3),
], ids=["seed None", "seed 1.5", "seed True", "memory_curve '0'", "times 1.0",
        "op_times 0.0", "token 0.0", "sweep p 2.0", "spike 0.1", "blocking 'yes'", "dist 3"])
def test_a_value_of_the_wrong_type_is_a_type_error(call):
    """A value of the wrong type raised a plain ScheduleError here, where the same argument
    elsewhere (``samples=1.5``, ``optimize``'s ``seed=1.5``, ``build_schedule``'s ``p=2.0``)
    raises a ScheduleTypeError, which is also a TypeError as simulate.md says."""
    with pytest.raises(ScheduleTypeError, match=r"must (be|hold) .*\(got "):
        call()


def test_right_type_out_of_range_stays_a_value_error():
    for call in (lambda: simulate(ONE, noise=Noise(), samples=2, seed=-1),
                 lambda: simulate(ONE).memory_curve(2),
                 lambda: Noise(dist="normal"),
                 lambda: Noise(spike=(0.1, 2.0, 3.0)),
                 lambda: fastpp.sweep("1f1b", p=0, n=2, progress=False)):
        with pytest.raises(ScheduleError) as err:
            call()
        assert not isinstance(err.value, TypeError), err.value


def test_minus_zero_costs_equal_zero_costs():
    """``w=-0.0`` passes the ``>= 0`` check and prices as 0, but compared and hashed apart:
    duplicates as dict keys and sweep axes."""
    assert Costs(1, 2, w=0.0) == Costs(1, 2, w=-0.0)
    assert hash(Costs(1, 2, w=0.0)) == hash(Costs(1, 2, w=-0.0))
    assert len({Costs(1, 2, comm=[0.0, -0.0]), Costs(1, 2, comm=[-0.0, 0.0])}) == 1
    assert Costs(1, 2, w=0.0) != Costs(1, 2, w=0.5)


def test_results_are_read_only():
    """A Result is documented read-only, but its arrays took writes, and its idle time, memory
    curve and Monte Carlo mean followed them (``r.busy[0] = 100`` gave a negative idle)."""
    r = simulate(ONE, Costs(1, 2, comm=0.1))
    for name in ("busy", "span", "peak_activations", "peak_live", "start", "end",
                 "mem_start", "mem_end", "live_start", "live_end"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(r, name)[0] = 100
    fast = simulate(ONE)  # (a point without hand-offs: the compiled path)
    for name in ("busy", "start", "end", "peak_live"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(fast, name)[0] = 100
    assert (fast.idle >= 0).all() and (r.idle >= 0).all()
    mc = simulate(ONE, noise=Noise(cov=0.1), samples=5)
    for name in ("makespan", "busy", "span"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(mc, name)[0] = 0
    assert mc.mean == pytest.approx(float(np.mean(mc.makespan)))


def test_cli_refuses_before_the_work_what_it_would_ignore_or_fail_after(capsys, tmp_path):
    """``--fb`` on a schedule without overlapped pairs changed nothing and was taken (``-G``
    there is refused); ``--gantt x.txt`` printed the whole table, or ran a whole search, and
    then failed on the picture's format."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    assert main(["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--fb", "2"]) == 2
    assert cli_stderr(capsys) == ("error: --fb must not be given for '1f1b': it runs no "
                                  "overlapped F&B pairs (got --fb 2)\n")
    assert main(["simulate", "-s", "dualpipev", "-p", "4", "-n", "8", "--fb", "2.5"]) == 0
    capsys.readouterr()
    for command in (["simulate", "-s", "1f1b", "-p", "4", "-n", "8"],
                    ["optimize", "-p", "4", "-n", "8", "--memory-limit", "2"]):
        for flag in ("--gantt", "--memory-plot"):
            assert main([*command, flag, str(tmp_path / "x.txt")]) == 2
            captured = capsys.readouterr()
            assert captured.out == "" and f"error: {flag} must end in a format matplotlib " \
                                          f"writes" in captured.err


@pytest.mark.parametrize("given, message", [
    (dict(ep=3), r"ep must be 1 for a dense model \(llama2-7b has no experts; got ep=3\)"),
    (dict(ep=[2, 4]), r"ep must be 1 for a dense model .*got ep=\[2, 4\]\)"),
    (dict(etp=3), r"etp must be 1 for a dense model \(llama2-7b has no experts; got etp=3\)"),
    (dict(replicate=3), r"replicate must divide gpus=8 \(got replicate=3\)"),
    (dict(first_layers=100), r"first_layers \+ last_layers must be at most the layers 32 "
                             r"\(got first_layers=100, last_layers=None\)"),
    (dict(first_layers=[20, 30], last_layers=20), r"first_layers \+ last_layers must be at "
                                                  r"most the layers 32"),
])
def test_plan_refuses_an_axis_no_row_could_run(given, message):
    """Each printed "nothing fits" with every row's reason the flag's, and exit 0: values
    that no configuration of the grid can take are refused up front. A value beside one
    that runs keeps its rows' reasons."""
    from fastpp.model import plan

    with pytest.raises(ScheduleError, match=message):
        plan("llama2-7b", 8, seq=4096, global_batch=64, schedules=["1f1b"], **given)
    rows = plan("llama2-7b", 8, seq=4096, global_batch=64, schedules=["1f1b"], tp=2, pp=2,
                microbatch=1, recompute="none", ep=[1, 2])
    assert set(rows["ep"]) == {1, 2} and rows.loc[rows["ep"] == 2, "step_time"].isna().all()


def test_numpy_scalars_are_their_python_values_in_choices():
    """A name read from a frame is an ``np.str_``; the type check of ``one_of`` must take it
    as the string it is (and NumPy's bools and integers likewise)."""
    from fastpp.checks import one_of

    one_of(np.str_("a"), "x", ("a", "b"))
    one_of(np.bool_(True), "x", (False, True))
    one_of(np.int64(2), "x", (1, 2))
    assert simulate(build_schedule(np.str_("1f1b"), 2, 4)).makespan == 15.0
    with pytest.raises(ScheduleTypeError, match=r"x must be one of \[False, True\] \(got 1\)"):
        one_of(np.int64(1), "x", (False, True))


def test_sweep_script_checks_its_flags_before_clearing_the_last_sweep(tmp_path):
    """A fresh run cleared ``--out/parts`` before it checked its flags: one mistyped flag
    deleted the last sweep's chunks, and left the folder refused ("not a sweep's") to every
    run after. ``--out ''`` wrote the job into the working folder, and ``--out '~/x'``
    split it between ``$HOME/x`` (the library's parts) and a literal ``./~/x``, then failed
    with a traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from test_bad_input_wave6 import run_script

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    small = ["--no-plots", "--no-progress", "-p", "2", "--n-per-p", "1", "--schedules", "1f1b"]

    def ok(*argv, env=None):
        run = subprocess.run([sys.executable, str(root / "scripts" / "sweep.py"), *small,
                              *argv], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, PYTHONPATH=str(root),
                                                   **(env or {})))
        assert run.returncode == 0, run.stderr[-2000:]

    ok("--out", str(out))
    chunk = next((out / "parts").glob("part-*"))
    err = run_script("sweep.py", *small, "--out", str(out), "--f", "-1", cwd=tmp_path)
    assert "error: --f must be finite and > 0 (got -1.0)" in err
    assert chunk.exists()  # the last sweep's chunks are still there
    ok("--out", str(out))  # and the folder still takes a run
    err = run_script("sweep.py", *small, "--out", "", cwd=tmp_path)
    assert "argument --out: must be a folder path (got '')" in err
    assert not (tmp_path / "parts").exists() and not (tmp_path / "sweep.parquet").exists()
    ok("--out", "~/x", env={"HOME": str(tmp_path / "home")})
    assert (tmp_path / "home" / "x" / "sweep.parquet").is_file()
    assert not (tmp_path / "~").exists()


def test_report_reads_and_writes_home_paths_and_names_a_nan_cost(tmp_path, monkeypatch):
    """``report(..., output='~/r.html')`` wrote a literal ``./~/r.html`` (or said the folder
    did not exist) where a sweep's ``out`` expands ``~``; a sweep table with a NaN ``f``
    raised ``TypeError: Costs.__init__() missing 1 required positional argument: 'f'``."""
    pytest.importorskip("plotly")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    rows = fastpp.sweep("1f1b", p=[2], n_per_p=[1, 2], progress=False)
    rows.to_parquet(tmp_path / "s.parquet")
    assert fastpp.report("~/s.parquet", output="~/r.html") == tmp_path / "r.html"
    assert (tmp_path / "r.html").is_file() and not (tmp_path / "~").exists()
    rows.loc[:, "f"] = np.nan
    with pytest.raises(ScheduleError, match=r"a sweep row must hold a point fastpp can "
                                            r"simulate \(the row of point 0, 1f1b, p=2, n=2, "
                                            r"m=1: costs.f must be finite and > 0 \(got nan\)"):
        fastpp.report(rows, output=tmp_path / "bad.html")



def test_sweep_script_interrupted_during_its_imports_says_so(tmp_path):
    """Ctrl-C in the main job's first 1.5 s (its imports) printed a KeyboardInterrupt
    traceback; it now says the sweep had not started and exits 130, as an interrupted sweep
    does (past its imports, the sweep's own handling says so alike)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    run = subprocess.Popen([sys.executable, str(root / "scripts" / "sweep.py"), "--out",
                            str(tmp_path / "out"), "--no-plots"], cwd=tmp_path,
                           stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONPATH=str(root)))
    time.sleep(0.5)  # (past the handler at the script's top, likely before the imports end)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in err, err[-2000:]
    # (before the sweep, or in it: a warm machine sweeps a chunk in 1.5 s)
    assert re.search(r"\ninterrupted(:| before the sweep started)", err), err


def test_a_plan_row_without_a_pipeline_writes_a_torchtitan_job():
    """Every ``p = 1`` row of a plan failed ``to_torchtitan``: ``RunConfig.from_row`` keeps
    the row's one-stage layout (``Et*32L``), which is no split, and the message blamed
    ``m = 1``. A real split or more chunks without a pipeline are still refused."""
    from fastpp.model import MODELS, RunConfig, plan
    from fastpp.model.torchtitan import from_torchtitan, to_torchtitan

    model = MODELS["llama3-8b"]
    row = plan(model, 8, seq=8192, global_batch=64, pp=1, tp=2, schedules=["1f1b"],
               recompute="none", microbatch=1, framework="torchtitan", zero=3,
               zero3="step").iloc[0]
    run = RunConfig.from_row(row, seq=8192, framework="torchtitan", zero3="step")
    assert (run.p, run.m, str(run.layout)) == (1, 1, "Et*32L")
    back = from_torchtitan(to_torchtitan(run, model), gpus=8, model=model).config
    assert (back.t, back.p, back.d, back.zero) == (2, 1, 4, 3)
    with pytest.raises(ScheduleError, match=r"cannot state a layer split or m = 4 without a "
                                            r"pipeline \(p = 1\)"):
        to_torchtitan(run.replace(m=4, layout=None, schedule="interleaved-1f1b"), model)
