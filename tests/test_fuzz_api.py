"""The error contract fuzzed over every public function's arguments.

Each entry of ``calls()`` is a public function with arguments that work; every argument in
turn takes each value of ``BAD`` (wrong types, bools, signs, zero, huge, NaN, infinity, empty,
strings, None, nested and ragged lists, wrong shapes), and each pair of integer arguments
takes 10**5 and 10**9 at once; each key of a dict a reader takes (a plan row, Megatron's
arguments, an llm-foundry YAML, a torchtitan job) takes each value in turn. A call then
either succeeds with a sane result or raises ``ScheduleError`` (``ScheduleTypeError`` for a
type) whose message names the parameter; never NumPy's, Numba's or Python's own error, a
MemoryError, a call slower than ``SLOW`` seconds (``SLOW_VALID`` for a call that succeeds),
or NaN or infinity out of finite input. The table is fixed, so the run is the same every
time.

``python tests/test_fuzz_api.py`` prints every escape and the counts.
"""

import json
import math
import os
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import fastpp
from fastpp import ScheduleError
from fastpp.costs import OPTIONAL

SLOW = 5.0  # seconds: bad input must fail faster than this (a hang, bounded)
# a valid call this slow fails too; more time, as the valid calls include huge ones such as
# optimize(p=10**5, n=3), which takes ~4 s alone (its time_limit of 1 s is not held there)
SLOW_VALID = 30.0
HERE = Path(__file__).resolve().parent

BAD = {
    "None": None, "True": True, "False": False, "-1": -1, "0": 0, "10**9": 10**9,
    "10**18": 10**18, "-10**18": -10**18, "1.5": 1.5, "-2.5": -2.5, "nan": math.nan,
    "inf": math.inf, "-inf": -math.inf, "''": "", "'x'": "x", "'2'": "2", "[]": [],
    "[1, [2]]": [1, [2]], "[[1, 2], [3]]": [[1, 2], [3]], "ones((2, 2))": np.ones((2, 2)),
    "[nan]": [math.nan], "1j": 1j, "{}": {}, "object()": object(),
    "int64(-3)": np.int64(-3), "bool_(True)": np.bool_(True),
}


# where a message names an argument as the domain does (a schedule, a token, Megatron's and
# torchtitan's flags) or names what it broke (a forward-only schedule with a backward)
SEED_N = {"num_microbatches": ("num_microbatches", "p*n*m")}
NAMES = {
    "build_schedule": {"name": ("schedule",)}, "sweep": {"schedules": ("schedule",)},
    **{f"theory.{f}": {"name": ("schedule",)} for f in (
        "bubble_fraction", "idle", "makespan", "peak_live_max", "peak_live", "peak_activations",
        "span_idle")},
    "Schedule": {"forward_only": ("forward_only", "forward-only")},
    "Schedule.from_tokens": {"rows": ("rows", "token"),
                             "forward_only": ("forward_only", "forward-only")},
    "gpipe_schedule": SEED_N, "onef_oneb_schedule": SEED_N, "seed.run": SEED_N,
    "io.read_torch_csv": {"path": ("path", "cannot be read")},
    "model.even_layers": {"stages": ("stages", "chunks")},
    "model.torchtitan_layers": {"first_less": ("first_stage_less_layers",),
                                "last_less": ("last_stage_less_layers",)},
    "model.parse_layout": {"text": ("layout",)},
    "model.plan": {"pp": ("pp", "p in"), "schedules": ("schedule",)},
}
# constructors: the result holds the arguments, so a negative there is no computed number
ECHO = {"Costs", "Device", "model.Hardware", "model.Link", "model.Transformer", "Schedule",
        "Schedule.from_tokens", "Layout.from_layers"}


@dataclass
class Call:
    """A public function, arguments with which it works, and the ones not fuzzed (with why)."""
    label: str
    function: object
    kwargs: dict
    skip: tuple = ()
    names: dict = field(default_factory=dict)  # argument -> the names its message may use
    echo: bool = False  # the result holds the arguments (a constructor): no sanity flags
    baseline_flags: set = field(default_factory=set)


