"""``from_llm_foundry`` and ``to_llm_foundry``: llm-foundry's training YAML as a run."""

import dataclasses
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import needs_data

import fastpp.model as fm
from fastpp import ScheduleError
from fastpp.model import MODELS, RunConfig, Transformer, from_llm_foundry, to_llm_foundry
from fastpp.model.explain import explain
from fastpp.model.foundry import read_yaml

# an llm-foundry v0.3.0 YAML as llm-foundry's benchmark script writes it for one run of its
# table (scripts/train/yamls/pretrain/mpt-125m.yaml's shape, submit_benchmarks.py's batch,
# sequence and FSDP settings): MPT-125M on 8 A100 80GB at 512 tokens, microbatch 128, two
# accumulation steps, mixed precision DEFAULT
BENCHMARK = """\
data_local: ./my-copy-c4
data_remote:
max_seq_len: 512
global_seed: 17
run_name: tput-mpt-125m-8xa100_80gb-s512b2048

model:
  name: mpt_causal_lm
  init_device: meta
  d_model: 768
  n_heads: 12
  n_layers: 12
  expansion_ratio: 4
  max_seq_len: ${max_seq_len}
  vocab_size: 50368
  attn_config:
    attn_impl: triton

tokenizer:
  name: EleutherAI/gpt-neox-20b
  kwargs:
    model_max_length: ${max_seq_len}

train_loader:
  name: text
  dataset:
    local: ${data_local}
    split: train
    max_seq_len: ${max_seq_len}
    shuffle_seed: ${global_seed}
  num_workers: 8

scheduler:
  name: cosine_with_warmup
  t_warmup: 100ba

optimizer:
  name: decoupled_adamw
  lr: 6.0e-4

max_duration: 30ba
eval_interval: 0
global_train_batch_size: 2048
seed: ${global_seed}
device_eval_batch_size: 8
device_train_microbatch_size: 128
precision: amp_bf16

fsdp_config:
  sharding_strategy: FULL_SHARD
  mixed_precision: DEFAULT
  activation_checkpointing: false
  activation_cpu_offload: false
  limit_all_gathers: true
  verbose: false

progress_bar: false
log_to_console: true
callbacks:
  speed_monitor:
    window_size: 10
"""


@needs_data("small_model_overheads.csv")
def test_a_benchmark_run_s_yaml_prices_as_its_table_row():
    """The YAML llm-foundry's benchmark ran for one row of its table reads back as the run
    ``fastpp.model.validate_foundry`` prices from the row (the same model but its name, the
    same run, its Triton kernel's stand-in), and so at the same price."""
    pytest.importorskip("yaml")
    from fastpp.model import validate_foundry as vf

    row = next(r for r in vf.table().to_dict("records") if r["model"] == "MPT-125m"
               and r["gpu_type"] == "a100_80gb" and r["seq_len"] == 512)
    imported = from_llm_foundry(BENCHMARK, 8)
    assert dataclasses.replace(imported.model, name=row["model"]) == vf.mpt(row)
    assert imported.config == vf.run(row) and imported.gpus == 8
    assert imported.attention == vf.ATTENTION
    hardware = vf.hardware(row["gpu_type"])
    ours = explain(imported.model, imported.config, hardware, neighbours=0).row
    theirs = explain(vf.mpt(row), vf.run(row), hardware, neighbours=0).row
    assert ours["step_time"] == theirs["step_time"]
    # the bookkeeping (data, logging, the learning rate) is not listed; what may change the
    # run and is not read is
    assert set(imported.ignored[:3]) == {"optimizer", "fsdp_config.activation_cpu_offload",
                                         "fsdp_config.limit_all_gathers"}
    assert any("Triton" in x and "priced as" in x for x in imported.ignored)


