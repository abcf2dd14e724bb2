"""Measured runs: reading traces, the time split, clock alignment, replay, and bad input.

Synthetic traces (tests/trace_synth.py) come from an event loop of their own with every time
known; the real ones (tests/data/, see its README) are torch 2.13 runs on this machine.
"""

import gzip
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import trace_synth
from helpers import changed_run

import fastpp
from fastpp import ScheduleError, build_schedule, read_torch_trace, simulate

DATA = Path(__file__).parent / "data"
REAL = {"interleaved-1f1b": ("interleaved-1f1b", 2), "gpipe": ("gpipe", 1),
        "looped-bfs": ("looped-bfs", 2), "zbv": ("zbv", 2), "dualpipev": ("dualpipev", 2),
        "interleaved-zb": (None, 2)}  # PyTorch's ScheduleInterleavedZeroBubble
# A trace's ts near 5e12 microseconds (the profiler's clock) holds times to about 1 ns (one float
# step is 2**-10 us there): "exactly" means to a few such steps.
EXACT = 5e-9
COMPUTE = re.compile(r"^PP:(\d+[FBIW]\d+|\(\d+F\d+;\d+B\d+\)OVERLAP_F_B)$|^(Forward|Backward) \d+$")


def synthetic(rng, name="1f1b", p=4, n=8, m=1, *, lead=True, extra=False, latency=3e-4,
              o1=2e-5):
    """A schedule and its true timeline: random compute (jitter), receive-posting gaps before
    ops, injected extra delays on some hand-offs."""
    s = build_schedule(name, p, n, m)
    shape = s.kind.shape
    compute = rng.uniform(5e-4, 2e-3, shape)
    gaps = rng.uniform(1e-4, 6e-4, shape) if lead else np.zeros(shape)
    gaps[0, 0] = 0.0  # the run starts with device 0's first op
    delay = np.where(rng.random(shape) < 0.3, rng.uniform(1e-4, 1e-3, shape), 0.0) if extra \
        else None
    o1 = np.full(p, o1)  # the time from a range's start to its wait: the same runtime code
    return s, trace_synth.run(s, compute, gaps, latency=latency, o1=o1, extra=delay)


def test_the_synthetic_traces_follow_the_reference_dependency_rule():
    """trace_synth takes each op's inputs from ``fastpp.dependencies``, and the reader its
    hand-offs from ``dependencies.edges``: a wrong rule there would make the synthetic truths
    and the reader agree on a wrong answer. With no runtime gaps the synthetic timeline must be
    tests/reference.py's (its own rule, read from the tokens and routes), and ``edges`` must
    name the ops ``inputs`` names, on a sample of every schedule's valid points."""
    from helpers import valid_points
    from reference import simulate_reference

    from fastpp import Costs
    from fastpp.dependencies import edges, inputs, producers

    rng = np.random.default_rng(7)
    checked = set()
    # p <= 4, n p <= 48: every schedule and its phase shapes, in a few seconds
    for name, p, n, m in [x for x in valid_points(4) if x[1] * x[2] <= 48][::5]:
        s = build_schedule(name, p, n, m)
        shape = s.kind.shape
        compute = rng.uniform(0.5, 2.0, shape)
        truth = trace_synth.run(s, compute, np.zeros(shape), latency=0.3, o1=np.zeros(p),
                                send_gap=0.0, send_post=0.0)
        ref = simulate_reference(s, Costs(1, 2, comm=0.3), durations=compute.tolist())
        for r in range(p):
            np.testing.assert_allclose(truth["end"][r, :s.length[r]], ref.end[r], rtol=0,
                                       atol=1e-9, err_msg=f"{name} p={p} n={n} m={m} r={r}")
        where = producers(s)
        rs, ks, made_by = edges(s)
        number = {(int(r), int(k)): i for i, (r, k) in enumerate(zip(rs, ks, strict=True))}
        for i, (r, k) in enumerate(zip(rs, ks, strict=True)):
            named = {number[where[x]] for x in inputs(s, int(r), int(k))}
            assert named == {int(x) for x in made_by[i] if x >= 0}, (name, p, n, m, r, k)
        checked.add(name)
    assert checked == set(fastpp.SCHEDULES), set(fastpp.SCHEDULES) - checked


def assert_recovered(run, truth, schedule):
    used = np.arange(schedule.kind.shape[1]) < schedule.length[:, None]
    for name in ("start", "end", "release", "wait", "compute", "overhead"):
        np.testing.assert_allclose(getattr(run, name)[used], truth[name][used], rtol=0,
                                   atol=EXACT, err_msg=name)


def test_synthetic_times_are_recovered_exactly(tmp_path, rng):
    s, truth = synthetic(rng)
    trace_synth.write(tmp_path, s, truth)
    run = read_torch_trace(tmp_path)
    assert run.schedule.tokens() == s.tokens()
    assert (run.p, run.n, run.m) == (4, 8, 1)
    assert_recovered(run, truth, s)
    # trace_synth writes one operator per op, from 1 us after its wait to 1 us before its end
    inside = truth["end"] - np.where(np.isnan(truth["ready"]), truth["start"], truth["ready"])
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    np.testing.assert_allclose(run.operators[used], inside[used] - 2e-6, atol=EXACT)
    assert run.makespan == pytest.approx(np.nanmax(truth["end"]), abs=EXACT)
    assert run.offsets.tolist() == [0, 0, 0, 0] and run.offset_residual == 0
    table = run.ops
    assert len(table) == s.num_ops
    row = table[(table.device == 1) & (table.label == "1B2")].iloc[0]
    k = s.tokens()[1].index("1B2")
    assert (row.position, row.kind, row.stage, row.microbatch) == (k, "B", 1, 2)
    assert row.wait == pytest.approx(truth["wait"][1, k], abs=EXACT)


@pytest.mark.parametrize("lead", [False, True])
def test_injected_waits_are_the_stall_and_the_replay_is_exact(tmp_path, rng, lead):
    """The latency (less the time to reach the wait) and every injected delay come back, and
    the replay reproduces every op to float precision, with or without work (posting
    receives) before the ops' ranges."""
    s, truth = synthetic(rng, "interleaved-1f1b", 4, 8, 2, lead=lead, extra=True)
    trace_synth.write(tmp_path, s, truth)
    run = read_torch_trace(tmp_path)
    assert_recovered(run, truth, s)
    # the engine counts the time an op takes to reach its wait (o1) as its compute, after the
    # wait: so its latency is the true one less o1
    assert run.latency == pytest.approx(3e-4 - 2e-5, abs=EXACT)
    np.testing.assert_allclose(run.stall, truth["stall"], atol=EXACT)
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    late = truth["stall"] > 0
    assert late.sum() > 5
    replay = run.replay()
    np.testing.assert_allclose(replay.end[used], truth["release"][used], atol=EXACT)
    assert replay.makespan == pytest.approx(run.makespan, abs=EXACT)
    comparison = run.compare(replay)
    assert abs(comparison.error) < EXACT
    assert np.abs(comparison.ops["late"]).max() < EXACT


def test_clock_offsets_between_hosts_are_recovered(tmp_path, rng):
    s, truth = synthetic(rng, "1f1b", 4, 8)
    offsets = np.array([0.0, 0.0137, -0.25, 3.5])
    trace_synth.write(tmp_path, s, truth, offsets=offsets, hosts=["a", "b", "c", "d"])
    run = read_torch_trace(tmp_path)
    # symmetric links, one latency: the fastest hand-offs each way are equally fast
    np.testing.assert_allclose(run.offsets, offsets, atol=EXACT)
    assert run.offset_residual > 0  # how far the offsets could be off: half the round trip
    assert_recovered(run, truth, s)


def test_ranks_on_one_host_are_not_shifted(tmp_path, rng):
    s, truth = synthetic(rng, "1f1b", 4, 8)
    trace_synth.write(tmp_path, s, truth, hosts=["a", "a", "b", "b"],
                      offsets=np.array([0.0, 0.0, 0.02, 0.02]))
    run = read_torch_trace(tmp_path)
    np.testing.assert_allclose(run.offsets, [0, 0, 0.02, 0.02], atol=EXACT)


def test_ranks_on_one_host_whose_clocks_disagree_are_aligned(tmp_path, rng):
    """Each profiled process converts its own clock: two ranks on one host that disagree by
    less than SAME_HOST_SLACK_US (a receive ending before its send was posted) are aligned by
    their hand-offs as ranks on two hosts are, not refused; the other host keeps its own."""
    from fastpp.measured.align import SAME_HOST_SLACK_US

    s, truth = synthetic(rng, "1f1b", 4, 8)
    offsets = np.array([0.0, 0.0, 4e-4, 4e-4])  # rank 2's and 3's clocks ahead by 0.4 ms
    shift = np.array([0.0, 0.0, 0.0, 5e-4])  # rank 3 0.5 ms more: beyond the 0.3 ms latency
    assert 5e-4 * 1e6 < SAME_HOST_SLACK_US
    trace_synth.write(tmp_path, s, truth, offsets=offsets + shift, hosts=["a", "a", "b", "b"])
    run = read_torch_trace(tmp_path)
    np.testing.assert_allclose(run.offsets, offsets + shift, atol=EXACT)
    assert_recovered(run, truth, s)


def test_gz_gpipe_labels_and_a_list_of_files(tmp_path, rng):
    s, truth = synthetic(rng, "gpipe", 3, 4)
    paths = trace_synth.write(tmp_path, s, truth, gz=True, labels="gpipe")
    run = read_torch_trace([str(x) for x in reversed(paths)])
    assert run.schedule.tokens() == s.tokens()
    assert_recovered(run, truth, s)
    one = read_torch_trace(build_one(tmp_path / "one", rng))
    assert one.p == 1


def build_one(folder, rng):
    s, truth = synthetic(rng, "1f1b", 1, 3)
    return trace_synth.write(folder, s, truth)[0]


