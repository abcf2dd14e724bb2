"""The noise model and the Monte Carlo: draws, common random numbers, closed forms, bad input.

The checks that can fail on a wrong answer: the draws' distributions (Kolmogorov-Smirnov
against scipy), GPipe's forward phase under Exp(1) op times against Johansson's asymptotic
closed form (last-passage percolation, arXiv math/9903134), the exact gamma sums of p = 1 and
n = 1, and a zero-noise Monte Carlo against the deterministic kernel bit for bit.
"""

import math
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, changed_run, needs_data
from reference import parse, simulate_reference

import fastpp
from fastpp import Costs, Noise, Op, ScheduleError, build_schedule, simulate
from fastpp import noise as noise_module

# the counter-based hashes (Philox, SplitMix64) wrap around uint64 by design: Numba wraps
# silently, NumPy warns in the pure-Python run of tests/test_coverage.py (NUMBA_DISABLE_JIT)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")

stats = pytest.importorskip("scipy.stats")
KS_ALPHA = 1e-3  # a K-S test at this level fails a right answer 1 time in 1,000


def draws(noise, K, seed=3, stage=0, kind=0, mb=0, first=0):
    """K draws of one op's factor (base time 1)."""
    shapes, step_shape = noise._shapes()
    out = np.empty((1, K))
    one = np.array([0], np.int64)
    keys = noise_module.op_keys(np.uint64(seed), one + kind, one + stage, one + mb, one - 1,
                                one - 1)
    noise_module.draw(np.uint64(seed), keys, one + kind, -np.ones(1), one, np.ones(1),
                      np.ones(1), shapes, noise.dist == "gamma", step_shape, noise.spike[0],
                      noise.spike[1], np.zeros(0), np.zeros((1, 1, 5, 2), np.int64), False,
                      np.zeros(0), first, out)
    return out[0]


# the samplers' exactness checks: 10^5 draws (fewer in the coverage run without the JIT)
EXACT_DRAWS = 20_000 if os.environ.get("FASTPP_SMALL") else 100_000


def assert_moments(x, ref):
    """The sample mean and variance of ``x`` within 5 standard errors of ``ref``'s (the
    variance's from the distribution's kurtosis, large for a heavy tail)."""
    n = len(x)
    mean, var, kurtosis = (float(v) for v in ref.stats(moments="mvk"))
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / n)
    assert abs(x.var() - var) < 5 * var * math.sqrt((kurtosis + 2) / n)


@pytest.mark.parametrize("dist", ["lognormal", "gamma"])
@pytest.mark.parametrize("cov", [0.05, 0.5, 1.0, 3.0])
def test_jitter_has_mean_one_and_the_distribution_asked(dist, cov):
    """The factors are exact: Kolmogorov-Smirnov against scipy's distribution, and their mean
    and CoV (gamma below shape 1 takes its U^(1/a) path: CoV 3 is shape 1/9)."""
    x = draws(Noise(cov, dist), EXACT_DRAWS)
    if dist == "lognormal":
        sigma = math.sqrt(math.log1p(cov**2))
        ref = stats.lognorm(s=sigma, scale=math.exp(-sigma**2 / 2))
    else:
        ref = stats.gamma(a=1 / cov**2, scale=cov**2)
    assert ref.mean() == pytest.approx(1.0) and ref.std() == pytest.approx(cov)
    assert stats.kstest(x, ref.cdf).pvalue > KS_ALPHA
    assert_moments(x, ref)


def standard_normals(K, **where):
    """K of the ziggurat's normals, through the lognormal factor of log-sigma 1 (CoV
    sqrt(e - 1)): z = log(x) + 1/2; drawn a million samples at a time."""
    noise, chunk = Noise(math.sqrt(math.e - 1)), 1_000_000
    return np.concatenate([np.log(draws(noise, min(chunk, K - at), first=at, **where)) + 0.5
                           for at in range(0, K, chunk)])


# 0.43% of the ziggurat's first words miss their rectangle: 4 x 10^6 normals resolve an error
# in the wedges and the tail (K-S to 0.1%, 17,000 misses, about 200 draws in the tail)
ZIGGURAT_DRAWS = 20_000 if os.environ.get("FASTPP_SMALL") else 4_000_000


def test_ziggurat_normals_are_standard_normal():
    """Marsaglia and Tsang's ziggurat: K-S against N(0, 1) and its moments; the tail beyond
    the base strip's edge R (drawn by Marsaglia's tail method) as often as the normal's and
    shaped like it; no correlation between neighbouring samples or ops."""
    z = standard_normals(ZIGGURAT_DRAWS)
    ref = stats.norm()
    assert stats.kstest(z, ref.cdf).pvalue > KS_ALPHA
    assert_moments(z, ref)
    r = noise_module.ZIGGURAT_R
    tail = np.abs(z[np.abs(z) > r])
    share = 2 * ref.sf(r)
    assert abs(len(tail) / len(z) - share) < 5 * math.sqrt(share / len(z))
    if len(tail):
        assert stats.kstest(tail, stats.truncnorm(r, np.inf).cdf).pvalue > KS_ALPHA
    z, other = z[:EXACT_DRAWS], standard_normals(EXACT_DRAWS, mb=1)
    for a, b in ((z[1:], z[:-1]), (z, other)):
        assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(len(a))


def test_ziggurat_tail_draws_stay_in_the_tail():
    """A word that lands in the base strip beyond its rectangle draws from the tail beyond R
    until it accepts: every such normal is past R, and shaped as the tail. (Starting a fresh
    strip on a rejected tail draw, as it did until 5 December 2026, returned 6% of them from
    the body and left the tail 6% light: too little for the K-S test above to see.)"""
    x, k, w, f = noise_module.ziggurat_tables()
    r = noise_module.ZIGGURAT_R
    key = np.uint64(12345)
    # strip 0 (low 10 bits), a sign (bit 10), an abscissa past the rectangle (top 52 bits)
    words = [np.uint64((int(k[0]) + j) << 12 | (j & 1) << 10) for j in range(20_000)]
    z = np.array([noise_module._normal_edge(key, np.uint64(64 * j), word)
                  for j, word in enumerate(words)])
    assert np.all(np.abs(z) > r)
    assert stats.kstest(np.abs(z), stats.truncnorm(r, np.inf).cdf).pvalue > KS_ALPHA


