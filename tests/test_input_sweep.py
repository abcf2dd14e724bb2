"""Bad input to ``fastpp.sweep`` and its tables: axes and ``points``, costs that overflow, the
``out=`` folder (resume, another sweep's chunks, a folder in use or read-only),
``sweeps.load``, and the rankings ``best_within_budget`` and ``pareto_front``.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import json
import math
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import env, run_script, wait_for

import fastpp
from fastpp import Noise, ScheduleError, ScheduleTypeError, build_schedule, simulate

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(schedules=["1f1b", "zb-h1"], p=[2, 4], n_per_p=[1, 2], chunk_size=2,
             progress=False)


# a sweep far longer than any test waits on it, in a child process (18,000 chunks of one
# point, one thread: 26 s here), so that it still runs when the test acts; the tests wait for
# its files, not for time, and kill it
SLOW = ("import sys, fastpp; fastpp.sweep(['1f1b', 'zb-h1', 'interleaved-1f1b'], "
        "p=[2, 4, 8, 16, 32, 64], n_per_p=[1, 2, 4, 8, 16], comm=[k / 100 for k in range(200)],"
        " chunk_size=1, workers=1, progress=False, out=sys.argv[1])")


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


def test_sweep_refuses_an_out_it_cannot_make(tmp_path):
    """A file where a parent folder must be raised NotADirectoryError."""
    (tmp_path / "afile").write_text("")
    # (named since 6 December before anything is made: which parent is the file)
    with pytest.raises(ScheduleError, match="out must be a folder that can be made .*afile' "
                                            "is a file"):
        fastpp.sweep(["1f1b"], p=4, n=8, out=tmp_path / "afile" / "sub", progress=False)


def test_sweep_refuses_arguments_it_would_ignore():
    """``scheduler`` without the Dask executor ran here; ``resume`` without ``out`` ran anew."""
    with pytest.raises(ScheduleError, match="scheduler is Dask's address, for "
                                            "executor='dask' only"):
        fastpp.sweep(["1f1b"], p=4, n=8, scheduler="tcp://x:1", progress=False)
    with pytest.raises(ScheduleError, match="resume=True needs out="):
        fastpp.sweep(["1f1b"], p=4, n=8, resume=True, progress=False)


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


def test_noise_of_a_link_some_points_lack_names_the_point():
    """A sweep over ``p = 4`` and ``p = 2`` with a delay on link (2, 3) stopped with "link_delay
    names link (2, 3), which carries no hand-off of this schedule", without saying which."""
    import fastpp

    with pytest.raises(ScheduleError, match=r"link_delay names link \(2, 3\), which carries no "
                                            r"hand-off.* \(at schedule='1f1b', p=2, m=1: noise "
                                            r"must fit every point of the sweep\)"):
        fastpp.sweep(schedules=["1f1b"], p=[4, 2], n_per_p=[2], samples=10, workers=1,
                     noise=fastpp.Noise(0.05, link_delay={(2, 3): 0.1}), progress=False)


@pytest.mark.parametrize("keywords, message", [
    (dict(schedules=["1f1b"], p=[8, 2], n=8, noise=fastpp.Noise(slow_devices={7: 2.0})),
     r"slow_devices names device 7, but the schedule has devices 0..1 \(at schedule='1f1b', "
     r"p=2, m=1"),
    (dict(schedules=["interleaved-1f1b"], p=[4], n=8, m=[2, 1],
          noise=fastpp.Noise(slow_stages={6: 2.0})),
     r"slow_stages names stage 6, but the schedule has stages 0..3 \(at "
     r"schedule='interleaved-1f1b', p=4, m=1"),
    (dict(schedules=["gpipe"], p=[2, 2048], n=1000, noise=fastpp.Noise(0.1), samples=40000),
     r"samples must be at most"),
])
def test_a_noise_some_points_cannot_take_is_refused_before_any_runs(keywords, message):
    """A noise of a device, stage or link that some points lack, or more samples than the
    widest pipeline keeps, stopped the sweep at the first such point, after every earlier
    point's Monte Carlo, and ``check_only`` ("raising what the sweep would") passed it (a
    review): now both refuse it before any point runs."""
    for check_only in (True, False):
        with pytest.raises(ScheduleError, match=message):
            fastpp.sweep(**{"samples": 2, **keywords}, check_only=check_only, workers=1,
                         progress=False)


