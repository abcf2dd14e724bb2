"""fastpp.sweep: rows equal simulate(), invalid points, resume after a kill, Dask, the script."""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fastpp
from fastpp import (
    Costs,
    ScheduleError,
    best_within_budget,
    build_schedule,
    pareto_front,
    simulate,
    sweep,
)
from fastpp.sweeps import load

ROOT = Path(__file__).resolve().parents[1]
GRID = dict(p=[2, 3, 4, 8], n_per_p=[1, 2, 3], m=[1, 2], w=[0.0, 0.5], comm=[0.0, 0.1],
            gamma=0.5, progress=False)
METRICS = ["makespan", "bubble_ratio", "span_bubble_ratio", "peak_activations_max",
           "peak_activations_min", "peak_live_max", "throughput", "num_ops", "parameter_units"]


@pytest.fixture(scope="module")
def grid_frame():
    return sweep(**GRID)


def test_every_row_equals_simulate(grid_frame):
    df = grid_frame
    assert set(df["schedule"]) == set(fastpp.SCHEDULES)
    assert len(df) > 300
    for row in df.itertuples():
        sched = build_schedule(row.schedule, row.p, row.n, row.m)
        res = simulate(sched, Costs(row.f, row.b, w=row.w, comm=row.comm, gamma=row.gamma))
        got = (row.makespan, row.bubble_ratio, row.span_bubble_ratio, row.peak_activations_max,
               row.peak_activations_min, row.peak_live_max, row.num_ops, row.parameter_units)
        want = (res.makespan, res.bubble_ratio, res.span_bubble_ratio,
                res.peak_activations.max(), res.peak_activations.min(), res.peak_live.max(),
                sched.num_ops, sched.parameter_units.max())
        assert got == want, row
        assert row.throughput == row.n / row.makespan


def test_consecutive_points_share_a_build_only_when_their_schedule_is_the_same():
    """The sweep kernel builds a schedule once for consecutive points with the same (schedule,
    p, n, m, G); a change in any one of them, or none with other costs, must be seen."""
    from fastpp import batch
    from fastpp.sweeps.points import cost_table

    steps = [("interleaved-1f1b", 4, 12, 2, 4), ("interleaved-1f1b", 4, 12, 2, 4),
             ("looped-bfs", 4, 12, 2, 4), ("looped-bfs", 2, 12, 2, 4),
             ("looped-bfs", 2, 10, 2, 4), ("looped-bfs", 2, 10, 3, 4),
             ("interleaved-1f1b", 2, 10, 3, 4), ("interleaved-1f1b", 2, 10, 3, 2)]
    sid = np.array([fastpp.SCHEDULES[name].sid for name, *_ in steps])
    p, n, m, G = (np.array(col) for col in list(zip(*steps, strict=True))[1:])
    comm = np.linspace(0.0, 0.3, len(steps))
    ones = np.ones(len(steps))
    cols = dict(f=ones, b=2 * ones, w=0 * ones, i=np.nan * ones, comm=comm, gamma=ones,
                fb=np.nan * ones, act=ones, bandwidth=np.nan * ones, message_bytes=0 * ones,
                overhead=0 * ones, send=0 * ones, point=np.arange(len(steps)))
    values, at = cost_table(cols, None)
    out = np.empty((len(steps), len(batch.COLUMNS)))
    peaks, peak_at = np.zeros(p.sum()), np.r_[0, np.cumsum(p)[:-1]]
    batch.build_and_simulate(sid, p, n, m, G, values, at, np.arange(len(steps)), out, peaks,
                             peak_at)
    at_device = 0
    for (name, *point, g), row, latency in zip(steps, out, comm, strict=True):
        sched = build_schedule(name, *point, G=g) if name == "interleaved-1f1b" else \
            build_schedule(name, *point)
        res = simulate(sched, Costs(1.0, 2.0, comm=latency))
        assert (row[0], row[3], row[6]) == (res.makespan, res.peak_activations.max(),
                                            sched.num_ops), (name, point, g)
        assert peaks[at_device:at_device + sched.p].tolist() == res.peak_activations.tolist()
        at_device += sched.p


