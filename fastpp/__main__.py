"""The command line: ``python -m fastpp {simulate, optimize, plan, measure, report, show,
list, explain}``."""

from __future__ import annotations

import argparse
import functools
import inspect
import math
import os
import re
import sys
import warnings

from . import SCHEDULES, Costs, ScheduleError, build_schedule, optimize, simulate
from ._jit import announce_compiles
from .checks import (
    MISSPELT,
    Terminated,
    atomic_write,
    by_flags,
    flag_names,
    make_folder,
    memory_limit_flag,
    near,
    require,
    seconds_flag,
    switch_names,
    until_interrupted,
    will_write,
)
from .model.config import CP_COMMS, FRAMEWORKS, ZERO3_GATHERS
from .model.hardware import PRECISIONS
from .model.moe import DISPATCHERS
from .model.recipes import RECIPES
from .model.transformer import RECOMPUTE
from .montecarlo import DEFAULT_SAMPLES, SIMULATE_SAMPLES
from .noise import DISTS
from .ops import FB
from .placement import NAMES as PLACEMENTS
from .reports import write_report
from .search import optimizer
from .search.optimizer import METHODS, ROBUST
from .search.problem import CHUNKS as SEARCH_PLACEMENTS
from .search.problem import OBJECTIVES

# the command line is a thin layer: its choices are the library's vocabularies (above), its
# defaults the library functions' own (below), and its work the library's


def _defaults(function) -> dict:
    """The keyword defaults of a library function, for its flags."""
    return {k: v.default for k, v in inspect.signature(function).parameters.items()
            if v.default is not inspect.Parameter.empty}


def _at_least(low: int, what: str):
    """argparse's type for an integer >= ``low`` (``what`` it must be): a bad one is then
    named by its flag (``argument --tp: must be a positive integer (got 0)``), not by the
    library parameter it becomes."""

    def integer(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what} (got {text!r})") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {what} (got {value})")
        return value

    return integer


_count = _at_least(1, "a positive integer")  # a count
# --first-layers, --last-layers: 0 is a chunk of the embedding or the loss alone, as plan takes
_layers_count = _at_least(0, "an integer >= 0")


def _torch_classes() -> list[str]:
    """The PyTorch classes ``measure`` runs: the registry's ``torch_class``, without
    importing ``fastpp.measured`` (pandas) for every command."""
    return [spec.torch_class for spec in SCHEDULES.values() if spec.torch_class]


def _schedule_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--schedule", "-s", metavar="NAME", help="a registered schedule "
                     "(python -m fastpp list)")
    src.add_argument("--from-csv", metavar="FILE", help="a PyTorch compute-only schedule CSV")
    ap.add_argument("-p", type=_count, help="devices (with --schedule)")
    ap.add_argument("-n", type=_count, help="microbatches (with --schedule; optional with a CSV)")
    two = ", ".join(name for name, spec in SCHEDULES.items() if spec.default_m == 2)
    ap.add_argument("-m", type=_count, default=None, help="chunks per device (default: the "
                    f"schedule's default_m: 2 for {two}, else 1)")
    ap.add_argument("-G", type=_count, default=None,
                    help="interleaved 1F1B's and combined 1F1B's group size")
    ap.add_argument("--placement", help=f"with --from-csv: {', '.join(PLACEMENTS)} or a "
                    "schedule name")


def _schedule(args, ap):
    # a flag the chosen source does not read is refused, not silently dropped
    if args.from_csv is not None:  # ('' is a path to refuse, not no path)
        from .io import read_torch_csv

        given = [f"-{k}" for k in ("p", "m", "G") if getattr(args, k) is not None]
        if given:
            raise ScheduleError(f"{given[0]} must be given with --schedule only: the CSV gives "
                                f"its own (got {' '.join(given)} with --from-csv)")
        return read_torch_csv(args.from_csv, n=args.n, placement=args.placement)
    _placement_needs_csv(args)
    if args.p is None or args.n is None:
        _subparser(ap, args).error("--schedule needs -p and -n")
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


def _costs(args) -> Costs:
    """The cost flags as ``Costs`` (a value it refuses is named by its flag: ``main``)."""
    return Costs(args.f, args.b, w=args.w, comm=args.comm, gamma=args.gamma,
                 fb=getattr(args, "fb", None))


def _written(flag: str, write, *args):
    """``write(*args)``, the output file's errors named by ``flag``."""
    try:
        return write(*args)
    except ScheduleError as err:
        raise type(err)(f"{flag}: {err}") from None


def _noise_args(ap: argparse.ArgumentParser, samples: int, seed: str, links_needed: bool
                ) -> None:
    """The flags of a ``fastpp.Noise`` (any of them turns the Monte Carlo on): ``samples``
    the command's default, ``seed`` the library parameter the draws' seed is."""
    group = ap.add_argument_group("noise", "a Monte Carlo under fastpp.Noise (docs/"
                                  "variability.md); any of these turns it on")
    group.add_argument("--noise", action="store_true",
                       help="Noise's defaults alone: every op jittered with CoV 0.05")
    group.add_argument("--noise-cov", dest="cov", metavar="COV",
                       help="each op's jitter: one CoV, or per kind as 'F=0.05,B=0.08' (0.05)")
    group.add_argument("--noise-dist", dest="dist", choices=DISTS, default=None,
                       help="the jitter's distribution (lognormal)")
    group.add_argument("--slow-device", dest="slow_devices", action="append",
                       metavar="R:FACTOR", help="device R persistently FACTOR times slower; "
                       "repeatable")
    group.add_argument("--slow-stage", dest="slow_stages", action="append",
                       metavar="S:FACTOR", help="virtual stage S persistently FACTOR times "
                       "slower; repeatable")
    group.add_argument("--link-delay", dest="link_delay", action="append",
                       metavar="SECONDS:R1:R2" if links_needed else "SECONDS[:R1:R2]",
                       help="every message between devices R1 and R2, either way, takes "
                       "SECONDS longer (in the costs' unit)" + (
                           "" if links_needed else "; default the middle link, p//2-1 and "
                           "p//2") + "; repeatable")
    group.add_argument("--blocking", action="store_true",
                       help="the sender waits each link delay out (a sleep before each send)")
    group.add_argument("--step-cov", dest="step", type=float, metavar="COV",
                       help="CoV of one factor per sample on every op (0)")
    group.add_argument("--spike", metavar="PROB:MAGNITUDE",
                       help="each op MAGNITUDE times as long with probability PROB")
    group.add_argument("--samples", type=_count, default=None,
                       help=f"Monte Carlo samples ({samples})")
    group.add_argument("--noise-seed", dest=seed, type=int, default=None,
                       help="the draws' seed (0)")
    ap.set_defaults(seed_flag=seed)


# (and the seed's, whose name is the command's: ``seed_flag``)
NOISE_FLAGS = ("noise", "cov", "dist", "slow_devices", "slow_stages", "link_delay", "blocking",
               "step", "spike", "samples")


