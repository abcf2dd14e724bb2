"""simulate() against the reference simulator, on every generator and on random schedules."""

import dataclasses
import os

import numpy as np
import pytest
from helpers import POINTS, random_costs, random_legal_rows, random_overhead
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import Deadlock, assert_agrees, simulate_reference

import fastpp
from fastpp import Costs, Schedule, ScheduleError, build_schedule, simulate
from fastpp.dependencies import edges
from fastpp.model import transformer_costs


def test_grid_covers_every_schedule():
    assert {name for name, *_ in POINTS} == set(fastpp.SCHEDULES)
    assert len(POINTS) > (100 if os.environ.get("FASTPP_SMALL") else 1000)


@pytest.mark.parametrize("name", sorted(fastpp.SCHEDULES))
def test_generators_agree_with_reference(name, rng):
    points = [pt for pt in POINTS if pt[0] == name]
    for _, p, n, m in points:
        sched = build_schedule(name, p, n, m)
        split = fastpp.SCHEDULES[name].split_backward
        with_overhead = dataclasses.replace(random_costs(rng, sched, split),
                                            overhead=random_overhead(rng, sched),
                                            send=random_overhead(rng, sched, "FBI"))
        for costs in (Costs(1.0, 2.0), random_costs(rng, sched), with_overhead):
            assert_agrees(simulate(sched, costs), simulate_reference(sched, costs))


FIELDS = ("makespan", "bubble_ratio", "span_bubble_ratio", "serial_time")
ARRAYS = ("start", "end", "busy", "span", "peak_activations", "peak_live", "mem_start",
          "mem_end", "live_start", "live_end")


def assert_same(result, expected):
    """Every number of two ``Result``s equal to the bit, arrays of one dtype."""
    for name in FIELDS:
        assert getattr(result, name) == getattr(expected, name), name
        assert type(getattr(result, name)) is float, name
    for name in ARRAYS:
        got, want = getattr(result, name), getattr(expected, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)


def unshared(sched):
    """The same schedule through the public constructor: simulate runs the per-op timeline."""
    return Schedule(sched.ops.copy(), sched.length, sched.stage_to_device, n=sched.n, m=sched.m,
                    name=sched.name, routes=np.stack([sched.route_first, sched.route_last], 1),
                    forward_only=sched.forward_only)


@pytest.mark.parametrize("name", sorted(fastpp.SCHEDULES))
def test_built_schedules_run_their_plan_to_the_bit(name, rng):
    """A schedule from build_schedule, its arrays not read yet, is simulated from its compiled
    point plan (fastpp.compiled.point); every number equals the per-op timeline's to the bit,
    under uneven costs, latencies and overheads (and DualPipe's pair times)."""
    for _, p, n, m in [pt for pt in POINTS if pt[0] == name][::3]:
        probe = build_schedule(name, p, n, m)
        split = fastpp.SCHEDULES[name].split_backward
        many = [Costs(1.0, 2.0), random_costs(rng, probe, split),
                dataclasses.replace(random_costs(rng, probe, split),
                                    overhead=random_overhead(rng, probe), fb=rng.uniform(1, 4),
                                    send=random_overhead(rng, probe, "FBI"))]
        for costs in many:
            sched = build_schedule(name, p, n, m)
            result = simulate(sched, costs)
            assert "_built" in vars(sched)  # the plan ran: the arrays were not copied out
            assert_same(result, simulate(unshared(sched), costs))


