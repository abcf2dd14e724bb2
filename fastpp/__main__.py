"""The command line: ``python -m fastpp {simulate, optimize, plan, measure, report, show,
list}``."""

from __future__ import annotations

import argparse
import functools
import re
import sys

from . import SCHEDULES, Costs, ScheduleError, build_schedule, optimize, simulate
from .placement import NAMES as PLACEMENTS
from .search.problem import CHUNKS as SEARCH_PLACEMENTS

# the PyTorch classes `measure` runs (the registry's torch_class)
TORCH_CLASSES = [spec.torch_class for spec in SCHEDULES.values() if spec.torch_class]


def _schedule_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--schedule", "-s", metavar="NAME", help="a registered schedule "
                     "(python -m fastpp list)")
    src.add_argument("--from-csv", metavar="FILE", help="a PyTorch compute-only schedule CSV")
    ap.add_argument("-p", type=int, help="devices (with --schedule)")
    ap.add_argument("-n", type=int, help="microbatches (with --schedule; optional with a CSV)")
    ap.add_argument("-m", type=int, default=None, help="chunks per device (default: the "
                    "schedule's, 2 for V and interleaved ones, else 1)")
    ap.add_argument("-G", type=int, default=None, help="interleaved 1F1B's group size")
    ap.add_argument("--placement", help=f"with --from-csv: {', '.join(PLACEMENTS)} or a "
                    "schedule name")


def _schedule(args, ap):
    if args.from_csv:
        from .io import read_torch_csv

        return read_torch_csv(args.from_csv, n=args.n, placement=args.placement)
    if args.p is None or args.n is None:
        ap.error("--schedule needs -p and -n")
    spec = SCHEDULES.get(args.schedule)
    m = args.m if args.m is not None else (spec.default_m if spec else 1)
    options = {} if args.G is None else {"G": args.G}
    return build_schedule(args.schedule, args.p, args.n, m, **options)


def _cost_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--f", type=float, default=1.0, help="forward time per device (1)")
    ap.add_argument("--b", type=float, default=2.0, help="full backward time per device (2)")
    ap.add_argument("--w", type=float, default=0.0, help="weight-grad part of b (0)")
    ap.add_argument("--comm", type=float, default=0.0, help="hand-off latency (0)")
    ap.add_argument("--gamma", type=float, default=1.0, help="M_W / M_B (1)")


def _output_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace (JSON)")
    ap.add_argument("--gantt", metavar="PNG", help="write a Gantt chart")
    ap.add_argument("--memory-plot", dest="memory_png", metavar="PNG",
                    help="write the memory curves")
    ap.add_argument("--csv", metavar="FILE", help="write the schedule as PyTorch CSV")


