"""Measure every PyTorch schedule class on this machine; replay each run and predict it from
the 1F1B run's calibrated costs; run a schedule found by fastpp.optimize for real.

    PYTHONPATH=$PWD python scripts/measure.py                  # p=2, n=4, 20 steps
    PYTHONPATH=$PWD python scripts/measure.py --steps 5 --hidden 512
    PYTHONPATH=$PWD python scripts/measure.py --reread results/measured  # price kept steps again

Every PyTorch class (GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble,
DualPipeV) and fastpp's 1F1B through PyTorch's CSV runtime (Schedule1F1B labels no op) run
on the same MLP (``--layers`` blocks of ``--hidden`` units, gloo, one process and one thread
per rank), ``--steps`` profiled steps each, one step of each schedule in turn
(``round_robin=True``) so that the machine's load drifts hit them alike. Per schedule, the
medians over the steps of: the measured makespan, the replay's error (each op's measured
compute) and the error of the prediction from the same turn's 1F1B costs
(``run.costs(schedule=...)``: each of the schedule's stages priced by the layers it holds,
the operators' time scaled by the chunk and each op kind's fixed time in ``overhead``, then
``simulate``) and from the costs of the other schedule of the same kind (chunks per device,
split backward or not), moved alike. And the distribution: 1F1B's steps together
(``MeasuredSteps.costs(schedule=...)`` and ``.noise()``, each
op's own variability bootstrapped from them) give a Monte Carlo of every schedule, whose
median and 95th percentile are set against the class's measured ones. Where op times spike,
a step's makespan pays for the spikes on its critical path, which per-kind medians leave out:
the deterministic prediction then comes out fast, the Monte Carlo's median does not.

Then ``fastpp.optimize`` (V placement, the makespan, 1.5x 1F1B's activation memory) with the costs
of the median ZB-V run, whose backward is split, and the schedule it finds runs for real
beside 1F1B and ZB-V: its measured gains over them against its predicted gains (1F1B
predicted from its own median run's costs). Writes the table to results/measured/measured.csv, the
measured against predicted timelines of the found schedule to docs/measured.png and a
Perfetto trace holding both to results/measured-trace.json, and the found schedule's run as an
interactive report to results/measured/report.html.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import fastpp
from fastpp._jit import announce_compiles
from fastpp.checks import (
    atomic_write,
    by_flags,
    make_folder,
    memory_limit_flag,
    positive_int,
    seconds_flag,
    until_interrupted,
    will_write,
)
from fastpp.measured.runner import TORCH_CLASSES, measure_many, realtime_denied, torch_order
from fastpp.measured.steps import step_folders
from fastpp.plot import check_picture
from fastpp.reports import write_report
from fastpp.search.problem import Problem


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", type=int, default=2, help="ranks (2)")
    ap.add_argument("-n", type=int, default=4, help="microbatches (4)")
    ap.add_argument("--layers", type=int, default=16, help="MLP blocks (16)")
    ap.add_argument("--hidden", type=int, default=256, help="units per block (256)")
    ap.add_argument("--microbatch", type=int, default=256, help="samples per microbatch (256)")
    ap.add_argument("--no-realtime", dest="realtime", action="store_false",
                    help="ranks under the normal scheduler (default: SCHED_FIFO where this "
                    "process may take it: root or CAP_SYS_NICE)")
    ap.add_argument("--steps", type=int, default=20,
                    help="profiled steps per schedule, in turn (20)")
    ap.add_argument("--time-limit", type=seconds_flag, default=5.0,
                    help="optimize's seconds (5)")
    ap.add_argument("--memory-limit", default="1.5p", metavar="LIMIT",
                    help="optimize's activation memory per device, units of M_B, or a "
                         "multiple of p such as 1.5p (1.5p)")
    ap.add_argument("--out", default="results/measured",
                    help="folder for the traces (results/measured)")
    ap.add_argument("--picture", default="docs/measured.png",
                    help="the found schedule's measured and predicted timelines "
                         "(docs/measured.png)")
    ap.add_argument("--trace", default="results/measured-trace.json",
                    help="a Perfetto trace of both (results/measured-trace.json)")
    ap.add_argument("--timeout", type=float, default=1800.0,
                    help="seconds before hung ranks are killed (1800)")
    ap.add_argument("--reread", metavar="OUT", default=None,
                    help="price the steps an earlier run kept in OUT/classes again, with this "
                         "code: its table only, nothing run")
    return ap.parse_args(argv)


def run_steps(schedules: dict, args, out: Path) -> dict:
    """``{label: [MeasuredRun per step]}``: a step of every schedule in turn, in one spawn."""
    runs = measure_many(schedules, args.p, args.n, layers=args.layers, hidden=args.hidden,
                        microbatch=args.microbatch, out=out, timeout=args.timeout,
                        realtime=args.realtime and not realtime_denied(), steps=args.steps,
                        round_robin=True)
    return {label: list(runs[label]) if args.steps > 1 else [runs[label]]
            for label in schedules}


SAMPLES = 4000  # Monte Carlo samples of each schedule's step
# the other schedule of the same kind (chunks per device, split backward or not)
SAME_KIND = {"ScheduleGPipe": "1f1b", "ScheduleInterleaved1F1B": "ScheduleLoopedBFS",
             "ScheduleLoopedBFS": "ScheduleInterleaved1F1B",
             "ScheduleInterleavedZeroBubble": "ScheduleZBVZeroBubble",
             "ScheduleZBVZeroBubble": "ScheduleInterleavedZeroBubble",
             "ScheduleDualPipeV": "ScheduleZBVZeroBubble", "1f1b": "ScheduleGPipe"}


def read_steps(folder: Path, labels) -> dict:
    """``run_steps``'s result read again from the traces a run kept in ``folder`` (one folder
    per label, ``step0``, ``step1``, ... in it), so that kept runs are priced by later code."""
    runs = {}
    for label in labels:
        steps = step_folders(folder / label)
        if not steps:
            raise fastpp.ScheduleError(f"--reread must name a folder of a scripts/measure.py "
                                       f"run: {folder / label} holds no step")
        runs[label] = [fastpp.read_torch_trace(step) for step in steps]
    counts = {len(steps) for steps in runs.values()}
    if len(counts) != 1:  # step k of each class is paired with 1F1B's step k
        raise fastpp.ScheduleError(f"--reread must name a run whose classes kept one number of "
                                   f"steps (got {sorted(counts)})")
    return runs


def expected(label: str, p: int, n: int) -> fastpp.Schedule:
    """The order ``label`` ran: a PyTorch class's as ``measure`` builds it (interleaved
    1F1B's rounds of ``n // max(1, n // p)``; the default ``G = p`` refused ``-p 3 -n 8``
    after every class had run)."""
    if label in TORCH_CLASSES:
        return torch_order(label, p, n)
    return fastpp.build_schedule(label, p, n, fastpp.SCHEDULES[label].default_m)


def class_table(runs: dict, p: int, n: int) -> pd.DataFrame:
    """One row per schedule: the medians over the steps of the measured makespan, the
    replay's error, the error of the prediction from 1F1B's costs and from the same kind's;
    then the median and 95th percentile of a Monte Carlo of 1F1B's steps together (their
    ``costs(schedule=...)``, each stage priced by its layers, and ``noise()``) against the
    schedule's measured ones."""
    calibration = fastpp.MeasuredSteps(runs["1f1b"])
    noise = calibration.noise()
    rows = []
    for label, steps in runs.items():
        sched = expected(label, p, n)
        measured = np.array([run.makespan for run in steps])
        # each prediction prices sched's stages by the layers they hold (costs' schedule)
        drawn = fastpp.simulate(sched, calibration.costs(schedule=sched), noise=noise,
                                samples=SAMPLES).makespan
        replayed = np.array([run.replay().makespan for run in steps])
        # each step predicted from the same turn's other run: the load drifts
        predicted = np.array([fastpp.simulate(sched, base.costs(schedule=sched)).makespan
                              for base in runs["1f1b"]])
        kin = np.array([fastpp.simulate(sched, base.costs(schedule=sched)).makespan
                        for base in runs[SAME_KIND[label]]])
        same_order = all(run.schedule.tokens() == sched.tokens() for run in steps)
        rows.append({"schedule": label, "fastpp": sched.name, "m": sched.m,
                     "order_equal": same_order,
                     "measured_ms": np.median(measured) * 1e3,
                     "spread": (measured.max() - measured.min()) / np.median(measured),
                     "replayed_ms": np.median(replayed) * 1e3,
                     "replay_error": np.median(replayed / measured - 1),
                     "predicted_ms": np.median(predicted) * 1e3,
                     "prediction_error": np.median(predicted / measured - 1),
                     "same_kind": SAME_KIND[label],
                     "same_kind_error": np.median(kin / measured - 1),
                     "p50_predicted_ms": np.median(drawn) * 1e3,
                     "p50_error": np.median(drawn) / np.median(measured) - 1,
                     "p95_error": np.quantile(drawn, 0.95) / np.quantile(measured, 0.95) - 1})
    return pd.DataFrame(rows)


