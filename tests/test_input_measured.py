"""Bad input to measured runs: ``fastpp.measure``, ``python -m fastpp measure`` and
``scripts/measure.py`` (their flags, outputs, signals and timeouts), the trace readers
(``read_torch_trace``, ``read_steps``), the what-if op tables (``read_op_table``) and ``whatif``.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import changed_run, cli_error, env, needs_data

import fastpp
import fastpp.model as fm
from fastpp import Costs, ScheduleError, ScheduleTypeError, simulate
from fastpp.__main__ import main
from fastpp.model.validate import DATA as SHARED

META = {"dp_size": 1, "pp_size": 1}


def op_table(tmp_path, **columns):
    """A one-op table with every column, ``columns`` replacing some (``empty=True``: no
    rows)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    table = pd.DataFrame({"dp_rank": [0], "stage": [0], "rank": [0], "step": [0],
                          "optype": ["forward-compute"], "start_ts": [0.0], "duration": [1.0],
                          "seq_id": [0], "mc": [0], "mb_id": [0], "gmc": [0]})
    empty = columns.pop("empty", False)
    for name, values in columns.items():
        table[name] = values
    if empty:
        table = table.iloc[:0]
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    return path


ST = SHARED / "whatif_st"  # $FASTPP_DATA or shared/data beside the repository
needs_st = needs_data("whatif_st/trace-ST.parquet", "whatif_st/meta-ST.yaml")  # (runs in CI)


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


DATA = Path(__file__).parent / "data"
TRACES = Path(__file__).parent / "data"
WHATIF = SHARED / "whatif_st"


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


KINDS = ["params-all-gather", "forward-compute", "backward-compute", "gc",
         "layernorm-grads-all-reduce", "embedding-grads-all-reduce", "grads-reduce-scatter",
         "optimizer-clip-main-grad", "optimizer"]


def _trace(folder, events):
    """A one-rank Chrome trace of ``events`` in ``folder``."""
    folder.mkdir()
    path = folder / "rank0_trace.json"
    path.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 1},
                                "traceEvents": events}))
    return path


def _event(name, ts, dur, cat="user_annotation", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid}


GPIPE_PAIR = [_event("Forward 0", 0.0, 10.0), _event("Backward 0", 20.0, 10.0)]
ROOT = Path(__file__).resolve().parents[1]


def children(pid: int) -> dict[int, list[str]]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
    return {k: [a.decode() for a in v if a] for k, v in found.items()}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("columns, meta, match", [
    ({"empty": True}, META, "op table trace-X.parquet must hold ops .it has none"),
    ({"start_ts": ["a"]}, META, "start_ts must hold numbers"),
    ({"duration": ["a"]}, META, "duration must hold numbers"),
    ({"start_ts": [np.nan]}, META, "start_ts must have no missing values"),
    ({"start_ts": [np.inf]}, META, "start_ts must be finite"),
    ({"duration": [-1.0]}, META, "duration must be >= 0"),
    ({"dp_rank": [np.nan]}, META, "dp_rank must have no missing values"),
    ({"step": ["0"]}, META, "step must hold integers"),
    ({}, {**META, "tp_size": "x"}, "meta tp_size must be a positive integer"),
    ({}, {**META, "tp_size": 0}, "meta tp_size must be a positive integer"),
    ({}, {**META, "world_size": "1"}, "meta world_size must be a positive integer"),
    ({}, {"dp_size": True, "pp_size": 1}, "meta dp_size must be a positive integer"),
])
def test_bad_op_tables(tmp_path, columns, meta, match):
    import fastpp

    pytest.importorskip("yaml")
    with pytest.raises(ScheduleError, match=match):
        fastpp.read_op_table(op_table(tmp_path, **columns), meta)


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


def test_measure_refuses_placement_with_a_schedule(capsys):
    err = cli_error(capsys, ["measure", "-s", "1f1b", "-p", "2", "-n", "4",
                             "--placement", "v"])
    assert "--placement must be given with --from-csv only" in err


