"""Bad input to ``simulate`` and the schedule API: ``build_schedule``, ``Schedule.from_tokens``,
``fastpp.io``, the bounds on a schedule's size, and the ``Result`` (read-only). A value of the
wrong type is a ``ScheduleTypeError``, of the right type but out of range a ``ScheduleError``;
never NumPy's error, an inf or a NaN.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import numpy as np
import pytest

import fastpp
from fastpp import Costs, Noise, ScheduleError, ScheduleTypeError, build_schedule, simulate

ONE = build_schedule("1f1b", 2, 4)


def test_finite_durations_whose_sums_overflow():
    s = build_schedule("1f1b", 2, 4)
    with pytest.raises(ScheduleError, match=r"durations must be at most 1e\+290 .* op 0 "
                                            r"\(0F0\) of device 0"):
        simulate(s, durations=np.full(s.kind.shape, 1e300))


def test_the_op_block_bound_holds_the_largest_schedule_the_work_bound_allows():
    """optimize(2000, 2000) passed p*n*m <= 4,000,000 and failed seven seconds later on the
    op block's 50,000,000 slots, naming ``ops``: a split schedule at the bound needs 5 fields
    x 3 ops x 4,000,000."""
    from fastpp.generators.registry import MAX_WORK
    from fastpp.ops import OP_FIELDS
    from fastpp.schedule import MAX_OPS

    assert MAX_OPS >= OP_FIELDS * 3 * MAX_WORK


@pytest.mark.parametrize("call", [lambda: build_schedule("1f1b", "4", 4),
                                  lambda: build_schedule("1f1b", None, 4),
                                  lambda: build_schedule(None, 4, 4)])
def test_a_wrong_type_is_a_type_error(call):
    """simulate.md: a wrong-type argument raises ScheduleTypeError (also a TypeError);
    build_schedule's counts and name raised a plain ScheduleError."""
    with pytest.raises(fastpp.ScheduleTypeError):
        call()


@pytest.mark.parametrize("rows, keywords, match", [
    ([["0F0", "0B0"], ["1F0", "1B0"]], dict(routes=[[1, 0]]),
     r"routes must hold 0 <= first <= last < V=2 for each microbatch \(got \[1, 0\] for "
     r"microbatch 0\)"),
    ([[], []], {}, r"rows must hold at least one op \(got no op on any device\)"),
])
def test_from_tokens_says_what_is_wrong(rows, keywords, match):
    """routes in the right shape were refused 'got shape (1, 2)'; no op at all said 'every
    stage 0..-1 ... (missing [])'."""
    with pytest.raises(ScheduleError, match=match):
        fastpp.Schedule.from_tokens(rows, **keywords)


def test_in_loss_order_checks_a_schedule_written_into():
    """A schedule whose arrays were written into (microbatch 7 of n = 3) raised NumPy's
    IndexError; a duplicated microbatch named routes out of int32, read from memory never
    written."""
    schedule = build_schedule("1f1b", 2, 3)
    schedule.ops[2, 1, 0] = 7
    with pytest.raises(ScheduleError, match=r"microbatch must be in 0..2"):
        fastpp.io.in_loss_order(schedule)


def test_a_long_pipeline_within_the_bounds_simulates():
    """``simulate`` of 1F1B at p = 100,000 (p n m = 400,000, within the 4,000,000 bound)
    raised MemoryError: the point plan kept a V x V table of overlapped pairs (80 GB)."""
    result = simulate(build_schedule("1f1b", 100_000, 4), Costs(1.0, 2.0))
    assert result.makespan == 3 * (100_000 - 1) + 4 * 3  # (p - 1)(f + b) + n (f + b)


@pytest.mark.parametrize("call", [
    lambda: simulate(ONE, noise=Noise(), samples=2, seed=None),
    lambda: simulate(ONE, noise=Noise(), samples=2, seed=1.5),
    lambda: simulate(ONE, noise=Noise(), samples=2, seed=True),
    lambda: simulate(ONE).memory_curve("0"),
    lambda: simulate(ONE, noise=Noise(), samples=2).times(1.0),
    lambda: simulate(ONE, noise=Noise(), samples=2).op_times(0.0),
    lambda: ONE.token(0.0, 0),
    lambda: fastpp.sweep("1f1b", p=2.0, n=2, progress=False),
    lambda: Noise(spike=0.1),
    lambda: Noise(blocking="yes"),
    lambda: Noise(dist=3),
], ids=["seed None", "seed 1.5", "seed True", "memory_curve '0'", "times 1.0",
        "op_times 0.0", "token 0.0", "sweep p 2.0", "spike 0.1", "blocking 'yes'", "dist 3"])
