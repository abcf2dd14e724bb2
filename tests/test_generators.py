"""Generators: orders written out by hand from SCHEDULES.md, and the registry's constraints."""

import numpy as np
import pytest
from helpers import POINTS

import fastpp
from fastpp import Schedule, ScheduleError, build_schedule


def test_1f1b_order():
    # device r: min(p-r-1, n) warmup forwards, then F/B pairs, then the remaining backwards
    assert build_schedule("1f1b", 3, 4).tokens() == [
        "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3".split(),
        "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3".split(),
        "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3".split(),
    ]
    # fewer microbatches than devices: warmup capped at n
    assert build_schedule("1f1b", 3, 1).tokens() == [["0F0", "0B0"], ["1F0", "1B0"],
                                                      ["2F0", "2B0"]]


def test_gpipe_and_forward_only_orders():
    assert build_schedule("gpipe", 2, 3).tokens()[1] == "1F0 1F1 1F2 1B0 1B1 1B2".split()
    fwd = build_schedule("forward-only", 2, 3)
    assert fwd.tokens()[0] == "0F0 0F1 0F2".split()
    assert fwd.forward_only


def test_interleaved_order_follows_megatron():
    # p=2, n=4, m=2, G=2: virtual microbatches k: (mb, chunk) = (0,0) (1,0) (0,1) (1,1) (2,0)
    # (3,0) (2,1) (3,1); stage of chunk c on device r is c*p + r; backward chunk is m-1-c.
    # device 0 warms up with 2(p-1) + (m-1)G = 4, device 1 with 2.
    assert build_schedule("interleaved-1f1b", 2, 4, 2).tokens() == [
        "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3".split(),
        "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3".split(),
    ]


def test_interleaved_last_group_holds_the_remainder():
    # G=3 with n=5 (p=2): groups {0,1,2}, {3,4}: the last group is ordered the same way
    sched = build_schedule("interleaved-1f1b", 2, 5, 2, G=3)
    forwards = [t for t in sched.tokens()[0] if "F" in t]
    assert forwards == "0F0 0F1 0F2 2F0 2F1 2F2 0F3 0F4 2F3 2F4".split()


def test_looped_bfs_order():
    assert build_schedule("looped-bfs", 2, 2, 2).tokens()[1] == \
        "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0".split()


@pytest.mark.parametrize("call, message", [
    (("nope", 2, 2), r"schedule must be one of \[.*'1f1b'.*\] \(got 'nope'\)"),
    (("1f1b", 0, 2), r"p must be a positive integer \(got p=0\)"),
    (("1f1b", 2, -1), r"n must be a positive integer \(got n=-1\)"),
    (("1f1b", 2, 2.0), r"n must be a positive integer \(got n=2\.0\)"),
    (("1f1b", True, 2), r"p must be a positive integer \(got p=True\)"),
    (("1f1b", 2, 2, 2), r"m must be 1 \(one stage per device\) for '1f1b' \(got m=2\)"),
    (("gpipe", 2, 2, 3), r"m must be 1 .* for 'gpipe' \(got m=3\)"),
    (("interleaved-1f1b", 4, 8, 1), r"m must be at least 2 \(use '1f1b' for m=1\) for "
                                    r"'interleaved-1f1b' \(got m=1\)"),
    (("interleaved-1f1b", 4, 6, 2), r"n must be a multiple of G=4 or leave a remainder of at "
                                    r"least p=4 for 'interleaved-1f1b' \(got n=6\)"),
    (("interleaved-1f1b", 4, 2, 2), r"n must be at least G=4 \(or give G=n: PyTorch's one "
                                    r"round of fewer than p\) for 'interleaved-1f1b' \(got n=2\)"),
    (("1f1b", 2000, 2001), r"p\*n\*m must be at most 4,000,000 for '1f1b' \(got p\*n\*m=4002000\)"),
])
def test_bad_parameters_are_named(call, message):
    with pytest.raises(ScheduleError, match=message):
        build_schedule(*call)


def test_options():
    with pytest.raises(ScheduleError, match=r"G must be at least p=4, or n=8 \(one round, as "
                                            r"PyTorch runs it\) .* \(got G=2\)"):
        build_schedule("interleaved-1f1b", 4, 8, 2, G=2)
    with pytest.raises(ScheduleError, match=r"G must be at least p=4 for 'combined-1f1b' "):
        build_schedule("combined-1f1b", 4, 8, 2, G=2)  # (Megatron's groups alone)
    with pytest.raises(ScheduleError,
                       match=r"G must not be given for '1f1b': it takes no options \(got G=4\)"):
        build_schedule("1f1b", 4, 8, G=4)


