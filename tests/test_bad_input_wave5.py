"""Bad input to the fifth wave's entry points (issues 28 and 30) ends in a ``ScheduleError``
naming the parameter, the key or the flag: never Python's, pandas', tomllib's or NumPy's own
error, and never a silently wrong run.

Each row is an input a user could write and the words its message must hold. Every row here
escaped before its fix (a ``TypeError``, ``ZeroDivisionError``, ``MemoryError``,
``UnicodeDecodeError``, or a value read as something else); the inputs already refused with a
clear message are tested beside their features (``test_hf``, ``test_megatron_args``,
``test_torchtitan``, ``test_noise``, ``test_whatif``).
"""

import re

import numpy as np
import pytest
from helpers import cli_stderr

from fastpp import Costs, Noise, ScheduleError, ScheduleTypeError, build_schedule, simulate
from fastpp.__main__ import main
from fastpp.model import (
    RunConfig,
    from_hf,
    from_megatron,
    from_torchtitan,
    to_megatron,
    to_torchtitan,
)

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000}
QWEN_MOE = {**LLAMA, "model_type": "qwen2_moe", "num_experts": 4, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32}
MEGATRON = ("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
            "--vocab-size 1000 ")
TOML = "[parallelism]\npipeline_parallel_degree = 2\n{}\n[training]\nseq_len = 128\n{}\n"


def hf(**fields):
    return lambda: from_hf({**LLAMA, **fields})


def megatron(flags, **kwargs):
    return lambda: from_megatron(MEGATRON + flags, **{"gpus": 2, **kwargs})


def torchtitan(parallelism="", rest=""):
    return lambda: from_torchtitan(TOML.format(parallelism, rest), 4, model="llama3-8b")


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
        lambda: from_torchtitan(TOML.format("", ""), 10**9, model="llama3-8b"),
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


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_names_what_is_wrong(case):
    call, match = CASES[case]
    with pytest.raises(ScheduleError, match=match):
        call()


def test_unknown_field_is_also_a_type_error():
    """A wrong keyword stays a ``TypeError`` too (``ScheduleTypeError``), as Python's was."""
    with pytest.raises(ScheduleTypeError):
        RunConfig(seq=1, global_batch=1, q=3)


def test_a_binary_toml_file_is_named(tmp_path):
    job = tmp_path / "job.toml"
    job.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ScheduleError, match="job must be a readable TOML file"):
        from_torchtitan(job, 4, model="llama3-8b")


# ---- the op table (issue 30): types checked before any arithmetic ----

META = {"dp_size": 1, "pp_size": 1}


def op_table(tmp_path, **columns):
    """A one-op table with every column, ``columns`` replacing some (``empty=True``: no
    rows)."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    table = pd.DataFrame({"dp_rank": [0], "stage": [0], "rank": [0], "step": [0],
                          "optype": ["forward-compute"], "start_ts": [0.0], "duration": [1.0],
                          "seq_id": [0], "mc": [0], "mb_id": [0], "gmc": [0]})
    empty = columns.pop("empty", False)
    for name, values in columns.items():
        table[name] = values
    if empty:
        table = table.iloc[:0]
    path = tmp_path / "trace-X.parquet"
    table.to_parquet(path)
    return path


@pytest.mark.parametrize("columns, meta, match", [
    ({"empty": True}, META, "op table trace-X.parquet must hold ops .it has none"),
    ({"start_ts": ["a"]}, META, "start_ts must hold numbers"),
    ({"duration": ["a"]}, META, "duration must hold numbers"),
    ({"start_ts": [np.nan]}, META, "start_ts must have no missing values"),
    ({"start_ts": [np.inf]}, META, "start_ts must be finite"),
    ({"duration": [-1.0]}, META, "duration must be >= 0"),
    ({"dp_rank": [np.nan]}, META, "dp_rank must have no missing values"),
    ({"step": ["0"]}, META, "step must hold integers"),
    ({}, {**META, "tp_size": "x"}, "meta tp_size must be a positive integer"),
    ({}, {**META, "tp_size": 0}, "meta tp_size must be a positive integer"),
    ({}, {**META, "world_size": "1"}, "meta world_size must be a positive integer"),
    ({}, {"dp_size": True, "pp_size": 1}, "meta dp_size must be a positive integer"),
])
def test_bad_op_tables(tmp_path, columns, meta, match):
    import fastpp

    pytest.importorskip("yaml")
    with pytest.raises(ScheduleError, match=match):
        fastpp.read_op_table(op_table(tmp_path, **columns), meta)


# ---- the command line: the message and exit status 2, no traceback ----

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


def test_expert_groups_must_fit_a_stage():
    """Megatron-LM's own Mixtral example (EP 8, PP 4) on its default single node of 8 GPUs:
    a stage has t * cp * d = 2 GPUs, too few for 8 expert-parallel ranks."""
    with pytest.raises(ScheduleError, match=r"ep \* etp = 8 must divide the GPUs of a "
                                            r"pipeline stage t \* cp \* d = 2"):
        RunConfig(seq=4096, global_batch=256, t=1, p=4, d=2, ep=8)
    assert RunConfig(seq=4096, global_batch=256, t=1, p=4, d=16, ep=8).ep == 8


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
