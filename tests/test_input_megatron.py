"""Bad input to ``from_megatron``: launch scripts read as the shell reads them (variables,
``if``/``case``, arithmetic, backquotes, torchrun's flags), the values Megatron-LM's argparse and
asserts refuse, NeMo's and Python's config dicts, and ``explain --megatron-script``.

The cases come from the bad-input review waves of December 2026 (docs/design.md tells their
history); each failed on the code before its fix, and its docstring says how.
"""

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import TITAN

import fastpp.model as fm
from fastpp import Costs, ScheduleError, build_schedule, simulate
from fastpp.model import (
    from_hf,
    from_megatron,
    from_torchtitan,
)

SHAPE = ("pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
         "--seq-length 4096 --vocab-size 32000 ")
LONG = "9" * 5000  # past int()'s 4,300 digits
QWEN_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
            "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 5632,
            "moe_intermediate_size": 1408, "num_experts": 60, "num_experts_per_tok": 4,
            "vocab_size": 151936}
MOE_SCRIPT = ("--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 512 "
              "--vocab-size 1000 --bf16 --num-experts 8 --moe-ffn-hidden-size 1024 ")
SHAPE_FLAGS = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
         "--vocab-size 32000 --bf16 --micro-batch-size 1")  # (Megatron asserts it)
