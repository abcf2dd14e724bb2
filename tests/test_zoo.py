"""The schedule zoo: published figures, exact orders, and the reference beyond p = 8."""

import pytest
from helpers import random_costs
from reference import assert_agrees, simulate_reference

import fastpp
from fastpp import Costs, ScheduleError, build_schedule, simulate

UNIT_CHUNKS = Costs(f=2, b=4, w=2)  # m = 2: a chunk's F, I and W each take 1


@pytest.mark.parametrize("name, p, n, published", [
    # the authors' span-metric bubble rates (zbv_greedy.py), unit chunk costs
    ("v-min", 4, 8, 0.1864), ("v-half", 4, 8, 0.0943),
    ("v-min", 8, 24, 0.1579), ("v-half", 8, 24, 0.1056),
    ("v-min", 16, 48, 0.1700), ("v-half", 16, 48, 0.1246),
])
def test_v_half_and_v_min_match_the_authors(name, p, n, published):
    res = simulate(build_schedule(name, p, n, 2), UNIT_CHUNKS)
    assert round(res.span_bubble_ratio, 4) == published
    units = (p + 2) // 2 if name == "v-half" else (p + 4) // 3
    assert res.peak_live.max() == 2 * units  # two chunks per unit of activations


def test_dualpipe_unit_check():
    """DeepSeek's unit check: F = I = W = 1, full B = 2, F&B = 3 at p = 8, n = 20."""
    res = simulate(build_schedule("dualpipe", 8, 20), Costs(f=1, b=2, w=1, fb=3))
    assert res.makespan == 66
    assert res.idle.tolist() == [6.0] * 8
    assert res.peak_live.tolist() == [9] * 8  # p + 1
    assert res.schedule.parameter_units.tolist() == [2.0] * 8  # two model copies


def test_dualpipe_overlap_gain():
    """A pair shorter than F + B shortens the iteration; the default gains nothing."""
    sched = build_schedule("dualpipe", 8, 20)
    plain = simulate(sched, Costs(f=1, b=2, w=1))
    assert plain.makespan == simulate(sched, Costs(f=1, b=2, w=1, fb=3)).makespan
    assert simulate(sched, Costs(f=1, b=2, w=1, fb=2.5)).makespan < plain.makespan


def test_zbv_zero_bubble_and_peak():
    for p in (2, 4, 8):
        for n in (2 * p - 1, 3 * p):
            res = simulate(build_schedule("zbv", p, n, 2), UNIT_CHUNKS)
            assert res.span_bubble_ratio == 0.0
            assert res.peak_live.tolist() == [2 * p] * p
            assert res.schedule.parameter_units.tolist() == [1.0] * p


def test_zbv_drops_the_padding_microbatches():
    # built for 2p-1 = 7 microbatches, only 0..2 kept
    sched = build_schedule("zbv", 4, 3, 2)
    assert sched.n == 3 and sched.num_ops == 3 * 8 * 3
    assert max(int(t[-1]) for row in sched.tokens() for t in row) == 2


def test_chimera_basic_unit_is_the_papers():
    """SCHEDULES.md's optimal unit for D = 4 (microbatches 0, 1 down, 2, 3 up)."""
    sched = build_schedule("chimera", 4, 4)
    strip = [[tok.lstrip("0123456789") for tok in row] for row in sched.tokens()]  # drop stages
    assert strip == [
        "F0 F1 F2 B2 F3 B3 B0 B1".split(),
        "F0 F2 F1 F3 B2 B0 B3 B1".split(),
        "F2 F0 F3 F1 B0 B2 B1 B3".split(),
        "F2 F3 F0 B0 F1 B1 B2 B3".split(),
    ]
    # device r holds stage r of the downward copy and stage 2p-1-r of the upward one
    assert sched.stage_to_device.tolist() == [0, 1, 2, 3, 3, 2, 1, 0]
    res = simulate(sched, Costs(f=1, b=1))
    assert res.makespan == 3 * 4 - 2


def test_chimera_later_units_fill_the_tail_bubbles():
    """Concatenating units would keep the bubble at (D-2)/(3D-2); the authors' overlapping
    units do better as n grows."""
    D = 4
    ratios = [simulate(build_schedule("chimera", D, n), Costs(f=1, b=1)).bubble_ratio
              for n in (D, 2 * D, 4 * D)]
    assert ratios[0] == pytest.approx((D - 2) / (3 * D - 2))
    assert ratios[0] > ratios[1] > ratios[2]


def test_dualpipev_phase_counts():
    # DualPipeV device r: F's of chunk 0 and 1, n each; pairs in phase 4 and 5
    p, n = 4, 10
    sched = build_schedule("dualpipev", p, n, 2)
    for r in range(p):
        toks = sched.tokens()[r]
        pairs = [t for t in toks if t.endswith("OVERLAP_F_B")]
        # phase 4: 2(n-2p+r+1) pairs less the plain first pair on device p-1; phase 5: p-r-1
        expected = 2 * (n - 2 * p + r + 1) - (r == p - 1) + (p - r - 1)
        assert len(pairs) == expected, r
    assert simulate(sched, UNIT_CHUNKS).peak_live.tolist() == [2 * p + 1] * p


@pytest.mark.parametrize("name", sorted(fastpp.SCHEDULES))
def test_agrees_with_reference_up_to_p16(name, rng):
    """Random valid (p, n) with 9 <= p <= 16, random uneven costs and latencies."""
    spec = fastpp.SCHEDULES[name]
    tried = 0
    while tried < 3:
        p, n = int(rng.integers(9, 17)), int(rng.integers(1, 49))
        # the V's two chunks; two or three where the schedule interleaves chunks; else one
        m = 2 if spec.placement == "v" else (int(rng.integers(2, 4)) if spec.default_m > 1
                                               else 1)
        if spec.reasons(p, n, m, p)[0]:
            continue
        sched = build_schedule(name, p, n, m)
        costs = random_costs(rng, sched, split=spec.split_backward)
        assert_agrees(simulate(sched, costs), simulate_reference(sched, costs))
        tried += 1


@pytest.mark.parametrize("call, message", [
    (("zbv", 4, 8, 1), r"m must be 2 \(V placement: two chunks per device\) for 'zbv' \(got m=1\)"),
    (("v-half", 4, 8, 3), r"m must be 2 .* for 'v-half' \(got m=3\)"),
    (("dualpipe", 3, 12), r"p must be even for 'dualpipe' \(got p=3\)"),
    (("dualpipe", 4, 9), r"n must be even for 'dualpipe' \(got n=9\)"),
    (("dualpipe", 4, 6), r"n must be at least 2p=8 for 'dualpipe' \(got n=6\)"),
    (("dualpipe", 4, 8, 2), r"m must be 1 \(one stage per device and direction\)"),
    (("dualpipev", 4, 7, 2), r"n must be at least 2p=8 for 'dualpipev' \(got n=7\)"),
    (("chimera", 4, 6), r"n must be a multiple of p=4 for 'chimera' \(got n=6\)"),
    (("chimera", 2, 4), r"n must be p when p=2 for 'chimera' \(got n=4\)"),
    (("zb-h1", 4, 8, 2), r"m must be 1 .* for 'zb-h1' \(got m=2\)"),
])
def test_zoo_constraints(call, message):
    with pytest.raises(ScheduleError, match=message):
        build_schedule(*call)