def test_measure_names_only_the_counts_given_beside_a_schedule(capsys, tmp_path, monkeypatch):
    """``measure --from-csv 1f1b.csv -p 3`` said ``(got -p=3, -n=8, -m=None)``: the CSV's own
    n, filled in, was listed as the -n typed (and ``measure(schedule, p=3)`` as its n=)."""
    from fastpp.measured import measure

    order = fastpp.build_schedule("1f1b", 2, 8)
    with pytest.raises(ScheduleError, match=r"own p=2, n=8, m=1 \(got p=3\)$"):
        measure(order, 3, out=tmp_path / "m")
    monkeypatch.chdir(tmp_path)
    fastpp.io.write_torch_csv(order, "1f1b.csv")
    err = cli_error(capsys, ["measure", "--from-csv", "1f1b.csv", "-p", "3"])
    assert err.rstrip().endswith("(got -p=3)"), err


def test_a_trace_label_with_a_number_past_int64(tmp_path):
    """``Forward 99999999999999999999999`` raised OverflowError: Python int too large to
    convert to C long."""
    for rank in (0, 1):
        shutil.copy(DATA / "gpipe" / f"rank{rank}_trace.json.gz", tmp_path)
    path = tmp_path / "rank0_trace.json.gz"
    trace = json.loads(gzip.decompress(path.read_bytes()))
    event = next(e for e in trace["traceEvents"] if e.get("name") == "Forward 0")
    event["name"] = "Forward 99999999999999999999999"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    with pytest.raises(ScheduleError, match=r"stage or microbatch must be below 2\*\*63 \(got "
                                            r"'Forward 99999999999999999999999'\)"):
        fastpp.read_torch_trace(tmp_path)


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


def test_measure_link_delay_as_a_numpy_scalar():
    """``link_delay=np.float32(0.05)`` was refused as "must be seconds or (seconds, r1, r2)";
    NumPy's scalars pass everywhere else."""
    import numpy as np

    from fastpp.measured.runner import link_of as _link

    assert _link(np.float32(0.5), 4) == (0.5, 1, 2)
    assert _link(np.int64(1), 2) == (1.0, 0, 1)
    with pytest.raises(ScheduleError, match="link_delay must be seconds or"):
        _link(np.bool_(True), 2)


def test_measured_steps_with_ops_of_no_time():
    """Steps whose ops took 0 s gave factors of 0/0: a RuntimeWarning, step factors of 0 and
    later "measured op times must be finite and >= 0 (got [nan ...])", times never given."""
    pytest.importorskip("pandas")
    from helpers import changed_run

    import fastpp

    run = fastpp.read_torch_trace(DATA / "gpipe")
    zero = changed_run(run, durations=run.durations * 0.0)
    with pytest.raises(ScheduleError, match=r"measured steps must have ops that take time: "
                                            r"step 0's median op took 0 times its Costs time"):
        fastpp.MeasuredSteps([zero, zero]).step_factors()


def test_trace_cpu_op_with_a_negative_duration(tmp_path):
    """A cpu_op event of dur -1 was read: rank 0's forward time came out 14% short (the
    annotations' negative durations were refused already)."""
    pytest.importorskip("pandas")
    import gzip

    import fastpp

    for path in (DATA / "gpipe").iterdir():
        trace = json.loads(gzip.decompress(path.read_bytes()))
        if "rank0" in path.name:
            for event in trace["traceEvents"]:
                if event.get("cat") == "cpu_op":
                    event["dur"] = -1.0
        (tmp_path / path.name).write_bytes(gzip.compress(json.dumps(trace).encode()))
    with pytest.raises(ScheduleError, match=r"rank 0: a cpu_op event has a negative or NaN "
                                            r"duration \(dur=-1.0\)"):
        fastpp.read_torch_trace(tmp_path)