def _noise(args, p: int | None):
    """The noise flags as a ``fastpp.Noise``, or None where none is given; ``p`` the devices
    a link delay without its ranks defaults to the middle link of (None: ranks required)."""
    if not any(getattr(args, k) is not None and getattr(args, k) is not False
               for k in (*NOISE_FLAGS, args.seed_flag)):  # (0 is given: --noise-seed 0)
        return None
    if args.blocking and not args.link_delay:
        raise ScheduleError("--blocking holds the link delays at their senders: give "
                            "--link-delay too (got --blocking alone)")
    kw = {}
    if args.cov is not None:
        kw["cov"] = _per_kind_cov(args.cov)
    if args.dist is not None:
        kw["dist"] = args.dist
    for key, flag in (("slow_devices", "--slow-device"), ("slow_stages", "--slow-stage")):
        if getattr(args, key):
            device = key == "slow_devices"
            kw[key] = _pairs(getattr(args, key), flag, "R:FACTOR" if device else "S:FACTOR",
                             "device" if device else "stage", lambda r, x: (int(r), float(x)))
    if args.link_delay:
        kw["link_delay"] = _pairs(args.link_delay, "--link-delay", "SECONDS:R1:R2" if p is None
                                  else "SECONDS[:R1:R2]", "link", _link_of(p))
    if args.step is not None:
        kw["step"] = args.step
    if args.spike is not None:
        try:
            probability, magnitude = (float(x) for x in args.spike.split(":"))
        except ValueError:
            raise ScheduleError(f"--spike must be PROB:MAGNITUDE (got {args.spike!r})") from None
        kw["spike"] = (probability, magnitude)
    from . import Noise

    return Noise(blocking=args.blocking, **kw)


def _noise_flags(message: str) -> str:
    """``Noise``'s mappings named by their flags: ``slow_devices[1] must ...`` is
    ``--slow-device 1:FACTOR must ...``, ``link_delay names link ...`` ``--link-delay names
    link ...`` (``by_flags`` names a parameter only where it is the subject of "must")."""
    message = re.sub(r"(?<![\w.-])cov\['(\w+)'\]", r"--noise-cov \1=COV", message)
    for name, flag, form in (("slow_devices", "--slow-device", "{}:FACTOR"),
                             ("slow_stages", "--slow-stage", "{}:FACTOR"),
                             ("link_delay", "--link-delay", "SECONDS:{}")):
        message = re.sub(rf"(?<![\w.-]){name}\[\(?([^\]]*?)\)?\]",
                         lambda m, flag=flag, form=form:
                         f"{flag} " + form.format(m[1].replace(", ", ":")), message)
        message = re.sub(rf"(?:^|(?<=: )){name}(?= (names|must)\b)", flag, message)
    return message


def _per_kind_cov(text: str):
    """``--noise-cov``: one number, or ``F=0.05,B=0.08``."""
    try:
        if "=" not in text:
            return float(text)
        pairs = [part.split("=") for part in text.split(",")]
        out = {kind.strip(): float(value) for kind, value in pairs}
    except ValueError:
        raise ScheduleError(f"--noise-cov must be a CoV or per kind as 'F=0.05,B=0.08' (got "
                            f"{text!r})") from None
    if len(out) < len(pairs):
        raise ScheduleError(f"--noise-cov must name each kind once (got {text!r})")
    return out


def _link_of(p: int | None):
    """``--link-delay``'s parts as ``((r1, r2), seconds)``: the middle link of ``p`` devices
    where the ranks are left out (as ``measure``'s), unless ``p`` is None."""

    def link(seconds, *ranks):
        if not ranks and p is not None:
            if p < 2:
                raise ScheduleError(f"--link-delay needs a link between two devices: a "
                                    f"schedule on p = {p} device has none")
            ranks = (p // 2 - 1, p // 2)
        r1, r2 = ranks  # (a wrong count: _pairs names the form)
        return (int(r1), int(r2)), float(seconds)

    return link


def _pairs(texts: list[str], flag: str, form: str, what: str, parse) -> dict:
    """Repeated ``A:B`` flags as a mapping ``{key: value}`` (``parse`` of their parts), each
    key (a ``what``) once."""
    out = {}
    for text in texts:
        try:
            key, value = parse(*text.split(":"))
        except ScheduleError:
            raise
        except (ValueError, TypeError):
            raise ScheduleError(f"{flag} must be {form} (got {text!r})") from None
        if key in out:
            raise ScheduleError(f"{flag} must name each {what} once (got {key} twice)")
        out[key] = value
    return out


def _optimize_args(ap: argparse.ArgumentParser) -> None:
    """``optimize``'s flags, its defaults taken from ``fastpp.optimize``."""
    ap.add_argument("-p", type=_count, required=True, help="devices")
    ap.add_argument("-n", type=_count, required=True, help="microbatches")
    _cost_args(ap)
    ap.add_argument("--memory-limit", metavar="LIMIT", help="activation memory limit per "
                    "device, in units of one microbatch's activations (M_B), or a multiple of "
                    "p such as '1.5p' (default: none)")
    given = _defaults(optimizer.optimize)
    ap.add_argument("--placement", choices=list(SEARCH_PLACEMENTS),
                    default=given["placement"],
                    help=" or ".join(f"{k} (m={m})" for k, m in SEARCH_PLACEMENTS.items())
                    + f" ({given['placement']})")
    ap.add_argument("--objective", choices=(*OBJECTIVES, *ROBUST), default=given["objective"],
                    help="makespan, or the Zero Bubble paper's per-device span, or under "
                         "noise the makespan's p95, median, mean or mean + lam * std "
                         f"({given['objective']})")
    ap.add_argument("--lam", type=float, default=None,
                    help=f"the weight of the std in mean+std ({given['lam']:g})")
    ap.add_argument("--method", choices=METHODS, default=given["method"],
                    help=f"search method ({given['method']})")
    ap.add_argument("--time-limit", type=seconds_flag, default=given["time_limit"],
                    help=f"seconds ({given['time_limit']:g})")
    ap.add_argument("--seed", type=int, default=given["seed"],
                    help=f"local search seed ({given['seed']})")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    _output_args(ap)
    _noise_args(ap, DEFAULT_SAMPLES, "noise_seed", links_needed=False)


def _parser() -> argparse.ArgumentParser:
    """Every subcommand's flags."""
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
    _noise_args(sim, SIMULATE_SAMPLES, "seed", links_needed=False)
    sim.add_argument("--cdf", metavar="PNG", help="with noise: write the makespan's CDF")
    sim.add_argument("--criticality", metavar="PNG",
                     help="with noise: write the timeline shaded by each op's criticality")
    _optimize_args(sub.add_parser("optimize",
                                  help="search the fastest schedule within a memory limit"))
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
        "torchtitan TOML, HF config.json, vTrain configuration) and list faster runs near "
        "it"))
    ap.commands = sub.choices  # (each command's parser: an unknown flag is its error)
    return ap


def main(argv=None) -> int:
    ap = _parser()
    args, unknown = ap.parse_known_args(argv)
    if unknown:  # the command's usage and name, and the flag it may misspell
        command = ap.commands[args.command]
        flags = [*flag_names(command).values(), *switch_names(command).values()]
        meant = [f"{near(x, flags)} for {x}" for x in unknown
                 if x.startswith("--") and near(x, flags)]
        command.error(f"unrecognized arguments: {' '.join(unknown)}"
                      + (f" (did you mean {', '.join(meant)}?)" if meant else ""))
    with announce_compiles(), warnings.catch_warnings():
        # a first run on a machine waits for Numba: said, not silent; a warning is a line
        # for the user, not a source line of fastpp's
        warnings.showwarning = _warning
        # (| head: the files are written still; Ctrl-C: a line, not a traceback)
        return until_interrupted(_command, ap, args)


def _warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"warning: {message}", file=sys.stderr if file is None else file)


