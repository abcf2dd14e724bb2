"""The trace reader as it was before its per-event loop became array work (issue 27, part 5):
the slow reference that tests/test_read_fast.py compares the package's reader with.

The original module docstring follows.

Reading per-rank traces of a pipeline run into plain arrays, one ``RankTrace`` per rank.

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

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:  # three times faster on big traces; the standard library's json otherwise
    from orjson import JSONDecodeError as _OrjsonError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover (the measured extra installs it)
    _loads, _OrjsonError = json.loads, json.JSONDecodeError

from fastpp.checks import ScheduleError
from fastpp.ops import FB, B, F, I, W, parse_op

# the actions PyTorch labels that are not compute (they post messages or manage weights)
_OTHER_ACTIONS = re.compile(r"^\d+(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)\d*$")
_PLAIN_PP = re.compile(r"^PP:(\d+)([FBIW])(\d+)$")
_GPIPE = re.compile(r"^(Forward|Backward) (\d+)$")
_RECV = re.compile(r"^\w+:recv\b")  # gloo:recv, nccl:recv ...: the work object of an irecv
_SEND = re.compile(r"^(\w+:send|c10d::send)\b")  # the send op (it may block), its work object
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)")
_MEGATRON_KEY = re.compile(r"^(forward|backward)-(\d+)(?:-(\d+))?-(start|end)$")
_MEGATRON_FILE = re.compile(r"_pp_rank_(\d+)_rank_(\d+)\.json$")
_MEGATRON_TP_RANK = re.compile(r"_TPxCPxDP_rank_(\d+)_")


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
        The span of the profiled operators starting inside the range (first start to last
        end); with device clocks the whole range.
    ready : ndarray, shape (k,)
        When the op's wait for its inputs returned: the end of the last receive finishing in
        the range (a receive's range ends when its ``wait()`` returns, and only the op that
        needs it waits for it); NaN when none finished there.
    device_clock : bool
        Times are the device's (GPU ranges, CUDA events): a wait shows as a gap between ops,
        not inside one.
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
    device_clock: bool


def trace_files(path) -> list[Path]:
    """The files of a run: a folder's ``*.json`` / ``*.json.gz``, a list of files, or one file."""
    if isinstance(path, str | os.PathLike):
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file()
                           and (f.name.endswith(".json") or f.name.endswith(".json.gz"))
                           and not _replica(f))
            if not files:
                raise ScheduleError(f"path {str(p)!r} holds no .json or .json.gz trace files")
            return files
        if not p.is_file():
            raise ScheduleError(f"path must be a trace file, a folder of them or a list of files "
                                f"(got {str(p)!r}, which does not exist)")
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


def _replica(file: Path) -> bool:
    """A Megatron timer file of a tensor/context/data-parallel replica (its TPxCPxDP rank is not
    0): the same pipeline rank again, left out of a folder as PP-Schedule-Visualization does."""
    tp = _MEGATRON_TP_RANK.search(file.name)
    return bool(tp) and int(tp.group(1)) != 0


def read_file(file: Path) -> RankTrace:
    """Parse one rank's file (either format)."""
    data = _load_json(file)
    if isinstance(data, dict) and "traceEvents" in data:
        return _read_chrome(file, data)
    if isinstance(data, dict) and any(_MEGATRON_KEY.match(str(k)) for k in data):
        return _read_megatron(file, data)
    raise ScheduleError(f"{file}: not a profiler trace (no 'traceEvents') nor a Megatron PP-timer "
                        f"file (no 'forward-...-start' keys); pass the trace files as a list if "
                        f"their folder holds other JSON files")


def _load_json(file: Path):
    try:
        if file.name.endswith(".gz"):
            with gzip.open(file, "rb") as fh:
                raw = fh.read()
        else:
            raw = file.read_bytes()
        return _loads(raw)
    except (json.JSONDecodeError, _OrjsonError, UnicodeDecodeError) as err:
        raise ScheduleError(f"{file}: not valid JSON (truncated or not a trace?): {err}") from None
    except (OSError, EOFError, zlib.error) as err:
        raise ScheduleError(f"{file}: cannot be read (a truncated .gz?): {err}") from None


def _rank_from_name(file: Path) -> int | None:
    found = _RANK_IN_NAME.findall(file.name)
    return int(found[-1]) if found else None


