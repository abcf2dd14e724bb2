"""fastpp.engine, the batch entry of sweeps and plan: every way of giving a cost field lays out
the same numbers as fastpp.simulate with those Costs, on any number of threads."""

import dataclasses

import numpy as np
import pytest

import fastpp
from fastpp import Costs, ScheduleError, batch, build_schedule, engine, simulate
from fastpp.costs import KINDS, SLOTS

POINTS = [("1f1b", 4, 8, 1), ("interleaved-1f1b", 2, 4, 3), ("zbv", 3, 6, 2),
          ("dualpipe", 2, 4, 1), ("gpipe", 1, 3, 1)]


def keys(points=POINTS):
    sid = np.array([fastpp.SCHEDULES[name].sid for name, *_ in points])
    p, n, m = (np.array(col) for col in list(zip(*points, strict=True))[1:])
    return sid, p, n, m, p.copy()


def per_stage_costs(points=POINTS):
    """Each point's Costs: f and act per stage, w per device, the rest one value."""
    out = []
    for k, (_, p, _, m) in enumerate(points):
        V = int(engine.stages(fastpp.SCHEDULES[points[k][0]].sid, p, m))
        out.append(Costs(f=1.0 + np.arange(V) / V, b=2.0 + k, w=np.full(p, 0.5), comm=0.01 * k,
                         act=np.linspace(1.0, 2.0, V), message_bytes=3.0, bandwidth=100.0))
    return out


def layout_fields(costs, p):
    """``per_stage_costs``'s fields as ``engine.cost_layout`` takes them."""
    return {  # f and act per stage, w per device as segments, comm per point, b per point
        "f": np.concatenate([c.arrays["f"] for c in costs]),
        "act": np.concatenate([c.arrays["act"] for c in costs]),
        "w": (np.concatenate([c.arrays["w"] for c in costs]), np.r_[0, np.cumsum(p)[:-1]], p),
        "b": np.array([float(c.arrays["b"]) for c in costs]),
        "comm": np.array([float(c.arrays["comm"]) for c in costs]),
        "message_bytes": 3.0, "bandwidth": 100.0}  # gamma and fb: Costs's defaults


def test_stage_and_point_fields_give_simulates_numbers():
    sid, p, n, m, G = keys()
    V = engine.stages(sid, p, m)
    first = np.r_[0, np.cumsum(V)[:-1]]
    costs = per_stage_costs()
    fields = layout_fields(costs, p)
    for workers in (1, 2):
        rows = engine.run(sid, p, n, m, G, fields, first=first, V=V, workers=workers,
                          peaks=True)
        assert (rows.status == batch.OK).all()
        for i, ((name, *point), c) in enumerate(zip(POINTS, costs, strict=True)):
            res = simulate(build_schedule(name, *point), c)
            assert rows.out[i, batch.MAKESPAN] == res.makespan
            assert rows.out[i, batch.BUBBLE] == res.bubble_ratio
            np.testing.assert_array_equal(
                rows.peaks[rows.peak_at[i]: rows.peak_at[i] + point[0]], res.peak_activations)


def test_the_layout_follows_costs_fields():
    values, at = engine.cost_layout({"f": 1.0, "b": [2.0, 3.0]}, 2)
    assert at.shape == (2, len(SLOTS), 2) and (at[:, :, 1] == 1).all()
    given = {"f": [1.0, 1.0], "b": [2.0, 3.0]}
    for k, (name, _) in enumerate(SLOTS):  # defaults are Costs's own: NaN where "not given"
        want = given[name] if name in given else [engine.DEFAULTS[name]] * 2
        np.testing.assert_array_equal(values[at[:, k, 0]], want)
    # overhead: one input per op kind, from one value for all or a dict by kind (missing: 0)
    values, at = engine.cost_layout({"f": 1.0, "b": 2.0, "overhead": {"B": [0.5, 0.25]}}, 2)
    kinds = [k for k, (name, _) in enumerate(SLOTS) if name == "overhead"]
    assert [SLOTS[k][1] for k in kinds] == list(KINDS)
    assert [values[at[:, k, 0]].tolist() for k in kinds] == [[0, 0], [0.5, 0.25], [0, 0], [0, 0]]
    with pytest.raises(ScheduleError, match=r"costs.f must be given \(it has no default\)"):
        engine.cost_layout({"b": 2.0}, 2)
    with pytest.raises(ScheduleError, match=r"costs.b must hold one value, one per point \(2\) "
                                            r"or one per stage \(5\) \(got 3\)"):
        engine.cost_layout({"f": 1.0, "b": [1.0, 2.0, 3.0]}, 2, np.array([0, 2]),
                           np.array([2, 3]))