def _command(ap: argparse.ArgumentParser, args) -> int:
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
        if args.command in ("optimize", "simulate"):  # refused before the work, not after
            for flag, value in (("--trace", args.trace), ("--csv", args.csv)):
                will_write(value, flag)
            if args.gantt is not None or args.memory_png is not None:  # (their format too)
                from .plot import check_picture

                check_picture(args.gantt, "--gantt")
                check_picture(args.memory_png, "--memory-plot")
        if args.command == "optimize":
            noise = _noise(args, args.p)
            _noise_for(args.objective, noise, args.lam)
            if noise is not None and args.objective not in ROBUST:
                raise ScheduleError(f"a noise flag needs a noisy --objective, one of "
                                    f"{', '.join(ROBUST)} (got --objective {args.objective})")
            cause = None  # (what interrupted the search, if anything did)
            try:
                found = optimize(args.p, args.n, _costs(args),
                                 memory=memory_limit_flag(args.memory_limit, args.p),
                                 placement=args.placement, objective=args.objective,
                                 method=args.method, time_limit=args.time_limit,
                                 seed=args.seed, progress=not args.quiet, noise=noise,
                                 **_lam(args), **_drawn(args))
            except optimizer.SearchInterrupted as stop:  # the best so far, said as such
                found, cause = stop.result, stop.cause
            _report_search(found, _defaults(optimizer.optimize)["lam"] if args.lam is None
                           else args.lam)
            _write_outputs(args, found.result)
            if found.stopped != "interrupted":
                return 0
            return 143 if isinstance(cause, Terminated) else 130  # (a shell's codes)
        sched = _schedule(args, ap)
        # (refused, as -G is for a schedule without options: it would change nothing)
        if getattr(args, "fb", None) is not None and not (sched.kind == FB).any():
            raise ScheduleError(f"--fb must not be given for {sched.name!r}: it runs no "
                                f"overlapped F&B pairs (got --fb {args.fb:g})")
        costs = _costs(args)
        if args.command == "show":
            print(sched if args.by_index else f"{sched!r}\n{simulate(sched, costs).grid()}")
            return 0
        noise = _noise(args, sched.p)
        for flag, value in (("--cdf", args.cdf), ("--criticality", args.criticality)):
            if value is not None and noise is None:
                raise ScheduleError(f"{flag} draws a Monte Carlo: give a noise flag too, e.g. "
                                    f"--noise (got {flag} {value} without one)")
            if value is not None:  # refused before the work, as --gantt is
                require("matplotlib", "plot", flag)
                from .plot import check_picture

                check_picture(value, flag)
        res = simulate(sched, costs)
        # the Monte Carlo before anything is printed: a noise it refuses is the one line
        mc = None if noise is None else simulate(sched, costs, noise=noise, **_drawn(args))
        _report(res)
        _write_outputs(args, res)
        if mc is not None:
            _report_noise(args, mc, res)
    except MemoryError:  # a Monte Carlo of too many samples for this machine, say
        drawn = getattr(args, "samples", None)
        print("error: out of memory" + (f" (with --samples {drawn:,}: ask for fewer)"
                                        if drawn and drawn > 1 else ""), file=sys.stderr)
        return 2
    except (ScheduleError, OSError) as err:
        message = str(err)  # named by the flags, not by the library's parameters
        parser = _subparser(ap, args)
        flags = flag_names(parser)
        if getattr(args, "from_csv", None) is not None:  # (read_torch_csv's path=)
            flags["path"] = "--from-csv"
        if args.command == "optimize":  # the limit is optimize's memory=
            flags["memory"] = "--memory-limit"
        elif args.command == "explain" and args.hf is not None:  # RunConfig's t and p
            flags |= {"t": "--tp", "p": "--pp", "config": "--hf"}  # (and from_hf's config=)
        elif args.command == "explain":  # the run is the script's: its own flags, not these
            flags = {k: v for k, v in flags.items() if v not in (*RUN_FLAGS, "--schedule")}
            # (each importer's file parameter, named by the flag that gave the file)
            for dest, source in (("job", "torchtitan"), ("config", "llm_foundry"),
                                 ("config", "vtrain")):
                if getattr(args, source) is not None:
                    flags[dest] = "--" + source.replace("_", "-")
        message = by_flags(_noise_flags(message), flags, switch_names(parser))
        print(f"error: {message}", file=sys.stderr)
        return 2
    return 0