RUN = "torchrun --nproc_per_node 8 pretrain_gpt.py " + SHAPE_FLAGS
NEMO = {"trainer": {"devices": 8, "num_nodes": 2, "precision": "bf16-mixed"},
        "model": {"micro_batch_size": 1, "global_batch_size": 128,
                  "tensor_model_parallel_size": 2, "encoder_seq_length": 4096,
                  "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                  "optim": {"name": "distributed_fused_adam", "lr": 2e-4}}}
MEGATRON = ("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024 "
            "--max-position-embeddings 4096 --micro-batch-size 1 --vocab-size 32000 --bf16 "
            "--global-batch-size 64")
DATA = Path(__file__).parent / "data"


def test_a_launch_script_whose_variable_doubles_each_line():
    """Forty lines of ``A="$A$A"`` ran past a minute, the string growing to 2**41 characters."""
    script = "A=xx\n" + '\nA="$A$A"' * 40 + "\npython pretrain_gpt.py --num-layers 2\n"
    with pytest.raises(ScheduleError, match="the script's variable A must expand to at most "
                                            "1,000,000 characters"):
        from_megatron(script)
    # an array of empty words doubling: no characters, 2**40 items
    script = 'A=("")\n' + '\nA+=("${A[@]}")' * 40 + "\npython pretrain_gpt.py\n"
    with pytest.raises(ScheduleError, match="the script's variable A must expand to at most"):
        from_megatron(script)


def test_megatron_counts_int_cannot_read():
    """``"²".isdigit()`` is True and ``int("²")`` a ValueError: in --moe-layer-freq, an array
    index and torchrun's --nproc_per_node; and a $((...)) of 5,000 terms recursed past
    Python's limit."""
    for freq in ("²", LONG):
        with pytest.raises(ScheduleError, match="--moe-layer-freq must be an integer or a "
                                                "list pattern"):
            from_megatron(SHAPE + f"--num-experts 8 --moe-layer-freq {freq}", 8)
    with pytest.raises(ScheduleError, match="GPU count must be given"):
        from_megatron("torchrun --nproc_per_node ² " + SHAPE)
    with pytest.raises(ScheduleError, match="needs the variable 'B'"):
        from_megatron("A=(32)\nB=${A[²]}\n" + SHAPE.replace("32", "$B", 1), 8)
    deep = "L=$((" + "+".join(["1"] * 5000) + "))\n" + SHAPE.replace("32", "$L", 1)
    with pytest.raises(ScheduleError, match="needs the variable 'L'"):
        from_megatron(deep, 8)


def test_megatron_values_its_argparse_refuses():
    """``--fp8-format bogus`` was priced as fp8 and ``--attention-backend bogus`` as
    FlashAttention; a pattern of floats, ``[1.0]*32``, passed as ones and failed later naming
    ``dense_layers``."""
    for flag, choices in (("--fp8-format", "['e4m3', 'hybrid']"),
                          ("--attention-backend", "['flash', 'fused', 'unfused', 'local'")):
        with pytest.raises(ScheduleError, match=rf"{flag} must be one of \{choices[:-1]}"):
            from_megatron(SHAPE + f"{flag} bogus", 8)
    with pytest.raises(ScheduleError, match=r"--moe-layer-freq's pattern must give 0 or 1 for "
                                            r"each of the 32 layers \(got 1.0 for layer 0\)"):
        from_megatron(SHAPE + "--num-experts 8 --moe-layer-freq [1.0]*32", 8)


def test_megatron_config_dicts_as_nemo_and_python_write_them():
    """NeMo's switch ``fp8: false`` was priced as fp8 (the string 'False' is true) before the
    choices and refused after them; an ``AttnBackend`` member from ``vars(args)`` is its name."""
    import enum

    shape = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "seq_length": 512,
             "vocab_size": 1000}
    assert from_megatron({**shape, "fp8": False}, 1).config.precision == "bf16"
    assert from_megatron({**shape, "fp8": True}, 1).config.precision == "fp8"

    class AttnBackend(enum.Enum):  # Megatron's own enum's names
        flash = 1
        unfused = 3

    for member, flash in ((AttnBackend.unfused, False), (AttnBackend.flash, True)):
        model = from_megatron({**shape, "attention_backend": member}, 1).model
        assert model.flash_attention == flash


def test_a_shared_expert_width_that_is_no_whole_number_of_experts_is_refused():
    """``round(shared / width)`` dropped a shared expert narrower than half a routed one (512
    against 1,408 priced as none) and priced 2,048 as 1,408, in both readers."""
    assert from_hf({**QWEN_MOE, "shared_expert_intermediate_size": 5632}).shared_experts == 4
    with pytest.raises(ScheduleError, match="'shared_expert_intermediate_size' must be a "
                                            "multiple of 'moe_intermediate_size' = 1408 "
                                            r"\(got 512\)"):
        from_hf({**QWEN_MOE, "shared_expert_intermediate_size": 512})
    assert from_megatron(MOE_SCRIPT + "--moe-shared-expert-intermediate-size 2048",
                         gpus=1).model.shared_experts == 2
    with pytest.raises(ScheduleError, match="--moe-shared-expert-intermediate-size must be a "
                                            "multiple of --moe-ffn-hidden-size = 1024 "
                                            r"\(got 500\)"):
        from_megatron(MOE_SCRIPT + "--moe-shared-expert-intermediate-size 500", gpus=1)


def test_a_global_batch_the_ranks_cannot_split_is_named_as_written():
    """Refused in ``RunConfig``'s words ("global_batch must be a multiple of microbatch * d"),
    not the launch script's or the job config's."""
    with pytest.raises(ScheduleError, match=r"--global-batch-size must be a multiple of "
                                            r"--micro-batch-size x the 8 data-parallel ranks "
                                            r"= 8 \(got 7\)"):
        from_megatron("--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length "
                      "1024 --vocab-size 1000 --bf16 --global-batch-size 7", gpus=8)
    job = TITAN.format(replicate=1, shard=-1).replace("local_batch_size = 2",
                                                      "local_batch_size = 4\n"
                                                      "global_batch_size = 8")
    with pytest.raises(ScheduleError, match=r"\[training\] global_batch_size must be a multiple "
                                            r"of local_batch_size x the 4 data-parallel ranks "
                                            r"= 16 \(got 8\)"):
        from_torchtitan(job, gpus=4)


def test_a_megatron_script_without_a_tokenizer_says_so():
    from fastpp.model import from_megatron

    with pytest.raises(ScheduleError, match=r"--vocab-size must be given \(the script names "
                                            r"no tokenizer whose vocabulary is known\)"):
        from_megatron("--num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                      "--seq-length 128", gpus=1)


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


@pytest.mark.parametrize("extra, message", [
    ("--tensor-model-parallel-size 2 --tp-comm-overlap",
     r"--tp-comm-overlap needs --sequence-parallel with --tensor-model-parallel-size > 1"),
    ("--tp-comm-overlap --sequence-parallel", r"--tp-comm-overlap needs --sequence-parallel"),
    ("--overlap-param-gather", r"--overlap-param-gather needs --use-distributed-optimizer"),
    ("--use-torch-fsdp2 --use-distributed-optimizer",
     r"--use-torch-fsdp2 cannot run with --use-distributed-optimizer"),
    ("--use-torch-fsdp2", r"--use-torch-fsdp2 cannot run with tied embeddings"),
    ("--use-torch-fsdp2 --untie-embeddings-and-output-weights --pipeline-model-parallel-size 2",
     r"--use-torch-fsdp2 cannot run with --pipeline-model-parallel-size > 1"),
    ("--num-layers 16 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2"
     " --decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 2",
     r"--num-layers-per-virtual-pipeline-stage cannot run with --decoder-first/last"),
    ("--expert-model-parallel-size 2", r"--expert-model-parallel-size 2 needs --num-experts"),
    ("--num-experts 6 --expert-model-parallel-size 4 --moe-router-topk 2",
     r"--num-experts 6 must be a multiple of --expert-model-parallel-size 4"),
    ("--context-parallel-size 2 --seq-length 2050",
     r"--seq-length 2050 must split into 2 x --context-parallel-size = 4 equal chunks"),
    # (was "vocab must be at most 2,147,483,648 (no model is larger) (got vocab=137438953472)")
    (f"--tensor-model-parallel-size {2**30}",
     r"--vocab-size 32000 padded to a multiple of --make-vocab-size-divisible-by x "
     r"--tensor-model-parallel-size = 128 x 1073741824 must be at most 2,147,483,648 .*\(got "
     r"137,438,953,472\)"),
    # (was "t * cp * p = 24 must divide the gpus (got gpus=8, t=3, cp=1, p=8)")
    ("--tensor-model-parallel-size 3 --pipeline-model-parallel-size 8",
     r"^--tensor-model-parallel-size x --context-parallel-size x "
     r"--pipeline-model-parallel-size must divide the 8 GPUs \(got 3 x 1 x 8 = 24\)$"),
    # (were "ffn must be at most 16,777,216 (no model is larger) (got ffn=1073741824)" and
    # "top_k must be from 1 to the experts 8 (got top_k=9)": Transformer's fields)
    (f"--ffn-hidden-size {2**30}", r"^--ffn-hidden-size must be at most 16,777,216 \(no model "
                                   r"is larger\) \(got --ffn-hidden-size=1073741824\)$"),
    ("--num-experts 8 --moe-router-topk 9",
     r"^--moe-router-topk must be from 1 to the experts 8 \(got --moe-router-topk=9\)$"),
    # (was "ep * etp = 16 must divide the GPUs of a pipeline stage t * cp * d = 8 (got ep=8,
    # etp=2)", etp the tensor-parallel size it defaults to)
    ("--num-experts 8 --expert-model-parallel-size 8 --tensor-model-parallel-size 2",
     r"^--expert-model-parallel-size x --tensor-model-parallel-size \(--expert-tensor-parallel-"
     r"size's default\) must divide the 8 GPUs of a pipeline stage \(got 8 x 2\)$"),
    # (was refused only when priced, as RunConfig's "sequence_parallel must be True ...")
    ("--num-experts 8 --tensor-model-parallel-size 2",
     r"^--tensor-model-parallel-size 2 with --num-experts needs --sequence-parallel, as "
     r"Megatron-Core's MoE layer raises"),
])
def test_megatron_runs_megatron_asserts_on_are_refused_naming_the_flags(extra, message):
    """Each was priced (the TP overlap's gain without sequence parallelism, FSDP2 as ZeRO-3
    beside the distributed optimizer), or refused later under fastpp's field names."""
    from fastpp.model import from_megatron

    with pytest.raises(ScheduleError, match=message):
        from_megatron(f"{MEGATRON} {extra}", 8)


@pytest.mark.parametrize("given, vocab, said", [
    ("--tokenizer-type GPT2BPETokenizer", None,
     "the GPT2BPETokenizer tokenizer's vocabulary 50257"),
    ("", 32000, "vocab=32000"),
])
def test_a_padded_vocabulary_past_its_bound_names_where_it_came_from(given, vocab, said):
    """6fd75e1 named ``--vocab-size`` for a vocabulary the script took from its tokenizer or
    from ``from_megatron(..., vocab=)``: '--vocab-size 50257 padded to ...' for a script with
    no --vocab-size."""
    from fastpp.model import from_megatron

    script = MEGATRON.replace("--vocab-size 32000 ", "") + f" {given} "
    with pytest.raises(ScheduleError, match=rf"^{re.escape(said)} padded to a multiple of "):
        from_megatron(f"{script} --tensor-model-parallel-size {2**30}", 8, vocab=vocab)


@pytest.mark.parametrize("tail, shown", [('--foo "bar', '"bar'), ("--data-path 'x y", "'x y"),
                                         ('--tokenizer-type "GPT2BPETokenizer',
                                          '"GPT2BPETokenizer'),
                                         ("--data-path `ls /data", "`ls /data")])
def test_a_command_whose_quote_is_not_closed(tail, shown):
    """``--foo "bar`` was read as ``--foo bar`` (the lone quote dropped), where bash and shlex
    refuse it. A string spanning lines, a comment's or a here-document's quote are bash's."""
    with pytest.raises(ScheduleError, match=rf"^the script's quoted string is not closed: "
                                            rf"{re.escape(repr(shown))}$"):
        from_megatron(f"python pretrain_gpt.py {MEGATRON} {tail}", 8)
    for script in (f"cat <<'EOF' # don't\nit's\n  EOF\npython pretrain_gpt.py {MEGATRON}",
                   f'CMD="\ncd x; # y\npython pretrain_gpt.py {MEGATRON}"\nbash -c "$CMD"',
                   f"python pretrain_gpt.py {MEGATRON} --foo \\\"b # isn't"):
        from_megatron(script, 8)


def test_an_ansi_c_string_closes_where_bash_closes_it():
    """``$'it\\'s'`` is one string in bash (ANSI-C quoting takes ``\\'`` as a quote inside
    it), but the open-quote scan (01cedb2) ended it at the escaped quote and refused the
    script: 'the script's quoted string is not closed'. An escaped ``$`` starts no such
    string: ``\\$'a\\'b'`` leaves a quote open, as bash says."""
    from fastpp.model import from_megatron

    script = f"MSG=$'it\\'s'\necho $MSG\npython pretrain_gpt.py {MEGATRON}"
    assert from_megatron(script, 8).config.seq == 1024
    with pytest.raises(ScheduleError, match="quoted string is not closed"):
        from_megatron(f"echo \\$'a\\'b'\npython pretrain_gpt.py {MEGATRON}", 8)


@pytest.mark.parametrize("script", ["TP=2;# it's two\n{cmd} --tensor-model-parallel-size $TP",
                                    "cd /x&&# don't\n{cmd} --tensor-model-parallel-size 2",
                                    "{cmd} --tensor-model-parallel-size 2;# it's t"])
def test_a_comment_after_a_metacharacter_is_a_comment(script):
    """bash starts a comment at a ``#`` after ``;``, ``&``, ``|``, ``(``, ``)``, ``<`` or
    ``>`` as after a blank (``echo hi;# it's`` prints hi), but the open-quote scan (01cedb2)
    and the comment stripper took only a blank, so the comment's apostrophe refused the
    script: 'the script's quoted string is not closed'."""
    from fastpp.model import from_megatron

    launch = from_megatron(script.format(cmd=f"python pretrain_gpt.py {MEGATRON}"), 8)
    assert launch.config.t == 2


@pytest.mark.parametrize("shift", ["$((1<<3))", "$(( 1 << 3 ))", "$((N<<1))"])
def test_an_arithmetic_shift_is_no_here_document(shift):
    """``<<`` inside ``$((...))`` is a shift: the open-quote scan (01cedb2) read it as a
    here-document ending at a line ``3`` the script does not hold and skipped the rest, so
    ``--foo "bar`` after it was read as ``--foo bar`` where bash refuses the script."""
    from fastpp.model import from_megatron

    script = f"N={shift}\npython pretrain_gpt.py {MEGATRON}"
    assert from_megatron(script, 8).config.t == 1
    with pytest.raises(ScheduleError, match="quoted string is not closed"):
        from_megatron(f'{script} --foo "bar\n', 8)


@pytest.mark.parametrize("start, end", [("<<'END-OF'", "END-OF"), ("<<\\EOF", "EOF"),
                                        ("<<EOF.txt", "EOF.txt")])
def test_a_here_document_ends_at_its_whole_end_word(start, end):
    """A here-document's end word is a whole word (``END-OF``, ``EOF.txt``; ``<<\\EOF`` is
    ``<<'EOF'``), but the open-quote scan (01cedb2) took its letters alone: ``<<'END-OF'`` or
    ``<<\\EOF`` was no here-document, its body's apostrophe refused a script bash runs, and
    ``<<END-OF`` ended at a line ``END`` none held, skipping the rest of the script, so a
    later ``--foo "bar`` was read as ``--foo bar``."""
    from fastpp.model import from_megatron

    script = f"cat {start}\nit's\n{end}\npython pretrain_gpt.py {MEGATRON}"
    assert from_megatron(script, 8).config.t == 1
    with pytest.raises(ScheduleError, match="quoted string is not closed"):
        from_megatron(f'{script} --foo "bar\n', 8)


def test_megatron_scripts_arithmetic_and_backquotes():
    """``$((N/(T*P)))`` stopped at its first ``))`` and named a variable the script sets; a
    backquoted command in a launcher flag was read as words, the GPU count the default's."""
    from fastpp.model import from_megatron

    script = (f"WORLD_SIZE=16; TP=2; PP=2; MBS=1\nDP=$((WORLD_SIZE/(TP*PP)))\nN=$(( (2*(3+1)) / 2"
              f" ))\ntorchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py {MEGATRON} "
              f"--tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP "
              f"--global-batch-size $((MBS*DP*16)) --num-layers $N\n")
    run = from_megatron(script, None)
    assert (run.config.gpus, run.config.d, run.config.global_batch, run.model.layers) == \
        (16, 4, 64, 4)
    with pytest.raises(ScheduleError, match=r"the GPU count must be given: torchrun's --nnodes"
                                            r" needs the variable '`scontrol"):
        from_megatron("torchrun --nproc_per_node 8 --nnodes `scontrol show hostnames | wc -l` "
                      f"pretrain_gpt.py {MEGATRON}\n", None)


def test_megatron_notes_what_it_prices_otherwise():
    from fastpp.model import from_megatron

    run = from_megatron(f"{MEGATRON} --use-distributed-optimizer --overlap-grad-reduce", 8)
    assert any(x.startswith("--overlap-grad-reduce without --overlap-param-gather")
               for x in run.ignored)
    assert "vocab=50000: the script's --vocab-size 32000 priced" in \
        from_megatron(MEGATRON, 8, vocab=50000).ignored


def test_configs_as_their_frameworks_read_them():
    """NeMo's devices -1 (Lightning's "all") was refused with gpus= given; a key given twice
    in an llm-foundry YAML took its last value, which OmegaConf refuses; Composer's fp32 was
    refused where Megatron's is priced as bf16; a vTrain file's error named RunConfig's
    fields; two sections' contradicting keys were named without their sections."""
    from fastpp.model import from_llm_foundry, from_megatron, from_vtrain

    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
             "seq_length": 1024, "vocab_size": 32000}
    run = from_megatron({"trainer": {"devices": -1, "num_nodes": 2}, "model": shape}, 16)
    assert run.config.gpus == 16
    with pytest.raises(ScheduleError, match=r"ddp.use_distributed_optimizer and "
                                            r"optimizer.use_distributed_optimizer contradict"):
        from_megatron({"model": shape, "ddp": {"use_distributed_optimizer": False},
                       "optimizer": {"use_distributed_optimizer": True}}, 8)
    pytest.importorskip("yaml")
    yaml = ("model:\n  name: mpt_causal_lm\n  d_model: 768\n  n_heads: 12\n  n_layers: 12\n"
            "  max_seq_len: 2048\n  vocab_size: 50368\nmax_seq_len: 2048\n"
            "global_train_batch_size: 256\ndevice_train_microbatch_size: 8\n"
            "precision: fp32\n")
    assert "precision: fp32 priced as bf16 (fastpp prices bf16 and fp8 products)" in \
        from_llm_foundry(yaml, 8).ignored
    with pytest.raises(ScheduleError, match=r"found duplicate key 'n_layers'"):
        from_llm_foundry(yaml.replace("  n_layers: 12\n", "  n_layers: 12\n  n_layers: 24\n"),
                         8)
    vtrain = {"num_layers": 12, "hidden_size": 1024, "num_attention_heads": 16,
              "max_length": 1024, "vocab_size": 50257, "global_batch_size": 60,
              "micro_batch_size": 2, "tensor_parallel_size": 1, "data_parallel_size": 4,
              "pipeline_parallel_size": 1, "num_gpus": 4}
    with pytest.raises(ScheduleError, match=r"\(in the file, global_batch is "
                                            r"'global_batch_size', microbatch is "
                                            r"'micro_batch_size', d is 'data_parallel_size'\)"):
        from_vtrain(vtrain)


def test_second_read_of_the_fixes():
    """A reviewer of this wave's fixes: a YAML merge key was refused as a duplicate; plan
    refused the TP overlap without sequence parallelism where no t > 1 runs; NeMo's and
    Bridge's dicts were held to Megatron-LM's command-line asserts (their overlap callbacks
    turn the TP overlap off instead); the floor ran a GPU slower than an A100 above its own
    peak; an FSDP run got the distributed optimizer's note; a command in backquotes was
    noted as an unset variable; an overlapped pair's row named its overheads only where the
    F one was nonzero."""
    import dataclasses

    from fastpp.model import HARDWARE, MODELS, RunConfig, from_megatron, plan
    from fastpp.model.compute import matmul_efficiency

    pytest.importorskip("yaml")
    from fastpp.model import from_llm_foundry

    yaml = ("base: &b\n  d_model: 768\n  n_heads: 12\nmodel:\n  <<: *b\n  name: mpt_causal_lm\n"
            "  n_layers: 12\n  d_model: 768\n  max_seq_len: 2048\n  vocab_size: 50368\n"
            "max_seq_len: 2048\nglobal_train_batch_size: 256\ndevice_train_microbatch_size: 8\n")
    assert from_llm_foundry(yaml, 8).model.layers == 12
    with pytest.raises(ScheduleError, match="is not YAML"):
        from_llm_foundry(yaml + "? [a, b]\n: 1\n", 8)
    one = RunConfig(seq=4096, global_batch=64, t=1, p=2, d=4, tp_overlap=True,
                    sequence_parallel=False)
    assert np.isfinite(plan("llama3-8b", config=one).iloc[0]["step_time"])
    with pytest.raises(ScheduleError, match=r"tp_overlap needs sequence_parallel where t > 1: "
                                            r".*t up to 2\)"):
        plan("llama3-8b", 8, seq=4096, global_batch=64, tp=[1, 2], tp_overlap=True,
             sequence_parallel=False)
    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16,
             "seq_length": 1024, "vocab_size": 32000}
    run = from_megatron({"model": {**shape, "tensor_model_parallel_size": 2,
                                   "tp_comm_overlap": True}}, 8)
    assert not run.config.tp_overlap and any("tp_comm_overlap without sequence parallelism"
                                             in x for x in run.ignored)
    slow = dataclasses.replace(HARDWARE["H100-80GB"], name="slow", peak_flops=100e12)
    assert matmul_efficiency(slow, 4096, 4096, 4096) < slow.efficiency
    fsdp = from_megatron(f"{MEGATRON} --use-torch-fsdp2 --untie-embeddings-and-output-weights "
                         f"--overlap-grad-reduce", 8)
    assert not any("--overlap-param-gather" in x for x in fsdp.ignored)
    backquoted = from_megatron(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MEGATRON} "
                               f"--seed `date +%s`\n", None)
    assert "`date +%s` (a command, not run here)" in backquoted.ignored
    pair = build_schedule("dualpipev", 2, 4, 2)
    with pytest.raises(ScheduleError, match=r"costs.fb / m \+ the F and B overheads must"):
        simulate(pair, Costs(1, 2, fb=1e300, overhead={"B": 1.0}))
    assert MODELS  # (the presets load with the floor's check)


