"""What fastpp predicts for a measured run: the makespans ``measure`` prints beside the
measured one."""

from __future__ import annotations

from ..simulate import simulate


def predictions(run, costs_from=None) -> dict[str, float]:
    """The makespans fastpp gives a measured run, in seconds, by how they were made.

    Parameters
    ----------
    run : fastpp.MeasuredRun
        A run read back from its traces (``measure`` or ``read_torch_trace``).
    costs_from : path or fastpp.MeasuredRun, optional
        Another run (its traces' folder, or the run) whose calibrated costs also predict this
        one: another schedule's run predicting this schedule (its ``Costs.overhead`` keeps
        each op's fixed part whole at this run's chunk count).

    Returns
    -------
    dict of str to float
        ``"replayed"`` (each op's measured time, through the engine), ``"predicted"`` (this
        run's median costs per device) and, with ``costs_from``, ``"predicted from"`` that
        run's costs.
    """
    from .run import MeasuredRun, read_torch_trace

    out = {"replayed": run.replay().makespan,
           "predicted": simulate(run.schedule, run.costs()).makespan}
    if costs_from is not None:
        other = costs_from if isinstance(costs_from, MeasuredRun) else read_torch_trace(
            costs_from)
        out["predicted from"] = simulate(run.schedule, other.costs()).makespan
    return out
