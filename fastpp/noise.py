"""``Noise``: how much real op times vary, as data for the Monte Carlo (``fastpp.simulate``).

A noisy op time is its deterministic time (from ``Costs``, or bootstrapped from a measured run)
times independent factors, plus a link's delay on each message it receives:

- jitter by kind (``F``, ``B``, ``I``, ``W``): a factor of mean 1 and coefficient of variation
  ``cov`` (lognormal, or gamma; gamma with CoV 1 is the exponential);
- a persistent slow factor per device or per stage (a straggler), the same in every sample;
- one factor per sample shared by all ops (clock throttling, garbage collection), CoV ``step``;
- rare spikes: with probability ``spike[0]`` an op takes ``spike[1]`` times as long;
- per-link delays: every message between two devices, either direction, takes that much more.

Common random numbers: every draw is a pure function of ``(seed, stage, kind, microbatch,
sample)``, not of a generator's state: Philox-4x32-10 (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC'11) hashes ``(seed, stage, kind, microbatch)`` into the op's
key once per Monte Carlo, and SplitMix64's outputs under that key, numbered from the sample
(``sample * 2**8`` on: a counter-based stream, two multiplies per 64 bits), give the sample's
random bits. Two schedules of the same stages and microbatches see the same noise on the same
op, so their difference has low variance; and the draws do not depend on the order or the
threads that make them.

The draws are most of a Monte Carlo's time, so each is cheap and exact: a normal is Marsaglia
and Tsang's ziggurat (one 64-bit word and a table look-up 99.57% of the time, drawn for a
block of samples in one SIMD pass and the rest mended after), a lognormal factor that normal
through an ``exp`` that vectorises over the samples, a gamma factor
Marsaglia and Tsang's method (a normal and a uniform per try, a logarithm-free squeeze first).
``tests/test_noise.py`` holds each to its distribution (Kolmogorov-Smirnov, moments, the
ziggurat's tail and strips).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ._jit import jit
from .checks import (
    Frozen,
    ScheduleError,
    ScheduleTypeError,
    flag,
    known_keywords,
    nonnegative_int,
    number,
    number_array,
    numbers,
    one_of,
    show,
)
from .compiled import evaluate_batch, finish_batch, timeline_batch
from .kernels import COMM
from .ops import FB, F, Op
from .schedule import Schedule, route_positions

DISTS = ("lognormal", "gamma")
MAX_COV = 10.0  # a CoV of 1000%; past about 1e154 the distributions' parameters overflow
KINDS = ("F", "B", "I", "W")
# streams of the counter: each draw's purpose, so that they never share a counter
JITTER, EVENT, STEP = 0, 1, 2
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)
_TWO32 = 4294967296.0
_TWO_53 = 2.0**-53
# exp_into: log2(e); ln 2 in two parts (the high part's product with t is exact); the rounding
# constant and its bits; 1/13!, ..., 1/1!, 1/0!
_LOG2E = 1.4426950408889634
_LN2_HIGH, _LN2_LOW = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_ROUND = 6755399441055744.0
_ROUND_BITS = np.int64(np.array([_ROUND]).view(np.int64)[0])
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


class Noise(Frozen):
    """A composable, seeded model of op-time variability (module docstring).

    Parameters
    ----------
    cov : float or mapping, default 0.05
        Coefficient of variation of every op's jitter, or per kind: ``{"F": 0.05, "B": 0.08}``
        (a split backward's ``I`` and ``W`` not named take ``B``'s, the backward they split,
        as a ``MeasuredSteps`` bootstrap does; other kinds not named have none; an overlapped
        pair's halves take F's and B's, each drawn as that op apart is and weighted by its
        share of the pair's time). In [0, 10].
    dist : {"lognormal", "gamma"}
        The jitter's distribution (mean 1).
    slow_devices, slow_stages : mapping, optional
        Persistent factors: ``{device: factor}``, ``{stage: factor}`` (> 0; 1.5 is 50% slow).
        An overlapped pair's two halves each take their own stage's factor.
    link_delay : mapping, optional
        ``{(r1, r2): seconds}``: every message between devices ``r1`` and ``r2``, either
        direction, takes that much longer (>= 0); a link is named once, in either order. The
        link must carry a hand-off of the simulated schedule.
    blocking : bool, default False
        The sender waits the link delay out before the message leaves (a sleep before each
        send, as PipeMorph and ``--link-delay`` of the measure runner inject it): the sending
        op takes that much longer. Otherwise the delay is latency, and the sender goes on.
    step : float, default 0
        CoV of one factor per sample that scales every op (same ``dist``), in [0, 10].
    spike : (float, float), optional
        ``(probability, magnitude)``: each op independently takes ``magnitude`` (>= 1) times
        as long with that probability (in [0, 1]); an overlapped pair's halves each as that
        op apart, on its share of the pair's time.
    empirical : MeasuredRun, MeasuredJob or MeasuredSteps, optional
        Draw each op's time from the run's measured times of the same device and kind (a
        bootstrap), instead of ``Costs``; the run must have the schedule's ``p`` (a job: its
        stages, each drawing from its stage's forward and backward computes over every
        replica and step). Of a plain pipeline's ops (a job, a loop run of ``m = 1``), a
        schedule of ``m = 1`` draws each op's from its model block's (``pooled_by``): a
        two-direction schedule's second pipeline runs block ``k`` on device ``p - 1 - k``.
        The jitter (``cov``) is then 0 unless given. ``MeasuredSteps`` (several steps of one
        schedule) bootstraps factors on the ``Costs`` times instead,
        so that any schedule and any ``m`` can be drawn: each sample one step's shared factor
        (``MeasuredSteps.step_factors``), each op a factor of its device (its model block,
        as above) and kind from the same step (``MeasuredSteps.op_ratios_by_kind``);
        ``step`` is then unused.

    Raises
    ------
    ScheduleError
        A CoV outside [0, 10], a probability outside [0, 1], a factor <= 0, an unknown kind
        or distribution; at ``simulate``, factors and delays whose times overflow.

    A ``Noise`` does not change once built (its fields are read-only; ``with_link_delay``
    makes a changed copy): it is checked here, not again where it is drawn.
    """

    def __init__(self, cov=None, dist: str = "lognormal", *, slow_devices=None,
                 slow_stages=None, link_delay=None, blocking: bool = False, step: float = 0.0,
                 spike=None, empirical=None):
        one_of(dist, "dist", DISTS)
        if cov is None:
            cov = 0.0 if empirical is not None else 0.05
        cov = _per_kind(cov)
        slow_devices = _factors(slow_devices, "slow_devices")
        slow_stages = _factors(slow_stages, "slow_stages")
        link_delay = _links(link_delay)
        blocking = flag(blocking, "blocking")
        step = _cov(step, "step")
        if spike is None:
            spike = (0.0, 1.0)
        if not isinstance(spike, tuple | list):
            raise ScheduleTypeError(f"spike must be (probability, magnitude) (got {spike!r})")
        if len(spike) != 2:
            raise ScheduleError(f"spike must be (probability, magnitude) (got {spike!r})")
        probability = number(spike[0], "spike probability", upper=1.0)
        magnitude = number(spike[1], "spike magnitude", lower=1.0)
        # a MeasuredRun or MeasuredJob, known by what it offers (fastpp.measured sits above
        # the engine: importing it here would close an import circle)
        if empirical is not None and not callable(getattr(empirical, "op_times_by_kind", None)):
            raise ScheduleTypeError(f"empirical must be a fastpp.MeasuredRun, MeasuredJob or "
                                    f"MeasuredSteps "
                                    f"(got {type(empirical).__name__})")
        # several measured steps: factors on the Costs times, and the steps' shared factors
        relative = callable(getattr(empirical, "op_ratios_by_kind", None))
        if relative and step > 0:
            raise ScheduleError(f"step must be 0 with empirical measured steps, whose own "
                                f"step factors are drawn (got step={step})")
        self._freeze(
            dist=dist, cov=cov, slow_devices=slow_devices, slow_stages=slow_stages,
            link_delay=link_delay, blocking=blocking, step=step, spike=(probability, magnitude),
            empirical=empirical, relative=relative,
            step_factors=(np.asarray(empirical.step_factors(), np.float64) if relative
                          else np.zeros(0)))

    def __repr__(self) -> str:
        parts = [f"cov={dict(zip(KINDS, self.cov[:4].tolist(), strict=True))}",
                 f"dist={self.dist!r}"]
        for name in ("slow_devices", "slow_stages", "link_delay"):
            if getattr(self, name):
                parts.append(f"{name}={dict(getattr(self, name))}")
        if self.blocking:
            parts.append("blocking=True")
        if self.step:
            parts.append(f"step={self.step}")
        if self.spike[0]:
            parts.append(f"spike={self.spike}")
        if self.empirical is not None:
            parts.append(f"empirical={self.empirical!r}")
        return f"Noise({', '.join(parts)})"

    def with_link_delay(self, link_delay) -> Noise:
        """A copy with other link delays (for sweeps over a delay).

        Parameters
        ----------
        link_delay : mapping of (r1, r2) to float
            As ``Noise``'s.

        Returns
        -------
        Noise

        Raises
        ------
        ScheduleError
            As ``Noise`` does for a bad ``link_delay``.
        """
        other = object.__new__(Noise)
        other._freeze(**{**vars(self), "link_delay": _links(link_delay)})
        return other

    def fixed(self) -> Noise:
        """Its persistent part alone: the same slow devices, slow stages and link delays
        (``blocking`` as given), without jitter, step factors, spikes or a measured run's
        bootstrap. One sample of it is the step a what-if of those delays predicts, which the
        samples spread around, except where ``empirical`` draws each op from a measured
        run's or job's times: those replace the costs, which this part then prices
        (``MonteCarlo.steady`` gives no step there).

        Returns
        -------
        Noise
        """
        return Noise(0.0, self.dist, slow_devices=self.slow_devices,
                     slow_stages=self.slow_stages, link_delay=self.link_delay,
                     blocking=self.blocking)

    # -- what the Monte Carlo reads (fastpp.montecarlo; its arrays, not a user's) ----------------

    def _op_factors(self, device: np.ndarray, stage: np.ndarray, stage2: np.ndarray,
                    halves: np.ndarray, p: int, V: int) -> np.ndarray:
        """Per op (arrays of its device, stage and an overlapped pair's backward stage, -1
        elsewhere): the persistent slow factor; a pair's is its halves' factors weighted by
        their times ``halves[i] = (forward, backward)``."""
        factor = np.ones(len(device))
        if not (self.slow_devices or self.slow_stages):
            return factor
        for r, x in self.slow_devices.items():
            if r >= p:
                raise ScheduleError(f"slow_devices names device {r}, but the schedule has "
                                    f"devices 0..{p - 1}")
            factor[device == r] *= x
        by_stage = np.ones(V)
        for s, x in self.slow_stages.items():
            if s >= V:
                raise ScheduleError(f"slow_stages names stage {s}, but the schedule has "
                                    f"stages 0..{V - 1}")
            by_stage[s] = x
        mine = by_stage[stage]
        pair = np.flatnonzero(stage2 >= 0)
        if pair.size and self.slow_stages:
            a, b = halves[pair, 0], halves[pair, 1]
            total = a + b
            with np.errstate(invalid="ignore", over="ignore"):
                mixed = (mine[pair] * a + by_stage[stage2[pair]] * b) / total
            mine[pair] = np.where(total > 0, mixed, mine[pair])
        return factor * mine

    def _stage_delays(self, stage_to_device: np.ndarray) -> np.ndarray:
        """Per stage boundary ``s`` (between stages ``s`` and ``s + 1``): the link delay its
        messages pay (length ``V``; the last entry is never read)."""
        V = len(stage_to_device)
        out = np.zeros(V)
        a, b = stage_to_device[:-1], stage_to_device[1:]
        for (r1, r2), delay in self.link_delay.items():
            hit = ((a == r1) & (b == r2)) | ((a == r2) & (b == r1))
            if not hit.any():
                used = sorted({(int(min(x, y)), int(max(x, y)))
                               for x, y in zip(a, b, strict=True) if x != y})
                raise ScheduleError(f"link_delay names link {(r1, r2)}, which carries no "
                                    f"hand-off of this schedule (its links: {used[:8]})")
            out[:-1][hit] += delay
        return out

    def _shapes(self) -> tuple[np.ndarray, float]:
        """The jitter's per-kind parameter (``sigma`` of the log for lognormal, the shape for
        gamma; 0: none) for codes ``F, B, I, W, FB``, and the step factor's."""
        return _shape(self.cov, self.dist), float(_shape(np.array([self.step]), self.dist)[0])


