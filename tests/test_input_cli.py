"""The command line, ``python -m fastpp`` (explain, simulate, plan, optimize, list), and the
scripts other than the main job and measure (frontier.py, seed_demo.py, compile_profile.py,
fidelity.py, layout_demo.py): a bad flag is one line naming the flag as typed, exit status
2, refused before the work; Ctrl-C is a line and exit status 130.

``scripts/sweep.py`` is tested in ``test_input_main_job.py``; ``measure`` and
``scripts/measure.py`` in ``test_input_measured.py``.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import cli_error, cli_stderr, run_script

import fastpp
from fastpp import Costs, ScheduleError, ScheduleTypeError, build_schedule
from fastpp.__main__ import main
from fastpp.__main__ import main as cli
from fastpp.checks import memory_limit_flag
from fastpp.model import HARDWARE

MEGATRON = ("--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
            "--vocab-size 1000")
DATA = Path(__file__).parent / "data"
HF_DATA = Path(__file__).parent / "data" / "hf"


def _cli(capsys, *argv) -> str:
    """``python -m fastpp argv``'s one error line (exit code 2)."""
    from fastpp.__main__ import main

    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("content, match", [
    (None, "--megatron-script must be a readable text file .* No such file"),
    (b"\xff\xfe\x00", "--megatron-script must be a readable text file .* decode"),
])
def test_explain_names_an_unreadable_script(tmp_path, capsys, content, match):
    script = tmp_path / "train.sh"
    if content is not None:
        script.write_bytes(content)
    assert main(["explain", "--megatron-script", str(script), "--gpus", "2"]) == 2
    err = cli_stderr(capsys)
    assert err.startswith("error: ") and "Traceback" not in err
    assert re.search(match, err), err