def test_a_built_schedule_past_the_point_plans_bound_runs_the_general_kernel(monkeypatch):
    """A point plan's tables grow as N m (an interleaved schedule of the accepted p n m = 4e6
    at m = 64 needed more than 9 GB); past ``MAX_PLAN_SLOTS`` a built schedule is simulated
    by the general kernel instead, to the same numbers."""
    from fastpp import schedule as schedule_module
    from fastpp.generators import registry

    costs = Costs(1.0, 2.0, w=0.5, comm=0.1)
    planned = simulate(build_schedule("interleaved-1f1b", 4, 12, 3), costs)
    monkeypatch.setattr(schedule_module, "MAX_PLAN_SLOTS", 0)
    monkeypatch.setattr(registry, "_BUILT", {})  # built anew under the bound
    sched = build_schedule("interleaved-1f1b", 4, 12, 3)
    assert not vars(sched)["_built"].plannable
    result = simulate(sched, costs)
    assert "_built" not in vars(sched)  # the general kernel read the arrays: copied out
    assert_same(result, planned)


def test_a_built_schedule_written_into_simulates_what_it_holds():
    """build_schedule's schedules share one compiled plan until their arrays are read: one
    written into is simulated as it now stands, and the others as built."""
    sched = build_schedule("1f1b", 2, 3)
    before = simulate(sched)
    assert_same(before, simulate(unshared(sched)))
    row = sched.kind[1, :6].copy()  # device 1: F0 B0 F1 B1 F2 B2 -> F0 F1 B0 B1 F2 B2
    sched.ops[:, 1, 1], sched.ops[:, 1, 2] = sched.ops[:, 1, 2].copy(), sched.ops[:, 1, 1].copy()
    assert sched.kind[1, :6].tolist() != row.tolist()
    after = simulate(sched)
    assert_same(after, simulate(unshared(sched)))
    assert not np.array_equal(after.start, before.start)
    assert_same(simulate(build_schedule("1f1b", 2, 3)), before)
    sched.length[:] = 0  # and one emptied after it was built is refused, as Schedule() would
    with pytest.raises(ScheduleError, match="needs exactly one F"):
        simulate(sched)


SET = {"ops": lambda s: s.ops.copy(), "length": lambda s: s.length.copy(),
       "stage_to_device": lambda s: s.stage_to_device.copy(),
       "route_first": lambda s: s.route_first.copy(), "route_last": lambda s: s.route_last.copy(),
       "n": lambda s: 4, "m": lambda s: 1, "p": lambda s: 4, "V": lambda s: 4,
       "forward_only": lambda s: False, "name": lambda s: "mine"}


@pytest.mark.parametrize("name", sorted(SET))
def test_a_built_schedule_set_keeps_what_was_set(name):
    """Setting any attribute of a built schedule (arrays or scalars) makes its arrays its own
    first: simulate no longer runs the shared plan, and reading another array does not copy the
    shared arrays over the value set."""
    value = SET[name](build_schedule("1f1b", 4, 4))  # from another schedule: copies
    sched = build_schedule("1f1b", 4, 4)
    setattr(sched, name, value)
    assert "_built" not in vars(sched)
    other = "length" if name == "ops" else "ops"
    getattr(sched, other)  # a read of another array
    assert getattr(sched, name) is value
    assert_same(simulate(sched), simulate(unshared(sched)))


@pytest.mark.parametrize("field", ["kind", "stage", "mb", "stage2", "mb2"])
def test_a_view_of_ops_is_written_into_not_set(field):
    sched = build_schedule("1f1b", 4, 4)
    with pytest.raises(ScheduleError, match=f"{field} is a view of ops"):
        setattr(sched, field, getattr(sched, field).copy())


WRITES = {  # a schedule written into after it was built: each is checked again when it runs
    "a stage out of range": (lambda s: s.stage.__setitem__((1, 3), 99), "stage must be in 0..3"),
    "a kind out of range": (lambda s: s.kind.__setitem__((0, 0), 7), "kind must be one of"),
    "a length past the ops": (lambda s: s.length.__setitem__(0, 10**6), "length must have"),
    "a device's ops reversed": (lambda s: s.ops.__setitem__((slice(None), 0), s.ops[:, 0, ::-1]),
                                "must come before"),
    "ops of another p": (lambda s: setattr(s, "ops", s.ops[:, :2].copy()),
                         "ops has 2 devices but p is 4"),
    "ops not integers": (lambda s: setattr(s, "ops", s.ops * 0.5), "ops must be an integer"),
    "another n": (lambda s: setattr(s, "n", 5), "must have shape \\(5,\\)"),
    "a stage map off the devices": (lambda s: s.stage_to_device.__setitem__(0, 9),
                                    "stage_to_device must map"),
}