def _per_kind(cov) -> np.ndarray:
    """CoV per op code ``F, B, I, W, FB`` (``FB``'s is F's: a pair's draws are its halves',
    F's and B's, ``draw``)."""
    if isinstance(cov, Mapping):
        out = np.zeros(5)
        for kind, value in cov.items():
            if kind not in KINDS:
                raise ScheduleError(f"cov keys must be kinds among {list(KINDS)} (got {kind!r})")
            out[int(Op[kind])] = _cov(value, f"cov[{kind!r}]")
        for part in ("I", "W"):  # (a split backward's parts vary as the backward does)
            if part not in cov:
                out[int(Op[part])] = out[int(Op.B)]
        out[FB] = out[F]
        return out
    must = "a number or a mapping of kind to number"
    if number_array(cov, "cov", must).ndim:
        raise ScheduleTypeError(f"cov must be {must} (got {show(cov)})")
    return np.full(5, _cov(cov, "cov"))


def _cov(value, name: str) -> float:
    """A coefficient of variation in ``[0, MAX_COV]``."""
    out = number(value, name)
    if out > MAX_COV:
        raise ScheduleError(f"{name} must be in [0, {MAX_COV:g}] (a coefficient of variation; "
                            f"got {value!r})")
    return out


def _items(mapping, name: str, what: str):
    """``mapping``'s items (none for None), if it is a mapping of ``what``."""
    if mapping is None:
        return ()
    if not isinstance(mapping, Mapping):
        raise ScheduleTypeError(f"{name} must be a mapping of {what} (got "
                                f"{type(mapping).__name__})")
    return mapping.items()


