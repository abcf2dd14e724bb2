"""SCHEDULES.md section 5's closed forms against the simulator (zero latency, uniform costs)."""

import os

import numpy as np
import pytest
from helpers import POINTS

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
