"""Bad input to the readers of models and runs other than Megatron-LM's: Hugging Face's config.json
(``from_hf``), torchtitan's TOML (``from_torchtitan``), vTrain's files, Megatron's layout
strings; the writers ``to_megatron`` and ``to_torchtitan``; and one table of bad fields for
every reader (and ``Noise`` and ``RunConfig``), each named in its own terms.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import json
import tomllib
from pathlib import Path

import pytest

import fastpp
from fastpp import Costs, Noise, ScheduleError, build_schedule, simulate
from fastpp.model import (
    RunConfig,
    from_hf,
    from_megatron,
    from_torchtitan,
    to_megatron,
    to_torchtitan,
)
from fastpp.model.layout import parse_layout

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000}
QWEN_MOE = {**LLAMA, "model_type": "qwen2_moe", "num_experts": 4, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32}
MEGATRON = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
            "--vocab-size 1000 ")
SMALL_TOML = "[parallelism]\npipeline_parallel_degree = 2\n{}\n[training]\nseq_len = 128\n{}\n"


def hf(**fields):
    return lambda: from_hf({**LLAMA, **fields})


def megatron(flags, **kwargs):
    return lambda: from_megatron(MEGATRON + flags, **{"gpus": 2, **kwargs})


def torchtitan(parallelism="", rest=""):
    return lambda: from_torchtitan(SMALL_TOML.format(parallelism, rest), 4, model="llama3-8b")


CASES = {
    # from_hf: a field of the wrong type or out of range is named, never read as another value
    "hf model_type a list": (hf(model_type=["llama"]), "model_type must be one of"),
    "hf dropout a string": (hf(attention_dropout="x"), "'attention_dropout' must be a number"),
    "hf dropout a list": (hf(resid_pdrop=[0.1]), "'resid_pdrop' must be a number in"),
    "hf tie a string": (hf(tie_word_embeddings="false"),
                        "'tie_word_embeddings' must be true or false"),
    "hf hidden zero": (hf(hidden_size=0), r"'hidden_size' must be an integer in 1\.\."),
    "hf hidden past 2**31": (hf(hidden_size=10**30), r"'hidden_size' must be an integer in"),
    "hf expert width zero": (lambda: from_hf({**QWEN_MOE, "moe_intermediate_size": 0}),
                             "'moe_intermediate_size' must be an integer in 1"),
    "hf mlp_only_layers an int": (lambda: from_hf({**QWEN_MOE, "mlp_only_layers": 3}),
                                  "'mlp_only_layers' must be a list of layer indices"),
    "hf mlp_only_layers nested": (lambda: from_hf({**QWEN_MOE, "mlp_only_layers": [[1]]}),
                                  "'mlp_only_layers' must be a list of layer indices"),
    # from_megatron: a flag value of the wrong type or range names the flag
    "megatron t zero": (megatron("--tensor-model-parallel-size 0"),
                        "--tensor-model-parallel-size must be an integer in 1"),
    "megatron vocab multiple zero": (megatron("--make-vocab-size-divisible-by 0"),
                                     "--make-vocab-size-divisible-by must be an integer in 1"),
    "megatron vocab multiple negative": (megatron("--make-vocab-size-divisible-by -1"),
                                         "--make-vocab-size-divisible-by must be"),
    "megatron chunk layers zero": (megatron("--num-layers-per-virtual-pipeline-stage 0"),
                                   "--num-layers-per-virtual-pipeline-stage must be"),
    "megatron virtual stages zero": (megatron("--num-virtual-stages-per-pipeline-rank 0"),
                                     "--num-virtual-stages-per-pipeline-rank must be"),
    "megatron global batch zero": (megatron("--global-batch-size 0"),
                                   "--global-batch-size must be an integer in 1"),
    "megatron ffn zero": (megatron("--ffn-hidden-size 0"), "--ffn-hidden-size must be"),
    "megatron kv channels zero": (megatron("--kv-channels 0"), "--kv-channels must be"),
    "megatron expert width zero": (megatron("--num-experts 4 --moe-ffn-hidden-size 0"),
                                   "--moe-ffn-hidden-size must be"),
    "megatron shared width negative": (
        megatron("--num-experts 4 --moe-shared-expert-intermediate-size -5"),
        r"--moe-shared-expert-intermediate-size must be an integer in 0\.\."),
    "megatron dropout NaN": (megatron("--attention-dropout nan"),
                             r"--attention-dropout must be a number in \[0, 1\]"),
    "megatron dropout negative": (megatron("--hidden-dropout -1"), "--hidden-dropout must be"),
    "megatron unknown sharding": (megatron("--data-parallel-sharding-strategy wat"),
                                  "--data-parallel-sharding-strategy must be one of"),
    "megatron unknown cp comm": (megatron("--cp-comm-type wat"), "--cp-comm-type must be one of"),
    "megatron moe pattern too long": (megatron("--num-experts 4 --moe-layer-freq [0]*10**12"),
                                      "--moe-layer-freq must be an integer or a list pattern"),
    "megatron moe pattern huge count": (
        megatron("--num-experts 4 --moe-layer-freq [0]*10000000000"),
        "--moe-layer-freq must be an integer or a list pattern"),
    "megatron moe pattern nested": (megatron("--num-experts 4 --moe-layer-freq [[0],[1]]"),
                                    "--moe-layer-freq must be"),
    "megatron vocab= a string": (lambda: from_megatron(MEGATRON.replace("--vocab-size 1000", ""),
                                                       gpus=2, vocab="x"),
                                 "vocab must be a positive integer"),
    "megatron vocab= zero": (lambda: from_megatron(MEGATRON.replace("--vocab-size 1000", ""),
                                                   gpus=2, vocab=0),
                             "vocab must be a positive integer"),
    "megatron dict infinite size": (
        lambda: from_megatron({"num_layers": 2, "hidden_size": float("inf"),
                               "num_attention_heads": 4, "seq_length": 128,
                               "vocab_size": 100}, gpus=2),
        "--hidden-size must be an integer"),
    "megatron dict share a string": (
        lambda: from_megatron({"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                               "seq_length": 128, "vocab_size": 100,
                               "share_embeddings_and_output_weights": "no"}, gpus=2),
        "share_embeddings_and_output_weights must be true or false"),
    "megatron unresolved --nnodes": (
        lambda: from_megatron("torchrun --nproc_per_node 8 --nnodes $NN train.py " + MEGATRON),
        "torchrun's --nnodes needs the variable 'NN', which the script does not set"),
    "megatron unresolved --nproc_per_node=": (
        lambda: from_megatron("torchrun --nproc_per_node=$G train.py " + MEGATRON),
        "--nproc_per_node needs the variable 'G'"),
    # torchtitan: every key read is checked for its type and values
    "torchtitan schedule a list": (torchtitan('pipeline_parallel_schedule = ["1F1B"]'),
                                   "pipeline_parallel_schedule must be one of"),
    "torchtitan layers per stage zero": (
        torchtitan('pipeline_parallel_schedule = "Interleaved1F1B"\n'
                   'pipeline_parallel_layers_per_stage = 0'),
        "pipeline_parallel_layers_per_stage must be an integer in 1"),
    "torchtitan replicate zero": (torchtitan("data_parallel_replicate_degree = 0"),
                                  "data_parallel_replicate_degree must be an integer in 1"),
    "torchtitan replicate not dividing": (torchtitan("data_parallel_replicate_degree = 3"),
                                          "data_parallel_replicate_degree must divide"),
    "torchtitan shard zero": (torchtitan("data_parallel_shard_degree = 0"),
                              r"data_parallel_shard_degree must be an integer in 1\.\..*, or -1"),
    "torchtitan local batch negative": (torchtitan(rest="local_batch_size = -2"),
                                        "local_batch_size must be"),
    "torchtitan reshard unknown": (torchtitan('fsdp_reshard_after_forward = "sometimes"'),
                                   "fsdp_reshard_after_forward must be one of"),
    "torchtitan reshard an int": (torchtitan("fsdp_reshard_after_forward = 5"),
                                  "fsdp_reshard_after_forward must be one of"),
    "torchtitan async a string": (torchtitan('enable_async_tensor_parallel = "no"'),
                                  "enable_async_tensor_parallel must be one of"),
    "torchtitan rotate unknown": (torchtitan('context_parallel_rotate_method = "ring"'),
                                  "context_parallel_rotate_method must be one of"),
    "torchtitan checkpoint mode unknown": (
        torchtitan(rest='[activation_checkpoint]\nmode = "wat"'), r"\[activation_checkpoint\] "
                                                                   "mode must be one of"),
    "torchtitan checkpoint option unknown": (
        torchtitan(rest='[activation_checkpoint]\nselective_ac_option = "wat"'),
        "selective_ac_option must be 'op' or a layer interval"),
    "torchtitan converters a string": (torchtitan(rest='[model]\nconverters = "float8_x"'),
                                       r"\[model\] converters must be a list"),
    "torchtitan converters an int": (torchtitan(rest="[model]\nconverters = 3"),
                                     r"\[model\] converters must be a list"),
    "torchtitan gpus past the batch": (
        lambda: from_torchtitan(SMALL_TOML.format("", ""), 10**9, model="llama3-8b"),
        "gpus=1000000000 gives d=500000000 replicas of local_batch_size=8"),
    "megatron gpus past the batch": (megatron("", gpus=10**18),
                                     "gpus=1000000000000000000 gives d="),
    # Noise: a CoV whose distribution overflows; finite factors whose products do
    "noise CoV past 10": (lambda: Noise(1e300), r"cov must be in \[0, 10\]"),
    "noise per-kind CoV past 10": (lambda: Noise({"B": 1e300}), r"cov\['B'\] must be in"),
    "noise step CoV past 10": (lambda: Noise(step=1e300), r"step must be in \[0, 10\]"),
    "noise overflowing spikes": (
        lambda: simulate(build_schedule("1f1b", 2, 4), Costs(1.0, 2.0),
                         noise=Noise(spike=(1.0, 1e308)), samples=2),
        r"noise must keep the makespan at most 1e\+290, as costs must"),
    "noise overflowing link delay": (
        lambda: simulate(build_schedule("1f1b", 2, 4), Costs(1.0, 2.0),
                         noise=Noise(link_delay={(0, 1): 1e308}), samples=2),
        r"noise must keep the makespan at most 1e\+290, as costs must"),
    # RunConfig: the dataclass's own TypeErrors and a plan row missing its columns
    "RunConfig unknown field": (lambda: RunConfig(seq=1, global_batch=1, q=3),
                                "RunConfig has no field 'q'"),
    "RunConfig positional": (lambda: RunConfig(1, 1), "RunConfig takes its fields by name"),
    "RunConfig missing seq": (lambda: RunConfig(global_batch=1), "RunConfig needs seq"),
    "RunConfig.replace unknown": (lambda: RunConfig(seq=1, global_batch=1).replace(pp=2),
                                  "RunConfig has no field 'pp'"),
    "RunConfig.for_gpus unknown": (lambda: RunConfig.for_gpus(2, seq=1, global_batch=2, tp=2),
                                   "RunConfig has no field 'tp'"),
    "RunConfig global batch past 2**31": (lambda: RunConfig(seq=1, global_batch=2**40),
                                          "global_batch must be at most"),
    "RunConfig layout of other chunks": (
        lambda: RunConfig(seq=1, global_batch=4, p=2, layout="Et*8|t*8|t*8|t*8L"),
        r"layout must give p \* m = 2 \* 1 = 2 model chunks \(got 4"),
    "RunConfig.from_row missing column": (lambda: RunConfig.from_row({"t": 1}, seq=1),
                                          "row must have the plan columns"),
    "RunConfig.from_row an int": (lambda: RunConfig.from_row(5, seq=1),
                                  "row must be a mapping"),
}
DATA = Path(__file__).parent / "data"
LONG = "9" * 5000  # past int()'s 4,300 digits


def config(name: str) -> dict:
    return json.loads((DATA / "hf" / f"{name}.json").read_text())


TOML = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 8
seq_len = {seq}
[parallelism]
tensor_parallel_degree = {t}
"""
TITAN = """
[model]
name = "llama3"
flavor = "70B"
[training]
local_batch_size = 8
seq_len = 8192
"""


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_names_what_is_wrong(case):
    call, match = CASES[case]
    with pytest.raises(ScheduleError, match=match):
        call()


