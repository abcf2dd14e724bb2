"""The error bar of a prediction: ``validate``'s residuals, grouped by regime.

A prediction of the cost model is as good as the published runs it was checked on that
resemble it. A *regime* is six coarse facts about a configuration (``Regime``): the GPU
generation, the model's size, the sequence length, dense or mixture-of-experts, whether
tensor parallelism stays inside a node, and the training framework the run is on (every
framework is priced as Megatron's, and another stack's runs have measured up to 1.85 times as
long: their bar comes from their own checks, ``validate_torchtitan``). ``validate``'s check
rows (never its calibration rows, whose errors are in-sample, and never rows priced from a
paper's own profiled costs) are grouped by regime; each group's root-mean-square relative
error of the step time is the expected error of every prediction in that regime
(``ErrorBar.expected``; the signed mean is its ``bias``). Throughput rows count as step
times: a throughput predicted ``e`` high is a step time ``1/(1+e) - 1`` low.

A regime with fewer than ``MIN_ROWS`` check rows borrows the groups nearest to it (those
that differ in one fact, then two, ...) until ``MIN_ROWS`` rows pool, on its own framework
where that has checks, else on Megatron's, the stack the cost model prices (a stack's error is
its own: Megatron's bars never take torchtitan's, nor DeepSpeed's).
A configuration whose regime has no check row at all is *extrapolated*:
``ErrorBar.extrapolated`` names each fact that no validated row shares (e.g. ``"seq >64K"``;
or the combination, when each fact was validated apart), and its expected error is the worst
single error among the nearest groups' rows, at least each of those groups' own bar and the
worst error of the checks that share a fact the nearest groups lack (a long sequence, the
experts): outside what was checked, fastpp claims no more than its worst check nearby, nor
less error than the regimes it is made from. So is a run on more GPUs than any checked run
its bar pools (``"scale ..."``): collectives and stragglers at a scale no table measured. A
run on a stack no check ran on (``"framework deepspeed"``) takes at least each other checked
stack's root-mean-square error over all its checks: it may stray from Megatron's price as far
as they do (torchtitan's runs, 28%).

Whether the bars hold beyond the runs they were made from is measured by ``coverage``: each
published dataset left out in turn, its rows against the bars the others give.

The groups are computed by ``regime_table(validate())`` and shipped with the package as
``errorbars.json`` (written by ``python scripts/fidelity.py --errorbars``; a test checks that
the file is what the current model gives), so that pricing a configuration never reruns the
validation.
"""

from __future__ import annotations

import json
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..checks import ScheduleError, instance, known_keywords, one_of, positive_int
from .comm import tensor_parallel_per_node
from .config import FRAMEWORKS
from .hardware import HARDWARE, Hardware, preset
from .presets import MODELS

TABLE = Path(__file__).with_name("errorbars.json")
MIN_ROWS = 3  # fewer check rows than this in a regime: its RMS says too little on its own
FACTS = ("gpu", "size", "seq", "arch", "tp", "framework")
# the datasets whose predictions are not the cost model's as the planner runs it: the paper's
# profiled op times, the layer table the curve is fitted on, and the long-context rows with
# each table's attention speed fitted (their rows at the planner's speed,
# ``validate_long.AS_PLANNED``, give the bars)
NOT_MODEL = ("zero_bubble_table4_profiled", "korthikanti_2022_layer", "long_context_published")
THROUGHPUT = ("tflops_per_gpu", "samples_per_gpu_s", "tokens_per_s_per_gpu")

# the GPU of a regime: that of a preset a published table checks, as the preset is, or with
# only what runs on it or around it changed (``NOT_THE_GPU``: its precision recipe and
# kernels, its network or node size, as vTrain's cluster, ``vtrain_cluster``; its attention
# stack, ``fastpp.model.attention``'s fields beyond a Hardware's). Any other hardware (H200,
# H800, the GB and B300 presets, a GPU of the user's own, a preset with its peak, curve or
# fitted constants changed, ``--efficiency``) is its own regime, extrapolated: its bar is
# borrowed from the nearest regimes at their worst, and it says that no run on it was checked
GENERATIONS = {"A100-80GB": "A100", "H100-80GB": "H100", "B200-180GB": "B200"}
NOT_THE_GPU = ("name", "network", "gpus_per_node", "precision", "fp8_current_scaling",
               "fp8_output_layer", "fp8_padding", "fused_grouped_mlp")
SIZES = ((3e9, "<3B"), (30e9, "3-30B"), (200e9, "30-200B"), (np.inf, ">=200B"))
SEQS = ((8192, "<=8K"), (65536, "8K-64K"), (np.inf, ">64K"))