def test_vectorised_normals_are_the_scalar_ones():
    """``normals`` (one SIMD pass, then the words outside their rectangles) gives exactly
    ``normal``'s draws, scaled and shifted: over 10 ``EXACT_DRAWS`` samples (0.43% of them
    past their rectangles, 0.005% in the tail beyond R) and blocks of lengths that are not a
    multiple of 8."""
    key, z = np.uint64(2024), np.empty(10 * EXACT_DRAWS + 3)
    noise_module.normals(key, 5, 0.3, -0.045, z)
    scalar = np.array([noise_module.normal(key, np.uint64(5 + b) << np.uint64(8))
                       for b in range(len(z))])
    assert np.array_equal(z, 0.3 * scalar - 0.045)
    assert np.sum(np.abs(scalar) > noise_module.ZIGGURAT_R) > 0
    for size in (0, 1, 7, 13, 64):
        part = np.empty(size)
        noise_module.normals(key, 5 + 1000, 0.3, -0.045, part)
        assert np.array_equal(part, z[1000:1000 + size])
    # and inside the lognormal factor, compiled with the FMA-contracted exp: the normals
    # themselves take no contraction
    out, scratch, sigma = np.empty(64), np.empty(64), 0.3
    noise_module.factors(key, 5, sigma, False, out, scratch)
    want = np.empty(64)
    noise_module.exp_into(sigma * scalar[:64] - 0.5 * sigma * sigma, want)
    assert np.array_equal(out, want)


def test_ziggurat_tables_are_strips_of_equal_area():
    """Every strip of the ziggurat has the area v of the base strip (its rectangle and the
    normal's tail beyond R): the radius R closes the top strip to 1e-11 (its 1,022 steps
    from R up round; a radius 1 ulp larger misses by 4e-12)."""
    x, k, w, f = noise_module.ziggurat_tables()
    r, n = noise_module.ZIGGURAT_R, noise_module.STRIPS
    v = r * math.exp(-r * r / 2) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2))
    assert len(x) == n + 1 and x[1] == r and x[n] == 0.0 and np.all(np.diff(x) < 0)
    areas = x[1:n] * (f[2:n + 1] - f[1:n])
    assert np.max(np.abs(areas / v - 1)) < 1e-11
    assert x[0] * f[1] == pytest.approx(v, rel=1e-15)
    assert np.all(k <= 2.0**52 * x[1:] / x[:-1]) and np.all(k > 2.0**52 * x[1:] / x[:-1] - 1)
    assert np.array_equal(w, x[:-1] * 2.0**-52)


@pytest.mark.parametrize("shape", [100.0, 4.0, 1.0])
def test_gamma_squeeze_only_accepts_what_the_exact_test_accepts(shape):
    """The gamma's squeezes are lower bounds: every (z, u) they accept passes Marsaglia and
    Tsang's logarithmic test (over the normals where they are tight and where they are not)."""
    d = shape - 1 / 3
    c = 1 / math.sqrt(9 * d)
    rng = np.random.default_rng(1)
    normal = rng.normal(size=10_000)
    normal = normal[1 + c * normal > 0]  # the method redraws the others
    z = np.concatenate([normal, rng.uniform(-0.999 / c, 6, 10_000)])
    u = rng.uniform(size=z.size)
    w = 1 + c * z
    v = w**3
    exact = np.log(u) < 0.5 * z * z + d - d * v + d * np.log(v)
    squeezed = np.array([noise_module.gamma_squeeze(*x, c) for x in zip(u, z, w, strict=True)])
    assert not np.any(squeezed & ~exact)
    drawn = slice(0, len(normal))  # as the method draws them, they decide most tries
    assert squeezed[drawn].sum() > 0.9 * exact[drawn].sum()


def test_exp_is_libm_to_one_ulp():
    """``exp_into`` (the lognormal's vectorised exp) within 1 ulp of libm's over its domain."""
    x = np.concatenate([np.linspace(-700, 700, 20_001), np.linspace(-1, 1, 20_001),
                        np.random.default_rng(0).normal(0, 3, 20_000)])
    out = np.empty_like(x)
    noise_module.exp_into(x.copy(), out)
    assert np.all(np.abs(out - np.exp(x)) <= np.spacing(np.exp(x)))


def test_spikes_and_per_kind_cov():
    x = draws(Noise(0.0, spike=(0.1, 4.0)), 20_000)
    assert set(np.unique(x)) == {1.0, 4.0}
    share = np.mean(x == 4.0)
    assert abs(share - 0.1) < 4 * math.sqrt(0.1 * 0.9 / 20_000)
    noise = Noise({"B": 0.2})
    assert np.all(draws(noise, 100, kind=0) == 1.0)  # F has no jitter
    assert draws(noise, 5000, kind=1).std() == pytest.approx(0.2, rel=0.1)


def test_draws_are_keyed_not_streamed():
    """A draw depends on (seed, stage, kind, microbatch, sample) only: any subset of samples,
    in any call, gets the same numbers."""
    noise = Noise(0.3, "gamma")
    a = draws(noise, 50)
    assert np.array_equal(draws(noise, 7), a[:7])
    assert np.array_equal(draws(noise, 9, first=13), a[13:22])
    lognormal = Noise(0.3)
    b = draws(lognormal, 50)
    assert np.array_equal(draws(lognormal, 9, first=13), b[13:22])
    assert not np.array_equal(draws(noise, 50, seed=4), a)
    assert not np.array_equal(draws(noise, 50, stage=1), a)
    assert not np.array_equal(draws(noise, 50, mb=1), a)


def test_no_noise_is_the_deterministic_kernel_bit_for_bit():
    for name, p, n, m in [("1f1b", 4, 8, 1), ("zb-h1", 4, 8, 1), ("interleaved-1f1b", 4, 8, 2),
                          ("dualpipev", 4, 8, 2)]:
        s = build_schedule(name, p, n, m)
        # each kind's fixed overhead too: I must take its own, not b - w's
        for c in (Costs(f=1.0, b=2.0, w=0.7, comm=0.13),
                  Costs(f=1.0, b=2.0, w=0.7, comm=0.13,
                        overhead={"F": 0.05, "B": 0.11, "I": 0.17, "W": 0.23})):
            det = simulate(s, c)
            mc = simulate(s, c, noise=Noise(0.0), samples=3)
            assert np.all(mc.makespan == det.makespan), name
            assert np.array_equal(mc.busy[:, 1], det.busy) and np.array_equal(mc.span[:, 2],
                                                                               det.span)