def calls(tmp: Path) -> list[Call]:
    """Every public function with arguments that work (objects built once, files in tmp)."""
    from fastpp import io, model, plot, seed, sweeps, theory, trace
    from fastpp.measured import read_torch_trace
    from fastpp.measured.runner import _job
    from fastpp.model.moe import layer_parts
    from fastpp.model.overlap import pair_time

    s = fastpp.build_schedule("1f1b", 2, 4)
    res = fastpp.simulate(s, fastpp.Costs(f=1, b=2))
    df = fastpp.sweep(["1f1b", "zb-h1"], p=[2, 4], n_per_p=[1, 2], progress=False)
    csv = io.write_torch_csv(s, tmp / "s.csv")
    run = read_torch_trace(HERE / "data" / "interleaved-1f1b")
    llama = model.MODELS["llama2-7b"]
    h100 = model.HARDWARE["H100-80GB"]
    plan_kw = dict(model="llama2-7b", gpus=8, seq=1024, global_batch=8, tp=1, pp=2,
                   microbatch=1, recompute="none", schedules=["1f1b"])
    plan_df = model.plan(**plan_kw)
    out = tmp / "sweep"
    fastpp.sweep("1f1b", p=2, n=2, out=out, progress=False)
    costs = dict(f=1.0, b=2.0, w=0.0, i=None, comm=0.0, gamma=1.0, fb=None, act=1.0,
                 bandwidth=None, message_bytes=0.0, overhead=0.0, send=0.0)
    theory_kw = dict(name="1f1b", p=4, n=8, m=1)
    pairs = fastpp.build_schedule("dualpipev", 2, 4, 2)
    mixtral = model.MODELS["mixtral-8x7b"]
    parts = layer_parts(mixtral, h100, seq=1024, ep=2)
    monte_carlo = fastpp.simulate(s, fastpp.Costs(1, 2), noise=fastpp.Noise(), samples=20)
    op_table = _op_table(tmp)
    job = fastpp.read_op_table(op_table)
    return [
        Call("Costs", fastpp.Costs, costs, names={k: (f"costs.{k}",) for k in costs}),
        Call("Costs.per_stage", fastpp.Costs(1, 2).per_stage, dict(schedule=s)),
        Call("build_schedule", fastpp.build_schedule, dict(name="interleaved-1f1b", p=2, n=4,
                                                           m=2)),
        Call("simulate", fastpp.simulate, dict(schedule=s, costs=fastpp.Costs(1, 2),
                                               durations=None)),
        Call("simulate(durations)", fastpp.simulate, dict(schedule=s,
                                                          durations=np.ones(s.kind.shape))),
        Call("Schedule", fastpp.Schedule, dict(ops=s.ops, length=s.length,
                                               stage_to_device=s.stage_to_device, n=s.n, m=1,
                                               name="x", routes=None, forward_only=False)),
        Call("Schedule.from_tokens", fastpp.Schedule.from_tokens,
             dict(rows=s.tokens(), stage_to_device=None, n=None, m=None, name="x",
                  routes=None, forward_only=None)),
        Call("Schedule.token", s.token, dict(r=0, k=0)),
        Call("Schedule.grid", s.grid, dict(marks=None)),
        Call("Result.grid", res.grid, dict(max_columns=160)),
        Call("Result.memory_curve", res.memory_curve, dict(r=0)),
        Call("ScheduleSpec.check", fastpp.SCHEDULES["interleaved-1f1b"].check,
             dict(p=2, n=4, m=2, G=2)),
        Call("ScheduleSpec.reasons", fastpp.SCHEDULES["interleaved-1f1b"].reasons,
             dict(p=2, n=4, m=2, G=2)),
        Call("optimize", fastpp.optimize, dict(p=2, n=3, costs=None, memory=None,
                                               placement="loop", objective="makespan",
                                               method="heuristic", time_limit=1.0, seed=0,
                                               progress=False)),
        Call("sweep", fastpp.sweep, dict(schedules="1f1b", p=2, n=None, m=None, n_per_p=1,
                                         G=None, costs=None, f=1.0, b=2.0, w=None, i=None,
                                         comm=None,
                                         gamma=None, fb=None, act=None, bandwidth=None,
                                         message_bytes=None, overhead=None, send=None,
                                         points=None,
                                         out=None,
                                         resume=False, chunk_size=64, workers=1,
                                         executor="threads", scheduler=None, progress=False,
                                         invalid="drop", collect=True),
             skip=("executor",)),  # "dask" starts a cluster: tests/test_dask*.py
        Call("best_within_budget", fastpp.best_within_budget,
             dict(df=df, budget="1f1b", by=("p", "n"), inference=False)),
        Call("pareto_front", fastpp.pareto_front,
             dict(df=df, x="peak_activations_max", y="bubble_ratio", inference=False)),
        Call("sweeps.load", sweeps.load, dict(out=out)),
        Call("read_torch_trace", fastpp.read_torch_trace,
             dict(path=HERE / "data" / "interleaved-1f1b")),
        Call("MeasuredRun.costs", run.costs, dict(per="device", statistic="median")),
        Call("MeasuredRun.compare", run.compare, dict(result=run.replay())),
        Call("measure (its checks)", _job,
             dict(schedule="1f1b", p=2, n=4, m=None, layers=4, hidden=8, microbatch=2,
                  out=tmp / "measured", device="cpu", warmup=1, realtime=False)),
        Call("compute_theoretical_peak", fastpp.compute_theoretical_peak,
             dict(schedule_type="1f1b", num_microbatches=8, num_stages=4)),
        Call("gpipe_schedule", fastpp.gpipe_schedule,
             dict(devices=[fastpp.Device("d0", ["l"]), fastpp.Device("d1", ["l"])],
                  num_microbatches=4)),
        Call("onef_oneb_schedule", fastpp.onef_oneb_schedule,
             dict(devices=[fastpp.Device("d0", ["l"]), fastpp.Device("d1", ["l"])],
                  num_microbatches=4)),
        Call("Device", fastpp.Device, dict(name="d", layers=["l"], comm_latency=0.01,
                                           fwd_time=0.02, bwd_time=0.04)),
        Call("seed.run", seed.run, dict(schedule_type="1f1b",
                                        devices=[fastpp.Device("d0", ["l"])], num_microbatches=4)),
        *[Call(f"theory.{f}", getattr(theory, f), theory_kw | extra) for f, extra in [
            ("bubble_fraction", dict(f=1.0, b=2.0)),
            ("idle", dict(f=1.0, b=2.0, w=0.0, fb=None, G=None)),
            ("makespan", dict(f=1.0, b=2.0, w=0.0, G=None)),
            ("peak_live_max", dict(G=None)), ("peak_live", dict(G=None)),
            ("peak_activations", dict(G=None, gamma=1.0)),
            ("span_idle", dict(f=1.0, b=2.0, w=0.0))]],
        Call("io.read_torch_csv", io.read_torch_csv, dict(path=csv, n=None, placement=None,
                                                         name=None)),
        Call("io.write_torch_csv", io.write_torch_csv, dict(schedule=s, path=tmp / "w.csv")),
        Call("io.parse_op", io.parse_op, dict(token="0F1")),
        Call("trace.chrome_trace", trace.chrome_trace, dict(result=res, time_scale=1000.0)),
        Call("trace.write_chrome_trace", trace.write_chrome_trace,
             dict(result=res, path=tmp / "t.json", time_scale=1000.0)),
        Call("trace.measured_trace", trace.measured_trace, dict(run=run, result=run.replay())),
        Call("trace.write_measured_trace", trace.write_measured_trace,
             dict(run=run, result=run.replay(), path=tmp / "m.json")),
        Call("plot.gantt", plot.gantt, dict(result=res, path=tmp / "g.png")),
        Call("plot.memory", plot.memory, dict(result=res, path=tmp / "mem.png")),
        Call("plot.bubble_heatmaps", plot.bubble_heatmaps,
             dict(df=df, path=tmp / "h.png", metric="bubble_ratio")),
        Call("plot.pareto", plot.pareto, dict(df=df, path=tmp / "p.png",
                                              x="peak_activations_max", y="bubble_ratio",
                                              title=None)),
        Call("plot.plan_scatter", plot.plan_scatter, dict(df=plan_df, path=tmp / "ps.png",
                                                          capacity=None, title=None)),
        Call("plot.measured_timelines", plot.measured_timelines,
             dict(run=run, result=run.replay(), path=tmp / "mt.png", title=None)),
        Call("model.Hardware", model.Hardware,
             dict(name="h", peak_flops=1e15, memory_bytes=8e10, node=h100.node,
                  network=h100.network, efficiency=0.8, gpus_per_node=8,
                  memory_bandwidth=2e12, op_overhead=4e-6, matmul_half=128.0,
                  precision="bf16", fp8_flops=None)),
        Call("Hardware.seconds", h100.seconds, dict(flops=1e12)),
        Call("Hardware.with_efficiency", h100.with_efficiency, dict(efficiency=0.5)),
        Call("Hardware.with_precision", h100.with_precision, dict(precision="bf16")),
        Call("model.Link", model.Link, dict(name="l", bandwidth=1e10, latency=1e-6)),
        Call("model.Transformer", model.Transformer,
             dict(layers=4, hidden=64, heads=4, kv_heads=None, ffn=None, vocab=1000,
                  swiglu=False, tied_embeddings=False, dropout=False, flash_attention=True,
                  name="t")),
        Call("Transformer.flops_per_token", llama.flops_per_token, dict(seq=1024)),
        Call("model.chunk_layers", model.chunk_layers, dict(layers=8, chunks=4)),
        Call("model.even_layers", model.even_layers, dict(layers=8, stages=4, first=None,
                                                         last=None)),
        Call("model.megatron_layers", model.megatron_layers,
             dict(layers=8, p=2, m=1, first=None, last=None)),
        Call("model.torchtitan_layers", model.torchtitan_layers,
             dict(layers=8, stages=4, first_less=1, last_less=1)),
        Call("model.parse_layout", model.parse_layout, dict(text="Et*3|t*3L")),
        Call("Layout.from_layers", model.Layout.from_layers, dict(layers=[2, 2])),
        Call("model.layer_costs", model.layer_costs,
             dict(model=llama, seq=1024, microbatch=1, t=1, sequence_parallel=True,
                  recompute=0)),
        Call("model.device_bytes", model.device_bytes,
             dict(model="llama2-7b", schedule=s, tp=1, dp=1, zero=1, layout=None,
                  layers=None)),
        Call("model.transformer_costs", model.transformer_costs,
             dict(model="llama2-7b", schedule=s, hardware="H100-80GB", seq=1024,
                  microbatch=1, tp=1, dp=1, sequence_parallel=True, recompute="none",
                  layout=None, layers=None, blocking_handoffs=True, tp_overlap=False)),
        Call("model.plan", model.plan, plan_kw | dict(
            hardware="H100-80GB", link=None, m=None, zero=1, capacity=None,
            sequence_parallel=True, gradient_overlap=False, blocking_handoffs=True,
            tp_overlap=False, layout=None, first_layers=None, last_layers=None, workers=1)),
        Call("model.validate", model.validate, dict(datasets=["korthikanti_2022"])),
        # mixture of experts, context parallelism, ZeRO-3 and the overlapped pair
        Call("model.Transformer(moe)", model.Transformer,
             dict(layers=4, hidden=64, heads=4, vocab=1000, experts=8, top_k=2,
                  shared_experts=1, expert_ffn=32, dense_layers=1, mtp_depth=1, q_rank=16,
                  kv_rank=16, rope_dim=8, name="m"), echo=True),
        Call("model.transformer_costs(moe)", model.transformer_costs,
             dict(model="mixtral-8x7b", schedule=pairs, hardware="H800-80GB", seq=1024,
                  microbatch=1, tp=1, dp=4, ep=2, etp=1, precision="fp8", node_limit=1,
                  imbalance=1.2, cp=1, cp_comm="ring", zero=3, zero3="step", overlap=True)),
        Call("model.transformer_costs(cp)", model.transformer_costs,
             dict(model="llama2-7b", schedule=s, seq=1024, cp=2, cp_comm="all-gather",
                  zero=3, zero3="layer")),
        Call("model.transformer_costs(recipe)", model.transformer_costs,
             dict(model="llama2-7b", schedule=s, seq=1024, recompute="selective",
                  recompute_modules=["core_attn"], fp8_cache=False, offload_modules=None,
                  recipe=None, dispatcher="alltoall")),
        Call("model.device_bytes(moe)", model.device_bytes,
             dict(model="mixtral-8x7b", schedule=pairs, tp=1, dp=4, zero=3, ep=2, etp=1, cp=1,
                  zero3="layer")),
        Call("model.plan(moe)", model.plan,
             dict(model="mixtral-8x7b", gpus=8, hardware="H800-80GB", seq=1024, global_batch=8,
                  tp=1, pp=2, microbatch=1, recompute="none", schedules=["dualpipev"], ep=2,
                  etp=1, precision="fp8", node_limit=None, imbalance=1.0, cp=1,
                  cp_comm="all-gather", zero=1, zero3="layer", overlap=[False, True],
                  workers=1),
             names={"pp": ("pp", "p in"), "schedules": ("schedule",)}),
        Call("model.plan(recipe)", model.plan,
             dict(model="llama2-7b", gpus=8, seq=1024, global_batch=8, tp=1, pp=2,
                  microbatch=1, recompute=["selective", "full"], schedules=["1f1b"],
                  recompute_method="block", recompute_layers=1, recipe=None,
                  # (mlp: the memory bar is NaN, unmeasured, as with no module at all)
                  recompute_modules=["core_attn", "mlp"], fp8_cache=False, offload_modules=None,
                  dispatcher="alltoall", reduce_bytes=4.0, replicate=1, train_metrics=0,
                  framework="megatron", workers=1),
             names={"pp": ("pp", "p in"), "schedules": ("schedule",)}),
        Call("model.layer_parts", layer_parts,
             dict(model=mixtral, hardware=h100, seq=1024, microbatch=1, t=1, ep=2, etp=1,
                  sequence_parallel=True, recompute="none", precision="bf16", node_limit=None,
                  imbalance=1.0)),
        Call("overlap.pair_time", pair_time, dict(parts=parts, comm_sms=20, sms=132)),
        *config_calls(),
        *key_calls(),
        Call("report", lambda table, output, schedules: fastpp.report(
            table, output=output, schedules=schedules),
             dict(table=plan_df, output=tmp / "report.html", schedules=None),
             names={"table": ("input", "table", "path"), "output": ("output",)}),
        Call("Noise", fastpp.Noise,
             dict(cov=0.05, dist="lognormal", slow_devices={1: 1.5}, slow_stages=None,
                  link_delay={(0, 1): 0.1}, blocking=True, step=0.01, spike=(0.01, 2.0),
                  empirical=None),
             names={"spike": ("spike",), "slow_devices": ("slow_devices",),
                    "link_delay": ("link_delay",)}, echo=True),
        Call("simulate(noise)", fastpp.simulate,
             dict(schedule=s, costs=fastpp.Costs(1, 2), noise=fastpp.Noise(0.1), samples=20,
                  seed=0),
             skip=("noise",)),  # None is the deterministic Result (its NaN: costs not given)
        Call("MonteCarlo.quantile", monte_carlo.quantile, dict(q=0.9)),
        Call("MonteCarlo.absorption", monte_carlo.absorption, dict(tolerance=0.01, steps=4)),
        Call("MonteCarlo.op_times", monte_carlo.op_times, dict(first=2, count=3)),
        Call("plot.makespan_cdf", plot.makespan_cdf,
             dict(results=[monte_carlo], path=tmp / "cdf.png", title=None)),
        Call("plot.criticality", plot.criticality, dict(mc=monte_carlo, path=tmp / "crit.png")),
        Call("read_op_table", fastpp.read_op_table, dict(path=op_table, meta=None),
             names={"path": ("path", "op table"), "meta": ("meta",)}),
        Call("whatif", fastpp.whatif, dict(job=job)),
        Call("MeasuredJob.replay", job.replay, dict(durations=job.durations)),
        Call("MeasuredSteps", fastpp.MeasuredSteps, dict(runs=[run, run]), echo=True),
        Call("Noise.with_link_delay", fastpp.Noise().with_link_delay,
             dict(link_delay={(0, 1): 0.1}), echo=True),
        Call("Costs.for_placement", fastpp.Costs(1, 2).for_placement,
             dict(p=2, stage_to_device=np.array([0, 1, 1, 0]), m=2)),
        Call("model.Layout", model.Layout, dict(layers=(2, 2), embedding=(True, False),
                                                loss=(False, True), mtp=(0, 0)),
             names={k: (f"layout.{k}",) for k in ("layers", "embedding", "loss", "mtp")},
             echo=True),
        Call("model.pair_partner", model.pair_partner, dict(schedule=pairs)),
        Call("model.stage_table", model.stage_table,
             dict(model=llama, hardware=h100, grid=model.RunGrid(
                 seq=1024, microbatch=[1, 2], t=1, d=1, p=2, m=1, recompute=0),
                  config=np.array([0, 0, 1, 1]), layers=np.array([16.0, 16, 16, 16]),
                  embedding=np.array([True, False, True, False]),
                  loss=np.array([False, True, False, True]), moe_layers=0.0, mtp=0.0,
                  partner=None)),
        Call("model.overlap_reason", model.overlap_reason,
             dict(name="dualpipev", pairs=True, recompute="none", cp=1, ep=2)),
    ]


