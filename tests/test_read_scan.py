"""The trace reader's byte scan (``fastpp.measured.scan``) against orjson's dicts on random
valid traces: keys in any order, any JSON whitespace, escaped and non-ASCII strings, nested
``args``, numbers written in several ways (some beyond the scan's exact fast path), events of
other categories and operators that post sends. Every field of every rank must be equal, or
both ways must fail with the same message; the scan must read the traces meant for it, and
fall back on those it refuses (an escaped key, a surrogate pair, a repeated field...), which
read or fail as before."""

import json
import os

import numpy as np
import pytest
import trace_synth

from fastpp import ScheduleError, build_schedule
from fastpp.measured import read, scan

FIELDS = ("file", "rank", "world_size", "host", "base_ns", "labels", "device_clock")
ARRAYS = ("ops", "chunk", "start", "end", "first_child", "ready", "release", "sent",
          "operators", "weight_operators", "injected")
SPACE = ["", "", "", " ", "\n  ", "\t", "\r\n"]
PLAIN = ("cat", "ph")
SEEDS = 4 if os.environ.get("FASTPP_SMALL") else 16  # (the coverage run scans as Python)
EVALUATE = "autograd::engine::evaluate_function: "  # an autograd node's evaluation
TEXT = ["é", "数据", "a/b", 'say "hi"', "tab\there", "back\\slash", "Ωmega", "plain"]


def dump(value, rng, mangle=False) -> str:
    """``value`` as JSON text, with random whitespace, key order, string escapes and forms of
    numbers (``mangle``: ASCII letters too written as ``\\uXXXX``, as no profiler does)."""
    def ws():
        return SPACE[rng.integers(len(SPACE))]

    if isinstance(value, dict):
        items = list(value.items())
        items = [items[k] for k in rng.permutation(len(items))]
        return "{" + ",".join(
            f"{ws()}{string(k, rng, plain=True)}{ws()}:{ws()}"
            f"{string(v, rng, plain=True) if k in PLAIN else dump(v, rng, mangle or k == 'args')}"
            f"{ws()}" for k, v in items) + ws() + "}"
    if isinstance(value, list):
        return "[" + ws() + ",".join(ws() + dump(v, rng, mangle) + ws() for v in value) + "]"
    if isinstance(value, str):
        return string(value, rng, mangle=mangle)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        form = rng.integers(5)
        if form == 1:
            return f"{value:.17g}"  # 17 digits: beyond 2**53, read by Python's float
        if form == 2:
            return f"{value:.16e}".replace("e+", "E+" if rng.random() < 0.5 else "e")
        if form == 3 and value.is_integer() and abs(value) < 1e15:
            return str(int(value))  # an integer where the profiler writes a float
        return repr(value)
    return str(value)


def string(text: str, rng, plain=False, mangle=False) -> str:
    """``text`` as a JSON string, with JSON's escapes (non-ASCII ones at random, ``\\/``)
    unless ``plain`` (keys, categories and phases written with escapes are left by the scan to
    the parsers, tested apart); ``mangle``: ASCII letters too at random."""
    ascii_only = bool(rng.integers(2))
    if plain or rng.random() < 0.5:
        return json.dumps(text, ensure_ascii=ascii_only)
    return "".join(f"\\u{ord(ch):04x}" if mangle and ch.isalnum() and ch.isascii()
                   and rng.random() < 0.3
                   else "\\/" if ch == "/" else json.dumps(ch, ensure_ascii=ascii_only)[1:-1]
                   for ch in text).join('""')


def args(rng, depth=0):
    """A random nested ``args`` value."""
    kind = rng.integers(7 if depth < 3 else 4)
    if kind == 0:
        return None if rng.random() < 0.5 else bool(rng.integers(2))
    if kind == 1:
        return int(rng.integers(-10**18, 10**18))
    if kind == 2:
        return float(rng.normal() * 10.0 ** rng.integers(-30, 30))
    if kind == 3:
        return TEXT[rng.integers(len(TEXT))]
    if kind == 4:
        return [args(rng, depth + 1) for _ in range(rng.integers(4))]
    return {TEXT[rng.integers(len(TEXT))] + str(k): args(rng, depth + 1)
            for k in range(rng.integers(4))}


