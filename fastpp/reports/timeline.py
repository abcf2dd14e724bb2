"""Timelines in a compact form the page expands into Plotly bars (one bar trace per op kind).

Per timeline: the op columns in row order as int32, times as integer steps of ``q`` (six
significant digits of the makespan), each op stored as its gap after the previous op of its
row and its duration, the memory just after each op's start and end in steps of ``mq``, then
deflated and base64-encoded (the page inflates it with the browser's DecompressionStream).
The default sweep's 409,500 ops of timelines take well under a megabyte so, against 22 MB as
plain JSON.
"""

from __future__ import annotations

import base64
import zlib

import numpy as np

from ..ops import FB, Op
from ..plot import COLOURS
from ..trace import measured_slices

WAIT = 5  # a measured op's wait for its input; not an op kind of a schedule
KINDS = [{"name": op.name, "label": {"FB": "F&B"}.get(op.name, op.name), "colour": COLOURS[op]}
         for op in Op] + [{"name": "wait", "label": "wait (measured)", "colour": "#BBBBBB"}]


def _step(scale: float) -> float:
    """Six significant digits of ``scale`` as a power of ten."""
    return 10.0 ** (np.floor(np.log10(scale)) - 5) if scale > 0 else 1e-6


def encode(title: str, rows: list[str], cols: dict, scale: float, memory=None) -> dict:
    """The timeline item of ops given as columns (``row, kind, stage, mb, stage2, mb2, start,
    end``; ``memory``: the activations just after each op's start and end, or None)."""
    order = np.lexsort((cols["start"], cols["row"]))
    q = _step(scale)
    start = np.rint(cols["start"][order] / q).astype(np.int64)
    end = np.rint(cols["end"][order] / q).astype(np.int64)
    row = cols["row"][order]
    first = np.r_[True, row[1:] != row[:-1]]
    columns = {"kind": cols["kind"][order], "stage": cols["stage"][order],
               "mb": cols["mb"][order], "gap": start - np.where(first, 0, np.r_[0, end[:-1]]),
               "dur": end - start}
    if np.any(cols["kind"] == FB):
        columns.update(stage2=cols["stage2"][order], mb2=cols["mb2"][order])
    head = {"title": title, "rows": rows, "q": q,
            "length": np.bincount(row, minlength=len(rows)).tolist()}
    if memory is not None:
        head["mq"] = _step(max(float(np.max(memory[1], initial=0)), 1e-300))
        columns.update(after=np.rint(memory[0][order] / head["mq"]),
                       done=np.rint(memory[1][order] / head["mq"]))
    head["columns"] = list(columns)
    packed = b"".join(np.asarray(c, dtype="<i4").tobytes() for c in columns.values())
    return {"type": "timeline", **head,
            # level 1: a third of the time of level 6 for a file 1.6 times the size
            "blob": base64.b64encode(zlib.compress(packed, 1)).decode()}


def _ops(schedule):
    used = np.arange(schedule.kind.shape[1]) < schedule.length[:, None]
    return used, np.nonzero(used)[0]


def simulated(result, title: str, memory: bool = True) -> dict:
    """``result``'s ops, one row per device, with each device's memory curve beneath."""
    s = result.schedule
    used, device = _ops(s)
    cols = {"row": device, "kind": s.kind[used], "stage": s.stage[used], "mb": s.mb[used],
            "stage2": s.stage2[used], "mb2": s.mb2[used], "start": result.start[used],
            "end": result.end[used]}
    return encode(title, [f"device {r}" for r in range(s.p)], cols, result.makespan,
                  (result.mem_start[used], result.mem_end[used]) if memory else None)


def measured(run, result, title: str) -> dict:
    """A measured run over a simulation of it: per device a ``measured`` row (each op from the
    end of its wait, a grey ``wait`` bar, to its release) above a ``simulated`` row."""
    s = result.schedule
    used, device = _ops(s)
    ops = run.ops
    waited, begin, release = measured_slices(ops)
    waits = ops["wait"].to_numpy() > 0
    mine = {"row": 2 * ops["device"].to_numpy(),
            "kind": np.array([Op[k] for k in ops["kind"]], dtype=np.int64),
            "stage": ops["stage"].to_numpy(), "mb": ops["microbatch"].to_numpy(),
            "stage2": ops["stage2"].to_numpy(), "mb2": ops["microbatch2"].to_numpy()}
    sim = {"row": 2 * device + 1, "kind": s.kind[used], "stage": s.stage[used],
           "mb": s.mb[used], "stage2": s.stage2[used], "mb2": s.mb2[used]}
    cols = {key: np.concatenate([mine[key][waits], mine[key], sim[key]]) for key in mine}
    cols["kind"][: int(waits.sum())] = WAIT
    cols["start"] = np.concatenate([waited[waits], begin, result.start[used]])
    cols["end"] = np.concatenate([begin[waits], release, result.end[used]])
    rows = [f"{what} {r}" for r in range(s.p) for what in ("measured", "simulated")]
    return encode(title, rows, cols, max(run.makespan, result.makespan))