def print_table(table: pd.DataFrame) -> None:
    """The table, the errors' medians and worst cases, and whether every class is within 5%."""
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    replay = table["replay_error"].abs()
    others = table[table["schedule"] != "1f1b"]["prediction_error"].abs()
    kin = table["same_kind_error"].abs()
    print(f"replay |error|: median {replay.median():.2%}, worst {replay.max():.2%}; "
          f"prediction from 1F1B's costs |error|: median {others.median():.2%}, worst "
          f"{others.max():.2%}; from the same kind's: median {kin.median():.2%}, worst "
          f"{kin.max():.2%}")
    late = table.loc[others[others > 0.05].index, "schedule"].tolist()
    print(f"every class within 5% (median over the steps) from 1F1B's costs: "
          f"{'yes' if not late else 'no: ' + ', '.join(late)}")
    p50 = table[table["schedule"] != "1f1b"]["p50_error"].abs()
    late = table.loc[p50[p50 > 0.05].index, "schedule"].tolist()
    print(f"with 1F1B's steps' noise ({SAMPLES} samples): p50 |error| median {p50.median():.2%}, "
          f"worst {p50.max():.2%}; every class's p50 within 5%: "
          f"{'yes' if not late else 'no: ' + ', '.join(late)}")


def median_run(runs):
    """The run of median makespan among ``runs``."""
    return runs[int(np.argsort([r.makespan for r in runs])[len(runs) // 2])]


def run_optimized(runs: dict, args, out: Path):
    """A schedule found by optimize on the ZB-V runs' costs within 1.5x 1F1B's activation
    memory (holding many more live activations slows every op here: they leave the cache),
    run for real beside 1F1B and ZB-V, its predicted and measured gains printed (1F1B
    predicted from its own runs' costs). Returns ``(found, ZB-V's costs, the new runs)``."""
    costs = median_run(runs["ScheduleZBVZeroBubble"]).costs()
    memory = memory_limit_flag(args.memory_limit, args.p)
    found = fastpp.optimize(args.p, args.n, costs, memory=memory, placement="v",
                            time_limit=args.time_limit, progress=False)
    baseline = fastpp.simulate(expected("1f1b", args.p, args.n),
                               median_run(runs["1f1b"]).costs()).makespan
    zbv = fastpp.simulate(expected("ScheduleZBVZeroBubble", args.p, args.n), costs).makespan
    predicted = found.result.makespan
    print(f"optimize (V placement, ZB-V's costs, memory {memory:g} units): "
          f"{found.schedule.name} by {found.method}, predicted {predicted * 1e3:.2f} ms; "
          f"1F1B predicted {baseline * 1e3:.2f} ms from its own costs, ZB-V {zbv * 1e3:.2f} ms: "
          f"gain over 1F1B {1 - predicted / baseline:+.1%}, over ZB-V {1 - predicted / zbv:+.1%}",
          flush=True)
    again = run_steps({"1f1b": "1f1b", "ScheduleZBVZeroBubble": "ScheduleZBVZeroBubble",
                         "optimized": found.schedule}, args, out / "optimized")
    medians = {label: float(np.median([r.makespan for r in again[label]])) for label in again}
    gains = {label: 1 - float(np.median([o.makespan / b.makespan for o, b in zip(
        again["optimized"], again[label], strict=True)])) for label in ("1f1b",
                                                                        "ScheduleZBVZeroBubble")}
    print(f"measured: optimized {medians['optimized'] * 1e3:.2f} ms, 1F1B "
          f"{medians['1f1b'] * 1e3:.2f} ms, ZB-V {medians['ScheduleZBVZeroBubble'] * 1e3:.2f} "
          f"ms: gain over 1F1B {gains['1f1b']:+.1%}, over ZB-V "
          f"{gains['ScheduleZBVZeroBubble']:+.1%} (medians over {args.steps} paired steps)")
    return found, costs, again


def write_outputs(table: pd.DataFrame, found, costs, again: dict, args, out: Path) -> None:
    """The table as CSV; the found schedule's median run against its prediction from ZB-V's
    costs as a picture, a Perfetto trace and an interactive report."""
    out.mkdir(parents=True, exist_ok=True)
    print(f"table: {out / 'measured.csv'}")
    atomic_write(out / "measured.csv", lambda tmp: table.to_csv(tmp, index=False))
    shown = median_run(again["optimized"])
    prediction = fastpp.simulate(shown.schedule, costs)
    from fastpp import plot
    from fastpp.trace import write_measured_trace

    title = (f"fastpp.optimize's schedule ({found.schedule.name}), p={args.p}, n={args.n}: "
             f"measured {shown.makespan * 1e3:.1f} ms (upper rows), predicted from ZB-V's "
             f"costs {prediction.makespan * 1e3:.1f} ms (lower rows)")
    print(f"picture: {plot.measured_timelines(shown, prediction, args.picture, title)}")
    print(f"trace: {write_measured_trace(shown, prediction, args.trace)}")
    write_report(shown, out / "report.html")


def main(argv=None) -> int:
    args = parse(argv)
    try:
        return _run(args)
    except fastpp.ScheduleError as err:  # a flag or a folder: the message, no traceback
        print(f"error: {by_flags(str(err), {'timeout': '--timeout'})}", file=sys.stderr)
        return 2


def _run(args) -> int:
    # before the runs (minutes), not after them: the memory limit's form and what any V
    # schedule needs (in M_B), the step count, the outputs
    Problem.build(args.p, args.n, None, memory_limit_flag(args.memory_limit, args.p), "v",
                  "makespan")
    positive_int(args.steps, "--steps")
    if args.reread is None:  # (their folders made here, as the outputs would make them)
        make_folder(Path(args.picture).parent, "--picture's folder")
        check_picture(args.picture, "--picture")
        make_folder(Path(args.trace).parent, "--trace's folder")
        will_write(args.trace, "--trace")
    out = Path(args.out)
    started = time.perf_counter()
    schedules = {"1f1b": "1f1b", **{cls: cls for cls in TORCH_CLASSES}}
    if args.reread is not None:
        runs = read_steps(Path(args.reread) / "classes", schedules)
        first = runs["1f1b"][0].schedule
        print(f"read again: {len(schedules)} schedules x {len(runs['1f1b'])} steps, p={first.p}, "
              f"n={first.n}", flush=True)
        print_table(class_table(runs, first.p, first.n))
        return 0
    print(f"measuring {len(schedules)} schedules x {args.steps} steps in turn: p={args.p}, "
          f"n={args.n}, {args.layers} x {args.hidden} MLP, microbatch {args.microbatch}",
          flush=True)
    runs = run_steps(schedules, args, out / "classes")
    table = class_table(runs, args.p, args.n)
    print_table(table)
    found, costs, again = run_optimized(runs, args, out)
    write_outputs(table, found, costs, again, args, out)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    with announce_compiles():  # a first run on a machine waits for Numba: said
        # (Ctrl-C: a line, not a traceback; the ranks are killed and their folder removed)
        raise SystemExit(until_interrupted(main))