def decorate(data: dict, rng) -> None:
    """Add to a trace what real ones hold around the pipeline's ranges."""
    events = data["traceEvents"]
    for e in events:
        if rng.random() < 0.5:
            e["args"] = args(rng)
    ranges = [e for e in events if e["cat"] == "user_annotation"]
    extra = []
    for e in ranges[:: max(1, len(ranges) // 6)]:
        inside = e["ts"] + e["dur"] * rng.random()
        name = ["c10d::send", "c10d::sendrecv", "c10d::send.x", "c10d::recv_", "aten::é",
                "nccl:send", 'aten::mm "x"', "aten::mm", f"{EVALUATE}TBackward0",
                f"{EVALUATE}AddmmBackward0", f"{EVALUATE}é", "autograd"][rng.integers(12)]
        extra.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": e["tid"],
                      "ts": inside, "dur": 0.5})
        extra.append({"ph": "X", "cat": "user_annotation", "tid": e["tid"], "ts": inside,
                      "dur": 0.25, "name": TEXT[rng.integers(len(TEXT))]})
        extra.append({"ph": "i", "cat": "user_annotation", "name": "mark", "ts": inside,
                      "tid": e["tid"], "s": "t"})
        extra.append({"ph": "s", "cat": "fwdbwd", "id": 3, "name": "fwdbwd", "ts": inside,
                      "tid": "stream 7"})
        extra.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 0,
                      "args": {"name": "thread é"}})
    events.extend(extra)
    events.sort(key=lambda ev: ev.get("ts", 0.0))


def traces(tmp_path, seed):
    rng = np.random.default_rng(seed)
    name, p, n, m = [("1f1b", 3, 5, 1), ("interleaved-1f1b", 2, 4, 2), ("zb-h1", 3, 4, 1),
                     ("gpipe", 2, 3, 1)][seed % 4]
    s = build_schedule(name, p, n, m)
    shape = s.kind.shape
    truth = trace_synth.run(s, rng.uniform(5e-4, 2e-3, shape), rng.uniform(1e-4, 6e-4, shape),
                            latency=3e-4, o1=np.full(p, 2e-5))
    for file in trace_synth.write(tmp_path, s, truth, labels="gpipe" if name == "gpipe" else "PP",
                                  delays=True):
        data = json.loads(file.read_text())
        decorate(data, rng)
        yield file, data, rng


# the reader without the scan: msgspec's objects (as before the scan), orjson's dicts
WITHOUT_SCAN = {"msgspec": {"_SCAN": False}, "dict": {"_SCAN": False, "msgspec": None}}


def read_without_scan(file, monkeypatch, way):
    with monkeypatch.context() as m:
        for name, value in WITHOUT_SCAN[way].items():
            m.setattr(read, name, value)
        return read.read_file(file)


def assert_read_alike(file, monkeypatch, way):
    """The reading of ``file`` (by the scan or its fall back) is the one without the scan
    (``way``), or fails alike."""
    try:
        old = read_without_scan(file, monkeypatch, way)
    except ScheduleError as err:
        with pytest.raises(ScheduleError) as new:
            read.read_file(file)
        assert str(new.value) == str(err)
        return
    new = read.read_file(file)
    for name in FIELDS:
        assert getattr(new, name) == getattr(old, name), name
    for name in ARRAYS:
        a, b = getattr(new, name), getattr(old, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)
        assert np.array_equal(np.signbit(a), np.signbit(b)), name  # -0.0 is not 0.0


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_traces_read_as_the_dicts_do(tmp_path, monkeypatch, seed):
    for file, data, rng in traces(tmp_path, seed):
        raw = dump(data, rng).encode()
        assert json.loads(raw) == data  # the text is the trace, written another way
        file.write_bytes(raw)
        assert read._scan(raw) is not None  # read by the scan, not its fall back
        assert_read_alike(file, monkeypatch, "dict")
        try:
            read_back = read.read_file(file)
        except ScheduleError:  # (a trace both ways refuse alike)
            continue
        if "DELAY" in raw.decode():  # (not escaped: its injected sleeps are read)
            assert read_back.injected.any()