def test_a_value_of_the_wrong_type_is_a_type_error(call):
    """A value of the wrong type raised a plain ScheduleError here, where the same argument
    elsewhere (``samples=1.5``, ``optimize``'s ``seed=1.5``, ``build_schedule``'s ``p=2.0``)
    raises a ScheduleTypeError, which is also a TypeError as simulate.md says."""
    with pytest.raises(ScheduleTypeError, match=r"must (be|hold) .*\(got "):
        call()


def test_right_type_out_of_range_stays_a_value_error():
    for call in (lambda: simulate(ONE, noise=Noise(), samples=2, seed=-1),
                 lambda: simulate(ONE).memory_curve(2),
                 lambda: Noise(dist="normal"),
                 lambda: Noise(spike=(0.1, 2.0, 3.0)),
                 lambda: fastpp.sweep("1f1b", p=0, n=2, progress=False)):
        with pytest.raises(ScheduleError) as err:
            call()
        assert not isinstance(err.value, TypeError), err.value


def test_results_are_read_only():
    """A Result is documented read-only, but its arrays took writes, and its idle time, memory
    curve and Monte Carlo mean followed them (``r.busy[0] = 100`` gave a negative idle)."""
    r = simulate(ONE, Costs(1, 2, comm=0.1))
    for name in ("busy", "span", "peak_activations", "peak_live", "start", "end",
                 "mem_start", "mem_end", "live_start", "live_end"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(r, name)[0] = 100
    fast = simulate(ONE)  # (a point without hand-offs: the compiled path)
    for name in ("busy", "start", "end", "peak_live"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(fast, name)[0] = 100
    assert (fast.idle >= 0).all() and (r.idle >= 0).all()
    mc = simulate(ONE, noise=Noise(cov=0.1), samples=5)
    for name in ("makespan", "busy", "span"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(mc, name)[0] = 0
    assert mc.mean == pytest.approx(float(np.mean(mc.makespan)))


def test_numpy_scalars_are_their_python_values_in_choices():
    """A name read from a frame is an ``np.str_``; the type check of ``one_of`` must take it
    as the string it is (and NumPy's bools and integers likewise)."""
    from fastpp.checks import one_of

    one_of(np.str_("a"), "x", ("a", "b"))
    one_of(np.bool_(True), "x", (False, True))
    one_of(np.int64(2), "x", (1, 2))
    assert simulate(build_schedule(np.str_("1f1b"), 2, 4)).makespan == 15.0
    with pytest.raises(ScheduleTypeError, match=r"x must be one of \[False, True\] \(got 1\)"):
        one_of(np.int64(1), "x", (False, True))


def test_a_makespan_too_short_for_a_throughput_is_refused():
    """``f / m`` of a subnormal ``f`` rounded to 0: simulate returned a makespan of 0 (and
    ``throughput`` raised ``ZeroDivisionError``), where a sweep refuses the point. Measured
    ``durations`` of 0 take no time: their throughput is infinite (it raised too)."""
    s = build_schedule("interleaved-1f1b", 2, 4, 2)
    for f in (5e-324, 1e-320):
        with pytest.raises(ScheduleError, match=r"costs must keep the throughput n / makespan "
                                                r"finite"):
            simulate(s, Costs(f, f))
    one = build_schedule("1f1b", 2, 2)
    assert simulate(one, Costs(1, 2), durations=np.zeros(one.kind.shape)).throughput == np.inf
    assert simulate(s, Costs(1e-300, 1e-300)).throughput < np.inf


def test_an_op_of_no_time_holds_its_activations_once():
    """The reference counted a forward of no time (a zero in measured durations, or a cost
    the clock's precision absorbs) as freed at the instant it allocated, the engine as held
    once, in the device's op order: 51 of 374 random wide-ranging cases disagreed. The
    reference now takes one instant's events in op order, as a device runs them."""
    from reference import assert_agrees, simulate_reference

    s = build_schedule("1f1b", 2, 1)
    wide = Costs([1e17, 1.0], [1.0, 1.0])  # 1e17 + 1 == 1e17: device 1's ops take no time
    assert_agrees(simulate(s, wide), simulate_reference(s, wide))
    assert simulate_reference(s, wide).peak_live == [1, 1]
    s = build_schedule("zb-h1", 1, 1)
    costs, zero = Costs(1, 2, w=1, gamma=0.5), np.array([[0.0, 0.0, 1.0]])
    assert simulate_reference(s, costs, durations=zero).peak_activations == [1.0]
    assert_agrees(simulate(s, costs, durations=zero), simulate_reference(s, costs,
                                                                         durations=zero))
    rng = np.random.default_rng(0)
    for name in ("1f1b", "zb-h1", "interleaved-1f1b", "zbv", "gpipe"):
        s = build_schedule(name, 3, 6)
        durations = rng.choice([0.0, 1.0, 2.5], size=s.kind.shape)
        durations[:, :2] = 1.0  # (some time: a makespan of 0 has no bubble ratio)
        assert_agrees(simulate(s, costs, durations=durations),
                      simulate_reference(s, costs, durations=durations))