def _memory_limit(text: str | None, p: int):
    """``--memory-limit``: a number of units, or a multiple of p such as ``1.5p``; none: no
    limit."""
    if text is None or text.lower() in ("none", "inf", "unlimited"):
        return None
    match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(\*?\s*p)?\s*", text)
    try:
        value = float(match.group(1)) if match else None
    except ValueError:
        value = None
    if value is None:
        raise ScheduleError(f"--memory-limit must be a number of units or a multiple of p such as "
                            f"'1.5p' (got {text!r})")
    return value * p if match.group(2) else value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fastpp",
                                 description="Simulate pipeline-parallel training schedules.")
    # no abbreviations: '--memory' would otherwise still mean --memory-plot or --memory-limit
    sub = ap.add_subparsers(dest="command", required=True,
                            parser_class=functools.partial(argparse.ArgumentParser,
                                                           allow_abbrev=False))
    sim = sub.add_parser("simulate", help="simulate a schedule and report times and memory")
    _schedule_args(sim)
    _cost_args(sim)
    sim.add_argument("--fb", type=float, default=None, help="overlapped F&B pair (f + b)")
    _output_args(sim)
    opt = sub.add_parser("optimize", help="search the fastest schedule within a memory limit")
    opt.add_argument("-p", type=int, required=True, help="devices")
    opt.add_argument("-n", type=int, required=True, help="microbatches")
    _cost_args(opt)
    opt.add_argument("--memory-limit", metavar="LIMIT", help="activation memory limit per "
                     "device, in units of one microbatch's activations (M_B), or a multiple of "
                     "p such as '1.5p' (default: none)")
    opt.add_argument("--placement", choices=list(SEARCH_PLACEMENTS), default="loop",
                     help=" or ".join(f"{k} (m={m})" for k, m in SEARCH_PLACEMENTS.items())
                     + " (loop)")
    opt.add_argument("--objective", choices=["makespan", "span"], default="makespan",
                     help="makespan, or the Zero Bubble paper's per-device span (makespan)")
    opt.add_argument("--method", choices=["auto", "heuristic", "improve", "exact"],
                     default="auto", help="search method (auto)")
    opt.add_argument("--time-limit", type=float, default=10.0, help="seconds (10)")
    opt.add_argument("--seed", type=int, default=0, help="local search seed (0)")
    opt.add_argument("--quiet", action="store_true", help="no progress bar")
    _output_args(opt)
    pl = sub.add_parser("plan", help="the fastest configurations of a model on N GPUs")
    _plan_args(pl)
    meas = sub.add_parser(
        "measure", help="run a schedule for real in PyTorch, profile it, replay and predict it",
        description="Run one profiled step of a torch.distributed.pipelining schedule, one "
        "process per rank (CPU: gloo, one thread each), on an MLP of --layers blocks of "
        "--hidden units split evenly over the p*m stages; write rank{r}_trace.json per rank "
        "to --out, read them back and print the measured, replayed and predicted makespans. "
        "On a machine with p GPUs, --device cuda runs NCCL with one GPU per rank.")
    _measure_args(meas)
    rep = sub.add_parser("report", help="write an interactive HTML report of sweeps, plans, "
                         "frontiers and measured runs",
                         description="One self-contained HTML file (it opens offline): a "
                         "sweep's heat maps, Pareto fronts and timelines, a plan's table and "
                         "scatter, a frontier, a measured run against its simulations.")
    rep.add_argument("paths", nargs="+", metavar="PATH", help="a sweep folder or table, a plan "
                     "or frontier table (Parquet or CSV), or a measured-run folder")
    rep.add_argument("-o", "--output", default="report.html", help="the HTML file "
                     "(report.html)")
    rep.add_argument("--schedules", nargs="+", default=None, metavar="NAME",
                     help="schedules whose timelines a sweep's report also shows at every "
                     "(p, n)")
    show = sub.add_parser("show", help="print a schedule's ops laid out by time, bubbles as dots")
    _schedule_args(show)
    _cost_args(show)
    show.add_argument("--by-index", action="store_true",
                      help="list each device's ops in order, without times")
    sub.add_parser("list", help="list the registered schedules and their constraints")
    _explain_args(sub.add_parser(
        "explain", help="predict one run given as users write it (Megatron flags or script, "
        "torchtitan TOML, HF config.json) and list faster runs near it"))
    args = ap.parse_args(argv)

    try:
        if args.command == "list":
            width = max(map(len, SCHEDULES))
            for name, spec in SCHEDULES.items():
                print(f"{name:<{width}}  {spec.summary}\n{'':<{width}}  constraints: "
                      f"{spec.describe()}")
            return 0
        if args.command == "plan":
            return _plan(args)
        if args.command == "explain":
            return _explain(args)
        if args.command == "measure":
            return _measure(args)
        if args.command == "report":
            from .reports import report

            print(f"report: {report(*args.paths, output=args.output, schedules=args.schedules)}")
            return 0
        if args.command == "optimize":
            costs = Costs(args.f, args.b, w=args.w, comm=args.comm, gamma=args.gamma)
            found = optimize(args.p, args.n, costs, memory=_memory_limit(args.memory_limit, args.p),
                             placement=args.placement, objective=args.objective,
                             method=args.method, time_limit=args.time_limit, seed=args.seed,
                             progress=not args.quiet)
            _report_search(found)
            _write_outputs(args, found.result)
            return 0
        sched = _schedule(args, ap)
        costs = Costs(args.f, args.b, w=args.w, comm=args.comm, gamma=args.gamma,
                      fb=getattr(args, "fb", None))
        if args.command == "show":
            print(sched if args.by_index else f"{sched!r}\n{simulate(sched, costs).grid()}")
            return 0
        res = simulate(sched, costs)
        _report(res)
        _write_outputs(args, res)
    except (ScheduleError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _plan_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="llama3-70b", help="a preset (llama3-70b; see "
                    "fastpp.model.MODELS) or a Hugging Face config.json (or its folder)")
    ap.add_argument("--gpus", type=int, default=64, help="GPUs in all (64)")
    ap.add_argument("--hardware", default="H100-80GB", help="a preset (H100-80GB)")
    ap.add_argument("--link", default=None, help="inter-node link preset (the hardware's: "
                    "IB-400G)")
    ap.add_argument("--seq", type=int, default=8192, help="sequence length (8192)")
    ap.add_argument("--global-batch", type=int, default=512, help="sequences per step (512)")
    ap.add_argument("--efficiency", type=float, default=None,
                    help="fraction of the peak the largest matrix products reach (the "
                         "preset's calibrated ceiling)")
    ap.add_argument("--schedules", nargs="+", default=None, metavar="NAME")
    for flag, what in (("--tp", "tensor-parallel degrees"), ("--pp", "pipeline degrees"),
                       ("--microbatch", "sequences per microbatch"), ("-m", "chunks per device")):
        ap.add_argument(flag, nargs="+", type=int, default=None, help=f"{what} (default: all)")
    ap.add_argument("--recompute", nargs="+", default=None,
                    choices=["none", "selective", "full"], help="(default: all)")
    ap.add_argument("--layout", nargs="+", default=None, metavar="LAYOUT",
                    help="Megatron layout strings, e.g. 'Et*9|(t*10|)*6,t*11L' (default: "
                    "even stages)")
    for flag, where in (("--first-layers", "first"), ("--last-layers", "last")):
        ap.add_argument(flag, nargs="+", type=int, default=None,
                        help=f"layers on the {where} model chunk (default: even stages)")
    ap.add_argument("--zero", nargs="+", type=int, default=[1], help="ZeRO stages (1)")
    for flag, what in (("--ep", "expert-parallel degrees (default: every one that divides "
                                "the experts and the GPUs)"),
                       ("--etp", "expert tensor-parallel degrees (1)")):
        ap.add_argument(flag, nargs="+", type=int, default=None, help=what)
    ap.add_argument("--precision", nargs="+", default=None, choices=["bf16", "fp8"],
                    help="the products' precision (the hardware's)")
    ap.add_argument("--node-limit", type=int, default=None,
                    help="DeepSeek's node-limited routing: a token goes to at most this many "
                         "nodes (default: no limit)")
    ap.add_argument("--imbalance", type=float, default=1.0,
                    help="tokens on the busiest expert over the mean (1.0)")
    ap.add_argument("--dispatcher", default="alltoall", choices=["alltoall", "allgather", "flex"],
                    help="Megatron's token dispatcher; flex is DeepEP's (alltoall)")
    ap.add_argument("--recipe", default=None, choices=["deepseek-v3"],
                    help="a memory recipe by name (fastpp.model.recipes)")
    ap.add_argument("--recompute-modules", nargs="+", default=None,
                    help="Megatron's --recompute-modules, for --recompute selective")
    ap.add_argument("--zero3", default="layer", choices=["layer", "step"],
                    help="ZeRO-3's weight all-gathers: per layer, or once per step (layer)")
    ap.add_argument("--cp", nargs="+", type=int, default=None,
                    help="context-parallel degrees (1)")
    ap.add_argument("--cp-comm", default="all-gather", choices=["all-gather", "ring"],
                    help="context parallelism's K and V exchange (all-gather)")
    ap.add_argument("--overlap", action="store_true",
                    help="also price the overlapped forward-and-backward pairs (DualPipe, "
                         "DualPipeV, combined 1F1B) with the pair model")
    ap.add_argument("--capacity-gb", type=float, default=None, help="GB per GPU (the preset's)")
    ap.add_argument("--gradient-overlap", action="store_true",
                    help="overlap the gradient reduction with the backward, in buckets")
    ap.add_argument("--top", type=int, default=10, help="configurations to print (10)")
    ap.add_argument("--out", default="results", help="folder for plan.parquet, plan.png")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG")