def test_device_ranges_are_preferred(tmp_path, rng):
    """A GPU trace: the gpu_user_annotation ranges over the kernels give the times (kernels
    run once their inputs are in: the ranges hold no wait); the CPU ranges (launches) are
    ignored. A wait is the idle gap before an op with an input from another device."""
    s, truth = synthetic(rng, "1f1b", 2, 4)
    trace_synth.write(tmp_path, s, truth)
    busy = truth["end"] - truth["compute"]
    for r, path in enumerate(sorted(tmp_path.iterdir())):
        data = json.loads(path.read_text())
        ranges = [e for e in data["traceEvents"]
                  if e.get("cat") == "user_annotation" and COMPUTE.match(e["name"])]
        for k, e in enumerate(ranges):
            shift = (busy[r, k] - truth["start"][r, k]) * 1e6
            data["traceEvents"].append({**e, "cat": "gpu_user_annotation", "ts": e["ts"] + shift,
                                        "dur": e["dur"] - shift})
            e["ts"] -= 30.0  # launched before
        path.write_text(json.dumps(data))
    run = read_torch_trace(tmp_path)
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    np.testing.assert_allclose(run.start[used], busy[used], atol=EXACT)
    np.testing.assert_allclose(run.compute[used], truth["compute"][used], atol=EXACT)
    before = np.concatenate([np.zeros((2, 1)), truth["end"][:, :-1]], axis=1)
    takes_input = np.array([s.kind[0] == 1, s.kind[1] == 0])  # device 0's B, device 1's F
    takes_input[:, 0] = True  # and a device's first op waits from the run's start
    np.testing.assert_allclose(run.wait[used], np.where(takes_input, busy - before, 0.0)[used],
                               atol=EXACT)


def test_megatron_timer_files(tmp_path, rng):
    """PP-Schedule-Visualization's Megatron patch: per pipeline rank, CUDA-event times in ms
    after a barrier, ``forward-{chunk}-{mb}-start`` with virtual stages."""
    s, truth = synthetic(rng, "interleaved-1f1b", 2, 4, 2)
    busy = truth["end"] - truth["compute"]  # CUDA events time the kernels, after the wait
    for r in range(2):
        times = {}
        for k in range(s.length[r]):
            what = "forward" if s.kind[r, k] == 0 else "backward"
            key = f"{what}-{s.stage[r, k] // 2}-{s.mb[r, k]}"
            times[f"{key}-start"] = busy[r, k] * 1e3
            times[f"{key}-end"] = truth["end"][r, k] * 1e3
        name = f"event_times_PP2_VPP2_TPxCPxDP_rank_0_pp_rank_{r}_rank_{r * 4}.json"
        (tmp_path / name).write_text(json.dumps(times))
        # a tensor-parallel replica of the same pipeline rank: left out of a folder
        replica = tmp_path / name.replace("TPxCPxDP_rank_0", "TPxCPxDP_rank_1")
        replica.write_text(json.dumps(times))
    with pytest.raises(ScheduleError, match="a TPxCPxDP rank other than 0"):
        read_torch_trace(replica)
    run = read_torch_trace(tmp_path)
    assert run.schedule.tokens() == s.tokens()
    assert run.makespan == pytest.approx(np.nanmax(truth["end"]), abs=EXACT)
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    np.testing.assert_allclose(run.compute[used], truth["compute"][used], atol=EXACT)


def trace_span(folder: Path) -> float:
    """First compute range start to last end over the files, read directly (seconds)."""
    first, last = np.inf, -np.inf
    for path in folder.iterdir():
        with gzip.open(path) as fh:
            data = json.load(fh)
        base = (data["baseTimeNanoseconds"] - 1_790_857_026_000_000_000) / 1e3  # keep ns
        for e in data["traceEvents"]:
            if e.get("cat") == "user_annotation" and COMPUTE.match(e.get("name", "")):
                first = min(first, base + e["ts"])
                last = max(last, base + e["ts"] + e["dur"])
    return (last - first) * 1e-6


@pytest.mark.parametrize("folder", sorted(REAL))
def test_real_runs(folder):
    run = read_torch_trace(DATA / folder)
    name, m = REAL[folder]
    if name is not None:
        assert run.schedule.tokens() == build_schedule(name, 2, 4, m).tokens()
    assert (run.p, run.n, run.m) == (2, 4, m)
    assert run.makespan == pytest.approx(trace_span(DATA / folder), rel=1e-12)
    assert run.offsets.tolist() == [0.0, 0.0]
    replay = run.replay()
    comparison = run.compare(replay)
    print(f"{folder}: {comparison}, latency {run.latency * 1e6:.0f} us")
    assert abs(comparison.error) <= 0.03
    # the split adds up: from one op's sends to the next op's, the device waited, computed
    # or worked outside the ranges
    used = np.arange(run.schedule.kind.shape[1]) < run.schedule.length[:, None]
    before = np.concatenate([np.zeros((2, 1)), run.release[:, :-1]], axis=1)
    np.testing.assert_allclose((run.wait + run.compute + run.overhead)[used],
                               (run.release - before)[used], atol=1e-12)
    assert np.all(run.wait >= 0) and np.all(run.stall >= 0) and np.all(run.stall <= run.wait)
    # an op hands its outputs on at its release, or earlier where a consumer had them sooner,
    # never before its work began; the slots between these add up to the run
    work = run.end - run.compute
    assert np.all(run.handed[used] <= run.release[used])
    assert np.all(run.handed[used] >= work[used] - 1e-12)
    # each op within 0.8 ms of the run; before `handed`, ScheduleGPipe's 0B2 came 2.9 ms late
    # in the replay: 1B2's range (its sends posted inside it) ended after 0B2 had its input
    late = comparison.ops["late"].abs()
    assert late.max() <= 0.8e-3


def test_an_input_before_its_producers_release_is_charged_to_the_producer():
    """tests/data/gpipe: 0B2 had its input at 17.28 ms, before 1B2's range ended (17.43 ms):
    1B2's slot ends a latency before that, so 0B2 does not start late in the replay and the
    time goes to 1B3 (1B2's next op), not to 0B2."""
    run = read_torch_trace(DATA / "gpipe")
    s = run.schedule
    k1, k0 = s.tokens()[1].index("1B2"), s.tokens()[0].index("0B2")
    start0 = run.end[0, k0] - run.compute[0, k0]
    assert start0 < run.release[1, k1]
    assert run.handed[1, k1] == pytest.approx(start0 - run.latency, abs=EXACT)
    # the replay adds no error at 0B2 (it added -2.18 ms), nor at 1B2 or 1B3: each ends as
    # late as the op before it on its device (errors made earlier, at 0B0 and 1F2)
    comparison = run.compare(run.replay())
    lost = comparison.ops.set_index("label")["lost"]
    assert abs(lost["0B2"]) < 0.05e-3
    assert lost["1B2"] == pytest.approx(0, abs=EXACT) and lost["1B3"] == pytest.approx(0, abs=EXACT)
    # compare names the op that added the most error, either way: 0B0, whose input came 1.97 ms
    # after 1B0's release, sooner than the run's latency (2.42 ms), so the replay starts it late
    # (it named 0B3, the catch-up after 0B2)
    k = s.tokens()[0].index("0B0")
    came = run.end[0, k] - run.compute[0, k] - run.release[1, s.tokens()[1].index("1B0")]
    assert came < run.latency
    assert (comparison.op, comparison.device) == ("0B0", 0) and comparison.lost < 0
    assert "largest op error at 0B0 on device 0 (-0." in str(comparison)


def test_calibrated_costs():
    """Per kind and device: the typical operators' time times m in f and b, the rest of the
    typical duration in overhead and send, so that a chunk op of this run's m takes its
    typical duration. Interleaved 1F1B at p = 2 (stages 0..3 on devices 0, 1, 0, 1): every
    forward but stage 3's hands on to the other device, every backward but stage 0's."""
    run = read_torch_trace(DATA / "interleaved-1f1b")
    ops = run.ops
    used = np.arange(run.durations.shape[1]) < run.schedule.length[:, None]
    dur, operators = run.durations[used], run.operators[used]
    stage = ops.stage.to_numpy()
    sends = {"F": stage < 3, "B": stage > 0}
    device = run.costs()
    overhead = device.arrays["overhead"]  # rows F, B, I, W
    for kind in ("F", "B"):  # the typical fixed time of the ops that send less the others'
        mine = (ops.kind == kind).to_numpy()
        fixed = dur[mine] - operators[mine]
        yes, no = fixed[sends[kind][mine]], fixed[~sends[kind][mine]]
        assert device.send[kind] == pytest.approx(np.median(yes) - np.median(no), rel=1e-12)
        assert device.send[kind] > 0
    assert device.send["I"] == device.send["B"]  # no I ran: B's stands in
    for r in range(2):
        pick = (ops.device == r).to_numpy()
        for row, kind, field in ((0, "F", "f"), (1, "B", "b")):
            mine = pick & (ops.kind == kind).to_numpy()
            typical, scaled = np.median(dur[mine]), np.median(operators[mine])
            assert 0 < scaled < typical
            assert getattr(device, field)[r] == pytest.approx(2 * scaled, rel=1e-12)
            share = sends[kind][mine].mean()  # device 0: F 1, B 1/2; device 1: F 1/2, B 1
            assert share == (1.0 if (kind == "F") == (r == 0) else 0.5)
            assert overhead[row, r] == pytest.approx(typical - scaled - device.send[kind] * share,
                                                     rel=1e-12)
        # no split backward ran: I and W each take the full backward's fixed time, and w is
        # the typical share of its backwards' operators that made the parameters' gradients
        assert overhead[2, r] == overhead[3, r] == overhead[1, r]
        mine = pick & (ops.kind == "B").to_numpy()
        share = np.median(run.weight_operators[used][mine] / operators[mine])
        assert 0 < share < 1
        assert device.w[r] == pytest.approx(share * device.b[r], rel=1e-12)
    assert device.comm == run.latency
    stage = run.costs(per="stage")
    assert len(stage.f) == 4 and stage.arrays["overhead"].shape == (4, 4)
    # any schedule on p = 2 takes the per-device costs, with its own m
    for name, m in (("1f1b", 1), ("zbv", 2), ("interleaved-1f1b", 2)):
        assert simulate(build_schedule(name, 2, 4, m), device).makespan > 0
    split = read_torch_trace(DATA / "zbv").costs()
    assert np.all(split.w > 0) and np.all(split.w <= split.b)
    assert np.all(split.arrays["overhead"] > 0)  # B takes the I's fixed time
    assert (split.arrays["overhead"][1] == split.arrays["overhead"][2]).all()
    with pytest.raises(ScheduleError, match="per must be one of"):
        run.costs(per="rank")
    with pytest.raises(TypeError):
        run.costs(m=2)  # one Costs serves every m


