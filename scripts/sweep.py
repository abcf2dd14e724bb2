"""The main job: sweep every registered schedule over a grid and summarize what is best.

    python scripts/sweep.py                     # the default grid, results under results/
    python scripts/sweep.py -p 8 16 --n-per-p 2 4 --schedules 1f1b zbv dualpipev
    python scripts/sweep.py --resume            # continue an interrupted sweep
    python scripts/sweep.py --dask [ADDRESS]    # on a Dask cluster (a local one without ADDRESS)

Prints, for each (p, n), the fastest schedule whose peak activation memory fits the budget
(default: 1F1B's peak) and the Pareto front of bubble against peak memory; writes the table
(results/sweep.parquet, and the per-chunk files of a resumable run), PNG pictures and the
interactive report (results/report.html; fastpp.report).
"""

from __future__ import annotations

import _thread
import faulthandler
import gc
import signal
import sys

# Run as the main job, Python's cyclic collector would walk the hundreds of thousands of
# objects the imports below and Numba's start make (none of them garbage) again and again,
# and once more at exit: 0.5-0.8 s in all. It is off until they are made, then they are
# frozen out of its reach (``settle``). Imported (tests), nothing changes.
MAIN_JOB = __name__ == "__main__"
if MAIN_JOB:
    gc.disable()
    # `kill -USR1 <pid>` prints every thread's Python stack to standard error: what a job
    # that seems stuck is doing, the job going on
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def _interrupted_early(number, _):
    """Ctrl-C (or SIGTERM) while the imports and the flags' checks run (1.5 s): said, with
    the exit code of an interrupted sweep, not as their traceback; the sweep's own handling
    takes over where it starts. Recorded too: raised inside a ctypes callback (Numba loading
    a cached kernel) the exit is swallowed, and the job ran on to its end (a CI run's)."""
    if not SEEN:
        print(f"\n{_word(number)} before the sweep started", file=sys.stderr)
    SEEN.append(number)
    raise SystemExit(_code(number))


def _interrupted(number, _):
    """Ctrl-C (or SIGTERM) in the sweep: Python's KeyboardInterrupt (``Terminated``),
    recorded too (see above)."""
    SEEN.append(number)
    raise _stop()


SEEN = []  # the signal of a Ctrl-C or SIGTERM, once seen: checked where a swallowed one
# would have been lost


def _word(number) -> str:
    return "terminated" if number == signal.SIGTERM else "interrupted"


