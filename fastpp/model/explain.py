"""``explain``: one run's prediction, what its step is made of, and faster runs near it.

The run is priced by ``plan`` (``config=``): one exact pipeline timeline plus the step's
terms outside it. The neighbours are ``plan``'s rows over the same GPUs, global batch and
sequence that fit and are faster (that fit, where the run does not), fewest changes first
(the flags or fields written, the data-parallel degree that follows from them none), each
written as what the run was given in (Megatron's flags, a torchtitan job's keys, a vTrain or
llm-foundry file's keys, fastpp's own run flags; else the fields) to change; rows without a
pipeline that are one run under several schedules' names once.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass

import numpy as np

from ..checks import ScheduleError, known_keywords, nonnegative_int, one_of, require
from .config import ZERO3_GATHERS, RunConfig, as_run
from .foundry import run_keys as foundry_keys
from .hardware import HARDWARE, preset
from .megatron import SCHEDULES as MEGATRON_SCHEDULES
from .megatron import to_megatron
from .memorybar import unmeasured
from .plan import alike_key, bar_text, plan
from .presets import MODELS
from .pricing import _chunks
from .stages import recomputed_layers
from .torchtitan import NAMES as TORCHTITAN_NAMES
from .torchtitan import SINGLE_STAGE, from_torchtitan, read_toml, split_layout, to_torchtitan
from .vtrain import run_keys, to_vtrain

# the choices a neighbour may change, each a plan axis; the rest stay as the run has them
CHANGED = ("t", "p", "m", "schedule", "microbatch", "recompute", "zero")
# how explain runs and writes the neighbours
FLAGS = ("megatron", "vtrain", "composer", "torchtitan", "cli")
# the fields a torchtitan job read back must share with the neighbour it was written for
SAME = ("t", "p", "d", "cp", "ep", "etp", "m", "schedule", "microbatch", "recompute", "zero",
        "zero3", "global_batch", "seq", "layout", "recompute_method", "recompute_layers",
        "precision", "replicate", "overlap", "sequence_parallel")
# fastpp's own run flags (``python -m fastpp explain --hf``) for the fields a neighbour changes
CLI_FLAGS = {"t": "--tp", "p": "--pp", "m": "--m", "schedule": "--schedule",
             "microbatch": "--microbatch", "recompute": "--recompute", "zero": "--zero"}
PARTS = ("parameter_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes")


@dataclass(frozen=True)
class Explanation:
    """``row``: the run's plan row (``PLAN_COLUMNS``); ``recompute_tflops_per_gpu``: the
    hardware's FLOP/s with a full recomputation's extra forward counted (Narayanan 2021's
    count); ``neighbours``: faster configurations that fit (any that fit, where the run does
    not), each a plan row with ``changes`` (the flags or fields to change) and ``changed``
    (how many are written); None when none were asked for."""

    model: object
    config: RunConfig
    hardware: object
    row: dict
    recompute_tflops_per_gpu: float
    neighbours: list

    def table(self) -> str:
        """The terminal table: the prediction with its error bar (``fastpp.model.errorbar``),
        the step's parts, memory per GPU by part and the faster neighbours."""
        r, gb = self.row, 1e9
        step = r["step_time"]
        bubble = r["makespan"] * r["bubble_ratio"]
        lines = [f"{self.model.name} ({self.model.parameters / 1e9:.3g}B parameters) on "
                 f"{self.config.gpus} x {self.hardware.name}: t={r['t']} "
                 f"cp={r['cp']} p={r['p']} d={r['d']} ep={r['ep']} {r['schedule']} m={r['m']} "
                 f"microbatch={r['microbatch']} n={r['n']} recompute={r['recompute']} "
                 f"zero={r['zero']} {r['precision']} seq={self.config.seq} "
                 f"global_batch={self.config.global_batch}"
                 + (f" recipe={self.config.recipe}" if self.config.recipe else ""), "",
                 f"  step time          {step:10.3f} s   ± {r['expected_error']:.1%} expected "
                 f"error" + (f" (extrapolated: no validated run shares {r['extrapolated']})"
                             if r["extrapolated"] else " (validate's checks in its regime, "
                             "pooled with the nearest where thin)"),
                 f"{'':36}{_direction(r['expected_bias'])}",
                 f"  tokens/s           {r['tokens_per_s']:10.0f}",
                 f"  TFLOP/s per GPU    {r['tflops_per_gpu']:10.1f}   (Megatron's count; "
                 f"{self.recompute_tflops_per_gpu:.1f} with recomputation)",
                 f"  MFU                {r['mfu']:10.1%}   (PaLM's count: the attention core "
                 f"unhalved)",
                 f"  bubble             {r['bubble_ratio']:10.1%}   (of the pipeline's "
                 f"makespan)", "",
                 "  where the step goes",
                 f"    pipeline compute {r['makespan'] - bubble:10.3f} s "
                 f"{(r['makespan'] - bubble) / step:6.1%}",
                 f"    pipeline bubble  {bubble:10.3f} s {bubble / step:6.1%}",
                 f"    gradient sync    {r['gradient_sync']:10.3f} s "
                 f"{r['gradient_sync'] / step:6.1%}   (exposed)",
                 f"    optimizer step   {r['optimizer_step']:10.3f} s "
                 f"{r['optimizer_step'] / step:6.1%}", "",
                 "  memory per GPU (the fullest)"]
        lines += [f"    {k.replace('_', ' '):<18} {r[k] / gb:8.1f} GB" for k in PARTS]
        lines += [f"    {'total':<18} {r['peak_memory'] / gb:8.1f} GB of "
                  f"{self.hardware.memory_bytes / gb:.0f}"
                  + ("" if r["fits"] else f"   DOES NOT FIT: {r['reason']}"),
                  f"    {_memory_bar(r['expected_memory_error'], self.model, self.config)}",
                  ""]
        if self.neighbours is None:  # not searched
            pass
        elif not self.neighbours:
            lines.append("  no faster configuration that fits nearby" if r["fits"] else
                         "  no configuration that fits nearby")
        else:
            lines.append("  faster and fits (fewest changes first)" if r["fits"] else
                         "  fits, where this run does not (fewest changes first)")
            own = bar_text(r["expected_error"], r["extrapolated"])
            for n in self.neighbours:
                # its step time's bar where it is not the run's (another t: another regime)
                bar = bar_text(n["expected_error"], n["extrapolated"])
                shown = f"  (error {bar}: another regime)" if bar != own else ""
                lines.append(f"    {n['step_time']:8.3f} s  {step / n['step_time']:5.2f}x  "
                             f"{n['peak_memory'] / gb:5.1f} GB  {n['changes']}{shown}")
        return "\n".join(lines)

    def timeline(self, max_columns: int = 120) -> str:
        """The run's pipeline timeline as text (``Result.grid``): each device's ops by time,
        bubbles as dots."""
        from .. import simulate
        from .pricing import transformer_costs

        costs = transformer_costs(self.model, hardware=self.hardware, config=self.config)
        return simulate(self.config.build_schedule(), costs).grid(max_columns, unit="s")