def test_registry_reasons_are_vectorized():
    spec = fastpp.SCHEDULES["interleaved-1f1b"]
    reasons = spec.reasons(np.array([4, 4, 4]), np.array([8, 6, 8]), np.array([2, 2, 1]), 4)
    assert reasons[0] == ""
    assert "n must be a multiple of G=4" in reasons[1]
    assert "m must be at least 2" in reasons[2]
    assert all(spec.describe() for spec in fastpp.SCHEDULES.values())


def test_work_bound_does_not_wrap_around():
    """p*n*m of huge values overflows int64; the bound must still hold (it once segfaulted)."""
    with pytest.raises(ScheduleError, match=r"p\*n\*m must be at most 4,000,000"):
        build_schedule("interleaved-1f1b", 7, 2**63 - 1, 2**63 - 1)


def test_generated_schedules_pass_full_validation():
    """build_schedule trusts its generators (Schedule.trusted): every schedule they build over
    the grid the tests walk passes the full op-by-op validation of the public constructor."""
    for name, p, n, m in POINTS:
        sched = build_schedule(name, p, n, m)
        checked = Schedule(sched.ops, sched.length, sched.stage_to_device, n=n, m=m, name=name,
                           routes=np.stack([sched.route_first, sched.route_last], axis=1),
                           forward_only=sched.forward_only)
        assert checked.tokens() == sched.tokens()
        assert sched.ops.dtype == sched.length.dtype == sched.stage_to_device.dtype == np.int32
    assert {name for name, *_ in POINTS} == set(fastpp.SCHEDULES)  # every generator walked


def test_a_schedule_built_again_is_the_same_and_its_own():
    """build_schedule keeps a built schedule's arrays for the next call with the same
    arguments; each call gets copies, so writing into one schedule leaves the next intact."""
    first = build_schedule("interleaved-1f1b", 2, 8, 2, G=2)
    kept = first.ops.copy()
    first.ops[:] = 0
    first.length[:] = 0
    again = build_schedule("interleaved-1f1b", 2, 8, 2, G=2)
    assert np.array_equal(again.ops, kept) and again.length.min() > 0
    assert not np.array_equal(build_schedule("interleaved-1f1b", 2, 8, 2, G=4).ops, kept)
    with pytest.raises(ScheduleError, match="G must be"):  # validated on every call
        build_schedule("interleaved-1f1b", 4, 8, 2, G=2)


def test_m_defaults_to_the_schedules_own():
    """Without ``m`` each schedule takes its ``default_m``, as the sweeps and the command line
    do: ``build_schedule("zbv", 4, 8)`` said "m must be 2 ... (got m=1)" of an m never given."""
    from fastpp import SCHEDULES

    for name, spec in SCHEDULES.items():  # (p = 4, n = 16 passes every schedule's rules)
        assert build_schedule(name, 4, 16).tokens() == \
            build_schedule(name, 4, 16, spec.default_m).tokens(), name
    assert (build_schedule("zbv", 4, 8).m, build_schedule("1f1b", 4, 8).m) == (2, 1)


def test_builds_whose_work_outgrows_p_n_m_are_refused_by_their_size():
    """V-Half's and V-Min's greedy fills slot tables of p (6p + 6n) cells (at p = 8000, n = 2:
    numpy's MemoryError on 32,000 ops), and ZB-V lays out 2p - 1 microbatches whatever n (p =
    10^6, n = 2 ran for hours): each is bounded by its own size rule, named, while their
    shapes' rules, which closed forms hold, are not."""
    for name in ("v-half", "v-min"):
        with pytest.raises(ScheduleError, match=rf"p must be at most 512 .* for '{name}' "
                                                r"\(got p=8000\)"):
            build_schedule(name, 8000, 2, 2)
        assert fastpp.SCHEDULES[name].shape_reason(8000, 2, 2, 8000) == ""
    with pytest.raises(ScheduleError, match=r"p\*max\(n, 2p-1\)\*m must be at most 4,000,000 "
                                            r".* \(got p\*max\(n, 2p-1\)\*m=3999998000000\)"):
        build_schedule("zbv", 10**6, 2, 2)
    assert build_schedule("zbv", 1000, 2, 2).num_ops == 12 * 1000  # 2p - 1 = 1999: within it