class Regime(NamedTuple):
    """The six facts a prediction's error bar is looked up by (see the module), and the
    run's ``gpus`` (0: not stated), which no bar is grouped by: a run larger than every
    checked run its bar pools is extrapolated ("scale"). ``framework``, the sixth fact, comes
    after ``gpus``, so that a ``Regime`` made by position before it existed means what it
    did."""

    gpu: str
    size: str
    seq: str
    arch: str
    tp: str
    gpus: int = 0
    framework: str = "megatron"


class ErrorBar(NamedTuple):
    """A prediction's expected relative error of the step time.

    Attributes
    ----------
    expected : float
        The RMS relative error of the check rows behind it (0.05: about 5%).
    bias : float
        Their mean signed error (> 0: the model predicts slower steps than measured).
    rows : int
        How many check rows.
    regime : Regime
        The prediction's regime (``regime``).
    extrapolated : str
        "" inside a validated regime, else the facts no validated row within reach shares,
        ``"; "``-separated.
    """

    expected: float
    bias: float
    rows: int
    regime: Regime
    extrapolated: str


def generation(hardware: Hardware) -> str:
    """``hardware``'s GPU generation (``"A100"``, ``"H100"``, ``"B200"``) if its GPU is that
    of a preset a published table checks (``GENERATIONS``: the preset, or the preset with
    only ``NOT_THE_GPU`` or its attention stack, ``fastpp.model.attention``, changed), else
    its own name, and for a preset's name on another GPU what changed (``"H100-80GB
    (efficiency changed)"``)."""
    if hardware is HARDWARE.get(hardware.name) and hardware.name in GENERATIONS:
        return GENERATIONS[hardware.name]
    for name, gpu in GENERATIONS.items():
        if not _changed(hardware, HARDWARE[name]):
            return gpu
    if hardware.name not in HARDWARE:
        return hardware.name
    changed = _changed(hardware, HARDWARE[hardware.name])
    return f"{hardware.name} ({', '.join(changed)} changed)" if changed else hardware.name


def _changed(hardware: Hardware, preset: Hardware) -> list[str]:
    """The fields of ``preset``'s GPU (not ``NOT_THE_GPU``) that ``hardware`` has otherwise."""
    return [f.name for f in fields(preset) if f.name not in NOT_THE_GPU
            and getattr(hardware, f.name) != getattr(preset, f.name)]


def _bucket(value: float, edges, strict: bool = False) -> str:
    """The label of the first edge ``value`` is at most (below, ``strict``: SIZES' labels
    say "<3B" and ">=200B", SEQS' "<=8K")."""
    return next(label for edge, label in edges if (value < edge if strict else value <= edge))


def regime(model, hardware: Hardware, seq: int, t: int = 1, gpus: int | None = None, *,
           framework: str = "megatron") -> Regime:
    """The regime of ``model`` (a ``Transformer``) on ``hardware`` at sequence ``seq`` and
    tensor-parallel degree ``t`` in a job of ``gpus`` (default: large) on ``framework``
    (``fastpp.model.config.FRAMEWORKS``): tensor parallelism is
    inside a node where its groups are (``comm.tensor_parallel_per_node``: ``t`` divides the
    node, or the job fits in one); a sliding window (or an attention chunk) shorter than
    ``seq`` is an architecture of its own (no published table has one)."""
    model, hardware = preset(MODELS, model, "model"), preset(HARDWARE, hardware, "hardware")
    seq, t = positive_int(seq, "seq"), positive_int(t, "t")
    gpus = None if gpus is None else positive_int(gpus, "gpus")
    one_of(framework, "framework", FRAMEWORKS)
    arch = "moe" if model.moe else "dense"
    if model.sliding_layers and model.window < seq:
        arch += " with chunked attention" if model.chunked else " with a sliding window"
    return Regime(generation(hardware), _bucket(model.parameters, SIZES, strict=True),
                  _bucket(seq, SEQS), arch,
                  "in node" if int(tensor_parallel_per_node(hardware, t, gpus)) == t
                  else "across nodes", 0 if gpus is None else int(gpus), framework)


def step_error(error: np.ndarray, quantity) -> np.ndarray:
    """Relative errors of a published quantity as relative errors of the step time."""
    error = np.asarray(error, np.float64)
    rate = np.isin(np.asarray(quantity, object), THROUGHPUT)
    return np.where(rate, 1.0 / (1.0 + error) - 1.0, error)


