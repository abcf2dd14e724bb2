"""``Schedule``: a pipeline schedule as per-device integer op matrices, validated where it runs."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from . import kernels
from .checks import (
    ScheduleError,
    ScheduleTypeError,
    flag,
    index,
    known_keywords,
    positive_int,
    show,
)
from .compiled import PLAN_ROWS, Compiled, compile_schedule, plan_schedule
from .dependencies import deadlock_error
from .ops import FB, PAD, F, Op, format_op, parse_op

_FIELDS = ("kind", "stage", "mb", "stage2", "mb2")
_ARRAYS = frozenset(("ops", "length", "stage_to_device", "route_first", "route_last", *_FIELDS))
_UNSHARE = threading.Lock()
# slots in an op block: 5 int32 fields x 3 ops (F, I, W) x p*n*m at its bound (4,000,000,
# generators.registry.MAX_WORK), the largest a registered schedule or the search builds
MAX_OPS = 60_000_000


# what check_ops's findings say (see fastpp.kernels), formatted with the last stage and mb
_STAGE_RULES = ("stage must be in 0..{last_s}", "microbatch must be in 0..{last_j}",
                "stage is not on this device (misplaced op)",
                "stage is outside the microbatch's route")
_OP_RULES = {kernels.BAD_KIND: f"kind must be one of {[op.name for op in Op]} codes 0..4",
             **{kernels.BAD_STAGE + q: rule for q, rule in enumerate(_STAGE_RULES)},
             **{kernels.BAD_STAGE2 + q: rule for q, rule in enumerate(_STAGE_RULES)},
             kernels.NOT_FORWARD: "a forward-only schedule has only forwards"}
_COUNT_RULES = ("exactly one F", "exactly one B (or one I and one W)", "one I and one W and no B")
_ORDER_RULES = ("F must come before its B or I", "I must come before its W")


class Schedule:
    """A pipeline schedule: the ordered ops of every device.

    Parameters
    ----------
    ops : array_like of int, shape (5, p, L)
        Fields ``kind, stage, mb, stage2, mb2`` of op ``k`` on device ``r`` at ``ops[:, r, k]``;
        ``stage2, mb2`` are the backward half of an overlapped pair (``Op.FB``), ``-1``
        elsewhere. Slots at and past ``length[r]`` are ignored.
    length : array_like of int, shape (p,)
        Number of ops on each device.
    stage_to_device : array_like of int, shape (V,)
        Device of each virtual stage.
    n : int
        Microbatches.
    m : int
        Chunks per device in cost and memory units: a chunk op takes ``f/m`` and a forward
        allocates ``1/m`` of the activation unit.
    name : str
        Shown in reports and errors.
    routes : array_like of int, shape (n, 2), optional
        First and last virtual stage of each microbatch's route (default: all stages); two-
        direction schedules send half of the microbatches through a second model copy.
    forward_only : bool
        Inference: no backward ops; a forward frees its activations when it ends.

    Attributes
    ----------
    p, n, m, V : int
        Devices, microbatches, chunks per device, virtual stages.
    kind, stage, mb, stage2, mb2 : ndarray of int32, shape (p, L)
        Views of ``ops``: write into them (or set ``ops``), never set them.

    The arrays may be written into after the schedule is made: whatever reads them
    (``simulate``, ``compiled()``, ``tokens()``, ``Costs.per_stage``, the model's pricing,
    ``dependencies.edges``) checks the schedule again as it then stands.

    Raises
    ------
    ScheduleError
        Naming the first problem: a shape or id out of range, a missing, duplicated or
        misplaced op, or ops out of order on a device.
    """

    def __init__(self, ops, length, stage_to_device, *, n: int, m: int = 1, name: str = "custom",
                 routes=None, forward_only: bool = False):
        self.name = str(name)
        self.ops = _int_array(ops, "ops", ndim=3)
        if self.ops.shape[0] != 5 or self.ops.shape[1] < 1:
            raise ScheduleError(f"ops must have shape (5, p, L) with p >= 1 (got {self.ops.shape})")
        self.p = self.ops.shape[1]
        self.length = _int_array(length, "length", ndim=1)
        self.stage_to_device = _int_array(stage_to_device, "stage_to_device", ndim=1)
        self.n = positive_int(n, "n")
        self.m = positive_int(m, "m")
        self.V = len(self.stage_to_device)
        if self.V * self.n > MAX_OPS:  # the kernels keep tables per (stage, microbatch)
            raise ScheduleError(f"V*n must be at most {MAX_OPS} (got V={self.V}, n={self.n})")
        if routes is None:
            routes = np.tile(np.array([0, self.V - 1]), (self.n, 1))
        routes = _int_array(routes, "routes", ndim=2)
        if routes.shape != (self.n, 2):
            raise ScheduleError(f"routes must have shape ({self.n}, 2) with 0 <= first <= last "
                                f"< V={self.V} (got shape {routes.shape})")
        self.route_first = np.ascontiguousarray(routes[:, 0])
        self.route_last = np.ascontiguousarray(routes[:, 1])
        self.forward_only = flag(forward_only, "forward_only")
        self._validate(routes)
        self.__dict__.update(zip(_FIELDS, self.ops, strict=True))

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def trusted(cls, ops, length, stage_to_device, *, n: int, m: int, name: str,
                route_first, route_last, forward_only: bool) -> Schedule:
        """A schedule from fastpp's own generators, which are valid by construction: the
        arrays are taken as they are (int32) and not checked op by op again.

        Parameters
        ----------
        ops : ndarray of int32, shape (5, p, L)
            Kind, stage, microbatch and the overlapped pair's backward stage and microbatch.
        length : ndarray, shape (p,)
            Ops per device.
        stage_to_device : ndarray, shape (V,)
        n, m : int
        name : str
        route_first, route_last : ndarray, shape (n,)
            Each microbatch's first and last stage.
        forward_only : bool

        Returns
        -------
        Schedule
        """
        self = cls.__new__(cls)
        self.name, self.n, self.m, self.forward_only = name, n, m, forward_only
        self._own(np.ascontiguousarray(ops), length, stage_to_device, route_first, route_last)
        self.p, self.V = self.ops.shape[1], len(stage_to_device)
        return self

    @classmethod
    def _shared(cls, built: Built) -> Schedule:
        """A schedule that reads ``built``'s arrays until its own arrays are first read or any
        of its attributes is set: it gets copies then (so one may be written into and no other
        changes), and from then on ``simulate`` runs it like any other schedule. Until then
        ``simulate`` runs ``built``'s point plan, made once for every schedule that shares it."""
        self = cls.__new__(cls)
        self.__dict__.update(built.attributes)
        return self

    def _own(self, ops, length, stage_to_device, route_first, route_last) -> None:
        kind, stage, mb, stage2, mb2 = ops
        self.__dict__.update(ops=ops, length=length, stage_to_device=stage_to_device,
                             route_first=route_first, route_last=route_last, kind=kind,
                             stage=stage, mb=mb, stage2=stage2, mb2=mb2)

    def _unshare(self) -> None:
        with _UNSHARE:
            built = self.__dict__.pop("_built", None)
            if built is not None:
                self._own(*(a.copy() for a in built.arrays))
                # checked when built: until the copies are written into, _check compares
                # them with these and runs no check again
                self.__dict__["_checked"] = (*built.arrays, *(
                    built.attributes[x] for x in ("n", "m", "forward_only")))

    def __getattr__(self, name: str):
        # reached only for a name not set: a shared schedule's arrays, copied on first read
        if name in _ARRAYS:
            self._unshare()
            if name in self.__dict__:
                return self.__dict__[name]
        raise AttributeError(f"'Schedule' object has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if name in _FIELDS:  # a view set to another array would leave ops, which runs, as it was
            raise ScheduleError(f"{name} is a view of ops: write into it (schedule.{name}[r, k] = "
                                f"...) or set ops (got an assignment of {show(value)})")
        # a shared schedule set anything (ops, n, forward_only ...) no longer is the built one:
        # it takes its own copies first, else simulate would run the shared plan and the next
        # read copy the shared arrays over what was set
        if "_built" in self.__dict__:
            self._unshare()
        object.__setattr__(self, name, value)
        if name == "ops" and isinstance(value, np.ndarray) and value.ndim == 3:
            self.__dict__.update(zip(_FIELDS, value, strict=False))  # the views follow ops

    def __delattr__(self, name: str) -> None:
        if "_built" in self.__dict__:
            self._unshare()
        object.__delattr__(self, name)

    def _check(self) -> tuple:
        """Check the schedule as it now stands, before a kernel reads it: its arrays can be
        written into or set after it was built, and the kernels index by them unchecked (a stage
        out of range reads another array's memory). Returns a copy of what was checked
        (``_state``'s arrays and scalars), kept while the schedule stays as it is, so that
        what ran can be read again (a ``Result``'s memory) and an unchanged schedule is not
        checked twice. A built schedule whose arrays were never read is the one checked when
        it was made: its arrays, never handed out."""
        built = self.__dict__.get("_built")
        if built is not None:
            return (*built.arrays, *(built.attributes[x] for x in ("n", "m", "forward_only")))
        ops = _int_array(getattr(self, "ops", None), "ops", ndim=3)
        if ops.shape[0] != 5 or ops.shape[1] < 1:
            raise ScheduleError(f"ops must have shape (5, p, L) with p >= 1 (got {ops.shape})")
        arrays = {name: _int_array(getattr(self, name, None), name, ndim=1)
                  for name in ("length", "stage_to_device", "route_first", "route_last")}
        for name, value, held in (("p", ops.shape[1], "ops has {} devices"),
                                  ("V", len(arrays["stage_to_device"]),
                                   "stage_to_device maps {} stages")):
            if positive_int(getattr(self, name, None), name) != value:
                raise ScheduleError(f"{held.format(value)} but {name} is "
                                    f"{show(getattr(self, name, None))}: they must agree")
        n = positive_int(getattr(self, "n", None), "n")
        positive_int(getattr(self, "m", None), "m")
        flag(getattr(self, "forward_only", None), "forward_only")
        first, last = arrays["route_first"], arrays["route_last"]
        if first.shape != (n,) or last.shape != (n,):
            raise ScheduleError(f"route_first and route_last must have shape ({n},) (got "
                                f"{first.shape} and {last.shape})")
        self.__dict__.update(arrays, ops=ops, **dict(zip(_FIELDS, ops, strict=True)))
        kept = self.__dict__.get("_checked")
        if kept is None or not _same(kept, self._state()):
            self.__dict__.pop("_checked", None)
            self._validate(np.stack((first, last), axis=1))
            kept = self.__dict__["_checked"] = _copies(self._state())
        return kept

    @classmethod
    def from_tokens(cls, rows: Sequence[Sequence[str | None]], stage_to_device=None, *,
                    n: int | None = None, m: int | None = None, name: str = "custom",
                    routes=None, forward_only: bool | None = None) -> Schedule:
        """Build a schedule from per-device lists of action tokens.

        Parameters
        ----------
        rows : sequence of sequences of str
            ``rows[r]`` lists device ``r``'s ops in order, e.g. ``["0F0", "0F1", "0B0"]``.
            Empty strings and ``None`` (idle steps in PyTorch's CSV) are skipped.
        stage_to_device : array_like of int, optional
            Device of each virtual stage; inferred from where each stage's ops appear.
        n, m : int, optional
            Microbatches (default: largest microbatch id + 1) and chunks per device (default:
            the stages of the longest route over ``p``: ``V // p`` on one direction, ``1`` for
            DualPipe's and Chimera's two, whose routes each run through ``p`` stages).
        name, routes :
            As for ``Schedule``.
        forward_only : bool, optional
            Default: true when the schedule has no backward op at all.

        Returns
        -------
        Schedule

        Raises
        ------
        ScheduleError
            Naming the device and position, for a row or token that does not parse, or as
            ``Schedule`` does for what they describe.
        """
        if isinstance(rows, str) or not isinstance(rows, Sequence | np.ndarray):
            raise ScheduleTypeError(f"rows must be a list of per-device lists of action tokens "
                                    f"(got {type(rows).__name__})")
        p = len(rows)
        if p < 1:
            raise ScheduleError(f"rows must list at least one device (got {p})")
        parsed = []
        for r, row in enumerate(rows):
            if isinstance(row, str) or not isinstance(row, Sequence | np.ndarray):
                raise ScheduleTypeError(f"rows[{r}] must be a list of action tokens such as "
                                        f"'0F0' (got {type(row).__name__})")
            ops_r = []
            for col, token in enumerate(row):
                if token is None or (isinstance(token, str) and not token.strip()):
                    continue
                if not isinstance(token, str):
                    raise ScheduleTypeError(f"device {r}, position {col}: a token must be a "
                                            f"string such as '0F0' (got {token!r})")
                try:
                    op = parse_op(str(token))
                except ValueError as err:
                    raise ScheduleError(f"device {r}, position {col}: {err}") from None
                if max(op) >= 2**31:
                    raise ScheduleError(f"device {r}, position {col}: stage and microbatch ids "
                                        f"must be below 2**31 (got {token!r})")
                ops_r.append(op)
            parsed.append(ops_r)
        L = max(1, max(len(o) for o in parsed))
        ops = np.full((5, p, L), PAD, np.int64)
        for r, ops_r in enumerate(parsed):
            if ops_r:
                ops[:, r, : len(ops_r)] = np.array(ops_r, np.int64).T
        length = [len(o) for o in parsed]
        if stage_to_device is None:
            stage_to_device = _infer_stage_to_device(parsed)
        stage_to_device = _int_array(stage_to_device, "stage_to_device", ndim=1)
        if n is None:
            mbs = [j for o in parsed for op in o for j in (op[2], op[4])]
            n = max(mbs, default=-1) + 1
        if m is None:
            m = max(1, _route_stages(routes, len(stage_to_device)) // p)
        if forward_only is None:
            forward_only = all(op[0] == F for o in parsed for op in o)
        forward_only = flag(forward_only, "forward_only")
        return cls(ops, length, stage_to_device, n=n, m=m, name=name, routes=routes,
                   forward_only=forward_only)

    # -- views ------------------------------------------------------------------------------

    @known_keywords("Schedule.token")
    def token(self, r: int, k: int) -> str:
        """Action text of op ``k`` on device ``r`` (``0F0`` form).

        Parameters
        ----------
        r, k : int
            Device and op index.

        Returns
        -------
        str

        Raises
        ------
        ScheduleError
            If ``r`` or ``k`` is out of range.
        """
        r = index(r, "r", self.p)
        k = index(k, "k", self.ops.shape[2])
        return format_op(*(int(x) for x in self.ops[:, r, k]))

    @known_keywords("Schedule.tokens")
    def tokens(self) -> list[list[str]]:
        """Per-device lists of action tokens, the inverse of ``from_tokens``.

        Returns
        -------
        list of list of str
        """
        self._check()
        ops = self.ops.transpose(1, 2, 0).tolist()  # [r][k] -> fields, as Python ints at once
        return [[format_op(*op) for op in ops[r][:L]] for r, L in enumerate(self.length.tolist())]

    @known_keywords("Schedule.compiled")
    def compiled(self) -> Compiled:
        """The dependency graph in topological order, for one-pass timelines over many cost
        vectors (``fastpp.compiled``); built on the first call and kept.

        Returns
        -------
        fastpp.compiled.Compiled

        Raises
        ------
        ScheduleError
            If the schedule deadlocks (``simulate``'s message).
        """
        built = self.__dict__.get("_built")
        if built is not None:
            # compiled from the shared arrays, read in place: copying them out here had left
            # every later simulate of this schedule off the built plan's fast path (10 times
            # slower after a Monte Carlo; a review of the benchmarks)
            source, key = built.view(), built
        else:
            source, key = self, self._check()
        found = self.__dict__.get("_compiled")
        if found is None or found[1] is not key:  # written into since: compile again
            found = self.__dict__["_compiled"] = (compile_schedule(source), key)
        return found[0]

    def _state(self) -> tuple:
        """What the kernels read: the arrays ``_check`` checks, then ``n``, ``m`` and
        ``forward_only``."""
        return (self.ops, self.length, self.stage_to_device, self.route_first, self.route_last,
                self.n, self.m, self.forward_only)

    @property
    def parameter_units(self) -> np.ndarray:
        """Per device, the model parameters held, in units of a plain pipeline device's share:
        1 for one model copy (any ``m``), 2 for two-direction schedules (DualPipe, Chimera)."""
        return np.bincount(self.stage_to_device, minlength=self.p) / self.m

    @property
    def num_ops(self) -> int:
        """Number of ops over all devices (an overlapped pair counts once)."""
        built = self.__dict__.get("_built")  # read through: a count copies nothing out
        return int((self.length if built is None else built.arrays[1]).sum())

    def __repr__(self) -> str:
        return (f"Schedule(name={self.name!r}, p={self.p}, n={self.n}, m={self.m}, "
                f"V={self.V}, ops={self.num_ops})")

    def __str__(self) -> str:
        return f"{self!r}\n{self.grid()}"

    @known_keywords("Schedule.grid")
    def grid(self, marks: dict[int, int] | None = None) -> str:
        """The per-device grid of action tokens, one line per device.

        Parameters
        ----------
        marks : dict of int to int, optional
            A device to an op index to flag with ``>...<`` (used by deadlock errors).

        Returns
        -------
        str

        Raises
        ------
        ScheduleTypeError
            If ``marks`` is not a dict.
        """
        if marks is not None and not isinstance(marks, dict):
            raise ScheduleTypeError(f"marks must be a dict of device -> op index (got "
                                    f"{type(marks).__name__})")
        marks = marks or {}
        tokens = self.tokens()
        width = max((len(t) for row in tokens for t in row), default=1) + 2
        lines = []
        for r, row in enumerate(tokens):
            cells = [f">{t}<" if marks.get(r) == k else f" {t} " for k, t in enumerate(row)]
            lines.append(f"device {r:>2}: " + "".join(c.ljust(width) for c in cells).rstrip())
        return "\n".join(lines)

    # -- validation -------------------------------------------------------------------------

    def _validate(self, routes: np.ndarray) -> None:
        p, n, V = self.p, self.n, self.V
        L = self.ops.shape[2]
        if self.ops.size > MAX_OPS:
            raise ScheduleError(f"ops must hold at most {MAX_OPS} slots (got {self.ops.size})")
        if self.length.shape != (p,) or self.length.min() < 0 or self.length.max() > L:
            raise ScheduleError(
                f"length must have shape ({p},) with values in 0..{L} "
                f"(got shape {self.length.shape}, values {self.length.tolist()[:8]})")
        if V < 1 or self.stage_to_device.min() < 0 or self.stage_to_device.max() >= p:
            raise ScheduleError(f"stage_to_device must map every stage to a device in 0..{p - 1} "
                                f"(got {self.stage_to_device.tolist()})")
        wrong = np.flatnonzero((routes.min(axis=1) < 0) | (routes.max(axis=1) >= V)
                               | (routes[:, 0] > routes[:, 1]))
        if wrong.size:  # (the shape is checked before: the values are what is wrong)
            j = int(wrong[0])
            raise ScheduleError(f"routes must hold 0 <= first <= last < V={V} for each "
                                f"microbatch (got {routes[j].tolist()} for microbatch {j})")
        got = np.zeros(4, np.int64)
        finding, a, b = kernels.check_ops(self.ops, self.length, self.stage_to_device,
                                          self.route_first, self.route_last, n,
                                          self.forward_only, got)
        if finding == kernels.OK:
            return
        if finding < kernels.COUNT_F:  # an op rule, at op b of device a
            raw = self.ops[:, a, b].tolist()
            text = format_op(*raw) if 0 <= raw[0] <= FB else str(raw)
            rule = _OP_RULES[finding].format(last_s=V - 1, last_j=n - 1)
            raise ScheduleError(f"device {a}, op {b} ({text}): {rule}")
        where = f"stage {a}, microbatch {b} on device {self.stage_to_device[a]}"
        if finding >= kernels.F_AFTER_GRAD:
            raise ScheduleError(f"{where}: {_ORDER_RULES[finding - kernels.F_AFTER_GRAD]}")
        counts = ", ".join(f"{c} {op.name}" for c, op in zip(got.tolist(),
                                                            (Op.F, Op.B, Op.I, Op.W),
                                                            strict=True))
        rule = _COUNT_RULES[0 if self.forward_only else finding - kernels.COUNT_F]
        raise ScheduleError(f"{where} needs {rule} (got {counts})")


def _copies(state: tuple) -> tuple:
    return tuple(x.copy() if isinstance(x, np.ndarray) else x for x in state)


def _same(kept: tuple, state: tuple) -> bool:
    # the arrays are int32 (checked): equal shapes and bytes, a memcmp (np.array_equal's own
    # overhead is 3-4 us an array)
    return all(a.shape == b.shape and a.tobytes() == b.tobytes() if isinstance(a, np.ndarray)
               else a == b for a, b in zip(kept, state, strict=True))


def _int_array(value, name: str, ndim: int) -> np.ndarray:
    if (type(value) is np.ndarray and value.dtype == np.int32 and value.ndim == ndim
            and value.flags.c_contiguous):
        return value  # already what the kernels read
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged
        raise ScheduleTypeError(f"{name} must be an integer array (got {show(value)})") from None
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ScheduleTypeError(f"{name} must be an integer array (got dtype {arr.dtype})")
    if arr.ndim != ndim:
        raise ScheduleError(f"{name} must have {ndim} dimension(s) (got shape {arr.shape})")
    if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
        raise ScheduleError(f"{name} must fit in int32 (got values up to {arr.max()})")
    return np.ascontiguousarray(arr, dtype=np.int32)


def _infer_stage_to_device(parsed: list[list[tuple]]) -> np.ndarray:
    owner: dict[int, int] = {}
    for r, ops_r in enumerate(parsed):
        for kind, s, _, s2, _ in ops_r:
            for stage in (s, s2) if kind == FB else (s,):
                if owner.setdefault(stage, r) != r:
                    raise ScheduleError(
                        f"stage {stage} appears on devices {owner[stage]} and {r}; a stage "
                        "must live on one device")
    V = max(owner, default=-1) + 1
    if V == 0:
        raise ScheduleError("rows must hold at least one op (got no op on any device)")
    if len(owner) < V:  # (the first few: a stray id of 2**31 - 1 misses 2e9 stages)
        missing = [s for s in range(min(V, len(owner) + 40)) if s not in owner][:40]
        more = f", ... ({V - len(owner):,} in all)" if V - len(owner) > len(missing) else ""
        raise ScheduleError(f"every stage 0..{V - 1} needs at least one op to infer "
                            f"stage_to_device (missing {str(missing)[:-1]}{more}]); pass "
                            "stage_to_device")
    return np.array([owner[s] for s in range(V)])


# int32 slots a built schedule's point plan may take (1 GiB): an interleaved schedule's grow as
# p n m^2, so that one of the accepted p n m = 4e6 with m = 64 took more than 9 GB
MAX_PLAN_SLOTS = 2**28


class Built:
    """A generated schedule's arrays (``ops, length, stage_to_device, route_first,
    route_last``), never handed out (``Schedule._shared`` copies them when read), and the
    ``fastpp.compiled.point`` plan of that schedule (``plan, tables``) and the shape of its
    output, made when first simulated."""

    __slots__ = ("arrays", "attributes", "plan", "tables", "device_first", "out_shape", "shape",
                 "placement", "slots", "plannable")

    def __init__(self, arrays, *, n: int, m: int, name: str, forward_only: bool):
        self.arrays = arrays
        ops, _, stage_to_device, _, _ = arrays
        p = ops.shape[1]
        self.attributes = {"name": name, "n": n, "m": m, "forward_only": forward_only, "p": p,
                           "V": len(stage_to_device), "_built": self}
        self.shape = ops.shape[1:]
        self.placement = (p, m, stage_to_device.tobytes())  # fastpp.Costs's expansion key
        self.plan = self.tables = self.device_first = self.out_shape = None
        # int32s held: the op fields, the plan's [6, S] (S steps: N, and one more for each
        # overlapped pair, at most) and its int64 tables at their largest
        # (p + 1 + p, 1 + 2 a pair, a frontier: p + 1 slots, one a forward, three for each of
        # a forward's stages on its device), counted before they are made, so that
        # build_schedule's bound holds once every kept plan is
        N, K = int(arrays[1].sum()), int(np.bincount(stage_to_device).max())
        S = N + int(np.count_nonzero(ops[0] == FB))
        self.slots = ops.size + PLAN_ROWS * S + 2 * (3 * p + 3 + N * (3 + 3 * K))
        # a point plan's frontier tables grow as N K (K stages a device, m for interleaved
        # schedules): past this bound simulate runs the general kernel, in memory of order N
        self.plannable = self.slots <= MAX_PLAN_SLOTS

    def view(self) -> Schedule:
        """A schedule reading these arrays in place, for code that only reads them."""
        a = self.attributes
        ops, length, stage_to_device, route_first, route_last = self.arrays
        return Schedule.trusted(ops, length, stage_to_device, n=a["n"], m=a["m"],
                                name=a["name"], route_first=route_first,
                                route_last=route_last, forward_only=a["forward_only"])

    def point_plan(self) -> tuple[np.ndarray, np.ndarray]:
        """``fastpp.compiled.point``'s ``plan`` and ``tables``, made on the first call
        (``fastpp.compiled.plan_schedule``)."""
        if self.plan is None:
            a = self.attributes
            ops, length, stage_to_device, route_first, route_last = self.arrays
            plan, tables, rows, pointer = plan_schedule(
                ops, length, stage_to_device, route_first, route_last, a["n"],
                a["forward_only"])
            if rows < 0:
                raise deadlock_error(self.view(), pointer)
            self.tables = tables
            self.device_first = tables[:a["p"] + 1]  # (tables opens with it)
            self.out_shape = (int(rows), a["p"])
            self.plan = plan  # last: another thread reads a plan that is set as complete
        return self.plan, self.tables


# a misspelt keyword named, not a bare TypeError
Schedule.__init__ = known_keywords("Schedule")(Schedule.__init__)


def route_positions(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Each stage's place on its microbatches' route and that route's stage count, ``[V]``
    each: a route runs contiguous stages, one for every schedule but DualPipe's and
    Chimera's two (a model copy each), so the place says which share of the model's layers
    the stage holds."""
    place, size = np.zeros(schedule.V, np.int64), np.ones(schedule.V, np.int64)
    for first, last in {(int(a), int(b)) for a, b in zip(schedule.route_first,
                                                          schedule.route_last, strict=True)}:
        place[first:last + 1] = np.arange(last - first + 1)
        size[first:last + 1] = last - first + 1
    return place, size


def _route_stages(routes, V: int) -> int:
    """The stages of the longest route in ``routes`` (``V`` without routes, or where they
    are no ``(first, last)`` integer pairs, which ``Schedule`` then refuses, naming them):
    one model copy's stages, which its chunks divide."""
    if routes is None:
        return V
    try:
        pairs = np.asarray(routes)
        if pairs.ndim != 2 or pairs.shape[1] != 2 or not pairs.size \
                or not np.issubdtype(pairs.dtype, np.integer):
            return V
        return int((pairs[:, 1] - pairs[:, 0]).max()) + 1
    except (TypeError, ValueError, OverflowError):
        return V