def test_numbers_are_pythons_floats():
    """Each ``ts`` and ``dur`` the scan keeps is the float Python reads from its text, bit for
    bit: in the fast path (up to 2**53 and 10**22) and beyond it (17 to 19 digits, exponents,
    ``-0``), on random texts."""
    rng = np.random.default_rng(7)
    texts = ["0", "-0", "-0.0", "0.0", "1e22", "1e23", "9007199254740993", "9007199254740992.5",
             "123456789012345678", "-922337203685477580", "9223372036854775807", "5e-300",
             "1.7976931348623157e300", "0.000000000000000000000000001", "4503599627370497.5"]
    for _ in range(400):
        digits = "".join(map(str, rng.integers(0, 10, rng.integers(1, 20))))
        point = rng.integers(len(digits) + 1)
        text = (digits[:point] or "0") + ("." + digits[point:] if digits[point:] else "")
        text = text.lstrip("0") or "0"
        if text.startswith("."):
            text = "0" + text
        if rng.random() < 0.3:
            text += f"e{int(rng.integers(-30, 30))}"
        texts.append(("-" if rng.random() < 0.3 else "") + text)
    events = ",".join(f'{{"cat": "cpu_op", "name": "aten::mm", "tid": 1, "ts": {t}, '
                      f'"dur": {t}}}' for t in texts)
    raw = f'{{"traceEvents": [{events}]}}'.encode()
    assert json.loads(raw)  # valid JSON
    scanned = read._scan(raw)
    assert scanned is not None
    tid, ts, dur, role = scanned[2][0]
    assert (role == read._PRODUCT).all()  # each one a matrix product
    want = np.array([float(json.loads(t)) for t in texts])
    for got in (ts, dur):
        assert np.array_equal(got.view(np.int64), want.view(np.int64))


