"""An interactive report in one self-contained HTML file: a sweep's heat maps, Pareto fronts
and timelines, a plan's table and scatter, a frontier, a measured run against its simulations,
Monte Carlo results' distributions and criticality (``fastpp.report``; ``python -m fastpp
report PATH...``). Needs plotly (the ``report`` extra), whose JavaScript is inlined once, so
the file opens offline."""

from __future__ import annotations

import os
from pathlib import Path

from ..checks import ScheduleError, ScheduleTypeError, expanded, known_keywords, one_of, require
from ..generators.registry import SCHEDULES
from . import figures, page
from .inputs import load
from .timeline import KINDS

KIND_NAMES = {"montecarlo": "Monte Carlo"}  # each input's kind as the page's subtitle says it
BUILDERS = {"sweep": figures.sweep_sections, "plan": figures.plan_sections,
            "frontier": figures.frontier_sections, "measured": figures.measured_sections,
            "montecarlo": figures.variability_sections}


@known_keywords("report")
def report(*inputs, output="report.html", schedules=None, budget=None, setting=None) -> Path:
    """Write an interactive HTML report of sweeps, plans, frontiers and measured runs.

    Parameters
    ----------
    *inputs : path, pandas.DataFrame, MeasuredRun, MonteCarlo or dict
        Each a sweep (its ``out`` folder, its table as Parquet or CSV, or its DataFrame), a
        plan's table (``fastpp.model.plan``), a frontier's table (``scripts/frontier.py``), a
        measured run (a folder of ``rank{r}_trace.json``, or a ``MeasuredRun``), or Monte Carlo
        results (``simulate(..., noise=)``: one, or a dict of them by label). The kind is
        told from the columns (or the folder's contents). The Monte Carlo results of all the
        inputs share one section: their distributions on one axis.
    output : path
        The HTML file to write.
    schedules : list of str, optional
        Registered schedules whose timelines a sweep's report also shows at every ``(p, n)``,
        and that its side-by-side view is limited to.
    budget : str or float, optional
        A sweep's memory budget for its fastest schedules, as ``best_within_budget`` takes it
        (a schedule whose peak sets it, or units of activation memory; default 1F1B's peak,
        or none without 1F1B): the main job's ``--budget``.
    setting : dict, optional
        A sweep's cost setting to show, ``{column: value}`` (``{"comm": 0.2}``, the main
        job's ``--summary-comm``); a cost column it does not name at its middle value.

    Returns
    -------
    Path

    Raises
    ------
    ScheduleError
        If an input cannot be read, is an empty table or a table of an unknown kind (the
        message names the input and what was expected), a schedule is not registered, or
        ``setting`` names a cost column or value a sweep does not have.
    MissingExtraError
        If plotly is not installed (``pip install 'fastpp[report]'``); also an ImportError.
    """
    if not inputs:
        raise ScheduleError("inputs must be at least one path, table, measured run or Monte "
                            "Carlo result (got none)")
    if setting is not None and not isinstance(setting, dict):
        raise ScheduleTypeError(f"setting must be a dict of a cost column's value, such as "
                                f"{{'comm': 0.2}} (got {setting!r})")
    if isinstance(schedules, str):
        schedules = [schedules]
    if schedules is not None:
        if not isinstance(schedules, (list, tuple)):
            raise ScheduleTypeError(f"schedules must be a list of schedule names (got "
                                    f"{type(schedules).__name__})")
        for name in schedules:
            one_of(name, "schedules", list(SCHEDULES))
    if not isinstance(output, (str, Path)):
        raise ScheduleTypeError(f"output must be a path (got {type(output).__name__})")
    get_plotlyjs = require("plotly.offline", "report", "fastpp.report", "plotly").get_plotlyjs
    path = expanded(output, "output")  # (as a sweep's out: a literal ./~ folder had taken it)
    if not str(output) or not path.parent.is_dir() or path.is_dir():  # ('' reads as '.')
        raise ScheduleError(f"output must be a file in an existing folder (got "
                            f"{str(output)!r})")
    for i, item in enumerate(inputs):  # (the report had replaced its own input with HTML)
        if isinstance(item, str | os.PathLike) and path.resolve().is_relative_to(
                expanded(item, f"inputs[{i}]").resolve()):
            raise ScheduleError(f"output must be neither an input nor inside one (got "
                                f"{str(path)!r}, inputs[{i}] {str(item)!r})")
    loaded = [load(item, i) for i, item in enumerate(inputs)]
    results = [pair for kind, _, data in loaded if kind == "montecarlo" for pair in data]
    labels = [name for name, _ in results]
    for name in labels:  # (a CDF and a drop-down by label: two alike cannot be told apart)
        if labels.count(name) > 1:
            raise ScheduleError(f"inputs must label each Monte Carlo result once (got {name!r} "
                                f"{labels.count(name)} times: pass a dict of them by label)")
    swept = {name for kind, _, data in loaded if kind == "sweep" for name in data["schedule"]}
    missing = sorted(set(schedules or ()) - swept) if swept else []
    if missing:  # (a name no sweep holds had its section left out, unsaid)
        raise ScheduleError(f"schedules must be schedules of the sweeps, among {sorted(swept)} "
                            f"(got {missing})")
    sections, varied = [], False
    for kind, label, data in loaded:
        builder = BUILDERS[kind]
        if kind == "montecarlo":  # all of them in one section, at the first one's place
            if not varied:
                sections += builder(results, f"{len(results)} Monte Carlo result"
                                             f"{'s' if len(results) > 1 else ''}")
                varied = True
        else:
            sections += (builder(data, label, schedules, budget, setting) if kind == "sweep"
                         else builder(data, label))
    described = ", ".join(f"{KIND_NAMES.get(kind, kind)} {label}" for kind, label, _ in loaded)
    try:
        page.write(path, "fastpp report", described, {"kinds": KINDS, "sections": sections},
                   get_plotlyjs())
    except OSError as err:
        raise ScheduleError(f"output must be a writable file (got {str(path)!r}: "
                            f"{err.strerror})") from err
    except ValueError as err:  # json's: a number the page cannot hold; nothing was written
        raise ScheduleError(f"inputs must hold finite numbers where the report draws them "
                            f"({described}: {err})") from None
    return path


def write_report(what, path, **keywords) -> None:
    """Write ``report(what, output=path)`` and say where, or say why not without plotly: the
    scripts' and the command line's last step (the main job imports this module, not the
    command line's, which imports the model's vocabularies)."""
    try:
        print(f"report: {report(what, output=path, **keywords)}")
    except ImportError as err:
        print(f"no report ({err})")


__all__ = ["report"]