def regime_table(frame) -> list[dict]:
    """Per regime of ``validate()``'s check rows of the cost model: ``rows``, ``rms``,
    ``bias`` and ``worst`` (the largest absolute; relative step-time errors), ``largest``
    (the most GPUs a row ran on) and the datasets behind them; sorted by regime."""
    part = frame[(frame["role"] == "check") & ~frame["dataset"].isin(NOT_MODEL)]
    errors = step_error(part["error"].to_numpy(), part["quantity"].to_numpy())
    out = []
    for key, idx in part.groupby(list(FACTS), sort=True).indices.items():
        e = errors[idx]
        out.append({**dict(zip(FACTS, key, strict=True)), "rows": int(len(e)),
                    "rms": round(float(np.sqrt(np.mean(e * e))), 4),
                    "bias": round(float(np.mean(e)), 4),
                    "worst": round(float(np.max(np.abs(e))), 4),
                    "largest": int(part["gpus"].iloc[idx].max()),
                    "datasets": sorted(set(part["dataset"].iloc[idx]))})
    return out


def coverage(frame) -> list[dict]:
    """How often the error bars hold on published runs they were not made from.

    Each dataset of ``validate()``'s check rows is left out in turn: its rows get the bars
    (``error_bar``) of ``regime_table`` over every other dataset's, as a user's new run would.
    A bar is a root-mean-square error, so an unbiased normal error falls within it 68% of the
    time and within twice it 95%.

    Parameters
    ----------
    frame : pandas.DataFrame
        ``fastpp.model.validate.validate()``'s rows.

    Returns
    -------
    list of dict
        Empty with fewer than two datasets of check rows (rows without a finite error are
        left out). Per dataset, then ``"all"`` (every row pooled): ``rows``; ``within_bar`` and
        ``within_two_bars``, the shares of rows whose relative step-time error is within one
        and two of their bars; ``extrapolated``, the share whose regime no other dataset
        validates; ``within_bar_in_regime`` and ``within_two_bars_in_regime``, the same
        shares over the rows not extrapolated (NaN where every row is: an extrapolated bar
        is the worst error of the checks nearest it, wider than a one-sigma bar, so the
        shares over all rows mix two kinds of bar); ``rms``, their errors' root mean square,
        and ``bar``, their bars' mean;
        ``mean_error``, their signed errors' mean, ``bias``, their bars' biases' mean (the
        other datasets' lean), and ``rms_corrected``, the root mean square of their errors
        had each prediction been divided by ``1 + bias`` of its bar (what a correction by
        the bias would have left).
    """
    part = frame[(frame["role"] == "check") & ~frame["dataset"].isin(NOT_MODEL)
                 & np.isfinite(frame["error"])]  # (a row without a prediction judges nothing)
    if part["dataset"].nunique() < 2:  # one dataset has no others to be judged by
        return []
    frame = frame[np.isfinite(frame["error"])]
    signed = step_error(part["error"].to_numpy(), part["quantity"].to_numpy())
    errors = np.abs(signed)
    names = part["dataset"].to_numpy()
    where = [Regime(*key) for key in part[list(Regime._fields)].itertuples(index=False)]
    bars, biases = np.empty(errors.size), np.empty(errors.size)
    outside = np.empty(errors.size, bool)
    for name in sorted(set(names)):
        groups = regime_table(frame[frame["dataset"] != name])
        for q in np.flatnonzero(names == name):
            bar = error_bar(where[q], groups)
            bars[q], biases[q], outside[q] = bar.expected, bar.bias, bar.extrapolated != ""
    out = []
    for name in [*sorted(set(names)), "all"]:
        mine = slice(None) if name == "all" else names == name
        e, b = errors[mine], bars[mine]
        inside = ~outside[mine]
        out.append({"dataset": name, "rows": int(e.size),
                    "within_bar": round(float(np.mean(e <= b)), 4),
                    "within_two_bars": round(float(np.mean(e <= 2 * b)), 4),
                    "extrapolated": round(float(np.mean(outside[mine])), 4),
                    **{f"within_{k}_in_regime": round(float(np.mean(
                        e[inside] <= n * b[inside])), 4) if inside.any() else np.nan
                       for k, n in (("bar", 1), ("two_bars", 2))},
                    "rms": round(float(np.sqrt(np.mean(e * e))), 4),
                    "bar": round(float(np.mean(b)), 4),
                    "mean_error": round(float(np.mean(signed[mine])), 4),
                    "bias": round(float(np.mean(biases[mine])), 4),
                    "rms_corrected": round(float(np.sqrt(np.mean(
                        ((1 + signed[mine]) / (1 + biases[mine]) - 1) ** 2))), 4)})
    return out


@cache
def _groups() -> tuple[dict, ...]:
    return tuple(json.loads(TABLE.read_text())["regimes"])