def test_operators_span_the_layers_and_the_python_between(tmp_path, rng):
    """An op's ``operators`` run from its first profiled operator's start to its last one's
    end: the gaps between a chunk's layers (their Python) shrink with the chunk as the layers
    do, so they count; a nested operator counts once."""
    s, truth = synthetic(rng, p=2, n=4)
    trace_synth.write(tmp_path, s, truth)
    whole = read_torch_trace(tmp_path).operators
    for path in tmp_path.glob("rank*_trace.json"):
        data = json.loads(path.read_text())
        events = [e for e in data["traceEvents"] if e.get("cat") != "cpu_op"]
        for op in (e for e in data["traceEvents"] if e.get("cat") == "cpu_op"):
            q = op["dur"] / 4
            for i in range(4):  # four layers, the last fifth of each the Python to the next
                layer = dict(op, ts=op["ts"] + i * q, dur=q if i == 3 else 0.8 * q)
                events += [layer, dict(layer, name="aten::addmm", dur=layer["dur"] / 2)]
        data["traceEvents"] = sorted(events, key=lambda e: e["ts"])
        path.write_text(json.dumps(data))
    run = read_torch_trace(tmp_path)
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    assert (run.operators[used] > 0).all()
    np.testing.assert_allclose(run.operators, whole, rtol=0, atol=EXACT)


EVALUATE = "autograd::engine::evaluate_function: "  # the autograd engine's range of a node


def operators_of(data: dict, label: str) -> list[dict]:
    """The profiled operators inside the range ``label`` on its thread (posting messages is
    not an operator), by start, longer first."""
    (op,) = [e for e in data["traceEvents"]
             if e.get("cat") == "user_annotation" and e["name"] == label]
    return sorted((e for e in data["traceEvents"] if e.get("cat") == "cpu_op"
                   and e["tid"] == op["tid"] and op["ts"] <= e["ts"] < op["ts"] + op["dur"]
                   and not e["name"].startswith("c10d::")), key=lambda e: (e["ts"], -e["dur"]))


def weight_part_by_hand(inside: list[dict]) -> float:
    """An unsplit backward's weight part (microseconds), one node's evaluation at a time: each
    owns the time to the next one's start (the last, to the operators' end); AccumulateGrad's
    and TBackward0's go to the weight, an AddmmBackward0's from the end of its first of two
    products (the input's gradient) or whole when it made one, the others' to the input."""
    close = max(e["ts"] + e["dur"] for e in inside)
    nodes = [e for e in inside if e["name"].startswith(EVALUATE)]
    total = 0.0
    for k, node in enumerate(nodes):
        until = nodes[k + 1]["ts"] if k + 1 < len(nodes) else close
        what = node["name"][len(EVALUATE):]
        products = [e for e in inside if e["name"] == "aten::mm"
                    and node["ts"] <= e["ts"] < node["ts"] + node["dur"]]
        if what in ("torch::autograd::AccumulateGrad", "TBackward0"):
            total += until - node["ts"]
        elif what == "AddmmBackward0":
            assert len(products) in (1, 2)
            total += until - (products[0]["ts"] + products[0]["dur"] if len(products) == 2
                              else node["ts"])
    return total


@pytest.mark.parametrize("folder", ["gpipe", "interleaved-1f1b", "looped-bfs", "dualpipev"])
def test_an_unsplit_backwards_weight_part_is_what_its_operators_say(folder):
    """Each unsplit backward's ``weight_operators`` is the part of its operators' span that
    its profiled operators say made the parameters' gradients, computed here from the trace's
    own events; it holds at least the operators that only do that (the second product of each
    two, AccumulateGrad, TBackward0) and at most the span less those that only make the
    input's gradient (the first product of each two, the other nodes); other ops have none."""
    from fastpp.measured.read import read_file
    from fastpp.ops import B

    for path in sorted((DATA / folder).glob("rank*_trace.json.gz")):
        with gzip.open(path) as fh:
            data = json.load(fh)
        trace = read_file(path)
        backward = trace.ops[:, 0] == B
        assert backward.any()
        assert (trace.weight_operators[~backward] == 0).all()
        for k in np.flatnonzero(backward):
            inside = operators_of(data, trace.labels[k])
            weight = trace.weight_operators[k]
            assert weight == pytest.approx(weight_part_by_hand(inside), rel=1e-9, abs=1e-6)
            nodes = [e for e in inside if e["name"].startswith(EVALUATE)]
            products = [e for e in inside if e["name"] == "aten::mm"]
            pairs = [[x for x in products if n["ts"] <= x["ts"] < n["ts"] + n["dur"]]
                     for n in nodes if n["name"].endswith("AddmmBackward0")]
            surely_w = sum(e["dur"] for e in nodes if e["name"].endswith(
                ("AccumulateGrad", "TBackward0"))) + sum(pair[-1]["dur"] for pair in pairs)
            surely_i = sum(pair[0]["dur"] for pair in pairs if len(pair) == 2) + sum(
                e["dur"] for e in nodes if not e["name"].endswith(
                    ("AccumulateGrad", "TBackward0", "AddmmBackward0")))
            assert surely_w <= weight <= trace.operators[k] - surely_i


def test_the_rules_weight_share_is_the_split_backwards():
    """DualPipeV's trace ran full backwards and split ones (I, W) on the same stages in one
    step: on stages 1-3, the weight's share the rule finds in the full ones is the split ones'
    measured W / (I + W) within 0.05 (0.753 against 0.723 here; stage 0 is left out: PyTorch
    runs all of its backward in W, its input needing no gradient). The split's own extra
    Python (stage_backward_input walks the autograd graph) makes the two differ a little."""
    from fastpp.ops import B, I, W

    run = read_torch_trace(DATA / "dualpipev")
    s = run.schedule
    mine = (np.arange(s.kind.shape[1]) < s.length[:, None]) & (s.stage >= 1)
    full = mine & (s.kind == B)
    rule = run.weight_operators[full].sum() / run.operators[full].sum()
    split = run.operators[mine & (s.kind == W)].sum() / run.operators[
        mine & np.isin(s.kind, (I, W))].sum()
    assert abs(rule - split) <= 0.05


def test_a_trace_without_autograd_nodes_keeps_w_zero(tmp_path):
    """Without the autograd engine's node ranges nothing says which operators made the
    parameters' gradients: ``w`` stays 0, and nothing else moves."""
    for r, data in enumerate(real_copy(tmp_path, "gpipe")):
        for e in data["traceEvents"]:
            if e.get("cat") == "cpu_op" and e["name"].startswith(EVALUATE):
                e["name"] = e["name"][len(EVALUATE):]  # the node's own range's name
        rewrite(tmp_path, r, data)
    bare, whole = read_torch_trace(tmp_path), read_torch_trace(DATA / "gpipe")
    assert (bare.weight_operators == 0).all() and bare.costs().w.tolist() == [0.0, 0.0]
    assert (whole.costs().w > 0).all()
    for field in ("f", "b", "comm"):
        np.testing.assert_array_equal(getattr(bare.costs(), field), getattr(whole.costs(), field))


def test_the_weight_part_is_read_alike_every_way(monkeypatch):
    """The byte scan, msgspec's objects and orjson's dicts tell the operators apart alike."""
    from fastpp.measured import read

    for path in sorted(DATA.glob("*/rank*_trace.json.gz")):
        scanned = read.read_file(path).weight_operators
        for way in ({"_SCAN": False}, {"_SCAN": False, "msgspec": None}):
            with monkeypatch.context() as m:
                for name, value in way.items():
                    m.setattr(read, name, value)
                np.testing.assert_array_equal(read.read_file(path).weight_operators, scanned)


def test_steps_carry_the_weight_part():
    run = read_torch_trace(DATA / "gpipe")
    typical = fastpp.MeasuredSteps([run, run, run]).typical
    np.testing.assert_array_equal(typical.weight_operators, run.weight_operators)
    np.testing.assert_array_equal(typical.costs().w, run.costs().w)


def test_a_measured_run_made_by_hand_needs_no_weight_part_and_refuses_a_wrong_one():
    """``weight_operators`` is optional (zeros: no weight's part measured) and must lie
    between 0 and each op's ``operators``."""
    run = read_torch_trace(DATA / "zbv")
    fields = ["schedule", "start", "end", "release", "wait", "compute", "overhead", "stall",
              "durations", "handed", "latency", "offsets", "offset_residual", "files", "hosts",
              "operators"]
    given = {name: getattr(run, name) for name in fields}
    assert (fastpp.MeasuredRun(**given).weight_operators == 0).all()
    for wrong in (run.operators + 1e-3, -run.operators - 1e-3):
        with pytest.raises(ScheduleError, match=r"weight_operators must lie in 0\.\.operators"):
            fastpp.MeasuredRun(**given, weight_operators=wrong)


@pytest.mark.parametrize("field, value, message", [
    ("durations", np.nan, "durations must be finite at every op"),
    ("start", np.inf, "start must be finite at every op"),
    ("durations", -1e-3, "durations must be >= 0 at every op"),
    ("end", None, r"end - start must be >= 0 at every op"),
    ("offsets", np.nan, "offsets must be finite"),
    ("latency", np.nan, "latency must be"),
    ("offset_residual", -1.0, "offset_residual must be"),
])
def test_a_measured_run_refuses_times_no_trace_has(field, value, message):
    """A NaN, an infinity or a negative time in a run made by hand was taken as given: a start
    at -inf gave an infinite makespan, a NaN latency surfaced in ``costs()`` as ``costs.comm``
    and a NaN duration only at ``replay()``."""
    run = read_torch_trace(DATA / "zbv")
    if field in ("latency", "offset_residual"):
        wrong = value
    elif field == "end":
        wrong = run.end.copy()
        wrong[0, 0] = run.start[0, 0] - 1e-3
    else:
        wrong = getattr(run, field).copy()
        wrong[(0, 0) if wrong.ndim == 2 else 0] = value
    with pytest.raises(ScheduleError, match=message):
        changed_run(run, **{field: wrong})