@pytest.mark.parametrize("label", ["PP:\u0660F0", "PP:0F\uff10"])
def test_a_label_with_another_scripts_digit_is_no_op(tmp_path, label):
    """``\\d`` matched Arabic-Indic and full-width digits: the labels' byte reader then raised
    UnicodeEncodeError; GPipe's ``Forward ١`` was read as microbatch 1, and is now an
    annotation like any other."""
    with pytest.raises(ScheduleError, match="not a pipeline action PyTorch writes"):
        fastpp.read_torch_trace(_trace(tmp_path / "pp", [_event(label, 0.0, 10.0)]))
    events = [GPIPE_PAIR[0], _event("Forward \u0661", 12.0, 5.0), GPIPE_PAIR[1]]
    run = fastpp.read_torch_trace(_trace(tmp_path / "gpipe", events))
    assert [run.schedule.token(0, k) for k in range(run.schedule.length[0])] == ["0F0", "0B0"]


@pytest.mark.parametrize("events, message", [
    ([*GPIPE_PAIR, _event("other", [1], 5.0)], "event 'other' has no numeric ts and dur"),
    ([_event("Forward 0", [0.0], [10.0]), _event("Backward 0", [20.0], [10.0])],
     "event 'Forward 0' has no numeric ts and dur"),
    ([*GPIPE_PAIR, _event("aten::mm", [1.0], 2.0, cat="cpu_op")],
     r"a cpu_op event has ts or dur \[1.0\], not a number"),
    ([*GPIPE_PAIR, _event("aten::mm", 1.0, 2.0, cat="cpu_op", tid=[1])],
     r"a cpu_op event's tid must be a number or a name \(got \[1\]\)"),
])
def test_a_trace_event_with_a_list_for_a_number_is_named(tmp_path, events, message):
    """A list for ``ts``, ``dur`` or ``tid`` escaped as NumPy's ValueError or IndexError."""
    with pytest.raises(ScheduleError, match=message):
        fastpp.read_torch_trace(_trace(tmp_path / "t", events))


@needs_data("whatif_st/trace-ST.parquet")
def test_the_op_tables_meta_takes_numpy_integers():
    """``dp_size = np.int64(2)`` was refused as "must be a positive integer (got
    np.int64(2))"."""
    table = SHARED / "whatif_st" / "trace-ST.parquet"
    job = fastpp.read_op_table(table, {"dp_size": np.int64(2), "pp_size": np.int32(4),
                                       "world_size": np.int64(8)})
    assert (job.dp, job.pp) == (2, 4)


def test_a_probe_whose_ratios_overflow_is_named():
    """A full backward of 1e-300 s against halves of 1e300 s made the split's share infinite,
    and ``costs()`` priced every ``I`` at 0 (``w = b``)."""
    run = fastpp.read_torch_trace(Path(__file__).parent / "data" / "gpipe")
    odd = changed_run(run, probe=np.array([[1e-300, 1e300, 1e300]] * run.schedule.V))
    with pytest.raises(ScheduleError, match="probe must time its split halves I, W within a "
                                            "finite ratio"):
        odd.costs()


def test_measure_script_takes_the_memory_limit_it_shows_and_checks_it_first(tmp_path):
    """``--memory-limit`` said its default was ``1.5p`` and refused ``1.5p``; a bad value is
    refused before any run, nothing written."""
    import importlib.util
    from pathlib import Path

    from helpers import run_script

    path = Path(__file__).resolve().parent.parent / "scripts" / "measure.py"
    spec = importlib.util.spec_from_file_location("measure_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for given, limit in ((["--memory-limit", "1.5p"], 6.0), ([], 6.0),
                         (["--memory-limit", "5"], 5.0)):
        args = script.parse(["-p", "4", *given])
        assert script.memory_limit_flag(args.memory_limit, args.p) == limit
    err = run_script("measure.py", "--memory-limit", "2x", "--out", str(tmp_path), cwd=tmp_path)
    assert "--memory-limit must be a number of units > 0 or a multiple of p such as '1.5p' " \
           "(got '2x')" in err
    assert not any(tmp_path.iterdir())  # nothing ran