def test_a_sweep_folder_takes_only_its_own_chunks(tmp_path):
    """``resume=True`` checked a chunk's row count alone: another sweep's part of the same
    points copied in was returned as this sweep's, ``invalid="keep"`` resumed a
    ``"drop"`` sweep's chunks, and a skip count of -100 was summed."""
    pytest.importorskip("pyarrow")
    import shutil

    import fastpp
    from fastpp.sweeps import load

    grid = dict(schedules=["1f1b", "interleaved-1f1b"], p=[2, 4], n=[3, 8], chunk_size=2,
                progress=False)
    ours, other = tmp_path / "ours", tmp_path / "other"
    want = fastpp.sweep(out=ours, **grid)
    fastpp.sweep(out=other, f=[5.0], **grid)
    shutil.copy(other / "part-000000.parquet", ours / "part-000000.parquet")
    with pytest.raises(ScheduleError, match=r"damaged chunk 0 .*its digest differs"):
        load(ours)
    assert fastpp.sweep(out=ours, resume=True, **grid).equals(want)  # recomputed
    with pytest.raises(ScheduleError, match="holds a different sweep"):
        fastpp.sweep(out=ours, resume=True, invalid="keep", **grid)
    meta = ours / "_fastpp" / "part-000001.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "skipped": {"x": -100}}))
    with pytest.raises(ScheduleError, match=r"damaged chunk 1 .*its counts are not counts"):
        load(ours)
    got = fastpp.sweep(out=ours, resume=True, **grid)
    assert got.equals(want) and got.attrs["skipped"] == want.attrs["skipped"]


def test_sweep_axes_of_odd_kinds():
    """``p=[2, True]`` ran a p = 1 point; ``p=np.array(2)`` raised NumPy's "iteration over a
    0-d array" and a 2-D array pandas' "all keys need to be the same shape"."""
    import numpy as np

    import fastpp

    with pytest.raises(ScheduleError, match=r"p must hold positive integers below 2\*\*31 \(got "
                                            r"\[2, True\]\)"):
        fastpp.sweep("1f1b", p=[2, True], n=4, progress=False)
    with pytest.raises(ScheduleError, match=r"p must be a value or a 1-D list of values \(got "
                                            r"an array of shape \(1, 2\)\)"):
        fastpp.sweep("1f1b", p=np.array([[2, 4]]), n=4, progress=False)
    assert len(fastpp.sweep("1f1b", p=np.array(2), n=4, progress=False)) == 1


def test_scalar_costs_beside_a_costs_column():
    """``sweep(points=table_with_costs, f=3, comm=1)`` dropped f and comm without a word."""
    import pandas as pd

    import fastpp

    table = pd.DataFrame({"schedule": ["1f1b"], "p": [2], "n": [4], "m": [1],
                          "costs": [fastpp.Costs(f=1, b=2)]})
    with pytest.raises(ScheduleError, match=r"f must not be given with points.*\(got f, comm "
                                            r"beside points\)"):
        fastpp.sweep(points=table, f=3, comm=1, progress=False)


def test_sweep_scheduler_addresses():
    """``scheduler=5`` raised Dask's TypeError, ``"not a url"`` its ValueError (and a port with
    nobody listening its OSError, after 30 s)."""
    pytest.importorskip("dask.distributed")
    import fastpp

    for address, message in ((5, r"scheduler must be a Dask scheduler's address, such as "
                                 r"'tcp://host:8786' \(got 5\)"),
                             ("not a url", r"scheduler must be the address of a running Dask "
                                           r"scheduler \(got 'not a url': .*port")):
        with pytest.raises(ScheduleError, match=message):
            fastpp.sweep("1f1b", p=2, n=4, executor="dask", scheduler=address, progress=False)


