"""``from_megatron`` / ``to_megatron``: launch scripts as users write them, and back."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fastpp import ScheduleError, build_schedule, simulate
from fastpp.model import (
    HARDWARE,
    MODELS,
    RunConfig,
    Transformer,
    chunk_layers,
    parse_layout,
    plan,
    transformer_costs,
)
from fastpp.model.errorbar import error_bar, regime
from fastpp.model.megatron import FLAGS, from_megatron, script_words, to_megatron
from fastpp.model.validate import DATA as PUBLISHED
from fastpp.model.validate import NARAYANAN_RUNS

DATA = Path(__file__).parent / "data" / "megatron"
TABLE1 = PUBLISHED / "narayanan_2021_table1.csv"  # beside the repository, or $FASTPP_DATA


def script(name):
    return (DATA / name).read_text()


def test_gpt3_175b():
    model, config = imported = from_megatron(script("gpt3_175b.sh"))
    # GPT-3: 4h GeLU MLP, tied embeddings, dropout 0.1 (Megatron's defaults where absent),
    # GPT-2's 50,257 tokens padded to a multiple of 128 * 8
    assert (model.layers, model.hidden, model.heads, model.kv_heads, model.ffn) == (
        96, 12288, 96, 96, 4 * 12288)
    assert model.vocab == 51200 and model.tied_embeddings and model.dropout
    assert not model.swiglu and not model.flash_attention
    assert abs(model.parameters / 175e9 - 1) < 0.01
    assert config == RunConfig(seq=2048, global_batch=1536, t=8, p=16, d=8, microbatch=1,
                               sequence_parallel=True, zero=1, precision="bf16",
                               cp_comm="ring")
    assert imported.gpus == 1024 and config.n == 192
    assert {"--lr", "--data-path", "--save", "--split"} <= set(imported.ignored)
    assert not {"--num-layers", "--bf16"} & set(imported.ignored)


def test_llama3_8b():
    # the tokenizer is read from a file Megatron loads: its size is given here
    model, config = from_megatron(script("llama3_8b.sh"), vocab=128256)
    assert model == Transformer(32, 4096, 32, kv_heads=8, ffn=14336, vocab=128256,
                                swiglu=True, name="megatron")
    assert abs(model.parameters / 8.03e9 - 1) < 0.01
    assert config == RunConfig(seq=8192, global_batch=128, t=2, cp=2, p=1, d=2,
                               recompute="selective", sequence_parallel=True, zero=1,
                               gradient_overlap=True, precision="fp8", cp_comm="ring")


def test_mixtral_with_expert_parallelism():
    imported = from_megatron(script("mixtral_8x7b.sh"))
    model, config = imported
    assert (model.experts, model.top_k, model.expert_ffn, model.kv_heads) == (8, 2, 14336, 8)
    assert abs(model.parameters / 46.7e9 - 1) < 0.01
    assert abs(model.active_parameters / 12.9e9 - 1) < 0.01
    # 32 layers, 4 a chunk on 4 devices: 2 chunks each, Megatron's interleaved schedule,
    # its hand-offs overlapped (Megatron's default there)
    assert config == RunConfig(seq=4096, global_batch=256, p=4, d=16, ep=8, etp=1, m=2,
                               schedule="interleaved-1f1b", recompute="full",
                               recompute_method="uniform", recompute_layers=1,
                               sequence_parallel=False, zero=1, precision="bf16",
                               cp_comm="ring", blocking_handoffs=False)
    assert "--moe-grouped-gemm" in imported.ignored


@pytest.mark.parametrize("row", pd.read_csv(TABLE1).to_dict("records"),
                         ids=lambda r: f"{r['params_b']}B")
def test_narayanan_table1_scripts(row):
    """Each script gives its row's layout (the CSV is the independent source)."""
    model, config = from_megatron(script(f"narayanan_{row['params_b']}b.sh"))
    assert (model.layers, model.hidden, model.heads) == (row["layers"], row["hidden"],
                                                         row["heads"])
    assert (config.t, config.p, config.gpus, config.global_batch) == (
        row["t"], row["p"], row["gpus"], row["global_batch"])
    assert config.recompute == "full" and config.zero == 0 and config.reduce_bytes == 2.0
    # fp16 runs as bf16's rate, and the import says so beside the flags it does not price
    assert config.precision in (None, "bf16")
    assert "fp16: priced as bf16 (the same tensor-core rate; its loss scaling is not priced)" \
        in from_megatron(script(f"narayanan_{row['params_b']}b.sh")).ignored
    # validate's runs: the authors' microbatch, interleaving and gradient reduction
    b, virtual, ddp = NARAYANAN_RUNS[float(row["params_b"])]
    assert config.microbatch == b
    assert config.m == (1 if virtual is None else row["layers"] // (row["p"] * virtual))
    assert config.gradient_overlap == (ddp == "torch")
    # the paper counts position embeddings and biases too; its sizes have one decimal
    assert abs(model.parameters / 1e9 - row["params_b"]) <= max(0.03 * row["params_b"], 0.1)


def test_shell():
    text = """
    # a comment line
    A=4 ; B=${A}                 # B copies A
    C=${UNSET:-7}
    D=$(( A * (B + 2) / 3 ))     # 8
    ARGS=(
        --x $A        # after a flag
        --y "two words"
    )
    X=1 python train.py \\
        "${ARGS[@]}" --z $C --w $D --v $UNKNOWN
    """
    words = script_words(text)
    assert words[:2] == ["python", "train.py"]
    assert words[2:11] == ["--x", "4", "--y", "two words", "--z", "7", "--w", "8", "--v"]
    assert words[11].unresolved == "UNKNOWN"
    assert script_words("--a $B", env={"B": 3}) == ["--a", "3"]
    # unquoted, an array's elements split; += appends; if/elif/else on string tests
    text = """
    MODE="fp8"
    EXTRA=()
    if [[ "$MODE" == "bf16" ]]; then
        EXTRA+=("--bf16")
    elif [[ "$MODE" == "fp8" ]] || [[ -z "$MODE" ]]; then
        EXTRA+=("--fp8-format hybrid")
    else
        EXTRA+=("--fp16")
    fi
    if [ -n "$NOT_SET" ]; then EXTRA+=(--never); fi
    if [ -z "$NOT_SET" ]; then EXTRA+=(--always); fi
    python train.py ${EXTRA[@]}
    """
    assert script_words(text) == ["python", "train.py", "--fp8-format", "hybrid", "--always"]


BASE = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
        "--vocab-size 1000 ")


def test_forms_agree():
    """A command string, an argument list and a dict of snake_case keys give one result."""
    flags = BASE + "--tensor-model-parallel-size 2 --swiglu --sequence-parallel"
    as_string = from_megatron(flags, gpus=8)
    assert from_megatron(flags.split(), gpus=8) == as_string
    keys = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
            "vocab_size": 1000, "tensor_model_parallel_size": 2, "swiglu": True,
            "sequence_parallel": True, "lr": 3e-4}
    from_dict = from_megatron(keys, gpus=8)
    assert (from_dict.model, from_dict.config) == (as_string.model, as_string.config)
    assert from_dict.ignored == ("lr", "--micro-batch-size not given (Megatron asserts it): "
                                       "priced as 1", "fp32 (no --bf16 or --fp16): priced as bf16")
    # NeMo's spellings, a model section
    nemo = from_megatron({"model": {"num_layers": 4, "hidden_size": 256,
                                    "num_attention_heads": 8, "encoder_seq_length": 512,
                                    "padded_vocab_size": 1024,
                                    "share_embeddings_and_output_weights": False}}, gpus=1)
    assert nemo.config.seq == 512 and not nemo.model.tied_embeddings


def test_megatron_defaults():
    model, config = from_megatron(BASE + "--swiglu --num-query-groups 2 --num-experts 4",
                                  gpus=4)
    assert model.ffn == int(8 * 256 / 3 / 64) * 64 == 640
    assert model.kv_heads == 8  # --num-query-groups only with --group-query-attention
    assert model.top_k == 2 and model.tied_embeddings
    assert model.vocab == 1024  # 1000 padded to a multiple of 128 * t
    assert config.d == 4 and config.global_batch == 4 and config.zero == 0
    assert from_megatron(BASE + "--tensor-model-parallel-size 4",
                         gpus=4).model.vocab == 1024
    assert from_megatron(BASE + "--tensor-model-parallel-size 8",
                         gpus=8).model.vocab == 1024
    model, _ = from_megatron(BASE + "--group-query-attention --num-query-groups 2", gpus=1)
    assert model.kv_heads == 2 and model.ffn == 1024