@pytest.mark.parametrize("what", sorted(WRITES))
def test_a_schedule_written_into_is_checked_when_it_runs(what):
    """The kernels index by the schedule's arrays unchecked: a schedule changed after it was
    built (here a stage of 99 segfaulted) is checked again by simulate, compiled() and
    dependencies.edges."""
    write, message = WRITES[what]
    for run in (simulate, lambda s: s.compiled(), edges, Schedule.tokens,
                lambda s: Costs(1, 2).per_stage(s),
                lambda s: transformer_costs("llama2-7b", s, seq=4096)):
        sched = build_schedule("1f1b", 4, 8)
        write(sched)
        with pytest.raises(ScheduleError, match=message):
            run(sched)


def test_a_built_schedules_copies_are_checked_only_once_written_into(monkeypatch):
    """Reading a built schedule's arrays copies them; the copies were checked when it was
    built, so simulate checks them again only after a write (a cold main job compiled the
    checking kernel, 1.5-1.8 s, for its warm-up's unchanged copies alone)."""
    calls = []
    check = fastpp.kernels.check_ops
    monkeypatch.setattr(fastpp.kernels, "check_ops", lambda *a: calls.append(1) or check(*a))
    sched = build_schedule("1f1b", 4, 8)
    assert sched.ops.shape == (5, 4, 16)  # its own copies now
    simulate(sched)
    assert calls == []
    sched.stage[1, 3] = 99
    with pytest.raises(ScheduleError, match="stage must be in 0..3"):
        simulate(sched)
    assert calls == [1]


@pytest.mark.parametrize("name, value", [("p", 4.0), ("V", 4.0), ("p", np.float32(4)),
                                         ("p", 5)])
def test_p_and_v_set_must_be_the_integers_the_arrays_give(name, value):
    for run in (simulate, lambda s: s.compiled(), edges,
                lambda s: simulate(s, noise=fastpp.Noise(), samples=2)):
        sched = build_schedule("1f1b", 4, 8)
        setattr(sched, name, value)
        with pytest.raises(ScheduleError, match=f"{name} must be a positive integer|they must"):
            run(sched)


def test_a_result_reads_the_schedule_that_ran():
    """A Result's per-op memory, made when first read, comes from the arrays that ran, not
    from the schedule written into since (GPipe's ops gave peaks 8 8 8 8 beside 4 3 2 1; a
    stage of 10**8 segfaulted)."""
    sched = build_schedule("1f1b", 4, 8)
    assert sched.ops.shape == (5, 4, 16)  # its own arrays now: simulate runs the per-op path
    result = simulate(sched)
    sched.ops[:] = build_schedule("gpipe", 4, 8).ops
    assert result.mem_end.max(axis=1).tolist() == result.peak_activations.tolist()
    assert result.peak_activations.tolist() == [4.0, 3.0, 2.0, 1.0]
    sched.stage[0, 0] = 10**8
    assert result.mem_start.shape == (4, 16)


def test_compiled_follows_a_schedule_written_into():
    sched = build_schedule("1f1b", 2, 3)
    first = sched.compiled()
    assert sched.compiled() is first  # kept while the schedule is as it was
    sched.ops[:, 1, 1], sched.ops[:, 1, 2] = sched.ops[:, 1, 2].copy(), sched.ops[:, 1, 1].copy()
    again, expected = sched.compiled(), unshared(sched).compiled()
    assert again is not first
    for name, field in zip(expected._fields, expected, strict=True):
        assert np.array_equal(getattr(again, name), field), name
    assert not np.array_equal(again.kind, first.kind)


