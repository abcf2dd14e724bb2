"""Reading per-rank traces of a pipeline run into plain arrays, one ``RankTrace`` per rank.

Two formats, told apart by their content:

- Chrome / Kineto JSON from ``torch.profiler`` (``export_chrome_trace``; torchtitan's
  ``rank{r}_trace.json``), optionally gzipped. The pipeline's ops are the ``user_annotation``
  ranges that ``torch.distributed.pipelining`` opens around each action (``PP:0F0``,
  ``PP:(0F7;7B3)OVERLAP_F_B``; ``ScheduleGPipe``: ``Forward {i}`` / ``Backward {i}``), or the
  ``gpu_user_annotation`` ranges over their kernels when the trace has them.
- The per-rank JSON of per-microbatch CUDA-event times (milliseconds after a barrier) that the
  Megatron-LM patch of PP-Schedule-Visualization writes: ``forward-{mb}-start`` / ``-end``, or
  ``forward-{chunk}-{mb}-start`` / ``-end`` with virtual stages.

Times stay in each rank's own clock here (microseconds); ``fastpp.measured.run`` aligns them.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import attrgetter, eq
from pathlib import Path
from typing import Any

import numpy as np

try:  # three times faster on big traces; the standard library's json otherwise
    from orjson import JSONDecodeError as _OrjsonError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover (the measured extra installs it)
    _loads, _OrjsonError = json.loads, json.JSONDecodeError
try:  # decodes a trace's events into slotted objects of the fields read, skipping the rest
    import msgspec
except ImportError:  # pragma: no cover (the measured extra installs it)
    msgspec = None

from ..checks import ScheduleError, show
from ..ops import FB, B, F, I, W, parse_op
from . import scan
from .align import TOLERANCE_US

# every \d ASCII (re.ASCII): it matches other scripts' digits too, which the labels' byte
# reader refused with a UnicodeEncodeError
# the actions PyTorch labels that are not compute (they post messages or manage weights)
_OTHER_ACTIONS = re.compile(r"^\d+(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)\d*$",
                            re.ASCII)
_PLAIN_PP = re.compile(r"^PP:(\d+)([FBIW])(\d+)$", re.ASCII)
_GPIPE = re.compile(r"^(Forward|Backward) (\d+)$", re.ASCII)
# the probe's ranges (fastpp.measured.rank._probe): a stage's full backward, or its split's I or W
_PROBE = re.compile(r"^PROBE:(\d+)([BIW])$", re.ASCII)
_RECV = re.compile(r"^\w+:recv\b")  # gloo:recv, nccl:recv ...: the work object of an irecv
_SEND = re.compile(r"^(\w+:send|c10d::send)\b")  # the send op (it may block), its work object
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.ASCII)
_MEGATRON_KEY = re.compile(r"^(forward|backward)-(\d+)(?:-(\d+))?-(start|end)$", re.ASCII)
_MEGATRON_FILE = re.compile(r"_pp_rank_(\d+)_rank_(\d+)\.json$", re.ASCII)
_MEGATRON_TP_RANK = re.compile(r"_TPxCPxDP_rank_(\d+)_", re.ASCII)


@dataclass
class RankTrace:
    """One rank's compute ops in its own clock, in the order it ran them.

    Attributes
    ----------
    file : str
        Where they came from (for messages).
    rank, world_size : int
        The rank and the run's world size (``None`` when the file does not say).
    host : str
        Host name: ranks on one host share a clock.
    base_ns : int
        The clock's origin: an event at ``ts`` microseconds happened at
        ``base_ns / 1000 + ts`` on this host's clock.
    labels : list of str
        Each op's label as written (``PP:0F0``).
    ops : ndarray of int64, shape (k, 5)
        ``kind, stage, mb, stage2, mb2`` of each op. ``stage`` is ``-1`` when the label does not
        name it (GPipe's ``Forward {i}``, Megatron's timers): ``run`` makes it
        ``chunk * p + rank`` once ``p`` is known (Megatron's interleaving).
    chunk : ndarray of int64, shape (k,)
        The rank's model chunk of such ops (0 otherwise).
    start, end : ndarray, shape (k,)
        The op's range (microseconds).
    first_child : ndarray, shape (k,)
        Start of the first profiled operator inside the range (``end`` when none).
    release : ndarray, shape (k,)
        When the op's outputs left: the end of the sends posted right after it.
    sent : ndarray, shape (k,)
        The earliest its outputs can have left: the first send posted inside its range
        (``ScheduleGPipe`` posts its sends inside ``Forward {i}``), else its range's end.
    operators : ndarray, shape (k,)
        The span of the profiled operators that start inside the range, from the first one's
        start to the last one's end: the ``aten::`` work and the Python between the layers,
        both of which shrink with a smaller chunk; a forward's less its warm-up
        (``_warm_up``), which does not; with device clocks the whole range.
    weight_operators : ndarray, shape (k,)
        Of an unsplit backward's (``B``'s) ``operators``, the part that computes or
        accumulates the parameters' gradients (``_weight_span`` says which); 0 for other ops,
        with device clocks and in a trace without the autograd engine's node events.
    ready : ndarray, shape (k,)
        When the op's wait for its inputs returned: the end of the last receive finishing in
        the range (a receive's range ends when its ``wait()`` returns, and only the op that
        needs it waits for it); NaN when none finished there.
    device_clock : bool
        Times are the device's (GPU ranges, CUDA events): a wait shows as a gap between ops,
        not inside one.
    probe : ndarray, shape (k, 4)
        The probe's ranges (``PROBE:<stage><B|I|W>``, written by ``fastpp.measured.measure``
        after each step, outside the ops): ``stage, kind`` (op code ``B``, ``I`` or ``W``),
        the span of its operators and the range's own span (microseconds; with device clocks
        both the range's); no rows in a trace without them.
    injected : ndarray, shape (k,)
        The ``DELAY`` ranges starting from each op's start to the next op's (microseconds):
        the sleeps ``fastpp.measured.measure`` injected in it or before its sends (``delay``,
        ``link_delay``), as long as they took; 0 elsewhere and with device clocks.
    """

    file: str
    rank: int
    world_size: int | None
    host: str
    base_ns: int
    labels: list[str]
    ops: np.ndarray
    chunk: np.ndarray
    start: np.ndarray
    end: np.ndarray
    first_child: np.ndarray
    ready: np.ndarray
    release: np.ndarray
    sent: np.ndarray
    operators: np.ndarray
    weight_operators: np.ndarray
    device_clock: bool
    probe: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    injected: np.ndarray | None = None  # (None: zeros)


def trace_files(path) -> list[Path]:
    """The files of a run: a folder's ``*.json`` / ``*.json.gz``, a list of files, or one file."""
    if isinstance(path, str | os.PathLike):
        if not os.fspath(path):  # (Path("") is the current folder)
            raise ScheduleError("path must be a trace file, a folder of them or a list of "
                                "files (got '')")
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file()
                           and (f.name.endswith(".json") or f.name.endswith(".json.gz"))
                           and not _replica(f))
            if not files:
                raise ScheduleError(f"path {str(p)!r} holds no .json or .json.gz trace files")
            return files
        if not p.is_file():
            why = "which is no regular file" if p.exists() else "which does not exist"
            raise ScheduleError(f"path must be a trace file, a folder of them or a list of files "
                                f"(got {str(p)!r}, {why})")
        return [p]
    try:
        files = [Path(f) for f in path]
    except TypeError:
        raise ScheduleError(f"path must be a trace file, a folder of them or a list of files "
                            f"(got {type(path).__name__})") from None
    if not files:
        raise ScheduleError("path must list at least one trace file (got an empty list)")
    for f in files:
        if f.is_dir():
            raise ScheduleError(f"trace file {str(f)!r} is a directory, not a trace file (pass "
                                f"a folder alone, not in a list)")
        if not f.is_file():
            raise ScheduleError(f"trace file {str(f)!r} does not exist")
    return files