def error_bar(where: Regime, groups=None) -> ErrorBar:
    """The ``ErrorBar`` of a prediction in regime ``where`` (see the module for the rule).

    ``groups`` defaults to the shipped table (``regime_table``'s rows)."""
    instance(where, Regime, "where", "Regime (fastpp.model.errorbar.regime)")
    one_of(where.framework, "where.framework", FRAMEWORKS)
    groups = _groups() if groups is None else tuple(groups)
    need = {*FACTS, "rows", "rms", "bias", "worst"}
    lacking = [sorted(need - set(g)) for g in groups if not isinstance(g, dict) or need - set(g)]
    if lacking:
        raise ScheduleError(f"groups must be regime_table's rows, each with {sorted(need)} "
                            f"(got one without {lacking[0]})")
    if not groups:
        return ErrorBar(np.nan, np.nan, 0, where, "no validated regime at all")
    # another stack's checks say nothing of where this one's errors lie (torchtitan's runs
    # took up to 1.85 times Megatron's price): a checked framework's bars pool its own groups
    # alone, and an unchecked one's Megatron's, the stack the cost model prices (widened
    # below by how far the checked stacks stray)
    every = groups
    groups = (tuple(g for g in groups if g["framework"] == where.framework)
              or tuple(g for g in groups if g["framework"] == "megatron") or groups)
    facts = tuple(getattr(where, f) for f in FACTS)
    differ = np.array([sum(g[f] != v for f, v in zip(FACTS, facts, strict=True))
                       for g in groups])
    rows = np.array([g["rows"] for g in groups])
    # the nearest groups that hold MIN_ROWS check rows between them (or all of them)
    k = next((k for k in range(len(FACTS) + 1) if rows[differ <= k].sum() >= MIN_ROWS),
             len(FACTS))
    near = differ <= k
    bias = np.array([g["bias"] for g in groups])
    mean = float(np.sum(bias[near] * rows[near]) / rows[near].sum())
    pooled = [g for g, taken in zip(groups, near, strict=True) if taken]
    expected = _pooled_rms(pooled)
    missing = []
    if not (differ == 0).any():
        unseen = [f"{f} {v}" for f, v in zip(FACTS, facts, strict=True)
                  if all(g[f] != v for g in groups)]
        missing.append("; ".join(unseen) if unseen else (
            "the combination " + ", ".join(facts) + " (each fact validated apart)"))
    largest = max(g.get("largest", 0) for g in pooled)
    if where.gpus > largest > 0:
        missing.append(f"scale {where.gpus:,} GPUs (the largest checked run of its bar: "
                       f"{largest:,})")
    if not missing:
        return ErrorBar(round(expected, 4), round(mean, 4), int(rows[near].sum()), where, "")
    # no narrower than the bar of a regime it is made from (a nearby group's own, pooled as
    # that regime pools), nor than the worst check of a fact the nearest groups lack (the
    # long-context rows for a long sequence on another GPU, the MoE rows for experts): until
    # 7 December 2026 Llama 3 70B at 128K on A100 took the 3.9% of its 4K checks, where every
    # long-context check on H100 erred 30-44% (a review)
    worst = max(g["worst"] for g in pooled)
    own = max(error_bar(Regime(**{f: g[f] for f in FACTS}, gpus=0), groups).expected
              for g in pooled)
    lacked = [g["worst"] for f, v in zip(FACTS, facts, strict=True)
              if all(p[f] != v for p in pooled) for g in groups if g[f] == v]
    # a stack no check ran on may stray from Megatron's price as far as the stacks that were
    # checked stray: each one's RMS over all its checks (DeepSpeed's runs of MT-NLG and BLOOM
    # had taken Megatron's 3.9-5.2% A100 bars and erred 18-33%, an out-of-sample review)
    stacks = [] if where.framework in {g["framework"] for g in every} else [
        _pooled_rms([g for g in every if g["framework"] == f])
        for f in sorted({g["framework"] for g in every} - {"megatron"})]
    return ErrorBar(round(max(expected, worst, own, *lacked, *stacks), 4), round(mean, 4),
                    int(rows[near].sum()), where, "; ".join(missing))


def _pooled_rms(groups) -> float:
    """The root mean square of the check rows of ``groups`` (``regime_table``'s), pooled."""
    rows = np.array([g["rows"] for g in groups], np.float64)
    rms = np.array([g["rms"] for g in groups], np.float64)
    return float(np.sqrt(np.sum(rms**2 * rows) / rows.sum()))


ErrorBar.__new__ = known_keywords("ErrorBar")(ErrorBar.__new__)