CASES = [
    (Transformer(12, 768, 12, vocab=50368, tied_embeddings=True, loss="flash-attn"),
     RunConfig(seq=2048, global_batch=256, d=8, microbatch=16, zero=3, reduce_bytes=2.0,
               train_metrics=2, framework="composer")),
    # GQA, SwiGLU of a width no integer ratio gives, dropout, PyTorch's loss, ZeRO-2
    # checkpointed, fp8, no metrics
    (Transformer(24, 2048, 16, kv_heads=4, ffn=5504, swiglu=True, fused_swiglu=False,
                 vocab=32000, tied_embeddings=False, dropout=True, loss="cross-entropy"),
     RunConfig(seq=4096, global_batch=64, d=16, microbatch=2, zero=2, recompute="full",
               reduce_bytes=4.0, precision="fp8", train_metrics=0, framework="composer")),
    # multi-query, PyTorch's unfused attention, DDP
    (Transformer(4, 512, 8, kv_heads=1, vocab=1024, tied_embeddings=True, loss="flash-attn",
                 flash_attention=False),
     RunConfig(seq=1024, global_batch=32, d=4, microbatch=4, zero=0, train_metrics=2,
               framework="composer")),
    # hybrid sharding: two groups of 8
    (Transformer(32, 4096, 32, vocab=50368, loss="flash-attn"),
     RunConfig(seq=2048, global_batch=256, d=16, microbatch=4, zero=3, replicate=2,
               recompute="full", train_metrics=2, framework="composer")),
]


@pytest.mark.parametrize("model, config", CASES)
def test_written_and_read_back_it_is_the_same_run(model, config):
    """``to_llm_foundry`` writes what ``from_llm_foundry`` reads back as the same model (but
    its name) and run, through PyYAML's text too."""
    yaml = pytest.importorskip("yaml")
    written = to_llm_foundry(config, model)
    for given in (written, yaml.safe_dump(written)):
        back = from_llm_foundry(given, config.d)
        assert back.config == config
        assert back.model == dataclasses.replace(model, name=back.model.name)


def test_interpolations_resolve_as_omegaconf_s():
    """``${variables.x}`` (today's layout) and ``${x}`` (v0.3.0's), whole values and inside
    text; a name that is not a key is an error naming it, and so is a cycle."""
    base = to_llm_foundry(*reversed(CASES[0]))
    base = {**base, "variables": {"seq": 2048, "tag": "run"}, "max_seq_len": "${variables.seq}",
            "run_name": "${variables.tag}-${max_seq_len}", "env": "${oc.env:HOME}"}
    base["model"] = {**base["model"], "d_model": "${ variables.width }"}
    base["variables"]["width"] = 768
    resolved, _ = read_yaml(base)
    assert resolved["run_name"] == "run-2048" and resolved["model"]["d_model"] == 768
    assert resolved["env"] == "${oc.env:HOME}"  # (a resolver: left as written)
    assert from_llm_foundry(base, 8).config.seq == 2048
    with pytest.raises(ScheduleError, match=r"interpolation \$\{variables.sq\} names no key"):
        from_llm_foundry({**base, "max_seq_len": "${variables.sq}"}, 8)
    with pytest.raises(ScheduleError, match="refers to itself"):
        from_llm_foundry({**base, "variables": {"seq": "${max_seq_len}"}}, 8)


def test_yaml_s_aliases_are_resolved_once_and_a_recursive_one_refused():
    """A YAML whose aliases double at each level (a billion laughs) is read in linear time,
    each shared node resolved once; an anchor holding itself is refused, not recursed
    into."""
    pytest.importorskip("yaml")
    from fastpp.model.foundry import _Resolver

    text = "a0: &a0 [1, 2]\n" + "".join(f"a{k}: &a{k} [*a{k - 1}, *a{k - 1}]\n"
                                           for k in range(1, 40))
    start = time.perf_counter()
    with pytest.raises(ScheduleError, match="model must be given"):
        from_llm_foundry(text, 8)
    assert time.perf_counter() - start < 5.0  # (2**40 nodes walked would never end)
    node = {"b": 1}
    node["self"] = node
    with pytest.raises(ScheduleError, match="a YAML anchor holds itself"):
        _Resolver(node, "the config").value(node)
    with pytest.raises(ScheduleError, match="grows past"):
        from_llm_foundry({"v0": "x" * 1000, **{f"v{k}": f"${{v{k - 1}}}${{v{k - 1}}}"
                                               for k in range(1, 10)}}, 8)