@known_keywords("explain")
def explain(model, config: RunConfig, hardware="H100-80GB", *, neighbours: int = 5,
            workers: int | None = None, flags: str = "megatron", job=None) -> Explanation:
    """The prediction of one run and the nearest faster runs that fit (where it does not
    fit, the nearest that fit).

    Parameters
    ----------
    model : Transformer or str
    config : RunConfig
    hardware : Hardware or str
    neighbours : int
        How many configurations to list (0: none, no search).
    workers : int, optional
        ``plan``'s threads.
    flags : {"megatron", "vtrain", "composer", "torchtitan", "cli"}
        How the neighbours are run and written: Megatron-LM's runs as its flags (fields
        where its flags cannot state the run), vTrain's (1F1B, ZeRO-0, full or no
        recomputation; the run itself one vTrain runs, ``to_vtrain``) as the keys of its
        configuration that change, llm-foundry's (FSDP alone as ZeRO 0, 2 or 3, full or
        no recomputation; the run one it states, ``fastpp.model.foundry.run_keys``) as the
        keys of its YAML that change, torchtitan's (its schedules, as ``from_torchtitan``
        reads them; fields where ``to_torchtitan`` cannot write the run) as the keys of
        ``job`` to change (``section.key=value``, ``no section.key``), each neighbour read
        back from ``job`` so changed and priced as read, or any run of fastpp's as the run
        flags of ``python -m fastpp explain --hf`` (``--tp 2``, with ``--global-batch``
        where the neighbour's default would move it). Neighbours keep the run's vocabulary,
        which Megatron would pad again for another ``t`` (a few hundred words: up to 5e-4
        of a step).
    job : path, TOML text or dict, optional
        With ``flags="torchtitan"``: the job config the run was read from (default: the
        one ``to_torchtitan`` writes for it).

    Returns
    -------
    Explanation
        ``.table()`` for the terminal.
    """
    model = preset(MODELS, model, "model")
    hardware = preset(HARDWARE, hardware, "hardware")
    config = as_run(config)
    count = nonnegative_int(neighbours, "neighbours")
    one_of(flags, "flags", FLAGS)
    if job is not None and flags != "torchtitan":
        raise ScheduleError(f"job is the torchtitan job the run was read from: it needs "
                            f"flags='torchtitan' (got flags={flags!r})")
    if flags == "vtrain":  # a run vTrain runs, or the ScheduleError naming what it cannot
        to_vtrain(config, model, hardware)
    elif flags == "composer":  # likewise, a run llm-foundry's YAML states
        foundry_keys(config)
    # the run itself, whether it fits or not: plan prices a row that does not fit, and its
    # reason then says by how much
    row = plan(model, hardware=hardware, config=config, workers=workers).iloc[0].to_dict()
    if not np.isfinite(row["step_time"]):
        raise ScheduleError(f"the run cannot be priced: {row['reason']}")
    found = (_neighbours(model, hardware, config, row, count, workers, flags, job)
             if count else None)
    return Explanation(model, config, hardware, row, _recompute_tflops(model, config, row),
                       found)


