"""Op costs and memory weights, in the units of SCHEDULES.md section 3."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import kernels
from .checks import ScheduleError, instance, numbers
from .schedule import Schedule


class StageCosts(NamedTuple):
    """Per-virtual-stage arrays the kernels read (length ``V``); see ``fastpp.kernels``."""

    tf: np.ndarray
    tb: np.ndarray
    tw: np.ndarray
    tfb: np.ndarray
    comm: np.ndarray
    unit: np.ndarray
    gamma: np.ndarray


# each field's rule: must it be > 0 (else >= 0), and its upper bound; shared with fastpp.sweep
FIELDS: dict[str, tuple[bool, float | None]] = {
    "f": (True, None), "b": (True, None), "w": (False, None), "comm": (False, None),
    "gamma": (False, 1.0), "fb": (True, None), "act": (True, None), "bandwidth": (True, None),
    "message_bytes": (False, None)}
OPTIONAL = ("fb", "bandwidth")  # None: not given (the arrays hold NaN)


@dataclass(frozen=True, eq=False)
class Costs:
    """Times and memory weights of a pipeline's ops.

    Times are per device of a plain pipeline, per microbatch: in a schedule with ``m`` chunks
    per device a chunk forward takes ``f/m``, so sweeping ``m`` keeps the model and hardware
    fixed. Each field is a scalar, an array over devices (length ``p``) or an array over virtual
    stages (length ``V``) for uneven stages. Fields after ``b`` are keyword-only. Two ``Costs``
    are equal when their validated arrays are; a ``Costs`` is hashable (a dict key or a sweep
    axis value).

    Parameters
    ----------
    f : float or array_like
        Forward time, > 0.
    b : float or array_like
        Full backward time (input grad and weight grad), > 0.
    w : float or array_like
        Weight-grad part of ``b``, ``0 <= w <= b``: a split backward runs ``I = b - w`` and
        ``W = w``. Ignored by schedules that do not split the backward.
    comm : float or array_like
        Latency of each cross-device hand-off on the F and B/I chains, >= 0. Per stage ``s``:
        the link between stages ``s`` and ``s+1``, both directions; per device: the links
        from that device's stages to their next stages.
    gamma : float or array_like
        ``M_W / M_B``, in ``[0, 1]``: the part of a forward's activations that lives until
        ``W`` (``I`` frees the rest). 1 gives PyTorch's plain live count.
    fb : float or array_like, optional
        Time of DualPipe's overlapped forward-and-backward pair, > 0, keyed by the pair's
        forward stage. Default: ``f + b`` (overlap gains nothing).
    act : float or array_like
        What one microbatch's forward leaves on a device of a plain pipeline, > 0: the unit
        of every activation figure (default 1, the ``M_B`` unit; bytes give bytes). A chunk
        forward leaves ``act/m``.
    bandwidth : float or array_like, optional
        Bytes per unit of time of the links, > 0: each hand-off then also takes
        ``message_bytes / bandwidth`` after its latency ``comm``.
    message_bytes : float or array_like
        Bytes of each hand-off (an activation or its gradient), >= 0.

    Examples
    --------
    >>> Costs(1.0, 2.0, w=1.0) == Costs(f=1, b=2, w=1)
    True
    >>> Costs(1.0, 2.0).arrays["gamma"]
    array(1.)
    """

    f: ArrayLike
    b: ArrayLike
    _: KW_ONLY
    w: ArrayLike = 0.0
    comm: ArrayLike = 0.0
    gamma: ArrayLike = 1.0
    fb: ArrayLike | None = None
    act: ArrayLike = 1.0
    bandwidth: ArrayLike | None = None
    message_bytes: ArrayLike = 0.0

    def __post_init__(self):
        arrays = {}
        for name, (strict, upper) in FIELDS.items():
            value = getattr(self, name)
            arr = (np.array(np.nan) if value is None and name in OPTIONAL else
                   numbers(value, f"costs.{name}", strict=strict, upper=upper))
            if arr.ndim > 1 or arr.size == 0:
                raise ScheduleError(f"costs.{name} must be a scalar or a 1-D array (got shape "
                                    f"{arr.shape})")
            arrays[name] = arr
        object.__setattr__(self, "_arrays", arrays)
        object.__setattr__(self, "_expanded", {})  # for_placement's results, per stage map

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The validated fields as read-only float64 arrays (0-D for scalars; NaN where an
        optional field is not given)."""
        return {name: _read_only(arr) for name, arr in self._arrays.items()}

    def _key(self) -> tuple:
        return tuple((a.shape, a.tobytes()) for a in self._arrays.values())

    def __eq__(self, other) -> bool:
        return isinstance(other, Costs) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def per_stage(self, schedule: Schedule) -> StageCosts:
        """Expand to the per-virtual-stage arrays of ``schedule``, chunk times divided by ``m``.

        Raises
        ------
        ScheduleError
            If an array's length is neither ``p`` nor ``V``, or ``w > b`` somewhere.
        """
        instance(schedule, Schedule, "schedule", "fastpp.Schedule")
        return self.for_placement(schedule.p, schedule.stage_to_device, schedule.m)

    def for_placement(self, p: int, stage_to_device: np.ndarray, m: int) -> StageCosts:
        """``per_stage`` for any schedule of ``p`` devices with this stage map and ``m``.

        Remembered per stage map (the arrays are shared: read them, do not write them), so a
        loop that simulates many schedules with one ``Costs`` expands it once per placement.
        """
        key = (p, m, stage_to_device.tobytes())
        found = self._expanded.get(key)
        if found is None:
            if len(self._expanded) >= 64:
                self._expanded.clear()
            found = self._expanded[key] = self._expand(p, stage_to_device, m)
        return found

    def _expand(self, p: int, stage_to_device: np.ndarray, m: int) -> StageCosts:
        V = len(stage_to_device)
        for name, arr in self._arrays.items():
            if arr.ndim == 1 and len(arr) not in (p, V) and getattr(self, name) is not None:
                raise ScheduleError(f"costs.{name} must be a scalar or an array of length p={p} "
                                    f"or V={V} (got shape {arr.shape})")
        rows = kernels.stage_costs(*(arr.reshape(-1) for arr in self._arrays.values()),
                                   stage_to_device, m)
        tb, tw = rows[kernels.TB], rows[kernels.TW]
        if np.any(tw > tb):
            s = int(np.argmax(tw > tb))
            raise ScheduleError(f"costs.w must be <= costs.b (got w={tw[s] * m}, b={tb[s] * m} "
                                f"at stage {s})")
        return StageCosts(*rows)


def _read_only(arr: np.ndarray) -> np.ndarray:
    # a view: the kernels get the writable originals (Numba types read-only arrays apart,
    # which would compile every kernel a second time)
    view = arr.view()
    view.flags.writeable = False
    return view
