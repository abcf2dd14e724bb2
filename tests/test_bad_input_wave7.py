"""Bad input to the public entry points (the seventh wave, a fuzz of 3 December 2026) ends in
a ``ScheduleError`` naming the parameter or the flag: never another library's error, a hang or
an argument quietly dropped.

One test per defect; each input escaped before its fix (the docstring says how).
"""

import gzip
import json
import shutil
from pathlib import Path

import pytest
from helpers import cli_stderr

import fastpp
from fastpp import ScheduleError, build_schedule
from fastpp.__main__ import main
from fastpp.model import RunConfig, device_bytes, from_megatron, plan

DATA = Path(__file__).parent / "data"
RUN = RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2)


def test_plan_with_a_config_takes_gpus_and_lets_d_follow():
    """``gpus`` beside ``config`` raised a raw TypeError: "plan() got multiple values for
    argument 'gpus'"."""
    (row,) = plan("llama3-8b", 16, config=RUN, workers=1).itertuples()
    assert (row.t, row.p, row.d) == (2, 2, 4)


@pytest.mark.parametrize("keyword", [dict(zero=3), dict(precision="fp8"), dict(seq=2048),
                                     dict(offload_modules=["core_attn"]),
                                     dict(sequence_parallel=False)])
def test_plan_refuses_run_keywords_beside_a_config(keyword):
    """Each was dropped without a word: the row kept the config's value."""
    (name,) = keyword
    with pytest.raises(ScheduleError, match=f"plan: config replaces the run's keywords, so "
                                            f"{name} must be left out"):
        plan("llama3-8b", config=RUN, **keyword)


def test_plan_refuses_a_config_that_is_not_a_run_config():
    """A string raised AttributeError: 'str' object has no attribute 'plan_keywords'."""
    with pytest.raises(fastpp.ScheduleTypeError, match="config must be a "
                                                       "fastpp.model.RunConfig"):
        plan("llama3-8b", config="x")


@pytest.mark.parametrize("keyword, match", [
    (dict(tp=3), r"tp must divide the heads 32 and KV heads 8 \(got tp=3\)"),
    (dict(tp=10**6), r"tp must divide the heads"),
    (dict(dp=10**12), r"dp must be at most 2,147,483,647"),
])
def test_device_bytes_refuses_degrees_the_model_cannot_run(keyword, match):
    """The keyword form divided the bytes by them (tp=3: a third of a head per GPU)."""
    with pytest.raises(ScheduleError, match=match):
        device_bytes("llama3-8b", build_schedule("1f1b", 4, 8), **keyword)


def test_sweep_refuses_an_out_it_cannot_make(tmp_path):
    """A file where a parent folder must be raised NotADirectoryError."""
    (tmp_path / "afile").write_text("")
    # (named since 6 December before anything is made: which parent is the file)
    with pytest.raises(ScheduleError, match="out must be a folder that can be made .*afile' "
                                            "is a file"):
        fastpp.sweep(["1f1b"], p=4, n=8, out=tmp_path / "afile" / "sub", progress=False)


def test_sweep_refuses_arguments_it_would_ignore():
    """``scheduler`` without the Dask executor ran here; ``resume`` without ``out`` ran anew."""
    with pytest.raises(ScheduleError, match="scheduler is Dask's address, for "
                                            "executor='dask' only"):
        fastpp.sweep(["1f1b"], p=4, n=8, scheduler="tcp://x:1", progress=False)
    with pytest.raises(ScheduleError, match="resume=True needs out="):
        fastpp.sweep(["1f1b"], p=4, n=8, resume=True, progress=False)


def test_the_op_block_bound_holds_the_largest_schedule_the_work_bound_allows():
    """optimize(2000, 2000) passed p*n*m <= 4,000,000 and failed seven seconds later on the
    op block's 50,000,000 slots, naming ``ops``: a split schedule at the bound needs 5 fields
    x 3 ops x 4,000,000."""
    from fastpp.generators.registry import MAX_WORK
    from fastpp.ops import OP_FIELDS
    from fastpp.schedule import MAX_OPS

    assert MAX_OPS >= OP_FIELDS * 3 * MAX_WORK


def test_a_trace_label_with_a_number_past_int64(tmp_path):
    """``Forward 99999999999999999999999`` raised OverflowError: Python int too large to
    convert to C long."""
    for rank in (0, 1):
        shutil.copy(DATA / "gpipe" / f"rank{rank}_trace.json.gz", tmp_path)
    path = tmp_path / "rank0_trace.json.gz"
    trace = json.loads(gzip.decompress(path.read_bytes()))
    event = next(e for e in trace["traceEvents"] if e.get("name") == "Forward 0")
    event["name"] = "Forward 99999999999999999999999"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    with pytest.raises(ScheduleError, match=r"stage or microbatch must be below 2\*\*63 \(got "
                                            r"'Forward 99999999999999999999999'\)"):
        fastpp.read_torch_trace(tmp_path)


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


def cli_error(capsys, argv) -> str:
    """``main(argv)``'s message: exit status 2, no traceback."""
    assert main(argv) == 2
    err = cli_stderr(capsys)
    assert err.startswith("error: ") and "Traceback" not in err, err
    return err


def test_explain_refuses_flags_its_source_gives(capsys):
    """``--vocab`` with ``--hf`` was dropped (exit 0), and ``--model`` with ``--hf`` replaced
    the config.json's model without a word."""
    hf = str(DATA / "hf" / "llama-2-7b.json")
    err = cli_error(capsys, ["explain", "--hf", hf, "--gpus", "8", "--vocab", "5"])
    assert "--vocab must be given with --megatron or --megatron-script only" in err
    err = cli_error(capsys, ["explain", "--hf", hf, "--gpus", "8", "--model", "llama3-70b"])
    assert "--model must not be given with --hf: the config.json is the model" in err


def test_transformer_costs_refuses_recompute_modules_without_selective_recomputation():
    """``recompute="none"`` with ``recompute_modules=["mlp"]`` priced the run without them,
    as plan already refuses (test_bad_input_wave6)."""
    from fastpp.model import transformer_costs

    with pytest.raises(ScheduleError, match="recompute_modules must come with selective "
                                            "recomputation, which they act on"):
        transformer_costs("llama3-8b", build_schedule("1f1b", 4, 8), seq=4096,
                          recompute="none", recompute_modules=["mlp"])


def test_plan_with_a_config_and_another_recompute_drops_the_configs_modules():
    """A config with selective recomputation of ``mlp``, planned with ``recompute="none"``,
    was refused over the ``recompute_modules`` the user never passed (they came from the
    config); they act on selective rows alone, so they stay with those."""
    run = RunConfig(seq=4096, global_batch=64, t=2, p=2, d=2, recompute="selective",
                    recompute_modules=("mlp",))
    rows = plan("llama3-8b", config=run, recompute=["none", "selective"], workers=1)
    assert rows["recompute"].tolist() == ["none", "selective"]
    alone = plan("llama3-8b", config=run, workers=1)
    assert rows["step_time"].iloc[1] == alone["step_time"].iloc[0]
    assert plan("llama3-8b", config=run, recompute="none", workers=1)["step_time"].iloc[0] == \
        rows["step_time"].iloc[0]