def test_a_dask_sweep_from_a_script_without_the_main_guard_says_so(tmp_path):
    """A local Dask cluster starts its workers as new processes, which import the calling
    script again: a script without ``if __name__ == "__main__":`` ended on Dask's "Nanny
    failed to start" traceback (a review); the sweep says what to do."""
    pytest.importorskip("dask.distributed")
    script = tmp_path / "job.py"
    script.write_text('import fastpp\nfastpp.sweep(["1f1b"], p=2, n=2, executor="dask", '
                      'workers=1, progress=False)\n')
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env())
    assert done.returncode == 1
    assert re.search(r"ScheduleError: executor='dask' could not start its local workers "
                     r"\(Nanny failed to start\)\. .* a script must call sweep under `if "
                     r"__name__ == \"__main__\":`", done.stderr.strip().splitlines()[-1])


def test_sweep_folders_the_os_cannot_use(tmp_path):
    """A NUL byte in ``out`` raised ValueError and a name of 5,000 letters OSError, from
    ``sweep`` and ``load`` alike."""
    import fastpp
    from fastpp.sweeps import load

    for out, why in ((tmp_path / ("x" * 5000), "File name too long"),
                     (str(tmp_path / "a\0b"), "embedded null byte")):
        message = rf"out must be a folder path the OS can use .*{why}"
        with pytest.raises(ScheduleError, match=message):
            fastpp.sweep("1f1b", p=2, n=4, out=out, progress=False)
        with pytest.raises(ScheduleError, match=message):
            load(out)


def test_a_sweep_point_whose_sums_overflow_is_skipped_not_priced():
    """``b = 2e306`` on 8 devices: the makespan is finite, but ``p * makespan`` is not, and the
    row came back valid with a bubble ratio of exactly 1 (or NaN where the busy time overflowed
    too); ``simulate`` refuses such costs, and the sweep refuses them as it does, naming
    them."""
    rows = fastpp.sweep("1f1b", p=8, n=8, f=[1.0, 1e306], b=[2.0, 2e306], progress=False,
                        invalid="keep")
    over = (rows["b"] > 1e300) | (rows["f"] > 1e300)  # (f = 1e306 too, as simulate refuses)
    assert rows.loc[over, "reason"].str.contains(r"must be at most 1e\+290 an op").all()
    assert rows.loc[over, ["makespan", "bubble_ratio"]].isna().all(axis=None)
    fine = rows.loc[~over]
    assert (fine["reason"] == "").all() and fine["bubble_ratio"].between(0, 1).all()
    assert fine["bubble_ratio"].iloc[0] == pytest.approx(1 - 8 * 8 * 3 / (8 * 45))


def test_the_pareto_front_leaves_out_rows_kept_unsimulated():
    """A NaN kept by ``invalid="keep"`` reached ``np.minimum.accumulate`` and hid every later
    row of the front (interleaved 1F1B at ``n = 8`` dropped)."""
    rows = fastpp.sweep(["1f1b", "interleaved-1f1b"], p=4, n=[3, 8], invalid="keep",
                        progress=False)
    assert rows["bubble_ratio"].isna().any()
    front = fastpp.pareto_front(rows, x="n", y="bubble_ratio")
    expected = fastpp.pareto_front(rows.dropna(subset=["bubble_ratio"]), x="n",
                                   y="bubble_ratio")
    assert front.index.tolist() == expected.index.tolist()
    assert ("interleaved-1f1b", 8) in set(zip(front["schedule"], front["n"], strict=True))


@pytest.mark.parametrize("axes, name", [({"f": [[1.0]]}, "f"), ({"p": [[2]]}, "p"),
                                        ({"w": [[0.5, 1.0]]}, "w"),
                                        ({"f": [np.array([1.0, 2.0])]}, "f")])
def test_a_sweep_axis_of_lists_is_refused(axes, name):
    """A list of lists reached pandas ("Per-column arrays must each be 1-dimensional") or
    NumPy, or named a stage count of None."""
    grid = {"p": 2, "n": 4} | axes
    with pytest.raises(ScheduleError, match=f"{name} must be a value or a 1-D list of values"):
        fastpp.sweep("1f1b", progress=False, **grid)