def test_one_costs_for_every_chunk_count():
    """Only the operators' time shrinks with the chunk: from a run with m = 1, a chunk forward
    of an m = 2 schedule takes half the typical operators' time plus one op's whole fixed
    part, and one of this run's own m its typical duration. GPipe's device 1 never sent its
    forward; interleaved 1F1B's stage 1, on device 1, does: it pays the send as well."""
    run = read_torch_trace(DATA / "gpipe")
    used = np.arange(run.schedule.kind.shape[1]) < run.schedule.length[:, None]
    costs = run.costs()
    assert costs is run.costs()  # calibrated once
    own = costs.per_stage(run.schedule)
    two = costs.per_stage(build_schedule("interleaved-1f1b", 2, 4, 2))
    for r in range(2):
        pick = used[r] & (run.schedule.kind[r] == 0)
        operators = np.median(run.operators[r][pick])
        typical = np.median(run.durations[r][pick])
        assert 0 < operators < typical
        assert own.tf[r] == pytest.approx(typical, rel=1e-12)
        assert two.tf[r] == pytest.approx(operators / 2 + (typical - operators)
                                          + (costs.send["F"] if r == 1 else 0.0), rel=1e-12)
    assert costs.send["F"] > 0


def test_each_real_run_from_its_own_costs():
    """Calibration, not replay: each run simulated with one cost per op kind and device and
    one latency, in sample (MeasuredRun.costs's docstring gives the figures, printed here).
    The means price their own run within 10%; an op's times are skewed (a long tail of slow
    ones), so the medians price every run short, and shorter than its means do."""
    errors = {}
    for statistic in ("median", "mean"):
        for folder in REAL:
            run = read_torch_trace(DATA / folder)
            made = simulate(run.schedule, run.costs(statistic=statistic)).makespan
            errors[statistic, folder] = made / run.makespan - 1
        shown = ", ".join(f"{f} {errors[statistic, f]:+.1%}" for f in REAL)
        print(f"{statistic}: {shown}")
    for folder in REAL:
        assert abs(errors["mean", folder]) <= 0.10, folder
        assert errors["median", folder] < min(0.0, errors["mean", folder]), folder


@pytest.mark.parametrize("folder", sorted(REAL))
@pytest.mark.parametrize("per", ["device", "stage"])
def test_each_group_keeps_its_mean_time(folder, per):
    """With ``statistic="mean"``, each group's (device's or stage's) ops of a kind take, on
    average, their measured mean in the run's own schedule: ``overhead`` plus the ops' share of
    ``send`` is the group's fixed time, however the sending ops are spread (the send capped
    where it would leave a group less than 0: tests/data's looped BFS per stage took 6.6% too
    long before the cap), and a split run's ``I`` is its own ops' time, probe or not
    (DualPipeV's trace, without a probe, priced its ``I`` as ``b - w``: 0.24 ms where its ops
    took 0.54 ms)."""
    run = read_torch_trace(DATA / folder)
    s = run.schedule
    result = simulate(s, run.costs(per=per, statistic="mean"))
    made = result.end - result.start
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    group = np.broadcast_to(np.arange(s.p)[:, None], s.kind.shape) if per == "device" else s.stage
    checked = 0
    for kind in range(5):
        for g in np.unique(group[used & (s.kind == kind)]):
            pick = used & (s.kind == kind) & (group == g)
            assert made[pick].mean() == pytest.approx(run.durations[pick].mean(), rel=1e-12)
            checked += 1
    assert checked >= 4


def test_compare_needs_the_runs_schedule():
    run = read_torch_trace(DATA / "gpipe")
    with pytest.raises(ScheduleError, match="result must simulate this run's schedule"):
        run.compare(simulate(build_schedule("1f1b", 2, 4)))
    with pytest.raises(ScheduleError, match="result must be a fastpp.Result"):
        run.compare("replay")


def test_import_fastpp_does_not_import_pandas():
    import subprocess
    import sys
    code = "import sys, fastpp; assert 'pandas' not in sys.modules; fastpp.MeasuredRun"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


# -- bad input -----------------------------------------------------------------------------


def real_copy(tmp_path, folder="interleaved-1f1b"):
    """The real run as plain JSON files in ``tmp_path``; returns their parsed contents."""
    out = []
    for r in range(2):
        with gzip.open(DATA / folder / f"rank{r}_trace.json.gz") as fh:
            data = json.load(fh)
        out.append(data)
        (tmp_path / f"rank{r}_trace.json").write_text(json.dumps(data))
    return out


def rewrite(tmp_path, r, data):
    (tmp_path / f"rank{r}_trace.json").write_text(json.dumps(data))


def events(data, name):
    return [e for e in data["traceEvents"] if e.get("name") == name]


def test_truncated_and_non_json(tmp_path):
    real_copy(tmp_path)
    path = tmp_path / "rank1_trace.json"
    path.write_text(path.read_text()[:5000])
    with pytest.raises(ScheduleError, match=r"rank1_trace.json: not valid JSON \(truncated"):
        read_torch_trace(tmp_path)
    path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(ScheduleError, match="rank1_trace.json: not valid JSON"):
        read_torch_trace(tmp_path)
    path.write_text("[1, 2]")
    with pytest.raises(ScheduleError, match="rank1_trace.json: not a profiler trace"):
        read_torch_trace(tmp_path)
    path.unlink()
    zipped = tmp_path / "rank1_trace.json.gz"
    zipped.write_bytes(gzip.compress(b'{"traceEvents": []}')[:15])
    with pytest.raises(ScheduleError, match="rank1_trace.json.gz: cannot be read"):
        read_torch_trace(tmp_path)


def test_no_pipeline_labels_says_how_to_measure_1f1b(tmp_path):
    data = real_copy(tmp_path)
    data[1]["traceEvents"] = [e for e in data[1]["traceEvents"]
                              if not str(e.get("name")).startswith("PP:")]
    rewrite(tmp_path, 1, data[1])
    with pytest.raises(ScheduleError, match=r"rank1_trace.json: rank 1: no pipeline labels.*"
                                            r"Schedule1F1B labels nothing.*write_torch_csv.*"
                                            r"_PipelineScheduleRuntime"):
        read_torch_trace(tmp_path)


def test_missing_and_duplicate_ranks(tmp_path):
    real_copy(tmp_path)
    with pytest.raises(ScheduleError, match=r"missing rank\(s\) \[1\] of world size 2"):
        read_torch_trace(tmp_path / "rank0_trace.json")
    shutil.copy(tmp_path / "rank0_trace.json", tmp_path / "copy_trace.json")
    with pytest.raises(ScheduleError, match="rank 0: duplicate rank, also in"):
        read_torch_trace(tmp_path)


def test_duplicate_missing_and_out_of_range_ops(tmp_path):
    data = real_copy(tmp_path)
    original = json.dumps(data[0])
    op = events(data[0], "PP:0F1")[0]
    data[0]["traceEvents"].append({**op, "ts": op["ts"] + 1e5})
    rewrite(tmp_path, 0, data[0])
    with pytest.raises(ScheduleError, match=r"rank0_trace.json: rank 0: event 'PP:0F1' at "
                                            r"ts=.*: duplicate op 0F1.*Profile one step"):
        read_torch_trace(tmp_path)
    for bad, match in (("PP:0F9", "microbatch 9 is out of range: most stages ran n=4"),
                       ("PP:8F0", "stage 8 is out of range: the run's stages are 0..3"),
                       ("PP:0X0", "not a pipeline action")):
        data[0] = json.loads(original)
        data[0]["traceEvents"].append({**op, "name": bad, "ts": op["ts"] + 1e5})
        rewrite(tmp_path, 0, data[0])
        with pytest.raises(ScheduleError, match=rf"rank0_trace.json: rank 0: event '{bad}'.*"
                                                rf"{match}"):
            read_torch_trace(tmp_path)
    data[0] = json.loads(original)
    data[1]["traceEvents"] = [e for e in data[1]["traceEvents"] if e.get("name") != "PP:1B3"]
    rewrite(tmp_path, 0, data[0])
    rewrite(tmp_path, 1, data[1])
    with pytest.raises(ScheduleError, match=r"missing 1 op\(s\): 1B3 \(rank 1, .*rank1_trace"):
        read_torch_trace(tmp_path)


def test_a_stage_on_two_ranks(tmp_path):
    data = real_copy(tmp_path)
    moved = events(data[0], "PP:2F3")[0]
    data[0]["traceEvents"].remove(moved)
    data[1]["traceEvents"].append({**moved, "pid": 1, "tid": 1})
    rewrite(tmp_path, 0, data[0])
    rewrite(tmp_path, 1, data[1])
    with pytest.raises(ScheduleError, match="stage 2 also ran on rank 0"):
        read_torch_trace(tmp_path)


def test_a_range_running_on_into_the_next_is_an_error(tmp_path):
    """``PP:0F0`` stretched 100 us into ``PP:0B0`` on its thread, which ``record_function``
    cannot write (its ranges nest or follow each other), was read: the first op's compute ran
    on into the second's (the replay +0.46% on zbv's rank 1). A range ending within the
    ranges' rounding of the next one's start still reads."""
    data = real_copy(tmp_path)
    first, second = events(data[0], "PP:0F0")[0], events(data[0], "PP:0F1")[0]
    gap = second["ts"] - (first["ts"] + first["dur"])
    first["dur"] += gap + 0.5  # rounding: within TOLERANCE_US of the next one's start
    rewrite(tmp_path, 0, data[0])
    read_torch_trace(tmp_path)
    first["dur"] += 100.0
    rewrite(tmp_path, 0, data[0])
    with pytest.raises(ScheduleError, match=r"rank 0: range 'PP:0F1' at ts=.* starts "
                                            r"100.500 us before 'PP:0F0' ends: one thread's "
                                            r"ranges nest or follow each other"):
        read_torch_trace(tmp_path)


def test_a_range_inside_another_is_a_part_of_its_pair_or_an_error(tmp_path):
    """A copy of ``PP:0B0`` inside ``PP:0F0`` was dropped silently as if it were a part of an
    overlapped pair; only a pair's own forward and backward nest in its range."""
    data = real_copy(tmp_path)
    outer = events(data[0], "PP:0F0")[0]
    inner = {**events(data[0], "PP:0B0")[0], "ts": outer["ts"] + 1, "dur": 1}
    data[0]["traceEvents"].append(inner)
    rewrite(tmp_path, 0, data[0])
    with pytest.raises(ScheduleError, match=r"range 'PP:0B0' at ts=.* lies inside 'PP:0F0' "
                                            r"at ts=.*, of which it is no part"):
        read_torch_trace(tmp_path)
    # the pair's own parts nest: relabel 0F0 as a pair of 0F0 and 0B0, its parts inside
    from fastpp.measured.read import read_file

    data = real_copy(tmp_path)
    outer = events(data[0], "PP:0F0")[0]
    before = len(read_file(tmp_path / "rank0_trace.json").labels)
    outer["name"] = "PP:(0F0;0B0)OVERLAP_F_B"
    for part in ("PP:0F0", "PP:0B0"):
        data[0]["traceEvents"].append({**outer, "name": part, "ts": outer["ts"] + 1, "dur": 1})
    rewrite(tmp_path, 0, data[0])
    labels = read_file(tmp_path / "rank0_trace.json").labels
    assert "PP:(0F0;0B0)OVERLAP_F_B" in labels and "PP:0F0" not in labels
    assert len(labels) == before  # the parts kept out, the pair in 0F0's place


