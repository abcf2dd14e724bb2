"""Sweep throughput, against plain Python and a minimal compiled loop, over threads, and cold
against cached.

Run for real with ``pytest bench --benchmark-enable -n 0``; the normal suite runs each once.
Targets: >= 1.7x from 1 to 2 threads (open), within 1.5x of a minimal Numba loop per op, the
default ``scripts/sweep.py`` sweeping in <= 2 s warm and finishing in <= 30 s cold (asserted),
and the whole run in <= 10 s cold and <= 2 s cached (issue 27; reported as xfail when missed).
"""

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np
import pytest

from fastpp import SCHEDULES, build_schedule, engine, sweep
from fastpp._jit import CACHE_DIR

ROOT = Path(__file__).resolve().parents[1]
# about 10,000 valid points: every schedule, p 2..16, n = 1..8 p, m 1..4, 28 cost settings
GRID = dict(p=[2, 4, 8, 16], n_per_p=[1, 2, 3, 4, 6, 8], m=[1, 2, 4], w=[0.5, 1.0],
            comm=list(np.linspace(0.0, 0.2, 14)), progress=False)
SAMPLE = 24  # plain-Python points, drawn from the grid with a fixed seed


@pytest.fixture(scope="module")
def grid():
    return sweep(**GRID)  # also compiles or loads the kernels


@pytest.mark.parametrize("workers", [1, 2])
def bench_sweep_10k(benchmark, grid, workers):
    benchmark.group = "sweep of ~10,000 points"
    df = benchmark.pedantic(sweep, kwargs=GRID | {"workers": workers}, rounds=15, iterations=1)
    assert len(df) == len(grid) > 9000
    if not benchmark.disabled:
        seconds = benchmark.stats.stats.min
        benchmark.extra_info["points/s"] = round(len(df) / seconds)
        benchmark.extra_info["ns per op"] = round(seconds / df["num_ops"].sum() * 1e9, 1)
        print(f"\n{workers} thread(s): {len(df) / seconds:,.0f} points/s, "
              f"{seconds / df['num_ops'].sum() * 1e9:.1f} ns per simulated op")


@numba.njit(nogil=True)
def _arithmetic(count):
    """Pure arithmetic on registers: the best case for a second thread."""
    x = 0.0
    for i in range(count):
        x = (x + (i % 7) * 0.5) * 0.999999
    return x


def bench_thread_speedup(benchmark, grid):
    """1 against 2 threads, alternating so that both see the same machine, beside the speed-up
    the machine gives pure arithmetic: its ceiling. A 2-vCPU VM whose second vCPU is a busy
    sibling gives that loop well under 2x; there the 1.7x target cannot be shown.

    Open (README): one worker already keeps 1.1 cores busy (this thread checks the next
    chunk and builds the last one's frame beside it) and two keep 1.65, not 2: the Python
    parts (each build's glue, each chunk's checks and frame) take turns on the GIL. A real
    run that misses it on a machine that gives 1.8x or more xfails with the figures."""
    benchmark.group = "speed-up from a second thread"
    pairs = 1 if benchmark.disabled else 15
    count = 20_000_000
    _arithmetic(1)
    best: dict[str, float] = {}
    # beside the ceiling, two loops that say where the sweep loses: the minimal compiled loop
    # (1F1B generate, timeline, peak) over the 1F1B grid in two halves, and the sweep's own
    # kernels on every valid point of its grid at once (engine.run: no chunks, no frames)
    from minimal import one_f_one_b_point

    halves = [[(p, p * k, c) for p in (2, 4, 8, 16, 32, 64) for k in range(1, 9)
               for c in ONE_F_ONE_B["comm"][h::16]] for h in (0, 8)]
    kernels = _kernel_inputs(grid)
    assert np.array_equal(engine.run(*kernels).out[:, 0], grid["makespan"])  # the same work

    def minimal(points):
        for p, n, c in points:
            one_f_one_b_point(p, n, 1.0, 2.0, c)

    def run():
        with ThreadPoolExecutor(2) as pool:
            for _ in range(pairs):
                for key, fn in (("sweep 1", lambda: sweep(**GRID, workers=1)),
                                ("sweep 2", lambda: sweep(**GRID, workers=2)),
                                ("loop 1", lambda: [_arithmetic(count) for _ in range(2)]),
                                ("loop 2", lambda: list(pool.map(_arithmetic, [count] * 2))),
                                ("minimal 1", lambda: [minimal(h) for h in halves]),
                                ("minimal 2", lambda: list(pool.map(minimal, halves))),
                                ("kernels 1", lambda: engine.run(*kernels, workers=1)),
                                ("kernels 2", lambda: engine.run(*kernels, workers=2))):
                    best[key] = min(best.get(key, np.inf), _timed(fn))

    benchmark.pedantic(run, rounds=1, iterations=1)
    if benchmark.disabled:
        return
    cores = {}
    for workers in (1, 2):  # CPU seconds per wall second: how many cores the sweep keeps busy
        cpu, wall = time.process_time(), time.perf_counter()
        sweep(**GRID, workers=workers)
        cores[workers] = (time.process_time() - cpu) / (time.perf_counter() - wall)
    sweep_ratio = best["sweep 1"] / best["sweep 2"]
    ceiling = best["loop 1"] / best["loop 2"]
    minimal_ratio = best["minimal 1"] / best["minimal 2"]
    kernels_ratio = best["kernels 1"] / best["kernels 2"]
    benchmark.extra_info.update(speedup=round(sweep_ratio, 2), ceiling=round(ceiling, 2),
                                minimal=round(minimal_ratio, 2), kernels=round(kernels_ratio, 2))
    print(f"\nspeed-up from a second thread: sweep {sweep_ratio:.2f}x (target 1.7x); pure "
          f"arithmetic on this machine {ceiling:.2f}x; the minimal compiled loop "
          f"{minimal_ratio:.2f}x; the sweep's kernels alone {kernels_ratio:.2f}x; cores busy "
          f"{cores[1]:.2f} with one worker, {cores[2]:.2f} with two")
    if sweep_ratio < 1.7 and ceiling < 1.8:
        pytest.xfail(f"this machine gives pure arithmetic only {ceiling:.2f}x from a second "
                     f"thread; the sweep got {sweep_ratio:.2f}x")
    if sweep_ratio < 1.7:  # open: the figures, as the other open targets report theirs
        pytest.xfail(f"sweep {sweep_ratio:.2f}x < 1.7x (ceiling {ceiling:.2f}x): cores busy "
                     f"{cores[1]:.2f} with one worker, {cores[2]:.2f} with two")


