"""Placements: which device runs each virtual stage, and which stages each microbatch runs.

SCHEDULES.md section 1. A placement has a name (the public word: ``"loop"``, ``"v"``,
``"two-directions"``) and a code (the same thing as a small integer, for jitted code and the
sweeps' per-schedule tables); ``NAMES[code]`` and ``CODES[name]`` are the one table between
them.

- ``loop``: stage ``s`` on device ``s % p`` (``m`` chunks per device, one route ``0 -> V-1``).
- ``v``: ``m = 2``; stage ``s < p`` on device ``s``, stage ``s >= p`` on device ``2p-1-s``.
- ``two-directions``: two model copies of ``p`` stages, the first down the devices, the second
  up; the first half of the microbatches runs the first copy, the second half the second.
"""

import numpy as np

from ._jit import jit

LOOP, VSHAPE, TWO_DIRECTIONS = 0, 1, 2
NAMES = ("loop", "v", "two-directions")  # by code
CODES = {name: code for code, name in enumerate(NAMES)}
PLAIN_M = (1, 2, 1)  # by code: m of each placement's plain form (a loop takes any m)


def copies(code) -> np.ndarray:
    """Model copies the virtual stages hold: two for two-directions, else one (arrays too).
    A copy has ``p m`` model chunks, virtual stage ``s`` holding chunk ``s % (p m)``."""
    return np.where(np.asarray(code) == TWO_DIRECTIONS, 2, 1)


def mirrored(code, p, m) -> np.ndarray:
    """Whether the device of each virtual stage ``s`` also holds stage ``V-1-s`` (the stage of
    an overlapped pair's backward half), for codes or arrays: v and two-directions, and a loop
    of two chunks on one device (``p = 1, m = 2``; on more devices a loop's stage map does not
    read the same both ways)."""
    code = np.asarray(code)
    return (code != LOOP) | ((np.asarray(p) == 1) & (np.asarray(m) == 2))


def stage_devices(code, p, stage) -> np.ndarray:
    """The device of virtual stage ``stage`` for placement ``code`` on ``p`` devices, as
    ``stage_map`` gives it, for arrays of each. The stage after the last one (a hand-off
    nobody receives) is the loop's first device, the V's and two directions' last."""
    code, p, stage = (np.asarray(x, np.int64) for x in (code, p, stage))
    return np.where(code == LOOP, stage % p,
                    np.where(stage >= p, np.maximum(2 * p - 1 - stage, 0), stage))


@jit
def stage_map(code, p, m):
    """The device of each virtual stage for placement ``code`` (an int32 array)."""
    if code == TWO_DIRECTIONS:
        stage_device = np.empty(2 * p, np.int32)
        for s in range(p):
            stage_device[s] = s  # first copy runs down the devices
            stage_device[p + s] = p - 1 - s  # second copy runs up
        return stage_device
    stage_device = np.empty(p * m, np.int32)
    for s in range(p * m):
        if code == VSHAPE and s >= p:
            stage_device[s] = 2 * p - 1 - s
        else:
            stage_device[s] = s % p
    return stage_device


@jit
def routes(code, p, n, m):
    """First and last virtual stage of each microbatch's route for placement ``code``."""
    first = np.empty(n, np.int32)
    first.fill(0)
    last = np.empty(n, np.int32)
    last.fill(p * m - 1)
    if code == TWO_DIRECTIONS:
        for j in range(n // 2, n):  # the second half of the microbatches runs the second copy
            first[j] = p
            last[j] = 2 * p - 1
        for j in range(n // 2):
            last[j] = p - 1
    return first, last
