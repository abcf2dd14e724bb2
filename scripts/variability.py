"""The variability headline: one slow link reverses which schedule is fastest.

    python scripts/variability.py    # prints the table, writes results/variability.{png,html}
    python scripts/variability.py --picture docs/variability.png    # the README's picture

ZB-H2 and 1F1B at p = 8, n = 32 (f = 1, b = 2, w = 1), each op jittered by 5% (lognormal),
without and with a slow link between devices 3 and 4 where the sender holds each message for
the delay (``Noise(link_delay=..., blocking=True)``, as PipeMorph, NSDI'26, injects it). Prints
each case's makespan without jitter, mean and p95, and the delay at which ZB-H2 stops
winning: without jitter, by the mean and by the p95 (bisection, the same draws at every
delay).
Writes ``variability.png`` (the four distributions) and ``variability.html`` (the report:
distributions and criticality).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from fastpp import Costs, Noise, ScheduleError, build_schedule, report, simulate
from fastpp._jit import announce_compiles
from fastpp.checks import by_flags, flag_names, make_folder, until_interrupted, will_write
from fastpp.plot import check_picture, makespan_cdf

COSTS = Costs(f=1.0, b=2.0, w=1.0)
LINK = (3, 4)


def noise(cov: float, delay: float) -> Noise:
    """``cov`` jitter and ``delay`` on ``LINK``, the sender holding each message."""
    return Noise(cov, link_delay={LINK: delay}, blocking=True)


def flip(statistic, high: float, steps: int = 30) -> float:
    """The delay in ``[0, high]`` where ``statistic(delay)`` (ZB-H2's less 1F1B's) turns
    positive, by bisection; NaN if it does not within ``high``."""
    low = 0.0
    if statistic(low) >= 0.0 or statistic(high) < 0.0:
        return float("nan")
    for _ in range(steps):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if statistic(middle) < 0.0 else (low, middle)
    return 0.5 * (low + high)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delay", type=float, default=4.0,
                    help="the slow link's delay per message, in forward times (default 4)")
    ap.add_argument("--cov", type=float, default=0.05,
                    help="each op's coefficient of variation (default 0.05)")
    ap.add_argument("--samples", type=int, default=400, help="samples a case (default 400)")
    ap.add_argument("--seed", type=int, default=0, help="the draws' seed (default 0)")
    ap.add_argument("--out", type=Path, default=Path("results"),
                    help="folder for variability.html, and the picture (default results)")
    ap.add_argument("--picture", type=Path, default=None,
                    help="the picture (default OUT/variability.png)")
    args = ap.parse_args(argv)
    # fastpp's messages name its parameters; these are the flags they came from
    flags = flag_names(ap) | {"link_delay": "--delay"}
    try:
        _run(args)
    except ScheduleError as err:  # a value fastpp refuses: its message, no traceback
        print(f"error: {by_flags(str(err), flags)}", file=sys.stderr)
        return 2
    return 0


def _run(args) -> None:
    # what can be refused is refused before the work, by its flag
    if not math.isfinite(2 * args.delay) or args.delay <= 0:  # (bisected up to twice it)
        raise ScheduleError(f"delay must be a number > 0 whose double is finite (got "
                            f"{args.delay})")
    # (the picture before --out is made: a refusal leaves nothing behind)
    check_picture(args.picture, "--picture")
    make_folder(args.out, "--out")
    picture = args.picture or args.out / "variability.png"
    will_write(picture, "--picture")
    will_write(args.out / "variability.html", "--out")
    schedules = [build_schedule("1f1b", 8, 32), build_schedule("zb-h2", 8, 32)]

    def run(s, cov, delay):
        return simulate(s, COSTS, noise=noise(cov, delay), samples=args.samples, seed=args.seed)

    results = {f"{s.name}, {what}": run(s, args.cov, delay) for what, delay in
               (("no delay", 0.0), (f"link delay {args.delay:g}", args.delay))
               for s in schedules}
    print(f"{'case':<28}{'no jitter':>10}{'mean':>10}{'p95':>10}")
    for label, mc in results.items():
        steady = mc.steady().makespan[0]
        print(f"{label:<28}{steady:>10.1f}{mc.mean:>10.1f}{mc.quantile(0.95):>10.1f}")

    def gap(cov, statistic):
        return lambda delay: (statistic(run(schedules[1], cov, delay))
                              - statistic(run(schedules[0], cov, delay)))

    found = [flip(gap(cov, statistic), 2 * args.delay) for cov, statistic in (
        (0.0, lambda mc: mc.makespan[0]), (args.cov, lambda mc: mc.mean),
        (args.cov, lambda mc: mc.quantile(0.95)))]
    said = [(f"{x:.4f}" if math.isfinite(x) else f"none up to {2 * args.delay:g}") + f" ({by})"
            for x, by in zip(found, ("no jitter", "mean", "p95"), strict=True)]
    print(f"ZB-H2 stops winning at a delay of {', '.join(said)}")
    title = (f"1F1B and ZB-H2 (p=8, n=32, {args.cov:.0%} jitter), without and with a slow "
             f"link")
    print(f"picture: {makespan_cdf(results, picture, title=title)}")
    try:
        print(f"report: {report(results, output=args.out / 'variability.html')}")
    except ImportError as err:
        print(f"no report ({err})")


if __name__ == "__main__":
    with announce_compiles():  # a first run on a machine waits for Numba: said
        # (| head: the files are written still; Ctrl-C: a line, not a traceback)
        sys.exit(until_interrupted(main))
