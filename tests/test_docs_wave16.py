"""The sixteenth wave's trial: what the pages and the command line's messages say of fastpp
is what it does (each test failed before its fix)."""

import re
from pathlib import Path

import fastpp

ROOT = Path(__file__).resolve().parents[1]


def _text(page: str) -> str:
    return " ".join((ROOT / page).read_text().split())  # lines joined: a sentence may wrap


def test_default_m_is_listed_exactly():
    """sweeps.md and cli.md name every schedule whose default_m is 2 (interleaved-zb and
    combined-1f1b were left out of one, looped-bfs of the other)."""
    two = {name for name, spec in fastpp.SCHEDULES.items() if spec.default_m == 2}
    assert {spec.default_m for spec in fastpp.SCHEDULES.values()} == {1, 2}
    for page in ("docs/sweeps.md", "docs/cli.md"):
        said = re.search(r"default_m`: 2 for (.+?), 1 for the others", _text(page))
        assert said, page
        assert set(re.findall(r"`([^`]+)`", said.group(1))) == two, page


def test_adding_a_schedule_works_as_written(tmp_path):
    """docs/adding-a-schedule.md's two blocks, pasted where it says into a copy of fastpp,
    give a schedule ``build_schedule`` knows (its entry named ``gpipe_lifo``, which the
    registry does not import: ``import fastpp`` was a NameError)."""
    import os
    import shutil
    import subprocess
    import sys
    import textwrap

    page = (ROOT / "docs" / "adding-a-schedule.md").read_text()
    generator, entry = (textwrap.dedent(b) for b in
                        re.findall(r"^ *```python\n(.*?)^ *```", page, re.S | re.M))
    shutil.copytree(ROOT / "fastpp", tmp_path / "fastpp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    classic = tmp_path / "fastpp" / "generators" / "classic.py"
    classic.write_text(classic.read_text() + "\n\n" + generator)
    registry = tmp_path / "fastpp" / "generators" / "registry.py"
    text = registry.read_text()
    end = text.index("\n)}\n")  # the end of SCHEDULES' list
    registry.write_text(text[:end] + "\n" + textwrap.indent(entry.rstrip(), "    ") + text[end:])
    code = ("import fastpp; s = fastpp.build_schedule('gpipe-lifo', 2, 3); "
            "print(fastpp.SCHEDULES['gpipe-lifo'].summary); print(s)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(tmp_path), "NUMBA_DISABLE_JIT": "1"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "GPipe, backwards newest first"
    assert run.stdout.splitlines()[-1].split() == ["device", "1:", "1F0", "1F1", "1F2", "1B2",
                                                   "1B1", "1B0"]


def test_plan_page_names_every_preset():
    """docs/plan.md lists every model, hardware and link preset (it named 7 of 14 models and
    4 of 8 GPUs)."""
    from fastpp.model import HARDWARE, LINKS, MODELS

    said = set(re.findall(r"`([\w.-]+)`", _text("docs/plan.md")))
    for table in (MODELS, HARDWARE, LINKS):
        assert set(table) <= said, sorted(set(table) - said)


def test_missing_published_data_is_named(monkeypatch, tmp_path):
    """validate() on a data folder without the tables said pandas' FileNotFoundError (and
    scripts/fidelity.py ended in its traceback): now the folder, how it is found and the file."""
    import os
    import subprocess
    import sys

    import pytest

    from fastpp.model import published, validate

    monkeypatch.setattr(published, "DATA", tmp_path)
    with pytest.raises(fastpp.ScheduleError, match=r"\$FASTPP_DATA, else shared/data .* must "
                       r"hold korthikanti_2022.csv \(got .*, without it\)"):
        validate(["korthikanti_2022"])
    run = subprocess.run([sys.executable, "scripts/fidelity.py", "--no-plots"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "FASTPP_DATA": str(tmp_path)})
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("error: the published data folder ($FASTPP_DATA, else "
                                 "shared/data beside the repository) must hold "), run.stderr
    assert len(run.stderr.splitlines()) == 1


def test_budget_names_every_schedule_of_df():
    """best_within_budget's message listed the first 12 schedules of df, without a word of the
    others (zb-h2 and zbv, the one a user writing 'zb-v' meant)."""
    import pandas as pd
    import pytest

    names = sorted(fastpp.SCHEDULES)
    df = pd.DataFrame({"schedule": names, "p": 2, "n": 4, "makespan": 1.0,
                       "peak_activations_max": 1.0})
    with pytest.raises(fastpp.ScheduleError) as err:
        fastpp.best_within_budget(df, budget="zb-v")
    training = [n for n in names if not fastpp.SCHEDULES[n].forward_only]
    assert str(err.value) == (f"budget must be a number or a schedule of df, one of {training} "
                              "(got 'zb-v')")


def test_long_lists_say_how_many():
    """A list of choices in a message is whole, or says it is cut and how long it is (a
    column of a wide table was chosen among its first 12 columns, silently)."""
    import pandas as pd
    import pytest

    from fastpp.checks import dataframe, listed

    assert listed(["a", "b"]) == "['a', 'b']"
    assert listed(range(50), most=3) == "[0, 1, 2, ... (50 in all)]"
    wide = pd.DataFrame({f"c{i}": [0] for i in range(20)})
    with pytest.raises(fastpp.ScheduleError, match=r"'c19'\] \(got 'x'\)"):
        dataframe(wide, "df", {"by": "x"})


def _cli(capsys, *argv) -> str:
    """``python -m fastpp argv``'s one error line (exit code 2)."""
    from fastpp.__main__ import main

    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    return err.strip()


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


def test_sweep_script_checks_every_flag_before_compiling(monkeypatch, capsys, tmp_path):
    """scripts/sweep.py --comm -1 compiled the kernels (half a minute on a new machine),
    then refused the flag; sweep(check_only=True) checks without sweeping."""
    import pytest
    from helpers import script

    sweep_script = script("sweep")

    def no_work(**kwargs):
        raise AssertionError("the kernels were compiled before the flags were checked")

    monkeypatch.setattr(sweep_script, "warm_up", no_work)
    for flags, message in ((["--comm", "-1"], "error: --comm must be finite and >= 0 (got "
                                              "[-1.0])"),
                           (["--gamma", "2"], "error: --gamma must be in [0, 1] (got 2.0)"),
                           (["--workers", "0"], "error: --workers must be a positive integer")):
        assert sweep_script.main([*flags, "--no-plots", "--no-progress", "--out",
                                  str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err.startswith(message), flags
    assert fastpp.sweep(["1f1b"], p=2, n=2, check_only=True) is None
    with pytest.raises(fastpp.ScheduleError, match="comm must be finite"):
        fastpp.sweep(["1f1b"], p=2, n=2, comm=-1.0, check_only=True)


def test_plan_summary_shows_a_single_cp():
    """plan --cp 2: every row had cp = 2, so no column showed it, and t p d read as half the
    GPUs."""
    from fastpp.model import plan
    from fastpp.model.plan import summary

    rows = plan("llama2-7b", 8, seq=4096, global_batch=8, cp=2, tp=[1], pp=[2],
                schedules=["1f1b"], recompute="none", workers=1, progress=False)
    header = summary(rows, 1).splitlines()[3]
    assert header.split()[-1] == "cp", header
    lines = summary(plan("llama2-7b", 8, seq=4096, global_batch=8, tp=[1], pp=[2],
                         schedules=["1f1b"], recompute="none", workers=1,
                         progress=False), 1).splitlines()
    assert lines[3].split()[-1] == "error"  # no cp column where every row has cp = 1


def test_a_config_json_is_named_as_the_path_names_it(monkeypatch, tmp_path):
    """explain --hf config.json, run in the file's folder, named the model after that folder
    (a temporary one's name, "w"): the path given names no folder, so the model is named
    config.json; a path naming the folder still gives the folder's name."""
    import json

    from fastpp.model import from_hf

    folder = tmp_path / "w"
    folder.mkdir()
    config = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "small.json").write_text(json.dumps(config))
    monkeypatch.chdir(folder)
    assert [from_hf(p).name for p in ("config.json", "./config.json", ".", "small.json")] == [
        "config.json", "config.json", "config.json", "small"]
    monkeypatch.chdir(tmp_path)
    assert [from_hf(p).name for p in ("w", "w/config.json", str(folder))] == ["w", "w", "w"]
    (folder / "config.json").write_text(json.dumps({**config, "_name_or_path": "org/m"}))
    assert from_hf("w").name == "org/m"


def test_help_shows_the_defaults():
    """cli.md: "a default in parentheses is what leaving the flag out gives ... --help prints
    the same list"; sweep.py's help gave none for six flags, measure's said
    "fastpp.measured.measure's", plan's --schedules had no help at all."""
    import argparse
    import inspect

    from helpers import script

    from fastpp.__main__ import MEASURE_FLAGS, _parser, _subparser
    from fastpp.measured import measure

    ap = _parser()
    text = {c: _subparser(ap, argparse.Namespace(command=c)).format_help()
            for c in ("measure", "plan")}
    assert "measure's" not in text["measure"]
    defaults = {k: v.default for k, v in inspect.signature(measure).parameters.items()}
    for key, (_, _, shown) in MEASURE_FLAGS.items():
        assert defaults[key] == shown, key
    schedules = next(a for a in _subparser(ap, argparse.Namespace(command="plan"))._actions
                     if "--schedules" in a.option_strings)
    assert schedules.help and "combined-1f1b" in schedules.help
    for action in script("sweep").parser()._actions:
        if action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in action.help, action.option_strings


def test_the_command_list_is_whole():
    """The module docstring left out explain; explain's line of --help left out vTrain."""
    import argparse

    import fastpp.__main__ as cli

    commands = next(a for a in cli._parser()._actions
                    if isinstance(a, argparse._SubParsersAction)).choices
    listed = re.search(r"\{(.*?)\}", cli.__doc__, re.S).group(1)
    assert {c.strip() for c in listed.split(",")} == set(commands)
    explain = next(a for a in next(a for a in cli._parser()._actions
                                   if isinstance(a, argparse._SubParsersAction))._choices_actions
                   if a.dest == "explain")
    for source in ("Megatron", "torchtitan", "HF config.json", "vTrain"):  # its five flags
        assert source in explain.help, source


def test_cli_md_lists_every_flag():
    """cli.md's "Every option" had left out plan's --attention-kernel and --attention-speed."""
    import argparse

    from fastpp.__main__ import _parser, _subparser

    ap, page = _parser(), (ROOT / "docs" / "cli.md").read_text()
    commands = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{command} {flag}" for command in commands.choices
               for action in _subparser(ap, argparse.Namespace(command=command))._actions
               for flag in action.option_strings
               if flag.startswith("--") and flag != "--help" and f"`{flag}" not in page]
    assert not missing


def test_cli_md_lists_every_scripts_flag():
    """cli.md's "Scripts" had left out ``scripts/measure.py``'s ``--timeout``: each script's
    paragraphs name every flag its ``--help`` lists."""
    import subprocess
    import sys

    page = (ROOT / "docs" / "cli.md").read_text()
    scripts = page[page.index("\n## Scripts"):]
    # each script's part: from its name at a line's start to the next script's
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^`scripts/(\w+)\.py", scripts,
                                                            re.M)]
    parts = {name: scripts[at:end] for (at, name), (end, _)
             in zip(starts, [*starts[1:], (len(scripts), "")], strict=True)
             if name != "plan"}  # ("is python -m fastpp plan": the command's flags, above)
    helps = {name: subprocess.Popen([sys.executable, str(ROOT / "scripts" / f"{name}.py"),
                                     "--help"], stdout=subprocess.PIPE, text=True)
             for name in parts}  # (all at once: each imports fastpp, some torch)
    missing = []
    for name, shown in helps.items():
        text = shown.communicate(timeout=120)[0]
        assert shown.returncode == 0, name
        flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text)) - {"--help"}
        missing += [f"{name}.py {flag}" for flag in sorted(flags) if f"`{flag}" not in parts[name]]
    assert len(parts) >= 8 and not missing
