"""Chrome traces, pictures and the command line."""

import contextlib
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from fastpp import SCHEDULES, Costs, build_schedule, simulate
from fastpp.__main__ import main
from fastpp.trace import chrome_trace, write_chrome_trace


@pytest.mark.parametrize("name, p, n, m", [("1f1b", 4, 8, 1), ("zbv", 4, 8, 2),
                                           ("dualpipe", 4, 8, 1), ("chimera", 4, 8, 1)])
def test_trace_structure(tmp_path, name, p, n, m):
    res = simulate(build_schedule(name, p, n, m), Costs(1.0, 2.0, w=1.0, comm=0.1, fb=2.5))
    path = write_chrome_trace(res, tmp_path / "t.json", time_scale=1000.0)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    sched = res.schedule
    assert len(slices) == sched.num_ops  # one slice per op
    for e in slices:
        assert {"name", "pid", "tid", "ts", "dur", "args"} <= e.keys()
    by_device = {r: [e for e in slices if e["pid"] == r] for r in range(sched.p)}
    for r in range(sched.p):
        L = sched.length[r]
        assert [e["name"] for e in by_device[r]] == sched.tokens()[r]
        np.testing.assert_allclose([e["ts"] for e in by_device[r]], res.start[r, :L] * 1000)
        np.testing.assert_allclose([e["ts"] + e["dur"] for e in by_device[r]],
                                   res.end[r, :L] * 1000)
        counters = [e for e in events if e["ph"] == "C" and e["pid"] == r]
        times, values = res.memory_curve(r)
        assert [c["args"]["units"] for c in counters] == values.tolist()
        np.testing.assert_allclose([c["ts"] for c in counters], times * 1000)
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(ends) > 0
    crossings = sum(sched.stage_to_device[s] != sched.stage_to_device[s + 1]
                    for s in range(sched.V - 1)
                    for j in range(sched.n)
                    if sched.route_first[j] <= s < sched.route_last[j])
    assert len(starts) == 2 * crossings  # every hand-off, forward and backward
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {f"device {r}" for r in range(sched.p)}


def test_trace_flows_point_forward_in_time():
    res = simulate(build_schedule("1f1b", 3, 4), Costs(1.0, 2.0, comm=0.5))
    events = chrome_trace(res)["traceEvents"]
    start = {e["id"]: e for e in events if e["ph"] == "s"}
    for e in events:
        if e["ph"] == "f":
            assert e["ts"] >= start[e["id"]]["ts"] + 0.5 * 1000 - 1e-6
            assert e["pid"] != start[e["id"]]["pid"]