def _direction(bias: float) -> str:
    """The checks' mean signed error behind the step time's bar, in words: which way they
    leaned (what they did, not a correction: ``errorbar.coverage``'s ``rms_corrected``)."""
    if not np.isfinite(bias):
        return "no checks to lean on"
    way = "fast" if bias < 0 else "slow"
    return (f"its checks' mean signed error {bias:+.1%} (predicted {way}; what they did, not "
            f"a correction)")


def _memory_bar(error: float, model, config: RunConfig) -> str:
    """The total's error bar (``fastpp.model.memorybar``) and what it leaves out."""
    if not np.isfinite(error):
        missing = unmeasured(model, config.recompute, config.cp, config.priced_recipe)
        return f"no error bar: not measured: {missing} (fastpp.model.memorybar)"
    return (f"± {error:.1%} expected error of the count (activations measured against "
            f"PyTorch, the rest counted, gradients at {config.reduce_bytes:g} bytes; not "
            f"covered: workspace, fragmentation, communication buffers, with which runs on "
            f"torchtitan reserved 6-28% more)")


def _recompute_tflops(model, config: RunConfig, row: dict) -> float:
    """Megatron's count plus full recomputation's second forward of the layers it recomputes
    (not of the logits): the FLOPs the GPUs ran, as Narayanan et al. count them."""
    if config.recompute != "full":
        return float(row["tflops_per_gpu"])
    logits = 6.0 * model.hidden * model.vocab * (1 + model.mtp_depth)
    layers = model.megatron_flops_per_token(config.seq) - logits
    again = 1.0  # the share of the layers recomputed
    part = config.partial_recompute
    if part["recompute_method"] is not None:
        counts = _chunks(model, config.build_schedule(), config.chunk_layout(model))[0]
        again = float(recomputed_layers(part["recompute_method"], part["recompute_layers"],
                                        counts, counts)[0].sum() / counts.sum())
    return float(row["tflops_per_gpu"] * (layers * (1 + again / 3) + logits)
                 / (layers + logits))