def config_calls() -> list[Call]:
    """The run configuration's importers, exporters and explain (issue 28)."""
    from fastpp import model
    from fastpp.model.explain import explain

    qwen = {"model_type": "qwen3_moe", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "intermediate_size": 512, "moe_intermediate_size": 128, "num_experts": 8,
            "num_experts_per_tok": 2, "vocab_size": 1024}
    flags = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
             "--vocab-size 1000 --tensor-model-parallel-size 2")
    run = model.RunConfig(seq=512, global_batch=8, t=2, p=2, d=2)
    tiny = model.Transformer(4, 256, 8, vocab=1024)
    job = '[parallelism]\ntensor_parallel_degree = 2\n[training]\nseq_len = 512\n'
    return [
        Call("model.from_hf", model.from_hf, dict(config=qwen, name="q")),
        Call("model.hf.approximations", model.hf.approximations, dict(config=qwen)),
        Call("model.from_megatron", model.from_megatron,
             dict(args=flags, gpus=8, vocab=None, env=None, name="m"),
             names={"args": ("args", "--")}),
        Call("model.RunConfig", model.RunConfig,
             dict(seq=512, global_batch=8, t=1, cp=1, p=2, d=2, ep=1, etp=1, schedule="1f1b",
                  m=1, microbatch=1, recompute="full", recompute_method="uniform",
                  recompute_layers=1, recompute_modules=None, sequence_parallel=True, zero=1,
                  zero3="layer", overlap=False, gradient_overlap=False, tp_overlap=False,
                  blocking_handoffs=True, precision="bf16", layout=None, first_layers=None,
                  last_layers=None, cp_comm="all-gather", node_limit=None, imbalance=1.0,
                  reduce_bytes=4.0),
             echo=True, names={"global_batch": ("global_batch", "microbatch"),
                               "d": ("d", "microbatch"), "microbatch": ("microbatch",)}),
        Call("model.to_megatron", model.to_megatron, dict(config=run, model=tiny)),
        Call("model.from_torchtitan", model.from_torchtitan,
             dict(job=job, gpus=8, model="llama3-8b"),
             names={"model": ("model", "config"), "gpus": ("gpus",)}),
        Call("model.to_torchtitan", model.to_torchtitan,
             dict(config=run.replace(zero=3, zero3="step"), model=tiny)),
        Call("RunConfig.chunk_layout", run.replace(first_layers=1).chunk_layout,
             dict(model=tiny)),
        Call("RunConfig.from_row", model.RunConfig.from_row,
             dict(row=run.to_row() | {"n": 2, "gpus": 8}, seq=512),
             names={"row": ("row",)}),
        Call("model.explain", explain,
             dict(model=tiny, config=run, hardware="H100-80GB", neighbours=1, workers=1)),
    ]


