"""The public names of fastpp's schedules, their generators, constraints and ``build_schedule``.

A schedule is one generator (a function ``(ops, length, p, n, m, G)`` filling an op block from
``fastpp.ops.new_ops``) and one ``ScheduleSpec`` below; its id is its position here.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import placement as placements
from ..checks import (
    ScheduleError,
    ScheduleTypeError,
    known_keywords,
    number_array,
    one_of,
    positive_int,
    show,
)
from ..ops import OP_FIELDS, new_ops
from ..schedule import Built, Schedule
from . import chimera, classic, dualpipe, interleaved, vshape, zero_bubble

MAX_WORK = 4_000_000  # p * n * m: bounds the op block and the per-stage tables
# built schedules by (name, p, n, m, G): a script that builds the same schedule for every cost
# it tries pays the generator once (it was 60% of an API point) and the compile once; bounded
# in int32 slots, the op fields and the plans (``Built.slots``)
_BUILT: dict[tuple, Built] = {}
_BUILT_LOCK = threading.Lock()  # sweeps build schedules on several threads
BUILT_OPS = 1_000_000


@dataclass(frozen=True)
class Rule:
    """One constraint: ``ok(p, n, m, G)`` (vectorized) must hold, or ``param`` must be ``must``.

    ``must`` is formatted with ``p, n, m, G``, e.g. ``"a multiple of p={p}"``. A ``size``
    rule bounds what building costs, not the schedule's shape: a closed form
    (``fastpp.theory``) holds beyond it.
    """

    param: str
    must: str
    ok: Callable
    size: bool = False


def _rules(*rules: Rule) -> tuple[Rule, ...]:
    # in floating point: an int64 product of huge values wraps around and would pass
    return (Rule("p*n*m", f"at most {MAX_WORK:,}",
                 lambda p, n, m, G: np.float64(p) * n * m <= MAX_WORK, size=True), *rules)


M_IS_1 = Rule("m", "1 (one stage per device)", lambda p, n, m, G: m == 1)
# the V-shape generators' greedy fills slot tables of p (6p + 6n) cells, in time growing
# faster than p^2 (4 s at p = 512, a minute at 1024; at p = 8000, n = 2 a MemoryError)
V_SHAPE_P = Rule("p", "at most 512 (the greedy's slot tables grow as p^2)",
                 lambda p, n, m, G: p <= 512, size=True)
# ZB-V lays out at least 2p - 1 microbatches on every device and drops those past n: its work
# is p max(n, 2p - 1) m, not p n m (p = 10^6, n = 2 ran for hours)
ZBV_WORK = Rule("p*max(n, 2p-1)*m", f"at most {MAX_WORK:,} (ZB-V lays out 2p-1 microbatches "
                f"at least)", lambda p, n, m, G: np.float64(p) * np.maximum(n, 2.0 * p - 1)
                * m <= MAX_WORK, size=True)
M_IS_2 = Rule("m", "2 (V placement: two chunks per device)", lambda p, n, m, G: m == 2)
M_IS_1_BOTH = Rule("m", "1 (one stage per device and direction)", lambda p, n, m, G: m == 1)
P_EVEN = Rule("p", "even", lambda p, n, m, G: p % 2 == 0)
# Megatron's microbatch groups of G for interleaving (get_schedule_table's constraints)
MEGATRON_GROUPS = (
    Rule("G", "at least p={p}", lambda p, n, m, G: G >= p),
    Rule("n", "at least G={G}", lambda p, n, m, G: n >= G),
    Rule("n", "a multiple of G={G} or leave a remainder of at least p={p}",
         lambda p, n, m, G: (n % G == 0) | (n % G >= p)),
)
# PyTorch's ScheduleInterleaved1F1B runs rounds of n // max(1, n // p) microbatches: one
# round of n < p too (G = n), which Megatron refuses (its groups must range in [p, n])
TORCH_GROUPS = (Rule("G", "at least p={p}, or n={n} (one round, as PyTorch runs it)",
                     lambda p, n, m, G: (G >= p) | (G == n)),
                Rule("n", "at least G={G} (or give G=n: PyTorch's one round of fewer than p)",
                     lambda p, n, m, G: n >= G), *MEGATRON_GROUPS[2:])


def _integers(values, name: str) -> np.ndarray:
    """``values`` (one or a 1-D array) as int64 if they are positive integers (below 2**62:
    a rule on ``p*n*m`` then says a huge count is too large instead of wrapping)."""
    arr = np.atleast_1d(number_array(values, name, "an integer or an array of integers"))
    if (arr.ndim != 1 or not np.all(np.isfinite(arr) & (arr == np.round(arr)))
            or np.any(arr < 1) or np.any(arr >= 2**62)):
        raise ScheduleError(f"{name} must be a positive integer or a 1-D array of them (got "
                            f"{show(values)})")
    return arr.astype(np.int64)


@dataclass(frozen=True)
class ScheduleSpec:
    """A registered schedule: its generator, placement, constraints, and what the rest of
    fastpp needs to know of it (so that no other module spells a schedule's name).

    Parameters
    ----------
    name : str
        The registry's key (``build_schedule(name, ...)``).
    generator : callable
        ``generator(ops, length, p, n, m, G)`` fills an op block.
    placement : str
        A name of ``fastpp.placement.NAMES``: ``"loop"``, ``"v"`` or ``"two-directions"``.
    summary : str
        One line for ``python -m fastpp list``.
    split_backward : bool
        Its backwards are split into ``I`` and ``W`` ops.
    forward_only : bool
        An inference schedule: the analyses and ``plan`` leave it out, and the memory kernel
        frees a forward's activations when it ends; otherwise a training one.
    rules : tuple of Rule
        The constraints on ``(p, n, m, G)``, each with its message (``reasons``).
    options : tuple of str
        The keyword options ``build_schedule`` takes for it (``("G",)`` or none).
    default_m : int
        Chunks per device the command line and sweeps use when not told.
    m_choices : tuple of int
        Those ``fastpp.model.plan`` tries (default: ``default_m`` alone).
    search_candidate : bool
        ``fastpp.optimize`` offers it on its placement as a fixed candidate.
    torch_class : str or None
        The PyTorch pipelining class that runs the same order (``fastpp.measured`` runs it).
    compile_apart : bool
        Compiled by the second process of the sweeps' warm-up on an empty cache
        (``fastpp.sweeps.warmup``), to split the compile time in two (the flags balance the
        two processes' measured compile times; generators that share a jitted helper stay
        together).
    memory_reference : bool
        The schedule whose peak is the default memory budget of
        ``fastpp.best_within_budget`` and the reports (exactly one has it).
    expert_overlap : bool
        Megatron's EP all-to-all overlap itself: it needs ``ep > 1`` and refuses full
        recomputation whether or not the overlap is priced (``fastpp.model.overlap``), and
        ``plan`` leaves it out for a model without experts unless named.
    pairs : bool
        It runs overlapped forward-and-backward pairs (``Costs.fb``, priced by
        ``fastpp.model.overlap``).
    idle, span_idle, makespan, bubble, peak_live, peak_live_max, peak_activations : callable
        The closed forms ``fastpp.theory`` reads, written beside the generators, None where
        none is known: ``idle(p, n, m, f, b, w, fb, G)`` (makespan metric), ``span_idle(p, n,
        m, f, b, w)`` (Zero Bubble's span metric), ``makespan(p, n, m, f, b, w, G)`` (when it
        is not ``n(f+b)`` plus the idle), ``bubble(p, n, m, f, b)``, ``peak_live(p, n, m,
        G)`` (per device), ``peak_live_max(p, n, m, G)`` (when not the largest
        ``peak_live``) and ``peak_activations(p, n, m, G, gamma)`` (when not ``peak_live /
        m``). Each may itself return None for parameters outside its closed form.
    sid : int
        The id in jitted sweeps: the registry position (set by the registry).
    """

    name: str
    generator: Callable
    placement: str
    summary: str
    split_backward: bool = False
    forward_only: bool = False
    rules: tuple[Rule, ...] = field(default_factory=_rules)
    options: tuple[str, ...] = ()
    default_m: int = 1
    m_choices: tuple[int, ...] = ()
    search_candidate: bool = False
    torch_class: str | None = None
    compile_apart: bool = False
    memory_reference: bool = False
    expert_overlap: bool = False
    pairs: bool = False
    idle: Callable | None = None
    span_idle: Callable | None = None
    makespan: Callable | None = None
    bubble: Callable | None = None
    peak_live: Callable | None = None
    peak_live_max: Callable | None = None
    peak_activations: Callable | None = None
    sid: int = field(default=-1, compare=False)

    def __post_init__(self):
        # (a user adding a schedule gives these: an assert named nothing, and -O skipped it)
        one_of(self.placement, "placement", tuple(placements.CODES))
        if not self.m_choices:
            object.__setattr__(self, "m_choices", (self.default_m,))

    def reasons(self, p, n, m, G) -> np.ndarray:
        """Vectorized check: for each point, ``""`` if valid, else the first broken rule.

        Parameters
        ----------
        p, n, m, G : int or array_like of int
            The points (they broadcast).

        Returns
        -------
        ndarray of str (object)

        Raises
        ------
        ScheduleError
            If a value is not a positive integer.
        """
        p, n, m, G = np.broadcast_arrays(*(_integers(x, k)
                                           for x, k in zip((p, n, m, G), "pnmG", strict=True)))
        out = np.full(p.shape, "", dtype=object)
        valid = np.ones(p.shape, bool)
        for rule in self.rules:
            bad = np.flatnonzero(valid & ~np.asarray(rule.ok(p, n, m, G), bool))
            if bad.size == 0:
                continue
            valid[bad] = False
            # one message per distinct (p, n, m, G): a grid repeats them many times
            keys = list(zip(p[bad].tolist(), n[bad].tolist(), m[bad].tolist(),
                            G[bad].tolist(), strict=True))
            texts = {key: self._message(rule, *key) for key in set(keys)}
            out[bad] = [texts[key] for key in keys]
        return out

    def shape_reason(self, p: int, n: int, m: int, G: int) -> str:
        """The first rule of the schedule's shape one point breaks ("" if none), the size
        rules (``Rule.size``) aside: what a closed form (``fastpp.theory``) must hold, at any
        size."""
        for rule in self.rules:
            if not rule.size and not bool(rule.ok(p, n, m, G)):
                return self._message(rule, p, n, m, G)
        return ""

    def _message(self, rule: Rule, p: int, n: int, m: int, G: int) -> str:
        values = {"p": p, "n": n, "m": m, "G": G, "two_p": 2 * p, "rounds": max(1, n // p),
                  "p*n*m": p * n * m, "p*max(n, 2p-1)*m": p * max(n, 2 * p - 1) * m}
        got = values[rule.param]
        return (f"{rule.param} must be {rule.must.format(**values)} for '{self.name}' "
                f"(got {rule.param}={got})")

    def check(self, p: int, n: int, m: int, G: int) -> None:
        """Raise ``ScheduleError`` with the first broken constraint, if any.

        Parameters
        ----------
        p, n, m, G : int

        Raises
        ------
        ScheduleError
            If a value is not a positive integer, or a constraint is broken.
        """
        p, n, m, G = (positive_int(x, k) for x, k in zip((p, n, m, G), "pnmG", strict=True))
        for rule in self.rules:  # on plain ints: one point needs no arrays
            if not rule.ok(p, n, m, G):
                raise ScheduleError(self._message(rule, p, n, m, G))

    @property
    def placement_code(self) -> int:
        """The placement's code (``fastpp.placement.CODES``), for jitted code."""
        return placements.CODES[self.placement]

    def describe(self) -> str:
        """One line: the constraints in words.

        Returns
        -------
        str
        """
        # "a multiple of p={p}" reads "a multiple of p" without numbers
        text = "; ".join(r.param + " must be " + re.sub(r"=\{\w+\}", "", r.must)
                         for r in self.rules if not r.size)
        return text or "any p, n and m"


SCHEDULES: dict[str, ScheduleSpec] = {spec.name: spec for spec in (
    ScheduleSpec("gpipe", classic.gpipe, "loop", "GPipe: all forwards, then all backwards",
                 rules=_rules(M_IS_1), torch_class="ScheduleGPipe", idle=classic.flush_idle,
                 bubble=classic.flush_bubble, peak_live=classic.gpipe_peak_live),
    ScheduleSpec("1f1b", classic.one_f_one_b, "loop",
                 "1F1B (PipeDream-Flush, Megatron, DeepSpeed)", rules=_rules(M_IS_1),
                 memory_reference=True,
                 idle=classic.flush_idle, bubble=classic.flush_bubble,
                 peak_live=classic.one_f_one_b_peak_live),
    ScheduleSpec(
        "interleaved-1f1b", interleaved.interleaved_1f1b, "loop",
        "Interleaved 1F1B (Megatron virtual pipeline), microbatch groups of G (default p; "
        "G = n < p is PyTorch's one round, which Megatron refuses)",
        rules=_rules(
            Rule("m", "at least 2 (use '1f1b' for m=1)", lambda p, n, m, G: m >= 2),
            *TORCH_GROUPS),
        # three virtual stages: Korthikanti et al. 2022 train 175B and 530B so
        options=("G",), default_m=2, m_choices=(2, 3, 4), torch_class="ScheduleInterleaved1F1B",
        idle=interleaved.interleaved_idle, bubble=interleaved.interleaved_bubble,
        peak_live=interleaved.interleaved_peak_live),
    ScheduleSpec("looped-bfs", interleaved.looped_bfs, "loop",
                 "Looped BFS: breadth-first over m chunks per device, backwards reversed",
                 default_m=2, m_choices=(2, 3, 4), torch_class="ScheduleLoopedBFS",
                 compile_apart=True,
                 idle=interleaved.looped_bfs_idle, bubble=interleaved.interleaved_bubble,
                 peak_live=interleaved.looped_bfs_peak_live),
    ScheduleSpec("forward-only", classic.forward_only, "loop", "Inference: forwards only",
                 forward_only=True, rules=_rules(M_IS_1), idle=classic.forward_only_idle,
                 makespan=classic.forward_only_makespan,
                 peak_live=classic.forward_only_peak_live),
    ScheduleSpec("zb-h1", zero_bubble.zb_h1, "loop",
                 "Zero Bubble ZB-H1: 1F1B's memory, W's fill the bubbles",
                 split_backward=True, rules=_rules(M_IS_1), search_candidate=True,
                 compile_apart=True,
                 idle=zero_bubble.zb_h1_idle, peak_live=zero_bubble.zb_h1_peak_live,
                 peak_activations=zero_bubble.zb_h1_peak_activations),
    ScheduleSpec("zb-h2", zero_bubble.zb_h2, "loop",
                 "Zero Bubble ZB-H2: deeper warmup, no bubble for n >= 2p-1",
                 split_backward=True, rules=_rules(M_IS_1), search_candidate=True,
                 compile_apart=True,
                 span_idle=zero_bubble.zb_h2_span_idle, peak_live=zero_bubble.zb_h2_peak_live,
                 peak_activations=zero_bubble.zb_h2_peak_activations),
    ScheduleSpec(
        "interleaved-zb", interleaved.interleaved_zb, "loop",
        "Interleaved Zero Bubble ZB1P (PyTorch ScheduleInterleavedZeroBubble)",
        split_backward=True,
        rules=_rules(
            Rule("m", "at least 2 (use 'zb-h1' for m=1)", lambda p, n, m, G: m >= 2),
            # PyTorch's rounds: n // p of them, each of n / rounds microbatches
            Rule("n", "a multiple of its rounds max(1, n // p)={rounds}",
                 lambda p, n, m, G: n % np.maximum(1, n // p) == 0),
        ),
        default_m=2, m_choices=(2, 3, 4), torch_class="ScheduleInterleavedZeroBubble"),
    ScheduleSpec("zbv", zero_bubble.zbv, "v", "Zero Bubble ZB-V (PyTorch ScheduleZBVZeroBubble)",
                 split_backward=True, rules=_rules(M_IS_2, ZBV_WORK), default_m=2,
                 search_candidate=True, compile_apart=True,
                 torch_class="ScheduleZBVZeroBubble", span_idle=zero_bubble.zbv_span_idle,
                 peak_live=zero_bubble.zbv_peak_live,
                 peak_activations=zero_bubble.zbv_peak_activations),
    ScheduleSpec("v-half", vshape.v_half, "v",
                 "V-Half (controllable memory): about half of 1F1B's peak",
                 split_backward=True, rules=_rules(M_IS_2, V_SHAPE_P), default_m=2,
                 search_candidate=True, compile_apart=True,
                 peak_live_max=vshape.v_half_peak_live_max),
    ScheduleSpec("v-min", vshape.v_min, "v",
                 "V-Min (controllable memory): about a third of 1F1B's peak",
                 split_backward=True, rules=_rules(M_IS_2, V_SHAPE_P), default_m=2,
                 search_candidate=True, compile_apart=True,
                 peak_live_max=vshape.v_min_peak_live_max),
    ScheduleSpec("dualpipe", dualpipe.dualpipe, "two-directions",
                 "DeepSeek DualPipe: two directions, overlapped F&B pairs, 2x parameters",
                 split_backward=True, pairs=True, rules=_rules(
                     M_IS_1_BOTH, P_EVEN,
                     Rule("n", "even", lambda p, n, m, G: n % 2 == 0),
                     Rule("n", "at least 2p={two_p}", lambda p, n, m, G: n >= 2 * p)),
                 compile_apart=True, idle=dualpipe.dualpipe_idle,
                 makespan=dualpipe.dualpipe_makespan, peak_live=dualpipe.dualpipe_peak_live,
                 peak_activations=dualpipe.dualpipe_peak_activations),
    ScheduleSpec("dualpipev", dualpipe.dualpipev, "v",
                 "DualPipeV (PyTorch ScheduleDualPipeV): DualPipe on a V",
                 split_backward=True, pairs=True, rules=_rules(
                     M_IS_2, Rule("n", "at least 2p={two_p}", lambda p, n, m, G: n >= 2 * p)),
                 default_m=2, torch_class="ScheduleDualPipeV", compile_apart=True,
                 peak_live=dualpipe.dualpipev_peak_live,
                 peak_activations=dualpipe.dualpipev_peak_activations),
    ScheduleSpec("chimera", chimera.chimera, "two-directions",
                 "Chimera: two directions, the authors' overlapping units, 2x parameters",
                 rules=_rules(
                     M_IS_1_BOTH, P_EVEN,
                     Rule("n", "a multiple of p={p}", lambda p, n, m, G: n % p == 0),
                     # units of p/2 = 1 microbatch never start a later unit in the authors' walk
                     Rule("n", "p when p=2", lambda p, n, m, G: (p != 2) | (n == p))),
                 idle=chimera.chimera_idle, bubble=chimera.chimera_bubble, compile_apart=True),
    ScheduleSpec(
        "combined-1f1b", interleaved.combined_1f1b, "loop",
        "Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm): interleaved 1F1B, "
        "one more warm-up forward, steady-state F&B as overlapped pairs",
        pairs=True, expert_overlap=True, rules=_rules(
            Rule("m", "at least 2 when p > 1 (Megatron's EP overlap needs interleaving)",
                 lambda p, n, m, G: (p == 1) | (m >= 2)),
            # (at p = 1 Megatron runs combined_1f1b_schedule_for_no_pipelining, one model
            # chunk: parallel_state.initialize_model_parallel refuses virtual stages without
            # a pipeline, "pipeline-model-parallel size should be greater than 1")
            Rule("m", "1 when p = 1 (Megatron has no virtual stages without a pipeline)",
                 lambda p, n, m, G: (p > 1) | (m == 1)),
            *MEGATRON_GROUPS),
        options=("G",), default_m=2, m_choices=(1, 2, 3, 4)),
)}
# what fastpp.optimize also offers on a placement where a split backward costs more than a
# whole one: a schedule that splits none (the V placement has none registered)
WHOLE_BACKWARD = {"loop": "1f1b"}
for _sid, _spec in enumerate(SCHEDULES.values()):
    object.__setattr__(_spec, "sid", _sid)
# the default memory budget: 1F1B's peak, the one every schedule paper compares with
(MEMORY_REFERENCE,) = (name for name, spec in SCHEDULES.items() if spec.memory_reference)


def get_spec(name: str, param: str = "schedule") -> ScheduleSpec:
    """The registered ``ScheduleSpec`` called ``name``; a ``ScheduleError`` naming ``param``
    (e.g. a sweep's ``schedules``) otherwise."""
    if not isinstance(name, str):  # (a wrong type: also a TypeError, as simulate's)
        raise ScheduleTypeError(f"{param} must be one of {sorted(SCHEDULES)} (got {name!r})")
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ScheduleError(f"{param} must be one of {sorted(SCHEDULES)} (got {name!r})") from None


def build_schedule(name: str, p: int = None, n: int = None, m: int | None = None, *extra,
                   **options) -> Schedule:
    """Build a registered schedule.

    Parameters
    ----------
    name : str
        A key of ``fastpp.SCHEDULES``, e.g. ``"1f1b"`` or ``"interleaved-1f1b"``.
    p, n : int
        Devices, microbatches (required: their defaults only let a call without them be
        refused as a ``ScheduleTypeError``, with no wrapper on this per-point path).
    m : int, optional
        Chunks per device; default the schedule's own (``ScheduleSpec.default_m``: 2 for the
        V-shapes and the interleaved schedules, 1 for the others), as the sweeps and the
        command line take it.
    *extra
        None taken: a fifth positional argument is refused as a ``ScheduleTypeError`` (as
        Python refuses one, but naming the parameters).
    **options
        Schedule options: ``G`` (microbatch group size, default ``p``) for
        ``"interleaved-1f1b"`` and ``"combined-1f1b"``.

    Returns
    -------
    Schedule
        Built once for these arguments and kept: each call's schedule reads the kept arrays
        until its own are first read (then it copies them, and may be written into), and
        ``simulate`` runs it from a plan compiled once for them all.

    Raises
    ------
    ScheduleError
        If the name is unknown, an option is not the schedule's, or ``p, n, m`` break its
        constraints; the message names the parameter, what it must be and what it got.
    """
    if type(name) is not str and isinstance(name, str):  # (NumPy's, read from a frame)
        name = str(name)
    if m is None and type(name) is str and name in SCHEDULES:
        m = SCHEDULES[name].default_m
    if not options and not extra and type(name) is str and type(p) is type(n) is type(m) is int:
        built = _BUILT.get((name, p, n, m, p))
        if built is not None:  # these arguments passed the checks below before
            return Schedule._shared(built)
    if extra or p is None or n is None:  # (a call Python would refuse with a bare TypeError)
        why = ("too many positional arguments" if extra else
               f"missing a required argument: {'p' if p is None else 'n'!r}")
        raise ScheduleTypeError(f"build_schedule cannot be called so: {why} (its parameters: "
                                f"name, p, n, m)")
    spec = get_spec(name)
    p, n, m = (positive_int(v, k) for k, v in (("p", p), ("n", n), ("m", m)))
    options = {k: v for k, v in options.items() if v is not None}  # None: the default
    unknown = sorted(set(options) - set(spec.options))
    if unknown:  # named first, as a parameter: on the command line it is a flag (-G)
        takes = f"its options are {list(spec.options)}" if spec.options else "it takes no options"
        got = ", ".join(f"{k}={options[k]!r}" for k in unknown)
        raise ScheduleError(f"{unknown[0]} must not be given for '{name}': {takes} (got {got})")
    G = positive_int(options.get("G", p), "G")
    key = (spec.name, p, n, m, G)
    built = _BUILT.get(key)
    if built is None:
        spec.check(p, n, m, G)  # a key in _BUILT passed it
        # valid by construction (tests/test_generators.py re-checks every generator over a grid)
        built = Built(generate(spec, p, n, m, G), n=n, m=m, name=spec.name,
                      forward_only=spec.forward_only)
        with _BUILT_LOCK:
            if sum(b.slots for b in _BUILT.values()) + built.slots > OP_FIELDS * BUILT_OPS:
                _BUILT.clear()
            if built.slots <= OP_FIELDS * BUILT_OPS:  # one larger than the bound is not kept
                _BUILT[key] = built
    return Schedule._shared(built)


def generate(spec: ScheduleSpec, p: int, n: int, m: int, G: int) -> tuple:
    """The arrays of a schedule, from its generator: ops, length, stage map, routes.

    ``p, n, m, G`` must pass ``spec.reasons`` first: the generators are unchecked jitted
    loops, and a point their rules refuse (V-Half with ``m = 1``) writes outside the op
    block."""
    ops = new_ops(p, n, m)
    length = np.zeros(p, np.int32)
    spec.generator(ops, length, p, n, m, G)
    code = spec.placement_code
    first, last = placements.routes(code, p, n, m)
    return (np.ascontiguousarray(ops[:, :, : max(1, int(length.max()))]), length,
            placements.stage_map(code, p, m), first, last)


def code_of(schedule) -> int:
    """The placement code of a built ``Schedule``: its registered schedule's, else read from
    its stage map and routes (a route starting at stage ``p``: two directions; ``V = 2p``
    stages whose devices read the same both ways: v; else loop)."""
    spec = SCHEDULES.get(schedule.name)
    if spec is not None:
        return spec.placement_code
    if np.any(schedule.route_first == schedule.p):
        return placements.TWO_DIRECTIONS
    if schedule.V == 2 * schedule.p and np.array_equal(schedule.stage_to_device[::-1],
                                                       schedule.stage_to_device):
        return placements.VSHAPE
    return placements.LOOP


ScheduleSpec.__init__ = known_keywords("ScheduleSpec")(ScheduleSpec.__init__)