def _plan(args) -> int:
    import time
    from pathlib import Path

    from .model import HARDWARE, plan
    from .model.hardware import preset
    from .model.plan import summary

    hardware = preset(HARDWARE, args.hardware, "hardware")
    if args.efficiency is not None:
        hardware = hardware.with_efficiency(args.efficiency)
    start = time.perf_counter()
    df = plan(model_arg(args.model), args.gpus, hardware, seq=args.seq,
              global_batch=args.global_batch,
              link=args.link,
              schedules=args.schedules, tp=args.tp, pp=args.pp, microbatch=args.microbatch,
              m=args.m, recompute=args.recompute, zero=args.zero, layout=args.layout,
              first_layers=args.first_layers, last_layers=args.last_layers,
              capacity=None if args.capacity_gb is None else args.capacity_gb * 1e9,
              gradient_overlap=args.gradient_overlap, cp=args.cp, cp_comm=args.cp_comm,
              zero3=args.zero3, overlap=[False, True] if args.overlap else False, ep=args.ep,
              etp=1 if args.etp is None else args.etp, precision=args.precision,
              node_limit=args.node_limit, imbalance=args.imbalance,
              dispatcher=args.dispatcher, recipe=args.recipe,
              recompute_modules=args.recompute_modules)
    seconds = time.perf_counter() - start
    ran = int(df["step_time"].notna().sum())
    print(f"{args.model} on {args.gpus} x {hardware.name} (products up to "
          f"{hardware.efficiency:.0%} of peak), "
          f"sequence {args.seq}, global batch {args.global_batch}: planned in {seconds:.2f} s "
          f"({ran / seconds:,.0f} simulated configurations per second)\n")
    print(summary(df, args.top))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_parquet(out / "plan.parquet", index=False)
    print(f"\ntable: {out / 'plan.parquet'}")
    if not args.no_plots:
        from . import plot

        capacity = hardware.memory_bytes if args.capacity_gb is None else args.capacity_gb * 1e9
        png = plot.plan_scatter(df, out / "plan.png", capacity,
                                title=f"{args.model} on {args.gpus} x {hardware.name}")
        print(f"picture: {png}")
        write_report(out / "plan.parquet", out / "plan.html")
    return 0


