"""The eleventh bad-input wave (5 December 2026): each case failed on the code before."""

import pytest

from fastpp import Costs, Noise, ScheduleError, build_schedule, simulate


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