def test_overhead_and_send_per_kind_give_simulates_numbers():
    """The batch entry carries each op kind's fixed time and its send: per stage, per point or
    per kind."""
    sid, p, n, m, G = keys()
    V = engine.stages(sid, p, m)
    first = np.r_[0, np.cumsum(V)[:-1]]
    costs = per_stage_costs()
    fixed = [{"F": 0.1 * (k + 1), "B": np.linspace(0.2, 0.4, int(V[k])), "I": 0.3, "W": 0.05}
             for k in range(len(POINTS))]
    sends = [{"F": np.linspace(0.3, 0.1, int(V[k])), "B": 0.05 * (k + 1), "I": 0.15}
             for k in range(len(POINTS))]
    fields = layout_fields(costs, p)
    fields["overhead"] = {"F": np.array([o["F"] for o in fixed]),
                          "B": np.concatenate([o["B"] for o in fixed]), "I": 0.3, "W": 0.05}
    fields["send"] = {"F": np.concatenate([o["F"] for o in sends]),
                      "B": np.array([o["B"] for o in sends]), "I": 0.15}
    rows = engine.run(sid, p, n, m, G, fields, first=first, V=V, peaks=True)
    assert (rows.status == batch.OK).all()
    for i, ((name, *point), c) in enumerate(zip(POINTS, costs, strict=True)):
        with_fixed = dataclasses.replace(c, overhead=fixed[i], send=sends[i])
        res = simulate(build_schedule(name, *point), with_fixed)
        assert res.makespan > simulate(build_schedule(name, *point), c).makespan
        assert rows.out[i, batch.MAKESPAN] == res.makespan
        assert rows.out[i, batch.BUBBLE] == res.bubble_ratio


def test_status_and_reasons():
    sid, p, n, m, G = keys(POINTS[:1])
    rows = engine.run(sid, p, n, m, G, {"f": 1.0, "b": 1.0, "w": 2.0})
    assert rows.status.tolist() == [batch.W_ABOVE_B] and np.isnan(rows.out[0, 0])
    assert engine.status_reason(batch.W_ABOVE_B, 4, 4, np.ones((9, 2)), np.ones(9)) == \
        "w must be <= b"
    values, at = engine.cost_layout({"f": 1.0, "b": 2.0}, 1)
    at[0, 0, 1] = 3  # f of length 3 on p = V = 4
    rows = engine.start(sid, p, n, m, G, values, at).result()
    assert rows.status.tolist() == [batch.BAD_LENGTH]
    assert engine.status_reason(int(rows.status[0]), 4, 4, at[0], values) == (
        "costs.f must be a scalar or an array of length p=4 or V=4 (got 3)")
    at[0, 0, 1], at[0, SLOTS.index(("overhead", "I")), 1] = 1, 3
    rows = engine.start(sid, p, n, m, G, values, at).result()
    assert engine.status_reason(int(rows.status[0]), 4, 4, at[0], values) == (
        "costs.overhead['I'] must be a scalar or an array of length p=4 or V=4 (got 3)")


def test_engine_refuses_points_it_would_misread():
    """``fastpp.engine.start`` and ``run``, the layer under sweep and plan: ``p = 2.5`` was read
    as 2, ``m = 0`` crashed the kernel, an unknown schedule id or a short key read past it."""
    sid = np.array([fastpp.SCHEDULES["1f1b"].sid])
    p, n, m = np.array([2]), np.array([4]), np.array([1])
    costs = {"f": 1.0, "b": 2.0}
    assert engine.run(sid, p, n, m, p, costs).status.tolist() == [fastpp.batch.OK]
    for args, message in (
            ((sid, np.array([2.5]), n, m, p), r"p must hold positive integers below 2\*\*31 "
                                              r"\(got \[2.5\]\)"),
            ((sid, p, n, np.array([0]), p), r"m must hold positive integers below 2\*\*31 "
                                            r"\(got \[0\]\)"),
            ((np.array([99]), p, n, m, p), r"sid must hold integers in 0\.\.\d+ \(got \[99\]\)"),
            ((sid, p, np.array([4, 4]), m, p), r"sid, p, n, m and G must be 1-D arrays of one "
                                               r"length, a value per point \(got shapes \[\(1,\), "
                                               r"\(1,\), \(2,\), \(1,\), \(1,\)\]\)")):
        with pytest.raises(ScheduleError, match=message):
            engine.run(*args, costs)
    values, at = engine.cost_layout(costs, 2)
    with pytest.raises(ScheduleError, match=r"at must be cost_layout's, of shape \(1, \d+, 2\) "
                                            r"for 1 points \(got \(2, \d+, 2\)\)"):
        engine.start(sid, p, n, m, p, values, at)


def test_stages_are_the_built_schedules():
    """``engine.stages`` (what a sweep or plan lays per-stage costs out by) is each registered
    schedule's own ``V``: ``p m``, ``2 p`` for the two-direction ones."""
    for name, spec in fastpp.SCHEDULES.items():
        p = 4
        m = spec.default_m
        n = 2 * p * max(m, 2)
        try:
            sched = build_schedule(name, p, n, m)
        except ScheduleError:
            continue  # a shape this one does not take (its own tests build it)
        assert int(engine.stages(spec.sid, p, m)) == sched.V, name