def _kernel_inputs(grid):
    """``engine.run``'s arguments for every valid point of ``grid`` (a sweep's frame): the
    sweep's kernels without its chunks' checks and frames."""
    sid = np.array([list(SCHEDULES).index(name) for name in grid["schedule"]])
    keys = [grid[k].to_numpy(np.int64) for k in ("p", "n", "m", "G")]
    costs = {k: grid[k].to_numpy(np.float64) for k in ("f", "b", "w", "comm", "gamma", "act")}
    return (sid, *keys, costs)


# the issue-12 grid: 1F1B, p in {2, ..., 64}, n = k p for k 1..8, 208 latencies: 9,984 points
ONE_F_ONE_B = dict(schedules=["1f1b"], p=[2, 4, 8, 16, 32, 64], n_per_p=list(range(1, 9)),
                   m=[1], comm=list(np.linspace(0.0, 0.2, 208)), progress=False)


def bench_sweep_vs_minimal_loop(benchmark):
    """The sweep's time per op on the 1F1B grid against a minimal Numba loop doing only 1F1B
    generate + timeline + peak count (bench/minimal.py), each shape's order generated once and
    timed at every latency of the grid, as a loop over a cost axis would (until 5 December
    2026 it generated the order again for every point: a benchmark review), on 1 thread and
    on 2 (against half the loop's time). Targets 1.5x each (issue 27's is 2x); open (xfail with
    the figures) until met."""
    from minimal import one_f_one_b_point, one_f_one_b_shape

    benchmark.group = "sweep against a minimal compiled loop"
    small = benchmark.disabled
    grid = ONE_F_ONE_B | ({"p": [2, 4], "comm": [0.0, 0.1]} if small else {})
    points = [(p, p * k, c) for p in grid["p"] for k in grid["n_per_p"] for c in grid["comm"]]
    comms = np.array(grid["comm"], np.float64)
    df = sweep(**grid, workers=1)  # compile or load
    for p, n, c in points[:3]:  # the loop gives the same numbers
        makespan, peak = one_f_one_b_point(p, n, 1.0, 2.0, c)
        row = df[(df.p == p) & (df.n == n) & np.isclose(df.comm, c)].iloc[0]
        assert makespan == pytest.approx(row.makespan) and peak == row.peak_live_max
    ops = df["num_ops"].sum()
    best: dict[str, float] = {}

    def run():
        for _ in range(1 if small else 5):
            for key, fn in (("loop", lambda: [one_f_one_b_shape(p, p * k, 1.0, 2.0, comms)
                                              for p in grid["p"] for k in grid["n_per_p"]]),
                            ("sweep 1", lambda: sweep(**grid, workers=1)),
                            ("sweep 2", lambda: sweep(**grid, workers=2))):
                best[key] = min(best.get(key, np.inf), _timed(fn) / ops * 1e9)

    benchmark.pedantic(run, rounds=1, iterations=1)
    if small:
        return
    one, two = best["sweep 1"] / best["loop"], best["sweep 2"] / (best["loop"] / 2)
    benchmark.extra_info.update({f"{k} ns/op": round(v, 1) for k, v in best.items()})
    print(f"\n1F1B grid, ns per op: minimal loop {best['loop']:.1f}, sweep 1 thread "
          f"{best['sweep 1']:.1f} ({one:.2f}x), 2 threads {best['sweep 2']:.1f} ({two:.2f}x of "
          f"half the loop); targets 1.5x")
    if one > 1.5 or two > 1.5:
        pytest.xfail(f"sweep {one:.2f}x the minimal loop on 1 thread, {two:.2f}x of half of it "
                     "on 2 (targets 1.5x)")


