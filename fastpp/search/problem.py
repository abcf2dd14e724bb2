"""One schedule-search instance: placement, per-stage arrays, memory limits, checks.

SEARCH.md section 1 states the problem: choose every device's op order (``F``, ``I``, ``W`` for
every stage and microbatch) so that the schedule, run as ``simulate`` runs it, minimizes the
objective and never holds more activation memory than the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..costs import Costs
from ..generators._emit import LOOP, VSHAPE, new_ops, placement
from ..ops import PAD, F, I, W
from ..schedule import Schedule, ScheduleError, positive_int
from ..simulate import Result, simulate

PLACEMENTS = {"loop": (LOOP, 1), "v": (VSHAPE, 2)}  # name -> (placement kind, m)
OBJECTIVES = ("makespan", "span")
# Memory is compared with this relative slack: the engine's running sums of (1-gamma)*unit and
# gamma*unit differ from exact arithmetic by a few ulps, real differences by far more.
MEMORY_RTOL = 1e-9


def objective_value(result: Result, objective: str) -> float:
    """``makespan``: last end minus first start; ``span``: the largest per-device span."""
    return result.makespan if objective == "makespan" else float(result.span.max())


@dataclass(frozen=True, eq=False)
class Problem:
    """A validated search instance and the arrays the search kernels read.

    ``cost[k, s]`` and ``memd[k, s]`` (rows ``F, I, W``) are the op times and memory changes of
    virtual stage ``s``, ``comm[s]`` its hand-off to ``s+1``, ``limit[r]`` device ``r``'s memory
    limit (``inf``: none) and ``cap[r]`` the same with the comparison slack.
    """

    p: int
    n: int
    m: int
    placement: str
    objective: str
    costs: Costs
    stage_to_device: np.ndarray
    cost: np.ndarray
    memd: np.ndarray
    comm: np.ndarray
    limit: np.ndarray
    cap: np.ndarray

    @classmethod
    def build(cls, p, n, costs, memory, placement_name, objective) -> Problem:
        p, n = positive_int(p, "p"), positive_int(n, "n")
        if placement_name not in PLACEMENTS:
            raise ScheduleError(f"placement must be one of {list(PLACEMENTS)} "
                                f"(got {placement_name!r})")
        if objective not in OBJECTIVES:
            raise ScheduleError(f"objective must be one of {list(OBJECTIVES)} (got {objective!r})")
        costs = Costs(1.0, 2.0) if costs is None else costs
        if not isinstance(costs, Costs):
            raise ScheduleError(f"costs must be a fastpp.Costs (got {type(costs).__name__})")
        kind, m = PLACEMENTS[placement_name]
        template = sequential(p, n, kind, m)
        c = costs.per_stage(template)
        cost = np.stack([c.tf, c.tb - c.tw, c.tw])
        memd = np.stack([c.unit, -((1.0 - c.gamma) * c.unit), -(c.gamma * c.unit)])
        limit = _memory_limit(memory, p)
        # a device must hold one microbatch's forward through all of its stages
        need = np.bincount(template.stage_to_device, weights=c.unit, minlength=p)
        short = np.flatnonzero(limit * (1 + MEMORY_RTOL) < need)
        if short.size:
            r = int(short[0])
            raise ScheduleError(
                f"memory must be at least {need.max():.6g} on every device: the smallest limit "
                f"under which any '{placement_name}' schedule fits (device {r} needs "
                f"{need[r]:.6g}, got memory={limit[r]:.6g})")
        return cls(p, n, m, placement_name, objective, costs, template.stage_to_device, cost,
                   memd, np.ascontiguousarray(c.comm), limit, limit * (1 + MEMORY_RTOL))

    @property
    def V(self) -> int:
        return self.p * self.m

    def schedule(self, ops: np.ndarray, length: np.ndarray, name: str) -> Schedule:
        """A ``Schedule`` of this placement from a search kernel's op block."""
        width = max(1, int(length.max()))
        return Schedule(ops[:, :, :width], length, self.stage_to_device, n=self.n, m=self.m,
                        name=name)

    def evaluate(self, schedule: Schedule) -> tuple[Result, float] | None:
        """Simulate ``schedule``; its result and objective value, or ``None`` if it breaks the
        memory limit."""
        result = simulate(schedule, self.costs)
        if np.any(result.peak_activations > self.cap):
            return None
        return result, objective_value(result, self.objective)

    def fixed_schedules(self) -> list[str]:
        """The registered schedules of this placement that split the backward."""
        return ["zb-h1", "zb-h2"] if self.placement == "loop" else ["zbv", "v-half", "v-min"]


def _memory_limit(memory, p: int) -> np.ndarray:
    if memory is None:
        return np.full(p, np.inf)
    try:
        arr = np.array(memory, dtype=np.float64)
    except (TypeError, ValueError):
        raise ScheduleError(f"memory must be a number or an array of {p} numbers "
                            f"(got {memory!r})") from None
    if arr.ndim == 0:
        arr = np.full(p, float(arr))
    if arr.shape != (p,) or np.any(~(arr > 0)) or np.any(np.isnan(arr)):
        raise ScheduleError(f"memory must be > 0, as a number or an array of p={p} numbers "
                            f"(got {np.asarray(memory).tolist()!r})")
    return arr


def sequential(p: int, n: int, kind: int, m: int) -> Schedule:
    """One microbatch at a time: its forwards down the pipeline, then each stage's ``I`` and
    ``W`` back up. The least memory any schedule of the placement needs, so it always fits."""
    stage_device = placement(kind, p, m)
    V = p * m
    ops = new_ops(p, n, m)
    length = np.zeros(p, np.int64)
    for j in range(n):
        for s in range(V):
            r = stage_device[s]
            ops[:3, r, length[r]] = (F, s, j)
            length[r] += 1
        for s in range(V - 1, -1, -1):
            r = stage_device[s]
            ops[:3, r, length[r]] = (I, s, j)
            ops[:3, r, length[r] + 1] = (W, s, j)
            length[r] += 2
    assert np.all(ops[0, :, length.max():] == PAD)
    return Schedule(ops[:, :, : length.max()], length, stage_device, n=n, m=m,
                    name="sequential")