def test_a_hugging_face_model_is_given_and_its_loss_is_pytorch_s():
    """``hf_causal_lm`` names a model the YAML does not hold: ``model=`` gives its shape,
    priced with transformers' loss (PyTorch's cross entropy on fp32 logits), Composer's
    train metrics, and flash-attn's kernel where ``use_flash_attention_2`` asks for it."""
    data = {**to_llm_foundry(*reversed(CASES[0])),
            "model": {"name": "hf_causal_lm",
                      "pretrained_model_name_or_path": "meta-llama/Llama-2-7b-hf"}}
    imported = from_llm_foundry(data, 8, model="llama2-7b")
    assert imported.model == dataclasses.replace(MODELS["llama2-7b"], loss="cross-entropy")
    assert imported.config.train_metrics == 2 and imported.attention is None
    flash2 = {**data, "model": {**data["model"], "use_flash_attention_2": True}}
    assert from_llm_foundry(flash2, 8, model="llama2-7b").attention == "FlashAttention-2"
    with pytest.raises(ScheduleError, match="hf_causal_lm needs from_llm_foundry's model="):
        from_llm_foundry(data, 8)
    with pytest.raises(ScheduleError, match="must not be given with mpt_causal_lm"):
        from_llm_foundry(to_llm_foundry(*reversed(CASES[0])), 8, model="llama2-7b")
    # model= read as torchtitan's importer reads it (hf.given_model): a misspelt preset named
    with pytest.raises(ScheduleError, match=r"model must be a preset name among .* or a "
                                            r"config.json \(got 'llama2-7bx'\)"):
        from_llm_foundry(data, 8, model="llama2-7bx")


def test_numpy_integers_are_counts():
    """A GPU count or a degree given as a NumPy integer reads as the same int (the rest of
    the API takes them); a NumPy bool is refused as a bool is."""
    data = to_llm_foundry(*reversed(CASES[0]))
    plain = from_llm_foundry(data, 8)
    assert from_llm_foundry(data, np.int64(8)) == plain
    assert from_llm_foundry({**data, "max_seq_len": np.int32(data["max_seq_len"])}, 8) == plain
    for bad in (np.True_, True, 8.0):
        with pytest.raises(ScheduleError, match=r"gpus must be an integer from 1"):
            from_llm_foundry(data, bad)


def _bad(change: dict, section: str = "") -> dict:
    data = to_llm_foundry(*reversed(CASES[0]))
    if section:
        data[section] = {**data.get(section, {}), **change}
    else:
        data.update(change)
    return data