def test_two_runs_mixed(tmp_path):
    data = real_copy(tmp_path)
    data[1]["distributedInfo"]["world_size"] = 4
    rewrite(tmp_path, 1, data[1])
    with pytest.raises(ScheduleError, match="two runs mixed: the files' world sizes differ"):
        read_torch_trace(tmp_path)
    data[1]["distributedInfo"]["world_size"] = 2
    data[1]["baseTimeNanoseconds"] += 10**10  # the same host, ten seconds later
    rewrite(tmp_path, 1, data[1])
    with pytest.raises(ScheduleError, match=r"two runs mixed on host 'vm': .*rank1_trace.json "
                                            r"\(rank 1\) starts 9.9\d+ s after"):
        read_torch_trace(tmp_path)


def test_clocks_that_cannot_be_aligned(tmp_path, rng):
    data = real_copy(tmp_path)
    data[1]["baseTimeNanoseconds"] -= 3 * 10**6  # rank 1's clock 3 ms behind on one host
    rewrite(tmp_path, 1, data[1])
    with pytest.raises(ScheduleError, match=r"clocks cannot be aligned: ranks 0 and 1 share "
                                            r"host 'vm' \(one clock\), yet .* before it was sent"):
        read_torch_trace(tmp_path)
    # on two hosts, a negative latency makes every round trip negative: no offset helps
    s, truth = synthetic(rng, "1f1b", 2, 4, latency=-5e-3)
    trace_synth.write(tmp_path / "two", s, truth, hosts=["a", "b"])
    with pytest.raises(ScheduleError, match="clocks cannot be aligned between hosts 'a' and 'b'"):
        read_torch_trace(tmp_path / "two")
    # forward only: hand-offs one way only, nothing to align two hosts by
    s = build_schedule("forward-only", 2, 3)
    shape = s.kind.shape
    truth = trace_synth.run(s, np.full(shape, 1e-3), np.zeros(shape), latency=1e-4,
                            o1=np.full(2, 1e-5))
    trace_synth.write(tmp_path / "fwd", s, truth, hosts=["a", "b"])
    with pytest.raises(ScheduleError, match=r"host\(s\) \['b'\] exchange no hand-offs in both"):
        read_torch_trace(tmp_path / "fwd")


def test_bad_paths(tmp_path):
    with pytest.raises(ScheduleError, match="does not exist"):
        read_torch_trace(tmp_path / "nothing")
    with pytest.raises(ScheduleError, match="holds no .json or .json.gz trace files"):
        read_torch_trace(tmp_path)
    with pytest.raises(ScheduleError, match="must list at least one trace file"):
        read_torch_trace([])
    with pytest.raises(ScheduleError, match="path must be a trace file"):
        read_torch_trace(3)


def test_public_names():
    assert fastpp.read_torch_trace is read_torch_trace
    assert "MeasuredRun" in fastpp.__all__ and "read_torch_trace" in fastpp.__all__


def test_random_damage_is_a_clear_error_or_a_valid_run(tmp_path, rng):
    """Events deleted, fields dropped or mistyped, names and times changed at random: every
    read ends in a ScheduleError or a run whose schedule validated, never another error."""
    data = real_copy(tmp_path)
    original = [json.dumps(d) for d in data]
    outcomes = {"error": 0, "valid": 0}
    for _ in range(60):
        r = int(rng.integers(2))
        damaged = json.loads(original[r])
        events_ = damaged["traceEvents"]
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(events_)))
            e = events_[i]
            what = rng.integers(6)
            if what == 0:
                del events_[i]
            elif what == 1 and isinstance(e, dict) and e:
                del e[list(e)[int(rng.integers(len(e)))]]
            elif what == 2 and isinstance(e, dict):
                e["ts"] = ["not", "a", "number"][int(rng.integers(3))]
            elif what == 3 and isinstance(e, dict):
                e["name"] = str(rng.choice(["PP:0F0", "PP:9B9", "PP:", "PP:1SEND_F", "gloo:recv",
                                            "Forward 7", "PP:(0F1;3B1)OVERLAP_F_B", 17]))
            elif what == 4 and isinstance(e, dict) and isinstance(e.get("dur"), float):
                e["dur"] = -e["dur"]
            else:
                events_[i] = "garbage"
        rewrite(tmp_path, r, damaged)
        try:
            run = read_torch_trace(tmp_path)
        except ScheduleError:
            outcomes["error"] += 1
        else:
            assert run.schedule.num_ops > 0
            outcomes["valid"] += 1
        rewrite(tmp_path, r, json.loads(original[r]))
    print(outcomes)
    assert outcomes["error"] > 0


def test_measure_checks_every_argument_before_touching_out(tmp_path):
    """A bad argument leaves ``out`` as it was (its old trace, no new CSV, no new folder); no
    process starts, so torch is not needed."""
    from fastpp.measured.runner import measure, measure_many

    old = tmp_path / "rank0_trace.json"
    old.write_text("{}")
    bad = [({"schedule": "nope"}, r"schedule must be a PyTorch class .* \(got 'nope'\)"),
           ({"schedule": "1f1b", "layers": 3}, r"layers must be a multiple of the 2 virtual"),
           ({"schedule": "interleaved-1f1b", "layers": 6}, r"layers must be a multiple of the 4"),
           ({"schedule": "1f1b", "timeout": 0}, r"timeout must be a finite number of seconds "
                                                r"> 0 \(got timeout=0\)"),
           ({"schedule": "1f1b", "timeout": float("nan")}, r"got timeout=nan"),
           ({"schedule": "1f1b", "timeout": float("inf")}, r"got timeout=inf"),
           ({"schedule": "1f1b", "timeout": True}, r"got timeout=True"),
           ({"schedule": "1f1b", "timeout": "9"}, r"got timeout='9'")]
    for kwargs, message in bad:
        with pytest.raises(ScheduleError, match=message):
            measure(**kwargs, out=tmp_path)
        assert sorted(tmp_path.iterdir()) == [old], kwargs
    with pytest.raises(ScheduleError, match="layers must be a multiple"):
        measure("1f1b", layers=3, out=tmp_path / "new" / "run")
    assert not (tmp_path / "new").exists()
    # measure_many: a bad second schedule leaves the first one's folder unmade
    with pytest.raises(ScheduleError, match=r"\(got 'nope'\)"):
        measure_many({"a": "1f1b", "b": "nope"}, out=tmp_path / "many")
    with pytest.raises(ScheduleError, match=r"steps must be"):
        measure_many({"a": "1f1b"}, out=tmp_path / "many", steps=0)
    with pytest.raises(ScheduleError, match=r"round_robin must be one of \[False, True\] "
                                            r"\(got 'yes'\)"):
        measure_many({"a": "1f1b"}, out=tmp_path / "many", round_robin="yes")
    assert not (tmp_path / "many").exists()
    with pytest.raises(ScheduleError, match=r"out must be a folder for the traces \(got "
                                            r"'.*rank0_trace.json', a file\)"):
        measure("1f1b", out=old)
    with pytest.raises(ScheduleError, match=r"out must be a folder that can be made"):
        measure("1f1b", out=old / "below", timeout=1.0)
    assert old.read_text() == "{}"


def test_measure_without_torch_leaves_out_alone(tmp_path, monkeypatch):
    """Without torch, measure says so before it deletes anything (it once removed the old
    traces first); with it, a new run removes the old ``.json`` and ``.json.gz`` traces
    alike, so that two runs never mix in one folder."""
    import sys

    from fastpp.measured.runner import _job, _prepare, measure

    old = [tmp_path / "rank0_trace.json", tmp_path / "rank1_trace.json.gz"]
    for path in old:
        path.write_text("{}")
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "torch", None)  # import fails: no torch
        with pytest.raises(ScheduleError, match="torch"):
            measure("1f1b", out=tmp_path)
    assert sorted(tmp_path.iterdir()) == old
    job, _, order = _job("1f1b", 2, 4, None, 16, 8, 8, tmp_path, "cpu", 0, False)
    _prepare(job, order)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["schedule.csv"]


def test_bad_rank_and_clock_fields_are_named(tmp_path):
    data = real_copy(tmp_path)
    for field, value, message in [
            ("baseTimeNanoseconds", "soon", r"rank0_trace.json: rank 0: baseTimeNanoseconds "
                                            r"must be an integer \(got 'soon'\)"),
            ("baseTimeNanoseconds", 1.5e18, r"baseTimeNanoseconds must be an integer"),
            ("rank", "0", r"rank0_trace.json: distributedInfo.rank must be an integer >= 0 "
                          r"\(got '0'\)"),
            ("rank", True, r"distributedInfo.rank must be an integer >= 0 \(got True\)"),
            ("rank", -1, r"distributedInfo.rank must be an integer >= 0 \(got -1\)")]:
        damaged = json.loads(json.dumps(data[0]))
        if field == "rank":
            damaged["distributedInfo"]["rank"] = value
        else:
            damaged[field] = value
        rewrite(tmp_path, 0, damaged)
        with pytest.raises(ScheduleError, match=message):
            read_torch_trace(tmp_path)
    # without distributedInfo.rank the file name gives the rank
    del damaged["distributedInfo"]["rank"]
    damaged["baseTimeNanoseconds"] = data[0]["baseTimeNanoseconds"]
    rewrite(tmp_path, 0, damaged)
    assert read_torch_trace(tmp_path).p == 2


def test_megatron_end_before_start(tmp_path):
    name = tmp_path / "event_times_PP2_TPxCPxDP_rank_0_pp_rank_1_rank_1.json"
    name.write_text(json.dumps({"forward-0-start": 1, "forward-0-end": 0}))
    with pytest.raises(ScheduleError, match=r"pp_rank_1_rank_1.json: rank 1: event 'forward-0' "
                                            r"ends before it starts \(forward-0-end=0 ms < "
                                            r"forward-0-start=1 ms\)"):
        read_torch_trace([name])