def test_swiglu_fusion():
    """Megatron fuses SwiGLU (bias_swiglu, keeping only its input) unless
    --no-bias-swiglu-fusion; Megatron-Core's and NeMo's configs say bias_activation_fusion."""
    assert from_megatron(BASE + "--swiglu", gpus=1).model.fused_swiglu
    assert not from_megatron(BASE + "--swiglu --no-bias-swiglu-fusion",
                             gpus=1).model.fused_swiglu
    keys = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
            "vocab_size": 1024, "gated_linear_unit": True}
    assert from_megatron(keys, gpus=1).model.fused_swiglu
    assert not from_megatron({**keys, "bias_activation_fusion": False},
                             gpus=1).model.fused_swiglu
    with pytest.raises(ScheduleError, match="bias_activation_fusion must be true or false"):
        from_megatron({**keys, "bias_activation_fusion": "no"}, gpus=1)
    # two spellings of one argument that disagree: named, not settled by the keys' order
    with pytest.raises(ScheduleError, match="bias_swiglu_fusion and no_bias_swiglu_fusion "
                                            "contradict"):
        from_megatron({**keys, "bias_swiglu_fusion": True, "no_bias_swiglu_fusion": True},
                      gpus=1)
    with pytest.raises(ScheduleError, match="seq_length and encoder_seq_length contradict"):
        from_megatron({**keys, "encoder_seq_length": 1024}, gpus=1)
    assert from_megatron({**keys, "encoder_seq_length": 512}, gpus=1).config.seq == 512


def test_the_loss_as_megatron_runs_it():
    """Megatron's vocabulary-parallel loss, unfused unless --cross-entropy-loss-fusion
    (``Transformer.loss`` "fused", a dict's cross_entropy_loss_fusion as NeMo's and
    Megatron-Bridge's configs set it); written back as read, and priced: the fused loss
    moves fewer bytes on the last stage (``compute.LOSS_BYTES``)."""
    assert from_megatron(BASE, gpus=1).model.loss == "in-place"
    fused = from_megatron(BASE + "--cross-entropy-loss-fusion", gpus=1)
    assert fused.model.loss == "fused"
    keys = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
            "vocab_size": 1024, "cross_entropy_loss_fusion": True}
    assert from_megatron(keys, gpus=1).model.loss == "fused"
    assert not any("cross_entropy" in x for x in from_megatron(keys, gpus=1).ignored)
    # Transformer Engine's kernel: priced as the native fused loss, and said
    te = from_megatron(BASE + "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te",
                       gpus=1)
    assert te.model.loss == "fused"
    assert any(x.startswith("--cross-entropy-fusion-impl te: priced as Megatron's native")
               for x in te.ignored)
    for loss in ("in-place", "fused"):
        model = dataclasses.replace(fused.model, loss=loss)
        flags = to_megatron(fused.config, model)
        assert ("--cross-entropy-loss-fusion" in flags) == (loss == "fused")
        assert from_megatron(flags, gpus=1).model.loss == loss
    steps = [simulate(sched, transformer_costs(dataclasses.replace(fused.model, loss=loss),
                                               sched, seq=512)).makespan
             for loss in ("in-place", "fused") for sched in [build_schedule("1f1b", 1, 2)]]
    assert steps[1] < steps[0]


def test_a_config_json_model_takes_the_launch_kernels():
    """The shape from config.json, the kernels (dropout, FlashAttention, fused SwiGLU) from the
    launch: explain with --model and a script prices the script's kernels."""
    from fastpp.model import MODELS, transformer_costs

    launch = from_megatron(BASE + "--swiglu --no-bias-swiglu-fusion --attention-backend "
                           "unfused --hidden-dropout 0.1", gpus=1)
    on = launch.on("llama3-8b")
    assert (on.layers, on.hidden, on.kv_heads) == (32, 4096, 8)
    assert (on.dropout, on.flash_attention, on.fused_swiglu) == (True, False, False)
    assert (MODELS["llama3-8b"].dropout, MODELS["llama3-8b"].flash_attention,
            MODELS["llama3-8b"].fused_swiglu) == (False, True, True)
    with pytest.raises(ScheduleError, match="model must be a fastpp.model.Transformer or a "
                                            "preset name"):
        launch.on(3)
    # eager attention keeps the scores, dropout its masks, the separate SwiGLU 8F
    ours = transformer_costs(on, config=launch.config).act
    assert np.all(ours > transformer_costs("llama3-8b", config=launch.config).act)


