"""``from_torchtitan`` / ``to_torchtitan``: torchtitan's TOML job config (v0.2)."""

import dataclasses
import re
from pathlib import Path

import pytest

from fastpp import ScheduleError
from fastpp.model import MODELS, RunConfig, from_hf, parse_layout
from fastpp.model.torchtitan import from_torchtitan, to_torchtitan

DATA = Path(__file__).parent / "data"
JOB = DATA / "torchtitan" / "llama3_8b.toml"


def test_llama3_job():
    model, config = from_torchtitan(JOB, gpus=64)
    # the flavor's preset (no assets folder here), its SwiGLU torchtitan's separate ops, and
    # without [compile] its elementwise ops eager PyTorch's (with PyTorch's RMSNorm)
    assert model == dataclasses.replace(MODELS["llama3-8b"], fused_swiglu=False,
                                        eager="native-norm", loss="cross-entropy")
    # 64 GPUs / (t 2 * p 2): FSDP over the 16 left, 2 sequences each; with a pipeline,
    # torchtitan's "default" resharding keeps the weights gathered after the forward
    # (reshard_after_forward = not pp_enabled): gathered once per step. Its split: 32 layers
    # and the embedding and output layer weighing one each, 34 over 4 stages, the two left
    # over on the first stages (generate_llm_fqn_per_model_part)
    assert config == RunConfig(seq=8192, global_batch=32, t=2, p=2, d=16, m=2,
                               schedule="interleaved-1f1b", microbatch=1,
                               recompute="selective", recompute_method="op",
                               sequence_parallel=True, zero=3,
                               zero3="step", blocking_handoffs=False, precision="bf16",
                               layout="Et*8|t*9|t*8|t*7L", cp_comm="torch-allgather",
                               framework="torchtitan")
    hf = from_torchtitan(JOB, gpus=64, model=DATA / "hf" / "llama-3.1-8b.json")[0]
    assert hf == dataclasses.replace(from_hf(DATA / "hf" / "llama-3.1-8b.json"),
                                     fused_swiglu=False, eager="native-norm",
                                     loss="cross-entropy")