def test_samples_on_threads_are_one_run_bit_for_bit(monkeypatch):
    """The samples split into runs on threads (and a run from any first sample) give exactly
    what one run over all of them gives: makespans, busy, spans and critical-path counts."""
    monkeypatch.setattr(fastpp.montecarlo.os, "cpu_count", lambda: 4)
    s, c = build_schedule("interleaved-1f1b", 4, 8, 2), Costs(f=1.0, b=2.0, comm=0.05)
    K = 3 * noise_module.BLOCK + 5
    mc = simulate(s, c, noise=Noise(0.2, step=0.1, spike=(0.05, 3.0)), samples=K, seed=11)
    compiled, draws, handoff, extra = mc._state
    tail = ("device", "stage", "stage2", "previous", "producer", "link", "device_first")

    def one_run(first, size):
        out = np.empty(size), np.empty((s.p, size)), np.empty((s.p, size))
        noise_module.run_samples(*draws, *(getattr(compiled, k) for k in tail), handoff, extra,
                                 first, *out)
        return out

    whole = one_run(0, K)
    for mine, theirs in zip((mc.makespan, mc.busy, mc.span), whole, strict=True):
        assert np.array_equal(mine, theirs)
    # a run from a first sample inside a block
    for mine, theirs in zip(one_run(37, 100), whole, strict=True):
        assert np.array_equal(mine, theirs[..., 37:137])
    links, sparse, crossing = mc._targets
    counts = np.zeros(compiled.num_ops, np.int64), np.zeros(len(links) + compiled.V)
    noise_module.critical_samples(*draws, compiled.previous, compiled.producer, compiled.link,
                                  handoff, extra, *sparse, crossing, 0, K, *counts)
    assert np.array_equal(mc._paths[0], counts[0])
    assert np.array_equal(mc._paths[1], counts[1] / K)
    assert counts[0].max() == K  # the paths were walked: the first forward is on every one


def test_common_random_numbers_across_schedules():
    """GPipe and 1F1B run the same (stage, kind, microbatch) ops: they draw the same times."""
    c, noise = Costs(f=1.0, b=2.0), Noise(0.2)
    runs = [simulate(build_schedule(name, 4, 8), c, noise=noise, samples=200, seed=9)
            for name in ("gpipe", "1f1b")]
    times = []
    for mc in runs:
        s = mc.schedule
        used = np.arange(s.kind.shape[1]) < s.length[:, None]
        key = np.lexsort((s.mb[used], s.stage[used], s.kind[used]))
        times.append(mc.op_times()[used][key])
    assert np.array_equal(times[0], times[1])
    assert np.array_equal(runs[0].op_times(150, 20), runs[0].op_times()[:, :, 150:170])
    # so their difference varies less than with independent draws (here about half as much)
    other = simulate(build_schedule("1f1b", 4, 8), c, noise=noise, samples=200, seed=10)
    paired = runs[0].makespan - runs[1].makespan
    independent = runs[0].makespan - other.makespan
    assert paired.std() < 0.7 * independent.std()


def test_persistent_slow_factors_and_step_factor():
    s, c = build_schedule("1f1b", 4, 8), Costs(f=1.0, b=2.0)
    slow = simulate(s, c, noise=Noise(0.0, slow_stages={3: 1.5}), samples=2)
    assert slow.makespan[0] == simulate(s, Costs(f=[1, 1, 1, 1.5], b=[2, 2, 2, 3])).makespan
    device = simulate(s, c, noise=Noise(0.0, slow_devices={3: 1.5}), samples=2)
    assert device.makespan[0] == slow.makespan[0]
    step = simulate(s, c, noise=Noise(0.0, step=0.1), samples=500)
    det = simulate(s, c).makespan
    # one factor for the whole sample: the makespan scales with it
    assert np.allclose(step.busy / step.busy[:, :1], step.makespan / step.makespan[0])
    assert step.mean == pytest.approx(det, rel=0.02) and step.std == pytest.approx(0.1 * det,
                                                                                    rel=0.15)


def test_link_delay_is_a_handoff_latency():
    s = build_schedule("1f1b", 4, 8)
    delayed = simulate(s, Costs(f=1.0, b=2.0), noise=Noise(0.0, link_delay={(1, 2): 0.4}),
                       samples=2)
    comm = np.array([0.0, 0.4, 0.0, 0.0])
    assert delayed.makespan[0] == simulate(s, Costs(f=1.0, b=2.0, comm=comm)).makespan


def test_blocking_link_delay_holds_the_sender():
    """A sleep before each send on a link: the op whose output crosses it takes that much
    longer (as simulate with those durations), an overlapped pair once for each of its two
    halves' messages that cross it, and a zero-bubble schedule, best without the delay, loses
    to 1F1B with it (its ops have no slack to hide it in)."""
    from fastpp.ops import FB, B, F, I

    c = Costs(f=1.0, b=2.0, w=1.0)
    for name, m in (("1f1b", 1), ("zb-h2", 1), ("interleaved-1f1b", 2), ("dualpipev", 2)):
        s = build_schedule(name, 8, 32, m)
        base = simulate(s, c)
        durations = base.end - base.start
        d = s.stage_to_device
        for r in range(s.p):
            for k in range(s.length[r]):
                st, kind = s.stage[r, k], s.kind[r, k]
                if kind == F and st + 1 < s.V and {d[st], d[st + 1]} == {3, 4}:
                    durations[r, k] += 2.0
                if kind in (B, I) and st > 0 and {d[st], d[st - 1]} == {3, 4}:
                    durations[r, k] += 2.0
                back = s.stage2[r, k]  # a pair's backward half sends its gradient back
                if kind == FB and st + 1 < s.V and {d[st], d[st + 1]} == {3, 4}:
                    durations[r, k] += 2.0
                if kind == FB and back > 0 and {d[back], d[back - 1]} == {3, 4}:
                    durations[r, k] += 2.0
        noisy = simulate(s, c, noise=Noise(0.0, link_delay={(3, 4): 2.0}, blocking=True),
                         samples=2)
        assert noisy.makespan[0] == pytest.approx(simulate(s, c, durations=durations).makespan,
                                                  rel=1e-12), name
    one, zb = build_schedule("1f1b", 8, 32), build_schedule("zb-h2", 8, 32)
    slow = Noise(0.0, link_delay={(3, 4): 4.0}, blocking=True)
    assert simulate(zb, c).makespan < simulate(one, c).makespan
    assert simulate(zb, c, noise=slow, samples=1).mean > simulate(one, c, noise=slow,
                                                                  samples=1).mean


def test_quantiles_mean_std():
    mc = simulate(build_schedule("1f1b", 4, 8), Costs(f=1, b=2), noise=Noise(0.1), samples=400)
    assert mc.samples == 400
    assert mc.mean == pytest.approx(mc.makespan.mean())
    assert mc.quantile(0.5) == pytest.approx(np.median(mc.makespan))
    assert mc.quantile(0) == mc.makespan.min() and mc.quantile(1) == mc.makespan.max()
    assert mc.quantile([0.05, 0.95]).tolist() == sorted(mc.quantile([0.05, 0.95]).tolist())


