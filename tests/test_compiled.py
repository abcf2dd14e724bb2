"""The compiled schedule's one-pass batch timeline against ``simulate`` (bit for bit) and the
reference simulator, on every generator and on random schedules, one and many cost columns."""

import dataclasses

import numba
import numpy as np
import pytest
from helpers import POINTS, random_costs, random_legal_rows, random_overhead
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from reference import assert_agrees, simulate_reference

import fastpp
from fastpp import (
    Costs,
    Schedule,
    ScheduleError,
    ScheduleTypeError,
    batch,
    build_schedule,
    engine,
    kernels,
    simulate,
)
from fastpp.compiled import (
    BY_DEVICE,
    INPUT,
    evaluate,
    frontier_peaks,
    memory_vectors,
    op_durations,
    plan_schedule,
    timeline_batch,
)


def assert_column_equals(batch, compiled, b, result):
    """Column ``b`` of ``batch`` is ``result`` (a ``simulate`` output), times bit for bit."""
    sched = result.schedule
    used = np.arange(sched.kind.shape[1]) < sched.length[:, None]
    at = compiled.index[used]
    np.testing.assert_array_equal(batch.start[at, b], result.start[used])
    np.testing.assert_array_equal(batch.end[at, b], result.end[used])
    assert batch.makespan[b] == result.makespan
    assert batch.bubble_ratio[b] == result.bubble_ratio
    assert batch.span_bubble_ratio[b] == result.span_bubble_ratio
    np.testing.assert_array_equal(batch.busy[:, b], result.busy)
    np.testing.assert_array_equal(batch.span[:, b], result.span)
    assert abs(batch.serial_time[b] - result.serial_time) <= 1e-12 * result.serial_time
    np.testing.assert_array_equal(batch.peak_activations[:, b], result.peak_activations)
    np.testing.assert_array_equal(batch.peak_live, result.peak_live)


def assert_plain_pass_agrees(compiled, costs_list, sched, per_op, batch):
    """``op_durations`` then ``timeline_batch``, the kernels alone, give ``evaluate``'s times."""
    rows = np.stack([np.asarray(c.per_stage(sched)) for c in costs_list], axis=2)
    N, columns = compiled.num_ops, len(costs_list)
    if per_op is None:
        per_op = np.empty((N, columns))
        op_durations(compiled.kind, compiled.stage, compiled.stage2, *(
            np.ascontiguousarray(rows[k]) for k in (kernels.TF, kernels.TB, kernels.TI, kernels.TW,
                                                    kernels.TFB, kernels.SB)), per_op)
    start, end = np.empty((N, columns)), np.empty((N, columns))
    timeline_batch(compiled.previous, compiled.producer, compiled.link, per_op,
                   np.ascontiguousarray(rows[kernels.COMM]), start, end)
    np.testing.assert_array_equal(start, batch.start)
    np.testing.assert_array_equal(end, batch.end)


def check(sched, costs_list, durations=None):
    """Evaluate ``costs_list`` in one batch and compare every column with ``simulate``."""
    compiled = sched.compiled()
    per_op = None
    if durations is not None:
        used = np.arange(sched.kind.shape[1]) < sched.length[:, None]
        per_op = np.ascontiguousarray(np.stack([d[used] for d in durations], axis=1)
                                      [np.argsort(compiled.index[used])])
    batch = evaluate(compiled, [c.per_stage(sched) for c in costs_list], per_op)
    assert_plain_pass_agrees(compiled, costs_list, sched, per_op, batch)
    lean = evaluate(compiled, [c.per_stage(sched) for c in costs_list], per_op, times=False)
    for name in ("makespan", "busy", "span", "serial_time", "peak_activations"):
        np.testing.assert_array_equal(getattr(lean, name), getattr(batch, name))
    for b, costs in enumerate(costs_list):
        given = None if durations is None else durations[b]
        assert_column_equals(batch, compiled, b, simulate(sched, costs, durations=given))
    return batch


def test_order_is_topological():
    sched = build_schedule("dualpipe", 4, 8)
    c = sched.compiled()
    assert c is sched.compiled()  # cached
    here = np.arange(c.num_ops)
    assert np.all(c.previous < here)
    assert np.all(c.producer < here[:, None])
    assert np.all((c.producer >= 0).sum(axis=1)[c.kind == fastpp.Op.FB] >= 1)
    # a pair op inside the route has both inputs, each over a link when across devices
    assert np.any((c.producer >= 0).all(axis=1) & (c.kind == fastpp.Op.FB))
    assert np.all(c.link[c.producer < 0] == -1)