def _code(number) -> int:
    """A shell's exit code of a process the signal ended: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + int(number)


def _stop() -> KeyboardInterrupt:
    """The exception of the first signal seen (called once the imports below are done)."""
    return Terminated() if SEEN and SEEN[0] == signal.SIGTERM else KeyboardInterrupt()


OUTPUTS = ("sweep.parquet", "report.html", "bubble_heatmap.png", "pareto.png")  # in --out


def _unraisable(hook):
    """Python's report of an exception it could not raise, but a Ctrl-C's (recorded in
    ``SEEN``): swallowed inside Numba's ctypes callback, it printed a traceback of its own.
    The signal is sent again, to be raised where Python can: swallowed mid-sweep (a kernel
    loaded on first use), it had been raised only at the sweep's end, and a CI run's Ctrl-C
    went unanswered for a minute."""

    def report(unraisable):
        if not issubclass(unraisable.exc_type, KeyboardInterrupt | SystemExit):
            hook(unraisable)
        elif SEEN:
            _thread.interrupt_main(SEEN[-1])

    return report


# (only where Ctrl-C would interrupt: a job started in the background ignores it, and still)
INTERRUPT = signal.getsignal(signal.SIGINT)
if MAIN_JOB and INTERRUPT is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_early)
if MAIN_JOB and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # (a kill, as a Ctrl-C:
    # said with what is kept; it died without a word, and left its temporary files)
    signal.signal(signal.SIGTERM, _interrupted_early)
if _interrupted_early in (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)):
    sys.unraisablehook = _unraisable(sys.unraisablehook)

import argparse  # noqa: E402
import math  # noqa: E402
import multiprocessing  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas  # noqa: E402, F401  (the sweep's table: with the other imports)

import fastpp  # noqa: E402
from fastpp.checks import (  # noqa: E402
    Terminated,
    atomic_write,
    by_flags,
    despite_reader,
    flag_names,
    make_folder,
    switch_names,
    will_write,
)
from fastpp.reports import write_report  # noqa: E402
from fastpp.sweeps import best_within_budget, pareto_front, sweep, warm_up  # noqa: E402
from fastpp.sweeps.store import clear, kept  # noqa: E402


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schedules", nargs="+", default=list(fastpp.SCHEDULES),
                    metavar="NAME", help="registered schedules (default: all)")
    ap.add_argument("-p", nargs="+", type=int, default=[2, 4, 8, 16, 32],
                    help="devices (default 2 4 8 16 32)")
    ap.add_argument("--n-per-p", nargs="+", type=int, default=[1, 2, 3, 4, 6, 8],
                    help="microbatches as multiples of p (default 1 2 3 4 6 8)")
    ap.add_argument("-m", nargs="+", type=int, default=[1, 2, 4],
                    help="chunks per device, where a schedule allows them (default 1 2 4)")
    ap.add_argument("--f", type=float, default=1.0, help="forward time per device (default 1)")
    ap.add_argument("--b", type=float, default=2.0, help="full backward time (default 2)")
    ap.add_argument("--w", type=float, default=1.0, help="weight-grad part of b (default 1)")
    ap.add_argument("--comm", nargs="+", type=float, default=[0.0, 0.05, 0.2],
                    help="hand-off latencies to sweep (default 0 0.05 0.2)")
    ap.add_argument("--gamma", type=float, default=1.0, help="M_W / M_B (default 1)")
    ap.add_argument("--summary-comm", type=float, default=None,
                    help="latency the summary and pictures use (default: the middle one)")
    ap.add_argument("--budget", default="1f1b",
                    help="memory budget: a schedule name (its peak) or activation units "
                    "(default 1f1b)")
    ap.add_argument("--out", type=_folder, default=Path("results"),
                    help="output folder (default results)")
    ap.add_argument("--resume", action="store_true", help="continue the sweep in --out")
    ap.add_argument("--workers", type=int, default=None,
                    help="threads or Dask workers (default: the machine's cores)")
    ap.add_argument("--chunk-size", type=int, default=4096,
                    help="points per chunk (default 4096)")
    ap.add_argument("--dask", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="run on Dask: a scheduler ADDRESS, or a local cluster")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--no-plots", action="store_true",
                    help="skip the PNG pictures and the HTML report")
    return ap


def _folder(text: str) -> Path:
    """``--out``: a folder, ``~`` expanded (as the library expands its ``out``); an empty one
    had meant the working directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a folder path (got {text!r})")
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~user of no user (argparse passed its RuntimeError on, a traceback)
        raise argparse.ArgumentTypeError(f"must be a folder path the OS can use (got {text!r}: "
                                         f"no such user's home)") from None


