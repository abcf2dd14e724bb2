"""Shared benchmark helpers: speed-up targets checked against a baseline timed in the same run."""

import pytest

_MIN_TIMES: dict[str, float] = {}


def record(benchmark, key: str) -> None:
    """Remember the fastest round of a finished benchmark (nothing when benchmarks are off)."""
    if not benchmark.disabled:
        _MIN_TIMES[key] = benchmark.stats.stats.min


def check_speedup(benchmark, fast: str, slow: str, target: float | None, *,
                  open_target=False) -> None:
    """Assert ``slow / fast >= target`` from two benchmarks of this run, and report it.

    ``target=None`` only reports. ``open_target``: a target not met yet (an open issue)
    xfails with the measured figure instead of failing, so a real run shows where it stands.
    """
    if benchmark.disabled or fast not in _MIN_TIMES or slow not in _MIN_TIMES:
        return  # smoke run: nothing was measured
    ratio = _MIN_TIMES[slow] / _MIN_TIMES[fast]
    benchmark.extra_info[f"speedup {fast} vs {slow}"] = round(ratio, 1)
    wanted = "no target" if target is None else f"target {target:g}x"
    print(f"\nspeed-up of {fast} over {slow}: {ratio:.2f}x ({wanted}); "
          f"{fast} {_MIN_TIMES[fast] * 1e6:.1f} us")
    if target is None:
        return
    message = f"{fast} is only {ratio:.2f}x faster than {slow} (target {target}x)"
    if open_target and ratio < target:
        pytest.xfail(message)
    assert ratio >= target, message