def test_explain_megatron_with_model_says_nothing_of_the_vocab_it_replaces(capsys):
    from fastpp.__main__ import main

    code = main(["explain", "--megatron", f"{MEGATRON} --tensor-model-parallel-size 2",
                 "--model", "llama3-8b", "--gpus", "8", "--neighbours", "0"])
    out = capsys.readouterr()
    assert code == 0 and "vocab=128256:" not in out.out + out.err


def test_megatron_reads_a_launch_scripts_path():
    """A script's path was read as a command without flags: "--num-layers must be given"."""
    script = DATA / "megatron" / "narayanan_1.7b.sh"
    by_text = fm.from_megatron(script.read_text())
    for given in (str(script), script):
        run = fm.from_megatron(given)
        assert (run.model, run.config) == (by_text.model, by_text.config)
    with pytest.raises(ScheduleError, match=r"args must be a readable launch script "
                                            r"\(/no/such.sh: "):
        fm.from_megatron("/no/such.sh", 8)


# a Megatron-LM MODEL_ARGS YAML as the MoE ModelZoo writes them: flags as keys
YAML_ARGS = {"--num-layers": 48, "--hidden-size": 2048, "--num-attention-heads": 16,
             "--seq-length": 4096, "--vocab-size": 151936, "--micro-batch-size": 1,
             "--global-batch-size": 64, "--bf16": True}


