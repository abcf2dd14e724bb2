"""The command line: ``python -m fastpp {simulate, show, list}``."""

from __future__ import annotations

import argparse
import sys

from . import SCHEDULES, Costs, ScheduleError, build_schedule, simulate


def _schedule_args(ap: argparse.ArgumentParser) -> None:
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--schedule", "-s", metavar="NAME", help="a registered schedule "
                     "(python -m fastpp list)")
    src.add_argument("--from-csv", metavar="FILE", help="a PyTorch compute-only schedule CSV")
    ap.add_argument("-p", type=int, help="devices (with --schedule)")
    ap.add_argument("-n", type=int, help="microbatches (with --schedule; optional with a CSV)")
    ap.add_argument("-m", type=int, default=None, help="chunks per device (default: 1, or 2 "
                    "for V schedules)")
    ap.add_argument("-G", type=int, default=None, help="interleaved 1F1B's group size")
    ap.add_argument("--placement", help="with --from-csv: loop, v, two-directions or a "
                    "schedule name")


def _schedule(args, ap):
    if args.from_csv:
        from .io import read_torch_csv

        return read_torch_csv(args.from_csv, n=args.n, placement=args.placement)
    if args.p is None or args.n is None:
        ap.error("--schedule needs -p and -n")
    spec = SCHEDULES.get(args.schedule)
    m = args.m if args.m is not None else (2 if spec and spec.placement == "v" else 1)
    options = {} if args.G is None else {"G": args.G}
    return build_schedule(args.schedule, args.p, args.n, m, **options)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fastpp",
                                 description="Simulate pipeline-parallel training schedules.")
    sub = ap.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="simulate a schedule and report times and memory")
    _schedule_args(sim)
    sim.add_argument("--f", type=float, default=1.0, help="forward time per device (1)")
    sim.add_argument("--b", type=float, default=2.0, help="full backward time per device (2)")
    sim.add_argument("--w", type=float, default=0.0, help="weight-grad part of b (0)")
    sim.add_argument("--comm", type=float, default=0.0, help="hand-off latency (0)")
    sim.add_argument("--gamma", type=float, default=1.0, help="M_W / M_B (1)")
    sim.add_argument("--fb", type=float, default=None, help="overlapped F&B pair (f + b)")
    sim.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace (JSON)")
    sim.add_argument("--gantt", metavar="PNG", help="write a Gantt chart")
    sim.add_argument("--memory", metavar="PNG", help="write the memory curves")
    sim.add_argument("--csv", metavar="FILE", help="write the schedule as PyTorch CSV")
    show = sub.add_parser("show", help="print a schedule's per-device grid")
    _schedule_args(show)
    sub.add_parser("list", help="list the registered schedules and their constraints")
    args = ap.parse_args(argv)

    try:
        if args.command == "list":
            width = max(map(len, SCHEDULES))
            for name, spec in SCHEDULES.items():
                print(f"{name:<{width}}  {spec.summary}\n{'':<{width}}  constraints: "
                      f"{spec.describe()}")
            return 0
        sched = _schedule(args, ap)
        if args.command == "show":
            print(sched)
            return 0
        res = simulate(sched, Costs(args.f, args.b, args.w, args.comm, args.gamma, args.fb))
        _report(res)
        _write_outputs(args, res)
    except (ScheduleError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def _report(res) -> None:
    s = res.schedule
    print(f"{s.name}: p={s.p}, n={s.n}, m={s.m}, {s.num_ops} ops")
    print(f"makespan {res.makespan:g}, bubble {res.bubble_ratio:.2%} (span metric "
          f"{res.span_bubble_ratio:.2%}), throughput {res.throughput:.4g} microbatches per unit")
    print(f"{'device':>6} {'busy':>9} {'idle':>9} {'span':>9} {'peak act.':>10} {'peak live':>10}")
    for r in range(s.p):
        print(f"{r:>6} {res.busy[r]:>9.4g} {res.idle[r]:>9.4g} {res.span[r]:>9.4g} "
              f"{res.peak_activations[r]:>10.4g} {res.peak_live[r]:>10}")


def _write_outputs(args, res) -> None:
    if args.trace:
        from .trace import write_chrome_trace

        print(f"trace: {write_chrome_trace(res, args.trace)} (open in ui.perfetto.dev)")
    if args.csv:
        from .io import write_torch_csv

        print(f"schedule CSV: {write_torch_csv(res.schedule, args.csv)}")
    if args.gantt or args.memory:
        from . import plot

        if args.gantt:
            print(f"Gantt chart: {plot.gantt(res, args.gantt)}")
        if args.memory:
            print(f"memory curves: {plot.memory(res, args.memory)}")


if __name__ == "__main__":
    sys.exit(main())