def test_criticality_and_sensitivity():
    s = build_schedule("1f1b", 4, 8)
    mc = simulate(s, Costs(f=1, b=2, comm=0.05), noise=Noise(0.1), samples=300)
    crit = mc.criticality
    # the first forward and the last backward are on every critical path
    assert crit[0, 0] == 1.0 and crit[0, s.length[0] - 1] == 1.0
    assert np.all((crit >= 0) & (crit <= 1))
    sens = mc.sensitivity
    # every path from 0F0 to the end crosses each link at least twice (down and back up)
    assert set(sens["links"]) == {(0, 1), (1, 2), (2, 3)}
    assert all(v >= 2 for v in sens["links"].values())
    # the derivative is the slope: a small delay moves the mean by about that much
    h = 1e-4
    noisy = Noise(0.1, link_delay={(1, 2): h})
    slope = (simulate(s, Costs(f=1, b=2, comm=0.05), noise=noisy, samples=300).mean
             - mc.mean) / h
    assert slope == pytest.approx(sens["links"][(1, 2)], rel=0.05)


def _mean(s, costs, samples=128, seed=3, **noise):
    return simulate(s, costs, noise=Noise(**noise), samples=samples, seed=seed).mean


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_a_slow_stage_slows_its_half_of_an_overlapped_pair(stage):
    """DualPipeV's pairs run a forward and a backward of two stages: a slow stage slows its
    own half (as per-stage Costs price it), not the whole pair by the forward's stage."""
    s = build_schedule("dualpipev", 2, 4, 2)
    x = np.ones(s.V)
    x[stage] = 1.6
    scaled = simulate(s, Costs(f=1.0 * x, b=2.0 * x, w=0.7 * x)).makespan
    slow = Noise(0.0, slow_stages={stage: 1.6})
    noisy = simulate(s, Costs(f=1.0, b=2.0, w=0.7), noise=slow, samples=1)
    assert noisy.makespan[0] == pytest.approx(scaled, rel=1e-12)
    # the pair's time given as fb = f + b slows alike (its halves had been fb and the
    # backward's send: a slow backward stage left the pair as it was)
    given = simulate(s, Costs(f=1.0, b=2.0, w=0.7, fb=3.0), noise=slow, samples=1)
    assert given.makespan[0] == pytest.approx(scaled, rel=1e-12)


@pytest.mark.parametrize("name, p, n, m, noise", [
    ("dualpipev", 2, 4, 2, dict(cov=0.2)),  # pairs: a stage's delay is on each half there
    ("1f1b", 4, 8, 1, dict(cov=0.0)),  # every path ties
    ("1f1b", 4, 8, 1, dict(cov=0.0, step=0.1)),  # ties but for rounding
    ("1f1b", 4, 8, 1, dict(cov=0.2, blocking=True)),  # the sender holds the link's delay
    ("interleaved-1f1b", 2, 4, 2, dict(cov=0.0)),  # a link of several stage boundaries
])
def test_sensitivity_is_the_derivative_of_the_mean(name, p, n, m, noise):
    """Each sensitivity is the right derivative of the mean makespan in its delay, as the
    noise delays it: a finite difference of the same samples with the delay added."""
    s, costs, h = build_schedule(name, p, n, m), Costs(f=1.0, b=2.0, w=0.7, comm=0.05), 1e-6
    mc = simulate(s, costs, noise=Noise(**noise), samples=128, seed=3)
    sens = mc.sensitivity
    for link, slope in sens["links"].items():
        moved = _mean(s, costs, **noise, link_delay={link: h})
        assert (moved - mc.mean) / h == pytest.approx(slope, rel=1e-4)
    # a stage's delay on each of its ops (a pair's each half), on the drawn times, by the
    # reference timeline
    drawn = mc.op_times()
    parts = [[parse(token) for token in row] for row in s.tokens()]

    def mean_with(delay, stage):
        return np.mean([simulate_reference(s, costs, [
            [drawn[r, k, b] + delay * sum(x[1] == stage for x in op)
             for k, op in enumerate(row)] for r, row in enumerate(parts)]).makespan
            for b in range(mc.samples)])

    assert mean_with(0.0, 0) == pytest.approx(mc.mean, rel=1e-12)
    for stage, slope in sens["stages"].items():
        moved = (mean_with(h, stage) - mc.mean) / h
        assert moved == pytest.approx(slope, rel=1e-4)


def test_absorption_threshold():
    s, c = build_schedule("1f1b", 4, 8), Costs(f=1, b=2)
    mc = simulate(s, c, noise=Noise(0.05), samples=100)
    found = mc.absorption(tolerance=0.01, steps=10)
    for link, delay in found["links"].items():
        at = simulate(s, c, noise=Noise(0.05, link_delay={link: delay}), samples=100).mean
        over = simulate(s, c, noise=Noise(0.05, link_delay={link: delay * 1.01}),
                        samples=100).mean
        assert at <= 1.01 * mc.mean < over


# -- closed forms ----------------------------------------------------------------------------


@pytest.mark.parametrize("n, p", [(16, 16), (32, 16), (64, 32)])
def test_johansson_gpipe_forward_phase(n, p):
    """GPipe's forward phase with i.i.d. Exp(1) op times is last-passage percolation on an
    n x p grid: E[T] ~ (sqrt n + sqrt p)^2 - 1.7711 (sqrt n + sqrt p)^(4/3) (n p)^(-1/6)."""
    s = build_schedule("forward-only", p, n)
    mc = simulate(s, Costs(f=1.0, b=1.0), noise=Noise(1.0, "gamma"), samples=2000, seed=5)
    root = math.sqrt(n) + math.sqrt(p)
    expected = root**2 - 1.7711 * root ** (4 / 3) * (n * p) ** (-1 / 6)
    assert mc.mean == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("dist, cov", [("gamma", 0.5), ("gamma", 1.0)])
def test_one_device_is_a_gamma_sum(dist, cov):
    """p = 1: the step is the sum of n forwards and n backwards, i.i.d. gamma of shape k:
    a gamma of shape 2 n k (f = b)."""
    n = 6
    mc = simulate(build_schedule("1f1b", 1, n), Costs(f=1.0, b=1.0), noise=Noise(cov, dist),
                  samples=4000)
    k = 1 / cov**2
    ref = stats.gamma(a=2 * n * k, scale=1 / k)
    assert stats.kstest(mc.makespan, ref.cdf).pvalue > KS_ALPHA