@contextmanager
def collector_paused():
    """Python's cycle collector off while a run is read: a trace parses into hundreds of
    thousands of small dicts, none in a cycle, and the collector's passes over them took as
    long as the parse itself (measured on the 64-rank, 100,000-op trace of
    bench/bench_measured.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _replica(file: Path) -> bool:
    """A Megatron timer file of a tensor/context/data-parallel replica (its TPxCPxDP rank is not
    0): the same pipeline rank again, left out of a folder as PP-Schedule-Visualization does."""
    tp = _MEGATRON_TP_RANK.search(file.name)
    return bool(tp) and int(tp.group(1)) != 0


def read_file(file: Path) -> RankTrace:
    """Parse one rank's file (either format)."""
    raw = _read_bytes(file)
    scanned = _scan(raw)
    if scanned is not None:
        try:
            return _read_chrome(file, *scanned)
        except ScheduleError:
            pass  # read again below, which words the message as it always has
    trace = _decode_trace(raw)
    if trace is not None:
        try:
            return _read_chrome(file, trace, _struct_field)
        except _NotAnEvent:
            pass  # read again as dicts, which name the event
    data = _parse_json(file, raw)
    if isinstance(data, dict) and "traceEvents" in data:
        return _read_chrome(file, data, _dict_field)
    if isinstance(data, dict) and any(_MEGATRON_KEY.match(str(k)) for k in data):
        return _read_megatron(file, data)
    raise ScheduleError(f"{file}: not a profiler trace (no 'traceEvents') nor a Megatron PP-timer "
                        f"file (no 'forward-...-start' keys); pass the trace files as a list if "
                        f"their folder holds other JSON files")


def _read_bytes(file: Path) -> bytes:
    try:
        if file.name.endswith(".gz"):
            with gzip.open(file, "rb") as fh:
                return fh.read()
        return file.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise ScheduleError(f"{file}: cannot be read (a truncated .gz?): {err}") from None


def _parse_json(file: Path, raw: bytes):
    try:
        return _loads(raw)
    except (json.JSONDecodeError, _OrjsonError, UnicodeDecodeError) as err:
        raise ScheduleError(f"{file}: not valid JSON (truncated or not a trace?): {err}") from None


_SCAN = True  # read Chrome traces with scan.scan_trace first (tests turn it off)
_MISSING = object()  # a key an event lacks
# an event's fields this reader uses, and what stands for one it lacks
_ABSENT = {"cat": None, "name": None, "ph": None, "tid": None, "ts": _MISSING, "dur": _MISSING}

if msgspec is not None:
    class _Event(msgspec.Struct, gc=False):  # JSON values hold no cycles: no collector
        """A profiler event's fields that this reader uses (``_ABSENT`` where it lacks one)."""

        cat: Any = None
        name: Any = None
        ph: Any = None
        tid: Any = None
        ts: Any = _MISSING
        dur: Any = _MISSING

    class _Trace(msgspec.Struct, gc=False):
        """A Chrome trace's events and the header fields this reader uses."""

        traceEvents: list[_Event]  # noqa: N815 (the format's own names)
        distributedInfo: Any = None  # noqa: N815
        baseTimeNanoseconds: Any = 0  # noqa: N815
        host_name: Any = ""

    _TRACE = msgspec.json.Decoder(_Trace)


def _decode_trace(raw: bytes) -> dict | None:
    """A Chrome trace's header and events (``_Event``s), decoded without a dict per event
    (twice as fast as orjson's dicts, and a third of the memory to free); ``None`` for
    anything else (a Megatron file, invalid JSON, an event that is not an object), which
    the general JSON parser then reads or names."""
    if msgspec is None:
        return None
    try:
        trace = _TRACE.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return {"traceEvents": trace.traceEvents, "distributedInfo": trace.distributedInfo,
            "baseTimeNanoseconds": trace.baseTimeNanoseconds, "host_name": trace.host_name}


