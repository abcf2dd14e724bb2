"""SCHEDULES.md section 5's closed forms against the simulator (zero latency, uniform costs)."""

import numpy as np
import pytest
from helpers import POINTS

from fastpp import Costs, build_schedule, simulate, theory


@pytest.mark.parametrize("f, b", [(1.0, 2.0), (1.5, 1.0)])
def test_closed_forms_hold_on_the_grid(f, b):
    checked = {"makespan": 0, "peak": 0, "bubble": 0}
    for name, p, n, m in POINTS:
        res = simulate(build_schedule(name, p, n, m), Costs(f=f, b=b))
        expected = theory.makespan(name, p, n, m, f, b)
        if expected is not None:
            assert res.makespan == pytest.approx(expected, rel=1e-12), (name, p, n, m)
            checked["makespan"] += 1
        peak = theory.peak_activations(name, p, n, m)
        if peak is not None:
            np.testing.assert_allclose(res.peak_activations, peak, err_msg=str((name, p, n, m)))
            np.testing.assert_array_equal(res.peak_live, theory.peak_live(name, p, n, m))
            checked["peak"] += 1
        frac = theory.bubble_fraction(name, p, n, m)
        if frac is not None:
            assert res.bubble_ratio == pytest.approx(frac, abs=1e-12), (name, p, n, m)
            checked["bubble"] += 1
    assert min(checked.values()) > 300, checked


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
