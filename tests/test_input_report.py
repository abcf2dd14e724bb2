"""Bad input to reports and pictures: ``fastpp.report`` of sweep, plan and measured-run tables,
``fastpp.plot``'s files, ``show``'s text timeline and Chrome traces.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import env

import fastpp
from fastpp import ScheduleError, build_schedule, simulate

TRACES = Path(__file__).parent / "data"
ONE = build_schedule("1f1b", 4, 8)


def test_a_plot_path_of_a_format_matplotlib_cannot_write(tmp_path):
    """``gantt.txt``: matplotlib's own ValueError (``Format 'txt' is not supported``)."""
    pytest.importorskip("matplotlib")
    from fastpp import plot

    result = simulate(build_schedule("1f1b", 2, 4))
    with pytest.raises(ScheduleError, match=r"path must end in a format matplotlib writes "
                                            r"\(.*png.*\) \(got '.*gantt\.txt'\)"):
        plot.gantt(result, tmp_path / "gantt.txt")
    assert not (tmp_path / "gantt.txt").exists()


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


def test_plots_say_a_folder_is_refused(tmp_path):
    """``gantt(res, "folder")`` is refused (the folder is not drawn beside as ``folder.png``),
    where every plot's docstring said only that ``.png`` is added to a path without suffix."""
    pytest.importorskip("matplotlib")
    import inspect

    from fastpp import plot

    (tmp_path / "out").mkdir()
    with pytest.raises(ScheduleError, match=r"got '.*out': a folder"):
        plot.gantt(simulate(build_schedule("1f1b", 2, 4)), tmp_path / "out")
    assert not (tmp_path / "out.png").exists()
    for name, f in inspect.getmembers(plot, inspect.isfunction):
        if f.__module__ == plot.__name__ and "path" in inspect.signature(f).parameters \
                and not name.startswith(("_", "check")):
            assert "a folder is refused" in " ".join(f.__doc__.split()), name


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


def test_a_report_never_replaces_its_input_or_a_good_page(tmp_path):
    """``report t.csv -o t.csv`` wrote HTML over the table; a table with an infinite number
    raised json's ValueError halfway through the page, leaving a cut-off file over the last
    good report."""
    pytest.importorskip("plotly")
    from fastpp import report
    from fastpp.model import plan

    rows = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                recompute="none", schedules=["1f1b"], workers=1)
    table = tmp_path / "plan.csv"
    rows.to_csv(table, index=False)
    with pytest.raises(ScheduleError, match=r"output must be neither an input nor inside one"):
        report(table, output=table)
    assert table.read_text().startswith("model,")
    page = tmp_path / "report.html"
    page.write_text("the last good report")
    rows.assign(step_time=float("inf")).to_csv(table, index=False)
    with pytest.raises(ScheduleError, match=r"inputs must hold finite numbers where the report "
                                            r"draws them"):
        report(table, output=page)
    assert page.read_text() == "the last good report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.csv", "report.html"]


def test_a_report_of_a_table_without_a_name(tmp_path):
    """A sweep row without its schedule raised "'<' not supported between instances of 'str'
    and 'float'" from inside the budget's summary."""
    pytest.importorskip("plotly")
    import fastpp
    from fastpp import report

    rows = fastpp.sweep(["1f1b", "gpipe"], p=2, n=4, progress=False)
    rows["schedule"] = rows["schedule"].astype(object)
    rows.loc[0, "schedule"] = None
    with pytest.raises(ScheduleError, match=r"must hold names in its sweep's column 'schedule' "
                                            r"\(got None in row 0\)"):
        report(rows, output=tmp_path / "r.html")


def test_a_coarse_grid_marks_the_ops_it_cannot_draw_apart():
    """With forwards 100 times shorter than backwards, ``show`` drew device 0's four
    forwards as one ``0F1``: the others were drawn over, and the picture said nothing."""
    from fastpp import Costs, build_schedule, simulate

    grid = simulate(build_schedule("1f1b", 2, 4), Costs(f=0.01, b=1.0)).grid()
    device0 = grid.splitlines()[1].split()[2:]  # (after "device  0:")
    assert device0[0] == "0F0+"  # F0 and F1 in the first step, which shows the first and '+'
    assert device0.count("0F2+") == 1 and "0F1" not in device0