def test_a_misspelt_key_or_section_is_refused(tmp_path, capsys):
    """A misspelt [parallelism] section priced t = 1, p = 1 (1.566 s against 0.655 s) and
    explain printed nothing of it; then a "check:" line, exit 0, the run priced at t = 1 all
    the same. torchtitan refuses a field its job config has not ("Invalid field names"):
    one that misspells a key or section fastpp reads is refused, naming it ([modle] too,
    whose two swapped letters had said "[model] name and flavor must be one of ... (got
    ('None', 'None'))")."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    text = JOB.read_text()
    assert "tensor_parallel_degree" in text and "[parallelism]" in text and "[model]" in text
    for wrong, right, message in (
            ("[parallelism]", "[paralellism]", r"\[paralellism\] \w+ must be a field of "
                                               r"torchtitan's job config \(torchtitan refuses "
                                               r"others\): a misspelt \[parallelism\]\?"),
            ("tensor_parallel_degree", "tensor_parallel_degre",
             r"\[parallelism\] tensor_parallel_degre must be a field of torchtitan's job "
             r"config \(torchtitan refuses others\): a misspelt \[parallelism\] "
             r"tensor_parallel_degree\?"),
            ("[model]", "[modle]", r"\[modle\] \w+ must be a field .*: a misspelt \[model\]\?")):
        job = tmp_path / "job.toml"
        job.write_text(text.replace(wrong, right))
        with pytest.raises(ScheduleError, match=message):
            from_torchtitan(job, gpus=64)
        assert main(["explain", "--torchtitan", str(job), "--gpus", "64", "--neighbours",
                     "0"]) == 2
        assert re.search(message, cli_stderr(capsys))
    assert main(["explain", "--torchtitan", str(JOB), "--gpus", "64", "--neighbours",
                 "0"]) == 0
    # torchtitan's own keys of older layouts near one read are no misspellings: July 2024's
    # [training] enable_float8_linear is read, the 2024-2025 experimental ones listed
    old = text.replace("[training]", "[training]\nenable_float8_linear = true").replace(
        "[experimental]", "[experimental]\npipeline_parallel_schedule_csv = ''\n"
        "pipeline_parallel_split_mode = 'manual'")
    job = tmp_path / "old.toml"
    job.write_text(old if "[experimental]" in text else
                   old + "\n[experimental]\npipeline_parallel_split_mode = 'manual'\n")
    read = from_torchtitan(job, gpus=64)
    assert read.config.precision == "fp8"
    assert any("pipeline_parallel_split_mode" in x for x in read.ignored)
    assert "check:" not in capsys.readouterr().out
    # an assets folder that is not here (the job's, run from tests/): the flavor's preset is
    # priced, and said so; not where the model is given
    assert ("[model] hf_assets_path (no config.json in './assets/hf/Llama-3.1-8B' here: the "
            "flavor's preset priced)") in from_torchtitan(JOB, gpus=64).ignored
    assert not any("hf_assets_path" in x for x in from_torchtitan(
        JOB, gpus=64, model="llama3-8b").ignored)


def test_model_from_the_assets_folder(tmp_path):
    """[model] hf_assets_path holding a config.json: the model is read from it."""
    assets = tmp_path / "Qwen3-8B"
    assets.mkdir()
    (assets / "config.json").write_text((DATA / "hf" / "qwen3-8b.json").read_text())
    job = f'[model]\nname = "qwen3"\nflavor = "8B"\nhf_assets_path = "{assets}"\n'
    model, config = from_torchtitan(job, gpus=8)
    assert model == dataclasses.replace(from_hf(assets), fused_swiglu=False, eager="native-norm",
                                        loss="cross-entropy")
    assert model.head_dim == 128
    assert (config.d, config.zero) == (8, 3)


@pytest.mark.parametrize("config", [
    RunConfig(seq=4096, global_batch=64, t=2, p=4, d=4, m=2, schedule="interleaved-1f1b",
              microbatch=2, recompute="full", zero=3, zero3="step", precision="fp8",
              blocking_handoffs=False),
    RunConfig(seq=2048, global_batch=16, p=2, d=8, m=2, schedule="zbv", zero=3, zero3="step",
              sequence_parallel=False, blocking_handoffs=False, precision="bf16"),
    # DDP, torchtitan's only when it is the run's only parallelism
    RunConfig(seq=2048, global_batch=16, d=8, zero=0, sequence_parallel=False,
              blocking_handoffs=False, precision="bf16"),
    # FSDP over the context-parallel ranks (torchtitan's dp_shard_cp mesh), as torchtitan runs
    RunConfig(seq=8192, global_batch=8, t=4, cp=2, d=1, zero=3, recompute="selective",
              recompute_method="op", cp_comm="ring", blocking_handoffs=False,
              precision="bf16"),
    # hybrid sharding: 2 replicas of FSDP over 2 x cp 2
    RunConfig(seq=8192, global_batch=16, t=2, cp=2, d=4, zero=3, replicate=2,
              blocking_handoffs=False, precision="bf16"),
    RunConfig(seq=8192, global_batch=16, cp=2, d=4, zero=3, replicate=4, sequence_parallel=False,
              blocking_handoffs=False, precision="bf16"),
])
def test_round_trip(config):
    """The run comes back as written, now on torchtitan (its error bar torchtitan's), its
    context parallelism PyTorch's with the rotate method nearest Transformer Engine's (the
    all-gather's or the ring's: torchtitan runs no other)."""
    model = MODELS["llama3-8b"]
    torch_cp = {"all-gather": "torch-allgather", "ring": "torch-alltoall"}[config.cp_comm]
    assert from_torchtitan(to_torchtitan(config, model), gpus=config.gpus,
                           model=model)[1] == config.replace(framework="torchtitan",
                                                             cp_comm=torch_cp)
    torch_run = config.replace(cp_comm=torch_cp, framework="torchtitan")  # back as it is
    assert from_torchtitan(to_torchtitan(torch_run, model), gpus=config.gpus,
                           model=model)[1] == torch_run.replace(framework="torchtitan")


@pytest.mark.parametrize("job, m, layers", [
    # the default weights, one layer each for the embedding and the output layer
    ("", 2, (8, 9, 8, 7)),
    ("pipeline_parallel_first_stage_less_layers = 0\n"
     "pipeline_parallel_last_stage_less_layers = 0\n", 2, (8, 8, 8, 8)),
    ("pipeline_parallel_first_stage_less_layers = 2\n", 2, (7, 9, 9, 7)),
    # stages from the layers per stage, the weights counted: ceil((32 + 2) / 4) = 9 stages
    # would not divide over 2 ranks; 34 / 2 -> 17 would not either; ceil(34 / 3) = 12
    ("pipeline_parallel_layers_per_stage = 3\n", 6,
     (2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 1)),
])
def test_torchtitan_splits_the_layers_as_torchtitan_does(job, m, layers):
    """torchtitan's pipeline split (pipeline_parallel.py: the embedding and the output layer
    weigh pipeline_parallel_first/last_stage_less_layers, 1 each by default, and the stages
    follow from the layers per stage with those weights counted); it had been read as an
    even split, its m from the layers alone. Written back, the same split."""
    text = ('[parallelism]\npipeline_parallel_degree = 2\n'
            'pipeline_parallel_schedule = "Interleaved1F1B"\n' + job)
    model = MODELS["llama3-8b"]
    config = from_torchtitan(text, gpus=2, model=model)[1]
    assert config.m == m
    assert config.chunk_layout(model) is None and layers == (8, 8, 8, 8) or \
        parse_layout(config.layout).layers == layers
    assert from_torchtitan(to_torchtitan(config, model), gpus=2, model=model)[1] == config


def test_torchtitan_refuses_what_torchtitan_refuses():
    text = '[parallelism]\npipeline_parallel_degree = 2\n'
    model = MODELS["llama3-8b"]
    with pytest.raises(ScheduleError, match=r"pipeline_parallel_layers_per_stage = 4 makes 9 "
                                            r"stages .* torchtitan refuses"):
        from_torchtitan(text + 'pipeline_parallel_schedule = "Interleaved1F1B"\n'
                        'pipeline_parallel_layers_per_stage = 4\n', gpus=2, model=model)
    with pytest.raises(ScheduleError, match="split evenly over pipeline_parallel_degree = 2, "
                                            "exactly 1 a rank"):
        from_torchtitan(text + "pipeline_parallel_layers_per_stage = 8\n", gpus=2,
                        model=model)
    # without a pipeline torchtitan reads none of it; a split with empty stages it runs
    assert from_torchtitan(text.replace("= 2", "= 1") + "pipeline_parallel_layers_per_stage = "
                           "8\n", gpus=1, model=model)[1].m == 1
    seven = dataclasses.replace(model, layers=7)
    few = from_torchtitan(text.replace("= 2", "= 4") + 'pipeline_parallel_schedule = '
                          '"Interleaved1F1B"\n', gpus=4, model=seven)[1]
    assert parse_layout(few.layout).layers == (1, 1, 1, 1, 1, 1, 1, 0)
    with pytest.raises(ScheduleError, match="cannot state a layer split or m = 4 without a "
                                            "pipeline"):
        to_torchtitan(RunConfig(seq=512, global_batch=8, m=4, zero=0,
                                schedule="interleaved-1f1b", blocking_handoffs=False), model)
    with pytest.raises(ScheduleError, match="first_stage_less_layers .* must be at most"):
        from_torchtitan(text + "pipeline_parallel_first_stage_less_layers = 40\n", gpus=2,
                        model=model)
    # an m torchtitan's default would not run, written without the model to count layers
    with pytest.raises(ScheduleError, match="needs the model to write a layout or m = 4"):
        to_torchtitan(RunConfig(seq=512, global_batch=8, p=2, m=4, zero=0,
                                schedule="interleaved-1f1b", blocking_handoffs=False))
    # a layer more on a middle stage than on the one before: torchtitan's remainder goes to
    # the first stages
    with pytest.raises(ScheduleError, match=r"cannot state the split 'Et\*8\|t\*8\|t\*9\|"
                                            r"t\*7L'"):
        to_torchtitan(RunConfig(seq=512, global_batch=8, p=4, zero=0,
                                layout="Et*8|t*8|t*9|t*7L", blocking_handoffs=False), model)


def test_schedule_names_in_any_case():
    """PyTorch's get_schedule_class, which torchtitan calls, ignores the name's case."""
    job = JOB.read_text().replace('pipeline_parallel_schedule = "Interleaved1F1B"',
                                  'pipeline_parallel_schedule = "interleaved1f1b"')
    assert "interleaved1f1b" in job
    assert from_torchtitan(job, gpus=64) == from_torchtitan(JOB, gpus=64)


def test_bad_jobs(tmp_path):
    with pytest.raises(ScheduleError, match="pipeline_parallel_schedule must be one of .*"
                                            "'Interleaved1F1B'.*got 'Zigzag'"):
        from_torchtitan('[parallelism]\npipeline_parallel_schedule = "Zigzag"\n', gpus=8,
                        model="llama3-8b")
    with pytest.raises(ScheduleError, match="tensor_parallel_degree must be an integer"):
        from_torchtitan('[parallelism]\ntensor_parallel_degree = "2"\n', gpus=8,
                        model="llama3-8b")
    # (it said "t * cp * p = 3 must divide the gpus (got gpus=8, t=1, cp=1, p=3)")
    with pytest.raises(ScheduleError, match=r"^the job config: \[parallelism\] "
                                            r"tensor_parallel_degree x context_parallel_degree "
                                            r"x pipeline_parallel_degree must divide the 8 "
                                            r"GPUs \(got 1 x 1 x 3 = 3\)$"):
        from_torchtitan('[parallelism]\npipeline_parallel_degree = 3\n', gpus=8,
                        model="llama3-8b")
    # (it said "ep * etp = 16 must divide the GPUs of a pipeline stage t * cp * d = 8 (got
    # ep=16, etp=1)", RunConfig's names)
    with pytest.raises(ScheduleError, match=r"^the job config: \[parallelism\] "
                                            r"expert_parallel_degree x "
                                            r"expert_tensor_parallel_degree must divide the 8 "
                                            r"GPUs of a pipeline stage \(got 16 x 1\)$"):
        from_torchtitan('[parallelism]\nexpert_parallel_degree = 16\n', gpus=8,
                        model="qwen3-30b-a3b")
    bad = tmp_path / "job.toml"
    bad.write_text("[parallelism\n")
    with pytest.raises(ScheduleError, match="job.toml is not TOML"):
        from_torchtitan(bad, gpus=8, model="llama3-8b")
    with pytest.raises(ScheduleError, match="name and flavor must be one of"):
        from_torchtitan('[model]\nname = "llama4"\nflavor = "17bx16e"\n', gpus=8)
    with pytest.raises(ScheduleError, match="torchtitan shards with FSDP"):
        to_torchtitan(RunConfig(seq=512, global_batch=8, zero=1))


def test_torchtitan_runs_as_torchtitan_does():
    """Read as torchtitan v0.2 runs a job (each was misread before):
    - v0.2's converter names are fp8 (only v0.1's ``"float8"`` was);
    - no pipeline: one forward and backward of ``local_batch_size`` sequences per
      accumulation step (the non-PP branch of its train step), not microbatches of 1;
    - ``fsdp_reshard_after_forward = "default"`` keeps the weights after the forward when
      pipelined (``reshard_after_forward = not pp_enabled``), resharding them without;
    - no multi-token prediction: its DeepSeek-V3 has no MTP module."""
    fp8 = '[model]\nconverters = ["quantize.linear.float8"]\n'
    assert from_torchtitan(fp8, gpus=8, model="llama3-8b")[1].precision == "fp8"
    flat = ('[training]\nlocal_batch_size = 8\nglobal_batch_size = 128\n'
            '[parallelism]\ntensor_parallel_degree = 8\n')
    config = from_torchtitan(flat, gpus=64, model="llama3-70b")[1]
    assert (config.microbatch, config.global_batch, config.d, config.zero3) == (8, 128, 8,
                                                                               "layer")
    piped = flat.replace("global_batch_size = 128", "global_batch_size = 16") + \
        "pipeline_parallel_degree = 4\n"
    config = from_torchtitan(piped, gpus=64, model="llama3-70b")[1]
    assert (config.microbatch, config.global_batch, config.d, config.zero3) == (1, 16, 2,
                                                                               "step")
    model = from_torchtitan('[model]\nname = "deepseek_v3"\nflavor = "671B"\n', gpus=256)[0]
    assert model.mtp_depth == 0 and MODELS["deepseek-v3"].mtp_depth == 1


def test_pipelined_gradient_accumulation_is_refused():
    """torchtitan runs one flushed pipeline per accumulation step: priced as one pipeline of
    all the microbatches it was 33% fast (8 pipelines of 4 against one of 32)."""
    job = ('[training]\nlocal_batch_size = 4\nglobal_batch_size = 512\n'
           '[parallelism]\npipeline_parallel_degree = 4\n')
    with pytest.raises(ScheduleError, match=r"global_batch_size must be local_batch_size x the "
                                            r"16 data-parallel ranks = 64 with pipeline "
                                            r"parallelism \(got 512\): torchtitan then runs 8 "
                                            r"pipelines a step"):
        from_torchtitan(job, gpus=64, model="llama3-8b")
    with pytest.raises(ScheduleError, match="pipeline_parallel_microbatch_size must divide"):
        from_torchtitan(job.replace("512", "64") + "pipeline_parallel_microbatch_size = 3\n",
                        gpus=64, model="llama3-8b")


def test_what_torchtitan_runs_otherwise_is_said(tmp_path):
    """A config reviewer held the reader to torchtitan's code: its op-level selective
    checkpointing is not Megatron's (every second matmul and the ops outside its save list
    run again), and ``maybe_enable_amp`` turns mixed precision off with TP or PP and no FSDP
    (the run is fp32). Both were priced as something else without a word. The op-level
    policy is now priced on dense layers (``recompute_method="op"``); an MoE model's
    experts' layers are still priced as Megatron's selective recomputation, and said."""
    given = DATA / "torchtitan" / "llama3_8b.toml"
    op = from_torchtitan(given, 8)
    assert (op.config.recompute, op.config.recompute_method) == ("selective", "op")
    assert not any("selective_ac_option" in x for x in op.ignored)
    moe = from_torchtitan(MOE_JOB.replace('mode = "none"', 'mode = "selective"\n'
                                          'selective_ac_option = "op"').replace(
        '"DualPipeV"', '"1F1B"'), 64)
    assert any(x.startswith("[activation_checkpoint] selective_ac_option = 'op': torchtitan's "
                            "op-level policy priced on dense layers; its MoE layers and MLA")
               for x in moe.ignored)
    job = tmp_path / "tp_only.toml"
    job.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\n'
                   'data_parallel_shard_degree = 1\ntensor_parallel_degree = 8\n'
                   '[activation_checkpoint]\nmode = "full"\n')
    fp32 = from_torchtitan(job, 8)
    assert fp32.config.zero == 0 and fp32.config.t == 8
    assert any(x.startswith("fp32: torchtitan turns mixed precision off") for x in fp32.ignored)
    assert not any(x.startswith("fp32") for x in op.ignored)  # (FSDP over the rest)


MOE_JOB = """
[model]
name = "deepseek_v3"
flavor = "671B"
[parallelism]
pipeline_parallel_degree = 4
pipeline_parallel_schedule = "DualPipeV"
expert_parallel_degree = 8
[activation_checkpoint]
mode = "none"
"""


def test_dualpipev_overlaps_expert_parallelism_as_torchtitan_does():
    """torchtitan overlaps DualPipeV's pairs' all-to-alls under expert parallelism by default
    (``pipeline_parallel_expert_parallel_overlap``, ``dual_pipe_v.py``), and refuses it with
    activation checkpointing; fastpp had priced the pairs without it (22-35% slower on
    DeepSeek's jobs: a review against torchtitan's code, 6 December 2026)."""
    _, config = from_torchtitan(MOE_JOB, gpus=64)
    assert config.overlap and config.schedule == "dualpipev"
    off = MOE_JOB.replace("expert_parallel_degree = 8",
                          "expert_parallel_degree = 8\n"
                          "pipeline_parallel_expert_parallel_overlap = false")
    assert not from_torchtitan(off, gpus=64)[1].overlap
    for job in (MOE_JOB, off):
        config = from_torchtitan(job, gpus=64)[1]
        model = MODELS["deepseek-v3"]
        assert from_torchtitan(to_torchtitan(config, model), gpus=64,
                               model=model)[1] == config
    with pytest.raises(ScheduleError, match=r"mode must be 'none' with DualPipeV's "
                                            r"expert-parallel overlap, as torchtitan requires "
                                            r"\(got 'selective'"):
        from_torchtitan(MOE_JOB.replace('mode = "none"', ""), gpus=64)


def test_what_torchtitan_refuses_or_runs_otherwise():
    """Async TP needs the compiled model (``maybe_enable_async_tp`` raises) and is priced
    without an overlap: torchtitan measured +5.7% from it where Transformer Engine's overlap
    would price +49%; DDP runs alone; a model with experts converts both kinds of product to
    float8 or neither (a partial converter had priced every product in fp8)."""
    tp = '[parallelism]\ntensor_parallel_degree = 8\nenable_async_tensor_parallel = true\n'
    with pytest.raises(ScheduleError, match=r"enable_async_tensor_parallel needs the model "
                                            r"compiled \(\[compile\] enable = true with "
                                            r"'model'"):
        from_torchtitan(tp, gpus=8, model="llama3-8b")
    imported = from_torchtitan(tp + '[compile]\nenable = true\n', gpus=8, model="llama3-8b")
    assert not imported.config.tp_overlap
    assert any("async TP priced without the overlap" in x for x in imported.ignored)
    with pytest.raises(ScheduleError, match=r"DDP has not supported > 1D parallelism"):
        from_torchtitan('[parallelism]\ndata_parallel_replicate_degree = 4\n'
                        'data_parallel_shard_degree = 1\ntensor_parallel_degree = 2\n',
                        gpus=8, model="llama3-8b")
    with pytest.raises(ScheduleError, match=r"DDP"):
        to_torchtitan(RunConfig(seq=2048, global_batch=16, t=2, d=4, zero=0))
    linear = '[model]\nconverters = ["quantize.linear.float8"]\n'
    grouped = '[model]\nconverters = ["quantize.grouped_mm.float8"]\n'
    assert from_torchtitan(linear, gpus=8, model="llama3-8b").config.precision == "fp8"
    assert from_torchtitan(grouped, gpus=8, model="llama3-8b").config.precision == "bf16"
    for job in (linear, grouped):
        with pytest.raises(ScheduleError, match=r"converters must convert both the dense and "
                                                r"the experts' products"):
            from_torchtitan(job, gpus=64, model="deepseek-v3")
    both = '[model]\nconverters = ["quantize.linear.float8", "quantize.grouped_mm.float8"]\n'
    assert from_torchtitan(both, gpus=64, model="deepseek-v3").config.precision == "fp8"


@pytest.mark.parametrize("p, reshard, zero3", [(2, "always", "step"), (2, "never", "step"),
                                               (2, "default", "step"), (1, "always", "layer"),
                                               (1, "default", "layer"), (1, "never", "step")])
def test_fsdp_under_a_pipeline_reduces_once_a_step(p, reshard, zero3):
    """PyTorch's pipelining turns an FSDP stage's gradient reduction and resharding after
    backward off for every microbatch but the last (``stage.py``): its gradients accumulate
    whole, and its weights are whole again after each backward, resharded after the forward
    or not (reviews against torchtitan's and PyTorch's code; "always" with a pipeline had
    been read as per-layer reduction, its gradients at 1/d of what the run holds)."""
    job = (f'[parallelism]\npipeline_parallel_degree = {p}\n'
           f'fsdp_reshard_after_forward = "{reshard}"\n')
    config = from_torchtitan(job, gpus=16, model="llama3-8b")[1]
    assert (config.zero, config.zero3) == (3, zero3)
    model = MODELS["llama3-8b"]
    assert from_torchtitan(to_torchtitan(config, model), gpus=16, model=model)[1] == config


def test_the_older_layout_as_torchtitan_ran_it():
    """torchtitan at 9dec370 (its December 2024 benchmark): the pipeline's microbatches
    default to its degree (``pipeline_llama.py``), and ``[training] compile`` compiles the
    model (async TP's condition). The microbatch had been read as 1 (32 microbatches where
    the run had 8), and the compile switch as absent, refusing the shipped 405B job."""
    job = ('[training]\nbatch_size = 32\nseq_len = 8192\ndata_parallel_shard_degree = 8\n'
           'tensor_parallel_degree = 8\ncompile = true\n[experimental]\n'
           'pipeline_parallel_degree = 8\npipeline_parallel_schedule = "1F1B"\n'
           'enable_async_tensor_parallel = true\n')
    config = from_torchtitan(job, gpus=512, model="llama3-405b").config
    assert (config.microbatch, config.p, config.t) == (4, 8, 8)
    counted = job.replace("[experimental]\n",
                          "[experimental]\npipeline_parallel_microbatches = 16\n")
    assert from_torchtitan(counted, gpus=512, model="llama3-405b").config.microbatch == 2


def test_dualpipev_overlap_with_context_parallelism_and_its_export():
    """fastpp prices DualPipeV's overlap for whole sequences: with cp > 1 the job is priced
    without it and says so (it had been read with it, then refused by every pricing); the
    export refuses the overlap with checkpointing, which torchtitan refuses on reading."""
    job = MOE_JOB.replace("expert_parallel_degree = 8",
                          "expert_parallel_degree = 8\ncontext_parallel_degree = 2")
    imported = from_torchtitan(job, gpus=128)
    assert not imported.config.overlap
    assert any(x.startswith("pipeline_parallel_expert_parallel_overlap: DualPipeV's") for x
               in imported.ignored)
    config = from_torchtitan(MOE_JOB, gpus=64).config
    with pytest.raises(ScheduleError, match=r"torchtitan refuses DualPipeV's expert-parallel "
                                            r"overlap with activation checkpointing"):
        to_torchtitan(config.replace(recompute="full"), MODELS["deepseek-v3"])


def test_torchao_float8_is_said_to_scale_as_it_casts():
    """torchao's tensorwise Float8 (torchtitan's float8 converters, and the older switches)
    computes each scale from its tensor before the cast and runs the gradient products in
    split accumulation, which the presets do not price: the job says how to price it
    (``fp8_current_scaling``), and pricing it so costs more than the presets' FP8 and less
    than bf16. MX converters scale in the cast, as the presets do, and say nothing; nor do
    torchao's other recipes (rowwise, delayed scaling), which the note does not describe."""
    import fastpp
    from fastpp.model import HARDWARE, transformer_costs

    said = [x for x in from_torchtitan('[model]\nconverters = ["quantize.linear.float8"]\n',
                                       gpus=8, model="llama3-8b").ignored if x.startswith("float8")]
    assert len(said) == 1 and "fp8_current_scaling=True" in said[0]
    old = from_torchtitan('[float8]\nenable_float8_linear = true\n', gpus=8, model="llama3-8b")
    assert any(x.startswith("float8") for x in old.ignored)
    rowwise = ('[model]\nconverters = ["quantize.linear.float8"]\n'
               '[quantize.linear.float8]\nrecipe_name = "rowwise"\n')
    delayed = '[float8]\nenable_float8_linear = true\nscaling_type_input = "delayed"\n'
    for job in ('[model]\nconverters = ["quantize.linear.mx"]\n', "", rowwise, delayed):
        assert not any(x.startswith("float8") for x in from_torchtitan(
            job, gpus=8, model="llama3-8b").ignored), job
    schedule = fastpp.build_schedule("1f1b", 1, 1)
    h100 = HARDWARE["H100-80GB"]

    def forward(hardware, precision):
        costs = transformer_costs("llama3-8b", schedule, hardware, seq=8192,
                                  precision=precision)
        return float(costs.arrays["f"].sum() + costs.arrays["b"].sum())

    scaled = dataclasses.replace(h100, fp8_current_scaling=True)
    assert forward(h100, "fp8") < forward(scaled, "fp8") < forward(h100, "bf16")


