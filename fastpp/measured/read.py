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

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import ScheduleError
from ..ops import B, F, parse_op

# the actions PyTorch labels that are not compute (they post messages or manage weights)
_OTHER_ACTIONS = re.compile(r"^\d+(SEND_F|RECV_F|SEND_B|RECV_B|UNSHARD|RESHARD|REDUCE_GRAD)\d*$")
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
    ready : ndarray, shape (k,)
        When the op's wait for its inputs returned: the end of the last receive finishing in
        the range before its first operator; NaN when none finished there.
    device_clock : bool
        Times are the device's (GPU ranges, CUDA events): a wait shows as a gap between ops,
        not inside one.
    sent : ndarray, shape (k,), optional
        When the op's output left: the start of the first send posted inside its range
        (``ScheduleGPipe`` posts its sends inside ``Forward {i}``, so a receiver can have them
        before the range ends); ``None``: at ``end``.
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
    device_clock: bool
    sent: np.ndarray | None = None


def trace_files(path) -> list[Path]:
    """The files of a run: a folder's ``*.json`` / ``*.json.gz``, a list of files, or one file."""
    if isinstance(path, str | os.PathLike):
        p = Path(path)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file()
                           and (f.name.endswith(".json") or f.name.endswith(".json.gz")))
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
        if not f.is_file():
            raise ScheduleError(f"trace file {str(f)!r} does not exist")
    return files


def read_file(file: Path) -> RankTrace:
    """Parse one rank's file (either format)."""
    data = _load_json(file)
    if isinstance(data, dict) and "traceEvents" in data:
        return _read_chrome(file, data)
    if isinstance(data, dict) and any(_MEGATRON_KEY.match(str(k)) for k in data):
        return _read_megatron(file, data)
    raise ScheduleError(f"{file}: not a profiler trace (no 'traceEvents') nor a Megatron PP-timer "
                        f"file (no 'forward-...-start' keys)")


def _load_json(file: Path):
    try:
        if file.name.endswith(".gz"):
            with gzip.open(file, "rb") as fh:
                raw = fh.read()
        else:
            raw = file.read_bytes()
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ScheduleError(f"{file}: not valid JSON (truncated or not a trace?): {err}") from None
    except (OSError, EOFError, zlib.error) as err:
        raise ScheduleError(f"{file}: cannot be read (a truncated .gz?): {err}") from None


def _rank_from_name(file: Path) -> int | None:
    found = _RANK_IN_NAME.findall(file.name)
    return int(found[-1]) if found else None


def _read_chrome(file: Path, data: dict) -> RankTrace:
    info = data.get("distributedInfo") or {}
    rank = info.get("rank", _rank_from_name(file))
    if not isinstance(rank, int) or rank < 0:
        raise ScheduleError(f"{file}: no rank: the trace has no distributedInfo.rank and the "
                            f"file name no 'rank<r>'")
    world = info.get("world_size")
    events = data["traceEvents"]
    if not isinstance(events, list):
        raise ScheduleError(f"{file}: rank {rank}: traceEvents must be a list of events")
    cpu, gpu, children, recvs, sends = [], [], [], [], []
    other_labels = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        name = e.get("name")
        if cat == "cpu_op":
            # posting a message is not the op's compute: ScheduleGPipe posts its receives and
            # sends inside its ranges (c10d::recv_, c10d::send), the other schedules outside
            if isinstance(name, str) and name.startswith("c10d::"):
                if _SEND.match(name):
                    sends.append((e.get("tid"), e.get("ts")))
                continue
            children.append((e.get("tid"), e.get("ts")))
            continue
        if cat != "user_annotation" and cat != "gpu_user_annotation":
            continue
        if _RECV.match(name):
            recvs.append((e.get("tid"), e.get("ts"), e.get("dur")))
            continue
        if _SEND.match(name):
            sends.append((e.get("tid"), e.get("ts")))
            continue
        if name.startswith("PP:"):
            text = name[3:]
            if _OTHER_ACTIONS.match(text):
                other_labels += 1
                continue
            try:
                op = parse_op(text)
            except ValueError:
                raise ScheduleError(f"{file}: rank {rank}: event {name!r} at ts={e.get('ts')}: "
                                    f"not a pipeline action PyTorch writes") from None
        else:
            gpipe = _GPIPE.match(name)
            if gpipe is None:
                continue
            op = (F if gpipe.group(1) == "Forward" else B, -1, int(gpipe.group(2)), -1, -1)
        (gpu if cat == "gpu_user_annotation" else cpu).append((name, e, op))
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
    try:
        rows = [(float(e["ts"]), float(e["ts"]) + float(e["dur"]), e.get("tid"), name, op)
                for name, e, op in chosen]
    except (KeyError, TypeError, ValueError):
        bad = next(name for name, e, _ in chosen if not _timed(e))
        raise ScheduleError(f"{file}: rank {rank}: event {bad!r} has no numeric ts and dur"
                            ) from None
    rows.sort(key=lambda row: (row[0], -row[1]))
    # an overlapped pair may show its parts as ranges inside its own: keep the outermost
    kept, reach = [], -np.inf
    for row in rows:
        if row[1] <= reach and kept and row[2] == kept[-1][2]:
            continue
        kept.append(row)
        reach = row[1]
    start = np.array([r[0] for r in kept])
    end = np.array([r[1] for r in kept])
    threads = {r[2] for r in kept}
    first_child = end.copy()
    ready = np.full(len(kept), np.nan)
    if not device_clock:
        ts = np.sort(np.array([t for tid, t in children if tid in threads and _num(t)], float))
        at = np.searchsorted(ts, start, side="left")
        has = at < len(ts)
        first_child[has] = np.minimum(end[has], ts[np.minimum(at, len(ts) - 1)[has]])
        ends = np.sort(np.array([t + d for tid, t, d in recvs if tid in threads and _num(t)
                                 and _num(d)], float))
        last = np.searchsorted(ends, first_child, side="right") - 1
        found = last >= 0
        found[found] = ends[last[found]] >= start[found]
        ready[found] = ends[last[found]]
        posted = np.sort(np.array([t for tid, t in sends if tid in threads and _num(t)], float))
        at = np.searchsorted(posted, start, side="left")
        inside = at < len(posted)
        inside[inside] = posted[at[inside]] < end[inside]
        sent = end.copy()
        sent[inside] = posted[at[inside]]
    return RankTrace(str(file), rank, world if isinstance(world, int) else None,
                     str(data.get("host_name", "")), int(data.get("baseTimeNanoseconds", 0)),
                     [r[3] for r in kept], np.array([r[4] for r in kept], np.int64).reshape(-1, 5),
                     np.zeros(len(kept), np.int64), start, end, first_child, ready, device_clock,
                     None if device_clock else sent)


def _num(x) -> bool:
    return isinstance(x, int | float)


def _timed(e: dict) -> bool:
    return _num(e.get("ts")) and _num(e.get("dur"))


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
    tp = _MEGATRON_TP_RANK.search(file.name)
    if tp and int(tp.group(1)) != 0:
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
        rows.append((edges["start"], edges["end"], label,
                     (F if what == "forward" else B, -1, mb, -1, -1), chunk))
    rows.sort(key=lambda row: (row[0], -row[1]))
    start = np.array([r[0] for r in rows])
    end = np.array([r[1] for r in rows])
    return RankTrace(str(file), rank, None, "", 0, [r[2] for r in rows],
                     np.array([r[3] for r in rows], np.int64).reshape(-1, 5),
                     np.array([r[4] for r in rows], np.int64), start, end, end.copy(),
                     np.full(len(rows), np.nan), True)