@pytest.mark.parametrize("name", sorted(fastpp.SCHEDULES))
def test_generators_agree_with_simulate(name, rng):
    points = [pt for pt in POINTS if pt[0] == name]
    for _, p, n, m in points[:: max(1, len(points) // 60)]:
        sched = build_schedule(name, p, n, m)
        fixed = dataclasses.replace(random_costs(rng, sched, True), fb=rng.uniform(1, 4),
                                    overhead=random_overhead(rng, sched),
                                    send=random_overhead(rng, sched, "FBI"))
        check(sched, [Costs(1.0, 2.0), random_costs(rng, sched), random_costs(rng, sched, True),
                      fixed])
        check(sched, [random_costs(rng, sched, True)])  # B = 1


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 5), n=st.integers(1, 6),
       m=st.integers(1, 3), vshape=st.booleans(), split=st.booleans(), pairs=st.booleans(),
       columns=st.integers(1, 5))
def test_random_schedules_agree_with_simulate_and_reference(seed, p, n, m, vshape, split, pairs,
                                                            columns):
    rng = np.random.default_rng(seed)
    m = 2 if vshape else m
    rows, device = random_legal_rows(rng, p, n, m, vshape=vshape, split=split, pairs=pairs)
    sched = Schedule.from_tokens(rows, device, n=n, m=m)
    costs_list = []
    for _ in range(columns):
        costs = random_costs(rng, sched, split)
        if pairs and rng.random() < 0.5:
            costs = dataclasses.replace(costs, fb=rng.uniform(0.5, 4.0, sched.V))
        if rng.random() < 0.5:  # fixed times per op and per message sent
            costs = dataclasses.replace(costs, overhead=random_overhead(rng, sched),
                                        send=random_overhead(rng, sched, "FBI"))
        costs_list.append(costs)
    check(sched, costs_list)
    assert_agrees(simulate(sched, costs_list[-1]), simulate_reference(sched, costs_list[-1]))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 5), n=st.integers(1, 6),
       split=st.booleans(), pairs=st.booleans(), columns=st.integers(1, 4))
def test_per_op_durations_agree(seed, p, n, split, pairs, columns):
    rng = np.random.default_rng(seed)
    rows, device = random_legal_rows(rng, p, n, 1, split=split, pairs=pairs)
    sched = Schedule.from_tokens(rows, device, n=n, m=1)
    costs_list = [Costs(1.0, 2.0, comm=float(rng.uniform(0, 0.5))) for _ in range(columns)]
    durations = [rng.uniform(0.05, 3.0, sched.kind.shape) for _ in range(columns)]
    check(sched, costs_list, durations)


def test_deadlock_raises_simulates_error():
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]
    sched = Schedule.from_tokens(rows)
    with pytest.raises(ScheduleError) as compiled_error:
        sched.compiled()
    with pytest.raises(ScheduleError) as simulate_error:
        simulate(sched)
    assert str(compiled_error.value) == str(simulate_error.value)
    assert "deadlocks" in str(compiled_error.value)


def test_evaluate_needs_a_column():
    with pytest.raises(ScheduleError, match="stage_costs"):
        evaluate(build_schedule("1f1b", 2, 2).compiled(), [])


