"""The sixteenth bad-input wave (5 December 2026, night): a new user's trial of the model
readers. Each case failed on the code before it."""

import pytest

from fastpp import ScheduleError
from fastpp.model import from_megatron

SHAPE = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
         "--vocab-size 32000 --bf16")
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