def test_one_microbatch_is_a_gamma_sum():
    """n = 1: one forward chain and one backward chain through p stages, nothing overlaps."""
    p, cov = 5, 0.7
    mc = simulate(build_schedule("1f1b", p, 1), Costs(f=1.0, b=1.0), noise=Noise(cov, "gamma"),
                  samples=4000, seed=11)
    k = 1 / cov**2
    assert stats.kstest(mc.makespan, stats.gamma(a=2 * p * k, scale=1 / k).cdf).pvalue \
        > KS_ALPHA


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"cov": -0.1}, "cov must be finite and >= 0"),
    ({"cov": {"B": -1}}, r"cov\['B'\] must be"),
    ({"cov": {"X": 1}}, "cov keys must be kinds"),
    ({"dist": "normal"}, "dist must be one of"),
    ({"spike": (1.5, 2.0)}, r"spike probability must be in \[0, 1\]"),
    ({"spike": (-0.1, 2.0)}, r"spike probability must be in \[0, 1\] \(got -0\.1\)"),
    ({"spike": (np.inf, 2.0)}, r"spike probability must be in \[0, 1\] \(got inf\)"),
    ({"spike": (0.1, 0.5)}, r"spike magnitude must be finite and >= 1 \(got 0\.5\)"),
    ({"spike": (0.1, np.inf)}, r"spike magnitude must be finite and >= 1 \(got inf\)"),
    ({"spike": (0.1, -1.0)}, r"spike magnitude must be finite and >= 1 \(got -1\.0\)"),
    ({"slow_stages": {0: 0}}, r"slow_stages\[0\] must be finite and > 0"),
    ({"link_delay": {(1, 1): 0.1}}, "must join two devices"),
    ({"link_delay": {(0, 1): -0.1}}, "must be finite and >= 0"),
    ({"step": -1}, "step must be finite and >= 0"),
    ({"blocking": 1}, "blocking must be one of"),
])
def test_bad_noise(kwargs, match):
    with pytest.raises(ScheduleError, match=match):
        Noise(**kwargs)


def test_bad_monte_carlo():
    s, c = build_schedule("1f1b", 4, 8), Costs(f=1, b=2)
    with pytest.raises(ScheduleError, match="samples must be a positive integer"):
        simulate(s, c, noise=Noise(), samples=0)
    with pytest.raises(ScheduleError, match=r"link_delay names link \(0, 2\), which carries"):
        simulate(s, c, noise=Noise(link_delay={(0, 2): 0.1}))
    with pytest.raises(ScheduleError, match="slow_devices names device 7"):
        simulate(s, c, noise=Noise(slow_devices={7: 2.0}))
    with pytest.raises(ScheduleError, match="seed must be an integer"):
        simulate(s, c, noise=Noise(), seed=-1)
    with pytest.raises(fastpp.ScheduleTypeError, match="noise must be a fastpp.Noise"):
        simulate(s, c, noise=0.1)
    mc = simulate(s, c, noise=Noise(), samples=10)
    with pytest.raises(ScheduleError, match=r"q must be in \[0, 1\]"):
        mc.quantile(1.5)


DATA = Path(__file__).parent / "data"


def test_empirical_noise_bootstraps_a_real_run():
    """Each op's time is drawn from the run's measured times of the same device and kind."""
    pytest.importorskip("pandas")
    run = fastpp.read_torch_trace(DATA / "gpipe")
    s = run.schedule
    mc = simulate(s, Costs(f=1, b=2), noise=Noise(empirical=run), samples=300)
    times = mc.op_times()
    for r in range(run.p):
        for kind in (0, 1):
            mine = s.kind[r, : s.length[r]] == kind
            measured = run.durations[r, : s.length[r]][mine]
            drawn = times[r, : s.length[r]][mine]
            assert np.isin(drawn, measured).all()
            # a bootstrap: every measured time turns up
            assert set(np.unique(drawn)) == set(np.unique(measured))
    with pytest.raises(ScheduleError, match=f"run with the schedule's p={run.p + 2}"):
        simulate(build_schedule("1f1b", run.p + 2, 8), Costs(f=1, b=2),
                 noise=Noise(empirical=run))
    # its ops are whole stages: drawn for chunks of half a stage they would double the compute
    with pytest.raises(ScheduleError, match=r"run with the schedule's m=2 \(the run has m=1"):
        simulate(build_schedule("interleaved-1f1b", run.p, 8), Costs(f=1, b=2),
                 noise=Noise(empirical=run))
    with pytest.raises(fastpp.ScheduleTypeError, match="empirical must be a fastpp.MeasuredRun"):
        Noise(empirical="trace.json")


@needs_data("whatif_st/trace-ST.parquet")
def test_empirical_noise_from_a_job():
    """A what-if job's computes feed the Monte Carlo of another schedule on its stages."""
    pytest.importorskip("yaml")
    from fastpp.model.validate import DATA

    trace = DATA / "whatif_st" / "trace-ST.parquet"
    job = fastpp.read_op_table(trace)
    s = build_schedule("1f1b", job.pp, 8)
    mc = simulate(s, Costs(f=1, b=2), noise=Noise(empirical=job), samples=200)
    times = mc.op_times()
    last = (job.ops.stage == 3).to_numpy() & (job.ops.optype == "forward-compute").to_numpy()
    drawn = times[3, : s.length[3]][s.kind[3, : s.length[3]] == 0]
    assert np.isin(drawn, job.durations[last]).all()
    # the long last stage: its forwards are about twice the others'
    assert drawn.mean() > 1.5 * times[0, : s.length[0]][s.kind[0, : s.length[0]] == 0].mean()
    with pytest.raises(ScheduleError, match=r"needs a measured I op on model block \(stage\) 3"):
        simulate(build_schedule("zb-h1", job.pp, 8), Costs(f=1, b=2, w=1),
                 noise=Noise(empirical=job))
    with pytest.raises(ScheduleError, match=r"run with the schedule's m=2 \(the run has m=1"):
        simulate(build_schedule("interleaved-1f1b", job.pp, 8), Costs(f=1, b=2),
                 noise=Noise(empirical=job))


def test_pictures(tmp_path):
    pytest.importorskip("matplotlib")
    from fastpp import plot

    c, noise = Costs(f=1, b=2, w=1), Noise(0.1)
    runs = [simulate(build_schedule(name, 4, 8), c, noise=noise, samples=100)
            for name in ("1f1b", "zb-h1")]
    assert plot.makespan_cdf(runs, tmp_path / "cdf.png").stat().st_size > 5000
    assert plot.criticality(runs[1], tmp_path / "crit.png").stat().st_size > 5000
    with pytest.raises(fastpp.ScheduleTypeError, match=r"results\[0\] must be a fastpp.Monte"):
        plot.makespan_cdf([1.0], tmp_path / "x.png")
    with pytest.raises(ScheduleError, match="results must hold at least one"):
        plot.makespan_cdf([], tmp_path / "x.png")
    with pytest.raises(fastpp.ScheduleTypeError, match=r"results\['b'\] must be a fastpp.Mon"):
        plot.makespan_cdf({"a": runs[0], "b": 2.0}, tmp_path / "x.png")