def _factors(mapping, name: str) -> dict:
    out = {}
    for key, value in _items(mapping, name, "index -> factor"):
        out[nonnegative_int(key, f"{name} key")] = number(value, f"{name}[{key}]", strict=True)
    return out


def _links(mapping) -> dict:
    out = {}
    for key, value in _items(mapping, "link_delay", "(r1, r2) -> seconds"):
        if not isinstance(key, tuple) or len(key) != 2:
            raise ScheduleError(f"link_delay keys must be device pairs (r1, r2) (got {key!r})")
        r1, r2 = (nonnegative_int(r, "link_delay device") for r in key)
        if r1 == r2:
            raise ScheduleError(f"link_delay keys must join two devices (got {key!r})")
        link = (min(r1, r2), max(r1, r2))
        if link in out:  # (their delays had been added: one delay holds both ways)
            raise ScheduleError(f"link_delay must name each link once: its delay holds for "
                                f"messages both ways (got {(r2, r1)} and {(r1, r2)})")
        out[link] = number(value, f"link_delay[{key}]")
    return out


def _shape(cov: np.ndarray, dist: str) -> np.ndarray:
    """The distribution's parameter for each CoV (0 where the CoV is 0: no draw)."""
    cov = np.asarray(cov, np.float64)
    out = np.zeros(cov.shape)
    some = cov > 0
    if dist == "lognormal":
        out[some] = np.sqrt(np.log1p(cov[some] ** 2))
    else:
        # a shape past float64's range (CoV below 1e-154) draws factors of exactly 1, as none
        with np.errstate(over="ignore", divide="ignore"):
            shape = 1.0 / cov[some] ** 2
        out[some] = np.where(np.isfinite(shape), shape, 0.0)
    return out