@pytest.mark.parametrize("job, match", [
    ('[compile]\nenable = "true"\n', r"\[compile\] enable must be one of \[False, True\]"),
    ("[compile]\nenable = 1\n", r"\[compile\] enable must be one of"),
    ("[training]\ncompile = 1\n", r"\[training\] compile must be one of"),
    ('[compile]\nenable = true\ncomponents = "model"\n', r"\[compile\] components must be a "
                                                          r"list of 'model' and 'loss'"),
    ('[compile]\nenable = true\ncomponents = ["modle"]\n', r"\[compile\] components must"),
])
def test_compile_switches_of_another_type_are_refused(job, match):
    """torchtitan's Compile takes a bool and a list of "model" and "loss" (job_config.py):
    each of these had priced the model eager, its loss unfused, without a word."""
    with pytest.raises(ScheduleError, match=match):
        from_torchtitan(job, gpus=8, model="llama3-8b")


def test_compile_components_holding_an_array_are_refused_by_name():
    """A dict job's components list holding an array (np.array(["model", "loss"]) in place
    of its names) raised NumPy's 'truth value of an array ... is ambiguous' from ``in``."""
    import numpy as np

    for parts in ([np.array(["model", "loss"])], [np.array([1, 2])]):
        with pytest.raises(ScheduleError, match=r"\[compile\] components must be a list of "
                                                r"'model' and 'loss'"):
            from_torchtitan({"compile": {"enable": True, "components": parts}}, gpus=8,
                            model="llama3-8b")
    assert from_torchtitan({"compile": {"enable": True, "components": [np.str_("model")]}},
                           gpus=8, model="llama3-8b").model.eager == ""