def _scan(raw: bytes) -> tuple | None:
    """A Chrome trace's header and ``_event_tables`` from ``scan_trace``'s columns, without an
    object per event (the whole read takes 0.5-0.75x the time it took with ``msgspec``'s);
    ``None`` when the scan does not read the file (see ``fastpp.measured.scan``)."""
    if not _SCAN:
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None  # the JSON parsers name it
    buf = np.frombuffer(raw, np.uint8)
    ok, count, header, code, name, escaped, ts, dur, tid, slow, text = scan.scan_trace(buf)
    if not ok:
        return None
    code, name, escaped, ts, dur, tid = (a[:count] for a in (code, name, escaped, ts, dur, tid))
    for flag, column, at in ((scan.SLOW_TS, ts, 0), (scan.SLOW_DUR, dur, 2)):
        slow_ones = np.flatnonzero(slow[:count] & flag)
        if slow_ones.size:  # Python's correctly rounded conversion of their text
            column[slow_ones] = _text(buf, text[slow_ones, at:at + 2]).astype(np.float64)
    keys = ("distributedInfo", "baseTimeNanoseconds", "host_name")
    data = {key: _loads(raw[a:b]) for key, (a, b) in zip(keys, header.reshape(3, 2), strict=True)
            if a >= 0}
    child = np.flatnonzero(code == scan.CHILD)
    children = tid[child], ts[child], dur[child], _roles_in(buf, raw, name[child],
                                                             escaped[child])
    tables = []
    for kept in ((code == scan.USER) | (code == scan.POST), code == scan.GPU):
        # the CPU's ranges, then the sends posted, each in the file's order
        at = np.flatnonzero(kept)
        at = at[np.argsort(code[at] == scan.POST, kind="stable")]
        names = _text(buf, name[at], "\n").decode("utf-8").split("\n")[:-1] if at.size else []
        for k in np.flatnonzero(escaped[at]).tolist():
            a, b = name[at[k]]
            names[k] = _loads(raw[a - 1:b + 1])
        tables.append({"name": names, "ts": ts[at], "dur": dur[at], "tid": tid[at].tolist()})
    return data, None, (children, *tables)


def _text(buf: np.ndarray, spans: np.ndarray, end: str | None = None):
    """The bytes of ``buf`` in each ``[a, b)`` of ``spans``: as fixed-width strings (``S``),
    or joined, each followed by ``end``."""
    a, b = spans[:, 0], spans[:, 1]
    if end is None:
        width = int((b - a).max())
        at = np.minimum(a[:, None] + np.arange(width), b[:, None])  # b: a quote or a delimiter
        chars = buf[at]
        chars[at == b[:, None]] = 0  # S strings end at the first NUL
        return chars.view(f"S{width}").ravel()
    length = b - a + 1
    starts = np.cumsum(length) - length
    chars = buf[np.arange(int(length.sum())) + np.repeat(a - starts, length)]
    chars[starts + length - 1] = ord(end)
    return chars.tobytes()


def _dict_field(events: list, key: str) -> list:
    """``key`` of every event (dicts), ``_ABSENT[key]`` where it has none."""
    return list(map(dict.get, events, repeat(key), repeat(_ABSENT[key])))


def _struct_field(events: list, key: str) -> list:
    """``key`` of every event (``_Event``s)."""
    return list(map(attrgetter(key), events))


class _NotAnEvent(Exception):
    """An event this reader cannot use, met in ``_Event``s: the dicts' reading names it."""


def _rank_from_name(file: Path) -> int | None:
    found = _RANK_IN_NAME.findall(file.name)
    return int(found[-1]) if found else None


def _read_chrome(file: Path, data: dict, field, tables=None) -> RankTrace:
    """A Chrome trace's ``RankTrace`` from its header (``data``) and its events, read by
    ``field`` from ``data["traceEvents"]`` or given as ``_event_tables``'s ``tables``."""
    info = data.get("distributedInfo") or {}
    if not isinstance(info, dict):
        raise ScheduleError(f"{file}: distributedInfo must be a dict (got {info!r:.100})")
    if "rank" in info:
        rank = info["rank"]
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ScheduleError(f"{file}: distributedInfo.rank must be an integer >= 0 (got "
                                f"{rank!r:.100})")
    else:
        rank = _rank_from_name(file)
        if rank is None:
            raise ScheduleError(f"{file}: no rank: the trace has no distributedInfo.rank and "
                                f"the file name no 'rank<r>'")
    base_ns = data.get("baseTimeNanoseconds", 0)
    if isinstance(base_ns, bool) or not isinstance(base_ns, int):
        raise ScheduleError(f"{file}: rank {rank}: baseTimeNanoseconds must be an integer (got "
                            f"{base_ns!r:.100})")
    world = info.get("world_size")
    if tables is None:
        events = data["traceEvents"]
        if not isinstance(events, list):
            raise ScheduleError(f"{file}: rank {rank}: traceEvents must be a list of events")
        tables = _event_tables(file, rank, events, field)
    children, marks, gpu_marks = tables
    cpu, recvs, sends, posts, other_labels, cpu_probes, held = _annotations(file, rank, marks)
    gpu, *_, gpu_probes, _ = _annotations(file, rank, gpu_marks)
    device_clock = bool(gpu["start"].size)
    chosen = gpu if device_clock else cpu
    probes = gpu_probes if device_clock else cpu_probes
    probe_span = probe_range = probes["end"] - probes["start"]  # (device clocks: both)
    if not chosen["start"].size:
        hint = (" (it labels only sends and receives)" if other_labels else "")
        raise ScheduleError(
            f"{file}: rank {rank}: no pipeline labels{hint}: expected user_annotation events "
            f"named 'PP:<action>' (torch >= 2.10 multi-stage schedules, _PipelineScheduleRuntime) "
            f"or 'Forward <i>'/'Backward <i>' (ScheduleGPipe). torch's Schedule1F1B labels "
            f"nothing: measure 1F1B by writing its order with fastpp.io.write_torch_csv and "
            f"running it through _PipelineScheduleRuntime (_load_csv(path, "
            f"format='compute_only')).")
    start, end, tid, labels, ops = _outermost(file, rank, chosen, not device_clock)
    first_child = end.copy()
    ready = np.full(len(start), np.nan)
    release = end.copy()
    sent = end.copy()
    operators = end - start
    weight_operators = np.zeros(len(start))
    injected = np.zeros(len(start))
    if not device_clock:
        try:
            threads = list(set(tid))
        except TypeError:  # a list or a dict for a thread id
            bad = next(x for x in tid if not isinstance(x, int | str))
            raise ScheduleError(f"{file}: rank {rank}: an annotation's tid must be a number or "
                                f"a name (got {bad!r})") from None
        release = _release(start, end, sends)
        injected = _injected(start, held)
        posted = np.sort(_on(threads, *posts))
        at = np.searchsorted(posted, start, side="left")
        inside = at < len(posted)
        inside[inside] = posted[at[inside]] < end[inside]
        sent[inside] = posted[at[inside]]
        child_tid, child_ts, child_dur, child_role = children
        try:
            tids = (child_tid if isinstance(child_tid, np.ndarray)
                    else np.array(child_tid, object))
            ts, dur = np.array(child_ts, float), np.array(child_dur, float)
            if not tids.ndim == ts.ndim == dur.ndim == 1:  # lists alone make a 2-D array
                raise ValueError
            mine = np.isin(tids, threads)
        except (TypeError, ValueError):
            bad = next((x for x in child_ts + child_dur if not _num(x)), None)
            if bad is not None:
                raise ScheduleError(f"{file}: rank {rank}: a cpu_op event has ts or dur "
                                    f"{bad!r}, not a number") from None
            bad = next((x for x in child_tid if not isinstance(x, int | str | np.integer)),
                       child_tid)
            raise ScheduleError(f"{file}: rank {rank}: a cpu_op event's tid must be a number "
                                f"or a name (got {show(bad)})") from None
        ts, dur, role = ts[mine], dur[mine], child_role[mine]
        if not np.all(dur >= 0):  # (as the annotations': a negative one shrank the compute)
            raise ScheduleError(f"{file}: rank {rank}: a cpu_op event has a negative or NaN "
                                f"duration (dur={dur[~(dur >= 0)][0]})")
        order = np.lexsort((-dur, ts))
        ts, dur, role = ts[order], dur[order], role[order]
        at = np.searchsorted(ts, start, side="left")
        has = at < len(ts)
        first_child[has] = np.minimum(end[has], ts[np.minimum(at, len(ts) - 1)[has]])
        operators = _operator_span(ts, dur, start, end)
        operators -= np.where(ops[:, 0] == F, _warm_up(ts, dur, start, end, operators), 0.0)
        weight_operators = _weight_span(ts, dur, role, start, end, ops[:, 0] == B)
        # one thread ran them all: a probe's operators are those starting in its range
        probe_span = _operator_span(ts, dur, probes["start"], probes["end"])
        ends = np.sort(_on(threads, *recvs))
        last = np.searchsorted(ends, end, side="right") - 1
        found = last >= 0
        found[found] = ends[last[found]] >= start[found]
        ready[found] = ends[last[found]]
    return RankTrace(str(file), rank, world if isinstance(world, int) else None,
                     str(data.get("host_name", "")), base_ns, labels, ops,
                     np.zeros(len(start), np.int64), start, end, first_child, ready, release,
                     sent, operators, weight_operators, device_clock,
                     np.column_stack([probes["op"], probe_span, probe_range]), injected)