def empirical_pools(run, p: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """A measured run's (or job's) op times per (device, kind), or several steps' op factors:
    ``values`` and ``at[j, r, kind] = (offset, count)``. Steps' factors are pooled per step
    ``j`` (each pool is its steps' factors in step order, as many per step), so that a sample
    that draws step ``j``'s shared factor draws its ops' factors from step ``j`` alone: what
    slowed that step's ops together stays together. A run or job has one pool (``j = 0``).
    Its times are of ops of its own chunks, so it must have the schedule's ``p`` and ``m``."""
    relative = callable(getattr(run, "op_ratios_by_kind", None))
    times = run.op_ratios_by_kind() if relative else run.op_times_by_kind()
    if len(times) != p:
        raise ScheduleError(f"empirical noise must come from a run with the schedule's p={p} "
                            f"(the run has p={len(times)})")
    # a run's op of 1/m of a stage's layers drawn for a chunk of another size would be a
    # silently wrong time; a job reads plain pipelines only (read_op_table: vpp_size 1)
    chunks = getattr(run, "m", 1)
    if not relative and chunks != m:
        raise ScheduleError(f"empirical noise from measured op times must come from a run "
                            f"with the schedule's m={m} (the run has m={chunks}: its ops are "
                            f"chunks of another size); MeasuredSteps' factors fit any m")
    steps = len(run.step_factors()) if relative else 1
    at = np.zeros((steps, p, 5, 2), np.int64)
    values = []
    offset = 0
    for r in range(p):
        for k in range(5):
            mine = numbers(times[r][k], "empirical noise's measured op times")
            if len(mine) % steps:
                raise ScheduleError(f"empirical noise's op factors must hold as many per step "
                                    f"(got {len(mine)} of kind {Op(k).name} on device {r} "
                                    f"over {steps} steps)")
            each = len(mine) // steps
            at[:, r, k, 0] = offset + each * np.arange(steps)
            at[:, r, k, 1] = each
            values.append(mine)
            offset += len(mine)
    return np.concatenate(values), at


def pooled_by(run, schedule: Schedule, device: np.ndarray, stage: np.ndarray) -> np.ndarray:
    """Per op, the row of ``empirical_pools`` it draws from: its model block (its stage's
    place on its route) where the measured ops are a plain pipeline's, device ``r`` running
    block ``r`` (a ``MeasuredJob``'s stages, a loop run or ``MeasuredSteps`` of ``m = 1``)
    and the schedule has ``m = 1``; else its device (a run of the schedule's own placement).
    A two-direction schedule's device holds two blocks: its second pipeline's ops had drawn
    the first's times (DualPipe's device 0 runs blocks 0 and p - 1).

    Parameters
    ----------
    run : MeasuredRun, MeasuredJob or MeasuredSteps
        The noise's ``empirical`` source.
    schedule : Schedule
        The schedule drawn.
    device, stage : ndarray
        Each op's device and stage (``Schedule.compiled()``'s order).

    Returns
    -------
    ndarray of int64
        Each op's pool row.
    """
    placement = getattr(getattr(run, "schedule", None), "stage_to_device", None)
    plain = placement is None or np.array_equal(placement, np.arange(len(placement)))
    if not plain or schedule.m != 1:
        return device
    return route_positions(schedule)[0][stage]


# -- the ziggurat of the normal (Marsaglia and Tsang, "The ziggurat method for generating random
# variables", J. Stat. Software 5(8), 2000) ------------------------------------------------------

# 1,024 strips: a word misses its strip's rectangle 0.43% of the time (1.5% with their 256), and
# each miss costs the vectorised normals a scalar pass (``normals``)
STRIPS = 1024
ZIGGURAT_R = 4.038849846109504  # the base strip's right edge: it closes the top strip
NORMAL_WORDS = 128  # counters one normal may use: the rest of a sample's 2**8 are the gamma's
_STRIP = np.uint64(STRIPS - 1)  # a word's low 10 bits pick the strip, bit 10 the sign
_SIGN = np.uint64(10)


def ziggurat_tables(r: float = ZIGGURAT_R, strips: int = STRIPS):
    """The ziggurat under ``f(x) = exp(-x^2 / 2)``, ``x >= 0``: strip 0 is the rectangle
    ``[0, r] x [0, f(r)]`` plus the tail beyond ``r`` (area ``v``); strip ``i >= 1`` the
    rectangle ``[0, x[i]] x [f(x[i]), f(x[i + 1])]``, each of area ``v``, with ``x[1] = r`` and
    ``x[strips] = 0`` (so ``r`` closes the top strip). ``x[0] = v / f(r)`` makes strip 0 a
    rectangle too. Returns ``x`` and, for the kernels, ``k[i] = floor(2**52 x[i + 1] / x[i])``
    (a 52-bit abscissa below it lies under the curve), ``w[i] = x[i] 2**-52`` and
    ``f[i] = f(x[i])``."""
    def f(x):
        return math.exp(-0.5 * x * x)

    v = r * f(r) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2))
    x = np.zeros(strips + 1)
    x[0], x[1] = v / f(r), r
    for i in range(1, strips - 1):
        x[i + 1] = math.sqrt(-2.0 * math.log(f(x[i]) + v / x[i]))
    k = np.floor(2.0**52 * x[1:] / x[:-1]).astype(np.int64)
    return x, k, x[:-1] * 2.0**-52, np.exp(-0.5 * x * x)


_, _ZIG_K, _ZIG_W, _ZIG_F = ziggurat_tables()


# -- jitted: the counter-based generator and the draws ------------------------------------------


@jit
def philox(k0, k1, c0, c1, c2, c3):
    """Philox-4x32-10 of counter ``(c0, c1, c2, c3)`` under key ``(k0, k1)`` (all uint64 holding
    32-bit words): four independent uniform 32-bit words."""
    for _ in range(10):
        p0 = _M0 * c0
        p1 = _M1 * c2
        h0, l0 = p0 >> _SHIFT, p0 & _LOW
        h1, l1 = p1 >> _SHIFT, p1 & _LOW
        c0, c1, c2, c3 = (h1 ^ c1 ^ k0) & _LOW, l1, (h0 ^ c3 ^ k1) & _LOW, l0
        k0 = (k0 + _W0) & _LOW
        k1 = (k1 + _W1) & _LOW
    return c0, c1, c2, c3


