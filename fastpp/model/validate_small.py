"""Small models on one node: ``vtrain_single_node_a.csv`` (``fastpp.model.validate``).

Half of the single-node ground truth published with vTrain (Bang et al., MICRO 2024): 746
measured iteration times of Megatron GPT models on one DGX A100 (1-8 GPUs, hidden 1024 or
2048, 12-24 layers, 16 heads, sequence 1024, full activation recomputation, 1F1B). What vTrain
ran where the file is silent (its configuration class, ``src/config.py``, and its validation
configurations): GPT-2's vocabulary of 50,257 padded by Megatron to a multiple of ``128 t``;
tied embeddings, dropout, the unfused attention (no FlashAttention); the gradient all-reduce
after the last backward, not overlapped (``use_gradient_bucket`` false); fp16 training, its
gradients all-reduced in fp16 (assumed, as for Narayanan et al.). The microbatch is the file's.

Small models are bound by fixed costs: kernel launches, the framework's time on the CPU and the
collectives' latencies are much of the step. The split is by row parity in the file's order:
the even rows (first, third, ...) calibrate the launch and host constants of the A100 preset
(``calibrate_overheads``), the odd rows check them.
"""

from __future__ import annotations

import re

import numpy as np

from ..checks import MAX_INT, ScheduleError, file_path, require
from .errorbar import regime
from .megatron import padded_vocab
from .vtrain import GPT2_VOCAB, vtrain_cluster

VTRAIN = "vtrain_single_node_a"
MIN_TIME_MS = 1e-3  # no iteration takes less than a microsecond
COLUMNS = ["gpus", "global_batch", "microbatch", "hidden", "heads", "layers", "seq", "t", "d",
           "p", "iteration_ms"]
# each column's header in the published file, and its short name, as _letters spells them
HEADERS = ["# GPUs", "global batch", "micro batch", "hidden size", "attention heads",
           "# layers", "sequence length", "tensor parallelism", "data parallelism",
           "pipeline parallelism", "iteration time (ms)"]


def _letters(name) -> str:
    """A header's letters in lower case: '# GPUs' and 'gpus' alike."""
    return "".join(c for c in str(name).lower() if c.isalpha())


NAMES = {_letters(k): v for k, v in zip(HEADERS + COLUMNS, COLUMNS + COLUMNS, strict=True)}


def _number(text: str) -> bool:
    """Whether a header is a number: the first row of a file without a header."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def vtrain_frame(data, path=None):
    """The file (or another table in its format at ``path``) as a frame with short column
    names and each row's ``role`` (row parity)."""
    pd = require("pandas", "sweep", "fastpp.model.validate")

    from .published import data_file

    where = data_file(f"{VTRAIN}.csv", data) if path is None else path
    try:
        df = pd.read_csv(where)
    except (OSError, ValueError) as err:  # (pandas' parser errors, a bad encoding, a NUL)
        raise ScheduleError(f"a vTrain table must be a readable CSV (got {where}: "
                            f"{err})") from None
    if not isinstance(df.index, pd.RangeIndex):  # pandas moves a longer row's extra field in
        raise ScheduleError(f"{where}: a vTrain table's rows must have as many fields as its "
                            f"header ({len(df.columns)}; a row has more)")
    if len(df.columns) != len(COLUMNS):
        raise ScheduleError(f"a vTrain table must have the {len(COLUMNS)} columns of "
                            f"{VTRAIN}.csv ({', '.join(COLUMNS)}; got {len(df.columns)})")
    # by name, in any order, where every header is one of the file's (or a short name): a
    # table whose columns were moved is read as they are labelled. A header worded otherwise
    # leaves the table in the file's order, which each header it does name must then keep;
    # the time alone must be named, its unit with it
    given = [re.sub(r"\.\d+$", "", str(name)) for name in df.columns]  # pandas' "x.1": x
    names = [NAMES.get(_letters(name)) for name in df.columns]
    if all(map(_number, given)) or (not any(names) and any(map(_number, given))):
        raise ScheduleError(f"{where}: a vTrain table must open with a header row (got "
                            f"{', '.join(given)})")
    if df.empty:
        raise ScheduleError(f"{where}: a vTrain table must have a row below its header (got "
                            f"none)")
    known = None not in names and len(set(names)) == len(names)
    for k, (name, short) in enumerate(zip(given, names, strict=True)):
        if not known and short not in (None, COLUMNS[k]):
            raise ScheduleError(f"{where}: a vTrain table's columns must be named as "
                                f"{VTRAIN}.csv's ({', '.join(HEADERS)}; or {', '.join(COLUMNS)}), "
                                f"each once, or keep its order (got {name!r} as column {k + 1})")
    if "iteration_ms" not in names:
        raise ScheduleError(f"{where}: a vTrain table's time must be named 'iteration time "
                            f"(ms)' or 'iteration_ms', in milliseconds (got {given[-1]!r})")
    df = df.set_axis(names if known else COLUMNS, axis=1)[COLUMNS]
    _check_table(df, where)
    df[COLUMNS[:-1]] = df[COLUMNS[:-1]].astype(np.int64)
    df["role"] = np.where(np.arange(len(df)) % 2 == 0, "calibration", "check")
    return df