def _event_tables(file: Path, rank: int, events: list, field):
    """The events this reader uses, as columns: the profiled operators ``(tid, ts, dur)`` and
    the CPU and GPU annotation ranges ``(name, ts, dur, tid)`` (the CPU's with the sends the
    operators post, as ranges of no duration). A trace holds hundreds of thousands of events:
    each ``field`` (``_dict_field``, ``_struct_field``) is taken from every event of a
    category at once by ``map``, a loop in C (a comprehension building a tuple per event took
    most of the read), and only the events of a category are visited for its fields."""
    try:
        category = np.fromiter(map(_CATEGORY.get, field(events, "cat"), repeat(0)), np.int8,
                               len(events))
        cpu, user, gpu = _split(events, category)
        names, ts, tids, durs = (field(cpu, key) for key in ("name", "ts", "tid", "dur"))
        if _MISSING in durs:
            durs = [0.0 if d is _MISSING else d for d in durs]
        try:
            distinct = set(names)
        except TypeError:  # a name that is not hashable: the operator's compute
            names = [n if isinstance(n, str) else None for n in names]
            distinct = set(names)
        # posting a message is not the op's compute: ScheduleGPipe posts its receives and
        # sends inside its ranges (c10d::recv_, c10d::send), the others outside; one look per
        # distinct name
        kinds = {name: _cpu_kind(name) if isinstance(name, str) else 0 for name in distinct}
        kind = np.fromiter(map(kinds.__getitem__, names), np.int8, len(names))
        if _MISSING in ts and any(t is _MISSING for t, k in zip(ts, kind, strict=True) if k != 2):
            raise KeyError("ts")
        child = (kind == 0).tolist()
        children = (*(list(compress(values, child)) for values in (tids, ts, durs)),
                    _autograd_roles(list(compress(names, child))))
        tables = [_ranges(group, field) for group in (user, gpu)]
        posted = (kind == 1).tolist()
        for column, values in (("name", names), ("ts", ts), ("tid", tids)):
            tables[0][column] += compress(values, posted)
        tables[0]["dur"] += [0.0] * int(np.count_nonzero(kind == 1))
    except (AttributeError, KeyError, TypeError):
        if field is _struct_field:
            raise _NotAnEvent from None
        bad = _bad_event(events)
        raise ScheduleError(f"{file}: rank {rank}: event {bad!r:.200} is not a profiler event "
                            f"(a dict with a numeric ts and dur)") from None
    return children, *tables


def _split(events: list, category: np.ndarray) -> list[list]:
    """The events of categories 1, 2 and 3, each in the order of ``events``."""
    used = np.flatnonzero(category)
    order = used[np.argsort(category[used], kind="stable")]
    ordered = _take(events, order)
    bounds = np.cumsum(np.bincount(category[used], minlength=4)).tolist()
    return [ordered[bounds[c - 1]:bounds[c]] for c in (1, 2, 3)]


def _ranges(group: list, field) -> dict[str, list]:
    """The complete ranges (``ph`` ``X``) of annotation events, as the columns ``name, ts, dur,
    tid``; a range without ``ts`` or ``dur`` raises ``KeyError``."""
    phase = field(group, "ph")
    columns = {key: field(group, key) for key in ("name", "ts", "dur", "tid")}
    if phase.count("X") < len(phase):  # instants, counters...: dropped
        complete = list(map(eq, phase, repeat("X")))
        columns = {key: list(compress(values, complete)) for key, values in columns.items()}
    if _MISSING in columns["ts"] or _MISSING in columns["dur"]:
        raise KeyError("ts or dur")
    return columns


_CATEGORY = {"cpu_op": 1, "user_annotation": 2, "gpu_user_annotation": 3}


def _cpu_kind(name: str) -> int:
    """A profiled operator's role: 0 the op's compute, 1 a send posted, 2 another message."""
    if not name.startswith("c10d::"):
        return 0
    return 1 if _SEND.match(name) else 2


def _bad_event(events: list):
    """The first event the reader cannot use (for the message)."""
    for e in events:
        try:
            cat = e.get("cat")
            if cat == "cpu_op":
                name = e.get("name")
                if isinstance(name, str) and name.startswith("c10d::") and not _SEND.match(name):
                    continue
                e["ts"]
            elif cat in _CATEGORY and e.get("ph") == "X":
                e["ts"], e["dur"]
        except (AttributeError, KeyError, TypeError):
            return e
    return None