def test_a_report_of_huge_points_draws_no_timeline(tmp_path):
    """A sweep table with p = 10**6 (within the 4,000,000 ops a point may have) ran past two
    minutes re-simulating timelines for the page."""
    pytest.importorskip("plotly")
    import fastpp
    from fastpp import report
    from fastpp.reports.figures import resimulate

    rows = fastpp.sweep(["1f1b"], p=2, n=[4], progress=False)
    assert resimulate(next(rows.itertuples())) is not None
    rows = rows.assign(p=10**6, n=1)
    assert resimulate(next(rows.itertuples())) is None  # 3 million ops: no timeline
    assert report(rows, output=tmp_path / "r.html").stat().st_size > 0


def test_pictures_of_tables_they_cannot_draw(tmp_path):
    """``bubble_heatmaps`` of no rows raised ZeroDivisionError, of p = 0 divided by zero,
    of a text metric NumPy's ValueError and of negative values matplotlib's; ``plan_scatter``
    of text ``fits`` raised a TypeError and drew negative bytes on a log axis."""
    pytest.importorskip("matplotlib")
    import fastpp
    from fastpp import plot
    from fastpp.model import plan

    rows = fastpp.sweep(["1f1b", "gpipe"], p=[2, 4], n_per_p=[1, 2], progress=False)
    for bad, metric, message in ((rows.iloc[:0], "bubble_ratio", "must hold a sweep's rows"),
                                 (rows.assign(p=0), "bubble_ratio", "p column must hold positive"),
                                 (rows, "schedule", "metric column 'schedule' must be a number"),
                                 (rows.assign(bubble_ratio=-1.0), "bubble_ratio",
                                  "metric column 'bubble_ratio' must be finite and >= 0")):
        with pytest.raises(ScheduleError, match=message):
            plot.bubble_heatmaps(bad, tmp_path / "h.png", metric=metric)
    table = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                 recompute="none", schedules=["1f1b"], workers=1)
    with pytest.raises(ScheduleError, match="fits column must hold bools"):
        plot.plan_scatter(table.assign(fits="yes"), tmp_path / "s.png")
    with pytest.raises(ScheduleError, match="peak_memory column must be finite and > 0"):
        plot.plan_scatter(table.assign(peak_memory=-1.0), tmp_path / "s.png")


def test_an_int_past_int64_is_a_number_too_large():
    """``time_scale=10**30`` was refused as "must be a number" (NumPy keeps such an int as an
    object); it is a number, and one past float64's range is refused as not finite."""
    result = fastpp.simulate(fastpp.build_schedule("1f1b", 2, 4), fastpp.Costs(1.0, 2.0))
    trace = fastpp.trace.chrome_trace(result, 10**30)
    stamps = [e["ts"] for e in trace["traceEvents"] if "ts" in e]
    assert max(stamps) == pytest.approx(result.makespan * 1e30) and np.isfinite(stamps).all()
    for value in (10**400, -(10**400)):
        with pytest.raises(ScheduleError, match="time_scale must be finite and > 0"):
            fastpp.trace.chrome_trace(result, value)
    with pytest.raises(ScheduleError, match="costs.f must be finite and > 0"):
        fastpp.Costs(f=10**400, b=2.0)


def test_report_data_cannot_end_or_change_its_script_element():
    from fastpp.reports.page import _json

    text = _json({"label": "x</script><!--<script>"})
    assert "<" not in text and __import__("json").loads(text)["label"] == "x</script><!--<script>"


def test_report_of_sweep_tables_it_accepts(tmp_path):
    """A sweep kept with invalid="keep" where no point ran raised ZeroDivisionError; a table
    of the required columns alone raised Costs' TypeError; a NaN G ValueError; a schedule
    named in schedules= but absent from the table had its section left out, unsaid."""
    none_ran = fastpp.sweep("interleaved-1f1b", p=4, n=8, m=1, invalid="keep", progress=False)
    page = fastpp.report(none_ran, output=tmp_path / "none.html").read_text()
    assert "None of its 1 points was simulated" in page
    good = fastpp.sweep(["1f1b", "interleaved-1f1b"], p=4, n=8, progress=False)
    bare = good[["schedule", "p", "n", "m", "makespan", "bubble_ratio",
                 "peak_activations_max", "throughput"]]
    assert fastpp.report(bare, output=tmp_path / "bare.html").exists()
    assert fastpp.report(good.assign(G=np.nan), output=tmp_path / "g.html").exists()
    with pytest.raises(ScheduleError, match=r"schedules must be schedules of the sweeps, among "
                                            r"\['1f1b', 'interleaved-1f1b'\] \(got \['zbv'\]\)"):
        fastpp.report(good, output=tmp_path / "x.html", schedules=["zbv"])
    # a name one of several sweeps holds is theirs (each table's own check refused it)
    zbv = fastpp.sweep(["1f1b", "zbv"], p=4, n=8, progress=False)
    assert fastpp.report(zbv, good, output=tmp_path / "two.html", schedules=["zbv"]).exists()