def test_a_binary_toml_file_is_named(tmp_path):
    job = tmp_path / "job.toml"
    job.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ScheduleError, match="job must be a readable TOML file"):
        from_torchtitan(job, 4, model="llama3-8b")


@pytest.mark.parametrize("field, value", [("overlap", True), ("node_limit", 4),
                                          ("imbalance", 1.2)])
def test_exports_refuse_what_they_cannot_state(field, value):
    """A field no Megatron-LM flag or torchtitan key states is refused, never dropped (the
    round trip from_megatron(to_megatron(c)) == c would silently lose it)."""
    config = RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2, **{field: value})
    with pytest.raises(ScheduleError, match=f"to_megatron cannot state {field}="):
        to_megatron(config)
    # (torchtitan states overlap on DualPipeV with expert parallelism alone, its default)
    said = ("overlap must be False" if field == "overlap" else
            f"to_torchtitan cannot state {field}=")
    with pytest.raises(ScheduleError, match=said):
        to_torchtitan(config.replace(blocking_handoffs=False, zero=3, zero3="step"))
    for name, other in (("reduce_bytes", 2.0), ("gradient_overlap", True)):
        with pytest.raises(ScheduleError, match=f"to_torchtitan cannot state {name}="):
            to_torchtitan(RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2, zero=3,
                                    zero3="step", blocking_handoffs=False, **{name: other}))
    with pytest.raises(ScheduleError, match="to_megatron cannot state zero3='step'"):
        to_megatron(RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2, zero=3,
                              zero3="step"))


