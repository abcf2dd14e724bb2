"""Closed forms of SCHEDULES.md section 5 (zero latency, uniform costs).

Each function returns ``None`` where no closed form is known for the given parameters (for
example 1F1B's makespan is exact for every ``n``, interleaved 1F1B's only when ``G = p``
divides ``n``). Per-device results are arrays indexed by device ``r``.
"""

from __future__ import annotations

import numpy as np


def makespan(name: str, p: int, n: int, m: int = 1, f: float = 1.0, b: float = 2.0,
             G: int | None = None) -> float | None:
    """Makespan of ``name`` with per-device forward ``f`` and backward ``b`` per microbatch.

    Parameters
    ----------
    name : str
        Registered schedule name.
    p, n, m : int
        Devices, microbatches, chunks per device.
    f, b : float
        Per-device times (a chunk op takes ``f/m``, ``b/m``).
    G : int, optional
        Interleaved 1F1B's group size (default ``p``).

    Returns
    -------
    float or None
    """
    G = p if G is None else G
    if name in ("gpipe", "1f1b"):
        return (n + p - 1) * (f + b)
    if name == "forward-only":
        return (n + p - 1) * f
    if name == "interleaved-1f1b" and G == p and n % p == 0:
        return n * (f + b) + (p - 1) * (f + b) / m
    if name == "looped-bfs" and n >= p:
        return n * (f + b) + (p - 1) * (f + b) / m
    return None


def bubble_fraction(name: str, p: int, n: int, m: int = 1) -> float | None:
    """Idle share of total time (makespan metric).

    ``(p-1)/(n+p-1)`` for GPipe and 1F1B, ``(p-1)/(mn+p-1)`` for interleaved 1F1B and looped BFS.
    """
    if name in ("gpipe", "1f1b"):
        return (p - 1) / (n + p - 1)
    if name in ("interleaved-1f1b", "looped-bfs") and n % p == 0:
        return (p - 1) / (m * n + p - 1)
    return None


def peak_live(name: str, p: int, n: int, m: int = 1, G: int | None = None) -> np.ndarray | None:
    """Per device, the most live (stage, microbatch) pairs (chunks, for ``m > 1``)."""
    r = np.arange(p)
    G = p if G is None else G
    if name == "gpipe":
        return np.full(p, n)
    if name == "1f1b":
        return np.minimum(n, p - r)
    if name == "interleaved-1f1b":
        return np.minimum(2 * (p - r - 1) + (m - 1) * G + 1, n * m)
    if name == "looped-bfs":
        return np.full(p, n * m)
    if name == "forward-only":
        return np.ones(p, int)
    return None


def peak_activations(name: str, p: int, n: int, m: int = 1,
                     G: int | None = None) -> np.ndarray | None:
    """Per device, the activation peak in units of ``M_B`` (a chunk holds ``1/m``)."""
    live = peak_live(name, p, n, m, G)
    return None if live is None else live / m