def edit(data: dict, how: str) -> str:
    """A trace's text, changed in one place: a rare but valid form, one the scan leaves to the
    JSON parsers, or invalid JSON."""
    text = json.dumps(data)
    first_range = '"ph": "X", "cat": "user_annotation"'
    edits = {
        # valid: the scan reads them
        "null category": ('"cat": "Trace"', '"cat": null'),
        "null phase": (first_range, '"ph": null, "cat": "user_annotation"'),
        "true phase elsewhere": ('"ph": "X", "cat": "Trace"', '"ph": true, "cat": "Trace"'),
        "literals as fields": ('"args": {}', '"flag": true, "off": false, "none": null'),
        "odd fields elsewhere": ('"cat": "Trace", "name": "PyTorch Profiler (0)", "pid": 0, '
                                 '"tid": 0, "ts": 5255937000000.0, "dur": 1.0',
                                 '"cat": "Trace", "name": 7, "pid": 0, "tid": "main", '
                                 '"ts": null, "dur": [1]'),
        "an empty event": ('"traceEvents": [', '"traceEvents": [{}, '),
        # forms the scan leaves to the parsers, and invalid JSON
        "escaped key": ('"ts"', '"t\\u0073"'),
        "surrogate pair": ('"PP:0F1"', json.dumps("PP:0F1 \U0001F600")),
        "repeated field": ('"dur": ', '"dur": "x", "dur": '),
        "escaped category": ('"cpu_op"', '"cpu\\u005fop"'),
        "escaped operator name": ('"aten::linear"', '"\\u0061ten::linear"'),
        "escaped phase": (first_range, first_range.replace('"X"', '"\\u0058"')),
        "huge number": ('"args": {}', '"args": {"big": 1e400}'),
        "integer beyond 64 bits": ('"args": {}', '"args": {"big": 123456789012345678901}'),
        "trailing comma": ('"args": {}', '"args": {"a": 1,}'),
        "control character": ('"gloo:recv"', '"gloo:\trecv"'),
        "leading zero": ('"pid": 100', '"pid": 0100'),
        "bare minus": ('"pid": 100', '"pid": -'),
        "bare point": ('"pid": 100', '"pid": 1.'),
        "bare exponent": ('"pid": 100', '"pid": 1e'),
        "bad literal": ('"args": {}', '"args": {"a": tru}'),
        "bad false": ('"args": {}', '"args": {"a": fals}'),
        "bad escape": ('"args": {}', '"args": {"a": "\\x"}'),
        "bad unicode escape": ('"args": {}', '"args": {"a": "\\u12g4"}'),
        "deep nesting": ('"args": {}', '"args": ' + "[" * 600 + "]" * 600),
        "no colon": ('"pid": 100', '"pid" 100'),
        "no comma": ('"pid": 100,', '"pid": 100'),
        "an event a number": ('"traceEvents": [', '"traceEvents": [1, '),
        "a category a number": ('"cat": "Trace"', '"cat": 5'),
        "a name a number": ('"name": "aten::linear"', '"name": 5'),
        "a range's name null": (first_range, first_range.replace('"ph"', '"name": null, "p"')),
    }
    if how == "truncated":
        return text[:-40]
    if how == "a top-level list":
        return f"[{text}]"
    if how == "text after the trace":
        return text + " x"
    if how == "events not a list":
        return json.dumps({**data, "traceEvents": {"0": data["traceEvents"][0]}})
    old, new = edits[how]
    assert old in text, how
    return text.replace(old, new, 1)


@pytest.mark.parametrize("how, read_by_scan", [
    ("null category", True), ("null phase", True), ("true phase elsewhere", True),
    ("literals as fields", True), ("odd fields elsewhere", True), ("an empty event", True),
    ("leading zero", False), ("bare minus", False), ("bare point", False),
    ("bare exponent", False), ("bad literal", False), ("bad false", False),
    ("bad escape", False), ("bad unicode escape", False), ("deep nesting", False),
    ("no colon", False), ("no comma", False), ("an event a number", False),
    ("a category a number", False), ("a name a number", False),
    ("a range's name null", False), ("truncated", False), ("a top-level list", False),
    ("escaped key", False), ("surrogate pair", False), ("repeated field", False),
    ("escaped category", False), ("escaped phase", False), ("escaped operator name", False),
    ("huge number", False), ("integer beyond 64 bits", False), ("trailing comma", False),
    ("control character", False), ("text after the trace", False),
    ("events not a list", False)])
def test_refused_and_rare_forms_read_as_before(tmp_path, monkeypatch, how, read_by_scan):
    file, data, _ = next(traces(tmp_path, 0))
    raw = edit(data, how).encode()
    file.write_bytes(raw)
    assert (read._scan(raw) is not None) == read_by_scan
    assert_read_alike(file, monkeypatch, "msgspec")  # (1e400 in args: only msgspec reads it)
    if read_by_scan:
        assert_read_alike(file, monkeypatch, "dict")


def test_the_densest_trace_fits_the_columns():
    """The columns hold as many events as the shortest event kept fits in the file."""
    event = b'{"cat":"cpu_op","name":"","ts":0,"tid":0}'
    for k in (1, 2, 1000):
        raw = b'{"traceEvents":[' + b",".join([event] * k) + b"]}"
        ok, count, *_ = scan.scan_trace(np.frombuffer(raw, np.uint8))
        assert ok and count == k