def bench_plain_per_point(benchmark, grid):
    """The plain pure-Python simulator (bench/plain.py) on a sample of the same grid, against
    the sweep's time per point; reported, no target. The plain loop gets each schedule ready
    built (a sweep builds it), and runs the schedules it can express (no two-direction routes
    or overlapped pairs); results are checked against the sweep's rows.

    Points differ in size by 100x, so the plain loop's time per point is its time per op on
    the sample (steady across samples) times the grid's mean ops per point.
    """
    from plain import ops_of, simulate_plain

    benchmark.group = "per point: plain Python on a sample"
    plain_ok = ~grid["schedule"].isin(["dualpipe", "dualpipev", "chimera"])
    sample = grid[plain_ok].sample(SAMPLE, random_state=0)
    rows = [(r, *ops_of(build_schedule(r.schedule, r.p, r.n, r.m)))
            for r in sample.itertuples()]

    def run():
        return [simulate_plain(ops, stage_device, r.f, r.b, r.w, r.comm, r.gamma, r.m)[0]
                for r, ops, stage_device in rows]

    makespans = benchmark.pedantic(run, rounds=1, iterations=1)
    assert makespans == pytest.approx(sample["makespan"].tolist(), rel=1e-12)
    if benchmark.disabled:
        return
    per_op = benchmark.stats.stats.min / sample["num_ops"].sum()
    plain = per_op * grid["num_ops"].mean()
    fast = _per_point_time(grid)
    benchmark.extra_info["plain us per op"] = round(per_op * 1e6, 2)
    benchmark.extra_info["speedup per point"] = round(plain / fast)
    print(f"\nper point: plain Python {plain * 1e3:.2f} ms ({per_op * 1e6:.2f} us per op), "
          f"sweep {fast * 1e6:.1f} us on one thread ({plain / fast:,.0f}x)")


def _per_point_time(grid) -> float:
    best = min(_timed(lambda: sweep(**GRID, workers=1)) for _ in range(3))
    return best / len(grid)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# Python's bytecode cached as on a user's machine (pip compiles an install's, Python writes
# the project's on first import), beside the kernel caches: without it (PYTHONDONTWRITEBYTECODE,
# an install with --no-compile) every run compiles every module it imports, about 3 s of CPU
BYTECODE = Path(CACHE_DIR).parent / "pyc"
IMPORTS = "import fastpp.plot, fastpp.reports, matplotlib.pyplot, plotly.offline, pyarrow.parquet"


def _env(cache: Path) -> dict:
    env = dict(os.environ, FASTPP_CACHE_DIR=str(cache), PYTHONPYCACHEPREFIX=str(BYTECODE))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _main_job(tmp: Path, cache: Path) -> tuple[float, float]:
    """Wall time of the default scripts/sweep.py and its own sweep time, with this cache."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "sweep.py"), "--out",
                          str(tmp), "--no-progress"], env=_env(cache), capture_output=True,
                         text=True, check=True).stdout
    wall = time.perf_counter() - start
    return wall, float(re.search(r"points simulated in ([\d.]+) s", out).group(1))


def bench_main_job_cold_and_cached(benchmark, tmp_path):
    benchmark.group = "default scripts/sweep.py"
    # a smoke run times nothing, so it takes the suite's cache (the cold compile into an
    # empty cache is test_reliability's two processes)
    cache = tmp_path / "cache" if not benchmark.disabled else Path(CACHE_DIR).parent
    if not benchmark.disabled:  # the bytecode, once: the cold run times Numba's compile only
        subprocess.run([sys.executable, "-c", IMPORTS], env=_env(tmp_path / "import-only"),
                       check=True)
    cold, _ = benchmark.pedantic(_main_job, args=(tmp_path / "a", cache), rounds=1,
                                 iterations=1)
    if benchmark.disabled:  # a smoke run: the job ran once, and a second run times nothing
        return
    warm, warm_sweep = min(_main_job(tmp_path / f"b{i}", cache) for i in range(3))
    benchmark.extra_info.update(cold_s=round(cold, 1), cached_s=round(warm, 2),
                                cached_sweep_s=warm_sweep)
    print(f"\ndefault main job: cold {cold:.1f} s, cached {warm:.2f} s best of 3 "
          f"(of which the sweep {warm_sweep:.2f} s)")
    assert warm_sweep <= 2.0, f"cached sweep {warm_sweep:.2f} s > 2 s"
    assert cold <= 30.0, f"cold start {cold:.1f} s > 30 s"
    # issue 27's targets: 10 s cold (open: Numba's compile), 2 s for the whole cached run
    # (met on the idle machine, not under other sessions' load)
    missed = [f"{what} {got:.2f} s > {target:g} s" for what, got, target in
              (("cold", cold, 10.0), ("cached", warm, 2.0)) if got > target]
    if missed:
        pytest.xfail("; ".join(missed))