def test_torchtitan_schedule_csv_is_not_dropped():
    """``pipeline_parallel_schedule_csv``: torchtitan runs the CSV's order; the import priced
    ``pipeline_parallel_schedule`` (default 1F1B) and said nothing."""
    job = ('[parallelism]\npipeline_parallel_degree = 2\n'
           'pipeline_parallel_schedule_csv = "custom.csv"\n[training]\nseq_len = 128\n')
    with pytest.raises(ScheduleError, match=r"pipeline_parallel_schedule_csv must be empty: the "
                                            r"run is priced by pipeline_parallel_schedule "
                                            r"\(got 'custom.csv'"):
        fastpp.model.from_torchtitan(job, 4, model="llama3-8b")


def test_config_files_that_cannot_be_read(tmp_path):
    """A folder named config.json (IsADirectoryError), a NUL in the path (ValueError), a
    number of 5,000 digits (ValueError) and JSON nested 100,000 deep (RecursionError)
    escaped ``from_hf``."""
    (tmp_path / "folder" / "config.json").mkdir(parents=True)
    with pytest.raises(ScheduleError, match="config must be a readable config.json .*Is a "
                                            "directory"):
        from_hf(tmp_path / "folder")
    with pytest.raises(ScheduleError, match="config must be a readable config.json .*null"):
        from_hf("a\0b.json")
    (tmp_path / "long.json").write_text(f'{{"hidden_size": {LONG}}}')
    with pytest.raises(ScheduleError, match="config must be a readable config.json .*digits"):
        from_hf(tmp_path / "long.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScheduleError, match=r"deep.json is not JSON \(nested too deep\)"):
        from_hf(tmp_path / "deep.json")
    with pytest.raises(ScheduleError, match="model_type must be one of"):  # (a TypeError)
        from_hf({"model_type": [1], "text_config": {}})


@pytest.mark.parametrize("name, change, message", [
    # transformers divides by them: a 0 was read as 1
    ("qwen3-30b-a3b", {"decoder_sparse_step": 0}, "'decoder_sparse_step' must be an integer "
                                                  "in 1..2"),
    ("deepseek-v3", {"moe_layer_freq": 0}, "'moe_layer_freq' must be an integer in 1..2"),
    # ignored: a layer the model does not have, a string for a list
    ("qwen3-30b-a3b", {"mlp_only_layers": [100]}, r"'mlp_only_layers' must be a list of layer "
                                                  r"indices in 0..47 \(got \[100\]\)"),
    ("gpt-oss-20b", {"layer_types": "sliding_attention"}, "'layer_types' must be null or a "
                                                          "list of 24 names"),
    ("gpt-oss-20b", {"layer_types": ["sliding_attention"]}, "list of 24 names"),
])
def test_hf_fields_transformers_would_refuse(name, change, message):
    with pytest.raises(ScheduleError, match=message):
        from_hf({**config(name), **change})


def test_toml_that_cannot_be_read(tmp_path):
    """A NUL in the path, a 5,000-digit number and arrays nested 100,000 deep escaped
    ``from_torchtitan`` (ValueError, RecursionError)."""
    with pytest.raises(ScheduleError, match=r"job must be a readable TOML file"):
        from_torchtitan("a\0.toml", 8)
    (tmp_path / "long.toml").write_text(f"[training]\nseq_len = {LONG}\n")
    (tmp_path / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    for name, why in (("long", "digits"), ("deep", "nested too deep")):
        with pytest.raises(ScheduleError, match=rf"{name}.toml is not TOML \(.*{why}"):
            from_torchtitan(tmp_path / f"{name}.toml", 8)


def test_torchtitan_fields_of_the_wrong_kind():
    """A list for the model's name (TypeError: unhashable), and an interval written in
    Unicode digits or 5,000 of them (ValueError from int())."""
    job = tomllib.loads((DATA / "torchtitan" / "llama3_8b.toml").read_text())
    with pytest.raises(ScheduleError, match=r"\[model\] name and flavor must be one of"):
        from_torchtitan({**job, "model": {"name": [1], "flavor": "8B"}}, 64)
    # and not a string: 2 was read through str() as "2", where torchtitan's .isdigit() raises
    for option in ("²", LONG, 2, 2.0, True):
        with pytest.raises(ScheduleError, match="selective_ac_option must be 'op' or a layer "
                                                "interval >= 0"):
            from_torchtitan({**job, "activation_checkpoint": {
                "mode": "selective", "selective_ac_option": option}}, 64)
    every = from_torchtitan({**job, "activation_checkpoint": {
        "mode": "selective", "selective_ac_option": "3"}}, 64)[1]
    assert every.recompute == "full"  # every third layer checkpointed whole
    # 0: torchtitan's _apply_layer_sac checkpoints every layer (it had been refused)
    zero = from_torchtitan({**job, "activation_checkpoint": {
        "mode": "selective", "selective_ac_option": "0"}}, 64)[1]
    assert (zero.recompute, zero.recompute_method) == ("full", None)


def test_layout_count_of_5000_digits():
    """int() refused the count (ValueError)."""
    with pytest.raises(ScheduleError, match=r"layout must repeat at most 1,000,000 times"):
        parse_layout(f"Et*{LONG}|tL")


def test_torchtitan_messages_name_what_is_wrong():
    """A mistyped path was "not TOML (Expected '=' ...)", and ``model="bogus"`` said "config
    must be a config.json", naming neither the file nor ``model`` and its presets."""
    job = tomllib.loads((DATA / "torchtitan" / "llama3_8b.toml").read_text())
    with pytest.raises(ScheduleError, match=r"job must be a TOML file, TOML text or a dict "
                                            r"\(no file configs/llama3_8b\)"):
        from_torchtitan("configs/llama3_8b", 64)
    with pytest.raises(ScheduleError, match=r"model must be a preset name among "
                                            r"\['deepseek-v3'.* or a config.json \(got 'bogus'\)"):
        from_torchtitan(job, 64, model="bogus")


def test_vtrain_batch_without_microbatch():
    """Without micro_batch_size the microbatch is global_batch_size / d: 100 sequences over 256
    replicas was "microbatch must be a positive integer (got microbatch=0)", a value the
    configuration does not hold."""
    from fastpp.model import from_vtrain

    shape = {"num_gpus": 256, "gpu_name": "A100", "tensor_parallel_size": 1,
             "data_parallel_size": 256, "pipeline_parallel_size": 1, "num_layers": 24,
             "hidden_size": 1024, "num_attention_heads": 16, "max_length": 1024,
             "inter_node_bandwidth": 800, "intra_node_bandwidth": 150, "node_size": 8}
    for batch in (100, 1000):
        with pytest.raises(ScheduleError, match=rf"global_batch_size must be a multiple of "
                                                rf"data_parallel_size = 256 without "
                                                rf"micro_batch_size \(got {batch}\)"):
            from_vtrain({**shape, "global_batch_size": batch})
    assert from_vtrain({**shape, "global_batch_size": 512}).config.microbatch == 2


@pytest.mark.parametrize("t, seq, match", [
    (3, 8192, r"\[parallelism\] tensor_parallel_degree must divide the model's 32 attention "
              r"heads \(got 3\)"),
    (4, 8190, r"\[training\] seq_len must be a multiple of tensor_parallel_degree x "
              r"context_parallel_degree = 4, over which torchtitan splits each sequence "
              r"\(got 8190\)")])
def test_torchtitan_tensor_parallelism_in_its_own_terms(tmp_path, t, seq, match):
    """A tensor-parallel degree the heads do not take was refused for the sequence, with a
    way out (sequence_parallel=False) that torchtitan does not have."""
    path = tmp_path / "job.toml"
    path.write_text(TOML.format(t=t, seq=seq))
    with pytest.raises(ScheduleError, match=match):
        from_torchtitan(path, gpus=8 * t)


def test_torchtitan_older_layouts_are_read():
    """The degrees under [training] and [experimental] and [float8] enable_float8_linear,
    torchtitan's own places before [parallelism], were dropped silently: t = p = 1, bf16."""
    job = TITAN + ("tensor_parallel_degree = 8\n[experimental]\npipeline_parallel_degree = 4\n"
                   "[float8]\nenable_float8_linear = true\n")
    model, config = from_torchtitan(job, gpus=64)
    assert (config.t, config.p, config.d, config.precision) == (8, 4, 2, "fp8")
    with pytest.raises(ScheduleError, match=r"\[parallelism\] tensor_parallel_degree = 4 and "
                                            r"\[training\] tensor_parallel_degree = 8 "
                                            r"contradict"):
        from_torchtitan(job + "[parallelism]\ntensor_parallel_degree = 4\n", gpus=64)


def test_torchtitan_lists_what_it_ignores():
    """Keys it does not read (``mixed_precision_param = "float32"``, a compile switch) were
    dropped silently: its result has no ``ignored`` list like from_megatron's."""
    job = TITAN + 'mixed_precision_param = "float32"\n[job]\ndump_folder = "x"\n'
    imported = from_torchtitan(job, gpus=8)
    assert imported.ignored[0] == "[training] mixed_precision_param"
    # and, said of every job, what torchtitan's own runs measured (the model, not compiled,
    # priced with eager PyTorch's kernels: Transformer.eager)
    assert imported.ignored[1].startswith("torchtitan's stack: its own benchmark's 18 runs")
    model, config = imported
    assert imported[1] == config and config.d == 8 and model.eager


def test_torchtitan_explicit_splits():
    """``pipeline_parallel_split_points`` and ``module_fqns_per_model_part`` were replaced
    silently by torchtitan's default split."""
    par = "[parallelism]\npipeline_parallel_degree = 4\ntensor_parallel_degree = 8\n"
    points = par + 'pipeline_parallel_split_points = ["layers.10", "layers.30", "layers.50"]\n'
    config = from_torchtitan(TITAN + points, gpus=64).config
    assert config.layout == "Et*10|t*20|t*20|t*30L"
    fqns = [["tok_embeddings", *(f"layers.{i}" for i in range(20))],
            *([f"layers.{i}" for i in range(k, k + 20)] for k in (20, 40)),
            [*(f"layers.{i}" for i in range(60, 80)), "norm", "output"]]
    config = from_torchtitan(TITAN + par + f"module_fqns_per_model_part = {fqns}\n",
                             gpus=64).config
    assert config.layout == "Et*20|t*20|t*20|t*20L"
    with pytest.raises(ScheduleError, match="module_fqns_per_model_part must be a list of lists"):
        from_torchtitan(TITAN + par + 'module_fqns_per_model_part = [["tok_embeddings", '
                        '"layers.0"], ["layers.1"], ["layers.2"], ["norm", "output"]]\n',
                        gpus=64)
    with pytest.raises(ScheduleError, match="split_points makes 3 stages"):
        from_torchtitan(TITAN + par + 'pipeline_parallel_split_points = ["layers.10", '
                        '"layers.30"]\n', gpus=64)


def test_hf_null_shape_field():
    """A null ``hidden_size`` or ``num_hidden_layers`` silently took LlamaConfig's default
    (4096, 32): Llama 3 70B was read as an 8B-sized model."""
    config = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
              "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
              "vocab_size": 128256}
    for key in ("hidden_size", "num_hidden_layers", "intermediate_size",
                "num_attention_heads", "vocab_size"):
        with pytest.raises(ScheduleError, match=rf"'{key}' must be an integer >= 1 for a "
                                                rf"'llama' model \(got null\)"):
            from_hf({**config, key: None})
    # nulls with a fallback keep it: the key-value heads (the heads), GPT-2's n_inner (4h)
    assert from_hf({**config, "num_key_value_heads": None}).kv_heads == 64
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": None,
            "vocab_size": 100}
    assert from_hf(gpt2).ffn == 256