@pytest.mark.parametrize("workers", [1, 2])
def test_engine_point_plans_give_the_per_point_kernels_numbers(monkeypatch, rng, workers):
    """Points sharing a build go through its point plan (``batch.SHARE`` or more of them) or
    the per-point kernel: the same rows, statuses and peaks, bit for bit, and the compiled
    batch pass's (``evaluate``) numbers."""
    names = ["1f1b", "interleaved-1f1b", "zbv", "dualpipe", "zb-h1", "gpipe", "forward-only"]
    chunks = {"zbv": 2, "interleaved-1f1b": 2}
    points = [(name, p, n, chunks.get(name, 1)) for name in names for p in (2, 3)
              for n in (4, 6) if not fastpp.SCHEDULES[name].reasons(p, n, chunks.get(name, 1),
                                                                    p)[0]]
    points = [pt for pt in points for _ in range(int(rng.integers(1, 9)))]
    sid = np.array([fastpp.SCHEDULES[name].sid for name, *_ in points])
    p, n, m = (np.array(col) for col in list(zip(*points, strict=True))[1:])
    count = len(points)
    assert len({pt for pt in points}) >= 15
    costs = {"f": rng.uniform(0.5, 2.0, count), "b": rng.uniform(2.0, 3.0, count),
             "w": rng.uniform(0.0, 1.0, count), "comm": rng.uniform(0.0, 0.3, count),
             "act": rng.uniform(0.5, 2.0, count), "gamma": rng.uniform(0.0, 1.0, count)}
    costs["w"][::7] = 5.0  # w > b: a status, not a number
    costs["act"][::5] = 0.0
    got = {}
    for share in (2, 10**9):
        monkeypatch.setattr(batch, "SHARE", share)
        got[share] = engine.run(sid, p, n, m, p.copy(), costs, workers=workers, peaks=True)
    planned, apart = got[2], got[10**9]
    np.testing.assert_array_equal(planned.out, apart.out)
    np.testing.assert_array_equal(planned.status, apart.status)
    np.testing.assert_array_equal(planned.peaks, apart.peaks)
    ok = apart.status == batch.OK
    assert np.sum(apart.status == batch.W_ABOVE_B) > 0 and np.sum(ok) > 0
    for i in np.flatnonzero(ok & (costs["act"] > 0))[::5]:  # (Costs asks act > 0)
        name, P, N, M = points[i]
        schedule = build_schedule(name, P, N, M)
        one = Costs(**{k: float(v[i]) for k, v in costs.items()})
        column = evaluate(schedule.compiled(), [one.per_stage(schedule)], times=False)
        assert apart.out[i, batch.MAKESPAN] == column.makespan[0]
        np.testing.assert_array_equal(apart.peaks[apart.peak_at[i]:apart.peak_at[i] + P],
                                      column.peak_activations[:, 0])


def _shared_points(rng):
    """Points of eight builds, three to five points each, with random costs."""
    builds = [("1f1b", 4, 8, 1), ("interleaved-1f1b", 2, 4, 2), ("zbv", 3, 6, 2),
              ("dualpipe", 4, 6, 1), ("zb-h1", 3, 5, 1), ("gpipe", 2, 3, 1),
              ("v-min", 2, 4, 2), ("forward-only", 3, 4, 1)]
    points = [b for b in builds for _ in range(int(rng.integers(3, 6)))]
    sid = np.array([fastpp.SCHEDULES[name].sid for name, *_ in points])
    p, n, m = (np.array(col) for col in list(zip(*points, strict=True))[1:])
    count = len(points)
    costs = {"f": rng.uniform(0.5, 2.0, count), "b": rng.uniform(2.0, 3.0, count),
             "w": rng.uniform(0.0, 1.0, count), "comm": rng.uniform(0.0, 0.3, count),
             "act": rng.uniform(0.5, 2.0, count)}
    return (sid, p, n, m, p.copy()), costs, len(builds)


def test_kept_point_plans_give_the_same_rows_and_stay_within_their_bound(monkeypatch, rng):
    """A build's point plan is kept across calls that ask (``keep``, as ``plan`` does; sweeps
    do not): the rows are the same to the bit whether the plans are made, found, or not kept
    for want of room."""
    keys, costs, builds = _shared_points(rng)
    monkeypatch.setattr(batch, "PLANS", batch.PlanCache(batch.PLAN_CACHE_BYTES))
    apart = engine.run(*keys, costs, peaks=True, share=10**9)  # no plan: each point walked
    made = engine.run(*keys, costs, peaks=True, share=3)  # a sweep's: made, not kept
    assert len(batch.PLANS) == 0
    kept = engine.run(*keys, costs, peaks=True, share=3, keep=True)
    assert len(batch.PLANS) == builds
    sizes = [plan.nbytes for plan in batch.PLANS._kept.values()]
    assert batch.PLANS.nbytes == sum(sizes)
    found = engine.run(*keys, costs, peaks=True, share=3, keep=True, workers=2)
    for rows in (made, kept, found):
        np.testing.assert_array_equal(rows.out, apart.out)
        np.testing.assert_array_equal(rows.peaks, apart.peaks)
    # room for the two largest plans only: a call keeps what fits and makes the rest
    limit = sum(sorted(sizes)[-2:])
    monkeypatch.setattr(batch, "PLANS", batch.PlanCache(limit))
    for _ in range(2):
        tight = engine.run(*keys, costs, peaks=True, share=3, keep=True)
        np.testing.assert_array_equal(tight.out, apart.out)
        assert 1 <= len(batch.PLANS) < builds and batch.PLANS.nbytes <= limit
    monkeypatch.setattr(batch, "PLANS", batch.PlanCache(0))  # nothing kept, all still right
    np.testing.assert_array_equal(engine.run(*keys, costs, share=3, keep=True).out, apart.out)
    assert len(batch.PLANS) == 0 and batch.PLANS.nbytes == 0