@jit
def op_key(seed, stage, code, mb):
    """The 64-bit key of one op's draws: Philox of ``(stage, code, mb)`` under ``seed``."""
    k0 = np.uint64(seed) & _LOW
    k1 = (np.uint64(seed) >> _SHIFT) & _LOW
    w0, w1, _, _ = philox(k0, k1, np.uint64(stage) & _LOW, np.uint64(code) & _LOW,
                          np.uint64(mb) & _LOW, np.uint64(0))
    return (w0 << _SHIFT) | w1


@jit
def op_keys(seed, kind, stage, mb, pair_stage, pair_mb):
    """Per op ``i``: the keys of its jitter, of its events and, for an overlapped pair
    (``pair_stage[i] >= 0``), of its backward half's jitter and events (``op_key``),
    ``[N, 4]``: a pair's halves are drawn as the F op of ``(stage, mb)`` and the B op of
    ``(pair_stage, pair_mb)`` are, so that another schedule running them apart sees the same
    draws (a pair's spikes had been keyed as the pair: other samples than its halves')."""
    out = np.zeros((kind.shape[0], 4), np.uint64)
    for i in range(kind.shape[0]):
        pair = pair_stage[i] >= 0
        code = 0 if pair else kind[i]
        out[i, 0] = op_key(seed, stage[i], code + (JITTER << 8), mb[i])
        out[i, 1] = op_key(seed, stage[i], code + (EVENT << 8), mb[i])
        if pair:
            out[i, 2] = op_key(seed, pair_stage[i], 1 + (JITTER << 8), pair_mb[i])
            out[i, 3] = op_key(seed, pair_stage[i], 1 + (EVENT << 8), pair_mb[i])
    return out


@jit
def word(key, counter):
    """64 uniform bits: the ``counter``-th output of SplitMix64 seeded with ``key`` (Steele et
    al., OOPSLA'14), a pure function of both."""
    z = key + (np.uint64(counter) + np.uint64(1)) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@jit
def uniforms(key, counter):
    """Two uniforms in (0, 1) of 32 bits each, from ``word(key, counter)``."""
    z = word(key, counter)
    return ((np.float64(z >> _SHIFT) + 0.5) / _TWO32,
            (np.float64(z & _LOW) + 0.5) / _TWO32)


@jit
def uniform(key, counter):
    """A uniform in (0, 1) of 53 bits, from ``word(key, counter)``."""
    return (np.float64(np.int64(word(key, counter) >> np.uint64(11))) + 0.5) * _TWO_53


@jit
def normal(key, counter):
    """A standard normal from words ``counter``, ``counter + 1``, ... (at most
    ``NORMAL_WORDS``): Marsaglia and Tsang's ziggurat of ``STRIPS`` strips, one word 99.57% of
    the time. A word's low 10 bits pick the strip, bit 10 the sign, its top 52 bits the
    abscissa: independent bits (Doornik's fix of the original's shared bits)."""
    w = word(key, counter)
    i = np.int64(w & _STRIP)
    rabs = np.int64(w >> np.uint64(12))
    if rabs < _ZIG_K[i]:  # inside the strip's rectangle: under the curve
        return np.float64(rabs) * _ZIG_W[i] * (1.0 - 2.0 * np.float64((w >> _SIGN) & 1))
    return _normal_edge(key, counter, w)


@jit
def normals(key, first, scale, shift, z):
    """``z[b] = scale * normal(key, (first + b) << 8) + shift`` for every ``b``, in two
    passes: every word's rectangle, in one loop that vectorises (the look-ups are gathers),
    with NaN where a word falls outside it; then ``_normal_edge`` for those alone, if any. A
    branch per sample had kept the loop scalar: 2.5 ns a normal, now 1.6."""
    K = z.shape[0]
    missed = 0
    for b in range(K):
        w = word(key, np.uint64(first + b) << np.uint64(8))
        i = np.int64(w & _STRIP)
        rabs = np.int64(w >> np.uint64(12))
        x = np.float64(rabs) * _ZIG_W[i] * (1.0 - 2.0 * np.float64((w >> _SIGN) & 1))
        inside = rabs < _ZIG_K[i]
        z[b] = scale * x + shift if inside else np.nan
        missed += not inside
    if missed:
        for b in range(K):
            if np.isnan(z[b]):
                counter = np.uint64(first + b) << np.uint64(8)
                z[b] = scale * _normal_edge(key, counter, word(key, counter)) + shift


@jit
def _normal_edge(key, counter, w):
    """``normal`` past its first word's rectangle: the wedge test, the tail beyond ``R``
    (Marsaglia 1964, drawn until it accepts), a fresh word on a wedge's rejection."""
    used = 1
    while used < NORMAL_WORDS - 2:
        i = np.int64(w & _STRIP)
        rabs = np.int64(w >> np.uint64(12))
        x = np.float64(rabs) * _ZIG_W[i]
        sign = 1.0 - 2.0 * np.float64((w >> _SIGN) & 1)
        if rabs < _ZIG_K[i]:
            return sign * x
        if i == 0:  # the tail beyond R: x = R + a with density prop. to exp(-R a - a^2 / 2)
            # retried within the tail: a fresh strip on rejection would keep only 94% of
            # the tail's mass (its envelope's f(R) / R is more than the tail's)
            while used < NORMAL_WORDS - 1:
                a = -math.log(uniform(key, counter + used)) / ZIGGURAT_R
                b = -math.log(uniform(key, counter + used + 1))
                used += 2
                if b + b > a * a:
                    return sign * (ZIGGURAT_R + a)
            return sign * ZIGGURAT_R  # 60 rejections in a row: probability below 1e-70
        else:  # the wedge between the rectangle and the next strip's height
            y = _ZIG_F[i] + uniform(key, counter + used) * (_ZIG_F[i + 1] - _ZIG_F[i])
            used += 1
            if y < math.exp(-0.5 * x * x):
                return sign * x
        w = word(key, counter + used)
        used += 1
    return 0.0  # NORMAL_WORDS rejections in a row: probability below 1e-200