def test_measure_refuses_its_outputs_and_inputs_before_running(tmp_path, capsys):
    """``measure`` found a ``--trace`` or ``--picture`` it could not write, or a
    ``--costs-from`` that held no run, only after the run it had just spent minutes on."""
    out = tmp_path / "out"
    for argv, message in (
            (["--trace", str(tmp_path / "none" / "t.json")], "--trace must be a file path that "
             f"can be written (got '{tmp_path / 'none' / 't.json'}': no folder"),
            (["--picture", str(tmp_path)], "--picture must be a file path that can be written "
             f"(got '{tmp_path}': a folder)"),
            (["--costs-from", str(tmp_path)], "--costs-from must be the folder of a measured "
             "run's traces")):
        assert main(["measure", "-s", "1f1b", "--out", str(out), *argv]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()  # nothing ran


def test_measure_on_cuda_without_a_gpu_is_refused_before_the_ranks_start(tmp_path):
    """Each rank had died in ``torch.cuda.set_device`` with a traceback."""
    import pytest

    from fastpp import ScheduleError
    from fastpp.measured import measure

    pytest.importorskip("torch")
    from fastpp.measured.runner import _cuda_devices

    if _cuda_devices() >= 2:
        pytest.skip("this machine has the GPUs")
    with pytest.raises(ScheduleError, match=r"device must be 'cpu' here: 'cuda' needs a GPU for "
                                            r"each of the p=2 ranks \(got device='cuda'; torch "
                                            r"sees \d CUDA devices\)"):
        measure("1f1b", 2, 2, out=tmp_path / "out", device="cuda")
    assert not (tmp_path / "out").exists()


def test_measure_script_refuses_a_limit_no_schedule_fits_before_running(tmp_path):
    """A limit of the right form below what any V schedule needs ran every class, then ended
    in a traceback."""
    from helpers import run_script

    err = run_script("measure.py", "--memory-limit", "0.5", "--out", str(tmp_path / "o"),
                     cwd=tmp_path)
    assert "memory must be at least" in err and not (tmp_path / "o").exists()


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


@needs_data("whatif_st/trace-ST.parquet", "whatif_st/meta-ST.yaml")
def test_op_table_steps_past_int64(tmp_path):
    """uint64 step labels of 2**63 and more wrapped around to negative steps."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("yaml")
    table = pd.read_parquet(WHATIF / "trace-ST.parquet")
    table["step"] = table["step"].astype(np.uint64) + np.uint64(2**63)
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    (tmp_path / "meta-X.yaml").write_text((WHATIF / "meta-ST.yaml").read_text())
    with pytest.raises(ScheduleError, match=r"step must hold integers below 2\*\*63 \(got "
                                            r"922337203685477"):
        fastpp.read_op_table(path)


@pytest.mark.parametrize("labels, match", [
    ({1: "1f1b", "1": "gpipe"}, r"schedules' labels must name different folders \(got 1 and "
                                r"'1', both '1'\)"),
    ({"../../escape": "1f1b"}, r"schedules' labels must be plain folder names, each run's "
                               r"folder under out \(got '../../escape'\)"),
    ({"..": "1f1b"}, r"plain folder names"),
])
def test_measure_many_labels_name_their_own_folders(tmp_path, labels, match):
    """Two labels of one folder ran the second job's schedule for both and read its traces
    twice; a label with '..' wrote outside out. Refused before any rank starts."""
    from fastpp.measured import measure_many

    with pytest.raises(ScheduleError, match=match):
        measure_many(labels, 2, 4, out=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_an_earlier_runs_steps_are_not_read_as_this_ones(tmp_path):
    """A 3-step run's step2 stayed beside a later 2-step run's steps, and the report showed
    it as the later run's last step."""
    from fastpp.measured.runner import Job, _prepare

    for k in range(3):
        (tmp_path / f"step{k}").mkdir()
        (tmp_path / f"step{k}" / "rank0_trace.json").write_text("{}")
    (tmp_path / "step9x").mkdir()  # not a step folder: left alone
    (tmp_path / "step9x" / "rank0_trace.json").write_text("{}")
    (tmp_path / "step1" / "notes.txt").write_text("mine")  # no trace: kept, and its folder
    (tmp_path / "step2" / "rank0_trace.json.bak").write_text("mine")
    (tmp_path / "step5").mkdir()  # empty before: not this code's to remove
    job = Job(**{**{f.name: None for f in __import__("dataclasses").fields(Job)},
                 "out": str(tmp_path)})
    _prepare(job, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step1", "step2", "step5", "step9x"]
    assert [p.name for p in (tmp_path / "step1").iterdir()] == ["notes.txt"]
    assert [p.name for p in (tmp_path / "step2").iterdir()] == ["rank0_trace.json.bak"]


def test_a_missing_forward_on_the_first_rank_is_named(tmp_path):
    """Without 'Forward 0' on rank 0 of a 2-stage GPipe run, the reader took stage 0's 3
    forwards as n (a tie, the first rank's) and blamed a good op's microbatch 3."""
    import gzip
    import json

    source = TRACES / "gpipe"
    for f in source.iterdir():
        events = json.loads(gzip.decompress(f.read_bytes()))
        if f.name.startswith("rank0"):
            events["traceEvents"] = [e for e in events["traceEvents"]
                                     if e.get("name") != "Forward 0"]
        (tmp_path / f.name).write_bytes(gzip.compress(json.dumps(events).encode()))
    with pytest.raises(ScheduleError, match=r"missing 1 op\(s\): 0F0"):
        fastpp.read_torch_trace(tmp_path)


def test_numpy_integers_are_integers_for_measure():
    """probe=np.int64(2), warmup and timeout as NumPy numbers were refused, where p, layers and
    steps took them."""
    from fastpp.measured.runner import _probe, _timeout

    assert _probe(np.int64(2)) == 2 and _timeout(np.float32(5)) == 5.0
    with pytest.raises(ScheduleError, match=r"probe must be an integer >= 0 \(got -1\)"):
        _probe(-1)


def test_read_torch_trace_of_an_empty_path():
    """'' read the current folder."""
    with pytest.raises(ScheduleError, match=r"path must be a trace file, a folder of them or a "
                                            r"list of files \(got ''\)"):
        fastpp.read_torch_trace("")


@pytest.mark.parametrize("argv, match", [
    (["measure", "-s", "1f1b", "--out", "runs", "--trace", "runs/trace.json"],
     "error: --trace must be outside --out 'runs', whose .json files are read as the ranks' "
     "traces (got 'runs/trace.json')"),
    (["measure", "-s", "1f1b", "-p", "3", "-n", "3", "--costs-from", str(TRACES / "gpipe")],
     "error: --costs-from must be a run of this run's 3 ranks (got a run of p=2)"),
])
def test_measure_refuses_before_the_run(tmp_path, monkeypatch, capsys, argv, match):
    """A Perfetto trace written into --out was read as a rank's by the next run, after it;
    costs of another p failed after the run, naming costs.f."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert main(argv) == 2
    assert match in cli_stderr(capsys)
    assert not list((tmp_path / "runs").iterdir())  # no rank ran


@needs_data("whatif_st/trace-ST.parquet", "whatif_st/result-ST.json")
def test_the_what_if_readers_say_what_to_fix(tmp_path):
    """A JSON file given as the op table was told its meta file was missing; ``whatif`` of
    the table's path said "got str", not to read it first."""
    from fastpp.model.validate import DATA as SHARED

    table, result = (SHARED / "whatif_st" / name for name in ("trace-ST.parquet",
                                                              "result-ST.json"))
    with pytest.raises(ScheduleError, match=r"path must be a Parquet op table \(got .*"
                                            r"result-ST.json"):
        fastpp.read_op_table(result)
    with pytest.raises(ScheduleTypeError, match=r"job must be a fastpp.MeasuredJob: read the op "
                                                r"table first, fastpp.read_op_table\("):
        fastpp.whatif(table)


@pytest.mark.parametrize("folder", [None, 5])
def test_read_steps_of_no_path(folder):
    with pytest.raises(ScheduleTypeError, match=r"folder must be a path to measure's run "
                                                r"folder \(got (NoneType|int)\)"):
        fastpp.measured.read_steps(folder)


def test_a_slow_link_is_priced_once_in_a_runs_own_prediction():
    """A run with measure's slow link holds its sleeps in its own costs (its sends): the
    prediction from them priced the link a second time, +96% at 0.05 s a send (a reviewer's
    real run); from another run's costs it is priced."""
    from fastpp.measured import predictions, read_torch_trace

    run = read_torch_trace(DATA / "interleaved-1f1b")
    got = predictions(run, DATA / "zbv", link_delay=(0.05, 0, 1))
    assert got["predicted"] == simulate(run.schedule, run.costs()).makespan
    plain = predictions(run, DATA / "zbv")["predicted from"]
    assert got["predicted from"] > plain + 0.05  # (at least one crossing of the link)


def test_measured_op_times_price_no_sweep_or_plan():
    """A measured run's absolute times replaced every row's costs: a sweep's noisy columns
    were the same at f=1 and f=100, and plan ranked full recomputation with none."""
    run = fastpp.read_torch_trace(DATA / "gpipe")
    noise = fastpp.Noise(empirical=run)
    with pytest.raises(ScheduleError, match=r"noise must not draw a measured run's op times "
                                            r"in sweep: .* MeasuredSteps"):
        fastpp.sweep(["1f1b"], p=2, n=4, f=[1.0, 100.0], b=2.0, progress=False, noise=noise)
    with pytest.raises(ScheduleError, match=r"in plan: they are absolute"):
        fm.plan("llama2-7b", gpus=16, seq=4096, global_batch=64, tp=[2], pp=[2],
                schedules=["1f1b"], noise=noise, objective="p95")
    # one schedule priced by the run's own times is what simulate does
    assert simulate(run.schedule, Costs(1, 2), noise=noise, samples=4).samples == 4


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, PR_SET_PDEATHSIG")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_measure_stopped_by_a_signal_leaves_no_rank_running(tmp_path, sig):
    """SIGTERM to `fastpp measure` left its ranks running (re-parented to PID 1), writing
    into --out and holding the port, and /tmp/fastpp-ranks-* behind; SIGKILL, which nothing
    can catch, left them too."""
    pytest.importorskip("torch")
    runner = subprocess.Popen(
        [sys.executable, "-m", "fastpp", "measure", "-s", "1f1b", "-p", "2", "-n", "2",
         "--layers", "2", "--hidden", "8", "--microbatch", "2", "--steps", "100000",
         "--out", str(tmp_path / "m")], env=env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    ranks = {}
    try:
        # (generous deadlines: under a load of 2-4 on two cores torch's import alone has taken
        # the ranks past 15 s; the test waits only as long as they take)
        deadline = time.monotonic() + 90
        while len(ranks := {k: v for k, v in children(runner.pid).items()
                            if any(a.endswith("rank.py") for a in v)}) < 2:
            assert runner.poll() is None and time.monotonic() < deadline, "no ranks started"
            time.sleep(0.1)
        folder = Path(next(iter(ranks.values()))[-1]).parent
        assert folder.name.startswith("fastpp-ranks-")
        time.sleep(0.5)  # (in torch's import, or running)
        runner.send_signal(getattr(signal, sig))  # the runner only, not its group
        runner.wait(60)
        deadline = time.monotonic() + 60
        while any(alive(pid) for pid in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(pid) for pid in ranks), "a rank runs on"
        if sig == "SIGTERM":
            assert runner.returncode == 128 + signal.SIGTERM
            assert not folder.exists()
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        for pid in ranks:  # (left running: the defect)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_measure_script_takes_a_timeout(tmp_path):
    """scripts/measure.py had no --timeout (1800 s hard-coded): a hung rank held a run for half
    an hour. The flag is checked as `fastpp measure --timeout` is."""
    from helpers import script

    measure = script("measure")
    assert measure.parse(["--timeout", "90"]).timeout == 90
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "measure.py"), "--timeout",
                          "0", "--out", str(tmp_path), "--picture", str(tmp_path / "p.png"),
                          "--trace", str(tmp_path / "t.json")], capture_output=True, text=True,
                         env=env())
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        "error: --timeout must be a finite number of seconds > 0 (got --timeout=0.0)")