def test_explain_names_a_binary_toml(tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_bytes(b"\xff\xfe\x00")
    assert main(["explain", "--torchtitan", str(job), "--gpus", "2"]) == 2
    assert "error: --torchtitan must be a readable TOML file" in capsys.readouterr().err


def test_explain_refuses_run_flags_with_a_megatron_run(capsys):
    """``--tp 3`` (and ``--schedule wat``) with ``--megatron``: dropped, and the run priced as
    the flags say, exit status 0."""
    err = cli_error(capsys, ["explain", "--megatron", MEGATRON, "--gpus", "2", "--tp", "3"])
    assert "--tp must be given with --hf only: --megatron gives the run" in err
    err = cli_error(capsys, ["explain", "--megatron", MEGATRON, "--gpus", "2",
                             "--schedule", "wat"])
    assert "--schedule must be given with --hf only" in err


def test_simulate_refuses_placement_with_a_schedule(capsys):
    """``--placement wat`` with ``--schedule``: dropped (it is read with ``--from-csv``)."""
    err = cli_error(capsys, ["simulate", "-s", "1f1b", "-p", "2", "-n", "4",
                             "--placement", "wat"])
    assert "--placement must be given with --from-csv only" in err


def test_simulate_refuses_p_with_a_csv(tmp_path, capsys):
    """``-p 3`` with ``--from-csv`` of a 2-device schedule: dropped, the CSV's 2 simulated."""
    csv = fastpp.io.write_torch_csv(build_schedule("zb-h1", 2, 4), tmp_path / "z.csv")
    err = cli_error(capsys, ["simulate", "--from-csv", str(csv), "-p", "3"])
    assert re.search(r"-p must be given with --schedule only: the CSV gives its own", err)


def test_plan_summary_top_must_not_be_negative(capsys):
    """``--top -1``: pandas' ``head(-1)`` printed every row but the last, after the plan."""
    err = cli_error(capsys, ["plan", "--model", "llama2-7b", "--gpus", "8", "--top", "-1"])
    assert "--top must be an integer >= 0 (got -1)" in err
    from fastpp.model.plan import summary

    with pytest.raises(ScheduleError, match=r"top must be an integer >= 0 \(got -1\)"):
        summary(None, top=-1)


@pytest.mark.parametrize("argv, match", [
    (["-p", "0"], "error: -p must be a positive integer (got -p=0)"),  # fastpp's, named
    (["--budgets", "-1"], "--budgets must be an integer >= 0"),  # NumPy's ValueError
    (["--threads", "0"], "--threads must be an integer >= 1"),  # the pool's ValueError
    (["--hidden", "0"], "--hidden must be an integer >= 1"),  # a gamma of 0, silently
])
def test_frontier_script_flags(tmp_path, argv, match):
    assert match in run_script("frontier.py", *argv, "--out", str(tmp_path), cwd=tmp_path)


def test_seed_demo_script_time_not_a_number(tmp_path):
    err = run_script("seed_demo.py", "--fwd-time", "nan", cwd=tmp_path)
    assert "--fwd-time must be finite and > 0 (got nan)" in err


def test_compile_profile_script_unknown_schedule(tmp_path):
    """``build wat``: a KeyError from the registry."""
    err = run_script("compile_profile.py", "build", "wat", cwd=tmp_path)
    assert "names must be registered schedules" in err


def test_explain_refuses_flags_its_source_gives(capsys):
    """``--vocab`` with ``--hf`` was dropped (exit 0), and ``--model`` with ``--hf`` replaced
    the config.json's model without a word."""
    hf = str(DATA / "hf" / "llama-2-7b.json")
    err = cli_error(capsys, ["explain", "--hf", hf, "--gpus", "8", "--vocab", "5"])
    assert "--vocab must be given with --megatron or --megatron-script only" in err
    err = cli_error(capsys, ["explain", "--hf", hf, "--gpus", "8", "--model", "llama3-70b"])
    assert "--model must not be given with --hf: the config.json is the model" in err


def test_explain_global_batch_zero(capsys):
    """``--global-batch 0`` was replaced by the default (exit 0); ``--microbatch 0`` was
    reported as a global batch of 0, which the user had not given. Each is now refused by
    the command line's parser, naming the flag (exit 2)."""
    hf = str(DATA / "hf" / "qwen3-8b.json")
    for flag in ("--global-batch", "--microbatch"):
        with pytest.raises(SystemExit) as stop:
            main(["explain", "--hf", hf, "--gpus", "8", flag, "0", "--neighbours", "0"])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {flag}: must be a positive integer (got 0)" in err, err


def test_plan_capacity_in_the_units_given(capsys):
    """``--capacity-gb -1`` said "capacity must be finite and > 0 (got -1000000000.0)", a name
    and a unit the user had not typed; a capacity under a GB read "capacity 0 GB"."""
    from fastpp.model import plan

    assert main(["plan", "--model", "llama2-7b", "--gpus", "8", "--capacity-gb", "-1"]) == 2
    assert "--capacity-gb must be finite and > 0 (got -1)" in capsys.readouterr().err
    rows = plan("llama2-7b", 8, seq=1024, global_batch=8, tp=1, pp=[2], microbatch=1,
                recompute="none", schedules=["1f1b"], capacity=0.5e9, workers=1)
    assert rows["reason"].str.endswith("> capacity 0.5 GB").all()


@pytest.mark.parametrize("argv, flag", [
    (["plan", "--tp", "0"], "--tp"), (["plan", "--gpus", "-8"], "--gpus"),
    (["explain", "--model", "llama3-8b", "--tp", "x"], "--tp"),
    (["simulate", "--schedule", "1f1b", "-p", "0", "-n", "4"], "-p"),
    (["optimize", "-p", "4", "-n", "0"], "-n")])
def test_a_count_given_on_the_command_line_is_named_by_its_flag(capsys, argv, flag):
    """``explain --tp 0`` said "t must be a positive integer (got t=0)", the library's
    parameter, not the flag the user typed."""
    with pytest.raises(SystemExit) as stop:
        cli(argv)
    assert stop.value.code == 2
    assert f"argument {flag}: must be a positive integer" in capsys.readouterr().err


def test_frontier_script_budgets_bound(tmp_path):
    """10**12 budgets asked NumPy for a 7 TiB grid (a MemoryError traceback)."""
    from helpers import run_script

    assert "--budgets must be at most 10,000, a search each (got 1,000,000,000,000)" in \
        run_script("frontier.py", "--budgets", "1000000000000", "--out", str(tmp_path),
                   cwd=tmp_path)


def test_seed_demo_script_refuses_with_the_library_and_scales(tmp_path):
    """The demo's devices take a forward time of 0 that fastpp's costs refuse (a traceback);
    its own checks compared clocks to 1e-9 absolute, failing at a forward time of 1e9."""
    from helpers import run_script

    assert "error: --fwd-time must be finite and > 0 (got 0.0)" in run_script(
        "seed_demo.py", "--fwd-time", "0", cwd=tmp_path)  # (costs.f until wave 15)
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "scripts" / "seed_demo.py"), "--fwd-time",
                           "1e9"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and "passed" in done.stdout, done.stdout[-800:]


