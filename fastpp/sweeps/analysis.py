"""What a sweep's table answers: the Pareto front and the best schedule within a budget."""

from __future__ import annotations

import math

import numpy as np

from ..checks import (
    ScheduleError,
    ScheduleTypeError,
    dataframe,
    flag,
    known_keywords,
    listed,
    number,
)
from ..costs import FIELDS
from ..generators.registry import MEMORY_REFERENCE, SCHEDULES
from ..montecarlo import check_lam
from .robust import objective_values

INFERENCE = tuple(name for name, spec in SCHEDULES.items() if spec.forward_only)


def _numeric(df, columns) -> None:
    """Refuse a column to be ranked by that is no number (text ranked alphabetically: '33.0'
    before '9.0'), or a label ``df`` holds twice."""
    for col in columns:
        if list(df.columns).count(col) > 1:
            raise ScheduleError(f"df must hold column {col!r} once (got it "
                                f"{list(df.columns).count(col)} times)")
        kind = df[col].dtype
        if kind.kind not in "iuf":
            raise ScheduleTypeError(f"df's column {col!r} must hold numbers to be ranked by "
                                    f"(got dtype {kind})")


def _training(df, inference: bool):
    """``df`` without inference-only schedules, unless ``inference``: a forward-only row has
    no backward, so it is not a way to train and would head every ranking."""
    if inference or "schedule" not in df:  # any table of points may be ranked
        return df
    return df[~df["schedule"].isin(INFERENCE)]


@known_keywords("pareto_front")
def pareto_front(df, x: str = "peak_activations_max", y: str = "bubble_ratio", *,
                 inference: bool = False):
    """Rows of ``df`` not dominated in ``(x, y)`` (smaller is better in both), sorted by ``x``;
    rows without both (points kept unsimulated by ``invalid="keep"``) are not on it.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep's table.
    x, y : str
        The two columns to minimize.
    inference : bool
        Keep inference-only schedules (``forward-only``); left out by default.

    Returns
    -------
    pandas.DataFrame
    """
    dataframe(df, "df", {"x": x, "y": y})
    _numeric(df, (x, y))
    ordered = _training(df, flag(inference, "inference")).dropna(subset=[x, y]).sort_values(
        [x, y], kind="stable")
    if ordered.empty:  # np.r_[True, ...] below needs a first row
        return ordered
    values = ordered[y].to_numpy()
    keep = np.r_[True, values[1:] < np.minimum.accumulate(values)[:-1]]
    return ordered[keep]


def _one_cost_setting(data, by: list) -> None:
    """Refuse groups of ``by`` whose rows were priced under different costs: the fastest of
    them would be the cheapest setting's row, not the best schedule (a sweep over three
    latencies ranked per ``(p, n)`` had named the zero-latency row's schedule, a review)."""
    for col in (*FIELDS, "costs"):
        if col not in data or col in by or data.empty:
            continue
        values = data[col]
        if values.dtype.kind not in "biuf":  # (per-device costs are sequences: no hash)
            values = values.map(repr)
        varied = values.groupby([data[k] for k in by], sort=True).nunique(dropna=False)
        if (varied > 1).any():
            held = sorted(set(values.map(repr)))
            raise ScheduleError(f"df's {col} must be one value per group of by={by} (got "
                                f"{len(held)} values, e.g. {', '.join(held[:3])}): add {col!r} "
                                f"to by, or pick one of its values first")


@known_keywords("best_within_budget")
def best_within_budget(df, budget=MEMORY_REFERENCE, by=("p", "n"), *, inference: bool = False,
                       objective: str = "makespan", lam: float = 1.0):
    """Per group of ``by``, the fastest row whose peak activation memory fits the budget.

    Parameters
    ----------
    df : pandas.DataFrame
        A sweep's table.
    budget : str or float
        A schedule name of ``df`` (its peak in the same group is the budget; default
        ``"1f1b"``, the registry's ``memory_reference``), or a number of activation units
        (``math.inf``: no limit).
    by : tuple of str
        The columns that make a group. Its rows must share one cost setting: a cost column
        (``f``, ``comm``, ..., ``costs``) that varies within a group must be among ``by``, or
        one of its values picked first.
    inference : bool
        Keep inference-only schedules (``forward-only``); left out by default.
    objective : {"makespan", "mean", "p50", "p95", "mean+std"}
        What "fastest" means: the deterministic ``makespan``, or, for rows of a sweep run
        with ``noise=``, the noisy makespan's mean, median, 95th percentile, or
        ``makespan_mean + lam * makespan_std``. Ties go to the smaller ``makespan``, then the
        smaller peak.
    lam : float, default 1
        The weight of the standard deviation in ``"mean+std"``, in [0, 1e6].

    Returns
    -------
    pandas.DataFrame
        One row per group with the best point and a ``budget`` column; groups where nothing
        fits are left out.

    Raises
    ------
    ScheduleError
        If ``df`` lacks a column, ``by`` is not a list of column names, a group of ``by``
        holds several cost settings, or ``budget`` is neither a number nor a schedule of
        ``df``.
    """
    by = [by] if isinstance(by, str) else by
    if not isinstance(by, list | tuple) or not by:
        raise ScheduleTypeError(f"by must be a non-empty list of column names (got {by!r})")
    by = list(by)
    for col in by:
        dataframe(df, "df", {"by": col})
    dataframe(df, "df", ("peak_activations_max", "makespan"))
    _numeric(df, ("peak_activations_max", "makespan"))
    # (a table this function made holds its budget: the new one takes its place)
    data = _training(df, flag(inference, "inference")).drop(columns="budget", errors="ignore")
    _one_cost_setting(data, by)
    if isinstance(budget, str):
        dataframe(df, "df", {"budget": "schedule"})
        names = sorted(set(data["schedule"]))
        if budget not in names and not data.empty:  # else every group would be left out
            raise ScheduleError(f"budget must be a number or a schedule of df, one of "
                                f"{listed(names)} (got {budget!r})")
        ref = data[data["schedule"] == budget].groupby(by)["peak_activations_max"].min()
        data = data.join(ref.rename("budget"), on=by)
    elif isinstance(budget, float | np.floating) and budget == math.inf:
        data["budget"] = math.inf  # (NumPy's inf too: np.float32's was "not finite")
    else:
        data["budget"] = number(budget, "budget")
    if objective != "makespan" or check_lam(lam) != 1.0:
        data["_objective"] = objective_values(data, objective, lam)
    fits = data[data["peak_activations_max"] <= data["budget"] + 1e-12]
    keys = ["makespan", "peak_activations_max"]
    if "_objective" in data:
        keys = ["_objective", *keys]
    best = fits.sort_values(keys, kind="stable").drop(columns="_objective", errors="ignore")
    return best.groupby(by, sort=True).head(1).sort_values(by).reset_index(drop=True)
