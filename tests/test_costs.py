"""fastpp.Costs: per-stage times, overheads and sends as the schedules price them, and bad
input (sums past the float range, bools among numbers, -0.0, ints past int64, arrays changed
after the call, copies and pickles).
"""

import dataclasses

import numpy as np
import pytest

import fastpp
from fastpp import (
    Costs,
    Schedule,
    ScheduleError,
    ScheduleTypeError,
    build_schedule,
    simulate,
)


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
    ({"f": 1, "b": 2, "i": -0.5}, r"costs\.i must be finite and >= 0 \(got -0\.5\)"),
    ({"f": 1, "b": 2, "i": [1, np.nan]}, r"costs\.i must be finite and >= 0"),
])
def test_bad_costs_are_named(kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        Costs(**kwargs)


def test_costs_must_fit_the_schedule():
    sched = build_schedule("1f1b", 4, 4)
    with pytest.raises(ScheduleError, match=r"costs\.f must be a scalar or an array of length "
                                            r"p=4 or V=4 \(got length 3\)"):
        Costs(f=[1, 1, 1], b=2).per_stage(sched)
    with pytest.raises(ScheduleError, match=r"costs\.w must be <= costs\.b where costs\.i is "
                                            r"not given \(got w=3\.0, b=2\.0"):
        Costs(f=1, b=2, w=3).per_stage(sched)
    with pytest.raises(ScheduleError, match=r"costs\.i must be a scalar or an array of length "
                                            r"p=4 or V=4 \(got length 3\)"):
        Costs(f=1, b=2, i=[1, 1, 1]).per_stage(sched)


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


def test_overhead_is_added_to_every_op_undivided_by_m():
    sched = build_schedule("interleaved-1f1b", 2, 4, 2)
    c = Costs(f=[2.0, 4.0], b=4.0, w=1.0, fb=6.0,
              overhead={"F": 0.25, "B": [0.5, 1.0], "W": 0.125}).per_stage(sched)
    assert c.tf.tolist() == [1.25, 2.25, 1.25, 2.25]  # f/m + the F overhead
    assert c.tb.tolist() == [2.5, 3.0, 2.5, 3.0]  # per device, stage s on device s % p
    assert c.ti.tolist() == [1.5] * 4  # (b - w)/m, no I overhead given
    assert c.tw.tolist() == [0.625] * 4
    assert c.tfb.tolist() == [3.75, 4.25, 3.75, 4.25]  # fb/m and both the F and B overheads
    same = Costs(f=[2.0, 4.0], b=4.0, w=1.0, overhead=0.5).per_stage(sched)
    assert same.tf.tolist() == [1.5, 2.5, 1.5, 2.5] and same.ti.tolist() == [2.0] * 4


def test_a_given_i_prices_the_input_grad_op_and_lets_a_split_backward_exceed_b():
    sched = build_schedule("interleaved-zb", 2, 4, 2)
    c = Costs(f=1.0, b=2.0, w=[1.5, 2.5], i=[1.0, 0.5], overhead={"I": 0.25}).per_stage(sched)
    assert c.ti.tolist() == [0.75, 0.5, 0.75, 0.5]  # i/m and the I overhead, not (b - w)/m
    assert c.tw.tolist() == [0.75, 1.25, 0.75, 1.25]  # w/m, above b/m = 1 on device 1
    assert c.tb.tolist() == [1.0] * 4  # the full backward stays b
    # w > b is refused only where I would take b - w
    assert Costs(f=1, b=2, w=3, i=0.5).per_stage(sched).tw.tolist() == [1.5] * 4
    one = build_schedule("zb-h1", 1, 1)
    assert simulate(one, Costs(1.0, 2.0, w=1.5, i=1.0)).makespan == 1.0 + 1.0 + 1.5


@pytest.mark.parametrize("name", sorted(fastpp.SCHEDULES))
def test_i_equal_to_b_minus_w_is_the_default(name):
    """I takes ``b/m - w/m`` by default: an explicit ``i = b - w`` (``(b - w)/m``) gives every
    schedule the same result to rounding, at an m that does not divide exactly."""
    try:
        sched = build_schedule(name, 4, 12, 3)
    except ScheduleError:  # its own m only
        sched = build_schedule(name, 4, 12, fastpp.SCHEDULES[name].default_m)
    rng = np.random.default_rng(len(name))
    b = rng.uniform(1.0, 3.0, 4)
    w = b * rng.uniform(0.1, 0.9, 4)
    base = Costs(f=rng.uniform(0.5, 2.0, 4), b=b, w=w, comm=0.05, gamma=0.5,
                 overhead={"I": 0.03, "W": 0.01})
    given = dataclasses.replace(base, i=b - w)
    for costs, explicit in ((base, given), (Costs(1.0, 2.1, w=0.7), Costs(1.0, 2.1, w=0.7,
                                                                           i=2.1 - 0.7))):
        a, e = simulate(sched, costs), simulate(sched, explicit)
        assert a.makespan == pytest.approx(e.makespan, rel=1e-13)
        np.testing.assert_allclose(a.start, e.start, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(a.end, e.end, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(a.peak_activations, e.peak_activations)
        for x, y in zip(a.stage_costs, e.stage_costs, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)


def test_each_op_kind_takes_its_own_overhead():
    """One device, one microbatch: the makespan is the ops' times end to end."""
    f, b, w = 1.0, 2.0, 0.5
    fixed = {"F": 0.1, "B": 0.2, "I": 0.3, "W": 0.4}
    costs = Costs(f, b, w=w, overhead=fixed)
    assert simulate(build_schedule("1f1b", 1, 1), costs).makespan == pytest.approx(
        f + 0.1 + b + 0.2)  # a full backward: the B overhead
    assert simulate(build_schedule("zb-h1", 1, 1), costs).makespan == pytest.approx(
        f + 0.1 + (b - w) + 0.3 + w + 0.4)  # a split backward pays I's and W's
    # an overlapped pair takes the F and the B overheads, with fb given or not
    pair = Schedule.from_tokens([["0F0", "(0F1;0B0)OVERLAP_F_B", "0B1"]], [0], n=2, m=1)
    ends = f + 0.1 + b + 0.2
    assert simulate(pair, costs).makespan == pytest.approx(2 * ends)
    assert simulate(pair, dataclasses.replace(costs, fb=2.5)).makespan == pytest.approx(
        ends + 2.5 + 0.1 + 0.2)
    assert simulate(build_schedule("1f1b", 1, 1), Costs(f, b, overhead={"I": 9.0})
                    ).makespan == f + b  # a missing kind takes 0


def test_send_is_paid_by_the_ops_that_hand_on_to_another_device():
    """Interleaved 1F1B at p = 2, m = 2: stages 0..3 on devices 0, 1, 0, 1. Every forward but
    the last stage's hands on; every backward but the first stage's."""
    sched = build_schedule("interleaved-1f1b", 2, 4, 2)
    c = Costs(f=2.0, b=4.0, w=1.0, fb=6.0, overhead=0.5,
              send={"F": [0.25, 0.125], "B": 1.0, "I": 2.0}).per_stage(sched)
    assert c.tf.tolist() == [1 + 0.5 + 0.25, 1 + 0.5 + 0.125, 1 + 0.5 + 0.25, 1 + 0.5]
    assert c.tb.tolist() == [2.5, 3.5, 3.5, 3.5]
    assert c.ti.tolist() == [2.0, 4.0, 4.0, 4.0]  # (b - w)/m + 0.5, and the I send past stage 0
    assert c.tw.tolist() == [1.0] * 4  # W sends nothing
    # a pair: its forward's overheads and F send; its backward half adds sb of its own stage
    assert c.tfb.tolist() == [3 + 1 + 0.25, 3 + 1 + 0.125, 3 + 1 + 0.25, 3 + 1]
    assert c.sb.tolist() == [0.0, 1.0, 1.0, 1.0]
    # one stage per device, and a V: the V's turn (stage p-1 to p) stays on its device
    one = Costs(1.0, 2.0, send=0.5).per_stage(build_schedule("1f1b", 1, 2))
    assert one.tf.tolist() == [1.0] and one.tb.tolist() == [2.0]
    v = Costs(1.0, 2.0, send={"F": 0.5}).per_stage(build_schedule("zbv", 2, 4, 2))
    assert v.tf.tolist() == [1.0, 0.5, 1.0, 0.5]  # stages 0..3 on devices 0, 1, 1, 0
    assert Costs(1.0, 2.0).arrays["send"].tolist() == [0.0] * 3


def test_send_prices_one_device_pair_by_the_schedule_not_the_run():
    """What ``send`` is for: one Costs that prices a 1F1B whose device 1 never sends and an
    interleaved schedule whose device 1 does. 1F1B on p = 2: device 0's forwards send, device
    1's do not, so device 0 works 4 * 0.5 longer and the makespan grows by less than all."""
    base, sends = Costs(1.0, 2.0), Costs(1.0, 2.0, send={"F": 0.5})
    flat = simulate(build_schedule("1f1b", 2, 4), base).makespan
    one = simulate(build_schedule("1f1b", 2, 4), sends)
    assert one.busy.tolist() == [12.0 + 4 * 0.5, 12.0]
    assert flat < one.makespan <= flat + 4 * 0.5
    inter = simulate(build_schedule("interleaved-1f1b", 2, 4, 2), sends)
    assert inter.busy.tolist() == [12.0 + 8 * 0.5, 12.0 + 4 * 0.5]


@pytest.mark.parametrize("name, m", [("dualpipe", 1), ("dualpipev", 2)])
def test_a_pair_given_fb_pays_each_halfs_own_send(name, m):
    """DualPipe's pairs run a forward on stage s and a backward on the device's other stage:
    each half pays the send of its own stage, so ``fb = f + b`` prices a pair exactly as no
    ``fb`` does (the pair's halves end to end), sends and all."""
    sched = build_schedule(name, 4, 8, m)
    send = Costs(1.0, 2.0, w=0.5, overhead=0.1, send={"F": 0.5, "B": 0.25, "I": 0.125})
    given = dataclasses.replace(send, fb=3.0)
    plain, paired = simulate(sched, send), simulate(sched, given)
    assert paired.makespan == pytest.approx(plain.makespan, rel=1e-12)
    np.testing.assert_allclose(paired.busy, plain.busy, rtol=1e-12)
    assert plain.makespan > simulate(sched, dataclasses.replace(send, send=0.0)).makespan


def test_send_is_refused_where_a_route_ends_between_devices():
    """A custom schedule whose microbatches stop at stage 0 of two (stage 1 on the other
    device): the stage map says stage 0's forward sends, the route says it does not."""
    sched = Schedule.from_tokens([["0F0", "0B0"], []], [0, 1], n=1, m=1, routes=[[0, 0]])
    assert simulate(sched, Costs(1.0, 2.0)).makespan == 3.0
    with pytest.raises(ScheduleError, match=r"costs\.send must be 0 for a schedule whose "
                                            r"routes end or start between stages on two "
                                            r"devices .*microbatch 0 runs stages 0\.\.0 of 2"):
        simulate(sched, Costs(1.0, 2.0, send=0.1))


@pytest.mark.parametrize("send, message", [
    (-0.1, r"costs\.send must be finite and >= 0 \(got -0\.1\)"),
    ({"W": 0.1}, r"costs\.send's keys must be among \['F', 'B', 'I'\] \(op kinds; got 'W'\)"),
    ({"F": [0.1, 0.2], "I": [0.1, 0.2, 0.3]}, r"costs\.send's kinds must be scalars or "
                                              r"arrays of one length \(got lengths F: 2, I: 3\)"),
])
def test_bad_sends_are_named(send, message):
    with pytest.raises(ScheduleError, match=message):
        Costs(1.0, 2.0, send=send)


@pytest.mark.parametrize("send", [[0.1, 0.2, 0.3], {"F": [0.1, 0.2, 0.3]}])
def test_a_send_that_fits_no_schedule_is_named_by_its_length(send):
    # stored one row per kind: the message gives the length written, not (kinds, length)
    with pytest.raises(ScheduleError, match=r"costs\.send must be a scalar or an array of "
                                            r"length p=4 or V=8 \(got length 3\)"):
        simulate(build_schedule("zbv", 4, 8, 2), Costs(1.0, 2.0, send=send))


@pytest.mark.parametrize("overhead, message", [
    (-0.1, r"costs\.overhead must be finite and >= 0 \(got -0\.1\)"),
    ({"F": [0.1, np.nan]}, r"costs\.overhead\['F'\] must be finite and >= 0"),
    ({"X": 0.1}, r"costs\.overhead's keys must be among \['F', 'B', 'I', 'W'\] \(op kinds; "
                 r"got 'X'\)"),
    ({"FB": 0.1}, r"costs\.overhead's keys must be among"),
    ({"F": [0.1, 0.2], "B": [0.1, 0.2, 0.3]}, r"costs\.overhead's kinds must be scalars or "
                                              r"arrays of one length \(got lengths F: 2, B: 3\)"),
    ([[0.1]], r"costs\.overhead must be a scalar or a 1-D array \(got shape \(1, 1\)\)"),
    ("slow", r"costs\.overhead must be a number or an array of numbers"),
])
def test_bad_overheads_are_named(overhead, message):
    with pytest.raises(ScheduleError, match=message):
        Costs(1.0, 2.0, overhead=overhead)


def test_overhead_must_fit_the_schedule_and_compares_by_value():
    sched = build_schedule("1f1b", 4, 4)
    with pytest.raises(ScheduleError, match=r"costs\.overhead must be a scalar or an array of "
                                            r"length p=4 or V=4 \(got length 3\)"):
        Costs(1.0, 2.0, overhead={"W": [0.1, 0.2, 0.3]}).per_stage(sched)
    a = Costs(1.0, 2.0, overhead=0.1)
    same = Costs(1.0, 2.0, overhead=dict.fromkeys("FBIW", 0.1))
    assert a == same and hash(a) == hash(same) and len({a, same}) == 1
    assert a != Costs(1.0, 2.0) and a != Costs(1.0, 2.0, overhead={"F": 0.1})
    assert Costs(1.0, 2.0).arrays["overhead"].tolist() == [0.0] * 4
    per_device = Costs(1.0, 2.0, overhead={"B": [0.1, 0.2], "I": 0.3}).arrays["overhead"]
    assert per_device.tolist() == [[0, 0], [0.1, 0.2], [0.3, 0.3], [0, 0]]
    with pytest.raises(ValueError, match="read-only"):
        per_device[0, 0] = 1.0


@pytest.mark.parametrize("name", ["dualpipe", "chimera", "interleaved-1f1b", "1f1b"])
def test_for_placement_is_per_stage_of_any_schedule(name):
    """Two-direction schedules hold 2p stages with m = 1: for_placement takes them as
    per_stage does."""
    sched = build_schedule(name, 4, 8, 2 if name == "interleaved-1f1b" else 1)
    f = np.arange(1.0, 5.0)  # one per device
    got = Costs(f=f, b=2.0).for_placement(sched.p, sched.stage_to_device, sched.m)
    # by hand: each stage takes its device's value over the chunks a device holds
    assert len(got.tf) == len(sched.stage_to_device) == (4 if name == "1f1b" else 8)
    np.testing.assert_array_equal(got.tf, f[sched.stage_to_device] / sched.m)
    np.testing.assert_array_equal(got.tb, np.full(len(got.tb), 2.0 / sched.m))
    again = Costs(f=f, b=2.0).per_stage(sched)  # another Costs: no expansion kept between them
    for field in got._fields:
        assert np.array_equal(getattr(got, field), getattr(again, field), equal_nan=True), field


def test_packed_costs_equal_the_general_paths(rng):
    """A ``Costs`` of numbers (Python's or NumPy's) and float64 vectors is packed without its
    arrays (``costs._packed``); given the same values as lists and 0-D arrays, the general
    path makes them. Both hold the same fields, kernel inputs, sends, lengths, hash and
    expansions, on random mixtures of scalars, vectors over devices and over stages."""
    p, m = 4, 2
    schedules = [build_schedule("interleaved-1f1b", p, 8, m), build_schedule("zbv", p, 8),
                 build_schedule("1f1b", p, 8)]
    fields = dict(f=(0.5, 2.0), b=(2.0, 4.0), w=(0.0, 1.0), comm=(0.0, 0.3),
                  gamma=(0.0, 1.0), act=(0.5, 2.0), message_bytes=(0.0, 5.0))
    packed_seen = 0
    for _ in range(60):
        fast, slow = {}, {}
        for name, (low, high) in fields.items():
            pick = rng.integers(0, 4)
            size = p * m if name in ("f", "b", "w") and rng.random() < 0.3 else p
            if pick == 0:
                value = float(rng.uniform(low, high))
                fast[name], slow[name] = value, np.array(value)
            elif pick == 1:
                value = np.float64(rng.uniform(low, high))
                fast[name], slow[name] = value, np.array(value)
            else:
                value = rng.uniform(low, high, size)
                fast[name], slow[name] = value, list(value)
        if rng.random() < 0.3:
            fast["bandwidth"] = slow["bandwidth"] = float(rng.uniform(1.0, 5.0))
        if rng.random() < 0.3:
            fast["overhead"], slow["overhead"] = 0.01, np.array(0.01)
        if rng.random() < 0.3:
            fast["send"], slow["send"] = 0.02, np.array(0.02)
        # w <= b wherever i is not given: keep w within b at every stage
        fast["w"] = slow["w"] = 0.5 * np.min(np.atleast_1d(fast["b"]))
        a, b = Costs(**fast), Costs(**slow)
        packed_seen += "_arrays" not in a.__dict__
        assert "_arrays" in b.__dict__  # (the general path made them at once)
        assert a == b and hash(a) == hash(b)
        for name, arr in b.arrays.items():
            assert a.arrays[name].shape == arr.shape and np.array_equal(a.arrays[name], arr,
                                                                        equal_nan=True)
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in
                   zip(a.kernel_inputs(), b.kernel_inputs(), strict=True))
        assert (a._has_send, a._lengths) == (b._has_send, b._lengths)
        for s in schedules:
            if any(size not in (s.p, s.V) for _, size in a._lengths):
                continue
            if a._has_send and s.name == "zbv":
                continue  # (a V's routes end between devices: send is refused there)
            assert all(np.array_equal(x, y, equal_nan=True) for x, y in
                       zip(a.per_stage(s), b.per_stage(s), strict=True))
    assert packed_seen == 60


def test_numpy_numbers_outside_int64_warn_nothing():
    """A NumPy float16 and int64's minimum were compared with 2**63 as NumPy numbers (an
    overflow warning, an error under -W error, the suite's setting); converted first, the
    one is a number and the other is refused by name, as before the packed path."""
    assert Costs(np.float16(1.0), 2.0) == Costs(1.0, 2.0)
    with pytest.raises(ScheduleError, match=r"^costs.w must be finite and >= 0 \(got "
                                            r"-9223372036854775808\)$"):
        Costs(1.0, 2.0, w=np.int64(-2**63))


ONE = build_schedule("1f1b", 4, 8)


@pytest.mark.parametrize("costs, match", [
    # (the terms the costs have: overhead and send 0 are not named)
    (Costs(1e308, 1e308), r"^costs\.f / m must be at most 1e\+290"),
    (Costs(1e308, 1e308, overhead={"F": 1.0}, send=1.0),
     r"^costs\.f / m \+ costs\.overhead\['F'\] \+ costs\.send\['F'\] must be at most 1e\+290"),
    (Costs(1.0, 2.0, bandwidth=1e-300, message_bytes=1e10),
     r"costs\.comm \+ costs\.message_bytes / costs\.bandwidth must be at most"),
    (Costs(1.0, 2.0, overhead={"W": 1e300}), r"costs\.w / m \+ costs\.overhead\['W'\] must be"),
    (Costs(1.0, 2.0, act=1e300), r"costs\.act / m must be at most"),
])
def test_finite_costs_whose_sums_overflow(costs, match):
    """Finite costs near float64's largest: simulate gave makespan inf and bubble NaN."""
    with pytest.raises(ScheduleError, match=match):
        simulate(build_schedule("interleaved-1f1b", 2, 4, 2), costs)


def test_for_placement_with_chunks_that_do_not_fit_the_map():
    """m=3 with a map of 4 stages on 2 devices (no such schedule): priced each chunk as f/3."""
    with pytest.raises(ScheduleError, match=r"stage_to_device must hold p \* m = 2 \* 3 = 6 "
                                            r"stages .*got 4"):
        Costs(1.0, 2.0).for_placement(p=2, stage_to_device=np.array([0, 1, 1, 0]), m=3)
    # the two-direction schedules' 2p stages with m = 1 stay valid
    Costs(1.0, 2.0).for_placement(p=2, stage_to_device=np.array([0, 1, 1, 0]), m=1)


def test_a_bool_among_numbers_is_no_number():
    """``Costs([1.5, True, 1, 1], 2)`` priced True as 1.0 and ``w=(1, False, 1, 1)`` False as
    0: ``f=True`` alone was refused, and a list was not looked into."""
    for given in (dict(f=[1.5, True, 1, 1], b=2.0), dict(f=1.0, b=2.0, w=(1, False, 1, 1)),
                  dict(f=1.0, b=2.0, overhead={"F": [np.True_, 0.1, 0.1, 0.1]})):
        with pytest.raises(ScheduleTypeError, match=r"must be a number or an array of "
                                                     r"numbers \(got .*(True|False)"):
            Costs(**given)
    assert Costs([1.5, 1, 1, 1], 2.0).f.tolist() == [1.5, 1.0, 1.0, 1.0]


def test_a_costs_fields_are_what_it_prices():
    """An array given to ``Costs`` and changed by its caller afterwards was not priced (its
    values were copied) but showed in ``c.f``, and ``dataclasses.replace(c, b=2.0)`` priced
    the changed one: 77 for 33. The fields are now read-only copies of what is priced."""
    import dataclasses

    f, overhead = np.ones(4), {"F": [0.1] * 4}
    costs = Costs(f, 2.0, overhead=overhead)
    f[:] = 5.0
    overhead["F"][0] = 9.0
    priced = simulate(ONE, costs).makespan
    assert costs.f.tolist() == [1.0] * 4 and costs.overhead["F"].tolist() == [0.1] * 4
    assert simulate(ONE, dataclasses.replace(costs, comm=0.0)).makespan == priced
    assert simulate(ONE, Costs(np.ones(4), 2.0, overhead={"F": [0.1] * 4})).makespan == priced
    with pytest.raises(ValueError, match="read-only"):
        costs.f[0] = 3.0
    listed = Costs([1.0, 1.0, 1.0, 1.0], 2.0)
    assert listed == Costs(np.ones(4), 2.0) and not listed.f.flags.writeable


def test_a_costs_pickles_and_copies_whatever_its_fields():
    """Its per-kind mappings kept read-only (a mappingproxy) made a Costs with ``overhead``
    (every MeasuredRun.costs()) refuse pickle, deepcopy and dataclasses.asdict, and a Result
    holding one."""
    import copy
    import dataclasses
    import pickle

    for costs in (Costs(1.0, 2.0), Costs(np.ones(4), 2.0, w=[0.5] * 4),
                  Costs(1.0, 2.0, overhead={"F": 0.1, "B": np.float64(0.2), "W": [0.1] * 4},
                        send={"F": 0.05})):
        for twin in (pickle.loads(pickle.dumps(costs)), copy.deepcopy(costs)):
            assert twin == costs and simulate(ONE, twin).makespan == \
                simulate(ONE, costs).makespan
        assert dataclasses.asdict(costs)["f"] is not None
        assert pickle.loads(pickle.dumps(simulate(ONE, costs))).makespan == \
            simulate(ONE, costs).makespan
    given = Costs(1.0, 2.0, overhead={"B": np.float64(0.2)})
    assert type(given.overhead["B"]) is np.float64  # a number stays a number


def test_minus_zero_costs_equal_zero_costs():
    """``w=-0.0`` passes the ``>= 0`` check and prices as 0, but compared and hashed apart:
    duplicates as dict keys and sweep axes."""
    assert Costs(1, 2, w=0.0) == Costs(1, 2, w=-0.0)
    assert hash(Costs(1, 2, w=0.0)) == hash(Costs(1, 2, w=-0.0))
    assert len({Costs(1, 2, comm=[0.0, -0.0]), Costs(1, 2, comm=[-0.0, 0.0])}) == 1
    assert Costs(1, 2, w=0.0) != Costs(1, 2, w=0.5)


def test_a_number_too_large_for_a_float_is_refused_as_a_number():
    """``Costs([10**400, 1], 2)`` said f "must be a number or an array of numbers" (a
    ScheduleTypeError), and ``Costs(10**400, 2)`` printed the number's 401 digits."""
    for f in ([10**400, 1], 10**400, -(10**400)):
        with pytest.raises(ScheduleError, match=r"costs.f must be finite and > 0 \(got "
                                                r"\[?-?1.000e\+400") as caught:
            Costs(f, 2)
        assert not isinstance(caught.value, ScheduleTypeError)
        assert len(str(caught.value)) < 100


def test_kernel_inputs_leave_the_frozen_costs_as_it_was():
    """``kernel_inputs`` handed out views of the frozen Costs' buffer: a write changed its
    ``arrays``, equality and hash, not its ``f`` (a review)."""
    costs = Costs(f=1.0, b=2.0)
    costs.kernel_inputs()[0][:] = 5.0
    assert costs == Costs(f=1.0, b=2.0) and hash(costs) == hash(Costs(f=1.0, b=2.0))
    assert float(costs.arrays["f"]) == 1.0