@jit
def gamma_factor(key, sample, shape, d, c):
    """A gamma factor of shape ``shape`` and mean 1 for a sample (Marsaglia and Tsang's
    method, 2000, with ``d = a - 1/3``, ``c = 1 / sqrt(9 d)``, ``a`` the shape or, below 1,
    the shape + 1): try ``t`` draws its normal from counter ``sample * 2**16 + t * 2**8`` and
    its uniforms from the next ``NORMAL_WORDS`` words on."""
    for attempt in range(1 << 8):
        at = (np.uint64(sample) << np.uint64(16)) + (np.uint64(attempt) << np.uint64(8))
        z = normal(key, at)
        w = 1.0 + c * z
        if w <= 0.0:
            continue
        u = uniform(key, at + NORMAL_WORDS)
        v = w * w * w
        if gamma_squeeze(u, z, w, c) or math.log(u) < 0.5 * z * z + d - d * v + d * math.log(v):
            x = d * v
            if shape < 1.0:  # gamma(a) = gamma(a + 1) * U^(1/a)
                x *= uniform(key, at + NORMAL_WORDS + 1) ** (1.0 / shape)
            return x / shape  # scale 1/shape: mean 1
    return 1.0  # 256 rejections in a row: probability below 1e-300


@jit
def gamma_squeeze(u, z, w, c):
    """Marsaglia and Tsang's test ``log(u) < g = z^2/2 + d (1 - v + log v)`` (``v = w^3``,
    ``w = 1 + c z > 0``) decided without a logarithm when ``u`` is below one of two lower
    bounds of ``exp(g)``: theirs, ``1 - 0.0331 z^4``, and ``1 - c^2 z^4 / (12 min(1, w)^4)``
    (Taylor's remainder of ``log(1 + c z)`` gives ``g = -c^2 z^4 / (12 (1 + e)^4)``, ``e``
    between 0 and ``c z``; and ``exp(g) >= 1 + g``). Measured: together they leave 0.04% of
    tries to the logarithms at shape 100 (theirs alone 8%), 2.4% at 4, 5.4% at 1."""
    m = min(w, 1.0)
    m4 = (m * m) * (m * m)
    z4 = (z * z) * (z * z)
    return u < 1.0 - 0.0331 * z4 or u * m4 < m4 - c * c * z4 / 12.0


@jit
def factors(key, first, shape, gamma, out, z):
    """``out[b]``: the mean-1 factor of sample ``first + b`` (1 where ``shape`` is 0):
    lognormal of log-sigma ``shape`` (the normal from counter ``sample * 2**8``) or gamma of
    shape ``shape``; ``z[K]`` is scratch."""
    K = out.shape[0]
    if shape <= 0.0:
        for b in range(K):
            out[b] = 1.0
        return
    if gamma:
        a = shape if shape >= 1.0 else shape + 1.0
        d = a - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * d)
        for b in range(K):
            out[b] = gamma_factor(key, first + b, shape, d, c)
        return
    normals(key, first, shape, -0.5 * shape * shape, z)
    exp_into(z, out)


@jit(fused=True)
def exp_into(x, out):
    """``out[b] = exp(x[b])`` to 1 ulp for ``|x| < 700`` (``x`` is overwritten), in a loop that
    Numba turns into SIMD (libm's ``exp`` is one call per number): ``x = t ln 2 + r`` with
    ``t`` an integer (rounded by adding 1.5 * 2**52) and ``|r| <= ln(2) / 2``, ``exp(r)`` by
    its Taylor polynomial of degree 13 (the rest is below 1e-17), times ``2**t`` made from
    its bits. The lognormal's exponents stay below 40 (``cov <= 10``, ``|z| < 15``). Horner's
    steps are fused multiply-adds (``jit(fused=True)``): 1.2 ns a number here, 1.7 without."""
    bits = x.view(np.int64)
    for b in range(x.shape[0]):
        y = x[b]
        rounded = y * _LOG2E + _ROUND
        t = rounded - _ROUND
        r = (y - t * _LN2_HIGH) - t * _LN2_LOW
        e = _EXP_TAYLOR[0]
        for c in _EXP_TAYLOR[1:]:
            e = e * r + c
        x[b] = rounded  # its low bits hold t: made 2**t in place
        bits[b] = (bits[b] - _ROUND_BITS + 1023) << 52
        out[b] = e * x[b]


