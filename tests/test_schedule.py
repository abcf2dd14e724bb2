"""Schedule encoding, text form and validation of hand-written schedules."""

import numpy as np
import pytest

from fastpp import Costs, Op, Schedule, ScheduleError, build_schedule, simulate
from fastpp.ops import format_op, parse_op

GOOD = [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]


def test_tokens_round_trip_and_grid():
    sched = Schedule.from_tokens(GOOD)
    assert (sched.p, sched.n, sched.m, sched.V) == (2, 2, 1, 2)
    assert sched.tokens() == GOOD
    assert sched.stage_to_device.tolist() == [0, 1]
    assert sched.kind[0].tolist() == [Op.F, Op.F, Op.B, Op.B]
    assert str(sched).splitlines()[1:] == [
        "device  0:  0F0  0F1  0B0  0B1",
        "device  1:  1F0  1B0  1F1  1B1",
    ]


def test_generated_schedules_round_trip_through_tokens():
    sched = build_schedule("interleaved-1f1b", 4, 8, 2)
    again = Schedule.from_tokens(sched.tokens(), n=sched.n, m=sched.m)
    assert again.tokens() == sched.tokens()
    assert again.stage_to_device.tolist() == sched.stage_to_device.tolist()


@pytest.mark.parametrize("token, parsed", [
    ("0F0", (Op.F, 0, 0, -1, -1)),
    ("12I345", (Op.I, 12, 345, -1, -1)),
    ("5W2", (Op.W, 5, 2, -1, -1)),
    ("(0F7;7B3)OVERLAP_F_B", (Op.FB, 0, 7, 7, 3)),
])
def test_parse_and_format_ops(token, parsed):
    assert parse_op(token) == parsed
    assert format_op(*parsed) == token


def test_idle_cells_are_skipped():
    rows = [["0F0", "", None, "0B0"], ["1F0", "1B0"]]
    assert Schedule.from_tokens(rows).tokens() == [["0F0", "0B0"], ["1F0", "1B0"]]


@pytest.mark.parametrize("rows, kwargs, message", [
    ([["0F0", "0X0"]], {}, r"device 0, position 1: op token must look like"),
    ([["0F0", "0B0"], ["0F1", "0B1"]], {}, r"stage 0 appears on devices 0 and 1"),
    ([["0F0", "0B0"], ["2F0", "2B0"]], {}, r"every stage 0\.\.2 needs at least one op"),
    # missing: stage 1 has no backward for microbatch 1
    ([["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1"]], {},
     r"stage 1, microbatch 1 on device 1 needs exactly one B \(or one I and one W\) "
     r"\(got 1 F, 0 B, 0 I, 0 W\)"),
    # duplicated forward
    ([["0F0", "0F0", "0B0"], ["1F0", "1B0"]], {}, r"stage 0, microbatch 0 .* exactly one F"),
    # n given smaller than a microbatch id
    (GOOD, {"n": 1}, r"device 0, op 1 \(0F1\): microbatch must be in 0\.\.0"),
    # misplaced: stage 1 on device 0 though the map says device 1
    ([["0F0", "1F0", "1B0", "0B0"], []], {"stage_to_device": [0, 1]},
     r"device 0, op 1 \(1F0\): stage is not on this device"),
    (GOOD, {"stage_to_device": [0, 1, 1]},
     r"stage 2, microbatch 0 on device 1 needs exactly one F"),
    ([["0B0", "0F0"]], {}, r"stage 0, microbatch 0 on device 0: F must come before its B or I"),
    ([["0F0", "0W0", "0I0"]], {}, r"I must come before its W"),
    ([["0F0", "0I0"]], {}, r"needs one I and one W and no B \(got 1 F, 0 B, 1 I, 0 W\)"),
    ([["0F0", "0I0", "0W0", "0B0"]], {}, r"one I and one W and no B"),
    ([["(0F0;0B0)OVERLAP_F_B"]], {}, r"F must come before its B or I"),
    ([["0F0", "0B0"]], {"forward_only": True}, r"a forward-only schedule has only forwards"),
    ([["0F0", "0B0"]], {"n": 0}, r"n must be a positive integer \(got n=0\)"),
    ([["0F0", "0B0"]], {"m": 1.5}, r"m must be a positive integer \(got m=1\.5\)"),
    ([["0F0", "0B0"]], {"stage_to_device": [3]}, r"stage_to_device must map every stage"),
    ([["0F0", "0B0"]], {"routes": [[0, 2]]},
     r"routes must hold 0 <= first <= last < V=1 for each microbatch \(got \[0, 2\]"),
    ([], {}, r"rows must list at least one device"),
])
def test_bad_schedules_are_named(rows, kwargs, message):
    with pytest.raises(ScheduleError, match=message):
        Schedule.from_tokens(rows, **kwargs)