def parse(argv):
    ap = parser()
    args = ap.parse_args(argv)
    args.flags = flag_names(ap)  # to name in fastpp's messages the flags, not its parameters
    args.switches = switch_names(ap)
    try:
        args.budget = float(args.budget)
    except ValueError:
        if args.budget not in fastpp.SCHEDULES:
            ap.error(f"--budget must be a number or a schedule name (got {args.budget!r})")
        # the summary ranks training schedules only: an inference one's peak was no budget
        # there, and best_within_budget raised as a traceback after the whole sweep
        if fastpp.SCHEDULES[args.budget].forward_only:
            ap.error(f"--budget must be a training schedule: the summary leaves inference-only "
                     f"schedules out (got {args.budget!r})")
        # (an unknown swept schedule is sweep's to name)
        known = all(name in fastpp.SCHEDULES for name in args.schedules or ())
        if known and args.budget not in (args.schedules or fastpp.SCHEDULES):
            ap.error(f"--budget must be one of the swept --schedules {args.schedules} (got "
                     f"{args.budget!r})")
    else:
        if not (math.isfinite(args.budget) and args.budget >= 0):
            ap.error(f"--budget must be activation units, finite and >= 0 (got "
                     f"{args.budget:g})")
    # one --w for every point: more than --b skips them all, which is said here instead of as
    # every point's skip reason after an empty sweep (a --b that is no time is Costs's)
    if math.isfinite(args.b) and args.b > 0 and math.isfinite(args.w) and args.w > args.b:
        ap.error(f"--w must be <= --b: W is the weight-gradient part of each backward (got "
                 f"--w={args.w:g}, --b={args.b:g})")
    if args.summary_comm is not None and args.summary_comm not in args.comm:
        # the summary's rows are the sweep's at that latency: none at another
        ap.error(f"--summary-comm must be one of the --comm values {args.comm} (got "
                 f"{args.summary_comm:g})")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    parts = args.out / "parts"
    try:  # every flag, and what the job writes, before anything on disk changes
        # (with --resume, against the kept sweep too: nothing is cleared on that path)
        sweep(args.schedules, **_given(args, parts if args.resume else None), check_only=True)
        make_folder(args.out, "--out")
        for name in OUTPUTS[:1] if args.no_plots else OUTPUTS:
            will_write(args.out / name, "--out")
    except fastpp.ScheduleError as err:
        return refused(err, args, parts)
    if SEEN:  # (a Ctrl-C a callback swallowed: the exit it asked for, nothing cleared)
        return _code(SEEN[0])
    if parts.exists() and not args.resume:
        # a fresh run replaces the previous one (--resume continues it); a folder that is no
        # sweep's is not this script's to delete
        if not _a_sweeps(parts):
            print(f"error: --out {str(args.out)!r} holds a 'parts' folder that is not a "
                  f"sweep's; choose another --out", file=sys.stderr)
            return 2
        done = kept(parts)
        try:  # under the folder's lock: a run started meanwhile is refused, not deleted
            clear(parts)
        except fastpp.ScheduleError as err:
            return refused(err, args, parts)
        # the replaced sweep's table and pictures go with it: an interrupted run had left
        # them beside its own partial parts, as if they were its
        for name in OUTPUTS:  # (and what a killed run's writes of them left half-done)
            for path in (args.out / name, *args.out.glob(f".{name}.*.tmp")):
                path.unlink(missing_ok=True)
        # (work dropped: said, not silent; a run that kept no point, such as one whose Dask
        # scheduler never answered, dropped nothing)
        if done is not None and 0 < done[0] < done[1]:
            print(f"note: replaced the unfinished sweep in --out {str(args.out)!r} ({done[0]:,} "
                  f"of {done[1]:,} points; --resume would have continued it)", file=sys.stderr)
    elif args.resume and not parts.exists():
        # said, not refused: a job rerun with --resume after each stop starts so the first
        # time; a mistyped --out would otherwise start a whole sweep without a word
        print(f"--resume: nothing to resume, {str(parts)!r} does not exist; starting a new "
              f"sweep in --out {str(args.out)!r}", file=sys.stderr)
    settle()
    if SEEN:  # (a Ctrl-C a callback swallowed: the exit it asked for, before the painter)
        return _code(SEEN[0])
    painter = None if args.no_plots else Painter()
    for number in (signal.SIGINT, signal.SIGTERM):  # (its checks done: the sweep's)
        if signal.getsignal(number) is _interrupted_early:
            signal.signal(number, _interrupted)
    try:
        return _run(args, parts, painter)
    except KeyboardInterrupt as stop:  # Ctrl-C: what is kept, how to go on, no traceback
        done = kept(parts)
        said = "no point kept yet" if done is None else (
            f"{done[0]:,} of {done[1]:,} points kept in {args.out}; rerun with --resume to "
            f"continue")
        number = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
        print(f"\n{_word(number)}: {said}", file=sys.stderr)
        return _code(number)
    finally:
        if painter is not None:
            painter.close()