def key_calls() -> list[Call]:
    """Each key of a dict a reader takes, in turn set to each bad value: a plan row
    (``RunConfig.from_row``), Megatron's arguments as a dict, an llm-foundry YAML's and a
    torchtitan job's parsed dicts (the table above gives each a whole argument only)."""
    import copy
    import tomllib

    from fastpp import model

    run = model.RunConfig(seq=512, global_batch=8, t=2, p=2, d=2)
    megatron = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
                "seq_length": 512, "vocab_size": 1000, "tensor_model_parallel_size": 2,
                "micro_batch_size": 2, "global_batch_size": 16, "attention_dropout": 0.1}
    foundry = {"max_seq_len": 512, "global_train_batch_size": 64,
               "device_train_microbatch_size": 8, "precision": "amp_bf16",
               "model": {"name": "mpt_causal_lm", "d_model": 256, "n_heads": 4, "n_layers": 4,
                         "expansion_ratio": 4, "max_seq_len": 512, "vocab_size": 1024,
                         "attn_config": {"attn_impl": "flash"}},
               "train_loader": {"dataset": {"max_seq_len": 512}},
               "fsdp_config": {"sharding_strategy": "FULL_SHARD",
                               "mixed_precision": {"reduce_dtype": "bf16"},
                               "activation_checkpointing": False}}
    titan = tomllib.loads(model.to_torchtitan(run.replace(zero=3, zero3="step"),
                                              model.MODELS["llama3-8b"]))
    # a message may name a key by what it counts (a model's layers, a run's t, the global
    # batch three columns of a row make)
    alias = {"num_layers": "layers", "n_layers": "layers", "hidden_size": "hidden",
             "d_model": "ffn_hidden_size", "expansion_ratio": "ffn_hidden_size",
             "num_attention_heads": "heads", "tensor_model_parallel_size": "vocab",
             "tensor_parallel_degree": "t=", "pipeline_parallel_degree": "p=",
             "context_parallel_degree": "cp=", "expert_parallel_degree": "ep",
             "n": "n * microbatch * d", "microbatch": "n * microbatch * d",
             "d": "n * microbatch * d", "expert_tensor_parallel_degree": "etp",
             "pipeline_parallel_last_stage_less_layers": "last_stage_less_layers"}

    def keys(table: dict, path=()):
        for key, value in table.items():
            if isinstance(value, dict) and key != "mixed_precision":
                yield from keys(value, (*path, key))
            else:
                yield (*path, key)

    def setter(read, data: dict, path: tuple):
        def call(value):
            changed = copy.deepcopy(data)
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            return read(changed)
        return call

    out = []
    for label, read, data in (
            ("RunConfig.from_row", lambda row: model.RunConfig.from_row(row, seq=512),
             run.to_row() | {"n": 2, "gpus": 8}),
            ("from_megatron(dict)", lambda args: model.from_megatron(args, gpus=8), megatron),
            ("from_llm_foundry(dict)", lambda data: model.from_llm_foundry(data, 8), foundry),
            ("from_torchtitan(dict)",
             lambda job: model.from_torchtitan(job, 8, model="llama3-8b"), titan)):
        for path in keys(data):
            node = data
            for key in path:
                node = node[key]
            dashed = path[-1].replace("_", "-")  # (Megatron's flags)
            out.append(Call(f"{label}[{'.'.join(path)}]", setter(read, data, path),
                            {"value": node}, names={"value": (
                                path[-1], dashed, alias.get(path[-1], path[-1]))}))
    return out


