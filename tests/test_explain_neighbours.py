"""``explain``'s neighbours written in what the run was given in: a torchtitan job's keys, and
``explain --hf``'s own run flags (until 7 December 2026 both were Megatron's flags or
fastpp's fields). Each neighbour, its changes applied to the run as given and read back, is
priced as listed."""

import json
import re
import tomllib
from pathlib import Path

import pytest

from fastpp import ScheduleError
from fastpp.model import MODELS, RunConfig, from_megatron, plan
from fastpp.model.explain import CLI_FLAGS, _flag_map, explain
from fastpp.model.megatron import to_megatron
from fastpp.model.torchtitan import from_torchtitan, to_torchtitan

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


# each found by a review to list changes that, applied to the job, made another run: a job
# whose split is even with torchtitan's default weights; a pipeline that the neighbours
# leave, where torchtitan reshards FSDP after each forward by default; t = 1, whose t > 1
# neighbours torchtitan runs with sequence parallelism; no pipeline and no global batch
# stated; an explicit split point; stage weights two pairs split alike
JOBS = {"the benchmark's job": (64, {}),
        "1F1B, even split": (16, {"parallelism.pipeline_parallel_schedule": "1F1B",
                                  "training.local_batch_size": 4}),
        "no recomputation": (64, {"activation_checkpoint.mode": "none"}),
        "t = 1, p = 1": (64, {"parallelism.tensor_parallel_degree": 1,
                              "parallelism.pipeline_parallel_degree": 1,
                              "training.local_batch_size": 1,
                              "training.global_batch_size": 64}),
        "p = 1, no global batch": (64, {"parallelism.pipeline_parallel_degree": 1}),
        "split points": (16, {"parallelism.pipeline_parallel_schedule": "1F1B",
                              "parallelism.pipeline_parallel_split_points": ["layers.10"]}),
        "weights 2 and 2": (64, {"parallelism.pipeline_parallel_degree": 4,
                                 "parallelism.pipeline_parallel_first_stage_less_layers": 2,
                                 "parallelism.pipeline_parallel_last_stage_less_layers": 2,
                                 "training.local_batch_size": 8})}


@pytest.mark.parametrize("name", JOBS)
def test_torchtitan_neighbours_are_job_keys_that_price_as_listed(tmp_path, name):
    gpus, edits = JOBS[name]
    job = _applied(tomllib.loads(JOB.read_text()),
                   " ".join(f"{k}={json.dumps(v)}" for k, v in edits.items()))
    model, config = from_torchtitan(job, gpus=gpus)[:2]
    found = explain(model, config, "H100-80GB", neighbours=6, flags="torchtitan", job=job)
    assert found.neighbours
    for n in found.neighbours:
        changes = n["changes"]
        assert re.fullmatch(r'((no )?[a-z_]+\.[a-z_]+(=\S+)?\s?)+', changes), changes
        again_model, again = from_torchtitan(_applied(job, changes), gpus=gpus)[:2]
        row = plan(again_model, hardware="H100-80GB", config=again).iloc[0]
        assert row["step_time"] == pytest.approx(n["step_time"], rel=1e-9), changes
        assert row["peak_memory"] == pytest.approx(n["peak_memory"], rel=1e-9), changes
        assert row["step_time"] < found.row["step_time"] and row["fits"]
    if name == "the benchmark's job":  # its own weights kept: nothing of the split written
        assert not any("less_layers" in n["changes"] for n in found.neighbours)


def test_torchtitan_neighbours_without_the_job_are_to_torchtitans(tmp_path):
    model, config = from_torchtitan(JOB, gpus=64)[:2]
    found = explain(model, config, "H100-80GB", neighbours=3, flags="torchtitan")
    job = tomllib.loads(to_torchtitan(config, model))
    for n in found.neighbours:
        again_model, again = from_torchtitan(_applied(job, n["changes"]), gpus=64,
                                             model=model)[:2]
        assert plan(again_model, hardware="H100-80GB", config=again).iloc[0][
            "step_time"] == pytest.approx(n["step_time"], rel=1e-9)
    with pytest.raises(ScheduleError, match=r"job is the torchtitan job the run was read "
                                            r"from: it needs flags='torchtitan' \(got "
                                            r"flags='megatron'\)"):
        explain(model, config, "H100-80GB", job=JOB)


def test_torchtitan_neighbours_of_a_job_that_is_not_the_run_are_refused():
    """Each neighbour is a change of ``job``: a job of another run (here t = 4 where the run
    has t = 2) had listed 'pipeline_parallel_degree=1' alone at 1.94x, its t = 4 unsaid."""
    job = ("[parallelism]\ntensor_parallel_degree = 2\npipeline_parallel_degree = 2\n"
           "[training]\nseq_len = 512\nlocal_batch_size = 4\nglobal_batch_size = 8\n")
    model, config = from_torchtitan(job, gpus=8, model="llama3-8b")[:2]
    assert explain(model, config, neighbours=1, workers=1, flags="torchtitan", job=job)
    with pytest.raises(ScheduleError, match=r"job must be the torchtitan job the run was "
                                            r"read from: it reads as seq=1024 \(the run's "
                                            r"512\)"):
        explain(model, config, neighbours=1, workers=1, flags="torchtitan",
                job=job.replace("seq_len = 512", "seq_len = 1024"))
    with pytest.raises(ScheduleError, match=r"global_batch_size must be local_batch_size"):
        explain(model, config, neighbours=1, workers=1, flags="torchtitan",
                job=job.replace("tensor_parallel_degree = 2", "tensor_parallel_degree = 4"))