@pytest.mark.parametrize("name, m", [("gpipe", 1), ("zbv", 2), ("combined-1f1b", 2)])
def test_trace_flows_bind_to_their_producer_and_consumer(name, m):
    """A flow start binds to the slice enclosing its ts: at the producer's end, where the
    device's next op starts (40 of gpipe's 48 hand-offs at p 4, n 8), Perfetto bound it to
    that next op (its sorter puts a slice before a flow of the same ts: trace_sorter.h,
    SlowOperatorLess; flow_tracker binds to the topmost open slice)."""
    from fastpp.dependencies import inputs, producers

    res = simulate(build_schedule(name, 4, 8, m), Costs(1.0, 2.0, w=1.0))  # back to back
    sched, events = res.schedule, chrome_trace(res)["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]

    def enclosing(e, closed):  # every slice of e's device whose time holds e's ts
        return [x["name"] for x in slices if x["pid"] == e["pid"] and x["ts"] <= e["ts"]
                and (e["ts"] <= x["ts"] + x["dur"] if closed else e["ts"] < x["ts"] + x["dur"])]

    start = {e["id"]: enclosing(e, closed=True) for e in events if e["ph"] == "s"}
    bound = sorted((*start[e["id"]], *enclosing(e, closed=False))
                   for e in events if e["ph"] == "f")
    producer = producers(sched)
    wanted = sorted((sched.token(*producer[source]), sched.token(r, k))
                    for r in range(sched.p) for k in range(sched.length[r])
                    for source in inputs(sched, r, k) if producer[source][0] != r)
    assert bound == wanted  # (one slice each: a start on two slices is a tuple too long)


def _not_blank(path) -> bool:
    import matplotlib.image as mpimg

    pixels = mpimg.imread(path)
    return path.stat().st_size > 5000 and float(pixels[..., :3].std()) > 0.05


def test_pictures_are_written_and_not_blank(tmp_path):
    pytest.importorskip("matplotlib")
    from fastpp import plot

    res = simulate(build_schedule("dualpipe", 4, 8), Costs(1.0, 2.0, w=1.0, fb=2.5))
    assert _not_blank(plot.gantt(res, tmp_path / "g.png"))
    assert _not_blank(plot.memory(res, tmp_path / "m.png"))


def _cli(*args):
    """``python -m fastpp ARGS`` in this process (so that coverage sees it): its exit code,
    stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse's usage errors
            code = stop.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_module_entry_point():
    run = subprocess.run([sys.executable, "-m", "fastpp", "list"], capture_output=True,
                         text=True, check=True)
    assert "zbv" in run.stdout


def test_cli_simulate_with_every_output(tmp_path):
    run = _cli("simulate", "--schedule", "zbv", "-p", "4", "-n", "8", "--f", "2", "--b", "4",
               "--w", "2", "--trace", str(tmp_path / "t.json"), "--gantt", str(tmp_path / "g.png"),
               "--memory-plot", str(tmp_path / "m.png"), "--csv", str(tmp_path / "s.csv"))
    assert run.returncode == 0, run.stderr
    assert "makespan 51, bubble 5.88% (span metric 0.00%)" in run.stdout
    for name in ("t.json", "g.png", "m.png", "s.csv"):
        assert (tmp_path / name).stat().st_size > 0
    again = _cli("simulate", "--from-csv", str(tmp_path / "s.csv"), "--f", "2", "--b", "4",
                 "--w", "2")
    assert again.returncode == 0 and "makespan 51," in again.stdout


@pytest.mark.parametrize("name", ["interleaved-1f1b", "zbv", "1f1b"])
def test_cli_takes_the_registry_default_m(name):
    """Without -m the CLI builds the registry's default_m (interleaved 1F1B once failed with
    "m must be at least 2"): the same makespan as the API at that m."""
    spec = SCHEDULES[name]
    run = _cli("simulate", "-s", name, "-p", "4", "-n", "8")
    assert run.returncode == 0, run.stderr
    assert f"m={spec.default_m}," in run.stdout
    made = simulate(build_schedule(name, 4, 8, spec.default_m), Costs(1.0, 2.0)).makespan
    assert f"makespan {made:g}," in run.stdout


def test_search_candidates_and_torch_classes_come_from_the_registry():
    from fastpp.measured.runner import TORCH_CLASSES
    from fastpp.search.problem import Problem

    loop = Problem.build(4, 8, None, None, "loop", "makespan")
    v = Problem.build(4, 8, None, None, "v", "makespan")
    assert loop.fixed_schedules() == ["zb-h1", "zb-h2"]
    assert v.fixed_schedules() == ["zbv", "v-half", "v-min"]
    assert TORCH_CLASSES["ScheduleZBVZeroBubble"] == "zbv"
    assert "Schedule1F1B" not in TORCH_CLASSES  # it labels no op: measured from fastpp's CSV


@pytest.mark.parametrize("command", [["simulate", "-s", "1f1b"], ["optimize"]])
def test_cli_memory_has_no_old_spelling(command, tmp_path):
    """'--memory' meant a PNG on simulate and a limit on optimize: now --memory-plot and
    --memory-limit, and no abbreviation lets the old spelling through."""
    run = _cli(*command, "-p", "2", "-n", "2", "--memory", str(tmp_path / "m.png"))
    assert run.returncode == 2 and "unrecognized arguments: --memory" in run.stderr


def test_cli_show_and_list():
    listing = _cli("show", "-s", "1f1b", "-p", "2", "-n", "2", "--by-index")
    assert listing.stdout.splitlines()[1:] == ["device  0:  0F0  0F1  0B0  0B1",
                                               "device  1:  1F0  1B0  1F1  1B1"]
    # by time (f=1, b=2): device 0's B0 waits for device 1's B0 (ends at 4), B1 for 1B1 (7)
    shown = _cli("show", "-s", "1f1b", "-p", "2", "-n", "2")
    assert shown.stdout.splitlines()[1:] == ["one column per 1 time units, '.' idle",
                                             "device  0: 0F0 0F1  .   .  0B0      .  0B1",
                                             "device  1:  .  1F0 1B0     1F1 1B1      .   ."]
    # a step is the shortest op; ops that are not multiples of it round to the nearest step
    odd = _cli("show", "-s", "zb-h1", "-p", "2", "-n", "2", "--w", "0.5").stdout
    assert odd.splitlines()[1] == "one column per 0.5 time units, '.' idle"
    listed = _cli("list").stdout
    assert "dualpipe" in listed and "n must be at least 2p" in listed


@pytest.mark.parametrize("args, message", [
    (("simulate", "-s", "1f1b", "-p", "4", "-n", "6", "-m", "2"),
     "error: -m must be 1 (one stage per device) for '1f1b' (got -m=2)"),
    (("simulate", "-s", "nope", "-p", "4", "-n", "6"), "error: --schedule must be one of"),
    (("simulate", "-s", "1f1b", "-p", "4", "-n", "6", "--f", "-1"),
     "error: --f must be finite and > 0"),
    (("simulate", "--from-csv", "/nonexistent.csv"), "error: /nonexistent.csv: cannot be read"),
    (("simulate", "-s", "1f1b", "-p", "4"), "--schedule needs -p and -n"),
    (("simulate",), "one of the arguments --schedule/-s --from-csv is required"),
])
def test_cli_errors_are_one_line(args, message):
    run = _cli(*args)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def test_command_line_plan(tmp_path):
    run = _cli("plan", "--model", "llama2-7b", "--gpus", "2", "--seq", "128",
               "--global-batch", "4", "--tp", "1", "--pp", "2", "--microbatch", "1",
               "--recompute", "none", "--schedules", "1f1b", "zbv", "--out", str(tmp_path),
               "--efficiency", "0.4", "--link", "NVLink4", "--capacity-gb", "40")
    assert run.returncode == 0, run.stderr
    assert "llama2-7b on 2 x H100-80GB (products up to 40% of peak)" in run.stdout
    # device 0: 16 layers of 202.4 M parameters and the 131 M embedding, 18 bytes each (the
    # gradients in fp32), 60.6 GB, and 0.5 GB of activations (fused SwiGLU: 6F bytes a token
    # in the MLP)
    assert "nothing fits" in run.stdout and "needs 61.2 GB on device 0" in run.stdout
    roomy = _cli("plan", "--model", "llama2-7b", "--gpus", "2", "--seq", "128",
                 "--global-batch", "4", "--tp", "1", "--pp", "2", "--microbatch", "1",
                 "--recompute", "none", "--schedules", "1f1b", "zbv", "--out", str(tmp_path),
                 "--no-plots")
    assert "fastest that fit (2 of 2)" in roomy.stdout
    # the first run drew plan.png; the second, without pictures, leaves none of the first's
    # beside its own table
    assert (tmp_path / "plan.parquet").exists() and not (tmp_path / "plan.png").exists()
    bad = _cli("plan", "--model", "llama2-7b", "--gpus", "6", "--tp", "4")
    assert bad.returncode == 2 and "error: --tp must divide --gpus=6 (got --tp=4)" in bad.stderr
    bad = _cli("plan", "--model", "llama2-7b", "--gpus", "8", "--tp", "4", "--pp", "4")
    assert bad.returncode == 2 and "error: --gpus=8 has no factorization" in bad.stderr


def test_command_line_plan_moe(tmp_path):
    """The MoE flags reach plan: every row at the asked ep and precision."""
    import pandas as pd

    run = _cli("plan", "--model", "mixtral-8x7b", "--gpus", "16", "--seq", "1024",
               "--global-batch", "32", "--tp", "1", "--pp", "2", "--microbatch", "1",
               "--recompute", "none", "--schedules", "1f1b", "--ep", "4", "8",
               "--precision", "fp8", "--node-limit", "1", "--imbalance", "1.2",
               "--out", str(tmp_path), "--no-plots")
    assert run.returncode == 0, run.stderr
    df = pd.read_parquet(tmp_path / "plan.parquet")
    assert sorted(set(df["ep"])) == [4, 8] and set(df["precision"]) == {"fp8"}
    # inside a plan, an ep that does not divide the 8 experts is a row with its reason
    odd = _cli("plan", "--model", "mixtral-8x7b", "--gpus", "12", "--seq", "1024",
               "--global-batch", "12", "--tp", "1", "--pp", "2", "--microbatch", "1",
               "--schedules", "1f1b",
               "--ep", "3", "--out", str(tmp_path), "--no-plots")
    assert odd.returncode == 0 and "nothing fits" in odd.stdout
    reasons = set(pd.read_parquet(tmp_path / "plan.parquet")["reason"])
    assert reasons and all("ep=3" in r for r in reasons), reasons


def test_cli_takes_vocabularies_and_defaults_from_the_library(monkeypatch):
    """The command line retypes no vocabulary and no default of plan or optimize, and states
    the Megatron-Core setting (tp_overlap, blocking hand-offs, sequence parallelism)."""
    import inspect

    import fastpp.__main__ as cli
    import fastpp.model
    from fastpp.model.config import CP_COMMS, ZERO3_GATHERS
    from fastpp.model.hardware import PRECISIONS
    from fastpp.model.transformer import RECOMPUTE
    from fastpp.search.optimizer import METHODS, ROBUST
    from fastpp.search.problem import OBJECTIVES

    sub = next(a for a in cli._parser()._actions if a.dest == "command").choices
    choices = {(name, a.dest): tuple(a.choices) for name, parser in sub.items()
               for a in parser._actions if a.choices}
    assert choices[("plan", "recompute")] == RECOMPUTE
    assert choices[("plan", "precision")] == PRECISIONS
    assert choices[("plan", "zero3")] == ZERO3_GATHERS
    assert choices[("plan", "cp_comm")] == CP_COMMS
    assert choices[("optimize", "method")] == METHODS
    assert choices[("optimize", "objective")] == (*OBJECTIVES, *ROBUST)
    assert choices[("plan", "objective")] == ROBUST
    from fastpp.noise import DISTS

    assert choices[("simulate", "dist")] == choices[("plan", "dist")] == DISTS
    given = {}
    real_plan = fastpp.model.plan

    def plan(*args, **kwargs):
        given.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(fastpp.model, "plan", plan)
    with pytest.raises(SystemExit):
        cli.main(["plan", "--model", "llama2-7b", "--gpus", "8"])
    defaults = {k: v.default for k, v in inspect.signature(real_plan).parameters.items()}
    for key in ("sequence_parallel", "blocking_handoffs", "tp_overlap", "gradient_overlap",
                "imbalance", "zero3", "cp_comm", "link", "node_limit", "hardware", "noise",
                "objective"):
        assert given.get(key, given.get("args", {}).get(key)) == defaults[key] or (
            key == "hardware"), key
    given.clear()
    with pytest.raises(SystemExit):
        cli.main(["plan", "--tp-overlap", "--no-blocking-handoffs", "--no-sequence-parallel"])
    assert (given["tp_overlap"], given["blocking_handoffs"], given["sequence_parallel"]) == (
        True, False, False)


def test_measure_predictions_come_from_the_library():
    """What ``measure`` prints beside the measured makespan: fastpp.measured.predictions."""
    from pathlib import Path

    from fastpp.measured import predictions, read_torch_trace

    data = Path(__file__).parent / "data"
    run = read_torch_trace(data / "interleaved-1f1b")
    got = predictions(run, data / "zbv")
    assert list(got) == ["replayed", "predicted", "predicted from"]
    assert got["replayed"] == run.replay().makespan
    assert got["predicted"] == simulate(run.schedule, run.costs()).makespan
    other = read_torch_trace(data / "zbv")
    # each of its stages priced by the layers it holds
    assert got["predicted from"] == simulate(run.schedule,
                                             other.costs(schedule=run.schedule)).makespan
    assert predictions(run, other) == got