def _outermost(file: Path, rank: int, chosen: dict, cpu: bool = False):
    """The ops in the order they ran (by start, longer first at a tie): an overlapped pair
    may show its parts as ranges inside its own, of which the outermost is kept. ``cpu``:
    the ranges are ``record_function``'s, which on one thread nest or follow each other."""
    order = np.lexsort((-chosen["end"], chosen["start"]))
    start, end = chosen["start"][order], chosen["end"][order]
    tid, labels = _take(chosen["tid"], order), _take(chosen["label"], order)
    ops = chosen["op"][order]
    reach = np.maximum.accumulate(end)[:-1]
    if not np.any(end[1:] <= reach) and not (cpu and np.any(start[1:] < reach - TOLERANCE_US)):
        return start, end, tid, labels, ops  # nothing nests: the common case
    kept, reach = [], -np.inf
    for k in range(len(start)):
        if end[k] <= reach and tid[k] == tid[kept[-1]]:
            _check_part(file, rank, (float(start[kept[-1]]), float(end[kept[-1]]), tid[kept[-1]],
                                     labels[kept[-1]], tuple(ops[kept[-1]].tolist())),
                        (float(start[k]), float(end[k]), tid[k], labels[k], tuple(ops[k].tolist())))
            continue
        if cpu and start[k] < reach - TOLERANCE_US and tid[k] == tid[kept[-1]]:
            # (accepted, it had run the first op on into the second's compute)
            raise ScheduleError(f"{file}: rank {rank}: range {labels[k]!r} at ts={start[k]} "
                                f"starts {reach - start[k]:.3f} us before {labels[kept[-1]]!r} "
                                f"ends: one thread's ranges nest or follow each other")
        kept.append(k)
        reach = end[k]
    return start[kept], end[kept], [tid[k] for k in kept], [labels[k] for k in kept], ops[kept]


_KIND = {"F": F, "B": B, "I": I, "W": W}
# what an annotation range is, by its name
_SKIP, _OP, _OTHER, _SEND_ACTION, _RECV_END, _POST, _BAD, _PROBE_RANGE, _DELAY = range(9)


def _annotations(file: Path, rank: int, marks: dict):
    """The compute ops (columns ``start, end, tid, label, op``), the receives' ``tid, end``
    columns, the send actions' ``start, end`` rows, the sends posted's ``tid, start`` columns,
    how many other actions there were, the probe's ranges (columns ``start, end`` and
    ``op``: ``stage, kind``, sorted by start) and the injected delays' ``start, end`` rows,
    from annotation ranges (columns ``name, ts, dur, tid``).

    The names are interned as integer codes (as Holistic Trace Analysis's symbol table does):
    each distinct name is parsed once, and each range's role is an array lookup."""
    names = marks["name"]
    try:
        distinct, codes = _intern(names)
    except TypeError:  # a name that is not hashable: not a label
        distinct, codes = _intern([n if isinstance(n, str) else None for n in names])
    role, ops, named = _roles(distinct)
    role, named = role[codes], named[codes]
    a, d = _times(file, rank, marks, named)
    bad = np.flatnonzero(named & ((d < 0) | (role == _BAD)))
    if bad.size:
        k = bad[0]
        if d[k] < 0:
            raise ScheduleError(f"{file}: rank {rank}: event {names[k]!r} at ts={marks['ts'][k]} "
                                f"has a negative duration (dur={marks['dur'][k]})")
        raise ScheduleError(f"{file}: rank {rank}: event {names[k]!r} at ts={marks['ts'][k]}: "
                            f"not a pipeline action PyTorch writes")
    b = a + d
    tids = marks["tid"]
    mine = np.flatnonzero(role == _OP)
    chosen = {"start": a[mine], "end": b[mine], "tid": _take(tids, mine),
              "label": _take(names, mine), "op": ops[codes[mine]]}
    recv, post = np.flatnonzero(role == _RECV_END), np.flatnonzero(role == _POST)
    recvs = _take(tids, recv), b[recv]
    sending = role == _SEND_ACTION
    sends = np.stack([a[sending], b[sending]], axis=1)
    posts = _take(tids, post), a[post]
    others = int(np.count_nonzero((role == _OTHER) | (role == _SEND_ACTION)))
    probe = np.flatnonzero(role == _PROBE_RANGE)
    probe = probe[np.argsort(a[probe], kind="stable")]
    probes = {"start": a[probe], "end": b[probe], "op": ops[codes[probe]][:, [1, 0]]}
    held = role == _DELAY
    return chosen, recvs, sends, posts, others, probes, np.stack([a[held], b[held]], axis=1)


def _intern(keys: list) -> tuple[list, np.ndarray]:
    """The distinct ``keys`` in order of first use, and each key's index among them (one
    dictionary pass: ``setdefault`` gives each key the place of its first use)."""
    first: dict = {}
    at = np.fromiter(map(first.setdefault, keys, count()), np.int64, len(keys))
    index = np.zeros(len(keys), np.int64)
    index[np.fromiter(first.values(), np.int64, len(first))] = np.arange(len(first))
    return list(first), index[at]


def _on(threads: list, tids: list, times: np.ndarray) -> np.ndarray:
    """The ``times`` of the events on one of the ``threads`` (``tids`` their threads)."""
    return times[np.fromiter(map(threads.__contains__, tids), bool, len(tids))]


def _take(values: list, at: np.ndarray) -> list:
    """``values`` at the indices ``at``."""
    return list(map(values.__getitem__, at.tolist()))


def _times(file: Path, rank: int, marks: dict, named: np.ndarray):
    """The ranges' ``ts`` and ``dur`` as float arrays; a labelled range without numeric ones is
    an error (an unlabelled one is skipped)."""
    try:
        a, d = np.array(marks["ts"]), np.array(marks["dur"])
    except ValueError:  # lists among numbers
        a = d = np.zeros((0, 0))
    # (NumPy makes a JSON true among numbers 1.0: a bool is looked for apart; lists alone make
    # a 2-D array)
    if (a.dtype.kind in "iuf" and d.dtype.kind in "iuf" and a.ndim == d.ndim == 1
            and bool not in set(map(type, marks["ts"])) | set(map(type, marks["dur"]))):
        return a.astype(float), d.astype(float)
    ok = np.array([_num(x) and _num(y)
                   for x, y in zip(marks["ts"], marks["dur"], strict=True)], bool)
    if np.any(named & ~ok):
        k = int(np.argmax(named & ~ok))
        raise ScheduleError(f"{file}: rank {rank}: event {marks['name'][k]!r} has no numeric ts "
                            f"and dur")
    a = np.array([x if good else np.nan for x, good in zip(marks["ts"], ok, strict=True)], float)
    d = np.array([x if good else np.nan for x, good in zip(marks["dur"], ok, strict=True)], float)
    return a, d


