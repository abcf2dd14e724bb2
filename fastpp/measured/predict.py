"""What fastpp predicts for a measured run: the makespans ``measure`` prints beside the
measured one."""

from __future__ import annotations

from ..noise import Noise
from ..simulate import simulate


def predictions(run, costs_from=None, link_delay=None) -> dict[str, float]:
    """The makespans fastpp gives a measured run, in seconds, by how they were made.

    Parameters
    ----------
    run : fastpp.MeasuredRun
        A run read back from its traces (``measure`` or ``read_torch_trace``).
    costs_from : path, fastpp.MeasuredRun or fastpp.MeasuredSteps, optional
        Another run (its traces' folder, or the run; or its steps, whose costs are their
        median) whose calibrated costs also predict this one: another schedule's run
        predicting this schedule (its ``Costs.overhead`` keeps each op's fixed part whole at
        this run's chunk count).
    link_delay : tuple, optional
        ``(seconds, r1, r2)``: the sleep ``measure``'s ``link_delay`` put before each send
        between ranks ``r1`` and ``r2``, which no op's time holds: the predictions price it
        (``Noise(link_delay=..., blocking=True)`` without jitter). The replay does not.

    Returns
    -------
    dict of str to float
        ``"replayed"`` (each op's measured time, through the engine), ``"predicted"`` (this
        run's median costs per device) and, with ``costs_from``, ``"predicted from"`` that
        run's costs.
    """
    from .run import MeasuredRun, read_torch_trace
    from .steps import MeasuredSteps

    def priced(costs):
        if link_delay is None:
            return simulate(run.schedule, costs).makespan
        seconds, r1, r2 = link_delay
        held = Noise(0.0, link_delay={(r1, r2): seconds}, blocking=True)
        return float(simulate(run.schedule, costs, noise=held, samples=1).quantile(0.5))

    out = {"replayed": run.replay().makespan, "predicted": priced(run.costs())}
    if costs_from is not None:
        other = costs_from if isinstance(costs_from, MeasuredRun | MeasuredSteps) else \
            read_torch_trace(costs_from)
        out["predicted from"] = priced(other.costs())
    return out