def _spied_warm_up(monkeypatch, tmp_path, start: bool):
    """The warm-up module with its markers in ``tmp_path``, a fresh process's state, its logic
    as with the JIT on (Numba off, it compiles nothing), and lists that record each second
    process's command (started for real with ``start``) and each ``build_small``'s names."""
    from fastpp.sweeps import warmup as module

    helpers, built = [], []
    popen, build_small = subprocess.Popen, module.build_small
    monkeypatch.setattr(module.subprocess, "Popen", lambda args, **kwargs: helpers.append(args)
                        or (popen(args, **kwargs) if start else None))
    monkeypatch.setattr(module, "build_small",
                        lambda names, run=False: built.append(list(names)) or
                        build_small(names, run))
    monkeypatch.setattr(module, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(module, "_warm", set())
    monkeypatch.setattr(module, "disabled", lambda: False)
    return module, helpers, built


def test_warm_up_compiles_in_a_second_process_only_when_the_cache_is_new(
        monkeypatch, tmp_path, capsys):
    module, helpers, _ = _spied_warm_up(monkeypatch, tmp_path, start=True)  # no marker yet
    assert module.warm_up(announce=True)
    assert len(helpers) == 1 and f"build_small({module.SECOND_PROCESS!r})" in helpers[0][-1]
    assert {"v-half", "dualpipe"} <= set(module.SECOND_PROCESS) < set(fastpp.SCHEDULES)
    assert "compiling the kernels" in capsys.readouterr().err
    assert (tmp_path / "cache" / "sweep-kernel.ready").exists()
    monkeypatch.setattr(module, "_warm", set())  # a new process: the markers are there
    module.warm_up(announce=True)
    assert len(helpers) == 1 and capsys.readouterr().err == ""


def test_a_dask_sweep_says_when_the_kernels_compile(monkeypatch, tmp_path, capsys):
    """A local cluster's sweep compiles the kernels here first (its workers load them): on a
    cold cache that half minute said nothing, the bar at 0%, where threads say it."""
    pytest.importorskip("dask.distributed")
    _spied_warm_up(monkeypatch, tmp_path, start=True)  # no marker: compiles (or loads) here
    sweep(["1f1b"], p=2, n=2, m=1, executor="dask", workers=1)
    assert "compiling the kernels" in capsys.readouterr().err


def test_ctrl_c_while_the_kernels_load_stops_the_sweep(monkeypatch, tmp_path):
    """Ctrl-C while Numba loads a cached kernel is raised inside llvmlite's ctypes callback
    (``ExecutionEngine._raw_object_cache_notify``), where Python only reports it to
    ``sys.unraisablehook``: the sweep ran on to its end (a review). The warm-up raises it,
    before marking anything loaded; other unraisable exceptions still reach the hook."""
    import ctypes

    module, _, _ = _spied_warm_up(monkeypatch, tmp_path, start=False)
    module.warm_up(schedules=["1f1b"])  # the cache marked: the next process only loads
    monkeypatch.setattr(module, "_warm", set())
    loaded = module._sweep_kernel

    def interrupted():  # a KeyboardInterrupt raised in a ctypes callback, as Numba's is
        def notify():
            raise KeyboardInterrupt

        ctypes.CFUNCTYPE(None)(notify)()
        loaded()

    monkeypatch.setattr(module, "_sweep_kernel", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fastpp.sweep(["1f1b"], p=2, n=2, progress=False, workers=1)
    assert "" not in module._warm  # nothing said loaded
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    with module._interrupts_kept() as seen:
        ctypes.CFUNCTYPE(None)(lambda: 1 / 0)()
    assert not seen and reported[0].exc_type is ZeroDivisionError


def test_ctrl_c_drops_the_slices_not_started(monkeypatch):
    """A Ctrl-C in a threaded sweep (here raised by its first slice) returns once the slices
    already running end: the pool's exit had run every queued slice first, up to two chunks'
    worth (1.6-6.6 s of a default sweep, a review), their rows then thrown away. Two chunks of
    six slices on two threads: the one that raised and at most one more a thread."""
    fastpp.sweep(["1f1b", "gpipe"], p=[2], n_per_p=[1], progress=False)  # compiled first
    from fastpp import batch

    calls = []
    real = batch.build_and_simulate

    def slow(*args):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        time.sleep(0.2)
        return real(*args)

    monkeypatch.setattr(batch, "build_and_simulate", slow)
    with pytest.raises(KeyboardInterrupt):
        fastpp.sweep(["1f1b", "gpipe"], p=[2, 4, 8, 16, 32, 64], n_per_p=list(range(1, 9)),
                     comm=[0.1 * k for k in range(8)], progress=False, workers=2,
                     chunk_size=384)
    assert len(calls) <= 1 + 2 * 2, len(calls)  # (all 12 ran before)


def test_warm_up_compiles_only_the_schedules_a_sweep_needs(monkeypatch, tmp_path):
    """On a new cache a sweep of two schedules compiles those alone (in this process: both
    belong to it, so no second process starts) and marks them; a new process sweeping one
    more compiles that one."""
    module, helpers, built = _spied_warm_up(monkeypatch, tmp_path, start=False)
    module.warm_up(schedules=["1f1b", "gpipe"])
    assert built == [["gpipe", "1f1b"]] and not helpers
    module.warm_up(schedules=["1f1b"])  # this process has it
    assert len(built) == 1
    marked = sorted(path.name for path in (tmp_path / "cache").iterdir())
    assert marked == ["1f1b.ready", "gpipe.ready", "sweep-kernel.ready"]
    monkeypatch.setattr(module, "_warm", set())  # a new process
    module.warm_up(schedules=["zbv", "1f1b"])
    assert built[1:] == [["zbv"]] and not helpers


def test_warm_up_for_plan_compiles_the_point_plans_kernels_in_a_second_process(monkeypatch,
                                                                               tmp_path):
    """``plan`` runs its shared builds on point plans: on a new cache the second process
    compiles those kernels (as long as every generator) while this one compiles the
    generators, the schedules of ``SECOND_PROCESS`` among them; then a marker says so."""
    module, helpers, built = _spied_warm_up(monkeypatch, tmp_path, start=True)
    apart = module.SECOND_PROCESS[0]
    module.warm_up(schedules=["1f1b", apart], plans=True)
    assert len(helpers) == 1 and helpers[0][-1].endswith("build_small(()); _plan_kernels()")
    assert built == [["1f1b", apart]]  # both here: the helper has the plans' kernels
    marked = sorted(path.name for path in (tmp_path / "cache").iterdir())
    assert marked == sorted(["1f1b.ready", f"{apart}.ready", "plan-kernels.ready",
                             "sweep-kernel.ready"])
    monkeypatch.setattr(module, "_warm", set())  # a new process: nothing to compile
    module.warm_up(schedules=["1f1b"], plans=True)
    assert len(helpers) == 1 and len(built) == 1


def test_warm_up_for_plan_without_other_work_starts_no_second_process(monkeypatch, tmp_path):
    """Where only the point plans' kernels are missing (after a sweep), a second process would
    have had nothing to run beside: they compile (or load) here; and with Numba off nothing
    compiles, so nothing starts or is built, and no marker is written."""
    from fastpp.sweeps import warmup as module

    helpers, built, ran = [], [], []
    monkeypatch.setattr(module, "_helper", lambda names, plans=False: helpers.append(names))
    monkeypatch.setattr(module, "build_small", lambda names, run=False: built.append(names))
    monkeypatch.setattr(module, "_sweep_kernel", lambda: ran.append("sweep"))
    monkeypatch.setattr(module, "_plan_kernels", lambda: ran.append("plan"))
    cache = tmp_path / "cache"
    monkeypatch.setattr(module, "CACHE_DIR", str(cache))
    monkeypatch.setattr(module, "_warm", set())
    monkeypatch.setattr(module, "disabled", lambda: False)
    cache.mkdir()
    for name in ("1f1b.ready", "sweep-kernel.ready"):
        (cache / name).touch()
    module.warm_up(schedules=["1f1b"], plans=True)
    assert helpers == [] and built == [] and ran == ["plan"]
    assert (cache / "plan-kernels.ready").exists()
    monkeypatch.setattr(module, "_warm", set())
    monkeypatch.setattr(module, "CACHE_DIR", str(tmp_path / "off"))
    monkeypatch.setattr(module, "disabled", lambda: True)
    assert module.warm_up(schedules=["1f1b", module.SECOND_PROCESS[0]], plans=True)
    assert helpers == [] and built == [] and ran == ["plan"]
    assert not (tmp_path / "off").exists()


def test_warm_up_on_two_threads_at_once_starts_one_second_process(monkeypatch, tmp_path):
    """Threads warming up at once take turns: each had started its own second process."""
    import threading

    module, helpers, built = _spied_warm_up(monkeypatch, tmp_path, start=False)
    both = threading.Barrier(2)

    def warm():
        both.wait()
        module.warm_up(schedules=["1f1b", module.SECOND_PROCESS[0]])

    threads = [threading.Thread(target=warm) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(helpers) == 1 and len(built) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_warm_up_in_a_child_forked_while_a_thread_held_its_lock(monkeypatch):
    """A child forked while another thread warmed up inherited the lock held, with no thread
    to free it: its next sweep or plan waited forever."""
    import threading

    from fastpp.sweeps import warmup as module

    module.warm_up(schedules=["1f1b"])
    monkeypatch.setattr(module, "_warm", set())  # the child must take the lock to warm up
    held, release = threading.Event(), threading.Event()

    def hold():
        with module._LOCK:
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(30)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 once warm, killed after 60 s
        signal.alarm(60)
        module.warm_up(schedules=["1f1b"])
        os._exit(0)
    release.set()
    thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_warm_up_marks_no_schedule_its_failed_second_process_owned(monkeypatch, tmp_path):
    """A second process that fails (here a real one exiting 1) leaves its schedules unmarked:
    the next process compiles them again instead of trusting a marker. Bad names are
    refused."""
    from fastpp.sweeps import warmup as module

    apart, here = module.SECOND_PROCESS[0], "1f1b"
    assert here not in module.SECOND_PROCESS
    monkeypatch.setattr(module, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(module, "_warm", set())
    monkeypatch.setattr(module, "build_small", lambda names, run=False: None)
    monkeypatch.setattr(module, "_sweep_kernel", lambda: None)
    monkeypatch.setattr(module, "_helper", lambda names, plans=False: subprocess.Popen(
        [sys.executable, "-c", "raise SystemExit(1)"]))
    assert module.warm_up(schedules=[here, apart])
    if not module.disabled():
        marked = sorted(path.name for path in (tmp_path / "cache").iterdir())
        assert marked == [f"{here}.ready", "sweep-kernel.ready"]
    for bad in ("gpipe-x", ["nope"], 3):
        with pytest.raises(ScheduleError, match="schedules must be one of"):
            module.warm_up(schedules=bad)


def test_skip_reasons_are_read_only_and_shared_by_selections(grid_frame, tmp_path):
    """pandas deep-copies attrs on every selection: the reasons are one shared, read-only
    mapping (iterating a frame's rows was ten times slower with a dict), that Parquet keeps."""
    reasons = grid_frame.attrs["skip_reasons"]
    assert grid_frame[grid_frame["p"] > 2].attrs["skip_reasons"] is reasons
    with pytest.raises(TypeError, match="read-only"):
        reasons["x"] = 1
    grid_frame.to_parquet(tmp_path / "t.parquet")
    assert pd.read_parquet(tmp_path / "t.parquet").attrs["skip_reasons"] == dict(reasons)


def test_invalid_points_are_counted_or_kept(grid_frame):
    kept = sweep(**GRID, invalid="keep")
    total = len(fastpp.SCHEDULES) * 4 * 3 * 2 * 2 * 2  # schedules x p x n_per_p x m x w x comm
    assert len(kept) == total
    assert grid_frame.attrs["skipped"] == total - len(grid_frame)
    assert sum(grid_frame.attrs["skip_reasons"].values()) == grid_frame.attrs["skipped"]
    bad = kept[kept["reason"] != ""]
    assert bad["makespan"].isna().all() and kept[kept["reason"] == ""]["makespan"].notna().all()
    reasons = set(bad["reason"])
    assert "m must be 1 (one stage per device) for '1f1b' (got m=2)" in reasons
    assert "p must be even for 'dualpipe' (got p=3)" in reasons
    # the kept valid rows are the dropped run's rows
    valid = kept[kept["reason"] == ""].drop(columns="reason").reset_index(drop=True)
    pd.testing.assert_frame_equal(valid, grid_frame, check_dtype=False)


def test_w_above_b_is_an_invalid_point():
    df = sweep(["zb-h1"], p=2, n=4, m=1, b=[1.0, 2.0], w=1.5, progress=False, invalid="keep")
    assert df["reason"].tolist() == ["w must be <= b", ""]


def test_a_given_i_is_a_sweep_axis_and_lifts_w_above_b():
    """``i`` as a scalar axis and in a Costs axis: the rows equal simulate()'s, a point with
    ``w > b`` is valid where ``i`` is given, and the column holds NaN where it is not."""
    df = sweep(["zb-h1", "zbv"], p=2, n=4, b=2.0, w=[1.0, 2.5], i=[None, 1.5], progress=False,
               invalid="keep")
    assert df[df["i"].isna() & (df["w"] == 2.5)]["reason"].eq("w must be <= b").all()
    ok = df[df["reason"] == ""]
    assert len(ok) == 6
    for row in ok.itertuples():
        i = None if np.isnan(row.i) else row.i
        res = simulate(build_schedule(row.schedule, row.p, row.n, row.m),
                       Costs(1.0, 2.0, w=row.w, i=i))
        assert row.makespan == res.makespan, row
    objects = [Costs(1.0, [2.0, 2.5], w=1.0, i=[1.25, 1.75]), Costs(1.0, 2.0, w=1.0)]
    rows = sweep(["zb-h1", "interleaved-zb"], p=2, n=4, costs=objects, progress=False)
    assert len(rows) == 4
    for row in rows.itertuples():
        res = simulate(build_schedule(row.schedule, row.p, row.n, row.m), objects[row.costs])
        assert row.makespan == res.makespan, row
    assert rows[rows["costs"] == 0]["i"].isna().all()  # an array: NaN in the scalar column


def test_costs_axis_takes_per_stage_arrays_and_bytes():
    """Costs as a grid axis: per-device and per-stage arrays, bytes, links; rows equal
    simulate() with the same Costs, and arrays that do not fit a point make it invalid."""
    loop = Costs(1.0, 2.0, w=1.0, act=3e9)
    uneven = Costs([1.0, 2.0, 1.5, 1.0], 2.0, w=[0.5, 1.0, 1.0, 1.0], act=[1e9, 2e9, 1e9, 1e9],
                   bandwidth=1e10, message_bytes=1e8, comm=0.01, gamma=0.25)
    per_stage = Costs(np.linspace(1.0, 2.0, 8), np.linspace(2.0, 3.0, 8), w=0.5, fb=2.5)
    objects = [loop, uneven, per_stage]
    df = sweep(["1f1b", "zbv", "interleaved-1f1b", "dualpipe"], p=[2, 4], n=8, m=None,
               costs=objects, progress=False, invalid="keep")
    assert len(df) == 4 * 2 * 3 and df.columns[18] == "costs"
    ok = df[df["reason"] == ""]
    assert len(ok) >= 12
    for row in ok.itertuples():
        res = simulate(build_schedule(row.schedule, row.p, row.n, row.m), objects[row.costs])
        assert (row.makespan, row.peak_activations_max, row.span_bubble_ratio) == (
            res.makespan, res.peak_activations.max(), res.span_bubble_ratio), row
    assert ok[ok["costs"] == 0]["peak_activations_max"].min() >= 3e9 / 2  # bytes, chunk of m=2
    # the scalar cost columns show scalars, NaN for arrays
    assert df[df["costs"] == 1]["b"].eq(2.0).all() and df[df["costs"] == 1]["f"].isna().all()
    # 1F1B with p=2 has V=2 stages: four values fit neither p nor V
    bad = df[(df["schedule"] == "1f1b") & (df["p"] == 2) & (df["costs"] == 1)]
    assert bad["reason"].tolist() == ["costs.f must be a scalar or an array of length p=2 or "
                                      "V=2 (got 4)"]
    with pytest.raises(ScheduleError, match=r"give costs or the scalar costs .* not both "
                                            r"\(got costs and \['w'\]\)"):
        sweep(costs=loop, w=1.0, progress=False)
    with pytest.raises(TypeError, match="costs must hold fastpp.Costs"):
        sweep(costs=[loop, 3.0], progress=False)


def test_every_costs_field_is_a_sweep_axis():
    """act (bytes in: byte peaks out), bandwidth and message_bytes as scalar axes."""
    df = sweep(["1f1b", "zb-h1"], p=4, n=8, w=1.0, comm=0.1, act=[1.0, 2e9],
               bandwidth=[None, 1e3], message_bytes=100.0, progress=False)
    assert len(df) == 2 * 2 * 2 and df["bandwidth"].isna().sum() == 4
    for r in df.itertuples():
        c = Costs(1.0, 2.0, w=1.0, comm=0.1, act=r.act, message_bytes=r.message_bytes,
                  bandwidth=None if np.isnan(r.bandwidth) else r.bandwidth)
        res = simulate(build_schedule(r.schedule, 4, 8), c)
        assert (r.makespan, r.peak_activations_max) == (res.makespan,
                                                        res.peak_activations.max()), r
    # 1F1B's first device holds p = 4 microbatches: 4 x 2e9 bytes; the link adds 0.1 s a hop
    one = df[(df["schedule"] == "1f1b") & (df["act"] == 2e9)]
    assert one["peak_activations_max"].tolist() == [8e9, 8e9]
    assert one["makespan"].diff().iloc[1] > 0


def test_overhead_is_a_sweep_axis_and_a_costs_field():
    """A scalar ``overhead`` axis (every op kind alike) and Costs with one per kind: rows equal
    simulate(), and the ``overhead`` column holds the value, NaN when the kinds differ."""
    df = sweep(["1f1b", "zb-h1"], p=4, n=8, w=1.0, overhead=[0.0, 0.25], progress=False)
    assert df["overhead"].tolist() == [0.0, 0.25, 0.0, 0.25]
    for r in df.itertuples():
        res = simulate(build_schedule(r.schedule, 4, 8), Costs(1.0, 2.0, w=1.0,
                                                                overhead=r.overhead))
        assert r.makespan == res.makespan
    assert (df.groupby("schedule")["makespan"].diff().dropna() > 0).all()
    objects = [Costs(1.0, 2.0, w=1.0, overhead=0.25),
               Costs(1.0, 2.0, w=1.0, overhead={"F": 0.1, "I": [0.2, 0.3, 0.2, 0.3], "W": 0.4})]
    df = sweep(["1f1b", "zb-h1", "zbv"], p=4, n=8, costs=objects, progress=False)
    for r in df.itertuples():
        res = simulate(build_schedule(r.schedule, 4, 8, r.m), objects[r.costs])
        assert r.makespan == res.makespan, r
    assert df[df["costs"] == 0]["overhead"].eq(0.25).all()
    assert df[df["costs"] == 1]["overhead"].isna().all()


def test_points_table_with_a_costs_column():
    a, b = Costs(1.0, 2.0, w=1.0), Costs([1.0, 1.5], 2.0, w=1.0, comm=0.1)
    table = pd.DataFrame({"schedule": ["zb-h1", "1f1b", "zb-h1"], "p": [2, 2, 2], "n": [4, 4, 6],
                          "m": [1, 1, 1], "costs": [a, b, Costs(1.0, 2.0, w=1.0)]})
    df = sweep(points=table, progress=False)
    assert df["costs"].tolist() == [0, 1, 0]  # equal Costs are one
    for row, c in zip(df.itertuples(), [a, b, a], strict=True):
        assert row.makespan == simulate(build_schedule(row.schedule, 2, row.n), c).makespan
    with pytest.raises(ScheduleError, match="a costs column or cost columns, not both"):
        sweep(points=table.assign(f=1.0), progress=False)


def test_points_table(grid_frame):
    table = grid_frame[["schedule", "p", "n", "m", "w", "comm"]].iloc[::7]
    df = sweep(points=table, gamma=0.5, progress=False)
    expected = grid_frame.iloc[::7].reset_index(drop=True)
    assert df["point"].tolist() == list(range(len(table)))
    pd.testing.assert_frame_equal(df.drop(columns="point"), expected.drop(columns="point"))


def test_results_do_not_depend_on_threads_or_chunks(grid_frame):
    one = sweep(**GRID, workers=1, chunk_size=17)
    pd.testing.assert_frame_equal(one, grid_frame)


@pytest.mark.parametrize("kwargs, message", [
    (dict(schedules="nope"), r"schedules must be one of"),
    (dict(f=-1.0), r"f must be finite and > 0 \(got -1.0\)"),
    (dict(comm=[0.0, np.inf]), r"comm must be finite and >= 0 \(got \[0.0, inf\]\)"),
    (dict(gamma=1.5), r"gamma must be in \[0, 1\] \(got 1.5\)"),
    (dict(p=[2, 0]), r"p must hold positive integers below 2\*\*31 \(got \[2, 0\]\)"),
    (dict(n_per_p=[2**62]), r"n_per_p must hold positive integers below 2\*\*31"),
    (dict(n=4), r"give n or n_per_p, not both"),
    (dict(m=[]), r"m must hold at least one value"),
    (dict(chunk_size=0), r"chunk_size must be a positive integer \(got chunk_size=0\)"),
    (dict(workers=1.5), r"workers must be a positive integer \(got workers=1.5\)"),
    (dict(executor="mpi"), r"executor must be one of \['threads', 'dask'\] \(got 'mpi'\)"),
    (dict(invalid="hide"), r"invalid must be one of \['drop', 'keep'\] \(got 'hide'\)"),
    (dict(out=3), r"out must be a folder path \(got 3\)"),
])
def test_bad_arguments_are_named(kwargs, message):
    args = dict(p=2, n_per_p=1, m=1, progress=False) | kwargs
    with pytest.raises(ScheduleError, match=message):
        sweep(**args)


def test_bad_points_tables_are_named():
    with pytest.raises(ScheduleError, match=r"points must have the columns schedule, p, n, m "
                                            r"\(missing \['m'\]\)"):
        sweep(points=pd.DataFrame({"schedule": ["1f1b"], "p": [2], "n": [2]}))
    with pytest.raises(ScheduleError, match=r"points may only have the columns"):
        sweep(points=pd.DataFrame({"schedule": ["1f1b"], "p": [2], "n": [2], "m": [1],
                                   "speed": [1]}))
    with pytest.raises(ScheduleError, match=r"schedule must be one of"):
        sweep(points=pd.DataFrame({"schedule": ["x"], "p": [2], "n": [2], "m": [1]}))


# -- output folder, kill and resume -----------------------------------------------------------

SWEEP_SCRIPT = """
import sys, fastpp as s
s.sweep(p=[2, 4, 8, 16], n_per_p=[1, 2, 4, 8], m=[1, 2, 4], comm=[0.0, 0.05, 0.1, 0.2],
        w=1.0, out=sys.argv[1], resume=len(sys.argv) > 2, chunk_size=40, progress=False)
"""
SWEEP_ARGS = dict(p=[2, 4, 8, 16], n_per_p=[1, 2, 4, 8], m=[1, 2, 4],
                  comm=[0.0, 0.05, 0.1, 0.2], w=1.0, chunk_size=40, progress=False)


@pytest.fixture(scope="module")
def plain_run():
    return sweep(**SWEEP_ARGS)


def _parts(folder: Path) -> list[Path]:
    return sorted(folder.glob("_fastpp/part-*.json"))


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8])
def test_killed_and_resumed_sweep_equals_plain_run(tmp_path, plain_run, delay):
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", SWEEP_SCRIPT, str(out)])
    deadline = time.monotonic() + 120
    while not _parts(out) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(_parts(out))
    resumed = sweep(**SWEEP_ARGS, out=out, resume=True)
    pd.testing.assert_frame_equal(resumed, plain_run)
    assert resumed["point"].is_unique
    assert resumed.attrs["skipped"] == plain_run.attrs["skipped"]
    total_chunks = -(-len(fastpp.SCHEDULES) * 4 * 4 * 3 * 4 // 40)
    assert done_before <= total_chunks == len(_parts(out))


def test_damaged_chunks_are_recomputed(tmp_path, plain_run):
    out = tmp_path / "run"
    sweep(**SWEEP_ARGS, out=out)
    parquet = sorted(out.glob("part-*.parquet"))
    data = parquet[3].read_bytes()
    parquet[3].write_bytes(data[: len(data) // 2])  # truncated
    parquet[5].write_bytes(b"garbage")
    (out / "_fastpp" / parquet[7].name.replace(".parquet", ".json")).unlink()  # unfinished
    stamps = {p.name: p.stat().st_mtime_ns for p in parquet}
    resumed = sweep(**SWEEP_ARGS, out=out, resume=True)
    pd.testing.assert_frame_equal(resumed, plain_run)
    rewritten = {p.name for p in out.glob("part-*.parquet")
                 if p.stat().st_mtime_ns != stamps.get(p.name)}
    assert rewritten == {parquet[i].name for i in (3, 5, 7)}


def test_output_folder_guards(tmp_path):
    out = tmp_path / "run"
    first = sweep(p=2, n_per_p=1, m=1, progress=False, out=out)
    manifest = json.loads((out / "_fastpp" / "manifest.json").read_text())
    assert manifest["points"] == len(fastpp.SCHEDULES)
    with pytest.raises(ScheduleError, match="already holds a sweep; pass resume=True"):
        sweep(p=2, n_per_p=1, m=1, progress=False, out=out)
    with pytest.raises(ScheduleError, match="holds a different sweep"):
        sweep(p=4, n_per_p=1, m=1, progress=False, out=out, resume=True)
    again = sweep(p=2, n_per_p=1, m=1, progress=False, out=out, resume=True)
    pd.testing.assert_frame_equal(again, first)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ScheduleError, match="out must be a new or empty folder"):
        sweep(p=2, n_per_p=1, m=1, progress=False, out=other)
    with pytest.raises(ScheduleError, match="out must be a folder"):
        sweep(p=2, n_per_p=1, m=1, progress=False, out=other / "notes.txt")
    with pytest.raises(ScheduleError, match=r"out must be a folder path \(got 3\)"):
        sweep(p=2, n_per_p=1, m=1, progress=False, out=3)
    with pytest.raises(ScheduleError, match=r"out must be a folder path \(got ''\)"):
        sweep(p=2, n_per_p=1, m=1, progress=False, out="")  # not the working directory


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", '{"points": "4", "chunk_size": 1}',
                                    '{"points": 4, "chunk_size": 0, "format": "parquet"}'])
def test_damaged_manifest_is_a_schedule_error(tmp_path, damage):
    """JSONDecodeError, TypeError and ZeroDivisionError were escapes, in load and resume."""
    out = tmp_path / "run"
    sweep(p=2, n_per_p=1, m=1, progress=False, out=out)
    (out / "_fastpp" / "manifest.json").write_text(damage)
    with pytest.raises(ScheduleError, match="manifest.json is damaged"):
        fastpp.sweeps.load(out)
    with pytest.raises(ScheduleError, match="manifest.json is damaged"):
        sweep(p=2, n_per_p=1, m=1, progress=False, out=out, resume=True)


def test_a_damaged_count_of_points_is_read_in_bounded_time(tmp_path):
    """A manifest counting 10**18 points (a damaged one) made load try each chunk, a loop
    without end; it reads the chunks written, and says the sweep is not complete."""
    out = tmp_path / "run"
    sweep(p=2, n_per_p=1, m=1, progress=False, out=out)
    rows = len(fastpp.sweeps.load(out))
    path = out / "_fastpp" / "manifest.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"points": 10**18}))
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if load returns the rows, killed after 60 s
        signal.alarm(60)
        df = fastpp.sweeps.load(out)
        os._exit(0 if len(df) == rows and not df.attrs["complete"] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_load_reads_each_chunk_once_by_its_own_name(tmp_path):
    """Stray files beside the chunks' metadata (another width of the number, a digit that is
    not ASCII) are not chunks: each chunk is read once."""
    out = tmp_path / "run"
    sweep(p=2, n_per_p=1, m=1, progress=False, out=out)
    rows = len(fastpp.sweeps.load(out))
    meta = out / "_fastpp" / "part-000000.json"
    for stray in ("part-0.json", "part-\u00b2.json"):
        (out / "_fastpp" / stray).write_text(meta.read_text())
    assert len(fastpp.sweeps.load(out)) == rows


def test_damaged_part_is_a_schedule_error_in_load(tmp_path):
    """load reads what is there (resume recomputes it): a garbled part names the chunk."""
    out = tmp_path / "run"
    sweep(p=2, n_per_p=1, m=1, progress=False, out=out)
    next(out.glob("part-*.parquet")).write_bytes(b"garbage")  # pyarrow's ArrowInvalid
    with pytest.raises(ScheduleError, match="damaged chunk 0"):
        fastpp.sweeps.load(out)
    (out / "_fastpp" / "part-000000.json").write_text('{"rows": 1, "skipped": 3}')
    with pytest.raises(ScheduleError, match="damaged chunk 0"):
        fastpp.sweeps.load(out)


# dask's Parquet reader still calls reset_index(inplace=...), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.reset_index")
def test_output_folder_is_one_dataset_for_pandas_duckdb_and_dask(tmp_path, plain_run):
    """The parts are the folder's only Parquet files: the readers take it as it is."""
    out = tmp_path / "run"
    sweep(**SWEEP_ARGS, out=out)
    by_point = plain_run.sort_values("point").reset_index(drop=True)
    read = pd.read_parquet(out).sort_values("point").reset_index(drop=True)
    pd.testing.assert_frame_equal(read, by_point)
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"select count(*), sum(makespan) from read_parquet('{out}/*.parquet')")
    assert rows.fetchall() == [(len(plain_run), pytest.approx(plain_run["makespan"].sum()))]
    dd = pytest.importorskip("dask.dataframe")
    assert len(dd.read_parquet(out).compute()) == len(plain_run)
    # fastpp's own reader adds the skip counts, and says whether the sweep is complete
    loaded = load(out)
    pd.testing.assert_frame_equal(loaded, plain_run)
    assert loaded.attrs == {**plain_run.attrs, "complete": True}
    (out / "_fastpp" / "part-000002.json").unlink()  # as if chunk 2 were still running
    partial = load(out)
    assert not partial.attrs["complete"] and len(partial) < len(plain_run)
    with pytest.raises(ScheduleError, match="out must be a sweep's folder"):
        load(tmp_path)


def test_sweep_with_no_arguments_runs_a_small_grid_of_mostly_valid_points():
    df = sweep(progress=False, invalid="keep")
    assert set(df["schedule"]) == set(fastpp.SCHEDULES) and set(df["p"]) == {2, 4, 8}
    assert set(df["n"] // df["p"]) == {1, 2, 4}
    valid = df[df["reason"] == ""]
    assert len(valid) >= 0.8 * len(df)  # only DualPipe's, Chimera's and G's own limits
    # each schedule at its own chunk count: V-shapes at 2, 1F1B at 1
    m = df.groupby("schedule")["m"].unique().map(list).to_dict()
    assert m["zbv"] == [2] and m["1f1b"] == [1] and m["interleaved-1f1b"] == [2]


def test_builds_are_batched_within_the_budget(monkeypatch):
    """Builds go to the kernel in batches of at most BUDGET op slots (one build alone may
    exceed it): the rows are the same however the points are batched."""
    from fastpp import batch

    whole = sweep(["1f1b", "zbv", "chimera"], p=[2, 4], n_per_p=[1, 2], m=None, w=1.0,
                  progress=False)
    monkeypatch.setattr(batch, "BUDGET", 1)  # every build its own batch
    pd.testing.assert_frame_equal(sweep(["1f1b", "zbv", "chimera"], p=[2, 4], n_per_p=[1, 2],
                                        m=None, w=1.0, progress=False), whole)


NO_PYARROW = """
import sys

class Block:  # an interpreter without pyarrow
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pyarrow":
            raise ModuleNotFoundError(name)

sys.meta_path.insert(0, Block())
import fastpp as s
args = dict(p=[2, 4], n_per_p=[1, 2], m=1, progress=False, out=sys.argv[1], chunk_size=10)
first = s.sweep(**args)
again = s.sweep(**args, resume=True)
assert len(first) > 20 and again.equals(first), (again.dtypes, first.dtypes)
# kept rows' reasons: a valid row's "" came back NaN from the CSV (wave 18)
kept = dict(args, invalid="keep", out=sys.argv[1] + "-kept")
first = s.sweep(**kept)
again = s.sweep(**kept, resume=True)
assert (first["reason"] == "").sum() > 20 and again["reason"].tolist() == first[
    "reason"].tolist(), again["reason"].tolist()
print(len(first))
"""


def test_csv_when_pyarrow_is_missing(tmp_path):
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-c", NO_PYARROW, str(out)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert sorted(out.glob("part-*.csv")) and not list(out.glob("part-*.parquet"))
    assert json.loads((out / "_fastpp" / "manifest.json").read_text())["format"] == "csv"


def test_dask_local_cluster_equals_threads(grid_frame):
    pytest.importorskip("dask.distributed")
    df = sweep(**GRID, executor="dask", workers=2, chunk_size=100)
    pd.testing.assert_frame_equal(df, grid_frame)


# -- summaries and the main job ---------------------------------------------------------------


def test_pareto_front():
    df = pd.DataFrame({"peak_activations_max": [1, 2, 2, 3, 4, 5],
                       "bubble_ratio": [0.5, 0.4, 0.45, 0.4, 0.1, 0.1]})
    front = pareto_front(df)
    assert front.index.tolist() == [0, 1, 4]


def test_best_within_budget():
    df = pd.DataFrame({"p": [4] * 4, "n": [8] * 4,
                       "schedule": ["1f1b", "gpipe", "zbv", "v-min"],
                       "makespan": [33.0, 33.0, 30.0, 31.0],
                       "peak_activations_max": [4.0, 8.0, 4.0, 2.0]})
    best = best_within_budget(df)
    assert best["schedule"].tolist() == ["zbv"] and best["budget"].tolist() == [4.0]
    assert best_within_budget(df, budget=2.0)["schedule"].tolist() == ["v-min"]
    assert best_within_budget(df, budget=1.0).empty
    assert best_within_budget(df, budget=math.inf)["schedule"].tolist() == ["zbv"]
    for bad in ("nope", "1f1b-v"):  # once silently empty
        with pytest.raises(ScheduleError, match=r"budget must be a number or a schedule of df,"
                                                r" one of \['1f1b', 'gpipe', 'v-min', 'zbv'\]"):
            best_within_budget(df, budget=bad)
    for bad in (math.nan, -1.0, "", None):
        with pytest.raises(ScheduleError, match="budget"):
            best_within_budget(df, budget=bad)
    assert pareto_front(df.iloc[:0], y="makespan").empty  # was an IndexError


def test_main_job_draws_in_a_second_process(tmp_path, monkeypatch, capsys):
    """The pictures draw in a forked process: what fails there is raised in the job, a child
    that died is drawn for here, and no process outlives the job, whether it draws or stops
    before."""
    import multiprocessing
    import os

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    job = __import__("sweep")
    argv = ["--schedules", "1f1b", "gpipe", "-p", "2", "4", "--n-per-p", "1", "--comm", "0",
            "--no-progress", "--out"]

    def broken(*args, **kwargs):
        raise ScheduleError("no picture today")

    with monkeypatch.context() as patch:
        patch.setattr(fastpp.plot, "bubble_heatmaps", broken)
        with pytest.raises(ScheduleError, match="no picture today"):
            job.main([*argv, str(tmp_path / "a")])
    assert multiprocessing.active_children() == []
    assert job.main([*argv, str(tmp_path / "b")]) == 0
    assert multiprocessing.active_children() == []
    assert (tmp_path / "b" / "pareto.png").stat().st_size > 10_000
    assert f"pictures: {tmp_path / 'b' / 'bubble_heatmap.png'}" in capsys.readouterr().out
    assert job.main(["--schedules", "nope", "--out", str(tmp_path / "c")]) == 2  # stops early
    assert multiprocessing.active_children() == []
    with monkeypatch.context() as patch:  # a child that dies before its job: drawn here
        patch.setattr(job, "_rehearse", lambda: os._exit(3))
        assert job.main([*argv, str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "pareto.png").stat().st_size > 10_000
    assert multiprocessing.active_children() == []
    # one that dies after taking its job (the parent read EOF or a reset pipe, and raised)
    parent, draw = os.getpid(), job.pictures
    with monkeypatch.context() as patch:
        patch.setattr(job, "pictures", lambda *a: draw(*a) if os.getpid() == parent
                      else os._exit(4))
        assert job.main([*argv, str(tmp_path / "e")]) == 0
    assert (tmp_path / "e" / "pareto.png").stat().st_size > 10_000
    assert multiprocessing.active_children() == []


def test_painter_forks_on_linux_hiding_only_the_fork_warning(monkeypatch):
    """Python 3.12+'s os.fork warns when another thread runs (OpenBLAS's): that warning alone
    must not stop the job (filterwarnings=error here); elsewhere than Linux, no fork."""
    import multiprocessing
    import os
    import warnings

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    job = __import__("sweep")
    fork = os.fork

    def warning_fork(text):
        def forks():  # as Python 3.12's, in a process with threads
            pid = fork()
            if pid:
                warnings.warn(text.format(os.getpid()), DeprecationWarning, stacklevel=2)
            return pid
        return forks

    with monkeypatch.context() as patch:
        patch.setattr(os, "fork", warning_fork("This process (pid={}) is multi-threaded, use "
                                               "of fork() may lead to deadlocks in the child."))
        painter = job.Painter()
        assert painter.process is not None
        painter.close()
        patch.setattr(os, "fork", warning_fork("another warning from {}"))
        with pytest.raises(DeprecationWarning, match="another warning"):
            job.Painter()
    for child in multiprocessing.active_children():  # the one whose parent raised
        child.kill()
        child.join()
    with monkeypatch.context() as patch:
        patch.setattr(sys, "platform", "darwin")
        painter = job.Painter()
        assert painter.process is None
    assert multiprocessing.active_children() == []


def test_painter_close_ends_a_child_whose_message_was_cut_short(monkeypatch, capfd):
    """Ctrl-C while the job sends the pictures' arguments leaves the child waiting for the
    rest: close() closes the pipe first, so the child ends quietly instead of both waiting."""
    import multiprocessing
    import os
    import struct
    import threading

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    job = __import__("sweep")
    painter = job.Painter()
    child = painter.process
    painter.job = ("cut", "short")
    os.write(painter.conn.fileno(), struct.pack("!i", 1000) + b"x" * 10)  # a tenth of a message
    closing = threading.Thread(target=painter.close, daemon=True)
    closing.start()
    closing.join(60)
    hung = closing.is_alive()
    if hung:
        child.kill()
        closing.join()
    assert not hung
    assert child.exitcode == 0
    assert "Traceback" not in capfd.readouterr().err
    assert multiprocessing.active_children() == []


def test_ctrl_c_prints_one_traceback_and_ends_the_painter(tmp_path):
    """Ctrl-C reaches the job's whole process group: the job stops with its traceback, and
    the painter's child, which ignores it, ends with the job, quietly."""
    import os

    script = tmp_path / "job.py"
    script.write_text(f"""import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # (a background shell ignores it)
sys.path.insert(0, {str(ROOT / "scripts")!r})
import sweep
painter = sweep.Painter()
painter.job = "sent"  # as after paint(): close() waits for the child
print(painter.process.pid, flush=True)
try:
    time.sleep(120)
finally:
    painter.close()
""")
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    child = int(run.stdout.readline())
    deadline = time.monotonic() + 20  # until the child ignores SIGINT (or it never does)
    while time.monotonic() < deadline:
        status = Path(f"/proc/{child}/status").read_text()
        if int(re.search(r"^SigIgn:\s*(\w+)", status, re.M).group(1), 16) & 1 << (
                signal.SIGINT - 1):
            break
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert err.count("Traceback") == 1 and err.rstrip().endswith("KeyboardInterrupt"), err
    assert not Path(f"/proc/{child}").exists()


def test_main_job(tmp_path):
    out = tmp_path / "results"
    # chunks of 64 points: one of them dropped below leaves the others kept
    grid = ["-p", "4", "8", "--n-per-p", "1", "2", "--comm", "0.05", "--chunk-size", "64"]
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), *grid, "--out",
                          str(out), "--no-progress"], capture_output=True, text=True, check=True)
    text = run.stdout
    assert "Best schedule per (p, n) within the memory budget (1f1b's peak)" in text
    assert "Pareto front of bubble against peak memory" in text
    assert "p=8   n=16" in text
    df = pd.read_parquet(out / "sweep.parquet")
    assert re.search(r"^kernels ready in [\d.]+ s$", text, re.M)
    simulated = re.search(r"^([\d,]+) points simulated in", text, re.M).group(1)
    assert len(df) == int(simulated.replace(",", ""))
    for name in ("bubble_heatmap.png", "pareto.png"):
        png = out / name
        assert png.stat().st_size > 10_000  # a picture with content, not an empty canvas
    # --resume continues into the same folder and changes nothing
    again = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), *grid, "--out",
                            str(out),
                            "--no-progress", "--no-plots", "--resume"],
                           capture_output=True, text=True, check=True)
    assert again.stdout.split("\n", 1)[0].split(" in ")[0] == text.split("\n", 1)[0].split(
        " in ")[0]
    # a run without --resume replaces an unfinished sweep, and says so (it dropped the kept
    # points without a word)
    next((out / "parts" / "_fastpp").glob("part-*.json")).unlink()  # as if stopped there
    fresh = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), *grid, "--out",
                            str(out),
                            "--no-progress", "--no-plots"],
                           capture_output=True, text=True, check=True)
    assert re.search(r"^note: replaced the unfinished sweep in --out .* \([\d,]+ of [\d,]+ "
                     r"points; --resume would have continued it\)$", fresh.stderr, re.M), \
        fresh.stderr
    # one that kept no point (its Dask scheduler never answered, a review) dropped nothing
    for part in (out / "parts" / "_fastpp").glob("part-*.json"):
        part.unlink()
    empty = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), *grid, "--out",
                            str(out),
                            "--no-progress", "--no-plots"],
                           capture_output=True, text=True, check=True)
    assert "note: replaced" not in empty.stderr, empty.stderr
    # a (p, n) where nothing fits the budget is said (it was left out of the table)
    tight = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), "-p", "4", "8",
                            "--n-per-p", "2", "--budget", "3", "--out", str(tmp_path / "t"),
                            "--no-progress", "--no-plots"],
                           capture_output=True, text=True, check=True)
    rows = pd.read_parquet(tmp_path / "t" / "sweep.parquet")
    trained = rows[~rows["schedule"].isin(fastpp.sweeps.analysis.INFERENCE)]
    least = trained.groupby(["p", "n"])["peak_activations_max"].min()
    over = least[least > 3]
    assert len(over) and len(over) < len(least)  # some (p, n) fit within 3, some do not
    for (p, n), peak in over.items():
        assert f"{p:>4} {n:>5}  nothing within the budget (the least peak: {peak:.2f})" in \
            tight.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), "--schedules",
                          "nope", "--out", str(tmp_path / "x"), "--no-progress"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --schedules must be one of")