def _neighbours(model, hardware, config: RunConfig, row: dict, count: int, workers, flags,
                job=None):
    """Faster rows that fit (any that fit, where the run does not), over the run's GPUs,
    batch and sequence, fewest changes first: ``plan``'s axes, the microbatches 1, 2, 4 and
    the run's own, half and double."""
    pd = require("pandas", "sweep", "fastpp.model.explain")

    # Megatron's flags where Megatron can run the run (not torchtitan's interval recomputation;
    # not two ranks of an interleaved pipeline whose hand-offs block, which Megatron refuses)
    megatron = (flags == "megatron" and config.schedule in MEGATRON_SCHEDULES
                and config.partial_recompute["recompute_method"] != "interval"
                and _writes(to_megatron, config))
    # torchtitan's keys where it can write the run (a job config states no Megatron detail)
    torchtitan = (_TorchtitanJob(job, config, model)
                  if flags == "torchtitan" and _writes(to_torchtitan, config, model) else None)
    # as Megatron runs each neighbour: a plain pipeline's hand-offs block, an interleaved
    # one's overlap unless the run says --no-overlap-p2p-communication; torchtitan's run its
    # schedules as the run does, FSDP resharding after each forward or once a step
    plain, interleaved = MEGATRON_SCHEDULES
    groups = ([([plain], True, config.zero3),
               ([interleaved], config.blocking_handoffs and config.m > 1, config.zero3)]
              if megatron else [([plain], True, config.zero3)]
              if flags in ("vtrain", "composer") else
              [(sorted(TORCHTITAN_NAMES), config.blocking_handoffs, x) for x in ZERO3_GATHERS]
              if torchtitan else [(None, config.blocking_handoffs, config.zero3)])
    # vTrain's runs: ZeRO-0, full or no recomputation, stages that divide the layers;
    # llm-foundry's: FSDP over every GPU
    vtrain = ({"zero": [0], "recompute": ["none", "full"],
               "pp": [p for p in range(1, model.layers + 1) if model.layers % p == 0]}
              if flags == "vtrain" else
              {"zero": [0, 2, 3], "recompute": ["none", "full"], "tp": [1], "pp": [1]}
              if flags == "composer" else {"zero": sorted({config.zero, 0, 3})}
              if torchtitan else {"zero": sorted({config.zero, 1})})
    # (the TP overlap needs sequence parallelism where t > 1: a run at t = 1 without it
    # searches its neighbours without the overlap)
    tp_overlap = config.tp_overlap and (config.sequence_parallel or bool(torchtitan))
    # a neighbour at t > 1 shards the sequence where torchtitan's does, and where the model
    # has experts (Megatron's MoE layer trains t > 1 with sequence parallelism alone: a
    # run at t = 1 without it had no t > 1 neighbour); t = 1 prices alike either way
    sharded = bool(torchtitan) or bool(model.moe)
    b = config.microbatch
    microbatches = sorted(x for x in {1, 2, 4, max(b // 2, 1), b, 2 * b}
                          if config.global_batch % x == 0)
    rows = pd.concat([plan(
        model, config.gpus, hardware, seq=config.seq, global_batch=config.global_batch,
        schedules=schedules, microbatch=microbatches, **vtrain, cp=[config.cp], ep=[config.ep],
        etp=[config.etp], precision=None if config.precision is None else [config.precision],
        sequence_parallel=config.sequence_parallel or sharded,
        gradient_overlap=config.gradient_overlap,
        blocking_handoffs=blocking, tp_overlap=tp_overlap, cp_comm=config.cp_comm,
        zero3=zero3, replicate=config.replicate, reduce_bytes=config.reduce_bytes,
        dispatcher=config.dispatcher, train_metrics=config.train_metrics,
        framework=config.framework, node_limit=config.node_limit,
        imbalance=config.imbalance, recipe=config.recipe, **config.recompute_keywords,
        workers=workers).assign(_blocking=blocking, _zero3=zero3)
        for schedules, blocking, zero3 in groups], ignore_index=True)
    # a run that does not fit is shown what fits, at any speed
    faster = rows[rows["fits"] & ((rows["step_time"] < row["step_time"] * 0.995)
                                  | (not row["fits"]))]
    faster = faster.sort_values("step_time", kind="stable")
    faster = faster[~((faster["p"] == 1) & alike_key(faster).duplicated())]  # one run's names
    out, seen = [], set()
    for _, r in faster.iterrows():
        blocking, zero3 = bool(r.pop("_blocking")), r.pop("_zero3")
        other = RunConfig.from_row(r, **{k: getattr(config, k) for k in (
            "seq", "gradient_overlap", "cp_comm", "replicate", "reduce_bytes", "precision",
            "dispatcher", "recompute_modules", "train_metrics", "framework", "node_limit",
            "imbalance", "recipe")},
            tp_overlap=tp_overlap,
            sequence_parallel=config.sequence_parallel or (sharded and r["t"] > 1),
            # how ZeRO-3 gathers is its group's where the neighbour runs ZeRO-3
            zero3=zero3 if r["zero"] == 3 else "layer",
            # the run's recompute method where both recompute fully, as plan priced it
            **({"recompute_method": config.recompute_method,
                "recompute_layers": config.recompute_layers}
               if r["recompute"] == config.recompute in ("full", "selective") else {}),
            blocking_handoffs=blocking, layout=None)
        try:
            if torchtitan:  # the job changed, and the run it makes as torchtitan reads it
                changes, other = torchtitan.changes(other)
                if repr(other) in seen:  # (one job: a schedule torchtitan ignores at p = 1)
                    continue
                seen.add(repr(other))
            else:
                changes = (_vtrain_changes(config, other) if flags == "vtrain"
                           else _composer_changes(config, other) if flags == "composer"
                           else _cli_changes(config, other) if flags == "cli"
                           else _changes(config, other, megatron, model))
        except ScheduleError:  # a run the framework refuses (an interleaved pipeline of one
            continue           # rank, or two with blocking hand-offs): no neighbour
        # as many changes as are written: a data-parallel degree that follows is none, and
        # a global batch written to keep it (the --hf flags' default would move it) none
        out.append((sum(not x.startswith("--global-batch") for x in changes), r["step_time"],
                    r.to_dict(), changes, other))
    out.sort(key=lambda x: x[:2])
    found = []
    for changed, _, values, changes, other in out:
        if len(found) == count:
            break
        if torchtitan:  # priced as read back (its split torchtitan's), which the row stood for
            values = plan(model, hardware=hardware, config=other,
                          workers=workers).iloc[0].to_dict()
            if not (values["fits"] and (values["step_time"] < row["step_time"] * 0.995
                                        or not row["fits"])):
                continue
        found.append({**values, "changed": changed, "changes": " ".join(changes)})
    found.sort(key=lambda x: (x["changed"], x["step_time"]))  # (as priced: re-read ones too)
    return found


def _changes(old: RunConfig, new: RunConfig, megatron: bool, model) -> list[str]:
    """The Megatron flags that differ (set, or ``no --flag``), else the fields that differ.
    Written with the model, so that a split Megatron's even one is not (the layers over
    ``p m`` chunks as plan spreads them) is written as the layout that states it."""
    if megatron:
        before, after = _flag_map(to_megatron(old, model)), _flag_map(to_megatron(new, model))
        sets = [f"{k} {v}".strip() for k, v in after.items() if before.get(k) != v]
        drops = [f"no {k}" for k in before if k not in after]
        return sets + drops
    return [f"{k}={getattr(new, k)}" for k in CHANGED if getattr(new, k) != getattr(old, k)]


def _cli_changes(old: RunConfig, new: RunConfig) -> list[str]:
    """The run flags of ``python -m fastpp explain --hf`` that differ (``--tp 2``), and the
    global batch where the flags' default (``--microbatch`` times the data-parallel degree)
    would not keep it."""
    kept = ([f"--global-batch {new.global_batch}"]
            if new.microbatch * new.d != new.global_batch else [])
    return [f"{flag} {getattr(new, k)}" for k, flag in CLI_FLAGS.items()
            if getattr(new, k) != getattr(old, k)] + kept


def _writes(writer, *args) -> bool:
    """Whether ``writer`` states the run (a ``ScheduleError`` where it cannot)."""
    try:
        writer(*args)
    except ScheduleError:
        return False
    return True


class _TorchtitanJob:
    """A torchtitan job (``job``, or the one ``to_torchtitan`` writes for ``config``) and
    what changes it to a neighbour."""

    # the keys that split the layers other than by the stage weights: a neighbour's split
    # is torchtitan's default with the job's weights, so these go where it has them
    SPLITS = tuple(f"parallelism.{k}" for k in ("pipeline_parallel_split_points",
                                                "module_fqns_per_model_part",
                                                "pipeline_parallel_layers_per_stage"))

    def __init__(self, job, config: RunConfig, model):
        self.config, self.model = config, model
        self.job = (read_toml(job)[0] if job is not None
                    else tomllib.loads(to_torchtitan(config, model)))
        self.given = _flat(self.job)
        if job is not None:  # the neighbours are changes of it: it must state the run
            read = from_torchtitan(self.job, config.gpus, model=model).config
            differ = [f"{k}={getattr(read, k)!r} (the run's {getattr(config, k)!r})"
                      for k in SAME if getattr(read, k) != getattr(config, k)]
            if differ:  # (each change listed would be from another run than the one priced)
                raise ScheduleError(f"job must be the torchtitan job the run was read from: "
                                    f"it reads as {', '.join(differ)}")
        # the layers the embedding and the output layer weigh: the job's, else torchtitan's
        self.weights = tuple(self.given.get(f"parallelism.pipeline_parallel_{end}_stage_less"
                                            f"_layers", 1) for end in ("first", "last"))
        self.run = self._written(config)

    def _written(self, config: RunConfig) -> dict:
        return _flat(tomllib.loads(to_torchtitan(config, self.model,
                                                 stage_weights=self.weights)))

    def _read(self, sets: dict, drops: list) -> RunConfig | None:
        """The run of the job with ``sets`` set and ``drops`` removed, as torchtitan reads
        it (None where it refuses it)."""
        job = {name: dict(table) for name, table in self.job.items()}
        for key, value in sets.items():
            name, _, k = key.partition(".")
            job.setdefault(name, {})[k] = value
        for key in drops:
            name, _, k = key.partition(".")
            del job[name][k]
        try:
            return from_torchtitan(job, self.config.gpus, model=self.model).config
        except ScheduleError:
            return None

    def changes(self, other: RunConfig) -> tuple[list[str], RunConfig]:
        """The keys to change (``section.key=value``, ``no section.key``) and the run they
        make, as ``from_torchtitan`` reads the job changed; a ``ScheduleError`` where no
        change of the job's keys makes ``other``."""
        if other.p == 1:  # (torchtitan runs no schedule without a pipeline: the job's kept)
            single = TORCHTITAN_NAMES[self.config.schedule] in SINGLE_STAGE
            other = other.replace(schedule=self.config.schedule, m=1 if single else 2,
                                  layout=None)
        else:
            other = other.replace(layout=split_layout(self.model.layers, other.p * other.m,
                                                      *self.weights))
        after = self._written(other)
        drops = [k for k in self.given if k not in after and (k in self.run or k in self.SPLITS)]

        def made(sets, drops):
            read = self._read(sets, drops)
            return read if read is not None and all(
                getattr(read, k) == getattr(other, k) for k in SAME) else None

        # the keys the run's and the neighbour's jobs differ in; where the job leaves a key
        # to a default that moves with the change (or states one the run ignored), every key
        # the neighbour's job states otherwise. Then each key the job does not state, or
        # states as the run has it, that the change does without is left out
        sets = {k: v for k, v in after.items() if self.run.get(k) != v != self.given.get(k)}
        read = made(sets, drops) or made(sets := {k: v for k, v in after.items()
                                                  if self.given.get(k) != v}, drops)
        if read is None:
            raise ScheduleError(f"no change of the job's keys makes {other}")
        for key in [k for k in sets if k not in self.given or self.run.get(k) == after[k]]:
            fewer = {k: v for k, v in sets.items() if k != key}
            again = made(fewer, drops)
            if again is not None:
                sets, read = fewer, again
        for key in list(drops):  # a key the change makes torchtitan ignore may stay
            kept = [k for k in drops if k != key]
            again = made(sets, kept)
            if again is not None:
                drops, read = kept, again
        return [f"{k}={json.dumps(v)}" for k, v in sets.items()] + [f"no {k}" for k in drops], read


def _flat(job: dict) -> dict:
    """A TOML job's keys as ``section.key``."""
    return {f"{name}.{k}": v for name, table in job.items() if isinstance(table, dict)
            for k, v in table.items()}


def _composer_changes(old: RunConfig, new: RunConfig) -> list[str]:
    """The keys of llm-foundry's YAML that differ, as ``key=value`` (``fsdp_config``'s by
    their dotted name)."""
    def flat(keys: dict) -> dict:
        return {**{k: v for k, v in keys.items() if k != "fsdp_config"},
                **{f"fsdp_config.{k}": v for k, v in keys.get("fsdp_config", {}).items()}}

    before, after = flat(foundry_keys(old)), flat(foundry_keys(new))
    return ([f"{k}={json.dumps(v)}" for k, v in after.items() if before.get(k) != v]
            + [f"no {k}" for k in before if k not in after])


def _vtrain_changes(old: RunConfig, new: RunConfig) -> list[str]:
    """The keys of the vTrain configuration that differ, as ``key=value``; the microbatch
    too where ``d`` or ``p`` change, since a file without a pipeline may leave it to be
    derived from them."""
    before, after = run_keys(old), run_keys(new)
    derived = ("data_parallel_size", "pipeline_parallel_size")
    keep = any(before[k] != after[k] for k in derived)
    return [f"{k}={json.dumps(v)}" for k, v in after.items()
            if before[k] != v or (keep and k == "micro_batch_size")]


def _flag_map(flags: list[str]) -> dict[str, str]:
    out, key = {}, None
    for word in flags:
        if word.startswith("--"):
            key = word
            out[key] = ""
        elif key is not None:
            out[key] = (out[key] + " " + word).strip()
    return out
