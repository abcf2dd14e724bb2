"""Sweep rows under ``fastpp.Noise``: each point's makespan distribution by Monte Carlo, and the
robust objectives that rank rows by it."""

from __future__ import annotations

import math

import numpy as np

from ..checks import ScheduleError, one_of, progress_bar
from ..costs import OPTIONAL, SLOTS, Costs
from ..generators.registry import SCHEDULES
from ..montecarlo import check_lam
from .points import COSTS

# the columns a noisy sweep adds: one name per quantity, as ``MonteCarlo`` names them
NOISE_COLUMNS = ("makespan_mean", "makespan_std", "makespan_p50", "makespan_p95")
OBJECTIVES = ("makespan", "mean", "p50", "p95", "mean+std")


def add_noise(frame, noise, samples: int, seed: int, objects=None):
    """``frame`` (a sweep chunk's rows) with ``NOISE_COLUMNS``: one Monte Carlo per row, the
    schedule built once per ``(schedule, p, n, m, G)`` group (common random numbers: every
    row draws the same seed)."""
    ok = np.isfinite(frame["makespan"].to_numpy(float))  # not an invalid kept row
    rows = frame[ok]
    if objects is not None and "costs" in rows:
        costs = [objects[int(k)] for k in rows["costs"]]
    else:
        costs = [Costs(**{k: v for k, v in zip(COSTS, values, strict=True)
                          if not math.isnan(v)})
                 for values in rows[list(COSTS)].itertuples(index=False)]
    some = noise_rows(*(rows[k].to_numpy() for k in ("schedule", "p", "n", "m", "G")), costs,
                      noise, samples, seed)
    out = {k: np.full(len(frame), np.nan) for k in NOISE_COLUMNS}
    for k, v in some.items():
        out[k][ok] = v
    frame = frame.copy()
    for k, v in out.items():
        frame[k] = v
    return frame


def noise_fits(noise, samples: int, plan) -> None:
    """Refuse, before any point runs, a ``noise`` that some point of ``plan`` (a sweep's
    ``GridPlan`` or ``TablePlan``) cannot take, and more ``samples`` than its widest
    pipeline's result keeps; ``noise_rows`` raised these at the first such point, after the
    Monte Carlos of every point before it (and ``check_only`` passed them). Checked once per
    ``(schedule, p, m)``, invalid points among them: a noise is refused where only points
    the schedule's rules skip would lack its device.

    Raises
    ------
    ScheduleError
        A slow device or stage, a link delay or an empirical run that does not fit, naming
        the point.
    """
    from ..batch import PLACEMENT_CODE
    from ..montecarlo import check_samples
    from ..noise import empirical_pools
    from ..placement import stage_map
    from .points import DEFAULT_M, NAMES, GridPlan

    if isinstance(plan, GridPlan):
        sid, p, m = (a.ravel() for a in np.meshgrid(plan.axes["schedule"], plan.axes["p"],
                                                    plan.axes["m"], indexing="ij"))
        m = np.where(m == 0, DEFAULT_M[sid], m)
    else:
        sid, p, m = (plan.cols[k] for k in ("schedule", "p", "m"))
    check_samples(samples, int(np.max(p)))
    triples = set(zip(sid.tolist(), p.tolist(), m.tolist(), strict=True))
    for s, devices, chunks in sorted(triples):
        stage_device = stage_map(PLACEMENT_CODE[s], devices, chunks)
        none = np.zeros(0, np.int64)
        try:
            noise._op_factors(none, none, none, np.zeros((0, 2)), devices, len(stage_device))
            noise._stage_delays(stage_device)
            if noise.empirical is not None:
                empirical_pools(noise.empirical, devices, chunks)
        except ScheduleError as e:
            raise ScheduleError(f"{e} (at schedule={NAMES[s]!r}, p={devices}, m={chunks}: "
                                f"noise must fit every point of the sweep)") from None


def objective_values(df, objective: str, lam: float, base: str = "makespan"):
    """The column to rank ``df``'s rows by (smaller is better): ``"makespan"`` (no noise: the
    deterministic ``base``), ``"mean"``, ``"p50"``, ``"p95"`` (``{base}_mean`` ...) or
    ``"mean+std"`` (``{base}_mean + lam * makespan_std``; a plan's step differs from its
    makespan by a constant, so the spread is the makespan's)."""
    one_of(objective, "objective", OBJECTIVES)
    lam = check_lam(lam)
    if objective == "makespan":
        return df[base]
    need = {"p95": [f"{base}_p95"], "p50": [f"{base}_p50"], "mean": [f"{base}_mean"],
            "mean+std": [f"{base}_mean", "makespan_std"]}[objective]
    missing = [k for k in need if k not in df]
    if missing:
        raise ScheduleError(f"objective={objective!r} needs rows with {', '.join(need)} (a "
                            f"sweep or plan run with noise=); the rows have no "
                            f"{', '.join(missing)}")
    if objective == "mean+std":
        return df[f"{base}_mean"] + lam * df["makespan_std"]
    return df[f"{base}_{objective}"]

def costs_of(values: np.ndarray, at: np.ndarray, i: int) -> Costs:
    """Point ``i``'s ``Costs`` from a kernel cost table (``engine.cost_layout``)."""
    fields: dict = {}
    for k, (name, kind) in enumerate(SLOTS):
        start, length = at[i, k]
        arr = values[start:start + length]
        value = float(arr[0]) if length == 1 else arr.copy()
        if kind is not None:
            fields.setdefault(name, {})[kind] = value
        elif not (name in OPTIONAL and np.all(np.isnan(arr))):
            fields[name] = value
    return Costs(**fields)


def noise_rows(names, p, n, m, G, costs: list, noise, samples: int, seed: int,
               refused: np.ndarray | None = None, progress: bool = False) -> dict:
    """``NOISE_COLUMNS`` for points given by arrays ``names, p, n, m, G`` and their ``Costs``
    (one Monte Carlo each, common seed; a schedule built once per group). A noise of devices,
    stages or links a point does not have raises, naming the point; with ``refused`` (an
    object array, one string a point) it is written there instead, the point's columns NaN.
    With ``progress``, a bar past a second (a plan's Monte Carlos ran 55 s without a word)."""
    from ..generators.registry import build_schedule
    from ..montecarlo import check_samples, run

    if len(costs):  # too many samples for the widest pipeline: the samples' fault, said so
        check_samples(samples, int(np.max(p)))
    out = {k: np.full(len(costs), np.nan) for k in NOISE_COLUMNS}
    built: dict[tuple, object] = {}
    bar = progress_bar(len(costs), progress, unit="config", desc="Monte Carlo", delay=1.0,
                       leave=False)
    for i, c in enumerate(costs):
        bar.update(1)
        key = (str(names[i]), int(p[i]), int(n[i]), int(m[i]), int(G[i]))
        if key not in built:
            options = {"G": key[4]} if "G" in SCHEDULES[key[0]].options else {}
            built[key] = build_schedule(key[0], key[1], key[2], m=key[3], **options)
        try:
            mc = run(built[key], c, noise, samples, seed)
        except ScheduleError as e:  # a noise of devices or links some points do not have
            if refused is None:
                raise ScheduleError(f"{e} (at schedule={key[0]!r}, p={key[1]}, n={key[2]}, "
                                    f"m={key[3]})") from None
            refused[i] = f"noise does not fit it: {e}"
            continue
        out["makespan_mean"][i], out["makespan_std"][i] = mc.mean, mc.std
        out["makespan_p50"][i], out["makespan_p95"][i] = mc.quantile([0.5, 0.95])
    bar.close()
    return out
