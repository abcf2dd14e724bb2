"""The thirteenth bad-input wave (5 December 2026): each case failed on the code before."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_bad_input_wave6 import run_script

import fastpp
from fastpp import ScheduleError, build_schedule, engine
from fastpp.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def test_an_option_the_schedule_does_not_take_is_named_by_its_flag(capsys):
    """``-G`` given to 1F1B read ``options must be among [] for '1f1b' (got ['G'])``."""
    assert main(["simulate", "-s", "1f1b", "-p", "2", "-n", "2", "-G", "2"]) == 2
    assert "error: -G must not be given for '1f1b': it takes no options (got -G=2)" in \
        capsys.readouterr().err
    with pytest.raises(ScheduleError, match=r"^H must not be given for 'interleaved-1f1b': its "
                                            r"options are \['G'\] \(got H=1\)$"):
        build_schedule("interleaved-1f1b", 4, 8, 2, H=1)


def test_plan_names_recompute_modules_by_their_flag(tmp_path, capsys):
    """``recompute_modules act on --recompute='selective' rows``: the subject in library
    words."""
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--recompute", "full",
                 "--recompute-modules", "mlp", "--no-plots", "--out", str(tmp_path)]) == 2
    assert ("error: --recompute-modules must come with selective recomputation, the rows they "
            "act on: --recompute must include 'selective' (got --recompute=['full'] with "
            "--recompute-modules=['mlp'])") in capsys.readouterr().err


def test_an_unknown_swept_schedule_is_named_by_schedules(tmp_path, capsys):
    """sweep.py and plan said ``schedule must be one of``, a parameter neither has."""
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--schedules", "nope",
                 "--no-plots", "--out", str(tmp_path)]) == 2
    assert "error: --schedules must be one of ['1f1b'," in capsys.readouterr().err
    err = run_script("sweep.py", "--schedules", "1f1b", "nope", "--out", str(tmp_path / "o"),
                     "--no-progress", cwd=tmp_path)
    assert err.startswith("error: --schedules must be one of ['1f1b',") and "(got 'nope')" in err
    with pytest.raises(ScheduleError, match=r"^schedules must be one of .* \(got 'nope'\)"):
        fastpp.sweep(["1f1b", "nope"], p=2, n=2, progress=False)


@pytest.mark.parametrize("flags, message", [
    (["--link-delay", "0.1:0:5"], "error: --link-delay rank must be an integer in 0..1 (got 5)"),
    (["--link-delay", "-1"], "error: --link-delay seconds must be finite and >= 0 (got -1.0)"),
    (["--delay", "5:F:0.1"], "error: --delay stage must be an integer in 0..1 (got 5)"),
    (["--delay", "0:F:0.1:2"], "error: --delay probability must be in [0, 1] (got 2.0)")])
def test_measure_names_a_delays_part_by_its_flag(tmp_path, capsys, flags, message):
    """``link_delay rank must ...``: a subject with a word after it was not renamed."""
    assert main(["measure", "-s", "1f1b", "--out", str(tmp_path / "x"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing ran


def test_realtime_where_it_cannot_be_had_is_refused_by_its_flag(tmp_path, capsys, monkeypatch):
    """Each rank died in ``os.sched_setscheduler`` with a traceback where this process may not
    take SCHED_FIFO (or macOS, which has ``os.SCHED_FIFO`` but no ``sched_setscheduler``);
    where it had none, the command line said ``realtime must be False``, a library word."""
    from fastpp.measured import measure
    from fastpp.measured.runner import realtime_denied

    out = tmp_path / "x"
    if hasattr(os, "sched_setscheduler"):  # tried on this thread, then undone
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        realtime_denied()
        assert (os.sched_getscheduler(0), os.sched_getparam(0)) == before

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refused, raising=False)
    monkeypatch.setattr(os, "sched_getscheduler", lambda pid: 0, raising=False)
    monkeypatch.setattr(os, "sched_getparam", lambda pid: None, raising=False)
    assert main(["measure", "-s", "1f1b", "--out", str(out), "--realtime"]) == 2
    assert ("error: --realtime must not be given here: this process may not take SCHED_FIFO, "
            "which needs root or CAP_SYS_NICE (got --realtime)") in capsys.readouterr().err
    with pytest.raises(ScheduleError, match=r"^realtime must be False here: this process may "
                                            r"not take SCHED_FIFO.* \(got realtime=True\)$"):
        measure("1f1b", out=out, realtime=True)
    monkeypatch.delattr(os, "sched_setscheduler")
    assert main(["measure", "-s", "1f1b", "--out", str(out), "--realtime"]) == 2
    assert ("error: --realtime must not be given here: this system has no SCHED_FIFO (got "
            "--realtime)") in capsys.readouterr().err
    assert not out.exists()  # nothing ran


def test_switches_are_named_as_typed():
    """An on flag is no value: ``x must be False`` reads ``--x must not be given``; an on/off
    pair or an off flag is left alone."""
    import argparse

    from fastpp.checks import by_flags, switch_names

    ap = argparse.ArgumentParser()
    ap.add_argument("--realtime", action="store_true")
    ap.add_argument("--no-plots", dest="plots", action="store_false")
    ap.add_argument("--overlap", action=argparse.BooleanOptionalAction)
    assert switch_names(ap) == {"realtime": "--realtime"}
    assert by_flags("realtime must be False here: no SCHED_FIFO (got realtime=True)", {},
                    switch_names(ap)) == ("--realtime must not be given here: no SCHED_FIFO "
                                          "(got --realtime)")


def test_sweep_script_says_when_resume_has_nothing_to_resume(tmp_path):
    """``--resume`` with an ``--out`` that held no sweep started a new one without a word."""
    out = tmp_path / "new"
    argv = [sys.executable, str(ROOT / "scripts" / "sweep.py"), "-p", "2", "--n-per-p", "1",
            "--comm", "0", "--schedules", "1f1b", "--out", str(out), "--no-progress",
            "--no-plots", "--resume"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr[-2000:]
    assert (f"--resume: nothing to resume, {str(out / 'parts')!r} does not exist; starting a "
            f"new sweep in --out {str(out)!r}") in first.stderr
    assert (out / "sweep.parquet").is_file()
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and "nothing to resume" not in again.stderr


def test_engine_refuses_points_it_would_misread():
    """``fastpp.engine.start`` and ``run``, the layer under sweep and plan: ``p = 2.5`` was read
    as 2, ``m = 0`` crashed the kernel, an unknown schedule id or a short key read past it."""
    sid = np.array([fastpp.SCHEDULES["1f1b"].sid])
    p, n, m = np.array([2]), np.array([4]), np.array([1])
    costs = {"f": 1.0, "b": 2.0}
    assert engine.run(sid, p, n, m, p, costs).status.tolist() == [fastpp.batch.OK]
    for args, message in (
            ((sid, np.array([2.5]), n, m, p), r"p must hold positive integers below 2\*\*31 "
                                              r"\(got \[2.5\]\)"),
            ((sid, p, n, np.array([0]), p), r"m must hold positive integers below 2\*\*31 "
                                            r"\(got \[0\]\)"),
            ((np.array([99]), p, n, m, p), r"sid must hold integers in 0\.\.\d+ \(got \[99\]\)"),
            ((sid, p, np.array([4, 4]), m, p), r"sid, p, n, m and G must be 1-D arrays of one "
                                               r"length, a value per point \(got shapes \[\(1,\), "
                                               r"\(1,\), \(2,\), \(1,\), \(1,\)\]\)")):
        with pytest.raises(ScheduleError, match=message):
            engine.run(*args, costs)
    values, at = engine.cost_layout(costs, 2)
    with pytest.raises(ScheduleError, match=r"at must be cost_layout's, of shape \(1, \d+, 2\) "
                                            r"for 1 points \(got \(2, \d+, 2\)\)"):
        engine.start(sid, p, n, m, p, values, at)


def test_evaluate_durations_of_another_shape():
    """``evaluate`` read a ``durations`` of too few columns past its end (the kernel copies
    a column per cost column without a shape check since it stopped compiling NumPy's)."""
    import numpy as np

    from fastpp import Costs, build_schedule
    from fastpp.compiled import evaluate

    s = build_schedule("1f1b", 2, 4)
    c, costs = s.compiled(), [Costs(1.0, 2.0).per_stage(s)] * 3
    with pytest.raises(ScheduleError, match=r"durations must have shape \(N=16, B=3\), an op "
                                            r"time per op and column \(got shape \(16, 2\)\)"):
        evaluate(c, costs, durations=np.ones((c.num_ops, 2)))
    assert list(evaluate(c, costs, durations=np.ones((c.num_ops, 3), int)).makespan) == [10.0] * 3


def test_the_search_clock_leaves_out_numbas_compiles(monkeypatch):
    """On an empty kernel cache the candidates' first compile took 30 s of a 10 s limit, so
    the exact model never ran and a 3-device problem came back 72 where 60 is optimal (a CI
    run that met it first). The limit is for searching: a compile (here a compile event of
    1.2 s around a sleep, as Numba raises them) does not use it up."""
    import time

    from numba.core import event

    import fastpp
    from fastpp import Costs
    from fastpp._jit import compile_clock
    from fastpp.search import optimizer

    pytest.importorskip("ortools")
    with compile_clock() as clock:
        with event.trigger_event("numba:compile", data={}):
            with event.trigger_event("numba:compile", data={}):  # a callee's: counted once
                time.sleep(0.2)
    assert 0.2 <= clock.seconds < 1.0
    original = optimizer.fixed_candidates

    def compiling_first(problem):
        with event.trigger_event("numba:compile", data={}):
            time.sleep(1.2)
        yield from original(problem)

    monkeypatch.setattr(optimizer, "fixed_candidates", compiling_first)
    f, w = [10.0, 8.0, 10.0, 6.0, 10.0, 8.0], [8.0, 4.0, 8.0, 8.0, 12.0, 6.0]
    found = fastpp.optimize(3, 2, Costs(f, w, w=w, gamma=0.4), memory=1.0, placement="v",
                            method="exact", progress=False, time_limit=1.0)
    assert found.optimal and found.value == 60 and found.method == "exact"
