"""``optimize()``: the fastest schedule under a memory limit, and how far from optimal it is."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from .._jit import compile_clock
from ..checks import ScheduleError, ScheduleTypeError, flag, known_keywords, missing_extra, one_of
from ..costs import Costs
from ..generators.registry import WHOLE_BACKWARD, build_schedule
from ..montecarlo import DEFAULT_SAMPLES, check_lam, check_noise
from ..schedule import Schedule
from ..simulate import Result
from . import bounds, exact
from .greedy import fixed_candidates, list_candidates, v_candidates, zb_heuristic
from .improve import evaluate, local_search, seed_state
from .problem import OBJECTIVES, SAME, Problem, sequential

METHODS = ("auto", "heuristic", "improve", "exact")
# objectives under noise: the makespan's distribution (as best_within_budget and plan take
# them; "p50" was theirs alone)
ROBUST = ("p95", "p50", "mean", "mean+std")
EXACT_AUTO_MAX = 64  # auto runs CP-SAT when V * n is at most this (p <= 4, n <= 16 on a loop)
HISTORY = 50  # late acceptance: a move may be as bad as the value this many moves ago
SLICE = 500  # evaluated moves per call of the local-search kernel between clock checks
# the candidate schedules are all built and timed (the same answer whatever the load or the
# kernels' first compile) unless V * n reaches this: then each can take seconds, and the clock
# is read between them (p = 1000, n = 2000 had spent 60 s in them on a 2 s limit)
CLOCKED = 10**5


@dataclass(frozen=True, eq=False)
class SearchResult:
    """The best schedule a search found, its simulated result and a proven bound.

    Attributes
    ----------
    schedule : Schedule
        Usable wherever a built schedule is: ``simulate``, ``write_torch_csv``, traces, plots.
    result : Result
        ``simulate(schedule, costs)``; within the memory limit on every device.
    value : float
        The objective of ``result`` (makespan, or the largest per-device span).
    lower_bound : float
        No schedule of the placement within the memory limit does better (proven: the best of
        the analytic bounds and, after an exact search, the solver's bound), of those that
        split every backward and, where a split one costs more (``Costs.i``, ``overhead``),
        of those that split none; and where ``Costs.fb`` makes an overlapped pair cheaper
        than its ops apart, of those that run pairs (DualPipeV's, then also a candidate).
    optimal : bool
        ``value`` equals ``lower_bound``: the schedule is proven optimal (among the schedules
        ``lower_bound`` covers).
    method : str
        What produced the schedule (e.g. ``"zb-greedy"``, ``"improve"``, ``"exact"``, or the
        name of a registered schedule that was best).
    objective, placement : str
    memory : ndarray
        The limit per device (``inf``: none).
    log : tuple of (seconds, value, source)
        Each improvement of the best value since the search started.
    robust : MonteCarlo or None
        With a noisy objective: the chosen schedule's Monte Carlo (``value`` is its p95,
        median, mean or mean + lam * std; ``lower_bound`` is NaN: no bound is proven under noise).
    stopped : str
        Why the search ended: ``"proven"`` (``value`` reached ``lower_bound``), ``"time
        limit"`` (the clock ran out first: a longer ``time_limit`` may find a better schedule
        or prove this one), ``"heuristic"`` (``method="heuristic"`` runs the candidates
        alone), ``"search ended"`` (the local search, and the solver where it ran, ended
        within the time without closing the gap: it may be the bound's as much as the
        schedule's), ``"interrupted"`` (Ctrl-C ended the search: the best schedule so far)
        or ``"noisy objective"`` (no bound is proven under noise).
    """

    schedule: Schedule
    result: Result
    value: float
    lower_bound: float
    optimal: bool
    method: str
    objective: str
    placement: str
    memory: np.ndarray
    log: tuple
    robust: object = None
    stopped: str = "proven"

    @property
    def gap(self) -> float:
        """``(value - lower_bound) / value``: at most this far from optimal."""
        return (self.value - self.lower_bound) / self.value

    @property
    def bubble(self) -> float:
        """The bubble rate of the objective's metric (makespan or span, see ``Result``)."""
        if self.objective != "span":
            return self.result.bubble_ratio
        return self.result.span_bubble_ratio

    def __repr__(self) -> str:
        return (f"SearchResult({self.objective}={self.value:.6g}, bound={self.lower_bound:.6g}, "
                f"gap={self.gap:.2%}, optimal={self.optimal}, method={self.method!r}, "
                f"peak={np.round(self.result.peak_activations, 4).tolist()})")


@known_keywords("optimize")
def optimize(p: int, n: int, costs: Costs | None = None, *, memory=None,
             placement: str = "loop", objective: str = "makespan", method: str = "auto",
             time_limit: float = 10.0, seed: int = 0, progress: bool = True, noise=None,
             samples: int | None = None, noise_seed: int = 0,
             lam: float = 1.0) -> SearchResult:
    """Find a fast schedule within a memory limit and prove how far from optimal it is.

    Parameters
    ----------
    p, n : int
        Devices and microbatches.
    costs : Costs, optional
        As for ``simulate`` (default ``Costs(1, 2)``); uneven per-stage arrays, latency,
        bandwidth and ``gamma`` are honoured. With ``w = 0`` the ``W``s take no time.
    memory : float or array_like, optional
        Activation memory limit per device (one value, or one per device), in the units of
        ``Result.peak_activations`` (bytes when ``costs.act`` is in bytes). ``None``: no limit.
    placement : {"loop", "v"}
        ``"loop"``: stage ``r`` on device ``r`` (``m = 1``); ``"v"``: stages ``r`` and
        ``2p-1-r`` on device ``r`` (``m = 2``), as ZB-V, V-Half and V-Min.
    objective : {"makespan", "span", "p95", "p50", "mean", "mean+std"}
        Last end minus first start, or the largest per-device span (the Zero Bubble paper's);
        or, with ``noise``, the makespan's 95th percentile, median, mean, or mean + ``lam`` * std
        under it. A noisy objective searches as ``"makespan"`` does (the heuristics, the
        local search and the solver, deterministic as without noise), keeps every schedule
        the search offers that fits the memory limit (each improvement, the registered
        schedules of the placement and the list schedules, whatever the method), and
        returns the one whose Monte Carlo (``samples`` samples, seed ``noise_seed``) is
        best: every candidate sees the same draws (common random numbers), so the choice is
        not a noise artefact. The local search itself still follows the deterministic
        makespan: a schedule no deterministic search reaches is not considered.
    method : {"auto", "heuristic", "improve", "exact"}
        ``heuristic``: the Zero Bubble authors' greedy (loop) or its V counterpart, with the
        registered V schedules as candidates; ``improve``: local search from the best of the
        heuristic and the registered schedules that fit; ``exact``: CP-SAT warm-started from
        that, returning the optimum when it proves it; ``auto``: heuristic, improve, then exact
        where the instance is small (``V * n <= 64``) and OR-Tools is installed.
    time_limit : float
        Seconds for the whole search. The candidate schedules (the heuristics and the
        registered schedules) all run, so that the answer does not depend on the machine's
        load, unless ``V * n`` is 100,000 or more: there the clock is read between them and
        the first always completes, so the search overruns by that candidate's time. Numba's
        compiles of the kernels on their first use do not count (``_jit.compile_clock``).
    seed : int
        The local search's random seed: the same seed gives the same schedule when the search
        stops on its own rather than on the clock.
    progress : bool
        Show a progress bar (tqdm, when installed) for searches longer than a second.
    noise : fastpp.Noise, optional
        The noise of a noisy objective (required by one, refused without one).
    samples : int, optional
        Monte Carlo samples per candidate (default 64; with ``noise`` only).
    noise_seed : int, default 0
        The Monte Carlo's seed (``seed`` is the local search's).
    lam : float, default 1
        The weight of the standard deviation in ``"mean+std"``, in [0, 1e6].

    Returns
    -------
    SearchResult

    Raises
    ------
    SearchInterrupted
        On Ctrl-C (a ``KeyboardInterrupt``, so a loop of searches stops too), with the best
        schedule found so far as its ``result`` (``stopped="interrupted"``); a plain
        ``KeyboardInterrupt`` before the first, or under a noisy objective.
    ScheduleError
        For an unknown placement, objective or method, a non-positive time limit, a memory
        limit below what any schedule needs (the message names the smallest that works), or
        ``method="exact"`` without OR-Tools.
    """
    one_of(objective, "objective", (*OBJECTIVES, *ROBUST))
    robust = objective in ROBUST
    if robust and noise is None:
        raise ScheduleError(f"objective={objective!r} ranks schedules under noise: give "
                            f"noise= too (got noise=None)")
    if noise is not None and not robust:
        raise ScheduleError(f"noise= needs a noisy objective among {list(ROBUST)} (got "
                            f"objective={objective!r})")
    samples, noise_seed = check_noise(noise, samples, noise_seed, DEFAULT_SAMPLES, "candidate",
                                      seed_name="noise_seed")
    lam = check_lam(lam)  # (checked unused too: lam=nan passed without a word)
    problem = Problem.build(p, n, costs, memory, placement, "makespan" if robust else objective)
    one_of(method, "method", METHODS)
    progress = flag(progress, "progress")
    if (isinstance(time_limit, bool | np.bool_)  # (NumPy's numbers too, as elsewhere)
            or not isinstance(time_limit, int | float | np.integer | np.floating)
            or not time_limit > 0 or not math.isfinite(time_limit)):
        raise ScheduleError(f"time_limit must be a finite number of seconds > 0 "
                            f"(got {time_limit!r})")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ScheduleTypeError(f"seed must be an integer (got seed={seed!r})")
    if not 0 <= seed < 2**63:
        raise ScheduleError(f"seed must be in 0..2**63-1 (got seed={seed})")
    if method == "exact" and not exact.available():
        raise missing_extra("method='exact'", "OR-Tools", "search")
    if (method == "exact" or method == "auto" and problem.V * problem.n <= EXACT_AUTO_MAX) \
            and exact.available():
        # OR-Tools' first import (2.4 s here) is before the clock, as Numba's compiles are
        # outside it: a 1 s exact search had taken 3.4 s in a new process
        import ortools.sat.python.cp_model  # noqa: F401
    with compile_clock() as compiling:
        search = _Search(problem, float(time_limit), progress, compiling, keep=robust)
        try:
            found = search.run(method, int(seed))
        except SearchInterrupted as stop:
            if robust:  # (the best so far is no noisy objective's: none to give)
                raise stop.cause from None
            raise
        finally:
            search.close()
    if not robust:
        return found
    return _most_robust(search, found, objective, noise, samples, noise_seed, lam)


def _most_robust(search, found: SearchResult, objective: str, noise, samples: int, seed: int,
                 lam: float) -> SearchResult:
    """Of the candidates ``search`` kept, the one with the best noisy objective."""
    from ..montecarlo import run

    problem = search.problem
    for name, schedule in (*fixed_candidates(problem), *list_candidates(problem)):
        search.offer(schedule, name)  # a robust schedule may be slower without noise
    best = None
    for schedule, result, source in search.kept:
        mc = run(schedule, problem.costs, noise, samples, seed)
        value = (mc.quantile(0.95) if objective == "p95" else
                 mc.quantile(0.5) if objective == "p50" else
                 mc.mean if objective == "mean" else mc.mean + lam * mc.std)
        if best is None or value < best[0]:
            best = (value, schedule, result, source, mc)
    value, schedule, result, source, mc = best
    return SearchResult(schedule, result, float(value), math.nan, False, source, objective,
                        found.placement, found.memory, found.log, mc, "noisy objective")


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C (or, under the command line, SIGTERM) during ``optimize``: ``result`` is the
    ``SearchResult`` of the best schedule found so far (``stopped="interrupted"``), and
    ``cause`` the interrupt that stopped it."""

    def __init__(self, result: SearchResult, cause: KeyboardInterrupt):
        super().__init__("optimize interrupted: the best schedule so far is .result")
        self.result, self.cause = result, cause


class _Search:
    """One run of ``optimize``: the clock, the best schedule so far and its log."""

    def __init__(self, problem: Problem, time_limit: float, progress: bool, compiling,
                 keep: bool = False):
        self.problem = problem
        self.limit = time_limit
        # Numba's compiles on first use do not count against the limit (compile_clock)
        self.compiling = compiling
        # with a noisy objective: every distinct schedule offered that fits
        self.kept: list[tuple[Schedule, Result, str]] | None = [] if keep else None
        self.seen: set[bytes] = set()
        self.t0 = time.perf_counter()
        self.best: tuple[float, Schedule, Result, str] | None = None
        self.log: list[tuple[float, float, str]] = []
        # no schedule beats it (exact may raise it where every schedule splits its backwards)
        self.bound = bounds.lower_bound(problem)
        self.bar = _progress_bar(time_limit) if progress else None
        self.method = ""
        self.clocked = False  # the clock stopped the candidates
        self.solver_timed_out = False  # CP-SAT ended on its clock, not on a proof
        self.interrupted = False  # Ctrl-C ended the search

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def searched(self) -> float:
        """Seconds of the limit used: the time since the start less Numba's compiles."""
        return self.elapsed() - self.compiling.seconds

    def offer(self, schedule: Schedule, source: str) -> None:
        """Keep ``schedule`` if it fits the memory limit and beats the best so far by more
        than float noise (``SAME``)."""
        outcome = self.problem.evaluate(schedule)
        if outcome is None:
            return
        result, value = outcome
        if self.kept is not None:
            key = schedule.ops.tobytes() + schedule.length.tobytes()
            if key not in self.seen:
                self.seen.add(key)
                self.kept.append((schedule, result, source))
        if self.best is None or value < self.best[0] * (1 - SAME):
            self.best = (value, schedule, result, source)
            self.log.append((self.elapsed(), value, source))
            self.tick()

    def proven(self) -> bool:
        return self.best is not None and self.best[0] <= self.bound * (1 + SAME)

    def tick(self) -> None:
        """Move the progress bar (tqdm redraws at most twice a second, after the first)."""
        if self.bar is not None:
            self.bar.n = round(min(self.elapsed(), self.bar.total), 1)
            if self.best is not None:
                self.bar.set_postfix_str(f"best {self.best[0]:.6g}, bound {self.bound:.6g}",
                                         refresh=False)
            self.bar.update(0)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def late(self) -> bool:
        """Whether the clock has run out with a schedule in hand, on a problem large enough
        for it to stop the candidates (``CLOCKED``)."""
        return (self.best is not None and self.problem.V * self.problem.n >= CLOCKED
                and self.searched() >= self.limit)

    def run(self, method: str, seed: int) -> SearchResult:
        """The search, and its result; on Ctrl-C, a ``SearchInterrupted`` holding the best
        schedule so far (a plain ``KeyboardInterrupt`` where there is none yet)."""
        self.method = method
        try:
            self._search(method, seed)
        except KeyboardInterrupt as cause:
            if self.best is None:
                raise
            self.interrupted = True
            raise SearchInterrupted(self.finish(), cause) from None
        return self.finish()

    def _search(self, method: str, seed: int) -> None:
        problem = self.problem
        if problem.placement == "loop":
            found = zb_heuristic(problem)
            if found is not None:
                self.offer(found[0], "zb-greedy")
            candidates = iter(())
        else:
            candidates = v_candidates(problem)
        if method != "heuristic" or problem.placement == "v":
            # (lazily: each candidate is built only if the clock allows it)
            candidates = itertools.chain(candidates, fixed_candidates(problem),
                                         list_candidates(problem))
        while True:  # (the clock first: the next candidate is built on demand)
            if self.late():
                self.clocked = True  # candidates left unbuilt
                break
            name, schedule = next(candidates, (None, None))
            if schedule is None:
                break
            self.offer(schedule, name)
        if self.best is None or (method != "heuristic" and not self.late()):
            # one microbatch at a time fits whatever limit the problem accepted
            self.offer(sequential(problem.p, problem.n, problem.stage_to_device), "sequential")
        small = problem.V * problem.n <= EXACT_AUTO_MAX and exact.available()
        if method in ("improve", "auto") and not self.proven():
            share = 0.3 if (method == "auto" and small) else 1.0
            self.improve(share * self.limit, seed)
        if (method == "exact" or (method == "auto" and small)) and not self.proven():
            self.exact(seed)
        if problem.split_costs_more:
            # a split backward costs more than a whole one: a schedule that splits none may
            # beat every split one, the best split one run whole among them (offered last:
            # the local search and the solver start from split ones)
            split = self.best[1]
            self.offer(problem.whole_backwards(split), "best, backwards whole")
            # and whole only where that is cheaper, the other stages split (a schedule of
            # neither family, which the relaxed bound covers)
            dearer = problem.dearer_split
            if not dearer.all():
                self.offer(problem.whole_backwards(split, dearer),
                           "best, dearer backwards whole")
            whole = WHOLE_BACKWARD.get(problem.placement)
            if whole is not None:
                self.offer(build_schedule(whole, problem.p, problem.n),
                           f"{whole} (backwards whole)")

    def improve(self, until: float, seed: int) -> None:
        """Local search from the best schedule until ``until`` seconds of the limit are used
        (``searched``) or until it stops finding."""
        problem = self.problem
        value, start_schedule, _, _ = self.best
        ops = np.ascontiguousarray(start_schedule.ops, dtype=np.int32).copy()
        length = start_schedule.length.copy()
        tf, tb, ti, tw, tfb, comm, unit, gamma, sb = problem.costs._per_stage(start_schedule)
        static = (start_schedule.stage_to_device, start_schedule.route_first,
                  start_schedule.route_last, problem.n, tf, tb, ti, tw, tfb, sb, comm)
        span = problem.objective == "span"
        shape = (problem.p, ops.shape[2])
        if self.searched() >= until:
            return
        clock = time.perf_counter()
        obj, tie = evaluate(ops, length, *static, span, np.zeros(shape), np.zeros(shape),
                            np.zeros(problem.p, np.int64))
        assert obj == value, (obj, value)  # the kernel and simulate() time alike
        moves = self._moves(until, time.perf_counter() - clock)
        values = np.array([obj, tie, obj, tie])
        best_ops = ops.copy()
        state, stale = seed_state(seed), np.zeros(1, np.int64)
        history = np.full(HISTORY, value)
        total = int(length.sum())
        patience = max(2000, 20 * total)
        max_shift = max(1, min(int(length.max()) - 1, 4 * problem.p))
        quiet = 0
        while self.searched() < until and quiet < 100 * patience:
            clock = time.perf_counter()
            found, done = local_search(ops, length, best_ops, *static, unit, gamma, problem.cap,
                                       span, state, stale, values, history, moves, patience,
                                       max_shift)
            moves = self._moves(until, (time.perf_counter() - clock) / max(done, 1))
            quiet = 0 if found else quiet + done
            if done == 0:
                break  # no legal move within the memory limit
            if found:
                self.offer(problem.schedule(best_ops.copy(), length, "improve"), "improve")
                if self.proven():
                    break
            self.tick()

    def _moves(self, until: float, each: float) -> int:
        """Moves for the local search's next call: ``SLICE``, or as many as fit in the time
        left at ``each`` seconds a move (a move re-times the schedule: a slice of ``SLICE``
        at p = 256, n = 1024 ran 5.6 s past a 2 s limit), at least one."""
        return int(min(SLICE, max(1.0, (until - self.searched()) / max(each, 1e-9))))

    def exact(self, seed: int) -> None:
        remaining = self.limit - self.searched()
        if remaining <= 0:
            return
        outcome = exact.solve(self.problem, self.best[1], remaining, seed)
        self.solver_timed_out = outcome.status in ("FEASIBLE", "UNKNOWN")  # (its clock)
        # (CP-SAT's is over the split schedules alone, without pairs)
        if not (self.problem.split_costs_more or self.problem.pairs_cheaper):
            self.bound = max(self.bound, outcome.bound)
        if outcome.ops is not None:
            try:
                schedule = self.problem.schedule(outcome.ops, outcome.length, "exact")
            except ScheduleError:  # zero-length ops tied in time may sort into a bad order
                return
            self.offer(schedule, "exact")

    def finish(self) -> SearchResult:
        value, schedule, result, source = self.best
        problem = self.problem
        # never return what the engine does not confirm, nor a bound above a real value
        assert np.all(result.peak_activations <= problem.cap), result.peak_activations
        assert self.bound <= value * (1 + 1e-9), (self.bound, value)
        bound = min(self.bound, value)  # equal up to rounding in the bound's sums
        optimal = value <= bound * (1 + SAME)
        self.tick()
        return SearchResult(schedule, result, value, bound, optimal, source, problem.objective,
                            problem.placement, problem.limit.copy(), tuple(self.log),
                            stopped=self._stopped(optimal))

    def _stopped(self, optimal: bool) -> str:
        """``SearchResult.stopped``."""
        if optimal:
            return "proven"
        if self.interrupted:
            return "interrupted"
        # (a heuristic's candidates all run but on the largest problems: the clock stops
        # nothing else of it)
        if self.clocked or self.solver_timed_out or (
                self.method != "heuristic" and self.searched() >= self.limit):
            return "time limit"
        return "heuristic" if self.method == "heuristic" else "search ended"


def _progress_bar(total: float):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=round(total, 1), desc="search", unit="s", delay=1.0, mininterval=0.5,
                leave=False, bar_format="{desc}: {bar} {n:.1f}/{total:.1f} s{postfix}")


SearchResult.__init__ = known_keywords("SearchResult")(SearchResult.__init__)