def _check_table(df, where) -> None:
    """Every count a positive integer, every time positive, and the degrees and batch as a
    run has them (as ``from_vtrain`` reads a run); else a ScheduleError naming the column and
    the row."""
    pd = require("pandas", "sweep", "fastpp.model.validate")
    values = df.apply(pd.to_numeric, errors="coerce")  # text and empty cells: NaN
    for column in COLUMNS:
        x = values[column].to_numpy(np.float64)
        if column == "iteration_ms":  # (a time of 1e-320 ms gave an infinite error)
            bad = ~(np.isfinite(x) & (x >= MIN_TIME_MS))
            must = f"a time of at least {MIN_TIME_MS} ms (a microsecond)"
        else:  # (int64 would wrap a larger count around)
            bad = ~(np.isfinite(x) & (x > 0) & (x < MAX_INT)) | (np.isfinite(x)
                                                                 & (x != np.round(x)))
            must = "a positive integer below 2**31"
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            cell = df[column].iloc[row]
            cell = cell.item() if hasattr(cell, "item") else cell  # (numpy's scalar as Python's)
            raise ScheduleError(f"{where}: {column} must be {must} (got {cell!r} in row "
                                f"{row + 1})")
    for row, (gpus, t, d, p, batch, b, heads, layers) in enumerate(zip(*(
            values[k].astype(np.int64) for k in ("gpus", "t", "d", "p", "global_batch",
                                                 "microbatch", "heads", "layers")), strict=True)):
        if gpus != t * d * p:
            raise ScheduleError(f"{where}: gpus must be t * d * p = {t * d * p} (got {gpus} "
                                f"in row {row + 1})")
        if batch % (b * d):
            raise ScheduleError(f"{where}: global_batch must be a multiple of microbatch * d "
                                f"= {b * d} (got {batch} in row {row + 1})")
        for column, count, degree, of in (("heads", heads, t, "t"), ("layers", layers, p, "p")):
            if count % degree:
                raise ScheduleError(f"{where}: {column} must be a multiple of {of} = {degree} "
                                    f"(got {count} in row {row + 1})")


def row_label(i: int, r) -> str:
    """A row's name: its index in the file and its configuration."""
    return (f"#{i} h{r['hidden']} L{r['layers']} t{r['t']} d{r['d']} p{r['p']} "
            f"B{r['global_batch']} b{r['microbatch']}")


def vtrain_roles(data) -> dict:
    """``validate``'s role of each row fitted on: ``{(dataset, row, quantity): role}``
    (none without the file)."""
    if not (data / f"{VTRAIN}.csv").exists():
        return {}
    frame = vtrain_frame(data)
    return {(VTRAIN, row_label(i, r), "iteration_ms"): "calibration"
            for i, r in enumerate(frame.to_dict("records")) if r["role"] == "calibration"}


def vtrain_rows(hw, data, which=None, path=None):
    """``validate`` rows (dataset, row, quantity, measured, predicted, regime) of the file's
    ``which`` rows (``"calibration"``, ``"check"`` or all), iteration times in ms; ``path``:
    another table in its format (``vtrain_table``)."""
    from .published import _gpt, _schedule, step_time

    rows = []
    for i, r in enumerate(vtrain_frame(data, path).to_dict("records")):
        if which is not None and r["role"] != which:
            continue
        t, d, p, b = (int(r[k]) for k in ("t", "d", "p", "microbatch"))
        model = _gpt(r, padded_vocab(GPT2_VOCAB, t))
        n = int(r["global_batch"]) // (d * b)
        step = step_time(model, hw, _schedule("1f1b", p, n), seq=int(r["seq"]), microbatch=b,
                         t=t, d=d, recompute="full", reduce_bytes=2.0)
        rows.append((VTRAIN, row_label(i, r), "iteration_ms", float(r["iteration_ms"]),
                     1e3 * step, regime(model, hw, int(r["seq"]), t, int(r["gpus"]))))
    return rows