def _read_chrome(file: Path, data: dict) -> RankTrace:
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
    events = data["traceEvents"]
    if not isinstance(events, list):
        raise ScheduleError(f"{file}: rank {rank}: traceEvents must be a list of events")
    # one pass over every event, keeping little: real traces hold many operators per op
    child_tid, child_ts, child_dur = [], [], []
    marks = {"user_annotation": [], "gpu_user_annotation": []}
    try:
        for e in events:
            cat = e.get("cat")
            if cat == "cpu_op":
                name = e.get("name")
                # posting a message is not the op's compute: ScheduleGPipe posts its receives
                # and sends inside its ranges (c10d::recv_, c10d::send), the others outside
                if isinstance(name, str) and name.startswith("c10d::"):
                    if _SEND.match(name):
                        marks["user_annotation"].append((name, e["ts"], 0.0, e.get("tid")))
                    continue
                child_tid.append(e.get("tid"))
                child_ts.append(e["ts"])
                child_dur.append(e.get("dur", 0.0))
            elif cat in marks and e.get("ph") == "X":
                marks[cat].append((e.get("name"), e["ts"], e["dur"], e.get("tid")))
    except (AttributeError, KeyError, TypeError):
        raise ScheduleError(f"{file}: rank {rank}: event {e!r:.200} is not a profiler event "
                            f"(a dict with a numeric ts and dur)") from None
    cpu, recvs, sends, posts, other_labels = _annotations(file, rank, marks["user_annotation"])
    gpu = _annotations(file, rank, marks["gpu_user_annotation"])[0]
    device_clock = bool(gpu)
    chosen = gpu or cpu
    if not chosen:
        hint = (" (it labels only sends and receives)" if other_labels else "")
        raise ScheduleError(
            f"{file}: rank {rank}: no pipeline labels{hint}: expected user_annotation events "
            f"named 'PP:<action>' (torch >= 2.10 multi-stage schedules, _PipelineScheduleRuntime) "
            f"or 'Forward <i>'/'Backward <i>' (ScheduleGPipe). torch's Schedule1F1B labels "
            f"nothing: measure 1F1B by writing its order with fastpp.io.write_torch_csv and "
            f"running it through _PipelineScheduleRuntime (_load_csv(path, "
            f"format='compute_only')).")
    chosen.sort(key=lambda row: (row[0], -row[1]))
    # an overlapped pair may show its parts as ranges inside its own: keep the outermost
    kept, reach = [], -np.inf
    for row in chosen:
        if row[1] <= reach and row[2] == kept[-1][2]:
            _check_part(file, rank, kept[-1], row)
            continue
        kept.append(row)
        reach = row[1]
    start = np.array([r[0] for r in kept])
    end = np.array([r[1] for r in kept])
    first_child = end.copy()
    ready = np.full(len(kept), np.nan)
    release = end.copy()
    sent = end.copy()
    operators = end - start
    if not device_clock:
        threads = list({r[2] for r in kept})
        release = _release(start, end, sends)
        posted = np.sort(np.array([a for tid, a in posts if tid in threads], float))
        at = np.searchsorted(posted, start, side="left")
        inside = at < len(posted)
        inside[inside] = posted[at[inside]] < end[inside]
        sent[inside] = posted[at[inside]]
        try:
            mine = np.isin(np.array(child_tid, object), threads)
            ts, dur = np.array(child_ts, float)[mine], np.array(child_dur, float)[mine]
        except (TypeError, ValueError):
            bad = next(x for x in child_ts + child_dur if not _num(x))
            raise ScheduleError(f"{file}: rank {rank}: a cpu_op event has ts or dur {bad!r}, "
                                f"not a number") from None
        order = np.lexsort((-dur, ts))
        ts, dur = ts[order], dur[order]
        at = np.searchsorted(ts, start, side="left")
        has = at < len(ts)
        first_child[has] = np.minimum(end[has], ts[np.minimum(at, len(ts) - 1)[has]])
        operators = _operator_span(ts, dur, start, end)
        forward = np.array([r[4][0] == F for r in kept], bool)
        operators = operators - np.where(forward, _warm_up(ts, dur, start, end, operators), 0.0)
        ends = np.sort(np.array([b for tid, b in recvs if tid in threads], float))
        last = np.searchsorted(ends, end, side="right") - 1
        found = last >= 0
        found[found] = ends[last[found]] >= start[found]
        ready[found] = ends[last[found]]
    return RankTrace(str(file), rank, world if isinstance(world, int) else None,
                     str(data.get("host_name", "")), base_ns,
                     [r[3] for r in kept], np.array([r[4] for r in kept], np.int64).reshape(-1, 5),
                     np.zeros(len(kept), np.int64), start, end, first_child, ready, release,
                     sent, operators, device_clock)


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
    """Per range ``[start, end)``, from the first profiled operator starting in it to the
    latest end of those (``ts`` sorted), 0 without one: one range at a time."""
    out = np.zeros(len(start))
    for k, (a, b) in enumerate(zip(start, end, strict=True)):
        inside = (ts >= a) & (ts < b)
        if inside.any():
            out[k] = (ts + dur)[inside].max() - ts[inside][0]
    return out


