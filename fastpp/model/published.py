"""Pricing a published training run: where the published tables are (``DATA``), the GPT model
of the dense tables, and one configuration's step time from ``stage_table``, the engine and
``step_terms``. Shared by ``validate`` and its loaders (``validate_small``, ``validate_long``),
which it would otherwise import back."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..checks import ScheduleError
from ..generators.registry import build_schedule, code_of
from ..simulate import simulate
from .config import RunGrid
from .stages import device_parameters, stage_costs, stage_table, step_terms
from .transformer import RECOMPUTE, Transformer, chunk_layers


def _data_folder() -> Path:
    """``$FASTPP_DATA``, or ``shared/data`` beside the repository (or beside its parent, for a
    git worktree one level deeper)."""
    if "FASTPP_DATA" in os.environ:
        return Path(os.environ["FASTPP_DATA"])
    root = Path(__file__).resolve().parents[2]
    near = [up / "shared" / "data" for up in (root.parent, root.parent.parent)]
    return next((x for x in near if x.is_dir()), near[0])


DATA = _data_folder()


def data_file(name: str, data=None) -> Path:
    """The published table ``name`` in the folder ``data`` (default ``DATA``), or a
    ``ScheduleError`` naming the folder, how it is found and the missing file (the one rule
    of the readers below, of ``tests/helpers.needs_data`` and of ``.ci/run``: the file is
    there)."""
    path = Path(DATA if data is None else data) / name
    if not path.is_file():
        raise ScheduleError(f"the published data folder ($FASTPP_DATA, else shared/data beside "
                            f"the repository) must hold {name} (got {path.parent}, without "
                            f"it)")
    return path


def _gpt(row, vocab, *, flash=False, tied=True, dropout=True) -> Transformer:
    return Transformer(int(row["layers"]), int(row["hidden"]), int(row["heads"]),
                       vocab=int(vocab), tied_embeddings=tied, dropout=dropout,
                       flash_attention=flash, name=str(row.get("model", "")))


def step_time(model: Transformer, hardware, schedule, *, seq, microbatch, t=1, d=1,
              sequence_parallel=False, recompute="none", zero=0, gradient_overlap=False,
              layers=None, reduce_bytes=4.0, tp_overlap=False, scatter_gather=False) -> float:
    """Seconds of one training step: the simulated pipeline plus ``step_terms``.

    ``layers`` (one count per virtual stage) defaults to ``chunk_layers``."""
    costs, table = model_costs(model, hardware, schedule, seq=seq, microbatch=microbatch, t=t,
                               d=d, sequence_parallel=sequence_parallel, recompute=recompute,
                               layers=layers, tp_overlap=tp_overlap,
                               scatter_gather=scatter_gather)
    return simulate(schedule, costs).makespan + _extras(
        model, hardware, schedule, table, t, d, zero, gradient_overlap, reduce_bytes)


def model_costs(model, hardware, schedule, *, seq, microbatch, t=1, d=1,
                sequence_parallel=False, recompute="none", layers=None, tp_overlap=False,
                blocking=True, scatter_gather=False):
    """The ``Costs`` of ``schedule`` and the stage table behind them, priced
    as ``transformer_costs`` prices them for ``plan``, Megatron's hand-offs blocking (or, with
    ``blocking=False``, each op's own time, its hand-offs on the chain alone), split over the
    tensor-parallel ranks with ``scatter_gather`` (``RunGrid.scatter_gather``)."""
    V, p = schedule.V, schedule.p
    layers = (chunk_layers(model.layers, V) if layers is None else np.asarray(layers))
    if layers.sum() != model.layers or len(layers) != V:
        raise ScheduleError(f"layers must give {V} stages adding up to {model.layers} (got "
                            f"{layers.tolist()})")
    one = np.zeros(1, np.int64)
    stage = np.arange(V)
    grid = RunGrid(seq=seq, microbatch=one + microbatch, t=one + t, d=one + d, p=one + p,
                   m=one + schedule.m, recompute=one + RECOMPUTE.index(recompute),
                   sequence_parallel=sequence_parallel, tp_overlap=tp_overlap,
                   blocking_handoffs=blocking, scatter_gather=scatter_gather)
    table = stage_table(model, hardware, grid, config=np.zeros(V, np.int64),
                        layers=layers.astype(np.float64), embedding=stage == 0,
                        loss=stage == V - 1, placement=code_of(schedule))
    return stage_costs(table), table


def _extras(model, hardware, schedule, table, t, d, zero, gradient_overlap, reduce_bytes=4.0):
    """``step_terms`` of one configuration: the fullest device's reduction and update."""
    return float(sum(_terms(model, hardware, schedule, table, t, d, zero, gradient_overlap,
                            reduce_bytes).values()))


def _terms(model, hardware, schedule, table, t, d, zero, gradient_overlap, reduce_bytes=4.0):
    """``_extras`` term by term (``step_terms``' names), each the fullest device's."""
    # a tied output layer on its embedding's device shares its weight (plan's count)
    device = schedule.stage_to_device
    stage = np.arange(len(device))
    params = device_parameters(model, device, schedule.p, table["params"],
                               np.zeros(len(device)), stage == 0, stage == len(device) - 1,
                               t)[0]
    tied = model.tied_embeddings and device[0] != device[-1]
    window = np.bincount(schedule.stage_to_device, weights=table["b"] / schedule.m,
                         minlength=schedule.p)
    spans = 1 if t * d * schedule.p > hardware.gpus_per_node else 2
    terms = step_terms(hardware, params.max(), t, d, zero,
                       embedding_params=model.vocab * model.hidden / t if tied else 0.0,
                       embedding_per_node=spans, overlap=gradient_overlap,
                       window=window.min(), reduce_bytes=reduce_bytes,
                       gpus=t * d * schedule.p)
    return {k: float(np.max(v)) for k, v in terms.items()}


def _schedule(name, p, n, m=1):
    if p == 1:
        return build_schedule("1f1b", 1, n)
    return build_schedule(name, p, n, m) if m > 1 else build_schedule(name, p, n)