def test_bad_arrays_are_named():
    sched = build_schedule("1f1b", 2, 2)
    ops, length, s2d = sched.ops.copy(), sched.length, sched.stage_to_device
    with pytest.raises(ScheduleError, match=r"ops must have shape \(5, p, L\)"):
        Schedule(ops[:3], length, s2d, n=2)
    with pytest.raises(ScheduleError, match=r"ops must be an integer array \(got dtype float64\)"):
        Schedule(ops.astype(float), length, s2d, n=2)
    with pytest.raises(ScheduleError, match=r"length must have shape \(2,\)"):
        Schedule(ops, [4, 4, 4], s2d, n=2)
    with pytest.raises(ScheduleError, match=r"length must have shape \(2,\) with values in 0\.\.4"):
        Schedule(ops, [4, 9], s2d, n=2)
    bad = ops.copy()
    bad[0, 1, 2] = 7
    with pytest.raises(ScheduleError, match=r"device 1, op 2 \(\[7, 1, 1, -1, -1\]\): kind must"):
        Schedule(bad, length, s2d, n=2)
    bad = ops.copy()
    bad[1, 0, 0] = -3
    with pytest.raises(ScheduleError, match=r"device 0, op 0 \(-3F0\): stage must be in 0\.\.1"):
        Schedule(bad, length, s2d, n=2)
    with pytest.raises(ScheduleError, match=r"ops must fit in int32"):
        Schedule(ops.astype(np.int64) * 2**40, length, s2d, n=2)


def test_scheduleerror_is_a_valueerror():
    assert issubclass(ScheduleError, ValueError)


def test_huge_ids_are_refused_before_anything_is_allocated():
    with pytest.raises(ScheduleError, match=r"V\*n must be at most 60000000 \(got V=1, "
                                            r"n=1000000000\)"):
        Schedule.from_tokens([["0F999999999", "0B999999999"]])


def test_one_error_base():
    """Bad input raises ScheduleError (a ValueError); a wrong type is also a TypeError."""
    with pytest.raises(ScheduleError, match=r"device 0, position 0: stage and microbatch ids "
                                            r"must be below 2\*\*31"):
        Schedule.from_tokens([["0F99999999999999999999", "0B0"]])
    with pytest.raises(ScheduleError, match="schedule must be a fastpp.Schedule") as caught:
        simulate("1f1b")
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ["dualpipe", "chimera", "zbv", "interleaved-1f1b", "1f1b"])
def test_from_tokens_takes_m_from_the_routes(name):
    """A two-direction token list given its routes had ``m = V // p = 2``: every op and every
    activation half of what DualPipe's own schedule prices (13 for 26 at p = 4, n = 8)."""
    s = build_schedule(name, 4, 8)
    t = Schedule.from_tokens(s.tokens(), s.stage_to_device,
                             routes=np.stack([s.route_first, s.route_last], 1))
    assert t.m == s.m
    c = Costs(f=1, b=2, w=1)
    assert simulate(t, c).makespan == simulate(s, c).makespan