@needs_st
def test_a_job_built_from_a_table_in_memory_is_checked():
    """``MeasuredJob(table, meta)``, public, checked nothing: trace ST's DP2 table with meta
    dp_size 1 gave S = 1.0078 (the file's 1.1787) and M_S = 23.3, a table without ``end_ts``
    an AttributeError, an empty one an IndexError, and it wrote a column into the caller's
    table."""
    pd = pytest.importorskip("pandas")
    table = pd.read_parquet(ST / "trace-ST.parquet")
    sizes = {"dp_size": 2, "pp_size": 4}
    with pytest.raises(ScheduleError, match=r"meta dp_size=1 disagrees with the table: its "
                                            r"dp_rank values are \[0, 1\]"):
        fastpp.MeasuredJob(table, {**sizes, "dp_size": 1})
    with pytest.raises(ScheduleError, match=r"table must hold ops \(it has none\)"):
        fastpp.MeasuredJob(table.iloc[:0], sizes)
    with pytest.raises(ScheduleTypeError, match=r"table must be a pandas DataFrame of ops "
                                                r"\(got str\)"):
        fastpp.MeasuredJob("trace-ST.parquet", sizes)
    with pytest.raises(ScheduleTypeError, match=r"meta must be a dict of sizes \(got str\)"):
        fastpp.MeasuredJob(table, "meta-ST.yaml")
    columns = list(table.columns)
    job = fastpp.MeasuredJob(table, sizes)  # as the file reads
    assert list(table.columns) == columns
    assert fastpp.whatif(job).slowdown == fastpp.whatif(fastpp.read_op_table(
        ST / "trace-ST.parquet")).slowdown