def test_a_directory_in_a_list_of_files(tmp_path):
    real_copy(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(ScheduleError, match=r"'.*sub' is a directory, not a trace file"):
        read_torch_trace([tmp_path / "rank0_trace.json", tmp_path / "sub"])


@pytest.mark.parametrize("folder", sorted(REAL))
def test_measured_trace_slices_are_never_negative_nor_overlap(folder):
    """A device's first op waits from the run's start, before its range; the trace draws that
    wait before the op's work, not as a slice of negative length."""
    from fastpp.trace import measured_trace

    run = read_torch_trace(DATA / folder)
    trace = measured_trace(run, run.replay())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len([e for e in slices if e["tid"] == 0 and e["name"] != "wait"]) == len(run.ops)
    assert min(e["dur"] for e in slices) >= 0
    for r in range(run.p):  # a device's measured slices follow one another (1 ns: floats)
        mine = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices
                      if e["pid"] == r and e["tid"] == 0)
        assert mine[0][0] == pytest.approx(0, abs=1e-3)
        assert all(a >= b - 1e-3 for (_, b), (a, _) in zip(mine[:-1], mine[1:], strict=True))
    # every op's wait ends where its work begins, and the wait is the run's
    waits = [e for e in slices if e["name"] == "wait"]
    work = [e for e in slices if e["tid"] == 0 and e["name"] != "wait"]
    assert len(waits) == (run.ops["wait"] > 0).sum() > 0
    for w in waits:
        op = min((e for e in work if e["pid"] == w["pid"]),
                 key=lambda e: abs(e["ts"] - w["ts"] - w["dur"]))
        assert op["ts"] == pytest.approx(w["ts"] + w["dur"], abs=1e-3)
        assert w["dur"] == pytest.approx(op["args"]["wait_us"], abs=1e-3)


FAKE_RANK = """
import json, sys, time
spec = json.load(open(sys.argv[1]))
print(f"rank {spec['rank']} of {spec['p']} up", file=sys.stderr, flush=True)
if spec["rank"] == 1 and spec["jobs"][0]["out"].endswith("fail"):
    sys.exit("boom: rank 1's own error")
time.sleep(60)
"""


@pytest.mark.parametrize("what", ["fail", "hang"])
def test_a_failed_or_hung_rank_is_named_and_the_others_killed(tmp_path, monkeypatch, what):
    """The runner's side of the ranks, with a stand-in for rank.py (no torch): a rank that
    exits with an error is named with its exit code and its last lines, and its peer, which
    would wait for it forever, is killed; hung ranks are killed at the timeout, with what they
    printed."""
    from fastpp.measured import runner

    script = tmp_path / "rank.py"
    script.write_text(FAKE_RANK)
    monkeypatch.setattr(runner, "RANK_SCRIPT", script)
    job, model, _ = runner._job("1f1b", 2, 4, None, 16, 8, 8, tmp_path / what, "cpu", 0,
                                False)
    start = time.monotonic()
    if what == "fail":
        with pytest.raises(ScheduleError, match=r"^rank 1 failed \(exit code 1\): rank 1 of 2 "
                                                r"up\nboom: rank 1's own error$"):
            runner.run_jobs([job], model, timeout=30.0)
    else:
        with pytest.raises(ScheduleError, match=r"^timeout: ranks \[0, 1\] were still running "
                                                r"after 1 s and were killed\nrank 0 printed: "
                                                r"rank 0 of 2 up\nrank 1 printed: rank 1 of 2 "
                                                r"up$"):
            runner.run_jobs([job], model, timeout=1.0)
    assert time.monotonic() - start < 20  # the sleeping peer did not hold the call


RUN_FIELDS = ("schedule", "start", "end", "release", "wait", "compute", "overhead", "stall",
              "durations", "handed", "latency", "offsets", "offset_residual", "files", "hosts",
              "operators", "weight_operators")


def _with_probe(run, probe):
    """``run`` with another ``probe`` (``None``: none)."""
    return fastpp.MeasuredRun(**{name: getattr(run, name) for name in RUN_FIELDS}, probe=probe)


def test_the_probe_prices_an_unsplit_runs_split_backward():
    """Without I and W ops, the probe's ratios per group price the split: ``i = b * I/B``,
    ``w = b * W/B`` (per device, of its stages' sums); f, b and the overheads stay."""
    run = read_torch_trace(DATA / "interleaved-1f1b")  # stages 0, 2 on device 0; 1, 3 on 1
    assert np.isnan(run.probe).all() and run.costs().arrays["i"].shape == ()  # not given
    probe = np.array([[4.0, 3.0, 2.0], [5.0, 2.0, 4.0], [6.0, 3.0, 4.0], [5.0, 3.0, 3.0]]) * 1e-3
    plain, probed = run.costs(), _with_probe(run, probe)
    for per, ratio_i, ratio_w in (("device", [6 / 10, 5 / 10], [6 / 10, 7 / 10]),
                                  ("stage", [3 / 4, 2 / 5, 3 / 6, 3 / 5],
                                   [2 / 4, 4 / 5, 4 / 6, 3 / 5])):
        before, after = run.costs(per=per), probed.costs(per=per)
        np.testing.assert_allclose(after.i, before.b * np.array(ratio_i), rtol=1e-12)
        np.testing.assert_allclose(after.w, before.b * np.array(ratio_w), rtol=1e-12)
        for field in ("f", "b", "overhead", "comm"):
            np.testing.assert_array_equal(after.arrays[field], before.arrays[field])
    # a stage the probe missed takes b - w there, w as the unsplit run measured it
    missing = probe.copy()
    missing[1] = np.nan
    stage, before = _with_probe(run, missing).costs(per="stage"), run.costs(per="stage")
    assert stage.i[1] == before.b[1] - before.w[1] and stage.w[1] == before.w[1]
    assert stage.i[0] == pytest.approx(before.b[0] * 3 / 4, rel=1e-12)
    # the split now costs more than b on the zero-bubble schedules: slower predictions
    zb = build_schedule("interleaved-zb", 2, 4, 2)
    assert simulate(zb, probed.costs()).makespan > simulate(zb, plain).makespan


def test_costs_moved_to_another_schedule_by_its_layers():
    """``costs(schedule=)``: each of the target's stages takes the operators' time of the
    run's stages over its layers, in proportion, and their fixed time per op; a stage that
    starts a route where the run's stage over its layers did not (or the reverse) takes the
    split shares of the run's stages that did (did not). Checked against the run's per-stage
    costs worked by hand: a plain pipeline (GPipe, p = 2, blocks 0 and 1) moved to ZB-V
    (m = 2: stages 0, 1 hold block 0's halves, 2 and 3 block 1's, on devices 0, 1, 1, 0)."""
    run = _with_probe(read_torch_trace(DATA / "gpipe"),
                      np.array([[5.0, 0.1, 4.9], [6.0, 3.5, 4.0]]) * 1e-3)
    own = run.costs(per="stage")  # arrays over the run's two stages
    assert run.costs(schedule=run.schedule) == own  # its own stages: unchanged
    zbv = build_schedule("zbv", 2, 4, 2)
    moved = run.costs(schedule=zbv)
    block = np.array([0, 0, 1, 1])
    # a chunk of m = 2 takes f/2: half its block's forward, as a plain pipeline's figure f
    np.testing.assert_allclose(moved.f, own.f[block], rtol=1e-12)
    np.testing.assert_allclose(moved.b, own.b[block], rtol=1e-12)
    np.testing.assert_array_equal(moved.arrays["overhead"], own.arrays["overhead"][:, block])
    assert moved.send == own.send and moved.comm == own.comm
    # stage 0 starts the route as the run's stage 0 did: its own shares (PyTorch's first
    # stage: I does nothing); stage 1 holds block 0's layers but does not start the route:
    # block 1's shares, the run's only stage that did not
    share_i, share_w = own.i / own.b, own.w / own.b
    np.testing.assert_allclose(moved.i, own.b[block] * share_i[[0, 1, 1, 1]], rtol=1e-12)
    np.testing.assert_allclose(moved.w, own.b[block] * share_w[[0, 1, 1, 1]], rtol=1e-12)
    # the device costs give stage 3 (device 0) block 0's first-stage split: its I nothing
    device = run.costs()
    assert device.i[0] == pytest.approx(own.b[0] * 0.1 / 5, rel=1e-12)
    # four devices (p = 4, m = 1): each stage holds half a block, the same layers' time
    four = run.costs(schedule=build_schedule("1f1b", 4, 8))
    np.testing.assert_allclose(four.f, own.f[[0, 0, 1, 1]] / 2, rtol=1e-12)
    np.testing.assert_allclose(four.i[1:], own.b[[0, 1, 1]] / 2 * share_i[1], rtol=1e-12)
    # and back: a ZB-V run's I and W ops moved to a plain pipeline, each stage two of its
    # stages' layers; the whole model's work stays what it was (f over a route, per chunk)
    split = read_torch_trace(DATA / "zbv")
    back = split.costs(schedule=build_schedule("1f1b", 2, 4))
    stages = split.costs(per="stage")
    assert back.f.sum() == pytest.approx(stages.f.sum() / 2, rel=1e-12)
    assert back.b.sum() == pytest.approx(stages.b.sum() / 2, rel=1e-12)
    # DualPipe: two routes, each the whole model
    dual = run.costs(schedule=build_schedule("dualpipe", 2, 4))
    np.testing.assert_allclose(dual.f, own.f[[0, 1, 0, 1]], rtol=1e-12)
    # stage 2 starts the second copy's route: the first stage's split, as stage 0
    np.testing.assert_allclose(dual.i, own.b[[0, 1, 0, 1]] * share_i[[0, 1, 0, 1]],
                               rtol=1e-12)
    with pytest.raises(ScheduleError, match="schedule must be a fastpp.Schedule"):
        run.costs(schedule="zbv")


