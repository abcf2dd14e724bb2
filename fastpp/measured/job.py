"""``MeasuredJob``: a data-parallel pipeline job read from an op table (``read_op_table``).

The op table is the format of Lin et al., "Understanding Stragglers in Large Model Training
Using What-if Analysis" (OSDI'25; its artifact ByteDance-Seed/StragglerAnalysis): one row per
op with ``dp_rank, stage, rank, step, optype, start_ts, duration, seq_id, mc, mb_id, gmc``
(seconds), and a meta YAML with the job's ``dp_size, pp_size, tp_size, vpp_size``, ...

An op is ``(dp_rank, stage, optype, seq_id)``; every step and every data-parallel replica runs
the same ops. Their dependencies are the paper's model of a Megatron step (built once, from
replica 0's first step, as the artifact does):

- each stage runs its forward and backward computes in the order they ran;
- a pipeline send waits for its compute; a receive waits for the compute before the one that
  needs it (Megatron posts the next receive after the previous compute), and the compute waits
  for the receive; each of the four send/receive kinds runs in order; the first backward
  send and receive wait for the compute two before the first backward;
- the parameter all-gather opens the step (the first forward waits for it), then after the
  last compute: ``gc -> layernorm-grads-all-reduce -> [embedding-grads-all-reduce on the first
  and last stage] -> grads-reduce-scatter -> optimizer-clip-main-grad -> optimizer``;
- a collective ends for all its members together: at the latest member's start plus that
  member's transfer time. A send and its receive are a pair; the embedding all-reduce joins
  the first and last stage of a replica; the all-gather and reduce-scatter join a stage's
  replicas, and the gradient clip (a global norm) joins every rank.

A compute op takes its ``duration``; a collective member its transfer time (its end less the
group's latest start, as measured). Replayed, the graph is one flat pass over the ops in
topological order on fastpp's compiled kernel (``fastpp.compiled.timeline_batch``), every step
(and every what-if variant) a column of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ..checks import (
    Frozen,
    ScheduleError,
    ScheduleTypeError,
    file_path,
    known_keywords,
    numbers,
    read_only,
    require,
)
from ..compiled import timeline_batch
from ..costs import MAX_TIME

pd = require("pandas", "measured", "fastpp.measured")

COLUMNS = ("dp_rank", "stage", "rank", "step", "optype", "start_ts", "duration", "seq_id", "mc",
           "mb_id", "gmc")
FORWARD, BACKWARD = "forward-compute", "backward-compute"
P2P = ("forward-send", "forward-recv", "backward-send", "backward-recv")
ALL_GATHER, REDUCE_SCATTER = "params-all-gather", "grads-reduce-scatter"
GC, LAYERNORM, EMBEDDING = "gc", "layernorm-grads-all-reduce", "embedding-grads-all-reduce"
CLIP, OPTIMIZER = "optimizer-clip-main-grad", "optimizer"
OPTYPES = (FORWARD, BACKWARD, *P2P, ALL_GATHER, REDUCE_SCATTER, GC, LAYERNORM, EMBEDDING, CLIP,
           OPTIMIZER)
# communication in the paper's sense: its ideal takes the median, a compute's the mean
COMM_OPTYPES = (*P2P, ALL_GATHER, REDUCE_SCATTER, LAYERNORM, EMBEDDING, CLIP)
_SHOWN = 6


@dataclass(frozen=True)
class Graph:
    """A job's step laid out for the compiled kernel (``fastpp.compiled.timeline_batch``).

    Nodes in topological order, each waiting for ``previous[i]`` and ``producer[i, :]`` (``-1``:
    none; ``link`` is all ``-1``, no hand-off latency). Node ``at[o]`` is op ``o`` of
    ``MeasuredJob.ops``; the other nodes take no time: the collectives' rendezvous (waiting for
    every member's inputs) and joins that split a wait on more than three nodes.
    """

    previous: np.ndarray
    producer: np.ndarray
    link: np.ndarray
    at: np.ndarray

    @property
    def nodes(self) -> int:
        return len(self.previous)


class MeasuredJob(Frozen):
    """A measured data-parallel pipeline job: several steps, every replica's ops.

    Attributes
    ----------
    table : DataFrame
        The op table as read, with ``end_ts`` and ``transfer`` (a collective member's transfer
        time; NaN for computes).
    meta : dict
        The meta YAML.
    dp, pp, tp, vpp : int
        Data-parallel replicas, pipeline stages, tensor and virtual pipeline sizes.
    steps : ndarray
        The steps, ascending.
    ops : DataFrame
        One row per op of a step (replica-major): ``dp_rank, stage, rank, optype, seq_id``.
    durations : ndarray, shape (ops, steps)
        What each op takes in the replay: a compute its ``duration``, a collective member its
        transfer time.
    step_time : ndarray, shape (steps,)
        Measured: last op end less first op start of each step.

    A job does not change once read: its attributes cannot be set and its arrays are
    read-only. ``MeasuredJob(table, meta)`` builds one from an op table in memory (a
    DataFrame with ``read_op_table``'s columns) and its meta dict, checked as
    ``read_op_table`` checks a file's.
    """

    def __init__(self, table, meta: dict):
        # built from a table in memory: checked as read_op_table checks a file's (unchecked,
        # a DP2 table with dp_size 1 gave S = 1.0078 for 1.1787, and a table without end_ts
        # an AttributeError)
        self._build(*_checked(table, meta, "table"))

    @classmethod
    def _read(cls, table, meta: dict) -> MeasuredJob:
        """A job of a table and meta ``_checked`` already (``read_op_table``'s)."""
        job = cls.__new__(cls)
        job._build(table, meta)
        return job

    def _build(self, table, meta: dict) -> None:
        steps = np.sort(table.step.unique())
        first = table[table.step == steps[0]]
        ops = (first.sort_values(["dp_rank", "stage", "start_ts", "seq_id", "optype"])
               [["dp_rank", "stage", "rank", "optype", "seq_id"]].reset_index(drop=True))
        # set in steps, as the graph and the matrices read the fields before them
        self._freeze(table=table, meta=meta, dp=int(meta["dp_size"]), pp=int(meta["pp_size"]),
                     tp=int(meta.get("tp_size", 1)), vpp=int(meta.get("vpp_size", 1)),
                     steps=steps, ops=ops,
                     _index=pd.MultiIndex.from_frame(ops[["dp_rank", "stage", "optype",
                                                          "seq_id"]]))
        graph, groups = _graph(self)
        table["transfer"] = _transfers(table, groups, self)
        by_step = table.groupby("step")
        self._freeze(_graph=graph, durations=self._matrix(np.where(
            table.transfer.notna(), table.transfer, table.duration)),
            step_time=(by_step.end_ts.max() - by_step.start_ts.min()).loc[steps].to_numpy())

    @property
    def graph(self) -> Graph:
        """The step's dependency graph, its arrays read-only (the kernel indexes them
        unchecked)."""
        g = self._graph
        return Graph(*(read_only(a) for a in (g.previous, g.producer, g.link, g.at)))

    def __repr__(self) -> str:
        return (f"MeasuredJob(dp={self.dp}, pp={self.pp}, tp={self.tp}, steps={len(self.steps)}, "
                f"ops per step={len(self.ops)})")

    def _matrix(self, values) -> np.ndarray:
        """``values`` (one per table row) as an ``(ops, steps)`` matrix."""
        t = self.table
        row = self._index.get_indexer(pd.MultiIndex.from_arrays(
            [t.dp_rank, t.stage, t.optype.astype(str), t.seq_id]))
        col = np.searchsorted(self.steps, t.step.to_numpy())
        out = np.empty((len(self.ops), len(self.steps)))
        out[row, col] = values
        return out

    @cached_property
    def comm(self) -> np.ndarray:
        """Per op: whether it is communication in the paper's sense (its ideal is a median)."""
        return self.ops.optype.isin(COMM_OPTYPES).to_numpy()

    def op_times_by_kind(self) -> list[list[np.ndarray]]:
        """Per stage, per op code (``fastpp.ops.Op``: F, B, I, W, FB): the forward and backward
        compute durations of every replica and step (no ``I``, ``W`` or pairs), what
        ``fastpp.Noise(empirical=job)`` draws from.

        Returns
        -------
        list of list of ndarray
            ``[stage][k]``: the stage's durations of kind ``k``.
        """
        kinds = self.ops.optype.to_numpy()
        out = []
        for stage in range(self.pp):
            rows = self.ops.stage.to_numpy() == stage
            out.append([self.durations[rows & (kinds == FORWARD)].ravel(),
                        self.durations[rows & (kinds == BACKWARD)].ravel(),
                        np.zeros(0), np.zeros(0), np.zeros(0)])
        return out

    def replay(self, durations) -> np.ndarray:
        """Step times under ``durations`` (shape ``(ops, B)``, a column per step or variant,
        finite and >= 0): ``(B,)``, one pass of fastpp's compiled kernel over every column.

        Parameters
        ----------
        durations : array_like, shape (ops, B)
            A row per op of ``ops``.

        Returns
        -------
        ndarray, shape (B,)

        Raises
        ------
        ScheduleError
            If ``durations`` is not of that shape or holds a number outside ``[0,
            fastpp.costs.MAX_TIME]``.
        """
        g = self._graph
        durations = numbers(durations, "durations", upper=MAX_TIME)
        if durations.ndim != 2 or len(durations) != len(self.ops):
            raise ScheduleError(f"durations must have shape (ops, B) = ({len(self.ops)}, B), a "
                                f"row per op of MeasuredJob.ops (got shape {durations.shape})")
        columns = durations.shape[1]
        times = np.zeros((g.nodes, columns))
        times[g.at] = durations
        start, end = np.empty_like(times), np.empty_like(times)
        timeline_batch(g.previous, g.producer, g.link, times, np.zeros((1, columns)), start, end)
        return end[g.at].max(axis=0)


@known_keywords("read_op_table")
def read_op_table(path, meta=None) -> MeasuredJob:
    """Read a job's op table (OSDI'25 what-if format) into a ``MeasuredJob``.

    Parameters
    ----------
    path : str or Path
        The parquet table, one row per op (module docstring).
    meta : str, Path or dict, optional
        The meta YAML (``dp_size``, ``pp_size``, ``tp_size``, ``vpp_size``, ``world_size``)
        or its contents. Default: ``meta-<trial>.yaml`` beside ``trace-<trial>.parquet``.

    Returns
    -------
    MeasuredJob

    Raises
    ------
    ScheduleError
        A column missing, an op twice, steps or replicas with different ops, the meta file
        disagreeing with the table, or a schedule the dependency model does not cover
        (virtual stages, a send or receive without its peer).
    """
    path = _existing(file_path(path, "path"), "path")
    try:  # (first: the table is what was given; its meta file is looked for beside it)
        table = pd.read_parquet(path)
    except Exception as err:  # pyarrow's errors have no common base  # noqa: BLE001
        raise ScheduleError(f"path must be a Parquet op table (got {str(path)!r}: "
                            f"{type(err).__name__})") from None
    return MeasuredJob._read(*_checked(table, _meta(path, meta), f"op table {path.name}"))


def _checked(table, meta, name: str) -> tuple:
    """``table`` (a copy of its columns, with ``end_ts``) and ``meta`` checked: its columns,
    their types, its consistency and its agreement with ``meta``; ``name`` names it."""
    if not isinstance(table, pd.DataFrame):
        raise ScheduleTypeError(f"table must be a pandas DataFrame of ops (got "
                                f"{type(table).__name__})")
    if not isinstance(meta, dict):
        raise ScheduleTypeError(f"meta must be a dict of sizes (got {type(meta).__name__})")
    # (a column twice made its checks a frame's, pandas' ambiguous truth; a MultiIndex's
    # partial match passed below and failed in the selection, pandas' TypeError)
    names = list(table.columns)
    twice = sorted({c for c in COLUMNS if names.count(c) > 1})
    if isinstance(table.columns, pd.MultiIndex) or twice:
        raise ScheduleError(f"{name} must have each column once, by a plain name (got "
                            f"{twice or 'a MultiIndex of columns'})")
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise ScheduleError(f"{name} must have columns {list(COLUMNS)} (missing {missing})")
    if table.empty:
        raise ScheduleError(f"{name} must hold ops (it has none)")
    # (a row label is no op's: an index repeated, as pd.concat of per-rank tables leaves it,
    # made a row lookup a Series, int()'s TypeError)
    table = table[list(COLUMNS)].reset_index(drop=True)
    _column_types(table, name)
    table["optype"] = table.optype.astype(str)
    _check(table, meta)
    table["end_ts"] = table.start_ts.astype(np.float64) + table.duration.astype(np.float64)
    return table, dict(meta)


def _meta(path: Path, meta) -> dict:
    if isinstance(meta, dict):
        return dict(meta)
    if meta is None:
        meta = path.with_name(path.name.replace("trace-", "meta-", 1)).with_suffix(".yaml")
        if not meta.is_file():
            raise ScheduleError(f"meta must be given, or be {meta.name} beside path "
                                f"{str(path)!r} (there is no such file)")
    meta = _existing(file_path(meta, "meta"), "meta")
    yaml = require("yaml", "measured", "fastpp.read_op_table's meta file", "pyyaml")
    try:
        data = yaml.safe_load(meta.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ScheduleError(f"meta must be a YAML file (got {str(meta)!r}: {err})") from None
    if not isinstance(data, dict):
        raise ScheduleError(f"meta file {meta.name} must be a mapping of sizes (got "
                            f"{type(data).__name__})")
    return data


def _existing(path: Path, name: str) -> Path:
    if not path.is_file():
        raise ScheduleError(f"{name} must be an existing file (got {str(path)!r})")
    return path


def _column_types(t, name: str) -> None:
    """Integer columns hold integers and the times finite numbers (before any arithmetic on
    them: a NaN rank or a string time would otherwise surface as NumPy's or pandas' error, a
    NaN start as a silently wrong order)."""
    for column in COLUMNS:  # pandas' nullable columns hold NA, which no check below sees
        if t[column].isna().any():
            row = int(np.flatnonzero(t[column].isna().to_numpy())[0])
            raise ScheduleError(f"{name}: {column} must have no missing values "
                                f"(row {row} is missing it)")
    for column in ("start_ts", "duration"):
        if not pd.api.types.is_numeric_dtype(t[column]) or pd.api.types.is_bool_dtype(t[column]):
            raise ScheduleError(f"{name}: {column} must hold numbers (got dtype "
                                f"{t[column].dtype})")
        t[column] = t[column].astype(np.float64)  # (a nullable dtype's own rules end here)
        # a step's replay sums them: past MAX_TIME the sums could overflow
        if not (np.abs(t[column].to_numpy()) <= MAX_TIME).all():
            raise ScheduleError(f"{name}: {column} must be finite and at most "
                                f"{MAX_TIME:g} in magnitude (the table has other values)")
    for column in set(COLUMNS) - {"start_ts", "duration", "optype"}:
        if not pd.api.types.is_integer_dtype(t[column]) or pd.api.types.is_bool_dtype(t[column]):
            raise ScheduleError(f"{name}: {column} must hold integers (got dtype "
                                f"{t[column].dtype})")
        # an unsigned column past int64's range would wrap around to negative labels
        if pd.api.types.is_unsigned_integer_dtype(t[column]) and len(t) \
                and int(t[column].max()) > np.iinfo(np.int64).max:
            raise ScheduleError(f"{name}: {column} must hold integers below 2**63 "
                                f"(got {int(t[column].max())})")
        t[column] = t[column].astype(np.int64)


def _check(t, meta: dict) -> None:
    """The table's own consistency and its agreement with ``meta``."""
    for key in ("dp_size", "pp_size", "tp_size", "vpp_size", "dsp_size", "world_size"):
        value = meta.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1 or (
                key in ("dp_size", "pp_size") and key not in meta):
            raise ScheduleError(f"meta {key} must be a positive integer (got {meta.get(key)!r})")
    sizes = {k: meta.get(k, 1) for k in ("tp_size", "vpp_size", "dsp_size")}
    if meta.get("vpp_size", 1) != 1:
        raise ScheduleError(f"meta vpp_size must be 1: the op table's dependency model is "
                            f"built for plain pipelines (got vpp_size={meta['vpp_size']})")
    if (t.mc > 0).any():  # the artifact infers vpp = max(mc) + 1: a chunk the meta denies
        raise ScheduleError(f"mc must be 0 (or -1 off the computes) with meta vpp_size 1: a "
                            f"model chunk past 0 is an interleaved pipeline's (got mc up to "
                            f"{int(t.mc.max())})")
    world = int(meta["dp_size"]) * int(meta["pp_size"]) * int(sizes["tp_size"]) * int(
        sizes["dsp_size"])  # (Python ints: NumPy's would wrap)
    if "world_size" in meta and meta["world_size"] != world:
        raise ScheduleError(f"meta world_size must be dp_size*pp_size*tp_size*dsp_size = {world} "
                            f"(got {meta['world_size']})")
    for column, key in (("dp_rank", "dp_size"), ("stage", "pp_size")):
        got = sorted(int(x) for x in t[column].unique())
        if len(got) != meta[key] or got != list(range(len(got))):  # (no range of a huge size)
            raise ScheduleError(f"meta {key}={meta[key]} disagrees with the table: its "
                                f"{column} values are {got[:_SHOWN]}")
    unknown = sorted(set(t.optype) - set(OPTYPES))
    if unknown:
        raise ScheduleError(f"optype must be one of {list(OPTYPES)} (got {unknown[:_SHOWN]})")
    ranks = t.groupby(["dp_rank", "stage"])["rank"].nunique()
    if (ranks != 1).any():
        (d, s) = ranks[ranks != 1].index[0]
        raise ScheduleError(f"dp_rank {d}, stage {s} must be one rank (the table has several)")
    # and a rank one (dp_rank, stage): M_W removes the worst ranks' ops by their rank
    pairs = t.groupby("rank")[["dp_rank", "stage"]].nunique().max(axis=1)
    if (pairs != 1).any():
        rank = pairs.index[(pairs != 1).to_numpy()][0]
        held = t.loc[t["rank"] == rank, ["dp_rank", "stage"]].drop_duplicates()
        raise ScheduleError(f"rank must name one (dp_rank, stage) (rank {rank} holds "
                            f"{sorted(map(tuple, held.to_numpy().tolist()))[:_SHOWN]})")
    key = ["dp_rank", "stage", "step", "optype", "seq_id"]
    twice = t.duplicated(key, keep=False)
    if twice.any():
        row = t[twice].iloc[0]
        raise ScheduleError("duplicate op: " + ", ".join(f"{k}={row[k]}" for k in key)
                            + f" appears {int(twice.sum())} times in the table")
    counts = t.groupby(["step", "dp_rank"]).size()
    if counts.nunique() != 1:
        low, high = counts.idxmin(), counts.idxmax()
        raise ScheduleError(f"every step must have the same ops: step {low[0]} (dp_rank "
                            f"{low[1]}) has {counts.min()} ops, step {high[0]} (dp_rank "
                            f"{high[1]}) has {counts.max()}")
    first = set(map(tuple, t[t.step == t.step.min()][["dp_rank", "stage", "optype", "seq_id"]]
                    .to_numpy().tolist()))
    for step, ops in t.groupby("step")[["dp_rank", "stage", "optype", "seq_id"]]:
        other = set(map(tuple, ops.to_numpy().tolist()))
        if other != first:
            odd = sorted(other ^ first, key=str)[0]
            raise ScheduleError(f"every step must have the same ops: step {step} and step "
                                f"{t.step.min()} differ in (dp_rank, stage, optype, seq_id)="
                                f"{odd}")
    if (t.duration < 0).any():  # (finite: _column_types)
        raise ScheduleError("duration must be >= 0 (the table has negative values)")
    if (t.duration == 0).all():  # (their start times, all alike, give no order)
        raise ScheduleError("job must have ops that take time: every op's duration is 0")
    # a plain pipeline's rank runs each kind's microbatches in order: the graph pairs each
    # compute with its send and receive by that order, so an op out of it would pair others
    ordered = t[t.optype.isin((FORWARD, BACKWARD, *P2P))].sort_values(
        ["step", "dp_rank", "stage", "optype", "start_ts", "seq_id"])
    group = ordered[["step", "dp_rank", "stage", "optype"]]
    same = (group == group.shift()).all(axis=1).to_numpy()
    seq = ordered.seq_id.to_numpy()
    late = np.flatnonzero(same[1:] & (seq[1:] < seq[:-1])) + 1
    if late.size:
        row = ordered.iloc[late[0]]
        raise ScheduleError(f"a rank's {row.optype} ops must start in seq_id order (step "
                            f"{row.step}, dp_rank {row.dp_rank}, stage {row.stage}: seq_id "
                            f"{row.seq_id} starts after seq_id {seq[late[0] - 1]})")


def _graph(job: MeasuredJob) -> tuple[Graph, list[tuple[np.ndarray, bool]]]:
    """The dependency graph of one step (module docstring) and its collectives: each a list
    of member ops and whether its members span the replicas."""
    t = job.table
    template = t[(t.step == job.steps[0]) & (t.dp_rank == 0)]
    ids: dict[tuple, int] = {}
    for i, (d, s, kind, q) in enumerate(job.ops[["dp_rank", "stage", "optype", "seq_id"]]
                                        .itertuples(index=False)):
        ids[(d, s, kind, q)] = i
    edges: list[tuple[tuple, tuple]] = []  # (before, after) as (stage, optype, seq_id)
    groups: list[tuple[list[tuple], bool]] = []
    pp = job.pp
    for s in range(pp):
        stage = template[template.stage == s].sort_values(["start_ts", "seq_id", "optype"])
        _stage_edges(stage, s, pp, edges, groups)
    clip = [(s, CLIP, 0) for s in range(pp)]
    groups.append((clip, True))
    embed = [(s, EMBEDDING, 0) for s in sorted({0, pp - 1})]
    groups.append((embed, False))
    for key in [*clip, *embed]:
        if (0, *key) not in ids:
            raise ScheduleError(f"stage {key[0]} must have a {key[1]} op of seq_id 0 (the "
                                f"table has none)")
    # a receive without its send would lose its stage's dependency on the peer and price the
    # step without it
    paired = {key for members, _ in groups for key in members}
    receives = template[template.optype.str.endswith("-recv")]
    for s, kind, q in receives[["stage", "optype", "seq_id"]].itertuples(index=False):
        if (s, kind, q) not in paired:
            direction = kind.split("-")[0]
            peer = s - 1 if direction == "forward" else s + 1
            raise ScheduleError(f"stage {s}'s {kind} op {q} must have its {direction}-send op "
                                f"{q} on stage {peer} (the table has none)")
    return _assemble(job, ids, edges, groups)


def _stage_edges(stage, s: int, pp: int, edges: list, groups: list) -> None:
    """Stage ``s``'s in-rank edges and its pipeline pairs and replica collectives."""
    def ops(kind):
        return [(s, kind, int(q)) for q in stage.seq_id[stage.optype == kind]]

    compute = [(s, k, int(q)) for k, q in zip(stage.optype, stage.seq_id, strict=True)
               if k in (FORWARD, BACKWARD)]
    if not compute:
        raise ScheduleError(f"stage {s} must have forward and backward computes (it has none)")
    edges += list(zip(compute, compute[1:], strict=False))
    for direction, compute_kind in (("forward", FORWARD), ("backward", BACKWARD)):
        computes = ops(compute_kind)
        for end in ("send", "recv"):
            comm = ops(f"{direction}-{end}")
            edges += list(zip(comm, comm[1:], strict=False))
            if comm and len(comm) != len(computes):
                raise ScheduleError(
                    f"stage {s} has {len(comm)} {direction}-{end} ops for {len(computes)} "
                    f"{compute_kind} ops: only one per compute (or none) is modelled")
            for k, op in enumerate(comm):
                if end == "send":
                    edges.append((computes[k], op))
                else:
                    edges.append((op, computes[k]))
                    if k:
                        edges.append((computes[k - 1], op))
                peer = s + 1 if direction == "forward" else s - 1
                if end == "send":
                    if not 0 <= peer < pp:
                        raise ScheduleError(f"stage {s} has a {direction}-send but no stage "
                                            f"{peer} to receive it")
                    other = "recv"
                    groups.append(([op, (peer, f"{direction}-{other}", op[2])], False))
    first_b = next((i for i, op in enumerate(compute) if op[1] == BACKWARD), None)
    if first_b is None:
        raise ScheduleError(f"stage {s} must have backward computes (it has none)")
    if first_b >= 2:
        for kind in ("backward-recv", "backward-send"):
            if (stage.optype == kind).any():
                edges.append((compute[first_b - 2], (s, kind, 0)))
    stream = [(s, k, int(q)) for k, q in zip(stage.optype, stage.seq_id, strict=True)
              if k in (ALL_GATHER, REDUCE_SCATTER)]
    edges += list(zip(stream, stream[1:], strict=False))
    for op in stream:
        groups.append(([op], True))
    gather = ops(ALL_GATHER)
    if gather:
        edges.append((gather[-1], compute[0]))  # (the last: the stream orders the rest)
    last = stage[stage.optype.isin([FORWARD, BACKWARD])]
    last = last.loc[(last.start_ts + last.duration).idxmax()]
    tail = [(s, GC, 0), (s, LAYERNORM, 0)]
    if s in (0, pp - 1):
        tail.append((s, EMBEDDING, 0))
    tail += ops(REDUCE_SCATTER) + [(s, CLIP, 0), (s, OPTIMIZER, 0)]
    edges.append(((s, last.optype, int(last.seq_id)), tail[0]))
    edges += list(zip(tail, tail[1:], strict=False))


def _assemble(job, ids, edges, groups):
    """Replicate the template's edges to every replica, add one rendezvous node per
    collective, and order the nodes topologically."""
    T = len(job.ops)
    preds: list[list[int]] = [[] for _ in range(T)]

    def node(d, key):
        try:
            return ids[(d, *key)]
        except KeyError:
            raise ScheduleError(f"stage {key[0]} of dp_rank {d} must have a {key[1]} op "
                                f"{key[2]} (the dependency model needs it)") from None

    for d in range(job.dp):
        for a, b in edges:
            preds[node(d, b)].append(node(d, a))
    members_of: list[np.ndarray] = []
    for members, across in groups:
        replicas = [list(range(job.dp))] if across else [[d] for d in range(job.dp)]
        for ds in replicas:
            members_of.append(np.array([node(d, key) for d in ds for key in members]))
    rendezvous = []
    for members in members_of:
        waits = sorted({u for v in members for u in preds[v]})
        rendezvous.append(waits)
        for v in members:
            preds[v] = [T + len(rendezvous) - 1]
    preds += rendezvous
    order = _topological(preds)
    return _layout(preds, order, T), members_of


def _layout(preds: list[list[int]], order: np.ndarray, T: int) -> Graph:
    """The nodes in ``order`` as the kernel's arrays: a node waits for at most three others
    (its device's previous op and two producers), so a longer wait becomes a chain of joins
    that take no time."""
    previous, producer, ops = [], [], []
    place = np.empty(len(preds), np.int64)
    for v in order:
        waits = [int(place[u]) for u in preds[v]]
        while len(waits) > 3:  # join the first three, then wait for the join
            previous.append(waits[0])
            producer.append(waits[1:3])
            ops.append(-1)
            waits = [len(previous) - 1, *waits[3:]]
        waits += [-1] * (3 - len(waits))
        previous.append(waits[0])
        producer.append(waits[1:])
        ops.append(int(v) if v < T else -1)
        place[v] = len(previous) - 1
    ops = np.array(ops)
    at = np.empty(T, np.int64)
    at[ops[ops >= 0]] = np.flatnonzero(ops >= 0)
    producer = np.array(producer, np.int64).reshape(-1, 2)
    return Graph(np.array(previous, np.int64), producer, np.full(producer.shape, -1, np.int64),
                 at)


def _topological(preds: list[list[int]]) -> np.ndarray:
    """Kahn's order of the nodes; a cycle is a ScheduleError (the trace's order contradicts
    the dependency model)."""
    N = len(preds)
    waiting = np.array([len(x) for x in preds])
    after: list[list[int]] = [[] for _ in range(N)]
    for v, x in enumerate(preds):
        for u in x:
            after[u].append(v)
    ready = [v for v in range(N) if waiting[v] == 0]
    order = []
    while ready:
        u = ready.pop()
        order.append(u)
        for v in after[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                ready.append(v)
    if len(order) != N:
        raise ScheduleError(f"the op table's dependencies must form no cycle ({N - len(order)} "
                            f"ops wait on each other)")
    return np.array(order, np.int64)


def _transfers(t, members_of: list[np.ndarray], job: MeasuredJob) -> np.ndarray:
    """Per table row: a collective member's transfer time, its end less its group's latest
    start in that step (NaN for computes)."""
    group = np.full(len(job.ops), -1)
    for g, members in enumerate(members_of):
        group[members] = g
    row = job._index.get_indexer(pd.MultiIndex.from_arrays(
        [t.dp_rank, t.stage, t.optype, t.seq_id]))
    g = pd.Series(group[row], index=t.index)
    comm = g >= 0
    latest = t.start_ts.astype(np.float64)[comm].groupby([t.step[comm], g[comm]]).transform("max")
    transfer = pd.Series(np.nan, index=t.index)
    transfer[comm] = t.end_ts[comm] - latest
    # a member that ends before its group's latest start: clock skew between nodes, or the
    # rounding of its end (-1.4e-14 on a send of no time). The artifact counts one below the
    # floor as 0 and keeps one above it negative, which no replay can take: 0 as well
    transfer[transfer < 0] = 0.0
    return transfer.to_numpy()


MeasuredJob.__init__ = known_keywords("MeasuredJob")(MeasuredJob.__init__)