def test_a_full_plan_cache_makes_room_from_earlier_calls_only(rng):
    """Full, the cache drops an earlier call's plans, least recently used first, and never
    one this call used: a job larger than the cache keeps its first plans for its next call,
    where dropping the oldest would drop each plan before its next use."""
    keys = _shared_points(rng)[0]
    one, two, three = (tuple(int(k[i]) for k in keys)
                       for i in np.unique(keys[0], return_index=True)[1][:3])
    size = {key: batch.PlanCache(10**9).get(key).nbytes for key in (one, two, three)}
    cache = batch.PlanCache(size[one] + max(size[two], size[three]))
    for key in (one, two, three):  # one call: the third does not fit, and is not kept
        cache.get(key)
    assert list(cache._kept) == [one, two]
    cache.begin()  # the next call finds the first; the third takes the second's room, the
    for key in (one, three):  # least recently used of the earlier call's
        cache.get(key)
    assert list(cache._kept) == [one, three]
    assert cache.get(two, keep=False) is not cache.get(two, keep=False)  # made, not kept
    assert list(cache._kept) == [one, three]
    cache.limit = size[three]  # lowered: the least recently used goes at once
    assert list(cache._kept) == [three] and cache.nbytes == size[three]


def test_a_kept_plan_of_a_deadlocked_build_marks_its_points(monkeypatch, rng):
    """A build whose ops deadlock has no plan (``plan_schedule`` gives ``rows = -1``): its
    points with valid costs are marked, and the engine names the build."""
    keys, costs, _ = _shared_points(rng)
    monkeypatch.setattr(batch, "PLANS", batch.PlanCache(batch.PLAN_CACHE_BYTES))
    first = tuple(int(k[0]) for k in keys)
    good = batch.PLANS.get(first)
    batch.PLANS._kept[first] = good._replace(plan=good.plan[:, :0], tables=good.tables[:0],
                                             rows=-1)
    with pytest.raises(ScheduleError, match=r"deadlocked at schedule='1f1b', p=4, n=8, m=1"):
        engine.run(*keys, costs, share=3)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 4), n=st.integers(1, 5),
       split=st.booleans())
def test_reordered_schedules_deadlock_in_compiled_exactly_as_in_simulate(seed, p, n, split):
    """Two ops of one device swapped: either both deadlock with the same message, or both run
    and agree."""
    rng = np.random.default_rng(seed)
    rows, device = random_legal_rows(rng, p, n, 1, split=split)
    # most swaps put an F after its B (or an I after its W): not a schedule at all. Drawing
    # swaps until one is (seeded, so reproducible) keeps hypothesis from rejecting most inputs
    for _ in range(50):
        r = int(rng.integers(p))
        a, b = sorted(rng.choice(len(rows[r]), 2, replace=False))
        swapped = [list(row) for row in rows]
        swapped[r][a], swapped[r][b] = swapped[r][b], swapped[r][a]
        try:
            sched = Schedule.from_tokens(swapped, device, n=n, m=1)
            break
        except ScheduleError:
            continue
    else:
        assume(False)
    costs = random_costs(rng, sched, split)
    try:
        expected = simulate(sched, costs)
    except ScheduleError as err:
        with pytest.raises(ScheduleError) as got:
            sched.compiled()
        assert str(got.value) == str(err)
    else:
        check(sched, [costs])
        assert expected.makespan > 0


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="without the JIT every kernel is Python")
def test_internal_helpers_refuse_a_call_from_python():
    """Helpers that only kernels call are compiled without a Python wrapper (a fifth of their
    compile time): a call from Python is a TypeError naming them, never a crash."""
    from fastpp.generators import _emit, dualpipe

    ops = np.zeros((4, 1, 1), np.int32)
    for helper, args in ((_emit.put, (ops, 0, 0, 0, 0, 0)), (dualpipe._weight, ())):
        with pytest.raises(TypeError, match=f"{helper.__name__} is called only from"):
            helper(*args)
    assert _emit.put.__name__ == "put" and callable(_emit.put.py_func)