def _measure_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--schedule", "-s", metavar="NAME",
                     help=f"a PyTorch class ({', '.join(TORCH_CLASSES)}) or a fastpp schedule "
                     "(python -m fastpp list), run from its CSV; 1F1B is measured as fastpp's "
                     "own (Schedule1F1B labels no op)")
    src.add_argument("--from-csv", metavar="FILE", help="a compute-only schedule CSV to run, "
                     "for example one that 'optimize --csv' wrote")
    ap.add_argument("--placement", help=f"with --from-csv: {', '.join(PLACEMENTS)} or a "
                    "schedule name")
    ap.add_argument("-p", type=int, default=None, help="ranks, one process each (2, or the "
                    "CSV's)")
    ap.add_argument("-n", type=int, default=None, help="microbatches (4, or the CSV's)")
    ap.add_argument("-m", type=int, default=None, help="chunks per rank (the schedule's)")
    ap.add_argument("--layers", type=int, default=16, help="MLP blocks, a multiple of p*m (16)")
    ap.add_argument("--hidden", type=int, default=256, help="units per block (256)")
    ap.add_argument("--microbatch", type=int, default=256, help="samples per microbatch (256)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu (gloo, one thread per rank) or cuda (NCCL, GPU r for rank r) "
                    "(cpu)")
    ap.add_argument("--warmup", type=int, default=1, help="steps before the profiled one (1)")
    ap.add_argument("--realtime", action="store_true",
                    help="run the ranks under the real-time scheduler (SCHED_FIFO; root), "
                    "ahead of other processes on a shared machine")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds before hung ranks are killed (300)")
    ap.add_argument("--out", default="measured", help="folder for the traces (measured)")
    ap.add_argument("--costs-from", metavar="DIR",
                    help="also predict the makespan from the costs calibrated on the traces "
                    "in DIR (another schedule's run)")
    ap.add_argument("--trace", metavar="FILE",
                    help="write a Perfetto trace of the measured and replayed timelines")
    ap.add_argument("--picture", metavar="PNG",
                    help="write the measured timelines above the replayed ones")


