"""SCHEDULES.md section 5's closed forms against the simulator (zero latency, uniform costs),
and the schedules, costs and group sizes they refuse or take.
"""

import os

import numpy as np
import pytest
from helpers import POINTS

import fastpp
from fastpp import Costs, ScheduleError, build_schedule, simulate, theory

# (f, b, w) mixes; the zero-bubble forms need w <= f and w <= b - w
MIXES = [(1.0, 2.0, 1.0), (1.5, 1.0, 0.25), (2.0, 3.0, 1.0), (1.0, 1.0, 0.5)]


@pytest.mark.parametrize("f, b, w", MIXES)
def test_closed_forms_hold_on_the_grid(f, b, w):
    checked = dict.fromkeys(("idle", "span", "makespan", "peak", "live", "max live", "bubble"), 0)
    for name, p, n, m in POINTS:
        res = simulate(build_schedule(name, p, n, m), Costs(f=f, b=b, w=w, gamma=0.4))
        where = (name, p, n, m)
        if (x := theory.idle(name, p, n, m, f, b, w)) is not None:
            assert res.idle.max() == pytest.approx(x, abs=1e-9), where
            checked["idle"] += 1
        if (x := theory.span_idle(name, p, n, m, f, b, w)) is not None:
            np.testing.assert_allclose(res.span.max() - res.busy, x, atol=1e-9, err_msg=str(where))
            checked["span"] += 1
        if (x := theory.makespan(name, p, n, m, f, b, w)) is not None:
            assert res.makespan == pytest.approx(x, rel=1e-12), where
            checked["makespan"] += 1
        if (x := theory.peak_activations(name, p, n, m, gamma=0.4)) is not None:
            np.testing.assert_allclose(res.peak_activations, x, err_msg=str(where))
            checked["peak"] += 1
        if (x := theory.peak_live(name, p, n, m)) is not None:
            np.testing.assert_array_equal(res.peak_live, x, err_msg=str(where))
            checked["live"] += 1
        if (x := theory.peak_live_max(name, p, n, m)) is not None:
            assert res.peak_live.max() == x, where
            checked["max live"] += 1
        if (x := theory.bubble_fraction(name, p, n, m, f, b)) is not None:
            assert res.bubble_ratio == pytest.approx(x, abs=1e-12), where
            checked["bubble"] += 1
    # each closed form on a few dozen points at least (the span form holds for fewest)
    assert min(checked.values()) > (10 if os.environ.get("FASTPP_SMALL") else 40), checked


@pytest.mark.parametrize("p, n, m", [(4, 8, 2), (4, 16, 4), (8, 16, 2), (3, 9, 3)])
def test_interleaved_idle_and_peak(p, n, m):
    """Idle per device (p-1)(f+b)/m; peak p + (p-1-2r)/m units when the warmup < n*m."""
    f, b = 2.0, 4.0
    res = simulate(build_schedule("interleaved-1f1b", p, n, m), Costs(f=f, b=b))
    np.testing.assert_allclose(res.idle, (p - 1) * (f + b) / m)
    r = np.arange(p)
    np.testing.assert_allclose(res.peak_activations, p + (p - 1 - 2 * r) / m)


def test_teaching_text_corrections():
    # 1F1B peak is p on device 0 once n >= p (the chapter said p-1)
    assert theory.peak_live("1f1b", 4, 8)[0] == 4
    # interleaved bubble over compute time for p=4, m=2 is 3/(2n), not 7/(2n)
    n = 8
    res = simulate(build_schedule("interleaved-1f1b", 4, n, 2), Costs(f=1, b=2))
    assert res.idle[0] / res.busy[0] == pytest.approx(3 / (2 * n))


@pytest.mark.parametrize("formula", [theory.idle, theory.span_idle, theory.makespan,
                                     theory.bubble_fraction, theory.peak_live,
                                     theory.peak_live_max, theory.peak_activations])
def test_unknown_names_raise(formula):
    """None means "no closed form known"; a misspelt name is an error, not a None."""
    with pytest.raises(ScheduleError, match=r"schedule must be one of .* \(got '1F1B'\)"):
        formula("1F1B", 4, 8)


