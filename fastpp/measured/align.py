"""Clock alignment of ranks on several hosts, from the causality of the pipeline's hand-offs.

A hand-off from a producer op on one host to a consumer op on another gives one observation
``o = arrival - sent``, each read on its own host's clock: the consumer's wait returned (its
receive ended) at ``arrival``, and the producer op posted its send (or ended) at ``sent``.
With host clocks ``true + offset``, ``o = latency + offset[consumer] - offset[producer]`` and
``latency >= 0``, so every hand-off bounds the offset difference ``d = offset[b] - offset[a]``
of hosts ``a, b``:
``d <= min o`` over hand-offs ``a -> b`` and ``d >= -min o`` over ``b -> a``. The estimate is
the middle of that interval (the fastest hand-offs taken as equally fast both ways, as NTP
does), and half its width is the residual: how far the true offset can be from it. An empty
interval (the fastest round trip is negative) means no offset makes the run causal.

Ranks on one host share a clock: their offset is 0 by construction, and their hand-offs must
satisfy causality as they are (checked, never shifted). But each profiled process converts
its own clock to the trace's time base, and two gloo ranks on this 2-core machine were seen
to disagree by tens to hundreds of microseconds (a receive ending 29-169 us before its send
was posted, in some steps of `scripts/measure.py` runs): within ``SAME_HOST_SLACK_US`` such a
host's ranks are aligned as if each had its own clock, as ranks on several hosts are. A
larger gap stays an error (files of two runs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..checks import ScheduleError

TOLERANCE_US = 1.0  # clock noise a trace may show within one host (its ts are rounded to ns)
SAME_HOST_SLACK_US = 1000.0  # how far ranks on one host may disagree (the module docstring)


def align(hosts: list[str], producer: np.ndarray, consumer: np.ndarray, observed: np.ndarray,
          describe: Callable[[int], str]) -> tuple[np.ndarray, float]:
    """Per-rank clock offsets (microseconds, to subtract) and their residual.

    Parameters
    ----------
    hosts : list of str
        Host of each rank.
    producer, consumer : ndarray of int
        The ranks of each cross-rank hand-off.
    observed : ndarray
        ``arrival - sent`` of each hand-off in the two ranks' raw clocks (microseconds).
    describe : callable
        Text naming hand-off ``i``'s ops, files and times, for error messages.

    Returns
    -------
    offsets : ndarray, shape (p,)
        What each rank's clock is ahead of rank 0's host (0 for ranks on rank 0's host,
        unless they disagree: the module docstring).
    residual : float
        The largest half-width of the hosts' feasible intervals (0 for one host).
    """
    names = sorted(set(hosts), key=hosts.index)
    host_of = np.array([names.index(h) for h in hosts])
    a, b = host_of[producer], host_of[consumer]
    same = a == b
    if np.any(same & (observed < -TOLERANCE_US)):
        i = int(np.flatnonzero(same & (observed < -TOLERANCE_US))[np.argmin(
            observed[same & (observed < -TOLERANCE_US)])])
        if -observed[i] <= SAME_HOST_SLACK_US:  # each process's own clock: align the ranks
            split = {hosts[int(producer[k])] for k in np.flatnonzero(same & (observed < 0))}
            ranks = [f"{h}#{r}" if h in split else h for r, h in enumerate(hosts)]
            return align(ranks, producer, consumer, observed, describe)
        raise ScheduleError(
            f"clocks cannot be aligned: ranks {int(producer[i])} and {int(consumer[i])} share host "
            f"{hosts[int(producer[i])]!r} (one clock), yet {describe(i)}, "
            f"{-observed[i]:.1f} us before it was sent. Are the files from one run?")
    H = len(names)
    if H == 1:
        return np.zeros(len(hosts)), 0.0
    # fastest hand-off in each direction between two hosts
    fastest = np.full((H, H), np.inf)
    np.minimum.at(fastest, (a[~same], b[~same]), observed[~same])
    pairs, targets, widths = [], [], []
    for x in range(H):
        for y in range(x + 1, H):
            up, down = fastest[x, y], fastest[y, x]
            if not (np.isfinite(up) and np.isfinite(down)):
                continue
            if up + down < -TOLERANCE_US:
                i = _fastest(a, b, observed, x, y)
                k = _fastest(a, b, observed, y, x)
                raise ScheduleError(
                    f"clocks cannot be aligned between hosts {names[x]!r} and {names[y]!r}: "
                    f"the fastest hand-offs each way ({describe(i)}; {describe(k)}) make a round "
                    f"trip of {up + down:.1f} us, and no clock offset makes both causal")
            pairs.append((x, y))
            targets.append((up - down) / 2)
            widths.append(max(0.0, (up + down) / 2))
    # host 0 (rank 0's) is the reference; every other host needs a path of two-way hand-offs
    linked = _linked(pairs)
    if len(linked) < H:
        alone = [names[h] for h in range(H) if h not in linked]
        raise ScheduleError(
            f"clocks cannot be aligned: host(s) {alone} exchange no hand-offs in both directions "
            f"with rank 0's host {names[0]!r} (a forward-only run across hosts has no round "
            f"trips); profile ranks on one host or with synchronized clocks")
    system = np.zeros((len(pairs), H))
    for row, (x, y) in enumerate(pairs):
        system[row, y], system[row, x] = 1.0, -1.0
    system = system[:, 1:]
    solution = np.linalg.lstsq(system, np.array(targets), rcond=None)[0]
    host_offset = np.concatenate([[0.0], solution])
    misfit = np.abs(system @ solution - np.array(targets))
    residual = float(max(np.max(np.array(widths)), np.max(misfit)))
    return host_offset[host_of], residual


def _fastest(a, b, observed, x, y) -> int:
    pick = np.flatnonzero((a == x) & (b == y))
    return int(pick[np.argmin(observed[pick])])


def _linked(pairs: list[tuple[int, int]]) -> set[int]:
    """Hosts joined to host 0 through pairs that have hand-offs both ways."""
    linked = {0}
    changed = True
    while changed:
        changed = False
        for x, y in pairs:
            if (x in linked) != (y in linked):
                linked |= {x, y}
                changed = True
    return linked
