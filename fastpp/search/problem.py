"""One schedule-search instance: placement, per-stage arrays, memory limits, checks.

SEARCH.md section 1 states the problem: choose every device's op order (``F``, ``I``, ``W`` for
every stage and microbatch) so that the schedule, run as ``simulate`` runs it, minimizes the
objective and never holds more activation memory than the limit.

The search kernels (``zb_greedy``, ``v_greedy``, ``list_scheduler``) take ``Problem``'s arrays,
per virtual stage ``s``: ``cost[row, s]`` is the time of the op of row ``row``
(``fastpp.ops.ROW_F``, ``ROW_I``, ``ROW_W``), ``memd[row, s]`` what it adds to its device's
memory (``+unit`` for ``F``, ``-(1-gamma) unit`` for ``I``, ``-gamma unit`` for ``W``: running
totals within a few ulps of ``fastpp.kernels.memory``, which sums counts: ``MEMORY_RTOL``),
``comm[s]`` the hand-off between stages ``s`` and ``s+1``; ``cap[r]`` the memory limit of device
``r`` (tolerance included).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._jit import jit
from ..checks import (
    ScheduleError,
    instance,
    number_array,
    one_of,
    positive_int,
    show,
)
from ..costs import Costs
from ..generators.registry import MAX_WORK, SCHEDULES
from ..kernels import COMM, GAMMA, SB, TB, TF, TFB, TI, TW, UNIT
from ..ops import KIND, OP_FIELDS, PAD, STAGE, B, F, I, W
from ..placement import CODES, PLAIN_M, stage_map
from ..schedule import Schedule
from ..simulate import Result, simulate

# the placements the search knows, and their m: each one's plain form (fastpp.placement)
CHUNKS = {name: PLAIN_M[CODES[name]] for name in ("loop", "v")}
OBJECTIVES = ("makespan", "span")
# Memory is compared with this relative slack: the search's running sums of (1-gamma)*unit and
# gamma*unit differ from the engine's sums of counts by a few ulps, real differences by far more.
MEMORY_RTOL = 1e-9
# values within this share of each other are one value: a reordering that only changes the
# order of a sum's floating-point additions is no improvement, and a bound met within it is met
SAME = 1e-12


def objective_value(result: Result, objective: str) -> float:
    """``makespan``: last end minus first start; ``span``: the largest per-device span."""
    return result.makespan if objective == "makespan" else float(result.span.max())


@dataclass(frozen=True, eq=False)
class Problem:
    """A validated search instance and the arrays the search kernels read.

    ``cost[k, s]`` and ``memd[k, s]`` (rows ``F, I, W``) are the op times and memory changes of
    virtual stage ``s``, ``comm[s]`` its hand-off to ``s+1``, ``limit[r]`` device ``r``'s memory
    limit (``inf``: none) and ``cap[r]`` the same with the comparison slack; ``whole[s]`` is
    the time of stage ``s``'s backward run whole, as one ``B`` op (a split one, ``I`` and
    ``W``, costs more where ``Costs.i`` or ``overhead`` says so).
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
    whole: np.ndarray

    @classmethod
    def build(cls, p, n, costs, memory, placement_name, objective) -> Problem:
        """Validate ``optimize``'s arguments and expand the costs for the placement.

        Raises
        ------
        ScheduleError
            Naming the argument, what it must be and what it got; for a memory limit below
            one microbatch's forward through a device's stages, the smallest limit that works.
        """
        p, n = positive_int(p, "p"), positive_int(n, "n")
        one_of(placement_name, "placement", CHUNKS)
        m = CHUNKS[placement_name]
        if float(p) * n * m > MAX_WORK:  # as build_schedule
            raise ScheduleError(f"p*n*m must be at most {MAX_WORK:,} (got p={p}, n={n}, "
                                f"m={m})")
        one_of(objective, "objective", OBJECTIVES)
        costs = Costs(1.0, 2.0) if costs is None else costs
        instance(costs, Costs, "costs", "fastpp.Costs")
        stage_to_device = stage_map(CODES[placement_name], p, m)
        # the stage map is made here, not given: for_placement's checks of it are not needed
        rows = costs._rows_for((p, m, stage_to_device.tobytes()), stage_to_device)
        limit = _memory_limit(memory, p)
        cost, memd, need, cap, r = _search_arrays(rows, stage_to_device, limit, MEMORY_RTOL)
        if r >= 0:
            # the device short of the most: act=[1, 2, 3, 4] under 2 named device 2's 3 beside
            # the 4 every device must have
            r = int(np.argmax(np.where(need > cap, need, -np.inf)))
            raise ScheduleError(
                f"memory must be at least {need.max():.6g} on every device: the smallest limit "
                f"under which any '{placement_name}' schedule fits (device {r} needs "
                f"{need[r]:.6g}, got memory={limit[r]:.6g})")
        return cls(p, n, m, placement_name, objective, costs, stage_to_device, cost,
                   memd, rows[COMM].copy(), limit, cap, rows[TB].copy())

    @property
    def dearer_split(self) -> np.ndarray:
        """Per stage, whether its backward takes longer split (``I`` then ``W``) than whole."""
        return self.whole < (self.cost[1] + self.cost[2]) * (1 - SAME)

    @property
    def split_costs_more(self) -> bool:
        """Whether some stage's backward takes longer split than whole (``dearer_split``): a
        schedule that never splits them may then beat every split one."""
        return bool(self.dearer_split.any())

    def relaxed(self) -> Problem:
        """This instance relaxed so that every schedule of it, each backward split or whole as
        it likes, maps into the relaxation's split schedules with no op longer and no
        activation held longer: ``I`` takes ``min(I, B)`` and frees the microbatch's
        activations, ``W`` the rest of ``min(B, I + W)`` (a whole ``B`` is the two back to
        back). What the bounds read where a split backward costs more
        (``split_costs_more``): the schedules that split some backwards and not others have
        no other bound."""
        i = np.minimum(self.cost[1], self.whole)
        w = np.minimum(self.whole, self.cost[1] + self.cost[2]) - i
        zero = np.zeros_like(self.whole)
        return replace(self, cost=np.stack([self.cost[0], i, w]),
                       memd=np.stack([self.memd[0], -self.memd[0], zero]))

    @property
    def pair_scale(self) -> np.ndarray:
        """Per stage, the least ratio on its device of an overlapped pair's time to its
        forward and backward run apart (``Costs.fb``, DualPipe's: a pair of a forward of one
        of the device's stages and a backward of another), at most 1; 1 where ``fb`` is not
        given."""
        rows = self.costs._rows_for((self.p, self.m, self.stage_to_device.tobytes()),
                                    self.stage_to_device)
        scale = np.ones(self.V)
        if np.isnan(rows[TFB]).all():
            return scale
        for r in range(self.p):
            mine = np.flatnonzero(self.stage_to_device == r)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = ((rows[TFB, mine][:, None] + rows[SB, mine][None, :])
                         / (rows[TF, mine][:, None] + rows[TB, mine][None, :]))
            scale[mine] = np.min(ratio[np.isfinite(ratio)], initial=1.0)
        return scale

    @property
    def pairs_cheaper(self) -> bool:
        """Whether an overlapped pair runs faster than its two ops apart somewhere
        (``pair_scale``): a schedule of pairs (DualPipeV's) may then beat every other."""
        return bool((self.pair_scale < 1.0 - SAME).any())

    def paired(self, relaxed: Problem) -> Problem:
        """``relaxed`` (this instance or its ``relaxed``) with every op and whole backward of
        a stage scaled by its ``pair_scale``: a schedule of overlapped pairs maps into it with
        no op longer (a pair's forward then its backward, each scaled, take at most the
        pair's time, and free its activations no later) and the hand-offs as they were."""
        scale = self.pair_scale
        return replace(relaxed, cost=relaxed.cost * scale, whole=relaxed.whole * scale)

    @property
    def V(self) -> int:
        return self.p * self.m

    def schedule(self, ops: np.ndarray, length: np.ndarray, name: str) -> Schedule:
        """A ``Schedule`` of this placement from a search kernel's op block."""
        width = max(1, int(length.max()))
        return Schedule(ops[:, :, :width], length, self.stage_to_device, n=self.n, m=self.m,
                        name=name)

    def whole_backwards(self, schedule: Schedule, stages=None) -> Schedule:
        """``schedule`` (split, of this placement) with the backwards of ``stages`` (a mask
        of the ``V`` stages; default all) run whole: each of their ``I`` a ``B`` in its
        place, each of their ``W`` dropped. Its memory never exceeds the split one's (a ``B``
        frees at an ``I``'s end what ``I`` and ``W`` free by ``W``'s)."""
        whole = np.ones(self.V, bool) if stages is None else np.asarray(stages, bool)
        kind, stage = schedule.ops[KIND], schedule.ops[STAGE]
        ops = np.full_like(schedule.ops, PAD)
        length = np.zeros(self.p, np.int64)
        for r in range(self.p):
            mine = slice(0, schedule.length[r])
            dropped = (kind[r, mine] == W) & whole[stage[r, mine]]
            kept = schedule.ops[:, r, mine][:, ~dropped]
            ops[:, r, :kept.shape[1]] = kept
            length[r] = kept.shape[1]
        turned = (ops[KIND] == I) & whole[np.where(ops[KIND] == PAD, 0, ops[STAGE])]
        ops[KIND] = np.where(turned, B, ops[KIND])
        which = "backwards" if stages is None else "dearer backwards"
        return self.schedule(ops, length, f"{schedule.name}, {which} whole")

    def evaluate(self, schedule: Schedule) -> tuple[Result, float] | None:
        """Simulate ``schedule``; its result and objective value, or ``None`` if it breaks the
        memory limit."""
        result = simulate(schedule, self.costs)
        if np.any(result.peak_activations > self.cap):
            return None
        return result, objective_value(result, self.objective)

    def fixed_schedules(self) -> list[str]:
        """The registered search candidates of this placement, in registry order, and its
        schedules of overlapped pairs where a pair is cheaper (``pairs_cheaper``)."""
        pairs = self.pairs_cheaper
        return [name for name, spec in SCHEDULES.items() if spec.placement == self.placement
                and (spec.search_candidate or (pairs and spec.pairs))]