def test_compile_switch_of_numpy_is_read_as_its_bool():
    """A dict's np.True_ was read as off (``is True``)."""
    import numpy as np

    job = {"compile": {"enable": np.True_}}
    assert from_torchtitan(job, gpus=8, model="llama3-8b").model.eager == ""


def test_eager_kernels_follow_compile():
    """Without ``[compile]`` compiling the model (torchtitan's default is off) its
    elementwise ops are eager PyTorch's with PyTorch's RMSNorm (``Transformer.eager``),
    priced so; the older ``[training] compile`` counts, a compiled loss alone does not; and
    its loss is PyTorch's ``cross_entropy`` unless the loss is compiled. An
    eager MoE or MLA model is told what of it is priced fused. ``to_torchtitan`` writes the
    compile fastpp priced, and reads back as it."""
    def eager(job, model="llama3-8b"):
        return from_torchtitan(job, gpus=8, model=model)

    assert eager("").model.eager == "native-norm"
    assert eager('[compile]\nenable = true\ncomponents = ["loss"]\n').model.eager
    assert eager("[compile]\nenable = true\n").model.eager == ""
    assert eager("[training]\ncompile = true\n").model.eager == ""
    # the loss likewise: PyTorch's cross entropy unless compiled (the older switch compiled
    # the model alone)
    for job, loss in (("", "cross-entropy"), ("[compile]\nenable = true\n", "fused"),
                      ('[compile]\nenable = true\ncomponents = ["model"]\n', "cross-entropy"),
                      ('[compile]\nenable = true\ncomponents = ["loss"]\n', "fused"),
                      ("[training]\ncompile = true\n", "cross-entropy")):
        assert eager(job).model.loss == loss, job
    assert not any("[compile]" in x for x in eager("").ignored)
    for model in ("deepseek-v3", "qwen3-30b-a3b"):
        assert any(x.startswith("[compile] enable = false: eager") for x in
                   eager('[model]\nconverters = []\n', model).ignored), model
    config = RunConfig(seq=8192, global_batch=16, d=8, zero=3)
    fused = MODELS["llama3-8b"]
    for model in (None, fused, dataclasses.replace(fused, eager="native-norm")):
        text = to_torchtitan(config, model)
        written = model is not None and bool(model.eager)
        assert bool(eager(text).model.eager) == written
        assert eager(text).model.loss == "fused"
    # each kernel choice reads back: the eager model's norm as today's PyTorch runs it, a
    # compiled loss as Megatron's fused one (either of Megatron's losses is written compiled)
    for kernels in ("", "native-norm", "fp32-norm"):
        for loss in ("in-place", "fused", "cross-entropy"):
            model = dataclasses.replace(fused, eager=kernels, loss=loss)
            back = eager(to_torchtitan(config, model)).model
            assert (bool(back.eager), back.loss) == (
                bool(kernels), "fused" if loss == "in-place" else loss), (kernels, loss)
    # a quantize table of the wrong shape names no recipe: torchtitan's default, said
    # (its AttributeError had escaped)
    for bad in ('[quantize]\nlinear = 3\n', 'quantize = 2\n'):
        assert any(x.startswith("float8") for x in eager(
            bad + '[model]\nconverters = ["quantize.linear.float8"]\n').ignored)


