"""The fourteenth bad-input wave (5 December 2026): each case failed on the code before it, or
on this wave's first version (a bad --b blamed on --w)."""

import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input_wave6 import run_script

import fastpp
from fastpp import ScheduleError
from fastpp.checks import memory_limit_flag

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("argv, match", [
    (["--w", "99"], "--w must be <= --b: the searches split each backward into I and W (got "
                    "--w=99, --b=27.423)"),
    (["--time-limit", "0"], "argument --time-limit: must be a finite number of seconds > 0 "
                            "(got '0')"),
    (["-n", "-3"], "error: -n must be a positive integer (got -n=-3)"),
])
def test_frontier_refuses_before_its_searches_start(tmp_path, argv, match):
    """``--w 99`` and ``--time-limit 0`` were refused by the first search, after the budgets'
    progress bar had started (and ``-p``/``-n`` likewise)."""
    err = run_script("frontier.py", *argv, "--out", str(tmp_path), cwd=tmp_path)
    assert match in err
    assert "budgets:" not in err and "it/s" not in err  # no search began: no progress bar


@pytest.mark.parametrize("text, p, want", [("12", 4, 12.0), ("1.5p", 4, 6.0), ("2 * p", 3, 6.0),
                                           ("none", 4, None), (None, 4, None)])
def test_memory_limit_flag_reads_units_or_multiples_of_p(text, p, want):
    """The flag parser that ``python -m fastpp optimize`` and ``scripts/measure.py`` share (the
    script had imported it from ``fastpp.__main__``)."""
    assert memory_limit_flag(text, p) == want


@pytest.mark.parametrize("text", ["0", "-1p", "p", "nan", "1.5q"])
def test_memory_limit_flag_refuses_what_is_no_limit(text):
    with pytest.raises(ScheduleError, match=r"^--memory-limit must be a number of units > 0 or "
                                            r"a multiple of p such as '1.5p' \(got "):
        memory_limit_flag(text, 4)


def test_resume_says_what_differs(tmp_path):
    """``out ... holds a different sweep (other points or chunk size)``: neither which nor, from
    sweep.py, by its flags."""
    out = tmp_path / "run"
    fastpp.sweep("1f1b", p=2, n_per_p=[1, 2], out=out, progress=False)
    with pytest.raises(ScheduleError, match=r"^resume=True needs the arguments that the sweep "
                                            r"in out='.*run' was started with: it holds a "
                                            r"different sweep \(2 points, where these arguments "
                                            r"make 3\)$"):
        fastpp.sweep("1f1b", p=2, n_per_p=[1, 2, 4], out=out, resume=True, progress=False)
    with pytest.raises(ScheduleError, match=r"\(as many points, but other ones: another grid, "
                                            r"other costs or another invalid=\)$"):
        fastpp.sweep("1f1b", p=4, n_per_p=[1, 2], out=out, resume=True, progress=False)
    flags = ["-p", "2", "--n-per-p", "1", "-m", "1", "--comm", "0", "--schedules", "1f1b",
             "--out", str(tmp_path / "script"), "--no-progress", "--no-plots"]
    first = subprocess.run([sys.executable, "scripts/sweep.py", *flags], capture_output=True,
                           text=True, cwd=ROOT)
    assert first.returncode == 0, first.stderr[-2000:]
    err = run_script("sweep.py", *flags, "--resume", "--chunk-size", "7", cwd=ROOT)
    assert (f"error: --resume needs the arguments that the sweep in --out="
            f"{str(tmp_path / 'script')!r} was started with: it holds a different sweep (chunks "
            f"of 4096 points, where --chunk-size=7)") in err, err
    flags[flags.index("--comm") + 1] = "0.5"  # as many points, other ones, and other chunks
    err = run_script("sweep.py", *flags, "--resume", "--chunk-size", "7", cwd=ROOT)
    assert ("(as many points, but other ones: another grid or other costs; chunks of 4096 "
            "points, where --chunk-size=7)") in err, err


@pytest.mark.parametrize("argv, match", [
    (["--b", "-5"], "--b must be finite and > 0 (got -5.0)"),
    (["--w", "nan"], "--w must be finite and >= 0 (got nan)"),
])
def test_frontier_names_a_bad_time_by_its_own_flag(tmp_path, argv, match):
    """The ``--w <= --b`` check blamed ``--w`` for a ``--b`` that is no time at all."""
    err = run_script("frontier.py", *argv, "--out", str(tmp_path), cwd=tmp_path)
    assert match in err and "--w must be <= --b" not in err, err