def test_max_peak_live_is_peak_live_max_under_its_old_name():
    """The closed form takes the sweep column's name; the old one warns and gives the same."""
    with pytest.warns(DeprecationWarning, match="call peak_live_max"):
        old = theory.max_peak_live("v-half", 4, 8, 2)
    assert old == theory.peak_live_max("v-half", 4, 8, 2) == 2 * ((4 + 2) // 2)  # chunks


def test_theory_gamma_past_one():
    """``gamma=2`` (M_W twice M_B, which Costs refuses): ZB-H1's closed form gave peaks
    [4, 5, 6, 7], growing down the pipeline, for a run that cannot exist."""
    with pytest.raises(ScheduleError, match=r"gamma must be in \[0, 1\] \(got 2\)"):
        fastpp.theory.peak_activations("zb-h1", 4, 8, 1, gamma=2)


def test_closed_forms_of_schedules_that_exist():
    """``theory.makespan("1f1b", 4, 8, m=3)`` gave 33.0 for a schedule ``build_schedule``
    refuses, and ``f=1e308`` an infinite makespan; a large ``n`` stays the closed forms' to
    answer."""
    from fastpp import theory

    with pytest.raises(ScheduleError, match=r"m must be 1 \(one stage per device\) for '1f1b' "
                                            r"\(got m=3\)"):
        theory.makespan("1f1b", 4, 8, m=3)
    with pytest.raises(ScheduleError, match=r"f must be in \(0, 1e\+290\] \(got 1e\+308\)"):
        theory.makespan("1f1b", 4, 8, f=1e308, b=1e308)
    assert theory.makespan("1f1b", 8, 10**9) == 3 * 10**9 + 7 * 3  # past build_schedule's size


@pytest.mark.parametrize("fb", [0.25, 1.5, 4.0])
def test_dualpipe_idle_closed_form_only_where_it_holds(fb):
    """theory.idle('dualpipe') gave -2.25, 1.5 and 9.0 where simulate gives 10.75, 4.5 and 11:
    the form holds for a pair between its longer half and both halves in a row."""
    assert fastpp.theory.idle("dualpipe", 8, 20, 1, f=1, b=2, w=1, fb=fb) is None
    for fb in (2.0, 2.5, 3.0):  # inside: the simulated idle
        ran = fastpp.simulate(build_schedule("dualpipe", 8, 20), fastpp.Costs(f=1, b=2, w=1,
                                                                              fb=fb))
        assert fastpp.theory.idle("dualpipe", 8, 20, 1, f=1, b=2, w=1, fb=fb) == \
            pytest.approx((ran.makespan - ran.busy).max())


def test_theory_takes_g_as_build_schedule_does():
    with pytest.raises(ScheduleError, match=r"G must not be given for '1f1b': it takes no "
                                            r"options \(got G=2\)"):
        fastpp.theory.idle("1f1b", 4, 8, G=2)
    assert build_schedule("interleaved-1f1b", 4, 8, 2, G=None).n == 8  # None: the default
    with pytest.raises(ScheduleError, match=r"gamma must be in \[0, 1\] \(got -1\)"):
        fastpp.theory.peak_activations("zb-h1", 4, 8, gamma=-1)


@pytest.mark.parametrize("call", [lambda: theory.idle("1f1b", 2, 4, 1, 0.0),
                                  lambda: theory.bubble_fraction("chimera", 4, 4, 1, 0.0, 0.0)])
def test_closed_forms_refuse_the_costs_costs_refuses(call):
    """f = 0 gave an idle time of 2, and f = b = 0 a bubble ratio of 0.2 (0 / 0)."""
    with pytest.raises(ScheduleError, match=r"f must be in \(0, 1e\+290\] \(got 0\.0\)"):
        call()
    assert theory.idle("zb-h1", 2, 4, 1, 1.0, 2.0, 0.0) is not None  # w = 0 is a cost


def test_the_bubble_closed_form_takes_the_group_size():
    """``bubble_fraction`` alone had no ``G``: it refused a schedule that builds."""
    build_schedule("interleaved-1f1b", 4, 10, 2, G=5)
    assert theory.bubble_fraction("interleaved-1f1b", 4, 10, 2, G=5) is None  # none known
    res = simulate(build_schedule("interleaved-1f1b", 4, 8, 2, G=4), Costs(1, 2))
    assert theory.bubble_fraction("interleaved-1f1b", 4, 8, 2, G=4) == pytest.approx(
        res.bubble_ratio, rel=1e-12)