def test_cdf_lines_labelled_by_a_dict(tmp_path, monkeypatch):
    """A dict's keys label its lines (the same schedule under two noises), a list's the
    schedules' names."""
    pytest.importorskip("matplotlib")
    from fastpp import plot

    legends = []
    save = plot._save
    monkeypatch.setattr(plot, "_save", lambda plt, fig, path: (
        legends.append([t.get_text() for t in fig.axes[0].get_legend().get_texts()]),
        save(plt, fig, path))[1])
    one = build_schedule("1f1b", 4, 8)
    runs = {f"1f1b, CoV {cov:g}": simulate(one, Costs(f=1, b=2), noise=Noise(cov), samples=50)
            for cov in (0.05, 0.2)}
    plot.makespan_cdf(runs, tmp_path / "cdf.png")
    plot.makespan_cdf(list(runs.values()), tmp_path / "cdf.png")
    assert [t.split(":")[0] for t in legends[0]] == list(runs)
    assert [t.split(":")[0] for t in legends[1]] == ["1f1b", "1f1b"]
    mc = runs["1f1b, CoV 0.2"]
    assert legends[0][1] == f"1f1b, CoV 0.2: mean {mc.mean:.4g}, p95 {mc.quantile(0.95):.4g}"


def test_empirical_noise_from_several_steps():
    """Several steps of one schedule: each op is its Costs time times its step's factor
    times its own factor, and another schedule (another m) draws from both."""
    pytest.importorskip("pandas")
    from fastpp import MeasuredSteps

    first = fastpp.read_torch_trace(DATA / "gpipe")
    # a step on a slower machine, every op alike
    second = changed_run(first, durations=first.durations * 1.5)
    steps = MeasuredSteps([first, second])
    factors = steps.step_factors()
    assert factors[1] / factors[0] == pytest.approx(1.5, rel=1e-12)
    s = steps.schedule
    result = simulate(s, steps.costs())
    base = result.end - result.start
    ratios = steps.op_ratios_by_kind()
    for k, run in enumerate(steps):
        for r in range(s.p):
            kinds = s.kind[r, : s.length[r]]
            for kind in (0, 1):
                mine = run.durations[r, : s.length[r]][kinds == kind]
                drawn = ratios[r][kind][k * mine.size:(k + 1) * mine.size]
                made = base[r, : s.length[r]][kinds == kind] * factors[k] * drawn
                np.testing.assert_allclose(made, mine, rtol=1e-9)
    # ZB-V (m = 2, I and W ops the run lacks: they take B's factors) on the same p
    other = build_schedule("zbv", s.p, 8, 2)
    costs = steps.costs()
    mc = simulate(other, costs, noise=steps.noise(), samples=200)
    plain = simulate(other, costs, noise=Noise(cov=0.0), samples=1).op_times()[..., 0]
    times = mc.op_times()
    for r in range(s.p):  # each op's factor: a step's times one of its device's B or F
        mine = plain[r] > 0
        made = times[r][mine] / plain[r][mine][:, None]
        products = np.concatenate([np.outer(factors, ratios[r][kind]).ravel()
                                   for kind in (0, 1)])
        assert np.isin(np.round(made, 9), np.round(products, 9)).all()
    assert mc.quantile(0.95) > simulate(other, costs).makespan
    alone = MeasuredSteps([first])  # one step: no step-to-step spread
    one = simulate(other, first.costs(), noise=alone.noise(), samples=50)
    assert one.makespan.std() > 0 and one.noise.step_factors.size == 1
    with pytest.raises(ScheduleError, match="at least one MeasuredRun"):
        MeasuredSteps([])
    with pytest.raises(ScheduleError, match="step 1 ran another order"):
        MeasuredSteps([first, fastpp.read_torch_trace(DATA / "zbv")])
    with pytest.raises(ScheduleError, match="step must be 0 with empirical measured steps"):
        Noise(step=0.5, empirical=steps)
    with pytest.raises(AttributeError):  # a tuple: its cached figures stay its steps'
        steps.append(first)