@jit
def draw(seed, keys, kind, share, pooled, base, slow, shapes, gamma, step_shape, spike_p,
         spike_x, pool, pool_at, relative, step_pool, first, out):
    """Every op's noisy time for samples ``first .. first + K - 1``: ``out[i, b]``
    (``[N, K]``), op ``i`` drawn under its keys ``keys[i]`` (``op_keys``, made once per
    Monte Carlo: 32 us for 1,024 ops, which each thread's part had paid again).

    ``base[i]`` is op ``i``'s time (used when ``pool`` is empty) and ``slow[i]`` its persistent
    factor; ``pool[pool_at[j, r, kind, 0]:...+pool_at[j, r, kind, 1]]`` the measured times an
    op of that kind with ``pooled[i] = r`` (its device's, or its model block's: ``pooled_by``)
    is bootstrapped from (with ``relative``, factors on
    ``base[i]``). A non-empty ``step_pool`` gives the per-sample factor, bootstrapped, instead
    of ``step_shape``; the sample that draws its entry ``j`` draws its ops from pools ``j``
    (``j = 0`` without). Keys: ``(stage, kind, mb, sample)``. An overlapped pair
    (``share[i] >= 0``, its backward half's share of its time; -1 for other ops) takes each
    half's jitter and spike on its share: its forward's as the F op of ``(stage, mb)``, its
    backward's as the B op of ``(pair_stage, pair_mb)`` (``op_keys``).
    """
    N, K = out.shape
    per_step = np.empty(K)
    scratch = np.empty(K)
    step_key = op_key(seed, np.int64(0), STEP << 8, np.int64(0))  # (literal 0s: a 2nd compile)
    picked = np.zeros(K, np.int64)  # each sample's step: its ops' pools
    if step_pool.shape[0] > 0:
        for b in range(K):
            u, _ = uniforms(step_key, first + b)
            picked[b] = min(int(u * step_pool.shape[0]), step_pool.shape[0] - 1)
            per_step[b] = step_pool[picked[b]]
    else:
        factors(step_key, first, step_shape, gamma, per_step, scratch)
    jitter = np.empty(K)
    half = np.empty(K)
    empirical = pool.shape[0] > 0
    for i in range(N):
        k = kind[i]
        pair = share[i] >= 0.0  # an overlapped pair: each half's jitter and spike on its share
        factors(keys[i, 0], first, shapes[0 if pair else k], gamma, jitter, scratch)
        if pair:
            factors(keys[i, 2], first, shapes[1], gamma, half, scratch)
        events = keys[i, 1]
        for b in range(K):
            t = base[i]
            x, y = jitter[b], 0.0  # the op's factor, or the pair's forward half's; its backward's
            if pair:
                y = half[b]
            if empirical or spike_p > 0.0:
                u1, u2 = uniforms(events, first + b)
                if empirical:
                    at = pool_at[picked[b], pooled[i], k]
                    pick = min(int(u2 * at[1]), at[1] - 1)
                    t = pool[at[0] + pick] * (base[i] if relative else 1.0)
                if u1 < spike_p:
                    x *= spike_x
                if pair and spike_p > 0.0:  # (a Philox draw a pair and sample)
                    v1, _ = uniforms(keys[i, 3], first + b)
                    if v1 < spike_p:
                        y *= spike_x
            if pair:
                x = (1.0 - share[i]) * x + share[i] * y
            out[i, b] = t * slow[i] * per_step[b] * x


BLOCK = 64  # samples per block: a block's three [N, BLOCK] tables stay in cache
# times within this share of each other tie on a critical path (``critical``): about 4,500
# roundings of float64
TIE = 2.0**-40


@jit
def run_samples(seed, keys, kind, share, pooled, base, slow, shapes, gamma, step_shape, spike_p,
                spike_x, pool, pool_at, relative, step_pool, device, stage, pair_stage,
                previous, producer, link, device_first, handoff, extra, first, makespan, busy,
                span):
    """The whole Monte Carlo of samples ``first .. first + K - 1`` in one call: for each block
    of samples, the draws (plus ``extra[i]`` on op ``i``: a blocking send, a delayed stage),
    one pass of ``evaluate_batch`` with hand-offs ``handoff[V]``, and ``finish_batch``; fills
    ``makespan[K]``, ``busy`` and ``span`` ``[p, K]``."""
    N = kind.shape[0]
    K = makespan.shape[0]
    V = handoff.shape[0]
    p = busy.shape[0]
    size = 0
    none = np.empty((0, 0))
    dur = end = none
    rows = np.empty((0, 0, 0))
    out = busy_b = span_b = first_b = last_b = none
    latency = np.empty(0)
    for at in range(0, K, BLOCK):
        if min(BLOCK, K - at) != size:  # the first block, and a shorter last one
            size = min(BLOCK, K - at)
            dur, end = np.empty((N, size)), np.empty((N, size))
            rows = np.zeros((8, V, size))  # only the hand-offs: op times are given
            _columns(handoff, rows[COMM])
            out = np.empty((3, size))
            busy_b, span_b = np.empty((p, size)), np.empty((p, size))
            first_b, last_b = np.empty((p, size)), np.empty((p, size))
            latency = np.empty(size)
        draw(seed, keys, kind, share, pooled, base, slow, shapes, gamma, step_shape, spike_p,
             spike_x, pool, pool_at, relative, step_pool, first + at, dur)
        for i in range(N):
            if extra[i] != 0.0:
                for b in range(size):
                    dur[i, b] += extra[i]
        evaluate_batch(previous, producer, link, device, kind, stage, pair_stage, rows, dur, none,
                       end, busy_b, first_b, last_b, latency)
        finish_batch(device_first, busy_b, first_b, last_b, span_b, out)
        for b in range(size):
            makespan[at + b] = out[0, b]
            for r in range(p):
                busy[r, at + b] = busy_b[r, b]
                span[r, at + b] = span_b[r, b]


