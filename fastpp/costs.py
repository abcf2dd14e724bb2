"""Op costs and memory weights, in the units of SCHEDULES.md section 3."""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import kernels
from .checks import (
    ScheduleError,
    indices,
    instance,
    known_keywords,
    numbers,
    one_number,
    positive_int,
    read_only,
)
from .kernels import MAX_TIME  # (an op's time at most this: kernels.py says why)
from .schedule import Schedule


class StageCosts(NamedTuple):
    """Per-virtual-stage arrays the kernels read (length ``V``, read-only); see
    ``fastpp.kernels``. ``sb`` is what stage ``s``'s backward pays for its send, which an
    overlapped pair given ``fb`` adds for its backward half."""

    tf: np.ndarray
    tb: np.ndarray
    ti: np.ndarray
    tw: np.ndarray
    tfb: np.ndarray
    comm: np.ndarray
    unit: np.ndarray
    gamma: np.ndarray
    sb: np.ndarray


# each field's rule: must it be > 0 (else >= 0), and its upper bound; shared with fastpp.sweep
FIELDS: dict[str, tuple[bool, float | None]] = {
    "f": (True, None), "b": (True, None), "w": (False, None), "i": (False, None),
    "comm": (False, None), "gamma": (False, 1.0), "fb": (True, None), "act": (True, None),
    "bandwidth": (True, None), "message_bytes": (False, None), "overhead": (False, None),
    "send": (False, None)}
OPTIONAL = ("i", "fb", "bandwidth")  # None: not given (the arrays hold NaN)
# the expanded rows (kernels.stage_costs's) checked against MAX_TIME, and what makes each
# what makes each kernel row, for messages: its terms, each with the field (and kind) it
# reads; a term whose field is 0 everywhere is left out of the message, but the first
_ROW_SOURCES = {
    kernels.TF: (("costs.f / m", "f", None), ("costs.overhead['F']", "overhead", "F"),
                 ("costs.send['F']", "send", "F")),
    kernels.TB: (("costs.b / m", "b", None), ("costs.overhead['B']", "overhead", "B"),
                 ("costs.send['B']", "send", "B")),
    kernels.TI: (("costs.i / m (or (costs.b - costs.w) / m)", "b", None),
                 ("costs.overhead['I']", "overhead", "I"), ("costs.send['I']", "send", "I")),
    kernels.TW: (("costs.w / m", "w", None), ("costs.overhead['W']", "overhead", "W")),
    kernels.TFB: (("costs.fb / m", "fb", None), ("the F and B overheads", "overhead", "FB"),
                  ("the F send", "send", "F")),
    kernels.COMM: (("costs.comm", "comm", None),
                   ("costs.message_bytes / costs.bandwidth", "message_bytes", None)),
    kernels.UNIT: (("costs.act / m", "act", None),)}
KINDS = ("F", "B", "I", "W")  # the op kinds ``overhead`` is given for, in its rows' order
SEND_KINDS = ("F", "B", "I")  # the kinds that hand their output on (``W`` keeps its own)
# the fields given per op kind, and their kinds (each an array with one row per kind)
PER_KIND = {"overhead": KINDS, "send": SEND_KINDS}
# the kernel's cost inputs (``kernels.stage_costs``): each field, the per-kind ones once per kind
SLOTS: tuple[tuple[str, str | None], ...] = (
    *((name, None) for name in FIELDS if name not in PER_KIND),
    *((name, kind) for name, kinds in PER_KIND.items() for kind in kinds))


def stage_view(rows: np.ndarray) -> StageCosts:
    """``kernels.stage_costs``' rows as a ``StageCosts`` of read-only views (one read-only
    view whose rows are read-only too: nine views took 5 us)."""
    return StageCosts(*read_only(rows))


def row_source(k: int, given=None) -> str:
    """What makes the kernel's expanded cost row ``k`` (``kernels.stage_costs``), for
    messages: ``costs.f / m + costs.overhead['F'] + costs.send['F']``; with ``given(name,
    kinds)`` saying whether that field is nonzero for any of those kinds (a string of them:
    ``"FB"`` the pair's F and B), its first term and the nonzero others."""
    return " + ".join(term for j, (term, name, kind) in enumerate(_ROW_SOURCES[k])
                      if j == 0 or given is None or given(name, kind))