def _warm_up(ts: np.ndarray, dur: np.ndarray, start: np.ndarray, end: np.ndarray,
             span: np.ndarray) -> np.ndarray:
    """Per range, its top-level operators (none of the trace's earlier operators still
    running when it starts) split by count into halves, and the first half's time less the
    second's (0 where that is negative, and for an odd count or fewer than four): one range
    at a time."""
    out = np.zeros(len(start))
    top, reach = [], -np.inf
    for k in range(len(ts)):
        if ts[k] >= reach:
            top.append(k)
        reach = max(reach, ts[k] + dur[k])
    for q, (a, b) in enumerate(zip(start, end, strict=True)):
        mine = [ts[k] for k in top if a <= ts[k] < b]
        if len(mine) >= 4 and len(mine) % 2 == 0 and span[q] > 0:
            first_half = mine[len(mine) // 2] - mine[0]
            out[q] = max(first_half - (span[q] - first_half), 0.0)
    return out


_KIND = {"F": F, "B": B, "I": I, "W": W}


def _annotations(file: Path, rank: int, marks: list[tuple]):
    """The compute ops ``(start, end, tid, label, op)``, the receives' ``(tid, end)``, the
    send actions ``(start, end)``, the sends posted ``(tid, start)`` and how many other actions
    there were, from annotation ranges ``(name, ts, dur, tid)``."""
    try:
        return _classify(file, rank, marks)
    except TypeError:  # a ts or dur that is not a number
        bad = next(m for m in marks if not (_num(m[1]) and _num(m[2])))
        raise ScheduleError(f"{file}: rank {rank}: event {bad[0]!r} has no numeric ts and "
                            f"dur") from None


def _classify(file: Path, rank: int, marks: list[tuple]):
    ops, recvs, sends, posts = [], [], [], []
    others = 0
    for name, a, d, tid in marks:
        if not isinstance(name, str):
            continue
        if d < 0:
            raise ScheduleError(f"{file}: rank {rank}: event {name!r} at ts={a} has a negative "
                                f"duration (dur={d})")
        if name.startswith("PP:"):
            plain = _PLAIN_PP.match(name)
            if plain:  # the common case, without parse_op's generality
                ops.append((a, a + d, tid, name, (_KIND[plain.group(2)], int(plain.group(1)),
                                                  int(plain.group(3)), -1, -1)))
                continue
            text = name[3:]
            if _OTHER_ACTIONS.match(text):
                others += 1
                if "SEND_" in text:
                    sends.append((a, a + d))
                continue
            try:
                op = parse_op(text)
            except ValueError:
                raise ScheduleError(f"{file}: rank {rank}: event {name!r} at ts={a}: not a "
                                    f"pipeline action PyTorch writes") from None
            ops.append((a, a + d, tid, name, op))
        elif name.endswith("recv") and _RECV.match(name):
            recvs.append((tid, a + d))
        elif _SEND.match(name):
            posts.append((tid, a))
        elif name.startswith(("Forward ", "Backward ")):
            gpipe = _GPIPE.match(name)
            if gpipe:
                ops.append((a, a + d, tid, name, (F if gpipe.group(1) == "Forward" else B, -1,
                                                  int(gpipe.group(2)), -1, -1)))
    return ops, recvs, sends, posts, others


def _release(start: np.ndarray, end: np.ndarray, sends: list[tuple]) -> np.ndarray:
    """When each op's outputs left: the end of the last send posted between its range and the
    next op's (PyTorch posts an op's sends right after it), else its range's end."""
    release = end.copy()
    if not sends:
        return release
    posted = np.array(sorted(sends))  # one thread posts them one after another
    nxt = np.append(start[1:], np.inf)
    last = np.searchsorted(posted[:, 0], nxt, side="left") - 1
    found = last >= 0
    found[found] = posted[last[found], 0] >= end[found]
    release[found] = np.minimum(np.maximum(end[found], posted[last[found], 1]), nxt[found])
    return release


def _num(x) -> bool:
    return isinstance(x, int | float)


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
                     np.full(len(rows), np.nan), end.copy(), end.copy(), end - start, True)