@needs_st
def test_a_table_of_doubled_or_multiindex_columns_is_refused_by_name():
    """A column twice (pd.concat along the columns) made each column's check a frame's:
    pandas' 'truth value of a Series is ambiguous'; a MultiIndex of columns passed the
    columns' check by its first level and failed in the selection, pandas' TypeError."""
    pd = pytest.importorskip("pandas")
    table = pd.read_parquet(ST / "trace-ST.parquet")
    sizes = {"dp_size": 2, "pp_size": 4}
    with pytest.raises(ScheduleError, match=r"table must have each column once, by a plain "
                                            r"name \(got \['duration'\]\)"):
        fastpp.MeasuredJob(pd.concat([table, table[["duration"]]], axis=1), sizes)
    multi = table.copy()
    multi.columns = pd.MultiIndex.from_tuples([(c, "") for c in table.columns])
    with pytest.raises(ScheduleError, match=r"table must have each column once, by a plain "
                                            r"name \(got a MultiIndex of columns\)"):
        fastpp.MeasuredJob(multi, sizes)


@needs_st
def test_a_table_of_repeated_row_labels_reads_as_its_ops(tmp_path):
    """Per-rank tables joined by ``pd.concat`` repeat their row labels: the job looked rows up
    by label, got a Series and raised int()'s TypeError, in memory and from a Parquet file
    that kept the index. The ops are the same whatever their labels."""
    pd = pytest.importorskip("pandas")
    table = pd.read_parquet(ST / "trace-ST.parquet")
    sizes = {"dp_size": 2, "pp_size": 4}
    want = fastpp.whatif(fastpp.MeasuredJob(table, sizes)).slowdown
    joined = pd.concat([g for _, g in table.groupby("rank")])
    joined.index = np.arange(len(joined)) % 7  # (labels repeated, as a concat leaves them)
    assert fastpp.whatif(fastpp.MeasuredJob(joined, sizes)).slowdown == want
    joined.to_parquet(tmp_path / "trace-joined.parquet")
    assert fastpp.whatif(fastpp.read_op_table(tmp_path / "trace-joined.parquet",
                                              sizes)).slowdown == want