def test_stacked_rows_of_the_wrong_shape_are_refused():
    """The kernels trust the rows' shape (no bounds checks): a stack missing a row, of another
    schedule's stages or not float64 is a ScheduleError, not a read out of bounds."""
    sched = build_schedule("1f1b", 2, 4)
    compiled = sched.compiled()
    rows = np.stack([np.asarray(Costs(1.0, 2.0).per_stage(sched))], axis=2)
    assert evaluate(compiled, rows).makespan[0] == simulate(sched, Costs(1.0, 2.0)).makespan
    for bad in (rows[:8], rows[:, :1], rows.astype(np.float32), rows[..., 0]):
        with pytest.raises(ScheduleError, match=r"stage_costs must be StageCosts of this "
                                                r"schedule or float64 rows of shape "
                                                r"\(9, V=2, B >= 1\)"):
            evaluate(compiled, bad)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 4), n=st.integers(1, 6),
       m=st.integers(1, 3), kind=st.sampled_from(["plain", "split", "pairs", "vshape"]))
def test_memory_vectors_read_the_walks_peaks(seed, p, n, m, kind):
    """``memory_vectors`` (one walk; vectors that a recent one covers left out) keeps every
    vector that can be a peak: the peaks read from it equal ``kernels.peaks``'s walk and the
    least frontier's, bit for bit, on random schedules (interleaved, V-shaped, split
    backwards, overlapped pairs) with random activations, zeros among them."""
    rng = np.random.default_rng(seed)
    vshape = kind == "vshape"
    m = 2 if vshape else m
    rows, device = random_legal_rows(rng, p, n, m, vshape=vshape, split=kind == "split",
                                     pairs=kind == "pairs")
    sched = Schedule.from_tokens(rows, device, n=n, m=m)
    compiled = sched.compiled()
    frontier, live = memory_vectors(sched.ops, sched.length, sched.V, sched.forward_only)
    np.testing.assert_array_equal(live, compiled.peak_live)
    unit = rng.uniform(0.0, 3.0, (sched.V, 4)) * (rng.random((sched.V, 4)) < 0.8)
    gamma = rng.uniform(0.0, 1.0, (sched.V, 4))
    for b in range(4):
        walk, pairs = np.empty(p), np.empty(p, np.int64)
        kernels.peaks(sched.ops, sched.length, unit[:, b].copy(), gamma[:, b].copy(),
                      sched.forward_only, walk, pairs)
        for read in (frontier, compiled.frontier):
            got = np.empty((p, 4))
            frontier_peaks(read, unit, gamma, got)
            np.testing.assert_array_equal(got[:, b], walk)
    # at most one vector a forward; on 1F1B one a device
    forwards = np.count_nonzero(np.isin(sched.kind, [fastpp.Op.F, fastpp.Op.FB]))
    assert frontier[p] - frontier[0] <= forwards
    one = build_schedule("1f1b", 4, 16)
    assert memory_vectors(one.ops, one.length, one.V, False)[0][4] - 5 == 4


def _planned_inputs(sched) -> tuple[np.ndarray, np.ndarray]:
    """The inputs a point plan's steps wait for (``plan_schedule``), as device-major op
    numbers (-1: none; forward, then gradient), beside ``kernels.producers``'s, each op in
    device-major order."""
    N = int(sched.length.sum())
    plan, _, rows, _ = plan_schedule(sched.ops, sched.length, sched.stage_to_device,
                                     sched.route_first, sched.route_last, sched.n,
                                     sched.forward_only)
    assert rows > 0
    S = plan.shape[1]
    last = plan[BY_DEVICE, :N]  # each op's (last) step
    op_of = np.full(S + 1, -1)  # the op a step ends (-1: a pair's first step; S: no input)
    op_of[last] = np.arange(N)
    kind = np.concatenate([sched.kind[r, :sched.length[r]] for r in range(sched.p)])
    got = np.full((N, 2), -1)
    for op, q in enumerate(last):
        if q > 0 and op_of[q - 1] == -1:  # two steps: the forward input, then the gradient
            got[op] = op_of[plan[INPUT, q - 1]], op_of[plan[INPUT, q]]
        else:
            got[op, 0 if kind[op] == fastpp.Op.F else 1] = op_of[plan[INPUT, q]]
    made = np.empty((N, 2), np.int64)
    kernels.producers(sched.ops, sched.length, sched.V, sched.n, sched.route_first,
                      sched.route_last, made)
    return got, made


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 4), n=st.integers(1, 6),
       m=st.integers(1, 3), kind=st.sampled_from(["plain", "split", "pairs", "vshape"]))
