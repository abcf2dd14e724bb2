"""Closed forms of SCHEDULES.md section 5 (zero latency, uniform costs).

Times use the per-device costs of ``fastpp.Costs``: ``f``, the full backward ``b``, its
weight part ``w`` (a split backward runs ``i = b - w``) and the overlapped pair ``fb``. Each
function returns ``None`` where no closed form is known for the given parameters (for example
ZB-H1's idle is exact only for ``n >= p``, ``w <= f`` and ``w <= i``) and raises
``ScheduleError`` for a name that is not a registered schedule. Per-device results are arrays
indexed by device ``r``. Each schedule's closed forms sit beside its generator
(``fastpp.generators``); its registry entry points to them, and these functions dispatch.
"""

from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from .checks import MAX_INT, ScheduleError, ScheduleTypeError, number, positive_int
from .costs import MAX_TIME
from .generators.registry import get_spec

MAX_P = 1_000_000  # the per-device closed forms return one value per device


def _registered(formula):
    """A closed form of a registered schedule: an unknown name, a count that is not a positive
    integer or a cost that is not a finite number > 0 (``w``: >= 0) raises
    ``ScheduleError``."""
    signature = inspect.signature(formula)

    @functools.wraps(formula)
    def checked(*args, **kwargs):
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError as err:
            raise ScheduleTypeError(f"{formula.__name__}: {err}") from None
        spec = get_spec(given["name"])
        for key, value in given.items():
            if key in ("p", "n", "m") or (key == "G" and value is not None):
                # (the per-device forms are int64 arrays: 2**63 overflowed in NumPy)
                positive_int(value, key, MAX_INT)
            elif key == "gamma":  # M_W / M_B, as Costs.gamma: a part of M_B
                number(value, key, upper=1.0)
            elif key in ("f", "b", "w") or (key == "fb" and value is not None):
                # Costs' bounds: a sum of p n terms of 1e308 is inf; f, b and fb > 0, as
                # Costs takes them (with f = b = 0 a bubble ratio is 0 / 0)
                number(value, key, strict=key != "w", upper=MAX_TIME)
        if given.get("G") is not None and "G" not in spec.options:  # as build_schedule
            raise ScheduleError(f"G must not be given for '{spec.name}': it takes no options "
                                f"(got G={given['G']!r})")
        # a closed form of a schedule that cannot be built (1F1B with m = 3) is no number
        reason = spec.shape_reason(given["p"], given["n"], given.get("m", 1),
                                   given.get("G") or given["p"])
        if reason:
            raise ScheduleError(reason)
        if given["p"] > MAX_P:
            raise ScheduleError(f"p must be at most {MAX_P:,} (got p={given['p']})")
        if "w" in given and given["w"] > given.get("b", 2.0):
            raise ScheduleError(f"w must be at most b (got w={given['w']}, "
                                f"b={given.get('b', 2.0)})")
        return formula(*args, **kwargs)

    return checked


@_registered
def idle(name: str, p: int, n: int, m: int = 1, f: float = 1.0, b: float = 2.0,
         w: float = 0.0, fb: float | None = None, G: int | None = None) -> float | None:
    """The largest per-device idle time, ``makespan - busy`` (makespan metric).

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    f, b, w, fb : float
        Per-device forward, full backward, its weight part, overlapped pair (default ``f+b``).
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).

    Returns
    -------
    float or None
        None where no closed form is known.

    Raises
    ------
    ScheduleError
        For a name that is not registered, a count that is not a positive integer, a cost
        that is not a finite number > 0 (``w``: >= 0), or ``w > b`` (every closed form
        here alike).
    """
    closed = get_spec(name).idle
    fb = f + b if fb is None else fb
    return None if closed is None else closed(p, n, m, f, b, w, fb, p if G is None else G)


@_registered
def span_idle(name: str, p: int, n: int, m: int = 1, f: float = 1.0, b: float = 2.0,
              w: float = 0.0) -> float | None:
    """``max(span) - busy`` of every device (Zero Bubble's span metric), where known.

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    f, b, w : float
        Per-device forward, full backward, its weight part.

    Returns
    -------
    float or None
        None where no closed form is known.
    """
    closed = get_spec(name).span_idle
    return None if closed is None else closed(p, n, m, f, b, w)