@jit
def critical_samples(seed, keys, kind, share, pooled, base, slow, shapes, gamma, step_shape,
                     spike_p, spike_x, pool, pool_at, relative, step_pool, previous, producer,
                     link, handoff, extra, target, amount, crossing, first, K, on_path, slope):
    """The same samples ``first .. first + K - 1`` as ``run_samples`` (the draws are keyed,
    so drawn again), each sample's critical paths scored by ``critical``."""
    N = kind.shape[0]
    size = 0
    dur = start = end = hand = np.empty((0, 0))
    best = np.empty((N, slope.shape[0]))
    mark = np.empty(N, np.bool_)
    top = np.empty(slope.shape[0])
    for at in range(0, K, BLOCK):
        if min(BLOCK, K - at) != size:
            size = min(BLOCK, K - at)
            dur, start, end = np.empty((N, size)), np.empty((N, size)), np.empty((N, size))
            hand = np.empty((handoff.shape[0], size))
            _columns(handoff, hand)
        draw(seed, keys, kind, share, pooled, base, slow, shapes, gamma, step_shape, spike_p,
             spike_x, pool, pool_at, relative, step_pool, first + at, dur)
        for i in range(N):
            if extra[i] != 0.0:
                for b in range(size):
                    dur[i, b] += extra[i]
        timeline_batch(previous, producer, link, dur, hand, start, end)
        critical(previous, producer, link, hand, start, end, target, amount, crossing, on_path,
                 slope, best, mark, top)


@jit
def _columns(values, out):
    """``values[V]`` repeated in every column of ``out[V, size]`` (a loop: a slice assigned an
    array compiles NumPy's shape checks)."""
    for s in range(values.shape[0]):
        for b in range(out.shape[1]):
            out[s, b] = values[s]


@jit
def critical(previous, producer, link, handoff, start, end, target, amount, crossing, on_path,
             slope, best, mark, top):
    """Each sample's critical paths: the chains of ops from a start at 0 to the last end in
    which every op starts when the one before it ends (its device's previous op, or a
    producer plus the hand-off). Adds to ``on_path[i]`` the samples in which op ``i`` lies on
    one of them, and to ``slope[j]`` each sample's right derivative of its makespan in a delay
    ``x`` on target ``j``: a path grows by ``x`` times ``amount[i, e]`` for each of its ops'
    targets ``target[i, e] == j`` (-1: none) plus the hand-offs ``(i, q)`` it takes with
    ``crossing[i, q] == j``, and where paths tie the one that grows most decides (``best[N,
    T]``, ``mark[N]`` and ``top[T]`` are scratch). The ops come in the compiled order, every
    input before the op that reads it. Times that differ by rounding alone (``TIE``,
    relative) tie: paths equal in exact arithmetic sum their times in different orders (a
    per-sample factor on every op, or none). Where no two paths tie, the one path is
    counted as it is walked; otherwise the paths' ops are scored forward, target by target."""
    N, K = end.shape
    T = slope.shape[0]
    last = np.zeros(K)
    for i in range(N):  # (samples innermost, as the arrays lie)
        for b in range(K):
            last[b] = max(last[b], end[i, b])
    for b in range(K):
        close = last[b] * (1.0 - TIE)
        mark[:] = False
        top[:] = 0.0
        ties = False
        ends = 0
        for i in range(N - 1, -1, -1):  # backward: every op on a chain to a last end
            if not mark[i]:
                if end[i, b] < close:
                    continue
                ends += 1
                ties = ties or ends > 1
            mark[i] = True
            on_path[i] += 1
            for e in range(target.shape[1]):  # (the one path's count, if it is one)
                if target[i, e] >= 0:
                    top[target[i, e]] += amount[i, e]
            t = start[i, b] * (1.0 - TIE)
            one = -1  # a tight input found; a second one, another path: a tie
            a = previous[i]
            if a >= 0 and end[a, b] >= t:
                mark[a] = True
                one = a
            for q in range(2):
                u = producer[i, q]
                if u >= 0 and u != one:  # (the device's previous op may be the producer)
                    s = link[i, q]
                    ready = end[u, b] + handoff[s, b] if s >= 0 else end[u, b]
                    if ready >= t:
                        mark[u] = True
                        ties = ties or one >= 0
                        one = u
                        if crossing[i, q] >= 0:
                            top[crossing[i, q]] += 1.0
        if ties:
            _tied_slopes(previous, producer, link, handoff, start, end, target, amount,
                         crossing, mark, best, top, b, close)
        for j in range(T):
            slope[j] += top[j]


@jit
def _tied_slopes(previous, producer, link, handoff, start, end, target, amount, crossing,
                 mark, best, top, b, close):
    """``critical``'s scores of sample ``b`` where paths tie: forward over the marked ops
    (each one's tight inputs are among them), the most each target adds along a path to op
    ``i``, and into ``top`` the most over the ops that end last."""
    N, T = best.shape
    top[:] = 0.0
    for i in range(N):
        if not mark[i]:
            continue
        t = start[i, b] * (1.0 - TIE)
        found = False
        a = previous[i]
        if a >= 0 and end[a, b] >= t:
            found = True
            for j in range(T):
                best[i, j] = best[a, j]
        for q in range(2):
            u = producer[i, q]
            if u < 0:
                continue
            s = link[i, q]
            ready = end[u, b] + handoff[s, b] if s >= 0 else end[u, b]
            if ready >= t:
                c = crossing[i, q]
                for j in range(T):
                    grown = best[u, j] + (1.0 if j == c else 0.0)
                    best[i, j] = max(best[i, j], grown) if found else grown
                found = True
        if not found:
            for j in range(T):
                best[i, j] = 0.0
        for e in range(target.shape[1]):
            if target[i, e] >= 0:
                best[i, target[i, e]] += amount[i, e]
        if end[i, b] >= close:
            for j in range(T):
                top[j] = max(top[j], best[i, j])


# a misspelt keyword named, not a bare TypeError
Noise.__init__ = known_keywords("Noise")(Noise.__init__)