def _memory_limit(memory, p: int) -> np.ndarray:
    if memory is None:
        return np.full(p, np.inf)
    # the common cases, without NumPy's conversions
    if type(memory) is float and memory > 0:
        limit = np.empty(p)  # (np.full took 0.7 us of a 45 us heuristic)
        limit.fill(memory)
        return limit
    if (isinstance(memory, np.ndarray) and memory.dtype == np.float64 and memory.shape == (p,)
            and memory.min() > 0):  # (NaN is not)
        return memory.copy()
    arr = number_array(memory, "memory")
    if arr.ndim == 0:
        arr = np.full(p, float(arr))
    if arr.shape != (p,) or np.any(~(arr > 0)):  # inf is no limit; NaN fails
        raise ScheduleError(f"memory must be > 0, as a number or an array of p={p} numbers "
                            f"(got {show(memory)})")
    return arr


@jit
def _search_arrays(rows, stage_to_device, limit, rtol):
    """From ``kernels.stage_costs``' rows: ``cost``, ``memd`` and ``cap`` (``Problem``'s),
    each device's need (one microbatch's forward through its stages) and the first device
    whose ``cap`` (its ``limit`` with the slack ``rtol``) is below it, or -1."""
    V, p = rows.shape[1], limit.shape[0]
    cost, memd, need = np.empty((3, V)), np.empty((3, V)), np.zeros(p)
    for s in range(V):
        cost[0, s], cost[1, s], cost[2, s] = rows[TF, s], rows[TI, s], rows[TW, s]
        unit, gamma = rows[UNIT, s], rows[GAMMA, s]
        memd[0, s], memd[1, s], memd[2, s] = unit, (gamma - 1.0) * unit, -(gamma * unit)
        need[stage_to_device[s]] += unit
    cap = limit * (1 + rtol)
    for r in range(p):
        if cap[r] < need[r]:
            return cost, memd, need, cap, r
    return cost, memd, need, cap, -1


def sequential(p: int, n: int, stage_device: np.ndarray) -> Schedule:
    """One microbatch at a time: its forwards down the pipeline, then each stage's ``I`` and
    ``W`` back up. The least memory any schedule of the placement (the device of each stage,
    one route) needs, so it always fits."""
    V = len(stage_device)
    m = V // p
    # one microbatch's ops on each device, in the order they run: F down the route, I and W up
    unit = []
    for s in range(V):
        unit.append((stage_device[s], F, s))
    for s in range(V - 1, -1, -1):
        unit += [(stage_device[s], I, s), (stage_device[s], W, s)]
    unit = np.array(unit)
    ops = np.full((OP_FIELDS, p, 3 * m * n), PAD, np.int32)
    for r in range(p):
        mine = unit[unit[:, 0] == r]
        ops[0, r] = np.tile(mine[:, 1], n)
        ops[1, r] = np.tile(mine[:, 2], n)
        ops[2, r] = np.repeat(np.arange(n), len(mine))
    return Schedule(ops, np.full(p, 3 * m * n), stage_device, n=n, m=m, name="sequential")