@_registered
def makespan(name: str, p: int, n: int, m: int = 1, f: float = 1.0, b: float = 2.0,
             w: float = 0.0, G: int | None = None) -> float | None:
    """Makespan of schedules whose devices are all equally busy: ``n(f+b)`` plus the idle.

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    f, b, w : float
        Per-device forward, full backward, its weight part.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).

    Returns
    -------
    float or None
        None where no closed form is known.
    """
    closed = get_spec(name).makespan
    if closed is not None:
        return closed(p, n, m, f, b, w, p if G is None else G)
    extra = idle(name, p, n, m, f, b, w, G=G)
    return None if extra is None else n * (f + b) + extra


@_registered
def bubble_fraction(name: str, p: int, n: int, m: int = 1, f: float = 1.0,
                    b: float = 2.0, G: int | None = None) -> float | None:
    """Idle share of total time (makespan metric).

    ``(p-1)/(n+p-1)`` for GPipe and 1F1B, ``(p-1)/(mn+p-1)`` for interleaved 1F1B and looped BFS,
    ``(p-2)/(2n+p-2)`` for Chimera's basic unit (``n = p``, ``f = b``).

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    f, b : float
        Per-device forward and full backward.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``; the closed forms hold for ``G = p``).

    Returns
    -------
    float or None
        ``Result.bubble_ratio``'s closed form; None where none is known.
    """
    closed = get_spec(name).bubble
    return None if closed is None or G not in (None, p) else closed(p, n, m, f, b)


@_registered
def peak_live(name: str, p: int, n: int, m: int = 1, G: int | None = None) -> np.ndarray | None:
    """Per device, the most live (stage, microbatch) pairs (chunks, for ``m > 1``).

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).

    Returns
    -------
    ndarray of shape (p,), or None
        ``Result.peak_live``'s closed form; None where none is known.
    """
    closed = get_spec(name).peak_live
    return None if closed is None else closed(p, n, m, p if G is None else G)


@_registered
def peak_live_max(name: str, p: int, n: int, m: int = 1, G: int | None = None) -> int | None:
    """The largest per-device peak of live chunks, including V-Half's ``floor((p+2)/2)`` and
    V-Min's ``floor((p+4)/3)`` units (two chunks each), or ``n`` units when fewer.

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).

    Returns
    -------
    int or None
        A sweep's ``peak_live_max``; None where no closed form is known.
    """
    closed = get_spec(name).peak_live_max
    if closed is not None:
        return closed(p, n, m, p if G is None else G)
    live = peak_live(name, p, n, m, G)
    return None if live is None else int(live.max())


def max_peak_live(*args, **kwargs) -> int | None:
    """Deprecated: ``peak_live_max``'s name in 0.1.0 (a ``DeprecationWarning``; goes in the
    next release), renamed after the sweep column it gives."""
    warnings.warn("fastpp.theory.max_peak_live is deprecated and goes in the next release: "
                  "call peak_live_max, the sweep column's name", DeprecationWarning, stacklevel=2)
    return peak_live_max(*args, **kwargs)


@_registered
def peak_activations(name: str, p: int, n: int, m: int = 1, G: int | None = None,
                     gamma: float = 1.0) -> np.ndarray | None:
    """Per device, the activation peak in units of ``M_B`` (a chunk holds ``1/m``).

    With a split backward a weight-grad pending holds ``gamma`` of a microbatch: ZB-H1 holds
    ``(p-r) + r*gamma`` (``n >= p``), ZB-H2 ``(2p-2r-1) + 2r*gamma`` (``n >= 2p-1``).

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).
    gamma : float
        The share of a microbatch's activations a pending weight-grad holds.

    Returns
    -------
    ndarray of shape (p,), or None
        ``Result.peak_activations``' closed form; None where none is known.
    """
    closed = get_spec(name).peak_activations
    if closed is not None:
        return closed(p, n, m, p if G is None else G, gamma)
    live = peak_live(name, p, n, m, G)
    return None if live is None else live / m
