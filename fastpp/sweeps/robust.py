"""Sweep rows under ``fastpp.Noise``: each point's makespan distribution by Monte Carlo, and the
robust objectives that rank rows by it."""

from __future__ import annotations

import math

import numpy as np

from ..checks import ScheduleError, ScheduleTypeError, number, one_of, positive_int
from ..costs import Costs
from ..generators.registry import SCHEDULES
from .points import COSTS

# the columns a noisy sweep adds: one name per quantity, as ``MonteCarlo`` names them
NOISE_COLUMNS = ("makespan_mean", "makespan_std", "makespan_p50", "makespan_p95")
OBJECTIVES = ("makespan", "mean", "p50", "p95", "mean+std")
DEFAULT_SAMPLES = 64  # enough for a p95 of a few percent; small enough for quick sweeps


def check_noise(noise, samples, seed) -> tuple[int, int]:
    """Validate ``noise=``'s companions; the samples and the seed."""
    from ..noise import Noise

    if not isinstance(noise, Noise):
        raise ScheduleTypeError(f"noise must be a fastpp.Noise (got {type(noise).__name__})")
    samples = positive_int(samples, "samples")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**64:
        raise ScheduleError(f"seed must be an integer in [0, 2**64) (got {seed!r})")
    return samples, int(seed)


def add_noise(frame, noise, samples: int, seed: int, objects=None):
    """``frame`` (a sweep chunk's rows) with ``NOISE_COLUMNS``: one Monte Carlo per row, the
    schedule built once per ``(schedule, p, n, m, G)`` group (common random numbers: every
    row draws the same seed)."""
    from .. import build_schedule
    from ..montecarlo import run

    out = {k: np.full(len(frame), np.nan) for k in NOISE_COLUMNS}
    built: dict[tuple, object] = {}
    for i, row in enumerate(frame.itertuples(index=False)):
        if not math.isfinite(getattr(row, "makespan", math.nan)):  # an invalid kept row
            continue
        key = (row.schedule, int(row.p), int(row.n), int(row.m), int(row.G))
        if key not in built:
            spec = SCHEDULES[row.schedule]
            options = {"G": key[4]} if "G" in spec.options else {}
            built[key] = build_schedule(row.schedule, key[1], key[2], m=key[3], **options)
        if objects is not None and "costs" in frame:
            costs = objects[int(row.costs)]
        else:
            costs = Costs(**{k: getattr(row, k) for k in COSTS
                             if not math.isnan(getattr(row, k))})
        mc = run(built[key], costs, noise, samples, seed)
        out["makespan_mean"][i], out["makespan_std"][i] = mc.mean, mc.std
        out["makespan_p50"][i], out["makespan_p95"][i] = mc.quantile([0.5, 0.95])
    frame = frame.copy()
    for k, v in out.items():
        frame[k] = v
    return frame


def objective_values(df, objective: str, lam: float):
    """The column to rank ``df``'s rows by (smaller is better): ``"makespan"`` (no noise),
    ``"mean"``, ``"p50"``, ``"p95"`` or ``"mean+std"`` (``makespan_mean + lam *
    makespan_std``)."""
    one_of(objective, "objective", OBJECTIVES)
    lam = number(lam, "lam")
    if objective == "makespan":
        return df["makespan"]
    need = "makespan_p95" if objective == "p95" else "makespan_mean"
    if need not in df:
        raise ScheduleError(f"objective={objective!r} needs rows with {need} (a sweep or plan "
                            f"run with noise=); the rows have none")
    if objective == "mean+std":
        return df["makespan_mean"] + lam * df["makespan_std"]
    return df[{"mean": "makespan_mean", "p50": "makespan_p50", "p95": "makespan_p95"}[
        objective]]