def test_costs_moved_from_two_copies_with_pairs_and_pooled_shares():
    """``costs(schedule=)`` where the test above does not reach: a run of two routes (two
    copies of the model, DualPipe's) gives each layer the mean of its copies' times; an
    overlapped pair's ``fb`` moves by its forward stage's layers (DualPipeV's pair F(r)&B(3-r)
    is DualPipe's F(r)&B(3-r) by layers at p = 2); a pooled share is the ratio of the sums."""
    from fastpp import Costs

    s = build_schedule("dualpipe", 2, 4)  # stages 0, 1 one copy, 2, 3 the other
    truth = simulate(s, Costs(np.array([1.0, 2.0, 3.0, 4.0]) * 1e-3, 5e-3,
                              i=np.array([0.5, 2.0, 1.0, 3.0]) * 1e-3,
                              w=np.array([4.0, 2.0, 3.0, 1.0]) * 1e-3))
    used = s.kind >= 0
    start, end = (np.where(used, a, 0.0) for a in (truth.start, truth.end))
    zero, took = np.zeros(s.kind.shape), end - start
    run = fastpp.MeasuredRun(s, start, end, end, zero, took, zero, zero, took, end, 0.0,
                             np.zeros(2), 0.0, ["a", "b"], ["h", "h"], took)
    np.testing.assert_allclose(run.costs(per="stage").f, [1e-3, 2e-3, 3e-3, 4e-3], rtol=1e-9)
    plain = run.costs(schedule=build_schedule("1f1b", 2, 4))  # each layer: its copies' mean
    np.testing.assert_allclose(plain.f, [2e-3, 3e-3], rtol=1e-9)
    # each copy's first stage starts a route: ZB-V's stage 1 (a quarter of the model, the
    # first copy's stage 0's and the second's stage 2's layers) takes the shares of the
    # stages that do not, 1 and 3, pooled
    own = run.costs(per="stage")
    pooled = (own.i[1] + own.i[3]) / (own.b[1] + own.b[3])
    v = run.costs(schedule=build_schedule("zbv", 2, 4, 2))
    assert v.i[1] == pytest.approx((own.b[0] + own.b[2]) / 2 * pooled, rel=1e-12)
    # DualPipeV's pairs to DualPipe's, m = 2 to 1: stage 0 holds stages 0 and 1's layers
    pairs = read_torch_trace(DATA / "dualpipev")
    own = pairs.costs(per="stage")
    fb = pairs.costs(schedule=build_schedule("dualpipe", 2, 4)).fb
    halves = [(own.fb[0] + own.fb[1]) / 2, (own.fb[2] + own.fb[3]) / 2]
    np.testing.assert_allclose(fb, np.tile(halves, 2), rtol=1e-12)  # both copies
    # p = 8 from ZB-V's four stages: stage 1, stage 0's second half, starts no route: the
    # shares of the run's stages 1-3 pooled, sum(i) / sum(b)
    split = read_torch_trace(DATA / "zbv")
    own = split.costs(per="stage")
    eight = split.costs(schedule=build_schedule("1f1b", 8, 16))
    pooled = own.i[1:].sum() / own.b[1:].sum()
    assert eight.i[1] == pytest.approx(own.b[0] / 2 / 2 * pooled, rel=1e-12)


def test_costs_moved_without_a_split_swap_the_first_stages_weight_share():
    """A run with neither a probe nor I ops gives no ``i`` (``I`` takes ``b - w``), ``w`` its
    B's weight share; PyTorch's first stage computes no input gradient, so its share is the
    larger (GPipe's trace: 0.85 against 0.69). Moved to ZB-V, stage 1 holds stage 0's layers
    but starts no route: it takes the share of the run's stage that did not (stage 1's), as
    the split's shares do with I ops or a probe. (Until then ``w`` moved as ``b`` did, stage
    1 with the first stage's share: its ``I`` 0.15 of ``b`` where the others' is 0.31.)"""
    run = read_torch_trace(DATA / "gpipe")
    own = run.costs(per="stage")
    share = own.w / own.b
    assert own.i is None and share[0] > share[1] + 0.1
    moved = run.costs(schedule=build_schedule("zbv", 2, 4, 2))
    block = np.array([0, 0, 1, 1])
    assert moved.i is None
    np.testing.assert_allclose(moved.w, own.b[block] * share[[0, 1, 1, 1]], rtol=1e-12)
    assert np.all(moved.w <= moved.b)  # Costs's rule where i is not given
    assert run.costs(schedule=run.schedule) == own


def test_the_probe_prices_a_split_runs_full_backward():
    """A split run's ``I`` and ``W`` ops give ``i`` and ``w``; the full backward ``b`` is their
    sum times the probe's ``B/(I + W)``, not the sum."""
    run = read_torch_trace(DATA / "zbv")
    probe = np.tile([4.0e-3, 3.0e-3, 2.0e-3], (4, 1))  # the split costs 1.25x the full
    before, after = run.costs(), _with_probe(run, probe).costs()
    assert (before.b > before.w).all()  # so w was not clipped: i + w was the ops' sum
    np.testing.assert_allclose(after.b, before.b * 4 / 5, rtol=1e-12)
    np.testing.assert_allclose(after.i, before.b - before.w, rtol=1e-12)
    np.testing.assert_array_equal(after.w, before.w)
    # a split schedule predicted alike, an unsplit one faster
    zbv, one = build_schedule("zbv", 2, 4, 2), build_schedule("1f1b", 2, 4)
    assert simulate(zbv, after).makespan == pytest.approx(simulate(zbv, before).makespan,
                                                          rel=1e-9)
    assert simulate(one, after).makespan < simulate(one, before).makespan


def test_a_probe_is_checked_and_carried_through_the_steps():
    run = read_torch_trace(DATA / "zbv")
    probe = np.tile([4.0e-3, 3.0e-3, 2.0e-3], (4, 1))
    probed = _with_probe(run, probe)
    typical = fastpp.MeasuredSteps([probed, probed, probed]).typical
    np.testing.assert_array_equal(typical.probe, probe)
    assert typical.costs() == probed.costs()
    with pytest.raises(ScheduleError, match=r"probe must have shape \(4, 3\)"):
        _with_probe(run, probe[:2])
    with pytest.raises(ScheduleError, match=r"probe must hold finite times >= 0 or NaN"):
        _with_probe(run, -probe)
    with pytest.raises(ScheduleError, match=r"probe must hold finite times >= 0 or NaN"):
        _with_probe(run, probe * np.inf)


def _probed_trace(folder, tmp_path, lead_trail):
    """The traces in ``folder`` with probe ranges appended after the step: per rank, per stage
    it holds, per kind ``B, I, W``, one range per ``(lead, trail)`` of ``lead_trail`` (us),
    of span 1000 us holding one operator that starts ``lead`` after the range and ends
    ``trail`` before its end (the call's Python outside its operators: ``lead + trail``)."""
    out = tmp_path / folder.name
    out.mkdir()
    run = read_torch_trace(folder)
    for path in sorted(folder.glob("rank*_trace.json.gz")):
        data = json.loads(gzip.open(path).read())
        events = data["traceEvents"]
        rank = data["distributedInfo"]["rank"]
        step = [e for e in events if e.get("cat") == "user_annotation"
                and e["name"].startswith("PP:")]
        pid, tid = step[0]["pid"], step[0]["tid"]
        t = max(e["ts"] + e["dur"] for e in events if "dur" in e) + 100.0
        for stage in np.flatnonzero(run.schedule.stage_to_device == rank).tolist():
            for kind in "BIW":
                for lead, trail in lead_trail:
                    events.append({"ph": "X", "cat": "user_annotation", "pid": pid, "tid": tid,
                                   "name": f"PROBE:{stage}{kind}", "ts": t, "dur": 1000.0})
                    events.append({"ph": "X", "cat": "cpu_op", "pid": pid, "tid": tid,
                                   "name": "aten::mm", "ts": t + lead,
                                   "dur": 1000.0 - lead - trail})
                    t += 1100.0
        (out / path.name[:-3]).write_text(json.dumps(data))
    return read_torch_trace(out)


def test_the_probe_fixed_part_is_each_range_less_its_operators(tmp_path):
    """``probe_fixed`` is the median over a stage's probe ranges of each kind of the range's
    span less its operators' span (the Python before the first and after the last);
    ``probe`` stays the operators' median; a run without the probe has neither."""
    assert np.isnan(read_torch_trace(DATA / "zbv").probe_fixed).all()
    lead_trail = [(10.0, 30.0), (50.0, 70.0), (20.0, 5.0)]  # 40, 120, 25 us outside
    run = _probed_trace(DATA / "zbv", tmp_path, lead_trail)
    np.testing.assert_allclose(run.probe_fixed, np.full((4, 3), 40e-6), rtol=1e-6)
    np.testing.assert_allclose(run.probe, np.full((4, 3), (1000 - 40) * 1e-6), rtol=1e-6)


def test_a_lacking_kind_takes_the_backwards_runtime_and_its_own_calls_fixed_time():
    """With the probe's fixed parts (``probe_fixed``: each call's own Python outside its
    operators), a kind the run lacks takes the backward's runtime (its fixed time less its
    call's) plus its own call's: from an unsplit run ``I = B - own B + own I`` and
    ``W = own W`` (W posts and receives nothing); from a split run ``B = I - own I + own B``.
    Per device, a device's stages' means. Without ``probe_fixed`` nothing changes: I and W
    take B's fixed time."""
    run = read_torch_trace(DATA / "interleaved-1f1b")  # stages 0, 2 on device 0; 1, 3 on 1
    probe = np.tile([4.0e-3, 2.0e-3, 2.5e-3], (4, 1))
    own = np.array([[0.20, 0.03, 0.15], [0.18, 0.09, 0.10],
                    [0.14, 0.07, 0.07], [0.12, 0.05, 0.06]]) * 1e-3
    plain = _with_probe(run, probe)
    fixed = fastpp.MeasuredRun(**{name: getattr(plain, name) for name in RUN_FIELDS},
                               probe=probe, probe_fixed=own)
    for per, mine in (("device", np.array([(own[0] + own[2]) / 2, (own[1] + own[3]) / 2])),
                      ("stage", own)):
        before, after = plain.costs(per=per), fixed.costs(per=per)
        old, new = before.arrays["overhead"], after.arrays["overhead"]
        np.testing.assert_array_equal(old[1], old[2])  # I and W took B's
        np.testing.assert_array_equal(old[1], old[3])
        np.testing.assert_array_equal(new[:2], old[:2])  # F and B are measured
        # (no negative runtime: stage 0's B took less fixed time than the call given here)
        np.testing.assert_allclose(new[2], np.maximum(old[1] - mine[:, 0], 0) + mine[:, 1],
                                   rtol=1e-12)
        np.testing.assert_allclose(new[3], mine[:, 2], rtol=1e-12)
        for field in ("f", "b", "w", "i", "comm"):
            np.testing.assert_array_equal(after.arrays[field], before.arrays[field])
    # a split run: B from I's runtime and B's own call; I and W are measured
    split = read_torch_trace(DATA / "zbv")
    zbv_own = own[::-1]
    before = _with_probe(split, probe).costs(per="stage")
    after = fastpp.MeasuredRun(**{name: getattr(split, name) for name in RUN_FIELDS},
                               probe=probe, probe_fixed=zbv_own).costs(per="stage")
    old, new = before.arrays["overhead"], after.arrays["overhead"]
    np.testing.assert_array_equal(new[[0, 2, 3]], old[[0, 2, 3]])
    np.testing.assert_allclose(new[1], np.maximum(old[2] - zbv_own[:, 1], 0) + zbv_own[:, 0],
                               rtol=1e-12)
    # a fixed time larger than the kind's measured one leaves no negative runtime
    huge = fastpp.MeasuredRun(**{name: getattr(plain, name) for name in RUN_FIELDS},
                              probe=probe, probe_fixed=own * 1e3).costs(per="stage")
    np.testing.assert_allclose(huge.arrays["overhead"][2], own[:, 1] * 1e3, rtol=1e-12)