def test_an_empty_points_table_is_named():
    """It was refused as "p must hold positive integers below 2**31 (got [])"."""
    empty = pd.DataFrame({"schedule": [], "p": [], "n": [], "m": []})
    with pytest.raises(ScheduleError, match="points must hold at least one row"):
        fastpp.sweep(points=empty, progress=False)


def test_the_best_rows_of_an_empty_table_are_none():
    """An empty table (a sweep whose points were all skipped) was refused as "budget must be
    ... one of [] (got '1f1b')", naming a budget left at its default."""
    rows = fastpp.sweep("1f1b", p=2, n=4, progress=False)
    assert fastpp.best_within_budget(rows.iloc[:0]).empty
    assert len(fastpp.best_within_budget(rows)) == 1


def test_a_sweep_of_subnormal_times_is_skipped_and_its_chunks_bounded():
    """``f = 1e-320`` with ``b = 2e-320`` gave a throughput of inf; ``chunk_size = 10**9``
    asked for gigabytes at once."""
    rows = fastpp.sweep("1f1b", p=2, n=4, f=[1.0, 1e-320], b=[2.0, 2e-320], progress=False,
                        invalid="keep")
    tiny = (rows["f"] < 1e-300) & (rows["b"] < 1e-300)
    assert rows.loc[tiny, "reason"].str.startswith("costs must keep the throughput").all()
    assert np.isfinite(rows.loc[~tiny, "throughput"]).all()
    with pytest.raises(ScheduleError, match="chunk_size must be at most 1,000,000"):
        fastpp.sweep("1f1b", p=2, n=4, chunk_size=10**9, progress=False)


def test_resume_says_what_differs(tmp_path):
    """``out ... holds a different sweep (other points or chunk size)``: neither which nor, from
    sweep.py, by its flags."""
    out = tmp_path / "run"
    fastpp.sweep("1f1b", p=2, n_per_p=[1, 2], out=out, progress=False)
    with pytest.raises(ScheduleError, match=r"^resume=True needs the arguments that the sweep "
                                            r"in out='.*run' was started with: it holds a "
                                            r"different sweep \(2 points, where these arguments "
                                            r"make 3\)$"):
        fastpp.sweep("1f1b", p=2, n_per_p=[1, 2, 4], out=out, resume=True, progress=False)
    with pytest.raises(ScheduleError, match=r"\(as many points, but other ones: another grid, "
                                            r"other costs or another invalid=\)$"):
        fastpp.sweep("1f1b", p=4, n_per_p=[1, 2], out=out, resume=True, progress=False)
    flags = ["-p", "2", "--n-per-p", "1", "-m", "1", "--comm", "0", "--schedules", "1f1b",
             "--out", str(tmp_path / "script"), "--no-progress", "--no-plots"]
    first = subprocess.run([sys.executable, "scripts/sweep.py", *flags], capture_output=True,
                           text=True, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-2000:]
    err = run_script("sweep.py", *flags, "--resume", "--chunk-size", "7", cwd=ROOT)
    assert (f"error: --resume needs the arguments that the sweep in --out="
            f"{str(tmp_path / 'script')!r} was started with: it holds a different sweep (chunks "
            f"of 4096 points, where --chunk-size=7)") in err, err
    flags[flags.index("--comm") + 1] = "0.5"  # as many points, other ones, and other chunks
    err = run_script("sweep.py", *flags, "--resume", "--chunk-size", "7", cwd=ROOT)
    assert ("(as many points, but other ones: another grid or other costs; chunks of 4096 "
            "points, where --chunk-size=7)") in err, err


@pytest.mark.parametrize("axes", [dict(p=[2, 4, 2]), dict(schedules=["1f1b", "gpipe", "1f1b"]),
                                  dict(comm=[0, 0.1, 0.0]), dict(n_per_p=[1, 2, 1]),
                                  dict(costs=[fastpp.Costs(1, 2), fastpp.Costs(1, 3),
                                              fastpp.Costs(1.0, 2.0)])])