def test_a_built_schedule_given_other_ops_simulates_them():
    """GPipe's schedule given 1F1B's ops and length runs 1F1B (peaks 4 3 2 1, not 8 8 8 8)."""
    sched = build_schedule("gpipe", 4, 8)
    one_f_one_b = build_schedule("1f1b", 4, 8)
    ops, length = one_f_one_b.ops.copy(), one_f_one_b.length.copy()
    sched.ops, sched.length = ops, length
    assert simulate(sched).peak_live.tolist() == [4, 3, 2, 1]
    assert sched.ops is ops and sched.length is length
    deleted = build_schedule("gpipe", 4, 8)
    del deleted.name
    assert "_built" not in vars(deleted) and deleted.kind.shape == (4, 16)


def test_repr_of_a_built_schedule_copies_nothing():
    sched = build_schedule("1f1b", 2, 3)
    assert repr(sched) == "Schedule(name='1f1b', p=2, n=3, m=1, V=2, ops=12)"
    assert sched.num_ops == 12 and "_built" in vars(sched)


def test_a_result_is_read_only():
    result = simulate(build_schedule("1f1b", 2, 2))
    makespan = result.makespan
    with pytest.raises(AttributeError, match="read-only"):
        result.makespan = 0.0
    with pytest.raises(AttributeError, match="read-only"):
        del result.makespan
    assert result.makespan == makespan


@pytest.mark.parametrize("built", [True, False])
def test_a_results_stage_costs_cannot_change_a_later_simulate(built):
    """StageCosts' arrays are read-only views of the ones Costs keeps for its next simulate."""
    costs = Costs(f=1.0, b=2.0)
    sched = build_schedule("1f1b", 4, 8) if built else unshared(build_schedule("1f1b", 4, 8))
    first = simulate(sched, costs)
    for array in (*first.stage_costs, *costs.per_stage(sched)):
        with pytest.raises(ValueError, match="read-only"):
            array[:] = 100.0
    assert simulate(sched, costs).makespan == first.makespan == 33.0


def test_build_schedules_bound_counts_the_plans(monkeypatch):
    """The kept schedules' op fields and point plans stay within the bound, plans made or not,
    and one schedule larger than the bound is not kept."""
    from fastpp.generators import registry

    monkeypatch.setattr(registry, "_BUILT", {})
    monkeypatch.setattr(registry, "BUILT_OPS", 400)  # 2000 int32 slots
    bound = registry.OP_FIELDS * registry.BUILT_OPS
    for n in range(2, 12):
        simulate(build_schedule("1f1b", 4, n))  # each makes its plan
        held = sum(b.arrays[0].size + b.plan.size for b in registry._BUILT.values())
        assert held <= bound, n
    sched = build_schedule("1f1b", 4, 40)
    assert sched.__dict__["_built"].slots > bound
    assert not any(key[2] == 40 for key in registry._BUILT)
    assert simulate(sched).makespan == simulate(unshared(sched)).makespan


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 5), n=st.integers(1, 6),
       m=st.integers(1, 3), vshape=st.booleans(), split=st.booleans(), pairs=st.booleans())