def test_probe_fixed_is_checked_and_carried_through_the_steps():
    run = read_torch_trace(DATA / "zbv")
    own = np.tile([0.2e-3, 0.1e-3, 0.05e-3], (4, 1))
    probed = fastpp.MeasuredRun(**{name: getattr(run, name) for name in RUN_FIELDS},
                                probe_fixed=own)
    typical = fastpp.MeasuredSteps([probed, probed, probed]).typical
    np.testing.assert_array_equal(typical.probe_fixed, own)
    assert typical.costs() == probed.costs()
    for wrong, rule in ((own[:2], r"probe_fixed must have shape \(4, 3\)"),
                        (-own, r"probe_fixed must hold finite times >= 0 or NaN"),
                        (own * np.inf, r"probe_fixed must hold finite times >= 0 or NaN")):
        with pytest.raises(ScheduleError, match=rule):
            fastpp.MeasuredRun(**{name: getattr(run, name) for name in RUN_FIELDS},
                               probe_fixed=wrong)


def test_the_ranks_stderr_loses_the_profilers_step_lines_only():
    # the two lines as torch 2.13's libkineto prints them (copied from a run), and lines in
    # the format of its errors and of a traceback, which must pass
    from fastpp.measured.runner import PROFILER_CHATTER

    printed = ("USDT:2026-12-03 04:05:34 15714:15714 SyncActivityProfilerHandler.cpp:52] "
               "profiler_start\n"
               "STAGE:2026-12-03 04:13:03 15990:15990 SyncActivityProfilerHandler.cpp:51] "
               "Completed Stage: Warm Up\n"
               "ERROR:2026-12-03 04:13:03 15990:15990 CuptiActivityProfiler.cpp:10] no CUPTI\n"
               "Traceback (most recent call last):\n"
               "USDT:2026-12-03 04:05:34 15714:15714 SyncActivityProfilerHandler.cpp:59] "
               "profiler_stop")
    assert PROFILER_CHATTER.sub("", printed) == (
        "ERROR:2026-12-03 04:13:03 15990:15990 CuptiActivityProfiler.cpp:10] no CUPTI\n"
        "Traceback (most recent call last):\n")


def test_more_ranks_than_cpus_is_said_to_measure_the_sharing():
    """A CPU run of more ranks than this process may use: the ranks take turns, and its times
    are no pipeline's (``scripts/measure.py -p 4`` on 2 CPUs: 18-45% off). Said before the
    ranks start; nothing on GPUs or within the CPUs."""
    from fastpp.measured.runner import shared_cpus, usable_cpus

    cpus = usable_cpus()
    said = shared_cpus(cpus + 1, "cpu")
    assert said.startswith(f"p={cpus + 1} ranks on {cpus} CPUs: they take turns") and \
        f"use p <= {cpus} here" in said
    assert shared_cpus(cpus, "cpu") == "" and shared_cpus(cpus + 1, "cuda") == ""
    # the suite's own filter (pyproject.toml) lets it pass on a machine of one CPU, where
    # the real-run tests' two ranks take turns: under its "error" this would raise
    import warnings

    warnings.warn(said, RuntimeWarning, stacklevel=1)


def test_a_containers_cpu_quota_lowers_the_usable_cpus(tmp_path):
    """A container given 1.5 CPUs of a larger machine runs two ranks in turns: its quota
    counts (rounded down), as cgroup v2 and v1 write it, and no quota leaves the affinity."""
    import os

    from fastpp.measured.runner import usable_cpus

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count()
    own = tmp_path / "cgroup"
    v2 = tmp_path / "v2" / "job" / "cpu.max"
    v2.parent.mkdir(parents=True)
    own.write_text("0::/job\n")
    for text, cpus in (("150000 100000\n", 1), ("max 100000\n", affinity),
                       ("50000 100000\n", 1), ("100000000 100000\n", affinity)):
        v2.write_text(text)
        assert usable_cpus(str(tmp_path / "v2"), str(own)) == cpus, text
    v1 = tmp_path / "v1" / "cpu" / "job"
    v1.mkdir(parents=True)
    own.write_text("4:memory:/other\n1:cpu,cpuacct:/job\n0::/\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    for text, cpus in (("100000\n", 1), ("-1\n", affinity)):
        (v1 / "cpu.cfs_quota_us").write_text(text)
        assert usable_cpus(str(tmp_path / "v1"), str(own)) == cpus, text
    assert usable_cpus(str(tmp_path), str(tmp_path / "none")) == affinity


def test_injected_delays_fall_on_the_same_microbatches_in_any_order(monkeypatch):
    """``measure``'s ``--delay STAGE:KIND:SECONDS:PROB`` draws each op's delay keyed by the
    op (stage, kind, its index over the run) and the delay: two schedules, whose stages run
    their forwards and backwards in other orders, delay the same microbatches (common random
    numbers, as ``fastpp.Noise`` draws them). One generator drawn in call order had delayed
    other microbatches under GPipe's order than under 1F1B's (the what-if review)."""
    torch = pytest.importorskip("torch")
    from fastpp.measured import rank

    def delayed_ops(order):
        slept = []
        monkeypatch.setattr(rank.time, "sleep", slept.append)
        module = rank._delayed(torch.nn.Linear(2, 2), 1, [(1, "F", 1.0, 0.5),
                                                          (1, "B", 2.0, 0.5), (0, "F", 3.0, 1)])
        outputs = {}
        hit = set()
        for kind, mb in order:
            before = len(slept)
            if kind == "F":
                outputs[mb] = module(torch.ones(1, 2, requires_grad=True))
            else:
                outputs[mb].sum().backward()
            if len(slept) > before:
                hit.add((kind, mb, slept[-1]))
        return hit

    n = 16
    gpipe = [("F", j) for j in range(n)] + [("B", j) for j in range(n)]
    one_f_one_b = [op for j in range(n) for op in (("F", j), ("B", j))]
    hit = delayed_ops(gpipe)
    assert hit == delayed_ops(one_f_one_b)
    # about half of each kind, with its own seconds (stage 0's delay is not this stage's)
    for kind, seconds in (("F", 1.0), ("B", 2.0)):
        mine = {mb for k, mb, s in hit if k == kind}
        assert 0 < len(mine) < n and {s for k, _, s in hit if k == kind} == {seconds}


def test_injected_delays_are_read_into_the_op_they_follow(tmp_path):
    """``DELAY`` ranges (``measure``'s injected sleeps) go to the op whose start is the last
    before theirs: one inside an op's range, one after its range before the next op (where
    the slow link's sleep falls, before the sends), two after one op summed; one before the
    first op goes nowhere. The typical step carries them; a negative one is refused."""
    folder = DATA / "gpipe"
    out = tmp_path / folder.name
    out.mkdir()
    plain = read_torch_trace(folder)
    placed = {}  # rank -> [(position, us)]
    for path in sorted(folder.glob("rank*_trace.json.gz")):
        data = json.loads(gzip.open(path).read())
        events = data["traceEvents"]
        rank = data["distributedInfo"]["rank"]
        ops = sorted((e for e in events if e.get("cat") == "user_annotation"
                      and e["name"].startswith(("Forward ", "Backward "))),
                     key=lambda e: e["ts"])
        pid, tid = ops[0]["pid"], ops[0]["tid"]

        def delay(ts, dur, pid=pid, tid=tid, events=events):
            events.append({"ph": "X", "cat": "user_annotation", "pid": pid, "tid": tid,
                           "name": "DELAY", "ts": ts, "dur": dur})

        delay(ops[0]["ts"] - 50.0, 20.0)  # before the first op: no op's
        delay(ops[0]["ts"] + 1.0, 7.0)  # inside op 0
        first, second = ops[1], ops[2]
        gap = second["ts"] - (first["ts"] + first["dur"])
        assert gap > 0.0
        delay(first["ts"] + first["dur"] + 0.25 * gap, 0.25 * gap)  # between ops 1 and 2
        delay(first["ts"] + first["dur"] + 0.6 * gap, 0.3 * gap)
        placed[rank] = [(0, 7.0), (1, 0.55 * gap)]
        (out / path.name[:-3]).write_text(json.dumps(data))
    run = read_torch_trace(out)
    expected = np.zeros(run.schedule.kind.shape)
    for rank, items in placed.items():
        for position, us in items:
            expected[rank, position] = us * 1e-6
    # (each range's end less its start, at the traces' 1e12-us timestamps: within a ns)
    np.testing.assert_allclose(run.injected, expected, rtol=0, atol=1e-9)
    assert not plain.injected.any()
    np.testing.assert_array_equal(run.durations, plain.durations)  # read as they were
    np.testing.assert_array_equal(fastpp.MeasuredSteps([run, plain, run]).typical.injected,
                                  run.injected)
    assert run.ops["injected"].sum() == pytest.approx(run.injected.sum())
    with pytest.raises(ScheduleError, match=r"injected must be >= 0 at every op"):
        fastpp.MeasuredRun(**{name: getattr(run, name) for name in RUN_FIELDS},
                           injected=-expected - 1e-3)