@pytest.mark.parametrize("argv, message", [
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--f", "-1"],
     "error: --f must be finite and > 0 (got -1.0)"),
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--gamma", "2"],
     "error: --gamma must be in [0, 1]"),
    (["simulate", "-s", "zb-h1", "-p", "4", "-n", "8", "--w", "5"],
     "error: --w must be <= --b (got --w=5.0, --b=2.0 at stage 0)"),  # as it simulates
    (["optimize", "-p", "4", "-n", "8", "--memory-limit", "0.1"],
     "got --memory-limit=0.1"),
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--csv", ""],
     "error: --csv must be a file path that can be written (got '': an empty name)"),
    (["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--trace", "/nonexistent/x.json"],
     "error: --trace must be a file path that can be written (got '/nonexistent/x.json': "
     "no folder '/nonexistent')"),  # (refused before the simulation, since 6 December)
    (["optimize", "-p", "4", "-n", "8", "--memory-limit", "-2"],
     "error: --memory-limit must be a number of units > 0"),
    (["optimize", "-p", "4", "-n", "8", "--time-limit", "-1"],
     "argument --time-limit: must be a finite number of seconds > 0 (got '-1')"),
])
def test_cli_names_its_flags(argv, message, capsys):
    """The CLI's messages name its flags, not the library parameters they become (costs.f,
    memory, time_limit, path)."""
    from fastpp.__main__ import main

    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    assert code == 2 and message in capsys.readouterr().err