@pytest.mark.parametrize("data, message", [
    (_bad({"device_train_microbatch_size": "auto"}),
     "device_train_microbatch_size must be a number \\(got 'auto'"),
    # (compared with 'auto' first: NumPy's ambiguous truth)
    (_bad({"device_train_microbatch_size": np.array([8, 16])}),
     "device_train_microbatch_size must be an integer from 1"),
    (_bad({"global_train_batch_size": 100}),
     "global_train_batch_size must be a multiple of gpus = 8 \\(got 100\\)"),
    (_bad({"max_seq_len": "2048"}), "max_seq_len must be an integer from 1"),
    (_bad({"precision": "fp64"}), "precision must be one of"),
    (_bad({"sharding_strategy": "SHARD_EVERYTHING"}, "fsdp_config"),
     "fsdp_config sharding_strategy must be one of"),
    (_bad({"data_parallel_replicate_degree": 3}, "fsdp_config"),
     "data_parallel_replicate_degree must divide gpus = 8 \\(got 3\\)"),
    (_bad({"mixed_precision": {"param_dtype": "int8"}}, "fsdp_config"),
     "reduce_dtype must be one of"),
    (_bad({"mixed_precision": {"reduce_dtype": "int8"}}, "fsdp_config"),
     "reduce_dtype must be one of"),
    (_bad({"tensor_parallel_degree": 2, "strategy": "ffn"}, "tp_config"),
     "tp_config tensor_parallel_degree must be 1 \\(got 2\\)"),
    (_bad({"name": "mpt_moe"}, "model"), "model name must be one of"),
    (_bad({"n_layers": 12.0}, "model"), "model n_layers must be an integer"),
    (_bad({"attn_config": {"attn_impl": "xformers"}}, "model"),
     "model.attn_config attn_impl must be one of"),
    (_bad({"attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 0}}, "model"),
     "model.attn_config kv_n_heads must be an integer"),
    (_bad({"attn_config": {"attn_type": "grouped_query_attention"}}, "model"),
     "model.attn_config kv_n_heads must be an integer .* \\(got None\\)"),
    (_bad({"attn_config": {"kv_n_heads": 4}}, "model"),
     "kv_n_heads goes with attn_type grouped_query_attention alone"),
    (_bad({"expansion_ratio": float("inf")}, "model"), "model expansion_ratio must be"),
    (_bad({"expansion_ratio": 2.7}, "model"), "whose product with d_model = 768 is whole"),
    (_bad({"device_train_microbatch_size": 12}),
     "device_train_microbatch_size must divide the per-GPU batch"),
    (_bad({"ffn_config": {"ffn_type": "mb_moe"}}, "model"),
     "model.ffn_config ffn_type must be one of"),
    (_bad({"resid_pdrop": 1.5}, "model"), "model resid_pdrop must be a rate from 0 to 1"),
    (_bad({"loss_fn": "my_loss"}, "model"), "model loss_fn must be one of"),
    (_bad({"use_train_metrics": "yes"}, "model"), "model use_train_metrics must be one of"),
    (_bad({"model": [1, 2]}), "model must be a mapping"),
    (_bad({"fsdp_config": True}), "fsdp_config must be a mapping"),
    ({"fsdp_config": {}}, "model must be given"),
    ("just: [unclosed", "is not YAML"),
    ("- a list", "must hold a mapping of llm-foundry's keys"),
])
def test_bad_configs_name_the_key(data, message):
    if isinstance(data, str):
        pytest.importorskip("yaml")
    with pytest.raises(ScheduleError, match=message):
        from_llm_foundry(data, 8)


def test_what_the_yaml_cannot_state_is_refused_not_dropped():
    """Every field the YAML read back does not give is refused, naming it."""
    model, config = CASES[0]
    for change, field in (({"t": 2, "d": 4}, "t=2"), ({"zero": 1}, "zero=1"),
                          ({"recompute": "selective"}, "recompute='selective'"),
                          ({"train_metrics": 1}, "train_metrics=1"),
                          ({"framework": "megatron"}, "framework='megatron'"),
                          ({"schedule": "gpipe"}, "schedule='gpipe'"),
                          ({"recompute": "full", "recompute_method": "interval",
                            "recompute_layers": 2}, "recompute_method='interval'"),
                          ({"gradient_overlap": True}, "gradient_overlap=True")):
        with pytest.raises(ScheduleError, match=f"to_llm_foundry cannot state {field}"):
            to_llm_foundry(config.replace(**change), model)
    with pytest.raises(ScheduleError, match="cannot state the model's loss='in-place'"):
        to_llm_foundry(config, MODELS["deepseek-v3"])
    with pytest.raises(ScheduleError, match="cannot state the model's experts"):
        to_llm_foundry(config, Transformer(4, 1024, 8, experts=8, top_k=2, vocab=1024,
                                           loss="flash-attn"))


def _read(fsdp=None, top=None, model=None, gpus=8):
    data = to_llm_foundry(*reversed(CASES[0]))
    data.pop("fsdp_config", None)
    if fsdp is not None:
        data["fsdp_config"] = fsdp
    data.update(top or {})
    data["model"] = {k: v for k, v in {**data["model"], **(model or {})}.items()
                     if v is not None}
    return from_llm_foundry(data, gpus)


def test_each_key_means_what_composer_and_mpt_make_of_it():
    """The mappings, each held to what Composer and llm-foundry run (not to the writer):
    FSDP's strategies as ZeRO, their names in any case, the gradient's bytes in each
    mixed-precision form, DDP without FSDP or on one GPU, hybrid sharding by its replicate
    degree, fp8 in Transformer Engine's layers alone, the microbatch clamped to the per-GPU
    batch, and MPT's defaults (GeLU MLP of 4 d_model, 50,368 words, tied, flash-attn's loss,
    the flash-attn kernel)."""
    def run(fsdp=None, **more):
        return _read(fsdp, **more).config

    assert (run().zero, run().reduce_bytes) == (0, 4.0)  # DDP: fp32 gradients
    assert (run({}).zero, run({}).reduce_bytes) == (3, 4.0)  # FULL_SHARD, DEFAULT
    assert run({"sharding_strategy": "shard_grad_op", "mixed_precision": "pure"}).zero == 2
    assert run({"sharding_strategy": "NO_SHARD", "mixed_precision": "PURE"}).reduce_bytes == 2
    assert run({"mixed_precision": {"param_dtype": "bf16"}}).reduce_bytes == 2.0
    assert run({"mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "fp32"}
                }).reduce_bytes == 4.0
    assert run({"mixed_precision": {"reduce_dtype": "torch.bfloat16"}}).reduce_bytes == 2.0
    hybrid = _read({"sharding_strategy": "HYBRID_SHARD"}, gpus=16)
    assert (hybrid.config.zero, hybrid.config.replicate) == (3, 1)  # (Composer >= 0.23)
    assert any("up to 0.22 it shards within each node" in x for x in hybrid.ignored)
    two = run({"sharding_strategy": "FULL_SHARD", "data_parallel_replicate_degree": 2},
              gpus=16)
    assert (two.zero, two.replicate) == (3, 2)
    one = _read({"sharding_strategy": "FULL_SHARD"}, gpus=1,
                top={"global_train_batch_size": 16, "device_train_microbatch_size": 16})
    assert one.config.zero == 0 and any("one GPU" in x for x in one.ignored)
    fp8 = _read(top={"precision": "amp_fp8"})
    assert fp8.config.precision is None and any("amp_fp8 without" in x for x in fp8.ignored)
    assert run(top={"precision": "amp_fp8"}, model={"fc_type": {"name": "te"}}
               ).precision == "fp8"
    assert run(top={"device_train_microbatch_size": 64}).microbatch == 32  # 256 / 8
    bare = _read(model={"expansion_ratio": None, "vocab_size": None, "loss_fn": None,
                        "tie_word_embeddings": None, "attn_config": None, "ffn_config": None})
    assert (bare.model.ffn, bare.model.vocab, bare.model.tied_embeddings) == (3072, 50368,
                                                                                True)
    assert (bare.model.loss, bare.model.swiglu, bare.attention) == ("flash-attn", False,
                                                                    "FlashAttention-2")
    assert any("attn_impl not given" in x for x in bare.ignored)
    gqa = _read(model={"attn_config": {"attn_type": "grouped_query_attention",
                                       "kv_n_heads": 4}})
    mqa = _read(model={"attn_config": {"attn_type": "multiquery_attention"}})
    assert (gqa.model.kv_heads, mqa.model.kv_heads) == (4, 1)


def test_a_custom_mixed_precision_s_keys_not_read_are_listed():
    """Composer's dict form: a misspelt reduce_dtype (which Composer drops, reading the dtypes
    by .get) priced the reduction in fp32 without a word."""
    data = _bad({"mixed_precision": {"reduce_dtpye": "bf16", "buffer_dtype": "bf16"}},
                "fsdp_config")
    imported = from_llm_foundry(data, 8)
    assert imported.config.reduce_bytes == 4.0
    assert ("fsdp_config.mixed_precision.reduce_dtpye (not read: a misspelt fsdp_config."
            "mixed_precision.reduce_dtype?)") in imported.ignored
    assert "fsdp_config.mixed_precision.buffer_dtype" in imported.ignored


def test_keys_not_read_are_listed_a_misspelling_named():
    """A key of the model or of ``fsdp_config`` that is not read is listed, one that may
    misspell a read key with the key it may mean (it changes the run: MPT would refuse it or
    default it); the bookkeeping is not listed; a key that is no string is listed as text."""
    data = _bad({"n_layer": 24, "init_device": "meta", "master_weights_dtype": "bf16"},
                "model")
    data = {**data, "loggers": {"wandb": {}}, "compile_config": {}, 1: 2,
            "fsdp_config": {**data["fsdp_config"], "sharding_stratgy": "FULL_SHARD"}}
    ignored = from_llm_foundry(data, 8).ignored
    assert "model.n_layer (not read: a misspelt model.n_layers?)" in ignored
    assert ("fsdp_config.sharding_stratgy (not read: a misspelt fsdp_config."
            "sharding_strategy?)") in ignored
    assert {"compile_config", "model.master_weights_dtype", "1"} <= set(ignored)
    assert not any("init_device" in x or "loggers" in x for x in ignored)


def test_the_cli_explains_a_yaml_with_its_attention_kernel(tmp_path):
    """``python -m fastpp explain --llm-foundry FILE``: the run on its GPUs with the kernel
    its code runs (the Triton kernel's stand-in on A100), and what is not modelled said."""
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "mpt.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(BENCHMARK)))
    out = subprocess.run([sys.executable, "-m", "fastpp", "explain", "--llm-foundry",
                          str(path), "--gpus", "8", "--hardware", "A100-80GB",
                          "--neighbours", "0"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "mpt-12x768" in out.stdout and "priced otherwise: model.attn_config" in out.stdout
    listed = next(line for line in out.stdout.splitlines() if "not modelled:" in line)
    assert "optimizer" in listed and "limit_all_gathers" in listed and "stack" not in listed
    assert "\n  note: Composer's stack: " in out.stdout  # (a sentence: on its own line)
    missing = subprocess.run([sys.executable, "-m", "fastpp", "explain", "--llm-foundry",
                              str(path)], capture_output=True, text=True, timeout=300)
    assert missing.returncode != 0 and "--llm-foundry needs --gpus" in missing.stderr


def test_a_composer_run_s_neighbours_are_llm_foundry_s_keys():
    """``explain(..., flags="composer")``: the faster runs llm-foundry can make (FSDP alone,
    ZeRO 0, 2 or 3, full or no recomputation), written as the YAML keys to change."""
    model, config = CASES[0]
    found = explain(model, config.replace(microbatch=1), "A100-80GB", neighbours=5,
                    flags="composer")
    assert found.neighbours
    for n in found.neighbours:
        assert (n["t"], n["p"], n["schedule"]) == (1, 1, "1f1b") and n["zero"] in (0, 2, 3)
        assert all(c.split("=")[0].removeprefix("no ") in (
            "device_train_microbatch_size", "fsdp_config", "fsdp_config.sharding_strategy",
            "fsdp_config.activation_checkpointing", "fsdp_config.mixed_precision")
            for c in n["changes"].split())
    with pytest.raises(ScheduleError, match="to_llm_foundry cannot state zero=1"):
        explain(model, config.replace(zero=1), "A100-80GB", flags="composer")
    with pytest.raises(ScheduleError, match="to_llm_foundry cannot state t=2"):
        explain(model, config.replace(t=2, d=4), "A100-80GB", flags="composer")


# a review of the llm-foundry and vTrain importers (7 December 2026): each failed before
REVIEW_FSDP = {"sharding_strategy": "FULL_SHARD", "mixed_precision": "PURE",
        "activation_checkpointing": True}


def _hf(**model):
    """A YAML of a Hugging Face model (the review of 7 December 2026's cases)."""
    return {"max_seq_len": 4096, "global_train_batch_size": 64,
            "device_train_microbatch_size": 1, "fsdp_config": dict(REVIEW_FSDP),
            "model": {"name": "hf_causal_lm",
                      "pretrained_model_name_or_path": "meta-llama/Meta-Llama-3-8B", **model}}


def _mpt(**top):
    """A YAML of an MPT model."""
    return {"max_seq_len": 2048, "global_train_batch_size": 64,
            "device_train_microbatch_size": 8, "fsdp_config": dict(REVIEW_FSDP),
            "model": {"name": "mpt_causal_lm", "d_model": 2048, "n_heads": 16,
                      "n_layers": 24, "max_seq_len": 2048}, **top}


def test_hf_eager_attention_is_not_priced_as_a_fused_kernel():
    # llm-foundry hf_base.py passes attn_implementation to the HF config; transformers'
    # "eager" is eager_attention_forward (matmul, softmax, matmul: the s x s scores in memory)
    imported = from_llm_foundry(_hf(attn_implementation="eager"), 8, model="llama3-8b")
    assert imported.model.flash_attention is False
    assert not any("SDPA" in note for note in imported.ignored)


def test_an_unknown_hf_attn_implementation_is_refused_naming_the_key():
    with pytest.raises(ScheduleError, match="attn_implementation"):
        from_llm_foundry(_hf(attn_implementation="flash_attn2"), 8, model="llama3-8b")


def test_to_llm_foundry_states_the_model_s_max_seq_len():
    # MPTModel.forward asserts S <= config.max_seq_len (MPTConfig default 2048)
    model = Transformer(24, 2048, 16, ffn=8192, vocab=50368, loss="flash-attn")
    run = RunConfig(seq=8192, global_batch=64, d=8, microbatch=1, zero=3,
                    recompute="full", reduce_bytes=2.0, train_metrics=2, framework="composer")
    out = to_llm_foundry(run, model)
    assert out["model"].get("max_seq_len", 2048) >= 8192


def test_a_sequence_longer_than_mpt_s_max_seq_len_is_refused():
    data = _mpt(max_seq_len=4096)  # model.max_seq_len stays 2048: MPT's forward asserts
    with pytest.raises(ScheduleError, match="max_seq_len"):
        from_llm_foundry(data, 8)


def test_the_training_length_is_the_train_loader_s():
    # llm-foundry's train.py (HEAD) uses the top-level max_seq_len for ICL evaluation only;
    # the samples are cut to train_loader.dataset.max_seq_len (text_data.py)
    data = _mpt(train_loader={"name": "text", "dataset": {"max_seq_len": 1024}})
    assert from_llm_foundry(data, 8).config.seq == 1024


def test_pure_mixed_precision_under_fp32_reduces_in_fp32():
    # Composer get_mixed_precision: PURE reduces in the precision's dtype; fp32's is fp32
    data = _mpt(precision="fp32")
    assert from_llm_foundry(data, 8).config.reduce_bytes == 4.0


def test_a_replicate_degree_of_minus_one_is_filled_as_composer_fills_it():
    # composer/core/state.py _create_device_mesh: one -1 degree is world / the others
    data = _mpt()
    data["fsdp_config"].update(data_parallel_shard_degree=8, data_parallel_replicate_degree=-1)
    assert from_llm_foundry(data, 64).config.replicate == 8
    # a shard degree that leaves no whole replica: it said "data_parallel_replicate_degree must
    # be an integer from 1 to 2**31-1 (got 0)", a count the file never held (or "(got 2 x 3)")
    for shard in (16, 3):
        data["fsdp_config"].update(data_parallel_shard_degree=shard)
        with pytest.raises(ScheduleError, match=rf"data_parallel_shard_degree must divide gpus "
                                                rf"= 8 with data_parallel_replicate_degree -1 "
                                                rf"\(got {shard}\)"):
            from_llm_foundry(data, 8)


def test_a_shard_degree_alone_is_read_not_dropped():
    data = _mpt()
    data["fsdp_config"]["data_parallel_shard_degree"] = 8
    with pytest.raises(ScheduleError, match="data_parallel_shard_degree"):
        from_llm_foundry(data, 64)  # Composer: world 64 != 8, ValueError


def test_a_head_count_that_does_not_divide_the_width_names_the_file_s_keys():
    with pytest.raises(ScheduleError, match="n_heads|d_model"):
        from_llm_foundry(_mpt(model={"name": "mpt_causal_lm", "d_model": 2048, "n_heads": 3,
                                    "n_layers": 24}), 8)
    with pytest.raises(ScheduleError, match="num_attention_heads|hidden_size"):
        fm.from_vtrain({"num_gpus": 1, "tensor_parallel_size": 1, "data_parallel_size": 1,
                     "pipeline_parallel_size": 1, "global_batch_size": 8, "num_layers": 12,
                     "hidden_size": 1024, "num_attention_heads": 3})


def test_an_fsdp_degree_that_is_an_array_is_refused_by_name():
    """A dict config's data_parallel_shard_degree (or replicate) as a NumPy array raised
    NumPy's 'truth value of an array ... is ambiguous' from its comparison with -1 (STYLE.md
    rule 4), not a ScheduleError naming the key; a list said the same."""
    import numpy as np

    for key, value in (("data_parallel_shard_degree", np.array([2, 4])),
                       ("data_parallel_replicate_degree", np.array([-1, 1])),
                       ("data_parallel_shard_degree", [8])):
        data = _mpt()
        data["fsdp_config"].update({"data_parallel_shard_degree": 8,
                                    "data_parallel_replicate_degree": -1, key: value})
        with pytest.raises(ScheduleError, match=rf"fsdp_config {key} must be an integer"):
            from_llm_foundry(data, 8)