def _measure(args) -> int:
    from pathlib import Path

    from . import read_torch_trace
    from .measured.runner import measure

    schedule = args.schedule
    if args.from_csv:
        from .io import read_torch_csv

        schedule = read_torch_csv(args.from_csv, n=args.n, placement=args.placement)
    run = measure(schedule, args.p, args.n, args.m, layers=args.layers, hidden=args.hidden,
                  microbatch=args.microbatch, out=args.out, device=args.device,
                  warmup=args.warmup, realtime=args.realtime, timeout=args.timeout)
    replay = run.replay()
    own = simulate(run.schedule, run.costs())
    s = run.schedule
    print(f"{args.schedule or args.from_csv}: p={s.p}, n={s.n}, m={s.m}, {s.num_ops} ops, "
          f"traces in {args.out}")
    rows = [("replayed (each op's measured time)", replay.makespan),
            ("predicted (this run's median costs)", own.makespan)]
    if args.costs_from:
        other = read_torch_trace(args.costs_from)
        rows.append((f"predicted (costs of {args.costs_from})",
                     simulate(s, other.costs()).makespan))  # any m: the fixed part per op
    width = max(len(what) for what, _ in rows)
    print(f"{'':<{width}} {'makespan':>10} {'error':>8}")
    print(f"{'measured':<{width}} {run.makespan * 1e3:>8.3f}ms")
    for what, value in rows:
        print(f"{what:<{width}} {value * 1e3:>8.3f}ms {value / run.makespan - 1:>+8.2%}")
    if args.trace:
        from .trace import write_measured_trace

        print(f"trace: {write_measured_trace(run, replay, args.trace)} (open in "
              f"ui.perfetto.dev)")
    if args.picture:
        from . import plot

        print(f"picture: {plot.measured_timelines(run, replay, args.picture)}")
    write_report(run, Path(args.out) / "report.html")
    return 0


def write_report(what, path) -> None:
    """The interactive report of a script's or command's result, or a note without plotly."""
    try:
        from .reports import report

        print(f"report: {report(what, output=path)}")
    except ImportError as err:
        print(f"no report ({err})")


def _report(res) -> None:
    s = res.schedule
    print(f"{s.name}: p={s.p}, n={s.n}, m={s.m}, {s.num_ops} ops")
    print(f"makespan {res.makespan:g}, bubble {res.bubble_ratio:.2%} (span metric "
          f"{res.span_bubble_ratio:.2%}), throughput {res.throughput:.4g} microbatches per unit")
    print(f"{'device':>6} {'busy':>9} {'idle':>9} {'span':>9} {'peak act.':>10} {'peak live':>10}")
    for r in range(s.p):
        print(f"{r:>6} {res.busy[r]:>9.4g} {res.idle[r]:>9.4g} {res.span[r]:>9.4g} "
              f"{res.peak_activations[r]:>10.4g} {res.peak_live[r]:>10}")


def _report_search(found) -> None:
    s = found.schedule
    limit = found.memory
    shown = "none" if not limit.size or not limit.max() < float("inf") else f"{limit.max():g}"
    print(f"optimize: p={s.p}, n={s.n}, {found.placement} placement (m={s.m}), objective "
          f"{found.objective}, memory limit {shown} per device")
    print(f"best: {found.objective} {found.value:.6g} (bubble {found.bubble:.2%}), found by "
          f"{found.method}")
    print(f"lower bound {found.lower_bound:.6g}, gap {found.gap:.2%}, "
          f"{'proven optimal' if found.optimal else 'not proven optimal'}")
    res = found.result
    print(f"{'device':>6} {'busy':>9} {'idle':>9} {'span':>9} {'peak act.':>10}")
    for r in range(s.p):
        print(f"{r:>6} {res.busy[r]:>9.4g} {res.idle[r]:>9.4g} {res.span[r]:>9.4g} "
              f"{res.peak_activations[r]:>10.4g}")


def _write_outputs(args, res) -> None:
    if args.trace:
        from .trace import write_chrome_trace

        print(f"trace: {write_chrome_trace(res, args.trace)} (open in ui.perfetto.dev)")
    if args.csv:
        from .io import write_torch_csv

        print(f"schedule CSV: {write_torch_csv(res.schedule, args.csv)}")
    if args.gantt or args.memory_png:
        from . import plot

        if args.gantt:
            print(f"Gantt chart: {plot.gantt(res, args.gantt)}")
        if args.memory_png:
            print(f"memory curves: {plot.memory(res, args.memory_png)}")



# ---- explain: one run as users write it (issue 28) ----

