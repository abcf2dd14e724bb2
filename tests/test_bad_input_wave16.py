"""The sixteenth bad-input wave (5 December 2026, night): a new user's trial of the model
readers. Each case failed on the code before it."""

import numpy as np
import pytest

from fastpp import ScheduleError, ScheduleTypeError
from fastpp.model import (
    MODELS,
    RunConfig,
    Transformer,
    from_hf,
    from_megatron,
    from_torchtitan,
    plan,
)

SHAPE = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
         "--vocab-size 32000 --bf16 --micro-batch-size 1")  # (Megatron asserts it)
RUN = "torchrun --nproc_per_node 8 pretrain_gpt.py " + SHAPE


def test_megatron_string_holding_an_unset_variable():
    """A string variable holding an unset variable (``--data-path ${DATA_DIR}/...``) was
    dropped whole: t = 4 and the recomputation vanished, and ``ignored`` said the script
    did not set $RUN_ARGS. Bash expands the unset part to nothing and keeps the rest."""
    script = ('RUN_ARGS="--tensor-model-parallel-size 4 --recompute-granularity full '
              '--data-path ${DATA_DIR}/my_text_document"\n' + RUN + " ${RUN_ARGS}")
    imported = from_megatron(script)
    assert (imported.config.t, imported.config.d, imported.config.recompute) == (4, 2, "full")
    assert "$DATA_DIR (the script does not set it: expanded to nothing, as bash does)" in \
        imported.ignored
    assert not any("RUN_ARGS" in x for x in imported.ignored)
    # appends keep working, through an unset part too
    appended = ('OPTS="--save $CKPT_DIR"\nOPTS="$OPTS --tensor-model-parallel-size 4 '
                '--use-distributed-optimizer"\n' + RUN + " $OPTS")
    config = from_megatron(appended).config
    assert (config.t, config.zero) == (4, 1)
    # a modelled flag whose value is an unset variable is still an error naming it
    with pytest.raises(ScheduleError, match="needs the variable 'TPX'"):
        from_megatron('A="--tensor-model-parallel-size $TPX --sequence-parallel"\n'
                      + RUN + " $A")


def test_megatron_if_on_integers_and_case():
    """``if [ $NNODES -gt 1 ]`` was taken as true whatever NNODES was, and every arm of a
    ``case`` ran (the last won)."""
    numeric = ("NNODES=1\nif [ $NNODES -gt 1 ]; then TP=8; else TP=2; fi\n"
               + RUN + " --tensor-model-parallel-size $TP")
    imported = from_megatron(numeric)
    assert imported.config.t == 2 and imported.ignored == ()
    case = ("MODEL=8B\ncase $MODEL in\n  8B)\n    NL=32\n    ;;\n  70B|405B)\n    NL=80\n"
            "    ;;\nesac\n" + RUN.replace("--num-layers 32", "--num-layers $NL"))
    assert from_megatron(case).model.layers == 32
    assert from_megatron(case.replace("=8B", "=405B")).model.layers == 80
    # one line, glob patterns, and an unset word (empty, as bash has it: named)
    one_line = ("case $SIZE in 8B) TP=2;; 7*) TP=4;; *) TP=8;; esac\n"
                + RUN + " --tensor-model-parallel-size $TP")
    assert from_megatron(one_line, env={"SIZE": "70B"}).config.t == 4
    unset = from_megatron(one_line)
    assert unset.config.t == 8
    assert unset.ignored == ("case $SIZE: $SIZE is not set in the script, empty as bash "
                             "has it: the arm '*' ran",)


def test_megatron_if_not_decided_is_named():
    """A test the reader cannot decide (a file, an unset number) was taken as true
    silently: it is still taken, and listed in ``ignored`` with the branch."""
    script = ("if [ $NNODES -gt 1 ]; then TP=8; else TP=2; fi\n"
              + RUN + " --tensor-model-parallel-size $TP")
    imported = from_megatron(script)
    assert imported.config.t == 8
    assert imported.ignored == ("if [ $NNODES -gt 1 ]: not decided here (a file, a command or "
                                "a number the script does not set): its branch was taken",)
    # a block that does not run decides nothing and says nothing
    quiet = ("if false; then if [ -f x ]; then TP=8; fi; fi\n"
             + RUN + " --tensor-model-parallel-size ${TP:-2}")
    imported = from_megatron(quiet)
    assert imported.config.t == 2 and imported.ignored == ()


