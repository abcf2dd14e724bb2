"""What each input of a report is: a sweep, a plan, a frontier or a measured run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..checks import ScheduleError, ScheduleTypeError, expanded, listed

# the columns that tell a table's kind, checked in this order (a plan row also has a schedule,
# p, n and m; a frontier row a schedule and bubble_ratio)
COLUMNS = {
    "plan": ("t", "p", "d", "schedule", "step_time", "tokens_per_s", "peak_memory", "fits"),
    "frontier": ("placement", "kind", "schedule", "memory_limit", "peak_activations_max",
                 "bubble_ratio"),
    "sweep": ("schedule", "p", "n", "m", "makespan", "bubble_ratio", "peak_activations_max",
              "throughput"),
}
TEXT = ("schedule", "placement", "kind")
COUNTS = ("p", "n", "m", "t", "d")  # whole numbers, each row's (a NaN m cannot be drawn)
# the range of each drawn quantity where a row has one: counts from 1, times, memory and rates
# from 0, a bubble ratio a share of the devices' time
RANGES = {**dict.fromkeys(COUNTS, (1.0, np.inf)),
          **dict.fromkeys(("makespan", "peak_activations_max", "throughput", "step_time",
                           "tokens_per_s", "peak_memory", "memory_limit"), (0.0, np.inf)),
          "bubble_ratio": (0.0, 1.0)}
EXPECTED = ("a sweep folder or table, a plan table, a frontier table (Parquet or CSV) or a "
            "measured-run folder (rank{r}_trace.json, or measure --steps' step{k} folders)")


def load(item, position: int):
    """``(kind, label, data)`` of one input: a DataFrame for a table, a ``MeasuredRun``, or
    ``(label, MonteCarlo)`` pairs for Monte Carlo results (one, or a dict of them by label)."""
    import pandas as pd

    from ..measured import MeasuredRun
    from ..montecarlo import MonteCarlo

    if isinstance(item, MeasuredRun):
        return "measured", f"measured run {position}", item
    if isinstance(item, MonteCarlo):
        s = item.schedule
        return "montecarlo", f"input {position}", [(f"{s.name} (p={s.p}, n={s.n}, m={s.m})",
                                                     item)]
    if isinstance(item, dict):
        for key, value in item.items():
            if not isinstance(key, str) or not isinstance(value, MonteCarlo):
                raise ScheduleTypeError(f"inputs[{position}] must map labels (str) to "
                                        f"MonteCarlo results (got {type(key).__name__} -> "
                                        f"{type(value).__name__})")
        if not item:
            raise ScheduleError(f"inputs[{position}] must hold at least one MonteCarlo result "
                                f"(got an empty dict)")
        return "montecarlo", f"input {position}", list(item.items())
    if isinstance(item, pd.DataFrame):
        return _table(item, f"table {position}")
    if not isinstance(item, (str, Path)):
        raise ScheduleTypeError(f"inputs must be paths, DataFrames, MeasuredRuns or "
                                f"MonteCarlo results (got {type(item).__name__} at position "
                                f"{position})")
    path = expanded(item, f"inputs[{position}]")  # (as a sweep's out and pandas' readers do)
    if not path.exists():
        raise ScheduleError(f"input {str(path)!r} must be a readable path: {EXPECTED} (got no "
                            f"such file or folder)")
    if path.is_dir():
        return _folder(path)
    return _table(_read(path, path.suffix.lower()), str(path))


def _folder(path: Path):
    from ..measured import read_torch_trace
    from ..measured.steps import step_folders
    from ..sweeps import load as load_sweep
    from ..sweeps.store import kept

    label = str(path)
    # scripts/sweep.py's --out keeps its sweep in parts/: that is the newest run's (a
    # sweep.parquet beside it may be an earlier, finished run's)
    store = next((x for x in (path, path / "parts") if (x / "_fastpp" / "manifest.json")
                  .exists()), None)
    if store is not None:
        rows, label = load_sweep(store), str(store)
        if not rows.attrs.get("complete", True):  # (its answers are those of a part)
            done, total = kept(store)
            label += f" (unfinished: {done:,} of {total:,} points)"
        return _table(rows, label)
    if any(path.glob("rank*_trace.json*")):
        return "measured", label, read_torch_trace(path)
    steps = [d for d in step_folders(path) if any(d.glob("rank*_trace.json*"))]
    if steps:  # measure --steps N: the last step, whose table measure prints
        return ("measured", f"{label}, step {steps[-1].name[4:]} of {len(steps)}",
                read_torch_trace(steps[-1]))
    tables = sorted(path.glob("*.parquet"))
    if tables:  # its Parquet files alone: scripts/sweep.py's folder holds its pictures too
        import pandas as pd

        return _table(pd.concat([_read(t, ".parquet") for t in tables], ignore_index=True),
                      label)
    raise ScheduleError(f"input {label!r} must be {EXPECTED} (got a folder with neither a "
                        f"sweep's _fastpp/manifest.json, nor rank traces, nor Parquet files)")


def _read(path: Path, suffix: str):
    import pandas as pd

    readers = {".parquet": pd.read_parquet, ".csv": pd.read_csv}
    if suffix not in readers:
        raise ScheduleError(f"input {str(path)!r} must be {EXPECTED} (got a {suffix or 'plain'}"
                            f" file)")
    try:
        return readers[suffix](path)
    except Exception as err:  # pyarrow's, pandas' and the OS's errors alike: the file is bad
        raise ScheduleError(f"input {str(path)!r} must be a readable {suffix[1:]} table "
                            f"(got {type(err).__name__}: {err})") from err


def _table(df, label: str):
    if df.empty:
        raise ScheduleError(f"input {label!r} must hold rows of {EXPECTED} (got an empty "
                            f"table)")
    import pandas as pd

    for kind, needed in COLUMNS.items():
        if set(needed) <= set(df.columns):
            for col in needed:
                if col in TEXT:  # (a missing name failed deep inside: 'str' < 'float')
                    named = np.array([isinstance(x, str) and x != "" for x in df[col]])
                    if not named.all():
                        row = int(named.argmin())
                        raise ScheduleError(f"input {label!r} must hold names in its {kind}'s "
                                            f"column {col!r} (got {df[col].iloc[row]!r} in "
                                            f"row {row})")
                # (a NaN read as True: a row that fits nowhere was drawn as fitting)
                if col == "fits" and not pd.api.types.is_bool_dtype(df[col]):
                    raise ScheduleError(f"input {label!r} must hold true or false in its "
                                        f"{kind}'s column 'fits' (got {df[col].dtype})")
                if col not in TEXT and not (pd.api.types.is_numeric_dtype(df[col])
                                            or pd.api.types.is_bool_dtype(df[col])):
                    raise ScheduleError(f"input {label!r} must hold numbers in its {kind}'s "
                                        f"column {col!r} (got {df[col].dtype})")
                if col in COUNTS:
                    values = df[col].to_numpy(dtype=float)
                    bad = ~np.isfinite(values) | (values != np.round(values))
                    if bad.any():
                        raise ScheduleError(f"input {label!r} must hold whole numbers in its "
                                            f"{kind}'s column {col!r} (got "
                                            f"{float(values[bad][0])!r} in row "
                                            f"{int(bad.argmax())})")
                if col in RANGES:
                    low, high = RANGES[col]
                    values = df[col].to_numpy(dtype=float)
                    bad = (values < low) | (values > high)  # (NaN: neither; checked below)
                    if bad.any():
                        raise ScheduleError(f"input {label!r} must hold values in [{low:g}, "
                                            f"{high:g}] in its {kind}'s column {col!r} (got "
                                            f"{float(values[bad][0])!r} in row "
                                            f"{int(bad.argmax())})")
            if kind == "sweep":  # a simulated point (no reason) has every figure
                simulated = (df["reason"].fillna("") == "").to_numpy() if "reason" in df \
                    else np.ones(len(df), bool)
                for col in needed[4:]:
                    values = df[col].to_numpy(dtype=float)
                    bad = simulated & ~np.isfinite(values)
                    if bad.any():
                        raise ScheduleError(f"input {label!r} must hold finite numbers in its "
                                            f"sweep's column {col!r} where a row has no reason "
                                            f"(got {float(values[bad][0])!r} in row "
                                            f"{int(bad.argmax())})")
            return kind, label, df
    wanted = "; ".join(f"a {kind}'s {', '.join(cols)}" for kind, cols in COLUMNS.items())
    raise ScheduleError(f"input {label!r} must be a table of a known kind, with {wanted} (got "
                        f"columns {listed(df.columns)})")