def test_a_sweep_axis_takes_each_value_once(axes):
    """-p 2 2 wrote each point twice and counted them as simulated points; plan already took
    each value of an axis once (wave 9), and so does a sweep now, in the order given."""
    once = {k: list(dict.fromkeys(v)) for k, v in axes.items()}
    if "costs" in axes:  # (Costs objects: equal ones, not the same object)
        once = {"costs": [axes["costs"][0], axes["costs"][1]]}
    base = {"schedules": ["1f1b"], "p": [2], "progress": False}
    twice, single = (fastpp.sweep(**{**base, **a}) for a in (axes, once))
    assert len(twice) == len(single) and twice.equals(single)


def test_a_sweep_too_large_is_refused_naming_its_axes():
    """2**64 points wrapped to 0 in NumPy's product: an empty table, no word; just below
    2**63 the list of chunks took the machine's memory."""
    big = list(range(1, 65537))
    with pytest.raises(ScheduleError, match=r"a sweep must have at most 10,000,000,000 points "
                                            r"\(got 18,446,744,073,709,551,616: 65536 p, "
                                            r"65536 n, 65536 f, 65536 b\)"):
        fastpp.sweep("1f1b", p=big, n=big, f=[float(x) for x in big],
                     b=[x + 1e5 for x in big], progress=False, check_only=True)


def test_pandas_axes_and_ranges_are_lists_of_values():
    """A Series or Index as a sweep axis raised IndexError or was one value; a range or a
    Series as plan's pp raised "unhashable type: 'list'"; two alike layouts gave each row
    twice."""
    import pandas as pd

    from fastpp.model import plan

    lists = fastpp.sweep("1f1b", p=4, n=[8, 16], m=[1], progress=False)
    for n, m in ((pd.Series([8, 16]), pd.Index([1])), (np.array([8, 16]), 1)):
        got = fastpp.sweep("1f1b", p=pd.Series([4]), n=n, m=m, progress=False)
        assert got["makespan"].tolist() == lists["makespan"].tolist()
    kw = dict(seq=1024, global_batch=16, schedules=["1f1b"], tp=[1], recompute="none")
    rows = plan("llama2-7b", 16, pp=[2, 4], **kw)
    for pp in (range(2, 5, 2), pd.Series([2, 4]), np.array([2, 4])):
        np.testing.assert_array_equal(plan("llama2-7b", 16, pp=pp, **kw)["step_time"],
                                      rows["step_time"])
    layout = "Et*16|t*16L"
    assert len(plan("llama2-7b", 16, pp=[2], layout=[layout, layout], **kw)) == \
        len(plan("llama2-7b", 16, pp=[2], layout=[layout], **kw))


