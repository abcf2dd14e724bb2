"""``whatif(job)``: the what-if analysis of stragglers (Lin et al., OSDI'25, section 4).

Every figure is a replay of the job's steps (``MeasuredJob.replay``) under other op times:

- the *replayed* step: every op at its measured time (launch delays, the host's gaps between
  an op's inputs and its start, are left out, as in the paper);
- the *ideal* step: every op at the typical time of its type over the whole job, the mean for
  computes and the median for communication, so that no rank, stage or step is slower than
  another;
- the slowdown ``S`` (Eq. 1): the mean replayed step over the mean ideal step;
- its attribution to a group of ops (a DP rank, a stage, an op type; Eq. 2 and 4): the mean
  step of the ideal with that group's ops at their measured times, over the mean ideal step;
- ``M_S`` (stage partitioning imbalance): the share of ``S - 1`` removed when the last stage's
  ops take their ideal times; ``M_W`` (individual workers, Eq. 5): the same for the worst 3% of
  ranks, a rank scored by the smaller of its DP rank's and its stage's attribution.

All the variants of a pass are columns of one batch: one flat pass over the graph.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ..checks import ScheduleError, ScheduleTypeError, instance, known_keywords
from .job import COMM_OPTYPES, MeasuredJob, pd

WORST_RANKS = 0.03  # M_W's share of ranks (the artifact's RATIO = 3 %)
TIE = 1e-9  # slowdowns this close (relative) are equal: a replay's rounding is about 1e-15
_PP_COMM = {"forward-send": "forward-pp-comm", "forward-recv": "forward-pp-comm",
            "backward-send": "backward-pp-comm", "backward-recv": "backward-pp-comm"}


@dataclass(frozen=True, eq=False)
class WhatIf:
    """What the stragglers of a job cost (``fastpp.whatif``).

    Attributes
    ----------
    slowdown : float
        ``S``: mean replayed step over mean ideal step.
    by_dp_rank, by_stage, by_op : dict
        The slowdown each DP rank, stage or op type alone causes (1: none); sends and receives
        count as ``forward-pp-comm`` and ``backward-pp-comm``.
    ms, mw : float
        ``M_S`` and ``M_W``: the share of ``S - 1`` that the last stage's ops, and the worst
        3% of ranks' ops, explain (the removal estimate); 0 where ``S`` is exactly 1.
    worst_ranks : list of int
        The ranks ``mw`` puts back to their ideal.
    steps : DataFrame
        Per step: ``step``, ``measured`` (the trace's step time), ``replayed``, ``ideal``,
        ``slowdown`` (replayed / ideal).
    by_dp_rank_per_step, by_stage_per_step, by_op_per_step : DataFrame
        Per step (rows) and group (columns): the group's attribution in that step.
    """

    slowdown: float
    by_dp_rank: dict
    by_stage: dict
    by_op: dict
    ms: float
    mw: float
    worst_ranks: list
    steps: pd.DataFrame
    by_dp_rank_per_step: pd.DataFrame
    by_stage_per_step: pd.DataFrame
    by_op_per_step: pd.DataFrame

    def __repr__(self) -> str:
        return (f"WhatIf(slowdown={self.slowdown:.4f}, ms={self.ms:.4f}, mw={self.mw:.4f}, "
                f"steps={len(self.steps)})")


@known_keywords("whatif")
def whatif(job: MeasuredJob) -> WhatIf:
    """The what-if analysis of a measured job (module docstring).

    Parameters
    ----------
    job : MeasuredJob
        From ``fastpp.read_op_table``.

    Returns
    -------
    WhatIf

    Raises
    ------
    ScheduleError
        If ``job`` is not a ``MeasuredJob`` (a ``ScheduleTypeError``), or every op's typical
        time is 0.
    """
    if isinstance(job, str | os.PathLike):  # (its file, not the job read from it)
        raise ScheduleTypeError(f"job must be a fastpp.MeasuredJob: read the op table first, "
                                f"fastpp.read_op_table({str(job)!r}) (got a path)")
    instance(job, MeasuredJob, "job", "fastpp.MeasuredJob")
    measured, ideal = job.durations, _ideal(job)
    ops = job.ops
    groups = {"dp_rank": ops.dp_rank.to_numpy(), "stage": ops.stage.to_numpy(),
              "op": ops.optype.map(lambda k: _PP_COMM.get(k, k)).to_numpy()}
    last_stage = groups["stage"] == job.pp - 1
    variants = [("replayed", np.ones(len(ops), bool)), ("ideal", np.zeros(len(ops), bool))]
    for name, labels in groups.items():
        variants += [((name, label), labels == label) for label in _labels(labels)]
    # M_S's removal: the measured step with the last stage's ops at their ideal times
    times = _run(job, ideal, measured, variants)
    remove = _run(job, measured, ideal, [("ms", last_stage)])["ms"]
    t_real, t_ideal = times["replayed"], times["ideal"]
    mean_ideal = t_ideal.mean()
    if mean_ideal == 0.0:
        raise ScheduleError("job must have ops that take time: every op's typical time (the "
                            "ideal step's) is 0, so no step has a slowdown")
    decompose, per_step = {}, {}
    for name, labels in groups.items():
        decompose[name] = {_key(label): float(times[(name, label)].mean() / mean_ideal)
                           for label in _labels(labels)}
        per_step[name] = pd.DataFrame({_key(label): times[(name, label)] / t_ideal
                                       for label in _labels(labels)}, index=job.steps)
        per_step[name].index.name = "step"
    worst = _worst_ranks(job, decompose)
    mask = ops["rank"].isin(worst).to_numpy()
    remove_w = _run(job, measured, ideal, [("mw", mask)])["mw"]
    gap = t_real.mean() - mean_ideal
    # S = 1 (but for rounding: the replay's sums in another order): nothing to explain, and
    # nothing explained
    ms, mw = (float((t_real.mean() - x.mean()) / gap) if abs(gap) > TIE * mean_ideal else 0.0
              for x in (remove, remove_w))
    steps = pd.DataFrame({"step": job.steps, "measured": job.step_time, "replayed": t_real,
                          "ideal": t_ideal, "slowdown": t_real / t_ideal})
    return WhatIf(float(t_real.mean() / mean_ideal), decompose["dp_rank"], decompose["stage"],
                  decompose["op"], ms, mw, worst, steps,
                  per_step["dp_rank"], per_step["stage"], per_step["op"])


def _ideal(job: MeasuredJob) -> np.ndarray:
    """Every op at its type's typical time over the job: median for communication, mean
    for computes."""
    out = np.empty_like(job.durations)
    for kind, rows in job.ops.groupby("optype").groups.items():
        values = job.durations[rows]
        out[rows] = np.median(values) if kind in COMM_OPTYPES else values.mean()
    return out


def _run(job: MeasuredJob, base: np.ndarray, other: np.ndarray, variants) -> dict:
    """Step times of each variant ``(name, mask)``: ``other``'s times on the masked ops and
    ``base``'s elsewhere; all variants and steps in one replay."""
    S = base.shape[1]
    batch = np.concatenate([np.where(mask[:, None], other, base) for _, mask in variants], axis=1)
    times = job.replay(batch)
    return {name: times[i * S:(i + 1) * S] for i, (name, _) in enumerate(variants)}


def _worst_ranks(job: MeasuredJob, decompose: dict) -> list:
    """The ``ceil(3% of ranks)`` ranks with the largest ``min(DP rank's, stage's)`` slowdown
    (ties: the lower rank)."""
    ranks = job.ops.drop_duplicates("rank")
    # (to TIE: scores equal but for rounding tie)
    score = [round(min(decompose["dp_rank"][int(d)], decompose["stage"][int(s)]) / TIE)
             for d, s in zip(ranks.dp_rank, ranks.stage, strict=True)]
    order = sorted(zip(score, ranks["rank"], strict=True), key=lambda x: (-x[0], x[1]))
    count = math.ceil(len(order) * WORST_RANKS)
    return [int(r) for _, r in order[:count]]


def _labels(labels: np.ndarray) -> list:
    return sorted(set(labels.tolist()), key=str)


def _key(label):
    return int(label) if isinstance(label, int | np.integer) else str(label)


WhatIf.__init__ = known_keywords("WhatIf")(WhatIf.__init__)
