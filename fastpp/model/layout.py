"""Layers per stage: which transformer layers, embedding and loss each model chunk holds.

A ``Layout`` lists, per model chunk in model order (virtual stage ``s``; a two-direction
schedule runs the same chunks twice), its transformer layers and whether it holds the
embedding or the output layer and the loss. It comes from:

- Megatron-LM's ``--pipeline-model-parallel-layout`` string (``parse_layout``): ``E`` the
  embedding, ``t`` a transformer layer, ``m`` an MTP layer, ``L`` the output layer and loss,
  ``|`` ends a stage, ``x*k`` repeats the symbol before it ``k`` times (``|`` too),
  ``(...)*k`` repeats a group (not nested), and commas are cosmetic, e.g.
  ``"Et*3|(tt|)*29,m|L"`` (Megatron's documented DeepSeek-V3 layout: 32 stages). Megatron
  lists the ``p * m`` stages in model order, stage ``s`` on device ``s % p``; empty stages are
  legal there (``"E||t|L"``);
- Megatron's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``
  (``megatron_layers``): counts per device (pipeline rank), the rest even over the middle
  devices, each device's layers even over its ``m`` chunks, all divisions exact;
- torchtitan's ``pipeline_parallel_first_stage_less_layers`` / ``..._last_stage_less_layers``
  (``torchtitan_layers``): the embedding and the output layer weigh as that many layers;
- a vector of layers per stage (``Layout.from_layers``), or ``even_layers``: first and last
  counts given, the rest as even as ``chunk_layers`` makes it (plan's ``first_layers`` and
  ``last_layers`` axes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..checks import (
    MAX_INT,
    ScheduleError,
    ScheduleTypeError,
    digits,
    known_keywords,
    nonnegative_int,
    positive_int,
)
from .transformer import MAX_CHUNKS, chunk_layers

SYMBOLS = "EtmL"  # embedding, transformer layer, MTP layer, output layer and loss


@dataclass(frozen=True)
class Layout:
    """What each model chunk (virtual stage, in model order) holds. ``str(layout)`` is its
    Megatron layout string (``parse_layout`` reads one).

    Parameters
    ----------
    layers : sequence of int
        Transformer layers per chunk.
    embedding, loss : sequence of bool
        Per chunk, whether it holds the embedding; the output layer and the loss.
    mtp : sequence of int
        MTP layers per chunk.
    """

    layers: tuple[int, ...]
    embedding: tuple[bool, ...]
    loss: tuple[bool, ...]
    mtp: tuple[int, ...]

    def __post_init__(self):
        layers = _counts(self.layers, "layout.layers")
        fields = {"layers": layers, "mtp": _counts(self.mtp, "layout.mtp")}
        for name in ("embedding", "loss"):
            values = getattr(self, name)
            if isinstance(values, str) or not hasattr(values, "__len__") or not all(
                    isinstance(v, bool | np.bool_) for v in values):
                raise ScheduleTypeError(f"layout.{name} must be a sequence of bools per stage "
                                        f"(got {values!r})")
            fields[name] = tuple(bool(v) for v in values)
        for name, values in fields.items():
            if len(values) != len(layers):
                raise ScheduleError(f"layout.{name} must have one entry per stage, "
                                    f"{len(layers)} as layout.layers (got {len(values)})")
            object.__setattr__(self, name, values)  # tuples: a layout does not change
        # Megatron's rule, as parse_layout applies it: the model's one embedding opens its first
        # stage, its one loss closes its last
        for name, stage, which in (("embedding", 0, "first"), ("loss", len(layers) - 1, "last")):
            marked = [s for s, v in enumerate(fields[name]) if v]
            if marked != [stage]:
                raise ScheduleError(f"layout.{name} must mark stage {stage} alone, the {which} "
                                    f"(got stages {marked})")

    @property
    def stages(self) -> int:
        return len(self.layers)

    @classmethod
    def from_layers(cls, layers) -> Layout:
        """A vector of layers per stage: the embedding on the first, the loss on the last.

        Parameters
        ----------
        layers : sequence of int
            Layers per stage, >= 0.

        Returns
        -------
        Layout
        """
        counts = _counts(layers, "layers")
        stages = len(counts)
        return cls(counts, tuple(s == 0 for s in range(stages)),
                   tuple(s == stages - 1 for s in range(stages)), (0,) * stages)

    def __str__(self) -> str:
        texts = [("E" if e else "") + _run("t", k) + _run("m", q) + ("L" if lo else "")
                 for k, e, lo, q in zip(self.layers, self.embedding, self.loss, self.mtp,
                                        strict=True)]
        out, s = [], 0
        while s < len(texts):  # a run of equal stages (but the last) as "(...|)*k" if shorter
            k = 1
            while s + k < len(texts) - 1 and texts[s + k] == texts[s]:
                k += 1
            plain = "|".join(texts[s: s + k]) + ("|" if s + k < len(texts) else "")
            # (a comma, cosmetic, keeps "*29" from running into the next stage's symbols)
            short = f"({texts[s]}|)*{k}" + ("," if texts[s + k][:1] in SYMBOLS else "") \
                if k > 1 else plain
            out.append(short if len(short) < len(plain) else plain)
            s += k
        return "".join(out)


def _run(symbol: str, k: int) -> str:
    return symbol * k if k <= 2 else f"{symbol}*{k}"


def _counts(values, name: str) -> tuple[int, ...]:
    # (a 0-d array has __len__ but no length: iterating it was NumPy's TypeError)
    if isinstance(values, str) or not hasattr(values, "__len__") or (
            isinstance(values, np.ndarray) and values.ndim == 0):
        raise ScheduleTypeError(f"{name} must be a sequence of layer counts per stage (got "
                                f"{type(values).__name__})")
    out = []
    for s, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise ScheduleError(f"{name} must hold integers >= 0 (got {v!r} at stage {s})")
        out.append(int(v))
    if not out:
        raise ScheduleError(f"{name} must hold at least one stage (got none)")
    return tuple(out)


@known_keywords("parse_layout")
def parse_layout(text: str) -> Layout:
    """Megatron's ``--pipeline-model-parallel-layout`` string as a ``Layout``.

    Parameters
    ----------
    text : str
        The layout, e.g. ``"Et*3|(tt|)*29,m|L"``.

    Returns
    -------
    Layout

    Raises
    ------
    ScheduleError
        Naming the position, for a symbol other than ``E t m L | * ( ) ,`` or digits, a
        ``*`` without a count or without something to repeat, unbalanced or nested
        parentheses, a group without ``*k``, and an embedding that is not the first symbol or
        a loss that is not the last (each exactly once), or an MTP layer before a
        transformer layer (Megatron's rules).

    Examples
    --------
    >>> layout = parse_layout("Et*3|(tt|)*29,m|L")
    >>> layout.stages, sum(layout.layers), layout.layers[:3], layout.mtp[-2:]
    (32, 61, (3, 2, 2), (1, 0))
    >>> str(layout)
    'Et*3|(tt|)*29,m|L'
    """
    if not isinstance(text, str):
        raise ScheduleTypeError(f"layout must be a string (got {type(text).__name__})")
    symbols = _expand(text)
    kinds = [c for c, _ in symbols if c != "|"]
    where = [at for c, at in symbols if c != "|"]
    if not kinds:
        _fail(text, "hold the embedding 'E' and the loss 'L'", len(text))
    if kinds[0] != "E":
        _fail(text, "start with the embedding 'E'", where[0])
    if kinds.count("E") > 1:
        _fail(text, "hold the embedding 'E' once", where[kinds.index("E", 1)])
    if kinds[-1] != "L":
        _fail(text, "end with the loss 'L'", where[-1])
    if kinds.count("L") > 1:
        _fail(text, "hold the loss 'L' once", where[kinds.index("L")])
    if "m" in kinds and "t" in kinds[kinds.index("m"):]:
        _fail(text, "place MTP layers 'm' after every transformer layer 't'",
              where[kinds.index("m")])
    stages: list[list[str]] = [[]]
    for c, _ in symbols:
        if c == "|":
            stages.append([])
        else:
            stages[-1].append(c)
    return Layout(tuple(s.count("t") for s in stages), tuple("E" in s for s in stages),
                  tuple("L" in s for s in stages), tuple(s.count("m") for s in stages))


_TOKEN = re.compile(r"[EtmL|()*,]|[0-9]+|.", re.S)
MAX_SYMBOLS = 1_000_000  # a layout expands to at most this many symbols (a model's layers)


def _expand(text: str) -> list[tuple[str, int]]:
    """The symbols of ``text`` with their positions, repetitions unrolled, commas dropped."""
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text) if m.group() != ","]
    # commas are purely cosmetic, even between digits (Megatron drops them first)
    merged: list[tuple[str, int]] = []
    for tok, at in tokens:
        if digits(tok, None) and merged and digits(merged[-1][0], None):
            merged[-1] = (merged[-1][0] + tok, merged[-1][1])
        else:
            merged.append((tok, at))
    out: list[tuple[str, int]] = []
    group: list[tuple[str, int]] | None = None  # inside parentheses
    opened = 0
    k = 0
    while k < len(merged):
        tok, at = merged[k]
        target = out if group is None else group
        if tok in SYMBOLS or tok == "|":
            target.append((tok, at))
        elif tok == "(":
            if group is not None:
                _fail(text, "not nest parentheses", at)
            group, opened = [], at
        elif tok == ")":
            if group is None:
                _fail(text, "close only an opened parenthesis", at)
            count, k = _count(merged, k, text, "follow a group '(...)' with '*' and a count")
            if not group:
                _fail(text, "repeat a group that holds something", opened)
            _room(text, len(out) + len(group) * count, opened)
            out.extend(group * count)
            group = None
        elif tok == "*":
            if not target or target[-1][1] != merged[k - 1][1]:
                _fail(text, "put '*' after a symbol or a group", at)
            count, k = _count(merged, k - 1, text, "follow '*' with a count")
            _room(text, len(out) + len(target) + count, at)
            target.extend([target.pop()] * count)
        else:
            _fail(text, f"hold only {', '.join(SYMBOLS)}, '|', '*', '(', ')', ',' and counts"
                  + (" after '*'" if digits(tok, None) else ""), at)
        k += 1
    if group is not None:
        _fail(text, "close every parenthesis", opened)
    return out


def _count(tokens, k: int, text: str, must: str) -> tuple[int, int]:
    """The count of ``*k`` after token ``k``, and the index of its last token."""
    star = tokens[k + 1] if k + 1 < len(tokens) else ("", len(text))
    count = tokens[k + 2] if k + 2 < len(tokens) else ("", len(text))
    if star[0] != "*":
        _fail(text, must, star[1])
    if not digits(count[0], None):
        _fail(text, must, count[1])
    if not digits(count[0]):  # (past int64 and MAX_SYMBOLS; int() refuses 4,300 digits)
        _fail(text, f"repeat at most {MAX_SYMBOLS:,} times", count[1])
    return int(count[0]), k + 2


def _room(text: str, size: int, at: int) -> None:
    if size > MAX_SYMBOLS:
        _fail(text, f"expand to at most {MAX_SYMBOLS:,} symbols (a repetition reaches {size:,})",
              at)


def _fail(text: str, must: str, at: int):
    raise ScheduleError(f"layout must {must} (got {text!r}, position {at})")


@known_keywords("even_layers")
def even_layers(layers: int, stages: int, first: int | None = None,
                last: int | None = None) -> Layout:
    """``first`` layers on the first stage and ``last`` on the last (as even as the rest when
    not given), the rest as even as ``chunk_layers`` makes it, the remainder in the middle.

    Parameters
    ----------
    layers, stages : int
        Transformer layers; model chunks (``p * m``).
    first, last : int, optional
        Layers on the first and on the last model chunk (``first_layers``, ``last_layers``).

    Returns
    -------
    Layout

    Raises
    ------
    ScheduleError
        If a count is not an integer in range, ``first`` or ``last`` is given for one model
        chunk, or they do not leave each other chunk at least one layer.
    """
    layers = positive_int(layers, "layers", MAX_INT)
    stages = positive_int(stages, "stages", MAX_CHUNKS, " (one count per stage)")
    for x, name in ((first, "first_layers"), (last, "last_layers")):
        if x is not None:
            nonnegative_int(x, name)
    if first is None and last is None:
        return Layout.from_layers(chunk_layers(layers, stages).tolist())
    if stages == 1:
        raise ScheduleError(f"first_layers and last_layers need at least 2 model chunks (got "
                            f"{stages})")
    ends = [x for x in (first, last) if x is not None]
    middle = stages - len(ends)  # the stages that share the rest
    rest = layers - sum(ends)
    if rest < 0 or (middle == 0 and rest != 0):
        raise ScheduleError(f"first_layers and last_layers must leave the other stages the rest "
                            f"of layers={layers} (got first_layers={first}, last_layers={last}"
                            f" for {stages} model chunks)")
    if rest < middle:
        raise ScheduleError(f"first_layers and last_layers must leave at least one layer for "
                            f"each of the {middle} other stages (got {rest} layers left)")
    counts = chunk_layers(rest, middle).tolist() if middle else []
    return Layout.from_layers(([first] if first is not None else []) + counts
                              + ([last] if last is not None else []))


@known_keywords("megatron_layers")
def megatron_layers(layers: int, p: int, m: int = 1, first: int | None = None,
                    last: int | None = None) -> Layout:
    """Megatron's ``--decoder-first-pipeline-num-layers first`` and
    ``--decoder-last-pipeline-num-layers last`` on ``p`` devices with ``m`` chunks each: the
    first and last devices hold that many layers, the other devices the rest evenly, each
    device's layers even over its chunks (chunk ``c`` of device ``r`` is stage ``c p + r``).
    Megatron asserts the divisions exact; so does this.

    Parameters
    ----------
    layers : int
        Transformer layers.
    p, m : int
        Devices and chunks per device.
    first, last : int, optional
        Layers on the first and on the last device.

    Returns
    -------
    Layout

    Raises
    ------
    ScheduleError
        If a count is not an integer in range, ``first`` or ``last`` is given with ``p = 1``,
        or a division Megatron asserts exact is not.
    """
    layers, p, m = (positive_int(x, k, MAX_INT)
                    for x, k in ((layers, "layers"), (p, "p"), (m, "m")))
    positive_int(p * m, "p*m", MAX_CHUNKS, " (one count per stage)")
    given = {0: first, p - 1: last}
    ends = {r: nonnegative_int(x, f"decoder_{'first' if r == 0 else 'last'}_pipeline_num_layers")
            for r, x in given.items() if x is not None}
    if p == 1 and ends:
        raise ScheduleError(f"decoder_first/last_pipeline_num_layers need p >= 2 (got p={p})")
    rest, middle = layers - sum(ends.values()), p - len(ends)
    if rest < 0 or (middle == 0 and rest) or (middle and rest % middle):
        raise ScheduleError(f"decoder_first/last_pipeline_num_layers must leave the other "
                            f"{middle} devices the rest of layers={layers} evenly (got "
                            f"first={first}, last={last}: {rest} left)")
    per_device = np.full(p, rest // middle if middle else 0, np.int64)  # p is checked by now
    for r, x in ends.items():
        per_device[r] = x
    if np.any(per_device % m):
        r = int(np.argmax(per_device % m))
        raise ScheduleError(f"each device's layers must divide evenly over its m={m} chunks "
                            f"(got {per_device[r]} on device {r})")
    return Layout.from_layers([int(per_device[s % p] // m) for s in range(p * m)])


@known_keywords("torchtitan_layers")
def torchtitan_layers(layers: int, stages: int, first_less: int = 1,
                      last_less: int = 1) -> Layout:
    """torchtitan's split: the embedding weighs ``first_less`` layers and the output layer
    ``last_less`` (``pipeline_parallel_first_stage_less_layers`` and ``..._last_...``), the
    ``layers + first_less + last_less`` weights even over the stages, the remainder on the
    first ones; its checks (no empty stage, a weight at most a stage's share) hold.

    Parameters
    ----------
    layers, stages : int
        Transformer layers; pipeline stages.
    first_less, last_less : int
        The layers the embedding and the output layer weigh.

    Returns
    -------
    Layout

    Raises
    ------
    ScheduleError
        If a count is not an integer in range, a stage would be empty, or ``first_less`` or
        ``last_less`` exceeds a stage's share of the weights (torchtitan's checks).
    """
    layers = positive_int(layers, "layers", MAX_INT)
    stages = positive_int(stages, "stages", MAX_CHUNKS, " (one count per stage)")
    for x, name in ((first_less, "first_stage_less_layers"),
                    (last_less, "last_stage_less_layers")):
        nonnegative_int(x, name)
    if stages == 1:
        return Layout.from_layers([layers])
    weights = layers + first_less + last_less
    share, extra = divmod(weights, stages)
    if share == 0 or first_less > share or last_less > share:
        raise ScheduleError(f"first_stage_less_layers and last_stage_less_layers must be at most "
                            f"each stage's share {share} of {weights} weights over {stages} "
                            f"stages, which must be at least 1 (got {first_less} and "
                            f"{last_less})")
    counts = [share + (s < extra) for s in range(stages)]
    counts[0] -= first_less
    counts[-1] -= last_less
    return Layout.from_layers(counts)


def as_layout(layout=None, layers=None) -> Layout | None:
    """``layout`` (a ``Layout`` or a Megatron string) or ``layers`` (a vector), not both."""
    if layout is not None and layers is not None:
        raise ScheduleError(f"give layout or layers, not both (got layout={layout!r}, "
                            f"layers={layers!r})")
    if layers is not None:
        return Layout.from_layers(layers)
    if layout is None or isinstance(layout, Layout):
        return layout
    return parse_layout(layout)


def check_layout(layout: Layout, layers: int, stages: int, mtp: int = 0) -> None:
    """A layout fit for a model of ``layers`` transformer layers on ``stages`` model chunks
    (and ``mtp`` multi-token-prediction modules: its ``m`` layers are none or all of them)."""
    if layout.stages != stages:
        raise ScheduleError(f"layout must have {stages} stages, the schedule's model chunks (got "
                            f"{layout.stages}: {str(layout)!r})")
    if sum(layout.layers) != layers:
        raise ScheduleError(f"layout must hold the model's layers={layers} (got "
                            f"{sum(layout.layers)}: {str(layout)!r})")
    if sum(layout.mtp) not in (0, mtp):
        raise ScheduleError(f"layout must have no MTP layers 'm' or the model's mtp_depth={mtp} "
                            f"(got {sum(layout.mtp)}: {str(layout)!r})")


# a misspelt keyword named, not a bare TypeError
Layout.__init__ = known_keywords("Layout")(Layout.__init__)