def vtrain_table(path, hardware=None):
    """Every row of a table in ``vtrain_single_node_a.csv``'s format (vTrain's published
    measurements: its other single-node half, its multi-node set), priced as ``validate``
    prices that file, on vTrain's cluster (``fastpp.model.vtrain_cluster``: its 800 Gb/s a
    node over 8 GPUs) unless ``hardware`` is given. Nothing is fitted on it: every row is a
    check of the constants fitted on the even rows of the file.

    Parameters
    ----------
    path : str or os.PathLike
        The table: a CSV with that file's eleven columns under a header row, named as there
        (or by ``COLUMNS``' short names) in any order, or in that file's order where a header
        is worded otherwise; the time is named, in milliseconds.
    hardware : Hardware, optional

    Returns
    -------
    pandas.DataFrame
        The table's columns (short names, ``COLUMNS``), ``predicted_ms`` and ``error``
        (predicted over measured, less 1).
    """
    hardware = vtrain_cluster() if hardware is None else hardware
    path = file_path(path, "path")
    frame = vtrain_frame(None, path).drop(columns="role")
    frame["predicted_ms"] = [row[4] for row in vtrain_rows(hardware, None, path=path)]
    frame["error"] = frame["predicted_ms"] / frame["iteration_ms"] - 1.0
    return frame


# calibrate_overheads' grid per constant, in seconds
OVERHEAD_GRID = {
    "host_layer": tuple(x * 1e-6 for x in range(0, 2001, 50)),
    "host_backward": tuple(x * 1e-6 for x in range(0, 2001, 50)),
    "host_microbatch": tuple(x * 1e-3 for x in np.arange(0, 10.01, 0.25)),
    "host_step": tuple(x * 1e-3 for x in range(0, 41)),
    "host_op": tuple(x * 1e-6 for x in range(0, 401, 10)),
    "handoff": (0.0,),  # not fitted: see the A100 preset (hardware.A100_OVERHEADS)
}
HOST_FREE = dict.fromkeys(OVERHEAD_GRID, 0.0)
# where the A100 preset's descent starts: its previous fit (itself the descent's from a
# Nelder-Mead optimum of the same mean error; from zero the descent stops at a fixed point 0.2
# point worse), made while p = 1 rows counted a tied embedding twice in the optimizer step and
# the gradient reduction; from it the descent moved host_step alone, 2 -> 3 ms, and since
# Megatron's loss is priced as its code runs it, it is the descent's fixed point (host_step
# 2 ms again: the preset's)
VTRAIN_START = {"host_layer": 1.65e-3, "host_backward": 0.05e-3, "host_microbatch": 3.0e-3,
                "host_step": 2.0e-3, "host_op": 0.12e-3, "handoff": 0.0}