def _a_sweeps(parts: Path) -> bool:
    """Whether ``parts`` is a sweep's folder: its manifest, or what clearing one leaves (its
    ``_fastpp`` holding the lock alone), which a Ctrl-C between the clearing and the new
    sweep's manifest left behind, and every fresh run then refused."""
    meta = parts / "_fastpp"
    if (meta / "manifest.json").is_file():
        return True
    return (meta.is_dir() and {x.name for x in parts.iterdir()} == {"_fastpp"}
            and {x.name for x in meta.iterdir()} <= {"lock"})


def _given(args, parts) -> dict:
    """``sweep``'s keywords from the flags (``out=parts``: None to check the flags alone,
    before a fresh run clears the previous one's parts)."""
    return dict(p=args.p, n_per_p=args.n_per_p, m=args.m, f=args.f, b=args.b, w=args.w,
                comm=args.comm, gamma=args.gamma, out=parts,
                resume=args.resume and parts is not None, chunk_size=args.chunk_size,
                workers=args.workers, executor="threads" if args.dask is None else "dask",
                scheduler=None if args.dask in (None, "local") else args.dask,
                progress=not args.no_progress)


def _run(args, parts, painter) -> int:
    given = _given(args, parts)
    try:
        if args.dask is None:  # compiling (once per machine) is not sweeping: timed apart
            t0 = time.perf_counter()
            warm_up(announce=not args.no_progress, schedules=args.schedules)
            settle()  # (the kernels and what Numba loaded for them)
            if SEEN:  # (raised in Numba's ctypes callback, where it was swallowed)
                raise _stop()
            print(f"kernels ready in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        df = sweep(args.schedules, **given)
        if SEEN:
            raise _stop()
    except fastpp.ScheduleError as err:
        return refused(err, args, parts)
    except Exception:
        if SEEN:  # (a Ctrl-C swallowed in Numba's callback left it a half-loaded kernel:
            # "no compiled object yet" in 3 of 20 interrupted cold compiles)
            raise _stop() from None
        raise
    seconds = time.perf_counter() - t0
    table = args.out / "sweep.parquet"
    atomic_write(table, lambda tmp: df.to_parquet(tmp, index=False))  # never half a table
    resumed = df.attrs.get("resumed", 0)
    counts = (f"{len(df) - resumed:,} points simulated" if not resumed else
              f"{len(df):,} points: {resumed:,} resumed from {parts}, {len(df) - resumed:,} "
              f"simulated")
    print(f"{counts} in {seconds:.2f} s ({df.attrs['skipped']:,} "
          f"combinations skipped as invalid); table: {table}")
    if df.empty:  # (no row to summarize or draw: every combination was invalid)
        reasons = "; ".join(f"{v:,} x {by_flags(k, args.flags)}"
                            for k, v in df.attrs["skip_reasons"].items())
        print(f"error: no valid point to summarize, every one skipped: {reasons}",
              file=sys.stderr)
        return 2

    comms = sorted(df["comm"].unique())
    comm = args.summary_comm if args.summary_comm is not None else comms[len(comms) // 2]
    training = [name for name, spec in fastpp.SCHEDULES.items() if not spec.forward_only]
    view = df[(df["comm"] == comm) & df["schedule"].isin(training)]  # inference apart
    if view.empty:  # (only inference rows: the pictures raised "an empty table" as a traceback)
        print(f"error: no training schedule's valid point to summarize (inference-only "
              f"schedules are left out); the table holds the rows: {table}", file=sys.stderr)
        return 2
    if painter is not None:
        painter.paint(view, comm, args.out)
    budget = args.budget
    if isinstance(budget, str) and not view["schedule"].eq(budget).any():
        # (-m 2: 1F1B takes m=1 only; best_within_budget raised as a traceback)
        print(f"error: --budget {budget} has no valid point to take its peak from (every one "
              f"skipped); give --budget in activation units; the table holds the rows: "
              f"{table}", file=sys.stderr)
        return 2
    label = f"{budget}'s peak" if isinstance(budget, str) else f"{budget:g} units"
    print(f"\nBest schedule per (p, n) within the memory budget ({label}), latency {comm:g}:")
    best = best_within_budget(view, budget)
    print(f"{'p':>4} {'n':>5}  {'schedule':<18}{'m':>2} {'makespan':>10} {'bubble':>8} "
          f"{'peak':>7} {'budget':>7}")
    chosen = {(row.p, row.n): row for row in best.itertuples()}
    for (p, n), group in view.groupby(["p", "n"]):  # (p, n) in order, as best_within_budget
        row = chosen.get((p, n))
        if row is None and isinstance(budget, str) and not group["schedule"].eq(budget).any():
            # no budget here, rather than one that nothing fits (a valid zbv row, dualpipe's
            # n < 2p: "nothing within the budget" had said zbv exceeded it)
            print(f"{p:>4} {n:>5}  no budget: no valid {budget} point here")
            continue
        if row is None:  # nothing fits: said, not left out of the table without a word
            print(f"{p:>4} {n:>5}  nothing within the budget (the least peak: "
                  f"{group['peak_activations_max'].min():.2f})")
            continue
        print(f"{row.p:>4} {row.n:>5}  {row.schedule:<18}{row.m:>2} {row.makespan:>10.2f} "
              f"{row.bubble_ratio:>8.1%} {row.peak_activations_max:>7.2f} {row.budget:>7.2f}")

    print("\nPareto front of bubble against peak memory (schedule/m: peak, bubble):")
    for (p, n), group in view.groupby(["p", "n"]):
        front = pareto_front(group)
        cells = [f"{r.schedule}/{r.m}: {r.peak_activations_max:g}, {r.bubble_ratio:.1%}"
                 for r in front.itertuples()]
        print(f"  p={p:<3} n={n:<4} " + " | ".join(cells))

    if painter is not None:
        print()
        write_report(table, args.out / "report.html", budget=budget,  # while the pictures draw
                     setting={"comm": comm})
        heat, scatter = painter.result()
        print(f"pictures: {heat}, {scatter}")
    print(f"done in {time.perf_counter() - t0:.2f} s")
    return 0


def refused(err, args, parts) -> int:
    """Say fastpp's refusal ``err`` in this script's flags; exit code 2."""
    # the library's out is this script's --out/parts, and invalid= is none of its flags
    message = str(err).replace(f"out={str(parts)!r}", f"out={str(args.out)!r}").replace(
        ", other costs or another invalid=", " or other costs").replace(
        "choose another out", "choose another --out")
    # (the library's scheduler= is --dask ADDRESS; out's manifest is --out's)
    message = message.replace("out's _fastpp", "--out's parts/_fastpp")
    flags = {**args.flags, "scheduler": "--dask"}
    print(f"error: {by_flags(message, flags, args.switches)}", file=sys.stderr)
    return 2


def settle() -> None:
    """Run as the main job, freeze every object made so far out of the cyclic collector's
    reach and turn it on: its collections then walk only what the job makes next, and those
    at exit (0.4-0.7 s after a sweep) almost nothing."""
    if MAIN_JOB:
        gc.freeze()
        gc.enable()


def pictures(view, comm, out: Path) -> tuple[Path, Path]:
    """The heat maps of every schedule, and the Pareto plot at the middle ``p`` and its
    largest ``n``, of one latency's rows."""
    from fastpp import plot

    heat = plot.bubble_heatmaps(view, out / "bubble_heatmap.png")
    p_mid = sorted(view["p"].unique())[len(view["p"].unique()) // 2]
    sub = view[(view["p"] == p_mid) & (view["n"] == view[view["p"] == p_mid]["n"].max())]
    scatter = plot.pareto(sub, out / "pareto.png",
                          title=f"p={p_mid}, n={int(sub['n'].iloc[0])}, latency {comm:g}")
    return heat, scatter


# Python 3.12+'s warning on os.fork in a process with threads (Painter starts its child so)
FORK_WARNING = (r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to "
                r"deadlocks in the child")
DRAW_SECONDS = 30.0  # the pictures draw in about a second: a child still busy then is stuck


class Painter:
    """Draws ``pictures`` in a forked process, started before the sweep so that it imports
    matplotlib (half a second) while this process sweeps, and draws while this one writes the
    report; on Linux only (macOS's system libraries are not fork-safe, Windows cannot fork),
    elsewhere here when the result is asked for.

    The child is forked before the sweep starts its threads, and does nothing but draw.
    """

    def __init__(self):
        self.job = None  # what to draw, once known
        self.process = self.conn = None
        if sys.platform.startswith("linux"):
            context = multiprocessing.get_context("fork")
            self.conn, theirs = context.Pipe()
            self.process = context.Process(target=_paint, args=(theirs, self.conn),
                                           daemon=True, name="fastpp-pictures")
            with warnings.catch_warnings():
                # Python 3.12+ warns on a fork while another thread runs (OpenBLAS's, idle): a
                # child could wait on a lock that thread held. Safe here: forked before the
                # sweep's threads start, the child only imports matplotlib and draws.
                warnings.filterwarnings("ignore", FORK_WARNING, DeprecationWarning)
                self.process.start()
            theirs.close()

    def paint(self, view, comm, out: Path) -> None:
        """Start drawing ``pictures(view, comm, out)``."""
        self.job = (view, comm, out)
        if self.process is not None:
            view = view.copy()
            view.attrs = {}  # (the sweep's skip reasons: not needed to draw)
            try:
                self.conn.send((view, comm, out))
            except OSError:  # the child is gone: ``result`` draws here
                self.close()

    def result(self) -> tuple[Path, Path]:
        """The pictures' paths, once drawn; what went wrong drawing them is raised here."""
        if self.process is None:
            return pictures(*self.job)
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):  # the child died after taking the job: EOF, or a reset
            status = "gone"
        finally:
            self.close()
        if status == "gone":  # drawn here, as when it died before
            return pictures(*self.job)
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        """Wait for the child to finish drawing (at most ``DRAW_SECONDS``), or end it if it has
        nothing to draw (the job stopped before its pictures): nothing runs on after the job."""
        if self.process is not None:
            if self.job is None:
                self.process.kill()  # (it has only imported matplotlib)
            # closed first: a child waiting on a message cut short (Ctrl-C mid-send) then ends
            self.conn.close()
            self.process.join(DRAW_SECONDS)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
            self.process = None


def _rehearse() -> None:
    """Draw a tiny heat map with a title, ticks and a colour bar into memory, while the
    parent sweeps: matplotlib's import, its fonts and its PNG writer are then ready."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.set_title("p", fontsize=9)
    fig.colorbar(ax.imshow([[0.0, 1.0]]), label="p")
    fig.savefig(io.BytesIO(), format="png", dpi=20)
    plt.close(fig)


def _paint(conn, parents) -> None:
    """The forked child: import matplotlib, wait for ``pictures``' arguments, draw, answer
    on ``conn``. ``parents`` is the parent's end of the pipe, closed here so that the
    child's wait ends if the parent's does."""
    # Ctrl-C reaches the whole process group: the parent stops the job (and this process), and
    # a second traceback from here would say nothing
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parents.close()
    try:
        _rehearse()
    except Exception:  # a rehearsal only: drawing says what is wrong (a missing extra)
        pass
    try:
        job = conn.recv()
    except (EOFError, OSError):  # the parent stopped before its pictures, or while sending
        return
    try:
        answer = ("done", pictures(*job))
    except Exception as err:  # raised in the parent
        answer = ("error", err)
    try:
        conn.send(answer)
    except OSError:  # the parent is gone: no one to answer
        return
    except Exception as err:  # an exception that does not pickle
        try:
            conn.send(("error", RuntimeError(f"drawing the pictures failed: {answer[1]!r} "
                                             f"({err})")))
        except OSError:
            return


if __name__ == "__main__":
    code = despite_reader(main)  # (| head: the files are written still)
    settle()
    sys.exit(code)