def test_steps_op_factors_are_drawn_with_their_step():
    """A sample that draws one step's shared factor draws its ops' factors from that step
    alone: a moment that slowed some of a step's ops and not others stays one step's."""
    pytest.importorskip("pandas")
    from fastpp import MeasuredSteps

    first = fastpp.read_torch_trace(DATA / "gpipe")
    # the second step's ops slowed unevenly: its factors differ from the first's
    uneven = np.random.default_rng(1).uniform(1.0, 2.0, first.durations.shape)
    steps = MeasuredSteps([first, changed_run(first, durations=first.durations * uneven)])
    s = steps.schedule
    factors, ratios = steps.step_factors(), steps.op_ratios_by_kind()
    mc = simulate(s, steps.costs(), noise=steps.noise(), samples=100)
    plain = simulate(s, steps.costs(), noise=Noise(cov=0.0), samples=1).op_times()[..., 0]
    made = mc.op_times() / plain[..., None]
    mine = [[s.kind[r, : s.length[r]] == kind for kind in (0, 1)] for r in range(s.p)]
    drawn = set()
    for b in range(100):
        steps_of = [j for j in range(2)
                    if all(np.isin(np.round(made[r, : s.length[r], b][mine[r][kind]], 9),
                                   np.round(factors[j] * np.split(ratios[r][kind], 2)[j], 9)).all()
                           for r in range(s.p) for kind in (0, 1))]
        assert len(steps_of) == 1, b
        drawn.add(steps_of[0])
    assert drawn == {0, 1}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_monte_carlo_in_a_forked_child():
    """A child forked after a threaded Monte Carlo runs its own (the pool's threads do not
    survive the fork; work sent to the inherited pool would wait forever)."""
    s, c = build_schedule("1f1b", 4, 16), Costs(f=1.0, b=2.0)
    want = simulate(s, c, noise=Noise(0.1), samples=256).makespan
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if it computes the same samples, killed after 60 s
        signal.alarm(60)
        got = simulate(s, c, noise=Noise(0.1), samples=256).makespan
        os._exit(0 if np.array_equal(got, want) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_a_noise_pickles_and_copies_frozen():
    """Frozen objects (read-only mappings and arrays) pickle and deep-copy, for users'
    processes, and come back frozen."""
    import copy
    import pickle

    noise = Noise(0.1, slow_devices={1: 1.5}, link_delay={(0, 1): 0.2}, spike=(0.1, 2.0))
    for other in (pickle.loads(pickle.dumps(noise)), copy.deepcopy(noise)):
        assert repr(other) == repr(noise)
        assert not other.cov.flags.writeable
        with pytest.raises(TypeError):
            other.slow_devices[2] = 2.0
        costs = Costs(1.0, 2.0)
        sched = build_schedule("1f1b", 2, 4)
        assert np.array_equal(simulate(sched, costs, noise=other, samples=20).makespan,
                              simulate(sched, costs, noise=noise, samples=20).makespan)


def test_a_monte_carlo_keeps_what_ran():
    """Its sensitivities and criticality are the schedule's that ran, not the one written
    into since (a stage map changed after the run gave sensitivities without any link)."""
    sched = build_schedule("1f1b", 4, 8)
    result = simulate(sched, Costs(1.0, 2.0), noise=Noise(0.1), samples=50)
    links, criticality = result.sensitivity["links"], result.criticality
    sched.stage_to_device[:] = 0
    sched.ops = sched.ops[:, :, :4].copy()
    assert result.sensitivity["links"] == links and set(links) == {(0, 1), (1, 2), (2, 3)}
    assert np.array_equal(result.criticality, criticality)
    assert result.op_times(0, 2).shape == (4, 16, 2)


def test_fixed_keeps_the_persistent_part_alone():
    """``Noise.fixed``: the same slow devices, stages and held link delays, nothing drawn; its
    samples are all one makespan, that of the delays worked out by hand on 1F1B p=2 n=1."""
    noise = Noise(0.2, "gamma", slow_devices={1: 2.0}, slow_stages={0: 1.5},
                  link_delay={(0, 1): 0.25}, blocking=True, step=0.1, spike=(0.5, 3.0))
    fixed = noise.fixed()
    assert (fixed.slow_devices, fixed.slow_stages, fixed.link_delay, fixed.blocking) == (
        {1: 2.0}, {0: 1.5}, {(0, 1): 0.25}, True)
    assert not fixed.cov.any() and fixed.step == 0.0 and fixed.spike[0] == 0.0
    mc = simulate(build_schedule("1f1b", 2, 1), Costs(f=1, b=2), noise=fixed, samples=5)
    # F0 1.5 + its held send 0.25, F1 2, B1 4 + its held send 0.25, B0 2 * 1.5 = 3
    assert mc.makespan.tolist() == [1.5 + 0.25 + 2.0 + 4.0 + 0.25 + 3.0] * 5


@pytest.mark.parametrize("name, m", [("1f1b", 1), ("zbv", 2), ("dualpipev", 2),
                                     ("interleaved-1f1b", 2)])
def test_a_samples_times_are_its_makespans(name, m):
    """``MonteCarlo.times(k)``: sample k's ops, timed as its makespan was (to the bit), under
    jitter, a latency link delay or a held one with a slow device, steps and spikes; without
    delays the persistent part's one sample is the deterministic timeline, op by op."""
    s, costs = build_schedule(name, 4, 8, m), Costs(f=1.0, b=2.0, w=1.0, comm=0.05)
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    for noise in (Noise(0.1), Noise(0.1, link_delay={(1, 2): 0.5}),
                  Noise(0.1, link_delay={(1, 2): 0.5}, blocking=True, slow_devices={0: 1.3},
                        step=0.05, spike=(0.1, 2.0))):
        mc = simulate(s, costs, noise=noise, samples=70)
        for k in (0, 69):  # (69: in a short last block)
            start, end = mc.times(k)
            assert end[used].max() - start[used].min() == mc.makespan[k]
            # each op lasts its drawn time (end = start + time, so to a rounding)
            np.testing.assert_allclose(end - start, np.where(used, mc.op_times(k, 1)[..., 0],
                                                             0.0), rtol=1e-12, atol=1e-12)
    steady = simulate(s, costs, noise=Noise(0.1).fixed(), samples=1).times(0)
    plain = simulate(s, costs)
    assert np.array_equal(steady[0][used], plain.start[used])
    assert np.array_equal(steady[1][used], plain.end[used])
    with pytest.raises(ScheduleError, match="sample must be"):
        mc.times(70)


def test_no_step_without_jitter_where_measured_times_replace_the_costs(tmp_path):
    """A bootstrap of a measured run's times does not use the costs: ``steady()`` is None,
    and criticality is shaded on the sample of the median makespan; several steps' factors
    scale the costs, so they keep a step without jitter."""
    run = fastpp.read_torch_trace(DATA / "gpipe")
    s, costs = run.schedule, Costs(f=1.0, b=2.0)  # (costs the bootstrap does not read)
    mc = simulate(s, costs, noise=Noise(empirical=run), samples=65)
    assert mc.steady() is None
    what, makespan, start, end = mc.shaded()
    k = int(np.argsort(mc.makespan, kind="stable")[32])
    assert what == f"sample {k}, the median" and makespan == mc.makespan[k]
    assert np.array_equal(end, mc.times(k)[1])
    plain = simulate(s, costs, noise=Noise(0.1), samples=8)
    assert plain.shaded()[:2] == ("without jitter", simulate(s, costs).makespan)


@pytest.mark.parametrize("scale", [1e-160, 1e-300])
def test_the_spread_of_tiny_makespans(scale):
    """A std's squares underflowed: makespans of 1e-300 s gave a std of 0 (and 1e-160 lost
    digits), so a sweep's mean + lam * std ranked by the mean alone."""
    s = build_schedule("1f1b", 4, 8)
    one = simulate(s, Costs(f=1.0, b=2.0), noise=Noise(0.1), samples=100, seed=0)
    tiny = simulate(s, Costs(f=scale, b=2 * scale), noise=Noise(0.1), samples=100, seed=0)
    assert tiny.std / scale == pytest.approx(one.std, rel=1e-12)
    assert tiny.mean / scale == pytest.approx(one.mean, rel=1e-12)


def test_a_monte_carlo_leaves_a_built_schedule_on_its_fast_path():
    """A Monte Carlo reads a built schedule's shared arrays in place: copying them out of it
    (as compiling it did) left every later simulate of that schedule off the built plan, ten
    times slower. Its samples are those of the same schedule with its own arrays, and a
    schedule written into after a Monte Carlo is compiled again."""
    costs, noise = fastpp.Costs(f=1, b=2, w=0), fastpp.Noise(cov=0.1)
    built = fastpp.build_schedule("1f1b", 4, 8)
    mc = fastpp.simulate(built, costs, noise=noise, samples=50, seed=3)
    assert "_built" in built.__dict__ and mc.schedule is built
    own = fastpp.build_schedule("1f1b", 4, 8)
    own.ops = own.ops.copy()  # its own arrays
    assert "_built" not in own.__dict__
    np.testing.assert_array_equal(
        fastpp.simulate(own, costs, noise=noise, samples=50, seed=3).makespan, mc.makespan)
    gpipe = fastpp.build_schedule("gpipe", 4, 8)
    own.ops = gpipe.ops.copy()  # GPipe's order in 1F1B's arrays: compiled anew
    np.testing.assert_array_equal(
        fastpp.simulate(own, costs, noise=noise, samples=50, seed=3).makespan,
        fastpp.simulate(gpipe, costs, noise=noise, samples=50, seed=3).makespan)


def test_a_monte_carlo_too_large_to_hold_is_refused_by_its_size():
    """Samples a result cannot hold in 1 GiB, and op times of more samples than fit, are
    refused with the bound and the way round it, not numpy's MemoryError (30 million samples
    at p = 8 passed the old 4 GiB bound and ran out of memory; op_times of a million samples
    of 1,024 ops asked numpy for 7.6 GiB)."""
    sched, costs = build_schedule("1f1b", 8, 64), Costs(f=1, b=2)
    most = 2**27 // 17
    with pytest.raises(ScheduleError, match=rf"samples must be at most {most:,} at p = 8"):
        simulate(sched, costs, noise=Noise(cov=0.1), samples=most + 1)
    mc = simulate(sched, costs, noise=Noise(cov=0.1), samples=70_000, seed=1)
    fits = 2**27 // (1024 + 8 * 128)
    with pytest.raises(ScheduleError, match=rf"count must be at most {fits:,} for op_times of "
                                            r"1,024 ops .*with first and count"):
        mc.op_times()
    assert mc.op_times(first=10, count=2).shape == (8, 128, 2)


def test_samples_across_chunk_boundaries_are_each_their_drawn_timeline():
    """A Monte Carlo runs in chunks of ``CHUNK`` samples (Ctrl-C and its bar are heard
    between them): each sample, on either side of a chunk's edge and of a thread's, is the
    reference timeline of its own drawn op times."""
    from fastpp.montecarlo import CHUNK

    s, costs = build_schedule("1f1b", 2, 2), Costs(f=1, b=2, comm=0.1)
    mc = simulate(s, costs, noise=Noise(0.2), samples=2 * CHUNK + 200, seed=5)
    parts = [[parse(token) for token in row] for row in s.tokens()]
    for k in (0, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, mc.samples - 1):
        drawn = mc.op_times(k, 1)[..., 0]
        ref = simulate_reference(s, costs, [[drawn[r, j] for j in range(len(row))]
                                            for r, row in enumerate(parts)])
        assert mc.makespan[k] == pytest.approx(ref.makespan, rel=1e-12), k


def test_ctrl_c_stops_a_long_monte_carlo_between_chunks(tmp_path):
    """A real SIGINT reaches a Monte Carlo of millions of samples within a chunk, and no
    thread is left running it: the process exits within seconds of the signal (it had run to
    the end, and a part that failed had left the other thread computing its half)."""
    import subprocess
    import sys
    import time

    script = tmp_path / "long.py"
    script.write_text(
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # xdist's may ignore it\n"
        "import fastpp\n"
        "s, c = fastpp.build_schedule('1f1b', 8, 64), fastpp.Costs(f=1, b=2)\n"
        "fastpp.simulate(s, c, noise=fastpp.Noise(0.1), samples=100)  # compiled or loaded\n"
        "print('ready', flush=True)\n"
        "t = time.perf_counter()\n"
        "try:\n"
        "    fastpp.simulate(s, c, noise=fastpp.Noise(0.1), samples=7_800_000)\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', time.perf_counter() - t, flush=True)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        out, _ = proc.communicate(timeout=60)
        exited = time.perf_counter() - sent
    finally:
        proc.kill()
    word, seconds = out.split()
    assert word == "interrupted" and float(seconds) < 10, out
    assert proc.returncode == 0 and exited < 5, exited  # the other thread's half not run


def test_an_overlapped_pairs_halves_are_drawn_as_their_ops():
    """DualPipeV's pairs run an F and a B together: each half takes its own kind's jitter,
    weighted by its share of the pair's time, drawn as that op run alone is (keyed by its
    stage, kind and microbatch). The pair had taken the forward's CoV on the whole: a
    backward-only jitter left it exact, and it shared no draw with another schedule's F or
    B, so common random numbers failed where pairs run. Its spikes too: they had been keyed
    as the pair, in other samples than its halves' (a review)."""
    c = Costs(f=1.0, b=2.0, w=1.0)
    s = build_schedule("dualpipev", 4, 8)
    used = np.arange(s.kind.shape[1]) < s.length[:, None]
    pairs = used & (s.kind == int(Op.FB))
    # B's jitter alone, on 2/3 of each pair's time: a CoV of 2/3 x 0.5
    only_b = simulate(s, c, noise=Noise({"F": 0.0, "B": 0.5}), samples=4000, seed=1)
    t = only_b.op_times()[pairs]
    assert np.mean(t.std(axis=1) / t.mean(axis=1)) == pytest.approx(0.5 * 2 / 3, rel=0.03)
    # the halves' factors are those of the same F and B in an interleaved 1F1B of the same
    # eight stages (full backwards), whose ops run apart, spikes and all
    noise = Noise(0.3, spike=(0.3, 3.0))
    paired = simulate(s, c, noise=noise, samples=50, seed=4)
    apart = simulate(build_schedule("interleaved-1f1b", 4, 8, 2), c, noise=noise, samples=50,
                     seed=4)
    other = apart.schedule
    alone = {}
    for r, k in zip(*np.nonzero(np.arange(other.kind.shape[1]) < other.length[:, None]),
                    strict=True):
        base = 1.0 if other.kind[r, k] == int(Op.F) else 2.0
        alone[int(other.kind[r, k]), int(other.stage[r, k]), int(other.mb[r, k])] = \
            apart.op_times()[r, k] / base
    for r, k in zip(*np.nonzero(pairs), strict=True):
        forward = alone[int(Op.F), int(s.stage[r, k]), int(s.mb[r, k])]
        backward = alone[int(Op.B), int(s.stage2[r, k]), int(s.mb2[r, k])]
        np.testing.assert_allclose(paired.op_times()[r, k], 1.0 * forward + 2.0 * backward,
                                   rtol=1e-12)
