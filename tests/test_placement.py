"""fastpp.placement: the stage maps and routes of SCHEDULES.md section 1, by hand."""

import fastpp
from fastpp import placement


def test_names_and_codes_are_one_table():
    assert [placement.CODES[name] for name in placement.NAMES] == [0, 1, 2]
    assert (placement.LOOP, placement.VSHAPE, placement.TWO_DIRECTIONS) == (0, 1, 2)
    assert {spec.placement for spec in fastpp.SCHEDULES.values()} == set(placement.NAMES)
    for spec in fastpp.SCHEDULES.values():
        assert placement.NAMES[spec.placement_code] == spec.placement


def test_stage_maps():
    assert placement.stage_map(placement.LOOP, 3, 2).tolist() == [0, 1, 2, 0, 1, 2]
    assert placement.stage_map(placement.VSHAPE, 3, 2).tolist() == [0, 1, 2, 2, 1, 0]
    assert placement.stage_map(placement.TWO_DIRECTIONS, 3, 1).tolist() == [0, 1, 2, 2, 1, 0]


def test_routes():
    first, last = placement.routes(placement.LOOP, 2, 3, 2)
    assert first.tolist() == [0, 0, 0] and last.tolist() == [3, 3, 3]
    # two directions: the first half of the microbatches down stages 0..p-1, the rest up p..2p-1
    first, last = placement.routes(placement.TWO_DIRECTIONS, 2, 4, 1)
    assert first.tolist() == [0, 0, 2, 2] and last.tolist() == [1, 1, 3, 3]


def test_built_schedules_carry_the_placement():
    s = fastpp.build_schedule("zbv", 4, 8, 2)
    assert s.stage_to_device.tolist() == placement.stage_map(placement.VSHAPE, 4, 2).tolist()
