"""Closed forms of SCHEDULES.md section 5 (zero latency, uniform costs).

Times use the per-device costs of ``fastpp.Costs``: ``f``, the full backward ``b``, its
weight part ``w`` (a split backward runs ``i = b - w``) and the overlapped pair ``fb``. Each
function returns ``None`` where no closed form is known for the given parameters (for example
ZB-H1's idle is exact only for ``n >= p``, ``w <= f`` and ``w <= i``) and raises
``ScheduleError`` for a name that is not a registered schedule. Per-device results are arrays
indexed by device ``r``.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from .checks import ScheduleError, ScheduleTypeError, number, positive_int
from .generators.registry import get_spec

MAX_P = 1_000_000  # the per-device closed forms return one value per device


def _registered(formula):
    """A closed form of a registered schedule: an unknown name, a count that is not a positive
    integer or a cost that is not a finite number >= 0 raises ``ScheduleError``."""
    signature = inspect.signature(formula)

    @functools.wraps(formula)
    def checked(*args, **kwargs):
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError as err:
            raise ScheduleTypeError(f"{formula.__name__}: {err}") from None
        get_spec(given["name"])
        for key, value in given.items():
            if key in ("p", "n", "m") or (key == "G" and value is not None):
                positive_int(value, key)
            elif key in ("f", "b", "w", "gamma") or (key == "fb" and value is not None):
                number(value, key)
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
    """
    i = b - w
    fb = f + b if fb is None else fb
    if name in ("gpipe", "1f1b"):
        return (p - 1) * (f + b)
    if name == "forward-only":
        return (p - 1) * f
    if name == "interleaved-1f1b" and (G is None or G == p) and n % p == 0:
        return (p - 1) * (f + b) / m
    if name == "looped-bfs" and n >= p:
        return (p - 1) * (f + b) / m
    if name == "zb-h1" and n >= p and w <= f and w <= i:
        return (p - 1) * (f + i - w)
    if name == "dualpipe" and np.isclose(f, i) and w <= f:
        return (p / 2 - 1) * (fb + b - 3 * w)
    if name == "chimera" and n == p and f == b:
        return (3 * p - 2) * f - n * (f + b)
    return None


@_registered
def span_idle(name: str, p: int, n: int, m: int = 1, f: float = 1.0, b: float = 2.0,
              w: float = 0.0) -> float | None:
    """``max(span) - busy`` of every device (Zero Bubble's span metric), where known."""
    i = b - w
    if name == "zb-h2" and n >= 2 * p - 1 and w <= f and w <= i:
        return (p - 1) * (f + i - 2 * w)
    if name == "zbv" and n >= 2 * p - 1 and np.isclose(f, i) and np.isclose(f, w):
        return 0.0
    return None


@_registered
def makespan(name: str, p: int, n: int, m: int = 1, f: float = 1.0, b: float = 2.0,
             w: float = 0.0, G: int | None = None) -> float | None:
    """Makespan of schedules whose devices are all equally busy: ``n(f+b)`` plus the idle."""
    if name == "forward-only":
        return n * f + idle(name, p, n, m, f, b)
    if name == "dualpipe":
        return None  # overlapped pairs make the busy time differ between devices
    extra = idle(name, p, n, m, f, b, w, G=G)
    return None if extra is None else n * (f + b) + extra


@_registered
def bubble_fraction(name: str, p: int, n: int, m: int = 1, f: float = 1.0,
                    b: float = 2.0) -> float | None:
    """Idle share of total time (makespan metric).

    ``(p-1)/(n+p-1)`` for GPipe and 1F1B, ``(p-1)/(mn+p-1)`` for interleaved 1F1B and looped BFS,
    ``(p-2)/(2n+p-2)`` for Chimera's basic unit (``n = p``, ``f = b``).
    """
    if name in ("gpipe", "1f1b"):
        return (p - 1) / (n + p - 1)
    if name in ("interleaved-1f1b", "looped-bfs") and n % p == 0:
        return (p - 1) / (m * n + p - 1)
    if name == "chimera" and n == p and f == b:
        return (p - 2) / (2 * n + p - 2)
    return None


@_registered
def peak_live(name: str, p: int, n: int, m: int = 1, G: int | None = None) -> np.ndarray | None:
    """Per device, the most live (stage, microbatch) pairs (chunks, for ``m > 1``)."""
    r = np.arange(p)
    G = p if G is None else G
    per_device = {
        "gpipe": lambda: np.full(p, n),
        "1f1b": lambda: np.minimum(n, p - r),
        "interleaved-1f1b": lambda: np.minimum(2 * (p - r - 1) + (m - 1) * G + 1, n * m),
        "looped-bfs": lambda: np.full(p, n * m),
        "forward-only": lambda: np.ones(p, int),
        "zb-h1": lambda: np.full(p, p) if n >= p else None,
        "zb-h2": lambda: np.full(p, 2 * p - 1) if n >= 2 * p - 1 else None,
        "zbv": lambda: np.full(p, 2 * p) if n >= 2 * p - 1 else None,
        "dualpipe": lambda: np.full(p, p + 1),
        "dualpipev": lambda: np.full(p, 2 * p + 1),
    }
    return per_device[name]() if name in per_device else None


@_registered
def max_peak_live(name: str, p: int, n: int, m: int = 1, G: int | None = None) -> int | None:
    """The largest per-device peak of live chunks, including V-Half's ``floor((p+2)/2)`` and
    V-Min's ``floor((p+4)/3)`` units (two chunks each), or ``n`` units when fewer."""
    if name == "v-half":
        return 2 * min(n, (p + 2) // 2)
    if name == "v-min":
        return 2 * min(n, (p + 4) // 3)
    live = peak_live(name, p, n, m, G)
    return None if live is None else int(live.max())


@_registered
def peak_activations(name: str, p: int, n: int, m: int = 1, G: int | None = None,
                     gamma: float = 1.0) -> np.ndarray | None:
    """Per device, the activation peak in units of ``M_B`` (a chunk holds ``1/m``).

    With a split backward a weight-grad pending holds ``gamma`` of a microbatch: ZB-H1 holds
    ``(p-r) + r*gamma`` (``n >= p``), ZB-H2 ``(2p-2r-1) + 2r*gamma`` (``n >= 2p-1``).
    """
    r = np.arange(p)
    if name == "zb-h1":
        return (p - r) + r * gamma if n >= p else None
    if name == "zb-h2":
        return (2 * p - 2 * r - 1) + 2 * r * gamma if n >= 2 * p - 1 else None
    if name in ("zbv", "dualpipe", "dualpipev") and gamma != 1.0:
        return None
    live = peak_live(name, p, n, m, G)
    return None if live is None else live / m
