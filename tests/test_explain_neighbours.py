"""``explain``'s neighbours written in what the run was given in: a torchtitan job's keys, and
``explain --hf``'s own run flags (until 7 December 2026 both were Megatron's flags or
fastpp's fields). Each neighbour, its changes applied to the run as given and read back, is
priced as listed."""

import json
import re
import tomllib
from pathlib import Path

import pytest

from fastpp.model import plan
from fastpp.model.explain import CLI_FLAGS, explain
from fastpp.model.torchtitan import from_torchtitan

DATA = Path(__file__).parent / "data"
JOB = DATA / "torchtitan" / "llama3_8b.toml"


def _applied(job: dict, changes: str) -> dict:
    """``job`` with ``section.key=value`` set and ``no section.key`` removed."""
    job = {name: dict(table) for name, table in job.items()}
    for change in re.findall(r'no \S+|\S+=(?:"[^"]*"|\[[^\]]*\]|\S+)', changes):
        if change.startswith("no "):
            name, _, key = change[3:].partition(".")
            del job[name][key]
        else:
            path, _, value = change.partition("=")
            name, _, key = path.partition(".")
            job.setdefault(name, {})[key] = json.loads(value)
    return job


def _toml(job: dict) -> str:
    return "\n".join(f"[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n"
                                              for k, v in table.items())
                     for name, table in job.items())


def test_torchtitan_neighbours_are_job_keys_that_price_as_listed(tmp_path):
    model, config = from_torchtitan(JOB, gpus=64)[:2]
    found = explain(model, config, "H100-80GB", neighbours=5, flags="torchtitan")
    assert len(found.neighbours) == 5
    job = tomllib.loads(JOB.read_text())
    for k, n in enumerate(found.neighbours):
        changes = n["changes"]
        assert re.fullmatch(r'((no )?[a-z_]+\.[a-z_]+(=\S+)?\s?)+', changes), changes
        # the run's stage weights kept: torchtitan's default split, not an even one
        assert "less_layers" not in changes, changes
        path = tmp_path / f"neighbour{k}.toml"
        path.write_text(_toml(_applied(job, changes)))
        again_model, again = from_torchtitan(path, gpus=64)[:2]
        row = plan(again_model, hardware="H100-80GB", config=again).iloc[0]
        assert row["step_time"] == pytest.approx(n["step_time"], rel=1e-9), changes
        assert row["step_time"] < found.row["step_time"] and row["fits"]


def test_hf_neighbours_are_the_commands_run_flags(capsys):
    from fastpp.__main__ import main

    run = ["explain", "--hf", str(DATA / "hf" / "gpt2.json"), "--gpus", "8", "--tp", "2",
           "--pp", "2", "--global-batch", "64", "--seq", "1024", "--hardware", "A100-80GB"]
    assert main(run) == 0
    out = capsys.readouterr().out
    listed = re.findall(r"^\s+([\d.]+) s\s+[\d.]+x\s+[\d.]+ GB\s+(.+?)$",
                        out.split("faster and fits")[1], re.M)
    assert len(listed) == 5, out
    for seconds, changes in listed:
        flags = changes.split()[::2]
        assert set(flags) <= set(CLI_FLAGS.values()), changes
        assert main([*run, *changes.split(), "--neighbours", "0"]) == 0
        again = re.search(r"step time\s+([\d.]+) s", capsys.readouterr().out).group(1)
        assert again == seconds, changes