def _subparser(ap: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The parser of the command ``args`` runs (its errors name it: ``python -m fastpp
    plan: error: ...``)."""
    command = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return command.choices[args.command]


# the default job of `plan` and scripts/plan.py (plan itself has no default model or size)
DEFAULT_JOB = {"model": "llama3-70b", "gpus": 64, "seq": 8192, "global_batch": 512}


def _plan_args(ap: argparse.ArgumentParser) -> None:
    from .model.plan import plan  # the function (fastpp.model.plan names it too)

    given = {**_defaults(plan), **DEFAULT_JOB}
    ap.add_argument("--model", default=given["model"], help=f"a preset ({given['model']}; "
                    "see fastpp.model.MODELS) or a Hugging Face config.json (or its folder)")
    ap.add_argument("--gpus", type=_count, default=given["gpus"],
                    help=f"GPUs in all ({given['gpus']})")
    ap.add_argument("--hardware", default=given["hardware"],
                    help=f"a preset ({given['hardware']})")
    ap.add_argument("--link", default=given["link"], help="inter-node link preset (the "
                    "hardware's)")
    ap.add_argument("--seq", type=_count, default=given["seq"],
                    help=f"sequence length ({given['seq']})")
    ap.add_argument("--global-batch", type=_count, default=given["global_batch"],
                    help=f"sequences per step ({given['global_batch']})")
    ap.add_argument("--efficiency", type=float, default=None,
                    help="fraction of the peak the largest matrix products reach (the "
                         "preset's calibrated ceiling)")
    ap.add_argument("--attention-kernel", default=None, metavar="KERNEL",
                    help="the attention kernel the stack runs: FlashAttention (the first), "
                         "FlashAttention-2, FlashAttention-3 or cuDNN, as measured on the GPU "
                         "(the GPU's default: cuDNN on the H100 family and Blackwell, "
                         "FlashAttention-2 on A100)")
    ap.add_argument("--attention-speed", type=float, default=None,
                    help="the stack's attention against that kernel's measured speed, in "
                         "(0, 2] (1)")
    ap.add_argument("--schedules", nargs="+", default=given["schedules"], metavar="NAME",
                    help="registered training schedules (python -m fastpp list; default: "
                    "all; for a model without experts all but " + ", ".join(
                        k for k, spec in SCHEDULES.items() if spec.expert_overlap) + ")")
    for flag, what in (("--tp", "tensor-parallel degrees (every one in a node dividing the "
                                "heads)"),
                       ("--pp", "pipeline degrees (every one up to the layers)"),
                       ("--microbatch", "sequences per microbatch (1, 2 and 4 where they divide "
                                        "the global batch)"),
                       ("-m", "chunks per device (each schedule's own)")):
        ap.add_argument(flag, nargs="+", type=_count, default=None, help=what)
    ap.add_argument("--recompute", nargs="+", default=given["recompute"], choices=RECOMPUTE,
                    help="(default: all)")
    ap.add_argument("--layout", nargs="+", default=given["layout"], metavar="LAYOUT",
                    help="Megatron layout strings, e.g. 'Et*9|(t*10|)*6,t*11L' (default: "
                    "even stages)")
    for flag, where in (("--first-layers", "first"), ("--last-layers", "last")):
        ap.add_argument(flag, nargs="+", type=_layers_count, default=None,
                        help=f"layers on the {where} model chunk, 0 for one of the "
                             f"{'embedding' if where == 'first' else 'loss'} alone (default: "
                             f"even stages)")
    ap.add_argument("--zero", nargs="+", type=int, default=[given["zero"]],
                    help=f"ZeRO stages ({given['zero']})")
    ap.add_argument("--ep", nargs="+", type=_count, default=given["ep"],
                    help="expert-parallel degrees (default: every one that divides the experts "
                         "and the GPUs)")
    ap.add_argument("--etp", nargs="+", type=_count, default=[given["etp"]],
                    help=f"expert tensor-parallel degrees ({given['etp']})")
    ap.add_argument("--precision", nargs="+", default=given["precision"], choices=PRECISIONS,
                    help="the products' precision (the hardware's)")
    ap.add_argument("--node-limit", type=_count, default=given["node_limit"],
                    help="DeepSeek's node-limited routing: a token goes to at most this many "
                         "nodes (default: no limit)")
    ap.add_argument("--imbalance", type=float, default=given["imbalance"],
                    help=f"tokens the busiest expert-parallel rank receives over the mean, "
                         f"at most min(ep, experts / top_k) ({given['imbalance']})")
    ap.add_argument("--dispatcher", default=given["dispatcher"], choices=DISPATCHERS,
                    help=f"Megatron's token dispatcher; flex is DeepEP's ({given['dispatcher']})")
    ap.add_argument("--recipe", default=None, choices=sorted(RECIPES),
                    help="a memory recipe by name (fastpp.model.recipes)")
    ap.add_argument("--recompute-modules", nargs="+", default=None,
                    help="Megatron's --recompute-modules, for --recompute selective")
    ap.add_argument("--zero3", default=given["zero3"], choices=ZERO3_GATHERS,
                    help=f"ZeRO-3's weight all-gathers: per layer, or once per step "
                         f"({given['zero3']})")
    ap.add_argument("--replicate", type=_count, default=given["replicate"],
                    help=f"hybrid sharding: ZeRO in this many groups of d cp / replicate "
                         f"ranks each ({given['replicate']}: over all of d cp)")
    ap.add_argument("--cp", nargs="+", type=_count, default=given["cp"],
                    help="context-parallel degrees (1)")
    ap.add_argument("--cp-comm", default=given["cp_comm"], choices=CP_COMMS,
                    help="context parallelism's K and V exchange (the framework's: "
                         "torch-allgather for torchtitan, all-gather for the others)")
    ap.add_argument("--overlap", action="store_true",
                    help="also price the overlapped forward-and-backward pairs (DualPipe, "
                         "DualPipeV, combined 1F1B) with the pair model")
    ap.add_argument("--capacity-gb", type=float, default=None, help="GB per GPU (the preset's)")
    ap.add_argument("--framework", default=given["framework"], choices=FRAMEWORKS,
                    help=f"the training stack the runs are on: priced as Megatron's, it "
                         f"chooses the checks behind each row's error bar "
                         f"({given['framework']})")
    ap.add_argument("--train-metrics", type=int, metavar="N", default=given["train_metrics"],
                    help=f"metrics the training loop computes on each microbatch's logits "
                         f"after its backward, each a PyTorch cross entropy: Composer's, "
                         f"2 for llm-foundry's MPT ({given['train_metrics']})")
    # the Megatron-Core setting the model was validated on, stated flag by flag
    for flag, key, what in (
            ("--gradient-overlap", "gradient_overlap", "overlap the gradient reduction with "
                                                       "the backward, in buckets"),
            ("--sequence-parallel", "sequence_parallel", "Megatron's sequence parallelism "
                                                         "with tensor parallelism"),
            ("--blocking-handoffs", "blocking_handoffs", "Megatron's blocking pipeline "
                                                         "hand-offs (else overlapped)"),
            ("--tp-overlap", "tp_overlap", "overlap tensor parallelism's collectives with "
                                           "the products (TE's userbuffers)")):
        shown = "on" if given[key] else "off"
        ap.add_argument(flag, dest=key, action=argparse.BooleanOptionalAction,
                        default=given[key], help=f"{what} ({shown})")
    ap.add_argument("--objective", choices=ROBUST, default=None,
                    help="rank by the step time under noise: its p95, median, mean or mean + "
                         "lam * std (default: by tokens per second without noise)")
    ap.add_argument("--lam", type=float, default=None,
                    help=f"the weight of the std in mean+std ({given['lam']:g})")
    _noise_args(ap, DEFAULT_SAMPLES, "seed", links_needed=True)
    ap.add_argument("--top", type=int, default=10, help="configurations to print (10)")
    ap.add_argument("--out", default="results", help="folder for plan.parquet, plan.png and "
                    "plan.html (results)")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG and plan.html")


def _stack_arg(hardware, kernel, speed):
    """``hardware`` (a preset: each runs a measured kernel) with the attention of
    ``--attention-kernel`` and ``--attention-speed`` (``fastpp.model.attention``, whose
    refusals ``by_flags`` names by these flags)."""
    from .model.attention import with_attention_kernel, with_attention_speed

    if kernel == "":  # (an empty name had been the GPU's own kernel, unsaid)
        raise ScheduleError("--attention-kernel must name a measured kernel (got '')")
    if kernel is not None:
        hardware = with_attention_kernel(hardware, kernel)
    if speed is not None:
        hardware = with_attention_speed(hardware, speed)
    return hardware


def _plan(args) -> int:
    import time

    from .checks import nonnegative_int
    from .model import HARDWARE, LINKS, plan
    from .model.hardware import preset
    from .model.plan import summary

    if not args.out:  # (Path("") is the current folder)
        raise ScheduleError("--out must be a folder (got '')")
    nonnegative_int(args.top, "--top")  # before the plan, not after it
    out = make_folder(args.out, "--out")
    hardware = preset(HARDWARE, preset_arg(HARDWARE, args.hardware, "--hardware"), "hardware")
    preset_arg(LINKS, args.link, "--link")
    if args.efficiency is not None:
        hardware = hardware.with_efficiency(args.efficiency)
    hardware = _stack_arg(hardware, args.attention_kernel, args.attention_speed)
    if args.capacity_gb is not None and not 0 < args.capacity_gb * 1e9 < math.inf:
        # (plan would name bytes, and a value whose bytes overflow as inf)
        raise ScheduleError(f"--capacity-gb must be finite and > 0 (got {args.capacity_gb:g})")
    noise = _noise(args, None)  # (a plan's pipelines differ: a slow link names its devices)
    _noise_for(args.objective, noise, args.lam)
    start = time.perf_counter()
    df = plan(model_arg(args.model), args.gpus, hardware, seq=args.seq,
              global_batch=args.global_batch,
              link=args.link, schedules=args.schedules, tp=args.tp, pp=args.pp,
              microbatch=args.microbatch, m=args.m, recompute=args.recompute, zero=args.zero,
              layout=args.layout, first_layers=args.first_layers, last_layers=args.last_layers,
              capacity=None if args.capacity_gb is None else args.capacity_gb * 1e9,
              gradient_overlap=args.gradient_overlap, sequence_parallel=args.sequence_parallel,
              blocking_handoffs=args.blocking_handoffs, tp_overlap=args.tp_overlap,
              cp=args.cp, cp_comm=args.cp_comm, zero3=args.zero3, replicate=args.replicate,
              overlap=[False, True] if args.overlap else False, ep=args.ep, etp=args.etp,
              precision=args.precision, node_limit=args.node_limit, imbalance=args.imbalance,
              dispatcher=args.dispatcher, recipe=args.recipe, framework=args.framework,
              train_metrics=args.train_metrics, recompute_modules=args.recompute_modules,
              noise=noise, objective=args.objective, progress=True,
              **_lam(args), **_drawn(args))
    seconds = time.perf_counter() - start
    ran = int(df["step_time"].notna().sum())
    stack = ""
    if args.attention_kernel is not None or args.attention_speed is not None:
        from .model.attention import kernel_of

        stack = (f", attention {kernel_of(hardware)[1]} at {hardware.attention_speed:g}x its "
                 "measured speed")
    print(f"{args.model} on {args.gpus} x {hardware.name} (products up to "
          f"{hardware.efficiency:.0%} of peak{stack}), "
          f"sequence {args.seq}, global batch {args.global_batch}: planned in {seconds:.2f} s "
          f"({ran / seconds:,.0f} simulated configurations per second)\n")
    print(summary(df, args.top))
    # an earlier plan's picture and report go before this one's table comes: interrupted
    # between them, they had been left beside it as if they were its
    for name in ("plan.png", "plan.html"):
        (out / name).unlink(missing_ok=True)
    atomic_write(out / "plan.parquet", lambda tmp: df.to_parquet(tmp, index=False))
    print(f"\ntable: {out / 'plan.parquet'}")
    if not args.no_plots:
        from . import plot

        capacity = hardware.memory_bytes if args.capacity_gb is None else args.capacity_gb * 1e9
        png = plot.plan_scatter(df, out / "plan.png", capacity,
                                title=f"{args.model} on {args.gpus} x {hardware.name}")
        print(f"picture: {png}")
        write_report(out / "plan.parquet", out / "plan.html")
    return 0


# measure()'s keyword arguments the command passes on when given; left out, measure's own
# defaults hold (fastpp.measured imports pandas: not for every command's parser)
# measure's keyword flags: type, help and measure's default, shown in --help (written here:
# importing fastpp.measured for it would load pandas for every command; tests/test_docs.py
# checks them against measure's signature)
MEASURE_FLAGS = {"layers": (int, "MLP blocks, a multiple of p*m", 16),
                 "hidden": (int, "units per block", 256),
                 "microbatch": (int, "samples per microbatch", 256),
                 "device": (str, "cpu (gloo, one thread per rank) or cuda (NCCL, GPU r for "
                                 "rank r)", "cpu"),
                 "warmup": (int, "steps before the profiled one", 1),
                 "timeout": (float, "seconds before hung ranks are killed", 300.0),
                 "probe": (int, "times each stage's full and split backward run after each "
                                "step, timed apart (0: none)", 5),
                 "out": (str, "folder for the traces", "measured")}


def _measure_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--schedule", "-s", metavar="NAME",
                     help=f"a PyTorch class ({', '.join(_torch_classes())}) or a fastpp "
                     "schedule (python -m fastpp list), run from its CSV; 1F1B is measured as "
                     "fastpp's own (Schedule1F1B labels no op)")
    src.add_argument("--from-csv", metavar="FILE", help="a compute-only schedule CSV to run, "
                     "for example one that 'optimize --csv' wrote")
    ap.add_argument("--placement", help=f"with --from-csv: {', '.join(PLACEMENTS)} or a "
                    "schedule name")
    ap.add_argument("-p", type=_count, default=None, help="ranks, one process each (2, or the "
                    "CSV's)")
    ap.add_argument("-n", type=_count, default=None, help="microbatches (4, or the CSV's)")
    ap.add_argument("-m", type=_count, default=None, help="chunks per rank (the schedule's)")
    for key, (kind, what, default) in MEASURE_FLAGS.items():
        ap.add_argument(f"--{key}", type=kind, default=None, help=f"{what} ({default:g})"
                        if isinstance(default, float) else f"{what} ({default})")
    ap.add_argument("--realtime", action="store_true",
                    help="run the ranks under the real-time scheduler (SCHED_FIFO; root), "
                    "ahead of other processes on a shared machine")
    ap.add_argument("--delay", action="append", default=[], metavar="STAGE:KIND:SECONDS[:PROB]",
                    help="sleep SECONDS inside each KIND (F or B) op of virtual stage STAGE, "
                    "with probability PROB (default 1); repeatable")
    ap.add_argument("--link-delay", metavar="SECONDS[:R1:R2]",
                    help="sleep SECONDS before each send over the link between ranks R1 and "
                    "R2 (default the middle link, p//2-1 and p//2), either direction")
    ap.add_argument("--steps", type=_count, default=1,
                    help="profiled steps (more than 1: out/step{k} each, the last reported) "
                    "(%(default)s)")
    ap.add_argument("--costs-from", metavar="DIR",
                    help="also predict the makespan from the costs calibrated on the traces "
                    "in DIR (another schedule's run), each stage priced by the layers it "
                    "holds")
    ap.add_argument("--trace", metavar="FILE",
                    help="write a Perfetto trace of the measured and replayed timelines")
    ap.add_argument("--picture", metavar="PNG",
                    help="write the measured timelines above the replayed ones")


# how `measure` prints each of fastpp.measured.predictions
SAID = {"replayed": "replayed (each op's measured time)",
        "predicted": "predicted (this run's median costs)",
        "predicted from": "predicted (costs of {})"}
SAID_STEPS = "predicted (costs of {}, its steps' median)"


def _placement_needs_csv(args) -> None:
    """``--placement`` is read with ``--from-csv`` alone: refused beside ``--schedule``."""
    if args.placement is not None:
        raise ScheduleError(f"--placement must be given with --from-csv only: --schedule "
                            f"places its own stages (got --placement {args.placement})")


def _measure(args) -> int:
    from pathlib import Path

    from .measured import MeasuredSteps, measure, predictions, read_steps, read_torch_trace
    from .measured.runner import OUT
    from .measured.steps import step_folders

    # what can be refused is refused before the run (minutes), not after it
    will_write(args.trace, "--trace")
    out = Path(args.out if args.out is not None else OUT)
    if args.trace is not None and Path(args.trace).resolve().parent == out.resolve():
        raise ScheduleError(f"--trace must be outside --out {str(out)!r}, whose .json files "
                            f"are read as the ranks' traces (got {args.trace!r})")
    if args.picture is not None:
        require("matplotlib", "plot", "--picture")
        from .plot import check_picture

        check_picture(args.picture, "--picture")
    costs_from = args.costs_from
    if costs_from is not None:  # a run's folder, or that of its steps (--steps N: their median)
        try:
            costs_from = (read_steps(costs_from) if step_folders(costs_from) else
                          read_torch_trace(costs_from))
        except ScheduleError as err:
            raise ScheduleError(f"--costs-from must be the folder of a measured run's traces, "
                                f"or of its steps ({err})") from None
    schedule = args.schedule
    if args.from_csv is None:
        _placement_needs_csv(args)
    else:  # ('' is a path to refuse, not no path)
        from .io import read_torch_csv

        schedule = read_torch_csv(args.from_csv, n=args.n, placement=args.placement)
    ranks = schedule.p if args.from_csv else args.p or 2  # (measure's default p)
    if costs_from is not None and costs_from.schedule.p != ranks:
        raise ScheduleError(f"--costs-from must be a run of this run's {ranks} ranks (got a "
                            f"run of p={costs_from.schedule.p})")
    given = {k: getattr(args, k) for k in MEASURE_FLAGS if getattr(args, k) is not None}
    run = measure(schedule, args.p, args.n, args.m, realtime=args.realtime,
                  delay=args.delay, link_delay=_link_delay(args.link_delay), steps=args.steps,
                  **given)
    if isinstance(run, MeasuredSteps):  # --steps N > 1: one MeasuredRun per step
        print("steps: " + ", ".join(f"{r.makespan * 1e3:.3f}ms" for r in run))
        _distribution(run)
        run = run[-1]
    s = run.schedule
    out = Path(run.files[0]).parent if run.files else args.out
    print(f"{args.schedule or args.from_csv}: p={s.p}, n={s.n}, m={s.m}, {s.num_ops} ops, "
          f"traces in {out}")
    # the slow link's sleeps: this run's costs hold them, another run's do not
    from .measured.runner import link_of

    link = link_of(_link_delay(args.link_delay), s.p)
    slept = run.injected[run.injected > 0]
    if link and not args.delay and slept.size:  # (--delay's sleeps are in injected too)
        # a sleep wakes late: the prediction is given what this run's sleeps took
        print(f"the slow link's {slept.size} sleeps took {slept.mean() * 1e3:.3f} ms on "
              f"average ({link[0] * 1e3:g} ms asked)")
        link = (float(slept.mean()), *link[1:])
    said = {**SAID, "predicted from": SAID_STEPS} if isinstance(costs_from, MeasuredSteps) \
        else SAID
    rows = [(said[k].format(args.costs_from) + (" + the slow link"
                                                if link and k == "predicted from" else ""), v)
            for k, v in predictions(run, costs_from, link).items()]
    width = max(len(what) for what, _ in rows)
    print(f"{'':<{width}} {'makespan':>10} {'error':>8}")
    print(f"{'measured':<{width}} {run.makespan * 1e3:>8.3f}ms")
    for what, value in rows:
        print(f"{what:<{width}} {value * 1e3:>8.3f}ms {value / run.makespan - 1:>+8.2%}")
    if args.delay and costs_from is not None:
        print(f"(--delay's sleeps lie in this run's ops, not in the costs of "
              f"{args.costs_from})")
    if args.trace:
        from .trace import write_measured_trace

        print(f"trace: {write_measured_trace(run, run.replay(), args.trace)} (open in "
              f"ui.perfetto.dev)")
    if args.picture:
        from . import plot

        print(f"picture: {plot.measured_timelines(run, run.replay(), args.picture)}")
    write_report(run, Path(out) / "report.html")
    return 0


def _distribution(steps) -> None:
    """The steps' median and 95th percentile, measured and from a Monte Carlo of their own
    costs and noise (a ``MeasuredSteps``): what a step of this schedule takes, spikes
    included, where the median costs price the calm path."""
    import numpy as np

    drawn = simulate(steps[0].schedule, steps.costs(), noise=steps.noise()).makespan
    for q in (0.5, 0.95):
        real, predicted = np.quantile(steps.makespans, q), np.quantile(drawn, q)
        print(f"p{round(q * 100)} of the steps: measured {real * 1e3:.3f}ms, with the steps' "
              f"own noise {predicted * 1e3:.3f}ms ({predicted / real - 1:+.2%})")


def _link_delay(text):
    """``--link-delay SECONDS[:R1:R2]`` as ``measure``'s ``link_delay``."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        values = [float(parts[0]), *(int(x) for x in parts[1:])]
    except ValueError:
        raise ScheduleError(f"--link-delay must be SECONDS[:R1:R2] (got {text!r})") from None
    if len(values) not in (1, 3):
        raise ScheduleError(f"--link-delay must be SECONDS[:R1:R2] (got {text!r})")
    return values[0] if len(values) == 1 else tuple(values)


def _report(res) -> None:
    s = res.schedule
    print(f"{s.name}: p={s.p}, n={s.n}, m={s.m}, {s.num_ops} ops")
    print(f"makespan {res.makespan:.7g}, bubble {res.bubble_ratio:.2%} (span metric "
          f"{res.span_bubble_ratio:.2%}), throughput {res.throughput:.4g} microbatches per unit")
    print(f"{'device':>6} {'busy':>9} {'idle':>9} {'span':>9} {'peak act.':>10} {'peak live':>10}")
    for r in range(s.p):
        print(f"{r:>6} {res.busy[r]:>9.6g} {res.idle[r]:>9.6g} {res.span[r]:>9.6g} "
              f"{res.peak_activations[r]:>10.6g} {res.peak_live[r]:>10}")


def _report_search(found, lam: float) -> None:
    s = found.schedule
    limit = found.memory
    shown = "none" if not limit.size or not limit.max() < float("inf") else f"{limit.max():g}"
    print(f"optimize: p={s.p}, n={s.n}, {found.placement} placement (m={s.m}), objective "
          f"{found.objective}, memory limit {shown} per device")
    if found.robust is not None:  # no bound under noise: what was ranked, and by what
        mc = found.robust
        objective = found.objective if found.objective != "mean+std" else f"mean + {lam:g} std"
        print(f"best: {objective} {found.value:.6g} under {mc.noise!r} ({mc.samples:,} "
              f"samples, seed {mc.seed}); without noise makespan {found.result.makespan:.6g} "
              f"(bubble {found.bubble:.2%}); found by {found.method}")
        print("no bound is proven under noise: the search ran without it, and each schedule "
              "it offered was ranked by its Monte Carlo")
    else:
        print(f"best: {found.objective} {found.value:.7g} (bubble {found.bubble:.2%}), found "
              f"by {found.method}")
        print(f"lower bound {found.lower_bound:.7g}, gap {_gap(found.gap)}, "
              f"{'proven optimal' if found.optimal else 'not proven optimal: ' + _why(found)}")
    res = found.result
    print(f"{'device':>6} {'busy':>9} {'idle':>9} {'span':>9} {'peak act.':>10}")
    for r in range(s.p):
        print(f"{r:>6} {res.busy[r]:>9.4g} {res.idle[r]:>9.4g} {res.span[r]:>9.4g} "
              f"{res.peak_activations[r]:>10.4g}")


def _gap(gap: float) -> str:
    """A search's gap as a percentage, or where that would read 0.00% but is not 0 (a
    solver's bound of times rounded down), its digits."""
    return f"{gap:.2%}" if gap == 0 or gap >= 5e-5 else f"{gap * 100:.2g}%"


def _why(found) -> str:
    """Why a search ended short of a proof, and what a user can do about it."""
    return {"time limit": "the time limit ran out (a longer --time-limit may close the gap)",
            "heuristic": "--method heuristic runs the candidates alone",
            "search ended": "the search ended within the time limit without closing the gap "
                            "(the bound may be loose)",
            "interrupted": "interrupted: the best schedule found so far"}.get(
                found.stopped, found.stopped)


def _noise_for(objective, noise, lam) -> None:
    """A noisy ``--objective`` needs a noise flag, and ``--lam`` the objective it weighs."""
    if objective in ROBUST and noise is None:
        raise ScheduleError(f"--objective {objective} ranks under noise: give a noise flag "
                            f"too, e.g. --noise (got none)")
    if lam is not None and objective != "mean+std":
        raise ScheduleError(f"--lam weighs the std of --objective mean+std (got --lam {lam:g} "
                            + (f"with --objective {objective})" if objective else
                               "without --objective)"))


def _lam(args) -> dict:
    """``--lam`` as given (the library's default otherwise)."""
    return {} if args.lam is None else {"lam": args.lam}


def _drawn(args) -> dict:
    """The Monte Carlo's samples and seed flags, as given (the library's defaults otherwise)."""
    return {k: v for k, v in (("samples", args.samples),
                              (args.seed_flag, getattr(args, args.seed_flag))) if v is not None}


def _report_noise(args, mc, res) -> None:
    """A Monte Carlo's makespan distribution, its most sensitive delays, and its plots."""
    q = mc.quantile([0.05, 0.5, 0.95, 0.99])
    print(f"\nunder {mc.noise!r}, {mc.samples:,} samples (seed {mc.seed}):")
    print(f"makespan mean {mc.mean:.6g}, std {mc.std:.4g} ({mc.std / mc.mean:.2%}); p5 "
          f"{q[0]:.6g}, p50 {q[1]:.6g}, p95 {q[2]:.6g} ({q[2] / res.makespan - 1:+.2%} on "
          f"{res.makespan:g} without noise), p99 {q[3]:.6g}")
    noise = mc.noise
    if noise.slow_devices or noise.slow_stages or noise.link_delay:  # what is not drawn
        fixed = simulate(mc.schedule, mc.costs, noise=noise.fixed(), samples=1).makespan[0]
        print(f"its slow devices, stages and links alone, nothing drawn: makespan {fixed:.6g}")
    try:
        sensitivity = mc.sensitivity
    except ScheduleError as error:  # (a schedule too large for the paths' scores: said)
        print(f"no sensitivities to delays: {error}")
        sensitivity = {"links": {}, "stages": {}}
    top = sorted(((v, name, k) for what, name in (("links", "link"), ("stages", "stage"))
                  for k, v in sensitivity[what].items()), key=lambda x: -x[0])[:5]
    # each threshold is a bisection over every sample (12 passes of every op): for the five
    # shown alone, and up to ABSORBED op-samples in all (a second or two; a million samples
    # of 32 ops took 32 s, 1,000 of 1F1B at p = 64, n = 1024 minutes)
    work = 12 * len(top) * mc.samples * int(mc.schedule.length.sum())
    absorbed = None if work > ABSORBED else mc.absorption(
        links=[k for _, name, k in top if name == "link"],
        stages=[k for _, name, k in top if name == "stage"])
    if top:
        print("most sensitive to a delay on each of its messages or ops: d mean makespan / "
              "d delay" + (", and the delay that keeps the mean within 1%" if absorbed else
                           f" (the delays that keep the mean within 1%: at most "
                           f"{ABSORBED:.0e} op-samples over their 12 bisection steps, here "
                           f"{work:.1e}: MonteCarlo.absorption())"))
        for v, name, k in top:
            print(f"  {name:<5} {_key(k):<6} {v:>8.3g}"
                  + (f" {absorbed[name + 's'][k]:>10.3g}" if absorbed else ""))
    if args.cdf or args.criticality:
        from . import plot

        if args.cdf:
            print(f"CDF: {_written('--cdf', plot.makespan_cdf, mc, args.cdf)}")
        if args.criticality:
            print(f"criticality: "
                  f"{_written('--criticality', plot.criticality, mc, args.criticality)}")


ABSORBED = 2e8  # the most op-samples simulate's absorption thresholds are found over


def _key(k) -> str:
    return f"{k[0]}-{k[1]}" if isinstance(k, tuple) else str(k)


def _write_outputs(args, res) -> None:
    if args.trace is not None:  # (an empty name is refused, not taken as none)
        from .trace import write_chrome_trace

        print(f"trace: {_written('--trace', write_chrome_trace, res, args.trace)} (open in "
              f"ui.perfetto.dev)")
    if args.csv is not None:  # (an empty name had been taken as none)
        from .io import in_loss_order, write_torch_csv

        # (for PyTorch's runtime: its microbatches named in the order its losses are made)
        print(f"schedule CSV: "
              f"{_written('--csv', write_torch_csv, in_loss_order(res.schedule), args.csv)}")
    if args.gantt is not None or args.memory_png is not None:
        from . import plot

        if args.gantt is not None:
            print(f"Gantt chart: {_written('--gantt', plot.gantt, res, args.gantt)}")
        if args.memory_png is not None:
            print(f"memory curves: {_written('--memory-plot', plot.memory, res, args.memory_png)}")



# ---- explain: one run as users write it (issue 28) ----

def model_arg(text: str):
    """``--model``: a preset name, or a Hugging Face ``config.json`` (or a folder holding
    one); anything else is refused naming what the flag takes (the library's message offers
    a model object, which a command line cannot give)."""
    from .model import MODELS, from_hf

    if text in MODELS:
        return text
    if text.endswith(".json") or os.path.isdir(text):
        try:
            return from_hf(text)
        except ScheduleError as err:  # from_hf's config= is this flag
            raise ScheduleError(by_flags(str(err), {"config": "--model"})) from None
    raise ScheduleError(f"--model must be a preset, one of {sorted(MODELS)}, or a Hugging Face "
                        f"config.json or its folder (got {text!r})")


def preset_arg(table: dict, text: str | None, flag: str) -> str | None:
    """A preset name given to ``flag`` (``--hardware``, ``--link``), or None when not given;
    an unknown one lists the presets, all the flag takes."""
    if text is not None and text not in table:
        raise ScheduleError(f"{flag} must be a preset, one of {sorted(table)} (got {text!r})")
    return text


def _explain_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--megatron", metavar="ARGS", help="Megatron-LM arguments in one string")
    src.add_argument("--megatron-script", metavar="FILE", help="a Megatron-LM launch script")
    src.add_argument("--torchtitan", metavar="FILE", help="a torchtitan TOML job config")
    src.add_argument("--llm-foundry", metavar="FILE", help="an llm-foundry training YAML "
                     "(Composer)")
    src.add_argument("--hf", metavar="CONFIG", help="a Hugging Face config.json (or its "
                     "folder), with the run flags below")
    src.add_argument("--vtrain", metavar="FILE", help="a vTrain configuration (JSON): the "
                     "model, the run and the cluster")
    ap.add_argument("--gpus", type=_count, help="GPUs in all (default: the script's torchrun "
                    "--nproc_per_node x --nnodes)")
    ap.add_argument("--hardware", help="a preset (H100-80GB; with --vtrain the file's "
                    "cluster)")
    ap.add_argument("--model", help="the model instead of the one the run gives (not with "
                    "--hf or --vtrain): a preset or a config.json")
    ap.add_argument("--vocab", type=_count, help="the tokenizer's vocabulary when a Megatron "
                    "script does not say --vocab-size")
    ap.add_argument("--neighbours", type=int, default=5, help="faster runs to list (5)")
    ap.add_argument("--workers", type=_count, help="threads for the search")
    ap.add_argument("--report", metavar="HTML", help="also write the run and its neighbours "
                    "as a report page (a plan table)")
    ap.add_argument("--timeline", action="store_true", help="also print the pipeline's "
                    "timeline, bubbles as dots")
    run = ap.add_argument_group("run flags (with --hf)")
    # default None: a run flag given with another source is refused, not silently dropped
    for flag, default in RUN_FLAGS.items():
        if flag != "--recompute":  # (--zero is 0..3, a count elsewhere)
            run.add_argument(flag, type=int if flag == "--zero" else _count, default=None,
                             help=RUN_HELP[flag] + ("" if default is None else f" ({default})"))
    run.add_argument("--schedule", default=None, help="a training schedule (1f1b, or "
                     "interleaved-1f1b with --m > 1)")
    run.add_argument("--recompute", default=None, choices=["none", "selective", "full"],
                     help="(none)")


# explain's run flags (with --hf) and their defaults
RUN_FLAGS = {"--tp": 1, "--pp": 1, "--cp": 1, "--ep": 1, "--etp": 1, "--m": 1, "--microbatch": 1,
             "--global-batch": None, "--seq": 4096, "--zero": 1, "--replicate": 1,
             "--recompute": "none"}
RUN_HELP = {"--tp": "tensor-parallel degree", "--pp": "pipeline degree",
            "--cp": "context-parallel degree", "--ep": "expert-parallel degree",
            "--etp": "expert-tensor-parallel degree", "--m": "chunks per device",
            "--microbatch": "sequences per microbatch",
            "--global-batch": "sequences per step (default: one microbatch per replica)",
            "--seq": "sequence length", "--zero": "ZeRO stage, 0 to 3",
            "--replicate": "hybrid sharding's groups, each sharding ZeRO over d cp / replicate"}


def _script(path: str) -> str:
    """A launch script's text, or a ScheduleError naming ``--megatron-script``."""
    from pathlib import Path

    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or str(err)
        raise ScheduleError(f"--megatron-script must be a readable text file (got {path!r}: "
                            f"{why})") from None


def _explain(args) -> int:

    from .model import (
        HARDWARE,
        MODELS,
        RunConfig,
        from_hf,
        from_llm_foundry,
        from_megatron,
        from_torchtitan,
        from_vtrain,
    )
    from .model.attention import with_attention_kernel
    from .model.explain import explain
    from .model.hardware import preset
    from .model.hf import approximations
    from .model.megatron import SCHEDULES as MEGATRON_SCHEDULES

    ignored = ()
    hardware = "H100-80GB" if args.hardware is None else preset_arg(HARDWARE, args.hardware,
                                                                     "--hardware")
    megatron = args.megatron is not None or args.megatron_script is not None
    source = next(f"--{k.replace('_', '-')}" for k in ("megatron", "megatron_script",
                                                       "torchtitan", "llm_foundry", "hf",
                                                       "vtrain")
                  if getattr(args, k) is not None)
    if args.vocab is not None and not megatron:
        raise ScheduleError(f"--vocab must be given with --megatron or --megatron-script only: "
                            f"the other sources give the vocabulary (got --vocab {args.vocab} "
                            f"with {source})")
    if args.model is not None and source in ("--hf", "--vtrain"):
        what = "the config.json" if source == "--hf" else "the vTrain configuration"
        raise ScheduleError(f"--model must not be given with {source}: {what} is the model "
                            f"(got --model {args.model} with {source} "
                            f"{args.hf if source == '--hf' else args.vtrain})")
    if args.vtrain is not None and args.hardware is not None:
        raise ScheduleError(f"--hardware must not be given with --vtrain: the file gives the "
                            f"cluster (got --hardware {args.hardware})")
    if args.hf is None:  # the run itself gives them
        given = [flag for flag in (*RUN_FLAGS, "--schedule")
                 if getattr(args, flag[2:].replace("-", "_")) is not None]
        if given:
            raise ScheduleError(f"{given[0]} must be given with --hf only: {source} gives the "
                                f"run (got {' '.join(given)} with {source})")
    else:
        args.global_batch_given = args.global_batch is not None
        for flag, default in RUN_FLAGS.items():
            key = flag[2:].replace("-", "_")
            if getattr(args, key) is None:
                setattr(args, key, default)
    # --model: a preset's name, or a config.json's Transformer (read once)
    shape = None if args.model is None else model_arg(args.model)
    if megatron:
        text = args.megatron if args.megatron is not None else _script(args.megatron_script)
        vocab = args.vocab
        if vocab is None and shape is not None:  # the shape's, which --model gives
            vocab = preset(MODELS, shape, "model").vocab
        imported = from_megatron(text, args.gpus, vocab=vocab)
        model, config, ignored = imported.model, imported.config, imported.ignored
        if args.vocab is None:  # (--model's vocabulary, which its shape replaces below)
            ignored = tuple(x for x in ignored if not x.startswith(f"vocab={vocab}:"))
    elif source in ("--torchtitan", "--llm-foundry"):
        if args.gpus is None:
            raise ScheduleError(f"{source} needs --gpus")
        read, path = ((from_torchtitan, args.torchtitan) if source == "--torchtitan"
                      else (from_llm_foundry, args.llm_foundry))
        imported = read(path, args.gpus, model=shape)
        model, config, ignored = imported.model, imported.config, imported.ignored
        if imported.attention is not None:  # the kernel the run's code runs, where measured
            try:
                hardware = with_attention_kernel(preset(HARDWARE, hardware, "--hardware"),
                                                 imported.attention)
            except ScheduleError as err:
                ignored += (f"attention: {imported.attention} priced as the GPU's own kernel "
                            f"({err})",)
    elif args.vtrain is not None:
        imported = from_vtrain(args.vtrain)
        model, config, ignored, hardware = (imported.model, imported.config, imported.ignored,
                                            imported.hardware)
        if args.gpus is not None and args.gpus != imported.gpus:
            raise ScheduleError(f"--gpus must be the file's num_gpus, {imported.gpus}, or not "
                                f"given (got --gpus {args.gpus})")
    else:
        if args.gpus is None:
            raise ScheduleError("--hf needs --gpus")
        model, ignored = from_hf(args.hf), approximations(args.hf)
        schedule = args.schedule if args.schedule is not None else MEGATRON_SCHEDULES[
            args.m > 1]
        fields = dict(seq=args.seq, t=args.tp, p=args.pp, cp=args.cp, ep=args.ep,
                      etp=args.etp, m=args.m, schedule=schedule, microbatch=args.microbatch,
                      recompute=args.recompute, zero=args.zero, replicate=args.replicate)
        rest = args.tp * args.pp * args.cp
        d = args.gpus // rest if rest and args.gpus % rest == 0 else 1
        # a given 0 is refused, not defaulted; a bad --microbatch is refused as itself
        fields["global_batch"] = (max(args.microbatch, 1) * d if args.global_batch is None
                                  else args.global_batch)
        config = RunConfig.for_gpus(args.gpus, **fields)
    if shape is not None and not isinstance(shape, str):
        # a config.json's shape: what its family leaves out is said, as with --hf
        ignored = (*ignored, *approximations(args.model))
    if shape is not None and megatron:
        # the shape from --model, the kernels from the launch; what it replaces is said
        changed = imported.reshaped(shape)
        if changed:
            print(f"note: --model's shape replaces the launch's ({', '.join(changed)})",
                  file=sys.stderr)
        model = imported.on(shape)
    will_write(args.report, "--report")  # (before the neighbours' plan, not after)
    try:
        flags = ("vtrain" if args.vtrain else "composer" if args.llm_foundry
                 else "torchtitan" if args.torchtitan else "cli" if args.hf else "megatron")
        found = explain(model, config, hardware, neighbours=args.neighbours,
                        workers=args.workers, flags=flags, job=args.torchtitan)
    except ScheduleError as err:  # n comes from --global-batch, whose default is n = 1
        if args.hf is None or args.global_batch_given or "(got n=" not in str(err):
            raise
        raise ScheduleError(f"{err} (--global-batch defaults to one microbatch per pipeline, "
                            f"n = 1: give --global-batch)") from None
    print(found.table())
    if args.timeline:
        print("\n" + found.timeline())
    misspelt = [x for x in ignored if MISSPELT in x]  # said apart: they change the run
    for x in misspelt:
        print(f"\n  check: {x}")
    rest = [x for x in ignored if MISSPELT not in x]
    otherwise = [x for x in rest if "priced as" in x]  # what the run does, priced otherwise
    if otherwise:
        print("\n" + "\n".join(f"  priced otherwise: {x}" for x in otherwise))
    rest = [x for x in rest if "priced as" not in x]  # the flags fastpp does not read,
    keys = [x for x in rest if ": " not in x]  # and what is said of the run, a line each
    if keys:
        print(f"\n  not modelled: {' '.join(keys)}")
    for x in rest:
        if ": " in x:
            print(f"  note: {x}")
    if args.report is not None:
        import pandas as pd

        from .model import PLAN_COLUMNS
        from .reports import report

        rows = pd.DataFrame([found.row, *(found.neighbours or [])])[list(PLAN_COLUMNS)]
        print(f"\nreport: {_written('--report', lambda: report(rows, output=args.report))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
