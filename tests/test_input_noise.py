"""Bad input to the noise model and the Monte Carlo: ``fastpp.Noise``'s coefficients, link
delays and absorption, ``samples`` and seeds given without noise, statistics near the float
limit, and the robust objectives' weight ``lam``.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import numpy as np
import pytest

import fastpp
from fastpp import (
    Costs,
    Noise,
    ScheduleError,
    ScheduleTypeError,
    build_schedule,
    simulate,
)

ONE = build_schedule("1f1b", 4, 8)


def test_samples_past_the_memory_a_result_keeps():
    """10**8 samples at p = 128 passed (MAX_SAMPLES) and NumPy raised its MemoryError for a
    47.7 GiB array."""
    with pytest.raises(ScheduleError, match=r"samples must be at most 522,247 at p = 128"):
        fastpp.simulate(build_schedule("1f1b", 128, 128), noise=fastpp.Noise(0.1),
                        samples=10**8)


def test_mean_and_std_of_makespans_near_the_float_limit():
    """Finite makespans whose sums overflow: mean and std were inf."""
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.0, spike=(0.01, 1e160)), samples=1000)
    exact = np.asarray(mc.makespan, np.longdouble)
    assert mc.std == pytest.approx(float(exact.std(ddof=1)), rel=1e-12)
    assert mc.mean == pytest.approx(float(exact.mean()), rel=1e-12)
    # makespans past the costs' bound (1e290) are refused, as costs are: their sums, near
    # the float limit, overflowed
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.0, link_delay={(0, 1): 1e287},
                                                 blocking=True), samples=10)
    assert np.isfinite(mc.makespan).all() and mc.mean == pytest.approx(mc.makespan[0])
    assert mc.std == 0.0
    with pytest.raises(ScheduleError, match=r"noise must keep the makespan at most 1e\+290"):
        fastpp.simulate(ONE, noise=fastpp.Noise(0.0, link_delay={(0, 1): 1e307},
                                                blocking=True), samples=10)


def test_absorption_tolerance_that_overflows():
    """tolerance=1e308 passed its check and every delay came back inf."""
    mc = fastpp.simulate(ONE, noise=fastpp.Noise(0.05), samples=100)
    with pytest.raises(ScheduleError, match=r"tolerance must keep \(1 \+ tolerance\) x the mean"):
        mc.absorption(tolerance=1e308, steps=2)


@pytest.mark.parametrize("noise", [fastpp.Noise(1e-155, "gamma"),
                                   fastpp.Noise(0.0, "gamma", step=1e-300)])
def test_gamma_with_a_coefficient_below_float_resolution(noise):
    """The shape 1/CoV^2 overflowed, and the run was refused for overflowing slow factors,
    spikes or link delays it did not have. Such a factor is exactly 1."""
    mc = fastpp.simulate(ONE, noise=noise, samples=8)
    assert (mc.makespan == fastpp.simulate(ONE).makespan).all()


def test_a_robust_objectives_weight_is_bounded():
    """``lam = 1e308`` made ``mean + lam * std`` overflow for every candidate: a tie at inf,
    the first kept, reported as the value."""
    costs = fastpp.Costs(f=1.0, b=2.0, w=1.0)
    with pytest.raises(ScheduleError, match=r"lam must be in \[0, 1e\+06\]"):
        fastpp.optimize(4, 12, costs, method="heuristic", progress=False,
                        objective="mean+std", noise=fastpp.Noise(0.5), lam=1e308)
    rows = fastpp.sweep("1f1b", p=2, n=4, progress=False, noise=fastpp.Noise(0.1), samples=8)
    with pytest.raises(ScheduleError, match=r"lam must be in \[0, 1e\+06\]"):
        fastpp.best_within_budget(rows, objective="mean+std", lam=1e7)


def test_a_link_named_in_both_orders():
    """A link's delay holds both ways; naming it twice had added the two delays."""
    with pytest.raises(ScheduleError, match=r"link_delay must name each link once: .* \(got "
                                            r"\(0, 1\) and \(1, 0\)\)"):
        Noise(link_delay={(0, 1): 0.1, (1, 0): 0.2})
    with pytest.raises(ScheduleError, match="name each link once"):
        Noise().with_link_delay({(2, 1): 0.1, (1, 2): 0.1})


def test_absorption_under_blocking_is_the_blocking_delay():
    """With blocking=True the link thresholds are of the delay the sender holds, as the run
    models it (they had been of a latency)."""
    s, c = build_schedule("1f1b", 4, 8), Costs(f=1.0, b=2.0, comm=0.05)
    mc = simulate(s, c, noise=Noise(0.2, blocking=True), samples=64, seed=0)
    for link, delay in mc.absorption(steps=14)["links"].items():
        def mean(x, link=link):
            return simulate(s, c, noise=Noise(0.2, blocking=True, link_delay={link: x}),
                            samples=64, seed=0).mean
        assert mean(delay) <= 1.01 * mc.mean < mean(delay * 1.001)


@pytest.mark.parametrize("cov", ["0.1", [0.1], True])
def test_noise_cov_says_what_it_takes(cov):
    """A string said "a number or an array of numbers", and the array then "one number"."""
    with pytest.raises(ScheduleError, match=r"cov must be a number or a mapping of kind to "
                                            r"number \(got "):
        fastpp.Noise(cov)


def test_one_number_says_one_number():
    """Every scalar parameter said "a number or an array of numbers" for a string."""
    with pytest.raises(ScheduleError, match=r"step must be a number \(got 'x'\)"):
        fastpp.Noise(0.1, step="x")
    with pytest.raises(ScheduleError, match=r"step must be one number \(got \[0.1\]\)"):
        fastpp.Noise(0.1, step=[0.1])


def test_samples_without_noise_is_refused():
    """``simulate(s, c, samples=100)`` returned the deterministic ``Result`` and ``sweep``
    and ``plan`` no noisy column, unsaid: no Monte Carlo ran."""
    from fastpp.model import plan

    with pytest.raises(ScheduleError, match=r"samples counts the Monte Carlo's timelines: give "
                                            r"noise= too \(got samples=100 without noise\)"):
        simulate(ONE, Costs(1.0, 2.0), samples=100)
    with pytest.raises(ScheduleError, match=r"give noise= too \(got samples=8 without noise\)"):
        fastpp.sweep("1f1b", p=4, n=8, samples=8, progress=False)
    with pytest.raises(ScheduleError, match=r"give noise= too \(got samples=8 without noise\)"):
        plan("llama2-7b", 16, seq=1024, global_batch=16, pp=[2], samples=8)
    assert simulate(ONE, Costs(1.0, 2.0), noise=Noise(0.05)).samples == 1000  # the default


@pytest.mark.parametrize("seed", ["x", 1.5])
def test_simulate_refuses_a_seed_of_the_wrong_type_without_noise(seed):
    with pytest.raises(ScheduleTypeError, match=r"seed must be an integer"):
        simulate(build_schedule("1f1b", 2, 4), Costs(1, 2), seed=seed)
    assert simulate(build_schedule("1f1b", 2, 4), Costs(1, 2), seed=np.int64(3)).makespan


def test_an_unused_seed_is_refused_by_sweep_as_by_the_others():
    """The noise checks were written four times and had drifted: sweep alone ran
    ``seed=-1`` without noise, which simulate, plan and optimize refuse."""
    with pytest.raises(ScheduleError, match=r"seed must be an integer in \[0, 2\*\*64\) "
                                            r"\(got -1\)"):
        fastpp.sweep(["1f1b"], p=[2], n=[2], seed=-1, progress=False)