def test_scripts_refuse_or_explain_before_running(tmp_path):
    """frontier.py --out naming a file ended in a FileExistsError after every search;
    layout_demo.py --help ran the whole demo."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers import run_script

    taken = tmp_path / "taken"
    taken.write_text("")
    assert "--out must be a folder" in run_script("frontier.py", "--out", str(taken),
                                                  cwd=tmp_path)
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, str(root / "scripts" / "layout_demo.py"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("usage:") and "layout" in \
        done.stdout and "Et*" not in done.stdout


@pytest.mark.parametrize("argv, message", [
    (["simulate", "-s", "1f1b", "-p", "2", "-n", "4", "--trace", ""],
     "--trace must be a file path that can be written (got '': an empty name)"),
    (["simulate", "-s", "1f1b", "-p", "2", "-n", "4", "--gantt", ""],
     "--gantt must be a file path that can be written (got '': an empty name)"),
    (["plan", "--model", "llama3-8b", "--gpus", "8", "--out", ""],
     "--out must be a folder (got '')"),
])
def test_cli_refuses_empty_names(argv, message, capsys):
    """An empty output name had been taken as none (nothing written, exit 0) or, for plan's
    --out, as the current folder."""
    from fastpp.__main__ import main

    assert main(argv) == 2 and message in capsys.readouterr().err


def test_a_weight_gradient_over_the_backward_names_no_missing_flag(capsys):
    """The refusal named ``--i``, a flag the command line does not have."""
    assert main(["simulate", "-s", "1f1b", "-p", "2", "-n", "2", "--w", "3"]) == 2
    err = capsys.readouterr().err
    assert "error: --w must be <= --b (got --w=3.0, --b=2.0 at stage 0)" in err
    assert "--i" not in err


def test_explain_run_flags_say_what_they_are(capsys):
    """``explain --help`` listed its run flags (with ``--hf``) without a word or a default."""
    import pytest

    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in ("--tp TP tensor-parallel degree (1)", "--seq SEQ sequence length (4096)",
                 "--zero ZERO ZeRO stage, 0 to 3 (1)",
                 "sequences per step (default: one microbatch per replica)"):
        assert text in out, text


def test_commands_and_scripts_name_the_flags_not_the_parameters(tmp_path, capsys):
    """plan, explain, sweep.py and frontier.py named what they refused by fastpp's parameter
    (``global_batch``, ``n_per_p``, ``from_megatron(..., vocab=N)``), not by the flag typed."""
    from helpers import run_script

    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--microbatch", "3",
                 "--global-batch", "8", "--no-plots", "--out", str(tmp_path)]) == 2
    assert "error: --microbatch must divide --global-batch=8 (got --microbatch=3)" in \
        capsys.readouterr().err
    assert main(["explain", "--megatron", "--num-layers 2 --hidden-size 64 "
                 "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 "
                 "--micro-batch-size 1 --global-batch-size 8", "--gpus", "8"]) == 2
    assert "(or --vocab N)" in capsys.readouterr().err
    from pathlib import Path

    hf = Path(__file__).resolve().parent / "data" / "hf" / "qwen3-8b.json"
    assert main(["explain", "--hf", str(hf), "--gpus", "8", "--tp", "3"]) == 2
    assert "(got --gpus=8, --tp=3, --cp=1, --pp=1)" in capsys.readouterr().err
    assert "error: --n-per-p must hold positive integers below 2**31 (got [0])" in \
        run_script("sweep.py", "--n-per-p", "0", "--out", str(tmp_path), cwd=tmp_path)


def test_flags_replace_parameters_only_where_they_are_what_was_typed(capsys):
    """The review of the renaming: symbols in an expression (``p*n*m``, ``2*cp``) stay; an
    explain run given by a Megatron script is named in its own words, not by the ``--hf``
    run flags it refuses; an on/off flag is no value (``sequence_parallel=False`` stays)."""
    import argparse

    from fastpp.checks import by_flags, flag_names

    assert main(["simulate", "-s", "1f1b", "-p", "3000", "-n", "3000"]) == 2
    assert "error: p*n*m must be at most 4,000,000 for '1f1b' (got p*n*m=9000000)" in \
        capsys.readouterr().err
    assert main(["explain", "--megatron", "--num-layers 4 --hidden-size 256 "
                 "--num-attention-heads 8 --seq-length 512 --vocab-size 1000 "
                 "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 3",
                 "--gpus", "8"]) == 2
    assert ("--tensor-model-parallel-size x --context-parallel-size x "
            "--pipeline-model-parallel-size must divide the 8 GPUs (got 3 x 1 x 1 = 3)"
            in capsys.readouterr().err)
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int)
    ap.add_argument("--cp", type=int)
    ap.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction)
    flags = flag_names(ap)
    assert flags == {"seq": "--seq", "cp": "--cp"}
    assert by_flags("cp must split seq into 2 x cp equal chunks: seq must be a multiple of "
                    "2*cp=4 (got seq=1001, cp=2), or give sequence_parallel=False", flags) == (
        "--cp must split seq into 2 x cp equal chunks: --seq must be a multiple of 2*cp=4 "
        "(got --seq=1001, --cp=2), or give sequence_parallel=False")


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


def test_switches_are_named_as_typed():
    """An on flag is no value: ``x must be False`` reads ``--x must not be given``; an on/off
    pair or an off flag is left alone."""
    import argparse

    from fastpp.checks import by_flags, switch_names

    ap = argparse.ArgumentParser()
    ap.add_argument("--realtime", action="store_true")
    ap.add_argument("--no-plots", dest="plots", action="store_false")
    ap.add_argument("--overlap", action=argparse.BooleanOptionalAction)
    assert switch_names(ap) == {"realtime": "--realtime"}
    assert by_flags("realtime must be False here: no SCHED_FIFO (got realtime=True)", {},
                    switch_names(ap)) == ("--realtime must not be given here: no SCHED_FIFO "
                                          "(got --realtime)")


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


@pytest.mark.parametrize("argv, match", [
    (["--b", "-5"], "--b must be finite and > 0 (got -5.0)"),
    (["--w", "nan"], "--w must be finite and >= 0 (got nan)"),
])
def test_frontier_names_a_bad_time_by_its_own_flag(tmp_path, argv, match):
    """The ``--w <= --b`` check blamed ``--w`` for a ``--b`` that is no time at all."""
    err = run_script("frontier.py", *argv, "--out", str(tmp_path), cwd=tmp_path)
    assert match in err and "--w must be <= --b" not in err, err


@pytest.mark.parametrize("script, argv, match", [
    ("frontier.py", ["-p", "4", "-n", "8", "--budgets", "2", "--out", "afile/sub"],
     "error: --out must be a folder that can be made (got 'afile/sub': Not a directory)"),
    ("fidelity.py", ["--out", "afile"],
     "error: --out must be a folder that can be made (got 'afile': File exists)"),
    ("fidelity.py", ["--no-plots", "--markdown", "afile/rows.md"],
     "error: --markdown's folder must be a folder that can be made (got 'afile'"),
    ("fidelity.py", ["--vtrain-table", "nonexist.csv"],
     "error: --vtrain-table: a vTrain table must be a readable CSV (got nonexist.csv"),
    ("measure.py", ["--steps", "0"], "error: --steps must be a positive integer (got --steps=0)"),
    ("measure.py", ["--time-limit", "0"],
     "argument --time-limit: must be a finite number of seconds > 0 (got '0')"),
    ("measure.py", ["--reread", "nonexist"], "error: --reread must name a folder of a "
                                             "scripts/measure.py run"),
    ("measure.py", ["--picture", "p.txt"], "error: --picture must end in a format matplotlib "
                                           "writes"),
    ("variability.py", ["--samples", "20", "--picture", "p.txt"],
     "error: --picture must end in a format matplotlib writes"),
])
def test_scripts_refuse_their_outputs_before_the_work(tmp_path, script, argv, match):
    """frontier.py made its --out after every search, fidelity.py and measure.py let the
    library's errors and the OS's out as tracebacks (measure.py after minutes of real runs),
    and a picture's format was checked when it was drawn, after the work."""
    from helpers import run_script

    (tmp_path / "afile").write_text("")
    err = run_script(script, *argv, cwd=tmp_path)
    assert match in err, err
    assert "budgets:" not in err and "measuring" not in err  # no work began