@pytest.mark.parametrize("p, n", [(2, 4), (3, 8), (4, 10)])
def test_measure_script_prices_the_order_each_class_ran(p, n):
    """scripts/measure.py priced each class by the generator's default order, where PyTorch's
    ScheduleInterleaved1F1B runs ``max(1, n // p)`` rounds of ``n // rounds`` microbatches
    (torch/distributed/pipelining/schedules.py, ``number_of_rounds``,
    ``microbatches_per_round``), as ``measure`` builds it: at ``-p 3 -n 8`` every class ran,
    then the table failed ("n must be a multiple of G=3"), and ``--reread`` the same."""
    from helpers import script

    from fastpp.measured.runner import TORCH_CLASSES

    module = script("measure")
    rounds = max(1, n // p)
    torch_runs = fastpp.build_schedule("interleaved-1f1b", p, n, 2, G=n // rounds)
    assert module.expected("ScheduleInterleaved1F1B", p, n).tokens() == torch_runs.tokens()
    for label in ("1f1b", *TORCH_CLASSES):  # every class the script measures is priced
        assert module.expected(label, p, n).p == p


@pytest.mark.parametrize("steps", [1, 2])
def test_measure_reads_the_files_its_ranks_wrote(tmp_path, monkeypatch, steps):
    """``measure`` read back its whole ``out`` folder: another JSON file there (a note, a
    Perfetto trace) refused the run after every rank had run ("notes.json: not a profiler
    trace"), returning nothing. The ranks stand in here: each writes the trace ``rank.py``
    writes, a GPipe run's."""
    from fastpp.measured import runner

    def ranks(jobs, model, timeout):
        for job in jobs:
            for k in range(model.steps):
                folder = Path(job.out) / (f"step{k}" if model.steps > 1 else "")
                for r in range(job.p):
                    with gzip.open(TRACES / "gpipe" / f"rank{r}_trace.json.gz") as fh:
                        (folder / f"rank{r}_trace.json").write_bytes(fh.read())

    monkeypatch.setattr(runner, "run_jobs", ranks)
    (tmp_path / "notes.json").write_text(json.dumps({"run": "the first"}))
    run = runner.measure("ScheduleGPipe", 2, 4, out=tmp_path, steps=steps, probe=0)
    runs = [run] if steps == 1 else list(run)
    assert [r.schedule.tokens() for r in runs] == [fastpp.read_torch_trace(TRACES / "gpipe")
                                                          .schedule.tokens()] * steps


def test_predictions_take_what_measure_takes():
    """``fastpp.measured.predictions`` of a path raised an AttributeError, and of
    ``link_delay=0.05`` (seconds on the middle link, as ``measure`` takes it) a TypeError,
    of a malformed one a ValueError."""
    from fastpp.measured import predictions, read_torch_trace

    run = read_torch_trace(DATA / "interleaved-1f1b")
    with pytest.raises(ScheduleTypeError, match=r"run must be a fastpp.MeasuredRun \(got str\)"):
        predictions(str(DATA / "interleaved-1f1b"))
    with pytest.raises(ScheduleError, match=r"link_delay must be seconds or \(seconds, r1, "
                                            r"r2\) \(got \(0.05,\)\)"):
        predictions(run, DATA / "zbv", link_delay=(0.05,))
    assert predictions(run, DATA / "zbv", link_delay=0.05) == predictions(
        run, DATA / "zbv", link_delay=(0.05, 0, 1))