def model_arg(text: str):
    """A preset name, or a Hugging Face ``config.json`` (or a folder holding one)."""
    import os

    from .model import MODELS, from_hf

    if text in MODELS or not (text.endswith(".json") or os.path.isdir(text)):
        return text
    return from_hf(text)


def _explain_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--megatron", metavar="ARGS", help="Megatron-LM arguments in one string")
    src.add_argument("--megatron-script", metavar="FILE", help="a Megatron-LM launch script")
    src.add_argument("--torchtitan", metavar="FILE", help="a torchtitan TOML job config")
    src.add_argument("--hf", metavar="CONFIG", help="a Hugging Face config.json (or its "
                     "folder), with the run flags below")
    ap.add_argument("--gpus", type=int, help="GPUs in all (default: the script's torchrun "
                    "--nproc_per_node x --nnodes)")
    ap.add_argument("--hardware", default="H100-80GB", help="a preset (H100-80GB)")
    ap.add_argument("--model", help="the model instead of the one the run gives: a preset or "
                    "a config.json")
    ap.add_argument("--vocab", type=int, help="the tokenizer's vocabulary when a Megatron "
                    "script does not say --vocab-size")
    ap.add_argument("--neighbours", type=int, default=5, help="faster runs to list (5)")
    ap.add_argument("--workers", type=int, help="threads for the search")
    ap.add_argument("--report", metavar="HTML", help="also write the run and its neighbours "
                    "as a report page (a plan table)")
    ap.add_argument("--timeline", action="store_true", help="also print the pipeline's "
                    "timeline, bubbles as dots")
    run = ap.add_argument_group("run flags (with --hf)")
    for flag, kind, default in (("--tp", int, 1), ("--pp", int, 1), ("--cp", int, 1),
                                ("--ep", int, 1), ("--etp", int, 1), ("--m", int, 1),
                                ("--microbatch", int, 1), ("--global-batch", int, None),
                                ("--seq", int, 4096), ("--zero", int, 1)):
        run.add_argument(flag, type=kind, default=default)
    run.add_argument("--schedule", default=None, help="1f1b, or interleaved-1f1b with --m > 1")
    run.add_argument("--recompute", default="none", choices=["none", "selective", "full"])


def _explain(args) -> int:
    from pathlib import Path

    from .model import RunConfig, from_hf, from_megatron, from_torchtitan
    from .model.explain import explain
    from .model.megatron import SCHEDULES as MEGATRON_SCHEDULES

    ignored = ()
    if args.megatron is not None or args.megatron_script is not None:
        text = args.megatron if args.megatron is not None else \
            Path(args.megatron_script).read_text()
        imported = from_megatron(text, args.gpus, vocab=args.vocab)
        model, config, ignored = imported.model, imported.config, imported.ignored
    elif args.torchtitan is not None:
        if args.gpus is None:
            raise ScheduleError("--torchtitan needs --gpus")
        model, config = from_torchtitan(args.torchtitan, args.gpus, model=args.model)
    else:
        if args.gpus is None:
            raise ScheduleError("--hf needs --gpus")
        model = from_hf(args.hf)
        schedule = args.schedule or MEGATRON_SCHEDULES[args.m > 1]
        fields = dict(seq=args.seq, t=args.tp, p=args.pp, cp=args.cp, ep=args.ep,
                      etp=args.etp, m=args.m, schedule=schedule, microbatch=args.microbatch,
                      recompute=args.recompute, zero=args.zero)
        rest = args.tp * args.pp * args.cp
        d = args.gpus // rest if rest and args.gpus % rest == 0 else 1
        fields["global_batch"] = args.global_batch or args.microbatch * d
        config = RunConfig.for_gpus(args.gpus, **fields)
    if args.model is not None and args.torchtitan is None:
        model = model_arg(args.model)
    found = explain(model, config, args.hardware, neighbours=args.neighbours,
                    workers=args.workers)
    print(found.table())
    if args.timeline:
        print("\n" + found.timeline())
    if ignored:
        print(f"\n  not modelled: {' '.join(ignored)}")
    if args.report:
        import pandas as pd

        from .model import PLAN_COLUMNS
        from .reports import report

        rows = pd.DataFrame([found.row, *(found.neighbours or [])])[list(PLAN_COLUMNS)]
        print(f"\nreport: {report(rows, output=args.report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