def test_context_parallelism_is_the_framework_s_own():
    """torchtitan runs PyTorch's context parallelism (context_parallel_rotate_method
    "allgather" by default), Megatron Transformer Engine's: where ``cp_comm`` is not given
    each run is priced with its own, a ``replace`` that changes the framework brings the new
    one's default, and the other framework's is refused, naming both."""
    from fastpp import build_schedule
    from fastpp.model import plan, transformer_costs

    run = RunConfig(seq=8192, global_batch=8, t=2, cp=2, d=2)
    assert run.cp_comm == "all-gather"
    titan = run.replace(framework="torchtitan")
    assert titan.cp_comm == "torch-allgather"
    assert titan.replace(framework="megatron") == run
    with pytest.raises(ScheduleError, match=r"cp_comm must be one of \['torch-allgather', "
                       r"'torch-alltoall'\] with framework='torchtitan'.*got cp_comm='ring'"):
        run.replace(cp_comm="ring").replace(framework="torchtitan")
    keywords = dict(seq=8192, global_batch=8, tp=[2], pp=[1], cp=[2], microbatch=[1],
                    recompute=["none"], schedules=["1f1b"], workers=1)
    with pytest.raises(ScheduleError, match="with framework='megatron', whose context "
                       "parallelism is Transformer Engine's.*got cp_comm='torch-alltoall'"):
        plan("llama3-8b", 8, "H100-80GB", cp_comm="torch-alltoall", **keywords)
    with pytest.raises(ScheduleError, match="framework='torchtitan'.*got cp_comm='all-gather'"):
        transformer_costs("llama3-8b", build_schedule("1f1b", 1, 4), seq=8192, tp=2, cp=2,
                          cp_comm="all-gather", framework="torchtitan")
    # the default a torchtitan plan prices is PyTorch's all-gather, not Transformer Engine's
    default = plan("llama3-8b", 8, "H100-80GB", framework="torchtitan", **keywords)
    torch = plan("llama3-8b", 8, "H100-80GB", framework="torchtitan",
                 cp_comm="torch-allgather", **keywords)
    te = plan("llama3-8b", 8, "H100-80GB", **keywords)
    assert default.step_time.iloc[0] == torch.step_time.iloc[0]
    assert default.step_time.iloc[0] != pytest.approx(te.step_time.iloc[0], rel=1e-3)