# a name with each ASCII digit made 0: its shape. Whether a name "PP:..." is an op, an action or
# neither depends only on where its digits are (the patterns of _parse_label's "PP:" branch and
# of parse_op read digits as \d), so each distinct shape of those is parsed once
_SHAPE = str.maketrans("123456789", "000000000")
_DIGITS = 18  # the most digits an int64 surely holds


def _roles(names: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct name's role and op (``-1`` where none), and whether it is a string. The
    names are grouped by their shape (``PP:0F00``), each ``PP:`` shape parsed once
    (``_parse_label``) and the numbers of the plain ops (``PP:<stage><kind><mb>``) read from
    the names' bytes at once; other ops (pairs) and other names (``gloo:recv``, GPipe's
    ``Forward 3``) are parsed one by one."""
    named = np.ones(len(names), bool)
    role = np.full(len(names), -1, np.int64)
    ops = np.full((len(names), 5), -1, np.int64)
    try:
        text = "\n".join(names)
    except TypeError:
        named = np.array([isinstance(n, str) for n in names], bool)
        text = "\n".join(n if isinstance(n, str) else "" for n in names)  # "": skipped
    shapes = text.translate(_SHAPE).split("\n") if names else []
    if len(shapes) != len(names):  # a name with a line break in it
        _parse_each(names, np.arange(len(names)), role, ops)
        return role, ops, named
    distinct = list(dict.fromkeys(shapes))
    index = dict(zip(distinct, range(len(distinct)), strict=True))
    code = np.fromiter(map(index.__getitem__, shapes), np.int64, len(shapes))
    order = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[order], np.arange(len(distinct) + 1))
    for c, shape in enumerate(distinct):
        at = order[bounds[c]:bounds[c + 1]]
        if not shape.startswith("PP:"):
            _parse_each(names, at, role, ops)
            continue
        kind, _ = _parse_label(shape)
        plain = _PLAIN_PP.match(shape)
        if kind == _OP and plain and max(len(plain.group(1)), len(plain.group(3))) <= _DIGITS:
            role[at] = _OP
            ops[at, :3] = _plain_ops(_take(names, at), plain)
        elif kind == _OP:
            _parse_each(names, at, role, ops)
        else:
            role[at] = kind
    return role, ops, named


def _plain_ops(names: list[str], shape: re.Match) -> np.ndarray:
    """``kind, stage, mb`` of plain op labels of one shape (its match of ``_PLAIN_PP``), from
    their ASCII bytes (all as long as the shape): the digits at the shape's places, as
    numbers."""
    text = "".join(names).encode("ascii")
    digits = np.frombuffer(text, np.uint8).reshape(len(names), len(shape.string)) - ord("0")
    out = np.empty((len(names), 3), np.int64)
    out[:, 0] = _KIND[shape.group(2)]
    for column, group in ((1, 1), (2, 3)):
        a, b = shape.span(group)
        out[:, column] = digits[:, a:b].astype(np.int64) @ 10 ** np.arange(b - a - 1, -1, -1)
    return out


def _parse_each(names: list, at: np.ndarray, role: np.ndarray, ops: np.ndarray) -> None:
    """``role`` and ``ops`` of the names at ``at``, one by one."""
    for k in at.tolist():
        try:
            role[k], ops[k] = _parse_label(names[k])
        except OverflowError:  # a number past int64, which no real run's counts reach
            raise ScheduleError(f"an annotation's stage or microbatch must be below 2**63 "
                                f"(got {names[k]!r})") from None


def _parse_label(name) -> tuple[int, tuple]:
    """What an annotation range named ``name`` is, and the op when it is one."""
    none = (-1, -1, -1, -1, -1)
    if not isinstance(name, str):
        return _SKIP, none
    if name.startswith("PP:"):
        plain = _PLAIN_PP.match(name)
        if plain:  # the common case, without parse_op's generality
            return _OP, (_KIND[plain.group(2)], int(plain.group(1)), int(plain.group(3)), -1, -1)
        text = name[3:]
        if _OTHER_ACTIONS.match(text):
            return (_SEND_ACTION if "SEND_" in text else _OTHER), none
        try:
            return _OP, tuple(parse_op(text))
        except ValueError:
            return _BAD, none
    if name == "DELAY":
        return _DELAY, none
    if name.startswith("PROBE:"):
        probe = _PROBE.match(name)
        if probe:
            return _PROBE_RANGE, (_KIND[probe.group(2)], int(probe.group(1)), -1, -1, -1)
        return _SKIP, none
    if name.endswith("recv") and _RECV.match(name):
        return _RECV_END, none
    if _SEND.match(name):
        return _POST, none
    if name.startswith(("Forward ", "Backward ")):
        gpipe = _GPIPE.match(name)
        if gpipe:
            return _OP, (F if gpipe.group(1) == "Forward" else B, -1, int(gpipe.group(2)), -1, -1)
    return _SKIP, none


def _check_part(file: Path, rank: int, outer: tuple, inner: tuple) -> None:
    """A range inside another on its thread must be a part of that overlapped pair (its
    forward, or its backward whole or split); anything else (``PP:0B0`` inside ``PP:0F0``)
    is a damaged trace, never an op to drop silently."""
    kind, s1, j1, s2, j2 = outer[4]
    part = inner[4][:3]
    if kind == FB and (part == (F, s1, j1) or (part[0] in (B, I, W) and part[1:] == (s2, j2))):
        return
    raise ScheduleError(f"{file}: rank {rank}: range {inner[3]!r} at ts={inner[0]} lies inside "
                        f"{outer[3]!r} at ts={outer[0]}, of which it is no part: only an "
                        f"overlapped pair's forward and backward nest in its range")


def _operator_span(ts: np.ndarray, dur: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Per range ``[start, end)``, the first profiled operator starting in it to the latest end
    of the operators up to the last one starting in it (``ts`` sorted; on one thread those
    before the range end before it); 0 for a range without one. The gaps between a chunk's operators
    are its layers' Python (about 20-60 us a layer on CPU), which shrinks with the chunk as
    their work does; counted as a fixed time per op, they priced m = 2 ops 4-6% slow."""
    out = np.zeros(len(start))
    if not len(ts):
        return out
    reach = np.maximum.accumulate(ts + dur)
    first = np.searchsorted(ts, start, side="left")
    last = np.searchsorted(ts, end, side="left") - 1
    has = last >= first
    out[has] = reach[last[has]] - ts[first[has]]
    return out


