"""The Monte Carlo of a schedule under ``fastpp.Noise``: ``simulate(..., noise=, samples=)``.

One jitted call (``noise.run_samples``) computes every sample on the compiled schedule
(``fastpp.compiled``): block by block of samples, the draws fill every op's time, one pass of
``evaluate_batch`` times the block (samples innermost) and sums each device's busy time, and
``finish_batch`` gives each sample's makespan and spans. Nothing of size ops x samples is
kept: the draws are keyed by sample, so the critical paths (``noise.critical_samples``) and
the delayed variants of the absorption thresholds draw the very same samples again. For the
same reason the samples split into contiguous runs, one per core, on threads (the kernels
release the GIL), with results bit for bit those of one run.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import noise as noise_module
from .checks import (
    ScheduleError,
    ScheduleTypeError,
    index,
    instance,
    known_keywords,
    number,
    number_array,
    positive_int,
    progress_bar,
    read_only,
)
from .compiled import evaluate, op_durations
from .costs import MAX_TIME, Costs
from .kernels import COMM, SB
from .noise import Noise
from .ops import Op
from .schedule import Schedule

MAX_SAMPLES = 10**8
CHUNK = 2**14  # samples a timeline pass takes at once: Ctrl-C and the bar are heard between
PROGRESS_OP_SAMPLES = 10**9  # a bar past this many op-samples (a few seconds)
# the result's makespans, busy times and spans, (2 p + 1) floats a sample: at most 1 GiB, 2 GiB
# while the threads' parts are joined (4 GiB had raised numpy's MemoryError on a 4 GB machine)
MAX_RESULT_VALUES = 2**27
DEFAULT_SAMPLES = 64  # a sweep's, plan's or search's: enough for a p95 of a few percent
SIMULATE_SAMPLES = 1000  # simulate's: one schedule's distribution
_LOCK = threading.Lock()
# made on first use, kept (starting threads costs); not the engine's pools, because a Monte
# Carlo may run inside a task on one of those and would then wait on its own pool's threads
_POOL: list[ThreadPoolExecutor] = []
# a forked child inherits the pool but not its threads: work sent to it would never run
os.register_at_fork(after_in_child=_POOL.clear)


@dataclass(frozen=True, eq=False)
class MonteCarlo:
    """``samples`` noisy timelines of one schedule (``fastpp.simulate`` with ``noise``).

    Attributes
    ----------
    schedule, costs, noise, seed :
        What was simulated.
    makespan : ndarray, shape (K,)
        Each sample's makespan.
    busy, span : ndarray, shape (p, K)
        Each sample's per-device busy time and span.
    criticality : ndarray, shape (p, L)
        Per op (the schedule's op matrices): the share of samples in which it lies on a
        critical path (a chain of ops, each started by the end of the one before, from the
        start to the makespan; where several tie, on any of them).
    """

    schedule: Schedule
    costs: Costs
    noise: Noise
    seed: int
    makespan: np.ndarray
    busy: np.ndarray
    span: np.ndarray
    _state: tuple = field(repr=False)
    # the op matrices' shape and the stage boundaries' links as they ran (the schedule may be
    # written into since)
    _ran: tuple = field(repr=False)

    def __repr__(self) -> str:
        return (f"MonteCarlo({self.schedule.name!r}, p={self.schedule.p}, n={self.schedule.n}, "
                f"samples={self.samples}, mean={self.mean:.6g}, std={self.std:.4g}, "
                f"p95={self.quantile(0.95):.6g})")

    @property
    def samples(self) -> int:
        return len(self.makespan)

    @property
    def mean(self) -> float:
        return _scaled(np.mean, self.makespan)

    @property
    def std(self) -> float:
        """The makespans' standard deviation (``ddof=1``; 0 for one sample)."""
        return _scaled(lambda x: x.std(ddof=1), self.makespan) if self.samples > 1 else 0.0

    @known_keywords("MonteCarlo.quantile")
    def quantile(self, q) -> float | np.ndarray:
        """The makespans' ``q`` quantile(s) (linear interpolation).

        Parameters
        ----------
        q : float or array_like
            In ``[0, 1]``.

        Returns
        -------
        float, or ndarray for an array ``q``

        Raises
        ------
        ScheduleError
            If a ``q`` is not a number in ``[0, 1]``.
        """
        q = number_array(q, "q", "a number or an array of numbers in [0, 1]")
        if np.any(~(q >= 0) | ~(q <= 1)):
            raise ScheduleError(f"q must be in [0, 1] (got {q.tolist()!r})")
        out = np.quantile(self.makespan, q)
        return float(out) if out.ndim == 0 else out

    @cached_property
    def _targets(self) -> tuple[list, tuple[np.ndarray, np.ndarray], np.ndarray]:
        """The delays the sensitivities and absorption thresholds are of: each link (its
        device pair and the stage boundaries it carries), then each stage. Per op, the
        targets ``0..L+V-1`` whose delay lengthens it and how many times (``(target,
        amount)``, each ``[N, width]``, padded with target -1: a stage's every op once, an
        overlapped pair once for each half on it, and a blocking link each message its op
        sends; ``noise.critical``'s layout); per input edge the link whose delay is latency
        on it (``crossing[N, 2]``, -1 for none). Sparse: a dense ``[N, L + V]`` took 24 GB
        at ``p = 500``, ``n = 2000``."""
        compiled = self._state[0]
        N, V = compiled.num_ops, compiled.V
        links: dict = {}
        for s, pair in self._ran[1]:
            links.setdefault(pair, []).append(s)
        of = np.full(V, -1, np.int64)  # each boundary's link
        for j, bounds in enumerate(links.values()):
            of[bounds] = j
        L = len(links)
        target = np.where(compiled.link >= 0, of[np.maximum(compiled.link, 0)], -1)
        crossing = np.full((N, 2), -1, np.int64)
        ops = np.arange(N)
        pair = compiled.stage2 >= 0
        rows, cols = [ops, ops[pair]], [L + compiled.stage, L + compiled.stage2[pair]]
        if self.noise.blocking:  # the sender holds the message: its op is what grows
            sent = np.nonzero(target >= 0)
            rows.append(compiled.producer[sent])
            cols.append(target[sent])
        else:
            crossing = target
        # each (op, target) once, with how many times it counts, in op order
        keys, amounts = np.unique(np.concatenate(rows) * (L + V) + np.concatenate(cols),
                                  return_counts=True)
        rows, cols = keys // (L + V), keys % (L + V)
        width = int(np.bincount(rows, minlength=N).max())
        place = np.arange(rows.size) - np.searchsorted(rows, rows)  # its place in its row
        ids, amount = np.full((N, width), -1, np.int64), np.zeros((N, width))
        ids[rows, place], amount[rows, place] = cols, amounts
        return list(links.items()), (ids, amount), crossing

    @cached_property
    def _paths(self):
        compiled, draws, handoff, extra = self._state
        links, sparse, crossing = self._targets
        targets = len(links) + compiled.V
        if compiled.num_ops * targets > MAX_PATH_SCRATCH:  # (where paths tie: noise.critical)
            raise ScheduleError(f"the critical paths' scores need the ops x (links + stages) "
                                f"= {compiled.num_ops:,} x {targets:,} of scratch, at most "
                                f"{MAX_PATH_SCRATCH:.0e} (8 bytes each): criticality and "
                                f"sensitivity take a schedule of fewer ops or stages")

        def count(first, size, chunk_of):
            out = np.zeros(compiled.num_ops, np.int64), np.zeros(targets)
            for at, c in chunk_of(first, size):  # the kernel adds each chunk's counts in
                noise_module.critical_samples(*draws, compiled.previous, compiled.producer,
                                              compiled.link, handoff, extra, *sparse,
                                              crossing, at, c, *out)
            return out

        # whole counts, so the per-thread sums add up exactly; each thread holds its own
        # scores, so the threads are as many as the bound leaves room for
        most = int(MAX_PATH_SCRATCH // (compiled.num_ops * targets))
        parts = _in_chunks(count, self.samples, compiled.num_ops, "critical paths", most)
        on_path, slope = (sum(x) for x in zip(*parts, strict=True))
        return on_path, slope / self.samples

    @known_keywords("MonteCarlo.op_times")
    def op_times(self, first: int = 0, count: int | None = None) -> np.ndarray:
        """The time of every op in samples ``first .. first + count - 1`` (default: all),
        shaped ``(p, L, count)`` like the schedule's op matrices: its drawn time plus, with
        a ``blocking`` link delay, the holds of the messages it sends over that link (a
        timeline of these times with the delays as latency nowhere is the sample's).

        Parameters
        ----------
        first : int
            The first sample, ``0..samples-1``.
        count : int, optional
            Samples from ``first`` (default: the rest), >= 1.

        Returns
        -------
        ndarray, shape (p, L, count)

        Raises
        ------
        ScheduleError
            If ``first`` or ``count`` is out of range, or the times would pass
            ``MAX_RESULT_VALUES`` floats.
        """
        first = index(first, "first", self.samples)
        count = self.samples - first if count is None else positive_int(
            count, "count", self.samples - first)
        compiled, draws, _, extra = self._state
        each = compiled.num_ops + int(np.prod(self._ran[0]))  # floats a sample: drawn, laid out
        if each * count > MAX_RESULT_VALUES:
            raise ScheduleError(f"count must be at most {MAX_RESULT_VALUES // each:,} for "
                                f"op_times of {compiled.num_ops:,} ops ({each:,} floats a "
                                f"sample, at most {MAX_RESULT_VALUES:,} in all; got count="
                                f"{count:,}): take the samples in parts with first and count")
        out = np.empty((compiled.num_ops, count))
        noise_module.draw(*draws, first, out)
        out += extra[:, None]
        full = np.zeros((*self._ran[0], count))
        full[compiled.device, compiled.position] = out
        return full

    @known_keywords("MonteCarlo.times")
    def times(self, sample: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The start and end of every op in sample ``sample``, shaped ``(p, L)`` like the
        schedule's op matrices: its ``op_times`` (a blocking link delay's holds already
        in them) and, not blocking, the link delays as latency, timed as its makespan was (its
        last end less its first start is ``makespan[sample]``, to the bit). One sample of
        ``noise.fixed()`` is the timeline of the noise's persistent part alone.

        Parameters
        ----------
        sample : int
            ``0..samples-1``.

        Returns
        -------
        (ndarray, ndarray)
            ``start`` and ``end``, zero past each device's last op.

        Raises
        ------
        ScheduleError
            If ``sample`` is out of range.
        """
        sample = index(sample, "sample", self.samples)
        compiled, draws, handoff, extra = self._state
        drawn = np.empty((compiled.num_ops, 1))
        noise_module.draw(*draws, sample, drawn)
        drawn += extra[:, None]
        rows = np.zeros((SB + 1, compiled.V, 1))  # the stage rows: the hand-offs alone
        rows[COMM, :, 0] = handoff
        batch = evaluate(compiled, rows, drawn)
        start, end = np.zeros(self._ran[0]), np.zeros(self._ran[0])
        start[compiled.device, compiled.position] = batch.start[:, 0]
        end[compiled.device, compiled.position] = batch.end[:, 0]
        return start, end

    @known_keywords("MonteCarlo.steady")
    def steady(self) -> MonteCarlo | None:
        """One sample without jitter: the schedule under the same costs and
        ``noise.fixed()`` (its slow devices, stages and link delays), the step a what-if of
        those delays predicts; None where the noise draws each op from a measured run's or
        job's times (``Noise(empirical=)`` but for several steps' factors), which replace
        the costs, so that no such step exists.

        Returns
        -------
        MonteCarlo or None
        """
        return self._steady

    @cached_property
    def _steady(self) -> MonteCarlo | None:  # (the report asks twice: a table, a timeline)
        if self.noise.empirical is not None and not self.noise.relative:
            return None
        return run(self.schedule, self.costs, self.noise.fixed(), 1, self.seed)

    @known_keywords("MonteCarlo.shaded")
    def shaded(self) -> tuple[str, float, np.ndarray, np.ndarray]:
        """The timeline criticality is drawn on (``fastpp.plot.criticality``, the report):
        ``steady()``'s, or where there is none the sample of the median makespan.

        Returns
        -------
        (str, float, ndarray, ndarray)
            What it is (``"without jitter"`` or ``"sample k, the median"``), its makespan,
            and every op's start and end (``times``).
        """
        steady = self.steady()
        if steady is not None:
            return ("without jitter", float(steady.makespan[0]), *steady.times(0))
        k = int(np.argsort(self.makespan, kind="stable")[self.samples // 2])
        return f"sample {k}, the median", float(self.makespan[k]), *self.times(k)

    @property
    def criticality(self) -> np.ndarray:
        compiled = self._state[0]
        out = np.zeros(self._ran[0])
        out[compiled.device, compiled.position] = self._paths[0] / self.samples
        return out

    @property
    def sensitivity(self) -> dict:
        """``d mean makespan / d delay``, the right derivative at no delay: ``{"links":
        {(r1, r2): ...}, "stages": {s: ...}}`` for a delay on every message of a link (as the
        noise delays it: latency, or held by the sender with ``blocking``), or on every op of
        a stage (an overlapped pair's each half on it). It is the mean over the samples of the
        most of the link's hand-offs, or the stage's ops, on a critical path."""
        links, slope = self._targets[0], self._paths[1]
        L = len(links)
        return {"links": {pair: float(slope[j]) for j, (pair, _) in enumerate(links)},
                "stages": {s: float(x) for s, x in enumerate(slope[L:])}}

    @known_keywords("MonteCarlo.absorption")
    def absorption(self, tolerance: float = 0.01, steps: int = 12, *, links=None,
                   stages=None) -> dict:
        """The largest delay on each link (every message) and on each stage (every op) that
        keeps the mean makespan within ``tolerance`` of this one's: ``{"links": {(r1, r2):
        seconds}, "stages": {s: seconds}}``, to ``2**-steps`` of each. Found by bisection
        below ``(1 + tolerance) * mean`` (no delay can exceed it: every path through the link
        or stage pays it), each step one pass of the kernel over the same draws.

        Parameters
        ----------
        tolerance : float
            The mean makespan's allowed relative increase, > 0.
        steps : int
            Bisection steps, 1..40.
        links, stages : iterable, optional
            Only these links (``(r1, r2)`` pairs, as ``sensitivity`` names them) and stages
            (default: all of each): each costs ``steps`` passes over every sample.

        Returns
        -------
        dict
            ``{"links": {(r1, r2): seconds}, "stages": {s: seconds}}``.

        Raises
        ------
        ScheduleError
            If ``tolerance`` or ``steps`` is out of range, or ``links`` or ``stages`` names
            one the schedule's hand-offs or stages do not have.
        """
        tolerance = number(tolerance, "tolerance", strict=True)
        steps = positive_int(steps, "steps", 40)
        chosen = self._chosen(links, stages)
        compiled, _, handoff, extra = self._state
        limit = (1.0 + tolerance) * self.mean  # (the mean is at most MAX_TIME: run())
        if not np.isfinite(limit) or limit > MAX_TIME:
            raise ScheduleError(f"tolerance must keep (1 + tolerance) x the mean makespan "
                                f"({self.mean:.6g}) at most {MAX_TIME:g} (got {tolerance!r})")
        links, (ids, amount), _ = self._targets
        L = len(links)

        def mean_with(delay, j, weight):  # the delay on target j, as sensitivity takes it
            h = handoff
            if j < L and not self.noise.blocking:  # latency on the link's hand-offs
                h = handoff.copy()
                h[links[j][1]] += delay
            return _samples(self._state, h, extra + delay * weight, self.samples)[0].mean()

        found = {}
        for j in chosen:  # (each op's count of target j, once for its bisection's steps)
            weight = np.where(ids == j, amount, 0.0).sum(axis=1)
            found[j] = _bisect(lambda x, j=j, w=weight: mean_with(x, j, w), limit, steps)
        return {"links": {pair: found[j] for j, (pair, _) in enumerate(links) if j in found},
                "stages": {j - L: x for j, x in found.items() if j >= L}}

    def _chosen(self, links, stages) -> list[int]:
        """The targets (``_targets``' columns) ``absorption`` finds: ``links`` and
        ``stages`` checked, all of each by default."""
        pairs, V = [pair for pair, _ in self._targets[0]], self._state[0].V
        if links is None:
            chosen = list(range(len(pairs)))
        else:
            chosen = []
            for link in _items_of(links, "links"):
                key = tuple(sorted(link)) if isinstance(link, tuple | list) and len(link) == 2 \
                    else None
                if key not in pairs:
                    raise ScheduleError(f"links must name links of the schedule's hand-offs, "
                                        f"{pairs} (got {link!r})")
                chosen.append(pairs.index(key))
        if stages is None:
            return chosen + [len(pairs) + s for s in range(V)]
        for s in _items_of(stages, "stages"):
            chosen.append(len(pairs) + index(s, "stages", V))
        return chosen


def _items_of(values, name: str) -> list:
    """An iterable argument's items (a string or a number is no list of them)."""
    if isinstance(values, str) or not hasattr(values, "__iter__"):
        raise ScheduleTypeError(f"{name} must be a list (got {type(values).__name__})")
    return list(values)


def _scaled(statistic, makespans: np.ndarray) -> float:
    """``statistic(makespans)``, a mean or a standard deviation, or where its sums overflow
    (finite makespans near the float64 limit) or its squares underflow (makespans under
    ``TINY``: a std of 1e-300 s came out 0), the same of the makespans scaled to at most 1."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = float(statistic(makespans))
    scale = float(makespans.max())
    if np.isfinite(out) and not 0.0 < scale < TINY:
        return out
    return scale * float(statistic(makespans / scale))


TINY = 1e-100  # below it a makespan's square loses precision to float64's underflow


# the most floats the critical paths' scores hold over all threads (noise.critical's
# best[N, L + V] on each, filled where paths tie: 4 GB); p = 2000, n = 2000 asked 576 GB
MAX_PATH_SCRATCH = 5e8
# the most weight a robust objective mean + lam * std gives the spread: more ranks by the
# spread alone, and 1e308 made every candidate's value overflow to inf (a tie, the first kept)
MAX_LAM = 1e6


def check_lam(lam) -> float:
    """``lam`` of the objective ``mean + lam * std`` as a float in ``[0, MAX_LAM]``."""
    return number(lam, "lam", upper=MAX_LAM)


def check_noise(noise, samples, seed, default: int, each: str | None = None,
                seed_name: str = "seed", rows: str | None = None) -> tuple[int | None, int]:
    """Validate ``noise=`` and its companions, given or not, wherever a call takes them
    (``simulate``, ``sweep``, ``plan``, ``optimize``): the one place for their rules.

    Parameters
    ----------
    noise : fastpp.Noise or None
    samples : int or None
        Monte Carlo samples, >= 1 (None: ``default``); refused without ``noise``, where
        nothing would count them.
    seed : int
        The draws' key, in ``[0, 2**64)``; checked without ``noise`` too, where unused.
    default : int
        The caller's samples when ``samples`` is None.
    each : str, optional
        What the caller runs one Monte Carlo of (``"point"``, ``"configuration"``), for the
        message (None: the one Monte Carlo of ``simulate``).
    seed_name : str
        The caller's name for ``seed`` (``optimize`` calls it ``noise_seed``).
    rows : str, optional
        The caller (``"sweep"``, ``"plan"``) whose rows each price their own costs: a noise
        drawing a measured run's op times, which would replace every row's, is refused there.

    Returns
    -------
    samples : int or None
        None without ``noise``.
    seed : int

    Raises
    ------
    ScheduleError
        If ``noise`` is not a ``fastpp.Noise`` (a ``ScheduleTypeError``), ``samples`` not a
        positive integer or given without ``noise``, ``seed`` out of range, or (with
        ``rows``) ``noise`` draws a measured run's or job's op times.
    """
    if noise is None:
        if samples is not None:  # (a deterministic answer came back, unsaid)
            timelines = ("the Monte Carlo's timelines" if each is None
                         else f"each {each}'s Monte Carlo timelines")
            raise ScheduleError(f"samples counts {timelines}: give noise= too (got "
                                f"samples={samples!r} without noise)")
        return None, check_seed(seed, seed_name)  # (unused: but a wrong one is refused)
    instance(noise, Noise, "noise", "fastpp.Noise")
    if rows is not None and noise.empirical is not None and not noise.relative:
        # (its noisy columns came out the same for f=1 and f=100, and plan added a 7B
        # model's optimizer step to a small CPU run's measured makespan)
        raise ScheduleError(f"noise must not draw a measured run's op times in {rows}: they "
                            f"are absolute, and would replace each row's own costs (got "
                            f"Noise(empirical={type(noise.empirical).__name__})); give its "
                            f"MeasuredSteps (fastpp.measured.read_steps), whose factors "
                            f"apply to each row's costs, or price the run's schedule with "
                            f"fastpp.simulate")
    return (positive_int(default if samples is None else samples, "samples"),
            check_seed(seed, seed_name))


def check_seed(seed, name: str) -> int:
    """``seed`` as an ``int`` if it is an integer in ``[0, 2**64)`` (the draws' key; checked
    where it goes unused too, without noise), else a ``ScheduleError`` naming ``name``."""
    must = f"{name} must be an integer in [0, 2**64) (got {seed!r})"
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ScheduleTypeError(must)
    if not 0 <= seed < 2**64:
        raise ScheduleError(must)
    return int(seed)


def check_samples(samples, p: int) -> int:
    """``samples`` as an int, if a Monte Carlo of a ``p``-device schedule can keep them.

    Parameters
    ----------
    samples : int
        Monte Carlo samples, 1..``MAX_SAMPLES``.
    p : int
        The schedule's devices: each sample keeps ``2 p + 1`` floats, at most
        ``MAX_RESULT_VALUES`` in all.

    Returns
    -------
    int

    Raises
    ------
    ScheduleError
        If ``samples`` is not such an integer.
    """
    samples = positive_int(samples, "samples", MAX_SAMPLES)
    most = MAX_RESULT_VALUES // (2 * p + 1)
    if samples > most:
        raise ScheduleError(f"samples must be at most {most:,} at p = {p} (each sample keeps "
                            f"2 p + 1 floats; got {samples:,})")
    return samples


def run(schedule: Schedule, costs: Costs, noise: Noise, samples, seed) -> MonteCarlo:
    """``samples`` timelines of ``schedule`` under ``costs`` and ``noise`` (module docstring)."""
    samples = check_samples(samples, schedule.p)
    seed = check_seed(seed, "seed")
    compiled = schedule.compiled()
    given, built = schedule, schedule.__dict__.get("_built")
    if built is not None:  # a built schedule's arrays read in place, not copied out of it
        schedule = built.view()
    N, V, p = compiled.num_ops, compiled.V, compiled.p
    tf, tb, ti, tw, tfb, comm, _, _, sb = costs._per_stage(schedule)
    base = np.empty((N, 1))
    op_durations(compiled.kind, compiled.stage, compiled.stage2, tf[:, None], tb[:, None],
                 ti[:, None], tw[:, None], tfb[:, None], sb[:, None], base)
    # an overlapped pair's halves, its forward's and its backward's own times, whose stages'
    # factors the pair's time takes in their proportion, its overlapped time fb given or not
    # (fb's split between the halves is not known; fb = f + b must slow as no fb does)
    s, s2 = compiled.stage, np.maximum(compiled.stage2, 0)
    halves = np.stack((tf[s], tb[s2]), axis=1)
    slow = noise._op_factors(compiled.device, compiled.stage, compiled.stage2, halves, p, V)
    shapes, step_shape = noise._shapes()
    pooled = compiled.device
    if noise.empirical is not None:
        pool, pool_at = noise_module.empirical_pools(noise.empirical, p, schedule.m)
        pooled = noise_module.pooled_by(noise.empirical, schedule, compiled.device,
                                        compiled.stage)
        empty = (pool_at[:, pooled, compiled.kind, 1] == 0).any(axis=0)
        if np.any(empty):
            i = int(np.flatnonzero(empty)[0])
            kind = Op(int(compiled.kind[i])).name
            where = "device" if pooled is compiled.device else "model block (stage)"
            raise ScheduleError(f"empirical noise needs a measured {kind} op on {where} "
                                f"{pooled[i]} to draw from (the run has none)")
    else:
        pool, pool_at = np.zeros(0), np.zeros((1, p, 5, 2), np.int64)
    # an overlapped pair's backward half's share of its time, which its two draws weigh by
    # (noise.draw); -1 for every other op
    total = halves[:, 0] + halves[:, 1]
    share = np.where((compiled.stage2 >= 0) & (total > 0),
                     halves[:, 1] / np.where(total > 0, total, 1.0), -1.0)
    # each op's keys made once; a writable copy of the noise's read-only factors: Numba types
    # read-only arrays apart (another compile of every kernel)
    keys = noise_module.op_keys(np.uint64(seed), compiled.kind, compiled.stage, compiled.mb,
                                compiled.stage2, compiled.mb2)
    draws = (np.uint64(seed), keys, compiled.kind, share, pooled, base[:, 0].copy(), slow,
             shapes, noise.dist == "gamma", step_shape, noise.spike[0], noise.spike[1], pool,
             pool_at, noise.relative, noise.step_factors.copy())
    delays = noise._stage_delays(schedule.stage_to_device)
    extra = np.zeros(N)
    if noise.blocking:  # the sender of each message over a delayed link holds it
        crossing = compiled.link >= 0
        np.add.at(extra, compiled.producer[crossing], delays[compiled.link[crossing]])
        delays = np.zeros(V)
    handoff = comm + delays
    state = (compiled, draws, handoff, extra)
    makespan, busy, span = _samples(state, handoff, extra, samples)
    if not makespan.max() <= MAX_TIME:  # (NaN and inf too: finite inputs that overflow)
        raise ScheduleError(f"noise must keep the makespan at most {MAX_TIME:g}, as costs "
                            f"must: its slow factors, spike magnitude or link delays make it "
                            f"{makespan.max():.6g} with these costs")
    # read-only, as a Result's: the mean, quantiles and std read them
    return MonteCarlo(given, costs, noise, int(seed), read_only(makespan), read_only(busy),
                      read_only(span), state, (schedule.kind.shape, _boundaries(schedule)))


def _samples(state, handoff, extra, samples):
    """``run_samples`` of ``state`` with these hand-offs and per-stage extra op times."""
    compiled, draws = state[0], state[1]
    p = compiled.p
    # every part's arrays made here, before a thread starts: memory that runs out raises at
    # once, where a thread left running had kept the process from exiting
    made = {first: (np.empty(size), np.empty((p, size)), np.empty((p, size)))
            for first, size in _runs(samples)}

    def part(first, size, chunk_of):
        makespan, busy, span = made[first]
        for at, c in chunk_of(first, size):
            out = np.empty(c), np.empty((p, c)), np.empty((p, c))
            # an overflow gives inf (and inf - inf NaN), which run() refuses; without the JIT
            # NumPy would also warn
            with np.errstate(over="ignore", invalid="ignore"):
                noise_module.run_samples(*draws, compiled.device, compiled.stage,
                                         compiled.stage2, compiled.previous,
                                         compiled.producer, compiled.link,
                                         compiled.device_first, handoff, extra, at, *out)
            k = at - first
            makespan[k:k + c], busy[:, k:k + c], span[:, k:k + c] = out
        return makespan, busy, span

    parts = _in_chunks(part, samples, compiled.num_ops, "Monte Carlo")
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(x, axis=-1) for x in zip(*parts, strict=True))


def _runs(samples: int, most: int | None = None) -> list[tuple[int, int]]:
    """``(first, size)`` of each contiguous run of whole blocks of samples, one per core
    (each at least one block; at ``most`` threads)."""
    block = noise_module.BLOCK
    threads = max(1, min(len(os.sched_getaffinity(0)), samples // block, most or samples))
    size = -(-samples // threads // block) * block if threads > 1 else samples
    return [(first, min(size, samples - first)) for first in range(0, samples, size)]


def _in_chunks(work, samples: int, ops: int, what: str, most: int | None = None) -> list:
    """``work(first, size, chunk_of)`` over ``_runs(samples, most)``, the first on this
    thread: their results in sample order. ``chunk_of(first, size)`` yields each ``(at, c)``
    of ``CHUNK`` samples or fewer, updating a bar (past ``PROGRESS_OP_SAMPLES`` op-samples);
    where anything raises (Ctrl-C, heard between chunks), the other parts stop at their next
    chunk and are waited for, so that nothing is left running."""
    stop = threading.Event()
    bar = progress_bar(samples, samples * ops >= PROGRESS_OP_SAMPLES, desc=what,
                       unit="sample")

    def chunk_of(first, size):
        for at in range(first, first + size, CHUNK):
            if stop.is_set():  # another part was interrupted
                return
            c = min(CHUNK, first + size - at)
            yield at, c
            bar.update(c)

    runs = _runs(samples, most)
    pending = []
    try:
        if len(runs) > 1:
            with _LOCK:
                if not _POOL:
                    _POOL.append(ThreadPoolExecutor(thread_name_prefix="fastpp-mc"))
            pending = [_POOL[0].submit(work, *run, chunk_of) for run in runs[1:]]
        mine = work(*runs[0], chunk_of)
        return [mine, *(job.result() for job in pending)]
    except BaseException:
        stop.set()
        for job in pending:
            job.cancel() or job.exception()  # wait: nothing left running when this returns
        raise
    finally:
        bar.close()


def _boundaries(schedule: Schedule) -> list[tuple[int, tuple[int, int]]]:
    """Each stage boundary ``s`` that crosses devices, with its link ``(r1, r2)``, r1 < r2."""
    d = schedule.stage_to_device
    return [(s, (int(min(d[s], d[s + 1])), int(max(d[s], d[s + 1]))))
            for s in range(len(d) - 1) if d[s] != d[s + 1]]


def _bisect(mean_at, limit: float, steps: int) -> float:
    """The largest delay in ``[0, limit]`` with ``mean_at(delay) <= limit``: halve from
    ``limit`` until a delay passes, then bisect between it and its double ``steps`` times (to
    ``2**-steps`` of the answer; 0 if even ``limit * 2**-40`` fails)."""
    high = limit
    if mean_at(high) <= limit:
        return high
    low = high / 2
    while mean_at(low) > limit:
        high, low = low, low / 2
        if low < limit * 2.0**-40:
            return 0.0
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if mean_at(middle) <= limit:
            low = middle
        else:
            high = middle
    return low