HF_RUNS = {"given": ["gpt2.json", "--gpus", "8", "--tp", "2", "--pp", "2", "--seq", "1024",
                     "--hardware", "A100-80GB", "--global-batch", "64"],
           "default": ["llama-3.1-8b.json", "--gpus", "16", "--tp", "2", "--pp", "2",
                       "--seq", "4096"]}


@pytest.mark.parametrize("batch", HF_RUNS)
def test_hf_neighbours_are_the_commands_run_flags(capsys, batch):
    """Without --global-batch the command's default (--microbatch times d) moves with a
    neighbour's d or microbatch: the neighbour then writes the run's batch too (a review
    found every such neighbour priced at another batch)."""
    from fastpp.__main__ import main

    config, *flags = HF_RUNS[batch]
    run = ["explain", "--hf", str(DATA / "hf" / config), *flags]
    assert main(run) == 0
    out = capsys.readouterr().out
    listed = re.findall(r"^\s+([\d.]+) s\s+[\d.]+x\s+([\d.]+) GB\s+(.+?)$",
                        out.split("faster and fits")[1], re.M)
    assert len(listed) == 5, out
    for seconds, memory, changes in listed:
        flags = changes.split()[::2]
        assert set(flags) <= {*CLI_FLAGS.values(), "--global-batch"}, changes
        assert main([*run, *changes.split(), "--neighbours", "0"]) == 0
        again = capsys.readouterr().out
        assert re.search(r"step time\s+([\d.]+) s", again).group(1) == seconds, changes
        assert re.search(r"total\s+([\d.]+) GB", again).group(1) == memory, changes
    if batch == "default":
        assert any("--global-batch" in changes for *_, changes in listed)


def _megatron_applied(words: list[str], changes: str) -> list[str]:
    """``words`` with each ``--flag value`` of ``changes`` set and each ``no --flag`` removed."""
    drops = set(re.findall(r"no (--\S+)", changes))
    sets = _flag_map(re.sub(r"no --\S+", "", changes).split())
    kept = _flag_map(words)
    out = []
    for flag, value in ({k: v for k, v in kept.items() if k not in drops} | sets).items():
        out += [flag, *value.split()]
    return out


def test_megatron_neighbours_are_flags_megatron_starts_and_price_as_listed():
    """Llama 3 70B at TP 8, PP 4 on 64 GPUs: a neighbour whose split is not Megatron's even one
    (80 layers over 4 x 3 chunks, or 126 over 16) had been written as the bare degrees, which
    Megatron refuses (--num-layers must be a multiple of p m); it is written with the layout
    that states plan's split, and every neighbour, applied to the flags, reads back and prices
    as listed."""
    model = MODELS["llama3-70b"]
    run = RunConfig(seq=8192, global_batch=512, t=8, p=4, d=2, microbatch=1)
    words = to_megatron(run, model)
    launch = from_megatron(words, gpus=64)
    found = explain(launch.model, launch.config, "H100-80GB", neighbours=10, workers=1)
    assert len(found.neighbours) == 10
    assert any("--pipeline-model-parallel-layout" in x["changes"] for x in found.neighbours)
    for x in found.neighbours:
        back = from_megatron(_megatron_applied(words, x["changes"]), gpus=64)
        again = plan(back.model, hardware="H100-80GB", config=back.config, workers=1).iloc[0]
        assert again["step_time"] == pytest.approx(x["step_time"], rel=1e-3), x["changes"]


def test_megatron_moe_neighbours_at_t_above_one_add_sequence_parallelism():
    """Mixtral at TP 1 without --sequence-parallel (Megatron turns it off at TP 1 anyway):
    its neighbours at t > 1 had all been refused, each searched without sequence parallelism,
    which Megatron's MoE layer needs to train at t > 1 (moe_layer.py raises), so none was
    offered (35 neighbours, all t = 1, where 163 are faster). They are searched with it and
    written with ``--sequence-parallel``, and read back price as listed."""
    launch = from_megatron((DATA / "megatron" / "mixtral_8x7b.sh").read_text())
    assert launch.config.t == 1 and not launch.config.sequence_parallel
    words = to_megatron(launch.config, launch.model)
    found = explain(launch.model, launch.config, "H100-80GB", neighbours=200, workers=1)
    wider = [x for x in found.neighbours if x["t"] > 1]
    assert wider and all("--sequence-parallel" in x["changes"].split() for x in wider)
    assert all("--sequence-parallel" not in x["changes"].split()
               for x in found.neighbours if x["t"] == 1)
    for x in wider[:3]:
        back = from_megatron(_megatron_applied(words, x["changes"]), gpus=launch.config.gpus)
        again = plan(back.model, hardware="H100-80GB", config=back.config, workers=1).iloc[0]
        assert again["step_time"] == pytest.approx(x["step_time"], rel=1e-3), x["changes"]