def test_a_sweeps_folder_is_checked_before_the_work_and_read_as_the_shell_reads_it(
        tmp_path, monkeypatch):
    """``check_only=True`` never looked at ``out=``; ``out="~/sw"`` made ``./~/sw`` and left
    a part in the real home folder; an empty store folder left by a refused sweep was
    "other files"; ``collect=False`` without ``out=`` ran and kept nothing."""
    (tmp_path / "file").write_text("x")
    for out, said in ((tmp_path / "file", "must be a folder \\(got the file"),
                      (3, "must be a folder path \\(got 3\\)"),
                      (tmp_path / "file" / "sub", "must be a folder that can be made .* is a "
                                                  "file")):
        with pytest.raises(ScheduleError, match=f"out {said}"):
            fastpp.sweep("1f1b", p=4, n=8, out=out, check_only=True, progress=False)
    assert not (tmp_path / "file" / "sub").exists()
    fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "sw", progress=False)
    with pytest.raises(ScheduleError, match="already holds a sweep; pass resume=True"):
        fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "sw", check_only=True, progress=False)
    with pytest.raises(ScheduleError, match="holds a different sweep"):
        fastpp.sweep("1f1b", p=8, n=8, out=tmp_path / "sw", resume=True, check_only=True,
                     progress=False)
    assert fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "sw", resume=True, check_only=True,
                        progress=False) is None
    with pytest.raises(ScheduleError, match=r"collect=False keeps the rows in out= alone"):
        fastpp.sweep("1f1b", p=4, n=8, collect=False, progress=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert len(fastpp.sweep("1f1b", p=4, n=8, out="~/sw", progress=False)) == 1
    assert (tmp_path / "home" / "sw" / "_fastpp" / "manifest.json").exists()
    assert not (tmp_path / "~").exists()
    (tmp_path / "left" / "_fastpp").mkdir(parents=True)
    assert len(fastpp.sweep("1f1b", p=4, n=8, out=tmp_path / "left", progress=False)) == 1


def test_the_rankings_refuse_text_and_take_their_own_tables():
    """Text makespans were ranked alphabetically ('33.0' before '9.0'); ``pareto_front`` took
    the schedule's name as x; ``best_within_budget`` of its own table raised pandas'
    "columns overlap", and NumPy's float32 inf was "not finite"."""
    import math

    df = fastpp.sweep(["1f1b", "zb-h1"], p=4, n=[8, 16], w=1.0, progress=False)
    text = df.assign(makespan=df["makespan"].astype(str))
    with pytest.raises(ScheduleTypeError, match=r"df's column 'makespan' must hold numbers to "
                                                r"be ranked by \(got dtype"):
        fastpp.best_within_budget(text, budget=math.inf, by=("p",))
    with pytest.raises(ScheduleTypeError, match=r"df's column 'schedule' must hold numbers"):
        fastpp.pareto_front(df, x="schedule")
    best = fastpp.best_within_budget(df, budget=4.0)
    assert fastpp.best_within_budget(best, budget=4.0).equals(best)
    assert fastpp.best_within_budget(df, budget=np.float32("inf")).equals(
        fastpp.best_within_budget(df, budget=math.inf))


def test_a_noisy_sweep_is_still_refused_a_store(tmp_path):
    """The refusal of noise= with out= had moved under samples' own refusal, where it never
    ran: a noisy sweep wrote its noisy columns into a store that does not know the noise."""
    with pytest.raises(ScheduleError, match=r"noise cannot be combined with out="):
        fastpp.sweep(["1f1b"], p=2, n=4, noise=Noise(0.05), samples=8, out=tmp_path / "s",
                     progress=False)
    assert not (tmp_path / "s").exists()


def test_budget_names_every_schedule_of_df():
    """best_within_budget's message listed the first 12 schedules of df, without a word of the
    others (zb-h2 and zbv, the one a user writing 'zb-v' meant)."""
    import pandas as pd
    import pytest

    names = sorted(fastpp.SCHEDULES)
    df = pd.DataFrame({"schedule": names, "p": 2, "n": 4, "makespan": 1.0,
                       "peak_activations_max": 1.0})
    with pytest.raises(fastpp.ScheduleError) as err:
        fastpp.best_within_budget(df, budget="zb-v")
    training = [n for n in names if not fastpp.SCHEDULES[n].forward_only]
    assert str(err.value) == (f"budget must be a number or a schedule of df, one of {training} "
                              "(got 'zb-v')")


def test_budget_groups_hold_one_cost_setting():
    """A sweep over three latencies ranked per (p, n), by default, named the fastest row of
    any latency: the zero-latency row's schedule, not the best at any one latency (a review).
    A group whose rows differ in a cost column is refused by name; grouped by it, or with one
    value picked first, it ranks."""
    import pytest

    df = fastpp.sweep(["1f1b", "zb-h1"], p=[4], n_per_p=[2], comm=[0.0, 0.5, 1.0],
                      progress=False)
    with pytest.raises(fastpp.ScheduleError, match=r"df's comm must be one value per group of "
                                                   r"by=\['p', 'n'\] \(got 3 values"):
        fastpp.best_within_budget(df)
    by_comm = fastpp.best_within_budget(df, by=("p", "n", "comm"))
    assert by_comm["comm"].tolist() == [0.0, 0.5, 1.0]
    one = fastpp.best_within_budget(df[df["comm"] == 0.5])
    assert one.drop(columns="budget").equals(
        by_comm[by_comm["comm"] == 0.5].drop(columns="budget").reset_index(drop=True))


def test_resume_by_another_fastpp_is_refused(tmp_path):
    """A manifest of another version (or other code of the same version) had resumed,
    mixing two codes' rows in one table."""
    out = tmp_path / "run"
    fastpp.sweep(**SMALL, out=out)
    path = out / "_fastpp" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["version"] == fastpp.__version__ and manifest["code"]
    for change, said in (({"version": "0.0.9"}, "fastpp 0.0.9"),
                         ({"code": "0123456789abcdef"}, "code 0123456789abcdef"),
                         ({"version": None, "code": None}, "did not record its version")):
        path.write_text(json.dumps({**manifest, **change}))
        with pytest.raises(ScheduleError, match=f"{said}.*start afresh \\(delete the folder"):
            fastpp.sweep(**SMALL, out=out, resume=True)
    path.write_text(json.dumps(manifest))
    assert len(fastpp.sweep(**SMALL, out=out, resume=True)) > 0


def test_finished_sweep_resumes_from_a_read_only_folder(tmp_path):
    """The manifest was rewritten on every resume: a finished sweep on a read-only mount
    raised a raw OSError instead of giving its rows."""
    out = tmp_path / "run"
    fastpp.sweep(**SMALL, out=out)
    code = (f"import fastpp; df = fastpp.sweep(**{SMALL!r}, out={str(out)!r}, resume=True); "
            f"print(len(df), df.attrs['resumed'])")
    run = subprocess.run(["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{out}" "{out}" '
                          f'&& exec "{sys.executable}" -c "$0"', code],
                         capture_output=True, text=True, env=env())
    if "mount" in run.stderr or "unshare" in run.stderr:
        pytest.skip(f"no read-only mount here: {run.stderr.strip()}")
    rows = len(fastpp.sweep(**SMALL))
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(rows), str(rows)]