def test_a_plan_row_without_a_pipeline_writes_a_torchtitan_job():
    """Every ``p = 1`` row of a plan failed ``to_torchtitan``: ``RunConfig.from_row`` keeps
    the row's one-stage layout (``Et*32L``), which is no split, and the message blamed
    ``m = 1``. A real split or more chunks without a pipeline are still refused."""
    from fastpp.model import MODELS, RunConfig, plan
    from fastpp.model.torchtitan import from_torchtitan, to_torchtitan

    model = MODELS["llama3-8b"]
    row = plan(model, 8, seq=8192, global_batch=64, pp=1, tp=2, schedules=["1f1b"],
               recompute="none", microbatch=1, framework="torchtitan", zero=3,
               zero3="step").iloc[0]
    run = RunConfig.from_row(row, seq=8192, framework="torchtitan", zero3="step")
    assert (run.p, run.m, str(run.layout)) == (1, 1, "Et*32L")
    back = from_torchtitan(to_torchtitan(run, model), gpus=8, model=model).config
    assert (back.t, back.p, back.d, back.zero) == (2, 1, 4, 3)
    with pytest.raises(ScheduleError, match=r"cannot state a layer split or m = 4 without a "
                                            r"pipeline \(p = 1\)"):
        to_torchtitan(run.replace(m=4, layout=None, schedule="interleaved-1f1b"), model)


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