def slot_name(k: int) -> str:
    """The parameter behind the kernel's cost input ``k``, for messages: ``costs.f``,
    ``costs.overhead['B']``."""
    name, kind = SLOTS[k]
    return f"costs.{name}" if kind is None else f"costs.{name}[{kind!r}]"


@dataclass(frozen=True, eq=False)
class Costs:
    """Times and memory weights of a pipeline's ops.

    Times are per device of a plain pipeline, per microbatch: in a schedule with ``m`` chunks
    per device a chunk forward takes ``f/m``, so sweeping ``m`` keeps the model and hardware
    fixed; only ``overhead`` and ``send`` are times per op, whatever the chunk. Each field is
    a scalar, an array over devices (length ``p``) or an array over virtual stages (length
    ``V``) for uneven stages. Fields after ``b`` are keyword-only. A field given as an array,
    list or mapping is kept as a read-only float64 copy of what is priced (a dict of them),
    so the caller's object may change afterwards. Two ``Costs`` are equal when their
    validated arrays are; a ``Costs`` is hashable (a dict key or a sweep axis value).

    Parameters
    ----------
    f : float or array_like
        Forward time, > 0.
    b : float or array_like
        Full backward time (input grad and weight grad), > 0.
    w : float or array_like
        Weight-grad op's time of a split backward, ``>= 0``: ``W`` takes ``w``, and ``I``
        takes ``i``, or ``b - w`` where ``i`` is not given (there ``w <= b``, checked for
        every schedule). Schedules that do not split the backward use it nowhere else.
    i : float or array_like, optional
        The input-grad op's time of a split backward, >= 0. Default: ``b - w``, so that a
        split backward costs ``b``. Given, ``I`` takes ``i`` and ``W`` takes ``w``, so that
        a split backward may cost more than ``b`` (PyTorch's walks the graph twice), and
        ``w <= b`` is required only where ``i`` is not given. Ignored by schedules that do
        not split the backward.
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
    overhead : float, array_like or mapping
        A fixed time every op takes whatever its chunk's size (launches, the framework's own
        time), >= 0, added undivided by ``m``: a chunk forward takes ``f/m + overhead``. One
        value (or array) for every kind, or a mapping from op kind to its value (or array),
        keys among ``"F", "B", "I", "W"``, a missing kind 0. A full backward takes the ``B``
        overhead, a split backward's ``I`` and ``W`` each their own (so a split backward pays
        ``I + W``), and DualPipe's overlapped pair both the ``F`` and the ``B`` overheads
        (those of its forward's stage when ``fb`` is given). The kinds' arrays share one
        length. ``arrays["overhead"]`` holds one row per kind, in the order ``F, B, I, W``:
        shape ``(4,)``, or ``(4, p)`` or ``(4, V)``.
    send : float, array_like or mapping
        The further fixed time an op takes when it hands its output to another device
        (posting the message), >= 0, undivided by ``m``: a forward pays ``send["F"]`` when
        the next stage ``s + 1`` is on another device, a ``B`` or ``I`` pays its kind's when
        the previous stage ``s - 1`` is; ``W`` sends nothing. Given as ``overhead`` is, keys
        among ``"F", "B", "I"``, its array's rows in that order. An overlapped pair pays its
        forward's ``F`` send and its backward half's ``B`` send, each by its own stage. On
        PyTorch's runtime a forward that sends took 0.18-0.81 ms more than one that does not
        (docs/measured.md), which one overhead per device cannot price for a schedule whose
        stages send where the measured run's did not. Priced by the stage map: a schedule
        whose microbatches' routes end or start between stages on two devices refuses a
        nonzero ``send``.

    Examples
    --------
    >>> Costs(1.0, 2.0, w=1.0) == Costs(f=1, b=2, w=1)
    True
    >>> Costs(1.0, 2.0).arrays["gamma"]
    array(1.)
    >>> Costs(1.0, 2.0, overhead={"F": 0.1, "B": 0.2}).arrays["overhead"]
    array([0.1, 0.2, 0. , 0. ])
    """

    f: ArrayLike
    b: ArrayLike
    _: KW_ONLY
    w: ArrayLike = 0.0
    i: ArrayLike | None = None
    comm: ArrayLike = 0.0
    gamma: ArrayLike = 1.0
    fb: ArrayLike | None = None
    act: ArrayLike = 1.0
    bandwidth: ArrayLike | None = None
    message_bytes: ArrayLike = 0.0
    overhead: ArrayLike | Mapping[str, ArrayLike] = 0.0
    send: ArrayLike | Mapping[str, ArrayLike] = 0.0

    def __post_init__(self):
        packed = _packed(self)
        given = self.__dict__
        if packed is not None:  # numbers and float64 vectors: no array made until one is read
            values, at, lengths, has_send, vectors = packed
            if vectors:  # (see below; a read-only array's slices are read-only)
                shown = read_only(values)
                for name, start, size in vectors:
                    given[name] = shown[start:start + size]
        else:
            arrays = _arrays_of(self)
            self.__dict__["_arrays"] = arrays
            flat = ([arr.reshape(-1) for name, arr in arrays.items() if name not in PER_KIND]
                    + [np.ascontiguousarray(row).reshape(-1) for name in PER_KIND
                       for row in arrays[name]])
            values = np.concatenate(flat)
            at = _offsets(tuple(a.size for a in flat))
            # each array field's length, which an expansion checks against p and V
            lengths = tuple((name, arr.shape[-1]) for name, arr in arrays.items()
                            if arr.ndim == (2 if name in PER_KIND else 1))
            has_send = bool(arrays["send"].any())
            # a field given as an array, list or mapping is kept as what is priced,
            # read-only: the caller's object, changed later, showed in c.f and in
            # dataclasses.replace(c, ...), never in what c prices
            for name in FIELDS:
                if isinstance(given[name], np.ndarray | list | tuple | Mapping):
                    given[name] = _kept(given[name])
        # the kernels' inputs packed once (``kernels.packed_stage_costs``): one float64 array
        # and each input's (start, size); _expanded: for_placement's results, per stage map.
        # (Set in the instance's dict, past the frozen class's __setattr__: one call, not five)
        given.update(_values=values, _at=at, _lengths=lengths, _has_send=has_send,
                     _expanded={})

    def __getattr__(self, name: str):
        # reached only for a name not set: the validated arrays of a packed Costs (numbers
        # and float64 vectors), made when first read
        if name != "_arrays" or "_values" not in self.__dict__:
            raise AttributeError(f"'Costs' object has no attribute {name!r}")
        values, vectors = self._values, dict(self._lengths)
        arrays = {}
        for (slot, kind), (start, size) in zip(SLOTS, self._at, strict=True):
            if kind is None:
                arrays[slot] = (values[start:start + size].copy() if slot in vectors
                                else np.array(values[start]))
        for field, kinds in PER_KIND.items():  # (numbers here: one value each)
            first = self._at[SLOTS.index((field, kinds[0])), 0]
            arrays[field] = values[first:first + len(kinds)].copy()
        self.__dict__["_arrays"] = arrays
        return arrays

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The validated fields as read-only float64 arrays (0-D for scalars; NaN where an
        optional field is not given; ``overhead`` one row per kind ``F, B, I, W``, ``send``
        one per kind ``F, B, I``)."""
        return {name: read_only(arr) for name, arr in self._arrays.items()}

    @property
    def array_lengths(self) -> dict[str, int]:
        """The values of each field given as an array (per device or per stage)."""
        return dict(self._lengths)

    @known_keywords("Costs.length_reason")
    def length_reason(self, p: int, V: int) -> str:
        """Why the fields given as arrays do not fit a schedule of ``p`` devices and ``V``
        stages: each must hold ``p`` or ``V`` values.

        Parameters
        ----------
        p, V : int
            Devices and virtual stages.

        Returns
        -------
        str
            The first field that does not fit, as ``simulate`` refuses it; ``""`` if all do.
        """
        p, V = positive_int(p, "p"), positive_int(V, "V")
        for name, size in self._lengths:
            if size not in (p, V):
                return (f"costs.{name} must be a scalar or an array of length p={p} or V={V} "
                        f"(got length {size})")
        return ""

    def _key(self) -> tuple:
        # (+ 0.0: a -0.0 the checks let through is 0.0, as everything Costs computes has it)
        return tuple((a.shape, (a + 0.0).tobytes()) for a in self._arrays.values())

    def __eq__(self, other) -> bool:
        return isinstance(other, Costs) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @known_keywords("Costs.per_stage")
    def per_stage(self, schedule: Schedule) -> StageCosts:
        """Expand to the per-virtual-stage arrays of ``schedule``, chunk times divided by ``m``.

        Parameters
        ----------
        schedule : Schedule

        Returns
        -------
        StageCosts
            One array of length ``V`` per field.

        Raises
        ------
        ScheduleError
            If an array's length is neither ``p`` nor ``V``, ``w > b`` somewhere that ``i`` is
            not given, or ``send`` is not 0 and a route ends or starts between stages on two
            devices.
        """
        instance(schedule, Schedule, "schedule", "fastpp.Schedule")
        schedule._check()
        return stage_view(self._per_stage(schedule))

    def _per_stage(self, schedule: Schedule) -> np.ndarray:
        """``per_stage``'s arrays as ``_rows_for``'s writable block."""
        instance(schedule, Schedule, "schedule", "fastpp.Schedule")
        stage_to_device = schedule.stage_to_device
        if self._has_send:
            _check_routes(schedule)
        return self._rows_for((schedule.p, schedule.m, stage_to_device.tobytes()),
                              stage_to_device)

    @known_keywords("Costs.for_placement")
    def for_placement(self, p: int, stage_to_device: np.ndarray, m: int) -> StageCosts:
        """``per_stage`` for any schedule of ``p`` devices with this stage map and ``m``.

        Remembered per stage map, so a loop that simulates many schedules with one ``Costs``
        expands it once per placement; the arrays are read-only views of the kept ones. The
        stage map alone decides which ops pay ``send`` (``per_stage`` also refuses a schedule
        whose routes disagree with it).
        ``stage_to_device`` holds each stage's device, in ``0..p-1`` (``p * m`` stages, or
        ``2p`` for the two-direction schedules, DualPipe and Chimera, whose ``m`` is 1).

        Parameters
        ----------
        p, m : int
            Devices and chunks per device.
        stage_to_device : array_like of int
            Each stage's device.

        Returns
        -------
        StageCosts

        Raises
        ------
        ScheduleError
            If a count is not a positive integer, a device is out of range, or as for
            ``per_stage``.
        """
        p, m = positive_int(p, "p"), positive_int(m, "m")
        # as the schedules hold it (int32): the remembered expansions are keyed by its bytes
        stage_to_device = indices(stage_to_device, "stage_to_device", p).astype(np.int32)
        if stage_to_device.ndim != 1 or len(stage_to_device) < 1:
            raise ScheduleError(f"stage_to_device must hold one device per stage (got shape "
                                f"{stage_to_device.shape})")
        V = len(stage_to_device)
        if V != p * m and not (m == 1 and V == 2 * p):  # chunk times are f/m: m must fit V
            raise ScheduleError(f"stage_to_device must hold p * m = {p} * {m} = {p * m} stages "
                                f"(or 2p = {2 * p} with m = 1, the two-direction schedules; "
                                f"got {V})")
        return stage_view(self._rows_for((p, m, stage_to_device.tobytes()), stage_to_device))

    def _rows_for(self, key: tuple, stage_to_device: np.ndarray) -> np.ndarray:
        """``for_placement``'s arrays by its key ``(p, m, stage_to_device.tobytes())``,
        writable, as the rows of one ``[9, V]`` block (``kernels.stage_costs``'s), for the
        kernels alone (a read-only array is another Numba type: another compile). Kept per
        key: do not write them."""
        rows = self._expanded.get(key)
        if rows is None:
            if len(self._expanded) >= 64:
                self._expanded.clear()
            rows = self._expanded[key] = self._expand(key[0], stage_to_device, key[1])
        return rows

    def _expand(self, p: int, stage_to_device: np.ndarray, m: int) -> np.ndarray:
        V = len(stage_to_device)
        reason = self.length_reason(p, V)
        if reason:
            raise ScheduleError(reason)
        problem, where, rows = kernels.packed_stage_costs(self._values, self._at,
                                                          stage_to_device, m, MAX_TIME)
        if problem == kernels.EXPANDED:
            return rows
        if problem == kernels.W_ABOVE_B:
            s = where
            b, w = (self._arrays[name].reshape(-1) for name in ("b", "w"))

            def pick(a):
                return a[0] if a.size == 1 else a[s] if a.size == V else a[stage_to_device[s]]

            raise ScheduleError(f"costs.w must be <= costs.b where costs.i is not given (got "
                                f"w={pick(w)}, b={pick(b)} at stage {s})")
        source = row_source(where, lambda name, kind: np.any(
            self._arrays[name][[PER_KIND[name].index(x) for x in kind]] if kind
            else self._arrays[name]))
        s = int(np.flatnonzero(rows[where] > MAX_TIME)[0])
        raise ScheduleError(f"{source} must be at most {MAX_TIME:g} (a schedule sums these, "
                            f"past that to infinity; got {rows[where, s]:g} at stage {s})")

    @known_keywords("Costs.kernel_inputs")
    def kernel_inputs(self) -> list[np.ndarray]:
        """The flat arrays ``kernels.stage_costs`` takes, in ``SLOTS`` order (shared: read
        them, do not write them).

        Returns
        -------
        list of ndarray
        """
        return [self._values[a:a + size].copy() for a, size in self._at]


def _packed(costs: Costs) -> tuple | None:
    """``(values, at, lengths, has_send, vectors)`` of a ``Costs`` whose fields are each a number
    (Python's or NumPy's), a 1-D float64 array or an optional one not given, all within
    their bounds (``FIELDS``), the per-kind ones numbers; else ``None``: the general path,
    which makes the arrays and says what is wrong. ``values`` packs the kernels' 17 inputs
    (``SLOTS``), input ``k`` at ``values[at[k, 0]:][:at[k, 1]]``; ``lengths`` the array
    fields' (name, length), ``vectors`` their (name, start, size) in ``values``. Judged in
    Python: NumPy's reductions take a microsecond each."""
    flat, arrays = [], None
    given = costs.__dict__
    for name, strict, upper, optional, kinds, slot in _RULES:
        value = given[name]
        kind = type(value)
        if kind is float or (kind is int and -2**63 < value < 2**63):  # (a bool is neither)
            x = float(value)
        elif value is None and optional:
            flat.append(math.nan)
            continue
        elif kind is np.ndarray:
            if kinds or value.dtype != np.float64 or value.ndim != 1 or not value.size:
                return None
            xs = value.tolist()  # (a copy: the caller's array stays theirs)
            total = sum(xs)  # finite unless some value is not (or the sum overflows: judged
            if not (total - total == 0.0  # by the general path then)
                    and (min(xs) > 0.0 if strict else min(xs) >= 0.0) and max(xs) <= upper):
                return None
            arrays = [] if arrays is None else arrays
            arrays.append((name, len(flat), len(xs), slot))
            flat.extend(xs)
            continue
        else:
            x = one_number(value)
            if x is None:
                return None
        # (NaN fails both comparisons; the upper bound is finite)
        if not ((x > 0.0 if strict else x >= 0.0) and x <= upper):
            return None
        if kinds:
            flat.extend((x,) * kinds)
        else:
            flat.append(x)
    has_send = any(flat[-len(SEND_KINDS):])  # (the per-kind numbers come last)
    if arrays is None:
        return np.array(flat), _SCALAR_AT, (), has_send, ()
    sizes = [1] * len(SLOTS)
    for _, _, size, slot in arrays:
        sizes[slot] = size
    return (np.array(flat), _offsets(tuple(sizes)),
            tuple((name, size) for name, _, size, _ in arrays), has_send,
            tuple((name, start, size) for name, start, size, _ in arrays))


# _packed's rule of each field, in FIELDS' order: its name, whether it must be > 0, its upper
# bound (finite: the largest float where none), whether it is optional, its count of kinds
# (0: not given per kind) and its slot (SLOTS; -1 for the per-kind ones)
_RULES = tuple((name, strict, sys.float_info.max if upper is None else upper, name in OPTIONAL,
                len(PER_KIND.get(name, ())), SLOTS.index((name, None)) if name not in PER_KIND
                else -1) for name, (strict, upper) in FIELDS.items())
_SCALAR_AT = np.array([[k, 1] for k in range(len(SLOTS))], np.int64)  # numbers only


@functools.cache
def _offsets(sizes: tuple) -> np.ndarray:
    """The ``[start, size]`` rows of packed inputs of these sizes (kept: a handful of
    shapes recur; read by the kernels, never written)."""
    return np.array([(start - size, size) for start, size in
                     zip(itertools.accumulate(sizes), sizes, strict=True)], np.int64)


def _kept(value):
    """A copy of a field's array, list or mapping, the caller's no longer: a read-only float64
    array, or a dict of them (numbers stay numbers; a dict, not a read-only view of one, so
    that a Costs pickles and copies)."""
    if isinstance(value, Mapping):
        return {key: x if one_number(x) is not None else _kept(x) for key, x in value.items()}
    return read_only(np.array(value, np.float64))


def _arrays_of(costs: Costs) -> dict[str, np.ndarray]:
    """Every field validated, as a float64 array (``Costs.arrays``' originals)."""
    arrays = {}
    for name, (strict, upper) in FIELDS.items():
        value = getattr(costs, name)
        if name in PER_KIND:
            arrays[name] = _per_kind(value, name)
            continue
        arrays[name] = (np.array(np.nan) if value is None and name in OPTIONAL else
                        _field(value, f"costs.{name}", strict, upper))
    return arrays


def _check_routes(schedule: Schedule) -> None:
    """``send`` is priced by the stage map (``kernels.stage_costs``): refuse a schedule whose
    microbatches end (or start) their route where the stage map would hand on to another
    device, as a custom two-direction schedule could."""
    # once per checked state of the schedule (Schedule._check keeps it while unchanged)
    checked = schedule.__dict__.get("_checked")
    if checked is not None and schedule.__dict__.get("_routes_checked") is checked:
        return
    dev, V = schedule.stage_to_device, schedule.V
    last, first = schedule.route_last, schedule.route_first
    ends = (last < V - 1) & (dev[np.minimum(last + 1, V - 1)] != dev[last])
    starts = (first > 0) & (dev[np.maximum(first - 1, 0)] != dev[first])
    bad = np.flatnonzero(ends | starts)
    if bad.size:
        j = int(bad[0])
        raise ScheduleError(f"costs.send must be 0 for a schedule whose routes end or start "
                            f"between stages on two devices (it is priced by the stage map; "
                            f"microbatch {j} runs stages {first[j]}..{last[j]} of {V})")
    schedule.__dict__["_routes_checked"] = checked


def _field(value, name: str, strict: bool, upper) -> np.ndarray:
    arr = numbers(value, name, strict=strict, upper=upper)
    if arr.ndim > 1 or arr.size == 0:
        raise ScheduleError(f"{name} must be a scalar or a 1-D array (got shape {arr.shape})")
    return arr


def _per_kind(value, name: str) -> np.ndarray:
    """A per-kind field (``PER_KIND``) as one row per kind: shape ``(k,)`` or ``(k, size)``."""
    kinds = PER_KIND[name]
    if type(value) in (float, int):  # one number for every kind, the common case
        return np.full(len(kinds), float(_field(value, f"costs.{name}", False, None)))
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in kinds]
        if unknown:
            raise ScheduleError(f"costs.{name}'s keys must be among {list(kinds)} (op kinds; "
                                f"got {unknown[0]!r})")
        rows = [_field(value.get(kind, 0.0), f"costs.{name}[{kind!r}]", False, None)
                for kind in kinds]
    else:
        rows = [_field(value, f"costs.{name}", False, None)] * len(kinds)
    sizes = {row.size for row in rows if row.ndim == 1}
    if len(sizes) > 1:
        shown = ", ".join(f"{kind}: {row.size}" for kind, row in zip(kinds, rows, strict=True)
                          if row.ndim == 1)
        raise ScheduleError(f"costs.{name}'s kinds must be scalars or arrays of one length "
                            f"(got lengths {shown})")
    if not sizes:
        return np.array([float(row) for row in rows])
    size = sizes.pop()
    return np.stack([np.broadcast_to(row, (size,)) for row in rows])


# a misspelt keyword named, not a bare TypeError
Costs.__init__ = known_keywords("Costs")(Costs.__init__)