def test_report_of_an_unfinished_sweep_says_so_and_reads_the_scripts_parts(tmp_path):
    """An interrupted sweep's report gave a part's answers as the sweep's, unsaid; a
    ``scripts/sweep.py`` folder was refused ("neither a manifest ... nor Parquet files")
    though its sweep lay in ``parts/``, or read from an earlier run's sweep.parquet."""
    out = tmp_path / "out"
    fastpp.sweep(["1f1b", "zb-h1"], p=[2, 4], n=8, chunk_size=1, out=out / "parts",
                 progress=False)
    old = fastpp.sweep(["gpipe"], p=2, n=4, progress=False)
    old.to_parquet(out / "sweep.parquet")  # an earlier run's table beside the store
    page = fastpp.report(out, output=tmp_path / "all.html").read_text()
    assert "(unfinished:" not in page and "zb-h1" in page and "gpipe" not in page
    (out / "parts" / "_fastpp" / "part-000001.json").unlink()  # as if stopped before it
    page = fastpp.report(out, output=tmp_path / "part.html").read_text()
    assert "(unfinished: 3 of 4 points)" in page


def test_report_of_an_unfinished_sweep_that_kept_its_invalid_points_counts_each_once(tmp_path):
    """With ``invalid="keep"`` a chunk's rows hold its skipped points too: its rows plus its
    skipped counts said "30 of 30 points" of a sweep 20 of whose 30 points were done."""
    out = tmp_path / "out"
    fastpp.sweep(p=[2, 3], n_per_p=1, m=1, invalid="keep", chunk_size=10, out=out,
                 progress=False)  # 2 x 15 schedules: 17 points skipped, kept as rows
    (out / "_fastpp" / "part-000000.json").unlink()  # as if stopped before it
    page = fastpp.report(out, output=tmp_path / "part.html").read_text()
    assert "(unfinished: 20 of 30 points)" in page


def test_a_sweep_of_a_million_chunks_counts_its_seven_digit_parts(tmp_path):
    """The store names chunk c ``part-{c:06d}``, seven digits from chunk 1,000,000 (a sweep
    of 4.1e9 points at the default chunk_size, MAX_POINTS 1e10, or 1e6 at chunk_size 1);
    kept() (and load()) took exactly six: chunk 1,000,000 was not counted, nor read back."""
    from fastpp.sweeps.store import META, kept

    (tmp_path / META).mkdir()
    (tmp_path / META / "manifest.json").write_text('{"points": 1000001, "chunk_size": 1}')
    for c in (0, 1_000_000):
        (tmp_path / META / f"part-{c:06d}.json").write_text('{"rows": 1, "skipped": {}}')
    assert kept(tmp_path) == (2, 1_000_001)


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


def test_report_names_a_home_of_no_user(tmp_path):
    """``~nouser/...`` as the output or an input raised pathlib's RuntimeError ("Could not
    determine home directory"), where a sweep's ``out`` names the parameter (a review)."""
    pytest.importorskip("plotly")
    rows = fastpp.sweep("1f1b", p=[2], n_per_p=[1], progress=False)
    with pytest.raises(ScheduleError, match=r"output must be a path the OS can use \(got "
                                            r"'~no-such-user-fastpp/r.html': no such user"):
        fastpp.report(rows, output="~no-such-user-fastpp/r.html")
    with pytest.raises(ScheduleError, match=r"inputs\[0\] must be a path the OS can use"):
        fastpp.report("~no-such-user-fastpp/s.parquet", output=tmp_path / "r.html")


def test_picture_that_cannot_be_written_leaves_the_last_good_one(tmp_path):
    """savefig wrote the picture in place: a disk that filled up mid-write (here a file size
    limit) left a truncated PNG where the last good one was."""
    path = tmp_path / "gantt.png"
    code = ("import resource, signal, sys, fastpp\n"
            "from fastpp import plot\n"
            "res = fastpp.simulate(fastpp.build_schedule('1f1b', 4, 8), fastpp.Costs(1, 2))\n"
            "plot.gantt(res, sys.argv[1])\n"
            "good = open(sys.argv[1], 'rb').read()\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (len(good) // 2, len(good) // 2))\n"
            "try:\n"
            "    plot.gantt(res, sys.argv[1])\n"
            "except fastpp.ScheduleError as error:\n"
            "    print('refused:', error)\n"
            "print(open(sys.argv[1], 'rb').read() == good)\n")
    pytest.importorskip("matplotlib")
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, env=env())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "True", run.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["gantt.png"]  # (no temporary file left)