@pytest.mark.parametrize("argv, match", [
    (["plan", "--model", "llama3-8b", "--gpus", "8", "--out", "afile/x", "--no-plots"],
     "error: --out must be a folder that can be made (got 'afile/x': Not a directory)"),
    (["measure", "-s", "ScheduleGPipe", "-p", "2", "-n", "4", "--picture", "p.txt"],
     "error: --picture must end in a format matplotlib writes"),
    (["simulate", "--from-csv", "zbv.csv", "-n", "4"],
     "error: -n must cover the microbatches of zbv.csv: at least 8 (got -n=4; left out, the "
     "file's count is taken)"),
    (["explain", "--vtrain", "missing.json"],
     "error: --vtrain must be a vTrain configuration's JSON file (no file missing.json)"),
])
def test_commands_refuse_before_the_work(tmp_path, monkeypatch, capsys, argv, match):
    """plan wrote its table after planning (an errno without the flag); measure drew its
    picture's format check after the run; a CSV read with too small an -n blamed the file
    and its placement; a missing vTrain file was called a config.json."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    rows = [[f"{d}F{j}" for j in range(8)] + [f"{d}B{j}" for j in range(8)] for d in range(2)]
    (tmp_path / "zbv.csv").write_text("\n".join(",".join(r) for r in rows) + "\n")
    assert main(argv) == 2
    err = cli_stderr(capsys)
    assert match in err, err
    assert "planned in" not in capsys.readouterr().out


def test_explain_says_which_flag_gives_the_microbatches(capsys, tmp_path):
    """An interleaved run of --hf with the default global batch (one microbatch a pipeline)
    cannot be priced; the error spoke of n and G, which no flag sets."""
    from pathlib import Path

    from helpers import cli_stderr

    from fastpp.__main__ import main

    hf = str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    assert main(["explain", "--hf", hf, "--gpus", "64", "--tp", "8", "--pp", "4", "--m", "2",
                 "--neighbours", "0"]) == 2
    assert "(--global-batch defaults to one microbatch per pipeline, n = 1: give " \
           "--global-batch)" in cli_stderr(capsys)


def test_a_reader_that_leaves_ends_the_command_quietly():
    """``python -m fastpp list | head -1`` printed 'error: [Errno 32] Broken pipe' (exit 2)."""
    import os
    import subprocess
    import sys

    with subprocess.Popen([sys.executable, "-m", "fastpp", "list"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=dict(os.environ)) as run:
        run.stdout.close()  # before it writes: its first line meets a closed pipe
        err = run.stderr.read().decode()
        assert run.wait(timeout=120) == 1
    assert "Broken pipe" not in err and "Traceback" not in err, err


def test_simulate_without_p_and_n_names_its_command(capsys):
    from fastpp.__main__ import main

    with pytest.raises(SystemExit):
        main(["simulate", "-s", "1f1b", "-p", "4"])
    assert "python -m fastpp simulate: error: --schedule needs -p and -n" in \
        capsys.readouterr().err


def test_explain_hints_at_the_global_batch_only_for_the_microbatch_count(capsys):
    from pathlib import Path

    from helpers import cli_stderr

    from fastpp.__main__ import main

    hf = str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    assert main(["explain", "--hf", hf, "--gpus", "6", "--tp", "3", "--seq", "4095",
                 "--neighbours", "0"]) == 2
    err = cli_stderr(capsys)
    assert "--tp must divide the heads" in err and "--global-batch" not in err


def test_messages_name_what_the_user_gave(tmp_path, capsys):
    """``--capacity-gb 1e300`` said "capacity must be finite and > 0 (got inf)"; ``--f
    1e300`` named overhead and send terms optimize has no flag for; a launcher's
    ``--nproc_per_node 0`` named ``--gpus``, not given; a 0-d object array showed as a
    list."""
    from fastpp.__main__ import main
    from fastpp.model import from_megatron

    assert main(["plan", "--model", "llama2-7b", "--gpus", "8", "--capacity-gb",
                 "1e300"]) == 2
    assert "--capacity-gb must be finite and > 0 (got 1e+300)" in capsys.readouterr().err
    assert main(["optimize", "-p", "4", "-n", "8", "--f", "1e300", "--quiet"]) == 2
    assert "error: --f / m must be at most 1e+290" in capsys.readouterr().err
    script = ("GPUS_PER_NODE=0\ntorchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py "
              "--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
              "--vocab-size 1000")
    with pytest.raises(ScheduleError, match=r"torchrun's --nproc_per_node 0 starts no "
                                            r"process \(give it a count >= 1, or gpus=N\)"):
        from_megatron(script)
    with pytest.raises(ScheduleTypeError, match=r"\(got 1.0\)$"):
        Costs(np.array(1.0, dtype=object), 2.0)


def test_an_output_that_cannot_be_written_is_refused_before_the_work(tmp_path, capsys):
    """``optimize --csv FOLDER`` searched and printed its result, then failed; so did
    ``explain --report FOLDER`` after pricing its neighbours."""
    from fastpp.__main__ import main

    assert main(["optimize", "-p", "4", "-n", "8", "--csv", str(tmp_path), "--quiet"]) == 2
    out = capsys.readouterr()
    assert "--csv must be a file path that can be written" in out.err and "best:" not in out.out
    assert main(["explain", "--hf", str(HF_DATA / "qwen3-8b.json"), "--gpus", "16", "--tp", "2",
                 "--pp", "2", "--global-batch", "64", "--report", str(tmp_path)]) == 2
    out = capsys.readouterr()
    assert "--report must be a file path that can be written" in out.err
    assert "step time" not in out.out


def test_an_unknown_flag_is_the_commands_error_and_the_flag_it_misspells_named(capsys):
    """``plan --gpu 64`` printed the top-level usage and "python -m fastpp: error:
    unrecognized arguments", not the command's (docs/cli.md), and did not say ``--gpus``."""
    from fastpp.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["plan", "--gpu", "64"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m fastpp plan ")
    assert ("python -m fastpp plan: error: unrecognized arguments: --gpu 64 (did you mean "
            "--gpus for --gpu?)") in err
    with pytest.raises(SystemExit):
        main(["optimize", "-p", "2", "-n", "4", "--quite"])
    assert "(did you mean --quiet for --quite?)" in capsys.readouterr().err


def test_empty_names_are_refused_as_given(capsys, tmp_path):
    """``report -o ''`` said "got '.'"; ``--attention-kernel ''`` (and
    ``with_attention_kernel(h, '')``) priced the GPU's own kernel, unsaid."""
    from fastpp.__main__ import main
    from fastpp.model.attention import with_attention_kernel

    sweep = fastpp.sweep("1f1b", p=4, n=8, progress=False)
    sweep.to_parquet(tmp_path / "s.parquet")
    assert main(["report", str(tmp_path / "s.parquet"), "-o", ""]) == 2
    assert "--output must be a file in an existing folder (got '')" in capsys.readouterr().err
    assert main(["plan", "--model", "llama2-7b", "--gpus", "8", "--attention-kernel", ""]) == 2
    assert "--attention-kernel must name a measured kernel (got '')" in capsys.readouterr().err
    with pytest.raises(ScheduleError, match=r"implementation must name a measured kernel"):
        with_attention_kernel(HARDWARE["H100-80GB"], "")


def test_cli_refuses_before_the_work_what_it_would_ignore_or_fail_after(capsys, tmp_path):
    """``--fb`` on a schedule without overlapped pairs changed nothing and was taken (``-G``
    there is refused); ``--gantt x.txt`` printed the whole table, or ran a whole search, and
    then failed on the picture's format."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    assert main(["simulate", "-s", "1f1b", "-p", "4", "-n", "8", "--fb", "2"]) == 2
    assert cli_stderr(capsys) == ("error: --fb must not be given for '1f1b': it runs no "
                                  "overlapped F&B pairs (got --fb 2)\n")
    assert main(["simulate", "-s", "dualpipev", "-p", "4", "-n", "8", "--fb", "2.5"]) == 0
    capsys.readouterr()
    for command in (["simulate", "-s", "1f1b", "-p", "4", "-n", "8"],
                    ["optimize", "-p", "4", "-n", "8", "--memory-limit", "2"]):
        for flag in ("--gantt", "--memory-plot"):
            assert main([*command, flag, str(tmp_path / "x.txt")]) == 2
            captured = capsys.readouterr()
            assert captured.out == "" and f"error: {flag} must end in a format matplotlib " \
                                          f"writes" in captured.err


def test_the_fidelity_scripts_files_are_written_whole(tmp_path, monkeypatch):
    """``--errorbars`` wrote the package's errorbars.json in place: a Ctrl-C while it wrote
    left it empty, and every plan after it a JSONDecodeError; ``--markdown`` and the picture
    the same. Each goes through a temporary file now (``atomic_write``)."""
    import importlib.util

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("fidelity_script",
                                                  root / "scripts" / "fidelity.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    table = tmp_path / "errorbars.json"
    table.write_text('{"regimes": []}\n')
    real = Path.write_text

    def cut(self, text, *args, **kwargs):  # Ctrl-C halfway through the write
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(script, "regime_table", lambda df: [{"gpu": "A100"}] * 50)
    monkeypatch.setattr(Path, "write_text", cut)
    with pytest.raises(KeyboardInterrupt):
        script.write_errorbars(None, table)
    monkeypatch.setattr(Path, "write_text", real)
    assert table.read_text() == '{"regimes": []}\n'  # the old table, whole
    assert [x.name for x in tmp_path.iterdir()] == ["errorbars.json"]  # no temporary left
    source = (root / "scripts" / "fidelity.py").read_text()
    assert "savefig(path" not in source and ".write_text(" not in source.replace(
        "tmp.write_text(", "")  # (the markdown and the picture likewise)


def test_ctrl_c_is_a_line_and_130_not_a_traceback():
    """``python -m fastpp plan``, ``optimize``, ``scripts/frontier.py`` and
    ``scripts/fidelity.py`` printed a traceback of 26 to 216 lines on Ctrl-C."""
    from fastpp.checks import until_interrupted

    def interrupted():
        raise KeyboardInterrupt

    assert until_interrupted(interrupted) == 130

    def in_an_import():  # OR-Tools' pybind11 module turns Ctrl-C in its import into this
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as stop:
            raise ImportError("initialization failed") from stop

    assert until_interrupted(in_an_import) == 130  # (it had exited 1 with a traceback)

    def missing():
        raise ImportError("no module named x")

    with pytest.raises(ImportError, match="no module named x"):
        until_interrupted(missing)
    root = Path(__file__).resolve().parent.parent
    for name in ("frontier.py", "fidelity.py", "variability.py", "measure.py", "memorybars.py"):
        assert "until_interrupted(main)" in (root / "scripts" / name).read_text(), name
    # a real Ctrl-C in a real search: its best so far, or a line, and 130; no traceback
    out, err = _interrupted(["-p", "8", "-n", "48", "--w", "1", "--comm", "0.3",
                             "--memory-limit", "3", "--method", "improve"], 6)  # (its minute)
    assert "interrupted" in out + err


def test_ctrl_c_stops_the_exact_search():
    """CP-SAT's own SIGINT handler stopped its search and returned it as though its time had
    run out: ``optimize --method exact`` exited 0 saying "the time limit ran out", and a loop
    of searches went on. The solver now runs on a thread of its own and Ctrl-C is Python's."""
    pytest.importorskip("ortools")
    out, _ = _interrupted(["-p", "6", "-n", "16", "--f", "1.3", "--b", "3.1", "--w", "1",
                           "--comm", "0.3", "--gamma", "0.4", "--memory-limit", "3",
                           "--method", "exact"], 8)  # (proven after about 20 s)
    assert "interrupted" in out and "time limit" not in out, out


def _interrupted(args: list[str], after: float) -> tuple[str, str]:
    """``python -m fastpp optimize`` with ``args`` (a minute's limit, quiet), sent a real
    SIGINT ``after`` seconds: its output, once it has exited 130 without a traceback."""
    import signal
    import time

    root = Path(__file__).resolve().parent.parent
    run = subprocess.Popen([sys.executable, "-m", "fastpp", "optimize", *args, "--time-limit",
                            "60", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ, PYTHONPATH=str(root)))
    time.sleep(after)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in err, err[-2000:]
    return out, err


def test_a_plan_leaves_no_earlier_plans_picture_beside_its_table(tmp_path):
    """Interrupted after its table, ``plan --out`` left an earlier run's plan.png and
    plan.html beside it; they go before the new table is written."""
    from fastpp.__main__ import main

    for name in ("plan.png", "plan.html"):
        (tmp_path / name).write_text("an earlier plan's")
    assert main(["plan", "--model", "llama3-8b", "--gpus", "8", "--seq", "2048",
                 "--global-batch", "16", "--tp", "1", "--pp", "2", "--schedules", "1f1b",
                 "--no-plots", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "plan.parquet").is_file()
    assert not (tmp_path / "plan.png").exists() and not (tmp_path / "plan.html").exists()


def test_cli_presets_say_what_the_command_line_takes(capsys, monkeypatch, tmp_path):
    """--model, --hardware and --link offered "or a model object" (the Python API's
    alternative, which a command line cannot give); the API's own message is unchanged."""
    import pytest

    monkeypatch.chdir(tmp_path)  # (plan makes its --out, results, before it plans)

    from fastpp.model import HARDWARE, LINKS, MODELS, plan

    assert _cli(capsys, "plan", "--model", "gpt-5") == (
        f"error: --model must be a preset, one of {sorted(MODELS)}, or a Hugging Face "
        "config.json or its folder (got 'gpt-5')")
    assert _cli(capsys, "plan", "--hardware", "H100") == (
        f"error: --hardware must be a preset, one of {sorted(HARDWARE)} (got 'H100')")
    assert _cli(capsys, "plan", "--link", "IB") == (
        f"error: --link must be a preset, one of {sorted(LINKS)} (got 'IB')")
    assert _cli(capsys, "explain", "--hf", "no/config.json", "--gpus", "8", "--hardware",
                "H1").startswith("error: --hardware must be a preset, one of [")
    assert _cli(capsys, "plan", "--model", "no/config.json").startswith(
        "error: --model must be a config.json or a folder holding one")
    assert _cli(capsys, "explain", "--hf", "no/config.json", "--gpus", "8").startswith(
        "error: --hf must be a config.json or a folder holding one")
    with pytest.raises(fastpp.ScheduleError, match=r"model must be one of \[.*\] or a model "
                       r"object \(got 'gpt-5'\)"):
        plan("gpt-5", 8, seq=4096, global_batch=8)


def test_a_degree_that_does_not_divide_the_gpus_is_named(capsys, monkeypatch, tmp_path):
    """plan --pp 3 on 64 GPUs said "--gpus=64 has no factorization ... p in [3]": the fault
    is --pp's, which must divide --gpus."""
    import pytest

    monkeypatch.chdir(tmp_path)

    from fastpp.model import plan

    assert _cli(capsys, "plan", "--gpus", "64", "--pp", "3") == \
        "error: --pp must divide --gpus=64 (got --pp=3)"
    assert _cli(capsys, "plan", "--gpus", "64", "--pp", "3", "6") == \
        "error: --pp must divide --gpus=64 (got --pp=[3, 6])"
    assert _cli(capsys, "plan", "--gpus", "64", "--cp", "3") == \
        "error: --cp must divide --gpus=64 (got --cp=3)"
    with pytest.raises(fastpp.ScheduleError, match=r"^pp must divide gpus=64 \(got pp=3\)$"):
        plan("llama3-70b", 64, seq=4096, global_batch=64, pp=3)