def test_qwen3_flavors_are_their_published_shapes():
    """torchtitan's qwen3 flavors (its train_configs: qwen3_0.6b.toml, qwen3_32b.toml, ...)
    were refused as no preset (a review); each is the shape its config.json gives, at its
    card's parameter count, the small ones with tied embeddings."""
    cards = {"0.6B": 0.6, "1.7B": 1.7, "4B": 4.0, "8B": 8.2, "14B": 14.8, "32B": 32.8,
             "30B-A3B": 30.5, "235B-A22B": 235}
    for flavor, card in cards.items():
        model = from_torchtitan(f'[model]\nname = "qwen3"\nflavor = "{flavor}"\n', gpus=8)[0]
        assert abs(model.parameters / 1e9 - card) <= 0.03 * card, flavor
        assert model.tied_embeddings == (flavor in ("0.6B", "1.7B", "4B")), flavor
    for flavor in ("0.6B", "8B"):  # two of the config.json files the tests hold
        read = from_torchtitan(f'[model]\nname = "qwen3"\nflavor = "{flavor}"\n', gpus=8)[0]
        given = from_hf(Path(__file__).parent / "data" / "hf" / f"qwen3-{flavor.lower()}.json")
        assert dataclasses.replace(read, name="", fused_swiglu=True, eager="", loss="fused") == \
            dataclasses.replace(given, name="", fused_swiglu=True, eager="", loss="fused")