def test_virtual_stages_three_ways_and_layouts():
    pp = BASE.replace("--num-layers 4", "--num-layers 8") + "--pipeline-model-parallel-size 2 "
    for flag in ("--num-layers-per-virtual-pipeline-stage 2",
                 "--num-virtual-stages-per-pipeline-rank 2",
                 "--virtual-pipeline-model-parallel-size 2",
                 "--pipeline-model-parallel-layout Ett|tt|tt|ttL"):
        config = from_megatron(pp + flag, gpus=2).config
        assert (config.m, config.schedule) == (2, "interleaved-1f1b"), flag
    # the embedding and the loss each in a layer's place (Megatron's split of L + 2 layers)
    ends = from_megatron(BASE.replace("--num-layers 4", "--num-layers 6") + "--pipeline-model-"
                         "parallel-size 2 --account-for-embedding-in-pipeline-split "
                         "--account-for-loss-in-pipeline-split", gpus=2)
    assert parse_layout(ends.config.layout).layers == (3, 3) and not any(
        "account" in flag for flag in ends.ignored)
    one = from_megatron(BASE.replace("--num-layers 4", "--num-layers 7") + "--pipeline-model-"
                        "parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                        "--account-for-embedding-in-pipeline-split", gpus=2).config
    assert (one.m, parse_layout(one.layout).layers) == (2, (1, 2, 2, 2))
    # the loss's place is the last virtual stage of the last device: stage p m - 1
    loss = from_megatron(BASE.replace("--num-layers 4", "--num-layers 7") + "--pipeline-model-"
                         "parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                         "--account-for-loss-in-pipeline-split", gpus=2).config
    assert parse_layout(loss.layout).layers == (2, 2, 2, 1)
    uneven = from_megatron(pp + "--decoder-first-pipeline-num-layers 3", gpus=2).config
    assert (uneven.m, uneven.first_layers) == (1, 3)
    chunks = from_megatron(pp + "--num-virtual-stages-per-pipeline-rank 2 "
                                "--decoder-first-pipeline-num-layers 2", gpus=2).config
    # device 0 (stages 0 and 2): 2 layers over its 2 chunks; device 1 the other 6
    assert parse_layout(chunks.layout).layers == (1, 3, 1, 3)
    # at most one of the three (Megatron asserts it), and a config's virtual size must be what
    # the layout or the layers per virtual stage give (it had been dropped without a word)
    for flags, message in (
            ("--pipeline-model-parallel-layout Ett|tt|tt|ttL --num-virtual-stages-per-pipeline-"
             "rank 4", "layout and --num-virtual-stages-per-pipeline-rank contradict"),
            ("--pipeline-model-parallel-layout Ett|tt|tt|ttL --num-layers-per-virtual-pipeline-"
             "stage 2", "layout and --num-layers-per-virtual-pipeline-stage contradict"),
            ("--pipeline-model-parallel-layout Ett|tt|tt|ttL --virtual-pipeline-model-parallel-"
             "size 4", "size 4 and --pipeline-model-parallel-layout .which gives 2"),
            ("--num-layers-per-virtual-pipeline-stage 2 --virtual-pipeline-model-parallel-size 4",
             "size 4 and --num-layers-per-virtual-pipeline-stage .which gives 2")):
        with pytest.raises(ScheduleError, match=message):
            from_megatron(pp + flags, gpus=2)
    assert from_megatron(pp + "--num-layers-per-virtual-pipeline-stage 2 --virtual-pipeline-"
                         "model-parallel-size 2", gpus=2).config.m == 2


def test_mla_and_moe_patterns():
    model, _ = from_megatron(BASE + "--multi-latent-attention --kv-lora-rank 64 "
                             "--qk-head-dim 32 --qk-pos-emb-head-dim 16 --v-head-dim 32 "
                             "--num-experts 8 --moe-ffn-hidden-size 128 "
                             "--moe-shared-expert-intermediate-size 256 "
                             "--moe-layer-freq ([0]*1+[1]*3) --mtp-num-layers 1", gpus=1)
    assert (model.kv_rank, model.q_rank, model.rope_dim, model.head_dim) == (64, 0, 16, 32)
    assert (model.dense_layers, model.shared_experts, model.mtp_depth) == (1, 2, 1)
    # Megatron's integer k: experts on the layers i % k == 0, the others dense where they
    # are (until 6 December 2026 the dense ones were placed first)
    alternate = from_megatron(BASE + "--num-experts 8 --moe-layer-freq 2", gpus=1).model
    assert alternate.dense_layers == (1, 3)
    assert from_megatron(to_megatron(RunConfig(seq=512, global_batch=1), alternate),
                         gpus=1).model == alternate
    with pytest.raises(ScheduleError, match=r"--moe-layer-freq must give the last layer "
                                            r"experts with --mtp-num-layers"):
        from_megatron(BASE + "--num-experts 8 --moe-layer-freq 2 --mtp-num-layers 1", gpus=1)


def test_bad_input():
    with pytest.raises(ScheduleError,
                       match=r"--num-layers must be an integer in 1..2\*\*31-1 .got 'four'"):
        from_megatron(BASE + "--num-layers four", gpus=1)
    with pytest.raises(ScheduleError, match="--bf16 and --fp16 contradict"):
        from_megatron(BASE + "--bf16 --fp16", gpus=1)
    with pytest.raises(ScheduleError, match="--num-layers-per-virtual-pipeline-stage and "
                                            "--num-virtual-stages-per-pipeline-rank"):
        from_megatron(BASE + "--num-layers-per-virtual-pipeline-stage 1 "
                      "--num-virtual-stages-per-pipeline-rank 2", gpus=1)
    with pytest.raises(ScheduleError, match="--recompute-method needs --recompute-granularity"):
        from_megatron(BASE + "--recompute-method block", gpus=1)
    with pytest.raises(ScheduleError, match="variable 'TP'"):
        from_megatron("torchrun pretrain_gpt.py " + BASE + "--tensor-model-parallel-size $TP",
                      gpus=1)
    with pytest.raises(ScheduleError, match=r"--pipeline-model-parallel-size must divide the "
                                            r"8 GPUs \(got 1 x 1 x 3 = 3\)"):
        from_megatron(BASE.replace("--num-layers 4", "--num-layers 6")
                      + "--pipeline-model-parallel-size 3", gpus=8)
    # layouts Megatron refuses at start-up (arguments.py, TransformerConfig) were priced
    with pytest.raises(ScheduleError, match=r"--num-layers 4 must be a multiple of "
                                            r"--pipeline-model-parallel-size 3 \(Megatron's"):
        from_megatron(BASE + "--pipeline-model-parallel-size 3", gpus=3)
    with pytest.raises(ScheduleError, match=r"--num-layers 4 \+ 1 \(--account-for-embedding-in"
                                            r"-pipeline-split\) must be a multiple of "
                                            r"--pipeline-model-parallel-size 2 times 2 virtual"):
        from_megatron(BASE + "--pipeline-model-parallel-size 2 --account-for-embedding-in-"
                      "pipeline-split --num-virtual-stages-per-pipeline-rank 2", gpus=2)
    with pytest.raises(ScheduleError, match=r"virtual pipeline stages \(m=2\) need "
                                            r"--pipeline-model-parallel-size > 1, as Megatron "
                                            r"asserts \(got 1\)"):
        from_megatron(BASE + "--num-virtual-stages-per-pipeline-rank 2", gpus=1)
    with pytest.raises(ScheduleError, match="--decoder-first-pipeline-num-layers and "
                                            "--account-for-loss-in-pipeline-split contradict"):
        from_megatron(BASE + "--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-"
                      "layers 1 --account-for-loss-in-pipeline-split", gpus=2)
    with pytest.raises(ScheduleError, match="--seq-length must be given"):
        from_megatron(BASE.replace("--seq-length 512", ""), gpus=1)
    with pytest.raises(ScheduleError, match="GPU count must be given"):
        from_megatron(BASE)
    with pytest.raises(ScheduleError, match="--vocab-size must be given"):
        from_megatron(BASE.replace("--vocab-size 1000", ""), gpus=1)
    with pytest.raises(ScheduleError, match="--moe-layer-freq must be"):
        from_megatron(BASE + "--num-experts 2 --moe-layer-freq __import__('os')", gpus=1)
    with pytest.raises(ScheduleError, match="args must be"):
        from_megatron(42)


@pytest.mark.parametrize("key, value, match", [
    ("micro_batch_size", np.True_, r"--micro-batch-size must be an integer in 1..2\*\*31-1"),
    ("attention_dropout", np.True_, r"--attention-dropout must be a number in \[0, 1\]"),
])
def test_a_dicts_numpy_bool_is_no_number(key, value, match):
    """Python's True was refused where a count or a rate is meant, NumPy's taken as 1."""
    args = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
            "vocab_size": 1000, "micro_batch_size": 2, "global_batch_size": 16}
    with pytest.raises(ScheduleError, match=match):
        from_megatron(args | {key: value}, gpus=8)


def test_flag_table_defaults_have_their_types():
    for dest, (kind, default) in FLAGS.items():
        assert default is None or isinstance(default, kind), dest


def random_configs(seed, count):
    """Valid (model, RunConfig) pairs Megatron can run: 1F1B or interleaved 1F1B."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        t, p, cp = (int(rng.choice(x)) for x in ([1, 2, 4], [1, 2, 4], [1, 2]))
        m = int(rng.choice([1, 2])) if p > 1 else 1
        moe, swiglu = bool(rng.integers(2)), bool(rng.integers(2))
        model = Transformer(int(8 * p * m), 512, 8, kv_heads=int(rng.choice([2, 8])),
                            ffn=int(rng.choice([1024, 1536])), vocab=4096,
                            swiglu=swiglu, fused_swiglu=not swiglu or bool(rng.integers(2)),
                            tied_embeddings=bool(rng.integers(2)),
                            experts=8 if moe else 0, top_k=2 if moe else 0,
                            expert_ffn=256 if moe else None,
                            dense_layers=int(rng.integers(2)) if moe else 0,
                            dropout=bool(rng.integers(2)), name="megatron")
        if rng.integers(2):  # a sliding window on some or all of the layers
            model = dataclasses.replace(model, window=int(rng.choice([128, 4096])),
                                        window_layers=int(rng.integers(1, model.layers + 1)))
        d = int(rng.choice([1, 2, 4]))
        microbatch = int(rng.choice([1, 2]))
        recompute = str(rng.choice(["none", "selective", "full"]))
        method = str(rng.choice(["uniform", "block"]))
        # (Megatron's MoE layer trains t > 1 with sequence parallelism alone)
        sequence_parallel = (bool(rng.integers(2)) or moe) and t > 1
        config = RunConfig(
            seq=1024, global_batch=microbatch * d * int(rng.choice([4, 8])), t=t, cp=cp, p=p,
            d=d, ep=int(rng.choice([1, 2])) if moe and t * cp * d % 2 == 0 else 1, etp=1, m=m,
            schedule="interleaved-1f1b" if m > 1 else "1f1b", microbatch=microbatch,
            recompute=recompute,
            recompute_method=method if recompute == "full" else None,
            recompute_layers=int(rng.integers(1, 4)) if recompute == "full" else None,
            sequence_parallel=sequence_parallel, zero=int(rng.choice([0, 1, 2, 3])),
            gradient_overlap=bool(rng.integers(2)),
            tp_overlap=bool(rng.integers(2)) and t > 1 and sequence_parallel,
            # Megatron overlaps only an interleaved pipeline's hand-offs, and blocks them only
            # on more than two ranks
            blocking_handoffs=(bool(rng.integers(2)) and p > 2) or m == 1,
            precision=str(rng.choice(["bf16", "fp8"])),
            first_layers=int(rng.integers(1, 4)) if m == 1 and p > 1 and rng.integers(2)
            else None,
            cp_comm=str(rng.choice(["ring", "all-gather"])),
            dispatcher=str(rng.choice(["alltoall", "allgather", "flex"])) if moe
            else "alltoall",
            reduce_bytes=float(rng.choice([2.0, 4.0])))
        # ZeRO in groups (--num-distributed-optimizer-instances): each divides d cp and the
        # experts' replicas
        groups = [r for r in (2, 4) if (d * cp) % r == 0 and (t * cp * d // config.ep) % r == 0]
        if config.zero >= 1 and groups and rng.integers(2):
            config = dataclasses.replace(config, replicate=int(rng.choice(groups)))
        yield model, config


@pytest.mark.parametrize("seed", range(4))
def test_round_trip(seed):
    """from_megatron(to_megatron(c)) == c, the model too (written as flags beside it)."""
    for model, config in random_configs(seed, 50):
        flags = to_megatron(config, model)
        back = from_megatron(flags, gpus=config.gpus)
        if "--pipeline-model-parallel-layout" in flags:  # end counts with an uneven rest
            config = dataclasses.replace(config, layout=str(config.chunk_layout(model)),
                                         first_layers=None, last_layers=None)
        assert back.config == config, flags
        assert back.model == model, flags
        assert back.ignored == ()


def test_round_trip_pads_a_vocabulary_as_megatron_runs_it():
    """A vocabulary ``t`` does not divide comes back padded to a multiple of ``t``: Megatron
    pads it so even with --make-vocab-size-divisible-by 1."""
    model = MODELS["gpt3-175b"]
    assert model.vocab == 50257
    for t, padded in ((1, 50257), (2, 50258), (8, 50264)):
        config = RunConfig(seq=2048, global_batch=64, t=t, p=8, d=1, precision="bf16")
        back = from_megatron(to_megatron(config, model), gpus=config.gpus)
        assert back.model == dataclasses.replace(model, vocab=padded, name=back.model.name)
        assert back.config == config


def test_context_parallel_types_not_modelled_are_named():
    """--cp-comm-type a2a (Ulysses) and a2a+p2p are priced as the all-gather and the ring,
    and say so in ``ignored``; p2p and allgather are modelled."""
    cp = BASE + "--context-parallel-size 2 "
    for kind, priced, note in (("a2a", "all-gather", "Ulysses"), ("a2a+p2p", "ring", "ring"),
                               ("p2p", "ring", None), ("allgather", "all-gather", None)):
        got = from_megatron(cp + f"--cp-comm-type {kind}", gpus=2)
        assert got.config.cp_comm == priced
        named = [x for x in got.ignored if x.startswith("--cp-comm-type")]
        assert len(named) == (note is not None) and all(note in x for x in named), got.ignored
    assert not any("cp-comm" in x for x in from_megatron(BASE + "--cp-comm-type a2a",
                                                          gpus=1).ignored)  # no cp: moot


def test_dispatcher_and_recompute_modules_reach_the_price():
    """--moe-token-dispatcher-type (absent: Megatron's allgather) and --recompute-modules
    are read into the RunConfig and priced, not carried and dropped; the modules only with
    selective recomputation, as Megatron reads them."""
    text = script("mixtral_8x7b.sh")
    model, config = from_megatron(text)
    assert config.dispatcher == "alltoall"
    assert from_megatron(text.replace("--moe-token-dispatcher-type alltoall", "")
                         ).config.dispatcher == "allgather"
    assert from_megatron(text.replace("dispatcher-type alltoall", "dispatcher-type alltoall_seq")
                         ).config.dispatcher == "alltoall"  # Megatron-Core 0.10-0.12's
    with pytest.raises(ScheduleError, match=r"--moe-token-dispatcher-type must be one of "
                                            r"\['alltoall', 'allgather', 'flex'\] \(got "
                                            r"'deepep'\)"):
        from_megatron(text.replace("dispatcher-type alltoall", "dispatcher-type deepep"))

    def costs(c, **keywords):
        schedule = c.build_schedule()
        got = (transformer_costs(model, None, "H100-80GB", config=c) if not keywords else
               transformer_costs(model, schedule, "H100-80GB", **keywords))
        return np.concatenate([got.f, got.b, got.act])

    attention = dataclasses.replace(config, recompute="selective", recompute_method=None,
                                    recompute_layers=None, recompute_modules=("core_attn",))
    more = dataclasses.replace(attention, recompute_modules=("core_attn", "moe_act"))
    gather = dataclasses.replace(config, dispatcher="allgather")
    def keywords(c):
        """transformer_costs's keywords for ``c``: its fields that price, by their keyword
        names (tp, dp), the modules where Megatron reads them, the layers as a layout."""
        carried = {"global_batch", "p", "m", "schedule", "recompute_method",
                   "recompute_layers", "gradient_overlap", "first_layers", "last_layers",
                   "reduce_bytes"}
        fields = {{"t": "tp", "d": "dp"}.get(k, k): v for k, v in dataclasses.asdict(c).items()
                  if k not in carried}
        return {**fields, "layout": c.chunk_layout(model),
                "recompute_modules": c.priced_modules}

    for c in (attention, more, gather):  # the one object prices as its keywords do
        np.testing.assert_array_equal(costs(c), costs(c, **keywords(c)))
    assert keywords(more)["recompute_modules"] == ("core_attn", "moe_act")
    assert keywords(gather)["dispatcher"] == "allgather"
    assert not np.array_equal(costs(more), costs(attention))
    assert not np.array_equal(costs(gather), costs(config))
    # Megatron reads the modules with selective recomputation only
    full = dataclasses.replace(more, recompute="full")
    np.testing.assert_array_equal(costs(full), costs(dataclasses.replace(
        full, recompute_modules=None)))
    rows = plan(model, **more.plan_keywords())
    assert len(rows) == 1 and rows["step_time"].iloc[0] == pytest.approx(
        plan(model, **{**attention.plan_keywords(), "recompute_modules": ("core_attn",
                                                                          "moe_act")}
             )["step_time"].iloc[0], rel=1e-12)


def test_to_megatron_refuses_what_megatron_cannot_run():
    with pytest.raises(ScheduleError, match="Megatron-LM runs 1f1b"):
        to_megatron(RunConfig(seq=512, global_batch=8, p=2, m=2, schedule="zbv"))
    with pytest.raises(ScheduleError, match="blocking_handoffs must be True at m = 1"):
        to_megatron(RunConfig(seq=512, global_batch=8, p=2, blocking_handoffs=False))
    # experts at t > 1 without sequence parallelism: flags from_megatron refuses back, as
    # Megatron-Core's MoE layer does (a dense model, or t = 1, is written)
    moe = RunConfig(seq=512, global_batch=8, t=2, d=4, ep=8, sequence_parallel=False)
    with pytest.raises(ScheduleError, match=r"sequence_parallel must be True for a model with "
                                            r"experts at t > 1.*\(got sequence_parallel="
                                            r"False, t=2\)"):
        to_megatron(moe, MODELS["mixtral-8x7b"])
    to_megatron(dataclasses.replace(moe, ep=1), MODELS["llama3-8b"])
    to_megatron(dataclasses.replace(moe, t=1, d=8), MODELS["mixtral-8x7b"])


def test_uneven_splits_are_written_as_their_layout():
    """Megatron splits the layers evenly or refuses to start, so a RunConfig whose layers do
    not divide over its stages came back from its own flags as an error: they now carry
    fastpp's split as a layout, and come back as it."""
    model = MODELS["llama3-8b"]
    for config in (RunConfig(seq=4096, global_batch=16, p=3, d=1, precision="bf16"),
                   RunConfig(seq=4096, global_batch=16, p=2, m=3, d=1, precision="bf16",
                             schedule="interleaved-1f1b", blocking_handoffs=False)):
        flags = to_megatron(config, model)
        layout = flags[flags.index("--pipeline-model-parallel-layout") + 1]
        assert parse_layout(layout).layers == tuple(
            chunk_layers(model.layers, config.p * config.m))
        back = from_megatron(flags, gpus=config.gpus)
        assert back.config == dataclasses.replace(config, layout=layout)
    # so with end counts that leave the other ranks an uneven rest (29 layers on 3 ranks),
    # which Megatron also refuses to read
    ends = RunConfig(seq=4096, global_batch=16, p=4, d=1, first_layers=3, precision="bf16")
    flags = to_megatron(ends, model)
    assert "--decoder-first-pipeline-num-layers" not in flags
    layout = flags[flags.index("--pipeline-model-parallel-layout") + 1]
    assert parse_layout(layout).layers == (3, 10, 10, 9)
    assert from_megatron(flags, gpus=4).config == dataclasses.replace(
        ends, layout=layout, first_layers=None)
    with pytest.raises(ScheduleError, match="must leave the other 3 devices the rest of "
                                            "layers=32 evenly"):
        from_megatron(BASE.replace("--num-layers 4", "--num-layers 32") + "--pipeline-model-"
                      "parallel-size 4 --decoder-first-pipeline-num-layers 3", gpus=4)
    with pytest.raises(ScheduleError, match="must leave the other 0 devices"):
        from_megatron(BASE.replace("--num-layers 4", "--num-layers 32") + "--pipeline-model-"
                      "parallel-size 2 --decoder-first-pipeline-num-layers 15 "
                      "--decoder-last-pipeline-num-layers 15", gpus=2)


def test_hand_offs_as_megatron_runs_them():
    """Megatron has overlapped an interleaved pipeline's hand-offs by default since October
    2023 (only ``--no-overlap-p2p-communication`` exists now), and forces a plain pipeline's
    to block: fastpp read every script as blocking, and wrote a flag Megatron refuses."""
    base = BASE.replace("--num-layers 4", "--num-layers 8") + \
        "--pipeline-model-parallel-size 4 "
    plain = from_megatron(base, gpus=4).config
    interleaved = from_megatron(base + "--num-virtual-stages-per-pipeline-rank 2", gpus=4)
    told = from_megatron(base + "--num-virtual-stages-per-pipeline-rank 2 "
                         "--no-overlap-p2p-communication", gpus=4)
    assert (plain.blocking_handoffs, interleaved.config.blocking_handoffs,
            told.config.blocking_handoffs) == (True, False, True)
    assert "--no-overlap-p2p-communication" in to_megatron(told.config)
    assert not any("overlap-p2p" in f for f in to_megatron(interleaved.config) +
                   to_megatron(plain))
    # Megatron-Core's field (overlap_p2p_comm) in a dict: false blocks
    shape = {"num_layers": 8, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
             "vocab_size": 1000, "pipeline_model_parallel_size": 4,
             "virtual_pipeline_model_parallel_size": 2}
    assert from_megatron({**shape, "overlap_p2p_comm": False}, gpus=4).config.blocking_handoffs
    assert not from_megatron(shape, gpus=4).config.blocking_handoffs


@pytest.mark.parametrize("p, extra, read, written", [
    (2, "--no-overlap-p2p-communication", "more than 2 pipeline ranks with "
                                          "--no-overlap-p2p-communication",
     "more than 2 pipeline ranks with blocking_handoffs=True"),
    (1, "", "need --pipeline-model-parallel-size > 1", "more than 1 pipeline ranks"),
])
def test_interleaved_pipelines_megatron_refuses(p, extra, read, written):
    """Megatron's validate_args asserts an interleaved pipeline more than one rank, and more
    than two where the hand-offs block: such scripts had been priced; neither is written, and
    explain lists no such neighbour."""
    script = (BASE.replace("--num-layers 4", "--num-layers 8") +
              f"--pipeline-model-parallel-size {p} --num-virtual-stages-per-pipeline-rank 2 "
              + extra)
    with pytest.raises(ScheduleError, match=read):
        from_megatron(script, gpus=p)
    blocking = bool(extra)
    with pytest.raises(ScheduleError, match=written):
        to_megatron(RunConfig(seq=512, global_batch=8, p=p, m=2, schedule="interleaved-1f1b",
                              blocking_handoffs=blocking))


def test_explain_neighbours_hand_off_as_megatron_would():
    """An interleaved script at Megatron's default (overlapped hand-offs) crashed explain: its
    1F1B neighbours took the run's overlap, which to_megatron refuses at m = 1. A plain
    script's interleaved neighbours were priced blocking and told to add
    --no-overlap-p2p-communication."""
    from fastpp.model.explain import explain

    script = (BASE.replace("--num-layers 4", "--num-layers 8") +
              "--pipeline-model-parallel-size 2 --global-batch-size 16 ")
    for extra in ("--num-virtual-stages-per-pipeline-rank 2", ""):
        model, config = from_megatron(script + extra, gpus=8)
        found = explain(model, config, "H100-80GB", neighbours=30, workers=1)
        assert found.neighbours, extra
        for row in found.neighbours:
            assert "overlap-p2p" not in row["changes"], (extra, row["changes"])


def test_explain_neighbours_count_the_changes_written_and_fit_where_the_run_does_not():
    """Three faults of explain's suggestions (a new user's trial):
    - "fewest changes first" counted the data-parallel degree that follows a pipeline's, so
      the one flag --pipeline-model-parallel-size came after two-flag rows;
    - a run that does not fit was told "no faster configuration that fits nearby", and never
      shown a layout that fits;
    - rows without a pipeline came once per schedule's name, one run five times."""
    from fastpp.model import from_hf
    from fastpp.model.explain import explain

    script = ("--num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
              "--group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 --swiglu "
              "--untie-embeddings-and-output-weights --attention-dropout 0.0 "
              "--hidden-dropout 0.0 --use-flash-attn --seq-length 8192 --vocab-size 128256 "
              "--bf16 --micro-batch-size 1 --global-batch-size 512 --use-distributed-optimizer "
              "--recompute-granularity selective --tensor-model-parallel-size 4 "
              "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 10 "
              "--sequence-parallel")
    model, config = from_megatron(script, gpus=64)
    found = explain(model, config, "H100-80GB", neighbours=8, workers=1)
    assert not found.row["fits"]  # 102.7 GB of 80
    assert found.neighbours and all(n["fits"] for n in found.neighbours)
    assert "fits, where this run does not (fewest changes first)" in found.table()
    changed = [n["changed"] for n in found.neighbours]
    assert changed == sorted(changed) and changed[0] == 1
    assert all(n["changed"] == n["changes"].count("--") for n in found.neighbours)
    fits = explain(model, config.replace(t=8, d=2), "H100-80GB", neighbours=8, workers=1)
    assert fits.row["fits"] and fits.neighbours
    assert all(n["step_time"] < fits.row["step_time"] for n in fits.neighbours)
    # a config.json's run (ZB-V: no Megatron flags): every schedule is a neighbour
    qwen = from_hf(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    run = RunConfig.for_gpus(8, seq=4096, global_batch=64, t=1, p=2, schedule="zbv", m=2,
                             microbatch=1, recompute="none")
    alone = [n for n in explain(qwen, run, "H100-80GB", neighbours=30, workers=1).neighbours
             if n["p"] == 1]
    assert alone
    # none repeats another: alike runs without a pipeline (plan.alike_key: the same time and
    # bytes) are one neighbour, schedules that hold other bytes are not
    keys = [(n["t"], n["d"], n["m"], n["microbatch"], n["recompute"], n["zero"],
             round(n["step_time"], 4), f'{n["peak_memory"]:.4g}') for n in alone]
    assert len(keys) == len(set(keys)), keys


def test_model_arguments_as_their_frameworks_write_them():
    """Each was misread or refused:
    - ``--quick-geglu`` (gpt-oss) read as an ungated MLP (Megatron sets gated_linear_unit);
    - a dict's ``num_query_groups`` without ``group_query_attention`` (TransformerConfig has
      no such field) read as full multi-head attention;
    - a null (``${VPP}`` unset, NeMo's ``kv_channels: null``) refused instead of defaulted;
    - Megatron-Bridge's ``train`` and ``ddp`` sections not read;
    - NeMo's ``activation: fast-swiglu`` read as ungated, its recompute method and layer
      count (0) refused though its granularity is null;
    - Megatron-LM's ``MODEL_ARGS`` YAML keys as flags (``--num-layers``) all ignored;
    - ``--padded-vocab-size`` padded again."""
    geglu = from_megatron(BASE + "--quick-geglu", gpus=1).model
    assert geglu.swiglu and geglu.ffn == 1024  # gated; the 4h default is --swiglu's alone
    shape = {"num_layers": 2, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
             "vocab_size": 1000}
    bridge = {"model": {**shape, "num_query_groups": 2, "virtual_pipeline_model_parallel_size":
                        None, "kv_channels": None},
              "train": {"micro_batch_size": 2, "global_batch_size": 64},
              # (the sharding strategy is Megatron FSDP's: its default sits in every ddp)
              "ddp": {"use_distributed_optimizer": True,
                      "data_parallel_sharding_strategy": "no_shard"}}
    model, config = from_megatron(bridge, gpus=4)
    assert model.kv_heads == 2 and model.head_dim == 32
    assert (config.microbatch, config.global_batch, config.zero) == (2, 64, 1)
    nemo = {"model": {**shape, "activation": "fast-swiglu", "activations_checkpoint_method":
                      "block", "activations_checkpoint_num_layers": 0,
                      "activations_checkpoint_granularity": None}}
    imported = from_megatron(nemo, gpus=1)
    assert imported.model.swiglu and imported.config.recompute == "none"
    assert {"activations_checkpoint_method", "activations_checkpoint_num_layers"} <= set(
        imported.ignored)
    assert not from_megatron({**shape, "activation": "gelu"}, gpus=1).model.swiglu
    dashed = {"--" + k.replace("_", "-"): v for k, v in shape.items()}
    assert from_megatron(dashed, gpus=1).model == from_megatron(shape, gpus=1).model
    # keys written as flags are read as Megatron-LM's command line reads them: no GQA without
    # --group-query-attention, a recompute method without granularity refused
    assert from_megatron({**dashed, "--num-query-groups": 2}, gpus=1).model.kv_heads == 8
    with pytest.raises(ScheduleError, match="--recompute-method needs --recompute-granularity"):
        from_megatron({**dashed, "--recompute-method": "uniform"}, gpus=1)
    with pytest.raises(ScheduleError, match="num_layers and --num-layers contradict"):
        from_megatron({**shape, "--num-layers": 3}, gpus=1)
    with pytest.raises(ScheduleError,
                       match="micro_batch_size and train.micro_batch_size contradict"):
        from_megatron({**shape, "micro_batch_size": 1, "train": {"micro_batch_size": 2}},
                      gpus=1)
    assert from_megatron(BASE + "--padded-vocab-size 1001 --tensor-model-parallel-size 2",
                         gpus=2).model.vocab == 1001


def test_explain_prices_table1_as_validate_does():
    """Each Table 1 script through explain gives the TFLOP/s per GPU (the paper's count,
    ``96 B s L h^2 (1 + s/6h + V/16Lh)``, V = 51,200) that ``validate`` prices for its row,
    within half a point: the scripts' vocabularies are Megatron's padding of GPT-2's for t < 8,
    validate's 51,200 for all. ``explain`` prices today's Megatron, so ``validate``'s rows are
    taken at that speed too (``era=1``, not ``megatron_2021``'s 2021 speed). How close both come
    to the paper is validate's figure (test_fidelity.py), not this test's. Today's Megatron
    sends a stage's whole output without sequence parallelism, so validate's rows are priced
    without the 2021 scatter-gather hand-off too."""
    from fastpp.model.explain import explain
    from fastpp.model.validate import _narayanan

    rows = {row: predicted for _, row, _, _, predicted, _
            in _narayanan(HARDWARE["A100-80GB"], era=1.0, scatter_gather=False)}
    assert len(rows) == 10
    for row in pd.read_csv(TABLE1).to_dict("records"):
        model, config = from_megatron(script(f"narayanan_{row['params_b']}b.sh"))
        step = explain(model, config, "A100-80GB", neighbours=0, workers=1).row["step_time"]
        L, h, s, B = model.layers, model.hidden, config.seq, config.global_batch
        flops = 96.0 * B * s * L * h * h * (1 + s / (6 * h) + 51200 / (16 * L * h))
        got = flops / step / config.gpus / 1e12
        assert got == pytest.approx(rows[f"{row['params_b']}B"], rel=0.005), row["params_b"]
        print(f"{row['params_b']}B: {got / row['tflops_per_gpu'] - 1:+.1%} against the paper")


def test_explain_cli(capsys, tmp_path):
    from fastpp.__main__ import main

    assert main(["explain", "--megatron-script", str(DATA / "gpt3_175b.sh"), "--hardware",
                 "A100-80GB", "--neighbours", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    for part in ("step time", "TFLOP/s per GPU", "MFU", "bubble", "gradient sync",
                 "optimizer bytes", "activation bytes", "faster and fits", "not modelled"):
        assert part in out, part
    # the step time's error bar: GPT-3 175B on A100 in a node's tensor parallelism is a
    # validated regime (fastpp.model.errorbar)
    bar = error_bar(regime(from_megatron(script("gpt3_175b.sh")).model,
                           HARDWARE["A100-80GB"], 2048, 8))
    assert bar.extrapolated == "" and f"± {bar.expected:.1%} expected error" in out
    # and which way its checks leaned (a negative mean error: predicted fast)
    way = "fast" if bar.bias < 0 else "slow"
    assert f"its checks' mean signed error {bar.bias:+.1%} (predicted {way};" in out
    hf = str(Path(__file__).parent / "data" / "hf" / "qwen3-8b.json")
    assert main(["explain", "--hf", hf, "--gpus", "16", "--tp", "2", "--pp", "2",
                 "--global-batch", "64", "--seq", "4096", "--neighbours", "1", "--report",
                 str(tmp_path / "explain.html"), "--timeline"]) == 0
    out = capsys.readouterr().out
    assert "on 16 x H100-80GB: t=2 cp=1 p=2 d=4" in out and "device  1:" in out
    assert re.search(r"one column per [0-9.e-]+ s, '\.' idle", out)  # (not "time units")
    # what the run is, said whole: the model's size, the sequence and batch it was priced at
    assert "qwen3-8b (8.19B parameters) on" in out and "seq=4096 global_batch=64" in out
    assert "<title>fastpp report</title>" in (tmp_path / "explain.html").read_text()
    assert main(["explain", "--megatron", BASE]) == 2  # no GPU count
    assert "GPU count must be given" in capsys.readouterr().err
    assert main(["plan", "--model", hf, "--gpus", "8", "--seq", "2048", "--global-batch", "16",
                 "--tp", "2", "--pp", "2", "--schedules", "1f1b", "--no-plots", "--out",
                 str(tmp_path)]) == 0  # plan's --model takes a config.json too
    assert set(pd.read_parquet(tmp_path / "plan.parquet")["model"]) == {"qwen3-8b"}


def test_a_misspelt_flag_is_refused(capsys):
    """Megatron refuses a flag it does not have (its parser takes no abbreviation), where
    fastpp reads none: --tensor-parallel-size 4 priced t = 1, said only as one of 17 flags
    not modelled; then on a line of its own, exit 0, the run priced at t = 1 all the same.
    A flag that misspells one fastpp reads is refused, naming the one it misspells, as
    Megatron would not start."""
    from helpers import cli_stderr

    from fastpp.__main__ import main

    for typo, meant in (("--tensor-parallel-size 2", "--tensor-model-parallel-size"),
                        ("--micro-batch 2", "--micro-batch-size")):
        flags = BASE + typo + " --global-batch-size 8"
        with pytest.raises(ScheduleError, match=rf"^{typo.split()[0]} must be a Megatron-LM "
                                                rf"flag \(its parser refuses others, and "
                                                rf"abbreviations\): a misspelt {meant}\?$"):
            from_megatron(flags, 8)
        assert main(["explain", "--megatron", flags, "--gpus", "8", "--neighbours", "0"]) == 2
        assert cli_stderr(capsys).startswith(f"error: {typo.split()[0]} must be a Megatron-LM")
    # a flag fastpp does not read and misspells none is listed as before; so are Megatron's
    # own flags near one read (a review tried all of its arguments.py: these), and
    # --no-bias-gelu-fusion, which fastpp reads for --quick-geglu alone
    assert "--lr" in from_megatron(BASE + " --lr 1e-4", 8).ignored
    real = from_megatron(BASE + "--decoder-seq-length 512 --no-bias-gelu-fusion "
                                "--tp-comm-overlap-cfg x.yaml", 8).ignored
    assert {"--decoder-seq-length", "--no-bias-gelu-fusion", "--tp-comm-overlap-cfg"} <= \
        set(real) and not any("misspelt" in x for x in real)
    # and those a review found refused once misspellings were: options Megatron's config
    # dataclasses add to its parser (August 2026), and the encoder's of mid-2025
    flags = ("--eval-micro-batch-size", "--eval-global-batch-size",
             "--moe-shared-expert-glu-interleave-size", "--encoder-tensor-model-parallel-size",
             "--encoder-pipeline-model-parallel-size")
    real = from_megatron(BASE + " ".join(f"{flag} 1" for flag in flags), 8).ignored
    assert set(flags) <= set(real)


def test_explain_cli_takes_the_vocabulary_from_model(capsys):
    """README's command, a script whose tokenizer is a file and ``--model config.json``,
    exited with "--vocab-size must be given": the shape, vocabulary included, is the
    config's."""
    from fastpp.__main__ import main

    hf = str(Path(__file__).parent / "data" / "hf" / "llama-3.1-8b.json")
    assert main(["explain", "--megatron-script", str(DATA / "llama3_8b.sh"), "--model", hf,
                 "--hardware", "H100-80GB", "--neighbours", "0", "--workers", "1"]) == 0
    assert "llama-3.1-8b (8.03B parameters) on 8 x H100-80GB: t=2 cp=2 p=1 d=2" in \
        capsys.readouterr().out
    # and from a preset's name: that crashed (a name has no vocabulary; its Transformer has)
    assert main(["explain", "--megatron-script", str(DATA / "llama3_8b.sh"), "--model",
                 "llama3-8b", "--hardware", "H100-80GB", "--neighbours", "0", "--workers",
                 "1"]) == 0
    assert "llama3-8b (8.03B parameters) on 8 x H100-80GB: t=2 cp=2 p=1 d=2" in \
        capsys.readouterr().out
    assert main(["explain", "--megatron-script", str(DATA / "llama3_8b.sh"), "--model",
                 "llama3-8bx", "--neighbours", "0"]) == 2
    assert "error: --model must be a preset, one of ['deepseek-v3'" in capsys.readouterr().err


@pytest.mark.parametrize("extra, precision, note", [
    # NeMo's trainer (Lightning's names); its other keys are not read
    ({"trainer": {"precision": "16-mixed", "devices": 8}}, "bf16", "fp16: priced as bf16"),
    ({"trainer": {"precision": 16}}, "bf16", "fp16: priced as bf16"),
    ({"trainer": {"precision": "bf16-mixed"}}, "bf16", None),
    ({"trainer": {"precision": "32-true"}}, "bf16", "fp32 (no --bf16 or --fp16)"),
    ({"trainer": {"precision": "transformer-engine"}}, "fp8", None),
    # Megatron-Bridge's recipes, by name (hyphens as underscores) or by their fields
    ({"mixed_precision": "bf16_mixed"}, "bf16", None),
    ({"mixed_precision": "fp16-with-fp8-delayed-scaling-mixed"}, "fp8", None),
    ({"mixed_precision": "nemotron_h_bf16_with_fp8_current_scaling_mixed"}, "fp8", None),
    ({"mixed_precision": "bf16_with_nvfp4_mixed"}, "bf16", "fp4 priced as bf16"),
    ({"mixed_precision": {"bf16": True, "fp8": "hybrid"}}, "fp8", None),
    # applied over the model's fields, as NeMo's plugin and Bridge's recipe set them; NeMo's
    # trainer leaves fp8 to the model (Transformer Engine's names aside)
    ({"mixed_precision": "bf16_mixed", "fp16": True, "fp8": True}, "bf16", None),
    ({"mixed_precision": "bf16_mixed", "bf16": False}, "bf16", None),
    ({"mixed_precision": "bf16_with_mxfp8_mixed", "fp8": "e4m3"}, "fp8", None),
    ({"trainer": {"precision": "bf16-mixed"}, "model": {"fp8": True}}, "fp8", None),
    ({"trainer": {"precision": "transformer-engine"}, "model": {"fp8": True}}, "fp8", None),
])
def test_named_precisions(extra, precision, note):
    """NeMo's and Bridge's precision names are the flags they stand for: an fp16 run is no
    longer reported as fp32."""
    keys = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
            "vocab_size": 1000}
    read = from_megatron({**keys, **extra}, gpus=1)
    assert read.config.precision == precision
    notes = [x for x in read.ignored if "priced as bf16" in x]
    assert len(notes) == (note is not None) and all(note in x for x in notes)


@pytest.mark.parametrize("extra, message", [
    ({"trainer": {"precision": "half"}}, r"trainer.precision must be one of .* \(got 'half'\)"),
    ({"trainer": {"precision": True}}, r"trainer.precision must be one of .* \(got True\)"),
    ({"mixed_precision": "fp8"}, r"mixed_precision must be a Megatron-Bridge recipe's name"),
])
def test_named_precisions_refused(extra, message):
    keys = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
            "vocab_size": 1000}
    with pytest.raises(ScheduleError, match=message):
        from_megatron({**keys, **extra}, gpus=1)


def test_a_quoted_string_over_several_lines():
    """Megatron-LM's older examples set flags in a string of one flag a line; bash splits it
    when expanded unquoted. Its flags had been dropped silently (t = p = 1)."""
    text = ('GPUS_PER_NODE=8\nNNODES=2\nMODEL_PARALLEL_ARGS="\n'
            '    --tensor-model-parallel-size 4 \\\n    --pipeline-model-parallel-size 2 \\\n'
            '    --sequence-parallel\n"\n'
            'torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py \\\n'
            '    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 \\\n'
            '    --seq-length 4096 --vocab-size 32000 --micro-batch-size 1 \\\n'
            '    --global-batch-size 64 --bf16 $MODEL_PARALLEL_ARGS\n')
    config = from_megatron(text).config
    assert (config.t, config.p, config.d, config.sequence_parallel) == (4, 2, 2, True)
    with pytest.raises(ScheduleError, match="quoted string is not closed"):
        from_megatron(text.replace('"\ntorchrun', "\ntorchrun"))
    # other lines' quotes are theirs: a here-doc's apostrophe, escaped quotes in an echo
    noisy = ("cat <<EOF > notes.txt\nthis run's notes\nEOF\n"
             "echo \"a 5\\\" screen\" can\\'t\n" + text)
    assert from_megatron(noisy).config == config
    # a variable the script never sets expands to nothing, as in bash, and is named
    unset = from_megatron(text.replace("$MODEL_PARALLEL_ARGS", "$PARALLEL"))
    assert (unset.config.t, unset.config.p) == (1, 1)
    assert "$PARALLEL (the script does not set it: flags it holds are read from env=)" in \
        unset.ignored


def test_megatron_fsdp_and_quick_geglu_as_megatron_reads_them():
    """A config reviewer ran Megatron's own parse_args on the same flags: --use-megatron-fsdp
    alone shards optimizer, gradients and parameters (its --data-parallel-sharding-strategy
    defaults to optim_grads_params, arguments.py), which fastpp read as ZeRO-0; and
    --quick-geglu's fusion is --no-bias-gelu-fusion's, off without biases too
    (argument_utils.py), where fastpp kept the fused kernel's 6F bytes."""
    assert from_megatron(BASE + "--use-megatron-fsdp", 8).config.zero == 3
    assert from_megatron(BASE + "--use-megatron-fsdp --data-parallel-sharding-strategy optim",
                         8).config.zero == 1
    for extra, fused in (("", True), ("--no-bias-gelu-fusion", False),
                         ("--disable-bias-linear", False)):
        read = from_megatron(BASE + "--quick-geglu " + extra, 8)
        assert read.model.swiglu and read.model.fused_swiglu == fused, extra
        assert not any(x.startswith("--no-bias-gelu") or x.startswith("--disable-bias")
                       for x in read.ignored)
    # --swiglu keeps its own fusion, biases or none
    assert from_megatron(BASE + "--swiglu --disable-bias-linear", 8).model.fused_swiglu


def test_settings_megatron_refuses_are_priced_and_said(capsys):
    """A config reviewer: Megatron asserts --micro-batch-size and refuses full recomputation
    without a method, which fastpp priced with defaults unsaid; --optimizer muon kept Adam's
    states unsaid; --fp4-format was called a misspelt --fp8-format; a config's
    recompute_modules written as one string of words, as Megatron's launcher splits it, was
    refused. Now each is said on its own line by explain."""
    from fastpp.__main__ import main

    read = from_megatron(BASE + "--recompute-granularity full --optimizer muon "
                                "--fp4-format e2m1", 8)
    assert "--micro-batch-size not given (Megatron asserts it): priced as 1" in read.ignored
    assert any(x.startswith("--recompute-granularity full without --recompute-method")
               for x in read.ignored)
    assert any(x.startswith("--optimizer muon: its states priced as Adam's")
               for x in read.ignored)
    assert "--fp4-format" in read.ignored and not any("misspelt" in x for x in read.ignored)
    assert read.config.microbatch == 1 and read.config.recompute == "full"
    assert from_megatron(BASE + "--micro-batch-size 2 --optimizer adam", 8).ignored == (
        "fp32 (no --bf16 or --fp16): priced as bf16",)
    words = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
             "vocab_size": 1000, "micro_batch_size": 1, "recompute_granularity": "selective",
             "recompute_modules": "[core_attn mlp]"}
    assert from_megatron(words, 8).config.recompute_modules == ("core_attn", "mlp")
    assert main(["explain", "--megatron", BASE + "--recompute-granularity full --lr 1e-4",
                 "--gpus", "8", "--neighbours", "0"]) == 0
    out = capsys.readouterr().out
    assert "\n  priced otherwise: --micro-batch-size not given" in out
    assert "\n  not modelled: --lr" in out


def test_flags_that_change_the_layers_are_refused():
    """Megatron's flags that turn the layers into blocks fastpp does not price (a review
    running Megatron's own FLOP count, 6 December 2026: a plain transformer priced in their
    place was off by -34% to +153%); NeMo's name for the first stage's layers points to
    Megatron's."""
    for flags in ("--hybrid-layer-pattern M*M*", "--attention-output-gate",
                  "--experimental-attention-variant gated_delta_net --linear-attention-freq 4",
                  "--moe-latent-size 256"):
        with pytest.raises(ScheduleError, match=r"changes the model's layers into blocks "
                                                r"fastpp does not price"):
            from_megatron(BASE + flags, gpus=1)
    ignored = from_megatron(BASE + "--num-layers-in-first-pipeline-stage 1", gpus=1).ignored
    assert ("--num-layers-in-first-pipeline-stage (not read: a misspelt "
            "--decoder-first-pipeline-num-layers?)") in ignored


def test_pytorch_context_parallelism_is_written_as_transformer_engines_nearest():
    """Megatron runs Transformer Engine's context parallelism: a run priced with PyTorch's
    (a torchtitan job's ``cp_comm``) is written with the rotation's nearest, the all-gather's
    or the ring's, and read back as it."""
    model = MODELS["llama3-8b"]
    for torch_cp, flag, back in (("torch-allgather", "allgather", "all-gather"),
                                 ("torch-alltoall", "p2p", "ring")):
        config = RunConfig(seq=8192, global_batch=8, t=2, cp=2, d=2, cp_comm=torch_cp,
                           framework="torchtitan")
        flags = to_megatron(config, model)
        assert flags[flags.index("--cp-comm-type") + 1] == flag
        assert from_megatron(flags, gpus=config.gpus)[1].cp_comm == back


# an MoE run as the MoE ModelZoo's DeepSeek-V3 H100 script launches it with A2A_OVERLAP=1
# (its sbatch_benchmarking.sh adds --delay-wgrad-compute --overlap-moe-expert-parallel-comm)
EP_OVERLAP = ("--num-layers 16 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 "
              "--vocab-size 32000 --micro-batch-size 1 --global-batch-size 256 --bf16 --swiglu "
              "--num-experts 64 --moe-ffn-hidden-size 1024 --moe-router-topk 8 "
              "--moe-token-dispatcher-type alltoall --expert-model-parallel-size 8 "
              "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 "
              "--delay-wgrad-compute --overlap-moe-expert-parallel-comm")


def test_the_ep_overlap_flag_runs_combined_1f1b():
    """--overlap-moe-expert-parallel-comm (Megatron-Bridge's moe_a2a_overlap) is Megatron's
    combined 1F1B with the EP overlap priced; it had been listed as not modelled and the run
    priced without it (a review: the ModelZoo's DeepSeek-V3 H100 run 21% slower)."""
    read = from_megatron(EP_OVERLAP.split(), gpus=16)
    assert (read.config.schedule, read.config.m, read.config.overlap) == ("combined-1f1b", 2,
                                                                          True)
    assert not any("overlap-moe" in x for x in read.ignored)
    without = from_megatron(EP_OVERLAP.replace(" --overlap-moe-expert-parallel-comm", "")
                            .split(), gpus=16)
    assert (without.config.schedule, without.config.overlap) == ("interleaved-1f1b", False)
    paired, unpaired = (plan(x.model, hardware="H100-80GB", config=x.config,
                             workers=1).iloc[0]["step_time"] for x in (read, without))
    assert paired < unpaired
    # Megatron-Bridge's key, and the way back
    words = EP_OVERLAP.split()
    flags = {w: True for w in words if w.startswith("--")}
    flags.update({k: v for k, v in zip(words, words[1:], strict=False)
                  if k.startswith("--") and not v.startswith("--")})
    del flags["--overlap-moe-expert-parallel-comm"]
    assert from_megatron({**flags, "moe_a2a_overlap": True}, gpus=16).config == read.config
    back = from_megatron(to_megatron(read.config, read.model), gpus=16)
    assert back.config == read.config and back.model == read.model
    assert "--delay-wgrad-compute" in to_megatron(read.config, read.model) and not back.ignored
    # priced with the weight grads deferred, as Bridge and the ModelZoo run it: said without
    alone = from_megatron(EP_OVERLAP.replace(" --delay-wgrad-compute", "").split(), gpus=16)
    assert alone.config == read.config
    assert any("without --delay-wgrad-compute" in x for x in alone.ignored)
    plain = from_megatron(EP_OVERLAP.replace(" --overlap-moe-expert-parallel-comm", "").split(),
                          gpus=16)
    assert "--delay-wgrad-compute" in plain.ignored  # (nothing it changes is priced)


@pytest.mark.parametrize("change, needs", [
    (("--num-layers-per-virtual-pipeline-stage 4", ""),
     "a virtual pipeline with --pipeline-model-parallel-size > 1"),
    (("alltoall", "allgather"), "--moe-token-dispatcher-type alltoall or flex"),
    (("--expert-model-parallel-size 8", "--expert-model-parallel-size 1"),
     "--expert-model-parallel-size > 1"),
    (("--bf16", "--recompute-granularity full --recompute-method uniform --bf16"),
     "no full recomputation"),
    (("--bf16", "--recompute-granularity selective --recompute-modules moe --bf16"),
     "no moe in --recompute-modules"),
    (("--bf16 ", ""), "--bf16 or --fp16"),
    # (Megatron's EP overlap asserts these too: a review of the session's diff)
    (("--bf16", "--bf16 --moe-shared-expert-intermediate-size 1024 "
                "--moe-shared-expert-overlap"), "no --moe-shared-expert-overlap"),
    (("alltoall", "alltoall_seq"), "--moe-token-dispatcher-type alltoall or flex")])
def test_the_ep_overlap_refused_where_megatron_asserts(change, needs):
    """Megatron-Core's TransformerConfig asserts these of its EP overlap."""
    with pytest.raises(ScheduleError, match=f"--overlap-moe-expert-parallel-comm needs "
                                            f"{re.escape(needs)}, as Megatron asserts"):
        from_megatron(EP_OVERLAP.replace(*change).split(), gpus=16)