def test_chunk_that_cannot_be_written_names_out_not_none(tmp_path):
    """A folder removed under a running sweep was said as '... (No such file or directory:
    None)'."""
    from fastpp.sweeps.store import Store

    frame = fastpp.sweep(**SMALL).iloc[:1]
    store = Store(tmp_path / "run", "x", 4, 2, False)
    shutil.rmtree(tmp_path / "run")
    with pytest.raises(ScheduleError, match=r"^out='.*run' cannot take chunk 0") as error:
        store.write(0, frame, {})
    assert "None" not in str(error.value)
    store.close()


def test_second_sweep_on_a_folder_in_use_is_refused(tmp_path):
    """Two sweeps on one folder wrote (and removed) each other's files; a stale hold (a run
    killed with SIGKILL) does not stop the next."""
    out = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-c", SLOW, str(out)], env=env(),
                             stderr=subprocess.DEVNULL)
    try:
        wait_for(out / "_fastpp" / "part-000003.json", first)
        with pytest.raises(ScheduleError, match=rf"^out='.*run' is in use by process "
                                                rf"{first.pid}; wait for it or choose another"):
            fastpp.sweep(['1f1b'], p=2, n=2, out=out, resume=True, progress=False)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert (out / "_fastpp" / "lock").exists()  # (killed: its lock file stays, not its hold)
    with pytest.raises(ScheduleError, match="different sweep"):  # the folder is free
        fastpp.sweep(['1f1b'], p=2, n=2, out=out, resume=True, progress=False)


def test_a_one_element_cost_array_is_refused_as_simulate_refuses_it():
    """``Costs(f=np.array([1.0]))`` at p = 4: simulate refuses the length; a sweep stored
    it as one value and priced 104 of a random sweep's points so (a review). At p = 1 the
    array is the one stage's, as it is to simulate."""
    costs = fastpp.Costs(f=np.array([1.0]), b=2.0)
    with pytest.raises(ScheduleError, match=r"costs.f must be a scalar or an array of length "
                                            r"p=4 or V=4 \(got length 1\)"):
        simulate(build_schedule("1f1b", 4, 8), costs)
    df = fastpp.sweep(["1f1b", "gpipe"], p=[1, 4], n=8, costs=[costs], progress=False,
                      workers=1, invalid="keep")
    four = df[df.p == 4]
    assert four["makespan"].isna().all()
    assert (four["reason"] == "costs.f must be a scalar or an array of length p=4 or V=4 "
                              "(got length 1)").all()
    for row in df[df.p == 1].itertuples():
        assert row.makespan == simulate(build_schedule(row.schedule, 1, 8), costs).makespan
