"""Synthetic per-rank torch.profiler traces of a pipeline run whose every time is known.

A small event loop of its own (not fastpp's kernels) runs a schedule the way PyTorch's runtime
does on CPU: an op's range opens ``lead`` after the previous op's sends were posted, reaches
its wait ``o1`` later, blocks until its input arrives (``latency`` after the producer's sends
were posted, plus an injected ``extra`` delay), then computes; its sends are posted
``send_gap`` after its range ends and take ``send_post``. Each rank's clock runs ``offset``
ahead; each writes a Chrome trace like ``export_chrome_trace`` does (``PP:`` ranges with a
``cpu_op`` inside, ``gloo:recv`` ranges that end when the wait returns, ``SEND`` actions).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from fastpp import dependencies

BASE_NS = 1_790_857_026_000_000_000
TS0 = 5_255_937_000_000.0  # microseconds: the profiler's ts are large, as in real traces


def run(schedule, compute, lead, *, latency, o1, send_gap=20e-6, send_post=60e-6, extra=None):
    """The true timeline (seconds from the run's start) of ``schedule``.

    Returns a dict of ``(p, L)`` arrays: ``start, end`` (ranges), ``ready`` (the wait's end,
    NaN without a cross-device input), ``release`` (sends posted), and the truths the reader
    must recover: ``wait, compute, overhead`` and ``stall`` (how much later than its
    producer's release plus ``latency``, and than reaching its wait, an op's wait ended: the
    injected ``extra`` where it made the op wait longer).
    """
    s = schedule
    p, L = s.kind.shape
    extra = np.zeros((p, L)) if extra is None else extra
    where = dependencies.producers(s)
    feeds = set()  # ops with a consumer on another device
    needs = {}
    for r in range(p):
        for k in range(s.length[r]):
            cross = [where[x] for x in dependencies.inputs(s, r, k) if where[x][0] != r]
            needs[(r, k)] = cross
            feeds.update(cross)
    t = {name: np.full((p, L), np.nan) for name in ("start", "end", "ready", "release", "due")}
    pos = [0] * p
    free = [0.0] * p
    done = 0
    total = int(s.length.sum())
    while done < total:
        moved = False
        for r in range(p):
            while pos[r] < s.length[r]:
                k = pos[r]
                inputs = needs[(r, k)]
                if any(np.isnan(t["release"][x]) for x in inputs):
                    break
                a = free[r] + lead[r, k]
                if inputs:
                    arrival = max(t["release"][x] for x in inputs) + latency + extra[r, k]
                    ready = max(a + o1[r], arrival)
                    t["due"][r, k] = max(a + o1[r], arrival - extra[r, k])
                    e = ready - o1[r] + compute[r, k]
                    t["ready"][r, k] = ready
                else:
                    e = a + compute[r, k]
                rel = e + send_gap + send_post if (r, k) in feeds else e
                t["start"][r, k], t["end"][r, k], t["release"][r, k] = a, e, rel
                free[r] = rel
                pos[r] += 1
                done += 1
                moved = True
        assert moved, "the schedule deadlocks"
    used = np.arange(L) < s.length[:, None]
    inside = np.where(np.isnan(t["ready"]), 0.0, t["ready"] - t["start"] - o1[:, None])
    before = np.concatenate([np.zeros((p, 1)), t["release"][:, :-1]], axis=1)
    first = np.arange(L)[None, :] == 0
    t["wait"] = np.where(used, inside + np.where(first, t["start"], 0.0), 0.0)
    t["compute"] = np.where(used, compute, 0.0)
    t["overhead"] = np.where(used, np.where(first, 0.0, t["start"] - before)
                             + t["release"] - t["end"], 0.0)
    t["stall"] = np.where(used & ~np.isnan(t["due"]), t["ready"] - t["due"], 0.0)
    t["feeds"] = feeds
    return t


def write(folder, schedule, timeline, *, offsets=None, hosts=None, gz=False, world_size=None,
          labels="PP", delays=False):
    """Write one Chrome trace per rank into ``folder`` (``rank{r}_trace.json[.gz]``).

    ``labels="PP"`` writes ``PP:<action>`` ranges; ``"gpipe"`` writes ScheduleGPipe's
    ``Forward {i}`` / ``Backward {i}`` (single-stage ranks). ``delays``: a ``DELAY`` range
    (an injected sleep) in each gap between an op's end and its sends.
    """
    s = schedule
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    offsets = np.zeros(s.p) if offsets is None else offsets
    hosts = ["host"] * s.p if hosts is None else hosts
    paths = []
    for r in range(s.p):
        us = (lambda x, r=r: TS0 + (x + offsets[r]) * 1e6)  # noqa: E731 (this rank's clock)
        events = [{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": r,
                   "tid": r, "ts": TS0, "dur": 1.0}]

        def span(cat, name, a, b, r=r, us=us, events=events):
            events.append({"ph": "X", "cat": cat, "name": name, "pid": 100 + r, "tid": 100 + r,
                           "ts": us(a), "dur": us(b) - us(a), "args": {}})

        for k in range(s.length[r]):
            token = s.token(r, k)
            a, e = timeline["start"][r, k], timeline["end"][r, k]
            if labels == "gpipe":
                name = ("Forward " if s.kind[r, k] == 0 else "Backward ") + str(s.mb[r, k])
            else:
                name = "PP:" + token
            before = timeline["release"][r, k - 1] if k else 0.0
            if a > before:  # a receive is posted in the gap before the op
                span("user_annotation", f"PP:{s.stage[r, k]}RECV_F{s.mb[r, k]}", before,
                     (before + a) / 2)
            span("user_annotation", name, a, e)
            ready = timeline["ready"][r, k]
            if not np.isnan(ready):
                span("user_annotation", "gloo:recv", before, ready)
                span("cpu_op", "aten::linear", ready + 1e-6, e - 1e-6)
            else:
                span("cpu_op", "aten::linear", a + 1e-6, e - 1e-6)
            rel = timeline["release"][r, k]
            if rel > e:
                span("user_annotation", f"PP:{s.stage[r, k]}SEND_F{s.mb[r, k]}",
                     rel - (rel - e) * 0.75, rel)
                if delays:
                    span("user_annotation", "DELAY", e + (rel - e) * 0.05, e + (rel - e) * 0.2)
        events.sort(key=lambda ev: ev["ts"])
        data = {"schemaVersion": 1, "deviceProperties": [],
                "distributedInfo": {"backend": "gloo", "rank": r,
                                    "world_size": s.p if world_size is None else world_size},
                "host_name": hosts[r], "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS,
                "traceEvents": events}
        path = folder / (f"rank{r}_trace.json" + (".gz" if gz else ""))
        raw = json.dumps(data).encode()
        path.write_bytes(gzip.compress(raw) if gz else raw)
        paths.append(path)
    return paths
