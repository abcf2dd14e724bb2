import numpy as np
import pytest

from fastpp import Costs, ScheduleError, build_schedule


def test_chunk_times_are_divided_by_m_and_expanded_per_stage():
    sched = build_schedule("interleaved-1f1b", 2, 4, 2)
    c = Costs(f=[2.0, 4.0], b=[4.0, 8.0], w=1.0, comm=0.5, gamma=0.4).per_stage(sched)
    assert c.tf.tolist() == [1.0, 2.0, 1.0, 2.0]  # per device, stage s on device s % p
    assert c.tb.tolist() == [2.0, 4.0, 2.0, 4.0]
    assert c.tw.tolist() == [0.5] * 4
    assert c.unit.tolist() == [0.5] * 4
    assert c.comm.tolist() == [0.5] * 4  # latency is not divided by m
    assert c.gamma.tolist() == [0.4] * 4
    assert np.isnan(c.tfb).all()  # not given: the overlapped pair takes f + b
    per_stage = Costs(f=[1, 2, 3, 4], b=8).per_stage(sched)
    assert per_stage.tf.tolist() == [0.5, 1.0, 1.5, 2.0]


@pytest.mark.parametrize("kwargs, message", [
    ({"f": -1, "b": 2}, r"costs\.f must be finite and > 0 \(got -1\)"),
    ({"f": 0, "b": 2}, r"costs\.f must be finite and > 0 \(got 0\)"),
    ({"f": 1, "b": np.nan}, r"costs\.b must be finite and > 0 \(got nan\)"),
    ({"f": 1, "b": 2, "comm": -0.1}, r"costs\.comm must be finite and >= 0"),
    ({"f": 1, "b": 2, "w": [1, np.inf]}, r"costs\.w must be finite and >= 0 \(got \[1\.0, inf\]\)"),
    ({"f": 1, "b": 2, "gamma": 1.5}, r"costs\.gamma must be in \[0, 1\] \(got 1\.5\)"),
    ({"f": "fast", "b": 2}, r"costs\.f must be a number or an array of numbers"),
    ({"f": [[1.0]], "b": 2}, r"costs\.f must be a scalar or a 1-D array \(got shape \(1, 1\)\)"),
    ({"f": 1, "b": 2, "fb": 0}, r"costs\.fb must be finite and > 0"),
])
def test_bad_costs_are_named(kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        Costs(**kwargs)


def test_costs_must_fit_the_schedule():
    sched = build_schedule("1f1b", 4, 4)
    with pytest.raises(ScheduleError, match=r"costs\.f must be a scalar or an array of length "
                                            r"p=4 or V=4 \(got shape \(3,\)\)"):
        Costs(f=[1, 1, 1], b=2).per_stage(sched)
    with pytest.raises(ScheduleError, match=r"costs\.w must be <= costs\.b \(got w=3\.0, b=2\.0"):
        Costs(f=1, b=2, w=3).per_stage(sched)


def test_fields_after_b_are_keyword_only_and_costs_compare_by_value():
    with pytest.raises(TypeError):
        Costs(1.0, 2.0, 1.0)  # which of w, comm, gamma would 1.0 be?
    a = Costs(1.0, [2.0, 3.0], w=1.0)
    assert a == Costs(f=1, b=np.array([2, 3]), w=1) and hash(a) == hash(Costs(1, [2, 3], w=1))
    assert a != Costs(1.0, [2.0, 3.0]) and a != Costs(1.0, [2.0, 3.0, 4.0], w=1.0)
    assert a != (1.0, 2.0) and len({a, Costs(1, [2, 3], w=1), Costs(1, 2)}) == 2
    arrays = a.arrays
    assert arrays["b"].tolist() == [2.0, 3.0] and np.isnan(arrays["fb"])
    with pytest.raises(ValueError, match="read-only"):
        arrays["b"][0] = 5.0