def _op_table(tmp: Path) -> Path:
    """A small op table in the what-if format: two steps of trace ST (shared/data), or of
    a copy written here."""
    import pandas as pd

    from fastpp.model.validate import DATA

    folder = DATA / "whatif_st"
    table = pd.read_parquet(folder / "trace-ST.parquet")
    table = table[table.step.isin(sorted(table.step.unique())[:2])]
    path = tmp / "trace-small.parquet"
    table.to_parquet(path)
    (tmp / "meta-small.yaml").write_text((folder / "meta-ST.yaml").read_text())
    return path


def _numbers(value, depth: int = 0):
    """The numeric arrays a result holds (a Result's times, a table's numeric columns,
    fields of a dataclass, items of a dict or list)."""
    import pandas as pd

    if depth > 3 or isinstance(value, bool | str | Path) or value is None:
        return
    if isinstance(value, int | float | np.number):
        yield np.asarray([value], np.float64)
    elif isinstance(value, np.ndarray):
        if value.dtype.kind in "iuf":
            yield value.astype(np.float64).reshape(-1)
    elif isinstance(value, pd.DataFrame):
        if "reason" in value:  # a row with a reason has no numbers (NaN), by design
            value = value[value["reason"].fillna("") == ""]
        yield value.select_dtypes("number").to_numpy(np.float64).reshape(-1)
    elif isinstance(value, dict):
        for v in list(value.values())[:50]:
            yield from _numbers(v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value[:50]:
            yield from _numbers(v, depth + 1)
    elif isinstance(value, fastpp.Costs):  # an optional field not given is NaN, by design
        for k, v in value.arrays.items():
            if k not in OPTIONAL or not np.all(np.isnan(v)):
                yield np.asarray(v, np.float64).reshape(-1)
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("fastpp"):
        for v in vars(value).values():
            yield from _numbers(v, depth + 1)


def _flags(value) -> set[str]:
    """What a result holds that finite input should not give: NaN, infinity, negatives."""
    found = set()
    for arr in _numbers(value):
        if np.isnan(arr).any():
            found.add("NaN")
        if np.isinf(arr).any():
            found.add("inf")
        if (arr < 0).any():
            found.add("negative")
    return found


def outcome(call: Call, arg: str, bad, also=None) -> tuple[str, str]:
    """("ok" | "error" | an escape's kind, detail) of ``call`` with ``arg`` set to ``bad``
    (and the arguments of ``also`` set as it says)."""
    kwargs = call.kwargs | {arg: bad} | (also or {})
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            value = call.function(**kwargs)
    except ScheduleError as err:
        took = time.perf_counter() - start
        names = [n for a in (arg, *(also or {})) for n in call.names.get(a, (a,))]
        if took > SLOW:
            return "slow", f"{took:.1f} s to raise"
        if not any(name in str(err) for name in names):
            return "unnamed", f"{type(err).__name__}: {err}"[:300]
        return "error", ""
    except BaseException as err:  # noqa: BLE001 - every other error is an escape
        if isinstance(err, KeyboardInterrupt):
            raise
        return "escape", f"{type(err).__name__}: {err}"[:300]
    took = time.perf_counter() - start
    if took > SLOW_VALID:
        return "slow", f"{took:.1f} s"
    # infinity or NaN given may come back where it means something (budget=inf: no limit)
    given = _flags(bad) & {"inf", "NaN"} if not isinstance(bad, str) else set()
    new = set() if call.echo else _flags(value) - call.baseline_flags - given
    return ("ok", "") if not new else ("wrong", f"returned {sorted(new)}")


def run(tmp: Path, labels=None, out=sys.stdout, verbose=False) -> dict:
    """Every call of ``calls`` with each argument set to each bad value in turn."""
    counts = {"calls": 0, "ok": 0, "error": 0}
    lines = []
    for call in calls(tmp):
        if labels is not None and call.label not in labels:
            continue
        call.names = call.names | NAMES.get(call.label, {})
        call.echo = call.echo or call.label in ECHO
        call.baseline_flags = _flags(call.function(**call.kwargs))
        grouped, start = {}, time.perf_counter()
        for arg in call.kwargs:
            if arg in call.skip:
                continue
            for shown, bad in BAD.items():
                if verbose:
                    print(f"{call.label}({arg}={shown})", file=sys.stderr, flush=True)
                kind, detail = outcome(call, arg, bad)
                counts["calls"] += 1
                counts[kind] = counts.get(kind, 0) + 1
                if kind not in ("ok", "error"):
                    where = f"{call.label}({arg}=...): {kind}: {detail[:150]}"
                    grouped.setdefault(where, []).append(shown)
        # each pair of counts huge at once: sizes are products (p * n * m), not one value
        counts_ = [a for a, v in call.kwargs.items() if type(v) is int and a not in call.skip]
        for i, a in enumerate(counts_):
            for z in counts_[i + 1:]:
                for huge in (10**5, 10**9):
                    if verbose:
                        print(f"{call.label}({a}={huge}, {z}={huge})", file=sys.stderr,
                              flush=True)
                    kind, detail = outcome(call, a, huge, {z: huge})
                    counts["calls"] += 1
                    counts[kind] = counts.get(kind, 0) + 1
                    if kind not in ("ok", "error"):
                        where = f"{call.label}({a}=..., {z}=...): {kind}: {detail[:150]}"
                        grouped.setdefault(where, []).append(str(huge))
        lines += [f"{where}  <- {', '.join(shown)}" for where, shown in grouped.items()]
        if verbose:
            print(f"TIME {call.label} {time.perf_counter() - start:.1f} s", file=sys.stderr)
        if grouped:
            print("\n".join(lines[-len(grouped):]), file=out, flush=True)
    return {"counts": counts, "escapes": lines}


def test_every_public_function_keeps_the_error_contract(tmp_path):
    """The whole table in a fresh interpreter with a time limit (a hang or a crash fails the
    test instead of stopping the suite), in an empty folder (bad paths such as 'x' are
    written there)."""
    env = dict(os.environ, PYTHONPATH=str(HERE.parent), MPLBACKEND="Agg")
    # the contract is the validation layer's: with the kernels as Python (the coverage run)
    # the searches and sweeps of the valid calls alone take minutes
    env.pop("NUMBA_DISABLE_JIT", None)
    run_ = subprocess.run([sys.executable, __file__, "--json"], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path, env=env)
    assert run_.returncode == 0, run_.stderr[-3000:]
    report = json.loads(run_.stdout.splitlines()[-1])
    print(report["counts"])
    assert report["counts"]["calls"] > 7000
    assert not report["escapes"], "\n".join(report["escapes"])


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        # a bad value such as 'x' or '2' given as a path writes x/ or 2.png: here, not in the
        # caller's folder (they were once committed at the repository's root)
        home = os.getcwd()
        os.chdir(folder)
        try:
            as_json = "--json" in sys.argv
            labels = set(sys.argv[1:]) - {"--json"}
            report = run(Path(folder), labels=labels or None, out=sys.stderr if as_json
                         else sys.stdout, verbose=not as_json)
        finally:
            os.chdir(home)
    print(json.dumps(report) if as_json else report["counts"])