def test_random_legal_schedules_agree(seed, p, n, m, vshape, split, pairs):
    rng = np.random.default_rng(seed)
    m = 2 if vshape else m
    rows, device = random_legal_rows(rng, p, n, m, vshape=vshape, split=split, pairs=pairs)
    sched = Schedule.from_tokens(rows, device, n=n, m=m)
    costs = random_costs(rng, sched, split)
    if pairs and rng.random() < 0.5:
        costs = dataclasses.replace(costs, fb=rng.uniform(0.5, 4.0, sched.V))
    if rng.random() < 0.5:  # a fixed time per op, per kind, and per message sent
        costs = dataclasses.replace(costs, overhead=random_overhead(rng, sched),
                                    send=random_overhead(rng, sched, "FBI"))
    assert_agrees(simulate(sched, costs), simulate_reference(sched, costs))


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(2, 4), n=st.integers(1, 4))
def test_shuffled_schedules_deadlock_exactly_when_the_reference_does(seed, p, n):
    """Per-device orders shuffled (keeping F before B): a deadlock is reported, never a hang."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(p):
        fwd = list(rng.permutation(n))
        bwd = list(rng.permutation(n))
        row, done_f = [], set()
        while fwd or bwd:
            ready_b = [j for j in bwd if j in done_f]
            if fwd and (not ready_b or rng.random() < 0.5):
                j = fwd.pop()
                done_f.add(j)
                row.append(f"{r}F{j}")
            else:
                j = ready_b[0]
                bwd.remove(j)
                row.append(f"{r}B{j}")
        rows.append(row)
    sched = Schedule.from_tokens(rows, n=n)
    costs = Costs(1.0, 2.0, comm=0.1)
    try:
        ref = simulate_reference(sched, costs)
    except Deadlock:
        with pytest.raises(ScheduleError, match="deadlocks"):
            simulate(sched, costs)
    else:
        assert_agrees(simulate(sched, costs), ref)


def test_a_weight_gradient_as_long_as_the_backward_runs():
    """w = b (the input gradient takes no time) is allowed, in simulate and in the sweep's
    engine alike, and priced as the reference prices it."""
    sched, costs = build_schedule("zb-h1", 4, 8), Costs(f=1, b=2, w=2)
    res = simulate(sched, costs)
    assert_agrees(res, simulate_reference(sched, costs))
    df = fastpp.sweep(["zb-h1"], [4], [8], [1], f=1, b=2, w=2, progress=False)
    assert df["makespan"].tolist() == [res.makespan]


def test_issue_figures():
    """Hand-derived in SCHEDULES.md: 1F1B makespan (n+p-1)(f+b) = 33 and peaks min(n, p-r);
    GPipe peak n; the interleaved worked example (chunk F=1, B=2): 57, peaks 11, 9, 7, 5."""
    res = simulate(build_schedule("1f1b", 4, 8), Costs(f=1, b=2))
    assert res.makespan == 33
    assert res.peak_live.tolist() == [4, 3, 2, 1]
    res = simulate(build_schedule("gpipe", 4, 8), Costs(f=1, b=2))
    assert res.peak_live.tolist() == [8, 8, 8, 8]
    res = simulate(build_schedule("interleaved-1f1b", 4, 8, 2), Costs(f=2, b=4))
    assert res.makespan == 57
    assert res.throughput == 8 / 57  # microbatches a unit of time, whatever m
    assert res.peak_live.tolist() == [11, 9, 7, 5]
    assert res.peak_activations.tolist() == [5.5, 4.5, 3.5, 2.5]


def test_memory_curve_steps_through_every_op():
    res = simulate(build_schedule("gpipe", 2, 3), Costs(f=1, b=2))
    times, values = res.memory_curve(0)
    # device 0: F0 F1 F2 at 0, 1, 2; its backwards start when device 1's B arrive
    assert times[:7].tolist() == [0, 0, 1, 1, 2, 2, 3]
    assert values[:7].tolist() == [0, 1, 1, 2, 2, 3, 3]
    assert values[-1] == 0
    assert np.all(np.diff(times) >= 0)


def test_forward_only_frees_at_forward_end():
    res = simulate(build_schedule("forward-only", 4, 6), Costs(f=1, b=2))
    assert res.makespan == 9  # (n + p - 1) f
    assert res.peak_activations.tolist() == [1, 1, 1, 1]
    assert res.throughput == 6 / 9


def test_serial_time_adds_every_op_and_handoff():
    p, n = 4, 5
    res = simulate(build_schedule("1f1b", p, n), Costs(f=1, b=2, comm=0.25))
    assert res.serial_time == n * p * 3 + 2 * n * (p - 1) * 0.25


def test_split_backward_memory_uses_gamma():
    # one device, one microbatch: F allocates 1, I frees 1 - gamma, W frees gamma
    sched = Schedule.from_tokens([["0F0", "0I0", "0W0"]])
    res = simulate(sched, Costs(f=1, b=2, w=1, gamma=0.25))
    assert res.mem_end[0].tolist() == [1.0, 0.25, 0.0]
    assert res.live_end[0].tolist() == [1, 1, 0]
    assert res.makespan == 3


def test_result_of_deadlock_shows_stuck_ops():
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]
    with pytest.raises(ScheduleError) as err:
        simulate(Schedule.from_tokens(rows))
    text = str(err.value)
    assert "device 0 is stuck at op 1 (0B0) waiting for 1B0 on device 1" in text
    assert "device 1 is stuck at op 0 (1F1) waiting for 0F1 on device 0" in text
    assert ">0B0<" in text and ">1F1<" in text
    # a device waiting for the op another device is itself stuck at (0B0 needs 1B0, where
    # device 1 stands): counted by hand from the dependency rule
    rows = [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"],
            ["2F1", "2B1", "2F0", "2B0"]]
    with pytest.raises(ScheduleError) as err:
        simulate(Schedule.from_tokens(rows))
    assert "device 0 is stuck at op 2 (0B0) waiting for 1B0 on device 1" in str(err.value)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(1, 5), n=st.integers(1, 6),
       m=st.integers(1, 3), vshape=st.booleans(), split=st.booleans(), pairs=st.booleans())
def test_per_op_durations_agree_with_reference(seed, p, n, m, vshape, split, pairs):
    """Random per-op times replace the stage costs, in the kernel and in the reference alike;
    the hand-offs keep the costs' latency. (Positive: the reference reads memory at instants,
    which zero-length ops would tie.)"""
    rng = np.random.default_rng(seed)
    m = 2 if vshape else m
    rows, device = random_legal_rows(rng, p, n, m, vshape=vshape, split=split, pairs=pairs)
    sched = Schedule.from_tokens(rows, device, n=n, m=m)
    durations = rng.uniform(0.05, 3.0, sched.kind.shape)
    durations[np.arange(sched.kind.shape[1]) >= sched.length[:, None]] = np.nan  # ignored
    costs = Costs(1.0, 2.0, comm=float(rng.uniform(0, 0.5)))
    result = simulate(sched, costs, durations=durations)
    ref = simulate_reference(sched, costs, durations)
    assert_agrees(result, ref)
    for r in range(p):
        L = sched.length[r]
        np.testing.assert_allclose(result.end[r, :L] - result.start[r, :L], durations[r, :L],
                                   rtol=1e-12, atol=1e-12)


def test_durations_equal_to_the_stage_costs_change_nothing():
    sched = build_schedule("zbv", 4, 8, 2)
    costs = Costs(3.0, 4.0, w=2.0, comm=0.5)
    plain = simulate(sched, costs)
    durations = plain.end - plain.start
    assert_agrees(simulate(sched, costs, durations=durations), simulate_reference(sched, costs))


@pytest.mark.parametrize("bad, match", [
    (np.ones((2, 3)), r"durations must have the shape of the schedule's op matrix \(4, 4\)"),
    (np.full((4, 4), -1.0), r"durations must be finite and >= 0 \(got -1.0 for op 0 \(0F0\)"),
    (np.full((4, 4), np.inf), "durations must be finite and >= 0"),
    ("abc", "durations must be an array of numbers"),
])
def test_bad_durations(bad, match):
    sched = build_schedule("1f1b", 4, 2)
    with pytest.raises(ScheduleError, match=match):
        simulate(sched, durations=bad)
