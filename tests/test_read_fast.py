"""The trace reader's array work (issue 27, part 5) against the per-event loop it replaced
(``tests/read_reference.py``): every field of every rank equal, on the real runs of
tests/data, on synthetic runs of several schedules and label styles, and the same message on
damaged traces, each read by the byte scan, by msgspec's objects and by orjson's dicts."""

import copy
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import read_reference
import trace_synth

from fastpp import ScheduleError, build_schedule
from fastpp.measured import read

DATA = Path(__file__).parent / "data"
REAL = sorted(f for f in DATA.glob("*/rank*_trace.json.gz"))
FIELDS = ("file", "rank", "world_size", "host", "base_ns", "labels", "device_clock")
ARRAYS = ("ops", "chunk", "start", "end", "first_child", "ready", "release", "sent",
          "operators")


# the ways a Chrome trace is read: the byte scan (falling back to the others on anything it
# does not read), msgspec's objects, orjson's dicts
WAYS = {"scan": {}, "msgspec": {"_SCAN": False}, "dict": {"_SCAN": False, "msgspec": None}}


@pytest.fixture(params=list(WAYS))
def way(request, monkeypatch):
    for name, value in WAYS[request.param].items():
        monkeypatch.setattr(read, name, value)
    return request.param


def assert_same(file):
    new, old = read.read_file(file), read_reference.read_file(file)
    for name in FIELDS:
        assert getattr(new, name) == getattr(old, name), name
    for name in ARRAYS:
        a, b = getattr(new, name), getattr(old, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)  # bit for bit, NaN where NaN


@pytest.mark.parametrize("file", REAL, ids=lambda f: f"{f.parent.name}-{f.name[:5]}")
def test_real_runs_read_as_before(file, way):
    assert_same(file)


@pytest.mark.parametrize("name, p, n, m, labels", [
    ("1f1b", 4, 8, 1, "PP"), ("gpipe", 3, 5, 1, "gpipe"), ("interleaved-1f1b", 4, 8, 2, "PP"),
    ("zb-h1", 4, 6, 1, "PP"), ("1f1b", 2, 3, 1, "PP")])
def test_synthetic_runs_read_as_before(tmp_path, name, p, n, m, labels, way):
    rng = np.random.default_rng(p * n + m)
    s = build_schedule(name, p, n, m)
    shape = s.kind.shape
    truth = trace_synth.run(s, rng.uniform(5e-4, 2e-3, shape), rng.uniform(1e-4, 6e-4, shape),
                            latency=3e-4, o1=np.full(p, 2e-5))
    for file in trace_synth.write(tmp_path, s, truth, labels=labels):
        assert_same(file)


def damaged(data):
    """Ways to damage a real trace, each a function of its events."""
    def op(events, name="PP:0F1"):
        return next(e for e in events if e.get("name") == name)

    def nested(events, name):
        outer = op(events, "PP:0F0")
        events.append({**op(events, name), "ts": outer["ts"] + 1, "dur": 1})

    return {
        "not a dict": lambda ev: ev.insert(5, [1, 2]),
        "no ts": lambda ev: op(ev).pop("ts"),
        "no dur": lambda ev: op(ev).pop("dur"),
        "operator without ts": lambda ev: next(e for e in ev if e.get("cat") == "cpu_op")
        .pop("ts"),
        "operator ts text": lambda ev: next(e for e in ev if e.get("cat") == "cpu_op")
        .update(ts="soon"),
        "negative dur": lambda ev: op(ev).update(dur=-1.0),
        "dur text": lambda ev: op(ev).update(dur="long"),
        "unknown action": lambda ev: ev.append({**op(ev), "name": "PP:0X0"}),
        "name a number": lambda ev: op(ev).update(name=7),
        "name a list": lambda ev: op(ev).update(name=["PP:0F1"]),
        "unlabelled range without dur": lambda ev: ev.append({**op(ev), "name": None,
                                                             "dur": "x"}),
        "a stray range inside": lambda ev: nested(ev, "PP:0B0"),
        "an instant mark without dur": lambda ev: ev.append(
            {**{k: v for k, v in op(ev).items() if k != "dur"}, "ph": "i", "ts": 1.0}),
        "no labels": lambda ev: ev.__setitem__(slice(None), [e for e in ev if not str(
            e.get("name")).startswith("PP:")]),
    }


@pytest.mark.parametrize("damage", list(damaged(None)))
def test_damaged_traces_read_or_fail_as_before(tmp_path, damage, way):
    with gzip.open(DATA / "interleaved-1f1b" / "rank0_trace.json.gz") as fh:
        data = json.load(fh)
    data = copy.deepcopy(data)
    damaged(data)[damage](data["traceEvents"])
    file = tmp_path / "rank0_trace.json"
    file.write_text(json.dumps(data))
    try:
        old = read_reference.read_file(file)
    except ScheduleError as err:
        with pytest.raises(ScheduleError) as new:
            read.read_file(file)
        assert str(new.value) == str(err)
    else:
        assert old is not None
        assert_same(file)


def test_the_scan_reads_the_events(monkeypatch):
    """The scan is the path taken on plain traces (not a silent fall back to msgspec)."""
    def refuse(raw):
        raise AssertionError("read by msgspec")

    monkeypatch.setattr(read, "_decode_trace", refuse)
    for file in REAL:
        assert read._scan(gzip.decompress(file.read_bytes())) is not None, file
        assert_same(file)


def test_msgspec_reads_the_events():
    """The msgspec path reads a plain trace's events (not a silent fall back to dicts)."""
    raw = gzip.decompress(REAL[0].read_bytes())
    trace = read._decode_trace(raw)
    assert trace is not None and len(trace["traceEvents"]) == len(json.loads(raw)["traceEvents"])