def _warm_up(ts: np.ndarray, dur: np.ndarray, start: np.ndarray, end: np.ndarray,
             span: np.ndarray) -> np.ndarray:
    """Per range, the time the first half of its operators took beyond the second half (0
    where it took less): a forward's own warm-up, which every forward pays whatever its
    chunk. Measured on the MLP ``fastpp.measured.measure`` runs (p = 2, 16 layers): a
    forward's first product took 390 us and its second 345, the later ones 320-330, in 1F1B's
    ops of eight layers and in interleaved 1F1B's and looped BFS's of four alike, so a chunk
    of half the layers took 4-5% more than half an op. The halves are the range's top-level
    operators (those no other operator holds), split by count; a range with an odd count or
    fewer than four has none. A first layer of other work (an embedding) would count as
    warm-up; a heavier last one (a loss) gives none. (``read`` takes it for forwards only:
    a backward's first layer runs at most 7% above the others, and its halves differ in
    their autograd nodes.)"""
    out = np.zeros(len(start))
    if not len(ts):
        return out
    reach = np.maximum.accumulate(ts + dur)
    top = np.ones(len(ts), bool)
    top[1:] = ts[1:] >= reach[:-1]
    tops = ts[top]
    first = np.searchsorted(tops, start, side="left")
    count = np.searchsorted(tops, end, side="left") - first
    even = (count >= 4) & (count % 2 == 0) & (span > 0)
    a = first[even]
    first_half = tops[a + count[even] // 2] - tops[a]
    out[even] = np.maximum(first_half - (span[even] - first_half), 0.0)  # less the second
    return out


# What a profiled operator is to the split of an unsplit backward (``_weight_span``): another
# operator, the autograd engine's evaluation of a node of the input's gradient, of a node of a
# parameter's gradient only, of a matrix product's node (``nn.Linear``), a matrix product
_OPERATOR, _NODE, _WEIGHT_NODE, _MATMUL_NODE, _PRODUCT = range(5)
_EVALUATE = "autograd::engine::evaluate_function: "  # its range holds the node's call
# AccumulateGrad adds a leaf's gradient to its .grad; EmbeddingBackward0 computes only its
# table's; TBackward0 is nn.Linear's weight.t() on its weight's path (PyTorch's split runs
# all three in W, stage_backward_weight; a TBackward0 on an activation's path, a few
# microseconds, would count to W too)
_WEIGHT_NODES = frozenset({"torch::autograd::AccumulateGrad", "EmbeddingBackward0",
                           "TBackward0"})
# nn.Linear's product (addmm, or mm through matmul): derivatives.yaml computes mat1's gradient
# (the input's) before mat2's (the weight's), each one aten::mm, and the bias's gradient is
# reduced to its shape (aten::sum) after the node, in the same evaluation
_MATMUL_NODES = frozenset({"AddmmBackward0", "MmBackward0"})
_PRODUCT_NAME = "aten::mm"
_HEADS = np.frombuffer(b"autogradaten::mm", np.uint64)  # the names' first 8 bytes, as words


def _autograd_role(name) -> int:
    """A profiled operator's role to ``_weight_span``, by its name."""
    if not isinstance(name, str):
        return _OPERATOR
    if name == _PRODUCT_NAME:
        return _PRODUCT
    if not name.startswith(_EVALUATE):
        return _OPERATOR
    node = name[len(_EVALUATE):]
    if node in _WEIGHT_NODES:
        return _WEIGHT_NODE
    return _MATMUL_NODE if node in _MATMUL_NODES else _NODE


def _autograd_roles(names: list) -> np.ndarray:
    """``_autograd_role`` of each name (each distinct name looked at once)."""
    roles = {name: _autograd_role(name) for name in dict.fromkeys(names)}
    return np.fromiter(map(roles.__getitem__, names), np.int8, len(names))


def _roles_in(buf: np.ndarray, raw: bytes, spans: np.ndarray, escaped: np.ndarray) -> np.ndarray:
    """``_autograd_role`` of the operators whose names are the byte ranges ``spans`` of
    ``buf``: only the names that begin as a node's evaluation or a product does (and escaped
    ones) are decoded, not every operator's."""
    role = np.zeros(len(spans), np.int8)
    if not len(spans):
        return role
    a, b = spans[:, 0], spans[:, 1]
    head = buf[np.minimum(a[:, None] + np.arange(8), len(buf) - 1)].view(np.uint64)[:, 0]
    match = np.zeros(len(spans), bool)
    for word, shortest in zip(_HEADS, (len(_EVALUATE), len(_PRODUCT_NAME)), strict=True):
        match |= (head == word) & (b - a >= shortest)
    plain, odd = np.flatnonzero(match & ~escaped), np.flatnonzero(escaped)
    if plain.size:
        names = _text(buf, spans[plain], "\n").decode("utf-8").split("\n")[:-1]
        role[plain] = _autograd_roles(names)
    if odd.size:
        role[odd] = _autograd_roles([_loads(raw[a[k] - 1:b[k] + 1]) for k in odd.tolist()])
    return role


def _weight_span(ts: np.ndarray, dur: np.ndarray, role: np.ndarray, start: np.ndarray,
                 end: np.ndarray, backward: np.ndarray) -> np.ndarray:
    """Per range ``[start, end)`` that is an unsplit backward (``backward``), the part of its
    operators' span (``_operator_span``) that computes or accumulates the parameters'
    gradients, told by what each operator is (``role``: ``_autograd_role``; ``ts`` sorted,
    longer first at a tie). The span is cut at the start of each autograd node's evaluation
    (``autograd::engine::evaluate_function: <node>``, recorded by ``torch.profiler`` on the
    thread that ran the backward: the CPU's); each piece, the node's evaluation and the
    engine's work up to the next one, goes whole to one side, but a product's:

    - the weight's: a node that computes only a parameter's gradient (``AccumulateGrad``,
      ``EmbeddingBackward0``, ``TBackward0``: ``_WEIGHT_NODES``); of an ``nn.Linear``
      product's node (``AddmmBackward0``, ``MmBackward0``) that computed two products, all
      from the end of the first (the input's gradient): the second (the weight's) and the
      bias's reduction; of one that computed one product or none, all (in a training step
      its weight takes a gradient, so its input took none: the first layer of the first
      stage);
    - the input's: every other node, and the operators before the first node (the loss's
      gradient, the runtime's Python).

    This is the split PyTorch's own makes (``stage_backward_input`` computes the inputs'
    gradients through the same nodes, each product's node computing only its input's;
    ``stage_backward_weight`` the rest from the gradients saved at the products' nodes). A
    trace without the nodes' evaluations gives 0: no weight's part measured. The rule reads
    every product node as ``nn.Linear``'s: a ``torch.mm`` of two activations would give its
    second product to the weight's side, and a frozen layer's one product (its input's
    gradient) too."""
    node = np.flatnonzero((role >= _NODE) & (role <= _MATMUL_NODE))
    if not node.size or not backward.any():
        return np.zeros(len(start))
    op = np.searchsorted(start, ts[node], side="right") - 1
    known = np.maximum(op, 0)
    inside = (op >= 0) & (ts[node] < end[known]) & backward[known]
    node, op = node[inside], op[inside]
    last = np.searchsorted(ts, end[op], side="left") - 1
    closes = np.maximum.accumulate(ts + dur)[last]  # the op's operators' end
    begins = ts[node]
    ends = np.minimum(np.append(begins[1:], np.inf), closes)
    product = np.flatnonzero(role == _PRODUCT)
    first = np.searchsorted(ts[product], begins, side="left")
    count = np.searchsorted(ts[product], begins + dur[node], side="left") - first
    kind = role[node]
    weight_from = np.where((kind == _WEIGHT_NODE) | (kind == _MATMUL_NODE), begins, ends)
    two = (kind == _MATMUL_NODE) & (count >= 2)
    weight_from[two] = ts[product[first[two]]] + dur[product[first[two]]]
    return np.bincount(op, np.clip(ends - weight_from, 0.0, None), minlength=len(start))


def _injected(start: np.ndarray, held: np.ndarray) -> np.ndarray:
    """Per op, the time of the ``DELAY`` ranges (``held``: ``start, end`` rows) that start
    after it starts and before the next op does: the sleeps ``measure`` injected in it, or
    after it before its sends (``start`` in run order)."""
    at = np.searchsorted(start, held[:, 0], side="right") - 1
    mine = at >= 0
    return np.bincount(at[mine], held[mine, 1] - held[mine, 0], minlength=len(start))


def _release(start: np.ndarray, end: np.ndarray, sends: np.ndarray) -> np.ndarray:
    """When each op's outputs left: the end of the last send posted between its range and the
    next op's (PyTorch posts an op's sends right after it), else its range's end. ``sends``
    holds the send actions' ``start, end`` rows."""
    release = end.copy()
    if not len(sends):
        return release
    posted = sends[np.lexsort((sends[:, 1], sends[:, 0]))]  # one thread posts them in turn
    nxt = np.append(start[1:], np.inf)
    last = np.searchsorted(posted[:, 0], nxt, side="left") - 1
    found = last >= 0
    found[found] = posted[last[found], 0] >= end[found]
    release[found] = np.minimum(np.maximum(end[found], posted[last[found], 1]), nxt[found])
    return release


def _num(x) -> bool:
    """A JSON number (``true`` and ``false`` load as bools, which Python counts as ints)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def _read_megatron(file: Path, data: dict) -> RankTrace:
    """PP-Schedule-Visualization's Megatron timer file: ``{"forward-3-start": ms, ...}``; the
    file name ``..._pp_rank_{r}_rank_{g}.json`` gives the pipeline rank. A chunk ``c`` of
    pipeline rank ``r`` is virtual stage ``c * p + r`` (Megatron's interleaving), filled in by
    ``run`` once ``p`` is known."""
    named = _MEGATRON_FILE.search(file.name)
    rank = int(named.group(1)) if named else _rank_from_name(file)
    if rank is None:
        raise ScheduleError(f"{file}: no rank: a Megatron PP-timer file is named "
                            f"'event_times_..._pp_rank_<r>_rank_<g>.json'")
    if _replica(file):
        raise ScheduleError(f"{file}: rank {rank}: a TPxCPxDP rank other than 0; pass only the "
                            f"files of TPxCPxDP rank 0 (one per pipeline rank)")
    times: dict[tuple, dict[str, float]] = {}
    for key, value in data.items():
        found = _MEGATRON_KEY.match(str(key))
        if found is None:
            continue
        if not _num(value):
            raise ScheduleError(f"{file}: rank {rank}: event {key!r} must be a time in ms "
                                f"(got {value!r})")
        what, a, b, edge = found.groups()
        chunk, mb = (0, int(a)) if b is None else (int(a), int(b))
        label = key[: -len(edge) - 1]
        times.setdefault((what, chunk, mb, label), {})[edge] = float(value) * 1e3  # ms -> us
    rows = []
    for (what, chunk, mb, label), edges in times.items():
        if len(edges) != 2:
            missing = "end" if "start" in edges else "start"
            raise ScheduleError(f"{file}: rank {rank}: event {label!r} has no -{missing} time")
        if edges["end"] < edges["start"]:
            raise ScheduleError(f"{file}: rank {rank}: event {label!r} ends before it starts "
                                f"({label}-end={edges['end'] / 1e3:g} ms < {label}-start="
                                f"{edges['start'] / 1e3:g} ms)")
        rows.append((edges["start"], edges["end"], label,
                     (F if what == "forward" else B, -1, mb, -1, -1), chunk))
    rows.sort(key=lambda row: (row[0], -row[1]))
    start = np.array([r[0] for r in rows])
    end = np.array([r[1] for r in rows])
    return RankTrace(str(file), rank, None, "", 0, [r[2] for r in rows],
                     np.array([r[3] for r in rows], np.int64).reshape(-1, 5),
                     np.array([r[4] for r in rows], np.int64), start, end, end.copy(),
                     np.full(len(rows), np.nan), end.copy(), end.copy(), end - start,
                     np.zeros(len(rows)), True)
