"""The thirteenth bad-input wave (5 December 2026): each case failed on the code before."""

from pathlib import Path

import pytest
from test_bad_input_wave6 import run_script

import fastpp
from fastpp import ScheduleError, build_schedule
from fastpp.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def test_an_option_the_schedule_does_not_take_is_named_by_its_flag(capsys):
    """``-G`` given to 1F1B read ``options must be among [] for '1f1b' (got ['G'])``."""
    assert main(["simulate", "-s", "1f1b", "-p", "2", "-n", "2", "-G", "2"]) == 2
    assert "error: -G must not be given for '1f1b': it takes no options (got -G=2)" in \
        capsys.readouterr().err
    with pytest.raises(ScheduleError, match=r"^H must not be given for 'interleaved-1f1b': its "
                                            r"options are \['G'\] \(got H=1\)$"):
        build_schedule("interleaved-1f1b", 4, 8, 2, H=1)


def test_plan_names_recompute_modules_by_their_flag(tmp_path, capsys):
    """``recompute_modules act on --recompute='selective' rows``: the subject in library
    words."""
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--recompute", "full",
                 "--recompute-modules", "mlp", "--no-plots", "--out", str(tmp_path)]) == 2
    assert ("error: --recompute-modules must come with selective recomputation, the rows they "
            "act on: --recompute must include 'selective' (got --recompute=['full'] with "
            "--recompute-modules=['mlp'])") in capsys.readouterr().err


def test_an_unknown_swept_schedule_is_named_by_schedules(tmp_path, capsys):
    """sweep.py and plan said ``schedule must be one of``, a parameter neither has."""
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--schedules", "nope",
                 "--no-plots", "--out", str(tmp_path)]) == 2
    assert "error: --schedules must be one of ['1f1b'," in capsys.readouterr().err
    err = run_script("sweep.py", "--schedules", "1f1b", "nope", "--out", str(tmp_path / "o"),
                     "--no-progress", cwd=tmp_path)
    assert err.startswith("error: --schedules must be one of ['1f1b',") and "(got 'nope')" in err
    with pytest.raises(ScheduleError, match=r"^schedules must be one of .* \(got 'nope'\)"):
        fastpp.sweep(["1f1b", "nope"], p=2, n=2, progress=False)


@pytest.mark.parametrize("flags, message", [
    (["--link-delay", "0.1:0:5"], "error: --link-delay rank must be an integer in 0..1 (got 5)"),
    (["--link-delay", "-1"], "error: --link-delay seconds must be finite and >= 0 (got -1.0)"),
    (["--delay", "5:F:0.1"], "error: --delay stage must be an integer in 0..1 (got 5)"),
    (["--delay", "0:F:0.1:2"], "error: --delay probability must be in [0, 1] (got 2.0)")])
def test_measure_names_a_delays_part_by_its_flag(tmp_path, capsys, flags, message):
    """``link_delay rank must ...``: a subject with a word after it was not renamed."""
    assert main(["measure", "-s", "1f1b", "--out", str(tmp_path / "x"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing ran
