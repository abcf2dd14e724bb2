"""The fourteenth bad-input wave (5 December 2026): each case failed on the code before."""

import pytest
from test_bad_input_wave6 import run_script

from fastpp import ScheduleError
from fastpp.checks import memory_limit_flag


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
