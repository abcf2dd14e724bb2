"""The memory/bubble frontier: the best schedule fastpp finds at every activation budget.

    python scripts/frontier.py                      # Zero Bubble's 1.5B setting, p=8, n=24
    python scripts/frontier.py -p 16 -n 48 --f 11.347 --b 19.38 --w 8.132 --comm 0.377
    python scripts/frontier.py --objective span --time-limit 1

For the loop placement (one stage per device) and the V placement (two, as ZB-V), searches
(fastpp.optimize: the Zero Bubble heuristic, then local search) at a few dozen memory budgets
from the smallest that any schedule fits to unlimited, and simulates the registered schedules
(1F1B, ZB-H1, ZB-H2, interleaved 1F1B, ZB-V, V-Half, V-Min, DualPipeV) as points on the same
axes. Memory is in units of one microbatch's activations on a device of a plain pipeline (the
paper's M_B). Prints the table, writes results/frontier.parquet, results/frontier.png and the
interactive report results/frontier.html.
Defaults: the paper's profiled 1.5B model (appendix table; milliseconds), its sequence 1024.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import fastpp
from fastpp._jit import announce_compiles
from fastpp.checks import (
    atomic_write,
    by_flags,
    flag_names,
    make_folder,
    positive_int,
    seconds_flag,
    until_interrupted,
)
from fastpp.reports import write_report

FIXED = {"loop": [("1f1b", 1), ("zb-h1", 1), ("zb-h2", 1), ("interleaved-1f1b", 2)],
         "v": [("zbv", 2), ("v-half", 2), ("v-min", 2), ("dualpipev", 2)]}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-p", type=int, default=8, help="devices (8)")
    ap.add_argument("-n", type=int, default=24, help="microbatches (24)")
    ap.add_argument("--f", type=float, default=18.522, help="forward time (18.522 ms)")
    ap.add_argument("--b", type=float, default=18.086 + 9.337,
                    help="full backward time, input plus weight gradient (27.423 ms)")
    ap.add_argument("--w", type=float, default=9.337, help="weight-gradient part (9.337 ms)")
    ap.add_argument("--comm", type=float, default=0.601, help="hand-off latency (0.601 ms)")
    ap.add_argument("--hidden", type=int, default=2304, help="hidden size, for gamma (2304)")
    ap.add_argument("--heads", type=int, default=24, help="attention heads, for gamma (24)")
    ap.add_argument("--seq", type=int, default=1024, help="sequence length, for gamma (1024)")
    ap.add_argument("--budgets", type=int, default=24,
                    help="memory budgets per placement besides 'unlimited' (24)")
    ap.add_argument("--objective", choices=["makespan", "span"], default="makespan",
                    help="what each search minimises: the makespan, or the largest per-device "
                         "span (makespan)")
    ap.add_argument("--time-limit", type=seconds_flag, default=0.5,
                    help="seconds of search per budget (0.5)")
    ap.add_argument("--threads", type=int, default=2, help="searches at once (2)")
    ap.add_argument("--out", type=Path, default=Path("results"), help="folder (results/)")
    args = ap.parse_args(argv)
    args.flags = flag_names(ap)  # to name in fastpp's messages the flags, not its parameters
    # sizes fastpp never sees (gamma's inputs, the grid, the pool) are checked here
    for flag, least in (("hidden", 1), ("heads", 1), ("seq", 1), ("budgets", 0),
                        ("threads", 1)):
        if getattr(args, flag) < least:
            ap.error(f"--{flag} must be an integer >= {least} (got {getattr(args, flag)})")
    # every search splits the backward (else its first one says so); a --b or --w that is no
    # time at all is Costs's to name, below
    if math.isfinite(args.b) and args.b > 0 and math.isfinite(args.w) and args.w > args.b:
        ap.error(f"--w must be <= --b: the searches split each backward into I and W (got "
                 f"--w={args.w:g}, --b={args.b:g})")
    if args.out.exists() and not args.out.is_dir():  # (checked before the searches)
        ap.error(f"--out must be a folder (got the file {str(args.out)!r})")
    if args.budgets > MAX_BUDGETS:  # (10**12 asked NumPy for 7 TiB of grid)
        ap.error(f"--budgets must be at most {MAX_BUDGETS:,}, a search each (got "
                 f"{args.budgets:,})")
    return args


MAX_BUDGETS = 10_000  # budgets per placement: each is a search of --time-limit seconds


def gamma_of(h: int, a: int, seq: int) -> float:
    """M_W / M_B of a transformer layer, Zero Bubble Table 1: 32h / (34h + 5 a seq)."""
    return 32 * h / (34 * h + 5 * a * seq)


def budgets(p: int, count: int, placement: str) -> list[float | None]:
    """From the least any schedule needs (1 unit) to past what the greedy ever holds."""
    top = 2 * p if placement == "loop" else p + 1
    grid = np.unique(np.round(np.concatenate([np.linspace(1, top, count),
                                              [p, 1.5 * p] if placement == "loop" else
                                              [(p + 4) // 3, (p + 2) // 2, p]]), 6))
    return [float(x) for x in grid] + [None]


def fixed_rows(p, n, costs, objective):
    rows = []
    for placement, names in FIXED.items():
        for name, m in names:
            if fastpp.SCHEDULES[name].reasons(p, n, m, p)[0]:
                continue
            res = fastpp.simulate(fastpp.build_schedule(name, p, n, m), costs)
            rows.append(row(placement, "fixed", name, None, res, objective))
    return rows


def row(placement, kind, name, limit, res, objective, found=None):
    return {"placement": placement, "kind": kind, "schedule": name,
            "memory_limit": np.inf if limit is None else limit,
            "peak_activations_max": float(res.peak_activations.max()),
            "makespan": res.makespan, "bubble_ratio": res.bubble_ratio,
            "span_bubble_ratio": res.span_bubble_ratio,
            "objective": objective,
            "lower_bound": np.nan if found is None else found.lower_bound,
            "gap": np.nan if found is None else found.gap,
            "optimal": bool(found is not None and found.optimal)}


def main(argv=None) -> int:
    args = parse(argv)
    try:
        return _run(args)
    except fastpp.ScheduleError as err:  # a flag fastpp refuses: its message, no traceback
        print(f"error: {by_flags(str(err), args.flags)}", file=sys.stderr)
        return 2


def _run(args) -> int:
    import pandas as pd
    from tqdm import tqdm

    # checked before the searches start their bar (optimize would check them in each one)
    p, n = positive_int(args.p, "p"), positive_int(args.n, "n")
    costs = fastpp.Costs(args.f, args.b, w=args.w, comm=args.comm,
                         gamma=gamma_of(args.hidden, args.heads, args.seq))
    make_folder(args.out, "--out")  # before the searches, whose work a bad folder would lose
    t0 = time.perf_counter()
    jobs = [(placement, limit) for placement in ("loop", "v")
            for limit in budgets(p, args.budgets, placement)]

    def search(job):
        placement, limit = job
        found = fastpp.optimize(p, n, costs, memory=limit, placement=placement,
                                objective=args.objective, method="auto",
                                time_limit=args.time_limit, progress=False)
        return row(placement, "search", found.method, limit, found.result, args.objective,
                   found)

    with ThreadPoolExecutor(args.threads) as pool:
        rows = list(tqdm(pool.map(search, jobs), total=len(jobs), desc="budgets",
                         leave=False))
    rows += fixed_rows(p, n, costs, args.objective)
    table = pd.DataFrame(rows)
    elapsed = time.perf_counter() - t0
    atomic_write(args.out / "frontier.parquet", lambda tmp: table.to_parquet(tmp, index=False))
    print(f"p={p}, n={n}, f={args.f:g}, b={args.b:g}, w={args.w:g}, comm={args.comm:g}, "
          f"gamma={costs.gamma:.4f}; objective {args.objective}; {len(jobs)} searches in "
          f"{elapsed:.1f} s")
    shown = table.assign(memory_limit=table.memory_limit.replace(np.inf, np.nan))
    with pd.option_context("display.width", 120, "display.max_rows", 200):
        print(shown[["placement", "kind", "schedule", "memory_limit", "peak_activations_max",
                     "bubble_ratio", "span_bubble_ratio", "gap", "optimal"]]
              .to_string(index=False, float_format=lambda x: f"{x:.4f}", na_rep="-"))
    picture(table, args.out / "frontier.png", p, n, args.objective)
    print(f"table: {args.out / 'frontier.parquet'}; picture: {args.out / 'frontier.png'}")
    write_report(args.out / "frontier.parquet", args.out / "frontier.html")
    return 0


def picture(table, path, p, n, objective):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = "bubble_ratio" if objective == "makespan" else "span_bubble_ratio"
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = {"loop": "tab:blue", "v": "tab:orange"}
    for placement, color in colors.items():
        found = table[(table.kind == "search") & (table.placement == placement)]
        found = found.sort_values("peak_activations_max")
        best = np.minimum.accumulate(found[metric].to_numpy())  # more memory never hurts
        ax.step(found.peak_activations_max, best, where="post", color=color,
                label=f"search, {placement} placement")
        ax.plot(found.peak_activations_max, found[metric], ".", color=color, alpha=0.5)
        fixed = table[(table.kind == "fixed") & (table.placement == placement)]
        ax.scatter(fixed.peak_activations_max, fixed[metric], marker="D", color=color,
                   edgecolor="black", zorder=3)
        for _, r in fixed.iterrows():
            ax.annotate(r.schedule, (r.peak_activations_max, r[metric]), fontsize=8,
                        xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("peak activation memory per device (units of M_B)")
    ax.set_ylabel(f"bubble rate ({'makespan' if objective == 'makespan' else 'span'} metric)")
    ax.set_title(f"Best bubble at each memory budget, p={p}, n={n}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)


if __name__ == "__main__":
    with announce_compiles():  # a first run on a machine waits for Numba: said
        # (| head: the files are written still; Ctrl-C: a line, not a traceback)
        sys.exit(until_interrupted(main))
