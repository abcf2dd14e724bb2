"""Measure every PyTorch schedule class on this machine; replay each run and predict it from
the 1F1B run's calibrated costs; run a schedule found by fastpp.optimize for real.

    PYTHONPATH=$PWD python scripts/measure.py                  # p=2, n=4, 5 repeats
    PYTHONPATH=$PWD python scripts/measure.py --repeats 3 --hidden 512

Every PyTorch class (GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble,
DualPipeV) and fastpp's 1F1B through PyTorch's CSV runtime (Schedule1F1B labels no op) run
on the same MLP (``--layers`` blocks of ``--hidden`` units, gloo, one process and one thread
per rank), ``--repeats`` profiled steps each, the schedules interleaved within each repeat so
that the machine's load drifts hit them alike. Per schedule, the medians over the repeats of:
the measured makespan, the replay's error (each op's measured compute) and the error of the
prediction from the same repeat's 1F1B costs (``run.costs()``, then ``simulate``).

Then ``fastpp.optimize`` (V placement, the makespan) with the costs of the ZB-V runs, whose
backward is split, and the schedule it finds runs for real beside 1F1B again: its measured
gain over 1F1B against its predicted gain. Writes the table to results/measured/measured.csv, the
measured against predicted timelines of the found schedule to docs/measured.png and a
Perfetto trace holding both to results/measured-trace.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

import fastpp
from fastpp.measured.runner import TORCH_CLASSES, measure_many


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", type=int, default=2, help="ranks (2)")
    ap.add_argument("-n", type=int, default=4, help="microbatches (4)")
    ap.add_argument("--layers", type=int, default=8, help="MLP blocks (8)")
    ap.add_argument("--hidden", type=int, default=1024, help="units per block (1024)")
    ap.add_argument("--microbatch", type=int, default=16, help="samples per microbatch (16)")
    ap.add_argument("--repeats", type=int, default=5, help="profiled steps per schedule (5)")
    ap.add_argument("--time-limit", type=float, default=5.0, help="optimize's seconds (5)")
    ap.add_argument("--out", default="results/measured", help="folder for the traces")
    ap.add_argument("--picture", default="docs/measured.png")
    ap.add_argument("--trace", default="results/measured-trace.json")
    return ap.parse_args(argv)


def run_repeats(schedules: dict, args, out: Path) -> dict:
    """``{label: [MeasuredRun per repeat]}``, every schedule once per repeat, in one spawn."""
    jobs = {f"{label}@{k}": what for k in range(args.repeats) for label, what in
            schedules.items()}
    runs = measure_many(jobs, args.p, args.n, layers=args.layers, hidden=args.hidden,
                        microbatch=args.microbatch, out=out, timeout=1800)
    return {label: [runs[f"{label}@{k}"] for k in range(args.repeats)] for label in schedules}


def expected(label: str, p: int, n: int) -> fastpp.Schedule:
    name = TORCH_CLASSES.get(label, label)
    return fastpp.build_schedule(name, p, n, fastpp.SCHEDULES[name].default_m)


def main(argv=None) -> int:
    args = parse(argv)
    out = Path(args.out)
    started = time.perf_counter()
    schedules = {"1f1b": "1f1b", **{cls: cls for cls in TORCH_CLASSES}}
    print(f"measuring {len(schedules)} schedules x {args.repeats} repeats: p={args.p}, "
          f"n={args.n}, {args.layers} x {args.hidden} MLP, microbatch {args.microbatch}",
          flush=True)
    runs = run_repeats(schedules, args, out / "classes")
    rows = []
    for label, repeats in runs.items():
        sched = expected(label, args.p, args.n)
        measured = np.array([run.makespan for run in repeats])
        replayed = np.array([run.replay().makespan for run in repeats])
        predicted = np.array([fastpp.simulate(sched, base.costs()).makespan
                              for base in runs["1f1b"]])
        same_order = all(run.schedule.tokens() == sched.tokens() for run in repeats)
        rows.append({"schedule": label, "fastpp": sched.name, "m": sched.m,
                     "order_equal": same_order,
                     "measured_ms": np.median(measured) * 1e3,
                     "spread": (measured.max() - measured.min()) / np.median(measured),
                     "replayed_ms": np.median(replayed) * 1e3,
                     "replay_error": np.median(replayed / measured - 1),
                     "predicted_ms": np.median(predicted) * 1e3,
                     "prediction_error": np.median(predicted / measured - 1)})
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))
    replay = table["replay_error"].abs()
    others = table[table["schedule"] != "1f1b"]["prediction_error"].abs()
    print(f"replay |error|: median {replay.median():.2%}, worst {replay.max():.2%}; "
          f"prediction from 1F1B's costs |error|: median {others.median():.2%}, worst "
          f"{others.max():.2%}")

    # a schedule found by optimize on the ZB-V runs' costs, run for real beside 1F1B
    costs = runs["ScheduleZBVZeroBubble"][int(np.argsort(
        [r.makespan for r in runs["ScheduleZBVZeroBubble"]])[args.repeats // 2])].costs()
    found = fastpp.optimize(args.p, args.n, costs, placement="v", time_limit=args.time_limit,
                            progress=False)
    baseline = fastpp.simulate(fastpp.build_schedule("1f1b", args.p, args.n), costs).makespan
    predicted_gain = 1 - found.result.makespan / baseline
    print(f"optimize (V placement, ZB-V's costs): {found.schedule.name} by {found.method}, "
          f"predicted {found.result.makespan * 1e3:.3f} ms against 1F1B's {baseline * 1e3:.3f}"
          f" ms: gain {predicted_gain:+.1%}", flush=True)
    again = run_repeats({"1f1b": "1f1b", "optimized": found.schedule}, args, out / "optimized")
    ratio = [o.makespan / b.makespan for o, b in zip(again["optimized"], again["1f1b"],
                                                    strict=True)]
    measured_gain = 1 - float(np.median(ratio))
    print(f"measured: optimized {np.median([r.makespan for r in again['optimized']]) * 1e3:.3f}"
          f" ms against 1F1B's {np.median([r.makespan for r in again['1f1b']]) * 1e3:.3f} ms:"
          f" gain {measured_gain:+.1%} (median over {args.repeats} paired repeats)")

    out.mkdir(parents=True, exist_ok=True)
    print(f"table: {out / 'measured.csv'}")
    table.to_csv(out / "measured.csv", index=False)
    median_run = again["optimized"][int(np.argsort(ratio)[args.repeats // 2])]
    prediction = fastpp.simulate(median_run.schedule, costs)
    from fastpp import plot
    from fastpp.trace import write_measured_trace

    Path(args.picture).parent.mkdir(parents=True, exist_ok=True)
    print(f"picture: {plot.measured_timelines(median_run, prediction, args.picture)}")
    Path(args.trace).parent.mkdir(parents=True, exist_ok=True)
    print(f"trace: {write_measured_trace(median_run, prediction, args.trace)}")
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
