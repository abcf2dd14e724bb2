"""Shared benchmark helpers: speed-up targets checked against a baseline timed in the same run."""

import pytest

_MIN_TIMES: dict[str, dict[str, float]] = {}


def min_times(benchmark) -> dict[str, float]:
    """The fastest rounds recorded by ``benchmark``'s file, by key: each file keeps its own,
    so that two files' equal keys (bench_api's and bench_simulate's engines) never meet."""
    return _MIN_TIMES.setdefault(benchmark.fullname.split("::")[0], {})


def record(benchmark, key: str) -> None:
    """Remember the fastest round of a finished benchmark (nothing when benchmarks are off)."""
    if not benchmark.disabled:
        min_times(benchmark)[key] = benchmark.stats.stats.min


def check_speedup(benchmark, fast: str, slow: str, target: float | None, *,
                  open_target=False) -> None:
    """Assert ``slow / fast >= target`` from two benchmarks of this run, and report it.

    ``target=None`` only reports. ``open_target``: a target not met yet (an open issue)
    xfails with the measured figure instead of failing, so a real run shows where it stands.
    With benchmarks on, a side not timed in this run (deselected, or failed) fails the check:
    a ratio that was not measured must not pass as met.
    """
    if benchmark.disabled:
        return  # smoke run: nothing was measured
    times = min_times(benchmark)
    missing = [key for key in (fast, slow) if key not in times]
    if missing:
        pytest.fail(f"speed-up of {fast} over {slow} not measured: {missing} not timed in "
                    f"this run (select both sides with -k, in one process: -n 0)")
    ratio = times[slow] / times[fast]
    benchmark.extra_info[f"speedup {fast} vs {slow}"] = round(ratio, 1)
    wanted = "no target" if target is None else f"target {target:g}x"
    print(f"\nspeed-up of {fast} over {slow}: {ratio:.2f}x ({wanted}); "
          f"{fast} {times[fast] * 1e6:.1f} us")
    if target is None:
        return
    message = f"{fast} is only {ratio:.2f}x faster than {slow} (target {target}x)"
    if open_target and ratio < target:
        pytest.xfail(message)
    assert ratio >= target, message
