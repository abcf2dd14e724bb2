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
        predicting this schedule, each of its stages priced by the layers it holds
        (``MeasuredRun.costs(schedule=run.schedule)``; ``Costs.overhead`` keeps each op's
        fixed part whole at this run's chunk count).
    link_delay : float or tuple, optional
        ``(seconds, r1, r2)``, or seconds on the middle link, as ``measure`` takes it: the
        sleep ``measure``'s ``link_delay`` put before each send between ranks ``r1`` and
        ``r2``. This run's costs hold it (its ``send``, the time
        from an op's end to its output's hand-off), another run's do not: the prediction
        ``from`` it prices the sleep (``Noise(link_delay=..., blocking=True)`` without
        jitter) at ``seconds`` as given: a sleep wakes late, and ``run.injected`` holds how
        long this run's took (``python -m fastpp measure`` passes their mean). Until 7
        December 2026 this run's own prediction priced it a second time.

    Returns
    -------
    dict of str to float
        ``"replayed"`` (each op's measured time, through the engine), ``"predicted"`` (this
        run's median costs per device) and, with ``costs_from``, ``"predicted from"`` that
        run's costs.
    """
    from ..checks import instance
    from .run import MeasuredRun, read_torch_trace
    from .runner import link_of
    from .steps import MeasuredSteps

    # (a path gave an AttributeError, and measure's own link_delay=0.05 a TypeError)
    instance(run, MeasuredRun, "run", "fastpp.MeasuredRun")
    link_delay = link_of(link_delay, run.p)
    out = {"replayed": run.replay().makespan,
           "predicted": simulate(run.schedule, run.costs()).makespan}
    if costs_from is not None:
        other = costs_from if isinstance(costs_from, MeasuredRun | MeasuredSteps) else \
            read_torch_trace(costs_from)
        costs = other.costs(schedule=run.schedule)  # by the layers this run's stages hold
        if link_delay is None:
            out["predicted from"] = simulate(run.schedule, costs).makespan
        else:
            seconds, r1, r2 = link_delay
            held = Noise(0.0, link_delay={(r1, r2): seconds}, blocking=True)
            out["predicted from"] = float(simulate(run.schedule, costs, noise=held,
                                                   samples=1).quantile(0.5))
    return out
