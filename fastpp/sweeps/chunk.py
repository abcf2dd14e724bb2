"""One chunk of a sweep: its points validated, started on the batch entry, and its rows."""

from __future__ import annotations

from collections import Counter

import numpy as np

from .. import batch, engine
from ..generators.registry import SCHEDULES
from .points import INPUTS, NAMES, cost_table

# the result columns, in order: the kernel's (without its status) and the throughput n/makespan
RESULTS = (*batch.COLUMNS[:batch.NUM_OPS], "throughput",
           *batch.COLUMNS[batch.NUM_OPS:batch.STATUS])
COLUMNS = ("point", *INPUTS, *RESULTS)
_INTEGER = ("peak_live_max", "num_ops")
# each op's time (and act) is held to Costs' MAX_TIME before the kernel runs; what can
# still leave float64's range is a makespan so short that the throughput n / makespan is
OVERFLOW = ("costs must keep the throughput n / makespan finite (the times not subnormal)")


def _by_schedule(cols: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group the points by schedule ``(schedule, p, n, m, G)``: each point's group, and one
    point of each group. A grid's cost axes repeat every schedule many times."""
    keys = [cols[k] for k in ("schedule", "p", "n", "m", "G")]
    by_key = np.lexsort(keys[::-1])
    first = np.zeros(len(by_key), bool)  # a group's first point, in key order
    first[:1] = True
    for key in keys:
        ordered = key[by_key]
        first[1:] |= ordered[1:] != ordered[:-1]
    group = np.empty(len(by_key), np.int64)
    group[by_key] = np.cumsum(first) - 1
    return group, by_key[first]


def _reasons(cols: dict[str, np.ndarray], group: np.ndarray, one: np.ndarray) -> np.ndarray:
    """Per point, which rule of its schedule it breaks ("" for none), checked once per group."""
    sid = cols["schedule"][one]
    per_group = np.full(len(one), "", dtype=object)
    for s in np.unique(sid):
        mine = sid == s
        sel = one[mine]
        per_group[mine] = SCHEDULES[NAMES[s]].reasons(cols["p"][sel], cols["n"][sel],
                                                      cols["m"][sel], cols["G"][sel])
    return per_group[group]


def _one_element(cols: dict[str, np.ndarray], objects, reasons: np.ndarray) -> None:
    """Mark the points whose ``Costs`` holds a one-element array where neither ``p`` nor ``V``
    is 1, as ``simulate`` refuses them: the kernel stores one value and a one-element array
    alike, and had priced such an array as one value for every stage (a review)."""
    bad = [i for i, c in enumerate(objects) if 1 in c.array_lengths.values()]
    for x in np.flatnonzero((reasons == "") & np.isin(cols["costs"], bad)):
        p = int(cols["p"][x])
        reasons[x] = objects[int(cols["costs"][x])].length_reason(
            p, int(engine.stages(cols["schedule"][x], p, cols["m"][x])))


class Chunk:
    """One chunk: validated and started on construction, turned into a frame by ``result``."""

    def __init__(self, cols: dict[str, np.ndarray], objects=None, pool=None, threads: int = 1):
        self.cols = cols
        group, one = _by_schedule(cols)
        self.reasons = _reasons(cols, group, one)
        if objects is not None:
            _one_element(cols, objects, self.reasons)
        self.ran = np.flatnonzero(self.reasons == "")  # the points the kernel gets
        valid = {k: v[self.ran] for k, v in cols.items()}
        self.values, at = cost_table(valid, objects)
        self.pending = engine.start(*(valid[k] for k in INPUTS[:5]), self.values, at, pool=pool,
                                    threads=threads)

    def result(self, invalid: str):
        """The chunk's frame and the count of each skip reason."""
        import pandas as pd

        done = self.pending.result()
        cols, reasons, out, status = self.cols, self.reasons, done.out, done.status
        for i in np.flatnonzero(status != batch.OK):  # costs that do not fit the point
            x = self.ran[i]
            V = int(engine.stages(cols["schedule"][x], cols["p"][x], cols["m"][x]))
            reasons[x] = engine.status_reason(int(status[i]), int(cols["p"][x]), V,
                                              self.pending.at[i], self.values)
        # finite costs whose sums overflow (simulate refuses them: Costs' MAX_TIME): the
        # makespan, the peaks, or the p devices' time behind the bubble ratios (past it,
        # a bubble ratio came out NaN, or exactly 1); or subnormal times, whose throughput
        # n / makespan does
        ran = status == batch.OK
        sums = out[:, [batch.MAKESPAN, batch.PEAK_MAX, batch.BUBBLE, batch.SPAN_BUBBLE]]
        largest, makespan = np.finfo(np.float64).max, out[:, batch.MAKESPAN]
        over = ran & ~(np.isfinite(sums).all(axis=1)
                       & (makespan <= largest / cols["p"][self.ran])
                       & (makespan >= cols["n"][self.ran] / largest))
        reasons[self.ran[over]] = OVERFLOW
        ok = reasons == ""
        skipped = Counter(reasons[~ok].tolist())
        keep = invalid == "keep"
        rows = np.arange(len(reasons)) if keep else np.flatnonzero(ok)
        metrics = np.full((len(reasons), batch.STATUS), np.nan)
        metrics[self.ran] = out[:, :batch.STATUS]
        metrics[self.ran[over]] = np.nan  # as other points not simulated
        metrics = metrics[rows]
        data = {"point": cols["point"][rows],
                "schedule": pd.Series(NAMES[cols["schedule"][rows]], dtype=object).astype(str),
                **{k: cols[k][rows] for k in (*INPUTS[1:], "costs") if k in cols}}
        for i, name in enumerate(batch.COLUMNS[:batch.STATUS]):
            data[name] = (metrics[:, i].astype(np.int64) if name in _INTEGER and not keep
                          else metrics[:, i])
        data["throughput"] = data["n"] / data["makespan"]
        # one frame, built once, in COLUMNS's order (inserting column by column costs ~1 ms)
        frame = pd.DataFrame({k: data[k] for k in columns("costs" in cols)})
        if keep:
            frame["reason"] = reasons[rows]
        return frame, dict(skipped)


def columns(with_costs: bool) -> tuple[str, ...]:
    return COLUMNS if not with_costs else (*COLUMNS[:len(INPUTS) + 1], "costs",
                                           *COLUMNS[len(INPUTS) + 1:])


def empty_frame(invalid: str, with_costs: bool):
    import pandas as pd

    return pd.DataFrame(columns=list(columns(with_costs)) + (["reason"] if invalid == "keep"
                                                             else []))