def test_megatron_elastic_nnodes():
    """``torchrun --nnodes 1:4`` (an elastic range) was read as one node."""
    script = RUN.replace("torchrun ", "torchrun --nnodes 1:4 ")
    with pytest.raises(ScheduleError, match=r"--nnodes 1:4, an elastic range .* gpus=N"):
        from_megatron(script)
    assert from_megatron(script, gpus=16).config.d == 16


def test_megatron_post_processing_after_training():
    """A ``python tools/...py`` line after the training command was read as the training
    command: "--num-layers must be given"."""
    script = (RUN + " --tensor-model-parallel-size 4\npython tools/checkpoint/convert.py "
              "--model-type GPT --load-dir ckpt --target-tensor-parallel-size 1\n")
    assert from_megatron(script).config.t == 4


TITAN = """
[model]
name = "llama3"
flavor = "70B"
[training]
local_batch_size = 8
seq_len = 8192
"""


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


NEMO = {"trainer": {"devices": 8, "num_nodes": 2, "precision": "bf16-mixed"},
        "model": {"micro_batch_size": 1, "global_batch_size": 128,
                  "tensor_model_parallel_size": 2, "encoder_seq_length": 4096,
                  "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                  "optim": {"name": "distributed_fused_adam", "lr": 2e-4}}}


def test_nemo_distributed_optimizer_and_trainer_gpus():
    """NeMo's ``model.optim.name: distributed_fused_adam`` (ZeRO-1) was read as ZeRO-0, and
    ``trainer.devices * trainer.num_nodes`` was not read: the GPU count had to be given."""
    imported = from_megatron(NEMO, vocab=32000)
    assert (imported.gpus, imported.config.d, imported.config.zero) == (16, 8, 1)
    mcore = {**NEMO, "model": {**NEMO["model"], "optim": {"name": "mcore_distributed_optim"}}}
    assert from_megatron(mcore, vocab=32000).config.zero == 1
    plain = {**NEMO, "model": {**NEMO["model"], "optim": {"name": "fused_adam"}}}
    assert from_megatron(plain, gpus=8, vocab=32000).config.zero == 0
    with pytest.raises(ScheduleError, match="trainer.num_nodes must be an integer"):
        from_megatron({**NEMO, "trainer": {"devices": 8, "num_nodes": "2"}}, vocab=32000)


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


def test_misspelt_keyword_names_itself():
    """A misspelt keyword of ``Transformer`` or ``plan`` raised a bare TypeError, not a
    ScheduleTypeError naming it and the keywords taken (as RunConfig's does)."""
    with pytest.raises(ScheduleTypeError, match=r"Transformer has no keyword 'bogus' \(its "
                                                 r"keywords: layers, hidden, heads"):
        Transformer(layers=2, hidden=64, heads=4, bogus=1)
    with pytest.raises(ScheduleTypeError, match=r"plan has no keyword 'tensor_parallel' \(its "
                                                 r"keywords: model, gpus, hardware, seq"):
        plan(MODELS["llama3-8b"], 8, seq=4096, global_batch=8, tensor_parallel=2)
    assert Transformer(2, 64, 4).layers == 2  # positional calls as before


def test_fields_accepted_then_ignored():
    """``Transformer(window_layers=1)`` without a window, ``RunConfig(zero=1, zero3="step")``
    and ``RunConfig(recompute="none", recompute_layers=4)`` were accepted and the second
    field ignored."""
    with pytest.raises(ScheduleError, match=r"window_layers needs a window > 0 \(got "
                                            r"window_layers=1, window=0\)"):
        Transformer(2, 64, 4, window_layers=1)
    with pytest.raises(ScheduleError, match=r"zero must be 3 with zero3='step' \(got zero=1\)"):
        RunConfig(seq=4096, global_batch=8, zero=1, zero3="step")
    with pytest.raises(ScheduleError, match=r"recompute must be 'full' with recompute_layers=4 "
                                            r"\(got recompute='none'\)"):
        RunConfig(seq=4096, global_batch=8, recompute="none", recompute_layers=4)


def test_a_model_given_beside_a_script_is_padded_and_its_replacements_said(capsys, tmp_path):
    """``explain --megatron-script train70.sh --model config.json``: the 8B config's shape
    replaced the script's 70B without a word, and its vocabulary went unpadded (Megatron pads
    128,256 words to a multiple of 128 t: 129,024 at t = 8)."""
    from fastpp.__main__ import main
    from fastpp.model.megatron import from_megatron

    script = ("--num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
              "--group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 "
              "--swiglu --seq-length 8192 --vocab-size 128256 --bf16 "
              "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4")
    launch = from_megatron(script, gpus=64)
    assert launch.model.vocab == 129024
    on = launch.on("llama3-8b")
    assert (on.layers, on.hidden, on.vocab) == (32, 4096, 129024)
    # (the script leaves out --untie-embeddings-and-output-weights, which Llama 3 unties: said
    # since 6 December, with every field of the shape)
    assert launch.reshaped("llama3-8b") == ["layers 80 -> 32", "hidden 8192 -> 4096",
                                            "heads 64 -> 32", "ffn 28672 -> 14336",
                                            "tied_embeddings True -> False"]
    assert launch.reshaped("llama3-70b") == ["tied_embeddings True -> False"]
    untied = from_megatron(script + " --untie-embeddings-and-output-weights", gpus=64)
    assert untied.reshaped("llama3-70b") == []
    path = tmp_path / "train70.sh"
    path.write_text(f"torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py {script}\n")
    assert main(["explain", "--megatron-script", str(path), "--model", "llama3-8b",
                 "--hardware", "H100-80GB", "--neighbours", "0", "--workers", "1"]) == 0
    assert ("note: --model's shape replaces the launch's (layers 80 -> 32, hidden 8192 -> "
            "4096, heads 64 -> 32, ffn 28672 -> 14336, tied_embeddings True -> False)") \
        in capsys.readouterr().err


def test_explain_a_zero3_run_gathered_per_step():
    """explain's neighbours at ZeRO-1 were rebuilt with the run's ``zero3="step"``, which
    RunConfig now refuses beside ``zero=1``: explain raised on any such run (the review)."""
    from fastpp.model.explain import explain

    found = explain(Transformer(4, 256, 4, vocab=1024),
                    RunConfig(seq=256, global_batch=16, p=2, d=4, microbatch=1, zero=3,
                              zero3="step"), "A100-80GB", workers=1)
    assert found.row["zero"] == 3 and isinstance(found.neighbours, list)


def test_device_bytes_counts_a_recipes_bf16_moments_as_plan_does():
    """``plan(recipe="deepseek-v3")`` counted AdamW's moments in bf16 (8 optimizer bytes a
    parameter), ``device_bytes`` had no recipe and counted 12 (the review)."""
    from fastpp import build_schedule
    from fastpp.model import device_bytes

    sched = build_schedule("1f1b", 2, 4)
    model = Transformer(4, 256, 4, vocab=1024)
    plain = device_bytes(model, sched, dp=4, zero=1)
    moments = device_bytes(model, sched, dp=4, zero=1, recipe="deepseek-v3")
    np.testing.assert_allclose(moments["optimizer_bytes"] * 12, plain["optimizer_bytes"] * 8)
    np.testing.assert_allclose(moments["gradient_bytes"], plain["gradient_bytes"])


def test_transformer_costs_agrees_with_plan_on_three_counts():
    """The plan-against-building-blocks trial: the keyword form's error bar counted the job
    without its pipeline (t = 6 on 12 GPUs read as inside a node), it had no
    ``reduce_bytes`` (a misspelt or missing keyword was a bare TypeError), and it refused
    combined 1F1B's overlap where one microbatch builds no pair, which plan prices as
    without the overlap."""
    from fastpp.model import HARDWARE, transformer_costs
    from fastpp.model.errorbar import error_bar, regime

    model = Transformer(4, 768, 48, kv_heads=12, vocab=1000)
    config = RunConfig(seq=1536, global_batch=8, t=6, p=2, d=1)
    keywords = transformer_costs(model, config.build_schedule(), "H100-80GB", seq=1536, tp=6)
    assert keywords.error_bar == transformer_costs(model, hardware="H100-80GB",
                                                   config=config).error_bar
    assert keywords.error_bar == error_bar(regime(model, HARDWARE["H100-80GB"], 1536, 6, 12))
    assert keywords.error_bar.regime.tp == "across nodes"
    with pytest.raises(ScheduleTypeError, match="transformer_costs has no keyword 'reduce'"):
        transformer_costs(model, config.build_schedule(), seq=1536, reduce=2)
    one = RunConfig(seq=4096, global_batch=8, d=8, ep=8, schedule="combined-1f1b", m=2,
                    overlap=True)
    plain = one.replace(overlap=False)
    paired, unpaired = (transformer_costs("mixtral-8x7b", hardware="H100-80GB", config=c)
                        for c in (one, plain))
    np.testing.assert_array_equal(paired.f, unpaired.f)
    np.testing.assert_array_equal(paired.b, unpaired.b)
    row = plan("mixtral-8x7b", hardware="H100-80GB", config=one, workers=1).iloc[0]
    assert row["step_time"] == plan("mixtral-8x7b", hardware="H100-80GB", config=plain,
                                    workers=1).iloc[0]["step_time"]
