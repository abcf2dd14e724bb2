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


def test_stage_devices_is_stage_map():
    """``stage_devices`` (NumPy, for the cost model's flat tables) gives each stage the device
    ``stage_map`` (the engine's) gives it, for every placement, ``p`` and ``m``; the stage
    after the last is the loop's first device, the others' last."""
    import numpy as np

    from fastpp.placement import CODES, LOOP, stage_devices, stage_map

    for code in CODES.values():
        for p in (1, 2, 3, 4, 8):
            for m in ((1, 2, 3) if code == LOOP else (2,)):
                expect = stage_map(code, p, m)
                stage = np.arange(expect.size)
                assert stage_devices(code, p, stage).tolist() == expect.tolist()
                assert int(stage_devices(code, p, expect.size)) == (0 if code == LOOP else
                                                                     expect[-1])