def test_point_plans_wait_for_each_ops_producers(seed, p, n, m, kind):
    """The inputs a point plan's steps wait for are the edges of the dependency rules as
    ``kernels.producers`` reads them from the ops alone: two codings of SCHEDULES.md section 2
    that must agree, on random schedules and on every registered one."""
    rng = np.random.default_rng(seed)
    vshape = kind == "vshape"
    m = 2 if vshape else m
    rows, device = random_legal_rows(rng, p, n, m, vshape=vshape, split=kind == "split",
                                     pairs=kind == "pairs")
    got, made = _planned_inputs(Schedule.from_tokens(rows, device, n=n, m=m))
    np.testing.assert_array_equal(got, made)


@pytest.mark.parametrize("name", sorted(fastpp.SCHEDULES))
def test_registered_schedules_plans_wait_for_their_producers(name):
    sched = build_schedule(name, 4, 8, fastpp.SCHEDULES[name].default_m)
    got, made = _planned_inputs(sched)
    np.testing.assert_array_equal(got, made)
    assert (got >= 0).any()


ONE = build_schedule("1f1b", 4, 8)


def test_evaluate_durations_of_another_shape():
    """``evaluate`` read a ``durations`` of too few columns past its end (the kernel copies
    a column per cost column without a shape check since it stopped compiling NumPy's)."""
    import numpy as np

    from fastpp import Costs, build_schedule
    from fastpp.compiled import evaluate

    s = build_schedule("1f1b", 2, 4)
    c, costs = s.compiled(), [Costs(1.0, 2.0).per_stage(s)] * 3
    with pytest.raises(ScheduleError, match=r"durations must have shape \(N=16, B=3\), an op "
                                            r"time per op and column \(got shape \(16, 2\)\)"):
        evaluate(c, costs, durations=np.ones((c.num_ops, 2)))
    assert list(evaluate(c, costs, durations=np.ones((c.num_ops, 3), int)).makespan) == [10.0] * 3


def test_compiled_evaluate_checks_what_it_is_given():
    """``fastpp.compiled.evaluate`` took negative durations (makespan -16), NaN ones (-inf)
    and NaN or infinite stage rows, and met a wrong argument with AttributeError, TypeError,
    AxisError or ValueError."""
    from fastpp.compiled import evaluate

    compiled = ONE.compiled()
    N = compiled.num_ops
    stage = Costs(1.0, 2.0).per_stage(ONE)
    rows = np.stack([np.asarray(stage)], axis=2)
    # every op 1: (n + p - 1)(f + b), 1F1B's closed form
    assert evaluate(compiled, rows, np.ones((N, 1))).makespan.tolist() == [(8 + 4 - 1) * 2.0]
    # (1e307: finite, but a schedule's sums of it overflow; simulate refuses past MAX_TIME,
    # evaluate had given an inf makespan and a NaN bubble: a review)
    for bad in (-1.0, np.nan, np.inf, 1e307):
        with pytest.raises(ScheduleError, match=r"durations must be finite and >= 0"):
            evaluate(compiled, rows, np.full((N, 1), bad))
    for value in (np.nan, np.inf, -1.0, 1e307):
        wrong = rows.copy()
        wrong[0, 0, 0] = value
        with pytest.raises(ScheduleError, match=r"stage_costs must be finite and >= 0"):
            evaluate(compiled, wrong)
    with pytest.raises(ScheduleTypeError, match=r"compiled must be a fastpp.compiled.Compiled"):
        evaluate(ONE, [stage])
    for given in (Costs(1.0, 2.0), stage):  # noqa: F402 (not hypothesis.given)
        with pytest.raises(ScheduleTypeError, match=r"stage_costs must be a list of StageCosts"):
            evaluate(compiled, given)
    other = Costs(1.0, 2.0).per_stage(build_schedule("1f1b", 2, 4))
    with pytest.raises(ScheduleError, match=r"stage_costs must each have V=4 stages"):
        evaluate(compiled, [stage, other])
    with pytest.raises(ScheduleError, match=r"B >= 1\) \(got shape \(9, 4, 0\)"):
        evaluate(compiled, np.zeros((9, 4, 0)))
    with pytest.raises(ScheduleTypeError, match=r"durations must be a number or an array"):
        evaluate(compiled, rows, np.full((N, 1), "a"))