@pytest.mark.parametrize("key, value", [("--attention-output-gate", True),
                                        ("--linear-attention-freq", 4),
                                        ("hybrid_override_pattern", "M-M-M*-")])
def test_a_dict_refuses_blocks_fastpp_does_not_price(key, value):
    """The ModelZoo's Qwen3-Next-80B-A3B.yaml (gated attention outputs, gated-DeltaNet
    layers) and Megatron-Bridge's hybrid patterns: the command line refused them, a dict read
    a plain 48-layer transformer of 79B (a review); a false one is the plain transformer."""
    with pytest.raises(ScheduleError, match=rf"{key} changes the model's layers into blocks "
                                            rf"fastpp does not price .* \(got "
                                            rf"{re.escape(repr(value))}\)"):
        from_megatron({**YAML_ARGS, key: value}, gpus=8)
    read = from_megatron({**YAML_ARGS, "--attention-output-gate": False,
                          "attention_output_gate": False}, gpus=8)
    assert read.model == from_megatron(YAML_ARGS, gpus=8).model


def test_a_dicts_flags_read_as_megatrons_launchers_pass_them():
    """A misspelt flag key was listed as not modelled and the run priced without it
    (``--micro-batch`` left the microbatch at its default), where the command line refuses
    it; a quoted value (the ModelZoo's Kimi-K2.yaml ``--moe-layer-freq: "'([0]*1+[1]*60)'"``,
    unquoted by ``bash -c``) was refused; and ``false`` on a flag taking a value (its
    Qwen3-30B-A3B.yaml's ``--num-layers-per-virtual-pipeline-stage`` without a virtual
    pipeline, which its sbatch drops) was refused (a review)."""
    args = {k: v for k, v in YAML_ARGS.items() if k != "--micro-batch-size"}
    with pytest.raises(ScheduleError, match=r"--micro-batch must be a Megatron-LM flag .* a "
                                            r"misspelt --micro-batch-size\?"):
        from_megatron({**args, "--micro-batch": 4}, gpus=8)
    quoted = from_megatron({**YAML_ARGS, "--num-experts": 8, "--moe-ffn-hidden-size": 768,
                            "--moe-layer-freq": "'([0]*1+[1]*47)'"}, gpus=8)
    assert quoted.model.dense_layers == 1 and quoted.model.experts == 8
    absent = from_megatron({**YAML_ARGS, "--pipeline-model-parallel-size": 2,
                            "--num-layers-per-virtual-pipeline-stage": False}, gpus=8)
    assert (absent.config.schedule, absent.config.m) == ("1f1b", 1)