def gpu_parts(hardware, data, which="calibration"):
    """Per row of ``which``: what the fixed costs leave alone, priced once (the hardware
    without them): the schedule, the GPU's forward and backward per stage, the weight
    gradients, the hand-offs (``comm``, bandwidth, bytes, the time a blocking op holds),
    layers per stage, the step's other terms, the measured ms, the ops a layer issues beyond
    the fused layer's (``eager_ops``)."""
    import dataclasses

    from .compute import eager_ops
    from .published import _extras, _gpt, _schedule, model_costs
    from .transformer import chunk_layers

    hw = dataclasses.replace(hardware, **HOST_FREE)
    parts = []
    for r in vtrain_frame(data).to_dict("records"):
        if r["role"] != which:
            continue
        t, d, p, b = (int(r[k]) for k in ("t", "d", "p", "microbatch"))
        model = _gpt(r, padded_vocab(GPT2_VOCAB, t))
        sched = _schedule("1f1b", p, int(r["global_batch"]) // (d * b))
        costs, table = model_costs(model, hw, sched, seq=int(r["seq"]), microbatch=b, t=t,
                                   d=d, recompute="full")
        held = np.where(p > 1, table["comm"] + table["message_bytes"] / table["bandwidth"],
                        0.0)
        extra = _extras(model, hw, sched, table, t, d, 0, False, 2.0)
        ends = np.isin(np.arange(p), [0, p - 1])
        parts.append((sched, table["f"] - held, table["b"] - held, table["w"], table,
                      held, chunk_layers(model.layers, p), ends, extra,
                      float(r["iteration_ms"]), float(eager_ops(model, int(r["seq"]), b, t))))
    return parts


def fast_error(parts, host_layer, host_backward, host_microbatch, host_step, host_op,
               handoff) -> float:
    """Mean absolute error of ``gpu_parts`` rows under these fixed costs: each stage's pass
    the longer of its GPU and CPU times (full recomputation; ``host_op`` per eager op, issued
    in the forward, its recomputation and its backward), each blocking op ``handoff`` longer,
    ``host_step`` per iteration; ``vtrain_rows`` prices the same (a test checks)."""
    from ..costs import Costs
    from ..simulate import simulate

    errors = []
    for (sched, forward, backward, weight, table, held, layers, ends, extra, measured,
         ops) in parts:
        more = np.where(held > 0, handoff, 0.0)
        layer = host_layer + ops * host_op
        f = np.maximum(forward, layers * layer + ends * host_microbatch) + held + more
        b = np.maximum(backward, layers * (host_backward + ops * host_op + layer)) + held + more
        costs = Costs(f=f, b=b, w=weight, gamma=table["gamma"], act=table["act"],
                      comm=table["comm"], bandwidth=table["bandwidth"],
                      message_bytes=table["message_bytes"])
        step = simulate(sched, costs).makespan + extra + host_step
        errors.append(abs(1e3 * step / measured - 1.0))
    return float(np.mean(errors))


def calibrate_overheads(hardware, data, grid=None, rounds: int = 10, start=None,
                        progress=None) -> dict:
    """Fit the fixed costs (``Hardware.host_layer``, ``host_backward``, ``host_microbatch``,
    ``host_step``, ``host_op``; ``handoff`` on a grid of its own) on the calibration rows
    (even rows) of ``vtrain_single_node_a.csv``: coordinate descent over ``grid`` (default
    ``OVERHEAD_GRID``) from ``start`` (default zero), each constant in turn set to its grid
    value of least mean absolute error, until a pass changes nothing (at most ``rounds``
    passes). The A100 preset holds the result from ``VTRAIN_START``
    (``python scripts/fidelity.py --calibrate-overheads``); ``progress(name, best, error)``,
    if given, is called as each constant is set."""
    grid = OVERHEAD_GRID if grid is None else grid
    parts = gpu_parts(hardware, data)
    best = {k: 0.0 for k in grid} | ({} if start is None else
                                     {k: v for k, v in start.items() if k in grid})
    for _ in range(rounds):
        before = dict(best)
        for name, values in grid.items():
            error, best[name] = min((fast_error(parts, **(best | {name: v})), v)
                                    for v in values)
            if progress is not None:
                progress(name, dict(best), error)
        if best == before:
            break
    return {k: round(float(v), 7) for k, v in best.items()}


MiB = 2**20
NCCL_RING_HOPS = (0.47e-6, 1.9e-6, 3.4e-6)  # NCCL's NVLink ring latency per step, per protocol
# NCCL's NVLink ring LL hop from 2.18 on (src/graph/tuning.cc's hwLat: 0.6 us in 2.18.1 through
# 2.30.7, 0.47 us before): NVLink4's table ran 2.30.7 (NVLink3's does not print its NCCL)
NCCL_LL_HOP = 0.6e-6
# the sizes where NCCL picks each protocol, with its hop: on NVLink3 (A100) LL, LL128 and
# Simple rings; on NVLink4 (H100, H200; NCCL 2.27-2.30) an LL ring up to 1 MiB, then NVLink
# SHARP, an in-switch reduction whose latency does not grow with a ring's steps
NVLINK3_RANGES = tuple(zip(NCCL_RING_HOPS, ((0, MiB), (2 * MiB, 4 * MiB), (8 * MiB, 16 * MiB)),
                           strict=True))
NVLINK4_RANGES = ((NCCL_LL_HOP, (0, MiB)), (0.0, (2 * MiB, 16 * MiB)))


def fit_protocols(size, seconds, ranks: int = 8, ranges=NVLINK3_RANGES) -> tuple:
    """NCCL's protocols ``(base, hop, bandwidth)`` (``Link.protocols``) from measured ring
    all-reduce times (``size`` bytes, ``seconds``) over ``ranks`` ranks of one node: per
    ``(hop, (low, high))`` of ``ranges``, the hop given and the base and bandwidth by
    relative least squares on the sizes from ``low`` to ``high``, where NCCL picks it."""
    size, seconds = np.asarray(size, np.float64), np.asarray(seconds, np.float64)
    steps, fraction = 2.0 * (ranks - 1), 2.0 * (ranks - 1) / ranks
    out = []
    for hop, (low, high) in ranges:
        mine = (size >= low) & (size <= high)
        weight = 1.0 / seconds[mine]
        design = np.c_[np.ones(mine.sum()), fraction * size[mine]] * weight[:, None]
        (fixed, slope), *_ = np.linalg.lstsq(design, seconds[mine] * weight, rcond=None)
        out.append((float(fixed - steps * hop), hop, float(1.0 / slope)))
    return tuple(out)
